//! safety_filter: between a controller and the arm. Subscribes the nominal command (`cmd_vel_in`) and
//! the end-effector pose (`ee_pose`), publishes the safe command on `cmd_vel_out` on every input and on
//! a timer; stale or non-finite input and a missing model give a zero twist, with the reason on
//! `/diagnostics` and in the log, as is (WARN) a command the learned constraint has held back for a
//! second. `~/enable` (SetBool) switches to pass-through; `~/reload` (Trigger)
//! and a changed model file reload the model. Angular velocity passes unchanged.
use futures::StreamExt;
use pucl::deploy::filter::{FilterConfig, NODE_TAIL_EFFECT, SafetyFilter, Status};
use pucl::deploy::model::ConstraintModel;
use pucl::ros::params::{self, LiveParameters};
use pucl::ros::{self, ERROR, OK, WARN, param_bool, param_f64, param_string};
use r2r::geometry_msgs::msg::{PoseStamped, Twist, TwistStamped, Vector3};
use r2r::std_srvs::srv::{SetBool, Trigger};
use r2r::{ParameterValue, QosProfile};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::task::LocalSet;

/// How often /diagnostics repeats an unchanged status (diagnostic_updater's default period).
const DIAGNOSTICS_PERIOD: Duration = Duration::from_secs(1);

fn twist(v: &[f64; 6]) -> Twist {
    Twist {
        linear: Vector3 {
            x: v[0],
            y: v[1],
            z: v[2],
        },
        angular: Vector3 {
            x: v[3],
            y: v[4],
            z: v[5],
        },
    }
}

fn values(t: &Twist) -> [f64; 6] {
    [
        t.linear.x,
        t.linear.y,
        t.linear.z,
        t.angular.x,
        t.angular.y,
        t.angular.z,
    ]
}

#[derive(Clone)]
enum Out {
    Plain(r2r::Publisher<Twist>),
    Stamped(r2r::Publisher<TwistStamped>, String),
}

