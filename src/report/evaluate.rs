//! Evaluation of a learned constraint against the task's truth: the network as a classifier on the
//! task's grid, and episodes of the policy that uses it (the unsafe rate beside goal reaching).
use crate::deploy::filter::{FilterConfig, SafetyFilter, Status};
use crate::deploy::model::ConstraintModel;
use crate::error::{Error, Result};
use crate::learn::Learned;
use crate::learn::network::Mlp;
use crate::policy::crl::GaussianPolicy;
use crate::policy::crl::PolicyFile;
use crate::policy::guide::LazyGuide;
use crate::policy::modulation::{DsmConfig, DsmPolicy};
use crate::report::metrics::{Confusion, UnsafeRate, grid_confusion};
use crate::task::Task;
use crate::task::sim::{Simulator, Trajectory};
use ndarray::{Array2, ArrayView2};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use std::sync::{Arc, Mutex};

/// The learned network as a classifier on the grid, or on the states of the task's evaluation
/// policies where it has no grid.
pub fn grid_metrics(task: &Task, net: &Mlp, threshold: f64) -> Confusion {
    if task.true_constraint.is_empty() {
        // Nothing to compare with (a real robot's task): the metrics are NaN.
        return Confusion::default();
    }
    if !task.grid.is_empty() {
        // Batched evaluation of the whole grid, then comparison with the truth.
        let d = task.feature_dim();
        let mut pts = Vec::new();
        crate::report::metrics::for_each_grid_point(task, |x| pts.extend_from_slice(x));
        let x = Array2::from_shape_vec((pts.len() / d, d), pts).expect("rows of d");
        let z = net.zeta_batch(x.view());
        let mut i = 0;
        return grid_confusion(task, |_| {
            i += 1;
            z[i - 1] < threshold
        });
    }
    match policy_states(task) {
        Ok(pts) => {
            let d = task.feature_dim();
            let x = ArrayView2::from_shape((pts.len() / d, d), &pts).expect("rows of d");
            let z = net.zeta_batch(x);
            let mut c = Confusion::default();
            for (p, z) in x.rows().into_iter().zip(z.iter()) {
                let p = p.as_slice().expect("contiguous rows");
                c.add(task.truly_infeasible(p), *z < threshold);
            }
            c
        }
        Err(e) => {
            // No points: the metrics are NaN, and this says why.
            eprintln!("warning: task '{}': no evaluation states: {e}", task.name());
            Confusion::default()
        }
    }
}

/// The feature points of the task's evaluation policies' mean-action rollouts (`episodes` each,
/// from the task's starts, jittered with seed 0). Computed once per task definition.
pub fn policy_states(task: &Task) -> Result<Arc<Vec<f64>>> {
    static CACHE: Mutex<Vec<(String, Arc<Vec<f64>>)>> = Mutex::new(Vec::new());
    let key = serde_json::to_string(&task.spec).unwrap_or_default();
    if let Some((_, pts)) = CACHE
        .lock()
        .ok()
        .and_then(|c| c.iter().find(|(k, _)| *k == key).cloned())
    {
        return Ok(pts);
    }
    if task.spec.evaluation.policies.is_empty() {
        return Err(Error::Invalid("evaluation.policies is empty".into()));
    }
    let starts = task.start_states();
    let episodes = task.spec.evaluation.episodes;
    let mut sim = Simulator::new(task);
    let mut traj = Trajectory::with_capacity(task);
    let mut psi = vec![0.0; task.feature_dim()];
    let mut pts = Vec::new();
    for name in &task.spec.evaluation.policies {
        let f = match crate::task::builtin_policy(name) {
            Some(text) => PolicyFile::parse(text, std::path::Path::new(name), task)?,
            None => PolicyFile::load(std::path::Path::new(name), task)?,
        };
        for s in episode_starts(task, &starts, episodes, 0) {
            sim.rollout(&s, &mut &f.policy, &mut traj);
            for t in 0..traj.len() {
                task.features_into(traj.state(t), traj.action(t), &mut psi);
                pts.extend_from_slice(&psi);
            }
        }
    }
    let pts = Arc::new(pts);
    if let Ok(mut c) = CACHE.lock() {
        c.push((key, pts.clone()));
    }
    Ok(pts)
}

