//! Learning on tasks nobody tuned for: a generated suite (`pucl suite`), expert demonstrations, the
//! learn settings a new task file gets (no per-task file), several learning seeds. Prints per class
//! (2-D, 3-D, velocity) the median and the worst task of IoU, recall, unsafe rate and goal reached,
//! the share of episodes the evaluation's guide took round a learned obstacle after a stall, and for
//! velocity tasks what predicting "all infeasible" would score on the same grid; draws the
//! learned against the true constraint of a sample of tasks. For position tasks (2-D and 3-D) also the unsafe and
//! goal-reached rates of the same episodes run as deployed (`pucl eval --filter`: a P-controller
//! through the safety filter), the share of them that ended held back by the learned constraint (as
//! the filter reports it on /diagnostics), and how many models' goals no run through the filter from
//! outside its margin can reach.
//!
//! `cargo bench --bench suite -- [--seed S] [--per-class N] [--learn-seeds K] [--class C] [--png FILE]`
//! (defaults: suite seed 1, 10 tasks per class, learning seeds 0..3, every class (C: 2-D, 3-D or
//! velocity); the picture docs/suite.png for that run with the derived settings, the README's, and
//! out/suite<S>.png for any other). Settings are
//! to be tuned on other suite seeds (e.g. 100..) than the one reported.
//! `cargo bench --bench suite -- --renamed [--learn-seeds K]` learns the built-in tasks under new
//! names from the reference demonstrations instead, so they get derived settings too.
//! `--dr-scale F` multiplies every derived d_r by F (the other derived settings stay as derived), to
//! measure what d_r alone trades: precision against recall and safety (docs/RESULTS.md).
//! `--suffix-starts N` sets `suffix_starts` (proposals from N states along every demonstration).
//! `--bend-prior` turns `bend_prior` on (reliable infeasible states only where a proposal faces a turn
//! of the demonstration it beat).
//! `--both-ways` turns `both_ways` on (a second proposal from every start that went round something,
//! the other way round).
//! `--expansion` turns `identify.expansion` on (the paper's eq. 3: per proposal, its state nearest to
//! R joins R; derived in the plane), `--no-expansion` off.
//! `--no-margin-clear` turns `margin_clear_of_demonstrations` off (on by default: the DSM policy's
//! margin lowered around demonstrated states that keep less than it from the learned boundary).
//! `--oracle-labels precise|informed` is a measurement, not a setting: R is corrected by the task's
//! true constraint (precise: its truly feasible states dropped; informed: and added to D), to see
//! what any labelling of the proposals' states could at best give (docs/RESULTS.md).
//! `-- --help` lists the options; an unknown one is an error.
use clap::Parser;
use pucl::demos::DemoSet;
use pucl::deploy::filter::FilterConfig;
use pucl::deploy::model::ConstraintModel;
use pucl::learn::network::{Mlp, Scratch};
use pucl::learn::{LearnConfig, OracleLabels, learn_with_oracle_labels};
use pucl::report::evaluate::{NOMINAL_SPEED, evaluate_filtered, evaluate_learned, nominal_speed};
use pucl::report::metrics::grid_confusion;
use pucl::report::plot::{Scene, Series};
use pucl::task::Task;
use pucl::task::suite::{SuiteTask, TaskClass, generate};
use std::cell::RefCell;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

