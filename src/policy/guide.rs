//! A navigation function over the learned constraint: the DSM policy's way past concave learned
//! obstacles. Modulation is reactive: where learned obstacles merge into a wall that is concave
//! towards the robot, the modulated nominal system has a stable point in front of it and the robot
//! stalls there, short of a goal it could reach by going round. The guide plans once per model, when
//! a run first stalls ([`LazyGuide`]), on a grid over the workspace (Dijkstra from the goal over the
//! cells zeta calls feasible) and gives the policy an intermediate attractor: the farthest point
//! along the planned way that the robot sees in a straight line. Where the goal itself is in sight
//! the attractor is the goal. The DSM policy turns to the guide only once a run has stalled
//! ([`crate::policy::modulation::DsmPolicy::with_guide`]); the modulation and its lookahead still
//! keep the robot out of the learned obstacle, the guide only chooses the way round.
use crate::learn::network::{Mlp, Scratch};
use crate::policy::modulation::{Feasibility, PolicySpace, boundary_distance};
use crate::task::Task;
use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// Cells of the grid in all (about; rounded per axis to the workspace's proportions).
pub const GUIDE_CELLS_2D: usize = 120 * 120;
pub const GUIDE_CELLS_3D: usize = 48 * 48 * 48;

/// How many cells along the way the aim looks ahead (bounds the work per step).
const MAX_WALK: usize = 48;

/// The walk along the way stops after this many cells in a row out of sight: the way has turned a
/// corner.
const UNSEEN_RUN: usize = 8;

/// Within this many cell edges of the robot a sightline may cross the learned boundary's margin
/// (the robot itself is often within it, sliding along the boundary).
const NEAR_CELLS: f64 = 2.0;

/// Crossing a cell whose centre lies within the margin of the learned boundary costs this many times
/// its length: the way keeps to wide passages but may still use a narrow one (or reach a goal that
/// lies close to a learned obstacle).
const NARROW_COST: f64 = 4.0;

/// How a cell's centre lies with respect to the learned obstacle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cell {
    Clear,
    /// Learned feasible, but within the margin of the learned boundary.
    Narrow,
    Blocked,
}

/// The navigation function: per cell the length of the way to the goal and the next cell on it.
#[derive(Debug, Clone)]
pub struct Guide {
    lo: Vec<f64>,
    size: Vec<f64>,
    counts: Vec<usize>,
    cells: Vec<Cell>,
    to_goal: Vec<f64>,
    next: Vec<u32>,
    goal: Vec<f64>,
    goal_cell: usize,
    /// The offsets to a cell's 8 (2-D) or 26 (3-D) neighbours.
    offsets: Vec<Vec<i64>>,
}

impl Guide {
    /// Plan on a grid of about `cells` cells over the box [lo, hi] (feature space, 2 or 3
    /// dimensions) towards `goal`; a cell is crossed if zeta calls its centre feasible, at a higher
    /// cost within `margin` of the learned boundary. None if the box is degenerate, the dimension is
    /// not 2 or 3, or the goal lies outside the box.
    pub fn plan<F: Feasibility + ?Sized>(
        f: &F,
        lo: &[f64],
        hi: &[f64],
        goal: &[f64],
        margin: f64,
        cells: usize,
    ) -> Option<Guide> {
        let d = goal.len();
        if !(2..=3).contains(&d) || lo.len() != d || hi.len() != d || cells < 4usize.pow(d as u32) {
            return None;
        }
        let extent: Vec<f64> = lo.iter().zip(hi).map(|(l, h)| h - l).collect();
        if extent.iter().any(|e| !e.is_finite() || *e <= 0.0)
            || (0..d).any(|k| !(lo[k]..=hi[k]).contains(&goal[k]))
        {
            return None;
        }
        // Square cells, about `cells` of them.
        let counts = crate::geometry::cubic_cell_counts(&extent, cells as f64);
        let size: Vec<f64> = extent
            .iter()
            .zip(&counts)
            .map(|(e, n)| e / *n as f64)
            .collect();
        let total: usize = counts.iter().product();
        let mut guide = Guide {
            lo: lo.to_vec(),
            size,
            counts,
            cells: Vec::with_capacity(total),
            to_goal: vec![f64::INFINITY; total],
            next: vec![u32::MAX; total],
            goal: goal.to_vec(),
            goal_cell: 0,
            offsets: neighbour_offsets(d),
        };
        guide.goal_cell = guide.cell_of(goal);
        let (mut scratch, mut grad, mut centre) = (Scratch::default(), vec![0.0; d], vec![0.0; d]);
        for i in 0..total {
            guide.centre_of(i, &mut centre);
            let logit = f.logit_grad(&centre, &mut grad, &mut scratch);
            // A NaN logit blocks the cell too.
            guide.cells.push(if logit.is_nan() || logit < 0.0 {
                Cell::Blocked
            } else if boundary_distance(logit, &grad) < margin {
                Cell::Narrow
            } else {
                Cell::Clear
            });
        }
        guide.dijkstra();
        Some(guide)
    }

