//! Today's stop decision, pinned before it is restructured (issue #33,
//! REDESIGN.md section 7, "Risks and guards"): which question a blocked
//! stop carries (the priority chain), the tamper override and audit mode,
//! the `ungated` and `unavailable_block` records, and the decision values
//! as stored. Every stop here is a hook call posted over HTTP to the real
//! daemon (no agent CLI), and every assertion reads what the daemon stored
//! (stop attempts, questions, the event log).

mod common;

use common::{Daemon, Fixture, ALL_PASS};
use serde_json::{json, Value};

/// b is incorrect, a and c fast enough: the predicate fails on 1 of 3.
const B_WRONG: &str = "a true 90 100\nb false 90 100\nc true 90 100\n";
/// Every scenario correct at 1.11x: the evaluation before `B_WRONG`, so
/// that `B_WRONG` is a correctness regression of b (with the same geometric
/// mean, so no other numeric moment).
const ALL_CORRECT_SLOW: &str = "a true 90 100\nb true 90 100\nc true 90 100\n";
/// `B_WRONG` made 2.25x faster in one step: a geometric-mean jump.
const B_WRONG_FAST: &str = "a true 40 100\nb false 40 100\nc true 40 100\n";
/// Every scenario correct, b too slow (1.05x): the predicate fails on
/// speed alone. After `B_WRONG` or `B_WRONG_FAST` it raises no moment.
const B_SLOW: &str = "a true 90 100\nb true 95 100\nc true 90 100\n";
/// Faster still than `B_SLOW` on a and c, with b as slow.
const B_SLOW_AC_FAST: &str = "a true 40 100\nb true 95 100\nc true 40 100\n";
/// Words the text classifier reads as a claimed gain (src/classify/tests.rs),
/// with a completion claim.
const GAIN_CLAIM: &str = "A massive 120x speedup over the baseline! Done.";

/// Words the text classifier reads as a claimed limit (tests/moments.rs).
const LIMIT_CLAIM: &str = "Scenario b is at the DRAM bandwidth limit; no further speedup is possible.";
/// Words the text classifier reads as a dismissed failure (tests/moments.rs).
const DISMISSAL: &str =
    "Scenario b still differs from the reference by 3e-4, but that is just floating point noise, so we can ignore it.";

fn client() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder().no_proxy().build().unwrap()
}

/// A Stop hook call posted to the API: the daemon's reply
/// (`{output, decision, event_id}`).
fn stop(d: &Daemon, c: &reqwest::blocking::Client, id: &str, session: &str, claim: &str) -> Value {
    let body = json!({
        "session_id": session,
        "hook_event_name": "Stop",
        "stop_hook_active": false,
        "last_assistant_message": claim,
    });
    d.post_hook(c, "stop", id, &body)
}

/// The block reason of a reply, or a panic naming what came instead.
fn block_reason(reply: &Value) -> String {
    assert_eq!(reply["decision"], "block", "{reply}");
    assert_eq!(reply["output"]["decision"], "block", "{reply}");
    reply["output"]["reason"].as_str().unwrap_or_else(|| panic!("no reason in {reply}")).to_string()
}

/// Queues a person's question through POST /campaigns/ID/questions; its id.
fn ask(d: &Daemon, c: &reqwest::blocking::Client, id: &str, text: &str) -> i64 {
    let r = c
        .post(format!("{}/api/v1/campaigns/{id}/questions", d.url))
        .bearer_auth(&d.token)
        .json(&json!({ "text": text }))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 201, "queueing a question");
    let q: Value = r.json().unwrap();
    assert_eq!(q["source"], "human", "{q}");
    q["id"].as_i64().unwrap()
}

fn questions(d: &Daemon, id: &str) -> Vec<Value> {
    d.api_get(&format!("/campaigns/{id}/questions")).as_array().unwrap().clone()
}

fn question(d: &Daemon, id: &str, qid: i64) -> Value {
    questions(d, id).into_iter().find(|q| q["id"] == qid).unwrap_or_else(|| panic!("no question {qid}"))
}

/// The queued (not yet delivered) questions for `moment`.
fn queued_for(d: &Daemon, id: &str, moment: &str) -> Vec<Value> {
    questions(d, id).into_iter().filter(|q| q["moment"] == moment && q["status"] == "queued").collect()
}

fn stops(d: &Daemon, id: &str) -> Vec<Value> {
    d.api_get(&format!("/campaigns/{id}/stops")).as_array().unwrap().clone()
}

/// The stop attempt recorded for the hook event `event_id`.
fn stop_for(d: &Daemon, id: &str, event_id: &Value) -> Value {
    let all = stops(d, id);
    let found: Vec<&Value> = all.iter().filter(|s| &s["event_id"] == event_id).collect();
    assert_eq!(found.len(), 1, "one stop attempt for event {event_id}: {all:#?}");
    found[0].clone()
}

