//! The HTTP API (under /api/v1, bearer token), the live event stream (SSE)
//! and the console's pages, with the cookie login.

use std::convert::Infallible;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;
use utoipa::{IntoParams, ToSchema};

use crate::client::CALL_ID_HEADER;
use crate::openapi::{Forbidden, Internal, Invalid, NotFound, TooLarge, TooMany, Unauthorized};

use crate::supervisor::{Supervisor, SupervisorError};

#[derive(Clone)]
pub struct AppState {
    pub supervisor: Supervisor,
    pub token: String,
    pub shutdown: CancellationToken,
    /// When false, only loopback Host headers are served (DNS rebinding).
    pub allow_remote: bool,
    /// Signs the answers to hook calls (see `signing`).
    pub key: std::sync::Arc<crate::signing::DaemonKey>,
    /// One-time console login codes (see `auth::LoginCodes`).
    pub login_codes: std::sync::Arc<crate::auth::LoginCodes>,
}

/// The one error shape of the API: `{"code", "message"}`.
#[derive(Debug)]
pub enum ApiError {
    NotFound(String),
    Invalid(String),
    Unauthorized,
    Forbidden(String),
    /// A request body over the limit (413).
    TooLarge(String),
    /// A route that exists, called with another method (405).
    MethodNotAllowed(String),
    /// Too many requests of a kind (429).
    TooMany(String),
    Internal(anyhow::Error),
}

/// The body of every error response: a stable `code` for programs and a
/// `message` for people that says what is wrong.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ErrorBody {
    /// invalid, unauthorized, forbidden, not_found, method_not_allowed, too_large, too_many or internal
    /// (forbidden_host and forbidden_origin for the DNS-rebinding and cross-site checks).
    pub code: String,
    pub message: String,
}

/// The largest request body the daemon reads.
pub const BODY_LIMIT: usize = 16 * 1024 * 1024;

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, code, message) = match self {
            ApiError::NotFound(m) => (StatusCode::NOT_FOUND, "not_found", m),
            ApiError::Invalid(m) => (StatusCode::BAD_REQUEST, "invalid", m),
            ApiError::Unauthorized => (
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "missing or wrong token: send `Authorization: Bearer TOKEN` (the token is in DATA_DIR/token)"
                    .to_string(),
            ),
            ApiError::Forbidden(m) => (StatusCode::FORBIDDEN, "forbidden", m),
            ApiError::TooLarge(m) => (StatusCode::PAYLOAD_TOO_LARGE, "too_large", m),
            ApiError::MethodNotAllowed(m) => (StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed", m),
            ApiError::TooMany(m) => (StatusCode::TOO_MANY_REQUESTS, "too_many", m),
            ApiError::Internal(e) => {
                tracing::error!(error = %e, chain = ?e, "request failed");
                (StatusCode::INTERNAL_SERVER_ERROR, "internal", format!("internal error: {e:#}"))
            }
        };
        (status, Json(ErrorBody { code: code.into(), message })).into_response()
    }
}

impl From<QueryRejection> for ApiError {
    fn from(e: QueryRejection) -> Self {
        ApiError::Invalid(format!(
            "query string: {}",
            e.body_text().trim_start_matches("Failed to deserialize query string: ")
        ))
    }
}

impl From<PathRejection> for ApiError {
    fn from(e: PathRejection) -> Self {
        match e {
            PathRejection::FailedToDeserializePathParams(d) => ApiError::Invalid(format!("path: {}", d.body_text())),
            // Missing path params: a routing bug, not the caller's.
            other => ApiError::Internal(anyhow::anyhow!(other.body_text())),
        }
    }
}

impl From<BytesRejection> for ApiError {
    fn from(e: BytesRejection) -> Self {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::TooLarge(format!("the request body is over the limit of {} MiB", BODY_LIMIT >> 20))
        } else {
            ApiError::Invalid(format!("reading the request body: {}", e.body_text()))
        }
    }
}

/// `Query` whose rejection is a 400 in the API's error shape.
#[derive(FromRequestParts)]
#[from_request(via(Query), rejection(ApiError))]
struct ApiQuery<T>(T);

/// `Path` whose rejection is a 400 in the API's error shape.
#[derive(FromRequestParts)]
#[from_request(via(Path), rejection(ApiError))]
struct ApiPath<T>(T);

/// The path parameter of every route below /campaigns/{id}.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
struct CampaignId {
    /// The campaign id (from `POST /campaigns`).
    id: String,
}

/// A JSON request body. A `Content-Type` other than JSON, a body that does
/// not parse or lacks a field, a NUL character in a string (no database
/// stores one in text) and a body over [`BODY_LIMIT`] are refused with a 4xx.
struct JsonBody<T>(T);

impl<S: Send + Sync, T: serde::de::DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let HookPayload(value) = HookPayload::from_request(req, state).await?;
        if has_nul(&value) {
            return Err(ApiError::Invalid("request body: a string contains a NUL character (\\u0000)".into()));
        }
        Ok(JsonBody(parse_body(value)?))
    }
}

/// A hook's payload: any JSON value (the supervisor checks it is an object
/// and stores it as JSON, so any string in it is fine).
struct HookPayload(Value);

impl<S: Send + Sync> FromRequest<S> for HookPayload {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        if let Some(ct) = req.headers().get(header::CONTENT_TYPE) {
            let ct = String::from_utf8_lossy(ct.as_bytes()).to_string();
            let mime = ct.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
            if mime != "application/json" && !mime.ends_with("+json") {
                return Err(ApiError::Invalid(format!(
                    "the request body must be JSON sent with `Content-Type: application/json`, not `{ct}`"
                )));
            }
        }
        let body = Bytes::from_request(req, state).await?;
        let value =
            serde_json::from_slice(&body).map_err(|e| ApiError::Invalid(format!("request body is not JSON: {e}")))?;
        Ok(HookPayload(value))
    }
}

