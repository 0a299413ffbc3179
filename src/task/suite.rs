//! A generated suite of tasks nobody tuned for: the check that learning carries beyond the paper's
//! tasks. From a seed it makes 2-D and 3-D position tasks with 1-3 obstacles of every primitive
//! (ellipsoid, cylinder, box, rotated or not) placed so that the straight line from most starts to the
//! goal is blocked, and velocity tasks with random per-axis and norm limits. Each task keeps the
//! dynamics and reward of a built-in task of its class (position tasks also its goal and workspace;
//! velocity tasks get starts all round their goal) and is checked to be solvable by the expert; the
//! evaluation grid covers the obstacles (position) or the whole action box (velocity).
use crate::demos::DemoSet;
use crate::error::{Error, Result};
use crate::task::expert::{ExpertOptions, generate as expert_demos};
use crate::task::shape::PrimitiveSpec;
use crate::task::spec::{BoundsSpec, GridAxisSpec, TaskSpec};
use crate::task::{BUILTIN, Task};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

/// What a suite task constrains.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum TaskClass {
    /// Positions in the plane (the template: `point_ellipse_2d`).
    #[serde(rename = "2-D")]
    Planar,
    /// End-effector positions (the template: `reach_obstacle_3d`).
    #[serde(rename = "3-D")]
    Spatial,
    /// Velocity commands (the template: `reach_velocity_3d`).
    #[serde(rename = "velocity")]
    Velocity,
}

impl TaskClass {
    pub const ALL: [TaskClass; 3] = [TaskClass::Planar, TaskClass::Spatial, TaskClass::Velocity];

    pub fn label(self) -> &'static str {
        match self {
            TaskClass::Planar => "2-D",
            TaskClass::Spatial => "3-D",
            TaskClass::Velocity => "velocity",
        }
    }

    fn template(self) -> &'static str {
        match self {
            TaskClass::Planar => "point_ellipse_2d",
            TaskClass::Spatial => "reach_obstacle_3d",
            TaskClass::Velocity => "reach_velocity_3d",
        }
    }
}

/// One generated task.
#[derive(Debug, Clone)]
pub struct SuiteTask {
    pub class: TaskClass,
    pub task: Task,
    /// How many expert demonstrations it comes with (12-24).
    pub demos: usize,
}

impl SuiteTask {
    /// Its expert demonstrations, as `pucl demos generate --count demos --seed seed` makes them.
    pub fn demonstrations(&self, seed: u64) -> Result<DemoSet> {
        let opts = ExpertOptions {
            count: self.demos,
            seed,
            jitter: None,
            margin: None,
        };
        let trajs = expert_demos(&self.task, &opts, &mut |_| {})?;
        Ok(DemoSet::from_trajectories(&self.task, &trajs))
    }
}

/// `per_class` tasks of each class from `seed`; the same seed gives the same suite.
pub fn generate(seed: u64, per_class: usize) -> Result<Vec<SuiteTask>> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut out = Vec::with_capacity(3 * per_class);
    for class in TaskClass::ALL {
        for i in 0..per_class {
            let name = format!("suite{seed}_{}_{i:02}", class.label().replace('-', ""));
            let task = generate_one(class, &name, &mut rng)?;
            out.push(SuiteTask {
                class,
                task,
                demos: rng.random_range(12..=24),
            });
        }
    }
    Ok(out)
}

/// Draw tasks of `class` until one is valid, blocks most straight paths and the expert solves it.
fn generate_one(class: TaskClass, name: &str, rng: &mut ChaCha8Rng) -> Result<Task> {
    let (_, yaml) = BUILTIN
        .iter()
        .find(|(n, _)| *n == class.template())
        .expect("templates are built-in");
    let template: TaskSpec = serde_yaml_ng::from_str(yaml).expect("built-in tasks parse");
    for _ in 0..200 {
        let mut spec = template.clone();
        spec.name = name.to_string();
        spec.training_starts = None;
        match class {
            TaskClass::Planar => planar(&mut spec, rng),
            TaskClass::Spatial => spatial(&mut spec, rng),
            TaskClass::Velocity => velocity(&mut spec, rng),
        }
        let Ok(task) = Task::from_spec(spec) else {
            continue;
        };
        if class != TaskClass::Velocity && !blocks_most_straight_paths(&task) {
            continue;
        }
        // Solvable: the expert reaches the goal safely from every start.
        let opts = ExpertOptions {
            count: task.spec.starts.len(),
            seed: 0,
            jitter: Some(0.0),
            margin: None,
        };
        if expert_demos(&task, &opts, &mut |_| {}).is_ok() {
            return Ok(task);
        }
    }
    Err(Error::Invalid(format!(
        "{name}: no solvable {} task in 200 draws",
        class.label()
    )))
}

fn uniform(rng: &mut ChaCha8Rng, lo: f64, hi: f64) -> f64 {
    rng.random_range(lo..hi)
}

