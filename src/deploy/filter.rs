//! The safety filter, free of ROS: it turns the latest pose and nominal twist into a safe twist with
//! the learned constraint, and fails safe. The `safety_filter` node is a thin adapter around it.
//!
//! Position constraints: the linear velocity is modulated around the learned obstacle (Huber et al.),
//! with the lookahead over one `lookahead_time` and the model's safety margin, and never made faster
//! than commanded. Velocity constraints: the command (in the model's action units) is moved along the
//! ray from the mean demonstrated command to the last learned-feasible command. The angular velocity
//! passes through unchanged: the constraint is on the position (or the linear velocity).
use crate::deploy::model::ConstraintModel;
use crate::geometry::norm;
use crate::learn::network::Scratch;
use crate::policy::modulation::{
    DsmConfig, GoalMargin, ModulationScratch, Star, boundary_distance, project_velocity,
    safe_velocity_around,
};
use crate::policy::reference::ReferencePoints;
use crate::task::Task;
use std::sync::Arc;

/// Timeouts and behaviour, as the node's parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct FilterConfig {
    /// A pose older than this (s) stops the robot.
    pub pose_timeout: f64,
    /// A command older than this (s) stops the robot.
    pub cmd_timeout: f64,
    /// After this long (s) of stopping for the same reason, stop publishing (like Nav2's collision_monitor).
    pub stop_pub_timeout: f64,
    /// Horizon of the sampled-data lookahead (s): the next command arrives within it.
    pub lookahead_time: f64,
    /// Override the model's tail effect: false lets commands away from the learned obstacle pass.
    pub tail_effect: Option<bool>,
    /// Override the model's reference point (inside the learned obstacle).
    pub reference_point: Option<Vec<f64>>,
    /// Without a reference point from this config or the model, modulate around the star-shaped hull
    /// of the nearest learned obstacle, seen from its deepest point ([`ReferencePoints`]); off: around
    /// zeta's level sets, the first basis vector the normal.
    pub auto_reference: bool,
    /// Age inputs by their header stamps when they are set (age = now - stamp), by their arrival
    /// otherwise; false: always by arrival.
    pub use_header_stamp: bool,
    /// With `use_header_stamp`: a stamp further in the future than this (s) is a clock fault and stops
    /// the robot; within it, the input counts as new.
    pub max_clock_skew: f64,
    /// With `auto_reference`: the reference point moves along this axis through the deepest point,
    /// level with the robot (the vertical: go around learned obstacles, not over them); None: fixed.
    /// A position model whose largest learned obstacle runs through the box learning probed along
    /// exactly one other coordinate axis (a wall across the workspace) turns it to that axis: over
    /// such a wall, not along it ([`ReferencePoints::of_model_turned`]).
    pub reference_axis: Option<Vec<f64>>,
    /// Override the model's safety margin (distance kept from the learned boundary).
    pub safety_margin: Option<f64>,
    /// Slide along the learned boundary instead of stalling when a command points straight into it.
    pub saddle_escape: bool,
    /// The command's linear velocity is scaled as a whole to at most this speed (position units per
    /// second) before it is filtered; 0: no limit. Set it to the arm's speed limit where the arm
    /// would limit each axis by itself: that bends the command off the path the filter checked.
    pub max_linear_speed: f64,
}

/// The safety_filter node's `tail_effect` default: commands moving away from the learned obstacle pass
/// unchanged (a controller's retreat is never slowed).
pub const NODE_TAIL_EFFECT: bool = false;

/// A command that the modulation around a learned obstacle's star-shaped hull brakes below this
/// fraction of its speed, where the hull does not model the learned boundary, is also modulated
/// around zeta's level sets (see `evaluate`); so is one the hull turns against itself once the robot
/// is held back. In a pocket of the learned obstacle that the hull covers, the hull's push out
/// reversed the command at full speed and the level sets passed it on again, by turns: the robot
/// stayed on the spot (suite100_3D_09, learning seed 1: 8 of 30 filtered runs, none reported held
/// back until the hull's turns counted towards it).
const HELD_BY_HULL: f64 = 0.5;

/// Below this ratio of its distance from a hull's reference to the hull's radius (grown by the
/// margin), the robot is inside the hull for that fallback. Below one: a robot sliding round the
/// hull dips a little into it between steps, and following the level sets from there led it into a
/// pocket of the learned obstacle that the hull had kept it out of.
const INSIDE_HULL: f64 = 0.9;

/// Outside the hulls, closer to the learned boundary than this fraction of the margin by zeta's own
/// (first-order) distance estimate, the robot is beside a part the hull missed for that fallback.
/// Not the whole margin: beside the hull the estimate dips below the margin too, and the fallback then
/// alternated with the hull's slide and held the robot there.
const MISSED_BY_HULL: f64 = 0.5;

/// A robot beside a part the hull missed stays there for that fallback until zeta's estimate puts it
/// this fraction of the margin from the learned boundary (hysteresis): with `MISSED_BY_HULL` alone
/// the decision flipped from step to step where the estimate hovered about half the margin, and the
/// hull's modulation and zeta's level sets took turns with the robot (the renamed ellipses).
const LEFT_MISSED_PART: f64 = 0.75;

/// Once a command has followed zeta's level sets where the hull's modulation held the robot back,
/// the next follows them too while the hull's modulation still holds it back (beside the part the
/// hull missed or not) and their slide runs no more than this cosine against the command (about 101
/// degrees from it). Where the goal's direction points at the learned obstacle's middle, the level
/// sets slid a robot down one side, and the hull's modulation, as soon as the robot was clear of the
/// part it missed or the slide ran a little against the command, slid it back over the other side:
/// the robot stayed on the spot (the renamed ellipses, learning seed 2). In the plane only: in
/// space, where the level sets slide across the axis first, it moved the suite's filtered goal rates
/// both ways (docs/RESULTS.md, "Staying on the level sets").
const LEVEL_SETS_ACROSS: f64 = 0.2;

impl FilterConfig {
    /// The safety margin kept from `model`'s learned boundary: this config's, else the model's.
    fn margin(&self, model: &ConstraintModel) -> f64 {
        self.safety_margin.unwrap_or(model.dsm.safety_margin)
    }

    /// The settings the safety_filter node starts with when no parameter overrides them.
    pub fn node_defaults() -> Self {
        FilterConfig {
            tail_effect: Some(NODE_TAIL_EFFECT),
            ..FilterConfig::default()
        }
    }
}

impl Default for FilterConfig {
    fn default() -> Self {
        FilterConfig {
            pose_timeout: 0.5,
            cmd_timeout: 0.5,
            stop_pub_timeout: 1.0,
            lookahead_time: 0.1,
            tail_effect: None,
            reference_point: None,
            use_header_stamp: true,
            max_clock_skew: 0.05,
            auto_reference: true,
            reference_axis: Some(vec![0.0, 0.0, 1.0]),
            safety_margin: None,
            saddle_escape: true,
            max_linear_speed: 0.0,
        }
    }
}

/// Why the output is what it is (diagnostics say so).
#[derive(Debug, Clone, PartialEq)]
pub enum Status {
    /// The command was checked against the learned constraint (and changed if `modulated`).
    Filtering {
        modulated: bool,
    },
    /// `~/enable` is false: the command passes unchanged.
    PassThrough,
    NoModel,
    NoPose,
    NoCommand,
    StalePose {
        age: f64,
    },
    StaleCommand {
        age: f64,
    },
    /// The input's header stamp is further ahead of this node's clock than `max_clock_skew`.
    FuturePose {
        ahead: f64,
    },
    FutureCommand {
        ahead: f64,
    },
    NonFinitePose,
    NonFiniteCommand,
    /// Filtering, but the learned constraint has held the robot back for `seconds`: over the last
    /// [`HELD_WINDOW`] the filtered commands made `made` along the command's direction while the
    /// command asked for `asked` (position units). The command leads into the learned obstacle and
    /// the modulation finds no way round; a controller should plan another way. The output is still
    /// the filtered command, not a stop.
    Held {
        seconds: f64,
        made: f64,
        asked: f64,
    },
}

impl Status {
    /// True when the output is a forced stop.
    pub fn is_stop(&self) -> bool {
        !matches!(
            self,
            Status::Filtering { .. } | Status::PassThrough | Status::Held { .. }
        )
    }

