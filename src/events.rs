//! The events gadfly records, as one typed vocabulary.
//!
//! Every event a campaign's log holds is built here: an [`Event`] names its
//! kind ([`Event::kind`], the string stored in the `events.kind` column and
//! sent as the SSE `event:` name) and its JSON body ([`Event::body`], the
//! `payload` column). The strings and the shapes are the ones gadfly always
//! wrote, so the console, the CLI, the metrics and the HTTP contracts read
//! them unchanged; the kind strings are written once, in [`kind`].
//!
//! Fields copied verbatim from an agent's own JSON (its stream-json lines,
//! its transcript, a hook payload) are kept as [`Value`]: gadfly records
//! what the agent said, whatever its type.

use std::borrow::Cow;
use std::path::PathBuf;

use serde_json::{json, Value};

use crate::gate::{self, Decision};
use crate::harness::Evaluation;
use crate::store::QuestionRow;

/// The kind strings, each written once. Match on these (they are `&str`
/// constants, usable as patterns) instead of writing a kind by hand.
pub mod kind {
    pub const CAMPAIGN_CREATED: &str = "campaign.created";
    pub const HOOKS_INSTALL: &str = "hooks.install";
    pub const EVALUATION_STARTED: &str = "evaluation.started";
    pub const EVALUATION: &str = "evaluation";
    pub const DECISION: &str = "decision";
    pub const QUESTION_QUEUED: &str = "question.queued";
    pub const QUESTION_DELIVERED: &str = "question.delivered";
    pub const VIOLATION: &str = "violation";
    pub const STOP_UNGATED: &str = "stop.ungated";
    pub const RUN_STARTED: &str = "run.started";
    pub const RUN_RESUMED: &str = "run.resumed";
    pub const RUN_SUSPENDED: &str = "run.suspended";
    pub const RUN_ENDED: &str = "run.ended";
    pub const AGENT_OUTPUT: &str = "agent.output";
    pub const AGENT_SESSION: &str = "agent.session";
    pub const AGENT_MESSAGE: &str = "agent.message";
    pub const AGENT_TOOL_CALL: &str = "agent.tool_call";
    pub const AGENT_TOOL_RESULT: &str = "agent.tool_result";
    pub const AGENT_FEEDBACK: &str = "agent.feedback";
    pub const AGENT_USER_MESSAGE: &str = "agent.user_message";
    pub const AGENT_RESULT: &str = "agent.result";
    pub const AGENT_SYSTEM: &str = "agent.system";
    pub const AGENT_EVENT: &str = "agent.event";
    pub const AGENT_CRASHED: &str = "agent.crashed";
    pub const MOMENT: &str = "moment";
    pub const MOMENT_ESCALATED: &str = "moment.escalated";
    pub const GAIN_RECHECK: &str = "gain.recheck";
    pub const GAIN_CONFIRMED: &str = "gain.confirmed";
    pub const GAIN_REJECTED: &str = "gain.rejected";
    pub const BEAM_FAMILY: &str = "beam.family";
    pub const BEAM_ABANDONED: &str = "beam.abandoned";

    /// A hook call is recorded as `hook.` and its event in snake case
    /// (`post-tool-use` gives `hook.post_tool_use`); these are the Claude
    /// Code hook events (`crate::hook::CLAUDE_CODE_EVENTS`).
    pub const HOOK_STOP: &str = "hook.stop";
    pub const HOOK_SUBAGENT_STOP: &str = "hook.subagent_stop";
    pub const HOOK_POST_TOOL_USE: &str = "hook.post_tool_use";
    pub const HOOK_PRE_TOOL_USE: &str = "hook.pre_tool_use";
    pub const HOOK_USER_PROMPT_SUBMIT: &str = "hook.user_prompt_submit";
    pub const HOOK_SESSION_START: &str = "hook.session_start";
    pub const HOOK_SESSION_END: &str = "hook.session_end";
    pub const HOOK_NOTIFICATION: &str = "hook.notification";
    pub const HOOK_PRE_COMPACT: &str = "hook.pre_compact";
    pub const HOOK_STOP_FAILURE: &str = "hook.stop_failure";
}

/// The hook events with a kind constant: (event in kebab case, kind).
const HOOK_KINDS: &[(&str, &str)] = &[
    ("stop", kind::HOOK_STOP),
    ("subagent-stop", kind::HOOK_SUBAGENT_STOP),
    ("post-tool-use", kind::HOOK_POST_TOOL_USE),
    ("pre-tool-use", kind::HOOK_PRE_TOOL_USE),
    ("user-prompt-submit", kind::HOOK_USER_PROMPT_SUBMIT),
    ("session-start", kind::HOOK_SESSION_START),
    ("session-end", kind::HOOK_SESSION_END),
    ("notification", kind::HOOK_NOTIFICATION),
    ("pre-compact", kind::HOOK_PRE_COMPACT),
    ("stop-failure", kind::HOOK_STOP_FAILURE),
];

