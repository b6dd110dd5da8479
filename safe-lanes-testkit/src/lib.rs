//! What the test suites of the safe-lanes crates share, so that each helper exists once: a
//! small disk to fill, the second user of the hostile runs, a heartbeat that shows whether a
//! process still runs, the audit log read back, small file-system probes, and a stand-in for
//! the desktop portal's folder dialog on a private session bus.
//!
//! Nothing here knows the library: the suites drive it (or its binaries) and use these to set
//! up the world around it and to look at what it left.

#![forbid(unsafe_code)]

pub mod audit;
pub mod disk;
pub mod fs;
pub mod heartbeat;
#[cfg(target_os = "linux")]
pub mod portal;
pub mod users;
