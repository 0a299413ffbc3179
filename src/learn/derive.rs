//! Settings from the data, for a task that has no settings file of its own: the values a user would
//! otherwise tune, derived from the task and its demonstrations, each with the rule that gave it.
//!
//! - `dsm.speed` (position constraints): the fastest speed the action limit allows in every
//!   direction, so that the proposals can beat the demonstrations' returns.
//! - `dsm.gain` (position constraints): the reference's DS (`dsm.speed`, then from
//!   `dsm.normalize_above` slowing in proportion), but slowing no farther out than 2.5 goal
//!   tolerances, as the reference's does (2.5 cm) with its cylinder task's 1 cm goal: a task with a
//!   finer goal than that (a workspace of a few centimetres) would otherwise crawl from far off.
//! - `dsm.gain`, `dsm.normalize_above` (velocity constraints): a DS that saturates the action box
//!   until three goal tolerances from the goal (the time-optimal command).
//! - `identify.d_r`: half the median, over the first proposals that pass the policy filter, of the
//!   largest distance of a proposal's state to the demonstrations, and at most a twentieth of the
//!   demonstrations' extent (the diagonal of their bounding box in feature space). A proposal that
//!   beats its demonstration cuts the corner the constraint made the demonstration go around; its
//!   deepest state measures how far the demonstrations had to go around. Where the proposals are
//!   bounded by the action box rather than by an obstacle (a velocity limit), that depth says little
//!   and the extent bounds d_r. Both are in the task's own units, so the rule carries across scales
//!   and dimensions.
//!   A proposal counts only if it left the demonstrations (got farther from them than half their
//!   median step): where nothing blocks the straight way from a start, the expert's demonstration
//!   is that way, and the proposal retraces it and ties its return.
//! - `suffix_starts` (DSM, position constraints in three or more dimensions): proposals also from
//!   4 states along every demonstration. A proposal from a start goes round an obstacle on the side
//!   it faces; in the plane that is one of two sides, in space one way out of a circle of them, so
//!   the sides only the middle of a demonstration passes stay unprobed and unlabelled, and a
//!   controller that goes there later (constraint transfer) finds the learned obstacle short. Off in
//!   the plane: there it thinned the learned ellipses (docs/DESIGN.md). `both_ways` stays off in
//!   space: on top of it, its second proposals reach the goal from sides curving (DS) demonstrations
//!   never used and label the goal's surroundings; through the filter the renamed four cups were
//!   then less safe and reached the goal less often (docs/RESULTS.md).
//! - `both_ways` with `both_ways_lean` 0.5 (DSM, position constraints in the plane): a second
//!   proposal from every start that went round something, the other way round, leaning 27 degrees.
//!   In the plane an obstacle has two sides; a start's proposals go round the one the modulation
//!   picks, and where its demonstration passed the other, the part of the obstacle between the
//!   straight way and the demonstration was never labelled (the ellipses' upper-left third, which a
//!   filtered controller heading for the goal then crossed). At the default 45 degrees the second
//!   proposal's way round was longer than the demonstration's, so none counted.
//! - `identify.expansion` (position constraints in the plane): the paper's eq. 3, each proposal's
//!   state nearest to R joins R. d_r (a twentieth of the extent, or half the proposals' depth) is
//!   often wider than the clearance demonstrations keep, and nothing within d_r of them is
//!   labelled: the learned obstacle fell short at corners they rounded closely (a box's corner
//!   passed 5 cm off with d_r 9 cm; the ellipses' upper-left), and runs cut through there. Off in
//!   space: on the suite's 3-D class it moved the worst tasks' unsafe rates both ways and lowered
//!   their goal rates (docs/RESULTS.md, "Expansion derived in the plane"). Off for velocity
//!   constraints: on the suite's velocity class it moved IoU by at most 0.011 in the median, both
//!   ways (docs/RESULTS.md, "Expansion for velocity constraints").
//! - `dsm.safety_margin`: half of d_r for position constraints. Reliable infeasible states lie at
//!   least d_r from the demonstrations, so the learned boundary is undetermined over about d_r minus
//!   the clearance the demonstrations kept; with no way to see that clearance, half of d_r is kept.
//!   All of d_r for velocity constraints: demonstrated commands ride the limit (no clearance), and
//!   the margin is checked around the command along every axis.
use crate::demos::DemoSet;
use crate::error::{Error, Result};
use crate::learn::config::LearnConfig;
use crate::learn::identify::{Metric, knn_scores};
use crate::learn::{completed_dsm, demonstrated_points, feature_points, learning_task};
use crate::policy::modulation::{DsmPolicy, PolicySpace};
use crate::task::sim::{Simulator, Trajectory, replay_return};
use crate::task::{ActionLimit, Task};
use serde_yaml_ng::{Mapping, Value};

