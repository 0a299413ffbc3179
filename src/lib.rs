//! pucl: positive-unlabeled constraint learning (Peng & Billard, RA-L 2024) for robots that must learn
//! "where not to go" from a few demonstrations, and enforce it.
//!
//! The library is organised by the paper's concepts; the `pucl` binary and the ROS nodes (feature `ros`)
//! are thin layers over it.
pub mod bag;
pub mod crl;
pub mod demos;
pub mod error;
pub mod expert;
pub mod filter;
pub mod gmm;
pub mod learner;
pub mod metrics;
pub mod model;
pub mod modulation;
pub mod network;
pub mod plot;
pub mod pu;
pub mod recorder;
pub mod reference;
#[cfg(feature = "ros")]
pub mod ros;
pub mod shape;
pub mod sim;
pub mod task;

pub use error::{Error, Result};
pub use task::Task;