/// Every kind gadfly records (a hook call of an event other than Claude
/// Code's also gives `hook.<event>`, see [`hook_kind`]).
pub const ALL_KINDS: &[&str] = &[
    kind::CAMPAIGN_CREATED,
    kind::HOOKS_INSTALL,
    kind::EVALUATION_STARTED,
    kind::EVALUATION,
    kind::DECISION,
    kind::QUESTION_QUEUED,
    kind::QUESTION_DELIVERED,
    kind::VIOLATION,
    kind::STOP_UNGATED,
    kind::RUN_STARTED,
    kind::RUN_RESUMED,
    kind::RUN_SUSPENDED,
    kind::RUN_ENDED,
    kind::AGENT_OUTPUT,
    kind::AGENT_SESSION,
    kind::AGENT_MESSAGE,
    kind::AGENT_TOOL_CALL,
    kind::AGENT_TOOL_RESULT,
    kind::AGENT_FEEDBACK,
    kind::AGENT_USER_MESSAGE,
    kind::AGENT_RESULT,
    kind::AGENT_SYSTEM,
    kind::AGENT_EVENT,
    kind::AGENT_CRASHED,
    kind::MOMENT,
    kind::MOMENT_ESCALATED,
    kind::GAIN_RECHECK,
    kind::GAIN_CONFIRMED,
    kind::GAIN_REJECTED,
    kind::BEAM_FAMILY,
    kind::BEAM_ABANDONED,
    kind::HOOK_STOP,
    kind::HOOK_SUBAGENT_STOP,
    kind::HOOK_POST_TOOL_USE,
    kind::HOOK_PRE_TOOL_USE,
    kind::HOOK_USER_PROMPT_SUBMIT,
    kind::HOOK_SESSION_START,
    kind::HOOK_SESSION_END,
    kind::HOOK_NOTIFICATION,
    kind::HOOK_PRE_COMPACT,
    kind::HOOK_STOP_FAILURE,
];

/// The kind a hook call of `event` (kebab case) is recorded as.
pub fn hook_kind(event: &str) -> Cow<'static, str> {
    match HOOK_KINDS.iter().find(|(e, _)| *e == event) {
        Some((_, k)) => Cow::Borrowed(k),
        None => Cow::Owned(format!("hook.{}", event.replace('-', "_"))),
    }
}

/// How a question reached the agent (the `via` of `question.delivered`,
/// also the `delivered_via` of its row).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// Added to a hook's answer (PostToolUse, UserPromptSubmit).
    HookAdditionalContext,
    /// Carried in a blocked stop's reason.
    StopHookReason,
    /// Put into the message that starts a turn.
    AgentPrompt,
    /// Written into a running agent's stdin.
    AgentStdin,
}

impl Via {
    pub fn as_str(self) -> &'static str {
        match self {
            Via::HookAdditionalContext => "hook_additional_context",
            Via::StopHookReason => "stop_hook_reason",
            Via::AgentPrompt => "agent_prompt",
            Via::AgentStdin => "agent_stdin",
        }
    }
}

/// A delivered question, as `question.delivered` tells it.
#[derive(Debug, Clone, PartialEq)]
pub struct DeliveredQuestion {
    pub question_id: i64,
    /// `human`, `bank`, or (from a stop's block reason) the bank entry's id.
    pub source: String,
    pub bank_id: Option<String>,
    pub moment: Option<String>,
    pub text: String,
}

impl From<&QuestionRow> for DeliveredQuestion {
    fn from(q: &QuestionRow) -> Self {
        DeliveredQuestion {
            question_id: q.id,
            source: q.source.clone(),
            bank_id: q.bank_id.clone(),
            moment: q.moment.clone(),
            text: q.text.clone(),
        }
    }
}

impl DeliveredQuestion {
    /// A question a stop asks in its block reason (queued as `question_id`):
    /// its source is the bank entry's id, or `human`.
    pub fn asked_at_stop(question_id: i64, q: &gate::Question) -> Self {
        DeliveredQuestion {
            question_id,
            source: q.source.clone(),
            bank_id: (q.source != "human").then(|| q.source.clone()),
            moment: Some(q.moment.clone()),
            text: q.text.clone(),
        }
    }
}

/// Who queued a question.
#[derive(Debug, Clone, PartialEq)]
pub enum QueuedBy {
    /// A person (`source: human`).
    Human,
    /// Picked from the bank for a moment (`source: bank`).
    Bank { bank_id: String, moment: String },
}

/// What a `hooks.install` event records.
#[derive(Debug, Clone, PartialEq)]
pub enum HooksInstall {
    Installed(crate::agent::attach::Installed),
    Removed { settings_path: PathBuf },
}

