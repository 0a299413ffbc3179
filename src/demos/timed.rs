//! Demonstrations from a log of timed positions, as a robot's own logging writes them (CSV: a `t`
//! column in seconds, the task's position columns, optionally `demo`; any other column is ignored):
//! each demonstration's positions resampled at the task's period, the velocity between samples as
//! the action ([`PoseResampler`]), as the `demo_recorder` node records a pose-only robot.
use crate::demos::DemoSet;
use crate::demos::recorder::{POSE_GAP, PoseResampler, Recorder};
use crate::error::{Error, Result};
use crate::task::Task;
use std::path::Path;

/// One demonstration of a log: its id (the `demo` column, or "0"), its first line, and its timed
/// positions in the order of the task's `position` components.
#[derive(Debug, Clone, PartialEq)]
pub struct TimedDemo {
    pub id: String,
    pub line: u64,
    pub samples: Vec<(f64, Vec<f64>)>,
}

/// Read a log from text; `path` names it in errors (file, line, column).
pub fn parse(text: &str, path: &Path, task: &Task) -> Result<Vec<TimedDemo>> {
    let err = |line: Option<u64>, field: Option<&str>, msg: String| Error::File {
        path: path.to_path_buf(),
        line,
        field: field.map(str::to_string),
        msg,
    };
    let mut reader = csv::ReaderBuilder::new()
        .trim(csv::Trim::All)
        .comment(Some(b'#'))
        .from_reader(text.as_bytes());
    let header: Vec<String> = reader
        .headers()
        .map_err(|e| err(Some(1), None, format!("not CSV: {e}")))?
        .iter()
        .map(str::to_string)
        .collect();
    let column = |name: &str| header.iter().position(|h| h == name);
    let positions: Vec<&String> = task
        .position_idx
        .iter()
        .map(|&i| &task.spec.state[i])
        .collect();
    let t_col = column("t").ok_or_else(|| {
        err(
            Some(1),
            None,
            format!(
                "no `t` column (seconds) in the header [{}]",
                header.join(", ")
            ),
        )
    })?;
    let p_cols = positions
        .iter()
        .map(|name| {
            column(name).ok_or_else(|| {
                err(
                    Some(1),
                    None,
                    format!(
                        "no `{name}` column: the task's positions are [{}]",
                        positions
                            .iter()
                            .map(|s| s.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                )
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let demo_col = column("demo");
    let mut demos: Vec<TimedDemo> = Vec::new();
    for rec in reader.records() {
        let rec = rec.map_err(|e| err(e.position().map(|p| p.line()), None, e.to_string()))?;
        let line = rec.position().map_or(0, |p| p.line());
        let number = |col: usize, name: &str| -> Result<f64> {
            let field = rec.get(col).unwrap_or("");
            match field.parse::<f64>() {
                Ok(v) if v.is_finite() => Ok(v),
                _ => Err(err(
                    Some(line),
                    Some(name),
                    format!("'{field}' is not a finite number"),
                )),
            }
        };
        let t = number(t_col, "t")?;
        let p = p_cols
            .iter()
            .zip(&positions)
            .map(|(&c, name)| number(c, name))
            .collect::<Result<Vec<_>>>()?;
        let id = demo_col
            .map_or("0", |c| rec.get(c).unwrap_or(""))
            .to_string();
        let demo = match demos.iter_mut().find(|d| d.id == id) {
            Some(d) => d,
            None => {
                demos.push(TimedDemo {
                    id,
                    line,
                    samples: Vec::new(),
                });
                demos.last_mut().expect("just pushed")
            }
        };
        if let Some((last, _)) = demo.samples.last()
            && t <= *last
        {
            return Err(err(
                Some(line),
                Some("t"),
                format!(
                    "{t} is not after the previous time {last} of demonstration '{}'",
                    demo.id
                ),
            ));
        }
        demo.samples.push((t, p));
    }
    if demos.is_empty() {
        return Err(err(None, None, "no rows".into()));
    }
    Ok(demos)
}

/// The demonstrations of a log, resampled at the task's period. Rest before the first motion and
/// after the last is dropped, as the recorder drops it; a demonstration that never moves is an
/// error naming it.
pub fn resample(task: &Task, log: &[TimedDemo], path: &Path) -> Result<DemoSet> {
    let mut rec = Recorder::new(task.clone(), None);
    for d in log {
        let mut r = PoseResampler::new(task.spec.dynamics.dt, POSE_GAP);
        let mut started = false;
        for (t, p) in &d.samples {
            for (ts, ps, vs) in r.push(*t, p) {
                rec.sample(ts, &ps, &vs);
                if !started {
                    rec.start().map_err(Error::Invalid)?;
                    started = true;
                }
            }
        }
        rec.stop().map_err(|e| Error::File {
            path: path.to_path_buf(),
            line: Some(d.line),
            field: Some("demo".into()),
            msg: format!("demonstration '{}': {e}", d.id),
        })?;
    }
    Ok(rec.demos)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_at_its_own_rate_becomes_demonstrations_at_the_tasks_period_and_bad_rows_are_named() {
        let task = Task::load("reach_obstacle_3d").unwrap();
        // Two demonstrations at 100 Hz (ids out of order, an extra column), 0.24 m/s along x for
        // 0.5 s after 0.1 s at rest.
        let mut text = String::from("demo,t,x,y,z,qw\n");
        for id in ["b", "a"] {
            for k in 0..=60 {
                let t = 5.0 + k as f64 * 0.01;
                let x = 0.35 + 0.24 * (t - 5.1).max(0.0);
                text.push_str(&format!("{id},{t},{x},0.0,0.05,1\n"));
            }
        }
        let path = Path::new("log.csv");
        let log = parse(&text, path, &task).unwrap();
        assert_eq!(log.len(), 2);
        assert_eq!((log[0].id.as_str(), log[0].line), ("b", 2));
        let set = resample(&task, &log, path).unwrap();
        assert_eq!(set.len(), 2);
        // 0.5 s of motion at 60 Hz: 30 rows, each half the action limit along x.
        for d in 0..2 {
            let n = set.demos[d].len(task.state_dim());
            assert!((30..=31).contains(&n), "{n}");
            for i in 1..n - 1 {
                assert!(
                    (set.action(d, i)[0] - 0.5).abs() < 1e-9,
                    "{:?}",
                    set.action(d, i)
                );
            }
        }
        let e = |text: &str| parse(text, path, &task).unwrap_err().to_string();
        assert!(
            e("t,x,y\n0,1,2\n").contains("no `z` column"),
            "{}",
            e("t,x,y\n0,1,2\n")
        );
        assert!(e("x,y,z\n0,1,2\n").contains("no `t` column"));
        let bad = e("t,x,y,z\n0,1,2,3\n0.1,1,nan,3\n");
        assert!(bad.contains("log.csv:3") && bad.contains('y'), "{bad}");
        let back = e("t,x,y,z\n0,1,2,3\n0,1,2,3\n");
        assert!(
            back.contains("log.csv:3") && back.contains("not after"),
            "{back}"
        );
        // A demonstration that never moves.
        let still = parse("t,x,y,z\n0,0.4,0,0.05\n0.1,0.4,0,0.05\n", path, &task).unwrap();
        assert!(
            resample(&task, &still, path)
                .unwrap_err()
                .to_string()
                .contains("no steps")
        );
    }
}
