//! Wrong `Host`, missing or replayed token, cross-origin and token-less state changes, other
//! interfaces, CORS, and the idle stop: all refused or done as the guard says.

use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::time::Duration;

use crate::client::{Page, send};

#[test]
fn a_wrong_host_is_refused_whatever_the_path() {
    let page = Page::new();
    let cookie = page.sign_in();
    let port = page.address.port();
    for host in [
        format!("localhost:{port}"),
        format!("attacker.example:{port}"),
        "127.0.0.1".to_owned(),
        format!("127.0.0.1:{}", port.wrapping_add(1)),
        format!("127.0.0.1:{port}.attacker.example"),
    ] {
        for target in ["/", "/events", "/assets/live.js", "/session?token=x"] {
            let head = format!("GET {target} HTTP/1.1\r\nHost: {host}\r\nCookie: {cookie}");
            let response = send(page.address, &head, "");
            assert_eq!(response.status, 403, "{host} {target}: {response:?}");
            assert!(!response.body.contains("csrf"), "{host}: {}", response.body);
        }
    }
    // An absolute-form target naming another host.
    let head = format!(
        "GET http://attacker.example/ HTTP/1.1\r\nHost: {}\r\nCookie: {cookie}",
        page.host()
    );
    assert_eq!(send(page.address, &head, "").status, 403);
    // No Host at all (HTTP/1.0 allows it).
    let response = send(
        page.address,
        &format!("GET / HTTP/1.0\r\nCookie: {cookie}"),
        "",
    );
    assert!(response.status >= 400, "{response:?}");
    // Two `Host` headers, the right one first or last.
    for (first, second) in [
        (page.host(), "attacker.example".to_owned()),
        ("attacker.example".to_owned(), page.host()),
        (page.host(), page.host()),
    ] {
        let head = format!("GET / HTTP/1.1\r\nHost: {first}\r\nHost: {second}\r\nCookie: {cookie}");
        let response = send(page.address, &head, "");
        assert!(response.status >= 400, "{first} {second}: {response:?}");
        assert!(!response.body.contains("csrf"), "{}", response.body);
    }
    // The right one.
    assert_eq!(page.get("/", &format!("\r\nCookie: {cookie}")).status, 200);
}

#[test]
fn a_missing_wrong_or_replayed_token_signs_nobody_in() {
    let page = Page::new();
    assert_eq!(page.get("/", "").status, 401, "no cookie");
    let missing = page.get("/session", "");
    assert_eq!(missing.status, 403);
    assert!(missing.header("set-cookie").is_none());
    let wrong = page.get(
        "/session?token=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        "",
    );
    assert_eq!(wrong.status, 403);
    assert!(wrong.header("set-cookie").is_none());

    let first = page.get(&page.sign_in_target(), "");
    assert_eq!(first.status, 303);
    let cookie = first.header("set-cookie").unwrap();
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(cookie.contains(attribute), "{cookie}");
    }
    let replayed = page.get(&page.sign_in_target(), "");
    assert_eq!(replayed.status, 403, "{replayed:?}");
    assert!(replayed.body.contains("already used"), "{}", replayed.body);
    assert!(replayed.header("set-cookie").is_none());

    // A forged cookie, or the real one twice (a cookie planted by another page on this host
    // beside it), opens nothing.
    let forged = page.get("/", "\r\nCookie: safe_lanes_1=forged");
    assert_eq!(forged.status, 401);
    let value = cookie.split(';').next().unwrap();
    let doubled = page.get("/", &format!("\r\nCookie: {value}; {value}"));
    assert_eq!(doubled.status, 401);
    assert_eq!(page.get("/", &format!("\r\nCookie: {value}")).status, 200);
}

#[test]
fn a_cross_origin_or_token_less_post_changes_nothing() {
    let page = Page::new();
    let cookie = page.sign_in();
    let csrf = page.csrf(&cookie);
    let folder = page.folder("docs");
    let path = folder.to_str().unwrap();
    let form = |token: &str| -> Vec<(&'static str, String)> {
        [
            ("csrf", token),
            ("alias", "docs"),
            ("path", path),
            ("access", "read_write"),
            ("reason", "the page's own form"),
        ]
        .map(|(k, v)| (k, v.to_owned()))
        .to_vec()
    };
    let post = |extra: &str, f: Vec<(&'static str, String)>| {
        let borrowed: Vec<(&str, &str)> = f.iter().map(|(k, v)| (*k, v.as_str())).collect();
        page.post_with("/add", extra, &borrowed)
    };
    let with_cookie = format!("\r\nCookie: {cookie}");
    let cases = [
        (
            "another origin",
            format!("\r\nOrigin: http://attacker.example{with_cookie}"),
            form(&csrf),
        ),
        (
            "a null origin",
            format!("\r\nOrigin: null{with_cookie}"),
            form(&csrf),
        ),
        ("no origin", with_cookie.clone(), form(&csrf)),
        (
            "another site, same origin header",
            format!(
                "\r\nOrigin: {}\r\nSec-Fetch-Site: cross-site{with_cookie}",
                page.origin()
            ),
            form(&csrf),
        ),
        (
            "no CSRF token",
            format!("\r\nOrigin: {}{with_cookie}", page.origin()),
            form(""),
        ),
        (
            "a wrong CSRF token",
            format!("\r\nOrigin: {}{with_cookie}", page.origin()),
            form("x"),
        ),
        (
            "no session",
            format!("\r\nOrigin: {}", page.origin()),
            form(&csrf),
        ),
    ];
    for (what, extra, f) in cases {
        let response = post(&extra, f);
        assert!(matches!(response.status, 401 | 403), "{what}: {response:?}");
        assert!(page.grants().list().unwrap().grants.is_empty(), "{what}");
    }
    // The same form from the page itself is done.
    let done = post(
        &format!("\r\nOrigin: {}{with_cookie}", page.origin()),
        form(&csrf),
    );
    assert_eq!(done.status, 303, "{done:?}");
    assert_eq!(page.grants().list().unwrap().grants.len(), 1);
}

