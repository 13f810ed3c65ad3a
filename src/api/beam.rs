//! The beam's families (see `crate::beam` and `crate::app::beam`): list
//! them (evaluating new candidate commits first), tag a commit as a family,
//! abandon one.

use axum::extract::State;
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use utoipa::ToSchema;

use super::openapi::{Forbidden, Internal, Invalid, NotFound, TooLarge, Unauthorized};
use super::{ApiError, ApiPath, ApiResult, AppState, CampaignId, JsonBody};

/// The beam's families, best per family, status (evaluates new candidate commits first).
#[utoipa::path(get, path = "/campaigns/{id}/beam", tag = "beam", params(CampaignId),
    responses((status = 200, description = "ok", body = Object), Invalid, Unauthorized, Forbidden, NotFound, Internal))]
pub(super) async fn beam_list(
    State(state): State<AppState>,
    ApiPath(CampaignId { id }): ApiPath<CampaignId>,
) -> ApiResult<Json<Value>> {
    state.supervisor.campaign(&id).await?;
    Ok(Json(json!(crate::app::beam::sync(&state.supervisor, &id).await?)))
}

#[derive(Deserialize, ToSchema)]
pub(super) struct BeamTag {
    /// Lowercase letters, digits, `-`, `_` or `.` (at most 64).
    #[schema(pattern = "^[a-z0-9_][a-z0-9._-]{0,63}$")]
    family: String,
    /// The commit to tag (default: the workspace's HEAD).
    #[serde(default)]
    #[schema(min_length = 1)]
    from: Option<String>,
}

#[derive(Serialize, ToSchema)]
pub(super) struct BeamTagged {
    family: String,
    #[serde(rename = "ref")]
    r#ref: String,
    commit: String,
}

/// Point refs/heads/beam/FAMILY at a commit and declare the family.
#[utoipa::path(post, path = "/campaigns/{id}/beam/tag", tag = "beam", params(CampaignId), request_body = BeamTag,
    responses((status = 200, description = "ok", body = BeamTagged),
        Invalid, Unauthorized, Forbidden, NotFound, TooLarge, Internal))]
pub(super) async fn beam_tag(
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
    crate::app::beam::record_tagged(&state.supervisor, &id, &req.family, &r, &commit).await?;
    Ok(Json(BeamTagged { family: req.family, r#ref: r, commit }))
}

#[derive(Deserialize, ToSchema)]
pub(super) struct BeamAbandon {
    #[schema(pattern = "^[a-z0-9_][a-z0-9._-]{0,63}$")]
    family: String,
    /// Why (kept on record; must not be blank).
    #[schema(pattern = "\\S")]
    reason: String,
}

#[derive(Serialize, ToSchema)]
pub(super) struct BeamAbandoned {
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
pub(super) async fn beam_abandon(
    State(state): State<AppState>,
    ApiPath(CampaignId { id }): ApiPath<CampaignId>,
    JsonBody(req): JsonBody<BeamAbandon>,
) -> ApiResult<Json<BeamAbandoned>> {
    state.supervisor.campaign(&id).await?;
    if req.reason.trim().is_empty() {
        return Err(ApiError::Invalid("abandoning a family needs a reason".into()));
    }
    if !crate::app::beam::abandon(&state.supervisor, &id, &req.family, &req.reason).await? {
        return Err(ApiError::NotFound(format!("no family `{}` in campaign {id}", req.family)));
    }
    Ok(Json(BeamAbandoned { family: req.family, status: "abandoned".into(), reason: req.reason }))
}
