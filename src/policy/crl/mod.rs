//! The constrained RL policy of CRL-PUCL: PPO with a Gaussian policy and separate reward-value and
//! cost-value networks ([64, 64] tanh), GAE, clipping, a target-KL early stop, gradient clipping, and
//! the PID-Lagrangian penalty of the paper's eq. (7), trained in the task's simulator on the learned
//! binary cost 1[zeta(psi) < 0.5]. The environments are stepped as one batch (one network call per
//! step for all of them); everything is seeded, so a run is deterministic for its seed.
//!
//! Backpropagation is written by hand: three dense tanh nets of a few thousand parameters, whose
//! gradients are two matrix products per layer on ndarray batches. An autodiff crate would add a
//! graph and allocations per operation to exactly this arithmetic (see docs/DESIGN.md).
//!
//! `rollout` collects a batch from the environments, `update` runs GAE and PPO's clipped epochs.
pub mod expert;
mod rollout;
mod update;

use crate::error::{Error, Result};
use crate::learn::network::dense_layer;
use crate::task::Task;
use crate::task::sim::{Policy, Simulator};
use ndarray::{Array2, ArrayView2, Axis};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rollout::Batch;
use serde::{Deserialize, Serialize};

/// tanh in f32 as a rational function, x P(x^2) / Q(x^2) (degrees 4 and 4 in x^2, fitted to tanh on
/// [0, 9] for the smallest largest error, 3e-7: f32 precision), clamped to [-9, 9] where tanh is 1
/// in f32. Branch-free, so the loop over a layer vectorizes: libm's f64 `tanh` took 56 % of a 3-D
/// CRL-PUCL run (perf), this is about ten times cheaper. NaN stays NaN (`clamp` keeps it).
#[inline]
pub fn tanh(x: f32) -> f32 {
    let x = x.clamp(-9.0, 9.0);
    let x2 = x * x;
    let p = x
        * (0.999_999_9
            + x2 * (0.133_731_6 + x2 * (3.486_538e-3 + x2 * (2.047_108e-5 + x2 * 1.318_313e-8))));
    let q =
        1.0 + x2 * (0.467_064_6 + x2 * (2.584_181_4e-2 + x2 * (3.271_312e-4 + x2 * 7.702_226e-7)));
    (p / q).clamp(-1.0, 1.0)
}

/// A dense network with tanh hidden layers and a linear output. Parameters are stored (and
/// optimized) in f64; the passes compute in f32, as the reference's PyTorch networks do, which
/// halves the cost of the matrix products and the activations that dominate PPO's updates.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TanhMlp {
    pub sizes: Vec<usize>,
    /// Per layer: weights (out x in, row-major) then biases.
    pub params: Vec<f64>,
}

/// What a batched forward pass keeps for the backward pass: each layer's input and the f32 weights.
pub struct Cache {
    inputs: Vec<Array2<f32>>,
    weights: Vec<Array2<f32>>,
}

impl TanhMlp {
    /// PyTorch's default initialisation, the output layer scaled by `out_gain` (small for a policy,
    /// so that it starts near the zero action, as PPO implementations do).
    pub fn new(sizes: &[usize], out_gain: f64, rng: &mut ChaCha8Rng) -> TanhMlp {
        let mut params = Vec::new();
        for l in 0..sizes.len() - 1 {
            let bound = 1.0 / (sizes[l] as f64).sqrt();
            let gain = if l + 2 == sizes.len() { out_gain } else { 1.0 };
            for _ in 0..sizes[l] * sizes[l + 1] + sizes[l + 1] {
                params.push(gain * rng.random_range(-bound..bound));
            }
        }
        TanhMlp {
            sizes: sizes.to_vec(),
            params,
        }
    }

    fn layer(&self, l: usize) -> (ArrayView2<'_, f64>, ndarray::ArrayView1<'_, f64>) {
        dense_layer(&self.sizes, &self.params, l)
    }

