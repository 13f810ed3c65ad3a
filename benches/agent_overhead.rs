//! A whole scripted Claude Code run (the real CLI, the mock model server)
//! with gadfly's hooks, side by side with the same run without hooks and
//! with no-op hooks: the time gadfly adds per tool call and in all, with a
//! model that answers at once (FAST_RUNS runs of each variant, default 12)
//! and with one that takes LATENCY_MS per turn (default 1500; LATENCY_RUNS
//! runs, default 6, 0 to skip). Runs alternate. Prints figures; asserts
//! none. Needs the CLI (`.ci/install-agents.sh`).

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "support/goals.rs"]
mod goals;
#[path = "../tests/mock_model/mod.rs"]
mod mock_model;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mock_model::{path_with_gadfly, MockModel, Step};

/// Tool calls in each scripted run.
const TOOL_CALLS: usize = 10;

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
    let http = gadfly::agent::attach::HttpHooks { url: d.url.clone() };
    let ours_http = gadfly::agent::attach::hooks_settings_with("gadfly", &id, Default::default(), Some(&http));
    std::fs::write(&http_settings, serde_json::to_string_pretty(&ours_http).unwrap()).unwrap();

    // `debug_log`: a folder where Claude Code writes its debug log (which
    // times each hook it runs).
    let run_with = |hooks: u8, latency: Duration, debug_log: Option<&std::path::Path>| -> Timed {
        let mut script: Vec<Step> =
            (0..TOOL_CALLS).map(|i| Step::shell(&format!("echo step {i} > /dev/null"))).collect();
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
        if let Some(dir) = debug_log {
            let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
            cmd.arg("--debug-file").arg(dir.join(format!("variant{hooks}-{stamp}.log")));
        }
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
        assert_eq!(arrivals.len(), TOOL_CALLS + 1, "every scripted turn reached the model (variant {hooks})");
        Timed {
            daemon_cpu: common::cpu_seconds(d.child.id()) - cpu,
            total: (ended - t).as_secs_f64(),
            startup: (arrivals[0] - t).as_secs_f64(),
            gaps: arrivals.windows(2).map(|w| (w[1] - w[0]).as_secs_f64()).collect(),
            tail: (ended - arrivals[arrivals.len() - 1]).as_secs_f64(),
        }
    };
    // Four variants, each run the same way: no hooks; the same hook events
    // running a command that does nothing (what Claude Code spends on a
    // command hook, whoever wrote it); gadfly's hooks; gadfly's hooks with
    // `[hooks] transport = "http"`.
    let variants: [(u8, &str); 4] = [(0, "no hooks"), (1, "no-op hooks"), (2, "gadfly hooks"), (3, "gadfly, http")];
    let env_num = |name: &str, default: u64| std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default);
    let calls = TOOL_CALLS;
    // Runs alternate (A B C D, then D C B A) so that a drift of the machine
    // does not favour one variant; each run is cut at the moments its turns
    // reach the model, so that Claude Code's start (node loading its
    // bundle, the noisiest part) is apart from the turns where the
    // tool-call hooks run; gadfly's cost is summed from the median
    // difference of each part: the start (SessionStart and UserPromptSubmit
    // hooks), each tool call (its PostToolUse hook), and the end (Stop and
    // SessionEnd hooks).
    let measure = |latency: Duration, runs: usize| -> Vec<Parts> {
        let mut timed: Vec<Vec<Timed>> = variants.iter().map(|_| Vec::new()).collect();
        for round in 0..runs {
            let mut order: Vec<usize> = (0..variants.len()).collect();
            if round % 2 == 1 {
                order.reverse();
            }
            for v in order {
                timed[v].push(run_with(variants[v].0, latency, None));
            }
        }
        timed.iter().map(|t| Parts::of(t)).collect()
    };

    // One run of each first, not timed: the page cache, and the stop's
    // evaluation (cached from then on: the workspace does not change).
    for (v, _) in &variants {
        run_with(*v, Duration::ZERO, None);
    }

    // 1. What the hooks add, in ms, with a model that answers at once: the
    // turns are then steady (their middle half spans a few ms), so many
    // runs resolve a difference of a millisecond; the hooks also compete
    // for the CPU with Claude Code's own work, so this is not flattering.
    let fast_runs = env_num("FAST_RUNS", 12) as usize;
    let fast = measure(Duration::ZERO, fast_runs);
    println!("A model that answers at once: {calls} Bash tool calls and a stop, {fast_runs} runs of each variant, alternating");
    let fast_added = report(&variants, &fast, calls);

    // 2. The same with each model turn taking as long as a fast real
    // model's (LATENCY_MS, default 1500 ms): a run's length, and the
    // overhead measured directly, which the idle turns make noisier.
    let latency = Duration::from_millis(env_num("LATENCY_MS", 1500));
    let slow_runs = env_num("LATENCY_RUNS", 6) as usize;
    if slow_runs > 0 {
        let slow = measure(latency, slow_runs);
        println!(
            "\nA model that takes {} ms per turn: {calls} Bash tool calls and a stop, {slow_runs} runs of each variant, alternating",
            latency.as_millis()
        );
        let slow_added = report(&variants, &slow, calls);
        println!(
            "\nThe overhead: what each variant adds with the model that answers at once, over a no-hook run with the {} ms model ({:.3} s):",
            latency.as_millis(),
            slow[0].total
        );
        for ((_, name), added) in variants.iter().zip(&fast_added).skip(1) {
            println!("  {name:<14} {:+.1} ms per run, {:.2}%", added * 1e3, added / slow[0].total * 100.0);
        }
        // The goal, for gadfly's two transports, measured both ways: what
        // the hooks add with the quick model over the slow model's run,
        // and the slow model's runs compared directly.
        for (v, transport) in [(2, "gadfly's command hooks"), (3, "gadfly's hooks over HTTP")] {
            let quick = fast_added[v] / slow[0].total * 100.0;
            let direct = slow_added[v] / slow[0].total * 100.0;
            goals::verdict(
                &format!("overhead of {transport} under 1% of a scripted agent's run"),
                &format!(
                    "{quick:.2}% measured with the quick model, {direct:.2}% directly, of a {:.2} s run ({} ms a turn)",
                    slow[0].total,
                    latency.as_millis()
                ),
                Some(quick < 1.0 && direct < 1.0),
            );
        }
    } else {
        println!("goal: overhead under 1% of a scripted agent's run time: not judged (LATENCY_RUNS=0: no run to compare with)");
    }

    // Claude Code's own timing of each hook it ran (its debug log), two
    // more runs of each variant: what a hook costs as the agent sees it.
    let logs = tempfile::tempdir().unwrap();
    for _ in 0..2 {
        for (v, _) in variants.iter().skip(1) {
            run_with(*v, Duration::ZERO, Some(logs.path()));
        }
    }
    println!("\nEach hook as Claude Code timed it (its debug log, 2 runs of each variant), median ms:");
    for (v, name) in variants.iter().skip(1) {
        let times = hook_times(logs.path(), *v);
        let line: Vec<String> = times.iter().map(|(event, ms)| format!("{event} {ms:.0}")).collect();
        println!("  {name:<14} {}", line.join(", "));
    }
    // Where a hook call's time goes: the daemon's own share, by event (all
    // of gadfly's runs above, both transports).
    let metrics = reqwest::blocking::Client::new()
        .get(format!("{}/metrics", d.url))
        .bearer_auth(&d.token)
        .send()
        .and_then(|r| r.text())
        .unwrap();
    println!("The daemon's own time per hook call (its hook_duration_seconds metric, every gadfly run above):");
    for (event, calls, mean_ms) in common::hook_time_by_event(&metrics) {
        println!("  {event:<20} {calls:>6.0} calls, mean {mean_ms:.2} ms");
    }
}

