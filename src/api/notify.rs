//! A campaign's notifications: its `[notify]` webhooks and their latest
//! deliveries, and replacing them (the console's form; recorded as
//! `notify.configured`).

use axum::extract::State;
use axum::Json;
use serde::Deserialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::openapi::{Conflict, Forbidden, Internal, Invalid, NotFound, TooLarge, Unauthorized};
use super::{ApiError, ApiPath, ApiResult, AppState, CampaignId, JsonBody};
use crate::campaign::{NotifySpec, WebhookSpec};

/// The campaign's webhooks (URLs with their paths hidden, whether the
/// daemon's environment holds each secret), each one's latest delivery
/// attempts, and the notification kinds.
#[utoipa::path(get, path = "/campaigns/{id}/notify", tag = "notify", params(CampaignId),
    responses((status = 200, description = "ok", body = Object),
        Invalid, Unauthorized, Forbidden, NotFound, Internal))]
pub(super) async fn show_notify(
    State(state): State<AppState>,
    ApiPath(CampaignId { id }): ApiPath<CampaignId>,
) -> ApiResult<Json<Value>> {
    Ok(Json(state.supervisor.notify_view(&id).await?))
}

/// A new `[notify]`: it replaces the campaign's (the spec's, or the one set before).
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct SetNotify {
    /// The webhooks; `[]` turns notifications off.
    webhooks: Vec<WebhookSpec>,
    /// The campaign's current webhooks to keep as they are, by their
    /// `webhook` index in the GET (whole, though the GET hides their URLs'
    /// paths), placed before `webhooks`: how the console adds or removes
    /// one. Read when the PUT arrives: a change made in between is replaced.
    #[serde(default)]
    keep: Vec<usize>,
    /// Blocked stop attempts in a row that notify (default 5).
    #[serde(default)]
    block_streak: Option<u32>,
    /// The console's address in links (default: the daemon's URL).
    #[serde(default)]
    console_url: Option<String>,
}

/// Replace the campaign's `[notify]` webhooks (checked as the spec's are;
/// each names the environment variable that holds its secret, never the
/// secret).
#[utoipa::path(put, path = "/campaigns/{id}/notify", tag = "notify", params(CampaignId), request_body = SetNotify,
    responses((status = 200, description = "ok", body = Object),
        Invalid, Unauthorized, Forbidden, NotFound, Conflict, TooLarge, Internal))]
pub(super) async fn set_notify(
    State(state): State<AppState>,
    ApiPath(CampaignId { id }): ApiPath<CampaignId>,
    JsonBody(req): JsonBody<SetNotify>,
) -> ApiResult<Json<Value>> {
    let defaults = NotifySpec::default();
    let mut webhooks = Vec::with_capacity(req.keep.len() + req.webhooks.len());
    if req.keep.len() > crate::campaign::MAX_WEBHOOKS {
        return Err(ApiError::Invalid(format!("field `keep`: at most {} webhooks", crate::campaign::MAX_WEBHOOKS)));
    }
    if !req.keep.is_empty() {
        let (current, _) = state.supervisor.notify_config(&id).await?;
        for (i, &k) in req.keep.iter().enumerate() {
            if req.keep[..i].contains(&k) {
                return Err(ApiError::Invalid(format!("field `keep`: webhook {k} is listed twice")));
            }
            let w = current.webhooks.get(k).ok_or_else(|| {
                ApiError::Invalid(format!("field `keep`: no webhook {k} (the campaign has {})", current.webhooks.len()))
            })?;
            webhooks.push(w.clone());
        }
    }
    webhooks.extend(req.webhooks);
    let notify = NotifySpec {
        webhooks,
        block_streak: req.block_streak.unwrap_or(defaults.block_streak),
        console_url: req.console_url,
    };
    let kept = req.keep.len();
    state.supervisor.set_notify(&id, notify, kept).await?;
    Ok(Json(state.supervisor.notify_view(&id).await?))
}
