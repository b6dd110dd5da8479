//! Names nobody can guess.

use std::time::SystemTime;

/// 16 random bytes in hex, for names nobody can guess.
pub(crate) fn random_hex() -> String {
    let mut bytes = [0u8; 16];
    // getrandom only fails before the entropy pool is initialised; the time-and-pid fallback
    // still gives a unique (if guessable) name, and names are created with O_EXCL anyway.
    if fill_random(&mut bytes).is_err() {
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        bytes[..16].copy_from_slice(&now.to_le_bytes());
        bytes[0] ^= std::process::id() as u8;
    }
    crate::digest::hex(&bytes)
}

/// `getrandom(2)`.
#[cfg(target_os = "linux")]
fn fill_random(bytes: &mut [u8]) -> std::io::Result<()> {
    let filled = rustix::rand::getrandom(&mut *bytes, rustix::rand::GetRandomFlags::empty())?;
    if filled == bytes.len() {
        Ok(())
    } else {
        Err(std::io::ErrorKind::UnexpectedEof.into())
    }
}

/// The system's random device (no `getrandom` call here).
#[cfg(not(target_os = "linux"))]
fn fill_random(bytes: &mut [u8]) -> std::io::Result<()> {
    use std::io::Read;
    std::fs::File::open("/dev/urandom")?.read_exact(bytes)
}
