//! The Landlock ruleset of a confined command, and the one `unsafe` block of the library that
//! applies it in the child between `fork` and `exec`.

use std::os::fd::BorrowedFd;
use std::process::Command;

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, PathBeneath, Ruleset,
    RulesetAttr, RulesetCreated, RulesetCreatedAttr, RulesetStatus, Scope,
};

use super::syscalls::Filters;
use crate::error::{Error, Result};

/// The errno a child reports when its restriction could not be applied in full. It is not one
/// `exec` returns, so the parent can tell the two apart.
pub(crate) const RESTRICT_FAILED: i32 = libc::ENOTRECOVERABLE;

/// Rights for a read-only folder: read files, list directories, run programs.
pub(crate) fn read_only(abi: ABI) -> BitFlags<AccessFs> {
    AccessFs::from_read(abi)
}

/// Rights for a read-write folder: everything Landlock mediates.
pub(crate) fn read_write(abi: ABI) -> BitFlags<AccessFs> {
    AccessFs::from_all(abi)
}

/// Rights for a device file such as `/dev/null`.
pub(crate) fn device(abi: ABI, write: bool) -> BitFlags<AccessFs> {
    let mut access: BitFlags<AccessFs> = AccessFs::ReadFile.into();
    if write {
        access |= AccessFs::WriteFile | AccessFs::Truncate;
    }
    access & AccessFs::from_all(abi)
}

/// Build the ruleset: every filesystem right (and TCP bind/connect unless `network`) is
/// handled — denied unless a rule allows it — and each `(descriptor, rights)` pair allows its
/// rights beneath that descriptor. Signals and abstract UNIX sockets are scoped to the sandbox
/// where the kernel supports it (ABI 6). Every part is a hard requirement: a kernel that cannot
/// enforce one of them fails here, and nothing runs.
pub(crate) fn build(
    abi: ABI,
    rules: &[(BorrowedFd<'_>, BitFlags<AccessFs>)],
    network: bool,
) -> Result<RulesetCreated> {
    let unavailable = |e: landlock::RulesetError| Error::SandboxUnavailable {
        why: format!("Landlock: {e}"),
    };
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(abi))
        .map_err(unavailable)?;
    if !network {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(abi))
            .map_err(unavailable)?;
    }
    if abi >= ABI::V6 {
        ruleset = ruleset.scope(Scope::from_all(abi)).map_err(unavailable)?;
    }
    let mut created = ruleset.create().map_err(unavailable)?;
    for (fd, access) in rules {
        created = created
            .add_rule(PathBeneath::new(*fd, *access))
            .map_err(unavailable)?;
    }
    Ok(created)
}

/// Arrange for `command`'s child to restrict itself with `ruleset` and `filters` right before
/// `exec`.
///
/// In the child, in this order: every descriptor from 3 up is marked close-on-exec (so only 0–2
/// reach the program, whatever the host process left open), the child asks to be killed when
/// the thread that spawned it exits, the Landlock ruleset is applied with `no_new_privs`, and the
/// two seccomp filters are installed. If the ruleset is not *fully* enforced or a filter cannot
/// be installed, the child fails with [`RESTRICT_FAILED`] and the program never starts.
#[allow(unsafe_code)]
pub(crate) fn restrict_before_exec(
    command: &mut Command,
    ruleset: RulesetCreated,
    filters: Filters,
) {
    use std::os::unix::process::CommandExt;
    let mut ruleset = Some(ruleset);
    let in_child = move || -> std::io::Result<()> {
        // SAFETY: a raw `close_range(2)` system call with constant arguments. It marks
        // descriptors close-on-exec; it does not close anything Rust still uses before `exec`.
        let marked = unsafe {
            libc::syscall(
                libc::SYS_close_range,
                3 as libc::c_uint,
                libc::c_uint::MAX,
                libc::CLOSE_RANGE_CLOEXEC as libc::c_uint,
            )
        };
        if marked != 0 {
            return Err(std::io::Error::from_raw_os_error(RESTRICT_FAILED));
        }
        rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))?;
        let status = ruleset
            .take()
            .ok_or_else(|| std::io::Error::from_raw_os_error(RESTRICT_FAILED))?
            .restrict_self()
            .map_err(|_| std::io::Error::from_raw_os_error(RESTRICT_FAILED))?;
        if status.ruleset != RulesetStatus::FullyEnforced || !status.no_new_privs {
            return Err(std::io::Error::from_raw_os_error(RESTRICT_FAILED));
        }
        for filter in [&filters.eperm, &filters.enosys] {
            seccompiler::apply_filter(filter)
                .map_err(|_| std::io::Error::from_raw_os_error(RESTRICT_FAILED))?;
        }
        Ok(())
    };
    // SAFETY: `pre_exec` runs `in_child` in the forked child, where only async-signal-safe work
    // is allowed. It makes only system calls (close_range, prctl, landlock_restrict_self,
    // seccomp), moves the ruleset out of an `Option`, reads the filters compiled in the parent,
    // and builds plain values: it allocates nothing, takes no lock and touches no state shared
    // with other threads of the parent. `std::io::Error` values built from a raw OS error do
    // not allocate either.
    unsafe {
        command.pre_exec(in_child);
    }
}