impl From<SupervisorError> for ApiError {
    fn from(e: SupervisorError) -> Self {
        match e {
            SupervisorError::NotFound(id) => ApiError::NotFound(format!("campaign {id} not found")),
            SupervisorError::Invalid(m) => ApiError::Invalid(m),
            SupervisorError::Internal(e) => ApiError::Internal(e),
        }
    }
}

impl From<anyhow::Error> for ApiError {
    fn from(e: anyhow::Error) -> Self {
        ApiError::Internal(e)
    }
}

fn has_nul(v: &Value) -> bool {
    match v {
        Value::String(s) => s.contains('\0'),
        Value::Array(a) => a.iter().any(has_nul),
        Value::Object(o) => o.iter().any(|(k, v)| k.contains('\0') || has_nul(v)),
        _ => false,
    }
}

type ApiResult<T> = Result<T, ApiError>;

pub fn router(state: AppState) -> Router {
    let api = Router::new()
        .route("/campaigns", get(list_campaigns).post(create_campaign))
        .route("/campaigns/{id}", get(show_campaign))
        .route("/campaigns/{id}/evaluate", post(evaluate))
        .route("/campaigns/{id}/evaluations", get(list_evaluations))
        .route("/campaigns/{id}/hooks/{agent}/{event}", post(hook))
        .route("/campaigns/{id}/questions", get(list_questions).post(ask))
        .route("/campaigns/{id}/stops", get(list_stops))
        .route("/campaigns/{id}/audit", get(campaign_audit))
        .route("/campaigns/{id}/beam", get(beam_list))
        .route("/campaigns/{id}/beam/tag", post(beam_tag))
        .route("/campaigns/{id}/beam/abandon", post(beam_abandon))
        .route("/campaigns/{id}/events", get(stream_events))
        .route("/campaigns/{id}/log", get(list_events))
        .route("/campaigns/{id}/suggestions", get(suggestions))
        .route("/campaigns/{id}/runs", get(list_runs).post(start_run))
        .route("/campaigns/{id}/runs/stop", post(stop_run))
        .route("/campaigns/{id}/hook-token", get(hook_token))
        .route("/login-codes", post(login_code))
        .route("/campaigns/{id}/hook-installs", post(hook_install))
        .route("/bank", get(bank))
        .route("/bank/stats", get(bank_stats))
        .route_layer(middleware::from_fn_with_state(state.clone(), require_token))
        .route("/health", get(health))
        .route("/openapi.json", get(openapi));
    // Prometheus scrapes with the bearer token (`authorization` in its scrape config).
    let metrics = Router::new()
        .route("/metrics", get(metrics))
        .route_layer(middleware::from_fn_with_state(state.clone(), require_token));
    let pages = Router::new()
        .route("/", get(crate::web::campaigns_page))
        .route("/campaigns/{id}", get(crate::web::campaign_page))
        .route("/bank", get(crate::web::bank_page))
        .route_layer(middleware::from_fn_with_state(state.clone(), require_cookie))
        .route("/login", get(login).post(login_form_post))
        .route("/assets/{*path}", get(crate::web::serve_asset));
    Router::new()
        .nest("/api/v1", api)
        .merge(metrics)
        .merge(pages)
        .layer(middleware::from_fn(request_timeout))
        .layer(middleware::from_fn_with_state(state.clone(), check_host_and_origin))
        .layer(tower_http::limit::RequestBodyLimitLayer::new(BODY_LIMIT))
        // axum's extractors stop at 2 MiB by default, under the layer's
        // limit: a hook body between the two was refused with a message
        // naming 16 MiB (THREATS row 14). One limit, the documented one.
        .layer(axum::extract::DefaultBodyLimit::max(BODY_LIMIT))
        .layer(middleware::from_fn(api_error_shape))
        .layer(middleware::from_fn_with_state(state.clone(), sign_hook_answers))
        .layer(tower_http::trace::TraceLayer::new_for_http())
        .with_state(state)
}

