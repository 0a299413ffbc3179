//! The settings of Algorithm 1 and its variants: which policy proposes rollouts, which method labels
//! infeasible data, and every hyper-parameter. Built-in defaults per task live in `config/learn/` (one
//! source of truth, embedded here); a user's file overrides any subset.
use crate::error::{Error, Result};
use crate::learn::identify::IdentifyConfig;
use crate::policy::crl::PpoConfig;
use crate::policy::modulation::DsmConfig;
use serde::{Deserialize, Serialize};
use std::path::Path;

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

/// MECL's loss: -mean log(zeta(D) + eps) + mean_s w_IS(s) log(zeta(s) + eps)
/// - c_reg (mean zeta(D) + mean zeta(policy)) + logit_l2 mean logit^2.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MeclConfig {
    pub c_reg: f64,
    /// log(zeta + eps): bounds the loss below, so the policy's states cannot drive it to minus
    /// infinity (the ICRL benchmark's cn_eps).
    #[serde(default = "mecl_eps")]
    pub eps: f64,
    /// Stop an iteration's updates once either KL divergence between the rollouts' importance
    /// weights before and after exceeds this (the ICRL benchmark's cn_target_kl_*: 10).
    #[serde(default = "mecl_target_kl")]
    pub target_kl: f64,
    /// Weight of the mean squared logit in the loss (our addition). Where the policy's states
    /// match the demonstrations the log terms cancel and the regularizer alone raises zeta, without
    /// bound in the logit: the sigmoid saturates, its gradient vanishes and zeta stays 1 everywhere
    /// (a collapse: point_ellipse_2d seed 5). This small weight keeps the logits in single digits,
    /// where they still learn.
    #[serde(default = "mecl_logit_l2")]
    pub logit_l2: f64,
}

fn mecl_eps() -> f64 {
    1e-5
}

fn mecl_target_kl() -> f64 {
    10.0
}

