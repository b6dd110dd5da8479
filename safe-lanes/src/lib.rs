//! # safe-lanes
//!
//! Safe local-disk access for AI-agent gateways (MCP servers, agent runtimes), where the
//! agent's arguments may have been written by an attacker through prompt injection.
//!
//! The library makes three flows safe by construction:
//!
//! - **Download lane** ([`DownloadLane`]): untrusted content lands only in
//!   `<root>/.downloads` (0700), under a [`sanitize`]d name, created without ever replacing
//!   anything (numbered on collision), never visible half-written; the final path is returned.
//! - **Upload side**: a source file may only be read from a human-written allowlist of folders,
//!   never from under the state root; outbound content is staged in `<root>/.uploads` for a
//!   command-line uploader and always erased.
//! - **Folder grants**: a human approves folders read-only or read-write; an agent addresses
//!   them by alias, can only *request* more, and runs commands confined by Linux Landlock.
//!
//! ## The one confinement primitive
//!
//! Every file the library opens, creates, links or removes on a caller's behalf goes through
//! [`beneath::Anchor`]: descriptor-relative `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`,
//! or an `O_NOFOLLOW` component walk where the kernel lacks it. Containment is never decided
//! by comparing path strings and then opening by path.
//!
//! ## Threat model in brief
//!
//! The attacker controls the agent's arguments (names, paths, aliases, diffs, commands) and
//! the content of received files, and may race the library by renaming and symlinking inside
//! folders the agent can write. The attacker does not control the human's CLI, the state root
//! or the kernel. See `docs/threat-model.md`.
//!
//! ## Example
//!
//! ```
//! use safe_lanes::{DownloadLane, StateRoot};
//! # let tmp = tempfile::tempdir().unwrap();
//! # let root_path = tmp.path().join("state");
//! let root = StateRoot::open(&root_path)?;
//! let lane = DownloadLane::open(&root)?;
//! let saved = lane.save("../../.bashrc", &b"echo pwned"[..])?;
//! assert_eq!(saved.name, "bashrc");
//! assert!(saved.path.starts_with(root.downloads_path()));
//! # Ok::<(), safe_lanes::Error>(())
//! ```
//!
//! ## Limitations
//!
//! Linux only (`openat2`, `O_TMPFILE`, Landlock). The library protects the lanes and the
//! grants from the agent; it does not protect anything from the human owner or from the
//! kernel.
//!
//! ## How it is tested
//!
//! Escape tables run against both resolution backends; race tests swap directories and
//! symbolic links from another thread while resolving; property tests check the name
//! invariants; the CLI tests run the real binary; fuzz targets live in `fuzz/`.

#![deny(unsafe_code)]
#![warn(missing_docs)]
#![warn(clippy::print_stdout, clippy::print_stderr)]

#[cfg(not(target_os = "linux"))]
compile_error!("safe-lanes relies on openat2, O_TMPFILE and Landlock: it builds on Linux only");

pub mod actor;
pub mod audit;
pub mod beneath;
pub mod child;
pub mod confine;
pub mod control;
mod copy;
mod crash;
pub mod deposit;
pub mod download;
pub mod error;
mod fd;
pub mod grants;
pub mod input;
mod lossy;
pub mod name;
pub mod patch;
pub mod process;
mod random;
pub mod root;
mod sync;
pub mod upload;

pub use actor::Actor;
pub use audit::{AuditLog, Verification};
pub use child::{Limits, Outcome};
pub use confine::{Confined, ConfinedOutcome, SandboxSupport, sandbox_support};
pub use control::Control;
pub use deposit::{Staged, UploadDeposit, Uploader};
pub use download::{DownloadLane, Durability, Saved};
pub use error::{Code, Error, Result, Shown};
pub use grants::{Access, Alias, Grants, Session, Want};
pub use name::{SafeName, sanitize};
pub use patch::{Patched, apply_patch};
pub use process::{Hardening, harden};
pub use root::{RootLocation, RootOrigin, StateRoot};
pub use upload::{Opened, Source, UploadSource};
