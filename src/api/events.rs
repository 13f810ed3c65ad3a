//! A campaign's recorded events: the log, page by page, and the live
//! stream (SSE), which replays the backlog and then follows the bus.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::Json;
use futures::StreamExt;
use serde::Deserialize;
use serde_json::{json, Value};
use utoipa::IntoParams;

use super::openapi::{Forbidden, Internal, Invalid, NotFound, Unauthorized};
use super::{ApiPath, ApiQuery, ApiResult, AppState, CampaignId};

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct After {
    /// Events with an id above this one.
    #[serde(default)]
    #[param(minimum = -9007199254740991.0, maximum = 9007199254740991.0)]
    after: Option<i64>,
    /// At most this many (default 1000; clamped to 1..=10000).
    #[serde(default)]
    #[param(minimum = -9007199254740991.0, maximum = 9007199254740991.0)]
    limit: Option<i64>,
    /// The last N events instead, oldest first (clamped to 1..=10000).
    #[serde(default)]
    #[param(minimum = -9007199254740991.0, maximum = 9007199254740991.0)]
    tail: Option<i64>,
}

/// The campaign's recorded events (hook calls, evaluations, decisions,
/// questions, agent output), oldest first.
#[utoipa::path(get, path = "/campaigns/{id}/log", tag = "events", params(CampaignId, After),
    responses((status = 200, description = "ok", body = [Object]),
        Invalid, Unauthorized, Forbidden, NotFound, Internal))]
pub(super) async fn list_events(
    State(state): State<AppState>,
    ApiPath(CampaignId { id }): ApiPath<CampaignId>,
    ApiQuery(q): ApiQuery<After>,
) -> ApiResult<Json<Value>> {
    state.supervisor.campaign(&id).await?;
    let limit = q.limit.unwrap_or(1000).clamp(1, 10_000);
    if let Some(n) = q.tail {
        return Ok(Json(json!(state.supervisor.store().tail_events(&id, n.clamp(1, 10_000)).await?)));
    }
    Ok(Json(json!(state.supervisor.store().events_after(&id, q.after.unwrap_or(0), limit).await?)))
}

/// Live events: replays what is stored after `Last-Event-ID` (or
/// `?after=`), then follows the bus. Ends when the daemon shuts down.
#[utoipa::path(get, path = "/campaigns/{id}/events", tag = "events",
    params(CampaignId, After,
        ("last-event-id" = Option<String>, Header, description = "Resume after this event id (overrides `after`)")),
    responses((status = 200, content_type = "text/event-stream", body = String,
        description = "Server-Sent Events: `id` the event id, `event` its kind, `data` the event as JSON; a `resync` event when the stream lagged"),
        Invalid, Unauthorized, Forbidden, NotFound, Internal))]
pub(super) async fn stream_events(
    State(state): State<AppState>,
    ApiPath(CampaignId { id }): ApiPath<CampaignId>,
    ApiQuery(q): ApiQuery<After>,
    headers: HeaderMap,
) -> ApiResult<Sse<impl futures::Stream<Item = Result<Event, Infallible>>>> {
    state.supervisor.campaign(&id).await?;
    let after = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<i64>().ok())
        .unwrap_or(q.after.unwrap_or(0));
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
