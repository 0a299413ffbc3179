//! For the `ros` feature: the PyPI ROS 2 wheels' librcl depends on libraries that need libpython,
//! so link it, and bake the venv's library paths as an rpath so the nodes run without environment.
//! For the `mujoco` feature: bake the folder of libmujoco.so as an rpath and the folder of the model
//! files as a default, both from scripts/setup_mujoco.sh's env.sh, so `pucl` runs without it.
use std::process::Command;

fn main() {
    mujoco();
    ros();
}

fn mujoco() {
    println!("cargo:rerun-if-env-changed=MUJOCO_DYNAMIC_LINK_DIR");
    println!("cargo:rerun-if-env-changed=PUCL_MUJOCO_MODELS");
    if std::env::var_os("CARGO_FEATURE_MUJOCO").is_none() {
        return;
    }
    if let Ok(dir) = std::env::var("MUJOCO_DYNAMIC_LINK_DIR") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    }
    let models = std::env::var("PUCL_MUJOCO_MODELS").unwrap_or_default();
    println!("cargo:rustc-env=PUCL_MUJOCO_MODELS_AT_BUILD={models}");
}

fn ros() {
    println!("cargo:rerun-if-env-changed=R2R_PYTHON");
    println!("cargo:rerun-if-env-changed=AMENT_PREFIX_PATH");
    if std::env::var_os("CARGO_FEATURE_ROS").is_none() {
        return;
    }
    let Ok(py) = std::env::var("R2R_PYTHON") else {
        // A normal ROS 2 install (sourced setup.bash): nothing to add.
        return;
    };
    let out = Command::new(&py)
        .args(["-c", "import sysconfig as s; print(s.get_config_var('LIBDIR')); print(s.get_config_var('LDVERSION'))"])
        .output()
        .unwrap_or_else(|e| panic!("running {py}: {e}"));
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let mut lines = text.lines();
    let (libdir, ver) = (
        lines.next().unwrap_or_default().to_string(),
        lines.next().unwrap_or_default().to_string(),
    );
    println!("cargo:rustc-link-arg=-Wl,--no-as-needed");
    println!("cargo:rustc-link-arg=-L{libdir}");
    println!("cargo:rustc-link-arg=-lpython{ver}");
    println!("cargo:rustc-link-arg=-Wl,--as-needed");
    // DT_RPATH (not RUNPATH) is inherited by dependencies, so the wheels' ros_*.libs are found too.
    let mut rpath = vec![libdir];
    for prefix in std::env::var("AMENT_PREFIX_PATH")
        .unwrap_or_default()
        .split(':')
        .filter(|p| !p.is_empty())
    {
        rpath.push(format!("{prefix}/lib"));
        for entry in std::fs::read_dir(format!("{prefix}/lib"))
            .into_iter()
            .flatten()
            .flatten()
        {
            for lib in std::fs::read_dir(entry.path().join("site-packages"))
                .into_iter()
                .flatten()
                .flatten()
            {
                let name = lib.file_name().to_string_lossy().to_string();
                if name.starts_with("ros_") && name.ends_with(".libs") {
                    rpath.push(lib.path().to_string_lossy().to_string());
                }
            }
        }
    }
    println!("cargo:rustc-link-arg=-Wl,--disable-new-dtags");
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", rpath.join(":"));
}
