//! Tasks: what the robot does (state, action, dynamics, goal, reward) and, for simulation and
//! evaluation only, the TRUE constraint. A task is a strict YAML file; the built-in tasks are the files
//! in `config/tasks/`, embedded in the binary.
use crate::error::{Error, Result};
use crate::shape::{PrimitiveSpec, Shape};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// The built-in tasks: name and YAML text (the files in `config/tasks/` are the one source).
pub const BUILTIN: &[(&str, &str)] = &[
    (
        "point_ellipse_2d",
        include_str!("../config/tasks/point_ellipse_2d.yaml"),
    ),
    (
        "reach_obstacle_3d",
        include_str!("../config/tasks/reach_obstacle_3d.yaml"),
    ),
    (
        "reach_velocity_3d",
        include_str!("../config/tasks/reach_velocity_3d.yaml"),
    ),
    (
        "reach_four_cups_3d",
        include_str!("../config/tasks/reach_four_cups_3d.yaml"),
    ),
];

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
    /// The state components the action integrates, in action order.
    pub position: Vec<String>,
    /// State components that hold the previous (applied) action, in action order; may be empty.
    #[serde(default)]
    pub velocity_state: Vec<String>,
    /// The feature map psi(s, a): which state or action components the constraint sees.
    pub constraint_input: Vec<String>,
    pub dynamics: DynamicsSpec,
    pub goal: GoalSpec,
    /// Maximum number of steps of an episode.
    pub horizon: usize,
    /// Demonstration start positions (velocity-state components start at zero).
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
    pub true_constraint: Vec<PrimitiveSpec>,
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

/// Kinematic single integrator: p' = clip(p + dt * velocity_scale * limit(a)).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DynamicsSpec {
    /// Time step in seconds.
    pub dt: f64,
    /// Position units per second per action unit.
    #[serde(default = "one")]
    pub velocity_scale: f64,
    pub action_limit: ActionLimitSpec,
    /// Position bounds; positions are clipped to them. Absent: unbounded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bounds: Option<BoundsSpec>,
    /// Regions of position space the dynamics push the position out of (onto their boundary).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocking: Vec<PrimitiveSpec>,
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

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GoalSpec {
    pub position: Vec<f64>,
    /// Done when the position after a step is within this distance of the goal.
    pub tolerance: f64,
}

/// Per-step reward: `- distance * ||p - g||` (before or after the step) `+ progress * (d_t - d_{t+1})`
/// `- path_length * ||p_{t+1} - p_t||`, plus `goal_bonus` on the step that reaches the goal.
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
}

fn default_episodes() -> usize {
    30
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
}

fn default_margin() -> f64 {
    0.01
}

impl Default for ExpertSpec {
    fn default() -> Self {
        ExpertSpec {
            margin: default_margin(),
            resolution: None,
        }
    }
}

/// Where a feature comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feature {
    State(usize),
    Action(usize),
}

/// How the action is limited.
#[derive(Debug, Clone, PartialEq)]
pub enum ActionLimit {
    Norm(f64),
    Box(Vec<f64>),
}

/// A validated, compiled task.
#[derive(Debug, Clone)]
pub struct Task {
    pub spec: TaskSpec,
    pub position_idx: Vec<usize>,
    pub velocity_idx: Vec<usize>,
    pub features: Vec<Feature>,
    pub action_limit: ActionLimit,
    pub bounds: Option<(Vec<f64>, Vec<f64>)>,
    pub blocking: Vec<Shape>,
    pub true_constraint: Vec<Shape>,
    pub grid: Vec<Vec<f64>>,
}

