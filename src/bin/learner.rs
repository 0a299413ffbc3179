//! learner: the ROS action `~/learn` (pucl_interfaces/action/LearnConstraint) runs DSM-PUCL on recorded
//! demonstrations with the task's simulator, on tokio's blocking pool so the node keeps answering;
//! feedback each iteration (|R|, |M|, loss, elapsed); the model is written atomically only when
//! learning succeeds, so a cancelled or killed run leaves the previous model intact; then the
//! constraint_server is asked to reload.
use futures::StreamExt;
use pucl::demos::DemoSet;
use pucl::deploy::model::ConstraintModel;
use pucl::learn::derive::Derived;
use pucl::learn::{LearnConfig, learn};
use pucl::ros::{self, param_string};
use pucl::task::Task;
use r2r::QosProfile;
use r2r::pucl_interfaces::action::LearnConstraint;
use r2r::std_srvs::srv::Trigger;
use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;
use tokio::task::LocalSet;

/// Everything a run needs, checked before learning starts (clear errors for bad goals).
fn prepare(
    goal: &LearnConstraint::Goal,
    defaults: &[String; 4],
) -> Result<(Task, DemoSet, LearnConfig, PathBuf, Vec<Derived>), String> {
    let pick = |given: &str, default: &str| {
        if given.is_empty() {
            default.to_string()
        } else {
            given.to_string()
        }
    };
    let task = Task::load(&pick(&goal.task, &defaults[0])).map_err(|e| e.to_string())?;
    let demos_path = pick(&goal.demos, &defaults[1]);
    if demos_path.is_empty() {
        return Err("no demonstrations given (goal.demos and parameter demos are empty)".into());
    }
    let demos = DemoSet::load(Path::new(&demos_path), &task).map_err(|e| e.to_string())?;
    let config = pick(&goal.config, &defaults[2]);
    // A task without settings of its own gets settings derived from the demonstrations.
    let (cfg, derived) = LearnConfig::for_task_data(
        &task,
        &demos,
        None,
        (!config.is_empty()).then_some(Path::new(&config)),
    )
    .map_err(|e| e.to_string())?;
    let out = pick(&goal.output, &defaults[3]);
    if out.is_empty() {
        return Err("no output model file (goal.output and parameter model_path are empty)".into());
    }
    // Refused now rather than after minutes of learning.
    pucl::error::check_output_path(Path::new(&out)).map_err(|e| e.to_string())?;
    Ok((task, demos, cfg, PathBuf::from(out), derived))
}

