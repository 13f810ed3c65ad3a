//! Sanctioned claims (issue #34): an agent files `gadfly claim limit` with
//! the campaign's hook token from its shell; the claim is recorded with its
//! evidence and raised as a `limit_claim` moment (in autonomous mode its
//! challenge question is queued); a person rejects it with a reason (which
//! reaches the agent as a person's question) or accepts it through the API
//! the console uses (never with the hook token), after which the Stop gate
//! lets the agent stop as an accepted limit, counted apart in the audit.
//! Blocked stops without a gain remind the agent of the exit. Every call
//! goes to the real daemon through the real `gadfly` binary or HTTP.

mod common;

use common::{Daemon, Fixture};
use serde_json::{json, Value};

/// Autonomous, and the reminder after 2 blocks without a gain.
const SPEC: &str = "[questions]\nmode = \"autonomous\"\n[gate]\nremind_after_blocks = 2\n";
/// Every scenario at least 1.1x, geomean 1.22x: passing, but no jump.
const JUST_PASSING: &str = "a true 80 100\nb true 85 100\nc true 80 100\n";
const REMINDER: &str = "\"$GADFLY_BIN\" claim limit --why";

fn post(d: &Daemon, token: &str, path: &str, body: &Value) -> (u16, Value) {
    let r = reqwest::blocking::Client::new()
        .post(format!("{}/api/v1{path}", d.url))
        .bearer_auth(token)
        .json(body)
        .send()
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().unwrap_or(Value::Null))
}

fn hook_token(d: &Daemon, id: &str) -> String {
    d.api_get(&format!("/campaigns/{id}/hook-token"))["token"].as_str().unwrap().to_string()
}

/// `gadfly claim ...` run as a spawned agent runs it: the hook token and
/// the campaign in its environment, never the master token.
fn claim_as_agent(d: &Daemon, id: &str, token: &str, args: &[&str]) -> std::process::Output {
    common::gadfly()
        .arg("claim")
        .args(args)
        .env("GADFLY_URL", &d.url)
        .env("GADFLY_TOKEN", token)
        .env("GADFLY_CAMPAIGN", id)
        .env_remove("GADFLY_DATA_DIR")
        .output()
        .unwrap()
}

fn log(d: &Daemon, id: &str) -> Vec<Value> {
    d.api_get(&format!("/campaigns/{id}/log?limit=10000")).as_array().unwrap().clone()
}

