//! A small HTTP/1.1 server on the loopback interface for the fetch tests: HTTPS with a
//! certificate made when the tests start (trusted by the test's fetcher and nothing else),
//! or plain HTTP. Each connection gets one answer, chosen by the test from the request, and
//! is closed. Everything it does is bounded in time and stops when the server is dropped.

use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::{ServerConfig, ServerConnection, StreamOwned};

/// The host names (and addresses) the test certificate is valid for.
pub(crate) const NAMES: &[&str] = &[
    "files.test",
    "other.test",
    "rebind.test",
    "127.0.0.1",
    "127.0.0.2",
];

/// The longest anything here waits: a read, a silent connection.
const BOUND: Duration = Duration::from_secs(5);
/// How long a stalled answer stalls: past any timeout a test sets.
const STALL: Duration = Duration::from_secs(10);

/// The test certificate (DER) and the server's TLS configuration, made once.
fn tls() -> &'static (Vec<u8>, Arc<ServerConfig>) {
    static TLS: OnceLock<(Vec<u8>, Arc<ServerConfig>)> = OnceLock::new();
    TLS.get_or_init(|| {
        let names: Vec<String> = NAMES.iter().map(|n| (*n).to_owned()).collect();
        let made = rcgen::generate_simple_self_signed(names).expect("certificate");
        let der = made.cert.der().to_vec();
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(made.signing_key.serialize_der()));
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("protocol versions")
            .with_no_client_auth()
            .with_single_cert(vec![CertificateDer::from(der.clone())], key)
            .expect("server certificate");
        (der, Arc::new(config))
    })
}

/// The DER of the certificate every HTTPS test server presents.
pub(crate) fn certificate() -> Vec<u8> {
    tls().0.clone()
}

/// A request as the server read it.
#[derive(Clone, Debug)]
pub(crate) struct Seen {
    /// The request target (`/dir/file?x`).
    pub(crate) path: String,
    /// The `Host` header.
    pub(crate) host: String,
}

/// What the server answers.
#[derive(Clone, Debug)]
pub(crate) enum Reply {
    /// A status, headers and a whole body (`Content-Length` added).
    Full {
        status: u16,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    },
    /// `200` with a chunked body (no `Content-Length`).
    Chunked(Vec<u8>),
    /// `200` announcing `announced` bytes, sending `sent`, then closing the connection.
    Cut { announced: usize, sent: usize },
    /// `200` announcing 1000 bytes, sending 10, then nothing more (until the bound).
    Stall,
}

impl Reply {
    /// `200` with `body` and a content type.
    pub(crate) fn ok(body: &[u8], content_type: &str) -> Self {
        Reply::Full {
            status: 200,
            headers: vec![("Content-Type".into(), content_type.into())],
            body: body.to_vec(),
        }
    }

    /// A `302` to `location`.
    pub(crate) fn redirect(location: &str) -> Self {
        Reply::Full {
            status: 302,
            headers: vec![("Location".into(), location.into())],
            body: Vec::new(),
        }
    }

    /// `status` with a short body.
    pub(crate) fn status(status: u16) -> Self {
        Reply::Full {
            status,
            headers: Vec::new(),
            body: b"error page".to_vec(),
        }
    }
}

type Handler = Arc<dyn Fn(&Seen) -> Reply + Send + Sync>;

/// How the server treats a connection.
#[derive(Clone)]
enum Mode {
    Https(Handler),
    Http(Handler),
    /// Accept, then say nothing (a TLS handshake that never comes).
    Silent,
}

/// A running test server.
pub(crate) struct Server {
    pub(crate) addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    connections: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
}

impl Server {
    /// An HTTPS server on `ip`, answering with `handler`.
    pub(crate) fn https(
        ip: IpAddr,
        handler: impl Fn(&Seen) -> Reply + Send + Sync + 'static,
    ) -> Self {
        Self::start(SocketAddr::new(ip, 0), Mode::Https(Arc::new(handler)))
    }

    /// An HTTPS server at exactly `addr`.
    pub(crate) fn https_at(
        addr: SocketAddr,
        handler: impl Fn(&Seen) -> Reply + Send + Sync + 'static,
    ) -> Self {
        Self::start(addr, Mode::Https(Arc::new(handler)))
    }

    /// A plain HTTP server on `ip`.
    pub(crate) fn http(
        ip: IpAddr,
        handler: impl Fn(&Seen) -> Reply + Send + Sync + 'static,
    ) -> Self {
        Self::start(SocketAddr::new(ip, 0), Mode::Http(Arc::new(handler)))
    }

    /// A server that accepts connections and never says anything.
    pub(crate) fn silent(ip: IpAddr) -> Self {
        Self::start(SocketAddr::new(ip, 0), Mode::Silent)
    }

