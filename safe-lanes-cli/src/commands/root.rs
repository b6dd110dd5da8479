//! `init`, `doctor`, `audit verify`.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Result;
use safe_lanes::audit::TailCheck;
use safe_lanes::beneath::openat2_available;
use safe_lanes::confine::{SandboxSupport, sandbox_support};
use safe_lanes::root::DirReport;
use safe_lanes::upload::IgnoredEntry;
use safe_lanes::{Grants, RootLocation, StateRoot, UploadSource};
use serde_json::json;

use crate::output::{Report, path};

pub(crate) fn init(flag: Option<&Path>, manifest: Option<&Path>) -> Result<Report> {
    let root = StateRoot::init(&RootLocation::resolve(flag)?.path)?;
    let mut repaired = root.repairs().to_vec();
    repaired.extend(Grants::open(&root, manifest)?.repair()?);
    let json = json!({
        "root": path(root.path()),
        "downloads": path(&root.downloads_path()),
        "uploads": path(&root.uploads_path()),
        "manifest": path(&root.default_manifest()),
        "repaired": repaired,
    });
    let mut text = format!(
        "state root ready: {}\n  downloads: {}\n  uploads:   {}",
        root.path().display(),
        root.downloads_path().display(),
        root.uploads_path().display()
    );
    for r in &repaired {
        let _ = write!(text, "\nrepaired: {r}");
    }
    Ok(Report::ok(json, text))
}

pub(crate) fn doctor(flag: Option<&Path>, manifest: Option<&Path>) -> Result<Report> {
    let location = RootLocation::resolve(flag)?;
    let sandbox = sandbox_support();
    let openat2 = openat2_available();
    let Inspected {
        dirs,
        ignored,
        mut problems,
    } = inspect(&location);
    if !openat2 {
        problems
            .push("openat2 is unavailable: the slower O_NOFOLLOW component walk is used".into());
    }
    if let Some(why) = &sandbox.problem {
        problems.push(format!("confined commands are refused: {why}"));
    }
    // The manifest's lock file, which every grant change takes.
    if location.path.exists() {
        let grants = StateRoot::open(&location.path).and_then(|root| Grants::open(&root, manifest));
        if let Err(e) = grants
            .as_ref()
            .map_err(|e| e.to_string())
            .and_then(|g| g.pending_record().map_err(|e| e.to_string()))
        {
            problems.push(format!("grant changes are refused: {e}"));
        }
        if let Ok(grants) = &grants {
            problems.extend(grants.problems());
        }
    }
    let process = safe_lanes::process::status();
    if let Some(why) = process.unavailable {
        problems.push(format!("the process is only partly hardened: {why}"));
    }
    let mut warnings: Vec<String> = process.warning().into_iter().map(str::to_owned).collect();
    let held = held_and_direct(&location, manifest, &mut warnings);
    let mut text = machine_text(&location, &dirs, openat2, &sandbox);
    for w in &warnings {
        let _ = writeln!(text, "warning: {w}");
    }
    for p in &problems {
        let _ = writeln!(text, "problem: {p}");
    }
    let toolchains = toolchains(&location, manifest);
    text.push_str(&toolchains_text(&toolchains));
    let caches = caches(&location, manifest);
    for c in &caches {
        let _ = writeln!(text, "{}", c.1);
    }
    let caches: Vec<&serde_json::Value> = caches.iter().map(|c| &c.0).collect();
    if problems.is_empty() {
        text.push_str("ok");
    }
    let json = json!({
        "root": { "path": path(&location.path), "origin": location.origin },
        "dirs": dirs,
        "kernel": { "openat2": openat2, "landlock": sandbox.landlock },
        "sandbox": { "available": sandbox.available, "layers": sandbox.layers, "problem": sandbox.problem },
        "upload_roots_ignored": ignored,
        "process": process,
        "running_as_root": process.running_as_root,
        "warnings": warnings,
        "problems": problems,
        "held_changes": held,
        "toolchains": toolchains,
        "caches": caches,
        "ok": problems.is_empty(),
    });
    Ok(Report {
        failed: !problems.is_empty(),
        json_lines: false,
        json,
        text,
    })
}

