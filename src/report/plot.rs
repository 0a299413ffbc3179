//! Pictures of a task in the constraint's feature space: the true constraint (or a learned zeta as a
//! heat map with the true boundary drawn over it), demonstrations, rollouts and marked points. A 2-D
//! feature space is one panel; a 3-D one is a top view and a side view through the constraint.
use crate::demos::DemoSet;
use crate::error::{Error, Result};
use crate::task::{Feature, Task};
use plotters::prelude::*;
use std::path::Path;

/// A scalar field over the feature space (a learned zeta).
pub type Field<'a> = &'a dyn Fn(&[f64]) -> f64;

/// One polyline or point set, in feature coordinates.
pub struct Series {
    pub label: String,
    pub color: RGBColor,
    /// Each inner vector is one polyline (or, for `points`, a set of points).
    pub groups: Vec<Vec<Vec<f64>>>,
}

impl Series {
    /// Each demonstration of a set as a polyline in feature space.
    pub fn demonstrations(task: &Task, set: &DemoSet) -> Series {
        let d = task.feature_dim();
        let pts = set.feature_points(task);
        let mut groups = Vec::new();
        let mut row = 0;
        for demo in &set.demos {
            let len = demo.len(set.state_dim());
            groups.push(
                (row..row + len)
                    .map(|r| pts[r * d..(r + 1) * d].to_vec())
                    .collect(),
            );
            row += len;
        }
        Series {
            label: format!("demonstrations ({})", set.len()),
            color: DEMO_COLOR,
            groups,
        }
    }
}

/// What to draw.
pub struct Scene<'a> {
    pub task: &'a Task,
    pub title: String,
    /// A learned feasibility zeta(psi) in [0, 1] (1 = feasible), drawn as a heat map. None: the true
    /// infeasible set is drawn filled.
    pub field: Option<Field<'a>>,
    pub paths: Vec<Series>,
    pub points: Vec<Series>,
}

/// Colours used for the usual series.
pub const DEMO_COLOR: RGBColor = RGBColor(20, 60, 200);
pub const ROLLOUT_COLOR: RGBColor = RGBColor(230, 120, 0);
pub const INFEASIBLE_POINT_COLOR: RGBColor = RGBColor(200, 0, 0);
const TRUE_INFEASIBLE_FILL: RGBColor = RGBColor(248, 190, 190);
const CELLS: usize = 150;

struct View {
    x: usize,
    y: usize,
    /// Fixed values of the other features.
    fixed: Vec<(usize, f64)>,
    caption: String,
}

fn register_font() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // A bundled font, so that pictures render the same on any machine (no fontconfig needed).
        let _ = plotters::style::register_font(
            "sans-serif",
            FontStyle::Normal,
            include_bytes!("../../assets/fonts/DejaVuSans.ttf"),
        );
    });
}

