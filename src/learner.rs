//! DSM-PUCL, Algorithm 1 of the paper: roll out the current policy from every demonstration start, keep
//! the rollouts whose return beats the demonstration's (policy filter), identify reliable infeasible
//! states R, train zeta on D (feasible) and R plus the memory buffer M (infeasible), save R into M;
//! repeat.
use crate::crl::{GaussianPolicy, Ppo, PpoConfig, Sampling};
use crate::demos::DemoSet;
use crate::error::{Error, Result};
use crate::gmm::Gmm;
use crate::metrics::{Confusion, UnsafeRate, grid_confusion};
use crate::modulation::{DsmConfig, DsmPolicy, PolicySpace};
use crate::network::{Adam, Mlp, Scratch, sigmoid, softplus, train};
use crate::pu::{IdentifyConfig, Points, identify};
use crate::sim::{Simulator, Trajectory, replay_return};
use crate::task::Task;
use ndarray::{Array1, Array2};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::Instant;

/// The policy that proposes trajectories in Algorithm 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum PolicyKind {
    /// Dynamical-system modulation by the learned constraint (DSM-PUCL).
    Dsm,
    /// PPO with a PID-Lagrangian penalty on the learned cost (CRL-PUCL).
    Crl,
}

/// How the constraint is learned from the policy's trajectories.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Method {
    /// Positive-unlabeled: reliable infeasible states far from every demonstration (the paper).
    Pucl,
    /// Maximum-entropy constraint learning with importance weights (baseline).
    Mecl,
    /// Binary classification: every policy state is infeasible (baseline).
    Bc,
    /// A Gaussian mixture of the demonstrations: low-density policy states are infeasible (baseline).
    Gpucl,
}

/// MECL's loss: -mean log zeta(D) + sum_s w_IS(s) log zeta(s) - c_reg (mean zeta(D) + mean zeta(policy)).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MeclConfig {
    pub c_reg: f64,
}

/// GPUCL: the component count is chosen by BIC within `components`; reliable infeasible states have
/// a log-density below `log_density_threshold`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuclConfig {
    pub components: [usize; 2],
    pub log_density_threshold: f64,
}

/// Every hyper-parameter of PUCL and its baselines. Built-in defaults per task live in `config/learn/`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LearnConfig {
    pub policy: PolicyKind,
    pub method: Method,
    /// Outer iterations of Algorithm 1.
    pub iterations: usize,
    /// Stop early when an iteration identifies no new reliable infeasible state.
    pub stop_when_no_new_infeasible: bool,
    /// Hidden layer widths of zeta.
    pub hidden: Vec<usize>,
    /// Adam learning rate and epsilon.
    pub lr: f64,
    pub adam_eps: f64,
    /// Epochs per outer iteration and minibatch size.
    pub epochs: usize,
    pub batch_size: usize,
    /// Map inputs by the demonstrations' mean and one common scale (raw inputs in the reference).
    pub normalize_input: bool,
    /// Weigh both classes equally in the loss (the reference's plain BCE lets the ~20x larger
    /// demonstration set push the boundary into the infeasible data).
    pub balance_classes: bool,
    /// Reliable infeasible identification.
    pub identify: IdentifyConfig,
    pub policy_filter: PolicyFilter,
    pub dsm: DsmConfig,
    /// Replaces the task's reward while learning (policy training and the policy filter); none: the
    /// task's own.
    pub reward: Option<crate::task::RewardSpec>,
    /// The constrained RL policy (`policy: crl`).
    pub crl: PpoConfig,
    pub mecl: MeclConfig,
    pub gpucl: GpuclConfig,
}

/// Keep a rollout iff (1 - delta) r(tau) >= r(tau_D) of the demonstration from the same start, and
/// the fraction of its states the current zeta calls infeasible is at most `max_mean_cost`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyFilter {
    pub delta: f64,
    pub max_mean_cost: f64,
}

