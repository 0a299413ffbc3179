//! The learned obstacles as Huber et al. (2019) model obstacles: star-shaped around a reference point.
//! Their modulation takes its first basis vector from that point rather than from the normal, and
//! measures Gamma along the ray from it; around a star-shaped obstacle the only spurious equilibria
//! left are saddles, so a concave one (four cups in an arc) no longer traps the robot in front of it.
//! A learned infeasible set comes with no reference point and no radius function, so both are built
//! here: one reference point per connected infeasible region of the model's grid (its deepest cell),
//! and the radius R along each ray where the ray leaves that region for the last time (refined on
//! zeta), so the modelled obstacle is the star-shaped hull of the learned one and covers it. With an
//! axis (the safety filter's default: the vertical), the reference point moves along it level with
//! the robot and the hull is tabulated around it with a bounded slope, so that it is continuous
//! ([`Hull`]). Where no state that learning labelled infeasible lies near a learned face, the
//! network drew that face on its own, often short of the true one (the back of an obstacle seen
//! from the goal, which no proposal runs into), and the hull is widened there ([`Support`]).
use crate::deploy::model::{CellGrid, ConstraintModel};
use crate::learn::identify::{NearestPoint, Points, PointsWithin};
use crate::learn::network::Scratch;
use crate::policy::modulation::Star;
use kiddo::{ImmutableKdTree, SquaredEuclidean};
use std::collections::VecDeque;

/// Grid cells per axis over which the reference points are found.
pub const GRID_CELLS: usize = 32;

/// A learned face is supported when a labelled infeasible state (the memory buffer M) lies within
/// this many d_r of it. Measured on a user's task (a box and a ball, learning seed 2): faces the
/// proposals ran into had one within 0.7-1.7 d_r, the ball's back face, 6-12 mm short of the true
/// one, none within 2.6 d_r.
const SUPPORTED_WITHIN: f64 = 2.0;

/// An unsupported face widens the hull by the distance beyond [`SUPPORTED_WITHIN`], up to this
/// many d_r, so that a face far from every labelled state does not take the free space around it
/// (both chosen on that task's third model: 5.3 % of the filtered steps unsafe, 0.13 % widened).
const MAX_WIDENING: f64 = 1.0;

/// A learned face that no demonstrated state passes beside, within this many d_r of it and at its
/// level ([`BESIDE_ELEVATION`]), is one no demonstration passed: nothing shows the robot may go by
/// there, and nothing pins the face down (labelled states only say how far in the obstacle
/// reaches, not where it ends). Its hull is widened by [`UNDEMONSTRATED_WIDENING`] d_r, so that the
/// filter slides a robot round the sides the demonstrations used. Traced on a generated box beside
/// the workspace's edge, which every demonstration passed over or under: filtered runs slid round
/// its far side, inside the true box (3.8 % of the steps unsafe); both values chosen on suite seeds
/// 1-8 and the four-cups transfer (docs/RESULTS.md, "Sides no demonstration passed").
const DEMONSTRATED_WITHIN: f64 = 2.0;

/// A demonstrated state passes beside a face only if its offset from the face along the hull's
/// axis is at most this fraction of its distance (30 degrees above or below the face's level): the
/// hull's rays run across the axis, and a demonstration that went under a box, a few centimetres
/// below its side, had counted as passing that side. The side was not widened and filtered runs
/// slid round it, inside the true box (suite1_3D_06 and suite14_3D_01, 3.1 and 3.4 % of the steps
/// unsafe; docs/RESULTS.md, "Passing under is not passing beside").
const BESIDE_ELEVATION: f64 = 0.5;

/// How far (in d_r) the hull is widened at a face no demonstration passed.
const UNDEMONSTRATED_WIDENING: f64 = 2.0;

/// What learning labelled infeasible, to tell a learned face it pinned down from one the network
/// extrapolated, and what was demonstrated, to tell a side the demonstrations passed from one
/// they never came near.
pub struct Support {
    states: Points,
    nearest: NearestPoint,
    d_r: f64,
    /// The demonstrated states, when the model file has them.
    demonstrated: Option<(Points, PointsWithin)>,
    /// The model's safety margin, kept outside the hull.
    margin: f64,
}

impl Support {
    /// None when the model has no memory buffer or was learned without a d_r (percentile selection).
    pub fn of(model: &ConstraintModel) -> Option<Support> {
        let d_r = model
            .settings
            .identify
            .d_r
            .filter(|d| d.is_finite() && *d > 0.0)?;
        let mut states = Points::new(model.dim());
        for x in model
            .memory_buffer
            .iter()
            .filter(|x| x.len() == model.dim())
        {
            states.push(x);
        }
        let mut demonstrated = Points::new(model.dim());
        for x in model
            .demonstrated_states
            .iter()
            .filter(|x| x.len() == model.dim())
        {
            demonstrated.push(x);
        }
        Some(Support {
            nearest: NearestPoint::new(&states)?,
            states,
            d_r,
            margin: model.dsm.safety_margin,
            demonstrated: (!demonstrated.is_empty()).then(|| {
                let within = PointsWithin::new(&demonstrated);
                (demonstrated, within)
            }),
        })
    }

    /// How much farther out than the learned boundary point `b` (on the ray along unit `u`, across
    /// the unit `axis`) the hull goes: up to [`MAX_WIDENING`] d_r where no labelled infeasible
    /// state is within [`SUPPORTED_WITHIN`] d_r of it, up to [`UNDEMONSTRATED_WIDENING`] d_r where
    /// no demonstrated state passes beside it ([`DEMONSTRATED_WITHIN`]); the larger of the two.
    /// The second stops the margin short of every demonstrated state in a tube of
    /// [`DEMONSTRATED_WITHIN`] d_r round the ray beyond `b`: a demonstrated state is one the robot
    /// may be in, and a robot that starts inside the hull is only slid round at its depth there.
    /// Widened over the starts of a box beside the workspace's edge, the hull took robots round
    /// the side it was widened to close, inside the true box (suite8_3D_02, learning seed 0: 0 ->
    /// 1.35 % of the filtered steps unsafe without the stop).
    pub fn widening(&self, b: &[f64], u: &[f64], axis: &[f64]) -> f64 {
        let q = self.states.row(self.nearest.nearest(b));
        let gap = crate::geometry::distance(b, q);
        let unsupported = (gap - SUPPORTED_WITHIN * self.d_r).clamp(0.0, MAX_WIDENING * self.d_r);
        let Some((states, within)) = &self.demonstrated else {
            return unsupported;
        };
        let (reach, m) = (DEMONSTRATED_WITHIN * self.d_r, self.margin);
        let mut widening = UNDEMONSTRATED_WIDENING * self.d_r;
        let mut found = Vec::new();
        within.within(b, reach.max(widening + m), &mut found);
        let dot =
            |q: &[f64], e: &[f64]| q.iter().zip(b).zip(e).map(|((q, b), e)| (q - b) * e).sum();
        for q in found.iter().map(|&i| states.row(i)) {
            let d = crate::geometry::distance(b, q);
            let (out, up): (f64, f64) = (dot(q, u), dot(q, axis));
            if d <= reach && up.abs() <= BESIDE_ELEVATION * d {
                // A demonstration passed beside the face.
                return unsupported;
            }
            if out > 0.0 && (d * d - out * out).max(0.0).sqrt() < reach {
                widening = widening.min((out - m).max(0.0));
            }
        }
        unsupported.max(widening)
    }
}

