//! `pucl demos generate|check|resample|import`: expert demonstrations from a task's true
//! constraint, validation of a demonstration file against a task, and demonstrations from a log of
//! timed positions or from ROS 2 bags.
use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use pucl::demos::DemoSet;
use pucl::demos::bag::PoseSource;
use pucl::demos::recorder::AutoSegment;
use pucl::policy::crl::PolicyFile;
use pucl::policy::crl::expert::candidates;
use pucl::task::Task;
use pucl::task::expert::{ExpertOptions, generate, trained};
use std::path::PathBuf;

#[derive(Subcommand)]
pub enum DemosCommand {
    /// Make safe, near-optimal expert demonstrations from the task's true constraint (a planner; for
    /// a MuJoCo task, PPO trained on the true constraint, keeping the best 3 of 5 feasible rollouts).
    Generate(GenerateArgs),
    /// Validate a demonstration file against a task; print counts, goal reaching, true violations and steps that jump farther than the action limit allows.
    Check(CheckArgs),
    /// Turn a log of timed positions (CSV: `t` in seconds, the task's position columns, optionally `demo`; other columns are ignored), at any rate, into demonstrations at the task's period: positions interpolated, the velocity between them the action; rest before the first and after the last motion dropped.
    Resample(ResampleArgs),
    /// Read demonstrations from ROS 2 bags (MCAP files or rosbag2 folders, as `ros2 bag record -s
    /// mcap` or demo_recorder's `bag` write them): the end effector's positions on one PoseStamped
    /// or PointStamped topic, or from /tf between two frames (--frames; a namespaced robot's with
    /// --tf-namespace), timed by their header
    /// stamps, resampled at the task's period like `resample`. The stream is cut where poses stop
    /// for more than 0.5 s or jump farther than the action limit allows; each piece that moves is a
    /// demonstration, or with --auto-segment each run from first motion to the goal or until idle,
    /// as demo_recorder's auto_segment cuts them.
    Import(ImportArgs),
}

#[derive(Args)]
pub struct ImportArgs {
    /// The bags: .mcap files or rosbag2 folders (their metadata.yaml, or their .mcap files by name),
    /// read in the order given.
    #[arg(required = true)]
    bags: Vec<PathBuf>,
    /// Built-in task name or path to a task YAML file (its positions, period and velocity scale).
    #[arg(long)]
    task: String,
    /// The topic of the end-effector pose [default: the bag's only PoseStamped or PointStamped topic].
    #[arg(long, conflicts_with = "frames")]
    topic: Option<String>,
    /// Read the pose from the bag's /tf and /tf_static instead: the position of frame TIP in frame
    /// BASE (e.g. base_link:tool0), composed along the frames between them.
    #[arg(long, value_name = "BASE:TIP")]
    frames: Option<String>,
    /// With --frames: the robot's namespace, whose transforms are on NS/tf and NS/tf_static (e.g.
    /// /robot1 for /robot1/tf) [default: none, /tf and /tf_static].
    #[arg(long, value_name = "NS", requires = "frames")]
    tf_namespace: Option<String>,
    /// Output file: CSV (the reference format) or .json. Written atomically.
    #[arg(long)]
    out: PathBuf,
    /// Cut demonstrations as demo_recorder's auto_segment does: start on motion outside the goal
    /// region, stop at the goal or when idle (for one long recording of several demonstrations).
    #[arg(long)]
    auto_segment: bool,
    /// Speed (position units per second) that counts as motion: slower rows at either end of a
    /// demonstration are rest and dropped (a real arm's pose jitters at rest).
    #[arg(long, default_value_t = AutoSegment::default().motion_threshold)]
    motion_threshold: f64,
    /// With --auto-segment: seconds without motion that end a demonstration.
    #[arg(long, default_value_t = AutoSegment::default().idle_timeout)]
    idle_timeout: f64,
    /// Keep only the demonstrations that end at the task's goal (drops, e.g., the arm's way back to a
    /// start between demonstrations).
    #[arg(long)]
    reaching_goal_only: bool,
}

