//! The task file as written: the strict YAML schema (unknown keys are errors). `compile` turns it
//! into a validated [`super::Task`].
use crate::task::shape::PrimitiveSpec;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A task file as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskSpec {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// State component names; the state dimension is their count.
    pub state: Vec<String>,
    /// Action component names: one velocity command per `position` component.
    pub action: Vec<String>,
    /// Units of state and action components, by name (documentation, model files, plots).
    #[serde(default)]
    pub units: BTreeMap<String, String>,
    /// The state components the action integrates, in action order. A MuJoCo task: every state
    /// component (a start sets them all; the model's dynamics move them).
    pub position: Vec<String>,
    /// State components that hold the previous (applied) action, in action order; may be empty.
    #[serde(default)]
    pub velocity_state: Vec<String>,
    /// The feature map psi(s, a): which state or action components the constraint sees.
    pub constraint_input: Vec<String>,
    pub dynamics: DynamicsSpec,
    /// Where an episode ends early. A task without a goal (a MuJoCo task) runs to the horizon.
    #[serde(default, skip_serializing_if = "GoalSpec::is_none")]
    pub goal: GoalSpec,
    /// Maximum number of steps of an episode.
    pub horizon: usize,
    /// Demonstration start positions (velocity-state components start at zero); for a MuJoCo task,
    /// full states.
    pub starts: Vec<Vec<f64>>,
    /// Half-width of the uniform perturbation of a start when more demonstrations than starts are asked for.
    #[serde(default)]
    pub start_jitter: f64,
    pub reward: RewardSpec,
    /// Where the RL policy's training episodes start: positions uniform in this box (REFERENCE.md:
    /// the 2-D task's (0.9, 1.0) + U(-0.5, 0.5)); none: the demonstration starts, jittered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub training_starts: Option<StartBox>,
    /// The true constraint: a union of primitives over the feature space; infeasible inside any.
    /// None (a real robot's task: nobody wrote the constraint down) learns all the same; then
    /// nothing is measured against it.
    #[serde(default, deserialize_with = "crate::task::shape::primitives")]
    pub true_constraint: Vec<PrimitiveSpec>,
    /// How a learned constraint is measured against the true one. Optional without a true constraint.
    #[serde(default)]
    pub evaluation: EvaluationSpec,
    #[serde(default)]
    pub expert: ExpertSpec,
}

/// A box of start positions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StartBox {
    pub lower: Vec<f64>,
    pub upper: Vec<f64>,
}

/// Kinematic single integrator: p' = clip(p + dt * velocity_scale * limit(a)); or, with `mujoco`, a
/// MuJoCo model stepped `frame_skip` times per step under the limited action as its controls.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DynamicsSpec {
    /// Time step in seconds (MuJoCo: the model's timestep times frame_skip).
    pub dt: f64,
    /// A MuJoCo model instead of the kinematic integrator (cargo feature `mujoco`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mujoco: Option<MujocoSpec>,
    /// Position units per second per action unit.
    #[serde(default = "one")]
    pub velocity_scale: f64,
    pub action_limit: ActionLimitSpec,
    /// Position bounds; positions are clipped to them. Absent: unbounded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bounds: Option<BoundsSpec>,
    /// Regions of position space the dynamics push the position out of (onto their boundary).
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "crate::task::shape::primitives"
    )]
    pub blocking: Vec<PrimitiveSpec>,
}

/// A MuJoCo model as the dynamics. The state is the model's qpos then qvel; the action its controls.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MujocoSpec {
    /// The model file: an absolute path, a path from the working directory, or a file name in the
    /// folder `PUCL_MUJOCO_MODELS` names (scripts/setup_mujoco.sh points it at Gymnasium's models).
    pub model: String,
    /// Physics steps per task step.
    pub frame_skip: usize,
}

fn one() -> f64 {
    1.0
}

/// Exactly one of a speed cap (`norm`, the action is scaled down to it) or a per-axis box (`box`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ActionLimitSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub norm: Option<f64>,
    #[serde(default, rename = "box", skip_serializing_if = "Option::is_none")]
    pub per_axis: Option<Vec<f64>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BoundsSpec {
    pub lower: Vec<f64>,
    pub upper: Vec<f64>,
}

