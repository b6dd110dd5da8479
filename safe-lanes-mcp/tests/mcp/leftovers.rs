//! What a hostile agent leaves behind, through the real server, run twice: as the user
//! running the tests (root in CI) and as an ordinary user (uid 65534). After each attack the
//! human's own, unconfined tools run on what it left — `git status`, `git commit`, a git
//! alias, `cargo build` — and nothing outside the grants may change; `stat` of everything
//! left in the grant shows no set-uid or set-gid bit and no device node or FIFO.
//!
//! When the tests do not run as root they cannot switch users; the second run is then made
//! as the same (already unprivileged) user.

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::transport::TokioChildProcess;
use serde_json::{Map, Value, json};

use safe_lanes_testkit::users::{self, UserDir, give_tree};

use crate::util::{Client, cli_binary, refusal_code};

/// One user's world: a state root, folders, copies of both binaries that user can run, and a
/// server running as that user.
struct Lab {
    dir: UserDir,
}

impl Lab {
    /// The labs of both runs.
    fn both() -> [Lab; 2] {
        users::both().map(Lab::new)
    }

    fn new(uid: u32) -> Self {
        let dir = UserDir::new(uid, &["home", "proj", "outside"]);
        let server = PathBuf::from(env!("CARGO_BIN_EXE_safe-lanes-mcp"));
        dir.copy_binary(&server, "safe-lanes-mcp");
        dir.copy_binary(&cli_binary(), "safe-lanes");
        Self { dir }
    }

    fn p(&self, rel: &str) -> PathBuf {
        self.dir.p(rel)
    }

    fn who(&self) -> String {
        format!("uid {}", self.dir.uid)
    }

    /// Give everything in the lab to its user.
    fn give(&self) {
        give_tree(self.dir.tmp.path(), self.dir.uid, self.dir.gid);
    }

    fn as_user(&self, command: &mut Command) {
        self.dir.run_as(command);
    }

    /// A program of the human's, run as the lab's user, outside any sandbox, in `cwd`.
    fn human(&self, program: &str, args: &[&str], cwd: &Path) -> Output {
        let mut command = Command::new(program);
        command
            .args(args)
            .current_dir(cwd)
            .env_clear()
            .env("HOME", self.p("home"))
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("GIT_AUTHOR_NAME", "Human")
            .env("GIT_AUTHOR_EMAIL", "human@example.com")
            .env("GIT_COMMITTER_NAME", "Human")
            .env("GIT_COMMITTER_EMAIL", "human@example.com");
        self.as_user(&mut command);
        command.output().unwrap()
    }

    /// `git ARGS` in `proj`, as the human; it must succeed.
    fn git(&self, args: &[&str]) -> String {
        let out = self.human("git", args, &self.p("proj"));
        assert!(
            out.status.success(),
            "{}: git {args:?}: {out:?}",
            self.who()
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The human's CLI on this lab's state root.
    fn cli(&self, args: &[&str]) -> Value {
        let mut command = Command::new(self.p("safe-lanes"));
        command
            .arg("--root")
            .arg(self.p("state"))
            .arg("--json")
            .args(args)
            .env_clear()
            .env("HOME", self.p("home"))
            .env("PATH", "/usr/bin:/bin");
        self.as_user(&mut command);
        let out = command.output().unwrap();
        assert!(out.status.success(), "{}: {args:?}: {out:?}", self.who());
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// Grant `proj` read-write.
    fn grant_proj(&self) {
        let proj = self.p("proj");
        self.cli(&[
            "grant",
            "add",
            "--alias",
            "proj",
            "--path",
            proj.to_str().unwrap(),
            "--access",
            "read_write",
            "--reason",
            "the agent's project",
        ]);
    }

    /// A server on this lab's state root, running as its user, started with `extra`.
    async fn server(&self, extra: &[&str]) -> Client {
        serve(|| self.server_command(extra)).await
    }

    fn server_command(&self, extra: &[&str]) -> Command {
        let mut c = Command::new(self.p("safe-lanes-mcp"));
        c.arg("--root")
            .arg(self.p("state"))
            .args(extra)
            .env_clear()
            .env("HOME", self.p("home"))
            .env("PATH", "/usr/bin:/bin")
            .env("RUST_LOG", "error")
            .current_dir(self.p("home"));
        self.as_user(&mut c);
        c
    }
}

/// A client of the server `command` starts, retrying while a copied binary is still open for
/// writing in a child another test forked during the copy (`ETXTBSY` until it calls `exec`).
async fn serve(command: impl Fn() -> Command) -> Client {
    for _ in 0..100 {
        match TokioChildProcess::new(tokio::process::Command::from(command())) {
            Ok(child) => return ().serve(child).await.unwrap(),
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::TXTBSY.raw_os_error()) => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => panic!("the server cannot start: {e}"),
        }
    }
    panic!("the server binary stayed busy")
}

/// Every path under `dir`, `dir` included.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = vec![dir.to_path_buf()];
    let mut at = 0;
    while at < out.len() {
        let path = out[at].clone();
        at += 1;
        let is_dir = std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir());
        if is_dir {
            for entry in std::fs::read_dir(&path).unwrap() {
                out.push(entry.unwrap().path());
            }
        }
    }
    out
}

