//! Demonstration sets: the positive (feasible) data of PUCL. Read and written as CSV in the format of
//! the reference demonstrations (`demo,step,<state>,<action>[,episode_return]`, one row per step) or as
//! JSON. Loading validates everything against the task; errors name the file, line and field.
use crate::error::{Error, Result, write_atomic};
use crate::sim::Trajectory;
use crate::task::Task;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// One demonstration: T rows of (state, action).
#[derive(Debug, Clone, PartialEq)]
pub struct Demonstration {
    /// Row-major T x state_dim.
    pub states: Vec<f64>,
    /// Row-major T x action_dim.
    pub actions: Vec<f64>,
    /// The return recorded with the demonstration, if any.
    pub episode_return: Option<f64>,
}

/// A set of demonstrations of one task.
#[derive(Debug, Clone, PartialEq)]
pub struct DemoSet {
    pub state_names: Vec<String>,
    pub action_names: Vec<String>,
    pub demos: Vec<Demonstration>,
}

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

impl Demonstration {
    pub fn len(&self, state_dim: usize) -> usize {
        self.states.len() / state_dim
    }
}

impl DemoSet {
    /// An empty set for a task.
    pub fn new(task: &Task) -> Self {
        DemoSet {
            state_names: task.spec.state.clone(),
            action_names: task.spec.action.clone(),
            demos: Vec::new(),
        }
    }

    /// Demonstrations from simulated trajectories (with their returns).
    pub fn from_trajectories(task: &Task, trajs: &[Trajectory]) -> Self {
        let mut set = DemoSet::new(task);
        for t in trajs {
            set.demos.push(Demonstration {
                states: t.states.clone(),
                actions: t.actions.clone(),
                episode_return: Some(t.episode_return),
            });
        }
        set
    }

    pub fn state_dim(&self) -> usize {
        self.state_names.len()
    }
    pub fn action_dim(&self) -> usize {
        self.action_names.len()
    }
    pub fn len(&self) -> usize {
        self.demos.len()
    }
    pub fn is_empty(&self) -> bool {
        self.demos.is_empty()
    }
    /// Total number of rows (state-action pairs).
    pub fn total_steps(&self) -> usize {
        self.demos.iter().map(|d| d.len(self.state_dim())).sum()
    }
    pub fn state(&self, demo: usize, t: usize) -> &[f64] {
        let n = self.state_dim();
        &self.demos[demo].states[t * n..(t + 1) * n]
    }
    pub fn action(&self, demo: usize, t: usize) -> &[f64] {
        let m = self.action_dim();
        &self.demos[demo].actions[t * m..(t + 1) * m]
    }
    /// The first state of each demonstration.
    pub fn start_states(&self) -> Vec<Vec<f64>> {
        (0..self.len()).map(|i| self.state(i, 0).to_vec()).collect()
    }
    /// psi(s, a) of every row, row-major (rows x feature_dim).
    pub fn feature_points(&self, task: &Task) -> Vec<f64> {
        let d = task.feature_dim();
        let mut out = vec![0.0; self.total_steps() * d];
        let mut r = 0;
        for i in 0..self.len() {
            for t in 0..self.demos[i].len(self.state_dim()) {
                task.features_into(
                    self.state(i, t),
                    self.action(i, t),
                    &mut out[r * d..(r + 1) * d],
                );
                r += 1;
            }
        }
        out
    }

