//! MuJoCo dynamics behind the simulator's step (cargo feature `mujoco`): the state is the model's
//! qpos then qvel, the action its controls, one task step is `frame_skip` physics steps (as
//! Gymnasium's MuJoCo environments step). The library is the `mujoco` wheel's libmujoco and the model
//! files are Gymnasium's, both installed by scripts/setup_mujoco.sh; nothing of them is in the
//! repository. Without the feature a MuJoCo task file is a clear error and everything else works.
use crate::task::spec::MujocoSpec;
use std::path::{Path, PathBuf};

/// The environment variable that names the folder of model files.
pub const MODELS_ENV: &str = "PUCL_MUJOCO_MODELS";

/// A loaded model, shared by every simulator of the task.
#[derive(Clone)]
pub struct Model {
    pub path: PathBuf,
    pub frame_skip: usize,
    pub nq: usize,
    pub nv: usize,
    pub nu: usize,
    /// The physics time step, seconds.
    pub timestep: f64,
    /// Per control: [low, high] when the model limits it.
    pub ctrl_range: Vec<Option<[f64; 2]>>,
    #[cfg(feature = "mujoco")]
    inner: std::sync::Arc<mujoco_rs::prelude::MjModel>,
    #[cfg(not(feature = "mujoco"))]
    never: std::convert::Infallible,
}

impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "MuJoCo model {} (nq {}, nv {}, nu {}, frame_skip {})",
            self.path.display(),
            self.nq,
            self.nv,
            self.nu,
            self.frame_skip
        )
    }
}

/// Where a model file name is looked up: `PUCL_MUJOCO_MODELS`, then the folder it named when this
/// binary was built.
pub fn model_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os(MODELS_ENV)
        .map(PathBuf::from)
        .into_iter()
        .collect();
    if let Some(d) = option_env!("PUCL_MUJOCO_MODELS_AT_BUILD")
        && !d.is_empty()
        && !dirs.iter().any(|x| x == Path::new(d))
    {
        dirs.push(PathBuf::from(d));
    }
    dirs
}

/// The model file of `model`: an existing path as given, else the name in one of [`model_dirs`].
pub fn resolve(model: &str) -> Result<PathBuf, String> {
    let direct = PathBuf::from(model);
    if direct.is_file() {
        return Ok(direct);
    }
    let dirs = model_dirs();
    if !direct.is_absolute()
        && let Some(p) = dirs.iter().map(|d| d.join(model)).find(|p| p.is_file())
    {
        return Ok(p);
    }
    let looked: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    Err(format!(
        "model file '{model}' not found (looked in the working directory{}{}); set {MODELS_ENV} to \
         the folder of Gymnasium's MuJoCo models: bash scripts/setup_mujoco.sh && source .mujoco/env.sh",
        if looked.is_empty() { "" } else { " and " },
        looked.join(", ")
    ))
}

#[cfg(not(feature = "mujoco"))]
pub fn load(_spec: &MujocoSpec) -> Result<Model, String> {
    Err(
        "this pucl was built without MuJoCo: build it with `--features mujoco` after \
         `bash scripts/setup_mujoco.sh && source .mujoco/env.sh`"
            .into(),
    )
}

#[cfg(not(feature = "mujoco"))]
impl Model {
    pub fn engine(&self) -> Engine {
        match self.never {}
    }
}

/// One simulation's MuJoCo data.
pub struct Engine {
    #[cfg(feature = "mujoco")]
    data: mujoco_rs::prelude::MjData<std::sync::Arc<mujoco_rs::prelude::MjModel>>,
    #[cfg(feature = "mujoco")]
    frame_skip: usize,
    #[cfg(not(feature = "mujoco"))]
    never: std::convert::Infallible,
}

#[cfg(not(feature = "mujoco"))]
impl Engine {
    pub fn step(&mut self, _state: &[f64], _ctrl: &[f64], _next: &mut [f64]) {
        match self.never {}
    }
}

#[cfg(feature = "mujoco")]
mod engine {
    use super::{Engine, Model, MujocoSpec, resolve};
    use mujoco_rs::prelude::*;
    use std::sync::{Arc, Mutex, Once};

