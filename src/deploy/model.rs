//! The constraint model file: one self-describing, versioned JSON document with the network, the
//! feature map, the decision threshold, the task, the learning settings and a training summary.
//! Written atomically; loading validates every field.
use crate::deploy::distance::BoundarySamples;
use crate::error::{Error, Result, write_atomic};
use crate::learn::network::{Mlp, Scratch};
use crate::learn::{IterationStats, LearnConfig};
use crate::policy::modulation::{
    Derived, DsmConfig, PolicySpace, Workspace, boundary_distance_along_gradient,
};
use crate::task::{Feature, Task};
use serde::{Deserialize, Serialize};
use std::path::Path;

pub const FORMAT: &str = "pucl.constraint_model";
pub const VERSION: u32 = 1;

/// One input of the network.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FeatureInfo {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    /// "state" or "action": where psi(s, a) takes it from.
    pub source: String,
    pub index: usize,
}

/// How learning went.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainingSummary {
    pub iterations: usize,
    pub stop_reason: String,
    pub demonstrations: usize,
    pub demonstration_steps: usize,
    /// |R| of the last iteration and |M| at the end.
    pub reliable_infeasible: usize,
    pub memory_buffer: usize,
    /// NaN (JSON null) when nothing was trained.
    #[serde(deserialize_with = "crate::learn::nan_from_null")]
    pub final_loss: f64,
    pub wall_seconds: f64,
    /// Against the task's true constraint, when it was known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iou: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recall: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub precision: Option<f64>,
    pub history: Vec<IterationStats>,
}

/// The learned constraint: feasible iff zeta(psi) >= threshold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConstraintModel {
    pub format: String,
    pub version: u32,
    pub created_by: String,
    pub task: String,
    pub features: Vec<FeatureInfo>,
    /// Position units per second per action unit (the task's dynamics.velocity_scale): converts
    /// commands in physical units to the action units a velocity constraint was learned in.
    #[serde(default = "one")]
    pub velocity_scale: f64,
    /// Position constraints: the task's workspace bounds (feature order), which the safety filter's
    /// output keeps within over its horizon. Absent: no bounds (or a velocity constraint).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<Workspace>,
    /// Position constraints: the task's goal (feature order) and its tolerance. The demonstrations
    /// end there, so the safety filter's hulls of the learned obstacles leave it open
    /// ([`crate::policy::reference::ReferencePoints::keep_open`]). Absent: older files, a task
    /// without a goal, or a velocity constraint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goal: Option<ModelGoal>,
    pub threshold: f64,
    pub network: Mlp,
    /// The modulation settings the model was learned with (the policy that uses it).
    pub dsm: DsmConfig,
    pub settings: LearnConfig,
    pub seed: u64,
    /// The demonstrations' start states (evaluation episodes start there).
    pub starts: Vec<Vec<f64>>,
    /// The reliable infeasible states of all iterations (the memory buffer M).
    pub memory_buffer: Vec<Vec<f64>>,
    /// Position constraints: the demonstrated states (feature space), so that the safety filter
    /// can tell the sides of a learned obstacle the demonstrations passed from those they never
    /// came near ([`crate::policy::reference::Support`]). Absent: older files, velocity constraints.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub demonstrated_states: Vec<Vec<f64>>,
    pub summary: TrainingSummary,
    /// Built on first use by [`Self::query`]: points on the learned boundary.
    #[serde(skip)]
    boundary: Derived<Option<BoundarySamples>>,
}

fn one() -> f64 {
    1.0
}

/// What [`ConstraintModel::query`] says about one state.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// zeta >= threshold.
    pub feasible: bool,
    /// The feasibility probability, in (0, 1).
    pub zeta: f64,
    /// d zeta / d psi: points away from the learned obstacle.
    pub gradient: Vec<f64>,
    /// Signed distance (feature units) to the learned boundary: positive when feasible, negative
    /// inside; infinite where none is found ([`ConstraintModel::query`]).
    pub distance: f64,
    /// The gradient's direction (unit length; zero where zeta is flat), read from zeta's logit so
    /// that it is there where zeta's own gradient underflows far from the obstacle.
    pub direction: Vec<f64>,
}