async fn call(client: &Client, tool: &str, args: Value) -> CallToolResult {
    let Value::Object(args) = args else {
        panic!("arguments are an object")
    };
    let args: Map<String, Value> = args;
    client
        .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args))
        .await
        .unwrap()
}

/// Run `script` with `shell_exec` in `proj`; its structured result.
async fn shell(client: &Client, script: &str) -> Value {
    let result = call(
        client,
        "shell_exec",
        json!({ "command": script, "cwd": "proj", "timeout_s": 120 }),
    )
    .await;
    assert_eq!(result.is_error, Some(false), "{result:?}");
    result.structured_content.expect("structured content")
}

#[tokio::test]
async fn git_runs_nothing_the_agent_planted_and_commits_still_work() {
    for lab in Lab::both() {
        let who = lab.who();
        lab.git(&["init", "-q", "."]);
        std::fs::write(lab.p("proj/readme"), "hello\n").unwrap();
        lab.git(&["add", "readme"]);
        lab.git(&["commit", "-q", "-m", "the human's first commit"]);
        lab.give();
        let config_before = std::fs::read(lab.p("proj/.git/config")).unwrap();
        let hooks_before = walk(&lab.p("proj/.git/hooks"));
        lab.grant_proj();
        let client = lab.server(&[]).await;
        let out = lab.p("outside");
        let o = out.display();
        // Each line says whether its attack got through (`PLANTED …`).
        let script = format!(
            r#"
            git config core.fsmonitor "touch {o}/fsmonitor; echo" && echo "PLANTED fsmonitor"
            git config alias.st "!touch {o}/alias" && echo "PLANTED alias"
            git config core.hooksPath "{o}" && echo "PLANTED hooksPath"
            printf '#!/bin/sh\ntouch {o}/hook\n' > .git/hooks/pre-commit && echo "PLANTED hook"
            chmod +x .git/hooks/pre-commit 2>/dev/null
            printf '* filter=x\n' > .git/info/attributes && echo "PLANTED attributes"
            printf '../evil\n' > .git/commondir && echo "PLANTED commondir"
            printf '[core]\n\tfsmonitor = touch {o}/worktree\n' > .git/config.worktree && echo "PLANTED config.worktree"
            mv .git .git-old && echo "PLANTED moved-git"
            mkdir -p .vscode && printf '{{}}' > .vscode/tasks.json && echo "PLANTED vscode"
            printf 'touch {o}/envrc\n' > .envrc && echo "PLANTED envrc"
            printf '[submodule "x"]\n' > .gitmodules && echo "PLANTED gitmodules"
            echo "agent's change" >> readme && git add readme &&
              git -c user.name=Agent -c user.email=agent@example.com commit -q -m "the agent's commit" &&
              echo COMMITTED
            "#
        );
        let result = shell(&client, &script).await;
        let stdout = result["stdout"].as_str().unwrap();
        assert!(!stdout.contains("PLANTED"), "{who}: {result}");
        assert!(
            stdout.contains("COMMITTED"),
            "{who}: a commit works: {result}"
        );

        // The agent's only write tool refuses the same paths.
        for (path, diff) in [
            (
                ".git/config",
                "--- a/.git/config\n+++ b/.git/config\n@@ -1 +1,2 @@\n [core]\n+\tfsmonitor = touch x\n",
            ),
            (
                ".vscode/settings.json",
                "--- /dev/null\n+++ b/.vscode/settings.json\n@@ -0,0 +1 @@\n+{}\n",
            ),
            (
                ".envrc",
                "--- /dev/null\n+++ b/.envrc\n@@ -0,0 +1 @@\n+touch x\n",
            ),
            (
                ".git/HEAD",
                "--- a/.git/HEAD\n+++ b/.git/HEAD\n@@ -1 +1 @@\n-x\n+y\n",
            ),
        ] {
            let patched = call(
                &client,
                "folder_patch",
                json!({ "alias": "proj", "path": path, "diff": diff }),
            )
            .await;
            assert_eq!(
                refusal_code(&patched),
                "protected_path",
                "{who}: {path}: {patched:?}"
            );
        }
        drop(client);

        // The human's own tools, unconfined, on what the agent left.
        let status = lab.git(&["status", "--porcelain"]);
        assert_eq!(
            status, "",
            "{who}: nothing left in the working tree: {status}"
        );
        lab.git(&[
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "the human's next commit",
        ]);
        let _ = lab.human("git", &["st"], &lab.p("proj"));
        let log = lab.git(&["log", "--format=%s"]);
        assert!(log.contains("the agent's commit"), "{who}: {log}");
        assert_eq!(walk(&out), vec![out.clone()], "{who}: nothing ran outside");
        assert_eq!(
            std::fs::read(lab.p("proj/.git/config")).unwrap(),
            config_before,
            "{who}"
        );
        assert_eq!(walk(&lab.p("proj/.git/hooks")), hooks_before, "{who}");
        for gone in [
            ".vscode",
            ".envrc",
            ".gitmodules",
            ".idea",
            ".git/commondir",
            ".git/config.worktree",
            ".git-old",
        ] {
            assert!(
                !lab.p("proj").join(gone).exists(),
                "{who}: {gone} left behind"
            );
        }
    }
}