/// Evaluates `candidate` through `gadfly eval` (which runs the numeric
/// moment detectors, so a moment's question is queued before it returns).
fn evaluate(d: &Daemon, f: &Fixture, id: &str, candidate: &str) -> Value {
    f.set_candidate(candidate);
    let out = d.run(&["eval", id, "--json"]);
    // 0: the predicate holds, 1: it fails; either way a verdict.
    assert!(matches!(out.status.code(), Some(0 | 1)), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A campaign whose last evaluation is `B_WRONG` right after
/// `ALL_CORRECT_SLOW`: the correctness regression of b has queued a bank
/// question for the `correctness_dismissal` moment (returned). The stops
/// that follow judge the same tree, answered from the cache, so they raise
/// no numeric moment of their own.
fn with_a_queued_regression_question(d: &Daemon, f: &Fixture, id: &str) -> Value {
    evaluate(d, f, id, ALL_CORRECT_SLOW);
    let e = evaluate(d, f, id, B_WRONG);
    assert_eq!(e["holds"], false, "{e}");
    let queued = queued_for(d, id, "correctness_dismissal");
    assert_eq!(queued.len(), 1, "the regression queued one question: {:#?}", questions(d, id));
    assert_eq!(queued[0]["source"], "bank", "{}", queued[0]);
    queued[0].clone()
}

/// The claim moments recorded from the stop's words (source `text`).
fn text_moments(d: &Daemon, id: &str, moment: &str) -> Vec<Value> {
    d.events(id, "moment").into_iter().filter(|m| m["source"] == "text" && m["moment"] == moment).collect()
}

// ---------------------------------------------------------------------------
// 1. The priority chain of the question a blocked stop carries.
//
// Today's chain (src/app/stop.rs judge_stop, deciding through gate::plan_stop), for a BLOCKED stop:
//   1. a person's waiting question (the OLDEST one: `waiting.iter().find`);
//   -  human mode: nothing more (no bank question; issue #32);
//   -  correctness first (issue #32): on a candidate with an incorrect
//      scenario, a correctness question (the words' dismissal, else the
//      latest queued `correctness_dismissal` question, else a fresh
//      completion-claim pick in the correctness group), nothing else;
//   2. autonomous mode only: the first claim moment of the stop's own words
//      (dismissal, then limit, then gain; completion claims excluded) — its
//      queued question if one waits for that moment, else a fresh bank pick
//      for it;
//   3. else the LATEST queued non-human question whose moment is not
//      `start` (the start question never rides on a stop);
//   4. else a completion-claim pick from the bank, preferring the groups
//      that fit what failed;
//   5. "builtin" is not a step of its own: it is pick_question's fallback
//      when no bank entry applies, for the claim-moment pick of step 2 as
//      well as for step 4.
// This matches REDESIGN.md's sentence ("human, then claim moment, then
// queued moment, then completion claim, then builtin") with the
// refinements above.
// ---------------------------------------------------------------------------

#[test]
fn a_persons_question_wins_over_a_claim_moment_and_a_queued_moment_question() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let c = client();
    let moment_q = with_a_queued_regression_question(&d, &f, &id);
    let older = ask(&d, &c, &id, "Which input size shows the error in b first?");
    let newer = ask(&d, &c, &id, "Is the reference itself computed in double precision?");

    // The stop's words show a claimed limit as well: the person still wins.
    let reply = stop(&d, &c, &id, "s1", LIMIT_CLAIM);
    let r = block_reason(&reply);
    assert!(r.starts_with("gadfly: you may not stop yet. The stop predicate fails on 1 of 3 scenarios"), "{r}");
    assert!(
        r.contains("\nQuestion from the person supervising: Which input size shows the error in b first?\n"),
        "{r}"
    );
    assert!(!r.contains("double precision"), "one question per stop: {r}");

    let s = stop_for(&d, &id, &reply["event_id"]);
    assert_eq!(s["decision"], "block");
    assert_eq!(s["holds"], false);
    assert_eq!(s["question_id"], older, "the oldest person's question is delivered: {s}");
    let q = question(&d, &id, older);
    assert_eq!((q["status"].as_str(), q["delivered_via"].as_str()), (Some("delivered"), Some("stop_hook_reason")));
    assert_eq!(question(&d, &id, newer)["status"], "queued", "the newer person's question still waits");
    assert_eq!(question(&d, &id, moment_q["id"].as_i64().unwrap())["status"], "queued");
    let delivered = d.events(&id, "question.delivered");
    assert_eq!(delivered.len(), 1, "{delivered:#?}");
    assert_eq!(delivered[0]["question_id"], older);
    assert_eq!(delivered[0]["source"], "human");
    assert_eq!(delivered[0]["bank_id"], Value::Null);
    assert_eq!(delivered[0]["via"], "stop_hook_reason");
    let decision = d.events(&id, "decision");
    assert_eq!(decision.last().unwrap()["question_id"], older);

    // The claimed limit lost the stop to the person: it is raised by mode
    // (autonomous: its own question is queued for later), not asked here.
    let limits = text_moments(&d, &id, "limit_claim");
    assert_eq!(limits.len(), 1, "{limits:#?}");
    let limit_q = limits[0]["question"]["question_id"].as_i64().unwrap_or_else(|| panic!("{}", limits[0]));
    assert_eq!(limits[0]["question"].get("via"), None, "queued, not asked at the stop: {}", limits[0]);
    let q = question(&d, &id, limit_q);
    assert_eq!((q["status"].as_str(), q["moment"].as_str()), (Some("queued"), Some("limit_claim")), "{q}");
}

#[test]
fn a_claim_moment_in_the_stops_words_wins_over_a_queued_moment_question() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let c = client();
    let moment_q = with_a_queued_regression_question(&d, &f, &id);
    let before = questions(&d, &id).len();
    // b is correct again, still too slow: correctness does not come first.
    f.set_candidate(B_SLOW);

    let reply = stop(&d, &c, &id, "s1", LIMIT_CLAIM);
    let r = block_reason(&reply);
    let s = stop_for(&d, &id, &reply["event_id"]);
    let asked = s["question_id"].as_i64().unwrap_or_else(|| panic!("no question carried: {s}"));
    assert_ne!(asked, moment_q["id"].as_i64().unwrap(), "not the queued regression question");
    // A fresh bank pick for the claimed limit, queued and delivered at once.
    assert_eq!(questions(&d, &id).len(), before + 1);
    let q = question(&d, &id, asked);
    assert_eq!(q["moment"], "limit_claim", "{q}");
    assert_eq!(q["source"], "bank", "{q}");
    assert_eq!(q["delivered_via"], "stop_hook_reason", "{q}");
    let bank_id = q["bank_id"].as_str().unwrap();
    assert!(!bank_id.starts_with("builtin-"), "the shipped bank has limit_claim entries: {q}");
    assert!(r.contains(&format!("\nQuestion ({bank_id}): {}\n", q["text"].as_str().unwrap())), "{r}");
    assert_eq!(question(&d, &id, moment_q["id"].as_i64().unwrap())["status"], "queued", "still waits");
    // The claim moment records that its question went out in the reason.
    let limits = text_moments(&d, &id, "limit_claim");
    assert_eq!(limits.len(), 1, "{limits:#?}");
    assert_eq!(limits[0]["question"]["question_id"], asked);
    assert_eq!(limits[0]["question"]["via"], "stop_hook_reason");
}

#[test]
fn a_claim_moment_whose_question_already_waits_is_asked_with_that_queued_question() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let c = client();
    let moment_q = with_a_queued_regression_question(&d, &f, &id);
    let queued_id = moment_q["id"].as_i64().unwrap();
    let before = questions(&d, &id).len();

    let reply = stop(&d, &c, &id, "s1", DISMISSAL);
    let r = block_reason(&reply);
    let s = stop_for(&d, &id, &reply["event_id"]);
    assert_eq!(s["question_id"], queued_id, "the waiting dismissal question is the one asked: {s}");
    assert_eq!(questions(&d, &id).len(), before, "no new question was picked");
    let q = question(&d, &id, queued_id);
    assert_eq!((q["status"].as_str(), q["delivered_via"].as_str()), (Some("delivered"), Some("stop_hook_reason")));
    let bank_id = q["bank_id"].as_str().unwrap();
    assert!(r.contains(&format!("\nQuestion ({bank_id}): {}\n", q["text"].as_str().unwrap())), "{r}");
    let dismissals = text_moments(&d, &id, "correctness_dismissal");
    assert_eq!(dismissals.len(), 1, "{dismissals:#?}");
    assert_eq!(dismissals[0]["question"]["question_id"], queued_id);
    assert_eq!(dismissals[0]["question"]["via"], "stop_hook_reason");
}

