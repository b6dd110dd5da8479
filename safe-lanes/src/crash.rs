//! Named crash points, for the fault-injection suite.
//!
//! With the `crash-points` feature (tests only), a process whose `SAFE_LANES_CRASH_AT`
//! names a point dies there at once with `abort`, as `kill -9` would leave it: no destructor
//! runs, nothing is cleaned up. The suite then checks what the next process finds. Without
//! the feature a point is nothing at all.

/// The variable that names the point to die at.
#[cfg(feature = "crash-points")]
const VARIABLE: &str = "SAFE_LANES_CRASH_AT";

/// Die here when the fault-injection suite asks for it (module docs).
#[cfg(feature = "crash-points")]
pub(crate) fn point(name: &str) {
    if std::env::var_os(VARIABLE).is_some_and(|at| at == name) {
        std::process::abort();
    }
}

/// Die here when the fault-injection suite asks for it (module docs).
#[cfg(not(feature = "crash-points"))]
#[inline(always)]
pub(crate) fn point(_name: &str) {}

/// At the point `name`, when the suite asks for it: do `partial` (part of an effect, such as
/// half a write), then die.
#[cfg(feature = "crash-points")]
pub(crate) fn point_after(name: &str, partial: impl FnOnce()) {
    if std::env::var_os(VARIABLE).is_some_and(|at| at == name) {
        partial();
        std::process::abort();
    }
}

/// At the point `name`, when the suite asks for it: do `partial`, then die.
#[cfg(not(feature = "crash-points"))]
#[inline(always)]
pub(crate) fn point_after(_name: &str, _partial: impl FnOnce()) {}