/// A primitive of a random kind around `center`, of half-size in [lo, hi] per axis.
fn obstacle(rng: &mut ChaCha8Rng, center: Vec<f64>, lo: f64, hi: f64) -> PrimitiveSpec {
    let d = center.len();
    let sizes: Vec<f64> = (0..d).map(|_| uniform(rng, lo, hi)).collect();
    let rotation = |rng: &mut ChaCha8Rng| -> Option<Vec<f64>> {
        let yaw = uniform(rng, 0.0, 180.0);
        Some(if d == 2 {
            vec![yaw]
        } else {
            vec![0.0, 0.0, yaw]
        })
    };
    match rng.random_range(0..5u8) {
        0 => PrimitiveSpec::Ellipsoid {
            center,
            covariance: None,
            bound: None,
            semi_axes: Some(sizes),
            rotation_deg: None,
        },
        1 => PrimitiveSpec::Ellipsoid {
            rotation_deg: rotation(rng),
            center,
            covariance: None,
            bound: None,
            semi_axes: Some(sizes),
        },
        2 => PrimitiveSpec::Box {
            center,
            half_extents: sizes,
            rotation_deg: None,
        },
        3 => PrimitiveSpec::Box {
            rotation_deg: rotation(rng),
            center,
            half_extents: sizes,
        },
        _ => PrimitiveSpec::Cylinder {
            center: [center[0], center[1]],
            radius: sizes[0],
            z_range: None,
        },
    }
}

/// A point on the segment from `a` to `b` at a random fraction in [lo, hi], moved sideways by up to
/// `side` per axis.
fn between(rng: &mut ChaCha8Rng, a: &[f64], b: &[f64], lo: f64, hi: f64, side: f64) -> Vec<f64> {
    let u = uniform(rng, lo, hi);
    a.iter()
        .zip(b)
        .map(|(p, q)| p + u * (q - p) + uniform(rng, -side, side))
        .collect()
}

/// 2-D: four starts in the template's start region, 1-3 obstacles between starts and the goal.
fn planar(spec: &mut TaskSpec, rng: &mut ChaCha8Rng) {
    let goal = spec.goal.position.clone();
    spec.starts = (0..4)
        .map(|_| vec![uniform(rng, 0.5, 1.4), uniform(rng, 0.5, 1.4)])
        .collect();
    let n = rng.random_range(1..=3usize);
    spec.true_constraint = (0..n)
        .map(|k| {
            let s = spec.starts[k % spec.starts.len()].clone();
            let c = between(rng, &s, &goal, 0.35, 0.65, 0.05);
            obstacle(rng, c, 0.06, 0.18)
        })
        .collect();
    spec.description =
        format!("Generated 2-D task: {n} obstacle(s) between the starts and the goal.");
}

/// 3-D: the template's workspace, goal and starts; 1-3 obstacles between them.
fn spatial(spec: &mut TaskSpec, rng: &mut ChaCha8Rng) {
    let goal = spec.goal.position.clone();
    let n = rng.random_range(1..=3usize);
    spec.true_constraint = (0..n)
        .map(|_| {
            let s = spec.starts[rng.random_range(0..spec.starts.len())].clone();
            let mut c = between(rng, &s, &goal, 0.55, 0.8, 0.02);
            c[2] = uniform(rng, 0.03, 0.07);
            obstacle(rng, c, 0.02, 0.045)
        })
        .collect();
    spec.evaluation.grid = obstacle_grid(spec, 30);
    spec.description =
        format!("Generated 3-D task: {n} obstacle(s) between the starts and the goal.");
}

/// Velocity: random per-axis limits and, on some tasks, a limit on the command's norm (at least one
/// limit, every one below the action box), evaluated on the whole action box. The starts surround the
/// goal, so that the demonstrations move in every direction: a limit is learned only where some
/// demonstration runs into it, and with the template's starts (all on one side of the goal) every
/// demonstration runs into the same one (docs/RESULTS.md, "Tasks nobody tuned for").
fn velocity(spec: &mut TaskSpec, rng: &mut ChaCha8Rng) {
    let d = spec.action.len();
    let box_limit = spec
        .dynamics
        .action_limit
        .per_axis
        .clone()
        .unwrap_or(vec![1.0; d]);
    let mut max_abs: Vec<Option<f64>> = (0..d)
        .map(|k| {
            rng.random_bool(0.6)
                .then(|| uniform(rng, 0.35, 0.95) * box_limit[k])
        })
        .collect();
    let fastest_axis = box_limit.iter().copied().fold(0.0, f64::max);
    let max_norm = rng
        .random_bool(0.5)
        .then(|| uniform(rng, 0.5, 1.0) * fastest_axis);
    if max_abs.iter().all(Option::is_none) && max_norm.is_none() {
        let k = rng.random_range(0..d);
        max_abs[k] = Some(uniform(rng, 0.35, 0.95) * box_limit[k]);
    }
    spec.true_constraint = vec![PrimitiveSpec::VelocityLimit { max_abs, max_norm }];
    surround_the_goal(spec, rng);
    // Slower limits need longer episodes to reach the goal.
    spec.horizon = 300;
    spec.evaluation.grid = box_limit
        .iter()
        .map(|b| GridAxisSpec {
            min: Some(-b),
            max: Some(*b),
            count: Some(30),
            ..GridAxisSpec::default()
        })
        .collect();
    spec.description =
        "Generated velocity task: per-axis (and norm) limits on the command, starts all round the goal."
            .into();
}

