//! `grant list | requests | log | add | set-access | revoke | adopt | request | approve | deny`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Result;
use safe_lanes::grants::{Asked, Change, Grant, Kind, Recorded, Request, Review};
use safe_lanes::risk::Warning;
use safe_lanes::{Grants, Shown, StateRoot};
use serde_json::json;

use super::{approve, ask};
use crate::args::GrantCommand;
use crate::output::Report;

pub(crate) fn run(
    flag: Option<&Path>,
    manifest: Option<&Path>,
    cmd: GrantCommand,
) -> Result<Report> {
    let root = StateRoot::open_default(flag)?;
    let grants = Grants::open(&root, manifest)?;
    let at = approve::Where {
        root: root.path(),
        manifest,
    };
    match cmd {
        GrantCommand::List => list(&grants),
        GrantCommand::Requests => approve::requests(&grants, at),
        GrantCommand::Show { request_id } => approve::show(&grants, at, &request_id),
        GrantCommand::Review => approve::review(&grants, at, &who(None)),
        GrantCommand::Approve(args) => {
            let actor = who(args.actor.clone());
            approve::approve(&grants, at, args, &actor)
        }
        GrantCommand::Log => {
            let log = grants.changelog()?;
            Ok(Report::ok(json!({ "changelog": log }), log_text(&log)))
        }
        cmd @ GrantCommand::Request { .. } => request(&grants, cmd),
        GrantCommand::CacheClear {
            alias,
            reason,
            actor,
        } => {
            let reason = ask::reason(&reason, "reason (for the audit log): ")?;
            let cleared = grants.clear_cache(&alias, &reason, &who(actor))?;
            let text = if cleared.cleared {
                format!(
                    "cleared the cache {alias}'s private layer ({} bytes)",
                    cleared.bytes
                )
            } else {
                format!("the cache {alias} has no private layer")
            };
            Ok(Report::ok(json!(cleared), text))
        }
        GrantCommand::Deny {
            request_id,
            alias,
            reason,
            actor,
        } => {
            let reason = ask::reason(&reason, "reason (the agent sees it): ")?;
            let r = match (request_id, alias) {
                (Some(id), _) => grants.deny(&id, &reason, &who(actor))?,
                (None, Some(alias)) => grants.deny_alias(&alias, &reason, &who(actor))?,
                (None, None) => anyhow::bail!("give a request id or --alias"),
            };
            let text = format!("denied {} ({})", r.id, r.alias) + &unrecorded_warning(r.recorded());
            Ok(Report::ok(json!(r), text))
        }
        change => decide(&grants, change),
    }
}

/// Who a change is recorded as: `--actor`, or the human running the command (`uid:N`).
pub(crate) fn who(actor: Option<String>) -> String {
    // The side is always recorded by its type (`uid:N`); `--actor` only adds a name to it, so
    // no text given on the command line can pass for another side (`agent`).
    safe_lanes::Actor::human_named(actor.as_deref())
}

/// `grant list`: every grant with its variable and availability, then pending requests.
fn list(grants: &Grants) -> Result<Report> {
    let mut listing = grants.list()?;
    grants.measure_caches(&mut listing)?;
    let mut text = String::new();
    for g in &listing.grants {
        let unavailable = g.unavailable.as_deref();
        let kind = match g.grant.toolchain.kind {
            Kind::Folder => String::new(),
            kind => format!("{kind}: "),
        };
        let _ = writeln!(
            text,
            "{:<20} {:<10} {kind}{}  ({}{})",
            g.grant.alias,
            g.grant.access,
            g.grant.path.display(),
            g.env,
            unavailable
                .map(|why| format!("; unavailable: {why}"))
                .unwrap_or_default()
        );
        if !g.grant.allow_protected.is_empty() {
            let lifted: Vec<&str> = g.grant.allow_protected.iter().map(|l| l.as_str()).collect();
            let _ = writeln!(
                text,
                "{:<20} published without holding: {}",
                "",
                lifted.join(", ")
            );
        }
        if !g.grant.hide.is_empty() {
            let _ = writeln!(text, "{:<20} also hidden: {}", "", g.grant.hide.join(", "));
        }
        if !g.grant.unhide.is_empty() {
            let _ = writeln!(
                text,
                "{:<20} shown although on the list of secrets: {}",
                "",
                g.grant.unhide.join(", ")
            );
        }
        if let Some(warning) = safe_lanes::risk::direct_warning(&g.grant) {
            let _ = writeln!(text, "{:<20} warning: {warning}", "");
        }
        if let Some(layer) = g.private_layer {
            let _ = writeln!(
                text,
                "{:<20} private layer: {}{} bytes in {} entries (`grant cache-clear {}` empties it)",
                "",
                if layer.at_least { "at least " } else { "" },
                layer.bytes,
                layer.entries,
                g.grant.alias
            );
        }
    }
    if listing.grants.is_empty() {
        text.push_str("no folder grants\n");
    }
    text.push_str(&requests_text(&listing.requests));
    Ok(Report::ok(json!(listing), text))
}