impl Task {
    /// A built-in task by name, or a task file by path.
    pub fn load(name_or_path: &str) -> Result<Task> {
        if let Some((_, yaml)) = BUILTIN.iter().find(|(n, _)| *n == name_or_path) {
            return Task::from_yaml(
                yaml,
                Path::new(&format!("config/tasks/{name_or_path}.yaml")),
            );
        }
        let path = Path::new(name_or_path);
        if !path.exists() {
            let names: Vec<&str> = BUILTIN.iter().map(|(n, _)| *n).collect();
            return Err(Error::Invalid(format!(
                "'{name_or_path}' is neither a built-in task ({}) nor an existing task file",
                names.join(", ")
            )));
        }
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        Task::from_yaml(&text, path)
    }

    /// Parse and validate YAML text; `path` names it in errors.
    pub fn from_yaml(text: &str, path: &Path) -> Result<Task> {
        let spec: TaskSpec = serde_yaml_ng::from_str(text).map_err(|e| {
            let line = e.location().map(|l| l.line() as u64);
            Error::file(path, line, None, e.to_string())
        })?;
        Task::from_spec(spec)
    }

    /// Validate and compile a spec: every error names the task and the field.
    pub fn from_spec(spec: TaskSpec) -> Result<Task> {
        let t = spec.name.clone();
        let err = |field: &str, msg: String| Error::task(&t, field, msg);
        if spec.name.trim().is_empty() {
            return Err(err("name", "must not be empty".into()));
        }
        if spec.state.is_empty() {
            return Err(err("state", "needs at least one component".into()));
        }
        if spec.action.is_empty() {
            return Err(err("action", "needs at least one component".into()));
        }
        let mut seen = std::collections::HashSet::new();
        for n in spec.state.iter().chain(&spec.action) {
            if n.is_empty() || !seen.insert(n.as_str()) {
                return Err(err(
                    "state/action",
                    format!("component name '{n}' is empty or repeated"),
                ));
            }
            if ["demo", "step", "episode_return"].contains(&n.as_str()) {
                return Err(err(
                    "state/action",
                    format!("'{n}' is reserved for demonstration files"),
                ));
            }
        }
        let state_index = |field: &str, n: &String| {
            spec.state
                .iter()
                .position(|s| s == n)
                .ok_or_else(|| err(field, format!("'{n}' is not a state component")))
        };
        let m = spec.action.len();
        let position_idx = spec
            .position
            .iter()
            .map(|n| state_index("position", n))
            .collect::<Result<Vec<_>>>()?;
        if position_idx.len() != m {
            return Err(err(
                "position",
                format!(
                    "needs one component per action ({m}), has {}",
                    position_idx.len()
                ),
            ));
        }
        let velocity_idx = spec
            .velocity_state
            .iter()
            .map(|n| state_index("velocity_state", n))
            .collect::<Result<Vec<_>>>()?;
        if !velocity_idx.is_empty() && velocity_idx.len() != m {
            return Err(err(
                "velocity_state",
                format!("needs one component per action ({m}) or none"),
            ));
        }
        let mut used = position_idx.clone();
        used.extend(&velocity_idx);
        used.sort();
        if used.windows(2).any(|w| w[0] == w[1]) {
            return Err(err(
                "velocity_state",
                "a component is listed twice in position/velocity_state".into(),
            ));
        }
        if used.len() != spec.state.len() {
            return Err(err(
                "state",
                "every state component must be in position or velocity_state".into(),
            ));
        }
        let features = spec
            .constraint_input
            .iter()
            .map(|n| {
                if let Some(i) = spec.state.iter().position(|s| s == n) {
                    Ok(Feature::State(i))
                } else if let Some(i) = spec.action.iter().position(|s| s == n) {
                    Ok(Feature::Action(i))
                } else {
                    Err(err(
                        "constraint_input",
                        format!("'{n}' is neither a state nor an action component"),
                    ))
                }
            })
            .collect::<Result<Vec<_>>>()?;
        if features.is_empty() {
            return Err(err(
                "constraint_input",
                "needs at least one component".into(),
            ));
        }
        let d = &spec.dynamics;
        if !(d.dt.is_finite() && d.dt > 0.0) {
            return Err(err("dynamics.dt", "must be a finite number > 0".into()));
        }
        if !(d.velocity_scale.is_finite() && d.velocity_scale > 0.0) {
            return Err(err(
                "dynamics.velocity_scale",
                "must be a finite number > 0".into(),
            ));
        }
        let action_limit = match (&d.action_limit.norm, &d.action_limit.per_axis) {
            (Some(n), None) if n.is_finite() && *n > 0.0 => ActionLimit::Norm(*n),
            (None, Some(b)) if b.len() == m && b.iter().all(|v| v.is_finite() && *v > 0.0) => {
                ActionLimit::Box(b.clone())
            }
            _ => {
                return Err(err(
                    "dynamics.action_limit",
                    format!("give exactly one of norm (> 0) or box ({m} values > 0)"),
                ));
            }
        };
        let bounds = match &d.bounds {
            None => None,
            Some(b) => {
                if b.lower.len() != m || b.upper.len() != m {
                    return Err(err(
                        "dynamics.bounds",
                        format!("lower and upper need {m} values (one per position)"),
                    ));
                }
                if b.lower
                    .iter()
                    .zip(&b.upper)
                    .any(|(l, u)| !(l.is_finite() && u.is_finite() && l < u))
                {
                    return Err(err(
                        "dynamics.bounds",
                        "need finite lower < upper on every axis".into(),
                    ));
                }
                Some((b.lower.clone(), b.upper.clone()))
            }
        };
        let compile_all =
            |field: &str, prims: &[PrimitiveSpec], dim: usize| -> Result<Vec<Shape>> {
                prims
                    .iter()
                    .enumerate()
                    .map(|(i, p)| {
                        let s = p.compile().map_err(|e| err(&format!("{field}[{i}]"), e))?;
                        if (s.exact_dim() && s.dim() != dim) || s.dim() > dim {
                            return Err(err(
                                &format!("{field}[{i}]"),
                                format!("reads {} components, the space has {dim}", s.dim()),
                            ));
                        }
                        Ok(s)
                    })
                    .collect()
            };
        let blocking = compile_all("dynamics.blocking", &d.blocking, m)?;
        if blocking
            .iter()
            .any(|s| matches!(s, Shape::VelocityLimit { .. }))
        {
            return Err(err(
                "dynamics.blocking",
                "a velocity_limit cannot block positions".into(),
            ));
        }
        if spec.true_constraint.is_empty() {
            return Err(err(
                "true_constraint",
                "needs at least one primitive".into(),
            ));
        }
        let true_constraint =
            compile_all("true_constraint", &spec.true_constraint, features.len())?;
        let check_pos = |field: &str, p: &[f64]| -> Result<()> {
            if p.len() != m {
                return Err(err(
                    field,
                    format!("needs {m} values (one per position), has {}", p.len()),
                ));
            }
            if p.iter().any(|v| !v.is_finite()) {
                return Err(err(field, "values must be finite".into()));
            }
            if let Some((lo, hi)) = &bounds
                && p.iter()
                    .zip(lo.iter().zip(hi))
                    .any(|(v, (l, h))| v < l || v > h)
            {
                return Err(err(field, format!("{p:?} is outside dynamics.bounds")));
            }
            Ok(())
        };
        check_pos("goal.position", &spec.goal.position)?;
        if !(spec.goal.tolerance.is_finite() && spec.goal.tolerance > 0.0) {
            return Err(err("goal.tolerance", "must be a finite number > 0".into()));
        }
        if spec.horizon == 0 {
            return Err(err("horizon", "must be at least 1".into()));
        }
        if spec.starts.is_empty() {
            return Err(err("starts", "needs at least one start".into()));
        }
        for (i, s) in spec.starts.iter().enumerate() {
            check_pos(&format!("starts[{i}]"), s)?;
        }
        if !(spec.start_jitter.is_finite() && spec.start_jitter >= 0.0) {
            return Err(err("start_jitter", "must be a finite number >= 0".into()));
        }
        if let Some(b) = &spec.training_starts {
            check_pos("training_starts.lower", &b.lower)?;
            check_pos("training_starts.upper", &b.upper)?;
            if b.lower.iter().zip(&b.upper).any(|(l, h)| l > h) {
                return Err(err("training_starts", "lower must not exceed upper".into()));
            }
        }
        let r = &spec.reward;
        if [r.distance, r.progress, r.path_length, r.goal_bonus]
            .iter()
            .any(|v| !v.is_finite())
        {
            return Err(err("reward", "weights must be finite".into()));
        }
        if spec.evaluation.grid.len() != features.len() {
            return Err(err(
                "evaluation.grid",
                format!(
                    "needs one axis per constraint_input component ({}), has {}",
                    features.len(),
                    spec.evaluation.grid.len()
                ),
            ));
        }
        let grid = spec
            .evaluation
            .grid
            .iter()
            .enumerate()
            .map(|(i, a)| {
                a.values()
                    .map_err(|e| err(&format!("evaluation.grid[{i}]"), e))
            })
            .collect::<Result<Vec<_>>>()?;
        if spec.evaluation.episodes == 0 {
            return Err(err("evaluation.episodes", "must be at least 1".into()));
        }
        if !(spec.expert.margin.is_finite() && spec.expert.margin >= 0.0) {
            return Err(err("expert.margin", "must be a finite number >= 0".into()));
        }
        if let Some(r) = spec.expert.resolution
            && !(r.is_finite() && r > 0.0)
        {
            return Err(err(
                "expert.resolution",
                "must be a finite number > 0".into(),
            ));
        }
        Ok(Task {
            spec,
            position_idx,
            velocity_idx,
            features,
            action_limit,
            bounds,
            blocking,
            true_constraint,
            grid,
        })
    }

