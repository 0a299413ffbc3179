//! `pucl suite`: write a generated task suite (task files and expert demonstrations) to a folder, to
//! try learning on tasks nobody tuned for.
use anyhow::{Context, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use pucl::task::suite::generate;
use std::path::PathBuf;

#[derive(Args)]
pub struct SuiteArgs {
    /// Seed of the suite: the same seed gives the same tasks and demonstrations.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Tasks per class (2-D, 3-D, velocity).
    #[arg(long, default_value_t = 10)]
    per_class: usize,
    /// Folder for `<task>.yaml` and `<task>.csv` (created if missing).
    #[arg(long)]
    out: PathBuf,
}

pub fn run(a: SuiteArgs) -> Result<()> {
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let suite = generate(a.seed, a.per_class)?;
    let bar = ProgressBar::new(suite.len() as u64).with_style(
        ProgressStyle::with_template("suite [{bar:30}] {pos}/{len} tasks {msg}")
            .expect("valid template"),
    );
    for t in &suite {
        bar.set_message(t.task.name().to_string());
        let yaml = a.out.join(format!("{}.yaml", t.task.name()));
        let text = serde_yaml_ng::to_string(&t.task.spec)?;
        pucl::error::write_atomic(&yaml, text.as_bytes())?;
        let demos = t.demonstrations(a.seed)?;
        demos.save(&a.out.join(format!("{}.csv", t.task.name())), t.task.name())?;
        bar.inc(1);
    }
    bar.finish_and_clear();
    println!(
        "wrote {} tasks ({} per class: 2-D, 3-D, velocity) with their demonstrations to {}",
        suite.len(),
        a.per_class,
        a.out.display()
    );
    Ok(())
}