/// The built-in learn configurations: the default and per-task files.
pub const BUILTIN_CONFIGS: &[(&str, &str)] = &[
    ("default", include_str!("../config/learn/default.yaml")),
    (
        "point_ellipse_2d",
        include_str!("../config/learn/point_ellipse_2d.yaml"),
    ),
    (
        "reach_obstacle_3d",
        include_str!("../config/learn/reach_obstacle_3d.yaml"),
    ),
    (
        "reach_velocity_3d",
        include_str!("../config/learn/reach_velocity_3d.yaml"),
    ),
    (
        "reach_four_cups_3d",
        include_str!("../config/learn/reach_four_cups_3d.yaml"),
    ),
    // With `policy: crl`, these follow the task's file: the shared CRL-PUCL settings, then the task's.
    ("crl", include_str!("../config/learn/crl.yaml")),
    (
        "point_ellipse_2d.crl",
        include_str!("../config/learn/point_ellipse_2d.crl.yaml"),
    ),
    (
        "reach_obstacle_3d.crl",
        include_str!("../config/learn/reach_obstacle_3d.crl.yaml"),
    ),
];

fn merge(base: &mut serde_yaml_ng::Value, over: serde_yaml_ng::Value) {
    use serde_yaml_ng::Value;
    match (base, over) {
        (Value::Mapping(b), Value::Mapping(o)) => {
            for (k, v) in o {
                match b.get_mut(&k) {
                    Some(slot) => merge(slot, v),
                    None => {
                        b.insert(k, v);
                    }
                }
            }
        }
        (slot, v) => *slot = v,
    }
}

impl LearnConfig {
    /// The settings for a task: `config/learn/default.yaml`, overridden by the task's own file if there
    /// is one, overridden by the user's file (any subset of the keys) if given.
    pub fn for_task(task: &str, user: Option<&Path>) -> Result<LearnConfig> {
        Self::for_task_policy(task, None, user)
    }

    /// As [`LearnConfig::for_task`]; with the CRL policy (`policy`, else the user's file's `policy`),
    /// `config/learn/crl.yaml` and `config/learn/<task>.crl.yaml` come between the task's file and
    /// the user's.
    pub fn for_task_policy(
        task: &str,
        policy: Option<PolicyKind>,
        user: Option<&Path>,
    ) -> Result<LearnConfig> {
        let parse = |text: &str, path: &Path| -> Result<serde_yaml_ng::Value> {
            serde_yaml_ng::from_str(text).map_err(|e| {
                Error::file(
                    path,
                    e.location().map(|l| l.line() as u64),
                    None,
                    e.to_string(),
                )
            })
        };
        let user_value = match user {
            Some(p) => {
                let text = std::fs::read_to_string(p).map_err(|e| Error::io(p, e))?;
                (!text.trim().is_empty())
                    .then(|| parse(&text, p))
                    .transpose()?
            }
            None => None,
        };
        let user_policy = user_value
            .as_ref()
            .and_then(|v| v.get("policy"))
            .and_then(|v| v.as_str());
        let crl = policy.map_or(user_policy == Some("crl"), |p| p == PolicyKind::Crl);
        let mut value = parse(BUILTIN_CONFIGS[0].1, Path::new("config/learn/default.yaml"))?;
        let mut layers = vec![task.to_string()];
        if crl {
            layers.extend(["crl".to_string(), format!("{task}.crl")]);
        }
        for layer in layers {
            if let Some((name, text)) = BUILTIN_CONFIGS[1..].iter().find(|(n, _)| *n == layer) {
                merge(
                    &mut value,
                    parse(text, Path::new(&format!("config/learn/{name}.yaml")))?,
                );
            }
        }
        let source = match (user, user_value) {
            (Some(p), Some(v)) => {
                merge(&mut value, v);
                p.to_path_buf()
            }
            (Some(p), None) => p.to_path_buf(),
            _ => Path::new("config/learn").join(format!("{task}.yaml")),
        };
        let mut cfg: LearnConfig = serde_yaml_ng::from_value(value)
            .map_err(|e| Error::file(&source, None, None, e.to_string()))?;
        if let Some(p) = policy {
            cfg.policy = p;
        }
        cfg.validate()
            .map_err(|e| Error::file(&source, None, None, e))?;
        Ok(cfg)
    }

