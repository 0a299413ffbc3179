//! Where the demonstrations turn (the `bend_prior`, PUCL on position constraints). An expert's path is
//! straight where nothing constrains it and turns only where a constraint makes it, with the
//! constraint on the inside of the turn. A proposal that beats its demonstration runs straight through
//! what the demonstration went around, but also through the open space before and behind it, between
//! the corridors of demonstrations that went round on either side: every state there is far from the
//! demonstrations too. With the prior, a proposal's state can be reliable infeasible only where it
//! faces a turn of the demonstration the proposal beat: the nearest point of that demonstration is
//! bent, and the state lies on the inside of the bend.
use crate::learn::identify::{NearestPoint, Points};

/// A point is bent where the path turns by at least this angle (radians; 10 degrees: well above the
/// wiggle of a tracked straight line) between the points this far before and after it along the path
/// ([`WINDOW_DR`]).
pub const BEND_ANGLE: f64 = 10.0 * std::f64::consts::PI / 180.0;

/// The path length before and after a point over which its turn is measured, in d_r: long enough to
/// see a turn that the constraint spreads over the demonstration's clearance, short enough that a
/// turn does not reach the straight stretches around it. Chosen on suite seed 100 (1, 2, 4 and 8
/// tried; docs/RESULTS.md).
pub const WINDOW_DR: f64 = 2.0;

/// Each demonstration's points, each with the direction from it to the inside of its turn (zero where
/// the demonstration runs straight), and a search for the nearest of them (none for an empty one).
pub struct Bends {
    demos: Vec<(Points, Vec<f64>, Option<NearestPoint>)>,
}

impl Bends {
    /// `demos`: each demonstration's feature points in order; `window`: the path length before and
    /// after a point over which its turn is measured.
    pub fn new(demos: &[Points], window: f64) -> Bends {
        let demos = demos
            .iter()
            .map(|d| (d.clone(), turns(d, window), NearestPoint::new(d)))
            .collect();
        Bends { demos }
    }

    /// The states of a proposal that beat demonstration `demo` which face one of its turns: the
    /// nearest point of that demonstration is bent and the state lies on the inside of the turn.
    pub fn facing_a_turn(&self, demo: usize, states: &Points) -> Points {
        let mut out = Points::new(states.dim);
        let Some((points, inside, Some(nearest))) = self.demos.get(demo) else {
            return out;
        };
        let d = points.dim;
        if states.dim != d {
            return out;
        }
        for x in states.rows() {
            let k = nearest.nearest(x);
            let (p, n) = (points.row(k), &inside[k * d..(k + 1) * d]);
            let towards: f64 = x.iter().zip(p).zip(n).map(|((x, p), n)| (x - p) * n).sum();
            if towards > 0.0 {
                out.push(x);
            }
        }
        out
    }

    /// The fraction of demonstrated points that are bent.
    pub fn bent_fraction(&self) -> f64 {
        let (mut bent, mut all) = (0, 0);
        for (points, inside, _) in &self.demos {
            all += points.len();
            bent += inside
                .chunks(points.dim.max(1))
                .filter(|n| n.iter().any(|v| *v != 0.0))
                .count();
        }
        bent as f64 / all.max(1) as f64
    }
}

/// For every point of one demonstration, the direction from it to the midpoint of the chord between
/// the points `window` before and after it, where the path turns by at least [`BEND_ANGLE`] there;
/// else zero. Row-major, like the points.
fn turns(demo: &Points, window: f64) -> Vec<f64> {
    let (n, dim) = (demo.len(), demo.dim);
    let mut s = vec![0.0; n];
    for i in 1..n {
        s[i] = s[i - 1] + dist(demo.row(i - 1), demo.row(i));
    }
    let mut inside = Vec::with_capacity(n * dim);
    // a: the last point at least `window` before k (or the first); b: the first at least `window`
    // after it (or the last). Both only move forward with k.
    let (mut a, mut b) = (0, 0);
    for k in 0..n {
        while a + 1 < k && s[k] - s[a + 1] >= window {
            a += 1;
        }
        b = b.max(k);
        while b + 1 < n && s[b] - s[k] < window {
            b += 1;
        }
        let (p, pa, pb) = (demo.row(k), demo.row(a), demo.row(b));
        let u: Vec<f64> = p.iter().zip(pa).map(|(x, y)| x - y).collect();
        let v: Vec<f64> = pb.iter().zip(p).map(|(x, y)| x - y).collect();
        let (nu, nv) = (norm(&u), norm(&v));
        let bent =
            nu > 0.0 && nv > 0.0 && (dot(&u, &v) / (nu * nv)).clamp(-1.0, 1.0).acos() >= BEND_ANGLE;
        for j in 0..dim {
            inside.push(if bent {
                0.5 * (pa[j] + pb[j]) - p[j]
            } else {
                0.0
            });
        }
    }
    inside
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn norm(a: &[f64]) -> f64 {
    dot(a, a).sqrt()
}

fn dist(a: &[f64], b: &[f64]) -> f64 {
    norm(&a.iter().zip(b).map(|(x, y)| x - y).collect::<Vec<_>>())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A planner's path from (0, 0) to (2, 0) around an obstacle under (1, 0.45): straight to
    /// (0.7, 0.3), round the top from (0.85, 0.45) to (1.15, 0.45), straight down to the goal from
    /// (1.3, 0.3); points every 0.01.
    fn detour() -> Points {
        let corners = [
            [0.0, 0.0],
            [0.7, 0.3],
            [0.85, 0.45],
            [1.15, 0.45],
            [1.3, 0.3],
            [2.0, 0.0],
        ];
        let mut p = Points::new(2);
        for w in corners.windows(2) {
            let n = (dist(&w[0], &w[1]) / 0.01).ceil() as usize;
            for i in 0..n {
                let t = i as f64 / n as f64;
                p.push(&[
                    w[0][0] + t * (w[1][0] - w[0][0]),
                    w[0][1] + t * (w[1][1] - w[0][1]),
                ]);
            }
        }
        p.push(&[2.0, 0.0]);
        p
    }

    fn states(xs: &[[f64; 2]]) -> Points {
        let mut p = Points::new(2);
        xs.iter().for_each(|x| p.push(x));
        p
    }

    #[test]
    fn only_states_on_the_inside_of_a_turn_of_the_beaten_demonstration_are_kept() {
        let b = Bends::new(&[detour()], 0.2);
        // Under the top of the detour (where the obstacle is): kept. Beside its straight stretches
        // (the open space before and behind the obstacle), and outside the turn: left out.
        let kept = b.facing_a_turn(
            0,
            &states(&[[1.0, 0.3], [0.9, 0.35], [0.3, 0.05], [1.7, 0.1], [1.0, 0.6]]),
        );
        assert_eq!(kept.data, vec![1.0, 0.3, 0.9, 0.35]);
        assert!(b.bent_fraction() > 0.0 && b.bent_fraction() < 0.5);
        // An unknown demonstration keeps nothing.
        assert!(b.facing_a_turn(3, &states(&[[1.0, 0.2]])).is_empty());
    }

    #[test]
    fn a_straight_demonstration_has_no_turn_to_face() {
        let mut line = Points::new(2);
        (0..=100).for_each(|i| line.push(&[0.02 * i as f64, 0.0]));
        let b = Bends::new(&[line], 0.1);
        assert_eq!(b.bent_fraction(), 0.0);
        assert!(
            b.facing_a_turn(0, &states(&[[1.0, 0.1], [1.0, -0.1]]))
                .is_empty()
        );
    }
}