#[derive(Args)]
pub struct ResampleArgs {
    /// The log (CSV with a header row).
    input: PathBuf,
    /// Built-in task name or path to a task YAML file (its position names, period and velocity scale).
    #[arg(long)]
    task: String,
    /// Output file: CSV (the reference format) or .json. Written atomically.
    #[arg(long)]
    out: PathBuf,
    /// Speed (position units per second) that counts as motion: slower rows at either end of a
    /// demonstration are rest and dropped (a real arm's pose jitters at rest).
    #[arg(long, default_value_t = AutoSegment::default().motion_threshold)]
    motion_threshold: f64,
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
    /// A MuJoCo task: also write the trained expert policy here (read by `pucl eval --policy`).
    #[arg(long)]
    expert_out: Option<PathBuf>,
    /// A MuJoCo task: train without the true constraint (the nominal policy; its rollouts are kept
    /// whether feasible or not), e.g. for a task's evaluation policies.
    #[arg(long)]
    unconstrained: bool,
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
        DemosCommand::Resample(a) => resample(a),
        DemosCommand::Import(a) => import(a),
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
    for p in std::iter::once(&a.out).chain(&a.expert_out) {
        pucl::error::check_output_path(p)?;
    }
    let options = ExpertOptions {
        count: a.count,
        seed: a.seed,
        jitter: a.jitter,
        margin: a.margin,
    };
    let trajs = if task.mujoco.is_some() {
        trained_expert(&task, &a, &options)?
    } else {
        if a.expert_out.is_some() || a.unconstrained {
            anyhow::bail!(
                "--expert-out and --unconstrained: only a MuJoCo task's expert is a trained policy"
            );
        }
        let bar = demos_bar(&task, a.count);
        let t = generate(&task, &options, &mut |i| bar.set_position(i as u64))?;
        bar.finish_and_clear();
        t
    };
    let set = DemoSet::from_trajectories(&task, &trajs);
    set.save(&a.out, task.name())?;
    let r = set.report(&task);
    let goal = if task.spec.goal.is_none() {
        let mean = trajs.iter().map(|t| t.episode_return).sum::<f64>() / trajs.len() as f64;
        format!("mean return {mean:.1}")
    } else {
        format!("goal reached {}/{}", r.reached_goal, r.demos)
    };
    // Without a true constraint the expert goes straight: nothing shaped the demonstrations.
    let violations = if task.true_constraint.is_empty() {
        "no true constraint (the expert went straight)".to_string()
    } else {
        format!("true violations {}", r.violating_steps)
    };
    println!(
        "wrote {}: {} demonstrations, {} steps, {goal}, {violations}",
        a.out.display(),
        r.demos,
        r.steps,
    );
    Ok(())
}

fn demos_bar(task: &Task, len: usize) -> ProgressBar {
    let bar = ProgressBar::new(len as u64).with_style(
        ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} demonstrations")
            .expect("valid template"),
    );
    bar.set_message(format!("expert on {}", task.name()));
    bar
}

/// A MuJoCo task: train the expert on the true constraint, then keep the best feasible rollouts.
fn trained_expert(
    task: &Task,
    a: &GenerateArgs,
    options: &ExpertOptions,
) -> Result<Vec<pucl::task::sim::Trajectory>> {
    let training = ProgressBar::new(0).with_style(
        ProgressStyle::with_template("training the expert [{bar:30}] {pos}/{len} steps {eta}")
            .expect("valid template"),
    );
    let bar = demos_bar(task, candidates(a.count));
    bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    let (policy, trajs) = trained(
        task,
        options,
        !a.unconstrained,
        &mut |done, total| {
            training.set_length(total as u64);
            training.set_position(done as u64);
        },
        &mut |i| {
            if bar.is_hidden() {
                // Training is over: its bar gives way to the rollouts'.
                training.finish_and_clear();
                bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
            }
            bar.set_position(i as u64)
        },
    )?;
    bar.finish_and_clear();
    if let Some(p) = &a.expert_out {
        PolicyFile::new(task, a.seed, policy).save(p)?;
        eprintln!("wrote the expert policy to {}", p.display());
    }
    Ok(trajs)
}

fn resample(a: ResampleArgs) -> Result<()> {
    let task = Task::load(&a.task)?;
    anyhow::ensure!(
        a.motion_threshold.is_finite() && a.motion_threshold >= 0.0,
        "--motion-threshold {}: must be a finite number >= 0",
        a.motion_threshold
    );
    let text = std::fs::read_to_string(&a.input)
        .with_context(|| format!("reading {}", a.input.display()))?;
    let log = pucl::demos::timed::parse(&text, &a.input, &task)?;
    let positions: usize = log.iter().map(|d| d.samples.len()).sum();
    let set = pucl::demos::timed::resample(&task, &log, &a.input, a.motion_threshold)?;
    save_resampled(&set, &task, &a.out, positions, "")
}

