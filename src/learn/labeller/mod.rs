//! The labelling seam of Algorithm 1: a labeller turns the kept rollouts into infeasible data and trains
//! zeta on it. PUCL identifies reliable infeasible states by their distance to the demonstrations (the
//! paper); the baselines are GPUCL (low density under a Gaussian mixture of the demonstrations), BC
//! (every policy state infeasible) and MECL (importance-weighted maximum entropy, its own loss). A new
//! method is a type here implementing [`Labeller`] plus a `Method` to choose it.
mod bc;
mod gpucl;
mod mecl;
mod pucl;

pub use bc::Bc;
pub use gpucl::Gpucl;
pub use mecl::Mecl;
pub use pucl::Pucl;

use crate::error::Result;
use crate::learn::config::{LearnConfig, Method};
use crate::learn::identify::Points;
use crate::learn::network::{Adam, Mlp, train};
use ndarray::{Array1, Array2};
use rand_chacha::ChaCha8Rng;

/// What zeta is trained on in one iteration.
pub struct TrainingData<'a> {
    /// The demonstrations' feature points D (feasible).
    pub demos: &'a Points,
    /// This iteration's reliable infeasible states R.
    pub reliable_infeasible: &'a Points,
    /// The memory buffer M: R of earlier iterations.
    pub memory_buffer: &'a Points,
    /// Infeasible by prior knowledge, not by identification (`LearnConfig::support_prior`). The
    /// classifier methods train on it; MECL's own loss weighs policy states only, as in its paper.
    pub prior_infeasible: &'a Points,
    /// The kept rollouts, one feature-point set each.
    pub rollouts: &'a [Points],
    /// zeta starts from the network an earlier iteration trained (`LearnConfig::warm_epochs`).
    pub warm_start: bool,
}

/// The labeller of Algorithm 1.
pub trait Labeller {
    /// Whether rollouts pass the policy filter first. PU methods (PUCL, GPUCL) do; BC and MECL take
    /// every rollout of the iteration, as the reference does.
    fn uses_policy_filter(&self) -> bool {
        true
    }
    /// This iteration's infeasible states R among the kept rollouts; `memory_buffer` holds earlier
    /// ones.
    fn identify(
        &mut self,
        demos: &Points,
        rollouts: &[Points],
        memory_buffer: &Points,
    ) -> Result<Points>;
    /// Whether R enters the memory buffer M, and so decides when Algorithm 1 stops and whether it
    /// learned anything. MECL weighs only the current rollouts.
    fn keeps_memory_buffer(&self) -> bool {
        true
    }
    /// The classifier training of zeta (BCE on D against R and M); none for a method with a loss
    /// of its own, which overrides `train_zeta`.
    fn classifier(&self) -> Option<&Bce>;
    /// One training phase of zeta; the last loss, NaN when nothing was trained.
    fn train_zeta(
        &mut self,
        net: &mut Mlp,
        adam: &mut Adam,
        data: &TrainingData,
        rng: &mut ChaCha8Rng,
    ) -> f64 {
        match self.classifier() {
            Some(bce) => bce.train(net, adam, data, rng),
            None => f64::NAN,
        }
    }
}

/// Every state of every rollout, in order (the methods that label all policy states).
pub fn every_state(dim: usize, rollouts: &[Points]) -> Points {
    let mut all = Points::new(dim);
    rollouts.iter().for_each(|p| all.extend(p));
    all
}

/// The labeller `cfg.method` names, fitted to the demonstrations where it needs to be (GPUCL).
pub fn for_config(cfg: &LearnConfig, demos: &Points, seed: u64) -> Result<Box<dyn Labeller>> {
    let bce = Bce::from_config(cfg);
    Ok(match cfg.method {
        Method::Pucl => Box::new(Pucl::new(cfg.identify.clone(), bce)),
        Method::Bc => Box::new(Bc::new(bce)),
        Method::Gpucl => Box::new(Gpucl::fit(demos, &cfg.gpucl, bce, seed)?),
        Method::Mecl => Box::new(Mecl::new(cfg.mecl.clone(), cfg.epochs)),
    })
}

/// Binary cross-entropy training of zeta: D feasible against R and M infeasible, minibatch Adam.
#[derive(Debug, Clone, PartialEq)]
pub struct Bce {
    pub epochs: usize,
    /// Epochs once zeta starts from an earlier iteration's network (None: `epochs`).
    pub warm_epochs: Option<usize>,
    pub batch_size: usize,
    /// Weigh both classes equally (else each state counts once).
    pub balance_classes: bool,
    /// The training of one outer iteration visits at most `epochs` times this many states (see
    /// `LearnConfig::max_training_states`).
    pub max_states: usize,
}

impl Bce {
    pub fn from_config(cfg: &LearnConfig) -> Self {
        Bce {
            epochs: cfg.epochs,
            warm_epochs: cfg.warm_epochs,
            batch_size: cfg.batch_size,
            balance_classes: cfg.balance_classes,
            max_states: cfg.max_training_states,
        }
    }

