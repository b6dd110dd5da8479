//! Integration tests of the safe-lanes library, as one test binary.
//!
//! Every module holds the tests of one library module; `util` holds the shared helpers.

mod audit;
mod beneath;
mod confine;
mod deposit;
mod download;
mod grants;
mod name;
mod patch;
mod root;
mod upload;
mod util;