#[test]
fn the_latest_queued_moment_question_wins_over_the_completion_claim_and_the_start_question_waits() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let c = client();
    let regression_q = with_a_queued_regression_question(&d, &f, &id);
    // A 2.25x jump of the geometric mean in one step: a suspicious gain,
    // queued after the regression's question.
    let e = evaluate(&d, &f, &id, B_WRONG_FAST);
    assert_eq!(e["holds"], false, "{e}");
    let gain = queued_for(&d, &id, "suspicious_gain");
    assert_eq!(gain.len(), 1, "{:#?}", questions(&d, &id));
    let gain_id = gain[0]["id"].as_i64().unwrap();
    assert!(gain_id > regression_q["id"].as_i64().unwrap());
    let start = queued_for(&d, &id, "start");
    assert_eq!(start.len(), 1, "the campaign's start question waits from its creation");
    // b is correct again, still too slow: correctness does not come first.
    f.set_candidate(B_SLOW_AC_FAST);

    let reply = stop(&d, &c, &id, "s1", "All scenarios are done; the work is complete.");
    let r = block_reason(&reply);
    let s = stop_for(&d, &id, &reply["event_id"]);
    assert_eq!(s["question_id"], gain_id, "the latest queued moment question: {s}");
    assert!(r.contains(gain[0]["text"].as_str().unwrap()), "{r}");
    assert_eq!(question(&d, &id, regression_q["id"].as_i64().unwrap())["status"], "queued");
    assert_eq!(question(&d, &id, start[0]["id"].as_i64().unwrap())["status"], "queued", "never rides on a stop");
    // The words asked nothing of their own: no claim moment but a
    // completion claim, which is judged at the stop itself.
    for m in d.events(&id, "moment").iter().filter(|m| m["source"] == "text") {
        assert_eq!(m["moment"], "completion_claim", "{m}");
        assert_eq!(m["no_question"], "judged at the stop itself", "{m}");
    }
}

#[test]
fn with_no_moment_question_waiting_a_blocked_stop_asks_a_completion_claim_question_from_the_bank() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let c = client();
    f.set_candidate(B_WRONG);
    let start = queued_for(&d, &id, "start");
    assert_eq!(start.len(), 1);

    let reply = stop(&d, &c, &id, "s1", "Done.");
    let r = block_reason(&reply);
    let s = stop_for(&d, &id, &reply["event_id"]);
    let asked = s["question_id"].as_i64().unwrap_or_else(|| panic!("no question carried: {s}"));
    let q = question(&d, &id, asked);
    assert_eq!(q["moment"], "completion_claim", "{q}");
    assert_eq!(q["source"], "bank", "{q}");
    assert_eq!(q["delivered_via"], "stop_hook_reason", "{q}");
    // An incorrect scenario: the correctness group is preferred.
    let bank_id = q["bank_id"].as_str().unwrap();
    assert!(bank_id.starts_with("correct-"), "{q}");
    assert!(r.contains(&format!("\nQuestion ({bank_id}): {}\n", q["text"].as_str().unwrap())), "{r}");
    assert_eq!(question(&d, &id, start[0]["id"].as_i64().unwrap())["status"], "queued", "the start question waits");
    let delivered = d.events(&id, "question.delivered");
    assert_eq!(delivered.len(), 1, "{delivered:#?}");
    assert_eq!(delivered[0]["bank_id"], bank_id);
    assert_eq!(delivered[0]["moment"], "completion_claim");
}

#[test]
fn with_an_empty_bank_a_blocked_stop_asks_a_builtin_completion_question() {
    let f = Fixture::new("");
    let bank = f.dir.path().join("empty-bank");
    std::fs::create_dir_all(&bank).unwrap();
    let data = f.data_dir();
    let mut cmd = Daemon::serve_command(&data);
    cmd.arg("--bank-dir").arg(&bank);
    let d = Daemon::start_cmd(&data, cmd);
    let id = d.create_campaign(&f.spec());
    let c = client();
    let builtin = gadfly::gate::BUILTIN_COMPLETION_QUESTIONS;
    // The start moment falls back to the builtins too (pick_question's
    // fallback is for every moment): the first builtin completion question
    // is queued as the start question.
    let start = queued_for(&d, &id, "start");
    assert_eq!(start.len(), 1);
    assert_eq!(start[0]["bank_id"], builtin[0].0, "{}", start[0]);

    f.set_candidate(B_WRONG);
    let reply = stop(&d, &c, &id, "s1", "Done.");
    let r = block_reason(&reply);
    let s = stop_for(&d, &id, &reply["event_id"]);
    let q = question(&d, &id, s["question_id"].as_i64().unwrap());
    // The builtins rotate by how many were queued already (the start's one).
    assert_eq!(q["bank_id"], builtin[1].0, "{q}");
    // Issue 35: the question names what it is about, the failing scenario.
    let named = format!("About scenario b (completion claim, seen by stop):\n{}", builtin[1].1);
    assert_eq!(q["text"], named.as_str(), "{q}");
    assert_eq!(q["moment"], "completion_claim", "{q}");
    assert_eq!(q["source"], "bank", "{q}");
    assert!(r.contains(&format!("\nQuestion ({}): {named}\n", builtin[1].0)), "{r}");
}

/// Issue #32 (NEWCOMER-RUN.md, 5): on a kernel wrong everywhere, the words
/// "10x faster" took the stop from the correctness question a regression
/// had queued, and a benchmark question went out instead. Correctness
/// first: on an incorrect candidate the waiting correctness question wins
/// over the stop's claimed gain and over a later moment question (here a
/// suspicious gain's), which wait on.
#[test]
fn on_an_incorrect_candidate_the_queued_correctness_question_wins_over_a_claimed_gain() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let c = client();
    let regression_q = with_a_queued_regression_question(&d, &f, &id);
    let e = evaluate(&d, &f, &id, B_WRONG_FAST);
    assert_eq!(e["holds"], false, "{e}");
    let gain = queued_for(&d, &id, "suspicious_gain");
    assert_eq!(gain.len(), 1, "{:#?}", questions(&d, &id));

    let reply = stop(&d, &c, &id, "s1", GAIN_CLAIM);
    let r = block_reason(&reply);
    let s = stop_for(&d, &id, &reply["event_id"]);
    let regression_id = regression_q["id"].as_i64().unwrap();
    assert_eq!(s["question_id"], regression_id, "the correctness question: {s}");
    let q = question(&d, &id, regression_id);
    assert_eq!((q["status"].as_str(), q["delivered_via"].as_str()), (Some("delivered"), Some("stop_hook_reason")));
    assert!(
        r.contains(&format!("\nQuestion ({}): {}\n", q["bank_id"].as_str().unwrap(), q["text"].as_str().unwrap())),
        "{r}"
    );
    assert_eq!(question(&d, &id, gain[0]["id"].as_i64().unwrap())["status"], "queued", "the gain's question waits");
    // The words did show a claimed gain: recorded, not asked (a wrong
    // kernel measures no gain for them to claim).
    let gains = text_moments(&d, &id, "suspicious_gain");
    assert_eq!(gains.len(), 1, "the classifier reads a claimed gain in {GAIN_CLAIM:?}: {gains:#?}");
    let why = gains[0]["no_question"].as_str().unwrap_or_default();
    assert!(why.starts_with("the latest evaluation measured no gain"), "{}", gains[0]);
    let delivered = d.events(&id, "question.delivered");
    assert_eq!(delivered.len(), 1, "{delivered:#?}");
    assert_eq!(delivered[0]["moment"], "correctness_dismissal");
}

