//! The accounts of this machine, as `/etc/passwd` lists them: their names and home folders,
//! read once per process.
//!
//! What they are used for only ever adds caution or words: a home folder gets the protection
//! of its start-up files and a warning before it is granted, and a user id in the audit log is
//! shown with its name. Nothing is allowed because of them.

use std::ffi::OsStr;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::beneath::{Ambient, Anchor, Symlinks};
use crate::fd::ReadAt;
use crate::input::RelPath;

/// The most of `/etc/passwd` read.
const MAX_PASSWD: u64 = 16 << 20;

/// One account.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Account {
    pub(crate) name: String,
    pub(crate) uid: u32,
    /// Absolute, never `/`.
    pub(crate) home: Option<PathBuf>,
}

/// Every account of `/etc/passwd` (none when it cannot be read).
pub(crate) fn accounts() -> &'static [Account] {
    static ACCOUNTS: OnceLock<Vec<Account>> = OnceLock::new();
    ACCOUNTS.get_or_init(|| parse(&read_passwd()))
}

/// The name of the account with user id `uid`.
pub(crate) fn name_of(uid: u32) -> Option<&'static str> {
    accounts()
        .iter()
        .find(|a| a.uid == uid)
        .map(|a| a.name.as_str())
}

/// The process's own home folder, `$HOME` (absolute, not `/`), when it names one.
pub(crate) fn own_home() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|home| home.is_absolute() && home != Path::new("/"))
}

/// Whether `folder` (canonical) is a home folder: the process's `$HOME`, or the home of an
/// account in `/etc/passwd`.
pub(crate) fn is_home(folder: &Path) -> bool {
    own_home().is_some_and(|home| home == folder)
        || accounts().iter().any(|a| a.home.as_deref() == Some(folder))
}

/// The home folders of people (not of system services): `$HOME`, root's, and those of the
/// user accounts (user ids from 1000, but `nobody`'s). A service's home (`/var/www`,
/// `/usr/sbin`) is not one.
pub(crate) fn people_homes() -> Vec<PathBuf> {
    let mut homes: Vec<PathBuf> = own_home().into_iter().collect();
    homes.extend(
        accounts()
            .iter()
            .filter(|a| a.uid == 0 || (1000..65534).contains(&a.uid))
            .filter_map(|a| a.home.clone()),
    );
    homes
}

fn read_passwd() -> Vec<u8> {
    let why = Ambient::because("the accounts' names and home folders");
    let passwd = Anchor::open_ambient(Path::new("/etc"), why)
        .and_then(|etc| etc.open_read(RelPath::new("passwd")?, Symlinks::Beneath));
    let mut text = Vec::new();
    if let Ok(fd) = passwd {
        let read = ReadAt::new(std::os::fd::AsFd::as_fd(&fd))
            .take(MAX_PASSWD)
            .read_to_end(&mut text);
        if read.is_err() {
            text.clear();
        }
    }
    text
}

/// The accounts of a `passwd` file: `name:password:uid:gid:gecos:home:shell` per line.
fn parse(text: &[u8]) -> Vec<Account> {
    text.split(|b| *b == b'\n')
        .filter_map(|line| {
            let fields: Vec<&[u8]> = line.split(|b| *b == b':').collect();
            let name = std::str::from_utf8(fields.first()?).ok()?;
            let uid = std::str::from_utf8(fields.get(2)?).ok()?.parse().ok()?;
            let home = fields
                .get(5)
                .filter(|h| h.starts_with(b"/") && h.len() > 1)
                .map(|h| PathBuf::from(OsStr::from_bytes(h)));
            (!name.is_empty()).then(|| Account {
                name: name.to_owned(),
                uid,
                home,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwd_lines_give_names_ids_and_homes() {
        let text =
            b"root:x:0:0:root:/root:/bin/bash\nbad line\nnobody:x:65534:65534::/:/bin/false\n\
                     alice:x:1000:1000:Alice,,,:/home/alice:/bin/zsh\n";
        let accounts = parse(text);
        assert_eq!(accounts.len(), 3);
        assert_eq!(accounts[0].home.as_deref(), Some(Path::new("/root")));
        assert_eq!(accounts[1].home, None, "`/` is nobody's home");
        assert_eq!(
            (accounts[2].name.as_str(), accounts[2].uid),
            ("alice", 1000)
        );
    }
}