/// Metrics of a learned network: on the grid, and the DSM policy it modulates.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Evaluation {
    pub iou: f64,
    pub recall: f64,
    pub precision: f64,
    pub unsafe_rate: f64,
    pub violating_episodes: f64,
    pub goal_reached: f64,
    /// The fraction of episodes that ended short of the goal standing still: over their last
    /// second their position moved less than the goal tolerance. A stall, where an episode still
    /// moving when the horizon ended was only slow. 0 for a task without a goal.
    pub stopped: f64,
    /// The fraction of episodes that stalled in front of a learned obstacle and were guided round it
    /// from then on (the DSM policy's evaluation guide; 0 for other policies). The safety filter does
    /// not plan: a controller's run through it that stalls there stays stalled.
    pub guided: f64,
    /// Through the safety filter: the fraction of episodes that ended short of the goal with the
    /// filter reporting the command held back by the learned constraint (a deployment's controller
    /// is told so on /diagnostics). 0 for the policies.
    pub held_back: f64,
    /// Through the safety filter: the fraction of episodes that start inside the learned obstacle
    /// or within the filter's margin of it ([`SafetyFilter::unreachable`]), where the filter lets
    /// the robot move but does not keep it out; 0 for the policies. A goal the filter calls
    /// unreachable ([`Evaluation::goal_blocked`]) can still be reached by these.
    pub started_within_margin: f64,
    /// The episodes' mean return (what a task without a goal shows beside the unsafe rate).
    pub mean_return: f64,
    pub confusion: Confusion,
    pub unsafe_counts: UnsafeRate,
    /// (episode, step, state) of the first violating step of each violating episode.
    #[serde(skip)]
    pub first_violations: Vec<(usize, usize, Vec<f64>)>,
    /// (episode, final state, held back) of each episode that ended short of the goal; held back:
    /// through the safety filter, ending with the filter reporting the command held back.
    #[serde(skip)]
    pub short_of_goal: Vec<(usize, Vec<f64>, bool)>,
    /// Through the safety filter: why no filtered run from outside its margin can reach the goal,
    /// if none can.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goal_blocked: Option<String>,
}

/// The start of evaluation episode i: the given starts in turn; from the second pass on, positions
/// perturbed by the task's start_jitter (seeded, within the bounds, resampled until truly feasible),
/// so repeated episodes differ.
pub fn episode_starts(
    task: &Task,
    starts: &[Vec<f64>],
    episodes: usize,
    seed: u64,
) -> Vec<Vec<f64>> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let j = task.spec.start_jitter;
    let zero = vec![0.0; task.action_dim()];
    let mut psi = vec![0.0; task.feature_dim()];
    (0..episodes)
        .map(|i| {
            let base = &starts[i % starts.len()];
            if i < starts.len() || j <= 0.0 {
                return base.clone();
            }
            for _ in 0..1000 {
                let mut s = base.clone();
                for &k in &task.position_idx {
                    s[k] += rng.random_range(-j..=j);
                }
                if let Some((lo, hi)) = &task.bounds {
                    for (p, &k) in task.position_idx.iter().enumerate() {
                        s[k] = s[k].clamp(lo[p], hi[p]);
                    }
                }
                task.features_into(&s, &zero, &mut psi);
                if task.constrains_action() || !task.truly_infeasible(&psi) {
                    return s;
                }
            }
            base.clone()
        })
        .collect()
}

/// Evaluation episodes need a start and a number of them.
fn need_episodes(starts: &[Vec<f64>], episodes: usize) -> Result<()> {
    if starts.is_empty() || episodes == 0 {
        return Err(Error::Invalid(
            "evaluation needs at least one start and one episode".into(),
        ));
    }
    Ok(())
}

/// A network on the grid (or the evaluation states), with the unsafe rate and goal reaching of a
/// CRL policy's mean action from the evaluation starts.
pub fn evaluate_policy(
    task: &Task,
    net: &Mlp,
    threshold: f64,
    policy: &GaussianPolicy,
    starts: &[Vec<f64>],
    episodes: usize,
    seed: u64,
) -> Result<Evaluation> {
    need_episodes(starts, episodes)?;
    let mut sim = Simulator::new(task);
    let mut trajs = Vec::with_capacity(episodes);
    for s in episode_starts(task, starts, episodes, seed) {
        let mut t = Trajectory::with_capacity(task);
        sim.rollout(&s, &mut &*policy, &mut t);
        trajs.push(t);
    }
    Ok(Evaluation::of(
        task,
        grid_metrics(task, net, threshold),
        &trajs,
    ))
}

