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

/// Asks, gains and status per bank entry, learned over all campaigns.
#[utoipa::path(get, path = "/bank/stats", tag = "bank",
    responses((status = 200, description = "ok", body = Object), Unauthorized, Forbidden, Internal))]
pub(super) async fn bank_stats(State(state): State<AppState>) -> ApiResult<Json<Value>> {
    Ok(Json(json!(state.supervisor.bank_stats().await?)))
}
