//! Constraint transfer (the paper's Fig. 1) without ROS: learn the obstacle from expert demonstrations
//! of varied starts, then drive a proportional controller that ignores the obstacle from shifted starts
//! to shifted goals through the safety filter, in the simulator at the task's rate.
use pucl::demos::DemoSet;
use pucl::deploy::filter::{FilterConfig, SafetyFilter};
use pucl::deploy::model::ConstraintModel;
use pucl::learn::{LearnConfig, learn};
use pucl::task::Task;
use pucl::task::expert::{ExpertOptions, generate};
use pucl::task::sim::LiveSim;
use rand::{RngExt, SeedableRng};
use std::sync::Arc;

/// The demonstrations keep 2.5 cm from the obstacle: the learned boundary is then pinned down to
/// within d_r - 2.5 cm of the true one, and the filter keeps 6 mm from it.
const CLEARANCE: f64 = 0.025;
const MARGIN: f64 = 0.006;

/// Learn `task` from `demos` expert demonstrations and drive `runs` shifted runs through the filter.
/// A start inside the true obstacle (the simulator refuses it) or inside the learned one (the robot
/// must not be there) is drawn again. Returns the runs that violated and those that missed the goal.
fn transfer(task: &str, demos: usize, runs: usize) -> (Vec<String>, Vec<String>) {
    transfer_with(task, demos, runs, (0, 0), true, Settings::BUILTIN)
}

/// Which learn settings a transfer run uses.
#[derive(Clone, Copy, Debug)]
struct Settings {
    /// Those derived from the data, as for a task without a file in `config/learn/`; else the
    /// task's file.
    derived: bool,
    /// `suffix_starts` (proposals from states along the demonstrations); None: as configured.
    suffix_starts: Option<usize>,
    /// `both_ways` (a second proposal the other way round); None: as configured (off).
    both_ways: Option<bool>,
    /// The filter's safety margin; None: the model's.
    margin: Option<f64>,
    /// The clearance the expert's demonstrations keep; None: the task's (`expert.margin`).
    clearance: Option<f64>,
}

impl Settings {
    const BUILTIN: Settings = Settings {
        derived: false,
        suffix_starts: None,
        both_ways: None,
        margin: Some(MARGIN),
        clearance: Some(CLEARANCE),
    };
}