fn mecl_logit_l2() -> f64 {
    1e-5
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
    /// For that stop rule, an R state is new when it lies at least this many d_r from the memory
    /// buffer M; nearer ones repeat what M holds (0: every R state is new). Measured with d_r as a
    /// distance (`identify.d_r` without `standardize`); with other selections every R state is new.
    pub new_infeasible_min_distance: f64,
    /// Hidden layer widths of zeta.
    pub hidden: Vec<usize>,
    /// Adam learning rate and epsilon.
    pub lr: f64,
    pub adam_eps: f64,
    /// Epochs per outer iteration and minibatch size.
    pub epochs: usize,
    pub batch_size: usize,
    /// Epochs in the outer iterations after the first that trained: zeta starts from the previous
    /// iteration's network, which already separates D from M, and has only R's new states to fit.
    /// None (`~`, and model files written before it existed): `epochs`.
    #[serde(default)]
    pub warm_epochs: Option<usize>,
    /// Map inputs by the demonstrations' mean and one common scale (raw inputs in the reference).
    pub normalize_input: bool,
    /// Weigh both classes equally in the loss (the reference's plain BCE lets the ~20x larger
    /// demonstration set push the boundary into the infeasible data).
    pub balance_classes: bool,
    /// One outer iteration trains zeta for `epochs` passes over D, R and M, but over at most this
    /// many states' worth of minibatches: with more data it makes fewer passes, so that learning
    /// time grows no faster than the data (it grew with epochs x data before). Absent from older
    /// model files: no bound.
    #[serde(default = "unbounded")]
    pub max_training_states: usize,
    /// Velocity constraints: the commands between the zero command and each demonstrated one count
    /// as demonstrated (D is star-shaped around zero), so stopping and slowing down stay feasible
    /// and the policy projects its commands along rays from zero. Position constraints ignore it.
    /// Absent from model files written before it existed: off.
    #[serde(default)]
    pub star_prior: bool,
    /// Velocity constraints: a command more than d_r/2 outside the demonstrated range of some axis
    /// (widened to include the slow commands, which join D) is infeasible training data. PUCL's probes only go where they
    /// beat the demonstrations, so without it zeta extrapolates feasibility into directions nobody
    /// took. Position constraints ignore it. Absent from model files written before it existed: off.
    #[serde(default)]
    pub support_prior: bool,
    /// Velocity constraints: convex combinations of three demonstrated commands count as
    /// demonstrated (D fills the convex hull of the demonstrated commands). Speed limits per axis, on
    /// the norm, or any intersection of half-spaces are convex, so a command between demonstrated
    /// ones is within them; without it, the commands between demonstrations that each ran into a
    /// different limit are far from all of them and PUCL labels them infeasible. Position
    /// constraints ignore it (an obstacle is not convex in the free space). With `limit_prior`, whose
    /// set holds the hull, it adds nothing. Absent from model files written before it existed: off.
    #[serde(default)]
    pub convex_prior: bool,
    /// Velocity constraints: commands within the demonstrated range of every axis (and zero) and no
    /// faster than the fastest demonstrated command count as demonstrated.
    /// That set is the tightest per-axis-and-norm speed limit the demonstrations obey, so it lies
    /// within any such limit that they obey, and it holds the convex hull (the convex prior then
    /// adds nothing). It reaches the corners of a per-axis limit that no demonstration ran into.
    /// Wrong for a limit that couples the axes (a rotated box): switch it off there, and the
    /// convex prior still holds. Position constraints ignore it. Absent from model files written
    /// before it existed: off.
    #[serde(default)]
    pub limit_prior: bool,
    /// Proposals per demonstration from states along it (besides its start), each compared with the
    /// rest of that demonstration: an expert's path is optimal from every state on it, so a shorter
    /// way from there that leaves the demonstrations probes what they went around. Absent from model
    /// files written before it existed: none.
    #[serde(default)]
    pub suffix_starts: usize,
    /// A proposal from a state along a demonstration (`suffix_starts`), or the other way round
    /// (`both_ways`), counts only if its way to the goal is shorter than the demonstration's (from
    /// there) by this many d_r.
    #[serde(default)]
    pub suffix_shortcut: f64,
    /// DSM, position constraints: a second proposal from every start whose first one went round
    /// something (strayed d_r from the straight line to the goal), leaning the other way until it
    /// is level with the first one's farthest point, so that the far side of what the
    /// demonstrations went round is probed too; only its states up to there are labelled. It counts
    /// only as a shortcut (`suffix_shortcut`).
    /// Absent from model files written before it existed: off.
    #[serde(default)]
    pub both_ways: bool,
    /// How far `both_ways`' second proposal leans to the other side: its nominal velocity gets this
    /// times its speed added across the straight line (1: 45 degrees; 0.5: 27). Absent from model
    /// files written before it existed: 1.
    #[serde(default = "one")]
    pub both_ways_lean: f64,
    /// Position constraints: after learning, the demonstrated states that keep less than twice the
    /// margin from the learned boundary go into the model (`dsm.demonstrated_clearance`), and the
    /// DSM policy's margin is lowered around them, so that the margin never closes a way the
    /// demonstrations took (a corridor between two learned obstacles, a goal beside one). The safety
    /// filter keeps `dsm.safety_margin`. On in `config/learn/default.yaml` (docs/RESULTS.md, "The
    /// margin in demonstrated corridors"). Absent from model files written before it existed: off.
    #[serde(default)]
    pub margin_clear_of_demonstrations: bool,
    /// Position constraints: when an iteration's training makes the task's goal infeasible, the goal
    /// joins D (once) and zeta trains again. Absent from model files written before it existed: off.
    #[serde(default)]
    pub goal_feasible: bool,
    /// PUCL, position constraints: a proposal's states count for identification only where they face
    /// a turn of the demonstration it beat ([`crate::learn::bends`]). An expert's path is straight
    /// where nothing constrains it, so this leaves out the open space between demonstration
    /// corridors that a straight proposal also crosses. For planned (taut) demonstrations; off by
    /// default (docs/RESULTS.md: demonstrations that curve everywhere lose most of R and the
    /// learned obstacle with it). Absent from model files written before it existed: off.
    #[serde(default)]
    pub bend_prior: bool,
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

/// More states along a demonstration than this would be most of its rows (and multiply learning
/// time as much).
const MAX_SUFFIX_STARTS: usize = 100;

fn one() -> f64 {
    1.0
}

fn unbounded() -> usize {
    usize::MAX
}

/// Keep a rollout iff it beats the demonstration from the same start by the demonstrations'
/// sub-optimality delta ([`PolicyFilter::beats`]), and the fraction of its states the current zeta
/// calls infeasible is at most `max_mean_cost`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyFilter {
    pub delta: f64,
    pub max_mean_cost: f64,
}