    /// Load CSV, or JSON when the file name ends in `.json`, and validate it against the task.
    pub fn load(path: &Path, task: &Task) -> Result<DemoSet> {
        let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
        let text = String::from_utf8(bytes)
            .map_err(|e| Error::file(path, None, None, format!("not UTF-8 text: {e}")))?;
        if path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("json"))
        {
            Self::from_json_str(&text, path, task)
        } else {
            Self::from_csv_str(&text, path, task)
        }
    }

    /// Write CSV, or JSON when the file name ends in `.json`, atomically.
    pub fn save(&self, path: &Path, task_name: &str) -> Result<()> {
        let text = if path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("json"))
        {
            self.to_json_string(task_name)
        } else {
            self.to_csv_string()
        };
        write_atomic(path, text.as_bytes())
    }

    fn expected_header(task: &Task) -> Vec<String> {
        let mut h = vec!["demo".to_string(), "step".to_string()];
        h.extend(task.spec.state.iter().cloned());
        h.extend(task.spec.action.iter().cloned());
        h
    }

    /// Parse CSV text; `path` names the file in errors.
    pub fn from_csv_str(text: &str, path: &Path, task: &Task) -> Result<DemoSet> {
        let (n, m) = (task.state_dim(), task.action_dim());
        let mut rdr = csv::ReaderBuilder::new()
            .has_headers(false)
            .flexible(true)
            .from_reader(text.as_bytes());
        let mut records = rdr.records();
        let header = match records.next() {
            None => {
                return Err(Error::file(
                    path,
                    None,
                    None,
                    "the file is empty (expected a header line)",
                ));
            }
            Some(r) => r.map_err(|e| csv_error(path, e))?,
        };
        let header: Vec<String> = header.iter().map(|h| h.trim().to_string()).collect();
        let expected = Self::expected_header(task);
        let has_return = header.last().map(String::as_str) == Some("episode_return");
        let data_cols = header.len() - 2 - usize::from(has_return);
        if header.len() < 2 || header[0] != "demo" || header[1] != "step" {
            return Err(Error::file(
                path,
                Some(1),
                None,
                format!(
                    "the header must start with 'demo,step', found '{}'",
                    header.join(",")
                ),
            ));
        }
        if data_cols != n + m {
            return Err(Error::file(
                path,
                Some(1),
                None,
                format!(
                    "wrong dimension: the header has {data_cols} state/action columns, task '{}' expects {} state ({}) + {} action ({}) columns",
                    task.name(),
                    n,
                    task.spec.state.join(", "),
                    m,
                    task.spec.action.join(", ")
                ),
            ));
        }
        for (i, (got, want)) in header.iter().zip(&expected).enumerate() {
            if got != want {
                return Err(Error::file(
                    path,
                    Some(1),
                    Some(got),
                    format!(
                        "column {} of the header should be '{want}' for task '{}'",
                        i + 1,
                        task.name()
                    ),
                ));
            }
        }
        let mut set = DemoSet::new(task);
        let mut seen_ids = std::collections::HashSet::new();
        let mut current: Option<(u64, u64)> = None; // (demo id, last step)
        for rec in records {
            let rec = rec.map_err(|e| csv_error(path, e))?;
            let line = rec.position().map(|p| p.line());
            if rec.len() == 1 && rec[0].trim().is_empty() {
                continue; // a blank line
            }
            if rec.len() != header.len() {
                return Err(Error::file(
                    path,
                    line,
                    None,
                    format!("{} fields, the header has {}", rec.len(), header.len()),
                ));
            }
            let int = |col: usize| -> Result<u64> {
                rec[col].trim().parse::<u64>().map_err(|_| {
                    Error::file(
                        path,
                        line,
                        Some(&header[col]),
                        format!("'{}' is not a non-negative integer", &rec[col]),
                    )
                })
            };
            let (id, step) = (int(0)?, int(1)?);
            let mut values = Vec::with_capacity(n + m + 1);
            for col in 2..header.len() {
                let v: f64 = rec[col].trim().parse().map_err(|_| {
                    Error::file(
                        path,
                        line,
                        Some(&header[col]),
                        format!("'{}' is not a number", &rec[col]),
                    )
                })?;
                if !v.is_finite() {
                    return Err(Error::file(
                        path,
                        line,
                        Some(&header[col]),
                        format!("{v} is not a finite number"),
                    ));
                }
                values.push(v);
            }
            let new_demo = current.is_none_or(|(cid, _)| cid != id);
            if new_demo {
                if !seen_ids.insert(id) {
                    return Err(Error::file(
                        path,
                        line,
                        Some("demo"),
                        format!(
                            "demo {id} appears again after other demos (the rows of a demo must be contiguous)"
                        ),
                    ));
                }
                if step != 0 {
                    return Err(Error::file(
                        path,
                        line,
                        Some("step"),
                        format!("demo {id} starts at step {step}, expected 0"),
                    ));
                }
                set.demos.push(Demonstration {
                    states: Vec::new(),
                    actions: Vec::new(),
                    episode_return: has_return.then(|| values[n + m]),
                });
            } else if let Some((_, last)) = current
                && step != last + 1
            {
                return Err(Error::file(
                    path,
                    line,
                    Some("step"),
                    format!(
                        "step {step} follows step {last} in demo {id} (steps must be contiguous)"
                    ),
                ));
            }
            let d = set.demos.last_mut().expect("a demo was pushed above");
            if has_return && d.episode_return != Some(values[n + m]) {
                return Err(Error::file(
                    path,
                    line,
                    Some("episode_return"),
                    format!(
                        "differs from the first row of demo {id} (one return per demonstration)"
                    ),
                ));
            }
            d.states.extend_from_slice(&values[..n]);
            d.actions.extend_from_slice(&values[n..n + m]);
            current = Some((id, step));
        }
        if set.demos.is_empty() {
            return Err(Error::file(
                path,
                None,
                None,
                "no demonstrations: the file has a header but no rows",
            ));
        }
        Ok(set)
    }

    pub fn to_csv_string(&self) -> String {
        use std::fmt::Write;
        let with_return = self.demos.iter().all(|d| d.episode_return.is_some());
        let mut s = String::from("demo,step");
        for n in self.state_names.iter().chain(&self.action_names) {
            s.push(',');
            s.push_str(n);
        }
        if with_return {
            s.push_str(",episode_return");
        }
        s.push('\n');
        for (i, d) in self.demos.iter().enumerate() {
            for t in 0..d.len(self.state_dim()) {
                let _ = write!(s, "{i},{t}");
                for v in self.state(i, t).iter().chain(self.action(i, t)) {
                    let _ = write!(s, ",{v}");
                }
                if let (true, Some(r)) = (with_return, d.episode_return) {
                    let _ = write!(s, ",{r}");
                }
                s.push('\n');
            }
        }
        s
    }

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

