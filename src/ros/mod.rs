//! Thin ROS 2 adapters (r2r) shared by the nodes: parameters with declared defaults, time, diagnostics,
//! the model file watch, and the spin loop. Everything else is library code.
//!
//! Runtime: each node runs its tasks (streams of messages, requests and r2r timers) on a tokio
//! current-thread runtime with a `LocalSet`, so tasks may share the node's state without locks; rcl
//! is waited on between the tasks' turns ([`spin`]). Slow work goes to tokio's blocking pool
//! ([`off_thread`]), file polling to tokio timers, SIGINT and SIGTERM to tokio's signal handling.
use crate::deploy::model::ConstraintModel;
use futures::future::LocalBoxFuture;
use r2r::diagnostic_msgs::msg::{DiagnosticArray, DiagnosticStatus, KeyValue};
use r2r::{Node, Parameter, ParameterValue};
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

pub mod markers;
pub mod obstacles;
pub mod params;

/// The parameter `name` as given (params file or -p), or `default`, which is then declared so that it
/// shows in the node's parameter list. A value of the wrong type is reported and the default used.
fn param_value(
    node: &Node,
    name: &str,
    default: ParameterValue,
    description: &'static str,
) -> ParameterValue {
    let mut params = node.params.lock().expect("parameter lock");
    match params.get(name).map(|p| p.value.clone()) {
        Some(v) if !matches!(v, ParameterValue::NotSet) => v,
        _ => {
            let mut p = Parameter::new(default.clone());
            p.description = description;
            params.insert(name.to_string(), p);
            default
        }
    }
}

fn wrong(node: &Node, name: &str, v: &ParameterValue, what: &str) {
    r2r::log_error!(
        node.logger(),
        "parameter {name}: {v:?} is not {what}; using the default"
    );
}

/// A double parameter (an integer is accepted: `100` in YAML is an integer).
pub fn param_f64(node: &Node, name: &str, default: f64, description: &'static str) -> f64 {
    match param_value(node, name, ParameterValue::Double(default), description) {
        ParameterValue::Double(v) => v,
        ParameterValue::Integer(v) => v as f64,
        v => {
            wrong(node, name, &v, "a number");
            default
        }
    }
}

/// A double-array parameter.
pub fn param_f64_array(
    node: &Node,
    name: &str,
    default: &[f64],
    description: &'static str,
) -> Vec<f64> {
    match param_value(
        node,
        name,
        ParameterValue::DoubleArray(default.to_vec()),
        description,
    ) {
        ParameterValue::DoubleArray(v) => v,
        ParameterValue::IntegerArray(v) => v.into_iter().map(|i| i as f64).collect(),
        v => {
            wrong(node, name, &v, "an array of numbers");
            default.to_vec()
        }
    }
}

pub fn param_bool(node: &Node, name: &str, default: bool, description: &'static str) -> bool {
    match param_value(node, name, ParameterValue::Bool(default), description) {
        ParameterValue::Bool(v) => v,
        v => {
            wrong(node, name, &v, "a bool");
            default
        }
    }
}

pub fn param_string(node: &Node, name: &str, default: &str, description: &'static str) -> String {
    match param_value(
        node,
        name,
        ParameterValue::String(default.to_string()),
        description,
    ) {
        ParameterValue::String(v) => v,
        v => {
            wrong(node, name, &v, "a string");
            default.to_string()
        }
    }
}

/// Seconds on a monotonic clock since the process started (timeouts use this).
pub fn mono_now() -> f64 {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_secs_f64()
}

/// The current ROS time as a message stamp.
pub fn stamp() -> r2r::builtin_interfaces::msg::Time {
    let d = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    r2r::builtin_interfaces::msg::Time {
        sec: d.as_secs() as i32,
        nanosec: d.subsec_nanos(),
    }
}

/// How old a header stamp is now (s, by this machine's clock; negative: in the future); None when
/// the stamp is unset (zero), as publishers that do not stamp leave it.
pub fn stamp_age(t: &r2r::builtin_interfaces::msg::Time) -> Option<f64> {
    if t.sec == 0 && t.nanosec == 0 {
        return None;
    }
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64();
    Some(now - (f64::from(t.sec) + f64::from(t.nanosec) * 1e-9))
}

