//! The JSON of `GET /api/v1/campaigns` and `GET /api/v1/campaigns/{id}`
//! (what `campaign list|show` print), shared by the API and the plain
//! pages of `pages`.
//!
//! What they call the campaign's verdict and figures is the workspace's
//! (issue #32): the latest evaluation is the tree the workspace presented
//! last, never a beam candidate's; "best" and the history are over the
//! workspace's evaluations whose figures are a result (every scenario
//! correct, nothing failed), and an evaluation whose figures are not one
//! says so with its geometric mean (see [`evaluation_json`]).

use serde_json::{json, Value};

use crate::app::Supervisor;
use crate::evaluation::{Evaluation, Origin};
use crate::events::{kind, HooksInstall};
use crate::store::{EventRow, RunRow, SeriesPoint, StopAttemptRow};

use super::ApiError;

async fn latest_evaluation(s: &Supervisor, id: &str) -> anyhow::Result<Option<Evaluation>> {
    // One row, not every evaluation of the campaign: the list page asks this per campaign.
    // One that does not decode is shown as none (warned about once), as it always was.
    s.store().skip_corrupt(s.store().latest_evaluation(id).await)
}

/// An evaluation as the API shows it: its stored body with `id` and
/// `origin`, and what its figures are worth: `incorrect` (a scenario
/// incorrect or missing, or the evaluation itself failed: no result, never
/// progress nor a best) with `incorrect_reason`, and `geomean_counts`
/// (false with `geomean_note` saying why, e.g. "geomean 24.70x does not
/// count: 3 scenarios incorrect"). Its `failures` split in two:
/// `evaluation_failures` (the evaluation itself failed: nothing measured)
/// and `predicate_failures` (it ran; the predicate does not hold).
pub fn evaluation_json(e: &Evaluation) -> Value {
    let mut v = serde_json::to_value(e).unwrap_or(Value::Null);
    if let Some(o) = v.as_object_mut() {
        let why = e.incorrect_reason();
        o.insert("incorrect".into(), json!(why.is_some()));
        o.insert("geomean_counts".into(), json!(e.verdict.geomean_speedup.is_some() && why.is_none()));
        o.insert("geomean_note".into(), json!(e.geomean_note()));
        o.insert("incorrect_reason".into(), json!(why));
        // `failures` split (issue #49): no result, or the predicate does not hold.
        o.insert("evaluation_failures".into(), json!(e.evaluation_failures()));
        o.insert("predicate_failures".into(), json!(e.predicate_failures()));
    }
    v
}

/// The workspace's evaluations: a beam candidate's belong to its family,
/// and gadfly's own runs of a tree already measured (the calibration's
/// runs of the initial kernel against itself, a suspicious gain's
/// re-check) are no result of the agent's: the initial kernel's luckiest
/// calibration run was shown as the campaign's "best 1.05x" before the
/// agent had changed anything.
fn workspace_points(series: &[SeriesPoint]) -> impl Iterator<Item = &SeriesPoint> {
    series.iter().filter(|p| p.origin == Origin::Workspace)
}

/// The best geometric mean of the workspace's correct evaluations, and its evaluation.
fn best_of(series: &[SeriesPoint]) -> Option<(f64, i64)> {
    let correct = workspace_points(series).filter(|p| !p.incorrect);
    let mut best: Option<(f64, i64)> = None;
    for (g, id) in correct.filter_map(|p| p.geomean.map(|g| (g, p.id))) {
        if best.is_none_or(|(b, _)| g > b) {
            best = Some((g, id));
        }
    }
    best
}

