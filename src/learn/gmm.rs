//! A Gaussian mixture model of the demonstrations for the GPUCL baseline: full covariances fitted by
//! EM (k-means++ start, seeded), the component count chosen by BIC; states whose log-density falls
//! below a threshold are the reliable infeasible ones.
use nalgebra::{DMatrix, DVector};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// One fitted mixture.
#[derive(Debug, Clone)]
pub struct Gmm {
    pub weights: Vec<f64>,
    pub means: Vec<DVector<f64>>,
    /// Inverse covariances and log-normalizers of each component.
    precisions: Vec<DMatrix<f64>>,
    log_norms: Vec<f64>,
    pub log_likelihood: f64,
}

/// Added to covariance diagonals (scikit-learn's reg_covar), so a tight cluster stays invertible.
const REG: f64 = 1e-6;

fn logsumexp(v: &[f64]) -> f64 {
    let m = v.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    if !m.is_finite() {
        return m;
    }
    m + v.iter().map(|x| (x - m).exp()).sum::<f64>().ln()
}

impl Gmm {
    /// Fit `k` components to the rows of `x` (n points of dimension d, row-major).
    pub fn fit(x: &[f64], d: usize, k: usize, seed: u64, iterations: usize) -> Result<Gmm, String> {
        let n = x.len() / d;
        if n < k || k == 0 {
            return Err(format!(
                "a mixture of {k} components needs at least {k} points, got {n}"
            ));
        }
        let pt = |i: usize| DVector::from_column_slice(&x[i * d..(i + 1) * d]);
        // k-means++ seeding.
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut means = vec![pt(rng.random_range(0..n))];
        while means.len() < k {
            let d2: Vec<f64> = (0..n)
                .map(|i| {
                    means
                        .iter()
                        .map(|m| (pt(i) - m).norm_squared())
                        .fold(f64::INFINITY, f64::min)
                })
                .collect();
            let total: f64 = d2.iter().sum();
            let mut r = rng.random_range(0.0..total.max(f64::MIN_POSITIVE));
            let mut pick = n - 1;
            for (i, w) in d2.iter().enumerate() {
                if r < *w {
                    pick = i;
                    break;
                }
                r -= w;
            }
            means.push(pt(pick));
        }
        let mut overall = DMatrix::<f64>::zeros(d, d);
        let mean_all = (0..n).map(pt).fold(DVector::zeros(d), |a, p| a + p) / n as f64;
        for i in 0..n {
            let c = pt(i) - &mean_all;
            overall += &c * c.transpose();
        }
        overall /= n as f64;
        let mut g = Gmm {
            weights: vec![1.0 / k as f64; k],
            means,
            precisions: Vec::new(),
            log_norms: Vec::new(),
            log_likelihood: f64::NEG_INFINITY,
        };
        g.set_covariances(&vec![overall; k])?;
        let mut resp = vec![0.0; n * k];
        for _ in 0..iterations {
            // E step.
            let mut ll = 0.0;
            let mut lp = vec![0.0; k];
            for i in 0..n {
                let p = pt(i);
                for (j, l) in lp.iter_mut().enumerate() {
                    *l = g.weights[j].ln() + g.component_log_density(j, &p);
                }
                let total = logsumexp(&lp);
                ll += total;
                for j in 0..k {
                    resp[i * k + j] = (lp[j] - total).exp();
                }
            }
            // M step.
            let mut covs = Vec::with_capacity(k);
            for j in 0..k {
                let nk: f64 = (0..n).map(|i| resp[i * k + j]).sum::<f64>() + 10.0 * f64::EPSILON;
                g.weights[j] = nk / n as f64;
                let m = (0..n).fold(DVector::zeros(d), |a, i| a + pt(i) * resp[i * k + j]) / nk;
                let mut c = DMatrix::<f64>::zeros(d, d);
                for i in 0..n {
                    let v = pt(i) - &m;
                    c += (&v * v.transpose()) * resp[i * k + j];
                }
                g.means[j] = m;
                covs.push(c / nk);
            }
            g.set_covariances(&covs)?;
            let done = (ll - g.log_likelihood).abs() < 1e-6 * n as f64;
            g.log_likelihood = ll;
            if done {
                break;
            }
        }
        g.log_likelihood = (0..n).map(|i| g.log_density(&x[i * d..(i + 1) * d])).sum();
        Ok(g)
    }

