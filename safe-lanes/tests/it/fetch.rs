//! Fetching into the lane: what lands, what the guard refuses (each refusal its own case),
//! and that every failure leaves nothing.
//!
//! Every server is on the loopback interface (`server.rs`); the fetcher reaches exactly those
//! servers through the test allowance, which admits each one's address and port and nothing
//! else. Every other address in these tests is one the guard must refuse before any
//! connection: each such case first asks the guard itself, so a broken guard fails the test
//! before anything is sent.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use safe_lanes::fetch::{FetchPolicy, Fetcher, Lookup, LoopbackForTests, address_refusal};
use safe_lanes::{Code, DownloadLane};
use sha2::Digest;

use crate::util::{Fixture, names as listing};

mod server;

use server::{Reply, Server};

const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);
const LOOPBACK_2: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));

fn sha256(data: &[u8]) -> String {
    sha2::Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A name lookup the test controls: each host has a queue of answers (the last one repeats);
/// a host it does not know goes to the system's resolver (`localhost`). It remembers what it
/// was asked.
#[derive(Debug, Default)]
struct Table {
    answers: Mutex<HashMap<String, VecDeque<Vec<IpAddr>>>>,
    asked: Mutex<Vec<String>>,
}

#[derive(Clone, Debug, Default)]
struct Names(Arc<Table>);

impl Names {
    /// `host` answers `ips` at its next lookup (after the answers already queued).
    fn answer(self, host: &str, ips: &[IpAddr]) -> Self {
        let mut answers = self.0.answers.lock().unwrap();
        answers
            .entry(host.to_owned())
            .or_default()
            .push_back(ips.to_vec());
        drop(answers);
        self
    }

    /// The hosts looked up so far, in order.
    fn asked(&self) -> Vec<String> {
        self.0.asked.lock().unwrap().clone()
    }
}

impl Lookup for Names {
    fn lookup(&self, host: &str, port: u16) -> io::Result<Vec<IpAddr>> {
        self.0.asked.lock().unwrap().push(host.to_owned());
        let mut answers = self.0.answers.lock().unwrap();
        match answers.get_mut(host) {
            Some(queue) if queue.len() > 1 => Ok(queue.pop_front().unwrap_or_default()),
            Some(queue) => Ok(queue.front().cloned().unwrap_or_default()),
            None => Ok((host, port).to_socket_addrs()?.map(|a| a.ip()).collect()),
        }
    }
}

/// The usual names: `files.test` and `other.test` are the loopback address.
fn usual() -> Names {
    Names::default()
        .answer("files.test", &[LOOPBACK])
        .answer("other.test", &[LOOPBACK])
}

/// A fetcher that may reach exactly `servers`, trusting the test certificate, with `names`.
fn fetcher(servers: &[&Server], policy: FetchPolicy, names: &Names) -> Fetcher {
    let addrs: Vec<SocketAddr> = servers.iter().map(|s| s.addr).collect();
    let allowance = LoopbackForTests::new(&addrs, vec![server::certificate()]).unwrap();
    Fetcher::new_with_loopback_for_tests(policy, allowance)
        .unwrap()
        .with_lookup(names.clone())
}

/// The audit log's records, in order.
fn records(fx: &Fixture) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(fx.root.path().join("audit.jsonl")).unwrap_or_default();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The events of the audit log's records, in order.
fn events(fx: &Fixture) -> Vec<String> {
    records(fx)
        .iter()
        .map(|r| r["event"].as_str().unwrap().to_owned())
        .collect()
}

/// Nothing in the lane: no file, no hidden staging file.
fn assert_lane_empty(fx: &Fixture) {
    assert_eq!(listing(&fx.root.downloads_path()), Vec::<String>::new());
}

#[test]
fn a_fetch_lands_in_the_lane_with_its_name_size_hash_type_and_final_url() {
    let fx = Fixture::new();
    let body: Vec<u8> = (0..3000u32).map(|i| (i % 251) as u8).collect();
    let served = body.clone();
    let srv = Server::https(LOOPBACK, move |_| Reply::ok(&served, "application/pdf"));
    let lane = DownloadLane::open(&fx.root)
        .unwrap()
        .with_max_bytes(1 << 20);
    let fetcher = fetcher(&[&srv], FetchPolicy::default(), &usual());
    let url = format!("https://files.test:{}/dir/report.pdf?session=1", srv.port());

    let fetched = fetcher.fetch(&lane, &url, None).unwrap();

    assert_eq!(fetched.saved.name, "report.pdf");
    assert_eq!(
        fetched.saved.path,
        fx.root.downloads_path().join("report.pdf")
    );
    assert_eq!(fetched.saved.bytes, body.len() as u64);
    assert_eq!(fetched.saved.sha256, sha256(&body));
    assert_eq!(std::fs::read(&fetched.saved.path).unwrap(), body);
    assert_eq!(fetched.content_type.as_deref(), Some("application/pdf"));
    assert_eq!(fetched.url, url);
    let seen = srv.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].path, "/dir/report.pdf?session=1");
    assert_eq!(seen[0].host, format!("files.test:{}", srv.port()));
    // Serialized flat, as adapters return it.
    let json = serde_json::to_value(&fetched).unwrap();
    for key in ["path", "name", "bytes", "sha256", "url", "content_type"] {
        assert!(json.get(key).is_some(), "{key} in {json}");
    }
    // Exactly one record for the one effect, with everything in it.
    let records = records(&fx);
    assert_eq!(records.len(), 1, "{records:?}");
    let record = &records[0];
    assert_eq!(record["event"], "download.fetch");
    assert_eq!(record["actor"], "agent");
    assert_eq!(record["url"], url.as_str());
    assert_eq!(record["final_url"], url.as_str());
    assert_eq!(record["content_type"], "application/pdf");
    assert_eq!(record["name"], "report.pdf");
    assert_eq!(record["bytes"], body.len() as u64);
    assert_eq!(record["sha256"], sha256(&body).as_str());
    assert!(fx.root.audit().verify().unwrap().is_intact());
}

