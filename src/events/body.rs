//! What an [`Event`] is stored as: its kind (the `events.kind` column and
//! the SSE `event:` name) and its JSON body (the `payload` column).

use std::borrow::Cow;

use serde_json::{json, Value};

use super::{
    hook_kind, kind, AgentResult, AgentSession, AnsweredBy, CrashDetail, Event, FamilyHow, HooksInstall, Moment,
    MomentEvidence, MomentOutcome, QueuedBy, ToolStatus, TranscriptLine, UngatedBy, Violation,
};
use crate::evaluation::Evaluation;

impl Event {
    /// An `evaluation` event for stored evaluation `evaluation_id`.
    pub fn evaluated(evaluation_id: i64, e: &Evaluation) -> Event {
        Event::Evaluation {
            evaluation_id,
            tree: e.tree.clone(),
            holds: e.verdict.holds,
            geomean_speedup: e.verdict.geomean_speedup,
            worst_scenario: e.verdict.worst_scenario.clone(),
            worst_speedup: e.verdict.worst_speedup,
            failing: e.verdict.failing_count,
            failures: e.verdict.failures.clone(),
            duration_ms: e.duration_ms,
        }
    }

    /// The kind: the `events.kind` column and the SSE `event:` name. Static
    /// for every kind but the hook call of an event without a constant.
    pub fn kind(&self) -> Cow<'static, str> {
        Cow::Borrowed(match self {
            Event::HookCall { event, .. } => return hook_kind(event),
            Event::CampaignCreated { .. } => kind::CAMPAIGN_CREATED,
            Event::CampaignArchived { .. } => kind::CAMPAIGN_ARCHIVED,
            Event::HooksInstall(_) => kind::HOOKS_INSTALL,
            Event::EvaluationStarted { .. } => kind::EVALUATION_STARTED,
            Event::Evaluation { .. } => kind::EVALUATION,
            Event::Decision { .. } => kind::DECISION,
            Event::QuestionQueued { .. } => kind::QUESTION_QUEUED,
            Event::QuestionDelivered { .. } => kind::QUESTION_DELIVERED,
            Event::QuestionExpired { .. } => kind::QUESTION_EXPIRED,
            Event::QuestionAnswered(_) => kind::QUESTION_ANSWERED,
            Event::QuestionReasked(_) => kind::QUESTION_REASKED,
            Event::QuestionEscalated(_) => kind::QUESTION_ESCALATED,
            Event::Violation(_) => kind::VIOLATION,
            Event::StopUngated { .. } => kind::STOP_UNGATED,
            Event::SessionFailedStart { .. } => kind::SESSION_FAILED_START,
            Event::RunStarted { .. } => kind::RUN_STARTED,
            Event::RunResumed { .. } => kind::RUN_RESUMED,
            Event::RunSuspended { .. } => kind::RUN_SUSPENDED,
            Event::RunEnded { .. } => kind::RUN_ENDED,
            Event::AgentOutput { .. } => kind::AGENT_OUTPUT,
            Event::AgentSession(_) => kind::AGENT_SESSION,
            Event::AgentMessage { .. } => kind::AGENT_MESSAGE,
            Event::AgentToolCall { .. } => kind::AGENT_TOOL_CALL,
            Event::AgentToolResult { .. } => kind::AGENT_TOOL_RESULT,
            Event::AgentFeedback { .. } => kind::AGENT_FEEDBACK,
            Event::AgentUserMessage { .. } => kind::AGENT_USER_MESSAGE,
            Event::AgentResult(_) => kind::AGENT_RESULT,
            Event::AgentSystem { .. } => kind::AGENT_SYSTEM,
            Event::AgentEvent { .. } => kind::AGENT_EVENT,
            Event::AgentCrashed { .. } => kind::AGENT_CRASHED,
            Event::Moment(_) => kind::MOMENT,
            Event::MomentEscalated { .. } => kind::MOMENT_ESCALATED,
            Event::MomentWithheld(_) => kind::MOMENT_WITHHELD,
            Event::GainRecheck { .. } => kind::GAIN_RECHECK,
            Event::GainConfirmed { .. } => kind::GAIN_CONFIRMED,
            Event::EvaluationRemeasured { .. } => kind::EVALUATION_REMEASURED,
            Event::Calibrated(_) => kind::CAMPAIGN_CALIBRATED,
            Event::GainRejected { .. } => kind::GAIN_REJECTED,
            Event::BeamFamily { .. } => kind::BEAM_FAMILY,
            Event::BeamAbandoned { .. } => kind::BEAM_ABANDONED,
            Event::RedteamStarted { .. } => kind::REDTEAM_STARTED,
            Event::RedteamAttack { .. } => kind::REDTEAM_ATTACK,
            Event::RedteamReport(_) => kind::REDTEAM_REPORT,
            Event::AgentUsage(_) => kind::AGENT_USAGE,
            Event::BudgetReached(_) => kind::BUDGET_REACHED,
            Event::NotifyDelivery(_) => kind::NOTIFY_DELIVERY,
            Event::NotifyConfigured { .. } => kind::NOTIFY_CONFIGURED,
            Event::Claim(_) => kind::CLAIM,
            Event::ClaimVerdict(_) => kind::CLAIM_VERDICT,
            Event::BlockStreak { .. } => kind::BLOCK_STREAK,
        })
    }

    /// The JSON body: the `events.payload` column.
    pub fn body(&self) -> Value {
        match self {
            Event::HookCall { agent, event, payload, spooled } => {
                let mut body = json!({"agent": agent, "event": event, "payload": payload});
                if let Some(meta) = spooled {
                    body["spooled"] = meta.clone();
                }
                body
            }
            Event::CampaignCreated { name, workspace, mode, scenarios, protected_files } => {
                json!({"name": name, "workspace": workspace, "mode": mode, "scenarios": scenarios, "protected_files": protected_files})
            }
            Event::HooksInstall(HooksInstall::Installed(i)) => json!({"action": "installed", "install": i}),
            Event::HooksInstall(HooksInstall::Removed { settings_path }) => {
                json!({"action": "removed", "settings_path": settings_path})
            }
            Event::EvaluationStarted { tree } => json!({"tree": tree}),
            Event::Evaluation {
                evaluation_id,
                tree,
                holds,
                geomean_speedup,
                worst_scenario,
                worst_speedup,
                failing,
                failures,
                duration_ms,
            } => json!({
                "evaluation_id": evaluation_id,
                "tree": tree,
                "holds": holds,
                "geomean_speedup": geomean_speedup,
                "worst_scenario": worst_scenario,
                "worst_speedup": worst_speedup,
                "failing": failing,
                "failures": failures,
                "duration_ms": duration_ms,
            }),
            Event::Decision { decision, holds, evaluation_id, stop_event_id, question_id, reason } => {
                json!({"decision": decision.as_str(), "holds": holds, "evaluation_id": evaluation_id, "stop_event_id": stop_event_id, "question_id": question_id, "reason": reason})
            }
            Event::QuestionQueued { question_id, text, by: QueuedBy::Human } => {
                json!({"question_id": question_id, "source": "human", "text": text})
            }
            Event::QuestionQueued { question_id, text, by: QueuedBy::Bank { bank_id, moment } } => {
                json!({"question_id": question_id, "source": "bank", "bank_id": bank_id, "moment": moment, "text": text})
            }
            Event::QuestionDelivered { question: q, via } => {
                json!({"question_id": q.question_id, "source": q.source, "bank_id": q.bank_id, "moment": q.moment, "text": q.text, "via": via.as_str()})
            }
            Event::QuestionExpired { question: q, reason } => {
                json!({"question_id": q.question_id, "source": q.source, "bank_id": q.bank_id, "moment": q.moment, "text": q.text, "reason": reason})
            }
            Event::QuestionAnswered(a) => {
                let mut body = json!({"question_id": a.question_id, "reask_of": a.reask_of, "turns": a.turns});
                match &a.by {
                    AnsweredBy::Evaluation { evaluation_id, tree, baseline } => {
                        body["by"] = json!("evaluation");
                        body["evaluation_id"] = json!(evaluation_id);
                        body["tree"] = json!(tree);
                        body["baseline_tree"] = json!(baseline);
                    }
                    AnsweredBy::Artifact { files, why } => {
                        body["by"] = json!("artifact");
                        body["evidence"] = json!(files);
                        body["why"] = json!(why);
                    }
                }
                body
            }
            Event::QuestionReasked(r) => json!({
                "question_id": r.question_id,
                "reask_of": r.reask_of,
                "form": r.form.as_str(),
                "bank_id": r.bank_id,
                "text": r.text,
                "turns": r.turns,
            }),
            Event::QuestionEscalated(e) => json!({
                "question_id": e.question.question_id,
                "source": e.question.source,
                "bank_id": e.question.bank_id,
                "moment": e.question.moment,
                "text": e.question.text,
                "reasks": e.reasks,
                "turns": e.turns,
            }),
            Event::Violation(Violation::HooksChanged { changes }) => {
                json!({"kind": "hooks_changed", "changes": changes})
            }
            Event::Violation(Violation::TurnEndedUngated { why, uuid, timestamp }) => {
                json!({"kind": "turn_ended_ungated", "changes": [why], "source": "transcript", "uuid": uuid, "timestamp": timestamp})
            }
            Event::StopUngated { why, claim, by: UngatedBy::Gate { event_id, latest_evaluation_id, holds } } => {
                json!({"why": why, "event_id": event_id, "latest_evaluation_id": latest_evaluation_id, "holds": holds, "claim": claim})
            }
            Event::StopUngated { why, claim, by: UngatedBy::Run } => {
                json!({"why": why, "claim": claim, "resumed_by": "run"})
            }
            Event::SessionFailedStart { why, error, event_id } => {
                json!({"why": why, "error": error, "event_id": event_id})
            }
            Event::RunStarted { run_id, agent, daemon, sandbox } => {
                json!({"run_id": run_id, "agent": agent, "daemon": daemon, "sandbox": sandbox})
            }
            Event::RunResumed { run_id, agent, session_id, from_daemon, daemon } => {
                json!({"run_id": run_id, "agent": agent, "session_id": session_id, "from_daemon": from_daemon, "daemon": daemon})
            }
            Event::RunSuspended { run_id, why } => json!({"run_id": run_id, "why": why}),
            Event::RunEnded { run_id, outcome, detail } => {
                json!({"run_id": run_id, "outcome": outcome, "detail": detail})
            }
            Event::AgentOutput { line } => json!({"line": line}),
            Event::AgentSession(AgentSession::ClaudeCode { session_id, model, cwd, version }) => {
                json!({"agent": "claude-code", "session_id": session_id, "model": model, "cwd": cwd, "version": version})
            }
            Event::AgentSession(AgentSession::Codex { session_id }) => {
                json!({"agent": "codex", "session_id": session_id})
            }
            Event::AgentMessage { text, transcript } => with_line(transcript.as_ref(), json!({"text": text})),
            Event::AgentToolCall { id, name, input, transcript } => {
                with_line(transcript.as_ref(), json!({"id": id, "name": name, "input": input}))
            }
            Event::AgentToolResult { tool_use_id, status, content, transcript } => {
                let mut body = json!({"tool_use_id": tool_use_id, "content": content});
                match status {
                    ToolStatus::IsError(v) => body["is_error"] = v.clone(),
                    ToolStatus::ExitCode(v) => body["exit_code"] = v.clone(),
                }
                with_line(transcript.as_ref(), body)
            }
            Event::AgentFeedback { text } => json!({"text": text}),
            Event::AgentUserMessage { text, transcript } => with_line(Some(transcript), json!({"text": text})),
            Event::AgentResult(AgentResult::ClaudeCode { subtype, is_error, num_turns, terminal_reason, result }) => {
                json!({"subtype": subtype, "is_error": is_error, "num_turns": num_turns, "terminal_reason": terminal_reason, "result": result})
            }
            Event::AgentResult(AgentResult::Codex { event, detail }) => {
                json!({"agent": "codex", "event": event, "detail": detail})
            }
            Event::AgentSystem { subtype, content } => json!({"subtype": subtype, "content": content}),
            Event::AgentEvent { event } => json!({"agent": "codex", "event": event}),
            Event::AgentCrashed { agent, restart, status, stderr_tail, detail } => {
                let mut body =
                    json!({"agent": agent, "restart": restart, "status": status, "stderr_tail": stderr_tail});
                match detail {
                    CrashDetail::Stream { resent_messages, first_prompt_taken } => {
                        body["resent_messages"] = json!(resent_messages);
                        body["first_prompt_taken"] = json!(first_prompt_taken);
                    }
                    CrashDetail::Turn { turn_started, message_resent } => {
                        body["turn_started"] = json!(turn_started);
                        body["message_resent"] = json!(message_resent);
                    }
                }
                body
            }
            Event::Moment(m) => moment_body(m),
            Event::MomentEscalated { moment, why, quote } => json!({"moment": moment, "why": why, "quote": quote}),
            Event::MomentWithheld(w) => json!({
                "moment": w.moment,
                "detector": w.detector,
                "share": w.share,
                "evaluation_before": w.evaluation_before,
                "objective_evaluation": w.objective_evaluation,
                "objective_before": w.objective_before,
            }),
            Event::GainRecheck { evaluation_id, tree, seed } => {
                json!({"evaluation_id": evaluation_id, "tree": tree, "seed": seed})
            }
            Event::Calibrated(c) => serde_json::to_value(c).unwrap_or(Value::Null),
            Event::EvaluationRemeasured { evaluation_id, recheck_ids, seeds, runs, holds, decided } => json!({
                "evaluation_id": evaluation_id,
                "recheck_ids": recheck_ids,
                "seeds": seeds,
                "runs": runs,
                "holds": holds,
                "decided": decided,
            }),
            Event::GainConfirmed { evaluation_id, recheck_id, seed } => {
                json!({"evaluation_id": evaluation_id, "recheck_id": recheck_id, "seed": seed})
            }
            Event::GainRejected { evaluation_id, recheck_id, seed, reasons } => {
                json!({"evaluation_id": evaluation_id, "recheck_id": recheck_id, "seed": seed, "reasons": reasons})
            }
            Event::BeamFamily { family, git_ref, how: FamilyHow::Discovered } => {
                json!({"family": family, "ref": git_ref, "how": "discovered"})
            }
            Event::BeamFamily { family, git_ref, how: FamilyHow::Tagged { commit } } => {
                json!({"family": family, "ref": git_ref, "commit": commit, "how": "tagged"})
            }
            Event::BeamAbandoned { family, reason } => json!({"family": family, "reason": reason}),
            Event::RedteamStarted { id, why, attacks } => json!({"id": id, "why": why, "attacks": attacks}),
            Event::RedteamAttack { id, result } => {
                let mut body = serde_json::to_value(result).unwrap_or(Value::Null);
                body["id"] = json!(id);
                body
            }
            Event::RedteamReport(report) => serde_json::to_value(report).unwrap_or(Value::Null),
            Event::AgentUsage(u) => json!({
                "source": u.source.as_str(),
                "run_id": u.run_id,
                "message_id": u.message_id,
                "cumulative": u.cumulative,
                "input_tokens": u.input_tokens,
                "cached_input_tokens": u.cached_input_tokens,
                "output_tokens": u.output_tokens,
                "tokens": u.input_tokens.saturating_add(u.output_tokens),
                "cost_usd": u.cost_usd,
                "session_cost_usd": u.session_cost_usd,
                "reported": u.reported,
            }),
            Event::BudgetReached(b) => json!({
                "run_id": b.run_id,
                "budget": b.budget,
                "limit": b.limit,
                "tokens": b.tokens,
                "cost_usd": b.cost_usd,
                "turns": b.turns,
                "detail": b.detail,
            }),
            Event::NotifyDelivery(d) => json!({
                "delivery": d.delivery,
                "webhook": d.webhook,
                "url": d.url,
                "notify": d.notify,
                "event_id": d.event_id,
                "attempt": d.attempt,
                "status": d.status.as_str(),
                "http_status": d.http_status,
                "error": d.error,
            }),
            Event::NotifyConfigured { notify } => json!({"notify": notify}),
            Event::CampaignArchived { archived } => json!({"archived": archived}),
            Event::Claim(c) => json!({
                "claim": c.claim.as_str(),
                "why": c.why,
                "evidence": c.evidence,
                "evaluation_id": c.evaluation_id,
                "geomean_speedup": c.geomean_speedup,
            }),
            Event::ClaimVerdict(v) => json!({
                "claim_id": v.claim_id,
                "verdict": if v.accepted { "accepted" } else { "rejected" },
                "by": v.by,
                "reason": v.reason,
                "evaluation_id": v.evaluation_id,
                "holds": v.holds,
                "geomean_speedup": v.geomean_speedup,
            }),
            Event::BlockStreak { blocks, best_geomean, escalated } => {
                json!({"blocks": blocks, "best_geomean": best_geomean, "escalated": escalated})
            }
        }
    }
}