impl PolicyFilter {
    /// Whether a rollout's return proves it infeasible against its demonstration's: r - delta |r| >=
    /// r_D. The paper writes (1 - delta) r(tau) >= r(tau_D) for its non-negative returns: a feasible
    /// tau cannot beat a delta-sub-optimal demonstration by that much. With negative returns (a
    /// distance cost) the same product would let a rollout through that is delta worse than its
    /// demonstration, so the margin is taken on |r|: it always asks more of the rollout.
    pub fn beats(&self, episode_return: f64, demo_return: f64) -> bool {
        episode_return - self.delta * episode_return.abs() >= demo_return
    }
}

/// The built-in learn configurations: the default and per-task files.
pub const BUILTIN_CONFIGS: &[(&str, &str)] = &[
    ("default", include_str!("../../config/learn/default.yaml")),
    (
        "point_ellipse_2d",
        include_str!("../../config/learn/point_ellipse_2d.yaml"),
    ),
    (
        "reach_obstacle_3d",
        include_str!("../../config/learn/reach_obstacle_3d.yaml"),
    ),
    (
        "reach_velocity_3d",
        include_str!("../../config/learn/reach_velocity_3d.yaml"),
    ),
    (
        "reach_four_cups_3d",
        include_str!("../../config/learn/reach_four_cups_3d.yaml"),
    ),
    // With `policy: crl`, these follow the task's file: the shared CRL-PUCL settings, then the task's.
    ("crl", include_str!("../../config/learn/crl.yaml")),
    (
        "point_ellipse_2d.crl",
        include_str!("../../config/learn/point_ellipse_2d.crl.yaml"),
    ),
    (
        "reach_obstacle_3d.crl",
        include_str!("../../config/learn/reach_obstacle_3d.crl.yaml"),
    ),
    (
        "half_cheetah_blocked",
        include_str!("../../config/learn/half_cheetah_blocked.yaml"),
    ),
    (
        "half_cheetah_blocked.crl",
        include_str!("../../config/learn/half_cheetah_blocked.crl.yaml"),
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
        Self::layered(task, policy, None, user)
    }

    /// Whether `config/learn/` has settings of the task's own (else they are derived from the data).
    pub fn has_builtin_settings(task: &str) -> bool {
        BUILTIN_CONFIGS[1..].iter().any(|(n, _)| *n == task)
    }

    /// The layers in order: default, the task's built-in files, `derived` (settings derived from the
    /// data, for a task without built-in files), the user's file.
    pub(crate) fn layered(
        task: &str,
        policy: Option<PolicyKind>,
        derived: Option<serde_yaml_ng::Value>,
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
        // The policy: the argument, else the user's file's, else the task's own file's.
        let task_file = BUILTIN_CONFIGS[1..]
            .iter()
            .find(|(n, _)| *n == task)
            .and_then(|(_, text)| serde_yaml_ng::from_str::<serde_yaml_ng::Value>(text).ok());
        let named = |v: Option<&serde_yaml_ng::Value>| {
            v.and_then(|v| v.get("policy"))
                .and_then(|v| v.as_str())
                .map(str::to_string)
        };
        let file_policy = named(user_value.as_ref()).or_else(|| named(task_file.as_ref()));
        let crl = policy.map_or(file_policy.as_deref() == Some("crl"), |p| {
            p == PolicyKind::Crl
        });
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
        if let Some(d) = derived {
            merge(&mut value, d);
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
        if self.max_training_states == 0 {
            return Err("max_training_states must be at least 1".into());
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
        if self.epochs == 0 || self.batch_size == 0 || self.warm_epochs == Some(0) {
            return Err("epochs, warm_epochs and batch_size must be at least 1".into());
        }
        self.identify.validate()?;
        if !(self.new_infeasible_min_distance.is_finite()
            && self.new_infeasible_min_distance >= 0.0)
        {
            return Err("new_infeasible_min_distance must be a finite number >= 0".into());
        }
        if self.suffix_starts > MAX_SUFFIX_STARTS {
            return Err(format!(
                "suffix_starts must be at most {MAX_SUFFIX_STARTS}, got {}",
                self.suffix_starts
            ));
        }
        if !(self.suffix_shortcut.is_finite() && self.suffix_shortcut >= 0.0) {
            return Err("suffix_shortcut must be a finite number >= 0".into());
        }
        if !(self.both_ways_lean.is_finite() && self.both_ways_lean > 0.0) {
            return Err("both_ways_lean must be a finite number > 0".into());
        }
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
        if !(self.mecl.eps.is_finite() && self.mecl.eps > 0.0) {
            return Err("mecl.eps must be a finite number > 0".into());
        }
        if !(self.mecl.target_kl.is_finite() && self.mecl.target_kl > 0.0) {
            return Err("mecl.target_kl must be a finite number > 0".into());
        }
        if !(self.mecl.logit_l2.is_finite() && self.mecl.logit_l2 >= 0.0) {
            return Err("mecl.logit_l2 must be a finite number >= 0".into());
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_filter_margin_asks_more_of_a_rollout_whatever_the_sign_of_its_return() {
        let f = PolicyFilter {
            delta: 0.03,
            max_mean_cost: 0.5,
        };
        // Non-negative returns: the paper's (1 - delta) r >= r_D.
        assert!(f.beats(1.1, 1.0));
        assert!(!f.beats(1.02, 1.0));
        // Negative returns (a distance cost): a rollout 2 % worse than its demonstration is not kept
        // (the paper's product would keep it: 0.97 * -3.40 = -3.298 >= -3.35), nor one 2 % better.
        assert!(!f.beats(-3.40, -3.35));
        assert!(!f.beats(-3.35 / 1.02, -3.35));
        assert!(f.beats(-3.35 / 1.05, -3.35));
        // delta 0: better or equal, as before.
        let exact = PolicyFilter { delta: 0.0, ..f };
        assert!(exact.beats(-3.35, -3.35) && !exact.beats(-3.36, -3.35));
    }

    #[test]
    fn warm_started_iterations_train_fewer_epochs_but_crl_keeps_the_references_steps() {
        let dsm = LearnConfig::for_task("reach_obstacle_3d", None).unwrap();
        assert_eq!((dsm.epochs, dsm.warm_epochs), (300, Some(100)));
        // crl.yaml's `warm_epochs: ~` takes the default's value back out.
        let crl = LearnConfig::for_task_policy("reach_obstacle_3d", Some(PolicyKind::Crl), None);
        assert_eq!(crl.unwrap().warm_epochs, None);
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
            ("suffix_starts: 18446744073709551615\n", "suffix_starts"),
            ("suffix_shortcut: .nan\n", "suffix_shortcut"),
            ("both_ways_lean: 0\n", "both_ways_lean"),
            (
                "new_infeasible_min_distance: -0.5\n",
                "new_infeasible_min_distance",
            ),
            ("warm_epochs: 0\n", "warm_epochs"),
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
