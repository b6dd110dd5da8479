//! The pages: each reads through one library call and renders a template.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::http::header::{self, HeaderValue};
use axum::response::{Html, IntoResponse, Redirect, Response};
use safe_lanes::Access;
use safe_lanes::grants::Folders;
use safe_lanes::upload::UploadSource;
use serde::Deserialize;

use crate::app::{App, refused};
use crate::guard::{Human, PREVIEW_POLICY, cookie_name};
use crate::session::SignIn;
use crate::view::{
    self, AddForm, Audit, ChangeRow, Changelog, Chrome, GrantRow, Overview, Pick, PickRow,
    RequestView, RootRow, Uploads, query, shown,
};

const STYLE: &str = include_str!("../assets/style.css");
const SCRIPT: &str = include_str!("../assets/live.js");

impl App {
    /// The frame of a page for the signed-in human, with what the last action did.
    pub(crate) fn chrome(&self, human: &Human, title: &'static str, page: &'static str) -> Chrome {
        let flash = self.sessions().current().and_then(|s| s.take_flash());
        Chrome {
            title,
            page,
            flash,
            csrf: human.csrf.clone(),
        }
    }
}

/// `GET /session?token=…`: trade the one-time token for the session cookie.
pub(crate) async fn sign_in(State(app): State<Arc<App>>, Query(q): Query<TokenQuery>) -> Response {
    let redeemed = app
        .sessions()
        .redeem(q.token.as_deref().unwrap_or_default());
    match redeemed {
        Ok(id) => {
            let cookie = format!(
                "{}={id}; HttpOnly; SameSite=Strict; Path=/",
                cookie_name(&app)
            );
            let mut response = Redirect::to("/").into_response();
            if let Ok(value) = HeaderValue::from_str(&cookie) {
                response.headers_mut().insert(header::SET_COOKIE, value);
            }
            response
        }
        Err(SignIn::Wrong) => refused(
            StatusCode::FORBIDDEN,
            "This sign-in link is not the one `safe-lanes ui` printed.",
        ),
        Err(SignIn::Spent) => refused(
            StatusCode::FORBIDDEN,
            "This sign-in link was already used; it works once. Run `safe-lanes ui` again.",
        ),
    }
}

#[derive(Deserialize)]
pub(crate) struct TokenQuery {
    token: Option<String>,
}

/// What the picker sends back to the overview.
#[derive(Deserialize, Default)]
pub(crate) struct Chosen {
    /// The request a folder was chosen for, and the folder.
    request: Option<String>,
    path: Option<String>,
    /// A folder chosen for the add form, and the access it was checked for.
    add_path: Option<String>,
    add_access: Option<String>,
}

