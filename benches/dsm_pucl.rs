//! DSM-PUCL benchmark: 10 seeds per task on the reference demonstrations, metrics beside the paper's.
//! Run with `cargo bench --bench dsm_pucl` (optionally `-- --seeds N`). Seeds 100.. are used: the
//! per-task settings in config/learn/ were chosen on seeds 0-3.
use clap::Parser;
use pucl::demos::DemoSet;
use pucl::learn::{LearnConfig, learn};
use pucl::report::evaluate::evaluate_learned;
use pucl::task::Task;
use std::path::Path;
use std::time::Instant;

struct Row {
    task: &'static str,
    demos: &'static str,
    paper: &'static str,
    target: &'static str,
}

const ROWS: &[Row] = &[
    Row {
        task: "reach_obstacle_3d",
        demos: "reach_obstacle_3d_ds.csv",
        paper: "IoU 0.42+-0.01, recall 99.9%, precision 42.1%, unsafe 0.15%, 4.7 min (GPU PC)",
        target: "IoU >= 0.55, recall >= 99%, unsafe <= 0.15%, < 20 s",
    },
    Row {
        task: "point_ellipse_2d",
        demos: "point_ellipse_2d.csv",
        paper: "IoU 0.77, unsafe ~1% (CRL-PUCL)",
        target: "IoU >= 0.80, unsafe <= 1%",
    },
    Row {
        task: "reach_velocity_3d",
        demos: "reach_velocity_3d.csv",
        paper: "IoU 0.87+-0.08, unsafe 3.47% (CRL-PUCL)",
        target: "IoU >= 0.87, unsafe <= 3.5%",
    },
];

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        0.5 * (v[n / 2 - 1] + v[n / 2])
    }
}

fn stat(v: &[f64], scale: f64, digits: usize) -> String {
    let mut s: Vec<f64> = v.iter().map(|x| x * scale).collect();
    let m = median(&mut s);
    format!(
        "{m:.digits$} [{:.digits$}-{:.digits$}]",
        s[0],
        s[s.len() - 1]
    )
}

/// An unknown option, or a malformed `--seeds`, is an error, not ignored.
#[derive(Parser)]
#[command(
    name = "dsm_pucl",
    about = "DSM-PUCL on the built-in tasks' reference demonstrations, beside the paper's numbers"
)]
struct Args {
    /// Learning seeds 100..100+N per task.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    seeds: u64,
    /// Passed by `cargo bench`.
    #[arg(long, hide = true)]
    bench: bool,
}

fn main() {
    let seeds = Args::parse().seeds;
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    println!(
        "DSM-PUCL, {seeds} seeds (100..{}), median [min-max]; unsafe = violating steps of 30 evaluation episodes",
        100 + seeds - 1
    );
    println!();
    println!(
        "| task | IoU | recall | precision | unsafe rate % | violating episodes % | goal reached % | wall time per run s |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let mut notes = Vec::new();
    for row in ROWS {
        let task = Task::load(row.task).expect("built-in task");
        let demos = DemoSet::load(&root.join("data/demos").join(row.demos), &task)
            .expect("reference demonstrations");
        let cfg = LearnConfig::for_task(row.task, None).expect("built-in settings");
        let (mut iou, mut rec, mut prec, mut uns, mut vep, mut goal, mut secs) =
            (vec![], vec![], vec![], vec![], vec![], vec![], vec![]);
        for seed in 100..100 + seeds {
            let t0 = Instant::now();
            let learned = learn(&task, &demos, &cfg, seed, &mut |_| true).expect("learning");
            secs.push(t0.elapsed().as_secs_f64());
            let e = evaluate_learned(&task, &learned, seed).expect("evaluation");
            iou.push(e.iou);
            rec.push(e.recall);
            prec.push(e.precision);
            uns.push(e.unsafe_rate);
            vep.push(e.violating_episodes);
            goal.push(e.goal_reached);
        }
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            row.task,
            stat(&iou, 1.0, 3),
            stat(&rec, 1.0, 3),
            stat(&prec, 1.0, 3),
            stat(&uns, 100.0, 3),
            stat(&vep, 100.0, 1),
            stat(&goal, 100.0, 1),
            stat(&secs, 1.0, 2)
        );
        notes.push(format!(
            "{}: paper {}; target {}",
            row.task, row.paper, row.target
        ));
    }
    println!();
    for n in notes {
        println!("{n}");
    }
}
