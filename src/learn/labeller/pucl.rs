//! PUCL's labeller (the paper): reliable infeasible states are the policy states at least d_r from
//! every demonstration (kNN score, eq. 1-3, with the optional expansion), then BCE training.
use super::{Bce, Labeller};
use crate::error::Result;
use crate::learn::identify::{IdentifyConfig, Points, identify};

pub struct Pucl {
    identify: IdentifyConfig,
    bce: Bce,
}

impl Pucl {
    pub fn new(identify: IdentifyConfig, bce: Bce) -> Self {
        Pucl { identify, bce }
    }
}

impl Labeller for Pucl {
    fn identify(&mut self, demos: &Points, rollouts: &[Points], memory: &Points) -> Result<Points> {
        identify(demos, rollouts, memory, &self.identify)
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
    fn pucl_labels_only_the_rollout_states_at_least_d_r_from_the_demonstrations() {
        // Rollouts around 0.3 (0.2..0.39) and 1.0: with d_r 0.105, only states >= 0.3 are reliable.
        let (demo, rollouts) = demos_and_rollouts(&[0.3, 1.0]);
        let cfg: IdentifyConfig = serde_yaml_ng::from_str(
            "{k: 1, metric: euclidean, d_r: 0.105, expansion: false, expansion_min_score: 0.5}",
        )
        .unwrap();
        let mut l = Pucl::new(
            cfg,
            Bce {
                epochs: 1,
                warm_epochs: None,
                batch_size: 8,
                balance_classes: false,
                max_states: usize::MAX,
            },
        );
        let r = l.identify(&demo, &rollouts, &Points::new(1)).unwrap();
        assert_eq!(r.len(), 20 + 10, "{:?}", r.data);
        assert!(r.rows().all(|p| p[0] >= 0.3 - 1e-9));
        assert!(l.uses_policy_filter() && l.keeps_memory_buffer());
    }
}