/// Signs every answer to a hook call that carries the hook's nonce
/// (`x-gadfly-nonce`), whatever made it (the handler, the token check, the
/// error shape): the signature binds the nonce, the campaign, the agent,
/// the event, the status and the body, so the hook can tell the daemon
/// from a server an agent put on its port (THREATS row 5).
async fn sign_hook_answers(State(state): State<AppState>, req: Request, next: Next) -> Response {
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
async fn api_error_shape(req: Request, next: Next) -> Response {
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
    let allowed = crate::openapi::allowed_methods(path.trim_start_matches("/api/v1")).join(", ");
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
/// evaluation (evaluate, hook calls: a stop is judged on one, bounded by the
/// harness's own timeout) or stream (events).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

async fn request_timeout(req: Request, next: Next) -> Response {
    let path = req.uri().path();
    let long = path.ends_with("/evaluate") || path.contains("/hooks/") || path.ends_with("/events");
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
async fn check_host_and_origin(State(state): State<AppState>, req: Request, next: Next) -> Response {
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

async fn require_token(State(state): State<AppState>, req: Request, next: Next) -> Response {
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
        if !session.is_some_and(|c| crate::auth::constant_time_eq(&c, &session_value(&state.token))) {
            return ApiError::Unauthorized.into_response();
        }
        let read = req.method() == axum::http::Method::GET || req.method() == axum::http::Method::HEAD;
        let csrf = req.headers().get(CSRF_HEADER).and_then(|v| v.to_str().ok()).unwrap_or_default();
        if !read && !crate::auth::constant_time_eq(csrf, &csrf_value(&state.token)) {
            return ApiError::Forbidden(format!(
                "a change made with the console's cookie needs the page's CSRF token in `{CSRF_HEADER}`"
            ))
            .into_response();
        }
        return next.run(req).await;
    }
    match bearer.as_deref().and_then(|t| crate::auth::grant(&state.token, t)) {
        Some(crate::auth::Grant::Full) => next.run(req).await,
        Some(crate::auth::Grant::Hooks(campaign)) => {
            if crate::auth::hook_scope_allows(req.method(), req.uri().path(), &campaign) {
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

async fn require_cookie(State(state): State<AppState>, req: Request, next: Next) -> Response {
    match cookie_token(req.headers()) {
        Some(t) if crate::auth::constant_time_eq(&t, &session_value(&state.token)) => next.run(req).await,
        _ => (StatusCode::UNAUTHORIZED, Html(crate::console::login_form(None))).into_response(),
    }
}

#[derive(Deserialize)]
struct LoginQuery {
    /// The master token (the contract's `/login?token=`; it stays in the
    /// browser's history: prefer a code).
    token: Option<String>,
    /// A one-time login code (`gadfly console`, `gadfly serve`).
    code: Option<String>,
}

/// The session cookie and a redirect to the campaigns; the answer is never
/// cached and sends no Referer onwards.
fn logged_in(state: &AppState) -> Response {
    let cookie = format!("{COOKIE}={}; Path=/; HttpOnly; SameSite=Strict", session_value(&state.token));
    (
        [
            (header::SET_COOKIE, cookie),
            (header::CACHE_CONTROL, "no-store".to_string()),
            (header::REFERRER_POLICY, "no-referrer".to_string()),
        ],
        Redirect::to("/"),
    )
        .into_response()
}

fn login_refused(message: &str) -> Response {
    (StatusCode::UNAUTHORIZED, Html(crate::console::login_form(Some(message)))).into_response()
}

/// `GET /login?code=CODE` (one-time) or `GET /login?token=TOKEN`.
async fn login(State(state): State<AppState>, Query(q): Query<LoginQuery>) -> Response {
    match (q.code, q.token) {
        (Some(c), _) if state.login_codes.redeem(c.trim()) => logged_in(&state),
        (Some(_), _) => login_refused("That login code is not valid: it was used already, is older than ten minutes, or the daemon restarted since. `gadfly console` prints a new link."),
        (None, Some(t)) if crate::auth::constant_time_eq(t.trim(), &state.token) => logged_in(&state),
        (None, Some(_)) => login_refused("That token is not valid."),
        (None, None) => Html(crate::console::login_form(None)).into_response(),
    }
}

#[derive(Deserialize)]
struct LoginForm {
    token: String,
}

/// The login form's POST: the token in the body, never in a URL.
async fn login_form_post(State(state): State<AppState>, form: Result<axum::Form<LoginForm>, axum::extract::rejection::FormRejection>,
) -> Response {
    match form.ok().map(|f| f.0.token) {
        Some(t) if crate::auth::constant_time_eq(t.trim(), &state.token) => logged_in(&state),
        _ => login_refused("That token is not valid."),
    }
}

/// A one-time console login link.
#[derive(Serialize, ToSchema)]
struct LoginCode {
    /// Good for one login, within `expires_in_s`.
    code: String,
    /// The link to open: `/login?code=CODE` on this daemon.
    url: String,
    expires_in_s: u64,
}

/// A one-time login link for the console (master token only): the link
/// logs one browser in, once, within ten minutes, and leaves no lasting
/// secret in its history.
#[utoipa::path(post, path = "/login-codes", tag = "daemon",
    responses((status = 200, description = "ok", body = LoginCode), Unauthorized, Forbidden, Internal))]
async fn login_code(State(state): State<AppState>, headers: HeaderMap) -> ApiResult<Json<LoginCode>> {
    let code = state.login_codes.mint();
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok()).unwrap_or_default();
    let base = if host.is_empty() { state.supervisor.endpoint().0 } else { format!("http://{host}") };
    Ok(Json(LoginCode { url: format!("{base}/login?code={code}"), code, expires_in_s: crate::auth::LoginCodes::TTL.as_secs() }))
}

#[derive(Serialize, ToSchema)]
pub struct Health {
    /// `ok`, or `degraded` when the store cannot write (see `store`).
    status: String,
    /// `ok`, or `cannot write: ...` with the reason (a full disk, a lock
    /// never released): hook calls and stops then fail until it heals.
    store: String,
    version: String,
    /// The daemon's public key (Ed25519, base64): the Stop hook's
    /// `--daemon-key`, with which it checks that answers come from this
    /// daemon.
    daemon_key: String,
}

/// Whether the daemon answers (no token needed).
#[utoipa::path(get, path = "/health", tag = "daemon", security(()),
    responses((status = 200, description = "ok", body = Health)))]
async fn health(State(state): State<AppState>) -> Json<Health> {
    let store = state.supervisor.store().can_write().await;
    Json(Health {
        status: if store.is_none() { "ok" } else { "degraded" }.into(),
        store: store.map_or("ok".to_string(), |e| format!("cannot write: {e}")),
        version: env!("CARGO_PKG_VERSION").into(),
        daemon_key: state.key.public_b64(),
    })
}

/// This API's OpenAPI description (no token needed).
#[utoipa::path(get, path = "/openapi.json", tag = "daemon", security(()),
    responses((status = 200, description = "ok", body = Object)))]
async fn openapi() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], crate::openapi::json()).into_response()
}

/// Every campaign with its status and latest verdict.
#[utoipa::path(get, path = "/campaigns", tag = "campaigns",
    responses((status = 200, description = "ok", body = [Object]), Unauthorized, Forbidden, Internal))]
async fn list_campaigns(State(state): State<AppState>) -> ApiResult<Json<Value>> {
    Ok(Json(json!(crate::console::campaign_summaries(&state.supervisor).await?)))
}

#[derive(Deserialize, ToSchema)]
struct CreateCampaign {
    /// The campaign spec (TOML).
    spec_toml: String,
    /// Where the spec was read from, absolute: relative paths in it are taken from its folder.
    #[schema(pattern = "^/")]
    spec_path: String,
}

#[derive(Serialize, ToSchema)]
struct CreatedCampaign {
    id: String,
    name: String,
    mode: String,
}

/// Create a campaign from its spec.
#[utoipa::path(post, path = "/campaigns", tag = "campaigns", request_body = CreateCampaign,
    responses((status = 201, description = "created", body = CreatedCampaign),
        Invalid, Unauthorized, Forbidden, TooLarge, Internal))]
