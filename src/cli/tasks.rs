//! `pucl tasks`: the built-in tasks, one line each.
use anyhow::Result;
use pucl::task::{BUILTIN, Task};

pub fn run() -> Result<()> {
    for (name, _) in BUILTIN {
        let t = Task::load(name)?;
        println!(
            "{name:<20} state [{}]  constraint on [{}]  {}",
            t.spec.state.join(", "),
            t.feature_names().join(", "),
            t.spec.description
        );
    }
    Ok(())
}
