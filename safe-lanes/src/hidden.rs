//! Secrets a command may not reach inside what it was given: the one list of hidden paths.
//!
//! A project folder granted read-write usually holds a `.env`, a key or a cloud credential.
//! [`DEFAULT_HIDDEN`] names them, one documented row each; [`Hidden`] is that list for one
//! grant or upload root, and [`Hidden::hides`] is the one rule every surface asks: `folder_patch`
//! and `upload_file` refuse a hidden path (`hidden_path`), and what a confined command writes
//! to one is held for the human rather than published.
//!
//! # Patterns
//!
//! A pattern is one or more `/`-separated components, each matched whole against a name:
//! `*` stands for any run of characters and `?` for one, nothing else is special. A pattern
//! matches a path when its components match a run of the path's components that ends at the
//! path itself or at one of its directories, wherever it starts: `.ssh/` hides every path under
//! any `.ssh` directory, `.kube/config` the file `config` in any `.kube`, `*.pem` every
//! `*.pem`. A trailing `/` asks for a directory. ASCII case is ignored (`.ENV` is hidden as
//! `.env` is: some file systems fold case), other bytes are compared as they are.

use std::os::fd::BorrowedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path};

/// One row of the default list: what it hides and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HiddenRow {
    /// The pattern ([module docs](self)).
    pub pattern: &'static str,
    /// Names it leaves visible although the pattern matches them (patterns too).
    pub except: &'static [&'static str],
    /// When not empty, a file is hidden only when it holds one of these (a `.npmrc` without a
    /// token is configuration, not a secret).
    pub holding: &'static [&'static str],
    /// What it is, in words.
    pub what: &'static str,
}

const fn row(pattern: &'static str, what: &'static str) -> HiddenRow {
    HiddenRow {
        pattern,
        except: &[],
        holding: &[],
        what,
    }
}

/// The secrets every grant and upload root hides unless the human lifts one.
pub const DEFAULT_HIDDEN: &[HiddenRow] = &[
    row(
        ".env",
        "an environment file (dotenv): API keys, database passwords",
    ),
    HiddenRow {
        pattern: ".env.*",
        except: &[".env.example", ".env.sample", ".env.template", ".env.dist"],
        holding: &[],
        what: "an environment file for one setting (`.env.local`, `.env.production`); its \
               examples stay visible",
    },
    // Certificates are public (a CA bundle such as certifi's `cacert.pem` is read by every
    // TLS client): only a `*.pem` that holds a private key is hidden.
    HiddenRow {
        pattern: "*.pem",
        except: &[],
        holding: &["PRIVATE KEY"],
        what: "a private key in PEM form",
    },
    row("*.key", "a private key (PEM or DER)"),
    row("*.p12", "a PKCS #12 key store"),
    row("*.pfx", "a PKCS #12 key store"),
    row("id_rsa", "an SSH private key"),
    row("id_dsa", "an SSH private key"),
    row("id_ecdsa", "an SSH private key"),
    row("id_ed25519", "an SSH private key"),
    row("id_ecdsa_sk", "an SSH private key (security key)"),
    row("id_ed25519_sk", "an SSH private key (security key)"),
    row(".ssh/", "SSH keys and known hosts"),
    row(".gnupg/", "GnuPG private keys"),
    row(".aws/", "AWS credentials"),
    row(".azure/", "Azure credentials"),
    row(".config/gcloud/", "Google Cloud credentials"),
    row(".kube/config", "Kubernetes cluster credentials"),
    row(".docker/config.json", "registry credentials of Docker"),
    row(".netrc", "passwords for hosts (curl, git, ftp)"),
    row("_netrc", "passwords for hosts (curl, git, ftp)"),
    row(".git-credentials", "passwords git stores in plain text"),
    row(".pypirc", "PyPI upload credentials"),
    HiddenRow {
        pattern: ".npmrc",
        except: &[],
        holding: &["_authToken", "_auth", "_password"],
        what: "npm configuration holding a registry token",
    },
    row(
        "credentials*.json",
        "a service account's or application's credentials",
    ),
];

