//! Agent adapters: how gadfly attaches to an agent a person runs
//! ([`attach`], and the workspace's git exclude lines for what it writes,
//! [`exclude`]), and how it reads what agents write: a spawned agent's
//! output lines ([`claude`]: Claude Code's stream-json; [`codex`]:
//! `codex exec --json`), an attached session's transcript
//! ([`transcript`]) and Claude Code's own transcripts ([`escapes`]). With
//! a spawned agent's sandbox ([`jail`]), its budgets ([`budget`]) and
//! the usage agents report ([`usage`]); recorded sessions as replay
//! timelines ([`timeline`]).
//!
//! Adapters only: the parsers return events and the application
//! (`app/run_loop.rs`, `app/transcript.rs`, `app/escapes.rs`) records and
//! judges them. Nothing here names the application, the store or the API
//! (tests/layers.rs checks).

pub mod attach;
pub mod budget;
pub mod claude;
pub mod codex;
pub mod escapes;
pub mod exclude;
pub mod jail;
pub mod timeline;
pub mod transcript;
pub mod usage;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::campaign::CampaignSpec;
use crate::events::Event;

/// An event read from an agent's output, with its idempotency key (none:
/// every copy is recorded).
pub type Keyed = (Option<String>, Event);

/// `s`, cut to `n` characters (an ellipsis marks the cut).
pub fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(n).collect();
        t.push('…');
        t
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum AgentKind {
    ClaudeCode,
    Codex,
    Command,
}

impl AgentKind {
    pub fn as_str(self) -> &'static str {
        match self {
            AgentKind::ClaudeCode => "claude-code",
            AgentKind::Codex => "codex",
            AgentKind::Command => "command",
        }
    }

    pub fn parse(s: &str) -> Option<AgentKind> {
        match s {
            "claude-code" | "claude_code" | "claude" => Some(AgentKind::ClaudeCode),
            "codex" => Some(AgentKind::Codex),
            "command" => Some(AgentKind::Command),
            _ => None,
        }
    }
}

/// The Claude Code hook events gadfly takes (`gadfly hook claude-code
/// EVENT`), as the hook command line spells them.
pub const CLAUDE_CODE_EVENTS: &[&str] = &[
    "stop",
    "subagent-stop",
    "post-tool-use",
    "pre-tool-use",
    "user-prompt-submit",
    "session-start",
    "session-end",
    "notification",
    "pre-compact",
    "stop-failure",
];

/// The `[agent]` section of a campaign spec.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentSpec {
    #[serde(default)]
    pub kind: Option<String>,
    /// The first message to the agent (default: built from the goal).
    #[serde(default)]
    pub prompt: Option<String>,
    /// The agent's executable (default: `claude` / `codex` on PATH, or
    /// $GADFLY_CLAUDE_BIN / $GADFLY_CODEX_BIN).
    #[serde(default)]
    pub bin: Option<String>,
    /// Extra arguments for the agent's command line.
    #[serde(default)]
    pub args: Vec<String>,
    /// Extra environment for the agent's process.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Command adapter: start and resume templates with {prompt}, {message}, {session}.
    #[serde(default)]
    pub start: Option<String>,
    #[serde(default)]
    pub resume: Option<String>,
    /// Codex: the CODEX_HOME folder to use (it holds config.toml).
    #[serde(default)]
    pub codex_home: Option<String>,
    /// Budgets: wall time of the run, turns, and consecutive turn ends
    /// judged failing without any gain of the objective.
    #[serde(default)]
    pub max_wall_s: Option<u64>,
    #[serde(default)]
    pub max_turns: Option<u32>,
    #[serde(default = "default_blocks")]
    pub max_blocks_without_gain: u32,
    /// Spend budgets: the run's tokens (every input token, cached ones
    /// included, plus every output token) and money in USD, as the agent
    /// reports them (see [`usage`]; gadfly prices nothing).
    #[serde(default)]
    pub max_tokens: Option<u64>,
    #[serde(default)]
    pub max_cost_usd: Option<f64>,
    /// How many times a crashed agent is resumed before the run fails.
    #[serde(default = "default_restarts")]
    pub max_restarts: u32,
    /// Where a spawned agent runs: `auto` (the default: in the bubblewrap
    /// sandbox wherever it works, see [`AgentSpec::resolve_sandbox`]),
    /// `bwrap` (the sandbox, or the run does not start) or `none` (as the
    /// daemon's user, with nothing hidden: the agent can then reach the
    /// daemon's files and processes). The sandbox hides the daemon's data
    /// dir and processes; see [`jail`].
    #[serde(default)]
    pub sandbox: Option<String>,
    /// Folders a sandboxed agent may write besides its workspace, its home
    /// and /tmp.
    #[serde(default)]
    pub writable: Vec<String>,
}

fn default_blocks() -> u32 {
    8
}
fn default_restarts() -> u32 {
    5
}

