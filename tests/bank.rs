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
    assert_eq!(v["counts"]["total"], 124);
    assert_eq!(v["counts"]["by_kind"]["core"], 101);
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
    assert!(stdout.contains("core entries: 100 (the bank holds 101)"), "{stdout}");
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
