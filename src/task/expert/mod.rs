//! Expert demonstrations from the TRUE constraint: safe and near-optimal for the task's path-length
//! reward. A shortest path around the margin-inflated constraint (grid A*, then shortcut smoothing so it
//! is taut) is tracked at the highest speed the action limits and, for a velocity constraint, the
//! margin-shrunk velocity limits allow. Every visited state lies on the checked path, so it is feasible.
//!
//! `planner` finds the path (grid A*), `smoothing` makes it taut, `tracking` follows it.
mod planner;
mod smoothing;
mod tracking;

use crate::error::{Error, Result};
use crate::task::shape::Shape;
use crate::task::sim::{Policy, Simulator, Trajectory};
use crate::task::{Feature, Task};
use planner::Planner;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tracking::{PathFollower, SpeedLimits};

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

impl ExpertOptions {
    /// `count` demonstrations with seed 0 and the task's own jitter and margin.
    pub fn count(count: usize) -> Self {
        ExpertOptions {
            count,
            seed: 0,
            jitter: None,
            margin: None,
        }
    }
}

/// Generate `count` expert demonstrations; `progress` is called after each one.
pub fn generate(
    task: &Task,
    opts: &ExpertOptions,
    progress: &mut dyn FnMut(usize),
) -> Result<Vec<Trajectory>> {
    generate_reporting(task, opts, &mut |_, _| {}, progress)
}

/// As [`generate`]; a MuJoCo task's expert is first trained by constrained RL on the true constraint
/// (`training(done, total)` environment steps), then `count` of 5/3 as many rollouts are kept.
pub fn generate_reporting(
    task: &Task,
    opts: &ExpertOptions,
    training: &mut dyn FnMut(usize, usize),
    progress: &mut dyn FnMut(usize),
) -> Result<Vec<Trajectory>> {
    if opts.count == 0 {
        return Err(Error::Invalid("--count must be at least 1".into()));
    }
    if task.mujoco.is_some() {
        return trained(task, opts, true, training, progress).map(|(_, trajs)| trajs);
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

/// A MuJoCo task's expert: PPO trained on the true constraint (without it unless `constrained`: the
/// nominal policy), and its demonstrations; `training(done, total)` sees the environment steps,
/// `progress` the rollouts (5/3 as many as `opts.count`).
pub fn trained(
    task: &Task,
    opts: &ExpertOptions,
    constrained: bool,
    training: &mut dyn FnMut(usize, usize),
    progress: &mut dyn FnMut(usize),
) -> Result<(crate::policy::crl::GaussianPolicy, Vec<Trajectory>)> {
    use crate::policy::crl::expert;
    if opts.count == 0 {
        return Err(Error::Invalid("--count must be at least 1".into()));
    }
    if opts.margin.is_some() || opts.jitter.is_some() {
        return Err(Error::Invalid(
            "--margin and --jitter apply to the planning expert; a MuJoCo task's expert is \
             trained (its starts use the task's start_jitter)"
                .into(),
        ));
    }
    let policy = expert::train(task, opts.seed, constrained, training)?;
    let n = expert::candidates(opts.count);
    let trajs = expert::demonstrate(
        task,
        &policy,
        opts.count,
        n,
        constrained,
        opts.seed,
        progress,
    )?;
    Ok((policy, trajs))
}

/// The expert of one task.
pub struct Expert<'a> {
    task: &'a Task,
    planner: Planner,
    /// Speed limits in action units (velocity constraints shrunk by the margin).
    speed_limits: SpeedLimits,
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
        let mut speed_norm = f64::INFINITY;
        let mut forbidden = Vec::new();
        if on_position {
            obstacles.extend(task.true_constraint.iter().map(|s| s.inflate(margin)));
        } else if on_action {
            for s in &task.true_constraint {
                match s.inflate(margin) {
                    Shape::VelocityLimit { max_abs, max_norm } => {
                        for (l, v) in speed_limits.iter_mut().zip(max_abs) {
                            *l = l.min(v);
                        }
                        speed_norm = speed_norm.min(max_norm);
                    }
                    // Tracked at the fastest advance whose command lies outside it: the largest
                    // admissible advance is found by bisection, which needs the commands along
                    // the way from a stop (the zero command) to be admissible up to it.
                    other if other.contains(&vec![0.0; m]) => {
                        return Err(Error::task(
                            task.name(),
                            "true_constraint",
                            "a constraint on the action that forbids standing still (the zero command) has no expert",
                        ));
                    }
                    other => forbidden.push(other),
                }
            }
        } else {
            return Err(Error::task(
                task.name(),
                "constraint_input",
                "the expert handles constraints on the position components or on the action components (in order)",
            ));
        }
        if speed_limits.iter().any(|l| *l <= 0.0) || speed_norm <= 0.0 {
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
            speed_limits: SpeedLimits {
                per_axis: speed_limits,
                norm: speed_norm,
                forbidden,
            },
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
        let yaml = include_str!("../../../config/tasks/point_ellipse_2d.yaml")
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
        let trajs = generate(&t, &ExpertOptions::count(12), &mut |_| {}).unwrap();
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

    /// A mobile base that may reverse (-x) at no more than 0.4 m/s, from starts all round its goal.
    const SLOW_REVERSE: &str = "
name: slow_reverse_2d
description: reversing at most 0.4 m/s
state: [x, y, vx, vy]
action: [ax, ay]
position: [x, y]
velocity_state: [vx, vy]
constraint_input: [ax, ay]
dynamics: {dt: 0.05, velocity_scale: 1.0, action_limit: {box: [1.0, 1.0]}}
goal: {position: [0.0, 0.0], tolerance: 0.05}
horizon: 200
starts: [[2.0, 0.0], [-2.0, 0.0], [0.0, 2.0], [1.4, -1.4], [2.0, 1.0], [-1.4, 1.4]]
reward: {distance: 1.0, distance_at: after_step}
true_constraint:
  - {kind: half_space, normal: [1.0, 0.0], at_most: -0.4}
evaluation:
  grid: [{min: -1.0, max: 1.0, count: 21}, {min: -1.0, max: 1.0, count: 21}]
expert: {margin: 0.02}
";

    #[test]
    fn a_half_space_on_the_command_is_demonstrated_at_its_limit_and_one_forbidding_a_stop_is_refused()
     {
        let t = Task::from_yaml(SLOW_REVERSE, std::path::Path::new("t.yaml")).unwrap();
        let trajs = generate(&t, &ExpertOptions::count(6), &mut |_| {}).unwrap();
        let mut slowest = f64::INFINITY;
        for tr in &trajs {
            assert!(tr.reached_goal && tr.truly_feasible());
            for i in 0..tr.len() {
                slowest = slowest.min(tr.action(i)[0]);
            }
        }
        // Reversing at the limit less the margin, not slower, not faster.
        assert!((slowest - (-0.38)).abs() < 1e-6, "{slowest}");
        let stop = SLOW_REVERSE.replace("at_most: -0.4", "at_most: 0.1");
        let t = Task::from_yaml(&stop, std::path::Path::new("t.yaml")).unwrap();
        let e = generate(&t, &ExpertOptions::count(6), &mut |_| {}).unwrap_err();
        assert!(e.to_string().contains("standing still"), "{e}");
    }
}