    pub fn validate(&self) -> std::result::Result<(), String> {
        if self.iterations == 0 {
            return Err("iterations must be at least 1".into());
        }
        if self.hidden.is_empty() || self.hidden.contains(&0) {
            return Err("hidden needs at least one layer, each of width >= 1".into());
        }
        if !(self.lr.is_finite()
            && self.lr > 0.0
            && self.adam_eps.is_finite()
            && self.adam_eps > 0.0)
        {
            return Err("lr and adam_eps must be finite numbers > 0".into());
        }
        if self.epochs == 0 || self.batch_size == 0 {
            return Err("epochs and batch_size must be at least 1".into());
        }
        self.identify.validate()?;
        let f = &self.policy_filter;
        if !(f.delta.is_finite() && (0.0..1.0).contains(&f.delta)) {
            return Err(format!(
                "policy_filter.delta must be in [0, 1), got {}",
                f.delta
            ));
        }
        if !(f.max_mean_cost.is_finite() && (0.0..=1.0).contains(&f.max_mean_cost)) {
            return Err("policy_filter.max_mean_cost must be in [0, 1]".into());
        }
        if !(self.mecl.c_reg.is_finite() && self.mecl.c_reg >= 0.0) {
            return Err("mecl.c_reg must be a finite number >= 0".into());
        }
        let [lo, hi] = self.gpucl.components;
        if lo == 0 || hi < lo {
            return Err(format!(
                "gpucl.components must be [min, max] with 1 <= min <= max, got [{lo}, {hi}]"
            ));
        }
        if !self.gpucl.log_density_threshold.is_finite() {
            return Err("gpucl.log_density_threshold must be a finite number".into());
        }
        self.crl.validate()?;
        self.dsm.validate(None)
    }
}

/// What one outer iteration did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IterationStats {
    pub iteration: usize,
    pub rollouts: usize,
    /// Rollouts that passed the policy filter.
    pub kept: usize,
    /// |R| of this iteration and |M| after it.
    pub reliable_infeasible: usize,
    pub memory_buffer: usize,
    /// NaN when nothing was trained (JSON writes it as null).
    #[serde(deserialize_with = "nan_from_null")]
    pub loss: f64,
    pub seconds: f64,
    /// Against the true constraint on the evaluation grid (known in simulation).
    pub iou: f64,
    pub recall: f64,
    pub precision: f64,
    /// CRL: the policy's mean episode return and learned cost per step while training, and nu.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_return: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_cost: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nu: Option<f64>,
}

/// A number that JSON wrote as null because it was NaN.
pub(crate) fn nan_from_null<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> std::result::Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// The result of learning.
#[derive(Debug, Clone)]
pub struct Learned {
    pub net: Mlp,
    /// The policy settings to use the model with (the configured ones, completed by learning).
    pub dsm: DsmConfig,
    pub memory_buffer: Points,
    pub history: Vec<IterationStats>,
    pub starts: Vec<Vec<f64>>,
    pub seconds: f64,
    /// Why the loop stopped.
    pub stop_reason: String,
    /// CRL: the trained policy.
    pub policy: Option<GaussianPolicy>,
}

/// The learned network as a classifier on the grid.
pub fn grid_metrics(task: &Task, net: &Mlp, threshold: f64) -> Confusion {
    // Batched evaluation of the whole grid, then comparison with the truth.
    let d = task.feature_dim();
    let mut pts = Vec::new();
    crate::metrics::for_each_grid_point(task, |x| pts.extend_from_slice(x));
    let x = Array2::from_shape_vec((pts.len() / d, d), pts).expect("rows of d");
    let z = net.zeta_batch(x.view());
    let mut i = 0;
    grid_confusion(task, |_| {
        i += 1;
        z[i - 1] < threshold
    })
}

fn feature_points(task: &Task, t: &Trajectory) -> Points {
    let d = task.feature_dim();
    let mut p = Points {
        dim: d,
        data: vec![0.0; t.len() * d],
    };
    for i in 0..t.len() {
        task.features_into(t.state(i), t.action(i), &mut p.data[i * d..(i + 1) * d]);
    }
    p
}

