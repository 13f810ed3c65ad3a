//! The HTTP API (under /api/v1, bearer token), the live event stream (SSE)
//! and the console's pages, with the cookie login.

use std::convert::Infallible;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path, Query, Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures::StreamExt;
use serde::Deserialize;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use crate::supervisor::{Supervisor, SupervisorError};

#[derive(Clone)]
pub struct AppState {
    pub supervisor: Supervisor,
    pub token: String,
    pub shutdown: CancellationToken,
    /// When false, only loopback Host headers are served (DNS rebinding).
    pub allow_remote: bool,
}

/// The one error shape of the API: `{"code", "message"}`.
#[derive(Debug)]
pub enum ApiError {
    NotFound(String),
    Invalid(String),
    Unauthorized,
    Forbidden(String),
    Internal(anyhow::Error),
}

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
            ApiError::Internal(e) => {
                tracing::error!(error = %e, chain = ?e, "request failed");
                (StatusCode::INTERNAL_SERVER_ERROR, "internal", format!("internal error: {e:#}"))
            }
        };
        (status, Json(json!({"code": code, "message": message}))).into_response()
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
        .route("/campaigns/{id}/hook-installs", post(hook_install))
        .route("/bank", get(bank))
        .route("/bank/stats", get(bank_stats))
        .route_layer(middleware::from_fn_with_state(state.clone(), require_token))
        .route("/health", get(health));
    // Prometheus scrapes with the bearer token (`authorization` in its scrape config).
    let metrics = Router::new()
        .route("/metrics", get(metrics))
        .route_layer(middleware::from_fn_with_state(state.clone(), require_token));
    let pages = Router::new()
        .route("/", get(crate::web::campaigns_page))
        .route("/campaigns/{id}", get(crate::web::campaign_page))
        .route("/bank", get(crate::web::bank_page))
        .route_layer(middleware::from_fn_with_state(state.clone(), require_cookie))
        .route("/login", get(login))
        .route("/assets/{*path}", get(crate::web::serve_asset));
    Router::new()
        .nest("/api/v1", api)
        .merge(metrics)
        .merge(pages)
        .layer(middleware::from_fn_with_state(state.clone(), check_host_and_origin))
        .layer(tower_http::limit::RequestBodyLimitLayer::new(16 * 1024 * 1024))
        .layer(tower_http::trace::TraceLayer::new_for_http())
        .with_state(state)
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
            let origin_host = origin.split("://").nth(1).map(host_of).unwrap_or_default();
            let own = req.headers().get(header::HOST).and_then(|v| v.to_str().ok()).map(host_of).unwrap_or_default();
            if origin == "null" || (origin_host != own && !(loopback(&origin_host) && loopback(&own))) {
                return (StatusCode::FORBIDDEN, Json(json!({"code": "forbidden_origin", "message": format!("cross-origin request from {origin} refused")}))).into_response();
            }
        }
    }
    next.run(req).await
}