/// The newcomer's case with nothing queued: a kernel wrong on every
/// scenario, the agent claiming a huge gain. The stop asks a fresh
/// correctness question, not one for the claimed gain (whose groups put
/// benchmark validity first); the claim is recorded with why no question
/// follows it: a kernel wrong everywhere measures no gain to check
/// (`moments::gain_claim`).
#[test]
fn a_kernel_wrong_everywhere_with_a_claimed_gain_is_asked_a_correctness_question() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let c = client();
    f.set_candidate("a false 10 100\nb false 10 100\nc false 10 100\n");

    let reply = stop(&d, &c, &id, "s1", GAIN_CLAIM);
    let r = block_reason(&reply);
    assert!(r.contains("fails on 3 of 3 scenarios"), "{r}");
    let s = stop_for(&d, &id, &reply["event_id"]);
    let q = question(&d, &id, s["question_id"].as_i64().unwrap_or_else(|| panic!("no question carried: {s}")));
    let bank_id = q["bank_id"].as_str().unwrap();
    assert!(bank_id.starts_with("correct-"), "a correctness question: {q}");
    assert_eq!(q["moment"], "completion_claim", "{q}");
    assert!(r.contains(&format!("\nQuestion ({bank_id}): {}\n", q["text"].as_str().unwrap())), "{r}");
    let gains = text_moments(&d, &id, "suspicious_gain");
    assert_eq!(gains.len(), 1, "the classifier reads a claimed gain in {GAIN_CLAIM:?}: {gains:#?}");
    assert!(gains[0].get("question").is_none_or(Value::is_null), "no gain question: {}", gains[0]);
    let why = gains[0]["no_question"].as_str().unwrap_or_default();
    assert!(why.starts_with("the latest evaluation measured no gain"), "{}", gains[0]);
    assert!(gains[0]["detail"].as_str().unwrap().contains("gave no correct figure"), "{}", gains[0]);
    assert!(queued_for(&d, &id, "suspicious_gain").is_empty(), "{:#?}", questions(&d, &id));
}

// ---------------------------------------------------------------------------
// 2. Tampered hooks block a stop outside audit mode, not in audit mode.
// ---------------------------------------------------------------------------

/// Attaches gadfly's hooks to the fixture's workspace (recorded as a hook
/// install), then has the agent switch every hook off in the project's
/// settings: what `check_hook_install` reports at the next stop.
fn attach_and_tamper(d: &Daemon, f: &Fixture, id: &str) {
    let out = d.run(&["attach", id]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    std::fs::write(f.ws().join(".claude/settings.json"), r#"{"disableAllHooks": true}"#).unwrap();
}

fn hooks_changed_violations(d: &Daemon, id: &str) -> Vec<Value> {
    d.events(id, "violation").into_iter().filter(|v| v["kind"] == "hooks_changed").collect()
}

#[test]
fn tampered_hooks_block_a_stop_outside_audit_mode_even_when_the_predicate_holds() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let c = client();
    f.set_candidate(ALL_PASS);
    let out = d.run(&["attach", &id]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let fine = stop(&d, &c, &id, "s1", "Done, every scenario passes.");
    assert_eq!(fine["decision"], "allow", "attached and untouched: {fine}");
    std::fs::write(f.ws().join(".claude/settings.json"), r#"{"disableAllHooks": true}"#).unwrap();

    let reply = stop(&d, &c, &id, "s1", "Done, every scenario passes, really.");
    let r = block_reason(&reply);
    assert!(
        r.starts_with("gadfly: you may not stop: the hooks that supervise this campaign were tampered with: the hook settings gadfly wrote ("),
        "{r}"
    );
    assert!(r.contains("were changed, or hooks were disabled in"), "{r}");
    assert!(r.contains(&format!("`gadfly attach {id}`")), "{r}");
    // The predicate holds: nothing follows the tamper text (no table, no
    // question), and no question was delivered.
    assert!(r.ends_with("then try to stop again.\n"), "{r:?}");
    let s = stop_for(&d, &id, &reply["event_id"]);
    assert_eq!(s["decision"], "block");
    assert_eq!(s["holds"], true, "the verdict is kept: {s}");
    assert_eq!(s["question_id"], Value::Null, "{s}");
    assert_eq!(s["reason"].as_str(), Some(r.as_str()));
    assert!(d.events(&id, "question.delivered").is_empty());
    assert_eq!(hooks_changed_violations(&d, &id).len(), 1, "the stop recorded the violation");
    let decision = d.events(&id, "decision");
    assert_eq!(decision.last().unwrap()["decision"], "block");
    assert_eq!(decision.last().unwrap()["holds"], true);
}

#[test]
fn tampered_hooks_add_their_block_before_the_failing_predicates_reason_and_question() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let c = client();
    f.set_candidate(B_WRONG);
    attach_and_tamper(&d, &f, &id);

    let reply = stop(&d, &c, &id, "s1", "Done.");
    let r = block_reason(&reply);
    let (tamper, rest) = r.split_once('\n').unwrap();
    assert!(tamper.starts_with("gadfly: you may not stop: the hooks that supervise this campaign were tampered with"));
    assert!(rest.starts_with("gadfly: you may not stop yet. The stop predicate fails on 1 of 3 scenarios"), "{r}");
    let s = stop_for(&d, &id, &reply["event_id"]);
    assert_eq!(s["decision"], "block");
    assert_eq!(s["holds"], false);
    let asked = s["question_id"].as_i64().expect("the predicate's question is still carried");
    assert_eq!(question(&d, &id, asked)["status"], "delivered");
    assert!(rest.contains("\nQuestion ("), "{r}");
}

#[test]
fn tampered_hooks_do_not_block_in_audit_mode() {
    let f = Fixture::new("[questions]\nmode = \"audit\"\n");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let c = client();
    f.set_candidate(ALL_PASS);
    attach_and_tamper(&d, &f, &id);
    let passing = stop(&d, &c, &id, "s1", "Done.");
    f.set_candidate(B_WRONG);
    let failing = stop(&d, &c, &id, "s1", "Done again.");

    for (reply, holds) in [(&passing, true), (&failing, false)] {
        assert_eq!(reply["decision"], "record", "{reply}");
        assert_eq!(reply["output"], Value::Null, "nothing printed for the agent: {reply}");
        let s = stop_for(&d, &id, &reply["event_id"]);
        assert_eq!(s["decision"], "record", "{s}");
        assert_eq!(s["holds"], holds, "{s}");
        assert_eq!(s["reason"], Value::Null, "{s}");
        assert_eq!(s["question_id"], Value::Null, "{s}");
    }
    // The tampering is still found and recorded (once per distinct change).
    assert_eq!(hooks_changed_violations(&d, &id).len(), 1);
    assert!(questions(&d, &id).is_empty(), "audit mode queues and asks nothing");
}

// ---------------------------------------------------------------------------
// 3. `ungated` and `unavailable_block`.
// ---------------------------------------------------------------------------

/// A `spooled_at` for a call spooled now (after the campaign was created:
/// the daemon refuses a replay that claims an earlier time).
fn spooled_now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// Replays a hook call the hook client spooled at `at` (what it does once
/// the daemon is back): the daemon's reply.
#[allow(clippy::too_many_arguments)]
fn replay(
    d: &Daemon,
    c: &reqwest::blocking::Client,
    id: &str,
    event: &str,
    call_id: &str,
    outcome: &str,
    at: &str,
    body: &Value,
) -> Value {
    let r = c
        .post(format!("{}/api/v1/campaigns/{id}/hooks/claude-code/{event}", d.url))
        .bearer_auth(&d.token)
        .header("x-gadfly-call-id", call_id)
        .query(&[("spooled_at", at), ("outcome", outcome), ("why", "connection refused")])
        .json(body)
        .send()
        .unwrap();
    let status = r.status();
    let text = r.text().unwrap();
    assert!(status.is_success(), "replay {event} {outcome}: {status} {text}");
    serde_json::from_str(&text).unwrap()
}

fn stop_payload(session: &str, claim: &str, active: bool) -> Value {
    json!({"session_id": session, "hook_event_name": "Stop", "stop_hook_active": active, "last_assistant_message": claim})
}

#[test]
fn a_spooled_stop_the_hook_let_through_is_recorded_as_ungated_with_a_stop_ungated_event() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let c = client();
    // An evaluation exists: the ungated record carries its verdict.
    let e = evaluate(&d, &f, &id, B_WRONG);

    let at = spooled_now();
    let reply = replay(&d, &c, &id, "stop", "call-allowed", "allowed", &at, &stop_payload("s1", "Done.", true));
    assert_eq!(reply["decision"], "ungated", "{reply}");
    assert_eq!(reply["output"], Value::Null, "{reply}");
    let s = stop_for(&d, &id, &reply["event_id"]);
    assert_eq!(s["decision"], "ungated");
    assert_eq!(
        s["reason"],
        format!("the supervisor was unavailable at {at} (connection refused); the hook let this stop through ungated")
    );
    assert_eq!(s["claim"], "Done.");
    assert_eq!(s["session_id"], "s1");
    assert_eq!(s["evaluation_id"], e["id"], "the latest evaluation: {s}");
    assert_eq!(s["holds"], false);
    assert_eq!(s["stop_hook_active"], false, "record_ungated stores false whatever the payload said: {s}");
    assert_eq!(s["question_id"], Value::Null);
    let ungated = d.events(&id, "stop.ungated");
    assert_eq!(ungated.len(), 1, "{ungated:#?}");
    assert_eq!(ungated[0]["why"], s["reason"]);
    assert_eq!(ungated[0]["event_id"], reply["event_id"]);
    assert_eq!(ungated[0]["latest_evaluation_id"], e["id"]);
    assert_eq!(ungated[0]["holds"], false);
    assert_eq!(ungated[0]["claim"], "Done.");
    // The hook call itself is recorded with what the hook did then.
    let calls = d.events(&id, "hook.stop");
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["spooled"], json!({"at": at, "outcome": "allowed", "why": "connection refused"}));
    // Not judged now: no evaluation, no decision event, no question.
    assert!(d.events(&id, "decision").is_empty());
    assert!(d.events(&id, "question.delivered").is_empty());

    // Not pinned: a stop replayed with outcome `passed`. The committed
    // handle_spooled_hook records it as `ungated` too (`("stop", _)`), but
    // spool::check_replay, being added alongside, refuses it (400).
}

