//! End-to-end tests of the `pucl` command line, run as a user would run it.
mod common;
use common::{fails_with, pucl, reference, stderr, stdout};
use std::path::Path;

/// Runs `pucl demos check --json` and returns the report.
fn check(file: &Path, task: &str) -> serde_json::Value {
    let o = pucl(&[
        "demos",
        "check",
        file.to_str().unwrap(),
        "--task",
        task,
        "--json",
    ]);
    assert!(o.status.success(), "check failed: {}", stderr(&o));
    serde_json::from_str(&stdout(&o)).expect("one JSON object")
}

#[test]
fn reference_demonstrations_load_with_their_tasks() {
    for (file, task, demos, steps) in [
        ("point_ellipse_2d.csv", "point_ellipse_2d", 4, 140),
        ("reach_obstacle_3d_ds.csv", "reach_obstacle_3d", 12, 2334),
        ("reach_obstacle_3d_rl.csv", "reach_obstacle_3d", 10, 305),
        ("reach_velocity_3d.csv", "reach_velocity_3d", 29, 1062),
        ("reach_four_cups_3d_ds.csv", "reach_four_cups_3d", 19, 3947),
    ] {
        let r = check(Path::new(&reference(file)), task);
        assert_eq!(
            (r["demos"].as_u64().unwrap(), r["steps"].as_u64().unwrap()),
            (demos, steps),
            "{file}"
        );
        assert_eq!(r["reached_goal"].as_u64().unwrap(), demos, "{file}");
    }
    // The one reference row that exceeds a limit (ax = 1.0000093 > 1) is reported, not hidden.
    let r = check(
        Path::new(&reference("reach_velocity_3d.csv")),
        "reach_velocity_3d",
    );
    assert_eq!(r["violating_steps"], 1);
}

