//! Fetching a URL straight into the download lane: the bytes never pass through the agent.
//!
//! [`Fetcher::fetch`] takes a URL from the agent and:
//!
//! 1. checks it with the [`Guard`] (`https` only unless the human allowed `http`, no
//!    credentials, no host spelled as a number, the human's host allowlist if any), looks the
//!    host up once and refuses (`address_refused`) if *any* address is loopback, private,
//!    link-local, metadata, multicast, reserved or otherwise not public ([`address_refusal`]);
//! 2. connects to exactly the addresses it checked (the client's name resolver is the guard:
//!    `pinned.rs`), verifying the server's certificate against the host name;
//! 3. follows at most [`FetchPolicy::max_redirects`] redirects, each target checked as in 1
//!    before any connection to it (`too_large` past the count);
//! 4. refuses an error status (`fetch_failed`), and a `Content-Length` past the lane's cap
//!    (`too_large`) before reading;
//! 5. streams the body into the lane through [`DownloadLane`]'s own save path — sanitized
//!    name, unnamed temporary file, size cap, no replacing — under the caller's hint, else the
//!    `Content-Disposition` name, else the URL's last path segment, else `download`;
//! 6. records one `download.fetch` line in the audit log (the URL asked for, the final URL,
//!    the content type, and the file's name, size and SHA-256).
//!
//! A fetch that is refused is recorded as `download.fetch.refused`, one that fails on the way
//! (`fetch_failed`) as `download.fetch.failed`: the URL an agent asked for is on the record
//! either way, whatever it carried. An `io` failure is not recorded, as elsewhere. Whatever
//! fails, nothing is left in the lane.
//!
//! Timeouts: [`FetchPolicy::connect_timeout`] for each lookup and each connection (TLS
//! included), [`FetchPolicy::timeout`] for the whole fetch, from the first lookup to the last
//! byte.
//!
//! # Security
//!
//! Off unless the human turns it on (the MCP server's `--fetch`); the URL is the agent's and
//! untrusted. The guard's rules are in one place (`guard.rs`). No proxy is used, whatever the
//! environment says: a proxy would resolve names itself, out of the guard's sight. The tests
//! reach a local server only through [`Fetcher::new_with_loopback_for_tests`], which admits
//! exact loopback addresses and nothing else (ADR 0017).
//!
//! # Example
//!
//! ```no_run
//! use safe_lanes::fetch::{FetchPolicy, Fetcher};
//! use safe_lanes::{DownloadLane, StateRoot};
//! # let root_path = std::path::PathBuf::from("/tmp/state");
//! let root = StateRoot::open(&root_path)?;
//! let lane = DownloadLane::open(&root)?.with_max_bytes(50 << 20);
//! let fetcher = Fetcher::new(FetchPolicy::default())?;
//! let fetched = fetcher.fetch(&lane, "https://example.com/report.pdf", None)?;
//! println!("{} ({} bytes, {:?})", fetched.saved.name, fetched.saved.bytes, fetched.content_type);
//! # Ok::<(), safe_lanes::Error>(())
//! ```

use std::io::{self, Read};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use ureq::http::{HeaderMap, StatusCode, header};
use ureq::tls::{Certificate, RootCerts, TlsConfig};
use ureq::unversioned::transport::{Connector, RustlsConnector, TcpConnector};
use ureq::{Agent, ResponseExt};

use crate::audit::Operation;
use crate::download::{DownloadLane, FileRecord, Saved};
use crate::error::{Error, Result, Shown};

mod guard;
mod naming;
mod pinned;

pub use guard::{Guard, Lookup, SystemLookup, address_refusal};

use guard::{failed, refused};
use pinned::Pinned;

/// What the client calls itself.
const USER_AGENT: &str = concat!("safe-lanes/", env!("CARGO_PKG_VERSION"));
/// The longest content type kept, in bytes.
const MAX_CONTENT_TYPE: usize = 256;

