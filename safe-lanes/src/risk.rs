//! What makes a folder risky to hand to an agent, said before the human decides: the one
//! place where the warnings about a folder are computed, which every screen shows as they are
//! (the command line before it asks, the page on the step that confirms).
//!
//! A warning never refuses anything — the rules that do are the grant rules
//! (`grants/rules.rs`) and the upload-root rule ([`crate::upload_roots::too_broad`]). It names
//! what the human might not see in a path:
//!
//! | risk | when |
//! |---|---|
//! | [`Risk::Home`] | the folder is a home folder (`$HOME`, or an account's in `/etc/passwd`) |
//! | [`Risk::HomeAncestor`] | it contains the home folder (`/home`, `/`) |
//! | [`Risk::Credentials`] | it is, lies inside, or holds (at its top or one folder down) a place credentials are kept: [`CREDENTIALS`] |
//! | [`Risk::Hidden`] | it is, or lies inside, a hidden folder (`.config`, `.local`) |
//! | [`Risk::Large`] | it holds at least [`LARGE_ENTRIES`] files and folders, or [`LARGE_BYTES`] |
//! | [`Risk::LookAlike`] | a name on its path mixes scripts (Latin with Cyrillic …), is made only of letters that look like Latin ones, holds characters that look like others (fullwidth, mathematical, look-alike spaces, dashes, slashes, invisible characters), or is not in composed form (NFD accents): it may pass for another name. The warning spells the path out with every such character escaped |
//!
//! Looking at a folder reads it (beneath its own descriptor, no link followed, bounded), and
//! nothing else.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use rustix::fs::FileType;
use serde::Serialize;

use crate::beneath::{Ambient, Anchor, Symlinks};
use crate::caches::LayerSize;
use crate::error::{Result, Shown};
use crate::input::{AbsPath, Name, RelPath};

/// A folder with at least this many files and folders is very large.
pub const LARGE_ENTRIES: u64 = 100_000;
/// A folder holding at least this many bytes is very large (20 GiB).
pub const LARGE_BYTES: u64 = 20 << 30;
/// The most sub-folders looked into for credentials one folder down.
const MAX_CHILDREN_LOOKED_AT: usize = 1000;

/// The places credentials are kept, relative to a home folder, with what they hold.
pub const CREDENTIALS: &[(&str, &str)] = &[
    (".ssh", "SSH keys"),
    (".gnupg", "GnuPG keys"),
    (".aws", "AWS credentials"),
    (".azure", "Azure credentials"),
    (".config/gcloud", "Google Cloud credentials"),
    (".kube", "Kubernetes credentials"),
    (".docker", "container registry credentials"),
    (".netrc", "passwords for remote hosts"),
    (".git-credentials", "git's stored passwords"),
    (".config/gh", "GitHub CLI tokens"),
    (".password-store", "a password store"),
    (".local/share/keyrings", "the desktop's keyrings"),
    (".cargo/credentials.toml", "a crates.io token"),
    (".npmrc", "npm tokens"),
    (".pypirc", "PyPI tokens"),
    (".terraform.d", "Terraform tokens"),
    (".vault-token", "a Vault token"),
    (".mozilla", "Firefox profiles: saved passwords and cookies"),
    (
        "snap/firefox",
        "Firefox profiles: saved passwords and cookies",
    ),
    (".thunderbird", "Thunderbird profiles: mail and passwords"),
    (
        ".config/google-chrome",
        "Chrome profiles: saved passwords and cookies",
    ),
    (
        ".config/chromium",
        "Chromium profiles: saved passwords and cookies",
    ),
    (
        ".config/BraveSoftware",
        "Brave profiles: saved passwords and cookies",
    ),
    (
        ".config/microsoft-edge",
        "Edge profiles: saved passwords and cookies",
    ),
    ("Library/Keychains", "macOS keychains"),
    (
        "Library/Application Support/Google/Chrome",
        "Chrome profiles: saved passwords and cookies",
    ),
    (
        "Library/Application Support/Firefox",
        "Firefox profiles: saved passwords and cookies",
    ),
];