/// One task's results, medians over the learning seeds.
struct TaskResult {
    class: TaskClass,
    name: String,
    /// The d_r the task learned with (NaN with percentile selection).
    d_r: f64,
    iou: f64,
    recall: f64,
    unsafe_pct: f64,
    goal_pct: f64,
    /// Episodes that stalled in front of a learned obstacle and were guided round it (`pucl eval`'s
    /// guide, which a deployment through the safety filter does not have).
    guided_pct: f64,
    /// Position tasks: the same episodes through the safety filter (NaN for velocity tasks).
    filter_unsafe_pct: f64,
    filter_goal_pct: f64,
    /// Position tasks: the episodes that ended short of the goal held back by the learned constraint,
    /// as the filter reports it (`pucl eval --filter`'s `held_back`).
    filter_held_pct: f64,
    /// Position tasks: models whose goal no run through the filter from outside its margin can reach
    /// (inside the learned obstacle or within its margin; `pucl eval --filter` warns of it).
    filter_goal_blocked: usize,
    /// Learning runs that ended with nothing learned (no model: their unsafe and goal-reached rates
    /// are not defined and are left out of the medians).
    failed: usize,
    /// IoU of predicting every grid point infeasible.
    all_infeasible_iou: f64,
    /// Learning time: the median and the slowest run over the seeds.
    seconds: f64,
    slowest_seconds: f64,
}

/// `cargo bench --bench suite -- [OPTIONS]`: an unknown option is an error, not ignored (a typo
/// would otherwise run the whole suite with the defaults and redraw docs/suite.png).
#[derive(Parser)]
#[command(
    name = "suite",
    about = "Learn a generated task suite (or the renamed built-ins) with derived settings and print per-class medians and worst tasks"
)]
struct Args {
    /// Suite seed (tune on other seeds, e.g. 100.., than the one reported).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Generated tasks per class.
    #[arg(long, default_value_t = 10)]
    per_class: usize,
    /// Learning seeds 0..K per task.
    #[arg(long, default_value_t = 3)]
    learn_seeds: u64,
    /// Only this class.
    #[arg(long, value_parser = ["2-D", "3-D", "velocity"])]
    class: Option<String>,
    /// Multiplies every derived d_r (the other derived settings stay as derived).
    #[arg(long, default_value_t = 1.0, value_parser = positive)]
    dr_scale: f64,
    /// Sets `suffix_starts` (proposals from N states along every demonstration).
    #[arg(long)]
    suffix_starts: Option<usize>,
    /// Turns `bend_prior` on.
    #[arg(long)]
    bend_prior: bool,
    /// Turns `both_ways` on.
    #[arg(long)]
    both_ways: bool,
    /// Turns `identify.expansion` on (eq. 3; derived in the plane).
    #[arg(long, conflicts_with = "no_expansion")]
    expansion: bool,
    /// Turns `identify.expansion` off.
    #[arg(long)]
    no_expansion: bool,
    /// Turns `margin_clear_of_demonstrations` off (on by default).
    #[arg(long)]
    no_margin_clear: bool,
    /// A measurement of the ceiling of labelling, not a setting: R corrected by the true constraint
    /// (precise: truly feasible states dropped from R; informed: and added to D).
    #[arg(long, value_parser = ["precise", "informed"])]
    oracle_labels: Option<String>,
    /// The built-in tasks under new names, from the reference demonstrations, instead of the suite.
    #[arg(long)]
    renamed: bool,
    /// The picture of a sample of tasks (default docs/suite.png for the README's run: seed 1, every
    /// class, the other defaults; out/suite<S>.png for any other run).
    #[arg(long)]
    png: Option<PathBuf>,
    /// Passed by `cargo bench`.
    #[arg(long, hide = true)]
    bench: bool,
}

fn positive(v: &str) -> Result<f64, String> {
    match v.parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 => Ok(x),
        _ => Err(format!("must be a positive number, got '{v}'")),
    }
}

/// A task's IoU, recall, unsafe %, goal reached %, guided %, the filter's three rates and its
/// blocked goals, as table cells.
fn metric_cells(r: &TaskResult) -> String {
    let filtered = r.filter_unsafe_pct.is_finite();
    format!(
        "{:.3} | {:.3} | {:.2} | {:.1} | {} | {} | {} | {} | {}",
        r.iou,
        r.recall,
        r.unsafe_pct,
        r.goal_pct,
        or_dash(r.guided_pct, 1),
        or_dash(r.filter_unsafe_pct, 2),
        or_dash(r.filter_goal_pct, 1),
        or_dash(r.filter_held_pct, 1),
        if filtered {
            r.filter_goal_blocked.to_string()
        } else {
            "-".into()
        }
    )
}

