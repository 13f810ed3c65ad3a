//! `gadfly replay` (issue #39): gadfly's judgment on recorded sessions,
//! offline. The real Claude Code transcripts of tests/data/corpus replayed
//! (their completion claims, their stops judged, the summary printed); the
//! project's own demo exported from its daemon and replayed; and the
//! equivalence of a replay with the live run that recorded it: a spawned
//! Claude Code run against the mock model, exported, replayed, with the
//! same stop decisions and moments as the daemon's.

mod common;
mod mock_model;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{Daemon, Fixture, ALL_PASS};
use serde_json::Value;

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

const VSLA_SPEC: &str = "tests/data/replay/vsla-unified-tests.toml";

/// `gadfly ARGS`: its stdout, or a panic with its stderr.
fn gadfly_ok(args: &[&str]) -> String {
    let out = common::gadfly().args(args).output().unwrap();
    assert!(out.status.success(), "gadfly {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

fn replay_json(args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.push("--json");
    serde_json::from_str(&gadfly_ok(&all)).unwrap()
}

/// Every thing gadfly did, with its step.
fn dids(r: &Value) -> Vec<(u64, &Value)> {
    r["steps"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["did"].as_array().unwrap().iter().map(move |d| (s["step"].as_u64().unwrap(), d)))
        .collect()
}

fn of<'a>(r: &'a Value, what: &str) -> Vec<(u64, &'a Value)> {
    dids(r).into_iter().filter(|(_, d)| d["what"] == what).collect()
}

fn decisions(r: &Value) -> Vec<String> {
    of(r, "stop").iter().map(|(_, d)| d["decision"].as_str().unwrap().to_string()).collect()
}

/// The moments as (moment, detector, source), in order.
fn moments(r: &Value) -> Vec<(String, String, String)> {
    of(r, "moment")
        .iter()
        .map(|(_, d)| {
            (
                d["moment"].as_str().unwrap().into(),
                d["detector"].as_str().unwrap().into(),
                d["source"].as_str().unwrap().into(),
            )
        })
        .collect()
}

fn quotes(r: &Value, moment: &str) -> Vec<String> {
    of(r, "moment")
        .iter()
        .filter(|(_, d)| d["moment"] == moment)
        .filter_map(|(_, d)| d["quote"].as_str().map(str::to_string))
        .collect()
}

#[test]
fn the_real_claude_code_transcripts_replay_with_their_claims_and_stops() {
    let spec = repo(VSLA_SPEC);
    let spec = spec.to_str().unwrap();
    for (file, stops) in [
        ("069508a5-1193-487c-a9b5-a6f5f3ae4f98", 2),
        ("6dc88126-2048-43a9-b5c2-b9747d5a0301", 3),
        ("9034225e-c367-4ab6-b1eb-1f478a7ae27a", 8),
    ] {
        let path = repo(&format!("tests/data/corpus/{file}.jsonl"));
        let path = path.to_str().unwrap();
        let text = gadfly_ok(&["replay", path, "--from", "claude-code", "--spec", spec]);
        let summary = text.split("\nsummary\n").nth(1).expect("a summary");
        eprintln!("=== gadfly replay {file}.jsonl --from claude-code --spec {VSLA_SPEC}\nsummary\n{summary}");
        let r = replay_json(&["replay", path, "--from", "claude-code", "--spec", spec]);
        let s = &r["summary"];
        // Every turn that ended with the agent's words is a stop; with no
        // harness output before it, the gate fails closed.
        assert_eq!(s["stops"], stops, "{file}: {s}");
        assert_eq!(s["blocked"], stops, "{file}: nothing is allowed without a passing evaluation: {s}");
        assert_eq!(decisions(&r).len(), stops);
        match file {
            "069508a5-1193-487c-a9b5-a6f5f3ae4f98" => {
                assert!(quotes(&r, "completion_claim").is_empty(), "a setup session claims nothing: {s}");
                assert_eq!(s["humans"].as_array().unwrap().len(), 3);
                assert_eq!(s["unevaluated"], 2);
            }
            "6dc88126-2048-43a9-b5c2-b9747d5a0301" => {
                // "Done! The git environment variables are now added to your
                // ~/.bashrc", then "The force push completed successfully."
                let claims = quotes(&r, "completion_claim");
                assert!(claims.iter().any(|q| q == "Done!"), "{claims:?}");
                assert!(claims.iter().any(|q| q.contains("The force push completed successfully")), "{claims:?}");
                let first = s["moments"]["completion_claim"]["first_step"].as_u64().unwrap();
                let stop_steps: Vec<u64> = of(&r, "stop").iter().map(|(n, _)| *n).collect();
                assert!(stop_steps.contains(&first), "the first claim is a stop's words: {first} {stop_steps:?}");
                assert_eq!(s["humans"].as_array().unwrap().len(), 4, "{s}");
                assert!(s["humans"][1]["text"].as_str().unwrap().starts_with("Thats not my email"), "{s}");
            }
            _ => {
                // The one run of the unit tests: 3 of 10 fail.
                assert_eq!(s["evaluations"], 1, "{s}");
                let evaluated = of(&r, "evaluated");
                let failing: Vec<&str> = evaluated[0].1["failing"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|f| f["scenario"].as_str().unwrap())
                    .collect();
                assert_eq!(
                    failing,
                    ["Addition - Success Case", "Addition - Incompatible Shapes", "2D Tensor Operations"]
                );
                // "We have successfully achieved the working checkpoint" with
                // three tests failing: blocked on them, and asked about the
                // failures it calls non-blocking.
                let step = r["steps"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|st| {
                        st["kind"] == "stop"
                            && st["excerpt"]
                                .as_str()
                                .unwrap()
                                .contains("successfully achieved the **working checkpoint**")
                    })
                    .expect("the working-checkpoint claim is a stop");
                let stop = step["did"].as_array().unwrap().iter().find(|d| d["what"] == "stop").unwrap();
                assert_eq!(
                    (stop["decision"].as_str(), stop["holds"].as_bool()),
                    (Some("block"), Some(false)),
                    "{stop}"
                );
                assert_eq!(stop["failing"].as_array().unwrap().len(), 3, "{stop}");
                assert_eq!(stop["question"]["moment"], "correctness_dismissal", "{stop}");
                assert!(stop["reason"].as_str().unwrap().contains("2D Tensor Operations"), "{stop}");
                let claims = quotes(&r, "completion_claim");
                assert!(
                    claims
                        .iter()
                        .any(|q| q.contains("We have successfully achieved the **working checkpoint** requested!")),
                    "{claims:?}"
                );
                let dismissals = quotes(&r, "correctness_dismissal");
                assert!(
                    dismissals.iter().any(|q| q.contains("Tests are running (though some are failing)")),
                    "{dismissals:?}"
                );
                assert_eq!(s["unevaluated"], 6, "the stops before the tests ran: {s}");
                // The second dismissal came before its question reached
                // the agent (in the stop's block reason, a step later): not
                // a repeat (it escalated itself before issue 46).
                assert_eq!(s["escalations"], 0, "{s}");
                assert_eq!(s["humans"].as_array().unwrap().len(), 9, "{s}");
                // The person's next message came one step after gadfly's question.
                let last = s["humans"].as_array().unwrap().last().unwrap();
                assert_eq!(last["nearest"]["steps_earlier"], 1, "{last}");
                assert_eq!(last["nearest"]["via"], "stop_hook_reason", "{last}");
            }
        }
    }
}

/// The whole shared corpus (../shared/corpus), when it is there: every
/// session replays; the figures are printed.
#[test]
fn the_shared_corpus_replays_in_process() {
    let dir = repo("../shared/corpus/claude-code-vsla");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        eprintln!("SKIPPED: the shared corpus is not at {}", dir.display());
        return;
    };
    let spec = gadfly::campaign::load_detached(&repo(VSLA_SPEC)).unwrap();
    let pattern = gadfly::campaign::check_replay_pattern(spec.replay.evaluation.as_deref().unwrap()).unwrap();
    let mut files: Vec<PathBuf> =
        entries.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "jsonl")).collect();
    files.sort();
    let (mut stops, mut claims) = (0, 0);
    eprintln!("session   steps evals stops blocked unevaluated claims moments");
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let imported = gadfly::agent::timeline::from_claude_code(&text, Some(&pattern)).unwrap();
        let r = gadfly::replay::run(&imported.timeline, &spec, &gadfly::bank::embedded().entries, &Default::default())
            .unwrap();
        let s = &r.summary;
        let n = s.moments.get("completion_claim").map_or(0, |m| m.count);
        eprintln!(
            "{:<9} {:>5} {:>5} {:>5} {:>7} {:>11} {:>6} {:?}",
            &f.file_name().unwrap().to_string_lossy()[..8],
            s.steps,
            s.evaluations,
            s.stops,
            s.blocked,
            s.unevaluated,
            n,
            s.moments.iter().map(|(k, v)| format!("{k} {} (first at {})", v.count, v.first_step)).collect::<Vec<_>>()
        );
        assert_eq!(s.stops, s.blocked + s.allowed + s.recorded);
        stops += s.stops;
        claims += n;
    }
    // One completion claim per message, whatever its sentences (44 on the
    // corpus as committed).
    assert!(files.len() >= 10 && stops > 20 && claims > 35, "{} files, {stops} stops, {claims} claims", files.len());
}

