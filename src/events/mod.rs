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
    kind::CAMPAIGN_ARCHIVED,
    kind::HOOKS_INSTALL,
    kind::EVALUATION_STARTED,
    kind::EVALUATION,
    kind::DECISION,
    kind::QUESTION_QUEUED,
    kind::QUESTION_DELIVERED,
    kind::QUESTION_EXPIRED,
    kind::QUESTION_ANSWERED,
    kind::QUESTION_REASKED,
    kind::QUESTION_ESCALATED,
    kind::VIOLATION,
    kind::STOP_UNGATED,
    kind::SESSION_FAILED_START,
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
    kind::MOMENT_WITHHELD,
    kind::GAIN_RECHECK,
    kind::GAIN_CONFIRMED,
    kind::GAIN_REJECTED,
    kind::EVALUATION_REMEASURED,
    kind::CAMPAIGN_CALIBRATED,
    kind::BEAM_FAMILY,
    kind::BEAM_ABANDONED,
    kind::REDTEAM_STARTED,
    kind::REDTEAM_ATTACK,
    kind::REDTEAM_REPORT,
    kind::AGENT_USAGE,
    kind::BUDGET_REACHED,
    kind::NOTIFY_DELIVERY,
    kind::NOTIFY_CONFIGURED,
    kind::CLAIM,
    kind::CLAIM_VERDICT,
    kind::BLOCK_STREAK,
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

/// A delivered question, as `question.delivered` tells it (and an expired
/// one, as `question.expired` does).
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

/// A `question.answered`.
#[derive(Debug, Clone, PartialEq)]
pub struct Answered {
    pub question_id: i64,
    /// A re-ask: the question it asked again.
    pub reask_of: Option<i64>,
    /// Stop attempts it stayed unanswered.
    pub turns: i64,
    pub by: AnsweredBy,
}

/// What answered a question. Never the agent's words alone.
#[derive(Debug, Clone, PartialEq)]
pub enum AnsweredBy {
    /// A new evaluation of a workspace tree other than the one the
    /// workspace had presented when the question was delivered (`baseline`;
    /// none: no evaluation before it).
    Evaluation { evaluation_id: i64, tree: String, baseline: Option<String> },
    /// Files the agent filed for the question (`gadfly answer`), with its
    /// words, if any.
    Artifact { files: Vec<ClaimFile>, why: Option<String> },
}

/// How a question is asked again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReaskForm {
    /// Another entry of the same bank group, for the same moment.
    AnotherEntry,
    /// The same text, prefixed as a repeat (a person's question, or a bank
    /// question whose group has no other entry that fits).
    Repeated,
}

impl ReaskForm {
    pub fn as_str(self) -> &'static str {
        match self {
            ReaskForm::AnotherEntry => "another_entry",
            ReaskForm::Repeated => "repeated",
        }
    }
}

/// A `question.reasked`.
#[derive(Debug, Clone, PartialEq)]
pub struct Reasked {
    /// The re-ask's own question (queued).
    pub question_id: i64,
    pub reask_of: i64,
    pub form: ReaskForm,
    pub bank_id: Option<String>,
    pub text: String,
    /// Turns the first form stayed unanswered.
    pub turns: i64,
}

