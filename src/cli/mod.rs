//! The `pucl` commands, one module each: its arguments (clap) and a thin `run` over the library.
//! A new command is a module here plus one variant in `main.rs`.
pub mod demos;
pub mod eval;
pub mod learn;
pub mod plot;
pub mod query;
pub mod suite;
pub mod tasks;
