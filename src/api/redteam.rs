//! The red-team battery against a campaign's harness: start it, read the
//! latest report. The master token only: a hook token (what an agent has)
//! is refused by `require_token`, so the agent can neither run the battery
//! nor learn from it which checks its harness lacks.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::openapi::{Conflict, Forbidden, Internal, Invalid, NotFound, Unauthorized};
use super::{ApiPath, ApiResult, AppState, CampaignId};

#[derive(Serialize, ToSchema)]
pub(super) struct RedteamStarted {
    /// The battery's id: the report it writes carries it.
    id: String,
    /// False when a battery was already running for the campaign (its id
    /// is given): one runs at a time.
    started: bool,
}

/// Start the red-team battery against the campaign's harness, in the
/// background: every attack that applies to the campaign, each in a
/// throwaway copy of the workspace, through the campaign's own evaluation
/// pipeline. `GET` the same path for its progress and report.
#[utoipa::path(post, path = "/campaigns/{id}/redteam", tag = "redteam", params(CampaignId),
    responses((status = 202, description = "started, or already running", body = RedteamStarted),
        Invalid, Unauthorized, Forbidden, NotFound, Conflict, Internal))]
pub(super) async fn start_redteam(
    State(state): State<AppState>,
    ApiPath(CampaignId { id }): ApiPath<CampaignId>,
) -> ApiResult<(StatusCode, Json<RedteamStarted>)> {
    let (battery, started) = state.supervisor.start_redteam(&id, "api").await?;
    Ok((StatusCode::ACCEPTED, Json(RedteamStarted { id: battery, started })))
}

/// The battery in progress (`running`: its id, attacks done and in all;
/// null when none runs) and the latest report (null before the first):
/// per attack, held (with the check that caught it and its reason),
/// BROKEN (the stop would have been allowed, with the missing check) or
/// not applicable (with why), and the evidence.
#[utoipa::path(get, path = "/campaigns/{id}/redteam", tag = "redteam", params(CampaignId),
    responses((status = 200, description = "ok", body = Object), Invalid, Unauthorized, Forbidden, NotFound, Internal))]
pub(super) async fn redteam_state(
    State(state): State<AppState>,
    ApiPath(CampaignId { id }): ApiPath<CampaignId>,
) -> ApiResult<Json<Value>> {
    let s = state.supervisor.redteam_state(&id).await?;
    Ok(Json(serde_json::to_value(s).map_err(anyhow::Error::from)?))
}