#[test]
fn a_limit_claim_is_challenged_then_rejected_or_accepted_by_a_person_and_lets_the_agent_stop_as_a_limit() {
    let f = Fixture::new(SPEC);
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let token = hook_token(&d, &id);
    assert!(token.starts_with("gfh1."), "{token}");

    // Three blocked stops on the initial kernel (1.0x, no gain): the
    // streak is recorded, and from the second block without a gain the
    // reason names the sanctioned exit.
    let reasons: Vec<String> = (0..3).map(|_| common::reason(&d.stop(&id, "Still working on it."))).collect();
    assert!(reasons.iter().all(|r| r.contains("you may not stop yet")), "{reasons:?}");
    assert!(!reasons[0].contains(REMINDER) && !reasons[1].contains(REMINDER), "{reasons:?}");
    assert!(reasons[2].contains(REMINDER), "the third block reminds of `gadfly claim limit`: {}", reasons[2]);
    assert!(reasons[2].contains("2 blocked stops in a row without a gain"), "{}", reasons[2]);
    assert!(reasons[2].contains("is recorded"), "{}", reasons[2]);
    let streaks: Vec<u64> = log(&d, &id)
        .iter()
        .filter(|e| e["kind"] == "block.streak")
        .map(|e| e["payload"]["blocks"].as_u64().unwrap())
        .collect();
    assert_eq!(streaks, [1, 2], "the streak is recorded at each block without gain");

    // Limits on what is uploaded, refused with clear errors (never 5xx).
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.txt");
    std::fs::write(&big, "x".repeat(65 * 1024)).unwrap();
    let out = claim_as_agent(&d, &id, &token, &["limit", "--why", "w", "--evidence", big.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("at most 65536"), "{}", String::from_utf8_lossy(&out.stderr));
    let claims_path = format!("/campaigns/{id}/claims");
    for (body, needle) in [
        (json!({"claim": "limit", "why": "  "}), "--why"),
        (json!({"claim": "maybe", "why": "w"}), "request body"),
        (
            json!({"claim": "limit", "why": "w", "evidence": [{"name": "a", "text": "x".repeat(70_000)}]}),
            "at most 65536",
        ),
        (json!({"claim": "limit", "why": "w", "evidence": [{"name": "", "text": "x"}]}), "name"),
    ] {
        let (status, e) = post(&d, &token, &claims_path, &body);
        assert_eq!(status, 400, "{body}: {e}");
        assert!(e["message"].as_str().unwrap_or("").contains(needle), "{body}: {e}");
    }

    // The agent claims a limit from its shell, with evidence.
    let roofline = dir.path().join("roofline.txt");
    std::fs::write(&roofline, "achieved 1.31 TB/s of 1.35 TB/s peak DRAM bandwidth\n").unwrap();
    let why = "The kernel is memory bound at 97% of peak bandwidth; no schedule can beat it.";
    let out =
        claim_as_agent(&d, &id, &token, &["limit", "--why", why, "--evidence", roofline.to_str().unwrap(), "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let filed: Value = serde_json::from_slice(&out.stdout).unwrap();
    let first = filed["id"].as_i64().unwrap();
    assert_eq!(filed["claim"], "limit");

    // Recorded with the agent's words and evidence, raised as a limit_claim
    // moment whose challenge question is queued (autonomous mode).
    let events = log(&d, &id);
    let claim = events.iter().find(|e| e["id"] == first).unwrap();
    assert_eq!(claim["kind"], "claim");
    assert_eq!(claim["payload"]["why"], why);
    assert_eq!(claim["payload"]["evidence"][0]["name"], "roofline.txt");
    assert!(claim["payload"]["evidence"][0]["text"].as_str().unwrap().contains("1.35 TB/s peak"));
    let moment = events
        .iter()
        .find(|e| e["kind"] == "moment" && e["payload"]["detector"] == "gadfly_claim")
        .unwrap_or_else(|| panic!("no limit_claim moment: {events:?}"));
    assert_eq!(moment["payload"]["moment"], "limit_claim");
    assert_eq!(moment["payload"]["quote"], why);
    let qid = moment["payload"]["question"]["question_id"].as_i64().expect("its question was queued");
    let questions = d.api_get(&format!("/campaigns/{id}/questions"));
    let q = questions.as_array().unwrap().iter().find(|q| q["id"] == qid).unwrap();
    assert_eq!(q["moment"], "limit_claim", "{q}");
    assert_eq!(q["source"], "bank", "{q}");

    // The hook token files claims but never judges them, nor lists them.
    for verdict in ["accept", "reject"] {
        let (status, e) = post(&d, &token, &format!("{claims_path}/{first}/{verdict}"), &json!({"reason": "r"}));
        assert_eq!(status, 403, "{verdict} with the hook token: {e}");
    }
    let listed = reqwest::blocking::Client::new()
        .get(format!("{}/api/v1{claims_path}", d.url))
        .bearer_auth(&token)
        .send()
        .unwrap();
    assert_eq!(listed.status().as_u16(), 403);

    // A person rejects it with a reason: the agent gets it as a person's question.
    let (status, e) = post(&d, &d.token, &format!("{claims_path}/{first}/reject"), &json!({"by": "ana"}));
    assert_eq!(status, 400, "a rejection needs a reason: {e}");
    let (status, v) = post(
        &d,
        &d.token,
        &format!("{claims_path}/{first}/reject"),
        &json!({"by": "ana", "reason": "Try a persistent kernel first."}),
    );
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["verdict"], "rejected");
    let questions = d.api_get(&format!("/campaigns/{id}/questions"));
    assert!(
        questions.as_array().unwrap().iter().any(|q| q["source"] == "human"
            && q["text"].as_str().unwrap().contains("rejected by ana: Try a persistent kernel first.")),
        "{questions}"
    );
    let (status, _) = post(&d, &d.token, &format!("{claims_path}/{first}/accept"), &json!({}));
    assert_eq!(status, 400, "a claim is judged once");
    assert!(d.stop(&id, "I still think this is the limit.").is_some(), "a rejected limit does not let it stop");

    // It claims again; a person accepts this one.
    let out = claim_as_agent(&d, &id, &token, &["limit", "--why", why]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("filed") && text.contains("(limit)"), "{text}");
    let claims = d.api_get(&claims_path);
    let second = claims[0]["id"].as_i64().unwrap();
    assert!(second > first && claims[0]["verdict"].is_null(), "{claims}");
    let (status, v) = post(&d, &d.token, &format!("{claims_path}/{second}/accept"), &json!({"by": "ana"}));
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["state"], "stopped: limit accepted by ana");
    assert_eq!(v["holds"], false, "the verdict at that moment is kept: {v}");
    assert!(v["evaluation_id"].as_i64().is_some(), "{v}");

    // Now the stop is let through, recorded as an accepted limit.
    assert_eq!(d.stop(&id, "Stopping at the accepted limit."), None, "the accepted limit lets the agent stop");
    let stops = d.api_get(&format!("/campaigns/{id}/stops"));
    let last = stops.as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["decision"], "limit_accepted", "{last}");
    assert_eq!(last["holds"], false, "{last}");
    assert!(last["reason"].as_str().unwrap().contains("limit accepted by ana"), "{last}");
    let shown = d.api_get(&format!("/campaigns/{id}"));
    assert_eq!(shown["state"], "limit_accepted", "the campaign shows the accepted limit: {shown}");

    // The audit counts it apart: never a completion claim nor a success.
    let audit = d.api_get(&format!("/campaigns/{id}/audit"));
    assert_eq!(audit["claims"], 4, "the four blocked completion claims, not the limit stop: {audit}");
    assert!(audit["records"].as_array().unwrap().iter().all(|r| r["decision"] != "limit_accepted"));
    assert!(audit["sessions"].as_array().unwrap().iter().all(|s| s["ended"] != "accepted"), "{audit}");
    let limits = audit["limits_accepted"].as_array().unwrap();
    assert_eq!(limits.len(), 1, "{audit}");
    assert_eq!(limits[0]["claim_id"], second);
    assert_eq!(limits[0]["by"], "ana");
    assert_eq!(limits[0]["why"], why);
    assert_eq!(limits[0]["stops"].as_array().unwrap().len(), 1);
    let md = d.run(&["audit", "campaign", &id]);
    let md = String::from_utf8_lossy(&md.stdout);
    assert!(md.contains("1 limits accepted by a person (not completions, not successes)"), "{md}");
}

