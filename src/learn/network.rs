//! The constraint network zeta(psi) in (0, 1), 1 = feasible: an MLP with LeakyReLU(0.01) hidden layers and
//! a sigmoid output, trained with binary cross-entropy and Adam. Single-point evaluation (with the
//! analytic input gradient the modulation needs) is allocation-free; training runs on minibatches
//! (fused loops where the CPU has FMA, ndarray otherwise; the same numbers either way).
use ndarray::{Array1, Array2, ArrayView1, ArrayView2, Axis, s};
use rand::seq::SliceRandom;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

const LEAK: f64 = 0.01;

/// Normalized inputs are clamped to +-this: a finite input as extreme as 1e308 would otherwise
/// overflow to infinity and give NaN (inf - inf) in the first layer. A billion standard deviations
/// from the data changes no answer there (zeta is 0 or 1 long before), and keeps every answer finite.
const INPUT_LIMIT: f64 = 1e9;
/// The network's parameters. Layer l maps sizes[l] -> sizes[l+1]; its weights (row-major,
/// sizes[l+1] x sizes[l]) then biases are stored one after another in `params`. Inputs are mapped
/// x' = (x - input_offset) * input_scale first (identity for raw inputs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mlp {
    pub sizes: Vec<usize>,
    pub input_offset: Vec<f64>,
    pub input_scale: Vec<f64>,
    pub params: Vec<f64>,
}

/// Reusable buffers for single-point evaluation.
#[derive(Debug, Clone, Default)]
pub struct Scratch {
    act: Vec<f64>,
    pre: Vec<f64>,
    grad: Vec<f64>,
    tmp: Vec<f64>,
}

#[inline]
fn leaky(x: f64) -> f64 {
    if x > 0.0 { x } else { LEAK * x }
}

/// The logistic function, computed without overflow.
#[inline]
pub fn sigmoid(z: f64) -> f64 {
    if z >= 0.0 {
        1.0 / (1.0 + (-z).exp())
    } else {
        let e = z.exp();
        e / (1.0 + e)
    }
}

/// log(1 + e^z), stable.
#[inline]
pub fn softplus(z: f64) -> f64 {
    if z > 0.0 {
        z + (-z).exp().ln_1p()
    } else {
        z.exp().ln_1p()
    }
}

impl Mlp {
    /// PyTorch's default initialisation: weights and biases U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
    pub fn new(input: usize, hidden: &[usize], seed: u64) -> Mlp {
        let mut sizes = vec![input];
        sizes.extend_from_slice(hidden);
        sizes.push(1);
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut params = Vec::new();
        for l in 0..sizes.len() - 1 {
            let bound = 1.0 / (sizes[l] as f64).sqrt();
            for _ in 0..sizes[l + 1] * sizes[l] + sizes[l + 1] {
                params.push(rng.random_range(-bound..bound));
            }
        }
        Mlp {
            sizes,
            input_offset: vec![0.0; input],
            input_scale: vec![1.0; input],
            params,
        }
    }

    pub fn input_dim(&self) -> usize {
        self.sizes[0]
    }

    /// Check the shapes are consistent and every number finite (for loaded models).
    pub fn validate(&self) -> Result<(), String> {
        if self.sizes.len() < 2 || self.sizes.contains(&0) || *self.sizes.last().unwrap_or(&0) != 1
        {
            return Err(
                "sizes must list the input, the hidden layers and a final 1, none zero".into(),
            );
        }
        let expect: usize = self.sizes.windows(2).map(|w| w[1] * w[0] + w[1]).sum();
        if self.params.len() != expect {
            return Err(format!(
                "sizes {:?} need {expect} parameters, found {}",
                self.sizes,
                self.params.len()
            ));
        }
        let d = self.sizes[0];
        if self.input_offset.len() != d || self.input_scale.len() != d {
            return Err(format!("input_offset and input_scale need {d} values"));
        }
        if self
            .params
            .iter()
            .chain(&self.input_offset)
            .chain(&self.input_scale)
            .any(|v| !v.is_finite())
        {
            return Err("a parameter is not a finite number".into());
        }
        if self.input_scale.iter().any(|s| *s <= 0.0) {
            return Err("input_scale values must be > 0".into());
        }
        Ok(())
    }

    fn offset(&self, l: usize) -> usize {
        layer_offset(&self.sizes, l)
    }

    fn layer(&self, l: usize) -> (ArrayView2<'_, f64>, ArrayView1<'_, f64>) {
        dense_layer(&self.sizes, &self.params, l)
    }

    /// zeta(x): the feasibility probability.
    pub fn zeta(&self, x: &[f64], scratch: &mut Scratch) -> f64 {
        sigmoid(self.forward_one(x, scratch, false))
    }

    /// The output logit for one input (zeta = sigmoid(logit)): the forward pass of
    /// [`Mlp::logit_and_grad`] without the gradient, the same value to the last bit.
    pub fn logit(&self, x: &[f64], scratch: &mut Scratch) -> f64 {
        self.forward_one(x, scratch, false)
    }