/// What every agent gadfly supervises is told of the sanctioned exit (spawn
/// mode's first prompt; attach mode's SessionStart context).
pub const CLAIM_NOTE: &str = "If you come to believe the goal cannot be reached (a hardware or algorithmic limit), do not stop and do not work around the checks: claim it with your evidence, `\"$GADFLY_BIN\" claim limit --why \"what the limit is and how you measured it\" --evidence FILE` (`gadfly claim` in a shell of your own, with GADFLY_URL, GADFLY_TOKEN and GADFLY_CAMPAIGN set as gadfly sets them). gadfly asks you a question about the claim and a person accepts it (then you may stop), rejects it with a reason, or leaves it. `gadfly claim blocked --why ...` reports a blocker outside your reach; `gadfly claim done --why ...` is a completion claim (still judged when you stop). Editing what judges your work (the harness, the protected files, gadfly's hooks) is recorded and never makes the predicate hold.";

impl AgentSpec {
    pub fn from_campaign(spec: &CampaignSpec) -> anyhow::Result<AgentSpec> {
        match spec.extra.get("agent") {
            None => Ok(AgentSpec {
                max_blocks_without_gain: default_blocks(),
                max_restarts: default_restarts(),
                ..Default::default()
            }),
            Some(v) => {
                let a: AgentSpec =
                    serde_json::from_value(v.clone()).map_err(|e| anyhow::anyhow!("campaign spec [agent]: {e}"))?;
                if let Some(s) = a.sandbox.as_deref().filter(|s| !matches!(*s, "none" | "bwrap" | "auto")) {
                    anyhow::bail!("campaign spec [agent] sandbox: unknown sandbox `{s}`; expected auto, bwrap or none");
                }
                Ok(a)
            }
        }
    }

    /// True when the agent is to run in the bubblewrap sandbox (once
    /// [`Self::resolve_sandbox`] has settled `auto`).
    pub fn sandboxed(&self) -> bool {
        self.sandbox.as_deref() == Some("bwrap")
    }

    /// Settles where a run's agent goes, at the run's start: `bwrap` or
    /// `none` from here on, and a line that says which and why (recorded
    /// with the run's start, so that an unsandboxed run is visible).
    ///
    /// Issue 29: spawn mode keeps the agent away from the daemon that
    /// judges it by default. `auto` (or nothing said) takes the sandbox
    /// wherever it works: bubblewrap runs here (`bwrap_works`) and the
    /// workspace lies outside the data dir (the sandbox hides the one from
    /// the other). Where it cannot, the run still starts, unsandboxed, and
    /// the line says why. `bwrap` said outright refuses to start without it.
    pub fn resolve_sandbox(
        &mut self,
        workspace: &std::path::Path,
        data_dir: &std::path::Path,
        bwrap_works: bool,
    ) -> anyhow::Result<String> {
        let overlap = jail::overlaps(workspace, data_dir);
        let said = self.sandbox.clone().unwrap_or_else(|| "auto".to_string());
        let (sandbox, why) = match said.as_str() {
            "none" => ("none", "none: the campaign says [agent] sandbox = \"none\" (the agent can reach the daemon's files and processes)".to_string()),
            "bwrap" if !bwrap_works => anyhow::bail!(
                "the campaign asks for `[agent] sandbox = \"bwrap\"` but bubblewrap (bwrap) does not work on this host; install it (Debian: apt install bubblewrap) or allow unprivileged user namespaces, or say sandbox = \"auto\" to run unsandboxed where it cannot"
            ),
            "bwrap" if overlap => anyhow::bail!(
                "the workspace {} and the daemon's data dir {} overlap: the sandbox cannot hide one from the other; move one of them",
                workspace.display(),
                data_dir.display()
            ),
            _ if !bwrap_works => ("none", "none: bubblewrap (bwrap) does not work on this host, so the agent runs unsandboxed and can reach the daemon's files and processes (install bubblewrap; [agent] sandbox = \"bwrap\" makes it required)".to_string()),
            _ if overlap => ("none", format!(
                "none: the workspace {} and the daemon's data dir {} overlap, so the sandbox cannot hide one from the other and the agent runs unsandboxed",
                workspace.display(),
                data_dir.display()
            )),
            _ => ("bwrap", "bwrap: the data dir, the tokens and the daemon's processes are hidden from the agent".to_string()),
        };
        self.sandbox = Some(sandbox.to_string());
        Ok(why)
    }