async fn create_campaign(
    State(state): State<AppState>,
    JsonBody(req): JsonBody<CreateCampaign>,
) -> ApiResult<(StatusCode, Json<CreatedCampaign>)> {
    let row = state.supervisor.create_campaign(&req.spec_toml, &req.spec_path).await?;
    Ok((StatusCode::CREATED, Json(CreatedCampaign { id: row.id, name: row.name, mode: row.mode })))
}

fn parse_body<T: serde::de::DeserializeOwned>(body: Value) -> ApiResult<T> {
    serde_json::from_value(body).map_err(|e| ApiError::Invalid(format!("request body: {e}")))
}

/// One campaign: spec, status, latest evaluation, runs.
#[utoipa::path(get, path = "/campaigns/{id}", tag = "campaigns", params(CampaignId),
    responses((status = 200, description = "ok", body = Object), Invalid, Unauthorized, Forbidden, NotFound, Internal))]
async fn show_campaign(
    State(state): State<AppState>,
    ApiPath(CampaignId { id }): ApiPath<CampaignId>,
) -> ApiResult<Json<Value>> {
    Ok(Json(crate::console::campaign_detail(&state.supervisor, &id).await?))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct EvalQuery {
    /// Run the harness even if this tree was evaluated before.
    #[serde(default)]
    force: Option<bool>,
}

/// Evaluate the campaign's workspace now (a snapshot built and run in a
/// fresh folder; cached per tree unless `force`) and return the verdict.
#[utoipa::path(post, path = "/campaigns/{id}/evaluate", tag = "campaigns", params(CampaignId, EvalQuery),
    responses((status = 200, description = "ok", body = Object), Invalid, Unauthorized, Forbidden, NotFound, TooMany, Internal))]
async fn evaluate(
    State(state): State<AppState>,
    ApiPath(CampaignId { id }): ApiPath<CampaignId>,
    ApiQuery(q): ApiQuery<EvalQuery>,
    hook: Option<axum::extract::Extension<HookCaller>>,
) -> ApiResult<Json<Value>> {
    let force = q.force.unwrap_or(false);
    if force && hook.is_some() {
        forced_by_hook_token(&id)?;
    }
    let e = state.supervisor.evaluate(&id, force).await?;
    Ok(Json(serde_json::to_value(e).map_err(anyhow::Error::from)?))
}

/// A request authenticated by a campaign's hook token (what an agent has).
#[derive(Clone, Copy)]
struct HookCaller;

/// How often a hook token may force an evaluation of its campaign: each
/// one runs the harness (minutes on a GPU, and the machine is shared), and
/// an unchanged tree's verdict is cached anyway (THREATS row 16).
const FORCED_EVERY: std::time::Duration = std::time::Duration::from_secs(60);

fn forced_by_hook_token(campaign: &str) -> ApiResult<()> {
    static LAST: std::sync::LazyLock<std::sync::Mutex<std::collections::HashMap<String, std::time::Instant>>> =
        std::sync::LazyLock::new(Default::default);
    let mut last = LAST.lock().expect("forced-evaluation times poisoned");
    let now = std::time::Instant::now();
    if let Some(at) = last.get(campaign) {
        let wait = FORCED_EVERY.saturating_sub(now.duration_since(*at));
        if !wait.is_zero() {
            return Err(ApiError::TooMany(format!(
                "a hook token may force an evaluation of {campaign} once a minute; try again in {} s, or drop \
                 `force` (an unchanged tree's verdict is cached, a changed one is evaluated anyway)",
                wait.as_secs().max(1)
            )));
        }
    }
    last.insert(campaign.to_string(), now);
    Ok(())
}

/// Every evaluation of the campaign, oldest first.
#[utoipa::path(get, path = "/campaigns/{id}/evaluations", tag = "campaigns", params(CampaignId),
    responses((status = 200, description = "ok", body = [Object]),
        Invalid, Unauthorized, Forbidden, NotFound, Internal))]
async fn list_evaluations(
    State(state): State<AppState>,
    ApiPath(CampaignId { id }): ApiPath<CampaignId>,
) -> ApiResult<Json<Value>> {
    state.supervisor.campaign(&id).await?;
    let rows = state.supervisor.store().list_evaluations(&id).await?;
    let list: Vec<Value> = rows
        .into_iter()
        .filter_map(|(eid, body)| {
            let mut v: Value = serde_json::from_str(&body).ok()?;
            v["id"] = json!(eid);
            Some(v)
        })
        .collect();
    Ok(Json(json!(list)))
}

/// The agents whose hooks post events.
#[derive(Deserialize, ToSchema, Clone, Copy)]
#[serde(rename_all = "kebab-case")]
enum HookAgent {
    ClaudeCode,
    Codex,
    Command,
}

impl HookAgent {
    fn as_str(self) -> &'static str {
        match self {
            HookAgent::ClaudeCode => "claude-code",
            HookAgent::Codex => "codex",
            HookAgent::Command => "command",
        }
    }
}

/// A hook event's name: kebab case (`stop`, `post-tool-use`, ...).
fn valid_event(event: &str) -> bool {
    let b = event.as_bytes();
    !b.is_empty()
        && b.len() <= 64
        && b[0].is_ascii_lowercase()
        && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
}

/// An agent's hook event (the payload its hook received on stdin). A
/// `stop` is judged by the Stop gate: the reply's `output` is what the hook
/// prints (a block decision while any scenario fails). With
/// `answer=agent` (Claude Code's HTTP hooks) the answer is that output
/// alone, `{}` when there is none.
#[utoipa::path(post, path = "/campaigns/{id}/hooks/{agent}/{event}", tag = "hooks",
    params(CampaignId,
        ("agent" = inline(HookAgent), Path, description = "The agent whose hook protocol is spoken"),
        ("event" = String, Path, description = "The hook event in kebab case (stop, post-tool-use, session-start, ...)",
            pattern = "^[a-z][a-z0-9-]*$", max_length = 64, example = "post-tool-use"),
        ("x-gadfly-call-id" = Option<String>, Header, description = "One hook invocation's id; its retries send the same one"),
        ("x-gadfly-nonce" = Option<String>, Header, description = "The hook's fresh nonce (printable ASCII, at most 128): the answer then carries `x-gadfly-signature`, the daemon's Ed25519 signature (base64) over the nonce, campaign, agent, event, status and body (see GET /health's `daemon_key`)"),
        SpoolQuery),
    request_body(content = Object, description = "The hook's JSON payload (an object)"),
    responses((status = 200, description = "ok", body = Object),
        Invalid, Unauthorized, Forbidden, NotFound, TooLarge, Internal))]
