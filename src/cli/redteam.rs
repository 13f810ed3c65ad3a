//! `gadfly redteam ID`: start the red-team battery against the campaign's
//! harness, follow it, print the report.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use serde_json::json;

use super::client;
use crate::redteam::{Report, Status};

/// Starts the battery (or joins the one running), waits for its report and
/// prints it; 0 when every applicable attack held, 1 when one broke the
/// harness, 2 when the battery could not judge it.
pub(super) async fn redteam(id: &str, json_out: bool) -> anyhow::Result<ExitCode> {
    let c = client(Duration::from_secs(60))?;
    let started = c.post(&format!("/campaigns/{id}/redteam"), &json!({})).await?;
    let battery = started["id"].as_str().unwrap_or_default().to_string();
    if started["started"] == true {
        eprintln!("red team {battery}: attacking the harness of campaign {id}");
    } else {
        eprintln!("red team {battery}: a battery is already running for campaign {id}; waiting for its report");
    }
    let mut shown = 0;
    let report = loop {
        let state = c.get(&format!("/campaigns/{id}/redteam")).await?;
        let running = &state["running"];
        let report = &state["report"];
        let mine = report["id"].as_str() == Some(battery.as_str());
        if running.is_null() || (mine && running["id"].as_str() != Some(battery.as_str())) {
            if report.is_null() {
                anyhow::bail!("the red-team battery of campaign {id} ended without a report (see the daemon's log)");
            }
            let report: Report = serde_json::from_value(report.clone()).context("reading the red-team report")?;
            break report;
        }
        let done = running["done"].as_u64().unwrap_or(0);
        let total = running["total"].as_u64().unwrap_or(0);
        if total > 0 && done as usize != shown {
            shown = done as usize;
            eprintln!("red team {battery}: {done} of {total} attacks done");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    if json_out {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", crate::redteam::render(&report));
    }
    Ok(match report.status {
        Status::Held => ExitCode::SUCCESS,
        Status::Broken => ExitCode::from(1),
        Status::Error => ExitCode::from(2),
        Status::LowCoverage => ExitCode::from(3),
    })
}
