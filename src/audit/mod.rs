//! Audit of completion claims. Live: every stop attempt of a campaign is a
//! claim record (the claim, the evaluation it was judged on, the verdict
//! per scenario, the decision, the question, and what followed), with the
//! premature-claim rate and the gain won after premature claims, per
//! campaign and per agent. Offline: [`transcript`] audits agent sessions
//! that ran without gadfly. Reports render as JSON, Markdown and HTML.

pub mod evidence;
pub mod transcript;

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::evaluation::Evaluation;
use crate::store::{StopAttemptRow, Store};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FailingScenario {
    pub scenario: String,
    pub reasons: Vec<String>,
    /// Against the initial kernel and against the comparison, when measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speedup: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compare_speedup: Option<f64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ClaimRecord {
    pub stop_attempt: i64,
    pub created_at: String,
    pub session_id: Option<String>,
    pub agent: String,
    pub claim: Option<String>,
    pub evaluation_id: Option<i64>,
    pub holds: bool,
    pub geomean_speedup: Option<f64>,
    /// The geometric mean against the comparison implementation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub geomean_compare_speedup: Option<f64>,
    pub failing: Vec<FailingScenario>,
    pub decision: String,
    /// Blocked while the predicate failed.
    pub premature: bool,
    pub question: Option<String>,
    /// Why the evaluation it was judged on is no result (a scenario
    /// incorrect or missing, or the evaluation failed): its geomean is then
    /// no starting point for the gain. None when correct, or not evaluated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incorrect: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SessionOutcome {
    pub session_id: Option<String>,
    pub agent: String,
    pub claims: usize,
    pub premature: usize,
    /// Blocks before the claim that was finally accepted (None: never accepted).
    pub blocks_before_acceptance: Option<usize>,
    pub first_geomean: Option<f64>,
    pub accepted_geomean: Option<f64>,
    /// Relative gain from the first claim judged on a correct evaluation
    /// (`gain_from_stop_attempt`) to the accepted one: incorrect results
    /// are never progress.
    pub gain_after_first_claim: Option<f64>,
    /// The claim the gain is measured from, and its geomean.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gain_from_stop_attempt: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gain_from_geomean: Option<f64>,
    /// Why there is no gain, when there is none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_gain_reason: Option<String>,
    /// `accepted`, `stopped_by_budget`, or `open` (neither yet).
    pub ended: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AgentSummary {
    pub agent: String,
    pub claims: usize,
    pub premature: usize,
    pub premature_rate: f64,
    pub mean_gain_after_premature: Option<f64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CampaignAudit {
    pub campaign: String,
    pub claims: usize,
    pub premature: usize,
    pub premature_rate: f64,
    pub mean_gain_after_premature: Option<f64>,
    pub records: Vec<ClaimRecord>,
    pub sessions: Vec<SessionOutcome>,
    pub agents: Vec<AgentSummary>,
    /// Every stop attempt as stored (with the hook call's session_id).
    pub stop_attempts: Vec<StopAttemptRow>,
    /// What the agents reported they used (see [`spend`]).
    #[serde(default)]
    pub spend: Option<Spend>,
    /// Limits a person accepted (`gadfly claim limit`), and the stops they
    /// let through: counted apart, never as completion claims or successes.
    #[serde(default)]
    pub limits_accepted: Vec<AcceptedLimitRecord>,
}

/// The decision of a stop let through on an accepted limit
/// (`gate::Decision::LimitAccepted`).
pub const LIMIT_ACCEPTED: &str = "limit_accepted";

/// A limit claim a person accepted, with what it rested on.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AcceptedLimitRecord {
    pub claim_id: i64,
    pub by: String,
    /// The agent's own words.
    pub why: String,
    /// The names of its evidence files.
    pub evidence: Vec<String>,
    /// The verdict when it was accepted.
    pub evaluation_id: Option<i64>,
    pub holds: Option<bool>,
    pub geomean_speedup: Option<f64>,
    pub accepted_at: String,
    /// The stop attempts it let through.
    pub stops: Vec<i64>,
}

/// A campaign's spend in its audit: the campaign's figures, each
/// session's and each run's.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Spend {
    pub campaign: Value,
    pub sessions: Value,
    pub runs: Value,
    pub note: String,
}

