//! Expert demonstrations from the TRUE constraint: safe and near-optimal for the task's path-length
//! reward. A shortest path around the margin-inflated constraint (grid A*, then shortcut smoothing so it
//! is taut) is tracked at the highest speed the action limits and, for a velocity constraint, the
//! margin-shrunk velocity limits allow. Every visited state lies on the checked path, so it is feasible.
use crate::error::{Error, Result};
use crate::shape::Shape;
use crate::sim::{Policy, Simulator, Trajectory};
use crate::task::{ActionLimit, Feature, Task};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// How many demonstrations and from where.
#[derive(Debug, Clone)]
pub struct ExpertOptions {
    pub count: usize,
    pub seed: u64,
    /// Perturb every start uniformly by +-jitter per axis. None: the task's `start_jitter`, applied
    /// only from the second pass over the task's starts on.
    pub jitter: Option<f64>,
    /// Safety margin; None: the task's `expert.margin`.
    pub margin: Option<f64>,
}

/// Spacing of the samples of a segment check, in grid cells.
const SAMPLE_STEP: f64 = 0.5;

/// Upper bound on planner grid cells (memory and time stay small on any task).
const MAX_CELLS: f64 = 300_000.0;

/// Generate `count` expert demonstrations; `progress` is called after each one.
pub fn generate(
    task: &Task,
    opts: &ExpertOptions,
    progress: &mut dyn FnMut(usize),
) -> Result<Vec<Trajectory>> {
    if opts.count == 0 {
        return Err(Error::Invalid("--count must be at least 1".into()));
    }
    let expert = Expert::new(task, opts.margin.unwrap_or(task.spec.expert.margin))?;
    let mut rng = ChaCha8Rng::seed_from_u64(opts.seed);
    let starts = &task.spec.starts;
    let mut sim = Simulator::new(task);
    let mut out = Vec::with_capacity(opts.count);
    for i in 0..opts.count {
        let base = &starts[i % starts.len()];
        let jitter = opts.jitter.unwrap_or(if i >= starts.len() {
            task.spec.start_jitter
        } else {
            0.0
        });
        let start = if jitter > 0.0 {
            let mut tries = 0;
            loop {
                let p: Vec<f64> = base
                    .iter()
                    .map(|v| v + rng.random_range(-jitter..=jitter))
                    .collect();
                if expert.planner.endpoint_clear(&p) {
                    break p;
                }
                tries += 1;
                if tries > 1000 {
                    return Err(Error::Invalid(format!(
                        "no feasible perturbation of start {base:?} within jitter {jitter} found"
                    )));
                }
            }
        } else {
            base.clone()
        };
        let traj = expert.demonstrate(&mut sim, &start).map_err(|e| {
            Error::Invalid(format!(
                "task '{}', demonstration {i} from {start:?}: {e}",
                task.name()
            ))
        })?;
        out.push(traj);
        progress(i + 1);
    }
    Ok(out)
}

/// The expert of one task.
pub struct Expert<'a> {
    task: &'a Task,
    planner: Planner,
    /// Per-axis speed limits in action units (velocity constraints shrunk by the margin).
    speed_limits: Vec<f64>,
}

impl<'a> Expert<'a> {
    pub fn new(task: &'a Task, margin: f64) -> Result<Self> {
        let m = task.action_dim();
        let on_position =
            task.features.iter().enumerate().all(|(k, f)| {
                *f == Feature::State(*task.position_idx.get(k).unwrap_or(&usize::MAX))
            }) && task.feature_dim() == m;
        let on_action = task
            .features
            .iter()
            .enumerate()
            .all(|(k, f)| *f == Feature::Action(k))
            && task.feature_dim() == m;
        let mut obstacles: Vec<Shape> = task.blocking.iter().map(|s| s.inflate(margin)).collect();
        let mut speed_limits = vec![f64::INFINITY; m];
        if on_position {
            obstacles.extend(task.true_constraint.iter().map(|s| s.inflate(margin)));
        } else if on_action {
            for s in &task.true_constraint {
                match s.inflate(margin) {
                    Shape::VelocityLimit { max_abs } => {
                        for (l, v) in speed_limits.iter_mut().zip(max_abs) {
                            *l = l.min(v);
                        }
                    }
                    _ => {
                        return Err(Error::task(
                            task.name(),
                            "true_constraint",
                            "the expert handles only velocity_limit primitives on the action",
                        ));
                    }
                }
            }
        } else {
            return Err(Error::task(
                task.name(),
                "constraint_input",
                "the expert handles constraints on the position components or on the action components (in order)",
            ));
        }
        if speed_limits.iter().any(|l| *l <= 0.0) {
            return Err(Error::task(
                task.name(),
                "expert.margin",
                "the margin leaves no admissible speed",
            ));
        }
        let planner = Planner::new(task, obstacles, margin)?;
        Ok(Expert {
            task,
            planner,
            speed_limits,
        })
    }

