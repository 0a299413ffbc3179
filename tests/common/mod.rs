//! Helpers shared by the end-to-end tests: run the `pucl` binary as a user would.
#![allow(dead_code)]
use std::path::Path;
use std::process::{Command, Output};

pub fn pucl(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pucl"))
        .args(args)
        .output()
        .expect("run pucl")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A reference demonstration file shipped in data/demos.
pub fn reference(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("data/demos")
        .join(name)
        .to_str()
        .unwrap()
        .to_string()
}

/// A failing command: non-zero exit, an `error:` message containing every expected piece, no panic.
pub fn fails_with(args: &[&str], expected: &[&str]) {
    let o = pucl(args);
    let e = stderr(&o);
    assert!(!o.status.success(), "expected failure for {args:?}");
    assert!(!e.contains("panicked"), "panic for {args:?}: {e}");
    assert!(e.starts_with("error: "), "{e}");
    for piece in expected {
        assert!(e.contains(piece), "expected '{piece}' in: {e}");
    }
}
