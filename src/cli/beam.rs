//! `gadfly beam ...`: the beam of candidate families.

use std::process::ExitCode;
use std::time::Duration;

use serde_json::{json, Value};

use super::{client, BeamCommand};

pub(super) async fn beam(cmd: BeamCommand) -> anyhow::Result<ExitCode> {
    let c = client(Duration::from_secs(3600))?;
    match cmd {
        BeamCommand::Tag { family, campaign, from } => {
            let campaign = crate::config::campaign_or_default(campaign, "with --campaign")?;
            let v =
                c.post(&format!("/campaigns/{campaign}/beam/tag"), &json!({"family": family, "from": from})).await?;
            println!("{} -> {}", v["ref"].as_str().unwrap_or(""), v["commit"].as_str().unwrap_or(""));
        }
        BeamCommand::Abandon { id, family, reason } => {
            c.post(&format!("/campaigns/{id}/beam/abandon"), &json!({"family": family, "reason": reason})).await?;
            println!("family {family} abandoned: {reason}");
        }
        BeamCommand::List { id, json } => {
            let b = c.get(&format!("/campaigns/{id}/beam")).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&b)?);
                return Ok(ExitCode::SUCCESS);
            }
            println!(
                "beam: {} live famil(ies){}",
                b["live"],
                if b["enabled"] == true { format!(", keeps at least {}", b["min_families"]) } else { String::new() }
            );
            println!("{:<20} {:<10} {:>9} {:>9} {:>6}  note", "family", "status", "best", "last", "evals");
            for f in b["families"].as_array().into_iter().flatten() {
                let g = |p: &Value| p["geomean_speedup"].as_f64().map_or("-".to_string(), |x| format!("{x:.2}x"));
                println!(
                    "{:<20} {:<10} {:>9} {:>9} {:>6}  {}",
                    f["family"].as_str().unwrap_or(""),
                    f["status"].as_str().unwrap_or(""),
                    g(&f["best"]),
                    g(&f["last"]),
                    f["history"].as_array().map_or(0, Vec::len),
                    f["note"].as_str().or(f["reason"].as_str()).unwrap_or("")
                );
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