/// What `pucl demos check` reports about a demonstration set.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct DemoReport {
    pub demos: usize,
    pub steps: usize,
    pub min_len: usize,
    pub max_len: usize,
    /// Demonstrations whose last state, or the state after their last action, is within the goal tolerance.
    pub reached_goal: usize,
    /// Rows whose psi(s, a) violates the true constraint.
    pub violating_steps: usize,
    /// Indices of demonstrations with at least one violating row.
    pub violating_demos: Vec<usize>,
}

impl DemoSet {
    /// Counts, goal reaching and true violations (the true constraint is known for built-in tasks).
    pub fn report(&self, task: &Task) -> DemoReport {
        let mut sim = crate::sim::Simulator::new(task);
        let n = self.state_dim();
        let mut psi = vec![0.0; task.feature_dim()];
        let (mut next, mut applied) = (vec![0.0; n], vec![0.0; self.action_dim()]);
        let mut r = DemoReport {
            demos: self.len(),
            steps: self.total_steps(),
            min_len: usize::MAX,
            max_len: 0,
            reached_goal: 0,
            violating_steps: 0,
            violating_demos: Vec::new(),
        };
        let near_goal = |s: &[f64]| {
            let d: f64 = task
                .position_idx
                .iter()
                .zip(task.goal())
                .map(|(&i, g)| (s[i] - g).powi(2))
                .sum();
            d.sqrt() < task.spec.goal.tolerance
        };
        for i in 0..self.len() {
            let len = self.demos[i].len(n);
            r.min_len = r.min_len.min(len);
            r.max_len = r.max_len.max(len);
            let mut bad = 0;
            for t in 0..len {
                task.features_into(self.state(i, t), self.action(i, t), &mut psi);
                bad += usize::from(task.truly_infeasible(&psi));
            }
            r.violating_steps += bad;
            if bad > 0 {
                r.violating_demos.push(i);
            }
            let last = self.state(i, len - 1);
            let out = sim.step(last, self.action(i, len - 1), &mut next, &mut applied);
            r.reached_goal += usize::from(out.reached_goal || near_goal(last));
        }
        r
    }
}

