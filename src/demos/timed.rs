//! Demonstrations from a log of timed positions, as a robot's own logging writes them (CSV: a `t`
//! column in seconds, the task's position columns, optionally `demo`; any other column is ignored):
//! each demonstration's positions resampled at the task's period, the velocity between samples as
//! the action ([`PoseResampler`]), as the `demo_recorder` node records a pose-only robot.
use crate::demos::DemoSet;
use crate::demos::JUMP_FACTOR;
use crate::demos::recorder::{AutoSegment, POSE_GAP, PoseResampler, Recorder};
use crate::error::{Error, Result};
use crate::task::Task;
use std::path::Path;

/// One demonstration of a log: its id (the `demo` column, or "0"), its first line (0 for a piece of
/// a bag's stream), and its timed positions in the order of the task's `position` components.
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
/// after the last (rows no faster than `motion_threshold`, position units per second: a real arm's
/// pose jitters at rest) is dropped; a demonstration that never moves is an error naming it.
pub fn resample(
    task: &Task,
    log: &[TimedDemo],
    path: &Path,
    motion_threshold: f64,
) -> Result<DemoSet> {
    let mut rec = Recorder::new(task.clone(), None);
    rec.set_rest_speed(motion_threshold);
    for d in log {
        feed(&mut rec, task, d)?;
        rec.stop().map_err(|e| {
            Error::file(
                path,
                Some(d.line),
                Some("demo"),
                format!("demonstration '{}': {e}", d.id),
            )
        })?;
    }
    Ok(rec.demos)
}

/// The demonstrations in pieces of a stream (see [`split_stream`]), resampled at the task's period:
/// each piece that moves faster than `segment.motion_threshold` is one demonstration, rest at
/// either end dropped; or with `auto`, as the `demo_recorder` node's automatic segmentation cuts
/// them, one from each first motion to the goal or until idle for `segment.idle_timeout`. A piece
/// that never moves is no demonstration.
pub fn resample_stream(
    task: &Task,
    pieces: &[TimedDemo],
    segment: AutoSegment,
    auto: bool,
) -> Result<DemoSet> {
    let threshold = segment.motion_threshold;
    let mut rec = Recorder::new(task.clone(), auto.then_some(segment));
    rec.set_rest_speed(threshold);
    for d in pieces {
        feed(&mut rec, task, d)?;
        // The piece ends the demonstration; a piece that never moved is none (stop's error).
        if !auto || rec.is_recording() {
            let _ = rec.stop();
        }
    }
    Ok(rec.demos)
}

/// Feed one demonstration's timed positions, resampled, to the recorder; without automatic
/// segmentation the recording starts at the first sample.
fn feed(rec: &mut Recorder, task: &Task, d: &TimedDemo) -> Result<()> {
    let manual = !rec.is_auto();
    let mut r = PoseResampler::new(task.spec.dynamics.dt, POSE_GAP);
    let mut started = false;
    for (t, p) in &d.samples {
        for (ts, ps, vs) in r.push(*t, p) {
            rec.sample(ts, &ps, &vs);
            if manual && !started {
                rec.start().map_err(Error::Invalid)?;
                started = true;
            }
        }
    }
    Ok(())
}

/// A stream of timed positions (in time order) cut where nothing may be interpolated: a silence
/// longer than [`POSE_GAP`], or a move faster than [`JUMP_FACTOR`] times the action limit allows (a
/// reset, a second publisher, a teleport). The pieces are named `{name}:{k}`.
pub fn split_stream(task: &Task, name: &str, samples: &[(f64, Vec<f64>)]) -> Vec<TimedDemo> {
    let dt = task.spec.dynamics.dt;
    let step = JUMP_FACTOR * task.longest_step();
    let mut pieces: Vec<TimedDemo> = Vec::new();
    let mut last: Option<&(f64, Vec<f64>)> = None;
    for s in samples {
        let cut = last.is_none_or(|(t0, p0)| {
            let moved = task_distance(p0, &s.1);
            s.0 - t0 > POSE_GAP || moved > step * ((s.0 - t0) / dt).max(1.0)
        });
        if cut {
            pieces.push(TimedDemo {
                id: format!("{name}:{}", pieces.len()),
                line: 0,
                samples: Vec::new(),
            });
        }
        pieces.last_mut().expect("a piece").samples.push(s.clone());
        last = Some(s);
    }
    pieces
}

