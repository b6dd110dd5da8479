//! Tools and caches: a confined `cargo build` and `cargo test` with the toolchain approved,
//! a clear refusal without, nothing else of the home folder reachable, and `doctor`'s
//! proposals, run as printed, enough to build.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::util::{Env, Run, give_to_nobody, users};

/// The rustup installation this suite runs with: `(CARGO_HOME, RUSTUP_HOME)`.
fn rustup() -> (PathBuf, PathBuf) {
    let home = PathBuf::from(std::env::var_os("HOME").expect("HOME"));
    let var = |name: &str, default: &str| {
        std::env::var_os(name).map_or_else(|| home.join(default), PathBuf::from)
    };
    let (cargo, rustup) = (var("CARGO_HOME", ".cargo"), var("RUSTUP_HOME", ".rustup"));
    assert!(
        cargo.join("bin/cargo").exists() && rustup.join("toolchains").is_dir(),
        "this suite needs rustup (cargo in {}, toolchains in {})",
        cargo.display(),
        rustup.display()
    );
    (cargo, rustup)
}

/// A state root with a read-write grant `proj` holding a Cargo project without dependencies.
fn project() -> Env {
    let env = Env::new();
    let proj = env.tmp.path().join("proj");
    std::fs::create_dir_all(proj.join("src")).unwrap();
    std::fs::write(
        proj.join("Cargo.toml"),
        "[package]\nname = \"demo\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .unwrap();
    std::fs::write(
        proj.join("src/lib.rs"),
        "pub fn two() -> u8 { 2 }\n#[test]\nfn adds() { assert_eq!(two(), 2); }\n",
    )
    .unwrap();
    add(
        &env,
        &[
            "--alias",
            "proj",
            "--path",
            proj.to_str().unwrap(),
            "--access",
            "read_write",
        ],
    );
    env
}

fn add(env: &Env, args: &[&str]) {
    let mut all = vec!["grant", "add", "--reason", "test"];
    all.extend_from_slice(args);
    let run = env.run(&all, b"");
    assert_eq!(run.status, 0, "{args:?}: {run:?}");
}

fn cargo(env: &Env, sub: &str, home: &Path) -> Run {
    let args = [
        "exec",
        "--cwd",
        "proj",
        "--timeout",
        "600",
        "--",
        "cargo",
        sub,
        "--offline",
    ];
    env.run_env(&args, b"", &[("HOME", home.to_str().unwrap())])
}

#[test]
fn cargo_builds_and_tests_confined_once_the_toolchain_is_approved() {
    let (cargo_home, rustup_home) = rustup();
    let env = project();
    let real_home = PathBuf::from(std::env::var_os("HOME").unwrap());

    // Without the approvals: refused, naming what is missing.
    let refused = cargo(&env, "build", &real_home);
    assert_eq!(refused.status, 3, "{refused:?}");
    assert!(refused.stderr.contains("not_found"), "{refused:?}");
    assert!(
        refused.stderr.contains("no tool grant lets in"),
        "{refused:?}"
    );
    assert!(refused.stderr.contains("safe-lanes doctor"), "{refused:?}");
    assert!(
        !refused.stderr.contains("No such file or directory"),
        "{refused:?}"
    );

    let cargo_path = cargo_home.to_str().unwrap();
    add(
        &env,
        &[
            "--alias",
            "cargo",
            "--path",
            cargo_path,
            "--kind",
            "tool",
            "--bin",
            "bin",
            "--var",
            "CARGO_HOME",
        ],
    );
    let rustup_path = rustup_home.to_str().unwrap();
    add(
        &env,
        &[
            "--alias",
            "rustup",
            "--path",
            rustup_path,
            "--kind",
            "tool",
            "--var",
            "RUSTUP_HOME",
        ],
    );
    let registry = cargo_home.join("registry");
    std::fs::create_dir_all(&registry).unwrap();
    add(
        &env,
        &[
            "--alias",
            "registry",
            "--path",
            registry.to_str().unwrap(),
            "--kind",
            "cache",
        ],
    );

    let built = cargo(&env, "build", &real_home);
    assert_eq!(built.status, 0, "{built:?}");
    let tested = cargo(&env, "test", &real_home);
    assert_eq!(tested.status, 0, "{tested:?}");
    assert!(tested.stdout.contains("test adds ... ok"), "{tested:?}");
}

#[test]
fn a_tool_is_read_only_and_neither_a_tool_nor_a_cache_opens_the_rest_of_home() {
    for (who, wrapper) in users() {
        home_beside_a_tool(who, &wrapper);
    }
}

/// A home with a planted `.ssh` beside a tool and a cache, run as the user `wrapper` makes.
fn home_beside_a_tool(who: &str, wrapper: &[&str]) {
    let env = Env::new();
    let home = env.tmp.path().join("person");
    for dir in [".ssh", ".toolchain/bin", ".cache/tool"] {
        std::fs::create_dir_all(home.join(dir)).unwrap();
    }
    std::fs::write(home.join(".ssh/id_ed25519"), "PRIVATE KEY").unwrap();
    std::fs::write(home.join(".toolchain/credentials.toml"), "REGISTRY TOKEN").unwrap();
    std::fs::write(home.join(".toolchain/.netrc"), "NETRC PASSWORD").unwrap();
    let hello = home.join(".toolchain/bin/hello");
    std::fs::write(&hello, "#!/bin/sh\necho hello from the tool\n").unwrap();
    std::fs::set_permissions(&hello, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    if !wrapper.is_empty() {
        give_to_nobody(env.tmp.path());
    }
    let run = |args: &[&str]| env.run_as(wrapper, args);
    assert_eq!(run(&["init"]).status, 0, "{who}");
    let (tool, cache) = (home.join(".toolchain"), home.join(".cache/tool"));
    let (tool_path, cache_path) = (tool.to_str().unwrap(), cache.to_str().unwrap());
    let add_tool = [
        "grant", "add", "--reason", "test", "--alias", "tool", "--path", tool_path, "--kind",
        "tool",
    ];
    let added = run(&[&add_tool[..], &["--bin", "bin", "--var", "TOOL_HOME"]].concat());
    assert_eq!(added.status, 0, "{who}: {added:?}");
    let add_cache = [
        "grant",
        "add",
        "--reason",
        "test",
        "--alias",
        "tool-cache",
        "--path",
        cache_path,
    ];
    let added = run(&[&add_cache[..], &["--kind", "cache", "--var", "TOOL_CACHE"]].concat());
    assert_eq!(added.status, 0, "{who}: {added:?}");

    let script = format!(
        "hello; echo \"$TOOL_HOME $TOOL_CACHE\"; \
         touch \"$TOOL_CACHE/written\" && echo cache-written; \
         touch \"$TOOL_HOME/x\" 2>/dev/null && echo tool-written; \
         cat {key} 2>/dev/null && echo key-read; \
         ls -a {home} 2>/dev/null | grep -q ssh && echo ssh-visible; \
         ls {home}/.ssh 2>/dev/null && echo ssh-listed; \
         cat \"$TOOL_HOME/credentials.toml\" \"$TOOL_HOME/.netrc\" && echo credentials-empty; \
         : > \"$TOOL_HOME/credentials.toml\" 2>/dev/null && echo credentials-written; true",
        key = home.join(".ssh/id_ed25519").display(),
        home = home.display(),
    );
    let json = run(&["--json", "exec", "--", "/bin/sh", "-c", &script]).json();
    let out = json["stdout"].as_str().unwrap();
    assert!(
        out.contains("hello from the tool"),
        "{who}: the tool's bin is on PATH: {json}"
    );
    assert!(
        out.contains(&format!("{tool_path} {cache_path}")),
        "{who}: {json}"
    );
    assert!(out.contains("cache-written"), "{who}: {json}");
    assert!(
        out.contains("credentials-empty"),
        "{who}: a tool's credentials are there, empty: {json}"
    );
    for never in [
        "tool-written",
        "PRIVATE KEY",
        "key-read",
        "ssh-visible",
        "ssh-listed",
        "REGISTRY TOKEN",
        "NETRC PASSWORD",
        "credentials-written",
    ] {
        assert!(!out.contains(never), "{who}: {never}: {json}");
    }
    // What a command writes to a cache stays in the cache's private layer (ADR 0016).
    assert!(!cache.join("written").exists(), "{who}");
    let layer = env.root().join("caches/tool-cache/upper/written");
    assert!(layer.exists(), "{who}: {}", layer.display());
    assert!(!tool.join("x").exists(), "{who}");
    let kept = std::fs::read_to_string(tool.join("credentials.toml")).unwrap();
    assert_eq!(kept, "REGISTRY TOKEN", "{who}");
    // The kind fixes the access: a tool cannot be made writable.
    let widened = run(&[
        "--json",
        "grant",
        "set-access",
        "--reason",
        "test",
        "tool",
        "read_write",
    ]);
    assert_eq!(widened.code(), "invalid_argument", "{who}: {widened:?}");
}

#[test]
fn doctor_proposes_the_rust_toolchain_of_a_home_with_rustup() {
    let env = Env::new();
    let home = env.home();
    std::fs::create_dir_all(home.join(".cargo/bin")).unwrap();
    std::fs::create_dir_all(home.join(".cargo/registry")).unwrap();
    std::fs::create_dir_all(home.join(".rustup/toolchains/stable-x86_64-unknown-linux-gnu"))
        .unwrap();
    std::fs::write(home.join(".cargo/bin/cargo"), "").unwrap();
    assert_eq!(env.run(&["init"], b"").status, 0);
    let text = env.run(&["doctor"], b"");
    let root = env.root();
    let expected = format!(
        "safe-lanes --root {} grant add --alias rust-cargo --path {} --kind tool --bin bin --var CARGO_HOME --reason 'let confined commands use this toolchain'",
        root.display(),
        home.join(".cargo").display()
    );
    assert!(text.stdout.contains(&expected), "{}", text.stdout);
    let json = env.run(&["--json", "doctor"], b"").json();
    let rust = json["toolchains"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "rust")
        .unwrap();
    let aliases: Vec<_> = rust["grants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["alias"].as_str().unwrap())
        .collect();
    assert_eq!(aliases, ["rust-cargo", "rust-rustup", "rust-registry"]);
    assert_eq!(rust["grants"][0]["command"], expected.as_str());
}

#[test]
fn doctors_proposals_run_as_printed_let_cargo_test_run_confined() {
    let (cargo_home, _) = rustup();
    let env = project();
    let real_home = PathBuf::from(std::env::var_os("HOME").unwrap());
    let vars = [("HOME", real_home.to_str().unwrap())];
    let doctor = env.run_env(&["--json", "doctor"], b"", &vars).json();
    let rust = doctor["toolchains"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "rust")
        .unwrap_or_else(|| panic!("doctor finds rustup in {}: {doctor}", cargo_home.display()));
    // `safe-lanes` on PATH is this build.
    let bin = Path::new(env!("CARGO_BIN_EXE_safe-lanes"))
        .parent()
        .unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    for grant in rust["grants"].as_array().unwrap() {
        let command = grant["command"].as_str().unwrap();
        let ran = Command::new("/bin/sh")
            .arg("-c")
            .arg(command)
            .env("PATH", &path)
            .output()
            .unwrap();
        assert!(
            ran.status.success(),
            "{command}: {}",
            String::from_utf8_lossy(&ran.stderr)
        );
    }
    let tested = cargo(&env, "test", &real_home);
    assert_eq!(tested.status, 0, "{tested:?}");
    assert!(tested.stdout.contains("test adds ... ok"), "{tested:?}");
}

/// Where the kernel will not make a cache's overlay (here: a state root on an overlayfs, which
/// overlayfs refuses as an upper layer), a command that would see the cache is refused with
/// the reason, and nothing runs with the cache writable in place.
#[test]
#[allow(clippy::print_stderr)] // what was not tried and why, where the runner shows it
fn a_cache_the_kernel_cannot_overlay_refuses_the_command_naming_it() {
    use crate::util::{SETUP_FAILED, private_mounts};
    if let Err(why) = private_mounts() {
        eprintln!("skipped: a state root on an overlayfs needs a mount namespace: {why}");
        return;
    }
    let env = Env::new();
    let cache = env.tmp.path().join("cache");
    let layers = env.tmp.path().join("layers");
    for dir in [
        &cache,
        &layers.join("lower"),
        &layers.join("upper"),
        &layers.join("work"),
    ] {
        std::fs::create_dir_all(dir).unwrap();
    }
    std::fs::create_dir_all(env.root()).unwrap();
    let l = layers.display();
    let root = env.root();
    let cache_path = cache.to_str().unwrap();
    // Both steps in one namespace, since the overlayfs state root lives only in it.
    let both = format!(
        r#"mount -t overlay overlay -o userxattr,lowerdir={l}/lower,upperdir={l}/upper,workdir={l}/work "$1" || exit {SETUP_FAILED}; shift; "$@" grant add --alias cache --path {cache_path} --kind cache --reason t >/dev/null && exec "$@" --json exec -- /bin/sh -c 'touch "$WORKFLOW_FOLDER_CACHE/x"'"#
    );
    let wrapper = [
        "unshare",
        "-rm",
        "sh",
        "-c",
        &both,
        "sh",
        root.to_str().unwrap(),
    ];
    let run = env.run_wrapped(&wrapper, &[]);
    assert_ne!(run.status, SETUP_FAILED, "the overlay state root: {run:?}");
    assert_eq!(run.status, 3, "{run:?}");
    assert_eq!(run.code(), "sandbox_unavailable", "{run:?}");
    assert!(run.stdout.contains("or a cache as an overlay"), "{run:?}");
    assert!(
        !cache.join("x").exists(),
        "nothing was written in the human's cache"
    );
}

/// Regression: `shell_exec "cargo build"` said only `sh: cargo: not found`, with no hint of
/// tool grants. A command whose shell cannot find a program (exit 127) now gets a hint naming
/// where the program is and the tool grants that would let it in — in the JSON result and on
/// the human's screen.
#[test]
fn a_program_a_shell_cannot_find_is_named_with_the_tool_grants_that_would_let_it_in() {
    let _ = rustup();
    let env = project();
    let real_home = std::env::var("HOME").unwrap();
    let args = [
        "--json",
        "exec",
        "--cwd",
        "proj",
        "--",
        "sh",
        "-c",
        "cargo build --offline",
    ];
    let run = env.run_env(&args, b"", &[("HOME", &real_home)]);
    assert_eq!(run.status, 1, "{run:?}");
    let json = run.json();
    assert_eq!(json["exit_code"], 127, "{json}");
    assert!(
        json["stderr"]
            .as_str()
            .unwrap()
            .contains("cargo: not found"),
        "{json}"
    );
    let hint = json["hint"].as_str().expect("a hint");
    assert!(
        hint.starts_with("cargo: the program is not in the sandbox"),
        "{hint}"
    );
    assert!(hint.contains("(rustup and cargo)"), "{hint}");
    assert!(
        hint.contains("the tool grants rust-cargo and rust-rustup would"),
        "{hint}"
    );
    let text = env.run_env(&args[1..], b"", &[("HOME", &real_home)]);
    assert!(
        text.stdout
            .contains("[hint: cargo: the program is not in the sandbox"),
        "{text:?}"
    );
    // A program no toolchain has: the hint says what the sandbox holds.
    let args = ["--json", "exec", "--", "sh", "-c", "no-such-tool-x"];
    let json = env.run_env(&args, b"", &[("HOME", &real_home)]).json();
    assert!(
        json["hint"]
            .as_str()
            .unwrap()
            .starts_with("no-such-tool-x: the program is not in the sandbox, which holds /usr"),
        "{json}"
    );
    // A command that exits 127 on its own, or misses a path, gets none.
    let args = ["--json", "exec", "--", "sh", "-c", "/nope/x; exit 127"];
    let json = env.run_env(&args, b"", &[("HOME", &real_home)]).json();
    assert!(json.get("hint").is_none(), "{json}");
}
