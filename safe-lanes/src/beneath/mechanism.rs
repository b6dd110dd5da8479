//! Which mechanism resolves paths ([`Backend`]) and which publishes new files
//! ([`Publishing`]): the choices, the default each thread gives, and the guard by which a test
//! forces another on its own thread ([`force_backend`], [`force_publishing`]).
//!
//! Either choice selects a mechanism, never whether paths are confined: every backend
//! confines, and every publishing names a file without replacing anything.

use std::cell::Cell;
use std::marker::PhantomData;
use std::thread::LocalKey;

/// Which resolution mechanism an [`Anchor`](super::Anchor) uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Backend {
    /// `openat2` when the kernel has it, the component walk otherwise (decided once per process).
    #[default]
    Auto,
    /// Always `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`; fails where the kernel lacks it.
    Openat2,
    /// Always the `O_NOFOLLOW` component walk.
    Walk,
}

/// How a new file is written out of sight and then given its name, never replacing anything
/// (module documentation, "Publishing").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Publishing {
    /// The best this system has: [`Publishing::Link`] on Linux, [`Publishing::Rename`]
    /// elsewhere.
    #[default]
    Auto,
    /// Linux: an unnamed `O_TMPFILE` file, named with `linkat` (nothing is left by a crash);
    /// a filesystem without `O_TMPFILE` falls back to [`Publishing::Rename`].
    #[cfg(target_os = "linux")]
    Link,
    /// A hidden name created `O_EXCL | O_NOFOLLOW`, renamed without replacing
    /// ([`Anchor::rename_new`](super::Anchor::rename_new)); a crash leaves the hidden file for
    /// the next sweep.
    Rename,
    /// [`Publishing::Rename`] as a system without an exclusive rename does it: the hidden name
    /// is linked to the new one, then removed
    /// ([`Anchor::rename_new`](super::Anchor::rename_new)'s fallback). For tests, so that
    /// fallback runs on every Linux run.
    RenameByLink,
}

thread_local! {
    /// The backend [`Anchor::new`](super::Anchor::new) gives on this thread ([`force_backend`]).
    static DEFAULT_BACKEND: Cell<Backend> = const { Cell::new(Backend::Auto) };
    /// The publishing [`publishing`] gives on this thread ([`force_publishing`]).
    static DEFAULT_PUBLISHING: Cell<Publishing> = const { Cell::new(Publishing::Auto) };
}

/// The backend an anchor made now, on this thread, resolves with: [`Backend::Auto`], unless a
/// test forced another with [`force_backend`].
pub(super) fn default_backend() -> Backend {
    DEFAULT_BACKEND.get()
}

/// How a lane opened now, on this thread, publishes new files: [`Publishing::Link`] on Linux,
/// [`Publishing::Rename`] elsewhere, unless a test forced another with [`force_publishing`].
/// Never [`Publishing::Auto`].
pub fn publishing() -> Publishing {
    match DEFAULT_PUBLISHING.get() {
        #[cfg(target_os = "linux")]
        Publishing::Auto => Publishing::Link,
        #[cfg(not(target_os = "linux"))]
        Publishing::Auto => Publishing::Rename,
        forced => forced,
    }
}

/// For tests: every anchor this thread creates with [`Anchor::new`](super::Anchor::new)
/// (hence [`Anchor::open_ambient`](super::Anchor::open_ambient),
/// [`Anchor::open_canonical`](super::Anchor::open_canonical) and every lane, grant folder and
/// allowed root the library opens) uses `backend` until the returned guard is dropped.
///
/// The library opens most anchors itself, so this is how a table of grant or patch cases runs
/// on the walk. The setting is per thread, so tests running beside it on other threads keep
/// [`Backend::Auto`]; anchors that already exist keep their backend. Either backend confines
/// (module documentation): this chooses a mechanism, never whether paths are confined.
#[doc(hidden)]
pub fn force_backend(backend: Backend) -> Forced<Backend> {
    Forced::set(&DEFAULT_BACKEND, backend)
}

/// For tests: every lane this thread opens publishes with `publishing` until the returned
/// guard is dropped, as [`force_backend`] does for resolution. On Linux this is how the
/// rename-based publishing macOS uses runs under the same tables as the default.
#[doc(hidden)]
pub fn force_publishing(publishing: Publishing) -> Forced<Publishing> {
    Forced::set(&DEFAULT_PUBLISHING, publishing)
}

/// A thread's default [`Backend`] or [`Publishing`] forced by a test ([`force_backend`],
/// [`force_publishing`]): the previous default is restored when the guard is dropped.
#[doc(hidden)]
#[derive(Debug)]
#[must_use = "the choice is forced only while the guard lives"]
pub struct Forced<T: Copy + 'static> {
    /// The thread's setting the guard restores.
    default: &'static LocalKey<Cell<T>>,
    previous: T,
    /// Not `Send`: the guard must be dropped on the thread whose setting it restores.
    _same_thread: PhantomData<*const ()>,
}

impl<T: Copy + 'static> Forced<T> {
    /// Set this thread's `default` to `value`, keeping the previous value to restore.
    fn set(default: &'static LocalKey<Cell<T>>, value: T) -> Self {
        Self {
            default,
            previous: default.replace(value),
            _same_thread: PhantomData,
        }
    }
}

impl<T: Copy + 'static> Drop for Forced<T> {
    fn drop(&mut self) {
        self.default.set(self.previous);
    }
}
