//! Dynamical-system modulation (Huber et al. 2019) around the learned constraint, and the DSM policies
//! of DSM-PUCL. M(s) = E D E^-1 with E = [r, e_1, ..., e_{d-1}] (e_i tangent, orthogonal to the normal
//! n) and D = diag(1 - 1/Gamma, 1 + 1/Gamma, ...). Writing v = c0 r + (tangential part), with
//! c0 = (n . v) / (n . r), gives M v = lambda_t v + (lambda_1 - lambda_t) c0 r: no basis is built and
//! nothing is allocated, in any dimension.
use crate::learn::network::{Mlp, Scratch, sigmoid};
use crate::task::sim::Policy;
use crate::task::{Feature, Task};
use serde::{Deserialize, Serialize};

/// A differentiable feasibility function zeta = sigmoid(logit) (1 = feasible); the learned network is
/// one.
pub trait Feasibility {
    /// The logit of zeta at x, with its gradient written to `grad`.
    fn logit_grad(&self, x: &[f64], grad: &mut [f64], scratch: &mut Scratch) -> f64;
}

impl Feasibility for Mlp {
    fn logit_grad(&self, x: &[f64], grad: &mut [f64], scratch: &mut Scratch) -> f64 {
        self.logit_and_grad(x, grad, scratch)
    }
}

/// Estimated signed distance to the learned boundary (positive on the feasible side): logit / |grad|.
#[inline]
pub fn boundary_distance(logit: f64, grad: &[f64]) -> f64 {
    let n = grad.iter().map(|g| g * g).sum::<f64>().sqrt();
    if n > 0.0 {
        logit / n
    } else {
        logit.signum() * f64::INFINITY
    }
}

/// Signed distance from `x` to the learned boundary (where the logit is `level`: 0 for zeta 0.5)
/// along the line through x in the direction of zeta's gradient, positive on the feasible side, up
/// to `range`. It walks from x towards the boundary in steps of the first-order estimate
/// ([`boundary_distance`], read again at every point), at most `range`/64 so that a thin learned
/// obstacle is not stepped over, until the logit changes sign, then bisects. Unlike the estimate
/// alone it does not read long where the logit flattens outwards. ±infinity where zeta is flat at x
/// (no direction to look in) or the line meets no boundary within `range`. `grad`: a buffer of x's
/// length.
pub fn boundary_distance_along_gradient<F: Feasibility + ?Sized>(
    net: &F,
    x: &[f64],
    level: f64,
    range: f64,
    grad: &mut [f64],
    scratch: &mut Scratch,
) -> f64 {
    let logit = net.logit_grad(x, grad, scratch) - level;
    let side = if logit >= 0.0 { 1.0 } else { -1.0 };
    let norm = crate::geometry::norm(grad);
    if logit == 0.0 {
        return 0.0;
    }
    if !(norm > 0.0 && range > 0.0 && range.is_finite()) {
        return side * f64::INFINITY;
    }
    // Towards the obstacle from the feasible side, out of it from inside: phi = side * logit falls
    // to 0 at the boundary.
    let dir: Vec<f64> = grad.iter().map(|g| -side * g / norm).collect();
    let at = |s: f64, p: &mut Vec<f64>| {
        p.clear();
        p.extend(x.iter().zip(&dir).map(|(xi, di)| xi + s * di));
    };
    let (max_step, min_step) = (range / 64.0, range * 1e-6);
    let (mut before, mut phi, mut slope) = (0.0, side * logit, norm);
    let mut p = Vec::with_capacity(x.len());
    let after = loop {
        let step = if slope > 0.0 {
            (phi / slope).clamp(min_step, max_step)
        } else {
            max_step
        };
        let s = before + step;
        if s > range {
            return side * f64::INFINITY;
        }
        at(s, &mut p);
        let l = net.logit_grad(&p, grad, scratch) - level;
        if side * l <= 0.0 {
            break s;
        }
        phi = side * l;
        // How fast phi falls along the walk (the gradient's component against it).
        slope = -side * grad.iter().zip(&dir).map(|(g, d)| g * d).sum::<f64>();
        before = s;
    };
    // The sign changes in (before, after]: bisect to a millionth of the range.
    let (mut lo, mut hi) = (before, after);
    while hi - lo > min_step {
        let mid = 0.5 * (lo + hi);
        at(mid, &mut p);
        if side * (net.logit_grad(&p, grad, scratch) - level) > 0.0 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    side * 0.5 * (lo + hi)
}

/// Settings of the modulation and of the nominal dynamical system.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DsmConfig {
    /// Nominal DS f(s) = -gain (p - goal), in action units, with p in metres (the task's position
    /// `units`; none: metres), so that a task written in cm or mm moves as the same task in m.
    pub gain: f64,
    /// Gamma = (1 + 10 max(zeta - 0.5, 0))^(1/rho); the reference uses 0.2 (2 for the transfer task).
    pub rho: f64,
    /// Speeds above `normalize_above` are scaled to `speed` (action units); null: never.
    pub speed: f64,
    pub normalize_above: Option<f64>,
    /// Modulate also when moving away from the boundary (the reference does). Off: motion away from
    /// the learned obstacle passes unchanged, so a state inside it can leave.
    pub tail_effect: bool,
    /// A point inside the learned obstacle (feature space) that sets the first basis vector r; none: r = n.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference_point: Option<Vec<f64>>,
    /// Velocity constraints: a command known to be feasible that the feasible set is star-shaped
    /// around; none: the learner uses the demonstrations' mean command.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub velocity_reference: Option<Vec<f64>>,
    /// Velocity constraints: a nominal command beyond the action box is scaled down as a whole (its
    /// direction to the goal kept) instead of clipped per axis. Learning rollouts clip (the
    /// time-optimal command, which probes the limits); at use the direction matters more, because a
    /// learned set no wider than the demonstrations holds few commands off their directions.
    /// Absent from older model files: off.
    #[serde(default)]
    pub keep_direction: bool,
    /// No modulation where |grad zeta| is below this (flat network: no boundary information); per
    /// metre for position constraints (per position unit in the library's `safe_velocity`).
    #[serde(default = "default_min_gradient")]
    pub min_gradient: f64,
    /// Sampled-data safeguard: predict the next position; if it would enter the learned obstacle, drop
    /// the inward component, then halve the speed, else stop. The modulation's guarantee is for
    /// continuous time; with a finite control period this keeps it.
    #[serde(default = "yes")]
    pub lookahead: bool,
    /// With the lookahead: also keep this distance (feature units) from the learned boundary, so that
    /// sliding along it does not graze a true boundary a few millimetres further out.
    #[serde(default)]
    pub safety_margin: f64,
    /// Where the demonstrations passed closer to the learned boundary than the margin allows, the
    /// DSM policy's margin is lowered there ([`DemonstratedClearance`]; written after learning with
    /// `margin_clear_of_demonstrations`), so that it never closes a way the demonstrations took.
    /// The safety filter keeps `safety_margin`. None: the margin is the same everywhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub demonstrated_clearance: Option<std::sync::Arc<DemonstratedClearance>>,
    /// Escape the modulation's saddle points: when the nominal velocity points (almost) straight into
    /// the learned obstacle, the modulated velocity vanishes and the robot would stall in front of it.
    /// On: move along the boundary at half the nominal speed instead, on the side the nominal
    /// velocity leans to (a fixed side when it leans to none). Learning rollouts keep it off, like the
    /// reference; the safety filter turns it on.
    #[serde(default)]
    pub saddle_escape: bool,
    /// Inside the learned obstacle, only let the robot out ([`leave_obstacle`]). Learning rollouts
    /// keep it off, like the reference; `config/learn/default.yaml` turns it on for the model's
    /// users (evaluation), and the safety filter always does.
    #[serde(default)]
    pub leave_inside: bool,
    /// With the lookahead: when sliding along the boundary within the margin is refused, push
    /// outward (a quarter of the speed per attempt) before slowing down. Without it the DSM policy
    /// stalls beside convex learned obstacles. The safety filter turns it off: the controller behind
    /// it, not the filter, chooses where to go, and pushing away from one learned obstacle can carry
    /// the robot round the side of another that learning never probed.
    #[serde(default = "yes")]
    pub push_outward: bool,
    /// With `push_outward`: within the margin each step must also climb back out of it (up to a
    /// quarter of its length), not only go no deeper, where some push allows it. A robot let into the
    /// margin where it is lowered (beside a demonstrated state) otherwise slides on at that depth
    /// where the whole margin applies again. The DSM policy asks it only where the whole margin
    /// applies; the safety filter keeps its own rule (off).
    #[serde(default = "yes")]
    pub climb_out: bool,
    /// With the lookahead: check the whole path over the control period, not only its end point, so
    /// that a fast command cannot jump across a thin learned obstacle. Learning rollouts (short steps)
    /// keep it off; the safety filter, whose horizon covers many centimetres at speed, turns it on.
    #[serde(default)]
    pub swept_lookahead: bool,
    /// With the lookahead: the box (feature space) the path over the horizon stays in; the safety
    /// filter takes it from the model file (the task's workspace bounds). Learning leaves the bounds
    /// to the simulator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<Workspace>,
    /// Slide, push and escape only across this axis (the safety filter's `reference_axis`, the
    /// vertical: go around learned obstacles, not over or under them, where the model knows less);
    /// none: along zeta's full gradient.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub around_axis: Option<Vec<f64>>,
    /// With the swept lookahead: the margin near a goal within the margin of the learned obstacle
    /// ([`GoalMargin`]), read at every point of the path, whose end may lie nearer the goal than
    /// where the robot is. The safety filter sets it; never in a model file.
    #[serde(skip)]
    pub goal_margin: Option<GoalMargin>,
    /// With `saddle_escape`: escape round the modulation's reference point (the hull's, else
    /// `reference_point`) the way the modulation turns there, not towards the side the command
    /// leans to from the normal ([`escape_saddle`]). The safety filter sets it where the modulation
    /// round the hull is what it follows; where it follows zeta's level sets instead, their slide
    /// leans by the normal, and so does the escape. Never in a model file.
    #[serde(skip)]
    pub escape_round_reference: bool,
}

/// A goal within the margin of the learned obstacle: the demonstrations end there, so the task asks
/// the robot to go there, and near it the margin shrinks, from the whole margin a goal tolerance and
/// two margins away (the band a robot crosses to come within the tolerance) to half the goal's
/// clearance at the goal. Not a cone of slope one as around a demonstrated state
/// ([`DemonstratedClearance`]): zeta's distance estimate falls faster than the distance.
#[derive(Debug, Clone, PartialEq)]
pub struct GoalMargin {
    pub goal: Vec<f64>,
    /// The goal's clearance from the learned boundary (zeta's distance estimate).
    pub clearance: f64,
    /// The whole margin, kept from `reach` away from the goal on.
    pub full: f64,
    pub reach: f64,
}