fn generate_and_verify(task: &str, count: usize, dir: &Path, ext: &str) {
    let out = dir.join(format!("{}.{ext}", task.replace('/', "_")));
    let o = pucl(&[
        "demos",
        "generate",
        "--task",
        task,
        "--count",
        &count.to_string(),
        "--seed",
        "3",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{task}: {}", stderr(&o));
    let r = check(&out, task);
    assert_eq!(r["demos"].as_u64().unwrap() as usize, count, "{task}");
    assert_eq!(
        r["reached_goal"].as_u64().unwrap() as usize,
        count,
        "{task}: every demonstration reaches the goal"
    );
    assert_eq!(
        r["violating_steps"], 0,
        "{task}: every generated state is truly feasible"
    );
}

#[test]
fn generated_demonstrations_of_every_builtin_task_are_feasible_and_reach_the_goal() {
    let d = tempfile::tempdir().unwrap();
    for task in [
        "point_ellipse_2d",
        "reach_obstacle_3d",
        "reach_velocity_3d",
        "reach_four_cups_3d",
    ] {
        // More demonstrations than starts, so the jittered second pass is exercised too.
        generate_and_verify(task, 2 * pucl_starts(task) + 3, d.path(), "csv");
    }
    generate_and_verify("reach_obstacle_3d", 5, d.path(), "json");
}

fn pucl_starts(task: &str) -> usize {
    pucl::Task::load(task).unwrap().spec.starts.len()
}

const THREE_OBSTACLES: &str = r#"
name: three_obstacles_3d
description: A tilted ellipsoid, a short cylinder and a rotated box between the starts and the goal.
state: [x, y, z]
action: [vx, vy, vz]
units: {x: m, y: m, z: m, vx: m/s, vy: m/s, vz: m/s}
position: [x, y, z]
constraint_input: [x, y, z]
dynamics:
  dt: 0.05
  velocity_scale: 1.0
  action_limit: {norm: 0.5}
  bounds: {lower: [0.0, -0.5, 0.0], upper: [1.5, 0.5, 0.6]}
goal: {position: [1.3, 0.0, 0.1], tolerance: 0.02}
horizon: 300
starts: [[0.1, 0.0, 0.1], [0.1, 0.3, 0.3], [0.1, -0.3, 0.2], [0.2, 0.1, 0.5]]
start_jitter: 0.03
reward: {progress: 1.0, path_length: 1.0, goal_bonus: 0.1}
true_constraint:
  - {kind: ellipsoid, center: [0.4, 0.0, 0.15], semi_axes: [0.08, 0.2, 0.12], rotation_deg: [0.0, 20.0, 30.0]}
  - {kind: cylinder, center: [0.75, 0.05], radius: 0.1, z_range: [0.0, 0.35]}
  - {kind: box, center: [1.05, -0.05, 0.15], half_extents: [0.05, 0.2, 0.15], rotation_deg: [0.0, 0.0, 25.0]}
evaluation:
  grid:
    - {min: 0.2, max: 1.2, count: 30}
    - {min: -0.4, max: 0.4, count: 30}
    - {min: 0.0, max: 0.5, count: 20}
expert:
  margin: 0.02
"#;

#[test]
fn generated_demonstrations_avoid_three_obstacles_of_different_shapes_in_a_user_task_file() {
    let d = tempfile::tempdir().unwrap();
    let task = d.path().join("three.yaml");
    std::fs::write(&task, THREE_OBSTACLES).unwrap();
    let t = pucl::Task::load(task.to_str().unwrap()).unwrap();
    // The straight line from the first start to the goal crosses the obstacles: the expert must detour.
    let crossing = (0..=100).any(|i| {
        let s = i as f64 / 100.0;
        t.truly_infeasible(&[0.1 + s * 1.2, 0.0, 0.1])
    });
    assert!(crossing);
    generate_and_verify(task.to_str().unwrap(), 10, d.path(), "csv");
    let png = d.path().join("three.png");
    let o = pucl(&[
        "plot-task",
        "--task",
        task.to_str().unwrap(),
        "--demos",
        d.path()
            .join(format!("{}.csv", task.to_str().unwrap().replace('/', "_")))
            .to_str()
            .unwrap(),
        "--out",
        png.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(&std::fs::read(&png).unwrap()[1..4], b"PNG");
}

#[test]
fn plot_task_writes_a_png_for_every_builtin_task() {
    let d = tempfile::tempdir().unwrap();
    for (task, demos) in [
        ("point_ellipse_2d", Some("point_ellipse_2d.csv")),
        ("reach_obstacle_3d", Some("reach_obstacle_3d_ds.csv")),
        ("reach_velocity_3d", Some("reach_velocity_3d.csv")),
        ("reach_four_cups_3d", None),
    ] {
        let out = d.path().join(format!("{task}.png"));
        let mut args = vec!["plot-task", "--task", task, "--out", out.to_str().unwrap()];
        let demo_path = demos.map(reference);
        if let Some(p) = &demo_path {
            args.extend(["--demos", p]);
        }
        let o = pucl(&args);
        assert!(o.status.success(), "{task}: {}", stderr(&o));
        let png = std::fs::read(&out).unwrap();
        assert!(png.len() > 10_000 && &png[1..4] == b"PNG", "{task}");
    }
}

fn bad_file(dir: &Path, name: &str, content: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, content).unwrap();
    p.to_str().unwrap().to_string()
}

#[test]
fn bad_demonstration_files_give_clear_errors_and_never_panic() {
    let d = tempfile::tempdir().unwrap();
    let t = "point_ellipse_2d";
    let empty = bad_file(d.path(), "empty.csv", "");
    fails_with(
        &["demos", "check", &empty, "--task", t],
        &["empty.csv", "empty"],
    );
    let header = bad_file(
        d.path(),
        "header.csv",
        "demo,step,x,why,ax,ay\n0,0,1,1,1,1\n",
    );
    fails_with(
        &["demos", "check", &header, "--task", t],
        &["header.csv:1", "'why'", "'y'"],
    );
    let nan = bad_file(
        d.path(),
        "nan.csv",
        "demo,step,x,y,ax,ay\n0,0,1,1,1,1\n0,1,1,nan,1,1\n",
    );
    fails_with(
        &["demos", "check", &nan, "--task", t],
        &["nan.csv:3", "field 'y'", "finite"],
    );
    let gap = bad_file(
        d.path(),
        "gap.csv",
        "demo,step,x,y,ax,ay\n0,0,1,1,1,1\n0,1,1,1,1,1\n0,3,1,1,1,1\n",
    );
    fails_with(
        &["demos", "check", &gap, "--task", t],
        &["gap.csv:4", "step 3 follows step 1"],
    );
    // A 3-D file given to the 2-D task.
    fails_with(
        &[
            "demos",
            "check",
            &reference("reach_obstacle_3d_ds.csv"),
            "--task",
            t,
        ],
        &[
            "reach_obstacle_3d_ds.csv:1",
            "wrong dimension",
            "expects 2 state",
        ],
    );
    let json = bad_file(
        d.path(),
        "bad.json",
        "{\"format\": \"pucl.demonstrations\", \"version\": 1,",
    );
    fails_with(&["demos", "check", &json, "--task", t], &["bad.json:1"]);
    fails_with(
        &["demos", "check", "/no/such/file.csv", "--task", t],
        &["/no/such/file.csv"],
    );
    // A demonstrations file given to plot-task goes through the same validation.
    let png = d.path().join("x.png");
    fails_with(
        &[
            "plot-task",
            "--task",
            t,
            "--demos",
            &nan,
            "--out",
            png.to_str().unwrap(),
        ],
        &["nan.csv:3"],
    );
    assert!(!png.exists(), "no picture from bad input");
}

#[test]
fn an_output_in_a_missing_folder_is_refused_before_any_work_and_an_io_error_is_said_once() {
    let d = tempfile::tempdir().unwrap();
    let missing = d.path().join("no/such/folder/model.json");
    let missing = missing.to_str().unwrap();
    let demos = reference("reach_obstacle_3d_ds.csv");
    let t = "reach_obstacle_3d";
    for args in [
        &["learn", "--task", t, "--demos", &demos, "--out", missing][..],
        &["demos", "generate", "--task", t, "--out", missing],
    ] {
        fails_with(args, &[missing, "does not exist"]);
        // Refused before any work: no learning iteration, no demonstration generated.
        let e = stderr(&pucl(args));
        assert!(
            !e.contains("iteration") && !e.contains("demonstration"),
            "{e}"
        );
    }
    let folder = d.path().to_str().unwrap();
    fails_with(
        &["learn", "--task", t, "--demos", &demos, "--out", folder],
        &["is a folder"],
    );
    let o = pucl(&[
        "learn",
        "--task",
        t,
        "--demos",
        "/no/such/demos.csv",
        "--out",
        "m.json",
    ]);
    let e = stderr(&o);
    assert_eq!(e.matches("No such file").count(), 1, "{e}");
}

#[test]
fn bad_task_files_give_clear_errors_and_never_panic() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("o.csv");
    let unknown = bad_file(
        d.path(),
        "unknown.yaml",
        &THREE_OBSTACLES.replace("horizon: 300", "horizon: 300\nhorizon_s: 3"),
    );
    fails_with(
        &[
            "demos",
            "generate",
            "--task",
            &unknown,
            "--out",
            out.to_str().unwrap(),
        ],
        &["unknown.yaml", "horizon_s"],
    );
    let dims = bad_file(
        d.path(),
        "dims.yaml",
        &THREE_OBSTACLES.replace(
            "goal: {position: [1.3, 0.0, 0.1]",
            "goal: {position: [1.3, 0.0]",
        ),
    );
    fails_with(
        &[
            "demos",
            "generate",
            "--task",
            &dims,
            "--out",
            out.to_str().unwrap(),
        ],
        &["goal.position", "needs 3 values"],
    );
    let inside = bad_file(
        d.path(),
        "inside.yaml",
        &THREE_OBSTACLES.replace("[0.1, 0.0, 0.1], [0.1, 0.3", "[0.4, 0.0, 0.15], [0.1, 0.3"),
    );
    fails_with(
        &[
            "demos",
            "generate",
            "--task",
            &inside,
            "--count",
            "1",
            "--out",
            out.to_str().unwrap(),
        ],
        &["demonstration 0", "start"],
    );
    fails_with(
        &[
            "demos",
            "generate",
            "--task",
            "no_such_task",
            "--out",
            out.to_str().unwrap(),
        ],
        &["no_such_task", "reach_obstacle_3d"],
    );
    fails_with(
        &[
            "demos",
            "generate",
            "--task",
            "reach_obstacle_3d",
            "--margin",
            "NaN",
            "--out",
            out.to_str().unwrap(),
        ],
        &["--margin"],
    );
    assert!(!out.exists(), "nothing written on error");
}

/// The cylinder task's reference demonstrations: each one's positions, and the one its last action
/// reached (at the goal; 0.48 m/s per action unit, 60 Hz).
fn cylinder_paths() -> Vec<Vec<[f64; 3]>> {
    let text = std::fs::read_to_string(reference("reach_obstacle_3d_ds.csv")).unwrap();
    let mut demos: Vec<Vec<[f64; 3]>> = Vec::new();
    let mut last = [0.0; 3];
    for line in text.lines().skip(1) {
        let v: Vec<f64> = line.split(',').map(|f| f.parse().unwrap()).collect();
        let (d, step) = (v[0] as usize, v[1] as usize);
        if step == 0 {
            if let Some(prev) = demos.last_mut() {
                prev.push(last);
            }
            demos.push(Vec::new());
        }
        demos[d].push([v[2], v[3], v[4]]);
        last = [0, 1, 2].map(|c| v[2 + c] + v[5 + c] * 0.48 / 60.0);
    }
    demos.last_mut().unwrap().push(last);
    demos
}

/// A path recorded at the task's 60 Hz as a robot's driver would publish it: at about 100 Hz,
/// unevenly, by linear interpolation, ending where the arm stopped; times from 0.
fn at_a_robots_rate(path: &[[f64; 3]]) -> Vec<(f64, [f64; 3])> {
    let dt = 1.0 / 60.0;
    let end = (path.len() - 1) as f64 * dt;
    let (mut t, mut k, mut out) = (0.0, 0usize, Vec::new());
    while t <= end + 1e-12 {
        let s = t / dt;
        let i = (s.floor() as usize).min(path.len() - 2);
        let w = s - i as f64;
        out.push((
            t,
            [0, 1, 2].map(|c| path[i][c] + w * (path[i + 1][c] - path[i][c])),
        ));
        k += 1;
        t += if k % 2 == 0 { 0.012 } else { 0.008 };
    }
    if out.last().is_some_and(|(t, _)| *t < end - 1e-9) {
        out.push((end, path[path.len() - 1]));
    }
    out
}

/// `out` holds `count` demonstrations, and row k of each of the first `paths.len()` is the state at
/// k dt of its path, to the interpolation's error at the path's corners (under a millimetre); the
/// last state of a path is where the recording ends, no row of its own (one row fewer).
fn assert_resampled_from(out: &Path, paths: &[Vec<[f64; 3]>], count: usize) {
    let r = check(out, "reach_obstacle_3d");
    assert_eq!(r["demos"].as_u64().unwrap() as usize, count, "{r}");
    let rows = std::fs::read_to_string(out).unwrap();
    let mut got: Vec<Vec<[f64; 3]>> = vec![Vec::new(); count];
    for line in rows.lines().skip(1) {
        let v: Vec<f64> = line.split(',').map(|f| f.parse().unwrap()).collect();
        got[v[0] as usize].push([v[2], v[3], v[4]]);
    }
    for (d, (g, want)) in got.iter().zip(paths).enumerate() {
        assert!(
            g.len().abs_diff(want.len()) <= 1,
            "demo {d}: {} rows, {}",
            g.len(),
            want.len()
        );
        for (k, (a, b)) in g.iter().zip(want).enumerate() {
            let e = (0..3).map(|c| (a[c] - b[c]).powi(2)).sum::<f64>().sqrt();
            assert!(e < 1e-3, "demo {d} row {k}: {a:?} vs {b:?}");
        }
    }
}

#[test]
fn a_log_of_timed_positions_at_a_robots_own_rate_resamples_to_the_demonstrations_it_came_from() {
    // Written with a column the task does not know; resampled at the task's 60 Hz.
    let demos = cylinder_paths();
    let mut log = String::from("demo,t,x,y,z,gripper\n");
    for (d, path) in demos.iter().enumerate() {
        for (t, p) in at_a_robots_rate(path) {
            log.push_str(&format!("{d},{t:.9},{},{},{},0\n", p[0], p[1], p[2]));
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let (input, out) = (dir.path().join("log.csv"), dir.path().join("demos.csv"));
    std::fs::write(&input, log).unwrap();
    let o = pucl(&[
        "demos",
        "resample",
        input.to_str().unwrap(),
        "--task",
        "reach_obstacle_3d",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_resampled_from(&out, &demos, demos.len());
    fails_with(
        &[
            "demos",
            "resample",
            out.to_str().unwrap(),
            "--task",
            "reach_obstacle_3d",
            "--out",
            "x.csv",
        ],
        &["demos.csv:1", "no `t` column"],
    );
}

/// A geometry_msgs/PoseStamped in CDR (little endian), as rclcpp serializes it.
fn pose_stamped_cdr(t: f64, frame: &str, p: [f64; 3]) -> Vec<u8> {
    let mut b = vec![0, 1, 0, 0];
    b.extend_from_slice(&(t.floor() as i32).to_le_bytes());
    b.extend_from_slice(&(((t - t.floor()) * 1e9).round() as u32).to_le_bytes());
    b.extend_from_slice(&(frame.len() as u32 + 1).to_le_bytes());
    b.extend_from_slice(frame.as_bytes());
    b.push(0);
    while (b.len() - 4) % 8 != 0 {
        b.push(0);
    }
    for v in p.into_iter().chain([0.0, 0.0, 0.0, 1.0]) {
        b.extend_from_slice(&v.to_le_bytes());
    }
    b
}

#[test]
fn a_bag_of_one_long_recording_imports_as_the_demonstrations_it_came_from() {
    // The cylinder's reference demonstrations as a robot's bag would hold them: one recording, the
    // pose at about 100 Hz with zstd-compressed chunks (rosbag2's MCAP default), the arm resting
    // 0.3 s at the goal, then put back at the next start (a jump) and resting there 0.3 s; the
    // recording paused for 2 s once; a joint-state topic beside; at the end the arm driven slowly
    // up from the goal.
    let demos = cylinder_paths();
    let mut stream: Vec<(f64, [f64; 3])> = Vec::new();
    let mut t0 = 1_765_000_000.0;
    for (d, path) in demos.iter().enumerate() {
        for k in 0..30 {
            stream.push((t0 + k as f64 * 0.01, path[0]));
        }
        // The resampling grid starts at a piece's first pose: 0.3 s (18 periods) later the motion
        // starts on it, so that rows compare one to one with the reference's.
        t0 += 0.3;
        let run = at_a_robots_rate(path);
        let end = run.last().unwrap().0;
        stream.extend(run.into_iter().map(|(t, p)| (t0 + t, p)));
        t0 += end;
        for k in 1..=30 {
            stream.push((t0 + k as f64 * 0.01, *path.last().unwrap()));
        }
        t0 += if d == 5 { 2.3 } else { 0.31 };
    }
    let goal = *demos[0].last().unwrap();
    for k in 1..=200 {
        stream.push((
            t0 + k as f64 * 0.01,
            [goal[0], goal[1], goal[2] + 0.001 * k as f64],
        ));
    }
    let dir = tempfile::tempdir().unwrap();
    let write_bag = |path: &Path, stream: &[(f64, [f64; 3])]| {
        let mut w = mcap::WriteOptions::new()
            .profile("ros2")
            .compression(Some(mcap::Compression::Zstd))
            .create(std::io::BufWriter::new(
                std::fs::File::create(path).unwrap(),
            ))
            .unwrap();
        let pose = w
            .add_schema(
                "geometry_msgs/msg/PoseStamped",
                "ros2msg",
                b"std_msgs/Header header\nPose pose\n",
            )
            .unwrap();
        let joints = w
            .add_schema(
                "sensor_msgs/msg/JointState",
                "ros2msg",
                b"std_msgs/Header header\nstring[] name\n",
            )
            .unwrap();
        let pose = w
            .add_channel(pose, "/tool_pose", "cdr", &Default::default())
            .unwrap();
        let joints = w
            .add_channel(joints, "/joint_states", "cdr", &Default::default())
            .unwrap();
        for (i, (t, p)) in stream.iter().enumerate() {
            let ns = (t * 1e9) as u64 + 2_000_000;
            for (channel, data) in [
                (pose, pose_stamped_cdr(*t, "base_link", *p)),
                (joints, vec![0, 1, 0, 0, 7, 7, 7, 7]),
            ] {
                let header = mcap::records::MessageHeader {
                    channel_id: channel,
                    sequence: i as u32,
                    log_time: ns,
                    publish_time: ns,
                };
                w.write_to_known_channel(&header, &data).unwrap();
            }
        }
        w.finish().unwrap();
    };
    let bag = dir.path().join("session.mcap");
    write_bag(&bag, &stream);
    let out = dir.path().join("demos.csv");
    let import = |input: &Path, extra: &[&str]| {
        let mut args = vec![
            "demos",
            "import",
            input.to_str().unwrap(),
            "--task",
            "reach_obstacle_3d",
            "--out",
            out.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let o = pucl(&args);
        assert!(o.status.success(), "{extra:?}: {}", stderr(&o));
        stdout(&o)
    };
    // As demo_recorder's auto_segment cuts them: from first motion to the goal, and the way up
    // (it ends idle) dropped by --reaching-goal-only.
    let said = import(&bag, &["--auto-segment", "--reaching-goal-only"]);
    assert!(
        said.contains("of 13: those ending at the goal") && said.contains("goal reached 12/12"),
        "{said}"
    );
    assert_resampled_from(&out, &demos, 12);
    // Cut only where the pose jumps or stops coming: each piece that moves is one demonstration
    // (the last piece holds the last run and the way up).
    let said = import(&bag, &["--topic", "tool_pose"]);
    assert!(
        said.contains("12 demonstrations") && said.contains("goal reached 11/12"),
        "{said}"
    );
    assert_resampled_from(&out, &demos[..11], 12);
    // The same recording as `ros2 bag record` splits it: a folder of two files (the split in the
    // middle of a demonstration) listed by its metadata.yaml.
    let folder = dir.path().join("rosbag2_2026_12_07-10_00_00");
    std::fs::create_dir(&folder).unwrap();
    let half = stream.len() / 2;
    write_bag(&folder.join("part_0.mcap"), &stream[..half]);
    write_bag(&folder.join("part_1.mcap"), &stream[half..]);
    std::fs::write(
        folder.join("metadata.yaml"),
        "rosbag2_bagfile_information:\n  version: 9\n  storage_identifier: mcap\n  \
         relative_file_paths:\n    - part_0.mcap\n    - part_1.mcap\n",
    )
    .unwrap();
    let said = import(&folder, &["--auto-segment", "--reaching-goal-only"]);
    assert!(said.contains("goal reached 12/12"), "{said}");
    assert_resampled_from(&out, &demos, 12);
    // What is wrong is named.
    fails_with(
        &[
            "demos",
            "import",
            bag.to_str().unwrap(),
            "--task",
            "reach_obstacle_3d",
            "--topic",
            "/ee_pose",
            "--out",
            "x.csv",
        ],
        &[
            "session.mcap",
            "/ee_pose",
            "/tool_pose (geometry_msgs/msg/PoseStamped)",
        ],
    );
    fails_with(
        &[
            "demos",
            "import",
            out.to_str().unwrap(),
            "--task",
            "reach_obstacle_3d",
            "--out",
            "x.csv",
        ],
        &["demos.csv", "not a readable MCAP bag"],
    );
    fails_with(
        &[
            "demos",
            "import",
            bag.to_str().unwrap(),
            "--task",
            "no_such_task",
            "--out",
            "x.csv",
        ],
        &["no_such_task"],
    );
    assert!(!Path::new("x.csv").exists(), "nothing written on error");
}

#[test]
fn every_command_has_help() {
    for args in [
        vec!["--help"],
        vec!["tasks", "--help"],
        vec!["demos", "--help"],
        vec!["demos", "generate", "--help"],
        vec!["demos", "check", "--help"],
        vec!["demos", "resample", "--help"],
        vec!["demos", "import", "--help"],
        vec!["plot-task", "--help"],
    ] {
        let o = pucl(&args);
        assert!(
            o.status.success() && stdout(&o).contains("Usage:"),
            "{args:?}"
        );
    }
    let o = pucl(&["tasks"]);
    for name in [
        "point_ellipse_2d",
        "reach_obstacle_3d",
        "reach_velocity_3d",
        "reach_four_cups_3d",
    ] {
        assert!(stdout(&o).contains(name));
    }
}

#[test]
fn builtin_task_files_in_config_are_the_embedded_ones() {
    for (name, yaml) in pucl::task::BUILTIN {
        let file = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("config/tasks")
            .join(format!("{name}.yaml"));
        assert_eq!(std::fs::read_to_string(&file).unwrap(), *yaml, "{name}");
        if !pucl::task::builtin_available(yaml) {
            continue;
        }
        // A task name and the path of its file are interchangeable.
        let a = pucl::Task::load(name).unwrap();
        let b = pucl::Task::load(file.to_str().unwrap()).unwrap();
        assert_eq!(a.spec, b.spec);
    }
}