/// What the spend figures are, for a reader.
pub const SPEND_NOTE: &str = "Tokens are every input token (cached ones included) plus every output token, as the \
    agents report them. Money is the agents' own figure and nothing else: Claude Code reports it (the stream's \
    total_cost_usd; a transcript's cost-state lines, written when a CLI process ends), a command agent may \
    (gadfly_usage lines); Codex reports tokens only. gadfly prices nothing: no reported cost shows as none, not 0.";

/// The `agent.usage` events of a campaign, summed.
pub async fn spend(store: &Store, campaign_id: &str) -> anyhow::Result<crate::spend::Tally> {
    let mut tally = crate::spend::Tally::default();
    let rows = store.recent_events(campaign_id, crate::events::kind::AGENT_USAGE, i64::MAX).await?;
    for e in rows.iter().rev() {
        tally.add(e.session_id.as_deref(), &e.payload);
    }
    Ok(tally)
}

/// Builds the audit of one campaign from its stored stop attempts.
pub async fn campaign(store: &Store, campaign_id: &str) -> anyhow::Result<CampaignAudit> {
    let stops = store.list_stop_attempts(campaign_id).await?;
    let evals: HashMap<i64, Evaluation> =
        store.list_evaluations(campaign_id).await?.into_iter().filter_map(|e| Some((e.id?, e))).collect();
    let questions: HashMap<i64, String> =
        store.list_questions(campaign_id, false).await?.into_iter().map(|q| (q.id, q.text)).collect();
    let budget_sessions: Vec<Option<String>> = store
        .list_runs(campaign_id)
        .await?
        .into_iter()
        .filter(|r| r.outcome.as_deref() == Some("stopped_by_budget"))
        .map(|r| r.session_id)
        .collect();
    // A stop let through on an accepted limit is no completion claim.
    let records: Vec<ClaimRecord> = stops
        .iter()
        .filter(|s| s.decision != LIMIT_ACCEPTED)
        .map(|s| {
            let e = s.evaluation_id.and_then(|id| evals.get(&id));
            ClaimRecord {
                stop_attempt: s.id,
                created_at: s.created_at.clone(),
                session_id: s.session_id.clone(),
                agent: s.agent.clone(),
                claim: s.claim.clone(),
                evaluation_id: s.evaluation_id,
                holds: s.holds,
                geomean_speedup: e.and_then(|e| e.verdict.geomean_speedup),
                geomean_compare_speedup: e.and_then(|e| e.verdict.geomean_compare_speedup),
                failing: e
                    .map(|e| {
                        e.verdict
                            .scenarios
                            .iter()
                            .filter(|sc| !sc.passes)
                            .map(|sc| FailingScenario {
                                scenario: sc.scenario.clone(),
                                reasons: sc.reasons.clone(),
                                speedup: sc.speedup,
                                compare_speedup: sc.compare_speedup,
                            })
                            .collect()
                    })
                    .unwrap_or_default(),
                decision: s.decision.clone(),
                premature: !s.holds && s.decision != "allow",
                question: s.question_id.and_then(|q| questions.get(&q).cloned()),
                incorrect: e.and_then(Evaluation::incorrect_reason),
            }
        })
        .collect();
    let sessions = sessions_of(&records, &budget_sessions);
    let agents = agents_of(&records, &sessions);
    let premature = records.iter().filter(|r| r.premature).count();
    Ok(CampaignAudit {
        campaign: campaign_id.to_string(),
        claims: records.len(),
        premature,
        premature_rate: rate(premature, records.len()),
        mean_gain_after_premature: mean(
            sessions.iter().filter(|s| s.premature > 0).filter_map(|s| s.gain_after_first_claim),
        ),
        records,
        sessions,
        agents,
        limits_accepted: accepted_limits(store, campaign_id, &stops).await?,
        stop_attempts: stops,
        spend: Some(spend_of(&spend(store, campaign_id).await?)),
    })
}

