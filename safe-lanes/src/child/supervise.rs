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

use std::io;
use std::os::fd::AsRawFd;
use std::process::Command;
use std::time::Duration;

use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::process::{Pid, PidfdFlags, Signal, WaitOptions};

use crate::confine::sys;

/// Arrange for `command` (spawned in a process group of its own) to run under a supervisor
/// that kills its whole group when this process dies or `timeout` passes.
pub(crate) fn supervise(command: &mut Command, timeout: Duration) {
    let owner = rustix::process::getpid();
    let owner_group = rustix::process::getpgrp();
    let timeout = timeout.saturating_add(Duration::from_secs(1));
    let timeout = Timespec {
        tv_sec: i64::try_from(timeout.as_secs()).unwrap_or(i64::MAX),
        tv_nsec: i64::from(timeout.subsec_nanos()),
    };
    sys::before_exec(command, move || supervisor(owner, owner_group, timeout));
}

/// The child's side: fork the command; the parent becomes its supervisor and never returns.
fn supervisor(owner: Pid, owner_group: Pid, timeout: Timespec) -> io::Result<()> {
    let owner_fd = rustix::process::pidfd_open(owner, PidfdFlags::empty())?;
    // The owner may have died before the line above: then stop here.
    if rustix::process::getppid() != Some(owner) {
        return Err(io::Error::from_raw_os_error(libc::ESRCH));
    }
    let child = match sys::fork()? {
        sys::Forked::Child => return Ok(()),
        sys::Forked::Parent(child) => child,
    };
    let group = rustix::process::getpid();
    let kill_group = || {
        let _ = rustix::process::kill_process_group(group, Signal::KILL);
    };
    let Ok(child_fd) = rustix::process::pidfd_open(child, PidfdFlags::empty()) else {
        kill_group();
        sys::exit(127);
    };
    let _ = sys::close_all_but([owner_fd.as_raw_fd(), child_fd.as_raw_fd()]);
    loop {
        let mut fds = [
            PollFd::new(&child_fd, PollFlags::IN),
            PollFd::new(&owner_fd, PollFlags::IN),
        ];
        match rustix::event::poll(&mut fds, Some(&timeout)) {
            Err(rustix::io::Errno::INTR) => continue,
            // The uploader ended: reap it, clear its group (leaving it first), exit like it.
            Ok(_) if !fds[0].revents().is_empty() => {
                let status = rustix::process::waitpid(Some(child), WaitOptions::empty());
                if rustix::process::setpgid(None, Some(owner_group)).is_ok() {
                    kill_group();
                }
                match status {
                    Ok(Some((_, status))) => sys::exit_like(status),
                    _ => sys::exit(127),
                }
            }
            // The owner died, or the time is up (or polling failed): nothing may go on.
            _ => {
                kill_group();
                sys::exit(137);
            }
        }
    }
}
