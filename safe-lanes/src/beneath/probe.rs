//! What the kernel offers, learned on first use and then remembered process-wide: whether it
//! answers `openat2(2)`, and whether this process may `linkat(AT_EMPTY_PATH)`.
//!
//! A probe only picks a mechanism: either answer confines, and a wrong one makes a call fail.

#[cfg(target_os = "linux")]
use std::sync::atomic::{AtomicU8, Ordering};

#[cfg(target_os = "linux")]
use rustix::fs::{Mode, OFlags};
#[cfg(target_os = "linux")]
use rustix::io::Errno;

/// A yes-or-no fact about the kernel, unknown until first learned.
#[cfg(target_os = "linux")]
pub(super) struct Probe(AtomicU8);

#[cfg(target_os = "linux")]
impl Probe {
    const UNKNOWN: u8 = 0;
    const PRESENT: u8 = 1;
    const ABSENT: u8 = 2;

    const fn unknown() -> Self {
        Self(AtomicU8::new(Self::UNKNOWN))
    }

    /// What was learned, if anything yet.
    pub(super) fn known(&self) -> Option<bool> {
        match self.0.load(Ordering::Relaxed) {
            Self::PRESENT => Some(true),
            Self::ABSENT => Some(false),
            _ => None,
        }
    }

    /// Remember whether the feature is `present`.
    pub(super) fn learn(&self, present: bool) {
        let value = if present { Self::PRESENT } else { Self::ABSENT };
        self.0.store(value, Ordering::Relaxed);
    }
}

/// Whether the kernel answers `openat2(2)`.
#[cfg(target_os = "linux")]
static OPENAT2: Probe = Probe::unknown();

/// Whether `linkat(AT_EMPTY_PATH)` works for this process (it needs `CAP_DAC_READ_SEARCH`);
/// learned by [`Anchor::link_new`](super::Anchor::link_new).
#[cfg(target_os = "linux")]
pub(super) static LINK_EMPTY_PATH: Probe = Probe::unknown();

/// Whether this system answers `openat2(2)` (probed on first use, then remembered); always
/// `false` where there is no such call (anything but Linux).
pub fn openat2_available() -> bool {
    #[cfg(not(target_os = "linux"))]
    return false;
    #[cfg(target_os = "linux")]
    if let Some(present) = OPENAT2.known() {
        present
    } else {
        let probe = rustix::fs::openat2(
            rustix::fs::CWD,
            "/",
            OFlags::PATH | OFlags::CLOEXEC,
            Mode::empty(),
            rustix::fs::ResolveFlags::empty(),
        );
        let present = !matches!(probe, Err(Errno::NOSYS | Errno::PERM));
        OPENAT2.learn(present);
        present
    }
}
