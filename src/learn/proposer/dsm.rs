//! DSM-PUCL's policy: the task's nominal dynamical system modulated by zeta (Huber et al. 2019). It
//! reads zeta directly, so nothing is trained; the first iteration rolls out the nominal DS alone.
use super::{PolicyStats, Proposer, Zeta};
use crate::error::{Error, Result};
use crate::learn::config::LearnConfig;
use crate::policy::modulation::{Detour, DsmConfig, DsmPolicy, PolicySpace};
use crate::task::Task;
use crate::task::sim::{Simulator, Trajectory};
use rand_chacha::ChaCha8Rng;

pub struct DsmProposer {
    /// The modulation settings of the rollouts: the model's, without its deployment safety margin
    /// and with per-axis saturated commands, so that the rollouts probe the learned boundary itself;
    /// inside the learned obstacle they keep going, as the reference's do.
    probe: DsmConfig,
    /// `both_ways` on a position constraint: the smallest excursion from the straight line that
    /// counts as going round something (d_r), else None (one proposal per start).
    both_ways: Option<f64>,
    /// The other way round from the start just proposed from, if its first proposal went round.
    other_way: Option<Detour>,
}

impl DsmProposer {
    /// With `star_prior` the constraint is on the command and D is star-shaped around the zero
    /// command (`LearnConfig::star_prior`). The rollouts then project their commands along rays
    /// from zero, so that they probe the learned boundary in every direction a command can take
    /// from a stop, not only around the demonstrations' mean command, which the model's users
    /// project from.
    pub fn new(task: &Task, dsm: &DsmConfig, cfg: &LearnConfig) -> Self {
        let mut probe = DsmConfig {
            safety_margin: 0.0,
            keep_direction: false,
            leave_inside: false,
            ..dsm.clone()
        };
        if cfg.star_prior
            && let Some(r) = probe.velocity_reference.as_mut()
        {
            r.iter_mut().for_each(|c| *c = 0.0);
        }
        let position = PolicySpace::of(task) == Ok(PolicySpace::Position);
        let both_ways = (cfg.both_ways && position).then(|| cfg.identify.d_r.unwrap_or(0.0));
        DsmProposer {
            probe,
            both_ways,
            other_way: None,
        }
    }
}

impl Proposer for DsmProposer {
    fn improve(&mut self, _: &Task, _: &[Vec<f64>], _: &Zeta) -> Result<Option<PolicyStats>> {
        Ok(None)
    }

    fn rollouts_per_start(&self) -> usize {
        if self.both_ways.is_some() { 2 } else { 1 }
    }

    fn must_shortcut(&self, k: usize) -> bool {
        k > 0
    }

    fn propose(
        &mut self,
        sim: &mut Simulator,
        start: &[f64],
        k: usize,
        zeta: &Zeta,
        _rng: &mut ChaCha8Rng,
        traj: &mut Trajectory,
    ) -> Result<bool> {
        // The nominal DS first, then the DS modulated by the current zeta.
        let net = (zeta.iteration > 0).then_some(zeta.net);
        let mut policy = DsmPolicy::new(sim.task(), net, &self.probe).map_err(Error::Invalid)?;
        if k > 0 {
            // The second proposal goes round what the first went round, the other way: an
            // obstacle's far side is probed even where no demonstration start leads past it.
            match self.other_way.take() {
                Some(d) => policy = policy.with_detour(d),
                None => return Ok(false),
            }
        }
        sim.rollout(start, &mut policy, traj);
        if k == 0
            && let Some(min_excursion) = self.both_ways
        {
            let task = sim.task();
            let path: Vec<f64> = (0..traj.len())
                .flat_map(|t| task.position_idx.iter().map(move |&i| (t, i)))
                .map(|(t, i)| traj.state(t)[i])
                .collect();
            self.other_way = Detour::opposite(&path, task.goal(), min_excursion);
        }
        Ok(true)
    }
}