/// One reference point per learned obstacle, and which obstacle is nearest to a position.
#[derive(Default)]
pub struct ReferencePoints {
    /// The reference point of each obstacle (feature space).
    pub points: Vec<Vec<f64>>,
    /// For every grid cell, the obstacle with the nearest infeasible cell (one lookup per query).
    nearest: Vec<usize>,
    /// The direction along which the obstacles are taken to extend (unit), if any.
    axis: Option<Vec<f64>>,
    /// The grid the regions were found on, and each cell's region (usize::MAX: feasible).
    grid: Option<CellGrid>,
    label: Vec<usize>,
    /// Per obstacle, its hull tabulated around the axis (with an axis, in 3-D).
    hulls: Vec<Option<Hull>>,
    /// Whether [`Self::of_model_turned`] turned the axis from the configured one.
    turned: bool,
}

impl std::fmt::Debug for ReferencePoints {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReferencePoints")
            .field("points", &self.points)
            .finish()
    }
}

fn pad3(x: &[f64]) -> [f64; 3] {
    let mut p = [0.0; 3];
    for (a, b) in p.iter_mut().zip(x) {
        *a = *b;
    }
    p
}

impl ReferencePoints {
    /// The reference points of a position model (none for a velocity model, for more than three
    /// inputs, or when the grid is all feasible or all infeasible).
    pub fn of_model(model: &ConstraintModel) -> ReferencePoints {
        match model.grid(GRID_CELLS) {
            Some(grid) if grid.dim() <= 3 => Self::of_grid(&grid),
            _ => Self::default(),
        }
    }

    /// [`Self::of_model_along`] around the axis a filter built for `model` slides across:
    /// `configured`, unless the largest learned obstacle runs through the whole grid along exactly
    /// one coordinate axis and not along `configured`; then that axis. Such an obstacle (a wall
    /// across the workspace) cannot be gone round across `configured`: runs slid along it to its
    /// far ends, where nothing was labelled and the learned wall is lowest, and went over there.
    /// Across its own long axis the way is over or under it, where the demonstrations went.
    pub fn of_model_turned(model: &ConstraintModel, configured: &[f64]) -> ReferencePoints {
        let mut refs = Self::of_model(model);
        let along = |k: usize| {
            let n = configured.iter().map(|c| c * c).sum::<f64>().sqrt();
            n > 0.0 && (configured.get(k).copied().unwrap_or(0.0) / n).abs() > 0.99
        };
        let through = match refs.through_axes().as_slice() {
            &[k] if model.dim() == 3 && !along(k) => Some(k),
            _ => None,
        };
        let axis: Vec<f64> = match through {
            Some(k) => (0..3).map(|i| f64::from(u8::from(i == k))).collect(),
            None => configured.to_vec(),
        };
        if let (Some(_), Some(up)) = (through, (0..3).find(|&k| along(k))) {
            refs.rest_on_floor(model, up);
        }
        let mut refs = refs.tabulated(model, &axis);
        refs.turned = through.is_some();
        refs
    }

    /// Move the reference point of every obstacle that stands on the workspace's floor (the lower
    /// bound along coordinate `up`, the configured axis) down to the grid's bottom face. Around an
    /// axis turned across the vertical the hull's rays point down too, and a robot beside a learned
    /// wall standing on the floor was slid under it, into the corner of the wall and the floor,
    /// where it stayed (suite9_3D_06). From a reference point at the bottom every ray points up or
    /// along it, so the modulation goes round the obstacle's free side only: where Huber et al.
    /// (2019) put the reference point of an obstacle that meets a wall. Standing on the floor: the
    /// region reaches the grid's bottom layer and the model is infeasible on the floor below one of
    /// those cells (the grid covers what learning probed, which may end above the floor).
    fn rest_on_floor(&mut self, model: &ConstraintModel, up: usize) {
        let (Some(g), Some(ws)) = (&self.grid, &model.workspace) else {
            return;
        };
        let Some(&floor) = ws.lower.get(up) else {
            return;
        };
        if g.dim() != 3 || up >= 3 || !floor.is_finite() || g.lo[up] < floor - 0.5 * g.step[up] {
            return;
        }
        let stride = g.n.pow(up as u32);
        let mut on_floor = vec![false; self.points.len()];
        let (mut scratch, mut x) = (Scratch::default(), [0.0; 3]);
        for (i, &id) in self.label.iter().enumerate() {
            if id >= self.points.len() || on_floor[id] || (i / stride) % g.n != 0 {
                continue;
            }
            g.center(i, &mut x);
            x[up] = floor;
            on_floor[id] = model.network.zeta(&x, &mut scratch) < model.threshold;
        }
        for (p, _) in self.points.iter_mut().zip(&on_floor).filter(|(_, on)| **on) {
            p[up] = g.lo[up];
        }
    }

    /// The coordinate axes along which the largest learned obstacle (the most grid cells) touches
    /// both faces of the grid.
    fn through_axes(&self) -> Vec<usize> {
        let Some(g) = &self.grid else {
            return Vec::new();
        };
        let d = g.dim();
        let regions = self.points.len();
        let mut cells = vec![0usize; regions];
        // Per region and axis: whether it has a cell in the first and in the last layer.
        let mut ends = vec![[false; 2]; regions * d];
        for (i, &id) in self.label.iter().enumerate() {
            if id >= regions {
                continue;
            }
            cells[id] += 1;
            let mut c = i;
            for k in 0..d {
                let layer = c % g.n;
                c /= g.n;
                if layer == 0 {
                    ends[id * d + k][0] = true;
                }
                if layer + 1 == g.n {
                    ends[id * d + k][1] = true;
                }
            }
        }
        let Some(largest) = (0..regions).max_by_key(|&id| cells[id]) else {
            return Vec::new();
        };
        (0..d)
            .filter(|&k| ends[largest * d + k] == [true, true])
            .collect()
    }

    /// [`Self::of_model`] with reference points that move along `axis` (see [`Self::along`]), and
    /// each obstacle's star-shaped hull tabulated around that axis (see [`Hull`]).
    pub fn of_model_along(model: &ConstraintModel, axis: &[f64]) -> ReferencePoints {
        Self::of_model(model).tabulated(model, axis)
    }