/// Run DSM-PUCL. `on_iteration` sees each iteration's statistics as it finishes and returns whether
/// to go on (false cancels: an error, nothing is returned).
pub fn learn(
    task: &Task,
    demos: &DemoSet,
    cfg: &LearnConfig,
    seed: u64,
    on_iteration: &mut dyn FnMut(&IterationStats) -> bool,
) -> Result<Learned> {
    let t0 = Instant::now();
    cfg.validate().map_err(Error::Invalid)?;
    let rewarded;
    let task = match &cfg.reward {
        Some(r) => {
            let mut t = task.clone();
            t.spec.reward = r.clone();
            rewarded = t;
            &rewarded
        }
        None => task,
    };
    cfg.dsm
        .validate(Some(task.feature_dim()))
        .map_err(Error::Invalid)?;
    PolicySpace::of(task).map_err(|e| Error::task(task.name(), "constraint_input", e))?;
    if demos.state_names != task.spec.state || demos.action_names != task.spec.action {
        return Err(Error::Invalid(format!(
            "the demonstrations do not match task '{}' (state/action names differ)",
            task.name()
        )));
    }
    if demos.is_empty() {
        return Err(Error::Invalid("no demonstrations to learn from".into()));
    }
    let d = task.feature_dim();
    let demo_points = Points {
        dim: d,
        data: demos.feature_points(task),
    };
    let starts = demos.start_states();
    let mut sim = Simulator::new(task);
    let demo_returns: Vec<f64> = demos
        .demos
        .iter()
        .map(|x| replay_return(&mut sim, &x.states, &x.actions))
        .collect();

    let mut net = Mlp::new(d, &cfg.hidden, seed);
    if cfg.normalize_input {
        let n = demo_points.len() as f64;
        let mean: Vec<f64> = (0..d)
            .map(|k| demo_points.rows().map(|r| r[k]).sum::<f64>() / n)
            .collect();
        let var = demo_points
            .rows()
            .map(|r| (0..d).map(|k| (r[k] - mean[k]).powi(2)).sum::<f64>())
            .sum::<f64>()
            / (n * d as f64);
        let scale = if var > 0.0 { 1.0 / var.sqrt() } else { 1.0 };
        net.input_offset = mean;
        net.input_scale = vec![scale; d];
    }
    let mut adam = Adam::new(net.params.len(), cfg.lr, cfg.adam_eps);
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x9e37_79b9_7f4a_7c15);
    let mut memory = Points::new(d);
    let mut history = Vec::new();
    let mut traj = Trajectory::with_capacity(task);
    let mut scratch = Scratch::default();
    let mut stop_reason = format!("{} iterations done", cfg.iterations);
    let mut dsm = cfg.dsm.clone();
    if PolicySpace::of(task) == Ok(PolicySpace::Velocity) && dsm.velocity_reference.is_none() {
        // The demonstrated commands are feasible: their mean is the reference of the projection.
        let n = demo_points.len() as f64;
        dsm.velocity_reference = Some(
            (0..d)
                .map(|k| demo_points.rows().map(|r| r[k]).sum::<f64>() / n)
                .collect(),
        );
    }
    // The rollouts probe the learned boundary itself: the deployment safety margin is not applied here.
    let probe = DsmConfig {
        safety_margin: 0.0,
        ..dsm.clone()
    };
    let mut ppo = match cfg.policy {
        PolicyKind::Dsm => None,
        PolicyKind::Crl => {
            // States normalized by the demonstrations' mean and spread.
            let (n, rows) = (task.state_dim(), demos.total_steps().max(1) as f64);
            let states = || demos.demos.iter().flat_map(|x| x.states.chunks(n));
            let mean: Vec<f64> = (0..n)
                .map(|k| states().map(|s| s[k]).sum::<f64>() / rows)
                .collect();
            let scale: Vec<f64> = (0..n)
                .map(|k| {
                    let var = states().map(|s| (s[k] - mean[k]).powi(2)).sum::<f64>() / rows;
                    1.0 / var.sqrt().max(1e-3)
                })
                .collect();
            Some(Ppo::new(task, cfg.crl.clone(), mean, scale, seed)?)
        }
    };
    let gmm = match cfg.method {
        Method::Gpucl => Some(
            Gmm::fit_bic(
                &demo_points.data,
                d,
                (cfg.gpucl.components[0], cfg.gpucl.components[1]),
                seed,
            )
            .map_err(|e| Error::Invalid(format!("gpucl: {e}")))?,
        ),
        _ => None,
    };
    let mut trained = false;
    for it in 0..cfg.iterations {
        let ti = Instant::now();
        let mut ppo_stats = None;
        if let Some(ppo) = ppo.as_mut() {
            // Train the policy on the learned binary cost (none before zeta was first trained).
            let mut cost_scratch = Scratch::default();
            let mut cost = |psi: &[f64]| {
                if trained && net.zeta(psi, &mut cost_scratch) < 0.5 {
                    1.0
                } else {
                    0.0
                }
            };
            ppo_stats = Some(ppo.train(
                task,
                &starts,
                &mut cost,
                cfg.crl.timesteps_per_iteration,
                &mut |_| true,
            )?);
        }
        // Roll out the current policy: the nominal DS first, then the DS modulated by zeta; or the
        // CRL policy, sampled.
        let mut kept = Vec::new();
        {
            let policy_net = (it > 0).then_some(&net);
            let per_start = if ppo.is_some() {
                cfg.crl.rollouts_per_start
            } else {
                1
            };
            for (j, (i, s0)) in starts
                .iter()
                .enumerate()
                .flat_map(|x| std::iter::repeat_n(x, per_start))
                .enumerate()
            {
                match &ppo {
                    // The policy's mean action first, then samples.
                    Some(ppo) if j % per_start == 0 => {
                        sim.rollout(s0, &mut &ppo.policy, &mut traj);
                    }
                    Some(ppo) => {
                        let mut policy = Sampling {
                            policy: &ppo.policy,
                            rng: ChaCha8Rng::seed_from_u64(rng.random()),
                        };
                        sim.rollout(s0, &mut policy, &mut traj);
                    }
                    None => {
                        let mut policy =
                            DsmPolicy::new(task, policy_net, &probe).map_err(Error::Invalid)?;
                        sim.rollout(s0, &mut policy, &mut traj);
                    }
                }
                let pts = feature_points(task, &traj);
                let passes_return =
                    (1.0 - cfg.policy_filter.delta) * traj.episode_return >= demo_returns[i];
                let cost = if !trained || pts.is_empty() {
                    0.0
                } else {
                    pts.rows()
                        .filter(|p| net.zeta(p, &mut scratch) < 0.5)
                        .count() as f64
                        / pts.len() as f64
                };
                // The policy filter is PUCL's (and GPUCL's, a PU variant); MECL and BC take every
                // rollout of the iteration, as the reference does.
                let filtered = matches!(cfg.method, Method::Pucl | Method::Gpucl);
                if !filtered || (passes_return && cost <= cfg.policy_filter.max_mean_cost) {
                    kept.push(pts);
                }
            }
        }
        let reliable = match cfg.method {
            Method::Pucl => identify(&demo_points, &kept, &memory, &cfg.identify)?,
            Method::Bc => {
                let mut all = Points::new(d);
                kept.iter().for_each(|p| all.extend(p));
                all
            }
            Method::Gpucl => {
                let g = gmm.as_ref().expect("fitted above");
                let mut low = Points::new(d);
                for p in kept.iter().flat_map(|p| p.rows()) {
                    if g.log_density(p) < cfg.gpucl.log_density_threshold {
                        low.push(p);
                    }
                }
                low
            }
            // MECL has no labelled infeasible set: the current rollouts enter its loss directly.
            Method::Mecl => Points::new(d),
        };
        let infeasible = reliable.len() + memory.len();
        let mut loss = f64::NAN;
        if cfg.method == Method::Mecl {
            if !kept.is_empty() {
                loss = train_mecl(&mut net, &mut adam, &demo_points, &kept, cfg);
            }
        } else if infeasible > 0 {
            let n = demo_points.len() + infeasible;
            let mut x = Array2::<f64>::zeros((n, d));
            let mut y = Array1::<f64>::zeros(n);
            for (r, p) in demo_points
                .rows()
                .chain(reliable.rows())
                .chain(memory.rows())
                .enumerate()
            {
                x.row_mut(r).assign(&ndarray::ArrayView1::from(p));
                y[r] = if r < demo_points.len() { 1.0 } else { 0.0 };
            }
            // BC weighs each class by half (REFERENCE.md).
            let w = (cfg.balance_classes || cfg.method == Method::Bc).then(|| {
                let (nd, ni) = (demo_points.len() as f64, infeasible as f64);
                Array1::from_iter((0..n).map(|r| {
                    if r < demo_points.len() {
                        0.5 * n as f64 / nd
                    } else {
                        0.5 * n as f64 / ni
                    }
                }))
            });
            loss = train(
                &mut net,
                &mut adam,
                x.view(),
                y.view(),
                w.as_ref().map(|w| w.view()),
                cfg.epochs,
                cfg.batch_size,
                &mut rng,
            );
        }
        trained |= loss.is_finite();
        memory.extend(&reliable);
        let c = grid_metrics(task, &net, 0.5);
        let stats = IterationStats {
            iteration: it,
            rollouts: starts.len()
                * if ppo.is_some() {
                    cfg.crl.rollouts_per_start
                } else {
                    1
                },
            kept: kept.len(),
            reliable_infeasible: if cfg.method == Method::Mecl {
                kept.iter().map(|p| p.len()).sum()
            } else {
                reliable.len()
            },
            memory_buffer: memory.len(),
            loss,
            seconds: ti.elapsed().as_secs_f64(),
            iou: c.iou(),
            recall: c.recall(),
            precision: c.precision(),
            policy_return: ppo_stats.as_ref().map(|s| s.mean_return),
            policy_cost: ppo_stats.as_ref().map(|s| s.mean_cost),
            nu: ppo_stats.as_ref().map(|s| s.nu),
        };
        let go_on = on_iteration(&stats);
        history.push(stats);
        if !go_on {
            return Err(Error::Invalid(format!("cancelled after iteration {it}")));
        }
        // A CRL policy still learning may not beat the demonstrations yet: only DSM stops here.
        if cfg.method == Method::Mecl || cfg.policy == PolicyKind::Crl {
            continue;
        }
        if memory.is_empty() {
            stop_reason = format!(
                "iteration {it}: no reliable infeasible state: no rollout beat its demonstration's return or came at least d_r from the demonstrations"
            );
            break;
        }
        if reliable.is_empty() && cfg.stop_when_no_new_infeasible {
            stop_reason = format!("iteration {it}: R stopped growing");
            break;
        }
    }
    if memory.is_empty() && cfg.method != Method::Mecl {
        return Err(Error::Invalid(format!(
            "nothing learned: {stop_reason} (try a smaller identify.d_r)"
        )));
    }
    Ok(Learned {
        net,
        dsm,
        memory_buffer: memory,
        history,
        starts,
        seconds: t0.elapsed().as_secs_f64(),
        stop_reason,
        policy: ppo.map(|p| p.policy),
    })
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
    cfg: &LearnConfig,
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
    let c = cfg.mecl.c_reg;
    for _ in 0..cfg.epochs {
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

/// Metrics of a learned network: on the grid, and the DSM policy it modulates.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Evaluation {
    pub iou: f64,
    pub recall: f64,
    pub precision: f64,
    pub unsafe_rate: f64,
    pub violating_episodes: f64,
    pub goal_reached: f64,
    pub confusion: Confusion,
    pub unsafe_counts: UnsafeRate,
    /// (episode, step, state) of the first violating step of each violating episode.
    #[serde(skip)]
    pub first_violations: Vec<(usize, usize, Vec<f64>)>,
}