fn task_distance(a: &[f64], b: &[f64]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).powi(2))
        .sum::<f64>()
        .sqrt()
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
        let set = resample(&task, &log, path, 0.005).unwrap();
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
        // A demonstration that never moves, or only jitters (0.1 mm in 0.1 s: 1 mm/s).
        let still = parse("t,x,y,z\n0,0.4,0,0.05\n0.1,0.4,0,0.05\n", path, &task).unwrap();
        let e = resample(&task, &still, path, 0.005)
            .unwrap_err()
            .to_string();
        assert!(e.contains("log.csv:2") && e.contains("no steps"), "{e}");
        let jitter = parse("t,x,y,z\n0,0.4,0,0.05\n0.1,0.4001,0,0.05\n", path, &task).unwrap();
        let e = resample(&task, &jitter, path, 0.005)
            .unwrap_err()
            .to_string();
        assert!(e.contains("never moved faster than 0.005"), "{e}");
    }

    #[test]
    fn a_stream_is_cut_at_gaps_and_jumps_and_auto_segmentation_cuts_at_rest() {
        let task = Task::load("reach_obstacle_3d").unwrap();
        // At 100 Hz: 0.4 s along x at 0.24 m/s, 0.4 s at rest, 0.4 s along x again; a jump back to
        // the start; 0.4 s along y; a silence of 1 s; 0.4 s along y.
        let mut stream: Vec<(f64, Vec<f64>)> = Vec::new();
        let mut t = 10.0;
        let mut p = vec![0.35, 0.0, 0.05];
        let mut go = |stream: &mut Vec<(f64, Vec<f64>)>, t: &mut f64, v: [f64; 3], secs: f64| {
            for _ in 0..(secs / 0.01).round() as usize {
                *t += 0.01;
                for c in 0..3 {
                    p[c] += v[c] * 0.01;
                }
                stream.push((*t, p.clone()));
            }
        };
        stream.push((t, vec![0.35, 0.0, 0.05]));
        go(&mut stream, &mut t, [0.24, 0.0, 0.0], 0.4);
        go(&mut stream, &mut t, [0.0; 3], 0.4);
        go(&mut stream, &mut t, [0.24, 0.0, 0.0], 0.4);
        t += 0.01;
        stream.push((t, vec![0.35, 0.0, 0.05]));
        let mut q = vec![0.35, 0.0, 0.05];
        for k in 1..=40 {
            q[1] = 0.24 * 0.01 * k as f64;
            stream.push((t + 0.01 * k as f64, q.clone()));
        }
        t += 0.4 + 1.0;
        for k in 0..=40 {
            stream.push((
                t + 0.01 * k as f64,
                vec![0.35, 0.1 + 0.0024 * k as f64, 0.05],
            ));
        }
        let pieces = split_stream(&task, "bag", &stream);
        let lens: Vec<usize> = pieces.iter().map(|p| p.samples.len()).collect();
        assert_eq!(
            lens,
            [121, 41, 41],
            "{:?}",
            pieces.iter().map(|p| &p.id).collect::<Vec<_>>()
        );
        assert_eq!(pieces[2].id, "bag:2");
        // Each piece that moves is a demonstration, its rest in the middle kept.
        let still_or_slow = AutoSegment {
            motion_threshold: 0.01,
            idle_timeout: 0.2,
        };
        let set = resample_stream(&task, &pieces, still_or_slow.clone(), false).unwrap();
        let steps: Vec<usize> = (0..set.len()).map(|d| set.demos[d].len(3)).collect();
        assert_eq!(steps.len(), 3, "{steps:?}");
        assert!((70..=73).contains(&steps[0]), "{steps:?}");
        // With automatic segmentation the rest of 0.4 s (idle after 0.2 s) ends the first
        // demonstration; the motion after it is a second one.
        let set = resample_stream(&task, &pieces, still_or_slow.clone(), true).unwrap();
        assert_eq!(set.len(), 4);
        for d in 0..4 {
            let n = set.demos[d].len(3);
            assert!((23..=26).contains(&n), "demo {d}: {n} steps");
            // Every step is motion at half the action limit (rest trimmed at both ends).
            assert!((set.action(d, 1)[0] + set.action(d, 1)[1] - 0.5).abs() < 1e-9);
        }
        // A stream that never moves holds no demonstration.
        let still = split_stream(
            &task,
            "bag",
            &[(0.0, vec![0.4, 0.0, 0.05]), (0.1, vec![0.4, 0.0, 0.05])],
        );
        assert!(
            resample_stream(&task, &still, still_or_slow, false)
                .unwrap()
                .is_empty()
        );
    }
}