async fn hook(
    State(state): State<AppState>,
    ApiPath((id, agent, event)): ApiPath<(String, HookAgent, String)>,
    ApiQuery(spool): ApiQuery<SpoolQuery>,
    headers: HeaderMap,
    HookPayload(payload): HookPayload,
) -> ApiResult<Json<Value>> {
    if !valid_event(&event) {
        return Err(ApiError::Invalid(format!(
            "hook event `{event}` must be kebab case (lowercase letters, digits and `-`, at most 64), like `post-tool-use`"
        )));
    }
    let agent = agent.as_str();
    let call_id = headers.get(CALL_ID_HEADER).and_then(|v| v.to_str().ok());
    let for_agent = match spool.answer.as_deref() {
        None => false,
        Some("agent") => true,
        Some(other) => {
            return Err(ApiError::Invalid(format!(
                "unknown `answer={other}`; expected `agent` (the hook's output alone) or nothing (the daemon's reply)"
            )))
        }
    };
    let reply = match spool {
        SpoolQuery { spooled_at: Some(at), outcome, why, .. } => {
            let meta = crate::supervisor::SpooledMeta {
                at,
                outcome: outcome.ok_or_else(|| ApiError::Invalid("a spooled call needs `outcome`".into()))?,
                why: why.unwrap_or_default(),
            };
            state.supervisor.handle_spooled_hook(&id, agent, &event, call_id, payload, &meta).await?
        }
        _ => state.supervisor.handle_hook(&id, agent, &event, call_id, payload).await?,
    };
    if for_agent {
        return Ok(Json(reply.output.unwrap_or_else(|| json!({}))));
    }
    Ok(Json(serde_json::to_value(reply).map_err(anyhow::Error::from)?))
}

/// Set when the hook client replays a call it spooled while the daemon
/// was unreachable (see `spool`); `answer` for an agent posting itself.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct SpoolQuery {
    /// When the hook spooled the call (RFC 3339).
    spooled_at: Option<String>,
    /// What the hook answered the agent then (needed with `spooled_at`).
    #[param(pattern = "^(blocked|allowed|passed)$")]
    outcome: Option<String>,
    /// Why the daemon could not be reached.
    why: Option<String>,
    /// `agent`: answer with the hook's output alone (what Claude Code's
    /// HTTP hooks read), `{}` when there is none.
    #[param(pattern = "^agent$")]
    answer: Option<String>,
}

#[derive(Deserialize, ToSchema)]
struct Ask {
    /// The question (at most 4000 characters).
    #[schema(min_length = 1, max_length = 4000)]
    text: String,
    /// Set when the person started from a bank suggestion.
    #[serde(default)]
    bank_id: Option<String>,
    /// The moment it answers, when it came from a suggestion.
    #[serde(default)]
    #[schema(value_type = Option<crate::openapi::Moment>, inline)]
    moment: Option<String>,
}

/// Queue a question for the agent; it is delivered at its next stop.
#[utoipa::path(post, path = "/campaigns/{id}/questions", tag = "questions", params(CampaignId), request_body = Ask,
    responses((status = 201, description = "created", body = Object),
        Invalid, Unauthorized, Forbidden, NotFound, TooLarge, Internal))]
async fn ask(
    State(state): State<AppState>,
    ApiPath(CampaignId { id }): ApiPath<CampaignId>,
    JsonBody(req): JsonBody<Ask>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let q = state.supervisor.ask_with(&id, &req.text, req.bank_id.as_deref(), req.moment.as_deref()).await?;
    Ok((StatusCode::CREATED, Json(json!(q))))
}

/// The campaign's questions, queued and delivered.
#[utoipa::path(get, path = "/campaigns/{id}/questions", tag = "questions", params(CampaignId),
    responses((status = 200, description = "ok", body = [Object]),
        Invalid, Unauthorized, Forbidden, NotFound, Internal))]
async fn list_questions(
    State(state): State<AppState>,
    ApiPath(CampaignId { id }): ApiPath<CampaignId>,
) -> ApiResult<Json<Value>> {
    state.supervisor.campaign(&id).await?;
    Ok(Json(json!(state.supervisor.store().list_questions(&id, false).await?)))
}

#[derive(Deserialize, ToSchema)]
struct HookInstall {
    /// What `gadfly attach` wrote (settings file, hook binary and their fingerprints).
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    installed: Option<crate::agent::attach::Installed>,
    /// The settings file `gadfly detach` removed the hooks from.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    removed: Option<std::path::PathBuf>,
}

#[derive(Serialize, ToSchema)]
struct Done {
    ok: bool,
}

/// `gadfly attach`/`detach` tell the daemon what they wrote, so a change
/// to it is caught at the agent's next SessionStart or stop.
#[utoipa::path(post, path = "/campaigns/{id}/hook-installs", tag = "hooks", params(CampaignId),
    request_body = HookInstall,
    responses((status = 200, description = "ok", body = Done),
        Invalid, Unauthorized, Forbidden, NotFound, TooLarge, Internal))]
async fn hook_install(
    State(state): State<AppState>,
    ApiPath(CampaignId { id }): ApiPath<CampaignId>,
    JsonBody(req): JsonBody<HookInstall>,
) -> ApiResult<Json<Done>> {
    state.supervisor.record_hook_install(&id, req.installed.as_ref(), req.removed.as_deref()).await?;
    Ok(Json(Done { ok: true }))
}