/// Prints each variant's parts and what it adds over the first (no hooks);
/// returns what each adds per run, s (0 for the first).
fn report(variants: &[(u8, &str)], parts: &[Parts], calls: usize) -> Vec<f64> {
    println!(
        "{:<14} {:>9} {:>15} {:>11} {:>22} {:>9} {:>14}",
        "", "run s", "run min-max s", "start ms", "turn ms (p25-p75)", "end ms", "daemon CPU ms"
    );
    for ((_, name), p) in variants.iter().zip(parts) {
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
    let mut added_per_run = vec![0.0];
    for ((_, name), p) in variants.iter().zip(parts).skip(1) {
        let per_call = p.gap - base.gap;
        let added = (p.startup - base.startup) + per_call * calls as f64 + (p.tail - base.tail);
        added_per_run.push(added);
        println!(
            "{name}: {:+.2} ms per tool call, {:+.1} ms at the start, {:+.1} ms at the end: {:+.1} ms per run, {:.2}% of this run \
             (whole runs alone: {:+.1} ms, within a no-hook spread of {:.0} ms)",
            per_call * 1e3,
            (p.startup - base.startup) * 1e3,
            (p.tail - base.tail) * 1e3,
            added * 1e3,
            added / base.total * 100.0,
            (p.total - base.total) * 1e3,
            (base.total_max - base.total_min) * 1e3
        );
    }
    added_per_run
}

/// The median duration of each hook event in the Claude Code debug logs of
/// `variant`'s runs (lines like `Hooks: PostToolUse:Bash [cmd] finished
/// with status 0 (7ms)`, and for HTTP hooks the time from `HTTP hook POST`
/// to its `HTTP hook response`).
fn hook_times(dir: &std::path::Path, variant: u8) -> Vec<(String, f64)> {
    let mut by_event: std::collections::BTreeMap<String, Vec<f64>> = Default::default();
    let prefix = format!("variant{variant}-");
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        if !entry.file_name().to_string_lossy().starts_with(&prefix) {
            continue;
        }
        let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
        let mut posted: Option<(String, chrono::DateTime<chrono::FixedOffset>)> = None;
        for line in text.lines() {
            let at = line.split(' ').next().and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok());
            if let Some(rest) = line.split("Hooks: ").nth(1) {
                if let Some(url) = rest.strip_prefix("HTTP hook POST to ") {
                    let event = url.rsplit('/').next().unwrap_or("").split('?').next().unwrap_or("").to_string();
                    posted = at.map(|a| (format!("{event} (http)"), a));
                } else if rest.starts_with("HTTP hook response") {
                    if let (Some((event, from)), Some(to)) = (posted.take(), at) {
                        by_event
                            .entry(event)
                            .or_default()
                            .push((to - from).num_microseconds().unwrap_or(0) as f64 / 1e3);
                    }
                } else if let (Some(event), Some(ms)) = (
                    rest.split([' ', ':']).next().filter(|_| rest.contains("finished with status")),
                    rest.rsplit('(').next().and_then(|m| m.strip_suffix("ms)")).and_then(|m| m.parse::<f64>().ok()),
                ) {
                    by_event.entry(event.to_string()).or_default().push(ms);
                }
            }
        }
    }
    by_event
        .into_iter()
        .map(|(event, mut v)| {
            v.sort_by(f64::total_cmp);
            (event, v[v.len() / 2])
        })
        .collect()
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