/// Under pressure (blocked again and again without a gain), a candidate
/// that then passes is re-evaluated with a fresh seed before the stop is
/// allowed, and the lines it added are scanned for harness or timing
/// detection, recorded as a finding. Without the streak, neither happens.
#[test]
fn after_a_block_streak_a_passing_candidate_is_rechecked_and_scanned_for_harness_detection() {
    let f = Fixture::new(SPEC);
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    for _ in 0..3 {
        assert!(d.stop(&id, "Still working on it.").is_some());
    }
    // It now "passes" by a modest margin (no suspicious jump of its own),
    // with a kernel that reads gadfly's environment.
    f.set_candidate(JUST_PASSING);
    std::fs::write(f.ws().join("kernel.c"), "int fast(void) { return getenv(\"GADFLY_CAMPAIGN\") != 0; }\n").unwrap();
    assert_eq!(d.stop(&id, "All scenarios pass. Done."), None, "the recheck reproduces the gain: allowed");
    let events = log(&d, &id);
    let passing = d.api_get(&format!("/campaigns/{id}"))["latest_evaluation"]["id"].as_i64().unwrap();
    let rechecks: Vec<&Value> = events.iter().filter(|e| e["kind"] == "gain.recheck").collect();
    assert_eq!(rechecks.len(), 1, "one re-evaluation, the escalated one: {events:?}");
    assert_eq!(rechecks[0]["payload"]["evaluation_id"], passing, "{}", rechecks[0]);
    assert!(
        !events.iter().any(|e| e["kind"] == "moment"
            && e["payload"]["moment"] == "suspicious_gain"
            && e["payload"]["detector"] != "pressure_scan"),
        "no detector of its own found the gain suspicious: {events:?}"
    );
    assert!(events.iter().any(|e| e["kind"] == "gain.confirmed" && e["payload"]["evaluation_id"] == passing));
    let scan = events
        .iter()
        .find(|e| e["kind"] == "moment" && e["payload"]["detector"] == "pressure_scan")
        .unwrap_or_else(|| panic!("no pressure scan finding: {events:?}"));
    let detail = scan["payload"]["detail"].as_str().unwrap();
    assert!(detail.contains("reads gadfly's environment") && detail.contains("GADFLY_CAMPAIGN"), "{detail}");
    assert!(detail.contains("after 2 blocked stops without a gain"), "{detail}");

    // The control: the same passing candidate with no streak behind it.
    let g = Fixture::new(SPEC);
    let id2 = d.create_campaign(&g.spec());
    g.set_candidate(JUST_PASSING);
    std::fs::write(g.ws().join("kernel.c"), "int fast(void) { return getenv(\"GADFLY_CAMPAIGN\") != 0; }\n").unwrap();
    assert_eq!(d.stop(&id2, "All scenarios pass. Done."), None);
    let events = log(&d, &id2);
    assert!(
        !events.iter().any(|e| e["kind"] == "gain.recheck" || e["payload"]["detector"] == "pressure_scan"),
        "{events:?}"
    );
}