    /// zeta(x) and its gradient with respect to x (written to `grad`).
    pub fn zeta_and_grad(&self, x: &[f64], grad: &mut [f64], scratch: &mut Scratch) -> f64 {
        let z = self.logit_and_grad(x, grad, scratch);
        let p = sigmoid(z);
        grad.iter_mut().for_each(|g| *g *= p * (1.0 - p));
        p
    }

    /// The output logit (zeta = sigmoid(logit)) and its gradient with respect to x. The network is
    /// piecewise linear, so logit / |grad logit| estimates the signed distance to the learned boundary.
    pub fn logit_and_grad(&self, x: &[f64], grad: &mut [f64], scratch: &mut Scratch) -> f64 {
        let z = self.forward_one(x, scratch, true);
        let nl = self.sizes.len() - 1;
        let total: usize = self.sizes[1..nl].iter().sum();
        scratch.grad.clear();
        scratch.grad.push(1.0);
        let mut pre_end = total;
        for l in (0..nl).rev() {
            let (i, o) = (self.sizes[l], self.sizes[l + 1]);
            let at = self.offset(l);
            let w = &self.params[at..at + o * i];
            scratch.tmp.clear();
            scratch.tmp.resize(i, 0.0);
            for r in 0..o {
                let g = scratch.grad[r];
                if g != 0.0 {
                    for (t, wv) in scratch.tmp.iter_mut().zip(&w[r * i..(r + 1) * i]) {
                        *t += g * wv;
                    }
                }
            }
            if l > 0 {
                // Through the LeakyReLU of layer l's input (the pre-activations of layer l-1).
                let pre = &scratch.pre[pre_end - i..pre_end];
                for (t, p) in scratch.tmp.iter_mut().zip(pre) {
                    if *p <= 0.0 {
                        *t *= LEAK;
                    }
                }
                pre_end -= i;
            }
            std::mem::swap(&mut scratch.grad, &mut scratch.tmp);
        }
        for (k, g) in grad.iter_mut().enumerate() {
            *g = scratch.grad[k] * self.input_scale[k];
        }
        z
    }

    /// The output logit for one input; keeps pre-activations in scratch when asked.
    fn forward_one(&self, x: &[f64], scratch: &mut Scratch, keep: bool) -> f64 {
        let nl = self.sizes.len() - 1;
        scratch.act.clear();
        scratch.act.extend(
            x.iter()
                .zip(&self.input_offset)
                .zip(&self.input_scale)
                .map(|((v, o), s)| ((v - o) * s).clamp(-INPUT_LIMIT, INPUT_LIMIT)),
        );
        scratch.pre.clear();
        for l in 0..nl {
            let (i, o) = (self.sizes[l], self.sizes[l + 1]);
            let at = self.offset(l);
            let (w, b) = (
                &self.params[at..at + o * i],
                &self.params[at + o * i..at + o * i + o],
            );
            scratch.tmp.clear();
            for r in 0..o {
                let row = &w[r * i..(r + 1) * i];
                let mut acc = b[r];
                for (wv, a) in row.iter().zip(&scratch.act) {
                    acc += wv * a;
                }
                scratch.tmp.push(acc);
            }
            if l + 1 == nl {
                return scratch.tmp[0];
            }
            if keep {
                scratch.pre.extend_from_slice(&scratch.tmp);
            }
            scratch.act.clear();
            scratch.act.extend(scratch.tmp.iter().map(|v| leaky(*v)));
        }
        unreachable!("the last layer returns")
    }

    /// Logits for a batch (rows are inputs).
    pub fn logits(&self, x: ArrayView2<f64>) -> Array1<f64> {
        self.forward(x).1
    }

    /// zeta for a batch (rows are inputs).
    pub fn zeta_batch(&self, x: ArrayView2<f64>) -> Array1<f64> {
        let (_, logits) = self.forward(x);
        logits.mapv(sigmoid)
    }

    fn normalized(&self, x: ArrayView2<f64>) -> Array2<f64> {
        let mut a = x.to_owned();
        for (k, mut col) in a.axis_iter_mut(Axis(1)).enumerate() {
            col.mapv_inplace(|v| {
                ((v - self.input_offset[k]) * self.input_scale[k]).clamp(-INPUT_LIMIT, INPUT_LIMIT)
            });
        }
        a
    }

    /// Batched forward: the input of every layer (after activation) and the output logits.
    fn forward(&self, x: ArrayView2<f64>) -> (Vec<Array2<f64>>, Array1<f64>) {
        let nl = self.sizes.len() - 1;
        let mut inputs = vec![self.normalized(x)];
        for l in 0..nl {
            let (w, b) = self.layer(l);
            let mut z = inputs[l].dot(&w.t());
            z += &b;
            if l + 1 == nl {
                return (inputs, z.column(0).to_owned());
            }
            z.mapv_inplace(leaky);
            inputs.push(z);
        }
        unreachable!("the last layer returns")
    }