#[test]
fn the_name_comes_from_the_hint_the_header_or_the_url_and_is_always_sanitized() {
    let fx = Fixture::new();
    let srv = Server::https(LOOPBACK, |seen| {
        let disposition = match seen.path.as_str() {
            "/dotfile" => Some("attachment; filename=\"../../.bashrc\""),
            "/rtl" => Some("attachment; filename*=UTF-8''invoice%E2%80%AEfdp.exe"),
            "/both" => {
                Some("attachment; filename=\"plain.txt\"; filename*=UTF-8''%C3%A9t%C3%A9.txt")
            }
            "/device" => Some("attachment; filename=CON.txt"),
            "/shortcut" => Some("attachment; filename=\"run.desktop\""),
            "/named" => Some("attachment; filename=\"report.pdf\""),
            _ => None,
        };
        let headers = disposition
            .map(|d| vec![("Content-Disposition".to_owned(), d.to_owned())])
            .unwrap_or_default();
        Reply::Full {
            status: 200,
            headers,
            body: b"content".to_vec(),
        }
    });
    let lane = DownloadLane::open(&fx.root).unwrap();
    let fetcher = fetcher(&[&srv], FetchPolicy::default(), &usual());
    let port = srv.port();
    let cases: &[(&str, Option<&str>, &str)] = &[
        ("/dotfile", None, "bashrc"),
        ("/rtl", None, "invoicefdp.exe"),
        ("/both", None, "été.txt"),
        ("/device", None, "_CON.txt"),
        ("/shortcut", None, "run.desktop.download"),
        // The caller's hint wins over the server's name, and is sanitized too.
        ("/named", Some("../notes.txt"), "notes.txt"),
        // An empty hint is no hint.
        ("/named", Some(""), "report.pdf"),
        // No header: the URL's last segment, percent-decoded, then sanitized.
        ("/a/b/..%2F..%2Fcron.sh", None, "cron.sh"),
        ("/a/b/%2Eprofile", None, "profile"),
        ("/", None, "download"),
    ];
    for (path, hint, want) in cases {
        let url = format!("https://files.test:{port}{path}");
        let fetched = fetcher.fetch(&lane, &url, *hint).unwrap();
        assert_eq!(fetched.saved.name, *want, "{path} {hint:?}");
        assert_eq!(
            fetched.saved.path.parent(),
            Some(fx.root.downloads_path().as_path())
        );
    }
    assert_eq!(listing(&fx.root.downloads_path()).len(), cases.len());
}

#[test]
fn a_redirect_is_followed_and_its_target_checked_again() {
    let fx = Fixture::new();
    let srv = Server::https(LOOPBACK, |seen| match seen.path.as_str() {
        "/start" => Reply::redirect(&format!("https://other.test:{}/file.txt", port_of(seen))),
        _ => Reply::ok(b"moved here", "text/plain"),
    });
    let lane = DownloadLane::open(&fx.root).unwrap();
    let names = usual();
    let fetcher = fetcher(&[&srv], FetchPolicy::default(), &names);
    let start = format!("https://files.test:{}/start", srv.port());
    let fetched = fetcher.fetch(&lane, &start, None).unwrap();
    let last = format!("https://other.test:{}/file.txt", srv.port());
    assert_eq!(fetched.url, last);
    assert_eq!(fetched.saved.name, "file.txt");
    assert_eq!(std::fs::read(&fetched.saved.path).unwrap(), b"moved here");
    // The redirect's host was looked up and checked like the first one.
    assert_eq!(names.asked(), ["files.test", "other.test"]);
    let records = records(&fx);
    assert_eq!(records.len(), 1);
    assert_eq!(records[0]["url"], start.as_str());
    assert_eq!(records[0]["final_url"], last.as_str());

    // With an allowlist of the first host only, the same redirect is refused.
    let mut policy = FetchPolicy::default();
    policy.hosts = Some(vec!["files.test".to_owned()]);
    let narrowed = fetcher_for(&srv, policy);
    let e = narrowed.fetch(&lane, &start, None).unwrap_err();
    assert_eq!(e.code(), Code::AddressRefused, "{e}");
    assert!(e.to_string().contains("other.test"), "{e}");
    assert!(e.to_string().contains("redirect"), "{e}");
    assert_eq!(listing(&fx.root.downloads_path()), ["file.txt"]);
}