/// What a warning is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Risk {
    /// A home folder.
    Home,
    /// A folder that contains the home folder.
    HomeAncestor,
    /// A place credentials are kept, or a folder holding one.
    Credentials,
    /// A hidden folder, or one inside a hidden folder.
    Hidden,
    /// A very large tree.
    Large,
    /// A name that may pass for another.
    LookAlike,
    /// An upload root that holds the safe-lanes state root.
    StateRoot,
    /// A read-write grant written directly, without a layer: nothing a command writes there
    /// waits for the human.
    Direct,
}

impl Risk {
    /// The snake_case name, as in JSON (`home`, `look_alike`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Risk::Home => "home",
            Risk::HomeAncestor => "home_ancestor",
            Risk::Credentials => "credentials",
            Risk::Hidden => "hidden",
            Risk::Large => "large",
            Risk::LookAlike => "look_alike",
            Risk::StateRoot => "state_root",
            Risk::Direct => "direct",
        }
    }
}

/// One reason to look twice at a folder.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Warning {
    /// What it is about.
    pub risk: Risk,
    /// What it means, in words; every name in it escaped ([`Shown`]).
    pub message: String,
    /// For a [`Risk::LookAlike`]: the path spelled out, every character that is not plain
    /// ASCII as `\u{…}` ([`spelled_out`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spelled: Option<String>,
}

impl Warning {
    fn new(risk: Risk, message: String) -> Self {
        Self {
            risk,
            message,
            spelled: None,
        }
    }
}

/// The warning every listing shows for a `--direct` read-write grant (ADR 0027), if `grant`
/// is one.
pub fn direct_warning(grant: &crate::grants::Grant) -> Option<String> {
    (grant.direct && grant.access == crate::grants::Access::ReadWrite).then(|| {
        "direct: confined commands write this folder at once, without a layer; nothing they \
         write waits for you — git state, tools' and agent hosts' configuration, start-up \
         files land as written (only set-id files and devices are refused). `safe-lanes grant \
         set-access ALIAS read_write --layered` checks each command's changes again"
            .replace("ALIAS", grant.alias.as_str())
    })
}

/// What is known of a folder before an agent is let in: its size, whether it is a
/// repository, and the warnings.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FolderFacts {
    /// The folder, canonical.
    #[serde(serialize_with = "crate::lossy::path")]
    pub path: PathBuf,
    /// Its files and folders and their bytes (counted up to [`LARGE_ENTRIES`]).
    pub size: LayerSize,
    /// Whether it is a git repository (a `.git` at its top, or a bare repository).
    pub repository: bool,
    /// The warnings, most serious first.
    pub warnings: Vec<Warning>,
}

/// Look at the folder `path` (absolute; the human's, opened following links, looked at by the
/// canonical path the kernel gives): its facts and warnings, with `$HOME` as the home folder.
///
/// # Errors
///
/// `relative_path`, `nul_byte`, `not_found` (not a directory), `io`.
pub fn look_at(path: &Path) -> Result<FolderFacts> {
    AbsPath::new(path)?;
    let dir = Anchor::open_ambient(path, Ambient::because("a folder the human looks at"))?;
    let canonical = crate::beneath::location_of(dir.as_fd())?;
    Ok(facts(
        &dir,
        &canonical,
        crate::accounts::own_home().as_deref(),
    ))
}

/// The facts of the open folder `dir`, whose canonical path is `path`, with `home` as the
/// process's home folder.
pub(crate) fn facts(dir: &Anchor, path: &Path, home: Option<&Path>) -> FolderFacts {
    let size = measure(dir, LARGE_ENTRIES);
    let mut warnings = path_warnings(path, home);
    let inside_credentials = warnings.iter().any(|w| w.risk == Risk::Credentials);
    if !inside_credentials && let Some(held) = credentials_held(dir) {
        warnings.push(held);
    }
    if size.at_least || size.entries >= LARGE_ENTRIES || size.bytes >= LARGE_BYTES {
        warnings.push(Warning::new(
            Risk::Large,
            format!(
                "it is very large: {}; an agent let in can read all of it",
                size.in_words()
            ),
        ));
    }
    warnings.sort_by_key(|w| w.risk as u8);
    FolderFacts {
        path: path.to_path_buf(),
        size,
        repository: is_repository(dir),
        warnings,
    }
}

