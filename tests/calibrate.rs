//! `gadfly calibrate` against the real daemon (issue 47, part 1): the
//! initial kernel against itself, several runs; a fair harness passes, a
//! biased one is named and the command fails; the run-to-run noise found
//! widens the intervals of every later evaluation; the agent's hook token
//! may not calibrate.

mod common;

use common::{Daemon, Fixture};
use serde_json::Value;

fn calibrate(d: &Daemon, id: &str, runs: &str) -> (i32, Value) {
    let out = d.run(&["calibrate", id, "--runs", runs, "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "calibrate --json: {e}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), v)
}

#[test]
fn a_fair_harness_passes_and_a_biased_one_is_named() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    // The fixture's initial kernel: 100 us against 100 us on every scenario.
    let (code, v) = calibrate(&d, &id, "3");
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["fair"], true);
    let scenarios = v["calibration"]["scenarios"].as_array().unwrap();
    assert_eq!(scenarios.len(), 3);
    for s in scenarios {
        assert_eq!((s["runs"].as_u64(), s["bias"].as_f64(), s["biased"].as_bool()), (Some(3), Some(1.0), Some(false)));
    }
    let events = d.events(&id, "campaign.calibrated");
    assert_eq!(events.len(), 1);
    // Each run is gadfly's own measurement, never the campaign's verdict.
    let evals = d.api_get(&format!("/campaigns/{id}/evaluations"));
    let trees: Vec<&str> = evals.as_array().unwrap().iter().filter_map(|e| e["tree"].as_str()).collect();
    assert_eq!(trees.iter().filter(|t| t.contains("+calibrate-")).count(), 3, "{trees:?}");

    // A harness that times the same kernel 10% slower as the candidate.
    let f = Fixture::new("");
    f.set_candidate("a true 100 100\nb true 110 100\nc true 100 100\n");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let (code, v) = calibrate(&d, &id, "3");
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["fair"], false);
    let b = v["calibration"]["scenarios"].as_array().unwrap().iter().find(|s| s["scenario"] == "b").unwrap();
    assert_eq!(b["biased"], true, "{b}");
    assert!((b["bias"].as_f64().unwrap() - 0.909).abs() < 0.001, "{b}");
    let text = String::from_utf8(d.run(&["calibrate", &id, "--runs", "2"]).stdout).unwrap();
    assert!(text.contains("BIASED") && text.contains("NOT FAIR"), "{text}");
    // Out of range, refused with why.
    let out = d.run(&["calibrate", &id, "--runs", "40"]);
    assert_ne!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stderr).contains("2 to 20"), "{}", String::from_utf8_lossy(&out.stderr));
}

/// A harness whose figures move 4% from run to run (a counter outside the
/// evaluation folder, so every run differs the same way): the calibration
/// finds that spread, and the next evaluation's intervals are at least that
/// wide, though each run's own samples are tight.
#[test]
fn the_noise_a_calibration_finds_widens_later_intervals() {
    let dir = tempfile::tempdir().unwrap();
    let counter = dir.path().join("count");
    let script = format!(
        r#"n=$(cat {c} 2>/dev/null || echo 0); echo $((n + 1)) > {c}
t=$(echo "96 104 98 102 100" | cut -d' ' -f$((n % 5 + 1)))
for s in a b c; do printf '{{"scenario":"%s","correct":true,"time_us":%s,"baseline_us":100,"samples":50,"cv":0.002}}\n' $s $t >> "$1"; done"#,
        c = counter.display()
    );
    let f = Fixture::with_run("", "sh harness/noisy.sh {results}");
    std::fs::write(f.ws().join("harness/noisy.sh"), script).unwrap();
    common::git(&f.ws(), &["add", "-A"]);
    common::git(&f.ws(), &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "noisy"]);
    // The counter lives outside the evaluation folder: no sandbox here.
    let spec = std::fs::read_to_string(f.spec()).unwrap().replace("[harness]\n", "[harness]\nsandbox = \"none\"\n");
    std::fs::write(f.spec(), spec).unwrap();
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let (code, v) = calibrate(&d, &id, "5");
    assert_eq!(code, 0, "a spread is not a bias: {v}");
    let a = &v["calibration"]["scenarios"][0];
    let noise = a["noise"].as_f64().unwrap();
    assert!(noise > 0.05, "twice a spread of about 3.2%: {a}");
    let out = d.run(&["eval", &id, "--json"]);
    let e: Value = serde_json::from_slice(&out.stdout).unwrap();
    let s = &e["scenarios"][0];
    let (lo, hi, x) =
        (s["interval"][0].as_f64().unwrap(), s["interval"][1].as_f64().unwrap(), s["speedup"].as_f64().unwrap());
    assert!((hi / x).ln() >= noise * 0.999 && (x / lo).ln() >= noise * 0.999, "{s} vs noise {noise}");
}