/// One derived setting.
#[derive(Debug, Clone, PartialEq)]
pub struct Derived {
    /// The setting's key, as in a learn config file (`identify.d_r`, or `suffix_starts` at the top).
    pub key: &'static str,
    pub value: Setting,
    /// How it was derived, with the measured quantities.
    pub rule: String,
}

/// A derived setting's value, of the type its key takes in a learn config file.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Setting {
    Number(f64),
    Count(usize),
    Flag(bool),
}

impl Setting {
    fn yaml(self) -> Value {
        match self {
            Setting::Number(v) => Value::from(v),
            Setting::Count(n) => Value::from(n as u64),
            Setting::Flag(b) => Value::from(b),
        }
    }
}

impl std::fmt::Display for Setting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Setting::Number(v) => write!(f, "{v:.4}"),
            Setting::Count(n) => write!(f, "{n}"),
            Setting::Flag(b) => write!(f, "{b}"),
        }
    }
}

/// Proposals from this many states along each demonstration where `suffix_starts` is derived.
const SUFFIX_STARTS_IN_SPACE: usize = 4;

/// How far the other way round leans where `both_ways` is derived (the plane): 27 degrees. At 45
/// degrees the second proposal's way round was longer than the demonstration's, so none counted
/// (chosen on suite seeds 100 and 101 against 0.3; docs/RESULTS.md, "The other way round in the
/// plane").
const BOTH_WAYS_LEAN_IN_THE_PLANE: f64 = 0.5;