    fn set_covariances(&mut self, covs: &[DMatrix<f64>]) -> Result<(), String> {
        self.precisions.clear();
        self.log_norms.clear();
        for c in covs {
            let d = c.nrows();
            let c = c + DMatrix::<f64>::identity(d, d) * REG;
            let ch = c
                .clone()
                .cholesky()
                .ok_or("a mixture covariance is not positive definite")?;
            let log_det = 2.0 * ch.l().diagonal().iter().map(|v| v.ln()).sum::<f64>();
            self.precisions.push(ch.inverse());
            self.log_norms
                .push(-0.5 * (d as f64 * std::f64::consts::TAU.ln() + log_det));
        }
        Ok(())
    }

    fn component_log_density(&self, j: usize, p: &DVector<f64>) -> f64 {
        let v = p - &self.means[j];
        self.log_norms[j] - 0.5 * (v.transpose() * &self.precisions[j] * &v)[(0, 0)]
    }

    /// log p(x) under the mixture.
    pub fn log_density(&self, x: &[f64]) -> f64 {
        let p = DVector::from_column_slice(x);
        let lp: Vec<f64> = (0..self.weights.len())
            .map(|j| self.weights[j].ln() + self.component_log_density(j, &p))
            .collect();
        logsumexp(&lp)
    }

    /// Free parameters: weights, means and full covariances.
    pub fn parameters(&self) -> usize {
        let (k, d) = (self.weights.len(), self.means[0].len());
        k - 1 + k * d + k * d * (d + 1) / 2
    }

    /// Bayesian information criterion on n points (lower is better).
    pub fn bic(&self, n: usize) -> f64 {
        -2.0 * self.log_likelihood + self.parameters() as f64 * (n as f64).ln()
    }

    /// The mixture with the lowest BIC among `components` (inclusive range).
    pub fn fit_bic(
        x: &[f64],
        d: usize,
        components: (usize, usize),
        seed: u64,
    ) -> Result<Gmm, String> {
        let n = x.len() / d;
        let mut best: Option<Gmm> = None;
        for k in components.0..=components.1 {
            let g = Gmm::fit(x, d, k, seed, 200)?;
            if best.as_ref().is_none_or(|b| g.bic(n) < b.bic(n)) {
                best = Some(g);
            }
        }
        best.ok_or_else(|| "gpucl.components is an empty range".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blobs(centers: &[[f64; 2]], per: usize, seed: u64) -> Vec<f64> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut x = Vec::new();
        for c in centers {
            for _ in 0..per {
                // Sum of uniforms: roughly normal, std 0.05.
                let e = |r: &mut ChaCha8Rng| {
                    (0..12).map(|_| r.random_range(-0.5..0.5)).sum::<f64>() * 0.05
                };
                x.push(c[0] + e(&mut rng));
                x.push(c[1] + e(&mut rng));
            }
        }
        x
    }

    #[test]
    fn bic_picks_the_true_component_count_and_density_separates_far_points() {
        let x = blobs(&[[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]], 150, 1);
        let g = Gmm::fit_bic(&x, 2, (1, 5), 0).unwrap();
        assert_eq!(g.weights.len(), 3);
        assert!(g.log_density(&[1.0, 0.0]) > 2.0);
        assert!(g.log_density(&[1.0, 1.0]) < -20.0);
        for w in &g.weights {
            assert!((w - 1.0 / 3.0).abs() < 0.02, "{:?}", g.weights);
        }
    }

    #[test]
    fn too_few_points_is_an_error_not_a_panic() {
        assert!(Gmm::fit(&[0.0, 0.0], 2, 3, 0, 10).is_err());
    }
}
