//! Demonstration sets: the positive (feasible) data of PUCL. Read and written as CSV in the format of
//! the reference demonstrations (`demo,step,<state>,<action>[,episode_return]`, one row per step) or as
//! JSON. Loading validates everything against the task; errors name the file, line and field.
//!
//! Also here: `recorder` (demonstrations from a stream of pose and applied-velocity samples, or of
//! poses alone resampled at the task's period), `timed` (the same from a CSV log of timed
//! positions), `pairing` (the pose and twist messages matched by stamp) and `bag` (MCAP bags of the
//! raw messages).
pub mod bag;
mod csv_format;
mod json_format;
pub mod pairing;
pub mod recorder;
pub mod tf;
pub mod timed;

use crate::error::{Error, Result, write_atomic};
use crate::task::Task;
use crate::task::sim::Trajectory;
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

impl Demonstration {
    pub fn len(&self, state_dim: usize) -> usize {
        self.states.len() / state_dim
    }

    /// Drop the rows at either end whose action moves the end effector no faster than `speed`
    /// (position units per second): a real arm's pose at rest jitters, so rest is slow, not still.
    /// Returns false, leaving no row, where nothing is faster.
    pub fn trim_rest(&mut self, task: &Task, speed: f64) -> bool {
        let (n, m) = (task.state_dim(), task.action_dim());
        let scale = task.spec.dynamics.velocity_scale;
        let moving = |a: &[f64]| a.iter().map(|v| v * v).sum::<f64>().sqrt() * scale > speed;
        let rows = self.len(n);
        let first = (0..rows).find(|&k| moving(&self.actions[k * m..(k + 1) * m]));
        let Some(first) = first else {
            self.states.clear();
            self.actions.clear();
            return false;
        };
        let last = (0..rows)
            .rev()
            .find(|&k| moving(&self.actions[k * m..(k + 1) * m]))
            .expect("a moving row exists");
        self.states = self.states[first * n..(last + 1) * n].to_vec();
        self.actions = self.actions[first * m..(last + 1) * m].to_vec();
        true
    }