/// The goal a position model's task asks for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelGoal {
    /// In the model's feature order.
    pub position: Vec<f64>,
    /// Distance within which a run has reached it.
    pub tolerance: f64,
}

pub fn feature_infos(task: &Task) -> Vec<FeatureInfo> {
    task.features
        .iter()
        .zip(task.feature_names())
        .map(|(f, name)| {
            let (source, index) = match f {
                Feature::State(i) => ("state", *i),
                Feature::Action(i) => ("action", *i),
            };
            FeatureInfo {
                name: name.clone(),
                unit: task.unit(name).map(str::to_string),
                source: source.into(),
                index,
            }
        })
        .collect()
}

impl ConstraintModel {
    /// The model file of a learning run.
    pub fn from_learned(
        task: &Task,
        demos: &crate::demos::DemoSet,
        cfg: &LearnConfig,
        seed: u64,
        learned: &crate::learn::Learned,
    ) -> Self {
        let last = learned.history.last();
        ConstraintModel {
            format: FORMAT.into(),
            version: VERSION,
            created_by: format!("pucl {}", env!("CARGO_PKG_VERSION")),
            task: task.name().into(),
            features: feature_infos(task),
            velocity_scale: task.spec.dynamics.velocity_scale,
            workspace: match (PolicySpace::of(task), &task.bounds) {
                (Ok(PolicySpace::Position), Some((lower, upper))) => Some(Workspace {
                    lower: lower.clone(),
                    upper: upper.clone(),
                }),
                _ => None,
            },
            goal: match PolicySpace::of(task) {
                Ok(PolicySpace::Position) => task.goal_features().map(|position| ModelGoal {
                    position,
                    tolerance: task.spec.goal.tolerance,
                }),
                _ => None,
            },
            threshold: 0.5,
            network: learned.net.clone(),
            dsm: learned.dsm.clone(),
            settings: cfg.clone(),
            seed,
            starts: learned.starts.clone(),
            memory_buffer: learned.memory_buffer.rows().map(<[f64]>::to_vec).collect(),
            demonstrated_states: match PolicySpace::of(task) {
                Ok(PolicySpace::Position) => demos
                    .feature_points(task)
                    .chunks(task.feature_dim())
                    .map(<[f64]>::to_vec)
                    .collect(),
                _ => Vec::new(),
            },
            summary: TrainingSummary {
                iterations: learned.history.len(),
                stop_reason: learned.stop_reason.clone(),
                demonstrations: demos.len(),
                demonstration_steps: demos.total_steps(),
                reliable_infeasible: last.map_or(0, |l| l.reliable_infeasible),
                memory_buffer: learned.memory_buffer.len(),
                final_loss: last.map_or(0.0, |l| l.loss),
                wall_seconds: learned.seconds,
                iou: last.map(|l| l.iou),
                recall: last.map(|l| l.recall),
                precision: last.map(|l| l.precision),
                history: learned.history.clone(),
            },
            boundary: Derived::default(),
        }
    }

    /// Whether the constraint sees the command (a velocity constraint) rather than the position.
    pub fn constrains_command(&self) -> bool {
        self.features.iter().all(|f| f.source == "action")
    }

    pub fn dim(&self) -> usize {
        self.features.len()
    }

    /// Is the state feasible, how far is the learned boundary, and which way (at one feature
    /// vector).
    pub fn query(&self, x: &[f64], scratch: &mut Scratch) -> Answer {
        // One pass for both: zeta and its gradient from the logit's (as `Mlp::zeta_and_grad` does),
        // and the direction from the logit's gradient, which is there where zeta's underflows
        // (zeta 1 in floating point, far from the obstacle).
        let mut direction = vec![0.0; self.dim()];
        let logit = self.network.logit_and_grad(x, &mut direction, scratch);
        let zeta = crate::learn::network::sigmoid(logit);
        let gradient: Vec<f64> = direction
            .iter()
            .map(|g| g * (zeta * (1.0 - zeta)))
            .collect();
        let norm = crate::geometry::norm(&direction);
        direction
            .iter_mut()
            .for_each(|v| *v = if norm > 0.0 { *v / norm } else { 0.0 });
        let feasible = zeta >= self.threshold;
        Answer {
            feasible,
            zeta,
            gradient,
            distance: self.boundary_distance(x, feasible, scratch),
            direction,
        }
    }