    pub fn name(&self) -> &str {
        &self.spec.name
    }
    pub fn state_dim(&self) -> usize {
        self.spec.state.len()
    }
    pub fn action_dim(&self) -> usize {
        self.spec.action.len()
    }
    pub fn feature_dim(&self) -> usize {
        self.features.len()
    }
    pub fn feature_names(&self) -> &[String] {
        &self.spec.constraint_input
    }
    pub fn goal(&self) -> &[f64] {
        &self.spec.goal.position
    }

    /// psi(s, a): the constraint's input.
    #[inline]
    pub fn features_into(&self, state: &[f64], action: &[f64], out: &mut [f64]) {
        for (o, f) in out.iter_mut().zip(&self.features) {
            *o = match *f {
                Feature::State(i) => state[i],
                Feature::Action(i) => action[i],
            };
        }
    }

    /// Whether the feature map reads the action (a velocity constraint) rather than only the state.
    pub fn constrains_action(&self) -> bool {
        self.features
            .iter()
            .any(|f| matches!(f, Feature::Action(_)))
    }

    /// The true constraint at a feature vector: true = infeasible.
    #[inline]
    pub fn truly_infeasible(&self, psi: &[f64]) -> bool {
        self.true_constraint.iter().any(|s| s.contains(psi))
    }