/// Prometheus metrics (OpenMetrics text).
async fn metrics(State(state): State<AppState>) -> ApiResult<Response> {
    let waiting = state.supervisor.store().count_waiting_questions().await?;
    let jobs = state.supervisor.store().count_queued_jobs().await?;
    let body = crate::metrics::METRICS.render(waiting, jobs);
    Ok(([(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], body).into_response())
}

/// The campaign's hook token (for `gadfly attach` and agents started by hand).
#[derive(Serialize, ToSchema)]
struct HookToken {
    campaign: String,
    /// `gfh1.<campaign>.<mac>`: opens only this campaign's hook events, evaluation and beam tagging.
    token: String,
}

#[utoipa::path(get, path = "/campaigns/{id}/hook-token", tag = "hooks", params(CampaignId),
    responses((status = 200, description = "ok", body = HookToken),
        Invalid, Unauthorized, Forbidden, NotFound, Internal))]
async fn hook_token(
    State(state): State<AppState>,
    ApiPath(CampaignId { id }): ApiPath<CampaignId>,
) -> ApiResult<Json<HookToken>> {
    state.supervisor.campaign(&id).await?;
    let token = crate::auth::hook_token(&state.token, &id);
    Ok(Json(HookToken { campaign: id, token }))
}

/// Every stop attempt (completion claim) and the gate's decision.
#[utoipa::path(get, path = "/campaigns/{id}/stops", tag = "campaigns", params(CampaignId),
    responses((status = 200, description = "ok", body = [Object]),
        Invalid, Unauthorized, Forbidden, NotFound, Internal))]
async fn list_stops(
    State(state): State<AppState>,
    ApiPath(CampaignId { id }): ApiPath<CampaignId>,
) -> ApiResult<Json<Value>> {
    state.supervisor.campaign(&id).await?;
    Ok(Json(json!(state.supervisor.store().list_stop_attempts(&id).await?)))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct After {
    /// Events with an id above this one.
    #[serde(default)]
    #[param(minimum = -9007199254740991.0, maximum = 9007199254740991.0)]
    after: Option<i64>,
    /// At most this many (default 1000; clamped to 1..=10000).
    #[serde(default)]
    #[param(minimum = -9007199254740991.0, maximum = 9007199254740991.0)]
    limit: Option<i64>,
    /// The last N events instead, oldest first (clamped to 1..=10000).
    #[serde(default)]
    #[param(minimum = -9007199254740991.0, maximum = 9007199254740991.0)]
    tail: Option<i64>,
}

/// The campaign's recorded events (hook calls, evaluations, decisions,
/// questions, agent output), oldest first.
#[utoipa::path(get, path = "/campaigns/{id}/log", tag = "events", params(CampaignId, After),
    responses((status = 200, description = "ok", body = [Object]),
        Invalid, Unauthorized, Forbidden, NotFound, Internal))]
async fn list_events(
    State(state): State<AppState>,
    ApiPath(CampaignId { id }): ApiPath<CampaignId>,
    ApiQuery(q): ApiQuery<After>,
) -> ApiResult<Json<Value>> {
    state.supervisor.campaign(&id).await?;
    let limit = q.limit.unwrap_or(1000).clamp(1, 10_000);
    if let Some(n) = q.tail {
        return Ok(Json(json!(state.supervisor.store().tail_events(&id, n.clamp(1, 10_000)).await?)));
    }
    Ok(Json(json!(state.supervisor.store().events_after(&id, q.after.unwrap_or(0), limit).await?)))
}

/// Live events: replays what is stored after `Last-Event-ID` (or
/// `?after=`), then follows the bus. Ends when the daemon shuts down.
#[utoipa::path(get, path = "/campaigns/{id}/events", tag = "events",
    params(CampaignId, After,
        ("last-event-id" = Option<String>, Header, description = "Resume after this event id (overrides `after`)")),
    responses((status = 200, content_type = "text/event-stream", body = String,
        description = "Server-Sent Events: `id` the event id, `event` its kind, `data` the event as JSON; a `resync` event when the stream lagged"),
        Invalid, Unauthorized, Forbidden, NotFound, Internal))]
async fn stream_events(
    State(state): State<AppState>,
    ApiPath(CampaignId { id }): ApiPath<CampaignId>,
    ApiQuery(q): ApiQuery<After>,
    headers: HeaderMap,
) -> ApiResult<Sse<impl futures::Stream<Item = Result<Event, Infallible>>>> {
    state.supervisor.campaign(&id).await?;
    let after = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<i64>().ok())
        .unwrap_or(q.after.unwrap_or(0));
    // Subscribe before reading the backlog, so nothing falls between the two;
    // the backlog is read page by page until it is caught up.
    let live = tokio_stream::wrappers::BroadcastStream::new(state.supervisor.subscribe());
    let store = state.supervisor.store().clone();
    // Ids of the last page replayed: a live event among them was already
    // sent. (On PostgreSQL ids are not in commit order, so a live event may
    // carry an id below the last one replayed; the console dedupes by id.)
    let replayed = std::sync::Arc::new(std::sync::Mutex::new(std::collections::HashSet::<i64>::new()));
    let campaign = id.clone();
    let seen = replayed.clone();
    let replay = futures::stream::unfold(Some(after), move |cursor| {
        let (store, campaign, seen) = (store.clone(), campaign.clone(), seen.clone());
        async move {
            let from = cursor?;
            let page = store.events_after(&campaign, from, 2000).await.unwrap_or_default();
            if page.is_empty() {
                return None;
            }
            let next = page.last().map(|e| e.id);
            {
                let mut s = seen.lock().expect("replay set poisoned");
                s.clear();
                s.extend(page.iter().map(|e| e.id));
            }
            let done = page.len() < 2000;
            let events: Vec<Result<Event, Infallible>> = page.iter().map(|e| Ok(to_sse(e))).collect();
            Some((futures::stream::iter(events), if done { None } else { next }))
        }
    })
    .flatten();
    let campaign = id.clone();
    let follow = live.filter_map(move |item| {
        let campaign = campaign.clone();
        let already = match &item {
            Ok(e) => replayed.lock().expect("replay set poisoned").contains(&e.id) || e.id <= after,
            Err(_) => false,
        };
        async move {
            match item {
                Ok(e) if e.campaign_id == campaign && !already => Some(Ok(to_sse(&e))),
                Ok(_) => None,
                Err(tokio_stream::wrappers::errors::BroadcastStreamRecvError::Lagged(n)) => {
                    Some(Ok(Event::default().event("resync").data(json!({"skipped": n}).to_string())))
                }
            }
        }
    });
    let stream = replay.chain(follow).take_until(state.shutdown.clone().cancelled_owned());
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))))
}