pub async fn campaign_summaries(s: &Supervisor) -> anyhow::Result<Vec<Value>> {
    let mut out = Vec::new();
    for c in s.store().list_campaigns().await? {
        let latest = latest_evaluation(s, &c.id).await?;
        let stops = s.store().list_stop_attempts(&c.id).await?;
        let life = lifecycle(s, &c.id, &stops).await?;
        let series = s.store().evaluation_series(&c.id).await?;
        let best = best_of(&series);
        // The workspace's history; an incorrect evaluation is a gap, not progress.
        let mine: Vec<&SeriesPoint> = workspace_points(&series).collect();
        let recent: Vec<Option<f64>> =
            mine.iter().rev().take(50).rev().map(|p| if p.incorrect { None } else { p.geomean }).collect();
        let last_event = s.store().tail_events(&c.id, 1).await?.pop();
        // A spec that does not decode shows no agent, as it always did (warned about once).
        let spec = s.store().skip_corrupt(c.spec().map(Some))?;
        let agent = spec.and_then(|spec| spec.extra.get("agent").map(|a| a["kind"].clone())).unwrap_or_default();
        out.push(json!({
            "agent": agent,
            "best_geomean_speedup": best.map(|b| b.0),
            "best_evaluation_id": best.map(|b| b.1),
            "best_evaluation_number": best.map(|b| crate::evaluation::number_in(series.iter().map(|p| p.id), b.1)),
            "geomean_series": recent,
            "last_event": last_event.map(|e| json!({"id": e.id, "kind": e.kind, "created_at": e.created_at})),
            "id": c.id,
            "name": c.name,
            "mode": c.mode,
            "status": c.status,
            "state": life["state"],
            "state_detail": life["state_detail"],
            "attached": life["attached"],
            "archived_at": c.archived_at,
            "created_at": c.created_at,
            "evaluations": s.store().count_evaluations(&c.id).await?,
            "holds": latest.as_ref().map(|e| e.verdict.holds),
            "geomean_speedup": latest.as_ref().and_then(|e| e.verdict.geomean_speedup),
            "worst_scenario": latest.as_ref().and_then(|e| e.verdict.worst_scenario.clone()),
            "worst_speedup": latest.as_ref().and_then(|e| e.verdict.worst_speedup),
            "latest_evaluation_id": latest.as_ref().and_then(|e| e.id),
            "incorrect": latest.as_ref().map(Evaluation::incorrect),
            "incorrect_reason": latest.as_ref().and_then(Evaluation::incorrect_reason),
            "geomean_counts": latest.as_ref().map(|e| e.verdict.geomean_speedup.is_some() && !e.incorrect()),
            "geomean_note": latest.as_ref().and_then(Evaluation::geomean_note),
            "workspace_evaluations": mine.len(),
            "stop_attempts": stops.len(),
            "last_decision": stops.last().map(|st| st.decision.clone()),
            "failed_start": failed_start(s, &c.id, &stops).await?,
        }));
    }
    Ok(out)
}

pub async fn campaign_detail(s: &Supervisor, id: &str) -> Result<Value, ApiError> {
    let (row, spec) = s.campaign(id).await?;
    let latest = latest_evaluation(s, id).await?;
    let stops = s.store().list_stop_attempts(id).await?;
    let life = lifecycle(s, id, &stops).await?;
    // Read each time: another daemon on the same database may have changed it.
    let archived_at = s.store().get_campaign(id).await?.and_then(|r| r.archived_at);
    let questions = s.store().list_questions(id, false).await?;
    let series = s.store().evaluation_series(id).await?;
    let best = best_of(&series);
    let number = |e: i64| crate::evaluation::number_in(series.iter().map(|p| p.id), e);
    Ok(json!({
        "id": row.id,
        "name": row.name,
        "mode": row.mode,
        "status": row.status,
        "state": life["state"],
        "state_detail": life["state_detail"],
        "attached": life["attached"],
        "archived_at": archived_at,
        "latest_moment": latest_moment(s, id).await?,
        "created_at": row.created_at,
        "spec_path": row.spec_path,
        "spec": spec,
        "evaluations": s.store().count_evaluations(id).await?,
        "events": s.store().count_events(id).await?,
        "latest_evaluation": latest.as_ref().map(evaluation_json),
        "best_geomean_speedup": best.map(|b| b.0),
        "best_evaluation_id": best.map(|b| b.1),
        "best_evaluation_number": best.map(|b| number(b.1)),
        "latest_evaluation_number": latest.as_ref().and_then(|e| e.id).map(number),
        "failed_start": failed_start(s, id, &stops).await?,
        "stop_attempts": stops,
        "questions": questions,
    }))
}

