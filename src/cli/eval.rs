//! `pucl eval`: a model's IoU, recall and precision on the task's grid, and the unsafe rate beside the
//! goal-reached rate of its DSM policy (or of a CRL policy file).
use anyhow::Result;
use clap::Args;
use pucl::deploy::filter::FilterConfig;
use pucl::deploy::model::ConstraintModel;
use pucl::policy::crl::PolicyFile;
use pucl::policy::modulation::PolicySpace;
use pucl::report::evaluate::{
    arm_top_speed, evaluate, evaluate_filtered, evaluate_policy, nominal_speed,
};
use pucl::task::Task;
use std::path::PathBuf;

#[derive(Args)]
pub struct EvalArgs {
    /// Built-in task name or path to a task YAML file (its true constraint is the reference).
    #[arg(long)]
    task: String,
    /// The model file written by `pucl learn` (JSON).
    #[arg(long)]
    model: PathBuf,
    /// Evaluation episodes, from the demonstration starts in turn [default: the task's].
    #[arg(long)]
    episodes: Option<usize>,
    /// Seed of the perturbed starts of repeated episodes.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Print exactly one JSON object: iou, recall, precision, all_infeasible_iou (what calling every
    /// grid point infeasible scores), unsafe_rate, violating_episodes, goal_reached, stopped
    /// (the fraction of episodes that ended short of the goal standing still), guided (the fraction
    /// that stalled in front of a learned obstacle and were guided round it), with --filter
    /// held_back (the fraction that ended short of the goal with the filter reporting the command
    /// held back by the learned constraint) and started_within_margin (the fraction that started
    /// inside the learned obstacle or within the filter's margin of it), mean_return, steps (the
    /// steps of all episodes: the unsafe rate's denominator, and how long the runs took).
    #[arg(long)]
    json: bool,
    /// List the first violating state of every violating episode.
    #[arg(long)]
    show_violations: bool,
    /// List where every episode that ended short of the goal ended, and (with --filter) whether
    /// the filter was holding its command back there.
    #[arg(long)]
    show_short: bool,
    /// A CRL policy file (`pucl learn --policy crl --policy-out`): its episodes give the unsafe rate.
    #[arg(long, conflicts_with = "filter")]
    policy: Option<PathBuf>,
    /// Run the episodes as the model is deployed: a P-controller drives towards the goal at up to
    /// --speed and the safety filter (the node's defaults: star-shaped hulls, the model's margin)
    /// modulates its command. Position tasks in 2-D or 3-D (a planar task's positions on the
    /// pose's axes they are named after). An episode gets the task's horizon stretched by
    /// the ratio of the task's top speed to --speed, when that is slower. Warns when no filtered
    /// run from outside the filter's margin can reach the goal (it lies inside the learned
    /// obstacle or within the margin of it).
    #[arg(long)]
    filter: bool,
    /// With --filter: the nominal controller's top speed in the task's position units per second
    /// [default: 0.25 m/s, as scripts/loop.py drives, in the task's position unit: m, cm or mm, or
    /// the arm's top speed (the action limit times velocity_scale) where that is slower; a faster
    /// --speed warns: the dynamics limit it axis by axis, which bends the filtered command].
    #[arg(long, requires = "filter")]
    speed: Option<f64>,
    /// With --filter: modulate around zeta's level sets instead of the star-shaped hulls of the
    /// learned obstacles (the node's `auto_reference: false`).
    #[arg(long, requires = "filter")]
    no_hulls: bool,
    /// With --filter: the node's `max_linear_speed` (position units per second; 0, the default: no
    /// limit): a faster command is scaled as a whole to it before it is filtered
    #[arg(long, requires = "filter", default_value_t = 0.0)]
    max_linear_speed: f64,
}