/// Starts of a velocity task: 12 directions spread evenly over the sphere (a Fibonacci lattice,
/// turned by a random angle about the vertical), 0.2-0.3 m from a goal in the middle of a free
/// workspace 0.8 m wide (the template's blocking cylinder is left out: nothing but the limits shapes
/// the demonstrations).
fn surround_the_goal(spec: &mut TaskSpec, rng: &mut ChaCha8Rng) {
    const STARTS: usize = 12;
    let goal = [0.55, 0.0, 0.3];
    let half = 0.4;
    spec.goal.position = goal.to_vec();
    spec.dynamics.blocking.clear();
    spec.dynamics.bounds = Some(BoundsSpec {
        lower: goal.iter().map(|g| g - half).collect(),
        upper: goal.iter().map(|g| g + half).collect(),
    });
    let yaw = uniform(rng, 0.0, std::f64::consts::TAU);
    let golden = std::f64::consts::PI * (3.0 - 5f64.sqrt());
    spec.starts = (0..STARTS)
        .map(|k| {
            let z = 1.0 - 2.0 * (k as f64 + 0.5) / STARTS as f64;
            let (r, phi) = ((1.0 - z * z).sqrt(), yaw + golden * k as f64);
            let dist = uniform(rng, 0.2, 0.3);
            let dir = [r * phi.cos(), r * phi.sin(), z];
            (0..3).map(|j| goal[j] + dist * dir[j]).collect()
        })
        .collect();
}

/// A grid of `count` points per axis over the obstacles' bounding box, grown by a third of its size,
/// within the workspace bounds.
fn obstacle_grid(spec: &TaskSpec, count: usize) -> Vec<GridAxisSpec> {
    let d = spec.constraint_input.len();
    let (mut lo, mut hi) = (vec![f64::INFINITY; d], vec![f64::NEG_INFINITY; d]);
    let bounds = spec.dynamics.bounds.as_ref();
    for p in &spec.true_constraint {
        let Ok(s) = p.compile() else { continue };
        let (a, b) = s.aabb(d);
        for k in 0..d {
            lo[k] = lo[k].min(a[k]);
            hi[k] = hi[k].max(b[k]);
        }
    }
    (0..d)
        .map(|k| {
            let (wl, wh) = bounds.map_or((f64::NEG_INFINITY, f64::INFINITY), |b| {
                (b.lower[k], b.upper[k])
            });
            let (l, h) = (lo[k].max(wl), hi[k].min(wh));
            let pad = (h - l) / 3.0;
            GridAxisSpec {
                min: Some((l - pad).max(wl)),
                max: Some((h + pad).min(wh)),
                count: Some(count),
                ..GridAxisSpec::default()
            }
        })
        .collect()
}

/// True when the straight segment from at least half the starts to the goal crosses the true
/// constraint (so the demonstrations are shaped by it).
fn blocks_most_straight_paths(task: &Task) -> bool {
    let goal = task.goal();
    let zero = vec![0.0; task.action_dim()];
    let mut psi = vec![0.0; task.feature_dim()];
    let blocked = task
        .spec
        .starts
        .iter()
        .filter(|s| {
            (0..=200).any(|i| {
                let u = i as f64 / 200.0;
                let p: Vec<f64> = s.iter().zip(goal).map(|(a, b)| a + u * (b - a)).collect();
                task.features_into(&task.start_state(&p), &zero, &mut psi);
                task.truly_infeasible(&psi)
            })
        })
        .count();
    2 * blocked >= task.spec.starts.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_suite_is_reproducible_solvable_and_blocks_the_straight_paths() {
        let a = generate(7, 2).unwrap();
        let b = generate(7, 2).unwrap();
        assert_eq!(a.len(), 6);
        for (x, y) in a.iter().zip(&b) {
            assert_eq!(x.task.spec, y.task.spec);
        }
        for t in &a {
            if t.class == TaskClass::Velocity {
                assert!(matches!(
                    t.task.spec.true_constraint[..],
                    [PrimitiveSpec::VelocityLimit { .. }]
                ));
            } else {
                assert!(blocks_most_straight_paths(&t.task), "{}", t.task.name());
                assert!((1..=3).contains(&t.task.spec.true_constraint.len()));
            }
            // Every generated task round-trips through its YAML file.
            let yaml = serde_yaml_ng::to_string(&t.task.spec).unwrap();
            let back = Task::from_yaml(&yaml, std::path::Path::new("t.yaml")).unwrap();
            assert_eq!(back.spec, t.task.spec);
        }
        assert_ne!(generate(8, 2).unwrap()[0].task.spec, a[0].task.spec);
    }
}