/// The human's choices for fetching (the MCP server's flags).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct FetchPolicy {
    /// Fetch plain `http` URLs too, and follow redirects to them. Off by default: only
    /// `https`.
    pub allow_http: bool,
    /// When set, the only hosts fetched from, redirects included: a host name
    /// (`files.example.com`), `*.` and a name for any name below it (`*.example.com`: not
    /// `example.com` itself), or an IP literal. Every address is still checked: the list
    /// narrows what may be fetched, it never admits a refused address.
    pub hosts: Option<Vec<String>>,
    /// The most redirects followed (5).
    pub max_redirects: u32,
    /// The longest a name lookup, and a connection with its TLS handshake, may take (10 s).
    pub connect_timeout: Duration,
    /// The longest a whole fetch may take, from the first lookup to the last byte (120 s).
    pub timeout: Duration,
}

impl Default for FetchPolicy {
    fn default() -> Self {
        Self {
            allow_http: false,
            hosts: None,
            max_redirects: 5,
            connect_timeout: Duration::from_secs(10),
            timeout: Duration::from_secs(120),
        }
    }
}

/// A file fetched into the lane ([`Fetcher::fetch`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
pub struct Fetched {
    /// The saved file: `path`, `name`, `bytes`, `sha256`.
    #[serde(flatten)]
    pub saved: Saved,
    /// The final URL, after redirects.
    pub url: String,
    /// The `Content-Type` the server gave, if any (visible ASCII, at most 256 bytes).
    pub content_type: Option<String>,
}

/// What the audit log records of a fetch.
#[derive(Serialize)]
struct FetchRecord<'a> {
    /// The URL asked for.
    url: &'a str,
    /// The URL fetched, after redirects.
    final_url: &'a str,
    content_type: Option<&'a str>,
    /// The file, with its id (how a later reader of the lane finds this record).
    #[serde(flatten)]
    file: FileRecord<'a>,
}

/// Local servers a test may reach despite the guard: exact loopback addresses and ports, and
/// the certificates trusted in place of the web's roots.
///
/// Only [`Fetcher::new_with_loopback_for_tests`] takes it; neither adapter calls that, and no
/// flag or argument leads to it (ADR 0017).
#[doc(hidden)]
#[derive(Clone, Debug)]
pub struct LoopbackForTests {
    servers: Vec<SocketAddr>,
    roots: Vec<Vec<u8>>,
}

impl LoopbackForTests {
    /// Admit exactly `servers` (each a loopback address with its port) and trust exactly
    /// the DER certificates `roots`.
    ///
    /// # Errors
    ///
    /// `invalid_argument` when a server is not on the loopback interface.
    pub fn new(servers: &[SocketAddr], roots: Vec<Vec<u8>>) -> Result<Self> {
        if let Some(outside) = servers.iter().find(|s| !s.ip().is_loopback()) {
            return Err(Error::InvalidArgument {
                what: Shown::text(&outside.to_string()),
                why: "a test server must be on the loopback interface".to_owned(),
            });
        }
        Ok(Self {
            servers: servers.to_vec(),
            roots,
        })
    }
}

/// Fetches URLs into a download lane behind the SSRF guard.
#[derive(Debug)]
pub struct Fetcher {
    policy: FetchPolicy,
    guard: Arc<Guard>,
    tls: TlsConfig,
}

impl Fetcher {
    /// A fetcher with the human's `policy`, verifying servers against Mozilla's roots
    /// (bundled, the system's store is not read) and looking names up with [`SystemLookup`].
    ///
    /// # Errors
    ///
    /// `invalid_argument` for an allowlist entry that is not a host.
    pub fn new(policy: FetchPolicy) -> Result<Self> {
        let guard = Guard::new(
            policy.allow_http,
            policy.hosts.as_deref(),
            policy.connect_timeout,
        )?;
        Ok(Self {
            policy,
            guard: Arc::new(guard),
            tls: TlsConfig::builder().root_certs(RootCerts::WebPki).build(),
        })
    }

