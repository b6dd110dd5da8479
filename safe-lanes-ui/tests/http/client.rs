//! A page served in this process, and a raw HTTP/1.1 client: the tests write every header
//! themselves, hostile ones included, so nothing is added or fixed up on the way.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;
use std::time::Duration;

use safe_lanes::{Grants, StateRoot};
use safe_lanes_ui::{Options, Ui};

/// One response.
#[derive(Debug)]
pub(crate) struct Response {
    pub(crate) status: u16,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: String,
}

impl Response {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Send `head` (request line and headers, without the blank line) and `body`.
pub(crate) fn send(address: SocketAddr, head: &str, body: &str) -> Response {
    let mut stream = TcpStream::connect(address).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let request = format!(
        "{head}\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    parse(&String::from_utf8_lossy(&raw))
}

fn parse(raw: &str) -> Response {
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((raw, ""));
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {raw:?}"));
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned()))
        .collect();
    Response {
        status,
        headers,
        body: body.to_owned(),
    }
}

/// A state root with a page served for it on a thread of its own.
pub(crate) struct Page {
    pub(crate) tmp: tempfile::TempDir,
    pub(crate) address: SocketAddr,
    pub(crate) url: String,
    pub(crate) actor: String,
    pub(crate) server: Option<JoinHandle<std::io::Result<()>>>,
}

impl Page {
    pub(crate) fn new() -> Self {
        Self::with_idle(Duration::from_secs(600))
    }

    pub(crate) fn with_idle(idle: Duration) -> Self {
        Self::with(idle, safe_lanes_ui::desktop::DesktopBus::Off)
    }

    /// A page whose "Choose folder…" looks for the desktop's dialog on `desktop`.
    pub(crate) fn with_desktop(desktop: safe_lanes_ui::desktop::DesktopBus) -> Self {
        Self::with(Duration::from_secs(600), desktop)
    }

    fn with(idle: Duration, desktop: safe_lanes_ui::desktop::DesktopBus) -> Self {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("home")).unwrap();
        let root = StateRoot::init(&tmp.path().join("state")).unwrap();
        let actor = "uid:4242 (page test)".to_owned();
        let options = Options {
            manifest: None,
            port: 0,
            idle,
            actor: actor.clone(),
            start: Some(tmp.path().join("home")),
            desktop,
        };
        let ui = Ui::bind(root, options).unwrap();
        let (address, url) = (ui.address(), ui.sign_in_url());
        let server = Some(std::thread::spawn(move || ui.run()));
        Self {
            tmp,
            address,
            url,
            actor,
            server,
        }
    }

    pub(crate) fn host(&self) -> String {
        self.address.to_string()
    }

    pub(crate) fn origin(&self) -> String {
        format!("http://{}", self.address)
    }

    /// The path and query of the sign-in link.
    pub(crate) fn sign_in_target(&self) -> String {
        self.url.trim_start_matches(&self.origin()).to_owned()
    }

    /// `GET target` with the right `Host` and `extra` header lines.
    pub(crate) fn get(&self, target: &str, extra: &str) -> Response {
        let head = format!("GET {target} HTTP/1.1\r\nHost: {}{extra}", self.host());
        send(self.address, &head, "")
    }

    /// Sign in: the session cookie's `name=value`.
    pub(crate) fn sign_in(&self) -> String {
        let response = self.get(&self.sign_in_target(), "");
        assert_eq!(response.status, 303, "{response:?}");
        let cookie = response.header("set-cookie").expect("a session cookie");
        cookie.split(';').next().unwrap().to_owned()
    }

    /// The CSRF token of the overview's forms.
    pub(crate) fn csrf(&self, cookie: &str) -> String {
        let page = self.get("/", &format!("\r\nCookie: {cookie}"));
        assert_eq!(page.status, 200, "{page:?}");
        let at = page.body.find("name=\"csrf\" value=\"").expect("a form") + 19;
        page.body[at..].split('"').next().unwrap().to_owned()
    }

    /// `POST target` of a form, from the page's own origin.
    pub(crate) fn post(&self, target: &str, cookie: &str, form: &[(&str, &str)]) -> Response {
        let extra = format!("\r\nOrigin: {}\r\nCookie: {cookie}", self.origin());
        self.post_with(target, &extra, form)
    }

    /// `POST target` of a form with the right `Host` and `extra` header lines.
    pub(crate) fn post_with(&self, target: &str, extra: &str, form: &[(&str, &str)]) -> Response {
        let body = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(form)
            .finish();
        let head = format!(
            "POST {target} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/x-www-form-urlencoded{extra}",
            self.host()
        );
        send(self.address, &head, &body)
    }

    pub(crate) fn root(&self) -> PathBuf {
        self.tmp.path().join("state")
    }

    pub(crate) fn grants(&self) -> Grants {
        Grants::open(&StateRoot::open(&self.root()).unwrap(), None).unwrap()
    }

    /// A new folder under the test's directory.
    pub(crate) fn folder(&self, name: &str) -> PathBuf {
        let path = self.tmp.path().join("home").join(name);
        std::fs::create_dir_all(&path).unwrap();
        path
    }

    /// Every audit record.
    pub(crate) fn audit(&self) -> Vec<serde_json::Value> {
        let root = StateRoot::open(&self.root()).unwrap();
        let text = std::fs::read_to_string(root.audit().path()).unwrap();
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

pub(crate) fn path_str(p: &Path) -> &str {
    p.to_str().unwrap()
}