/// `GET /`: the pending requests, how many change sets are held, the grants, and the add
/// form.
pub(crate) async fn overview(
    State(app): State<Arc<App>>,
    human: Human,
    Query(chosen): Query<Chosen>,
) -> Response {
    let read = app
        .blocking(|app| {
            let held = safe_lanes::changes::HeldChanges::open(Arc::clone(&app.grants))
                .and_then(|held| held.list())
                .map(|sets| sets.len())
                .map_err(|e| format!("({}) {}", e.code(), e.message()));
            let proposals = app.grants.proposals()?;
            // Each request at a glance: its path's warnings, and whether it can be approved.
            let glances: Vec<_> = proposals
                .iter()
                .map(|p| app.grants.glance(p, None))
                .collect();
            Ok::<_, safe_lanes::Error>((proposals, glances, app.grants.list()?, held))
        })
        .await;
    let (proposals, glances, listing, held) = match read {
        Ok(read) => read,
        Err(e) => return refused(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    };
    let requests = proposals
        .iter()
        .zip(&glances)
        .map(|(p, glance)| {
            let mine = chosen.request.as_deref() == Some(p.request.id.as_str());
            RequestView::of(p, glance, chosen.path.as_deref().filter(|_| mine))
        })
        .collect();
    let add = AddForm {
        path: chosen.add_path.unwrap_or_default(),
        read_write: chosen.add_access.as_deref() == Some(Access::ReadWrite.as_str()),
    };
    let page = Overview {
        chrome: app.chrome(&human, "Requests and grants", "overview"),
        requests,
        grants: listing.grants.iter().map(GrantRow::of).collect(),
        add,
        held,
    };
    Html(view::render(&page)).into_response()
}

/// How many changes, records or files one page shows.
const PER_PAGE: usize = 50;

/// How many of the newest audit records the audit tab pages through (older ones:
/// `safe-lanes audit show --since …`).
const AUDIT_SHOWN: usize = 20 * PER_PAGE;

/// A page number, and filters of the audit page.
#[derive(Deserialize, Default)]
pub(crate) struct Paging {
    /// 1 for the newest.
    page: Option<usize>,
    /// `1`: only refusals (audit).
    refused: Option<String>,
    /// Events that start with it (audit).
    op: Option<String>,
}

/// The items of page `page` (1-based) of `items` (newest first), and the links to the pages
/// before and after it.
fn paged<T>(items: Vec<T>, page: usize, link: impl Fn(usize) -> String) -> (Vec<T>, view::Pages) {
    let pages = items.len().div_ceil(PER_PAGE).max(1);
    let page = page.clamp(1, pages);
    let shown = items
        .into_iter()
        .skip((page - 1) * PER_PAGE)
        .take(PER_PAGE)
        .collect();
    let nav = view::Pages {
        page,
        pages,
        newer: (page > 1).then(|| link(page - 1)),
        older: (page < pages).then(|| link(page + 1)),
    };
    (shown, nav)
}

/// `GET /changelog`: every change, newest first, a page at a time.
pub(crate) async fn changelog(
    State(app): State<Arc<App>>,
    human: Human,
    Query(q): Query<Paging>,
) -> Response {
    match app.blocking(|app| app.grants.changelog()).await {
        Ok(changes) => {
            let total = changes.len();
            let rows: Vec<ChangeRow> = changes.iter().rev().map(ChangeRow::of).collect();
            let (changes, pages) = paged(rows, q.page.unwrap_or(1), |n| {
                format!("/changelog?{}", query(&[("page", &n.to_string())]))
            });
            let page = Changelog {
                chrome: app.chrome(&human, "Changelog", "changelog"),
                changes,
                total,
                pages,
            };
            Html(view::render(&page)).into_response()
        }
        Err(e) => refused(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    }
}

/// `GET /audit`: whether the audit log's chain holds, and its records as a person reads them
/// (newest first, a page at a time, refusals highlighted; filtered to refusals or to an
/// operation).
pub(crate) async fn audit(
    State(app): State<Arc<App>>,
    human: Human,
    Query(q): Query<Paging>,
) -> Response {
    let log = app.root.audit();
    let path = log.path().to_path_buf();
    // The newest records that match, read from the log's end (the chain's check and the
    // counts still read the whole log, a line at a time: time, not memory).
    let filter = safe_lanes::audit_view::Filter {
        refused: q.refused.as_deref() == Some("1"),
        op: q.op.clone().filter(|op| !op.is_empty()),
        limit: Some(AUDIT_SHOWN),
        ..Default::default()
    };
    let read = app
        .blocking(move |_| {
            let verification = log.verify()?;
            let (entries, _) = safe_lanes::audit_view::show(&log, &filter)?;
            let summary = safe_lanes::audit_view::summary(&log, None)?;
            Ok::<_, safe_lanes::Error>((verification, entries, summary))
        })
        .await;
    match read {
        Ok((verification, entries, summary)) => {
            let chrome = app.chrome(&human, "Audit log", "audit");
            let refused_only = q.refused.as_deref() == Some("1");
            let op = q.op.clone().unwrap_or_default();
            let rows: Vec<view::EntryRow> = entries.iter().rev().map(view::EntryRow::of).collect();
            let (entries, pages) = paged(rows, q.page.unwrap_or(1), |n| {
                let mut pairs = vec![("page", n.to_string())];
                if refused_only {
                    pairs.push(("refused", "1".to_owned()));
                }
                if !op.is_empty() {
                    pairs.push(("op", op.clone()));
                }
                let pairs: Vec<(&str, &str)> =
                    pairs.iter().map(|(k, v)| (*k, v.as_str())).collect();
                format!("/audit?{}", query(&pairs))
            });
            let mut page = Audit::of(chrome, &path, &verification);
            page.entries = entries;
            page.pages = pages;
            page.refused_only = refused_only;
            page.op = q.op.unwrap_or_default();
            page.counts = summary
                .counts
                .iter()
                .map(|c| (c.operation.clone(), c.outcome.as_str(), c.count))
                .collect();
            Html(view::render(&page)).into_response()
        }
        Err(e) => refused(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    }
}

/// `GET /downloads`: the files of the download lane (name, size, time, SHA-256 as the audit
/// log recorded it), a page at a time.
pub(crate) async fn downloads(
    State(app): State<Arc<App>>,
    human: Human,
    Query(q): Query<Paging>,
) -> Response {
    let read = app
        .blocking(|app| {
            let files = safe_lanes::DownloadLane::open(&app.root)?.list()?;
            let digests = safe_lanes::audit_view::download_records(&app.root.audit())?;
            Ok::<_, safe_lanes::Error>((files, digests))
        })
        .await;
    match read {
        Ok((mut files, digests)) => {
            // Newest first.
            files.sort_by(|a, b| b.modified.cmp(&a.modified).then(a.name.cmp(&b.name)));
            let total = files.len();
            let rows: Vec<view::FileRow> = files
                .iter()
                .map(|f| view::FileRow::of(f, digests.get(&f.name)))
                .collect();
            let (files, pages) = paged(rows, q.page.unwrap_or(1), |n| {
                format!("/downloads?{}", query(&[("page", &n.to_string())]))
            });
            let page = view::Downloads {
                chrome: app.chrome(&human, "Downloads", "downloads"),
                files,
                total,
                pages,
            };
            Html(view::render(&page)).into_response()
        }
        Err(e) => refused(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    }
}

/// The most of a download the page shows (a larger one is opened from the folder).
const MAX_PREVIEW: u64 = 32 << 20;

/// The type a browser is told a download is, when it can show it without running anything:
/// a raster image or plain text. Never HTML, SVG or anything else that holds script; not a
/// PDF either (Chromium will not start its viewer in a sandboxed document, and the sandbox
/// is not loosened for it).
pub(crate) fn preview_type(name: &str) -> Option<&'static str> {
    let extension = name.rsplit_once('.')?.1.to_ascii_lowercase();
    Some(match extension.as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "txt" | "md" | "csv" | "log" | "json" | "yaml" | "yml" | "toml" => {
            "text/plain; charset=utf-8"
        }
        _ => return None,
    })
}

/// Which download to show.
#[derive(Deserialize)]
pub(crate) struct Named {
    name: String,
}

/// `GET /downloads/view?name=…`: one file of the download lane, shown by the browser as what
/// it is — with a type that cannot run script, in a sandbox of its own ([`PREVIEW_POLICY`]).
pub(crate) async fn view_download(
    State(app): State<Arc<App>>,
    _human: Human,
    Query(q): Query<Named>,
) -> Response {
    use std::io::Read;
    let Some(kind) = preview_type(&q.name) else {
        return refused(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "The page shows images and text only; open other files from the folder.",
        );
    };
    let read = app
        .blocking(move |app| {
            let (file, entry) = safe_lanes::DownloadLane::open(&app.root)?.read(&q.name)?;
            let mut bytes = Vec::new();
            file.take(MAX_PREVIEW + 1)
                .read_to_end(&mut bytes)
                .map_err(|e| safe_lanes::Error::io("read", &entry.name, e))?;
            Ok::<_, safe_lanes::Error>(bytes)
        })
        .await;
    match read {
        Ok(bytes) if bytes.len() as u64 > MAX_PREVIEW => refused(
            StatusCode::PAYLOAD_TOO_LARGE,
            "This file is too large to show here; open it from the folder.",
        ),
        Ok(bytes) => (
            [
                (header::CONTENT_TYPE, kind),
                (header::CONTENT_SECURITY_POLICY, PREVIEW_POLICY),
                (header::CONTENT_DISPOSITION, "inline"),
            ],
            bytes,
        )
            .into_response(),
        Err(e) => refused(StatusCode::NOT_FOUND, &e.to_string()),
    }
}

/// `GET /running`: the confined commands running now, each with its last output and a stop.
pub(crate) async fn running(State(app): State<Arc<App>>, human: Human) -> Response {
    let read = app
        .blocking(|app| safe_lanes::running::running(&app.root))
        .await;
    match read {
        Ok(jobs) => {
            let page = view::RunningPage {
                chrome: app.chrome(&human, "Running", "running"),
                jobs: jobs.iter().map(view::JobRow::of).collect(),
            };
            Html(view::render(&page)).into_response()
        }
        Err(e) => refused(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    }
}

/// `GET /uploads`: the upload roots and the entries ignored.
pub(crate) async fn uploads(State(app): State<Arc<App>>, human: Human) -> Response {
    let loaded = app.blocking(|app| UploadSource::load(&app.root)).await;
    let mut page = Uploads {
        chrome: app.chrome(&human, "Upload roots", "uploads"),
        roots: Vec::new(),
        ignored: Vec::new(),
        error: None,
    };
    match loaded {
        Ok(source) => {
            page.roots = source
                .roots()
                .iter()
                .map(|r| RootRow {
                    path: shown(&r.path),
                    origin: r.origin.as_str(),
                    entry: r.entry.clone(),
                    note: safe_lanes::upload_roots::warnings(&r.path, &app.root)
                        .iter()
                        .map(|w| w.message.clone())
                        .collect::<Vec<_>>()
                        .join(" "),
                    removable: r.origin.as_str() == "file",
                })
                .collect();
            page.ignored = source
                .ignored()
                .iter()
                .map(|i| RootRow {
                    path: i.at.clone(),
                    origin: i.origin.as_str(),
                    entry: i.entry.clone(),
                    note: i.why.clone(),
                    removable: false,
                })
                .collect();
        }
        Err(e) => page.error = Some(e.to_string()),
    }
    Html(view::render(&page)).into_response()
}

#[derive(Deserialize)]
pub(crate) struct PickQuery {
    /// The request the folder is for; without one, the add form.
    request: Option<String>,
    /// For the add form: the access to check the folders for.
    access: Option<String>,
    /// The folder to list (the start folder by default).
    dir: Option<String>,
}

/// `GET /pick`: the desktop's own folder dialog where the session offers one (the chosen
/// folder goes back to the overview as the page's picker sends it), else — no portal, the
/// dialog closed, or a folder being browsed here already — the page's folder picker.
pub(crate) async fn pick(
    State(app): State<Arc<App>>,
    human: Human,
    Query(q): Query<PickQuery>,
) -> Response {
    if q.dir.is_none() {
        let access = match &q.request {
            Some(id) => {
                let id = id.clone();
                app.blocking(move |app| Ok(app.grants.proposal(&id)?.change.target().1))
                    .await
            }
            None => Access::parse(q.access.as_deref().unwrap_or("read_only")),
        };
        if let Ok(access) = access {
            let title = "Choose a folder to grant";
            match crate::desktop::choose_folder(&app.desktop, title, app.start.as_deref()).await {
                crate::desktop::Dialog::Chosen(folder) => {
                    let links = Links {
                        request: q.request.as_deref(),
                        access,
                    };
                    return axum::response::Redirect::to(&links.choose(&folder)).into_response();
                }
                crate::desktop::Dialog::Cancelled => {}
                crate::desktop::Dialog::Unavailable(why) => {
                    tracing::debug!(%why, "the page's folder picker, not the desktop's");
                }
            }
        }
    }
    let dir = q
        .dir
        .as_deref()
        .map(PathBuf::from)
        .or_else(|| app.start.clone())
        .unwrap_or_else(|| PathBuf::from("/"));
    let request = q.request.clone();
    let looked = app
        .blocking(
            move |app| -> safe_lanes::Result<(Access, String, Folders)> {
                let (access, purpose) = match &request {
                    Some(id) => {
                        let proposal = app.grants.proposal(id)?;
                        (proposal.change.target().1, proposal.change.headline())
                    }
                    None => {
                        let access = Access::parse(q.access.as_deref().unwrap_or("read_only"))?;
                        (access, format!("a new {access} grant"))
                    }
                };
                Ok((access, purpose, app.grants.folders(&dir, access)?))
            },
        )
        .await;
    let chrome = app.chrome(&human, "Choose a folder", "overview");
    let page = match looked {
        Ok((access, purpose, folders)) => {
            picker(chrome, q.request.as_deref(), access, purpose, &folders)
        }
        Err(e) => Pick::failed(chrome, e.to_string()),
    };
    Html(view::render(&page)).into_response()
}

/// Links back to the overview with a chosen folder, and within the picker.
struct Links<'a> {
    request: Option<&'a str>,
    access: Access,
}

impl Links<'_> {
    fn open(&self, dir: &Path) -> String {
        let dir = dir.to_string_lossy();
        match self.request {
            Some(id) => format!("/pick?{}", query(&[("request", id), ("dir", &dir)])),
            None => format!(
                "/pick?{}",
                query(&[("access", self.access.as_str()), ("dir", &dir)])
            ),
        }
    }

    fn choose(&self, dir: &Path) -> String {
        let dir = dir.to_string_lossy();
        match self.request {
            Some(id) => format!("/?{}#{id}", query(&[("request", id), ("path", &dir)])),
            None => format!(
                "/?{}#add",
                query(&[("add_path", &dir), ("add_access", self.access.as_str())])
            ),
        }
    }
}

fn picker(
    chrome: Chrome,
    request: Option<&str>,
    access: Access,
    purpose: String,
    folders: &Folders,
) -> Pick {
    let links = Links { request, access };
    let rows = folders
        .folders
        .iter()
        .map(|f| PickRow {
            name: f.name.clone(),
            open: links.open(&f.path),
            choose: f.refused.is_none().then(|| links.choose(&f.path)),
            refused: f.refused.clone(),
        })
        .collect();
    let switch = request.is_none().then(|| {
        let other = match access {
            Access::ReadOnly => Access::ReadWrite,
            Access::ReadWrite => Access::ReadOnly,
        };
        let link = Links {
            request,
            access: other,
        }
        .open(&folders.path);
        (other.as_str().to_owned(), link)
    });
    Pick {
        chrome,
        purpose,
        access: access.as_str(),
        switch,
        here: shown(&folders.path),
        up: folders.parent.as_deref().map(|p| links.open(p)),
        choose_here: folders
            .refused
            .is_none()
            .then(|| links.choose(&folders.path)),
        refused_here: folders.refused.clone(),
        folders: rows,
        truncated: folders.truncated,
        error: None,
        back: request.map_or_else(|| "/#add".to_owned(), |id| format!("/#{id}")),
    }
}

impl Pick {
    fn failed(chrome: Chrome, error: String) -> Self {
        Pick {
            chrome,
            purpose: String::new(),
            access: "",
            switch: None,
            here: String::new(),
            up: None,
            choose_here: None,
            refused_here: None,
            folders: Vec::new(),
            truncated: false,
            error: Some(error),
            back: "/".to_owned(),
        }
    }
}

/// `GET /assets/style.css`.
pub(crate) async fn style() -> Response {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], STYLE).into_response()
}

/// `GET /assets/live.js`.
pub(crate) async fn script() -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        SCRIPT,
    )
        .into_response()
}
