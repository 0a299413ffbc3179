//! Learning time against the number of demonstration states (3-D, `reach_obstacle_3d`): expert
//! demonstrations from jittered starts, as many as give about N states, learned with the task's
//! settings. Prints N, the demonstrations, the wall time of `learn` (median of `--repeats`, default
//! 3), the time per demonstration state and IoU.
//!
//! `cargo bench --bench scaling -- [--max N] [--repeats K]` (default max 100000).
use clap::Parser;
use pucl::demos::DemoSet;
use pucl::learn::{LearnConfig, learn};
use pucl::task::Task;
use pucl::task::expert::{ExpertOptions, generate};
use std::time::Instant;

/// An unknown option is an error, not ignored.
#[derive(Parser)]
#[command(
    name = "scaling",
    about = "Learning time against the number of demonstration states (reach_obstacle_3d)"
)]
struct Args {
    /// The largest number of demonstration states (rows from 1000: 1000, 3000, 10000, ...).
    #[arg(long, default_value_t = 100_000)]
    max: usize,
    /// Runs per row; the table shows their median.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..))]
    repeats: u64,
    /// Passed by `cargo bench`.
    #[arg(long, hide = true)]
    bench: bool,
}

fn main() {
    let args = Args::parse();
    let (max, repeats) = (args.max, args.repeats as usize);
    let task = Task::load("reach_obstacle_3d").expect("built-in task");
    let cfg = LearnConfig::for_task(task.name(), None).expect("settings");
    // The steps of one demonstration, to size the sets.
    let one = generate(&task, &ExpertOptions::count(12), &mut |_| {}).expect("expert");
    let per_demo = one.iter().map(|t| t.len()).sum::<usize>() as f64 / one.len() as f64;
    println!(
        "reach_obstacle_3d, its settings (config/learn/reach_obstacle_3d.yaml), learning seed 0; median of {repeats}"
    );
    println!();
    println!("| demonstration states | demonstrations | learn s | us per state | IoU |");
    println!("|---|---|---|---|---|");
    let mut n = 1_000usize;
    while n <= max {
        let count = ((n as f64 / per_demo).round() as usize).max(1);
        let trajs = generate(
            &task,
            &ExpertOptions {
                seed: 1,
                jitter: Some(0.02),
                ..ExpertOptions::count(count)
            },
            &mut |_| {},
        )
        .expect("expert");
        let demos = DemoSet::from_trajectories(&task, &trajs);
        let mut times = Vec::new();
        let mut iou = f64::NAN;
        for _ in 0..repeats {
            let t0 = Instant::now();
            let l = learn(&task, &demos, &cfg, 0, &mut |_| true).expect("learning");
            times.push(t0.elapsed().as_secs_f64());
            iou = l.history.last().map_or(f64::NAN, |h| h.iou);
        }
        times.sort_by(f64::total_cmp);
        let t = times[times.len() / 2];
        let states = demos.total_steps();
        println!(
            "| {states} | {count} | {t:.2} | {:.1} | {iou:.3} |",
            1e6 * t / states as f64
        );
        n = if n.to_string().starts_with('1') {
            n * 3
        } else {
            n * 10 / 3
        };
    }
}
