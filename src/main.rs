//! The `pucl` command-line tool: parses the command line and hands it to the command's module in
//! `src/cli/`, each a thin layer over the library.
mod cli;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "pucl",
    version,
    about = "Learn where not to go from a few demonstrations (positive-unlabeled constraint learning), and enforce it."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List the built-in tasks.
    Tasks,
    /// Generate and check demonstration sets (CSV or JSON); make them from a robot's log or ROS 2 bags.
    #[command(subcommand)]
    Demos(cli::demos::DemosCommand),
    /// Learn the constraint from demonstrations (DSM-PUCL by default; CRL-PUCL with --policy crl; the
    /// baselines with --method) and write the model file.
    Learn(cli::learn::LearnArgs),
    /// Evaluate a model: IoU, recall, precision on the task's grid (or, without one, on the states of
    /// its evaluation policies); unsafe and goal-reached rates of its DSM policy (a run that stalls in
    /// front of a learned obstacle is guided round it), or of a CRL policy file (--policy).
    Eval(cli::eval::EvalArgs),
    /// Query a model: feasible, zeta, the distance to the learned boundary along zeta's gradient (negative inside; null/inf: none within the workspace), the gradient's unit direction and the gradient at one or more points (values flattened).
    Query(cli::query::QueryArgs),
    /// Draw the learned zeta as a heat map with the true boundary, demonstrations, policy rollouts
    /// and the reliable infeasible points (like the paper's Fig. 3); for a task without a grid, its
    /// evaluation states coloured by the truth and by zeta.
    Plot(cli::plot::PlotArgs),
    /// Draw a task's true constraint (and demonstrations) as a PNG; a 3-D task as a top and a side view.
    PlotTask(cli::plot::PlotTaskArgs),
    /// Write a generated suite of tasks nobody tuned for (2-D, 3-D and velocity; task files and expert
    /// demonstrations) to a folder.
    Suite(cli::suite::SuiteArgs),
}

fn main() -> ExitCode {
    restore_sigpipe();
    let result = match Cli::parse().command {
        Command::Tasks => cli::tasks::run(),
        Command::Demos(c) => cli::demos::run(c),
        Command::Learn(a) => cli::learn::run(a),
        Command::Eval(a) => cli::eval::run(a),
        Command::Query(a) => cli::query::run(a),
        Command::Plot(a) => cli::plot::run(a),
        Command::PlotTask(a) => cli::plot::run_task(a),
        Command::Suite(a) => cli::suite::run(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Rust ignores SIGPIPE, so printing into a closed pipe (`pucl query ... | head`) would panic;
/// a command-line tool should end quietly there, as Unix tools do.
fn restore_sigpipe() {
    #[cfg(unix)]
    // SAFETY: called first thing in main, before any other thread exists; SIG_DFL is a valid
    // disposition for SIGPIPE.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

#[cfg(test)]
mod tests {
    use super::Cli;
    use clap::CommandFactory;

    /// `pucl <command> --help` is the reference a user reads: every option says what it takes.
    #[test]
    fn every_option_of_every_command_has_a_help_text() {
        fn undocumented(cmd: &clap::Command, path: &str, out: &mut Vec<String>) {
            for arg in cmd.get_arguments() {
                let builtin = matches!(arg.get_id().as_str(), "help" | "version");
                if !builtin && !arg.is_hide_set() && arg.get_help().is_none() {
                    out.push(format!("{path} --{}", arg.get_id()));
                }
            }
            for sub in cmd.get_subcommands() {
                undocumented(sub, &format!("{path} {}", sub.get_name()), out);
            }
        }
        let mut missing = Vec::new();
        undocumented(&Cli::command(), "pucl", &mut missing);
        assert!(missing.is_empty(), "options without help: {missing:?}");
    }
}