/// The warnings the path alone gives (nothing is opened): a home folder or one that contains
/// it, a place credentials are kept or inside one, a hidden folder, a look-alike name. `home`
/// is the process's home folder.
pub fn path_warnings(path: &Path, home: Option<&Path>) -> Vec<Warning> {
    let mut out = Vec::new();
    let shown = Shown::path(path);
    if crate::accounts::is_home(path) {
        out.push(Warning::new(
            Risk::Home,
            format!(
                "{shown} is a home folder: every file of the account, its keys, tokens and shell \
                 start-up files"
            ),
        ));
    } else if let Some(home) = home.filter(|h| h.starts_with(path)) {
        out.push(Warning::new(
            Risk::HomeAncestor,
            format!(
                "{shown} contains the home folder {}: every file of yours, your keys, tokens and \
                 shell start-up files",
                Shown::path(home)
            ),
        ));
    }
    let names: Vec<&OsStr> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(name),
            _ => None,
        })
        .collect();
    let inside = CREDENTIALS.iter().find(|(place, _)| {
        let place: Vec<&OsStr> = Path::new(place).iter().collect();
        names.windows(place.len()).any(|w| w == place.as_slice())
    });
    if let Some((place, what)) = inside {
        out.push(Warning::new(
            Risk::Credentials,
            format!("{shown} is or lies inside `{place}`, where {what} are kept"),
        ));
    } else if let Some(hidden) = names.iter().find(|n| n.as_bytes().starts_with(b".")) {
        out.push(Warning::new(
            Risk::Hidden,
            format!(
                "{shown} is or lies inside the hidden folder `{}`: programs keep their settings \
                 and state there, and some run what they find",
                Shown::bytes(hidden.as_bytes())
            ),
        ));
    }
    if let Some(why) = names.iter().find_map(|n| look_alike(n.as_bytes())) {
        out.push(Warning {
            risk: Risk::LookAlike,
            message: format!("a name on this path may pass for another: {why}"),
            spelled: Some(spelled_out(path.as_os_str().as_bytes())),
        });
    }
    out
}

/// The places credentials are kept that `dir` holds, at its top or one folder down (the homes
/// in `/home`), as one warning.
fn credentials_held(dir: &Anchor) -> Option<Warning> {
    let present = exists;
    let mut found: Vec<String> = Vec::new();
    for (place, what) in CREDENTIALS {
        if present(dir, place) {
            found.push(format!("`{place}` ({what})"));
        }
    }
    let children = dir.entries().unwrap_or_default();
    let folders = children
        .iter()
        .filter(|(_, st)| FileType::from_raw_mode(st.st_mode) == FileType::Directory)
        .take(MAX_CHILDREN_LOOKED_AT);
    for (name, _) in folders {
        let Ok(sub) = Name::new(name).and_then(|n| dir.open_dir(n.as_rel(), Symlinks::Deny)) else {
            continue;
        };
        for (place, what) in CREDENTIALS {
            if present(&sub, place) {
                let name = Shown::bytes(name.as_bytes());
                found.push(format!("`{name}/{place}` ({what})"));
            }
        }
    }
    if found.is_empty() {
        return None;
    }
    const LISTED: usize = 6;
    let more = found.len().saturating_sub(LISTED);
    found.truncate(LISTED);
    let mut message = format!("it holds credentials: {}", found.join(", "));
    if more > 0 {
        message.push_str(&format!(" and {more} more"));
    }
    Some(Warning::new(Risk::Credentials, message))
}

