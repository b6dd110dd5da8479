//! The one confinement primitive: every file the library touches is reached through here.
//!
//! An [`Anchor`] is an open directory descriptor. Every operation takes a path *relative to
//! the anchor* and is resolved by the kernel (or, where the kernel cannot, by a careful
//! component walk) so that it can never leave the anchor's directory: not through `..`, not
//! through an absolute or relative symbolic link, not through a `/proc` magic link, and not
//! through a directory renamed while the lookup runs.
//!
//! # Backends
//!
//! - [`Backend::Openat2`]: one `openat2(2)` call with `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`
//!   (and `RESOLVE_NO_SYMLINKS` when links are refused). The kernel guarantees containment,
//!   including under concurrent renames (it fails with `EAGAIN` rather than guess; the call is
//!   retried, then handed to the walk).
//! - [`Backend::Walk`]: for kernels without `openat2` (before 5.6, or where a seccomp filter
//!   hides it). Each component is opened with `O_PATH | O_NOFOLLOW` relative to the previous
//!   descriptor; `..` pops back to a descriptor already held, so it never reaches above the
//!   anchor; a symbolic link is read through its own descriptor and expanded in place (absolute
//!   targets are escapes); at most 40 links are followed.
//!
//! [`Backend::Auto`] uses `openat2` and remembers, process-wide, if the kernel lacks it.
//! Where the system has no `openat2` at all (macOS), [`Backend::Auto`] is the walk, and
//! [`Backend::Openat2`] fails every lookup with `ENOSYS`.
//!
//! # Publishing
//!
//! A new file is written out of sight and then given its name without replacing anything
//! ([`Publishing`]): unnamed (`O_TMPFILE`) and linked with `linkat` on Linux, or under a
//! hidden name created `O_EXCL | O_NOFOLLOW` and renamed without replacing
//! (`renameat2(RENAME_NOREPLACE)` on Linux, `renameatx_np(RENAME_EXCL)` on macOS,
//! `linkat` + `unlinkat` where the filesystem has neither) — the only way on macOS. Tests force
//! the second on Linux with [`force_publishing`], as they force the walk with [`force_backend`],
//! so the paths macOS takes are exercised on every run.
//!
//! Anchors the library opens for itself (lanes, grant folders, allowed roots) take the
//! backend of [`Anchor::new`]: [`Backend::Auto`], unless a test forced another on its own
//! thread with [`force_backend`], which is how every escape table runs on both backends.
//!
//! With the `cap-std` feature, an anchor converts to and from a `cap_std::fs::Dir`
//! (`TryFrom<Dir> for Anchor`, `From<Anchor> for Dir`), for gateways that already hold their
//! folders as cap-std capabilities.
//!
//! # Guarantee
//!
//! A descriptor returned by [`Anchor::open`] (and the other methods) refers to an inode that was
//! reachable from the anchor's directory by the given path without leaving it, at the moment of
//! the lookup. Nothing here compares path strings to decide containment.

mod ambient;
mod anchor;
mod entry;
mod errno;
mod file;
mod filesystem;
#[cfg(feature = "cap-std")]
mod interop;
mod location;
mod mechanism;
#[cfg(target_os = "linux")]
mod openat2;
mod probe;
mod publish;
mod stat;
mod walk;
#[cfg(target_os = "linux")]
mod watch;

#[cfg(target_os = "linux")]
pub(crate) use ambient::open_path;
pub use ambient::{Ambient, create_dir_all};
pub(crate) use anchor::HOLD;
pub use anchor::{Anchor, Symlinks};
#[cfg(any(target_os = "linux", target_vendor = "apple"))]
pub(crate) use entry::Onto;
pub(crate) use errno::shown_fd;
pub(crate) use file::{OwnFile, data_file};
pub(crate) use filesystem::reads_ignore_nonblock;
pub use location::location_of;
pub use mechanism::{Backend, Forced, Publishing, force_backend, force_publishing, publishing};
pub use probe::openat2_available;
pub use publish::Publish;
pub(crate) use stat::mode_bits;
pub use stat::{identity, permissions};
pub(crate) use stat::{kind_of, stat_identity};
#[cfg(target_os = "linux")]
pub(crate) use watch::{NameWatch, TreeWatch};
