//! The paper's comparison: PUCL against the baselines GPUCL, MECL and BC with the CRL policy; CRL-PUCL
//! against DSM-PUCL; and the d_r sensitivity sweep (Fig. 4) as a PNG. Prints markdown tables beside
//! the paper's numbers.
//!
//!     cargo bench --bench compare -- [--part methods|policies|sweep|all] [--seeds N]
//!                                    [--tasks point_ellipse_2d,reach_obstacle_3d] [--out DIR]
//!                                    [--iterations N] [--timesteps N] [--jobs N]
//!                                    [--sweep-policy crl|dsm]
//!
//! The blocked half-cheetah needs MuJoCo (bash scripts/setup_mujoco.sh && source .mujoco/env.sh):
//!
//!     cargo bench --features mujoco --bench compare -- --task half_cheetah_blocked
//!
//! (`--task T` is `--tasks T --part methods`.)
//!
//! `-- --help` lists the options; an unknown one is an error.
//!
//! Seeds 100.. (settings were chosen on seeds 0-9). `--iterations` / `--timesteps` shorten the CRL
//! schedule (outer iterations, PPO steps per iteration) when the reference's would take too long;
//! the tables say which schedule ran. Runs go `--jobs` at a time (default 2).
use clap::{Parser, ValueEnum};
use pucl::demos::DemoSet;
use pucl::learn::{LearnConfig, Method, PolicyKind, learn};
use pucl::report::evaluate::{evaluate, evaluate_policy};
use pucl::report::plot::sweep_chart;
use pucl::task::Task;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

/// One measured run.
#[derive(Clone, Debug)]
struct Run {
    iou: f64,
    recall: f64,
    precision: f64,
    unsafe_rate: f64,
    /// Fraction of evaluation episodes that reached the goal (NaN for a task without a goal).
    goal_reached: f64,
    mean_return: f64,
    seconds: f64,
}

#[derive(Clone)]
struct Job {
    task: &'static str,
    demos: &'static str,
    policy: PolicyKind,
    method: Method,
    d_r: Option<f64>,
    seed: u64,
}

struct Opts {
    iterations: Option<usize>,
    timesteps: Option<usize>,
}

/// The reference's demonstrations for each task and policy: on the cylinder, CRL-PUCL learns from
/// the RL expert's 10 demonstrations (they pass 1 cm from the true boundary) and DSM-PUCL from the
/// DS expert's 12 (which keep 1.7-3.9 cm).
fn demos_file(task: &str, policy: PolicyKind) -> &'static str {
    match (task, policy) {
        ("point_ellipse_2d", _) => "point_ellipse_2d.csv",
        ("half_cheetah_blocked", _) => "half_cheetah_blocked.csv",
        (_, PolicyKind::Crl) => "reach_obstacle_3d_rl.csv",
        _ => "reach_obstacle_3d_ds.csv",
    }
}

fn run(job: &Job, o: &Opts) -> Result<Run, String> {
    let task = Task::load(job.task).map_err(|e| e.to_string())?;
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("data/demos")
        .join(job.demos);
    let demos = DemoSet::load(&path, &task).map_err(|e| e.to_string())?;
    let mut cfg = LearnConfig::for_task_policy(job.task, Some(job.policy), None)
        .map_err(|e| e.to_string())?;
    cfg.method = job.method;
    if let Some(d) = job.d_r {
        cfg.identify.d_r = Some(d);
        cfg.identify.percentile = None;
    }
    if job.policy == PolicyKind::Crl {
        if let Some(n) = o.iterations {
            cfg.iterations = n;
        }
        if let Some(n) = o.timesteps {
            cfg.crl.timesteps_per_iteration = n;
        }
    }
    let t0 = Instant::now();
    let l = learn(&task, &demos, &cfg, job.seed, &mut |_| true).map_err(|e| e.to_string())?;
    let seconds = t0.elapsed().as_secs_f64();
    let episodes = task.spec.evaluation.episodes;
    let e = match &l.policy {
        // CRL: the unsafe rate of the trained policy (20 episodes, as the reference evaluates CRL).
        Some(p) => evaluate_policy(&task, &l.net, 0.5, p, &l.starts, 20, job.seed),
        None => evaluate(&task, &l.net, &l.dsm, 0.5, &l.starts, episodes, job.seed),
    }
    .map_err(|e| e.to_string())?;
    Ok(Run {
        iou: e.iou,
        recall: e.recall,
        precision: e.precision,
        unsafe_rate: e.unsafe_rate,
        goal_reached: if !task.spec.goal.is_none() {
            e.goal_reached
        } else {
            f64::NAN
        },
        mean_return: e.mean_return,
        seconds,
    })
}