/// The limit claims a person accepted, oldest first, each with the stops
/// it let through (those after it, until the next verdict).
async fn accepted_limits(
    store: &Store,
    campaign_id: &str,
    stops: &[StopAttemptRow],
) -> anyhow::Result<Vec<AcceptedLimitRecord>> {
    use crate::events::kind;
    let verdicts = store.recent_events(campaign_id, kind::CLAIM_VERDICT, 10_000).await?;
    let claims = store.recent_events(campaign_id, kind::CLAIM, 10_000).await?;
    let mut out = vec![];
    for (i, v) in verdicts.iter().enumerate().rev().filter(|(_, v)| v.payload["verdict"] == "accepted") {
        let claim_id = v.payload["claim_id"].as_i64().unwrap_or(0);
        let claim = claims.iter().find(|c| c.id == claim_id);
        // Newest first: the verdict after this one is at i - 1.
        let until = i.checked_sub(1).map(|j| verdicts[j].id).unwrap_or(i64::MAX);
        out.push(AcceptedLimitRecord {
            claim_id,
            by: v.payload["by"].as_str().unwrap_or("").to_string(),
            why: claim.and_then(|c| c.payload["why"].as_str()).unwrap_or("").to_string(),
            evidence: claim
                .and_then(|c| c.payload["evidence"].as_array())
                .map(|a| a.iter().filter_map(|f| f["name"].as_str().map(str::to_string)).collect())
                .unwrap_or_default(),
            evaluation_id: v.payload["evaluation_id"].as_i64(),
            holds: v.payload["holds"].as_bool(),
            geomean_speedup: v.payload["geomean_speedup"].as_f64(),
            accepted_at: v.created_at.clone(),
            stops: stops
                .iter()
                .filter(|s| s.decision == LIMIT_ACCEPTED)
                .filter(|s| s.event_id > v.id && s.event_id < until)
                .map(|s| s.id)
                .collect(),
        });
    }
    Ok(out)
}

fn spend_of(t: &crate::spend::Tally) -> Spend {
    let v = |x: serde_json::Result<Value>| x.unwrap_or(Value::Null);
    Spend {
        campaign: v(serde_json::to_value(t.total())),
        sessions: v(serde_json::to_value(t.sessions())),
        runs: v(serde_json::to_value(t.runs())),
        note: SPEND_NOTE.to_string(),
    }
}

fn rate(a: usize, b: usize) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

