//! `completions SHELL` and `man`: generated from the clap definition of the command line, so
//! they always list the flags the binary really takes.

use anyhow::{Context, Result};
use clap::CommandFactory;
use clap_complete::Shell;
use serde_json::json;

use crate::args::Cli;
use crate::output::Report;

/// The binary's name, as completions must call it.
const BIN: &str = "safe-lanes";

/// `completions SHELL`: the completion script (`{"shell","script"}` in JSON).
pub(crate) fn completions(shell: Shell) -> Result<Report> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), BIN, &mut script);
    let script = String::from_utf8(script).context("the completion script is not UTF-8")?;
    let json = json!({ "shell": shell.to_string(), "script": script });
    Ok(Report::ok(json, script))
}

/// `man`: the manual page in roff (`{"man"}` in JSON).
pub(crate) fn man() -> Result<Report> {
    let mut page = Vec::new();
    clap_mangen::Man::new(Cli::command())
        .render(&mut page)
        .context("cannot render the manual page")?;
    let page = String::from_utf8(page).context("the manual page is not UTF-8")?;
    let page = title_first(&page);
    Ok(Report::ok(json!({ "man": page }), page))
}

/// `page` with its `.TH` line first, as man(7) asks (the renderer puts the definition of its
/// quote string, `Aq`, above it).
fn title_first(page: &str) -> String {
    let Some(title) = page.lines().find(|l| l.starts_with(".TH ")) else {
        return page.to_owned();
    };
    let mut out = format!("{title}\n");
    for line in page.lines().filter(|l| *l != title) {
        out.push_str(line);
        out.push('\n');
    }
    out
}
