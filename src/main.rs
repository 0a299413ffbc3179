//! The `pucl` command-line tool: a thin layer over the library.
use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use pucl::crl::PolicyFile;
use pucl::demos::DemoSet;
use pucl::expert::{ExpertOptions, generate};
use pucl::learner::{LearnConfig, Method, PolicyKind, evaluate, evaluate_policy, learn};
use pucl::model::ConstraintModel;
use pucl::modulation::DsmPolicy;
use pucl::network::Scratch;
use pucl::plot::{DEMO_COLOR, INFEASIBLE_POINT_COLOR, ROLLOUT_COLOR, Scene, Series};
use pucl::sim::{Simulator, Trajectory};
use pucl::task::{BUILTIN, Task};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "pucl",
    version,
    about = "Learn where not to go from a few demonstrations (positive-unlabeled constraint learning), and enforce it."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List the built-in tasks.
    Tasks,
    /// Generate and check demonstration sets (CSV or JSON).
    #[command(subcommand)]
    Demos(DemosCommand),
    /// Learn the constraint from demonstrations (DSM-PUCL by default; CRL-PUCL with --policy crl; the
    /// baselines with --method) and write the model file.
    Learn {
        /// Built-in task name or path to a task YAML file (gives the simulator for the rollouts).
        #[arg(long)]
        task: String,
        /// Demonstrations (CSV or .json).
        #[arg(long)]
        demos: PathBuf,
        /// Settings overriding config/learn/default.yaml and config/learn/<task>.yaml (any subset).
        #[arg(long)]
        config: Option<PathBuf>,
        /// Seed of the network initialisation and minibatch order.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// The model file to write (JSON), atomically.
        #[arg(long)]
        out: PathBuf,
        /// The policy proposing trajectories [default: the config's `policy`, dsm]; crl adds
        /// config/learn/crl.yaml and config/learn/<task>.crl.yaml.
        #[arg(long, value_enum)]
        policy: Option<PolicyKind>,
        /// PUCL or a baseline [default: the config's `method`, pucl].
        #[arg(long, value_enum)]
        method: Option<Method>,
        /// With --policy crl: also write the trained policy (JSON), for `pucl eval --policy`.
        #[arg(long)]
        policy_out: Option<PathBuf>,
    },
    /// Evaluate a model: IoU, recall, precision on the task's grid; unsafe rate of its DSM policy, or
    /// of a CRL policy file (--policy).
    Eval {
        /// Built-in task name or path to a task YAML file (its true constraint is the reference).
        #[arg(long)]
        task: String,
        #[arg(long)]
        model: PathBuf,
        /// Evaluation episodes, from the demonstration starts in turn [default: the task's].
        #[arg(long)]
        episodes: Option<usize>,
        /// Seed of the perturbed starts of repeated episodes.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Print exactly one JSON object.
        #[arg(long)]
        json: bool,
        /// List the first violating state of every violating episode.
        #[arg(long)]
        show_violations: bool,
        /// A CRL policy file (`pucl learn --policy crl --policy-out`): its episodes give the unsafe rate.
        #[arg(long)]
        policy: Option<PathBuf>,
    },
    /// Query a model: feasible, zeta and its gradient at one or more points (values flattened).
    Query {
        #[arg(long)]
        model: PathBuf,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
        /// The constraint-input values of one or more points, in the model's feature order.
        #[arg(required = true, allow_negative_numbers = true)]
        values: Vec<f64>,
    },
    /// Draw the learned zeta as a heat map with the true boundary, demonstrations, policy rollouts
    /// and the reliable infeasible points (like the paper's Fig. 3).
    Plot {
        #[arg(long)]
        task: String,
        #[arg(long)]
        model: PathBuf,
        /// Demonstrations to draw (CSV or .json).
        #[arg(long)]
        demos: Option<PathBuf>,
        /// Output PNG.
        #[arg(long)]
        out: PathBuf,
        /// Draw this CRL policy's rollouts (mean action) instead of the DSM policy's.
        #[arg(long)]
        policy: Option<PathBuf>,
    },
    /// Draw a task's true constraint (and demonstrations) as a PNG; a 3-D task as a top and a side view.
    PlotTask {
        /// Built-in task name or path to a task YAML file.
        #[arg(long)]
        task: String,
        /// Demonstrations to draw (CSV or .json).
        #[arg(long)]
        demos: Option<PathBuf>,
        /// Output PNG.
        #[arg(long)]
        out: PathBuf,
    },
}

