//! A stand-in for the XDG desktop portal's folder dialog, on a private session bus.
//!
//! [`Portal::start`] runs a `dbus-daemon` of its own (a private session bus at a socket in a
//! temporary folder) and, on it, a service that owns `org.freedesktop.portal.Desktop` and
//! answers `org.freedesktop.portal.FileChooser.OpenFile` the way the real portal does: it
//! returns the request object's path and then emits that request's `Response` signal — with
//! the folder it was told to answer, or as cancelled. Each call's title and options are kept
//! for the test to check. [`Portal::without_portal`] is the same bus with nothing on it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use zbus::zvariant::{OwnedObjectPath, OwnedValue, Value};

/// What the stand-in answers.
#[derive(Clone, Debug)]
pub enum Answer {
    /// This folder (sent as a `file://` URI, percent-encoded).
    Folder(PathBuf),
    /// The human closed the dialog.
    Cancelled,
}

/// One `OpenFile` call the stand-in answered.
#[derive(Clone, Debug)]
pub struct Asked {
    /// The dialog's title.
    pub title: String,
    /// Whether a folder was asked for (`directory`).
    pub directory: bool,
    /// Whether several could be chosen (`multiple`).
    pub multiple: bool,
}

/// A private session bus, with the stand-in portal on it or not.
#[derive(Debug)]
pub struct Portal {
    daemon: Child,
    address: String,
    asked: Arc<Mutex<Vec<Asked>>>,
    runtime: Option<tokio::runtime::Runtime>,
    _dir: tempfile::TempDir,
}

struct FileChooser {
    answer: Answer,
    asked: Arc<Mutex<Vec<Asked>>>,
}

#[zbus::interface(name = "org.freedesktop.portal.FileChooser")]
impl FileChooser {
    async fn open_file(
        &self,
        #[zbus(header)] header: zbus::message::Header<'_>,
        #[zbus(connection)] connection: &zbus::Connection,
        _parent_window: &str,
        title: &str,
        options: HashMap<String, OwnedValue>,
    ) -> zbus::fdo::Result<OwnedObjectPath> {
        let flag = |key: &str| {
            options
                .get(key)
                .and_then(|v| bool::try_from(v.clone()).ok())
                .unwrap_or(false)
        };
        self.asked.lock().unwrap().push(Asked {
            title: title.to_owned(),
            directory: flag("directory"),
            multiple: flag("multiple"),
        });
        let token = options
            .get("handle_token")
            .and_then(|v| String::try_from(v.clone()).ok())
            .ok_or_else(|| zbus::fdo::Error::InvalidArgs("no handle_token".into()))?;
        let sender = header
            .sender()
            .ok_or_else(|| zbus::fdo::Error::Failed("no sender".into()))?
            .to_string();
        let path = format!(
            "/org/freedesktop/portal/desktop/request/{}/{token}",
            sender.trim_start_matches(':').replace('.', "_")
        );
        let (code, uris): (u32, Vec<String>) = match &self.answer {
            Answer::Folder(folder) => (0, vec![file_uri(folder)]),
            Answer::Cancelled => (1, vec![]),
        };
        let connection = connection.clone();
        let emitted = path.clone();
        // After the reply, as the portal does: the caller listens before it asks.
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            let mut results: HashMap<&str, Value<'_>> = HashMap::new();
            results.insert("uris", Value::from(uris));
            let _ = connection
                .emit_signal(
                    Some(sender.as_str()),
                    emitted.as_str(),
                    "org.freedesktop.portal.Request",
                    "Response",
                    &(code, results),
                )
                .await;
        });
        OwnedObjectPath::try_from(path).map_err(|e| zbus::fdo::Error::Failed(e.to_string()))
    }

    #[zbus(property)]
    fn version(&self) -> u32 {
        4
    }
}

/// `folder` as a `file://` URI, every byte but unreserved ones percent-encoded.
fn file_uri(folder: &Path) -> String {
    let mut uri = String::from("file://");
    for &b in folder.as_os_str().as_encoded_bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~".contains(&b) {
            uri.push(char::from(b));
        } else {
            uri.push_str(&format!("%{b:02X}"));
        }
    }
    uri
}

impl Portal {
    /// A private session bus with the stand-in portal on it, answering `answer`.
    ///
    /// # Panics
    ///
    /// When `dbus-daemon` is missing (the suite installs it) or the bus does not start.
    pub fn start(answer: Answer) -> Self {
        let mut portal = Self::without_portal();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let chooser = FileChooser {
            answer,
            asked: Arc::clone(&portal.asked),
        };
        let address = portal.address.clone();
        let served = runtime.block_on(async move {
            zbus::connection::Builder::address(address.as_str())?
                .name("org.freedesktop.portal.Desktop")?
                .serve_at("/org/freedesktop/portal/desktop", chooser)?
                .build()
                .await
        });
        let connection = served.expect("serve the stand-in portal");
        // The connection lives as long as the runtime that drives it.
        runtime.spawn(async move {
            let _keep = connection;
            std::future::pending::<()>().await;
        });
        portal.runtime = Some(runtime);
        portal
    }

    /// A private session bus with no portal on it.
    ///
    /// # Panics
    ///
    /// As [`Portal::start`].
    pub fn without_portal() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("bus");
        let address = format!("unix:path={}", socket.display());
        let daemon = Command::new("dbus-daemon")
            .args(["--session", "--nofork", "--nopidfile", "--address"])
            .arg(&address)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("dbus-daemon is missing: apt-get install --no-install-recommends dbus-daemon");
        let deadline = Instant::now() + Duration::from_secs(10);
        while !socket.exists() {
            assert!(Instant::now() < deadline, "dbus-daemon did not start");
            std::thread::sleep(Duration::from_millis(10));
        }
        Self {
            daemon,
            address,
            asked: Arc::default(),
            runtime: None,
            _dir: dir,
        }
    }

    /// The bus's D-Bus address (`DBUS_SESSION_BUS_ADDRESS`).
    pub fn address(&self) -> &str {
        &self.address
    }

    /// The dialogs asked for so far.
    pub fn asked(&self) -> Vec<Asked> {
        self.asked.lock().unwrap().clone()
    }
}

impl Drop for Portal {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
        let _ = self.daemon.kill();
        let _ = self.daemon.wait();
    }
}
