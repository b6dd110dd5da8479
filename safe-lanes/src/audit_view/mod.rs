//! The audit log as a person reads it: one [`Entry`] per record — when (in local time, with
//! the offset), who, what, how it ended, on what — filtered ([`Filter`]) and summed up
//! ([`Summary`]: per operation and outcome, with the refusals listed, which is what an agent
//! tried and was not let do). The command line (`audit show`, `audit summary`) and the page
//! show these as they are.
//!
//! Every string of a record (the subject, the actor, a message) came from outside: what would
//! be hidden on a screen (control and format characters, line breaks) is escaped here
//! ([`Shown::message`]; what the record holds escaped already passes unchanged, so nothing is
//! escaped twice): a name holding a terminal escape or a line break cannot pass for another
//! line or paint the screen.

use std::time::SystemTime;

use chrono::{DateTime, Local, Utc};
use serde::Serialize;
use serde_json::Value;

use crate::audit::AuditLog;
use crate::error::{Result, Shown};

mod lines;
pub(crate) mod words;

pub use words::in_words as duration_in_words;

/// How an operation ended, as its record's event says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// It was done.
    Done,
    /// It was refused (`<op>.refused`): a rule said no.
    Refused,
    /// It failed (`<op>.failed`, `<op>_failed`): nothing was decided, something broke.
    Failed,
}

impl Outcome {
    /// `done`, `refused`, `failed`.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Done => "done",
            Outcome::Refused => "refused",
            Outcome::Failed => "failed",
        }
    }
}

/// The fields that name what a record is about, in the order they are looked for.
const SUBJECT_FIELDS: &[&str] = &[
    "subject", "alias", "path", "name", "url", "argv", "command", "id",
];
/// The most characters of a subject or message shown on a line.
const MAX_SHOWN: usize = 300;

/// One record of the audit log, as a person reads it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Entry {
    /// Its place in the chain.
    pub seq: u64,
    /// When, as recorded (UTC, RFC 3339).
    pub ts: String,
    /// When, in local time with the offset (`2026-12-02 09:14:03 +01:00`); as recorded when
    /// it cannot be read.
    pub local: String,
    /// The event as recorded (`upload.refused`), escaped.
    pub event: String,
    /// The operation: the event without its outcome (`upload`).
    pub operation: String,
    /// How it ended.
    pub outcome: Outcome,
    /// Who, as recorded (`agent`, `uid:1000`), escaped.
    pub actor: String,
    /// Who, for a person (`alice (uid:1000)`), escaped.
    pub actor_shown: String,
    /// What it was about (a path, a name, an alias, a command), escaped and shortened.
    pub subject: String,
    /// The record in words, from its fields: a command as its command line with its folder,
    /// how it ended and how long it took; an upload with its source and uploader; a patch
    /// with its file; a save with the name the agent asked for. The subject for a record
    /// with no words of its own. Escaped, each word of a command line quoted once.
    pub words: String,
    /// The sign of an attack this record shows (a name the agent asked for holding a path
    /// separator, `..` or hidden characters), in words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
    /// The error code of a refusal or failure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// Its message, escaped and shortened.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The reason recorded with a human's change, escaped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip)]
    at: Option<DateTime<Utc>>,
}

impl Entry {
    /// The entry of the record `record` (a JSON object of the log).
    pub fn of(record: &Value) -> Self {
        Self::joined(record, None)
    }

    /// The entry of the record `record`, the end of an effect whose start record is `start`
    /// (its words say what ran).
    pub fn joined(record: &Value, start: Option<&Value>) -> Self {
        let text = |key: &str| record.get(key).and_then(Value::as_str).unwrap_or("");
        let event = text("event");
        let (operation, outcome) = split_event(event);
        let ts = text("ts");
        let at = DateTime::parse_from_rfc3339(ts)
            .ok()
            .map(|t| t.with_timezone(&Utc));
        let local = local_time(ts);
        let shown = |s: &str| shorten(Shown::message(s).as_str());
        let optional = |key: &str| record.get(key).and_then(Value::as_str).map(shown);
        let subject = shown(&subject_of(record));
        let said = match outcome {
            Outcome::Done => words::say(event, record, start),
            Outcome::Refused | Outcome::Failed => None,
        }
        .unwrap_or_default();
        let words = if said.words.is_empty() {
            subject.clone()
        } else {
            shorten_long(Shown::message(&said.words).as_str())
        };
        Self {
            seq: record.get("seq").and_then(Value::as_u64).unwrap_or(0),
            ts: Shown::message(ts).to_string(),
            local,
            event: Shown::message(event).to_string(),
            operation: Shown::message(operation).to_string(),
            outcome,
            actor: Shown::message(text("actor")).to_string(),
            actor_shown: crate::Actor::shown(text("actor")),
            subject,
            words,
            warning: said.warning.map(|w| Shown::message(&w).to_string()),
            code: optional("code"),
            message: optional("message").or_else(|| optional("why")),
            reason: optional("reason").filter(|r| !r.is_empty()),
            at,
        }
    }

