//! `ui`: the approval page, served until it has been idle for a while.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::Result;
use safe_lanes::StateRoot;
use safe_lanes_ui::{Options, Ui};
use serde_json::json;

use super::grant::who;
use crate::output::Report;

/// How the page is served.
#[derive(Debug)]
pub(crate) struct Page {
    pub(crate) port: u16,
    pub(crate) idle: Duration,
    pub(crate) open: bool,
}

/// Bind, print the sign-in link at once (with `--json`, as one JSON line), then serve. The
/// result printed when it stops is a second line.
pub(crate) fn run(
    flag: Option<&Path>,
    manifest: Option<&Path>,
    page: Page,
    json: bool,
) -> Result<Report> {
    let root = StateRoot::open_default(flag)?;
    let options = Options {
        manifest: manifest.map(Path::to_path_buf),
        port: page.port,
        idle: page.idle,
        actor: who(None),
        ..Options::default()
    };
    let ui = Ui::bind(root, options)?;
    let url = ui.sign_in_url();
    let idle = humantime::format_duration(page.idle);
    let line = if json {
        json!({ "url": url, "address": ui.address().to_string(), "idle_s": page.idle.as_secs() })
            .to_string()
    } else {
        format!("Open {url}\n(the link works once; the page stops after {idle} without a request)")
    };
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{line}")?;
    stdout.flush()?;
    drop(stdout);
    if page.open {
        open_in_browser(&url);
    }
    ui.run()?;
    Ok(Report::ok(
        json!({ "stopped": "idle" }),
        format!("stopped: no request for {idle}"),
    ))
}

/// Hand the link to the desktop's browser. It spends the one-time token as soon as it loads.
fn open_in_browser(url: &str) {
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    let spawned = Command::new(opener)
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    if let Err(e) = spawned {
        tracing::warn!("could not start `{opener}` ({e}); open the link by hand");
    }
}