/// The port a request was sent to, from its `Host` header.
fn port_of(seen: &server::Seen) -> u16 {
    let port = seen.host.rsplit(':').next().unwrap_or_default();
    port.parse().unwrap()
}

/// A fetcher for `srv` with the usual names.
fn fetcher_for(srv: &Server, policy: FetchPolicy) -> Fetcher {
    fetcher(&[srv], policy, &usual())
}

#[test]
fn redirects_to_refused_places_are_refused_before_any_connection_and_nothing_is_saved() {
    let fx = Fixture::new();
    // A server the redirects aim at, on a port the allowance does not admit: had the guard
    // let a connection through, it would have reached this one and been counted.
    let victim = Server::https(LOOPBACK, |_| Reply::ok(b"secret", "text/plain"));
    let q = victim.port();
    let targets: Vec<String> = vec![
        format!("https://127.0.0.1:{q}/admin"),
        format!("https://127.0.0.2:{q}/admin"),
        format!("https://[::ffff:127.0.0.1]:{q}/admin"),
        format!("https://[::ffff:7f00:1]:{q}/admin"),
        format!("https://[::1]:{q}/admin"),
        format!("https://[::127.0.0.1]:{q}/admin"),
        format!("https://[64:ff9b::7f00:1]:{q}/admin"),
        format!("https://localhost:{q}/admin"),
        format!("https://sneaky.test:{q}/admin"),
        format!("https://inner.test:{q}/admin"),
        "https://169.254.169.254/latest/meta-data/iam/security-credentials/".to_owned(),
        "https://[fd00:ec2::254]/latest/meta-data/".to_owned(),
        "https://10.0.0.1/".to_owned(),
        "https://172.16.0.1/".to_owned(),
        "https://192.168.1.1/".to_owned(),
        "https://100.64.0.1/".to_owned(),
        "https://[fc00::1]/".to_owned(),
        "https://[fe80::1]/".to_owned(),
        "https://0.0.0.0/".to_owned(),
        format!("https://2130706433:{q}/admin"),
        format!("https://0177.0.0.1:{q}/admin"),
        format!("https://0x7f.1:{q}/admin"),
        format!("https://127.1:{q}/admin"),
        format!("https://user:pw@files.test:{q}/admin"),
    ];
    let names = usual()
        .answer("sneaky.test", &[LOOPBACK])
        .answer("inner.test", &[IpAddr::V4(Ipv4Addr::new(10, 1, 2, 3))]);
    let shared = Arc::new(targets.clone());
    let srv = Server::https(LOOPBACK, move |seen| {
        let i: usize = seen.path.trim_start_matches("/to/").parse().unwrap_or(0);
        Reply::redirect(&shared[i])
    });
    let lane = DownloadLane::open(&fx.root).unwrap();
    let fetcher = fetcher(&[&srv], FetchPolicy::default(), &names);
    for (i, target) in targets.iter().enumerate() {
        assert!(
            fetcher.guard().admit(target).is_err(),
            "the guard admits {target}"
        );
        let url = format!("https://files.test:{}/to/{i}", srv.port());
        let e = fetcher.fetch(&lane, &url, None).unwrap_err();
        assert_eq!(e.code(), Code::AddressRefused, "{target}: {e}");
        assert!(
            e.to_string().contains("a redirect led here"),
            "{target}: {e}"
        );
        assert!(e.code().is_refusal());
    }
    assert_eq!(srv.seen().len(), targets.len());
    assert_eq!(victim.connections(), 0);
    assert_lane_empty(&fx);
    // One refusal recorded per fetch, naming the URL asked for.
    let records = records(&fx);
    assert_eq!(records.len(), targets.len());
    for (i, record) in records.iter().enumerate() {
        assert_eq!(record["event"], "download.fetch.refused");
        assert_eq!(record["code"], "address_refused");
        let url = format!("https://files.test:{}/to/{i}", srv.port());
        assert_eq!(record["subject"], url.as_str());
        assert_eq!(record["url"], url.as_str());
    }
}

#[test]
fn a_redirect_to_another_scheme_is_refused() {
    let fx = Fixture::new();
    let srv = Server::https(LOOPBACK, |seen| match seen.path.as_str() {
        "/ftp" => Reply::redirect("ftp://files.test/pub/file"),
        "/gopher" => Reply::redirect("gopher://127.0.0.1:70/_stats"),
        _ => Reply::redirect(&format!("http://files.test:{}/plain", port_of(seen))),
    });
    let lane = DownloadLane::open(&fx.root).unwrap();
    let fetcher = fetcher_for(&srv, FetchPolicy::default());
    for path in ["/ftp", "/gopher", "/http"] {
        let url = format!("https://files.test:{}{path}", srv.port());
        let e = fetcher.fetch(&lane, &url, None).unwrap_err();
        assert_eq!(e.code(), Code::AddressRefused, "{path}: {e}");
    }
    assert_eq!(srv.connections(), 3);
    assert_lane_empty(&fx);
}