#[tokio::test]
async fn no_set_id_bit_device_node_or_fifo_reaches_the_host() {
    for lab in Lab::both() {
        let who = lab.who();
        lab.grant_proj();
        let client = lab.server(&[]).await;
        let script = r#"
            cp /bin/true s && chmod 4755 s && echo "PLANTED chmod-4755"
            chmod u+s s && echo "PLANTED chmod-u+s"
            chmod 2755 s && echo "PLANTED chmod-2755"
            mkdir d && chmod g+s d && echo "PLANTED dir-g+s"
            mkdir -m 2755 d2 && echo "PLANTED mkdir-2755"
            install -m 4755 /bin/true s2 && echo "PLANTED install-4755"
            python3 -c 'import os; os.close(os.open("s3", os.O_CREAT | os.O_WRONLY, 0o6755))' 2>/dev/null && echo "PLANTED open-6755"
            python3 -c 'import os; os.mkfifo("README.md")' 2>/dev/null && echo "PLANTED fifo"
            mkfifo build.log && echo "PLANTED mkfifo"
            python3 -c 'import os, stat; os.mknod("tty", 0o666 | stat.S_IFCHR, os.makedev(5, 0))' 2>/dev/null && echo "PLANTED char-device"
            python3 -c 'import os, stat; os.mknod("sock", 0o666 | stat.S_IFSOCK)' 2>/dev/null && echo "PLANTED socket-node"
            echo done
        "#;
        let result = shell(&client, script).await;
        let stdout = result["stdout"].as_str().unwrap();
        assert!(stdout.contains("done"), "{who}: {result}");
        assert!(!stdout.contains("PLANTED"), "{who}: {result}");
        drop(client);
        for path in walk(&lab.p("proj")) {
            let meta = std::fs::symlink_metadata(&path).unwrap();
            assert_eq!(
                meta.mode() & 0o6000,
                0,
                "{who}: {} has a set-id bit",
                path.display()
            );
            let kind = meta.file_type();
            let special = kind.is_fifo()
                || kind.is_char_device()
                || kind.is_block_device()
                || kind.is_socket();
            assert!(!special, "{who}: {} is a special node", path.display());
        }
        // The human's `cat` of a name the agent chose does not block.
        let cat = lab.human(
            "timeout",
            &["5", "cat", "README.md", "build.log"],
            &lab.p("proj"),
        );
        assert!(
            !cat.status.success(),
            "{who}: there is nothing to read: {cat:?}"
        );
    }
}