    /// Outputs for a batch (rows are inputs), and what the backward pass needs.
    pub fn forward(&self, x: ArrayView2<f64>) -> (Array2<f64>, Cache) {
        let nl = self.sizes.len() - 1;
        let mut cache = Cache {
            inputs: vec![x.mapv(|v| v as f32)],
            weights: Vec::with_capacity(nl),
        };
        for l in 0..nl {
            let (w, b) = self.layer(l);
            let w = w.mapv(|v| v as f32);
            let mut z = cache.inputs[l].dot(&w.t());
            z += &b.mapv(|v| v as f32);
            cache.weights.push(w);
            if l + 1 == nl {
                return (z.mapv(f64::from), cache);
            }
            // Over the plain slice, so that the loop vectorizes.
            match z.as_slice_mut() {
                Some(v) => v.iter_mut().for_each(|a| *a = tanh(*a)),
                None => z.mapv_inplace(tanh),
            }
            cache.inputs.push(z);
        }
        unreachable!("the last layer returns")
    }

    /// The gradient w.r.t. the parameters of sum(dout * output), written into `grad`.
    pub fn backward(&self, cache: &Cache, dout: ArrayView2<f64>, grad: &mut [f64]) {
        let mut delta = dout.mapv(|v| v as f32);
        let mut end = grad.len();
        for l in (0..self.sizes.len() - 1).rev() {
            let (i, o) = (self.sizes[l], self.sizes[l + 1]);
            let at = end - (o * i + o);
            end = at;
            // Logical (row-major) order, whatever the memory layout of the product.
            let gw = delta.t().dot(&cache.inputs[l]);
            let gb = delta.sum_axis(Axis(0));
            for (g, v) in grad[at..at + o * i + o]
                .iter_mut()
                .zip(gw.iter().chain(gb.iter()))
            {
                *g = f64::from(*v);
            }
            if l > 0 {
                let mut d = delta.dot(&cache.weights[l]);
                // tanh' from its output: 1 - a^2.
                d.zip_mut_with(&cache.inputs[l], |g, a| *g *= 1.0 - a * a);
                delta = d;
            }
        }
    }
}

/// The PID-Lagrangian penalty of eq. (7): J = min(mean cost, cost_cap), delta = J - cost_limit;
/// I = max(0, I + Ki delta); P = EMA of delta; nu = max(0, Kp P + I) (or `fixed`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PidConfig {
    pub kp: f64,
    pub ki: f64,
    /// The initial penalty nu_0 (the integral term starts here).
    pub nu0: f64,
    pub cost_limit: f64,
    pub cost_cap: f64,
    /// Weight of the previous value in the EMA of delta.
    pub ema: f64,
    /// A fixed penalty instead of the controller (the reference's half-cheetah).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fixed: Option<f64>,
}

/// The state of the PID-Lagrangian controller.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PidLagrangian {
    pub integral: f64,
    pub proportional: f64,
    pub nu: f64,
}

impl PidLagrangian {
    pub fn new(cfg: &PidConfig) -> Self {
        PidLagrangian {
            integral: cfg.nu0,
            proportional: 0.0,
            nu: cfg.fixed.unwrap_or(cfg.nu0),
        }
    }

    /// One update from the mean cost per step of the last batch; returns the new nu.
    pub fn update(&mut self, cfg: &PidConfig, mean_cost: f64) -> f64 {
        if let Some(nu) = cfg.fixed {
            self.nu = nu;
            return nu;
        }
        let delta = mean_cost.min(cfg.cost_cap) - cfg.cost_limit;
        self.integral = (self.integral + cfg.ki * delta).max(0.0);
        self.proportional = cfg.ema * self.proportional + (1.0 - cfg.ema) * delta;
        self.nu = (cfg.kp * self.proportional + self.integral).max(0.0);
        self.nu
    }
}

/// Every hyper-parameter of the constrained RL policy (defaults: `crl` in config/learn/default.yaml).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PpoConfig {
    /// Environments stepped together, and steps per environment per update.
    pub n_envs: usize,
    pub n_steps: usize,
    pub batch_size: usize,
    pub epochs: usize,
    pub lr: f64,
    pub gamma: f64,
    pub gae_lambda: f64,
    pub clip: f64,
    pub max_grad_norm: f64,
    /// Stop an update's epochs once the approximate KL exceeds 1.5 x this.
    pub target_kl: f64,
    pub hidden: Vec<usize>,
    /// Initial log standard deviation of the Gaussian (state-independent, learned).
    pub init_log_std: f64,
    /// Environment steps per outer iteration of CRL-PUCL.
    pub timesteps_per_iteration: usize,
    /// Rollouts per demonstration start handed to the identification step: the policy's mean action
    /// first, then samples.
    pub rollouts_per_start: usize,
    pub pid: PidConfig,
}

