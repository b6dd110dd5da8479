//! Reading git's configuration files strictly enough to tell an inert change from one that
//! makes git run something.
//!
//! Git runs programs its configuration names (`core.fsmonitor`, `core.sshCommand`,
//! `core.hooksPath`, `alias.*`, `filter.*`, `include.path` …). A command that changes a
//! repository's `config` is therefore judged by what it changed: every entry added or removed
//! must be on [`INERT_KEYS`], and every URL among them must be one git fetches over a network
//! protocol ([`inert_value`]). Anything this reader does not understand — a line it cannot
//! parse, a NUL byte, a file that is not UTF-8 — makes the change not inert: it is held for the
//! human rather than guessed at.
//!
//! The syntax is git's (`git help config`, "Syntax"): `[section]`, `[section "subsection"]`
//! and the old `[section.subsection]`; `name = value`, a bare `name` (true), values with
//! double quotes, the escapes `\" \\ \n \t \b`, `#` and `;` comments outside quotes, and `\`
//! at the end of a line continuing the value. Section and variable names are compared without
//! case, subsections with it.

use std::collections::BTreeMap;

/// One variable: `section[.subsection].name` as git prints it (`remote.origin.url`), its
/// section and name lower case.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Entry {
    /// The section, lower case.
    pub(crate) section: String,
    /// The subsection, as written (case kept).
    pub(crate) subsection: Option<String>,
    /// The variable's name, lower case.
    pub(crate) name: String,
    /// Its value; `None` for a bare name (git reads it as true).
    pub(crate) value: Option<String>,
}

impl Entry {
    /// The key as `git config --list` prints it.
    pub(crate) fn key(&self) -> String {
        match &self.subsection {
            Some(sub) => format!("{}.{sub}.{}", self.section, self.name),
            None => format!("{}.{}", self.section, self.name),
        }
    }
}

/// The variables git only stores: none of them makes git run a program, read another file or
/// change what it trusts. `*` stands for any subsection.
pub(crate) const INERT_KEYS: &[(&str, Option<&str>, &str)] = &[
    ("core", None, "repositoryformatversion"),
    ("core", None, "filemode"),
    ("core", None, "bare"),
    ("core", None, "logallrefupdates"),
    ("core", None, "ignorecase"),
    ("core", None, "precomposeunicode"),
    ("core", None, "symlinks"),
    ("extensions", None, "objectformat"),
    ("remote", Some("*"), "url"),
    ("remote", Some("*"), "pushurl"),
    ("remote", Some("*"), "fetch"),
    ("branch", Some("*"), "remote"),
    ("branch", Some("*"), "merge"),
    ("submodule", Some("*"), "url"),
    ("submodule", Some("*"), "active"),
    ("user", None, "name"),
    ("user", None, "email"),
];

/// Why a configuration file could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Unreadable(pub(crate) String);

/// The variables of the configuration text `text`, in order.
///
/// # Errors
///
/// [`Unreadable`] for anything outside the syntax above.
pub(crate) fn parse(text: &[u8]) -> Result<Vec<Entry>, Unreadable> {
    let text = std::str::from_utf8(text).map_err(|_| Unreadable("not UTF-8".into()))?;
    if text.contains('\0') {
        return Err(Unreadable("a NUL byte".into()));
    }
    let mut out = Vec::new();
    let mut section: Option<(String, Option<String>)> = None;
    let mut lines = text.lines().enumerate();
    while let Some((n, line)) = lines.next() {
        let bad = |why: &str| Unreadable(format!("line {}: {why}", n + 1));
        let mut rest = line.trim_start();
        if let Some(after) = rest.strip_prefix('[') {
            let (header, tail) = section_header(after).ok_or_else(|| bad("a malformed section"))?;
            section = Some(header);
            rest = tail.trim_start();
        }
        if rest.is_empty() || rest.starts_with('#') || rest.starts_with(';') {
            continue;
        }
        let (sec, sub) = section
            .clone()
            .ok_or_else(|| bad("a variable before any section"))?;
        let name_len = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
            .unwrap_or(rest.len());
        let name = &rest[..name_len];
        if name.is_empty() || !name.starts_with(|c: char| c.is_ascii_alphabetic()) {
            return Err(bad("a malformed variable name"));
        }
        let after = rest[name_len..].trim_start();
        let value = if after.is_empty() || after.starts_with('#') || after.starts_with(';') {
            None
        } else if let Some(raw) = after.strip_prefix('=') {
            let mut raw = raw.to_owned();
            // A value whose line ends in an odd `\` goes on to the next line.
            while continues(&raw) {
                raw.pop();
                let (_, next) = lines
                    .next()
                    .ok_or_else(|| bad("a value continued past the end"))?;
                raw.push_str(next);
            }
            Some(value(&raw).ok_or_else(|| bad("a malformed value"))?)
        } else {
            return Err(bad("a variable name followed by something other than `=`"));
        };
        out.push(Entry {
            section: sec,
            subsection: sub,
            name: name.to_ascii_lowercase(),
            value,
        });
    }
    Ok(out)
}

