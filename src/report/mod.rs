//! How well a constraint was learned and what it looks like: the paper's metrics (IoU, recall,
//! precision on the task's grid; unsafe rate and goal reaching of a policy), evaluation episodes, and
//! pictures (heat maps of zeta with the true boundary).
pub mod evaluate;
pub mod metrics;
pub mod plot;