    /// MuJoCo's messages go to stderr once each (its default handler writes MUJOCO_LOG.TXT into the
    /// working directory).
    fn log_to_stderr(message: &MjLogMessage) {
        static SEEN: Mutex<Vec<String>> = Mutex::new(Vec::new());
        if (message.level() as i32) < (MjtLogLevel::mjLOG_WARNING as i32) {
            return;
        }
        let text = message.subject().to_string();
        if text.contains("is deprecated") {
            // About the model file's syntax (Gymnasium's models use settotalmass), not the run.
            return;
        }
        if let Ok(mut seen) = SEEN.lock()
            && !seen.contains(&text)
        {
            eprintln!("MuJoCo: {text}");
            seen.push(text);
        }
    }

    pub fn load(spec: &MujocoSpec) -> Result<Model, String> {
        static HOOK: Once = Once::new();
        // SAFETY: the first load installs the handler before any MuJoCo call of this process.
        HOOK.call_once(|| unsafe { set_log_handler(log_to_stderr) });
        if spec.frame_skip == 0 {
            return Err("frame_skip must be at least 1".into());
        }
        let path = resolve(&spec.model)?;
        let inner = MjModel::from_xml(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let ffi = inner.ffi();
        let (nq, nv, nu) = (ffi.nq as usize, ffi.nv as usize, ffi.nu as usize);
        let limited = inner.actuator_ctrllimited();
        let ctrl_range = inner
            .actuator_ctrlrange()
            .iter()
            .enumerate()
            .map(|(i, r)| limited[i].then_some(*r))
            .collect();
        Ok(Model {
            path,
            frame_skip: spec.frame_skip,
            nq,
            nv,
            nu,
            timestep: ffi.opt.timestep,
            ctrl_range,
            inner: Arc::new(inner),
        })
    }

    impl Model {
        pub fn engine(&self) -> Engine {
            Engine {
                data: MjData::new(self.inner.clone()),
                frame_skip: self.frame_skip,
            }
        }
    }

    impl Engine {
        /// The state `frame_skip` physics steps after `state` under the controls `ctrl`. A pure
        /// function of (state, ctrl): the solver's warm start is cleared, so the order in which
        /// environments share an engine does not change a result.
        pub fn step(&mut self, state: &[f64], ctrl: &[f64], next: &mut [f64]) {
            let nq = self.data.qpos().len();
            self.data.qpos_mut().copy_from_slice(&state[..nq]);
            self.data.qvel_mut().copy_from_slice(&state[nq..]);
            self.data.qacc_warmstart_mut().fill(0.0);
            self.data.ctrl_mut().copy_from_slice(ctrl);
            for _ in 0..self.frame_skip {
                self.data.step();
            }
            next[..nq].copy_from_slice(self.data.qpos());
            next[nq..].copy_from_slice(self.data.qvel());
        }
    }
}

#[cfg(feature = "mujoco")]
pub use engine::load;

#[cfg(all(test, feature = "mujoco"))]
mod tests {
    use super::*;

    fn cheetah() -> Model {
        load(&MujocoSpec {
            model: "half_cheetah.xml".into(),
            frame_skip: 5,
        })
        .expect("run bash scripts/setup_mujoco.sh && source .mujoco/env.sh")
    }

    #[test]
    fn gymnasium_half_cheetah_has_its_standard_dimensions() {
        let m = cheetah();
        assert_eq!((m.nq, m.nv, m.nu), (9, 9, 6));
        assert!((m.timestep - 0.01).abs() < 1e-12);
        assert!(m.ctrl_range.iter().all(|r| *r == Some([-1.0, 1.0])));
    }

    #[test]
    fn a_step_is_a_pure_function_of_state_and_controls() {
        let m = cheetah();
        let (mut a, mut b) = (m.engine(), m.engine());
        let s0 = vec![0.0; 18];
        let ctrl = [0.5, -0.3, 0.2, -1.0, 0.7, 0.1];
        let (mut n1, mut n2, mut other) = (vec![0.0; 18], vec![0.0; 18], vec![0.0; 18]);
        a.step(&s0, &ctrl, &mut n1);
        // Another history in between must not change the next result.
        a.step(&n1, &[1.0; 6], &mut other);
        a.step(&s0, &ctrl, &mut n2);
        let mut n3 = vec![0.0; 18];
        b.step(&s0, &ctrl, &mut n3);
        assert_eq!(n1, n2);
        assert_eq!(n1, n3);
        assert!(n1 != s0, "the cheetah moved");
    }

    #[test]
    fn a_missing_model_file_names_the_file_and_the_folders() {
        let e = load(&MujocoSpec {
            model: "no_such_robot.xml".into(),
            frame_skip: 5,
        })
        .unwrap_err();
        assert!(
            e.contains("no_such_robot.xml") && e.contains(MODELS_ENV),
            "{e}"
        );
    }
}
