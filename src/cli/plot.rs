//! `pucl plot` and `pucl plot-task`: the learned zeta as a heat map with the true boundary,
//! demonstrations, the policy's rollouts and the reliable infeasible points; or a task's true
//! constraint alone.
use anyhow::{Context, Result};
use clap::Args;
use pucl::demos::DemoSet;
use pucl::deploy::model::ConstraintModel;
use pucl::learn::network::Scratch;
use pucl::policy::crl::PolicyFile;
use pucl::policy::guide::LazyGuide;
use pucl::policy::modulation::DsmPolicy;
use pucl::report::evaluate::policy_states;
use pucl::report::plot::{INFEASIBLE_POINT_COLOR, ROLLOUT_COLOR, Scene, Series, states_chart};
use pucl::task::Task;
use pucl::task::sim::{Simulator, Trajectory};
use std::path::PathBuf;

#[derive(Args)]
pub struct PlotArgs {
    /// Built-in task name or path to a task YAML file (its true boundary is drawn).
    #[arg(long)]
    task: String,
    /// The model file written by `pucl learn` (JSON).
    #[arg(long)]
    model: PathBuf,
    /// Demonstrations to draw (CSV or .json).
    #[arg(long)]
    demos: Option<PathBuf>,
    /// Output PNG.
    #[arg(long)]
    out: PathBuf,
    /// Draw this CRL policy's rollouts (mean action) instead of the DSM policy's.
    #[arg(long)]
    policy: Option<PathBuf>,
}

#[derive(Args)]
pub struct PlotTaskArgs {
    /// Built-in task name or path to a task YAML file.
    #[arg(long)]
    task: String,
    /// Demonstrations to draw (CSV or .json).
    #[arg(long)]
    demos: Option<PathBuf>,
    /// Output PNG.
    #[arg(long)]
    out: PathBuf,
}

pub fn run(a: PlotArgs) -> Result<()> {
    let task = Task::load(&a.task)?;
    let m = ConstraintModel::load(&a.model)?;
    m.check_task(&task, &a.model)?;
    // Without a grid but for a task with no true constraint (a real robot's), the heat map is drawn
    // over the workspace or what the model learned from.
    if task.grid.is_empty() && !task.true_constraint.is_empty() {
        return states_picture(&task, &m, &a);
    }
    let crl = a
        .policy
        .as_deref()
        .map(|p| PolicyFile::load(p, &task))
        .transpose()?;
    let mut paths = Vec::new();
    if let Some(f) = &a.demos {
        paths.push(Series::demonstrations(&task, &DemoSet::load(f, &task)?));
    }
    // The policy's rollouts from the demonstration starts.
    let mut sim = Simulator::new(&task);
    let mut groups = Vec::new();
    let mut psi = vec![0.0; task.feature_dim()];
    // As `pucl eval` runs them: guided past concave learned obstacles once stalled.
    let guide = LazyGuide::new(&task, &m.network, m.dsm.safety_margin, &m.starts);
    for s in &m.starts {
        let mut t = Trajectory::with_capacity(&task);
        match &crl {
            Some(f) => sim.rollout(s, &mut &f.policy, &mut t),
            None => {
                let mut policy = DsmPolicy::new(&task, Some(&m.network), &m.dsm)
                    .map_err(anyhow::Error::msg)?
                    .with_guide(&guide);
                sim.rollout(s, &mut policy, &mut t);
            }
        }
        let mut g = Vec::with_capacity(t.len());
        for i in 0..t.len() {
            task.features_into(t.state(i), t.action(i), &mut psi);
            g.push(psi.clone());
        }
        groups.push(g);
    }
    paths.push(Series {
        label: if crl.is_some() {
            "CRL policy rollouts".into()
        } else {
            "DSM policy rollouts".into()
        },
        color: ROLLOUT_COLOR,
        groups,
    });
    let points = vec![Series {
        label: format!("reliable infeasible ({})", m.memory_buffer.len()),
        color: INFEASIBLE_POINT_COLOR,
        groups: vec![m.memory_buffer.clone()],
    }];
    let net = &m.network;
    // One scratch buffer for every pixel of the heat map.
    let scratch = std::cell::RefCell::new(Scratch::default());
    let field = move |x: &[f64]| net.zeta(x, &mut scratch.borrow_mut());
    let title = format!(
        "{}: learned zeta (blue feasible, red infeasible)",
        task.name()
    );
    let scene = Scene {
        task: &task,
        title,
        field: Some(&field),
        paths,
        points,
    };
    render(&scene, &a.out)
}

pub fn run_task(a: PlotTaskArgs) -> Result<()> {
    let task = Task::load(&a.task)?;
    let mut paths = Vec::new();
    let mut title = if task.true_constraint.is_empty() {
        format!("{}: workspace, no true constraint", task.name())
    } else {
        format!("{}: true constraint", task.name())
    };
    if let Some(f) = &a.demos {
        paths.push(Series::demonstrations(&task, &DemoSet::load(f, &task)?));
        title.push_str(" and demonstrations");
    }
    let scene = Scene {
        task: &task,
        title,
        field: None,
        paths,
        points: vec![],
    };
    render(&scene, &a.out)
}

/// A task without a grid: its evaluation states in the plane of the feature the true constraint
/// bounds and the feature that varies most, by the truth and by the learned zeta.
fn states_picture(task: &Task, m: &ConstraintModel, a: &PlotArgs) -> Result<()> {
    if a.demos.is_some() || a.policy.is_some() {
        anyhow::bail!(
            "task '{}' has no grid: its picture shows its evaluation states; --demos and --policy \
             do not apply",
            task.name()
        );
    }
    let states = policy_states(task)?;
    let d = task.feature_dim();
    let x = ndarray::ArrayView2::from_shape((states.len() / d, d), &states[..])?;
    let zeta = m.network.zeta_batch(x);
    let bounded = (0..d).find(|&k| {
        task.true_constraint.iter().any(|s| {
            let (lo, hi) = s.aabb(d);
            lo[k].is_finite() || hi[k].is_finite()
        })
    });
    let h = bounded.unwrap_or(0);
    let spread = |k: usize| {
        let col = x.column(k);
        let mean = col.mean().unwrap_or(0.0);
        col.iter().map(|v| (v - mean).powi(2)).sum::<f64>()
    };
    let v = (0..d)
        .filter(|&k| k != h)
        .max_by(|&a, &b| spread(a).total_cmp(&spread(b)))
        .unwrap_or(0);
    let title = format!(
        "{}: {} evaluation states, learned zeta against the truth",
        task.name(),
        zeta.len()
    );
    states_chart(
        task,
        &states,
        zeta.as_slice().unwrap_or(&[]),
        (h, v),
        &title,
        &a.out,
    )
    .with_context(|| format!("plotting {}", a.out.display()))?;
    println!("wrote {}", a.out.display());
    Ok(())
}

fn render(scene: &Scene, out: &std::path::Path) -> Result<()> {
    scene
        .render(out)
        .with_context(|| format!("plotting {}", out.display()))?;
    println!("wrote {}", out.display());
    Ok(())
}