#[test]
fn import_then_replay_is_replay_from_the_session_and_the_seed_decides_the_draw() {
    let dir = tempfile::tempdir().unwrap();
    let spec = repo(VSLA_SPEC);
    let spec = spec.to_str().unwrap();
    let session = repo("tests/data/corpus/9034225e-c367-4ab6-b1eb-1f478a7ae27a.jsonl");
    let session = session.to_str().unwrap();
    let timeline = gadfly_ok(&["replay", "import", "claude-code", session, "--spec", spec]);
    let first = timeline.lines().next().unwrap();
    assert!(first.starts_with(r#"{"v":1,"kind":"header","source":"claude-code""#), "{first}");
    assert!(timeline.lines().any(|l| l.contains(r#""kind":"evaluation""#) && l.contains("2D Tensor Operations")));
    let file = dir.path().join("t.jsonl");
    std::fs::write(&file, &timeline).unwrap();
    let file = file.to_str().unwrap();
    let from_file = replay_json(&["replay", file, "--spec", spec, "--seed", "3"]);
    let direct = replay_json(&["replay", session, "--from", "claude-code", "--spec", spec, "--seed", "3"]);
    assert_eq!(from_file["steps"], direct["steps"]);
    assert_eq!(from_file["summary"], direct["summary"]);
    // Same seed, same replay; the seeds draw different questions.
    assert_eq!(replay_json(&["replay", file, "--spec", spec, "--seed", "3"]), from_file);
    let asked = |r: &Value| -> Vec<String> {
        of(r, "queued").iter().map(|(_, d)| d["question"]["source"].as_str().unwrap().to_string()).collect()
    };
    let draws: std::collections::HashSet<Vec<String>> = ["1", "2", "3", "4"]
        .iter()
        .map(|seed| asked(&replay_json(&["replay", file, "--spec", spec, "--seed", seed])))
        .collect();
    assert!(draws.len() > 1, "{draws:?}");
    // Audit mode only records; the HTML page is written.
    let page = dir.path().join("r.html");
    let audit = replay_json(&["replay", file, "--spec", spec, "--mode", "audit", "--html", page.to_str().unwrap()]);
    assert!(decisions(&audit).iter().all(|d| d == "record"), "{:?}", decisions(&audit));
    assert_eq!(audit["summary"]["questions_asked"], 0);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("<svg") && html.contains("stop-record") && html.contains("2D Tensor Operations"));
    // A bad timeline is refused with its line and field.
    std::fs::write(dir.path().join("bad.jsonl"), format!("{first}\n{{\"t\":1,\"kind\":\"stop\"}}\n")).unwrap();
    let out = common::gadfly()
        .args(["replay", dir.path().join("bad.jsonl").to_str().unwrap(), "--spec", spec])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("timeline line 2: field `text`: missing"), "{err}");
}

/// The demo as its daemon recorded it (exported once, committed), replayed
/// with the example's spec: the live decisions.
#[test]
fn the_committed_demo_timeline_replays_as_the_live_demo_decided() {
    let r = replay_json(&[
        "replay",
        repo("tests/data/replay/demo-qr-cpu.timeline.jsonl").to_str().unwrap(),
        "--spec",
        repo("examples/qr-cpu/campaign.toml").to_str().unwrap(),
    ]);
    eprintln!("demo replay summary: {}", serde_json::to_string_pretty(&r["summary"]).unwrap());
    assert_eq!(decisions(&r), ["block", "block", "allow"]);
    assert_eq!(r["summary"]["agreement"]["agree"], 3);
    // Blocked stops carry a question (which one is the bank's of the day:
    // the live demo below compares them with the daemon's).
    for (_, stop) in of(&r, "stop").iter().take(2) {
        assert!(stop["question"]["text"].as_str().is_some_and(|t| !t.is_empty()), "{stop}");
        assert!(stop["recorded"]["question"].as_str().is_some(), "{stop}");
    }
    let stops = of(&r, "stop");
    assert!(stops[0].1["failing"]
        .as_array()
        .unwrap()
        .iter()
        .all(|f| f["reasons"][0].as_str().unwrap().starts_with("incorrect")));
    let slow: Vec<&str> =
        stops[1].1["failing"].as_array().unwrap().iter().map(|f| f["scenario"].as_str().unwrap()).collect();
    assert_eq!(slow, ["b128_m60_n20"]);
    let m = moments(&r);
    assert_eq!(m.iter().filter(|x| x.0 == "completion_claim").count(), 3, "{m:?}");
    assert_eq!(m[0].0, "start");
}

/// The project's own demo, run now, exported from its daemon and replayed:
/// the replay decides, finds and asks what the daemon did.
#[test]
fn the_demo_exported_from_its_daemon_replays_with_its_decisions_moments_and_questions() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let out =
        common::gadfly().args(["demo", "--exit", "--listen", "127.0.0.1:0", "--data-dir"]).arg(&data).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "demo failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let id = stdout
        .lines()
        .find_map(|l| l.strip_prefix("campaign ").and_then(|r| r.split(':').next()))
        .expect("the demo names its campaign")
        .to_string();
    // The demo's data dir, served again (SQLite, whatever the tests use).
    let d = Daemon::start_with(&data, None);
    let exported = d.run(&["replay", "export", &id]);
    assert!(exported.status.success(), "{}", String::from_utf8_lossy(&exported.stderr));
    let timeline = dir.path().join("demo.jsonl");
    std::fs::write(&timeline, &exported.stdout).unwrap();
    let r = replay_json(&[
        "replay",
        timeline.to_str().unwrap(),
        "--spec",
        repo("examples/qr-cpu/campaign.toml").to_str().unwrap(),
    ]);
    let live_stops: Vec<String> = d
        .api_get(&format!("/campaigns/{id}/stops"))
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["decision"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(live_stops, ["block", "block", "allow"]);
    assert_eq!(decisions(&r), live_stops);
    let log = d.api_get(&format!("/campaigns/{id}/log?limit=10000"));
    let live_moments: Vec<(String, String, String)> = log
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "moment")
        .map(|e| {
            let p = &e["payload"];
            (
                p["moment"].as_str().unwrap().into(),
                p["detector"].as_str().unwrap().into(),
                p["source"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(moments(&r), live_moments);
    let live_asked: Vec<String> = log
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "question.delivered")
        .map(|e| e["payload"]["bank_id"].as_str().unwrap_or("human").to_string())
        .collect();
    let asked: Vec<String> =
        of(&r, "delivered").iter().map(|(_, d)| d["question"]["source"].as_str().unwrap().to_string()).collect();
    assert_eq!(asked, live_asked, "the same bank entries, drawn with the daemon's seeds");
    eprintln!("demo {id}: live {live_stops:?}, moments {live_moments:?}, asked {live_asked:?}");
}

// ---------------------------------------------------------------------
// The equivalence test: a spawned Claude Code run, exported and replayed.
// ---------------------------------------------------------------------

const WRONG: &str = "a true 50 100\nb false 40 100\nc true 80 100\n";
const LIMIT: &str = "This is the hardware limit: we are memory bound, so no further speedup is possible.";

fn toml_str(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

fn write_candidate(text: &str) -> String {
    format!("printf '{}' > candidate.txt", text.replace('\n', "\\n"))
}

/// SIGKILLs the process groups below `root` (the agents the daemon spawned).
fn kill_agents(root: u32) {
    let own = nix::unistd::getpgrp();
    let mut parent = std::collections::HashMap::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else { continue };
        if let Some(ppid) = rest.split_whitespace().nth(1).and_then(|p| p.parse::<u32>().ok()) {
            parent.insert(pid, ppid);
        }
    }
    for &pid in parent.keys() {
        let mut p = pid;
        while let Some(&pp) = parent.get(&p) {
            if pp == root {
                if let Ok(pg) = nix::unistd::getpgid(Some(nix::unistd::Pid::from_raw(pid as i32))) {
                    if pg != own {
                        let _ = nix::sys::signal::killpg(pg, nix::sys::signal::Signal::SIGKILL);
                    }
                }
                break;
            }
            if pp <= 1 {
                break;
            }
            p = pp;
        }
    }
}

struct Killer(u32);

impl Drop for Killer {
    fn drop(&mut self) {
        kill_agents(self.0);
    }
}

#[test]
fn a_spawned_claude_code_run_replays_with_the_live_decisions_and_moments() {
    let test = "a_spawned_claude_code_run_replays_with_the_live_decisions_and_moments";
    let Some(bin) = mock_model::agent_or_skip("GADFLY_CLAUDE_BIN", "claude", test) else { return };
    use mock_model::{MockModel, Step};
    // A claimed limit while writing a wrong candidate, a wrong completion
    // claim (blocked: b is wrong), a fix, a right one (allowed).
    let mock = MockModel::start(vec![
        Step::say_then_shell(LIMIT, &write_candidate(WRONG)).described("Write the new candidate"),
        Step::text("All scenarios pass now. Done."),
        Step::shell(&write_candidate(ALL_PASS))
            .described("Fix b")
            .when_last_user_contains("gadfly: you may not stop yet"),
        Step::text("Fixed b. Done."),
    ]);
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("claude-config");
    std::fs::create_dir_all(&config).unwrap();
    let env = [
        ("HOME", home.path().display().to_string()),
        ("CLAUDE_CONFIG_DIR", config.display().to_string()),
        ("ANTHROPIC_BASE_URL", mock.url.clone()),
        ("ANTHROPIC_API_KEY", "dummy".into()),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".into()),
        ("DISABLE_TELEMETRY", "1".into()),
        ("DISABLE_AUTOUPDATER", "1".into()),
        ("IS_SANDBOX", "1".into()),
    ];
    let env: Vec<String> = env.iter().map(|(k, v)| format!("{k} = {}", toml_str(v))).collect();
    let agent = format!("[agent]\nbin = {}\nenv = {{ {} }}\n", toml_str(&bin.display().to_string()), env.join(", "));
    let f = Fixture::new(&agent);
    let data = f.data_dir();
    // A clean environment: the daemon passes its own on to the agent.
    let mut cmd = common::Daemon::serve_command(&data);
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .env("LANG", "C.UTF-8")
        .env("RUST_LOG", "info,sqlx=warn");
    let d = Daemon::start_cmd(&data, cmd);
    let _killer = Killer(d.child.id());
    let id = d.create_campaign(&f.spec());
    let started = Instant::now();
    let mut run = d
        .cmd()
        .args(["run", &id, "--agent", "claude-code"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let status = loop {
        if let Some(s) = run.try_wait().unwrap() {
            break s;
        }
        assert!(started.elapsed() < Duration::from_secs(240), "the run did not end: {}", mock.describe());
        std::thread::sleep(Duration::from_millis(100));
    };
    let out = run.wait_with_output().unwrap();
    assert!(status.success(), "gadfly run: {}\n{}", String::from_utf8_lossy(&out.stderr), mock.describe());
    // The moments of the stream's last messages are raised after their grace.
    std::thread::sleep(Duration::from_secs(7));

    let exported = d.run(&["replay", "export", &id]);
    assert!(exported.status.success(), "{}", String::from_utf8_lossy(&exported.stderr));
    let timeline = f.dir.path().join("run.jsonl");
    std::fs::write(&timeline, &exported.stdout).unwrap();
    let r = replay_json(&["replay", timeline.to_str().unwrap(), "--spec", f.spec().to_str().unwrap()]);
    eprintln!(
        "--- timeline ---\n{}\n--- replay ---\n{}",
        String::from_utf8_lossy(&exported.stdout),
        gadfly_ok(&["replay", timeline.to_str().unwrap(), "--spec", f.spec().to_str().unwrap()])
    );

    // The stop decisions: the daemon's, one for one.
    let live: Vec<String> = d
        .api_get(&format!("/campaigns/{id}/stops"))
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["decision"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(live, ["block", "allow"], "{}", mock.describe());
    assert_eq!(decisions(&r), live);
    assert_eq!(r["summary"]["agreement"]["agree"], 2, "{}", r["summary"]);
    let stops = of(&r, "stop");
    let failing: Vec<&str> =
        stops[0].1["failing"].as_array().unwrap().iter().map(|f| f["scenario"].as_str().unwrap()).collect();
    assert_eq!(failing, ["b"]);
    // The moments: the same ones (moment, detector, source), the limit
    // claim of the stream and the completion claims of the stops included.
    let log = d.api_get(&format!("/campaigns/{id}/log?limit=10000"));
    let mut live_moments: Vec<(String, String, String)> = log
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "moment")
        .map(|e| {
            let p = &e["payload"];
            (
                p["moment"].as_str().unwrap().into(),
                p["detector"].as_str().unwrap().into(),
                p["source"].as_str().unwrap().into(),
            )
        })
        .collect();
    let mut replayed = moments(&r);
    assert!(live_moments.iter().any(|m| m.0 == "limit_claim"), "{live_moments:?}");
    assert!(live_moments.iter().filter(|m| m.0 == "completion_claim").count() >= 2, "{live_moments:?}");
    live_moments.sort();
    replayed.sort();
    assert_eq!(replayed, live_moments);
}

/// Issue 35, on real moments: the three real Claude Code sessions
/// (tests/data/corpus, public transcripts nobody here wrote), replayed in
/// autonomous mode under several seeds. Every question asked at a moment
/// other than the start names what it is about (the failing scenarios, the
/// detector's account or the agent's own words) before the question, and
/// the plateaus' picks spread over at least four groups. (Before the
/// stop's picks carried evidence, the completion questions asked at a
/// failing stop named nothing.)
#[test]
fn questions_on_real_sessions_name_their_evidence_and_plateaus_spread_over_groups() {
    let spec = repo(VSLA_SPEC);
    let spec = spec.to_str().unwrap();
    let mut groups: std::collections::BTreeMap<String, std::collections::BTreeSet<String>> = Default::default();
    let mut asked = 0;
    for seed in ["1", "2", "3", "4"] {
        for file in [
            "069508a5-1193-487c-a9b5-a6f5f3ae4f98",
            "6dc88126-2048-43a9-b5c2-b9747d5a0301",
            "9034225e-c367-4ab6-b1eb-1f478a7ae27a",
        ] {
            let path = repo(&format!("tests/data/corpus/{file}.jsonl"));
            let args = [
                "replay",
                path.to_str().unwrap(),
                "--from",
                "claude-code",
                "--spec",
                spec,
                "--mode",
                "autonomous",
                "--seed",
                seed,
            ];
            let r = replay_json(&args);
            for (_, d) in of(&r, "queued") {
                let q = &d["question"];
                let (moment, text) = (q["moment"].as_str().unwrap(), q["text"].as_str().unwrap());
                let group = q["source"].as_str().unwrap().split('-').next().unwrap().to_string();
                groups.entry(moment.to_string()).or_default().insert(group);
                asked += 1;
                if moment != "start" {
                    assert!(
                        text.starts_with("About ") || text.starts_with("You wrote: "),
                        "{file} seed {seed}: a {moment} question names nothing: {text}"
                    );
                }
            }
        }
    }
    eprintln!("{asked} questions; groups by moment: {groups:?}");
    for moment in ["plateau", "correctness_dismissal", "completion_claim"] {
        assert!(groups.contains_key(moment), "no {moment} question on the real sessions: {groups:?}");
    }
    assert!(groups["plateau"].len() >= 4, "plateau picks from too few groups: {groups:?}");
}

/// `gadfly bank stats --replay`: the figures and uplift of `gadfly bank
/// stats` learned offline from replay reports pooled. A timeline that
/// plateaus again and again, replayed with half its moments withheld under
/// two seeds: the uplift rows count exactly the questions and withheld
/// moments the two reports show, the text has the uplift table, and a file
/// that is not a report is refused with its path.
#[test]
fn bank_stats_learn_offline_from_replay_reports_pooled() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("spec.toml");
    std::fs::write(
        &spec,
        "name = 'plateaus'\nworkspace = '.'\n[harness]\nrun = 'true {results}'\nscenarios = ['a', 'b']\n\
         [predicate]\nmin_speedup = 1.0\n[questions]\nmode = 'autonomous'\nwithhold = 0.5\n\
         [moments]\nplateau_evaluations = 2\n",
    )
    .unwrap();
    // 60 evaluations: a slow climb with stalls (plateaus), every seventh
    // one incorrect; each followed by a tool call and its result, which
    // carries the waiting question to the agent.
    let mut lines = vec![r#"{"v":1,"kind":"header","source":"test","campaign":"plateaus-1"}"#.to_string()];
    for k in 0..60u32 {
        let g = 1.0 + 0.04 * f64::from(k / 5) + if k % 5 == 2 { 0.05 } else { 0.0 };
        let correct = k % 7 != 3;
        let t = f64::from(k) * 10.0;
        let scenarios: Vec<String> = ["a", "b"]
            .iter()
            .map(|s| {
                format!(r#"{{"scenario":"{s}","correct":{correct},"time_us":{:.3},"baseline_us":100}}"#, 100.0 / g)
            })
            .collect();
        lines.push(format!(r#"{{"t":{t},"kind":"evaluation","scenarios":[{}]}}"#, scenarios.join(",")));
        lines.push(format!(r#"{{"t":{},"kind":"tool_call","tool":"Bash","text":"make bench"}}"#, t + 1.0));
        lines.push(format!(r#"{{"t":{},"kind":"tool_result","text":"done"}}"#, t + 2.0));
    }
    let timeline = dir.path().join("t.jsonl");
    std::fs::write(&timeline, lines.join("\n") + "\n").unwrap();
    let bank_dir = repo("question_bank");
    let bank = gadfly::bank::load::load_dir(&bank_dir).unwrap();
    let (timeline, spec, bank_arg) =
        (timeline.to_str().unwrap(), spec.to_str().unwrap(), bank_dir.to_str().unwrap().to_string());

    // What the two reports show: each delivered bank question (kind, group,
    // moment) and each withheld moment.
    let mut asked: Vec<(String, String, String)> = vec![];
    let mut withheld: Vec<String> = vec![];
    let mut files = vec![];
    for seed in ["1", "2"] {
        let r = replay_json(&["replay", timeline, "--spec", spec, "--seed", seed, "--bank", &bank_arg]);
        let evaluated = of(&r, "evaluated");
        assert!(evaluated.iter().any(|(_, d)| d["incorrect"] == true), "seed {seed}: no incorrect evaluation");
        assert!(evaluated.iter().any(|(_, d)| d["incorrect"] == false), "seed {seed}: no correct evaluation");
        let mine: Vec<String> = of(&r, "moment")
            .iter()
            .filter(|(_, d)| d["outcome"] == "withheld")
            .map(|(_, d)| d["moment"].as_str().unwrap().to_string())
            .collect();
        let delivered: Vec<&Value> =
            of(&r, "delivered").into_iter().map(|(_, d)| &d["question"]).filter(|q| q["source"] != "human").collect();
        let at_withheld =
            delivered.iter().filter(|q| q["moment"].as_str().is_some_and(|m| mine.iter().any(|w| w == m))).count();
        assert!(!mine.is_empty() && at_withheld > 0, "seed {seed}: {} withheld, {at_withheld} asked there", mine.len());
        for q in delivered {
            let group = bank.get(q["source"].as_str().unwrap()).map_or("", |e| e.group.as_str()).to_string();
            let kind = serde_json::to_value(gadfly::bank::groups::kind_of_group(&group)).unwrap();
            asked.push((kind.as_str().unwrap().to_string(), group, q["moment"].as_str().unwrap_or("").to_string()));
        }
        withheld.extend(mine);
        let file = dir.path().join(format!("seed-{seed}.json"));
        std::fs::write(&file, serde_json::to_string(&r).unwrap()).unwrap();
        files.push(file.to_str().unwrap().to_string());
    }

    let args = ["bank", "stats", "--replay", &files[0], "--replay", &files[1], "--bank", &bank_arg];
    let stats: Value = serde_json::from_str(&gadfly_ok(&[&args[..], &["--json"]].concat())).unwrap();
    let rows = stats["uplift"].as_array().unwrap();
    assert!(!rows.is_empty(), "{stats}");
    // Every row counts what the reports show: of the questions of its kind,
    // group and moment, those asked at a moment that was withheld somewhere,
    // against the withheld moments of those moments (the rest `unmatched`;
    // a row with nothing to compare counts every question against none).
    for row in rows {
        let mine: Vec<&(String, String, String)> = asked
            .iter()
            .filter(|(kind, group, moment)| {
                !group.is_empty()
                    && row["kind"] == kind.as_str()
                    && (row["group"].is_null() || row["group"] == group.as_str())
                    && (row["moment"].is_null() || row["moment"] == moment.as_str())
            })
            .collect();
        let matched: Vec<&&(String, String, String)> = mine.iter().filter(|(_, _, m)| withheld.contains(m)).collect();
        let moments: std::collections::BTreeSet<&String> = matched.iter().map(|(_, _, m)| m).collect();
        let controls = withheld.iter().filter(|m| moments.contains(m)).count();
        let want = if matched.is_empty() { (mine.len(), 0) } else { (matched.len(), controls) };
        assert_eq!(
            (row["asked"]["n"].as_u64(), row["withheld"]["n"].as_u64()),
            (Some(want.0 as u64), Some(want.1 as u64)),
            "{row}"
        );
    }
    // The rows over all groups of each kind: together every question asked
    // at a withheld moment, and every withheld moment.
    let kind_rows: Vec<&Value> = rows.iter().filter(|r| r["group"].is_null()).collect();
    let compared: u64 =
        kind_rows.iter().filter(|r| r["withheld"]["n"] != 0).map(|r| r["asked"]["n"].as_u64().unwrap()).sum();
    let at_withheld = asked.iter().filter(|(_, g, m)| !g.is_empty() && withheld.contains(m)).count() as u64;
    assert_eq!(compared, at_withheld, "{kind_rows:?}");
    // Every withheld moment of a moment where questions were asked is
    // counted by a kind's row (by both when both kinds were asked there).
    let asked_at: std::collections::BTreeSet<&String> =
        asked.iter().filter(|(_, g, _)| !g.is_empty()).map(|(_, _, m)| m).collect();
    let coverable = withheld.iter().filter(|m| asked_at.contains(m)).count() as u64;
    let counted: u64 = kind_rows.iter().map(|r| r["withheld"]["n"].as_u64().unwrap()).sum();
    assert!(coverable > 0 && counted >= coverable, "{coverable} withheld moments to count: {kind_rows:?}");
    // The entries: the asks of each bank id add up to the questions asked.
    let asks: u64 = stats
        .as_object()
        .unwrap()
        .iter()
        .filter(|(k, _)| *k != "uplift")
        .map(|(_, s)| s["asks"].as_u64().unwrap())
        .sum();
    assert_eq!(asks, asked.len() as u64);
    // Nobody read a replay's questions: no entry is confirmed by one.
    let statuses: Vec<&str> = stats
        .as_object()
        .unwrap()
        .iter()
        .filter(|(k, _)| *k != "uplift")
        .map(|(_, s)| s["status"].as_str().unwrap())
        .collect();
    assert!(statuses.iter().all(|s| *s == "unverified"), "{statuses:?}");

    let text = gadfly_ok(&args);
    assert!(text.starts_with("replayed logs: the agents in them never read gadfly's questions"), "{text}");
    assert!(text.contains("null calibration"), "{text}");
    eprintln!("gadfly bank stats --replay (seeds 1 and 2):\n{text}");
    assert!(
        text.contains("\nuplift: the rate of reward after a question minus the rate after a withheld moment"),
        "{text}"
    );
    assert!(text.contains("withheld (n)"), "{text}");

    // A file that is not a report, and one that is not JSON, are refused with their path.
    let not_report = dir.path().join("not-a-report.json");
    std::fs::write(&not_report, r#"{"hello": 1}"#).unwrap();
    let not_json = dir.path().join("not-json.json");
    std::fs::write(&not_json, "steps: []").unwrap();
    for (bad, why) in [(&not_report, "not a replay report: no `steps`"), (&not_json, "not JSON")] {
        let bad = bad.to_str().unwrap();
        let out = common::gadfly().args(["bank", "stats", "--replay", &files[0], "--replay", bad]).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(bad) && err.contains(why), "{err}");
    }
}