    /// The cell holding `x` (clamped to the grid).
    fn cell_of(&self, x: &[f64]) -> usize {
        let mut i = 0;
        for k in (0..self.counts.len()).rev() {
            let c = ((x[k] - self.lo[k]) / self.size[k]).floor();
            let c = if c.is_finite() {
                c.max(0.0) as usize
            } else {
                0
            };
            i = i * self.counts[k] + c.min(self.counts[k] - 1);
        }
        i
    }

    fn coords(&self, mut i: usize, out: &mut [usize]) {
        for (k, o) in out.iter_mut().enumerate() {
            *o = i % self.counts[k];
            i /= self.counts[k];
        }
    }

    /// The cell at offset `off` from the cell at coordinates `here`; None beyond the grid.
    fn neighbour(&self, here: &[usize], off: &[i64]) -> Option<usize> {
        let mut j = 0usize;
        for k in (0..here.len()).rev() {
            let c = here[k] as i64 + off[k];
            if c < 0 || c >= self.counts[k] as i64 {
                return None;
            }
            j = j * self.counts[k] + c as usize;
        }
        Some(j)
    }

    fn centre_of(&self, i: usize, out: &mut [f64]) {
        let mut c = [0usize; 3];
        self.coords(i, &mut c[..out.len()]);
        for (k, o) in out.iter_mut().enumerate() {
            *o = self.lo[k] + (c[k] as f64 + 0.5) * self.size[k];
        }
    }

    /// The way from every cell to the goal's cell over the cells zeta calls feasible (the goal's
    /// own cell always counts as such), 8- or 26-connected.
    fn dijkstra(&mut self) {
        let d = self.counts.len();
        let start = self.goal_cell;
        self.to_goal[start] = 0.0;
        let mut heap = BinaryHeap::new();
        heap.push(Entry(0.0, start));
        let mut here = [0usize; 3];
        while let Some(Entry(cost, i)) = heap.pop() {
            if cost > self.to_goal[i] {
                continue;
            }
            self.coords(i, &mut here[..d]);
            for off in &self.offsets {
                let Some(j) = self.neighbour(&here[..d], off) else {
                    continue;
                };
                let length: f64 = (0..d).map(|k| (off[k] as f64 * self.size[k]).powi(2)).sum();
                let weight = match self.cells[j] {
                    Cell::Clear => 1.0,
                    Cell::Narrow => NARROW_COST,
                    Cell::Blocked => continue,
                };
                let c = cost + weight * length.sqrt();
                if c < self.to_goal[j] {
                    self.to_goal[j] = c;
                    self.next[j] = i as u32;
                    heap.push(Entry(c, j));
                }
            }
        }
    }

    /// Whether the robot at `a` sees `b`: the straight segment between them crosses no cell that
    /// zeta calls infeasible, nor one within the margin of the learned boundary farther than
    /// [`NEAR_CELLS`] from the robot (or, `at_goal`, from the goal), so that a sightline keeps off
    /// the learned obstacle by about the margin, as the modulated flow does. Sampled at a quarter of
    /// the smallest cell edge; the robot's own cell is not checked, it is already there.
    fn sees(&self, a: &[f64], b: &[f64], at_goal: bool) -> bool {
        let length = crate::geometry::distance(a, b);
        let spacing = 0.25 * self.size.iter().cloned().fold(f64::INFINITY, f64::min);
        let n = (length / spacing).ceil() as usize;
        let from = self.cell_of(a);
        let near = NEAR_CELLS * self.size.iter().cloned().fold(0.0, f64::max);
        let mut p = [0.0; 3];
        let d = a.len();
        (1..=n).all(|j| {
            let t = j as f64 / n as f64;
            for k in 0..d {
                p[k] = a[k] + t * (b[k] - a[k]);
            }
            let c = self.cell_of(&p[..d]);
            match self.cells[c] {
                _ if c == from => true,
                Cell::Clear => true,
                Cell::Narrow => t * length <= near || (at_goal && (1.0 - t) * length <= near),
                Cell::Blocked => false,
            }
        })
    }

