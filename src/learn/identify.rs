//! Step 1 of PUCL: identify reliable infeasible data R among the unlabeled (policy) states P by their
//! distance to the demonstrations D (eq. 1-3 of the paper).
use crate::error::{Error, Result};
use kiddo::{Chebyshev, ImmutableKdTree, Manhattan, SquaredEuclidean};
use serde::{Deserialize, Serialize};
use std::num::NonZero;

/// Distance of the kNN score.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    #[default]
    Euclidean,
    Manhattan,
    Chebyshev,
}

/// How R is selected from the scores.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Selection {
    /// R = {s in P : S_D(s) >= d_r} (eq. 2), in feature units.
    Threshold { d_r: f64 },
    /// D and P standardized together per dimension, then the top `percent` of P by score.
    Percentile { percent: f64 },
}

/// Settings of the identification step (give exactly one of `d_r` and `percentile`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IdentifyConfig {
    /// k of the k nearest demonstration points.
    pub k: usize,
    #[serde(default)]
    pub metric: Metric,
    /// Threshold on the kNN score, in feature units.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub d_r: Option<f64>,
    /// Instead of d_r: standardize and take this top percentage of the unlabeled states.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percentile: Option<f64>,
    /// Measure the kNN score with d_r after standardizing each dimension by the mean and standard
    /// deviation of D and P together (REFERENCE.md: the cheetah's heterogeneous 18-D states).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub standardize: bool,
    /// Eq. 3: from each unlabeled trajectory also add its state nearest to R.
    #[serde(default)]
    pub expansion: bool,
    /// An expanded state must score at least this fraction of d_r: a state practically on a
    /// demonstration is never labelled infeasible (with percentile selection: of the selection's cut).
    #[serde(default = "half")]
    pub expansion_min_score: f64,
}

fn half() -> f64 {
    0.5
}

impl IdentifyConfig {
    pub fn selection(&self) -> std::result::Result<Selection, String> {
        match (self.d_r, self.percentile) {
            (Some(d_r), None) if d_r.is_finite() && d_r > 0.0 => Ok(Selection::Threshold { d_r }),
            (Some(d_r), None) => Err(format!("identify.d_r must be > 0, got {d_r}")),
            (None, Some(p)) if p > 0.0 && p < 100.0 => Ok(Selection::Percentile { percent: p }),
            (None, Some(p)) => Err(format!("identify.percentile must be in (0, 100), got {p}")),
            _ => Err("identify needs exactly one of d_r and percentile".into()),
        }
    }

    pub fn validate(&self) -> std::result::Result<(), String> {
        if self.k == 0 {
            return Err("identify.k must be at least 1".into());
        }
        if !(self.expansion_min_score.is_finite()
            && (0.0..=1.0).contains(&self.expansion_min_score))
        {
            return Err("identify.expansion_min_score must be in [0, 1]".into());
        }
        self.selection().map(|_| ())
    }
}

/// Points as rows of a flat row-major buffer.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Points {
    pub dim: usize,
    pub data: Vec<f64>,
}

impl Points {
    pub fn new(dim: usize) -> Self {
        Points {
            dim,
            data: Vec::new(),
        }
    }
    pub fn len(&self) -> usize {
        self.data.len().checked_div(self.dim).unwrap_or(0)
    }
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
    pub fn row(&self, i: usize) -> &[f64] {
        &self.data[i * self.dim..(i + 1) * self.dim]
    }
    pub fn push(&mut self, p: &[f64]) {
        self.data.extend_from_slice(p);
    }
    pub fn extend(&mut self, other: &Points) {
        self.data.extend_from_slice(&other.data);
    }
    pub fn rows(&self) -> impl Iterator<Item = &[f64]> {
        self.data.chunks(self.dim.max(1))
    }
}

/// `f::<DIM>(args)` for a dimension a k-d tree is built for (const generic, up to the cheetah's
/// 18), else `beyond` (an exhaustive search).
macro_rules! by_tree_dim {
    ($dim:expr, $f:ident $args:tt, $beyond:expr) => {
        by_tree_dim!(@ $dim, $f $args, $beyond; 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18)
    };
    (@ $dim:expr, $f:ident $args:tt, $beyond:expr; $($k:literal)*) => {
        match $dim {
            $($k => $f::<$k> $args,)*
            _ => $beyond,
        }
    };
}