    /// These reference points moving along `axis`, with each obstacle's hull tabulated around it.
    fn tabulated(self, model: &ConstraintModel, axis: &[f64]) -> ReferencePoints {
        let mut refs = self.along(axis);
        if let (Some(u), Some(g)) = (&refs.axis, &refs.grid)
            && u.len() == 3
        {
            let mut scratch = Scratch::default();
            let support = Support::of(model);
            let hulls = (0..refs.points.len())
                .map(|id| Hull::tabulate(&refs, model, support.as_ref(), g, id, u, &mut scratch))
                .collect();
            refs.hulls = hulls;
        }
        refs
    }

    /// Leave the ball of `radius` around `centre` (a point `model` calls feasible, such as the
    /// task's goal) out of every tabulated hull, also where a hull is widened by `margin` along
    /// its axis at use, but not the learned obstacle itself: the hull is a cover of the learned
    /// obstacle, widened across its rays, and can reach over a feasible point beside it
    /// ([`Hull::keep_open`]).
    pub fn keep_open(&mut self, model: &ConstraintModel, centre: &[f64], radius: f64, margin: f64) {
        let mut scratch = Scratch::default();
        let mut inside = |x: &[f64]| model.network.zeta(x, &mut scratch) < model.threshold;
        for hull in self.hulls.iter_mut().flatten() {
            hull.keep_open(centre, radius, margin, &mut inside);
        }
    }

    /// Label the connected infeasible regions and take each one's deepest cell. Cells touching at
    /// an edge or a corner are connected too: a thin learned region running across the grid's axes
    /// is a diagonal chain of cells, and split at the corners its tip became an obstacle of its
    /// own, whose hull and the long one's took turns as the nearest and pushed a robot beside the
    /// tip opposite ways (suite10_2D_02, learning seed 2: 9 of 30 filtered runs held there).
    pub fn of_grid(grid: &CellGrid) -> ReferencePoints {
        let d = grid.dim();
        let centre = |i: usize| {
            let mut x = vec![0.0; d];
            grid.center(i, &mut x);
            x
        };
        let feasible: Vec<[f64; 3]> = (0..grid.infeasible.len())
            .filter(|&i| !grid.infeasible[i])
            .map(|i| pad3(&centre(i)))
            .collect();
        if feasible.is_empty() || feasible.len() == grid.infeasible.len() {
            return Self::default();
        }
        let Ok(free) = ImmutableKdTree::<f64, 3>::new_from_slice(&feasible) else {
            return Self::default();
        };
        // Distance to the nearest feasible cell or, as the region may go on beyond the grid (a column
        // through the whole workspace), to the nearest face of the grid.
        let depth = |x: &[f64]| {
            let to_free = free
                .query(&pad3(x))
                .nearest_one::<SquaredEuclidean<f64>>()
                .execute()
                .distance
                .sqrt();
            (0..d).fold(to_free, |m, k| {
                let span = (grid.n - 1) as f64 * grid.step[k];
                let inside = (x[k] - grid.lo[k]).min(grid.lo[k] + span - x[k]) + grid.step[k];
                m.min(inside)
            })
        };
        let mut label = vec![usize::MAX; grid.infeasible.len()];
        let (mut points, mut entries, mut owner) = (Vec::new(), Vec::new(), Vec::new());
        for seed in 0..grid.infeasible.len() {
            if !grid.infeasible[seed] || label[seed] != usize::MAX {
                continue;
            }
            let id = points.len();
            label[seed] = id;
            let mut queue = VecDeque::from([seed]);
            let (mut best, mut deepest) = (seed, f64::NEG_INFINITY);
            while let Some(i) = queue.pop_front() {
                let x = centre(i);
                let depth = depth(&x);
                if depth > deepest {
                    (best, deepest) = (i, depth);
                }
                entries.push(pad3(&x));
                owner.push(id);
                for j in grid.touching(i) {
                    if grid.infeasible[j] && label[j] == usize::MAX {
                        label[j] = id;
                        queue.push_back(j);
                    }
                }
            }
            points.push(centre(best));
        }
        // The nearest obstacle of every cell, found once.
        let nearest = match ImmutableKdTree::<f64, 3>::new_from_slice(&entries) {
            Ok(cells) => (0..grid.infeasible.len())
                .map(|i| {
                    let hit = cells
                        .query(&pad3(&centre(i)))
                        .nearest_one::<SquaredEuclidean<f64>>()
                        .execute();
                    owner[hit.item as usize]
                })
                .collect(),
            Err(_) => Vec::new(),
        };
        ReferencePoints {
            points,
            nearest,
            axis: None,
            grid: Some(grid.clone()),
            label,
            hulls: Vec::new(),
            turned: false,
        }
    }

    /// Reference points on lines along `axis` (e.g. the vertical, for things standing on a table)
    /// through each region's deepest cell: the reference point for x is then the point of that line
    /// level with x, so rays run across the axis and the robot slides around a learned obstacle, not
    /// over or under it into heights the demonstrations never showed. A zero axis is ignored.
    pub fn along(mut self, axis: &[f64]) -> Self {
        let n = axis.iter().map(|c| c * c).sum::<f64>().sqrt();
        self.axis = (n > 0.0 && n.is_finite()).then(|| axis.iter().map(|c| c / n).collect());
        self
    }

    /// The direction along which the obstacles are taken to extend, if any (unit).
    pub fn axis(&self) -> Option<&[f64]> {
        self.axis.as_deref()
    }

    /// The axis [`Self::of_model_turned`] turned to, when it was not the configured one.
    pub fn turned_axis(&self) -> Option<&[f64]> {
        self.axis.as_deref().filter(|_| self.turned)
    }

    /// The reference point of region `id` for a robot at `x`.
    fn reference(&self, id: usize, x: &[f64]) -> Option<Vec<f64>> {
        let p = self.points.get(id)?;
        Some(match &self.axis {
            Some(u) if u.len() == x.len() => {
                let t: f64 = (0..x.len()).map(|k| (x[k] - p[k]) * u[k]).sum();
                p.iter().zip(u).map(|(a, b)| a + t * b).collect()
            }
            _ => p.clone(),
        })
    }

    /// The reference point of the learned obstacle nearest to `x`.
    pub fn nearest(&self, x: &[f64]) -> Option<&[f64]> {
        self.nearest_region(x)
            .and_then(|id| self.points.get(id))
            .map(Vec::as_slice)
    }

    fn nearest_region(&self, x: &[f64]) -> Option<usize> {
        let g = self.grid.as_ref()?;
        // Off the grid: the nearest cell on it.
        let mut clamped = [0.0; 3];
        for (k, c) in clamped.iter_mut().enumerate().take(g.dim()) {
            *c = x[k].clamp(g.lo[k], g.lo[k] + (g.n - 1) as f64 * g.step[k]);
        }
        self.nearest.get(g.cell_at(&clamped[..g.dim()])?).copied()
    }