/// Where a campaign's agent stands, from what was recorded (issue #32):
/// the `state` and `state_detail` of a campaign's JSON. `status` is the
/// stored column, "active" from creation on; this is derived each time.
///
/// - `running`: a run gadfly started is running;
/// - `done`: the latest stop attempt was allowed (the predicate holds) and
///   no prompt came after it, or gadfly's run ended that way;
/// - `stopped_by_budget`, `stopped`, `failed`: how gadfly's latest run
///   ended, when nothing was judged after it;
/// - `active`: anything else (no stop attempt yet, the latest blocked,
///   new work after an allowed stop).
///
/// `runs`: the campaign's runs, oldest first; a run is named by its place
/// among them (run 2), not its global id.
pub fn agent_state(
    runs: &[RunRow],
    last_stop: Option<&StopAttemptRow>,
    run_ended: Option<&EventRow>,
    last_prompt: Option<&EventRow>,
) -> (&'static str, String) {
    let number = |id: i64| crate::evaluation::number_in(runs.iter().map(|r| r.id), id);
    if let Some(r) = runs.last().filter(|r| r.status == "running") {
        return ("running", format!("run {} ({}) is running", number(r.id), r.agent));
    }
    let stop_at = last_stop.map_or(0, |s| s.event_id);
    if let Some(e) = run_ended.filter(|e| e.id > stop_at) {
        let run_id = e.payload["run_id"].as_i64().map(|i| format!("run {}: ", number(i))).unwrap_or_default();
        let detail = format!("{run_id}{}", e.payload["detail"].as_str().unwrap_or(""));
        let state = match e.payload["outcome"].as_str() {
            Some("completed") => "done",
            Some("limit_accepted") => "limit_accepted",
            Some("stopped_by_budget") => "stopped_by_budget",
            Some("stopped") => "stopped",
            Some("failed") => "failed",
            _ => "active",
        };
        return (state, detail);
    }
    match last_stop {
        None => ("active", "no stop attempt yet".into()),
        // A person accepted the agent's limit claim: stopped, not done.
        Some(s) if s.decision == "limit_accepted" => match last_prompt.filter(|p| p.id > s.event_id) {
            Some(p) => ("active", format!("a new prompt at {} after the accepted limit", p.created_at)),
            None => (
                "limit_accepted",
                s.reason.clone().unwrap_or_else(|| "the last stop attempt was allowed: limit accepted".into()),
            ),
        },
        Some(s) if s.decision == "allow" => match last_prompt.filter(|p| p.id > s.event_id) {
            Some(p) => ("active", format!("a new prompt at {} after the allowed stop attempt", p.created_at)),
            None => ("done", format!("the last stop attempt, at {}, was allowed: the predicate holds", s.created_at)),
        },
        Some(s) => {
            // Its id is global across campaigns (issue #49): not a number to show.
            ("active", format!("the last stop attempt, at {}, was {}", s.created_at, s.decision.replace('_', " ")))
        }
    }
}

/// The hook calls that say an agent session is attached (Claude Code's or
/// Codex's, through `gadfly attach` or gadfly's own settings).
const SESSION_KINDS: [&str; 6] = [
    kind::HOOK_STOP,
    kind::HOOK_SESSION_START,
    kind::HOOK_USER_PROMPT_SUBMIT,
    kind::HOOK_PRE_TOOL_USE,
    kind::HOOK_POST_TOOL_USE,
    kind::HOOK_SESSION_END,
];

