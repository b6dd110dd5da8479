//! Confinement of commands under Linux Landlock.
//!
//! This module starts with what every part of the library needs to know about the host: which
//! Landlock ABI the kernel offers and whether the rules safe-lanes requires can be enforced in
//! full. Without full enforcement, nothing is ever run (`sandbox_unavailable`).

mod probe;

pub use probe::{LandlockSupport, REQUIRED_ABI, landlock_support};
