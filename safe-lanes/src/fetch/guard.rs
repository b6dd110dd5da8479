//! The SSRF guard: where a fetch may connect, decided in one place.
//!
//! A URL an agent passes may have been written by whoever wrote the page the agent read. The
//! gateway runs on the human's machine, next to services that trust the loopback interface,
//! the local network and the cloud's metadata endpoint. [`Guard::admit`] is the only way a
//! fetch gets an address to connect to, for the URL asked for and for every redirect:
//!
//! 1. **The URL** ([`Guard::target`]): `https`, or `http` only where the human allows it; no
//!    credentials (`user@host`); a host name of letters, digits, `-`, `_` and dots, or an IP
//!    literal. A host that *ends in a number* the way the WHATWG URL standard reads it
//!    (`2130706433`, `0177.0.0.1`, `0x7f.1`, `127.1`, `1.2.3.4.`) is refused unless it is an
//!    IPv4 address in dotted decimal, four parts, no leading zeros: clients, resolvers and
//!    proxies read those spellings differently, so none of them is trusted to mean what the
//!    guard would check. A port, when given, is 1–65535.
//! 2. **The host allowlist**, when the human set one.
//! 3. **Every address** the host is or resolves to ([`address_refusal`]): one refused address
//!    refuses the fetch, not only that address.
//!
//! The addresses returned are the ones the connection uses: the fetch's name resolver hands
//! exactly them to the HTTP client (see `pinned.rs`), so nothing is looked up twice and a name
//! that changes its answer after the check (DNS rebinding) cannot move the connection.

use std::fmt;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Duration;

use ureq::http::Uri;

use crate::error::{Error, Result, Shown};

/// The longest URL a fetch takes, in bytes.
const MAX_URL: usize = 8192;
/// The longest host name (RFC 1035), without a final dot.
const MAX_HOST: usize = 253;
/// The longest label of a host name.
const MAX_LABEL: usize = 63;

/// Turns a host name into addresses.
///
/// The guard judges every address a lookup returns, so a lookup cannot widen what a fetch
/// reaches: it can only make a fetch fail. [`SystemLookup`] is the default.
pub trait Lookup: Send + Sync + fmt::Debug + 'static {
    /// The addresses of `host`, a host name already checked by the guard (lowercase, no final
    /// dot, never an IP literal), to be reached on `port`.
    ///
    /// # Errors
    ///
    /// When the name does not resolve; the fetch fails with `fetch_failed`.
    fn lookup(&self, host: &str, port: u16) -> io::Result<Vec<IpAddr>>;
}

/// The system's resolver (`getaddrinfo`, through [`ToSocketAddrs`]): `/etc/hosts`, DNS.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemLookup;

impl Lookup for SystemLookup {
    fn lookup(&self, host: &str, port: u16) -> io::Result<Vec<IpAddr>> {
        Ok((host, port).to_socket_addrs()?.map(|a| a.ip()).collect())
    }
}

/// Why the guard refuses to connect to `ip`, or `None` when it may.
///
/// Refused: loopback, unspecified, private (10/8, 172.16/12, 192.168/16, fc00::/7),
/// link-local (169.254/16, fe80::/10), shared address space (100.64/10), `0.0.0.0/8`,
/// benchmarking (198.18/15), the documentation ranges, IETF protocol assignments, the 6to4
/// relay, multicast, reserved space and broadcast, site-local, the cloud metadata endpoints
/// (169.254.169.254, 169.254.170.2, 100.100.100.200, 168.63.129.16, fd00:ec2::254), every
/// IPv6 address outside global unicast (2000::/3), IPv4-compatible (::/96), Teredo and 6to4.
/// An IPv4-mapped address (`::ffff:a.b.c.d`) and a NAT64 address (`64:ff9b::a.b.c.d`) are
/// judged as the IPv4 address they reach.
pub fn address_refusal(ip: IpAddr) -> Option<String> {
    match ip {
        IpAddr::V4(v4) => v4_refusal(v4).map(str::to_owned),
        IpAddr::V6(v6) => v6_refusal(v6),
    }
}