#[test]
fn no_cors_and_no_other_methods() {
    let page = Page::new();
    let cookie = page.sign_in();
    let preflight = format!(
        "OPTIONS /add HTTP/1.1\r\nHost: {}\r\nOrigin: http://attacker.example\r\n\
         Access-Control-Request-Method: POST",
        page.host()
    );
    let response = send(page.address, &preflight, "");
    assert_eq!(response.status, 403);
    for r in [
        response,
        page.get(
            "/",
            &format!("\r\nCookie: {cookie}\r\nOrigin: http://attacker.example"),
        ),
    ] {
        assert!(
            r.headers
                .iter()
                .all(|(n, _)| !n.to_ascii_lowercase().starts_with("access-control")),
            "{r:?}"
        );
        assert_eq!(r.header("x-frame-options"), Some("DENY"));
        assert_eq!(r.header("referrer-policy"), Some("same-origin"));
        assert!(
            r.header("content-security-policy")
                .unwrap()
                .contains("default-src 'none'")
        );
    }
    for method in ["PUT", "DELETE", "PATCH"] {
        let head = format!(
            "{method} / HTTP/1.1\r\nHost: {}\r\nOrigin: {}\r\nCookie: {cookie}",
            page.host(),
            page.origin()
        );
        assert_eq!(send(page.address, &head, "").status, 403, "{method}");
    }
}

/// This machine's addresses other than 127.0.0.1: another loopback address, and the address
/// of the interface a packet to the outside would leave by (found without sending one).
fn other_addresses() -> Vec<std::net::IpAddr> {
    let mut out = vec!["127.0.0.2".parse().unwrap()];
    let outward = UdpSocket::bind("0.0.0.0:0")
        .and_then(|s| s.connect("192.0.2.1:9").map(|()| s))
        .and_then(|s| s.local_addr());
    if let Ok(local) = outward
        && !local.ip().is_loopback()
        && !local.ip().is_unspecified()
    {
        out.push(local.ip());
    }
    out
}

#[test]
fn nothing_is_served_on_another_interface() {
    let page = Page::new();
    assert!(page.address.ip().is_loopback());
    assert_eq!(page.address.ip().to_string(), "127.0.0.1");
    let others = other_addresses();
    for ip in others {
        let there = SocketAddr::new(ip, page.address.port());
        let connected = TcpStream::connect_timeout(&there, Duration::from_secs(5));
        assert!(connected.is_err(), "{there} accepted a connection");
    }
    // The page itself still answers.
    assert_eq!(page.get("/", "").status, 401);
}