fn to_sse(e: &crate::store::EventRow) -> Event {
    Event::default().id(e.id.to_string()).event(e.kind.clone()).data(serde_json::to_string(e).unwrap_or_default())
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct SuggestQuery {
    /// The moment to suggest questions for.
    #[param(value_type = crate::openapi::Moment, inline)]
    moment: String,
    /// How many (default 5; clamped to 1..=20).
    #[serde(default)]
    #[param(minimum = 0.0, maximum = 4294967295.0)]
    limit: Option<usize>,
}

/// Bank questions that fit a moment of this campaign, best first.
#[utoipa::path(get, path = "/campaigns/{id}/suggestions", tag = "questions", params(CampaignId, SuggestQuery),
    responses((status = 200, description = "ok", body = Object), Invalid, Unauthorized, Forbidden, NotFound, Internal))]
async fn suggestions(
    State(state): State<AppState>,
    ApiPath(CampaignId { id }): ApiPath<CampaignId>,
    ApiQuery(q): ApiQuery<SuggestQuery>,
) -> ApiResult<Json<Value>> {
    let n = q.limit.unwrap_or(5).clamp(1, 20);
    let list = state.supervisor.suggestions(&id, &q.moment, n).await?;
    let suggestions: Vec<Value> = list
        .into_iter()
        .map(|c| {
            json!({
                "id": c.entry.id, "group": c.entry.group, "text": c.entry.text, "rationale": c.entry.rationale,
                "level": c.entry.level, "provenance": c.entry.provenance, "source": c.entry.source,
                "moments": c.entry.moments, "asks": c.asks, "gains": c.gains, "asked_here": c.asked_here,
            })
        })
        .collect();
    Ok(Json(json!({"moment": q.moment, "suggestions": suggestions})))
}

/// The question bank: entries with their learned statistics, problems, counts.
#[utoipa::path(get, path = "/bank", tag = "bank",
    responses((status = 200, description = "ok", body = Object), Unauthorized, Forbidden, Internal))]
async fn bank(State(state): State<AppState>) -> ApiResult<Json<Value>> {
    let bank = state.supervisor.bank().get();
    let status = state.supervisor.bank().status();
    let stats = state.supervisor.bank_stats().await?;
    let entries: Vec<Value> = bank
        .entries
        .iter()
        .map(|e| {
            let mut v = json!(e);
            let s = stats.get(&e.id).cloned().unwrap_or_else(|| crate::bank::learn::EntryStats {
                status: e.provenance.clone(),
                ..Default::default()
            });
            v["stats"] = json!(s);
            v
        })
        .collect();
    Ok(Json(json!({
        "source": bank.source,
        "loaded_at": status.loaded_at,
        "reloads": status.reloads,
        "reload_error": status.error,
        "problems": bank.problems,
        "warnings": bank.warnings,
        "counts": crate::bank::load::counts(&bank.entries),
        "entries": entries,
    })))
}

/// Asks, gains and status per bank entry, learned over all campaigns.
#[utoipa::path(get, path = "/bank/stats", tag = "bank",
    responses((status = 200, description = "ok", body = Object), Unauthorized, Forbidden, Internal))]
async fn bank_stats(State(state): State<AppState>) -> ApiResult<Json<Value>> {
    Ok(Json(json!(state.supervisor.bank_stats().await?)))
}

#[derive(Deserialize, ToSchema)]
struct StartRun {
    /// claude-code, codex or command.
    agent: String,
}

#[derive(Serialize, ToSchema)]
struct RunStarted {
    run_id: i64,
    agent: String,
}

/// Spawn the agent in the campaign's workspace and supervise it.
#[utoipa::path(post, path = "/campaigns/{id}/runs", tag = "runs", params(CampaignId), request_body = StartRun,
    responses((status = 201, description = "created", body = RunStarted),
        Invalid, Unauthorized, Forbidden, NotFound, TooLarge, Internal))]
async fn start_run(
    State(state): State<AppState>,
    ApiPath(CampaignId { id }): ApiPath<CampaignId>,
    JsonBody(req): JsonBody<StartRun>,
) -> ApiResult<(StatusCode, Json<RunStarted>)> {
    let kind = crate::agent::AgentKind::parse(&req.agent).ok_or_else(|| {
        ApiError::Invalid(format!("unknown agent `{}`; expected claude-code, codex or command", req.agent))
    })?;
    state.supervisor.campaign(&id).await?;
    let run_id = crate::agent::run::start(&state.supervisor, &id, kind)
        .await
        .map_err(|e| ApiError::Invalid(format!("{e:#}")))?;
    Ok((StatusCode::CREATED, Json(RunStarted { run_id, agent: kind.as_str().into() })))
}

/// The campaign's agent runs.
#[utoipa::path(get, path = "/campaigns/{id}/runs", tag = "runs", params(CampaignId),
    responses((status = 200, description = "ok", body = [Object]),
        Invalid, Unauthorized, Forbidden, NotFound, Internal))]
async fn list_runs(
    State(state): State<AppState>,
    ApiPath(CampaignId { id }): ApiPath<CampaignId>,
) -> ApiResult<Json<Value>> {
    state.supervisor.campaign(&id).await?;
    Ok(Json(json!(state.supervisor.store().list_runs(&id).await?)))
}