/// The kNN score S_D: mean distance to the k nearest reference points, for each query point.
pub fn knn_scores(
    reference: &Points,
    queries: &Points,
    k: usize,
    metric: Metric,
) -> Result<Vec<f64>> {
    if reference.is_empty() {
        return Err(Error::Invalid(
            "no reference points for the kNN score".into(),
        ));
    }
    if reference.dim != queries.dim {
        return Err(Error::Invalid(format!(
            "kNN dimension mismatch: {} vs {}",
            reference.dim, queries.dim
        )));
    }
    by_tree_dim!(
        reference.dim,
        scores_k(reference, queries, k, metric),
        Ok(scores_exhaustive(reference, queries, k, metric))
    )
}

impl Metric {
    /// The distance between two feature points.
    pub fn distance(self, a: &[f64], b: &[f64]) -> f64 {
        let diffs = a.iter().zip(b).map(|(x, y)| (x - y).abs());
        match self {
            Metric::Euclidean => diffs.map(|d| d * d).sum::<f64>().sqrt(),
            Metric::Manhattan => diffs.sum(),
            Metric::Chebyshev => diffs.fold(0.0, f64::max),
        }
    }
}

/// The kNN score by comparing every pair (any dimension).
fn scores_exhaustive(reference: &Points, queries: &Points, k: usize, metric: Metric) -> Vec<f64> {
    let k = k.min(reference.len()).max(1);
    let distance = |a: &[f64], b: &[f64]| metric.distance(a, b);
    queries
        .rows()
        .map(|q| {
            let mut nearest: Vec<f64> = Vec::with_capacity(k + 1);
            for r in reference.rows() {
                let d = distance(q, r);
                if nearest.len() < k || d < nearest[k - 1] {
                    let at = nearest.partition_point(|x| *x <= d);
                    nearest.insert(at, d);
                    nearest.truncate(k);
                }
            }
            nearest.iter().sum::<f64>() / nearest.len() as f64
        })
        .collect()
}

fn scores_k<const K: usize>(
    reference: &Points,
    queries: &Points,
    k: usize,
    metric: Metric,
) -> Result<Vec<f64>> {
    let to_array = |r: &[f64]| -> [f64; K] { r.try_into().expect("dimension checked") };
    let entries: Vec<[f64; K]> = reference.rows().map(to_array).collect();
    let tree: ImmutableKdTree<f64, K> = ImmutableKdTree::new_from_slice(&entries)
        .map_err(|e| Error::Invalid(format!("building the kNN tree: {e:?}")))?;
    let n = NonZero::new(k.min(entries.len())).expect("k >= 1 and reference non-empty");
    let scores = queries
        .rows()
        .map(|q| {
            let q = to_array(q);
            let (sum, count) = match metric {
                Metric::Euclidean => {
                    let r = tree
                        .query(&q)
                        .nearest_n::<SquaredEuclidean<f64>>(n)
                        .execute();
                    (r.iter().map(|i| i.distance.sqrt()).sum::<f64>(), r.len())
                }
                Metric::Manhattan => {
                    let r = tree.query(&q).nearest_n::<Manhattan<f64>>(n).execute();
                    (r.iter().map(|i| i.distance).sum::<f64>(), r.len())
                }
                Metric::Chebyshev => {
                    let r = tree.query(&q).nearest_n::<Chebyshev<f64>>(n).execute();
                    (r.iter().map(|i| i.distance).sum::<f64>(), r.len())
                }
            };
            sum / count as f64
        })
        .collect();
    Ok(scores)
}

/// The index of the nearest point of a fixed set (Euclidean), for many queries: a k-d tree up to 18
/// dimensions, built once; beyond, an exhaustive search.
pub struct NearestPoint {
    find: FindNearest,
}

impl NearestPoint {
    /// None for an empty set.
    pub fn new(points: &Points) -> Option<NearestPoint> {
        if points.is_empty() {
            return None;
        }
        let find = by_tree_dim!(points.dim, nearest_tree(points), None).unwrap_or_else(|| {
            let points = points.clone();
            Box::new(move |q: &[f64]| {
                let d2 = |p: &[f64]| q.iter().zip(p).map(|(a, b)| (a - b).powi(2)).sum::<f64>();
                (0..points.len())
                    .min_by(|&i, &j| d2(points.row(i)).total_cmp(&d2(points.row(j))))
                    .unwrap_or(0)
            })
        });
        Some(NearestPoint { find })
    }

    /// The index of the point nearest to `q` (a query of the set's dimension).
    pub fn nearest(&self, q: &[f64]) -> usize {
        (self.find)(q)
    }
}