#[test]
fn a_spooled_stop_the_hook_blocked_is_recorded_as_unavailable_block() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let c = client();
    evaluate(&d, &f, &id, ALL_PASS);

    let at = spooled_now();
    let reply = replay(&d, &c, &id, "stop", "call-blocked", "blocked", &at, &stop_payload("s1", "Done.", true));
    assert_eq!(reply["decision"], "unavailable_block", "{reply}");
    assert_eq!(reply["output"], Value::Null, "{reply}");
    let s = stop_for(&d, &id, &reply["event_id"]);
    assert_eq!(s["decision"], "unavailable_block");
    assert_eq!(
        s["reason"],
        format!("the supervisor was unavailable at {at} (connection refused); the hook blocked this stop on its own")
    );
    assert_eq!(s["claim"], "Done.");
    assert_eq!(s["evaluation_id"], Value::Null, "no evaluation is attached, though one exists: {s}");
    assert_eq!(s["holds"], false, "though the latest evaluation holds: {s}");
    assert_eq!(s["stop_hook_active"], true, "taken from the payload: {s}");
    assert!(d.events(&id, "stop.ungated").is_empty(), "no stop.ungated event for a block");
    assert!(d.events(&id, "decision").is_empty());
    // A spooled non-stop event is recorded with no decision at all.
    let other = replay(
        &d,
        &c,
        &id,
        "post-tool-use",
        "call-tool",
        "passed",
        &at,
        &json!({"session_id": "s1", "tool_name": "Bash"}),
    );
    assert_eq!(other["decision"], Value::Null, "{other}");
    assert_eq!(stops(&d, &id).len(), 1);
}

#[test]
fn a_spooled_stop_replayed_twice_with_one_call_id_is_recorded_once() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let c = client();
    let body = stop_payload("s1", "Done.", false);
    let at = spooled_now();
    let first = replay(&d, &c, &id, "stop", "call-1", "allowed", &at, &body);
    let second = replay(&d, &c, &id, "stop", "call-1", "allowed", &at, &body);
    assert_eq!(first["event_id"], second["event_id"], "{first} {second}");
    assert_eq!(second["decision"], "ungated");
    assert_eq!(stops(&d, &id).len(), 1);
    assert_eq!(d.events(&id, "stop.ungated").len(), 1);
    assert_eq!(d.events(&id, "hook.stop").len(), 1);
    // Today the reply's decision follows the replay's own outcome even for
    // a call already recorded, while the record keeps the first one.
    let third = replay(&d, &c, &id, "stop", "call-1", "blocked", &at, &body);
    assert_eq!(third["event_id"], first["event_id"]);
    assert_eq!(third["decision"], "unavailable_block", "{third}");
    let all = stops(&d, &id);
    assert_eq!(all.len(), 1);
    assert_eq!(all[0]["decision"], "ungated");
    // The same blocked stop replayed twice: one unavailable_block.
    let b1 = replay(&d, &c, &id, "stop", "call-2", "blocked", &at, &body);
    let b2 = replay(&d, &c, &id, "stop", "call-2", "blocked", &at, &body);
    assert_eq!(b1["event_id"], b2["event_id"]);
    let decisions: Vec<Value> = stops(&d, &id).iter().map(|s| s["decision"].clone()).collect();
    assert_eq!(decisions, [json!("ungated"), json!("unavailable_block")]);
}

