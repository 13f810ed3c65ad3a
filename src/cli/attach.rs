//! `gadfly attach` and `gadfly detach`: gadfly's hooks written into (and
//! taken out of) the agent's settings in the workspace, the daemon told,
//! and the files written listed in the repository's `info/exclude`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use serde_json::json;

use super::{client, config, daemon_public_key, workspace_of};
use crate::agent::{attach as hooks_file, exclude};

pub(super) async fn attach(id: &str, dir: Option<PathBuf>, hook_bin: Option<PathBuf>) -> anyhow::Result<ExitCode> {
    let campaign = client(Duration::from_secs(30))?
        .get(&format!("/campaigns/{id}"))
        .await
        .context("reading the campaign (its workspace and [gate] policy)")?;
    let dir = match dir {
        Some(d) => d,
        None => PathBuf::from(campaign["spec"]["workspace"].as_str().context("the campaign has no workspace")?),
    };
    let gate: crate::campaign::GateSpec = serde_json::from_value(campaign["spec"]["gate"].clone()).unwrap_or_default();
    let exe = match hook_bin {
        Some(p) => std::fs::canonicalize(&p).with_context(|| format!("--hook-bin {}", p.display()))?,
        None => std::env::current_exe()?,
    };
    let c = client(Duration::from_secs(30))?;
    let hook_token = c.get(&format!("/campaigns/{id}/hook-token")).await?;
    let hook_token = hook_token["token"].as_str().unwrap_or_default().to_string();
    let hooks: crate::campaign::HooksSpec =
        serde_json::from_value(campaign["spec"]["hooks"].clone()).unwrap_or_default();
    let http = hooks.http.then(|| hooks_file::HttpHooks { url: c.base_url().to_string() });
    // The daemon's key, pinned in every hook command (THREATS row 5).
    let daemon_key = daemon_public_key(&c).await?;
    let path = hooks_file::attach_pinned(&dir, &exe.display().to_string(), id, gate, http.as_ref(), Some(&daemon_key))?;
    // The daemon keeps what was written, to catch a change to it.
    let installed = hooks_file::Installed::new("attach", &path, &dir, &exe, id)?;
    c.post(&format!("/campaigns/{id}/hook-installs"), &json!({"installed": installed})).await?;
    println!("gadfly hooks for campaign {id} written to {}", path.display());
    // Kept out of `git status` (and of the user's commits); snapshots
    // do not read info/exclude, so what is evaluated is unchanged.
    match exclude::add(&dir, &hooks_file::written_files(&dir)) {
        Ok(Some(exclude)) => println!("listed in {} (git status does not show it)", exclude.display()),
        Ok(None) => {}
        Err(e) => eprintln!("warning: {} not listed in the repository's info/exclude: {e:#}", path.display()),
    }
    println!(
        "start `claude` in {} with these set (the token only lets the agent's hooks post events and ask for evaluations):",
        dir.display()
    );
    println!("  export GADFLY_URL={}", c.base_url());
    println!("  export GADFLY_TOKEN={hook_token}");
    println!("`gadfly detach {id}` removes the hooks");
    println!("the hooks take only answers signed by the daemon's key {daemon_key} (--daemon-key)");
    if let Some(w) = crate::doctor::same_user_warning(Some(&dir), &config::default_data_dir(), Some(c.base_url())) {
        eprintln!("warning: {w} (`gadfly doctor {id}` checks the deployment)");
    }
    Ok(ExitCode::SUCCESS)
}

pub(super) async fn detach(id: &str, dir: Option<PathBuf>) -> anyhow::Result<ExitCode> {
    let dir = match dir {
        Some(d) => d,
        None => workspace_of(id).await?,
    };
    let n = hooks_file::detach(&dir, id)?;
    let removed = hooks_file::settings_path(&dir);
    if let Err(e) = client(Duration::from_secs(30))?
        .post(&format!("/campaigns/{id}/hook-installs"), &json!({"removed": removed}))
        .await
    {
        eprintln!("warning: the daemon was not told the hooks were removed ({e:#}); it will report them as changed");
    }
    println!("removed {n} gadfly hooks for campaign {id} from {}", removed.display());
    // The exclude lines go with the last campaign's hooks (several
    // campaigns may attach to one workspace: one settings file).
    if !hooks_file::has_gadfly_hooks(&dir)? {
        if let Err(e) = exclude::remove(&dir, &hooks_file::written_files(&dir)) {
            eprintln!("warning: gadfly's lines not taken out of the repository's info/exclude: {e:#}");
        }
    }
    Ok(ExitCode::SUCCESS)
}
