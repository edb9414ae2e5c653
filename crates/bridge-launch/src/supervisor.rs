//! Finding `process-bridge-supervisor`: the rules every host applies, written
//! once. A host only knows *where* it may be (beside the addon, in the
//! platform package, beside its own binary, on `PATH`); what a named path,
//! an empty override and a file without the execute bit mean is decided
//! here, so that the Node package and `agentlane-bridge` cannot drift apart
//! (they used to carry one lookup each).

use std::ffi::OsStr;
use std::fmt;
use std::path::{Path, PathBuf};

/// The supervisor's file name (a platform package adds `.<platform>`).
pub const FILE_NAME: &str = "process-bridge-supervisor";

/// The variable that overrides every host's lookup: a path, or empty for none.
pub const OVERRIDE_ENV: &str = "PROCESS_BRIDGE_SUPERVISOR";

/// Where a host looks for the supervisor.
#[derive(Clone, Copy, Debug, Default)]
pub struct Search<'a> {
    /// A path the user named (a host's own option, else [`OVERRIDE_ENV`]'s
    /// value): it replaces the candidates; empty means "none".
    pub named: Option<&'a OsStr>,
    /// The places a supervisor may be, in order; the first executable one wins.
    pub candidates: &'a [PathBuf],
    /// Where one must be when none is found (a platform package that should
    /// ship it): its absence is reported as [`Lookup::Missing`], not
    /// [`Lookup::Absent`], so that a broken install is never silent.
    pub expected: Option<&'a Path>,
}

/// What a search found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// An executable supervisor.
    Found(PathBuf),
    /// The user chose none (an empty override).
    Declined,
    /// None in any candidate, and none was expected.
    Absent,
    /// A named or expected path that cannot be run.
    Missing(Missing),
}

/// A supervisor that should be at `path` and cannot be run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Missing {
    pub kind: MissingKind,
    pub path: PathBuf,
    /// The user named it (`false`: the host expected it there).
    pub named: bool,
}

/// Why a path is not a runnable supervisor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MissingKind {
    /// Nothing is there.
    NotFound,
    /// Something is there, but not an executable file.
    NotExecutable,
}

impl MissingKind {
    /// Its stable code, the errno name a spawn of it would give.
    pub fn code(self) -> &'static str {
        match self {
            MissingKind::NotFound => "ENOENT",
            MissingKind::NotExecutable => "EACCES",
        }
    }
}

impl fmt::Display for Missing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.kind {
            MissingKind::NotFound => "does not exist",
            MissingKind::NotExecutable => "is not an executable file",
        };
        write!(f, "{} {what} ({})", self.path.display(), self.kind.code())
    }
}

/// Applies the rules: a named path (empty: none) replaces the candidates and
/// must be executable; else the first executable candidate; else the
/// expected one reported missing, or nothing.
pub fn find(search: Search<'_>) -> Lookup {
    if let Some(named) = search.named {
        if named.is_empty() {
            return Lookup::Declined;
        }
        let path = PathBuf::from(named);
        return match check(&path) {
            Ok(()) => Lookup::Found(path),
            Err(kind) => Lookup::Missing(Missing {
                kind,
                path,
                named: true,
            }),
        };
    }
    if let Some(found) = search.candidates.iter().find(|path| check(path).is_ok()) {
        return Lookup::Found(found.clone());
    }
    match search.expected {
        Some(path) => match check(path) {
            Ok(()) => Lookup::Found(path.to_owned()),
            Err(kind) => Lookup::Missing(Missing {
                kind,
                path: path.to_owned(),
                named: false,
            }),
        },
        None => Lookup::Absent,
    }
}

/// Whether `path` is a file this process may execute.
pub fn check(path: &Path) -> Result<(), MissingKind> {
    let Ok(metadata) = std::fs::metadata(path) else {
        return Err(MissingKind::NotFound);
    };
    if metadata.is_file() && may_execute(path) {
        Ok(())
    } else {
        Err(MissingKind::NotExecutable)
    }
}

#[cfg(unix)]
fn may_execute(path: &Path) -> bool {
    // access(2), not the mode bits: it answers for this process's user.
    nix::unistd::access(path, nix::unistd::AccessFlags::X_OK).is_ok()
}

#[cfg(not(unix))]
fn may_execute(_: &Path) -> bool {
    true
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn file(dir: &Path, name: &str, mode: u32) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        path
    }

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("bridge-launch-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn the_first_executable_candidate_wins() {
        let dir = scratch("first");
        let plain = file(&dir, "plain", 0o644);
        let runnable = file(&dir, "runnable", 0o755);
        let candidates = [dir.join("absent"), plain, dir.clone(), runnable.clone()];
        assert_eq!(
            find(Search {
                candidates: &candidates,
                ..Search::default()
            }),
            Lookup::Found(runnable)
        );
        assert_eq!(
            find(Search {
                candidates: &candidates[..3],
                ..Search::default()
            }),
            Lookup::Absent
        );
    }

    #[test]
    fn a_named_path_replaces_the_candidates_and_empty_means_none() {
        let dir = scratch("named");
        let runnable = file(&dir, "runnable", 0o755);
        let plain = file(&dir, "plain", 0o600);
        let candidates = [runnable.clone()];
        let named = |named: &Path| {
            find(Search {
                named: Some(named.as_os_str()),
                candidates: &candidates,
                expected: None,
            })
        };
        assert_eq!(
            find(Search {
                named: Some(OsStr::new("")),
                candidates: &candidates,
                expected: None
            }),
            Lookup::Declined
        );
        assert_eq!(named(&runnable), Lookup::Found(runnable.clone()));
        let gone = dir.join("gone");
        assert_eq!(
            named(&gone),
            Lookup::Missing(Missing {
                kind: MissingKind::NotFound,
                path: gone.clone(),
                named: true
            })
        );
        assert_eq!(
            named(&plain),
            Lookup::Missing(Missing {
                kind: MissingKind::NotExecutable,
                path: plain,
                named: true
            })
        );
        // A directory is there but cannot be run as the supervisor.
        assert_eq!(
            named(&dir),
            Lookup::Missing(Missing {
                kind: MissingKind::NotExecutable,
                path: dir.clone(),
                named: true
            })
        );
    }

    #[test]
    fn an_expected_one_that_is_not_there_is_reported_with_its_code() {
        let dir = scratch("expected");
        let gone = dir.join("gone");
        let plain = file(&dir, "plain", 0o644);
        let expect = |path: &Path| {
            find(Search {
                expected: Some(path),
                ..Search::default()
            })
        };
        let missing = expect(&gone);
        assert_eq!(
            missing,
            Lookup::Missing(Missing {
                kind: MissingKind::NotFound,
                path: gone,
                named: false
            })
        );
        let Lookup::Missing(missing) = missing else {
            unreachable!()
        };
        assert_eq!(missing.kind.code(), "ENOENT");
        assert!(
            missing.to_string().ends_with("does not exist (ENOENT)"),
            "{missing}"
        );
        assert_eq!(
            expect(&plain),
            Lookup::Missing(Missing {
                kind: MissingKind::NotExecutable,
                path: plain,
                named: false
            })
        );
        assert_eq!(MissingKind::NotExecutable.code(), "EACCES");
    }
}