    /// The first message: the campaign's goal and the rule of the game,
    /// then the sanctioned exit ([`CLAIM_NOTE`]), a custom prompt included.
    pub fn first_prompt(&self, spec: &CampaignSpec) -> String {
        if let Some(p) = &self.prompt {
            return format!("{p}\n\n{CLAIM_NOTE}");
        }
        let rules = format!(
            "{goal}\n\nThis is an optimization campaign supervised by gadfly. The harness runs `{run}` on a snapshot of your work and checks {n} scenarios: {list}. You may stop only when every scenario is correct and at least {min:.2}x faster than the initial kernel{geo}{compare}. Do not edit the protected files ({protected}). To measure your work at any time, run `\"$GADFLY_BIN\" eval` (gadfly records the evaluation). When you try to stop, gadfly evaluates your work and tells you what still fails.",
            goal = if spec.goal.is_empty() { "Make the kernel faster." } else { spec.goal.as_str() },
            run = spec.harness.run,
            n = spec.harness.scenarios.len(),
            list = spec.harness.scenarios.join(", "),
            min = spec.predicate.min_speedup,
            geo = spec
                .predicate
                .min_geomean_speedup
                .map(|g| format!(", with a geometric-mean speedup of at least {g:.2}x"))
                .unwrap_or_default(),
            compare = match (spec.predicate.min_compare_speedup, spec.predicate.min_compare_geomean) {
                (None, None) => String::new(),
                (each, mean) => format!(
                    ", and held against the comparison implementation{} the harness times: {}{}",
                    spec.comparison.as_deref().map(|c| format!(" ({c})")).unwrap_or_default(),
                    each.map(|c| format!("at least {c:.2}x its speed on every scenario")).unwrap_or_default(),
                    mean.map(|g| format!("{}a geometric mean of at least {g:.2}x of it", if each.is_some() { ", and " } else { "" }))
                        .unwrap_or_default()
                ),
            },
            protected = if spec.harness.protected.is_empty() { "none".into() } else { spec.harness.protected.join(", ") },
        );
        format!("{rules}\n\n{CLAIM_NOTE}")
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use crate::events::{hook_kind, ALL_KINDS};

    /// Every hook event gadfly listens to has a kind constant of its own in
    /// the event vocabulary, named after the event.
    #[test]
    fn every_claude_code_hook_event_has_a_kind_constant() {
        for event in super::CLAUDE_CODE_EVENTS {
            let k = hook_kind(event);
            assert!(matches!(k, Cow::Borrowed(_)), "{event} has no kind constant");
            assert_eq!(k, format!("hook.{}", event.replace('-', "_")));
            assert!(ALL_KINDS.contains(&&*k));
        }
    }

    fn spec(sandbox: Option<&str>) -> super::AgentSpec {
        super::AgentSpec { sandbox: sandbox.map(str::to_string), ..Default::default() }
    }

    /// Issue 29: spawn mode sandboxes the agent unless told not to, says so
    /// when it cannot, and refuses to start when the sandbox was required.
    #[test]
    fn the_sandbox_is_the_default_and_an_unsandboxed_run_says_why() {
        use std::path::Path;
        let (ws, data) = (Path::new("/srv/ws"), Path::new("/var/lib/gadfly"));
        for said in [None, Some("auto"), Some("bwrap")] {
            let mut a = spec(said);
            let why = a.resolve_sandbox(ws, data, true).unwrap();
            assert!(a.sandboxed(), "{said:?}: {why}");
            assert!(why.starts_with("bwrap:"), "{why}");
        }
        // Where bubblewrap does not work: auto runs unsandboxed and says so,
        // bwrap does not start.
        let mut a = spec(None);
        let why = a.resolve_sandbox(ws, data, false).unwrap();
        assert!(!a.sandboxed() && why.starts_with("none:") && why.contains("bubblewrap"), "{why}");
        let err = spec(Some("bwrap")).resolve_sandbox(ws, data, false).unwrap_err().to_string();
        assert!(err.contains("apt install bubblewrap"), "{err}");
        // A workspace inside the data dir cannot be hidden from it.
        let inside = Path::new("/var/lib/gadfly/ws");
        let mut a = spec(Some("auto"));
        let why = a.resolve_sandbox(inside, data, true).unwrap();
        assert!(!a.sandboxed() && why.contains("overlap"), "{why}");
        assert!(spec(Some("bwrap")).resolve_sandbox(inside, data, true).unwrap_err().to_string().contains("overlap"));
        // none is none, and says what it leaves open.
        let mut a = spec(Some("none"));
        let why = a.resolve_sandbox(ws, data, true).unwrap();
        assert!(!a.sandboxed() && why.contains("can reach the daemon"), "{why}");
    }

    #[test]
    fn an_unknown_sandbox_is_refused_naming_the_field() {
        let text = "name = \"t\"\nworkspace = \"nowhere\"\n[harness]\nrun = \"true {results}\"\nscenarios = [\"a\"]\n[agent]\nsandbox = \"docker\"\n";
        let spec = crate::campaign::parse_detached(text, "c.toml", std::path::Path::new("/")).unwrap();
        let err = super::AgentSpec::from_campaign(&spec).unwrap_err().to_string();
        assert!(
            err.contains("[agent] sandbox") && err.contains("docker") && err.contains("auto, bwrap or none"),
            "{err}"
        );
    }
}