    /// The expert's policy from a start position: it tracks the planned path (for a live simulator).
    pub fn policy(&self, start: &[f64]) -> Result<Box<dyn Policy + '_>, String> {
        let path = self.planner.plan(start, self.task.goal())?;
        Ok(Box::new(PathFollower::new(
            self.task,
            path,
            self.speed_limits.clone(),
        )))
    }

    /// One demonstration from a start position.
    pub fn demonstrate(&self, sim: &mut Simulator, start: &[f64]) -> Result<Trajectory, String> {
        let path = self.planner.plan(start, self.task.goal())?;
        let mut follower = PathFollower::new(self.task, path, self.speed_limits.clone());
        let mut traj = Trajectory::with_capacity(self.task);
        sim.rollout(&self.task.start_state(start), &mut follower, &mut traj);
        if !traj.reached_goal {
            return Err(format!(
                "the path needs more than the horizon of {} steps ({:.3} long)",
                self.task.spec.horizon,
                follower.total_length()
            ));
        }
        if !traj.truly_feasible() {
            return Err(
                "a state of the tracked path violates the true constraint (margin too small?)"
                    .into(),
            );
        }
        Ok(traj)
    }
}

/// Grid A* over position space, blocked where an inflated obstacle is.
struct Planner {
    lo: Vec<f64>,
    hi: Vec<f64>,
    res: f64,
    dims: Vec<usize>,
    /// Obstacles inflated by the margin: given starts and goals are checked against these.
    obstacles: Vec<Shape>,
    /// Inflated by the margin plus half the sampling step of a segment check: the distance to an
    /// obstacle is 1-Lipschitz, so every point of a segment whose samples clear these keeps the margin.
    sampled: Vec<Shape>,
    /// Grid node blocked (obstacles grown by half a cell diagonal as well).
    blocked: Vec<bool>,
}

#[derive(PartialEq)]
struct Open(f64, u32);
impl Eq for Open {}
impl Ord for Open {
    fn cmp(&self, o: &Self) -> Ordering {
        o.0.total_cmp(&self.0).then(o.1.cmp(&self.1))
    }
}
impl PartialOrd for Open {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

impl Planner {
    fn new(task: &Task, obstacles: Vec<Shape>, margin: f64) -> Result<Self> {
        let d = task.action_dim();
        if d > 3 {
            return Err(Error::task(
                task.name(),
                "position",
                "the expert plans in at most 3 dimensions",
            ));
        }
        let (lo, hi) = match &task.bounds {
            Some((l, h)) => (l.clone(), h.clone()),
            None => {
                // Unbounded: starts, goal and obstacles with room around them.
                let mut lo = task.goal().to_vec();
                let mut hi = lo.clone();
                let mut grow = |p: &[f64]| {
                    for k in 0..d {
                        if p[k].is_finite() {
                            lo[k] = lo[k].min(p[k]);
                            hi[k] = hi[k].max(p[k]);
                        }
                    }
                };
                task.spec.starts.iter().for_each(|s| grow(s));
                for o in &obstacles {
                    let (a, b) = o.aabb(d);
                    grow(&a);
                    grow(&b);
                }
                let span = lo.iter().zip(&hi).map(|(a, b)| b - a).fold(0.0, f64::max);
                let pad = 0.3 * span + 2.0 * margin + task.spec.start_jitter;
                (
                    lo.iter().map(|v| v - pad).collect(),
                    hi.iter().map(|v| v + pad).collect(),
                )
            }
        };
        let volume: f64 = lo.iter().zip(&hi).map(|(a, b)| b - a).product();
        let res = task
            .spec
            .expert
            .resolution
            .unwrap_or_else(|| (volume / MAX_CELLS).powf(1.0 / d as f64));
        let dims: Vec<usize> = lo
            .iter()
            .zip(&hi)
            .map(|(a, b)| ((b - a) / res).floor() as usize + 1)
            .collect();
        let cells: f64 = dims.iter().map(|&n| n as f64).product();
        if cells > 20.0 * MAX_CELLS {
            return Err(Error::task(
                task.name(),
                "expert.resolution",
                format!("{cells} planner cells is too many"),
            ));
        }
        let grown: Vec<Shape> = obstacles
            .iter()
            .map(|s| s.inflate(0.5 * res * (d as f64).sqrt()))
            .collect();
        let sampled = obstacles
            .iter()
            .map(|s| s.inflate(0.5 * SAMPLE_STEP * res))
            .collect();
        let mut p = Planner {
            lo,
            hi,
            res,
            dims,
            obstacles,
            sampled,
            blocked: Vec::new(),
        };
        let mut x = vec![0.0; d];
        p.blocked = (0..cells as usize)
            .map(|i| {
                p.node_point(i, &mut x);
                grown.iter().any(|s| s.contains(&x))
            })
            .collect();
        Ok(p)
    }