    /// The nearest learned obstacle at `x` as Huber et al. (2019) model an obstacle: star-shaped
    /// around its reference point r, its boundary at radius R along each ray from r. Along the ray
    /// through x, R is where the ray leaves the obstacle's grid region for the last time, refined on
    /// the network's zeta: so the modelled obstacle is the star-shaped hull of the learned one and
    /// covers it. With an axis, the hull is read from its table (continuous; see [`Hull`]). None
    /// without a learned obstacle, at r itself, or where no ray meets it (above a column's top).
    ///
    /// `margin` (feature units) is the safety margin the caller keeps. Across the axis the caller
    /// widens the hull along the rays itself; along the axis a table's hull is widened here, by
    /// taking at each level the largest radius within `margin` of it: otherwise nothing kept the
    /// margin above or below a learned obstacle, and runs passing under a learned box whose bottom
    /// sat a few millimetres too high entered the true box (a generated task, 8-12 % of steps).
    pub fn star(
        &self,
        model: &ConstraintModel,
        x: &[f64],
        margin: f64,
        scratch: &mut Scratch,
    ) -> Option<Star> {
        let id = self.nearest_region(x)?;
        if let Some(Some(hull)) = self.hulls.get(id) {
            return hull.star(x, margin);
        }
        let r = self.reference(id, x)?;
        let dist = x
            .iter()
            .zip(&r)
            .map(|(a, b)| (a - b).powi(2))
            .sum::<f64>()
            .sqrt();
        if dist.is_nan() || dist <= 1e-9 {
            return None;
        }
        let u: Vec<f64> = x.iter().zip(&r).map(|(a, b)| (a - b) / dist).collect();
        let radius = self.radius_along(model, id, &r, &u, scratch)?;
        let mut grad = vec![0.0; x.len()];
        let b: Vec<f64> = r.iter().zip(&u).map(|(a, c)| a + radius * c).collect();
        model.network.zeta_and_grad(&b, &mut grad, scratch);
        let gn = grad.iter().map(|c| c * c).sum::<f64>().sqrt();
        // Into the obstacle: against zeta's gradient; where that is flat, towards r.
        let normal = if gn > 1e-9 {
            grad.iter().map(|c| -c / gn).collect()
        } else {
            u.iter().map(|c| -c).collect()
        };
        let incidence = -u.iter().zip(&normal).map(|(a, b)| a * b).sum::<f64>();
        Some(Star {
            reference: r,
            ratio: dist / radius,
            radius,
            normal,
            incidence,
        })
    }

    /// R along the ray from `r` in direction `u` (unit) for obstacle `id`: its last exit from the
    /// obstacle's grid region, refined on zeta. None if the ray never meets the region.
    fn radius_along(
        &self,
        model: &ConstraintModel,
        id: usize,
        r: &[f64],
        u: &[f64],
        scratch: &mut Scratch,
    ) -> Option<f64> {
        let g = self.grid.as_ref()?;
        // A point of the ray on the stack: this runs per command when there is no axis table.
        let d = g.dim();
        let at = |t: f64| -> [f64; 3] {
            std::array::from_fn(|k| if k < d { r[k] + t * u[k] } else { 0.0 })
        };
        let h = 0.5 * g.step.iter().copied().fold(f64::INFINITY, f64::min);
        let mut last = None;
        let mut t = 0.0;
        // March out from r until the ray leaves the grid.
        while let Some(cell) = g.cell_at(&at(t)[..d]) {
            if self.label[cell] == id {
                last = Some(t);
            }
            t += h;
        }
        let last = last?;
        // The grid's cells are coarse: look for zeta's own last crossing within a cell's diagonal of
        // the grid's, then bisect it.
        let inside = |t: f64, scratch: &mut Scratch| {
            model.network.zeta(&at(t)[..d], scratch) < model.threshold
        };
        let w = 0.5 * g.step.iter().map(|c| c * c).sum::<f64>().sqrt() + h;
        let fine = w / 8.0;
        let mut hi = last + w;
        // (Thin parts the grid missed may reach further: follow zeta out.)
        while inside(hi, scratch) && g.cell_at(&at(hi)[..d]).is_some() {
            hi += fine;
        }
        let mut lo = None;
        while hi > (last - w).max(0.0) {
            if inside(hi - fine, scratch) {
                lo = Some(hi - fine);
                break;
            }
            hi -= fine;
        }
        let radius = match lo {
            Some(mut lo) => {
                for _ in 0..10 {
                    let mid = 0.5 * (lo + hi);
                    if inside(mid, scratch) {
                        lo = mid;
                    } else {
                        hi = mid;
                    }
                }
                0.5 * (lo + hi)
            }
            None => last,
        };
        Some(radius.max(1e-6))
    }
}

/// An obstacle's star-shaped hull around a reference axis, tabulated: R(level, angle) on rays
/// perpendicular to the axis from the axis point at that level. Measured radii jump where a ray
/// starts or stops clipping a part that bends back (the end of an arc of cups), and the modulation
/// would push opposite ways on either side of such a ray; so the table is the upper envelope of the
/// measured radii with a bounded slope, R(a) = max over b of R_b (1 - |a - b| / SPREAD), which
/// contains the measured hull, is continuous, and has a normal everywhere. Bilinear in level and
/// angle, and its exact normal, at query time.
#[derive(Debug, Clone)]
pub struct Hull {
    /// Axis point at level 0, the (unit) axis and two unit vectors spanning the plane across it.
    origin: Vec<f64>,
    axis: Vec<f64>,
    e1: Vec<f64>,
    e2: Vec<f64>,
    /// Level of row 0 and the spacing of the rows (along the axis).
    t0: f64,
    dt: f64,
    /// radius[level][angle]; 0: the obstacle has no cross-section at that level.
    radius: Vec<Vec<f64>>,
}

impl Hull {
    const ANGLES: usize = 180;
    const LEVELS: usize = GRID_CELLS;
    /// A radius measured along one ray widens the hull over this angle (rad) either side.
    const SPREAD: f64 = std::f64::consts::FRAC_PI_3;

