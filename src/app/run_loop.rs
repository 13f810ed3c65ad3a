//! The loops of a spawned agent (`gadfly run`; its start, take-over and
//! end are `runs.rs`). Every line the agent prints goes into the event log
//! (read by `agent::claude` / `agent::codex`); every end of a turn is a
//! completion claim judged by the same gate as a Stop hook
//! ([`Supervisor::judge_turn_end`]); while the predicate fails the agent is
//! sent back with the failing scenarios and a question; a crashed agent is
//! resumed with backoff; budgets end a run as "stopped by budget", never as
//! success.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::agent::budget::{Budget, Reached};
use crate::agent::claude::{claude_line, replayed_text, user_line};
use crate::agent::codex::{codex_line, TurnSeen};
use crate::agent::usage;
use crate::agent::{truncate, AgentKind, AgentSpec, Keyed};
use crate::campaign::CampaignSpec;
use crate::events::{self, Event, Usage, Via};

use super::{question_message, Supervisor};

/// How a run ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The predicate held and the agent's stop was allowed.
    Completed,
    /// A person accepted the agent's limit claim and its stop was let
    /// through (who accepted it): never a success.
    LimitAccepted(String),
    /// A budget ran out first (which one, with figures).
    StoppedByBudget(String),
    /// Someone stopped the run.
    Stopped,
    /// The agent could not be kept running.
    Failed(String),
}

impl Outcome {
    pub fn describe(&self) -> (&'static str, String) {
        match self {
            Outcome::Completed => {
                ("completed", "the predicate holds on every scenario and the stop was allowed".into())
            }
            Outcome::LimitAccepted(by) => ("limit_accepted", format!("stopped: limit accepted by {by}")),
            Outcome::StoppedByBudget(why) => ("stopped_by_budget", format!("stopped by budget: {why}")),
            Outcome::Stopped => ("stopped", "stopped on request".into()),
            Outcome::Failed(why) => ("failed", format!("failed: {why}")),
        }
    }
}

/// One run, as its loops see it.
pub(super) struct RunCtx {
    pub(super) sup: Supervisor,
    pub(super) campaign: String,
    pub(super) spec: CampaignSpec,
    pub(super) agent: AgentSpec,
    pub(super) run_id: i64,
    pub(super) token: CancellationToken,
    /// The session to resume (a run taken over from a daemon that stopped).
    pub(super) resume_session: Option<String>,
}

impl RunCtx {
    fn env(&self, kind: AgentKind) -> Vec<(String, String)> {
        let (url, token) = self.sup.endpoint();
        // `"$GADFLY_BIN" eval` measures the agent's work now (the first
        // prompt says so); GADFLY_CAMPAIGN names the campaign to it.
        let mut env = vec![
            ("GADFLY_URL".to_string(), url),
            // The campaign's hook token, never the master token: the agent
            // can post its hook events and ask for evaluations, nothing more.
            ("GADFLY_TOKEN".to_string(), crate::token::hook_token(&token, &self.campaign)),
            ("GADFLY_CAMPAIGN".to_string(), self.campaign.clone()),
            // Hook calls made while the daemon is down wait here; the
            // daemon replays them when it starts again.
            ("GADFLY_SPOOL_DIR".to_string(), self.sup.data_dir().join("spool").display().to_string()),
        ];
        if let Ok(exe) = std::env::current_exe() {
            env.push(("GADFLY_BIN".to_string(), exe.display().to_string()));
        }
        // `[agent] codex_home` (relative to the workspace); `[agent] env`
        // still has the last word.
        if let (AgentKind::Codex, Some(home)) = (kind, &self.agent.codex_home) {
            env.push(("CODEX_HOME".to_string(), self.spec.workspace.join(home).display().to_string()));
        }
        env.extend(self.agent.env.iter().map(|(k, v)| (k.clone(), v.clone())));
        env
    }

