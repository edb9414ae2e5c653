//! An exclusive advisory lock on a file, for the on-disk conversation store
//! (`lib/store/disk/`): the revision check and the write of one
//! conversation must be one step across processes.
//!
//! Why a kernel lock (`flock(2)` on Unix, `LockFileEx` on Windows, through
//! `std::fs::File::try_lock`) and not a lock file or directory made with
//! `O_EXCL`/`mkdir`: the kernel drops the lock when its holder ends, even
//! by SIGKILL, so a crashed host never leaves a lock behind, and nothing
//! guesses staleness from clocks (a mkdir lock is "stale" after a time
//! without an update: a host whose event loop stalls that long loses it
//! while it still writes, and a crashed holder blocks every writer for
//! that time). Node has no such call of its own.
//!
//! The lock belongs to the open file, so two stores in one process exclude
//! each other as two processes do.

use std::fs::{File, OpenOptions, TryLockError};

use napi::bindgen_prelude::*;
use napi_derive::napi;

/// A held lock: released by `release()`, by garbage collection, or by the
/// process's end.
#[napi]
pub struct FileLock {
    file: Option<File>,
}

#[napi]
impl FileLock {
    /// Lets the lock go (closing the file); a second call does nothing.
    #[napi(catch_unwind)]
    pub fn release(&mut self) {
        self.file = None;
    }
}

/// Takes the exclusive lock of the file at `path` (created empty when
/// missing; its folder must exist) without waiting: `null` when another
/// open file holds it. Throws when the file cannot be opened or locked for
/// another reason (the OS error in the message).
#[napi(catch_unwind)]
pub fn try_lock_file(path: String) -> Result<Option<FileLock>> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|error| Error::from_reason(format!("cannot open the lock file {path}: {error}")))?;
    match file.try_lock() {
        Ok(()) => Ok(Some(FileLock { file: Some(file) })),
        Err(TryLockError::WouldBlock) => Ok(None),
        Err(TryLockError::Error(error)) => Err(Error::from_reason(format!("cannot lock {path}: {error}"))),
    }
}