/// The registry of `CARGO_HOME` as far as one crate needs it offline: the index entry, the
/// `.crate` file and the unpacked sources of `name`-`version`, copied into `home`.
fn registry_with(home: &Path, name: &str, version: &str) {
    let real = std::env::var_os("CARGO_HOME").map_or_else(
        || PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cargo"),
        PathBuf::from,
    );
    let index = std::fs::read_dir(real.join("registry/index"))
        .expect("this suite needs cargo's registry (it built the workspace)")
        .map(|e| e.unwrap().file_name())
        .find(|n| n.to_string_lossy().starts_with("index.crates.io-"))
        .expect("a crates.io index");
    let index = index.to_str().unwrap();
    let entry = format!("{}/{}/{name}", &name[..2], &name[2..4]);
    for (from, to) in [
        (format!("registry/index/{index}/config.json"), None),
        (format!("registry/index/{index}/.cache/{entry}"), None),
        (
            format!("registry/cache/{index}/{name}-{version}.crate"),
            None,
        ),
        (format!("registry/src/{index}/{name}-{version}"), Some(())),
    ] {
        let (from, dest) = (real.join(&from), home.join(&from));
        assert!(
            from.exists(),
            "this suite needs {} in cargo's registry",
            from.display()
        );
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        let status = Command::new("cp")
            .arg(if to.is_some() { "-a" } else { "-p" })
            .arg(&from)
            .arg(&dest)
            .status()
            .unwrap();
        assert!(status.success());
    }
}

