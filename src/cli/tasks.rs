//! `pucl tasks`: the built-in tasks, one line each.
use anyhow::Result;
use pucl::task::{BUILTIN, Task, builtin_available};

pub fn run() -> Result<()> {
    for (name, yaml) in BUILTIN {
        if !builtin_available(yaml) {
            println!("{name:<20} (needs a build with --features mujoco)");
            continue;
        }
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
