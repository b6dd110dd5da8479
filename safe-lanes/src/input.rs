//! Paths and names from outside, checked once, before any system call.
//!
//! Every lexical rule about a path or a name an agent (or a configuration file) hands the
//! library lives here: no NUL byte, absolute or relative as required, at most `PATH_MAX`
//! bytes, and what `..` may do. The primitive and every lane, grant and patch call these
//! functions; none restates a rule. What a path *resolves to* is decided by the kernel beneath
//! a descriptor ([`crate::beneath`]), never here.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path};

use crate::error::{Error, Result, Shown};

/// The longest path the kernel resolves (`PATH_MAX` without its NUL).
pub const PATH_MAX: usize = 4095;

/// What a relative path may do with `..`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Parents {
    /// `..` is allowed while it stays at or below the path's start (`a/../b`); the
    /// primitive then resolves it beneath its directory.
    Inside,
    /// No `..` at all (a file a patch names).
    None,
}

/// Check `path` as a path relative to a folder.
///
/// # Errors
///
/// `nul_byte`; `absolute_path`; `traversal` for a `..` that `parents` does not allow;
/// `invalid_argument` when it is longer than [`PATH_MAX`] (the kernel would refuse it, and
/// the primitive's component walk, which never passes it whole, must refuse it too).
pub fn relative(path: &Path, parents: Parents) -> Result<&Path> {
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
            b".." if parents == Parents::Inside => {
                depth = depth.checked_sub(1).ok_or_else(|| Error::Traversal {
                    path: Shown::bytes(bytes),
                })?;
            }
            b".." => {
                return Err(Error::Traversal {
                    path: Shown::bytes(bytes),
                });
            }
            _ => depth += 1,
        }
    }
    not_too_long(bytes)?;
    Ok(path)
}

/// Check `name` as one entry of a directory: not empty, not `.` or `..`, no `/`.
///
/// # Errors
///
/// `nul_byte`; `invalid_argument` for an empty name; `traversal` otherwise.
pub fn name(name: &OsStr) -> Result<&Path> {
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
        });
    }
    Ok(Path::new(name))
}

/// Check `path` as an absolute path from outside (an upload source, a grant's folder): it
/// starts at `/` and is at most [`PATH_MAX`] bytes; with `normalized`, it also has no `.` or
/// `..` component (a path to be stored as it is).
///
/// # Errors
///
/// `nul_byte`; `relative_path`; `invalid_argument` when it is too long; `traversal` for a
/// `.` or `..` component of a path that must be normalized.
pub fn absolute(path: &Path, normalized: bool) -> Result<&Path> {
    let bytes = nul_free(path.as_os_str())?;
    if !matches!(path.components().next(), Some(Component::RootDir)) {
        return Err(Error::RelativePath {
            path: Shown::bytes(bytes),
        });
    }
    not_too_long(bytes)?;
    let dotted = bytes
        .split(|&b| b == b'/')
        .any(|part| part == b"." || part == b"..");
    if normalized && dotted {
        return Err(Error::Traversal {
            path: Shown::bytes(bytes),
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
        let inside = |p: &str| code(relative(Path::new(p), Parents::Inside));
        let plain = |p: &str| code(relative(Path::new(p), Parents::None));
        for ok in ["a", "a/b", "./a", "a/../b", "a/b/../..", "a//b/"] {
            assert_eq!(inside(ok), None, "{ok}");
        }
        assert_eq!(inside(".."), Some(Code::Traversal));
        assert_eq!(inside("a/../../b"), Some(Code::Traversal));
        assert_eq!(inside("/etc"), Some(Code::AbsolutePath));
        assert_eq!(inside("a\0b"), Some(Code::NulByte));
        assert_eq!(plain("a/b"), None);
        assert_eq!(plain("a/../b"), Some(Code::Traversal));
    }

    #[test]
    fn names() {
        let n = |s: &str| code(name(OsStr::new(s)));
        assert_eq!(n("file.txt"), None);
        assert_eq!(n(""), Some(Code::InvalidArgument));
        for bad in [".", "..", "a/b", "/"] {
            assert_eq!(n(bad), Some(Code::Traversal), "{bad}");
        }
        assert_eq!(n("a\0"), Some(Code::NulByte));
    }

    #[test]
    fn absolute_paths() {
        let a = |p: &str, normalized| code(absolute(Path::new(p), normalized));
        assert_eq!(a("/home/u/proj", true), None);
        assert_eq!(a("/home/u/../proj", false), None);
        assert_eq!(a("/home/u/../proj", true), Some(Code::Traversal));
        assert_eq!(a("/home/./proj", true), Some(Code::Traversal));
        assert_eq!(a("home/u", false), Some(Code::RelativePath));
        assert_eq!(a("/a\0", false), Some(Code::NulByte));
        let long = format!("/{}", "a".repeat(PATH_MAX));
        assert_eq!(a(&long, false), Some(Code::InvalidArgument));
        assert_eq!(a(&long[..PATH_MAX], false), None);
    }
}
