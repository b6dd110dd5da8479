//! An unconfined child (the uploader) that cannot outlive its owner or its timeout.
//!
//! The uploader runs outside the sandbox, in a process group of its own. Killing that group
//! when the run ends covers what it leaves running in the background, but not its owner dying:
//! a gateway killed mid-upload would leave the uploader to finish unrecorded. So the process
//! `std` spawns is a supervisor, the group's leader: it forks the uploader (which goes on to
//! `exec`), then, without ever running Rust code that allocates, waits on two process
//! descriptors — the uploader's and its owner's — with the timeout:
//!
//! - the uploader ends: the supervisor steps into its owner's process group, kills whatever
//!   the uploader left in its own, and exits the way the uploader did (the owner sees the
//!   uploader's status);
//! - the owner dies (even by `SIGKILL`), or the timeout passes (a second after the owner's
//!   own, which it backs up): the whole group is killed, the supervisor with it.
//!
//! The owner's own timeout and stop keep working as before (they kill the group).
//!
//! This module prepares the supervisor in the owner; what it runs, between `fork` and `exec`,
//! is in [`crate::confine::pre_exec`].

use std::process::Command;
use std::time::Duration;

use rustix::event::Timespec;

use crate::confine::pre_exec::{self, Supervision};
pub(crate) use crate::confine::pre_exec::{DepositView, view_failed};

/// Arrange for `command` (spawned in a process group of its own) to run under a supervisor
/// that kills its whole group when this process dies or `timeout` passes; the command enters
/// `view` (its own view of the upload deposit) before it `exec`s.
pub(crate) fn supervise(command: &mut Command, timeout: Duration, view: Option<DepositView>) {
    let timeout = timeout.saturating_add(Duration::from_secs(1));
    let supervision = Supervision {
        owner: rustix::process::getpid(),
        owner_group: rustix::process::getpgrp(),
        timeout: Timespec {
            tv_sec: i64::try_from(timeout.as_secs()).unwrap_or(i64::MAX),
            tv_nsec: i64::from(timeout.subsec_nanos()),
        },
        view,
    };
    pre_exec::install_supervisor(command, supervision);
}