/// Diverging map for zeta: 0 (infeasible) dark red, 0.5 white, 1 (feasible) blue.
pub fn zeta_color(z: f64) -> RGBColor {
    let z = if z.is_finite() {
        z.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let lerp = |a: (f64, f64, f64), b: (f64, f64, f64), t: f64| {
        RGBColor(
            (a.0 + (b.0 - a.0) * t) as u8,
            (a.1 + (b.1 - a.1) * t) as u8,
            (a.2 + (b.2 - a.2) * t) as u8,
        )
    };
    if z < 0.5 {
        lerp((165.0, 15.0, 21.0), (255.0, 255.0, 255.0), z / 0.5)
    } else {
        lerp((255.0, 255.0, 255.0), (33.0, 102.0, 172.0), (z - 0.5) / 0.5)
    }
}

impl Scene<'_> {
    /// The slice value of feature k for the views: through the first primitive that is bounded in that
    /// feature; without a true constraint, the median of the reliable infeasible points drawn; else the
    /// goal (for position features), else the middle of the evaluation grid or the workspace.
    fn slice_value(&self, k: usize) -> f64 {
        let t = self.task;
        for s in &t.true_constraint {
            let (lo, hi) = s.aabb(t.feature_dim());
            if lo[k].is_finite() && hi[k].is_finite() {
                return 0.5 * (lo[k] + hi[k]);
            }
        }
        // No true constraint (a real robot's task): through the middle of the labelled infeasible
        // states, where the learned obstacle is.
        let mut labelled: Vec<f64> = self
            .points
            .iter()
            .flat_map(|s| s.groups.iter().flatten())
            .map(|p| p[k])
            .filter(|v| v.is_finite())
            .collect();
        if t.true_constraint.is_empty() && !labelled.is_empty() {
            labelled.sort_by(f64::total_cmp);
            return labelled[labelled.len() / 2];
        }
        if let Feature::State(i) = t.features[k]
            && let Some(p) = t.position_idx.iter().position(|&j| j == i)
        {
            return t.goal()[p];
        }
        self.extent(k).map_or(0.0, |(lo, hi)| 0.5 * (lo + hi))
    }

    /// What the task says feature k spans: its evaluation grid, or, without one (a task with no true
    /// constraint), the workspace bounds of a position feature.
    fn extent(&self, k: usize) -> Option<(f64, f64)> {
        let t = self.task;
        if let Some(g) = t.grid.get(k).filter(|g| !g.is_empty()) {
            return Some((g[0].min(g[g.len() - 1]), g[0].max(g[g.len() - 1])));
        }
        let Feature::State(i) = t.features[k] else {
            return None;
        };
        let p = t.position_idx.iter().position(|&j| j == i)?;
        t.bounds.as_ref().map(|(lo, hi)| (lo[p], hi[p]))
    }

    fn views(&self) -> Result<Vec<View>> {
        let t = self.task;
        let names = t.feature_names();
        let unit = |k: usize| {
            t.unit(&names[k])
                .map(|u| format!(" [{u}]"))
                .unwrap_or_default()
        };
        match t.feature_dim() {
            2 => Ok(vec![View {
                x: 0,
                y: 1,
                fixed: vec![],
                caption: format!("{} - {}", names[0], names[1]),
            }]),
            3 => {
                let (z, y) = (self.slice_value(2), self.slice_value(1));
                Ok(vec![
                    View {
                        x: 0,
                        y: 1,
                        fixed: vec![(2, z)],
                        caption: format!("top view, {} = {z:.3}{}", names[2], unit(2)),
                    },
                    View {
                        x: 0,
                        y: 2,
                        fixed: vec![(1, y)],
                        caption: format!("side view, {} = {y:.3}{}", names[1], unit(1)),
                    },
                ])
            }
            d => Err(Error::Invalid(format!(
                "task '{}': pictures need a 2- or 3-dimensional constraint input, this one has {d}",
                t.name()
            ))),
        }
    }

    /// Axis range of feature k: the evaluation grid and everything drawn, with a small pad.
    fn range(&self, k: usize) -> (f64, f64) {
        let (mut lo, mut hi) = self.extent(k).unwrap_or((f64::INFINITY, f64::NEG_INFINITY));
        for s in self.paths.iter().chain(&self.points) {
            for p in s.groups.iter().flatten() {
                if p[k].is_finite() {
                    lo = lo.min(p[k]);
                    hi = hi.max(p[k]);
                }
            }
        }
        if lo > hi {
            // Nothing spans it (no grid, bounds or data): a unit range.
            return (-0.5, 0.5);
        }
        let pad = 0.05 * (hi - lo).max(1e-9);
        (lo - pad, hi + pad)
    }

    /// Render to a PNG, written atomically.
    pub fn render(&self, out: &Path) -> Result<()> {
        register_font();
        let views = self.views()?;
        let size = Self::size(views.len());
        write_png(out, |tmp| {
            self.draw(BitMapBackend::new(tmp, size).into_drawing_area(), &views)
        })
    }

    /// The picture's size in pixels: one view, or two side by side.
    fn size(views: usize) -> (u32, u32) {
        if views == 1 { (760, 720) } else { (1400, 700) }
    }

    /// The title above the views, side by side.
    fn draw<DB: DrawingBackend>(
        &self,
        root: DrawingArea<DB, plotters::coord::Shift>,
        views: &[View],
    ) -> DrawResult
    where
        DB::ErrorType: 'static,
    {
        root.fill(&WHITE)?;
        let (top, body) = root.split_vertically(36);
        top.titled(&self.title, ("sans-serif", 22))?;
        let panels = body.split_evenly((1, views.len()));
        for (panel, v) in panels.iter().zip(views) {
            self.draw_view(panel, v)?;
        }
        root.present()?;
        Ok(())
    }

    /// Several scenes in one PNG, `columns` to a row, each with its title (e.g. learned against true
    /// constraints of a sample of tasks). Written atomically.
    pub fn render_grid(scenes: &[Scene], columns: usize, title: &str, out: &Path) -> Result<()> {
        register_font();
        let views = scenes
            .iter()
            .map(|s| s.views())
            .collect::<Result<Vec<_>>>()?;
        let columns = columns.clamp(1, scenes.len().max(1));
        let rows = scenes.len().div_ceil(columns).max(1);
        let (cw, ch) = (900u32, 440u32);
        write_png(out, |tmp| {
            let root = BitMapBackend::new(tmp, (cw * columns as u32, ch * rows as u32 + 40))
                .into_drawing_area();
            root.fill(&WHITE)?;
            let (top, body) = root.split_vertically(40);
            top.titled(title, ("sans-serif", 24))?;
            let cells = body.split_evenly((rows, columns));
            for ((cell, scene), v) in cells.iter().zip(scenes).zip(&views) {
                let (head, area) = cell.split_vertically(26);
                head.titled(&scene.title, ("sans-serif", 17))?;
                for (panel, view) in area.split_evenly((1, v.len())).iter().zip(v) {
                    scene.draw_view(panel, view)?;
                }
            }
            root.present()?;
            Ok(())
        })
    }

    fn draw_view<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, plotters::coord::Shift>,
        v: &View,
    ) -> std::result::Result<(), Box<dyn std::error::Error>>
    where
        DB::ErrorType: 'static,
    {
        let t = self.task;
        let names = t.feature_names();
        let label = |k: usize| match t.unit(&names[k]) {
            Some(u) => format!("{} [{u}]", names[k]),
            None => names[k].clone(),
        };
        let (x0, x1) = self.range(v.x);
        let (y0, y1) = self.range(v.y);
        let mut chart = ChartBuilder::on(area)
            .caption(&v.caption, ("sans-serif", 17))
            .margin(12)
            .x_label_area_size(45)
            .y_label_area_size(60)
            .build_cartesian_2d(x0..x1, y0..y1)?;
        chart
            .configure_mesh()
            .disable_mesh()
            .x_desc(label(v.x))
            .y_desc(label(v.y))
            .label_style(("sans-serif", 13))
            .draw()?;

        // Raster: learned zeta or the true infeasible set; then the true boundary as cell edges.
        let (dx, dy) = ((x1 - x0) / CELLS as f64, (y1 - y0) / CELLS as f64);
        let mut psi: Vec<f64> = (0..t.feature_dim()).map(|k| self.slice_value(k)).collect();
        for &(k, val) in &v.fixed {
            psi[k] = val;
        }
        let mut truth = vec![false; CELLS * CELLS];
        let mut cells = Vec::with_capacity(CELLS * CELLS);
        for j in 0..CELLS {
            for i in 0..CELLS {
                psi[v.x] = x0 + (i as f64 + 0.5) * dx;
                psi[v.y] = y0 + (j as f64 + 0.5) * dy;
                let inf = t.truly_infeasible(&psi);
                truth[j * CELLS + i] = inf;
                let color = match self.field {
                    Some(f) => zeta_color(f(&psi)),
                    None if inf => TRUE_INFEASIBLE_FILL,
                    None => WHITE,
                };
                let (xa, ya) = (x0 + i as f64 * dx, y0 + j as f64 * dy);
                cells.push(Rectangle::new(
                    [(xa, ya), (xa + dx, ya + dy)],
                    color.filled(),
                ));
            }
        }
        chart.draw_series(cells)?;
        let mut edges = Vec::new();
        for j in 0..CELLS {
            for i in 0..CELLS {
                let (xa, ya) = (x0 + (i + 1) as f64 * dx, y0 + (j + 1) as f64 * dy);
                if i + 1 < CELLS && truth[j * CELLS + i] != truth[j * CELLS + i + 1] {
                    edges.push(vec![(xa, ya - dy), (xa, ya)]);
                }
                if j + 1 < CELLS && truth[j * CELLS + i] != truth[(j + 1) * CELLS + i] {
                    edges.push(vec![(xa - dx, ya), (xa, ya)]);
                }
            }
        }
        // Listed first in the legend, drawn last: markers on the boundary must not hide the truth.
        if !self.task.true_constraint.is_empty() {
            chart
                .draw_series(std::iter::empty::<PathElement<(f64, f64)>>())?
                .label("true boundary")
                .legend(|(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], BLACK.stroke_width(2))
                });
        }

        for s in &self.paths {
            let color = s.color;
            let mut first = true;
            for g in &s.groups {
                let pts: Vec<(f64, f64)> = g.iter().map(|p| (p[v.x], p[v.y])).collect();
                let drawn = chart.draw_series(LineSeries::new(pts, color.stroke_width(2)))?;
                if first {
                    drawn.label(&s.label).legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
                    });
                    first = false;
                }
            }
        }
        for s in &self.points {
            let color = s.color;
            let pts: Vec<(f64, f64)> = s
                .groups
                .iter()
                .flatten()
                .map(|p| (p[v.x], p[v.y]))
                .collect();
            if pts.is_empty() {
                continue;
            }
            chart
                .draw_series(pts.into_iter().map(|p| Circle::new(p, 3, color.filled())))?
                .label(&s.label)
                .legend(move |(x, y)| Circle::new((x + 9, y), 4, color.filled()));
        }
        chart.draw_series(
            edges
                .into_iter()
                .map(|e| PathElement::new(e, BLACK.stroke_width(2))),
        )?;
        // The goal, when the features are the positions.
        let goal_psi: Option<Vec<f64>> = t
            .features
            .iter()
            .map(|f| match f {
                Feature::State(i) => t
                    .position_idx
                    .iter()
                    .position(|j| j == i)
                    .map(|p| t.goal()[p]),
                Feature::Action(_) => None,
            })
            .collect();
        if let Some(g) = goal_psi {
            chart
                .draw_series(std::iter::once(Cross::new(
                    (g[v.x], g[v.y]),
                    7,
                    BLACK.stroke_width(3),
                )))?
                .label("goal")
                .legend(|(x, y)| Cross::new((x + 9, y), 5, BLACK.stroke_width(2)));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font(("sans-serif", 13))
            .draw()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_picture_is_a_png_with_the_constraint_drawn() {
        let t = Task::load("reach_obstacle_3d").unwrap();
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("task.png");
        let scene = Scene {
            task: &t,
            title: "reach_obstacle_3d".into(),
            field: None,
            paths: vec![Series {
                label: "demo".into(),
                color: DEMO_COLOR,
                groups: vec![vec![vec![0.35, -0.09, 0.05], vec![0.68, 0.0, 0.04]]],
            }],
            points: vec![],
        };
        scene.render(&out).unwrap();
        let bytes = std::fs::read(&out).unwrap();
        assert_eq!(&bytes[1..4], b"PNG");
        assert_eq!(
            std::fs::read_dir(d.path()).unwrap().count(),
            1,
            "no temporary file left"
        );
    }

    #[test]
    fn markers_on_the_true_boundary_do_not_hide_it() {
        // Black pixels of a picture whose 200 markers lie on the round ellipse's boundary, and of
        // one with them in open space: the same, when the boundary is drawn over the markers.
        let t = Task::load("point_ellipse_2d").unwrap();
        let black = |points: Vec<Vec<f64>>| {
            let scene = Scene {
                task: &t,
                title: "markers".into(),
                field: None,
                paths: vec![],
                points: vec![Series {
                    label: "reliable infeasible".into(),
                    color: RED,
                    groups: vec![points],
                }],
            };
            let views = scene.views().unwrap();
            let (w, h) = Scene::size(views.len());
            let mut buf = vec![0u8; (w * h * 3) as usize];
            let root = BitMapBackend::with_buffer(&mut buf, (w, h)).into_drawing_area();
            scene.draw(root, &views).unwrap();
            buf.chunks(3).filter(|p| p == &[0, 0, 0]).count()
        };
        let around = |c: [f64; 2], r: f64| {
            (0..200)
                .map(|i| {
                    let a = i as f64 * std::f64::consts::TAU / 200.0;
                    vec![c[0] + r * a.cos(), c[1] + r * a.sin()]
                })
                .collect::<Vec<_>>()
        };
        register_font();
        let on_boundary = black(around([0.72, 0.55], 0.25));
        let in_open_space = black(around([1.3, 0.1], 0.02));
        assert_eq!(on_boundary, in_open_space);
    }

    #[test]
    fn zeta_colors_are_diverging_around_one_half() {
        assert_eq!(zeta_color(0.5), RGBColor(255, 255, 255));
        assert!(zeta_color(0.0).0 > zeta_color(0.0).2);
        assert!(zeta_color(1.0).2 > zeta_color(1.0).0);
        assert_eq!(zeta_color(f64::NAN), zeta_color(0.0));
    }
}

