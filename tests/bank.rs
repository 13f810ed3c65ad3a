//! The question bank through the binary: lint, hot reload in a running
//! daemon, suggestions, and learned yield from a real campaign.

mod common;

use common::{reason, Daemon, Fixture};
use serde_json::Value;

fn copy_bank(to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/question_bank")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "toml") {
            std::fs::copy(&p, to.join(p.file_name().unwrap())).unwrap();
        }
    }
}

#[test]
fn lint_passes_on_the_shipped_bank_and_fails_naming_the_problem() {
    let out = common::gadfly()
        .args(["bank", "lint", "--json", "--dir", concat!(env!("CARGO_MANIFEST_DIR"), "/question_bank")])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["counts"]["total"], 147);
    assert_eq!(v["counts"]["by_kind"]["core"], 124);
    assert_eq!(v["counts"]["by_kind"]["comparison"], 5);
    assert_eq!(v["counts"]["by_kind"]["architecture"], 18);

    let dir = tempfile::tempdir().unwrap();
    copy_bank(dir.path());
    let f = dir.path().join("bound.toml");
    let text = std::fs::read_to_string(&f).unwrap().replacen("level = \"", "level = \"x", 1);
    std::fs::write(&f, text).unwrap();
    let out = common::gadfly().args(["bank", "lint", "--dir"]).arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("bound.toml:") && stdout.contains("field `question[0].level`: unknown level"), "{stdout}");
    assert!(stdout.contains("core entries: 123 (the bank holds 124)"), "{stdout}");
}

