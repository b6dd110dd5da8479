//! The approval page over HTTP: every guard refuses what it must, and every action is made by
//! the library for the human and audited as theirs.

mod actions;
mod changelog;
mod client;
mod downloads;
mod guard;
mod held;
mod uploads;
