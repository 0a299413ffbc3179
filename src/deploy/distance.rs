//! How far a state is from the learned boundary ("how far, which way?", asked of the constraint
//! server and `pucl query`): points sampled on the boundary once per model, the nearest of them
//! found by a k-d tree. zeta's own slope cannot say it: far from the obstacle its gradient points
//! wherever the network extrapolates, and the first-order estimate reads long where the logit
//! flattens outwards.
use crate::geometry::distance;
use crate::learn::identify::{NearestPoint, Points};
use crate::learn::network::{Mlp, Scratch};
use crate::policy::modulation::Feasibility;

/// Grid points at which zeta is evaluated to find the boundary (about 0.1 s, once per model).
const GRID_POINTS: f64 = 131_072.0;
/// Bisections that put each sample on the boundary between two grid neighbours (1/256 of a cell).
const BISECTIONS: usize = 8;
/// The grid is for the constraint inputs of arms and bases: positions and commands.
const MAX_DIM: usize = 3;

/// Points on the learned boundary (zeta = threshold) over a box: wherever two neighbours of a grid
/// of nearly cubic cells differ in feasibility, the point between them where zeta crosses.
pub struct BoundarySamples {
    points: Points,
    nearest: NearestPoint,
    /// The grid's spacing: samples lie about this far apart on the boundary.
    pub spacing: f64,
}

impl BoundarySamples {
    /// None beyond three dimensions, for a box of no volume, or where the box holds no boundary.
    pub fn sample(net: &Mlp, threshold: f64, lo: &[f64], hi: &[f64]) -> Option<BoundarySamples> {
        let d = lo.len();
        let extent: Vec<f64> = lo.iter().zip(hi).map(|(a, b)| b - a).collect();
        if d == 0 || d > MAX_DIM || extent.iter().any(|e| !(e.is_finite() && *e > 0.0)) {
            return None;
        }
        let counts = crate::geometry::cubic_cell_counts(&extent, GRID_POINTS);
        let step: Vec<f64> = extent
            .iter()
            .zip(&counts)
            .map(|(e, n)| e / (n - 1) as f64)
            .collect();
        let at = |mut i: usize, x: &mut [f64]| {
            for k in 0..d {
                x[k] = lo[k] + (i % counts[k]) as f64 * step[k];
                i /= counts[k];
            }
        };
        let mut scratch = Scratch::default();
        let (mut a, mut b, mut mid) = (vec![0.0; d], vec![0.0; d], vec![0.0; d]);
        let total: usize = counts.iter().product();
        let feasible: Vec<bool> = (0..total)
            .map(|i| {
                at(i, &mut a);
                net.zeta(&a, &mut scratch) >= threshold
            })
            .collect();
        let mut points = Points::new(d);
        let mut stride = 1;
        for &count in &counts {
            for i in 0..total {
                let j = i + stride;
                if (i / stride) % count + 1 == count || feasible[i] == feasible[j] {
                    continue;
                }
                // a feasible, b infeasible: halve the segment keeping that so.
                at(i, &mut a);
                at(j, &mut b);
                if !feasible[i] {
                    std::mem::swap(&mut a, &mut b);
                }
                for _ in 0..BISECTIONS {
                    mid.iter_mut()
                        .zip(a.iter().zip(&b))
                        .for_each(|(m, (p, q))| *m = 0.5 * (p + q));
                    if net.zeta(&mid, &mut scratch) >= threshold {
                        a.copy_from_slice(&mid);
                    } else {
                        b.copy_from_slice(&mid);
                    }
                }
                mid.iter_mut()
                    .zip(a.iter().zip(&b))
                    .for_each(|(m, (p, q))| *m = 0.5 * (p + q));
                points.push(&mid);
            }
            stride *= count;
        }
        let nearest = NearestPoint::new(&points)?;
        Some(BoundarySamples {
            points,
            nearest,
            spacing: step.iter().copied().fold(0.0, f64::max),
        })
    }

    /// The distance from `x` to the learned boundary within the box: from the nearest sample, the
    /// nearest boundary point near it ([`nearest_on_boundary`]); where that search does not settle,
    /// the sample's, long by at most about half the spacing, short by at most 1/256 of it.
    /// `level`: the boundary's logit.
    pub fn distance<F: Feasibility + ?Sized>(
        &self,
        net: &F,
        level: f64,
        x: &[f64],
        scratch: &mut Scratch,
    ) -> f64 {
        let sample = self.points.row(self.nearest.nearest(x));
        let sampled = distance(x, sample);
        // The sample lies up to 1/256 of the spacing off the boundary; the refined point on it.
        match nearest_on_boundary(net, level, x, sample, self.spacing, scratch) {
            Some(q) if distance(x, &q) <= sampled + self.spacing / 256.0 => distance(x, &q),
            _ => sampled,
        }
    }