    /// The distance to the learned boundary, negative inside: from the points sampled on it
    /// ([`BoundarySamples`], within [`Self::search_box`]); beyond three dimensions, or where the box
    /// holds no boundary, where the boundary meets zeta's gradient line
    /// ([`boundary_distance_along_gradient`]). Infinite when neither finds it.
    fn boundary_distance(&self, x: &[f64], feasible: bool, scratch: &mut Scratch) -> f64 {
        let level = (self.threshold / (1.0 - self.threshold)).ln();
        let side = if feasible { 1.0 } else { -1.0 };
        if let Some(s) = self.boundary_samples() {
            return side * s.distance(&self.network, level, x, scratch);
        }
        let range = self
            .search_box()
            .map_or(1.0, |(lo, hi)| crate::geometry::distance(&lo, &hi));
        let mut buffer = vec![0.0; self.dim()];
        let along =
            boundary_distance_along_gradient(&self.network, x, level, range, &mut buffer, scratch);
        side * along.abs()
    }

    /// The points [`Self::query`] samples on the learned boundary, on first use (about 0.1 s): call it
    /// where the first query must not wait for them.
    pub fn boundary_samples(&self) -> Option<&BoundarySamples> {
        self.boundary
            .0
            .get_or_init(|| {
                let (lo, hi) = self.search_box()?;
                BoundarySamples::sample(&self.network, self.threshold, &lo, &hi)
            })
            .as_ref()
    }

    /// Where [`Self::query`] looks for the learned boundary: the task's workspace, or, without one
    /// (a velocity constraint), the box around the memory buffer and the demonstrated states, where
    /// learning saw anything, widened by its size on every side. None when there is nothing to
    /// span it.
    pub fn search_box(&self) -> Option<(Vec<f64>, Vec<f64>)> {
        if let Some(w) = &self.workspace {
            return Some((w.lower.clone(), w.upper.clone()));
        }
        let d = self.dim();
        let (mut lo, mut hi) = (vec![f64::INFINITY; d], vec![f64::NEG_INFINITY; d]);
        for p in self
            .memory_buffer
            .iter()
            .chain(&self.demonstrated_states)
            .filter(|p| p.len() == d)
        {
            for k in 0..d {
                lo[k] = lo[k].min(p[k]);
                hi[k] = hi[k].max(p[k]);
            }
        }
        let size: Vec<f64> = (0..d).map(|k| (hi[k] - lo[k]).max(1e-3)).collect();
        (0..d)
            .all(|k| lo[k].is_finite() && hi[k].is_finite())
            .then(|| {
                (
                    (0..d).map(|k| lo[k] - size[k]).collect(),
                    (0..d).map(|k| hi[k] + size[k]).collect(),
                )
            })
    }

    /// The learned constraint sampled on a grid of `n` cells per axis over the box around the starts
    /// and the memory buffer (padded by a fifth), where learning probed it. None for a velocity
    /// constraint or when there is nothing to span the box.
    pub fn grid(&self, n: usize) -> Option<CellGrid> {
        let d = self.dim();
        if self.constrains_command() || n < 2 {
            return None;
        }
        let pos = |s: &Vec<f64>| -> Vec<f64> { self.features.iter().map(|f| s[f.index]).collect() };
        let pts: Vec<Vec<f64>> = self
            .starts
            .iter()
            .map(pos)
            .chain(self.memory_buffer.iter().cloned())
            .collect();
        if pts.is_empty() {
            return None;
        }
        let lo: Vec<f64> = (0..d)
            .map(|k| pts.iter().map(|p| p[k]).fold(f64::INFINITY, f64::min))
            .collect();
        let hi: Vec<f64> = (0..d)
            .map(|k| pts.iter().map(|p| p[k]).fold(f64::NEG_INFINITY, f64::max))
            .collect();
        let pad: Vec<f64> = (0..d).map(|k| 0.2 * (hi[k] - lo[k]).max(1e-3)).collect();
        let mut grid = CellGrid {
            n,
            lo: (0..d).map(|k| lo[k] - pad[k]).collect(),
            step: (0..d)
                .map(|k| (hi[k] - lo[k] + 2.0 * pad[k]) / (n - 1) as f64)
                .collect(),
            infeasible: Vec::new(),
        };
        let mut scratch = Scratch::default();
        let mut x = vec![0.0; d];
        grid.infeasible = (0..n.pow(d as u32))
            .map(|i| {
                grid.center(i, &mut x);
                self.network.zeta(&x, &mut scratch) < self.threshold
            })
            .collect();
        Some(grid)
    }