/// Whether `dir` is a git repository: a `.git` at its top (a directory, or the file of a
/// linked worktree), or a bare repository (`HEAD`, `objects`, `refs`).
fn is_repository(dir: &Anchor) -> bool {
    let has = |name: &str| exists(dir, name);
    has(".git") || (has("HEAD") && has("objects") && has("refs"))
}

/// Whether `place` (relative, `/`-separated) exists beneath `at`, as anything, no link
/// followed on the way (the last component may be a link).
fn exists(at: &Anchor, place: &str) -> bool {
    let place = Path::new(place);
    let (Some(parent), Some(last)) = (place.parent(), place.file_name()) else {
        return false;
    };
    let Ok(last) = Name::new(last) else {
        return false;
    };
    if parent.as_os_str().is_empty() {
        return at.stat_entry(last).is_ok();
    }
    RelPath::new(parent)
        .and_then(|rel| at.open_dir(rel, Symlinks::Deny))
        .and_then(|dir| dir.stat_entry(last))
        .is_ok()
}

/// The size of the tree under `dir`, counting at most `bound` entries (no link followed).
pub(crate) fn measure(dir: &Anchor, bound: u64) -> LayerSize {
    let mut size = LayerSize {
        bytes: 0,
        entries: 0,
        at_least: false,
    };
    let Ok(first) = dir.try_clone() else {
        return size;
    };
    let mut pending = vec![first];
    while let Some(dir) = pending.pop() {
        for (name, st) in dir.entries().unwrap_or_default() {
            if size.entries >= bound {
                size.at_least = true;
                return size;
            }
            size.entries += 1;
            match FileType::from_raw_mode(st.st_mode) {
                FileType::RegularFile => size.bytes += u64::try_from(st.st_size).unwrap_or(0),
                FileType::Directory => {
                    let sub =
                        Name::new(&name).and_then(|n| dir.open_dir(n.as_rel(), Symlinks::Deny));
                    if let Ok(sub) = sub {
                        pending.push(sub);
                    }
                }
                _ => {}
            }
        }
    }
    size
}

/// A byte count as a person reads it (`1 byte`, `12 KiB`, `3.4 GiB`).
pub fn bytes_in_words(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["bytes", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    match unit {
        0 if bytes == 1 => "1 byte".to_owned(),
        0 => format!("{bytes} bytes"),
        _ if value < 10.0 => format!("{value:.1} {}", UNITS[unit]),
        _ => format!("{value:.0} {}", UNITS[unit]),
    }
}

/// The letters of the scripts whose letters pass for each other.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Script {
    Latin,
    Greek,
    Cyrillic,
    Armenian,
    Cherokee,
}

impl Script {
    fn of(c: char) -> Option<Script> {
        let script = match c as u32 {
            0x41..=0x5a | 0x61..=0x7a => Script::Latin,
            0xc0..=0x24f if c != '×' && c != '÷' => Script::Latin,
            0x1e00..=0x1eff | 0x2c60..=0x2c7f | 0xa720..=0xa7ff | 0xab30..=0xab6f => Script::Latin,
            0x370..=0x3ff | 0x1f00..=0x1fff => Script::Greek,
            0x400..=0x52f | 0x1c80..=0x1c8f | 0x2de0..=0x2dff | 0xa640..=0xa69f => Script::Cyrillic,
            0x530..=0x58f => Script::Armenian,
            0x13a0..=0x13ff | 0xab70..=0xabbf => Script::Cherokee,
            _ => return None,
        };
        Some(script)
    }

    fn name(self) -> &'static str {
        match self {
            Script::Latin => "Latin",
            Script::Greek => "Greek",
            Script::Cyrillic => "Cyrillic",
            Script::Armenian => "Armenian",
            Script::Cherokee => "Cherokee",
        }
    }
}

