//! The training pass of the constraint network, where most of a learning run's time goes: one epoch
//! of `pucl::learn::network::train` (shuffled minibatches of 256, the default `hidden: [32, 32]`)
//! against the same epoch through ndarray (`Mlp::loss_and_grad`, the reference the fused pass must
//! equal to the last bit), per input dimension. Prints the median time per minibatch step of
//! `--repeats` epochs, their ratio, and whether both trained the same network.
//!
//! `cargo bench --bench training -- [--repeats K] [--states N]`
use clap::Parser;
use ndarray::{Array1, Array2, s};
use pucl::learn::network::{Adam, Mlp, train};
use rand::seq::SliceRandom;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::time::Instant;

/// An unknown option is an error, not ignored.
#[derive(Parser)]
#[command(
    name = "training",
    about = "Time per minibatch step of the constraint network's training, fused against ndarray"
)]
struct Args {
    /// Epochs timed per row; the table shows their median.
    #[arg(long, default_value_t = 15, value_parser = clap::value_parser!(u64).range(1..))]
    repeats: u64,
    /// Training states per epoch.
    #[arg(long, default_value_t = 25_600, value_parser = clap::value_parser!(u64).range(1..))]
    states: u64,
    /// Passed by `cargo bench`.
    #[arg(long, hide = true)]
    bench: bool,
}

const BATCH: usize = 256;

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// One epoch as `train` runs it, but through `Mlp::loss_and_grad`.
fn reference_epoch(net: &mut Mlp, adam: &mut Adam, x: &Array2<f64>, y: &Array1<f64>, seed: u64) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut order: Vec<usize> = (0..x.nrows()).collect();
    order.shuffle(&mut rng);
    let mut grad = vec![0.0; net.params.len()];
    let mut bx = Array2::<f64>::zeros((BATCH.min(x.nrows()), x.ncols()));
    let mut by = Array1::<f64>::zeros(BATCH.min(x.nrows()));
    for chunk in order.chunks(BATCH) {
        for (r, &i) in chunk.iter().enumerate() {
            bx.row_mut(r).assign(&x.row(i));
            by[r] = y[i];
        }
        let m = chunk.len();
        net.loss_and_grad(bx.slice(s![..m, ..]), by.slice(s![..m]), None, &mut grad);
        adam.step(&mut net.params, &grad);
    }
}

fn main() {
    let args = Args::parse();
    let n = args.states as usize;
    let steps = n.div_ceil(BATCH) as f64;
    println!(
        "| input dim | fused us per step | ndarray us per step | ndarray / fused | same network |"
    );
    println!("|---|---|---|---|---|");
    for d in [2, 3, 6] {
        let mut rng = ChaCha8Rng::seed_from_u64(d as u64);
        let x = Array2::from_shape_fn((n, d), |_| rng.random_range(-1.0..1.0));
        // Infeasible inside the unit ball's half radius: a boundary to learn.
        let y = Array1::from_iter(
            x.rows()
                .into_iter()
                .map(|r| (r.dot(&r) > 0.25) as u8 as f64),
        );
        let (mut fused, mut reference) = (Vec::new(), Vec::new());
        let mut same = true;
        for rep in 0..args.repeats {
            let fresh = || {
                let net = Mlp::new(d, &[32, 32], rep);
                let adam = Adam::new(net.params.len(), 5e-3, 1e-5);
                (net, adam)
            };
            let (mut a, mut adam_a) = fresh();
            let t = Instant::now();
            let mut r = ChaCha8Rng::seed_from_u64(rep);
            train(
                &mut a,
                &mut adam_a,
                x.view(),
                y.view(),
                None,
                1,
                BATCH,
                &mut r,
            );
            fused.push(t.elapsed().as_secs_f64() / steps * 1e6);
            let (mut b, mut adam_b) = fresh();
            let t = Instant::now();
            reference_epoch(&mut b, &mut adam_b, &x, &y, rep);
            reference.push(t.elapsed().as_secs_f64() / steps * 1e6);
            same &= a == b;
        }
        let (f, r) = (median(&mut fused), median(&mut reference));
        println!(
            "| {d} | {f:.1} | {r:.1} | {:.2} | {} |",
            r / f,
            if same { "yes" } else { "NO" }
        );
    }
}
