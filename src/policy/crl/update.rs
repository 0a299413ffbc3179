//! PPO's update phase: generalized advantage estimation for the reward and the cost, then the clipped
//! surrogate epochs on minibatches (advantages normalized per minibatch) with a target-KL stop, and
//! the two value regressions.
use super::rollout::Batch;
use super::{GaussianPolicy, Ppo, TanhMlp, clip_grad};
use crate::learn::network::Adam;
use ndarray::{Array1, Array2, Axis};
use rand::seq::SliceRandom;

impl Ppo {
    /// GAE(lambda) advantages and value targets of `rewards` under `values`; `last` bootstraps the
    /// states after the batch.
    pub(super) fn gae(
        &self,
        b: &Batch,
        rewards: &Array1<f64>,
        values: &Array1<f64>,
        last: &Array2<f64>,
    ) -> (Array1<f64>, Array1<f64>) {
        let (ns, ne) = (b.n_steps, b.n_envs);
        let mut adv = Array1::<f64>::zeros(b.len());
        let mut run = vec![0.0; ne];
        for t in (0..ns).rev() {
            for e in 0..ne {
                let r = t * ne + e;
                let (next_v, nonterminal) = if b.done[r] {
                    (0.0, 0.0)
                } else if t + 1 == ns {
                    (last[[e, 0]], 1.0)
                } else {
                    (values[r + ne], 1.0)
                };
                let delta = rewards[r] + self.cfg.gamma * next_v * nonterminal - values[r];
                run[e] = delta + self.cfg.gamma * self.cfg.gae_lambda * nonterminal * run[e];
                adv[r] = run[e];
            }
        }
        let target = &adv + values;
        (adv, target)
    }

    /// The PPO epochs over one batch; returns the last approximate KL. The policy and the two value
    /// networks are independent (same states, own parameters and optimizers), so the value networks
    /// train on a second thread, meeting the policy once per epoch for the target-KL stop. Each
    /// network computes exactly what it would alone: a run stays deterministic for its seed.
    pub(super) fn update(
        &mut self,
        obs: &Array2<f64>,
        acts: &Array2<f64>,
        logp_old: &Array1<f64>,
        adv: &Array1<f64>,
        ret_r: &Array1<f64>,
        ret_c: &Array1<f64>,
    ) -> f64 {
        let total = obs.nrows();
        let bs = self.cfg.batch_size.min(total);
        let (clip, max_grad_norm) = (self.cfg.clip, self.cfg.max_grad_norm);
        let max_kl = 1.5 * self.cfg.target_kl;
        // Every epoch's minibatch order, drawn up front so that both threads see the same one.
        let mut order: Vec<usize> = (0..total).collect();
        let orders: Vec<Vec<usize>> = (0..self.cfg.epochs)
            .map(|_| {
                order.shuffle(&mut self.rng);
                order.clone()
            })
            .collect();
        let Ppo {
            policy,
            adam_pi,
            value_r,
            adam_vr,
            value_c,
            adam_vc,
            ..
        } = self;
        let mut kl = 0.0;
        std::thread::scope(|s| {
            // The policy's verdict after each epoch: go on (true) or stop.
            let (go_on, verdict) = std::sync::mpsc::channel::<bool>();
            let orders = &orders;
            s.spawn(move || {
                for order in orders {
                    for chunk in order.chunks(bs) {
                        let x = obs.select(Axis(0), chunk);
                        for (net, adam, target) in [
                            (&mut *value_r, &mut *adam_vr, ret_r),
                            (&mut *value_c, &mut *adam_vc, ret_c),
                        ] {
                            value_step(
                                net,
                                adam,
                                &x,
                                &target.select(Axis(0), chunk),
                                max_grad_norm,
                            );
                        }
                    }
                    // A closed channel (the policy side panicked) also stops.
                    if !verdict.recv().unwrap_or(false) {
                        break;
                    }
                }
            });
            for order in orders {
                let mut kl_sum = 0.0;
                for chunk in order.chunks(bs) {
                    let minibatch = Minibatch {
                        x: &obs.select(Axis(0), chunk),
                        acts: &acts.select(Axis(0), chunk),
                        adv: adv.select(Axis(0), chunk),
                        logp_old: &logp_old.select(Axis(0), chunk),
                    };
                    kl_sum += policy_step(policy, adam_pi, &minibatch, clip, max_grad_norm);
                }
                kl = kl_sum / total as f64;
                let stop = kl > max_kl;
                // The value thread may have finished its last epoch and gone: nothing to tell then.
                let _ = go_on.send(!stop);
                if stop {
                    break;
                }
            }
        });
        kl
    }
}

