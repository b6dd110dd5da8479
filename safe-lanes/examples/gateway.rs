//! A minimal gateway embedding safe-lanes: it receives bytes from its own API into the download
//! lane, checks an upload source against the allowlist, stages it in the deposit and runs an
//! uploader there.
//!
//! Run it with `cargo run -p safe-lanes --example gateway`; it works in a temporary state root
//! and uses `/bin/cat` as the "uploader".

#![allow(clippy::print_stdout)] // an example program reports what it does

use std::sync::Arc;

use safe_lanes::{
    Access, Confined, DownloadLane, Grants, StateRoot, UploadDeposit, UploadSource, Uploader,
};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // 0. Before anything else: not dumpable, no core file.
    let hardening = safe_lanes::harden()?;
    if let Some(warning) = hardening.warning() {
        println!("warning    {warning}");
    }
    let tmp = tempfile::tempdir()?;
    let root = StateRoot::open(&tmp.path().join("state"))?;

    // 1. An attachment arrives through the gateway's own API: it lands in the download lane,
    //    under a sanitized name, never overwriting anything.
    let lane = DownloadLane::open(&root)?.with_max_bytes(50 << 20);
    let saved = lane.save("../../.bashrc", &b"attachment body\n"[..])?;
    println!(
        "saved      {} ({} bytes, sha256 {})",
        saved.path.display(),
        saved.bytes,
        saved.sha256
    );

    // 2. The agent asks to upload a file: only the allowlist (here: .downloads) is readable.
    let sources = UploadSource::load(&root)?;
    match sources.resolve("/etc/passwd".as_ref()) {
        Err(refused) => println!("refused    /etc/passwd: {}: {refused}", refused.code()),
        Ok(_) => unreachable!("/etc is not an upload root"),
    }
    let source = sources.open(&saved.path)?;

    // 3. Stage a copy in the deposit and run the uploader there; the copy is always erased.
    let deposit = UploadDeposit::open(&root)?;
    let staged = deposit.stage_source(&source)?;
    let sent = deposit.send(staged, &Uploader::parse("/bin/cat {file}")?)?;
    println!(
        "uploaded   exit {:?}, uploader printed {:?}",
        sent.outcome.exit_code, sent.outcome.stdout
    );

    // 4. A folder the human granted (the human's side, `Grants`), and a command the agent
    //    runs confined to it (the agent's side, `AgentGrants`).
    let project = tmp.path().join("project");
    std::fs::create_dir(&project)?;
    let grants = Arc::new(Grants::open(&root, None)?);
    grants.add("project", &project, Access::ReadWrite, "example", "human")?;
    match Confined::shell(
        "echo hello > \"$WORKFLOW_FOLDER_PROJECT/out.txt\" && cat /etc/hostname >/dev/null",
    )
    .run(&grants.agent().session())
    {
        Ok(done) => println!("confined   exit {:?}", done.outcome.exit_code),
        Err(e) => println!("confined   not run: {}: {e}", e.code()),
    }
    Ok(())
}