impl PpoConfig {
    pub fn validate(&self) -> std::result::Result<(), String> {
        if self.n_envs == 0 || self.n_steps == 0 || self.batch_size == 0 || self.epochs == 0 {
            return Err("crl: n_envs, n_steps, batch_size and epochs must be at least 1".into());
        }
        if self.timesteps_per_iteration == 0 || self.rollouts_per_start == 0 {
            return Err(
                "crl: timesteps_per_iteration and rollouts_per_start must be at least 1".into(),
            );
        }
        if self.hidden.is_empty() || self.hidden.contains(&0) {
            return Err("crl.hidden needs at least one layer, each of width >= 1".into());
        }
        for (name, v, lo, hi) in [
            ("lr", self.lr, 0.0, f64::INFINITY),
            ("gamma", self.gamma, 0.0, 1.0),
            ("gae_lambda", self.gae_lambda, 0.0, 1.0),
            ("clip", self.clip, 0.0, 1.0),
            ("max_grad_norm", self.max_grad_norm, 0.0, f64::INFINITY),
            ("target_kl", self.target_kl, 0.0, f64::INFINITY),
        ] {
            if !(v.is_finite() && v > lo && v <= hi) {
                return Err(format!("crl.{name} must be in ({lo}, {hi}], got {v}"));
            }
        }
        if !self.init_log_std.is_finite() {
            return Err("crl.init_log_std must be finite".into());
        }
        let p = &self.pid;
        if [p.kp, p.ki, p.nu0, p.cost_limit, p.cost_cap, p.ema]
            .iter()
            .any(|v| !v.is_finite() || *v < 0.0)
            || p.ema >= 1.0
            || p.fixed.is_some_and(|v| !v.is_finite() || v < 0.0)
        {
            return Err("crl.pid: gains, nu0, cost_limit, cost_cap >= 0 and ema in [0, 1)".into());
        }
        Ok(())
    }
}

/// A Gaussian policy over actions (action units): mean from a tanh net of the normalized state,
/// a learned state-independent log standard deviation. Saved with `pucl learn --policy crl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GaussianPolicy {
    pub mean: TanhMlp,
    pub log_std: Vec<f64>,
    /// States are mapped (s - obs_offset) * obs_scale before the network.
    pub obs_offset: Vec<f64>,
    pub obs_scale: Vec<f64>,
}

impl GaussianPolicy {
    fn observe(&self, states: ArrayView2<f64>) -> Array2<f64> {
        let mut o = states.to_owned();
        for (k, mut c) in o.axis_iter_mut(Axis(1)).enumerate() {
            c.mapv_inplace(|v| (v - self.obs_offset[k]) * self.obs_scale[k]);
        }
        o
    }

    /// Check the shapes and values of a loaded policy against a task.
    pub fn validate(&self, task: &Task) -> std::result::Result<(), String> {
        let (n, m) = (task.state_dim(), task.action_dim());
        let s = &self.mean.sizes;
        if s.len() < 2 || s[0] != n || s[s.len() - 1] != m {
            return Err(format!(
                "the policy maps {} -> {} values, task '{}' needs {n} -> {m}",
                s.first().unwrap_or(&0),
                s.last().unwrap_or(&0),
                task.name()
            ));
        }
        let want: usize = (0..s.len() - 1).map(|l| s[l] * s[l + 1] + s[l + 1]).sum();
        if self.mean.params.len() != want
            || self.log_std.len() != m
            || self.obs_offset.len() != n
            || self.obs_scale.len() != n
        {
            return Err("the policy's parameter counts do not match its sizes".into());
        }
        if self
            .mean
            .params
            .iter()
            .chain(&self.log_std)
            .chain(&self.obs_offset)
            .chain(&self.obs_scale)
            .any(|v| !v.is_finite())
        {
            return Err("the policy has NaN or Inf parameters".into());
        }
        // The mean network computes in f32: a weight beyond its range would become Inf there.
        if let Some(v) = self.mean.params.iter().find(|v| v.abs() > f32::MAX as f64) {
            return Err(format!(
                "the policy's network has a weight ({v:e}) beyond the f32 range it computes in"
            ));
        }
        Ok(())
    }
}