/// Cloud metadata endpoints, named before the ranges that hold them (168.63.129.16 is in no
/// refused range at all).
const METADATA: &[(IpAddr, &str)] = &[
    (
        IpAddr::V4(Ipv4Addr::new(169, 254, 169, 254)),
        "a cloud metadata service (169.254.169.254)",
    ),
    (
        IpAddr::V4(Ipv4Addr::new(169, 254, 170, 2)),
        "a cloud metadata service (169.254.170.2, container credentials)",
    ),
    (
        IpAddr::V4(Ipv4Addr::new(100, 100, 100, 200)),
        "a cloud metadata service (100.100.100.200)",
    ),
    (
        IpAddr::V4(Ipv4Addr::new(168, 63, 129, 16)),
        "a cloud platform's host service (168.63.129.16)",
    ),
    (
        IpAddr::V6(Ipv6Addr::new(0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x0254)),
        "a cloud metadata service (fd00:ec2::254)",
    ),
];

/// The refused IPv4 ranges: network, prefix length, what it is.
const REFUSED_V4: &[([u8; 4], u8, &str)] = &[
    ([0, 0, 0, 0], 8, "\"this network\" (0.0.0.0/8)"),
    ([10, 0, 0, 0], 8, "private (10.0.0.0/8)"),
    ([100, 64, 0, 0], 10, "shared address space (100.64.0.0/10)"),
    ([127, 0, 0, 0], 8, "loopback (127.0.0.0/8)"),
    ([169, 254, 0, 0], 16, "link-local (169.254.0.0/16)"),
    ([172, 16, 0, 0], 12, "private (172.16.0.0/12)"),
    (
        [192, 0, 0, 0],
        24,
        "IETF protocol assignments (192.0.0.0/24)",
    ),
    ([192, 0, 2, 0], 24, "documentation (192.0.2.0/24)"),
    ([192, 88, 99, 0], 24, "the 6to4 relay (192.88.99.0/24)"),
    ([192, 168, 0, 0], 16, "private (192.168.0.0/16)"),
    ([198, 18, 0, 0], 15, "benchmarking (198.18.0.0/15)"),
    ([198, 51, 100, 0], 24, "documentation (198.51.100.0/24)"),
    ([203, 0, 113, 0], 24, "documentation (203.0.113.0/24)"),
    ([224, 0, 0, 0], 4, "multicast (224.0.0.0/4)"),
    (
        [240, 0, 0, 0],
        4,
        "reserved (240.0.0.0/4, broadcast 255.255.255.255 included)",
    ),
];

/// The refused IPv6 ranges, first match wins; everything outside 2000::/3 is refused after
/// them. IPv4-mapped and NAT64 addresses are judged by their IPv4 address before.
const REFUSED_V6: &[([u16; 8], u8, &str)] = &[
    ([0, 0, 0, 0, 0, 0, 0, 0], 128, "unspecified (::)"),
    ([0, 0, 0, 0, 0, 0, 0, 1], 128, "loopback (::1)"),
    (
        [0, 0, 0, 0, 0, 0, 0, 0],
        96,
        "IPv4-compatible (::/96, deprecated)",
    ),
    (
        [0x64, 0xff9b, 1, 0, 0, 0, 0, 0],
        48,
        "local-use NAT64 (64:ff9b:1::/48)",
    ),
    ([0x100, 0, 0, 0, 0, 0, 0, 0], 64, "discard-only (100::/64)"),
    (
        [0x2001, 0xdb8, 0, 0, 0, 0, 0, 0],
        32,
        "documentation (2001:db8::/32)",
    ),
    (
        [0x2001, 0, 0, 0, 0, 0, 0, 0],
        23,
        "IETF protocol assignments, Teredo included (2001::/23)",
    ),
    (
        [0x2002, 0, 0, 0, 0, 0, 0, 0],
        16,
        "6to4 (2002::/16), an IPv4 address in disguise",
    ),
    (
        [0x3fff, 0, 0, 0, 0, 0, 0, 0],
        20,
        "documentation (3fff::/20)",
    ),
    (
        [0xfc00, 0, 0, 0, 0, 0, 0, 0],
        7,
        "unique local, private (fc00::/7)",
    ),
    ([0xfe80, 0, 0, 0, 0, 0, 0, 0], 10, "link-local (fe80::/10)"),
    ([0xfec0, 0, 0, 0, 0, 0, 0, 0], 10, "site-local (fec0::/10)"),
    ([0xff00, 0, 0, 0, 0, 0, 0, 0], 8, "multicast (ff00::/8)"),
];

