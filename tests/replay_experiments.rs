//! `gadfly replay import experiments` (docs/REPLAY.md): an optimization
//! loop's experiment log (autoresearch's `results.tsv`, one row per
//! experiment) read as a timeline and replayed, through the binary. The
//! figures on real published logs are measured by
//! `tests/real-campaigns/sweep.py` (the logs are not committed); this test
//! checks the same properties on a log in the same format.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

/// Gains, then a long stretch of discarded experiments around the best (a
/// plateau), a crash, and the agent's notes.
fn log() -> String {
    let mut s = String::from("commit\tval_bpb\tmemory_gb\tstatus\tdescription\n");
    let gains = [1.0, 0.985, 0.975, 0.968, 0.962];
    for (i, v) in gains.iter().enumerate() {
        let status = if i == 0 { "keep\tbaseline" } else { "keep\tlower the learning rate warmup" };
        s.push_str(&format!("a{i:06}\t{v:.6}\t44.0\t{status}\n"));
    }
    for i in 0..30 {
        let v = 0.962 + 0.0004 * ((i * 7) % 5) as f64;
        let (status, note) = match i {
            11 => ("crash", "double the model width (OOM)"),
            _ => ("discard", "try another weight decay value"),
        };
        let v = if status == "crash" { 0.0 } else { v };
        s.push_str(&format!("b{i:06}\t{v:.6}\t44.1\t{status}\t{note}\n"));
    }
    s
}

const SPEC: &str = "name = \"log\"\nworkspace = \".\"\ngoal = \"a lower val_bpb\"\n\n[harness]\nrun = \"true {results}\"\nscenarios = [\"val_bpb\"]\n\n[predicate]\nmin_speedup = 1.0\n";

fn gadfly(args: &[&str]) -> std::process::Output {
    common::gadfly().args(args).output().unwrap()
}

