//! `gadfly run`: start a run and follow its events.

use std::process::ExitCode;
use std::time::Duration;

use serde_json::json;

use super::client;

/// Starts a run and, unless `detach`, prints its events until it ends.
pub(super) async fn follow_run(
    id: &str,
    agent: crate::agent::AgentKind,
    detach: bool,
    force: bool,
) -> anyhow::Result<ExitCode> {
    let c = client(Duration::from_secs(60))?;
    let mut after = c
        .get(&format!("/campaigns/{id}/log?tail=1"))
        .await?
        .as_array()
        .and_then(|a| a.last().and_then(|e| e["id"].as_i64()))
        .unwrap_or(0);
    let started = c.post(&format!("/campaigns/{id}/runs"), &json!({"agent": agent.as_str(), "force": force})).await?;
    let run_id = started["run_id"].as_i64().unwrap_or(0);
    // Named by its place in the campaign (issue #49); stdout keeps the id.
    let run_name = match started["run_number"].as_i64() {
        Some(n) => format!("run {n} (id {run_id})"),
        None => format!("run id {run_id}"),
    };
    eprintln!("{run_name}: {} started in campaign {id}", agent.as_str());
    if detach {
        println!("{run_id}");
        return Ok(ExitCode::SUCCESS);
    }
    loop {
        let events = c.get(&format!("/campaigns/{id}/log?after={after}&limit=500")).await?;
        for e in events.as_array().into_iter().flatten() {
            after = e["id"].as_i64().unwrap_or(after);
            let p = &e["payload"];
            use crate::events::kind as k;
            let line = match e["kind"].as_str().unwrap_or("") {
                k::AGENT_MESSAGE => format!("agent: {}", p["text"].as_str().unwrap_or("")),
                k::AGENT_TOOL_CALL => format!("tool: {} {}", p["name"].as_str().unwrap_or(""), p["input"]),
                k::DECISION => format!(
                    "gadfly: {} (predicate {})",
                    p["decision"].as_str().unwrap_or(""),
                    if p["holds"] == true { "holds" } else { "fails" }
                ),
                k::QUESTION_DELIVERED => {
                    format!("question ({}): {}", p["via"].as_str().unwrap_or(""), p["text"].as_str().unwrap_or(""))
                }
                k::REDTEAM_ATTACK => format!(
                    "red team: {} {}",
                    p["name"].as_str().unwrap_or(""),
                    match p["result"].as_str().unwrap_or("") {
                        "broken" => "BROKEN",
                        "not_applicable" => "not applicable",
                        other => other,
                    }
                ),
                k::RUN_ENDED if p["run_id"].as_i64() == Some(run_id) => {
                    println!("{run_name} ended: {}", p["detail"].as_str().unwrap_or(""));
                    return Ok(if p["outcome"] == "completed" { ExitCode::SUCCESS } else { ExitCode::from(1) });
                }
                _ => continue,
            };
            println!("{line}");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
