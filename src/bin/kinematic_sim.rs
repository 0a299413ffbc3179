//! kinematic_sim: a Gazebo-free end-effector simulator of any task file. Integrates the commanded
//! twist (`cmd_vel`, TwistStamped or Twist) at a fixed rate with the task's limits and bounds; publishes
//! `ee_pose` and the applied twist; `~/reset` moves to a start; `~/run_expert` lets the task's expert
//! drive to the goal (for recording demonstrations without a human); the true obstacles on `~/obstacles`.
//! A planar task's positions are the pose's axes they are named after (`[x, y]`: z stays 0), and
//! only the twist's linear velocity along them moves it.
use futures::StreamExt;
use pucl::deploy::filter::FilterConfig;
use pucl::ros::{self, param_bool, param_f64, param_string};
use pucl::task::Task;
use pucl::task::expert::Expert;
use pucl::task::sim::{LiveSim, Policy};
use r2r::QosProfile;
use r2r::geometry_msgs::msg::{Point, Pose, PoseStamped, Quaternion, Twist, TwistStamped, Vector3};
use r2r::pucl_interfaces::srv::{Reset, RunExpert};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;
use tokio::task::LocalSet;

struct ExpertRun {
    policy: Box<dyn Policy>,
    steps: usize,
    request: r2r::ServiceRequest<RunExpert::Service>,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let ctx = r2r::Context::create()?;
    let mut node = r2r::Node::create(ctx, "kinematic_sim", "")?;
    let task = ros::param_task(&node)?;
    let rate = param_f64(
        &node,
        "rate",
        1.0 / task.spec.dynamics.dt,
        "integration rate (Hz); one task step per tick",
    );
    let stamped = param_bool(
        &node,
        "enable_stamped_cmd_vel",
        true,
        "TwistStamped (true) or Twist (false) commands",
    );
    let cmd_topic = param_string(
        &node,
        "cmd_vel_topic",
        "cmd_vel",
        "velocity command of the end effector",
    );
    let pose_topic = param_string(
        &node,
        "pose_topic",
        "ee_pose",
        "end-effector pose (PoseStamped)",
    );
    let applied_topic = param_string(
        &node,
        "applied_twist_topic",
        "applied_twist",
        "the twist actually applied",
    );
    let frame_id = param_string(
        &node,
        "frame_id",
        "base_link",
        "frame of the pose and twist",
    );
    let cmd_timeout = param_f64(
        &node,
        "cmd_timeout",
        // No longer than the safety filter's horizon (lookahead_time): if the filter dies, the arm
        // stops within the motion the filter last checked.
        FilterConfig::default().lookahead_time,
        "s after which the last command is dropped (stop)",
    );
    let margin = param_f64(
        &node,
        "expert_margin",
        task.spec.expert.margin,
        "distance the expert keeps from the true constraint",
    );
    // The pose's axes the task's positions are (a task no pose drives is refused here).
    let axes = task
        .pose_axes()
        .map_err(|e| format!("kinematic_sim drives an end effector's position: {e}"))?;
    // The expert borrows its task for the whole life of the node.
    let expert_task: &'static Task = Box::leak(Box::new(task.clone()));
    let expert: &'static Expert<'static> = Box::leak(Box::new(Expert::new(expert_task, margin)?));

    // A deeper history than the usual 10: a subscriber (a recorder) slowed by a loaded machine gets
    // lost samples resent instead of overwritten. 1000 samples hold several seconds of history, longer
    // than Fast DDS's default heartbeat period (3 s) after which a lost sample is asked for again.
    let reliable = QosProfile::default().reliable().keep_last(1000);
    let pose_pub = node.create_publisher::<PoseStamped>(&pose_topic, reliable.clone())?;
    let twist_pub = node.create_publisher::<TwistStamped>(&applied_topic, reliable.clone())?;
    let obstacles = node.create_publisher::<r2r::visualization_msgs::msg::MarkerArray>(
        "~/obstacles",
        QosProfile::default().transient_local().keep_last(1),
    )?;
    obstacles.publish(&ros::obstacles::true_constraint(&task, &frame_id))?;

    // Publish a pose and the twist that led to it, with one stamp (the recorder pairs them).
    let pose_axes = axes.clone();
    let publish = Rc::new(move |p: &[f64], applied: &[f64]| {
        let (p, applied) = (
            Task::to_pose_axes(&pose_axes, p),
            Task::to_pose_axes(&pose_axes, applied),
        );
        let header = r2r::std_msgs::msg::Header {
            stamp: ros::stamp(),
            frame_id: frame_id.clone(),
        };
        let _ = pose_pub.publish(&PoseStamped {
            header: header.clone(),
            pose: Pose {
                position: Point {
                    x: p[0],
                    y: p[1],
                    z: p[2],
                },
                orientation: Quaternion {
                    w: 1.0,
                    ..Default::default()
                },
            },
        });
        let _ = twist_pub.publish(&TwistStamped {
            header,
            twist: Twist {
                linear: Vector3 {
                    x: applied[0],
                    y: applied[1],
                    z: applied[2],
                },
                angular: Vector3::default(),
            },
        });
    });
    let sim = Rc::new(RefCell::new(LiveSim::new(task)));
    let command = Rc::new(RefCell::new(None::<(f64, [f64; 3])>));
    let expert_run = Rc::new(RefCell::new(None::<ExpertRun>));
    let tasks = LocalSet::new();
    // `ros2 param list/get/dump` answer; every parameter is read at start.
    let _read_only = pucl::ros::params::serve_parameters(&mut node, &tasks, Default::default())?;

