//! Hook calls: each recorded once (its idempotency key) before any answer,
//! a person's question delivered as added context, sessions that end
//! ungated, calls the hook client spooled and replays, and the spool import
//! at start-up.

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::campaign::Mode;
use crate::events::{self, Event, Via};
use crate::store::{NewStopAttempt, StoreError};

use super::{question_message, Result, Supervisor, SupervisorError};

/// What the hook client answered on its own for a call it spooled.
#[derive(Debug, Clone)]
pub struct SpooledMeta {
    /// When the hook ran (RFC 3339).
    pub at: String,
    pub outcome: String,
    pub why: String,
}

/// What the hook client prints for the agent.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HookReply {
    /// The JSON to print on stdout, or none (print nothing).
    pub output: Option<Value>,
    pub decision: Option<String>,
    pub event_id: i64,
}

impl Supervisor {
    /// Handles one hook call of an agent. The call is recorded before any
    /// answer; a stop attempt is judged on a fresh (or cached) evaluation.
    /// `call_id` identifies one invocation of the hook command (its retries
    /// share it). Runs in a `hook` span, so every log line of the call (its
    /// evaluation's included) carries the campaign, the call id and the
    /// session.
    #[tracing::instrument(name = "hook", skip_all, fields(
        campaign = %campaign_id,
        agent = %agent,
        event = %event,
        call_id = %call_id.unwrap_or(""),
        session = %payload.get("session_id").and_then(serde_json::Value::as_str).unwrap_or(""),
    ))]
    pub async fn handle_hook(
        &self,
        campaign_id: &str,
        agent: &str,
        event: &str,
        call_id: Option<&str>,
        payload: Value,
    ) -> Result<HookReply> {
        let started = std::time::Instant::now();
        let reply = self.handle_hook_timed(campaign_id, agent, event, call_id, payload).await;
        crate::metrics::METRICS.hook_call(event, reply.is_ok(), started.elapsed().as_secs_f64());
        match &reply {
            Ok(r) => tracing::debug!(
                decision = r.decision.as_deref().unwrap_or(""),
                event_id = r.event_id,
                ms = started.elapsed().as_millis() as u64,
                "hook call answered"
            ),
            Err(e) => tracing::debug!(error = %e, "hook call refused"),
        }
        reply
    }

    async fn handle_hook_timed(
        &self,
        campaign_id: &str,
        agent: &str,
        event: &str,
        call_id: Option<&str>,
        payload: Value,
    ) -> Result<HookReply> {
        let (_row, spec) = self.campaign(campaign_id).await?;
        let (event_id, fresh, session) =
            self.record_hook_call(campaign_id, agent, event, call_id, &payload, None).await?;
        tracing::debug!(event_id, fresh, "hook call recorded");
        if agent == "claude-code" {
            if let Some(s) = session.as_deref() {
                if event == "session-end" {
                    self.unfollow_transcript(campaign_id, s);
                } else {
                    self.follow_transcript(campaign_id, s, &payload);
                }
            }
        }
        if fresh && event == "session-start" {
            // Hashing the hook binary takes a moment: not on the hook's clock.
            let (sup, campaign, session) = (self.clone(), campaign_id.to_string(), session.clone());
            self.spawn_task(format!("hook-install-check {campaign_id}"), async move {
                if let Err(e) = sup.check_hook_install(&campaign, session.as_deref(), true).await {
                    tracing::warn!(error = %e, "checking gadfly's installed hooks");
                }
            });
        }
        if fresh && (event == "session-end" || event == "stop-failure") && spec.mode != Mode::Audit {
            self.check_ungated_end(campaign_id, agent, event, event_id, session.as_deref(), &payload).await?;
        }
        if event != "stop" {
            let output = if fresh && event == "session-start" {
                // Every supervised agent is told of the sanctioned exit
                // (attach mode has no first prompt of gadfly's), with the
                // campaign's id: a session started by hand has no
                // $GADFLY_CAMPAIGN.
                Some(json!({"hookSpecificOutput": {
                    "hookEventName": "SessionStart",
                    "additionalContext": format!(
                        "{}\nIn this session: `gadfly claim limit --campaign {campaign_id} --why \"...\" --evidence FILE` \
                         (the daemon at $GADFLY_URL, with $GADFLY_TOKEN, as gadfly's hooks reach it).",
                        crate::agent::CLAIM_NOTE
                    ),
                }}))
            } else if fresh && spec.mode != Mode::Audit {
                self.context_delivery(campaign_id, session.as_deref(), event).await?
            } else {
                None
            };
            return Ok(HookReply { output, decision: None, event_id });
        }
        if !fresh {
            // A retried call: answer exactly as the first time.
            if let Some(prev) = self.inner.store.stop_attempt_for_event(event_id).await? {
                return Ok(HookReply {
                    output: prev.reason.as_ref().filter(|_| prev.decision == "block").map(|r| block_json(r)),
                    decision: Some(prev.decision),
                    event_id,
                });
            }
        }
        self.judge_stop(campaign_id, &spec, agent, event_id, session.as_deref(), &payload).await
    }

    /// A person's queued question, delivered as context added to a hook's
    /// answer (PostToolUse, UserPromptSubmit), marked delivered once.
    async fn context_delivery(
        &self,
        campaign_id: &str,
        session: Option<&str>,
        event: &str,
    ) -> anyhow::Result<Option<Value>> {
        let hook_event = match event {
            "post-tool-use" => "PostToolUse",
            "user-prompt-submit" => "UserPromptSubmit",
            _ => return Ok(None),
        };
        let via = Via::HookAdditionalContext;
        let Some(q) = self.inner.store.claim_next_question(campaign_id, via.as_str(), None).await? else {
            return Ok(None);
        };
        self.record_delivered(campaign_id, session, &q, via).await?;
        let text = question_message(&q);
        Ok(Some(json!({"hookSpecificOutput": {"hookEventName": hook_event, "additionalContext": text}})))
    }

    /// A session that ends, or a turn that ends on a failure, with no
    /// allowed stop since its last block (or none at all): the agent got
    /// away from the gate. Recorded as an ungated stop attempt. A session
    /// that never got a prompt (Claude Code failing at start-up) had no
    /// turn: recorded as a failed start instead (see [`Self::failed_start`]).
    async fn check_ungated_end(
        &self,
        campaign_id: &str,
        agent: &str,
        event: &str,
        event_id: i64,
        session: Option<&str>,
        payload: &Value,
    ) -> anyhow::Result<()> {
        let attempts = self.inner.store.list_stop_attempts(campaign_id).await?;
        let last = attempts.iter().rev().find(|a| a.session_id.as_deref() == session);
        if last.is_none() && agent == "claude-code" {
            // Its failed start is on record already (StopFailure, then SessionEnd).
            let failed =
                self.inner.store.recent_events(campaign_id, crate::events::kind::SESSION_FAILED_START, 50).await?;
            if session.is_some() && failed.iter().any(|e| e.session_id.as_deref() == session) {
                return Ok(());
            }
            if let Some((why, error)) = self.failed_start(campaign_id, session, payload).await? {
                let failed = Event::SessionFailedStart { why: why.to_string(), error, event_id };
                self.record_event(campaign_id, session, None, failed).await?;
                tracing::info!(campaign = %campaign_id, why, "a session failed at start-up");
                return Ok(());
            }
        }
        let why = match (event, last.map(|a| a.decision.as_str())) {
            (_, Some("allow" | "record" | "ungated" | "limit_accepted")) if event == "session-end" => return Ok(()),
            ("stop-failure", _) => "the turn ended on a failure (StopFailure), with no Stop hook decision",
            (_, Some("block" | "unavailable_block")) => "the session ended while its last stop was blocked",
            _ => "the session ended without any stop judged by the gate",
        };
        self.record_ungated(campaign_id, agent, event_id, session, None, why).await
    }

    /// Whether a Claude Code session that ended with no stop judged ever
    /// had a turn. It did not when the daemon saw no tool call or message
    /// of the session (hook calls, or its transcript followed) and its
    /// transcript (the hook payload's `transcript_path`, read from its
    /// start) holds no answer of the model: either no prompt at all, or a
    /// prompt whose every reply is Claude Code's stand-in for a failed
    /// request (not logged in, the API unreachable). Then `Some((why,
    /// error))`, with the error its transcript or the StopFailure call
    /// gives, if any. None: it had a turn, or nothing can be known (the
    /// transcript cannot be read, or a prompt hook call was seen and the
    /// transcript holds no prompt), and its end is judged as ungated.
    async fn failed_start(
        &self,
        campaign_id: &str,
        session: Option<&str>,
        payload: &Value,
    ) -> anyhow::Result<Option<(&'static str, Option<String>)>> {
        let Some(session) = session else { return Ok(None) };
        use crate::events::kind;
        let seen = |rows: &[crate::store::EventRow]| rows.iter().any(|e| e.session_id.as_deref() == Some(session));
        for k in [kind::HOOK_PRE_TOOL_USE, kind::HOOK_POST_TOOL_USE, kind::AGENT_MESSAGE, kind::AGENT_TOOL_CALL] {
            if seen(&self.inner.store.recent_events(campaign_id, k, 200).await?) {
                return Ok(None);
            }
        }
        let mut prompt_seen = false;
        for k in [kind::HOOK_USER_PROMPT_SUBMIT, kind::AGENT_USER_MESSAGE] {
            prompt_seen |= seen(&self.inner.store.recent_events(campaign_id, k, 200).await?);
        }
        let Some(path) = payload.get("transcript_path").and_then(Value::as_str).map(std::path::PathBuf::from) else {
            return Ok(None);
        };
        if self.is_daemons_own(&path) {
            return Ok(None);
        }
        let start = tokio::task::spawn_blocking(move || crate::agent::escapes::session_start(&path)).await?;
        let said =
            || ["last_assistant_message", "error"].iter().find_map(|k| payload.get(*k)?.as_str()).map(str::to_string);
        use crate::agent::escapes::Start;
        Ok(match start {
            Some(Start::NoPrompt { error }) if !prompt_seen => Some(match error.or_else(said) {
                Some(e) => ("the session failed at start-up, before any prompt: no turn, so no stop to judge", Some(e)),
                None => ("the session ended before any prompt: no turn, so no stop to judge", None),
            }),
            Some(Start::Unanswered { error }) => Some((
                "the model never answered the prompt (its request failed: not logged in, or the API unreachable): \
                 no turn, so no stop to judge",
                error.or_else(said),
            )),
            _ => None,
        })
    }

    /// Records an ungated stop: a stop attempt with decision `ungated` and
    /// its reason (with the latest evaluation's verdict, for the audit), and
    /// a `stop.ungated` event for the console and the log.
    pub async fn record_ungated(
        &self,
        campaign_id: &str,
        agent: &str,
        event_id: i64,
        session: Option<&str>,
        claim: Option<&str>,
        why: &str,
    ) -> anyhow::Result<()> {
        let (eval_id, holds) = match self.inner.store.latest_evaluation(campaign_id).await {
            Ok(Some(e)) => (e.id, e.verdict.holds),
            Ok(None) => (None, false),
            // A latest evaluation that does not decode counts as failing,
            // recorded with its id: the ungated stop is recorded either way.
            Err(e) => match e.downcast_ref::<StoreError>() {
                Some(StoreError::Corrupt { id, .. }) => {
                    tracing::warn!(campaign = %campaign_id, error = %e, "an ungated stop's latest evaluation");
                    (id.parse().ok(), false)
                }
                None => return Err(e),
            },
        };
        self.inner
            .store
            .insert_stop_attempt(&NewStopAttempt {
                campaign_id,
                event_id,
                session_id: session,
                agent,
                claim,
                stop_hook_active: false,
                evaluation_id: eval_id,
                holds,
                decision: "ungated",
                reason: Some(why),
                question_id: None,
            })
            .await?;
        let ungated = Event::StopUngated {
            why: why.to_string(),
            claim: claim.map(str::to_string),
            by: events::UngatedBy::Gate { event_id, latest_evaluation_id: eval_id, holds },
        };
        self.record_event(campaign_id, session, None, ungated).await?;
        tracing::warn!(campaign = %campaign_id, why, "ungated stop");
        Ok(())
    }

    /// Records one hook call (once per call id, see [`idempotency_key`]):
    /// its event id, whether it is new, and its session. `spooled` marks a
    /// call replayed from the hook client's spool.
    pub(super) async fn record_hook_call(
        &self,
        campaign_id: &str,
        agent: &str,
        event: &str,
        call_id: Option<&str>,
        payload: &Value,
        spooled: Option<Value>,
    ) -> Result<(i64, bool, Option<String>)> {
        if !payload.is_object() {
            return Err(SupervisorError::Invalid("the hook payload must be a JSON object".into()));
        }
        let session = payload.get("session_id").and_then(Value::as_str).map(str::to_string);
        let key = idempotency_key(campaign_id, agent, event, call_id, payload);
        let call =
            Event::HookCall { agent: agent.to_string(), event: event.to_string(), payload: payload.clone(), spooled };
        let (event_id, fresh) = self.record_event(campaign_id, session.as_deref(), key.as_deref(), call).await?;
        Ok((event_id, fresh, session))
    }

    /// Whether the transcript watch recorded a turn of `session` that ended
    /// ungated shortly before `spooled_at` (the hook spools a stop at most
    /// its deadline after the turn ends): the same stop, seen twice.
    async fn seen_in_transcript(&self, campaign_id: &str, session: Option<&str>, spooled_at: &str) -> Result<bool> {
        let (Some(session), Ok(at)) = (session, chrono::DateTime::parse_from_rfc3339(spooled_at)) else {
            return Ok(false);
        };
        let (_, spec) = self.campaign(campaign_id).await?;
        let window = chrono::TimeDelta::seconds(i64::from(spec.gate.stop_timeout_s) + 5);
        let seen = self.inner.store.recent_events(campaign_id, crate::events::kind::VIOLATION, 200).await?;
        Ok(seen.iter().any(|e| {
            e.session_id.as_deref() == Some(session)
                && e.payload["kind"] == "turn_ended_ungated"
                && e.payload["timestamp"]
                    .as_str()
                    .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
                    .is_some_and(|ended| ended <= at + chrono::TimeDelta::seconds(5) && ended >= at - window)
        }))
    }

    /// A hook call the hook client could not deliver when it was made and
    /// spooled, replayed now. It is recorded once (same call id); a stop is
    /// not judged now (the tree has moved on): it is recorded as the hook
    /// answered it then, blocked by the hook itself or let through ungated.
    #[tracing::instrument(name = "hook", skip_all, fields(
        campaign = %campaign_id,
        agent = %agent,
        event = %event,
        call_id = %call_id.unwrap_or(""),
        session = %payload.get("session_id").and_then(serde_json::Value::as_str).unwrap_or(""),
        spooled = true,
    ))]
    pub async fn handle_spooled_hook(
        &self,
        campaign_id: &str,
        agent: &str,
        event: &str,
        call_id: Option<&str>,
        payload: Value,
        spooled: &SpooledMeta,
    ) -> Result<HookReply> {
        let (row, _) = self.campaign(campaign_id).await?;
        // The hook token that replays is the agent's too: take the call
        // only in the shape the hook's spool gives it (issue 31).
        crate::spool::check_replay(
            event,
            &spooled.outcome,
            &spooled.at,
            &spooled.why,
            &row.created_at,
            chrono::Utc::now(),
        )
        .map_err(|e| SupervisorError::Invalid(format!("this is not a call the hook spooled: {e}")))?;
        let meta = json!({"at": spooled.at, "outcome": spooled.outcome, "why": spooled.why});
        let (event_id, fresh, session) =
            self.record_hook_call(campaign_id, agent, event, call_id, &payload, Some(meta)).await?;
        let claim = payload.get("last_assistant_message").and_then(Value::as_str);
        let decision = match (event, spooled.outcome.as_str()) {
            ("stop", "blocked") => Some("unavailable_block"),
            ("stop", _) => Some("ungated"),
            _ => None,
        };
        if fresh {
            match decision {
                Some("ungated") => {
                    let why = format!(
                        "the supervisor was unavailable at {} ({}); the hook let this stop through ungated",
                        spooled.at, spooled.why
                    );
                    // The transcript watch may have recorded this very stop
                    // already (the daemon came back and read the turn's end
                    // before the hook replayed its spool): once is enough.
                    if !self.seen_in_transcript(campaign_id, session.as_deref(), &spooled.at).await? {
                        self.record_ungated(campaign_id, agent, event_id, session.as_deref(), claim, &why).await?;
                    }
                }
                Some(d) => {
                    let why = format!(
                        "the supervisor was unavailable at {} ({}); the hook blocked this stop on its own",
                        spooled.at, spooled.why
                    );
                    self.inner
                        .store
                        .insert_stop_attempt(&NewStopAttempt {
                            campaign_id,
                            event_id,
                            session_id: session.as_deref(),
                            agent,
                            claim,
                            stop_hook_active: payload.get("stop_hook_active").and_then(Value::as_bool).unwrap_or(false),
                            evaluation_id: None,
                            holds: false,
                            decision: d,
                            reason: Some(&why),
                            question_id: None,
                        })
                        .await?;
                }
                None => {}
            }
        }
        Ok(HookReply { output: None, decision: decision.map(str::to_string), event_id })
    }
}

