//! The JSON of `GET /api/v1/campaigns` and `GET /api/v1/campaigns/{id}`
//! (what `campaign list|show` print), shared by the API and the plain
//! pages of `pages`.

use serde_json::{json, Value};

use crate::evaluation::Evaluation;
use crate::app::Supervisor;

use super::ApiError;

async fn latest_evaluation(s: &Supervisor, id: &str) -> anyhow::Result<Option<Evaluation>> {
    // One row, not every evaluation of the campaign: the list page asks this per campaign.
    // One that does not decode is shown as none (warned about once), as it always was.
    s.store().skip_corrupt(s.store().latest_evaluation(id).await)
}

pub async fn campaign_summaries(s: &Supervisor) -> anyhow::Result<Vec<Value>> {
    let mut out = Vec::new();
    for c in s.store().list_campaigns().await? {
        let latest = latest_evaluation(s, &c.id).await?;
        let stops = s.store().list_stop_attempts(&c.id).await?;
        let series = s.store().evaluation_series(&c.id).await?;
        let best = series.iter().filter_map(|e| e.3).fold(None, |a: Option<f64>, g| Some(a.map_or(g, |a| a.max(g))));
        let recent: Vec<Option<f64>> = series.iter().rev().take(50).rev().map(|e| e.3).collect();
        let last_event = s.store().tail_events(&c.id, 1).await?.pop();
        // A spec that does not decode shows no agent, as it always did (warned about once).
        let spec = s.store().skip_corrupt(c.spec().map(Some))?;
        let agent = spec.and_then(|spec| spec.extra.get("agent").map(|a| a["kind"].clone())).unwrap_or_default();
        out.push(json!({
            "agent": agent,
            "best_geomean_speedup": best,
            "geomean_series": recent,
            "last_event": last_event.map(|e| json!({"id": e.id, "kind": e.kind, "created_at": e.created_at})),
            "id": c.id,
            "name": c.name,
            "mode": c.mode,
            "status": c.status,
            "created_at": c.created_at,
            "evaluations": s.store().count_evaluations(&c.id).await?,
            "holds": latest.as_ref().map(|e| e.verdict.holds),
            "geomean_speedup": latest.as_ref().and_then(|e| e.verdict.geomean_speedup),
            "worst_scenario": latest.as_ref().and_then(|e| e.verdict.worst_scenario.clone()),
            "worst_speedup": latest.as_ref().and_then(|e| e.verdict.worst_speedup),
            "stop_attempts": stops.len(),
            "last_decision": stops.last().map(|st| st.decision.clone()),
        }));
    }
    Ok(out)
}

pub async fn campaign_detail(s: &Supervisor, id: &str) -> Result<Value, ApiError> {
    let (row, spec) = s.campaign(id).await?;
    let latest = latest_evaluation(s, id).await?;
    let stops = s.store().list_stop_attempts(id).await?;
    let questions = s.store().list_questions(id, false).await?;
    Ok(json!({
        "id": row.id,
        "name": row.name,
        "mode": row.mode,
        "status": row.status,
        "created_at": row.created_at,
        "spec_path": row.spec_path,
        "spec": spec,
        "evaluations": s.store().count_evaluations(id).await?,
        "events": s.store().count_events(id).await?,
        "latest_evaluation": latest,
        "stop_attempts": stops,
        "questions": questions,
    }))
}
