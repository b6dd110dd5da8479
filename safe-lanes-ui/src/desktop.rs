//! The desktop's own folder dialog, where the session offers one.
//!
//! The dialog is the XDG desktop portal's `org.freedesktop.portal.FileChooser.OpenFile` on the
//! session bus, asked for one directory: the portal shows the desktop's own chooser (GNOME's,
//! KDE's …) and answers with the folder's `file://` URI in the `Response` signal of a request
//! object whose path the caller knows before it asks (its unique name and a handle token), so
//! the answer cannot be missed. Where there is no session bus, no portal on it, or the portal
//! fails, the caller falls back to the page's own picker (`/pick`), and `grant add --pick`
//! says so.
//!
//! The folder chosen is only a path the human pointed at: it goes through every check a typed
//! `--path` goes through, so nothing about the dialog is trusted beyond that.

#[cfg(target_os = "linux")]
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Which session bus to find the portal on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum DesktopBus {
    /// The session's bus, as the environment names it (`DBUS_SESSION_BUS_ADDRESS`, else
    /// `$XDG_RUNTIME_DIR/bus`).
    #[default]
    Session,
    /// The bus at this D-Bus address.
    At(String),
    /// None: the page's picker only.
    Off,
}

/// How asking the desktop for a folder ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Dialog {
    /// The human chose this folder.
    Chosen(PathBuf),
    /// The human closed the dialog without choosing.
    Cancelled,
    /// No desktop dialog here, and why (no session bus, no portal on it, an error).
    Unavailable(String),
}

/// The portal's well-known name, object and interfaces.
#[cfg(target_os = "linux")]
const PORTAL: &str = "org.freedesktop.portal.Desktop";
#[cfg(target_os = "linux")]
const PORTAL_PATH: &str = "/org/freedesktop/portal/desktop";
#[cfg(target_os = "linux")]
const FILE_CHOOSER: &str = "org.freedesktop.portal.FileChooser";
#[cfg(target_os = "linux")]
const REQUEST: &str = "org.freedesktop.portal.Request";

/// Ask the desktop on `bus` for one folder, with the dialog titled `title` and opened in
/// `start` when given.
pub async fn choose_folder(bus: &DesktopBus, title: &str, start: Option<&Path>) -> Dialog {
    match ask(bus, title, start).await {
        Ok(dialog) => dialog,
        Err(why) => Dialog::Unavailable(why),
    }
}

/// [`choose_folder`] for a caller without an asynchronous runtime (the command line).
pub fn choose_folder_blocking(bus: &DesktopBus, title: &str, start: Option<&Path>) -> Dialog {
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime.block_on(choose_folder(bus, title, start)),
        Err(e) => Dialog::Unavailable(format!("no runtime to ask the desktop with: {e}")),
    }
}

/// Elsewhere than Linux, no portal is looked for: the page's picker.
#[cfg(not(target_os = "linux"))]
async fn ask(_: &DesktopBus, _: &str, _: Option<&Path>) -> Result<Dialog, String> {
    Err(format!("no desktop portal on {}", std::env::consts::OS))
}