    /// Passes over `n` states: `epochs` (`warm_epochs` for a warm start), fewer when `n` exceeds
    /// `max_states` (the same number of minibatches as that many passes over `max_states`
    /// states), at least one.
    pub fn passes(&self, n: usize, warm_start: bool) -> usize {
        let epochs = match (warm_start, self.warm_epochs) {
            (true, Some(e)) => e,
            _ => self.epochs,
        };
        if n <= self.max_states || n == 0 {
            return epochs;
        }
        epochs
            .saturating_mul(self.max_states)
            .div_ceil(n)
            .clamp(1, epochs)
    }

    /// Train on D against R, M and the prior's infeasible points (nothing when R and M are empty:
    /// NaN).
    pub fn train(
        &self,
        net: &mut Mlp,
        adam: &mut Adam,
        data: &TrainingData,
        rng: &mut ChaCha8Rng,
    ) -> f64 {
        let (demos, reliable, memory) = (data.demos, data.reliable_infeasible, data.memory_buffer);
        if reliable.len() + memory.len() == 0 {
            return f64::NAN;
        }
        let prior = data.prior_infeasible;
        let infeasible = reliable.len() + memory.len() + prior.len();
        let d = demos.dim;
        let n = demos.len() + infeasible;
        let mut x = Array2::<f64>::zeros((n, d));
        let mut y = Array1::<f64>::zeros(n);
        for (r, p) in demos
            .rows()
            .chain(reliable.rows())
            .chain(memory.rows())
            .chain(prior.rows())
            .enumerate()
        {
            x.row_mut(r).assign(&ndarray::ArrayView1::from(p));
            y[r] = if r < demos.len() { 1.0 } else { 0.0 };
        }
        let w = self.balance_classes.then(|| {
            let (nd, ni) = (demos.len() as f64, infeasible as f64);
            Array1::from_iter((0..n).map(|r| {
                if r < demos.len() {
                    0.5 * n as f64 / nd
                } else {
                    0.5 * n as f64 / ni
                }
            }))
        });
        train(
            net,
            adam,
            x.view(),
            y.view(),
            w.as_ref().map(|w| w.view()),
            self.passes(n, data.warm_start),
            self.batch_size,
            rng,
        )
    }
}

#[cfg(test)]
pub(crate) mod test_data {
    use crate::learn::identify::Points;

    /// 1-D demonstrations in [-0.2, 0.2] and rollouts of 20 states around each centre.
    pub fn demos_and_rollouts(centres: &[f64]) -> (Points, Vec<Points>) {
        let mut demo = Points::new(1);
        (0..40).for_each(|i| demo.push(&[-0.2 + 0.01 * i as f64]));
        let rollouts = centres
            .iter()
            .map(|c| {
                let mut p = Points::new(1);
                (0..20).for_each(|i| p.push(&[c - 0.1 + 0.01 * i as f64]));
                p
            })
            .collect();
        (demo, rollouts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn training_passes_shrink_beyond_max_training_states_so_steps_stay_bounded() {
        let bce = Bce {
            epochs: 300,
            warm_epochs: None,
            batch_size: 256,
            balance_classes: false,
            max_states: 25_000,
        };
        assert_eq!(bce.passes(1000, false), 300);
        assert_eq!(bce.passes(25_000, false), 300);
        assert_eq!(bce.passes(100_000, false), 75);
        assert_eq!(bce.passes(10_000_000, false), 1);
        // Minibatches per iteration stop growing with the data.
        let steps = |n: usize| bce.passes(n, false) * n.div_ceil(256);
        assert!(steps(100_000) <= steps(25_000) + 75);
        // Without warm_epochs a warm start trains as long as the first training.
        assert_eq!(bce.passes(100_000, true), 75);
    }

    #[test]
    fn a_warm_started_training_makes_warm_epochs_passes_under_the_same_bound() {
        let bce = Bce {
            warm_epochs: Some(100),
            ..Bce::from_config(&LearnConfig {
                epochs: 300,
                max_training_states: 25_000,
                ..LearnConfig::for_task("reach_obstacle_3d", None).unwrap()
            })
        };
        assert_eq!(bce.passes(1000, false), 300);
        assert_eq!(bce.passes(1000, true), 100);
        assert_eq!(bce.passes(100_000, true), 25);
        assert_eq!(bce.passes(10_000_000, true), 1);
    }
    use rand::SeedableRng;

    #[test]
    fn bce_trains_nothing_without_infeasible_data_and_separates_the_classes_with_it() {
        let (demo, rollouts) = test_data::demos_and_rollouts(&[1.0]);
        let bce = Bce {
            epochs: 200,
            warm_epochs: None,
            batch_size: 16,
            balance_classes: true,
            max_states: usize::MAX,
        };
        let mut net = Mlp::new(1, &[16], 0);
        let mut adam = Adam::new(net.params.len(), 5e-3, 1e-5);
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        let empty = Points::new(1);
        let data = TrainingData {
            demos: &demo,
            reliable_infeasible: &empty,
            memory_buffer: &empty,
            prior_infeasible: &empty,
            rollouts: &rollouts,
            warm_start: false,
        };
        assert!(bce.train(&mut net, &mut adam, &data, &mut rng).is_nan());
        let data = TrainingData {
            reliable_infeasible: &rollouts[0],
            ..data
        };
        assert!(bce.train(&mut net, &mut adam, &data, &mut rng).is_finite());
        let mut s = crate::learn::network::Scratch::default();
        assert!(net.zeta(&[0.0], &mut s) > 0.5 && net.zeta(&[1.0], &mut s) < 0.5);
    }
}