    fn node_point(&self, mut i: usize, x: &mut [f64]) {
        for ((xk, lo), n) in x.iter_mut().zip(&self.lo).zip(&self.dims) {
            *xk = lo + (i % n) as f64 * self.res;
            i /= n;
        }
    }

    fn node_of(&self, x: &[f64]) -> Vec<i64> {
        (0..self.dims.len())
            .map(|k| ((x[k] - self.lo[k]) / self.res).round() as i64)
            .collect()
    }

    fn index(&self, c: &[i64]) -> Option<usize> {
        let mut i = 0usize;
        for k in (0..self.dims.len()).rev() {
            if c[k] < 0 || c[k] as usize >= self.dims[k] {
                return None;
            }
            i = i * self.dims[k] + c[k] as usize;
        }
        Some(i)
    }

    fn in_workspace(&self, x: &[f64]) -> bool {
        x.iter()
            .zip(self.lo.iter().zip(&self.hi))
            .all(|(v, (l, h))| v >= l && v <= h)
    }

    /// A start or goal: at least the margin from every obstacle.
    fn endpoint_clear(&self, x: &[f64]) -> bool {
        self.in_workspace(x) && !self.obstacles.iter().any(|s| s.contains(x))
    }

    /// A path vertex or segment sample.
    fn point_clear(&self, x: &[f64]) -> bool {
        self.in_workspace(x) && !self.sampled.iter().any(|s| s.contains(x))
    }

    fn segment_clear(&self, a: &[f64], b: &[f64]) -> bool {
        let len = a
            .iter()
            .zip(b)
            .map(|(p, q)| (p - q).powi(2))
            .sum::<f64>()
            .sqrt();
        let n = (len / (SAMPLE_STEP * self.res)).ceil().max(1.0) as usize;
        let mut x = vec![0.0; a.len()];
        // The end points are checked by the caller (a start may lie closer than the samples' bound).
        (1..n).all(|j| {
            let t = j as f64 / n as f64;
            for k in 0..a.len() {
                x[k] = a[k] + t * (b[k] - a[k]);
            }
            self.point_clear(&x)
        })
    }

    /// A free grid node near `x` that a clear straight segment reaches.
    fn attach(&self, x: &[f64]) -> Option<usize> {
        let c = self.node_of(x);
        let d = c.len();
        let mut cands: Vec<(f64, usize)> = Vec::new();
        let r = 3i64;
        let span = (2 * r + 1) as usize;
        let mut y = vec![0.0; d];
        for flat in 0..span.pow(d as u32) {
            let (mut f, mut n) = (flat, c.clone());
            for nk in n.iter_mut() {
                *nk += (f % span) as i64 - r;
                f /= span;
            }
            if let Some(i) = self.index(&n)
                && !self.blocked[i]
            {
                self.node_point(i, &mut y);
                cands.push((y.iter().zip(x).map(|(a, b)| (a - b).powi(2)).sum(), i));
            }
        }
        cands.sort_by(|a, b| a.0.total_cmp(&b.0));
        cands.into_iter().map(|(_, i)| i).find(|&i| {
            self.node_point(i, &mut y);
            self.segment_clear(x, &y)
        })
    }