    /// Unguarded for the addresses in `allowance`: a fetcher whose guard also admits those
    /// loopback servers, trusting only the allowance's certificates. For tests of the fetch
    /// against a local server; never reachable from the adapters (ADR 0017).
    ///
    /// # Errors
    ///
    /// As [`Fetcher::new`].
    #[doc(hidden)]
    pub fn new_with_loopback_for_tests(
        policy: FetchPolicy,
        allowance: LoopbackForTests,
    ) -> Result<Self> {
        let mut fetcher = Self::new(policy)?;
        let mut guard = (*fetcher.guard).clone();
        guard.set_exceptions(allowance.servers);
        fetcher.guard = Arc::new(guard);
        let roots: Vec<Certificate<'static>> = (allowance.roots.iter())
            .map(|der| Certificate::from_der(der).to_owned())
            .collect();
        fetcher.tls = TlsConfig::builder()
            .root_certs(RootCerts::new_with_certs(&roots))
            .build();
        Ok(fetcher)
    }

    /// Look names up with `lookup` instead of the system's resolver. Every address it returns
    /// is judged by the guard like any other.
    pub fn with_lookup(mut self, lookup: impl Lookup) -> Self {
        let mut guard = (*self.guard).clone();
        guard.set_lookup(Arc::new(lookup));
        self.guard = Arc::new(guard);
        self
    }

    /// The human's choices this fetcher applies.
    pub fn policy(&self) -> &FetchPolicy {
        &self.policy
    }

    /// The guard every connection of this fetcher goes through.
    pub fn guard(&self) -> &Guard {
        &self.guard
    }

    /// Fetch `url` into `lane`, named after `filename_hint` when given.
    ///
    /// # Errors
    ///
    /// `address_refused` when the guard refuses the URL, an address it resolves to, or a
    /// redirect; `invalid_argument` for something that is not an absolute URL; `too_large`
    /// past the lane's size cap or past [`FetchPolicy::max_redirects`]; `fetch_failed` when
    /// the name does not resolve, the connection or TLS fails, the server answers an error
    /// status, the transfer breaks or a timeout passes; `io` when the lane cannot be
    /// written. Nothing is left in the lane in every error case.
    ///
    /// # Security
    ///
    /// `url` and `filename_hint` are untrusted. The hint, the server's name and the URL's are
    /// all only hints to the lane's `sanitize`; the connection goes only where the guard
    /// admitted.
    pub fn fetch(
        &self,
        lane: &DownloadLane,
        url: &str,
        filename_hint: Option<&str>,
    ) -> Result<Fetched> {
        let (audit, actor) = (lane.audit(), lane.actor());
        match self.fetch_recorded(lane, url, filename_hint) {
            // Recorded as refusals are, with the whole URL besides the escaped subject.
            Err(e) if e.code() == crate::Code::FetchFailed => {
                let fields = serde_json::json!({
                    "subject": Shown::text(url).as_str(),
                    "url": url,
                    "code": e.code().as_str(),
                    "message": e.to_string(),
                });
                if let Err(unrecorded) = audit.append("download.fetch.failed", actor, fields) {
                    tracing::warn!(error = %unrecorded, "could not record a failed fetch");
                }
                Err(e)
            }
            Err(e) => Err(audit.refused_with(Operation::Fetch, actor, url, e, &[("url", url)])),
            ok => ok,
        }
    }

    fn fetch_recorded(
        &self,
        lane: &DownloadLane,
        url: &str,
        filename_hint: Option<&str>,
    ) -> Result<Fetched> {
        let uri = guard::parse(url)?;
        // The URL's own rules, before anything is looked up; the resolver checks them again
        // with the addresses.
        self.guard.target(&uri)?;
        let pinned = Pinned::new(Arc::clone(&self.guard));
        let agent = self.agent(pinned.clone());
        let response = agent.get(uri).call().map_err(|e| {
            pinned
                .take_refusal()
                .unwrap_or_else(|| self.client_error(&pinned, url, e))
        })?;
        let final_url = response.get_uri().to_string();
        let status = response.status();
        let headers = response.headers();
        if status.is_redirection() && headers.contains_key(header::LOCATION) {
            return Err(Error::TooLarge {
                what: "the number of redirects",
                limit: u64::from(self.policy.max_redirects),
            });
        }
        if !status.is_success() {
            return Err(failed(
                &final_url,
                format!("the server answered {}", shown(status)),
            ));
        }
        if let (Some(cap), Some(announced)) = (lane.max_bytes(), content_length(headers))
            && announced > cap
        {
            return Err(Error::TooLarge {
                what: "the content, in bytes, as the server announced it,",
                limit: cap,
            });
        }
        let content_type = content_type(headers);
        let hint = match filename_hint.filter(|hint| !hint.trim().is_empty()) {
            Some(hint) => hint.as_bytes().to_vec(),
            None => {
                let disposition = headers.get(header::CONTENT_DISPOSITION);
                let path = response.get_uri().path();
                naming::suggested(disposition.map(|v| v.as_bytes()), path)
            }
        };
        let body = Transfer {
            body: response.into_body().into_reader(),
            url: final_url.clone(),
        };
        let record = |id: &str, saved: &Saved| {
            let fields = FetchRecord {
                url,
                final_url: &final_url,
                content_type: content_type.as_deref(),
                file: FileRecord::of(id, saved).hinted(&hint),
            };
            lane.audit().append("download.fetch", lane.actor(), fields)
        };
        let saved = lane.save_recorded(&hint, body, record)?;
        Ok(Fetched {
            saved,
            url: final_url,
            content_type,
        })
    }