    pub fn message(&self) -> String {
        match self {
            Status::Filtering { modulated: true } => {
                "filtering: command modulated by the learned constraint".into()
            }
            Status::Filtering { modulated: false } => "filtering: command feasible, passed".into(),
            Status::PassThrough => "disabled: pass-through".into(),
            Status::NoModel => "stop: no constraint model loaded".into(),
            Status::NoPose => "stop: no pose received".into(),
            Status::NoCommand => "stop: no command received".into(),
            Status::StalePose { age } => format!("stop: pose is stale ({age:.3} s old)"),
            Status::StaleCommand { age } => format!("stop: command is stale ({age:.3} s old)"),
            Status::FuturePose { ahead } => format!(
                "stop: pose stamped {ahead:.3} s in the future (clock skew above max_clock_skew)"
            ),
            Status::FutureCommand { ahead } => format!(
                "stop: command stamped {ahead:.3} s in the future (clock skew above max_clock_skew)"
            ),
            Status::NonFinitePose => "stop: pose has NaN or Inf".into(),
            Status::NonFiniteCommand => "stop: command has NaN or Inf".into(),
            Status::Held {
                seconds,
                made,
                asked,
            } => format!(
                "filtering: held back by the learned constraint for {seconds:.1} s (in the last \
                 {HELD_WINDOW} s the filtered command made {made:.3} of the {asked:.3} the command \
                 asked for): the command leads into the learned obstacle; plan another way"
            ),
        }
    }
}

/// A robot counts as held back once, over this long (s) of modulated commands, ...
pub const HELD_WINDOW: f64 = 1.0;
/// ... the filtered commands made less than this fraction of the headway the commands asked for
/// (their speed, over the window): sliding round a learned obstacle keeps much of it, dithering in
/// a pocket of one or pressing against its face almost none.
const HELD_PROGRESS: f64 = 0.1;

/// The headway of recent modulated commands, to tell sliding round a learned obstacle from being
/// held back by it. By the filter's output, not the robot's motion: an arm that lags its command
/// is not held back by the constraint.
#[derive(Debug, Default)]
struct Progress {
    /// (time, headway made, headway asked for), both summed since the first sample, oldest first
    /// (made: net, along each command's direction, so that dithering back and forth nets nothing);
    /// the first sample is the newest at or before the window's start.
    samples: std::collections::VecDeque<(f64, f64, f64)>,
    /// Since when the robot has been held back (the start of the first window that held it).
    held_since: Option<f64>,
}

impl Progress {
    fn clear(&mut self) {
        self.samples.clear();
        self.held_since = None;
    }

    /// A modulated output `out` at `now` for the command `cmd` (linear parts): Some status when the
    /// robot is held back.
    fn update(&mut self, now: f64, out: &[f64], cmd: &[f64]) -> Option<Status> {
        let speed = norm(cmd);
        let along = if speed > 0.0 {
            out.iter().zip(cmd).map(|(o, c)| o * c).sum::<f64>() / speed
        } else {
            0.0
        };
        let (made, asked) = self.samples.back().map_or((0.0, 0.0), |&(t, m, a)| {
            let dt = (now - t).max(0.0);
            (m + along * dt, a + speed * dt)
        });
        self.samples.push_back((now, made, asked));
        while self.samples.len() > 2 && self.samples[1].0 <= now - HELD_WINDOW {
            self.samples.pop_front();
        }
        let &(t0, m0, a0) = self.samples.front()?;
        let (made, asked) = (made - m0, asked - a0);
        if now - t0 < HELD_WINDOW || asked <= 0.0 || made >= HELD_PROGRESS * asked {
            self.held_since = None;
            return None;
        }
        let since = *self.held_since.get_or_insert(t0);
        Some(Status::Held {
            seconds: now - since,
            made,
            asked,
        })
    }
}

/// One output of the filter.
#[derive(Debug, Clone, PartialEq)]
pub struct Output {
    /// linear x, y, z then angular x, y, z.
    pub twist: [f64; 6],
    pub status: Status,
    /// False once a stop has been repeated for `stop_pub_timeout`: go quiet.
    pub publish: bool,
}

/// A model ready to [`SafetyFilter::install`].
pub struct PreparedModel {
    pub model: Arc<ConstraintModel>,
    /// The pose's (and twist's) axes the model's inputs are, in input order ([`model_axes`]).
    axes: Vec<usize>,
    references: ReferencePoints,
    goal_margin: Option<GoalMargin>,
}

/// Which axes of the pose and of the twist's linear velocity (0 = x, 1 = y, 2 = z) a model's inputs
/// are, in input order: by their names where they are x, y and z, otherwise in order, the rule
/// by which a task's positions read a pose ([`Task::pose_axes`]). A planar model (`[x, y]`) is
/// filtered in that plane; the twist's other linear axis passes unchanged, as the angular velocity
/// does. An error for a model the filter cannot use: other than two or three inputs.
pub fn model_axes(model: &ConstraintModel) -> Result<Vec<usize>, String> {
    let dim = model.dim();
    if !(2..=3).contains(&dim) {
        return Err(format!(
            "the filter needs a 2-D or 3-D constraint (a position, or a linear velocity, on the \
             pose's x, y, z), the model has {dim} inputs"
        ));
    }
    let names: Vec<&str> = model.features.iter().map(|f| f.name.as_str()).collect();
    Ok(Task::axes_named(&names))
}

/// The configured `reference_axis` (pose coordinates) in a model's input order, for a 3-D model
/// whose inputs are on `axes`. None for a planar model: round a learned obstacle in the plane is
/// the only way, and the hulls' tables are built around an axis in space.
fn config_axis(config: &FilterConfig, axes: &[usize]) -> Option<Vec<f64>> {
    let axis = config.reference_axis.as_ref()?;
    (axes.len() == 3 && axis.len() == 3).then(|| axes.iter().map(|&a| axis[a]).collect())
}

impl PreparedModel {
    /// The axis the hulls were turned to, when it is not the configured `reference_axis` (a
    /// learned wall across the workspace): for the node to say so when it loads the model.
    pub fn turned_axis(&self) -> Option<&[f64]> {
        self.references.turned_axis()
    }
}

/// When an input arrived (s, this node's clock) and, if its header stamp was set, how old the stamp
/// was on arrival (s; negative: stamped in the future).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Received {
    at: f64,
    stamp_age: Option<f64>,
}

/// The filter's state.
pub struct SafetyFilter {
    pub config: FilterConfig,
    model: Option<Arc<ConstraintModel>>,
    /// The pose's and twist's axes the model's inputs are ([`model_axes`]).
    axes: Vec<usize>,
    references: ReferencePoints,
    /// The margin near the model's goal where the learned obstacle comes within the margin of it
    /// ([`SafetyFilter::margin_at`]).
    goal_margin: Option<GoalMargin>,
    pose: Option<(Received, [f64; 3])>,
    command: Option<(Received, [f64; 6])>,
    enabled: bool,
    stop_since: Option<(f64, std::mem::Discriminant<Status>)>,
    progress: Progress,
    /// The robot was beside a part the hull missed at the last command (hysteresis, see
    /// [`LEFT_MISSED_PART`]).
    beside_missed_part: bool,
    /// The last command followed zeta's level sets where the hull's modulation held the robot back
    /// (see [`LEVEL_SETS_ACROSS`]).
    on_level_sets: bool,
    /// The modulation (round the hull, where there is one) changed the last command, whether or
    /// not zeta's level sets then passed it on unchanged: its headway counts towards being held
    /// back. Counted only when the output differed, the hull's reversals and the level sets'
    /// pass-throughs took turns and never added up to a second (suite100_3D_09).
    constrained: bool,
    scratch: ModulationScratch,
    trial: Vec<f64>,
}

impl SafetyFilter {
    pub fn new(config: FilterConfig) -> Self {
        SafetyFilter {
            config,
            model: None,
            axes: vec![0, 1, 2],
            references: ReferencePoints::default(),
            goal_margin: None,
            pose: None,
            command: None,
            enabled: true,
            stop_since: None,
            progress: Progress::default(),
            beside_missed_part: false,
            on_level_sets: false,
            constrained: false,
            scratch: ModulationScratch::default(),
            trial: vec![0.0; 3],
        }
    }

    /// Install (or replace) the model; a model that is not 2-D or 3-D is refused ([`model_axes`]).
    pub fn set_model(&mut self, model: Arc<ConstraintModel>) -> Result<(), String> {
        let prepared = Self::prepare(&self.config, model)?;
        self.install(prepared);
        Ok(())
    }

    /// Everything a model needs before it filters (its check and its hull tables, tens of
    /// milliseconds), without the filter: a node prepares a new model on another thread while this
    /// filter keeps answering, then [`install`](Self::install)s it in one step.
    pub fn prepare(
        config: &FilterConfig,
        model: Arc<ConstraintModel>,
    ) -> Result<PreparedModel, String> {
        let axes = model_axes(&model)?;
        let mut references = match config_axis(config, &axes) {
            Some(axis) if !model.constrains_command() => {
                ReferencePoints::of_model_turned(&model, &axis)
            }
            Some(axis) => ReferencePoints::of_model_along(&model, &axis),
            None => ReferencePoints::of_model(&model),
        };
        // The task's goal, where the demonstrations end, stays open wherever the learned constraint
        // calls it feasible: within the tolerance of it, by the margin the filter keeps now (the
        // node prepares the model again when `safety_margin` is set).
        if let Some(goal) = &model.goal
            && !model.constrains_command()
            && model.network.zeta(&goal.position, &mut Scratch::default()) >= model.threshold
        {
            let margin = config.margin(&model);
            references.keep_open(&model, &goal.position, goal.tolerance + margin, margin);
        }
        let goal_margin = model
            .goal
            .as_ref()
            .filter(|_| !model.constrains_command())
            .and_then(|goal| {
                let mut grad = vec![0.0; goal.position.len()];
                let (tolerance, margin) = (goal.tolerance, config.margin(&model));
                let net = &model.network;
                let s = &mut Scratch::default();
                GoalMargin::of(net, &goal.position, tolerance, margin, &mut grad, s)
            });
        Ok(PreparedModel {
            model,
            axes,
            references,
            goal_margin,
        })
    }

