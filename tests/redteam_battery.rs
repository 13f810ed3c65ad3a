//! `gadfly redteam` (issue #36): the battery of adversarial candidates run
//! against a campaign's own harness, through the real binary, the daemon
//! and the campaign's evaluation pipeline.
//!
//! - The qr-cpu harness as it was before the gate-integrity fixes
//!   (tests/data/redteam/qr-cpu-unhardened): the results forgeries and the
//!   build tricks are reported BROKEN.
//! - The hardened qr-cpu example, as `gadfly example DIR` writes it: every
//!   applicable attack held.
//! - A Python harness that imports the candidate into the process that
//!   times it and writes the results: the import-time attacks break it, a
//!   run of a campaign with `[redteam] before_start` is refused before the
//!   agent starts (and `--force` starts it), and the agent's hook token can
//!   neither run the battery nor read its report.
//!
//! The two qr-cpu campaigns are cut down to two scenarios and nine timed
//! calls each, and their predicate bars raised (1.5x each, 2x geomean), so
//! that no noise of a shared 2-core machine can pass an attack that gained
//! nothing; every attack that works clears them by far. The CPU batteries
//! run one at a time.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::Mutex;

use common::Daemon;
use serde_json::Value;

/// One CPU battery at a time: their timings share two cores.
static CPU: Mutex<()> = Mutex::new(());

const SCENARIOS: &str = "b128_m33_n33,b4_m100_n100";

fn copy_dir(from: &Path, to: &Path) {
    for entry in walkdir::WalkDir::new(from) {
        let entry = entry.unwrap();
        let dest = to.join(entry.path().strip_prefix(from).unwrap());
        if entry.file_type().is_dir() {
            std::fs::create_dir_all(&dest).unwrap();
        } else {
            std::fs::copy(entry.path(), &dest).unwrap();
        }
    }
}

/// The test's cut of a qr-cpu spec: two scenarios, nine timed calls, the
/// bars raised.
fn cut_qr_spec(spec: &Path) {
    let text = std::fs::read_to_string(spec).unwrap();
    let names: Vec<String> = SCENARIOS.split(',').map(|s| format!("\"{s}\"")).collect();
    let mut out = String::new();
    for line in text.lines() {
        let line = if line.starts_with("scenarios = ") {
            format!("scenarios = [{}]", names.join(", "))
        } else if line.starts_with("run = \"") {
            format!("{} --scenarios {SCENARIOS} --repeats 9\"", line.trim_end().trim_end_matches('"'))
        } else if line.starts_with("min_speedup = ") {
            "min_speedup = 1.5".to_string()
        } else if line.starts_with("min_geomean_speedup = ") {
            "min_geomean_speedup = 2.0".to_string()
        } else {
            line.to_string()
        };
        out.push_str(&line);
        out.push('\n');
    }
    assert!(out.contains("--repeats 9") && out.contains("min_geomean_speedup = 2.0"), "{out}");
    std::fs::write(spec, out).unwrap();
}

/// Runs `gadfly redteam ID --json`; its exit status and report.
fn redteam(d: &Daemon, id: &str) -> (Option<i32>, Value, Output) {
    let out = d.run(&["redteam", id, "--json"]);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "no JSON report ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code(), report, out)
}

/// The report as the CLI prints it (the table), for the test's output.
fn table(report: &Value) -> String {
    gadfly::redteam::render(&serde_json::from_value(report.clone()).unwrap())
}

fn attack<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["attacks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == name)
        .unwrap_or_else(|| panic!("no attack {name} in {report}"))
}