/// The start of evaluation episode i: the given starts in turn; from the second pass on, positions
/// perturbed by the task's start_jitter (seeded, within the bounds, resampled until truly feasible),
/// so repeated episodes differ.
pub fn episode_starts(
    task: &Task,
    starts: &[Vec<f64>],
    episodes: usize,
    seed: u64,
) -> Vec<Vec<f64>> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let j = task.spec.start_jitter;
    let zero = vec![0.0; task.action_dim()];
    let mut psi = vec![0.0; task.feature_dim()];
    (0..episodes)
        .map(|i| {
            let base = &starts[i % starts.len()];
            if i < starts.len() || j <= 0.0 {
                return base.clone();
            }
            for _ in 0..1000 {
                let mut s = base.clone();
                for &k in &task.position_idx {
                    s[k] += rng.random_range(-j..=j);
                }
                if let Some((lo, hi)) = &task.bounds {
                    for (p, &k) in task.position_idx.iter().enumerate() {
                        s[k] = s[k].clamp(lo[p], hi[p]);
                    }
                }
                task.features_into(&s, &zero, &mut psi);
                if task.constrains_action() || !task.truly_infeasible(&psi) {
                    return s;
                }
            }
            base.clone()
        })
        .collect()
}

/// The unsafe rate and goal reaching of a CRL policy's mean action, from the evaluation starts.
pub fn evaluate_policy(
    task: &Task,
    policy: &GaussianPolicy,
    starts: &[Vec<f64>],
    episodes: usize,
    seed: u64,
) -> Result<(UnsafeRate, f64)> {
    if starts.is_empty() || episodes == 0 {
        return Err(Error::Invalid(
            "evaluation needs at least one start and one episode".into(),
        ));
    }
    let mut sim = Simulator::new(task);
    let mut trajs = Vec::with_capacity(episodes);
    for s in episode_starts(task, starts, episodes, seed) {
        let mut t = Trajectory::with_capacity(task);
        sim.rollout(&s, &mut &*policy, &mut t);
        trajs.push(t);
    }
    let reached = trajs.iter().filter(|t| t.reached_goal).count() as f64 / trajs.len() as f64;
    Ok((UnsafeRate::of(&trajs), reached))
}