/// The change sets waiting for the human (after finishing what a dead process left), and a
/// warning for each, and for each direct read-write grant, added to `warnings`.
fn held_and_direct(
    location: &RootLocation,
    manifest: Option<&Path>,
    warnings: &mut Vec<String>,
) -> usize {
    // Only a root that exists is opened: `doctor` never creates one.
    if !location.path.exists() {
        return 0;
    }
    let Ok(grants) = StateRoot::open(&location.path).and_then(|r| Grants::open(&r, manifest))
    else {
        return 0;
    };
    if let Ok(listing) = grants.list() {
        for g in &listing.grants {
            if let Some(w) = safe_lanes::risk::direct_warning(&g.grant) {
                warnings.push(format!("grant `{}`: {w}", g.grant.alias));
            }
        }
    }
    let sets = safe_lanes::changes::HeldChanges::open(std::sync::Arc::new(grants))
        .and_then(|held| held.list())
        .map(|sets| sets.len())
        .unwrap_or(0);
    if sets > 0 {
        warnings.push(format!(
            "{sets} change set(s) of confined commands wait for you: `safe-lanes changes`"
        ));
    }
    sets
}

/// What `doctor` found in the state root.
struct Inspected {
    dirs: Vec<DirReport>,
    ignored: Vec<IgnoredEntry>,
    problems: Vec<String>,
}

/// The state root's directories and ignored upload roots, with the problems they show.
fn inspect(location: &RootLocation) -> Inspected {
    let mut found = Inspected {
        dirs: Vec::new(),
        ignored: Vec::new(),
        problems: Vec::new(),
    };
    if !location.path.exists() {
        found.problems.push(format!(
            "{}: the state root does not exist yet; run `safe-lanes init`",
            location.path.display()
        ));
        return found;
    }
    let opened = StateRoot::open(&location.path).and_then(|root| {
        found.problems.extend(root.broken());
        found.ignored = UploadSource::load(&root)?.ignored().to_vec();
        root.report()
    });
    match opened {
        Ok(dirs) => found.dirs = dirs,
        Err(e) => found.problems.push(e.to_string()),
    }
    for dir in found.dirs.iter().filter(|d| !d.private) {
        found.problems.push(format!(
            "{}: mode {:04o} lets group or others read; `safe-lanes init` sets 0700",
            dir.path.display(),
            dir.mode
        ));
    }
    for i in &found.ignored {
        found.problems.push(format!(
            "upload root {} ({} {}) is ignored: {}",
            i.entry, i.origin, i.at, i.why
        ));
    }
    found
}

/// `doctor`'s description of the state root, the kernel and the sandbox.
fn machine_text(
    location: &RootLocation,
    dirs: &[DirReport],
    openat2: bool,
    sandbox: &SandboxSupport,
) -> String {
    let mut text = format!(
        "state root: {} (from {})\n",
        location.path.display(),
        location.origin
    );
    for dir in dirs {
        let _ = writeln!(
            text,
            "  {:04o} uid {}  {}",
            dir.mode,
            dir.uid,
            dir.path.display()
        );
    }
    let _ = writeln!(
        text,
        "openat2: {}",
        if openat2 { "available" } else { "missing" }
    );
    let landlock = &sandbox.landlock;
    let _ = writeln!(
        text,
        "landlock: {} ({})",
        landlock
            .abi
            .map_or_else(|| "absent".to_owned(), |v| format!("ABI {v}")),
        if landlock.fully_enforced {
            "fully enforced"
        } else {
            "not fully enforced"
        }
    );
    if sandbox.available {
        text.push_str("confined commands run under:\n");
        for layer in &sandbox.layers {
            let _ = writeln!(text, "  {layer}");
        }
    }
    text
}