    /// The full state for a start position (velocity-state components zero).
    pub fn start_state(&self, position: &[f64]) -> Vec<f64> {
        let mut s = vec![0.0; self.state_dim()];
        for (k, &i) in self.position_idx.iter().enumerate() {
            s[i] = position[k];
        }
        s
    }

    /// The position part of a state.
    pub fn position_of(&self, state: &[f64]) -> Vec<f64> {
        self.position_idx.iter().map(|&i| state[i]).collect()
    }

    /// The unit of a component, if the task gives one.
    pub fn unit(&self, name: &str) -> Option<&str> {
        self.spec.units.get(name).map(String::as_str)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_task_loads_and_matches_its_file_name() {
        for (name, _) in BUILTIN {
            let t = Task::load(name).unwrap();
            assert_eq!(t.name(), *name);
        }
    }

    #[test]
    fn reference_geometry_of_builtin_tasks() {
        let t = Task::load("point_ellipse_2d").unwrap();
        assert_eq!(t.grid[0].len(), 54);
        assert!(t.truly_infeasible(&[0.72, 0.55]) && t.truly_infeasible(&[0.72 + 0.249, 0.55]));
        assert!(!t.truly_infeasible(&[0.72 + 0.251, 0.55]));
        let t = Task::load("reach_obstacle_3d").unwrap();
        assert!(
            t.truly_infeasible(&[0.55, 0.0399, 10.0]) && !t.truly_infeasible(&[0.5901, 0.0, 0.0])
        );
        let t = Task::load("reach_velocity_3d").unwrap();
        assert!(t.constrains_action());
        assert!(t.truly_infeasible(&[1.01, 0.0, 0.0]) && t.truly_infeasible(&[0.0, 0.0, -0.41]));
        assert!(!t.truly_infeasible(&[1.0, 1.2, 0.4]));
        assert_eq!(
            t.start_state(&[0.1, 0.2, 0.3]),
            vec![0.1, 0.2, 0.3, 0.0, 0.0, 0.0]
        );
        let t = Task::load("reach_four_cups_3d").unwrap();
        assert_eq!(t.true_constraint.len(), 4);
    }

    fn yaml_with(replace: &str, with: &str) -> String {
        let y = BUILTIN[1].1;
        assert!(y.contains(replace), "{replace}");
        y.replacen(replace, with, 1)
    }

    #[test]
    fn unknown_yaml_key_is_an_error_naming_the_key_and_line() {
        let y = yaml_with("horizon: 400", "horizon: 400\nhorizn: 3");
        let e = Task::from_yaml(&y, Path::new("my_task.yaml"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("my_task.yaml") && e.contains("horizn") && e.contains(':'),
            "{e}"
        );
        let y = yaml_with(
            "{kind: cylinder, center: [0.55, 0.0], radius: 0.04}",
            "{kind: cylinder, center: [0.55, 0.0], radius: 0.04, height: 2}",
        );
        let e = Task::from_yaml(&y, Path::new("t.yaml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("height"), "{e}");
    }

    #[test]
    fn inconsistent_tasks_name_the_field() {
        for (from, to, field) in [
            (
                "goal: {position: [0.68, 0.0, 0.04]",
                "goal: {position: [0.68, 0.0]",
                "goal.position",
            ),
            (
                "goal: {position: [0.68, 0.0, 0.04]",
                "goal: {position: [0.68, 0.5, 0.04]",
                "goal.position",
            ),
            (
                "constraint_input: [x, y, z]",
                "constraint_input: [x, y, w]",
                "constraint_input",
            ),
            (
                "action_limit: {box: [1.0, 1.0, 1.0]}",
                "action_limit: {box: [1.0, 1.0]}",
                "dynamics.action_limit",
            ),
            ("dt: 0.016666666666666666", "dt: -1", "dynamics.dt"),
            (
                "  - [0.35, -0.09, 0.05]\n",
                "  - [0.35, -0.09]\n",
                "starts[0]",
            ),
            ("radius: 0.04}", "radius: 0.0}", "true_constraint[0]"),
            (
                "    - {min: 0.035, max: 0.08, count: 40}\n",
                "",
                "evaluation.grid",
            ),
        ] {
            let e = Task::from_yaml(&yaml_with(from, to), Path::new("t.yaml"))
                .unwrap_err()
                .to_string();
            assert!(e.contains(field), "expected '{field}' in: {e}");
        }
    }

    #[test]
    fn unknown_task_name_lists_the_builtins() {
        let e = Task::load("no_such_task").unwrap_err().to_string();
        assert!(
            e.contains("reach_obstacle_3d") && e.contains("no_such_task"),
            "{e}"
        );
    }
}