/// A body read from a transcript line carries the line's uuid and timestamp.
fn with_line(line: Option<&TranscriptLine>, mut body: Value) -> Value {
    if let Some(l) = line {
        body["uuid"] = json!(l.uuid);
        body["timestamp"] = l.timestamp.clone();
        body["source"] = json!("transcript");
    }
    body
}

fn moment_body(m: &Moment) -> Value {
    let mut body = json!({"moment": m.moment, "detector": m.detector, "detail": m.detail, "source": m.source});
    match &m.evidence {
        MomentEvidence::Finding { evaluations, scenarios, evaluation_count } => {
            body["evaluations"] = json!(evaluations);
            body["scenarios"] = json!(scenarios);
            body["evaluation_count"] = json!(evaluation_count);
        }
        MomentEvidence::Family { family } => body["family"] = json!(family),
    }
    if let Some(c) = &m.claim {
        body["quote"] = json!(c.quote);
        body["repeated"] = json!(c.repeated);
    }
    if let Some(why) = &m.beam {
        body["beam"] = json!(why);
    }
    match &m.outcome {
        MomentOutcome::Recorded => {}
        MomentOutcome::NoQuestion(why) => body["no_question"] = json!(why),
        MomentOutcome::Question { question_id, bank_id, text, via } => {
            let mut q = json!({"question_id": question_id, "bank_id": bank_id, "text": text});
            if let Some(v) = via {
                q["via"] = json!(v.as_str());
            }
            body["question"] = q;
        }
        MomentOutcome::Suggestions(s) => {
            body["suggestions"] =
                Value::Array(s.iter().map(|c| json!({"id": c.id, "text": c.text, "rationale": c.rationale})).collect());
        }
    }
    body
}