/// Run the jobs, `jobs` at a time; results in job order.
fn run_all(list: &[Job], o: &Opts, jobs: usize) -> Vec<Result<Run, String>> {
    let next = Mutex::new(0usize);
    let out = Mutex::new(vec![None; list.len()]);
    std::thread::scope(|s| {
        for _ in 0..jobs.max(1) {
            s.spawn(|| {
                loop {
                    let i = {
                        let mut n = next.lock().unwrap();
                        let i = *n;
                        *n += 1;
                        i
                    };
                    let Some(job) = list.get(i) else { break };
                    let r = run(job, o);
                    eprintln!(
                        "  {} {:?} {:?} d_r {:?} seed {}: {}",
                        job.task,
                        job.policy,
                        job.method,
                        job.d_r,
                        job.seed,
                        match &r {
                            Ok(r) => format!(
                                "IoU {:.3} unsafe {:.2} % goal reached {} return {:.1} {:.0} s",
                                r.iou,
                                100.0 * r.unsafe_rate,
                                if r.goal_reached.is_nan() {
                                    "-".to_string()
                                } else {
                                    format!("{:.0} %", 100.0 * r.goal_reached)
                                },
                                r.mean_return,
                                r.seconds
                            ),
                            Err(e) => format!("failed: {e}"),
                        }
                    );
                    out.lock().unwrap()[i] = Some(r);
                }
            });
        }
    });
    out.into_inner()
        .unwrap()
        .into_iter()
        .map(|r| r.expect("every job ran"))
        .collect()
}

fn mean_std(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let m = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / n;
    (m, var.sqrt())
}

fn cell(runs: &[&Run], f: impl Fn(&Run) -> f64, scale: f64, digits: usize) -> String {
    if runs.is_empty() {
        return "failed".into();
    }
    let values: Vec<f64> = runs.iter().map(|r| f(r) * scale).collect();
    // E.g. the goal-reached rate of a task without a goal.
    if values.iter().all(|v| v.is_nan()) {
        return "-".into();
    }
    let (m, s) = mean_std(&values);
    format!("{m:.digits$} +- {s:.digits$}")
}

fn paper(task: &str, method: Method) -> &'static str {
    match (task, method) {
        ("point_ellipse_2d", Method::Pucl) => "0.77 / ~1 %",
        ("point_ellipse_2d", Method::Gpucl) => "0.56 / 10.5 %",
        ("point_ellipse_2d", Method::Mecl) => "0.47 / 11 %",
        ("point_ellipse_2d", Method::Bc) => "0.34 / 16 %",
        ("reach_obstacle_3d", Method::Pucl) => "0.46 +- 0.09 / 0.47 %",
        ("reach_obstacle_3d", Method::Gpucl) => "0.27 / 16 %",
        ("reach_obstacle_3d", Method::Mecl) => "0.15 / 30 %",
        ("reach_obstacle_3d", Method::Bc) => "0.12 / 6 %",
        ("half_cheetah_blocked", Method::Pucl) => "0.89 / 6 %",
        ("half_cheetah_blocked", Method::Gpucl) => "0.65 / 20 %",
        ("half_cheetah_blocked", Method::Mecl) => "0.78 / 9 %",
        ("half_cheetah_blocked", Method::Bc) => "0.62 / 1 %",
        _ => "-",
    }
}

/// Which tables to print.
#[derive(Clone, Copy, ValueEnum)]
enum Part {
    Methods,
    Policies,
    Sweep,
    All,
}

/// The policy of the d_r sweep.
#[derive(Clone, Copy, ValueEnum)]
enum SweepPolicy {
    Crl,
    Dsm,
}