/// A number with `digits` decimals, "-" when it is not defined (NaN).
fn or_dash(v: f64, digits: usize) -> String {
    if v.is_finite() {
        format!("{v:.digits$}")
    } else {
        "-".into()
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        0.5 * (v[n / 2 - 1] + v[n / 2])
    }
}

/// What the bench changes in the settings a new task file gets.
#[derive(Clone, Copy)]
struct Overrides {
    /// Multiplies the derived d_r.
    dr_scale: f64,
    /// Replaces `suffix_starts`.
    suffix_starts: Option<usize>,
    /// Turns `bend_prior` on.
    bend_prior: bool,
    /// Turns `both_ways` on.
    both_ways: bool,
    /// Sets `identify.expansion`.
    expansion: Option<bool>,
    /// Turns `margin_clear_of_demonstrations` off.
    no_margin_clear: bool,
    /// R corrected by the true constraint (a measurement).
    oracle: OracleLabels,
}

impl Overrides {
    /// How the table's settings differ from the derived ones.
    fn describe(&self) -> String {
        let mut s = String::new();
        if self.dr_scale != 1.0 {
            s += &format!(" with d_r times {}", self.dr_scale);
        }
        if let Some(n) = self.suffix_starts {
            s += &format!(" with suffix_starts {n}");
        }
        if self.bend_prior {
            s += " with bend_prior";
        }
        if self.both_ways {
            s += " with both_ways";
        }
        match self.expansion {
            Some(true) => s += " with expansion",
            Some(false) => s += " without expansion",
            None => {}
        }
        if self.no_margin_clear {
            s += " without margin_clear_of_demonstrations";
        }
        match self.oracle {
            OracleLabels::Off => {}
            OracleLabels::Precise => s += " with oracle labels (R without truly feasible states)",
            OracleLabels::Informed => {
                s += " with oracle labels (R's truly feasible states moved to D)"
            }
        }
        s
    }
}

/// The settings a new task file gets, with the bench's overrides.
fn derived_settings(task: &Task, demos: &DemoSet, o: Overrides) -> LearnConfig {
    let (mut cfg, _) =
        LearnConfig::for_task_data(task, demos, None, None).expect("settings for a new task");
    cfg.identify.d_r = cfg.identify.d_r.map(|d| d * o.dr_scale);
    if let Some(n) = o.suffix_starts {
        cfg.suffix_starts = n;
    }
    cfg.bend_prior |= o.bend_prior;
    cfg.both_ways |= o.both_ways;
    cfg.identify.expansion = o.expansion.unwrap_or(cfg.identify.expansion);
    cfg.margin_clear_of_demonstrations &= !o.no_margin_clear;
    cfg
}