    fn start(addr: SocketAddr, mode: Mode) -> Self {
        let listener = TcpListener::bind(addr).expect("bind a loopback port");
        listener.set_nonblocking(true).expect("non-blocking");
        let addr = listener.local_addr().expect("local address");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let connections = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let accept = {
            let (seen, connections, stop) = (seen.clone(), connections.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Acquire) {
                    match listener.accept() {
                        Ok((stream, _)) => {
                            connections.fetch_add(1, Ordering::AcqRel);
                            let (mode, seen, stop) = (mode.clone(), seen.clone(), stop.clone());
                            std::thread::spawn(move || {
                                let _ = serve(stream, &mode, &seen, &stop);
                            });
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                            std::thread::sleep(Duration::from_millis(5));
                        }
                        Err(_) => break,
                    }
                }
            })
        };
        Self {
            addr,
            seen,
            connections,
            stop,
            accept: Some(accept),
        }
    }

    /// The port.
    pub(crate) fn port(&self) -> u16 {
        self.addr.port()
    }

    /// How many connections reached the server (after a moment for the last to be accepted).
    pub(crate) fn connections(&self) -> usize {
        std::thread::sleep(Duration::from_millis(50));
        self.connections.load(Ordering::Acquire)
    }

    /// The requests read so far.
    pub(crate) fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
    }
}

fn serve(
    stream: TcpStream,
    mode: &Mode,
    seen: &Mutex<Vec<Seen>>,
    stop: &AtomicBool,
) -> io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(BOUND))?;
    stream.set_write_timeout(Some(BOUND))?;
    match mode {
        Mode::Silent => {
            wait(stop, BOUND);
            Ok(())
        }
        Mode::Http(handler) => {
            let mut stream = stream;
            exchange(&mut stream, handler, seen, stop)
        }
        Mode::Https(handler) => {
            let conn = ServerConnection::new(tls().1.clone()).map_err(io::Error::other)?;
            let mut tls = StreamOwned::new(conn, stream);
            exchange(&mut tls, handler, seen, stop)?;
            tls.conn.send_close_notify();
            tls.flush()
        }
    }
}

/// Read one request, write its answer.
fn exchange(
    stream: &mut (impl Read + Write),
    handler: &Handler,
    seen: &Mutex<Vec<Seen>>,
    stop: &AtomicBool,
) -> io::Result<()> {
    let head = read_head(stream)?;
    let text = String::from_utf8_lossy(&head);
    let mut lines = text.split("\r\n");
    let path = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .unwrap_or("/")
        .to_owned();
    let host = lines
        .filter_map(|l| l.split_once(':'))
        .find(|(name, _)| name.eq_ignore_ascii_case("host"))
        .map(|(_, v)| v.trim().to_owned())
        .unwrap_or_default();
    let request = Seen { path, host };
    seen.lock().unwrap().push(request.clone());
    match handler(&request) {
        Reply::Full {
            status,
            headers,
            body,
        } => {
            let mut out = format!(
                "HTTP/1.1 {status} Reason\r\nContent-Length: {}\r\nConnection: close\r\n",
                body.len()
            );
            for (name, value) in headers {
                out.push_str(&format!("{name}: {value}\r\n"));
            }
            out.push_str("\r\n");
            stream.write_all(out.as_bytes())?;
            stream.write_all(&body)?;
        }
        Reply::Chunked(body) => {
            let head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
            stream.write_all(head.as_bytes())?;
            for chunk in body.chunks(1024) {
                stream.write_all(format!("{:x}\r\n", chunk.len()).as_bytes())?;
                stream.write_all(chunk)?;
                stream.write_all(b"\r\n")?;
            }
            stream.write_all(b"0\r\n\r\n")?;
        }
        Reply::Cut { announced, sent } => {
            let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {announced}\r\n\r\n");
            stream.write_all(head.as_bytes())?;
            stream.write_all(&vec![b'x'; sent])?;
            stream.flush()?;
            // Closed without the rest (and, over TLS, without a close_notify).
            return Err(io::Error::other("cut"));
        }
        Reply::Stall => {
            let head = "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n";
            stream.write_all(head.as_bytes())?;
            stream.write_all(&[b'x'; 10])?;
            stream.flush()?;
            wait(stop, STALL);
        }
    }
    stream.flush()
}

/// The request's head, up to the blank line.
fn read_head(stream: &mut impl Read) -> io::Result<Vec<u8>> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() > 16 * 1024 || stream.read(&mut byte)? == 0 {
            return Err(io::Error::other("no request head"));
        }
        head.push(byte[0]);
    }
    Ok(head)
}

/// Sleep until `stop` or `bound` has passed.
fn wait(stop: &AtomicBool, bound: Duration) {
    let start = Instant::now();
    while !stop.load(Ordering::Acquire) && start.elapsed() < bound {
        std::thread::sleep(Duration::from_millis(20));
    }
}