fn result(
    success: bool,
    message: String,
    path: &Path,
    iterations: usize,
    iou: f64,
) -> LearnConstraint::Result {
    LearnConstraint::Result {
        success,
        message,
        model_path: path.display().to_string(),
        iterations: iterations as u32,
        iou,
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let ctx = r2r::Context::create()?;
    let mut node = r2r::Node::create(ctx, "learner", "")?;
    let defaults = [
        param_string(
            &node,
            "task",
            "reach_obstacle_3d",
            "built-in task name or task file",
        ),
        param_string(
            &node,
            "demos",
            "demos.csv",
            "demonstration file (the demo_recorder's output)",
        ),
        param_string(
            &node,
            "config",
            "",
            "learn.yaml with overrides (empty: the task's defaults)",
        ),
        param_string(&node, "model_path", "model.json", "the model file to write"),
    ];
    let reload_service = param_string(
        &node,
        "reload_service",
        "/constraint_server/reload",
        "asked to reload after learning",
    );
    let logger = node.logger().to_string();
    let mut goals = node.create_action_server::<LearnConstraint::Action>("~/learn")?;
    let reload = node.create_client::<Trigger::Service>(&reload_service, QosProfile::default())?;
    let tasks = LocalSet::new();
    // `ros2 param list/get/dump` answer; every parameter is read at start.
    let _read_only = pucl::ros::params::serve_parameters(&mut node, &tasks, Default::default())?;
    let busy = Rc::new(Cell::new(false));
    tasks.spawn_local(async move {
        while let Some(req) = goals.next().await {
            if busy.get() {
                // One run at a time.
                let _ = req.reject();
                continue;
            }
            let Ok((mut goal, mut cancels)) = req.accept() else {
                continue;
            };
            let prepared = prepare(&goal.goal, &defaults);
            let (task, demos, cfg, out, notes) = match prepared {
                Ok((task, demos, cfg, out, derived)) => {
                    for d in &derived {
                        r2r::log_info!(&logger, "derived {} = {} ({})", d.key, d.value, d.rule);
                    }
                    // The result says it too: an action client should not need the log to learn
                    // that its task had no settings file, or that demonstrations stopped short.
                    let mut notes: String = derived
                        .iter()
                        .map(|d| format!("; derived {} = {}", d.key, d.value))
                        .collect();
                    for w in pucl::learn::demonstration_warnings(&task, &demos, &cfg) {
                        r2r::log_warn!(&logger, "{w}");
                        notes += &format!("; warning: {w}");
                    }
                    for n in pucl::learn::settings_notes(&task, &demos, &cfg) {
                        r2r::log_info!(&logger, "{n}");
                    }
                    (task, demos, cfg, out, notes)
                }
                Err(msg) => {
                    r2r::log_error!(&logger, "learn goal refused: {msg}");
                    let _ = goal.abort(result(false, msg, Path::new(""), 0, f64::NAN));
                    continue;
                }
            };
            busy.set(true);
            let seed = goal.goal.seed;
            let iterations = cfg.iterations as u32;
            let cancel = Arc::new(AtomicBool::new(false));
            // Learning runs on tokio's blocking pool; its progress comes back over a channel and
            // goes out as feedback while this task also watches for a cancel request.
            let (tx, mut progress) = tokio::sync::mpsc::unbounded_channel();
            let (flag, path) = (cancel.clone(), out.clone());
            let work = tokio::task::spawn_blocking(move || {
                learn(&task, &demos, &cfg, seed, &mut |st| {
                    let _ = tx.send(st.clone());
                    !flag.load(Ordering::SeqCst)
                })
                .map_err(|e| e.to_string())
                .and_then(|learned| {
                    let model = ConstraintModel::from_learned(&task, &demos, &cfg, seed, &learned);
                    model.save(&path).map_err(|e| e.to_string())?;
                    let iou = model.summary.iou.unwrap_or(f64::NAN);
                    Ok((learned.history.len(), iou, learned.stop_reason))
                })
            });
            tokio::pin!(work);
            let t0 = Instant::now();
            loop {
                let r = tokio::select! {
                    // Feedback first: every iteration is reported before the result.
                    biased;
                    Some(st) = progress.recv() => {
                        let _ = goal.publish_feedback(LearnConstraint::Feedback {
                            iteration: st.iteration as u32 + 1,
                            iterations,
                            reliable_infeasible: st.reliable_infeasible as u32,
                            memory_buffer: st.memory_buffer as u32,
                            loss: st.loss,
                            elapsed: t0.elapsed().as_secs_f64(),
                        });
                        continue;
                    }
                    Some(c) = cancels.next() => {
                        c.accept();
                        cancel.store(true, Ordering::SeqCst);
                        continue;
                    }
                    r = &mut work => r.unwrap_or_else(|e| Err(format!("the learning thread failed: {e}"))),
                };
                busy.set(false);
                match r {
                    Ok((n, iou, stopped)) => {
                        r2r::log_info!(
                            &logger,
                            "learned {} in {n} iterations (IoU {iou:.3}; {stopped})",
                            out.display()
                        );
                        // Why the loop ended (R stopped growing, or all iterations ran) is the
                        // first thing a user tuning `iterations` or the stop rule asks.
                        let _ = goal.succeed(result(
                            true,
                            format!("wrote {} ({stopped}){notes}", out.display()),
                            &out,
                            n,
                            iou,
                        ));
                        if let Ok(response) = reload.request(&Trigger::Request {}) {
                            // The constraint_server also reloads on its own when the file changes.
                            tokio::task::spawn_local(async move {
                                let _ = response.await;
                            });
                        }
                    }
                    Err(msg) if cancel.load(Ordering::SeqCst) => {
                        let _ = goal.cancel(result(
                            false,
                            format!("{msg}; the previous model is untouched"),
                            &out,
                            0,
                            f64::NAN,
                        ));
                    }
                    Err(msg) => {
                        r2r::log_error!(&logger, "learning failed: {msg}");
                        let _ = goal.abort(result(false, msg, &out, 0, f64::NAN));
                    }
                }
                break;
            }
        }
    });
    ros::spin(node, tasks);
    Ok(())
}
