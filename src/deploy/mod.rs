//! Using a learned constraint: the versioned model file (what learning writes and every consumer reads)
//! and the safety filter that modulates velocity commands with it and fails safe.
pub mod filter;
pub mod model;
