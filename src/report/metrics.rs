//! Metrics of the paper: IoU / recall / precision of the infeasible class on the task's evaluation grid,
//! and the unsafe rate of a policy (true violations per step, pooled over episodes).
use crate::task::Task;
use crate::task::sim::Trajectory;
use serde::Serialize;

/// Confusion counts with infeasible as the positive class.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Confusion {
    /// Truly infeasible, predicted infeasible (TI).
    pub true_infeasible: u64,
    /// Truly infeasible, predicted feasible (FF: a false "feasible", the unsafe error).
    pub false_feasible: u64,
    /// Truly feasible, predicted infeasible (FI: a false "infeasible", the conservative error).
    pub false_infeasible: u64,
    /// Truly feasible, predicted feasible.
    pub true_feasible: u64,
}

impl Confusion {
    /// Count one point.
    pub fn add(&mut self, truly_infeasible: bool, predicted_infeasible: bool) {
        match (truly_infeasible, predicted_infeasible) {
            (true, true) => self.true_infeasible += 1,
            (true, false) => self.false_feasible += 1,
            (false, true) => self.false_infeasible += 1,
            (false, false) => self.true_feasible += 1,
        }
    }
    pub fn total(&self) -> u64 {
        self.true_infeasible + self.false_feasible + self.false_infeasible + self.true_feasible
    }
    /// Points that are truly infeasible.
    pub fn truly_infeasible(&self) -> u64 {
        self.true_infeasible + self.false_feasible
    }
    /// TI / (TI + FF + FI); 1 when both sets are empty; NaN without points (a task without a grid).
    pub fn iou(&self) -> f64 {
        self.ratio(
            self.true_infeasible,
            self.true_infeasible + self.false_feasible + self.false_infeasible,
        )
    }
    /// The IoU of the constant prediction "every point infeasible": the truly infeasible share of the
    /// grid. An IoU is read against it: on a grid that is mostly infeasible, a high IoU says little.
    pub fn all_infeasible_iou(&self) -> f64 {
        self.ratio(self.truly_infeasible(), self.total())
    }
    /// TI / (TI + FF).
    pub fn recall(&self) -> f64 {
        self.ratio(
            self.true_infeasible,
            self.true_infeasible + self.false_feasible,
        )
    }
    /// TI / (TI + FI).
    pub fn precision(&self) -> f64 {
        self.ratio(
            self.true_infeasible,
            self.true_infeasible + self.false_infeasible,
        )
    }
}

impl Confusion {
    fn ratio(&self, a: u64, b: u64) -> f64 {
        if self.total() == 0 {
            f64::NAN
        } else if b == 0 {
            1.0
        } else {
            a as f64 / b as f64
        }
    }
}

/// Call `f` on every point of the task's evaluation grid (first axis fastest).
pub fn for_each_grid_point(task: &Task, mut f: impl FnMut(&[f64])) {
    let axes = &task.grid;
    if axes.is_empty() {
        return;
    }
    let mut idx = vec![0usize; axes.len()];
    let mut x: Vec<f64> = axes.iter().map(|a| a[0]).collect();
    loop {
        f(&x);
        let mut k = 0;
        loop {
            if k == axes.len() {
                return;
            }
            idx[k] += 1;
            if idx[k] < axes[k].len() {
                x[k] = axes[k][idx[k]];
                break;
            }
            idx[k] = 0;
            x[k] = axes[k][0];
            k += 1;
        }
    }
}

/// Compare a predicted infeasible set with the true constraint on the evaluation grid.
pub fn grid_confusion(
    task: &Task,
    mut predicted_infeasible: impl FnMut(&[f64]) -> bool,
) -> Confusion {
    let mut c = Confusion::default();
    for_each_grid_point(task, |x| {
        c.add(task.truly_infeasible(x), predicted_infeasible(x));
    });
    c
}