fn run_task(
    t: &SuiteTask,
    demos: &DemoSet,
    seeds: u64,
    o: Overrides,
    keep: &mut Option<Mlp>,
) -> TaskResult {
    let task = &t.task;
    let cfg = derived_settings(task, demos, o);
    let (mut iou, mut recall, mut uns, mut goal, mut guided, mut secs) =
        (vec![], vec![], vec![], vec![], vec![], vec![]);
    let (mut f_uns, mut f_goal, mut f_held, mut f_blocked) = (vec![], vec![], vec![], 0);
    let mut failed = 0;
    for seed in 0..seeds {
        let t0 = Instant::now();
        match learn_with_oracle_labels(task, demos, &cfg, seed, o.oracle, &mut |_| true) {
            Ok(l) => {
                secs.push(t0.elapsed().as_secs_f64());
                let e = evaluate_learned(task, &l, seed).expect("evaluation");
                iou.push(e.iou);
                recall.push(e.recall);
                uns.push(100.0 * e.unsafe_rate);
                goal.push(100.0 * e.goal_reached);
                guided.push(100.0 * e.guided);
                if t.class != TaskClass::Velocity {
                    let model = ConstraintModel::from_learned(task, demos, &cfg, seed, &l);
                    let starts = model.starts.clone();
                    let f = evaluate_filtered(
                        task,
                        Arc::new(model),
                        FilterConfig::node_defaults(),
                        &starts,
                        task.spec.evaluation.episodes,
                        seed,
                        nominal_speed(task).expect("suite tasks are in metres"),
                    )
                    .expect("filter evaluation");
                    f_uns.push(100.0 * f.unsafe_rate);
                    f_goal.push(100.0 * f.goal_reached);
                    f_held.push(100.0 * f.held_back);
                    f_blocked += usize::from(f.goal_blocked.is_some());
                }
                if keep.is_none() {
                    *keep = Some(l.net);
                }
            }
            Err(_) => {
                // Nothing learned: no constraint, so nothing is predicted infeasible.
                failed += 1;
                iou.push(0.0);
                recall.push(0.0);
            }
        }
    }
    TaskResult {
        class: t.class,
        name: task.name().to_string(),
        d_r: cfg.identify.d_r.unwrap_or(f64::NAN),
        iou: median(iou),
        recall: median(recall),
        unsafe_pct: median(uns),
        goal_pct: median(goal),
        guided_pct: median(guided),
        filter_unsafe_pct: median(f_uns),
        filter_goal_pct: median(f_goal),
        filter_held_pct: median(f_held),
        filter_goal_blocked: f_blocked,
        failed,
        all_infeasible_iou: grid_confusion(task, |_| true).all_infeasible_iou(),
        slowest_seconds: secs.iter().cloned().fold(f64::NAN, f64::max),
        seconds: median(secs),
    }
}

/// A learned zeta as a heat-map field.
type ZetaField<'a> = Box<dyn Fn(&[f64]) -> f64 + 'a>;