fn mean(it: impl Iterator<Item = f64>) -> Option<f64> {
    let v: Vec<f64> = it.collect();
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

fn sessions_of(records: &[ClaimRecord], budget_sessions: &[Option<String>]) -> Vec<SessionOutcome> {
    let mut order: Vec<Option<String>> = Vec::new();
    let mut by: HashMap<Option<String>, Vec<&ClaimRecord>> = HashMap::new();
    for r in records {
        if !by.contains_key(&r.session_id) {
            order.push(r.session_id.clone());
        }
        by.entry(r.session_id.clone()).or_default().push(r);
    }
    order
        .into_iter()
        .map(|sid| {
            let rs = &by[&sid];
            let accepted = rs.iter().position(|r| r.decision == "allow");
            let first = rs.first().and_then(|r| r.geomean_speedup);
            let acc = accepted.and_then(|i| rs[i].geomean_speedup);
            let gain = gain_of(rs, accepted);
            SessionOutcome {
                session_id: sid.clone(),
                agent: rs[0].agent.clone(),
                claims: rs.len(),
                premature: rs.iter().filter(|r| r.premature).count(),
                blocks_before_acceptance: accepted.map(|i| rs[..i].iter().filter(|r| r.decision == "block").count()),
                first_geomean: first,
                accepted_geomean: acc,
                gain_after_first_claim: gain.as_ref().ok().map(|g| g.2),
                gain_from_stop_attempt: gain.as_ref().ok().map(|g| g.0),
                gain_from_geomean: gain.as_ref().ok().map(|g| g.1),
                no_gain_reason: gain.err(),
                ended: if accepted.is_some() {
                    "accepted".into()
                } else if budget_sessions.contains(&sid) {
                    "stopped_by_budget".into()
                } else {
                    "open".into()
                },
            }
        })
        .collect()
}

/// A session's gain, as (the claim it starts from, that claim's geomean,
/// the relative gain to the accepted claim), or why there is none. It
/// starts at the first claim judged on a correct evaluation: a wrong
/// kernel's speed is no progress, so neither is what follows from it. A
/// session whose claims before the accepted one were all incorrect has no
/// gain (the accepted claim is no starting point for itself, unless it is
/// the session's first).
fn gain_of(rs: &[&ClaimRecord], accepted: Option<usize>) -> Result<(i64, f64, f64), String> {
    let Some(acc) = accepted else {
        return Err("no claim was accepted".into());
    };
    let Some(a) = rs[acc].geomean_speedup else {
        return Err("the accepted claim has no geometric mean".into());
    };
    let judged = |r: &&&ClaimRecord| r.geomean_speedup.is_some() && r.incorrect.is_none();
    let start = if acc == 0 { Some(&rs[0]) } else { rs[..acc].iter().find(judged) };
    let Some(start) = start else {
        let wrong = rs[..acc].iter().filter(|r| r.incorrect.is_some()).count();
        return Err(format!(
            "no claim before the accepted one was judged on a correct evaluation ({wrong} of {acc} incorrect): incorrect results are never progress"
        ));
    };
    match start.geomean_speedup {
        Some(f) if f > 0.0 => Ok((start.stop_attempt, f, a / f - 1.0)),
        _ => Err(format!("the first correct claim (stop attempt {}) has no positive geometric mean", start.stop_attempt)),
    }
}

fn agents_of(records: &[ClaimRecord], sessions: &[SessionOutcome]) -> Vec<AgentSummary> {
    let mut agents: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for r in records {
        let e = agents.entry(r.agent.clone()).or_default();
        e.0 += 1;
        e.1 += r.premature as usize;
    }
    agents
        .into_iter()
        .map(|(agent, (claims, premature))| AgentSummary {
            mean_gain_after_premature: mean(
                sessions
                    .iter()
                    .filter(|s| s.agent == agent && s.premature > 0)
                    .filter_map(|s| s.gain_after_first_claim),
            ),
            agent,
            claims,
            premature,
            premature_rate: rate(premature, claims),
        })
        .collect()
}

fn pct(x: Option<f64>) -> String {
    x.map_or("-".into(), |g| format!("{:+.1}%", g * 100.0))
}

fn md_cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// The campaign audit for a person, in Markdown.
pub fn campaign_markdown(a: &CampaignAudit) -> String {
    let mut out = format!("# Audit of campaign {}\n\n", a.campaign);
    out.push_str(&format!(
        "{} completion claims, {} premature ({:.0}%); mean gain won after premature claims: {}.\n\n",
        a.claims,
        a.premature,
        a.premature_rate * 100.0,
        pct(a.mean_gain_after_premature)
    ));
    if !a.limits_accepted.is_empty() {
        out.push_str(&format!(
            "{} limits accepted by a person (not completions, not successes):\n\n",
            a.limits_accepted.len()
        ));
        for l in &a.limits_accepted {
            out.push_str(&format!(
                "- claim {}: accepted by {} at {} (geomean then {}, predicate {}): {} (evidence: {}; stops let through: {})\n",
                l.claim_id,
                md_cell(&l.by),
                l.accepted_at,
                l.geomean_speedup.map_or("-".into(), |g| format!("{g:.2}x")),
                match l.holds {
                    Some(true) => "held",
                    Some(false) => "failed",
                    None => "not evaluated",
                },
                md_cell(&l.why),
                if l.evidence.is_empty() { "none".to_string() } else { l.evidence.join(", ") },
                l.stops.len()
            ));
        }
        out.push('\n');
    }
    out.push_str("| agent | claims | premature | rate | gain after premature |\n|---|---|---|---|---|\n");
    for g in &a.agents {
        out.push_str(&format!(
            "| {} | {} | {} | {:.0}% | {} |\n",
            g.agent,
            g.claims,
            g.premature,
            g.premature_rate * 100.0,
            pct(g.mean_gain_after_premature)
        ));
    }
    out.push_str("\n## Sessions\n\n| session | agent | claims | blocks before acceptance | gain from (first correct claim) | accepted geomean | gain | ended |\n|---|---|---|---|---|---|---|---|\n");
    for s in &a.sessions {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} |\n",
            md_cell(s.session_id.as_deref().unwrap_or("-")),
            s.agent,
            s.claims,
            s.blocks_before_acceptance.map_or("-".into(), |b| b.to_string()),
            s.gain_from_geomean.map_or("-".into(), |g| format!("{g:.2}x")),
            s.accepted_geomean.map_or("-".into(), |g| format!("{g:.2}x")),
            match (&s.gain_after_first_claim, &s.no_gain_reason) {
                (None, Some(why)) => format!("- ({})", md_cell(why)),
                (g, _) => pct(*g),
            },
            s.ended
        ));
    }
    if let Some(sp) = a.spend.as_ref().filter(|sp| sp.sessions.as_array().is_some_and(|s| !s.is_empty())) {
        let figures = |f: &Value| {
            format!(
                "{} tokens ({} in, {} out) | {}",
                crate::spend::tokens_text(f["tokens"].as_u64().unwrap_or(0)),
                crate::spend::tokens_text(f["input_tokens"].as_u64().unwrap_or(0)),
                crate::spend::tokens_text(f["output_tokens"].as_u64().unwrap_or(0)),
                crate::spend::cost_text(f["cost_usd"].as_f64())
            )
        };
        out.push_str(&format!(
            "\n## Spend\n\nThe campaign: {}.\n\n{}\n\n",
            figures(&sp.campaign).replace(" | ", ", "),
            sp.note
        ));
        out.push_str("| session | run | tokens | cost |\n|---|---|---|---|\n");
        for s in sp.sessions.as_array().into_iter().flatten() {
            out.push_str(&format!(
                "| {} | {} | {} |\n",
                md_cell(s["session_id"].as_str().unwrap_or("-")),
                s["run_id"].as_i64().map_or("-".into(), |r| r.to_string()),
                figures(s)
            ));
        }
    }
    out.push_str("\n## Claims\n\n| # | time | session | decision | geomean | failing scenarios | claim | question |\n|---|---|---|---|---|---|---|---|\n");
    for r in &a.records {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.stop_attempt,
            r.created_at,
            md_cell(r.session_id.as_deref().unwrap_or("-")),
            r.decision,
            match (r.geomean_speedup, r.geomean_compare_speedup) {
                (Some(g), Some(c)) => format!("{g:.2}x ({c:.2}x vs comparison)"),
                (g, _) => g.map_or("-".into(), |g| format!("{g:.2}x")),
            },
            md_cell(
                &r.failing
                    .iter()
                    .map(|f| format!("{} ({})", f.scenario, f.reasons.join("; ")))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            md_cell(r.claim.as_deref().unwrap_or("")),
            md_cell(r.question.as_deref().unwrap_or("")),
        ));
    }
    out
}