    /// Where the policy at `x` should head for: the farthest point along its way to the goal that it
    /// sees in a straight line, written to `aim`. False (and `aim` untouched) when the goal itself is
    /// in sight, or no way from near `x` reaches the goal: then the goal is the attractor.
    pub fn aim(&self, x: &[f64], aim: &mut [f64]) -> bool {
        let d = self.counts.len();
        if x.len() != d || aim.len() != d || x.iter().any(|c| !c.is_finite()) {
            return false;
        }
        if self.sees(x, &self.goal, true) {
            return false;
        }
        // The robot's cell may lie within the learned obstacle's fringe: start from the reachable
        // cell nearest to it, over its neighbours, if its own has no way.
        let own = self.cell_of(x);
        let mut from = own;
        if !self.to_goal[own].is_finite() {
            let (mut here, mut best) = ([0usize; 3], f64::INFINITY);
            self.coords(own, &mut here[..d]);
            let mut centre = [0.0; 3];
            for off in &self.offsets {
                let Some(j) = self
                    .neighbour(&here[..d], off)
                    .filter(|&j| self.to_goal[j].is_finite())
                else {
                    continue;
                };
                self.centre_of(j, &mut centre[..d]);
                let c = self.to_goal[j] + crate::geometry::distance(x, &centre[..d]);
                if c < best {
                    (best, from) = (c, j);
                }
            }
            if !best.is_finite() {
                return false;
            }
        }
        // Walk the way and keep the farthest cell in sight.
        let mut centre = [0.0; 3];
        let (mut i, mut seen, mut unseen_run) = (from, None, 0);
        for _ in 0..MAX_WALK {
            if self.next[i] == u32::MAX || unseen_run >= UNSEEN_RUN {
                break;
            }
            i = self.next[i] as usize;
            self.centre_of(i, &mut centre[..d]);
            if self.sees(x, &centre[..d], false) {
                if i == self.goal_cell {
                    // The way ends in sight: the goal itself is the attractor.
                    return false;
                }
                (seen, unseen_run) = (Some(i), 0);
            } else {
                unseen_run += 1;
            }
        }
        let target = seen.unwrap_or(if from == own {
            self.next[own] as usize
        } else {
            from
        });
        if target >= self.cells.len() {
            return false;
        }
        self.centre_of(target, aim);
        true
    }
}

/// The guide of [`guide_for`], planned when a run first asks for it: most models' runs never stall,
/// and planning costs a pass of zeta over every cell (about 0.1 s in 3-D).
pub struct LazyGuide<'a> {
    task: &'a Task,
    net: &'a Mlp,
    margin: f64,
    starts: &'a [Vec<f64>],
    planned: std::cell::OnceCell<Option<Guide>>,
}

impl<'a> LazyGuide<'a> {
    pub fn new(task: &'a Task, net: &'a Mlp, margin: f64, starts: &'a [Vec<f64>]) -> Self {
        LazyGuide {
            task,
            net,
            margin,
            starts,
            planned: std::cell::OnceCell::new(),
        }
    }

    /// The guide, planned on the first call; None where [`guide_for`] gives none.
    pub fn get(&self) -> Option<&Guide> {
        self.planned
            .get_or_init(|| guide_for(self.task, self.net, self.margin, self.starts))
            .as_ref()
    }

    /// Whether it has been planned (a run asked for it).
    pub fn is_planned(&self) -> bool {
        self.planned.get().is_some()
    }
}