/// `[section]`, `[section "sub"]` or `[section.sub]` after its `[`: the header, and what
/// follows its `]` on the line.
fn section_header(after: &str) -> Option<((String, Option<String>), &str)> {
    let name_len = after
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '.'))
        .unwrap_or(after.len());
    let name = &after[..name_len];
    let rest = &after[name_len..];
    if name.is_empty() {
        return None;
    }
    if let Some(tail) = rest.strip_prefix(']') {
        // The old form `[section.sub]`: the subsection is lower-cased by git.
        return Some(match name.split_once('.') {
            Some((sec, sub)) if !sec.is_empty() && !sub.is_empty() => (
                (sec.to_ascii_lowercase(), Some(sub.to_ascii_lowercase())),
                tail,
            ),
            Some(_) => return None,
            None => ((name.to_ascii_lowercase(), None), tail),
        });
    }
    if name.contains('.') {
        return None;
    }
    let rest = rest.trim_start_matches([' ', '\t']).strip_prefix('"')?;
    let mut sub = String::new();
    let mut chars = rest.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => {
                let tail = rest[i + 1..].strip_prefix(']')?;
                return Some(((name.to_ascii_lowercase(), Some(sub)), tail));
            }
            '\\' => sub.push(chars.next()?.1),
            c => sub.push(c),
        }
    }
    None
}

/// Whether the raw value `raw` ends in a `\` that escapes the line's end (not one escaped
/// itself, and not inside a comment).
fn continues(raw: &str) -> bool {
    let trailing = raw.bytes().rev().take_while(|b| *b == b'\\').count();
    trailing % 2 == 1 && !in_comment(raw)
}

/// Whether the end of `raw` lies inside a comment.
fn in_comment(raw: &str) -> bool {
    let (mut quoted, mut escaped) = (false, false);
    for c in raw.chars() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '"' => quoted = !quoted,
            '#' | ';' if !quoted => return true,
            _ => {}
        }
    }
    false
}

/// The value of the raw text after `=`: quotes removed, escapes read, a comment cut, the
/// whitespace around it trimmed (whitespace inside quotes kept). `None` when malformed.
fn value(raw: &str) -> Option<String> {
    let mut out = String::new();
    let mut quoted = false;
    // Unquoted whitespace at the end is dropped; kept until something follows it.
    let mut pending = String::new();
    let mut chars = raw.trim_start().chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                out.push_str(&std::mem::take(&mut pending));
                quoted = !quoted;
            }
            '\\' => {
                out.push_str(&std::mem::take(&mut pending));
                out.push(match chars.next()? {
                    'n' => '\n',
                    't' => '\t',
                    'b' => '\u{8}',
                    '"' => '"',
                    '\\' => '\\',
                    _ => return None,
                });
            }
            '#' | ';' if !quoted => break,
            c if c.is_whitespace() && !quoted => pending.push(c),
            c => {
                out.push_str(&std::mem::take(&mut pending));
                out.push(c);
            }
        }
    }
    (!quoted).then_some(out)
}