    /// Weighted mean binary cross-entropy (labels 1 = feasible; `w` per-sample weights, None = 1) of a
    /// batch and its gradient w.r.t. the parameters.
    pub fn loss_and_grad(
        &self,
        x: ArrayView2<f64>,
        y: ArrayView1<f64>,
        w: Option<ArrayView1<f64>>,
        grad: &mut [f64],
    ) -> f64 {
        let n = x.nrows() as f64;
        let (inputs, logits) = self.forward(x);
        let weight = |r: usize| w.as_ref().map_or(1.0, |w| w[r]);
        let loss = logits
            .iter()
            .zip(y)
            .enumerate()
            .map(|(r, (z, t))| weight(r) * (softplus(*z) - t * z))
            .sum::<f64>()
            / n;
        // dL/dlogit = w (sigmoid(z) - y) / n
        let delta: Array2<f64> = Array2::from_shape_fn((x.nrows(), 1), |(r, _)| {
            weight(r) * (sigmoid(logits[r]) - y[r]) / n
        });
        self.backward(&inputs, delta, grad);
        loss
    }

    /// For a loss given through its derivative w.r.t. each logit: the batch's logits go to
    /// `dloss_dlogit`, which returns dL/dlogit per row; the parameter gradient goes to `grad`.
    /// Returns the logits.
    pub fn param_grad_from_logits(
        &self,
        x: ArrayView2<f64>,
        dloss_dlogit: impl FnOnce(&Array1<f64>) -> Array1<f64>,
        grad: &mut [f64],
    ) -> Array1<f64> {
        let (inputs, logits) = self.forward(x);
        let d = dloss_dlogit(&logits);
        let delta = d.insert_axis(Axis(1));
        self.backward(&inputs, delta, grad);
        logits
    }

    /// Backpropagate dL/dlogit (n x 1) through the layers whose inputs `forward` kept.
    fn backward(&self, inputs: &[Array2<f64>], delta: Array2<f64>, grad: &mut [f64]) {
        // LeakyReLU derivative from its output (same sign as its input).
        dense_backward(&self.sizes, &self.params, inputs, delta, grad, |a| {
            if a <= 0.0 { LEAK } else { 1.0 }
        });
    }
}

/// Where layer l starts in `params` (see [`dense_layer`]).
fn layer_offset(sizes: &[usize], l: usize) -> usize {
    sizes.windows(2).take(l).map(|w| w[1] * w[0] + w[1]).sum()
}

/// Layer l of dense layers stored one after another in `params` (weights sizes[l+1] x sizes[l],
/// row-major, then biases), as [`Mlp`] and the RL networks store them.
pub(crate) fn dense_layer<'a>(
    sizes: &[usize],
    params: &'a [f64],
    l: usize,
) -> (ArrayView2<'a, f64>, ArrayView1<'a, f64>) {
    let (i, o) = (sizes[l], sizes[l + 1]);
    let at = layer_offset(sizes, l);
    let w = ArrayView2::from_shape((o, i), &params[at..at + o * i]).expect("shape checked");
    (w, ArrayView1::from(&params[at + o * i..at + o * i + o]))
}

/// Backpropagation through such layers: `inputs[l]` is layer l's input (after the previous layer's
/// activation), `delta` the loss gradient w.r.t. the last layer's output, `derivative` the hidden
/// activation's derivative as a function of its output. Writes the parameter gradient into `grad`.
pub(crate) fn dense_backward(
    sizes: &[usize],
    params: &[f64],
    inputs: &[Array2<f64>],
    mut delta: Array2<f64>,
    grad: &mut [f64],
    derivative: impl Fn(f64) -> f64,
) {
    let mut end = grad.len();
    for l in (0..sizes.len() - 1).rev() {
        let (i, o) = (sizes[l], sizes[l + 1]);
        let at = end - (o * i + o);
        end = at;
        // Logical (row-major) order, whatever the memory layout of the product.
        let gw = delta.t().dot(&inputs[l]);
        let gb = delta.sum_axis(Axis(0));
        for (g, v) in grad[at..at + o * i + o]
            .iter_mut()
            .zip(gw.iter().chain(gb.iter()))
        {
            *g = *v;
        }
        if l > 0 {
            let (w, _) = dense_layer(sizes, params, l);
            let mut d = delta.dot(&w);
            d.zip_mut_with(&inputs[l], |g, a| *g *= derivative(*a));
            delta = d;
        }
    }
}

/// Adam (eps configurable; the reference uses 1e-5).
#[derive(Debug, Clone)]
pub struct Adam {
    pub lr: f64,
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    m: Vec<f64>,
    v: Vec<f64>,
    t: i32,
}

impl Adam {
    pub fn new(n: usize, lr: f64, eps: f64) -> Adam {
        Adam {
            lr,
            beta1: 0.9,
            beta2: 0.999,
            eps,
            m: vec![0.0; n],
            v: vec![0.0; n],
            t: 0,
        }
    }