fn ok(args: &[&str]) -> String {
    let out = gadfly(args);
    assert!(out.status.success(), "gadfly {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn an_experiment_log_replays_with_plateaus_whose_questions_name_their_evidence_from_several_groups() {
    let dir = tempfile::tempdir().unwrap();
    let log_path = dir.path().join("results.tsv");
    std::fs::write(&log_path, log()).unwrap();
    let spec = dir.path().join("log.toml");
    std::fs::write(&spec, SPEC).unwrap();
    let timeline = ok(&["replay", "import", "experiments", log_path.to_str().unwrap()]);
    let header: Value = serde_json::from_str(timeline.lines().next().unwrap()).unwrap();
    assert_eq!(header["source"], "experiments");
    assert_eq!(header["metric"], "val_bpb");
    assert_eq!(header["rows"], 35);
    let tl = dir.path().join("log.timeline.jsonl");
    std::fs::write(&tl, &timeline).unwrap();

    let mut groups: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut entries: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut plateaus = 0;
    let mut failed = 0;
    for seed in ["1", "2", "3", "4"] {
        let args =
            ["replay", tl.to_str().unwrap(), "--spec", spec.to_str().unwrap(), "--mode", "autonomous", "--seed", seed];
        let mut json_args = args.to_vec();
        json_args.push("--json");
        let r: Value = serde_json::from_str(&ok(&json_args)).unwrap();
        assert_eq!(r["summary"]["evaluations"], 35, "one evaluation a row");
        for step in r["steps"].as_array().unwrap() {
            for d in step["did"].as_array().unwrap() {
                match d["what"].as_str().unwrap() {
                    "moment" if d["moment"] == "plateau" => {
                        plateaus += 1;
                        assert_eq!(d["scenarios"], serde_json::json!(["val_bpb"]), "{d}");
                    }
                    "evaluated" if !d["failures"].as_array().unwrap().is_empty() => {
                        failed += 1;
                        assert!(d["failures"][0].as_str().unwrap().contains("status `crash`"), "{d}");
                    }
                    "delivered" => {
                        let q = &d["question"];
                        let (moment, text) = (q["moment"].as_str().unwrap(), q["text"].as_str().unwrap());
                        if moment != "start" {
                            assert!(
                                text.starts_with("About ") || text.starts_with("You wrote: "),
                                "seed {seed}: a {moment} question names nothing: {text}"
                            );
                        }
                        if moment == "plateau" {
                            assert!(text.starts_with("About scenario val_bpb (plateau"), "{text}");
                        }
                        let group = q["source"].as_str().unwrap().rsplit_once('-').unwrap().0.to_string();
                        groups.entry(moment.to_string()).or_default().insert(group);
                        entries.entry(moment.to_string()).or_default().insert(q["source"].as_str().unwrap().into());
                    }
                    _ => {}
                }
            }
        }
    }
    assert_eq!(failed, 4, "the crash row is a failed evaluation under every seed");
    // In one step, `--from experiments`, the same replay.
    let direct = ok(&[
        "replay",
        log_path.to_str().unwrap(),
        "--from",
        "experiments",
        "--spec",
        spec.to_str().unwrap(),
        "--mode",
        "autonomous",
        "--seed",
        "4",
        "--json",
    ]);
    let two_steps = ok(&[
        "replay",
        tl.to_str().unwrap(),
        "--spec",
        spec.to_str().unwrap(),
        "--mode",
        "autonomous",
        "--seed",
        "4",
        "--json",
    ]);
    assert_eq!(direct, two_steps);
    assert!(plateaus >= 8, "the flat stretch raises plateaus under every seed: {plateaus}");
    // A flat stretch of near-ties, the best never measured again: the
    // noise, both ways the evidence points to (the plateau inside the
    // noise, the A-versus-A spread: `bank::groups::pointed`), each asked
    // first before any entry that merely fits, and no stop rule inside the
    // noise.
    let plateau = &entries["plateau"];
    assert!(
        plateau.contains("measure-013") && plateau.contains("measure-005"),
        "the noise of near-ties is asked about: {entries:?}"
    );
    assert!(!plateau.contains("process-012"), "no stop rule inside the noise: {entries:?}");
    assert!(groups["plateau"].contains("measure"), "{groups:?}");
}

#[test]
fn a_log_that_cannot_be_read_as_asked_is_refused_saying_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let log_path = dir.path().join("results.tsv");
    std::fs::write(&log_path, log()).unwrap();
    let p = log_path.to_str().unwrap();
    let err = |args: &[&str]| {
        let out = gadfly(args);
        assert!(!out.status.success(), "gadfly {args:?} should fail");
        String::from_utf8(out.stderr).unwrap()
    };
    let e = err(&["replay", "import", "experiments", p, "--metric", "tflops"]);
    assert!(e.contains("results.tsv") && e.contains("no column `tflops`") && e.contains("commit, val_bpb"), "{e}");
    let e = err(&["replay", "import", "experiments", p, "--where", "gpu=h100"]);
    assert!(e.contains("no column `gpu`"), "{e}");
    let e = err(&["replay", "import", "experiments", p, "--where", "h100"]);
    assert!(e.contains("not COLUMN=VALUE"), "{e}");
    let e = err(&["replay", "import", "experiments", p, "--every", "0"]);
    assert!(e.contains("--every must be a positive number"), "{e}");
    let e = err(&["replay", "import", "experiments", p, "--spec", p]);
    assert!(e.contains("needs no --spec"), "{e}");
    let e = err(&["replay", "import", "claude-code", p, "--metric", "val_bpb"]);
    assert!(e.contains("read an experiment log"), "{e}");
    let spec = dir.path().join("log.toml");
    std::fs::write(&spec, SPEC).unwrap();
    let e = err(&["replay", p, "--from", "claude-code", "--spec", spec.to_str().unwrap(), "--maximize"]);
    assert!(e.contains("--from experiments"), "{e}");
    // A higher-is-better column: the best row is the fastest.
    let out = ok(&["replay", "import", "experiments", p, "--metric", "memory_gb", "--maximize", "--every", "60"]);
    let evaluation: Value = serde_json::from_str(out.lines().find(|l| l.contains("\"evaluation\"")).unwrap()).unwrap();
    assert_eq!(evaluation["scenarios"][0]["scenario"], "memory_gb");
    let last: Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    assert_eq!(last["t"], 34.0 * 60.0);
}

/// `tests/real-campaigns/sweep.py`, the command behind the figures on the
/// published logs, run here on this test's log laid out as one of the
/// manifest's (the real ones are not committed): it imports, replays and
/// pools the reports through `gadfly bank stats --replay`, and names the
/// logs it could not find.
#[test]
fn the_sweep_over_real_campaigns_runs_on_the_logs_it_finds() {
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("logs");
    let at = logs.join("Djordje-Stojanovic+TrainRTX5070");
    std::fs::create_dir_all(&at).unwrap();
    std::fs::write(at.join("results.tsv"), log()).unwrap();
    let out = std::process::Command::new("python3")
        .arg(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/real-campaigns/sweep.py"))
        .args(["--gadfly", env!("CARGO_BIN_EXE_gadfly"), "--logs", logs.to_str().unwrap(), "--seeds", "2", "--json"])
        .args(["--out", dir.path().join("out").to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["logs"], 1, "{summary}");
    assert_eq!(summary["per_log"][0]["evaluations"], 35);
    assert_eq!(summary["skipped"].as_array().unwrap().len(), 8, "the other logs of the manifest are named as missing");
    assert!(summary["asked_not_start"].as_u64().unwrap() > 0);
    assert_eq!(summary["unnamed"], 0, "{summary}");
    // The log's flat stretch is near-ties around a best measured once: its
    // plateaus are asked about the noise (the measurement group).
    let plateau_groups = summary["groups_by_moment"]["plateau"].as_array().unwrap();
    assert!(plateau_groups.iter().any(|g| g == "measure"), "{summary}");
    assert!(summary["uplift"].is_array());
}