    /// (row, distance moved) of every row of this demonstration of `task` that jumps: see
    /// [`DemoSet::jumps`].
    pub fn jumps(&self, task: &Task) -> Vec<(usize, f64)> {
        let limit = JUMP_FACTOR * task.longest_step();
        if task.mujoco.is_some() || !limit.is_finite() {
            return Vec::new();
        }
        let rows: Vec<&[f64]> = self.states.chunks_exact(task.state_dim()).collect();
        (1..rows.len())
            .map(|t| (t, task.position_distance(rows[t - 1], rows[t])))
            .filter(|&(_, moved)| moved > limit)
            .collect()
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

    /// [`feature_points`](Self::feature_points) split by demonstration: one row-major block each.
    pub fn feature_points_per_demo(&self, task: &Task) -> Vec<Vec<f64>> {
        let d = task.feature_dim();
        let all = self.feature_points(task);
        let mut at = 0;
        self.demos
            .iter()
            .map(|demo| {
                let n = demo.len(self.state_dim()) * d;
                at += n;
                all[at - n..at].to_vec()
            })
            .collect()
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
    /// Steps that moved farther than the action limit allows ([`DemoSet::jumps`]).
    pub jumping_steps: usize,
    /// Indices of demonstrations with at least one such step.
    pub jumping_demos: Vec<usize>,
}

/// A step between consecutive rows of a demonstration counts as a jump beyond this many times the
/// longest step the action limit allows ([`Task::longest_step`]): a real arm's measured pose
/// overshoots its command and its messages jitter, but not by that much. A jump is a pose the
/// applied motion cannot have reached: a second node publishing the pose while recording, a reset,
/// demonstrations run together under one id, or rows lost.
pub const JUMP_FACTOR: f64 = 3.0;

impl DemoSet {
    /// Counts, goal reaching and true violations (the true constraint is known for built-in tasks).
    pub fn report(&self, task: &Task) -> DemoReport {
        let n = self.state_dim();
        let mut psi = vec![0.0; task.feature_dim()];
        let mut r = DemoReport {
            demos: self.len(),
            steps: self.total_steps(),
            min_len: usize::MAX,
            max_len: 0,
            reached_goal: 0,
            violating_steps: 0,
            violating_demos: Vec::new(),
            jumping_steps: 0,
            jumping_demos: Vec::new(),
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
        }
        let jumps = self.jumps(task);
        r.jumping_steps = jumps.len();
        r.jumping_demos = jumps.iter().map(|j| j.0).collect();
        r.jumping_demos.dedup();
        r.reached_goal = self.reaches_goal(task).iter().filter(|&&g| g).count();
        r
    }

    /// Whether each demonstration ends within the goal's tolerance.
    pub fn reaches_goal(&self, task: &Task) -> Vec<bool> {
        self.end_distances_to_goal(task)
            .iter()
            .map(|d| d.is_some_and(|d| d < task.spec.goal.tolerance))
            .collect()
    }

    /// (demonstration, row, distance moved) of every row whose position is farther from the previous
    /// row's than [`JUMP_FACTOR`] times the longest step the action limit allows. Learning takes
    /// every row as one step of `dt` from the one before. None for a MuJoCo task, whose actions are
    /// no velocities.
    pub fn jumps(&self, task: &Task) -> Vec<(usize, usize, f64)> {
        self.demos
            .iter()
            .enumerate()
            .flat_map(|(i, d)| d.jumps(task).into_iter().map(move |(t, m)| (i, t, m)))
            .collect()
    }

    /// How far each demonstration ends from the task's goal: the nearer of its last state and the
    /// state its last action leads to (a recording may stop before or after that step). None for a
    /// task without a goal, and for a demonstration without rows (which loading refuses, but a set
    /// built in code may hold).
    pub fn end_distances_to_goal(&self, task: &Task) -> Vec<Option<f64>> {
        if task.spec.goal.is_none() {
            return vec![None; self.len()];
        }
        let mut sim = crate::task::sim::Simulator::new(task);
        let n = self.state_dim();
        let (mut next, mut applied) = (vec![0.0; n], vec![0.0; self.action_dim()]);
        let to_goal = |s: &[f64]| {
            task.position_idx
                .iter()
                .zip(task.goal())
                .map(|(&i, g)| (s[i] - g).powi(2))
                .sum::<f64>()
                .sqrt()
        };
        (0..self.len())
            .map(|i| {
                let end = self.demos[i].len(n).checked_sub(1)?;
                let last = self.state(i, end);
                sim.step(last, self.action(i, end), &mut next, &mut applied);
                Some(to_goal(last).min(to_goal(&next)))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rest_that_jitters_is_trimmed_at_both_ends_and_motion_in_between_kept() {
        let task = Task::load("reach_obstacle_3d").unwrap();
        // Actions in units of 0.48 m/s: jitter of 1e-4 (0.05 mm/s), motion of 0.5, a pause between.
        let speeds = [1e-4, -1e-4, 0.5, 0.5, 1e-4, 0.5, 1e-4, 0.0];
        let mut d = Demonstration {
            states: speeds.iter().flat_map(|_| [0.4, 0.0, 0.05]).collect(),
            actions: speeds.iter().flat_map(|&a| [a, 0.0, 0.0]).collect(),
            episode_return: None,
        };
        assert!(d.trim_rest(&task, 0.005));
        let kept: Vec<f64> = d.actions.chunks(3).map(|a| a[0]).collect();
        assert_eq!(kept, [0.5, 0.5, 1e-4, 0.5]);
        assert_eq!(d.states.len(), 12);
        let mut still = Demonstration {
            states: vec![0.4, 0.0, 0.05],
            actions: vec![1e-4, 0.0, 0.0],
            episode_return: None,
        };
        assert!(!still.trim_rest(&task, 0.005));
        assert_eq!(still.len(3), 0);
    }

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