#[test]
fn a_session_that_ends_without_an_allowed_stop_is_recorded_as_ungated() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let audit_spec = f.dir.path().join("audit.toml");
    std::fs::write(
        &audit_spec,
        std::fs::read_to_string(f.spec())
            .unwrap()
            .replace("name = \"fixture\"", "name = \"fixture-audit\"")
            .replace("[questions]\n", "[questions]\nmode = \"audit\"\n"),
    )
    .unwrap();
    let audit = d.create_campaign(&audit_spec);
    let c = client();
    let end = |campaign: &str, event: &str, session: &str| {
        d.post_hook(&c, event, campaign, &json!({"session_id": session, "hook_event_name": event}))
    };
    let reason_of = |campaign: &str, reply: &Value| stop_for(&d, campaign, &reply["event_id"])["reason"].clone();

    // Blocked, then the session ends.
    f.set_candidate(B_WRONG);
    assert_eq!(stop(&d, &c, &id, "blocked", "Done.")["decision"], "block");
    let r = end(&id, "session-end", "blocked");
    assert_eq!(r["decision"], Value::Null, "a session end is not answered with a decision: {r}");
    assert_eq!(reason_of(&id, &r), "the session ended while its last stop was blocked");
    // The hook blocked on its own (spooled), then the session ends.
    replay(&d, &c, &id, "stop", "call-x", "blocked", &spooled_now(), &stop_payload("spooled", "Done.", false));
    let r = end(&id, "session-end", "spooled");
    assert_eq!(reason_of(&id, &r), "the session ended while its last stop was blocked");
    // No stop at all, then the session ends; ending again adds nothing
    // (its last attempt is now `ungated`).
    let r = end(&id, "session-end", "silent");
    assert_eq!(reason_of(&id, &r), "the session ended without any stop judged by the gate");
    let n = stops(&d, &id).len();
    end(&id, "session-end", "silent");
    assert_eq!(stops(&d, &id).len(), n);
    // Allowed, then the session ends: nothing; a StopFailure is ungated
    // whatever came before.
    f.set_candidate(ALL_PASS);
    assert_eq!(stop(&d, &c, &id, "allowed", "Done.")["decision"], "allow");
    end(&id, "session-end", "allowed");
    assert_eq!(stops(&d, &id).len(), n + 1, "only the allowed stop");
    let r = end(&id, "stop-failure", "allowed");
    assert_eq!(reason_of(&id, &r), "the turn ended on a failure (StopFailure), with no Stop hook decision");

    let all = stops(&d, &id);
    let decisions: Vec<&str> = all.iter().map(|s| s["decision"].as_str().unwrap()).collect();
    assert_eq!(decisions, ["block", "ungated", "unavailable_block", "ungated", "ungated", "allow", "ungated"]);
    assert_eq!(d.events(&id, "stop.ungated").len(), 4);
    for s in all.iter().filter(|s| s["decision"] == "ungated") {
        assert_eq!(s["claim"], Value::Null, "{s}");
        assert!(s["evaluation_id"].is_i64(), "the latest evaluation is attached: {s}");
    }

    // Audit mode: nothing is ungated.
    end(&audit, "session-end", "a1");
    end(&audit, "stop-failure", "a1");
    assert!(stops(&d, &audit).is_empty());
    assert!(d.events(&audit, "stop.ungated").is_empty());
}

/// The Claude Code transcripts of tests/data/claude-code (README there).
fn claude_code_transcript(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/claude-code").join(name)
}

/// Issue #32 (NEWCOMER-RUN.md, 9): a Claude Code session that failed at
/// start-up and never got a prompt was recorded as an ungated stop ("the
/// session ended without any stop judged by the gate"). It had no turn: it
/// is recorded as a failed start, with the error its transcript names, and
/// no stop attempt. A session that got its prompt and then failed on its
/// API is still ungated. The hook payloads are the ones Claude Code 2.1.332
/// sends (AGENTS-PROBE.md 1.5; tests/data/claude-code/README.md).
#[test]
fn a_claude_code_session_that_failed_at_start_up_is_a_failed_start_not_an_ungated_stop() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let c = client();
    f.set_candidate(B_WRONG);
    let projects = f.dir.path().join("projects/-home-dev-qr-kernel");
    std::fs::create_dir_all(&projects).unwrap();
    let cwd = f.ws().display().to_string();
    let hook = |event: &str, session: &str, extra: Value| {
        let mut body = json!({
            "session_id": session,
            "transcript_path": projects.join(format!("{session}.jsonl")),
            "cwd": cwd,
            "hook_event_name": event,
        });
        body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        d.post_hook(&c, &gadfly_event(event), &id, &body)
    };
    let start = json!({"source": "startup", "model": "claude-opus-5-5"});

    // No prompt, and Claude Code wrote no transcript (what it does when a
    // session ends before any prompt): a failed start with no error known.
    hook("SessionStart", "never-prompted", start.clone());
    let end = hook("SessionEnd", "never-prompted", json!({"reason": "other"}));
    // Start-up lines and a failed API request, no prompt.
    std::fs::copy(claude_code_transcript("failed-start.jsonl"), projects.join("api-down.jsonl")).unwrap();
    hook("SessionStart", "api-down", start.clone());
    let end_api_down = hook("SessionEnd", "api-down", json!({"reason": "other"}));
    // A prompt, then the API unreachable: the model never answered, so no
    // turn either (what a Claude Code that is not logged in does).
    std::fs::copy(claude_code_transcript("api-unreachable.jsonl"), projects.join("prompted.jsonl")).unwrap();
    let prompted = |session: &str| {
        hook("SessionStart", session, start.clone());
        hook(
            "UserPromptSubmit",
            session,
            json!({"prompt": "Make the kernel faster.", "permission_mode": "bypassPermissions"}),
        );
        let failure = hook(
            "StopFailure",
            session,
            json!({"error": "server_error", "last_assistant_message": "API Error: Connection refused — a firewall or proxy may be blocking it (ECONNREFUSED)"}),
        );
        hook("SessionEnd", session, json!({"reason": "other"}));
        failure
    };
    let unanswered = prompted("prompted");
    // The model answered (a tool call), then a request failed: a turn that
    // ended outside the gate, an ungated stop.
    let mut text = std::fs::read_to_string(claude_code_transcript("api-unreachable.jsonl")).unwrap();
    let (head, tail) = text.split_at(text.find("\n{\"parentUuid\":\"c920387f").map_or(text.len(), |i| i + 1));
    text = format!(
        "{head}{}\n{tail}",
        r#"{"type":"assistant","message":{"role":"assistant","model":"m","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"make"}}]}}"#
    );
    std::fs::write(projects.join("answered.jsonl"), &text).unwrap();
    let failure = prompted("answered");
    // A prompt hook call seen, and a transcript that holds no prompt (it was
    // emptied): nothing can be known, an ungated stop.
    std::fs::write(projects.join("emptied.jsonl"), "").unwrap();
    let emptied = prompted("emptied");

    let all = stops(&d, &id);
    assert_eq!(all.len(), 2, "only the sessions with a turn, or none knowable, are stop attempts: {all:#?}");
    assert_eq!((all[0]["session_id"].as_str(), all[1]["session_id"].as_str()), (Some("answered"), Some("emptied")));
    assert!(all.iter().all(|a| a["decision"] == "ungated"), "{all:#?}");
    assert_eq!(all[0]["event_id"], failure["event_id"]);
    assert_eq!(all[1]["event_id"], emptied["event_id"]);
    assert_eq!(all[0]["reason"], "the turn ended on a failure (StopFailure), with no Stop hook decision");
    let ungated = d.events(&id, "stop.ungated");
    assert_eq!(ungated.len(), 2, "{ungated:#?}");
    let failed = d.events(&id, "session.failed_start");
    assert_eq!(
        failed,
        [
            json!({"why": "the session ended before any prompt: no turn, so no stop to judge", "error": null,
                   "event_id": end["event_id"]}),
            json!({"why": "the session failed at start-up, before any prompt: no turn, so no stop to judge",
                   "error": "Connection refused — a firewall or proxy may be blocking it (ECONNREFUSED)",
                   "event_id": end_api_down["event_id"]}),
            json!({"why": "the model never answered the prompt (its request failed: not logged in, or the API \
                           unreachable): no turn, so no stop to judge",
                   "error": "API Error: Connection refused — a firewall or proxy may be blocking it (ECONNREFUSED)",
                   "event_id": unanswered["event_id"]}),
        ],
        "one failed start per session, at its first end"
    );
}