fn metadata(ip: IpAddr) -> Option<&'static str> {
    METADATA
        .iter()
        .find(|(known, _)| *known == ip)
        .map(|(_, why)| *why)
}

fn v4_refusal(ip: Ipv4Addr) -> Option<&'static str> {
    if let Some(why) = metadata(IpAddr::V4(ip)) {
        return Some(why);
    }
    let bits = u32::from(ip);
    REFUSED_V4
        .iter()
        .find(|(net, len, _)| within(bits.into(), u32::from_be_bytes(*net).into(), *len, 32))
        .map(|(_, _, why)| *why)
}

fn v6_refusal(ip: Ipv6Addr) -> Option<String> {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return v4_refusal(v4).map(|why| format!("IPv4-mapped {v4}, {why}"));
    }
    let bits = u128::from(ip);
    let nat64 = u128::from(Ipv6Addr::new(0x64, 0xff9b, 0, 0, 0, 0, 0, 0));
    if within(bits, nat64, 96, 128) {
        let v4 = Ipv4Addr::from((bits & 0xffff_ffff) as u32);
        return v4_refusal(v4).map(|why| format!("NAT64 for {v4}, {why}"));
    }
    if let Some(why) = metadata(IpAddr::V6(ip)) {
        return Some(why.to_owned());
    }
    let found = REFUSED_V6
        .iter()
        .find(|(net, len, _)| within(bits, u128::from(Ipv6Addr::from(*net)), *len, 128));
    if let Some((_, _, why)) = found {
        return Some((*why).to_owned());
    }
    let global_unicast = u128::from(Ipv6Addr::new(0x2000, 0, 0, 0, 0, 0, 0, 0));
    (!within(bits, global_unicast, 3, 128))
        .then(|| "not global unicast (outside 2000::/3)".to_owned())
}

/// Whether `bits` lies in `net`/`len`, for addresses `width` bits wide.
fn within(bits: u128, net: u128, len: u8, width: u32) -> bool {
    let len = u32::from(len);
    if len == 0 {
        return true;
    }
    let shift = width - len;
    bits >> shift == net >> shift
}

/// A host as the guard read it from a URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Host {
    /// A host name: lowercase, without a final dot.
    Name(String),
    /// An IP literal: dotted-decimal IPv4 or bracketed IPv6.
    Ip(IpAddr),
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Name(name) => f.write_str(name),
            Host::Ip(ip) => write!(f, "{ip}"),
        }
    }
}

/// Where one hop of a fetch goes, as the guard read its URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Target {
    pub(crate) host: Host,
    pub(crate) port: u16,
}

/// One entry of the human's host allowlist.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Allowed {
    /// Exactly this host.
    Exact(Host),
    /// Any name below this one (`*.example.com`: `a.example.com`, not `example.com`).
    Below(String),
}

impl Allowed {
    fn admits(&self, host: &Host) -> bool {
        match (self, host) {
            (Allowed::Exact(allowed), host) => allowed == host,
            (Allowed::Below(parent), Host::Name(name)) => name
                .strip_suffix(parent.as_str())
                .is_some_and(|head| !head.is_empty()),
            (Allowed::Below(_), Host::Ip(_)) => false,
        }
    }
}

/// Addresses the guard admits although its rules refuse them: only ever loopback, each with
/// its port, for the tests' local servers. See [`LoopbackForTests`].
#[derive(Clone, Debug, Default)]
struct Exceptions(Vec<SocketAddr>);

/// The rule set of a fetch: the URL rules, the host allowlist, the address rules, and the
/// lookup that turns names into addresses.
#[derive(Clone, Debug)]
pub struct Guard {
    allow_http: bool,
    hosts: Option<Vec<Allowed>>,
    lookup: Arc<dyn Lookup>,
    lookup_timeout: Duration,
    exceptions: Exceptions,
}