fn constant_time_eq(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

pub const COOKIE: &str = "gadfly_session";
/// One hook invocation's id; its retries send the same one.
pub const CALL_ID_HEADER: &str = "x-gadfly-call-id";

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
    let presented = bearer.or_else(|| cookie_token(req.headers()));
    match presented.as_deref().and_then(|t| crate::auth::grant(&state.token, t)) {
        Some(crate::auth::Grant::Full) => next.run(req).await,
        Some(crate::auth::Grant::Hooks(campaign)) => {
            if crate::auth::hook_scope_allows(req.method(), req.uri().path(), &campaign) {
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
        Some(t) if constant_time_eq(&t, &state.token) => next.run(req).await,
        _ => (StatusCode::UNAUTHORIZED, Html(crate::console::login_form(None))).into_response(),
    }
}

#[derive(Deserialize)]
struct LoginQuery {
    token: Option<String>,
}

async fn login(State(state): State<AppState>, Query(q): Query<LoginQuery>) -> Response {
    match q.token {
        Some(t) if constant_time_eq(t.trim(), &state.token) => {
            let cookie = format!("{COOKIE}={}; Path=/; HttpOnly; SameSite=Strict", state.token);
            ([(header::SET_COOKIE, cookie)], Redirect::to("/")).into_response()
        }
        Some(_) => (StatusCode::UNAUTHORIZED, Html(crate::console::login_form(Some("That token is not valid."))))
            .into_response(),
        None => Html(crate::console::login_form(None)).into_response(),
    }
}

async fn health() -> Json<Value> {
    Json(json!({"status": "ok", "version": env!("CARGO_PKG_VERSION")}))
}

async fn list_campaigns(State(state): State<AppState>) -> ApiResult<Json<Value>> {
    Ok(Json(json!(crate::console::campaign_summaries(&state.supervisor).await?)))
}

#[derive(Deserialize)]
struct CreateCampaign {
    spec_toml: String,
    spec_path: String,
}

async fn create_campaign(State(state): State<AppState>, body: Bytes) -> ApiResult<(StatusCode, Json<Value>)> {
    let req: CreateCampaign = parse_body(&body)?;
    let row = state.supervisor.create_campaign(&req.spec_toml, &req.spec_path).await?;
    Ok((StatusCode::CREATED, Json(json!({"id": row.id, "name": row.name, "mode": row.mode}))))
}

fn parse_body<T: serde::de::DeserializeOwned>(body: &[u8]) -> ApiResult<T> {
    serde_json::from_slice(body).map_err(|e| ApiError::Invalid(format!("request body: {e}")))
}

async fn show_campaign(State(state): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    Ok(Json(crate::console::campaign_detail(&state.supervisor, &id).await?))
}

#[derive(Deserialize)]
struct EvalQuery {
    #[serde(default)]
    force: bool,
}

async fn evaluate(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<EvalQuery>,
) -> ApiResult<Json<Value>> {
    let e = state.supervisor.evaluate(&id, q.force).await?;
    Ok(Json(serde_json::to_value(e).map_err(anyhow::Error::from)?))
}

async fn list_evaluations(State(state): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
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

async fn hook(
    State(state): State<AppState>,
    Path((id, agent, event)): Path<(String, String, String)>,
    Query(spool): Query<SpoolQuery>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<Json<Value>> {
    let payload: Value =
        serde_json::from_slice(&body).map_err(|e| ApiError::Invalid(format!("hook payload is not JSON: {e}")))?;
    let call_id = headers.get(CALL_ID_HEADER).and_then(|v| v.to_str().ok());
    let reply = match spool {
        SpoolQuery { spooled_at: Some(at), outcome, why } => {
            let meta = crate::supervisor::SpooledMeta {
                at,
                outcome: outcome.ok_or_else(|| ApiError::Invalid("a spooled call needs `outcome`".into()))?,
                why: why.unwrap_or_default(),
            };
            state.supervisor.handle_spooled_hook(&id, &agent, &event, call_id, payload, &meta).await?
        }
        _ => state.supervisor.handle_hook(&id, &agent, &event, call_id, payload).await?,
    };
    Ok(Json(serde_json::to_value(reply).map_err(anyhow::Error::from)?))
}

/// Set when the hook client replays a call it spooled while the daemon
/// was unreachable (see `spool`).
#[derive(Deserialize)]
struct SpoolQuery {
    spooled_at: Option<String>,
    outcome: Option<String>,
    why: Option<String>,
}

#[derive(Deserialize)]
struct Ask {
    text: String,
    /// Set when the person started from a bank suggestion.
    #[serde(default)]
    bank_id: Option<String>,
    #[serde(default)]
    moment: Option<String>,
}

async fn ask(
    State(state): State<AppState>,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let req: Ask = parse_body(&body)?;
    let q = state.supervisor.ask_with(&id, &req.text, req.bank_id.as_deref(), req.moment.as_deref()).await?;
    Ok((StatusCode::CREATED, Json(json!(q))))
}

async fn list_questions(State(state): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    state.supervisor.campaign(&id).await?;
    Ok(Json(json!(state.supervisor.store().list_questions(&id, false).await?)))
}

#[derive(Deserialize)]
struct HookInstall {
    #[serde(default)]
    installed: Option<crate::agent::attach::Installed>,
    #[serde(default)]
    removed: Option<std::path::PathBuf>,
}

/// `gadfly attach`/`detach` tell the daemon what they wrote, so a change
/// to it is caught at the agent's next SessionStart or stop.
async fn hook_install(State(state): State<AppState>, Path(id): Path<String>, body: Bytes) -> ApiResult<Json<Value>> {
    let req: HookInstall = parse_body(&body)?;
    state.supervisor.record_hook_install(&id, req.installed.as_ref(), req.removed.as_deref()).await?;
    Ok(Json(json!({"ok": true})))
}

/// Prometheus metrics (OpenMetrics text).
async fn metrics(State(state): State<AppState>) -> ApiResult<Response> {
    let waiting = state.supervisor.store().count_waiting_questions().await?;
    let body = crate::metrics::METRICS.render(waiting);
    Ok(([(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], body).into_response())
}

/// The campaign's hook token (for `gadfly attach` and agents started by hand).
async fn hook_token(State(state): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    state.supervisor.campaign(&id).await?;
    Ok(Json(json!({"campaign": id, "token": crate::auth::hook_token(&state.token, &id)})))
}

async fn list_stops(State(state): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    state.supervisor.campaign(&id).await?;
    Ok(Json(json!(state.supervisor.store().list_stop_attempts(&id).await?)))
}

#[derive(Deserialize)]
struct After {
    #[serde(default)]
    after: i64,
    #[serde(default)]
    limit: Option<i64>,
    /// The last N events instead (oldest first).
    #[serde(default)]
    tail: Option<i64>,
}

async fn list_events(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<After>,
) -> ApiResult<Json<Value>> {
    state.supervisor.campaign(&id).await?;
    let limit = q.limit.unwrap_or(1000).clamp(1, 10_000);
    if let Some(n) = q.tail {
        return Ok(Json(json!(state.supervisor.store().tail_events(&id, n.clamp(1, 10_000)).await?)));
    }
    Ok(Json(json!(state.supervisor.store().events_after(&id, q.after, limit).await?)))
}

/// Live events: replays what is stored after `Last-Event-ID` (or
/// `?after=`), then follows the bus. Ends when the daemon shuts down.
async fn stream_events(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<After>,
    headers: HeaderMap,
) -> ApiResult<Sse<impl futures::Stream<Item = Result<Event, Infallible>>>> {
    state.supervisor.campaign(&id).await?;
    let after = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<i64>().ok())
        .unwrap_or(q.after);
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

#[derive(Deserialize)]
struct SuggestQuery {
    moment: String,
    #[serde(default)]
    limit: Option<usize>,
}

async fn suggestions(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<SuggestQuery>,
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

async fn bank_stats(State(state): State<AppState>) -> ApiResult<Json<Value>> {
    Ok(Json(json!(state.supervisor.bank_stats().await?)))
}

#[derive(Deserialize)]
struct StartRun {
    agent: String,
}

async fn start_run(
    State(state): State<AppState>,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let req: StartRun = parse_body(&body)?;
    let kind = crate::agent::AgentKind::parse(&req.agent).ok_or_else(|| {
        ApiError::Invalid(format!("unknown agent `{}`; expected claude-code, codex or command", req.agent))
    })?;
    state.supervisor.campaign(&id).await?;
    let run_id = crate::agent::run::start(&state.supervisor, &id, kind)
        .await
        .map_err(|e| ApiError::Invalid(format!("{e:#}")))?;
    Ok((StatusCode::CREATED, Json(json!({"run_id": run_id, "agent": kind.as_str()}))))
}

async fn list_runs(State(state): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    state.supervisor.campaign(&id).await?;
    Ok(Json(json!(state.supervisor.store().list_runs(&id).await?)))
}

async fn stop_run(State(state): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    state.supervisor.campaign(&id).await?;
    Ok(Json(json!({"stopped": state.supervisor.stop_run(&id)})))
}

async fn campaign_audit(State(state): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    state.supervisor.campaign(&id).await?;
    let audit = crate::audit::campaign(state.supervisor.store(), &id).await?;
    Ok(Json(crate::audit::campaign_json(&audit)))
}

async fn beam_list(State(state): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    state.supervisor.campaign(&id).await?;
    Ok(Json(json!(crate::beam::sync(&state.supervisor, &id).await?)))
}

#[derive(Deserialize)]
struct BeamTag {
    family: String,
    #[serde(default)]
    from: Option<String>,
}

async fn beam_tag(State(state): State<AppState>, Path(id): Path<String>, body: Bytes) -> ApiResult<Json<Value>> {
    let req: BeamTag = parse_body(&body)?;
    let (_row, spec) = state.supervisor.campaign(&id).await?;
    let from = req.from.unwrap_or_else(|| "HEAD".into());
    let (ws, family) = (spec.workspace.clone(), req.family.clone());
    let (r, commit) = tokio::task::spawn_blocking(move || crate::beam::tag(&ws, &family, &from))
        .await
        .map_err(|e| ApiError::Internal(e.into()))?
        .map_err(|e| ApiError::Invalid(format!("{e:#}")))?;
    state.supervisor.store().upsert_family(&id, &req.family, &r).await?;
    state
        .supervisor
        .record(
            &id,
            None,
            "beam.family",
            None,
            json!({"family": req.family, "ref": r, "commit": commit, "how": "tagged"}),
        )
        .await?;
    Ok(Json(json!({"family": req.family, "ref": r, "commit": commit})))
}

#[derive(Deserialize)]
struct BeamAbandon {
    family: String,
    reason: String,
}

async fn beam_abandon(State(state): State<AppState>, Path(id): Path<String>, body: Bytes) -> ApiResult<Json<Value>> {
    let req: BeamAbandon = parse_body(&body)?;
    state.supervisor.campaign(&id).await?;
    if req.reason.trim().is_empty() {
        return Err(ApiError::Invalid("abandoning a family needs a reason".into()));
    }
    if !state.supervisor.store().abandon_family(&id, &req.family, req.reason.trim()).await? {
        return Err(ApiError::NotFound(format!("no family `{}` in campaign {id}", req.family)));
    }
    state
        .supervisor
        .record(&id, None, "beam.abandoned", None, json!({"family": req.family, "reason": req.reason}))
        .await?;
    Ok(Json(json!({"family": req.family, "status": "abandoned", "reason": req.reason})))
}
