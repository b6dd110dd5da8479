//! The Landlock ruleset of a confined command (applied in the child by
//! [`super::sandbox::Plan`]).

use std::os::fd::BorrowedFd;

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, PathBeneath, Ruleset,
    RulesetAttr, RulesetCreated, RulesetCreatedAttr, Scope,
};

use crate::error::{Error, Result};

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
