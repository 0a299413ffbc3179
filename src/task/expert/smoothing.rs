//! Making a planned path taut: greedy shortcutting and string pulling, both keeping every segment
//! clear of the margin-inflated constraint, so the expert's path is near-shortest.
use super::planner::Planner;

impl Planner {
    /// String pulling: subdivide, then repeatedly move each interior vertex towards the straight line
    /// between its neighbours as far as the path stays clear, and shortcut again. Removes the grid's
    /// kinks so the path is taut against the margin.
    pub(super) fn tighten(&self, pts: Vec<Vec<f64>>) -> Vec<Vec<f64>> {
        let dist = crate::geometry::distance;
        let mut pts = pts;
        for _round in 0..3 {
            // Subdivide long segments so the path can bend smoothly around curved obstacles.
            let mut fine = vec![pts[0].clone()];
            for w in pts.windows(2) {
                let k = (dist(&w[0], &w[1]) / (4.0 * self.res)).ceil().max(1.0) as usize;
                for j in 1..=k {
                    let t = j as f64 / k as f64;
                    fine.push(
                        w[0].iter()
                            .zip(&w[1])
                            .map(|(a, b)| a + t * (b - a))
                            .collect(),
                    );
                }
            }
            pts = fine;
            for _ in 0..200 {
                let mut moved = 0.0f64;
                for i in 1..pts.len() - 1 {
                    let (a, v, b) = (&pts[i - 1], &pts[i], &pts[i + 1]);
                    let ab: Vec<f64> = a.iter().zip(b).map(|(p, q)| q - p).collect();
                    let l2: f64 = ab.iter().map(|x| x * x).sum();
                    let t = if l2 > 0.0 {
                        (v.iter()
                            .zip(a)
                            .zip(&ab)
                            .map(|((vi, ai), d)| (vi - ai) * d)
                            .sum::<f64>()
                            / l2)
                            .clamp(0.0, 1.0)
                    } else {
                        0.0
                    };
                    let target: Vec<f64> = a.iter().zip(&ab).map(|(ai, d)| ai + t * d).collect();
                    // Largest step towards the target that keeps both adjacent segments clear.
                    let candidate = |s: f64| -> Vec<f64> {
                        v.iter()
                            .zip(&target)
                            .map(|(vi, ti)| vi + s * (ti - vi))
                            .collect()
                    };
                    let clear = |p: &[f64]| {
                        self.point_clear(p) && self.segment_clear(a, p) && self.segment_clear(p, b)
                    };
                    let (mut ok, mut bad) = (0.0, 1.0);
                    if clear(&candidate(1.0)) {
                        ok = 1.0;
                    } else {
                        for _ in 0..12 {
                            let mid = 0.5 * (ok + bad);
                            if clear(&candidate(mid)) {
                                ok = mid;
                            } else {
                                bad = mid;
                            }
                        }
                    }
                    let mut p = candidate(ok);
                    if ok < 1.0 {
                        // Blocked: relax each axis on its own (e.g. height while sliding along a wall).
                        for k in 0..p.len() {
                            let mut q = p.clone();
                            q[k] = target[k];
                            if clear(&q) {
                                p = q;
                            }
                        }
                    }
                    moved = moved.max(dist(&p, v));
                    pts[i] = p;
                }
                if moved < 1e-3 * self.res {
                    break;
                }
            }
            pts = self.shortcut(pts);
        }
        pts
    }

    /// Greedy shortcutting: from each kept point jump to the farthest point a clear segment reaches.
    pub(super) fn shortcut(&self, pts: Vec<Vec<f64>>) -> Vec<Vec<f64>> {
        let mut out = vec![pts[0].clone()];
        let mut i = 0;
        while i < pts.len() - 1 {
            let mut j = pts.len() - 1;
            while j > i + 1 && !self.segment_clear(&pts[i], &pts[j]) {
                j -= 1;
            }
            out.push(pts[j].clone());
            i = j;
        }
        out
    }
}
