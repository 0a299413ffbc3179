//! Validating and compiling a task file into a [`Task`]: every error names the task and the field.
//! The checks run in the file's order (components, dynamics, true constraint, episodes, evaluation,
//! expert), so the first error is the one a reader meets first.
use super::spec::TaskSpec;
use super::{ActionLimit, Feature, Task};
use crate::error::{Error, Result};
use crate::task::shape::{PrimitiveSpec, Shape};

/// Errors about one task's fields.
struct Fields<'a> {
    task: &'a str,
}

impl Fields<'_> {
    fn err(&self, field: &str, msg: impl Into<String>) -> Error {
        Error::task(self.task, field, msg.into())
    }
}

/// Which state components are positions and velocities, and what the constraint reads.
struct Components {
    position_idx: Vec<usize>,
    velocity_idx: Vec<usize>,
    features: Vec<Feature>,
}

/// The dynamics, compiled.
struct Dynamics {
    action_limit: ActionLimit,
    bounds: Option<(Vec<f64>, Vec<f64>)>,
    blocking: Vec<Shape>,
    mujoco: Option<super::mujoco::Model>,
}

impl Task {
    /// Validate and compile a spec: every error names the task and the field.
    pub fn from_spec(spec: TaskSpec) -> Result<Task> {
        let name = spec.name.clone();
        let f = Fields { task: &name };
        let c = components(&spec, &f)?;
        let dy = dynamics(&spec, &f)?;
        let speed_idx = reward(&spec, &f)?;
        let true_constraint = compile_all(
            &f,
            "true_constraint",
            &spec.true_constraint,
            c.features.len(),
        )?;
        episodes(&spec, &f, &dy.bounds)?;
        let grid = evaluation_grid(&spec, &f, c.features.len())?;
        expert(&spec, &f)?;
        Ok(Task {
            spec,
            position_idx: c.position_idx,
            velocity_idx: c.velocity_idx,
            features: c.features,
            action_limit: dy.action_limit,
            bounds: dy.bounds,
            blocking: dy.blocking,
            true_constraint,
            grid,
            mujoco: dy.mujoco,
            speed_idx,
        })
    }
}

