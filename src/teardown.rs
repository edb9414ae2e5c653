//! Stopping readers when their JavaScript environment is torn down (a
//! worker terminated while a reader had batches in flight): its thread
//! would wait for an acknowledgement that never comes, keeping the pipe's
//! file descriptor open, and a backend writing to it would block for as
//! long as the host lives. One environment cleanup hook per JavaScript
//! thread stops every reader made on it, so their threads end and their
//! pipes close: the backend sees EPIPE.

use std::cell::RefCell;
use std::sync::{Arc, Weak};

use napi::{Env, Result};

/// What a reader does when it must stop (dispose, or the environment's end).
pub(crate) trait Stop: Send + Sync {
    fn stop(&self);
}

thread_local! {
    // The readers made on this JavaScript thread (one environment each),
    // and whether the cleanup hook that stops them is registered.
    static READERS: RefCell<(Vec<Weak<dyn Stop>>, bool)> = const { RefCell::new((Vec::new(), false)) };
}

/// Stops `reader` when this thread's JavaScript environment is torn down
/// (one cleanup hook per environment stops them all).
pub(crate) fn stop_on_env_teardown(env: &Env, reader: &Arc<dyn Stop>) -> Result<()> {
    let register = READERS.with_borrow_mut(|(readers, registered)| {
        readers.retain(|r| r.strong_count() > 0);
        readers.push(Arc::downgrade(reader));
        !std::mem::replace(registered, true)
    });
    if register {
        env.add_env_cleanup_hook((), |()| {
            let readers = READERS.with_borrow_mut(|(readers, _)| std::mem::take(readers));
            for reader in readers.iter().filter_map(Weak::upgrade) {
                reader.stop();
            }
        })?;
    }
    Ok(())
}