/// A DiagnosticArray with one status of this node.
pub fn diagnostics(
    name: &str,
    level: u8,
    message: &str,
    values: &[(&str, String)],
) -> DiagnosticArray {
    DiagnosticArray {
        header: r2r::std_msgs::msg::Header {
            stamp: stamp(),
            frame_id: String::new(),
        },
        status: vec![DiagnosticStatus {
            level,
            name: name.to_string(),
            message: message.to_string(),
            hardware_id: "pucl".to_string(),
            values: values
                .iter()
                .map(|(k, v)| KeyValue {
                    key: (*k).to_string(),
                    value: v.clone(),
                })
                .collect(),
        }],
    }
}

pub const OK: u8 = 0;
pub const WARN: u8 = 1;
pub const ERROR: u8 = 2;

/// What identifies a version of the model file on disk: its modification time, size and a hash of
/// its content, so that a different model with the same size and time (`cp -p`, `rsync -t`) is
/// noticed too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileVersion {
    modified: SystemTime,
    len: u64,
    hash: u64,
}

pub fn file_version(path: &Path) -> Option<FileVersion> {
    use std::hash::{Hash, Hasher};
    let m = std::fs::metadata(path).ok()?;
    let bytes = std::fs::read(path).ok()?;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut h);
    Some(FileVersion {
        modified: m.modified().ok()?,
        len: m.len(),
        hash: h.finish(),
    })
}

/// A model reload: loads and prepares the model off the node's thread ([`off_thread`]), then installs
/// it; resolves to a message for the log and the caller, or the error (the previous model stays).
pub type Reload = std::rc::Rc<dyn Fn() -> LocalBoxFuture<'static, Result<String, String>>>;

/// The [`Reload`] of the model file at `path`, shared by the nodes that serve a model. `work` is
/// called on the node's thread and returns what to do with the loaded model on another thread
/// (validation, tables: the slow part); `install` swaps the result in on the node's thread and says
/// what was loaded. The file's version goes to `version`; the outcome, OK or ERROR, to
/// `/diagnostics` under `name` (the previous model stays on failure).
pub fn model_reload<T, W>(
    path: String,
    version: std::rc::Rc<std::cell::RefCell<Option<FileVersion>>>,
    diagnostics: r2r::Publisher<DiagnosticArray>,
    name: String,
    work: impl Fn() -> W + 'static,
    install: impl Fn(T) -> String + 'static,
) -> Reload
where
    T: Send + 'static,
    W: FnOnce(ConstraintModel) -> Result<T, String> + Send + 'static,
{
    use futures::FutureExt;
    let shared = std::rc::Rc::new((path, version, diagnostics, name, work, install));
    std::rc::Rc::new(move || {
        let shared = shared.clone();
        async move {
            let (path, version, diagnostics, name, work, install) = &*shared;
            let (file, work) = (path.clone(), work());
            let loaded = off_thread(move || {
                let v = file_version(Path::new(&file));
                load_model(&file).and_then(work).map(|t| (t, v))
            })
            .await
            .and_then(|r| r);
            let out = loaded.map(|(t, v)| {
                *version.borrow_mut() = v;
                install(t)
            });
            let (level, text) = match &out {
                Ok(m) => (OK, m.clone()),
                Err(e) => (ERROR, format!("model not (re)loaded: {e}")),
            };
            let _ = diagnostics.publish(&self::diagnostics(
                name,
                level,
                &text,
                &[("model_path", path.clone())],
            ));
            out
        }
        .boxed_local()
    })
}

/// Run `work` on tokio's blocking pool and await its result on the node's thread, which keeps serving
/// commands and queries meanwhile. Before the node spins (no runtime yet) there is nobody to keep
/// serving, and `work` runs right here.
pub async fn off_thread<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, String> {
    if tokio::runtime::Handle::try_current().is_err() {
        return Ok(work());
    }
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| format!("the worker thread failed: {e}"))
}

/// Load a model file completely (validation included) before anyone sees it.
pub fn load_model(path: &str) -> Result<ConstraintModel, String> {
    if path.is_empty() {
        return Err("parameter model_path is empty".into());
    }
    ConstraintModel::load(Path::new(path)).map_err(|e| e.to_string())
}

/// The `task` parameter loaded as a task (a built-in name or a task file).
pub fn param_task(node: &Node) -> Result<crate::task::Task, String> {
    let name = param_string(
        node,
        "task",
        "reach_obstacle_3d",
        "built-in task name or task file",
    );
    crate::task::Task::load(&name).map_err(|e| format!("parameter task: {e}"))
}

