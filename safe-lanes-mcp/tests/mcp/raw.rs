//! A client that speaks raw JSON-RPC lines to the real server, for what the rmcp client never
//! sends: overlong lines, a flood of requests, cancellations, another user id.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::{Value, json};

/// The line that tells the server has started (on its stderr).
const READY: &str = "serving MCP on stdio";

/// A running server and the pipes to it.
pub(crate) struct Raw {
    pub(crate) child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    /// What the server wrote to stderr before it said it was ready.
    pub(crate) startup: Vec<String>,
}

impl Raw {
    /// Start `binary --root ROOT ARGS` (as `user`, a uid and gid, when given), and wait until it
    /// says it is serving. `RUST_LOG` is left unset: the server logs warnings.
    pub(crate) fn start(binary: &Path, root: &Path, args: &[&str], user: Option<u32>) -> Self {
        let mut command = Command::new(binary);
        command
            .arg("--root")
            .arg(root)
            .args(args)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(id) = user {
            command.uid(id).gid(id);
        }
        let mut child = command.spawn().expect("start the server");
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let mut startup = Vec::new();
        loop {
            let mut line = String::new();
            assert_ne!(
                stderr.read_line(&mut line).unwrap(),
                0,
                "the server ended before it was ready: {startup:?}"
            );
            if line.contains(READY) {
                break;
            }
            startup.push(line);
        }
        // Keep draining stderr so the server never blocks on it.
        std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
        Self {
            child,
            stdin,
            stdout,
            startup,
        }
    }

    /// Start the server as this process's user and initialize the session.
    pub(crate) fn initialized(root: &Path, args: &[&str]) -> Self {
        let mut raw = Self::start(
            Path::new(env!("CARGO_BIN_EXE_safe-lanes-mcp")),
            root,
            args,
            None,
        );
        raw.send(
            &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}}}),
        );
        assert_eq!(raw.recv()["id"], 0);
        raw.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        raw
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Write bytes to the server's stdin.
    pub(crate) fn write(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).unwrap();
        stdin.flush().unwrap();
    }

    /// Send one message as one line.
    pub(crate) fn send(&mut self, message: &Value) {
        let mut line = message.to_string().into_bytes();
        line.push(b'\n');
        self.write(&line);
    }

    /// Call a tool (without waiting for its answer).
    pub(crate) fn call(&mut self, id: i64, tool: &str, arguments: Value) {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}}));
    }

    /// The next line from the server.
    pub(crate) fn recv(&mut self) -> Value {
        let mut line = String::new();
        assert_ne!(self.stdout.read_line(&mut line).unwrap(), 0, "stdout ended");
        serde_json::from_str(&line).unwrap()
    }

    /// Close stdin and read every remaining line until the server ends.
    pub(crate) fn finish(mut self) -> Vec<Value> {
        drop(self.stdin.take());
        let mut rest = Vec::new();
        loop {
            let mut line = String::new();
            if self.stdout.read_line(&mut line).unwrap() == 0 {
                break;
            }
            rest.push(serde_json::from_str(&line).unwrap());
        }
        assert!(self.child.wait().unwrap().success());
        rest
    }

    /// A field of `/proc/<pid>/status` (such as `VmHWM`), as written there.
    pub(crate) fn status_field(&self, name: &str) -> String {
        proc_status_field(self.pid(), name)
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A field of `/proc/<pid>/status`.
pub(crate) fn proc_status_field(pid: u32, name: &str) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("no {name} in /proc/{pid}/status"))
        .trim()
        .to_owned()
}

/// A directory every user can enter, holding a copy (or a hard link) of the server binary, so
/// that the server can be started as another user wherever the build directory is.
pub(crate) struct Shared {
    pub(crate) tmp: tempfile::TempDir,
}

impl Shared {
    pub(crate) fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let binary = Path::new(env!("CARGO_BIN_EXE_safe-lanes-mcp"));
        let shared = tmp.path().join("safe-lanes-mcp");
        if std::fs::hard_link(binary, &shared).is_err() {
            std::fs::copy(binary, &shared).unwrap();
        }
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o755)).unwrap();
        Self { tmp }
    }

    pub(crate) fn binary(&self) -> PathBuf {
        self.tmp.path().join("safe-lanes-mcp")
    }

    /// A fresh state root directory owned by `uid`.
    pub(crate) fn root_for(&self, name: &str, uid: u32) -> PathBuf {
        let root = self.tmp.path().join(name);
        std::fs::create_dir(&root).unwrap();
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::os::unix::fs::chown(&root, Some(uid), Some(uid)).unwrap();
        root
    }
}