    /// Questions waiting when a turn starts (the campaign's start question,
    /// anything queued before the run): put into that turn's message, for
    /// agents that have no hook or stdin to carry them.
    async fn take_waiting_questions(&self, session: Option<&str>) -> Vec<String> {
        let waiting = self.sup.store().list_questions(&self.campaign, true).await.unwrap_or_default();
        let mut out = Vec::new();
        for q in waiting {
            if self.sup.store().mark_delivered(q.id, Via::AgentPrompt.as_str(), None).await.unwrap_or(false) {
                if let Err(e) = self.sup.record_delivered(&self.campaign, session, &q, Via::AgentPrompt).await {
                    tracing::warn!(error = %e, "recording an agent event");
                }
                out.push(question_message(&q));
            }
        }
        out
    }

    async fn record(&self, session: Option<&str>, key: Option<String>, event: Event) {
        if let Err(e) = self.sup.record_event(&self.campaign, session, key.as_deref(), event).await {
            tracing::warn!(error = %e, "recording an agent event");
        }
    }

    /// Records the events read from one output line of the agent.
    async fn record_all(&self, session: Option<&str>, events: Vec<Keyed>) {
        for (key, event) in events {
            self.record(session, key, event).await;
        }
    }

    /// Judges an end of turn as a completion claim, through the Stop gate.
    /// Returns the block reason, or None when the stop is allowed.
    async fn judge(
        &self,
        agent: &str,
        session: &str,
        claim: &str,
        after_block: bool,
    ) -> anyhow::Result<Option<String>> {
        self.sup
            .judge_turn_end(&self.campaign, self.run_id, agent, session, claim, after_block)
            .await
            .map_err(|e| anyhow!("{e}"))
    }

    /// Records a usage report of the run and counts it against its
    /// budgets; returns the spend budget it exhausts, if any.
    async fn record_usage(&self, budget: &mut Budget, session: Option<&str>, mut u: Usage) -> Option<Reached> {
        u.run_id = Some(self.run_id);
        let event = Event::AgentUsage(u);
        let body = event.body();
        self.record(session, None, event).await;
        budget.add_usage(session, &body)
    }

    /// Counts what the run used before (a run taken over from a daemon
    /// that stopped keeps its spend).
    async fn preload_spend(&self, budget: &mut Budget) {
        match self.sup.store().recent_events(&self.campaign, events::kind::AGENT_USAGE, 1_000_000).await {
            Ok(rows) => {
                for e in rows.iter().rev().filter(|e| e.payload["run_id"].as_i64() == Some(self.run_id)) {
                    budget.add_usage(e.session_id.as_deref(), &e.payload);
                }
            }
            Err(e) => tracing::warn!(error = %e, "reading the run's spend so far"),
        }
    }

    /// The run ends "stopped by budget": `budget.reached` says which budget
    /// and the figures.
    async fn budget_stop(&self, budget: &Budget, session: Option<&str>, r: Reached) -> Outcome {
        self.record(session, None, budget.reached_event(self.run_id, &r)).await;
        Outcome::StoppedByBudget(r.text)
    }

    /// How a run whose stop was allowed ended: completed, or stopped on a
    /// limit a person accepted (the gate lets that stop through too).
    async fn allowed_outcome(&self) -> Outcome {
        match self.sup.accepted_limit(&self.campaign).await {
            Ok(Some(a)) => Outcome::LimitAccepted(a.by),
            _ => Outcome::Completed,
        }
    }

    async fn latest_geomean(&self) -> Option<f64> {
        self.sup.evaluate(&self.campaign, false).await.ok().and_then(|e| e.verdict.geomean_speedup)
    }
}

fn binary(configured: &Option<String>, env_var: &str, default: &str) -> String {
    configured
        .clone()
        .or_else(|| std::env::var(env_var).ok().filter(|v| !v.is_empty()))
        .unwrap_or_else(|| default.to_string())
}