fn components(spec: &TaskSpec, f: &Fields) -> Result<Components> {
    if spec.name.trim().is_empty() {
        return Err(f.err("name", "must not be empty"));
    }
    if spec.state.is_empty() {
        return Err(f.err("state", "needs at least one component"));
    }
    if spec.action.is_empty() {
        return Err(f.err("action", "needs at least one component"));
    }
    let mut seen = std::collections::HashSet::new();
    for n in spec.state.iter().chain(&spec.action) {
        if n.is_empty() || !seen.insert(n.as_str()) {
            return Err(f.err(
                "state/action",
                format!("component name '{n}' is empty or repeated"),
            ));
        }
        if ["demo", "step", "episode_return"].contains(&n.as_str()) {
            return Err(f.err(
                "state/action",
                format!("'{n}' is reserved for demonstration files"),
            ));
        }
    }
    let state_index = |field: &str, n: &String| {
        spec.state
            .iter()
            .position(|s| s == n)
            .ok_or_else(|| f.err(field, format!("'{n}' is not a state component")))
    };
    let m = spec.action.len();
    let position_idx = spec
        .position
        .iter()
        .map(|n| state_index("position", n))
        .collect::<Result<Vec<_>>>()?;
    if spec.dynamics.mujoco.is_some() {
        // The model moves every component; a start sets them all.
        if position_idx != (0..spec.state.len()).collect::<Vec<_>>()
            || !spec.velocity_state.is_empty()
        {
            return Err(f.err(
                "position",
                "a MuJoCo task lists every state component, in state order (and no velocity_state)",
            ));
        }
    } else if position_idx.len() != m {
        return Err(f.err(
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
        return Err(f.err(
            "velocity_state",
            format!("needs one component per action ({m}) or none"),
        ));
    }
    let mut used = position_idx.clone();
    used.extend(&velocity_idx);
    used.sort();
    if used.windows(2).any(|w| w[0] == w[1]) {
        return Err(f.err(
            "velocity_state",
            "a component is listed twice in position/velocity_state",
        ));
    }
    if used.len() != spec.state.len() {
        return Err(f.err(
            "state",
            "every state component must be in position or velocity_state",
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
                Err(f.err(
                    "constraint_input",
                    format!("'{n}' is neither a state nor an action component"),
                ))
            }
        })
        .collect::<Result<Vec<_>>>()?;
    if features.is_empty() {
        return Err(f.err("constraint_input", "needs at least one component"));
    }
    Ok(Components {
        position_idx,
        velocity_idx,
        features,
    })
}

fn dynamics(spec: &TaskSpec, f: &Fields) -> Result<Dynamics> {
    let (d, m) = (&spec.dynamics, spec.action.len());
    if !(d.dt.is_finite() && d.dt > 0.0) {
        return Err(f.err("dynamics.dt", "must be a finite number > 0"));
    }
    let mujoco = d
        .mujoco
        .as_ref()
        .map(|s| mujoco_model(spec, s, f))
        .transpose()?;
    if !(d.velocity_scale.is_finite() && d.velocity_scale > 0.0) {
        return Err(f.err("dynamics.velocity_scale", "must be a finite number > 0"));
    }
    let action_limit = match (&d.action_limit.norm, &d.action_limit.per_axis) {
        (Some(n), None) if n.is_finite() && *n > 0.0 => ActionLimit::Norm(*n),
        (None, Some(b)) if b.len() == m && b.iter().all(|v| v.is_finite() && *v > 0.0) => {
            ActionLimit::Box(b.clone())
        }
        _ => {
            return Err(f.err(
                "dynamics.action_limit",
                format!("give exactly one of norm (> 0) or box ({m} values > 0)"),
            ));
        }
    };
    let bounds = match &d.bounds {
        None => None,
        Some(b) => {
            if b.lower.len() != m || b.upper.len() != m {
                return Err(f.err(
                    "dynamics.bounds",
                    format!("lower and upper need {m} values (one per position)"),
                ));
            }
            if b.lower
                .iter()
                .zip(&b.upper)
                .any(|(l, u)| !(l.is_finite() && u.is_finite() && l < u))
            {
                return Err(f.err("dynamics.bounds", "need finite lower < upper on every axis"));
            }
            Some((b.lower.clone(), b.upper.clone()))
        }
    };
    let blocking = compile_all(f, "dynamics.blocking", &d.blocking, m)?;
    if blocking
        .iter()
        .any(|s| matches!(s, Shape::VelocityLimit { .. }))
    {
        return Err(f.err(
            "dynamics.blocking",
            "a velocity_limit cannot block positions",
        ));
    }
    if mujoco.is_some() && (bounds.is_some() || !blocking.is_empty()) {
        return Err(f.err(
            "dynamics.bounds",
            "a MuJoCo task has no kinematic bounds or blocking regions (the model has its own)",
        ));
    }
    Ok(Dynamics {
        action_limit,
        bounds,
        blocking,
        mujoco,
    })
}

/// Load the model and check that the task's state, action and dt are the model's.
fn mujoco_model(
    spec: &TaskSpec,
    s: &super::spec::MujocoSpec,
    f: &Fields,
) -> Result<super::mujoco::Model> {
    let model = super::mujoco::load(s).map_err(|e| f.err("dynamics.mujoco", e))?;
    if spec.state.len() != model.nq + model.nv {
        return Err(f.err(
            "state",
            format!(
                "the model's state is qpos ({}) then qvel ({}): {} components, the task has {}",
                model.nq,
                model.nv,
                model.nq + model.nv,
                spec.state.len()
            ),
        ));
    }
    if spec.action.len() != model.nu {
        return Err(f.err(
            "action",
            format!(
                "the model has {} controls, the task {} actions",
                model.nu,
                spec.action.len()
            ),
        ));
    }
    let dt = model.timestep * model.frame_skip as f64;
    if (spec.dynamics.dt - dt).abs() > 1e-9 * dt {
        return Err(f.err(
            "dynamics.dt",
            format!(
                "must be the model's timestep ({}) times frame_skip ({}) = {dt}",
                model.timestep, model.frame_skip
            ),
        ));
    }
    Ok(model)
}

/// The reward's weights, and the state component whose speed it pays for.
fn reward(spec: &TaskSpec, f: &Fields) -> Result<Option<usize>> {
    let r = &spec.reward;
    if [
        r.distance,
        r.progress,
        r.path_length,
        r.goal_bonus,
        r.speed,
        r.control,
    ]
    .iter()
    .any(|v| !v.is_finite())
    {
        return Err(f.err("reward", "weights must be finite"));
    }
    match &r.speed_of {
        None if r.speed != 0.0 => Err(f.err("reward.speed_of", "speed needs speed_of")),
        None => Ok(None),
        Some(n) => spec
            .state
            .iter()
            .position(|s| s == n)
            .map(Some)
            .ok_or_else(|| f.err("reward.speed_of", format!("'{n}' is not a state component"))),
    }
}

/// Compile primitives that live in a space of `dim` components.
fn compile_all(f: &Fields, field: &str, prims: &[PrimitiveSpec], dim: usize) -> Result<Vec<Shape>> {
    prims
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let s = p
                .compile()
                .map_err(|e| f.err(&format!("{field}[{i}]"), e))?;
            if (s.exact_dim() && s.dim() != dim) || s.dim() > dim {
                return Err(f.err(
                    &format!("{field}[{i}]"),
                    format!("reads {} components, the space has {dim}", s.dim()),
                ));
            }
            Ok(s)
        })
        .collect()
}