pub(crate) fn audit_verify(flag: Option<&Path>, manifest: Option<&Path>) -> Result<Report> {
    let root = StateRoot::open_default(flag)?;
    let audit = root.audit();
    let verification = audit.verify()?;
    // A grant change made whose record waits to be written (the log could not take it).
    let pending = Grants::open(&root, manifest).and_then(|g| g.pending_record());
    let mut text = match &verification.broken {
        None => format!(
            "{}: {} lines, chain intact",
            audit.path().display(),
            verification.lines
        ),
        Some(b) => format!("{}: line {}: {}", audit.path().display(), b.line, b.why),
    };
    for seam in verification.seams.iter().skip(usize::from(
        verification.broken.as_ref() == verification.seams.first(),
    )) {
        let _ = write!(text, "\nalso line {}: {}", seam.line, seam.why);
    }
    text.push('\n');
    text.push_str(&match &verification.tail {
        TailCheck::Witnessed { seq, after: 0 } => {
            format!("end: line {seq} is the line the witness (audit.head) recorded")
        }
        TailCheck::Witnessed { seq, after } => format!(
            "end: the witness (audit.head) recorded line {seq}; the {after} line(s) after it \
             are chained but not witnessed"
        ),
        TailCheck::NotWitnessed { why } => {
            format!("end: not checked ({why}): lines cut from the end would not show")
        }
    });
    match &pending {
        Ok(true) => text.push_str(
            "\npending: a grant change was made whose record is not in the log yet; the next \
             change writes it",
        ),
        Ok(false) => {}
        Err(e) => {
            let _ = write!(text, "\npending records: not checked ({e})");
        }
    }
    text.push_str(
        "\nnot provable: a correctly chained line appended after the witness, or a log and \
         witness rewritten together (the chain has no secret key)",
    );
    Ok(Report {
        failed: !verification.is_intact(),
        json_lines: false,
        json: json!({
            "path": path(audit.path()),
            "lines": verification.lines,
            "intact": verification.is_intact(),
            "broken": verification.broken,
            "seams": verification.seams,
            "tail": verification.tail,
            "pending_record": pending.as_ref().ok().copied(),
        }),
        text,
    })
}

/// The per-user toolchains of `$HOME`, each grant they need with the command that approves
/// it and whether a grant of that folder exists already.
fn toolchains(location: &RootLocation, manifest: Option<&Path>) -> Vec<serde_json::Value> {
    let Some(home) = std::env::var_os("HOME").map(std::path::PathBuf::from) else {
        return Vec::new();
    };
    // Only a root that exists is opened: `doctor` never creates one.
    let granted: Vec<_> = match location.path.exists() {
        true => StateRoot::open(&location.path)
            .and_then(|root| Grants::open(&root, manifest))
            .and_then(|grants| grants.list())
            .map(|listing| listing.grants.into_iter().map(|g| g.grant.path).collect())
            .unwrap_or_default(),
        false => Vec::new(),
    };
    safe_lanes::grants::detect::detect(&home)
        .into_iter()
        .map(|found| {
            let grants: Vec<_> = found
                .grants
                .iter()
                .map(|g| {
                    let mut entry = json!(g);
                    entry["command"] = json!(g.command(&location.path, manifest));
                    entry["approved"] = json!(granted.contains(&g.path));
                    entry
                })
                .collect();
            json!({ "name": found.name, "what": found.what, "grants": grants })
        })
        .collect()
}

/// Each cache grant with the size of its private layer (what confined commands wrote to it),
/// as JSON and as a line.
fn caches(location: &RootLocation, manifest: Option<&Path>) -> Vec<(serde_json::Value, String)> {
    if !location.path.exists() {
        return Vec::new();
    }
    let listing = StateRoot::open(&location.path)
        .and_then(|root| Grants::open(&root, manifest))
        .and_then(|grants| {
            let mut listing = grants.list()?;
            grants.measure_caches(&mut listing)?;
            Ok(listing)
        });
    let Ok(listing) = listing else {
        return Vec::new();
    };
    listing
        .grants
        .into_iter()
        .filter(|g| g.grant.toolchain.kind == safe_lanes::grants::Kind::Cache)
        .map(|g| {
            let size = g.private_layer.map_or(0, |l| l.bytes);
            let line = format!(
                "cache {}: {} bytes written by confined commands, kept in the state root \
                 (`safe-lanes grant cache-clear {}` empties it)",
                g.grant.alias, size, g.grant.alias
            );
            let json = json!({
                "alias": g.grant.alias,
                "path": path(&g.grant.path),
                "private_layer": g.private_layer,
            });
            (json, line)
        })
        .collect()
}

fn toolchains_text(toolchains: &[serde_json::Value]) -> String {
    let mut text = String::new();
    if toolchains.is_empty() {
        return text;
    }
    text.push_str("toolchains of yours a confined command can use once approved:\n");
    for t in toolchains {
        let _ = writeln!(
            text,
            "  {} ({}):",
            t["name"].as_str().unwrap_or(""),
            t["what"].as_str().unwrap_or("")
        );
        for g in t["grants"].as_array().into_iter().flatten() {
            let state = if g["approved"] == true {
                "approved"
            } else {
                "run"
            };
            let _ = writeln!(text, "    {state}: {}", g["command"].as_str().unwrap_or(""));
            let _ = writeln!(
                text,
                "      exposes {}",
                g["exposes"].as_str().unwrap_or("")
            );
        }
    }
    text
}
