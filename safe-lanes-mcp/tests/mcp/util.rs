//! A server in a temporary world, a client to drive it, and the CLI for the human's part.

use std::path::{Path, PathBuf};
use std::process::Command;

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Map, Value};

pub(crate) type Client = RunningService<RoleClient, ()>;

/// A temporary state root and folders, with a running server.
pub(crate) struct World {
    pub(crate) tmp: tempfile::TempDir,
    pub(crate) client: Client,
}

impl World {
    pub(crate) async fn new() -> Self {
        Self::with_args(&[]).await
    }

    /// A server started with extra arguments (`--uploader …`, `--max-bytes …`).
    pub(crate) async fn with_args(extra: &[&str]) -> Self {
        Self::with_env(extra, |_| Vec::new()).await
    }

    /// A server started with extra arguments and the variables `vars` gives for the world's
    /// directory (`GWSA_ROOT` …).
    pub(crate) async fn with_env(
        extra: &[&str],
        vars: impl FnOnce(&Path) -> Vec<(&'static str, PathBuf)>,
    ) -> Self {
        let tmp = tempfile::tempdir().unwrap();
        for d in ["proj", "docs", "share", "outside"] {
            std::fs::create_dir(tmp.path().join(d)).unwrap();
        }
        let vars = vars(tmp.path());
        let client = connect_with_env(&tmp.path().join("state"), extra, &vars, ()).await;
        Self { tmp, client }
    }

    pub(crate) fn p(&self, rel: &str) -> PathBuf {
        self.tmp.path().join(rel)
    }

    pub(crate) fn root(&self) -> PathBuf {
        self.p("state")
    }

    /// Call a tool with JSON arguments; a JSON-RPC error is returned as `Err`.
    pub(crate) async fn call(
        &self,
        tool: &str,
        args: Value,
    ) -> Result<CallToolResult, rmcp::ServiceError> {
        let args: Map<String, Value> = match args {
            Value::Object(map) => map,
            other => panic!("arguments must be an object: {other}"),
        };
        self.client
            .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args))
            .await
    }

    /// A successful call's structured content.
    pub(crate) async fn ok(&self, tool: &str, args: Value) -> Value {
        let result = self.call(tool, args.clone()).await.unwrap();
        assert_eq!(result.is_error, Some(false), "{tool} {args}: {result:?}");
        result.structured_content.expect("structured content")
    }

    /// A refused call's code, checking the refusal shape on the way.
    pub(crate) async fn refused(&self, tool: &str, args: Value) -> String {
        let result = self.call(tool, args.clone()).await.unwrap();
        assert_eq!(result.is_error, Some(true), "{tool} {args}: {result:?}");
        refusal_code(&result)
    }

    /// A refused call's code and message.
    pub(crate) async fn refusal(&self, tool: &str, args: Value) -> (String, String) {
        let result = self.call(tool, args.clone()).await.unwrap();
        let code = refusal_code(&result);
        let text = &result.content[0].as_text().expect("text").text;
        (code.clone(), text[code.len() + 2..].to_owned())
    }

    /// Run the human's CLI on this world's state root; it must succeed.
    pub(crate) fn cli(&self, args: &[&str]) -> Value {
        let (ok, json) = self.run_cli(args, b"");
        assert!(ok, "safe-lanes {args:?}: {json}");
        json
    }

    /// The human grants the folder `rel` of this world as `alias` with `access`, through the
    /// CLI; the grant's JSON.
    pub(crate) fn grant(&self, alias: &str, rel: &str, access: &str) -> Value {
        let path = self.p(rel).display().to_string();
        self.cli(&[
            "grant",
            "add",
            "--alias",
            alias,
            "--path",
            &path,
            "--access",
            access,
            "--reason",
            "for the test",
        ])
    }

    /// The instructions a client connecting now is given.
    pub(crate) async fn instructions(&self) -> String {
        let client = connect(&self.root(), &[], ()).await;
        let instructions = client
            .peer_info()
            .and_then(|info| info.instructions.clone())
            .expect("instructions");
        client.cancel().await.unwrap();
        instructions
    }

    /// Run the human's CLI fed `stdin`; it must succeed.
    pub(crate) fn cli_in(&self, args: &[&str], stdin: &[u8]) -> Value {
        let (ok, json) = self.run_cli(args, stdin);
        assert!(ok, "safe-lanes {args:?}: {json}");
        json
    }

    /// Run the human's CLI, whatever its exit status (a command that fails): its JSON.
    pub(crate) fn cli_any(&self, args: &[&str]) -> Value {
        self.run_cli(args, b"").1
    }

    fn run_cli(&self, args: &[&str], stdin: &[u8]) -> (bool, Value) {
        use std::io::Write;
        let mut child = Command::new(cli_binary())
            .arg("--root")
            .arg(self.root())
            .arg("--json")
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(stdin).unwrap();
        let out = child.wait_with_output().unwrap();
        let json = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("safe-lanes {args:?}: {e}: {:?}", out.stdout));
        (out.status.success(), json)
    }
}

/// A server on the state root `root`, started with `extra` arguments, and a client with
/// `handler` connected to it.
pub(crate) async fn connect<H: ClientHandler>(
    root: &Path,
    extra: &[&str],
    handler: H,
) -> RunningService<RoleClient, H> {
    connect_with_env(root, extra, &[], handler).await
}

/// [`connect`], with the variables `vars` set for the server.
pub(crate) async fn connect_with_env<H: ClientHandler>(
    root: &Path,
    extra: &[&str],
    vars: &[(&str, PathBuf)],
    handler: H,
) -> RunningService<RoleClient, H> {
    let cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_safe-lanes-mcp")).configure(|c| {
        c.arg("--root").arg(root).args(extra);
        c.env_remove("SAFE_LANES_UPLOAD_ROOTS")
            .env_remove("GWSA_UPLOAD_ROOTS");
        c.env("RUST_LOG", "error");
        c.envs(vars.iter().map(|(k, v)| (k, v)));
    });
    handler
        .serve(TokioChildProcess::new(cmd).unwrap())
        .await
        .unwrap()
}

/// The code of an error result, after checking its shape: `isError`, one text
/// `"<code>: <message>"`, the code again in `_meta["safe-lanes/code"]`, and no structured
/// content (which a client would validate against the tool's output schema).
pub(crate) fn refusal_code(result: &CallToolResult) -> String {
    assert_eq!(result.is_error, Some(true), "{result:?}");
    assert!(result.structured_content.is_none(), "{result:?}");
    assert_eq!(result.content.len(), 1);
    let text = &result.content[0].as_text().expect("text").text;
    let meta = result.meta.as_ref().expect("_meta on an error");
    let code = meta.0["safe-lanes/code"].as_str().expect("code").to_owned();
    let message = text
        .strip_prefix(&format!("{code}: "))
        .expect("code prefix");
    assert!(!message.is_empty(), "{text}");
    code
}

/// The `safe-lanes` CLI built beside this server (built on demand when missing).
pub(crate) fn cli_binary() -> PathBuf {
    let dir = Path::new(env!("CARGO_BIN_EXE_safe-lanes-mcp"))
        .parent()
        .unwrap()
        .to_path_buf();
    let cli = dir.join("safe-lanes");
    if !cli.exists() {
        let status = Command::new(env!("CARGO"))
            .args(["build", "-q", "-p", "safe-lanes-cli"])
            .status()
            .unwrap();
        assert!(status.success(), "building the CLI");
    }
    cli
}

/// SHA-256 in hex.
pub(crate) fn sha256_hex(data: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