/// Derive the settings for `task` from `demos`, starting from `base` (the defaults). Returns the
/// values and a config layer holding them.
pub fn derive(task: &Task, demos: &DemoSet, base: &LearnConfig) -> Result<(Vec<Derived>, Value)> {
    let mut out = Vec::new();
    let mut dsm = base.dsm.clone();
    let space = PolicySpace::of(task).map_err(Error::Invalid)?;
    let top = task.top_action_speed();
    // The nominal DS reads positions in metres (DsmConfig::gain).
    let metres = task.metres_per_position_unit().unwrap_or(1.0);
    match space {
        PolicySpace::Position => {
            dsm.speed = top;
            out.push(Derived {
                key: "dsm.speed",
                value: Setting::Number(top),
                rule: "the fastest speed the action limit allows in every direction".into(),
            });
            // The reference's DS runs at dsm.speed until it would be slower than
            // `normalize_above` (0.05 action units), then slows in proportion: with its gain of 2
            // per metre, 2.5 cm from the goal, 2.5 tolerances of its cylinder task. In a 6 cm
            // workspace with a 1 mm goal that crawled from before the obstacle on (80 s to the
            // goal), and the proposals never got round it. So the slowing starts no farther out
            // than 2.5 goal tolerances; larger tasks keep the reference's DS (the goal is reached
            // before it slows).
            let slow_within = SLOW_WITHIN_TOLERANCES * task.spec.goal.tolerance;
            if let Some(crawl) = dsm.normalize_above.filter(|c| *c > 0.0) {
                let sized = crawl / (slow_within * metres);
                let rule = if sized > dsm.gain {
                    format!(
                        "the nominal DS slows from dsm.speed to dsm.normalize_above ({crawl}) \
                         {slow_within:.4} from the goal: {SLOW_WITHIN_TOLERANCES} goal tolerances, \
                         nearer than the reference's gain ({}) slows ({:.4})",
                        dsm.gain,
                        crawl / (dsm.gain * metres)
                    )
                } else {
                    format!(
                        "the reference's: the nominal DS slows {:.4} from the goal, within \
                         {SLOW_WITHIN_TOLERANCES} goal tolerances ({slow_within:.4})",
                        crawl / (dsm.gain * metres)
                    )
                };
                dsm.gain = dsm.gain.max(sized);
                out.push(Derived {
                    key: "dsm.gain",
                    value: Setting::Number(dsm.gain),
                    rule,
                });
            }
        }
        PolicySpace::Velocity => {
            let widest = match &task.action_limit {
                ActionLimit::Norm(c) => *c,
                ActionLimit::Box(b) => b.iter().cloned().fold(0.0, f64::max),
            };
            dsm.gain = widest / (SATURATE_UNTIL_TOLERANCES * task.spec.goal.tolerance * metres);
            dsm.normalize_above = None;
            out.push(Derived {
                key: "dsm.gain",
                value: Setting::Number(dsm.gain),
                rule: format!(
                    "saturates the action box ({widest}) until 3 goal tolerances ({} m) from the goal",
                    task.spec.goal.tolerance * metres
                ),
            });
        }
    }
    let mut probe = base.clone();
    probe.dsm = dsm.clone();
    let extent = demo_extent(task, demos);
    let cap = EXTENT_FRACTION * extent;
    let (d_r, rule) = match d_r_from_proposals(task, demos, &probe, extent)? {
        Some((d, rule)) if d <= cap => (d, rule),
        Some((d, _)) => (
            cap,
            format!(
                "a twentieth of the demonstrations' extent ({extent:.4}), below half the proposals' median depth ({d:.4})"
            ),
        ),
        None => (
            cap,
            format!(
                "a twentieth of the demonstrations' extent ({extent:.4}): no proposal left the demonstrations"
            ),
        ),
    };
    out.push(Derived {
        key: "identify.d_r",
        value: Setting::Number(d_r),
        rule,
    });
    let (margin, rule) = match space {
        PolicySpace::Position => (
            0.5 * d_r,
            "half of d_r (the demonstrations' clearance cannot be seen)",
        ),
        PolicySpace::Velocity => (
            d_r,
            "d_r (commands ride the limit: the demonstrations keep no clearance from it)",
        ),
    };
    out.push(Derived {
        key: "dsm.safety_margin",
        value: Setting::Number(margin),
        rule: rule.into(),
    });
    let dsm_proposals = base.policy == crate::learn::PolicyKind::Dsm;
    if dsm_proposals && space == PolicySpace::Position && task.feature_dim() == 2 {
        let rule = "2 dimensions: a second proposal from every start that went round something, \
                    the other way round (in the plane there are two ways round, and the start's \
                    proposals probe one: the other side, which the demonstrations may have passed, \
                    was never labelled)";
        out.push(Derived {
            key: "both_ways",
            value: Setting::Flag(true),
            rule: rule.into(),
        });
        out.push(Derived {
            key: "both_ways_lean",
            value: Setting::Number(BOTH_WAYS_LEAN_IN_THE_PLANE),
            rule: "leaning 27 degrees to the other side: at 45 its way round was longer than the \
                   demonstrations', so it never counted"
                .into(),
        });
    }
    if space == PolicySpace::Position && task.feature_dim() == 2 {
        out.push(Derived {
            key: "identify.expansion",
            value: Setting::Flag(true),
            rule: "2 dimensions: each proposal's state nearest to R joins R (the paper's eq. 3, \
                   for demonstrations that pass an obstacle closer than d_r: nothing within d_r of \
                   them is labelled, and the learned obstacle fell short at the corners they \
                   rounded)"
                .into(),
        });
    }
    if dsm_proposals && space == PolicySpace::Position && task.feature_dim() >= 3 {
        out.push(Derived {
            key: "suffix_starts",
            value: Setting::Count(SUFFIX_STARTS_IN_SPACE),
            rule: format!(
                "{} dimensions: proposals also from states along every demonstration (in space a \
                 start's proposal probes one way round an obstacle out of a circle of them)",
                task.feature_dim()
            ),
        });
    }
    let layer = layer(&out, space);
    Ok((out, layer))
}

