//! `gadfly demo`: starts a daemon on SQLite, sets up the qr-cpu example in
//! a fresh git workspace, and runs a replay agent that applies prepared
//! kernel versions one after another and tries to stop after each through
//! the real `gadfly hook claude-code stop` command.

use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::time::Duration;

use anyhow::{bail, Context};
use include_dir::{include_dir, Dir};
use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;

use crate::cli::DemoArgs;
use crate::client::Client;
use crate::config::{ClientConfig, DaemonConfig};

static EXAMPLE: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/examples/qr-cpu");
static HARNESS_CPU: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/harness/cpu");

/// One stop attempt of the replay agent and what the gate said.
#[derive(Debug)]
pub struct Attempt {
    pub version: String,
    pub blocked: bool,
    pub reason: Option<String>,
}

/// Writes the embedded example into `root`: campaign.toml, replay/, and a
/// git workspace with the CPU harness under workspace/harness/cpu.
pub fn materialize_example(root: &Path) -> anyhow::Result<PathBuf> {
    crate::templates::extract(&EXAMPLE, root)?;
    let ws = root.join("workspace");
    crate::templates::extract(&HARNESS_CPU, &ws.join("harness/cpu"))?;
    crate::templates::git(&ws, &["init", "-q"])?;
    crate::templates::git(&ws, &["add", "-A"])?;
    crate::templates::git(
        &ws,
        &["-c", "user.name=gadfly demo", "-c", "user.email=demo@gadfly.invalid", "commit", "-qm", "initial kernel"],
    )?;
    Ok(root.join("campaign.toml"))
}

/// The example's spec with `[questions] withhold = 0`: the demo asks at
/// every moment. Its three stops are too few for a base rate, and its
/// replay (`gadfly replay`, which withholds nothing) asks what it asked.
fn asking_at_every_moment(spec: &str) -> String {
    const WITHHOLD: &str = "withhold = 0                         # the demo asks at every moment\n";
    if spec.contains("withhold") {
        spec.to_string()
    } else if spec.contains("[questions]\n") {
        spec.replacen("[questions]\n", &format!("[questions]\n{WITHHOLD}"), 1)
    } else {
        format!("{spec}\n[questions]\n{WITHHOLD}")
    }
}

/// The replay versions, in order.
pub fn replay_versions(root: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(root.join("replay"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "c"))
        .collect();
    v.sort();
    Ok(v)
}

/// Calls the real hook command the way Claude Code would at a stop.
pub async fn stop_through_hook(
    exe: &Path,
    client: &ClientConfig,
    campaign: &str,
    payload: &Value,
    daemon_key: Option<&str>,
) -> anyhow::Result<(Option<Value>, String)> {
    let mut args = vec!["hook", "claude-code", "stop"];
    if let Some(k) = daemon_key {
        args.extend(["--daemon-key", k]);
    }
    args.extend(["--campaign", campaign]);
    let mut child = tokio::process::Command::new(exe)
        .args(&args)
        .env("GADFLY_URL", &client.url)
        .env("GADFLY_TOKEN", client.token.clone().unwrap_or_default())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("running {} hook", exe.display()))?;
    let mut stdin = child.stdin.take().context("hook stdin")?;
    stdin.write_all(payload.to_string().as_bytes()).await?;
    drop(stdin);
    let out = child.wait_with_output().await?;
    if !out.status.success() {
        bail!("the hook exited with {}: {}", out.status, String::from_utf8_lossy(&out.stderr));
    }
    let stdout = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let parsed = if stdout.is_empty() {
        None
    } else {
        Some(serde_json::from_str(&stdout).context("hook printed invalid JSON")?)
    };
    Ok((parsed, String::from_utf8_lossy(&out.stderr).into_owned()))
}