type DrawResult = std::result::Result<(), Box<dyn std::error::Error>>;

/// Draw a PNG into a temporary file beside `out`, then rename it over `out` (atomic).
fn write_png(out: &Path, draw: impl FnOnce(&Path) -> DrawResult) -> Result<()> {
    let dir = out
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = out
        .file_name()
        .ok_or_else(|| Error::Invalid(format!("{}: not a file path", out.display())))?;
    let tmp = dir.join(format!(
        ".{}.tmp{}.png",
        name.to_string_lossy(),
        std::process::id()
    ));
    if let Err(e) = draw(&tmp) {
        let _ = std::fs::remove_file(&tmp);
        return Err(Error::Invalid(format!(
            "{}: drawing failed: {e}",
            out.display()
        )));
    }
    std::fs::rename(&tmp, out).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        Error::io(out, e)
    })
}

/// For a task without a grid (many dimensions): its evaluation states in the plane of two features,
/// coloured by the true constraint (left) and by the learned zeta (right), the true boundary drawn
/// where a primitive bounds the horizontal feature. `x`, `y`: feature indices.
pub fn states_chart(
    task: &Task,
    states: &[f64],
    zeta: &[f64],
    (x, y): (usize, usize),
    title: &str,
    out: &Path,
) -> Result<()> {
    register_font();
    let d = task.feature_dim();
    if states.is_empty() || states.len() != zeta.len() * d || x >= d || y >= d {
        return Err(Error::Invalid(format!(
            "{}: nothing to draw (no evaluation states)",
            out.display()
        )));
    }
    let rows: Vec<&[f64]> = states.chunks(d).collect();
    let span = |k: usize| {
        let (lo, hi) = rows
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), r| {
                (a.min(r[k]), b.max(r[k]))
            });
        let pad = 0.05 * (hi - lo).max(1e-9);
        (lo - pad)..(hi + pad)
    };
    let (xr, yr) = (span(x), span(y));
    // The true boundary along the horizontal feature, where a primitive bounds it.
    let walls: Vec<f64> = task
        .true_constraint
        .iter()
        .flat_map(|s| {
            let (lo, hi) = s.aabb(d);
            [lo[x], hi[x]]
        })
        .filter(|v| v.is_finite())
        .collect();
    let names = task.feature_names();
    write_png(out, |tmp| {
        let root = BitMapBackend::new(tmp, (1400, 640)).into_drawing_area();
        root.fill(&WHITE)?;
        let (top, body) = root.split_vertically(36);
        top.titled(title, ("sans-serif", 20))?;
        let panels = body.split_evenly((1, 2));
        for (i, area) in panels.iter().enumerate() {
            let mut chart = ChartBuilder::on(area)
                .caption(
                    if i == 0 {
                        "true constraint (red infeasible)"
                    } else {
                        "learned zeta (blue feasible, red infeasible)"
                    },
                    ("sans-serif", 16),
                )
                .margin(12)
                .x_label_area_size(40)
                .y_label_area_size(56)
                .build_cartesian_2d(xr.clone(), yr.clone())?;
            chart
                .configure_mesh()
                .x_desc(names[x].as_str())
                .y_desc(names[y].as_str())
                .label_style(("sans-serif", 13))
                .draw()?;
            chart.draw_series(rows.iter().zip(zeta).map(|(r, z)| {
                let c = if i == 0 {
                    zeta_color(if task.truly_infeasible(r) { 0.0 } else { 1.0 })
                } else {
                    zeta_color(*z)
                };
                Circle::new((r[x], r[y]), 2, c.filled())
            }))?;
            for w in &walls {
                chart.draw_series(LineSeries::new(
                    [(*w, yr.start), (*w, yr.end)],
                    BLACK.stroke_width(2),
                ))?;
            }
        }
        root.present()?;
        Ok(())
    })
}

