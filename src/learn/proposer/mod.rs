//! The policy seam of Algorithm 1: a policy that, given the current zeta, proposes high-reward rollouts
//! from the demonstration starts. DSM-PUCL's modulated dynamical system and CRL-PUCL's PPO policy are
//! the two; a new one is a type here implementing [`Proposer`] plus a `PolicyKind` to choose it.
mod crl;
mod dsm;

pub use crl::CrlProposer;
pub use dsm::DsmProposer;

use crate::demos::DemoSet;
use crate::error::Result;
use crate::learn::config::{LearnConfig, PolicyKind};
use crate::learn::network::Mlp;
use crate::policy::crl::GaussianPolicy;
use crate::policy::modulation::DsmConfig;
use crate::task::Task;
use crate::task::sim::{Simulator, Trajectory};
use rand_chacha::ChaCha8Rng;

/// The constraint network as Algorithm 1 holds it at the start of an iteration.
#[derive(Clone, Copy)]
pub struct Zeta<'a> {
    pub net: &'a Mlp,
    /// The outer iteration (0: zeta has never been trained).
    pub iteration: usize,
    /// Whether any training phase has run; before it zeta is its random initialisation.
    pub trained: bool,
}

impl<'a> Zeta<'a> {
    /// Zeta as a learned constraint: none until it was trained.
    pub fn learned(&self) -> Option<&'a Mlp> {
        self.trained.then_some(self.net)
    }
}

/// What a trained policy reports of one improvement phase (CRL: PPO's episodes and nu).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PolicyStats {
    pub mean_return: f64,
    pub mean_cost: f64,
    pub nu: f64,
}

/// The policy of Algorithm 1.
pub trait Proposer {
    /// Adapt the policy to the current zeta before it proposes (CRL trains PPO on zeta's binary
    /// cost); a policy that reads zeta directly (DSM) has nothing to do.
    fn improve(
        &mut self,
        task: &Task,
        starts: &[Vec<f64>],
        zeta: &Zeta,
    ) -> Result<Option<PolicyStats>>;
    /// Rollouts proposed per demonstration start.
    fn rollouts_per_start(&self) -> usize;
    /// Roll out proposal `k` (0-based, below `rollouts_per_start`) from `start` into `traj`; `rng` is
    /// Algorithm 1's generator, for proposals that sample. False: this proposal has nothing to
    /// propose from here (`traj` is not a proposal).
    fn propose(
        &mut self,
        sim: &mut Simulator,
        start: &[f64],
        k: usize,
        zeta: &Zeta,
        rng: &mut ChaCha8Rng,
        traj: &mut Trajectory,
    ) -> Result<bool>;
    /// Whether proposal `k` counts only as a shortcut of its demonstration (`suffix_shortcut` d_r
    /// shorter), as one from a state along it does: a proposal steered a chosen way may beat an
    /// expert's path only by the expert's small detours.
    fn must_shortcut(&self, _k: usize) -> bool {
        false
    }
    /// How many leading states of the proposal just made (`traj`) count as unlabeled data for
    /// identification; the whole proposal still counts for the policy filter.
    fn probing_states(&self, traj: &Trajectory) -> usize {
        traj.len()
    }
    /// Whether Algorithm 1 may stop once the memory buffer stops growing; a policy still learning to
    /// beat the demonstrations (CRL) may not yet propose anything new.
    fn may_stop_early(&self) -> bool {
        true
    }
    /// The trained policy to keep with the model (CRL), if the proposer has one.
    fn into_policy(self: Box<Self>) -> Option<GaussianPolicy> {
        None
    }
}

/// The proposer `cfg.policy` names. `dsm` is the modulation setting completed for the task (the
/// learning rollouts probe the boundary itself, without the deployment margin).
pub fn for_config(
    task: &Task,
    demos: &DemoSet,
    cfg: &LearnConfig,
    dsm: &DsmConfig,
    seed: u64,
) -> Result<Box<dyn Proposer>> {
    Ok(match cfg.policy {
        PolicyKind::Dsm => Box::new(DsmProposer::new(task, dsm, cfg)),
        PolicyKind::Crl => Box::new(CrlProposer::new(task, demos, &cfg.crl, seed)?),
    })
}