type FindNearest = Box<dyn Fn(&[f64]) -> usize + Send + Sync>;

/// A k-d tree of a set of K-dimensional points (items: their indices).
fn tree_of<const K: usize>(points: &Points) -> Option<ImmutableKdTree<f64, K>> {
    let entries: Vec<[f64; K]> = points
        .rows()
        .map(|r| r.try_into().expect("rows of the set's dimension"))
        .collect();
    ImmutableKdTree::new_from_slice(&entries).ok()
}

/// A query of the set's dimension as a K-array.
fn query_array<const K: usize>(q: &[f64]) -> [f64; K] {
    let mut a = [0.0; K];
    a.iter_mut().zip(q).for_each(|(a, q)| *a = *q);
    a
}

fn nearest_tree<const K: usize>(points: &Points) -> Option<FindNearest> {
    let tree = tree_of::<K>(points)?;
    Some(Box::new(move |q: &[f64]| {
        tree.query(&query_array::<K>(q))
            .nearest_one::<SquaredEuclidean<f64>>()
            .execute()
            .item as usize
    }))
}

/// The indices of a fixed set's points within a radius (Euclidean) of a query, for many queries: a
/// k-d tree up to 18 dimensions, built once; beyond, an exhaustive search.
pub struct PointsWithin {
    find: FindWithin,
}

type FindWithin = Box<dyn Fn(&[f64], f64, &mut Vec<usize>) + Send + Sync>;

impl PointsWithin {
    pub fn new(points: &Points) -> PointsWithin {
        let find = by_tree_dim!(points.dim, within_tree(points), None).unwrap_or_else(|| {
            let points = points.clone();
            Box::new(move |q: &[f64], r: f64, out: &mut Vec<usize>| {
                let d2 = |p: &[f64]| q.iter().zip(p).map(|(a, b)| (a - b).powi(2)).sum::<f64>();
                out.extend((0..points.len()).filter(|&i| d2(points.row(i)) <= r * r));
            })
        });
        PointsWithin { find }
    }

    /// Replace `out` with the indices of the points within `radius` of `q` (a query of the set's
    /// dimension), in no particular order.
    pub fn within(&self, q: &[f64], radius: f64, out: &mut Vec<usize>) {
        out.clear();
        if radius >= 0.0 {
            (self.find)(q, radius, out);
        }
    }
}

fn within_tree<const K: usize>(points: &Points) -> Option<FindWithin> {
    let tree = tree_of::<K>(points)?;
    Some(Box::new(move |q: &[f64], r: f64, out: &mut Vec<usize>| {
        let found = tree
            .query(&query_array::<K>(q))
            .within::<SquaredEuclidean<f64>>(r * r)
            .unsorted()
            .execute();
        out.extend(found.iter().map(|n| n.item as usize));
    }))
}

/// Standardize each dimension of `a` and `b` with the mean and standard deviation of both together.
fn standardize(a: &Points, b: &Points) -> (Points, Points) {
    let d = a.dim;
    let n = (a.len() + b.len()) as f64;
    let mut mean = vec![0.0; d];
    for r in a.rows().chain(b.rows()) {
        for k in 0..d {
            mean[k] += r[k] / n;
        }
    }
    let mut var = vec![0.0; d];
    for r in a.rows().chain(b.rows()) {
        for k in 0..d {
            var[k] += (r[k] - mean[k]).powi(2) / n;
        }
    }
    let sd: Vec<f64> = var
        .iter()
        .map(|v| if *v > 0.0 { v.sqrt() } else { 1.0 })
        .collect();
    let map = |p: &Points| Points {
        dim: d,
        data: p
            .data
            .iter()
            .enumerate()
            .map(|(i, v)| (v - mean[i % d]) / sd[i % d])
            .collect(),
    };
    (map(a), map(b))
}