/// How much of a file is read to tell whether it holds what a row looks for.
const READ_FOR_CONTENT: usize = 64 << 10;

/// The hidden paths of one grant or upload root: [`DEFAULT_HIDDEN`] and the human's own
/// patterns, less what the human lifted. Patterns are read once, when it is made.
#[derive(Clone, Debug)]
pub struct Hidden {
    hide: Vec<String>,
    unhide: Vec<String>,
    /// The human's patterns (the first `own`), then the default rows, ready to match.
    rows: Vec<Compiled>,
    own: usize,
    /// What the human lifted, ready to match.
    lifted: Vec<Compiled>,
}

impl Default for Hidden {
    fn default() -> Self {
        Self::new(&[], &[])
    }
}

/// One pattern, split into its names, with what its row says.
#[derive(Clone, Debug)]
struct Compiled {
    pattern: String,
    parts: Vec<Vec<u8>>,
    wants_dir: bool,
    except: &'static [&'static str],
    holding: &'static [&'static str],
    what: &'static str,
}

impl Compiled {
    fn of(pattern: &str, row: Option<&HiddenRow>) -> Self {
        Self {
            pattern: pattern.to_owned(),
            parts: pattern
                .trim_end_matches('/')
                .split('/')
                .filter(|p| !p.is_empty())
                .map(|p| p.as_bytes().to_vec())
                .collect(),
            wants_dir: pattern.ends_with('/'),
            except: row.map_or(&[], |r| r.except),
            holding: row.map_or(&[], |r| r.holding),
            what: row.map_or("hidden by the human", |r| r.what),
        }
    }

    /// Whether, as a pattern the human shows, it shows the path whose names are `names`: a
    /// name it ends at (the path itself), or, with a trailing `/`, everything in a directory
    /// it names. Narrower than hiding on purpose: `--unhide config` shows files named
    /// `config`, not `config/master.key`.
    fn shows(&self, names: &[&[u8]], kind: Kind) -> bool {
        let parts = &self.parts;
        if parts.is_empty() || names.len() < parts.len() {
            return false;
        }
        let ends = if self.wants_dir {
            let last = if kind == Kind::Dir {
                names.len()
            } else {
                names.len() - 1
            };
            parts.len()..=last
        } else {
            names.len()..=names.len()
        };
        ends.into_iter().any(|end| {
            end >= parts.len()
                && names[end - parts.len()..end]
                    .iter()
                    .zip(parts)
                    .all(|(name, part)| glob(part, name))
        })
    }

    /// Whether it matches a run of `names` ending at the last name (the path itself, of kind
    /// `kind`) or before it (one of its directories), the matched name not an exception.
    fn matches(&self, names: &[&[u8]], kind: Kind) -> bool {
        let parts = &self.parts;
        if parts.is_empty() {
            return false;
        }
        (parts.len()..=names.len()).any(|end| {
            if self.wants_dir && end == names.len() && kind != Kind::Dir {
                return false;
            }
            let run = &names[end - parts.len()..end];
            let last = run[run.len() - 1];
            run.iter().zip(parts).all(|(name, part)| glob(part, name))
                && !self.except.iter().any(|e| glob(e.as_bytes(), last))
        })
    }
}

/// Why a path is hidden: the pattern that matched it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Matched {
    /// The pattern.
    pub pattern: String,
    /// What it hides, in words.
    pub what: &'static str,
    /// What the file must hold to be hidden (empty: anything).
    holding: &'static [&'static str],
}

/// Whether a path names a directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A directory.
    Dir,
    /// Anything else (a file, a link, or not known to be a directory).
    Other,
}

impl Hidden {
    /// The default list, plus `hide`, less every path `unhide` matches.
    pub fn new(hide: &[String], unhide: &[String]) -> Self {
        let own = hide.iter().map(|p| Compiled::of(p, None));
        let defaults = DEFAULT_HIDDEN
            .iter()
            .map(|r| Compiled::of(r.pattern, Some(r)));
        Self {
            hide: hide.to_vec(),
            unhide: unhide.to_vec(),
            rows: own.chain(defaults).collect(),
            own: hide.len(),
            lifted: unhide.iter().map(|p| Compiled::of(p, None)).collect(),
        }
    }

