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

use serde_json::Value;

use crate::gate::{self, Decision};

/// The kind strings, each written once. Match on these (they are `&str`
/// constants, usable as patterns) instead of writing a kind by hand.
pub mod kind;

mod body;

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
    Installed(Installed),
    Removed { settings_path: PathBuf },
}

/// The hooks gadfly installed for a campaign, as recorded when it wrote
/// them: checked again at every SessionStart and stop, so an agent that
/// edits them (or disables hooks, or swaps the hook binary) is caught.
/// Plain data, as the event carries it; reading and checking the files is
/// `crate::agent::attach`'s (which names it `attach::Installed`).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct Installed {
    /// `attach` (entries merged into the project's settings) or `spawn`
    /// (a settings file of gadfly's own, passed with --settings).
    pub kind: String,
    pub settings_path: PathBuf,
    /// The folder the agent runs in: its `.claude/settings*.json` can
    /// disable every hook.
    pub dir: PathBuf,
    pub exe: PathBuf,
    pub exe_sha256: String,
    pub fingerprint: String,
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

#[cfg(test)]
mod tests;