/// The nominal DS of a position constraint slows down no farther out than this many goal tolerances
/// from the goal: the reference's 2.5 cm with its cylinder task's 1 cm.
const SLOW_WITHIN_TOLERANCES: f64 = 2.5;

/// A velocity constraint's nominal DS saturates the action box until this many goal tolerances from
/// the goal.
const SATURATE_UNTIL_TOLERANCES: f64 = 3.0;

/// d_r is at most this fraction of the demonstrations' extent.
const EXTENT_FRACTION: f64 = 0.05;

/// The diagonal of the demonstrations' bounding box in feature space.
fn demo_extent(task: &Task, demos: &DemoSet) -> f64 {
    let d = task.feature_dim();
    let pts = demos.feature_points(task);
    (0..d)
        .map(|k| {
            let (lo, hi) = pts
                .iter()
                .skip(k)
                .step_by(d)
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), v| {
                    (l.min(*v), h.max(*v))
                });
            (hi - lo).max(0.0).powi(2)
        })
        .sum::<f64>()
        .sqrt()
}

/// Half the median deepest distance of the first filtered proposals from the demonstrations.
fn d_r_from_proposals(
    task: &Task,
    demos: &DemoSet,
    cfg: &LearnConfig,
    extent: f64,
) -> Result<Option<(f64, String)>> {
    let task = &learning_task(task, demos, cfg)?;
    let demo_points = demonstrated_points(task, demos, cfg);
    let dsm = completed_dsm(task, demos, cfg);
    let resolution = demo_resolution(task, demos, cfg.identify.metric, extent);
    let mut sim = Simulator::new(task);
    let mut traj = Trajectory::with_capacity(task);
    let (mut kept, mut all) = (Vec::new(), Vec::new());
    for (demo, start) in demos.demos.iter().zip(demos.start_states()) {
        let demo_return = replay_return(&mut sim, &demo.states, &demo.actions);
        let mut policy = DsmPolicy::new(task, None, &dsm).map_err(Error::Invalid)?;
        sim.rollout(&start, &mut policy, &mut traj);
        let p = feature_points(task, &traj);
        if p.is_empty() {
            continue;
        }
        let deepest = knn_scores(&demo_points, &p, 1, cfg.identify.metric)?
            .into_iter()
            .fold(0.0, f64::max);
        // A proposal that never got farther from the demonstrations than their sampling resolves
        // cut no corner: where nothing blocks the straight way, the expert's demonstration is that way,
        // and the proposal retraces it (it may even "beat" it by rounding). Its depth says nothing
        // of how far the constraint made the demonstrations go around.
        if deepest <= resolution {
            continue;
        }
        all.push(deepest);
        if cfg.policy_filter.beats(traj.episode_return, demo_return) {
            kept.push(deepest);
        }
    }
    let (which, mut v) = if kept.is_empty() {
        (
            "all proposals that left them (none beat its demonstration)",
            all,
        )
    } else {
        (
            "the proposals that beat their demonstrations and left them",
            kept,
        )
    };
    if v.is_empty() {
        return Ok(None);
    }
    v.sort_by(f64::total_cmp);
    let median = v[v.len() / 2];
    Ok(Some((
        0.5 * median,
        format!(
            "half the median deepest distance from the demonstrations ({median:.4}) of {which} \
             (farther than half their median step, {resolution:.4}), {} of {}",
            v.len(),
            demos.len()
        ),
    )))
}