    fn tabulate(
        refs: &ReferencePoints,
        model: &ConstraintModel,
        support: Option<&Support>,
        g: &CellGrid,
        id: usize,
        axis: &[f64],
        scratch: &mut Scratch,
    ) -> Option<Hull> {
        let p = refs.points.get(id)?;
        // Two unit vectors across the axis.
        let k = (0..3)
            .min_by(|&a, &b| axis[a].abs().total_cmp(&axis[b].abs()))
            .unwrap_or(0);
        let mut e1: Vec<f64> = (0..3)
            .map(|i| f64::from(u8::from(i == k)) - axis[k] * axis[i])
            .collect();
        let n1 = e1.iter().map(|c| c * c).sum::<f64>().sqrt();
        e1.iter_mut().for_each(|c| *c /= n1);
        let e2 = vec![
            axis[1] * e1[2] - axis[2] * e1[1],
            axis[2] * e1[0] - axis[0] * e1[2],
            axis[0] * e1[1] - axis[1] * e1[0],
        ];
        // Levels spanning the grid's extent along the axis.
        let (mut t0, mut t1) = (f64::INFINITY, f64::NEG_INFINITY);
        for corner in 0..8usize {
            let t: f64 = (0..3)
                .map(|i| {
                    let c = g.lo[i]
                        + if corner >> i & 1 == 1 {
                            (g.n - 1) as f64 * g.step[i]
                        } else {
                            0.0
                        };
                    (c - p[i]) * axis[i]
                })
                .sum();
            t0 = t0.min(t);
            t1 = t1.max(t);
        }
        let dt = (t1 - t0) / (Self::LEVELS - 1) as f64;
        let angle = |j: usize| j as f64 * std::f64::consts::TAU / Self::ANGLES as f64;
        let mut radius = Vec::with_capacity(Self::LEVELS);
        for l in 0..Self::LEVELS {
            let t = t0 + l as f64 * dt;
            let r: Vec<f64> = (0..3).map(|i| p[i] + t * axis[i]).collect();
            let measured: Vec<f64> = (0..Self::ANGLES)
                .map(|j| {
                    let (c, s) = (angle(j).cos(), angle(j).sin());
                    let u: Vec<f64> = (0..3).map(|i| c * e1[i] + s * e2[i]).collect();
                    let exit = refs.radius_along(model, id, &r, &u, scratch).unwrap_or(0.0);
                    match support {
                        Some(s) if exit > 0.0 => {
                            let b: Vec<f64> = (0..3).map(|i| r[i] + exit * u[i]).collect();
                            exit + s.widening(&b, &u, axis)
                        }
                        _ => exit,
                    }
                })
                .collect();
            let step = std::f64::consts::TAU / Self::ANGLES as f64;
            let reach = (Self::SPREAD / step).ceil() as usize;
            let envelope = (0..Self::ANGLES)
                .map(|a| {
                    (0..=2 * reach)
                        .map(|o| {
                            let b = (a + Self::ANGLES + o - reach) % Self::ANGLES;
                            let gap = (o as f64 - reach as f64).abs() * step;
                            measured[b] * (1.0 - gap / Self::SPREAD).max(0.0)
                        })
                        .fold(0.0, f64::max)
                })
                .collect();
            radius.push(envelope);
        }
        Some(Hull {
            origin: p.clone(),
            axis: axis.to_vec(),
            e1,
            e2,
            t0,
            dt,
            radius,
        })
    }

    /// The slope of the funnel [`Self::keep_open`] cuts into the hull around a ball: the hull's
    /// radius rises by this much per unit of distance from the ball, so the hull stays continuous.
    const OPEN_SLOPE: f64 = 10.0;

    /// Cap the table so that no ray from the axis enters the hull before it reaches the ball of
    /// `radius` around `centre`: where a ray meets the ball, R is at most the distance to where it
    /// enters it; beside the ball, at most the distance to the ray's point nearest to it plus
    /// [`Self::OPEN_SLOPE`] times the ray's clearance from the ball; and never below a point of
    /// the ray that is `inside` the learned obstacle before the ray's nearest approach to the
    /// centre, or anywhere on a ray pointing away from it (a ball that reaches into the learned
    /// obstacle leaves that part covered; beyond the centre, in a hollow of the obstacle, the
    /// filter's lookahead on zeta still keeps the robot out). Why: the envelope
    /// widens a large measured radius over [`Self::SPREAD`] either side, and beside a large
    /// learned region it reached over goals the learned constraint keeps clear (the filter could
    /// never bring a robot there); the cap leaves a funnel open from outside the hull to the ball.
    /// The ball is stretched along the axis by `margin` and a row's spacing, so that neither the
    /// widening at use ([`Self::lookup_widened`]) nor the interpolation between rows closes it.
    fn keep_open(
        &mut self,
        centre: &[f64],
        radius: f64,
        margin: f64,
        inside: &mut dyn FnMut(&[f64]) -> bool,
    ) {
        if centre.len() != 3 || !(radius.is_finite() && radius > 0.0 && margin.is_finite()) {
            return;
        }
        let stretch = margin.max(0.0) + self.dt;
        let d: [f64; 3] = std::array::from_fn(|i| centre[i] - self.origin[i]);
        let dot = |v: &[f64]| (0..3).map(|i| d[i] * v[i]).sum::<f64>();
        let (tg, c1, c2) = (dot(&self.axis), dot(&self.e1), dot(&self.e2));
        let step = std::f64::consts::TAU / Self::ANGLES as f64;
        // Steps along a ray at which the learned obstacle is looked for behind the cap.
        let h = radius / 16.0;
        for (l, row) in self.radius.iter_mut().enumerate() {
            let t = self.t0 + l as f64 * self.dt;
            let dz = ((tg - t).abs() - stretch).max(0.0);
            for (j, r) in row.iter_mut().enumerate() {
                let (cos, sin) = ((j as f64 * step).cos(), (j as f64 * step).sin());
                // Along the ray to the centre's foot, and the ray's distance from the centre.
                let along = c1 * cos + c2 * sin;
                let across = if along > 0.0 {
                    (-c1 * sin + c2 * cos).hypot(dz)
                } else {
                    c1.hypot(c2).hypot(dz)
                };
                let cap = along.max(0.0) - (radius * radius - across * across).max(0.0).sqrt()
                    + Self::OPEN_SLOPE * (across - radius).max(0.0);
                if cap >= *r {
                    continue;
                }
                let ray = |rho: f64| -> [f64; 3] {
                    std::array::from_fn(|i| {
                        self.origin[i]
                            + t * self.axis[i]
                            + rho * (cos * self.e1[i] + sin * self.e2[i])
                    })
                };
                // The last point of the learned obstacle between the cap and the ray's nearest
                // approach to the centre (on a ray pointing away from it, its whole length).
                let end = if along > 0.0 { along.min(*r) } else { *r };
                let (mut floor, mut rho) = (cap.max(0.0), end);
                while rho > floor {
                    if inside(&ray(rho)) {
                        floor = rho;
                        break;
                    }
                    rho -= h;
                }
                *r = floor;
            }
        }
    }

    /// Row `l` of the table at angle `a`: R, linear between the tabulated angles, and dR/da.
    fn row(&self, l: usize, a: f64) -> (f64, f64) {
        let step = std::f64::consts::TAU / Self::ANGLES as f64;
        let fa = a.rem_euclid(std::f64::consts::TAU) / step;
        let a0 = (fa.floor() as usize) % Self::ANGLES;
        let a1 = (a0 + 1) % Self::ANGLES;
        let wa = fa - fa.floor();
        let r = &self.radius[l];
        (r[a0] * (1.0 - wa) + r[a1] * wa, (r[a1] - r[a0]) / step)
    }

