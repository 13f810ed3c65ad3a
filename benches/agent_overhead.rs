//! A whole scripted Claude Code run (the real CLI, the mock model server)
//! with gadfly's hooks, side by side with the same run without hooks: the
//! time gadfly adds per tool call and in all. Runs alternate. Prints
//! figures; asserts none. Needs the CLI (`.ci/install-agents.sh`).

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "../tests/mock_model/mod.rs"]
mod mock_model;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mock_model::{path_with_gadfly, MockModel, Step};

const TOOL_CALLS: usize = 20;
const RUNS: usize = 7;

fn main() {
    let Some(bin) = mock_model::agent_bin("GADFLY_CLAUDE_BIN", "claude") else {
        println!("SKIPPED: the claude CLI is not installed (run .ci/install-agents.sh)");
        return;
    };
    let f = common::Fixture::new("");
    f.set_candidate(common::ALL_PASS);
    let d = common::Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let home = tempfile::tempdir().unwrap();
    let settings = home.path().join("gadfly-settings.json");
    let ours = gadfly::agent::attach::hooks_settings("gadfly", &id, Default::default());
    std::fs::write(&settings, serde_json::to_string_pretty(&ours).unwrap()).unwrap();
    // The same hook events running a command that does nothing: what Claude
    // Code itself spends to run a hook, whoever writes it.
    let noop_settings = home.path().join("noop-settings.json");
    let noop = serde_json::to_string_pretty(&ours)
        .unwrap()
        .replace(&format!("gadfly hook claude-code"), "cat >/dev/null; true");
    let noop = noop
        .lines()
        .map(|l| {
            if l.contains("cat >/dev/null; true") {
                l.split(" --campaign").next().unwrap().to_string() + "\","
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(&noop_settings, &noop).unwrap();
    let _: serde_json::Value = serde_json::from_str(&noop).expect("no-op settings are JSON");
    // gadfly's hooks with `[hooks] transport = "http"`: Claude Code posts the
    // tool-call and prompt hooks to the daemon itself.
    let http_settings = home.path().join("gadfly-http-settings.json");
    let http = gadfly::agent::attach::HttpHooks { url: d.url.clone(), token: d.token.clone() };
    let ours_http = gadfly::agent::attach::hooks_settings_with("gadfly", &id, Default::default(), Some(&http));
    std::fs::write(&http_settings, serde_json::to_string_pretty(&ours_http).unwrap()).unwrap();

    let run_with = |hooks: u8, tool_calls: usize, latency: Duration| -> f64 {
        let mut script: Vec<Step> =
            (0..tool_calls).map(|i| Step::shell(&format!("echo step {i} > /dev/null"))).collect();
        script.push(Step::text("All scenarios pass. Done."));
        let mock = MockModel::start_with_latency(script, latency);
        let config = tempfile::tempdir().unwrap();
        let mut cmd = Command::new(&bin);
        cmd.args([
            "-p",
            "run the steps",
            "--output-format",
            "stream-json",
            "--verbose",
            "--dangerously-skip-permissions",
        ]);
        match hooks {
            1 => {
                cmd.arg("--settings").arg(&noop_settings);
            }
            2 => {
                cmd.arg("--settings").arg(&settings);
            }
            3 => {
                cmd.arg("--settings").arg(&http_settings);
            }
            _ => {}
        }
        cmd.current_dir(f.ws())
            .env_clear()
            .env("PATH", path_with_gadfly())
            .env("HOME", home.path())
            .env("CLAUDE_CONFIG_DIR", config.path())
            .env("ANTHROPIC_BASE_URL", &mock.url)
            .env("ANTHROPIC_API_KEY", "dummy")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .env("DISABLE_TELEMETRY", "1")
            .env("DISABLE_AUTOUPDATER", "1")
            .env("IS_SANDBOX", "1")
            .env("GADFLY_URL", &d.url)
            .env("GADFLY_TOKEN", &d.token)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let t = Instant::now();
        let status = cmd.status().unwrap();
        let s = t.elapsed().as_secs_f64();
        assert!(status.success(), "claude failed (variant {hooks})");
        s
    };
    let run = |hooks: u8| run_with(hooks, TOOL_CALLS, Duration::ZERO);
    // AGENT_BENCH=latency runs only the second part (LATENCY_RUNS runs of
    // each variant, default 5).
    let only_latency = std::env::var("AGENT_BENCH").is_ok_and(|v| v == "latency");
    run(0);
    let med = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        v[v.len() / 2]
    };
    if !only_latency {
        run(1);
        run(2);
        run(3);
        let (mut with, mut without, mut noop, mut with_http) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for _ in 0..RUNS {
            without.push(run(0));
            noop.push(run(1));
            with.push(run(2));
            with_http.push(run(3));
        }
        let (m_with, m_without, m_noop, m_http) =
            (med(&mut with), med(&mut without), med(&mut noop), med(&mut with_http));
        println!("Scripted Claude Code run: {TOOL_CALLS} Bash tool calls and a stop, {RUNS} runs each, alternating");
        println!("{:<16} {:>12} {:>12} {:>12}", "", "median s", "min s", "max s");
        println!("{:<16} {:>12.3} {:>12.3} {:>12.3}", "no hooks", m_without, without[0], without[without.len() - 1]);
        println!("{:<16} {:>12.3} {:>12.3} {:>12.3}", "no-op hooks", m_noop, noop[0], noop[noop.len() - 1]);
        println!("{:<16} {:>12.3} {:>12.3} {:>12.3}", "gadfly hooks", m_with, with[0], with[with.len() - 1]);
        println!(
            "{:<16} {:>12.3} {:>12.3} {:>12.3}",
            "gadfly, http",
            m_http,
            with_http[0],
            with_http[with_http.len() - 1]
        );
        println!(
            "with [hooks] transport = \"http\": gadfly adds {:.1} ms per run ({:.1}%), {:.2} ms per tool call",
            (m_http - m_without) * 1e3,
            (m_http - m_without) / m_without * 100.0,
            (m_http - m_without) * 1e3 / TOOL_CALLS as f64
        );
        let added = m_with - m_without;
        println!(
        "gadfly adds {:.1} ms per run ({:.1}%), {:.2} ms per tool call (PostToolUse hook, plus SessionStart, UserPromptSubmit, Stop, SessionEnd per run)",
        added * 1e3,
        added / m_without * 100.0,
        added * 1e3 / TOOL_CALLS as f64
    );
        println!(
        "of which Claude Code's own cost of running hooks (no-op hooks): {:.1} ms per run; gadfly's share beyond it: {:.1} ms per run, {:.2} ms per tool call",
        (m_noop - m_without) * 1e3,
        (m_with - m_noop) * 1e3,
        (m_with - m_noop) * 1e3 / TOOL_CALLS as f64
    );
        println!("goal: overhead under 1% of a scripted agent's run time");
    }

    // The same, with each model turn taking as long as a fast real model's
    // (LATENCY_MS, default 1500 ms): what the overhead is in a real run.
    let latency = Duration::from_millis(std::env::var("LATENCY_MS").ok().and_then(|v| v.parse().ok()).unwrap_or(1500));
    let runs: usize = std::env::var("LATENCY_RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(5);
    let calls = 10;
    let (mut with, mut without, mut with_http) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..runs {
        without.push(run_with(0, calls, latency));
        with.push(run_with(2, calls, latency));
        with_http.push(run_with(3, calls, latency));
    }
    let (m_with, m_without, m_http) = (med(&mut with), med(&mut without), med(&mut with_http));
    println!(
        "\nWith a model that takes {} ms per turn: {calls} Bash tool calls and a stop, {runs} runs each, alternating",
        latency.as_millis()
    );
    println!("{:<16} {:>12} {:>12} {:>12}", "", "median s", "min s", "max s");
    println!("{:<16} {:>12.3} {:>12.3} {:>12.3}", "no hooks", m_without, without[0], without[without.len() - 1]);
    println!("{:<16} {:>12.3} {:>12.3} {:>12.3}", "gadfly hooks", m_with, with[0], with[with.len() - 1]);
    println!("{:<16} {:>12.3} {:>12.3} {:>12.3}", "gadfly, http", m_http, with_http[0], with_http[with_http.len() - 1]);
    for (name, m) in [("command hooks", m_with), ("[hooks] transport = \"http\"", m_http)] {
        let added = m - m_without;
        println!(
            "{name}: gadfly adds {:.1} ms per run ({:.2}% of the run), {:.2} ms per tool call",
            added * 1e3,
            added / m_without * 100.0,
            added * 1e3 / calls as f64
        );
    }
}
