//! constraint_server: serves a learned constraint model. `~/query_feasibility` answers batches of states;
//! the model is reloaded when its file changes or on `~/reload`, atomically (a query sees the old or
//! the new model, never a half-loaded one). Publishes `~/constraint_info` and `~/boundary` markers
//! (transient local) and `/diagnostics`.
use futures::StreamExt;
use pucl::deploy::model::ConstraintModel;
use pucl::learn::network::Scratch;
use pucl::ros::{self, param_f64, param_string};
use r2r::QosProfile;
use r2r::pucl_interfaces::msg::ConstraintInfo;
use r2r::pucl_interfaces::srv::QueryFeasibility;
use r2r::visualization_msgs::msg::MarkerArray;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::LocalSet;

type Shared = Rc<RefCell<Option<Arc<ConstraintModel>>>>;

/// Requests with up to this many values (about 1 ms of work: about 30 us a state, most of it the
/// distance) are answered in the service loop; larger ones on their own thread, so that a huge
/// batch never makes a small client wait for it.
const INLINE_VALUES: usize = 3 * 32;

fn answer(model: Option<&ConstraintModel>, states: &[f64]) -> QueryFeasibility::Response {
    let mut r = QueryFeasibility::Response::default();
    let Some(m) = model else {
        r.error = "no constraint model loaded".into();
        return r;
    };
    let d = m.dim();
    if states.is_empty() || !states.len().is_multiple_of(d) {
        r.error = format!(
            "states has {} values, not a positive multiple of the model's dimension {d}",
            states.len()
        );
        return r;
    }
    if let Some(i) = states.iter().position(|v| !v.is_finite()) {
        r.error = format!("states[{i}] is not a finite number");
        return r;
    }
    let mut scratch = Scratch::default();
    for x in states.chunks(d) {
        let a = m.query(x, &mut scratch);
        r.feasible.push(a.feasible);
        r.zeta.push(a.zeta);
        r.gradient.extend(a.gradient);
        r.distance.push(a.distance);
        r.direction.extend(a.direction);
    }
    r
}

fn info(m: &ConstraintModel, path: &str) -> ConstraintInfo {
    ConstraintInfo {
        loaded_at: ros::stamp(),
        model_path: path.to_string(),
        task: m.task.clone(),
        feature_names: m.features.iter().map(|f| f.name.clone()).collect(),
        feature_units: m
            .features
            .iter()
            .map(|f| f.unit.clone().unwrap_or_default())
            .collect(),
        dimension: m.dim() as u32,
        threshold: m.threshold,
        iterations: m.summary.iterations as u32,
        memory_buffer: m.summary.memory_buffer as u32,
        final_loss: m.summary.final_loss,
        iou: m.summary.iou.unwrap_or(f64::NAN),
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let ctx = r2r::Context::create()?;
    let mut node = r2r::Node::create(ctx, "constraint_server", "")?;
    let model_path = param_string(
        &node,
        "model_path",
        "",
        "constraint model file (pucl learn --out)",
    );
    let frame_id = param_string(
        &node,
        "frame_id",
        "base_link",
        "frame of the boundary markers",
    );
    let watch_period = param_f64(
        &node,
        "watch_period",
        0.5,
        "seconds between checks of the model file",
    );
    let max_states = param_f64(
        &node,
        "max_states_per_request",
        100_000.0,
        "states one query may hold; larger requests get an error (split them)",
    )
    .max(1.0) as usize;
    let latched = QosProfile::default().transient_local().keep_last(1);
    let info_pub = node.create_publisher::<ConstraintInfo>("~/constraint_info", latched.clone())?;
    let marker_pub = node.create_publisher::<MarkerArray>("~/boundary", latched)?;
    let diag_pub = node.create_publisher::<r2r::diagnostic_msgs::msg::DiagnosticArray>(
        "/diagnostics",
        QosProfile::default(),
    )?;
    // A deep queue: a burst of queries (1 kHz clients) is served, not dropped by KEEP_LAST(10).
    let mut queries = node.create_service::<QueryFeasibility::Service>(
        "~/query_feasibility",
        QosProfile::default().keep_last(1000),
    )?;
    let reloads = node.create_service::<r2r::std_srvs::srv::Trigger::Service>(
        "~/reload",
        QosProfile::default(),
    )?;
    let watch = Duration::from_secs_f64(watch_period.max(0.05));
    let name = format!("{}: constraint_server", node.name()?);

    let model: Shared = Rc::new(RefCell::new(None));
    let version = Rc::new(RefCell::new(None));
    // Load and validate the file on another thread (queries keep being answered), then swap the shared
    // model in one step; on failure the previous model stays, and /diagnostics says why.
    let reload = {
        let (model, path, frame_id) = (model.clone(), model_path.clone(), frame_id.clone());
        ros::model_reload(
            model_path.clone(),
            version.clone(),
            diag_pub,
            name,
            // The boundary's samples for the distance, on the loading thread: no query waits.
            || {
                |m: ConstraintModel| {
                    m.boundary_samples();
                    Ok(m)
                }
            },
            move |m: ConstraintModel| {
                let m = Arc::new(m);
                *model.borrow_mut() = Some(m.clone());
                let _ = info_pub.publish(&info(&m, &path));
                let _ = marker_pub.publish(&pucl::ros::markers::boundary(&m, &frame_id));
                format!("loaded {path}: task {}, {} inputs", m.task, m.dim())
            },
        )
    };
    match futures::executor::block_on(reload()) {
        Ok(m) => r2r::log_info!(node.logger(), "{m}"),
        Err(e) => r2r::log_error!(node.logger(), "{e}"),
    }

    let tasks = LocalSet::new();
    // `ros2 param list/get/dump` answer; every parameter is read at start.
    let _read_only = pucl::ros::params::serve_parameters(&mut node, &tasks, Default::default())?;
    let logger = node.logger().to_string();
    let (m, log) = (model.clone(), logger.clone());
    tasks.spawn_local(async move {
        while let Some(mut req) = queries.next().await {
            let current = m.borrow().clone();
            if req.message.states.len() <= INLINE_VALUES {
                let r = answer(current.as_deref(), &req.message.states);
                ros::respond(req, r, &log);
                continue;
            }
            // A large batch is answered on its own thread, by the model current when it arrived,
            // while this loop keeps answering everyone else.
            let d = current.as_ref().map_or(1, |m| m.dim());
            if req.message.states.len() > max_states.saturating_mul(d) {
                let error = format!(
                    "states has {} values, more than max_states_per_request ({max_states}) states: split the request",
                    req.message.states.len()
                );
                ros::respond(req, QueryFeasibility::Response {
                    error,
                    ..Default::default()
                }, &log);
                continue;
            }
            let states = std::mem::take(&mut req.message.states);
            let log = log.clone();
            tokio::task::spawn_local(async move {
                let r = ros::off_thread(move || answer(current.as_deref(), &states))
                    .await
                    .unwrap_or_else(|e| QueryFeasibility::Response {
                        error: e,
                        ..Default::default()
                    });
                // Sent from this thread: the service is locked while a response is sent.
                ros::respond(req, r, &log);
            });
        }
    });
    ros::spawn_model_reloading(
        &tasks,
        reloads,
        watch,
        model_path.clone(),
        version.clone(),
        reload.clone(),
        logger.clone(),
    );
    ros::spin(node, tasks);
    Ok(())
}