/// How far a state on a demonstration's path can be from its nearest demonstrated state: half the
/// median distance (in `metric`, as depths are measured) between consecutive demonstrated feature
/// points, and at least a billionth of the demonstrations' `extent` (saturated commands repeat
/// exactly; a proposal on top of a demonstration is farther from it only by rounding).
fn demo_resolution(task: &Task, demos: &DemoSet, metric: Metric, extent: f64) -> f64 {
    let dim = task.feature_dim();
    let mut steps = Vec::new();
    for pts in demos.feature_points_per_demo(task) {
        steps.extend(
            pts.chunks_exact(dim)
                .zip(pts.chunks_exact(dim).skip(1))
                .map(|(a, b)| metric.distance(a, b)),
        );
    }
    let floor = 1e-9 * extent;
    if steps.is_empty() {
        return floor;
    }
    steps.sort_by(f64::total_cmp);
    (0.5 * steps[steps.len() / 2]).max(floor)
}

/// The derived values as a learn config layer.
fn layer(derived: &[Derived], space: PolicySpace) -> Value {
    let mut root = Mapping::new();
    for d in derived {
        let Some((section, key)) = d.key.split_once('.') else {
            root.insert(Value::from(d.key), d.value.yaml());
            continue;
        };
        let entry = root
            .entry(Value::from(section))
            .or_insert_with(|| Value::Mapping(Mapping::new()));
        if let Value::Mapping(m) = entry {
            m.insert(Value::from(key), d.value.yaml());
        }
    }
    if space == PolicySpace::Velocity
        && let Some(Value::Mapping(m)) = root.get_mut(Value::from("dsm"))
    {
        m.insert(Value::from("normalize_above"), Value::Null);
    }
    Value::Mapping(root)
}