#[cfg(target_os = "linux")]
async fn ask(bus: &DesktopBus, title: &str, start: Option<&Path>) -> Result<Dialog, String> {
    use futures::StreamExt as _;
    use zbus::zvariant::{OwnedObjectPath, OwnedValue, Value};

    let connection = match bus {
        DesktopBus::Off => return Err("the desktop's dialog is off".into()),
        DesktopBus::Session => zbus::Connection::session().await,
        DesktopBus::At(address) => match zbus::connection::Builder::address(address.as_str()) {
            Ok(builder) => builder.build().await,
            Err(e) => Err(e),
        },
    }
    .map_err(|e| format!("no desktop session bus ({e})"))?;
    let dbus = zbus::fdo::DBusProxy::new(&connection)
        .await
        .map_err(|e| format!("the session bus does not answer ({e})"))?;
    let name = zbus::names::BusName::try_from(PORTAL).map_err(|e| e.to_string())?;
    let running = dbus.name_has_owner(name.clone()).await.unwrap_or(false);
    let startable = || async {
        dbus.list_activatable_names()
            .await
            .is_ok_and(|names| names.iter().any(|n| n.as_str() == PORTAL))
    };
    if !running && !startable().await {
        return Err("no desktop portal on the session bus".into());
    }
    let unique = connection
        .unique_name()
        .ok_or("no name on the session bus")?
        .trim_start_matches(':')
        .replace('.', "_");
    let token = format!("safe_lanes_{}", std::process::id());
    let request_path = format!("{PORTAL_PATH}/request/{unique}/{token}");
    let request = zbus::Proxy::new(&connection, PORTAL, request_path.as_str(), REQUEST)
        .await
        .map_err(|e| e.to_string())?;
    // Listened to before asking, so that an answer that comes at once is not lost.
    let mut responses = request
        .receive_signal("Response")
        .await
        .map_err(|e| e.to_string())?;
    let chooser = zbus::Proxy::new(&connection, PORTAL, PORTAL_PATH, FILE_CHOOSER)
        .await
        .map_err(|e| e.to_string())?;
    let mut options: HashMap<&str, Value<'_>> = HashMap::new();
    options.insert("handle_token", Value::from(token.as_str()));
    options.insert("directory", Value::from(true));
    options.insert("multiple", Value::from(false));
    options.insert("modal", Value::from(true));
    options.insert("accept_label", Value::from("Grant"));
    let start_bytes = start.map(|p| {
        let mut bytes = p.as_os_str().as_encoded_bytes().to_vec();
        bytes.push(0);
        bytes
    });
    if let Some(bytes) = &start_bytes {
        options.insert("current_folder", Value::from(bytes.as_slice()));
    }
    let _: OwnedObjectPath = chooser
        .call("OpenFile", &("", title, options))
        .await
        .map_err(|e| format!("the desktop portal refused the dialog ({e})"))?;
    let answer = responses
        .next()
        .await
        .ok_or("the desktop portal went away before answering")?;
    let (code, results): (u32, HashMap<String, OwnedValue>) = answer
        .body()
        .deserialize()
        .map_err(|e| format!("the desktop portal's answer is malformed ({e})"))?;
    match code {
        0 => {}
        1 => return Ok(Dialog::Cancelled),
        other => {
            return Err(format!(
                "the desktop's dialog ended without a folder (code {other})"
            ));
        }
    }
    let uris: Vec<String> = results
        .get("uris")
        .and_then(|v| Vec::<String>::try_from(v.clone()).ok())
        .unwrap_or_default();
    let [uri] = uris.as_slice() else {
        return Err(format!(
            "the desktop's dialog answered {} folders, not one",
            uris.len()
        ));
    };
    folder_of(uri).map(Dialog::Chosen)
}

/// The local path a `file://` URI names: percent-decoded, absolute, never from another host.
#[cfg(target_os = "linux")]
fn folder_of(uri: &str) -> Result<PathBuf, String> {
    let rest = uri
        .strip_prefix("file://")
        .ok_or_else(|| format!("the desktop's dialog answered {uri:?}, not a local folder"))?;
    let path = rest.strip_prefix("localhost").unwrap_or(rest);
    if !path.starts_with('/') {
        return Err(format!(
            "the desktop's dialog answered {uri:?}, a folder on another host"
        ));
    }
    let mut bytes = Vec::with_capacity(path.len());
    let mut raw = path.bytes();
    while let Some(b) = raw.next() {
        if b == b'%' {
            let hex = [raw.next(), raw.next()];
            let value = match hex {
                [Some(h), Some(l)] => std::str::from_utf8(&[h, l])
                    .ok()
                    .and_then(|h| u8::from_str_radix(h, 16).ok()),
                _ => None,
            };
            bytes.push(value.ok_or_else(|| format!("{uri:?}: a broken %-escape"))?);
        } else {
            bytes.push(b);
        }
    }
    if bytes.contains(&0) {
        return Err(format!("{uri:?}: a NUL in the path"));
    }
    let path: std::ffi::OsString = std::os::unix::ffi::OsStringExt::from_vec(bytes);
    Ok(PathBuf::from(path))
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn a_file_uri_is_read_as_the_local_path_it_names() {
        assert_eq!(
            folder_of("file:///home/u/docs").unwrap(),
            PathBuf::from("/home/u/docs")
        );
        assert_eq!(
            folder_of("file://localhost/home/u/Q3%20report%E2%80%AE").unwrap(),
            PathBuf::from("/home/u/Q3 report\u{202e}")
        );
        for bad in [
            "https://x/y",
            "file://server/share",
            "file:///a%2",
            "file:///a%00b",
            "file:///a%zz",
        ] {
            assert!(folder_of(bad).is_err(), "{bad}");
        }
    }
}