impl Guard {
    /// A guard with these choices of the human's, looking names up with [`SystemLookup`].
    ///
    /// # Errors
    ///
    /// `invalid_argument` for an allowlist entry that is not a host (a name, `*.` and a name,
    /// or an IP literal).
    pub(crate) fn new(
        allow_http: bool,
        hosts: Option<&[String]>,
        lookup_timeout: Duration,
    ) -> Result<Self> {
        let hosts = match hosts {
            None => None,
            Some(entries) => Some(entries.iter().map(|e| allowed(e)).collect::<Result<_>>()?),
        };
        Ok(Self {
            allow_http,
            hosts,
            lookup: Arc::new(SystemLookup),
            lookup_timeout,
            exceptions: Exceptions::default(),
        })
    }

    pub(crate) fn set_lookup(&mut self, lookup: Arc<dyn Lookup>) {
        self.lookup = lookup;
    }

    pub(crate) fn set_exceptions(&mut self, loopback: Vec<SocketAddr>) {
        self.exceptions = Exceptions(loopback);
    }

    /// The addresses a connection to `url` may use: every rule checked (the URL, the host
    /// allowlist, each address the host is or resolves to). The fetch connects to these and
    /// to nothing else.
    ///
    /// # Errors
    ///
    /// `address_refused` when a rule refuses the URL or any of its addresses;
    /// `invalid_argument` when `url` is not an absolute URL; `fetch_failed` when the host
    /// name does not resolve (or not within the connect timeout).
    ///
    /// # Security
    ///
    /// `url` is untrusted. A host name is looked up once, here; the caller must connect to
    /// the returned addresses rather than look the name up again.
    pub fn admit(&self, url: &str) -> Result<Vec<SocketAddr>> {
        self.admit_uri(&parse(url)?)
    }

    /// [`Guard::admit`] of a parsed URL (the first one, or a redirect's target).
    pub(crate) fn admit_uri(&self, uri: &Uri) -> Result<Vec<SocketAddr>> {
        let shown = uri.to_string();
        let target = self.target(uri)?;
        let ips = match &target.host {
            Host::Ip(ip) => vec![*ip],
            Host::Name(name) => self.resolve(&shown, name, target.port)?,
        };
        if ips.is_empty() {
            return Err(failed(&shown, format!("{} has no address", target.host)));
        }
        let addrs: Vec<SocketAddr> = ips
            .into_iter()
            .map(|ip| SocketAddr::new(ip, target.port))
            .collect();
        for addr in &addrs {
            if let Err(why) = self.judge(*addr) {
                let why = match &target.host {
                    Host::Ip(_) => why,
                    Host::Name(name) => format!("{name} resolves to {}, {why}", addr.ip()),
                };
                return Err(refused(&shown, why));
            }
        }
        Ok(addrs)
    }

    /// The URL rules and the host allowlist: where `uri` goes, or why it may not.
    ///
    /// # Errors
    ///
    /// `address_refused`.
    pub(crate) fn target(&self, uri: &Uri) -> Result<Target> {
        let shown = uri.to_string();
        let refuse = |why: &str| refused(&shown, why.to_owned());
        let default_port = match uri.scheme_str() {
            Some("https") => 443,
            Some("http") if self.allow_http => 80,
            Some("http") => {
                return Err(refuse(
                    "plain http is not fetched (only https; the human may allow http)",
                ));
            }
            _ => return Err(refuse(SCHEMES)),
        };
        let authority = uri
            .authority()
            .ok_or_else(|| refuse("the URL has no host"))?
            .as_str();
        if authority.contains('@') {
            return Err(refuse("credentials in a URL (user@host) are refused"));
        }
        let (host, port) = split_authority(authority).map_err(&refuse)?;
        let host = parse_host(host).map_err(|why| refuse(&why))?;
        let port = match port {
            None => default_port,
            Some(port) => port,
        };
        if let Some(hosts) = &self.hosts
            && !hosts.iter().any(|allowed| allowed.admits(&host))
        {
            return Err(refuse(&format!(
                "{host} is not on the human's list of hosts to fetch from"
            )));
        }
        Ok(Target { host, port })
    }

    /// Whether a connection may go to `addr`: the address rules, or an exception for a test.
    fn judge(&self, addr: SocketAddr) -> std::result::Result<(), String> {
        if self.exceptions.0.contains(&addr) {
            return Ok(());
        }
        match address_refusal(addr.ip()) {
            None => Ok(()),
            Some(why) => Err(format!("{} is {why}", addr.ip())),
        }
    }

