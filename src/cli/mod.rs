//! The `pucl` commands, one module each: its arguments (clap) and a thin `run` over the library.
//! A new command is a module here plus one variant in `main.rs`.
pub mod demos;
pub mod eval;
pub mod learn;
pub mod plot;
pub mod query;
pub mod tasks;

use pucl::demos::DemoSet;
use pucl::report::plot::{DEMO_COLOR, Series};
use pucl::task::Task;

/// Each demonstration as a polyline in feature space (for pictures).
pub fn demo_series(task: &Task, set: &DemoSet) -> Series {
    let d = task.feature_dim();
    let pts = set.feature_points(task);
    let mut groups = Vec::new();
    let mut row = 0;
    for demo in &set.demos {
        let len = demo.len(set.state_dim());
        groups.push(
            (row..row + len)
                .map(|r| pts[r * d..(r + 1) * d].to_vec())
                .collect(),
        );
        row += len;
    }
    Series {
        label: format!("demonstrations ({})", set.len()),
        color: DEMO_COLOR,
        groups,
    }
}