    /// The entry on one line: local time, actor, event, outcome, subject, and for a refusal
    /// its code and message. Never more than one line: everything in it is escaped.
    pub fn line(&self) -> String {
        let mut line = format!(
            "{}  {}  {}  {}",
            self.local,
            self.actor_shown,
            self.event,
            self.outcome.as_str()
        );
        if !self.words.is_empty() {
            line.push_str("  ");
            line.push_str(&self.words);
        }
        if let Some(code) = &self.code {
            line.push_str(&format!("  [{code}]"));
        }
        if let (Outcome::Refused | Outcome::Failed, Some(message)) = (self.outcome, &self.message) {
            line.push_str(&format!(": {message}"));
        }
        if let Some(reason) = &self.reason {
            line.push_str(&format!("  reason: {reason}"));
        }
        if let Some(warning) = &self.warning {
            line.push_str(&format!("  [warning: {warning}]"));
        }
        line
    }

    /// When it was recorded, if the record says so readably.
    pub fn at(&self) -> Option<SystemTime> {
        self.at.map(SystemTime::from)
    }
}

/// A time recorded in RFC 3339 (`2026-12-01T10:00:00.000Z`), in local time with the offset
/// (`2026-12-01 11:00:00 +01:00`); escaped as recorded when it cannot be read.
pub fn local_time(ts: &str) -> String {
    DateTime::parse_from_rfc3339(ts).map_or_else(
        |_| Shown::message(ts).to_string(),
        |t| {
            t.with_timezone(&Local)
                .format("%Y-%m-%d %H:%M:%S %:z")
                .to_string()
        },
    )
}

/// The operation and outcome an event names: `upload.refused` → (`upload`, refused),
/// `grant.cache_clear_failed` → (`grant.cache_clear`, failed), `grant.add` → itself, done.
fn split_event(event: &str) -> (&str, Outcome) {
    if let Some(op) = event.strip_suffix(".refused") {
        (op, Outcome::Refused)
    } else if let Some(op) = event
        .strip_suffix(".failed")
        .or_else(|| event.strip_suffix("_failed"))
    {
        (op, Outcome::Failed)
    } else {
        (event, Outcome::Done)
    }
}

/// What a record is about: the first of [`SUBJECT_FIELDS`] it has (an array, such as a
/// command's words, joined by spaces), looked for in the record, then in the object it
/// describes (`grant`, `request`, `file`), the record's own `id` last.
fn subject_of(record: &Value) -> String {
    let own = subject_in(record, &SUBJECT_FIELDS[..SUBJECT_FIELDS.len() - 1]);
    if !own.is_empty() {
        return own;
    }
    for nested in ["grant", "request", "file", "result"] {
        if let Some(inner @ Value::Object(_)) = record.get(nested) {
            let found = subject_in(inner, SUBJECT_FIELDS);
            if !found.is_empty() {
                return found;
            }
        }
    }
    subject_in(record, &SUBJECT_FIELDS[SUBJECT_FIELDS.len() - 1..])
}

fn subject_in(record: &Value, keys: &[&str]) -> String {
    for key in keys {
        match record.get(*key) {
            Some(Value::String(s)) if !s.is_empty() => return s.clone(),
            Some(Value::Array(words)) if !words.is_empty() => {
                return words
                    .iter()
                    .map(|w| w.as_str().map_or_else(|| w.to_string(), str::to_owned))
                    .collect::<Vec<_>>()
                    .join(" ");
            }
            _ => {}
        }
    }
    String::new()
}

fn shorten(s: &str) -> String {
    shorten_to(s, MAX_SHOWN)
}

/// Words hold a command line and its outcome: they may run longer than a subject.
fn shorten_long(s: &str) -> String {
    shorten_to(s, 4 * MAX_SHOWN)
}

