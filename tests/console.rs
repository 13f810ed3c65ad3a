//! The web console end to end, in a real headless Chromium: the daemon
//! serves the web/ assets embedded in the binary (GADFLY_WEB_DIR unset), a
//! campaign gets evaluations and a blocked then an allowed stop attempt,
//! and tests/console/console.test.mjs (Playwright, Debian's chromium)
//! checks the pages, the live feed and the question composer.
//!
//! Needs node, /usr/bin/chromium (or $GADFLY_CHROMIUM) and
//! `npm ci --prefix tests/console`; skipped, saying so, without node or
//! chromium.

mod common;
mod mock_model;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{reason, Daemon, Fixture, ALL_PASS};

/// A name and a claim full of markup: the console must show them as text.
const NAME: &str = r#"qr <img src=x onerror="window.__xss=1"> & <b>co</b>"#;
const CLAIM: &str = "All done <script>window.__xss=2</script>, every scenario is faster.";
/// A person's message in the replayed session, quoted by the report.
const REPLAY_HUMAN: &str = "Is <script>window.__xss=3</script> really faster?";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn found(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn chromium() -> Option<String> {
    let path = std::env::var("GADFLY_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    Path::new(&path).exists().then_some(path)
}

/// Every file of web/ as the daemon serves it under /assets/ must be the
/// file on disk: the binary embeds web/ when it is built.
fn assert_serves_this_web_dir(d: &Daemon) {
    let web = root().join("web");
    let client = reqwest::blocking::Client::new();
    let mut checked = 0;
    for entry in walkdir::WalkDir::new(&web).into_iter().filter_map(Result::ok).filter(|e| e.file_type().is_file()) {
        let rel = entry.path().strip_prefix(&web).unwrap().to_string_lossy().replace('\\', "/");
        let res = client.get(format!("{}/assets/{rel}", d.url)).send().unwrap();
        let status = res.status();
        let served = res.bytes().unwrap();
        assert!(
            status.is_success() && served.as_ref() == std::fs::read(entry.path()).unwrap().as_slice(),
            "the daemon serves a stale or missing web/{rel} (HTTP {status}): the binary embeds web/ when it is built; \
             cargo rebuilds it when an embedded file changes, but not when a file is added or removed: `touch src/api/web.rs`"
        );
        checked += 1;
    }
    assert!(checked >= 3, "web/ has index.html, app.js and style.css");
    let res = client.get(format!("{}/assets/app.js", d.url)).send().unwrap();
    assert_eq!(res.headers()["content-type"], "text/javascript; charset=utf-8");
    let index = client.get(format!("{}/assets/index.html", d.url)).send().unwrap().text().unwrap();
    for asset in ["/assets/app.js", "/assets/style.css"] {
        assert!(index.contains(asset), "index.html loads {asset}");
    }
    assert!(!index.contains("http://") && !index.contains("https://"), "index.html loads nothing from elsewhere");
}

#[test]
fn the_console_in_headless_chromium() {
    // The embedded assets are under test, not a folder on disk.
    std::env::remove_var("GADFLY_WEB_DIR");
    // CI sets GADFLY_REQUIRE_BROWSER=1: there a missing browser fails the
    // test instead of skipping it.
    let required = std::env::var("GADFLY_REQUIRE_BROWSER").is_ok_and(|v| v == "1");
    let Some(chromium) = chromium() else {
        assert!(!required, "GADFLY_REQUIRE_BROWSER=1 but chromium was not found (set GADFLY_CHROMIUM)");
        eprintln!("SKIPPED: the console test needs chromium (apt-get install -y chromium, or set GADFLY_CHROMIUM)");
        return;
    };
    if !found("node") {
        assert!(!required, "GADFLY_REQUIRE_BROWSER=1 but node was not found");
        eprintln!("SKIPPED: the console test needs node (apt-get install -y nodejs npm)");
        return;
    }
    let tests = root().join("tests/console");
    if !tests.join("node_modules/playwright-core/package.json").exists() {
        let ok = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--prefix"])
            .arg(&tests)
            .env("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "tests/console needs its packages: npm ci --prefix tests/console");
    }

    let f = Fixture::new("[agent]\nkind = \"claude-code\"\n");
    let spec = std::fs::read_to_string(f.spec()).unwrap();
    let quoted = serde_json::to_string(NAME).unwrap(); // a valid TOML basic string too
    std::fs::write(f.spec(), spec.replacen("name = \"fixture\"", &format!("name = {quoted}"), 1)).unwrap();
    // The webhooks' secret, in the daemon's environment before it starts
    // (a webhook naming one it lacks is refused).
    let mut serve = Daemon::serve_command(&f.data_dir());
    serve.env("GADFLY_CONSOLE_HOOK_SECRET", "console-test-secret").env_remove("GADFLY_CONSOLE_HOOK_SECRET_2");
    let d = Daemon::start_cmd(&f.data_dir(), serve);
    assert_serves_this_web_dir(&d);
    let id = d.create_campaign(&f.spec());

    // Blocked (b is wrong), allowed (all pass), then a candidate slow on c.
    f.set_candidate("a true 50 100\nb false 40 100\nc true 80 100\n");
    reason(&d.stop(&id, CLAIM));
    f.set_candidate(ALL_PASS);
    assert_eq!(d.stop(&id, "Now it is really done."), None);
    f.set_candidate("a true 50 100\nb true 40 100\nc true 120 100\n");
    let res = reqwest::blocking::Client::new()
        .post(format!("{}/api/v1/campaigns/{id}/evaluate", d.url))
        .bearer_auth(&d.token)
        .send()
        .unwrap();
    assert!(res.status().is_success());
    let e: serde_json::Value = res.json().unwrap();
    assert_eq!(e["holds"], false, "{e}");
    assert_eq!(d.api_get(&format!("/campaigns/{id}/evaluations")).as_array().unwrap().len(), 3);
    // A second campaign on the same workspace, held to the comparison
    // implementation, with a harness that judges tolerance elementwise.
    let compare_spec = f.dir.path().join("compare.toml");
    std::fs::write(
        &compare_spec,
        // Into [predicate], wherever the fixture's spec puts it.
        std::fs::read_to_string(f.spec())
            .unwrap()
            .replacen(&format!("name = {quoted}"), "name = \"compared\"", 1)
            .replacen("[predicate]\n", "[predicate]\nmin_compare_speedup = 1.0\nmin_compare_geomean = 1.1\n", 1),
    )
    .unwrap();
    let compare = d.create_campaign(&compare_spec);
    let tol =
        "\"max_abs_err_ref\":3.125e-2,\"max_abs_err_hi\":3e-2,\"tolerance\":1e-2,\"rtol\":1e-2,\"max_tol_ratio\":0.71";
    f.set_candidate(&format!(
        "a true 10 100 \"compare_us\":4,{tol}\nb true 50 100 \"compare_us\":45,{tol}\nc true 20 100 \"compare_us\":12,{tol}\n"
    ));
    let res = reqwest::blocking::Client::new()
        .post(format!("{}/api/v1/campaigns/{compare}/evaluate", d.url))
        .bearer_auth(&d.token)
        .send()
        .unwrap();
    let e: serde_json::Value = res.json().unwrap();
    assert_eq!(e["holds"], false, "{e}");
    f.set_candidate("a true 50 100\nb true 40 100\nc true 120 100\n");
    // Two more campaigns on the workspace (issue #32's console details): one
    // not evaluated yet (the empty chart, "Evaluate now"), and one whose agent
    // waved an error away and then only claimed to be done (the moment the
    // composer starts at; archiving).
    let named = |name: &str| {
        let path = f.dir.path().join(format!("{name}.toml"));
        let text = std::fs::read_to_string(f.spec()).unwrap().replacen(
            &format!("name = {quoted}"),
            &format!("name = \"{name}\""),
            1,
        );
        std::fs::write(&path, text).unwrap();
        d.create_campaign(&path)
    };
    let fresh = named("fresh");
    let moments = named("moments");
    reason(
        &d.stop(
            &moments,
            "The error on b is just rounding noise, ignore it. All scenarios pass now, the work is done.",
        ),
    );
    reason(&d.stop(&moments, "All done, every scenario is faster."));
    // Issue #32, what users see is the truth: a campaign whose latest kernel
    // is wrong on every scenario (25x "faster") after a correct one at
    // 1.84x; and one whose workspace fails (c is slow) while a beam branch
    // it never had, listed after, passes at 10x.
    let evaluate = |campaign: &str| {
        let res = reqwest::blocking::Client::new()
            .post(format!("{}/api/v1/campaigns/{campaign}/evaluate", d.url))
            .bearer_auth(&d.token)
            .send()
            .unwrap();
        assert!(res.status().is_success(), "evaluating {campaign}: {}", res.status());
    };
    let wrong = named("all-wrong");
    f.set_candidate(ALL_PASS);
    evaluate(&wrong);
    f.set_candidate("a false 4 100\nb false 4 100\nc false 4 100\n");
    evaluate(&wrong);
    f.set_candidate("a true 50 100\nb true 40 100\nc true 120 100\n");
    let beamed = named("beamed");
    evaluate(&beamed);
    // The branch is made in a worktree of its own: the workspace's files stay as they are.
    let branch = f.dir.path().join("estrin-worktree");
    common::git(&f.ws(), &["worktree", "add", "-q", "-b", "estrin", branch.to_str().unwrap(), "HEAD"]);
    std::fs::write(branch.join("candidate.txt"), "a true 10 100\nb true 10 100\nc true 10 100\n").unwrap();
    common::git(
        &branch,
        &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "estrin\n\nGadfly-Family: estrin"],
    );
    common::git(&f.ws(), &["worktree", "remove", "--force", branch.to_str().unwrap()]);
    let out = d.run(&["beam", "list", &beamed]);
    assert!(out.status.success(), "beam list: {}", String::from_utf8_lossy(&out.stderr));
    // Issue #49 item 1: a harness that ran, every scenario passing, with the
    // geometric mean below its bar (the predicate does not hold), and one
    // that failed (the evaluation failed: nothing measured).
    let bar_missed = named("bar-missed");
    f.set_candidate("a true 88 100\nb true 88 100\nc true 88 100\n");
    evaluate(&bar_missed);
    let broken = named("broken-harness");
    f.set_candidate("FAIL\n");
    evaluate(&broken);
    f.set_candidate("a true 50 100\nb true 40 100\nc true 120 100\n");
    // Issue #49 item 3: a campaign that finished (its stop allowed) with a
    // limit claim nobody judged.
    let finished = named("finished");
    let hook = d.api_get(&format!("/campaigns/{finished}/hook-token"))["token"].as_str().unwrap().to_string();
    let res = reqwest::blocking::Client::new()
        .post(format!("{}/api/v1/campaigns/{finished}/claims", d.url))
        .bearer_auth(&hook)
        .json(&serde_json::json!({"claim": "limit", "why": "c is bound by memory bandwidth"}))
        .send()
        .unwrap();
    assert!(res.status().is_success(), "filing a limit claim: {}", res.status());
    f.set_candidate(ALL_PASS);
    assert_eq!(d.stop(&finished, "All scenarios pass."), None, "the stop is allowed");
    f.set_candidate("a true 50 100\nb true 40 100\nc true 120 100\n");
    // Issue #49 item 4: a Claude Code session ungated (its turn ended on a
    // failure), then one that failed at start-up (not logged in: its
    // transcript has the API's error and no prompt).
    let failed = named("failed-start");
    let c = reqwest::blocking::Client::new();
    let hook_body = |session: &str, extra: serde_json::Value| {
        let mut body = serde_json::json!({"session_id": session, "cwd": f.ws(), "hook_event_name": "x",
            "transcript_path": f.dir.path().join(format!("{session}.jsonl"))});
        body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        body
    };
    d.post_hook(&c, "user-prompt-submit", &failed, &hook_body("prompted", serde_json::json!({"prompt": "Go."})));
    d.post_hook(&c, "stop-failure", &failed, &hook_body("prompted", serde_json::json!({"error": "server_error"})));
    std::fs::write(
        f.dir.path().join("login.jsonl"),
        "{\"type\":\"system\",\"subtype\":\"api_error\",\"error\":{\"formatted\":\"Invalid API key · Please run /login\"}}\n",
    )
    .unwrap();
    d.post_hook(&c, "session-start", &failed, &hook_body("login", serde_json::json!({"source": "startup"})));
    d.post_hook(&c, "session-end", &failed, &hook_body("login", serde_json::json!({"reason": "other"})));
    let fs = d.api_get(&format!("/campaigns/{failed}"));
    assert_eq!(fs["stop_attempts"][0]["decision"], "ungated", "{fs}");
    assert_eq!(fs["failed_start"]["error"], "Invalid API key · Please run /login", "{fs}");
    // Issue #35 item 4: a campaign whose agent never answers (one turn
    // allowed): its first question asked again at the second stop, then
    // escalated at the third, which asks one more.
    let asked = {
        let path = f.dir.path().join("asked.toml");
        let text =
            std::fs::read_to_string(f.spec()).unwrap().replacen(&format!("name = {quoted}"), "name = \"asked\"", 1);
        // The fixture's spec may have a [questions] table already.
        let text = if text.contains("[questions]\n") {
            text.replacen("[questions]\n", "[questions]\nanswer_within_turns = 1\n", 1)
        } else {
            text + "\n[questions]\nanswer_within_turns = 1\n"
        };
        std::fs::write(&path, text).unwrap();
        d.create_campaign(&path)
    };
    for _ in 0..3 {
        reason(&d.stop(&asked, "It is as fast as it gets."));
    }

    // Issue #38: a campaign whose spawned agent reported its usage and was
    // stopped by `max_cost_usd` (the real Claude Code CLI against the mock
    // model when it is installed, else a command agent's gadfly_usage
    // lines), with a webhook whose secret the daemon does not hold.
    let (spend, spend_text, _mock) = spend_campaign(&d);

    // Issue #39: a replay report for the console to open from a file (the
    // committed demo timeline, with a person's message full of markup).
    let replay_dir = tempfile::tempdir().unwrap();
    let timeline = replay_dir.path().join("demo.timeline.jsonl");
    let mut lines = std::fs::read_to_string(root().join("tests/data/replay/demo-qr-cpu.timeline.jsonl")).unwrap();
    lines.push_str(&format!("{}\n", serde_json::json!({"t": 100, "kind": "human", "text": REPLAY_HUMAN})));
    std::fs::write(&timeline, lines).unwrap();
    let out = common::gadfly()
        .args(["replay", timeline.to_str().unwrap(), "--spec"])
        .arg(root().join("examples/qr-cpu/campaign.toml"))
        .arg("--json")
        .output()
        .unwrap();
    assert!(out.status.success(), "gadfly replay: {}", String::from_utf8_lossy(&out.stderr));
    let replay_report = replay_dir.path().join("demo.replay.json");
    std::fs::write(&replay_report, &out.stdout).unwrap();

    let shots = std::env::var("SCREENSHOT_DIR").unwrap_or_else(|_| std::env::temp_dir().display().to_string());
    let mut child = Command::new("node")
        .arg(tests.join("console.test.mjs"))
        .current_dir(&tests)
        .env("GADFLY_URL", &d.url)
        .env("GADFLY_TOKEN", &d.token)
        .env("CAMPAIGN", &id)
        .env("CAMPAIGN_NAME", NAME)
        .env("COMPARE_CAMPAIGN", &compare)
        .env("WRONG_CAMPAIGN", &wrong)
        .env("BEAM_CAMPAIGN", &beamed)
        .env("FRESH_CAMPAIGN", &fresh)
        .env("MOMENTS_CAMPAIGN", &moments)
        .env("ASKED_CAMPAIGN", &asked)
        .env("BAR_CAMPAIGN", &bar_missed)
        .env("FINISHED_CAMPAIGN", &finished)
        .env("FAILED_START_CAMPAIGN", &failed)
        // Every kind the daemon records: the feed must word each (issue #49).
        .env("EVENT_KINDS", gadfly::events::ALL_KINDS.join(","))
        .env("BROKEN_CAMPAIGN", &broken)
        .env("BLOCKED_CLAIM", CLAIM)
        .env("SPEND_CAMPAIGN", &spend.0)
        .env("SPEND_TEXT", &spend_text)
        .env("REPLAY_REPORT", &replay_report)
        .env("REPLAY_HUMAN", REPLAY_HUMAN)
        .env("CHROMIUM", &chromium)
        .env("SCREENSHOT_DIR", &shots)
        .spawn()
        .expect("start node");
    let deadline = Instant::now() + Duration::from_secs(240);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the console test ran past 240 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(status.success(), "the console test failed ({status}); screenshots of the failure in {shots}");
}

/// A campaign (in a workspace of its own) whose run was stopped by its
/// reported cost: its id and fixture, the campaign's spend as the console
/// must write it (from the API's figures, in the audit's format), and the
/// mock model (kept alive).
fn spend_campaign(d: &Daemon) -> ((String, Fixture), String, Option<mock_model::MockModel>) {
    let webhook = "[notify]\n[[notify.webhooks]]\nurl = \"http://127.0.0.1:9/hooks/x\"\nevents = [\"run_ended\"]\nsecret_env = \"GADFLY_CONSOLE_TEST_NO_SECRET\"\n";
    let toml_str = |s: &str| serde_json::to_string(s).unwrap();
    let (f, mock, kind) = match mock_model::agent_bin("GADFLY_CLAUDE_BIN", "claude") {
        Some(bin) => {
            use mock_model::{MockModel, Step};
            let mock = MockModel::start(vec![
                Step::text("All scenarios pass. Done."),
                Step::text("They still pass. Done.").when_last_user_contains("gadfly: you may not stop yet"),
            ]);
            let home = tempfile::tempdir().unwrap().keep();
            let env = [
                ("HOME", home.display().to_string()),
                ("CLAUDE_CONFIG_DIR", home.join("claude-config").display().to_string()),
                ("ANTHROPIC_BASE_URL", mock.url.clone()),
                ("ANTHROPIC_API_KEY", "dummy".into()),
                ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".into()),
                ("DISABLE_TELEMETRY", "1".into()),
                ("DISABLE_AUTOUPDATER", "1".into()),
                ("IS_SANDBOX", "1".into()),
                // The CLI ends a turn past one blocked stop: its cost is told then.
                ("CLAUDE_CODE_STOP_HOOK_BLOCK_CAP", "1".into()),
            ];
            let env: Vec<String> = env.iter().map(|(k, v)| format!("{k} = {}", toml_str(v))).collect();
            let agent = format!(
                "[agent]\nkind = \"claude-code\"\nbin = {}\nmax_cost_usd = 0.001\nenv = {{ {} }}\n{webhook}",
                toml_str(&bin.display().to_string()),
                env.join(", ")
            );
            (Fixture::new(&agent), Some(mock), "claude-code")
        }
        None => {
            let agent = format!(
                "[agent]\nkind = \"command\"\nstart = \"sh ../usage.sh\"\nresume = \"sh ../usage.sh\"\nmax_cost_usd = 1.0\n{webhook}"
            );
            let f = Fixture::new(&agent);
            let script = "echo '{\"gadfly_usage\": {\"input_tokens\": 1000, \"output_tokens\": 200, \"cost_usd\": 0.4}}'\nsleep 0.3\necho 'All scenarios pass. Done.'\n";
            std::fs::write(f.dir.path().join("usage.sh"), script).unwrap();
            (f, None, "command")
        }
    };
    let id = d.create_campaign(&f.spec());
    let out = d.run(&["run", &id, "--agent", kind]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let runs = d.api_get(&format!("/campaigns/{id}/runs"));
    assert_eq!(runs[0]["outcome"], "stopped_by_budget", "{runs}");
    // The transcript of a spawned Claude Code session is followed too, and
    // its last lines may be read after `gadfly run` returned (the follower's
    // final read follows the session's end hook): the spend the page must
    // show is the one that no longer changes.
    let spend = || d.api_get(&format!("/campaigns/{id}/spend"));
    if kind == "claude-code" {
        common::wait_until("the session's transcript read", || {
            spend()["sessions"].as_array().is_some_and(|s| {
                s.iter()
                    .any(|s| s["sources"].as_array().is_some_and(|v| v.iter().any(|x| x == "claude-code-transcript")))
            })
        });
    }
    let mut sp = spend();
    let mut steady = 0;
    while steady < 3 {
        std::thread::sleep(std::time::Duration::from_millis(500));
        let now = spend();
        steady = if now["campaign"] == sp["campaign"] { steady + 1 } else { 0 };
        sp = now;
    }
    let c = &sp["campaign"];
    assert!(c["tokens"].as_u64().unwrap() > 0 && c["cost_usd"].as_f64().unwrap() >= 0.001, "{sp}");
    let text = format!(
        "{} tokens · {}",
        gadfly::spend::tokens_text(c["tokens"].as_u64().unwrap()),
        gadfly::spend::cost_text(c["cost_usd"].as_f64())
    );
    eprintln!("spend campaign ({kind}): {text}; {sp}");
    common::wait_until("the run_ended notification's attempt", || {
        d.api_get(&format!("/campaigns/{id}/log?limit=10000"))
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["kind"] == "notify.delivery" && e["payload"]["status"] == "failed")
    });
    ((id, f), text, mock)
}
