//! What the daemon says about itself: `/api/v1/health`,
//! `/api/v1/openapi.json` (both without a token) and `/metrics`.

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;

use super::{ApiResult, AppState};

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
pub(super) async fn health(State(state): State<AppState>) -> Json<Health> {
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
pub(super) async fn openapi() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], super::openapi::json()).into_response()
}

/// Prometheus metrics (OpenMetrics text).
pub(super) async fn metrics(State(state): State<AppState>) -> ApiResult<Response> {
    let waiting = state.supervisor.store().count_waiting_questions().await?;
    let jobs = state.supervisor.store().count_queued_jobs().await?;
    let body = crate::metrics::METRICS.render(waiting, jobs);
    Ok(([(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], body).into_response())
}