pub(super) fn block_json(reason: &str) -> Value {
    json!({"decision": "block", "reason": reason})
}

/// The key that makes a retried hook call land once: built from the
/// session, the event and the tool call's id when the payload has one (the
/// agent may fire the same tool call's hook twice), else from the hook
/// invocation's own call id (its retries share it). Without either, every
/// call is recorded.
pub fn idempotency_key(
    campaign_id: &str,
    agent: &str,
    event: &str,
    call_id: Option<&str>,
    payload: &Value,
) -> Option<String> {
    let session = payload.get("session_id").and_then(Value::as_str).unwrap_or("");
    let tool_use = payload.get("tool_use_id").and_then(Value::as_str).filter(|t| !t.is_empty());
    let identity = match (tool_use, call_id.filter(|c| !c.is_empty())) {
        (Some(t), _) => format!("tool:{t}"),
        (None, Some(c)) => format!("call:{c}"),
        (None, None) => return None,
    };
    let mut h = Sha256::new();
    for part in [campaign_id, agent, event, session, &identity] {
        h.update(part.as_bytes());
        h.update([0]);
    }
    Some(hex::encode(h.finalize()))
}

/// Replays the spooled calls in `dir` straight into the store (the daemon
/// does this at start for its own data dir's spool). Returns how many were
/// recorded and how many were left (unreadable, or refused: kept aside).
pub async fn import_spool(sup: &Supervisor, dir: &Path) -> (usize, usize) {
    let (pending, damaged) = crate::spool::pending(dir);
    for d in &damaged {
        tracing::warn!(file = %d, "a spooled hook call cannot be read; left in place");
    }
    let mut done_count = 0;
    let mut left = damaged.len();
    for (path, call) in pending {
        let Some(claimed) = crate::spool::claim(&path) else { continue };
        let meta = SpooledMeta { at: call.spooled_at, outcome: call.outcome, why: call.why };
        match sup
            .handle_spooled_hook(&call.campaign, &call.agent, &call.event, Some(&call.call_id), call.payload, &meta)
            .await
        {
            Ok(_) => {
                crate::spool::done(&claimed);
                done_count += 1;
            }
            // A workspace restored later takes the call then.
            Err(e @ (SupervisorError::Internal(_) | SupervisorError::Conflict(_))) => {
                tracing::warn!(error = %e, file = %path.display(), "replaying a spooled hook call; kept for later");
                crate::spool::release(&claimed, &path);
                left += 1;
            }
            Err(e) => {
                let kept = path.with_extension("rejected");
                tracing::warn!(error = %e, file = %kept.display(), "a spooled hook call was refused; kept aside");
                let _ = std::fs::rename(&claimed, &kept);
                left += 1;
            }
        }
    }
    (done_count, left)
}