/// As [`transfer`], with `seeds`: (the demonstrations' start jitter, learning), the filter's
/// star-shaped hulls on or off (`auto_reference`), and the learn settings.
fn transfer_with(
    task: &str,
    demos: usize,
    runs: usize,
    seeds: (u64, u64),
    hulls: bool,
    settings: Settings,
) -> (Vec<String>, Vec<String>) {
    let task = Task::load(task).unwrap();
    let (demo_seed, seed) = seeds;
    let opts = ExpertOptions {
        count: demos,
        seed: demo_seed,
        jitter: Some(0.02),
        margin: settings.clearance,
    };
    let demos = DemoSet::from_trajectories(&task, &generate(&task, &opts, &mut |_| {}).unwrap());
    let mut cfg = if settings.derived {
        // Under another name the task has no file in config/learn/: a new user's task.
        let mut renamed = task.clone();
        renamed.spec.name = format!("my_{}", task.name());
        LearnConfig::for_task_data(&renamed, &demos, None, None)
            .unwrap()
            .0
    } else {
        LearnConfig::for_task(task.name(), None).unwrap()
    };
    if let Some(n) = settings.suffix_starts {
        cfg.suffix_starts = n;
    }
    if let Some(on) = settings.both_ways {
        cfg.both_ways = on;
    }
    let learned = learn(&task, &demos, &cfg, seed, &mut |_| true).unwrap();
    let model = Arc::new(ConstraintModel::from_learned(
        &task, &demos, &cfg, seed, &learned,
    ));
    let mut filter = SafetyFilter::new(FilterConfig {
        safety_margin: settings.margin,
        tail_effect: Some(false),
        auto_reference: hulls,
        ..FilterConfig::default()
    });
    filter.set_model(model.clone()).unwrap();
    let axes = task.pose_axes().unwrap();
    let spec = &task.spec;
    // Within the task's bounds, where it has them (the ellipses' plane has none).
    let dim = task.position_idx.len();
    let (lo, hi) = task
        .bounds
        .clone()
        .unwrap_or_else(|| (vec![f64::NEG_INFINITY; dim], vec![f64::INFINITY; dim]));
    let clamp = |p: Vec<f64>| -> Vec<f64> {
        p.iter()
            .zip(lo.iter().zip(&hi))
            .map(|(v, (a, b))| v.clamp(a + 0.005, b - 0.005))
            .collect()
    };
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
    let mut scratch = pucl::learn::network::Scratch::default();
    let (mut violating, mut missed, mut done, mut drawn) = (Vec::new(), Vec::new(), 0, 0);
    while done < runs {
        assert!(drawn < 10 * runs, "too few feasible shifted starts");
        // Starts moved by up to 3 cm, goals by up to 5 cm: none of them a demonstration used.
        let base = &spec.starts[drawn % spec.starts.len()];
        drawn += 1;
        let start = clamp(
            base.iter()
                .map(|v| v + rng.random_range(-0.03..0.03))
                .collect(),
        );
        // x back by up to 4 cm or on by 2, y either way by 5, z up by up to 4 (the plane's first two).
        let shifts = [-0.04..0.02, -0.05..0.05, 0.0..0.04];
        let goal = clamp(
            spec.goal
                .position
                .iter()
                .zip(shifts)
                .map(|(g, r)| g + rng.random_range(r))
                .collect(),
        );
        let mut sim = LiveSim::new(task.clone());
        if sim.reset(&start).is_err() || model.network.zeta(&start, &mut scratch) < 0.5 {
            continue;
        }
        done += 1;
        let (mut bad, mut reached, mut first_inside) = (0, false, None);
        for k in 0..1200 {
            let p = sim.position();
            let d: Vec<f64> = goal.iter().zip(&p).map(|(a, b)| a - b).collect();
            if d.iter().map(|c| c * c).sum::<f64>().sqrt() < spec.goal.tolerance {
                reached = true;
                break;
            }
            // P-controller at up to 0.25 m/s, as scripts/loop.py drives over ROS.
            let mut v: Vec<f64> = d.iter().map(|c| 2.0 * c).collect();
            let n = v.iter().map(|c| c * c).sum::<f64>().sqrt();
            if n > 0.25 {
                v.iter_mut().for_each(|c| *c *= 0.25 / n);
            }
            let t = k as f64 * spec.dynamics.dt;
            // The pose and twist carry a planar task's positions on the axes they are named after.
            let v = Task::to_pose_axes(&axes, &v);
            filter.set_pose(t, Task::to_pose_axes(&axes, &p));
            filter.set_command(t, [v[0], v[1], v[2], 0.0, 0.0, 0.0]);
            let out = filter.output(t).twist;
            sim.step_velocity(&Task::from_pose_axes(&axes, [out[0], out[1], out[2]]));
            if sim.truly_infeasible() {
                bad += 1;
                first_inside.get_or_insert(sim.position());
            }
        }
        let run = format!("{start:.3?} -> {goal:.3?}, ended at {:.3?}", sim.position());
        if bad > 0 {
            violating.push(format!(
                "{run}: {bad} steps inside, first at {:.3?}",
                first_inside.unwrap_or_default()
            ));
        }
        if !reached {
            missed.push(run);
        }
    }
    (violating, missed)
}

#[test]
fn filtered_runs_from_40_shifted_starts_and_goals_stay_feasible_and_reach_their_goals() {
    let (violating, missed) = transfer("reach_obstacle_3d", 24, 40);
    assert!(violating.is_empty(), "true violations: {violating:#?}");
    assert!(missed.is_empty(), "goals not reached: {missed:#?}");
}