impl GoalMargin {
    /// None where the goal keeps at least twice `margin` from the learned boundary (the margin
    /// stays whole) or lies inside the learned obstacle. `grad`: a buffer of the goal's length.
    pub fn of<F: Feasibility + ?Sized>(
        net: &F,
        goal: &[f64],
        tolerance: f64,
        margin: f64,
        grad: &mut [f64],
        scratch: &mut Scratch,
    ) -> Option<Self> {
        let clearance = DemonstratedClearance::tight(net, goal, margin, grad, scratch)?;
        Some(GoalMargin {
            goal: goal.to_vec(),
            clearance,
            full: margin,
            reach: tolerance + 2.0 * margin,
        })
    }

    /// The margin at `x`.
    pub fn at(&self, x: &[f64]) -> f64 {
        let r = crate::geometry::distance(x, &self.goal) / self.reach;
        let low = 0.5 * self.clearance;
        self.full.min(low + (self.full - low) * r.min(1.0))
    }
}

/// Demonstrated states that keep less than twice the margin from the learned boundary (feature
/// space), each with its clearance c (zeta's logit over its gradient, as the margin is measured).
/// The margin at x is the least of the margin and c/2 + |x - d| over these states d: half its
/// clearance at a demonstrated state, so a robot near it has room on both sides, and back to the
/// full margin within a margin's distance. Continuous (a minimum of cones).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DemonstratedClearance {
    pub states: Vec<Vec<f64>>,
    pub clearance: Vec<f64>,
    /// Built on first use from `states`: only states within the margin of x can lower it, so a
    /// radius query keeps each DSM step's cost from growing with the number of demonstrated states.
    #[serde(skip)]
    near: Derived<Option<(crate::learn::identify::PointsWithin, f64)>>,
}

/// A value derived from the rest of a struct on first use and kept: a cache, so it is equal to any
/// other, cloned empty (built again from the clone's own data) and printed as nothing. For the
/// radius query of [`DemonstratedClearance`] and a model's boundary samples.
#[derive(Default)]
pub struct Derived<T>(pub std::sync::OnceLock<T>);

impl<T> Clone for Derived<T> {
    fn clone(&self) -> Self {
        Derived(std::sync::OnceLock::new())
    }
}

impl<T> PartialEq for Derived<T> {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl<T> std::fmt::Debug for Derived<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Derived")
    }
}

impl DemonstratedClearance {
    /// The demonstrated states (row-major, `dim` per state) that lower a margin of `margin`, or None.
    pub fn of<F: Feasibility + ?Sized>(
        net: &F,
        states: &[f64],
        dim: usize,
        margin: f64,
    ) -> Option<DemonstratedClearance> {
        let (mut grad, mut scratch) = (vec![0.0; dim], Scratch::default());
        let mut out = DemonstratedClearance::new(Vec::new(), Vec::new());
        for x in states.chunks_exact(dim) {
            if let Some(c) = Self::tight(net, x, margin, &mut grad, &mut scratch) {
                out.states.push(x.to_vec());
                out.clearance.push(c);
            }
        }
        (!out.states.is_empty()).then_some(out)
    }

    /// The clearance of `x` from the learned boundary (zeta's distance estimate) if half of it is
    /// less than `margin`: a state whose margin would shut it in. None inside the learned obstacle (a
    /// start there): nothing is demonstrated about its margin. `grad`: a buffer of x's length.
    pub fn tight<F: Feasibility + ?Sized>(
        net: &F,
        x: &[f64],
        margin: f64,
        grad: &mut [f64],
        scratch: &mut Scratch,
    ) -> Option<f64> {
        let logit = net.logit_grad(x, grad, scratch);
        let c = boundary_distance(logit, grad);
        (logit > 0.0 && c.is_finite() && 0.5 * c < margin).then_some(c)
    }

    /// The least margin anywhere: half the least clearance, at most `margin`.
    pub fn margin_at_least(&self, margin: f64) -> f64 {
        self.clearance
            .iter()
            .map(|c| 0.5 * c)
            .fold(margin, f64::min)
    }

    /// The margin at `x`: at most `margin`.
    pub fn margin_at(&self, x: &[f64], margin: f64) -> f64 {
        let cone =
            |i: usize| 0.5 * self.clearance[i] + crate::geometry::distance(x, &self.states[i]);
        let n = self.states.len().min(self.clearance.len());
        let Some((near, least)) = self.near.0.get_or_init(|| self.index(x.len())) else {
            // States of another dimension than x (a model file is validated before this).
            return (0..n).map(cone).fold(margin, f64::min);
        };
        // A state d lowers the margin only if c/2 + |x - d| < margin, so |x - d| < margin - c/2.
        let mut found = Vec::new();
        near.within(x, margin - least, &mut found);
        found.into_iter().map(cone).fold(margin, f64::min)
    }

    /// Demonstrated states with their clearances (the radius query is built on first use).
    pub fn new(states: Vec<Vec<f64>>, clearance: Vec<f64>) -> DemonstratedClearance {
        DemonstratedClearance {
            states,
            clearance,
            near: Derived::default(),
        }
    }

    /// The radius query over the states with their least half clearance, if every state (with a
    /// clearance) has `dim` values.
    fn index(&self, dim: usize) -> Option<(crate::learn::identify::PointsWithin, f64)> {
        let n = self.states.len().min(self.clearance.len());
        if self.states[..n].iter().any(|d| d.len() != dim) {
            return None;
        }
        let points = crate::learn::identify::Points {
            dim,
            data: self.states[..n].concat(),
        };
        let least = self.clearance[..n]
            .iter()
            .map(|c| 0.5 * c)
            .fold(f64::INFINITY, f64::min);
        Some((crate::learn::identify::PointsWithin::new(&points), least))
    }
}

/// An axis-aligned box of positions (the task's workspace bounds).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workspace {
    pub lower: Vec<f64>,
    pub upper: Vec<f64>,
}

impl Workspace {
    /// Limit each component of `v` so that `x + h v` stays in the box; a component that would leave
    /// it from outside is zeroed (never pushed anywhere).
    pub fn keep_inside(&self, x: &[f64], h: f64, v: &mut [f64]) {
        if h <= 0.0 {
            return;
        }
        for (k, vk) in v.iter_mut().enumerate() {
            let (Some(lo), Some(hi)) = (self.lower.get(k), self.upper.get(k)) else {
                continue;
            };
            let up = ((hi - x[k]) / h).max(0.0);
            let down = ((lo - x[k]) / h).min(0.0);
            *vk = vk.clamp(down, up);
        }
    }
}

fn yes() -> bool {
    true
}

fn default_min_gradient() -> f64 {
    1e-5
}

impl Default for DsmConfig {
    fn default() -> Self {
        DsmConfig {
            gain: 2.0,
            rho: 0.2,
            speed: 1.0,
            normalize_above: Some(0.05),
            tail_effect: true,
            reference_point: None,
            velocity_reference: None,
            keep_direction: false,
            min_gradient: default_min_gradient(),
            lookahead: true,
            safety_margin: 0.0,
            demonstrated_clearance: None,
            saddle_escape: false,
            leave_inside: false,
            push_outward: true,
            climb_out: true,
            swept_lookahead: false,
            workspace: None,
            around_axis: None,
            goal_margin: None,
            escape_round_reference: false,
        }
    }
}

impl DsmConfig {
    /// Check the values; with `feature_dim`, also the reference point's dimension.
    pub fn validate(&self, feature_dim: Option<usize>) -> Result<(), String> {
        for (name, v) in [
            ("gain", self.gain),
            ("rho", self.rho),
            ("speed", self.speed),
        ] {
            if !(v.is_finite() && v > 0.0) {
                return Err(format!("dsm.{name} must be a finite number > 0, got {v}"));
            }
        }
        if let Some(t) = self.normalize_above
            && !(t.is_finite() && t >= 0.0)
        {
            return Err(
                "dsm.normalize_above must be a finite number >= 0 (null: never normalize)".into(),
            );
        }
        if !(self.min_gradient.is_finite() && self.min_gradient >= 0.0) {
            return Err("dsm.min_gradient must be a finite number >= 0".into());
        }
        if !(self.safety_margin.is_finite() && self.safety_margin >= 0.0) {
            return Err("dsm.safety_margin must be a finite number >= 0".into());
        }
        if let Some(dc) = &self.demonstrated_clearance {
            if dc.states.len() != dc.clearance.len() {
                return Err(format!(
                    "dsm.demonstrated_clearance has {} states but {} clearances",
                    dc.states.len(),
                    dc.clearance.len()
                ));
            }
            if let Some(i) = dc.states.iter().position(|s| {
                s.iter().any(|v| !v.is_finite()) || feature_dim.is_some_and(|d| s.len() != d)
            }) {
                return Err(format!(
                    "dsm.demonstrated_clearance.states[{i}] must be {} finite values",
                    feature_dim.map_or("the features'".to_string(), |d| d.to_string())
                ));
            }
            if let Some(i) = dc
                .clearance
                .iter()
                .position(|c| !(c.is_finite() && *c >= 0.0))
            {
                return Err(format!(
                    "dsm.demonstrated_clearance.clearance[{i}] must be a finite number >= 0"
                ));
            }
        }
        if let Some(r) = &self.reference_point {
            if r.iter().any(|v| !v.is_finite()) {
                return Err("dsm.reference_point values must be finite".into());
            }
            if let Some(d) = feature_dim
                && r.len() != d
            {
                return Err(format!(
                    "dsm.reference_point needs {d} values (one per constraint feature)"
                ));
            }
        }
        Ok(())
    }
}

/// An obstacle as Huber et al. (2019) model one: star-shaped around `reference`, `ratio` = |x - r| /
/// R(x), the distance from the reference point over the boundary's along the same ray (1 on the
/// boundary), `normal` the boundary's unit normal there, pointing into the obstacle.
#[derive(Debug, Clone, PartialEq)]
pub struct Star {
    pub reference: Vec<f64>,
    pub ratio: f64,
    /// R(x).
    pub radius: f64,
    pub normal: Vec<f64>,
    /// The cosine of the angle between the ray through x and the boundary's outward normal there:
    /// 1 where the ray meets the boundary square on, towards 0 where it grazes it.
    pub incidence: f64,
}

/// The margin is widened along a ray by at most 1 / this: in a pocket of a hull, rays nearly
/// tangent to its boundary would otherwise widen it without bound.
pub const MIN_INCIDENCE: f64 = 0.5;

impl Star {
    /// |x - r| / (R + margin / cos): the safety margin widens the obstacle along the ray, by the
    /// margin over the incidence, so that it is kept along the boundary's normal. Widened by the
    /// margin alone, a face the ray meets obliquely kept only margin x cos: the filter let runs
    /// within 2-4 mm of a learned cup's face at a 6 mm margin (the four cups' transfer runs).
    pub fn margin_ratio(&self, margin: f64) -> f64 {
        let cos = if self.incidence.is_finite() {
            self.incidence.clamp(MIN_INCIDENCE, 1.0)
        } else {
            1.0
        };
        self.ratio * self.radius / (self.radius + margin / cos)
    }
}

/// Gamma: 1 on and inside the learned boundary (zeta <= 0.5), growing with zeta outside.
#[inline]
pub fn gamma(zeta: f64, rho: f64) -> f64 {
    (1.0 + 10.0 * (zeta - 0.5).max(0.0)).powf(1.0 / rho)
}