fn main() {
    let args = Args::parse();
    let (seed, per_class, seeds) = (args.seed, args.per_class, args.learn_seeds);
    let only = args.class.unwrap_or_default();
    let o = Overrides {
        dr_scale: args.dr_scale,
        suffix_starts: args.suffix_starts,
        bend_prior: args.bend_prior,
        both_ways: args.both_ways,
        expansion: (args.expansion || args.no_expansion).then_some(args.expansion),
        no_margin_clear: args.no_margin_clear,
        oracle: match args.oracle_labels.as_deref() {
            Some("precise") => OracleLabels::Precise,
            Some("informed") => OracleLabels::Informed,
            _ => OracleLabels::Off,
        },
    };
    // Only the run the README shows redraws its picture: a run on another seed, a class alone or
    // changed settings draws into out/, so measuring something else cannot replace it.
    let readme_run =
        seed == 1 && per_class == 10 && seeds == 3 && only.is_empty() && o.describe().is_empty();
    let png = args.png.unwrap_or_else(|| {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        if readme_run {
            dir.join("docs/suite.png")
        } else {
            dir.join(format!("out/suite{seed}.png"))
        }
    });
    let t0 = Instant::now();
    if args.renamed {
        renamed(seeds, o);
        return;
    }
    let suite = generate(seed, per_class).expect("suite");
    let mut results = Vec::new();
    let mut pictures = Vec::new();
    for (i, t) in suite.iter().enumerate() {
        if !only.is_empty() && t.class.label() != only {
            continue;
        }
        let demos = t.demonstrations(seed).expect("expert demonstrations");
        let mut keep = None;
        let r = run_task(t, &demos, seeds, o, &mut keep);
        eprintln!(
            "[{}/{}] {}: IoU {:.3}, recall {:.3}, unsafe {:.2} %, goal reached {:.0} %, {} of {seeds} learned nothing",
            i + 1,
            suite.len(),
            r.name,
            r.iou,
            r.recall,
            r.unsafe_pct,
            r.goal_pct,
            r.failed
        );
        // The first two tasks of each class go into the picture.
        if i % per_class < 2 {
            pictures.push((t.task.clone(), demos, keep));
        }
        results.push(r);
    }
    println!(
        "Suite seed {seed}: {per_class} tasks per class, learning seeds 0..{seeds}, the settings a new task file gets{}; per task the median over seeds, then over tasks the median and the worst task",
        o.describe()
    );
    println!();
    println!(
        "| class | tasks | IoU median (worst) | recall median (worst) | unsafe % median (worst) | goal reached % median (worst) | guided % median (most) | runs that learned nothing | all-infeasible IoU median | s per run median (slowest run) |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for class in TaskClass::ALL {
        let rs: Vec<&TaskResult> = results.iter().filter(|r| r.class == class).collect();
        if rs.is_empty() {
            continue;
        }
        let col = |f: &dyn Fn(&TaskResult) -> f64| {
            rs.iter()
                .map(|r| f(r))
                .filter(|x| x.is_finite())
                .collect::<Vec<_>>()
        };
        // Median and worst over the tasks that have the number ("-" when none has).
        let cell = |v: Vec<f64>, worst_is_max: bool, digits: usize| {
            if v.is_empty() {
                return "-".to_string();
            }
            let worst = if worst_is_max {
                v.iter().cloned().fold(f64::NEG_INFINITY, f64::max)
            } else {
                v.iter().cloned().fold(f64::INFINITY, f64::min)
            };
            format!("{:.digits$} ({worst:.digits$})", median(v))
        };
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} of {} | {} | {:.2} ({:.2}) |",
            class.label(),
            rs.len(),
            cell(col(&|r| r.iou), false, 3),
            cell(col(&|r| r.recall), false, 3),
            cell(col(&|r| r.unsafe_pct), true, 2),
            cell(col(&|r| r.goal_pct), false, 1),
            cell(col(&|r| r.guided_pct), true, 1),
            rs.iter().map(|r| r.failed).sum::<usize>(),
            rs.len() * seeds as usize,
            if class == TaskClass::Velocity {
                format!("{:.3}", median(col(&|r| r.all_infeasible_iou)))
            } else {
                "-".into()
            },
            median(col(&|r| r.seconds)),
            col(&|r| r.slowest_seconds)
                .into_iter()
                .fold(f64::NEG_INFINITY, f64::max),
        );
    }
    let any_filtered = results.iter().any(|r| r.filter_unsafe_pct.is_finite());
    if any_filtered {
        println!();
        println!(
            "Position tasks, the same episodes through the safety filter (a P-controller at up to {NOMINAL_SPEED} m/s, the node's defaults):"
        );
        println!();
        println!(
            "| class | tasks | filter unsafe % median (worst) | filter goal reached % median (worst) | filter held back % median (most) | models whose goal the filter blocks |"
        );
        println!("|---|---|---|---|---|---|");
    }
    for class in TaskClass::ALL {
        let filtered: Vec<&TaskResult> = results
            .iter()
            .filter(|r| r.class == class && r.filter_unsafe_pct.is_finite())
            .collect();
        if filtered.is_empty() {
            continue;
        }
        let v = |f: &dyn Fn(&TaskResult) -> f64| filtered.iter().map(|r| f(r)).collect::<Vec<_>>();
        let (u, g) = (v(&|r| r.filter_unsafe_pct), v(&|r| r.filter_goal_pct));
        let h = v(&|r| r.filter_held_pct);
        println!(
            "| {} | {} | {:.2} ({:.2}) | {:.1} ({:.1}) | {:.1} ({:.1}) | {} of {} |",
            class.label(),
            filtered.len(),
            median(u.clone()),
            u.iter().cloned().fold(f64::NEG_INFINITY, f64::max),
            median(g.clone()),
            g.iter().cloned().fold(f64::INFINITY, f64::min),
            median(h.clone()),
            h.iter().cloned().fold(f64::NEG_INFINITY, f64::max),
            filtered
                .iter()
                .map(|r| r.filter_goal_blocked)
                .sum::<usize>(),
            filtered.len() as u64 * seeds,
        );
    }
    println!();
    println!("Per task (median over seeds):");
    println!();
    println!(
        "| task | IoU | recall | unsafe % | goal reached % | guided % | filter unsafe % | filter goal reached % | filter held back % | filter goal blocked | learned nothing |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for r in &results {
        println!("| {} | {} | {} |", r.name, metric_cells(r), r.failed);
    }
    // The picture: learned zeta of the first learning seed against the true boundary.
    let scratches: Vec<RefCell<Scratch>> = pictures.iter().map(|_| RefCell::default()).collect();
    let fields: Vec<Option<ZetaField>> = pictures
        .iter()
        .zip(&scratches)
        .map(|((_, _, keep), s)| {
            keep.as_ref()
                .map(|k| Box::new(move |x: &[f64]| k.zeta(x, &mut s.borrow_mut())) as ZetaField)
        })
        .collect();
    let scenes: Vec<Scene> = pictures
        .iter()
        .zip(&fields)
        .map(|((task, demos, _), f)| Scene {
            task,
            title: match f {
                Some(_) => format!("{}: learned zeta, true boundary", task.name()),
                None => format!("{}: nothing learned", task.name()),
            },
            field: f.as_deref(),
            paths: vec![Series::demonstrations(task, demos)],
            points: vec![],
        })
        .collect();
    if let Some(dir) = png.parent() {
        // out/ does not exist in a fresh checkout; a failure shows as the picture's error below.
        let _ = std::fs::create_dir_all(dir);
    }
    match Scene::render_grid(
        &scenes,
        2,
        &format!("suite seed {seed}: learned vs true constraints"),
        &png,
    ) {
        Ok(()) => println!("\nwrote {}", png.display()),
        Err(e) => eprintln!("picture: {e}"),
    }
    println!("total {:.0} s", t0.elapsed().as_secs_f64());
}

