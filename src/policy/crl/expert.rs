//! An expert made by constrained RL on the TRUE constraint, for tasks no planner can demonstrate (a
//! MuJoCo task): PPO with the PID Lagrangian on the true cost 1[psi infeasible], with the PPO settings
//! of the task's CRL-PUCL configuration. Its demonstrations are mean-action rollouts from the task's
//! starts, perturbed by start_jitter; of `candidates` rollouts the `count` truly feasible ones with the
//! highest returns are kept (REFERENCE.md: 30 of 50).
use crate::error::{Error, Result};
use crate::learn::{LearnConfig, PolicyKind};
use crate::policy::crl::{GaussianPolicy, Ppo, Sampling};
use crate::task::Task;
use crate::task::sim::{Simulator, Trajectory};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Environment steps of the expert's training when the task file does not say.
pub const DEFAULT_TIMESTEPS: usize = 600_000;

/// Rollouts made to keep `count` demonstrations: 5/3 as many (REFERENCE.md keeps 30 of 50).
pub fn candidates(count: usize) -> usize {
    (count * 5).div_ceil(3)
}

/// Train the expert policy; `progress(done, total)` after each update. Not `constrained`: the
/// nominal policy, trained on the reward alone (no cost).
pub fn train(
    task: &Task,
    seed: u64,
    constrained: bool,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<GaussianPolicy> {
    let mut cfg = LearnConfig::for_task_policy(task.name(), Some(PolicyKind::Crl), None)?.crl;
    // The true cost is exact, so the Lagrangian adapts to it (the learner may fix nu instead).
    cfg.pid = LearnConfig::for_task(task.name(), None)?.crl.pid;
    cfg.pid.fixed = if constrained { None } else { Some(0.0) };
    let timesteps = task.spec.expert.timesteps.unwrap_or(DEFAULT_TIMESTEPS);
    let starts = task.start_states();
    let (offset, scale) = normalization(task, &starts, seed);
    let mut ppo = Ppo::new(task, cfg, offset, scale, seed)?;
    let mut cost = |psi: &[f64]| {
        if constrained && task.truly_infeasible(psi) {
            1.0
        } else {
            0.0
        }
    };
    ppo.train(task, &starts, &mut cost, timesteps, &mut |done| {
        progress(done.min(timesteps), timesteps);
        true
    })?;
    Ok(ppo.policy)
}

/// Observations centred on the first start and scaled by the spread an untrained (zero-mean, unit
/// standard deviation) policy produces, at most 1 per unit: velocities that swing by metres per second
/// are brought to order one, positions that barely move are left as they are.
fn normalization(task: &Task, starts: &[Vec<f64>], seed: u64) -> (Vec<f64>, Vec<f64>) {
    let n = task.state_dim();
    let m = task.action_dim();
    let flat = GaussianPolicy {
        mean: super::TanhMlp {
            sizes: vec![n, m],
            params: vec![0.0; n * m + m],
        },
        log_std: vec![0.0; m],
        obs_offset: vec![0.0; n],
        obs_scale: vec![1.0; n],
    };
    let mut sim = Simulator::new(task);
    let mut traj = Trajectory::with_capacity(task);
    let mut rows = Vec::new();
    for (i, s) in starts.iter().cycle().take(4.max(starts.len())).enumerate() {
        let mut policy = Sampling {
            policy: &flat,
            rng: ChaCha8Rng::seed_from_u64(seed ^ (i as u64 + 1)),
        };
        sim.rollout(s, &mut policy, &mut traj);
        rows.extend(traj.states.chunks(n).map(<[f64]>::to_vec));
    }
    let count = rows.len().max(1) as f64;
    let scale = (0..n)
        .map(|k| {
            let mean = rows.iter().map(|r| r[k]).sum::<f64>() / count;
            let var = rows.iter().map(|r| (r[k] - mean).powi(2)).sum::<f64>() / count;
            1.0 / var.sqrt().max(1.0)
        })
        .collect();
    (starts[0].clone(), scale)
}

/// `count` demonstrations of the expert: the feasible ones (any, unless `feasible_only`) with the
/// highest returns among `candidates` mean-action rollouts from jittered starts (the first pass over
/// the starts unjittered).
pub fn demonstrate(
    task: &Task,
    policy: &GaussianPolicy,
    count: usize,
    candidates: usize,
    feasible_only: bool,
    seed: u64,
    progress: &mut dyn FnMut(usize),
) -> Result<Vec<Trajectory>> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut sim = Simulator::new(task);
    let starts = &task.spec.starts;
    let j = task.spec.start_jitter;
    let mut kept = Vec::new();
    for i in 0..candidates.max(count) {
        let mut start = task.start_state(&starts[i % starts.len()]);
        if i >= starts.len() && j > 0.0 {
            for &k in &task.position_idx {
                start[k] += rng.random_range(-j..=j);
            }
        }
        let mut traj = Trajectory::with_capacity(task);
        sim.rollout(&start, &mut &*policy, &mut traj);
        if !feasible_only || traj.truly_feasible() {
            kept.push(traj);
        }
        progress(i + 1);
    }
    if kept.len() < count {
        return Err(Error::Invalid(format!(
            "task '{}': only {} of {} expert rollouts are truly feasible, {count} needed (train the \
             expert longer: expert.timesteps)",
            task.name(),
            kept.len(),
            candidates.max(count)
        )));
    }
    kept.sort_by(|a, b| b.episode_return.total_cmp(&a.episode_return));
    kept.truncate(count);
    Ok(kept)
}
