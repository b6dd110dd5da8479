//! Tests of the real `safe-lanes` binary: exit statuses, JSON shapes, and that nothing is
//! written outside the state root.

mod approve;
mod audit;
mod changes;
mod confined;
mod desktop;
mod download;
mod grant;
mod hostile;
mod jobs;
mod process;
mod reference;
mod root;
mod screens;
mod toolchains;
mod ui;
mod upload;
mod util;