/// A `violation`.
#[derive(Debug, Clone, PartialEq)]
pub enum Violation {
    /// gadfly's installed hooks changed.
    HooksChanged { changes: Vec<String> },
    /// A turn ended, seen in the transcript, with no Stop hook call.
    TurnEndedUngated { why: String, uuid: String, timestamp: String },
}

/// Who found an ungated stop.
#[derive(Debug, Clone, PartialEq)]
pub enum UngatedBy {
    /// The gate (a session end, a StopFailure, a spooled stop, a transcript):
    /// with the hook call's event and the latest evaluation.
    Gate { event_id: i64, latest_evaluation_id: Option<i64>, holds: bool },
    /// gadfly's own run, which judges the turn and resumes the agent.
    Run,
}

/// The session an agent's stream opened.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentSession {
    /// Claude Code's `system/init` line.
    ClaudeCode { session_id: Option<String>, model: Value, cwd: Value, version: Value },
    /// Codex's `thread.started`.
    Codex { session_id: String },
}

/// The end of an agent's turn, as its stream tells it.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentResult {
    /// Claude Code's `result` line (`result` truncated).
    ClaudeCode { subtype: Value, is_error: Value, num_turns: Value, terminal_reason: Value, result: String },
    /// Codex's `turn.completed`, `turn.failed` or `error` (`event`), whole.
    Codex { event: String, detail: Value },
}

/// How a tool call ended.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolStatus {
    /// Claude Code's `is_error`.
    IsError(Value),
    /// Codex's `exit_code`.
    ExitCode(Value),
}

/// The transcript line an event was read from (`uuid`, `timestamp`,
/// `source: transcript` in its body).
#[derive(Debug, Clone, PartialEq)]
pub struct TranscriptLine {
    pub uuid: String,
    pub timestamp: Value,
}

/// What else an `agent.crashed` tells, by the loop that saw it.
#[derive(Debug, Clone, PartialEq)]
pub enum CrashDetail {
    /// The Claude Code stream loop: the messages sent again, and whether
    /// the first prompt was taken.
    Stream { resent_messages: usize, first_prompt_taken: bool },
    /// The one-process-per-turn loop (Codex, a command).
    Turn { turn_started: bool, message_resent: bool },
}

/// How a beam family came to be.
#[derive(Debug, Clone, PartialEq)]
pub enum FamilyHow {
    Discovered,
    Tagged { commit: String },
}

/// A `moment`: what was seen, its evidence, and what gadfly did about it.
#[derive(Debug, Clone, PartialEq)]
pub struct Moment {
    pub moment: String,
    pub detector: String,
    pub detail: String,
    /// `numeric`, `text`, `start` or `beam`.
    pub source: String,
    pub evidence: MomentEvidence,
    /// A claim moment's quote, and whether the claim was repeated without
    /// fresh evidence.
    pub claim: Option<ClaimEvidence>,
    /// Why the question came from the beam (too few live families).
    pub beam: Option<String>,
    pub outcome: MomentOutcome,
}

#[derive(Debug, Clone, PartialEq)]
pub enum MomentEvidence {
    /// A detector's finding: the evaluations and scenarios it rests on, and
    /// how many evaluations the campaign had.
    Finding { evaluations: Vec<i64>, scenarios: Vec<String>, evaluation_count: usize },
    /// A beam family.
    Family { family: String },
}

#[derive(Debug, Clone, PartialEq)]
pub struct ClaimEvidence {
    pub quote: String,
    pub repeated: bool,
}