/// The `gadfly hook claude-code EVENT` spelling of a Claude Code hook event.
fn gadfly_event(event: &str) -> String {
    let mut out = String::new();
    for (i, ch) in event.chars().enumerate() {
        if ch.is_uppercase() && i > 0 {
            out.push('-');
        }
        out.push(ch.to_ascii_lowercase());
    }
    out
}

// ---------------------------------------------------------------------------
// 4. Allowed when the predicate holds, blocked when it fails: the values
//    stored.
// ---------------------------------------------------------------------------

#[test]
fn a_stop_is_allowed_when_the_predicate_holds_and_blocked_when_it_fails() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let c = client();

    f.set_candidate(B_WRONG);
    let blocked = stop(&d, &c, &id, "s1", "Done.");
    let r = block_reason(&blocked);
    assert!(r.starts_with("gadfly: you may not stop yet. The stop predicate fails on 1 of 3 scenarios"), "{r}");
    assert!(r.lines().any(|l| l.starts_with("b ") && l.contains("NO")), "{r}");
    assert!(r.ends_with("Keep working until every scenario passes, then try to stop again."), "{r}");
    let s = stop_for(&d, &id, &blocked["event_id"]);
    assert_eq!(s["decision"], "block");
    assert_eq!(s["holds"], false);
    assert_eq!(s["claim"], "Done.");
    assert_eq!(s["agent"], "claude-code");
    assert_eq!(s["stop_hook_active"], false);
    assert_eq!(s["reason"].as_str(), Some(r.as_str()));
    let eval_id = s["evaluation_id"].as_i64().expect("the evaluation judged");
    let q = s["question_id"].as_i64().expect("a blocked stop carries a question");
    let decision = d.events(&id, "decision");
    assert_eq!(decision.len(), 1);
    assert_eq!(
        decision[0],
        json!({"decision": "block", "holds": false, "evaluation_id": eval_id, "stop_event_id": blocked["event_id"], "question_id": q, "reason": r})
    );

    f.set_candidate(ALL_PASS);
    let allowed = stop(&d, &c, &id, "s1", "Done, all pass.");
    assert_eq!(allowed["decision"], "allow", "{allowed}");
    assert_eq!(allowed["output"], Value::Null, "nothing printed: {allowed}");
    let s = stop_for(&d, &id, &allowed["event_id"]);
    assert_eq!(s["decision"], "allow");
    assert_eq!(s["holds"], true);
    assert_eq!(s["reason"], Value::Null);
    assert_eq!(s["question_id"], Value::Null);
    assert!(s["evaluation_id"].as_i64().unwrap() > eval_id, "a new tree, a new evaluation");
    let decision = d.events(&id, "decision");
    assert_eq!(decision.len(), 2);
    assert_eq!(decision[1]["decision"], "allow");
    assert_eq!(decision[1]["reason"], Value::Null);

    // A person's question waiting blocks a stop whose predicate holds.
    let human = ask(&d, &c, &id, "What limits scenario c now?");
    let held = stop(&d, &c, &id, "s1", "Done, all pass, truly.");
    let r = block_reason(&held);
    assert!(r.starts_with("gadfly: the predicate holds on all 3 scenarios (tree "), "{r}");
    assert!(r.contains("but the person supervising this campaign has a question for you before you stop.\n"), "{r}");
    assert!(r.contains("\nQuestion from the person supervising: What limits scenario c now?\n"), "{r}");
    assert!(!r.contains("Keep working"), "{r}");
    let s = stop_for(&d, &id, &held["event_id"]);
    assert_eq!((s["decision"].as_str(), s["holds"].as_bool()), (Some("block"), Some(true)));
    assert_eq!(s["question_id"], human);
    // Delivered once: the next stop goes through.
    assert_eq!(stop(&d, &c, &id, "s1", "Answered: the memory bandwidth.")["decision"], "allow");
}

