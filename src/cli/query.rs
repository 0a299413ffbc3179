//! `pucl query`: feasibility, zeta, the distance to the learned boundary, which way it lies and zeta's
//! gradient at points given on the command line, or many points from a CSV file or standard input
//! (one point per row, in the model's feature order; a header row naming the features is optional).
use anyhow::{Context, Result, bail};
use clap::Args;
use pucl::deploy::model::ConstraintModel;
use pucl::learn::network::Scratch;
use std::io::Read;
use std::path::PathBuf;

#[derive(Args)]
pub struct QueryArgs {
    /// The model file written by `pucl learn` (JSON).
    #[arg(long)]
    model: PathBuf,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
    /// Read the points from a CSV file (`-`: standard input), one per row in the model's feature
    /// order; an optional first row names the features.
    #[arg(long, conflicts_with = "values")]
    input: Option<PathBuf>,
    /// The constraint-input values of one or more points, in the model's feature order.
    #[arg(required_unless_present = "input", allow_negative_numbers = true)]
    values: Vec<f64>,
}

pub fn run(a: QueryArgs) -> Result<()> {
    let m = ConstraintModel::load(&a.model)?;
    let d = m.dim();
    let names: Vec<&str> = m.features.iter().map(|f| f.name.as_str()).collect();
    let values = match &a.input {
        Some(p) => read_points(p, &names)?,
        None => {
            if !a.values.len().is_multiple_of(d) {
                bail!(
                    "{} values is not a multiple of the model's dimension {d} ({})",
                    a.values.len(),
                    names.join(", ")
                );
            }
            if let Some(i) = a.values.iter().position(|v| !v.is_finite()) {
                bail!("value {} ({}) is not a finite number", i + 1, a.values[i]);
            }
            a.values
        }
    };
    let mut scratch = Scratch::default();
    let answers: Vec<_> = values.chunks(d).map(|x| m.query(x, &mut scratch)).collect();
    if a.json {
        // An infinite distance (no boundary in sight) is JSON's null.
        let v = serde_json::json!({
            "feasible": answers.iter().map(|a| a.feasible).collect::<Vec<_>>(),
            "zeta": answers.iter().map(|a| a.zeta).collect::<Vec<_>>(),
            "gradient": answers.iter().flat_map(|a| a.gradient.clone()).collect::<Vec<_>>(),
            "distance": answers.iter().map(|a| a.distance).collect::<Vec<_>>(),
            "direction": answers.iter().flat_map(|a| a.direction.clone()).collect::<Vec<_>>(),
        });
        println!("{v}");
    } else {
        for (x, a) in values.chunks(d).zip(&answers) {
            println!(
                "{x:?}: feasible {}, zeta {:.6}, distance {:.6}, direction {:?}, gradient {:?}",
                a.feasible, a.zeta, a.distance, a.direction, a.gradient
            );
        }
    }
    Ok(())
}

/// The points of a CSV file or standard input, flattened; errors name the source, line and column.
fn read_points(path: &PathBuf, names: &[&str]) -> Result<Vec<f64>> {
    let (source, text) = if path.as_os_str() == "-" {
        let mut t = String::new();
        std::io::stdin()
            .read_to_string(&mut t)
            .context("reading standard input")?;
        ("standard input".to_string(), t)
    } else {
        let t =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        (path.display().to_string(), t)
    };
    parse_points(&text, &source, names)
}

fn parse_points(text: &str, source: &str, names: &[&str]) -> Result<Vec<f64>> {
    let d = names.len();
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .trim(csv::Trim::All)
        .comment(Some(b'#'))
        .from_reader(text.as_bytes());
    let mut out = Vec::new();
    for (i, rec) in reader.records().enumerate() {
        let rec = rec.with_context(|| format!("{source}: not CSV"))?;
        let line = rec.position().map_or(i as u64 + 1, |p| p.line());
        if rec.len() == 1 && rec[0].is_empty() {
            continue;
        }
        if out.is_empty() && i == 0 && rec.iter().any(|f| f.parse::<f64>().is_err()) {
            // A header: it must name the model's features, in order.
            let header: Vec<&str> = rec.iter().collect();
            if header != names {
                bail!(
                    "{source}:{line}: the header [{}] does not name the model's features [{}]",
                    header.join(", "),
                    names.join(", ")
                );
            }
            continue;
        }
        if rec.len() != d {
            bail!(
                "{source}:{line}: {} values, the model takes {d} ({})",
                rec.len(),
                names.join(", ")
            );
        }
        for (field, name) in rec.iter().zip(names) {
            match field.parse::<f64>() {
                Ok(v) if v.is_finite() => out.push(v),
                _ => bail!("{source}:{line}: {name} = '{field}' is not a finite number"),
            }
        }
    }
    if out.is_empty() {
        bail!("{source}: no points to query");
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_points_with_or_without_header_and_errors_name_line_and_feature() {
        let names = ["x", "y"];
        let p = |t: &str| parse_points(t, "pts.csv", &names);
        assert_eq!(p("x,y\n1,2\n3, 4\n").unwrap(), [1.0, 2.0, 3.0, 4.0]);
        assert_eq!(p("# comment\n1,2\n\n3,4\n").unwrap(), [1.0, 2.0, 3.0, 4.0]);
        for (text, expect) in [
            ("a,b\n1,2\n", "pts.csv:1: the header [a, b]"),
            ("1,2\n3\n", "pts.csv:2: 1 values, the model takes 2"),
            (
                "1,2\n3,NaN\n",
                "pts.csv:2: y = 'NaN' is not a finite number",
            ),
            ("1,2\n3,1e400\n", "pts.csv:2: y = '1e400'"),
            ("x,y\n", "pts.csv: no points"),
            ("", "pts.csv: no points"),
        ] {
            let e = p(text).unwrap_err().to_string();
            assert!(e.contains(expect), "{text:?}: {e}");
        }
    }
}
