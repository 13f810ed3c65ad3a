//! What agents' hooks call: `POST .../hooks/{agent}/{event}` (a stop is
//! judged there), what `gadfly attach`/`detach` wrote, and the campaign's
//! hook token.

use axum::extract::State;
use axum::http::HeaderMap;
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use utoipa::{IntoParams, ToSchema};

use crate::client::CALL_ID_HEADER;

use super::openapi::{Forbidden, Internal, Invalid, NotFound, TooLarge, Unauthorized};
use super::{ApiError, ApiPath, ApiQuery, ApiResult, AppState, CampaignId, HookPayload, JsonBody};

/// The agents whose hooks post events.
#[derive(Deserialize, ToSchema, Clone, Copy)]
#[serde(rename_all = "kebab-case")]
pub(super) enum HookAgent {
    ClaudeCode,
    Codex,
    Command,
}

impl HookAgent {
    fn as_str(self) -> &'static str {
        match self {
            HookAgent::ClaudeCode => "claude-code",
            HookAgent::Codex => "codex",
            HookAgent::Command => "command",
        }
    }
}

/// A hook event's name: kebab case (`stop`, `post-tool-use`, ...).
fn valid_event(event: &str) -> bool {
    let b = event.as_bytes();
    !b.is_empty()
        && b.len() <= 64
        && b[0].is_ascii_lowercase()
        && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
}

/// An agent's hook event (the payload its hook received on stdin). A
/// `stop` is judged by the Stop gate: the reply's `output` is what the hook
/// prints (a block decision while any scenario fails). With
/// `answer=agent` (Claude Code's HTTP hooks) the answer is that output
/// alone, `{}` when there is none.
#[utoipa::path(post, path = "/campaigns/{id}/hooks/{agent}/{event}", tag = "hooks",
    params(CampaignId,
        ("agent" = inline(HookAgent), Path, description = "The agent whose hook protocol is spoken"),
        ("event" = String, Path, description = "The hook event in kebab case (stop, post-tool-use, session-start, ...)",
            pattern = "^[a-z][a-z0-9-]*$", max_length = 64, example = "post-tool-use"),
        ("x-gadfly-call-id" = Option<String>, Header, description = "One hook invocation's id; its retries send the same one"),
        ("x-gadfly-nonce" = Option<String>, Header, description = "The hook's fresh nonce (printable ASCII, at most 128): the answer then carries `x-gadfly-signature`, the daemon's Ed25519 signature (base64) over the nonce, campaign, agent, event, status and body (see GET /health's `daemon_key`)"),
        SpoolQuery),
    request_body(content = Object, description = "The hook's JSON payload (an object)"),
    responses((status = 200, description = "ok", body = Object),
        Invalid, Unauthorized, Forbidden, NotFound, TooLarge, Internal))]
pub(super) async fn hook(
    State(state): State<AppState>,
    ApiPath((id, agent, event)): ApiPath<(String, HookAgent, String)>,
    ApiQuery(spool): ApiQuery<SpoolQuery>,
    headers: HeaderMap,
    HookPayload(payload): HookPayload,
) -> ApiResult<Json<Value>> {
    if !valid_event(&event) {
        return Err(ApiError::Invalid(format!(
            "hook event `{event}` must be kebab case (lowercase letters, digits and `-`, at most 64), like `post-tool-use`"
        )));
    }
    let agent = agent.as_str();
    let call_id = headers.get(CALL_ID_HEADER).and_then(|v| v.to_str().ok());
    let for_agent = match spool.answer.as_deref() {
        None => false,
        Some("agent") => true,
        Some(other) => {
            return Err(ApiError::Invalid(format!(
                "unknown `answer={other}`; expected `agent` (the hook's output alone) or nothing (the daemon's reply)"
            )))
        }
    };
    let reply = match spool {
        SpoolQuery { spooled_at: Some(at), outcome, why, .. } => {
            let meta = crate::app::SpooledMeta {
                at,
                outcome: outcome.ok_or_else(|| ApiError::Invalid("a spooled call needs `outcome`".into()))?,
                why: why.unwrap_or_default(),
            };
            state.supervisor.handle_spooled_hook(&id, agent, &event, call_id, payload, &meta).await?
        }
        _ => state.supervisor.handle_hook(&id, agent, &event, call_id, payload).await?,
    };
    if for_agent {
        return Ok(Json(reply.output.unwrap_or_else(|| json!({}))));
    }
    Ok(Json(serde_json::to_value(reply).map_err(anyhow::Error::from)?))
}

/// Set when the hook client replays a call it spooled while the daemon
/// was unreachable (see `spool`); `answer` for an agent posting itself.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct SpoolQuery {
    /// When the hook spooled the call (RFC 3339).
    spooled_at: Option<String>,
    /// What the hook answered the agent then (needed with `spooled_at`).
    #[param(pattern = "^(blocked|allowed|passed)$")]
    outcome: Option<String>,
    /// Why the daemon could not be reached.
    why: Option<String>,
    /// `agent`: answer with the hook's output alone (what Claude Code's
    /// HTTP hooks read), `{}` when there is none.
    #[param(pattern = "^agent$")]
    answer: Option<String>,
}

#[derive(Deserialize, ToSchema)]
pub(super) struct HookInstall {
    /// What `gadfly attach` wrote (settings file, hook binary and their fingerprints).
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    installed: Option<crate::agent::attach::Installed>,
    /// The settings file `gadfly detach` removed the hooks from.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    removed: Option<std::path::PathBuf>,
}

#[derive(Serialize, ToSchema)]
pub(super) struct Done {
    ok: bool,
}

/// `gadfly attach`/`detach` tell the daemon what they wrote, so a change
/// to it is caught at the agent's next SessionStart or stop.
#[utoipa::path(post, path = "/campaigns/{id}/hook-installs", tag = "hooks", params(CampaignId),
    request_body = HookInstall,
    responses((status = 200, description = "ok", body = Done),
        Invalid, Unauthorized, Forbidden, NotFound, TooLarge, Internal))]
pub(super) async fn hook_install(
    State(state): State<AppState>,
    ApiPath(CampaignId { id }): ApiPath<CampaignId>,
    JsonBody(req): JsonBody<HookInstall>,
) -> ApiResult<Json<Done>> {
    state.supervisor.record_hook_install(&id, req.installed.as_ref(), req.removed.as_deref()).await?;
    Ok(Json(Done { ok: true }))
}

/// The campaign's hook token (for `gadfly attach` and agents started by hand).
#[derive(Serialize, ToSchema)]
pub(super) struct HookToken {
    campaign: String,
    /// `gfh1.<campaign>.<mac>`: opens only this campaign's hook events, evaluation and beam tagging.
    token: String,
}

#[utoipa::path(get, path = "/campaigns/{id}/hook-token", tag = "hooks", params(CampaignId),
    responses((status = 200, description = "ok", body = HookToken),
        Invalid, Unauthorized, Forbidden, NotFound, Internal))]
pub(super) async fn hook_token(
    State(state): State<AppState>,
    ApiPath(CampaignId { id }): ApiPath<CampaignId>,
) -> ApiResult<Json<HookToken>> {
    state.supervisor.campaign(&id).await?;
    let token = super::auth::hook_token(&state.token, &id);
    Ok(Json(HookToken { campaign: id, token }))
}
