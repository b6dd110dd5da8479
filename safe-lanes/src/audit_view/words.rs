//! Each record in words, from its fields: what a person needs to know of it without reading
//! JSON. A command is its command line (each word quoted as the library quotes every command
//! line it prints, [`quote`]), its folder, how it ended and how long it took; an upload is
//! its name, source and uploader; a patch is its file; a save is the name the agent asked for
//! beside the name it got, with a warning when the difference is the sign of an attack
//! ([`attack_signs`]).
//!
//! An end record says only how its effect ended; its words are joined with its start's (the
//! same `id`), which holds what ran. Records written before a field existed are said with
//! what they hold.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::grants::proposal::quote;
use crate::name::attack_signs;

/// A record in words, with a warning when it shows the sign of an attack.
#[derive(Debug, Default)]
pub(super) struct Said {
    pub(super) words: String,
    pub(super) warning: Option<String>,
}

impl Said {
    fn words(words: String) -> Option<Self> {
        Some(Self {
            words,
            warning: None,
        })
    }
}

/// `record` (its event `event`) in words; `start` is the start record of an end. `None` for
/// a record that has no words of its own here (it is shown by its subject).
pub(super) fn say(event: &str, record: &Value, start: Option<&Value>) -> Option<Said> {
    match event {
        "exec.start" => Said::words(format!("ran {}", command(record, true))),
        "exec.end" | "upload.end" => {
            let what = match (event, start) {
                ("exec.end", Some(start)) => command(start, false),
                ("upload.end", Some(start)) => upload(start),
                _ => format!("the effect {}", text(record, "id")),
            };
            Said::words(format!("{what}: {}", ended(record, start)))
        }
        "exec.ended_unknown" | "upload.ended_unknown" => {
            let what = match (event, start) {
                ("exec.ended_unknown", Some(start)) => command(start, false),
                ("upload.ended_unknown", Some(start)) => upload(start),
                _ => format!("the effect {}", text(record, "id")),
            };
            Said::words(format!(
                "{what}: its gateway died while it ran; what it did is unknown"
            ))
        }
        "upload.start" => Said::words(format!("uploading {}", upload(record))),
        "exec.stop" => Said::words(match start {
            Some(start) => format!("asked {} to stop", command(start, false)),
            None => format!("asked the command {} to stop", text(record, "id")),
        }),
        "patch.apply" => Said::words(patch(record)),
        "download.save" | "download.fetch" => saved(record, record),
        "download.recovered" => saved(&record["file"], record),
        "change.held" => Said::words(held(record)),
        "change.published" => Said::words(format!(
            "published {} of what {} wrote into {}",
            count(record["published"].as_u64().unwrap_or(0), "change"),
            origin(record),
            list(&record["grants"]),
        )),
        "change.applied" | "change.discarded" => Said::words(format!(
            "{} {} of held set {}",
            if event == "change.applied" {
                "applied"
            } else {
                "discarded"
            },
            paths(&record["paths"]),
            text(record, "id"),
        )),
        "audit.restarted" => Some(Said {
            words: format!(
                "started the audit log again: {}",
                text(record, "earlier_log")
            ),
            warning: Some(match record["witness_seq"].as_u64() {
                Some(0) => "the earlier log had no witnessed lines".to_owned(),
                Some(seq) => format!("the earlier log's {seq} witnessed lines are not in this one"),
                None => "the earlier log's lines are not in this one".to_owned(),
            }),
        }),
        "audit.cut" => Some(Said {
            words: format!(
                "found the audit log cut: it ended at line {}, its witness had recorded line {}",
                record["log_seq"].as_u64().unwrap_or(0),
                record["witness_seq"].as_u64().unwrap_or(0)
            ),
            warning: Some("lines were cut from the end of the log".to_owned()),
        }),
        _ => None,
    }
}

/// A command's start record as its command line, each word quoted once.
pub(crate) fn command_line(start: &Value) -> String {
    let mut words = vec![quoted(text(start, "program"))];
    if let Some(args) = start["args"].as_array() {
        words.extend(args.iter().map(|a| quoted(a.as_str().unwrap_or(""))));
    }
    words.join(" ")
}

/// A command's start record as its command line and folder, and with `limits` its timeout
/// and network.
fn command(start: &Value, limits: bool) -> String {
    let mut said = format!("`{}`", command_line(start));
    match start["cwd"].as_str() {
        Some(alias) => said.push_str(&format!(" in {alias}")),
        None => said.push_str(" in a scratch folder"),
    }
    if !limits {
        return said;
    }
    if let Some(timeout) = start["timeout_s"].as_u64() {
        said.push_str(&format!(
            ", timeout {}",
            in_words(Duration::from_secs(timeout))
        ));
    }
    if start["network"].as_bool() == Some(true) {
        said.push_str(", network allowed");
    }
    said
}