#[tokio::test]
async fn a_poisoned_cache_never_runs_in_the_humans_build() {
    let (name, version) = ("itoa", "1.0.19");
    for lab in Lab::both() {
        let who = lab.who();
        let cargo_home = lab.p("home/.cargo");
        registry_with(&cargo_home, name, version);
        // A project of the human's that no grant names, depending on the cached crate.
        let human = lab.p("human-proj");
        std::fs::create_dir_all(human.join("src")).unwrap();
        std::fs::write(
            human.join("Cargo.toml"),
            format!(
                "[package]\nname = \"human\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
                 [dependencies]\n{name} = \"={version}\"\n"
            ),
        )
        .unwrap();
        std::fs::write(
            human.join("src/main.rs"),
            "fn main() { println!(\"{}\", itoa::Buffer::new().format(7)); }\n",
        )
        .unwrap();
        lab.give();
        let registry = cargo_home.join("registry");
        let before: Vec<(PathBuf, Vec<u8>)> = walk(&registry)
            .into_iter()
            .filter(|p| p.is_file())
            .map(|p| {
                let bytes = std::fs::read(&p).unwrap();
                (p, bytes)
            })
            .collect();
        lab.cli(&[
            "grant",
            "add",
            "--alias",
            "registry",
            "--path",
            registry.to_str().unwrap(),
            "--kind",
            "cache",
            "--reason",
            "cargo's downloads",
        ]);
        let client = lab.server(&[]).await;
        let marker = lab.p("outside/build-script-ran");
        let script = format!(
            r#"src=$(echo "$WORKFLOW_FOLDER_REGISTRY"/src/*/{name}-{version})
            printf 'fn main() {{ std::fs::write("{m}", "pwned").unwrap(); }}\n' > "$src/build.rs" &&
            if grep -q '^build = ' "$src/Cargo.toml"; then
              sed -i 's/^build = .*/build = "build.rs"/' "$src/Cargo.toml"
            else
              sed -i 's/^\[package\]$/[package]\nbuild = "build.rs"/' "$src/Cargo.toml"
            fi &&
            grep -q 'build = "build.rs"' "$src/Cargo.toml" && echo REWRITTEN"#,
            m = marker.display()
        );
        let result = call(&client, "shell_exec", json!({ "command": script })).await;
        assert_eq!(result.is_error, Some(false), "{who}: {result:?}");
        let out = result.structured_content.unwrap();
        assert!(
            out["stdout"].as_str().unwrap().contains("REWRITTEN"),
            "{who}: the cache is writable to confined commands: {out}"
        );
        // Commands share what they write to a cache.
        let seen = call(
            &client,
            "shell_exec",
            json!({ "command": format!("cat \"$WORKFLOW_FOLDER_REGISTRY\"/src/*/{name}-{version}/build.rs") }),
        )
        .await;
        let seen = seen.structured_content.unwrap();
        assert!(
            seen["stdout"].as_str().unwrap().contains("pwned"),
            "{who}: {seen}"
        );
        drop(client);

        // The human's own, unconfined build of a project never granted to anyone. The
        // toolchain is the test's own (root's in CI), so it runs as the test's user.
        let rustup = std::env::var_os("RUSTUP_HOME").map_or_else(
            || PathBuf::from(std::env::var_os("HOME").unwrap()).join(".rustup"),
            PathBuf::from,
        );
        let built = Command::new(env!("CARGO"))
            .args(["build", "--offline", "-q"])
            .current_dir(&human)
            .env("CARGO_HOME", &cargo_home)
            .env("RUSTUP_HOME", &rustup)
            .env("CARGO_TARGET_DIR", lab.p("human-target"))
            .output()
            .unwrap();
        assert!(
            built.status.success(),
            "{who}: the human's build: {built:?}"
        );
        assert!(
            !marker.exists(),
            "{who}: the planted build script ran as the human"
        );
        for (path, bytes) in &before {
            assert_eq!(
                &std::fs::read(path).unwrap(),
                bytes,
                "{who}: {} changed",
                path.display()
            );
        }
        assert!(
            !walk(&registry).iter().any(|p| p.ends_with("build.rs")),
            "{who}: nothing was added to the human's cache"
        );
        let listed = lab.cli(&["grant", "list"]);
        let cache = &listed["grants"][0];
        assert!(
            cache["private_layer"]["bytes"].as_u64().unwrap() > 0,
            "{who}: {listed}"
        );
        let cleared = lab.cli(&[
            "grant",
            "cache-clear",
            "registry",
            "--reason",
            "start afresh",
        ]);
        assert_eq!(cleared["cleared"], true, "{who}: {cleared}");
        let listed = lab.cli(&["grant", "list"]);
        assert!(
            listed["grants"][0]["private_layer"].is_null(),
            "{who}: {listed}"
        );
    }
}

