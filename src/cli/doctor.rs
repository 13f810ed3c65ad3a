//! `gadfly doctor` and the daemon's public key, as the client checks it.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use serde_json::Value;

use super::client;
use crate::client::Client;
use crate::config;

/// The public key of the daemon at GADFLY_URL (from /health), checked
/// against the data dir's `daemon-key.pub` when this user can read it.
pub(super) async fn daemon_public_key(c: &Client) -> anyhow::Result<String> {
    let health = c.get("/health").await.context("asking the daemon for its key")?;
    let Some(announced) = health["daemon_key"].as_str().map(str::to_string) else {
        anyhow::bail!(
            "the daemon at {} announces no key: it is older than this gadfly; restart it with this binary",
            c.base_url()
        );
    };
    crate::signing::parse_public(&announced).map_err(|e| anyhow::anyhow!("the daemon at {}: {e}", c.base_url()))?;
    // Checked against this user's data dir when that dir says its daemon
    // serves at GADFLY_URL (a data dir left from another daemon is not).
    let data_dir = config::default_data_dir();
    let serves_here = std::fs::read_to_string(data_dir.join("daemon.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .is_some_and(|v| v["url"].as_str() == Some(c.base_url()));
    if let Some(local) = crate::signing::read_public(&data_dir).filter(|_| serves_here) {
        if local != announced {
            anyhow::bail!(
                "the daemon at {} announces the key {announced}, but {} holds {local}: another server holds the daemon's port, or GADFLY_URL and GADFLY_DATA_DIR name different daemons",
                c.base_url(),
                data_dir.join(crate::signing::PUB_FILE).display()
            );
        }
    }
    Ok(announced)
}

/// `gadfly doctor [ID]`.
pub(super) async fn doctor(id: Option<String>, data_dir: Option<PathBuf>) -> anyhow::Result<ExitCode> {
    let data_dir = data_dir.unwrap_or_else(config::default_data_dir);
    let c = client(Duration::from_secs(10))?;
    let daemon_key = c.get("/health").await.ok().and_then(|h| h["daemon_key"].as_str().map(str::to_string));
    let mut unread = None;
    let facts = match &id {
        Some(id) => match c.get(&format!("/campaigns/{id}")).await {
            Ok(campaign) => Some(crate::doctor::CampaignFacts {
                id: id.clone(),
                workspace: campaign["spec"]["workspace"].as_str().map(PathBuf::from),
                spec: serde_json::from_value(campaign["spec"].clone()).ok(),
            }),
            Err(e) => {
                unread = Some(format!(
                    "PROBLEM: cannot read campaign {id} from the daemon at {} (its workspace, hooks and spec are not checked): {e:#}",
                    c.base_url()
                ));
                None
            }
        },
        None => None,
    };
    let mut report = crate::doctor::check(&data_dir, Some(c.base_url()), daemon_key.as_deref(), facts.as_ref());
    if let Some(line) = unread {
        report.lines.push(line);
        report.problems += 1;
    }
    for line in &report.lines {
        println!("{line}");
    }
    if report.problems == 0 {
        println!("no problem found");
        Ok(ExitCode::SUCCESS)
    } else {
        println!("{} problem(s) found", report.problems);
        Ok(ExitCode::from(1))
    }
}