/// The offline audit for a person, in Markdown.
pub fn transcript_markdown(r: &transcript::Report) -> String {
    let mut out = format!("# Audit of {}\n\nFormat {}, {} lines, {} steps. ", r.file, r.format, r.lines, r.steps);
    out.push_str(&format!(
        "{} completion claims: {} supported, {} unverified, {} contradicted.\n\n",
        r.claims.len(),
        r.supported,
        r.unverified,
        r.contradicted
    ));
    out.push_str("| line | message | verdict | claim | why | evidence |\n|---|---|---|---|---|---|\n");
    for c in &r.claims {
        let ev: Vec<String> =
            c.evidence.iter().skip(1).map(|e| format!("{} {} (line {}): {}", e.kind, e.id, e.line, e.quote)).collect();
        out.push_str(&format!(
            "| {} | {} | {:?} | {} | {} | {} |\n",
            c.line,
            c.id,
            c.verdict,
            md_cell(&c.quote),
            md_cell(&c.why),
            md_cell(&ev.join("; "))
        ));
    }
    if !r.problems.is_empty() {
        out.push_str("\n## Lines that could not be read\n\n");
        for p in &r.problems {
            out.push_str(&format!("- {p}\n"));
        }
    }
    out
}

/// A minimal, self-contained HTML rendering of a Markdown report's tables.
pub fn html(title: &str, markdown: &str) -> String {
    let esc = crate::html::escape;
    let mut body = String::new();
    let mut in_table = false;
    for line in markdown.lines() {
        if line.starts_with('|') {
            if line.starts_with("|---") {
                continue;
            }
            let cells: Vec<String> = split_cells(line).iter().map(|c| esc(c)).collect();
            if !in_table {
                body.push_str("<table><tr>");
                body.push_str(&cells.iter().map(|c| format!("<th>{c}</th>")).collect::<String>());
                body.push_str("</tr>");
                in_table = true;
            } else {
                let class = if cells.iter().any(|c| c == "block" || c == "Contradicted") {
                    " class=\"fail\""
                } else if cells.iter().any(|c| c == "allow" || c == "Supported") {
                    " class=\"pass\""
                } else {
                    ""
                };
                body.push_str(&format!(
                    "<tr{class}>{}</tr>",
                    cells.iter().map(|c| format!("<td>{c}</td>")).collect::<String>()
                ));
            }
            continue;
        }
        if in_table {
            body.push_str("</table>");
            in_table = false;
        }
        if let Some(h) = line.strip_prefix("## ") {
            body.push_str(&format!("<h2>{}</h2>", esc(h)));
        } else if let Some(h) = line.strip_prefix("# ") {
            body.push_str(&format!("<h1>{}</h1>", esc(h)));
        } else if let Some(item) = line.strip_prefix("- ") {
            body.push_str(&format!("<li>{}</li>", esc(item)));
        } else if !line.trim().is_empty() {
            body.push_str(&format!("<p>{}</p>", esc(line)));
        }
    }
    if in_table {
        body.push_str("</table>");
    }
    format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{}</title><style>body{{font:14px system-ui,sans-serif;margin:2em}}table{{border-collapse:collapse;margin:1em 0}}td,th{{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}}.pass{{background:#e6f4e6}}.fail{{background:#fbe4e4}}</style></head><body>{body}</body></html>",
        esc(title)
    )
}

fn split_cells(line: &str) -> Vec<String> {
    let inner = line.trim().trim_start_matches('|').trim_end_matches('|');
    let mut cells = Vec::new();
    let mut cur = String::new();
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' && chars.peek() == Some(&'|') {
            cur.push('|');
            chars.next();
        } else if c == '|' {
            cells.push(cur.trim().to_string());
            cur.clear();
        } else {
            cur.push(c);
        }
    }
    cells.push(cur.trim().to_string());
    cells
}

/// JSON value of a campaign audit (what `--json` prints).
pub fn campaign_json(a: &CampaignAudit) -> Value {
    serde_json::to_value(a).unwrap_or(Value::Null)
}
