//! Demonstrations as JSON: a versioned document (`pucl.demonstrations`) with the state and action names
//! and one array of rows per demonstration.
use super::{DemoSet, Demonstration};
use crate::error::{Error, Result};
use crate::task::Task;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The JSON file layout.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonFile {
    format: String,
    version: u32,
    #[serde(default)]
    task: String,
    state: Vec<String>,
    action: Vec<String>,
    demos: Vec<JsonDemo>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonDemo {
    states: Vec<Vec<f64>>,
    actions: Vec<Vec<f64>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    episode_return: Option<f64>,
}

const JSON_FORMAT: &str = "pucl.demonstrations";
const JSON_VERSION: u32 = 1;

impl DemoSet {
    pub fn to_json_string(&self, task_name: &str) -> String {
        let (n, m) = (self.state_dim(), self.action_dim());
        let file = JsonFile {
            format: JSON_FORMAT.into(),
            version: JSON_VERSION,
            task: task_name.into(),
            state: self.state_names.clone(),
            action: self.action_names.clone(),
            demos: self
                .demos
                .iter()
                .map(|d| JsonDemo {
                    states: d.states.chunks(n).map(<[f64]>::to_vec).collect(),
                    actions: d.actions.chunks(m).map(<[f64]>::to_vec).collect(),
                    episode_return: d.episode_return,
                })
                .collect(),
        };
        serde_json::to_string_pretty(&file).expect("plain data serializes") + "\n"
    }

    /// Parse JSON text; `path` names the file in errors.
    pub fn from_json_str(text: &str, path: &Path, task: &Task) -> Result<DemoSet> {
        if text.trim().is_empty() {
            return Err(Error::file(path, None, None, "the file is empty"));
        }
        let f: JsonFile = serde_json::from_str(text)
            .map_err(|e| Error::file(path, Some(e.line() as u64), None, e.to_string()))?;
        if f.format != JSON_FORMAT {
            return Err(Error::file(
                path,
                None,
                Some("format"),
                format!("expected '{JSON_FORMAT}', found '{}'", f.format),
            ));
        }
        if f.version != JSON_VERSION {
            return Err(Error::file(
                path,
                None,
                Some("version"),
                format!(
                    "version {} is not supported (this pucl reads {JSON_VERSION})",
                    f.version
                ),
            ));
        }
        if f.state != task.spec.state || f.action != task.spec.action {
            return Err(Error::file(
                path,
                None,
                Some("state/action"),
                format!(
                    "wrong dimension or names: file has state [{}] action [{}], task '{}' expects state [{}] action [{}]",
                    f.state.join(", "),
                    f.action.join(", "),
                    task.name(),
                    task.spec.state.join(", "),
                    task.spec.action.join(", ")
                ),
            ));
        }
        let (n, m) = (task.state_dim(), task.action_dim());
        let mut set = DemoSet::new(task);
        if f.demos.is_empty() {
            return Err(Error::file(path, None, Some("demos"), "no demonstrations"));
        }
        for (i, d) in f.demos.into_iter().enumerate() {
            if d.states.is_empty() || d.states.len() != d.actions.len() {
                return Err(Error::file(
                    path,
                    None,
                    Some(&format!("demos[{i}]")),
                    format!(
                        "needs as many states as actions, at least one ({} states, {} actions)",
                        d.states.len(),
                        d.actions.len()
                    ),
                ));
            }
            let mut demo = Demonstration {
                states: Vec::new(),
                actions: Vec::new(),
                episode_return: d.episode_return,
            };
            for (kind, rows, dim, out) in [
                ("states", &d.states, n, &mut demo.states),
                ("actions", &d.actions, m, &mut demo.actions),
            ] {
                for (t, row) in rows.iter().enumerate() {
                    if row.len() != dim {
                        return Err(Error::file(
                            path,
                            None,
                            Some(&format!("demos[{i}].{kind}[{t}]")),
                            format!("has {} values, expected {dim}", row.len()),
                        ));
                    }
                    out.extend_from_slice(row);
                }
            }
            set.demos.push(demo);
        }
        Ok(set)
    }
}