    /// Look `host` up, within the lookup timeout.
    fn resolve(&self, shown: &str, host: &str, port: u16) -> Result<Vec<IpAddr>> {
        let (tx, rx) = mpsc::sync_channel(1);
        let lookup = Arc::clone(&self.lookup);
        let name = host.to_owned();
        // A lookup that hangs keeps its thread until the system gives up; the fetch does not
        // wait for it.
        std::thread::Builder::new()
            .name("safe-lanes-lookup".into())
            .spawn(move || {
                let _ = tx.send(lookup.lookup(&name, port));
            })
            .map_err(|e| Error::io("spawn", "a name lookup", e))?;
        match rx.recv_timeout(self.lookup_timeout) {
            Ok(Ok(ips)) => Ok(ips),
            Ok(Err(e)) => Err(failed(shown, format!("{host} does not resolve: {e}"))),
            Err(RecvTimeoutError::Timeout) => Err(failed(
                shown,
                format!(
                    "the lookup of {host} took longer than {} s",
                    self.lookup_timeout.as_secs_f64()
                ),
            )),
            Err(RecvTimeoutError::Disconnected) => {
                Err(failed(shown, format!("the lookup of {host} failed")))
            }
        }
    }
}

const SCHEMES: &str = "only https URLs are fetched (http too, where the human allows it)";

/// `url` as an absolute URL.
///
/// # Errors
///
/// `address_refused` for a scheme the guard never fetches (`file:`, `ftp:`, `gopher:` …);
/// `invalid_argument` for anything else that is not an absolute URL.
pub(crate) fn parse(url: &str) -> Result<Uri> {
    if url.len() > MAX_URL {
        return Err(Error::InvalidArgument {
            what: Shown::text(url),
            why: format!("a URL is at most {MAX_URL} bytes"),
        });
    }
    match url.parse::<Uri>() {
        Ok(uri) if uri.scheme().is_some() && uri.authority().is_some() => Ok(uri),
        _ => {
            let scheme = url.split_once(':').map(|(s, _)| s.to_ascii_lowercase());
            let named = scheme.as_deref().is_some_and(|s| {
                !s.is_empty()
                    && s.chars()
                        .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
            });
            if named && !matches!(scheme.as_deref(), Some("http" | "https")) {
                return Err(refused(url, SCHEMES.to_owned()));
            }
            Err(Error::InvalidArgument {
                what: Shown::text(url),
                why: "not an absolute URL (https://host/path)".to_owned(),
            })
        }
    }
}

/// The host and the port of an authority without credentials.
fn split_authority(authority: &str) -> std::result::Result<(&str, Option<u16>), &'static str> {
    let (host, port) = if authority.starts_with('[') {
        match authority.find(']') {
            Some(end) => (&authority[..=end], &authority[end + 1..]),
            None => return Err("an IPv6 literal without its closing `]`"),
        }
    } else {
        match authority.rfind(':') {
            Some(at) => (&authority[..at], &authority[at..]),
            None => (authority, ""),
        }
    };
    if port.is_empty() {
        return Ok((host, None));
    }
    let digits = port.strip_prefix(':').ok_or("text after the host")?;
    match digits.parse::<u16>() {
        Ok(0) | Err(_) => Err("the port is not a number from 1 to 65535"),
        Ok(_) if !digits.bytes().all(|b| b.is_ascii_digit()) => {
            Err("the port is not a number from 1 to 65535")
        }
        Ok(port) => Ok((host, Some(port))),
    }
}

/// A host as written in a URL (or an allowlist entry), read by the guard's rules.
fn parse_host(raw: &str) -> std::result::Result<Host, String> {
    if let Some(inner) = raw.strip_prefix('[') {
        let inner = inner.strip_suffix(']').unwrap_or(inner);
        if inner.contains('%') {
            return Err("an IPv6 literal with a zone (`%`) is refused".to_owned());
        }
        return inner
            .parse::<Ipv6Addr>()
            .map(|ip| Host::Ip(IpAddr::V6(ip)))
            .map_err(|_| format!("{} is not an IPv6 address", Shown::text(inner)));
    }
    let lower = raw.to_ascii_lowercase();
    if lower.is_empty() {
        return Err("the URL has no host".to_owned());
    }
    if ends_in_number(&lower) {
        return match lower.parse::<Ipv4Addr>() {
            Ok(ip) => Ok(Host::Ip(IpAddr::V4(ip))),
            Err(_) => Err(format!(
                "the host {} is a number spelled in a form clients read differently \
                 (decimal, octal, hexadecimal or short IPv4): only dotted decimal is taken",
                Shown::text(raw)
            )),
        };
    }
    let name = lower.strip_suffix('.').unwrap_or(&lower);
    let labels_ok = name.split('.').all(|label| {
        !label.is_empty()
            && label.len() <= MAX_LABEL
            && label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    });
    if !labels_ok || name.len() > MAX_HOST {
        return Err(format!(
            "the host {} is not a host name (letters, digits, `-` and `_` in dot-separated \
             labels)",
            Shown::text(raw)
        ));
    }
    Ok(Host::Name(name.to_owned()))
}

