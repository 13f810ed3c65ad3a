//! The HTTP layer: the API under /api/v1 (bearer token), the live event
//! stream (SSE), the console's pages with the cookie login, and the
//! OpenAPI description. This file holds what every handler shares: the
//! router, [`AppState`], the one error shape ([`ApiError`], [`ErrorBody`])
//! and the extractors that refuse a bad request in that shape.
//!
//! | file | what |
//! |---|---|
//! | `mod.rs` | the router, `AppState`, the error shape, the extractors |
//! | `middleware.rs` | the layers: token, cookie and CSRF checks, Host and Origin, hook-answer signing, the error shape of every answer, the request timeout |
//! | `campaigns.rs` | create, list and show campaigns; evaluate; archive and unarchive; evaluations, stops, audit |
//! | `hooks.rs` | an agent's hook events, hook installs, the hook token |
//! | `questions.rs` | queue and list questions; bank suggestions, the bank and its stats |
//! | `events.rs` | the event log and the live stream (SSE) |
//! | `runs.rs` | start, list and stop agent runs |
//! | `redteam.rs` | the red-team battery against the campaign's harness: start it, read its report |
//! | `beam.rs` | the beam's families: list, tag, abandon |
//! | `login.rs` | the console's login (token, form, one-time codes) |
//! | `status.rs` | `/health`, `/openapi.json`, `/metrics` |
//! | `views.rs` | the JSON of a campaign list and a campaign, shared by the API and the pages |
//! | `pages.rs` | the plain server-rendered pages and the login form |
//! | `web.rs` | the console's static assets |
//! | `openapi.rs` | the OpenAPI description, from the handlers' annotations |
//! | `auth.rs` | who may call what: the master token, hook tokens, login codes |
//! | `serve.rs` | the accept loop: hyper HTTP/1.1 with a header-read deadline |

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request};
use axum::http::{header, StatusCode};
use axum::middleware::{from_fn, from_fn_with_state};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use utoipa::{IntoParams, ToSchema};

use crate::app::{Supervisor, SupervisorError};

pub mod auth;
mod beam;
mod campaigns;
mod claims;
mod events;
mod hooks;
mod login;
pub mod middleware;
mod notify;
pub mod openapi;
pub mod pages;
mod questions;
mod redteam;
mod runs;
pub mod serve;
mod spend;
mod status;
pub mod views;
pub mod web;

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
    pub login_codes: std::sync::Arc<auth::LoginCodes>,
}

/// The one error shape of the API: `{"code", "message"}`.
#[derive(Debug)]
pub enum ApiError {
    NotFound(String),
    Invalid(String),
    Unauthorized,
    Forbidden(String),
    /// A sound request the campaign's state forbids (409): its workspace
    /// folder is gone.
    Conflict(String),
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
    /// invalid, unauthorized, forbidden, not_found, conflict, method_not_allowed, too_large, too_many or internal
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
            ApiError::Conflict(m) => (StatusCode::CONFLICT, "conflict", m),
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
            SupervisorError::Conflict(m) => ApiError::Conflict(m),
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

fn parse_body<T: serde::de::DeserializeOwned>(body: Value) -> ApiResult<T> {
    serde_json::from_value(body).map_err(|e| ApiError::Invalid(format!("request body: {e}")))
}

type ApiResult<T> = Result<T, ApiError>;

pub fn router(state: AppState) -> Router {
    let api = Router::new()
        .route("/campaigns", get(campaigns::list_campaigns).post(campaigns::create_campaign))
        .route("/campaigns/{id}", get(campaigns::show_campaign))
        .route("/campaigns/{id}/evaluate", post(campaigns::evaluate))
        .route("/campaigns/{id}/calibrate", post(campaigns::calibrate))
        .route("/campaigns/{id}/archive", post(campaigns::archive))
        .route("/campaigns/{id}/unarchive", post(campaigns::unarchive))
        .route("/campaigns/{id}/evaluations", get(campaigns::list_evaluations))
        .route("/campaigns/{id}/evaluation-progress", get(campaigns::evaluation_progress))
        .route("/campaigns/{id}/hooks/{agent}/{event}", post(hooks::hook))
        .route("/campaigns/{id}/questions", get(questions::list_questions).post(questions::ask))
        .route("/campaigns/{id}/questions/open", get(questions::open_questions))
        .route("/campaigns/{id}/answers", post(questions::answer))
        .route("/campaigns/{id}/stops", get(campaigns::list_stops))
        .route("/campaigns/{id}/audit", get(campaigns::campaign_audit))
        .route("/campaigns/{id}/claims", get(claims::list_claims).post(claims::file_claim))
        .route("/campaigns/{id}/claims/{claim}/accept", post(claims::accept_claim))
        .route("/campaigns/{id}/claims/{claim}/reject", post(claims::reject_claim))
        .route("/campaigns/{id}/beam", get(beam::beam_list))
        .route("/campaigns/{id}/beam/tag", post(beam::beam_tag))
        .route("/campaigns/{id}/beam/abandon", post(beam::beam_abandon))
        .route("/campaigns/{id}/events", get(events::stream_events))
        .route("/campaigns/{id}/log", get(events::list_events))
        .route("/campaigns/{id}/suggestions", get(questions::suggestions))
        .route("/campaigns/{id}/runs", get(runs::list_runs).post(runs::start_run))
        .route("/campaigns/{id}/runs/stop", post(runs::stop_run))
        .route("/campaigns/{id}/redteam", get(redteam::redteam_state).post(redteam::start_redteam))
        .route("/campaigns/{id}/spend", get(spend::spend))
        .route("/campaigns/{id}/notify", get(notify::show_notify).put(notify::set_notify))
        .route("/campaigns/{id}/hook-token", get(hooks::hook_token))
        .route("/login-codes", post(login::login_code))
        .route("/campaigns/{id}/hook-installs", post(hooks::hook_install))
        .route("/bank", get(questions::bank))
        .route("/bank/stats", get(questions::bank_stats))
        .route_layer(from_fn_with_state(state.clone(), middleware::require_token))
        .route("/health", get(status::health))
        .route("/openapi.json", get(status::openapi));
    // Prometheus scrapes with the bearer token (`authorization` in its scrape config).
    let metrics = Router::new()
        .route("/metrics", get(status::metrics))
        .route_layer(from_fn_with_state(state.clone(), middleware::require_token));
    let pages = Router::new()
        .route("/", get(web::campaigns_page))
        .route("/campaigns/{id}", get(web::campaign_page))
        .route("/bank", get(web::bank_page))
        .route("/replay", get(web::replay_page))
        .route_layer(from_fn_with_state(state.clone(), middleware::require_cookie))
        .route("/login", get(login::login).post(login::login_form_post))
        .route("/assets/{*path}", get(web::serve_asset));
    Router::new()
        .nest("/api/v1", api)
        .merge(metrics)
        .merge(pages)
        .layer(from_fn(middleware::request_timeout))
        .layer(from_fn_with_state(state.clone(), middleware::check_host_and_origin))
        .layer(tower_http::limit::RequestBodyLimitLayer::new(BODY_LIMIT))
        // axum's extractors stop at 2 MiB by default, under the layer's
        // limit: a hook body between the two was refused with a message
        // naming 16 MiB (THREATS row 14). One limit, the documented one.
        .layer(axum::extract::DefaultBodyLimit::max(BODY_LIMIT))
        .layer(from_fn(middleware::api_error_shape))
        .layer(from_fn_with_state(state.clone(), middleware::sign_hook_answers))
        .layer(tower_http::trace::TraceLayer::new_for_http())
        .with_state(state)
}
