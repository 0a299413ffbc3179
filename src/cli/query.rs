//! `pucl query`: feasibility, zeta and its gradient at points given on the command line.
use anyhow::Result;
use clap::Args;
use pucl::deploy::model::ConstraintModel;
use pucl::learn::network::Scratch;
use std::path::PathBuf;

#[derive(Args)]
pub struct QueryArgs {
    #[arg(long)]
    model: PathBuf,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
    /// The constraint-input values of one or more points, in the model's feature order.
    #[arg(required = true, allow_negative_numbers = true)]
    values: Vec<f64>,
}

pub fn run(a: QueryArgs) -> Result<()> {
    let m = ConstraintModel::load(&a.model)?;
    let (d, values) = (m.dim(), a.values);
    if values.len() % d != 0 {
        anyhow::bail!(
            "{} values is not a multiple of the model's dimension {d} ({})",
            values.len(),
            m.features
                .iter()
                .map(|f| f.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if let Some(i) = values.iter().position(|v| !v.is_finite()) {
        anyhow::bail!("value {} ({}) is not a finite number", i + 1, values[i]);
    }
    let mut scratch = Scratch::default();
    let answers: Vec<_> = values.chunks(d).map(|x| m.query(x, &mut scratch)).collect();
    if a.json {
        let v = serde_json::json!({
            "feasible": answers.iter().map(|a| a.0).collect::<Vec<_>>(),
            "zeta": answers.iter().map(|a| a.1).collect::<Vec<_>>(),
            "gradient": answers.iter().flat_map(|a| a.2.clone()).collect::<Vec<_>>(),
        });
        println!("{v}");
    } else {
        for (x, (feasible, z, g)) in values.chunks(d).zip(&answers) {
            println!("{x:?}: feasible {feasible}, zeta {z:.6}, gradient {g:?}");
        }
    }
    Ok(())
}
