//! Using a learned constraint: the versioned model file (what learning writes and every consumer reads)
//! the safety filter that modulates velocity commands with it and fails safe, and how far a state is
//! from its boundary.
pub mod distance;
pub mod filter;
pub mod model;