impl LearnConfig {
    /// The settings for learning `task` from `demos`: the task's built-in files if it has them, else
    /// the defaults with the settings derived from the data ([`derive`]); the user's file (any
    /// subset) on top. Returns the derived values (empty with built-in files), to be shown.
    pub fn for_task_data(
        task: &Task,
        demos: &DemoSet,
        policy: Option<crate::learn::PolicyKind>,
        user: Option<&std::path::Path>,
    ) -> Result<(LearnConfig, Vec<Derived>)> {
        if LearnConfig::has_builtin_settings(task.name()) {
            return Ok((Self::for_task_policy(task.name(), policy, user)?, vec![]));
        }
        let base = Self::layered(task.name(), policy, None, None)?;
        let (derived, layer) = derive(task, demos, &base)?;
        let cfg = Self::layered(task.name(), policy, Some(layer), user)?;
        Ok((cfg, derived))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn renamed(name: &str, new: &str) -> Task {
        let mut t = Task::load(name).unwrap();
        t.spec.name = new.into();
        t
    }

    /// The settings for `task` with a user's `--config` file holding `yaml`.
    fn with_user_file(task: &Task, demos: &DemoSet, yaml: &str) -> (LearnConfig, Vec<Derived>) {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("learn.yaml");
        std::fs::write(&p, yaml).unwrap();
        LearnConfig::for_task_data(task, demos, None, Some(&p)).unwrap()
    }

    /// A built-in task under a new name (no settings file applies) with its reference
    /// demonstrations `data/demos/<csv>`.
    fn users_task(name: &str, csv: &str) -> (Task, DemoSet) {
        let task = renamed(name, &format!("my_{name}"));
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let demos = DemoSet::load(&root.join("data/demos").join(csv), &task).unwrap();
        (task, demos)
    }

    #[test]
    fn a_renamed_cylinder_task_derives_the_d_r_scale_of_its_obstacle() {
        let (task, demos) = users_task("reach_obstacle_3d", "reach_obstacle_3d_ds.csv");
        let (cfg, derived) = LearnConfig::for_task_data(&task, &demos, None, None).unwrap();
        let d_r = cfg.identify.d_r.unwrap();
        // The cylinder has radius 4 cm and the demonstrations pass about 1 cm from it: the straight
        // proposals reach about 5 cm deep, so d_r is a few centimetres (the tuned file has 2.5 cm).
        assert!((0.01..0.05).contains(&d_r), "{derived:?}");
        assert_eq!(cfg.dsm.safety_margin, 0.5 * d_r);
        assert_eq!(cfg.dsm.speed, 1.0);
        assert!(derived.iter().any(|d| d.key == "identify.d_r"));
        // A built-in name keeps its own file and derives nothing.
        let task = Task::load("reach_obstacle_3d").unwrap();
        let (cfg, derived) = LearnConfig::for_task_data(&task, &demos, None, None).unwrap();
        assert!(derived.is_empty());
        assert_eq!(cfg.identify.d_r, Some(0.025));
    }

    #[test]
    fn proposals_along_the_demonstrations_are_derived_in_space_only_and_the_expansion_in_the_plane()
    {
        let learn_config = |name: &str, demos: &str| {
            let (task, demos) = users_task(name, demos);
            LearnConfig::for_task_data(&task, &demos, None, None).unwrap()
        };
        // 3-D positions: proposals along the demonstrations, and said so; not the other way round.
        let (cfg, derived) = learn_config("reach_four_cups_3d", "reach_four_cups_3d_ds.csv");
        assert_eq!((cfg.suffix_starts, cfg.both_ways), (4, false));
        let said = |key: &str| derived.iter().find(|d| d.key == key).map(|d| d.value);
        assert_eq!(said("suffix_starts"), Some(Setting::Count(4)));
        assert_eq!(said("both_ways"), None);
        // The plane: the other way round instead, leaning 27 degrees, and said so.
        let (cfg, derived) = learn_config("point_ellipse_2d", "point_ellipse_2d.csv");
        assert_eq!(
            (cfg.suffix_starts, cfg.both_ways, cfg.both_ways_lean),
            (0, true, 0.5)
        );
        let said = |key: &str| derived.iter().find(|d| d.key == key).map(|d| d.value);
        assert_eq!(said("both_ways"), Some(Setting::Flag(true)));
        assert_eq!(said("suffix_starts"), None);
        // ... and the expansion step, there only.
        assert!(cfg.identify.expansion);
        assert_eq!(said("identify.expansion"), Some(Setting::Flag(true)));
        let (cfg, _) = learn_config("reach_four_cups_3d", "reach_four_cups_3d_ds.csv");
        assert!(!cfg.identify.expansion);
        // A velocity constraint keeps the defaults (off), and derives nothing of them.
        let (cfg, derived) = learn_config("reach_velocity_3d", "reach_velocity_3d.csv");
        assert_eq!(
            (cfg.suffix_starts, cfg.both_ways, cfg.identify.expansion),
            (0, false, false)
        );
        assert!(
            derived
                .iter()
                .all(|d| d.key != "suffix_starts" && d.key != "both_ways"),
            "{derived:?}"
        );
        // CRL proposes no DSM rollouts: nothing derived for it either.
        let (task, demos) = users_task("reach_four_cups_3d", "reach_four_cups_3d_ds.csv");
        let (_, derived) =
            LearnConfig::for_task_data(&task, &demos, Some(crate::learn::PolicyKind::Crl), None)
                .unwrap();
        assert!(
            derived.iter().all(|d| d.key != "suffix_starts"),
            "{derived:?}"
        );
    }

    #[test]
    fn the_nominal_ds_slows_no_farther_from_the_goal_than_two_and_a_half_tolerances() {
        let (mut task, demos) = users_task("reach_obstacle_3d", "reach_obstacle_3d_ds.csv");
        // Where it slows: speed normalize_above at gain times the distance in metres.
        let slows = |cfg: &LearnConfig| cfg.dsm.normalize_above.unwrap() / cfg.dsm.gain;
        // The reference's cylinder task: 2.5 cm, its gain of 2, for a 1 cm goal.
        let (cfg, _) = LearnConfig::for_task_data(&task, &demos, None, None).unwrap();
        assert_eq!(cfg.dsm.gain, 2.0);
        // A 1 mm goal: 2.5 mm, not 25 tolerances out.
        task.spec.goal.tolerance = 0.001;
        let (cfg, derived) = LearnConfig::for_task_data(&task, &demos, None, None).unwrap();
        assert!((slows(&cfg) - 0.0025).abs() < 1e-12, "{derived:?}");
        assert!(derived.iter().any(|d| d.key == "dsm.gain"), "{derived:?}");
        // A coarser goal keeps the reference's DS: it reaches the goal before it slows.
        task.spec.goal.tolerance = 0.05;
        let (cfg, _) = LearnConfig::for_task_data(&task, &demos, None, None).unwrap();
        assert_eq!(cfg.dsm.gain, 2.0);
    }

    #[test]
    fn a_user_file_turns_the_derived_proposals_along_the_demonstrations_off() {
        let (task, demos) = users_task("reach_obstacle_3d", "reach_obstacle_3d_ds.csv");
        let (cfg, _) = with_user_file(&task, &demos, "suffix_starts: 0\n");
        assert_eq!(cfg.suffix_starts, 0);
    }

    #[test]
    fn the_demonstrations_resolution_is_measured_in_the_metric_depths_are_measured_in() {
        let (task, demos) = users_task("point_ellipse_2d", "point_ellipse_2d.csv");
        let extent = demo_extent(&task, &demos);
        let [c, e, m] = [Metric::Chebyshev, Metric::Euclidean, Metric::Manhattan]
            .map(|metric| demo_resolution(&task, &demos, metric, extent));
        // The demonstrations move diagonally: a step is shorter by the largest coordinate than
        // in a straight line, and longer by the sum of the coordinates.
        assert!(1e-9 * extent < c && c < e && e < m, "{c} {e} {m}");
    }

    #[test]
    fn the_user_file_overrides_a_derived_setting() {
        let (task, demos) = users_task("point_ellipse_2d", "point_ellipse_2d.csv");
        let (cfg, derived) = with_user_file(&task, &demos, "identify: {d_r: 0.2}\n");
        assert_eq!(cfg.identify.d_r, Some(0.2));
        // The 2-D task's norm limit of 2 sets the proposals' speed.
        assert_eq!(cfg.dsm.speed, 2.0);
        assert!(
            derived
                .iter()
                .any(|d| d.key == "dsm.speed" && d.value == Setting::Number(2.0))
        );
    }

    #[test]
    fn proposals_that_retrace_their_demonstrations_do_not_set_d_r() {
        // Generated task suite4_2D_04: the straight way from two of its four starts passes the box,
        // so the expert's demonstrations from there are that way and the proposals retrace them,
        // tying their returns up to rounding. Counted, they made d_r 3e-15: every proposal state
        // was labelled infeasible, the demonstration starts with them, and 40 % of the runs stalled.
        // The first five tasks of each class are those of the 10-per-class suite.
        let suite = crate::task::suite::generate(4, 5).unwrap();
        let t = suite
            .iter()
            .find(|t| t.task.name() == "suite4_2D_04")
            .unwrap();
        let demos = t.demonstrations(4).unwrap();
        let base = LearnConfig::layered(t.task.name(), None, None, None).unwrap();
        let (derived, _) = derive(&t.task, &demos, &base).unwrap();
        let d_r = derived.iter().find(|d| d.key == "identify.d_r").unwrap();
        // The box is about 0.2 m across; the demonstrations span about 1.9 m.
        assert!(
            matches!(d_r.value, Setting::Number(v) if (0.03..=0.1).contains(&v)),
            "{d_r:?}"
        );
    }
}