/// Letters of other scripts that look like Latin ones.
const LIKE_LATIN: &str = "АВЕКМНОРСТХЅІЈЎҮԚԜаеорсухѕіјԁԛԝүӏԍ\
                          ΑΒΕΖΗΙΚΜΝΟΡΤΥΧΟοϲϳ\
                          ՕօսոհցԱ\
                          ᎪᏴᏟᎬᎻᏆᏦᎷᎢᏙᏔᎳᏃ\
                          ıȷɑɡʏ";

/// Characters that pass for other, common ones wherever they are: fullwidth and mathematical
/// letters and digits, letter-like symbols, Roman numerals, spaces, dashes, slashes, dots and
/// colons other than ASCII's.
fn passes_for_another(c: char) -> bool {
    matches!(c as u32,
        0xff01..=0xff5e            // fullwidth ASCII
        | 0x1d400..=0x1d7ff        // mathematical alphanumerics
        | 0x2100..=0x214f          // letter-like symbols (K, Å, ℓ …)
        | 0x2160..=0x2188          // Roman numerals
        | 0x2070..=0x209f          // superscripts and subscripts
        | 0x2460..=0x24ff          // enclosed alphanumerics
        | 0xa0 | 0x1680 | 0x2000..=0x200a | 0x202f | 0x205f | 0x3000 // spaces
        | 0x2010..=0x2015 | 0x2212 | 0x2043 | 0xfe58 | 0xfe63 // dashes
        | 0x2215 | 0x2044 | 0x29f8 | 0x2571 // slashes
        | 0xa789 | 0x2236 | 0xfe55 | 0x2d0 | 0x5c3 // colons
        | 0x2024 | 0x2e33 | 0xfe52 | 0xa4f8 // dots
    )
}

/// Why the name `raw` may pass for another, if it may.
fn look_alike(raw: &[u8]) -> Option<String> {
    use unicode_properties::{GeneralCategory as G, UnicodeGeneralCategory};
    let text = std::str::from_utf8(raw).ok()?;
    if text.is_ascii() {
        return None;
    }
    let name = format!("`{}`", spelled_out(raw));
    if let Some(c) = text.chars().find(|c| {
        matches!(
            c.general_category(),
            G::Format | G::Control | G::LineSeparator | G::ParagraphSeparator
        )
    }) {
        return Some(format!(
            "{name} holds the invisible character U+{:04X}",
            c as u32
        ));
    }
    if let Some(c) = text.chars().find(|&c| passes_for_another(c)) {
        return Some(format!(
            "{name} holds U+{:04X}, which passes for a common character",
            c as u32
        ));
    }
    if !unicode_normalization::is_nfc(text) {
        return Some(format!(
            "{name} is written with decomposed accents (NFD): it looks like the same name with \
             composed ones, and is another"
        ));
    }
    let scripts: Vec<Script> = text.chars().filter_map(Script::of).collect();
    let mut distinct: Vec<Script> = Vec::new();
    for s in &scripts {
        if !distinct.contains(s) {
            distinct.push(*s);
        }
    }
    if distinct.len() > 1 {
        let names: Vec<&str> = distinct.iter().map(|s| s.name()).collect();
        return Some(format!("{name} mixes {} letters", names.join(" and ")));
    }
    let letters: Vec<char> = text.chars().filter(|c| Script::of(*c).is_some()).collect();
    let like_latin = !letters.is_empty()
        && distinct != [Script::Latin]
        && letters.iter().all(|c| LIKE_LATIN.contains(*c));
    if like_latin {
        return Some(format!(
            "{name} is written only with {} letters that look like Latin ones",
            distinct[0].name()
        ));
    }
    None
}

