//! Paths and names from outside, checked once, before any system call.
//!
//! Every lexical rule about a path or a name an agent (or a configuration file) hands the
//! library lives here: no NUL byte, absolute or relative as required, at most `PATH_MAX`
//! bytes, and what `..` may do. Each rule is the constructor of a type — [`RelPath`],
//! [`Name`], [`AbsPath`] — and the primitive accepts only those types, so a string from
//! outside is checked once, where it enters, and never restated. What a path *resolves to* is
//! decided by the kernel beneath a descriptor ([`crate::beneath`]), never here.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path};

use crate::error::{Error, Result, Shown};

/// Why a `..` that climbs above a relative path's start is refused.
const CLIMBS_OUT: &str = "`..` would climb out of the folder it is relative to";

/// The longest path the kernel resolves (`PATH_MAX` without its NUL).
pub const PATH_MAX: usize = 4095;

/// A path relative to a folder, checked: no NUL byte, not absolute, at most [`PATH_MAX`]
/// bytes, and no `..` that climbs above its start (`a/../b` is allowed: the primitive resolves
/// it beneath its directory).
///
/// The primitive ([`crate::beneath::Anchor`]) takes only this type, so no path reaches a
/// system call unchecked. It borrows the caller's string; [`RelPath::without_parents`] makes
/// the stricter kind a patch target needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RelPath<'a>(&'a Path);

impl<'a> RelPath<'a> {
    /// Check `path` as a path relative to a folder (`..` allowed while it stays inside).
    ///
    /// # Errors
    ///
    /// `nul_byte`; `absolute_path`; `traversal` for a `..` that climbs above the start;
    /// `invalid_argument` when it is longer than [`PATH_MAX`] (the kernel would refuse it, and
    /// the primitive's component walk, which never passes it whole, must refuse it too).
    pub fn new<P: AsRef<Path> + ?Sized>(path: &'a P) -> Result<Self> {
        relative(path.as_ref(), true).map(Self)
    }

    /// Check `path` as a relative path with no `..` component at all (a file a patch names).
    ///
    /// # Errors
    ///
    /// As [`RelPath::new`], and `traversal` for any `..`.
    pub fn without_parents<P: AsRef<Path> + ?Sized>(path: &'a P) -> Result<Self> {
        relative(path.as_ref(), false).map(Self)
    }

    /// The folder itself (`.`).
    pub fn here() -> RelPath<'static> {
        RelPath(Path::new("."))
    }

    /// The checked path.
    pub fn as_path(self) -> &'a Path {
        self.0
    }
}

impl AsRef<Path> for RelPath<'_> {
    fn as_ref(&self) -> &Path {
        self.0
    }
}

/// One entry of a directory, checked: not empty, not `.` or `..`, no `/`, no NUL byte.
///
/// The primitive's single-directory operations (create, link, rename, remove) take only this
/// type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Name<'a>(&'a Path);

impl<'a> Name<'a> {
    /// Check `name` as one entry of a directory.
    ///
    /// # Errors
    ///
    /// `nul_byte`; `invalid_argument` for an empty name; `traversal` otherwise.
    pub fn new<N: AsRef<OsStr> + ?Sized>(name: &'a N) -> Result<Self> {
        let name = name.as_ref();
        let bytes = nul_free(name)?;
        if bytes.is_empty() {
            return Err(Error::InvalidArgument {
                what: Shown::bytes(bytes),
                why: "an empty name".into(),
            });
        }
        if bytes == b"." || bytes == b".." || bytes.contains(&b'/') {
            return Err(Error::Traversal {
                path: Shown::bytes(bytes),
                why: "not a single name: it is `.` or `..`, or holds a `/`",
            });
        }
        Ok(Self(Path::new(name)))
    }

    /// The checked name.
    pub fn as_os_str(self) -> &'a OsStr {
        self.0.as_os_str()
    }

    /// The checked name, as a one-component relative path.
    pub fn as_rel(self) -> RelPath<'a> {
        RelPath(self.0)
    }
}

impl AsRef<Path> for Name<'_> {
    fn as_ref(&self) -> &Path {
        self.0
    }
}

/// A folder as a person types it at a prompt or into a form (no shell in between): `~` and
/// `~/rest` stand for the home folder `home`, as a shell would read them; surrounding
/// whitespace is dropped; anything else is the path as typed. The result is still checked
/// wherever it is used (absolute, and where it leads decided by the primitive).
pub fn typed_folder(typed: &str, home: Option<&Path>) -> std::path::PathBuf {
    let typed = typed.trim();
    match (typed, home) {
        ("~", Some(home)) => home.to_path_buf(),
        (typed, Some(home)) if typed.starts_with("~/") => home.join(&typed[2..]),
        (typed, _) => std::path::PathBuf::from(typed),
    }
}