#[test]
fn more_redirects_than_allowed_are_refused_as_too_large() {
    let fx = Fixture::new();
    // `/loop/N` sends to `/loop/N+1` (a relative redirect), forever; `/chain/N` ends at 0.
    let srv = Server::https(LOOPBACK, |seen| {
        if let Some(n) = seen.path.strip_prefix("/loop/") {
            let next: u32 = n.parse::<u32>().unwrap() + 1;
            return Reply::redirect(&format!("/loop/{next}"));
        }
        match seen
            .path
            .strip_prefix("/chain/")
            .map(|n| n.parse::<u32>().unwrap())
        {
            Some(0) | None => Reply::ok(b"end", "text/plain"),
            Some(n) => Reply::redirect(&format!("/chain/{}", n - 1)),
        }
    });
    let lane = DownloadLane::open(&fx.root).unwrap();
    let port = srv.port();

    let fetcher = fetcher_for(&srv, FetchPolicy::default());
    let e = fetcher
        .fetch(&lane, &format!("https://files.test:{port}/loop/0"), None)
        .unwrap_err();
    assert_eq!(e.code(), Code::TooLarge, "{e}");
    assert!(e.to_string().contains("redirects"), "{e}");
    // The first request and the five redirects followed, no more.
    assert_eq!(srv.seen().len(), 6);
    // Five redirects are within the bound.
    let fetched = fetcher
        .fetch(&lane, &format!("https://files.test:{port}/chain/5"), None)
        .unwrap();
    assert_eq!(std::fs::read(&fetched.saved.path).unwrap(), b"end");

    let mut none = FetchPolicy::default();
    none.max_redirects = 0;
    let before = srv.seen().len();
    let e = fetcher_for(&srv, none)
        .fetch(&lane, &format!("https://files.test:{port}/chain/1"), None)
        .unwrap_err();
    assert_eq!(e.code(), Code::TooLarge, "{e}");
    assert_eq!(srv.seen().len(), before + 1);
    assert_eq!(listing(&fx.root.downloads_path()), ["0"]);
}

#[test]
fn a_name_that_changes_its_answer_cannot_move_the_connection() {
    let fx = Fixture::new();
    let real = Server::https(LOOPBACK, |seen| match seen.path.as_str() {
        "/again" => Reply::redirect("/file"),
        _ => Reply::ok(b"from the checked address", "text/plain"),
    });
    // The address the name changes to, on the same port: never admitted.
    let victim = Server::https_at(SocketAddr::new(LOOPBACK_2, real.port()), |_| {
        Reply::ok(b"from the rebound address", "text/plain")
    });
    let lane = DownloadLane::open(&fx.root).unwrap();

    // Checked once, connected there: the client never asks again, so the second answer is
    // never used.
    let names = Names::default()
        .answer("rebind.test", &[LOOPBACK])
        .answer("rebind.test", &[LOOPBACK_2]);
    let fetcher = fetcher(&[&real], FetchPolicy::default(), &names);
    let url = format!("https://rebind.test:{}/file", real.port());
    let fetched = fetcher.fetch(&lane, &url, None).unwrap();
    assert_eq!(
        std::fs::read(&fetched.saved.path).unwrap(),
        b"from the checked address"
    );
    assert_eq!(names.asked(), ["rebind.test"]);
    assert_eq!(real.connections(), 1);

    // A redirect to the same name is looked up again, and the new answer is judged.
    let names = Names::default()
        .answer("rebind.test", &[LOOPBACK])
        .answer("rebind.test", &[LOOPBACK_2]);
    let fetcher = fetcher_with(&real, &names);
    let url = format!("https://rebind.test:{}/again", real.port());
    let e = fetcher.fetch(&lane, &url, None).unwrap_err();
    assert_eq!(e.code(), Code::AddressRefused, "{e}");
    assert!(e.to_string().contains("127.0.0.2"), "{e}");
    assert_eq!(names.asked(), ["rebind.test", "rebind.test"]);

    // A name with one refused address among admitted ones is refused whole.
    let names = Names::default().answer("mixed.test", &[LOOPBACK, LOOPBACK_2]);
    let fetcher = fetcher_with(&real, &names);
    let url = format!("https://mixed.test:{}/file", real.port());
    let e = fetcher.fetch(&lane, &url, None).unwrap_err();
    assert_eq!(e.code(), Code::AddressRefused, "{e}");

    assert_eq!(real.connections(), 2);
    assert_eq!(victim.connections(), 0);
    assert_eq!(listing(&fx.root.downloads_path()), ["file"]);
}

/// A fetcher for `srv` with `names`.
fn fetcher_with(srv: &Server, names: &Names) -> Fetcher {
    fetcher(&[srv], FetchPolicy::default(), names)
}