#[test]
fn four_cups_in_an_arc_are_passed_without_violation_from_40_shifted_starts_to_their_goals() {
    // Three cups form a pocket that opens towards the starts: the filter goes around the star-shaped
    // hull of the learned cups, where a modulation of zeta's level sets stalls in the pocket.
    let (violating, missed) = transfer("reach_four_cups_3d", 38, 40);
    assert!(violating.is_empty(), "true violations: {violating:#?}");
    // One run starts 12 cm up (z 0.119), above every demonstration, and stops in front of the pocket:
    // the filter checks the whole path over its horizon and slides only across the vertical there,
    // where sliding along zeta's gradient carried such runs through the end cup that learning never
    // probed (1 run of the 400 of the ignored table below did). A stop is safe; a second one fails.
    assert!(missed.len() <= 1, "goals not reached: {missed:#?}");
}

#[test]
fn a_new_users_cylinder_model_with_derived_settings_keeps_40_shifted_runs_feasible() {
    // The task under a new name, as a user's copy of the file: no file in config/learn/ applies, so
    // d_r, the margin and (in 3-D) the proposals along the demonstrations are derived from the data.
    let derived = Settings {
        derived: true,
        ..Settings::BUILTIN
    };
    let (violating, missed) = transfer_with("reach_obstacle_3d", 24, 40, (0, 0), true, derived);
    assert!(violating.is_empty(), "true violations: {violating:#?}");
    // Two runs stop about 2 cm beyond shifted goals 5 cm behind the cylinder, where the learned
    // region runs on towards the goal (11 of 400 over ten seeds, docs/RESULTS.md); a third fails.
    assert!(missed.len() <= 2, "goals not reached: {missed:#?}");
}

#[test]
fn a_new_users_four_cups_model_with_derived_settings_keeps_40_shifted_runs_out_of_the_cups() {
    // The four cups under a new name, the harness's first demonstration set and learning seed. 2 of
    // its 40 runs went into the +y end cup by its west face, which no demonstration passes at their
    // height, before the filter's hulls lay farther out at faces no demonstration passed.
    let derived = Settings {
        derived: true,
        ..Settings::BUILTIN
    };
    let (violating, missed) = transfer_with("reach_four_cups_3d", 38, 40, (0, 0), true, derived);
    assert!(violating.is_empty(), "true violations: {violating:#?}");
    assert!(missed.len() <= 1, "goals not reached: {missed:#?}");
}

#[test]
fn a_new_users_four_cups_models_block_the_end_cups_outer_side_that_suffix_proposals_probe() {
    // Derived settings (the task under a new name), which in 3-D have `suffix_starts: 4`. Without
    // proposals from states along the demonstrations these three models let 11, 12 and 12 of 40
    // shifted runs into the +y end cup: no proposal from a demonstration's start passes its outer
    // side.
    for (set, seed) in [(100, 4), (100, 5), (101, 4)] {
        let settings = Settings {
            derived: true,
            suffix_starts: Some(4),
            both_ways: Some(false),
            ..Settings::BUILTIN
        };
        assert_four_cups_model_transfers_safely(set, seed, settings);
    }
}

/// 40 shifted four-cups runs through the model of demonstration set `set` and learning seed `seed`:
/// none may violate, at most two may stop short of their goal.
fn assert_four_cups_model_transfers_safely(set: u64, seed: u64, settings: Settings) {
    let (violating, missed) =
        transfer_with("reach_four_cups_3d", 38, 40, (set, seed), true, settings);
    assert!(
        violating.is_empty(),
        "set {set}, seed {seed}: true violations: {violating:#?}"
    );
    assert!(
        missed.len() <= 2,
        "set {set}, seed {seed}: goals not reached: {missed:#?}"
    );
}