#[tokio::test]
async fn an_uploader_template_never_runs_a_received_name() {
    for lab in Lab::both() {
        let who = lab.who();
        // `{file}` inside a shell command line is refused before the server serves.
        let refused = lab
            .server_command(&["--uploader", "sh -c 'echo uploading {file}'"])
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert!(!refused.status.success(), "{who}: {refused:?}");
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert!(stderr.contains("whole argument"), "{who}: {stderr}");

        let out = lab.p("outside");
        let uploader = format!(
            r#"/bin/sh -c 'cd {o} && echo uploading {{name}} && test -f "$OLDPWD/$1"' sh {{file}}"#,
            o = out.display()
        );
        let client = lab.server(&["--uploader", &uploader]).await;
        let hostile = "report$(touch pwned)x`touch pwned2`.pdf";
        let sent = call(
            &client,
            "upload_content",
            json!({ "filename": hostile, "text": "x" }),
        )
        .await;
        assert_eq!(sent.is_error, Some(false), "{who}: {sent:?}");
        let sent = sent.structured_content.unwrap();
        let staged = sent["staged"].as_str().unwrap();
        assert!(
            staged
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._/-".contains(c)),
            "{who}: {sent}"
        );
        assert_eq!(
            sent["name"], "report$(touch pwned)x`touch pwned2`.pdf",
            "{who}: {sent}"
        );
        assert_eq!(
            sent["stdout"],
            format!("uploading {}\n", sent["name"].as_str().unwrap())
        );
        // A received file with such a name, uploaded from the download lane.
        let saved = call(
            &client,
            "download_save",
            json!({ "filename": "a;$(touch pwned3).txt", "text": "y" }),
        )
        .await;
        let path = saved.structured_content.unwrap()["path"]
            .as_str()
            .unwrap()
            .to_owned();
        let sent = call(&client, "upload_file", json!({ "path": path })).await;
        assert_eq!(sent.is_error, Some(false), "{who}: {sent:?}");
        drop(client);
        assert_eq!(walk(&out), vec![out.clone()], "{who}: a name ran as code");
        assert!(
            walk(&lab.p("state/.uploads")).len() == 1,
            "{who}: the staging was erased"
        );
    }
}

/// A memory cgroup limited to `bytes` (cgroup v1's `memory` hierarchy, or v2 where the root
/// delegates `memory`), removed when dropped.
struct MemoryCgroup(PathBuf);

impl MemoryCgroup {
    fn new(bytes: u64) -> Self {
        assert!(
            rustix::process::geteuid().is_root(),
            "this test needs root, to make a memory cgroup (as in CI)"
        );
        let name = format!("safe-lanes-test-{}", std::process::id());
        let v1 = Path::new("/sys/fs/cgroup/memory");
        let v2 = Path::new("/sys/fs/cgroup");
        let (dir, limit) = if v1.join("cgroup.procs").exists() {
            (v1.join(name), "memory.limit_in_bytes")
        } else {
            let delegated = std::fs::read_to_string(v2.join("cgroup.subtree_control"))
                .is_ok_and(|c| c.split_whitespace().any(|c| c == "memory"));
            assert!(delegated, "this test needs the memory cgroup controller");
            (v2.join(name), "memory.max")
        };
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join(limit), bytes.to_string()).unwrap();
        // No swap to escape to, where the controller offers the knob.
        let _ = std::fs::write(dir.join("memory.swap.max"), "0");
        Self(dir)
    }
}