#[test]
fn hosts_spelled_as_numbers_are_refused_as_written_and_mapped_answers_as_resolved() {
    let fx = Fixture::new();
    let srv = Server::https(LOOPBACK, |_| Reply::ok(b"reached", "text/plain"));
    let lane = DownloadLane::open(&fx.root).unwrap();
    let names = Names::default()
        .answer("mapped.test", &["::ffff:127.0.0.1".parse().unwrap()])
        .answer("hex-mapped.test", &["::ffff:7f00:1".parse().unwrap()])
        .answer("nat64.test", &["64:ff9b::7f00:1".parse().unwrap()]);
    // The allowance admits 127.0.0.1 on this port: each spelling below means that very
    // address to some client, and is refused for its spelling alone.
    let fetcher = fetcher(&[&srv], FetchPolicy::default(), &names);
    let p = srv.port();
    for host in [
        "2130706433",
        "0177.0.0.1",
        "0x7f.1",
        "0x7f000001",
        "0x7F.0.0.1",
        "127.1",
        "127.0.1",
        "017700000001",
        "127.000.000.001",
        "127.0.0.1.",
    ] {
        let url = format!("https://{host}:{p}/file");
        let e = fetcher.fetch(&lane, &url, None).unwrap_err();
        assert_eq!(e.code(), Code::AddressRefused, "{host}: {e}");
        assert!(e.to_string().contains("number"), "{host}: {e}");
    }
    assert!(names.asked().is_empty());
    // The same address as an answer, in IPv6 forms: judged as the IPv4 address it reaches
    // (the allowance is for 127.0.0.1 itself, not for these).
    for host in ["mapped.test", "hex-mapped.test", "nat64.test"] {
        let url = format!("https://{host}:{p}/file");
        let e = fetcher.fetch(&lane, &url, None).unwrap_err();
        assert_eq!(e.code(), Code::AddressRefused, "{host}: {e}");
        assert!(e.to_string().contains("loopback"), "{host}: {e}");
    }
    assert_eq!(srv.connections(), 0);
    // Written in dotted decimal, the admitted address is reached.
    let fetched = fetcher
        .fetch(&lane, &format!("https://127.0.0.1:{p}/file"), None)
        .unwrap();
    assert_eq!(std::fs::read(&fetched.saved.path).unwrap(), b"reached");
}

#[test]
fn the_url_rules_refuse_before_anything_is_looked_up() {
    let names = usual();
    let fetcher = Fetcher::new(FetchPolicy::default())
        .unwrap()
        .with_lookup(names.clone());
    let guard = fetcher.guard();
    let cases: &[(&str, Code)] = &[
        ("http://files.test/", Code::AddressRefused),
        ("ftp://files.test/x", Code::AddressRefused),
        ("file:///etc/passwd", Code::AddressRefused),
        ("gopher://files.test:70/", Code::AddressRefused),
        ("javascript:alert(1)", Code::AddressRefused),
        ("https://user@files.test/", Code::AddressRefused),
        ("https://user:secret@files.test/", Code::AddressRefused),
        ("https://@files.test/", Code::AddressRefused),
        ("https://files.test:0/", Code::AddressRefused),
        ("https://files.test:65536/", Code::AddressRefused),
        ("https://[fe80::1%25eth0]/", Code::AddressRefused),
        ("https://ho!st.test/", Code::AddressRefused),
        ("https://a..b/", Code::AddressRefused),
        ("https://example.123/", Code::AddressRefused),
        ("not a url", Code::InvalidArgument),
        ("/relative/path", Code::InvalidArgument),
        ("//files.test/x", Code::InvalidArgument),
        ("", Code::InvalidArgument),
    ];
    for (url, code) in cases {
        let e = guard.admit(url).unwrap_err();
        assert_eq!(e.code(), *code, "{url}: {e}");
    }
    let long = format!("https://files.test/{}", "a".repeat(9000));
    assert_eq!(
        guard.admit(&long).unwrap_err().code(),
        Code::InvalidArgument
    );
    assert!(names.asked().is_empty());
    // The system's resolver is judged like any other: `localhost` is loopback.
    let system = Fetcher::new(FetchPolicy::default()).unwrap();
    let e = system.guard().admit("https://localhost/").unwrap_err();
    assert_eq!(e.code(), Code::AddressRefused, "{e}");
    assert!(e.to_string().contains("loopback"), "{e}");
    // Without the test allowance, the loopback address itself is refused.
    let e = system.guard().admit("https://127.0.0.1:8443/").unwrap_err();
    assert_eq!(e.code(), Code::AddressRefused, "{e}");
    // A public address is admitted (nothing connects here: `admit` only judges).
    let admitted = system.guard().admit("https://93.184.215.14/").unwrap();
    assert_eq!(
        admitted,
        ["93.184.215.14:443".parse::<SocketAddr>().unwrap()]
    );
}