/// One point of a sweep: the parameter and the (mean, std) of the quantity.
pub type SweepPoint = (f64, (f64, f64));

/// Panels side by side, each a quantity against one parameter: mean with a +-std band (a sweep such
/// as the paper's Fig. 4). `panels`: (y label, [(x, (mean, std))]).
pub fn sweep_chart(
    out: &Path,
    title: &str,
    x_label: &str,
    panels: &[(&str, &[SweepPoint])],
) -> Result<()> {
    register_font();
    if panels.iter().any(|(_, pts)| pts.is_empty()) {
        return Err(Error::Invalid(format!(
            "{}: nothing to draw (a panel has no points)",
            out.display()
        )));
    }
    write_png(out, |tmp| {
        let root = BitMapBackend::new(tmp, (560 * panels.len() as u32, 480)).into_drawing_area();
        root.fill(&WHITE)?;
        let (top, body) = root.split_vertically(36);
        top.titled(title, ("sans-serif", 18))?;
        for (area, (label, pts)) in body.split_evenly((1, panels.len())).iter().zip(panels) {
            let (x0, x1) = pts
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), p| {
                    (a.min(p.0), b.max(p.0))
                });
            let y1 = pts.iter().map(|p| p.1.0 + p.1.1).fold(0.0, f64::max);
            let pad = 0.05 * (x1 - x0).max(1e-9);
            let mut chart = ChartBuilder::on(area)
                .margin(14)
                .x_label_area_size(40)
                .y_label_area_size(56)
                .build_cartesian_2d(x0 - pad..x1 + pad, 0.0..(1.1 * y1).max(1e-6))?;
            chart
                .configure_mesh()
                .x_desc(x_label)
                .y_desc(*label)
                .label_style(("sans-serif", 13))
                .draw()?;
            let band: Vec<(f64, f64)> = pts
                .iter()
                .map(|p| (p.0, p.1.0 + p.1.1))
                .chain(pts.iter().rev().map(|p| (p.0, (p.1.0 - p.1.1).max(0.0))))
                .collect();
            chart.draw_series(std::iter::once(Polygon::new(band, BLUE.mix(0.2).filled())))?;
            chart.draw_series(LineSeries::new(
                pts.iter().map(|p| (p.0, p.1.0)),
                BLUE.stroke_width(2),
            ))?;
            chart.draw_series(
                pts.iter()
                    .map(|p| Circle::new((p.0, p.1.0), 4, BLUE.filled())),
            )?;
        }
        root.present()?;
        Ok(())
    })
}

