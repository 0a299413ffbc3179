//! Tasks: what the robot does (state, action, dynamics, goal, reward) and, for simulation and
//! evaluation only, the TRUE constraint. A task is a strict YAML file; the built-in tasks are the files
//! in `config/tasks/`, embedded in the binary.
//!
//! The folder owns everything about a task: `shape` (the true constraint's primitives), `sim` (the
//! kinematic simulator and rewards), `expert` (safe demonstrations from the true constraint), `spec`
//! (the file's schema), `compile` (its validation) and `suite` (generated tasks nobody tuned for). A new constraint primitive goes into `shape`.
mod compile;
pub mod expert;
pub mod mujoco;
pub mod shape;
pub mod sim;
mod spec;
pub mod suite;

pub use spec::*;

use crate::error::{Error, Result};
use crate::task::shape::Shape;
use std::path::Path;

/// The built-in tasks: name and YAML text (the files in `config/tasks/` are the one source).
pub const BUILTIN: &[(&str, &str)] = &[
    (
        "point_ellipse_2d",
        include_str!("../../config/tasks/point_ellipse_2d.yaml"),
    ),
    (
        "reach_obstacle_3d",
        include_str!("../../config/tasks/reach_obstacle_3d.yaml"),
    ),
    (
        "reach_velocity_3d",
        include_str!("../../config/tasks/reach_velocity_3d.yaml"),
    ),
    (
        "reach_four_cups_3d",
        include_str!("../../config/tasks/reach_four_cups_3d.yaml"),
    ),
    (
        "half_cheetah_blocked",
        include_str!("../../config/tasks/half_cheetah_blocked.yaml"),
    ),
];

/// Built-in policy files (data/policies/), named in a task's `evaluation.policies`.
pub const BUILTIN_POLICIES: &[(&str, &str)] = &[
    (
        "half_cheetah_blocked_expert.json",
        include_str!("../../data/policies/half_cheetah_blocked_expert.json"),
    ),
    (
        "half_cheetah_blocked_nominal.json",
        include_str!("../../data/policies/half_cheetah_blocked_nominal.json"),
    ),
];

/// The text of a built-in policy file by name.
pub fn builtin_policy(name: &str) -> Option<&'static str> {
    BUILTIN_POLICIES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, text)| *text)
}