/// The agent session gadfly knows of, as the `attached` of a campaign's
/// JSON: null when none; else `agent`, `session_id`, `seen_at` (its
/// latest hook call, or its run's start), `via` ("hooks": hook calls,
/// "run": a run gadfly started) and `hooks` (the latest install record:
/// "attach", "spawn", "removed", or null).
async fn attached(s: &Supervisor, id: &str, run: Option<&RunRow>) -> anyhow::Result<Value> {
    let mut call: Option<EventRow> = None;
    for k in SESSION_KINDS {
        if let Some(e) = s.store().recent_events(id, k, 1).await?.pop() {
            if call.as_ref().is_none_or(|c| e.id > c.id) {
                call = Some(e);
            }
        }
    }
    let install = s.store().recent_hook_installs(id, 1).await?.pop();
    let hooks = install.as_ref().map(|i| match i {
        HooksInstall::Installed(i) => i.kind.clone(),
        HooksInstall::Removed { .. } => "removed".into(),
    });
    let running = run.filter(|r| r.status == "running");
    Ok(match (running, call, run) {
        (None, Some(c), _) => {
            let session =
                c.session_id.clone().or_else(|| c.payload["payload"]["session_id"].as_str().map(String::from));
            json!({"agent": c.payload["agent"], "session_id": session, "seen_at": c.created_at, "via": "hooks", "hooks": hooks})
        }
        (_, _, Some(r)) => {
            json!({"agent": r.agent, "session_id": r.session_id, "seen_at": r.started_at, "via": "run", "hooks": hooks})
        }
        // Hooks written by `gadfly attach` (Claude Code's settings), no call yet.
        (_, None, None) if hooks.as_deref() == Some("attach") => {
            json!({"agent": "claude-code", "session_id": null, "seen_at": null, "via": "hooks", "hooks": hooks})
        }
        _ => Value::Null,
    })
}

/// The `failed_start` of a campaign's JSON (issue #49): the latest agent
/// session that failed at start-up (`session.failed_start`: no turn, so no
/// stop attempt) when it came after the last stop attempt, so that the
/// campaign's last word is that failure, not an older stop's decision;
/// null otherwise.
async fn failed_start(s: &Supervisor, id: &str, stops: &[StopAttemptRow]) -> anyhow::Result<Value> {
    let after = stops.last().map_or(0, |st| st.event_id);
    let failed = s.store().recent_events(id, kind::SESSION_FAILED_START, 1).await?.pop();
    Ok(match failed.filter(|e| e.id > after) {
        Some(e) => json!({"event_id": e.id, "created_at": e.created_at, "session_id": e.session_id,
                          "why": e.payload["why"], "error": e.payload["error"]}),
        None => Value::Null,
    })
}

/// The campaign's `state`, `state_detail` and `attached`, as one map to
/// add to its JSON.
async fn lifecycle(s: &Supervisor, id: &str, stops: &[StopAttemptRow]) -> anyhow::Result<Value> {
    let runs = s.store().list_runs(id).await?;
    let ended = s.store().recent_events(id, kind::RUN_ENDED, 1).await?.pop();
    let prompt = s.store().recent_events(id, kind::HOOK_USER_PROMPT_SUBMIT, 1).await?.pop();
    let (state, detail) = agent_state(&runs, stops.last(), ended.as_ref(), prompt.as_ref());
    Ok(json!({"state": state, "state_detail": detail, "attached": attached(s, id, runs.last()).await?}))
}

/// Moments that say little about which question to ask: every stop
/// attempt raises a completion claim, and the start is raised once.
const WEAK_MOMENTS: [&str; 2] = ["completion_claim", "start"];

/// The `latest_moment` of a campaign's JSON (what the composer's moment
/// picker starts at): the newest moment detected other than a completion
/// claim or the start, else the newest of those; null when none was.
async fn latest_moment(s: &Supervisor, id: &str) -> anyhow::Result<Value> {
    let moments = s.store().recent_events(id, kind::MOMENT, 200).await?;
    let weak = |e: &&EventRow| WEAK_MOMENTS.contains(&e.payload["moment"].as_str().unwrap_or_default());
    let pick = moments.iter().find(|e| !weak(e)).or(moments.first());
    Ok(pick.map_or(Value::Null, |e| {
        json!({
            "moment": e.payload["moment"],
            "detector": e.payload["detector"],
            "detail": e.payload["detail"],
            "source": e.payload["source"],
            "event_id": e.id,
            "created_at": e.created_at,
        })
    }))
}

#[cfg(test)]
mod lifecycle_tests {
    use super::*;

    fn stop(event_id: i64, decision: &str) -> StopAttemptRow {
        StopAttemptRow {
            id: event_id,
            campaign_id: "c".into(),
            event_id,
            session_id: Some("s".into()),
            agent: "claude-code".into(),
            claim: None,
            stop_hook_active: false,
            evaluation_id: None,
            holds: decision == "allow",
            decision: decision.into(),
            reason: None,
            question_id: None,
            created_at: "t".into(),
        }
    }

