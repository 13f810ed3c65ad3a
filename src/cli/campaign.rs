//! `gadfly campaign ...` and the rendering of a verdict.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use serde_json::{json, Value};

use super::{client, CampaignCommand};

pub(super) async fn campaign(c: CampaignCommand) -> anyhow::Result<ExitCode> {
    match c {
        CampaignCommand::Create { file } => {
            // Validate here first: errors name this file, line and field.
            let spec = crate::campaign::load(&file)?;
            let path = std::fs::canonicalize(&file)?;
            let text = std::fs::read_to_string(&path)?;
            let created = client(Duration::from_secs(600))?
                .post("/campaigns", &json!({"spec_toml": text, "spec_path": path.display().to_string()}))
                .await?;
            let id = created["id"].as_str().context("the daemon returned no campaign id")?;
            eprintln!("created campaign {id} ({}, workspace {})", spec.name, spec.workspace.display());
            for w in crate::campaign::warnings(&spec) {
                eprintln!("warning: {w}");
            }
            println!("{id}");
        }
        CampaignCommand::List { json } => {
            let list = client(Duration::from_secs(30))?.get("/campaigns").await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&list)?);
            } else {
                println!("{:<28} {:<10} {:<8} {:<10} {:>8}  worst", "id", "mode", "status", "predicate", "geomean");
                for c in list.as_array().into_iter().flatten() {
                    println!(
                        "{:<28} {:<10} {:<8} {:<10} {:>8}  {}",
                        c["id"].as_str().unwrap_or(""),
                        c["mode"].as_str().unwrap_or(""),
                        c["status"].as_str().unwrap_or(""),
                        match c["holds"].as_bool() {
                            Some(true) => "holds",
                            Some(false) => "fails",
                            None => "-",
                        },
                        c["geomean_speedup"].as_f64().map_or("-".into(), |g| format!("{g:.2}x")),
                        match (c["worst_scenario"].as_str(), c["worst_speedup"].as_f64()) {
                            (Some(s), Some(w)) => format!("{s} {w:.2}x"),
                            _ => "-".into(),
                        }
                    );
                }
            }
        }
        CampaignCommand::Show { id, json } => {
            let d = client(Duration::from_secs(30))?.get(&format!("/campaigns/{id}")).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&d)?);
            } else {
                println!(
                    "campaign {} ({}), mode {}, status {}",
                    d["id"].as_str().unwrap_or(""),
                    d["name"].as_str().unwrap_or(""),
                    d["mode"].as_str().unwrap_or(""),
                    d["status"].as_str().unwrap_or("")
                );
                println!("workspace {}", d["spec"]["workspace"].as_str().unwrap_or(""));
                println!("goal: {}", d["spec"]["goal"].as_str().unwrap_or(""));
                println!(
                    "{} evaluations, {} stop attempts, {} events",
                    d["evaluations"],
                    d["stop_attempts"].as_array().map_or(0, Vec::len),
                    d["events"]
                );
                if d["latest_evaluation"].is_object() {
                    print!("{}", render_evaluation(&d["latest_evaluation"]));
                }
                let questions = d["questions"].as_array().cloned().unwrap_or_default();
                if !questions.is_empty() {
                    println!("questions:");
                    for q in questions {
                        let status = match (q["status"].as_str(), q["delivered_at"].as_str()) {
                            (Some("delivered"), Some(at)) => {
                                format!("delivered {at} via {}", q["delivered_via"].as_str().unwrap_or("?"))
                            }
                            (Some(s), _) => s.to_string(),
                            _ => "?".into(),
                        };
                        println!(
                            "  #{} [{}{}] {} ({status})",
                            q["id"],
                            q["source"].as_str().unwrap_or(""),
                            q["bank_id"].as_str().map(|b| format!(" {b}")).unwrap_or_default(),
                            q["text"].as_str().unwrap_or("")
                        );
                    }
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A verdict as a table for a terminal.
pub fn render_evaluation(e: &Value) -> String {
    let mut out = String::new();
    let scenarios = e["scenarios"].as_array().cloned().unwrap_or_default();
    let width = scenarios.iter().filter_map(|s| s["scenario"].as_str()).map(str::len).max().unwrap_or(8).max(8);
    out.push_str(&format!(
        "tree {}{}: the predicate {}\n",
        e["tree"].as_str().unwrap_or("?").chars().take(12).collect::<String>(),
        if e["cached"].as_bool() == Some(true) { " (cached)" } else { "" },
        if e["holds"].as_bool() == Some(true) { "HOLDS" } else { "FAILS" }
    ));
    out.push_str(&format!(
        "{:<width$} {:>7} {:>10} {:>10} {:>11} {:>11} {:>8}  result\n",
        "scenario", "correct", "err ref", "err hi", "time us", "baseline us", "speedup"
    ));
    for s in &scenarios {
        let m = &s["measured"];
        let f = |v: &Value, p: usize| v.as_f64().map_or("-".to_string(), |x| format!("{x:.p$}"));
        let e = |v: &Value| v.as_f64().map_or("-".to_string(), |x| format!("{x:.2e}"));
        out.push_str(&format!(
            "{:<width$} {:>7} {:>10} {:>10} {:>11} {:>11} {:>8}  {}\n",
            s["scenario"].as_str().unwrap_or(""),
            if s["present"].as_bool() == Some(false) {
                "-"
            } else if s["correct"].as_bool() == Some(true) {
                "yes"
            } else {
                "NO"
            },
            e(&m["max_abs_err_ref"]),
            e(&m["max_abs_err_hi"]),
            f(&m["time_us"], 1),
            f(&m["baseline_us"], 1),
            s["speedup"].as_f64().map_or("-".into(), |x| format!("{x:.2}x")),
            if s["passes"].as_bool() == Some(true) {
                "pass".to_string()
            } else {
                format!(
                    "FAIL: {}",
                    s["reasons"]
                        .as_array()
                        .map(|r| r.iter().filter_map(Value::as_str).collect::<Vec<_>>().join("; "))
                        .unwrap_or_default()
                )
            }
        ));
    }
    out.push_str(&format!(
        "geometric mean {}; worst {}\n",
        e["geomean_speedup"].as_f64().map_or("-".into(), |g| format!("{g:.2}x")),
        match (e["worst_scenario"].as_str(), e["worst_speedup"].as_f64()) {
            (Some(s), Some(w)) => format!("{s} {w:.2}x"),
            _ => "-".into(),
        }
    ));
    for f in e["failures"].as_array().into_iter().flatten() {
        out.push_str(&format!("- {}\n", f.as_str().unwrap_or("")));
    }
    out
}

pub(super) async fn workspace_of(id: &str) -> anyhow::Result<PathBuf> {
    let d = client(Duration::from_secs(30))?
        .get(&format!("/campaigns/{id}"))
        .await
        .context("finding the campaign's workspace (or pass --dir)")?;
    Ok(PathBuf::from(d["spec"]["workspace"].as_str().context("the campaign has no workspace")?))
}
