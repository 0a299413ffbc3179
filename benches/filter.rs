//! Safety-filter compute per command (library call, a 3-D and a planar position constraint,
//! [32, 32] network): `cargo bench --bench filter`. Prints the median and spread of the per-call
//! time over batches, and of a constraint query (what the constraint server answers per state).
use clap::Parser;
use pucl::demos::DemoSet;
use pucl::deploy::filter::{FilterConfig, SafetyFilter};
use pucl::deploy::model::ConstraintModel;
use pucl::learn::network::Scratch;
use pucl::learn::{LearnConfig, learn};
use pucl::task::Task;
use rand::{RngExt, SeedableRng};
use std::sync::Arc;
use std::time::Instant;

fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * p).round() as usize]
}

/// One row of the table: `what`, then the median, p10 and p90 of `times`.
fn print_row(what: &str, times: &mut [f64]) {
    let (m, lo, hi) = (
        percentile(times, 0.5),
        percentile(times, 0.1),
        percentile(times, 0.9),
    );
    println!("| {what} | {m:.3} | {lo:.3} | {hi:.3} |");
}

/// No options: an unknown one is an error, not ignored.
#[derive(Parser)]
#[command(
    name = "filter",
    about = "Safety-filter compute per command (library call, 3-D and planar position constraints)"
)]
struct Args {
    /// Passed by `cargo bench`.
    #[arg(long, hide = true)]
    bench: bool,
}

/// A model of `task` learned from `demos` with its settings file (learning seed 1).
fn model_of(task: &str, demos: &str) -> (Task, Arc<ConstraintModel>) {
    let task = Task::load(task).expect("built-in task");
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let demos = DemoSet::load(&root.join("data/demos").join(demos), &task).expect("demos");
    let cfg = LearnConfig::for_task(task.name(), None).expect("settings");
    let learned = learn(&task, &demos, &cfg, 1, &mut |_| true).expect("learning");
    let model = Arc::new(ConstraintModel::from_learned(
        &task, &demos, &cfg, 1, &learned,
    ));
    (task, model)
}

/// Per-call microseconds of `SafetyFilter::output` over `batches` batches of the pose/command
/// pairs.
fn filter_times(
    model: &Arc<ConstraintModel>,
    poses: &[[f64; 3]],
    cmds: &[[f64; 6]],
    batches: usize,
    sink: &mut f64,
) -> Vec<f64> {
    let mut filter = SafetyFilter::new(FilterConfig::default());
    filter.set_model(model.clone()).expect("2-D or 3-D model");
    let per = poses.len();
    let mut times = Vec::with_capacity(batches);
    for b in 0..batches {
        let t0 = Instant::now();
        for i in 0..per {
            let t = (b * per + i) as f64 * 1e-6;
            filter.set_pose(t, poses[i]);
            filter.set_command(t, cmds[i]);
            *sink += filter.output(t).twist[0];
        }
        times.push(t0.elapsed().as_secs_f64() * 1e6 / per as f64);
    }
    times
}

fn main() {
    Args::parse();
    let (_, model) = model_of("reach_obstacle_3d", "reach_obstacle_3d_ds.csv");
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    // Poses around the obstacle (many near the boundary, where the modulation and lookahead work).
    let poses: Vec<[f64; 3]> = (0..4096)
        .map(|_| {
            [
                rng.random_range(0.45..0.65),
                rng.random_range(-0.1..0.1),
                rng.random_range(0.035..0.08),
            ]
        })
        .collect();
    let cmds: Vec<[f64; 6]> = (0..4096)
        .map(|_| {
            [
                rng.random_range(-0.3..0.3),
                rng.random_range(-0.3..0.3),
                rng.random_range(-0.1..0.1),
                0.0,
                0.0,
                0.2,
            ]
        })
        .collect();
    let mut scratch = Scratch::default();
    let feasible = poses
        .iter()
        .filter(|p| model.network.zeta(&p[..], &mut scratch) >= 0.5)
        .count();
    let (batches, per) = (200, poses.len());
    let mut sink = 0.0;
    let mut times = filter_times(&model, &poses, &cmds, batches, &mut sink);
    // In the plane the nearest obstacle's hull is measured along the ray through the pose at
    // every command (no table): the ellipses, poses over their evaluation grid, commands across it.
    let (planar_task, planar) = model_of("point_ellipse_2d", "point_ellipse_2d.csv");
    let span = |axis: &[f64]| axis[0]..axis[axis.len() - 1];
    let planar_poses: Vec<[f64; 3]> = (0..1024)
        .map(|_| {
            [
                rng.random_range(span(&planar_task.grid[0])),
                rng.random_range(span(&planar_task.grid[1])),
                0.0,
            ]
        })
        .collect();
    let planar_cmds: Vec<[f64; 6]> = (0..1024)
        .map(|_| {
            [
                rng.random_range(-0.3..0.3),
                rng.random_range(-0.3..0.3),
                0.0,
                0.0,
                0.0,
                0.0,
            ]
        })
        .collect();
    let planar_batches = 50;
    let mut planar_times = filter_times(
        &planar,
        &planar_poses,
        &planar_cmds,
        planar_batches,
        &mut sink,
    );
    let mut zeta_times = Vec::with_capacity(batches);
    let mut g = [0.0; 3];
    for _ in 0..batches {
        let t0 = Instant::now();
        for p in &poses {
            sink += model.network.zeta_and_grad(p, &mut g, &mut scratch);
        }
        zeta_times.push(t0.elapsed().as_secs_f64() * 1e6 / poses.len() as f64);
    }
    // The constraint server's answer to one state (`pucl query`'s): the distance is most of it. The
    // boundary's samples are made once per model, timed apart.
    let t0 = Instant::now();
    let samples = model.boundary_samples().map_or(0, |s| s.len());
    let sampling = t0.elapsed().as_secs_f64();
    let query_batches = 20;
    let mut query_times = Vec::with_capacity(query_batches);
    for _ in 0..query_batches {
        let t0 = Instant::now();
        for p in &poses {
            sink += model.query(p, &mut scratch).distance;
        }
        query_times.push(t0.elapsed().as_secs_f64() * 1e6 / poses.len() as f64);
    }
    println!(
        "safety filter compute per command, 3-D cylinder model [32, 32]; {batches} batches of {per} commands,"
    );
    println!(
        "poses uniform over the evaluation box ({:.0} % learned-feasible); per-call microseconds",
        100.0 * feasible as f64 / poses.len() as f64
    );
    println!();
    println!("| what | median us | p10 us | p90 us |");
    println!("|---|---|---|---|");
    print_row("SafetyFilter::output (modulation + lookahead)", &mut times);
    print_row(
        &format!(
            "SafetyFilter::output, planar ellipses model, poses over its grid ({planar_batches} \
             batches of {})",
            planar_poses.len()
        ),
        &mut planar_times,
    );
    print_row(
        "zeta and gradient (one network evaluation)",
        &mut zeta_times,
    );
    print_row(
        &format!(
            "ConstraintModel::query: feasible, zeta, gradient, distance, direction \
             ({query_batches} batches)"
        ),
        &mut query_times,
    );
    println!();
    println!(
        "the boundary sampled for the distance once per model: {samples} points in {:.3} s",
        sampling
    );
    std::hint::black_box(sink);
}
