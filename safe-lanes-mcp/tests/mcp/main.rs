//! End-to-end tests: the rmcp client drives the real `safe-lanes-mcp` binary over stdio, and the
//! real `safe-lanes` CLI plays the human.

mod downloads;
mod fetch;
mod folders;
mod hidden;
mod lab;
mod leftovers;
mod limits;
mod malformed;
mod narrowed;
mod ordinary;
mod process;
mod raw;
mod shell;
mod upload;
mod util;
