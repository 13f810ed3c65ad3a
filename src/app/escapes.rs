//! Turns that end outside the gate, seen from Claude Code's own transcripts.
//!
//! The Stop hook is the gate, so an agent that switches hooks off
//! (`disableAllHooks` at any settings level, a hook entry removed) stops
//! without being judged, and no hook is left to report it (THREATS.md row
//! 21). Claude Code still writes its transcript, for every session, under
//! `<config dir>/projects/<folder>/<session>.jsonl`, with the session's
//! working directory in each line. The daemon reads those transcripts for
//! every active campaign's workspace, independently of any hook: when a
//! session's last line is an assistant message with no tool call (the model
//! ended its turn) and the file stays quiet for the grace period, a Stop
//! hook call from that session must have reached the daemon since that
//! message. If none did, the turn ended ungated: it is recorded as an
//! ungated stop attempt and a `violation`, shown on the console and in the
//! audit.
//!
//! Where it looks: `$CLAUDE_CONFIG_DIR/projects`, `$HOME/.claude/projects`
//! and each folder of `$GADFLY_CLAUDE_CONFIG_DIRS` (colon-separated config
//! dirs, for agents run as another user or with their own config dir); the
//! transcripts are found and their lines read by `agent::escapes`.
//! Sessions of gadfly's own runs are left to the run (it judges each turn
//! end itself).

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::agent::escapes::{projects_dirs, read_line, recent_transcripts, Line};

use super::Supervisor;

/// How long a turn's end may wait for its Stop hook call.
fn grace() -> Duration {
    std::env::var("GADFLY_ESCAPE_GRACE_S")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map_or(Duration::from_secs(60), Duration::from_secs_f64)
}

/// One transcript being followed.
#[derive(Debug, Default)]
struct Followed {
    offset: u64,
    /// The last message line read, and when it was read.
    last: Option<(Line, Instant)>,
    /// Turn ends already judged (their uuid).
    judged: HashSet<String>,
}

impl Supervisor {
    /// The watch: every few seconds, every active campaign's workspace, until
    /// `cancel`; a background task of the supervisor's (`escape-watch`).
    pub fn spawn_escape_watch(&self, cancel: CancellationToken) {
        let sup = self.clone();
        self.spawn_task("escape-watch", async move {
            let mut followed: HashMap<PathBuf, Followed> = HashMap::new();
            let mut tick = tokio::time::interval(Duration::from_secs(2));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = cancel.cancelled() => return,
                    _ = tick.tick() => {}
                }
                if let Err(e) = round(&sup, &mut followed).await {
                    tracing::debug!(error = %e, "transcript escape watch");
                }
            }
        });
    }
}

async fn round(sup: &Supervisor, followed: &mut HashMap<PathBuf, Followed>) -> anyhow::Result<()> {
    let mut workspaces: Vec<(String, String)> = Vec::new();
    for c in sup.store().list_campaigns().await? {
        if c.status != "active" {
            continue;
        }
        if let Ok((_, spec)) = sup.campaign(&c.id).await {
            let ws = std::fs::canonicalize(&spec.workspace).unwrap_or(spec.workspace.clone());
            workspaces.push((c.id.clone(), ws.display().to_string()));
        }
    }
    if workspaces.is_empty() {
        return Ok(());
    }
    // New lines of every recent transcript, read off the async workers.
    let paths: Vec<(PathBuf, u64)> = {
        let dirs = projects_dirs();
        let known: HashMap<PathBuf, u64> = followed.iter().map(|(p, f)| (p.clone(), f.offset)).collect();
        tokio::task::spawn_blocking(move || recent_transcripts(&dirs, &known)).await?
    };
    for (path, offset) in paths {
        let p = path.clone();
        let Ok(Ok((lines, new_offset))) =
            tokio::task::spawn_blocking(move || crate::agent::transcript::read_new_lines(&p, offset)).await
        else {
            continue;
        };
        let f = followed.entry(path).or_default();
        f.offset = new_offset;
        if let Some(last) = lines.iter().rev().find_map(|l| read_line(l)) {
            if f.last.as_ref().is_none_or(|(l, _)| l.uuid != last.uuid) {
                f.last = Some((last, Instant::now()));
            }
        }
    }
    let grace = grace();
    let mut due = Vec::new();
    for f in followed.values_mut() {
        let Some((line, seen)) = &f.last else { continue };
        if !line.ends_turn || seen.elapsed() < grace || f.judged.contains(&line.uuid) || line.session.is_empty() {
            continue;
        }
        if let Some((campaign, _)) = workspaces.iter().find(|(_, ws)| *ws == line.cwd) {
            f.judged.insert(line.uuid.clone());
            due.push((campaign.clone(), line.clone()));
        }
    }
    for (campaign, line) in due {
        judge(sup, &campaign, &line).await?;
    }
    Ok(())
}

/// A turn ended in `line`: was a Stop hook call from its session recorded
/// since? If not, the turn ended outside the gate.
async fn judge(sup: &Supervisor, campaign: &str, line: &Line) -> anyhow::Result<()> {
    let runs = sup.store().list_runs(campaign).await?;
    if runs.iter().any(|r| r.session_id.as_deref() == Some(line.session.as_str())) {
        return Ok(()); // gadfly's own run judges its turn ends
    }
    let ended = chrono::DateTime::parse_from_rfc3339(&line.timestamp).ok();
    let gated = sup.store().recent_events(campaign, crate::events::kind::HOOK_STOP, 200).await?.into_iter().any(|e| {
        e.session_id.as_deref() == Some(line.session.as_str())
            && match (ended, chrono::DateTime::parse_from_rfc3339(&e.created_at).ok()) {
                // A little skew between the agent's clock and the daemon's.
                (Some(t), Some(at)) => at >= t - chrono::Duration::seconds(5),
                _ => true,
            }
    });
    if gated {
        return Ok(());
    }
    let why = "the agent's turn ended with no Stop hook call (hooks disabled or removed?): seen in its transcript";
    let violation = crate::events::Violation::TurnEndedUngated {
        why: why.to_string(),
        uuid: line.uuid.clone(),
        timestamp: line.timestamp.clone(),
    };
    let key = format!("escape:{}", line.uuid);
    let (event_id, _) =
        sup.record_event(campaign, Some(&line.session), Some(&key), crate::events::Event::Violation(violation)).await?;
    let claim: String = line.text.chars().take(2000).collect();
    sup.record_ungated(campaign, "claude-code", event_id, Some(&line.session), Some(&claim), why).await
}