    /// A taut collision-free polyline from start to goal.
    fn plan(&self, start: &[f64], goal: &[f64]) -> Result<Vec<Vec<f64>>, String> {
        if !self.endpoint_clear(start) {
            return Err(
                "the start is inside the margin around the constraint or outside the workspace"
                    .into(),
            );
        }
        if !self.endpoint_clear(goal) {
            return Err(
                "the goal is inside the margin around the constraint or outside the workspace"
                    .into(),
            );
        }
        if self.segment_clear(start, goal) {
            return Ok(vec![start.to_vec(), goal.to_vec()]);
        }
        let s = self
            .attach(start)
            .ok_or("no free planner node next to the start")?;
        let g = self
            .attach(goal)
            .ok_or("no free planner node next to the goal")?;
        let d = self.dims.len();
        let n = self.blocked.len();
        let mut cost = vec![f64::INFINITY; n];
        let mut parent = vec![u32::MAX; n];
        let mut closed = vec![false; n];
        let mut heap = BinaryHeap::new();
        let coord = |mut i: usize| -> Vec<i64> {
            (0..d)
                .map(|k| {
                    let c = (i % self.dims[k]) as i64;
                    i /= self.dims[k];
                    c
                })
                .collect()
        };
        let gc = coord(g);
        let h = |c: &[i64]| {
            c.iter()
                .zip(&gc)
                .map(|(a, b)| ((a - b) as f64).powi(2))
                .sum::<f64>()
                .sqrt()
        };
        let offsets: Vec<Vec<i64>> = (0..3usize.pow(d as u32))
            .map(|f| {
                (0..d)
                    .map(|k| (f / 3usize.pow(k as u32) % 3) as i64 - 1)
                    .collect::<Vec<_>>()
            })
            .filter(|o| o.iter().any(|v| *v != 0))
            .collect();
        let step_len: Vec<f64> = offsets
            .iter()
            .map(|o| o.iter().map(|v| (v * v) as f64).sum::<f64>().sqrt())
            .collect();
        cost[s] = 0.0;
        heap.push(Open(h(&coord(s)), s as u32));
        let mut found = false;
        while let Some(Open(_, i)) = heap.pop() {
            let i = i as usize;
            if closed[i] {
                continue;
            }
            if i == g {
                found = true;
                break;
            }
            closed[i] = true;
            let c = coord(i);
            let mut nc = c.clone();
            for (o, l) in offsets.iter().zip(&step_len) {
                for k in 0..d {
                    nc[k] = c[k] + o[k];
                }
                let Some(j) = self.index(&nc) else { continue };
                if self.blocked[j] || closed[j] {
                    continue;
                }
                let cj = cost[i] + l;
                if cj < cost[j] {
                    cost[j] = cj;
                    parent[j] = i as u32;
                    heap.push(Open(cj + h(&nc), j as u32));
                }
            }
        }
        if !found {
            return Err("no collision-free path to the goal".into());
        }
        let mut nodes = vec![g];
        while *nodes.last().expect("non-empty") != s {
            nodes.push(parent[*nodes.last().expect("non-empty")] as usize);
        }
        nodes.reverse();
        let mut pts = vec![start.to_vec()];
        for i in nodes {
            let mut x = vec![0.0; d];
            self.node_point(i, &mut x);
            pts.push(x);
        }
        pts.push(goal.to_vec());
        Ok(self.tighten(self.shortcut(pts)))
    }