/// Pooled per-step violations of evaluation episodes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct UnsafeRate {
    pub steps: u64,
    pub violating_steps: u64,
    pub episodes: u64,
    pub violating_episodes: u64,
}

impl UnsafeRate {
    pub fn of(trajs: &[Trajectory]) -> Self {
        let mut u = UnsafeRate::default();
        for t in trajs {
            let v = t.violation_count() as u64;
            u.steps += t.len() as u64;
            u.violating_steps += v;
            u.episodes += 1;
            u.violating_episodes += u64::from(v > 0 || t.final_violation);
        }
        u
    }
    /// Violating steps / steps.
    pub fn rate(&self) -> f64 {
        if self.steps == 0 {
            0.0
        } else {
            self.violating_steps as f64 / self.steps as f64
        }
    }
    /// Episodes with at least one violation / episodes.
    pub fn episode_fraction(&self) -> f64 {
        if self.episodes == 0 {
            0.0
        } else {
            self.violating_episodes as f64 / self.episodes as f64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::sim::{Simulator, nominal_ds};

    #[test]
    fn reference_grid_counts_of_the_true_constraint() {
        let t = Task::load("point_ellipse_2d").unwrap();
        let c = grid_confusion(&t, |_| false);
        assert_eq!((c.truly_infeasible(), c.total()), (487, 2916));
        let t = Task::load("reach_obstacle_3d").unwrap();
        let c = grid_confusion(&t, |_| false);
        assert_eq!((c.truly_infeasible(), c.total()), (7680, 64000));
        let t = Task::load("reach_velocity_3d").unwrap();
        assert_eq!(grid_confusion(&t, |_| false).total(), 40 * 60 * 60);
    }

    #[test]
    fn truth_against_itself_is_perfect() {
        for name in [
            "point_ellipse_2d",
            "reach_obstacle_3d",
            "reach_velocity_3d",
            "reach_four_cups_3d",
        ] {
            let t = Task::load(name).unwrap();
            let c = grid_confusion(&t, |x| t.truly_infeasible(x));
            assert_eq!(
                (c.iou(), c.recall(), c.precision()),
                (1.0, 1.0, 1.0),
                "{name}"
            );
            assert!(c.true_infeasible > 0, "{name}");
        }
    }

    #[test]
    fn hand_checked_iou_recall_precision() {
        let c = Confusion {
            true_infeasible: 6,
            false_feasible: 2,
            false_infeasible: 4,
            true_feasible: 88,
        };
        assert_eq!(c.iou(), 0.5);
        assert_eq!(c.recall(), 0.75);
        assert_eq!(c.all_infeasible_iou(), 0.08);
        assert_eq!(c.precision(), 0.6);
        // Everything predicted infeasible: recall 1, precision = base rate.
        let t = Task::load("reach_obstacle_3d").unwrap();
        let c = grid_confusion(&t, |_| true);
        assert_eq!(c.recall(), 1.0);
        assert!((c.precision() - 0.12).abs() < 1e-12);
    }

    #[test]
    fn unsafe_rate_pools_steps_over_episodes() {
        let t = Task::load("reach_obstacle_3d").unwrap();
        let mut sim = Simulator::new(&t);
        let mut through = Trajectory::with_capacity(&t);
        sim.rollout(
            &t.start_state(&[0.44, -0.03, 0.05]),
            &mut nominal_ds(&t, 2.0),
            &mut through,
        );
        let mut clear = Trajectory::with_capacity(&t);
        sim.rollout(
            &t.start_state(&[0.6, 0.05, 0.05]),
            &mut nominal_ds(&t, 2.0),
            &mut clear,
        );
        assert_eq!(clear.violation_count(), 0);
        let u = UnsafeRate::of(&[through.clone(), clear.clone()]);
        assert_eq!(u.steps as usize, through.len() + clear.len());
        assert_eq!(u.violating_steps as usize, through.violation_count());
        assert_eq!(u.episode_fraction(), 0.5);
    }
}
