//! The MECL baseline (maximum-entropy constraint learning): no labelled infeasible set; every state of
//! the current rollouts enters its loss with an importance weight, and nothing is kept in the memory
//! buffer. No policy filter, as the reference does.
use super::{Bce, Labeller, TrainingData, every_state};
use crate::error::Result;
use crate::learn::config::MeclConfig;
use crate::learn::identify::Points;
use crate::learn::network::{Adam, Mlp, sigmoid, softplus};
use ndarray::{Array1, Array2};
use rand_chacha::ChaCha8Rng;

pub struct Mecl {
    cfg: MeclConfig,
    /// Full-batch Adam steps per iteration.
    epochs: usize,
}

impl Mecl {
    pub fn new(cfg: MeclConfig, epochs: usize) -> Self {
        Mecl { cfg, epochs }
    }
}

impl Labeller for Mecl {
    fn uses_policy_filter(&self) -> bool {
        false
    }

    /// Every state of the current rollouts is (softly) infeasible: R reports them; the loss weighs them.
    fn identify(&mut self, demos: &Points, rollouts: &[Points], _: &Points) -> Result<Points> {
        Ok(every_state(demos.dim, rollouts))
    }

    fn keeps_memory_buffer(&self) -> bool {
        false
    }

    fn classifier(&self) -> Option<&Bce> {
        None
    }

    fn train_zeta(
        &mut self,
        net: &mut Mlp,
        adam: &mut Adam,
        data: &TrainingData,
        _: &mut ChaCha8Rng,
    ) -> f64 {
        if data.rollouts.is_empty() {
            return f64::NAN;
        }
        train_mecl(
            net,
            adam,
            data.demos,
            data.rollouts,
            self.cfg.c_reg,
            self.epochs,
        )
    }
}

/// MECL's update on the current rollouts: minimize -mean log zeta(D) + sum_s w(s) log zeta(s)
/// minus c_reg (mean zeta(D) + mean zeta(policy)), with full-batch Adam steps. The weight w(s) is
/// w_IS(tau(s)) normalized over all policy states, where w_IS(tau) is the product of
/// zeta_new / zeta_old over the trajectory: the importance weight of a rollout of the previous
/// policy under the new constraint, constant in the gradient. Returns the last loss.
fn train_mecl(
    net: &mut Mlp,
    adam: &mut Adam,
    demo_points: &Points,
    rollouts: &[Points],
    c_reg: f64,
    epochs: usize,
) -> f64 {
    let d = demo_points.dim;
    let nd = demo_points.len();
    let owner: Vec<usize> = rollouts
        .iter()
        .enumerate()
        .flat_map(|(i, p)| std::iter::repeat_n(i, p.len()))
        .collect();
    let np = owner.len();
    let mut x = Array2::<f64>::zeros((nd + np, d));
    for (r, p) in demo_points
        .rows()
        .chain(rollouts.iter().flat_map(|p| p.rows()))
        .enumerate()
    {
        x.row_mut(r).assign(&ndarray::ArrayView1::from(p));
    }
    let log_zeta = |logit: f64| -softplus(-logit);
    let old: Vec<f64> = net
        .logits(x.view())
        .iter()
        .skip(nd)
        .map(|l| log_zeta(*l))
        .collect();
    let mut grad = vec![0.0; net.params.len()];
    let mut loss = f64::NAN;
    let c = c_reg;
    for _ in 0..epochs {
        net.param_grad_from_logits(
            x.view(),
            |logits| {
                // Self-normalized importance weights per trajectory, then per state.
                let mut lw = vec![0.0; rollouts.len()];
                for (k, &o) in owner.iter().enumerate() {
                    lw[o] += log_zeta(logits[nd + k]) - old[k];
                }
                let m = lw.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let w_traj: Vec<f64> = lw.iter().map(|v| (v - m).exp()).collect();
                let total: f64 = owner.iter().map(|&o| w_traj[o]).sum();
                let (mut l, mut dl) = (0.0, Array1::<f64>::zeros(nd + np));
                for r in 0..nd + np {
                    let z = sigmoid(logits[r]);
                    if r < nd {
                        l += -log_zeta(logits[r]) / nd as f64 - c * z / nd as f64;
                        dl[r] = -(1.0 - z) / nd as f64 - c * z * (1.0 - z) / nd as f64;
                    } else {
                        let w = w_traj[owner[r - nd]] / total;
                        l += w * log_zeta(logits[r]) - c * z / np as f64;
                        dl[r] = w * (1.0 - z) - c * z * (1.0 - z) / np as f64;
                    }
                }
                loss = l;
                dl
            },
            &mut grad,
        );
        adam.step(&mut net.params, &grad);
    }
    loss
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::learn::labeller::test_data::demos_and_rollouts;
    use crate::learn::network::Scratch;

    #[test]
    fn mecl_update_lowers_the_rollouts_logits_and_separates_them_from_the_demonstrations() {
        // 1-D feature: demonstrations in [-0.2, 0.2], two rollouts around 1 and 1.5.
        let (demo, rollouts) = demos_and_rollouts(&[1.0, 1.5]);
        let mut mecl = Mecl::new(MeclConfig { c_reg: 0.1 }, 30);
        let mut net = Mlp::new(1, &[16, 16], 0);
        let mut adam = Adam::new(net.params.len(), 5e-3, 1e-5);
        let mut s = Scratch::default();
        // In logits: the loss is balanced between the classes, so Adam also moves the common bias.
        let z = |net: &Mlp, x: f64, _: &mut Scratch| net.logits(ndarray::arr2(&[[x]]).view())[0];
        let before: Vec<f64> = [0.0, 1.0, 1.5]
            .iter()
            .map(|x| z(&net, *x, &mut s))
            .collect();
        let data = TrainingData {
            demos: &demo,
            reliable_infeasible: &Points::new(1),
            memory_buffer: &Points::new(1),
            rollouts: &rollouts,
        };
        let loss = mecl.train_zeta(
            &mut net,
            &mut adam,
            &data,
            &mut rand::SeedableRng::seed_from_u64(0),
        );
        let after: Vec<f64> = [0.0, 1.0, 1.5]
            .iter()
            .map(|x| z(&net, *x, &mut s))
            .collect();
        assert!(loss.is_finite());
        assert!(
            after[1] < before[1] && after[2] < before[2],
            "{before:?} -> {after:?}"
        );
        assert!(
            after[0] - after[1] > before[0] - before[1],
            "{before:?} -> {after:?}"
        );
    }
}