/// Issue #32 (NEWCOMER-RUN.md, 5): after the final allow the questions
/// still queued (the start question, a moment's) waited for ever as
/// "waiting". An allowed stop expires each, with why: its row says
/// `expired` (in the API and the console), and a `question.expired` event
/// records it. A blocked stop expires nothing.
#[test]
fn an_allowed_stop_expires_the_questions_still_waiting_with_why() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let c = client();
    // The start question, a regression's and a suspicious gain's wait.
    with_a_queued_regression_question(&d, &f, &id);
    evaluate(&d, &f, &id, B_WRONG_FAST);
    assert_eq!(queued_for(&d, &id, "suspicious_gain").len(), 1, "{:#?}", questions(&d, &id));
    // A block (one of them carried) expires nothing.
    let blocked = stop(&d, &c, &id, "s1", "Done.");
    block_reason(&blocked);
    let carried = stop_for(&d, &id, &blocked["event_id"])["question_id"].clone();
    assert!(d.events(&id, "question.expired").is_empty());
    let waiting: Vec<i64> =
        questions(&d, &id).iter().filter(|q| q["status"] == "queued").map(|q| q["id"].as_i64().unwrap()).collect();
    assert_eq!(waiting.len(), 2, "{:#?}", questions(&d, &id));
    assert!(!queued_for(&d, &id, "start").is_empty(), "the start question still waits");

    f.set_candidate(ALL_PASS);
    let allowed = stop(&d, &c, &id, "s1", "Done, every scenario passes.");
    assert_eq!(allowed["decision"], "allow", "{allowed}");
    let expired = d.events(&id, "question.expired");
    let expired_ids: Vec<i64> = expired.iter().map(|e| e["question_id"].as_i64().unwrap()).collect();
    assert_eq!(expired_ids, waiting, "every question still waiting, once: {expired:#?}");
    for e in &expired {
        // The passing candidate is 2.25x the last correct evaluation: a
        // suspicious gain, re-checked with another seed before the allow,
        // and the reason says so after its first words.
        let reason = e["reason"].as_str().unwrap();
        assert!(reason.starts_with("the stop was allowed"), "{e}");
        let q = question(&d, &id, e["question_id"].as_i64().unwrap());
        assert_eq!(q["status"], "expired", "{q}");
        assert_eq!(q["expired_reason"], reason, "{q}");
        assert!(q["expired_at"].is_string() && q["delivered_at"].is_null(), "{q}");
        assert_eq!((e["text"].clone(), e["source"].clone()), (q["text"].clone(), q["source"].clone()));
    }
    assert!(questions(&d, &id).iter().all(|q| q["status"] != "queued"), "nothing waits: {:#?}", questions(&d, &id));
    assert_eq!(question(&d, &id, carried.as_i64().unwrap())["status"], "delivered", "delivered stays so");
    // The console's campaign view reads the same rows.
    let detail = d.api_get(&format!("/campaigns/{id}"));
    let shown: Vec<&Value> =
        detail["questions"].as_array().unwrap().iter().filter(|q| q["status"] == "queued").collect();
    assert!(shown.is_empty(), "{shown:#?}");
    // Recorded after the allow's decision.
    let log = d.api_get(&format!("/campaigns/{id}/log?limit=10000"));
    let kinds: Vec<&str> = log.as_array().unwrap().iter().map(|e| e["kind"].as_str().unwrap()).collect();
    let last_decision = kinds.iter().rposition(|k| *k == "decision").unwrap();
    assert!(kinds.iter().rposition(|k| *k == "question.expired").unwrap() > last_decision, "{kinds:?}");
    // A person's question asked afterwards waits for the next stop.
    let later = ask(&d, &c, &id, "Which scenario limits you now?");
    assert_eq!(question(&d, &id, later)["status"], "queued");
}

#[test]
fn the_decision_by_mode_human_blocks_and_allows_audit_records() {
    let f = Fixture::new("");
    let spec_in = |mode: &str| {
        let p = f.dir.path().join(format!("{mode}.toml"));
        std::fs::write(
            &p,
            std::fs::read_to_string(f.spec())
                .unwrap()
                .replace("name = \"fixture\"", &format!("name = \"fixture-{mode}\""))
                .replace("[questions]\n", &format!("[questions]\nmode = \"{mode}\"\n")),
        )
        .unwrap();
        p
    };
    let d = Daemon::start(&f.data_dir());
    let human = d.create_campaign(&spec_in("human"));
    let audit = d.create_campaign(&spec_in("audit"));
    let c = client();

    f.set_candidate(B_WRONG);
    let hb = stop(&d, &c, &human, "s1", "Done.");
    let r = block_reason(&hb);
    let s = stop_for(&d, &human, &hb["event_id"]);
    assert_eq!((s["decision"].as_str(), s["holds"].as_bool()), (Some("block"), Some(false)));
    // Human mode sends no bank question of its own (issue #32): the person
    // chooses the questions.
    assert_eq!(s["question_id"], Value::Null, "{s}");
    assert!(!r.contains("\nQuestion"), "{r}");
    assert!(r.ends_with("Keep working until every scenario passes, then try to stop again."), "{r}");
    assert!(questions(&d, &human).is_empty(), "{:#?}", questions(&d, &human));
    assert!(d.events(&human, "question.delivered").is_empty());
    let ar = stop(&d, &c, &audit, "s1", "Done.");
    assert_eq!(ar["decision"], "record", "{ar}");
    assert_eq!(ar["output"], Value::Null);
    let s = stop_for(&d, &audit, &ar["event_id"]);
    assert_eq!((s["decision"].as_str(), s["holds"].as_bool()), (Some("record"), Some(false)));
    assert_eq!(s["reason"], Value::Null);
    assert_eq!(s["question_id"], Value::Null);
    assert!(s["evaluation_id"].is_i64(), "{s}");

    f.set_candidate(ALL_PASS);
    let ha = stop(&d, &c, &human, "s1", "Done, all pass.");
    assert_eq!(ha["decision"], "allow", "{ha}");
    assert_eq!(stop_for(&d, &human, &ha["event_id"])["holds"], true);
    let aa = stop(&d, &c, &audit, "s1", "Done, all pass.");
    assert_eq!(aa["decision"], "record", "{aa}");
    assert_eq!(stop_for(&d, &audit, &aa["event_id"])["holds"], true);
    // Audit mode records even with a person's question waiting.
    ask(&d, &c, &audit, "Why is c the slowest?");
    let aq = stop(&d, &c, &audit, "s1", "Done, all pass, truly.");
    assert_eq!(aq["decision"], "record", "{aq}");
    assert_eq!(stop_for(&d, &audit, &aq["event_id"])["question_id"], Value::Null);
}

#[test]
fn a_stop_that_cannot_be_evaluated_is_blocked_fail_closed_and_only_recorded_in_audit_mode() {
    let f = Fixture::new("");
    let audit_spec = f.dir.path().join("audit.toml");
    std::fs::write(
        &audit_spec,
        std::fs::read_to_string(f.spec())
            .unwrap()
            .replace("name = \"fixture\"", "name = \"fixture-audit\"")
            .replace("[questions]\n", "[questions]\nmode = \"audit\"\n"),
    )
    .unwrap();
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let audit = d.create_campaign(&audit_spec);
    let c = client();
    // The workspace is gone: no snapshot, no evaluation.
    std::fs::rename(f.ws(), f.dir.path().join("ws-gone")).unwrap();

    let reply = stop(&d, &c, &id, "s1", "Done.");
    let r = block_reason(&reply);
    assert!(
        r.starts_with(
            "gadfly could not evaluate the candidate, so the stop predicate is not known to hold: the workspace folder"
        ),
        "{r}"
    );
    // What is wrong and what to do (issue #49).
    assert!(r.contains("no longer exists: restore it there"), "{r}");
    assert!(r.ends_with("Fix what this names (or ask the person supervising), then try to stop again."), "{r}");
    let s = stop_for(&d, &id, &reply["event_id"]);
    assert_eq!(s["decision"], "block");
    assert_eq!(s["holds"], false);
    assert_eq!(s["evaluation_id"], Value::Null);
    assert_eq!(s["question_id"], Value::Null, "no question without an evaluation: {s}");
    assert!(d.events(&id, "question.delivered").is_empty());

    let reply = stop(&d, &c, &audit, "s1", "Done.");
    assert_eq!(reply["decision"], "record", "{reply}");
    assert_eq!(reply["output"], Value::Null, "{reply}");
    let s = stop_for(&d, &audit, &reply["event_id"]);
    assert_eq!(s["decision"], "record");
    assert_eq!(s["evaluation_id"], Value::Null);
    // Unlike a judged audit stop, this one keeps the reason it would have
    // blocked with.
    assert!(s["reason"].as_str().unwrap().starts_with("gadfly could not evaluate the candidate"), "{s}");
}
