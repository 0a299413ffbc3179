//! The MECL baseline (maximum-entropy constraint learning): no labelled infeasible set; every state of
//! the current rollouts enters its loss with an importance weight, and nothing is kept in the memory
//! buffer. No policy filter, as the reference does.
use super::{Bce, Labeller, TrainingData, every_state};
use crate::error::Result;
use crate::learn::config::MeclConfig;
use crate::learn::identify::Points;
use crate::learn::network::{Adam, Mlp, sigmoid};
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
        train_mecl(net, adam, data.demos, data.rollouts, &self.cfg, self.epochs)
    }
}

/// MECL's update on the current rollouts, as the ICRL benchmark trains it: minimize
/// -mean log(zeta(D) + eps) + mean_s w(s) log(zeta(s) + eps) - c_reg (mean zeta(D) + mean zeta(P))
/// with full-batch Adam steps, plus logit_l2 times the mean squared logit (our addition). eps bounds
/// the loss below: without it the policy's states drive log zeta to minus infinity and the network
/// saturates. w(s) is the importance weight of s's rollout, the product over it of
/// (zeta_new + eps) / (zeta_old + eps), normalized to mean 1 over the rollouts and constant in the
/// gradient. The updates stop once either KL divergence between the old and the new weights exceeds
/// `target_kl`. Returns the last loss.
fn train_mecl(
    net: &mut Mlp,
    adam: &mut Adam,
    demo_points: &Points,
    rollouts: &[Points],
    cfg: &MeclConfig,
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
    let (eps, c) = (cfg.eps, cfg.c_reg);
    let log_zeta = |logit: f64| (sigmoid(logit) + eps).ln();
    let old: Vec<f64> = net
        .logits(x.view())
        .iter()
        .skip(nd)
        .map(|l| log_zeta(*l))
        .collect();
    // Per rollout: log of the product of the weight ratios.
    let log_ratio = |logits: &[f64]| {
        let mut lw = vec![0.0; rollouts.len()];
        for (k, &o) in owner.iter().enumerate() {
            lw[o] += log_zeta(logits[nd + k]) - old[k];
        }
        lw
    };
    let mut grad = vec![0.0; net.params.len()];
    let mut loss = f64::NAN;
    for _ in 0..epochs {
        let logits = net.logits(x.view());
        let (kl_old_new, kl_new_old) = kl_divergences(&log_ratio(logits.as_slice().expect("flat")));
        if kl_old_new > cfg.target_kl || kl_new_old > cfg.target_kl {
            break;
        }
        net.param_grad_from_logits(
            x.view(),
            |logits| {
                let lw = log_ratio(logits.as_slice().expect("flat"));
                let m = lw.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let p: Vec<f64> = lw.iter().map(|v| (v - m).exp()).collect();
                let sum: f64 = p.iter().sum();
                // Normalized to mean 1 over rollouts, then averaged over the policy's states.
                let w_rollout: Vec<f64> =
                    p.iter().map(|v| rollouts.len() as f64 * v / sum).collect();
                let (mut l, mut dl) = (0.0, Array1::<f64>::zeros(nd + np));
                for r in 0..nd + np {
                    let z = sigmoid(logits[r]);
                    // d/dlogit log(z + eps) = z (1 - z) / (z + eps).
                    let dlog = z * (1.0 - z) / (z + eps);
                    // Keeps the sigmoid out of saturation (MeclConfig::logit_l2).
                    l += cfg.logit_l2 * logits[r] * logits[r] / (nd + np) as f64;
                    dl[r] += 2.0 * cfg.logit_l2 * logits[r] / (nd + np) as f64;
                    if r < nd {
                        l += -log_zeta(logits[r]) / nd as f64 - c * z / nd as f64;
                        dl[r] += -dlog / nd as f64 - c * z * (1.0 - z) / nd as f64;
                    } else {
                        let w = w_rollout[owner[r - nd]] / np as f64;
                        l += w * log_zeta(logits[r]) - c * z / np as f64;
                        dl[r] += w * dlog - c * z * (1.0 - z) / np as f64;
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

/// KL(old, new) and KL(new, old) of the importance weights from the rollouts' log weight products,
/// as the ICRL benchmark estimates them: mean(-log w) and mean((w - mean w) log w) / mean w.
fn kl_divergences(log_w: &[f64]) -> (f64, f64) {
    if log_w.is_empty() {
        return (0.0, 0.0);
    }
    let n = log_w.len() as f64;
    let old_new = log_w.iter().map(|v| -v).sum::<f64>() / n;
    // exp of a large log product overflows to infinity: then the divergence is too large anyway.
    let w: Vec<f64> = log_w.iter().map(|v| v.exp()).collect();
    let mean = w.iter().sum::<f64>() / n;
    let new_old = w
        .iter()
        .zip(log_w)
        .map(|(w, lw)| (w - mean) * lw)
        .sum::<f64>()
        / n
        / mean;
    (
        old_new,
        if new_old.is_nan() {
            f64::INFINITY
        } else {
            new_old
        },
    )
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
        let mut mecl = Mecl::new(
            MeclConfig {
                c_reg: 0.1,
                eps: 1e-5,
                target_kl: 10.0,
                logit_l2: 0.0,
            },
            30,
        );
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
            prior_infeasible: &Points::new(1),
            rollouts: &rollouts,
            warm_start: false,
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

    fn config(target_kl: f64) -> MeclConfig {
        MeclConfig {
            c_reg: 0.1,
            eps: 1e-5,
            target_kl,
            logit_l2: 0.0,
        }
    }

    fn train(cfg: MeclConfig, lr: f64, epochs: usize) -> (Mlp, Mlp, f64) {
        train_on(&[1.0, 1.5], cfg, lr, epochs)
    }

    fn train_on(centres: &[f64], cfg: MeclConfig, lr: f64, epochs: usize) -> (Mlp, Mlp, f64) {
        let (demo, rollouts) = demos_and_rollouts(centres);
        let start = Mlp::new(1, &[16, 16], 0);
        let mut net = start.clone();
        let mut adam = Adam::new(net.params.len(), lr, 1e-5);
        let loss = train_mecl(&mut net, &mut adam, &demo, &rollouts, &cfg, epochs);
        (start, net, loss)
    }

    #[test]
    fn mecl_loss_is_bounded_below_by_log_eps() {
        // A high learning rate and many steps: without eps the policy term ran to -1e6.
        let (_, net, loss) = train(config(f64::INFINITY), 5e-2, 3000);
        let bound = (1e-5f64).ln() - 2.0 * 0.1;
        assert!(loss.is_finite() && loss >= bound - 1e-9, "{loss} < {bound}");
        assert!(net.params.iter().all(|p| p.is_finite()));
    }

    #[test]
    fn mecl_logits_stay_out_of_saturation_when_the_policy_walks_on_the_demonstrations() {
        // The policy's states lie among the demonstrations: the log terms cancel and only the
        // regularizer pushes. Without logit_l2 the logit runs off to where the sigmoid's gradient
        // vanishes (25 here); with the default it settles where zeta can still be lowered.
        let logit = |l2: f64| {
            let cfg = MeclConfig {
                logit_l2: l2,
                ..config(f64::INFINITY)
            };
            let (_, net, _) = train_on(&[-0.1, 0.1], cfg, 5e-2, 3000);
            net.logits(ndarray::arr2(&[[0.0]]).view())[0]
        };
        let default = crate::learn::config::LearnConfig::for_task("point_ellipse_2d", None)
            .expect("built-in settings")
            .mecl
            .logit_l2;
        let (free, held) = (logit(0.0), logit(default));
        assert!(
            free > 20.0,
            "without logit_l2 the logit reached only {free}"
        );
        assert!(
            held > 2.0 && held < 10.0,
            "with logit_l2 the logit is {held}"
        );
    }

    #[test]
    fn mecl_stops_an_iteration_once_the_importance_weights_drift() {
        let moved = |(a, b, _): (Mlp, Mlp, f64)| {
            a.params
                .iter()
                .zip(&b.params)
                .map(|(x, y)| (x - y).abs())
                .sum::<f64>()
        };
        // A tiny KL budget allows the first step only; the default lets small steps run on.
        let one = moved(train(config(1e-12), 1e-4, 200));
        let all = moved(train(config(10.0), 1e-4, 200));
        let first = moved(train(config(f64::INFINITY), 1e-4, 1));
        assert!((one - first).abs() < 1e-12, "{one} vs {first}");
        assert!(all > 5.0 * one, "{all} vs {one}");
    }
}