#[test]
fn the_address_rules_hold_for_every_range() {
    let refused = [
        "0.0.0.0",
        "0.1.2.3",
        "10.0.0.1",
        "10.255.255.255",
        "100.64.0.1",
        "100.127.255.254",
        "100.100.100.200",
        "127.0.0.1",
        "127.255.255.254",
        "169.254.0.1",
        "169.254.169.254",
        "169.254.170.2",
        "168.63.129.16",
        "172.16.0.1",
        "172.31.255.255",
        "192.0.0.170",
        "192.0.2.1",
        "192.88.99.1",
        "192.168.0.1",
        "198.18.0.1",
        "198.19.255.255",
        "198.51.100.1",
        "203.0.113.1",
        "224.0.0.1",
        "239.255.255.250",
        "240.0.0.1",
        "255.255.255.255",
        "::",
        "::1",
        "::127.0.0.1",
        "::8.8.8.8",
        "::ffff:127.0.0.1",
        "::ffff:10.0.0.1",
        "::ffff:169.254.169.254",
        "::ffff:0:7f00:1",
        "64:ff9b::7f00:1",
        "64:ff9b::a9fe:a9fe",
        "64:ff9b:1::1",
        "100::1",
        "2001::1",
        "2001:db8::1",
        "2002:7f00:1::1",
        "3fff::1",
        "fc00::1",
        "fd00:ec2::254",
        "fd12:3456::1",
        "fe80::1",
        "fec0::1",
        "ff02::1",
        "4000::1",
    ];
    for ip in refused {
        let parsed: IpAddr = ip.parse().unwrap();
        assert!(address_refusal(parsed).is_some(), "{ip} is admitted");
    }
    let admitted = [
        "1.1.1.1",
        "8.8.8.8",
        "93.184.215.14",
        "100.63.255.255",
        "100.128.0.1",
        "172.15.255.255",
        "172.32.0.1",
        "192.0.1.1",
        "192.169.0.1",
        "198.17.255.255",
        "198.20.0.1",
        "223.255.255.255",
        "::ffff:8.8.8.8",
        "64:ff9b::808:808",
        "2606:4700:4700::1111",
        "2a00:1450:4001::200e",
    ];
    for ip in admitted {
        let parsed: IpAddr = ip.parse().unwrap();
        assert_eq!(address_refusal(parsed), None, "{ip}");
    }
    let why = address_refusal("169.254.169.254".parse().unwrap()).unwrap();
    assert!(why.contains("metadata"), "{why}");
    let why = address_refusal("::ffff:127.0.0.1".parse().unwrap()).unwrap();
    assert!(
        why.contains("IPv4-mapped") && why.contains("loopback"),
        "{why}"
    );
}

#[test]
fn plain_http_is_refused_unless_the_human_allows_it() {
    let fx = Fixture::new();
    let plain = Server::http(LOOPBACK, |_| Reply::ok(b"plain", "text/plain"));
    let secure = Server::https(LOOPBACK, move |seen| {
        Reply::redirect(&format!(
            "http://files.test:{}/down",
            seen.path.trim_start_matches('/')
        ))
    });
    let lane = DownloadLane::open(&fx.root).unwrap();
    let url = format!("http://files.test:{}/file.txt", plain.port());
    let downgrade = format!("https://files.test:{}/{}", secure.port(), plain.port());

    let https_only = fetcher(&[&plain, &secure], FetchPolicy::default(), &usual());
    let e = https_only.fetch(&lane, &url, None).unwrap_err();
    assert_eq!(e.code(), Code::AddressRefused, "{e}");
    assert!(e.to_string().contains("http"), "{e}");
    // Nor is an https fetch redirected down to http.
    let e = https_only.fetch(&lane, &downgrade, None).unwrap_err();
    assert_eq!(e.code(), Code::AddressRefused, "{e}");
    assert_eq!(plain.connections(), 0);
    assert_lane_empty(&fx);

    let mut allowed = FetchPolicy::default();
    allowed.allow_http = true;
    let with_http = fetcher(&[&plain, &secure], allowed, &usual());
    let fetched = with_http.fetch(&lane, &url, None).unwrap();
    assert_eq!(std::fs::read(&fetched.saved.path).unwrap(), b"plain");
    let fetched = with_http.fetch(&lane, &downgrade, None).unwrap();
    assert_eq!(
        fetched.url,
        format!("http://files.test:{}/down", plain.port())
    );
}

#[test]
fn the_host_allowlist_narrows_what_is_fetched_and_never_admits_a_refused_address() {
    let fx = Fixture::new();
    let srv = Server::https(LOOPBACK, |_| Reply::ok(b"ok", "text/plain"));
    let lane = DownloadLane::open(&fx.root).unwrap();
    let p = srv.port();
    let names = usual().answer("inner.test", &[IpAddr::V4(Ipv4Addr::new(10, 1, 2, 3))]);
    let with_hosts = |hosts: &[&str]| {
        let mut policy = FetchPolicy::default();
        policy.hosts = Some(hosts.iter().map(|h| (*h).to_owned()).collect());
        fetcher(&[&srv], policy, &names)
    };

    let exact = with_hosts(&["FILES.test."]);
    exact
        .fetch(&lane, &format!("https://files.test:{p}/a"), None)
        .unwrap();
    let e = exact
        .fetch(&lane, &format!("https://other.test:{p}/b"), None)
        .unwrap_err();
    assert_eq!(e.code(), Code::AddressRefused, "{e}");
    assert!(e.to_string().contains("list of hosts"), "{e}");

    let below = with_hosts(&["*.test"]);
    below
        .fetch(&lane, &format!("https://other.test:{p}/c"), None)
        .unwrap();
    // On the list, and still refused for its address.
    let listed = with_hosts(&["inner.test"]);
    let e = listed.guard().admit("https://inner.test/").unwrap_err();
    assert_eq!(e.code(), Code::AddressRefused, "{e}");
    assert!(e.to_string().contains("10.1.2.3"), "{e}");

    assert_eq!(srv.connections(), 2);
    assert_eq!(listing(&fx.root.downloads_path()), ["a", "c"]);

    let mut bad = FetchPolicy::default();
    bad.hosts = Some(vec!["files.test/path".to_owned()]);
    assert_eq!(Fetcher::new(bad).unwrap_err().code(), Code::InvalidArgument);
}

