//! Locking shared state.

use std::sync::{Mutex, MutexGuard};

/// Lock `mutex`, even if a thread panicked while holding it: every value the library keeps
/// behind a lock (a cache, a counter, captured output) is whole after each statement, so a
/// panic elsewhere leaves nothing half-changed, and refusing the lock would only turn one
/// failure into many.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}
