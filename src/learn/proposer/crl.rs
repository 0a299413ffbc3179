//! CRL-PUCL's policy: PPO with a PID Lagrangian, trained before each proposal phase on the learned
//! binary cost 1[zeta(psi) < 0.5] (no cost before zeta was first trained). It proposes its mean-action
//! rollout from each start, then samples.
use super::{PolicyStats, Proposer, Zeta};
use crate::demos::DemoSet;
use crate::error::Result;
use crate::learn::network::Scratch;
use crate::policy::crl::{GaussianPolicy, Ppo, PpoConfig, Sampling};
use crate::task::Task;
use crate::task::sim::{Simulator, Trajectory};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

pub struct CrlProposer {
    ppo: Ppo,
    timesteps_per_iteration: usize,
    rollouts_per_start: usize,
}

impl CrlProposer {
    /// A fresh PPO learner whose observations are normalized by the demonstrations' mean and spread.
    pub fn new(task: &Task, demos: &DemoSet, cfg: &PpoConfig, seed: u64) -> Result<Self> {
        let (n, rows) = (task.state_dim(), demos.total_steps().max(1) as f64);
        let states = || demos.demos.iter().flat_map(|x| x.states.chunks(n));
        let mean: Vec<f64> = (0..n)
            .map(|k| states().map(|s| s[k]).sum::<f64>() / rows)
            .collect();
        let scale: Vec<f64> = (0..n)
            .map(|k| {
                let var = states().map(|s| (s[k] - mean[k]).powi(2)).sum::<f64>() / rows;
                1.0 / var.sqrt().max(1e-3)
            })
            .collect();
        Ok(CrlProposer {
            ppo: Ppo::new(task, cfg.clone(), mean, scale, seed)?,
            timesteps_per_iteration: cfg.timesteps_per_iteration,
            rollouts_per_start: cfg.rollouts_per_start,
        })
    }
}

impl Proposer for CrlProposer {
    fn improve(
        &mut self,
        task: &Task,
        starts: &[Vec<f64>],
        zeta: &Zeta,
    ) -> Result<Option<PolicyStats>> {
        let learned = zeta.learned();
        let mut scratch = Scratch::default();
        let mut cost = |psi: &[f64]| match learned {
            Some(net) if net.zeta(psi, &mut scratch) < 0.5 => 1.0,
            _ => 0.0,
        };
        let s = self.ppo.train(
            task,
            starts,
            &mut cost,
            self.timesteps_per_iteration,
            &mut |_| true,
        )?;
        Ok(Some(PolicyStats {
            mean_return: s.mean_return,
            mean_cost: s.mean_cost,
            nu: s.nu,
        }))
    }

    fn rollouts_per_start(&self) -> usize {
        self.rollouts_per_start
    }

    fn propose(
        &mut self,
        sim: &mut Simulator,
        start: &[f64],
        k: usize,
        _zeta: &Zeta,
        rng: &mut ChaCha8Rng,
        traj: &mut Trajectory,
    ) -> Result<bool> {
        if k == 0 {
            // The policy's mean action first, then samples.
            sim.rollout(start, &mut &self.ppo.policy, traj);
        } else {
            let mut policy = Sampling {
                policy: &self.ppo.policy,
                rng: ChaCha8Rng::seed_from_u64(rng.random()),
            };
            sim.rollout(start, &mut policy, traj);
        }
        Ok(true)
    }

    fn may_stop_early(&self) -> bool {
        false
    }

    fn into_policy(self: Box<Self>) -> Option<GaussianPolicy> {
        Some(self.ppo.policy)
    }
}