/// Whether `entry` is one git only stores ([`INERT_KEYS`], with [`inert_value`]).
pub(crate) fn is_inert(entry: &Entry) -> bool {
    INERT_KEYS.iter().any(|(section, sub, name)| {
        *section == entry.section
            && *name == entry.name
            && matches!(
                (sub, &entry.subsection),
                (None, None) | (Some("*"), Some(_))
            )
    }) && inert_value(entry)
}

/// A URL git may be told to fetch from or push to must be one of its network or file
/// protocols: `ext::` runs a command, `fd::` talks to descriptors, and a value starting with
/// `-` can be read as an option by the program git hands it to.
fn inert_value(entry: &Entry) -> bool {
    if !matches!(entry.name.as_str(), "url" | "pushurl") {
        return true;
    }
    let Some(url) = entry.value.as_deref() else {
        return false;
    };
    let lower = url.trim_start().to_ascii_lowercase();
    !(lower.starts_with('-') || lower.starts_with("ext::") || lower.starts_with("fd::"))
}

/// Why changing the configuration `before` into `after` is not inert, if it is not: each
/// entry added or removed (counted, so a repeated entry counts each time) must be inert.
/// A file that cannot be read is not inert.
pub(crate) fn not_inert(before: &[u8], after: &[u8]) -> Option<String> {
    let before = match parse(before) {
        Ok(entries) => entries,
        Err(Unreadable(why)) => return Some(format!("the configuration before it: {why}")),
    };
    let after = match parse(after) {
        Ok(entries) => entries,
        Err(Unreadable(why)) => return Some(format!("the new configuration: {why}")),
    };
    let mut counts: BTreeMap<&Entry, i64> = BTreeMap::new();
    for e in &after {
        *counts.entry(e).or_default() += 1;
    }
    for e in &before {
        *counts.entry(e).or_default() -= 1;
    }
    counts
        .into_iter()
        .filter(|(_, n)| *n != 0)
        .find(|(e, _)| !is_inert(e))
        .map(|(e, n)| {
            format!(
                "{} {}, which git may act on",
                if n > 0 { "it sets" } else { "it removes" },
                crate::error::Shown::text(&e.key())
            )
        })
}