impl Drop for MemoryCgroup {
    fn drop(&mut self) {
        for _ in 0..100 {
            if std::fs::remove_dir(&self.0).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

#[tokio::test]
async fn filling_tmp_past_memory_kills_commands_never_the_gateway() {
    let lab = Lab::new(rustix::process::geteuid().as_raw());
    let cgroup = MemoryCgroup::new(256 << 20);
    // The gateway (and so every command it starts) in the limited cgroup, its `/tmp` budget
    // above the limit: only the kernel stops the commands.
    let budget = (2u64 << 30).to_string();
    let client = serve(|| {
        let server = lab.server_command(&["--tmp-budget", &budget]);
        let mut wrapped = Command::new("/bin/sh");
        wrapped
            .args(["-c", r#"echo 0 > "$0" && exec "$@""#])
            .arg(cgroup.0.join("cgroup.procs"))
            .arg(server.get_program())
            .args(server.get_args())
            .envs(server.get_envs().filter_map(|(k, v)| Some((k, v?))))
            .current_dir(lab.p("home"));
        wrapped
    })
    .await;
    let fill = "dd if=/dev/zero of=/tmp/fill bs=1M count=200 2>/dev/null; echo \"dd-exit=$?\"";
    let mut jobs = Vec::new();
    for _ in 0..3 {
        let started = call(
            &client,
            "shell_exec",
            json!({ "command": fill, "background": true }),
        )
        .await;
        let started = started.structured_content.unwrap();
        jobs.push(started["job_id"].as_str().unwrap().to_owned());
    }
    let mut killed = 0;
    for job in &jobs {
        loop {
            let report = call(
                &client,
                "shell_job_status",
                json!({ "job_id": job, "wait_s": 30 }),
            )
            .await;
            let report = report.structured_content.expect("the gateway answers");
            if report["status"] == "finished" {
                let dd_killed = report["stdout"]
                    .as_str()
                    .unwrap_or("")
                    .contains("dd-exit=137");
                if report["signal"] == 9 || dd_killed {
                    killed += 1;
                }
                break;
            }
        }
    }
    assert!(killed >= 1, "the kernel killed a command");
    // The gateway lives and answers.
    let listed = call(&client, "folder_grants_list", json!({})).await;
    assert_eq!(listed.is_error, Some(false), "{listed:?}");
    drop(client);
    drop(cgroup);
}

#[tokio::test]
async fn all_private_tmps_of_a_gateway_share_one_budget() {
    let lab = Lab::new(rustix::process::geteuid().as_raw());
    let client = lab
        .server(&["--tmp-budget", &(3u64 << 20).to_string()])
        .await;
    // The first command takes the 3 MiB budget; the second gets the 1 MiB floor, and a
    // command past its share gets ENOSPC.
    let script = r#"echo "size=$(( $(stat -f -c '%b * %S' /tmp) / 1024 ))"
        dd if=/dev/zero of=/tmp/fill bs=1k count=2048 2>&1 | grep -o 'No space left' ; sleep 3"#;
    let mut jobs = Vec::new();
    for _ in 0..2 {
        let started = call(
            &client,
            "shell_exec",
            json!({ "command": script, "background": true }),
        )
        .await;
        let started = started.structured_content.unwrap();
        // The first report already holds what the job printed by then.
        jobs.push((
            started["job_id"].as_str().unwrap().to_owned(),
            started["stdout"].as_str().unwrap().to_owned(),
        ));
    }
    let mut outputs = Vec::new();
    for (job, first) in &jobs {
        let mut seen = first.clone();
        loop {
            let report = call(
                &client,
                "shell_job_status",
                json!({ "job_id": job, "wait_s": 10 }),
            )
            .await;
            let report = report.structured_content.unwrap();
            seen.push_str(report["stdout"].as_str().unwrap());
            if report["status"] == "finished" {
                break;
            }
        }
        outputs.push(seen);
    }
    assert!(outputs[0].contains("size=3072"), "{outputs:?}");
    assert!(
        !outputs[0].contains("No space left"),
        "2 MiB fit in 3 MiB: {outputs:?}"
    );
    assert!(outputs[1].contains("size=1024"), "{outputs:?}");
    assert!(outputs[1].contains("No space left"), "{outputs:?}");
    // Given back when they end: the next command has the whole budget again.
    let after = shell_anywhere(&client, "echo $(( $(stat -f -c '%b * %S' /tmp) / 1024 ))").await;
    assert_eq!(after.trim(), "3072");
}

/// Run `script` with `shell_exec` in the scratch directory; its stdout.
async fn shell_anywhere(client: &Client, script: &str) -> String {
    let result = call(client, "shell_exec", json!({ "command": script })).await;
    assert_eq!(result.is_error, Some(false), "{result:?}");
    result.structured_content.unwrap()["stdout"]
        .as_str()
        .unwrap()
        .to_owned()
}