    fn event(id: i64, kind: &str, payload: Value) -> EventRow {
        EventRow { id, campaign_id: "c".into(), session_id: None, kind: kind.into(), payload, created_at: "t".into() }
    }

    fn run(status: &str) -> RunRow {
        RunRow {
            id: 1,
            campaign_id: "c".into(),
            agent: "command".into(),
            status: status.into(),
            session_id: None,
            turns: 0,
            outcome: None,
            started_at: "t".into(),
            ended_at: None,
            owner: None,
        }
    }

    fn ended(id: i64, outcome: &str) -> EventRow {
        event(id, kind::RUN_ENDED, json!({"run_id": 1, "outcome": outcome, "detail": "why"}))
    }

    /// The calibration's runs of the initial kernel and a re-check are
    /// gadfly's own measurements, not the agent's results: never its best.
    #[test]
    fn the_best_is_over_the_agent_s_workspace_evaluations_only() {
        let point = |id: i64, origin: Origin, g: f64| SeriesPoint {
            id,
            created_at: "t".into(),
            holds: false,
            geomean: Some(g),
            origin,
            incorrect: false,
        };
        let series = [
            point(1, Origin::Recheck, 1.05),
            point(2, Origin::Recheck, 0.99),
            point(3, Origin::Workspace, 0.98),
            point(4, Origin::Beam, 1.4),
            point(5, Origin::Workspace, 1.01),
        ];
        assert_eq!(best_of(&series), Some((1.01, 5)));
        assert_eq!(workspace_points(&series).count(), 2);
        assert_eq!(best_of(&series[..2]), None, "calibration alone: no best yet");
    }

    #[test]
    fn an_allowed_stop_is_done_until_a_new_prompt_comes() {
        let prompt = event(9, kind::HOOK_USER_PROMPT_SUBMIT, json!({}));
        assert_eq!(agent_state(&[], None, None, None).0, "active");
        assert_eq!(agent_state(&[], Some(&stop(5, "block")), None, None).0, "active");
        assert_eq!(agent_state(&[], Some(&stop(5, "allow")), None, None).0, "done");
        let limit = agent_state(&[], Some(&stop(5, "limit_accepted")), None, None);
        assert_eq!(limit.0, "limit_accepted", "an accepted limit is not done: {limit:?}");
        assert_eq!(agent_state(&[], Some(&stop(5, "allow")), None, Some(&event(3, "p", json!({})))).0, "done");
        assert_eq!(agent_state(&[], Some(&stop(5, "allow")), None, Some(&prompt)).0, "active");
    }

    #[test]
    fn a_run_is_running_then_its_outcome_until_a_later_stop_is_judged() {
        assert_eq!(agent_state(&[run("running")], Some(&stop(5, "allow")), None, None).0, "running");
        for (outcome, state) in [
            ("completed", "done"),
            ("stopped_by_budget", "stopped_by_budget"),
            ("stopped", "stopped"),
            ("failed", "failed"),
        ] {
            let (s, detail) = agent_state(&[run("ended")], Some(&stop(5, "block")), Some(&ended(7, outcome)), None);
            assert_eq!((s, detail.as_str()), (state, "run 1: why"), "{outcome}");
        }
        // Run ids are global: the campaign's second run is id 41, and is named run 2.
        let runs = [RunRow { id: 40, ..run("ended") }, RunRow { id: 41, ..run("ended") }];
        let ended41 = event(7, kind::RUN_ENDED, json!({"run_id": 41, "outcome": "failed", "detail": "why"}));
        assert_eq!(agent_state(&runs, None, Some(&ended41), None).1, "run 2: why");
        let running = [RunRow { id: 40, ..run("ended") }, RunRow { id: 41, ..run("running") }];
        assert_eq!(agent_state(&running, None, None, None).1, "run 2 (command) is running");
        // A session attached after the run ended, and its stop judged: that stop says.
        assert_eq!(agent_state(&[run("ended")], Some(&stop(8, "block")), Some(&ended(7, "failed")), None).0, "active");
    }
}