    /// A client for one fetch: its resolver is the guard; no proxy; redirects followed up to
    /// the policy's count and then handed back; statuses handed back, not errors.
    fn agent(&self, pinned: Pinned) -> Agent {
        let config = Agent::config_builder()
            .proxy(None)
            .http_status_as_error(false)
            .max_redirects(self.policy.max_redirects)
            .max_redirects_will_error(false)
            .timeout_global(Some(self.policy.timeout))
            .timeout_connect(Some(self.policy.connect_timeout))
            .user_agent(USER_AGENT)
            .tls_config(self.tls.clone())
            .build();
        let connector = TcpConnector::default().chain(RustlsConnector::default());
        Agent::with_parts(config, connector, pinned)
    }

    /// The error of a fetch the client gave up on, when the guard had nothing to say.
    fn client_error(&self, pinned: &Pinned, url: &str, error: ureq::Error) -> Error {
        let at = pinned.last_target().unwrap_or_else(|| url.to_owned());
        match error {
            // A redirect to something that is not an http(s) URL: the client refuses it before
            // asking the resolver.
            ureq::Error::BadUri(why) => refused(
                &at,
                format!("redirected to a URL that is neither https nor http ({why})"),
            ),
            ureq::Error::Timeout(what) => failed(
                &at,
                format!(
                    "timed out ({what}; {} s to connect, {} s in all)",
                    self.policy.connect_timeout.as_secs_f64(),
                    self.policy.timeout.as_secs_f64()
                ),
            ),
            other => failed(&at, other.to_string()),
        }
    }
}

/// The body of a response, its failures made `fetch_failed` (the lane's copy hands a library
/// error in an `io::Error` back unchanged).
struct Transfer<R> {
    body: R,
    url: String,
}

impl<R: Read> Read for Transfer<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.body.read(buf).map_err(|e| {
            if e.kind() == io::ErrorKind::Interrupted {
                return e;
            }
            let timeout = e.kind() == io::ErrorKind::TimedOut
                || e.get_ref()
                    .and_then(|inner| inner.downcast_ref::<ureq::Error>())
                    .is_some_and(|inner| matches!(inner, ureq::Error::Timeout(_)));
            let why = if timeout {
                format!("timed out during the transfer ({e})")
            } else {
                format!("the transfer broke: {e}")
            };
            io::Error::other(failed(&self.url, why))
        })
    }
}

/// A status as `404 Not Found` (the standard reason, never the server's own text).
fn shown(status: StatusCode) -> String {
    match status.canonical_reason() {
        Some(reason) => format!("{} {reason}", status.as_u16()),
        None => status.as_u16().to_string(),
    }
}

fn content_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The `Content-Type`, when it is visible ASCII of at most [`MAX_CONTENT_TYPE`] bytes.
fn content_type(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(header::CONTENT_TYPE)?.to_str().ok()?.trim();
    let visible = value.bytes().all(|b| b == b' ' || b.is_ascii_graphic());
    (visible && !value.is_empty() && value.len() <= MAX_CONTENT_TYPE).then(|| value.to_owned())
}