/// No goal: an empty position and a zero tolerance, which no distance is below.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GoalSpec {
    pub position: Vec<f64>,
    /// Done when the position after a step is within this distance of the goal.
    pub tolerance: f64,
}

impl GoalSpec {
    pub fn is_none(&self) -> bool {
        self.position.is_empty()
    }
}

/// Per-step reward: `- distance * ||p - g||` (before or after the step) `+ progress * (d_t - d_{t+1})`
/// `- path_length * ||p_{t+1} - p_t||`, plus `goal_bonus` on the step that reaches the goal;
/// `+ speed * |x_{t+1} - x_t| / dt` of the state component `speed_of`, `- control * ||a||^2`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RewardSpec {
    #[serde(default)]
    pub distance: f64,
    #[serde(default)]
    pub distance_at: DistanceAt,
    #[serde(default)]
    pub progress: f64,
    #[serde(default)]
    pub path_length: f64,
    #[serde(default)]
    pub goal_bonus: f64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub speed: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speed_of: Option<String>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub control: f64,
}

fn is_zero(v: &f64) -> bool {
    *v == 0.0
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DistanceAt {
    #[default]
    BeforeStep,
    AfterStep,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvaluationSpec {
    /// One axis per feature: `{min, max, count}` (linspace) or `{start, stop, step}` (arange).
    pub grid: Vec<GridAxisSpec>,
    /// Evaluation episodes for the unsafe rate, started from the demonstration starts in turn.
    #[serde(default = "default_episodes")]
    pub episodes: usize,
    /// Where no grid fits (a MuJoCo task): policy files (`pucl.crl_policy`) whose mean-action
    /// rollouts, `episodes` each from the task's starts (jittered), give the states IoU is measured
    /// on, each labelled by the true constraint. A file name under data/policies/ is built in.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub policies: Vec<String>,
}

fn default_episodes() -> usize {
    30
}

impl Default for EvaluationSpec {
    /// No grid, the default episodes: what a task without a true constraint needs.
    fn default() -> Self {
        EvaluationSpec {
            grid: Vec::new(),
            episodes: default_episodes(),
            policies: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GridAxisSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<f64>,
}

/// Settings of the expert demonstration generator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpertSpec {
    /// Safety margin kept from the true constraint (feature units).
    #[serde(default = "default_margin")]
    pub margin: f64,
    /// Planner grid resolution in position units; absent: chosen from the workspace size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolution: Option<f64>,
    /// A MuJoCo task's expert is trained by constrained RL on the true constraint: its environment
    /// steps (absent: 600 000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timesteps: Option<usize>,
}

fn default_margin() -> f64 {
    0.01
}

impl Default for ExpertSpec {
    fn default() -> Self {
        ExpertSpec {
            margin: default_margin(),
            resolution: None,
            timesteps: None,
        }
    }
}

impl GridAxisSpec {
    /// The axis' sample values.
    pub fn values(&self) -> Result<Vec<f64>, String> {
        match (
            self.min, self.max, self.count, self.start, self.stop, self.step,
        ) {
            (Some(lo), Some(hi), Some(n), None, None, None) => {
                if !(lo.is_finite() && hi.is_finite() && lo < hi) || n < 2 {
                    return Err("linspace axis needs finite min < max and count >= 2".into());
                }
                Ok((0..n)
                    .map(|i| lo + (hi - lo) * i as f64 / (n - 1) as f64)
                    .collect())
            }
            (None, None, None, Some(a), Some(b), Some(h)) => {
                if !(a.is_finite() && b.is_finite() && h.is_finite() && h > 0.0 && a < b) {
                    return Err("arange axis needs finite start < stop and step > 0".into());
                }
                // numpy.arange: ceil((stop - start) / step) values start + i * step.
                let n = ((b - a) / h).ceil() as usize;
                if n > 100_000 {
                    return Err(format!("{n} values on one axis is too many"));
                }
                Ok((0..n).map(|i| a + i as f64 * h).collect())
            }
            _ => Err("give either {min, max, count} or {start, stop, step}".into()),
        }
    }
}