/// An upload's start record: the name, its size, where it came from, who took it.
fn upload(start: &Value) -> String {
    let mut said = format!(
        "{} ({})",
        quoted(text(start, "name")),
        crate::risk::bytes_in_words(start["bytes"].as_u64().unwrap_or(0))
    );
    match start["source"].as_str() {
        Some(source) => said.push_str(&format!(" from {}", quoted(source))),
        None => said.push_str(" (content the agent handed over)"),
    }
    said.push_str(&format!(" with `{}`", quoted(text(start, "uploader"))));
    said
}

/// How an effect ended, from its end record (its start's timeout for a timed-out one).
fn ended(end: &Value, start: Option<&Value>) -> String {
    let took = end["duration_ms"]
        .as_u64()
        .map(|ms| format!(" after {}", in_words(Duration::from_millis(ms))));
    let took = took.as_deref().unwrap_or("");
    if let Some(error) = end.get("error").filter(|e| e.is_object()) {
        return format!(
            "failed to run ({}: {})",
            text(error, "code"),
            text(error, "message")
        );
    }
    if end["ended"].as_str() == Some("unknown") {
        return "ended without saying how".to_owned();
    }
    if end["timed_out"].as_bool() == Some(true) {
        let timeout = start
            .and_then(|s| s["timeout_s"].as_u64())
            .map(|t| format!(" of {}", in_words(Duration::from_secs(t))))
            .unwrap_or_default();
        return format!("killed at its timeout{timeout}{took}");
    }
    if let Some(why) = end["stopped"].as_str() {
        return format!("stopped ({why}){took}");
    }
    if let Some(signal) = end["signal"].as_i64() {
        return format!("killed by signal {signal}{took}");
    }
    match end["exit_code"].as_i64() {
        Some(code) => format!("exit {code}{took}"),
        None => format!("ended{took}"),
    }
}

/// A patch record: what happened to which file, where.
fn patch(record: &Value) -> String {
    let result = &record["result"];
    let file = record["file"]
        .as_str()
        .or_else(|| result["path"].as_str())
        .unwrap_or("");
    let alias = text(record, "alias");
    if result["held"].as_bool() == Some(true) {
        return format!(
            "held a patch of {} in {alias} for you ({}; set {})",
            quoted(file),
            text(result, "why"),
            text(result, "set"),
        );
    }
    let change = result["change"].as_str().unwrap_or("patched");
    let hunks = result["hunks"].as_u64().unwrap_or(0);
    format!(
        "{change} {} in {alias} ({})",
        quoted(file),
        count(hunks, "hunk")
    )
}

/// A save: the name it got, the name the agent asked for, and a warning when that name was
/// an attack's.
fn saved(file: &Value, record: &Value) -> Option<Said> {
    let name = text(file, "name");
    let bytes = crate::risk::bytes_in_words(file["bytes"].as_u64().unwrap_or(0));
    let from = record["url"]
        .as_str()
        .map(|url| format!(" from {url}"))
        .unwrap_or_default();
    let Some(hint) = file["hint"].as_str() else {
        return Said::words(format!("saved {} ({bytes}){from}", quoted(name)));
    };
    let warning = attack_warning(hint);
    Some(Said {
        words: format!(
            "saved {} ({bytes}){from}; the agent asked for {}",
            quoted(name),
            quoted(hint)
        ),
        warning,
    })
}

/// The warning a name the agent asked for earns, when it shows the sign of an attack.
pub(super) fn attack_warning(hint: &str) -> Option<String> {
    let signs = attack_signs(hint);
    (!signs.is_empty()).then(|| {
        let signs: Vec<&str> = signs.iter().map(|s| s.words()).collect();
        format!(
            "the name the agent asked for held {}: a sign of an attack",
            and_list(&signs)
        )
    })
}