    pub fn step(&mut self, params: &mut [f64], grad: &[f64]) {
        self.t += 1;
        // Wider vectors where the CPU has them: the update is one step of every training
        // minibatch, and its divisions and square roots are exact in any width (no fused
        // multiply-add is formed), so the parameters stay the same to the last bit.
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            if has!("avx512f") {
                // SAFETY: the CPU has the feature the function is compiled for (checked above).
                return unsafe { self.update_avx512(params, grad) };
            }
            if has!("avx") {
                // SAFETY: as above.
                return unsafe { self.update_avx(params, grad) };
            }
        }
        self.update(params, grad)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    fn update_avx512(&mut self, params: &mut [f64], grad: &[f64]) {
        self.update(params, grad)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx")]
    fn update_avx(&mut self, params: &mut [f64], grad: &[f64]) {
        self.update(params, grad)
    }

    #[inline(always)]
    fn update(&mut self, params: &mut [f64], grad: &[f64]) {
        let (b1, b2) = (self.beta1, self.beta2);
        let c1 = 1.0 - b1.powi(self.t);
        let c2 = 1.0 - b2.powi(self.t);
        for (((p, g), m), v) in params
            .iter_mut()
            .zip(grad)
            .zip(&mut self.m)
            .zip(&mut self.v)
        {
            *m = b1 * *m + (1.0 - b1) * g;
            *v = b2 * *v + (1.0 - b2) * g * g;
            *p -= self.lr * (*m / c1) / ((*v / c2).sqrt() + self.eps);
        }
    }
}

/// Train for `epochs` passes over (x, y) (per-sample weights `w`, None = 1) in shuffled minibatches;
/// returns the mean loss of the last epoch.
#[allow(clippy::too_many_arguments)]
pub fn train(
    net: &mut Mlp,
    adam: &mut Adam,
    x: ArrayView2<f64>,
    y: ArrayView1<f64>,
    w: Option<ArrayView1<f64>>,
    epochs: usize,
    batch: usize,
    rng: &mut ChaCha8Rng,
) -> f64 {
    let n = x.nrows();
    let mut order: Vec<usize> = (0..n).collect();
    let mut grad = vec![0.0; net.params.len()];
    let d = x.ncols();
    // Rows are gathered into the minibatch as plain slices: ndarray's per-row assign costs more
    // than the copy for rows of a few features.
    let x = x.as_standard_layout();
    let x_flat = x.as_slice().expect("a standard-layout array is contiguous");
    let mut bx = Array2::<f64>::zeros((batch.min(n), d));
    let mut by = Array1::<f64>::zeros(batch.min(n));
    let mut bw = Array1::<f64>::ones(batch.min(n));
    let mut step = Minibatch::default();
    let mut last = f64::NAN;
    for epoch in 0..epochs {
        order.shuffle(rng);
        // Only the last epoch's loss is returned, and the loss plays no part in the gradient.
        step.skip_loss = epoch + 1 < epochs;
        let (mut sum, mut count) = (0.0, 0usize);
        for chunk in order.chunks(batch) {
            let m = chunk.len();
            let bx_flat = bx
                .as_slice_mut()
                .expect("an owned standard-layout array is contiguous");
            gather_rows(bx_flat, x_flat, d, chunk);
            for (r, &i) in chunk.iter().enumerate() {
                by[r] = y[i];
                if let Some(w) = &w {
                    bw[r] = w[i];
                }
            }
            let (xv, yv) = (bx.slice(s![..m, ..]), by.slice(s![..m]));
            let wv = w.as_ref().map(|_| bw.slice(s![..m]));
            let loss = step.loss_and_grad(net, xv, yv, wv, &mut grad);
            adam.step(&mut net.params, &grad);
            sum += loss * m as f64;
            count += m;
        }
        last = sum / count.max(1) as f64;
    }
    last
}

/// Copies rows `rows` of the row-major `x` (rows of `d`) to the first rows of `dst`. The common
/// short rows are copied with a length known at compile time, in registers, where a memcpy call
/// per row costs more than the copy.
fn gather_rows(dst: &mut [f64], x: &[f64], d: usize, rows: &[usize]) {
    fn fixed<const D: usize>(dst: &mut [f64], x: &[f64], rows: &[usize]) {
        for (to, &i) in dst.chunks_exact_mut(D).zip(rows) {
            let from: &[f64; D] = x[i * D..(i + 1) * D]
                .try_into()
                .expect("a slice of D values");
            to.copy_from_slice(from);
        }
    }
    match d {
        1 => fixed::<1>(dst, x, rows),
        2 => fixed::<2>(dst, x, rows),
        3 => fixed::<3>(dst, x, rows),
        4 => fixed::<4>(dst, x, rows),
        6 => fixed::<6>(dst, x, rows),
        _ => {
            for (to, &i) in dst.chunks_exact_mut(d).zip(rows) {
                to.copy_from_slice(&x[i * d..(i + 1) * d]);
            }
        }
    }
}

/// The rows of a product that matrixmultiply (ndarray's `dot`) sums in one pass: it splits the
/// inner dimension into blocks of this many and adds the blocks' sums to the result.
const GEMM_KC: usize = 256;

/// One minibatch's forward and backward pass with buffers kept between steps. Where the CPU has
/// FMA, the products are fused loops computing exactly what [`Mlp::loss_and_grad`] computes through
/// ndarray (each sum a chain of fused multiply-adds in the same order, as matrixmultiply's FMA
/// kernels do), without its allocations and packing: training is most of a learning run's time,
/// and its models stay the same to the last bit. Elsewhere it is [`Mlp::loss_and_grad`].
#[derive(Debug, Default)]
struct Minibatch {
    /// act[l]: layer l's input, m x sizes[l], row-major (act[0] the normalized batch).
    act: Vec<Vec<f64>>,
    logits: Vec<f64>,
    delta: Vec<f64>,
    next: Vec<f64>,
    /// A layer's weights transposed (sizes[l] x sizes[l+1]), so the forward loop runs along rows.
    wt: Vec<f64>,
    /// Leave the loss out (NaN) where nobody reads it: its softplus is a tenth of a pass.
    skip_loss: bool,
}

impl Minibatch {
    fn loss_and_grad(
        &mut self,
        net: &Mlp,
        x: ArrayView2<f64>,
        y: ArrayView1<f64>,
        w: Option<ArrayView1<f64>>,
        grad: &mut [f64],
    ) -> f64 {
        // A sum over more than a block of a layer's inputs or outputs is split by matrixmultiply
        // too; such wide layers take ndarray's way.
        #[cfg(target_arch = "x86_64")]
        if net.sizes.iter().all(|s| *s <= GEMM_KC) {
            use std::arch::is_x86_feature_detected as has;
            if has!("avx512f") && has!("fma") {
                // SAFETY: the CPU has the features the function is compiled for (checked above).
                return unsafe { self.fused_avx512(net, x, y, w, grad) };
            }
            if has!("avx2") && has!("fma") {
                // SAFETY: as above.
                return unsafe { self.fused_avx2(net, x, y, w, grad) };
            }
        }
        net.loss_and_grad(x, y, w, grad)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx2,fma")]
    fn fused_avx512(
        &mut self,
        net: &Mlp,
        x: ArrayView2<f64>,
        y: ArrayView1<f64>,
        w: Option<ArrayView1<f64>>,
        grad: &mut [f64],
    ) -> f64 {
        self.fused::<16>(net, x, y, w, grad)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    fn fused_avx2(
        &mut self,
        net: &Mlp,
        x: ArrayView2<f64>,
        y: ArrayView1<f64>,
        w: Option<ArrayView1<f64>>,
        grad: &mut [f64],
    ) -> f64 {
        self.fused::<8>(net, x, y, w, grad)
    }

    /// The pass itself; `mul_add` is a single instruction where the caller enables FMA.
    #[inline(always)]
    fn fused<const NR: usize>(
        &mut self,
        net: &Mlp,
        x: ArrayView2<f64>,
        y: ArrayView1<f64>,
        w: Option<ArrayView1<f64>>,
        grad: &mut [f64],
    ) -> f64 {
        let sizes = &net.sizes;
        let nl = sizes.len() - 1;
        let m = x.nrows();
        self.act.resize_with(nl, Vec::new);
        // Layer 0's input: the normalized batch.
        let d = sizes[0];
        let a0 = &mut self.act[0];
        a0.clear();
        for row in x.rows() {
            for (k, v) in row.iter().enumerate() {
                a0.push(
                    ((v - net.input_offset[k]) * net.input_scale[k])
                        .clamp(-INPUT_LIMIT, INPUT_LIMIT),
                );
            }
        }
        debug_assert_eq!(a0.len(), m * d);
        for l in 0..nl {
            let (i, o) = (sizes[l], sizes[l + 1]);
            let at = layer_offset(sizes, l);
            let (wl, b) = (
                &net.params[at..at + o * i],
                &net.params[at + o * i..at + o * i + o],
            );
            // Every element is written below (no clear: no memset).
            self.wt.resize(i * o, 0.0);
            for j in 0..o {
                for k in 0..i {
                    self.wt[k * o + j] = wl[j * i + k];
                }
            }
            let (inputs, rest) = self.act.split_at_mut(l + 1);
            let input = &inputs[l];
            let out = if l + 1 == nl {
                &mut self.logits
            } else {
                &mut rest[0]
            };
            out.resize(m * o, 0.0);
            let a = Strided {
                v: input,
                rs: i,
                ks: 1,
            };
            fma_product::<NR>(m, o, 0..i, a, &self.wt, out, false);
            for acc in out.chunks_exact_mut(o) {
                if l + 1 < nl {
                    acc.iter_mut()
                        .zip(b)
                        .for_each(|(c, bv)| *c = leaky(*c + bv));
                } else {
                    acc.iter_mut().zip(b).for_each(|(c, bv)| *c += bv);
                }
            }
        }
        // Loss and dL/dlogit, as in Mlp::loss_and_grad.
        let n = m as f64;
        let weight = |r: usize| w.as_ref().map_or(1.0, |w| w[r]);
        let mut loss = 0.0;
        self.delta.clear();
        for (r, (z, t)) in self.logits.iter().zip(y).enumerate() {
            if !self.skip_loss {
                loss += weight(r) * (softplus(*z) - t * z);
            }
            self.delta.push(weight(r) * (sigmoid(*z) - t) / n);
        }
        let loss = if self.skip_loss { f64::NAN } else { loss / n };
        // Backward: gradient of layer l's weights (o x i) and biases, then dL/d(layer l's input).
        let mut end = grad.len();
        for l in (0..nl).rev() {
            let (i, o) = (sizes[l], sizes[l + 1]);
            let at = end - (o * i + o);
            end = at;
            let input = &self.act[l];
            let (gw, gb) = grad[at..at + o * i + o].split_at_mut(o * i);
            // delta^T (o x m) times the inputs (m x i), the rows summed in blocks.
            let a = Strided {
                v: &self.delta,
                rs: 1,
                ks: o,
            };
            for start in (0..m).step_by(GEMM_KC) {
                let rows = start..(start + GEMM_KC).min(m);
                fma_product::<NR>(o, i, rows, a, input, gw, start > 0);
            }
            gb.fill(0.0);
            for r in 0..m {
                for (g, dv) in gb.iter_mut().zip(&self.delta[r * o..(r + 1) * o]) {
                    *g += dv;
                }
            }
            if l > 0 {
                let wl = &net.params[at..at + o * i];
                self.next.resize(m * i, 0.0);
                let a = Strided {
                    v: &self.delta,
                    rs: o,
                    ks: 1,
                };
                fma_product::<NR>(m, i, 0..o, a, wl, &mut self.next, false);
                // Through the LeakyReLU: its derivative from its output (same sign as its input).
                for (c, a) in self.next.iter_mut().zip(input) {
                    *c *= if *a <= 0.0 { LEAK } else { 1.0 };
                }
                std::mem::swap(&mut self.delta, &mut self.next);
            }
        }
        loss
    }
}

/// A matrix read as a(r, k) = v[r * rs + k * ks].
#[derive(Clone, Copy)]
struct Strided<'a> {
    v: &'a [f64],
    rs: usize,
    ks: usize,
}

/// c (rows x cols, row-major) = sum over k in `ks` of a(r, k) b(k, j), b row-major with `cols`
/// columns; with `add`, c += that sum. Each sum is a chain of fused multiply-adds from zero in the
/// order of k, so it rounds as matrixmultiply's FMA kernels do; tiles of 4 x NR keep their sums in
/// registers (NR columns: two AVX2 or one AVX-512 register per row). Inlined into a caller
/// compiled with FMA.
#[inline(always)]
fn fma_product<const NR: usize>(
    rows: usize,
    cols: usize,
    ks: std::ops::Range<usize>,
    a: Strided,
    b: &[f64],
    c: &mut [f64],
    add: bool,
) {
    const MR: usize = 4;
    let store = |c: &mut f64, v: f64| *c = if add { *c + v } else { v };
    let full_cols = cols - cols % NR;
    for j0 in (0..full_cols).step_by(NR) {
        let mut r0 = 0;
        while r0 + MR <= rows {
            let mut acc = [[0.0f64; NR]; MR];
            for k in ks.clone() {
                let bv: &[f64; NR] = b[k * cols + j0..k * cols + j0 + NR].try_into().unwrap();
                for (rr, row) in acc.iter_mut().enumerate() {
                    let av = a.v[(r0 + rr) * a.rs + k * a.ks];
                    for (s, bj) in row.iter_mut().zip(bv) {
                        *s = av.mul_add(*bj, *s);
                    }
                }
            }
            for (rr, row) in acc.iter().enumerate() {
                let at = (r0 + rr) * cols + j0;
                c[at..at + NR]
                    .iter_mut()
                    .zip(row)
                    .for_each(|(c, v)| store(c, *v));
            }
            r0 += MR;
        }
        for r in r0..rows {
            let mut acc = [0.0f64; NR];
            for k in ks.clone() {
                let av = a.v[r * a.rs + k * a.ks];
                for (s, bj) in acc.iter_mut().zip(&b[k * cols + j0..k * cols + j0 + NR]) {
                    *s = av.mul_add(*bj, *s);
                }
            }
            let at = r * cols + j0;
            c[at..at + NR]
                .iter_mut()
                .zip(&acc)
                .for_each(|(c, v)| store(c, *v));
        }
    }
    // The last columns (all of them for a one-column output): rows NR at a time.
    for j in full_cols..cols {
        let mut r0 = 0;
        while r0 + NR <= rows {
            let mut acc = [0.0f64; NR];
            if a.rs == 1 {
                // a's columns are contiguous (a transposed batch): one load per k.
                for k in ks.clone() {
                    let bv = b[k * cols + j];
                    let av: &[f64; NR] = a.v[k * a.ks + r0..k * a.ks + r0 + NR].try_into().unwrap();
                    for (s, av) in acc.iter_mut().zip(av) {
                        *s = av.mul_add(bv, *s);
                    }
                }
            } else {
                for k in ks.clone() {
                    let bv = b[k * cols + j];
                    for (rr, s) in acc.iter_mut().enumerate() {
                        *s = a.v[(r0 + rr) * a.rs + k * a.ks].mul_add(bv, *s);
                    }
                }
            }
            for (rr, v) in acc.iter().enumerate() {
                store(&mut c[(r0 + rr) * cols + j], *v);
            }
            r0 += NR;
        }
        for r in r0..rows {
            let mut acc = 0.0f64;
            for k in ks.clone() {
                acc = a.v[r * a.rs + k * a.ks].mul_add(b[k * cols + j], acc);
            }
            store(&mut c[r * cols + j], acc);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    fn net() -> Mlp {
        let mut n = Mlp::new(3, &[8, 6], 42);
        n.input_offset = vec![0.1, -0.2, 0.3];
        n.input_scale = vec![2.0, 0.5, 1.5];
        n
    }

    #[test]
    fn adam_step_in_wide_vectors_equals_the_plain_update_to_the_last_bit() {
        // 1157 parameters: not a multiple of any vector width, so the remainder loop runs too.
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let n = 1157;
        let mut wide = Adam::new(n, 5e-3, 1e-5);
        let mut plain = wide.clone();
        let mut p_wide: Vec<f64> = (0..n).map(|_| rng.random_range(-1.0..1.0)).collect();
        let mut p_plain = p_wide.clone();
        for _ in 0..5 {
            let g: Vec<f64> = (0..n).map(|_| rng.random_range(-3.0..3.0)).collect();
            wide.step(&mut p_wide, &g);
            plain.t += 1;
            plain.update(&mut p_plain, &g);
        }
        assert!(
            p_wide
                .iter()
                .zip(&p_plain)
                .all(|(a, b)| a.to_bits() == b.to_bits())
        );
        assert!(p_wide.iter().any(|p| *p != 0.0));
    }

    #[test]
    fn minibatch_gather_copies_the_chosen_rows_for_every_width() {
        for d in 1..=8 {
            let x: Vec<f64> = (0..10 * d).map(|v| v as f64).collect();
            let rows = [7, 0, 9, 3];
            let mut dst = vec![-1.0; 5 * d];
            gather_rows(&mut dst, &x, d, &rows);
            for (r, &i) in rows.iter().enumerate() {
                assert_eq!(dst[r * d..(r + 1) * d], x[i * d..(i + 1) * d], "d = {d}");
            }
            assert!(
                dst[4 * d..].iter().all(|v| *v == -1.0),
                "d = {d}: past the rows"
            );
        }
    }

    #[test]
    fn the_logit_alone_equals_the_logit_with_its_gradient_to_the_last_bit() {
        let n = net();
        let (mut s, mut g) = (Scratch::default(), [0.0; 3]);
        for k in 0..200 {
            let t = k as f64 * 0.37;
            let x = [t.sin() * 2.0, (1.3 * t).cos(), 0.1 * t - 3.0];
            let with_grad = n.logit_and_grad(&x, &mut g, &mut s);
            assert_eq!(n.logit(&x, &mut s).to_bits(), with_grad.to_bits(), "{x:?}");
        }
    }

    #[test]
    fn input_gradient_matches_finite_differences() {
        let n = net();
        let mut s = Scratch::default();
        let x = [0.3, -0.7, 0.45];
        let mut g = [0.0; 3];
        let z = n.zeta_and_grad(&x, &mut g, &mut s);
        assert!((z - n.zeta(&x, &mut s)).abs() < 1e-15);
        for k in 0..3 {
            let h = 1e-6;
            let (mut a, mut b) = (x, x);
            a[k] += h;
            b[k] -= h;
            let fd = (n.zeta(&a, &mut s) - n.zeta(&b, &mut s)) / (2.0 * h);
            assert!(
                (fd - g[k]).abs() < 1e-7 * (1.0 + fd.abs()),
                "k={k}: {fd} vs {}",
                g[k]
            );
        }
    }

    #[test]
    fn parameter_gradient_matches_finite_differences() {
        let mut n = net();
        let x = array![[0.3, -0.7, 0.45], [1.0, 0.2, -0.3], [-0.5, 0.5, 0.0]];
        let y = array![1.0, 0.0, 1.0];
        let w = array![0.5, 2.0, 1.0];
        let w = Some(w.view());
        let mut g = vec![0.0; n.params.len()];
        n.loss_and_grad(x.view(), y.view(), w, &mut g);
        let mut scratch = vec![0.0; n.params.len()];
        for i in (0..n.params.len()).step_by(7) {
            let h = 1e-6;
            let p0 = n.params[i];
            n.params[i] = p0 + h;
            let lp = n.loss_and_grad(x.view(), y.view(), w, &mut scratch);
            n.params[i] = p0 - h;
            let lm = n.loss_and_grad(x.view(), y.view(), w, &mut scratch);
            n.params[i] = p0;
            let fd = (lp - lm) / (2.0 * h);
            assert!((fd - g[i]).abs() < 1e-7, "param {i}: {fd} vs {}", g[i]);
        }
    }

    #[test]
    fn batch_and_single_evaluation_agree() {
        let n = net();
        let x = array![[0.3, -0.7, 0.45], [1.0, 0.2, -0.3]];
        let zb = n.zeta_batch(x.view());
        let mut s = Scratch::default();
        for r in 0..2 {
            assert!((zb[r] - n.zeta(x.row(r).as_slice().unwrap(), &mut s)).abs() < 1e-14);
        }
    }

    #[test]
    fn training_separates_a_disc_and_is_deterministic() {
        // Feasible outside a disc of radius 0.5, infeasible inside.
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let pts: Vec<[f64; 2]> = (0..600)
            .map(|_| [rng.random_range(-1.0..1.0), rng.random_range(-1.0..1.0)])
            .collect();
        let x = Array2::from_shape_fn((pts.len(), 2), |(r, c)| pts[r][c]);
        let y = Array1::from_iter(pts.iter().map(|p| {
            if p[0] * p[0] + p[1] * p[1] < 0.25 {
                0.0
            } else {
                1.0
            }
        }));
        let run = || {
            let mut n = Mlp::new(2, &[32, 32], 3);
            let mut adam = Adam::new(n.params.len(), 5e-3, 1e-5);
            let mut r = ChaCha8Rng::seed_from_u64(9);
            let loss = train(&mut n, &mut adam, x.view(), y.view(), None, 150, 64, &mut r);
            (n, loss)
        };
        let (n, loss) = run();
        assert!(loss < 0.1, "loss {loss}");
        let mut s = Scratch::default();
        assert!(n.zeta(&[0.0, 0.0], &mut s) < 0.2 && n.zeta(&[0.9, 0.9], &mut s) > 0.8);
        assert_eq!(run().0, n, "same seed, same network");
    }

    #[test]
    fn the_fused_minibatch_pass_gives_ndarrays_loss_and_gradient_to_the_last_bit() {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        // Batches below, at and over a gemm block; a clamped input; weights or none.
        for (d, hidden, m, weighted) in [
            (3, vec![32, 32], 256, false),
            (2, vec![8, 6], 1, true),
            (4, vec![16], 300, true),
            (3, vec![32, 32], 700, false),
        ] {
            let mut n = Mlp::new(d, &hidden, 11);
            n.input_offset = (0..d).map(|k| 0.1 * k as f64).collect();
            n.input_scale = (0..d).map(|k| 1.0 + k as f64).collect();
            let mut x = Array2::from_shape_fn((m, d), |_| rng.random_range(-2.0..2.0));
            x[[0, 0]] = 1e300;
            let y = Array1::from_shape_fn(m, |r| (r % 3 == 0) as u8 as f64);
            let w = Array1::from_shape_fn(m, |_| rng.random_range(0.1..3.0));
            let w = weighted.then_some(w.view());
            let mut reference = vec![0.0; n.params.len()];
            let mut fused = vec![f64::NAN; n.params.len()];
            let lr = n.loss_and_grad(x.view(), y.view(), w, &mut reference);
            let mut step = Minibatch::default();
            // Twice: buffers kept from a larger batch must not leak into a smaller one.
            for _ in 0..2 {
                let lf = step.loss_and_grad(&n, x.view(), y.view(), w, &mut fused);
                assert_eq!(lf.to_bits(), lr.to_bits(), "loss, m = {m}");
                for (k, (a, b)) in fused.iter().zip(&reference).enumerate() {
                    assert_eq!(
                        a.to_bits(),
                        b.to_bits(),
                        "parameter {k}, m = {m}: {a} vs {b}"
                    );
                }
            }
            // The AVX2 kernel too, which an AVX-512 machine would not dispatch to.
            #[cfg(target_arch = "x86_64")]
            if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
                let mut avx2 = vec![f64::NAN; n.params.len()];
                // SAFETY: the CPU has the features (checked above).
                let la = unsafe { step.fused_avx2(&n, x.view(), y.view(), w, &mut avx2) };
                assert_eq!((la.to_bits(), &avx2), (lr.to_bits(), &reference));
            }
            // Without the loss the gradient is the same.
            step.skip_loss = true;
            let ls = step.loss_and_grad(&n, x.view(), y.view(), w, &mut fused);
            assert!(ls.is_nan());
            assert_eq!(&fused, &reference);
            step.skip_loss = false;
            let small = x.slice(s![..1, ..]);
            let (ys, ws) = (y.slice(s![..1]), w.map(|w| w.slice_move(s![..1])));
            let lr = n.loss_and_grad(small, ys, ws, &mut reference);
            let lf = step.loss_and_grad(&n, small, ys, ws, &mut fused);
            assert_eq!((lf.to_bits(), &fused), (lr.to_bits(), &reference));
        }
    }

    #[test]
    fn validation_catches_wrong_shapes_and_nan() {
        let mut n = net();
        assert!(n.validate().is_ok());
        n.params.pop();
        assert!(n.validate().unwrap_err().contains("parameters"));
        let mut n = net();
        n.params[0] = f64::NAN;
        assert!(n.validate().is_err());
    }

    #[test]
    fn extreme_finite_inputs_give_finite_zeta_and_gradient() {
        let mut n = Mlp::new(3, &[8, 8], 1);
        n.input_offset = vec![0.5, 0.0, 0.0];
        n.input_scale = vec![10.0, 10.0, 10.0];
        let mut s = Scratch::default();
        let mut g = [0.0; 3];
        for x in [
            [1e308, -1e308, 1e308],
            [f64::MAX, f64::MIN, 0.0],
            [-1e300, 1e-300, 1e200],
        ] {
            let logit = n.logit_and_grad(&x, &mut g, &mut s);
            let z = n.zeta(&x, &mut s);
            assert!(
                logit.is_finite() && g.iter().all(|v| v.is_finite()),
                "{x:?}"
            );
            assert!((0.0..=1.0).contains(&z), "{x:?}: {z}");
            let batch = n.zeta_batch(ndarray::arr2(&[x]).view());
            assert!(batch[0].is_finite(), "{x:?}");
        }
    }
}
