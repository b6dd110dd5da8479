//! A minimal gateway embedding safe-lanes: the agent's requests go to one [`AgentDesk`] — a
//! received file into the download lane, an upload checked against the allowlist and handed
//! to an uploader, a command confined to the folder the human granted — and each answer is the
//! JSON report the gateway sends back.
//!
//! Run it with `cargo run -p safe-lanes --example gateway`; it works in a temporary state root
//! and uses `cat` as the "uploader".

#![allow(clippy::print_stdout)] // an example program reports what it does

use std::time::Duration;

use safe_lanes::desk::ShellRequest;
use safe_lanes::{Access, AgentDesk, Control, DeskOptions, Grants, StateRoot, Uploader};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // 0. Before anything else: not dumpable, no core file.
    let hardening = safe_lanes::harden()?;
    if let Some(warning) = hardening.warning() {
        println!("warning    {warning}");
    }
    let tmp = tempfile::tempdir()?;
    let root = StateRoot::open(&tmp.path().join("state"))?;

    // The human's side: a folder granted read-write (in a real gateway, through the CLI or the
    // approval page, never on the agent's say-so).
    let project = tmp.path().join("project");
    std::fs::create_dir(&project)?;
    Grants::open(&root, None)?.add("project", &project, Access::ReadWrite, "example", "human")?;

    // The agent's side: one desk for the life of the process.
    let mut options = DeskOptions::default();
    options.uploader = Some(Uploader::parse("cat {file}")?);
    let desk = AgentDesk::open(root, options)?;

    // 1. An attachment arrives: it lands in the download lane under a sanitized name.
    let saved = desk.save("../../.bashrc", &b"attachment body\n"[..])?;
    println!("saved      {}", serde_json::to_string(&saved)?);

    // 2. The agent asks to upload files: only the allowlist (here: the lane) may leave.
    match desk.upload_file("/etc/passwd") {
        Err(refused) => println!("refused    {refused}"),
        Ok(_) => unreachable!("/etc is not an upload root"),
    }
    let sent = desk.upload_file(&saved.path.to_string_lossy())?;
    println!("uploaded   {}", serde_json::to_string(&sent)?);

    // 3. A command confined to the granted folder.
    let shell = ShellRequest {
        command: "echo hello > \"$WORKFLOW_FOLDER_PROJECT/out.txt\" && cat out.txt".into(),
        cwd: Some("project".into()),
        timeout: Duration::from_secs(60),
    };
    match desk.shell(&shell, &Control::new()) {
        Ok(ran) => println!("confined   {}", serde_json::to_string(&ran)?),
        Err(e) => println!("confined   not run: {e}"),
    }
    Ok(())
}