    pub fn len(&self) -> usize {
        self.points.len()
    }

    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }
}

/// The point of the learned boundary nearest to `x` near `start` (a point on it): a few rounds of
/// moving to the foot of x on the boundary's tangent plane (at most `reach` per round, so that the
/// search stays where it started) and back onto the boundary along its normal (Newton on the logit,
/// exact within one linear piece of the network). None unless it ends on the boundary.
fn nearest_on_boundary<F: Feasibility + ?Sized>(
    net: &F,
    level: f64,
    x: &[f64],
    start: &[f64],
    reach: f64,
    scratch: &mut Scratch,
) -> Option<Vec<f64>> {
    let mut q = start.to_vec();
    let mut g = vec![0.0; q.len()];
    // Put q on the boundary along the gradient: the signed offset (logit over |gradient|).
    let mut onto = |q: &mut Vec<f64>, g: &mut Vec<f64>| -> Option<f64> {
        let mut off = f64::INFINITY;
        for _ in 0..3 {
            let l = net.logit_grad(q, g, scratch) - level;
            let n2 = g.iter().map(|v| v * v).sum::<f64>();
            if n2.is_nan() || n2 <= 0.0 {
                return None;
            }
            off = l / n2.sqrt();
            q.iter_mut()
                .zip(g.iter())
                .for_each(|(qi, gi)| *qi -= l * gi / n2);
        }
        Some(off)
    };
    for _ in 0..4 {
        onto(&mut q, &mut g)?;
        let n = crate::geometry::norm(&g);
        // x - q without its normal part: the way to x's foot on the tangent plane.
        let along: f64 = x
            .iter()
            .zip(&q)
            .zip(&g)
            .map(|((a, b), c)| (a - b) * c)
            .sum::<f64>()
            / n;
        let mut t: Vec<f64> = x
            .iter()
            .zip(&q)
            .zip(&g)
            .map(|((a, b), c)| a - b - along * c / n)
            .collect();
        let len = crate::geometry::norm(&t);
        if len > reach {
            t.iter_mut().for_each(|v| *v *= reach / len);
        }
        q.iter_mut().zip(&t).for_each(|(qi, ti)| *qi += ti);
    }
    let off = onto(&mut q, &mut g)?;
    (off.abs() <= 1e-6 * reach).then_some(q)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::learn::network::Mlp;

    /// A network whose boundary is the plane x0 + x1 = 1 (zeta 0.5 there): one hidden unit.
    fn plane() -> Mlp {
        Mlp {
            sizes: vec![2, 1, 1],
            input_offset: vec![0.0, 0.0],
            input_scale: vec![1.0, 1.0],
            // hidden: x0 + x1 - 1 (leaky below 0); out: 10 h.
            params: vec![1.0, 1.0, -1.0, 10.0, 0.0],
        }
    }

    #[test]
    fn the_samples_give_the_distance_to_the_learned_boundary_to_within_their_spacing() {
        let net = plane();
        let s = BoundarySamples::sample(&net, 0.5, &[0.0, 0.0], &[2.0, 2.0]).unwrap();
        assert!(
            s.spacing < 0.01 && s.len() > 100,
            "{} {}",
            s.spacing,
            s.len()
        );
        for x in [
            [0.0f64, 0.0],
            [2.0, 2.0],
            [0.3, 0.9],
            [1.2, 0.8],
            [5.0, 5.0],
        ] {
            let exact = (x[0] + x[1] - 1.0).abs() / 2f64.sqrt();
            let d = s.distance(&net, 0.0, &x, &mut Scratch::default());
            assert!((d - exact).abs() < 1e-9, "{x:?}: {d} vs {exact}");
        }
        // No boundary in the box, no samples; no grid beyond three dimensions.
        assert!(BoundarySamples::sample(&plane(), 0.5, &[3.0, 3.0], &[4.0, 4.0]).is_none());
        assert!(BoundarySamples::sample(&plane(), 0.5, &[0.0; 4], &[1.0; 4]).is_none());
        assert!(BoundarySamples::sample(&plane(), 0.5, &[0.0, 0.0], &[0.0, 1.0]).is_none());
    }
}
