//! demo_recorder: records demonstrations from `ee_pose` and the applied twist (`applied_twist`), or
//! from the pose alone resampled at the task's period (a real arm's driver: no twist stamped like
//! its pose), or from `/tf` and `/tf_static` between two frames (`frames`: an arm that publishes only
//! its frames), segmented by `~/start` / `~/stop` or automatically (start on motion, stop at the goal
//! or when idle);
//! writes the set atomically as CSV (the CLI's format) after every demonstration and on shutdown, so
//! nothing recorded is lost, and if `bag` is set, the pose and twist messages (or the transforms)
//! received while recording as an MCAP bag (rosbag2's storage); publishes the count on `~/count`
//! (latched).
use futures::StreamExt;
use pucl::demos::bag::{Bag, Channel, absolute_topic, ament_prefixes, ros2msg_schema};
use pucl::demos::pairing::StampPairs;
use pucl::demos::recorder::{AutoSegment, POSE_GAP, PoseResampler, Recorder};
use pucl::demos::tf::{LiveChain, TF_TYPE, Transform, parse_frames};
use pucl::ros::{self, param_bool, param_f64, param_string};
use pucl::task::Task;
use r2r::geometry_msgs::msg::{PoseStamped, TwistStamped};
use r2r::std_srvs::srv::Trigger;
use r2r::tf2_msgs::msg::TFMessage;
use r2r::{QosProfile, WrappedTypesupport};
use std::cell::RefCell;
use std::rc::Rc;
use tokio::task::LocalSet;

