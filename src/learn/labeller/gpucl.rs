//! The GPUCL baseline: a Gaussian mixture of the demonstrations (component count by BIC); policy
//! states whose log-density falls below a threshold are the reliable infeasible ones.
use super::{Bce, Labeller};
use crate::error::{Error, Result};
use crate::learn::config::GpuclConfig;
use crate::learn::gmm::Gmm;
use crate::learn::identify::Points;

pub struct Gpucl {
    gmm: Gmm,
    log_density_threshold: f64,
    bce: Bce,
}

impl Gpucl {
    /// Fit the mixture to the demonstrations' feature points.
    pub fn fit(demos: &Points, cfg: &GpuclConfig, bce: Bce, seed: u64) -> Result<Self> {
        let gmm = Gmm::fit_bic(
            &demos.data,
            demos.dim,
            (cfg.components[0], cfg.components[1]),
            seed,
        )
        .map_err(|e| Error::Invalid(format!("gpucl: {e}")))?;
        Ok(Gpucl {
            gmm,
            log_density_threshold: cfg.log_density_threshold,
            bce,
        })
    }
}

impl Labeller for Gpucl {
    fn identify(&mut self, demos: &Points, rollouts: &[Points], _: &Points) -> Result<Points> {
        let mut low = Points::new(demos.dim);
        for p in rollouts.iter().flat_map(|p| p.rows()) {
            if self.gmm.log_density(p) < self.log_density_threshold {
                low.push(p);
            }
        }
        Ok(low)
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
    fn gpucl_labels_the_states_of_low_density_under_the_demonstrations_mixture() {
        let (demo, rollouts) = demos_and_rollouts(&[0.0, 1.0]);
        let cfg = GpuclConfig {
            components: [1, 2],
            log_density_threshold: -6.0,
        };
        let bce = Bce {
            epochs: 1,
            warm_epochs: None,
            batch_size: 8,
            balance_classes: false,
            max_states: usize::MAX,
        };
        let mut l = Gpucl::fit(&demo, &cfg, bce, 0).unwrap();
        let r = l.identify(&demo, &rollouts, &Points::new(1)).unwrap();
        // Everything around 1.0 (far out in the tail) and nothing inside the demonstrations' span.
        assert!(r.rows().all(|p| p[0] > 0.2), "{:?}", r.data);
        assert!(r.rows().filter(|p| p[0] >= 0.9).count() == 20);
    }
}
