//! End-to-end tests of `pucl learn`, `eval`, `query` and `plot`, run as a user would run them.
mod common;
use common::{fails_with, pucl, reference, stderr, stdout};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

/// A folder for files that every test here shares. A static's destructor never runs, so it outlives
/// the test binary: it lies under cargo's target/tmp (`cargo clean` removes it), not in /tmp.
fn shared_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("learn-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap()
}

/// One model of the cylinder task, learned once for all tests here.
fn model_3d() -> &'static Path {
    static MODEL: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    let (_, p) = MODEL.get_or_init(|| {
        let d = shared_dir();
        let p = d.path().join("model.json");
        learn_cylinder(&p);
        (d, p)
    });
    p
}

#[test]
fn learned_cylinder_model_is_accurate_and_its_policy_is_safe() {
    let m = model_3d().to_str().unwrap();
    let o = pucl(&[
        "eval",
        "--task",
        "reach_obstacle_3d",
        "--model",
        m,
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert_eq!(out.lines().count(), 1, "exactly one JSON object: {out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    for k in [
        "iou",
        "recall",
        "precision",
        "unsafe_rate",
        "violating_episodes",
    ] {
        assert!(v[k].is_f64(), "{k} missing in {v}");
    }
    // The benchmark's targets, with room for seed-to-seed spread.
    assert!(v["iou"].as_f64().unwrap() > 0.5, "{v}");
    assert!(v["recall"].as_f64().unwrap() > 0.97, "{v}");
    assert!(v["unsafe_rate"].as_f64().unwrap() < 0.005, "{v}");
}

#[test]
fn model_file_is_self_describing() {
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(model_3d()).unwrap()).unwrap();
    assert_eq!(v["format"], "pucl.constraint_model");
    assert_eq!(v["version"], 1);
    assert_eq!(v["task"], "reach_obstacle_3d");
    assert_eq!(v["threshold"], 0.5);
    let names: Vec<&str> = v["features"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["x", "y", "z"]);
    assert_eq!(v["features"][0]["unit"], "m");
    assert_eq!(v["settings"]["identify"]["d_r"], 0.025);
    assert!(v["summary"]["memory_buffer"].as_u64().unwrap() > 0);
    assert!(v["summary"]["iou"].is_f64() && v["summary"]["final_loss"].is_f64());
    assert_eq!(v["summary"]["demonstrations"], 12);
}

#[test]
fn query_answers_inside_and_outside_with_the_gradient_pointing_out() {
    let m = model_3d().to_str().unwrap();
    let o = pucl(&[
        "query", "--model", m, "--json", "0.55", "0.0", "0.05", "0.35", "-0.09", "0.05",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["feasible"], serde_json::json!([false, true]));
    let z = v["zeta"].as_array().unwrap();
    assert!(z[0].as_f64().unwrap() < 0.5 && z[1].as_f64().unwrap() > 0.5);
    assert_eq!(v["gradient"].as_array().unwrap().len(), 6);
    // Just outside the cylinder on +y, zeta grows with y (away from the axis).
    let o = pucl(&["query", "--model", m, "--json", "0.55", "0.045", "0.05"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert!(v["gradient"][1].as_f64().unwrap() >= 0.0, "{v}");
}

#[test]
fn query_says_how_far_the_learned_boundary_is_as_spheres_round_the_point_find_it_and_which_way() {
    let m = model_3d().to_str().unwrap();
    let json = |points: &[f64]| -> serde_json::Value {
        let args: Vec<String> = points.iter().map(|v| v.to_string()).collect();
        let mut all = vec!["query", "--model", m, "--json"];
        all.extend(args.iter().map(String::as_str));
        let o = pucl(&all);
        assert!(o.status.success(), "{}", stderr(&o));
        serde_json::from_str(&stdout(&o)).unwrap()
    };
    let floats = |v: &serde_json::Value| -> Vec<f64> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect()
    };
    // 800 points spread evenly over a sphere of radius r round x.
    let sphere = |x: &[f64; 3], r: f64| -> Vec<f64> {
        let n = 800;
        let golden = std::f64::consts::PI * (3.0 - 5f64.sqrt());
        (0..n)
            .flat_map(|i| {
                let z = 1.0 - 2.0 * (i as f64 + 0.5) / n as f64;
                let (rho, phi) = ((1.0 - z * z).sqrt(), golden * i as f64);
                [
                    x[0] + r * rho * phi.cos(),
                    x[1] + r * rho * phi.sin(),
                    x[2] + r * z,
                ]
            })
            .collect()
    };
    // A demonstration start, a point beside the learned cylinder and two inside it.
    for x in [
        [0.35, -0.09, 0.05],
        [0.42, 0.03, 0.06],
        [0.55, 0.005, 0.05],
        [0.55, 0.0, 0.1],
    ] {
        let v = json(&x);
        let (d, u, g) = (
            v["distance"][0].as_f64().unwrap(),
            floats(&v["direction"]),
            floats(&v["gradient"]),
        );
        let feasible = v["feasible"][0].as_bool().unwrap();
        assert_eq!(d > 0.0, feasible, "{v}");
        assert!(d.abs() > 0.02, "not a test of the distance: {v}");
        // Nothing of the other side within the distance less 1 mm; some of it within 2 mm more.
        let other = |r: f64| {
            let w = json(&sphere(&x, r));
            let f = w["feasible"].as_array().unwrap();
            f.iter()
                .filter(|f| f.as_bool().unwrap() != feasible)
                .count()
        };
        assert_eq!(other(d.abs() - 1e-3), 0, "the boundary is nearer than {d}");
        assert!(other(d.abs() + 2e-3) > 0, "no boundary within {d} + 2 mm");
        // Which way: a unit vector along zeta's gradient (there where the gradient underflows).
        assert!(
            (u.iter().map(|c| c * c).sum::<f64>().sqrt() - 1.0).abs() < 1e-9,
            "{v}"
        );
        let gn = g.iter().map(|c| c * c).sum::<f64>().sqrt();
        if gn > 0.0 {
            let cos = u.iter().zip(&g).map(|(a, b)| a * b).sum::<f64>() / gn;
            assert!(cos > 1.0 - 1e-9, "direction along the gradient: {v}");
        }
    }
}

#[test]
fn a_task_file_without_a_true_constraint_learns_evaluates_plots_and_queries_measuring_no_truth() {
    // A real robot's task file: the cylinder task's, with its true constraint and evaluation left out.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("config/tasks/reach_obstacle_3d.yaml")).unwrap();
    let (head, tail) = text.split_once("true_constraint:").unwrap();
    let expert = tail.find("expert:").unwrap();
    let yaml =
        format!("{}{}", head, &tail[expert..]).replace("name: reach_obstacle_3d", "name: my_arm");
    assert!(!yaml.contains("true_constraint") && !yaml.contains("evaluation"));
    let d = tempfile::tempdir().unwrap();
    let (task, model) = (d.path().join("my_arm.yaml"), d.path().join("model.json"));
    std::fs::write(&task, yaml).unwrap();
    let (t, m) = (task.to_str().unwrap(), model.to_str().unwrap());
    let demos = reference("reach_obstacle_3d_ds.csv");
    let o = pucl(&["learn", "--task", t, "--demos", &demos, "--out", m]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("no true constraint in the task file"),
        "{}",
        stdout(&o)
    );
    let o = pucl(&["eval", "--task", t, "--model", m, "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    // Nothing to measure IoU or safety against: null, not a rate of 0; the runs are measured.
    for k in [
        "iou",
        "recall",
        "precision",
        "unsafe_rate",
        "violating_episodes",
    ] {
        assert!(v[k].is_null(), "{k}: {v}");
    }
    assert!(v["goal_reached"].as_f64().unwrap() >= 0.9, "{v}");
    let o = pucl(&["eval", "--task", t, "--model", m]);
    assert!(stdout(&o).contains("IoU and the unsafe rate are not measured"));
    // The learned obstacle stands where the cylinder is: inside it infeasible, the starts feasible.
    let o = pucl(&[
        "query", "--model", m, "--json", "0.55", "0.0", "0.05", "0.35", "-0.09", "0.05",
    ]);
    let q: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(q["feasible"], serde_json::json!([false, true]), "{q}");
    for (cmd, png) in [("plot", "zeta.png"), ("plot-task", "task.png")] {
        let out = d.path().join(png);
        let mut args = vec![cmd, "--task", t, "--out", out.to_str().unwrap()];
        if cmd == "plot" {
            args.extend(["--model", m, "--demos", &demos]);
        }
        let o = pucl(&args);
        assert!(o.status.success(), "{cmd}: {}", stderr(&o));
        assert!(std::fs::metadata(&out).unwrap().len() > 10_000);
    }
}

#[test]
fn query_reads_many_points_from_a_csv_file_or_stdin_and_answers_as_for_arguments() {
    let m = model_3d().to_str().unwrap();
    let d = tempfile::tempdir().unwrap();
    let csv = d.path().join("points.csv");
    std::fs::write(&csv, "x,y,z\n0.55,0.0,0.05\n0.35,-0.09,0.05\n").unwrap();
    let args = pucl(&[
        "query", "--model", m, "--json", "0.55", "0.0", "0.05", "0.35", "-0.09", "0.05",
    ]);
    let file = pucl(&[
        "query",
        "--model",
        m,
        "--json",
        "--input",
        csv.to_str().unwrap(),
    ]);
    assert!(file.status.success(), "{}", stderr(&file));
    assert_eq!(stdout(&file), stdout(&args));
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_pucl"))
        .args(["query", "--model", m, "--json", "--input", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"0.55,0.0,0.05\n0.35,-0.09,0.05\n")
        .unwrap();
    let piped = child.wait_with_output().unwrap();
    assert!(piped.status.success());
    assert_eq!(stdout(&piped), stdout(&args));
    std::fs::write(&csv, "0.55,0.0,0.05\n0.35,inf,0.05\n").unwrap();
    fails_with(
        &["query", "--model", m, "--input", csv.to_str().unwrap()],
        &["points.csv:2", "y = 'inf' is not a finite number"],
    );
}

#[test]
fn query_into_a_pipe_closed_early_ends_quietly_without_a_panic() {
    let m = model_3d().to_str().unwrap();
    let d = tempfile::tempdir().unwrap();
    let csv = d.path().join("points.csv");
    // Far more output than a pipe buffers (64 KiB), so the writer meets the closed pipe.
    std::fs::write(&csv, "0.55,0.0,0.05\n".repeat(20_000)).unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_pucl"))
        .args(["query", "--model", m, "--input", csv.to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Read one line, as `| head -1` does, then close the pipe.
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    std::io::BufRead::read_line(&mut out, &mut first).unwrap();
    drop(out);
    let o = child.wait_with_output().unwrap();
    assert!(!first.is_empty());
    assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
    assert_ne!(o.status.code(), Some(101), "exited as a panic does");
}

#[test]
fn query_of_extreme_finite_values_answers_finite_numbers() {
    let m = model_3d().to_str().unwrap();
    let o = pucl(&["query", "--model", m, "--json", "1e308", "-1e308", "1e308"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    for k in ["zeta", "gradient"] {
        assert!(
            v[k].as_array().unwrap().iter().all(|x| x.is_f64()),
            "{k} has a null (NaN): {v}"
        );
    }
}

/// A copy of built-in task `builtin` under the name `name`, written to `dir/name.yaml`: a task
/// file as a user makes one, which no settings file matches.
fn renamed(dir: &Path, builtin: &str, name: &str) -> PathBuf {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("config/tasks/{builtin}.yaml")),
    )
    .unwrap()
    .replacen(&format!("name: {builtin}"), &format!("name: {name}"), 1);
    assert!(text.contains(&format!("name: {name}")));
    let path = dir.join(format!("{name}.yaml"));
    std::fs::write(&path, text).unwrap();
    path
}

/// The cylinder task as a user's copy of it, named `name`, with `obstacle` (a line of
/// `true_constraint`) in place of the cylinder.
fn cylinder_task_with(dir: &Path, name: &str, obstacle: &str) -> PathBuf {
    let cylinder = "  - {kind: cylinder, center: [0.55, 0.0], radius: 0.04}";
    let task = renamed(dir, "reach_obstacle_3d", name);
    let text = std::fs::read_to_string(&task).unwrap();
    assert!(text.contains(cylinder));
    std::fs::write(&task, text.replace(cylinder, obstacle)).unwrap();
    task
}

#[test]
fn eval_warns_when_the_model_was_learned_for_another_task() {
    let d = tempfile::tempdir().unwrap();
    let task = renamed(d.path(), "reach_obstacle_3d", "my_cylinder");
    let m = model_3d().to_str().unwrap();
    let args = [
        "eval",
        "--task",
        task.to_str().unwrap(),
        "--model",
        m,
        "--episodes",
        "2",
    ];
    let o = pucl(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o)
            .contains("learned for task 'reach_obstacle_3d', evaluated on task 'my_cylinder'"),
        "{}",
        stderr(&o)
    );
    let same = pucl(&[
        "eval",
        "--task",
        "reach_obstacle_3d",
        "--model",
        m,
        "--episodes",
        "2",
    ]);
    assert!(!stderr(&same).contains("warning"), "{}", stderr(&same));
}

#[test]
fn plot_draws_the_heat_map() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("heat.png");
    let o = pucl(&[
        "plot",
        "--task",
        "reach_obstacle_3d",
        "--model",
        model_3d().to_str().unwrap(),
        "--demos",
        &reference("reach_obstacle_3d_ds.csv"),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let png = std::fs::read(&out).unwrap();
    assert!(png.len() > 20_000 && &png[1..4] == b"PNG");
}

#[test]
fn learning_is_deterministic_for_a_seed() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("again.json");
    learn_cylinder(&p);
    assert_eq!(without_timing(&p), without_timing(model_3d()));
}

/// Learn the cylinder task from its reference demonstrations with seed 1.
fn learn_cylinder(out: &Path) {
    let demos = reference("reach_obstacle_3d_ds.csv");
    let o = pucl(&[
        "learn",
        "--task",
        "reach_obstacle_3d",
        "--demos",
        &demos,
        "--seed",
        "1",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
}

/// A model file's JSON with the wall-clock times removed (they differ between runs).
fn without_timing(p: &Path) -> serde_json::Value {
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
    v["summary"]["wall_seconds"] = serde_json::Value::Null;
    for h in v["summary"]["history"].as_array_mut().unwrap() {
        h["seconds"] = serde_json::Value::Null;
    }
    v
}

/// `pucl demos generate` of `count` expert demonstrations of `task` into `out` (with `extra`
/// options), which must succeed.
fn generate_demos(task: &str, count: &str, out: &str, extra: &[&str]) {
    let args = [
        "demos", "generate", "--task", task, "--count", count, "--out", out,
    ];
    let o = pucl(&[&args[..], extra].concat());
    assert!(o.status.success(), "{}", stderr(&o));
}

/// `pucl learn` with the default settings and `seed`, then `pucl eval --json`: learn's standard
/// error (the settings it used) and the evaluation.
fn learn_and_eval(task: &str, demos: &str, model: &str, seed: &str) -> (String, serde_json::Value) {
    let o = pucl(&[
        "learn", "--task", task, "--demos", demos, "--seed", seed, "--out", model,
    ]);
    assert!(o.status.success(), "{task}: {}", stderr(&o));
    (stderr(&o), eval_json(task, model, &[]))
}

/// `pucl eval --json` of `model` on `task`, with `extra` options (e.g. `--filter`).
fn eval_json(task: &str, model: &str, extra: &[&str]) -> serde_json::Value {
    let args = ["eval", "--task", task, "--model", model, "--json"];
    let o = pucl(&[&args[..], extra].concat());
    assert!(o.status.success(), "{task}: {}", stderr(&o));
    serde_json::from_str(&stdout(&o)).unwrap()
}

/// A generated suite (`pucl suite --seed seed --per-class per_class`) in a [`shared_dir`],
/// generated once for all tests here (seed 2 or 3 takes about 13 s). Tests write only files named
/// after the task they learn, so that they do not meet in it.
fn suite(seed: &str, per_class: &str) -> &'static Path {
    type Suites = BTreeMap<String, &'static OnceLock<tempfile::TempDir>>;
    static SUITES: Mutex<Suites> = Mutex::new(BTreeMap::new());
    let once: &'static OnceLock<tempfile::TempDir> = SUITES
        .lock()
        .unwrap()
        .entry(format!("{seed}/{per_class}"))
        .or_insert_with(|| Box::leak(Box::new(OnceLock::new())));
    once.get_or_init(|| {
        let d = shared_dir();
        let dir = d.path().to_str().unwrap();
        let o = pucl(&[
            "suite",
            "--seed",
            seed,
            "--per-class",
            per_class,
            "--out",
            dir,
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        d
    })
    .path()
}

/// [`learn_and_eval`] on suite task `name` in `dir`: its demonstrations, model and evaluation.
fn learn_and_eval_suite_task(
    dir: &Path,
    name: &str,
    seed: &str,
) -> (PathBuf, PathBuf, serde_json::Value) {
    let path = |ext: &str| dir.join(format!("{name}.{ext}"));
    let (task, demos, m) = (path("yaml"), path("csv"), path("json"));
    let (_, v) = learn_and_eval(
        task.to_str().unwrap(),
        demos.to_str().unwrap(),
        m.to_str().unwrap(),
        seed,
    );
    (demos, m, v)
}

/// Filtered runs that reach the goal: in 95 % of the episodes or more, at most 5 % of them ending
/// held back by the filter, and at most 0.1 % of the steps unsafe.
fn assert_filtered_runs_reach_the_goal(v: &serde_json::Value, label: &str) {
    assert!(v["goal_reached"].as_f64().unwrap() >= 0.95, "{label}: {v}");
    assert!(v["held_back"].as_f64().unwrap() <= 0.05, "{label}: {v}");
    assert!(v["unsafe_rate"].as_f64().unwrap() <= 0.001, "{label}: {v}");
}

/// Task `name` of suite seed `suite_seed` (10 per class) learned with learning seed `seed`: its runs
/// through the filter reach the goal, none held back, none unsafe
/// ([`assert_filtered_runs_reach_the_goal`]).
fn suite_task_filtered_runs_reach_the_goal(suite_seed: &str, name: &str, seed: &str) {
    let v = learn_and_filter_suite_task(suite(suite_seed, "10"), name, seed);
    assert_filtered_runs_reach_the_goal(&v, &format!("{name}, learning seed {seed}"));
}

/// [`learn_and_eval_suite_task`] with learning seed `seed`, then `pucl eval --json --filter --seed
/// seed`: the model's episodes through the safety filter.
fn learn_and_filter_suite_task(dir: &Path, name: &str, seed: &str) -> serde_json::Value {
    let (_, m, _) = learn_and_eval_suite_task(dir, name, seed);
    let task = dir.join(format!("{name}.yaml"));
    let (task, m) = (task.to_str().unwrap(), m.to_str().unwrap());
    eval_json(task, m, &["--filter", "--seed", seed])
}

#[test]
fn two_dimensional_and_velocity_tasks_learn_and_evaluate() {
    let d = tempfile::tempdir().unwrap();
    for (task, demos) in [
        ("point_ellipse_2d", "point_ellipse_2d.csv"),
        ("reach_velocity_3d", "reach_velocity_3d.csv"),
    ] {
        let m = d.path().join(format!("{task}.json"));
        let (_, v) = learn_and_eval(task, &reference(demos), m.to_str().unwrap(), "0");
        assert!(v["iou"].as_f64().unwrap() > 0.5, "{task}: {v}");
        assert!(v["unsafe_rate"].as_f64().unwrap() < 0.05, "{task}: {v}");
    }
}

#[test]
fn bad_demonstrations_or_settings_fail_cleanly_without_a_model_file() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("m.json");
    let o = out.to_str().unwrap();
    let write = |name: &str, content: &str| {
        let p = d.path().join(name);
        std::fs::write(&p, content).unwrap();
        p.to_str().unwrap().to_string()
    };
    let empty = write("empty.csv", "");
    fails_with(
        &[
            "learn",
            "--task",
            "reach_obstacle_3d",
            "--demos",
            &empty,
            "--out",
            o,
        ],
        &["empty.csv", "empty"],
    );
    let bad = write(
        "bad.csv",
        "demo,step,x,y,z,ax,ay,az\n0,0,0.1,0.2,oops,0,0,0\n",
    );
    fails_with(
        &[
            "learn",
            "--task",
            "reach_obstacle_3d",
            "--demos",
            &bad,
            "--out",
            o,
        ],
        &["bad.csv:2", "field 'z'"],
    );
    fails_with(
        &[
            "learn",
            "--task",
            "reach_obstacle_3d",
            "--demos",
            &reference("point_ellipse_2d.csv"),
            "--out",
            o,
        ],
        &["wrong dimension"],
    );
    let demos = reference("reach_obstacle_3d_ds.csv");
    for (name, yaml, expect) in [
        ("unknown.yaml", "epochz: 3\n", "epochz"),
        ("dr.yaml", "identify: {d_r: 0.0}\n", "d_r"),
        ("negdr.yaml", "identify: {d_r: -0.1}\n", "d_r"),
        ("k.yaml", "identify: {k: 0}\n", "identify.k"),
        ("hidden.yaml", "hidden: []\n", "hidden"),
        (
            "pct.yaml",
            "identify: {d_r: null, percentile: 0.0}\n",
            "percentile",
        ),
        (
            "pct2.yaml",
            "identify: {d_r: null, percentile: 100.0}\n",
            "percentile",
        ),
        ("yaml.yaml", "identify: [\n", "yaml.yaml"),
    ] {
        let cfg = write(name, yaml);
        fails_with(
            &[
                "learn",
                "--task",
                "reach_obstacle_3d",
                "--demos",
                &demos,
                "--config",
                &cfg,
                "--out",
                o,
            ],
            &[name, expect],
        );
    }
    assert!(!out.exists(), "no model file may be left behind");
    assert_eq!(
        std::fs::read_dir(d.path())
            .unwrap()
            .filter(|e| e
                .as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .contains(".tmp"))
            .count(),
        0
    );
}

#[test]
fn models_of_the_wrong_dimension_or_corrupt_files_are_refused() {
    let m = model_3d().to_str().unwrap();
    fails_with(
        &["eval", "--task", "point_ellipse_2d", "--model", m],
        &["wrong dimension", "point_ellipse_2d"],
    );
    fails_with(
        &["eval", "--task", "reach_velocity_3d", "--model", m],
        &["wrong dimension", "ax"],
    );
    fails_with(
        &[
            "plot",
            "--task",
            "point_ellipse_2d",
            "--model",
            m,
            "--out",
            "/tmp/never.png",
        ],
        &["wrong dimension"],
    );
    fails_with(
        &["query", "--model", m, "0.5", "0.1"],
        &["not a multiple", "3"],
    );
    fails_with(
        &["query", "--model", m, "0.5", "0.1", "NaN"],
        &["not a finite number"],
    );
    fails_with(
        &[
            "eval",
            "--task",
            "reach_obstacle_3d",
            "--model",
            "/no/such/model.json",
        ],
        &["/no/such/model.json"],
    );
    let d = tempfile::tempdir().unwrap();
    let text_of = std::fs::read_to_string(model_3d()).unwrap();
    for (name, content, expect) in [
        ("empty.json", String::new(), "empty"),
        (
            "truncated.json",
            text_of[..text_of.len() / 2].to_string(),
            "truncated.json:1",
        ),
        (
            "version.json",
            text_of.replacen("\"version\":1", "\"version\":7", 1),
            "version 7",
        ),
        (
            "shape.json",
            text_of.replacen("\"sizes\":[3,", "\"sizes\":[2,", 1),
            "network",
        ),
        (
            "format.json",
            text_of.replacen("pucl.constraint_model", "other", 1),
            "not a pucl constraint model",
        ),
        (
            "goal.json",
            text_of.replacen(
                "\"goal\":{\"position\":[0.68,0.0,",
                "\"goal\":{\"position\":[",
                1,
            ),
            "goal.position",
        ),
        (
            "tolerance.json",
            text_of.replacen("\"tolerance\":0.01}", "\"tolerance\":-0.01}", 1),
            "goal.tolerance",
        ),
        (
            "demonstrated.json",
            text_of.replacen(
                "\"demonstrated_states\":[[",
                "\"demonstrated_states\":[[0.5],[",
                1,
            ),
            "demonstrated_states",
        ),
    ] {
        assert_ne!(content, text_of, "{name}: nothing replaced");
        let p = d.path().join(name);
        std::fs::write(&p, content).unwrap();
        fails_with(
            &[
                "query",
                "--model",
                p.to_str().unwrap(),
                "0.5",
                "0.0",
                "0.05",
            ],
            &[name, expect],
        );
    }
}

/// The demonstrated commands in a demonstrations CSV (columns ax, ay, az).
fn commands(csv: &Path) -> Vec<[f64; 3]> {
    let text = std::fs::read_to_string(csv).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let cols: Vec<usize> = ["ax", "ay", "az"]
        .iter()
        .map(|c| header.iter().position(|h| h == c).unwrap())
        .collect();
    lines
        .map(|line| {
            let f: Vec<f64> = line.split(',').map(|v| v.parse().unwrap()).collect();
            [f[cols[0]], f[cols[1]], f[cols[2]]]
        })
        .collect()
}

/// The demonstrated range of each command axis.
fn command_range(commands: &[[f64; 3]]) -> Vec<(f64, f64)> {
    (0..3)
        .map(|k| {
            commands
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), a| {
                    (lo.min(a[k]), hi.max(a[k]))
                })
        })
        .collect()
}

/// Commands between demonstrated ones: 0.8 times the midpoint of the fastest demonstrated commands
/// along two different axes (either sign), so inside the convex hull of the demonstrated commands
/// and zero, and away from each of them.
fn between_commands(commands: &[[f64; 3]]) -> Vec<[f64; 3]> {
    let mut extreme = Vec::new();
    for k in 0..3 {
        let by_k = |a: &&[f64; 3], b: &&[f64; 3]| a[k].total_cmp(&b[k]);
        extreme.push((k, *commands.iter().max_by(by_k).unwrap()));
        extreme.push((k, *commands.iter().min_by(by_k).unwrap()));
    }
    let mut out = Vec::new();
    for (i, (ki, a)) in extreme.iter().enumerate() {
        for (kj, b) in &extreme[i + 1..] {
            if ki != kj {
                out.push([0, 1, 2].map(|k| 0.4 * (a[k] + b[k])));
            }
        }
    }
    out
}

/// 0.8 times the corners of the demonstrated ranges of two axes (the third at zero) that are no
/// faster than the fastest demonstrated command, where no demonstrated command comes within a
/// tenth of the fastest speed: outside the demonstrations, inside every per-axis and norm limit
/// that they obey.
fn corner_commands(commands: &[[f64; 3]]) -> Vec<[f64; 3]> {
    let range = command_range(commands);
    let norm = |a: &[f64; 3]| a.iter().map(|c| c * c).sum::<f64>().sqrt();
    let fastest = commands.iter().map(norm).fold(0.0, f64::max);
    let mut out = Vec::new();
    for (i, j) in [(0, 1), (0, 2), (1, 2)] {
        for ei in [range[i].0, range[i].1] {
            for ej in [range[j].0, range[j].1] {
                let mut c = [0.0; 3];
                c[i] = 0.8 * ei;
                c[j] = 0.8 * ej;
                let away = commands.iter().all(|a| {
                    let d = [a[0] - c[0], a[1] - c[1], a[2] - c[2]];
                    norm(&d) > 0.1 * fastest
                });
                if norm(&c) <= 0.8 * fastest && away {
                    out.push(c);
                }
            }
        }
    }
    out
}

#[test]
fn a_new_velocity_task_learns_the_per_axis_and_norm_limits_its_commands_obey_no_wider_stays_safe_and_reaches_the_goal()
 {
    // Generated tasks nobody tuned for (suite seed 7): the limits are unknown to the learner (00 has
    // per-axis limits on x and z, 01 one on y and a norm limit), and no demonstration command reaches
    // a corner of the action box.
    let d = suite("7", "2");
    for name in ["suite7_velocity_00", "suite7_velocity_01"] {
        let (demos, m, v) = learn_and_eval_suite_task(d, name, "0");
        assert_eq!(v["unsafe_rate"].as_f64().unwrap(), 0.0, "{name}: {v}");
        assert!(v["goal_reached"].as_f64().unwrap() >= 0.95, "{name}: {v}");
        // The learned limits say more than calling every command infeasible.
        let (iou, all) = (
            v["iou"].as_f64().unwrap(),
            v["all_infeasible_iou"].as_f64().unwrap(),
        );
        assert!(iou > all + 0.05, "{name}: {v}");
        // Beyond the demonstrated range of any axis, both ways: infeasible. Stopping and slow
        // commands in every direction: feasible.
        let shown = commands(&demos);
        let range = command_range(&shown);
        let fastest = range.iter().map(|(l, h)| h.max(-l)).fold(0.0, f64::max);
        let mut points = vec![[0.0; 3]];
        for k in 0..3 {
            for s in [-1.0, 1.0] {
                let mut slow = [0.0; 3];
                slow[k] = s * 0.1 * fastest;
                points.push(slow);
            }
        }
        // Between demonstrated commands that ran into different limits (speed limits are convex):
        // feasible. Without the convex prior PUCL labelled some of them infeasible.
        points.extend(between_commands(&shown));
        // Corners of the demonstrated ranges that no demonstration reached, within the fastest
        // demonstrated speed: feasible (per-axis and norm limits; the limit prior).
        // (00's limits are per axis, so it has such corners; 01's norm limit leaves none.)
        let corners = corner_commands(&shown);
        assert!(
            name.ends_with("01") || !corners.is_empty(),
            "{name}: no corner"
        );
        points.extend(corners);
        let feasible_until = points.len();
        for (k, (lo, hi)) in range.iter().enumerate() {
            let mut far = [0.0; 3];
            far[k] = hi.max(0.25 * fastest) + 0.3;
            points.push(far);
            far[k] = lo.min(-0.25 * fastest) - 0.3;
            points.push(far);
        }
        let args: Vec<String> = points.iter().flatten().map(|c| c.to_string()).collect();
        let mut q = vec!["query", "--model", m.to_str().unwrap(), "--json"];
        q.extend(args.iter().map(String::as_str));
        let o = pucl(&q);
        assert!(o.status.success(), "{name}: {}", stderr(&o));
        let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
        let answers = v["feasible"].as_array().unwrap();
        assert_eq!(answers.len(), points.len());
        for (i, (p, a)) in points.iter().zip(answers).enumerate() {
            let zeta = &v["zeta"][i];
            assert_eq!(
                a.as_bool(),
                Some(i < feasible_until),
                "{name}: {p:?}: zeta {zeta}"
            );
        }
    }
}

/// A speed limit in every direction (a norm, no per-axis limit) that the expert rides 0.01 below.
const SPEED_LIMIT_TASK: &str = "
name: speed_limit_3d
description: reach under a speed limit in every direction
state: [x, y, z, vx, vy, vz]
action: [ax, ay, az]
position: [x, y, z]
velocity_state: [vx, vy, vz]
constraint_input: [ax, ay, az]
dynamics:
  dt: 0.02
  velocity_scale: 0.5
  action_limit: {box: [1.0, 1.0, 1.0]}
  bounds: {lower: [-0.5, -0.5, 0.0], upper: [0.5, 0.5, 0.6]}
goal: {position: [0.1, 0.2, 0.3], tolerance: 0.01}
horizon: 200
starts: [[-0.3, -0.3, 0.1], [0.3, -0.3, 0.5], [-0.3, 0.4, 0.5], [0.4, 0.4, 0.1], [0.0, -0.4, 0.3],
         [-0.4, 0.0, 0.2]]
start_jitter: 0.02
reward: {distance: 1.0, distance_at: after_step}
true_constraint:
  - {kind: velocity_limit, max_abs: [null, null, null], max_norm: 0.7}
evaluation:
  grid:
    - {min: -1.0, max: 1.0, count: 30}
    - {min: -1.0, max: 1.0, count: 30}
    - {min: -1.0, max: 1.0, count: 30}
  episodes: 30
expert: {margin: 0.01}
";

/// A task file a user wrote, in a folder of its own, with expert demonstrations from `pucl demos
/// generate --count N` (and `extra` options): the paths of the task, the demonstrations and a model.
struct UserTask {
    _dir: tempfile::TempDir,
    task: String,
    demos: String,
    model: String,
}

fn user_task(yaml: &str, count: &str, extra: &[&str]) -> UserTask {
    let dir = tempfile::tempdir().unwrap();
    let path = |f: &str| dir.path().join(f).to_str().unwrap().to_string();
    let (task, demos, model) = (path("task.yaml"), path("demos.csv"), path("model.json"));
    std::fs::write(&task, yaml).unwrap();
    generate_demos(&task, count, &demos, extra);
    UserTask {
        _dir: dir,
        task,
        demos,
        model,
    }
}

#[test]
fn a_speed_limit_in_every_direction_is_learned_no_faster_than_the_demonstrations_and_kept() {
    let UserTask {
        task, demos, model, ..
    } = &user_task(SPEED_LIMIT_TASK, "15", &[]);
    let (_, e) = learn_and_eval(task, demos, model, "1");
    // Without the sphere of the fastest demonstrated speed in the support prior, the runs from the
    // first start commanded 0.704 along their way (21 % of all steps unsafe).
    assert_eq!(e["unsafe_rate"].as_f64(), Some(0.0), "{e}");
    assert!(e["goal_reached"].as_f64().unwrap() >= 0.95, "{e}");
    assert!(e["iou"].as_f64() > e["all_infeasible_iou"].as_f64(), "{e}");
    // Along the first start's way to the goal, where the demonstrations ran at 0.69: slower is
    // feasible, faster than the limit (0.7) by 0.05 is not.
    let way = [0.4_f64, 0.5, 0.2];
    let n = way.iter().map(|c| c * c).sum::<f64>().sqrt();
    for (speed, feasible) in [(0.6, "true"), (0.75, "false")] {
        let values: Vec<String> = way.iter().map(|c| (speed * c / n).to_string()).collect();
        let mut args = vec!["query", "--model", &model];
        args.extend(values.iter().map(String::as_str));
        let o = pucl(&args);
        assert!(o.status.success(), "{}", stderr(&o));
        assert!(
            stdout(&o).contains(&format!("feasible {feasible}")),
            "{speed}: {}",
            stdout(&o)
        );
    }
}

#[test]
fn episodes_that_start_inside_the_learned_obstacle_leave_it_and_never_cross_the_true_one() {
    // The ellipses task under a new name (derived settings). Its repeated evaluation episodes start
    // up to 5 cm from the demonstrations' starts, some of them inside the learned obstacle between
    // the two ellipses; going straight on from there crossed the lower ellipse (0.4-1.2 % of steps).
    // Learning seed 2 also checks the expansion derived in the plane: with the other way round
    // alone its learned upper ellipse fell short at the top-left corner the demonstrations round
    // closer than d_r, and its policy was 2.1 % unsafe (docs/RESULTS.md, "Expansion derived in the
    // plane").
    let d = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("config/tasks/point_ellipse_2d.yaml"),
    )
    .unwrap();
    let task = d.path().join("my_ellipses.yaml");
    std::fs::write(
        &task,
        text.replace("name: point_ellipse_2d", "name: my_ellipses"),
    )
    .unwrap();
    let task = task.to_str().unwrap();
    for seed in ["0", "1", "2"] {
        let m = d.path().join(format!("m{seed}.json"));
        let m = m.to_str().unwrap();
        let demos = reference("point_ellipse_2d.csv");
        let o = pucl(&[
            "learn", "--task", task, "--demos", &demos, "--seed", seed, "--out", m,
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert!(stderr(&o).contains("settings derived"), "{}", stderr(&o));
        assert!(
            stderr(&o).contains("identify.expansion = true"),
            "{}",
            stderr(&o)
        );
        let v = eval_json(task, m, &[]);
        assert_eq!(v["unsafe_rate"].as_f64().unwrap(), 0.0, "seed {seed}: {v}");
        assert!(
            v["goal_reached"].as_f64().unwrap() >= 0.95,
            "seed {seed}: {v}"
        );
    }
}

#[test]
fn a_robot_facing_a_saturated_learned_boundary_slides_along_it_instead_of_stopping() {
    // A generated 3-D task (suite seed 2) whose obstacles sit a few centimetres from the goal. A few
    // millimetres outside the learned obstacle zeta is exactly 1 and its gradient 0: the robot must
    // slide along the boundary ahead rather than brake to a stop in front of it (before: goal
    // reached in 17 % of the episodes).
    // One step of about 3000 grazes a vertical cylinder 6 cm above where this model learned it (zeta
    // is 1 there): a run that slides on where it used to stop passes a face nobody probed.
    let d = suite("2", "10");
    let name = "suite2_3D_03";
    let (_, _, v) = learn_and_eval_suite_task(d, name, "0");
    assert!(v["unsafe_rate"].as_f64().unwrap() <= 0.001, "{name}: {v}");
    assert!(v["goal_reached"].as_f64().unwrap() >= 0.9, "{name}: {v}");
}

#[test]
fn a_filtered_run_held_back_across_the_vertical_goes_over_or_under_the_learned_obstacle() {
    // A generated 3-D task (suite seed 2): an ellipsoid and a cylinder whose learned regions merge
    // into a band across the way at the goal's height, with a way over and under it that the
    // demonstrations took. Sliding across the vertical only, round the band, held most filtered
    // runs back at its west face (goal reached in 40-80 % of the episodes of learning seeds 0-2).
    suite_task_filtered_runs_reach_the_goal("2", "suite2_3D_04", "2");
}

#[test]
fn filtered_runs_at_the_tip_of_a_thin_learned_obstacle_go_round_it_instead_of_shuttling() {
    // A generated 2-D task (suite seed 8) whose learned region is a thin ellipse pointing at one
    // start, along the way from it to the goal. Runs from that start reached the hull's tip almost
    // on the ray from its reference point, where the saddle escape and the modulation went opposite
    // ways on neighbouring faces: the filter shuttled the robot on the spot, held back (goal reached
    // in 83.3 % of the episodes of learning seeds 1 and 2).
    suite_task_filtered_runs_reach_the_goal("8", "suite8_2D_04", "2");
}

#[test]
fn filtered_runs_beside_a_part_the_hull_missed_follow_one_modulation_and_reach_the_goal() {
    // The ellipses under a new name (derived settings). Runs from the top-right start came to rest
    // near the ray from the hull's reference point to the goal, about half the margin from the
    // learned boundary by zeta's estimate, where the filter alternated between the hull's modulation
    // (over the top) and zeta's level sets (down the right side) and held the robot (learning seeds 1
    // and 7: goal reached in 93.3 % of the filtered episodes). Whether the hull models the boundary
    // there flipped from step to step; with hysteresis on that decision every run gets past.
    let d = tempfile::tempdir().unwrap();
    let task = renamed(d.path(), "point_ellipse_2d", "my_ellipses");
    let task = task.to_str().unwrap();
    for seed in ["1", "7"] {
        let m = d.path().join(format!("m{seed}.json"));
        let m = m.to_str().unwrap();
        learn_and_eval(task, &reference("point_ellipse_2d.csv"), m, seed);
        let v = eval_json(task, m, &["--filter", "--seed", seed]);
        assert_filtered_runs_reach_the_goal(&v, &format!("seed {seed}"));
    }
}

#[test]
fn filtered_runs_that_took_zetas_level_sets_stay_on_them_round_the_obstacle_instead_of_turning_back()
 {
    // The ellipses under a new name, learning seed 2: runs from the top-right start stopped where
    // the goal's direction points at the learned ellipse's middle. There the level sets slid them
    // down the right side, and the hull's modulation, once they were clear of the part it missed,
    // slid them back over the top, slowly: a step or two one way, then back, for the whole episode
    // (goal reached in 93.3 % of the filtered episodes). A robot that took the level sets keeps
    // them while the hull holds it back and their slide runs no more than across the command.
    let d = tempfile::tempdir().unwrap();
    let task = renamed(d.path(), "point_ellipse_2d", "my_ellipses");
    let task = task.to_str().unwrap();
    let m = d.path().join("m2.json");
    let m = m.to_str().unwrap();
    learn_and_eval(task, &reference("point_ellipse_2d.csv"), m, "2");
    let v = eval_json(task, m, &["--filter", "--seed", "2"]);
    assert_filtered_runs_reach_the_goal(&v, "learning seed 2");
}

#[test]
fn filtered_runs_beside_the_tip_of_a_thin_diagonal_learned_region_are_not_held_between_two_hulls() {
    // A generated 2-D task (suite seed 10), learning seed 2: a long, thin learned region runs
    // diagonally from the obstacle to a start. On the model's grid its cells touch only at corners
    // near the tip, and labelled by shared faces the tip was an obstacle of its own; beside it the
    // two hulls took turns as the nearest and pushed the robot opposite ways (goal reached in 70 %
    // of the filtered episodes, 9 runs held back at the tip). Cells touching at a corner are one
    // obstacle.
    suite_task_filtered_runs_reach_the_goal("10", "suite10_2D_02", "2");
}

#[test]
fn filtered_runs_beside_a_learned_wall_standing_on_the_floor_go_over_it_not_under_into_the_corner()
{
    // A generated 3-D task (suite seed 9), learning seed 1: the largest learned region runs
    // through the grid along x, so the filter's hulls turn to that axis. Their rays from the
    // region's deepest cell pointed down too, and runs south of it were slid under it, into the
    // corner of the region and the floor, where 17 of 30 were held (goal reached 43 %). From a
    // reference point on the floor the region stands on, the way round is over it.
    let d = suite("9", "10");
    let name = "suite9_3D_06";
    let v = learn_and_filter_suite_task(d, name, "1");
    assert!(v["goal_reached"].as_f64().unwrap() >= 0.95, "{name}: {v}");
    assert!(v["held_back"].as_f64().unwrap() <= 0.05, "{name}: {v}");
}

#[test]
fn filtered_runs_the_hull_turns_back_once_held_follow_zetas_level_sets_round_the_obstacles() {
    // A generated 3-D task (suite seed 3), learning seed 0: inside the star-shaped hull of the
    // learned obstacles, where it covers free space zeta calls feasible, the hull's modulation
    // turned the command back at full speed. Only a braked command fell back on zeta's level sets,
    // so 9 of 30 runs stayed in front of the obstacles, held back (goal reached 70 %). Once held
    // back, a command the hull turns back follows the level sets, which slide round.
    suite_task_filtered_runs_reach_the_goal("3", "suite3_3D_09", "0");
}

#[test]
fn filtered_runs_keep_off_a_side_the_demonstrations_passed_under_not_beside() {
    // A generated 3-D task (suite seed 14), learning seed 1: the demonstrations pass under a learned
    // obstacle a few centimetres below its side face, which had counted as passing that side. The
    // side was not widened, and the filter slid runs round it, inside the true obstacle (3.38 % of
    // the steps unsafe). Only a demonstrated state level with a face passes beside it.
    suite_task_filtered_runs_reach_the_goal("14", "suite14_3D_01", "1");
}

#[test]
fn filtered_runs_slide_round_the_side_of_a_learned_obstacle_the_demonstrations_passed() {
    // A generated 3-D task (suite seed 8): a box 2 cm from the workspace's south edge, merged with a
    // cylinder; every demonstration goes over or under the box, none round its south side. The
    // learned box ends short of the true one there, and the filter slid runs from the southern
    // starts round that side, inside the true box (3.8 % of the steps, 10 of 30 episodes).
    let d = suite("8", "10");
    let name = "suite8_3D_02";
    let v = learn_and_filter_suite_task(d, name, "0");
    assert!(v["unsafe_rate"].as_f64().unwrap() <= 0.002, "{name}: {v}");
    assert!(v["goal_reached"].as_f64().unwrap() >= 0.95, "{name}: {v}");
}

#[test]
fn filtered_runs_reach_a_goal_within_the_margin_of_a_learned_obstacle_and_those_short_of_it_are_listed()
 {
    // A generated 3-D task (suite seed 9) whose learned obstacle comes within the filter's margin
    // of the goal: keeping the whole margin up to the goal, every filtered run of learning seed 0
    // stopped 1.05 cm from it (tolerance 1 cm), held back.
    let d = suite("9", "10");
    let name = "suite9_3D_06";
    let (_, m, _) = learn_and_eval_suite_task(d, name, "0");
    let task = d.join(format!("{name}.yaml"));
    let (task, m) = (task.to_str().unwrap(), m.to_str().unwrap());
    let args = [
        "eval",
        "--task",
        task,
        "--model",
        m,
        "--filter",
        "--seed",
        "0",
        "--episodes",
        "30",
        "--json",
        "--show-short",
    ];
    let o = pucl(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let goal = v["goal_reached"].as_f64().unwrap();
    assert!(goal >= 0.9, "{name}: {v}");
    assert!(v["unsafe_rate"].as_f64().unwrap() <= 0.001, "{name}: {v}");
    // --show-short lists every episode that ended short of the goal, and whether the filter held
    // it back there, as the JSON counts them.
    let said = stderr(&o);
    let short: Vec<&str> = said
        .lines()
        .filter(|l| l.contains("ended short of the goal at"))
        .collect();
    assert_eq!(
        short.len(),
        ((1.0 - goal) * 30.0).round() as usize,
        "{said}"
    );
    let held = short
        .iter()
        .filter(|l| l.ends_with("held back by the filter"));
    let held_back = v["held_back"].as_f64().unwrap();
    assert_eq!(held.count(), (held_back * 30.0).round() as usize, "{said}");
}

#[test]
fn a_low_wall_across_the_workspace_is_passed_over_through_the_filter_not_round_its_far_ends() {
    // The cylinder task with a wall 6 cm high across the whole workspace instead, as a user writes
    // it (derived settings): the demonstrations all go over it. Round the vertical the filter slid
    // the runs along the wall to its ends, where no proposal labelled anything and the learned wall
    // is lower than the true one, and over it there: 25 of 30 episodes grazed it (4.6 % of steps).
    let d = tempfile::tempdir().unwrap();
    let wall = "  - {kind: box, center: [0.55, 0.0, 0.03], half_extents: [0.02, 0.2, 0.03]}";
    let task = cylinder_task_with(d.path(), "low_wall", wall);
    let (task, demos, m) = (
        task.to_str().unwrap(),
        d.path().join("wall.csv").to_str().unwrap().to_string(),
        d.path().join("wall.json").to_str().unwrap().to_string(),
    );
    generate_demos(task, "12", &demos, &[]);
    let (_, dsm) = learn_and_eval(task, &demos, &m, "0");
    assert!(dsm["goal_reached"].as_f64().unwrap() >= 0.95, "{dsm}");
    let v = eval_json(task, &m, &["--filter"]);
    assert_eq!(v["unsafe_rate"].as_f64(), Some(0.0), "{v}");
    assert!(v["goal_reached"].as_f64().unwrap() >= 0.95, "{v}");
}

#[test]
fn learning_stops_once_r_only_repeats_the_memory_buffer_and_says_so() {
    // A generated velocity task (suite seed 2) whose later proposals graze the corners M already
    // holds: before the stop rule counted only new states of R, every one of the 10 iterations ran
    // and the model came out no better.
    let d = suite("2", "10");
    let name = "suite2_velocity_03";
    let path = |ext: &str| d.join(format!("{name}.{ext}"));
    let (task, demos) = (path("yaml"), path("csv"));
    let (task, demos) = (task.to_str().unwrap(), demos.to_str().unwrap());
    // The model file's summary: how many iterations ran and why the loop stopped.
    let summary = |model: &Path| -> (u64, String) {
        let m: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(model).unwrap()).unwrap();
        let s = &m["summary"];
        (
            s["iterations"].as_u64().unwrap(),
            s["stop_reason"].to_string(),
        )
    };
    let model = path("json");
    let (said, v) = learn_and_eval(task, demos, model.to_str().unwrap(), "0");
    assert!(said.contains("(0 new)"), "{said}");
    let (ran, why) = summary(&model);
    assert!(
        why.contains("R stopped growing: its") && why.contains("new_infeasible_min_distance"),
        "{why}"
    );
    assert!(ran < 10, "{ran} iterations");
    assert!(v["unsafe_rate"].as_f64().unwrap() == 0.0, "{v}");
    assert!(v["goal_reached"].as_f64().unwrap() >= 0.95, "{v}");
    // Every state of R counted as new: the loop runs on, to an IoU no better.
    let every = d.join(format!("{name}.every.yaml"));
    std::fs::write(&every, "new_infeasible_min_distance: 0\n").unwrap();
    let m = d.join(format!("{name}.every.json"));
    let o = pucl(&[
        "learn",
        "--task",
        task,
        "--demos",
        demos,
        "--config",
        every.to_str().unwrap(),
        "--out",
        m.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v_every = eval_json(task, m.to_str().unwrap(), &[]);
    let (ran_every, why_every) = summary(&m);
    assert!(ran_every > ran, "{ran_every} iterations: {why_every}");
    let iou = |v: &serde_json::Value| v["iou"].as_f64().unwrap();
    assert!(iou(&v) >= iou(&v_every) - 0.03, "{v} against {v_every}");
}

/// A base crossing a shop floor past a pillar and a rotated pallet rack, written as a user would
/// (docs/RESULTS.md, "The margin in demonstrated corridors").
const SHOP_FLOOR: &str = "name: shop_floor
state: [x, y]
action: [vx, vy]
position: [x, y]
constraint_input: [x, y]
dynamics: {dt: 0.1, velocity_scale: 1.0, action_limit: {norm: 0.8}, bounds: {lower: [0.0, 0.0], upper: [6.0, 4.0]}}
goal: {position: [5.5, 2.0], tolerance: 0.1}
horizon: 200
starts: [[0.5, 0.6], [0.5, 1.5], [0.5, 2.5], [0.5, 3.4], [1.0, 2.0]]
start_jitter: 0.1
reward: {progress: 1.0, path_length: 1.0, goal_bonus: 0.1}
true_constraint:
  - {kind: cylinder, center: [2.2, 1.4], radius: 0.35}
  - {kind: box, center: [3.8, 2.4], half_extents: [0.3, 0.9], rotation_deg: [20.0]}
evaluation: {grid: [{min: 0.0, max: 6.0, count: 60}, {min: 0.0, max: 4.0, count: 40}], episodes: 30}
expert: {margin: 0.15}
";

/// A user's plane in centimetres: a box turned 30 degrees between five starts and the goal; the
/// demonstrations pass its corners 2 cm off.
const TURNED_BOX_CM: &str = "name: turned_box_cm
state: [x, y]
action: [ax, ay]
units: {x: cm, y: cm, ax: cm/s, ay: cm/s}
position: [x, y]
constraint_input: [x, y]
dynamics: {dt: 0.05, velocity_scale: 20.0, action_limit: {norm: 1.0}, bounds: {lower: [0, 0], upper: [100, 100]}}
goal: {position: [85, 50], tolerance: 1.5}
horizon: 300
starts: [[10, 20], [10, 50], [10, 80], [20, 35], [20, 65]]
start_jitter: 2.0
reward: {progress: 1.0, path_length: 1.0, goal_bonus: 0.1}
true_constraint:
  - {kind: box, center: [45, 40], half_extents: [6, 15], rotation_deg: 30}
evaluation: {grid: [{min: 0, max: 100, count: 60}, {min: 0, max: 100, count: 60}], episodes: 30}
expert: {margin: 2.0}
";

#[test]
fn demonstrations_nothing_shaped_learn_nothing_and_say_why_without_writing_a_model() {
    // The obstacle lies off every straight way from the starts to the goal: the expert goes
    // straight, and no proposal can beat a demonstration by cutting a corner.
    let task = SHOP_FLOOR.replace(
        "  - {kind: box, center: [3.8, 2.4], half_extents: [0.3, 0.9], rotation_deg: [20.0]}\n",
        "",
    );
    let task = task.replace(
        "{kind: cylinder, center: [2.2, 1.4], radius: 0.35}",
        "{kind: cylinder, center: [3.0, 0.35], radius: 0.2}",
    );
    let UserTask {
        task: t,
        demos,
        model: m,
        ..
    } = &user_task(&task, "10", &[]);
    let o = pucl(&["learn", "--task", t, "--demos", demos, "--out", m]);
    let e = stderr(&o);
    assert!(!o.status.success() && !e.contains("panicked"), "{e}");
    // The derived settings come first (d_r from no proposal that left them), the error last.
    assert!(e.contains("no proposal left the demonstrations"), "{e}");
    let last = e.lines().last().unwrap_or_default();
    for piece in [
        "error: nothing learned",
        "try a smaller identify.d_r",
        "nothing shaped them",
    ] {
        assert!(last.contains(piece), "expected '{piece}' in: {e}");
    }
    assert!(!Path::new(m).exists(), "a model file was written");
}

/// A micro-manipulator's task in metres, its lengths and speeds times `k`: a tip crossing a 6 cm
/// workspace past a bead of 8 mm radius (at `k` = 1).
fn micro_bead(k: f64) -> String {
    let l = |v: f64| v * k;
    format!(
        "name: micro_bead
state: [x, y, z]
action: [vx, vy, vz]
position: [x, y, z]
constraint_input: [x, y, z]
dynamics: {{dt: 0.01, velocity_scale: {}, action_limit: {{box: [1.0, 1.0, 1.0]}}, bounds: {{lower: [0, 0, 0], upper: [{}, {}, {}]}}}}
goal: {{position: [{}, {}, {}], tolerance: {}}}
horizon: 600
starts: [[{a}, {b}, {a}], [{a}, {c}, {a}], [{a}, {d}, {a}], [{a}, {c}, {b}]]
start_jitter: {}
reward: {{progress: 1.0, path_length: 1.0, goal_bonus: {}}}
true_constraint:
  - {{kind: ellipsoid, center: [{c}, {c}, {}], semi_axes: [{e}, {e}, {e}]}}
evaluation: {{grid: [{{min: 0, max: {}, count: 30}}, {{min: 0, max: {}, count: 30}}, {{min: 0, max: {}, count: 15}}], episodes: 30}}
expert: {{margin: {}}}
",
        l(0.02),
        l(0.06),
        l(0.06),
        l(0.03),
        l(0.05),
        l(0.03),
        l(0.01),
        l(0.001),
        l(0.001),
        l(0.001),
        l(0.012),
        l(0.06),
        l(0.06),
        l(0.03),
        l(0.001),
        a = l(0.01),
        b = l(0.02),
        c = l(0.03),
        d = l(0.04),
        e = l(0.008),
    )
}

#[test]
fn a_workspace_of_a_few_centimetres_learns_what_the_same_task_ten_times_larger_learns() {
    // The reference's nominal DS slows to 0.05 action units within 2.5 cm of the goal, a size that
    // suits its 20 cm workspace. In this 6 cm one it crawled (80 s to the goal) from before the bead
    // on: the proposals never got round it, recall was 0.65 and the DSM policy 48 % unsafe with no
    // goal reached, where the same task ten times larger was safe. The derived DS slows no
    // farther out than 2.5 goal tolerances (here 2.5 mm) instead.
    let small = user_task(&micro_bead(1.0), "12", &[]);
    let large = user_task(&micro_bead(10.0), "12", &[]);
    let (_, vs) = learn_and_eval(&small.task, &small.demos, &small.model, "0");
    let (_, vl) = learn_and_eval(&large.task, &large.demos, &large.model, "0");
    for v in [&vs, &vl] {
        assert_eq!(v["unsafe_rate"].as_f64(), Some(0.0), "{v}");
        assert_eq!(v["goal_reached"].as_f64(), Some(1.0), "{v}");
    }
    let iou = |v: &serde_json::Value| v["iou"].as_f64().unwrap();
    assert!((iou(&vs) - iou(&vl)).abs() < 0.01, "{vs} against {vl}");
    let steps = |v: &serde_json::Value| v["steps"].as_f64().unwrap();
    assert!(
        (steps(&vs) / steps(&vl) - 1.0).abs() < 0.01,
        "{vs} against {vl}"
    );
}

#[test]
fn filtered_runs_of_an_arm_slower_than_the_default_controller_are_driven_no_faster_than_it_goes() {
    // The arm goes 2 cm/s per axis. Commanded at 0.25 m/s (the default before), the filtered
    // command was limited axis by axis and bent into the bead: 30 of 30 runs entered it (8.4 % of
    // the steps).
    let t = user_task(&micro_bead(1.0), "12", &[]);
    learn_and_eval(&t.task, &t.demos, &t.model, "0");
    let v = eval_json(&t.task, &t.model, &["--filter"]);
    assert_eq!(v["unsafe_rate"].as_f64(), Some(0.0), "{v}");
    assert!(v["goal_reached"].as_f64().unwrap() >= 0.9, "{v}");
    // A faster controller, asked for, is warned about.
    let args = [
        "eval", "--task", &t.task, "--model", &t.model, "--filter", "--speed", "0.25",
    ];
    let o = pucl(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("faster than the arm"), "{}", stderr(&o));
    // The same controller with the node's max_linear_speed at the arm's limit: scaled as a whole,
    // not bent, and nothing to warn of.
    let limited = [&args[..], &["--max-linear-speed", "0.02", "--json"]].concat();
    let o = pucl(&limited);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        !stderr(&o).contains("faster than the arm"),
        "{}",
        stderr(&o)
    );
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["unsafe_rate"].as_f64(), Some(0.0), "{v}");
    let o = pucl(&[&args[..], &["--max-linear-speed=-1"]].concat());
    assert!(
        !o.status.success() && stderr(&o).contains("--max-linear-speed"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn runs_let_into_the_margin_beside_a_demonstration_climb_back_out_before_a_corner_of_the_box() {
    // Beside the demonstrations that pass the box's left corner the margin is lowered; runs came in
    // there and slid on along the box's top face at that depth, where the learned face lies 1.5 cm
    // inside the true one: learning seeds 0-4 were 0.47, 1.07, 0.04, 2.25 and 0.47 % unsafe (up to
    // 17 of 30 episodes), with the goal reached in every episode.
    let UserTask {
        task, demos, model, ..
    } = &user_task(TURNED_BOX_CM, "16", &["--seed", "1"]);
    for seed in ["1", "3"] {
        let (_, v) = learn_and_eval(task, demos, model, seed);
        assert_eq!(v["unsafe_rate"].as_f64(), Some(0.0), "seed {seed}: {v}");
        assert_eq!(v["goal_reached"].as_f64(), Some(1.0), "seed {seed}: {v}");
    }
}

#[test]
fn runs_pass_the_corridor_the_demonstrations_used_where_the_margin_would_close_it() {
    // The demonstrations pass between the pillar and the rack; each learned obstacle reaches about
    // d_r/2 from them, and the derived margin (d_r/2) closes that corridor from both sides: with
    // `margin_clear_of_demonstrations: false` and learning seed 1 the DSM policy stalls in front of
    // it (7 of 30 episodes missed the goal before evaluation had the guide; with it, a third of the
    // runs stall and are guided round, and 8 of 30 still miss). Both models are learned without the
    // expansion step the plane's settings derive since: with it the stalled runs were all guided
    // round (goal reached 100 %, 40 % guided), and the goal rate no longer shows the closed corridor.
    let d = tempfile::tempdir().unwrap();
    let file = |name: &str| d.path().join(name).to_str().unwrap().to_string();
    let (task, demos, m, user, no_expansion) = (
        file("shop_floor.yaml"),
        file("shop.csv"),
        file("shop.json"),
        file("user.yaml"),
        file("no_expansion.yaml"),
    );
    std::fs::write(&task, SHOP_FLOOR).unwrap();
    generate_demos(&task, "15", &demos, &[]);
    std::fs::write(&no_expansion, "identify: {expansion: false}\n").unwrap();
    std::fs::write(
        &user,
        "margin_clear_of_demonstrations: false\nidentify: {expansion: false}\n",
    )
    .unwrap();
    let learn = |config: &[&str]| {
        let args = [
            &[
                "learn", "--task", &task, "--demos", &demos, "--seed", "1", "--out", &m,
            ][..],
            config,
        ]
        .concat();
        let o = pucl(&args);
        assert!(o.status.success(), "{}", stderr(&o));
        let e = pucl(&[
            "eval", "--task", &task, "--model", &m, "--seed", "1", "--json",
        ]);
        assert!(e.status.success(), "{}", stderr(&e));
        let v: serde_json::Value = serde_json::from_str(&stdout(&e)).unwrap();
        let model: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&m).unwrap()).unwrap();
        (stderr(&o), v, model)
    };
    let (_, before, plain) = learn(&["--config", &user]);
    assert!(
        plain["dsm"].get("demonstrated_clearance").is_none(),
        "{plain}"
    );
    assert!(before["goal_reached"].as_f64().unwrap() < 1.0, "{before}");
    let (log, after, model) = learn(&["--config", &no_expansion]);
    assert!(log.contains("margin_clear_of_demonstrations: "), "{log}");
    assert_eq!(after["unsafe_rate"].as_f64(), Some(0.0), "{after}");
    assert!(after["goal_reached"].as_f64().unwrap() >= 0.95, "{after}");
    // Without it runs stall in front of the closed corridor and are guided round (or stop); with
    // it none needs the guide. (The mean return is no measure of it: a run that stops short ends
    // its distance cost early.)
    assert!(
        after["guided"].as_f64() == Some(0.0) && before["guided"].as_f64().unwrap() > 0.0,
        "the corridor stays open: {before} {after}"
    );
    // The same learned constraint; the safety filter's margin is the same too.
    assert_eq!(after["iou"], before["iou"]);
    assert_eq!(model["dsm"]["safety_margin"], plain["dsm"]["safety_margin"]);
    let margin = model["dsm"]["safety_margin"].as_f64().unwrap();
    let clearance = model["dsm"]["demonstrated_clearance"]["clearance"]
        .as_array()
        .unwrap();
    assert!(!clearance.is_empty());
    assert!(
        clearance
            .iter()
            .all(|c| (0.0..2.0 * margin).contains(&c.as_f64().unwrap())),
        "{clearance:?}"
    );
}

#[test]
fn a_goal_that_training_made_infeasible_joins_the_demonstrations_and_is_reached() {
    // A generated 3-D task (suite seed 3) whose goal lies 1.5 cm from a box face. Rollouts that run
    // straight at the goal through the box were labelled infeasible right up to it, and zeta covered
    // the goal (about 1e-5): no episode reached it. The goal is feasible by definition, so it joins D.
    // With the derived proposals along the demonstrations, learning seed 1's second iteration
    // covered the goal again (one goal state among 3047 infeasible ones): it joins again after any
    // iteration whose training covered it, or no episode reaches it.
    let d = suite("3", "10");
    let name = "suite3_3D_01";
    let path = |ext: &str| d.join(format!("{name}.{ext}"));
    for seed in ["0", "1"] {
        let m = d.join(format!("{name}.{seed}.json"));
        let (log, v) = learn_and_eval(
            path("yaml").to_str().unwrap(),
            path("csv").to_str().unwrap(),
            m.to_str().unwrap(),
            seed,
        );
        assert!(log.contains("the goal joined"), "{name} seed {seed}: {log}");
        assert_eq!(v["unsafe_rate"].as_f64().unwrap(), 0.0, "{name}: {v}");
        assert!(v["goal_reached"].as_f64().unwrap() >= 0.9, "{name}: {v}");
        let o = pucl(&[
            "query",
            "--model",
            m.to_str().unwrap(),
            "--json",
            "0.68",
            "0",
            "0.04",
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        let q: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
        assert_eq!(q["feasible"][0].as_bool(), Some(true), "{name}: {q}");
    }
}

#[test]
fn the_bend_prior_leaves_the_open_space_between_demonstration_corridors_feasible() {
    // A generated 2-D task whose demonstrations pass its obstacles in corridors: without the prior,
    // the straight proposals' states between the corridors are far from every demonstration and the
    // learned obstacle fills the space between them (precision about 0.1); with it, only the states
    // on the inside of a turn of the demonstration a proposal beat are reliable infeasible.
    let d = suite("3", "10");
    let name = "suite3_2D_04";
    let path = |ext: &str| d.join(format!("{name}.{ext}"));
    let bend = d.join(format!("{name}.bend.yaml"));
    std::fs::write(&bend, "bend_prior: true\n").unwrap();
    let (task, demos) = (path("yaml"), path("csv"));
    let m = d.join(format!("{name}.model.json"));
    let eval = |config: &[&str]| {
        let mut args = vec![
            "learn",
            "--task",
            task.to_str().unwrap(),
            "--demos",
            demos.to_str().unwrap(),
            "--out",
            m.to_str().unwrap(),
        ];
        args.extend(config);
        let o = pucl(&args);
        assert!(o.status.success(), "{}", stderr(&o));
        let said = stderr(&o);
        let t = task.to_str().unwrap();
        let o = pucl(&[
            "eval",
            "--task",
            t,
            "--model",
            m.to_str().unwrap(),
            "--json",
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        (
            serde_json::from_str::<serde_json::Value>(&stdout(&o)).unwrap(),
            said,
        )
    };
    let ((plain, plain_said), (bent, bent_said)) =
        (eval(&[]), eval(&["--config", bend.to_str().unwrap()]));
    // The learner says how much of the demonstrations turns when the prior is on, and only then.
    assert!(
        bent_said.contains("of the demonstrated points lie on a turn"),
        "{bent_said}"
    );
    assert!(!plain_said.contains("bend_prior"), "{plain_said}");
    let f = |v: &serde_json::Value, k: &str| v[k].as_f64().unwrap();
    assert!(
        f(&bent, "precision") > f(&plain, "precision") + 0.3,
        "{plain}\n{bent}"
    );
    assert!(f(&bent, "recall") >= 0.95, "{bent}");
    assert_eq!(f(&bent, "unsafe_rate"), 0.0, "{bent}");
    assert!(f(&bent, "goal_reached") >= 0.95, "{bent}");
}

#[test]
fn eval_with_the_filter_drives_to_the_goal_through_the_deployed_safety_filter() {
    let m = model_3d().to_str().unwrap();
    let run = |extra: &[&str]| {
        let mut args = vec![
            "eval",
            "--task",
            "reach_obstacle_3d",
            "--model",
            m,
            "--json",
        ];
        args.extend_from_slice(extra);
        let o = pucl(&args);
        assert!(o.status.success(), "{}", stderr(&o));
        serde_json::from_str::<serde_json::Value>(&stdout(&o)).unwrap()
    };
    let (dsm, filtered) = (run(&[]), run(&["--filter"]));
    assert_eq!(filtered["unsafe_rate"].as_f64(), Some(0.0), "{filtered}");
    assert!(
        filtered["goal_reached"].as_f64().unwrap() >= 0.95,
        "{filtered}"
    );
    // The same model and grid, other episodes: a P-controller at 0.25 m/s, not the DSM policy.
    assert_eq!(filtered["iou"], dsm["iou"]);
    assert_ne!(filtered["mean_return"], dsm["mean_return"]);
    // Around zeta's level sets instead of the hulls: the cylinder is convex, so that gets there too.
    let level_sets = run(&["--filter", "--no-hulls"]);
    assert!(
        level_sets["goal_reached"].as_f64().unwrap() >= 0.95,
        "{level_sets}"
    );
    assert_eq!(
        level_sets["unsafe_rate"].as_f64(),
        Some(0.0),
        "{level_sets}"
    );
    assert_ne!(level_sets["mean_return"], filtered["mean_return"]);
    // A slower controller gets there too.
    let slow = run(&["--filter", "--speed", "0.1"]);
    assert!(slow["goal_reached"].as_f64().unwrap() >= 0.95, "{slow}");
    assert_ne!(slow["mean_return"], filtered["mean_return"]);
    for (extra, expected) in [
        (&["--speed=-1"][..], &["speed"][..]),
        (&["--policy", "p.json"], &["--policy", "--filter"]),
    ] {
        let mut args = vec![
            "eval",
            "--task",
            "reach_obstacle_3d",
            "--model",
            m,
            "--filter",
        ];
        args.extend_from_slice(extra);
        fails_with(&args, expected);
    }
}

/// `reach_obstacle_3d` (its file, the one place its geometry is written) in millimetres under
/// another name: every length and speed times 1000, and the goal bonus too (the reward is a length).
fn in_millimetres(metres: &str) -> String {
    use serde_yaml_ng::Value;
    fn times_1000(v: &mut Value) {
        match v {
            Value::Number(n) => *v = Value::from(n.as_f64().unwrap() * 1000.0),
            Value::Sequence(s) => s.iter_mut().for_each(times_1000),
            Value::Mapping(m) => m.values_mut().for_each(times_1000),
            _ => panic!("not a length: {v:?}"),
        }
    }
    let mut t: Value = serde_yaml_ng::from_str(metres).unwrap();
    t["name"] = "mm_obstacle_3d".into();
    for path in [
        &["dynamics", "velocity_scale"][..],
        &["dynamics", "bounds"],
        &["goal"],
        &["starts"],
        &["start_jitter"],
        &["reward", "goal_bonus"],
        &["expert", "margin"],
    ] {
        times_1000(path.iter().fold(&mut t, |v, key| &mut v[*key]));
    }
    for c in t["true_constraint"].as_sequence_mut().unwrap() {
        times_1000(&mut c["center"]);
        times_1000(&mut c["radius"]);
    }
    for axis in t["evaluation"]["grid"].as_sequence_mut().unwrap() {
        times_1000(&mut axis["min"]);
        times_1000(&mut axis["max"]);
    }
    for (_, unit) in t["units"].as_mapping_mut().unwrap().iter_mut() {
        *unit = match unit.as_str().unwrap().split_once(' ') {
            None => "mm".to_string(),
            Some((per, "m/s")) => format!("{} mm/s", per.parse::<f64>().unwrap() * 1000.0),
            Some(other) => panic!("unit {other:?}"),
        }
        .into();
    }
    serde_yaml_ng::to_string(&t).unwrap()
}

#[test]
fn a_task_in_millimetres_learns_what_it_does_in_metres_and_the_filter_drives_it_at_the_same_speed()
{
    let d = tempfile::tempdir().unwrap();
    let metres = std::fs::read_to_string("config/tasks/reach_obstacle_3d.yaml")
        .unwrap()
        .replace("name: reach_obstacle_3d", "name: m_obstacle_3d");
    let millimetres = in_millimetres(&metres);
    let mut results = Vec::new();
    for (name, yaml) in [("m", metres.as_str()), ("mm", millimetres.as_str())] {
        let file = |ext: &str| d.path().join(format!("{name}.{ext}"));
        let (task, demos, model) = (file("yaml"), file("csv"), file("json"));
        std::fs::write(&task, yaml).unwrap();
        let (task, demos, model) = (
            task.to_str().unwrap().to_string(),
            demos.to_str().unwrap().to_string(),
            model.to_str().unwrap().to_string(),
        );
        generate_demos(&task, "12", &demos, &[]);
        // Derived settings: no file in config/learn/ has either name.
        let (_, dsm) = learn_and_eval(&task, &demos, &model, "1");
        let o = pucl(&[
            "eval", "--task", &task, "--model", &model, "--filter", "--json",
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        let filtered: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
        results.push((dsm, filtered));
    }
    let [(m, m_filtered), (mm, mm_filtered)] = &results[..] else {
        unreachable!()
    };
    for key in ["iou", "recall", "unsafe_rate", "goal_reached"] {
        let (a, b) = (m[key].as_f64().unwrap(), mm[key].as_f64().unwrap());
        assert!((a - b).abs() < 0.01, "{key}: metres {m}, millimetres {mm}");
    }
    // The DSM policy reads its nominal DS in metres: as fast to the goal in either unit (it once
    // took half as many steps in mm, never slowing down near the goal).
    let (a, b) = (m["steps"].as_f64().unwrap(), mm["steps"].as_f64().unwrap());
    assert!(
        (a - b).abs() <= 0.01 * a,
        "steps: metres {m}, millimetres {mm}"
    );
    // The default nominal speed is 0.25 m/s in the task's unit: 250 mm/s, not 0.25.
    for f in [m_filtered, mm_filtered] {
        assert!(f["goal_reached"].as_f64().unwrap() >= 0.95, "{f}");
        assert_eq!(f["unsafe_rate"].as_f64(), Some(0.0), "{f}");
    }
    let (a, b) = (
        m_filtered["mean_return"].as_f64().unwrap(),
        mm_filtered["mean_return"].as_f64().unwrap() / 1000.0,
    );
    assert!(
        (a - b).abs() < 0.01 * a.abs().max(0.01),
        "{m_filtered} {mm_filtered}"
    );
    // A unit it cannot convert: the filter's default speed is refused, a given one is used.
    let inches = d.path().join("in.yaml");
    std::fs::write(&inches, millimetres.replace("x: mm", "x: in")).unwrap();
    let (inches, model) = (
        inches.to_str().unwrap(),
        d.path().join("mm.json").to_str().unwrap().to_string(),
    );
    let args = ["eval", "--task", inches, "--model", &model, "--filter"];
    fails_with(&args, &["'in'", "--speed"]);
    let o = pucl(&[&args[..], &["--speed", "250"]].concat());
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn eval_with_the_filter_warns_when_the_goal_lies_within_the_margin_of_the_learned_obstacle_and_counts_the_runs_held_back()
 {
    let m = model_3d().to_str().unwrap();
    let d = tempfile::tempdir().unwrap();
    let builtin = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/tasks/reach_obstacle_3d.yaml");
    let original = std::fs::read_to_string(builtin).unwrap();
    let line = "goal: {position: [0.68, 0.0, 0.04], tolerance: 0.01}";
    assert!(original.contains(line));
    // The same task with its goal 1 cm beside the true cylinder, within the model's 2 cm margin.
    let beside = d.path().join("reach_obstacle_3d.yaml");
    std::fs::write(
        &beside,
        original.replace(
            line,
            "goal: {position: [0.55, 0.05, 0.04], tolerance: 0.01}",
        ),
    )
    .unwrap();
    let eval = |task: &str| {
        let o = pucl(&["eval", "--task", task, "--model", m, "--filter", "--json"]);
        assert!(o.status.success(), "{}", stderr(&o));
        let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
        let held_back = v["held_back"].as_f64().unwrap();
        let within = v["started_within_margin"].as_f64().unwrap();
        (
            stderr(&o),
            v["goal_reached"].as_f64().unwrap(),
            held_back,
            within,
        )
    };
    let (warned, reached, held_back, within) = eval(beside.to_str().unwrap());
    assert!(
        warned.contains("no run through the safety filter that starts outside its margin"),
        "{warned}"
    );
    // The warning is right: only runs that start within the margin, which the filter lets move
    // but does not keep out, may reach the goal.
    assert!(reached <= within, "{reached} > {within}: {warned}");
    assert!(within < 0.5, "most runs start outside the margin: {within}");
    // Every other run ends pressed towards the goal against the margin, and the filter says so, as
    // a deployment's controller would read on /diagnostics.
    assert!((held_back + reached - 1.0).abs() < 1e-9, "{held_back}");
    let (quiet, reached, held_back, _) = eval("reach_obstacle_3d");
    assert!(!quiet.contains("starts outside its margin"), "{quiet}");
    assert!(reached >= 0.95);
    assert!(
        held_back <= 1.0 - reached,
        "only runs short of the goal count"
    );
}

#[test]
fn the_filter_reaches_a_goal_beside_a_large_learned_region_whose_hull_would_cover_it() {
    // The cylinder task with a box that blocks every way round on +y instead, as a user writes it
    // (derived settings): the demonstrations all pass on -y, the learned region fills the +y half
    // and its boundary runs 3-4 mm from the goal. The star-shaped hull of that region, widened
    // across its rays, covered the goal, and no filtered run reached it.
    let d = tempfile::tempdir().unwrap();
    let shelf = "  - {kind: box, center: [0.55, 0.02, 0.05], half_extents: [0.03, 0.05, 0.06]}";
    let task = cylinder_task_with(d.path(), "shelf_reach", shelf);
    let (task, demos, m) = (
        task.to_str().unwrap(),
        d.path().join("shelf.csv").to_str().unwrap().to_string(),
        d.path().join("shelf.json"),
    );
    generate_demos(task, "14", &demos, &[]);
    let (_, dsm) = learn_and_eval(task, &demos, m.to_str().unwrap(), "0");
    assert!(dsm["goal_reached"].as_f64().unwrap() >= 0.95, "{dsm}");
    let filtered = |model: &Path| {
        let args = ["eval", "--task", task, "--model", model.to_str().unwrap()];
        let o = pucl(&[&args[..], &["--filter", "--json"]].concat());
        assert!(o.status.success(), "{}", stderr(&o));
        let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
        (stderr(&o), v)
    };
    let (said, v) = filtered(&m);
    assert!(v["goal_reached"].as_f64().unwrap() >= 0.9, "{v} {said}");
    assert_eq!(v["unsafe_rate"].as_f64(), Some(0.0), "{v}");
    assert!(!said.contains("starts outside its margin"), "{said}");
    // The model file records the goal the hull leaves open; without it (a model file from before),
    // the hull covers the goal again and the filter says so.
    let mut without: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&m).unwrap()).unwrap();
    assert_eq!(
        without["goal"],
        serde_json::json!({"position": [0.68, 0.0, 0.04], "tolerance": 0.01})
    );
    without.as_object_mut().unwrap().remove("goal");
    let old = d.path().join("without_goal.json");
    std::fs::write(&old, without.to_string()).unwrap();
    let (said, v) = filtered(&old);
    assert!(said.contains("starts outside its margin"), "{said}");
    assert_eq!(v["goal_reached"].as_f64(), Some(0.0), "{v}");
}

#[test]
fn a_users_copy_of_the_ellipses_probes_the_side_its_demonstrations_passed_and_the_filter_keeps_out()
{
    // The ellipses under a new name (derived settings), 24 generated demonstrations: those from the
    // top start pass the upper ellipse's left side, the proposals from it went round the right, and
    // the upper-left third was never labelled (recall 0.84; a filtered controller heading for the
    // goal crossed it in 13 % of its steps). In the plane the settings derive the other way round.
    let d = tempfile::tempdir().unwrap();
    let task = renamed(d.path(), "point_ellipse_2d", "my_ellipses");
    let (task, demos) = (task.to_str().unwrap(), d.path().join("demos.csv"));
    let demos = demos.to_str().unwrap();
    generate_demos(task, "24", demos, &["--jitter", "0.02", "--seed", "0"]);
    let m = d.path().join("m.json");
    let (said, v) = learn_and_eval(task, demos, m.to_str().unwrap(), "2");
    assert!(said.contains("both_ways = true"), "{said}");
    assert!(v["recall"].as_f64().unwrap() >= 0.95, "{v}");
    assert_eq!(v["unsafe_rate"].as_f64(), Some(0.0), "{v}");
    // Through the filter at most issue #12's 0.5 %: 0 % before the expansion step was derived in the
    // plane, 0.11 % with it (one run of 30 grazes the upper ellipse's top), 13 % with neither it nor
    // the other way round.
    let v = eval_json(task, m.to_str().unwrap(), &["--filter"]);
    assert!(v["unsafe_rate"].as_f64().unwrap() <= 0.005, "{v}");
    assert!(v["goal_reached"].as_f64().unwrap() >= 0.95, "{v}");
}

#[test]
fn eval_with_the_filter_drives_a_planar_task_in_its_plane_safely_to_the_goal() {
    // The ellipses' positions are the pose's x and y: the filter modulates the twist in that plane.
    let d = tempfile::tempdir().unwrap();
    let m = d.path().join("ellipses.json");
    let m = m.to_str().unwrap();
    learn_and_eval(
        "point_ellipse_2d",
        &reference("point_ellipse_2d.csv"),
        m,
        "0",
    );
    let v = eval_json("point_ellipse_2d", m, &["--filter"]);
    assert_eq!(v["unsafe_rate"].as_f64(), Some(0.0), "{v}");
    assert!(v["goal_reached"].as_f64().unwrap() >= 0.95, "{v}");
    assert!(v["held_back"].as_f64().is_some(), "{v}");
}

#[test]
fn evaluation_runs_get_round_the_wall_the_four_cups_learned_obstacles_merge_into() {
    // The four cups under a new name (derived settings): the learned cups merge into a wall concave
    // towards the starts, and the modulated flow ends in front of it. Without the evaluation's guide
    // learning seed 0 reached the goal in 13 of 30 episodes (14 stopped); with it, in every one.
    let d = tempfile::tempdir().unwrap();
    let task = renamed(d.path(), "reach_four_cups_3d", "my_cups");
    let m = d.path().join("my_cups.json");
    let (_, v) = learn_and_eval(
        task.to_str().unwrap(),
        &reference("reach_four_cups_3d_ds.csv"),
        m.to_str().unwrap(),
        "0",
    );
    assert!(v["goal_reached"].as_f64().unwrap() >= 0.95, "{v}");
    assert_eq!(v["stopped"].as_f64(), Some(0.0), "{v}");
    // And `pucl eval` says how many of them the guide took round.
    assert!(v["guided"].as_f64().unwrap() >= 0.3, "{v}");
    // Not bought by driving through the cups: a few steps graze the end cup's outer side, which no
    // proposal probed (0.30 % here).
    assert!(v["unsafe_rate"].as_f64().unwrap() < 0.01, "{v}");
}

#[test]
fn learning_from_a_recording_stopped_short_of_the_goal_warns_and_names_it() {
    // The cylinder's reference demonstrations with the third cut after 20 steps, as a recording that
    // stopped early: the learner still learns, but says which demonstration ends where.
    let d = tempfile::tempdir().unwrap();
    let full = std::fs::read_to_string(reference("reach_obstacle_3d_ds.csv")).unwrap();
    let kept: Vec<&str> = full
        .lines()
        .filter(|l| {
            let mut f = l.split(',');
            match (f.next(), f.next().and_then(|s| s.parse::<usize>().ok())) {
                (Some("2"), Some(step)) => step < 20,
                _ => true,
            }
        })
        .collect();
    let cut = d.path().join("cut.csv");
    std::fs::write(&cut, kept.join("\n") + "\n").unwrap();
    let learn = |demos: &str| {
        let m = d.path().join("m.json");
        let args = ["learn", "--task", "reach_obstacle_3d", "--demos", demos];
        let o = pucl(&[&args[..], &["--out", m.to_str().unwrap()]].concat());
        assert!(o.status.success(), "{}", stderr(&o));
        stderr(&o)
    };
    let said = learn(cut.to_str().unwrap());
    assert!(
        said.contains("warning: 1 of 12 demonstrations end short of the goal: #2 ends 0."),
        "{said}"
    );
    assert!(
        !learn(&reference("reach_obstacle_3d_ds.csv")).contains("short of the goal"),
        "the complete demonstrations warned"
    );
}