/// One minibatch of the policy's update.
struct Minibatch<'a> {
    x: &'a Array2<f64>,
    acts: &'a Array2<f64>,
    /// Advantages, normalized here per minibatch.
    adv: Array1<f64>,
    logp_old: &'a Array1<f64>,
}

/// One clipped-surrogate step of the Gaussian policy; returns the summed approximate KL of the
/// minibatch.
fn policy_step(
    policy: &mut GaussianPolicy,
    adam: &mut Adam,
    mb: &Minibatch,
    clip: f64,
    max_grad_norm: f64,
) -> f64 {
    let (b, m) = (mb.x.nrows(), mb.acts.ncols());
    let np = policy.mean.params.len();
    let a = mb.acts;
    let mean = mb.adv.mean().unwrap_or(0.0);
    let std = mb.adv.std(0.0);
    let ad = mb.adv.mapv(|v| (v - mean) / (std + 1e-8));
    let (mu, cache) = policy.mean.forward(mb.x.view());
    let mut dmu = Array2::<f64>::zeros((b, m));
    let mut dlogstd = vec![0.0; m];
    let mut kl_sum = 0.0;
    for r in 0..b {
        let mut lp = -0.5 * m as f64 * (std::f64::consts::TAU).ln();
        for k in 0..m {
            let s = policy.log_std[k].exp();
            let z = (a[[r, k]] - mu[[r, k]]) / s;
            lp += -0.5 * z * z - policy.log_std[k];
        }
        let log_ratio = lp - mb.logp_old[r];
        let ratio = log_ratio.exp();
        kl_sum += (ratio - 1.0) - log_ratio;
        let active = (ad[r] >= 0.0 && ratio < 1.0 + clip) || (ad[r] < 0.0 && ratio > 1.0 - clip);
        if !active {
            continue;
        }
        // d(-ratio A / b)/d logp = -ratio A / b
        let g = -ratio * ad[r] / b as f64;
        for k in 0..m {
            let s2 = (2.0 * policy.log_std[k]).exp();
            let diff = a[[r, k]] - mu[[r, k]];
            dmu[[r, k]] = g * diff / s2;
            dlogstd[k] += g * (diff * diff / s2 - 1.0);
        }
    }
    let mut grad = vec![0.0; np + m];
    policy.mean.backward(&cache, dmu.view(), &mut grad[..np]);
    grad[np..].copy_from_slice(&dlogstd);
    clip_grad(&mut grad, max_grad_norm);
    let mut params: Vec<f64> = policy.mean.params.clone();
    params.extend_from_slice(&policy.log_std);
    adam.step(&mut params, &grad);
    policy.log_std.copy_from_slice(&params[np..]);
    params.truncate(np);
    policy.mean.params = params;
    kl_sum
}

/// One regression step of a value network towards its targets (mean squared error / 2).
fn value_step(
    net: &mut TanhMlp,
    adam: &mut Adam,
    x: &Array2<f64>,
    target: &Array1<f64>,
    max_grad_norm: f64,
) {
    let b = x.nrows();
    let (v, cache) = net.forward(x.view());
    // d(mean (v - t)^2 / 2)/dv
    let dv = Array2::from_shape_fn((b, 1), |(r, _)| (v[[r, 0]] - target[r]) / b as f64);
    let mut grad = vec![0.0; net.params.len()];
    net.backward(&cache, dv.view(), &mut grad);
    clip_grad(&mut grad, max_grad_norm);
    adam.step(&mut net.params, &grad);
}
