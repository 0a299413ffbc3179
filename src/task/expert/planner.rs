//! The expert's planner: grid A* over position space around the margin-inflated true constraint, with
//! exact clearance checks of points and segments. Making the found path taut is `smoothing`'s part.
use crate::error::{Error, Result};
use crate::task::Task;
use crate::task::shape::Shape;
use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// Spacing of the samples of a segment check, in grid cells.
const SAMPLE_STEP: f64 = 0.5;
/// Upper bound on planner grid cells (memory and time stay small on any task).
const MAX_CELLS: f64 = 300_000.0;

/// Grid A* over position space, blocked where an inflated obstacle is.
pub(super) struct Planner {
    lo: Vec<f64>,
    hi: Vec<f64>,
    pub(super) res: f64,
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
    pub(super) fn new(task: &Task, obstacles: Vec<Shape>, margin: f64) -> Result<Self> {
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
    pub(super) fn endpoint_clear(&self, x: &[f64]) -> bool {
        self.in_workspace(x) && !self.obstacles.iter().any(|s| s.contains(x))
    }

    /// A path vertex or segment sample.
    pub(super) fn point_clear(&self, x: &[f64]) -> bool {
        self.in_workspace(x) && !self.sampled.iter().any(|s| s.contains(x))
    }

    pub(super) fn segment_clear(&self, a: &[f64], b: &[f64]) -> bool {
        let len = crate::geometry::distance(a, b);
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
    pub(super) fn plan(&self, start: &[f64], goal: &[f64]) -> Result<Vec<Vec<f64>>, String> {
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
}
