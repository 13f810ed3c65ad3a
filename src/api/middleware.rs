//! The layers around the router: the bearer token (or the console's
//! cookie and CSRF token) under /api/v1, the cookie of the pages, the Host
//! and Origin checks, the signature on hook answers, the one error shape
//! of every answer under /api/, and the request timeout.

use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Response};
use axum::Json;
use serde_json::json;

use super::{ApiError, AppState, BODY_LIMIT};

/// Signs every answer to a hook call that carries the hook's nonce
/// (`x-gadfly-nonce`), whatever made it (the handler, the token check, the
/// error shape): the signature binds the nonce, the campaign, the agent,
/// the event, the status and the body, so the hook can tell the daemon
/// from a server an agent put on its port (THREATS row 5).
pub(super) async fn sign_hook_answers(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let nonce = req.headers().get(crate::signing::NONCE_HEADER).and_then(|v| v.to_str().ok()).map(str::to_string);
    let (Some(nonce), Some((campaign, agent, event))) = (nonce, hook_route(req.uri().path())) else {
        return next.run(req).await;
    };
    if nonce.len() > 128 || nonce.bytes().any(|b| !b.is_ascii_graphic()) {
        return next.run(req).await;
    }
    let response = next.run(req).await;
    let (mut parts, body) = response.into_parts();
    let bytes = match axum::body::to_bytes(body, BODY_LIMIT).await {
        Ok(b) => b,
        Err(e) => {
            return ApiError::Internal(anyhow::anyhow!("reading the hook answer to sign it: {e}")).into_response()
        }
    };
    let sig = state.key.sign_answer(&nonce, &campaign, &agent, &event, parts.status.as_u16(), &bytes);
    if let Ok(v) = header::HeaderValue::from_str(&sig) {
        parts.headers.insert(crate::signing::SIGNATURE_HEADER, v);
    }
    Response::from_parts(parts, axum::body::Body::from(bytes))
}

/// The campaign, agent and event of a hook route's path
/// (`/api/v1/campaigns/{id}/hooks/{agent}/{event}`), percent-decoded.
fn hook_route(path: &str) -> Option<(String, String, String)> {
    let rest = path.strip_prefix("/api/v1/campaigns/")?;
    let parts: Vec<&str> = rest.split('/').collect();
    match parts.as_slice() {
        [id, "hooks", agent, event] => {
            let d = |s: &str| String::from_utf8(percent_decode(s)).ok().filter(|s| !s.contains('\0'));
            Some((d(id)?, d(agent)?, d(event)?))
        }
        _ => None,
    }
}

/// Every error answer under /api/ in the one error shape, whoever made it:
/// axum's router (no such route: 404; another method: 405, with `Allow`
/// from the OpenAPI description), the body limit (413 before the body is
/// read) or any other layer. A path with a control character (NUL above
/// all, which no database stores in text) or that is not UTF-8 once
/// decoded is refused before routing.
pub(super) async fn api_error_shape(req: Request, next: Next) -> Response {
    let path = req.uri().path().to_string();
    if !path.starts_with("/api/") {
        return next.run(req).await;
    }
    let decoded = percent_decode(&path);
    if decoded.iter().any(|b| b.is_ascii_control()) {
        return ApiError::Invalid(format!("the path `{path}` contains a control character")).into_response();
    }
    if std::str::from_utf8(&decoded).is_err() {
        return ApiError::Invalid(format!("the path `{path}` is not UTF-8 once percent-decoded")).into_response();
    }
    let method = req.method().clone();
    let res = next.run(req).await;
    let status = res.status();
    let is_json = res
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return res;
    }
    let allowed = super::openapi::allowed_methods(path.trim_start_matches("/api/v1")).join(", ");
    let text = axum::body::to_bytes(res.into_body(), 64 * 1024).await.unwrap_or_default();
    let text = String::from_utf8_lossy(&text).trim().to_string();
    let mut out = match status {
        StatusCode::NOT_FOUND => ApiError::NotFound(format!("no API route {method} {path} (see /api/v1/openapi.json)")),
        StatusCode::METHOD_NOT_ALLOWED => {
            ApiError::MethodNotAllowed(format!("{method} is not allowed on {path}; allowed: {allowed}"))
        }
        StatusCode::PAYLOAD_TOO_LARGE => {
            ApiError::TooLarge(format!("the request body is over the limit of {} MiB", BODY_LIMIT >> 20))
        }
        s if s.is_client_error() => ApiError::Invalid(if text.is_empty() { s.to_string() } else { text }),
        s => ApiError::Internal(anyhow::anyhow!(if text.is_empty() { s.to_string() } else { text })),
    }
    .into_response();
    *out.status_mut() = status;
    if status == StatusCode::METHOD_NOT_ALLOWED {
        if let Ok(v) = header::HeaderValue::from_str(&allowed) {
            out.headers_mut().insert(header::ALLOW, v);
        }
    }
    out
}

