//! The nodes' parameter services (`ros2 param list/get/set/dump`), through r2r's parameter handler.
//! Every declared parameter can be listed and read; the ones a node names as live can be set while
//! it runs, each checked first (a refused value keeps the old one and says why); the others are
//! refused with the reason that they are read at start.
use futures::StreamExt;
use futures::stream::LocalBoxStream;
use r2r::indexmap::IndexMap;
use r2r::{Node, Parameter, ParameterValue, RosParams};
use std::sync::{Arc, Mutex};

/// A check of a new value: Err(reason) refuses it.
pub type Check = fn(&ParameterValue) -> Result<(), String>;

/// Which parameters may change while the node runs, and how each new value is checked.
#[derive(Default, Clone)]
pub struct LiveParameters {
    checks: Vec<(&'static str, Check)>,
}

impl LiveParameters {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn with(mut self, name: &'static str, check: Check) -> Self {
        self.checks.push((name, check));
        self
    }

    fn check(&self, name: &str, value: &ParameterValue) -> Result<(), String> {
        match self.checks.iter().find(|(n, _)| *n == name) {
            Some((_, check)) => check(value),
            None => Err("read at start: set it in the parameter file or with --ros-args -p, then restart the node".into()),
        }
    }
}

impl RosParams for LiveParameters {
    fn register_parameters(
        &mut self,
        _prefix: &str,
        _param: Option<Parameter>,
        _params: &mut IndexMap<String, Parameter>,
    ) -> r2r::Result<()> {
        // The nodes declare their parameters with their defaults when they read them.
        Ok(())
    }

    fn get_parameter(&mut self, param_name: &str) -> r2r::Result<ParameterValue> {
        // The node's own table answers (it holds every declared value).
        Err(r2r::Error::InvalidParameterName {
            name: param_name.to_string(),
        })
    }

    fn set_parameter(&mut self, param_name: &str, param_val: &ParameterValue) -> r2r::Result<()> {
        self.check_parameter(param_name, param_val)
    }

    fn check_parameter(&self, param_name: &str, param_val: &ParameterValue) -> r2r::Result<()> {
        self.check(param_name, param_val)
            .map_err(|msg| r2r::Error::ParameterValueConv {
                name: param_name.to_string(),
                msg,
            })
    }
}

/// Serve `~/list_parameters`, `~/get_parameters`, `~/set_parameters` and the rest on `node`; returns
/// the stream of accepted changes (name, new value), for the node to apply.
pub fn serve_parameters(
    node: &mut Node,
    tasks: &tokio::task::LocalSet,
    live: LiveParameters,
) -> Result<LocalBoxStream<'static, (String, ParameterValue)>, Box<dyn std::error::Error>> {
    let (handler, changes) = node.make_derived_parameter_handler(Arc::new(Mutex::new(live)))?;
    tasks.spawn_local(handler);
    Ok(changes.boxed_local())
}

/// A number (a double, or an integer as `ros2 param set` writes `1`).
pub fn number(v: &ParameterValue) -> Option<f64> {
    match v {
        ParameterValue::Double(x) => Some(*x),
        ParameterValue::Integer(i) => Some(*i as f64),
        _ => None,
    }
}

/// Checks for [`LiveParameters::with`].
pub fn finite_number(v: &ParameterValue) -> Result<(), String> {
    match number(v) {
        Some(x) if x.is_finite() => Ok(()),
        Some(x) => Err(format!("{x} is not a finite number")),
        None => Err(format!("{v:?} is not a number")),
    }
}

pub fn positive_number(v: &ParameterValue) -> Result<(), String> {
    match number(v) {
        Some(x) if x.is_finite() && x > 0.0 => Ok(()),
        Some(x) => Err(format!("{x} is not a positive number")),
        None => Err(format!("{v:?} is not a number")),
    }
}

pub fn non_negative_number(v: &ParameterValue) -> Result<(), String> {
    match number(v) {
        Some(x) if x.is_finite() && x >= 0.0 => Ok(()),
        Some(x) => Err(format!("{x} is not a number >= 0")),
        None => Err(format!("{v:?} is not a number")),
    }
}

pub fn boolean(v: &ParameterValue) -> Result<(), String> {
    match v {
        ParameterValue::Bool(_) => Ok(()),
        _ => Err(format!("{v:?} is not true or false")),
    }
}