pub fn run(a: EvalArgs) -> Result<()> {
    let task = Task::load(&a.task)?;
    let m = ConstraintModel::load(&a.model)?;
    m.check_task(&task, &a.model)?;
    if m.task != task.name() {
        // Same inputs, another task: legitimate for transfer, a mistake otherwise.
        eprintln!(
            "warning: {} was learned for task '{}', evaluated on task '{}'",
            a.model.display(),
            m.task,
            task.name()
        );
    }
    let episodes = a.episodes.unwrap_or(task.spec.evaluation.episodes);
    let e = match &a.policy {
        // The unsafe rate is the CRL policy's, not the DSM policy's.
        Some(p) => {
            let f = PolicyFile::load(p, &task)?;
            evaluate_policy(
                &task,
                &m.network,
                m.threshold,
                &f.policy,
                &m.starts,
                episodes,
                a.seed,
            )?
        }
        None if a.filter => {
            if !(a.max_linear_speed.is_finite() && a.max_linear_speed >= 0.0) {
                anyhow::bail!(
                    "--max-linear-speed must be a number >= 0 (0: no limit), got {}",
                    a.max_linear_speed
                );
            }
            let starts = m.starts.clone();
            evaluate_filtered(
                &task,
                std::sync::Arc::new(m),
                FilterConfig {
                    auto_reference: !a.no_hulls,
                    max_linear_speed: a.max_linear_speed,
                    ..FilterConfig::node_defaults()
                },
                &starts,
                episodes,
                a.seed,
                match a.speed {
                    Some(v) => {
                        let top = arm_top_speed(&task);
                        let limit = a.max_linear_speed;
                        if v > top && !(limit > 0.0 && limit <= top) {
                            eprintln!(
                                "warning: --speed {v} is faster than the arm of task '{}' goes in \
                                 every direction ({top}): the dynamics limit the filtered command \
                                 axis by axis, which bends it, so these runs may enter what the \
                                 filter kept them out of (--max-linear-speed, the node's \
                                 max_linear_speed, set to the arm's limit scales a command as a \
                                 whole before filtering it)",
                                task.name()
                            );
                        }
                        v
                    }
                    None => {
                        nominal_speed(&task).map_err(|e| anyhow::anyhow!("{e} with --speed"))?
                    }
                },
            )?
        }
        None => {
            if let Err(e) = PolicySpace::of(&task) {
                anyhow::bail!(
                    "task '{}' has no DSM policy ({e}): give the CRL policy with --policy",
                    task.name()
                );
            }
            evaluate(
                &task,
                &m.network,
                &m.dsm,
                m.threshold,
                &m.starts,
                episodes,
                a.seed,
            )?
        }
    };
    if let Some(why) = &e.goal_blocked {
        // The goal-reached rate below then measures the model, not the filter's tuning.
        eprintln!(
            "warning: no run through the safety filter that starts outside its margin can reach \
             the task's goal: {why}"
        );
        let within = (e.unsafe_counts.episodes as f64 * e.started_within_margin).round();
        if within > 0.0 {
            // Only these can reach it: the filter lets a robot inside its margin move, not out.
            eprintln!(
                "warning: {within} of {} runs start inside the learned obstacle or within the filter's \
                 margin of it; those may still reach the goal",
                e.unsafe_counts.episodes
            );
        }
    }
    // Without a true constraint (a real robot's task) nothing is unsafe by definition: say so, and
    // write null rather than a rate of 0.
    let truth = !task.true_constraint.is_empty();
    if a.json {
        let v = serde_json::json!({
            "iou": e.iou, "recall": e.recall, "precision": e.precision,
            "all_infeasible_iou": e.confusion.all_infeasible_iou(),
            "unsafe_rate": truth.then_some(e.unsafe_rate),
            "violating_episodes": truth.then_some(e.violating_episodes),
            "goal_reached": (!task.spec.goal.is_none()).then_some(e.goal_reached),
            "stopped": (!task.spec.goal.is_none()).then_some(e.stopped),
            "guided": e.guided,
            "held_back": a.filter.then_some(e.held_back),
            "started_within_margin": a.filter.then_some(e.started_within_margin),
            "mean_return": e.mean_return,
            "steps": e.unsafe_counts.steps,
        });
        println!("{v}");
    } else {
        println!("{} on task '{}'", a.model.display(), task.name());
        if truth {
            println!(
                "  IoU                 {:.4} (predicting every point infeasible: {:.4})",
                e.iou,
                e.confusion.all_infeasible_iou()
            );
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
        } else {
            println!(
                "  no true constraint in the task file: IoU and the unsafe rate are not measured; \
                 the {} episodes' runs are",
                e.unsafe_counts.episodes
            );
        }
        if task.spec.goal.is_none() {
            println!("  goal reached        none (the task has no goal)");
            println!("  mean return         {:.1}", e.mean_return);
        } else {
            println!("  goal reached        {:.1} %", 100.0 * e.goal_reached);
            let short = e.unsafe_counts.episodes as f64 * (1.0 - e.goal_reached);
            if short > 0.5 {
                // Stalled or slow: a robot that stops short is safe only by being useless.
                let stopped = (e.unsafe_counts.episodes as f64 * e.stopped).round();
                println!(
                    "  short of the goal   {} stopped (still over their last second), {} still moving when the horizon ended",
                    stopped,
                    short.round() - stopped
                );
                if a.filter {
                    // What a deployment's controller would have been told on /diagnostics.
                    println!(
                        "  held back           {} ended with the filter reporting the command held back by the learned constraint",
                        (e.unsafe_counts.episodes as f64 * e.held_back).round()
                    );
                }
            }
        }
        if a.filter && e.started_within_margin > 0.0 {
            println!(
                "  started in margin   {} of {} started inside the learned obstacle or within the filter's margin of it",
                (e.unsafe_counts.episodes as f64 * e.started_within_margin).round(),
                e.unsafe_counts.episodes
            );
        }
        if e.guided > 0.0 {
            // What the reported goal rate owes to the evaluation's planner, which a deployment
            // through the safety filter does not have.
            println!(
                "  guided              {} of {} stalled in front of a learned obstacle and were guided round it (the safety filter does not plan: check a deployment with --filter)",
                (e.unsafe_counts.episodes as f64 * e.guided).round(),
                e.unsafe_counts.episodes
            );
        }
    }
    if a.show_violations {
        for (ep, step, s) in &e.first_violations {
            eprintln!("episode {ep}: first violation at step {step}, state {s:?}");
        }
    }
    if a.show_short {
        for (ep, s, held) in &e.short_of_goal {
            let why = if *held {
                ", held back by the filter"
            } else {
                ""
            };
            eprintln!("episode {ep}: ended short of the goal at {s:?}{why}");
        }
    }
    Ok(())
}