/// A `question.escalated`: the first form, its re-asks, and the turns it
/// has stayed unanswered.
#[derive(Debug, Clone, PartialEq)]
pub struct Escalated {
    pub question: DeliveredQuestion,
    pub reasks: Vec<i64>,
    pub turns: i64,
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

/// A `moment.withheld`: the moment, and the objective before it (the last
/// correct workspace evaluation's geometric mean) and the last workspace
/// evaluation (the one the moment was about), as a question's would be read.
#[derive(Debug, Clone, PartialEq)]
pub struct Withheld {
    pub moment: String,
    pub detector: String,
    /// The campaign's `[questions] withhold` share it was drawn with.
    pub share: f64,
    pub evaluation_before: Option<i64>,
    pub objective_evaluation: Option<i64>,
    pub objective_before: Option<f64>,
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
    /// `campaign.archived`: the campaign archived (`archived`) or
    /// unarchived by a person; only the mark changes.
    CampaignArchived {
        archived: bool,
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
    /// `question.expired`: a question that waited and never reached the
    /// agent, with why (the stop was allowed: nobody is left to answer).
    QuestionExpired {
        question: DeliveredQuestion,
        reason: String,
    },
    /// `question.answered`: fresh evidence followed a delivered question
    /// (a changed tree evaluated, or files the agent filed for it).
    QuestionAnswered(Answered),
    /// `question.reasked`: a delivered question left unanswered for
    /// `[questions] answer_within_turns` turns, queued again in another
    /// form (`question_id` is the new row).
    QuestionReasked(Reasked),
    /// `question.escalated`: its re-ask went unanswered too; a person is
    /// told.
    QuestionEscalated(Escalated),
    Violation(Violation),
    StopUngated {
        why: String,
        claim: Option<String>,
        by: UngatedBy,
    },
    /// `session.failed_start`: an agent's session that ended before any
    /// prompt (Claude Code failing at start-up): no turn, so no stop to
    /// judge and nothing ungated. `error`: what its transcript or the hook
    /// call said went wrong, if anything.
    SessionFailedStart {
        why: String,
        error: Option<String>,
        event_id: i64,
    },
    RunStarted {
        run_id: i64,
        agent: String,
        daemon: String,
        /// Where the agent runs: `bwrap: ...` or `none: why`
        /// ([`crate::agent::AgentSpec::resolve_sandbox`]'s line).
        sandbox: String,
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
    /// `moment.withheld`: an autonomous moment left without its bank
    /// question (`[questions] withhold`), the control arm of the bank's
    /// learning: what followed it is measured as what follows a question.
    MomentWithheld(Withheld),
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
    /// `evaluation.remeasured`: a figure was within noise of its bar, so
    /// gadfly measured the tree again (`recheck_ids`, with `seeds`) and
    /// judged the pooled figures (`runs` evaluations); `decided`: whether
    /// the bar is now met or missed beyond noise.
    /// `campaign.calibrated`: the initial kernel against itself
    /// (`gadfly calibrate`): each scenario's bias and noise.
    Calibrated(crate::calibration::Calibration),
    EvaluationRemeasured {
        evaluation_id: i64,
        recheck_ids: Vec<i64>,
        seeds: Vec<u64>,
        runs: u32,
        holds: bool,
        decided: bool,
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
    /// `redteam.started`: the red-team battery began against the
    /// campaign's harness (`why`: api, run start).
    RedteamStarted {
        id: String,
        why: String,
        attacks: usize,
    },
    /// `redteam.attack`: one attack of the battery and what it came to.
    RedteamAttack {
        id: String,
        result: Box<crate::redteam::AttackResult>,
    },
    /// `redteam.report`: the battery's whole report (what `GET
    /// /campaigns/{id}/redteam` returns).
    RedteamReport(Box<crate::redteam::Report>),
    /// `agent.usage`: tokens (and money, when the agent reports it) an
    /// agent says it used.
    AgentUsage(Usage),
    /// `budget.reached`: a run's budget ran out; the run ends "stopped by
    /// budget" (never a success).
    BudgetReached(BudgetReached),
    /// `notify.delivery`: one attempt to deliver a notification to a webhook.
    NotifyDelivery(NotifyDelivery),
    /// `notify.configured`: a campaign's `[notify]` webhooks replaced from
    /// the API (the console); `notify` is the new section as JSON.
    NotifyConfigured {
        notify: Value,
    },
    /// `claim`: a claim the agent filed itself (`gadfly claim`), with its
    /// own words and evidence.
    Claim(Claim),
    /// `claim.verdict`: a person accepted or rejected a filed claim.
    ClaimVerdict(ClaimVerdict),
    /// `block.streak`: blocked stops in a row without a gain, and what the
    /// gate does about it at this length.
    BlockStreak {
        blocks: u32,
        best_geomean: Option<f64>,
        escalated: bool,
    },
}

/// What an agent may claim with `gadfly claim`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClaimKind {
    /// The agent believes the goal cannot be reached (a person may accept it).
    Limit,
    /// Something outside the agent's reach stops it.
    Blocked,
    /// A completion claim (the gate still judges it at the stop).
    Done,
}

impl ClaimKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ClaimKind::Limit => "limit",
            ClaimKind::Blocked => "blocked",
            ClaimKind::Done => "done",
        }
    }
}

/// At most this many evidence files a claim.
pub const MAX_EVIDENCE_FILES: usize = 8;
/// At most this many bytes an evidence file.
pub const MAX_EVIDENCE_BYTES: usize = 64 * 1024;

/// One evidence file of a claim, as uploaded (text).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ClaimFile {
    pub name: String,
    pub text: String,
}

/// A `claim`.
#[derive(Debug, Clone, PartialEq)]
pub struct Claim {
    pub claim: ClaimKind,
    pub why: String,
    pub evidence: Vec<ClaimFile>,
    /// The latest evaluation when it was filed.
    pub evaluation_id: Option<i64>,
    pub geomean_speedup: Option<f64>,
}