#[test]
fn the_server_stops_once_idle() {
    let mut page = Page::with_idle(Duration::from_millis(300));
    assert_eq!(page.get("/", "").status, 401);
    let server = page.server.take().unwrap();
    // Generous: this checks that it stops, not how fast.
    for _ in 0..600 {
        if server.is_finished() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(server.is_finished(), "still serving after 30 s idle");
    server.join().unwrap().unwrap();
    assert!(TcpStream::connect(page.address).is_err(), "still listening");
}

/// Idle and slow connections, two thousand of them from any local process, neither keep the
/// signed-in human from the page nor stay open: headers must come in time, a connection that
/// never shows the session is closed, and at most a bounded number are kept, the human's first.
#[test]
fn idle_and_slow_connections_never_starve_the_human() {
    use std::io::{Read, Write};
    let page = Page::new();
    let cookie = page.sign_in();
    // Room for the flood on both ends of it.
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    rustix::process::setrlimit(
        rustix::process::Resource::Nofile,
        rustix::process::Rlimit {
            current: limit.maximum,
            maximum: limit.maximum,
        },
    )
    .unwrap();
    let mut idle = Vec::new();
    let mut slow = Vec::new();
    for i in 0..2_000 {
        let Ok(mut stream) = TcpStream::connect(page.address) else {
            continue;
        };
        stream.set_nodelay(true).unwrap();
        if i % 2 == 0 {
            idle.push(stream);
        } else {
            let _ = stream.write_all(b"GET / HTTP/1.1\r\nHo");
            slow.push(stream);
        }
    }
    assert!(idle.len() + slow.len() >= 1_000, "the flood connected");
    // One byte a second from the slow ones, while the human uses the page.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let dribble = {
        let stop = std::sync::Arc::clone(&stop);
        let mut slow = slow;
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                for s in &mut slow {
                    let _ = s.write_all(b"s");
                }
                std::thread::sleep(Duration::from_secs(1));
            }
            slow
        })
    };
    for _ in 0..5 {
        let overview = page.get("/", &format!("\r\nCookie: {cookie}"));
        assert_eq!(overview.status, 200, "{overview:?}");
        std::thread::sleep(Duration::from_millis(300));
    }
    // Served while the flood still held its connections: not after the flood's own limits
    // closed them.
    let open = |s: &TcpStream| {
        s.set_nonblocking(true).unwrap();
        let open =
            matches!(s.peek(&mut [0u8; 1]), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock);
        s.set_nonblocking(false).unwrap();
        open
    };
    assert!(
        idle.iter().rev().take(100).any(open),
        "the human was answered while the flood was connected"
    );
    // None of the flood stays open: each is closed within the header and unsigned limits.
    std::thread::sleep(Duration::from_secs(17));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let slow = dribble.join().unwrap();
    let closed = |s: &mut TcpStream| {
        s.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let mut buf = [0u8; 512];
        loop {
            match s.read(&mut buf) {
                Ok(0) => return true,
                Ok(_) => continue,
                Err(e) => return e.kind() == std::io::ErrorKind::ConnectionReset,
            }
        }
    };
    let still_open = idle
        .into_iter()
        .chain(slow)
        .filter_map(|mut s| (!closed(&mut s)).then_some(()))
        .count();
    assert_eq!(still_open, 0, "every idle and slow connection was closed");
    assert_eq!(page.get("/", &format!("\r\nCookie: {cookie}")).status, 200);
}

/// Regression (the fault pass): 200 update streams of the signed-in session, never read (or
/// 200 looping clients holding the session cookie), filled every connection the page keeps,
/// and the human's own next page was reset. The newest connection always gets in: at the
/// bound, the oldest connection goes, the session's own too (a browser's update stream
/// reconnects by itself).
#[test]
fn two_hundred_open_update_streams_never_keep_the_human_out() {
    use std::io::Write;
    let page = Page::new();
    let cookie = page.sign_in();
    let mut streams = Vec::new();
    for _ in 0..200 {
        let mut stream = TcpStream::connect(page.address).unwrap();
        let head = format!(
            "GET /events HTTP/1.1\r\nHost: {}\r\nCookie: {cookie}\r\n\r\n",
            page.host()
        );
        stream.write_all(head.as_bytes()).unwrap();
        streams.push(stream);
    }
    std::thread::sleep(Duration::from_millis(500));
    for _ in 0..3 {
        let overview = page.get("/", &format!("\r\nCookie: {cookie}"));
        assert_eq!(overview.status, 200, "{overview:?}");
    }
    drop(streams);
}

/// Regression (the fault pass): update streams piled up without bound while the human's own
/// requests waited behind them. The session holds at most eight: each new one ends the oldest
/// (a browser's page reconnects by itself), and the human's page is answered throughout.
#[test]
fn the_session_holds_at_most_eight_update_streams() {
    use std::io::{Read, Write};
    let page = Page::new();
    let cookie = page.sign_in();
    let mut streams = Vec::new();
    for _ in 0..20 {
        let mut stream = TcpStream::connect(page.address).unwrap();
        let head = format!(
            "GET /events HTTP/1.1\r\nHost: {}\r\nCookie: {cookie}\r\n\r\n",
            page.host()
        );
        stream.write_all(head.as_bytes()).unwrap();
        // The answer's head: the stream is open (and counted) before the next one opens.
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            assert_eq!(stream.read(&mut byte).unwrap(), 1, "the answer's head");
            head.push(byte[0]);
        }
        assert!(
            head.starts_with(b"HTTP/1.1 200"),
            "{}",
            String::from_utf8_lossy(&head)
        );
        streams.push(stream);
    }
    let overview = page.get("/", &format!("\r\nCookie: {cookie}"));
    assert_eq!(overview.status, 200, "{overview:?}");
    // Whether a stream's answer ended (the last chunk, or the connection closed) within a
    // second.
    let ended = |stream: &mut TcpStream| {
        stream
            .set_read_timeout(Some(Duration::from_secs(1)))
            .unwrap();
        let mut seen = Vec::new();
        let mut buf = [0u8; 256];
        loop {
            match stream.read(&mut buf) {
                Ok(0) => return true,
                Ok(n) => {
                    seen.extend_from_slice(&buf[..n]);
                    if seen.windows(5).any(|w| w == b"0\r\n\r\n") {
                        return true;
                    }
                }
                Err(_) => return false,
            }
        }
    };
    let ended: Vec<bool> = streams.iter_mut().map(ended).collect();
    let expected: Vec<bool> = (0..20).map(|i| i < 12).collect();
    assert_eq!(
        ended, expected,
        "the twelve oldest ended, the newest eight are open"
    );
}
