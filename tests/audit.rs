//! Audits: live claim records of campaigns, and offline audits of real
//! Claude Code transcripts and a Codex rollout.

mod common;

use common::{Daemon, Fixture};
use serde_json::Value;

#[test]
fn live_claim_records_with_premature_rate_and_gain() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    f.set_candidate("a true 80 100\nb false 40 100\nc true 80 100\n");
    common::reason(&d.stop(&id, "Finished: everything passes."));
    f.set_candidate("a true 50 100\nb true 40 100\nc true 50 100\n");
    assert_eq!(d.stop(&id, "Fixed b; done."), None);

    let out = d.run(&["audit", "campaign", &id, "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let a: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(a["claims"], 2);
    assert_eq!(a["premature"], 1);
    assert_eq!(a["premature_rate"], 0.5);
    let r0 = &a["records"][0];
    assert_eq!(r0["decision"], "block");
    assert_eq!(r0["claim"], "Finished: everything passes.");
    assert_eq!(r0["failing"][0]["scenario"], "b");
    assert!(r0["question"].is_string(), "the question asked is part of the record");
    let s = &a["sessions"][0];
    assert_eq!(s["blocks_before_acceptance"], 1);
    assert_eq!(s["ended"], "accepted");
    // The first claim was judged on a wrong b: no starting point, and no
    // claim before the accepted one was correct, so no gain (issue #32).
    assert_eq!(r0["incorrect"], "1 scenario incorrect", "{r0}");
    assert_eq!(s["gain_after_first_claim"], Value::Null, "{s}");
    assert!(
        s["no_gain_reason"]
            .as_str()
            .unwrap()
            .contains("no claim before the accepted one was judged on a correct evaluation (1 of 1 incorrect)"),
        "{s}"
    );
    assert_eq!(a["mean_gain_after_premature"], Value::Null);
    assert_eq!(a["agents"][0]["agent"], "claude-code");
    assert_eq!(a["stop_attempts"][1]["session_id"], "sess-1");

    let md = String::from_utf8(d.run(&["audit", "campaign", &id, "--md"]).stdout).unwrap();
    assert!(md.contains("2 completion claims, 1 premature (50%)"), "{md}");
    assert!(md.lines().any(|l| l.starts_with("| sess-1 | claude-code | 2 | 1 |")), "{md}");
    let html = String::from_utf8(d.run(&["audit", "campaign", &id, "--html"]).stdout).unwrap();
    assert!(html.starts_with("<!doctype html>") && html.contains("<td>block</td>"), "{html}");
}

/// Issue #32: a first claim on a wrong kernel, fast as it is, is not where
/// the gain starts; the first correct claim is.
#[test]
fn the_gain_starts_at_the_first_correct_claim_not_at_a_wrong_kernel() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    // 4x everywhere, but a is wrong.
    f.set_candidate("a false 25 100\nb true 25 100\nc true 25 100\n");
    common::reason(&d.stop(&id, "Done: 4x."));
    // Correct, but a is no faster than the initial kernel (geomean 4^(1/3)).
    f.set_candidate("a true 100 100\nb true 50 100\nc true 50 100\n");
    common::reason(&d.stop(&id, "Done: correct now."));
    // Correct and 2x everywhere: accepted.
    f.set_candidate("a true 50 100\nb true 50 100\nc true 50 100\n");
    assert_eq!(d.stop(&id, "Done: a is fast too."), None);

    let out = d.run(&["audit", "campaign", &id, "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let a: Value = serde_json::from_slice(&out.stdout).unwrap();
    let r = a["records"].as_array().unwrap();
    assert_eq!(r.iter().map(|r| r["decision"].as_str().unwrap()).collect::<Vec<_>>(), ["block", "block", "allow"]);
    assert_eq!(r[0]["incorrect"], "1 scenario incorrect", "{}", r[0]);
    assert!(r[1].get("incorrect").is_none() && r[2].get("incorrect").is_none(), "{a}");
    let s = &a["sessions"][0];
    let close = |v: &Value, x: f64| (v.as_f64().unwrap() - x).abs() < 1e-9;
    // The first claim's figure stays on record, as it was...
    assert!(close(&s["first_geomean"], 4.0), "{s}");
    // ...but the gain runs from the second claim: 2 / 4^(1/3) - 1 = +26%,
    // not 2 / 4 - 1 = -50% from the wrong kernel.
    assert_eq!(s["gain_from_stop_attempt"], r[1]["stop_attempt"], "{s}");
    let start = 4f64.powf(1.0 / 3.0);
    assert!(close(&s["gain_from_geomean"], start), "{s}");
    assert!(close(&s["gain_after_first_claim"], 2.0 / start - 1.0), "{s}");
    assert!(s.get("no_gain_reason").is_none(), "{s}");
    assert!(close(&a["mean_gain_after_premature"], 2.0 / start - 1.0), "{a}");
    assert!(close(&a["agents"][0]["mean_gain_after_premature"], 2.0 / start - 1.0), "{a}");
    let md = String::from_utf8(d.run(&["audit", "campaign", &id, "--md"]).stdout).unwrap();
    assert!(md.contains("mean gain won after premature claims: +26.0%"), "{md}");
}

#[test]
fn the_demo_campaign_audits_as_two_premature_claims_then_acceptance() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let out =
        common::gadfly().args(["demo", "--exit", "--listen", "127.0.0.1:0", "--data-dir"]).arg(&data).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    // The demo runs on its embedded default, SQLite in the data dir.
    let d = Daemon::start_with(&data, None);
    let id = d.api_get("/campaigns")[0]["id"].as_str().unwrap().to_string();
    let a: Value = serde_json::from_slice(&d.run(&["audit", "campaign", &id, "--json"]).stdout).unwrap();
    assert_eq!((a["claims"].as_u64(), a["premature"].as_u64()), (Some(3), Some(2)));
    assert_eq!(a["sessions"][0]["blocks_before_acceptance"], 2);
    // The slow scenario is on record (among others when a loaded machine
    // slowed another one below its bar: these are real timings).
    let failing: Vec<&str> =
        a["records"][1]["failing"].as_array().unwrap().iter().filter_map(|f| f["scenario"].as_str()).collect();
    assert!(failing.contains(&"b128_m60_n20"), "the slow scenario is on record: {failing:?}");
    // The first claim's kernel is wrong: the gain runs from the second
    // (correct, one scenario slow) to the accepted third (issue #32).
    let (r, s) = (&a["records"], &a["sessions"][0]);
    assert!(r[0]["incorrect"].as_str().is_some_and(|w| w.contains("incorrect")), "{}", r[0]);
    assert!(r[1].get("incorrect").is_none(), "{}", r[1]);
    assert_eq!(s["gain_from_stop_attempt"], r[1]["stop_attempt"], "{s}");
    let gain = s["accepted_geomean"].as_f64().unwrap() / r[1]["geomean_speedup"].as_f64().unwrap() - 1.0;
    assert!((s["gain_after_first_claim"].as_f64().unwrap() - gain).abs() < 1e-9, "{s}");
}

fn audit(file: &str) -> Value {
    let out = common::gadfly().args(["audit", "transcript", file, "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn claim<'a>(r: &'a Value, uuid: &str) -> &'a Value {
    r["claims"].as_array().unwrap().iter().find(|c| c["id"] == uuid).unwrap_or_else(|| panic!("no claim {uuid}"))
}

#[test]
fn real_transcripts_claims_checked_by_hand() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/corpus/9034225e-c367-4ab6-b1eb-1f478a7ae27a.jsonl");
    let r = audit(path);
    assert_eq!(r["format"], "claude-code");
    // Line 580: "The tests compiled and ran, which means we have a working
    // checkpoint!" right after ./tests/unified_tests printed "5 TEST(S) FAILED".
    let c = claim(&r, "9beecee5-0422-4498-bc62-08dd0fc642c6");
    assert_eq!(c["verdict"], "contradicted", "{c}");
    assert!(
        c["evidence"].as_array().unwrap().iter().any(|e| e["kind"] == "last_verification" && e["line"] == 576),
        "{c}"
    );
    // The same session's later claims made before any re-run stay contradicted.
    assert_eq!(claim(&r, "8ec0c375-08dd-4e94-a3dd-310ba08fb5d9")["verdict"], "contradicted");
    assert_eq!(
        r["contradicted"].as_u64().unwrap() + r["unverified"].as_u64().unwrap() + r["supported"].as_u64().unwrap(),
        r["claims"].as_array().unwrap().len() as u64
    );

    // A session where "Done!" closes work that was never tested.
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/corpus/6dc88126-2048-43a9-b5c2-b9747d5a0301.jsonl");
    let r = audit(path);
    let done = r["claims"].as_array().unwrap().iter().find(|c| c["quote"] == "Done!").unwrap();
    assert_eq!(done["verdict"], "unverified");
    assert_eq!(done["why"], "no test or benchmark run before the claim");
}

#[test]
fn a_codex_rollout_and_a_damaged_file() {
    let dir = tempfile::tempdir().unwrap();
    let rollout = dir.path().join("rollout-2026-12-02T10-00-00-th.jsonl");
    let lines = [
        serde_json::json!({"timestamp": "t", "type": "session_meta", "payload": {"id": "th"}}),
        serde_json::json!({"timestamp": "t", "type": "response_item", "payload": {"type": "function_call", "name": "exec_command", "call_id": "c1", "arguments": "{\"cmd\": \"cargo test\"}"}}),
        serde_json::json!({"timestamp": "t", "type": "response_item", "payload": {"type": "function_call_output", "call_id": "c1", "output": "Process exited with code 0\nOutput:\ntest result: ok. 9 passed; 0 failed; 0 ignored"}}),
        serde_json::json!({"timestamp": "t", "type": "response_item", "payload": {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "All 9 tests pass. The task is complete."}]}}),
    ];
    let text: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    std::fs::write(&rollout, text.join("\n") + "\n").unwrap();
    let r = audit(rollout.to_str().unwrap());
    assert_eq!(r["format"], "codex-rollout");
    assert_eq!(r["claims"][0]["verdict"], "supported");
    assert_eq!(r["claims"][0]["id"], "line 4");

    // Damaged: a garbage line and a truncated last line are named, the rest audited.
    let damaged = dir.path().join("damaged.jsonl");
    std::fs::write(&damaged, format!("{}\n{{oops\n{}\n{}", text[1], text[2], &text[3][..40])).unwrap();
    let out = common::gadfly().args(["audit", "transcript", damaged.to_str().unwrap(), "--json"]).output().unwrap();
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("damaged.jsonl:2: not valid JSON"), "{err}");
    assert!(err.contains("damaged.jsonl:4"), "{err}");
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["steps"], 2, "the readable lines were audited");
    let missing = common::gadfly().args(["audit", "transcript", "/nonexistent.jsonl"]).output().unwrap();
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("cannot read /nonexistent.jsonl"));
}