/// `grant request`: what an agent does, from the command line.
fn request(grants: &Grants, cmd: GrantCommand) -> Result<Report> {
    let GrantCommand::Request {
        alias,
        access,
        reason,
        path,
        toolchain,
        actor,
    } = cmd
    else {
        unreachable!("not a request: {cmd:?}")
    };
    let asked = Asked {
        access: access.into(),
        path: path.as_deref(),
        toolchain: toolchain.toolchain()?,
    };
    let r = grants.request_toolchain(&alias, asked, &reason, &who(actor))?;
    let text = format!(
        "requested {} {} ({}); approve with `safe-lanes grant approve {}`",
        r.alias, r.access, r.id, r.id
    ) + &unrecorded_warning(r.recorded());
    Ok(Report::ok(json!(r), text))
}

/// `grant add --pick`: the folder the human chooses in the desktop's own dialog.
fn picked_folder() -> Result<PathBuf> {
    use safe_lanes_ui::desktop::{DesktopBus, Dialog, choose_folder_blocking};
    let home = std::env::var_os("HOME").map(PathBuf::from);
    match choose_folder_blocking(
        &DesktopBus::Session,
        "Choose a folder to grant",
        home.as_deref(),
    ) {
        Dialog::Chosen(path) => Ok(path),
        Dialog::Cancelled => Err(safe_lanes::Error::InvalidArgument {
            what: "--pick".into(),
            why: "no folder was chosen (the dialog was closed); nothing changed".into(),
        }
        .into()),
        Dialog::Unavailable(why) => Err(safe_lanes::Error::NotConfigured {
            what: "the desktop's folder dialog",
            why: format!(
                "{why}; give --path FOLDER, or choose the folder on the page (`safe-lanes ui`)"
            ),
        }
        .into()),
    }
}

/// The human's changes to a grant: `add`, `set-access`, `revoke`, `adopt`, `approve`.
fn decide(grants: &Grants, cmd: GrantCommand) -> Result<Report> {
    let mut warnings = Vec::new();
    let (verb, grant) = match cmd {
        GrantCommand::Add {
            alias,
            path,
            pick,
            access,
            toolchain,
            protection,
            hidden,
            direct,
            reason,
            actor,
        } => {
            let path = match path {
                Some(path) if !pick => path,
                _ => picked_folder()?,
            };
            let toolchain = toolchain.toolchain()?;
            let protection = protection.paths()?;
            // Checked before anything is made: a grant is never left without what was asked.
            safe_lanes::grants::check_hidden(toolchain.kind, &hidden.hide, &hidden.unhide)?;
            let access = access.map(Into::into);
            let actor = who(actor);
            let chosen = toolchain.access(access)?;
            if direct {
                safe_lanes::grants::can_be_direct(chosen, toolchain.kind)?;
            }
            let review = grants.review_add(&alias, &path, toolchain.kind, chosen)?;
            if !confirmed(&review, "Grant this folder? [y/N] ")? {
                return Ok(not_changed());
            }
            warnings = review.warnings;
            let reason = ask::reason(&reason, REASON)?;
            let mut added = grants.add_with(&alias, &path, access, toolchain, &reason, &actor)?;
            if let Some((lift, restore)) = protection {
                added = grants.set_protection(&alias, &lift, &restore, &reason, &actor)?;
            }
            if direct {
                added = grants.set_direct(&alias, true, &reason, &actor)?;
            }
            if hidden.given() {
                added = grants.set_hidden(&alias, &hidden.hide, &hidden.unhide, &reason, &actor)?;
            }
            ("granted", added)
        }
        GrantCommand::SetHidden {
            alias,
            hidden,
            reason,
            actor,
        } => {
            let reason = ask::reason(&reason, REASON)?;
            let set =
                grants.set_hidden(&alias, &hidden.hide, &hidden.unhide, &reason, &who(actor))?;
            ("changed", set)
        }
        GrantCommand::SetAccess {
            alias,
            access,
            protection,
            direct,
            layered,
            reason,
            actor,
        } => {
            let protection = protection.paths()?;
            let actor = who(actor);
            let review = grants.review_set_access(&alias, access.into())?;
            if review.widens && !confirmed(&review, "Change its access? [y/N] ")? {
                return Ok(not_changed());
            }
            warnings = review.warnings;
            let reason = ask::reason(&reason, REASON)?;
            let mut changed = grants.set_access(&alias, access.into(), &reason, &actor)?;
            if let Some((lift, restore)) = protection {
                changed = grants.set_protection(&alias, &lift, &restore, &reason, &actor)?;
            }
            if direct || layered {
                changed = grants.set_direct(&alias, direct, &reason, &actor)?;
            }
            ("changed", changed)
        }
        GrantCommand::Revoke {
            alias,
            reason,
            actor,
        } => {
            let reason = ask::reason(&reason, REASON)?;
            ("revoked", grants.revoke(&alias, &reason, &who(actor))?)
        }
        GrantCommand::Adopt {
            alias,
            reason,
            actor,
        } => {
            let reason = ask::reason(&reason, REASON)?;
            ("adopted", grants.adopt(&alias, &reason, &who(actor))?)
        }
        GrantCommand::List
        | GrantCommand::Requests
        | GrantCommand::Show { .. }
        | GrantCommand::Review
        | GrantCommand::Approve(_)
        | GrantCommand::Log
        | GrantCommand::Request { .. }
        | GrantCommand::CacheClear { .. }
        | GrantCommand::Deny { .. } => unreachable!("not a change to a grant: {cmd:?}"),
    };
    Ok(grant_report(verb, grant, &warnings))
}