/// A `claim.verdict`: `claim_id` is the `claim` event's id.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimVerdict {
    pub claim_id: i64,
    pub accepted: bool,
    /// Who decided (the console's name for the person, or `operator`).
    pub by: String,
    /// Why (a rejection's reason, delivered to the agent).
    pub reason: Option<String>,
    /// The verdict of the latest evaluation at that moment.
    pub evaluation_id: Option<i64>,
    pub holds: Option<bool>,
    pub geomean_speedup: Option<f64>,
}

/// Where an `agent.usage` report was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UsageSource {
    /// A spawned Claude Code's stream: a `result` line, for its turn (and
    /// the session's running cost, `total_cost_usd`).
    ClaudeCodeTurn,
    /// A spawned Claude Code's turn cut short by a budget: what its
    /// messages' `usage` said so far (the stream gives a message's input
    /// but not yet its final output tokens).
    ClaudeCodePartialTurn,
    /// A Claude Code transcript: one assistant message's `usage`, or a
    /// `cost-state` line's running cost of the session.
    ClaudeCodeTranscript,
    /// Codex's `turn.completed`: one turn's tokens (Codex reports no cost).
    Codex,
    /// A command agent's `{"gadfly_usage": {...}}` line.
    Command,
}

impl UsageSource {
    pub fn as_str(self) -> &'static str {
        match self {
            UsageSource::ClaudeCodeTurn => "claude-code",
            UsageSource::ClaudeCodePartialTurn => "claude-code-partial-turn",
            UsageSource::ClaudeCodeTranscript => "claude-code-transcript",
            UsageSource::Codex => "codex",
            UsageSource::Command => "command",
        }
    }
}

/// What an agent reported it used. gadfly prices nothing itself: money is
/// only ever the agent's own figure.
#[derive(Debug, Clone, PartialEq)]
pub struct Usage {
    pub source: UsageSource,
    /// The spawned run it belongs to (none for an attached session).
    pub run_id: Option<i64>,
    /// The API message the figures are of, when they are one message's:
    /// a message reported more than once counts once, at its largest.
    pub message_id: Option<String>,
    /// The tokens are the session's running totals so far, not this
    /// report's own (Codex counts a thread's tokens across its turns): the
    /// largest counts.
    pub cumulative: bool,
    /// Every input token, those read from a cache included.
    pub input_tokens: u64,
    /// Of `input_tokens`, those read from a cache.
    pub cached_input_tokens: u64,
    pub output_tokens: u64,
    /// The money this report adds, in USD.
    pub cost_usd: Option<f64>,
    /// The session's running total in USD as the agent counts it (Claude
    /// Code's `total_cost_usd`, a transcript's `cost-state`).
    pub session_cost_usd: Option<f64>,
    /// The agent's own usage object, as it wrote it.
    pub reported: Value,
}

/// A `budget.reached`: which budget, its limit, and the run's figures then.
#[derive(Debug, Clone, PartialEq)]
pub struct BudgetReached {
    pub run_id: i64,
    /// `max_tokens`, `max_cost_usd`, `max_turns`, `max_wall_s` or
    /// `max_blocks_without_gain`.
    pub budget: String,
    pub limit: f64,
    /// The run's figures when it ran out.
    pub tokens: u64,
    pub cost_usd: Option<f64>,
    pub turns: u32,
    pub detail: String,
}

/// How one delivery attempt went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeliveryStatus {
    /// The webhook answered 2xx.
    Delivered,
    /// It failed; another attempt follows.
    Retrying,
    /// It failed and no attempt follows (the last one, or a failure that
    /// another attempt cannot mend: a 4xx, a missing secret).
    Failed,
}

impl DeliveryStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryStatus::Delivered => "delivered",
            DeliveryStatus::Retrying => "retrying",
            DeliveryStatus::Failed => "failed",
        }
    }
}

/// A `notify.delivery`: one attempt of one notification to one webhook.
#[derive(Debug, Clone, PartialEq)]
pub struct NotifyDelivery {
    /// The notification's id (the `X-Gadfly-Delivery` header): the same
    /// for every attempt.
    pub delivery: String,
    /// The webhook's index in `[notify] webhooks`, and its URL with the
    /// path and query hidden.
    pub webhook: usize,
    pub url: String,
    /// The notification kind (`plateau`, `run_ended`, ...) and the event
    /// it tells of.
    pub notify: String,
    pub event_id: i64,
    pub attempt: u32,
    pub status: DeliveryStatus,
    pub http_status: Option<u16>,
    pub error: Option<String>,
}

#[cfg(test)]
mod tests;
