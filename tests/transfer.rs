//! Constraint transfer (the paper's Fig. 1) without ROS: learn the cylinder from expert demonstrations
//! of varied starts, then drive a proportional controller that ignores the obstacle from shifted starts
//! to shifted goals through the safety filter, in the simulator at the task's rate.
use pucl::demos::DemoSet;
use pucl::expert::{ExpertOptions, generate};
use pucl::filter::{FilterConfig, SafetyFilter};
use pucl::learner::{LearnConfig, learn};
use pucl::model::ConstraintModel;
use pucl::sim::LiveSim;
use pucl::task::Task;
use rand::{RngExt, SeedableRng};
use std::sync::Arc;

#[test]
fn filtered_runs_from_40_shifted_starts_and_goals_stay_feasible_and_reach_their_goals() {
    let task = Task::load("reach_obstacle_3d").unwrap();
    let opts = ExpertOptions {
        count: 24,
        seed: 0,
        jitter: Some(0.02),
        margin: None,
    };
    let demos = DemoSet::from_trajectories(&task, &generate(&task, &opts, &mut |_| {}).unwrap());
    let cfg = LearnConfig::for_task(task.name(), None).unwrap();
    let learned = learn(&task, &demos, &cfg, 0, &mut |_| true).unwrap();
    let model = Arc::new(ConstraintModel::from_learned(
        &task, &demos, &cfg, 0, &learned,
    ));
    let spec = &task.spec;
    let (lo, hi) = task.bounds.clone().unwrap();
    let clamp = |p: Vec<f64>| -> Vec<f64> {
        p.iter()
            .zip(lo.iter().zip(&hi))
            .map(|(v, (a, b))| v.clamp(a + 0.005, b - 0.005))
            .collect()
    };
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
    let (mut violating, mut missed) = (Vec::new(), Vec::new());
    for run in 0..40 {
        // Starts moved by up to 3 cm, goals by up to 5 cm: none of them a demonstration used.
        let base = &spec.starts[run % spec.starts.len()];
        let start = clamp(
            base.iter()
                .map(|v| v + rng.random_range(-0.03..0.03))
                .collect(),
        );
        let g = &spec.goal.position;
        let goal = clamp(vec![
            g[0] + rng.random_range(-0.04..0.02),
            g[1] + rng.random_range(-0.05..0.05),
            g[2] + rng.random_range(0.0..0.04),
        ]);
        let mut sim = LiveSim::new(task.clone());
        sim.reset(&start).unwrap();
        let mut filter = SafetyFilter::new(FilterConfig::default());
        filter.set_model(model.clone()).unwrap();
        let (mut bad, mut reached) = (0, false);
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
            filter.set_pose(t, [p[0], p[1], p[2]]);
            filter.set_command(t, [v[0], v[1], v[2], 0.0, 0.0, 0.0]);
            sim.step_velocity(&filter.output(t).twist[..3]);
            bad += usize::from(sim.truly_infeasible());
        }
        if bad > 0 {
            violating.push((run, start.clone(), goal.clone(), bad));
        }
        if !reached {
            missed.push((run, start, goal, sim.position()));
        }
    }
    assert!(violating.is_empty(), "true violations: {violating:?}");
    assert!(missed.is_empty(), "goals not reached: {missed:?}");
}