/// What the reason prompt of a change to a grant asks.
const REASON: &str = "reason (for the changelog): ";

/// On a terminal, when the change would give the agent a folder with warnings: the review
/// shown and the human asked. Without a terminal, or without warnings: yes (the warnings are
/// in the result).
fn confirmed(review: &Review, question: &str) -> Result<bool> {
    if review.warnings.is_empty() || !ask::terminal() {
        return Ok(true);
    }
    ask::say(&super::approve::review_text(review));
    ask::yes(question)
}

fn not_changed() -> Report {
    Report::ok(json!({ "changed": false }), "nothing changed")
}

fn grant_report(verb: &str, g: Recorded<Grant>, warnings: &[Warning]) -> Report {
    let mut text = format!(
        "{verb} {} {} {} ({})",
        g.alias,
        g.access,
        g.path.display(),
        g.id
    );
    if let Some(warning) = safe_lanes::risk::direct_warning(&g) {
        let _ = write!(text, "\nwarning: {warning}");
    }
    for w in warnings {
        let _ = write!(text, "\nwarning: {}", w.message);
        if let Some(spelled) = &w.spelled {
            let _ = write!(text, "\n         spelled out: {spelled}");
        }
    }
    text.push_str(&unrecorded_warning(g.recorded()));
    let mut json = json!(g);
    json["env"] = json!(g.alias.env_key());
    if !warnings.is_empty() {
        json["warnings"] = json!(warnings);
    }
    Report::ok(json, text)
}

/// The line that says a change was made but is not in the audit log yet (empty when it is).
pub(crate) fn unrecorded_warning(recorded: bool) -> String {
    crate::output::Unrecorded::Change.warning(recorded)
}

fn requests_text(requests: &[Request]) -> String {
    let mut text = String::new();
    for r in requests {
        let _ = writeln!(
            text,
            "pending {} {} {}{}: {}",
            r.id,
            r.alias,
            r.access,
            r.path
                .as_ref()
                .map(|p| format!(" {}", Shown::path(p)))
                .unwrap_or_default(),
            Shown::text(&r.reason)
        );
    }
    text
}

/// `grant log`: one line per change, with the words of the JSON (`add`, `set_access`, …);
/// what was stored as given (time, actor, reason) is escaped once, here.
fn log_text(log: &[Change]) -> String {
    let mut text = String::new();
    for c in log {
        let _ = writeln!(
            text,
            "{} {} {} by {}{}",
            Shown::text(&c.at),
            c.action,
            c.alias,
            safe_lanes::Actor::shown(&c.actor),
            if c.reason.is_empty() {
                String::new()
            } else {
                format!(": {}", Shown::text(&c.reason))
            }
        );
    }
    text
}