#[test]
fn past_the_size_cap_the_fetch_is_too_large_and_nothing_is_left() {
    let fx = Fixture::new();
    let srv = Server::https(LOOPBACK, |seen| match seen.path.as_str() {
        "/announced" => Reply::ok(&[b'a'; 4096], "application/octet-stream"),
        "/streamed" => Reply::Chunked(vec![b's'; 4096]),
        _ => Reply::Chunked(vec![b'e'; 1024]),
    });
    let p = srv.port();
    for lane in [
        DownloadLane::open(&fx.root).unwrap().with_max_bytes(1024),
        DownloadLane::open(&fx.root)
            .unwrap()
            .with_max_bytes(1024)
            .with_hidden_staging(),
    ] {
        let fetcher = fetcher_for(&srv, FetchPolicy::default());
        for path in ["/announced", "/streamed"] {
            let e = fetcher
                .fetch(&lane, &format!("https://files.test:{p}{path}"), None)
                .unwrap_err();
            assert_eq!(e.code(), Code::TooLarge, "{path}: {e}");
            assert_lane_empty(&fx);
        }
    }
    let refusals = events(&fx);
    assert_eq!(refusals, vec!["download.fetch.refused"; 4]);
    // Exactly the cap fits.
    let lane = DownloadLane::open(&fx.root).unwrap().with_max_bytes(1024);
    let fetched = fetcher_for(&srv, FetchPolicy::default())
        .fetch(&lane, &format!("https://files.test:{p}/exact"), None)
        .unwrap();
    assert_eq!(fetched.saved.bytes, 1024);
}

#[test]
fn an_error_status_is_fetch_failed_recorded_and_saves_nothing() {
    let fx = Fixture::new();
    let srv = Server::https(LOOPBACK, |seen| {
        if seen.path.starts_with("/missing?") {
            Reply::status(404)
        } else {
            Reply::status(500)
        }
    });
    let lane = DownloadLane::open(&fx.root).unwrap();
    let fetcher = fetcher_for(&srv, FetchPolicy::default());
    // What a URL carries out is on the record whole, however long.
    let carried = "d".repeat(2000);
    let mut urls = Vec::new();
    for (path, status) in [("/broken", "500"), ("/missing", "404")] {
        let url = format!("https://files.test:{}{path}?data={carried}", srv.port());
        let e = fetcher.fetch(&lane, &url, None).unwrap_err();
        assert_eq!(e.code(), Code::FetchFailed, "{e}");
        assert!(!e.code().is_refusal());
        assert!(e.to_string().contains(status), "{e}");
        urls.push(url);
    }
    assert_lane_empty(&fx);
    let records = records(&fx);
    assert_eq!(records.len(), 2);
    for (record, url) in records.iter().zip(&urls) {
        assert_eq!(record["event"], "download.fetch.failed");
        assert_eq!(record["code"], "fetch_failed");
        assert_eq!(record["url"], url.as_str());
        assert!(record["subject"].as_str().unwrap().len() < url.len());
    }
}

#[test]
fn the_certificate_is_checked_against_the_host_name() {
    let fx = Fixture::new();
    let srv = Server::https(LOOPBACK, |_| Reply::ok(b"ok", "text/plain"));
    let lane = DownloadLane::open(&fx.root).unwrap();
    // The server's certificate names `files.test`, not this name: same address, same port.
    let names = usual().answer("unlisted.test", &[LOOPBACK]);
    let fetcher = fetcher(&[&srv], FetchPolicy::default(), &names);
    let url = format!("https://unlisted.test:{}/file", srv.port());
    let e = fetcher.fetch(&lane, &url, None).unwrap_err();
    assert_eq!(e.code(), Code::FetchFailed, "{e}");
    assert!(e.to_string().to_lowercase().contains("certificate"), "{e}");
    assert_lane_empty(&fx);
    let ok = format!("https://files.test:{}/file", srv.port());
    fetcher.fetch(&lane, &ok, None).unwrap();
}