/// An absolute path from outside (an upload source, a grant's folder), checked: it starts at
/// `/`, holds no NUL byte and is at most [`PATH_MAX`] bytes. [`AbsPath::normalized`] also
/// refuses `.` and `..` components (a path to be stored as it is).
///
/// Where it leads is decided by the primitive, component by component, never by this type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AbsPath<'a>(&'a Path);

impl<'a> AbsPath<'a> {
    /// Check `path` as an absolute path (`..` allowed: the resolver decides where it leads).
    ///
    /// # Errors
    ///
    /// `nul_byte`; `relative_path`; `invalid_argument` when it is too long.
    pub fn new<P: AsRef<Path> + ?Sized>(path: &'a P) -> Result<Self> {
        absolute(path.as_ref(), false).map(Self)
    }

    /// Check `path` as an absolute path with no `.` or `..` component.
    ///
    /// # Errors
    ///
    /// As [`AbsPath::new`], and `traversal` for a `.` or `..` component.
    pub fn normalized<P: AsRef<Path> + ?Sized>(path: &'a P) -> Result<Self> {
        absolute(path.as_ref(), true).map(Self)
    }

    /// The checked path.
    pub fn as_path(self) -> &'a Path {
        self.0
    }

    /// The components the path spells, read as written: empty and `.` components dropped,
    /// each `..` taking away the component before it (at `/` it stays at `/`, as the kernel's
    /// does). No system call is made: this is the path's text, not where it leads (after a
    /// symbolic link the kernel's `..` climbs from the link's target, not from the link).
    pub fn spelled(self) -> Vec<&'a [u8]> {
        let bytes = self.0.as_os_str().as_bytes();
        // At most one component after each `/`: the list never grows on the way.
        let mut out = Vec::with_capacity(bytes.iter().filter(|&&b| b == b'/').count());
        read_as_written_into(&mut out, bytes.split(|&b| b == b'/'));
        out
    }

    /// The path below `/` (`.` for `/` itself), for resolution beneath the root directory.
    ///
    /// # Errors
    ///
    /// `traversal` when a `..` climbs above `/` (`/a/../..`).
    pub fn below_root(self) -> Result<RelPath<'a>> {
        let rest = self.0.strip_prefix("/").unwrap_or(self.0);
        if rest.as_os_str().is_empty() {
            Ok(RelPath::here())
        } else {
            RelPath::new(rest)
        }
    }
}

impl AsRef<Path> for AbsPath<'_> {
    fn as_ref(&self) -> &Path {
        self.0
    }
}

/// Components read as written ([`AbsPath::spelled`]): empty and `.` ones dropped, each `..`
/// taking away the one before it, none climbing above the first.
pub(crate) fn read_as_written<'p>(parts: impl IntoIterator<Item = &'p [u8]>) -> Vec<&'p [u8]> {
    let mut out = Vec::new();
    read_as_written_into(&mut out, parts);
    out
}

/// [`read_as_written`] into `out` (empty).
fn read_as_written_into<'p>(out: &mut Vec<&'p [u8]>, parts: impl IntoIterator<Item = &'p [u8]>) {
    for part in parts {
        match part {
            b"" | b"." => {}
            b".." => {
                out.pop();
            }
            _ => out.push(part),
        }
    }
}

/// The relative-path rule; `parents` says whether `..` may appear (while it stays inside).
fn relative(path: &Path, parents: bool) -> Result<&Path> {
    let bytes = nul_free(path.as_os_str())?;
    if bytes.first() == Some(&b'/') {
        return Err(Error::AbsolutePath {
            path: Shown::bytes(bytes),
        });
    }
    let mut depth: usize = 0;
    for part in bytes.split(|&b| b == b'/') {
        match part {
            b"" | b"." => {}
            b".." => match depth.checked_sub(1) {
                None => {
                    return Err(Error::Traversal {
                        path: Shown::bytes(bytes),
                        why: CLIMBS_OUT,
                    });
                }
                Some(_) if !parents => {
                    return Err(Error::Traversal {
                        path: Shown::bytes(bytes),
                        why: "a `..` component is not accepted here: the path must lead \
                              straight down the folder",
                    });
                }
                Some(up) => depth = up,
            },
            _ => depth += 1,
        }
    }
    not_too_long(bytes)?;
    Ok(path)
}

/// The absolute-path rule; `normalized` refuses `.` and `..` components.
fn absolute(path: &Path, normalized: bool) -> Result<&Path> {
    let bytes = nul_free(path.as_os_str())?;
    if !matches!(path.components().next(), Some(Component::RootDir)) {
        return Err(Error::RelativePath {
            path: Shown::bytes(bytes),
        });
    }
    not_too_long(bytes)?;
    let dotted = || {
        bytes
            .split(|&b| b == b'/')
            .any(|part| part == b"." || part == b"..")
    };
    if normalized && dotted() {
        return Err(Error::Traversal {
            path: Shown::bytes(bytes),
            why: "a `.` or `..` component is not accepted here: the path must be normalized",
        });
    }
    Ok(path)
}

