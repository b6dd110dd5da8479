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
//!   On Linux, `fetch::Fetcher` (feature `fetch`, on by default) fetches an `https` URL
//!   straight into it, behind an SSRF guard that checks every address and every redirect.
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
//! ## The two sides
//!
//! A gateway is two doors onto one state root:
//!
//! - **The agent's side**, [`desk::AgentDesk`]: everything an agent may ask for, one method
//!   each (save, upload, list and request grants, patch, run a confined command, background
//!   jobs), taking the agent's raw input and answering one serializable report. An MCP server
//!   or an agent runtime builds one and only moves input in and reports out.
//! - **The human's side**, [`Grants`] (and [`changes::HeldChanges`], [`running`],
//!   [`audit_view`]): approving, denying, revoking, the held changes, the running commands,
//!   the audit log. Only the human's own tools (the `safe-lanes` CLI, the approval page,
//!   `safe_lanes.human` in Python) call it.
//!
//! The agent asks; the human decides:
//!
//! ```
//! use safe_lanes::desk::{AccessAsk, AgentDesk, DeskOptions};
//! use safe_lanes::grants::Kind;
//! use safe_lanes::{Access, Grants, StateRoot};
//! # let tmp = tempfile::tempdir().unwrap();
//! # let docs = tmp.path().join("docs");
//! # std::fs::create_dir(&docs).unwrap();
//! let state = tmp.path().join("state");
//!
//! // The agent's side (a gateway): a request, which grants nothing.
//! let desk = AgentDesk::open(StateRoot::open(&state)?, DeskOptions::default())?;
//! let asked = desk.request_access(&AccessAsk {
//!     alias: "docs".into(),
//!     access: Access::ReadOnly,
//!     reason: "to read the spec".into(),
//!     path: Some(docs.to_string_lossy().into_owned()),
//!     kind: Kind::Folder,
//!     vars: Vec::new(),
//!     bin: None,
//! })?;
//! assert_eq!(asked.status, "pending");
//!
//! // The human's side (the CLI, the page): the same request, judged, then approved.
//! let grants = Grants::open(&StateRoot::open(&state)?, None)?;
//! let proposal = grants.proposal(&asked.request.id)?;
//! assert!(grants.review_proposal(&proposal, None).standing.is_approvable());
//! grants.approve(&asked.request.id, None, "the agent reads the spec", "alice")?;
//! assert_eq!(desk.grants()?.grants[0].alias, "docs");
//! # Ok::<(), safe_lanes::Error>(())
//! ```
//!
//! ## Example: the download lane
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
//! ## Platforms
//!
//! | | Linux | macOS | Windows |
//! |---|---|---|---|
//! | download lane, deposit, upload side, [`sanitize`] | yes: `openat2`, `O_TMPFILE` + `linkat` | yes: the `O_NOFOLLOW` walk, hidden name + `renameatx_np(RENAME_EXCL)` | [`sanitize`] only; [`StateRoot`] refuses (`unsupported_platform`) |
//! | folder grants (list, request, approve, revoke, patch) | yes | yes | refuses |
//! | confined commands ([`Confined`]) | namespaces + Landlock + seccomp, or `sandbox_unavailable` | `sandbox_unavailable`, with the reason | refuses |
//! | [`harden`] | not dumpable, no core files | no core files ([`Hardening::unavailable`] says what is missing) | — |
//! | `fetch` (a URL into the lane) | yes: ureq on rustls, the guard in `fetch/guard.rs` | not built (ADR 0017) | not built |
//!
//! On macOS every item of the lanes is the same code as on Linux, on the paths Linux takes
//! when it lacks `openat2` and `O_TMPFILE`; the test suite forces those paths on Linux
//! ([`beneath::force_backend`], [`beneath::force_publishing`]). How Seatbelt could confine
//! commands on macOS is designed in ADR 0011; why Windows refuses, in ADR 0012.
//!
//! ## Limitations
//!
//! The library protects the lanes and the grants from the agent; it does not protect anything
//! from the human owner or from the kernel.
//!
//! ## How it is tested
//!
//! Escape tables run against both resolution backends; race tests swap directories and
//! symbolic links from another thread while resolving; property tests check the name
//! invariants; the CLI tests run the real binary; fuzz targets live in `fuzz/`.

// `unsafe` is allowed in two modules only, each saying so at its top: `confine::sys` (system
// calls `std` and `rustix` do not offer safely) and `confine::pre_exec` (what runs between
// `fork` and `exec`, where the promises `sys`'s `unsafe fn`s ask for are made).
#![deny(unsafe_code)]
#![warn(missing_docs)]
#![warn(clippy::print_stdout, clippy::print_stderr)]

pub mod error;
pub mod name;

pub use error::{Code, Error, Result, Shown};
pub use name::{SafeName, sanitize};

// The platform is chosen once: everything but names and errors needs a Unix (the lanes, the
// grants, and on Linux the sandbox); elsewhere `StateRoot` refuses (ADR 0012).
cfg_if::cfg_if! {
    if #[cfg(unix)] {
        mod accounts;
        mod actor;
        pub mod audit;
        pub mod audit_view;
        pub mod beneath;
        mod caches;
        pub mod changes;
        mod child;
        pub mod confine;
        pub mod control;
        mod copy;
        mod crash;
        pub mod deposit;
        pub mod desk;
        mod digest;
        pub mod download;
        mod fd;
        #[cfg(all(target_os = "linux", feature = "fetch"))]
        pub mod fetch;
        pub mod grants;
        mod held;
        pub mod hidden;
        pub mod input;
        mod legacy;
        mod lossy;
        mod ongoing;
        pub mod patch;
        pub mod process;
        mod random;
        pub mod risk;
        pub mod root;
        pub mod running;
        mod sync;
        pub mod upload;
        pub mod upload_roots;

        pub use actor::Actor;
        pub use audit::{AuditLog, Verification};
        pub use caches::LayerSize;
        pub use child::{Limits, Outcome};
        pub use confine::{Confined, ConfinedOutcome, SandboxSupport, sandbox_support};
        pub use control::Control;
        pub use deposit::{Staged, UploadDeposit, Uploader};
        pub use desk::{AgentDesk, DeskOptions};
        pub use download::{DownloadLane, Durability, Saved};
        #[cfg(all(target_os = "linux", feature = "fetch"))]
        pub use fetch::{FetchPolicy, Fetched, Fetcher};
        pub use grants::{Access, Alias, Grants, Session, Want};
        pub use patch::{Patched, apply_patch};
        pub use process::{Hardening, harden};
        pub use root::{RootLocation, RootOrigin, StateRoot};
        pub use upload::{Opened, Source, UploadSource};
    } else {
        mod unsupported;

        pub use unsupported::StateRoot;
    }
}

/// `docs/embedding.md`, whose every Rust block is compiled and run as a doc test.
#[cfg(all(doctest, target_os = "linux"))]
#[doc = include_str!("../../docs/embedding.md")]
mod embedding_guide {}