/// `raw` spelled out: printable ASCII as it is (a backslash as `\\`), every other character
/// as `\u{…}` and every byte that is not UTF-8 as `\xNN`, so two names that look alike read
/// differently.
pub fn spelled_out(raw: &[u8]) -> String {
    let mut out = String::new();
    for chunk in raw.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                ' '..='~' => out.push(c),
                _ => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            }
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tree past the size bound is warned of as very large; its count stops at the bound.
    #[test]
    fn very_large_trees_are_warned_of_and_counted_only_to_the_bound() {
        let tmp = tempfile::tempdir().unwrap();
        let small = look_at(tmp.path()).unwrap();
        assert!(small.warnings.iter().all(|w| w.risk != Risk::Large));
        // 20 GiB that take no room: a sparse file has the size the bound reads.
        let big = std::fs::File::create(tmp.path().join("disk.img")).unwrap();
        big.set_len(LARGE_BYTES).unwrap();
        let large = look_at(tmp.path()).unwrap();
        let warning = large.warnings.iter().find(|w| w.risk == Risk::Large);
        assert!(
            warning.is_some_and(|w| w.message.contains("20 GiB")),
            "{:?}",
            large.warnings
        );
        for i in 0..6 {
            std::fs::create_dir(tmp.path().join(format!("d{i}"))).unwrap();
        }
        let dir = Anchor::open_ambient(tmp.path(), Ambient::because("the test's folder")).unwrap();
        let counted = measure(&dir, 5);
        assert_eq!((counted.entries, counted.at_least), (5, true));
        assert!(!measure(&dir, 100).at_least);
    }

    /// `name => the start of why it may pass for another` (`None`: it may not).
    #[test]
    fn look_alike_names() {
        let table: &[(&str, Option<&str>)] = &[
            ("docs", None),
            ("Résumé", None),
            ("Документы", None),
            ("数据", None),
            ("ελληνικά", None),
            (
                "p\u{430}ypal",
                Some("`p\\u{430}ypal` mixes Latin and Cyrillic"),
            ),
            (
                "\u{440}\u{430}\u{443}",
                Some("`\\u{440}\\u{430}\\u{443}` is written only"),
            ),
            (
                "Re\u{301}sume\u{301}",
                Some("`Re\\u{301}sume\\u{301}` is written with decomposed"),
            ),
            ("a\u{200b}b", Some("`a\\u{200b}b` holds the invisible")),
            ("ｄocs", Some("`\\u{ff44}ocs` holds U+FF44")),
            ("a\u{2215}b", Some("`a\\u{2215}b` holds U+2215")),
            ("no\u{a0}space", Some("`no\\u{a0}space` holds U+00A0")),
            ("Ο", Some("`\\u{39f}` is written only with Greek")),
        ];
        for (name, want) in table {
            let got = look_alike(name.as_bytes());
            match (want, &got) {
                (None, None) => {}
                (Some(start), Some(why)) if why.starts_with(start) => {}
                _ => panic!("{name:?}: {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn paths_say_home_credentials_hidden_and_look_alike() {
        let home = Path::new("/nowhere/home/u");
        let risks = |p: &str| -> Vec<Risk> {
            path_warnings(Path::new(p), Some(home))
                .iter()
                .map(|w| w.risk)
                .collect()
        };
        assert_eq!(risks("/nowhere/home"), [Risk::HomeAncestor]);
        assert_eq!(risks("/nowhere/home/u/src"), []);
        assert_eq!(risks("/nowhere/home/u/.ssh"), [Risk::Credentials]);
        assert_eq!(risks("/nowhere/home/u/.ssh/keys"), [Risk::Credentials]);
        assert_eq!(risks("/nowhere/home/u/.config/gcloud"), [Risk::Credentials]);
        assert_eq!(risks("/nowhere/home/u/.config"), [Risk::Hidden]);
        assert_eq!(risks("/nowhere/home/u/p\u{430}ypal"), [Risk::LookAlike]);
        let spelled = path_warnings(Path::new("/x/p\u{430}y"), None)[0]
            .spelled
            .clone();
        assert_eq!(spelled.as_deref(), Some("/x/p\\u{430}y"));
    }

    #[test]
    fn bytes_read_as_a_person_reads_them() {
        assert_eq!(bytes_in_words(12), "12 bytes");
        assert_eq!(bytes_in_words(1536), "1.5 KiB");
        assert_eq!(bytes_in_words(20 << 30), "20 GiB");
    }
}