fn csv_error(path: &Path, e: csv::Error) -> Error {
    let line = e.position().map(|p| p.line());
    Error::file(path, line, None, e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task() -> Task {
        Task::load("point_ellipse_2d").unwrap()
    }

    const GOOD: &str =
        "demo,step,x,y,ax,ay\n0,0,1,1,-1,-1\n0,1,0.98,0.98,-1,-1\n1,0,0.5,0.5,-1,0\n";

    #[test]
    fn csv_round_trip_keeps_every_bit() {
        let t = task();
        let s = DemoSet::from_csv_str(GOOD, Path::new("a.csv"), &t).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s.total_steps(), 3);
        let again = DemoSet::from_csv_str(&s.to_csv_string(), Path::new("b.csv"), &t).unwrap();
        assert_eq!(s, again);
        let j = DemoSet::from_json_str(
            &s.to_json_string("point_ellipse_2d"),
            Path::new("b.json"),
            &t,
        )
        .unwrap();
        assert_eq!(s, j);
    }

    fn err(text: &str) -> String {
        DemoSet::from_csv_str(text, Path::new("demos.csv"), &task())
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn empty_file_is_a_clear_error() {
        let e = err("");
        assert!(e.contains("demos.csv") && e.contains("empty"), "{e}");
        let e = err("demo,step,x,y,ax,ay\n");
        assert!(e.contains("no demonstrations"), "{e}");
    }

    #[test]
    fn wrong_header_names_the_column() {
        let e = err("demo,step,x,q,ax,ay\n0,0,1,1,1,1\n");
        assert!(
            e.contains("demos.csv:1") && e.contains("'q'") && e.contains("'y'"),
            "{e}"
        );
        let e = err("trajectory,t,x,y,ax,ay\n");
        assert!(e.contains("demo,step"), "{e}");
    }

    #[test]
    fn wrong_dimension_says_what_the_task_expects() {
        let e = err("demo,step,x,y,z,ax,ay,az\n0,0,1,1,1,1,1,1\n");
        assert!(
            e.contains("wrong dimension") && e.contains("expects 2 state"),
            "{e}"
        );
    }

    #[test]
    fn nan_names_line_and_field() {
        let e = err("demo,step,x,y,ax,ay\n0,0,1,1,1,1\n0,1,1,NaN,1,1\n");
        assert!(
            e.contains("demos.csv:3") && e.contains("field 'y'") && e.contains("finite"),
            "{e}"
        );
        let e = err("demo,step,x,y,ax,ay\n0,0,1,1,1,abc\n");
        assert!(e.contains("demos.csv:2") && e.contains("field 'ay'"), "{e}");
    }

    #[test]
    fn non_contiguous_steps_and_demos_are_rejected() {
        let e = err("demo,step,x,y,ax,ay\n0,0,1,1,1,1\n0,2,1,1,1,1\n");
        assert!(
            e.contains("demos.csv:3") && e.contains("step 2 follows step 0"),
            "{e}"
        );
        let e = err("demo,step,x,y,ax,ay\n0,0,1,1,1,1\n1,0,1,1,1,1\n0,1,1,1,1,1\n");
        assert!(e.contains("demos.csv:4") && e.contains("contiguous"), "{e}");
        let e = err("demo,step,x,y,ax,ay\n0,1,1,1,1,1\n");
        assert!(e.contains("expected 0"), "{e}");
    }

    #[test]
    fn short_row_is_rejected_with_its_line() {
        let e = err("demo,step,x,y,ax,ay\n0,0,1,1,1\n");
        assert!(e.contains("demos.csv:2") && e.contains("5 fields"), "{e}");
    }

    #[test]
    fn json_wrong_dimension_and_bad_rows() {
        let t = task();
        let t3 = Task::load("reach_obstacle_3d").unwrap();
        let s = DemoSet::from_csv_str(GOOD, Path::new("a.csv"), &t).unwrap();
        let e = DemoSet::from_json_str(&s.to_json_string("x"), Path::new("d.json"), &t3)
            .unwrap_err()
            .to_string();
        assert!(e.contains("d.json") && e.contains("wrong dimension"), "{e}");
        let bad = r#"{"format":"pucl.demonstrations","version":1,"state":["x","y"],"action":["ax","ay"],
            "demos":[{"states":[[1.0]],"actions":[[1.0,1.0]]}]}"#;
        let e = DemoSet::from_json_str(bad, Path::new("d.json"), &t)
            .unwrap_err()
            .to_string();
        assert!(e.contains("demos[0].states[0]"), "{e}");
        let e = DemoSet::from_json_str("{\"format\": 3", Path::new("d.json"), &t)
            .unwrap_err()
            .to_string();
        assert!(e.contains("d.json:1"), "{e}");
    }
}