/// Whether a host "ends in a number" as the WHATWG URL standard has it: its last label (a
/// final dot aside) is all decimal digits, or `0x` and hexadecimal digits. A URL parser
/// that follows the standard reads such a host as an IPv4 address in one of its spellings.
fn ends_in_number(host: &str) -> bool {
    let host = host.strip_suffix('.').unwrap_or(host);
    let last = host.rsplit('.').next().unwrap_or(host);
    if !last.is_empty() && last.bytes().all(|b| b.is_ascii_digit()) {
        return true;
    }
    last.strip_prefix("0x")
        .is_some_and(|hex| hex.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// One entry of the human's allowlist.
fn allowed(entry: &str) -> Result<Allowed> {
    let invalid = |why: String| Error::InvalidArgument {
        what: Shown::text(entry),
        why,
    };
    let entry = entry.trim();
    if let Some(parent) = entry.strip_prefix("*.") {
        return match parse_host(parent).map_err(invalid)? {
            Host::Name(name) => Ok(Allowed::Below(format!(".{name}"))),
            Host::Ip(_) => Err(invalid("`*.` goes before a host name".to_owned())),
        };
    }
    let host = if entry.contains(':') && !entry.starts_with('[') {
        format!("[{entry}]")
    } else {
        entry.to_owned()
    };
    Ok(Allowed::Exact(parse_host(&host).map_err(invalid)?))
}

/// `address_refused` for `url`.
pub(crate) fn refused(url: &str, why: String) -> Error {
    Error::AddressRefused {
        url: Shown::text(url),
        why: Shown::message(&why),
    }
}

/// `fetch_failed` for `url`.
pub(crate) fn failed(url: &str, why: String) -> Error {
    Error::FetchFailed {
        url: Shown::text(url),
        why: Shown::message(&why),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allowlist_entries_match_exact_hosts_and_names_below_a_star() {
        let exact = allowed("Files.Example.com.").unwrap();
        assert!(exact.admits(&Host::Name("files.example.com".into())));
        assert!(!exact.admits(&Host::Name("example.com".into())));
        let below = allowed("*.example.com").unwrap();
        assert!(below.admits(&Host::Name("a.example.com".into())));
        assert!(below.admits(&Host::Name("a.b.example.com".into())));
        assert!(!below.admits(&Host::Name("example.com".into())));
        assert!(!below.admits(&Host::Name("badexample.com".into())));
        let v6 = allowed("2001:4860::8888").unwrap();
        assert!(v6.admits(&Host::Ip("2001:4860::8888".parse().unwrap())));
        for bad in ["", "a/b", "*.1.2.3.4", "0x7f.1", "user@host"] {
            assert!(allowed(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn ports_are_one_to_65535_in_decimal() {
        assert_eq!(split_authority("h:8443"), Ok(("h", Some(8443))));
        assert_eq!(split_authority("[::1]:1"), Ok(("[::1]", Some(1))));
        assert_eq!(split_authority("h"), Ok(("h", None)));
        for bad in ["h:0", "h:65536", "h:", "h:+1", "[::1]x", "[::1"] {
            assert!(split_authority(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_host_ends_in_a_number_as_the_url_standard_reads_it() {
        for numeric in ["1", "127.1", "0x7f.1", "a.0x", "1.2.3.4.", "example.123"] {
            assert!(ends_in_number(numeric), "{numeric}");
        }
        for name in ["example.com", "1.example", "0xg", "x1"] {
            assert!(!ends_in_number(name), "{name}");
        }
    }
}