/// What the modulation did at one point.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Modulated {
    pub gamma: f64,
    /// The velocity was changed (false: flat gradient, or moving away with the tail effect off).
    pub active: bool,
}

/// Modulate `v` in place at a point `x` where the network gives `zeta` and `grad_zeta` (feature space).
/// Returns None (and zeroes `v`) if any input is not finite: the fail-safe answer is to stop.
pub fn modulate(
    v: &mut [f64],
    x: &[f64],
    zeta: f64,
    grad_zeta: &[f64],
    cfg: &DsmConfig,
) -> Option<Modulated> {
    if !(zeta.is_finite()
        && grad_zeta
            .iter()
            .chain(v.iter())
            .chain(x.iter())
            .all(|g| g.is_finite()))
    {
        v.iter_mut().for_each(|c| *c = 0.0);
        return None;
    }
    let g = gamma(zeta, cfg.rho);
    let gnorm = grad_zeta.iter().map(|c| c * c).sum::<f64>().sqrt();
    if gnorm < cfg.min_gradient {
        return Some(Modulated {
            gamma: g,
            active: false,
        });
    }
    // n points into the learned obstacle: the gradient of (1 - zeta).
    Some(modulate_with(
        v,
        x,
        g,
        |k| -grad_zeta[k] / gnorm,
        cfg.tail_effect,
        cfg.reference_point.as_deref(),
    ))
}

/// Modulate `v` in place around a star-shaped obstacle: Gamma = ratio^(1/rho) (1 on and inside the
/// boundary), the first basis vector from the reference point, the tangents orthogonal to the normal.
pub fn modulate_star(v: &mut [f64], x: &[f64], star: &Star, cfg: &DsmConfig) -> Option<Modulated> {
    if !(star.ratio.is_finite()
        && star.radius.is_finite()
        && star
            .normal
            .iter()
            .chain(&star.reference)
            .chain(v.iter())
            .chain(x)
            .all(|c| c.is_finite()))
    {
        v.iter_mut().for_each(|c| *c = 0.0);
        return None;
    }
    let g = star
        .margin_ratio(cfg.safety_margin)
        .max(1.0)
        .powf(1.0 / cfg.rho);
    Some(modulate_with(
        v,
        x,
        g,
        |k| star.normal[k],
        cfg.tail_effect,
        Some(&star.reference),
    ))
}

/// The modulation core for a given Gamma and unit normal `n(k)` pointing into the obstacle, with the
/// first basis vector from `reference` (None: the normal).
fn modulate_with(
    v: &mut [f64],
    x: &[f64],
    g: f64,
    n: impl Fn(usize) -> f64,
    tail_effect: bool,
    reference: Option<&[f64]>,
) -> Modulated {
    let nv: f64 = v.iter().enumerate().map(|(k, vi)| n(k) * vi).sum();
    if !tail_effect && nv <= 0.0 {
        return Modulated {
            gamma: g,
            active: false,
        };
    }
    let (l1, lt) = (1.0 - 1.0 / g, 1.0 + 1.0 / g);
    // r: from the reference point to x (pointing out of the obstacle), or the normal itself.
    if let Some(rp) = reference {
        let rn = crate::geometry::distance(x, rp);
        if rn > 0.0 {
            let nr: f64 = (0..x.len()).map(|k| n(k) * (x[k] - rp[k]) / rn).sum();
            // r must not be (nearly) tangent to the boundary, else E is singular: fall back to n.
            if nr.abs() > 0.1 {
                let c0 = nv / nr;
                for (k, vi) in v.iter_mut().enumerate() {
                    *vi = lt * *vi + (l1 - lt) * c0 * (x[k] - rp[k]) / rn;
                }
                return Modulated {
                    gamma: g,
                    active: true,
                };
            }
        }
    }
    for (k, vi) in v.iter_mut().enumerate() {
        *vi = lt * *vi + (l1 - lt) * nv * n(k);
    }
    Modulated {
        gamma: g,
        active: true,
    }
}

/// Modulate `v` (position space) around a known region that the dynamics block, with Huber's analytic
/// Gamma: r / R for a vertical cylinder, the Mahalanobis radius for an ellipsoid (boxes and velocity
/// limits are left alone). The tail effect is off: motion away from the region passes unchanged.
pub fn modulate_around(v: &mut [f64], x: &[f64], shape: &crate::task::shape::Shape) {
    use crate::task::shape::Shape;
    match shape {
        Shape::Cylinder { center, radius, .. } => {
            let (dx, dy) = (x[0] - center[0], x[1] - center[1]);
            let r = (dx * dx + dy * dy).sqrt();
            if r > 1e-12 {
                let g = (r / radius).max(1.0);
                modulate_with(
                    v,
                    x,
                    g,
                    |k| match k {
                        0 => -dx / r,
                        1 => -dy / r,
                        _ => 0.0,
                    },
                    false,
                    None,
                );
            }
        }
        Shape::Ellipsoid {
            center,
            precision,
            margin,
            ..
        } if *margin == 0.0 => {
            let n = center.len();
            let d: Vec<f64> = x.iter().zip(center).map(|(a, b)| a - b).collect();
            let pd: Vec<f64> = (0..n)
                .map(|i| (0..n).map(|j| precision[i * n + j] * d[j]).sum())
                .collect();
            let q: f64 = d.iter().zip(&pd).map(|(a, b)| a * b).sum();
            let norm = pd.iter().map(|c| c * c).sum::<f64>().sqrt();
            if q > 0.0 && norm > 0.0 {
                modulate_with(v, x, q.sqrt().max(1.0), |k| -pd[k] / norm, false, None);
            }
        }
        _ => {}
    }
}

/// Scale a velocity to `speed` when its norm exceeds `normalize_above` (the reference's output rule).
#[inline]
pub fn normalize_speed(v: &mut [f64], cfg: &DsmConfig) {
    let n = v.iter().map(|c| c * c).sum::<f64>().sqrt();
    if cfg.normalize_above.is_some_and(|t| n > t) && n > 0.0 {
        v.iter_mut().for_each(|c| *c *= cfg.speed / n);
    }
}

/// Buffers for [`safe_velocity`].
#[derive(Debug, Clone, Default)]
pub struct ModulationScratch {
    pub net: Scratch,
    pub grad: Vec<f64>,
    pub next_grad: Vec<f64>,
    pub next: Vec<f64>,
    pub nominal: Vec<f64>,
    pub outward: Vec<f64>,
    /// The first velocity the lookahead found not deeper, while it looks for one that climbs back
    /// out of the margin.
    pub fallback: Vec<f64>,
}

/// The modulated, speed-normalized velocity at `x` for the nominal velocity in `v` (in place).
/// `step`: displacement per unit velocity over one control period, for the lookahead safeguard.
/// Returns None if something was not finite (then `v` is zero).
pub fn safe_velocity<F: Feasibility + ?Sized>(
    f: &F,
    x: &[f64],
    v: &mut [f64],
    cfg: &DsmConfig,
    step: Option<f64>,
    s: &mut ModulationScratch,
) -> Option<Modulated> {
    safe_velocity_around(f, None, x, v, cfg, step, s)
}