#[cfg(test)]
mod sweep_tests {
    use super::*;

    #[test]
    fn states_chart_writes_a_png_and_refuses_no_states() {
        let task = Task::load("point_ellipse_2d").unwrap();
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("states.png");
        let states = [0.1, 0.2, 0.7, 0.55, 1.2, 0.3];
        states_chart(&task, &states, &[0.9, 0.1, 0.8], (0, 1), "t", &p).unwrap();
        assert_eq!(&std::fs::read(&p).unwrap()[1..4], b"PNG");
        assert!(states_chart(&task, &[], &[], (0, 1), "t", &p).is_err());
        assert!(states_chart(&task, &states, &[0.9], (0, 1), "t", &p).is_err());
    }

    #[test]
    fn sweep_chart_writes_a_png_and_refuses_empty_panels() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("sweep.png");
        let iou = [(0.08, (0.7, 0.05)), (0.12, (0.8, 0.02)), (0.16, (0.6, 0.1))];
        let unsafe_rate = [(0.08, (0.5, 0.2)), (0.12, (1.0, 0.5)), (0.16, (4.0, 1.0))];
        sweep_chart(&p, "t", "d_r", &[("IoU", &iou), ("unsafe", &unsafe_rate)]).unwrap();
        let bytes = std::fs::read(&p).unwrap();
        assert_eq!(&bytes[1..4], b"PNG");
        assert!(sweep_chart(&p, "t", "d_r", &[("IoU", &[])]).is_err());
    }
}