    /// Bilinear R and its derivatives in angle and level at (level t, angle a).
    fn lookup(&self, t: f64, a: f64) -> (f64, f64, f64) {
        let fl = ((t - self.t0) / self.dt).clamp(0.0, (Self::LEVELS - 1) as f64);
        let l0 = (fl.floor() as usize).min(Self::LEVELS - 2);
        let wl = fl - l0 as f64;
        let ((r0, d0), (r1, d1)) = (self.row(l0, a), self.row(l0 + 1, a));
        let r = r0 * (1.0 - wl) + r1 * wl;
        let dr_da = d0 * (1.0 - wl) + d1 * wl;
        let dr_dt = (r1 - r0) / self.dt;
        (r, dr_da, dr_dt)
    }

    /// R at (level t, angle a) widened along the axis: the largest R within `margin` of level t,
    /// with its derivatives there. R is linear in the level between rows, so the largest value over
    /// [t - margin, t + margin] is at an end or at a row inside: exact, and continuous in t.
    fn lookup_widened(&self, t: f64, a: f64, margin: f64) -> (f64, f64, f64) {
        let mut best = self.lookup(t, a);
        if !(margin > 0.0 && margin.is_finite()) {
            return best;
        }
        for s in [t - margin, t + margin] {
            let here = self.lookup(s, a);
            if here.0 > best.0 {
                best = here;
            }
        }
        let last = (Self::LEVELS - 1) as f64;
        let lo = ((t - margin - self.t0) / self.dt).ceil().clamp(0.0, last) as usize;
        let hi = ((t + margin - self.t0) / self.dt).floor().clamp(0.0, last) as usize;
        for l in lo..=hi.max(lo) {
            let (r, dr_da) = self.row(l, a);
            if r > best.0 {
                // A row's maximum along the level is flat there.
                best = (r, dr_da, 0.0);
            }
        }
        best
    }