    /// The learned boundary as grid cells: infeasible cells of [`Self::grid`] with a feasible
    /// neighbour or on the grid's edge. Returns the cell centres and the cell size per axis. Empty for
    /// a velocity constraint.
    pub fn boundary_cells(&self, n: usize) -> (Vec<Vec<f64>>, Vec<f64>) {
        let Some(grid) = self.grid(n) else {
            return (Vec::new(), vec![0.0; self.dim()]);
        };
        let mut cells = Vec::new();
        for i in 0..grid.infeasible.len() {
            if grid.infeasible[i]
                && (grid.on_edge(i) || grid.neighbours(i).any(|j| !grid.infeasible[j]))
            {
                let mut x = vec![0.0; grid.dim()];
                grid.center(i, &mut x);
                cells.push(x);
            }
        }
        (cells, grid.step)
    }

    /// Check every field; `path` names the file in errors.
    pub fn validate(&self, path: &Path) -> Result<()> {
        let bad = |field: &str, msg: String| Error::file(path, None, Some(field), msg);
        if self.format != FORMAT {
            return Err(bad(
                "format",
                format!(
                    "expected '{FORMAT}', found '{}' (not a pucl constraint model)",
                    self.format
                ),
            ));
        }
        if self.version != VERSION {
            return Err(bad(
                "version",
                format!(
                    "version {} is not supported (this pucl reads version {VERSION})",
                    self.version
                ),
            ));
        }
        self.network.validate().map_err(|e| bad("network", e))?;
        if self.features.len() != self.network.input_dim() {
            return Err(bad(
                "features",
                format!(
                    "{} features but the network takes {} inputs",
                    self.features.len(),
                    self.network.input_dim()
                ),
            ));
        }
        if let Some(f) = self
            .features
            .iter()
            .find(|f| f.source != "state" && f.source != "action")
        {
            return Err(bad(
                "features",
                format!(
                    "source of '{}' must be 'state' or 'action', found '{}'",
                    f.name, f.source
                ),
            ));
        }
        if !(self.velocity_scale.is_finite() && self.velocity_scale > 0.0) {
            return Err(bad(
                "velocity_scale",
                format!("must be a finite number > 0, found {}", self.velocity_scale),
            ));
        }
        if !(self.threshold > 0.0 && self.threshold < 1.0) {
            return Err(bad(
                "threshold",
                format!("must be in (0, 1), found {}", self.threshold),
            ));
        }
        self.dsm
            .validate(Some(self.dim()))
            .map_err(|e| bad("dsm", e))?;
        self.settings.validate().map_err(|e| bad("settings", e))?;
        for (field, points) in [
            ("memory_buffer", &self.memory_buffer),
            ("demonstrated_states", &self.demonstrated_states),
        ] {
            if points
                .iter()
                .any(|p| p.len() != self.dim() || p.iter().any(|v| !v.is_finite()))
            {
                return Err(bad(
                    field,
                    format!("every point needs {} finite values", self.dim()),
                ));
            }
        }
        if let Some(g) = &self.goal {
            if g.position.len() != self.dim() || g.position.iter().any(|v| !v.is_finite()) {
                return Err(bad(
                    "goal.position",
                    format!("needs {} finite values", self.dim()),
                ));
            }
            if !(g.tolerance.is_finite() && g.tolerance >= 0.0) {
                return Err(bad(
                    "goal.tolerance",
                    format!("must be a finite number >= 0, found {}", g.tolerance),
                ));
            }
        }
        if self.starts.iter().any(|p| p.iter().any(|v| !v.is_finite())) {
            return Err(bad("starts", "values must be finite".into()));
        }
        Ok(())
    }