/// Save resampled demonstrations and say what was written (`kept` qualifies the count); warn of
/// steps no motion at the task's action limit makes (a wrong unit or velocity_scale).
fn save_resampled(
    set: &DemoSet,
    task: &Task,
    out: &std::path::Path,
    positions: usize,
    kept: &str,
) -> Result<()> {
    set.save(out, task.name())?;
    let r = set.report(task);
    println!(
        "wrote {}: {} demonstrations{kept}, {} steps at {:.4} s (from {positions} positions), goal reached {}/{}",
        out.display(),
        r.demos,
        r.steps,
        task.spec.dynamics.dt,
        r.reached_goal,
        r.demos
    );
    if r.jumping_steps > 0 {
        eprintln!(
            "warning: {} steps in demonstrations {:?} move farther than {} times the action limit allows in one step: is the recording's unit or the task's velocity_scale wrong?",
            r.jumping_steps,
            r.jumping_demos,
            pucl::demos::JUMP_FACTOR
        );
    }
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
    if task.spec.goal.is_none() {
        println!("  goal             none (episodes run to the horizon)");
    } else {
        println!("  goal reached     {} of {}", r.reached_goal, r.demos);
    }
    if task.true_constraint.is_empty() {
        println!("  true violations  not checked: the task file has no true constraint");
    } else {
        println!(
            "  true violations  {} steps in {} demonstrations {:?}",
            r.violating_steps,
            r.violating_demos.len(),
            r.violating_demos
        );
    }
    println!(
        "  jumps            {} steps in {} demonstrations {:?} (farther than {} times the action limit allows in one step)",
        r.jumping_steps,
        r.jumping_demos.len(),
        r.jumping_demos,
        pucl::demos::JUMP_FACTOR
    );
    Ok(())
}

fn import(a: ImportArgs) -> Result<()> {
    let task = Task::load(&a.task)?;
    let axes = task.pose_axes().map_err(anyhow::Error::msg)?;
    let segment = AutoSegment {
        motion_threshold: a.motion_threshold,
        idle_timeout: a.idle_timeout,
    };
    for (v, name) in [
        (a.motion_threshold, "--motion-threshold"),
        (a.idle_timeout, "--idle-timeout"),
    ] {
        anyhow::ensure!(
            v.is_finite() && v >= 0.0,
            "{name} {v}: must be a finite number >= 0"
        );
    }
    let frames = a
        .frames
        .as_deref()
        .map(|f| pucl::demos::tf::parse_frames(f).map_err(|e| anyhow::anyhow!("--frames {e}")))
        .transpose()?;
    let tf_topics =
        pucl::demos::tf::TfTopics::in_namespace(a.tf_namespace.as_deref().unwrap_or(""))
            .map_err(|e| anyhow::anyhow!("--tf-namespace {e}"))?;
    let mut pieces = Vec::new();
    let mut messages = 0;
    for bag in &a.bags {
        // A bag split over several files (a rosbag2 folder) is one stream.
        let mut samples: Vec<(f64, Vec<f64>)> = Vec::new();
        let mut topics = Vec::new();
        let source = match frames {
            Some((base, tip)) => PoseSource::Frames {
                base,
                tip,
                topics: &tf_topics,
            },
            None => PoseSource::Topic(a.topic.as_deref()),
        };
        for (file, read) in pucl::demos::bag::read_bag(bag, source)? {
            if let Some((index, log_time)) = read.non_finite.first() {
                eprintln!(
                    "warning: {}: {} messages on {} with a non-finite position or a zero rotation left out (the first: message {index}, logged at {log_time} ns)",
                    file.display(),
                    read.non_finite.len(),
                    read.topic
                );
            }
            let topic = format!("{} ({})", read.topic, read.type_name);
            if !topics.contains(&topic) {
                topics.push(topic);
            }
            samples.extend(
                read.samples
                    .iter()
                    .map(|(t, xyz)| (*t, Task::from_pose_axes(&axes, *xyz))),
            );
        }
        samples.sort_by(|x, y| x.0.total_cmp(&y.0));
        messages += samples.len();
        let cut = pucl::demos::timed::split_stream(&task, &bag.display().to_string(), &samples);
        eprintln!(
            "{}: {} positions on {} in {} pieces",
            bag.display(),
            samples.len(),
            topics.join(", "),
            cut.len()
        );
        pieces.extend(cut);
    }
    let mut set = pucl::demos::timed::resample_stream(&task, &pieces, segment, a.auto_segment)?;
    let found = set.len();
    if a.reaching_goal_only {
        let keep = set.reaches_goal(&task);
        let mut k = keep.iter();
        set.demos
            .retain(|_| *k.next().expect("one per demonstration"));
    }
    anyhow::ensure!(
        !set.is_empty(),
        "no demonstration in {} positions: {}",
        messages,
        if found > 0 {
            format!("none of the {found} found ends at the goal")
        } else {
            "nothing moved".into()
        }
    );
    let kept = if found > set.len() {
        format!(" (of {found}: those ending at the goal)")
    } else {
        String::new()
    };
    save_resampled(&set, &task, &a.out, messages, &kept)
}