/// The built-in tasks under new names (so that no settings file matches), from the reference
/// demonstrations.
fn renamed(seeds: u64, o: Overrides) {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    println!(
        "Renamed built-in tasks, reference demonstrations, derived settings{}; median over learning seeds 0..{seeds}",
        o.describe()
    );
    println!();
    println!(
        "| task | d_r | IoU | recall | unsafe % | goal reached % | guided % | filter unsafe % | filter goal reached % | filter held back % | filter goal blocked | learned nothing | s per run median (slowest run) |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for (name, csv, class) in [
        (
            "reach_obstacle_3d",
            "reach_obstacle_3d_ds.csv",
            TaskClass::Spatial,
        ),
        (
            "point_ellipse_2d",
            "point_ellipse_2d.csv",
            TaskClass::Planar,
        ),
        (
            "reach_velocity_3d",
            "reach_velocity_3d.csv",
            TaskClass::Velocity,
        ),
        (
            "reach_four_cups_3d",
            "reach_four_cups_3d_ds.csv",
            TaskClass::Spatial,
        ),
    ] {
        let mut task = Task::load(name).expect("built-in");
        task.spec.name = format!("renamed_{name}");
        let demos = DemoSet::load(&root.join("data/demos").join(csv), &task).expect("demos");
        let t = SuiteTask {
            class,
            task,
            demos: demos.len(),
        };
        let r = run_task(&t, &demos, seeds, o, &mut None);
        println!(
            "| {} | {:.4} | {} | {} of {seeds} | {:.2} ({:.2}) |",
            r.name,
            r.d_r,
            metric_cells(&r),
            r.failed,
            r.seconds,
            r.slowest_seconds
        );
    }
}
