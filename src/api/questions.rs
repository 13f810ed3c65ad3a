//! Questions: queue one for the agent, list them, the bank's suggestions
//! for a moment, and the question bank with its learned statistics.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use utoipa::{IntoParams, ToSchema};

use super::openapi::{Forbidden, Internal, Invalid, NotFound, TooLarge, Unauthorized};
use super::{ApiPath, ApiQuery, ApiResult, AppState, CampaignId, JsonBody};

#[derive(Deserialize, ToSchema)]
pub(super) struct Ask {
    /// The question (at most 4000 characters).
    #[schema(min_length = 1, max_length = 4000)]
    text: String,
    /// Set when the person started from a bank suggestion.
    #[serde(default)]
    bank_id: Option<String>,
    /// The moment it answers, when it came from a suggestion.
    #[serde(default)]
    #[schema(value_type = Option<super::openapi::Moment>, inline)]
    moment: Option<String>,
}

/// Queue a question for the agent; it is delivered at its next stop.
#[utoipa::path(post, path = "/campaigns/{id}/questions", tag = "questions", params(CampaignId), request_body = Ask,
    responses((status = 201, description = "created", body = Object),
        Invalid, Unauthorized, Forbidden, NotFound, TooLarge, Internal))]
pub(super) async fn ask(
    State(state): State<AppState>,
    ApiPath(CampaignId { id }): ApiPath<CampaignId>,
    JsonBody(req): JsonBody<Ask>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let q = state.supervisor.ask_with(&id, &req.text, req.bank_id.as_deref(), req.moment.as_deref()).await?;
    Ok((StatusCode::CREATED, Json(json!(q))))
}

/// The campaign's questions: queued, delivered, or expired (an allowed stop left them waiting).
#[utoipa::path(get, path = "/campaigns/{id}/questions", tag = "questions", params(CampaignId),
    responses((status = 200, description = "ok", body = [Object]),
        Invalid, Unauthorized, Forbidden, NotFound, Internal))]
pub(super) async fn list_questions(
    State(state): State<AppState>,
    ApiPath(CampaignId { id }): ApiPath<CampaignId>,
) -> ApiResult<Json<Value>> {
    state.supervisor.campaign(&id).await?;
    Ok(Json(json!(state.supervisor.store().list_questions(&id, false).await?)))
}

/// The questions delivered and not answered yet (issue #35): each with its age, the turns it has
/// waited, its re-asks and whether it was escalated; oldest first.
#[utoipa::path(get, path = "/campaigns/{id}/questions/open", tag = "questions", params(CampaignId),
    responses((status = 200, description = "ok", body = Vec<crate::app::OpenQuestion>),
        Invalid, Unauthorized, Forbidden, NotFound, Internal))]
pub(super) async fn open_questions(
    State(state): State<AppState>,
    ApiPath(CampaignId { id }): ApiPath<CampaignId>,
) -> ApiResult<Json<Vec<crate::app::OpenQuestion>>> {
    Ok(Json(state.supervisor.open_questions(&id).await?))
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct NewAnswer {
    /// The question answered (its id, or its re-ask's).
    question_id: i64,
    /// Evidence files (1 to 8, at least one not empty): words alone answer no question.
    #[schema(min_items = 1)]
    evidence: Vec<super::claims::EvidenceFile>,
    /// What the evidence shows, in the agent's own words (at most 4000 characters).
    #[serde(default)]
    #[schema(max_length = 4000)]
    why: Option<String>,
}

/// File evidence that answers a question the agent was asked (the agent, with the campaign's hook
/// token: `gadfly answer`). The question, and its re-asks, count as answered.
#[utoipa::path(post, path = "/campaigns/{id}/answers", tag = "questions", params(CampaignId), request_body = NewAnswer,
    responses((status = 200, description = "ok", body = Object),
        Invalid, Unauthorized, Forbidden, NotFound, TooLarge, Internal))]
pub(super) async fn answer(
    State(state): State<AppState>,
    ApiPath(CampaignId { id }): ApiPath<CampaignId>,
    JsonBody(req): JsonBody<NewAnswer>,
) -> ApiResult<Json<Value>> {
    let files = req.evidence.into_iter().map(super::claims::EvidenceFile::into_file).collect();
    Ok(Json(state.supervisor.answer_with_files(&id, req.question_id, req.why.as_deref(), files).await?))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct SuggestQuery {
    /// The moment to suggest questions for.
    #[param(value_type = super::openapi::Moment, inline)]
    moment: String,
    /// How many (default 5; clamped to 1..=20).
    #[serde(default)]
    #[param(minimum = 0.0, maximum = 4294967295.0)]
    limit: Option<usize>,
}

/// Bank questions that fit a moment of this campaign, best first.
#[utoipa::path(get, path = "/campaigns/{id}/suggestions", tag = "questions", params(CampaignId, SuggestQuery),
    responses((status = 200, description = "ok", body = Object), Invalid, Unauthorized, Forbidden, NotFound, Internal))]
pub(super) async fn suggestions(
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
                "id": c.entry.id, "group": c.entry.group, "text": c.text, "rationale": c.entry.rationale,
                "level": c.entry.level, "provenance": c.entry.provenance, "source": c.entry.source,
                "moments": c.entry.moments, "asks": c.asks, "gains": c.gains, "rewards": c.rewards, "asked_here": c.asked_here,
            })
        })
        .collect();
    Ok(Json(json!({"moment": q.moment, "suggestions": suggestions})))
}

/// The question bank: entries with their learned statistics, problems, counts.
#[utoipa::path(get, path = "/bank", tag = "bank",
    responses((status = 200, description = "ok", body = Object), Unauthorized, Forbidden, Internal))]
pub(super) async fn bank(State(state): State<AppState>) -> ApiResult<Json<Value>> {
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

/// Asks, gains, rewards and status per bank entry (and per moment inside
/// it), learned over all campaigns, keyed by bank id; under the key
/// `uplift`, each kind's and group's reward rate after its questions
/// against the rate after withheld moments, with a 95% interval
/// (`crate::bank::learn::uplift`). `uplift` is no bank id.
#[utoipa::path(get, path = "/bank/stats", tag = "bank",
    responses((status = 200, description = "ok", body = Object), Unauthorized, Forbidden, Internal))]
pub(super) async fn bank_stats(State(state): State<AppState>) -> ApiResult<Json<Value>> {
    let (stats, uplift) = state.supervisor.bank_report().await?;
    Ok(Json(crate::bank::learn::report_json(&stats, &uplift)))
}
