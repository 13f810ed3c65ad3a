//! Claims an agent files itself (`gadfly claim`, with the campaign's hook
//! token) and a person's verdict on a limit claim (the master token or the
//! console's cookie and CSRF token only: the hook token's scope stops at
//! `POST /campaigns/{id}/claims`). See `crate::app::claims`.

use axum::extract::State;
use axum::Json;
use serde::Deserialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::openapi::{Forbidden, Internal, Invalid, NotFound, TooLarge, Unauthorized};
use super::{ApiPath, ApiResult, AppState, CampaignId, JsonBody};
use crate::app::claims::FiledClaim;
use crate::events::{ClaimFile, ClaimKind};

/// One evidence file, as text.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct EvidenceFile {
    /// The file's name (1 to 200 characters).
    #[schema(min_length = 1, max_length = 200)]
    name: String,
    /// Its text (at most 64 KiB).
    text: String,
}

impl EvidenceFile {
    pub(super) fn into_file(self) -> ClaimFile {
        ClaimFile { name: self.name, text: self.text }
    }
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct NewClaim {
    /// `limit` (the goal cannot be reached: a person may accept it), `blocked` (something outside the
    /// agent's reach stops it) or `done` (a completion claim: the gate still judges it at the stop).
    #[schema(value_type = String, pattern = "^(limit|blocked|done)$")]
    claim: ClaimKind,
    /// What is claimed and why, in the agent's own words (not blank; at most 4000 characters).
    #[schema(pattern = "\\S", max_length = 4000)]
    why: String,
    /// Evidence files (at most 8).
    #[serde(default)]
    evidence: Vec<EvidenceFile>,
}

/// File a claim (the agent, with the campaign's hook token): a limit claim is a `limit_claim`
/// moment (in autonomous mode its challenge question is queued first) that a person may accept.
#[utoipa::path(post, path = "/campaigns/{id}/claims", tag = "claims", params(CampaignId), request_body = NewClaim,
    responses((status = 200, description = "ok", body = FiledClaim),
        Invalid, Unauthorized, Forbidden, NotFound, TooLarge, Internal))]
pub(super) async fn file_claim(
    State(state): State<AppState>,
    ApiPath(CampaignId { id }): ApiPath<CampaignId>,
    JsonBody(req): JsonBody<NewClaim>,
) -> ApiResult<Json<FiledClaim>> {
    let evidence = req.evidence.into_iter().map(|f| ClaimFile { name: f.name, text: f.text }).collect();
    Ok(Json(state.supervisor.file_claim(&id, req.claim, &req.why, evidence).await?))
}

/// The campaign's claims, newest first, each with its verdict (null while nobody decided).
#[utoipa::path(get, path = "/campaigns/{id}/claims", tag = "claims", params(CampaignId),
    responses((status = 200, description = "ok", body = Vec<Object>), Invalid, Unauthorized, Forbidden, NotFound, Internal))]
pub(super) async fn list_claims(
    State(state): State<AppState>,
    ApiPath(CampaignId { id }): ApiPath<CampaignId>,
) -> ApiResult<Json<Vec<Value>>> {
    Ok(Json(state.supervisor.list_claims(&id).await?))
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct Verdict {
    /// Who decides (shown as "limit accepted by NAME"; default `operator`).
    #[serde(default)]
    #[schema(max_length = 100)]
    by: Option<String>,
    /// Why: required to reject (the agent reads it), optional to accept.
    #[serde(default)]
    #[schema(max_length = 4000)]
    reason: Option<String>,
}

/// Accept a limit claim: the agent may stop, as an accepted limit (never counted as a success).
#[utoipa::path(post, path = "/campaigns/{id}/claims/{claim}/accept", tag = "claims",
    params(CampaignId, ("claim" = i64, Path, description = "The claim's id")), request_body = Verdict,
    responses((status = 200, description = "ok", body = Object), Invalid, Unauthorized, Forbidden, NotFound, TooLarge, Internal))]
pub(super) async fn accept_claim(
    State(state): State<AppState>,
    ApiPath((id, claim)): ApiPath<(String, i64)>,
    JsonBody(req): JsonBody<Verdict>,
) -> ApiResult<Json<Value>> {
    let by = req.by.unwrap_or_default();
    Ok(Json(state.supervisor.judge_claim(&id, claim, true, &by, req.reason.as_deref()).await?))
}

/// Reject a limit claim with a reason, delivered to the agent as a person's question.
#[utoipa::path(post, path = "/campaigns/{id}/claims/{claim}/reject", tag = "claims",
    params(CampaignId, ("claim" = i64, Path, description = "The claim's id")), request_body = Verdict,
    responses((status = 200, description = "ok", body = Object), Invalid, Unauthorized, Forbidden, NotFound, TooLarge, Internal))]
pub(super) async fn reject_claim(
    State(state): State<AppState>,
    ApiPath((id, claim)): ApiPath<(String, i64)>,
    JsonBody(req): JsonBody<Verdict>,
) -> ApiResult<Json<Value>> {
    let by = req.by.unwrap_or_default();
    Ok(Json(state.supervisor.judge_claim(&id, claim, false, &by, req.reason.as_deref()).await?))
}
