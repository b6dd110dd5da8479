//! `completions SHELL` and `man`: generated from the clap definition of the command line, so
//! they always list the flags the binary really takes.

use std::path::Path;

use anyhow::{Context, Result, bail};
use clap::CommandFactory;
use clap_complete::Shell;
use safe_lanes::beneath::{Ambient, Anchor, Publish};
use safe_lanes::input::Name;
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
    let script = match shell {
        Shell::Bash => bash_case_arms_named_as_set(&script),
        _ => script,
    };
    let json = json!({ "shell": shell.to_string(), "script": script });
    Ok(Report::ok(json, script))
}

/// The generator's bash script sets `cmd` to `safe__lanes__subcmd__grant` for
/// `safe-lanes grant`, but spells its case arms `safe__subcmd__lanes__subcmd__grant` (it
/// treats the `-` of the binary's name as a subcommand separator), so below the top level
/// no arm matched and bash completed file names. The arms are renamed as `cmd` is set.
fn bash_case_arms_named_as_set(script: &str) -> String {
    script.replace("safe__subcmd__lanes", "safe__lanes")
}

/// `man [COMMAND…] [--dir DIR]`: the manual page of `safe-lanes` or of one of its commands
/// (roff; `{"man"}` in JSON); with `dir`, every page written there as `NAME.1` instead
/// (`{"written":[…]}`).
pub(crate) fn man(command: &[String], dir: Option<&Path>) -> Result<Report> {
    let pages = pages();
    if let Some(dir) = dir {
        let folder = Anchor::open_ambient(dir, Ambient::because("the folder the manuals go to"))?;
        let mut written = Vec::new();
        for (name, page) in &pages {
            let file = format!("{name}.1");
            folder.write_file(Name::new(&file)?, page.as_bytes(), 0o644, Publish::Replace)?;
            written.push(dir.join(file).display().to_string());
        }
        let text = format!("wrote {} manual pages to {}", written.len(), dir.display());
        return Ok(Report::ok(json!({ "written": written }), text));
    }
    let wanted = std::iter::once(BIN)
        .chain(command.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join("-");
    let Some((_, page)) = pages.into_iter().find(|(name, _)| *name == wanted) else {
        bail!(safe_lanes::Error::InvalidArgument {
            what: safe_lanes::Shown::text(&command.join(" ")),
            why: "no such command: `safe-lanes man --dir DIR` writes every page there is".into(),
        });
    };
    Ok(Report::ok(json!({ "man": page }), page))
}

/// Every manual page: `safe-lanes` and each of its commands, at every level (`safe-lanes-grant`,
/// `safe-lanes-grant-add`), each with the sections every page shares.
fn pages() -> Vec<(String, String)> {
    let mut cli = Cli::command().disable_help_subcommand(true);
    cli.build();
    let mut pages = Vec::new();
    collect(&cli, None, &mut pages);
    pages
}

fn collect(cmd: &clap::Command, parent: Option<&str>, pages: &mut Vec<(String, String)>) {
    let name = cmd.get_display_name().unwrap_or(cmd.get_name()).to_owned();
    pages.push((name.clone(), page(cmd, parent)));
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        collect(sub, Some(&name), pages);
    }
}

/// One page: as the generator renders it, then EXIT STATUS, ENVIRONMENT, FILES and SEE ALSO.
fn page(cmd: &clap::Command, parent: Option<&str>) -> String {
    let mut roff = Vec::new();
    clap_mangen::Man::new(cmd.clone())
        .render(&mut roff)
        .expect("rendering into memory does not fail");
    let mut page = title_first(&String::from_utf8_lossy(&roff));
    page.push_str(SHARED_SECTIONS);
    let mut see_also: Vec<String> = parent.into_iter().map(str::to_owned).collect();
    see_also.extend(
        cmd.get_subcommands()
            .filter(|s| !s.is_hide_set())
            .map(|s| s.get_display_name().unwrap_or(s.get_name()).to_owned()),
    );
    if !see_also.is_empty() {
        page.push_str(".SH \"SEE ALSO\"\n");
        let refs: Vec<String> = see_also
            .iter()
            .map(|name| format!("\\fB{}\\fR(1)", name.replace('-', "\\-")))
            .collect();
        page.push_str(&refs.join(",\n"));
        page.push('\n');
    }
    page
}

/// What every page says about exit statuses, the environment and the files.
const SHARED_SECTIONS: &str = r#".SH "EXIT STATUS"
.TP
\fB0\fR
success
.TP
\fB1\fR
an operational failure: error code \fBio\fR or \fBfetch_failed\fR, a failing uploader or command, \fBdoctor\fR found a problem, \fBaudit verify\fR found a broken chain
.TP
\fB2\fR
a usage error: an unknown flag or command, a missing or malformed argument
.TP
\fB3\fR
refused: the input was rejected with any other error code (\fBnot_found\fR included)
.SH ENVIRONMENT
.TP
\fBSAFE_LANES_ROOT\fR, \fBGWSA_ROOT\fR
the state root, when \fB\-\-root\fR is not given (else \fB$XDG_STATE_HOME/safe\-lanes\fR, \fB~/.local/state/safe\-lanes\fR)
.TP
\fBSAFE_LANES_UPLOAD_ROOTS\fR, \fBGWSA_UPLOAD_ROOTS\fR
more upload roots, separated by \fB:\fR
.TP
\fBRUST_LOG\fR
the level of the log on stderr (\fBwarn\fR by default)
.TP
\fBHOME\fR
the home folder: \fB~/\fR in a folder typed at a prompt, and the folder warned about before it is granted
.SH FILES
.TP
\fI<root>/workflow.json\fR
the grants manifest, with its changelog (\fB\-\-manifest\fR names another)
.TP
\fI<root>/.upload\-roots\fR
the upload roots, one absolute path a line; \fB#\fR starts a comment (\fBupload roots add\fR and \fBremove\fR keep the other lines)
.TP
\fI<root>/audit.jsonl\fR, \fI<root>/audit.head\fR
the hash\-chained audit log and its witness
.TP
\fI<root>/.downloads/\fR
the download lane
"#;

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