/// The bag and the indices of its pose and twist channels (no twist channel without a twist topic).
type BagChannels = (Rc<RefCell<Bag>>, usize, Option<usize>);

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
        "applied twist (TwistStamped) stamped like the pose it led to; empty: none, the rows are \
         the poses resampled at the task's period with the velocity between them",
    );
    let frames = param_string(
        &node,
        "frames",
        "",
        "BASE:TIP (e.g. base_link:tool0): record frame TIP's position in frame BASE from /tf and \
         /tf_static instead of pose_topic, resampled at the task's period as with \
         applied_twist_topic empty; empty: read pose_topic",
    );
    let frames = if frames.is_empty() {
        None
    } else {
        let (base, tip) = parse_frames(&frames).map_err(|e| format!("parameter frames: {e}"))?;
        Some(LiveChain::new(base, tip))
    };
    let pose_only = twist_topic.is_empty() || frames.is_some();
    let auto = param_bool(
        &node,
        "auto_segment",
        false,
        "start on motion outside the goal region, stop at the goal or when idle",
    );
    let motion = param_f64(
        &node,
        "motion_threshold",
        AutoSegment::default().motion_threshold,
        "speed (m/s) that counts as motion; slower rows at either end of a demonstration are rest, dropped",
    );
    let idle = param_f64(
        &node,
        "idle_timeout",
        AutoSegment::default().idle_timeout,
        "s without motion that ends a demonstration",
    );
    let bag_path = param_string(
        &node,
        "bag",
        "",
        "MCAP bag of the messages received while recording (empty: none)",
    );
    let logger = node.logger().to_string();
    // The bag's two topics, with the schemas of the installed message definitions.
    let bag = if bag_path.is_empty() {
        None
    } else {
        let mut bag = Bag::new();
        let prefixes = ament_prefixes();
        let mut channel = |topic: &str, type_name: &str| -> Result<usize, String> {
            let schema = ros2msg_schema(type_name, &prefixes).map_err(|e| e.to_string())?;
            let topic = absolute_topic(topic);
            Ok(bag.add_channel(Channel {
                topic,
                type_name: type_name.into(),
                schema,
            }))
        };
        // With frames: /tf in the pose's place, /tf_static in the twist's.
        let (pose_ch, twist_ch) = if frames.is_some() {
            let tf = channel(TF, TF_TYPE)?;
            (tf, Some(channel(TF_STATIC, TF_TYPE)?))
        } else {
            let twist_ch = (!pose_only)
                .then(|| channel(&twist_topic, "geometry_msgs/msg/TwistStamped"))
                .transpose()?;
            (
                channel(&pose_topic, "geometry_msgs/msg/PoseStamped")?,
                twist_ch,
            )
        };
        Some((Rc::new(RefCell::new(bag)), pose_ch, twist_ch))
    };
    let auto = auto.then_some(AutoSegment {
        motion_threshold: motion,
        idle_timeout: idle,
    });
    let resampler = Rc::new(RefCell::new(PoseResampler::new(
        task.spec.dynamics.dt,
        POSE_GAP,
    )));
    // The pose's axes the task's positions read (a planar task's x and y); refuse a task no pose
    // drives rather than drop every sample.
    let axes = task
        .pose_axes()
        .map_err(|e| format!("parameter task: {e}"))?;
    let mut recorder = Recorder::new(task, auto);
    recorder.set_rest_speed(motion);
    let recorder = Rc::new(RefCell::new(recorder));
    let count_pub = node.create_publisher::<r2r::std_msgs::msg::UInt32>(
        "~/count",
        QosProfile::default().transient_local().keep_last(1),
    )?;
    // Save the whole set atomically and publish the count.
    let save = {
        let (r, output, logger) = (recorder.clone(), output.clone(), logger.clone());
        let bag = bag.as_ref().map(|b| b.0.clone());
        move || -> Result<String, String> {
            let r = r.borrow();
            // The count is published once the files hold that many: a client seeing it can read them.
            let count = || {
                let _ = count_pub.publish(&r2r::std_msgs::msg::UInt32 {
                    data: r.demos.len() as u32,
                });
            };
            if r.demos.is_empty() {
                count();
                return Ok("no demonstrations yet".into());
            }
            r.demos
                .save(std::path::Path::new(&output), r.task().name())
                .map_err(|e| e.to_string())?;
            let mut msg = format!(
                "{} demonstrations ({} steps) in {output}",
                r.demos.len(),
                r.demos.total_steps()
            );
            if let Some(bag) = &bag {
                let bag = bag.borrow();
                bag.save(std::path::Path::new(&bag_path))
                    .map_err(|e| format!("{bag_path}: {e}"))?;
                msg.push_str(&format!(", {} messages in {bag_path}", bag.len()));
            }
            count();
            r2r::log_info!(&logger, "{msg}");
            Ok(msg)
        }
    };
    let save = Rc::new(save);
    let _ = save();

    let tasks = LocalSet::new();
    // `ros2 param list/get/dump` answer; every parameter is read at start.
    let _read_only = pucl::ros::params::serve_parameters(&mut node, &tasks, Default::default())?;
    let reliable = QosProfile::default().reliable().keep_last(100);
    let poses = frames
        .is_none()
        .then(|| node.subscribe::<PoseStamped>(&pose_topic, reliable.clone()))
        .transpose()?;
    let twists = (!pose_only && frames.is_none())
        .then(|| node.subscribe::<TwistStamped>(&twist_topic, reliable.clone()))
        .transpose()?;
    // tf2's QoS: /tf reliable, /tf_static also transient local, so that the static transforms a
    // publisher sent before the recorder started still arrive.
    let transforms = frames
        .is_some()
        .then(|| -> r2r::Result<_> {
            let latched = reliable.clone().transient_local();
            Ok((
                node.subscribe::<TFMessage>(TF, reliable.clone())?,
                node.subscribe::<TFMessage>(TF_STATIC, latched)?,
            ))
        })
        .transpose()?;
    // The simulator publishes the pose and the twist that led to it with the same stamp: pair them.
    // Either topic may arrive several messages ahead of the other; each waits in a queue.
    type Stamp = (i32, u32);
    type Sample = (Stamp, [f64; 3], [f64; 3]);
    let pairs = Rc::new(RefCell::new(StampPairs::<Stamp, [f64; 3], [f64; 3]>::new()));
    // A stop waits for the samples stamped before it that are still in flight (the pose that reached
    // the goal may arrive after the request that ends the demonstration): until a pair stamped after
    // the request arrives (a driver publishing at its rate sends one within a period), or for FLUSH
    // seconds when nothing publishes (long enough for a reliable topic's repair on a busy machine).
    const FLUSH: f64 = 1.0;
    // Messages dropped without a partner before the current demonstration: a stop reports the rest.
    let dropped_before = Rc::new(std::cell::Cell::new(0usize));
    type PendingStop = (r2r::ServiceRequest<Trigger::Service>, f64, f64);
    let stopping = Rc::new(RefCell::new(Vec::<PendingStop>::new()));
    let finish_stops = {
        let (r, s, stopping) = (recorder.clone(), save.clone(), stopping.clone());
        let (pairs, dropped_before, logger) =
            (pairs.clone(), dropped_before.clone(), logger.clone());
        move |stamp: Option<f64>| {
            let now = ros::mono_now();
            let due: Vec<PendingStop> = {
                let mut st = stopping.borrow_mut();
                let (due, wait) = st
                    .drain(..)
                    .partition(|(_, t, t0)| stamp.is_some_and(|s| s >= *t) || now - t0 > FLUSH);
                *st = wait;
                due
            };
            for (req, _, _) in due {
                let out = r.borrow_mut().stop();
                let mut out =
                    out.and_then(|n| s().map(|m| format!("demonstration of {n} steps; {m}")));
                // A pose or twist lost in transport costs its sample: say so rather than stay silent.
                let lost = pairs.borrow().dropped() - dropped_before.get();
                for warning in end_warnings(lost, r.borrow().jumps()) {
                    r2r::log_warn!(&logger, "{warning}");
                    out = out.map(|m| format!("{m}; warning: {warning}"));
                }
                ros::respond(
                    req,
                    Trigger::Response {
                        success: out.is_ok(),
                        message: out.unwrap_or_else(|e| e),
                    },
                    &logger,
                );
            }
        }
    };
    let finish_stops = Rc::new(finish_stops);
    let feed = {
        let (r, save, fin) = (recorder.clone(), save.clone(), finish_stops.clone());
        let (pairs, dropped_before, logger) =
            (pairs.clone(), dropped_before.clone(), logger.clone());
        move |matched: Vec<Sample>| {
            for ((sec, nanosec), p, v) in matched {
                // A sample stamped at or after a stop request belongs to no stopped demonstration.
                fin(Some(seconds(&r2r::builtin_interfaces::msg::Time {
                    sec,
                    nanosec,
                })));
                let was_recording = r.borrow().is_recording();
                let (p, v) = (
                    Task::from_pose_axes(&axes, p),
                    Task::from_pose_axes(&axes, v),
                );
                let ended = r.borrow_mut().sample(ros::mono_now(), &p, &v);
                // Automatic segmentation: say when a demonstration starts and ends, and, as a stop
                // does, how many messages were lost without their partner while it was recorded.
                if !was_recording && r.borrow().is_recording() {
                    dropped_before.set(pairs.borrow().dropped());
                    r2r::log_info!(&logger, "motion: recording a demonstration");
                }
                if let Some(n) = ended {
                    r2r::log_info!(&logger, "demonstration of {n} steps ended (goal or idle)");
                    let lost = pairs.borrow().dropped() - dropped_before.get();
                    for warning in end_warnings(lost, r.borrow().jumps()) {
                        r2r::log_warn!(&logger, "{warning}");
                    }
                    let _ = save();
                }
            }
        }
    };
    let feed = Rc::new(feed);
    // While recording, keep the raw messages for the bag: received (log) time and header stamp. The
    // pose before a demonstration starts is its first state: it is held back until recording starts.
    let keep = {
        let (r, bag, tf_mode) = (recorder.clone(), bag.clone(), frames.is_some());
        let held = RefCell::new(None::<(usize, u64, u64, Vec<u8>)>);
        move |channel: fn(&BagChannels) -> Option<usize>,
              stamp: &r2r::builtin_interfaces::msg::Time,
              cdr: r2r::Result<Vec<u8>>| {
            let (Some(b), Ok(cdr)) = (&bag, cdr) else {
                return;
            };
            let Some(channel) = channel(b) else {
                return;
            };
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64);
            let stamp = stamp.sec.max(0) as u64 * 1_000_000_000 + u64::from(stamp.nanosec);
            let message = (channel, now, stamp, cdr);
            if tf_mode && Some(message.0) == b.2 {
                // Static transforms are kept whenever they come: they hold for the whole recording.
                b.0.borrow_mut()
                    .push(message.0, message.1, message.2, message.3);
            } else if r.borrow().is_recording() {
                let mut bag = b.0.borrow_mut();
                if let Some((c, t, s, m)) = held.borrow_mut().take() {
                    bag.push(c, t, s, m);
                }
                bag.push(message.0, message.1, message.2, message.3);
            } else if message.0 == b.1 {
                *held.borrow_mut() = Some(message);
            }
        }
    };
    let keep = Rc::new(keep);
    let key = |t: &r2r::builtin_interfaces::msg::Time| (t.sec, t.nanosec);
    let (pp, f, k, rs) = (pairs.clone(), feed.clone(), keep.clone(), resampler.clone());
    tasks.spawn_local(async move {
        let Some(mut poses) = poses else {
            return;
        };
        while let Some(m) = poses.next().await {
            k(|b| Some(b.1), &m.header.stamp, m.to_serialized_bytes());
            let q = m.pose.position;
            if pose_only {
                // Timed by its stamp (the driver's clock), or on arrival when it has none.
                let stamp = m.header.stamp;
                let t = if stamp.sec == 0 && stamp.nanosec == 0 {
                    seconds(&ros::stamp())
                } else {
                    seconds(&stamp)
                };
                let samples = rs.borrow_mut().push(t, &[q.x, q.y, q.z]);
                f(samples
                    .into_iter()
                    .map(|(t, p, v)| (time_of(t), [p[0], p[1], p[2]], [v[0], v[1], v[2]]))
                    .collect());
                continue;
            }
            let matched = pp
                .borrow_mut()
                .push_a(key(&m.header.stamp), [q.x, q.y, q.z]);
            f(matched);
        }
    });
    let (pt, f, k) = (pairs.clone(), feed.clone(), keep.clone());
    tasks.spawn_local(async move {
        let Some(mut twists) = twists else {
            return;
        };
        while let Some(m) = twists.next().await {
            k(|b| b.2, &m.header.stamp, m.to_serialized_bytes());
            let l = m.twist.linear;
            let matched = pt
                .borrow_mut()
                .push_b(key(&m.header.stamp), [l.x, l.y, l.z]);
            f(matched);
        }
    });
    // Transforms: the tool's position at each new stamp the chain completes, resampled as poses are.
    let chain = frames.map(|c| Rc::new(RefCell::new(c)));
    if let (Some((mut tf, mut tf_static)), Some(chain)) = (transforms, chain.clone()) {
        let on_message = {
            let (f, k, rs, log) = (
                feed.clone(),
                keep.clone(),
                resampler.clone(),
                logger.clone(),
            );
            move |m: TFMessage, is_static: bool| {
                let stamp = m.transforms.first().map(|t| t.header.stamp.clone());
                if let Some(stamp) = &stamp {
                    let channel = if is_static {
                        |b: &BagChannels| b.2
                    } else {
                        |b: &BagChannels| Some(b.1)
                    };
                    k(channel, stamp, m.to_serialized_bytes());
                }
                let mut c = chain.borrow_mut();
                for t in &m.transforms {
                    let (p, q) = (
                        t.transform.translation.clone(),
                        t.transform.rotation.clone(),
                    );
                    let link = Transform {
                        stamp: seconds(&t.header.stamp),
                        parent: &t.header.frame_id,
                        child: &t.child_frame_id,
                        translation: [p.x, p.y, p.z],
                        rotation: [q.x, q.y, q.z, q.w],
                    };
                    if let Err(e) = c.add(&link, is_static) {
                        r2r::log_warn!(&log, "{}: {e}", if is_static { TF_STATIC } else { TF });
                    }
                }
                for (t, p) in c.positions() {
                    let samples = rs.borrow_mut().push(t, &p);
                    f(samples
                        .into_iter()
                        .map(|(t, p, v)| (time_of(t), [p[0], p[1], p[2]], [v[0], v[1], v[2]]))
                        .collect());
                }
            }
        };
        let on_message = Rc::new(on_message);
        let on = on_message.clone();
        tasks.spawn_local(async move {
            while let Some(m) = tf.next().await {
                on(m, false);
            }
        });
        tasks.spawn_local(async move {
            while let Some(m) = tf_static.next().await {
                on_message(m, true);
            }
        });
    }
    let mut starts = node.create_service::<Trigger::Service>("~/start", QosProfile::default())?;
    let (r, p, d, log) = (
        recorder.clone(),
        pairs.clone(),
        dropped_before.clone(),
        logger.clone(),
    );
    // Read the transforms as they are now, at the request: what is still missing.
    let chain_now = chain.clone();
    let waiting_for_frames = move || {
        chain_now.as_ref().map(|c| {
            let missing = c.borrow().waiting_for().unwrap_or_else(|| {
                "the chain is complete, but no moving link has sent a transform yet".into()
            });
            format!("waiting for the frames on {TF} and {TF_STATIC}, read reliable: {missing}")
        })
    };
    // Reliable, so that nothing recorded is lost; a best-effort publisher (a driver's sensor-data
    // QoS) therefore does not match, which is the usual reason nothing arrives.
    let topics = if pose_only {
        format!(
            "waiting for a pose on {pose_topic}; it is read reliable: a publisher offering best \
             effort (sensor-data QoS) does not match"
        )
    } else {
        format!(
            "waiting for a pose on {pose_topic} paired with a twist on {twist_topic}; both are \
             read reliable: a publisher offering best effort (sensor-data QoS) does not match"
        )
    };
    tasks.spawn_local(async move {
        while let Some(req) = starts.next().await {
            d.set(p.borrow().dropped());
            let out = r.borrow_mut().start();
            let out = out.map_err(|e| {
                if r.borrow().has_pose() {
                    e
                } else {
                    format!("{e} ({})", waiting_for_frames().unwrap_or(topics.clone()))
                }
            });
            ros::respond(
                req,
                Trigger::Response {
                    success: out.is_ok(),
                    message: out.map(|_| "recording".to_string()).unwrap_or_else(|e| e),
                },
                &log,
            );
        }
    });
    let mut stops = node.create_service::<Trigger::Service>("~/stop", QosProfile::default())?;
    let (r, st, log) = (recorder.clone(), stopping.clone(), logger.clone());
    tasks.spawn_local(async move {
        while let Some(req) = stops.next().await {
            if r.borrow().is_recording() {
                st.borrow_mut()
                    .push((req, seconds(&ros::stamp()), ros::mono_now()));
            } else {
                ros::respond(
                    req,
                    Trigger::Response {
                        success: false,
                        message: "not recording: nothing to stop".into(),
                    },
                    &log,
                );
            }
        }
    });
    // Stops whose samples never come (nothing publishes) end after FLUSH.
    let mut flush_timer = node.create_wall_timer(std::time::Duration::from_millis(50))?;
    let fin = finish_stops.clone();
    tasks.spawn_local(async move {
        while flush_timer.tick().await.is_ok() {
            fin(None);
        }
    });
    ros::spin(node, tasks);
    // Shutting down (SIGINT/SIGTERM): keep a demonstration in progress and write everything, with
    // the same warnings a stop gives.
    if recorder.borrow().is_recording() {
        let _ = recorder.borrow_mut().stop();
        let lost = pairs.borrow().dropped() - dropped_before.get();
        for warning in end_warnings(lost, recorder.borrow().jumps()) {
            r2r::log_warn!(&logger, "{warning}");
        }
    }
    if let Err(e) = save() {
        r2r::log_error!(&logger, "could not write the demonstrations: {e}");
    }
    Ok(())
}

/// The transform topics tf2 reads (remapped for a namespaced robot: `-r /tf:=/robot1/tf`).
const TF: &str = "/tf";
const TF_STATIC: &str = "/tf_static";

/// A message stamp in seconds.
fn seconds(t: &r2r::builtin_interfaces::msg::Time) -> f64 {
    f64::from(t.sec) + f64::from(t.nanosec) * 1e-9
}

/// Seconds as a stamp's (sec, nanosec).
fn time_of(t: f64) -> (i32, u32) {
    let sec = t.floor();
    (
        sec as i32,
        ((t - sec) * 1e9).round().min(999_999_999.0) as u32,
    )
}

/// What is wrong with a demonstration that just ended: `lost` pose or twist messages dropped
/// without their partner (each costs its sample), and poses the applied motion cannot have reached
/// (a second pose publisher).
fn end_warnings(lost: usize, jumps: &pucl::demos::recorder::Jumps) -> Vec<String> {
    let lost = (lost > 0).then(|| {
        format!("{lost} pose or twist messages arrived without their partner and were dropped")
    });
    lost.into_iter().chain(jumps.warning()).collect()
}