    /// What `path` (as a whole; no folder to judge lifts below) of kind `kind` is hidden by
    /// before its content is known: [`Hidden::hides_below`] with no folder.
    pub fn hides(&self, path: &Path, kind: Kind) -> Option<Matched> {
        self.hides_below(Path::new(""), path, kind)
    }

    /// What `rel`, a path below the folder `top`, of kind `kind` is hidden by before its
    /// content is known (a row that looks at content, [`Matched::needs_content`], hides it only
    /// if [`Matched::holds`] says so). The default list judges the whole path, the folder's
    /// own names included (everything in a grant of `~/.ssh` is hidden); the human's own
    /// patterns, and what they show, judge the path below the folder. What the human hides
    /// wins over what they show, which wins over the default list.
    pub fn hides_below(&self, top: &Path, rel: &Path, kind: Kind) -> Option<Matched> {
        let whole = top.join(rel);
        let (all, below) = (names(&whole), names(rel));
        let matched = |r: &Compiled| Matched {
            pattern: r.pattern.clone(),
            what: r.what,
            holding: r.holding,
        };
        let (own, defaults) = self.rows.split_at(self.own);
        if let Some(r) = own.iter().find(|r| r.matches(&below, kind)) {
            return Some(matched(r));
        }
        if self.lifted.iter().any(|l| l.shows(&below, kind)) {
            return None;
        }
        defaults.iter().find(|r| r.matches(&all, kind)).map(matched)
    }

    /// Whether the folder `top` is itself hidden by the default list, with nothing shown in
    /// it: then everything in it is, and a search need not look.
    pub fn hides_whole(&self, top: &Path) -> bool {
        self.lifted.is_empty() && self.hides(top, Kind::Dir).is_some()
    }

    /// Whether a file named `name` may be hidden by a pattern that ends at it (a cheap look
    /// at its name alone, before [`Hidden::hides_below`]; a pattern that hides a directory
    /// hides what is in it through the directory, and a lift only ever shows).
    pub fn may_hide_file_named(&self, name: &[u8]) -> bool {
        self.rows.iter().any(|r| {
            !r.wants_dir
                && r.parts.last().is_some_and(|last| glob(last, name))
                && !r.except.iter().any(|e| glob(e.as_bytes(), name))
        })
    }

    /// [`Hidden::hides`] for a regular file opened as `file`: a row that looks at content is
    /// decided by reading the file's start.
    pub fn hides_file(&self, rel: &Path, file: BorrowedFd<'_>) -> Option<Matched> {
        self.hides(rel, Kind::Other)
            .filter(|m| !m.needs_content() || m.holds(file))
    }

    /// The patterns in force: the human's own, then the default list's.
    pub fn patterns(&self) -> Vec<String> {
        self.hide
            .iter()
            .cloned()
            .chain(DEFAULT_HIDDEN.iter().map(|r| r.pattern.to_owned()))
            .collect()
    }

    /// What the human lifted.
    pub fn unhidden(&self) -> &[String] {
        &self.unhide
    }
}

impl Matched {
    /// The refusal of `path` (as the caller names it) for this match.
    pub fn refusal(&self, path: &Path) -> crate::Error {
        crate::Error::HiddenPath {
            path: crate::Shown::path(path),
            pattern: crate::Shown::text(&self.pattern),
            what: self.what,
        }
    }

    /// Whether the path is hidden only if the file holds something ([`Matched::holds`]).
    pub fn needs_content(&self) -> bool {
        !self.holding.is_empty()
    }

    /// Whether the file's first 64 KiB hold what the row looks for (a
    /// file that cannot be read counts as holding it: fail closed).
    pub fn holds(&self, file: BorrowedFd<'_>) -> bool {
        if self.holding.is_empty() {
            return true;
        }
        let mut buf = vec![0u8; READ_FOR_CONTENT];
        let Ok(read) = rustix::io::pread(file, &mut buf, 0) else {
            return true;
        };
        self.holds_bytes(&buf[..read])
    }