    /// Refuse a model whose features are not the task's constraint input.
    pub fn check_task(&self, task: &Task, path: &Path) -> Result<()> {
        let names: Vec<&str> = self.features.iter().map(|f| f.name.as_str()).collect();
        let want: Vec<&str> = task.feature_names().iter().map(String::as_str).collect();
        if names != want {
            return Err(Error::file(
                path,
                None,
                Some("features"),
                format!(
                    "wrong dimension or inputs: the model takes [{}] ({}), task '{}' constrains [{}] ({})",
                    names.join(", "),
                    names.len(),
                    task.name(),
                    want.join(", "),
                    want.len()
                ),
            ));
        }
        if self.starts.iter().any(|s| s.len() != task.state_dim()) {
            return Err(Error::file(
                path,
                None,
                Some("starts"),
                format!(
                    "states need {} values for task '{}'",
                    task.state_dim(),
                    task.name()
                ),
            ));
        }
        Ok(())
    }

    /// Why ROS's metres (REP 103) cannot be fed to this model as they come: a feature in cm or mm,
    /// from a task written in those units. None where every unit is metres (m, m/s, "0.48 m/s") or
    /// no unit is given.
    pub fn not_in_metres(&self) -> Option<String> {
        not_in_metres(&self.features)
    }

    pub fn load(path: &Path) -> Result<ConstraintModel> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        if text.trim().is_empty() {
            return Err(Error::file(path, None, None, "the file is empty"));
        }
        let m: ConstraintModel = serde_json::from_str(&text)
            .map_err(|e| Error::file(path, Some(e.line() as u64), None, e.to_string()))?;
        m.validate(path)?;
        Ok(m)
    }

    pub fn save(&self, path: &Path) -> Result<()> {
        let text = serde_json::to_string(self)
            .map_err(|e| Error::Invalid(format!("serializing the model: {e}")))?;
        write_atomic(path, text.as_bytes())
    }
}

/// See [`ConstraintModel::not_in_metres`].
pub fn not_in_metres(features: &[FeatureInfo]) -> Option<String> {
    features.iter().find_map(|f| {
        let unit = f.unit.as_deref()?.split_whitespace().last()?;
        ["cm", "mm", "cm/s", "mm/s"].contains(&unit).then(|| {
            format!(
                "feature '{}' is in {unit}, but ROS poses and twists are in metres (REP 103): learn \
                 the model from the task written in metres",
                f.name
            )
        })
    })
}

/// The learned constraint sampled at the centres of a regular grid (cell i: axis k index
/// (i / n^k) % n).
#[derive(Debug, Clone)]
pub struct CellGrid {
    /// Cells per axis.
    pub n: usize,
    /// Centre of cell 0 and the spacing per axis.
    pub lo: Vec<f64>,
    pub step: Vec<f64>,
    /// zeta below the model's threshold at each cell centre.
    pub infeasible: Vec<bool>,
}

impl CellGrid {
    pub fn dim(&self) -> usize {
        self.lo.len()
    }

    /// The centre of cell `i`, written to `x`.
    pub fn center(&self, mut i: usize, x: &mut [f64]) {
        for ((xk, lo), step) in x.iter_mut().zip(&self.lo).zip(&self.step) {
            *xk = lo + (i % self.n) as f64 * step;
            i /= self.n;
        }
    }

    /// The cell containing `x`, if `x` is on the grid.
    pub fn cell_at(&self, x: &[f64]) -> Option<usize> {
        let (mut i, mut stride) = (0, 1);
        for ((xk, lo), step) in x.iter().zip(&self.lo).zip(&self.step) {
            let c = ((xk - lo) / step).round();
            if !(c >= 0.0 && c < self.n as f64) {
                return None;
            }
            i += c as usize * stride;
            stride *= self.n;
        }
        Some(i)
    }

