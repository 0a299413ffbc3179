//! Demonstrations as CSV, the format of the reference demonstrations: `demo,step,<state>,<action>
//! [,episode_return]`, one row per step. Parsing checks the header against the task, every number,
//! and that demonstrations and steps are contiguous; errors name the line and the field.
use super::{DemoSet, Demonstration};
use crate::error::{Error, Result};
use crate::task::Task;
use std::path::Path;

impl DemoSet {
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
}

fn csv_error(path: &Path, e: csv::Error) -> Error {
    let line = e.position().map(|p| p.line());
    Error::file(path, line, None, e.to_string())
}