fn spawn(program: &str, args: &[String], ctx: &RunCtx, kind: AgentKind, stdin: bool) -> anyhow::Result<Child> {
    let env = ctx.env(kind);
    let (program, args) = if ctx.agent.sandboxed() {
        jail_for(ctx, &env)?.wrap(program, args)
    } else {
        (program.to_string(), args.to_vec())
    };
    let mut cmd = Command::new(&program);
    cmd.args(&args)
        .current_dir(&ctx.spec.workspace)
        .stdin(if stdin { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.spawn().with_context(|| format!("starting {program}"))
}

/// The sandbox of `[agent] sandbox = "bwrap"`: the data dir hidden but for
/// this campaign's run folder (read-only) and the spool, the agent's own
/// PID namespace (see [`crate::agent::jail`]).
fn jail_for(ctx: &RunCtx, env: &[(String, String)]) -> anyhow::Result<crate::agent::jail::Jail> {
    if !crate::harness::bwrap_works() {
        anyhow::bail!(
            "the campaign asks for `[agent] sandbox = \"bwrap\"` but bubblewrap (bwrap) does not work on this host"
        );
    }
    let data = ctx.sup.data_dir().to_path_buf();
    if crate::agent::jail::overlaps(&ctx.spec.workspace, &data) {
        anyhow::bail!(
            "the workspace {} and the daemon's data dir {} overlap: the sandbox cannot hide one from the other",
            ctx.spec.workspace.display(),
            data.display()
        );
    }
    let spool = data.join("spool");
    std::fs::create_dir_all(&spool).with_context(|| format!("creating {}", spool.display()))?;
    let var = |name: &str| env.iter().rev().find(|(k, _)| k == name).map(|(_, v)| PathBuf::from(v));
    let mut writable: Vec<PathBuf> = ctx.agent.writable.iter().map(|w| ctx.spec.workspace.join(w)).collect();
    writable.extend(var("HOME").or_else(|| std::env::var_os("HOME").map(PathBuf::from)));
    writable.extend(var("CLAUDE_CONFIG_DIR"));
    writable.extend(var("CODEX_HOME"));
    Ok(crate::agent::jail::Jail {
        workspace: ctx.spec.workspace.clone(),
        data_dir: data.clone(),
        readable: vec![run_dir(&data, &ctx.campaign)],
        writable_in_data: vec![spool],
        writable,
    })
}

/// Ends the agent's whole process group: `first` (SIGTERM or SIGINT), then SIGKILL.
async fn end_group(child: &mut Child, first: Signal) {
    if let Some(pid) = child.id() {
        let pg = Pid::from_raw(pid as i32);
        let _ = killpg(pg, first);
        if tokio::time::timeout(Duration::from_secs(3), child.wait()).await.is_err() {
            let _ = killpg(pg, Signal::SIGKILL);
        }
        let _ = child.wait().await;
        let _ = killpg(pg, Signal::SIGKILL);
    }
}

fn backoff(restarts: u32) -> Duration {
    Duration::from_millis((500u64 << restarts.min(6)).min(30_000))
}

/// The message that resumes a session whose process died mid-turn.
const RESTART_NOTE: &str = "Your previous process stopped unexpectedly; continue the campaign where you left off.";

/// Sleeps until `deadline`, or forever without one.
async fn until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

/// Messages written to an agent's stdin that it has not taken in yet (no
/// `--replay-user-messages` echo seen), in order.
type Unacked = std::sync::Arc<std::sync::Mutex<Vec<String>>>;

/// Claude Code in stream-json mode: one long-lived process per session;
/// the Stop hook (from a generated --settings file) gates each stop; after
/// each `result` the run checks the last decision and, while the predicate
/// fails, writes the reasons as the next user message.
pub(super) async fn claude_loop(ctx: &RunCtx) -> anyhow::Result<Outcome> {
    let exe = std::env::current_exe()?.display().to_string();
    let settings_dir = run_dir(ctx.sup.data_dir(), &ctx.campaign);
    std::fs::create_dir_all(&settings_dir)?;
    let settings = settings_dir.join("claude-settings.json");
    std::fs::write(
        &settings,
        serde_json::to_string_pretty(&crate::agent::attach::hooks_settings_pinned(
            &exe,
            &ctx.campaign,
            ctx.spec.gate,
            ctx.spec.hooks.http.then(|| crate::agent::attach::HttpHooks { url: ctx.sup.endpoint().0 }).as_ref(),
            // The hooks take only answers this daemon signed (THREATS row 5).
            crate::signing::read_public(ctx.sup.data_dir()).as_deref(),
        ))?,
    )?;
    // Kept, to catch an agent that edits its own hook settings or binary.
    let installed = crate::agent::attach::Installed::new(
        "spawn",
        &settings,
        &ctx.spec.workspace,
        std::path::Path::new(&exe),
        &ctx.campaign,
    )?;
    ctx.sup.record_hook_install(&ctx.campaign, Some(&installed), None).await.map_err(|e| anyhow!("{e}"))?;
    let program = binary(&ctx.agent.bin, "GADFLY_CLAUDE_BIN", "claude");
    let first_prompt = ctx.agent.first_prompt(&ctx.spec);
    let mut budget = Budget::new(&ctx.agent);
    ctx.preload_spend(&mut budget).await;
    let deadline = budget.deadline();
    let mut session: Option<String> = ctx.resume_session.clone();
    let mut restarts = 0u32;
    // Whether a process took in the first prompt (its echo was seen): until
    // then a restart sends it again instead of the restart note. A session
    // taken over from another daemon had it.
    let mut prompted = session.is_some();
    // Messages a crashed process never took in (a question written to its
    // stdin while a tool ran, a block reason): written to the next one.
    let mut carry: Vec<String> = Vec::new();
    loop {
        let mut args: Vec<String> =
            ["-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose", "--settings"]
                .iter()
                .map(|s| s.to_string())
                .collect();
        args.push(settings.display().to_string());
        if !ctx.agent.args.iter().any(|a| a.starts_with("--permission-mode") || a == "--dangerously-skip-permissions") {
            args.push("--dangerously-skip-permissions".into());
        }
        // The CLI echoes each stdin message when it takes it in (at once
        // when idle, with the next tool result mid-turn): what was written
        // but never echoed is lost with a crashed process.
        if !ctx.agent.args.iter().any(|a| a == "--replay-user-messages") {
            args.push("--replay-user-messages".into());
        }
        args.extend(ctx.agent.args.iter().cloned());
        if let Some(s) = &session {
            args.push("--resume".into());
            args.push(s.clone());
        }
        let mut child = spawn(&program, &args, ctx, AgentKind::ClaudeCode, true)?;
        let mut stdin = child.stdin.take().context("agent stdin")?;
        let (tx, mut rx) = mpsc::channel::<Option<String>>(64);
        let writer = tokio::spawn(async move {
            while let Some(msg) = rx.recv().await {
                match msg {
                    Some(line) => {
                        if stdin.write_all(format!("{line}\n").as_bytes()).await.is_err()
                            || stdin.flush().await.is_err()
                        {
                            break;
                        }
                    }
                    None => break, // close stdin: the CLI exits after the current turn
                }
            }
        });
        let opening = if prompted && session.is_some() { RESTART_NOTE.to_string() } else { first_prompt.clone() };
        let unacked: Unacked = Default::default();
        for message in std::iter::once(opening).chain(carry.drain(..)) {
            unacked.lock().unwrap().push(message.clone());
            let _ = tx.send(Some(user_line(&message))).await;
        }
        let forwarder = spawn_question_forwarder(ctx, tx.clone(), unacked.clone());
        let stderr = child.stderr.take().map(drain_tail);
        let mut lines = BufReader::new(child.stdout.take().context("agent stdout")?).lines();
        let mut completed = false;
        let mut last_blocked = false;
        // Stopped on request or out of wall time: end the process at once.
        let mut end_now: Option<Outcome> = None;
        loop {
            let line = tokio::select! {
                _ = ctx.token.cancelled() => { end_now = Some(Outcome::Stopped); break; }
                _ = until(deadline) => {
                    end_now = Some(ctx.budget_stop(&budget, session.as_deref(), budget.wall_reason()).await);
                    break;
                }
                l = lines.next_line() => l,
            };
            let Ok(Some(line)) = line else { break };
            let known = session.clone();
            let (events, parsed) = claude_line(&line, &mut session);
            ctx.record_all(session.as_deref(), events).await;
            let Some(ev) = parsed else { continue };
            // The token budget holds mid-turn too: a turn may last hours.
            if let Some((id, u)) = usage::claude_message(&ev) {
                if let Some(r) = budget.add_in_turn(id, u) {
                    if let Some(partial) = budget.take_in_turn() {
                        ctx.record_usage(&mut budget, session.as_deref(), partial).await;
                    }
                    end_now = Some(ctx.budget_stop(&budget, session.as_deref(), r).await);
                    break;
                }
            }
            if session != known {
                // Kept at once: a daemon that takes this run over resumes it.
                let _ = ctx.sup.store().update_run(ctx.run_id, session.as_deref(), budget.turns as i64).await;
            }
            if let Some(text) = replayed_text(&ev) {
                let mut pending = unacked.lock().unwrap();
                if let Some(i) = pending.iter().position(|m| *m == text) {
                    pending.remove(i);
                }
                prompted |= text == first_prompt;
                continue;
            }
            if ev["type"] != "result" {
                continue;
            }
            let sid = session.clone().unwrap_or_default();
            if let Some(s) = &session {
                let _ = ctx.sup.store().update_run(ctx.run_id, Some(s), budget.turns as i64 + 1).await;
            }
            // The turn's tokens and the session's cost, as the CLI counts
            // them: checked below when the turn is blocked (an allowed stop
            // completes the run whatever it cost).
            if let Some(u) = usage::claude_turn(&ev) {
                ctx.record_usage(&mut budget, session.as_deref(), u).await;
            }
            // Did the Stop hook allow this stop? If not (a block cap, an API
            // error, a hook that did not fire), judge the turn end here.
            let last = ctx
                .sup
                .store()
                .list_stop_attempts(&ctx.campaign)
                .await?
                .into_iter()
                .rev()
                .find(|s| s.session_id.as_deref() == Some(sid.as_str()));
            let allowed_by_hook = last
                .as_ref()
                .is_some_and(|s| s.decision == "allow" || s.decision == "record" || s.decision == "limit_accepted");
            let claim = ev["result"].as_str().unwrap_or("").to_string();
            if !allowed_by_hook {
                // The turn ended with no allowed stop from the gate (the hook
                // did not fire, was killed, or the CLI ended the turn despite
                // a block): an ungated stop, judged and resumed here.
                let why = match &last {
                    Some(s) if s.decision == "block" => "the turn ended although its last stop was blocked",
                    _ => "the turn ended with no Stop hook decision",
                };
                let ungated = Event::StopUngated {
                    why: why.to_string(),
                    claim: Some(truncate(&claim, 2000)),
                    by: events::UngatedBy::Run,
                };
                ctx.record(session.as_deref(), None, ungated).await;
            }
            let reason =
                if allowed_by_hook { None } else { ctx.judge("claude-code", &sid, &claim, last_blocked).await? };
            match reason {
                None => {
                    completed = true;
                    let _ = tx.send(None).await;
                }
                Some(reason) => {
                    last_blocked = true;
                    if let Some(why) = budget.after_blocked_turn(ctx.latest_geomean().await) {
                        // Ended at once: a message already written to its
                        // stdin (a question) would start another turn, and
                        // spend past the budget.
                        end_now = Some(ctx.budget_stop(&budget, session.as_deref(), why).await);
                        break;
                    } else {
                        unacked.lock().unwrap().push(reason.clone());
                        let _ = tx.send(Some(user_line(&reason))).await;
                    }
                }
            }
        }
        forwarder.abort();
        drop(tx);
        if let Some(o) = end_now {
            end_group(&mut child, Signal::SIGTERM).await;
            writer.abort();
            return Ok(o);
        }
        let status = tokio::time::timeout(Duration::from_secs(30), child.wait()).await;
        if status.is_err() {
            end_group(&mut child, Signal::SIGTERM).await;
        }
        writer.abort();
        let tail = match stderr {
            Some(h) => h.await.unwrap_or_default(),
            None => String::new(),
        };
        if completed {
            return Ok(ctx.allowed_outcome().await);
        }
        if let Some(why) = budget.exhausted() {
            return Ok(ctx.budget_stop(&budget, session.as_deref(), why).await);
        }
        restarts += 1;
        carry =
            unacked.lock().unwrap().drain(..).filter(|m| m.as_str() != RESTART_NOTE && *m != first_prompt).collect();
        let crashed = Event::AgentCrashed {
            agent: "claude-code".to_string(),
            restart: restarts,
            status: format!("{status:?}"),
            stderr_tail: truncate(&tail, 2000),
            detail: events::CrashDetail::Stream { resent_messages: carry.len(), first_prompt_taken: prompted },
        };
        ctx.record(session.as_deref(), None, crashed).await;
        if restarts > ctx.agent.max_restarts {
            return Ok(Outcome::Failed(format!(
                "the agent stopped unexpectedly {restarts} times; last stderr: {}",
                truncate(tail.trim(), 300)
            )));
        }
        tokio::select! {
            _ = ctx.token.cancelled() => return Ok(Outcome::Stopped),
            _ = until(deadline) => return Ok(ctx.budget_stop(&budget, session.as_deref(), budget.wall_reason()).await),
            _ = tokio::time::sleep(backoff(restarts)) => {}
        }
    }
}

fn drain_tail<R: tokio::io::AsyncRead + Unpin + Send + 'static>(r: R) -> tokio::task::JoinHandle<String> {
    tokio::spawn(async move {
        let mut lines = BufReader::new(r).lines();
        let mut tail: Vec<String> = Vec::new();
        while let Ok(Some(l)) = lines.next_line().await {
            tail.push(l);
            if tail.len() > 40 {
                tail.remove(0);
            }
        }
        tail.join("\n")
    })
}

/// Writes a person's question into the running agent's stdin as soon as it
/// is queued (Claude Code folds it into the current turn), noting it in
/// `unacked` until the agent echoes it.
fn spawn_question_forwarder(
    ctx: &RunCtx,
    tx: mpsc::Sender<Option<String>>,
    unacked: Unacked,
) -> tokio::task::JoinHandle<()> {
    let sup = ctx.sup.clone();
    let campaign = ctx.campaign.clone();
    let mut bus = sup.subscribe();
    tokio::spawn(async move {
        // Questions queued before the agent started are delivered first.
        let mut pending: Vec<i64> =
            sup.store().list_questions(&campaign, true).await.unwrap_or_default().into_iter().map(|q| q.id).collect();
        loop {
            for id in pending.drain(..) {
                let Some(q) = sup
                    .store()
                    .list_questions(&campaign, true)
                    .await
                    .unwrap_or_default()
                    .into_iter()
                    .find(|q| q.id == id)
                else {
                    continue;
                };
                if sup.store().mark_delivered(id, Via::AgentStdin.as_str(), None).await.unwrap_or(false) {
                    let message = question_message(&q);
                    unacked.lock().unwrap().push(message.clone());
                    if tx.send(Some(user_line(&message))).await.is_err() {
                        return;
                    }
                    let _ = sup.record_delivered(&campaign, None, &q, Via::AgentStdin).await;
                }
            }
            match bus.recv().await {
                Ok(ev) if ev.campaign_id == campaign && ev.kind == events::kind::QUESTION_QUEUED => {
                    if let Some(id) = ev.payload["question_id"].as_i64() {
                        pending.push(id);
                    }
                }
                Ok(_) => {}
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                    // Missed notices: whatever still waits is delivered now.
                    pending = sup
                        .store()
                        .list_questions(&campaign, true)
                        .await
                        .unwrap_or_default()
                        .into_iter()
                        .map(|q| q.id)
                        .collect();
                }
                Err(_) => return,
            }
        }
    })
}