/// Refuse a path longer than [`PATH_MAX`].
fn not_too_long(bytes: &[u8]) -> Result<()> {
    if bytes.len() > PATH_MAX {
        return Err(Error::InvalidArgument {
            what: Shown::bytes(bytes),
            why: format!("the path is longer than PATH_MAX ({PATH_MAX} bytes)"),
        });
    }
    Ok(())
}

/// The bytes of `raw`, refused if they hold a NUL (which would end the string at the kernel).
fn nul_free(raw: &OsStr) -> Result<&[u8]> {
    let bytes = raw.as_bytes();
    if bytes.contains(&0) {
        return Err(Error::NulByte {
            input: Shown::bytes(bytes),
        });
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Code;

    fn code<T>(r: Result<T>) -> Option<Code> {
        r.err().map(|e| e.code())
    }

    #[test]
    fn relative_paths() {
        let inside = |p: &str| code(RelPath::new(p));
        let plain = |p: &str| code(RelPath::without_parents(p));
        for ok in ["a", "a/b", "./a", "a/../b", "a/b/../..", "a//b/"] {
            assert_eq!(inside(ok), None, "{ok}");
        }
        assert_eq!(inside(".."), Some(Code::Traversal));
        assert_eq!(inside("a/../../b"), Some(Code::Traversal));
        assert_eq!(inside("/etc"), Some(Code::AbsolutePath));
        assert_eq!(inside("a\0b"), Some(Code::NulByte));
        assert_eq!(plain("a/b"), None);
        assert_eq!(plain("a/../b"), Some(Code::Traversal));
        // Each says what it breaks: `a/../b` never leaves the folder.
        let why = |p: &str| RelPath::without_parents(p).unwrap_err().to_string();
        assert!(
            why("a/../b").contains("not accepted here"),
            "{}",
            why("a/../b")
        );
        assert!(!why("a/../b").contains("climb out"), "{}", why("a/../b"));
        assert!(why("../b").contains("climb out"), "{}", why("../b"));
    }

    #[test]
    fn names() {
        let n = |s: &str| code(Name::new(s));
        assert_eq!(n("file.txt"), None);
        assert_eq!(n(""), Some(Code::InvalidArgument));
        for bad in [".", "..", "a/b", "/"] {
            assert_eq!(n(bad), Some(Code::Traversal), "{bad}");
        }
        assert_eq!(n("a\0"), Some(Code::NulByte));
    }

    #[test]
    fn absolute_paths() {
        let a = |p: &str, normalized| {
            code(if normalized {
                AbsPath::normalized(p)
            } else {
                AbsPath::new(p)
            })
        };
        assert_eq!(a("/home/u/proj", true), None);
        assert_eq!(a("/home/u/../proj", false), None);
        assert_eq!(a("/home/u/../proj", true), Some(Code::Traversal));
        assert_eq!(a("/home/./proj", true), Some(Code::Traversal));
        assert_eq!(a("home/u", false), Some(Code::RelativePath));
        assert_eq!(a("/a\0", false), Some(Code::NulByte));
        let long = format!("/{}", "a".repeat(PATH_MAX));
        assert_eq!(a(&long, false), Some(Code::InvalidArgument));
        assert_eq!(a(&long[..PATH_MAX], false), None);
        let below = |p: &str| {
            AbsPath::new(p)
                .unwrap()
                .below_root()
                .unwrap()
                .as_path()
                .to_owned()
        };
        assert_eq!(below("/"), Path::new("."));
        assert_eq!(below("/home/u"), Path::new("home/u"));
        let climbs = AbsPath::new("/a/../..").unwrap().below_root();
        assert_eq!(code(climbs), Some(Code::Traversal));
    }

    #[test]
    fn a_path_is_spelled_as_written() {
        let spelled = |p: &str| {
            let parts = AbsPath::new(p).unwrap().spelled();
            parts
                .iter()
                .map(|p| String::from_utf8_lossy(p).into_owned())
                .collect::<Vec<_>>()
                .join("/")
        };
        assert_eq!(spelled("/a//./b/"), "a/b");
        assert_eq!(spelled("/a/b/../c"), "a/c");
        assert_eq!(spelled("/a/../../b"), "b", "`..` at `/` stays at `/`");
        assert_eq!(spelled("/a/b/../.."), "");
        assert_eq!(spelled("/"), "");
        assert_eq!(spelled("/..a/.b/..."), "..a/.b/...");
    }
}
