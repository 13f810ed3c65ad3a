//! A campaign's spend: the tokens and money its agents reported, per
//! campaign, per session and per run (`agent.usage` events, summed by
//! `spend::Tally`), with the runs' spend budgets.

use axum::extract::State;
use axum::Json;
use serde_json::{json, Value};

use super::openapi::{Forbidden, Internal, Invalid, NotFound, Unauthorized};
use super::{ApiPath, ApiResult, AppState, CampaignId};

/// What the campaign's agents reported they used: tokens (every input token,
/// cached ones included, plus every output token) and money in USD as the
/// agents count it (`cost_usd` is null where no agent reported money:
/// gadfly prices nothing), for the campaign, each session and each run;
/// and the runs' `max_tokens` / `max_cost_usd`.
#[utoipa::path(get, path = "/campaigns/{id}/spend", tag = "runs", params(CampaignId),
    responses((status = 200, description = "ok", body = Object),
        Invalid, Unauthorized, Forbidden, NotFound, Internal))]
pub(super) async fn spend(
    State(state): State<AppState>,
    ApiPath(CampaignId { id }): ApiPath<CampaignId>,
) -> ApiResult<Json<Value>> {
    let (_, spec) = state.supervisor.campaign(&id).await?;
    let tally = crate::audit::spend(state.supervisor.store(), &id).await?;
    let agent = crate::agent::AgentSpec::from_campaign(&spec).ok();
    Ok(Json(json!({
        "campaign": tally.total(),
        "sessions": tally.sessions(),
        "runs": tally.runs(),
        "budgets": {
            "max_tokens": agent.as_ref().and_then(|a| a.max_tokens),
            "max_cost_usd": agent.as_ref().and_then(|a| a.max_cost_usd),
        },
        "note": crate::audit::SPEND_NOTE,
    })))
}