/// The agent may not calibrate (it could run it while it loads the
/// machine): the hook token is refused.
#[test]
fn the_hook_token_may_not_calibrate() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let token = d.api_get(&format!("/campaigns/{id}/hook-token"))["token"].as_str().unwrap().to_string();
    let out = d.cmd().env("GADFLY_TOKEN", &token).args(["calibrate", &id, "--runs", "2"]).output().unwrap();
    assert_ne!(out.status.code(), Some(0));
    assert!(d.events(&id, "campaign.calibrated").is_empty());
}

/// Issue 47, part 1: `campaign create` calibrates (unless the spec or
/// `--no-calibrate` says not to); a biased harness is named there, and
/// `gadfly run` refuses the campaign until it is fair, the spec accepts
/// the bias, or `--force`.
#[test]
fn a_campaign_is_calibrated_at_create_and_a_biased_one_is_refused_a_run() {
    let agent = "[agent]\nkind = \"command\"\nstart = \"sleep 30\"\nresume = \"sleep 30\"\n";
    let biased = "a true 100 100\nb true 110 100\nc true 100 100\n";
    let f = Fixture::new(agent);
    f.set_candidate(biased);
    let d = Daemon::start(&f.data_dir());
    let out = d.run(&["campaign", "create", f.spec().to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "created, and says why it is refused: {err}");
    assert!(err.contains("calibrating the harness: the initial kernel against itself, 5 runs"), "{err}");
    assert!(err.contains("BIASED") && err.contains("NOT FAIR: `gadfly run"), "{err}");
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert_eq!(d.events(&id, "campaign.calibrated").len(), 1);
    let out = d.run(&["run", &id, "--agent", "command", "--detach"]);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!out.status.success(), "a run on a biased harness is refused");
    assert!(err.contains("the harness is not fair") && err.contains("b at 0.909x") && err.contains("--force"), "{err}");
    assert_eq!(d.api_get(&format!("/campaigns/{id}/runs")), serde_json::json!([]), "no run was recorded");
    // Fixed and calibrated again: the run starts.
    f.set_candidate("a true 100 100\nb true 100 100\nc true 100 100\n");
    common::git(&f.ws(), &["add", "-A"]);
    let (code, v) = calibrate(&d, &id, "3");
    assert_eq!(code, 1, "the first calibrated tree is calibrated again, and it is still biased: {v}");
    // (the calibrated tree is the campaign's initial kernel; a harness fix
    // is a new campaign, or the spec accepts the bias, or --force)
    let out = d.run(&["run", &id, "--agent", "command", "--detach", "--force"]);
    assert!(out.status.success(), "--force starts it: {}", String::from_utf8_lossy(&out.stderr));
    assert!(d.run(&["stop", &id]).status.success());

    // The spec accepts the bias: the run starts.
    let f = Fixture::new(&format!("{agent}[calibration]\naccept_bias = true\nruns = 3\n"));
    f.set_candidate(biased);
    let d = Daemon::start(&f.data_dir());
    let out = d.run(&["campaign", "create", f.spec().to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(err.contains("3 runs") && err.contains("NOT FAIR, accepted by the spec"), "{err}");
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let out = d.run(&["run", &id, "--agent", "command", "--detach"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(d.run(&["stop", &id]).status.success());

    // Opted out, in the spec or on the command line: nothing is run.
    let f = Fixture::new("[calibration]\nat_create = false\n");
    let d = Daemon::start(&f.data_dir());
    let out = d.run(&["campaign", "create", f.spec().to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("not calibrated"));
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(d.events(&id, "campaign.calibrated").is_empty());
    assert_eq!(d.api_get(&format!("/campaigns/{id}/evaluations")), serde_json::json!([]));
    // A bad value is named with its line.
    let f = Fixture::new("[calibration]\nruns = 1\n");
    let d = Daemon::start(&f.data_dir());
    let out = d.run(&["campaign", "create", f.spec().to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!out.status.success() && err.contains("calibration.runs") && err.contains("between 2 and 20"), "{err}");
}