/// Reload the model whenever its file changes (checked every `period`). `version` holds the version
/// last loaded; a broken file is not retried until it changes again.
pub async fn watch_model_file(
    period: Duration,
    path: String,
    version: std::rc::Rc<std::cell::RefCell<Option<FileVersion>>>,
    reload: Reload,
    logger: String,
) {
    let mut ticks = tokio::time::interval(period);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let now = file_version(Path::new(&path));
        if now.is_some() && now != *version.borrow() {
            *version.borrow_mut() = now;
            match reload().await {
                Ok(m) => r2r::log_info!(&logger, "model file changed: {m}"),
                Err(e) => r2r::log_error!(&logger, "model not reloaded: {e}"),
            }
        }
    }
}

/// Reload the model on `~/reload` requests and whenever its file changes (see [`serve_reload`] and
/// [`watch_model_file`]).
pub fn spawn_model_reloading(
    tasks: &tokio::task::LocalSet,
    requests: impl futures::Stream<Item = r2r::ServiceRequest<r2r::std_srvs::srv::Trigger::Service>>
    + Unpin
    + 'static,
    watch_period: Duration,
    path: String,
    version: std::rc::Rc<std::cell::RefCell<Option<FileVersion>>>,
    reload: Reload,
    logger: String,
) {
    tasks.spawn_local(serve_reload(requests, reload.clone(), logger.clone()));
    tasks.spawn_local(watch_model_file(
        watch_period,
        path,
        version,
        reload,
        logger,
    ));
}

/// Send `response` to the client of `req`. A response rcl refuses (the service gone, the middleware
/// failing) is logged as a warning: otherwise the client waits out its timeout and nothing on this
/// side says why.
pub fn respond<T>(req: r2r::ServiceRequest<T>, response: T::Response, logger: &str)
where
    T: 'static + r2r::WrappedServiceTypeSupport,
{
    if let Err(e) = req.respond(response) {
        r2r::log_warn!(logger, "response not sent: {e}");
    }
}

/// Answer `~/reload` (std_srvs/Trigger) with `reload`: success and its message, or the failure, which
/// is also logged (the previous model stays).
pub async fn serve_reload(
    mut requests: impl futures::Stream<Item = r2r::ServiceRequest<r2r::std_srvs::srv::Trigger::Service>>
    + Unpin,
    reload: Reload,
    logger: String,
) {
    use futures::StreamExt;
    while let Some(req) = requests.next().await {
        let out = reload().await;
        if let Err(e) = &out {
            r2r::log_error!(&logger, "model not reloaded: {e}");
        }
        respond(
            req,
            r2r::std_srvs::srv::Trigger::Response {
                success: out.is_ok(),
                message: out.unwrap_or_else(|e| e),
            },
            &logger,
        );
    }
}

/// Spin the node and run its `tasks` until SIGINT or SIGTERM; then return, so that the node is
/// dropped and leaves the ROS graph cleanly.
pub fn spin(node: Node, tasks: tokio::task::LocalSet) {
    spin_then(node, tasks, || {});
}

/// [`spin`], then `on_shutdown` while the node still exists (its publishers still work), and a
/// moment for the middleware to deliver what it published.
pub fn spin_then(mut node: Node, tasks: tokio::task::LocalSet, on_shutdown: impl FnOnce()) {
    let logger = node.logger().to_string();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            r2r::log_error!(&logger, "no tokio runtime: {e}");
            return;
        }
    };
    tasks.block_on(&runtime, async {
        use tokio::signal::unix::{SignalKind, signal};
        let mut terminate = signal(SignalKind::terminate())
            .inspect_err(|e| r2r::log_warn!(&logger, "no SIGTERM handler ({e})"))
            .ok();
        let interrupt = tokio::signal::ctrl_c();
        tokio::pin!(interrupt);
        loop {
            // rcl waits up to 2 ms for work (messages, requests, r2r timers) and wakes the tasks
            // it concerns; then every ready task runs, and tokio's timers and signals are polled.
            node.spin_once(Duration::from_millis(2));
            tokio::select! {
                biased;
                _ = &mut interrupt => break,
                Some(()) = async { terminate.as_mut()?.recv().await } => break,
                () = tokio::task::yield_now() => {}
            }
        }
    });
    r2r::log_info!(&logger, "shutting down");
    on_shutdown();
    node.spin_once(Duration::from_millis(10));
    std::thread::sleep(Duration::from_millis(100));
}
