//! Reading and writing open descriptors: the one write loop and the one positional reader.

use std::io;
use std::os::fd::BorrowedFd;

use rustix::io::Errno;

/// Write all of `bytes` to `fd`, retrying on `EINTR`; a write that makes no progress is an
/// error (`WriteZero`), never a loop.
pub(crate) fn write_all(fd: BorrowedFd<'_>, mut bytes: &[u8]) -> io::Result<()> {
    while !bytes.is_empty() {
        match rustix::io::write(fd, bytes) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => bytes = &bytes[n..],
            Err(Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Write all of `bytes` to `fd` at `offset` (`pwrite`: the descriptor's own offset stays),
/// retrying on `EINTR`; a write that makes no progress is an error, never a loop.
pub(crate) fn write_all_at(
    fd: BorrowedFd<'_>,
    mut bytes: &[u8],
    mut offset: u64,
) -> io::Result<()> {
    while !bytes.is_empty() {
        match rustix::io::pwrite(fd, bytes, offset) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                bytes = &bytes[n..];
                offset += n as u64;
            }
            Err(Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Reads a file from offset 0 with `pread`, leaving the descriptor's own offset (which other
/// handles of the same open file share) untouched.
pub(crate) struct ReadAt<'f> {
    fd: BorrowedFd<'f>,
    offset: u64,
}

impl<'f> ReadAt<'f> {
    /// A reader of `fd` from its first byte.
    pub(crate) fn new(fd: BorrowedFd<'f>) -> Self {
        Self { fd, offset: 0 }
    }

    /// Go on from `bytes` further (the first read starts there).
    pub(crate) fn skip(&mut self, bytes: u64) {
        self.offset += bytes;
    }
}

impl io::Read for ReadAt<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match rustix::io::pread(self.fd, &mut *buf, self.offset) {
                Ok(n) => {
                    self.offset += n as u64;
                    return Ok(n);
                }
                Err(Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
}