#[test]
fn one_fetcher_serves_many_threads_at_once() {
    fn shared<T: Send + Sync>(_: &T) {}
    let fx = Fixture::new();
    let srv = Server::https(LOOPBACK, |seen| {
        Reply::ok(seen.path.as_bytes(), "text/plain")
    });
    let lane = DownloadLane::open(&fx.root).unwrap();
    let fetcher = fetcher_for(&srv, FetchPolicy::default());
    shared(&fetcher);
    std::thread::scope(|scope| {
        for i in 0..4 {
            let (lane, fetcher, port) = (&lane, &fetcher, srv.port());
            scope.spawn(move || {
                let url = format!("https://files.test:{port}/same.txt?{i}");
                let fetched = fetcher.fetch(lane, &url, None).unwrap();
                let body = std::fs::read(&fetched.saved.path).unwrap();
                assert_eq!(body, format!("/same.txt?{i}").as_bytes());
            });
        }
    });
    assert_eq!(
        listing(&fx.root.downloads_path()),
        ["same (1).txt", "same (2).txt", "same (3).txt", "same.txt"]
    );
    assert_eq!(events(&fx), vec!["download.fetch"; 4]);
}

#[test]
fn a_transfer_cut_mid_body_is_fetch_failed_and_leaves_nothing() {
    let fx = Fixture::new();
    let srv = Server::https(LOOPBACK, |_| Reply::Cut {
        announced: 100_000,
        sent: 5_000,
    });
    let fetcher = fetcher_for(&srv, FetchPolicy::default());
    for lane in [
        DownloadLane::open(&fx.root).unwrap(),
        DownloadLane::open(&fx.root).unwrap().with_hidden_staging(),
    ] {
        let url = format!("https://files.test:{}/big.iso", srv.port());
        let e = fetcher.fetch(&lane, &url, None).unwrap_err();
        assert_eq!(e.code(), Code::FetchFailed, "{e}");
        assert!(e.to_string().contains("transfer broke"), "{e}");
        assert_lane_empty(&fx);
    }
    assert_eq!(
        events(&fx),
        ["download.fetch.failed", "download.fetch.failed"]
    );
}

#[test]
fn a_stalled_transfer_and_a_silent_server_time_out_as_fetch_failed() {
    let fx = Fixture::new();
    let stalled = Server::https(LOOPBACK, |_| Reply::Stall);
    let silent = Server::silent(LOOPBACK);
    let lane = DownloadLane::open(&fx.root).unwrap();
    let mut policy = FetchPolicy::default();
    policy.timeout = Duration::from_secs(1);
    policy.connect_timeout = Duration::from_secs(1);
    let fetcher = fetcher(&[&stalled, &silent], policy, &usual());
    // The stalled server holds its answer for ten seconds, the silent one its handshake for
    // five: ending well before either shows the timeout ended the fetch.
    for srv in [&stalled, &silent] {
        let url = format!("https://files.test:{}/slow", srv.port());
        let started = Instant::now();
        let e = fetcher.fetch(&lane, &url, None).unwrap_err();
        assert_eq!(e.code(), Code::FetchFailed, "{e}");
        assert!(started.elapsed() < Duration::from_secs(4), "{e}");
        assert!(e.to_string().contains("timed out"), "{e}");
    }
    assert_lane_empty(&fx);
}

#[test]
fn the_test_allowance_admits_only_loopback_addresses() {
    for outside in ["10.0.0.1:443", "93.184.215.14:443", "[fd00::1]:443"] {
        let addr: SocketAddr = outside.parse().unwrap();
        let e = LoopbackForTests::new(&[addr], Vec::new()).unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{outside}");
    }
    assert!(LoopbackForTests::new(&["[::1]:8443".parse().unwrap()], Vec::new()).is_ok());
}

#[test]
fn no_adapter_reaches_the_test_allowance() {
    let workspace = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut sources = Vec::new();
    for krate in ["safe-lanes-mcp", "safe-lanes-cli", "safe-lanes-ui"] {
        collect_rust(&workspace.join(krate).join("src"), &mut sources);
    }
    assert!(sources.len() > 10, "{sources:?}");
    for file in sources {
        let text = std::fs::read_to_string(&file).unwrap();
        for name in ["LoopbackForTests", "new_with_loopback_for_tests"] {
            assert!(!text.contains(name), "{} mentions {name}", file.display());
        }
    }
}

/// Every `.rs` file under `dir`.
fn collect_rust(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            collect_rust(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn the_fetch_codes_are_stable_and_only_the_guards_is_a_refusal() {
    assert_eq!(Code::AddressRefused.as_str(), "address_refused");
    assert_eq!(Code::FetchFailed.as_str(), "fetch_failed");
    assert!(Code::ALL.contains(&Code::AddressRefused));
    assert!(Code::ALL.contains(&Code::FetchFailed));
    // The CLI exits with 3 for a refusal and 1 for the others (`io`, `fetch_failed`).
    assert!(Code::AddressRefused.is_refusal());
    assert!(!Code::FetchFailed.is_refusal());
    assert!(!Code::Io.is_refusal());
    assert_eq!(
        serde_json::to_value(Code::FetchFailed).unwrap(),
        "fetch_failed"
    );
}
