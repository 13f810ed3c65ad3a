//! Agent runs: spawn the campaign's agent in its workspace, list the runs,
//! stop the running one.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use utoipa::ToSchema;

use super::openapi::{Conflict, Forbidden, Internal, Invalid, NotFound, TooLarge, Unauthorized};
use super::{ApiError, ApiPath, ApiResult, AppState, CampaignId, JsonBody};

#[derive(Deserialize, ToSchema)]
pub(super) struct StartRun {
    /// claude-code, codex or command.
    agent: String,
    /// Start the agent without the red-team battery that `[redteam]
    /// before_start` runs first.
    #[serde(default)]
    force: bool,
}

#[derive(Serialize, ToSchema)]
pub(super) struct RunStarted {
    /// The run's id (global across campaigns).
    run_id: i64,
    /// Its place among the campaign's runs (1 for its first): what gadfly's
    /// words call it ("run 2").
    run_number: usize,
    agent: String,
}

/// Spawn the agent in the campaign's workspace and supervise it.
#[utoipa::path(post, path = "/campaigns/{id}/runs", tag = "runs", params(CampaignId), request_body = StartRun,
    responses((status = 201, description = "created", body = RunStarted),
        Invalid, Unauthorized, Forbidden, NotFound, Conflict, TooLarge, Internal))]
pub(super) async fn start_run(
    State(state): State<AppState>,
    ApiPath(CampaignId { id }): ApiPath<CampaignId>,
    JsonBody(req): JsonBody<StartRun>,
) -> ApiResult<(StatusCode, Json<RunStarted>)> {
    let kind = crate::agent::AgentKind::parse(&req.agent).ok_or_else(|| {
        ApiError::Invalid(format!("unknown agent `{}`; expected claude-code, codex or command", req.agent))
    })?;
    state.supervisor.campaign_with_workspace(&id).await?;
    let run_id =
        state.supervisor.start_run_with(&id, kind, req.force).await.map_err(|e| ApiError::Invalid(format!("{e:#}")))?;
    let runs = state.supervisor.store().list_runs(&id).await?;
    let run_number = crate::evaluation::number_in(runs.iter().map(|r| r.id), run_id);
    Ok((StatusCode::CREATED, Json(RunStarted { run_id, run_number, agent: kind.as_str().into() })))
}

/// The campaign's agent runs.
#[utoipa::path(get, path = "/campaigns/{id}/runs", tag = "runs", params(CampaignId),
    responses((status = 200, description = "ok", body = [Object]),
        Invalid, Unauthorized, Forbidden, NotFound, Internal))]
pub(super) async fn list_runs(
    State(state): State<AppState>,
    ApiPath(CampaignId { id }): ApiPath<CampaignId>,
) -> ApiResult<Json<Value>> {
    state.supervisor.campaign(&id).await?;
    Ok(Json(json!(state.supervisor.store().list_runs(&id).await?)))
}

#[derive(Serialize, ToSchema)]
pub(super) struct Stopped {
    /// False when no agent was running.
    stopped: bool,
}

/// Stop the campaign's running agent (its whole process group).
#[utoipa::path(post, path = "/campaigns/{id}/runs/stop", tag = "runs", params(CampaignId),
    responses((status = 200, description = "ok", body = Stopped),
        Invalid, Unauthorized, Forbidden, NotFound, Internal))]
pub(super) async fn stop_run(
    State(state): State<AppState>,
    ApiPath(CampaignId { id }): ApiPath<CampaignId>,
) -> ApiResult<Json<Stopped>> {
    state.supervisor.campaign(&id).await?;
    Ok(Json(Stopped { stopped: state.supervisor.stop_run(&id) }))
}