    let c = command.clone();
    if stamped {
        let mut cmds = node.subscribe::<TwistStamped>(&cmd_topic, reliable.clone())?;
        tasks.spawn_local(async move {
            while let Some(m) = cmds.next().await {
                *c.borrow_mut() = Some((
                    ros::mono_now(),
                    [m.twist.linear.x, m.twist.linear.y, m.twist.linear.z],
                ));
            }
        });
    } else {
        let mut cmds = node.subscribe::<Twist>(&cmd_topic, reliable.clone())?;
        tasks.spawn_local(async move {
            while let Some(m) = cmds.next().await {
                *c.borrow_mut() = Some((ros::mono_now(), [m.linear.x, m.linear.y, m.linear.z]));
            }
        });
    }
    let mut resets = node.create_service::<Reset::Service>("~/reset", QosProfile::default())?;
    let logger = node.logger().to_string();
    let (s, c, e, publ, log) = (
        sim.clone(),
        command.clone(),
        expert_run.clone(),
        publish.clone(),
        logger.clone(),
    );
    tasks.spawn_local(async move {
        while let Some(req) = resets.next().await {
            let mut sim = s.borrow_mut();
            let start = if req.message.position.is_empty() {
                sim.task().spec.starts[0].clone()
            } else {
                req.message.position.clone()
            };
            let r = sim.reset(&start);
            if r.is_ok() {
                // The new pose at once, at rest: a recorder starts its next demonstration here.
                publ(&sim.position(), &[0.0; 3]);
                *c.borrow_mut() = None;
                if let Some(run) = e.borrow_mut().take() {
                    ros::respond(
                        run.request,
                        RunExpert::Response {
                            success: false,
                            message: "interrupted by a reset".into(),
                        },
                        &log,
                    );
                }
            }
            let (success, message) = match r {
                Ok(()) => (true, format!("at {start:?}")),
                Err(m) => (false, m),
            };
            ros::respond(req, Reset::Response { success, message }, &log);
        }
    });
    let mut expert_requests =
        node.create_service::<RunExpert::Service>("~/run_expert", QosProfile::default())?;
    let (s, e, log) = (sim.clone(), expert_run.clone(), logger.clone());
    tasks.spawn_local(async move {
        while let Some(req) = expert_requests.next().await {
            if e.borrow().is_some() {
                ros::respond(
                    req,
                    RunExpert::Response {
                        success: false,
                        message: "the expert is already driving".into(),
                    },
                    &log,
                );
                continue;
            }
            match expert.policy(&s.borrow().position()) {
                Ok(policy) => {
                    *e.borrow_mut() = Some(ExpertRun {
                        policy,
                        steps: 0,
                        request: req,
                    })
                }
                Err(m) => {
                    ros::respond(
                        req,
                        RunExpert::Response {
                            success: false,
                            message: format!("no expert path: {m}"),
                        },
                        &log,
                    );
                }
            }
        }
    });
    let mut timer = node.create_wall_timer(Duration::from_secs_f64(1.0 / rate.max(1.0)))?;
    tasks.spawn_local(async move {
        while timer.tick().await.is_ok() {
            let mut sim = sim.borrow_mut();
            let mut run = expert_run.borrow_mut();
            let applied = if let Some(r) = run.as_mut() {
                r.steps += 1;
                sim.step_with(r.policy.as_mut())
            } else {
                let now = ros::mono_now();
                let v = match *command.borrow() {
                    Some((t, v)) if now - t <= cmd_timeout => v,
                    _ => [0.0; 3],
                };
                sim.step_velocity(&Task::from_pose_axes(&axes, v))
            };
            // The pose first: a client that stops recording on the answer must have been sent it.
            publish(&sim.position(), &applied);
            let done = run
                .as_ref()
                .map(|r| (sim.at_goal(), r.steps > sim.task().spec.horizon));
            if let Some((reached, gave_up)) = done
                && (reached || gave_up)
            {
                let r = run.take().expect("checked");
                let message = if reached {
                    format!("goal reached in {} steps", r.steps)
                } else {
                    "the horizon passed before the goal".to_string()
                };
                ros::respond(
                    r.request,
                    RunExpert::Response {
                        success: reached,
                        message,
                    },
                    &logger,
                );
            }
        }
    });
    ros::spin(node, tasks);
    Ok(())
}
