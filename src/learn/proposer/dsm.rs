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
    /// counts as going round something (d_r), and `both_ways_lean`; else None (one proposal per
    /// start).
    both_ways: Option<(f64, f64)>,
    /// The other way round from the start just proposed from, if its first proposal went round.
    other_way: Option<Detour>,
    /// The detour of the proposal just made, if it was the other way round.
    leaning: Option<Detour>,
    /// The task's position coordinates in its state.
    position_idx: Vec<usize>,
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
        let both_ways = (cfg.both_ways && position)
            .then(|| (cfg.identify.d_r.unwrap_or(0.0), cfg.both_ways_lean));
        DsmProposer {
            probe,
            both_ways,
            other_way: None,
            leaning: None,
            position_idx: task.position_idx.clone(),
        }
    }
}

impl Proposer for DsmProposer {
    /// The other way round, only the states up to level with the first proposal's farthest
    /// excursion: they probe the far side of what it went round. From there it reaches the goal
    /// from sides the demonstrations never used, and labelling that way labels the goal's
    /// surroundings.
    fn probing_states(&self, traj: &Trajectory) -> usize {
        let Some(d) = &self.leaning else {
            return traj.len();
        };
        (0..traj.len())
            .find(|&t| {
                let p = traj.state(t);
                d.progress(self.position_idx.iter().map(|&i| p[i])) > d.until
            })
            .unwrap_or(traj.len())
    }

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
        self.leaning = None;
        if k > 0 {
            // The second proposal goes round what the first went round, the other way: an
            // obstacle's far side is probed even where no demonstration start leads past it.
            match self.other_way.take() {
                Some(d) => {
                    policy = policy.with_detour(d.clone());
                    self.leaning = Some(d);
                }
                None => return Ok(false),
            }
        }
        sim.rollout(start, &mut policy, traj);
        if k == 0
            && let Some((min_excursion, lean)) = self.both_ways
        {
            let task = sim.task();
            let path: Vec<f64> = (0..traj.len())
                .flat_map(|t| task.position_idx.iter().map(move |&i| (t, i)))
                .map(|(t, i)| traj.state(t)[i])
                .collect();
            self.other_way = Detour::opposite(&path, task.goal(), min_excursion, lean);
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::learn::network::Mlp;
    use rand::SeedableRng;

    #[test]
    fn the_other_way_round_probes_only_up_to_level_with_the_first_proposals_farthest_excursion() {
        let task = Task::load("reach_obstacle_3d").unwrap();
        let cfg = LearnConfig {
            both_ways: true,
            ..LearnConfig::for_task(task.name(), None).unwrap()
        };
        let dsm = crate::learn::completed_dsm(&task, &crate::demos::DemoSet::new(&task), &cfg);
        let mut proposer = DsmProposer::new(&task, &dsm, &cfg);
        let (net, mut rng) = (Mlp::new(3, &[4], 0), ChaCha8Rng::seed_from_u64(0));
        let zeta = Zeta {
            net: &net,
            iteration: 0,
            trained: false,
        };
        let (mut sim, mut traj) = (Simulator::new(&task), Trajectory::with_capacity(&task));
        let start = [0.35, 0.0, 0.05];
        // The first proposal (the nominal DS, straight) counts whole and went round nothing.
        assert!(
            proposer
                .propose(&mut sim, &start, 0, &zeta, &mut rng, &mut traj)
                .unwrap()
        );
        assert_eq!(proposer.probing_states(&traj), traj.len());
        assert!(proposer.other_way.is_none());
        assert!(
            !proposer
                .propose(&mut sim, &start, 1, &zeta, &mut rng, &mut traj)
                .unwrap()
        );
        // As if the first had bulged to +y, farthest 12 cm along its way: the second leans to -y.
        let goal = task.goal().to_vec();
        let along: Vec<f64> = goal.iter().zip(&start).map(|(g, s)| g - s).collect();
        let n = crate::geometry::norm(&along);
        let detour = Detour {
            from: start.to_vec(),
            along: along.iter().map(|c| c / n).collect(),
            until: 0.12,
            side: vec![0.0, -1.0, 0.0],
        };
        proposer.other_way = Some(detour.clone());
        assert!(
            proposer
                .propose(&mut sim, &start, 1, &zeta, &mut rng, &mut traj)
                .unwrap()
        );
        let progress = |t: usize| -> f64 {
            let p = traj.state(t);
            (0..3).map(|k| (p[k] - start[k]) * detour.along[k]).sum()
        };
        let probing = proposer.probing_states(&traj);
        assert!(
            0 < probing && probing < traj.len(),
            "{probing} of {}",
            traj.len()
        );
        assert!((0..probing).all(|t| progress(t) <= detour.until));
        assert!(progress(probing) > detour.until);
        // It leaned: the states it keeps went to -y.
        assert!(
            traj.state(probing - 1)[1] < -0.01,
            "{:?}",
            traj.state(probing - 1)
        );
    }
}