#[derive(Serialize, ToSchema)]
struct Stopped {
    /// False when no agent was running.
    stopped: bool,
}

/// Stop the campaign's running agent (its whole process group).
#[utoipa::path(post, path = "/campaigns/{id}/runs/stop", tag = "runs", params(CampaignId),
    responses((status = 200, description = "ok", body = Stopped),
        Invalid, Unauthorized, Forbidden, NotFound, Internal))]
async fn stop_run(
    State(state): State<AppState>,
    ApiPath(CampaignId { id }): ApiPath<CampaignId>,
) -> ApiResult<Json<Stopped>> {
    state.supervisor.campaign(&id).await?;
    Ok(Json(Stopped { stopped: state.supervisor.stop_run(&id) }))
}

/// Every completion claim: verdict, decision, question, what followed (docs/AUDIT.md).
#[utoipa::path(get, path = "/campaigns/{id}/audit", tag = "campaigns", params(CampaignId),
    responses((status = 200, description = "ok", body = Object), Invalid, Unauthorized, Forbidden, NotFound, Internal))]
async fn campaign_audit(
    State(state): State<AppState>,
    ApiPath(CampaignId { id }): ApiPath<CampaignId>,
) -> ApiResult<Json<Value>> {
    state.supervisor.campaign(&id).await?;
    let audit = crate::audit::campaign(state.supervisor.store(), &id).await?;
    Ok(Json(crate::audit::campaign_json(&audit)))
}

/// The beam's families, best per family, status (evaluates new candidate commits first).
#[utoipa::path(get, path = "/campaigns/{id}/beam", tag = "beam", params(CampaignId),
    responses((status = 200, description = "ok", body = Object), Invalid, Unauthorized, Forbidden, NotFound, Internal))]
async fn beam_list(
    State(state): State<AppState>,
    ApiPath(CampaignId { id }): ApiPath<CampaignId>,
) -> ApiResult<Json<Value>> {
    state.supervisor.campaign(&id).await?;
    Ok(Json(json!(crate::beam::sync(&state.supervisor, &id).await?)))
}

#[derive(Deserialize, ToSchema)]
struct BeamTag {
    /// Lowercase letters, digits, `-`, `_` or `.` (at most 64).
    #[schema(pattern = "^[a-z0-9_][a-z0-9._-]{0,63}$")]
    family: String,
    /// The commit to tag (default: the workspace's HEAD).
    #[serde(default)]
    #[schema(min_length = 1)]
    from: Option<String>,
}

#[derive(Serialize, ToSchema)]
struct BeamTagged {
    family: String,
    #[serde(rename = "ref")]
    r#ref: String,
    commit: String,
}

/// Point refs/heads/beam/FAMILY at a commit and declare the family.
#[utoipa::path(post, path = "/campaigns/{id}/beam/tag", tag = "beam", params(CampaignId), request_body = BeamTag,
    responses((status = 200, description = "ok", body = BeamTagged),
        Invalid, Unauthorized, Forbidden, NotFound, TooLarge, Internal))]
async fn beam_tag(
    State(state): State<AppState>,
    ApiPath(CampaignId { id }): ApiPath<CampaignId>,
    JsonBody(req): JsonBody<BeamTag>,
) -> ApiResult<Json<BeamTagged>> {
    let (_row, spec) = state.supervisor.campaign(&id).await?;
    let from = req.from.unwrap_or_else(|| "HEAD".into());
    let (ws, family) = (spec.workspace.clone(), req.family.clone());
    let (r, commit) = tokio::task::spawn_blocking(move || crate::beam::tag(&ws, &family, &from))
        .await
        .map_err(|e| ApiError::Internal(e.into()))?
        .map_err(|e| ApiError::Invalid(format!("{e:#}")))?;
    state.supervisor.store().upsert_family(&id, &req.family, &r).await?;
    let tagged = crate::events::Event::BeamFamily {
        family: req.family.clone(),
        git_ref: r.clone(),
        how: crate::events::FamilyHow::Tagged { commit: commit.clone() },
    };
    state.supervisor.record_event(&id, None, None, tagged).await?;
    Ok(Json(BeamTagged { family: req.family, r#ref: r, commit }))
}

#[derive(Deserialize, ToSchema)]
struct BeamAbandon {
    #[schema(pattern = "^[a-z0-9_][a-z0-9._-]{0,63}$")]
    family: String,
    /// Why (kept on record; must not be blank).
    #[schema(pattern = "\\S")]
    reason: String,
}

#[derive(Serialize, ToSchema)]
struct BeamAbandoned {
    family: String,
    /// Always `abandoned`.
    status: String,
    reason: String,
}

/// Abandon a family, with the reason on record.
#[utoipa::path(post, path = "/campaigns/{id}/beam/abandon", tag = "beam", params(CampaignId),
    request_body = BeamAbandon,
    responses((status = 200, description = "ok", body = BeamAbandoned),
        Invalid, Unauthorized, Forbidden, NotFound, TooLarge, Internal))]
async fn beam_abandon(
    State(state): State<AppState>,
    ApiPath(CampaignId { id }): ApiPath<CampaignId>,
    JsonBody(req): JsonBody<BeamAbandon>,
) -> ApiResult<Json<BeamAbandoned>> {
    state.supervisor.campaign(&id).await?;
    if req.reason.trim().is_empty() {
        return Err(ApiError::Invalid("abandoning a family needs a reason".into()));
    }
    if !state.supervisor.store().abandon_family(&id, &req.family, req.reason.trim()).await? {
        return Err(ApiError::NotFound(format!("no family `{}` in campaign {id}", req.family)));
    }
    let abandoned = crate::events::Event::BeamAbandoned { family: req.family.clone(), reason: req.reason.clone() };
    state.supervisor.record_event(&id, None, None, abandoned).await?;
    Ok(Json(BeamAbandoned { family: req.family, status: "abandoned".into(), reason: req.reason }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
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
