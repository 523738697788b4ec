//! What one process keeps of the notification outbox, beside the store's
//! own fields: which actors it registered in the directory, and when it
//! last swept (see `outbox.rs`).

use std::collections::HashSet;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Actors remembered as registered per process, at most; past it the
/// memory starts over (registering again is one idempotent call).
const REMEMBERED_ACTORS: usize = 65_536;

/// The actors this process registered, and when it last swept.
#[derive(Debug, Default)]
pub(crate) struct OutboxState {
    registered: Mutex<HashSet<String>>,
    last_sweep: Mutex<Option<Instant>>,
}

impl OutboxState {
    /// Whether this process registered the actor of `tag`.
    pub(crate) fn registered(&self, tag: &str) -> bool {
        self.registered
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(tag)
    }

    /// Remembers that the actor of `tag` is registered.
    pub(crate) fn remember(&self, tag: &str) {
        let mut registered = self
            .registered
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if registered.len() >= REMEMBERED_ACTORS {
            registered.clear();
        }
        registered.insert(tag.to_owned());
    }

    /// Whether a sweep is due (never swept, or `every` ago); when it is,
    /// the sweep counts as begun now.
    pub(crate) fn begin_sweep(&self, every: Duration) -> bool {
        let mut last = self
            .last_sweep
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if last.is_some_and(|at| at.elapsed() < every) {
            return false;
        }
        *last = Some(Instant::now());
        true
    }

    /// A sweep that failed: the next claim sweeps again.
    pub(crate) fn sweep_failed(&self) {
        *self
            .last_sweep
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = None;
    }
}