    /// String pulling: subdivide, then repeatedly move each interior vertex towards the straight line
    /// between its neighbours as far as the path stays clear, and shortcut again. Removes the grid's
    /// kinks so the path is taut against the margin.
    fn tighten(&self, pts: Vec<Vec<f64>>) -> Vec<Vec<f64>> {
        let dist = |a: &[f64], b: &[f64]| {
            a.iter()
                .zip(b)
                .map(|(p, q)| (p - q).powi(2))
                .sum::<f64>()
                .sqrt()
        };
        let mut pts = pts;
        for _round in 0..3 {
            // Subdivide long segments so the path can bend smoothly around curved obstacles.
            let mut fine = vec![pts[0].clone()];
            for w in pts.windows(2) {
                let k = (dist(&w[0], &w[1]) / (4.0 * self.res)).ceil().max(1.0) as usize;
                for j in 1..=k {
                    let t = j as f64 / k as f64;
                    fine.push(
                        w[0].iter()
                            .zip(&w[1])
                            .map(|(a, b)| a + t * (b - a))
                            .collect(),
                    );
                }
            }
            pts = fine;
            for _ in 0..200 {
                let mut moved = 0.0f64;
                for i in 1..pts.len() - 1 {
                    let (a, v, b) = (&pts[i - 1], &pts[i], &pts[i + 1]);
                    let ab: Vec<f64> = a.iter().zip(b).map(|(p, q)| q - p).collect();
                    let l2: f64 = ab.iter().map(|x| x * x).sum();
                    let t = if l2 > 0.0 {
                        (v.iter()
                            .zip(a)
                            .zip(&ab)
                            .map(|((vi, ai), d)| (vi - ai) * d)
                            .sum::<f64>()
                            / l2)
                            .clamp(0.0, 1.0)
                    } else {
                        0.0
                    };
                    let target: Vec<f64> = a.iter().zip(&ab).map(|(ai, d)| ai + t * d).collect();
                    // Largest step towards the target that keeps both adjacent segments clear.
                    let candidate = |s: f64| -> Vec<f64> {
                        v.iter()
                            .zip(&target)
                            .map(|(vi, ti)| vi + s * (ti - vi))
                            .collect()
                    };
                    let clear = |p: &[f64]| {
                        self.point_clear(p) && self.segment_clear(a, p) && self.segment_clear(p, b)
                    };
                    let (mut ok, mut bad) = (0.0, 1.0);
                    if clear(&candidate(1.0)) {
                        ok = 1.0;
                    } else {
                        for _ in 0..12 {
                            let mid = 0.5 * (ok + bad);
                            if clear(&candidate(mid)) {
                                ok = mid;
                            } else {
                                bad = mid;
                            }
                        }
                    }
                    let mut p = candidate(ok);
                    if ok < 1.0 {
                        // Blocked: relax each axis on its own (e.g. height while sliding along a wall).
                        for k in 0..p.len() {
                            let mut q = p.clone();
                            q[k] = target[k];
                            if clear(&q) {
                                p = q;
                            }
                        }
                    }
                    moved = moved.max(dist(&p, v));
                    pts[i] = p;
                }
                if moved < 1e-3 * self.res {
                    break;
                }
            }
            pts = self.shortcut(pts);
        }
        pts
    }

    /// Greedy shortcutting: from each kept point jump to the farthest point a clear segment reaches.
    fn shortcut(&self, pts: Vec<Vec<f64>>) -> Vec<Vec<f64>> {
        let mut out = vec![pts[0].clone()];
        let mut i = 0;
        while i < pts.len() - 1 {
            let mut j = pts.len() - 1;
            while j > i + 1 && !self.segment_clear(&pts[i], &pts[j]) {
                j -= 1;
            }
            out.push(pts[j].clone());
            i = j;
        }
        out
    }
}

/// Tracks a polyline exactly: each step lands on the path, as far along as the limits allow.
struct PathFollower<'a> {
    task: &'a Task,
    pts: Vec<Vec<f64>>,
    /// Arc length at each vertex.
    cum: Vec<f64>,
    /// Arc length reached so far.
    s: f64,
    speed_limits: Vec<f64>,
    target: Vec<f64>,
}

