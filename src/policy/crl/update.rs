//! PPO's update phase: generalized advantage estimation for the reward and the cost, then the clipped
//! surrogate epochs on minibatches (advantages normalized per minibatch) with a target-KL stop, and
//! the two value regressions.
use super::rollout::Batch;
use super::{Ppo, clip_grad};
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

    /// The PPO epochs over one batch; returns the last approximate KL.
    pub(super) fn update(
        &mut self,
        obs: &Array2<f64>,
        acts: &Array2<f64>,
        logp_old: &Array1<f64>,
        adv: &Array1<f64>,
        ret_r: &Array1<f64>,
        ret_c: &Array1<f64>,
    ) -> f64 {
        let (total, m) = (obs.nrows(), acts.ncols());
        let bs = self.cfg.batch_size.min(total);
        let mut order: Vec<usize> = (0..total).collect();
        let np = self.policy.mean.params.len();
        let mut g_pi = vec![0.0; np + m];
        let mut g_v = vec![0.0; self.value_r.params.len()];
        let mut kl = 0.0;
        for _ in 0..self.cfg.epochs {
            order.shuffle(&mut self.rng);
            let (mut kl_sum, mut kl_n) = (0.0, 0usize);
            for chunk in order.chunks(bs) {
                let b = chunk.len();
                let x = obs.select(Axis(0), chunk);
                let a = acts.select(Axis(0), chunk);
                let mut ad = adv.select(Axis(0), chunk);
                // Advantages normalized per minibatch.
                let mean = ad.mean().unwrap_or(0.0);
                let std = ad.std(0.0);
                ad.mapv_inplace(|v| (v - mean) / (std + 1e-8));
                let (mu, cache) = self.policy.mean.forward(x.view());
                let mut dmu = Array2::<f64>::zeros((b, m));
                let mut dlogstd = vec![0.0; m];
                for r in 0..b {
                    let mut lp = -0.5 * m as f64 * (std::f64::consts::TAU).ln();
                    for k in 0..m {
                        let s = self.policy.log_std[k].exp();
                        let z = (a[[r, k]] - mu[[r, k]]) / s;
                        lp += -0.5 * z * z - self.policy.log_std[k];
                    }
                    let log_ratio = lp - logp_old[chunk[r]];
                    let ratio = log_ratio.exp();
                    kl_sum += (ratio - 1.0) - log_ratio;
                    kl_n += 1;
                    let c = self.cfg.clip;
                    let active =
                        (ad[r] >= 0.0 && ratio < 1.0 + c) || (ad[r] < 0.0 && ratio > 1.0 - c);
                    if !active {
                        continue;
                    }
                    // d(-ratio A / b)/d logp = -ratio A / b
                    let g = -ratio * ad[r] / b as f64;
                    for k in 0..m {
                        let s2 = (2.0 * self.policy.log_std[k]).exp();
                        let diff = a[[r, k]] - mu[[r, k]];
                        dmu[[r, k]] = g * diff / s2;
                        dlogstd[k] += g * (diff * diff / s2 - 1.0);
                    }
                }
                self.policy
                    .mean
                    .backward(&cache, dmu.view(), &mut g_pi[..np]);
                g_pi[np..].copy_from_slice(&dlogstd);
                clip_grad(&mut g_pi, self.cfg.max_grad_norm);
                let mut params: Vec<f64> = self.policy.mean.params.clone();
                params.extend_from_slice(&self.policy.log_std);
                self.adam_pi.step(&mut params, &g_pi);
                self.policy.log_std.copy_from_slice(&params[np..]);
                params.truncate(np);
                self.policy.mean.params = params;
                for (net, adam, target) in [
                    (&mut self.value_r, &mut self.adam_vr, ret_r),
                    (&mut self.value_c, &mut self.adam_vc, ret_c),
                ] {
                    let (v, cache) = net.forward(x.view());
                    let t = target.select(Axis(0), chunk);
                    // d(mean (v - t)^2 / 2)/dv
                    let dv = Array2::from_shape_fn((b, 1), |(r, _)| (v[[r, 0]] - t[r]) / b as f64);
                    net.backward(&cache, dv.view(), &mut g_v);
                    clip_grad(&mut g_v, self.cfg.max_grad_norm);
                    adam.step(&mut net.params, &g_v);
                }
            }
            kl = kl_sum / kl_n.max(1) as f64;
            if kl > 1.5 * self.cfg.target_kl {
                break;
            }
        }
        kl
    }
}
