//! RViz markers of a task's TRUE constraint (simulation only): cylinders, ellipsoids and boxes; a
//! planar task's as flat ones in its plane of the pose (the axes its positions are named after).
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
    if task.constrains_action() {
        return MarkerArray { markers };
    }
    if task.feature_dim() == 2 {
        if let Ok(axes) = task.pose_axes() {
            markers.extend(planar(task, &axes, frame_id));
        }
        return MarkerArray { markers };
    }
    if task.feature_dim() != 3 {
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
        markers.push(marker(frame_id, i, kind, position, scale, orientation));
    }
    MarkerArray { markers }
}

/// One true-constraint marker.
fn marker(
    frame_id: &str,
    id: usize,
    kind: i32,
    position: [f64; 3],
    scale: [f64; 3],
    orientation: Quaternion,
) -> Marker {
    Marker {
        header: r2r::std_msgs::msg::Header {
            stamp: super::stamp(),
            frame_id: frame_id.to_string(),
        },
        ns: "true_constraint".into(),
        id: id as i32,
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
    }
}

/// A planar task's primitives, flat in its plane of the pose (`axes`: the pose axis of each of its
/// two positions): as thick as a fiftieth of their largest extent, so that RViz shows them.
fn planar(task: &Task, axes: &[usize], frame_id: &str) -> Vec<Marker> {
    let normal = 3 - axes[0] - axes[1];
    // Embed a principal direction of the plane (its two components) in the pose's axes.
    let lift = |d: [f64; 2]| -> [f64; 3] {
        let mut v = [0.0; 3];
        v[axes[0]] = d[0];
        v[axes[1]] = d[1];
        v
    };
    let mut out = Vec::new();
    for (i, s) in task.true_constraint.iter().enumerate() {
        // (marker kind, centre, the two principal directions, the two semi-axes)
        let (kind, center, dirs, semi) = match s {
            Shape::Cylinder { center, radius, .. } => (
                Marker::CYLINDER as i32,
                *center,
                [[1.0, 0.0], [0.0, 1.0]],
                [*radius, *radius],
            ),
            Shape::Ellipsoid {
                center,
                axes,
                semi_axes,
                ..
            } if center.len() == 2 => (
                Marker::CYLINDER as i32,
                [center[0], center[1]],
                [[axes[0], axes[2]], [axes[1], axes[3]]],
                [semi_axes[0], semi_axes[1]],
            ),
            Shape::Box {
                center,
                axes,
                half_extents,
            } if center.len() == 2 => (
                Marker::CUBE as i32,
                [center[0], center[1]],
                [[axes[0], axes[2]], [axes[1], axes[3]]],
                [half_extents[0], half_extents[1]],
            ),
            _ => continue,
        };
        // The marker's frame: its x and y the principal directions, its z the plane's normal, turned
        // so that the frame is right-handed.
        let (c0, c1) = (lift(dirs[0]), lift(dirs[1]));
        let mut n = [0.0; 3];
        n[normal] = 1.0;
        let cross = [
            c0[1] * c1[2] - c0[2] * c1[1],
            c0[2] * c1[0] - c0[0] * c1[2],
            c0[0] * c1[1] - c0[1] * c1[0],
        ];
        if cross[normal] < 0.0 {
            n[normal] = -1.0;
        }
        let rows: Vec<f64> = (0..3).flat_map(|r| [c0[r], c1[r], n[r]]).collect();
        let thick = semi[0].max(semi[1]) / 25.0;
        let mut position = [0.0; 3];
        position[axes[0]] = center[0];
        position[axes[1]] = center[1];
        let scale = [2.0 * semi[0], 2.0 * semi[1], thick];
        out.push(marker(
            frame_id,
            i,
            kind,
            position,
            scale,
            quaternion(&rows),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_planar_tasks_ellipses_are_flat_discs_in_its_plane_of_the_pose() {
        let task = Task::load("point_ellipse_2d").unwrap();
        let m = true_constraint(&task, "base_link").markers;
        // DELETEALL, then one per ellipse.
        assert_eq!(m.len(), 3);
        let circle = &m[2];
        assert_eq!(circle.type_, Marker::CYLINDER as i32);
        let p = &circle.pose.position;
        assert_eq!((p.x, p.y, p.z), (0.72, 0.55, 0.0));
        // A circle of radius 0.25 (covariance I / 80, bound 5), thin along z.
        assert!((circle.scale.x - 0.5).abs() < 1e-9 && (circle.scale.y - 0.5).abs() < 1e-9);
        assert!(circle.scale.z < 0.05);
        // The tilted ellipse: its marker's z axis is the pose's z (the plane's normal).
        let q = &m[1].pose.orientation;
        let r = nalgebra::UnitQuaternion::from_quaternion(nalgebra::Quaternion::new(
            q.w, q.x, q.y, q.z,
        ));
        let z = r * nalgebra::Vector3::z();
        assert!((z.z.abs() - 1.0).abs() < 1e-9, "{z:?}");
        let x = r * nalgebra::Vector3::x();
        assert!(
            x.z.abs() < 1e-9 && x.x.abs() < 1.0 - 1e-6,
            "turned in the plane: {x:?}"
        );
    }
}
