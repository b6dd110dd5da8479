//! Integration tests of the safe-lanes library, as one test binary.
//!
//! Every module holds the tests of one library module; `util` holds the shared helpers.

mod audit;
mod backends;
mod beneath;
mod changes;
mod confine;
mod deposit;
mod desk;
mod download;
#[cfg(feature = "fetch")]
mod fetch;
mod grants;
#[cfg(feature = "cap-std")]
mod interop;
mod name;
mod patch;
mod root;
mod savers;
mod shown;
mod upload;
mod util;