/// What became of a moment.
#[derive(Debug, Clone, PartialEq)]
pub enum MomentOutcome {
    /// Recorded only (audit mode).
    Recorded,
    /// Recorded only, with why no question was asked.
    NoQuestion(String),
    /// Its question was queued (`via` none) or asked at once.
    Question { question_id: i64, bank_id: String, text: String, via: Option<Via> },
    /// Bank questions offered to a person.
    Suggestions(Vec<Suggestion>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Suggestion {
    pub id: String,
    pub text: String,
    pub rationale: String,
}

/// One event of a campaign's log.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// `hook.<event>`: an agent's hook call; `spooled` when the hook client
    /// replayed it from its spool.
    HookCall {
        agent: String,
        event: String,
        payload: Value,
        spooled: Option<Value>,
    },
    CampaignCreated {
        name: String,
        workspace: PathBuf,
        mode: String,
        scenarios: Vec<String>,
        protected_files: usize,
    },
    HooksInstall(HooksInstall),
    EvaluationStarted {
        tree: String,
    },
    Evaluation {
        evaluation_id: i64,
        tree: String,
        holds: bool,
        geomean_speedup: Option<f64>,
        worst_scenario: Option<String>,
        worst_speedup: Option<f64>,
        failing: usize,
        failures: Vec<String>,
        duration_ms: u64,
    },
    /// A judged stop attempt (recorded with its `stop_attempts` row).
    Decision {
        decision: Decision,
        holds: bool,
        evaluation_id: Option<i64>,
        stop_event_id: i64,
        question_id: Option<i64>,
        reason: Option<String>,
    },
    QuestionQueued {
        question_id: i64,
        text: String,
        by: QueuedBy,
    },
    QuestionDelivered {
        question: DeliveredQuestion,
        via: Via,
    },
    Violation(Violation),
    StopUngated {
        why: String,
        claim: Option<String>,
        by: UngatedBy,
    },
    RunStarted {
        run_id: i64,
        agent: String,
        daemon: String,
    },
    RunResumed {
        run_id: i64,
        agent: String,
        session_id: Option<String>,
        from_daemon: Option<String>,
        daemon: String,
    },
    RunSuspended {
        run_id: i64,
        why: String,
    },
    RunEnded {
        run_id: i64,
        outcome: String,
        detail: String,
    },
    /// A line of an agent's output that is not JSON (or a command's line).
    AgentOutput {
        line: String,
    },
    AgentSession(AgentSession),
    AgentMessage {
        text: Value,
        transcript: Option<TranscriptLine>,
    },
    AgentToolCall {
        id: Value,
        name: Value,
        input: Value,
        transcript: Option<TranscriptLine>,
    },
    AgentToolResult {
        tool_use_id: Value,
        status: ToolStatus,
        content: String,
        transcript: Option<TranscriptLine>,
    },
    /// Text Claude Code's stream passed to the agent as the user.
    AgentFeedback {
        text: String,
    },
    /// A user message of an attached session's transcript.
    AgentUserMessage {
        text: String,
        transcript: TranscriptLine,
    },
    AgentResult(AgentResult),
    /// Claude Code's other `system` lines.
    AgentSystem {
        subtype: Value,
        content: Value,
    },
    /// Any other Codex line, whole.
    AgentEvent {
        event: Value,
    },
    AgentCrashed {
        agent: String,
        restart: u32,
        status: String,
        stderr_tail: String,
        detail: CrashDetail,
    },
    Moment(Moment),
    MomentEscalated {
        moment: String,
        why: String,
        quote: String,
    },
    GainRecheck {
        evaluation_id: i64,
        tree: String,
        seed: u64,
    },
    GainConfirmed {
        evaluation_id: i64,
        recheck_id: i64,
        seed: u64,
    },
    GainRejected {
        evaluation_id: i64,
        recheck_id: i64,
        seed: u64,
        reasons: Vec<String>,
    },
    BeamFamily {
        family: String,
        git_ref: String,
        how: FamilyHow,
    },
    BeamAbandoned {
        family: String,
        reason: String,
    },
}

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
            Event::HooksInstall(_) => kind::HOOKS_INSTALL,
            Event::EvaluationStarted { .. } => kind::EVALUATION_STARTED,
            Event::Evaluation { .. } => kind::EVALUATION,
            Event::Decision { .. } => kind::DECISION,
            Event::QuestionQueued { .. } => kind::QUESTION_QUEUED,
            Event::QuestionDelivered { .. } => kind::QUESTION_DELIVERED,
            Event::Violation(_) => kind::VIOLATION,
            Event::StopUngated { .. } => kind::STOP_UNGATED,
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
            Event::GainRecheck { .. } => kind::GAIN_RECHECK,
            Event::GainConfirmed { .. } => kind::GAIN_CONFIRMED,
            Event::GainRejected { .. } => kind::GAIN_REJECTED,
            Event::BeamFamily { .. } => kind::BEAM_FAMILY,
            Event::BeamAbandoned { .. } => kind::BEAM_ABANDONED,
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
            Event::RunStarted { run_id, agent, daemon } => json!({"run_id": run_id, "agent": agent, "daemon": daemon}),
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
            Event::GainRecheck { evaluation_id, tree, seed } => {
                json!({"evaluation_id": evaluation_id, "tree": tree, "seed": seed})
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Checks an event's kind and body against what the call site that
    /// recorded it before [`Event`] wrote by hand.
    fn check(e: Event, kind: &str, body: Value) {
        assert_eq!(e.kind(), kind);
        assert_eq!(e.body(), body, "{kind}");
        assert!(ALL_KINDS.contains(&kind), "{kind} is missing from ALL_KINDS");
    }

    fn transcript() -> Option<TranscriptLine> {
        Some(TranscriptLine { uuid: "u1".into(), timestamp: json!("2026-01-01T00:00:00Z") })
    }

    #[test]
    fn kinds_are_listed_once_and_hook_kinds_follow_the_event_name() {
        let mut all = ALL_KINDS.to_vec();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), ALL_KINDS.len(), "a kind is listed twice");
        for event in crate::hook::CLAUDE_CODE_EVENTS {
            let k = hook_kind(event);
            assert!(matches!(k, Cow::Borrowed(_)), "{event} has no kind constant");
            assert_eq!(k, format!("hook.{}", event.replace('-', "_")));
            assert!(ALL_KINDS.contains(&&*k));
        }
        assert_eq!(hook_kind("some-new-event"), "hook.some_new_event");
    }

    #[test]
    fn hook_calls() {
        let payload = json!({"session_id": "s1", "tool_use_id": "t1"});
        let call = |event: &str, spooled| Event::HookCall {
            agent: "claude-code".into(),
            event: event.into(),
            payload: payload.clone(),
            spooled,
        };
        check(
            call("post-tool-use", None),
            "hook.post_tool_use",
            json!({"agent": "claude-code", "event": "post-tool-use", "payload": {"session_id": "s1", "tool_use_id": "t1"}}),
        );
        let meta = json!({"at": "2026-01-01T00:00:00Z", "outcome": "blocked", "why": "down"});
        check(
            call("stop", Some(meta)),
            "hook.stop",
            json!({"agent": "claude-code", "event": "stop", "payload": {"session_id": "s1", "tool_use_id": "t1"},
                   "spooled": {"at": "2026-01-01T00:00:00Z", "outcome": "blocked", "why": "down"}}),
        );
        let odd = call("custom-thing", None);
        assert_eq!(odd.kind(), "hook.custom_thing");
    }

    #[test]
    fn campaign_and_hook_installs() {
        check(
            Event::CampaignCreated {
                name: "attn".into(),
                workspace: PathBuf::from("/w"),
                mode: "autonomous".into(),
                scenarios: vec!["a".into(), "b".into()],
                protected_files: 3,
            },
            "campaign.created",
            json!({"name": "attn", "workspace": "/w", "mode": "autonomous", "scenarios": ["a", "b"], "protected_files": 3}),
        );
        let installed = crate::agent::attach::Installed {
            kind: "attach".into(),
            settings_path: PathBuf::from("/w/.claude/settings.local.json"),
            dir: PathBuf::from("/w"),
            exe: PathBuf::from("/bin/gadfly"),
            exe_sha256: "ab".into(),
            fingerprint: "cd".into(),
        };
        check(
            Event::HooksInstall(HooksInstall::Installed(installed.clone())),
            "hooks.install",
            json!({"action": "installed", "install": installed}),
        );
        check(
            Event::HooksInstall(HooksInstall::Removed { settings_path: PathBuf::from("/w/s.json") }),
            "hooks.install",
            json!({"action": "removed", "settings_path": "/w/s.json"}),
        );
    }

    #[test]
    fn evaluations_and_decisions() {
        check(Event::EvaluationStarted { tree: "t1".into() }, "evaluation.started", json!({"tree": "t1"}));
        let eval: Evaluation = serde_json::from_value(json!({
            "tree": "t1", "holds": false, "scenarios": [], "geomean_speedup": 1.5, "worst_scenario": "b",
            "worst_speedup": 0.9, "failures": ["b is slower"], "failing_count": 1,
            "build": null, "run": null, "violations": [], "duration_ms": 1200, "created_at": "t"
        }))
        .unwrap_or_else(|e| panic!("an evaluation fixture: {e}"));
        check(
            Event::evaluated(7, &eval),
            "evaluation",
            json!({"evaluation_id": 7, "tree": "t1", "holds": false, "geomean_speedup": 1.5, "worst_scenario": "b",
                   "worst_speedup": 0.9, "failing": 1, "failures": ["b is slower"], "duration_ms": 1200}),
        );
        check(
            Event::Decision {
                decision: Decision::Block,
                holds: false,
                evaluation_id: Some(7),
                stop_event_id: 12,
                question_id: None,
                reason: Some("no".into()),
            },
            "decision",
            json!({"decision": "block", "holds": false, "evaluation_id": 7, "stop_event_id": 12, "question_id": null,
                   "reason": "no"}),
        );
    }

    #[test]
    fn questions() {
        check(
            Event::QuestionQueued { question_id: 3, text: "Why?".into(), by: QueuedBy::Human },
            "question.queued",
            json!({"question_id": 3, "source": "human", "text": "Why?"}),
        );
        check(
            Event::QuestionQueued {
                question_id: 4,
                text: "Bound?".into(),
                by: QueuedBy::Bank { bank_id: "bound-001".into(), moment: "plateau".into() },
            },
            "question.queued",
            json!({"question_id": 4, "source": "bank", "bank_id": "bound-001", "moment": "plateau", "text": "Bound?"}),
        );
        let row = QuestionRow {
            id: 5,
            campaign_id: "c".into(),
            source: "bank".into(),
            bank_id: Some("bound-001".into()),
            moment: None,
            text: "Bound?".into(),
            status: "delivered".into(),
            created_at: "t".into(),
            delivered_at: None,
            delivered_via: None,
        };
        for (via, s) in [
            (Via::HookAdditionalContext, "hook_additional_context"),
            (Via::AgentPrompt, "agent_prompt"),
            (Via::AgentStdin, "agent_stdin"),
        ] {
            check(
                Event::QuestionDelivered { question: (&row).into(), via },
                "question.delivered",
                json!({"question_id": 5, "source": "bank", "bank_id": "bound-001", "moment": null, "text": "Bound?", "via": s}),
            );
        }
        // At a stop: the source is the bank entry (its id is the bank id), or human.
        let picked = gate::Question {
            queued_id: None,
            source: "bound-001".into(),
            moment: "completion_claim".into(),
            text: "Bound?".into(),
        };
        check(
            Event::QuestionDelivered {
                question: DeliveredQuestion::asked_at_stop(6, &picked),
                via: Via::StopHookReason,
            },
            "question.delivered",
            json!({"question_id": 6, "source": "bound-001", "bank_id": "bound-001", "moment": "completion_claim",
                   "text": "Bound?", "via": "stop_hook_reason"}),
        );
        let human = gate::Question {
            queued_id: Some(3),
            source: "human".into(),
            moment: "plateau".into(),
            text: "Why?".into(),
        };
        check(
            Event::QuestionDelivered {
                question: DeliveredQuestion::asked_at_stop(3, &human),
                via: Via::StopHookReason,
            },
            "question.delivered",
            json!({"question_id": 3, "source": "human", "bank_id": null, "moment": "plateau", "text": "Why?",
                   "via": "stop_hook_reason"}),
        );
    }

    #[test]
    fn violations_and_ungated_stops() {
        check(
            Event::Violation(Violation::HooksChanged { changes: vec!["removed".into()] }),
            "violation",
            json!({"kind": "hooks_changed", "changes": ["removed"]}),
        );
        check(
            Event::Violation(Violation::TurnEndedUngated {
                why: "no Stop".into(),
                uuid: "u9".into(),
                timestamp: "2026-01-01T00:00:00Z".into(),
            }),
            "violation",
            json!({"kind": "turn_ended_ungated", "changes": ["no Stop"], "source": "transcript", "uuid": "u9",
                   "timestamp": "2026-01-01T00:00:00Z"}),
        );
        check(
            Event::StopUngated {
                why: "ended".into(),
                claim: None,
                by: UngatedBy::Gate { event_id: 4, latest_evaluation_id: None, holds: false },
            },
            "stop.ungated",
            json!({"why": "ended", "event_id": 4, "latest_evaluation_id": null, "holds": false, "claim": null}),
        );
        check(
            Event::StopUngated { why: "ended".into(), claim: Some("Done.".into()), by: UngatedBy::Run },
            "stop.ungated",
            json!({"why": "ended", "claim": "Done.", "resumed_by": "run"}),
        );
    }

    #[test]
    fn runs() {
        check(
            Event::RunStarted { run_id: 1, agent: "codex".into(), daemon: "d1".into() },
            "run.started",
            json!({"run_id": 1, "agent": "codex", "daemon": "d1"}),
        );
        check(
            Event::RunResumed {
                run_id: 1,
                agent: "claude-code".into(),
                session_id: Some("s1".into()),
                from_daemon: None,
                daemon: "d2".into(),
            },
            "run.resumed",
            json!({"run_id": 1, "agent": "claude-code", "session_id": "s1", "from_daemon": null, "daemon": "d2"}),
        );
        check(
            Event::RunSuspended { run_id: 1, why: "shut down".into() },
            "run.suspended",
            json!({"run_id": 1, "why": "shut down"}),
        );
        check(
            Event::RunEnded { run_id: 1, outcome: "completed".into(), detail: "ok".into() },
            "run.ended",
            json!({"run_id": 1, "outcome": "completed", "detail": "ok"}),
        );
    }

    #[test]
    fn agent_streams() {
        check(Event::AgentOutput { line: "hi".into() }, "agent.output", json!({"line": "hi"}));
        check(
            Event::AgentSession(AgentSession::ClaudeCode {
                session_id: Some("s1".into()),
                model: json!("opus"),
                cwd: json!("/w"),
                version: Value::Null,
            }),
            "agent.session",
            json!({"agent": "claude-code", "session_id": "s1", "model": "opus", "cwd": "/w", "version": null}),
        );
        check(
            Event::AgentSession(AgentSession::Codex { session_id: "th1".into() }),
            "agent.session",
            json!({"agent": "codex", "session_id": "th1"}),
        );
        check(
            Event::AgentMessage { text: json!("Done."), transcript: None },
            "agent.message",
            json!({"text": "Done."}),
        );
        check(
            Event::AgentMessage { text: json!("Done."), transcript: transcript() },
            "agent.message",
            json!({"text": "Done.", "uuid": "u1", "timestamp": "2026-01-01T00:00:00Z", "source": "transcript"}),
        );
        check(
            Event::AgentToolCall {
                id: json!("t1"),
                name: json!("Bash"),
                input: json!({"command": "make"}),
                transcript: None,
            },
            "agent.tool_call",
            json!({"id": "t1", "name": "Bash", "input": {"command": "make"}}),
        );
        check(
            Event::AgentToolCall {
                id: json!("t1"),
                name: json!("exec_command"),
                input: json!({"cmd": "make"}),
                transcript: transcript(),
            },
            "agent.tool_call",
            json!({"id": "t1", "name": "exec_command", "input": {"cmd": "make"}, "uuid": "u1",
                   "timestamp": "2026-01-01T00:00:00Z", "source": "transcript"}),
        );
        check(
            Event::AgentToolResult {
                tool_use_id: json!("t1"),
                status: ToolStatus::IsError(json!(false)),
                content: "ok".into(),
                transcript: None,
            },
            "agent.tool_result",
            json!({"tool_use_id": "t1", "is_error": false, "content": "ok"}),
        );
        check(
            Event::AgentToolResult {
                tool_use_id: json!("t1"),
                status: ToolStatus::ExitCode(json!(2)),
                content: "boom".into(),
                transcript: None,
            },
            "agent.tool_result",
            json!({"tool_use_id": "t1", "exit_code": 2, "content": "boom"}),
        );
        check(
            Event::AgentToolResult {
                tool_use_id: json!("t1"),
                status: ToolStatus::IsError(Value::Null),
                content: "ok".into(),
                transcript: transcript(),
            },
            "agent.tool_result",
            json!({"tool_use_id": "t1", "is_error": null, "content": "ok", "uuid": "u1",
                   "timestamp": "2026-01-01T00:00:00Z", "source": "transcript"}),
        );
        check(Event::AgentFeedback { text: "blocked".into() }, "agent.feedback", json!({"text": "blocked"}));
        check(
            Event::AgentUserMessage {
                text: "go".into(),
                transcript: TranscriptLine { uuid: "u2".into(), timestamp: Value::Null },
            },
            "agent.user_message",
            json!({"text": "go", "uuid": "u2", "timestamp": null, "source": "transcript"}),
        );
        check(
            Event::AgentResult(AgentResult::ClaudeCode {
                subtype: json!("success"),
                is_error: json!(false),
                num_turns: json!(3),
                terminal_reason: Value::Null,
                result: "Done.".into(),
            }),
            "agent.result",
            json!({"subtype": "success", "is_error": false, "num_turns": 3, "terminal_reason": null, "result": "Done."}),
        );
        check(
            Event::AgentResult(AgentResult::Codex {
                event: "turn.completed".into(),
                detail: json!({"type": "turn.completed"}),
            }),
            "agent.result",
            json!({"agent": "codex", "event": "turn.completed", "detail": {"type": "turn.completed"}}),
        );
        check(
            Event::AgentSystem { subtype: json!("compact_boundary"), content: Value::Null },
            "agent.system",
            json!({"subtype": "compact_boundary", "content": null}),
        );
        check(
            Event::AgentEvent { event: json!({"type": "item.updated"}) },
            "agent.event",
            json!({"agent": "codex", "event": {"type": "item.updated"}}),
        );
        check(
            Event::AgentCrashed {
                agent: "claude-code".into(),
                restart: 1,
                status: "Ok(Ok(ExitStatus(unix_wait_status(256))))".into(),
                stderr_tail: "err".into(),
                detail: CrashDetail::Stream { resent_messages: 2, first_prompt_taken: true },
            },
            "agent.crashed",
            json!({"agent": "claude-code", "restart": 1, "stderr_tail": "err",
                   "status": "Ok(Ok(ExitStatus(unix_wait_status(256))))", "resent_messages": 2,
                   "first_prompt_taken": true}),
        );
        check(
            Event::AgentCrashed {
                agent: "codex".into(),
                restart: 2,
                status: "exit status: 1".into(),
                stderr_tail: "".into(),
                detail: CrashDetail::Turn { turn_started: true, message_resent: false },
            },
            "agent.crashed",
            json!({"agent": "codex", "restart": 2, "status": "exit status: 1", "turn_started": true,
                   "message_resent": false, "stderr_tail": ""}),
        );
    }

    fn finding(source: &str) -> Moment {
        Moment {
            moment: "plateau".into(),
            detector: "plateau".into(),
            detail: "flat".into(),
            source: source.into(),
            evidence: MomentEvidence::Finding {
                evaluations: vec![1, 2],
                scenarios: vec!["a".into()],
                evaluation_count: 2,
            },
            claim: None,
            beam: None,
            outcome: MomentOutcome::Recorded,
        }
    }

    #[test]
    fn moments() {
        let base = json!({"moment": "plateau", "detector": "plateau", "evaluations": [1, 2], "scenarios": ["a"],
                          "detail": "flat", "source": "numeric", "evaluation_count": 2});
        let with = |extra: Value| {
            let mut b = base.clone();
            for (k, v) in extra.as_object().into_iter().flatten() {
                b[k] = v.clone();
            }
            b
        };
        // Audit mode: the finding alone.
        check(Event::Moment(finding("numeric")), "moment", base.clone());
        // Held for the stop's question.
        let mut m = finding("numeric");
        m.outcome = MomentOutcome::NoQuestion("asked at the stop, whose claim shows the same moment".into());
        check(
            Event::Moment(m),
            "moment",
            with(json!({"no_question": "asked at the stop, whose claim shows the same moment"})),
        );
        // Autonomous: queued, maybe from the beam.
        let mut m = finding("numeric");
        m.beam = Some("too few live families".into());
        m.outcome = MomentOutcome::Question {
            question_id: 9,
            bank_id: "family-001".into(),
            text: "New family?".into(),
            via: None,
        };
        check(
            Event::Moment(m),
            "moment",
            with(json!({"beam": "too few live families",
                        "question": {"question_id": 9, "bank_id": "family-001", "text": "New family?"}})),
        );
        // Human: suggestions.
        let mut m = finding("numeric");
        m.outcome = MomentOutcome::Suggestions(vec![Suggestion {
            id: "bound-001".into(),
            text: "Bound?".into(),
            rationale: "r".into(),
        }]);
        check(
            Event::Moment(m),
            "moment",
            with(json!({"suggestions": [{"id": "bound-001", "text": "Bound?", "rationale": "r"}]})),
        );
        // A claim asked at the stop.
        let mut m = finding("text");
        m.claim = Some(ClaimEvidence { quote: "this is the limit".into(), repeated: true });
        m.outcome = MomentOutcome::Question {
            question_id: 10,
            bank_id: "bound-002".into(),
            text: "Measured?".into(),
            via: Some(Via::StopHookReason),
        };
        check(
            Event::Moment(m),
            "moment",
            with(json!({"source": "text", "quote": "this is the limit", "repeated": true,
                        "question": {"question_id": 10, "bank_id": "bound-002", "text": "Measured?",
                                     "via": "stop_hook_reason"}})),
        );
        // The beam's revisit question.
        check(
            Event::Moment(Moment {
                moment: "plateau".into(),
                detector: "beam_revisit".into(),
                detail: "abandoned family f reached 1.90x against the beam's best 2.00x".into(),
                source: "beam".into(),
                evidence: MomentEvidence::Family { family: "f".into() },
                claim: None,
                beam: None,
                outcome: MomentOutcome::Question {
                    question_id: 11,
                    bank_id: "revisit-001".into(),
                    text: "Revisit?".into(),
                    via: None,
                },
            }),
            "moment",
            json!({"moment": "plateau", "detector": "beam_revisit", "family": "f",
                   "detail": "abandoned family f reached 1.90x against the beam's best 2.00x", "source": "beam",
                   "question": {"question_id": 11, "bank_id": "revisit-001", "text": "Revisit?"}}),
        );
        check(
            Event::MomentEscalated { moment: "limit_claim".into(), why: "repeated".into(), quote: "q".into() },
            "moment.escalated",
            json!({"moment": "limit_claim", "why": "repeated", "quote": "q"}),
        );
    }

    #[test]
    fn gains_and_beams() {
        check(
            Event::GainRecheck { evaluation_id: 7, tree: "t1".into(), seed: 42 },
            "gain.recheck",
            json!({"evaluation_id": 7, "tree": "t1", "seed": 42}),
        );
        check(
            Event::GainConfirmed { evaluation_id: 7, recheck_id: 8, seed: 42 },
            "gain.confirmed",
            json!({"evaluation_id": 7, "recheck_id": 8, "seed": 42}),
        );
        check(
            Event::GainRejected { evaluation_id: 7, recheck_id: 8, seed: 42, reasons: vec!["a differs".into()] },
            "gain.rejected",
            json!({"evaluation_id": 7, "recheck_id": 8, "seed": 42, "reasons": ["a differs"]}),
        );
        check(
            Event::BeamFamily { family: "f".into(), git_ref: "refs/heads/beam/f".into(), how: FamilyHow::Discovered },
            "beam.family",
            json!({"family": "f", "ref": "refs/heads/beam/f", "how": "discovered"}),
        );
        check(
            Event::BeamFamily {
                family: "f".into(),
                git_ref: "refs/heads/beam/f".into(),
                how: FamilyHow::Tagged { commit: "abc".into() },
            },
            "beam.family",
            json!({"family": "f", "ref": "refs/heads/beam/f", "commit": "abc", "how": "tagged"}),
        );
        check(
            Event::BeamAbandoned { family: "f".into(), reason: "slow".into() },
            "beam.abandoned",
            json!({"family": "f", "reason": "slow"}),
        );
    }
}