/// A held change set: what it holds and how the human looks at it.
fn held(record: &Value) -> String {
    let entries: Vec<String> = record["held"]
        .as_array()
        .map(|held| {
            held.iter()
                .map(|h| {
                    format!(
                        "{} in {} ({})",
                        quoted(text(h, "path")),
                        text(h, "grant"),
                        text(h, "why")
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    let id = text(record, "id");
    format!(
        "held for you, from {}: {}; published {}. See `safe-lanes changes show {id}`",
        origin(record),
        if entries.is_empty() {
            "nothing".to_owned()
        } else {
            entries.join(", ")
        },
        count(record["published"].as_u64().unwrap_or(0), "change"),
    )
}

/// What made a change set: its command line, or a patch.
fn origin(record: &Value) -> String {
    let origin = &record["origin"];
    match origin["command"].as_str() {
        Some(command) if !command.is_empty() => format!("`{command}`"),
        _ => format!("a {}", origin["op"].as_str().unwrap_or("command")),
    }
}

fn paths(paths: &Value) -> String {
    let list: Vec<String> = paths
        .as_array()
        .map(|p| p.iter().map(|p| quoted(p.as_str().unwrap_or(""))).collect())
        .unwrap_or_default();
    if list.is_empty() {
        "nothing".to_owned()
    } else {
        list.join(", ")
    }
}

fn list(values: &Value) -> String {
    let items: Vec<&str> = values
        .as_array()
        .map(|v| v.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if items.is_empty() {
        "its folders".to_owned()
    } else {
        items.join(", ")
    }
}

/// One word as the library prints words for a person: quoted for a shell when it needs to
/// be, hidden characters escaped ([`quote`]).
pub(super) fn quoted(word: &str) -> String {
    quote(Path::new(word))
}

fn text<'v>(record: &'v Value, key: &str) -> &'v str {
    record[key].as_str().unwrap_or("")
}

/// `1 hunk`, `2 hunks`.
fn count(n: u64, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// `a`, `a and b`, `a, b and c`.
fn and_list(items: &[&str]) -> String {
    match items {
        [] => String::new(),
        [one] => (*one).to_owned(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// A duration for a person: `6 ms`, `1.2 s`, `2 min 5 s`, `1 h 3 min`.
pub fn in_words(d: Duration) -> String {
    let ms = d.as_millis();
    let s = d.as_secs();
    if ms < 1000 {
        format!("{ms} ms")
    } else if s < 60 {
        format!("{:.1} s", d.as_secs_f64())
    } else if s < 3600 && s.is_multiple_of(60) {
        format!("{} min", s / 60)
    } else if s < 3600 {
        format!("{} min {} s", s / 60, s % 60)
    } else if s % 3600 / 60 == 0 {
        format!("{} h", s / 3600)
    } else {
        format!("{} h {} min", s / 3600, s % 3600 / 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn start() -> Value {
        json!({"event": "exec.start", "id": "e1", "program": "sh",
               "args": ["-c", "echo 'hi'; exit 3"], "cwd": "site", "timeout_s": 120})
    }

    #[test]
    fn a_command_is_its_command_line_folder_exit_and_duration() {
        let said = say("exec.start", &start(), None).unwrap();
        assert_eq!(
            said.words,
            r#"ran `sh -c 'echo '\''hi'\''; exit 3'` in site, timeout 2 min"#
        );
        let end = json!({"event": "exec.end", "id": "e1", "exit_code": 3, "duration_ms": 1250});
        let said = say("exec.end", &end, Some(&start())).unwrap();
        assert!(
            said.words
                .ends_with("; exit 3'` in site: exit 3 after 1.2 s"),
            "{}",
            said.words
        );
        let timed_out = json!({"id": "e1", "timed_out": true, "signal": 9, "duration_ms": 120_004});
        let said = say("exec.end", &timed_out, Some(&start())).unwrap();
        assert!(
            said.words
                .ends_with(": killed at its timeout of 2 min after 2 min"),
            "{}",
            said.words
        );
    }

    #[test]
    fn an_end_without_its_start_still_says_how_it_ended() {
        let end = json!({"id": "e9", "signal": 15});
        assert_eq!(
            say("exec.end", &end, None).unwrap().words,
            "the effect e9: killed by signal 15"
        );
    }

    #[test]
    fn a_hostile_hint_is_shown_escaped_and_flagged() {
        let record = json!({"name": "bashrc", "bytes": 6, "hint": "../../.bash\u{202e}rc"});
        let said = say("download.save", &record, None).unwrap();
        assert_eq!(
            said.words,
            r"saved bashrc (6 bytes); the agent asked for $'../../.bash\xe2\x80\xaerc'"
        );
        assert_eq!(
            said.warning.as_deref(),
            Some(
                "the name the agent asked for held a path separator, `..` and hidden \
                 characters: a sign of an attack"
            )
        );
        let plain = json!({"name": "Q3_report.pdf", "bytes": 1, "hint": "Q3 report?.pdf"});
        assert!(
            say("download.save", &plain, None)
                .unwrap()
                .warning
                .is_none()
        );
    }

    #[test]
    fn durations_read_as_a_person_says_them() {
        assert_eq!(in_words(Duration::from_millis(6)), "6 ms");
        assert_eq!(in_words(Duration::from_millis(61_000)), "1 min 1 s");
        assert_eq!(in_words(Duration::from_secs(3720)), "1 h 2 min");
    }
}