fn shorten_to(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_owned();
    }
    let mut short: String = s.chars().take(max).collect();
    short.push('…');
    short
}

/// Which entries to show.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    /// Only refusals.
    pub refused: bool,
    /// Only operations whose event starts with this (`upload`, `grant.`).
    pub op: Option<String>,
    /// Only records whose actor, as recorded or shown, contains this (`agent`, `uid:1000`,
    /// a user's name).
    pub actor: Option<String>,
    /// Only records from this time on.
    pub since: Option<SystemTime>,
    /// At most this many, the newest.
    pub limit: Option<usize>,
}

impl Filter {
    /// Whether `entry` passes (every condition but the limit).
    pub fn admits(&self, entry: &Entry) -> bool {
        (!self.refused || entry.outcome == Outcome::Refused)
            && self
                .op
                .as_deref()
                .is_none_or(|op| entry.event.starts_with(op))
            && self.actor.as_deref().is_none_or(|actor| {
                entry.actor.contains(actor) || entry.actor_shown.contains(actor)
            })
            && self
                .since
                .is_none_or(|since| entry.at().is_some_and(|at| at >= since))
    }
}

/// The entries of `log` that `filter` admits, oldest first (the newest `filter.limit` of
/// them), and the offset where the next look for newer ones starts.
///
/// # Errors
///
/// `io` when the log cannot be read.
pub fn show(log: &AuditLog, filter: &Filter) -> Result<(Vec<Entry>, u64)> {
    let (entries, follow) = follow(log, filter)?;
    Ok((entries, follow.offset))
}

/// [`show`], and the [`Follow`] that goes on from there: for watching the log.
///
/// With a limit, the log is read from its end, a block at a time, and only until the newest
/// `limit` entries the filter admits are found (or one older than `since`): the memory is that
/// of the entries shown, whatever the log's size. Without one, it is read from its start, a
/// line at a time.
///
/// # Errors
///
/// `io` when the log cannot be read.
pub fn follow(log: &AuditLog, filter: &Filter) -> Result<(Vec<Entry>, Follow)> {
    let mut kept = Starts::default();
    let (entries, offset) = match filter.limit {
        Some(limit) => newest(log, filter, limit)?,
        None => {
            let (fd, _) = log.reader()?;
            let mut starts = Starts::default();
            let mut entries = Vec::new();
            let mut end = 0;
            for line in lines::forwards(fd, 0) {
                let (at, line) = line?;
                end = at + line.len() as u64 + 1;
                let Some(record) = parsed(&line) else {
                    continue;
                };
                let entry = starts.entry(log, &record);
                if filter.admits(&entry) {
                    entries.push(entry);
                }
            }
            kept = starts;
            (entries, end)
        }
    };
    let follow = Follow {
        filter: filter.clone(),
        offset,
        starts: kept,
    };
    Ok((entries, follow))
}

/// The newest `limit` entries `filter` admits, oldest first, read from the log's end; and
/// where the log's whole lines end.
fn newest(log: &AuditLog, filter: &Filter, limit: usize) -> Result<(Vec<Entry>, u64)> {
    let (fd, size) = log.reader()?;
    let lines = lines::Backwards::new(fd, size)?;
    let end = lines.end();
    let mut entries = Vec::new();
    if limit == 0 {
        return Ok((entries, end));
    }
    for line in lines {
        let (_, line) = line?;
        let Some(record) = parsed(&line) else {
            continue;
        };
        // What the filter looks at does not depend on the join: join only what is shown.
        let plain = Entry::of(&record);
        // Records are in time order but for clock jumps: the scan stops at the first one
        // older than `since`.
        if let (Some(since), Some(at)) = (filter.since, plain.at())
            && at < since
        {
            break;
        }
        if filter.admits(&plain) {
            let entry = match start_at(log, &record) {
                Some(start) => Entry::joined(&record, Some(&start)),
                None => plain,
            };
            entries.push(entry);
            if entries.len() == limit {
                break;
            }
        }
    }
    entries.reverse();
    Ok((entries, end))
}

/// A line of the log as a record, if it is one.
fn parsed(line: &[u8]) -> Option<Value> {
    match serde_json::from_slice(line) {
        Ok(record @ Value::Object(_)) => Some(record),
        _ => None,
    }
}