/// [`safe_velocity`], modulating around `star` (the learned obstacle's star-shaped hull, which then
/// also keeps the safety margin) when given, else around zeta's level sets. The lookahead always
/// checks zeta itself: whatever the modulation does, the next step never enters the learned obstacle.
pub fn safe_velocity_around<F: Feasibility + ?Sized>(
    f: &F,
    star: Option<&Star>,
    x: &[f64],
    v: &mut [f64],
    cfg: &DsmConfig,
    step: Option<f64>,
    s: &mut ModulationScratch,
) -> Option<Modulated> {
    let d = x.len();
    s.grad.resize(d, 0.0);
    s.next_grad.resize(d, 0.0);
    s.next.resize(d, 0.0);
    let logit = f.logit_grad(x, &mut s.grad, &mut s.net);
    if !logit.is_finite() {
        v.iter_mut().for_each(|c| *c = 0.0);
        return None;
    }
    // How far zeta's estimate puts x from the learned boundary, and the logit's slope there.
    let (here, slope) = (
        boundary_distance(logit, &s.grad),
        s.grad.iter().map(|g| g * g).sum::<f64>().sqrt(),
    );
    if cfg.leave_inside && logit < 0.0 {
        // Inside the learned obstacle nothing is known to be safe but the way out.
        leave_obstacle(v, &s.grad);
        return Some(Modulated {
            gamma: 1.0,
            active: true,
        });
    }
    let z = sigmoid(logit);
    // Gradient of zeta from the gradient of the logit.
    s.grad.iter_mut().for_each(|g| *g *= z * (1.0 - z));
    s.nominal.clear();
    s.nominal.extend_from_slice(v);
    let out = match star {
        Some(star) => {
            s.outward.clear();
            s.outward.extend(star.normal.iter().map(|c| -c));
            modulate_star(v, x, star, cfg)?
        }
        None => {
            s.outward.clear();
            s.outward.extend_from_slice(&s.grad);
            modulate(v, x, z, &s.grad, cfg)?
        }
    };
    if let Some(axis) = cfg.around_axis.as_deref().filter(|a| a.len() == d) {
        across(&mut s.outward, axis);
    }
    normalize_speed(v, cfg);
    // The reference point the modulation turned round, if the escape is to go round it the same
    // way. Not where the escape slides across an axis (the vertical, in space): it then slides in
    // another plane than the modulated velocity, whose side says nothing about the escape's there.
    let reference = match star {
        _ if !cfg.escape_round_reference || cfg.around_axis.is_some() => None,
        Some(star) => Some(star.reference.as_slice()),
        None => cfg.reference_point.as_deref(),
    };
    if cfg.saddle_escape && out.active {
        escape_saddle(v, &s.nominal, &s.outward, x, reference);
    }
    let Some(h) = step.filter(|_| cfg.lookahead) else {
        return Some(out);
    };
    // Slide and push along the outward normal the modulation used: the hull's (horizontal with a
    // vertical reference axis) or zeta's gradient.
    let mut gnorm = s.outward.iter().map(|g| g * g).sum::<f64>().sqrt();
    // Around a star-shaped hull the modulation keeps the margin, measured along the ray; zeta's own
    // distance estimate would disagree with it and brake where the hull lets pass.
    let margin = if star.is_some() {
        0.0
    } else {
        cfg.safety_margin
    };
    // Within the margin a step must also climb back out of it, by up to RECOVERY of its length: a
    // robot let in where the margin is lowered (beside a demonstrated state) would otherwise slide
    // on at that depth where the whole margin applies again. Where no push gets out (a ridge
    // between two learned obstacles), the first step that goes no deeper is taken, as before.
    let deficit = if cfg.climb_out && cfg.push_outward && logit > 0.0 && here.is_finite() {
        (margin - here).max(0.0)
    } else {
        0.0
    };
    let mut fallback = false;
    for attempt in 0..12 {
        if let Some(ws) = &cfg.workspace {
            ws.keep_inside(x, h, v);
        }
        // Never step into the learned obstacle or its margin; within them, never go deeper. With
        // `swept_lookahead`, every point of the path over the horizon is checked, not only its end.
        let samples = if cfg.swept_lookahead {
            let length = h * v.iter().map(|c| c * c).sum::<f64>().sqrt();
            let spacing = (0.5 * margin).max(MIN_SWEEP_SPACING);
            ((length / spacing).ceil() as usize).clamp(1, MAX_SWEEP_SAMPLES)
        } else {
            1
        };
        let (mut clear, mut not_deeper) = (true, true);
        let speed = v.iter().map(|c| c * c).sum::<f64>().sqrt();
        for j in 1..=samples {
            let t = h * j as f64 / samples as f64;
            for k in 0..d {
                s.next[k] = x[k] + t * v[k];
            }
            let ln = f.logit_grad(&s.next, &mut s.next_grad, &mut s.net);
            let there = boundary_distance(ln, &s.next_grad);
            let margin = match &cfg.goal_margin {
                Some(g) if star.is_none() => g.at(&s.next),
                _ => margin,
            };
            // Deeper is a lower logit, not a shorter distance estimate: the estimate (logit over
            // gradient) falls where the network steepens, sideways or outwards, and rises where it
            // flattens inwards, so comparing estimates stopped robots that moved along or away from
            // the boundary and let others in.
            let outside = ln >= 0.0 && there >= margin;
            let climb = slope * deficit.min(RECOVERY * t * speed);
            not_deeper &= ln.is_finite() && (outside || ln >= logit);
            clear &= ln.is_finite() && (outside || ln >= logit + climb);
            if !not_deeper {
                break;
            }
        }
        if clear {
            return Some(out);
        }
        if not_deeper && !fallback {
            s.fallback.clear();
            s.fallback.extend_from_slice(v);
            fallback = true;
        }
        if fallback && attempt >= 4 {
            v.copy_from_slice(&s.fallback);
            return Some(out);
        }
        if star.is_none() && gnorm < cfg.min_gradient {
            // Where zeta is saturated at 1 (its gradient below what the modulation uses), the normal
            // is read where the step meets the obstacle or its margin: the gradient here says nothing
            // about the boundary ahead, and the robot would brake to a stop in front of it. Elsewhere
            // the gradient here is kept: in a pocket the normal ahead can point anywhere.
            let n = s.next_grad.iter().map(|g| g * g).sum::<f64>().sqrt();
            if n.is_finite() && n > 0.0 {
                s.outward.copy_from_slice(&s.next_grad);
                if let Some(axis) = cfg.around_axis.as_deref().filter(|a| a.len() == d) {
                    across(&mut s.outward, axis);
                }
                gnorm = s.outward.iter().map(|g| g * g).sum::<f64>().sqrt();
            }
        }
        if attempt == 0 && gnorm > 0.0 {
            let inward: f64 = s
                .outward
                .iter()
                .zip(v.iter())
                .map(|(g, vi)| -g * vi)
                .sum::<f64>()
                / gnorm;
            if inward > 0.0 {
                // Slide along the boundary at the same speed.
                let speed = v.iter().map(|c| c * c).sum::<f64>().sqrt();
                for (vi, g) in v.iter_mut().zip(&s.outward) {
                    *vi += inward * g / gnorm;
                }
                if cfg.saddle_escape {
                    escape_saddle(v, &s.nominal, &s.outward, x, reference);
                }
                let tangential = v.iter().map(|c| c * c).sum::<f64>().sqrt();
                if tangential > 1e-12 {
                    v.iter_mut().for_each(|c| *c *= speed / tangential);
                }
                continue;
            }
        }
        // The first attempt that only failed to climb is pushed at once, not slowed down first.
        if cfg.push_outward && (attempt >= 1 || fallback) && attempt <= 4 && gnorm > 0.0 {
            // Sliding along a convex boundary loses a little distance each step (its curvature), so
            // within the margin a purely tangential motion is refused and the robot would stall
            // there: push outward, more at each attempt, keeping the tangential motion.
            let speed = v.iter().map(|c| c * c).sum::<f64>().sqrt();
            for (vi, g) in v.iter_mut().zip(&s.outward) {
                *vi += 0.25 * speed * g / gnorm;
            }
            continue;
        }
        v.iter_mut().for_each(|c| *c *= 0.5);
    }
    v.iter_mut().for_each(|c| *c = 0.0);
    Some(Modulated {
        gamma: out.gamma,
        active: true,
    })
}

/// Remove `axis`'s component from the direction `n`, unless that leaves (almost) nothing: `n` then
/// points along the axis, and is kept.
fn across(n: &mut [f64], axis: &[f64]) {
    let aa: f64 = axis.iter().map(|a| a * a).sum();
    let nn: f64 = n.iter().map(|c| c * c).sum();
    if aa == 0.0 || nn == 0.0 {
        return;
    }
    let along = n.iter().zip(axis).map(|(c, a)| c * a).sum::<f64>() / aa;
    let rest: f64 = n
        .iter()
        .zip(axis)
        .map(|(c, a)| (c - along * a).powi(2))
        .sum();
    if rest > 0.01 * nn {
        n.iter_mut().zip(axis).for_each(|(c, a)| *c -= along * a);
    }
}

/// Inside the learned obstacle: keep only motion along zeta's gradient `grad` (the shortest way out),
/// at the outward part of the command's speed but at least half of it, so a robot that finds itself
/// inside (a start there, a model reloaded around it) leaves and goes nowhere else.
pub fn leave_obstacle(v: &mut [f64], grad: &[f64]) {
    let speed = v.iter().map(|c| c * c).sum::<f64>().sqrt();
    let gnorm = grad.iter().map(|c| c * c).sum::<f64>().sqrt();
    if gnorm == 0.0 || !gnorm.is_finite() || !speed.is_finite() {
        v.iter_mut().for_each(|c| *c = 0.0);
        return;
    }
    let out: f64 = v.iter().zip(grad).map(|(a, g)| a * g).sum::<f64>() / gnorm;
    let s = out.max(0.5 * speed);
    for (vi, g) in v.iter_mut().zip(grad) {
        *vi = s * g / gnorm;
    }
}

/// Within the margin, the lookahead asks each step to climb back out by this fraction of its length
/// (the first outward push adds a quarter of the speed along the normal).
const RECOVERY: f64 = 0.25;

/// The swept lookahead samples the path at half the safety margin, at least this far apart (feature
/// units) and at most this many times: an obstacle grown by the margin is at least twice the margin
/// thick, so no path crosses it between two samples.
const MIN_SWEEP_SPACING: f64 = 1e-3;
const MAX_SWEEP_SAMPLES: usize = 512;

/// Below this fraction of the nominal speed, a modulated velocity counts as stalled at a saddle.
const SADDLE_SPEED_FRACTION: f64 = 0.1;

/// If the modulation all but cancelled `nominal` (it pointed into the obstacle along `grad`, the
/// gradient of zeta), add a velocity along the boundary at half the nominal speed. Round a
/// `reference` point (the modulation's, seen from `x`), the way the modulation itself turns there:
/// its output's part across the ray from the reference point is the nominal's, so the escape takes
/// the tangent that agrees with that part. Escaping by the normal alone instead, near the tip of a
/// thin learned obstacle the escape and the modulation went opposite ways on neighbouring faces of
/// the hull, and a filtered robot shuttled on the spot (suite8_2D_04). Without a reference point, or
/// on the ray itself: towards the side the nominal velocity leans to from the normal, else along the
/// axis least aligned with the normal.
fn escape_saddle(
    v: &mut [f64],
    nominal: &[f64],
    grad: &[f64],
    x: &[f64],
    reference: Option<&[f64]>,
) {
    let speed = nominal.iter().map(|c| c * c).sum::<f64>().sqrt();
    let gnorm = grad.iter().map(|c| c * c).sum::<f64>().sqrt();
    let now = v.iter().map(|c| c * c).sum::<f64>().sqrt();
    if speed == 0.0 || gnorm == 0.0 || now >= SADDLE_SPEED_FRACTION * speed {
        return;
    }
    let n = |k: usize| grad[k] / gnorm;
    let tangent = |u: &mut [f64]| {
        let along: f64 = u.iter().enumerate().map(|(k, c)| c * n(k)).sum();
        u.iter_mut()
            .enumerate()
            .for_each(|(k, c)| *c -= along * n(k));
        u.iter().map(|c| c * c).sum::<f64>().sqrt()
    };
    let mut t = nominal.to_vec();
    // The nominal's part across the ray from the reference point, on the boundary's tangent plane,
    // where the modulation used that ray (it falls back to the normal where the ray nearly grazes
    // the boundary).
    let across_ray = reference.and_then(|rp| {
        let rn = crate::geometry::distance(x, rp);
        if rn <= 0.0 {
            return None;
        }
        let r: Vec<f64> = x.iter().zip(rp).map(|(a, b)| (a - b) / rn).collect();
        let nr: f64 = r.iter().enumerate().map(|(k, c)| c * n(k)).sum();
        (nr.abs() > 0.1).then_some(r)
    });
    let mut tn = 0.0;
    if let Some(r) = across_ray {
        let along: f64 = t.iter().zip(&r).map(|(a, b)| a * b).sum();
        t.iter_mut().zip(&r).for_each(|(c, rk)| *c -= along * rk);
        tn = tangent(&mut t);
    }
    if tn <= 1e-3 * speed {
        t.copy_from_slice(nominal);
        tn = tangent(&mut t);
    }
    let t_norm = if tn > 1e-3 * speed {
        tn
    } else {
        let axis = (0..v.len())
            .min_by(|&a, &b| n(a).abs().total_cmp(&n(b).abs()))
            .unwrap_or(0);
        for (k, c) in t.iter_mut().enumerate() {
            *c = f64::from(u8::from(k == axis)) - n(axis) * n(k);
        }
        t.iter().map(|c| c * c).sum::<f64>().sqrt()
    };
    if t_norm > 0.0 {
        for (vi, ti) in v.iter_mut().zip(&t) {
            *vi += 0.5 * speed * ti / t_norm;
        }
    }
}

/// Scale `a` down as a whole so that every axis is within the task's action box (a norm limit
/// already keeps the direction).
fn keep_direction_in_box(task: &Task, a: &mut [f64]) {
    if let crate::task::ActionLimit::Box(b) = &task.action_limit {
        let s = a
            .iter()
            .zip(b)
            .map(|(c, l)| if c.abs() > *l { l / c.abs() } else { 1.0 })
            .fold(1.0, f64::min);
        a.iter_mut().for_each(|c| *c *= s);
    }
}