/// Reliable infeasible points among the unlabeled trajectories (each a set of feature points).
/// `memory`: the reliable infeasible points of earlier iterations; the expansion measures the distance
/// to R together with them (as if identification ran over all rollouts so far).
pub fn identify(
    demos: &Points,
    trajectories: &[Points],
    memory: &Points,
    cfg: &IdentifyConfig,
) -> Result<Points> {
    let mut unlabeled = Points::new(demos.dim);
    for t in trajectories {
        unlabeled.extend(t);
    }
    let mut reliable = Points::new(demos.dim);
    if unlabeled.is_empty() {
        return Ok(reliable);
    }
    let selection = cfg.selection().map_err(Error::Invalid)?;
    // Scores (in the space the selection works in) and the cut they are compared with.
    let (scores, cut) = match selection {
        Selection::Threshold { d_r } if cfg.standardize => {
            let (d, u) = standardize(demos, &unlabeled);
            (knn_scores(&d, &u, cfg.k, cfg.metric)?, d_r)
        }
        Selection::Threshold { d_r } => (knn_scores(demos, &unlabeled, cfg.k, cfg.metric)?, d_r),
        Selection::Percentile { percent } => {
            let (d, u) = standardize(demos, &unlabeled);
            let scores = knn_scores(&d, &u, cfg.k, cfg.metric)?;
            let mut sorted = scores.clone();
            sorted.sort_by(|a, b| b.total_cmp(a));
            let take = ((percent / 100.0) * scores.len() as f64).round().max(1.0) as usize;
            let cut = sorted[take.min(sorted.len()) - 1];
            (scores, cut)
        }
    };
    let selected: Vec<bool> = scores.iter().map(|s| *s >= cut).collect();
    for (p, keep) in unlabeled.rows().zip(&selected) {
        if *keep {
            reliable.push(p);
        }
    }
    let mut known = reliable.clone();
    known.extend(memory);
    if cfg.expansion && !known.is_empty() {
        // Eq. 3: per trajectory, the state nearest to R (likely between the learned and the true boundary).
        let mut extra = Points::new(demos.dim);
        let mut at = 0;
        for t in trajectories {
            let to_known = knn_scores(&known, t, cfg.k, cfg.metric)?;
            if let Some((i, _)) = to_known
                .iter()
                .enumerate()
                .filter(|(i, _)| {
                    !selected[at + i] && scores[at + i] >= cfg.expansion_min_score * cut
                })
                .min_by(|a, b| a.1.total_cmp(b.1))
            {
                extra.push(t.row(i));
            }
            at += t.len();
        }
        reliable.extend(&extra);
    }
    Ok(reliable)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn pts(dim: usize, v: &[f64]) -> Points {
        Points {
            dim,
            data: v.to_vec(),
        }
    }

    #[test]
    fn tree_and_exhaustive_knn_scores_agree() {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let mut random = |n: usize| {
            pts(
                18,
                &(0..n * 18).map(|_| rng.random::<f64>()).collect::<Vec<_>>(),
            )
        };
        let (d, q) = (random(200), random(50));
        for metric in [Metric::Euclidean, Metric::Manhattan, Metric::Chebyshev] {
            let tree = knn_scores(&d, &q, 3, metric).unwrap();
            let all = scores_exhaustive(&d, &q, 3, metric);
            for (a, b) in tree.iter().zip(&all) {
                assert!((a - b).abs() < 1e-12, "{metric:?}: {a} vs {b}");
            }
        }
    }

    #[test]
    fn the_nearest_point_is_found_by_the_tree_and_beyond_its_dimensions_alike() {
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        for dim in [2, 3, 20] {
            let mut random = |n: usize| {
                pts(
                    dim,
                    &(0..n * dim)
                        .map(|_| rng.random::<f64>())
                        .collect::<Vec<_>>(),
                )
            };
            let (set, queries) = (random(300), random(40));
            let nearest = NearestPoint::new(&set).unwrap();
            for q in queries.rows() {
                let d2 = |i: usize| -> f64 {
                    q.iter().zip(set.row(i)).map(|(a, b)| (a - b).powi(2)).sum()
                };
                let best = (0..set.len())
                    .min_by(|&i, &j| d2(i).total_cmp(&d2(j)))
                    .unwrap();
                assert_eq!(d2(nearest.nearest(q)), d2(best), "dimension {dim}");
            }
        }
        assert!(NearestPoint::new(&Points::new(3)).is_none());
    }

    #[test]
    fn knn_scores_for_each_metric_by_hand() {
        let d = pts(2, &[0.0, 0.0, 1.0, 0.0]);
        let q = pts(2, &[0.0, 2.0, 3.0, 4.0]);
        let e = knn_scores(&d, &q, 1, Metric::Euclidean).unwrap();
        assert_eq!(e, vec![2.0, 2f64.hypot(4.0)]);
        let m = knn_scores(&d, &q, 2, Metric::Manhattan).unwrap();
        assert_eq!(m, vec![(2.0 + 3.0) / 2.0, (6.0 + 7.0) / 2.0]);
        let c = knn_scores(&d, &q, 1, Metric::Chebyshev).unwrap();
        assert_eq!(c, vec![2.0, 4.0]);
    }

    #[test]
    fn threshold_selection_keeps_far_points_and_expansion_adds_one_per_trajectory() {
        let d = pts(1, &[0.0, 0.1, 0.2]);
        let t1 = pts(1, &[0.25, 0.5, 0.9, 1.0]);
        let t2 = pts(1, &[0.3, 0.35]);
        let cfg = IdentifyConfig {
            k: 1,
            metric: Metric::Euclidean,
            d_r: Some(0.6),
            percentile: None,
            standardize: false,
            expansion: false,
            expansion_min_score: 0.0,
        };
        let none = Points::new(1);
        let r = identify(&d, &[t1.clone(), t2.clone()], &none, &cfg).unwrap();
        assert_eq!(r.data, vec![0.9, 1.0]);
        let cfg = IdentifyConfig {
            expansion: true,
            ..cfg
        };
        let r = identify(&d, &[t1.clone(), t2.clone()], &none, &cfg).unwrap();
        // t1's state nearest to R (not already in R) is 0.5; t2's is 0.35.
        assert_eq!(r.data, vec![0.9, 1.0, 0.5, 0.35]);
        // With a memory point at 0.31, the nearest states become 0.25 (t1) and 0.3 (t2).
        let r = identify(&d, &[t1, t2], &pts(1, &[0.31]), &cfg).unwrap();
        assert_eq!(r.data, vec![0.9, 1.0, 0.25, 0.3]);
    }

    #[test]
    fn percentile_selection_takes_the_top_fraction_after_standardization() {
        let d = pts(2, &[0.0, 0.0, 0.0, 100.0]);
        let u = pts(2, &[0.1, 50.0, 5.0, 50.0, 0.2, 50.0, 0.3, 50.0]);
        let cfg = IdentifyConfig {
            k: 1,
            metric: Metric::Euclidean,
            d_r: None,
            percentile: Some(25.0),
            standardize: false,
            expansion: false,
            expansion_min_score: 0.0,
        };
        let r = identify(&d, &[u], &Points::new(2), &cfg).unwrap();
        assert_eq!(r.data, vec![5.0, 50.0]);
    }

    #[test]
    fn standardized_threshold_measures_d_r_in_standard_deviations_per_dimension() {
        // Dimension 1 spreads 100x wider than dimension 0: raw distances are dominated by it.
        let d = pts(2, &[0.0, 0.0, 0.1, 100.0]);
        let u = pts(2, &[0.3, 0.0, 0.05, 130.0]);
        let cfg = IdentifyConfig {
            k: 1,
            metric: Metric::Euclidean,
            d_r: Some(1.5),
            percentile: None,
            standardize: true,
            expansion: false,
            expansion_min_score: 0.0,
        };
        let r = identify(&d, std::slice::from_ref(&u), &Points::new(2), &cfg).unwrap();
        // Standardized, (0.3, 0) is 2.4 standard deviations from (0, 0); (0.05, 130) only 0.7 from
        // (0.1, 100).
        assert_eq!(r.data, vec![0.3, 0.0]);
        let raw = IdentifyConfig {
            standardize: false,
            d_r: Some(1.0),
            ..cfg
        };
        let r = identify(&d, &[u], &Points::new(2), &raw).unwrap();
        assert_eq!(r.data, vec![0.05, 130.0]);
    }

    #[test]
    fn invalid_settings_are_named() {
        let bad = IdentifyConfig {
            k: 0,
            metric: Metric::Euclidean,
            d_r: Some(0.1),
            percentile: None,
            standardize: false,
            expansion: false,
            expansion_min_score: 0.0,
        };
        assert!(bad.validate().unwrap_err().contains("identify.k"));
        let bad = IdentifyConfig {
            k: 1,
            d_r: Some(0.0),
            ..bad
        };
        assert!(bad.validate().unwrap_err().contains("d_r"));
        let bad = IdentifyConfig {
            d_r: None,
            percentile: Some(100.0),
            ..bad
        };
        assert!(bad.validate().unwrap_err().contains("percentile"));
        let bad = IdentifyConfig {
            d_r: Some(0.1),
            percentile: Some(10.0),
            ..bad
        };
        assert!(bad.validate().unwrap_err().contains("exactly one"));
    }
}