    /// Swap in a prepared model (cheap: nothing is computed).
    pub fn install(&mut self, prepared: PreparedModel) {
        self.trial.resize(prepared.axes.len(), 0.0);
        self.axes = prepared.axes;
        self.references = prepared.references;
        self.goal_margin = prepared.goal_margin;
        self.model = Some(prepared.model);
        self.beside_missed_part = false;
        self.on_level_sets = false;
    }

    pub fn model(&self) -> Option<&Arc<ConstraintModel>> {
        self.model.as_ref()
    }

    /// The pose's and twist's axes the model's inputs are (x, y, z before a model is loaded).
    pub fn axes(&self) -> &[usize] {
        &self.axes
    }

    pub fn set_enabled(&mut self, on: bool) {
        self.enabled = on;
    }

    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// Forget the pose, the command and the history of both (how long the robot has been held back
    /// or stopped): the next output is for a new run, as after the robot is moved elsewhere.
    pub fn forget_motion(&mut self) {
        self.pose = None;
        self.command = None;
        self.stop_since = None;
        self.progress.clear();
        self.beside_missed_part = false;
        self.on_level_sets = false;
    }

    /// A pose (end-effector position) received at time `t` (s), without a header stamp.
    pub fn set_pose(&mut self, t: f64, position: [f64; 3]) {
        self.set_pose_stamped(t, None, position);
    }

    /// A pose received at time `t` whose header stamp was `stamp_age` s old on arrival (None: unset).
    pub fn set_pose_stamped(&mut self, t: f64, stamp_age: Option<f64>, position: [f64; 3]) {
        self.pose = Some((Received { at: t, stamp_age }, position));
    }

    /// A nominal command received at time `t` (s), without a header stamp.
    pub fn set_command(&mut self, t: f64, twist: [f64; 6]) {
        self.set_command_stamped(t, None, twist);
    }

    /// A nominal command received at time `t` whose header stamp was `stamp_age` s old on arrival.
    pub fn set_command_stamped(&mut self, t: f64, stamp_age: Option<f64>, twist: [f64; 6]) {
        self.command = Some((Received { at: t, stamp_age }, twist));
    }

    /// The age of an input at `now`: by its stamp when set and used, else by its arrival. Err: the
    /// stamp is further in the future than the clock skew allows (by this much).
    fn age(&self, r: Received, now: f64) -> Result<f64, f64> {
        let since_arrival = now - r.at;
        match r.stamp_age.filter(|_| self.config.use_header_stamp) {
            Some(a) if a < -self.config.max_clock_skew => Err(-a),
            Some(a) => Ok(since_arrival + a.max(0.0)),
            None => Ok(since_arrival),
        }
    }

    /// `cmd` with its linear velocity scaled as a whole to at most `max_linear_speed` (when set).
    fn limited(&self, mut cmd: [f64; 6]) -> [f64; 6] {
        let (max, speed) = (self.config.max_linear_speed, norm(&cmd[..3]));
        if max > 0.0 && speed > max {
            cmd[..3].iter_mut().for_each(|c| *c *= max / speed);
        }
        cmd
    }

    /// The safe command at time `now` (s).
    pub fn output(&mut self, now: f64) -> Output {
        let status = self.evaluate(now);
        let constrained = std::mem::take(&mut self.constrained);
        let (twist, mut status) = match status {
            Ok(out) => out,
            Err(stop) => ([0.0; 6], stop),
        };
        // A robot the modulation keeps from following its command is reported as held (position
        // constraints: a velocity constraint's projection is immediate, nothing to wait for).
        match (&status, self.command) {
            (&Status::Filtering { modulated }, Some((_, cmd)))
                if (modulated || constrained)
                    && !self.model.as_ref().is_some_and(|m| m.constrains_command()) =>
            {
                let cmd = self.limited(cmd);
                let (made, asked) = (
                    Task::from_pose_axes(&self.axes, [twist[0], twist[1], twist[2]]),
                    Task::from_pose_axes(&self.axes, [cmd[0], cmd[1], cmd[2]]),
                );
                if let Some(held) = self.progress.update(now, &made, &asked) {
                    status = held;
                }
            }
            _ => self.progress.clear(),
        }
        let publish = if status.is_stop() {
            let key = std::mem::discriminant(&status);
            match self.stop_since {
                Some((t0, k)) if k == key => now - t0 <= self.config.stop_pub_timeout,
                _ => {
                    self.stop_since = Some((now, key));
                    true
                }
            }
        } else {
            self.stop_since = None;
            true
        };
        Output {
            twist,
            status,
            publish,
        }
    }

    /// The safety margin the filter keeps from `model`'s learned boundary.
    fn margin(&self, model: &ConstraintModel) -> f64 {
        self.config.margin(model)
    }

    /// The margin kept at `position`. The demonstrations end at the task's goal, so a goal within
    /// the margin of the learned obstacle is one the robot is asked to reach: near it the margin
    /// shrinks as the DSM policy's does ([`GoalMargin`]). Before, runs that had come round a
    /// learned obstacle stopped a millimetre outside the goal's tolerance, held back (RESULTS, "A
    /// goal within the filter's margin").
    fn margin_at(&self, model: &ConstraintModel, position: &[f64]) -> f64 {
        let full = self.margin(model);
        self.goal_margin
            .as_ref()
            .map_or(full, |g| full.min(g.at(position)))
    }

    /// Whether the filter modulates around the star-shaped hulls of `model`'s learned obstacles
    /// (no fixed reference point, from the configuration or the model): else around zeta's level
    /// sets.
    fn uses_hulls(&self, model: &ConstraintModel) -> bool {
        self.config.auto_reference
            && self.config.reference_point.is_none()
            && model.dsm.reference_point.is_none()
    }

    /// Why no filtered motion from outside the filter's margin can bring the robot to `position`,
    /// if none can (None: the model does not keep it away, or there is no position model). Inside
    /// the learned obstacle, or within the margin the filter keeps from it: around the star-shaped
    /// hulls no motion comes closer within the grown hull, and around zeta's level sets the
    /// lookahead refuses steps deeper into the margin. A goal there is a goal the filter stops
    /// short of, by design (a robot already inside the margin may still get there).
    pub fn unreachable(&mut self, pose: [f64; 3]) -> Option<String> {
        let model = self.model.clone()?;
        if model.constrains_command() || pose.iter().any(|c| !c.is_finite()) {
            return None;
        }
        let position = Task::from_pose_axes(&self.axes, pose);
        let (margin, hulls) = (self.margin_at(&model, &position), self.uses_hulls(&model));
        let s = &mut self.scratch;
        s.grad.resize(position.len(), 0.0);
        let logit = model
            .network
            .logit_and_grad(&position, &mut s.grad, &mut s.net);
        let zeta = crate::learn::network::sigmoid(logit);
        if zeta < model.threshold {
            return Some(format!(
                "it lies inside the learned obstacle (zeta {zeta:.3} < {})",
                model.threshold
            ));
        }
        if hulls {
            let star = self
                .references
                .star(&model, &position, margin, &mut s.net)?;
            (star.margin_ratio(margin) < 1.0).then(|| {
                format!(
                    "it lies within the filter's margin ({margin:.4}) of the learned obstacle's \
                     star-shaped hull, round which the filter steers runs from outside it"
                )
            })
        } else {
            let d = crate::policy::modulation::boundary_distance(logit, &s.grad);
            (d < margin).then(|| {
                format!(
                    "it lies {d:.4} from the learned boundary by zeta's distance estimate, within \
                     the filter's margin ({margin:.4}), deeper into which no filtered step goes"
                )
            })
        }
    }

