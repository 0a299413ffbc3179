//! DSM-PUCL's policy: the task's nominal dynamical system modulated by zeta (Huber et al. 2019). It
//! reads zeta directly, so nothing is trained; the first iteration rolls out the nominal DS alone.
use super::{PolicyStats, Proposer, Zeta};
use crate::error::{Error, Result};
use crate::policy::modulation::{DsmConfig, DsmPolicy};
use crate::task::Task;
use crate::task::sim::{Simulator, Trajectory};
use rand_chacha::ChaCha8Rng;

pub struct DsmProposer {
    /// The modulation settings of the rollouts: the model's, without its deployment safety margin
    /// and with per-axis saturated commands, so that the rollouts probe the learned boundary itself;
    /// inside the learned obstacle they keep going, as the reference's do.
    probe: DsmConfig,
}

impl DsmProposer {
    /// `star_prior`: the constraint is on the command and D is star-shaped around the zero command
    /// (`LearnConfig::star_prior`). The rollouts then project their commands along rays from zero,
    /// so that they probe the learned boundary in every direction a command can take from a stop,
    /// not only around the demonstrations' mean command, which the model's users project from.
    pub fn new(dsm: &DsmConfig, star_prior: bool) -> Self {
        let mut probe = DsmConfig {
            safety_margin: 0.0,
            keep_direction: false,
            leave_inside: false,
            ..dsm.clone()
        };
        if star_prior && let Some(r) = probe.velocity_reference.as_mut() {
            r.iter_mut().for_each(|c| *c = 0.0);
        }
        DsmProposer { probe }
    }
}

impl Proposer for DsmProposer {
    fn improve(&mut self, _: &Task, _: &[Vec<f64>], _: &Zeta) -> Result<Option<PolicyStats>> {
        Ok(None)
    }

    fn rollouts_per_start(&self) -> usize {
        1
    }

    fn propose(
        &mut self,
        sim: &mut Simulator,
        start: &[f64],
        _k: usize,
        zeta: &Zeta,
        _rng: &mut ChaCha8Rng,
        traj: &mut Trajectory,
    ) -> Result<()> {
        // The nominal DS first, then the DS modulated by the current zeta.
        let net = (zeta.iteration > 0).then_some(zeta.net);
        let mut policy = DsmPolicy::new(sim.task(), net, &self.probe).map_err(Error::Invalid)?;
        sim.rollout(start, &mut policy, traj);
        Ok(())
    }
}
