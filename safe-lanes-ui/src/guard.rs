//! The guard every request passes: the exact `Host`, the exact `Origin` on a state change, the
//! session cookie, the CSRF token, and the headers every response carries.

use std::sync::Arc;

use axum::extract::{Form, FromRequest, FromRequestParts, Request, State};
use axum::http::header::{self, HeaderMap, HeaderName, HeaderValue};
use axum::http::request::Parts;
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::app::{App, refused};
use crate::session::same_secret;

/// What the page may load and do: its own scripts, styles and requests, nothing else, and it
/// may not be framed.
const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                      connect-src 'self'; form-action 'self'; frame-ancestors 'none'; \
                      base-uri 'none'";

/// What a download shown in the browser may do: nothing. It is its own sandboxed origin (no
/// script, no form, no cookie of the page's), loads nothing, and cannot be framed; the browser
/// shows an image or text as it is.
pub(crate) const PREVIEW_POLICY: &str = "sandbox; default-src 'none'; img-src 'self'; style-src 'unsafe-inline'; \
     frame-ancestors 'none'";

/// Refuse a request with the wrong `Host` (DNS rebinding), a state change from another origin,
/// and any method but `GET`, `HEAD` and `POST`; note the request for the idle timer; add the
/// security headers to every response.
pub(crate) async fn guard(State(app): State<Arc<App>>, request: Request, next: Next) -> Response {
    let mut response = match check(&app, &request) {
        Err(why) => refused(StatusCode::FORBIDDEN, why),
        Ok(()) => {
            if request.uri().path() != "/events" {
                app.touch();
            }
            next.run(request).await
        }
    };
    secure(response.headers_mut());
    response
}

fn check(app: &App, request: &Request) -> Result<(), &'static str> {
    // Exactly one `Host`: with two, which one a check reads and which one a proxy or the
    // browser meant can differ.
    if request.headers().get_all(header::HOST).iter().count() != 1 {
        return Err("This page answers only at the address `safe-lanes ui` printed.");
    }
    let host = request.headers().get(header::HOST);
    let authority = request.uri().authority().map(|a| a.as_str());
    let host_is = |want: &str| host.is_some_and(|h| h.as_bytes() == want.as_bytes());
    if !host_is(&app.origin.host) || authority.is_some_and(|a| a != app.origin.host) {
        return Err("This page answers only at the address `safe-lanes ui` printed.");
    }
    match *request.method() {
        Method::GET | Method::HEAD => Ok(()),
        Method::POST => same_origin(app, request.headers()),
        _ => Err("This method is not served."),
    }
}

/// A state change must come from the page itself: `Origin` exactly the page's, and
/// `Sec-Fetch-Site` (when the browser sends it) `same-origin`.
fn same_origin(app: &App, headers: &HeaderMap) -> Result<(), &'static str> {
    let origin = headers.get(header::ORIGIN).map(HeaderValue::as_bytes);
    if origin != Some(app.origin.origin.as_bytes()) {
        return Err("A change must come from this page (its Origin did not match).");
    }
    let site = headers.get("sec-fetch-site").map(HeaderValue::as_bytes);
    if site.is_some_and(|site| site != b"same-origin") {
        return Err("A change must come from this page (it came from another site).");
    }
    Ok(())
}

fn secure(headers: &mut HeaderMap) {
    let set = |headers: &mut HeaderMap, name: HeaderName, value: &'static str| {
        headers.insert(name, HeaderValue::from_static(value));
    };
    // A response that brings its own, stricter policy (a download's preview) keeps it.
    if !headers.contains_key(header::CONTENT_SECURITY_POLICY) {
        set(headers, header::CONTENT_SECURITY_POLICY, POLICY);
    }
    set(headers, header::X_CONTENT_TYPE_OPTIONS, "nosniff");
    set(headers, header::X_FRAME_OPTIONS, "DENY");
    // Never a Referer to another site (and `no-referrer` would make the browser send
    // `Origin: null` on the page's own forms).
    set(headers, header::REFERRER_POLICY, "same-origin");
    set(headers, header::CACHE_CONTROL, "no-store");
    set(
        headers,
        HeaderName::from_static("cross-origin-opener-policy"),
        "same-origin",
    );
    set(
        headers,
        HeaderName::from_static("cross-origin-resource-policy"),
        "same-origin",
    );
}

/// The name of the session cookie of the page at `app`: cookies are not kept apart by port,
/// so two pages on one host must not share a name.
pub(crate) fn cookie_name(app: &App) -> String {
    format!("safe_lanes_{}", app.origin.address.port())
}

/// A request from the signed-in human: its session's CSRF token, for the forms it renders.
#[derive(Debug)]
pub(crate) struct Human {
    pub(crate) csrf: String,
}

impl FromRequestParts<Arc<App>> for Human {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, app: &Arc<App>) -> Result<Self, Response> {
        let mut sessions = app.sessions();
        match sessions.find(&parts.headers, &cookie_name(app)) {
            Some(session) => Ok(Human {
                csrf: session.csrf.clone(),
            }),
            None => Err(refused(
                StatusCode::UNAUTHORIZED,
                "Not signed in: open the link `safe-lanes ui` printed (it works once).",
            )),
        }
    }
}

#[derive(Deserialize)]
struct WithCsrf<T> {
    #[serde(default)]
    csrf: String,
    #[serde(flatten)]
    form: T,
}

/// A form posted by the signed-in human, carrying the session's CSRF token.
#[derive(Debug)]
pub(crate) struct Posted<T>(pub(crate) T);

impl<T: DeserializeOwned + Send> FromRequest<Arc<App>> for Posted<T> {
    type Rejection = Response;

    async fn from_request(request: Request, app: &Arc<App>) -> Result<Self, Response> {
        let (mut parts, body) = request.into_parts();
        let human = Human::from_request_parts(&mut parts, app).await?;
        let request = Request::from_parts(parts, body);
        let Form(WithCsrf { csrf, form }) =
            Form::<WithCsrf<T>>::from_request(request, app)
                .await
                .map_err(|e| refused(StatusCode::BAD_REQUEST, &e.body_text()))?;
        if !same_secret(&human.csrf, &csrf) {
            return Err(refused(
                StatusCode::FORBIDDEN,
                "This form is missing its token or carries another page's: reload the page.",
            ));
        }
        Ok(Posted(form))
    }
}

/// A form posted by the signed-in human whose fields may repeat (the ticked boxes of a list):
/// its name–value pairs in order, the CSRF token checked and taken out.
#[derive(Debug)]
pub(crate) struct PostedPairs(pub(crate) Vec<(String, String)>);

impl FromRequest<Arc<App>> for PostedPairs {
    type Rejection = Response;

    async fn from_request(request: Request, app: &Arc<App>) -> Result<Self, Response> {
        let (mut parts, body) = request.into_parts();
        let human = Human::from_request_parts(&mut parts, app).await?;
        let request = Request::from_parts(parts, body);
        let Form(pairs) = Form::<Vec<(String, String)>>::from_request(request, app)
            .await
            .map_err(|e| refused(StatusCode::BAD_REQUEST, &e.body_text()))?;
        let (tokens, pairs): (Vec<_>, Vec<_>) = pairs.into_iter().partition(|(k, _)| k == "csrf");
        // Exactly one token, the session's: two could be one forged and one copied.
        if !matches!(tokens.as_slice(), [(_, csrf)] if same_secret(&human.csrf, csrf)) {
            return Err(refused(
                StatusCode::FORBIDDEN,
                "This form is missing its token or carries another page's: reload the page.",
            ));
        }
        Ok(PostedPairs(pairs))
    }
}