/// Velocity-space counterpart of the modulation, for constraints on the command itself. The learned
/// feasible set of commands is taken as star-shaped around a reference command known to be feasible
/// (the zero command under the learner's star-shaped prior, else the demonstrations' mean command),
/// as Huber's modulation takes an obstacle as star-shaped around its reference point: the command is
/// moved along the ray from the reference towards the nominal command to the last point that is
/// learned-feasible together with its `margin` neighbourhood (command units: the points `margin` away
/// along every axis, both ways, and along the ray). If the reference itself is learned-infeasible,
/// the command is zero (stop). Returns whether the command is learned-feasible.
pub fn project_velocity(
    a: &mut [f64],
    reference: &[f64],
    net: &Mlp,
    margin: f64,
    scratch: &mut Scratch,
    trial: &mut [f64],
) -> bool {
    let d = a.len();
    let mut probe = [0.0f64; 16];
    // Only the logit's sign is read here: the forward pass alone (the same value as with the
    // gradient), which halves the cost of the many probes of the march and the bisection.
    let logit = |x: &[f64], scratch: &mut Scratch| net.logit(x, scratch);
    // NaN counts as infeasible: compare, then negate.
    let reference_feasible = logit(reference, scratch) >= 0.0;
    if !reference_feasible {
        a.iter_mut().for_each(|c| *c = 0.0);
        return false;
    }
    let length = crate::geometry::distance(a, reference);
    if !length.is_finite() || d > 16 {
        a.iter_mut().for_each(|c| *c = 0.0);
        return false;
    }
    if length == 0.0 {
        return true;
    }
    let margin = if margin.is_finite() {
        margin.max(0.0)
    } else {
        0.0
    };
    // Why a neighbourhood and not logit / |grad logit|: the networks are steep near their boundary,
    // so the linear estimate is far too small there and would stop commands at the reference; and
    // not the distance along the ray alone: a ray that meets the boundary at a grazing angle keeps
    // much less than `margin` from it.
    let mut clear = |x: &[f64], scratch: &mut Scratch| {
        let feasible = logit(x, scratch) >= 0.0;
        if !feasible {
            return false;
        }
        if margin == 0.0 {
            return true;
        }
        let p = &mut probe[..d];
        for k in 0..=2 * d {
            p.copy_from_slice(x);
            if k < 2 * d {
                p[k / 2] += if k % 2 == 0 { margin } else { -margin };
            } else {
                for ((pi, c), r) in p.iter_mut().zip(a.iter()).zip(reference) {
                    *pi += margin * (c - r) / length;
                }
            }
            let feasible = logit(p, scratch) >= 0.0;
            if !feasible {
                return false;
            }
        }
        true
    };
    if clear(a, scratch) {
        return true;
    }
    let at = |t: f64, trial: &mut [f64]| {
        for ((x, r), c) in trial.iter_mut().zip(reference).zip(a.iter()) {
            *x = r + t * (c - r);
        }
    };
    // March from the reference to find the first point without clearance, then bisect it.
    let (mut ok, mut bad) = (0.0, 1.0);
    for j in 1..=32 {
        let t = j as f64 / 32.0;
        at(t, trial);
        if !clear(trial, scratch) {
            bad = t;
            break;
        }
        ok = t;
    }
    for _ in 0..30 {
        let t = 0.5 * (ok + bad);
        at(t, trial);
        if clear(trial, scratch) {
            ok = t;
        } else {
            bad = t;
        }
    }
    at(ok, trial);
    a.copy_from_slice(trial);
    true
}

/// How the learned constraint shapes the policy, from the task's feature map.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicySpace {
    /// The constraint sees the positions: modulate the nominal DS in position space.
    Position,
    /// The constraint sees the command: project the nominal command in velocity space.
    Velocity,
}

impl PolicySpace {
    pub fn of(task: &Task) -> Result<PolicySpace, String> {
        let m = task.action_dim();
        if task.feature_dim() == m
            && task
                .features
                .iter()
                .enumerate()
                .all(|(k, f)| *f == Feature::State(task.position_idx[k]))
        {
            Ok(PolicySpace::Position)
        } else if task.feature_dim() == m
            && task
                .features
                .iter()
                .enumerate()
                .all(|(k, f)| *f == Feature::Action(k))
        {
            Ok(PolicySpace::Velocity)
        } else {
            Err("DSM needs the constraint input to be the position components or the action components, in order".into())
        }
    }
}

/// The DSM policy: the nominal DS towards the goal, modulated by the learned zeta (or nominal when no
/// network is given, as in iteration 0).
pub struct DsmPolicy<'a> {
    task: &'a Task,
    net: Option<&'a Mlp>,
    cfg: &'a DsmConfig,
    /// The settings with this step's margin (lowered near demonstrated states and the goal).
    local: DsmConfig,
    /// The margin near the goal, measured on the first step (None before it; Some(None) where the
    /// goal is no nearer than twice the margin, so the margin stays whole).
    goal_margin: Option<Option<GoalMargin>>,
    space: PolicySpace,
    goal: Vec<f64>,
    step: f64,
    scratch: ModulationScratch,
    x: Vec<f64>,
    pos: Vec<f64>,
    trial: Vec<f64>,
    detour: Option<Detour>,
    guide: Option<&'a crate::policy::guide::LazyGuide<'a>>,
    aim: Vec<f64>,
    /// The positions of the last second (ring buffer, row-major), to tell a stall.
    recent: Vec<f64>,
    recent_at: usize,
    guided: bool,
    /// Metres per position unit: the nominal DS and `min_gradient` are in metres, so that the same
    /// task written in cm or mm is driven the same way (1 where the units are not m, cm or mm).
    metres: f64,
}

/// The guide takes over when the robot has covered less than this fraction of the nominal speed's
/// distance over the last second: the modulation holds it in front of a learned obstacle.
const STALL_FRACTION: f64 = 0.25;

/// A side to pass learned obstacles on (position constraints): until the robot has come `until`
/// along the straight line from `from` towards the goal (unit `along`), the nominal velocity leans
/// towards `side`, orthogonal to it: its speed times `side` is added (a unit `side`: 45 degrees).
/// The modulation still keeps the robot out of the learned obstacle; the lean only decides which way
/// round it goes.
#[derive(Debug, Clone, PartialEq)]
pub struct Detour {
    pub from: Vec<f64>,
    pub along: Vec<f64>,
    pub until: f64,
    pub side: Vec<f64>,
}

impl Detour {
    /// The other way round: the side opposite to where `path` (positions, row-major) strayed
    /// farthest from the straight line from its first point to `goal`, leaning until the point of
    /// that farthest excursion, by `lean` (the length of `side`). None if the path strayed less
    /// than `min_excursion` (it went straight: there is no other way round) or starts at the goal.
    pub fn opposite(path: &[f64], goal: &[f64], min_excursion: f64, lean: f64) -> Option<Detour> {
        let d = goal.len();
        let from = path.get(..d)?;
        let mut along: Vec<f64> = goal.iter().zip(from).map(|(g, s)| g - s).collect();
        let len = crate::geometry::norm(&along);
        if len <= 0.0 {
            return None;
        }
        along.iter_mut().for_each(|c| *c /= len);
        let (mut best, mut until, mut side) = (min_excursion, 0.0, None);
        for p in path.chunks_exact(d) {
            let s: f64 = (0..d).map(|k| (p[k] - from[k]) * along[k]).sum();
            let off: Vec<f64> = (0..d).map(|k| p[k] - from[k] - s * along[k]).collect();
            let n = crate::geometry::norm(&off);
            if n > best {
                (best, until) = (n, s);
                side = Some(off.iter().map(|c| -lean * c / n).collect());
            }
        }
        Some(Detour {
            from: from.to_vec(),
            along,
            until,
            side: side?,
        })
    }

    /// How far `position` (its coordinates in order) has come along the straight line from `from`:
    /// the lean holds while this is below `until`.
    pub fn progress(&self, position: impl IntoIterator<Item = f64>) -> f64 {
        position
            .into_iter()
            .zip(self.from.iter().zip(&self.along))
            .map(|(p, (f, a))| (p - f) * a)
            .sum()
    }
}

impl<'a> DsmPolicy<'a> {
    pub fn new(task: &'a Task, net: Option<&'a Mlp>, cfg: &'a DsmConfig) -> Result<Self, String> {
        let space = PolicySpace::of(task)?;
        let d = task.feature_dim();
        let metres = task.metres_per_position_unit().unwrap_or(1.0);
        let mut local = cfg.clone();
        if space == PolicySpace::Position {
            // zeta's gradient per position unit is per metre times metres per unit.
            local.min_gradient *= metres;
        }
        Ok(DsmPolicy {
            task,
            net,
            cfg,
            local,
            goal_margin: None,
            space,
            goal: task.goal().to_vec(),
            step: task.spec.dynamics.dt * task.spec.dynamics.velocity_scale,
            scratch: ModulationScratch::default(),
            x: vec![0.0; d],
            pos: vec![0.0; task.action_dim()],
            trial: vec![0.0; d],
            detour: None,
            guide: None,
            aim: vec![0.0; task.action_dim()],
            recent: Vec::new(),
            recent_at: 0,
            guided: false,
            metres,
        })
    }

    /// Go round learned obstacles on the detour's side (position constraints).
    pub fn with_detour(mut self, detour: Detour) -> Self {
        self.detour = Some(detour);
        self
    }

    /// Once the robot stalls, head for the guide's intermediate attractor wherever the goal is out of
    /// sight behind a learned obstacle (position constraints; the guide must be planned towards this
    /// policy's goal). Until then the policy is the plain DSM policy, whose way round an obstacle
    /// follows the modulated flow; the guide is its way out of the pockets that flow ends in.
    pub fn with_guide(mut self, guide: &'a crate::policy::guide::LazyGuide<'a>) -> Self {
        // Only a way through positions can be planned: elsewhere stalls are not even watched for.
        self.guide = (self.space == PolicySpace::Position).then_some(guide);
        self
    }

    /// Whether the run stalled and the guide took over (see [`Self::with_guide`]): a stall where no
    /// guide can be planned (a velocity constraint) does not count.
    pub fn guided(&self) -> bool {
        self.guided && self.guide.is_some_and(|g| g.get().is_some())
    }

    /// Aim at another goal (constraint transfer).
    pub fn with_goal(mut self, goal: &[f64]) -> Self {
        self.goal = goal.to_vec();
        self.goal_margin = None;
        self
    }
}

impl DsmPolicy<'_> {
    /// Whether the robot has stalled (from then on, for the rest of the episode): over the last second
    /// it covered less than [`STALL_FRACTION`] of what the nominal speed covers. Records `pos`.
    fn stalled(&mut self) -> bool {
        if self.guided {
            return true;
        }
        let d = self.pos.len();
        let window = (1.0 / self.task.spec.dynamics.dt).round().max(1.0) as usize;
        if self.recent.len() < window * d {
            self.recent.extend_from_slice(&self.pos);
            return false;
        }
        let at = self.recent_at * d;
        let moved = crate::geometry::distance(&self.pos, &self.recent[at..at + d]);
        self.recent[at..at + d].copy_from_slice(&self.pos);
        self.recent_at = (self.recent_at + 1) % window;
        // What the nominal system covers here in a second (as `normalize_speed` sets its speed): it
        // slows down near the goal.
        let raw = self.cfg.gain * self.metres * crate::geometry::distance(&self.pos, &self.goal);
        let speed = match self.cfg.normalize_above {
            Some(above) if raw > above => self.cfg.speed,
            _ => raw,
        };
        let nominal = window as f64 * self.step * speed;
        self.guided = moved < STALL_FRACTION * nominal;
        self.guided
    }
}