    /// The hull at x: ratio |x - r| / R and the hull surface's normal (into the obstacle), from
    /// f(x) = rho - R(angle, level) with rho the distance from the axis; R widened by `margin`
    /// along the axis (see [`Self::lookup_widened`]).
    fn star(&self, x: &[f64], margin: f64) -> Option<Star> {
        let d: [f64; 3] = std::array::from_fn(|i| x[i] - self.origin[i]);
        let t: f64 = (0..3).map(|i| d[i] * self.axis[i]).sum();
        let (c1, c2) = (
            (0..3).map(|i| d[i] * self.e1[i]).sum::<f64>(),
            (0..3).map(|i| d[i] * self.e2[i]).sum::<f64>(),
        );
        let rho = c1.hypot(c2);
        if rho.is_nan() || rho <= 1e-9 {
            return None;
        }
        let a = c2.atan2(c1);
        let (radius, dr_da, dr_dt) = self.lookup_widened(t, a, margin);
        if radius.is_nan() || radius <= 1e-6 {
            return None;
        }
        let er: [f64; 3] = std::array::from_fn(|i| (c1 * self.e1[i] + c2 * self.e2[i]) / rho);
        let ea: [f64; 3] = std::array::from_fn(|i| (-c2 * self.e1[i] + c1 * self.e2[i]) / rho);
        // grad f = e_rho - (dR/da) / rho e_a - (dR/dt) axis; it points out of the obstacle.
        let grad: [f64; 3] =
            std::array::from_fn(|i| er[i] - dr_da / rho * ea[i] - dr_dt * self.axis[i]);
        let gn = grad.iter().map(|c| c * c).sum::<f64>().sqrt();
        // The ray from the reference (on the axis at x's level) runs along e_rho.
        let incidence = (0..3).map(|i| er[i] * grad[i]).sum::<f64>() / gn;
        Some(Star {
            reference: (0..3).map(|i| self.origin[i] + t * self.axis[i]).collect(),
            ratio: rho / radius,
            radius,
            normal: grad.iter().map(|c| -c / gn).collect(),
            incidence,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 2-D grid over [0, 1]^2 with the given cells (x, y) infeasible.
    fn grid(n: usize, infeasible: impl Fn(f64, f64) -> bool) -> CellGrid {
        let step = 1.0 / (n - 1) as f64;
        let mut g = CellGrid {
            n,
            lo: vec![0.0, 0.0],
            step: vec![step, step],
            infeasible: Vec::new(),
        };
        let mut x = [0.0; 2];
        g.infeasible = (0..n * n)
            .map(|i| {
                g.center(i, &mut x);
                infeasible(x[0], x[1])
            })
            .collect();
        g
    }

    #[test]
    fn each_separate_obstacle_gets_its_own_reference_point_at_its_deepest_cell() {
        let disc = |cx: f64, cy: f64, r: f64| {
            move |x: f64, y: f64| (x - cx).powi(2) + (y - cy).powi(2) < r * r
        };
        let (a, b) = (disc(0.25, 0.3, 0.12), disc(0.7, 0.7, 0.18));
        let g = grid(41, |x, y| a(x, y) || b(x, y));
        let r = ReferencePoints::of_grid(&g);
        assert_eq!(r.points.len(), 2);
        let near = |p: &[f64], c: [f64; 2]| (p[0] - c[0]).hypot(p[1] - c[1]) < 0.03;
        let pa = r.nearest(&[0.05, 0.3]).unwrap();
        let pb = r.nearest(&[0.95, 0.95]).unwrap();
        assert!(near(pa, [0.25, 0.3]), "{pa:?}");
        assert!(near(pb, [0.7, 0.7]), "{pb:?}");
    }

    #[test]
    fn a_thin_diagonal_region_whose_cells_touch_only_at_corners_is_one_obstacle() {
        // One cell wide along the grid's diagonal: no two of its cells share a face.
        let g = grid(21, |x, y| (x - y).abs() < 0.01 && x > 0.2 && x < 0.8);
        let cells = g.infeasible.iter().filter(|&&c| c).count();
        assert!(cells >= 10, "{cells}");
        let r = ReferencePoints::of_grid(&g);
        assert_eq!(r.points.len(), 1, "{:?}", r.points);
        // Beside either tip, the same obstacle is the nearest.
        assert_eq!(r.nearest(&[0.25, 0.2]), r.nearest(&[0.75, 0.8]));
    }

    #[test]
    fn the_reference_point_of_a_crescent_lies_inside_it_not_at_its_hollow_centroid() {
        // A thick arc around (0.5, 0.5): its centroid is in the hollow, outside the obstacle.
        let g = grid(61, |x, y| {
            let r = (x - 0.5).hypot(y - 0.5);
            (0.2..0.32).contains(&r) && x > 0.45
        });
        let r = ReferencePoints::of_grid(&g);
        assert_eq!(r.points.len(), 1);
        let p = r.nearest(&[0.9, 0.5]).unwrap();
        let radius = (p[0] - 0.5).hypot(p[1] - 0.5);
        assert!((0.2..0.32).contains(&radius) && p[0] > 0.45, "{p:?}");
    }

    /// A hull around the vertical axis through the origin: a column of radius 0.1 from level 0.5 up.
    fn column_from_half_way_up() -> Hull {
        let dt = 1.0 / (Hull::LEVELS - 1) as f64;
        Hull {
            origin: vec![0.0; 3],
            axis: vec![0.0, 0.0, 1.0],
            e1: vec![1.0, 0.0, 0.0],
            e2: vec![0.0, 1.0, 0.0],
            t0: 0.0,
            dt,
            radius: (0..Hull::LEVELS)
                .map(|l| vec![if l as f64 * dt >= 0.5 { 0.1 } else { 0.0 }; Hull::ANGLES])
                .collect(),
        }
    }

    #[test]
    fn the_margin_widens_a_hull_along_its_axis_so_the_robot_keeps_it_below_an_obstacle_too() {
        let hull = column_from_half_way_up();
        // 0.1 below the column's bottom: no obstacle without a margin, inside the hull with one.
        let below = [0.05, 0.0, 0.4];
        assert!(hull.star(&below, 0.0).is_none());
        let st = hull
            .star(&below, 0.12)
            .expect("the widened hull reaches below the bottom");
        assert!(st.ratio < 1.0 && (st.radius - 0.1).abs() < 1e-9, "{st:?}");
        assert!(
            hull.star(&[0.05, 0.0, 0.3], 0.12).is_none(),
            "beyond the margin"
        );
        // Continuous along the axis: no jump between levels a thousandth apart.
        let radius = |z: f64| hull.star(&[0.05, 0.0, z], 0.12).map_or(0.0, |s| s.radius);
        for k in 0..1000 {
            let z = k as f64 / 1000.0;
            assert!(
                (radius(z + 0.001) - radius(z)).abs() < 0.01,
                "R jumps at {z}"
            );
        }
    }

    #[test]
    fn a_ball_kept_open_is_outside_the_hull_by_its_radius_with_a_funnel_out_and_the_rest_intact() {
        // A column measured at R 0.1 from level 0.5 up, its table widened to 0.3 (as the envelope
        // does beside large radii), over a goal 0.2 from its axis.
        let mut hull = column_from_half_way_up();
        hull.radius.iter_mut().flatten().for_each(|r| *r *= 3.0);
        let before = hull.clone();
        let mut learned = |x: &[f64]| x[0].hypot(x[1]) < 0.1 && x[2] >= 0.5;
        let (goal, open, margin) = ([0.2, 0.0, 0.7], 0.05, 0.03);
        assert!(hull.star(&goal, margin).unwrap().ratio < 1.0);
        hull.keep_open(&goal, open, margin, &mut learned);
        let at = |x: &[f64]| hull.star(x, margin).unwrap();
        // The goal is clear of the hull by the margin, and so is the way out along its ray.
        assert!(at(&goal).margin_ratio(margin) >= 1.0, "{:?}", at(&goal));
        assert!(at(&[0.28, 0.0, 0.7]).margin_ratio(margin) >= 1.0);
        // Away from the ball the hull is what it was: behind the axis, and a quarter turn round.
        assert!((at(&[-0.2, 0.0, 0.7]).radius - 0.3).abs() < 1e-9);
        assert!((at(&[0.0, 0.2, 0.7]).radius - 0.3).abs() < 1e-9);
        // Continuous round the axis at the goal's level: no jump between rays 0.001 rad apart.
        let radius = |a: f64| at(&[0.2 * a.cos(), 0.2 * a.sin(), 0.7]).radius;
        for k in -600..600 {
            let a = k as f64 / 1000.0;
            assert!(
                (radius(a + 0.001) - radius(a)).abs() < 0.01,
                "R jumps at {a}"
            );
        }
        // Never into the learned obstacle: a ball reaching into the column leaves the column whole
        // (to within the step along the ray at which it is looked for).
        let mut hull = before;
        hull.keep_open(&[0.12, 0.0, 0.7], open, margin, &mut learned);
        let kept = hull.star(&[0.12, 0.0, 0.7], 0.0).unwrap().radius;
        assert!((0.1 - open / 16.0..=0.1).contains(&kept), "{kept}");
    }

    #[test]
    fn an_all_feasible_grid_has_no_reference_point() {
        let r = ReferencePoints::of_grid(&grid(11, |_, _| false));
        assert!(r.points.is_empty() && r.nearest(&[0.5, 0.5]).is_none());
    }

    #[test]
    fn the_filter_axis_turns_to_the_one_coordinate_axis_a_learned_obstacle_runs_through() {
        // The learned cylinder runs through the grid vertically and across nothing else.
        let model = crate::deploy::filter::tests::cylinder();
        let up = [0.0, 0.0, 1.0];
        assert_eq!(ReferencePoints::of_model(&model).through_axes(), vec![2]);
        let axis = |configured: &[f64]| {
            ReferencePoints::of_model_turned(&model, configured)
                .axis()
                .map(<[f64]>::to_vec)
        };
        assert_eq!(axis(&up), Some(up.to_vec()));
        // Configured across it, the axis turns to the vertical: round a column, not over it.
        assert_eq!(axis(&[1.0, 0.0, 0.0]), Some(up.to_vec()));
        assert_eq!(axis(&[0.0, 0.0, -2.0]), Some(vec![0.0, 0.0, -1.0]));
    }

    #[test]
    fn an_obstacle_standing_on_the_floor_gets_its_reference_point_on_the_grids_bottom_face() {
        // The learned cylinder reaches the grid's bottom layer and the floor below it.
        let model = crate::deploy::filter::tests::cylinder();
        let deepest = ReferencePoints::of_model(&model);
        let bottom = deepest.grid.as_ref().unwrap().lo.clone();
        let floor = model.workspace.as_ref().unwrap().lower[2];
        assert!(bottom[2] >= floor, "{bottom:?} {floor}");
        let mut on_floor = ReferencePoints::of_model(&model);
        on_floor.rest_on_floor(&model, 2);
        assert_eq!(on_floor.points.len(), 1);
        assert_eq!(on_floor.points[0][2], bottom[2]);
        assert_eq!(on_floor.points[0][..2], deepest.points[0][..2]);
        // Along y it touches neither face of the grid: nothing stands on that "floor".
        let mut across = ReferencePoints::of_model(&model);
        across.rest_on_floor(&model, 1);
        assert_eq!(across.points, deepest.points);
        // Nor on a floor the grid's bottom lies below (the region may end above it).
        let mut sunk = (*model).clone();
        sunk.workspace.as_mut().unwrap().lower[2] = bottom[2] + 0.05;
        let mut above = ReferencePoints::of_model(&sunk);
        above.rest_on_floor(&sunk, 2);
        assert_eq!(above.points, deepest.points);
    }

    #[test]
    fn the_hull_is_widened_where_no_labelled_infeasible_state_supports_the_learned_face() {
        // The filter tests' cylinder model (reference demonstrations, learning seed 1).
        let model = crate::deploy::filter::tests::cylinder();
        let d_r = model.settings.identify.d_r.unwrap();
        // The same network with no labelled state south of the cylinder's axis (y < 0): as if no
        // proposal had run into its south face.
        let mut north_only = (*model).clone();
        north_only.memory_buffer.retain(|x| x[1] >= 0.0);
        assert!(north_only.memory_buffer.len() < model.memory_buffer.len());
        // And the hull as it is without the rule (no d_r: nothing to measure support in).
        let mut unwidened = (*model).clone();
        unwidened.settings.identify.d_r = None;
        let up = [0.0, 0.0, 1.0];
        let (all, north, plain) = (
            ReferencePoints::of_model_along(&model, &up),
            ReferencePoints::of_model_along(&north_only, &up),
            ReferencePoints::of_model_along(&unwidened, &up),
        );
        let mut scratch = Scratch::default();
        let radius = |r: &ReferencePoints, x: [f64; 3], s: &mut Scratch| {
            r.star(&model, &x, 0.0, s).unwrap().radius
        };
        // With every labelled state, no face of the cylinder is widened; north of the axis, where
        // labelled states stay, neither is the hull without the southern ones.
        let (n, s) = ([0.55, 0.08, 0.05], [0.55, -0.08, 0.05]);
        for x in [n, s] {
            assert_eq!(
                radius(&all, x, &mut scratch),
                radius(&plain, x, &mut scratch)
            );
        }
        assert_eq!(
            radius(&north, n, &mut scratch),
            radius(&plain, n, &mut scratch)
        );
        // South, the face the network drew alone is widened, by at most d_r.
        let grown = radius(&north, s, &mut scratch) - radius(&plain, s, &mut scratch);
        assert!(
            grown > 1e-3 && grown <= MAX_WIDENING * d_r + 1e-9,
            "{grown} (d_r {d_r})"
        );
    }

    #[test]
    fn the_hull_is_widened_where_no_demonstration_passed_the_learned_face() {
        // The filter tests' cylinder model (reference demonstrations, learning seed 1), whose
        // demonstrations pass its north and south faces.
        let model = crate::deploy::filter::tests::cylinder();
        let d_r = model.settings.identify.d_r.unwrap();
        // As if every demonstration had passed north of the cylinder (y >= 0).
        let mut north_only = (*model).clone();
        north_only.demonstrated_states.retain(|x| x[1] >= 0.0);
        // And as an older model file without the demonstrated states is read: no such rule.
        let mut older = (*model).clone();
        older.demonstrated_states.clear();
        let up = [0.0, 0.0, 1.0];
        let (all, north, plain) = (
            ReferencePoints::of_model_along(&model, &up),
            ReferencePoints::of_model_along(&north_only, &up),
            ReferencePoints::of_model_along(&older, &up),
        );
        let mut scratch = Scratch::default();
        let radius = |r: &ReferencePoints, x: [f64; 3], s: &mut Scratch| {
            r.star(&model, &x, 0.0, s).unwrap().radius
        };
        for z in [0.02, 0.05, 0.1] {
            let (n, s) = ([0.55, 0.08, z], [0.55, -0.08, z]);
            // The sides the demonstrations passed keep the learned face.
            for x in [n, s] {
                assert_eq!(
                    radius(&all, x, &mut scratch),
                    radius(&plain, x, &mut scratch),
                    "{x:?}"
                );
            }
            assert_eq!(
                radius(&north, n, &mut scratch),
                radius(&plain, n, &mut scratch)
            );
            // The side none passed lies 2 d_r farther out: the filter slides round the north.
            let grown = radius(&north, s, &mut scratch) - radius(&plain, s, &mut scratch);
            assert!(
                (grown - UNDEMONSTRATED_WIDENING * d_r).abs() < 1e-9,
                "{grown} at height {z} (d_r {d_r})"
            );
        }
    }

    #[test]
    fn a_demonstration_under_a_learned_face_does_not_pass_it_and_the_widening_stops_short_of_one_beyond()
     {
        // The filter tests' cylinder model, as if every demonstration had passed north of it: its
        // south face is widened by 2 d_r (above). Demonstrated states are added round the point
        // `s` south of the axis.
        let model = crate::deploy::filter::tests::cylinder();
        let (d_r, m) = (
            model.settings.identify.d_r.unwrap(),
            model.dsm.safety_margin,
        );
        let mut north_only = (*model).clone();
        north_only.demonstrated_states.retain(|x| x[1] >= 0.0);
        let up = [0.0, 0.0, 1.0];
        let mut scratch = Scratch::default();
        let s = [0.55, -0.08, 0.05];
        let mut older = (*model).clone();
        older.demonstrated_states.clear();
        let plain = ReferencePoints::of_model_along(&older, &up)
            .star(&model, &s, 0.0, &mut scratch)
            .unwrap();
        let u: Vec<f64> = {
            let r: Vec<f64> = (0..3).map(|i| s[i] - plain.reference[i]).collect();
            let n = crate::geometry::norm(&r);
            r.iter().map(|c| c / n).collect()
        };
        // The point `out` beyond the learned face along the ray through s and `above` it.
        let at = |out: f64, above: f64| -> Vec<f64> {
            (0..3)
                .map(|i| plain.reference[i] + (plain.radius + out) * u[i] + above * up[i])
                .collect()
        };
        let mut grown = |state: Vec<f64>| {
            let mut with = north_only.clone();
            with.demonstrated_states.push(state);
            let refs = ReferencePoints::of_model_along(&with, &up);
            refs.star(&model, &s, 0.0, &mut scratch).unwrap().radius - plain.radius
        };
        // 1.5 d_r under the face, half a d_r inside it (within 2 d_r, as the demonstrations that
        // go under a box): the face is still widened in full.
        let under = grown(at(-0.5 * d_r, -1.5 * d_r));
        assert!(
            (under - UNDEMONSTRATED_WIDENING * d_r).abs() < 1e-9,
            "{under} (d_r {d_r})"
        );
        // Level with it, half a d_r out: passed beside, not widened.
        let beside = grown(at(0.5 * d_r, 0.0));
        assert!(beside.abs() < 1e-9, "{beside}");
        // 1.2 d_r out and 1 d_r above it (not beside): widened, but with its margin short of it.
        let beyond = grown(at(1.2 * d_r, d_r));
        assert!(
            beyond > 1e-3 && beyond <= 1.2 * d_r - m + 1e-9,
            "{beyond} (d_r {d_r}, margin {m})"
        );
    }
}
