//! RViz markers of a task's TRUE constraint (simulation only): cylinders, ellipsoids and boxes.
use crate::task::Task;
use crate::task::shape::Shape;
use r2r::geometry_msgs::msg::{Point, Pose, Quaternion, Vector3};
use r2r::std_msgs::msg::ColorRGBA;
use r2r::visualization_msgs::msg::{Marker, MarkerArray};

fn quaternion(axes: &[f64]) -> Quaternion {
    // Columns of a row-major 3x3 rotation matrix to a unit quaternion.
    let m = nalgebra::Matrix3::from_row_slice(axes);
    let q = nalgebra::UnitQuaternion::from_matrix(&m);
    Quaternion {
        x: q.i,
        y: q.j,
        z: q.k,
        w: q.w,
    }
}

/// One marker per primitive of the task's true constraint over position (none for velocity limits).
pub fn true_constraint(task: &Task, frame_id: &str) -> MarkerArray {
    let mut markers = vec![Marker {
        action: Marker::DELETEALL as i32,
        ..Default::default()
    }];
    if task.constrains_action() || task.feature_dim() != 3 {
        return MarkerArray { markers };
    }
    let (zlo, zhi) = task
        .bounds
        .as_ref()
        .map_or((0.0, 1.0), |(l, h)| (l[2], h[2]));
    for (i, s) in task.true_constraint.iter().enumerate() {
        let (kind, position, scale, orientation) = match s {
            Shape::Cylinder {
                center,
                radius,
                z_range,
            } => {
                let (a, b) = z_range.map_or((zlo, zhi), |[a, b]| (a, b));
                (
                    Marker::CYLINDER as i32,
                    [center[0], center[1], 0.5 * (a + b)],
                    [2.0 * radius, 2.0 * radius, b - a],
                    Quaternion {
                        w: 1.0,
                        ..Default::default()
                    },
                )
            }
            Shape::Ellipsoid {
                center,
                axes,
                semi_axes,
                ..
            } if center.len() == 3 => (
                Marker::SPHERE as i32,
                [center[0], center[1], center[2]],
                [2.0 * semi_axes[0], 2.0 * semi_axes[1], 2.0 * semi_axes[2]],
                quaternion(axes),
            ),
            Shape::Box {
                center,
                axes,
                half_extents,
            } if center.len() == 3 => (
                Marker::CUBE as i32,
                [center[0], center[1], center[2]],
                [
                    2.0 * half_extents[0],
                    2.0 * half_extents[1],
                    2.0 * half_extents[2],
                ],
                quaternion(axes),
            ),
            _ => continue,
        };
        markers.push(Marker {
            header: r2r::std_msgs::msg::Header {
                stamp: super::stamp(),
                frame_id: frame_id.to_string(),
            },
            ns: "true_constraint".into(),
            id: i as i32,
            type_: kind,
            action: Marker::ADD as i32,
            pose: Pose {
                position: Point {
                    x: position[0],
                    y: position[1],
                    z: position[2],
                },
                orientation,
            },
            scale: Vector3 {
                x: scale[0],
                y: scale[1],
                z: scale[2],
            },
            color: ColorRGBA {
                r: 0.2,
                g: 0.2,
                b: 0.2,
                a: 0.6,
            },
            ..Default::default()
        });
    }
    MarkerArray { markers }
}
