//! The MCP server as a host runs it, for faults only a long-lived process has: a raw JSON-RPC
//! client over its stdio, and a server whose stderr cannot be written.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::Lab;

/// How long an answer may take before the server counts as stuck (far above any call here).
const ANSWER: Duration = Duration::from_secs(30);

/// The server binary: `SAFE_LANES_MCP`, else the one built beside this CLI (`cargo test
/// --workspace` builds it; `scripts/test` runs that first).
fn binary() -> PathBuf {
    let path = std::env::var_os("SAFE_LANES_MCP").map_or_else(
        || Path::new(env!("CARGO_BIN_EXE_safe-lanes")).with_file_name("safe-lanes-mcp"),
        PathBuf::from,
    );
    assert!(
        path.is_file(),
        "{} is missing: build it first (cargo build -p safe-lanes-mcp)",
        path.display()
    );
    path
}

/// A running server, initialized, and the answers it wrote.
pub(crate) struct Server {
    child: Child,
    stdin: Option<ChildStdin>,
    answers: Receiver<Value>,
}

impl Server {
    /// `safe-lanes-mcp --root <root> ARGS` with `stderr`, initialized.
    pub(crate) fn start(lab: &Lab, args: &[&str], stderr: Stdio) -> Self {
        Self::spawn(Self::command(lab, args), stderr)
    }

    /// The command that starts the server (to add to it before [`Server::spawn`]).
    pub(crate) fn command(lab: &Lab, args: &[&str]) -> Command {
        let mut command = Command::new(binary());
        command
            .arg("--root")
            .arg(lab.root())
            .args(args)
            .env_clear()
            .env("HOME", lab.tmp.path())
            .env("PATH", std::env::var_os("PATH").unwrap_or_default());
        command
    }

    /// Start `command` with `stderr`, and initialize the session.
    pub(crate) fn spawn(mut command: Command, stderr: Stdio) -> Self {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("start the server");
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let (sender, answers) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in stdout.lines() {
                let Ok(line) = line else { break };
                let Ok(message) = serde_json::from_str::<Value>(&line) else {
                    continue;
                };
                if sender.send(message).is_err() {
                    break;
                }
            }
        });
        let mut server = Self {
            child,
            stdin,
            answers,
        };
        server.send(
            &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "faults", "version": "1"}}}),
        );
        assert!(server.answer(0)["result"].is_object(), "initialized");
        server.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        server
    }

    /// Send one message as one line.
    pub(crate) fn send(&mut self, message: &Value) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        let mut line = message.to_string().into_bytes();
        line.push(b'\n');
        stdin.write_all(&line).unwrap();
        stdin.flush().unwrap();
    }

    /// Call a tool (without waiting for its answer).
    pub(crate) fn call(&mut self, id: i64, tool: &str, arguments: Value) {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}}));
    }

    /// The answer to `id` (notifications and other answers before it are passed over).
    pub(crate) fn answer(&self, id: i64) -> Value {
        let deadline = Instant::now() + ANSWER;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.answers.recv_timeout(left) {
                Ok(message) if message["id"] == id => return message,
                Ok(_) => {}
                Err(RecvTimeoutError::Timeout) => panic!("no answer to {id}: the server is stuck"),
                Err(RecvTimeoutError::Disconnected) => panic!("the server ended before {id}"),
            }
        }
    }

    /// Close the server's stdin: the client went away.
    pub(crate) fn close(&mut self) {
        drop(self.stdin.take());
    }

    /// Wait for the server to end.
    pub(crate) fn wait(&mut self) -> ExitStatus {
        self.child.wait().unwrap()
    }

    /// `SIGKILL` the server.
    pub(crate) fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Run `calls` calls on `server`, each answered.
fn answers_every_call(server: &mut Server, calls: i64) {
    for id in 1..=calls {
        server.call(id, "downloads_list", json!({}));
        let answer = server.answer(id);
        assert!(
            answer["result"]["structuredContent"]["files"].is_array(),
            "{answer}"
        );
    }
}

/// Diagnostics on every call (`RUST_LOG=debug`): far more than a pipe holds.
fn chatty(lab: &Lab) -> Command {
    let mut command = Server::command(lab, &[]);
    command.env("RUST_LOG", "debug");
    command
}

#[test]
fn a_server_whose_stderr_is_a_full_file_answers_every_call() {
    let lab = Lab::new();
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("/dev/full: a file that cannot grow");
    let mut server = Server::spawn(chatty(&lab), Stdio::from(full));
    answers_every_call(&mut server, 300);
}

#[test]
fn a_server_whose_stderr_is_never_read_answers_every_call() {
    let lab = Lab::new();
    // The pipe's read end stays open, unread: once it holds 64 KiB, a write to it blocks.
    let (reader, writer) = std::io::pipe().unwrap();
    let mut server = Server::spawn(chatty(&lab), Stdio::from(writer));
    answers_every_call(&mut server, 300);
    drop(reader);
}