impl<'a> PathFollower<'a> {
    fn new(task: &'a Task, pts: Vec<Vec<f64>>, speed_limits: Vec<f64>) -> Self {
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

    fn total_length(&self) -> f64 {
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
            .zip(&self.speed_limits)
            .all(|(a, l)| a.abs() <= *l);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demonstrations_for_the_cylinder_task_go_around_it_and_reach_the_goal() {
        let t = Task::load("reach_obstacle_3d").unwrap();
        let opts = ExpertOptions {
            count: 12,
            seed: 1,
            jitter: None,
            margin: None,
        };
        let trajs = generate(&t, &opts, &mut |_| {}).unwrap();
        assert_eq!(trajs.len(), 12);
        for tr in &trajs {
            assert!(tr.reached_goal && tr.truly_feasible());
            for i in 0..tr.len() {
                let s = tr.state(i);
                let r = ((s[0] - 0.55).powi(2) + s[1].powi(2)).sqrt();
                assert!(r >= 0.05 - 1e-9, "closer than the margin: {r}");
            }
        }
    }

    #[test]
    fn same_seed_same_demonstrations() {
        let t = Task::load("point_ellipse_2d").unwrap();
        let opts = ExpertOptions {
            count: 6,
            seed: 7,
            jitter: None,
            margin: None,
        };
        let a = generate(&t, &opts, &mut |_| {}).unwrap();
        let b = generate(&t, &opts, &mut |_| {}).unwrap();
        assert_eq!(a, b);
        let c = generate(&t, &ExpertOptions { seed: 8, ..opts }, &mut |_| {}).unwrap();
        assert_ne!(a[5], c[5], "the jittered starts depend on the seed");
    }

    #[test]
    fn expert_path_is_near_shortest() {
        // Around a single 2-D disc the taut path is within a few percent of the analytic shortest path.
        let yaml = include_str!("../config/tasks/point_ellipse_2d.yaml")
            .replace("  - kind: ellipsoid\n    center: [0.82, 1.00]\n    covariance: [[0.01625, -0.01], [-0.01, 0.0225]]   # [[1.3, -0.8], [-0.8, 1.8]] / 80\n    bound: 5.0\n", "");
        let t = Task::from_yaml(&yaml, std::path::Path::new("t.yaml")).unwrap();
        assert_eq!(t.true_constraint.len(), 1);
        let start = [1.44, 1.1];
        let mut sim = Simulator::new(&t);
        let ex = Expert::new(&t, 0.05).unwrap();
        let tr = ex.demonstrate(&mut sim, &start).unwrap();
        let mut len = 0.0;
        for i in 0..tr.len() {
            let (a, b) = (
                tr.state(i),
                if i + 1 < tr.len() {
                    tr.state(i + 1)
                } else {
                    &tr.final_state[..]
                },
            );
            len += ((a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2)).sqrt();
        }
        // Analytic: tangent lines to a disc of radius R = 0.30 about (0.72, 0.55) plus the arc between.
        let (c, r) = ([0.72, 0.55], 0.30f64);
        let d = |p: [f64; 2]| ((p[0] - c[0]).powi(2) + (p[1] - c[1]).powi(2)).sqrt();
        let (ds, dg) = (d(start), d([0.0, 0.0]));
        let (ts, tg) = ((ds * ds - r * r).sqrt(), (dg * dg - r * r).sqrt());
        let ang = |p: [f64; 2]| (p[1] - c[1]).atan2(p[0] - c[0]);
        let between = (ang(start) - ang([0.0, 0.0])).abs();
        let between = between.min(2.0 * std::f64::consts::PI - between);
        let arc = between - (r / ds).acos() - (r / dg).acos();
        let shortest = ts + tg + r * arc.max(0.0);
        assert!(
            len < shortest * 1.03 && len > shortest * 0.99,
            "len {len} shortest {shortest}"
        );
    }

    #[test]
    fn velocity_expert_respects_the_limits_and_goes_around_the_blocking_cylinder() {
        let t = Task::load("reach_velocity_3d").unwrap();
        let trajs = generate(
            &t,
            &ExpertOptions {
                count: 12,
                seed: 0,
                jitter: None,
                margin: None,
            },
            &mut |_| {},
        )
        .unwrap();
        for tr in &trajs {
            assert!(tr.reached_goal && tr.truly_feasible());
            for i in 0..tr.len() {
                let a = tr.action(i);
                assert!(
                    a[0].abs() <= 0.99 + 1e-9 && a[2].abs() <= 0.39 + 1e-9,
                    "{a:?}"
                );
            }
        }
    }
}