/// The guide for the DSM policy's runs on `task` from `starts` (position constraints in 2-D or 3-D)
/// that keep `margin` from the learned boundary: planned on zeta, over the workspace bounds
/// or, for a task without them, over the box around the evaluation grid, the starts and the goal,
/// widened by a quarter of its size on every side.
pub fn guide_for(task: &Task, net: &Mlp, margin: f64, starts: &[Vec<f64>]) -> Option<Guide> {
    if PolicySpace::of(task) != Ok(PolicySpace::Position) {
        return None;
    }
    let cells = match task.feature_dim() {
        2 => GUIDE_CELLS_2D,
        _ => GUIDE_CELLS_3D,
    };
    let (lo, hi) = match &task.bounds {
        Some(b) => b.clone(),
        None => {
            let goal = task.goal();
            let (mut lo, mut hi) = (goal.to_vec(), goal.to_vec());
            for (k, &i) in task.position_idx.iter().enumerate() {
                let axis = task.grid.get(k).into_iter().flatten();
                for v in starts.iter().filter_map(|s| s.get(i)).chain(axis) {
                    lo[k] = lo[k].min(*v);
                    hi[k] = hi[k].max(*v);
                }
            }
            for k in 0..lo.len() {
                let widen = 0.25 * (hi[k] - lo[k]);
                lo[k] -= widen;
                hi[k] += widen;
            }
            (lo, hi)
        }
    };
    Guide::plan(net, &lo, &hi, task.goal(), margin, cells)
}

/// The offsets to a cell's 8 (2-D) or 26 (3-D) neighbours.
fn neighbour_offsets(d: usize) -> Vec<Vec<i64>> {
    let mut out = vec![vec![]];
    for _ in 0..d {
        out = out
            .into_iter()
            .flat_map(|o| {
                (-1..=1).map(move |s| {
                    let mut o = o.clone();
                    o.push(s);
                    o
                })
            })
            .collect();
    }
    out.retain(|o| o.iter().any(|c| *c != 0));
    out
}