/// Polls `pred` for at most five minutes: a battery (several builds and
/// runs of a harness) comes before the agent, on a machine other tests
/// share (two minutes were not always enough on a loaded 2-core CI host).
fn wait_long(what: &str, pred: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
    while !pred() {
        assert!(std::time::Instant::now() < deadline, "{what} did not happen in five minutes");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// The campaign's log has the battery's events, the last report the one
/// the API returns.
fn check_recorded(d: &Daemon, id: &str, report: &Value) {
    let log = d.api_get(&format!("/campaigns/{id}/log?limit=1000"));
    let kinds: Vec<&str> = log.as_array().unwrap().iter().filter_map(|e| e["kind"].as_str()).collect();
    assert!(kinds.contains(&"redteam.started") && kinds.contains(&"redteam.report"), "{kinds:?}");
    let attacks = kinds.iter().filter(|k| **k == "redteam.attack").count();
    assert!(attacks >= report["attacks"].as_array().unwrap().len(), "{kinds:?}");
    let state = d.api_get(&format!("/campaigns/{id}/redteam"));
    assert!(state["running"].is_null(), "{state}");
    assert_eq!(state["report"]["id"], report["id"]);
    // Never cached as the workspace's evaluation.
    assert_eq!(d.api_get(&format!("/campaigns/{id}/evaluations")), serde_json::json!([]));
}

#[test]
fn the_battery_reports_the_forgeries_broken_on_the_unhardened_qr_cpu_harness() {
    let _cpu = CPU.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("qr-cpu-unhardened");
    copy_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/redteam/qr-cpu-unhardened"), &root);
    let ws = root.join("workspace");
    common::git(&ws, &["init", "-q"]);
    common::git(&ws, &["add", "-A"]);
    common::git(&ws, &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c1a4691's qr-cpu"]);
    let spec = root.join("campaign.toml");
    cut_qr_spec(&spec);
    // The harness's own weakness, seen with the sandbox (on by default,
    // which hides the results folder from the candidate's working folder)
    // switched off, as a campaign that opts out would run it.
    let text = std::fs::read_to_string(&spec).unwrap();
    assert!(text.contains("[harness]\n"));
    std::fs::write(&spec, text.replacen("[harness]\n", "[harness]\nsandbox = \"none\"\n", 1)).unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let d = Daemon::start(&data);
    let id = d.create_campaign(&spec);

    let (code, report, _) = redteam(&d, &id);
    eprintln!("unhardened qr-cpu harness (c1a4691):\n{}", table(&report));
    assert_eq!(code, Some(1), "a broken harness exits 1");
    assert_eq!(report["status"], "broken");
    let control = &report["control"];
    assert_eq!(control["holds"], false, "{control}");
    assert_eq!(control["forged_seen"], 0);
    // The forgeries of THREATS rows 2 and 3 and their kin: each reached
    // gadfly, on every scenario, and the stop would have been allowed.
    // (`forge-cwd` looks in the folders above the candidate's: the results
    // folder is no longer among them, so it holds even here.)
    for name in ["forge-atexit-env", "forge-proc-cmdline", "forge-proc-fd", "forge-detached-helper"] {
        let a = attack(&report, name);
        assert_eq!(a["result"], "broken", "{a}");
        assert_eq!(a["evidence"]["holds"], true, "{a}");
        assert_eq!(a["evidence"]["forged_seen"], 2, "the forged numbers reached the verdict: {a}");
        assert!(
            a["suggestion"].as_str().unwrap().contains("separate process")
                || a["suggestion"].as_str().unwrap().contains("process"),
            "{a}"
        );
    }
    // THREATS rows 1 and 3: the build entry point and a file name, with no
    // candidate allow-list in the spec of that time.
    for name in ["gnumakefile-shadow", "file-name-code"] {
        let a = attack(&report, name);
        assert_eq!(a["result"], "broken", "{a}");
        assert_eq!(a["evidence"]["forged_seen"], 2, "{a}");
    }
    // The old harness times the same inputs on every call: a cache passes.
    let cache = attack(&report, "output-cache");
    assert_eq!(cache["result"], "broken", "{cache}");
    assert_eq!(cache["evidence"]["forged_seen"], 0, "real, cached timings: {cache}");
    assert!(cache["suggestion"].as_str().unwrap().contains("fresh inputs"), "{cache}");
    // What even that harness catches: wrong outputs, and inputs changed.
    for name in ["constant-output", "stale-output", "modify-inputs", "precision-downgrade"] {
        let a = attack(&report, name);
        assert_eq!(a["result"], "held", "{a}");
        assert_eq!(a["by"], "harness check", "{a}");
    }
    assert_eq!(attack(&report, "py-import-forge")["result"], "not_applicable");
    check_recorded(&d, &id, &report);
}

#[test]
fn every_applicable_attack_holds_on_the_hardened_qr_cpu_example() {
    let _cpu = CPU.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let example = dir.path().join("example");
    let out = common::gadfly().args(["example"]).arg(&example).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let spec = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
    cut_qr_spec(&spec);
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let d = Daemon::start(&data);
    let id = d.create_campaign(&spec);

    let (code, report, out) = redteam(&d, &id);
    eprintln!("hardened qr-cpu example (gadfly example DIR):\n{}", table(&report));
    assert_eq!(code, Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(report["status"], "held");
    assert_eq!(report["broken"], 0);
    let attacks = report["attacks"].as_array().unwrap();
    let applicable: Vec<&Value> = attacks.iter().filter(|a| a["result"] != "not_applicable").collect();
    assert!(applicable.len() >= 14, "{} applicable attacks: {report}", applicable.len());
    for a in &applicable {
        assert_eq!(a["result"], "held", "{a}");
        assert!(a["evidence"]["forged_seen"] == 0, "forged numbers reached gadfly: {a}");
        assert!(a.get("suggestion").is_none(), "{a}");
    }
    // Which check caught what.
    let by = |name: &str| attack(&report, name)["by"].as_str().unwrap_or_default().to_string();
    assert_eq!(by("gnumakefile-shadow"), "gadfly: candidate allow-list");
    assert_eq!(by("stale-prebuilt-library"), "gadfly: candidate allow-list");
    assert_eq!(by("file-name-code"), "gadfly: candidate files");
    let helper = attack(&report, "forge-detached-helper");
    assert_eq!(helper["by"], "harness check", "{helper}");
    assert!(helper["reason"].as_str().unwrap().contains("process"), "{helper}");
    for name in ["constant-output", "stale-output", "modify-inputs", "precision-downgrade", "thread-after-return"] {
        assert_eq!(by(name), "harness check", "{name}");
    }
    // What does not apply says why: a CUDA exploit and a Python attack on
    // a C candidate.
    let cuda = attack(&report, "cuda-output-cache");
    assert_eq!(cuda["result"], "not_applicable");
    assert!(cuda["why"].as_str().unwrap().contains("cuda"), "{cuda}");
    check_recorded(&d, &id, &report);
}

/// A harness that imports the candidate into its own process, times it
/// there with time.perf_counter and writes the results from there: the
/// pattern HARNESS.md rule 2 forbids.
const BENCH_PY: &str = r#"import argparse, importlib.util, json, os, random, sys, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import baseline
spec = importlib.util.spec_from_file_location("kern", os.path.join("kernel", "kern.py"))
kern = importlib.util.module_from_spec(spec)
spec.loader.exec_module(kern)
ap = argparse.ArgumentParser()
ap.add_argument("--out", required=True)
ap.add_argument("--seed", type=int, default=1)
a = ap.parse_args()
rng = random.Random(a.seed)
lines = []
for name, n in (("s1", 3000), ("s2", 6000)):
    xs = [rng.random() for _ in range(n)]
    ref, out = baseline.work(xs), kern.work(xs)
    correct = len(ref) == len(out) and all(abs(p - q) <= 1e-9 for p, q in zip(ref, out))
    tb, tc = [], []
    for _ in range(5):
        t0 = time.perf_counter(); baseline.work(xs); tb.append(time.perf_counter() - t0)
        t0 = time.perf_counter(); kern.work(xs); tc.append(time.perf_counter() - t0)
    lines.append({"scenario": name, "correct": correct, "time_us": min(tc) * 1e6, "baseline_us": min(tb) * 1e6})
with open(a.out, "w") as f:
    for l in lines:
        f.write(json.dumps(l) + "\n")
"#;

const BASELINE_PY: &str = "def work(xs):\n    return [sum(xs[max(0, i - 8):i + 1]) for i in range(len(xs))]\n";

/// The initial kernel: the baseline's work, done twice (so it is plainly
/// slower, and only a trick passes the bar).
const KERN_PY: &str = "def work(xs):\n    out = [sum(xs[max(0, i - 8):i + 1]) for i in range(len(xs))]\n    return [sum(xs[max(0, i - 8):i + 1]) for i in range(len(xs))]\n";

fn python_campaign(root: &Path) -> PathBuf {
    let ws = root.join("ws");
    std::fs::create_dir_all(ws.join("harness")).unwrap();
    std::fs::create_dir_all(ws.join("kernel")).unwrap();
    std::fs::write(ws.join("harness/bench.py"), BENCH_PY).unwrap();
    std::fs::write(ws.join("harness/baseline.py"), BASELINE_PY).unwrap();
    std::fs::write(ws.join("kernel/kern.py"), KERN_PY).unwrap();
    std::fs::write(ws.join(".gitignore"), "__pycache__/\n").unwrap();
    common::git(&ws, &["init", "-q"]);
    common::git(&ws, &["add", "-A"]);
    common::git(&ws, &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "initial"]);
    std::fs::write(
        root.join("agent.sh"),
        "#!/bin/sh\ntouch \"$(dirname \"$PWD\")/agent-started\"\necho working\nsleep 30\n",
    )
    .unwrap();
    let spec = root.join("campaign.toml");
    std::fs::write(
        &spec,
        r#"name = "py-inprocess"
workspace = "ws"
goal = "make work faster"

[harness]
run = "python3 harness/bench.py --seed {seed} --out {results}"
timeout_s = 60
scenarios = ["s1", "s2"]
protected = ["harness/**"]
candidate = ["kernel/**"]

[predicate]
min_speedup = 1.1
min_geomean_speedup = 1.2

[redteam]
before_start = true

[agent]
kind = "command"
start = "sh ../agent.sh"
resume = "sh ../agent.sh"
"#,
    )
    .unwrap();
    spec
}

#[test]
fn an_in_process_python_harness_is_broken_and_a_run_waits_for_the_battery() {
    let dir = tempfile::tempdir().unwrap();
    let spec = python_campaign(dir.path());
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let d = Daemon::start(&data);
    let id = d.create_campaign(&spec);

    // The agent's credential can neither run the battery nor read it.
    let hook_token = d.api_get(&format!("/campaigns/{id}/hook-token"))["token"].as_str().unwrap().to_string();
    let client = reqwest::blocking::Client::new();
    let url = format!("{}/api/v1/campaigns/{id}/redteam", d.url);
    let r = client
        .post(&url)
        .bearer_auth(&hook_token)
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);
    let r = client.get(&url).bearer_auth(&hook_token).send().unwrap();
    assert_eq!(r.status().as_u16(), 403);
    let r = client.get(&url).bearer_auth(&d.token).send().unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.json::<Value>().unwrap(), serde_json::json!({"running": null, "report": null}));
    for (method, path, status) in [
        ("POST", format!("{}/api/v1/campaigns/nope/redteam", d.url), 404),
        ("GET", format!("{}/api/v1/campaigns/nope/redteam", d.url), 404),
        ("PUT", url.clone(), 405),
        ("POST", format!("{}/api/v1/campaigns/%2e%2e/redteam", d.url), 404),
    ] {
        let r = client
            .request(method.parse().unwrap(), &path)
            .bearer_auth(&d.token)
            .header("content-type", "application/json")
            .body("{\"x\": [1, 2")
            .send()
            .unwrap();
        assert_eq!(r.status().as_u16(), status, "{method} {path}");
    }

    // [redteam] before_start: the battery runs first and the run is
    // refused; the agent never starts.
    let out = d.run(&["run", &id, "--agent", "command"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("red team: py-import-forge BROKEN"), "{stdout}");
    assert!(stdout.contains("ended: the red-team battery broke the harness"), "{stdout}");
    assert!(stdout.contains("py-import-forge") && stdout.contains("--force"), "{stdout}");
    assert!(!dir.path().join("agent-started").exists(), "the agent started on a broken harness");
    let runs = d.api_get(&format!("/campaigns/{id}/runs"));
    assert_eq!(runs[0]["outcome"], "refused", "{runs}");

    let (code, report, _) = redteam(&d, &id);
    eprintln!("in-process Python harness:\n{}", table(&report));
    assert_eq!(code, Some(1));
    let forge = attack(&report, "py-import-forge");
    assert_eq!(forge["result"], "broken", "{forge}");
    assert_eq!(forge["evidence"]["forged_seen"], 2, "{forge}");
    assert!(forge["suggestion"].as_str().unwrap().contains("separate process"), "{forge}");
    let timer = attack(&report, "py-patch-timer-reference");
    assert_eq!(timer["result"], "broken", "{timer}");
    assert_eq!(timer["evidence"]["forged_seen"], 0, "real results, a patched clock: {timer}");
    assert!(timer["evidence"]["geomean_speedup"].as_f64().unwrap() > 1.2, "{timer}");
    let conftest = attack(&report, "py-conftest");
    assert_eq!(conftest["result"], "not_applicable");
    assert!(conftest["why"].as_str().unwrap().contains("pytest"), "{conftest}");
    assert_eq!(attack(&report, "forge-atexit-env")["result"], "not_applicable");
    check_recorded(&d, &id, &report);

    // --force starts the agent without the battery.
    let out = d.run(&["run", &id, "--agent", "command", "--force", "--detach"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    wait_long("the forced agent to start", || dir.path().join("agent-started").exists());
    let out = d.run(&["stop", &id]);
    assert!(out.status.success());
}

/// The GPU part: on the attention example (setup.sh DEST), every exploit of
/// the CUDA harness's suite applies, replacing kernel/attention.cu (with
/// the exploits' shared header beside it, inside the candidate), and the
/// CPU, Python and build attacks say why they do not. Without nvcc the
/// battery stops at the control, which cannot be built here, and says so
/// (exit 2); harness/cuda/tools/gpu_redteam.py runs it on a GPU.
#[test]
fn the_cuda_exploits_are_the_battery_of_the_attention_example() {
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("attn");
    let setup = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/attention-h200/setup.sh");
    let out = std::process::Command::new("bash").arg(&setup).arg(&dest).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let spec = gadfly::campaign::load(&dest.join("campaign-initial.toml")).unwrap();
    let kernel = dest.join("workspace/kernel/attention.cu");
    let files = vec![gadfly::redteam::CandidateFile {
        path: "kernel/attention.cu".into(),
        text: std::fs::read_to_string(&kernel).unwrap(),
    }];
    let host = gadfly::redteam::HostFacts::default();
    let ctx = gadfly::redteam::Context { spec: &spec, files: &files, host: &host };
    let battery = gadfly::redteam::battery().unwrap();
    let (mut applied, mut generic) = (vec![], vec![]);
    for a in &battery.attacks {
        match gadfly::redteam::plan(a, &ctx) {
            Ok(p) if a.id.starts_with("redteam/generic/c/") => {
                // The attacks written once for C, C++ and CUDA wrap the
                // exported host entry, never a __global__ kernel.
                let paths: Vec<&str> = p.writes.iter().map(|w| w.path.as_str()).collect();
                assert_eq!(paths, ["kernel/attention.cu"], "{}", a.id);
                assert_eq!(p.applied, "wraps attention_forward in kernel/attention.cu", "{}", a.id);
                let text = String::from_utf8_lossy(&p.writes[0].content);
                assert!(text.contains("extern \"C\" int attention_forward(const __nv_bfloat16* q"), "{text}");
                generic.push(a.manifest.name.clone());
            }
            Ok(p) => {
                assert!(a.id.starts_with("redteam/cuda/"), "{} applies to a CUDA campaign", a.id);
                let paths: Vec<&str> = p.writes.iter().map(|w| w.path.as_str()).collect();
                assert_eq!(paths, ["kernel/attention.cu", "kernel/common.cuh"], "{}", a.id);
                assert!(gadfly::redteam::outside_candidate(&spec, &p.touched).is_empty(), "{}", a.id);
                applied.push(a.manifest.name.clone());
            }
            Err(why) => {
                assert!(!a.id.starts_with("redteam/cuda/e") || why.contains("python"), "{} does not apply: {why}", a.id)
            }
        }
    }
    assert_eq!(applied.len(), 14, "{applied:?}");
    assert_eq!(generic, ["c-memo-identity", "c-previous-output", "c-timing-loop"]);

    let nvcc = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()).any(|d| d.join("nvcc").exists());
    if nvcc {
        eprintln!("nvcc is here: the GPU battery is harness/cuda/tools/gpu_redteam.py's");
        return;
    }
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let d = Daemon::start(&data);
    let id = d.create_campaign(&dest.join("campaign-initial.toml"));
    let (code, report, _) = redteam(&d, &id);
    assert_eq!(code, Some(2), "{report}");
    assert_eq!(report["status"], "error");
    let error = report["error"].as_str().unwrap();
    assert!(error.contains("does not build here"), "{error}");
    assert_eq!(report["attacks"], serde_json::json!([]), "no attack is judged against a harness that cannot run");
}

/// A Python harness that follows HARNESS.md rule 2: the candidate runs in a
/// process of its own (`python3 -I`, an environment of PATH only, its
/// inputs and output in files of its own), the grader times that process
/// with its own clock, compares the output with the baseline's and writes
/// the results.
const SOUND_BENCH_PY: &str = r#"import argparse, json, os, random, subprocess, sys, tempfile, time
here = os.path.dirname(os.path.abspath(__file__))
ap = argparse.ArgumentParser()
ap.add_argument("--out", required=True)
ap.add_argument("--seed", type=int, default=1)
a = ap.parse_args()
rng = random.Random(a.seed)
env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
def call(module, xs):
    with tempfile.TemporaryDirectory() as d:
        i, o = os.path.join(d, "in.json"), os.path.join(d, "out.json")
        json.dump(xs, open(i, "w"))
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-I", os.path.join(here, "runner.py"), module, i, o], env=env, cwd=d, check=False,
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        t = time.perf_counter() - t0
        try:
            return json.load(open(o)), t
        except Exception:
            return None, t
lines = []
for name, n in (("s1", 3000), ("s2", 6000)):
    correct, tb, tc = True, [], []
    for _ in range(3):
        xs = [rng.random() for _ in range(n)]
        ref, b = call(os.path.join(here, "baseline.py"), xs)
        out, c = call(os.path.abspath(os.path.join("kernel", "kern.py")), xs)
        tb.append(b); tc.append(c)
        correct = correct and out is not None and len(out) == len(ref) and all(abs(p - q) <= 1e-9 for p, q in zip(ref, out))
    lines.append({"scenario": name, "correct": correct, "time_us": min(tc) * 1e6, "baseline_us": min(tb) * 1e6})
with open(a.out, "w") as f:
    for l in lines:
        f.write(json.dumps(l) + "\n")
"#;

const RUNNER_PY: &str = r#"import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("kern", sys.argv[1])
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
json.dump(m.work(json.load(open(sys.argv[2]))), open(sys.argv[3], "w"))
"#;

#[test]
fn a_run_starts_once_the_battery_held_and_a_current_report_is_reused() {
    let dir = tempfile::tempdir().unwrap();
    let spec = python_campaign(dir.path());
    let ws = dir.path().join("ws");
    std::fs::write(ws.join("harness/bench.py"), SOUND_BENCH_PY).unwrap();
    std::fs::write(ws.join("harness/runner.py"), RUNNER_PY).unwrap();
    common::git(&ws, &["add", "-A"]);
    common::git(&ws, &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "a sound harness"]);
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let d = Daemon::start(&data);
    let id = d.create_campaign(&spec);
    let started = || {
        let log = d.api_get(&format!("/campaigns/{id}/log?limit=10000"));
        log.as_array().unwrap().iter().filter(|e| e["kind"] == "redteam.started").count()
    };

    let out = d.run(&["run", &id, "--agent", "command", "--detach"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    wait_long("the agent to start once the battery held", || dir.path().join("agent-started").exists());
    let state = d.api_get(&format!("/campaigns/{id}/redteam"));
    let report = &state["report"];
    eprintln!("sound Python harness:\n{}", table(report));
    assert_eq!(report["status"], "held", "{report}");
    assert_eq!(report["why"], "run start");
    for name in ["py-import-forge", "py-patch-timer-reference", "py-sitecustomize"] {
        assert_eq!(attack(report, name)["result"], "held", "{name}");
    }
    assert_eq!(started(), 1);

    // Stopped, then started again: the harness is unchanged and held this
    // battery, so its report is reused and the agent starts at once.
    assert!(d.run(&["stop", &id]).status.success());
    wait_long("the run to end", || d.api_get(&format!("/campaigns/{id}/runs"))[0]["status"] == "ended");
    std::fs::remove_file(dir.path().join("agent-started")).unwrap();
    let out = d.run(&["run", &id, "--agent", "command", "--detach"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    wait_long("the agent to start again", || dir.path().join("agent-started").exists());
    assert_eq!(started(), 1, "the current report was reused, no second battery");
    assert!(d.run(&["stop", &id]).status.success());
}