/// The policy's mean action (deterministic evaluation).
impl Policy for &GaussianPolicy {
    fn act(&mut self, state: &[f64], action: &mut [f64]) {
        let x = ArrayView2::from_shape((1, state.len()), state).expect("one row");
        let (mu, _) = self.mean.forward(self.observe(x).view());
        for (a, m) in action.iter_mut().zip(mu.row(0)) {
            *a = *m;
        }
    }
}

/// The policy file written by `pucl learn --policy crl --policy-out` and read by `pucl eval --policy`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyFile {
    pub format: String,
    pub version: u32,
    pub task: String,
    pub seed: u64,
    pub policy: GaussianPolicy,
}

pub const POLICY_FORMAT: &str = "pucl.crl_policy";

impl PolicyFile {
    pub fn new(task: &Task, seed: u64, policy: GaussianPolicy) -> Self {
        PolicyFile {
            format: POLICY_FORMAT.into(),
            version: 1,
            task: task.name().into(),
            seed,
            policy,
        }
    }

    /// Written atomically.
    pub fn save(&self, path: &std::path::Path) -> Result<()> {
        let text = serde_json::to_string(self)
            .map_err(|e| Error::Invalid(format!("serializing the policy: {e}")))?;
        crate::error::write_atomic(path, text.as_bytes())
    }

    /// Read and check against the task it will run on.
    pub fn load(path: &std::path::Path, task: &Task) -> Result<PolicyFile> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        Self::parse(&text, path, task)
    }

    /// Parse the text of a policy file (`path` names it in errors) and check it against the task.
    pub fn parse(text: &str, path: &std::path::Path, task: &Task) -> Result<PolicyFile> {
        if text.trim().is_empty() {
            return Err(Error::file(path, None, None, "the file is empty"));
        }
        let f: PolicyFile = serde_json::from_str(text)
            .map_err(|e| Error::file(path, Some(e.line() as u64), None, e.to_string()))?;
        if f.format != POLICY_FORMAT || f.version != 1 {
            return Err(Error::file(
                path,
                None,
                Some("format"),
                format!(
                    "expected '{POLICY_FORMAT}' version 1, found '{}' version {} (not a pucl CRL policy)",
                    f.format, f.version
                ),
            ));
        }
        if f.task != task.name() {
            return Err(Error::file(
                path,
                None,
                Some("task"),
                format!(
                    "the policy was trained on task '{}', not '{}'",
                    f.task,
                    task.name()
                ),
            ));
        }
        f.policy
            .validate(task)
            .map_err(|e| Error::file(path, None, Some("policy"), e))?;
        Ok(f)
    }
}

/// Sampling from the policy with a seeded generator (exploration rollouts).
pub struct Sampling<'a> {
    pub policy: &'a GaussianPolicy,
    pub rng: ChaCha8Rng,
}

impl Policy for Sampling<'_> {
    fn act(&mut self, state: &[f64], action: &mut [f64]) {
        let mut p = self.policy;
        p.act(state, action);
        for (a, ls) in action.iter_mut().zip(&self.policy.log_std) {
            *a += ls.exp() * normal(&mut self.rng);
        }
    }
}

/// A standard normal sample (Box-Muller).
pub(crate) fn normal(rng: &mut ChaCha8Rng) -> f64 {
    let u1: f64 = rng.random_range(f64::EPSILON..1.0);
    let u2: f64 = rng.random_range(0.0..1.0);
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// Global-norm gradient clipping.
fn clip_grad(grad: &mut [f64], max_norm: f64) {
    let n = grad.iter().map(|g| g * g).sum::<f64>().sqrt();
    if n > max_norm {
        grad.iter_mut().for_each(|g| *g *= max_norm / n);
    }
}

/// What one PPO training phase did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PpoStats {
    pub updates: usize,
    pub timesteps: usize,
    /// Mean return of the episodes finished in the phase, and their mean cost per step.
    pub mean_return: f64,
    pub mean_cost: f64,
    pub episodes: usize,
    /// The Lagrange multiplier after the phase.
    pub nu: f64,
    /// Approximate KL of the last update.
    pub approx_kl: f64,
}