/// Goal, horizon, starts and reward: what an episode is.
fn episodes(spec: &TaskSpec, f: &Fields, bounds: &Option<(Vec<f64>, Vec<f64>)>) -> Result<()> {
    let mujoco = spec.dynamics.mujoco.is_some();
    // A start gives the positions, or for a MuJoCo task the full state.
    let m = if mujoco {
        spec.state.len()
    } else {
        spec.action.len()
    };
    let check_pos = |field: &str, p: &[f64]| -> Result<()> {
        if p.len() != m {
            return Err(f.err(
                field,
                format!("needs {m} values (one per position), has {}", p.len()),
            ));
        }
        if p.iter().any(|v| !v.is_finite()) {
            return Err(f.err(field, "values must be finite"));
        }
        if let Some((lo, hi)) = bounds
            && p.iter()
                .zip(lo.iter().zip(hi))
                .any(|(v, (l, h))| v < l || v > h)
        {
            return Err(f.err(field, format!("{p:?} is outside dynamics.bounds")));
        }
        Ok(())
    };
    if mujoco {
        if !spec.goal.is_none() {
            return Err(f.err(
                "goal",
                "a MuJoCo task has no goal; its episodes run to the horizon",
            ));
        }
    } else {
        check_pos("goal.position", &spec.goal.position)?;
        if !(spec.goal.tolerance.is_finite() && spec.goal.tolerance > 0.0) {
            return Err(f.err("goal.tolerance", "must be a finite number > 0"));
        }
    }
    if spec.horizon == 0 {
        return Err(f.err("horizon", "must be at least 1"));
    }
    if spec.starts.is_empty() {
        return Err(f.err("starts", "needs at least one start"));
    }
    for (i, s) in spec.starts.iter().enumerate() {
        check_pos(&format!("starts[{i}]"), s)?;
    }
    if !(spec.start_jitter.is_finite() && spec.start_jitter >= 0.0) {
        return Err(f.err("start_jitter", "must be a finite number >= 0"));
    }
    if let Some(b) = &spec.training_starts {
        check_pos("training_starts.lower", &b.lower)?;
        check_pos("training_starts.upper", &b.upper)?;
        if b.lower.iter().zip(&b.upper).any(|(l, h)| l > h) {
            return Err(f.err("training_starts", "lower must not exceed upper"));
        }
    }
    Ok(())
}

/// The evaluation grid, one axis per constraint input; and the episode count.
fn evaluation_grid(spec: &TaskSpec, f: &Fields, features: usize) -> Result<Vec<Vec<f64>>> {
    // Without a true constraint there is nothing to measure on a grid.
    let unknown = spec.true_constraint.is_empty() && spec.evaluation.grid.is_empty();
    // A MuJoCo task's state has too many dimensions for a grid.
    let none_allowed =
        (spec.dynamics.mujoco.is_some() || unknown) && spec.evaluation.grid.is_empty();
    if spec.evaluation.grid.len() != features && !none_allowed {
        return Err(f.err(
            "evaluation.grid",
            format!(
                "needs one axis per constraint_input component ({features}), has {}",
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
                .map_err(|e| f.err(&format!("evaluation.grid[{i}]"), e))
        })
        .collect::<Result<Vec<_>>>()?;
    if spec.evaluation.episodes == 0 {
        return Err(f.err("evaluation.episodes", "must be at least 1"));
    }
    if none_allowed && !unknown && spec.evaluation.policies.is_empty() {
        return Err(f.err(
            "evaluation.policies",
            "a task without a grid needs policies whose states IoU is measured on",
        ));
    }
    for (i, p) in spec.evaluation.policies.iter().enumerate() {
        if super::builtin_policy(p).is_none() && !std::path::Path::new(p).is_file() {
            return Err(f.err(
                &format!("evaluation.policies[{i}]"),
                format!("'{p}' is neither a built-in policy nor an existing file"),
            ));
        }
    }
    Ok(grid)
}

fn expert(spec: &TaskSpec, f: &Fields) -> Result<()> {
    if !(spec.expert.margin.is_finite() && spec.expert.margin >= 0.0) {
        return Err(f.err("expert.margin", "must be a finite number >= 0"));
    }
    if let Some(r) = spec.expert.resolution
        && !(r.is_finite() && r > 0.0)
    {
        return Err(f.err("expert.resolution", "must be a finite number > 0"));
    }
    Ok(())
}
