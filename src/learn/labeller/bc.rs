//! The BC baseline: binary classification with every state of every rollout infeasible, both classes
//! weighed by half (REFERENCE.md); no policy filter.
use super::{Bce, Labeller, TrainingData};
use crate::error::Result;
use crate::learn::identify::Points;
use crate::learn::network::{Adam, Mlp};
use rand_chacha::ChaCha8Rng;

pub struct Bc {
    bce: Bce,
}

impl Bc {
    pub fn new(bce: Bce) -> Self {
        Bc {
            bce: Bce {
                balance_classes: true,
                ..bce
            },
        }
    }
}

impl Labeller for Bc {
    fn uses_policy_filter(&self) -> bool {
        false
    }

    fn identify(&mut self, demos: &Points, rollouts: &[Points], _: &Points) -> Result<Points> {
        let mut all = Points::new(demos.dim);
        rollouts.iter().for_each(|p| all.extend(p));
        Ok(all)
    }

    fn train_zeta(
        &mut self,
        net: &mut Mlp,
        adam: &mut Adam,
        data: &TrainingData,
        rng: &mut ChaCha8Rng,
    ) -> f64 {
        self.bce.train(net, adam, data, rng)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::learn::labeller::test_data::demos_and_rollouts;

    #[test]
    fn bc_labels_every_rollout_state_and_balances_the_classes() {
        let (demo, rollouts) = demos_and_rollouts(&[0.0, 1.0]);
        let bce = Bce {
            epochs: 1,
            batch_size: 8,
            balance_classes: false,
        };
        let mut l = Bc::new(bce);
        let r = l.identify(&demo, &rollouts, &Points::new(1)).unwrap();
        assert_eq!(r.len(), 40);
        assert!(l.bce.balance_classes && !l.uses_policy_filter());
    }
}