#[test]
fn a_new_users_four_cups_models_block_the_end_cups_outer_side_that_proposals_the_other_way_round_probe()
 {
    // Derived settings, no `suffix_starts`. Without `both_ways` these models let 12-14 of 40 shifted
    // runs into the +y end cup: every proposal from a demonstration's start passes it on the inside.
    for (set, seed) in [(100, 5), (101, 2)] {
        let settings = |both_ways| Settings {
            derived: true,
            suffix_starts: Some(0),
            both_ways: Some(both_ways),
            ..Settings::BUILTIN
        };
        let (without, _) = transfer_with(
            "reach_four_cups_3d",
            38,
            40,
            (set, seed),
            true,
            settings(false),
        );
        assert!(
            without.len() >= 5,
            "set {set}, seed {seed}: without both_ways only {} runs violated; the test no longer \
             shows the change",
            without.len()
        );
        assert_four_cups_model_transfers_safely(set, seed, settings(true));
    }
}

/// The table of docs/RESULTS.md ("The whole loop over ROS 2"): 10 seeds of demonstrations and
/// learning, 40 shifted runs each, with and without the star-shaped hulls. About 5 minutes:
/// `cargo test --release --test transfer -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement: prints the transfer table of docs/RESULTS.md"]
fn transfer_table_over_ten_seeds_with_and_without_hulls() {
    println!(
        "| filter | settings | task | runs | reached the goal | runs with a true violation | models with a violation |"
    );
    println!("|---|---|---|---|---|---|---|");
    let derived = Settings {
        derived: true,
        ..Settings::BUILTIN
    };
    // The level sets with the task's file only; the default filter with both kinds of settings.
    let rows = [
        (false, Settings::BUILTIN),
        (true, Settings::BUILTIN),
        (true, derived),
    ];
    for (task, demos) in [("reach_obstacle_3d", 24), ("reach_four_cups_3d", 38)] {
        for (hulls, settings) in rows {
            let label = format!("{task}, hulls {hulls}, {settings:?}");
            let (bad, missed, models) =
                ten_models(task, demos, |seed| (seed, seed), hulls, settings, &label);
            let name = if hulls {
                "star-shaped hulls (default)"
            } else {
                "modulation of zeta's level sets (`auto_reference: false`)"
            };
            let from = if settings.derived {
                "derived"
            } else {
                "the task's file"
            };
            println!(
                "| {name} | {from} | {task} | 400 | {} | {bad} | {models} |",
                400 - missed
            );
        }
    }
}

