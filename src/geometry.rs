//! Euclidean norm and distance on slices: the small vector arithmetic that the planner, the smoothing,
//! the modulation and the evaluation share (nalgebra's fixed-size types would need the dimension at
//! compile time; tasks choose it at run time).

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