/// PPO with a PID-Lagrangian cost penalty, persistent across the outer iterations of CRL-PUCL.
pub struct Ppo {
    pub cfg: PpoConfig,
    pub policy: GaussianPolicy,
    value_r: TanhMlp,
    value_c: TanhMlp,
    adam_pi: crate::learn::network::Adam,
    adam_vr: crate::learn::network::Adam,
    adam_vc: crate::learn::network::Adam,
    pub lagrangian: PidLagrangian,
    rng: ChaCha8Rng,
    /// Current state, step count, return and cost of each environment.
    envs: Vec<(Vec<f64>, usize, f64, f64)>,
}

impl Ppo {
    /// A fresh learner; `obs_offset`, `obs_scale` normalize states (e.g. from the demonstrations).
    pub fn new(
        task: &Task,
        cfg: PpoConfig,
        obs_offset: Vec<f64>,
        obs_scale: Vec<f64>,
        seed: u64,
    ) -> Result<Ppo> {
        cfg.validate().map_err(Error::Invalid)?;
        let (n, m) = (task.state_dim(), task.action_dim());
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5eed_c0de);
        let sizes = |out: usize| [&[n][..], &cfg.hidden, &[out]].concat();
        let mean = TanhMlp::new(&sizes(m), 0.01, &mut rng);
        let value_r = TanhMlp::new(&sizes(1), 1.0, &mut rng);
        let value_c = TanhMlp::new(&sizes(1), 1.0, &mut rng);
        let adam = |p: usize| crate::learn::network::Adam::new(p, cfg.lr, 1e-5);
        let np = mean.params.len() + m;
        Ok(Ppo {
            adam_pi: adam(np),
            adam_vr: adam(value_r.params.len()),
            adam_vc: adam(value_c.params.len()),
            lagrangian: PidLagrangian::new(&cfg.pid),
            policy: GaussianPolicy {
                mean,
                log_std: vec![cfg.init_log_std; m],
                obs_offset,
                obs_scale,
            },
            value_r,
            value_c,
            cfg,
            rng,
            envs: Vec::new(),
        })
    }

    fn reset_state(&mut self, task: &Task, starts: &[Vec<f64>]) -> Vec<f64> {
        if let Some(b) = &task.spec.training_starts {
            let p: Vec<f64> = b
                .lower
                .iter()
                .zip(&b.upper)
                .map(|(l, h)| self.rng.random_range(*l..=*h))
                .collect();
            return task.start_state(&p);
        }
        let base = &starts[self.rng.random_range(0..starts.len())];
        let j = task.spec.start_jitter;
        let mut s = base.clone();
        if j > 0.0 {
            for &k in &task.position_idx {
                s[k] += self.rng.random_range(-j..=j);
            }
            if let Some((lo, hi)) = &task.bounds {
                for (p, &k) in task.position_idx.iter().enumerate() {
                    s[k] = s[k].clamp(lo[p], hi[p]);
                }
            }
        }
        s
    }

    /// Train for `timesteps` environment steps from `starts` (full states) on the per-step cost
    /// `cost(psi)` in [0, 1]; `progress` sees the steps done so far and returns whether to go on.
    /// Each update collects a batch (`rollout`), then runs GAE and the clipped PPO epochs (`update`).
    pub fn train(
        &mut self,
        task: &Task,
        starts: &[Vec<f64>],
        cost: &mut dyn FnMut(&[f64]) -> f64,
        timesteps: usize,
        progress: &mut dyn FnMut(usize) -> bool,
    ) -> Result<PpoStats> {
        if starts.is_empty() {
            return Err(Error::Invalid("PPO needs at least one start".into()));
        }
        let ne = self.cfg.n_envs;
        while self.envs.len() < ne {
            let s = self.reset_state(task, starts);
            self.envs.push((s, 0, 0.0, 0.0));
        }
        let mut sim = Simulator::new(task);
        let mut batch = Batch::new(task, self.cfg.n_steps, ne);
        let mut stats = PpoStats {
            updates: 0,
            timesteps: 0,
            mean_return: f64::NAN,
            mean_cost: f64::NAN,
            episodes: 0,
            nu: self.lagrangian.nu,
            approx_kl: 0.0,
        };
        while stats.timesteps < timesteps {
            self.collect(task, starts, cost, &mut sim, &mut batch);
            stats.timesteps += batch.len();
            let (adv_r, ret_r) = self.gae(&batch, &batch.rew, &batch.vr, &batch.last_r);
            let (adv_c, ret_c) = self.gae(&batch, &batch.cst, &batch.vc, &batch.last_c);
            // The Lagrangian sees the mean cost per step of this batch.
            let nu = self.lagrangian.update(
                &self.cfg.pid,
                batch.cst.iter().sum::<f64>() / batch.len() as f64,
            );
            // (L_reward + nu L_cost) / (1 + nu) with one advantage: (A_r - nu A_c) / (1 + nu).
            let adv = (&adv_r - &(nu * &adv_c)) / (1.0 + nu);
            stats.approx_kl =
                self.update(&batch.obs, &batch.acts, &batch.logp, &adv, &ret_r, &ret_c);
            stats.updates += 1;
            stats.nu = nu;
            if !progress(stats.timesteps) {
                return Err(Error::Invalid("cancelled during policy training".into()));
            }
        }
        stats.episodes = batch.episodes;
        stats.mean_return = if batch.episodes > 0 {
            batch.return_sum / batch.episodes as f64
        } else {
            f64::NAN
        };
        stats.mean_cost = batch.cost_sum / batch.cost_steps.max(1) as f64;
        Ok(stats)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rational_tanh_is_within_f32_precision_of_libm_and_saturates() {
        for i in -4000..=4000 {
            let x = i as f32 * 0.01;
            assert!((tanh(x) - x.tanh()).abs() < 5e-7, "x = {x}");
        }
        assert_eq!(tanh(400.0), 1.0);
        assert_eq!(tanh(-400.0), -1.0);
        assert_eq!(tanh(f32::INFINITY), 1.0);
        assert_eq!(tanh(f32::NEG_INFINITY), -1.0);
        assert!(tanh(f32::NAN).is_nan());
    }

    #[test]
    fn a_policy_with_non_finite_or_f32_overflowing_weights_is_refused() {
        let task = Task::load("reach_obstacle_3d").unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        let (n, m) = (task.state_dim(), task.action_dim());
        let good = GaussianPolicy {
            mean: TanhMlp::new(&[n, 4, m], 0.01, &mut rng),
            log_std: vec![0.0; m],
            obs_offset: vec![0.0; n],
            obs_scale: vec![1.0; n],
        };
        assert_eq!(good.validate(&task), Ok(()));
        let mut big = good.clone();
        big.mean.params[3] = 1e300;
        assert!(big.validate(&task).unwrap_err().contains("f32 range"));
        let mut nan = good.clone();
        nan.log_std[0] = f64::NAN;
        assert!(nan.validate(&task).unwrap_err().contains("NaN"));
    }

    #[test]
    fn backward_matches_finite_differences() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let net = TanhMlp::new(&[3, 5, 4, 2], 1.0, &mut rng);
        let x = Array2::from_shape_fn((4, 3), |(r, c)| (r as f64 - 1.5) * 0.3 + c as f64 * 0.2);
        let w = Array2::from_shape_fn((4, 2), |(r, c)| 0.5 - 0.1 * r as f64 + 0.3 * c as f64);
        let f = |n: &TanhMlp| (n.forward(x.view()).0 * &w).sum();
        let (_, cache) = net.forward(x.view());
        let mut g = vec![0.0; net.params.len()];
        net.backward(&cache, w.view(), &mut g);
        for i in (0..net.params.len()).step_by(3) {
            let (mut a, mut b) = (net.clone(), net.clone());
            // f32 passes: a step large enough for f32 rounding, a tolerance to match.
            a.params[i] += 1e-3;
            b.params[i] -= 1e-3;
            let fd = (f(&a) - f(&b)) / 2e-3;
            assert!(
                (fd - g[i]).abs() < 2e-3 * (1.0 + fd.abs()),
                "param {i}: {fd} vs {}",
                g[i]
            );
        }
    }

    /// The built-in 3-D settings (config/learn/default.yaml).
    fn defaults() -> PpoConfig {
        crate::learn::LearnConfig::for_task("reach_obstacle_3d", None)
            .unwrap()
            .crl
    }

    #[test]
    fn pid_lagrangian_follows_eq_7() {
        let cfg = PidConfig {
            kp: 20.0,
            ki: 0.5,
            nu0: 0.0,
            ..defaults().pid
        };
        let mut pid = PidLagrangian::new(&cfg);
        // Cost above the limit (capped at 0.2): delta = 0.19.
        let nu = pid.update(&cfg, 0.5);
        assert!((pid.integral - 0.095).abs() < 1e-12);
        assert!((pid.proportional - 0.095).abs() < 1e-12);
        assert!((nu - (20.0 * 0.095 + 0.095)).abs() < 1e-12);
        // Below the limit the integral decreases but never below zero, nor nu.
        for _ in 0..100 {
            pid.update(&cfg, 0.0);
        }
        assert_eq!((pid.integral, pid.nu), (0.0, 0.0));
        let fixed = PidConfig {
            fixed: Some(0.9),
            ..cfg
        };
        assert_eq!(PidLagrangian::new(&fixed).update(&fixed, 1.0), 0.9);
    }

    /// The 2-D task, its PPO episodes starting at the demonstration starts (not the wide box).
    fn point_task() -> Task {
        let mut t = Task::load("point_ellipse_2d").unwrap();
        t.spec.training_starts = None;
        t
    }

    fn small() -> PpoConfig {
        PpoConfig {
            n_envs: 8,
            n_steps: 64,
            epochs: 10,
            target_kl: 0.05,
            pid: PidConfig {
                kp: 1.0,
                ki: 0.1,
                nu0: 0.0,
                ..defaults().pid
            },
            ..defaults()
        }
    }

    #[test]
    fn ppo_learns_to_reach_the_goal_and_is_deterministic_for_a_seed() {
        let t = point_task();
        let starts = t.start_states();
        let run = || {
            let mut ppo = Ppo::new(&t, small(), vec![0.7, 0.7], vec![2.0, 2.0], 1).unwrap();
            let mut returns = Vec::new();
            for _ in 0..15 {
                let s = ppo
                    .train(&t, &starts, &mut |_| 0.0, 8 * 64 * 4, &mut |_| true)
                    .unwrap();
                returns.push(s.mean_return);
            }
            (returns, ppo.policy)
        };
        let (returns, policy) = run();
        assert!(
            returns.last().unwrap() > &(returns[0] + 1.0),
            "returns did not improve: {returns:?}"
        );
        let mut sim = Simulator::new(&t);
        let mut traj = crate::task::sim::Trajectory::with_capacity(&t);
        let reached = starts
            .iter()
            .filter(|s| {
                sim.rollout(s, &mut &policy, &mut traj);
                traj.reached_goal
            })
            .count();
        assert!(
            reached >= 3,
            "the mean policy reached the goal from {reached} of 4 starts"
        );
        assert_eq!(run().1, policy, "same seed, different policy");
    }

    #[test]
    fn the_cost_penalty_keeps_the_policy_out_of_a_costly_region() {
        // Cost 1 on the straight line's half-plane side: with the PID penalty the policy's cost falls.
        let t = point_task();
        let starts = t.start_states();
        let mut cfg = small();
        cfg.pid = PidConfig {
            kp: 1.0,
            ki: 0.5,
            nu0: 1.0,
            ..defaults().pid
        };
        let mut ppo = Ppo::new(&t, cfg, vec![0.7, 0.7], vec![2.0, 2.0], 2).unwrap();
        let mut costly = |psi: &[f64]| f64::from(u8::from(psi[0] > psi[1] + 0.1));
        let first = ppo
            .train(&t, &starts, &mut costly, 8 * 64 * 2, &mut |_| true)
            .unwrap();
        let mut last = first.clone();
        for _ in 0..8 {
            last = ppo
                .train(&t, &starts, &mut costly, 8 * 64 * 2, &mut |_| true)
                .unwrap();
        }
        assert!(
            last.mean_cost < 0.5 * first.mean_cost.max(1e-3),
            "cost per step {} -> {} (nu {})",
            first.mean_cost,
            last.mean_cost,
            last.nu
        );
    }
}