    fn evaluate(&mut self, now: f64) -> Result<([f64; 6], Status), Status> {
        let (tc, cmd) = self.command.ok_or(Status::NoCommand)?;
        if cmd.iter().any(|v| !v.is_finite()) {
            return Err(Status::NonFiniteCommand);
        }
        let age = self
            .age(tc, now)
            .map_err(|ahead| Status::FutureCommand { ahead })?;
        if age > self.config.cmd_timeout {
            return Err(Status::StaleCommand { age });
        }
        if !self.enabled {
            return Ok((cmd, Status::PassThrough));
        }
        let model = self.model.clone().ok_or(Status::NoModel)?;
        let cmd = self.limited(cmd);
        let mut out = cmd;
        // The command's linear velocity on the model's axes (a planar model's other axis passes).
        let nominal = Task::from_pose_axes(&self.axes, [cmd[0], cmd[1], cmd[2]]);
        let modulated = if model.constrains_command() {
            // Velocity constraint: the command in action units against the learned feasible set.
            let k = model.velocity_scale;
            let mut a: Vec<f64> = nominal.iter().map(|c| c / k).collect();
            let reference = model
                .dsm
                .velocity_reference
                .clone()
                .unwrap_or_else(|| vec![0.0; a.len()]);
            let before = a.clone();
            project_velocity(
                &mut a,
                &reference,
                &model.network,
                self.margin(&model),
                &mut self.scratch.net,
                &mut self.trial,
            );
            for (&axis, c) in self.axes.iter().zip(&a) {
                out[axis] = c * k;
            }
            a != before
        } else {
            let (tp, pose) = self.pose.ok_or(Status::NoPose)?;
            if pose.iter().any(|v| !v.is_finite()) {
                return Err(Status::NonFinitePose);
            }
            let age = self
                .age(tp, now)
                .map_err(|ahead| Status::FuturePose { ahead })?;
            if age > self.config.pose_timeout {
                return Err(Status::StalePose { age });
            }
            let pos = Task::from_pose_axes(&self.axes, pose);
            let mut v = nominal.clone();
            let speed = norm(&v);
            // The filter keeps the commanded speed: no normalization, no speed-up.
            let mut dsm = DsmConfig {
                normalize_above: None,
                ..model.dsm.clone()
            };
            if let Some(t) = self.config.tail_effect {
                dsm.tail_effect = t;
            }
            if let Some(r) = &self.config.reference_point {
                // The node's parameter is a pose's (x, y, z): a planar model reads its two axes.
                dsm.reference_point = Some(match *r.as_slice() {
                    [x, y, z] => Task::from_pose_axes(&self.axes, [x, y, z]),
                    _ => r.clone(),
                });
            }
            dsm.safety_margin = self.margin_at(&model, &pos);
            dsm.goal_margin = self.goal_margin.clone();
            let star = if self.uses_hulls(&model) {
                self.references
                    .star(&model, &pos, dsm.safety_margin, &mut self.scratch.net)
            } else {
                None
            };
            dsm.saddle_escape = self.config.saddle_escape;
            dsm.leave_inside = true;
            dsm.swept_lookahead = true;
            dsm.push_outward = false;
            dsm.climb_out = false;
            dsm.workspace = model.workspace.clone();
            // The configured axis, or the one the model's hulls were turned to (`of_model_turned`).
            dsm.around_axis = self
                .config
                .reference_axis
                .as_ref()
                .and(self.references.axis().map(<[f64]>::to_vec));
            let horizon = Some(self.config.lookahead_time);
            let modulate = |star: Option<&Star>, dsm: &DsmConfig, v: &mut [f64], s: &mut _| {
                safe_velocity_around(&model.network, star, &pos, v, dsm, horizon, s)
                    .ok_or(Status::NonFinitePose)
            };
            // Whether the hull models the learned boundary where the robot is: not inside the hull
            // nor close beside a part it missed. Where it does not, a command the hull's modulation
            // holds back follows zeta's level sets (below).
            let hull_missed = star.as_ref().map(|st| {
                let inside = st.margin_ratio(dsm.safety_margin) < INSIDE_HULL;
                let beside = !inside && {
                    let g = &mut self.scratch.grad;
                    g.resize(pos.len(), 0.0);
                    let l = model.network.logit_and_grad(&pos, g, &mut self.scratch.net);
                    let d = boundary_distance(l, g);
                    d < MISSED_BY_HULL * dsm.safety_margin
                        || (self.beside_missed_part && d < LEFT_MISSED_PART * dsm.safety_margin)
                };
                self.beside_missed_part = beside;
                inside || beside
            });
            if star.is_none() {
                self.beside_missed_part = false;
            }
            // The saddle escape turns the way of the modulation the robot follows: round the hull's
            // reference point where the hull is in charge, else by the normal, as the level sets'
            // slide does. Escaping by the normal beside the hull, the escape and the modulation went
            // opposite ways on neighbouring faces near a thin hull's tip (suite8_2D_04); escaping
            // round the reference inside the hull, it and the level sets did.
            dsm.escape_round_reference = hull_missed != Some(true);
            modulate(star.as_ref(), &dsm, &mut v, &mut self.scratch)?;
            self.constrained = v != nominal;
            let on_level_sets = std::mem::take(&mut self.on_level_sets);
            // Held back and turned round by the hull: the hull's push out of a pocket it covers
            // reverses the command at full speed, which no speed test calls held back.
            let progress = |u: &[f64]| u.iter().zip(&nominal).map(|(a, b)| a * b).sum::<f64>();
            let turned_back = self.progress.held_since.is_some() && progress(&v) < 0.0;
            if (hull_missed == Some(true) || on_level_sets)
                && (norm(&v) < HELD_BY_HULL * speed || turned_back)
            {
                // The hull's modulation holds the robot back where the hull does not model the
                // learned boundary: inside the hull (in a pocket of a concave obstacle, which the
                // hull covers, the modulation only slides round the reference and the lookahead
                // stops the robot against the boundary), or close beside a part the hull missed
                // (thinner than the grid it was built on). There zeta's own level sets are followed
                // instead, as the DSM policy does (pushing out of the margin), and taken if that
                // makes more headway along the command; once taken, for as long as the hull's
                // modulation holds the robot back (LEVEL_SETS_ACROSS). Sliding across the axis
                // first, as around the hull; along zeta's whole gradient only if that makes none (a
                // boundary above or below): sliding along the whole gradient first carried runs
                // round the outer side of a learned cup that learning never probed. Once the robot
                // is held back (a second of commands that made almost no headway), across the axis
                // has led nowhere: then over or under first (suite 3-D filter goal rates, RESULTS
                // "Held back in front of learned obstacles"). Every candidate passes the same
                // whole-path check against the learned obstacle.
                let slides = if dsm.around_axis.is_some() { 2 } else { 1 };
                let mut order = [dsm.around_axis.clone(), None];
                if self.progress.held_since.is_some() {
                    order.reverse();
                }
                for around_axis in order.into_iter().take(slides) {
                    let level_sets = DsmConfig {
                        push_outward: true,
                        escape_round_reference: false,
                        around_axis,
                        ..dsm.clone()
                    };
                    let mut w = nominal.clone();
                    modulate(None, &level_sets, &mut w, &mut self.scratch)?;
                    // Once on the level sets, stay on them round the obstacle (LEVEL_SETS_ACROSS).
                    let stays =
                        on_level_sets && progress(&w) > -LEVEL_SETS_ACROSS * norm(&w) * speed;
                    if progress(&w) > progress(&v).max(0.0) || stays {
                        v = w;
                        self.on_level_sets = pos.len() == 2;
                        break;
                    }
                }
            }
            let n = norm(&v);
            if n > speed && n > 0.0 {
                v.iter_mut().for_each(|c| *c *= speed / n);
            }
            for (&axis, c) in self.axes.iter().zip(&v) {
                out[axis] = *c;
            }
            v != nominal
        };
        Ok((out, Status::Filtering { modulated }))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::demos::DemoSet;
    use crate::learn::{LearnConfig, learn};
    use crate::task::Task;
    use std::sync::OnceLock;

    /// A model of the cylinder task, learned once (short schedule); also the hull tests'.
    pub(crate) fn cylinder() -> Arc<ConstraintModel> {
        static M: OnceLock<Arc<ConstraintModel>> = OnceLock::new();
        M.get_or_init(|| Arc::new(learned("reach_obstacle_3d", "reach_obstacle_3d_ds.csv", 1)))
            .clone()
    }

    /// A model of `task` learned from the reference demonstrations in data/demos/`csv`.
    fn learned(task: &str, csv: &str, seed: u64) -> ConstraintModel {
        let t = Task::load(task).unwrap();
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("data/demos")
            .join(csv);
        let d = DemoSet::load(&p, &t).unwrap();
        let cfg = LearnConfig::for_task(task, None).unwrap();
        let l = learn(&t, &d, &cfg, seed, &mut |_| true).unwrap();
        ConstraintModel::from_learned(&t, &d, &cfg, seed, &l)
    }

    /// x of the learned cylinder's front face on the line y 0, z 0.05 (to the millimetre, outside).
    fn learned_front_face() -> f64 {
        let m = cylinder();
        let mut scratch = crate::learn::network::Scratch::default();
        let mut x = 0.45;
        while m.network.zeta(&[x + 0.001, 0.0, 0.05], &mut scratch) >= 0.5 {
            x += 0.001;
        }
        x
    }

    /// |y| of `m`'s learned boundary from the cylinder's axis along `sign` y at x 0.55, z 0.06 (the
    /// first feasible point, bisected to well below a micrometre).
    fn learned_side_face(m: &ConstraintModel, sign: f64) -> f64 {
        let mut s = crate::learn::network::Scratch::default();
        let at = |y: f64| [0.55, sign * y, 0.06];
        let (mut lo, mut hi) = (0.0, 0.12);
        assert!(m.network.zeta(&at(lo), &mut s) < 0.5 && m.network.zeta(&at(hi), &mut s) >= 0.5);
        for _ in 0..40 {
            let mid = 0.5 * (lo + hi);
            if m.network.zeta(&at(mid), &mut s) < 0.5 {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        hi
    }

    fn filter() -> SafetyFilter {
        let mut f = SafetyFilter::new(FilterConfig::default());
        f.set_model(cylinder()).unwrap();
        f
    }

    #[test]
    fn no_model_no_pose_no_command_stop() {
        let mut f = SafetyFilter::new(FilterConfig::default());
        assert_eq!(f.output(0.0).status, Status::NoCommand);
        f.set_command(0.0, [0.1, 0.0, 0.0, 0.0, 0.0, 0.3]);
        let o = f.output(0.0);
        assert_eq!((o.twist, o.status), ([0.0; 6], Status::NoModel));
        f.set_model(cylinder()).unwrap();
        assert_eq!(f.output(0.0).status, Status::NoPose);
    }

    #[test]
    fn a_command_faster_than_max_linear_speed_is_scaled_as_a_whole_keeping_its_direction() {
        let mut f = SafetyFilter::new(FilterConfig {
            max_linear_speed: 0.3,
            ..FilterConfig::node_defaults()
        });
        f.set_model(cylinder()).unwrap();
        // Moving away from the cylinder: without the tail effect, nothing to modulate.
        f.set_pose(0.0, [0.40, -0.05, 0.06]);
        let cmd = [-1.2, 0.4, 0.2, 0.0, 0.0, 0.5];
        f.set_command(0.0, cmd);
        let o = f.output(0.0);
        assert!(!o.status.is_stop(), "{:?}", o.status);
        assert!((norm(&o.twist[..3]) - 0.3).abs() < 1e-12, "{:?}", o.twist);
        let k = 0.3 / norm(&cmd[..3]);
        for (out, c) in o.twist.iter().zip(&cmd[..3]) {
            assert!((out - k * c).abs() < 1e-12, "{:?}", o.twist);
        }
        assert_eq!(o.twist[5], 0.5);
        // Slower commands pass as they are; 0 sets no limit.
        f.set_command(0.0, [-0.1, 0.05, 0.0, 0.0, 0.0, 0.0]);
        assert_eq!(f.output(0.0).twist, [-0.1, 0.05, 0.0, 0.0, 0.0, 0.0]);
        f.config.max_linear_speed = 0.0;
        f.set_command(0.0, cmd);
        assert_eq!(f.output(0.0).twist, cmd);
    }

    #[test]
    fn stale_inputs_and_nan_stop_the_robot() {
        let mut f = filter();
        f.set_pose(0.0, [0.4, 0.1, 0.05]);
        f.set_command(0.0, [0.1, 0.0, 0.0, 0.0, 0.0, 0.0]);
        assert!(!f.output(0.1).status.is_stop());
        assert!(matches!(
            f.output(0.6).status,
            Status::StalePose { .. } | Status::StaleCommand { .. }
        ));
        f.set_command(0.6, [0.1, 0.0, 0.0, 0.0, 0.0, 0.0]);
        let o = f.output(0.7);
        assert_eq!(
            (o.twist, o.status.clone()),
            ([0.0; 6], Status::StalePose { age: 0.7 })
        );
        f.set_pose(0.7, [0.4, 0.1, 0.05]);
        f.set_command(0.7, [f64::NAN, 0.0, 0.0, 0.0, 0.0, 0.0]);
        assert_eq!(f.output(0.7).status, Status::NonFiniteCommand);
        f.set_command(0.7, [0.1, 0.0, 0.0, 0.0, 0.0, 0.0]);
        f.set_pose(0.7, [0.4, f64::INFINITY, 0.05]);
        assert_eq!(f.output(0.7).status, Status::NonFinitePose);
    }

    #[test]
    fn a_pose_or_command_stamped_long_ago_stops_at_once_and_a_future_stamp_is_a_clock_fault() {
        let mut f = filter();
        let far = [0.35, -0.09, 0.05];
        let go = [0.1, 0.0, 0.0, 0.0, 0.0, 0.0];
        // Arrived just now, stamped 5 s ago: stale although it is new to the filter.
        f.set_pose_stamped(10.0, Some(5.0), far);
        f.set_command(10.0, go);
        assert!(matches!(f.output(10.0).status, Status::StalePose { age } if age >= 5.0));
        f.set_command_stamped(10.0, Some(100.0), go);
        f.set_pose_stamped(10.0, Some(0.01), far);
        assert!(matches!(f.output(10.0).status, Status::StaleCommand { age } if age >= 100.0));
        // Fresh stamps, and a stamp slightly ahead within the skew: filtered.
        f.set_command_stamped(10.0, Some(-0.02), go);
        assert!(!f.output(10.0).status.is_stop());
        // Ahead by more than the skew: stop, and say so.
        f.set_pose_stamped(10.0, Some(-1.0), far);
        let o = f.output(10.0);
        assert_eq!(o.twist, [0.0; 6]);
        assert_eq!(o.status, Status::FuturePose { ahead: 1.0 });
        assert!(o.status.message().contains("in the future"));
        // By arrival only when asked: the old stamp is then ignored.
        f.config.use_header_stamp = false;
        f.set_pose_stamped(10.0, Some(5.0), far);
        assert!(!f.output(10.2).status.is_stop());
        f.set_command(10.6, go);
        assert!(matches!(f.output(10.6).status, Status::StalePose { .. }));
    }

    /// Drive the simulated cylinder task from `start` with a command of 0.25 m/s towards `target`
    /// through `f` for `seconds` or until within 1 cm of it; returns every status and where the
    /// robot ended.
    fn drive(
        f: &mut SafetyFilter,
        start: [f64; 3],
        target: [f64; 3],
        seconds: f64,
    ) -> (Vec<Status>, Vec<f64>) {
        let task = Task::load("reach_obstacle_3d").unwrap();
        let dt = task.spec.dynamics.dt;
        let mut sim = crate::task::sim::LiveSim::new(task);
        sim.reset(&start).unwrap();
        let mut statuses = Vec::new();
        for k in 0..(seconds / dt) as usize {
            let (t, p) = (k as f64 * dt, sim.position());
            let d: Vec<f64> = (0..3).map(|i| target[i] - p[i]).collect();
            let n = norm(&d);
            if n < 0.01 {
                break;
            }
            f.set_pose(t, [p[0], p[1], p[2]]);
            f.set_command(
                t,
                [
                    0.25 * d[0] / n,
                    0.25 * d[1] / n,
                    0.25 * d[2] / n,
                    0.0,
                    0.0,
                    0.0,
                ],
            );
            let o = f.output(t);
            sim.step_velocity(&o.twist[..3]);
            statuses.push(o.status);
        }
        (statuses, sim.position())
    }

    #[test]
    fn a_command_the_learned_obstacle_blocks_for_a_second_is_reported_held_back_and_one_sliding_round_it_is_not()
     {
        // Straight at the learned cylinder from in front: the filter slides round it, at most of the
        // command's speed, and is never held.
        let (start, target) = ([0.40, 0.0, 0.05], [0.70, 0.0, 0.05]);
        let mut f = filter();
        let (statuses, end) = drive(&mut f, start, target, 3.0);
        assert!(statuses.contains(&Status::Filtering { modulated: true }));
        assert!(!statuses.iter().any(|s| matches!(s, Status::Held { .. })));
        assert!(end[0] > 0.6, "went round: {end:?}");
        // At the face, commanded straight into it, the filter slides the command along the face:
        // that is a way round (a quarter of the command's headway), not being held back. The
        // headway is the filter's output, not the robot's motion (here the pose stays where it is).
        let x = learned_front_face();
        let mut f = filter();
        for k in 0..200 {
            let t = k as f64 * 0.01;
            f.set_pose(t, [x, 0.0, 0.05]);
            f.set_command(t, [0.25, 0.0, 0.0, 0.0, 0.0, 0.0]);
            let o = f.output(t);
            assert_eq!(o.status, Status::Filtering { modulated: true });
            assert!(o.twist[0] > 0.1 * 0.25, "headway {:?}", o.twist);
        }
        // Inside the learned obstacle (a robot started there), commanded deeper in: the filter only
        // lets it leave, against the command, and once that has lasted a second it says so. Its
        // output is still the filtered command, not a forced stop.
        let mut f = filter();
        let (dt, mut first, mut last) = (0.01, None, None);
        for k in 0..200 {
            let t = k as f64 * dt;
            f.set_pose(t, [x + 0.01, 0.0, 0.05]);
            f.set_command(t, [0.25, 0.0, 0.0, 0.0, 0.0, 0.0]);
            let o = f.output(t);
            if matches!(o.status, Status::Held { .. }) {
                first.get_or_insert(t);
            }
            last = Some(o);
        }
        let first = first.expect("reported held back");
        assert!((1.0..1.05).contains(&first), "held back after {first} s");
        let o = last.unwrap();
        let Status::Held {
            seconds,
            made,
            asked,
        } = o.status.clone()
        else {
            panic!("still held back at the end: {:?}", o.status);
        };
        assert!((seconds - 1.99).abs() < 0.02 && made < 0.1 * asked && (asked - 0.25).abs() < 1e-9);
        assert!(!o.status.is_stop() && o.publish);
        assert!(o.status.message().contains("plan another way"));
        // Commanded out, the way the filter lets it go: held back until a second of commands made
        // headway, then no longer.
        let mut statuses = Vec::new();
        for k in 200..320 {
            let t = k as f64 * dt;
            f.set_pose(t, [x + 0.01, 0.0, 0.05]);
            f.set_command(t, [-0.25, 0.0, 0.0, 0.0, 0.0, 0.0]);
            statuses.push(f.output(t).status);
        }
        assert!(matches!(statuses[0], Status::Held { .. }));
        assert_eq!(
            statuses.last(),
            Some(&Status::Filtering { modulated: true })
        );
    }

    #[test]
    fn a_prepared_model_says_when_its_hulls_were_turned_from_the_configured_axis() {
        // The learned cylinder runs through the grid vertically: round the vertical either way.
        let config = FilterConfig::default();
        let p = SafetyFilter::prepare(&config, cylinder()).unwrap();
        assert_eq!(p.turned_axis(), None);
        let across = FilterConfig {
            reference_axis: Some(vec![2.0, 0.0, 0.0]),
            ..config
        };
        let p = SafetyFilter::prepare(&across, cylinder()).unwrap();
        assert_eq!(p.turned_axis(), Some(&[0.0, 0.0, 1.0][..]));
    }

    #[test]
    fn a_robot_moved_elsewhere_after_forget_motion_is_not_held_back_by_its_last_run() {
        // Held back just inside the learned obstacle's face for over a second, as above.
        let x = learned_front_face();
        let mut f = filter();
        let inside = [x + 0.01, 0.0, 0.05];
        let mut t = 0.0;
        while t < 1.5 {
            f.set_pose(t, inside);
            f.set_command(t, [0.25, 0.0, 0.0, 0.0, 0.0, 0.0]);
            f.output(t);
            t += 0.01;
        }
        assert!(matches!(f.output(t).status, Status::Held { .. }));
        // A new run, far in front of the obstacle and driving freely: without the reset its first
        // second would still count the last run's held-back commands.
        f.forget_motion();
        f.set_pose(t, [0.30, 0.0, 0.05]);
        f.set_command(t, [-0.25, 0.0, 0.0, 0.0, 0.0, 0.0]);
        let o = f.output(t);
        assert!(
            matches!(o.status, Status::Filtering { .. }),
            "{:?}",
            o.status
        );
        // And it forgets the pose and command themselves: none has been received since.
        f.forget_motion();
        assert_eq!(f.output(t).status, Status::NoCommand);
    }

    #[test]
    fn zeros_are_repeated_until_stop_pub_timeout_then_silent() {
        let mut f = SafetyFilter::new(FilterConfig::default());
        assert!(f.output(0.0).publish);
        assert!(f.output(0.9).publish);
        assert!(!f.output(1.1).publish);
        f.set_model(cylinder()).unwrap();
        f.set_pose(1.1, [0.4, 0.1, 0.05]);
        f.set_command(1.1, [0.1, 0.0, 0.0, 0.0, 0.0, 0.0]);
        assert!(f.output(1.2).publish, "publishing resumes with valid input");
    }

    #[test]
    fn command_into_the_obstacle_at_the_boundary_loses_its_inward_part() {
        let mut f = filter();
        // A point just outside the learned cylinder on -x, moving +x (into it) and +y.
        let m = cylinder();
        let mut s = crate::learn::network::Scratch::default();
        let mut x = 0.45;
        while m.network.zeta(&[x + 0.001, 0.0, 0.05], &mut s) >= 0.5 {
            x += 0.001;
        }
        f.set_pose(0.0, [x, 0.0, 0.05]);
        f.set_command(0.0, [0.2, 0.05, 0.0, 0.0, 0.0, 0.7]);
        let o = f.output(0.0);
        assert_eq!(o.status, Status::Filtering { modulated: true });
        let mut g = [0.0; 3];
        m.network.zeta_and_grad(&[x, 0.0, 0.05], &mut g, &mut s);
        let inward: f64 = -(o.twist[0] * g[0] + o.twist[1] * g[1] + o.twist[2] * g[2]);
        assert!(inward <= 1e-9, "inward component {inward}: {:?}", o.twist);
        assert_eq!(o.twist[5], 0.7, "angular velocity passes unchanged");
        let speed = (o.twist[0].powi(2) + o.twist[1].powi(2) + o.twist[2].powi(2)).sqrt();
        assert!(
            speed <= (0.2f64.powi(2) + 0.05f64.powi(2)).sqrt() + 1e-12,
            "never faster than commanded"
        );
    }

    #[test]
    fn fast_commands_never_have_a_path_over_the_horizon_through_the_obstacle() {
        let m = cylinder();
        let mut f = filter();
        let h = f.config.lookahead_time;
        let mut s = crate::learn::network::Scratch::default();
        let mut checked = 0;
        // From every side, 6-12 cm from the axis, at 0.3 to 5 m/s towards (and past) the axis; and
        // the case that once crossed it: (0.55, 0.10, 0.05) at 2 m/s along -y.
        let mut cases = vec![([0.55, 0.10, 0.05], [0.0, -2.0, 0.0])];
        for k in 0..12 {
            let a = k as f64 * std::f64::consts::PI / 6.0;
            for r in [0.06, 0.09, 0.12] {
                for speed in [0.3, 1.0, 2.0, 5.0] {
                    let p = [0.55 + r * a.cos(), r * a.sin(), 0.05];
                    let aim = [-a.cos() + 0.1 * a.sin(), -a.sin() - 0.1 * a.cos(), 0.0];
                    let n = (aim[0] * aim[0] + aim[1] * aim[1]).sqrt();
                    cases.push((p, [speed * aim[0] / n, speed * aim[1] / n, 0.0]));
                }
            }
        }
        for (p, v) in cases {
            if m.network.zeta(&p, &mut s) < 0.5 {
                continue;
            }
            f.set_pose(0.0, p);
            f.set_command(0.0, [v[0], v[1], v[2], 0.0, 0.0, 0.0]);
            let o = f.output(0.0);
            assert!(!o.status.is_stop(), "{:?}", o.status);
            for j in 1..=1000 {
                let t = h * j as f64 / 1000.0;
                let q = [
                    p[0] + t * o.twist[0],
                    p[1] + t * o.twist[1],
                    p[2] + t * o.twist[2],
                ];
                assert!(
                    m.network.zeta(&q, &mut s) >= 0.5,
                    "from {p:?} at {v:?}: the output {:?} enters the learned obstacle at {q:?}",
                    &o.twist[..3]
                );
                let r = ((q[0] - 0.55).powi(2) + q[1].powi(2)).sqrt();
                assert!(
                    r > 0.04,
                    "from {p:?} at {v:?}: the output {:?} enters the true cylinder at {q:?}",
                    &o.twist[..3]
                );
            }
            checked += 1;
        }
        assert!(
            checked > 100,
            "{checked} cases outside the learned obstacle"
        );
    }

    #[test]
    fn commands_away_from_the_obstacle_pass_unchanged_without_tail_effect() {
        let mut f = SafetyFilter::new(FilterConfig {
            tail_effect: Some(false),
            ..FilterConfig::default()
        });
        f.set_model(cylinder()).unwrap();
        let m = cylinder();
        let mut s = crate::learn::network::Scratch::default();
        let mut x = 0.40;
        while m.network.zeta(&[x + 0.001, 0.0, 0.05], &mut s) >= 0.5 {
            x += 0.001;
        }
        f.set_pose(0.0, [x, 0.0, 0.05]);
        let away = [-0.2, 0.03, 0.0, 0.0, 0.0, 0.0];
        f.set_command(0.0, away);
        let o = f.output(0.0);
        assert_eq!(o.twist, away, "{:?}", o.status);
    }

    #[test]
    fn disabled_filter_passes_the_command_and_far_commands_pass() {
        let mut f = filter();
        f.set_pose(0.0, [0.35, -0.09, 0.05]);
        f.set_command(0.0, [-0.1, 0.0, 0.0, 0.0, 0.0, 0.0]);
        let o = f.output(0.0);
        assert!(!o.status.is_stop());
        f.set_enabled(false);
        f.set_command(0.0, [0.3, 0.2, 0.1, 0.0, 0.0, 0.0]);
        let o = f.output(0.0);
        assert_eq!(
            (o.twist, o.status),
            ([0.3, 0.2, 0.1, 0.0, 0.0, 0.0], Status::PassThrough)
        );
    }

    #[test]
    fn velocity_model_limits_the_command_in_velocity_space() {
        let m = Arc::new(learned("reach_velocity_3d", "reach_velocity_3d.csv", 1));
        let mut f = SafetyFilter::new(FilterConfig::default());
        f.set_model(m.clone()).unwrap();
        // 1.3 action units along x (0.624 m/s) is beyond the true limit of 1 unit (0.48 m/s).
        let k = m.velocity_scale;
        f.set_command(0.0, [1.3 * k, 0.1 * k, 0.0, 0.0, 0.0, 0.4]);
        let o = f.output(0.0);
        assert_eq!(
            o.status,
            Status::Filtering { modulated: true },
            "no pose needed for a velocity constraint"
        );
        let a = [o.twist[0] / k, o.twist[1] / k, o.twist[2] / k];
        let mut s = crate::learn::network::Scratch::default();
        assert!(
            m.network.zeta(&a, &mut s) >= 0.5,
            "{a:?} is learned-feasible"
        );
        assert!(a[0] < 1.1 && a[0] > 0.5, "{a:?}");
        assert_eq!(o.twist[5], 0.4);
        // A demonstrated-like command passes unchanged.
        f.set_command(0.0, [0.6 * k, 0.0, -0.1 * k, 0.0, 0.0, 0.0]);
        assert_eq!(f.output(0.0).status, Status::Filtering { modulated: false });
    }

    #[test]
    fn a_robot_inside_the_learned_obstacle_is_only_let_out_by_the_shortest_way() {
        let m = cylinder();
        let mut f = filter();
        let mut s = crate::learn::network::Scratch::default();
        let inside = [0.54, -0.01, 0.05];
        let mut g = [0.0; 3];
        assert!(m.network.zeta_and_grad(&inside, &mut g, &mut s) < 0.5);
        let gn = (g[0].powi(2) + g[1].powi(2) + g[2].powi(2)).sqrt();
        // Commanded deeper in, at 0.2 m/s: out along zeta's gradient at half that speed.
        f.set_pose(0.0, inside);
        f.set_command(
            0.0,
            [
                0.2 * g[0] / -gn,
                0.2 * g[1] / -gn,
                0.2 * g[2] / -gn,
                0.0,
                0.0,
                0.0,
            ],
        );
        let o = f.output(0.0);
        assert_eq!(o.status, Status::Filtering { modulated: true });
        for (k, gk) in g.iter().enumerate() {
            assert!((o.twist[k] - 0.1 * gk / gn).abs() < 1e-9, "{:?}", o.twist);
        }
        // Commanded out and sideways: only the outward part remains.
        let cmd = [
            0.2 * g[0] / gn - 0.1,
            0.2 * g[1] / gn + 0.1,
            0.2 * g[2] / gn,
            0.0,
            0.0,
            0.0,
        ];
        f.set_command(0.0, cmd);
        let o = f.output(0.0);
        let out: f64 = (0..3).map(|k| cmd[k] * g[k] / gn).sum();
        for (k, gk) in g.iter().enumerate() {
            assert!((o.twist[k] - out * gk / gn).abs() < 1e-9, "{:?}", o.twist);
        }
    }

    #[test]
    fn the_star_hull_of_the_learned_cylinder_has_its_boundary_where_zeta_is_one_half() {
        let m = cylinder();
        let refs = ReferencePoints::of_model_along(&m, &[0.0, 0.0, 1.0]);
        assert_eq!(refs.points.len(), 1, "one learned obstacle");
        let mut s = crate::learn::network::Scratch::default();
        for (x, y) in [(0.42, 0.0), (0.55, 0.12), (0.55, -0.12), (0.68, 0.03)] {
            let p = [x, y, 0.06];
            let st = refs.star(&m, &p, 0.0, &mut s).unwrap();
            assert!(
                (st.reference[2] - 0.06).abs() < 1e-12,
                "level with x: {st:?}"
            );
            let d: Vec<f64> = (0..3)
                .map(|k| (p[k] - st.reference[k]) / (st.ratio * st.radius))
                .collect();
            let at = |t: f64| -> Vec<f64> { (0..3).map(|k| st.reference[k] + t * d[k]).collect() };
            let z = |t: f64, s: &mut crate::learn::network::Scratch| m.network.zeta(&at(t), s);
            assert!(st.ratio > 1.0, "{p:?} is outside: {st:?}");
            assert!(z(st.radius - 1e-3, &mut s) < 0.5 && z(st.radius + 1e-3, &mut s) >= 0.5);
            // The hull covers the learned obstacle: nothing infeasible beyond R along the ray.
            assert!((1..50).all(|i| z(st.radius + 0.004 * i as f64, &mut s) >= 0.5));
            let inward: f64 = (0..3).map(|k| st.normal[k] * d[k]).sum();
            assert!(inward < 0.0, "the normal points into the obstacle: {st:?}");
        }
    }

    #[test]
    fn the_hull_of_the_arc_of_cups_is_continuous_around_the_axis_and_covers_what_was_learned() {
        let m = learned("reach_four_cups_3d", "reach_four_cups_3d_ds.csv", 0);
        let refs = ReferencePoints::of_model_along(&m, &[0.0, 0.0, 1.0]);
        let mut s = crate::learn::network::Scratch::default();
        let c = refs.points[0].clone();
        let around = |a: f64, rho: f64| [c[0] + rho * a.cos(), c[1] + rho * a.sin(), 0.2];
        let mut last: Option<f64> = None;
        for k in 0..=720 {
            let a = k as f64 * std::f64::consts::TAU / 720.0;
            let Some(st) = refs.star(&m, &around(a, 0.3), 0.0, &mut s) else {
                continue;
            };
            // Continuous: no jump between rays half a degree apart.
            if let Some(r) = last {
                assert!(
                    (st.radius - r).abs() < 0.01,
                    "R jumps from {r} to {} at {a}",
                    st.radius
                );
            }
            last = Some(st.radius);
            // It covers the learned obstacle: nothing learned-infeasible beyond R on this ray.
            for i in 1..40 {
                let x = around(a, st.radius + 0.003 * i as f64);
                assert!(
                    m.network.zeta(&x, &mut s) >= 0.5,
                    "{x:?} is beyond R = {}",
                    st.radius
                );
            }
        }
        assert!(last.is_some());
    }

    #[test]
    fn a_robot_starting_in_a_pocket_of_the_hull_goes_round_the_learned_obstacle_to_the_goal() {
        // A generated task (suite seed 100, a tuning seed) whose learned obstacle is concave: its
        // star-shaped hull covers some demonstration starts that lie outside the obstacle. Held on
        // the hull's shells, runs from there stalled against the learned boundary (3 of the 12
        // starts before).
        let suite = crate::task::suite::generate(100, 10).unwrap();
        let t = suite
            .iter()
            .find(|t| t.task.name() == "suite100_3D_03")
            .unwrap();
        let demos = t.demonstrations(100).unwrap();
        let (cfg, _) = LearnConfig::for_task_data(&t.task, &demos, None, None).unwrap();
        let l = learn(&t.task, &demos, &cfg, 0, &mut |_| true).unwrap();
        let model = Arc::new(ConstraintModel::from_learned(&t.task, &demos, &cfg, 0, &l));
        let refs = ReferencePoints::of_model_along(&model, &[0.0, 0.0, 1.0]);
        let mut s = crate::learn::network::Scratch::default();
        let starts = t.task.spec.starts.clone();
        let margin = model.dsm.safety_margin;
        let in_pocket = starts
            .iter()
            .filter(|x| {
                model.network.zeta(x, &mut s) >= 0.5
                    && refs
                        .star(&model, x, margin, &mut s)
                        .is_some_and(|st| st.margin_ratio(margin) < INSIDE_HULL)
            })
            .count();
        assert!(in_pocket > 0, "no start lies in a pocket of the hull");
        let e = crate::report::evaluate::evaluate_filtered(
            &t.task,
            model,
            FilterConfig::node_defaults(),
            &starts,
            starts.len(),
            0,
            crate::report::evaluate::NOMINAL_SPEED,
        )
        .unwrap();
        assert_eq!(e.goal_reached, 1.0, "{in_pocket} starts in a pocket");
        assert_eq!(e.unsafe_rate, 0.0);
    }

    #[test]
    fn a_filtered_run_slower_than_the_tasks_policy_gets_the_tasks_time_stretched_by_the_speed_ratio()
     {
        // The cylinder task gives its policy 400 steps (6.7 s) at up to 0.48 m/s; at 0.05 m/s the
        // 0.3-0.4 m from its starts take longer than that, and every run timed out before.
        let t = Task::load("reach_obstacle_3d").unwrap();
        let starts = t.spec.starts.clone();
        let e = crate::report::evaluate::evaluate_filtered(
            &t,
            cylinder(),
            FilterConfig::node_defaults(),
            &starts,
            starts.len(),
            0,
            0.05,
        )
        .unwrap();
        assert_eq!(e.goal_reached, 1.0);
        assert_eq!(e.unsafe_rate, 0.0);
    }

    #[test]
    fn a_goal_inside_or_within_the_margin_of_the_learned_obstacle_is_reported_unreachable() {
        let m = cylinder();
        let margin = m.dsm.safety_margin;
        assert!(margin > 0.0);
        // The learned boundary along +y from the cylinder's axis, at z = 0.06.
        let at = |y: f64| [0.55, y, 0.06];
        let hi = learned_side_face(&m, 1.0);
        for hulls in [true, false] {
            let mut f = SafetyFilter::new(FilterConfig {
                auto_reference: hulls,
                ..FilterConfig::default()
            });
            assert_eq!(f.unreachable(at(0.0)), None, "no model, nothing to say");
            f.set_model(m.clone()).unwrap();
            let inside = f.unreachable(at(0.0)).expect("the axis is inside");
            assert!(inside.contains("inside the learned obstacle"), "{inside}");
            let near = f
                .unreachable(at(hi + 0.4 * margin))
                .expect("within the margin");
            assert!(near.contains("margin"), "{near}");
            // The task's goal and a point well beyond the margin are reachable.
            assert_eq!(f.unreachable([0.68, 0.0, 0.04]), None, "hulls {hulls}");
            assert_eq!(f.unreachable(at(hi + 3.0 * margin)), None, "hulls {hulls}");
            assert_eq!(f.unreachable([f64::NAN, 0.0, 0.0]), None);
        }
    }

    #[test]
    fn a_goal_within_the_margin_of_the_learned_obstacle_is_reachable_and_reached_without_being_held()
     {
        // The demonstrations end at the goal, so a goal the learned obstacle comes within the
        // margin of is one the robot is asked to reach: with the whole margin kept up to the goal,
        // runs stopped a few millimetres outside its tolerance, held back.
        let mut m = (*cylinder()).clone();
        let margin = m.dsm.safety_margin;
        // Within the margin of the learned boundary along +y (or -y) from the cylinder's axis.
        let within = |sign: f64| {
            [
                0.55,
                sign * (learned_side_face(&m, sign) + 0.4 * margin),
                0.06,
            ]
        };
        let (goal, far) = (within(1.0), within(-1.0));
        m.goal = Some(crate::deploy::model::ModelGoal {
            position: goal.to_vec(),
            tolerance: 0.01,
        });
        let m = Arc::new(m);
        for hulls in [true, false] {
            let mut f = SafetyFilter::new(FilterConfig {
                auto_reference: hulls,
                ..FilterConfig::default()
            });
            f.set_model(m.clone()).unwrap();
            assert_eq!(f.unreachable(goal), None, "hulls {hulls}");
            let start = [0.40, (goal[1] + 0.03).min(0.11), 0.06];
            let (statuses, end) = drive(&mut f, start, goal, 4.0);
            assert!(
                crate::geometry::distance(&end, &goal) < 0.01,
                "hulls {hulls}: ended at {end:?}, goal {goal:?}, last {:?}",
                statuses.last()
            );
            assert!(
                !statuses.iter().any(|s| matches!(s, Status::Held { .. })),
                "hulls {hulls}"
            );
        }
        // Away from the goal the margin is whole: a point as deep in it on the far side.
        let mut f = SafetyFilter::new(FilterConfig::default());
        f.set_model(m.clone()).unwrap();
        assert!(f.unreachable(far).is_some(), "{far:?}");
    }

    #[test]
    fn a_model_of_other_than_two_or_three_inputs_is_refused_naming_its_count() {
        for inputs in [1, 4] {
            let mut m = (*cylinder()).clone();
            m.features.resize(inputs, m.features[0].clone());
            m.network = crate::learn::network::Mlp::new(inputs, &[4], 0);
            let e = SafetyFilter::new(FilterConfig::default())
                .set_model(Arc::new(m))
                .unwrap_err();
            assert!(
                e.contains("2-D or 3-D") && e.contains(&format!("{inputs} inputs")),
                "{e}"
            );
        }
    }

    /// The ellipses' model (`point_ellipse_2d`, inputs `[x, y]`), learned once.
    fn ellipses() -> Arc<ConstraintModel> {
        static M: OnceLock<Arc<ConstraintModel>> = OnceLock::new();
        M.get_or_init(|| Arc::new(learned("point_ellipse_2d", "point_ellipse_2d.csv", 0)))
            .clone()
    }

    #[test]
    fn a_planar_model_filters_the_twist_in_its_plane_and_passes_the_other_axis() {
        // Straight at the learned circle (centre (0.72, 0.55), radius 0.25) from below, with a z
        // velocity the plane knows nothing of, from any height.
        let m = ellipses();
        let mut f = SafetyFilter::new(FilterConfig::node_defaults());
        f.set_model(m.clone()).unwrap();
        assert_eq!(f.axes(), &[0, 1]);
        let task = Task::load("point_ellipse_2d").unwrap();
        let dt = task.spec.dynamics.dt;
        let mut sim = crate::task::sim::LiveSim::new(task);
        sim.reset(&[0.72, 0.0]).unwrap();
        let mut s = crate::learn::network::Scratch::default();
        let mut modulated = 0;
        for k in 0..150 {
            let (t, p) = (k as f64 * dt, sim.position());
            let height = [0.0, 3.0, -1.0][k % 3];
            f.set_pose(t, [p[0], p[1], height]);
            f.set_command(t, [0.0, 0.5, 0.2, 0.0, 0.0, 0.1]);
            let o = f.output(t);
            assert!(!o.status.is_stop(), "{:?}", o.status);
            assert_eq!(
                (o.twist[2], o.twist[5]),
                (0.2, 0.1),
                "z and the angular pass"
            );
            modulated += usize::from(o.twist[..2] != [0.0, 0.5]);
            sim.step_velocity(&o.twist[..2]);
            let p = sim.position();
            assert!(m.network.zeta(&p, &mut s) >= m.threshold, "{p:?} entered");
        }
        // The learned circle was in the way: the run was turned, and went round or stopped below it.
        assert!(modulated > 10, "{modulated}");
        let p = sim.position();
        assert!(p[1] < 0.3 || (p[0] - 0.72).abs() > 0.2, "{p:?}");
    }

    #[test]
    fn a_plane_named_z_and_x_reads_the_pose_and_the_reference_point_on_those_axes() {
        // The ellipses' model with its inputs named z and x (a wall's plane): the pose's z and x are
        // its inputs, the twist's y passes, and the node's reference point, a pose's (x, y, z),
        // is read on the same axes as the model's own reference point in input order.
        let mut m = (*ellipses()).clone();
        m.features[0].name = "z".into();
        m.features[1].name = "x".into();
        let twist = |config_reference: Option<Vec<f64>>, model_reference: Option<Vec<f64>>| {
            let mut m = m.clone();
            m.dsm.reference_point = model_reference;
            let mut f = SafetyFilter::new(FilterConfig {
                reference_point: config_reference,
                ..FilterConfig::node_defaults()
            });
            f.set_model(Arc::new(m)).unwrap();
            assert_eq!(f.axes(), &[2, 0]);
            // The ellipses' (0.72, 0.26), below the learned circle, heading into it.
            f.set_pose(0.0, [0.26, 4.0, 0.72]);
            f.set_command(0.0, [0.5, 0.2, 0.0, 0.0, 0.0, 0.0]);
            let o = f.output(0.0);
            assert!(
                matches!(o.status, Status::Filtering { modulated: true }),
                "{o:?}"
            );
            assert_eq!(o.twist[1], 0.2, "the plane's other axis passes");
            o.twist
        };
        let by_node = twist(Some(vec![0.45, 9.0, 0.62]), None);
        let by_model = twist(None, Some(vec![0.62, 0.45]));
        assert_eq!(by_node, by_model);
        assert!(by_node[0] < 0.5, "{by_node:?}");
    }

    #[test]
    fn extreme_finite_poses_and_commands_give_a_finite_twist() {
        let mut f = filter();
        for (pose, cmd) in [
            ([1e308, -1e308, 1e308], [0.1, 0.0, 0.0, 0.0, 0.0, 0.0]),
            ([0.5, 0.0, 0.05], [1e308, -1e308, 1e308, 1e308, 0.0, 0.0]),
            ([-1e300, 1e300, 0.05], [-1e300, 1e-300, 0.0, 0.0, 0.0, 0.0]),
        ] {
            f.set_pose(0.0, pose);
            f.set_command(0.0, cmd);
            let o = f.output(0.0);
            assert!(
                o.twist.iter().all(|v| v.is_finite()),
                "{pose:?} {cmd:?}: {:?} ({:?})",
                o.twist,
                o.status
            );
        }
    }
}
