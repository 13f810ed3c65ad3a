//! `gadfly campaign ...` and the rendering of a verdict.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use serde_json::{json, Value};

use super::{client, CampaignCommand};

pub(super) async fn campaign(c: CampaignCommand) -> anyhow::Result<ExitCode> {
    match c {
        CampaignCommand::Create { file, no_calibrate } => {
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
            if no_calibrate || !spec.calibration.at_create {
                eprintln!("not calibrated (calibrate before an agent starts: gadfly calibrate {id})");
                return Ok(ExitCode::SUCCESS);
            }
            let runs = spec.calibration.runs;
            eprintln!(
                "calibrating the harness: the initial kernel against itself, {runs} runs ([calibration] at_create = false \
                 skips this)"
            );
            let c = client(Duration::from_secs(24 * 3600))?
                .post(&format!("/campaigns/{id}/calibrate?runs={runs}"), &json!({}))
                .await?;
            eprintln!("{}", c["summary"].as_str().unwrap_or(""));
            if c["fair"].as_bool() == Some(true) {
                eprintln!("fair: every scenario is 1.00x against itself within its noise");
            } else if spec.calibration.accept_bias {
                eprintln!("NOT FAIR, accepted by the spec ([calibration] accept_bias = true)");
            } else {
                eprintln!(
                    "NOT FAIR: `gadfly run {id}` refuses to start an agent until the harness is fixed and `gadfly \
                     calibrate {id}` finds it fair (or the spec accepts it: [calibration] accept_bias = true)"
                );
            }
        }
        CampaignCommand::List { json, archived } => {
            let all = client(Duration::from_secs(30))?.get("/campaigns").await?;
            let (list, hidden) = unless_archived(all, archived);
            if json {
                println!("{}", serde_json::to_string_pretty(&list)?);
            } else {
                println!(
                    "{:<28} {:<10} {:<17} {:<10} {:>8} {:>8}  worst",
                    "id", "mode", "status", "predicate", "geomean", "best"
                );
                for c in list.as_array().into_iter().flatten() {
                    // The workspace's latest verdict; the figures of an incorrect
                    // evaluation are no result, not shown as one: the note says why.
                    let counts = c["incorrect"].as_bool() != Some(true);
                    println!(
                        "{:<28} {:<10} {:<17} {:<10} {:>8} {:>8}  {}{}",
                        c["id"].as_str().unwrap_or(""),
                        c["mode"].as_str().unwrap_or(""),
                        state_of(c),
                        match c["holds"].as_bool() {
                            Some(true) => "holds",
                            Some(false) => "fails",
                            None => "-",
                        },
                        c["geomean_speedup"].as_f64().filter(|_| counts).map_or("-".into(), |g| format!("{g:.2}x")),
                        c["best_geomean_speedup"].as_f64().map_or("-".into(), |g| format!("{g:.2}x")),
                        match (c["worst_scenario"].as_str(), c["worst_speedup"].as_f64().filter(|_| counts)) {
                            (Some(s), Some(w)) => format!("{s} {w:.2}x"),
                            _ => "-".into(),
                        },
                        c["geomean_note"].as_str().map(|n| format!("  ({n})")).unwrap_or_default()
                    );
                }
            }
            if hidden > 0 {
                eprintln!(
                    "{hidden} archived campaign{} not listed (--archived lists them)",
                    if hidden == 1 { "" } else { "s" }
                );
            }
        }
        CampaignCommand::Archive { id } => {
            let v = client(Duration::from_secs(30))?.post(&format!("/campaigns/{id}/archive"), &json!({})).await?;
            println!(
                "campaign {id} archived at {}: the lists hide it (`gadfly campaign unarchive {id}` shows it again); \
                 its events, evaluations, stop attempts and questions are kept, and its hooks still answer",
                v["archived_at"].as_str().unwrap_or("?")
            );
        }
        CampaignCommand::Unarchive { id } => {
            client(Duration::from_secs(30))?.post(&format!("/campaigns/{id}/unarchive"), &json!({})).await?;
            println!("campaign {id} unarchived: the lists show it again");
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
                    state_of(&d)
                );
                if let Some(detail) = d["state_detail"].as_str() {
                    println!("  {detail}");
                }
                if let Some(at) = d["archived_at"].as_str() {
                    println!(
                        "archived at {at} (`gadfly campaign unarchive {}` lists it again)",
                        d["id"].as_str().unwrap_or("")
                    );
                }
                if let Some(agent) = d["attached"]["agent"].as_str() {
                    println!("{}", attached_line(agent, &d["attached"]));
                }
                println!("workspace {}", d["spec"]["workspace"].as_str().unwrap_or(""));
                println!("goal: {}", d["spec"]["goal"].as_str().unwrap_or(""));
                let counted = |n: u64, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
                println!(
                    "{}, {}, {}",
                    counted(d["evaluations"].as_u64().unwrap_or(0), "evaluation", "evaluations"),
                    counted(d["stop_attempts"].as_array().map_or(0, Vec::len) as u64, "stop attempt", "stop attempts"),
                    counted(d["events"].as_u64().unwrap_or(0), "event", "events"),
                );
                if d["latest_evaluation"].is_object() {
                    print!("{}", render_evaluation(&d["latest_evaluation"]));
                }
                // Numbers per campaign (issue #49); the API's global id in brackets.
                match (d["best_geomean_speedup"].as_f64(), d["best_evaluation_number"].as_i64()) {
                    (Some(b), Some(n)) => println!(
                        "best {b:.2}x (evaluation {n}, id {}), over the correct evaluations",
                        d["best_evaluation_id"]
                    ),
                    _ if d["evaluations"].as_i64().unwrap_or(0) > 0 => {
                        println!("best -: no correct evaluation of the workspace yet")
                    }
                    _ => {}
                }
                let questions = d["questions"].as_array().cloned().unwrap_or_default();
                if !questions.is_empty() {
                    println!("questions:");
                    for (n, q) in questions.iter().enumerate() {
                        let status = match (q["status"].as_str(), q["delivered_at"].as_str()) {
                            (Some("delivered"), Some(at)) => {
                                format!("delivered {at} via {}", q["delivered_via"].as_str().unwrap_or("?"))
                            }
                            (Some("expired"), _) => {
                                format!("expired, never asked: {}", q["expired_reason"].as_str().unwrap_or("?"))
                            }
                            (Some(s), _) => s.to_string(),
                            _ => "?".into(),
                        };
                        // `id` is what `gadfly answer` takes.
                        println!(
                            "  {} (id {}) [{}{}] {} ({status})",
                            n + 1,
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

/// The campaigns to list: all with `archived`, else those not archived,
/// and how many were left out.
fn unless_archived(list: Value, archived: bool) -> (Value, usize) {
    let all = list.as_array().cloned().unwrap_or_default();
    let n = all.len();
    let shown: Vec<Value> = all.into_iter().filter(|c| archived || c["archived_at"].is_null()).collect();
    let hidden = n - shown.len();
    (Value::Array(shown), hidden)
}

/// A campaign's status as the CLI prints it: "archived", else where its
/// agent stands (`state`: active, running, done, stopped_by_budget,
/// stopped, failed), else the stored status of a daemon without it.
fn state_of(c: &Value) -> &str {
    if !c["archived_at"].is_null() {
        return "archived";
    }
    c["state"].as_str().or(c["status"].as_str()).unwrap_or("")
}

/// The attached agent session, for `campaign show`.
fn attached_line(agent: &str, a: &Value) -> String {
    let mut line = format!("agent {agent}");
    if let Some(s) = a["session_id"].as_str() {
        line.push_str(&format!(", session {s}"));
    }
    match (a["via"].as_str(), a["seen_at"].as_str()) {
        (Some("run"), Some(at)) => line.push_str(&format!(" (a run gadfly started at {at})")),
        (_, Some(at)) => line.push_str(&format!(" (last hook call {at})")),
        _ => line.push_str(" (hooks attached, no call yet)"),
    }
    line
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
        match (e["geomean_speedup"].as_f64(), e["incorrect_reason"].as_str()) {
            (Some(g), Some(why)) => format!("{g:.2}x does not count: {why}"),
            (g, _) => g.map_or("-".into(), |g| format!("{g:.2}x")),
        },
        match (e["worst_scenario"].as_str(), e["worst_speedup"].as_f64()) {
            (Some(s), Some(w)) => format!("{s} {w:.2}x"),
            _ => "-".into(),
        }
    ));
    // The evaluation failed (nothing measured), or it ran and the predicate
    // does not hold: said apart, as the console says it (issue #49).
    let failures: Vec<&str> = e["failures"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    let (predicate, evaluation): (Vec<&str>, Vec<&str>) =
        failures.into_iter().partition(|f| crate::evaluation::is_predicate_failure(f));
    if !evaluation.is_empty() {
        out.push_str("the evaluation failed (no result):\n");
        for f in &evaluation {
            out.push_str(&format!("- {f}\n"));
        }
    }
    if !predicate.is_empty() {
        out.push_str(if evaluation.is_empty() {
            "it ran; the predicate does not hold:\n"
        } else {
            "and so the predicate does not hold:\n"
        });
        for f in &predicate {
            out.push_str(&format!("- {f}\n"));
        }
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

/// `gadfly example DIR`: the qr-cpu example, or with `--harness LANG` a
/// hardened harness template (`crate::templates`), written into DIR (new
/// or empty); prints the spec's path.
pub(super) fn example(dir: &std::path::Path, harness: Option<&str>) -> anyhow::Result<ExitCode> {
    if std::fs::read_dir(dir).is_ok_and(|mut d| d.next().is_some()) {
        anyhow::bail!("{} is not empty: name a new folder for the example", dir.display());
    }
    let spec = match harness {
        Some(lang) => {
            let spec = crate::templates::materialize(lang, dir)?;
            eprintln!(
                "the {lang} harness template is in {}: its checklist is docs/HARNESS.md; adapt the kernel and the \
                 reference, then red-team and calibrate it (gadfly redteam, gadfly calibrate)",
                dir.display()
            );
            spec
        }
        None => {
            let spec = crate::demo::materialize_example(dir)?;
            eprintln!(
                "the qr-cpu example is in {}: a git workspace with the initial kernel (kernel/qr.c) and the CPU \
                 harness (harness/cpu)",
                dir.display()
            );
            spec
        }
    };
    let spec = std::fs::canonicalize(&spec).unwrap_or(spec);
    eprintln!("next: gadfly campaign create {}", spec.display());
    println!("{}", spec.display());
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::render_evaluation;
    use serde_json::json;

    /// Issue #49: the CLI says "the evaluation failed" only when nothing was
    /// measured, and names a predicate that does not hold as such.
    #[test]
    fn an_evaluation_that_failed_and_a_predicate_that_does_not_hold_are_told_apart() {
        let ran = json!({"tree": "t1", "holds": false, "scenarios": [],
            "failures": ["geometric mean speedup 1.11x < 1.50x"]});
        let text = render_evaluation(&ran);
        assert!(
            text.contains("it ran; the predicate does not hold:\n- geometric mean speedup 1.11x < 1.50x"),
            "{text}"
        );
        assert!(!text.contains("evaluation failed"), "{text}");
        let broke = json!({"tree": "t2", "holds": false, "scenarios": [],
            "failures": ["build exited with status 2", "geometric mean speedup unknown (0 of 3 scenarios measured); it must reach 1.50x"]});
        let text = render_evaluation(&broke);
        assert!(text.contains("the evaluation failed (no result):\n- build exited with status 2\n"), "{text}");
        assert!(text.contains("and so the predicate does not hold:\n- geometric mean speedup unknown"), "{text}");
    }
}