/// A heap entry ordered by least cost first.
struct Entry(f64, usize);

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    fn cmp(&self, other: &Self) -> Ordering {
        other.0.total_cmp(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// zeta = sigmoid(k sd) for the signed distance sd to a union of axis-aligned boxes (positive
    /// outside); the gradient by central differences.
    struct Boxes(Vec<([f64; 2], [f64; 2])>);

    impl Boxes {
        fn sd(&self, x: &[f64]) -> f64 {
            self.0
                .iter()
                .map(|(lo, hi)| {
                    let q: Vec<f64> = (0..2).map(|k| (lo[k] - x[k]).max(x[k] - hi[k])).collect();
                    let outside = q.iter().map(|c| c.max(0.0).powi(2)).sum::<f64>().sqrt();
                    outside + q[0].max(q[1]).min(0.0)
                })
                .fold(f64::INFINITY, f64::min)
        }
    }

    impl Feasibility for Boxes {
        fn logit_grad(&self, x: &[f64], grad: &mut [f64], _: &mut Scratch) -> f64 {
            let h = 1e-6;
            for k in 0..2 {
                let (mut a, mut b) = (x.to_vec(), x.to_vec());
                a[k] += h;
                b[k] -= h;
                grad[k] = 50.0 * (self.sd(&a) - self.sd(&b)) / (2.0 * h);
            }
            50.0 * self.sd(x)
        }
    }

    /// A U open towards -x: its base across the way from the pocket to the goal.
    fn cup() -> Boxes {
        Boxes(vec![
            ([0.60, 0.25], [0.65, 0.75]),
            ([0.35, 0.25], [0.65, 0.30]),
            ([0.35, 0.70], [0.65, 0.75]),
        ])
    }

    #[test]
    fn following_the_aim_from_inside_a_concave_obstacle_reaches_the_goal_without_entering_it() {
        let f = cup();
        let goal = [0.9, 0.5];
        let guide = Guide::plan(&f, &[0.0, 0.0], &[1.0, 1.0], &goal, 0.02, GUIDE_CELLS_2D).unwrap();
        let mut x = vec![0.5, 0.5];
        let mut aim = [0.0; 2];
        let mut reached = false;
        for _ in 0..2000 {
            let target = if guide.aim(&x, &mut aim) { aim } else { goal };
            let to = crate::geometry::distance(&x, &target);
            if crate::geometry::distance(&x, &goal) < 0.01 {
                reached = true;
                break;
            }
            for k in 0..2 {
                x[k] += 0.005 * (target[k] - x[k]) / to.max(0.005);
            }
            assert!(f.sd(&x) > 0.0, "entered the obstacle at {x:?}");
        }
        assert!(reached, "stopped at {x:?}");
        // From the pocket the first aim leads out of it, round one of the arms.
        assert!(guide.aim(&[0.5, 0.5], &mut aim));
        assert!(aim[0] < 0.6, "{aim:?}");
    }

    #[test]
    fn in_sight_of_the_goal_the_goal_is_the_attractor() {
        let guide = Guide::plan(
            &cup(),
            &[0.0, 0.0],
            &[1.0, 1.0],
            &[0.9, 0.5],
            0.02,
            GUIDE_CELLS_2D,
        )
        .unwrap();
        let mut aim = [f64::NAN; 2];
        // Beside the cup, and in the open behind it.
        assert!(!guide.aim(&[0.8, 0.95], &mut aim));
        assert!(!guide.aim(&[0.8, 0.2], &mut aim));
        assert!(aim.iter().all(|c| c.is_nan()), "aim written: {aim:?}");
        // A NaN position gets no aim either.
        assert!(!guide.aim(&[f64::NAN, 0.5], &mut aim));
    }

    #[test]
    fn runs_that_never_stall_never_plan_the_guide_and_the_first_that_asks_plans_it() {
        use crate::policy::modulation::{DsmConfig, DsmPolicy};
        use crate::task::sim::{Simulator, Trajectory};
        let task = Task::load("reach_obstacle_3d").unwrap();
        // zeta = sigmoid(20) everywhere: nothing to go round.
        let mut net = Mlp::new(3, &[4], 0);
        net.params.iter_mut().for_each(|p| *p = 0.0);
        *net.params.last_mut().unwrap() = 20.0;
        let starts = task.start_states();
        let guide = LazyGuide::new(&task, &net, 0.01, &starts);
        let cfg = DsmConfig::default();
        let mut sim = Simulator::new(&task);
        for s in &starts {
            let mut policy = DsmPolicy::new(&task, Some(&net), &cfg)
                .unwrap()
                .with_guide(&guide);
            let mut t = Trajectory::with_capacity(&task);
            sim.rollout(s, &mut policy, &mut t);
            assert!(t.reached_goal);
        }
        assert!(!guide.is_planned());
        assert!(guide.get().is_some());
        assert!(guide.is_planned());
    }

    #[test]
    fn a_stall_where_no_guide_can_be_planned_is_not_counted_as_guided() {
        use crate::policy::modulation::{DsmConfig, DsmPolicy};
        use crate::task::sim::{Simulator, Trajectory};
        // A velocity constraint: no way through positions to plan. Every command but stopping is
        // infeasible (zeta = sigmoid(-20)), so the robot stands still at its start: a stall.
        let task = Task::load("reach_velocity_3d").unwrap();
        let mut net = Mlp::new(task.feature_dim(), &[4], 0);
        net.params.iter_mut().for_each(|p| *p = 0.0);
        *net.params.last_mut().unwrap() = -20.0;
        let starts = task.start_states();
        let guide = LazyGuide::new(&task, &net, 0.01, &starts);
        let cfg = DsmConfig::default();
        let mut sim = Simulator::new(&task);
        let mut policy = DsmPolicy::new(&task, Some(&net), &cfg)
            .unwrap()
            .with_guide(&guide);
        let mut t = Trajectory::with_capacity(&task);
        sim.rollout(&starts[0], &mut policy, &mut t);
        assert!(!t.reached_goal);
        assert!(guide.get().is_none());
        assert!(!policy.guided());
    }

    #[test]
    fn no_guide_for_a_goal_outside_the_box_a_degenerate_box_or_another_dimension() {
        let f = cup();
        assert!(Guide::plan(&f, &[0.0, 0.0], &[1.0, 1.0], &[1.5, 0.5], 0.02, 1000).is_none());
        assert!(Guide::plan(&f, &[0.0, 0.0], &[0.0, 1.0], &[0.0, 0.5], 0.02, 1000).is_none());
        assert!(Guide::plan(&f, &[0.0; 4], &[1.0; 4], &[0.5; 4], 0.02, 1000).is_none());
    }
}