/// Evaluate a network with its DSM settings on a task.
pub fn evaluate(
    task: &Task,
    net: &Mlp,
    dsm: &DsmConfig,
    threshold: f64,
    starts: &[Vec<f64>],
    episodes: usize,
    seed: u64,
) -> Result<Evaluation> {
    if starts.is_empty() || episodes == 0 {
        return Err(Error::Invalid(
            "evaluation needs at least one start and one episode".into(),
        ));
    }
    let c = grid_metrics(task, net, threshold);
    let mut sim = Simulator::new(task);
    let mut trajs = Vec::with_capacity(episodes);
    for s in episode_starts(task, starts, episodes, seed) {
        let mut t = Trajectory::with_capacity(task);
        let mut policy = DsmPolicy::new(task, Some(net), dsm).map_err(Error::Invalid)?;
        sim.rollout(&s, &mut policy, &mut t);
        trajs.push(t);
    }
    let u = UnsafeRate::of(&trajs);
    Ok(Evaluation {
        iou: c.iou(),
        recall: c.recall(),
        precision: c.precision(),
        unsafe_rate: u.rate(),
        violating_episodes: u.episode_fraction(),
        goal_reached: trajs.iter().filter(|t| t.reached_goal).count() as f64 / trajs.len() as f64,
        confusion: c,
        unsafe_counts: u,
        first_violations: trajs
            .iter()
            .enumerate()
            .filter_map(|(e, t)| {
                t.violations
                    .iter()
                    .position(|v| *v)
                    .map(|i| (e, i, t.state(i).to_vec()))
            })
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mecl_update_lowers_the_rollouts_logits_and_separates_them_from_the_demonstrations() {
        // 1-D feature: demonstrations in [-0.2, 0.2], two rollouts around 1 and 1.5.
        let mut demo = Points::new(1);
        (0..40).for_each(|i| demo.push(&[-0.2 + 0.01 * i as f64]));
        let rollouts: Vec<Points> = [1.0, 1.5]
            .iter()
            .map(|c| {
                let mut p = Points::new(1);
                (0..20).for_each(|i| p.push(&[c - 0.1 + 0.01 * i as f64]));
                p
            })
            .collect();
        let mut cfg = LearnConfig::for_task("point_ellipse_2d", None).unwrap();
        cfg.epochs = 30;
        let mut net = Mlp::new(1, &[16, 16], 0);
        let mut adam = Adam::new(net.params.len(), 5e-3, 1e-5);
        let mut s = Scratch::default();
        // In logits: the loss is balanced between the classes, so Adam also moves the common bias.
        let z = |net: &Mlp, x: f64, _: &mut Scratch| net.logits(ndarray::arr2(&[[x]]).view())[0];
        let before: Vec<f64> = [0.0, 1.0, 1.5]
            .iter()
            .map(|x| z(&net, *x, &mut s))
            .collect();
        let loss = train_mecl(&mut net, &mut adam, &demo, &rollouts, &cfg);
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

    #[test]
    fn builtin_configs_parse_and_validate_for_every_task() {
        for (name, _) in crate::task::BUILTIN {
            let c = LearnConfig::for_task(name, None).unwrap();
            assert!(c.iterations >= 1, "{name}");
        }
    }

    #[test]
    fn user_config_overrides_a_subset_and_rejects_unknown_or_impossible_values() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("learn.yaml");
        std::fs::write(&p, "identify: {d_r: 0.05}\nepochs: 7\n").unwrap();
        let c = LearnConfig::for_task("reach_obstacle_3d", Some(&p)).unwrap();
        assert_eq!((c.identify.d_r, c.epochs, c.identify.k), (Some(0.05), 7, 1));
        for (text, expect) in [
            ("epoch: 3\n", "epoch"),
            ("identify: {d_r: -1.0}\n", "d_r"),
            ("identify: {k: 0}\n", "identify.k"),
            ("hidden: []\n", "hidden"),
            ("identify: {d_r: null, percentile: 120.0}\n", "percentile"),
            ("dsm: {rho: 0.0}\n", "rho"),
        ] {
            std::fs::write(&p, text).unwrap();
            let e = LearnConfig::for_task("reach_obstacle_3d", Some(&p))
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("learn.yaml") && e.contains(expect),
                "{text}: {e}"
            );
        }
    }
}
