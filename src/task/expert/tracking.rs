//! Tracking a planned path: each step lands on the polyline, as far along as the action limits (and a
//! velocity constraint's margin-shrunk limits) allow, so every visited state lies on the checked path.
use crate::task::shape::Shape;
use crate::task::sim::Policy;
use crate::task::{ActionLimit, Task};

/// The expert's speed limits in action units (a velocity constraint's, shrunk by the margin): per
/// axis, on the command's norm (infinite where there is none), and any other set of commands the
/// constraint forbids.
#[derive(Debug, Clone)]
pub(super) struct SpeedLimits {
    pub(super) per_axis: Vec<f64>,
    pub(super) norm: f64,
    /// Any other infeasible set of commands (a half-space, an ellipsoid), inflated by the margin.
    pub(super) forbidden: Vec<Shape>,
}

/// Tracks a polyline exactly: each step lands on the path, as far along as the limits allow.
pub(super) struct PathFollower<'a> {
    task: &'a Task,
    pts: Vec<Vec<f64>>,
    /// Arc length at each vertex.
    cum: Vec<f64>,
    /// Arc length reached so far.
    s: f64,
    speed_limits: SpeedLimits,
    target: Vec<f64>,
}

impl<'a> PathFollower<'a> {
    pub(super) fn new(task: &'a Task, pts: Vec<Vec<f64>>, speed_limits: SpeedLimits) -> Self {
        let mut cum = vec![0.0];
        for w in pts.windows(2) {
            let l = w[0]
                .iter()
                .zip(&w[1])
                .map(|(a, b)| (a - b).powi(2))
                .sum::<f64>()
                .sqrt();
            cum.push(cum.last().expect("non-empty") + l);
        }
        let d = pts[0].len();
        PathFollower {
            task,
            pts,
            cum,
            s: 0.0,
            speed_limits,
            target: vec![0.0; d],
        }
    }

    pub(super) fn total_length(&self) -> f64 {
        *self.cum.last().expect("non-empty")
    }

    fn point_at(&mut self, s: f64) {
        let k = self
            .cum
            .partition_point(|c| *c <= s)
            .clamp(1, self.pts.len() - 1);
        let seg = self.cum[k] - self.cum[k - 1];
        let t = if seg > 0.0 {
            ((s - self.cum[k - 1]) / seg).clamp(0.0, 1.0)
        } else {
            1.0
        };
        for i in 0..self.target.len() {
            self.target[i] = self.pts[k - 1][i] + t * (self.pts[k][i] - self.pts[k - 1][i]);
        }
    }

    /// The action that moves from `pos` to the path point at arc length s, if within the limits.
    fn action_to(&mut self, pos: &[f64], s: f64, action: &mut [f64]) -> bool {
        self.point_at(s);
        let gain = self.task.spec.dynamics.dt * self.task.spec.dynamics.velocity_scale;
        for k in 0..action.len() {
            action[k] = (self.target[k] - pos[k]) / gain;
        }
        let within_speed = action
            .iter()
            .zip(&self.speed_limits.per_axis)
            .all(|(a, l)| a.abs() <= *l)
            && action.iter().map(|a| a * a).sum::<f64>().sqrt() <= self.speed_limits.norm
            && !self
                .speed_limits
                .forbidden
                .iter()
                .any(|f| f.contains(action));
        let within_limit = match &self.task.action_limit {
            ActionLimit::Norm(c) => action.iter().map(|a| a * a).sum::<f64>().sqrt() <= *c,
            ActionLimit::Box(b) => action.iter().zip(b).all(|(a, l)| a.abs() <= *l),
        };
        within_speed && within_limit
    }
}

impl Policy for PathFollower<'_> {
    fn act(&mut self, state: &[f64], action: &mut [f64]) {
        let pos = self.task.position_of(state);
        let total = self.total_length();
        if self.action_to(&pos, total, action) {
            self.s = total;
            return;
        }
        // Largest admissible advance along the path (bisection; the admissible set is an interval).
        let (mut ok, mut bad) = (self.s, total);
        for _ in 0..60 {
            let mid = 0.5 * (ok + bad);
            if self.action_to(&pos, mid, action) {
                ok = mid;
            } else {
                bad = mid;
            }
        }
        self.action_to(&pos, ok, action);
        self.s = ok;
    }
}