/// Safe for every learned model, not most: six demonstration sets of the four cups, each learned
/// with 10 seeds, with the task's settings and with those derived from the data, each without and
/// with proposals from 4 states along every demonstration, 40 shifted runs per model, the default
/// filter. About 5 minutes:
/// `cargo test --release --test transfer four_cups_over_ten -- --ignored --nocapture`; with
/// `PUCL_ONLY_ROW=derived:4:false` (settings:suffix_starts:both_ways) one group of rows alone.
#[test]
#[ignore = "a measurement: prints the per-set transfer table of docs/RESULTS.md"]
fn four_cups_over_ten_learning_seeds_per_demonstration_set() {
    println!(
        "| settings | suffix_starts | both_ways | demonstration set | learning seeds | runs | reached the goal | runs with a true violation | models with a violation |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    // Sets 100-102 were looked at while suffix_starts was chosen; 200-202 were not.
    for derived in [false, true] {
        for (suffix_starts, both_ways) in [(0, false), (4, false), (0, true), (4, true)] {
            if std::env::var("PUCL_ONLY_BOTH_WAYS").is_ok() && !both_ways {
                continue;
            }
            // PUCL_ONLY_ROW=derived:4:false (or file:0:true): that group of rows alone.
            let row = format!(
                "{}:{suffix_starts}:{both_ways}",
                if derived { "derived" } else { "file" }
            );
            if std::env::var("PUCL_ONLY_ROW").is_ok_and(|only| only != row) {
                continue;
            }
            let settings = Settings {
                derived,
                suffix_starts: Some(suffix_starts),
                both_ways: Some(both_ways),
                ..Settings::BUILTIN
            };
            let name = if derived {
                "derived"
            } else {
                "the task's file"
            };
            for set in [100, 101, 102, 200, 201, 202] {
                let label = format!("{settings:?}, set {set}");
                let (bad, missed, models) = ten_models(
                    "reach_four_cups_3d",
                    38,
                    |seed| (set, seed),
                    true,
                    settings,
                    &label,
                );
                println!(
                    "| {name} | {suffix_starts} | {both_ways} | {set} | 0-9 | 400 | {} | {bad} | {models} |",
                    400 - missed
                );
            }
        }
    }
}

#[test]
fn a_planar_model_keeps_40_shifted_runs_out_of_the_ellipses_through_the_filter_in_the_plane() {
    // The ellipses' pose is x and y: the filter reads and modulates those axes only. A demonstration
    // set whose learned ellipses cover both (set 1: no model of its ten seeds let a run in). On sets
    // whose proposals never went round the upper ellipse's left side the learned one lacks it, and
    // shifted runs pass through there (the ignored table below).
    let settings = Settings {
        margin: None,
        clearance: None,
        ..Settings::BUILTIN
    };
    let (violating, missed) = transfer_with("point_ellipse_2d", 24, 40, (1, 0), true, settings);
    assert!(violating.is_empty(), "true violations: {violating:#?}");
    assert!(missed.is_empty(), "goals not reached: {missed:#?}");
}

/// The ellipses (a planar task: the pose's x and y) over ten learning seeds per demonstration set,
/// with the task's settings and with those derived from the data, 40 shifted runs per model through
/// the default filter: `cargo test --release --test transfer planar_over_ten -- --ignored
/// --nocapture` (about four minutes).
#[test]
#[ignore = "a measurement: prints the planar transfer table of docs/RESULTS.md"]
fn planar_over_ten_learning_seeds_per_demonstration_set() {
    println!(
        "| settings | demonstration set | learning seeds | runs | reached the goal | runs with a true violation | models with a violation |"
    );
    println!("|---|---|---|---|---|---|---|");
    // The expert's clearance and the filter's margin are the task's and the model's (5 cm, d_r / 2):
    // the learned boundary is only pinned down to within d_r (8-9 cm) less the clearance of the
    // demonstrations, and with the 3-D tasks' 2.5 cm and 6 mm every model of two sets of three let
    // runs over the upper ellipse's top into it (docs/RESULTS.md).
    for derived in [false, true] {
        let settings = Settings {
            derived,
            margin: None,
            clearance: None,
            ..Settings::BUILTIN
        };
        for set in [0, 1, 2] {
            let label = format!("derived {derived}, set {set}");
            let (bad, missed, models) = ten_models(
                "point_ellipse_2d",
                24,
                |seed| (set, seed),
                true,
                settings,
                &label,
            );
            let name = if derived {
                "derived"
            } else {
                "the task's file"
            };
            println!(
                "| {name} | {set} | 0-9 | 400 | {} | {bad} | {models} |",
                400 - missed
            );
        }
    }
}

/// [`transfer_with`] 40 shifted runs for each of learning seeds 0-9 (`seeds`: a learning seed's
/// demonstration and learning seeds), each violating run on standard error after `label`. Returns
/// the runs with a true violation, the runs that missed their goal and the models with a violation.
fn ten_models(
    task: &str,
    demos: usize,
    seeds: impl Fn(u64) -> (u64, u64),
    hulls: bool,
    settings: Settings,
    label: &str,
) -> (usize, usize, usize) {
    let (mut bad, mut missed, mut models) = (0, 0, 0);
    for seed in 0..10 {
        let (v, m) = transfer_with(task, demos, 40, seeds(seed), hulls, settings);
        for run in &v {
            eprintln!("{label}, seed {seed}: {run}");
        }
        bad += v.len();
        missed += m.len();
        models += usize::from(!v.is_empty());
    }
    (bad, missed, models)
}