/// The start record an end record names (`start_at`: where it begins in the log), if it does
/// and it is there.
fn start_at(log: &AuditLog, record: &Value) -> Option<Value> {
    let at = record["start_at"].as_u64()?;
    let start = log.record_at(at).ok().flatten()?;
    (start["id"] == record["id"]).then_some(start)
}

/// The log watched from where [`follow`] left it: each look reads only what was appended
/// since, and joins each end with its start, wherever that start was.
#[derive(Debug)]
pub struct Follow {
    filter: Filter,
    offset: u64,
    /// The starts of the effects not ended yet.
    starts: Starts,
}

impl Follow {
    /// The entries recorded since the last look that the filter admits (its limit not
    /// applied).
    ///
    /// # Errors
    ///
    /// `io` when the log cannot be read.
    pub fn newer(&mut self, log: &AuditLog) -> Result<Vec<Entry>> {
        let (records, end) = log.records_from(self.offset)?;
        self.offset = end;
        let entries = records
            .iter()
            .map(|r| self.starts.entry(log, r))
            .filter(|e| self.filter.admits(e))
            .collect();
        Ok(entries)
    }
}

/// The entries recorded after byte `offset` that `filter` admits (its limit not applied), and
/// where the next look starts. An end whose start came before `offset` is said without what
/// ran ([`Follow`] knows it).
///
/// # Errors
///
/// `io` when the log cannot be read.
pub fn newer(log: &AuditLog, filter: &Filter, offset: u64) -> Result<(Vec<Entry>, u64)> {
    let (records, end) = log.records_from(offset)?;
    let mut starts = Starts::default();
    let entries = records
        .iter()
        .map(|r| starts.entry(log, r))
        .filter(|e| filter.admits(e))
        .collect();
    Ok((entries, end))
}

/// The start records of effects (`exec.start`, `upload.start`) by id, to join each end with
/// when the end does not say where its start is (`start_at`, written since ends say it).
#[derive(Debug, Default)]
struct Starts(std::collections::HashMap<String, Value>);

impl Starts {
    /// The entry of `record`, joined with its start; a start is kept for its end (until the
    /// end says where it is).
    fn entry(&mut self, log: &AuditLog, record: &Value) -> Entry {
        self.note(record);
        let named = start_at(log, record);
        let entry = Entry::joined(record, named.as_ref().or(self.start_of(record)));
        if let Some(id) = Self::ends(record) {
            self.0.remove(id);
        }
        entry
    }

    /// Keep `record` if it starts an effect.
    fn note(&mut self, record: &Value) {
        let event = record["event"].as_str().unwrap_or("");
        if event.ends_with(".start")
            && let Some(id) = record["id"].as_str()
        {
            self.0.insert(id.to_owned(), record.clone());
        }
    }

    /// The start of the effect `record` ends or stops, if known.
    fn start_of(&self, record: &Value) -> Option<&Value> {
        let stops = record["event"]
            .as_str()
            .is_some_and(|e| e.ends_with(".stop"));
        let id = if stops {
            record["id"].as_str()
        } else {
            Self::ends(record)
        };
        id.and_then(|id| self.0.get(id))
    }

    /// The id of the effect `record` ends (`<op>.end`, `<op>.ended_unknown`).
    fn ends(record: &Value) -> Option<&str> {
        let event = record["event"].as_str()?;
        (event.ends_with(".end") || event.ends_with(".ended_unknown"))
            .then(|| record["id"].as_str())
            .flatten()
    }
}

/// How many records of one operation ended one way.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Count {
    /// The operation (`upload`, `grant.add`).
    pub operation: String,
    /// How they ended.
    pub outcome: Outcome,
    /// How many.
    pub count: usize,
}

/// What the log holds, summed up: what was done and what was tried.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Summary {
    /// The records summed up.
    pub records: usize,
    /// Per operation and outcome, by operation.
    pub counts: Vec<Count>,
    /// The refusals, oldest first: what was tried and not let through (the newest
    /// [`MAX_REFUSED_LISTED`] of them; `refused_count` says how many there were).
    pub refused: Vec<Entry>,
    /// How many refusals there were.
    pub refused_count: usize,
}

/// The most refusals a summary lists (it counts them all).
pub const MAX_REFUSED_LISTED: usize = 1000;