/// Whether this build can load a built-in task's YAML: a MuJoCo task needs the `mujoco` feature.
pub fn builtin_available(yaml: &str) -> bool {
    cfg!(feature = "mujoco")
        || serde_yaml_ng::from_str::<TaskSpec>(yaml).map_or(true, |s| s.dynamics.mujoco.is_none())
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
    /// The MuJoCo model when the dynamics are one (then `position_idx` is every state component).
    pub mujoco: Option<mujoco::Model>,
    /// The state component whose speed the reward pays for.
    pub speed_idx: Option<usize>,
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

    /// The full state for a start position (velocity-state components zero); for a MuJoCo task a
    /// start is the full state.
    pub fn start_state(&self, position: &[f64]) -> Vec<f64> {
        let mut s = vec![0.0; self.state_dim()];
        for (k, &i) in self.position_idx.iter().enumerate() {
            s[i] = position[k];
        }
        s
    }

    /// The goal as a constraint input, when every feature reads a position component (a velocity
    /// constraint's or a velocity state's value at the goal is not given by the goal).
    pub fn goal_features(&self) -> Option<Vec<f64>> {
        let goal = &self.spec.goal;
        let on_position = self.features.iter().all(|f| match f {
            Feature::State(i) => self.position_idx.contains(i),
            Feature::Action(_) => false,
        });
        if goal.is_none() || goal.position.len() != self.position_idx.len() || !on_position {
            return None;
        }
        let state = self.start_state(&goal.position);
        let mut out = vec![0.0; self.feature_dim()];
        self.features_into(&state, &vec![0.0; self.action_dim()], &mut out);
        Some(out)
    }

    /// The task's starts as full states.
    pub fn start_states(&self) -> Vec<Vec<f64>> {
        self.spec
            .starts
            .iter()
            .map(|p| self.start_state(p))
            .collect()
    }

    /// The position part of a state.
    pub fn position_of(&self, state: &[f64]) -> Vec<f64> {
        self.position_idx.iter().map(|&i| state[i]).collect()
    }

    /// The unit of a component, if the task gives one.
    pub fn unit(&self, name: &str) -> Option<&str> {
        self.spec.units.get(name).map(String::as_str)
    }

    /// The fastest action the limit allows in every direction, in action units: the norm limit, or
    /// the smallest half-width of the box.
    pub fn top_action_speed(&self) -> f64 {
        match &self.action_limit {
            ActionLimit::Norm(c) => *c,
            ActionLimit::Box(b) => b.iter().cloned().fold(f64::INFINITY, f64::min),
        }
    }

    /// Which axis of a ROS pose or twist (0 = x, 1 = y, 2 = z) each position component of the task
    /// reads: by name where the positions are named x, y and z (a planar task's `[x, y]`), otherwise
    /// in order. An error for a task a pose cannot drive: more than three positions, or an action
    /// that does not move them one to one (a MuJoCo task's joint torques).
    pub fn pose_axes(&self) -> std::result::Result<Vec<usize>, String> {
        let names: Vec<&str> = self
            .position_idx
            .iter()
            .map(|&i| self.spec.state[i].as_str())
            .collect();
        if self.mujoco.is_some() || names.len() > 3 || names.len() != self.action_dim() {
            return Err(format!(
                "task '{}' has positions [{}] and {} actions: an end-effector pose (x, y, z) and \
                 twist drive at most three positions, one action each",
                self.name(),
                names.join(", "),
                self.action_dim()
            ));
        }
        Ok(Self::axes_named(&names))
    }

    /// The pose axes of up to three coordinates called `names`: by name where they are x, y and z,
    /// each once; otherwise in order. The rule of [`Self::pose_axes`], also for a model file's inputs.
    pub fn axes_named<S: AsRef<str>>(names: &[S]) -> Vec<usize> {
        let by_name: Vec<usize> = names
            .iter()
            .filter_map(|n| ["x", "y", "z"].iter().position(|a| *a == n.as_ref()))
            .collect();
        let distinct = by_name
            .iter()
            .collect::<std::collections::BTreeSet<_>>()
            .len();
        if by_name.len() == names.len() && distinct == names.len() {
            by_name
        } else {
            (0..names.len()).collect()
        }
    }

    /// The task's position read off a pose or twist's (x, y, z) by [`Self::pose_axes`].
    pub fn from_pose_axes(axes: &[usize], xyz: [f64; 3]) -> Vec<f64> {
        axes.iter().map(|&a| xyz[a]).collect()
    }

    /// A pose's or twist's (x, y, z) holding `values` on `axes` ([`Self::pose_axes`]), zero on the
    /// others: [`Self::from_pose_axes`] the other way.
    pub fn to_pose_axes(axes: &[usize], values: &[f64]) -> [f64; 3] {
        let mut xyz = [0.0; 3];
        for (&a, v) in axes.iter().zip(values) {
            xyz[a] = *v;
        }
        xyz
    }

    /// The longest step the action limit allows in one `dt`, in position units: the farthest an
    /// end effector can move between two consecutive samples of a demonstration.
    pub fn longest_step(&self) -> f64 {
        let widest = match &self.action_limit {
            ActionLimit::Norm(c) => *c,
            ActionLimit::Box(b) => b.iter().map(|v| v * v).sum::<f64>().sqrt(),
        };
        widest * self.spec.dynamics.velocity_scale * self.spec.dynamics.dt
    }

    /// The distance between the positions of two states.
    pub fn position_distance(&self, a: &[f64], b: &[f64]) -> f64 {
        self.position_idx
            .iter()
            .map(|&k| (a[k] - b[k]).powi(2))
            .sum::<f64>()
            .sqrt()
    }

    /// Metres per position unit: from the `units` of the position components (m, cm or mm, the same
    /// for all), 1 when none gives one (ROS's metres, REP 103). An error names a unit it cannot read.
    pub fn metres_per_position_unit(&self) -> std::result::Result<f64, String> {
        let mut factor = None;
        for name in &self.spec.position {
            let Some(unit) = self.unit(name) else {
                continue;
            };
            let f = match unit.trim() {
                "m" => 1.0,
                "cm" => 0.01,
                "mm" => 0.001,
                other => {
                    return Err(format!(
                        "task '{}': position unit '{other}' of '{name}' is not m, cm or mm",
                        self.name()
                    ));
                }
            };
            if factor.is_some_and(|g| g != f) {
                return Err(format!(
                    "task '{}': its position components have different units",
                    self.name()
                ));
            }
            factor = Some(f);
        }
        Ok(factor.unwrap_or(1.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_position_unit_scales_metres_and_an_unknown_or_mixed_unit_is_an_error() {
        let with_units = |units: &str| {
            let yaml = BUILTIN
                .iter()
                .find(|(n, _)| *n == "reach_obstacle_3d")
                .unwrap()
                .1
                .replace("units: {x: m, y: m, z: m,", &format!("units: {{{units}"));
            Task::from_yaml(&yaml, Path::new("test.yaml"))
        };
        let factor = |units: &str| with_units(units).unwrap().metres_per_position_unit();
        assert_eq!(factor("x: m, y: m, z: m,"), Ok(1.0));
        assert_eq!(factor("x: mm, y: mm, z: mm,"), Ok(0.001));
        assert_eq!(factor("x: cm, y: cm, z: cm,"), Ok(0.01));
        assert_eq!(factor(""), Ok(1.0), "no unit: ROS's metres");
        let e = factor("x: in, y: in, z: in,").unwrap_err();
        assert!(e.contains("'in'") && e.contains("'x'"), "{e}");
        assert!(
            factor("x: m, y: mm, z: m,")
                .unwrap_err()
                .contains("different units")
        );
    }

    #[test]
    fn a_pose_drives_the_positions_named_x_y_z_by_name_and_others_in_order() {
        let axes = |name: &str| Task::load(name).unwrap().pose_axes();
        assert_eq!(axes("reach_obstacle_3d"), Ok(vec![0, 1, 2]));
        assert_eq!(axes("point_ellipse_2d"), Ok(vec![0, 1]));
        let yaml = |from: &str, to: &str| {
            let y = BUILTIN
                .iter()
                .find(|(n, _)| *n == "point_ellipse_2d")
                .unwrap()
                .1;
            let y = y.replace(from, to).replace("{x: m,", "{z: m,");
            Task::from_yaml(&y, Path::new("t.yaml")).unwrap()
        };
        // A plane named y and z (a wall's): by name.
        let yz = yaml("[x, y]", "[z, y]").pose_axes();
        assert_eq!(yz, Ok(vec![2, 1]));
        assert_eq!(
            Task::from_pose_axes(&[2, 1], [1.0, 2.0, 3.0]),
            vec![3.0, 2.0]
        );
        assert_eq!(Task::to_pose_axes(&[2, 1], &[3.0, 2.0]), [0.0, 2.0, 3.0]);
        // Names that are not x, y, z, or repeat one: in order.
        assert_eq!(Task::axes_named(&["ax", "ay"]), vec![0, 1]);
        assert_eq!(Task::axes_named(&["x", "x"]), vec![0, 1]);
        assert!(Task::load("reach_velocity_3d").unwrap().pose_axes().is_ok());
    }

    #[test]
    fn every_builtin_task_loads_and_matches_its_file_name() {
        for (name, yaml) in BUILTIN {
            if !builtin_available(yaml) {
                let e = Task::load(name).unwrap_err().to_string();
                assert!(e.contains("--features mujoco"), "{name}: {e}");
                continue;
            }
            let t = Task::load(name).unwrap();
            assert_eq!(t.name(), *name);
        }
    }

    #[test]
    fn the_goal_is_a_constraint_input_only_for_position_constraints() {
        let goal = |name: &str| Task::load(name).unwrap().goal_features();
        assert_eq!(goal("reach_obstacle_3d"), Some(vec![0.68, 0.0, 0.04]));
        assert_eq!(goal("point_ellipse_2d"), Some(vec![0.0, 0.0]));
        // The velocity task's constraint reads the command, which the goal does not give.
        assert_eq!(goal("reach_velocity_3d"), None);
        // The goal is mapped through the feature map, not copied: inputs in another order.
        let text = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("config/tasks/reach_obstacle_3d.yaml"),
        )
        .unwrap();
        let reordered = text.replace("constraint_input: [x, y, z]", "constraint_input: [z, x, y]");
        assert_ne!(
            reordered, text,
            "the task file's constraint_input line changed"
        );
        let t = Task::from_yaml(&reordered, std::path::Path::new("reordered.yaml")).unwrap();
        assert_eq!(t.goal_features(), Some(vec![0.04, 0.68, 0.0]));
    }

    #[test]
    #[cfg(feature = "mujoco")]
    fn half_cheetah_blocked_is_gymnasiums_cheetah_with_a_wall_at_minus_three() {
        let t = Task::load("half_cheetah_blocked").unwrap();
        assert_eq!(
            (t.state_dim(), t.action_dim(), t.feature_dim()),
            (18, 6, 18)
        );
        let mut s = t.start_state(&[0.0; 18]);
        assert!(!t.truly_infeasible(&s));
        s[0] = -3.0;
        assert!(t.truly_infeasible(&s));
        // Reward |dx|/dt - 0.1 ||a||^2 whichever way it runs.
        let mut sim = sim::Simulator::new(&t);
        let (mut next, mut applied) = (vec![0.0; 18], vec![0.0; 6]);
        let start = t.start_state(&[0.0; 18]);
        let out = sim.step(
            &start,
            &[2.0, 0.0, 0.0, 0.0, 0.0, -0.5],
            &mut next,
            &mut applied,
        );
        assert_eq!(applied, vec![1.0, 0.0, 0.0, 0.0, 0.0, -0.5]);
        let expect = (next[0] - start[0]).abs() / 0.05 - 0.1 * 1.25;
        assert!((out.reward - expect).abs() < 1e-12 && !out.reached_goal);
        // An episode runs to the horizon: there is no goal.
        let mut traj = sim::Trajectory::with_capacity(&t);
        let mut zero = |_: &[f64], a: &mut [f64]| a.fill(0.0);
        sim.rollout(&start, &mut zero, &mut traj);
        assert_eq!(traj.len(), 500);
        assert!(traj.truly_feasible() && traj.final_state[0].abs() < 0.5);
    }

    #[test]
    #[cfg(feature = "mujoco")]
    fn a_mujoco_task_that_disagrees_with_its_model_names_the_field() {
        let y = BUILTIN
            .iter()
            .find(|(n, _)| *n == "half_cheetah_blocked")
            .unwrap()
            .1;
        for (from, to, field) in [
            ("dt: 0.05", "dt: 0.04", "dynamics.dt"),
            ("frame_skip: 5", "frame_skip: 0", "frame_skip"),
            (
                "model: half_cheetah.xml",
                "model: no_such.xml",
                "no_such.xml",
            ),
            ("action: [u_bthigh, ", "action: [", "action"),
            (
                "horizon: 500",
                "goal: {position: [1.0], tolerance: 0.1}\nhorizon: 500",
                "goal",
            ),
            ("speed_of: x", "speed_of: w", "reward.speed_of"),
        ] {
            assert!(y.contains(from), "{from}");
            let e = Task::from_yaml(&y.replacen(from, to, 1), Path::new("c.yaml"))
                .unwrap_err()
                .to_string();
            assert!(e.contains(field), "expected '{field}' in: {e}");
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