fn percent_decode(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    out
}

/// How long an API request may take, except those that wait for an
/// evaluation (evaluate, calibrate, hook calls: a stop is judged on one,
/// bounded by the harness's own timeout) or stream (events).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

pub(super) async fn request_timeout(req: Request, next: Next) -> Response {
    let path = req.uri().path();
    let long = path.ends_with("/evaluate")
        || path.ends_with("/calibrate")
        || path.contains("/hooks/")
        || path.ends_with("/events");
    if long {
        return next.run(req).await;
    }
    let (method, path) = (req.method().clone(), path.to_string());
    match tokio::time::timeout(REQUEST_TIMEOUT, next.run(req)).await {
        Ok(r) => r,
        Err(_) => {
            tracing::warn!(%method, %path, "request timed out");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                Json(json!({"code": "timeout", "message": format!("{method} {path} took longer than {} s", REQUEST_TIMEOUT.as_secs())})),
            )
                .into_response()
        }
    }
}

/// Against DNS rebinding and cross-site requests: a loopback daemon answers
/// only requests addressed to a loopback host, and refuses a state-changing
/// request whose Origin is another site.
pub(super) async fn check_host_and_origin(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let host_of = |v: &str| -> String {
        let v = v.trim();
        if let Some(rest) = v.strip_prefix('[') {
            return rest.split(']').next().unwrap_or("").to_string();
        }
        v.rsplit_once(':')
            .map_or(v, |(h, port)| if port.chars().all(|c| c.is_ascii_digit()) { h } else { v })
            .to_string()
    };
    let loopback = |h: &str| h == "localhost" || h.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback());
    if !state.allow_remote {
        if let Some(host) = req.headers().get(header::HOST).and_then(|v| v.to_str().ok()) {
            if !loopback(&host_of(host)) {
                return (StatusCode::FORBIDDEN, Json(json!({"code": "forbidden_host", "message": format!("this daemon serves loopback hosts only, not `{host}` (start it with --allow-remote to serve others)")}))).into_response();
            }
        }
    }
    if req.method() != axum::http::Method::GET && req.method() != axum::http::Method::HEAD {
        if let Some(origin) = req.headers().get(header::ORIGIN).and_then(|v| v.to_str().ok()) {
            // The daemon's own origin, port included: a page served from
            // another port of the same host is same-site (its cookies are
            // sent) but not same-origin, and may not act (THREATS row 11).
            let origin_authority = origin.split("://").nth(1).unwrap_or_default().trim_end_matches('/');
            let own = req.headers().get(header::HOST).and_then(|v| v.to_str().ok()).unwrap_or_default();
            if origin == "null" || !origin_authority.eq_ignore_ascii_case(own.trim()) {
                return (StatusCode::FORBIDDEN, Json(json!({"code": "forbidden_origin", "message": format!("cross-origin request from {origin} refused: only pages of this daemon ({own}) may act on it")}))).into_response();
            }
        }
    }
    let mut res = next.run(req).await;
    // No page of the daemon may be framed by another (clickjacking).
    let h = res.headers_mut();
    h.insert(header::X_FRAME_OPTIONS, header::HeaderValue::from_static("DENY"));
    h.entry(header::CONTENT_SECURITY_POLICY).or_insert(header::HeaderValue::from_static("frame-ancestors 'none'"));
    res
}

/// The console's session cookie: derived from the master token, never the
/// token itself, so the cookie (in the browser's store) cannot be used as
/// the CLI's bearer token.
pub fn session_value(token: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(format!("gadfly-console-session:{token}").as_bytes()))
}

/// The CSRF token every state-changing request authenticated by the cookie
/// must carry in `x-gadfly-csrf`: it is written into the pages the daemon
/// serves behind the login, which a page of another origin cannot read.
pub fn csrf_value(token: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(format!("gadfly-console-csrf:{token}").as_bytes()))
}

pub const CSRF_HEADER: &str = "x-gadfly-csrf";

pub const COOKIE: &str = "gadfly_session";

fn cookie_token(headers: &HeaderMap) -> Option<String> {
    headers.get_all(header::COOKIE).iter().filter_map(|v| v.to_str().ok()).find_map(|v| {
        v.split(';').find_map(|kv| {
            let (k, val) = kv.trim().split_once('=')?;
            (k == COOKIE).then(|| val.to_string())
        })
    })
}

