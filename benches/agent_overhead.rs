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

    let run_with = |hooks: u8, tool_calls: usize, latency: Duration| -> Timed {
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
        let cpu = common::cpu_seconds(d.child.id());
        let t = Instant::now();
        let status = cmd.status().unwrap();
        let ended = Instant::now();
        assert!(status.success(), "claude failed (variant {hooks})");
        // When each agent turn reached the model: the run cut at those
        // moments, so that Claude Code's start (node loading its bundle,
        // the noisiest part) is apart from the turns where the tool-call
        // hooks run.
        let arrivals: Vec<Instant> =
            mock.log().into_iter().filter(|r| r.kind == mock_model::Kind::Agent).map(|r| r.at).collect();
        assert_eq!(arrivals.len(), tool_calls + 1, "every scripted turn reached the model (variant {hooks})");
        Timed {
            daemon_cpu: common::cpu_seconds(d.child.id()) - cpu,
            total: (ended - t).as_secs_f64(),
            startup: (arrivals[0] - t).as_secs_f64(),
            gaps: arrivals.windows(2).map(|w| (w[1] - w[0]).as_secs_f64()).collect(),
            tail: (ended - arrivals[arrivals.len() - 1]).as_secs_f64(),
        }
    };
    let run = |hooks: u8| run_with(hooks, TOOL_CALLS, Duration::ZERO).total;
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
    // Whole runs differ by a few hundred ms from one to the next (mostly
    // Claude Code's own start), more than gadfly adds; so each run is also
    // cut at the moments its turns reach the model, and gadfly's cost is
    // summed from the median difference of each part: the start (SessionStart
    // and UserPromptSubmit hooks), each tool call (its PostToolUse hook),
    // and the end (Stop and SessionEnd hooks).
    let latency = Duration::from_millis(std::env::var("LATENCY_MS").ok().and_then(|v| v.parse().ok()).unwrap_or(1500));
    let runs: usize = std::env::var("LATENCY_RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(6);
    let calls = 10;
    // The no-op hooks: the same hook events running `cat >/dev/null`, what
    // Claude Code spends on running a command hook, whoever wrote it.
    let variants: [(u8, &str); 4] = [(0, "no hooks"), (1, "no-op hooks"), (2, "gadfly hooks"), (3, "gadfly, http")];
    let mut timed: Vec<Vec<Timed>> = variants.iter().map(|_| Vec::new()).collect();
    for round in 0..runs {
        // Alternate the order (A B C D, then D C B A) so that a drift of
        // the machine does not favour one variant.
        let mut order: Vec<usize> = (0..variants.len()).collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for v in order {
            timed[v].push(run_with(variants[v].0, calls, latency));
        }
    }
    println!(
        "\nWith a model that takes {} ms per turn: {calls} Bash tool calls and a stop, {runs} runs each, alternating",
        latency.as_millis()
    );
    println!(
        "{:<14} {:>9} {:>15} {:>11} {:>22} {:>9} {:>14}",
        "", "run s", "run min-max s", "start ms", "turn ms (p25-p75)", "end ms", "daemon CPU ms"
    );
    let parts: Vec<Parts> = timed.iter().map(|t| Parts::of(t)).collect();
    for ((_, name), p) in variants.iter().zip(&parts) {
        println!(
            "{name:<14} {:>9.3} {:>7.3}-{:<7.3} {:>11.1} {:>10.1} ({:.1}-{:.1}) {:>9.1} {:>14.0}",
            p.total,
            p.total_min,
            p.total_max,
            p.startup * 1e3,
            p.gap * 1e3,
            p.gap_p25 * 1e3,
            p.gap_p75 * 1e3,
            p.tail * 1e3,
            p.daemon_cpu * 1e3
        );
    }
    let base = &parts[0];
    for ((_, name), p) in variants.iter().zip(&parts).skip(1) {
        let per_call = p.gap - base.gap;
        let added = (p.startup - base.startup) + per_call * calls as f64 + (p.tail - base.tail);
        println!(
            "{name}: {:+.2} ms per tool call, {:+.1} ms at the start, {:+.1} ms at the end: {:+.1} ms per run, {:.2}% of the run \
             (whole runs alone: {:+.1} ms, {:.2}%, within a no-hook spread of {:.0} ms)",
            per_call * 1e3,
            (p.startup - base.startup) * 1e3,
            (p.tail - base.tail) * 1e3,
            added * 1e3,
            added / base.total * 100.0,
            (p.total - base.total) * 1e3,
            (p.total - base.total) / base.total * 100.0,
            (base.total_max - base.total_min) * 1e3
        );
    }
    let (noop, ours) = (&parts[1], &parts[2]);
    let per_call = ours.gap - noop.gap;
    let added = (ours.startup - noop.startup) + per_call * calls as f64 + (ours.tail - noop.tail);
    println!(
        "gadfly's command hooks beyond no-op command hooks: {:+.2} ms per tool call, {:+.1} ms per run, {:.2}% of the run",
        per_call * 1e3,
        added * 1e3,
        added / base.total * 100.0
    );
    println!("goal: overhead under 1% of a scripted agent's run time");
}

/// One run of the CLI, cut at the moments its agent turns reached the model.
struct Timed {
    /// The daemon's CPU time during the run, s.
    daemon_cpu: f64,
    /// From the CLI's start to its exit, s.
    total: f64,
    /// From the start to the first turn, s.
    startup: f64,
    /// Between consecutive turns (one tool call each), s.
    gaps: Vec<f64>,
    /// From the last turn to the exit, s.
    tail: f64,
}

/// Medians over one variant's runs (the turns pooled).
struct Parts {
    daemon_cpu: f64,
    total: f64,
    total_min: f64,
    total_max: f64,
    startup: f64,
    gap: f64,
    gap_p25: f64,
    gap_p75: f64,
    tail: f64,
}

impl Parts {
    fn of(runs: &[Timed]) -> Parts {
        let sorted = |mut v: Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v
        };
        let at = |v: &[f64], q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
        let total = sorted(runs.iter().map(|r| r.total).collect());
        let startup = sorted(runs.iter().map(|r| r.startup).collect());
        let gaps = sorted(runs.iter().flat_map(|r| r.gaps.iter().copied()).collect());
        let tail = sorted(runs.iter().map(|r| r.tail).collect());
        let cpu = sorted(runs.iter().map(|r| r.daemon_cpu).collect());
        Parts {
            daemon_cpu: at(&cpu, 0.5),
            total: at(&total, 0.5),
            total_min: total[0],
            total_max: total[total.len() - 1],
            startup: at(&startup, 0.5),
            gap: at(&gaps, 0.5),
            gap_p25: at(&gaps, 0.25),
            gap_p75: at(&gaps, 0.75),
            tail: at(&tail, 0.5),
        }
    }
}