/// An unknown option is an error, not ignored.
#[derive(Parser)]
#[command(
    name = "compare",
    about = "PUCL against the baselines, CRL-PUCL against DSM-PUCL and the d_r sweep, beside the paper's numbers"
)]
struct Args {
    /// Which tables (default: all; methods with --task).
    #[arg(long, value_enum)]
    part: Option<Part>,
    /// Learning seeds 100..100+N.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..))]
    seeds: u64,
    /// Tasks, comma-separated (default point_ellipse_2d,reach_obstacle_3d).
    #[arg(long, value_delimiter = ',')]
    tasks: Option<Vec<String>>,
    /// One task: `--tasks T --part methods`.
    #[arg(long, conflicts_with = "tasks")]
    task: Option<String>,
    /// Where the sweep's PNG and the runs' files go.
    #[arg(long, default_value = "target/compare")]
    out: PathBuf,
    /// Shortens the CRL schedule: outer iterations.
    #[arg(long)]
    iterations: Option<usize>,
    /// Shortens the CRL schedule: PPO steps per iteration.
    #[arg(long)]
    timesteps: Option<usize>,
    /// Runs at a time.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..))]
    jobs: u64,
    /// The policy of the d_r sweep.
    #[arg(long, value_enum, default_value_t = SweepPolicy::Crl)]
    sweep_policy: SweepPolicy,
    /// Passed by `cargo bench`.
    #[arg(long, hide = true)]
    bench: bool,
}

