//! RViz markers of a learned constraint: the boundary cells (red cubes) and the reliable infeasible
//! points of the memory buffer (small dark spheres).
use crate::deploy::model::ConstraintModel;
use r2r::geometry_msgs::msg::{Point, Pose, Quaternion, Vector3};
use r2r::std_msgs::msg::ColorRGBA;
use r2r::visualization_msgs::msg::{Marker, MarkerArray};

fn marker(
    frame_id: &str,
    ns: &str,
    kind: i32,
    scale: [f64; 3],
    color: [f32; 4],
    points: Vec<Point>,
) -> Marker {
    Marker {
        header: r2r::std_msgs::msg::Header {
            stamp: super::stamp(),
            frame_id: frame_id.to_string(),
        },
        ns: ns.to_string(),
        id: 0,
        type_: kind,
        action: Marker::ADD as i32,
        pose: Pose {
            orientation: Quaternion {
                w: 1.0,
                ..Default::default()
            },
            ..Default::default()
        },
        scale: Vector3 {
            x: scale[0],
            y: scale[1],
            z: scale[2],
        },
        color: ColorRGBA {
            r: color[0],
            g: color[1],
            b: color[2],
            a: color[3],
        },
        points,
        ..Default::default()
    }
}

fn point(p: &[f64]) -> Point {
    Point {
        x: p[0],
        y: p.get(1).copied().unwrap_or(0.0),
        z: p.get(2).copied().unwrap_or(0.0),
    }
}

/// The markers of a model (position constraints; a velocity constraint clears them).
pub fn boundary(m: &ConstraintModel, frame_id: &str) -> MarkerArray {
    let clear = Marker {
        action: Marker::DELETEALL as i32,
        ..Default::default()
    };
    if m.constrains_command() {
        return MarkerArray {
            markers: vec![clear],
        };
    }
    let (cells, step) = m.boundary_cells(40);
    let s = [
        step[0],
        step.get(1).copied().unwrap_or(step[0]),
        step.get(2).copied().unwrap_or(step[0]),
    ];
    let cubes = marker(
        frame_id,
        "learned_boundary",
        Marker::CUBE_LIST as i32,
        s,
        [0.85, 0.1, 0.1, 0.5],
        cells.iter().map(|c| point(c)).collect(),
    );
    let r = 0.25 * s.iter().copied().fold(f64::INFINITY, f64::min);
    let spheres = marker(
        frame_id,
        "reliable_infeasible",
        Marker::SPHERE_LIST as i32,
        [r; 3],
        [0.3, 0.0, 0.0, 1.0],
        m.memory_buffer.iter().map(|p| point(p)).collect(),
    );
    MarkerArray {
        markers: vec![clear, cubes, spheres],
    }
}