/// The summary of the records of `log` from `since` on (all without it).
///
/// # Errors
///
/// `io` when the log cannot be read.
pub fn summary(log: &AuditLog, since: Option<SystemTime>) -> Result<Summary> {
    let (fd, _) = log.reader()?;
    let mut counts: std::collections::BTreeMap<(String, Outcome), usize> = Default::default();
    let mut refused = std::collections::VecDeque::new();
    let (mut records, mut refused_count) = (0, 0);
    // A line at a time, each record looked at for what the summary needs: the memory is the
    // counts and the refusals listed, whatever the log's size.
    for line in lines::forwards(fd, 0) {
        let (_, line) = line?;
        let Ok(head) = serde_json::from_slice::<Head<'_>>(&line) else {
            continue;
        };
        if let Some(since) = since {
            let at = DateTime::parse_from_rfc3339(&head.ts).ok();
            if at.is_none_or(|at| SystemTime::from(at) < since) {
                continue;
            }
        }
        records += 1;
        let (operation, outcome) = split_event(&head.event);
        *counts
            .entry((Shown::message(operation).to_string(), outcome))
            .or_default() += 1;
        if outcome == Outcome::Refused {
            refused_count += 1;
            if let Some(record) = parsed(&line) {
                refused.push_back(Entry::of(&record));
                if refused.len() > MAX_REFUSED_LISTED {
                    refused.pop_front();
                }
            }
        }
    }
    Ok(Summary {
        records,
        counts: counts
            .into_iter()
            .map(|((operation, outcome), count)| Count {
                operation,
                outcome,
                count,
            })
            .collect(),
        refused: refused.into(),
        refused_count,
    })
}

/// What a summary reads of a record.
#[derive(serde::Deserialize)]
struct Head<'a> {
    #[serde(default, borrow)]
    event: std::borrow::Cow<'a, str>,
    #[serde(default, borrow)]
    ts: std::borrow::Cow<'a, str>,
}

/// What the audit log recorded of a file of the download lane when it was saved.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Recorded {
    /// Its SHA-256.
    pub sha256: String,
    /// The name the agent asked for, escaped and quoted as every word shown (`$'…'` for
    /// hidden characters), when it is not the name the file got.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// The sign of an attack in that name, in words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
}

/// What the audit log recorded for each name of the download lane (the last record of a
/// save, a fetch or a recovery for that name), to show beside the lane's listing.
///
/// # Errors
///
/// `io` when the log cannot be read.
pub fn download_records(log: &AuditLog) -> Result<std::collections::HashMap<String, Recorded>> {
    let (fd, _) = log.reader()?;
    let mut recorded = std::collections::HashMap::new();
    // A line at a time: the memory is the map, whatever the log's size.
    for line in lines::forwards(fd, 0) {
        let (_, line) = line?;
        let Some(r) = parsed(&line) else { continue };
        let r = &r;
        let file = match r["event"].as_str() {
            Some("download.save" | "download.fetch") => r,
            Some("download.recovered") => &r["file"],
            _ => continue,
        };
        if let (Some(name), Some(sha256)) = (file["name"].as_str(), file["sha256"].as_str()) {
            let hint = file["hint"].as_str();
            recorded.insert(
                name.to_owned(),
                Recorded {
                    sha256: sha256.to_owned(),
                    hint: hint.map(words::quoted),
                    warning: hint.and_then(words::attack_warning),
                },
            );
        }
    }
    Ok(recorded)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_name_their_operation_and_outcome() {
        assert_eq!(split_event("upload.refused"), ("upload", Outcome::Refused));
        assert_eq!(
            split_event("grant.cache_clear_failed"),
            ("grant.cache_clear", Outcome::Failed)
        );
        assert_eq!(
            split_event("download.fetch.failed"),
            ("download.fetch", Outcome::Failed)
        );
        assert_eq!(split_event("grant.add"), ("grant.add", Outcome::Done));
    }

    #[test]
    fn a_hostile_subject_stays_on_its_line() {
        let record = serde_json::json!({
            "seq": 3, "ts": "2026-12-01T10:00:00.000Z", "event": "upload.refused",
            "actor": "agent\u{1b}[2J", "subject": "/x\n2026-12-01 ok\u{1b}[31m",
            "code": "outside_allowlist", "message": "m\r\n",
        });
        let line = Entry::of(&record).line();
        assert!(!line.contains('\n') && !line.contains('\r') && !line.contains('\u{1b}'));
        assert!(line.contains("upload.refused  refused"), "{line}");
    }
}
