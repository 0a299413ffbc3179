//! `pucl learn`: Algorithm 1 on a task's simulator with a progress bar (one line per iteration when not
//! on a terminal); writes the model file and, for CRL, the policy.
use anyhow::Result;
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use pucl::demos::DemoSet;
use pucl::deploy::model::ConstraintModel;
use pucl::learn::{
    IterationStats, LearnConfig, Method, PolicyKind, demonstration_warnings, learn, settings_notes,
};
use pucl::policy::crl::PolicyFile;
use pucl::task::Task;
use std::path::PathBuf;

#[derive(Args)]
pub struct LearnArgs {
    /// Built-in task name or path to a task YAML file (gives the simulator for the rollouts).
    #[arg(long)]
    task: String,
    /// Demonstrations (CSV or .json).
    #[arg(long)]
    demos: PathBuf,
    /// Settings (any subset) overriding config/learn/default.yaml and config/learn/<task>.yaml, or,
    /// for a task without such a file, the settings derived from the task and its demonstrations.
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
}

pub fn run(a: LearnArgs) -> Result<()> {
    for p in std::iter::once(&a.out).chain(&a.policy_out) {
        pucl::error::check_output_path(p)?;
    }
    let task = Task::load(&a.task)?;
    let set = DemoSet::load(&a.demos, &task)?;
    let (mut cfg, derived) =
        LearnConfig::for_task_data(&task, &set, a.policy, a.config.as_deref())?;
    if !derived.is_empty() {
        // Never a silent fallback: say what was derived and from what.
        eprintln!(
            "task '{}' has no settings file in config/learn/: settings derived from the task and its demonstrations{}",
            task.name(),
            if a.config.is_some() {
                " (your --config file overrides any of them)"
            } else {
                ""
            }
        );
        for d in &derived {
            eprintln!("  {} = {}: {}", d.key, d.value, d.rule);
        }
    }
    if let Some(m) = a.method {
        cfg.method = m;
    }
    for w in demonstration_warnings(&task, &set, &cfg) {
        eprintln!("warning: {w}");
    }
    for n in settings_notes(&task, &set, &cfg) {
        eprintln!("{n}");
    }
    if a.policy_out.is_some() && cfg.policy != PolicyKind::Crl {
        anyhow::bail!("--policy-out needs the CRL policy (--policy crl)");
    }
    let bar = ProgressBar::new(cfg.iterations as u64).with_style(
        ProgressStyle::with_template("learning {prefix} [{bar:25}] iteration {pos}/{len} {msg}")
            .expect("valid template"),
    );
    bar.set_prefix(task.name().to_string());
    let learned = learn(&task, &set, &cfg, a.seed, &mut |st| {
        show_progress(&bar, st);
        true
    })?;
    bar.finish_and_clear();
    let last = learned.history.last().expect("at least one iteration");
    if let Some(dc) = &learned.dsm.demonstrated_clearance {
        eprintln!(
            "margin_clear_of_demonstrations: {} demonstrated states keep less than twice the margin ({:.4}) from the learned boundary; the DSM policy's margin is lowered around them, down to {:.4} (the safety filter keeps {:.4})",
            dc.states.len(),
            learned.dsm.safety_margin,
            dc.margin_at_least(learned.dsm.safety_margin),
            learned.dsm.safety_margin
        );
    }
    let model = ConstraintModel::from_learned(&task, &set, &cfg, a.seed, &learned);
    model.save(&a.out)?;
    let measured = if task.true_constraint.is_empty() {
        "no true constraint in the task file: nothing to measure against".to_string()
    } else {
        format!(
            "IoU {:.3}, recall {:.3}, precision {:.3}",
            last.iou, last.recall, last.precision
        )
    };
    if let (Some(p), Some(pol)) = (&a.policy_out, &learned.policy) {
        PolicyFile::new(&task, a.seed, pol.clone()).save(p)?;
        println!("wrote {}: the CRL policy", p.display());
    }
    println!(
        "wrote {}: {} iterations in {:.1} s ({}), |M| {}, loss {:.4}, {measured}",
        a.out.display(),
        learned.history.len(),
        learned.seconds,
        learned.stop_reason,
        last.memory_buffer,
        last.loss,
    );
    Ok(())
}

fn show_progress(bar: &ProgressBar, st: &IterationStats) {
    bar.set_position(st.iteration as u64 + 1);
    let crl = match (st.policy_return, st.policy_cost, st.nu) {
        (Some(r), Some(c), Some(nu)) => format!(", policy return {r:.2} cost {c:.3} nu {nu:.3}"),
        _ => String::new(),
    };
    if st.goal_joined {
        // Said once, above the bar (or as its own line without a terminal).
        bar.suspend(|| {
            eprintln!(
                "iteration {}: the training made the goal infeasible; the goal joined the demonstrated states and zeta trained again",
                st.iteration
            )
        });
    }
    // R states next to M's repeat them: say so where there are any (they do not keep the loop going).
    let repeats = match st.new_infeasible {
        Some(n) if n < st.reliable_infeasible => format!(" ({n} new)"),
        _ => String::new(),
    };
    // NaN: no true constraint to measure against.
    let iou = if st.iou.is_nan() {
        "-".to_string()
    } else {
        format!("{:.3}", st.iou)
    };
    bar.set_message(format!(
        "|R| {}{repeats} |M| {} loss {:.4} IoU {iou}{crl}",
        st.reliable_infeasible, st.memory_buffer, st.loss
    ));
    if bar.is_hidden() {
        // Not a terminal: one line per iteration instead of the bar.
        eprintln!(
            "iteration {}: kept {}/{} rollouts, |R| {}{repeats}, |M| {}, loss {:.4}, IoU {iou}, {:.1} s{crl}",
            st.iteration,
            st.kept,
            st.rollouts,
            st.reliable_infeasible,
            st.memory_buffer,
            st.loss,
            st.seconds
        );
    }
}
