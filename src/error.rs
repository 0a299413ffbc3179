//! One error type for the library: every message names the file, line or field it is about.
use std::fmt;
use std::path::{Path, PathBuf};

#[derive(Debug)]
pub enum Error {
    /// Reading or writing a file failed.
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A file's content is wrong; `line` is 1-based, `field` a column or key name.
    File {
        path: PathBuf,
        line: Option<u64>,
        field: Option<String>,
        msg: String,
    },
    /// A task definition is inconsistent (named field of named task).
    Task {
        task: String,
        field: String,
        msg: String,
    },
    /// Any other invalid input (a CLI value, a request).
    Invalid(String),
}

impl Error {
    pub fn io(path: &Path, source: std::io::Error) -> Self {
        Error::Io {
            path: path.to_path_buf(),
            source,
        }
    }
    pub fn file(
        path: &Path,
        line: Option<u64>,
        field: Option<&str>,
        msg: impl Into<String>,
    ) -> Self {
        Error::File {
            path: path.to_path_buf(),
            line,
            field: field.map(str::to_string),
            msg: msg.into(),
        }
    }
    pub fn task(task: &str, field: &str, msg: impl Into<String>) -> Self {
        Error::Task {
            task: task.to_string(),
            field: field.to_string(),
            msg: msg.into(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { path, source } => write!(f, "{}: {source}", path.display()),
            Error::File {
                path,
                line,
                field,
                msg,
            } => {
                write!(f, "{}", path.display())?;
                if let Some(l) = line {
                    write!(f, ":{l}")?;
                }
                if let Some(c) = field {
                    write!(f, ": field '{c}'")?;
                }
                write!(f, ": {msg}")
            }
            Error::Task { task, field, msg } => write!(f, "task '{task}': field '{field}': {msg}"),
            Error::Invalid(msg) => f.write_str(msg),
        }
    }
}

/// No `source()`: the message already ends with the I/O error, and a chain printer (anyhow's
/// `{:#}`) would repeat it. Match `Error::Io` for the `std::io::Error` itself.
impl std::error::Error for Error {}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Fail now, not after a long computation, when `path` cannot be written: its folder must exist
/// and be a folder (whether it is writable shows when the file is written).
pub fn check_output_path(path: &Path) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if path.file_name().is_none() {
        return Err(Error::Invalid(format!(
            "{}: not a file path",
            path.display()
        )));
    }
    if !dir.is_dir() {
        return Err(Error::Invalid(format!(
            "{}: cannot be written, the folder {} does not exist",
            path.display(),
            dir.display()
        )));
    }
    if path.is_dir() {
        return Err(Error::Invalid(format!(
            "{}: is a folder, not a file to write",
            path.display()
        )));
    }
    Ok(())
}

/// Write a file atomically: a temporary file in the same directory, fsync, then rename, so that a
/// reader (or a crash) never sees a half-written file.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| Error::Invalid(format!("{}: not a file path", path.display())))?;
    let tmp = dir.join(format!(
        ".{}.tmp{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(Error::io(path, e));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces_content_and_leaves_no_temporary() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("a.txt");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "two");
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1);
    }

    #[test]
    fn an_output_path_in_a_missing_folder_or_naming_a_folder_is_refused_before_any_work() {
        let d = tempfile::tempdir().unwrap();
        assert!(check_output_path(&d.path().join("model.json")).is_ok());
        assert!(check_output_path(Path::new("model.json")).is_ok());
        let e = check_output_path(&d.path().join("missing/model.json")).unwrap_err();
        assert!(e.to_string().contains("does not exist"), "{e}");
        let e = check_output_path(d.path()).unwrap_err();
        assert!(e.to_string().contains("is a folder"), "{e}");
    }

    #[test]
    fn an_io_error_is_said_once_by_a_chain_printer() {
        let e = write_atomic(Path::new("/nonexistent-dir-pucl/x.csv"), b"x").unwrap_err();
        let said = format!("{:#}", anyhow::Error::from(e));
        assert_eq!(said.matches("No such file").count(), 1, "{said}");
    }

    #[test]
    fn atomic_write_into_missing_directory_names_the_path() {
        let e = write_atomic(Path::new("/nonexistent-dir-pucl/x.csv"), b"x").unwrap_err();
        assert!(e.to_string().contains("/nonexistent-dir-pucl/x.csv"), "{e}");
    }
}