pub async fn run(args: DemoArgs) -> anyhow::Result<ExitCode> {
    let scratch = tempfile::Builder::new().prefix("gadfly-demo-").tempdir()?;
    let root = scratch.path().to_path_buf();
    let data_dir = args.data_dir.clone().unwrap_or_else(|| root.join("data"));
    let shutdown = tokio_util::sync::CancellationToken::new();
    crate::daemon::cancel_on_signals(shutdown.clone());

    let mut config = DaemonConfig {
        listen: args.listen.clone(),
        data_dir: data_dir.clone(),
        database_url: None,
        bank_dir: None,
        allow_remote: false,
    };
    let daemon = match crate::daemon::Daemon::build(config.clone(), shutdown.clone()).await {
        Ok(d) => d,
        Err(e) => {
            eprintln!("note: {e:#}; using a free port instead");
            config.listen = "127.0.0.1:0".into();
            crate::daemon::Daemon::build(config, shutdown.clone()).await?
        }
    };
    let client_config = ClientConfig { url: daemon.url(), token: Some(daemon.token().to_string()) };
    let url = daemon.url();
    let server = tokio::spawn(daemon.run_until_stopped());

    println!("gadfly demo: daemon at {url} (SQLite in {})", data_dir.display());
    let example = root.join("qr-cpu");
    let spec_path = materialize_example(&example)?;
    let client = Client::new(&client_config, Duration::from_secs(600))?;
    let spec_text = asking_at_every_moment(&std::fs::read_to_string(&spec_path)?);
    std::fs::write(&spec_path, &spec_text)?;
    let created = client
        .post("/campaigns", &json!({"spec_toml": spec_text, "spec_path": spec_path.display().to_string()}))
        .await?;
    let campaign = created["id"].as_str().context("no campaign id")?.to_string();
    println!(
        "campaign {campaign}: batched Householder QR on the CPU, workspace {}",
        example.join("workspace").display()
    );
    println!(
        "the replay agent applies each prepared kernel and tries to stop through `gadfly hook claude-code stop`\n"
    );

    let exe = std::env::current_exe().context("locating the gadfly binary")?;
    // The hook pins the daemon's key, as `gadfly attach` writes it.
    let daemon_key = crate::signing::read_public(&data_dir);
    let versions = replay_versions(&example)?;
    let session = format!("demo-replay-{:08x}", rand::random::<u32>());
    let mut attempts: Vec<Attempt> = Vec::new();
    for (i, version) in versions.iter().enumerate() {
        let name = version.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        std::fs::copy(version, example.join("workspace/kernel/qr.c"))?;
        let spinner = indicatif::ProgressBar::new_spinner();
        spinner.set_style(
            indicatif::ProgressStyle::with_template("{spinner} {msg} [{elapsed}]")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
        );
        spinner.set_message(format!("[{}/{}] {name}: stop attempt, evaluating all scenarios", i + 1, versions.len()));
        spinner.enable_steady_tick(Duration::from_millis(120));
        let payload = json!({
            "session_id": session,
            "transcript_path": "",
            "cwd": example.join("workspace"),
            "hook_event_name": "Stop",
            "stop_hook_active": attempts.last().is_some_and(|a| a.blocked),
            "last_assistant_message": format!("I replaced kernel/qr.c with {name}. It is faster and correct, so the work is done."),
        });
        let (output, _stderr) =
            stop_through_hook(&exe, &client_config, &campaign, &payload, daemon_key.as_deref()).await?;
        spinner.finish_and_clear();
        let blocked = output.as_ref().is_some_and(|o| o["decision"] == "block");
        let reason = output.as_ref().and_then(|o| o["reason"].as_str().map(str::to_string));
        println!(
            "[{}/{}] {name}: {}",
            i + 1,
            versions.len(),
            if blocked { "BLOCKED" } else { "ALLOWED: the predicate holds on every scenario" }
        );
        if let Some(r) = &reason {
            for line in r.lines() {
                println!("      {line}");
            }
        }
        println!();
        attempts.push(Attempt { version: name, blocked, reason });
    }

    let ok = verdict_ok(&attempts);
    println!(
        "replay done: {} stop attempts, {} blocked, last {}. {}",
        attempts.len(),
        attempts.iter().filter(|a| a.blocked).count(),
        if attempts.last().is_some_and(|a| !a.blocked) { "allowed" } else { "blocked" },
        if ok {
            "The gate held until every scenario passed."
        } else {
            "Unexpected: the gate did not behave as the demo expects."
        }
    );
    if args.exit {
        // The daemon stops now (and, without --data-dir, its data goes with
        // the temporary folder): the audit is printed here rather than a
        // command that could no longer answer.
        let audit = client.get(&format!("/campaigns/{campaign}/audit")).await?;
        let audit: crate::audit::CampaignAudit = serde_json::from_value(audit).context("reading the campaign audit")?;
        println!("\n{}", crate::audit::campaign_markdown(&audit));
        match &args.data_dir {
            Some(dir) => println!(
                "the demo's data is kept in {0}: `gadfly serve --data-dir {0}` serves it again, then \
                 `GADFLY_DATA_DIR={0} gadfly audit campaign {campaign}` prints this audit",
                std::fs::canonicalize(dir).unwrap_or_else(|_| dir.clone()).display()
            ),
            None => println!("the demo's data was in a temporary folder, removed on exit (--data-dir DIR keeps it)"),
        }
        shutdown.cancel();
        server.await??;
        return Ok(if ok { ExitCode::SUCCESS } else { ExitCode::from(1) });
    }
    println!(
        "audit: gadfly audit campaign {campaign}   (GADFLY_URL={url} GADFLY_TOKEN=$(cat {}/token))",
        data_dir.display()
    );
    // A one-time login link, never the master token: a URL is kept in the
    // browser's history and the terminal's scrollback.
    let link = client.post("/login-codes", &json!({})).await?;
    println!(
        "\nconsole: {} (logs one browser in, once, within ten minutes; `gadfly console` prints another)\nthe daemon \
         keeps serving; press Ctrl-C to stop it",
        link["url"].as_str().context("the daemon answered without a login link")?
    );
    server.await??;
    // Keep the example until the user is done looking.
    drop(scratch);
    Ok(if ok { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// The demo succeeds when the last attempt was allowed after earlier ones
/// were all blocked.
pub fn verdict_ok(attempts: &[Attempt]) -> bool {
    match attempts.split_last() {
        Some((last, earlier)) => !last.blocked && !earlier.is_empty() && earlier.iter().all(|a| a.blocked),
        None => false,
    }
}