fn main() {
    let args = Args::parse();
    let part = args.part.unwrap_or(if args.task.is_some() {
        Part::Methods
    } else {
        Part::All
    });
    let (seeds, jobs) = (args.seeds, args.jobs as usize);
    let out = args.out;
    // Jobs hold `&'static str` task names; the few given here live for the whole run.
    let tasks: Vec<&'static str> = match (args.tasks, args.task) {
        (Some(list), _) => list.into_iter().map(|s| &*s.leak()).collect(),
        (None, Some(one)) => vec![one.leak()],
        (None, None) => vec!["point_ellipse_2d", "reach_obstacle_3d"],
    };
    let o = Opts {
        iterations: args.iterations,
        timesteps: args.timesteps,
    };
    std::fs::create_dir_all(&out).expect("output directory");
    let seed_list: Vec<u64> = (100..100 + seeds).collect();
    let schedule = match (o.iterations, o.timesteps) {
        (None, None) => "the reference's CRL schedule".to_string(),
        (i, t) => format!(
            "CRL schedule shortened: iterations {}, PPO steps per iteration {}",
            i.map_or("as configured".into(), |v| v.to_string()),
            t.map_or("as configured".into(), |v| v.to_string())
        ),
    };
    println!("# pucl comparison: {seeds} seeds (100..), {schedule}\n");

    if matches!(part, Part::Methods | Part::All) {
        let methods = [Method::Pucl, Method::Gpucl, Method::Mecl, Method::Bc];
        let list: Vec<Job> = tasks
            .iter()
            .flat_map(|&task| {
                methods.iter().flat_map(move |&method| {
                    (100..100 + seeds).map(move |seed| Job {
                        task,
                        demos: demos_file(task, PolicyKind::Crl),
                        policy: PolicyKind::Crl,
                        method,
                        d_r: None,
                        seed,
                    })
                })
            })
            .collect();
        eprintln!("methods: {} runs", list.len());
        let res = run_all(&list, &o, jobs);
        println!("## Methods with the CRL policy (mean +- std over seeds)\n");
        println!(
            "| task | method | IoU | unsafe rate % | goal reached % | mean return | paper IoU / unsafe | failed runs |"
        );
        println!("|---|---|---|---|---|---|---|---|");
        for &task in &tasks {
            for &method in &methods {
                let runs: Vec<&Run> = list
                    .iter()
                    .zip(&res)
                    .filter(|(j, _)| j.task == task && j.method == method)
                    .filter_map(|(_, r)| r.as_ref().ok())
                    .collect();
                println!(
                    "| {task} | {method:?} | {} | {} | {} | {} | {} | {} |",
                    cell(&runs, |r| r.iou, 1.0, 3),
                    cell(&runs, |r| r.unsafe_rate, 100.0, 2),
                    cell(&runs, |r| r.goal_reached, 100.0, 0),
                    cell(&runs, |r| r.mean_return, 1.0, 1),
                    paper(task, method),
                    seeds as usize - runs.len()
                );
            }
        }
        println!();
    }

    if matches!(part, Part::Policies | Part::All) {
        let task = "reach_obstacle_3d";
        let list: Vec<Job> = [PolicyKind::Crl, PolicyKind::Dsm]
            .iter()
            .flat_map(|&policy| {
                seed_list.iter().map(move |&seed| Job {
                    task,
                    demos: demos_file(task, policy),
                    policy,
                    method: Method::Pucl,
                    d_r: None,
                    seed,
                })
            })
            .collect();
        eprintln!("policies: {} runs", list.len());
        let res = run_all(&list, &o, jobs);
        println!("## CRL-PUCL against DSM-PUCL on {task} (mean +- std over seeds)\n");
        println!(
            "| policy | demonstrations | IoU | recall % | precision % | unsafe rate % | goal reached % | training s | paper |"
        );
        println!("|---|---|---|---|---|---|---|---|---|");
        for policy in [PolicyKind::Crl, PolicyKind::Dsm] {
            let runs: Vec<&Run> = list
                .iter()
                .zip(&res)
                .filter(|(j, _)| j.policy == policy)
                .filter_map(|(_, r)| r.as_ref().ok())
                .collect();
            println!(
                "| {policy:?} | {} | {} | {} | {} | {} | {} | {} | {} |",
                demos_file(task, policy),
                cell(&runs, |r| r.iou, 1.0, 3),
                cell(&runs, |r| r.recall, 100.0, 1),
                cell(&runs, |r| r.precision, 100.0, 1),
                cell(&runs, |r| r.unsafe_rate, 100.0, 2),
                cell(&runs, |r| r.goal_reached, 100.0, 0),
                cell(&runs, |r| r.seconds, 1.0, 1),
                match policy {
                    PolicyKind::Crl =>
                        "IoU 0.46 +- 0.09, recall 94.2 %, precision 47.6 %, unsafe 0.47 %, 13.4 min (GPU PC)",
                    PolicyKind::Dsm =>
                        "IoU 0.42 +- 0.01, recall 99.9 %, precision 42.1 %, unsafe 0.15 %, 4.7 min",
                }
            );
        }
        println!();
    }

    if matches!(part, Part::Sweep | Part::All) {
        let task = "point_ellipse_2d";
        let policy = match args.sweep_policy {
            SweepPolicy::Dsm => PolicyKind::Dsm,
            SweepPolicy::Crl => PolicyKind::Crl,
        };
        let values = [0.06, 0.08, 0.10, 0.12, 0.14, 0.16, 0.20];
        let list: Vec<Job> = values
            .iter()
            .flat_map(|&d| {
                seed_list.iter().map(move |&seed| Job {
                    task,
                    demos: demos_file(task, policy),
                    policy,
                    method: Method::Pucl,
                    d_r: Some(d),
                    seed,
                })
            })
            .collect();
        eprintln!("sweep: {} runs", list.len());
        let res = run_all(&list, &o, jobs);
        println!(
            "## d_r sensitivity on {task} ({}-PUCL; the paper's Fig. 4)\n",
            format!("{policy:?}").to_uppercase()
        );
        println!("| d_r | IoU | unsafe rate % | goal reached % |");
        println!("|---|---|---|---|");
        let (mut iou, mut unsafe_rate) = (Vec::new(), Vec::new());
        for &d in &values {
            let runs: Vec<&Run> = list
                .iter()
                .zip(&res)
                .filter(|(j, _)| j.d_r == Some(d))
                .filter_map(|(_, r)| r.as_ref().ok())
                .collect();
            println!(
                "| {d:.2} | {} | {} | {} |",
                cell(&runs, |r| r.iou, 1.0, 3),
                cell(&runs, |r| r.unsafe_rate, 100.0, 2),
                cell(&runs, |r| r.goal_reached, 100.0, 0)
            );
            if !runs.is_empty() {
                iou.push((d, mean_std(&runs.iter().map(|r| r.iou).collect::<Vec<_>>())));
                unsafe_rate.push((
                    d,
                    mean_std(
                        &runs
                            .iter()
                            .map(|r| 100.0 * r.unsafe_rate)
                            .collect::<Vec<_>>(),
                    ),
                ));
            }
        }
        let png = out.join("dr_sweep.png");
        match sweep_chart(
            &png,
            &format!(
                "{task}: {}-PUCL against d_r ({seeds} seeds, mean +- std)",
                format!("{policy:?}").to_uppercase()
            ),
            "d_r",
            &[("IoU", &iou[..]), ("unsafe rate (%)", &unsafe_rate[..])],
        ) {
            Ok(()) => println!("\nwrote {}", png.display()),
            Err(e) => println!("\nthe plot failed: {e}"),
        }
    }
}
