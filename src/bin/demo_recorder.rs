//! demo_recorder: records demonstrations from `ee_pose` and the applied twist (`applied_twist`),
//! segmented by `~/start` / `~/stop` or automatically (start on motion, stop at the goal or when idle);
//! writes the set atomically as CSV (the CLI's format) after every demonstration and on shutdown, so
//! nothing recorded is lost; publishes the count on `~/count` (latched).
use futures::StreamExt;
use futures::executor::LocalPool;
use futures::task::LocalSpawnExt;
use pucl::recorder::{AutoSegment, Recorder};
use pucl::ros::{self, param_bool, param_f64, param_string};
use r2r::QosProfile;
use r2r::geometry_msgs::msg::{PoseStamped, TwistStamped};
use r2r::std_srvs::srv::Trigger;
use std::cell::RefCell;
use std::rc::Rc;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let ctx = r2r::Context::create()?;
    let mut node = r2r::Node::create(ctx, "demo_recorder", "")?;
    let task = ros::param_task(&node)?;
    let output = param_string(
        &node,
        "output",
        "demos.csv",
        "demonstration file written (CSV, or .json)",
    );
    let pose_topic = param_string(
        &node,
        "pose_topic",
        "ee_pose",
        "end-effector pose (PoseStamped)",
    );
    let twist_topic = param_string(
        &node,
        "applied_twist_topic",
        "applied_twist",
        "applied twist (TwistStamped)",
    );
    let auto = param_bool(
        &node,
        "auto_segment",
        false,
        "start on motion, stop at the goal or when idle",
    );
    let motion = param_f64(
        &node,
        "motion_threshold",
        0.005,
        "speed (m/s) that counts as motion",
    );
    let idle = param_f64(
        &node,
        "idle_timeout",
        1.0,
        "s without motion that ends a demonstration",
    );
    let logger = node.logger().to_string();
    let auto = auto.then_some(AutoSegment {
        motion_threshold: motion,
        idle_timeout: idle,
    });
    let recorder = Rc::new(RefCell::new(Recorder::new(task, auto)));
    let count_pub = node.create_publisher::<r2r::std_msgs::msg::UInt32>(
        "~/count",
        QosProfile::default().transient_local().keep_last(1),
    )?;
    // Save the whole set atomically and publish the count.
    let save = {
        let (r, output, logger) = (recorder.clone(), output.clone(), logger.clone());
        move || -> Result<String, String> {
            let r = r.borrow();
            let _ = count_pub.publish(&r2r::std_msgs::msg::UInt32 {
                data: r.demos.len() as u32,
            });
            if r.demos.is_empty() {
                return Ok("no demonstrations yet".into());
            }
            r.demos
                .save(std::path::Path::new(&output), r.task().name())
                .map_err(|e| e.to_string())?;
            let msg = format!(
                "{} demonstrations ({} steps) in {output}",
                r.demos.len(),
                r.demos.total_steps()
            );
            r2r::log_info!(&logger, "{msg}");
            Ok(msg)
        }
    };
    let save = Rc::new(save);
    let _ = save();

    let pool = LocalPool::new();
    let spawner = pool.spawner();
    let reliable = QosProfile::default().reliable().keep_last(100);
    let mut poses = node.subscribe::<PoseStamped>(&pose_topic, reliable.clone())?;
    let mut twists = node.subscribe::<TwistStamped>(&twist_topic, reliable)?;
    // The simulator publishes the pose and the twist that led to it with the same stamp: pair them.
    let pending_pose = Rc::new(RefCell::new(
        None::<(r2r::builtin_interfaces::msg::Time, [f64; 3])>,
    ));
    let pending_twist = Rc::new(RefCell::new(
        None::<(r2r::builtin_interfaces::msg::Time, [f64; 3])>,
    ));
    let feed = {
        let (r, pp, pt, save) = (
            recorder.clone(),
            pending_pose.clone(),
            pending_twist.clone(),
            save.clone(),
        );
        move || {
            let matched = match (&*pp.borrow(), &*pt.borrow()) {
                (Some((a, p)), Some((b, v))) if a == b => Some((*p, *v)),
                _ => None,
            };
            if let Some((p, v)) = matched {
                *pp.borrow_mut() = None;
                *pt.borrow_mut() = None;
                let ended = r.borrow_mut().sample(ros::mono_now(), &p, &v);
                if ended.is_some() {
                    let _ = save();
                }
            }
        }
    };
    let feed = Rc::new(feed);
    let (pp, f) = (pending_pose.clone(), feed.clone());
    spawner.spawn_local(async move {
        while let Some(m) = poses.next().await {
            let q = m.pose.position;
            *pp.borrow_mut() = Some((m.header.stamp, [q.x, q.y, q.z]));
            f();
        }
    })?;
    let (pt, f) = (pending_twist.clone(), feed.clone());
    spawner.spawn_local(async move {
        while let Some(m) = twists.next().await {
            let l = m.twist.linear;
            *pt.borrow_mut() = Some((m.header.stamp, [l.x, l.y, l.z]));
            f();
        }
    })?;
    let mut starts = node.create_service::<Trigger::Service>("~/start", QosProfile::default())?;
    let r = recorder.clone();
    spawner.spawn_local(async move {
        while let Some(req) = starts.next().await {
            let out = r.borrow_mut().start();
            let _ = req.respond(Trigger::Response {
                success: out.is_ok(),
                message: out.map(|_| "recording".to_string()).unwrap_or_else(|e| e),
            });
        }
    })?;
    let mut stops = node.create_service::<Trigger::Service>("~/stop", QosProfile::default())?;
    let (r, s) = (recorder.clone(), save.clone());
    spawner.spawn_local(async move {
        while let Some(req) = stops.next().await {
            let out = r.borrow_mut().stop();
            let out = out.and_then(|n| s().map(|m| format!("demonstration of {n} steps; {m}")));
            let _ = req.respond(Trigger::Response {
                success: out.is_ok(),
                message: out.unwrap_or_else(|e| e),
            });
        }
    })?;
    ros::spin(node, pool);
    // Shutting down (SIGINT/SIGTERM): keep a demonstration in progress and write everything.
    if recorder.borrow().is_recording() {
        let _ = recorder.borrow_mut().stop();
    }
    if let Err(e) = save() {
        r2r::log_error!(&logger, "could not write the demonstrations: {e}");
    }
    Ok(())
}
