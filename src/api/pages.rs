//! Plain server-rendered pages (no script, no network): the console's
//! fallback when web/index.html is absent (see `web`), and the login form.

use axum::extract::{Path, State};
use axum::response::{Html, IntoResponse, Response};
use serde_json::Value;

use crate::html::escape;

use super::views::{campaign_detail, campaign_summaries};
use super::{ApiError, AppState};

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
            // Where the agent stands (`state`), marked when archived.
            status = escape(&format!(
                "{}{}",
                c["state"].as_str().or(c["status"].as_str()).unwrap_or(""),
                if c["archived_at"].is_null() { "" } else { " (archived)" }
            )),
            geo = match (c["geomean_speedup"].as_f64(), c["incorrect_reason"].as_str()) {
                (Some(g), Some(why)) => format!("{g:.2}x does not count: {}", escape(why)),
                (g, _) => g.map_or("-".into(), |g| format!("{g:.2}x")),
            },
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