/// Evaluate a network with its DSM settings on a task.
pub fn evaluate(
    task: &Task,
    net: &Mlp,
    dsm: &DsmConfig,
    threshold: f64,
    starts: &[Vec<f64>],
    episodes: usize,
    seed: u64,
) -> Result<Evaluation> {
    need_episodes(starts, episodes)?;
    let c = grid_metrics(task, net, threshold);
    let guide = LazyGuide::new(task, net, dsm.safety_margin, starts);
    let mut sim = Simulator::new(task);
    let (mut trajs, mut guided) = (Vec::with_capacity(episodes), 0);
    for s in episode_starts(task, starts, episodes, seed) {
        let mut t = Trajectory::with_capacity(task);
        let mut policy = DsmPolicy::new(task, Some(net), dsm)
            .map_err(Error::Invalid)?
            .with_guide(&guide);
        sim.rollout(&s, &mut policy, &mut t);
        guided += usize::from(policy.guided());
        trajs.push(t);
    }
    Ok(Evaluation {
        guided: guided as f64 / trajs.len().max(1) as f64,
        ..Evaluation::of(task, c, &trajs)
    })
}

/// The nominal controller of [`evaluate_filtered`]: a P-controller towards the goal with this gain
/// (1/s), its speed capped at the given one, as `scripts/loop.py` drives the arm over ROS.
const NOMINAL_GAIN: f64 = 2.0;

/// The nominal controller's default top speed, m/s: what `scripts/loop.py` drives the arm at.
pub const NOMINAL_SPEED: f64 = 0.25;

/// [`NOMINAL_SPEED`] in the task's position units per second (a task in millimetres drives at 250),
/// or the arm's top speed ([`arm_top_speed`]) where that is slower: a controller is written for its
/// arm, and an arm commanded faster than it goes saturates its axes one by one, which bends the
/// filtered command (a 6 cm task whose arm goes 2 cm/s: 30 of 30 filtered runs entered the
/// obstacle at 0.25 m/s, none at 2 cm/s).
pub fn nominal_speed(task: &Task) -> Result<f64> {
    let metres = task.metres_per_position_unit().map_err(|e| {
        Error::Invalid(format!(
            "{e}: give the nominal speed in the task's units per second"
        ))
    })?;
    Ok((NOMINAL_SPEED / metres).min(arm_top_speed(task)))
}

/// The fastest the arm moves in every direction, position units per second: the action limit's
/// top speed times `velocity_scale`. Faster commands are limited by the dynamics, a box limit axis
/// by axis.
pub fn arm_top_speed(task: &Task) -> f64 {
    task.top_action_speed() * task.spec.dynamics.velocity_scale
}