pub(super) async fn require_token(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let bearer = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(|t| t.trim().to_string());
    if bearer.is_none() {
        // The console: the session cookie, and for anything but a read the
        // CSRF token of its pages.
        let session = cookie_token(req.headers());
        if !session.is_some_and(|c| super::auth::constant_time_eq(&c, &session_value(&state.token))) {
            return ApiError::Unauthorized.into_response();
        }
        let read = req.method() == axum::http::Method::GET || req.method() == axum::http::Method::HEAD;
        let csrf = req.headers().get(CSRF_HEADER).and_then(|v| v.to_str().ok()).unwrap_or_default();
        if !read && !super::auth::constant_time_eq(csrf, &csrf_value(&state.token)) {
            return ApiError::Forbidden(format!(
                "a change made with the console's cookie needs the page's CSRF token in `{CSRF_HEADER}`"
            ))
            .into_response();
        }
        return next.run(req).await;
    }
    match bearer.as_deref().and_then(|t| super::auth::grant(&state.token, t)) {
        Some(super::auth::Grant::Full) => next.run(req).await,
        Some(super::auth::Grant::Hooks(campaign)) => {
            if super::auth::hook_scope_allows(req.method(), req.uri().path(), &campaign) {
                let mut req = req;
                req.extensions_mut().insert(HookCaller);
                next.run(req).await
            } else {
                ApiError::Forbidden(format!(
                    "a hook token of campaign {campaign} may only post that campaign's hook events, ask for its evaluation and tag its beam families, not {} {}",
                    req.method(),
                    req.uri().path()
                ))
                .into_response()
            }
        }
        None => ApiError::Unauthorized.into_response(),
    }
}

pub(super) async fn require_cookie(State(state): State<AppState>, req: Request, next: Next) -> Response {
    match cookie_token(req.headers()) {
        Some(t) if super::auth::constant_time_eq(&t, &session_value(&state.token)) => next.run(req).await,
        _ => (StatusCode::UNAUTHORIZED, Html(super::pages::login_form(None))).into_response(),
    }
}

/// A request authenticated by a campaign's hook token (what an agent has).
#[derive(Clone, Copy)]
pub(super) struct HookCaller;

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::middleware;
    use axum::routing::{get, post};
    use axum::Router;
    use serde_json::Value;
    use tower::ServiceExt;

    /// Handlers that take a second longer than the limit, behind the
    /// daemon's own timeout layer.
    fn slow_routes() -> Router {
        let slow = || async {
            tokio::time::sleep(REQUEST_TIMEOUT + Duration::from_secs(1)).await;
            "done"
        };
        Router::new()
            .route("/api/v1/campaigns/c/report", get(slow))
            .route("/api/v1/campaigns/c/evaluate", post(slow))
            .route("/api/v1/campaigns/c/hooks/claude-code/stop", post(slow))
            .route("/api/v1/campaigns/c/events", get(slow))
            .layer(middleware::from_fn(request_timeout))
    }

    async fn call(method: &str, path: &str) -> (StatusCode, Value, Duration) {
        let started = tokio::time::Instant::now();
        let req = Request::builder().method(method).uri(path).body(Body::empty()).unwrap();
        let res = slow_routes().oneshot(req).await.unwrap();
        let status = res.status();
        let bytes = axum::body::to_bytes(res.into_body(), 1 << 16).await.unwrap();
        let body =
            serde_json::from_slice(&bytes).unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into()));
        (status, body, started.elapsed())
    }

    // The clock is paused: tokio moves it to the next timer whenever the
    // runtime is idle, so a minute passes at once and exactly.
    #[tokio::test(start_paused = true)]
    async fn a_request_over_the_limit_is_cut_at_the_limit_with_a_503_that_says_so() {
        let (status, body, took) = call("GET", "/api/v1/campaigns/c/report").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
        assert_eq!(body["code"], "timeout", "{body}");
        assert_eq!(body["message"], "GET /api/v1/campaigns/c/report took longer than 60 s", "{body}");
        assert!(took >= REQUEST_TIMEOUT && took < REQUEST_TIMEOUT + Duration::from_secs(1), "cut after {took:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn evaluations_hook_calls_and_event_streams_may_run_past_the_limit() {
        for (method, path) in [
            ("POST", "/api/v1/campaigns/c/evaluate"),
            ("POST", "/api/v1/campaigns/c/hooks/claude-code/stop"),
            ("GET", "/api/v1/campaigns/c/events"),
        ] {
            let (status, body, took) = call(method, path).await;
            assert_eq!((status, body), (StatusCode::OK, Value::String("done".into())), "{method} {path}");
            assert!(took > REQUEST_TIMEOUT, "{method} {path} answered after {took:?}");
        }
    }
}
