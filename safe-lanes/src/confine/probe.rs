//! What Landlock this kernel offers.

use super::{LandlockSupport, REQUIRED_ABI};
use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, LandlockStatus, Ruleset,
    RulesetAttr, RulesetStatus,
};

/// Probe Landlock by enforcing the required ruleset on a throwaway thread.
///
/// Landlock domains (and `no_new_privs`) belong to the thread that creates them, so the probe
/// restricts nothing but a thread that exits right after.
pub fn landlock_support() -> LandlockSupport {
    std::thread::spawn(probe_on_this_thread)
        .join()
        .unwrap_or_else(|_| LandlockSupport {
            abi: None,
            fully_enforced: false,
            problem: Some("the Landlock probe panicked".to_owned()),
        })
}

fn probe_on_this_thread() -> LandlockSupport {
    // A best-effort ruleset always restricts what it can and reports the kernel's ABI.
    let abi = Ruleset::default()
        .handle_access(AccessFs::from_all(ABI::V1))
        .and_then(|r| r.create())
        .and_then(|r| r.restrict_self())
        .ok()
        .and_then(|status| match status.landlock {
            LandlockStatus::Available {
                effective_abi,
                kernel_abi,
            } => Some(kernel_abi.unwrap_or(effective_abi as i32) as u32),
            LandlockStatus::NotEnabled | LandlockStatus::NotImplemented => None,
        });
    // The required ruleset, with every right a hard requirement.
    let required = ABI::V4;
    let enforced = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(required))
        .and_then(|r| r.handle_access(AccessNet::from_all(required)))
        .and_then(|r| r.create())
        .and_then(|r| r.restrict_self());
    let problem = match enforced {
        Ok(status) if status.ruleset == RulesetStatus::FullyEnforced && status.no_new_privs => None,
        Ok(status) => Some(format!(
            "the required ruleset is only {:?} (no_new_privs: {})",
            status.ruleset, status.no_new_privs
        )),
        Err(e) => Some(format!(
            "Landlock ABI {REQUIRED_ABI} (Linux 6.7) or newer is required \
             (this kernel: {}): {e}",
            abi.map_or_else(|| "no Landlock".to_owned(), |v| format!("ABI {v}"))
        )),
    };
    LandlockSupport {
        abi,
        fully_enforced: problem.is_none(),
        problem,
    }
}