/// The words of the values of `entries` that are not inert and that read as paths (they
/// contain a `/`, or start with `.`): what the human's own configuration points git at, which
/// a command must not write. `~/` is left out: a home folder's files are judged on their own.
pub(crate) fn named_paths(entries: &[Entry]) -> Vec<String> {
    let mut out = Vec::new();
    for e in entries.iter().filter(|e| !is_inert(e)) {
        let Some(value) = &e.value else { continue };
        for word in value.split(|c: char| c.is_whitespace() || c == '=' || c == ';') {
            let word = word.trim_start_matches('!').trim_matches(['"', '\'']);
            if !word.starts_with('~') && (word.contains('/') || word.starts_with('.')) {
                out.push(word.trim_end_matches('/').to_owned());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(text: &str) -> Vec<(String, Option<String>)> {
        parse(text.as_bytes())
            .unwrap()
            .into_iter()
            .map(|e| (e.key(), e.value))
            .collect()
    }

    #[test]
    fn git_inits_and_clones_configuration_reads_as_it_is() {
        let init = "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\
                    \tlogallrefupdates = true\n";
        assert_eq!(keys(init).len(), 4);
        assert_eq!(not_inert(b"", init.as_bytes()), None);
        let clone = format!(
            "{init}[remote \"origin\"]\n\turl = https://example.org/x.git\n\
             \tfetch = +refs/heads/*:refs/remotes/origin/*\n[branch \"main\"]\n\
             \tremote = origin\n\tmerge = refs/heads/main\n"
        );
        assert_eq!(not_inert(init.as_bytes(), clone.as_bytes()), None);
    }

    #[test]
    fn the_syntax_git_accepts_is_read_as_git_reads_it() {
        type Entries<'a> = &'a [(&'a str, Option<&'a str>)];
        let cases: &[(&str, Entries<'_>)] = &[
            (
                "[Core]\nFileMode = True\n",
                &[("core.filemode", Some("True"))],
            ),
            ("[core] bare = false\n", &[("core.bare", Some("false"))]),
            ("[core]\n\tbare\n", &[("core.bare", None)]),
            (
                "[remote \"Or\\\"ig\"]\nurl = a # c\n",
                &[("remote.Or\"ig.url", Some("a"))],
            ),
            (
                "[remote.Origin]\nurl=\"a ; b\"\n",
                &[("remote.origin.url", Some("a ; b"))],
            ),
            (
                "[alias]\n\tx = !echo \\\n  one\n",
                &[("alias.x", Some("!echo   one"))],
            ),
            (
                "; c\n# c\n\n[user]\nname = \"A\\tB\"\n",
                &[("user.name", Some("A\tB"))],
            ),
        ];
        for (text, want) in cases {
            let want: Vec<_> = want
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.map(str::to_owned)))
                .collect();
            assert_eq!(keys(text), want, "{text:?}");
        }
    }

    #[test]
    fn what_the_reader_does_not_understand_is_not_inert() {
        for text in [
            "bare = true\n",
            "[core\nbare = true\n",
            "[core]\nbare = \"unclosed\n",
            "[core]\n9x = 1\n",
            "[core]\nbare true\n",
            "[core]\nbare = \\q\n",
            "[core]\nbare = a\\\n",
            "[core]\0\n",
        ] {
            assert!(parse(text.as_bytes()).is_err(), "{text:?}");
            assert!(not_inert(b"", text.as_bytes()).is_some(), "{text:?}");
        }
        assert!(not_inert(b"", &[0xff, 0xfe]).is_some());
    }

    #[test]
    fn only_inert_entries_added_or_removed_keep_a_change_inert() {
        let base = b"[core]\n\tbare = false\n\tfsmonitor = ./watch.sh\n";
        // The human's own fsmonitor stays: adding an inert entry is inert.
        let added = b"[core]\n\tbare = false\n\tfsmonitor = ./watch.sh\n[user]\n\tname = A\n";
        assert_eq!(not_inert(base, added), None);
        for after in [
            &b"[core]\n\tbare = false\n\tfsmonitor = ./evil.sh\n"[..],
            b"[core]\n\tbare = false\n",
            b"[core]\n\tbare = false\n\tfsmonitor = ./watch.sh\n\thooksPath = x\n",
            b"[core]\n\tbare = false\n\tfsmonitor = ./watch.sh\n[alias]\n\tst = !sh\n",
            b"[core]\n\tbare = false\n\tfsmonitor = ./watch.sh\n[include]\n\tpath = x\n",
            b"[core]\n\tbare = false\n\tfsmonitor = ./watch.sh\n\tsshCommand = sh\n",
            b"[core]\n\tbare = false\n\tfsmonitor = ./watch.sh\n[remote \"o\"]\n\turl = ext::sh -c x\n",
            b"[core]\n\tbare = false\n\tfsmonitor = ./watch.sh\n[remote \"o\"]\n\turl = --upload-pack=x\n",
            b"[core]\n\tbare = false\n\tfsmonitor = ./watch.sh\n[remote \"o\"]\n\turl\n",
        ] {
            assert!(
                not_inert(base, after).is_some(),
                "{}",
                String::from_utf8_lossy(after)
            );
        }
    }

    #[test]
    fn the_paths_a_configuration_points_git_at_are_named() {
        let entries = parse(
            b"[core]\n\thooksPath = .husky\n\tfsmonitor = tools/watch.sh --fast\n\
              [alias]\n\tt = !./scripts/t.sh\n\tco = checkout\n[include]\n\tpath = ../shared.cfg\n\
              [remote \"o\"]\n\turl = ./elsewhere\n[commit]\n\ttemplate = ~/t\n",
        )
        .unwrap();
        assert_eq!(
            named_paths(&entries),
            [
                ".husky",
                "tools/watch.sh",
                "./scripts/t.sh",
                "../shared.cfg"
            ]
        );
    }
}