    /// Whether cell `i` lies on a face of the grid.
    pub fn on_edge(&self, i: usize) -> bool {
        let mut stride = 1;
        (0..self.dim()).any(|_| {
            let c = (i / stride) % self.n;
            stride *= self.n;
            c == 0 || c + 1 == self.n
        })
    }

    /// The cells sharing a face, an edge or a corner with cell `i` (up to 8 in the plane, 26 in
    /// space).
    pub fn touching(&self, i: usize) -> impl Iterator<Item = usize> + '_ {
        let d = self.dim();
        let all = 3usize.pow(d as u32);
        // Each offset in {-1, 0, 1}^d as the base-3 digits of one code; the middle code is i itself.
        (0..all)
            .filter(move |&code| code != all / 2)
            .filter_map(move |code| {
                let mut j = i;
                for k in 0..d {
                    let stride = self.n.pow(k as u32);
                    let c = (i / stride) % self.n;
                    match (code / 3usize.pow(k as u32)) % 3 {
                        0 if c > 0 => j -= stride,
                        2 if c + 1 < self.n => j += stride,
                        1 => {}
                        _ => return None,
                    }
                }
                Some(j)
            })
    }

    /// The cells sharing a face with cell `i`.
    pub fn neighbours(&self, i: usize) -> impl Iterator<Item = usize> + '_ {
        (0..self.dim()).flat_map(move |k| {
            let stride = self.n.pow(k as u32);
            let c = (i / stride) % self.n;
            let below = (c > 0).then(|| i - stride);
            let above = (c + 1 < self.n).then(|| i + stride);
            below.into_iter().chain(above)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn features(units: &[Option<&str>]) -> Vec<FeatureInfo> {
        units
            .iter()
            .enumerate()
            .map(|(index, u)| FeatureInfo {
                name: ["x", "y", "z"][index].into(),
                unit: u.map(str::to_string),
                source: "state".into(),
                index,
            })
            .collect()
    }

    #[test]
    fn a_model_in_cm_or_mm_is_named_as_not_in_ross_metres_and_metres_or_no_unit_pass() {
        assert_eq!(
            not_in_metres(&features(&[Some("m"), Some("m"), None])),
            None
        );
        assert_eq!(not_in_metres(&features(&[Some("0.48 m/s"); 3])), None);
        let e = not_in_metres(&features(&[Some("m"), Some("mm"), Some("mm")])).unwrap();
        assert!(
            e.contains("'y'") && e.contains("mm") && e.contains("REP 103"),
            "{e}"
        );
        let e = not_in_metres(&features(&[Some("480 mm/s"); 3])).unwrap();
        assert!(e.contains("'x'") && e.contains("mm/s"), "{e}");
        assert!(not_in_metres(&features(&[Some("cm"); 3])).is_some());
    }

    #[test]
    fn cells_touching_a_cell_share_a_face_an_edge_or_a_corner_with_it_and_stay_on_the_grid() {
        let grid = |d: usize| CellGrid {
            n: 4,
            lo: vec![0.0; d],
            step: vec![1.0; d],
            infeasible: vec![false; 4usize.pow(d as u32)],
        };
        let cells = |g: &CellGrid, i: usize| {
            let mut t: Vec<usize> = g.touching(i).collect();
            t.sort_unstable();
            t
        };
        let plane = grid(2);
        // Cell (1, 1) is 5; its eight neighbours, and a corner cell's three.
        assert_eq!(cells(&plane, 5), vec![0, 1, 2, 4, 6, 8, 9, 10]);
        assert_eq!(cells(&plane, 0), vec![1, 4, 5]);
        // (3, 0) at the grid's edge does not wrap round to (0, 1).
        assert_eq!(cells(&plane, 3), vec![2, 6, 7]);
        let space = grid(3);
        assert_eq!(cells(&space, 1 + 4 + 16).len(), 26);
        assert_eq!(cells(&space, 0).len(), 7);
    }
}