    /// Whether `content` holds what the row looks for (anything, for a row that does not
    /// look at content).
    pub fn holds_bytes(&self, content: &[u8]) -> bool {
        self.holding.is_empty()
            || self.holding.iter().any(|marker| {
                content
                    .windows(marker.len())
                    .any(|w| w == marker.as_bytes())
            })
    }
}

/// The names of `path`'s normal components.
fn names(path: &Path) -> Vec<&[u8]> {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(name.as_bytes()),
            _ => None,
        })
        .collect()
}

/// Whether `name` matches the one-component glob `pattern` (`*` any run, `?` one byte), ASCII
/// case ignored.
fn glob(pattern: &[u8], name: &[u8]) -> bool {
    let (mut p, mut n) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        match pattern.get(p) {
            Some(b'*') => {
                star = Some((p, n));
                p += 1;
            }
            // ASCII case is ignored: on a file system that folds case (macOS, vfat, CIFS,
            // casefolded ext4), `.ENV` is `.env`.
            Some(&c) if c == b'?' || c.eq_ignore_ascii_case(&name[n]) => {
                p += 1;
                n += 1;
            }
            _ => match star {
                Some((sp, sn)) => {
                    p = sp + 1;
                    n = sn + 1;
                    star = Some((sp, sn + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

/// The most patterns one grant holds (its own and those it shows together).
pub const MAX_PATTERNS: usize = 64;

/// Whether `hide` and `unhide` are lists the human may give a grant: each a pattern
/// ([`check_pattern`]), at most [`MAX_PATTERNS`] in all, and nothing shown by wildcards alone
/// (`*` would show every secret).
///
/// # Errors
///
/// `invalid_argument`, `too_large`.
pub fn check_lists(hide: &[String], unhide: &[String]) -> crate::Result<()> {
    for pattern in hide.iter().chain(unhide) {
        check_pattern(pattern)?;
    }
    if let Some(all) = unhide.iter().find(|p| {
        p.trim_end_matches('/')
            .split('/')
            .all(|c| c.bytes().all(|b| b == b'*' || b == b'?'))
    }) {
        return Err(crate::Error::InvalidArgument {
            what: crate::Shown::text(all),
            why: "a pattern of wildcards alone would show every secret in the folder".into(),
        });
    }
    if hide.len() + unhide.len() > MAX_PATTERNS {
        return Err(crate::Error::TooLarge {
            what: "the number of hidden-path patterns",
            limit: MAX_PATTERNS as u64,
        });
    }
    Ok(())
}

/// Whether `pattern` is one the human may give: at most 256 bytes, relative, without `.`,
/// `..`, empty components (but a trailing `/`), NUL or control characters.
///
/// # Errors
///
/// `invalid_argument`, saying why.
pub fn check_pattern(pattern: &str) -> crate::Result<()> {
    let bad = |why: &str| {
        Err(crate::Error::InvalidArgument {
            what: crate::Shown::text(pattern),
            why: format!("a hidden-path pattern: {why}"),
        })
    };
    if pattern.is_empty() || pattern.len() > 256 {
        return bad("it must be 1 to 256 bytes");
    }
    if pattern.starts_with('/') {
        return bad("it is relative to the grant: no leading `/`");
    }
    if pattern.chars().any(char::is_control) {
        return bad("it holds a control character");
    }
    let body = pattern.strip_suffix('/').unwrap_or(pattern);
    if body
        .split('/')
        .any(|c| c.is_empty() || c == "." || c == "..")
    {
        return bad("a component is empty, `.` or `..`");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hidden(path: &str, kind: Kind) -> Option<String> {
        Hidden::default()
            .hides(Path::new(path), kind)
            .map(|m| m.pattern)
    }

    #[test]
    fn the_default_list_hides_the_usual_secrets_at_any_depth() {
        for (path, pattern) in [
            (".env", ".env"),
            ("app/.env", ".env"),
            (".env.local", ".env.*"),
            ("deploy/server.pem", "*.pem"),
            ("tls.key", "*.key"),
            (".ssh/id_ed25519", "id_ed25519"),
            ("home/.ssh/config", ".ssh/"),
            (".aws/credentials", ".aws/"),
            ("x/.kube/config", ".kube/config"),
            (".config/gcloud/adc.json", ".config/gcloud/"),
            ("credentials.json", "credentials*.json"),
            ("credentials-prod.json", "credentials*.json"),
            (".netrc", ".netrc"),
            (".npmrc", ".npmrc"),
        ] {
            assert_eq!(
                hidden(path, Kind::Other).as_deref(),
                Some(pattern),
                "{path}"
            );
        }
        assert_eq!(hidden(".ssh", Kind::Dir).as_deref(), Some(".ssh/"));
    }

    #[test]
    fn ordinary_files_and_examples_stay_visible() {
        for path in [
            ".env.example",
            "config/.env.sample",
            "src/main.rs",
            "id_generator.py",
            ".ssh",
            "keys.md",
            "id_rsa.pub.txt",
            "credentials.md",
            ".kube/cache",
            "environment",
        ] {
            assert_eq!(hidden(path, Kind::Other), None, "{path}");
        }
    }

    #[test]
    fn the_humans_patterns_add_and_lift() {
        let h = Hidden::new(&["secrets/".into(), "*.sqlite".into()], &[".env".into()]);
        assert_eq!(
            h.hides(Path::new("a/secrets/x"), Kind::Other)
                .map(|m| m.pattern),
            Some("secrets/".into())
        );
        assert!(h.hides(Path::new("db.sqlite"), Kind::Other).is_some());
        assert!(h.hides(Path::new(".env"), Kind::Other).is_none(), "lifted");
        assert!(h.hides(Path::new(".env.local"), Kind::Other).is_some());
    }

    #[test]
    fn globs_match_whole_names() {
        assert!(glob(b"*.pem", b"a.pem"));
        assert!(glob(b"*.pem", b".pem"));
        assert!(!glob(b"*.pem", b"a.pem.bak"));
        assert!(glob(b"credentials*.json", b"credentials.json"));
        assert!(glob(b"a?c", b"abc"));
        assert!(!glob(b"a?c", b"ac"));
        assert!(glob(b"*a*b*", b"xxaxxbxx"));
        assert!(glob(b".env", b".ENV"));
        assert!(glob(b"*.pem", b"Server.PEM"));
        assert!(!glob(b"*a*b", b"xxaxxbxx"));
    }

    #[test]
    fn what_the_human_shows_is_narrow_and_their_own_hiding_wins() {
        let h = Hidden::new(&["config/".into()], &["config".into(), ".ssh/".into()]);
        let top = Path::new("/home/u/src/app");
        let at = |rel: &str| h.hides_below(top, Path::new(rel), Kind::Other);
        assert!(at("x/config").is_none(), "a file named config is shown");
        assert!(
            at("deploy/master.key").is_some(),
            "not everything under a name"
        );
        assert!(
            at("config/master.key").is_some(),
            "the human's own hiding wins"
        );
        assert!(
            at(".ssh/id_rsa").is_none(),
            "everything in a directory shown with `/`"
        );
        let ssh = Hidden::new(&[], &["known_hosts".into()]);
        let top = Path::new("/home/u/.ssh");
        assert!(
            ssh.hides_below(top, Path::new("known_hosts"), Kind::Other)
                .is_none()
        );
        assert!(
            ssh.hides_below(top, Path::new("id_ed25519"), Kind::Other)
                .is_some()
        );
        assert!(
            ssh.hides_below(top, Path::new("config"), Kind::Other)
                .is_some()
        );
        assert!(!ssh.hides_whole(top) && Hidden::default().hides_whole(top));
        for all in ["*", "*/", "?*/*"] {
            assert!(check_lists(&[], &[all.into()]).is_err(), "{all}");
        }
    }

    #[test]
    fn patterns_the_human_gives_are_checked() {
        for bad in ["", "/etc/passwd", "a/../b", "a//b", ".", "x\u{1}"] {
            assert!(check_pattern(bad).is_err(), "{bad:?}");
        }
        for good in [".env", "secrets/", "*.sqlite", "config/prod.yml"] {
            assert!(check_pattern(good).is_ok(), "{good}");
        }
    }
}
