//! pucl: positive-unlabeled constraint learning (Peng & Billard, RA-L 2024) for robots that must learn
//! "where not to go" from a few demonstrations, and enforce it.
//!
//! One folder per part of the method; each module's doc says what it owns:
//! - [`task`]: task files, the true constraint's shapes, the kinematic simulator, the expert.
//! - [`demos`]: demonstration sets (the positive data), their recorder and ROS bags.
//! - [`learn`]: Algorithm 1 over a proposing policy and a labeller, reliable-infeasible
//!   identification, the constraint network zeta, the learn settings.
//! - [`policy`]: the policies that use zeta: DS modulation, star-shaped reference points, CRL (PPO).
//! - [`deploy`]: the model file and the safety filter.
//! - [`report`]: metrics, evaluation and pictures.
//! - [`geometry`]: Euclidean norm and distance on slices.
//! - `ros` (feature `ros`): thin adapters for the nodes in `src/bin/`.
//!
//! The `pucl` binary (`src/main.rs`, one module per command in `src/cli/`) and the ROS nodes are thin
//! layers over this library.
pub mod demos;
pub mod deploy;
pub mod error;
pub mod geometry;
pub mod learn;
pub mod policy;
pub mod report;
#[cfg(feature = "ros")]
pub mod ros;
pub mod task;

pub use error::{Error, Result};
pub use task::Task;