#[derive(Subcommand)]
enum DemosCommand {
    /// Make safe, near-optimal expert demonstrations from the task's true constraint.
    Generate {
        /// Built-in task name or path to a task YAML file.
        #[arg(long)]
        task: String,
        /// Number of demonstrations; starts cycle through the task's start list.
        #[arg(long, default_value_t = 12)]
        count: usize,
        /// Seed of the start perturbations.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Perturb every start by up to this much per axis [default: the task's start_jitter, from the
        /// second pass over its starts on].
        #[arg(long)]
        jitter: Option<f64>,
        /// Distance kept from the true constraint [default: the task's expert.margin].
        #[arg(long)]
        margin: Option<f64>,
        /// Output file: CSV (the reference format) or .json. Written atomically.
        #[arg(long)]
        out: PathBuf,
    },
    /// Validate a demonstration file against a task; print counts, goal reaching and true violations.
    Check {
        /// The demonstration file (CSV or .json).
        file: PathBuf,
        /// Built-in task name or path to a task YAML file.
        #[arg(long)]
        task: String,
        /// Print the report as one JSON object.
        #[arg(long)]
        json: bool,
    },
}

/// Each demonstration as a polyline in feature space.
fn demo_series(task: &Task, set: &DemoSet) -> Series {
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

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Tasks => {
            for (name, _) in BUILTIN {
                let t = Task::load(name)?;
                println!(
                    "{name:<20} state [{}]  constraint on [{}]  {}",
                    t.spec.state.join(", "),
                    t.feature_names().join(", "),
                    t.spec.description
                );
            }
        }
        Command::Demos(DemosCommand::Generate {
            task,
            count,
            seed,
            jitter,
            margin,
            out,
        }) => {
            let task = Task::load(&task)?;
            for (name, v) in [("--jitter", jitter), ("--margin", margin)] {
                if let Some(v) = v
                    && !(v.is_finite() && v >= 0.0)
                {
                    anyhow::bail!("{name} must be a finite number >= 0, got {v}");
                }
            }
            let bar = ProgressBar::new(count as u64).with_style(
                ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} demonstrations")
                    .expect("valid template"),
            );
            bar.set_message(format!("expert on {}", task.name()));
            let trajs = generate(
                &task,
                &ExpertOptions {
                    count,
                    seed,
                    jitter,
                    margin,
                },
                &mut |i| bar.set_position(i as u64),
            )?;
            bar.finish_and_clear();
            let set = DemoSet::from_trajectories(&task, &trajs);
            set.save(&out, task.name())?;
            let r = set.report(&task);
            println!(
                "wrote {}: {} demonstrations, {} steps, goal reached {}/{}, true violations {}",
                out.display(),
                r.demos,
                r.steps,
                r.reached_goal,
                r.demos,
                r.violating_steps
            );
        }
        Command::Demos(DemosCommand::Check { file, task, json }) => {
            let task = Task::load(&task)?;
            let set = DemoSet::load(&file, &task)?;
            let r = set.report(&task);
            if json {
                println!("{}", serde_json::to_string(&r)?);
            } else {
                println!("{}: valid for task '{}'", file.display(), task.name());
                println!("  demonstrations   {}", r.demos);
                println!(
                    "  steps            {} (per demonstration {} to {})",
                    r.steps, r.min_len, r.max_len
                );
                println!("  goal reached     {} of {}", r.reached_goal, r.demos);
                println!(
                    "  true violations  {} steps in {} demonstrations {:?}",
                    r.violating_steps,
                    r.violating_demos.len(),
                    r.violating_demos
                );
            }
        }
        Command::Learn {
            task,
            demos,
            config,
            seed,
            out,
            policy,
            method,
            policy_out,
        } => {
            let task = Task::load(&task)?;
            let set = DemoSet::load(&demos, &task)?;
            let mut cfg = LearnConfig::for_task_policy(task.name(), policy, config.as_deref())?;
            if let Some(m) = method {
                cfg.method = m;
            }
            if policy_out.is_some() && cfg.policy != PolicyKind::Crl {
                anyhow::bail!("--policy-out needs the CRL policy (--policy crl)");
            }
            let bar = ProgressBar::new(cfg.iterations as u64).with_style(
                ProgressStyle::with_template(
                    "learning {prefix} [{bar:25}] iteration {pos}/{len} {msg}",
                )
                .expect("valid template"),
            );
            bar.set_prefix(task.name().to_string());
            let learned = learn(&task, &set, &cfg, seed, &mut |st| {
                bar.set_position(st.iteration as u64 + 1);
                let crl = match (st.policy_return, st.policy_cost, st.nu) {
                    (Some(r), Some(c), Some(nu)) => {
                        format!(", policy return {r:.2} cost {c:.3} nu {nu:.3}")
                    }
                    _ => String::new(),
                };
                bar.set_message(format!(
                    "|R| {} |M| {} loss {:.4} IoU {:.3}{crl}",
                    st.reliable_infeasible, st.memory_buffer, st.loss, st.iou
                ));
                if bar.is_hidden() {
                    // Not a terminal: one line per iteration instead of the bar.
                    eprintln!(
                        "iteration {}: kept {}/{} rollouts, |R| {}, |M| {}, loss {:.4}, IoU {:.3}, {:.1} s{crl}",
                        st.iteration,
                        st.kept,
                        st.rollouts,
                        st.reliable_infeasible,
                        st.memory_buffer,
                        st.loss,
                        st.iou,
                        st.seconds
                    );
                }
                true
            })?;
            bar.finish_and_clear();
            let last = learned.history.last().expect("at least one iteration");
            let model = ConstraintModel::from_learned(&task, &set, &cfg, seed, &learned);
            model.save(&out)?;
            if let (Some(p), Some(pol)) = (&policy_out, &learned.policy) {
                PolicyFile::new(&task, seed, pol.clone()).save(p)?;
                println!("wrote {}: the CRL policy", p.display());
            }
            println!(
                "wrote {}: {} iterations in {:.1} s ({}), |M| {}, loss {:.4}, IoU {:.3}, recall {:.3}, precision {:.3}",
                out.display(),
                learned.history.len(),
                learned.seconds,
                learned.stop_reason,
                last.memory_buffer,
                last.loss,
                last.iou,
                last.recall,
                last.precision
            );
        }
        Command::Eval {
            task,
            model,
            episodes,
            seed,
            json,
            show_violations,
            policy,
        } => {
            let task = Task::load(&task)?;
            let m = ConstraintModel::load(&model)?;
            m.check_task(&task, &model)?;
            let episodes = episodes.unwrap_or(task.spec.evaluation.episodes);
            let mut e = evaluate(
                &task,
                &m.network,
                &m.dsm,
                m.threshold,
                &m.starts,
                episodes,
                seed,
            )?;
            if let Some(p) = &policy {
                // The unsafe rate is the CRL policy's, not the DSM policy's.
                let f = PolicyFile::load(p, &task)?;
                let (u, reached) = evaluate_policy(&task, &f.policy, &m.starts, episodes, seed)?;
                e.unsafe_rate = u.rate();
                e.violating_episodes = u.episode_fraction();
                e.goal_reached = reached;
                e.unsafe_counts = u;
                e.first_violations.clear();
            }
            if json {
                let v = serde_json::json!({
                    "iou": e.iou, "recall": e.recall, "precision": e.precision,
                    "unsafe_rate": e.unsafe_rate, "violating_episodes": e.violating_episodes,
                    "goal_reached": e.goal_reached,
                });
                println!("{v}");
            } else {
                println!("{} on task '{}'", model.display(), task.name());
                println!("  IoU                 {:.4}", e.iou);
                println!("  recall              {:.4}", e.recall);
                println!("  precision           {:.4}", e.precision);
                println!(
                    "  unsafe rate         {:.4} % ({} of {} steps)",
                    100.0 * e.unsafe_rate,
                    e.unsafe_counts.violating_steps,
                    e.unsafe_counts.steps
                );
                println!(
                    "  violating episodes  {} of {}",
                    e.unsafe_counts.violating_episodes, e.unsafe_counts.episodes
                );
                println!("  goal reached        {:.1} %", 100.0 * e.goal_reached);
            }
            if show_violations {
                for (ep, step, s) in &e.first_violations {
                    eprintln!("episode {ep}: first violation at step {step}, state {s:?}");
                }
            }
        }
        Command::Query {
            model,
            json,
            values,
        } => {
            let m = ConstraintModel::load(&model)?;
            let d = m.dim();
            if values.len() % d != 0 {
                anyhow::bail!(
                    "{} values is not a multiple of the model's dimension {d} ({})",
                    values.len(),
                    m.features
                        .iter()
                        .map(|f| f.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
            if let Some(i) = values.iter().position(|v| !v.is_finite()) {
                anyhow::bail!("value {} ({}) is not a finite number", i + 1, values[i]);
            }
            let mut scratch = Scratch::default();
            let answers: Vec<_> = values.chunks(d).map(|x| m.query(x, &mut scratch)).collect();
            if json {
                let v = serde_json::json!({
                    "feasible": answers.iter().map(|a| a.0).collect::<Vec<_>>(),
                    "zeta": answers.iter().map(|a| a.1).collect::<Vec<_>>(),
                    "gradient": answers.iter().flat_map(|a| a.2.clone()).collect::<Vec<_>>(),
                });
                println!("{v}");
            } else {
                for (x, (feasible, z, g)) in values.chunks(d).zip(&answers) {
                    println!("{x:?}: feasible {feasible}, zeta {z:.6}, gradient {g:?}");
                }
            }
        }
        Command::Plot {
            task,
            model,
            demos,
            out,
            policy,
        } => {
            let task = Task::load(&task)?;
            let m = ConstraintModel::load(&model)?;
            m.check_task(&task, &model)?;
            let crl = policy
                .as_deref()
                .map(|p| PolicyFile::load(p, &task))
                .transpose()?;
            let mut paths = Vec::new();
            if let Some(f) = &demos {
                paths.push(demo_series(&task, &DemoSet::load(f, &task)?));
            }
            // The policy's rollouts from the demonstration starts.
            let mut sim = Simulator::new(&task);
            let mut groups = Vec::new();
            let mut psi = vec![0.0; task.feature_dim()];
            for s in &m.starts {
                let mut t = Trajectory::with_capacity(&task);
                match &crl {
                    Some(f) => sim.rollout(s, &mut &f.policy, &mut t),
                    None => {
                        let mut policy = DsmPolicy::new(&task, Some(&m.network), &m.dsm)
                            .map_err(anyhow::Error::msg)?;
                        sim.rollout(s, &mut policy, &mut t);
                    }
                }
                let mut g = Vec::with_capacity(t.len());
                for i in 0..t.len() {
                    task.features_into(t.state(i), t.action(i), &mut psi);
                    g.push(psi.clone());
                }
                groups.push(g);
            }
            paths.push(Series {
                label: if crl.is_some() {
                    "CRL policy rollouts".into()
                } else {
                    "DSM policy rollouts".into()
                },
                color: ROLLOUT_COLOR,
                groups,
            });
            let points = vec![Series {
                label: format!("reliable infeasible ({})", m.memory_buffer.len()),
                color: INFEASIBLE_POINT_COLOR,
                groups: vec![m.memory_buffer.clone()],
            }];
            let net = &m.network;
            // One scratch buffer for every pixel of the heat map.
            let scratch = std::cell::RefCell::new(Scratch::default());
            let field = move |x: &[f64]| net.zeta(x, &mut scratch.borrow_mut());
            let title = format!(
                "{}: learned zeta (blue feasible, red infeasible)",
                task.name()
            );
            let scene = Scene {
                task: &task,
                title,
                field: Some(&field),
                paths,
                points,
            };
            scene
                .render(&out)
                .with_context(|| format!("plotting {}", out.display()))?;
            println!("wrote {}", out.display());
        }
        Command::PlotTask { task, demos, out } => {
            let task = Task::load(&task)?;
            let mut paths = Vec::new();
            let mut title = format!("{}: true constraint", task.name());
            if let Some(f) = &demos {
                paths.push(demo_series(&task, &DemoSet::load(f, &task)?));
                title.push_str(" and demonstrations");
            }
            let scene = Scene {
                task: &task,
                title,
                field: None,
                paths,
                points: vec![],
            };
            scene
                .render(&out)
                .with_context(|| format!("plotting {}", out.display()))?;
            println!("wrote {}", out.display());
        }
    }
    Ok(())
}
