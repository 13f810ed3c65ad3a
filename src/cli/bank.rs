//! `gadfly bank lint|list|stats|export-stats|pick`: the question bank's
//! commands (entry code; the bank itself, `crate::bank`, is the domain's).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use serde_json::{json, Value};

use super::BankCommand;
use crate::bank::{load, Bank};
use crate::client::Client;

fn local_bank(dir: Option<PathBuf>) -> anyhow::Result<Bank> {
    match dir {
        Some(d) => load::load_dir(&d),
        None if Path::new("question_bank").is_dir() => load::load_dir(Path::new("question_bank")),
        None => Ok(crate::bank::embedded().clone()),
    }
}

pub(super) async fn run(cmd: BankCommand, client: fn(Duration) -> anyhow::Result<Client>) -> anyhow::Result<ExitCode> {
    match cmd {
        BankCommand::Lint { json, dir } => {
            let bank = local_bank(dir)?;
            let counts = load::counts(&bank.entries);
            let clean = bank.problems.is_empty() && bank.warnings.is_empty();
            if json {
                let out = json!({
                    "source": bank.source,
                    "ok": clean,
                    "counts": counts,
                    "problems": bank.problems,
                    "warnings": bank.warnings,
                });
                println!("{}", serde_json::to_string_pretty(&out)?);
            } else {
                println!("bank {}: {} entries", bank.source, counts.total);
                println!("by kind:   {}", join_counts(counts.by_kind.iter()));
                println!("by group:  {}", join_counts(counts.by_group.iter()));
                println!("core entries by moment: {}", join_counts(counts.core_by_moment.iter()));
                println!("kernel-specific entries: {}", counts.domain_specific);
                for p in bank.problems.iter().chain(&bank.warnings) {
                    println!("problem: {p}");
                }
                println!("{}", if clean { "ok" } else { "the bank has problems" });
            }
            Ok(if clean { ExitCode::SUCCESS } else { ExitCode::from(1) })
        }
        BankCommand::List { group, moment, json, dir } => {
            if let Some(m) = moment.as_deref().filter(|m| !crate::bank::MOMENTS.contains(m)) {
                anyhow::bail!("unknown moment `{m}`; expected one of {}", crate::bank::MOMENTS.join(", "));
            }
            let bank = local_bank(dir)?;
            let entries: Vec<&crate::bank::Entry> = bank
                .entries
                .iter()
                .filter(|e| group.as_ref().is_none_or(|g| &e.group == g))
                .filter(|e| moment.as_ref().is_none_or(|m| e.fits(m)))
                .collect();
            if json {
                println!("{}", serde_json::to_string_pretty(&entries)?);
            } else {
                for e in entries {
                    println!("{:<12} [{}] {}", e.id, e.moments.join(","), e.text);
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        BankCommand::Stats { json, replay, bank } => {
            let stats = if replay.is_empty() {
                client(Duration::from_secs(60))?.get("/bank/stats").await?
            } else {
                replay_stats(&replay, &local_bank(bank)?)?
            };
            if json {
                println!("{}", serde_json::to_string_pretty(&stats)?);
            } else {
                if !replay.is_empty() {
                    println!("{REPLAY_NOTE}\n");
                }
                print!("{}", stats_text(&stats));
            }
            Ok(ExitCode::SUCCESS)
        }
        BankCommand::Pick { moment, evidence, spec, seed, json, bank } => {
            let q = pick(&moment, evidence.as_deref(), spec.as_deref(), seed, bank)?;
            if json {
                println!("{}", serde_json::to_string(&q)?);
            } else {
                println!(
                    "{} ({}, {}):\n{}",
                    q["bank_id"].as_str().unwrap_or(""),
                    q["group"].as_str().unwrap_or(""),
                    moment,
                    q["text"].as_str().unwrap_or("")
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        BankCommand::ExportStats { file } => {
            let stats = client(Duration::from_secs(60))?.get("/bank/stats").await?;
            let text = export_toml(&stats);
            std::fs::write(&file, text).with_context(|| format!("writing {}", file.display()))?;
            eprintln!("wrote {} entries to {}", entries(&stats).count(), file.display());
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `gadfly bank stats --replay`: the figures and uplift of `/bank/stats`,
/// in its shape, learned from replay reports pooled, each a campaign of
/// its own (its `campaign`, else its file name; suffixed with the file's
/// place on the command line when two share one).
fn replay_stats(files: &[PathBuf], bank: &Bank) -> anyhow::Result<Value> {
    let mut reports = Vec::with_capacity(files.len());
    for path in files {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("cannot read replay report {}: {e}", path.display()))?;
        let report: Value = serde_json::from_str(&text)
            .map_err(|e| anyhow::anyhow!("replay report {}: not JSON: {e}", path.display()))?;
        let id = match report.get("campaign").and_then(Value::as_str) {
            Some(c) => c.to_string(),
            None => path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned()),
        };
        reports.push((path, report, id));
    }
    let mut history = crate::bank::learn::History::default();
    for (i, (path, report, id)) in reports.iter().enumerate() {
        let shared = reports.iter().filter(|(_, _, other)| other == id).count() > 1;
        let campaign = if shared { format!("{id}#{}", i + 1) } else { id.clone() };
        let h = crate::replay::learning::history_of(report, &campaign)
            .map_err(|e| anyhow::anyhow!("replay report {}: {e}", path.display()))?;
        history.asked.extend(h.asked);
        history.withheld.extend(h.withheld);
        history.evals.extend(h.evals);
    }
    let (mut stats, uplift) = crate::bank::learn::report(&history, bank);
    // Nobody read these questions: what followed them confirms nothing.
    for s in stats.values_mut() {
        s.status = "unverified".into();
    }
    Ok(crate::bank::learn::report_json(&stats, &uplift))
}

/// What `bank stats --replay` says first: its figures are a null
/// calibration, never evidence for an entry.
pub const REPLAY_NOTE: &str = "replayed logs: the agents in them never read gadfly's questions, so what followed a \
     question is chance. These figures are a null calibration (an uplift here should be near 0); they confirm no \
     entry (every status stays unverified).";

/// `gadfly bank pick`: the question the daemon would deliver at `moment`
/// for this evidence, chosen by the daemon's own code
/// (`gate::choose_question`) with nothing asked yet and no learned yield.
fn pick(
    moment: &str,
    evidence: Option<&Path>,
    spec: Option<&Path>,
    seed: u64,
    bank: Option<PathBuf>,
) -> anyhow::Result<Value> {
    use crate::bank::{evidence::Evidence, groups::groups_for, select};
    if !crate::bank::MOMENTS.contains(&moment) {
        anyhow::bail!("unknown moment `{moment}`; expected one of {}", crate::bank::MOMENTS.join(", "));
    }
    let evidence = match evidence {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| anyhow::anyhow!("cannot read evidence file {}: {e}", path.display()))?;
            let value: Value = serde_json::from_str(&text)
                .map_err(|e| anyhow::anyhow!("evidence file {}: not JSON: {e}", path.display()))?;
            Some(Evidence::from_json(&value).map_err(|e| anyhow::anyhow!("evidence file {}: {e}", path.display()))?)
        }
        None => None,
    };
    let spec = match spec {
        Some(path) => crate::campaign::load_detached(path)?,
        None => crate::campaign::parse_detached(
            "name = 'bank-pick'\nworkspace = '.'\n[harness]\nrun = 'true {results}'\nscenarios = ['default']\n",
            "(no spec)",
            Path::new("."),
        )?,
    };
    let bank = local_bank(bank)?;
    let stats = std::collections::HashMap::new();
    let req = select::Request {
        moment,
        spec: &spec,
        asked: &[],
        prefer: groups_for(moment),
        stats: &stats,
        seed,
        evidence: evidence.as_ref(),
    };
    let q = crate::gate::choose_question(&bank.entries, &req);
    let group = bank.get(&q.source).map_or("builtin", |e| e.group.as_str());
    Ok(json!({"bank_id": q.source, "group": group, "moment": q.moment, "text": q.text}))
}

fn join_counts<'a>(it: impl Iterator<Item = (&'a String, &'a usize)>) -> String {
    it.map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ")
}

/// The statistics as TOML, one `[[entry]]` per bank id, with the fields a
/// bank entry's provenance takes (`provenance`, `evidence`).
pub fn export_toml(stats: &Value) -> String {
    let mut out = String::from(
        "# Learned yield exported by `gadfly bank export-stats`. Merge `provenance` and\n# `evidence` into the entries of question_bank/ with the same id.\n",
    );
    for (id, s) in entries(stats) {
        let evidence: Vec<&str> = s["evidence"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
        let mut table = toml::Table::new();
        table.insert("id".into(), toml::Value::String(id.clone()));
        table.insert("asks".into(), toml::Value::Integer(s["asks"].as_i64().unwrap_or(0)));
        table.insert("gains".into(), toml::Value::Integer(s["gains"].as_i64().unwrap_or(0)));
        table.insert("provenance".into(), toml::Value::String(s["status"].as_str().unwrap_or("unverified").into()));
        if !evidence.is_empty() {
            table.insert("evidence".into(), toml::Value::String(evidence.join("; ")));
        }
        out.push_str("\n[[entry]]\n");
        out.push_str(&toml::to_string(&table).unwrap_or_default());
    }
    out
}

/// The entries of `/bank/stats`, by bank id (its `uplift` key is no entry).
fn entries(stats: &Value) -> impl Iterator<Item = (&String, &Value)> {
    stats.as_object().into_iter().flatten().filter(|(id, _)| id.as_str() != "uplift")
}

/// `gadfly bank stats` as text: one line per entry (its figures per moment
/// at the end of the line), then the uplift table.
pub fn stats_text(stats: &Value) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<14} {:<11} {:>5} {:>6} {:>8}  {:<11} by moment (asks/rewards)",
        "entry", "kind", "asks", "gains", "rewards", "status"
    );
    for (id, s) in entries(stats) {
        let moments: Vec<String> = s["moments"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(m, v)| format!("{m} {}/{}", v["asks"], v["rewards"]))
            .collect();
        let _ = writeln!(
            out,
            "{:<14} {:<11} {:>5} {:>6} {:>8}  {:<11} {}",
            id,
            s["kind"].as_str().unwrap_or("-"),
            s["asks"].as_u64().unwrap_or(0),
            s["gains"].as_u64().unwrap_or(0),
            s["rewards"].as_u64().unwrap_or(0),
            s["status"].as_str().unwrap_or(""),
            moments.join(", ")
        );
    }
    let rows = stats["uplift"].as_array().map(Vec::as_slice).unwrap_or_default();
    let _ = writeln!(
        out,
        "\nuplift: the rate of reward after a question minus the rate after a withheld moment of the same moments\n\
         (performance: a verified gain; validity: the questioned gain gone or a failure caught; 95% Newcombe interval;\n\
         over several moments, moment by moment: adj = the withheld rate weighted to the questions' moments)"
    );
    if rows.is_empty() {
        let _ = writeln!(out, "no bank question delivered yet");
    } else {
        let _ = writeln!(
            out,
            "{:<12} {:<20} {:<22} {:>17} {:>17}  uplift",
            "kind", "group", "moment", "asked (n)", "withheld (n)"
        );
    }
    for r in rows {
        let all = |v: &Value| v.as_str().unwrap_or("all").to_string();
        let figures = match (r["uplift"].as_f64(), r["interval"].as_array()) {
            (Some(u), Some(i)) => format!(
                "{:+.1} pts [{:+.1}, {:+.1}]",
                u * 100.0,
                i[0].as_f64().unwrap_or(0.0) * 100.0,
                i[1].as_f64().unwrap_or(0.0) * 100.0
            ),
            _ => r["note"].as_str().unwrap_or("").to_string(),
        };
        let figures = match r["unmatched"].as_u64() {
            Some(u) if u > 0 => format!("{figures} ({u} asked at moments rarely or never withheld left out)"),
            _ => figures,
        };
        let _ = writeln!(
            out,
            "{:<12} {:<20} {:<22} {:>17} {:>17}  {}",
            r["kind"].as_str().unwrap_or(""),
            all(&r["group"]),
            all(&r["moment"]),
            arm(&r["asked"]),
            arm(&r["withheld"]),
            figures
        );
    }
    out
}

/// One side of an uplift row: "3/10 30.0%", or "3/10 adj 42.0%" where the
/// rate is weighted to the questions' moments (a withheld arm over several
/// moments).
fn arm(a: &Value) -> String {
    let (k, n) = (a["rewarded"].as_u64().unwrap_or(0), a["n"].as_u64().unwrap_or(0));
    match a["rate"].as_f64() {
        Some(rate) if n > 0 && (rate - k as f64 / n as f64).abs() > 1e-9 => {
            format!("{k}/{n} adj {:.1}%", rate * 100.0)
        }
        Some(rate) => format!("{k}/{n} {:.1}%", rate * 100.0),
        None => format!("{k}/{n}"),
    }
}