/// Episodes as the model is deployed: from the evaluation starts, a P-controller commands a twist
/// towards the task's goal at up to `speed` (position units per second; [`nominal_speed`]), and
/// the safety filter (`filter`, e.g. the node's defaults) turns it into the command the arm
/// executes. The filter needs a 2-D or 3-D position, read off the pose's axes by
/// [`Task::pose_axes`].
pub fn evaluate_filtered(
    task: &Task,
    model: Arc<ConstraintModel>,
    filter: FilterConfig,
    starts: &[Vec<f64>],
    episodes: usize,
    seed: u64,
    speed: f64,
) -> Result<Evaluation> {
    need_episodes(starts, episodes)?;
    // The filter reads the pose and the twist: the task's positions on their axes (x, y, z).
    let axes = task.pose_axes().map_err(Error::Invalid)?;
    if axes.len() < 2 || task.spec.goal.is_none() {
        return Err(Error::Invalid(format!(
            "the safety filter drives a 2-D or 3-D position towards a goal; task '{}' has a {}-D \
             position{}",
            task.name(),
            task.position_idx.len(),
            if task.spec.goal.is_none() {
                " and no goal"
            } else {
                ""
            }
        )));
    }
    if !(speed.is_finite() && speed > 0.0) {
        return Err(Error::Invalid(format!(
            "the nominal speed must be a positive number of position units per second, got {speed}"
        )));
    }
    let c = grid_metrics(task, &model.network, model.threshold);
    let mut safety = SafetyFilter::new(filter);
    safety.set_model(model).map_err(Error::Invalid)?;
    let (dt, scale) = (task.spec.dynamics.dt, task.spec.dynamics.velocity_scale);
    let goal = task.spec.goal.position.clone();
    let goal_blocked = goal_unreachable(&mut safety, &axes, &goal, task.spec.goal.tolerance);
    // One clock over all episodes: every input is fresh when the filter reads it.
    let mut now = 0.0;
    // The task's horizon is the time its own policy gets, at up to the task's top speed; a nominal
    // controller driving slower gets that time stretched by the ratio, so that a run that is only
    // slower is not counted as one that did not reach the goal.
    let stretch = (arm_top_speed(task) / speed).max(1.0);
    let steps = (task.spec.horizon as f64 * stretch).ceil() as usize;
    let mut sim = Simulator::new(task);
    let mut trajs = Vec::with_capacity(episodes);
    let (mut held_back, mut started_within_margin) = (0, 0);
    let mut held_at_end = Vec::with_capacity(episodes);
    for s in episode_starts(task, starts, episodes, seed) {
        let p = Task::to_pose_axes(&axes, &task.position_of(&s));
        started_within_margin += usize::from(safety.unreachable(p).is_some());
        // A new run: the last one's headway does not count towards this one being held back.
        safety.forget_motion();
        let mut t = Trajectory::with_capacity(task);
        let mut held = false;
        let mut drive = |state: &[f64], action: &mut [f64]| {
            let p = task.position_of(state);
            let mut v: Vec<f64> = goal
                .iter()
                .zip(&p)
                .map(|(g, x)| NOMINAL_GAIN * (g - x))
                .collect();
            let n = crate::geometry::norm(&v);
            if n > speed {
                v.iter_mut().for_each(|c| *c *= speed / n);
            }
            let v = Task::to_pose_axes(&axes, &v);
            safety.set_pose(now, Task::to_pose_axes(&axes, &p));
            safety.set_command(now, [v[0], v[1], v[2], 0.0, 0.0, 0.0]);
            let out = safety.output(now);
            held = matches!(out.status, Status::Held { .. });
            let twist = [out.twist[0], out.twist[1], out.twist[2]];
            for (a, v) in action.iter_mut().zip(Task::from_pose_axes(&axes, twist)) {
                *a = v / scale;
            }
            now += dt;
        };
        sim.rollout_for(steps, &s, &mut drive, &mut t);
        held_back += usize::from(held && !t.reached_goal);
        held_at_end.push(held);
        trajs.push(t);
    }
    let mut e = Evaluation::of(task, c, &trajs);
    for (episode, _, held) in &mut e.short_of_goal {
        *held = held_at_end[*episode];
    }
    Ok(Evaluation {
        goal_blocked,
        held_back: held_back as f64 / trajs.len().max(1) as f64,
        started_within_margin: started_within_margin as f64 / trajs.len().max(1) as f64,
        ..e
    })
}

/// Why no run through `safety` from outside its margin can come within `tolerance` of `goal` (the
/// task's positions, on the pose's `axes`), if none can: the goal and points half and all of the
/// tolerance from it in the 8 (plane) or 26 (space) directions of the grid are each unreachable
/// ([`SafetyFilter::unreachable`]). A run reaches the goal anywhere within the tolerance, so one
/// reachable point there is enough to say nothing.
fn goal_unreachable(
    safety: &mut SafetyFilter,
    axes: &[usize],
    goal: &[f64],
    tolerance: f64,
) -> Option<String> {
    let why = safety.unreachable(Task::to_pose_axes(axes, goal))?;
    let dim = goal.len() as u32;
    for dir in 0..3usize.pow(dim) {
        let d: Vec<f64> = (0..dim)
            .map(|k| (dir / 3usize.pow(k) % 3) as f64 - 1.0)
            .collect();
        let n = crate::geometry::norm(&d);
        if n == 0.0 {
            continue;
        }
        for r in [0.5, 0.99] {
            let p: Vec<f64> = (0..goal.len())
                .map(|k| goal[k] + r * tolerance * d[k] / n)
                .collect();
            safety.unreachable(Task::to_pose_axes(axes, &p))?;
        }
    }
    Some(format!(
        "{why}, and so does every point within the goal tolerance ({tolerance}) checked"
    ))
}