impl Out {
    /// Publish `v`, stamped now in `frame` (the default frame when none).
    fn publish(&self, v: &[f64; 6], frame: Option<String>) {
        match self {
            Out::Plain(p) => {
                let _ = p.publish(&twist(v));
            }
            Out::Stamped(p, default_frame) => {
                let header = r2r::std_msgs::msg::Header {
                    stamp: ros::stamp(),
                    frame_id: frame.unwrap_or_else(|| default_frame.clone()),
                };
                let _ = p.publish(&TwistStamped {
                    header,
                    twist: twist(v),
                });
            }
        }
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let ctx = r2r::Context::create()?;
    let mut node = r2r::Node::create(ctx, "safety_filter", "")?;
    let d = FilterConfig::default();
    let model_path = param_string(
        &node,
        "model_path",
        "",
        "constraint model file (pucl learn --out)",
    );
    let stamped = param_bool(
        &node,
        "enable_stamped_cmd_vel",
        true,
        "TwistStamped (true) or Twist (false) in and out",
    );
    let cmd_in = param_string(
        &node,
        "cmd_vel_in_topic",
        "cmd_vel_in",
        "nominal command from the controller",
    );
    let cmd_out = param_string(
        &node,
        "cmd_vel_out_topic",
        "cmd_vel_out",
        "safe command to the arm",
    );
    let pose_topic = param_string(
        &node,
        "pose_topic",
        "ee_pose",
        "end-effector pose (PoseStamped)",
    );
    let frame_id = param_string(
        &node,
        "frame_id",
        "base_link",
        "frame of unstamped output commands",
    );
    let config = FilterConfig {
        pose_timeout: param_f64(
            &node,
            "pose_timeout",
            d.pose_timeout,
            "seconds after which the pose is stale: stop",
        ),
        cmd_timeout: param_f64(
            &node,
            "cmd_timeout",
            d.cmd_timeout,
            "seconds after which the command is stale: stop",
        ),
        stop_pub_timeout: param_f64(
            &node,
            "stop_pub_timeout",
            d.stop_pub_timeout,
            "seconds of publishing zeros before going quiet",
        ),
        lookahead_time: param_f64(
            &node,
            "lookahead_time",
            d.lookahead_time,
            "horizon of the sampled-data lookahead (s)",
        ),
        tail_effect: Some(param_bool(
            &node,
            "tail_effect",
            NODE_TAIL_EFFECT,
            "also modulate commands moving away from the learned obstacle",
        )),
        safety_margin: {
            let m = param_f64(
                &node,
                "safety_margin",
                -1.0,
                "distance kept from the learned boundary (negative: the model's)",
            );
            (m >= 0.0).then_some(m)
        },
        reference_point: {
            let r = ros::param_f64_array(
                &node,
                "reference_point",
                &[],
                "point inside the learned obstacle (empty: use the normal)",
            );
            (r.len() == 3).then_some(r)
        },
        auto_reference: param_bool(
            &node,
            "auto_reference",
            d.auto_reference,
            "modulate around the star-shaped hull of the nearest learned obstacle",
        ),
        reference_axis: {
            let axis = ros::param_f64_array(
                &node,
                "reference_axis",
                d.reference_axis.as_deref().unwrap_or(&[]),
                "axis the reference point moves along, level with the robot ([0.0]: fixed); a learned \
                 wall across the workspace along x or y turns it to that axis",
            );
            if axis.iter().all(|c| *c == 0.0) {
                None
            } else if axis.len() == 3 && axis.iter().all(|c| c.is_finite()) {
                Some(axis)
            } else {
                return Err(format!(
                    "parameter reference_axis must be 3 finite numbers, or [0.0] for none; got {axis:?}"
                )
                .into());
            }
        },
        saddle_escape: param_bool(
            &node,
            "saddle_escape",
            d.saddle_escape,
            "slide along the learned boundary instead of stalling in front of it",
        ),
        use_header_stamp: param_bool(
            &node,
            "use_header_stamp",
            d.use_header_stamp,
            "age poses and commands by their header stamps when set (false: by arrival)",
        ),
        max_clock_skew: param_f64(
            &node,
            "max_clock_skew",
            d.max_clock_skew,
            "seconds a stamp may be ahead of this node's clock; further ahead stops the arm",
        ),
        max_linear_speed: {
            let v = param_f64(
                &node,
                "max_linear_speed",
                d.max_linear_speed,
                "m/s: a faster command's linear velocity is scaled as a whole to this speed before \
                 it is filtered (0: no limit); the arm's limit, where the arm would limit each axis \
                 itself",
            );
            params::non_negative_number(&r2r::ParameterValue::Double(v))
                .map_err(|e| format!("parameter max_linear_speed: {e}"))?;
            v
        },
    };
    let period = param_f64(
        &node,
        "publish_period",
        0.02,
        "seconds between timer outputs",
    );
    let watch_period = param_f64(
        &node,
        "watch_period",
        0.5,
        "seconds between checks of the model file",
    );
    let enabled = param_bool(
        &node,
        "enabled",
        true,
        "filter on start (false: pass-through)",
    );

    let reliable = QosProfile::default().reliable().keep_last(10);
    let out = if stamped {
        Out::Stamped(
            node.create_publisher::<TwistStamped>(&cmd_out, reliable.clone())?,
            frame_id.clone(),
        )
    } else {
        Out::Plain(node.create_publisher::<Twist>(&cmd_out, reliable.clone())?)
    };
    let diag_pub = node.create_publisher::<r2r::diagnostic_msgs::msg::DiagnosticArray>(
        "/diagnostics",
        QosProfile::default(),
    )?;
    let name = format!("{}: safety_filter", node.name()?);
    let logger = node.logger().to_string();

    // Each output must stay safe until the next one: the horizon covers at least one timer period.
    let mut config = config;
    if period > config.lookahead_time {
        r2r::log_warn!(
            node.logger(),
            "lookahead_time {} s is shorter than publish_period {period} s: checking {period} s ahead",
            config.lookahead_time
        );
        config.lookahead_time = period;
    }
    let filter = Rc::new(RefCell::new(SafetyFilter::new(config)));
    filter.borrow_mut().set_enabled(enabled);
    let last_status = Rc::new(RefCell::new(None::<Status>));
    let last_diagnostics = Rc::new(Cell::new(None::<Instant>));
    // Compute and publish the output; report status changes in the log, and the status on
    // /diagnostics when it changes and once a second besides (as diagnostic_updater does), so that a
    // monitor that starts later, or missed the change during discovery, still reads it.
    let emit = {
        let (filter, last_status, last_diagnostics, name, logger, out, diag_pub) = (
            filter.clone(),
            last_status.clone(),
            last_diagnostics.clone(),
            name.clone(),
            logger.clone(),
            out.clone(),
            diag_pub.clone(),
        );
        move |frame: Option<String>| {
            let o = filter.borrow_mut().output(ros::mono_now());
            if o.publish {
                out.publish(&o.twist, frame);
            }
            let changed = last_status.borrow().as_ref().map(std::mem::discriminant)
                != Some(std::mem::discriminant(&o.status));
            if changed {
                if o.status.is_stop() || matches!(o.status, Status::Held { .. }) {
                    r2r::log_warn!(&logger, "{}", o.status.message());
                } else {
                    r2r::log_info!(&logger, "{}", o.status.message());
                }
            }
            let due = last_diagnostics
                .get()
                .is_none_or(|t| t.elapsed() >= DIAGNOSTICS_PERIOD);
            if changed || due {
                let level = if o.status.is_stop() {
                    ERROR
                } else if matches!(o.status, Status::PassThrough | Status::Held { .. }) {
                    WARN
                } else {
                    OK
                };
                // The status names the first fault only (no command hides no model): the model
                // key says whether one is loaded whatever the status.
                let model = filter
                    .borrow()
                    .model()
                    .map_or_else(|| "none".to_string(), |m| format!("task {}", m.task));
                let _ = diag_pub.publish(&ros::diagnostics(
                    &name,
                    level,
                    &o.status.message(),
                    &[("publishing", o.publish.to_string()), ("model", model)],
                ));
                last_diagnostics.set(Some(Instant::now()));
            }
            *last_status.borrow_mut() = Some(o.status);
        }
    };
    let emit = Rc::new(emit);
    let version = Rc::new(RefCell::new(None));
    // Load, validate and prepare a model on another thread, then swap it in: commands keep being
    // answered during a reload. A failed reload keeps the previous model and says so on /diagnostics.
    let reload = {
        let (f, install, path) = (filter.clone(), filter.clone(), model_path.clone());
        ros::model_reload(
            model_path.clone(),
            version.clone(),
            diag_pub.clone(),
            name.clone(),
            move || {
                let (config, path) = (f.borrow().config.clone(), path.clone());
                move |m: ConstraintModel| {
                    if let Some(e) = m.not_in_metres() {
                        return Err(e);
                    }
                    let mut msg = format!("loaded {path}: task {}, {} inputs", m.task, m.dim());
                    if m.workspace.is_some() && m.demonstrated_states.is_empty() {
                        msg += "; it holds no demonstrated states (an older model file): its hulls \
                                do not lie farther out at faces no demonstration passed; learn it \
                                again for that";
                    }
                    let prepared = SafetyFilter::prepare(&config, Arc::new(m))?;
                    if let Some(axis) = prepared.turned_axis() {
                        msg += &format!(
                            "; its largest learned obstacle runs through the workspace along \
                             {axis:?}: round that axis instead of reference_axis (over it, not along it)"
                        );
                    }
                    Ok((prepared, msg))
                }
            },
            move |(prepared, msg)| {
                install.borrow_mut().install(prepared);
                msg
            },
        )
    };
    match futures::executor::block_on(reload()) {
        Ok(m) => r2r::log_info!(&logger, "{m}"),
        Err(e) => r2r::log_error!(&logger, "model not loaded: {e}"),
    }

    let tasks = LocalSet::new();
    // `ros2 param set` on a running filter: the behaviour parameters take effect on the next command.
    let live = LiveParameters::new()
        .with("safety_margin", params::finite_number)
        .with("lookahead_time", params::positive_number)
        .with("pose_timeout", params::positive_number)
        .with("cmd_timeout", params::positive_number)
        .with("stop_pub_timeout", params::positive_number)
        .with("max_clock_skew", params::finite_number)
        .with("max_linear_speed", params::non_negative_number)
        .with("tail_effect", params::boolean)
        .with("saddle_escape", params::boolean)
        .with("use_header_stamp", params::boolean)
        .with("enabled", params::boolean);
    let mut changes = params::serve_parameters(&mut node, &tasks, live)?;
    let (f, l, again) = (filter.clone(), logger.clone(), reload.clone());
    tasks.spawn_local(async move {
        while let Some((name, value)) = changes.next().await {
            {
                let mut f = f.borrow_mut();
                let (n, b) = (
                    params::number(&value),
                    matches!(value, ParameterValue::Bool(true)),
                );
                let c = &mut f.config;
                match (name.as_str(), n) {
                    ("safety_margin", Some(m)) => c.safety_margin = (m >= 0.0).then_some(m),
                    ("lookahead_time", Some(t)) => c.lookahead_time = t.max(period),
                    ("pose_timeout", Some(t)) => c.pose_timeout = t,
                    ("cmd_timeout", Some(t)) => c.cmd_timeout = t,
                    ("stop_pub_timeout", Some(t)) => c.stop_pub_timeout = t,
                    ("max_clock_skew", Some(t)) => c.max_clock_skew = t,
                    ("max_linear_speed", Some(v)) => c.max_linear_speed = v,
                    ("tail_effect", _) => c.tail_effect = Some(b),
                    ("saddle_escape", _) => c.saddle_escape = b,
                    ("use_header_stamp", _) => c.use_header_stamp = b,
                    ("enabled", _) => f.set_enabled(b),
                    _ => continue,
                }
            }
            r2r::log_info!(&l, "parameter {name} set to {value:?}");
            // The hulls leave the task's goal open by the margin they were built with: build them
            // again (off this thread; the new margin applies to the very next command meanwhile).
            if name == "safety_margin" {
                match again().await {
                    Ok(m) => r2r::log_info!(&l, "hulls built again for the new margin: {m}"),
                    Err(e) => r2r::log_warn!(&l, "hulls not built again: {e}"),
                }
            }
        }
    });
    let (f, e) = (filter.clone(), emit.clone());
    // Best effort reads a driver's sensor-data pose as well as a reliable one (Nav2's
    // collision_monitor reads its sources so): a lost pose is replaced by the next, and one that
    // stops coming stops the arm (pose_timeout). Commands stay reliable.
    let pose_qos = QosProfile::default().best_effort().keep_last(10);
    let mut poses = node.subscribe::<PoseStamped>(&pose_topic, pose_qos)?;
    tasks.spawn_local(async move {
        while let Some(p) = poses.next().await {
            let q = p.pose.position;
            f.borrow_mut().set_pose_stamped(
                ros::mono_now(),
                ros::stamp_age(&p.header.stamp),
                [q.x, q.y, q.z],
            );
        }
        drop(e);
    });
    let (f, e) = (filter.clone(), emit.clone());
    if stamped {
        let mut cmds = node.subscribe::<TwistStamped>(&cmd_in, reliable.clone())?;
        tasks.spawn_local(async move {
            while let Some(c) = cmds.next().await {
                f.borrow_mut().set_command_stamped(
                    ros::mono_now(),
                    ros::stamp_age(&c.header.stamp),
                    values(&c.twist),
                );
                e(Some(c.header.frame_id.clone()).filter(|s| !s.is_empty()));
            }
        });
    } else {
        let mut cmds = node.subscribe::<Twist>(&cmd_in, reliable)?;
        tasks.spawn_local(async move {
            while let Some(c) = cmds.next().await {
                f.borrow_mut().set_command(ros::mono_now(), values(&c));
                e(None);
            }
        });
    }
    let mut timer = node.create_wall_timer(Duration::from_secs_f64(period.max(0.001)))?;
    let e = emit.clone();
    tasks.spawn_local(async move {
        while timer.tick().await.is_ok() {
            e(None);
        }
    });
    let mut enables = node.create_service::<SetBool::Service>("~/enable", QosProfile::default())?;
    let (f, log) = (filter.clone(), logger.clone());
    tasks.spawn_local(async move {
        while let Some(req) = enables.next().await {
            f.borrow_mut().set_enabled(req.message.data);
            let message = if req.message.data {
                "filtering"
            } else {
                "pass-through"
            };
            ros::respond(
                req,
                SetBool::Response {
                    success: true,
                    message: message.into(),
                },
                &log,
            );
        }
    });
    let reloads = node.create_service::<Trigger::Service>("~/reload", QosProfile::default())?;
    let watch = Duration::from_secs_f64(watch_period.max(0.05));
    ros::spawn_model_reloading(
        &tasks,
        reloads,
        watch,
        model_path.clone(),
        version.clone(),
        reload.clone(),
        logger.clone(),
    );
    // The stop contract: on SIGINT/SIGTERM the last output is a zero twist, so that a downstream
    // controller holding the last command does not drive on with it.
    ros::spin_then(node, tasks, move || {
        out.publish(&[0.0; 6], None);
        let _ = diag_pub.publish(&ros::diagnostics(
            &name,
            ERROR,
            "stop: shutting down (published a zero twist)",
            &[("publishing", "false".into())],
        ));
    });
    Ok(())
}
