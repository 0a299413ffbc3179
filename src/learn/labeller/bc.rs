//! The BC baseline: binary classification with every state of every rollout infeasible, both classes
//! weighed by half (REFERENCE.md); no policy filter.
use super::{Bce, Labeller, every_state};
use crate::error::Result;
use crate::learn::identify::Points;

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
        Ok(every_state(demos.dim, rollouts))
    }

    fn classifier(&self) -> Option<&Bce> {
        Some(&self.bce)
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
            warm_epochs: None,
            batch_size: 8,
            balance_classes: false,
            max_states: usize::MAX,
        };
        let mut l = Bc::new(bce);
        let r = l.identify(&demo, &rollouts, &Points::new(1)).unwrap();
        assert_eq!(r.len(), 40);
        assert!(l.bce.balance_classes && !l.uses_policy_filter());
    }
}