impl Evaluation {
    /// The metrics of a confusion and of episodes of `task`.
    fn of(task: &Task, c: Confusion, trajs: &[Trajectory]) -> Evaluation {
        let u = UnsafeRate::of(trajs);
        let last_second = (1.0 / task.spec.dynamics.dt).ceil() as usize;
        let stood_still = |t: &Trajectory| {
            let tolerance = task.spec.goal.tolerance;
            let Some(k) = t.len().checked_sub(last_second.max(1)) else {
                return false;
            };
            let (then, now) = (
                task.position_of(t.state(k)),
                task.position_of(&t.final_state),
            );
            tolerance > 0.0 && crate::geometry::distance(&then, &now) < tolerance
        };
        Evaluation {
            iou: c.iou(),
            recall: c.recall(),
            precision: c.precision(),
            unsafe_rate: u.rate(),
            violating_episodes: u.episode_fraction(),
            goal_reached: trajs.iter().filter(|t| t.reached_goal).count() as f64
                / trajs.len().max(1) as f64,
            stopped: trajs
                .iter()
                .filter(|t| !t.reached_goal && stood_still(t))
                .count() as f64
                / trajs.len().max(1) as f64,
            guided: 0.0,
            held_back: 0.0,
            started_within_margin: 0.0,
            mean_return: trajs.iter().map(|t| t.episode_return).sum::<f64>()
                / trajs.len().max(1) as f64,
            confusion: c,
            unsafe_counts: u,
            first_violations: trajs
                .iter()
                .enumerate()
                .filter_map(|(e, t)| {
                    t.violations
                        .iter()
                        .position(|v| *v)
                        .map(|i| (e, i, t.state(i).to_vec()))
                })
                .collect(),
            short_of_goal: trajs
                .iter()
                .enumerate()
                .filter(|(_, t)| !t.reached_goal)
                .map(|(e, t)| (e, t.final_state.clone(), false))
                .collect(),
            goal_blocked: None,
        }
    }
}

/// [`evaluate`] of a learning result as its model file is used: threshold 0.5, its modulation settings,
/// the task's number of evaluation episodes from the demonstration starts.
pub fn evaluate_learned(task: &Task, learned: &Learned, seed: u64) -> Result<Evaluation> {
    evaluate(
        task,
        &learned.net,
        &learned.dsm,
        0.5,
        &learned.starts,
        task.spec.evaluation.episodes,
        seed,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_episode_short_of_the_goal_counts_as_stopped_only_when_it_stood_still_at_the_end() {
        let task = Task::load("point_ellipse_2d").unwrap();
        let start = task.spec.starts[0].clone();
        let mut sim = Simulator::new(&task);
        let mut run = |policy: &mut dyn crate::task::sim::Policy| {
            let mut t = Trajectory::with_capacity(&task);
            sim.rollout(&start, policy, &mut t);
            t
        };
        // Stands still from the start; drifts away at 0.1 m/s (3 goal tolerances per second) until
        // the horizon; drives to the goal.
        let still = run(&mut |_: &[f64], a: &mut [f64]| a.fill(0.0));
        let drifting = run(&mut |_: &[f64], a: &mut [f64]| a.copy_from_slice(&[0.1, 0.0]));
        let arriving = run(&mut |s: &[f64], a: &mut [f64]| {
            a[0] = -5.0 * s[0];
            a[1] = -5.0 * s[1];
        });
        assert!(!still.reached_goal && !drifting.reached_goal && arriving.reached_goal);
        let e = Evaluation::of(&task, Confusion::default(), &[still, drifting, arriving]);
        assert_eq!(e.goal_reached, 1.0 / 3.0);
        assert_eq!(e.stopped, 1.0 / 3.0);
    }
}