impl Policy for DsmPolicy<'_> {
    fn act(&mut self, state: &[f64], action: &mut [f64]) {
        for (k, &i) in self.task.position_idx.iter().enumerate() {
            action[k] = -self.cfg.gain * self.metres * (state[i] - self.goal[k]);
            self.pos[k] = state[i];
        }
        if let Some(guide) = self.guide
            && self.stalled()
            && let Some(guide) = guide.get()
            && guide.aim(&self.pos, &mut self.aim)
        {
            // Towards the attractor on the way, as fast as the nominal system towards the goal.
            let speed = crate::geometry::norm(action);
            let to_aim = crate::geometry::distance(&self.aim, &self.pos);
            if to_aim > 0.0 {
                for (k, a) in action.iter_mut().enumerate() {
                    *a = speed * (self.aim[k] - self.pos[k]) / to_aim;
                }
            }
        }
        if let Some(d) = &self.detour
            && d.progress(self.pos.iter().copied()) < d.until
        {
            let speed = crate::geometry::norm(action);
            action
                .iter_mut()
                .zip(&d.side)
                .for_each(|(a, c)| *a += speed * c);
        }
        // Regions the dynamics block are known geometry: the nominal DS goes around them.
        for b in &self.task.blocking {
            modulate_around(action, &self.pos, b);
        }
        match (self.space, self.net) {
            (PolicySpace::Velocity, None) => {
                normalize_speed(action, self.cfg);
                self.trial.copy_from_slice(action);
                crate::task::sim::Simulator::limit_action(self.task, &self.trial, action);
            }
            (PolicySpace::Position, None) => normalize_speed(action, self.cfg),
            (PolicySpace::Position, Some(net)) => {
                for (k, &i) in self.task.position_idx.iter().enumerate() {
                    self.x[k] = state[i];
                }
                let mut margin = match &self.cfg.demonstrated_clearance {
                    Some(dc) => dc.margin_at(&self.x, self.cfg.safety_margin),
                    None => self.cfg.safety_margin,
                };
                // A goal within the margin of the learned obstacle is one the task asks for.
                let goal = &self.goal;
                let tolerance = self.task.spec.goal.tolerance;
                let near_goal = self.goal_margin.get_or_insert_with(|| {
                    let (margin, s) = (self.cfg.safety_margin, &mut self.scratch);
                    s.grad.resize(goal.len(), 0.0);
                    GoalMargin::of(net, goal, tolerance, margin, &mut s.grad, &mut s.net)
                });
                if let Some(g) = near_goal {
                    margin = margin.min(g.at(&self.x));
                }
                self.local.safety_margin = margin;
                // Climb back out only where the whole margin applies: where it is lowered (a
                // corridor the demonstrations used, the goal) the robot may be closer on purpose.
                self.local.climb_out = self.cfg.climb_out && margin >= self.cfg.safety_margin;
                safe_velocity(
                    net,
                    &self.x,
                    action,
                    &self.local,
                    Some(self.step),
                    &mut self.scratch,
                );
            }
            (PolicySpace::Velocity, Some(net)) => {
                normalize_speed(action, self.cfg);
                if self.cfg.keep_direction {
                    keep_direction_in_box(self.task, action);
                }
                // The command space is the task's action set: limit first, then project.
                self.trial.copy_from_slice(action);
                crate::task::sim::Simulator::limit_action(self.task, &self.trial, action);
                let zero = [0.0; 8];
                let reference = self
                    .cfg
                    .velocity_reference
                    .as_deref()
                    .unwrap_or(&zero[..action.len().min(8)]);
                project_velocity(
                    action,
                    reference,
                    net,
                    self.cfg.safety_margin,
                    &mut self.scratch.net,
                    &mut self.trial,
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Analytic zeta of a sphere of radius R at c: zeta = sigmoid(k (|x - c| - R)).
    fn sphere(x: &[f64], c: &[f64], r: f64, k: f64) -> (f64, Vec<f64>) {
        let d: Vec<f64> = x.iter().zip(c).map(|(a, b)| a - b).collect();
        let n = d.iter().map(|v| v * v).sum::<f64>().sqrt();
        let z = 1.0 / (1.0 + (-k * (n - r)).exp());
        let dz = z * (1.0 - z) * k;
        (z, d.iter().map(|v| dz * v / n).collect())
    }

    /// A learned constraint along the first axis whose logit is steep inside and flattens outwards:
    /// 4 (t - 0.5) up to t = 1, then 2 + 0.1 (t - 1); the boundary is at t = 0.5.
    struct Flattening;

    impl Feasibility for Flattening {
        fn logit_grad(&self, x: &[f64], grad: &mut [f64], _: &mut Scratch) -> f64 {
            grad.fill(0.0);
            let t = x[0];
            if t < 1.0 {
                grad[0] = 4.0;
                4.0 * (t - 0.5)
            } else {
                grad[0] = 0.1;
                2.0 + 0.1 * (t - 1.0)
            }
        }
    }

    #[test]
    fn the_distance_along_the_gradient_is_where_the_boundary_is_where_the_estimate_reads_long() {
        let (mut g, mut s) = (vec![0.0; 2], Scratch::default());
        let d = |x: &[f64], range: f64, g: &mut Vec<f64>, s: &mut Scratch| {
            boundary_distance_along_gradient(&Flattening, x, 0.0, range, g, s)
        };
        // 2.5 from the boundary, where logit over gradient reads 22.
        let far = [3.0, 0.7];
        let l = Flattening.logit_grad(&far, &mut g, &mut s);
        assert!((boundary_distance(l, &g) - 22.0).abs() < 1e-9);
        assert!((d(&far, 10.0, &mut g, &mut s) - 2.5).abs() < 1e-4);
        // Inside: negative, the way out.
        assert!((d(&[0.25, 0.0], 10.0, &mut g, &mut s) + 0.25).abs() < 1e-4);
        assert!((d(&[0.5 + 1e-7, 0.0], 10.0, &mut g, &mut s)).abs() < 1e-4);
        // No boundary within the range: as far as can be told, infinitely far.
        assert_eq!(d(&far, 2.0, &mut g, &mut s), f64::INFINITY);
        // Flat zeta: no direction to look in.
        struct Flat;
        impl Feasibility for Flat {
            fn logit_grad(&self, _: &[f64], grad: &mut [f64], _: &mut Scratch) -> f64 {
                grad.fill(0.0);
                -3.0
            }
        }
        let flat = boundary_distance_along_gradient(&Flat, &[0.1, 0.0], 0.0, 10.0, &mut g, &mut s);
        assert_eq!(flat, f64::NEG_INFINITY);
        // A ball of radius 0.5: its distance in 3-D.
        let ball = Sphere {
            c: [0.0; 3],
            r: 0.5,
            k: 10.0,
        };
        let mut g3 = vec![0.0; 3];
        let x = [0.6, 0.0, 0.8];
        let d = boundary_distance_along_gradient(&ball, &x, 0.0, 10.0, &mut g3, &mut s);
        assert!((d - 0.5).abs() < 1e-4, "{d}");
    }

    #[test]
    fn the_margin_is_half_the_clearance_at_a_tight_demonstrated_state_and_grows_back_continuously()
    {
        // A learned ball of radius 0.5 at the origin; demonstrated states 0.05 and 0.3 outside it.
        let net = Sphere {
            c: [0.0; 3],
            r: 0.5,
            k: 10.0,
        };
        let states = [0.55, 0.0, 0.0, 0.0, 0.8, 0.0];
        let dc = DemonstratedClearance::of(&net, &states, 3, 0.1).unwrap();
        // Only the state closer than twice the margin lowers it.
        assert_eq!(dc.states, vec![vec![0.55, 0.0, 0.0]]);
        assert!((dc.clearance[0] - 0.05).abs() < 1e-9, "{dc:?}");
        assert!((dc.margin_at(&[0.55, 0.0, 0.0], 0.1) - 0.025).abs() < 1e-9);
        assert!((dc.margin_at(&[0.55, 0.05, 0.0], 0.1) - 0.075).abs() < 1e-9);
        assert_eq!(dc.margin_at(&[0.0, 0.8, 0.0], 0.1), 0.1);
        assert!((dc.margin_at_least(0.1) - 0.025).abs() < 1e-9);
        // Lipschitz 1: no jump anywhere along a line past the state.
        let mut last = dc.margin_at(&[0.55, -1.0, 0.0], 0.1);
        for i in 1..=2000 {
            let m = dc.margin_at(&[0.55, -1.0 + i as f64 * 1e-3, 0.0], 0.1);
            assert!((m - last).abs() <= 1e-3 + 1e-12);
            last = m;
        }
        // A state inside the learned obstacle, or none tight: nothing to lower.
        assert!(DemonstratedClearance::of(&net, &[0.2, 0.0, 0.0, 0.0, 0.8, 0.0], 3, 0.1).is_none());
    }

    #[test]
    fn the_margin_from_the_radius_query_is_the_least_over_every_demonstrated_state() {
        use rand::{RngExt, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        for dim in [2, 3, 20] {
            let states: Vec<Vec<f64>> = (0..500)
                .map(|_| (0..dim).map(|_| rng.random_range(-1.0..1.0)).collect())
                .collect();
            let clearance: Vec<f64> = (0..500).map(|_| rng.random_range(0.0..0.4)).collect();
            let dc = DemonstratedClearance::new(states.clone(), clearance.clone());
            for _ in 0..200 {
                let x: Vec<f64> = (0..dim).map(|_| rng.random_range(-1.2..1.2)).collect();
                let scanned = states
                    .iter()
                    .zip(&clearance)
                    .map(|(d, c)| 0.5 * c + crate::geometry::distance(&x, d))
                    .fold(0.3, f64::min);
                assert_eq!(dc.margin_at(&x, 0.3), scanned, "dim {dim} at {x:?}");
            }
        }
    }

    #[test]
    fn a_corrupt_demonstrated_clearance_in_a_model_file_is_refused_naming_the_field() {
        let dc = DemonstratedClearance::new(vec![vec![0.55, 0.0, 0.0]], vec![0.05]);
        let mut cfg = DsmConfig {
            demonstrated_clearance: Some(std::sync::Arc::new(dc.clone())),
            ..DsmConfig::default()
        };
        assert_eq!(cfg.validate(Some(3)), Ok(()));
        let e = cfg.validate(Some(2)).unwrap_err();
        assert!(e.contains("demonstrated_clearance.states[0]"), "{e}");
        cfg.demonstrated_clearance = Some(std::sync::Arc::new(DemonstratedClearance::new(
            dc.states.clone(),
            vec![f64::NAN],
        )));
        let e = cfg.validate(Some(3)).unwrap_err();
        assert!(e.contains("demonstrated_clearance.clearance[0]"), "{e}");
        cfg.demonstrated_clearance = Some(std::sync::Arc::new(DemonstratedClearance::new(
            dc.states.clone(),
            vec![],
        )));
        assert!(
            cfg.validate(Some(3))
                .unwrap_err()
                .contains("1 states but 0")
        );
    }

    #[test]
    fn the_margin_around_a_hull_is_kept_along_the_boundarys_normal_where_a_ray_meets_it_obliquely()
    {
        // A planar face through the boundary point at R = 0.5 on the x-axis: a point t beyond it
        // along the ray is t * incidence from the face.
        let (radius, margin) = (0.5, 0.1);
        let star = |t: f64, incidence: f64| Star {
            reference: vec![0.0; 3],
            ratio: (radius + t) / radius,
            radius,
            normal: vec![-incidence, -(1.0 - incidence * incidence).sqrt(), 0.0],
            incidence,
        };
        // Square on: the margin along the ray is the margin.
        assert!(star(0.99 * margin, 1.0).margin_ratio(margin) < 1.0);
        assert!(star(1.01 * margin, 1.0).margin_ratio(margin) > 1.0);
        // At incidence 0.6, a point a margin out along the ray is only 0.06 from the face: within.
        assert!(star(margin, 0.6).margin_ratio(margin) < 1.0);
        assert!(star(0.99 * margin / 0.6, 0.6).margin_ratio(margin) < 1.0);
        assert!(star(1.01 * margin / 0.6, 0.6).margin_ratio(margin) > 1.0);
        // Grazing rays widen the hull by at most margin / MIN_INCIDENCE.
        assert!(star(1.01 * margin / MIN_INCIDENCE, 0.05).margin_ratio(margin) > 1.0);
        assert!(star(0.99 * margin / MIN_INCIDENCE, 0.05).margin_ratio(margin) < 1.0);
        // Without a margin the boundary is where it was.
        assert!((star(0.0, 0.6).margin_ratio(0.0) - 1.0).abs() < 1e-12);
    }

    #[test]
    fn around_a_star_shaped_obstacle_nothing_enters_it_on_its_boundary_or_margin() {
        let cfg = DsmConfig {
            safety_margin: 0.1,
            ..DsmConfig::default()
        };
        // A boundary point at radius R = 0.5 from the reference point, with a tilted normal.
        let n = [-0.8, -0.6, 0.0];
        for ratio in [1.0, 1.1, 1.19] {
            let x = [0.5 * ratio, 0.0, 0.0];
            let star = Star {
                reference: vec![0.0; 3],
                ratio,
                radius: 0.5,
                normal: n.to_vec(),
                incidence: 0.8,
            };
            let mut v = [-1.0, 0.3, 0.2];
            modulate_star(&mut v, &x, &star, &cfg).unwrap();
            let inward: f64 = v.iter().zip(&n).map(|(a, b)| a * b).sum();
            // Within R + margin (0.6 here) Gamma is 1: no component into the obstacle.
            assert!(inward.abs() < 1e-12, "ratio {ratio}: inward {inward}");
        }
        let far = Star {
            reference: vec![0.0; 3],
            ratio: 3.0,
            radius: 0.5,
            normal: n.to_vec(),
            incidence: 0.8,
        };
        let mut v = [-1.0, 0.3, 0.2];
        modulate_star(&mut v, &[1.5, 0.0, 0.0], &far, &cfg).unwrap();
        let inward: f64 = v.iter().zip(&n).map(|(a, b)| a * b).sum();
        assert!(inward > 0.0, "far away the obstacle is approached");
        let mut nan = far.clone();
        nan.ratio = f64::NAN;
        let mut v = [-1.0, 0.3, 0.2];
        assert!(modulate_star(&mut v, &[1.5, 0.0, 0.0], &nan, &cfg).is_none());
        assert_eq!(v, [0.0; 3], "not finite: stop");
    }

    #[test]
    fn leaving_the_obstacle_keeps_only_the_way_out_at_least_at_half_speed() {
        let grad = [0.0, 2.0, 0.0];
        let mut v = [0.3, -0.4, 0.0];
        leave_obstacle(&mut v, &grad);
        assert_eq!(v, [0.0, 0.25, 0.0], "inward command: out at half its speed");
        let mut v = [0.3, 0.4, 0.0];
        leave_obstacle(&mut v, &grad);
        assert_eq!(v, [0.0, 0.4, 0.0], "the outward part, as commanded");
        let mut v = [0.3, 0.4, 0.0];
        leave_obstacle(&mut v, &[0.0; 3]);
        assert_eq!(v, [0.0; 3], "no way out known: stop");
        let mut v = [f64::NAN, 0.4, 0.0];
        leave_obstacle(&mut v, &grad);
        assert_eq!(v, [0.0; 3], "a command that is not finite: stop");
    }

    #[test]
    fn on_the_boundary_no_velocity_component_enters_the_obstacle() {
        let cfg = DsmConfig::default();
        let c = [0.0, 0.0, 0.0];
        for (x, v) in [
            ([0.5, 0.0, 0.0], [-1.0, 0.3, 0.2]),
            ([0.0, 0.3, 0.4], [0.1, -2.0, -1.0]),
            ([0.5, 0.0, 0.0], [-1.0, 0.0, 0.0]),
        ] {
            let (z, g) = sphere(&x, &c, 0.5, 40.0);
            assert!((z - 0.5).abs() < 1e-12);
            let mut m = v;
            modulate(&mut m, &x, z, &g, &cfg).unwrap();
            let inward: f64 = m.iter().zip(&x).map(|(a, b)| -a * b).sum();
            assert!(inward.abs() < 1e-12, "inward component {inward}");
        }
    }

    #[test]
    fn reference_point_variant_matches_an_explicit_e_d_e_inverse() {
        // Build E, D explicitly with nalgebra and compare with the closed form.
        use nalgebra::{Matrix3, Vector3};
        let x = Vector3::new(0.6, 0.2, -0.1);
        let rp = [0.1, 0.05, 0.0];
        let (z, g) = sphere(x.as_slice(), &[0.0, 0.0, 0.0], 0.5, 10.0);
        let cfg = DsmConfig {
            reference_point: Some(rp.to_vec()),
            ..DsmConfig::default()
        };
        let v = Vector3::new(-1.0, 0.4, 0.3);
        let mut m = [v[0], v[1], v[2]];
        modulate(&mut m, x.as_slice(), z, &g, &cfg).unwrap();
        let n = -Vector3::from_row_slice(&g).normalize();
        let r = (x - Vector3::from_row_slice(&rp)).normalize();
        let e1 = n.cross(&Vector3::new(0.0, 0.0, 1.0)).normalize();
        let e2 = n.cross(&e1).normalize();
        let e = Matrix3::from_columns(&[r, e1, e2]);
        let gm = gamma(z, cfg.rho);
        let d = Matrix3::from_diagonal(&Vector3::new(
            1.0 - 1.0 / gm,
            1.0 + 1.0 / gm,
            1.0 + 1.0 / gm,
        ));
        let expect = e * d * e.try_inverse().unwrap() * v;
        for k in 0..3 {
            assert!((m[k] - expect[k]).abs() < 1e-12, "{m:?} vs {expect:?}");
        }
    }

    #[test]
    fn tail_effect_switch_leaves_motion_away_unmodulated() {
        let x = [0.6, 0.0];
        let (z, g) = sphere(&x, &[0.0, 0.0], 0.5, 20.0);
        let away = [1.0, 0.5];
        let off = DsmConfig {
            tail_effect: false,
            ..DsmConfig::default()
        };
        let mut m = away;
        assert!(!modulate(&mut m, &x, z, &g, &off).unwrap().active);
        assert_eq!(m, away);
        let mut m = away;
        assert!(
            modulate(&mut m, &x, z, &g, &DsmConfig::default())
                .unwrap()
                .active
        );
        assert_ne!(m, away);
    }

    #[test]
    fn non_finite_input_gives_zero_velocity() {
        let mut v = [1.0, 2.0];
        assert!(
            modulate(
                &mut v,
                &[0.0, 0.0],
                f64::NAN,
                &[0.0, 1.0],
                &DsmConfig::default()
            )
            .is_none()
        );
        assert_eq!(v, [0.0, 0.0]);
    }

    struct Sphere {
        c: [f64; 3],
        r: f64,
        k: f64,
    }
    impl Feasibility for Sphere {
        fn logit_grad(&self, x: &[f64], grad: &mut [f64], _: &mut Scratch) -> f64 {
            let d: Vec<f64> = x.iter().zip(&self.c).map(|(a, b)| a - b).collect();
            let n = d.iter().map(|v| v * v).sum::<f64>().sqrt();
            for (g, v) in grad.iter_mut().zip(&d) {
                *g = self.k * v / n;
            }
            self.k * (n - self.r)
        }
    }

    /// Drive the modulated DS towards `goal` from `x` (control period 0.01 s) for up to `steps` steps,
    /// stopping within `reached` of the goal (0: never), asserting that no step enters the sphere.
    /// Returns the steps taken and the final position.
    fn drive(
        f: &Sphere,
        cfg: &DsmConfig,
        mut x: [f64; 3],
        goal: [f64; 3],
        steps: usize,
        reached: f64,
    ) -> (usize, [f64; 3]) {
        let h = 0.01;
        let mut s = ModulationScratch::default();
        for taken in 0..steps {
            if (0..3).map(|k| (x[k] - goal[k]).powi(2)).sum::<f64>() < reached * reached {
                return (taken, x);
            }
            let mut v = [goal[0] - x[0], goal[1] - x[1], goal[2] - x[2]];
            safe_velocity(f, &x, &mut v, cfg, Some(h), &mut s).unwrap();
            for k in 0..3 {
                x[k] += h * v[k];
            }
            assert!(
                f.logit_grad(&x, &mut [0.0; 3], &mut s.net) >= 0.0,
                "entered at {x:?}"
            );
        }
        (steps, x)
    }

    #[test]
    fn the_other_way_round_leans_against_the_farthest_excursion_until_past_it() {
        // A path from the origin to (1, 0, 0) that bulges to +y, farthest at x = 0.5.
        let path: Vec<f64> = (0..=10)
            .flat_map(|i| {
                let x = i as f64 / 10.0;
                [x, 0.3 * (std::f64::consts::PI * x).sin(), 0.0]
            })
            .collect();
        let goal = [1.0, 0.0, 0.0];
        let d = Detour::opposite(&path, &goal, 0.05, 1.0).unwrap();
        assert_eq!(d.from, vec![0.0, 0.0, 0.0]);
        assert_eq!(d.along, vec![1.0, 0.0, 0.0]);
        assert!((d.until - 0.5).abs() < 1e-12, "until {}", d.until);
        assert!((d.side[1] + 1.0).abs() < 1e-12, "side {:?}", d.side);
        // A path that strays less than the minimum went straight: no other way round.
        assert!(Detour::opposite(&path, &goal, 0.31, 1.0).is_none());
        // A lean of a half: half a unit towards that side (27 degrees).
        let half = Detour::opposite(&path, &goal, 0.05, 0.5).unwrap();
        assert!((half.side[1] + 0.5).abs() < 1e-12, "side {:?}", half.side);
        // A path that starts at the goal has no line to stray from.
        assert!(Detour::opposite(&goal, &goal, 0.0, 1.0).is_none());
    }

    #[test]
    fn a_goal_within_the_margin_of_the_learned_obstacle_is_reached_without_entering_it() {
        use crate::task::sim::{Simulator, Trajectory};
        let task = Task::load("reach_obstacle_3d").unwrap();
        let goal = task.goal().to_vec();
        // The learned obstacle: x beyond a wall 3 mm past the goal, so the goal lies within the
        // 2 cm margin, and the band the robot has to cross to come within the goal's tolerance
        // (1 cm) is deeper into it all the way. The logit is linear, 1000 (wall - x): two LeakyReLU
        // units of opposite sign add up to a linear function, and its distance estimate is exact.
        let wall = goal[0] + 0.003;
        let mut net = Mlp::new(3, &[2], 0);
        let k = 1000.0 / (1.0 + 0.01);
        net.params = vec![-1.0, 0.0, 0.0, 1.0, 0.0, 0.0, wall, -wall, k, -k, 0.0];
        let cfg = DsmConfig {
            safety_margin: 0.02,
            ..DsmConfig::default()
        };
        let mut sim = Simulator::new(&task);
        for s in task.start_states() {
            let mut policy = DsmPolicy::new(&task, Some(&net), &cfg).unwrap();
            let mut t = Trajectory::with_capacity(&task);
            sim.rollout(&s, &mut policy, &mut t);
            let end = task.position_of(&t.final_state);
            assert!(t.reached_goal, "stopped at {end:?}");
            for i in 0..t.len() {
                let x = task.position_of(t.state(i));
                assert!(x[0] < wall, "entered the learned obstacle at {x:?}");
            }
        }
    }

    #[test]
    fn saddle_escape_slides_around_an_obstacle_dead_ahead_instead_of_stalling() {
        // The goal is straight behind a sphere: without the escape the modulated DS stalls in front of it.
        let f = Sphere {
            c: [0.0, 0.0, 0.0],
            r: 0.3,
            k: 60.0,
        };
        let run = |escape: bool| {
            let cfg = DsmConfig {
                gain: 1.0,
                normalize_above: None,
                tail_effect: false,
                saddle_escape: escape,
                ..DsmConfig::default()
            };
            let goal = [1.0, 0.0, 0.0];
            let (_, x) = drive(&f, &cfg, [-0.8, 0.0, 0.0], goal, 2000, 0.0);
            (x[0] - goal[0]).abs() + x[1].abs() + x[2].abs()
        };
        assert!(run(false) > 1.0, "expected the plain modulation to stall");
        let e = run(true);
        assert!(e < 0.01, "the escape did not reach the goal: {e}");
    }

    #[test]
    fn round_a_reference_point_the_saddle_escape_turns_the_way_the_modulation_does() {
        // The lower face of a thin hull's tip, its reference point at the origin; the robot a little
        // above the ray along +x, the goal far behind the hull on that ray. The modulation turns
        // round the reference point over the top (the robot is above the ray); by the face's
        // normal the nominal velocity leans the other way, down along the face, and escaping that
        // way the robot shuttled between neighbouring faces (suite8_2D_04).
        let f = Sphere {
            c: [9.0, 9.0, 0.0],
            r: 0.1,
            k: 1.0,
        };
        let outward = [0.4, -0.92];
        let on = outward.iter().map(|c| c * c).sum::<f64>().sqrt();
        let star = Star {
            reference: vec![0.0, 0.0],
            ratio: 1.0,
            radius: 1.0,
            normal: outward.iter().map(|c| -c / on).collect(),
            incidence: 0.4,
        };
        let (x, goal) = ([1.0, 0.01], [-9.0, 0.0]);
        let nominal = [goal[0] - x[0], goal[1] - x[1]];
        let speed = nominal.iter().map(|c| c * c).sum::<f64>().sqrt();
        // Round the reference point: the part across its ray through x, positive over the top.
        let across = |v: &[f64]| x[0] * v[1] - x[1] * v[0];
        // Along the face's tangent, positive up: the nominal velocity leans down along it.
        let up_the_face = |v: &[f64]| (outward[1] * v[0] - outward[0] * v[1]) / -on;
        assert!(up_the_face(&nominal) < 0.0 && across(&nominal) > 0.0);
        let run = |escape: bool, round_reference: bool| {
            let cfg = DsmConfig {
                normalize_above: None,
                saddle_escape: escape,
                escape_round_reference: round_reference,
                ..DsmConfig::default()
            };
            let mut v = nominal;
            let mut s = ModulationScratch::default();
            safe_velocity_around(&f, Some(&star), &x, &mut v, &cfg, None, &mut s).unwrap();
            v
        };
        let plain = run(false, true);
        assert!(across(&plain) > 0.0, "the modulation turned {plain:?}");
        assert!(
            plain.iter().map(|c| c * c).sum::<f64>().sqrt() < 0.1 * speed,
            "not a saddle: {plain:?}"
        );
        let escaped = run(true, true);
        let fast = escaped.iter().map(|c| c * c).sum::<f64>().sqrt();
        assert!(fast >= 0.45 * speed, "no escape: {escaped:?}");
        assert!(across(&escaped) > 0.0, "escaped {escaped:?}");
        assert!(up_the_face(&escaped) > 0.0, "escaped {escaped:?}");
        // Along the face, never into the hull.
        let inward: f64 = escaped.iter().zip(&star.normal).map(|(a, b)| a * b).sum();
        assert!(inward.abs() < 1e-9 * speed, "inward {inward}");
        // Where the filter follows zeta's level sets instead (their slide leans by the normal), the
        // escape leans by the normal too.
        let by_normal = run(true, false);
        assert!(up_the_face(&by_normal) < 0.0, "escaped {by_normal:?}");
    }

    #[test]
    fn a_robot_facing_a_saturated_boundary_slides_along_it_instead_of_braking_to_a_stop() {
        // zeta is exactly 1 (its gradient 0) a few millimetres outside this sphere, inside the safety
        // margin: the normal for the lookahead's slide must come from where the step meets the margin.
        let f = Sphere {
            c: [0.5, 0.0, 0.0],
            r: 0.1,
            k: 1e4,
        };
        let cfg = DsmConfig {
            gain: 1.0,
            safety_margin: 0.01,
            ..DsmConfig::default()
        };
        let (steps, x) = drive(&f, &cfg, [0.0, 0.03, 0.0], [1.0, 0.0, 0.0], 1000, 0.01);
        assert!(steps < 1000, "stalled at {x:?}");
    }

    /// A wall at x = 0 (infeasible below) whose logit k x w steepens away from p (w = 1 + a |x - p|^2),
    /// as a network's does towards its corners: at p the distance estimate (logit over gradient)
    /// falls along the wall and outwards, and rises inwards.
    struct SteepeningWall {
        k: f64,
        a: f64,
        p: [f64; 2],
    }
    impl Feasibility for SteepeningWall {
        fn logit_grad(&self, x: &[f64], grad: &mut [f64], _: &mut Scratch) -> f64 {
            let r = [x[0] - self.p[0], x[1] - self.p[1]];
            let w = 1.0 + self.a * (r[0] * r[0] + r[1] * r[1]);
            grad[0] = self.k * (w + x[0] * 2.0 * self.a * r[0]);
            grad[1] = self.k * x[0] * 2.0 * self.a * r[1];
            self.k * x[0] * w
        }
    }

    #[test]
    fn a_robot_within_the_margin_climbs_back_out_of_it_while_moving_along_the_boundary() {
        // The wall x = 0 (logit 100 x); a robot 1 cm from it, inside the 5 cm margin, as one let in
        // where the margin was lowered, commanded along the wall.
        let f = SteepeningWall {
            k: 100.0,
            a: 0.0,
            p: [0.0, 0.0],
        };
        let run = |climb_out: bool| {
            let cfg = DsmConfig {
                safety_margin: 0.05,
                min_gradient: f64::INFINITY,
                climb_out,
                ..DsmConfig::default()
            };
            let (mut x, mut s) = ([0.01, 0.0], ModulationScratch::default());
            for _ in 0..200 {
                let mut v = [0.0, 1.0];
                safe_velocity(&f, &x, &mut v, &cfg, Some(0.01), &mut s).unwrap();
                x = [x[0] + 0.01 * v[0], x[1] + 0.01 * v[1]];
            }
            x
        };
        let (on, off) = (run(true), run(false));
        assert!(on[0] >= 0.05 - 1e-9 && on[1] > 1.0, "{on:?}");
        // Without it, going no deeper is all that is asked: it slides on at 1 cm.
        assert!((off[0] - 0.01).abs() < 1e-9 && off[1] > 1.0, "{off:?}");
    }

    #[test]
    fn within_the_margin_a_robot_moves_along_the_boundary_and_never_deeper_where_the_estimate_misleads()
     {
        let f = SteepeningWall {
            k: 100.0,
            a: 5000.0,
            p: [0.02, 0.0],
        };
        let cfg = DsmConfig {
            safety_margin: 0.05,
            // The lookahead alone: no modulation.
            min_gradient: f64::INFINITY,
            ..DsmConfig::default()
        };
        let x = f.p;
        let mut s = ModulationScratch::default();
        // Along the wall: the logit rises (the robot keeps its distance), the estimate falls.
        let mut v = [0.0, 1.0];
        safe_velocity(&f, &x, &mut v, &cfg, Some(0.001), &mut s).unwrap();
        assert!(v[1] > 0.9, "stopped beside the wall: {v:?}");
        // Into the wall: the estimate rises, the logit falls.
        let mut v = [-1.0, 0.2];
        safe_velocity(&f, &x, &mut v, &cfg, Some(0.001), &mut s).unwrap();
        let next = [x[0] + 0.001 * v[0], x[1] + 0.001 * v[1]];
        let deeper = f.logit_grad(&next, &mut [0.0; 2], &mut s.net)
            < f.logit_grad(&x, &mut [0.0; 2], &mut s.net);
        assert!(!deeper, "went deeper into the margin: {v:?}");
    }

    #[test]
    fn rollouts_from_thousands_of_random_starts_never_enter_the_learned_obstacle() {
        // Modulated kinematic integration around an analytic sphere; the nominal DS points through it.
        use rand::{RngExt, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
        let cfg = DsmConfig {
            gain: 1.0,
            ..DsmConfig::default()
        };
        let f = Sphere {
            c: [0.0, 0.0, 0.0],
            r: 0.3,
            k: 60.0,
        };
        let (goal, h) = ([1.0, 0.0, 0.0], 0.01);
        let mut s = ModulationScratch::default();
        let (mut starts, mut reached) = (0, 0);
        for _ in 0..3000 {
            let mut x = [
                rng.random_range(-1.0..-0.35),
                rng.random_range(-0.5..0.5),
                rng.random_range(-0.5..0.5),
            ];
            if sphere(&x, &f.c, f.r, f.k).0 <= 0.5 {
                continue;
            }
            starts += 1;
            for _ in 0..600 {
                let mut v = [goal[0] - x[0], goal[1] - x[1], goal[2] - x[2]];
                safe_velocity(&f, &x, &mut v, &cfg, Some(h), &mut s).unwrap();
                for k in 0..3 {
                    x[k] += h * v[k];
                }
                assert!(
                    sphere(&x, &f.c, f.r, f.k).0 >= 0.5,
                    "entered the learned obstacle at {x:?}"
                );
            }
            reached += usize::from((x[0] - goal[0]).abs() + x[1].abs() + x[2].abs() < 0.05);
        }
        assert!(starts > 2000);
        assert!(
            reached as f64 > 0.95 * starts as f64,
            "only {reached} of {starts} reached the goal"
        );
    }
}
