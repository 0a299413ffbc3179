//! Euclidean norm and distance on slices, and the cell counts of nearly cubic grids: the small
//! arithmetic that the planner, the smoothing, the modulation, the evaluation and the grids share
//! (nalgebra's fixed-size types would need the dimension at compile time; tasks choose it at run
//! time).

/// The Euclidean norm of `v`.
#[inline]
pub fn norm(v: &[f64]) -> f64 {
    v.iter().map(|x| x * x).sum::<f64>().sqrt()
}

/// The Euclidean distance between `a` and `b` (over their common length).
#[inline]
pub fn distance(a: &[f64], b: &[f64]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(p, q)| (p - q) * (p - q))
        .sum::<f64>()
        .sqrt()
}

/// Cells per axis of a grid over a box of these `extent`s whose cells are nearly cubic and about
/// `cells` in number: the edge that divides the box's volume into that many, at least 2 per axis.
pub fn cubic_cell_counts(extent: &[f64], cells: f64) -> Vec<usize> {
    let volume: f64 = extent.iter().product();
    let edge = (volume / cells).powf(1.0 / extent.len() as f64);
    extent
        .iter()
        .map(|e| ((e / edge).round() as usize).max(2))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn norm_and_distance_by_hand() {
        assert_eq!(norm(&[3.0, 4.0]), 5.0);
        assert_eq!(norm(&[]), 0.0);
        assert_eq!(distance(&[1.0, 2.0, 3.0], &[1.0, 5.0, 7.0]), 5.0);
        assert_eq!(distance(&[0.5], &[0.5]), 0.0);
    }
}
