//! The policies that act on the learned constraint zeta: dynamical-system modulation (the DSM policy of
//! DSM-PUCL and the safety filter's core), star-shaped reference points of learned obstacles, and the
//! constrained RL policy of CRL-PUCL (PPO with a PID Lagrangian).
//!
//! A new policy for Algorithm 1 implements [`crate::learn::Proposer`]; its per-step control law goes
//! here, next to these.
pub mod crl;
pub mod guide;
pub mod modulation;
pub mod reference;
