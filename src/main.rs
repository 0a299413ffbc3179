//! The `pucl` command-line tool: a thin layer over the library.
use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use pucl::demos::DemoSet;
use pucl::expert::{ExpertOptions, generate};
use pucl::plot::{DEMO_COLOR, Scene, Series};
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
        Command::PlotTask { task, demos, out } => {
            let task = Task::load(&task)?;
            let mut paths = Vec::new();
            let mut title = format!("{}: true constraint", task.name());
            if let Some(f) = &demos {
                let set = DemoSet::load(f, &task)?;
                let d = task.feature_dim();
                let pts = set.feature_points(&task);
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
                paths.push(Series {
                    label: format!("demonstrations ({})", set.len()),
                    color: DEMO_COLOR,
                    groups,
                });
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
