//! What the console and `campaign list|show` display: campaign summaries
//! and details as JSON, and plain server-rendered pages (no script, no
//! network) until the full web console lands.

use axum::extract::{Path, State};
use axum::response::{Html, IntoResponse, Response};
use serde_json::{json, Value};

use crate::evaluation::Evaluation;
use crate::html::escape;
use crate::server::{ApiError, AppState};
use crate::supervisor::Supervisor;

async fn latest_evaluation(s: &Supervisor, id: &str) -> anyhow::Result<Option<Evaluation>> {
    // One row, not every evaluation of the campaign: the list page asks this per campaign.
    Ok(s.store().latest_evaluation(id).await?.and_then(|(eid, body)| {
        let mut e: Evaluation = serde_json::from_str(&body).ok()?;
        e.id = Some(eid);
        Some(e)
    }))
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
        let spec: serde_json::Value = serde_json::from_str(&c.spec_json).unwrap_or_default();
        out.push(json!({
            "agent": spec["extra"]["agent"]["kind"],
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

const STYLE: &str = "body{font:14px system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}.pass{background:#e6f4e6}.fail{background:#fbe4e4}pre{white-space:pre-wrap;background:#f6f6f6;padding:8px}";

fn page(title: &str, body: &str) -> String {
    format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{} · gadfly</title><style>{STYLE}</style></head><body>{body}</body></html>",
        escape(title)
    )
}

pub fn login_form(error: Option<&str>) -> String {
    let err = error.map_or(String::new(), |e| format!("<p class=\"fail\">{}</p>", escape(e)));
    page(
        "log in",
        &format!(
            "<h1>gadfly</h1>{err}<form method=\"post\" action=\"/login\"><label>API token (in DATA_DIR/token): <input name=\"token\" type=\"password\" autofocus></label> <button>Log in</button></form>"
        ),
    )
}

pub async fn campaigns_page(State(state): State<AppState>) -> Response {
    let list = match campaign_summaries(&state.supervisor).await {
        Ok(l) => l,
        Err(e) => return ApiError::Internal(e).into_response(),
    };
    let mut rows = String::new();
    for c in &list {
        let holds = match c["holds"].as_bool() {
            Some(true) => "<td class=\"pass\">holds</td>",
            Some(false) => "<td class=\"fail\">fails</td>",
            None => "<td>not evaluated</td>",
        };
        rows.push_str(&format!(
            "<tr><td><a href=\"/campaigns/{id}\">{id}</a></td><td>{mode}</td><td>{status}</td>{holds}<td>{geo}</td><td>{worst}</td><td>{stops}</td><td>{last}</td></tr>",
            id = escape(c["id"].as_str().unwrap_or("")),
            mode = escape(c["mode"].as_str().unwrap_or("")),
            status = escape(c["status"].as_str().unwrap_or("")),
            geo = c["geomean_speedup"].as_f64().map_or("-".into(), |g| format!("{g:.2}x")),
            worst = match (c["worst_scenario"].as_str(), c["worst_speedup"].as_f64()) {
                (Some(s), Some(w)) => format!("{} {w:.2}x", escape(s)),
                _ => "-".into(),
            },
            stops = c["stop_attempts"],
            last = escape(c["last_decision"].as_str().unwrap_or("-")),
        ));
    }
    Html(page(
        "campaigns",
        &format!("<h1>Campaigns</h1><table><tr><th>campaign</th><th>mode</th><th>status</th><th>predicate</th><th>geomean</th><th>worst</th><th>stop attempts</th><th>last decision</th></tr>{rows}</table>"),
    ))
    .into_response()
}

pub async fn campaign_page(State(state): State<AppState>, Path(id): Path<String>) -> Response {
    let detail = match campaign_detail(&state.supervisor, &id).await {
        Ok(d) => d,
        Err(e) => return e.into_response(),
    };
    let mut body = format!("<p><a href=\"/\">all campaigns</a></p><h1>{}</h1>", escape(&id));
    if let Some(e) = detail["latest_evaluation"].as_object() {
        body.push_str(&format!(
            "<h2>Latest evaluation: the predicate {}</h2><table><tr><th>scenario</th><th>correct</th><th>err vs ref</th><th>err vs high precision</th><th>time us</th><th>baseline us</th><th>speedup</th><th>reasons</th></tr>",
            if e["holds"].as_bool() == Some(true) { "holds" } else { "fails" }
        ));
        for s in e["scenarios"].as_array().into_iter().flatten() {
            let m = &s["measured"];
            let num = |v: &Value, f: fn(f64) -> String| v.as_f64().map_or("-".to_string(), f);
            body.push_str(&format!(
                "<tr class=\"{}\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                if s["passes"].as_bool() == Some(true) { "pass" } else { "fail" },
                escape(s["scenario"].as_str().unwrap_or("")),
                s["correct"],
                num(&m["max_abs_err_ref"], |x| format!("{x:.2e}")),
                num(&m["max_abs_err_hi"], |x| format!("{x:.2e}")),
                num(&m["time_us"], |x| format!("{x:.1}")),
                num(&m["baseline_us"], |x| format!("{x:.1}")),
                num(&s["speedup"], |x| format!("{x:.2}x")),
                escape(&s["reasons"].as_array().map(|r| r.iter().filter_map(Value::as_str).collect::<Vec<_>>().join("; ")).unwrap_or_default()),
            ));
        }
        body.push_str("</table>");
    }
    body.push_str("<h2>Stop attempts</h2><table><tr><th>#</th><th>time</th><th>session</th><th>decision</th><th>claim</th><th>reason</th></tr>");
    for st in detail["stop_attempts"].as_array().into_iter().flatten() {
        body.push_str(&format!(
            "<tr class=\"{}\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td><pre>{}</pre></td></tr>",
            if st["decision"] == "block" { "fail" } else { "pass" },
            st["id"],
            escape(st["created_at"].as_str().unwrap_or("")),
            escape(st["session_id"].as_str().unwrap_or("-")),
            escape(st["decision"].as_str().unwrap_or("")),
            escape(st["claim"].as_str().unwrap_or("")),
            escape(st["reason"].as_str().unwrap_or("")),
        ));
    }
    body.push_str("</table>");
    Html(page(&id, &body)).into_response()
}
