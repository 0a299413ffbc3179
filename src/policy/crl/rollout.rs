//! PPO's rollout phase: step every environment `n_steps` times with sampled actions, record
//! observations, actions, log-probabilities, rewards, learned costs and both values, and bootstrap the
//! values where an episode is cut by the time limit or the batch ends.
use super::{Ppo, normal};
use crate::task::Task;
use crate::task::sim::Simulator;
use ndarray::{Array1, Array2, ArrayView2};

/// One batch of experience, row = t * n_envs + e; reused across updates. Also tallies the finished
/// episodes of a training phase.
pub(super) struct Batch {
    pub n_steps: usize,
    pub n_envs: usize,
    pub obs: Array2<f64>,
    pub acts: Array2<f64>,
    pub logp: Array1<f64>,
    pub rew: Array1<f64>,
    pub cst: Array1<f64>,
    pub done: Vec<bool>,
    pub vr: Array1<f64>,
    pub vc: Array1<f64>,
    /// Reward and cost values of the states after the last step, per environment.
    pub last_r: Array2<f64>,
    pub last_c: Array2<f64>,
    /// Finished episodes, the sum of their returns, and the cost of every step taken.
    pub episodes: usize,
    pub return_sum: f64,
    pub cost_sum: f64,
    pub cost_steps: usize,
    // Step buffers, reused so a step allocates nothing.
    states: Array2<f64>,
    next: Vec<f64>,
    applied: Vec<f64>,
    psi: Vec<f64>,
    raw: Vec<f64>,
    state: Vec<f64>,
}

impl Batch {
    pub fn new(task: &Task, n_steps: usize, n_envs: usize) -> Self {
        let (n, m, d) = (task.state_dim(), task.action_dim(), task.feature_dim());
        let total = n_steps * n_envs;
        Batch {
            n_steps,
            n_envs,
            obs: Array2::zeros((total, n)),
            acts: Array2::zeros((total, m)),
            logp: Array1::zeros(total),
            rew: Array1::zeros(total),
            cst: Array1::zeros(total),
            done: vec![false; total],
            vr: Array1::zeros(total),
            vc: Array1::zeros(total),
            last_r: Array2::zeros((n_envs, 1)),
            last_c: Array2::zeros((n_envs, 1)),
            episodes: 0,
            return_sum: 0.0,
            cost_sum: 0.0,
            cost_steps: 0,
            states: Array2::zeros((n_envs, n)),
            next: vec![0.0; n],
            applied: vec![0.0; m],
            psi: vec![0.0; d],
            raw: vec![0.0; m],
            state: vec![0.0; n],
        }
    }

    pub fn len(&self) -> usize {
        self.n_steps * self.n_envs
    }
}

impl Ppo {
    /// Collect `n_steps` from every environment into `b`, with one network call per step for all of
    /// them.
    pub(super) fn collect(
        &mut self,
        task: &Task,
        starts: &[Vec<f64>],
        cost: &mut dyn FnMut(&[f64]) -> f64,
        sim: &mut Simulator,
        b: &mut Batch,
    ) {
        let (n, m, ne) = (task.state_dim(), task.action_dim(), b.n_envs);
        for t in 0..b.n_steps {
            for (e, env) in self.envs.iter().enumerate() {
                b.states
                    .row_mut(e)
                    .assign(&ndarray::ArrayView1::from(&env.0));
            }
            let o = self.policy.observe(b.states.view());
            let (mu, _) = self.policy.mean.forward(o.view());
            let (v_r, _) = self.value_r.forward(o.view());
            let (v_c, _) = self.value_c.forward(o.view());
            for e in 0..ne {
                let r = t * ne + e;
                b.obs.row_mut(r).assign(&o.row(e));
                b.vr[r] = v_r[[e, 0]];
                b.vc[r] = v_c[[e, 0]];
                let mut lp = 0.0;
                for k in 0..m {
                    let std = self.policy.log_std[k].exp();
                    let z = normal(&mut self.rng);
                    b.acts[[r, k]] = mu[[e, k]] + std * z;
                    lp += -0.5 * z * z - self.policy.log_std[k];
                }
                b.logp[r] = lp - 0.5 * m as f64 * (std::f64::consts::TAU).ln();
                b.raw
                    .iter_mut()
                    .zip(b.acts.row(r))
                    .for_each(|(a, v)| *a = *v);
                b.state.copy_from_slice(&self.envs[e].0);
                let out = sim.step(&b.state, &b.raw, &mut b.next, &mut b.applied);
                task.features_into(&b.state, &b.applied, &mut b.psi);
                let c = cost(&b.psi);
                b.rew[r] = out.reward;
                b.cst[r] = c;
                let env = &mut self.envs[e];
                env.0.copy_from_slice(&b.next);
                env.1 += 1;
                env.2 += out.reward;
                env.3 += c;
                b.cost_sum += c;
                b.cost_steps += 1;
                let truncated = env.1 >= task.spec.horizon;
                if out.reached_goal || truncated {
                    if truncated && !out.reached_goal {
                        // A time limit is not a terminal state: bootstrap from its values.
                        let x = ArrayView2::from_shape((1, n), &b.next).expect("one row");
                        let xo = self.policy.observe(x);
                        b.rew[r] += self.cfg.gamma * self.value_r.forward(xo.view()).0[[0, 0]];
                        b.cst[r] += self.cfg.gamma * self.value_c.forward(xo.view()).0[[0, 0]];
                    }
                    b.done[r] = true;
                    b.return_sum += env.2;
                    b.episodes += 1;
                    let s = self.reset_state(task, starts);
                    self.envs[e] = (s, 0, 0.0, 0.0);
                } else {
                    b.done[r] = false;
                }
            }
        }
        // Bootstrap values of the states after the last step.
        for (e, env) in self.envs.iter().enumerate() {
            b.states
                .row_mut(e)
                .assign(&ndarray::ArrayView1::from(&env.0));
        }
        let o = self.policy.observe(b.states.view());
        b.last_r = self.value_r.forward(o.view()).0;
        b.last_c = self.value_c.forward(o.view()).0;
    }
}
