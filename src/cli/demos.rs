//! `pucl demos generate|check`: expert demonstrations from a task's true constraint, and validation of
//! a demonstration file against a task.
use anyhow::Result;
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use pucl::demos::DemoSet;
use pucl::task::Task;
use pucl::task::expert::{ExpertOptions, generate};
use std::path::PathBuf;

#[derive(Subcommand)]
pub enum DemosCommand {
    /// Make safe, near-optimal expert demonstrations from the task's true constraint.
    Generate(GenerateArgs),
    /// Validate a demonstration file against a task; print counts, goal reaching and true violations.
    Check(CheckArgs),
}

#[derive(Args)]
pub struct GenerateArgs {
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
}

#[derive(Args)]
pub struct CheckArgs {
    /// The demonstration file (CSV or .json).
    file: PathBuf,
    /// Built-in task name or path to a task YAML file.
    #[arg(long)]
    task: String,
    /// Print the report as one JSON object.
    #[arg(long)]
    json: bool,
}

pub fn run(cmd: DemosCommand) -> Result<()> {
    match cmd {
        DemosCommand::Generate(a) => generate_demos(a),
        DemosCommand::Check(a) => check(a),
    }
}

fn generate_demos(a: GenerateArgs) -> Result<()> {
    let task = Task::load(&a.task)?;
    for (name, v) in [("--jitter", a.jitter), ("--margin", a.margin)] {
        if let Some(v) = v
            && !(v.is_finite() && v >= 0.0)
        {
            anyhow::bail!("{name} must be a finite number >= 0, got {v}");
        }
    }
    let bar = ProgressBar::new(a.count as u64).with_style(
        ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} demonstrations")
            .expect("valid template"),
    );
    bar.set_message(format!("expert on {}", task.name()));
    let options = ExpertOptions {
        count: a.count,
        seed: a.seed,
        jitter: a.jitter,
        margin: a.margin,
    };
    let trajs = generate(&task, &options, &mut |i| bar.set_position(i as u64))?;
    bar.finish_and_clear();
    let set = DemoSet::from_trajectories(&task, &trajs);
    set.save(&a.out, task.name())?;
    let r = set.report(&task);
    println!(
        "wrote {}: {} demonstrations, {} steps, goal reached {}/{}, true violations {}",
        a.out.display(),
        r.demos,
        r.steps,
        r.reached_goal,
        r.demos,
        r.violating_steps
    );
    Ok(())
}

fn check(a: CheckArgs) -> Result<()> {
    let task = Task::load(&a.task)?;
    let set = DemoSet::load(&a.file, &task)?;
    let r = set.report(&task);
    if a.json {
        println!("{}", serde_json::to_string(&r)?);
        return Ok(());
    }
    println!("{}: valid for task '{}'", a.file.display(), task.name());
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
    Ok(())
}