#[test]
fn a_running_daemon_reloads_good_edits_and_keeps_the_last_good_bank() {
    let f = Fixture::new("");
    let bank_dir = f.dir.path().join("bank");
    copy_bank(&bank_dir);
    let data = f.data_dir();
    let mut cmd = common::gadfly();
    cmd.args(["serve", "--listen", "127.0.0.1:0", "--data-dir"]).arg(&data).arg("--bank-dir").arg(&bank_dir);
    let d = Daemon::start_cmd(&data, cmd);
    let text_of = |id: &str| -> String {
        let bank = d.api_get("/bank");
        bank["entries"].as_array().unwrap().iter().find(|e| e["id"] == id).unwrap()["text"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let file = bank_dir.join("measurement.toml");
    let original = std::fs::read_to_string(&file).unwrap();
    let first = text_of("measure-001");
    let edited = original.replacen(&first, "How many repetitions does your median rest on, and what is its spread?", 1);
    std::fs::write(&file, &edited).unwrap();
    common::wait_until("the good edit", || text_of("measure-001").starts_with("How many repetitions"));

    std::fs::write(&file, edited.replacen("moments = [", "moments = [\"sometimes\", ", 1)).unwrap();
    common::wait_until("the refused edit", || !d.api_get("/bank")["reload_error"].is_null());
    let bank = d.api_get("/bank");
    assert!(bank["reload_error"].as_str().unwrap().contains("unknown moment `sometimes`"), "{}", bank["reload_error"]);
    assert!(text_of("measure-001").starts_with("How many repetitions"), "the last good bank stays");
}

#[test]
fn suggestions_and_learned_yield_from_a_campaign() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let sug = d.api_get(&format!("/campaigns/{id}/suggestions?moment=plateau&limit=4"));
    let list = sug["suggestions"].as_array().unwrap();
    assert_eq!(list.len(), 4);
    let groups: std::collections::HashSet<&str> = list.iter().map(|s| s["group"].as_str().unwrap()).collect();
    assert_eq!(groups.len(), 4, "suggestions come from different groups");
    assert!(list.iter().all(|s| !s["rationale"].as_str().unwrap().is_empty()));
    assert!(list.iter().all(|s| s["group"] != "architecture" && s["group"] != "comparison"), "not applicable here");

    // A slow scenario: blocked with a bank question; then a real gain.
    f.set_candidate("a true 90 100\nb true 90 100\nc true 95 100\n");
    let r = reason(&d.stop(&id, "done"));
    let asked = d.api_get(&format!("/campaigns/{id}/questions"));
    let at_stop = asked.as_array().unwrap().iter().find(|q| q["delivered_via"] == "stop_hook_reason").unwrap();
    let bank_id = at_stop["bank_id"].as_str().unwrap().to_string();
    assert!(r.contains(&format!("Question ({bank_id})")), "{r}");
    f.set_candidate("a true 40 100\nb true 40 100\nc true 40 100\n");
    assert_eq!(d.stop(&id, "done"), None);
    let stats = d.api_get("/bank/stats");
    assert_eq!(stats[&bank_id]["asks"], 1);
    assert_eq!(stats[&bank_id]["gains"], 1);
    assert_eq!(stats[&bank_id]["status"], "confirmed");
    assert!(stats[&bank_id]["evidence"][0].as_str().unwrap().contains(&format!("campaign {id}")));

    let out_file = f.dir.path().join("stats.toml");
    let out = d.run(&["bank", "export-stats", out_file.to_str().unwrap()]);
    assert!(out.status.success());
    let exported: toml::Table = toml::from_str(&std::fs::read_to_string(&out_file).unwrap()).unwrap();
    let entry = &exported["entry"].as_array().unwrap()[0];
    assert_eq!(entry["id"].as_str(), Some(bank_id.as_str()));
    assert_eq!(entry["provenance"].as_str(), Some("confirmed"));
}

/// `gadfly bank pick` (#35): the question gadfly would deliver for an
/// evidence file, with no daemon; `--json` prints exactly bank_id, group,
/// moment and text; unknown moments and bad evidence files are named.
#[test]
fn bank_pick_prints_the_question_for_the_evidence() {
    let bank_dir = concat!(env!("CARGO_MANIFEST_DIR"), "/question_bank");
    let dir = tempfile::tempdir().unwrap();
    let pick = |args: &[&str]| {
        let out = common::gadfly().args(["bank", "pick", "--bank", bank_dir]).args(args).output().unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    // The shape, with no evidence.
    let (ok, stdout, stderr) = pick(&["--moment", "plateau", "--json", "--seed", "3"]);
    assert!(ok, "{stderr}");
    let v: Value = serde_json::from_str(stdout.trim()).unwrap();
    let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["bank_id", "group", "moment", "text"]);
    assert_eq!(v["moment"], "plateau");
    assert!(v["text"].as_str().unwrap().ends_with('?'));
    assert_eq!(pick(&["--moment", "plateau", "--json", "--seed", "3"]).1, stdout, "same seed, same question");

    // A plateau's scenarios are named in the text.
    let ev = dir.path().join("plateau.json");
    std::fs::write(
        &ev,
        r#"{"scenarios": ["b4096_m4_n4", "b1024_m8_n8"], "detector": "plateau", "facts": {"evaluations": 3}}"#,
    )
    .unwrap();
    let (ok, stdout, stderr) = pick(&["--moment", "plateau", "--json", "--evidence", ev.to_str().unwrap()]);
    assert!(ok, "{stderr}");
    let v: Value = serde_json::from_str(stdout.trim()).unwrap();
    let text = v["text"].as_str().unwrap();
    assert!(text.starts_with("About scenarios b4096_m4_n4 and b1024_m8_n8 ("), "{text}");

    // A limit claim quotes the claim.
    let ev = dir.path().join("claim.json");
    std::fs::write(&ev, r#"{"quote": "we are at the memory bandwidth limit", "detector": "text:limit"}"#).unwrap();
    let (ok, stdout, _) = pick(&["--moment", "limit_claim", "--json", "--evidence", ev.to_str().unwrap()]);
    assert!(ok);
    let v: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert!(v["text"].as_str().unwrap().starts_with("You wrote: \"we are at the memory bandwidth limit\""), "{v}");

    // Plain output names the entry and its group.
    let (ok, stdout, _) = pick(&["--moment", "start"]);
    assert!(ok && stdout.contains("(") && stdout.contains("start"), "{stdout}");

    // Errors: an unknown moment names the valid ones; a bad evidence file names the field.
    let (ok, _, stderr) = pick(&["--moment", "platuea"]);
    assert!(!ok && stderr.contains("platuea") && stderr.contains("limit_claim"), "{stderr}");
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, r#"{"scenarios": "b1"}"#).unwrap();
    let (ok, _, stderr) = pick(&["--moment", "plateau", "--evidence", bad.to_str().unwrap()]);
    assert!(!ok && stderr.contains("bad.json") && stderr.contains("`scenarios`"), "{stderr}");
    std::fs::write(&bad, r#"{"facts": {"worst": [1, 2]}}"#).unwrap();
    let (ok, _, stderr) = pick(&["--moment", "plateau", "--evidence", bad.to_str().unwrap()]);
    assert!(!ok && stderr.contains("`facts.worst`"), "{stderr}");
    std::fs::write(&bad, "{not json").unwrap();
    let (ok, _, stderr) = pick(&["--moment", "plateau", "--evidence", bad.to_str().unwrap()]);
    assert!(!ok && stderr.contains("not JSON"), "{stderr}");
    let (ok, _, stderr) = pick(&["--moment", "plateau", "--evidence", "/nonexistent/e.json"]);
    assert!(!ok && stderr.contains("/nonexistent/e.json"), "{stderr}");
}

/// For one moment, picks over many seeds spread over at least four groups
/// (before #35 every plateau pick came from gap_analysis, the first group
/// the moment names).
#[test]
fn bank_pick_spreads_one_moment_over_groups() {
    let mut groups = std::collections::BTreeMap::<String, usize>::new();
    for seed in 0..40 {
        let out = common::gadfly()
            .args(["bank", "pick", "--moment", "plateau", "--json", "--seed", &seed.to_string()])
            .args(["--bank", concat!(env!("CARGO_MANIFEST_DIR"), "/question_bank")])
            .output()
            .unwrap();
        assert!(out.status.success());
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        *groups.entry(v["group"].as_str().unwrap().to_string()).or_default() += 1;
    }
    assert!(groups.len() >= 4, "{groups:?}");
}

/// A CPU campaign never gets a GPU-only question; a placeholder entry is
/// rendered from the evidence file, and not picked without it.
#[test]
fn bank_pick_filters_by_device_and_renders_placeholders() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("cpu.toml");
    std::fs::write(&spec, "name='cpu'\nworkspace='.'\ndevice='cpu'\n[harness]\nrun='x {results}'\nscenarios=['a']\n")
        .unwrap();
    let bank = concat!(env!("CARGO_MANIFEST_DIR"), "/question_bank");
    let gpu_only: Vec<String> = {
        let out = common::gadfly().args(["bank", "list", "--json", "--dir", bank]).output().unwrap();
        let all: Value = serde_json::from_slice(&out.stdout).unwrap();
        all.as_array()
            .unwrap()
            .iter()
            .filter(|e| e["applies"]["devices"] == serde_json::json!(["gpu"]))
            .map(|e| e["id"].as_str().unwrap().to_string())
            .collect()
    };
    assert!(gpu_only.len() >= 5, "{gpu_only:?}");
    for seed in 0..30 {
        let out = common::gadfly()
            .args(["bank", "pick", "--moment", "plateau", "--json", "--bank", bank, "--spec"])
            .arg(&spec)
            .args(["--seed", &seed.to_string()])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(!gpu_only.contains(&v["bank_id"].as_str().unwrap().to_string()), "{v}");
    }
    // An unknown architecture in the spec is an error naming file and value.
    std::fs::write(
        &spec,
        "name='x'\nworkspace='.'\narchitecture='hoper'\n[harness]\nrun='x {results}'\nscenarios=['a']\n",
    )
    .unwrap();
    let out = common::gadfly().args(["bank", "pick", "--moment", "plateau", "--spec"]).arg(&spec).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("cpu.toml") && stderr.contains("hoper"), "{stderr}");

    // A bank of one placeholder entry and one plain one.
    let b = dir.path().join("bank");
    copy_bank(&b);
    let f = b.join("gap_analysis.toml");
    let text = std::fs::read_to_string(&f).unwrap().replacen(
        "[[question]]",
        "[[question]]\nid = \"gap-099\"\ntext = \"Which of {scenarios} stayed flat while you wrote {quote}, and what does its profile show at {facts.worst}x?\"\nmoments = [\"plateau\"]\nlevel = \"measurement\"\napplies = { comparison = false, architectures = [], domains = [] }\nprovenance = \"unverified\"\nsource = \"test\"\nrationale = \"test\"\n\n[[question]]",
        1,
    );
    std::fs::write(&f, text).unwrap();
    let ev = dir.path().join("ev.json");
    std::fs::write(&ev, r#"{"scenarios": ["s1", "s2"], "quote": "no more to gain", "facts": {"worst": 1.034}}"#)
        .unwrap();
    let mut rendered = None;
    let mut without = 0;
    for seed in 0..200 {
        let run = |with: bool| {
            let mut c = common::gadfly();
            c.args(["bank", "pick", "--moment", "plateau", "--json", "--seed", &seed.to_string(), "--bank"]).arg(&b);
            if with {
                c.arg("--evidence").arg(&ev);
            }
            let out = c.output().unwrap();
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            serde_json::from_slice::<Value>(&out.stdout).unwrap()
        };
        if run(false)["bank_id"] == "gap-099" {
            without += 1;
        }
        let v = run(true);
        if v["bank_id"] == "gap-099" {
            rendered = Some(v["text"].as_str().unwrap().to_string());
            break;
        }
    }
    assert_eq!(without, 0, "an entry whose placeholders have no evidence is never picked");
    assert_eq!(
        rendered.expect("the placeholder entry is picked for some seed"),
        "Which of s1 and s2 stayed flat while you wrote no more to gain, and what does its profile show at 1.034x?"
    );
}