/// Codex (`codex exec --json`, resumed with `exec resume THREAD`) and any
/// command-line agent (start/resume templates): one process per turn; its
/// exit is a completion claim.
pub(super) async fn turn_loop(ctx: &RunCtx, kind: AgentKind) -> anyhow::Result<Outcome> {
    let mut budget = Budget::new(&ctx.agent);
    ctx.preload_spend(&mut budget).await;
    let deadline = budget.deadline();
    let mut session: Option<String> = ctx.resume_session.clone();
    let mut message = if session.is_some() { RESTART_NOTE.to_string() } else { ctx.agent.first_prompt(&ctx.spec) };
    let mut restarts = 0u32;
    let mut after_block = false;
    let local_session = format!("run-{}", ctx.run_id);
    loop {
        // No hook or stdin carries a question to these agents mid-turn: what
        // waits (the start question, anything asked before) goes with the
        // turn's message; a question asked during a turn comes with the
        // judgement of its end.
        for q in ctx.take_waiting_questions(session.as_deref()).await {
            message = format!("{message}\n\n{q}");
        }
        let (program, args) = match kind {
            AgentKind::Codex => {
                let mut args: Vec<String> = vec!["exec".into(), "--json".into(), "--skip-git-repo-check".into()];
                args.extend(ctx.agent.args.iter().cloned());
                match &session {
                    Some(thread) => {
                        args.push("resume".into());
                        args.push(thread.clone());
                        args.push(message.clone());
                    }
                    None => args.push(message.clone()),
                }
                (binary(&ctx.agent.bin, "GADFLY_CODEX_BIN", "codex"), args)
            }
            _ => {
                let template = match (&session, &ctx.agent.resume, &ctx.agent.start) {
                    (Some(_), Some(r), _) => r.clone(),
                    (_, _, Some(s)) => s.clone(),
                    _ => bail!("the command adapter needs [agent] start (and resume) templates in the campaign spec"),
                };
                let cmd = template
                    .replace("{prompt}", &quote(&message))
                    .replace("{message}", &quote(&message))
                    .replace("{session}", &quote(session.as_deref().unwrap_or(&local_session)));
                ("sh".to_string(), vec!["-c".to_string(), cmd])
            }
        };
        let mut child = spawn(&program, &args, ctx, kind, false)?;
        let stderr = child.stderr.take().map(drain_tail);
        let mut lines = BufReader::new(child.stdout.take().context("agent stdout")?).lines();
        let mut claim = String::new();
        let mut turn = TurnSeen::default();
        let mut end_now: Option<Outcome> = None;
        loop {
            let line = tokio::select! {
                _ = ctx.token.cancelled() => { end_now = Some(Outcome::Stopped); break; }
                _ = until(deadline) => {
                    end_now = Some(ctx.budget_stop(&budget, session.as_deref(), budget.wall_reason()).await);
                    break;
                }
                l = lines.next_line() => l,
            };
            let Ok(Some(line)) = line else { break };
            match kind {
                AgentKind::Codex => {
                    // The turn's tokens: checked when its claim is blocked.
                    if line.contains("turn.completed") {
                        if let Some(u) = serde_json::from_str(&line).ok().as_ref().and_then(usage::codex_turn) {
                            ctx.record_usage(&mut budget, session.as_deref(), u).await;
                        }
                    }
                    for (key, event) in codex_line(&line, &mut session, &mut claim, &mut turn) {
                        if let Event::AgentSession(events::AgentSession::Codex { session_id }) = &event {
                            // Kept at once: a daemon that takes this run over resumes the thread.
                            let _ = ctx.sup.store().update_run(ctx.run_id, Some(session_id), 0).await;
                        }
                        ctx.record(session.as_deref(), key, event).await;
                    }
                }
                _ => {
                    // A `gadfly_usage` line: the agent's own report, counted
                    // at once (a budget ends the turn then).
                    match usage::command_line(&line) {
                        Some(Ok(u)) => {
                            let sid = session.clone().unwrap_or_else(|| local_session.clone());
                            if let Some(r) = ctx.record_usage(&mut budget, Some(&sid), u).await {
                                end_now = Some(ctx.budget_stop(&budget, Some(&sid), r).await);
                                break;
                            }
                            continue;
                        }
                        Some(Err(why)) => tracing::warn!(line = %truncate(&line, 300), "not a usage report: {why}"),
                        None => {}
                    }
                    if !line.trim().is_empty() {
                        claim = line.clone();
                        ctx.record(Some(&local_session), None, Event::AgentOutput { line: truncate(&line, 2000) })
                            .await;
                    }
                }
            }
        }
        if let Some(o) = end_now {
            end_group(&mut child, Signal::SIGINT).await;
            return Ok(o);
        }
        let status = child.wait().await?;
        let tail = match stderr {
            Some(h) => h.await.unwrap_or_default(),
            None => String::new(),
        };
        if kind == AgentKind::Command && session.is_none() {
            session = Some(local_session.clone());
        }
        // Codex: only a completed turn is a claim; a process that died
        // mid-turn (killed, an API error) is resumed. Other agents: a failed
        // exit without any output.
        let crashed = match kind {
            AgentKind::Codex => session.is_none() || !turn.completed,
            _ => session.is_none() || (!status.success() && claim.is_empty()),
        };
        if crashed {
            restarts += 1;
            // A Codex turn that started holds its message in the thread
            // already: resume with a note instead of sending it again.
            let resent = !(kind == AgentKind::Codex && session.is_some() && turn.started);
            if !resent {
                message = RESTART_NOTE.to_string();
            }
            let crashed = Event::AgentCrashed {
                agent: kind.as_str().to_string(),
                restart: restarts,
                status: status.to_string(),
                stderr_tail: truncate(&tail, 2000),
                detail: events::CrashDetail::Turn { turn_started: turn.started, message_resent: resent },
            };
            ctx.record(session.as_deref(), None, crashed).await;
            if restarts > ctx.agent.max_restarts {
                return Ok(Outcome::Failed(format!(
                    "{} did not complete a turn ({status}); stderr: {}",
                    kind.as_str(),
                    truncate(tail.trim(), 300)
                )));
            }
            tokio::select! {
                _ = ctx.token.cancelled() => return Ok(Outcome::Stopped),
                _ = until(deadline) => return Ok(ctx.budget_stop(&budget, session.as_deref(), budget.wall_reason()).await),
                _ = tokio::time::sleep(backoff(restarts)) => {}
            }
            continue;
        }
        if let Some(s) = &session {
            let _ = ctx.sup.store().update_run(ctx.run_id, Some(s), budget.turns as i64 + 1).await;
        }
        let sid = session.clone().unwrap_or_default();
        match ctx.judge(kind.as_str(), &sid, &claim, after_block).await? {
            None => return Ok(ctx.allowed_outcome().await),
            Some(reason) => {
                after_block = true;
                if let Some(why) = budget.after_blocked_turn(ctx.latest_geomean().await) {
                    return Ok(ctx.budget_stop(&budget, session.as_deref(), why).await);
                }
                message = reason;
            }
        }
    }
}

fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Where a campaign's spawned agents keep their files.
pub fn run_dir(data_dir: &std::path::Path, campaign: &str) -> PathBuf {
    data_dir.join("runs").join(campaign)
}
