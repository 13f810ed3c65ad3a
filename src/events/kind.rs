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
/// Code hook events (`crate::agent::CLAUDE_CODE_EVENTS`).
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
