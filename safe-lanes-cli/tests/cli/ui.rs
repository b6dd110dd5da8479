//! `ui`: the sign-in line, and that a confined command cannot reach the page — as root and as
//! an ordinary user.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use serde_json::Value;

use crate::util::{Env, give_to_nobody, users};

/// The page served for `env` by `WRAPPER… safe-lanes --root R --json ui`, and its first line.
struct Served {
    child: Child,
    first: Value,
}

impl Served {
    fn start(env: &Env, wrapper: &[&str]) -> Self {
        Self::start_with(
            env,
            wrapper,
            &[],
            std::env::var_os("PATH").unwrap_or_default(),
        )
    }

    fn start_with(env: &Env, wrapper: &[&str], flags: &[&str], path: std::ffi::OsString) -> Self {
        let root = env.root();
        let mut argv: Vec<&str> = wrapper.to_vec();
        argv.extend([
            env!("CARGO_BIN_EXE_safe-lanes"),
            "--root",
            root.to_str().unwrap(),
            "--json",
            "ui",
            "--idle",
            "5m",
        ]);
        argv.extend(flags);
        let mut child = Command::new(argv[0])
            .args(&argv[1..])
            .current_dir(env.cwd())
            .env_clear()
            .env("HOME", env.home())
            .env("PATH", path)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let first: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
        Self { child, first }
    }

    fn port(&self) -> u16 {
        let address = self.first["address"].as_str().unwrap();
        address.rsplit(':').next().unwrap().parse().unwrap()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn ui_prints_a_loopback_sign_in_link_with_a_token() {
    let env = Env::new();
    assert_eq!(env.run(&["init"], b"").status, 0);
    let served = Served::start(&env, &[]);
    let url = served.first["url"].as_str().unwrap();
    let prefix = format!("http://127.0.0.1:{}/session?token=", served.port());
    assert!(url.starts_with(&prefix), "{url}");
    assert!(url.len() - prefix.len() >= 43, "a 256-bit token: {url}");
    assert_eq!(served.first["idle_s"], 300);
}

#[test]
fn ui_open_hands_the_link_to_the_desktop_browser() {
    let env = Env::new();
    assert_eq!(env.run(&["init"], b"").status, 0);
    // A desktop opener of our own, first on PATH, that writes down what it was given.
    let bin = env.tmp.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let got = env.tmp.path().join("opened");
    let script = format!(
        "#!/bin/sh\nprintf '%s' \"$*\" > {}.tmp && mv {0}.tmp {0}\n",
        got.display()
    );
    std::fs::write(bin.join("xdg-open"), script).unwrap();
    std::fs::set_permissions(
        bin.join("xdg-open"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let mut path = std::ffi::OsString::from(&bin);
    path.push(":");
    path.push(std::env::var_os("PATH").unwrap_or_default());
    let served = Served::start_with(&env, &[], &["--open"], path);
    for _ in 0..600 {
        if got.exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let opened = std::fs::read_to_string(&got).expect("the opener ran");
    assert_eq!(opened, served.first["url"].as_str().unwrap());
}

#[test]
fn a_confined_command_cannot_reach_the_page() {
    for (who, wrapper) in users() {
        let env = Env::new();
        if !wrapper.is_empty() {
            give_to_nobody(env.tmp.path());
        }
        let run = |args: &[&str]| env.run_as(&wrapper, args);
        assert_eq!(run(&["init"]).status, 0, "{who}");
        let doctor = run(&["--json", "doctor"]).json();
        assert_eq!(
            doctor["kernel"]["landlock"]["fully_enforced"], true,
            "{who}: {doctor}"
        );

        let served = Served::start(&env, &wrapper);
        let script = format!(
            "exec 3<>/dev/tcp/127.0.0.1/{} && echo reached",
            served.port()
        );
        // The same command, unconfined, reaches the page: the refusal below is the sandbox's.
        let mut direct = wrapper.clone();
        direct.extend(["/bin/bash", "-c", script.as_str()]);
        let reached = Command::new(direct[0]).args(&direct[1..]).output().unwrap();
        assert_eq!(
            String::from_utf8_lossy(&reached.stdout),
            "reached\n",
            "{who}: control"
        );

        let confined = run(&["--json", "exec", "--", "/bin/bash", "-c", &script]);
        let json = confined.json();
        assert_ne!(json["exit_code"], 0, "{who}: {confined:?}");
        assert!(
            !json["stdout"].as_str().unwrap().contains("reached"),
            "{who}: {json}"
        );
    }
}
