//! Moments end to end: numeric detectors on real evaluations, the text
//! classifier on an attached session's transcript, wiring by mode, and a
//! real transcript replayed through the detectors.

mod common;

use common::{Daemon, Fixture};
use serde_json::Value;

const AUTONOMOUS: &str = "[moments]\nplateau_evaluations = 2\nplateau_min_gain = 0.05\ncooldown_evaluations = 1\n";

fn moments(d: &Daemon, id: &str) -> Vec<Value> {
    d.api_get(&format!("/campaigns/{id}/log?limit=10000"))
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "moment")
        .map(|e| e["payload"].clone())
        .collect()
}

fn evaluate(d: &Daemon, f: &Fixture, id: &str, candidate: &str, note: &str) {
    f.set_candidate(candidate);
    std::fs::write(f.ws().join("notes.txt"), note).unwrap();
    let out = d.run(&["eval", id, "--json"]);
    // 0: the predicate holds, 1: it fails; either way a verdict.
    assert!(matches!(out.status.code(), Some(0 | 1)), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn numeric_moments_are_raised_with_evidence_and_their_questions_reach_the_next_stop() {
    let f = Fixture::new(AUTONOMOUS);
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    assert_eq!(moments(&d, &id)[0]["moment"], "start");

    evaluate(&d, &f, &id, "a true 90 100\nb true 90 100\nc true 90 100\n", "1");
    evaluate(&d, &f, &id, "a true 40 100\nb true 40 100\nc true 40 100\n", "2");
    let m = moments(&d, &id);
    let jump = m.iter().find(|m| m["detector"] == "geomean_jump").expect("a 2.25x jump in one step");
    assert_eq!(jump["moment"], "suspicious_gain");
    assert_eq!(jump["evaluations"].as_array().unwrap().len(), 2);
    assert!(jump["question"]["bank_id"].is_string(), "autonomous mode queues a bank question: {jump}");

    // Flat: two more evaluations without a 5% gain.
    evaluate(&d, &f, &id, "a true 40 100\nb true 40 100\nc true 40 100\n", "3");
    evaluate(&d, &f, &id, "a true 39 100\nb true 40 100\nc true 40 100\n", "4");
    let m = moments(&d, &id);
    let plateau = m.iter().find(|m| m["detector"] == "plateau").expect("a plateau");
    assert!(plateau["detail"].as_str().unwrap().contains("last 2 evaluations"), "{plateau}");

    // A scenario that was correct turns incorrect.
    evaluate(&d, &f, &id, "a true 39 100\nb false 40 100\nc true 40 100\n", "5");
    let m = moments(&d, &id);
    let reg = m.iter().find(|m| m["detector"] == "correctness_regression").expect("a regression");
    assert_eq!(reg["scenarios"], serde_json::json!(["b"]));
    assert_eq!(reg["moment"], "correctness_dismissal");

    // The next stop carries a question a moment queued, not a new pick.
    let r = common::reason(&d.stop(&id, "done"));
    let queued: Vec<Value> = d.api_get(&format!("/campaigns/{id}/questions")).as_array().unwrap().clone();
    let delivered_at_stop: Vec<&Value> = queued.iter().filter(|q| q["delivered_via"] == "stop_hook_reason").collect();
    assert_eq!(delivered_at_stop.len(), 1);
    let q = delivered_at_stop[0];
    assert!(["suspicious_gain", "plateau", "correctness_dismissal"].contains(&q["moment"].as_str().unwrap()), "{q}");
    assert!(r.contains(q["text"].as_str().unwrap()), "{r}");
}

/// The daemon delivers a plateau question that names the scenarios it is
/// about (#35): the plateau detector names the slowest scenarios of the
/// latest evaluation, and the queued text starts with them.
#[test]
fn a_plateau_question_names_its_scenarios() {
    let f = Fixture::new(AUTONOMOUS);
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    for note in ["1", "2", "3"] {
        evaluate(&d, &f, &id, "a true 50 100\nb true 50 100\nc true 100 100\n", note);
    }
    let m = moments(&d, &id);
    let plateau = m.iter().find(|m| m["detector"] == "plateau").expect("a plateau");
    assert_eq!(plateau["scenarios"], serde_json::json!(["c"]), "the slowest scenario: {plateau}");
    let text = plateau["question"]["text"].as_str().expect("autonomous mode queues a question");
    assert!(text.starts_with("About scenario c (plateau: the best geometric mean"), "{text}");
    let queued: Vec<Value> = d.api_get(&format!("/campaigns/{id}/questions")).as_array().unwrap().clone();
    assert!(queued.iter().any(|q| q["moment"] == "plateau" && q["text"] == text), "{queued:?}");
}

#[test]
fn near_misses_raise_nothing() {
    let f = Fixture::new(AUTONOMOUS);
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    // 1.4x in one step (under 1.5), steady 6% gains (over the 5% plateau bar), errors not zero.
    evaluate(&d, &f, &id, "a true 90 100\nb true 90 100\nc true 90 100\n", "1");
    evaluate(&d, &f, &id, "a true 65 100\nb true 65 100\nc true 65 100\n", "2");
    evaluate(&d, &f, &id, "a true 61 100\nb true 61 100\nc true 61 100\n", "3");
    evaluate(&d, &f, &id, "a true 57 100\nb true 57 100\nc true 57 100\n", "4");
    let m = moments(&d, &id);
    assert_eq!(m.len(), 1, "only the start moment: {m:?}");
}

/// A Claude Code transcript (session `s1`) the daemon follows: its first
/// message written, then announced by a PostToolUse hook.
struct Transcript(std::path::PathBuf);

impl Transcript {
    /// The transcript started, and the first hook's output.
    fn start(d: &Daemon, f: &Fixture, id: &str) -> (Transcript, std::process::Output) {
        let t = Transcript(f.dir.path().join("session.jsonl"));
        std::fs::write(&t.0, "").unwrap();
        t.say("u1", "Let me run the harness on every scenario first.");
        let first = d.hook("post-tool-use", id, &t.hook_payload());
        (t, first)
    }

    /// A PostToolUse payload that names the transcript.
    fn hook_payload(&self) -> String {
        serde_json::json!({"session_id": "s1", "transcript_path": self.0, "tool_name": "Bash"}).to_string()
    }

    /// Appends one assistant message.
    fn say(&self, uuid: &str, text: &str) {
        let line = serde_json::json!({"type": "assistant", "uuid": uuid, "sessionId": "s1",
            "message": {"role": "assistant", "content": [{"type": "text", "text": text}]}});
        let mut all = std::fs::read_to_string(&self.0).unwrap();
        all.push_str(&format!("{line}\n"));
        std::fs::write(&self.0, all).unwrap();
    }
}

#[test]
fn a_dismissal_in_the_transcript_is_noticed_and_asked_about() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let (transcript, first) = Transcript::start(&d, &f, &id);
    let hook = transcript.hook_payload();
    assert!(String::from_utf8_lossy(&first.stdout).contains("start moment"), "the start question comes first");
    // Before gadfly measured anything wrong: the words are recorded, and no
    // question waved at a failure gadfly has not seen.
    transcript.say("u2", "The profiler run failed, but that is just a flaky tool, so we can ignore it.");
    common::wait_until("the unsupported dismissal moment", || {
        moments(&d, &id).iter().any(|m| m["moment"] == "correctness_dismissal" && m["source"] == "text")
    });
    let unsupported = moments(&d, &id).into_iter().find(|m| m["moment"] == "correctness_dismissal").unwrap();
    assert!(
        unsupported["no_question"].as_str().is_some_and(|w| w.starts_with("no wrong result in the latest evaluation")),
        "{unsupported}"
    );
    // Scenario b measured wrong, then waved away: asked about.
    evaluate(&d, &f, &id, "a true 90 100\nb false 90 100\nc true 90 100\n", "wrong b");
    transcript.say("u3", "Scenario b still differs from the reference by 3e-4, but that is just floating point noise, so we can ignore it.");
    common::wait_until("the dismissal moment", || {
        moments(&d, &id).iter().filter(|m| m["moment"] == "correctness_dismissal" && m["source"] == "text").count() == 2
    });
    let m = moments(&d, &id);
    let dis = m.iter().filter(|m| m["moment"] == "correctness_dismissal" && m["source"] == "text").nth(1).unwrap();
    assert!(dis["detail"].as_str().unwrap().contains("floating point noise"), "{dis}");
    assert!(dis.get("no_question").is_none_or(|w| w.is_null()), "{dis}");
    // Its question rides on the next hook that can carry context.
    let next = d.hook("post-tool-use", &id, &hook);
    let v: Value = serde_json::from_slice(&next.stdout).expect("additional context");
    let ctx = v["hookSpecificOutput"]["additionalContext"].as_str().unwrap();
    assert!(ctx.contains("correctness dismissal moment"), "{ctx}");
    let log = d.api_get(&format!("/campaigns/{id}/log?limit=10000"));
    let msgs: Vec<&Value> = log.as_array().unwrap().iter().filter(|e| e["kind"] == "agent.message").collect();
    assert_eq!(msgs.len(), 3, "the transcript's messages were recorded once each");
}

/// A gain claimed in the agent's words is read against gadfly's own
/// measurements (#46 item 4): with no gain measured it is recorded and
/// asks nothing; over a new best inside the noise of the two figures it
/// asks how large the noise is. The same at a stop: "a new best!" on a
/// slower tree carries no gain question.
#[test]
fn a_gain_in_words_is_asked_about_only_over_a_measured_new_best() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let (transcript, _) = Transcript::start(&d, &f, &id);
    let gains = |d: &Daemon| -> Vec<Value> {
        moments(d, &id).into_iter().filter(|m| m["moment"] == "suspicious_gain" && m["source"] == "text").collect()
    };
    // 1.25x, then 1.11x: the latest evaluation is no new best.
    evaluate(&d, &f, &id, "a true 80 100\nb true 80 100\nc true 80 100\n", "1");
    evaluate(&d, &f, &id, "a true 90 100\nb true 90 100\nc true 90 100\n", "2");
    transcript.say("u2", "Huge win: this version is 3x faster than the baseline, a new best!");
    common::wait_until("the first gain claim", || gains(&d).len() == 1);
    let first = &gains(&d)[0];
    assert!(
        first["no_question"].as_str().is_some_and(|w| w.starts_with("the latest evaluation measured no gain")),
        "{first}"
    );
    assert!(
        first["detail"]
            .as_str()
            .unwrap()
            .contains("measured 1.111x against 1.250x (the best of the 5 before it), -11.11%, below it beyond noise"),
        "{first}"
    );
    // 1.256x: a new best by 0.5%, inside the noise of the two figures.
    evaluate(&d, &f, &id, "a true 79.6 100\nb true 79.6 100\nc true 79.6 100\n", "3");
    transcript.say("u3", "Another big speedup: the new tiling is 2x faster, a new best.");
    common::wait_until("the second gain claim", || gains(&d).len() == 2);
    let second = &gains(&d)[1];
    let asked = second["question"]["bank_id"].as_str().unwrap_or_default();
    assert!(["measure-005", "measure-010"].contains(&asked), "the noise of the figures, asked: {second}");
    assert!(second["detail"].as_str().unwrap().contains("inside the noise"), "{second}");
    // A stop on a slower tree whose words claim a gain: the block carries
    // no gain question, and the claim is recorded with why.
    f.set_candidate("a true 95 100\nb true 95 100\nc true 95 100\n");
    std::fs::write(f.ws().join("notes.txt"), "4").unwrap();
    d.stop(&id, "Done: the final kernel is 4x faster than the baseline, our best result yet.");
    let at_stop = gains(&d);
    assert_eq!(at_stop.len(), 3, "{at_stop:?}");
    assert!(at_stop[2]["no_question"]
        .as_str()
        .is_some_and(|w| w.starts_with("the latest evaluation measured no gain")));
}

#[test]
fn a_transcript_is_followed_without_spinning_before_and_after_its_folder_appears() {
    // A first session in a project: Claude Code names the transcript before
    // it creates the transcript's folder. The follower used to lose its
    // wake-up channel then and loop without pause (a whole core, for the
    // whole session).
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let folder = f.dir.path().join("config/projects/new-project");
    let transcript = folder.join("session.jsonl");
    let hook = serde_json::json!({"session_id": "s1", "transcript_path": transcript, "tool_name": "Bash"}).to_string();
    d.hook("post-tool-use", &id, &hook);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let (used, idle) = common::cpu_over(d.child.id(), std::time::Duration::from_secs(2));
    // A busy loop uses about all of `idle`; a waiting follower next to none.
    assert!(used < idle / 4.0, "the daemon used {used:.2} s of CPU in {idle:.2} s while nothing happened");
    std::fs::create_dir_all(&folder).unwrap();
    let line = serde_json::json!({"type": "assistant", "uuid": "u1", "sessionId": "s1", "message": {"role": "assistant", "content": [{"type": "text", "text": "Measuring every scenario now."}]}});
    std::fs::write(&transcript, line.to_string() + "\n").unwrap();
    common::wait_until("the transcript's message recorded", || {
        let log = d.api_get(&format!("/campaigns/{id}/log?limit=10000"));
        log.as_array().unwrap().iter().any(|e| e["kind"] == "agent.message")
    });
    // Watched now: the follower's own reads of the file must not wake it
    // (they are file events too), or it reads on and on.
    let (used, idle) = common::cpu_over(d.child.id(), std::time::Duration::from_secs(2));
    assert!(used < idle / 4.0, "the daemon used {used:.2} s of CPU in {idle:.2} s watching an unchanged transcript");
}

#[test]
fn human_mode_offers_suggestions_instead_of_asking() {
    let f = Fixture::new(&format!("{AUTONOMOUS}\n[questions]\nmode = \"human\"\n"));
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let m = moments(&d, &id);
    assert_eq!(m[0]["moment"], "start");
    assert_eq!(m[0]["suggestions"].as_array().unwrap().len(), 3);
    assert!(m[0].get("question").is_none());
    assert_eq!(d.api_get(&format!("/campaigns/{id}/questions")).as_array().unwrap().len(), 0);
}

/// Issue #32: human mode sent bank questions on its own (every blocked
/// stop carried one the bank picked). In human mode the moments a campaign
/// hits (a plateau, a claimed limit in the stop's words) are offered to the
/// person as suggestions; no bank question reaches the agent, by a stop or
/// by another hook. A person's own question still does.
#[test]
fn human_mode_sends_no_bank_question_of_its_own_at_a_plateau_or_a_claim() {
    let f = Fixture::new(&format!("{AUTONOMOUS}\n[questions]\nmode = \"human\"\n"));
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    // Flat: three evaluations without a 5% gain, every one failing (b slow).
    for note in ["1", "2", "3"] {
        evaluate(&d, &f, &id, "a true 90 100\nb true 100 100\nc true 90 100\n", note);
    }
    let m = moments(&d, &id);
    let plateau = m.iter().find(|m| m["detector"] == "plateau").expect("a plateau");
    assert!(!plateau["suggestions"].as_array().unwrap().is_empty(), "{plateau}");
    assert!(plateau.get("question").is_none(), "{plateau}");

    let r = common::reason(&d.stop(&id, "Scenario b is at the DRAM bandwidth limit; no further speedup is possible."));
    assert!(r.starts_with("gadfly: you may not stop yet."), "{r}");
    assert!(!r.contains("Question"), "no bank question in the block reason: {r}");
    let m = moments(&d, &id);
    let limit = m.iter().find(|m| m["moment"] == "limit_claim").expect("the claimed limit");
    assert_eq!(limit["source"], "text");
    assert!(!limit["suggestions"].as_array().unwrap().is_empty(), "suggestions for the person: {limit}");
    assert!(limit.get("question").is_none(), "{limit}");
    // Nothing was queued for another hook to deliver either.
    let client = reqwest::blocking::Client::builder().no_proxy().build().unwrap();
    let tool = serde_json::json!({"session_id": "sess-1", "hook_event_name": "PostToolUse", "tool_name": "Bash", "tool_use_id": "toolu_1"});
    assert_eq!(d.post_hook(&client, "post-tool-use", &id, &tool)["output"], Value::Null);
    assert_eq!(d.api_get(&format!("/campaigns/{id}/questions")).as_array().unwrap().len(), 0);
    let kinds = |kind: &str| -> Vec<Value> {
        let log = d.api_get(&format!("/campaigns/{id}/log?limit=10000"));
        log.as_array().unwrap().iter().filter(|e| e["kind"] == kind).map(|e| e["payload"].clone()).collect()
    };
    assert!(kinds("question.delivered").is_empty(), "{:#?}", kinds("question.delivered"));

    // The person picks one of the suggestions: it reaches the agent.
    let text = limit["suggestions"][0]["text"].as_str().unwrap();
    let out = d.run(&["ask", &id, text]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r = common::reason(&d.stop(&id, "Still limited by bandwidth on b."));
    assert!(r.contains(&format!("\nQuestion from the person supervising: {text}\n")), "{r}");
    let delivered = kinds("question.delivered");
    assert_eq!(delivered.len(), 1, "{delivered:#?}");
    assert_eq!(delivered[0]["source"], "human");
}

/// Issue #32: a suspicious gain's question was queued at the very stop
/// that was allowed, and waited for ever. gadfly's own re-check of the
/// gain runs before the allow (another seed; a gain that does not
/// reproduce fails the predicate, see above), and the question, which
/// nobody is left to answer, expires saying the re-check confirmed it.
#[test]
fn a_suspicious_gain_at_the_allowing_stop_is_rechecked_first_and_its_question_expires_with_why() {
    let f = Fixture::new(AUTONOMOUS);
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    evaluate(&d, &f, &id, "a true 90 100\nb true 90 100\nc true 90 100\n", "1");
    f.set_candidate("a true 30 100\nb true 30 100\nc true 30 100\n");
    assert_eq!(d.stop(&id, "Done."), None, "3x everywhere: the predicate holds");

    let log = d.api_get(&format!("/campaigns/{id}/log?limit=10000"));
    let log = log.as_array().unwrap();
    let at = |kind: &str| log.iter().position(|e| e["kind"] == kind).unwrap_or_else(|| panic!("no {kind}"));
    let decision = &log[at("decision")]["payload"];
    assert_eq!(decision["decision"], "allow", "{decision}");
    let confirmed = &log[at("gain.confirmed")]["payload"];
    assert_eq!(confirmed["evaluation_id"], decision["evaluation_id"], "the allowing evaluation was re-checked");
    assert!(
        at("gain.recheck") < at("decision") && at("gain.confirmed") < at("decision"),
        "re-checked before the allow"
    );
    let questions = d.api_get(&format!("/campaigns/{id}/questions"));
    let questions = questions.as_array().unwrap();
    let gain = questions.iter().find(|q| q["moment"] == "suspicious_gain").expect("the jump queued a question");
    assert_eq!(gain["status"], "expired", "{gain}");
    assert_eq!(
        gain["expired_reason"], "the stop was allowed: gadfly's re-evaluation with another seed confirmed the gain",
        "{gain}"
    );
    let start = questions.iter().find(|q| q["moment"] == "start").unwrap();
    assert_eq!(
        (start["status"].as_str(), start["expired_reason"].as_str()),
        (Some("expired"), Some("the stop was allowed"))
    );
    let expired: Vec<&Value> = log.iter().filter(|e| e["kind"] == "question.expired").collect();
    assert_eq!(expired.len(), 2, "{expired:#?}");
    assert!(expired
        .iter()
        .any(|e| e["payload"]["question_id"] == gain["id"] && e["payload"]["reason"] == gain["expired_reason"]));
    assert!(log.iter().position(|e| e["kind"] == "question.expired").unwrap() > at("decision"));
}

#[test]
fn a_real_transcript_replayed_through_the_detectors() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let src = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/corpus/6dc88126-2048-43a9-b5c2-b9747d5a0301.jsonl");
    let transcript = f.dir.path().join("replay.jsonl");
    std::fs::copy(src, &transcript).unwrap();
    let hook = serde_json::json!({"session_id": "real", "transcript_path": transcript}).to_string();
    d.hook("session-start", &id, &hook);
    common::wait_until("the transcript's messages", || {
        d.api_get(&format!("/campaigns/{id}/log?limit=10000"))
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["kind"] == "agent.message")
            .count()
            == 7
    });
    common::wait_until("the completion claims of the real session", || {
        moments(&d, &id).iter().filter(|m| m["moment"] == "completion_claim").count() == 2
    });
    let m = moments(&d, &id);
    let quotes: Vec<&str> =
        m.iter().filter(|m| m["moment"] == "completion_claim").map(|m| m["quote"].as_str().unwrap()).collect();
    assert!(quotes.contains(&"Done!"), "{quotes:?}");
}

#[test]
fn a_suspicious_gain_that_fails_fresh_inputs_is_rejected() {
    // The harness honours gadfly's seed; a "cached" candidate is right only
    // on the inputs of the first evaluation it gets (the seed is secret: it
    // cannot know them before).
    let f = Fixture::with_run(AUTONOMOUS, "sh harness/seeded.sh {results}");
    let first = f.dir.path().join("first-seed");
    std::fs::write(
        f.ws().join("harness/seeded.sh"),
        format!(
            "sh harness/run.sh \"$1\"\nif [ -f cached.flag ]; then\n  [ -f '{first}' ] || echo \"$GADFLY_SEED\" > '{first}'\n  if [ \"$GADFLY_SEED\" != \"$(cat '{first}')\" ]; then\n    sed -i 's/\"scenario\":\"b\",\"correct\":true/\"scenario\":\"b\",\"correct\":false/' \"$1\"\n  fi\nfi\n",
            first = first.display()
        ),
    )
    .unwrap();
    opt_out_of_the_sandbox(&f);
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    evaluate(&d, &f, &id, "a true 90 100\nb true 90 100\nc true 90 100\n", "1");
    std::fs::write(f.ws().join("cached.flag"), "1").unwrap();
    f.set_candidate("a true 30 100\nb true 30 100\nc true 30 100\n");
    let r = common::reason(&d.stop(&id, "3x faster everywhere, done."));
    assert!(
        r.contains("the gain did not survive gadfly's re-evaluation: scenario b is incorrect with fresh inputs"),
        "{r}"
    );
    let log = d.api_get(&format!("/campaigns/{id}/log?limit=10000"));
    let kinds: Vec<&str> = log.as_array().unwrap().iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert!(kinds.contains(&"gain.recheck") && kinds.contains(&"gain.rejected"), "{kinds:?}");

    // An honest candidate with the same speed survives the re-check.
    std::fs::remove_file(f.ws().join("cached.flag")).unwrap();
    std::fs::write(f.ws().join("notes.txt"), "honest").unwrap();
    assert_eq!(d.stop(&id, "done"), None);
}

/// A claimed limit is asked about in the stop's block reason; the same
/// claim made again with no new evaluation since gets the question again in
/// another form and is escalated; after fresh evidence (a new evaluation) a
/// claim is a new one, not a repeat.
#[test]
fn a_limit_claim_repeated_without_fresh_evidence_is_asked_again_in_another_form_and_escalated() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    f.set_candidate("a true 90 100\nb true 100 100\nc true 90 100\n");
    let question_of = |reason: &str| -> String {
        reason
            .lines()
            .find(|l| l.starts_with("Question ("))
            .unwrap_or_else(|| panic!("no question in {reason}"))
            .to_string()
    };
    let first =
        common::reason(&d.stop(&id, "Scenario b is at the DRAM bandwidth limit; no further speedup is possible."));
    let q1 = question_of(&first);
    let second = common::reason(&d.stop(&id, "As I said, b cannot get any faster: it is bound by memory bandwidth."));
    let q2 = question_of(&second);
    assert_ne!(q1, q2, "asked again, in another form");
    let log = d.api_get(&format!("/campaigns/{id}/log?limit=10000"));
    let events = log.as_array().unwrap();
    let limits: Vec<&Value> =
        events.iter().filter(|e| e["kind"] == "moment" && e["payload"]["moment"] == "limit_claim").collect();
    assert_eq!(limits.len(), 2, "{limits:?}");
    assert_eq!(limits[0]["payload"]["repeated"], false);
    assert_eq!(limits[1]["payload"]["repeated"], true);
    for l in &limits {
        assert_eq!(l["payload"]["question"]["via"], "stop_hook_reason", "{l}");
    }
    let escalated: Vec<&Value> = events.iter().filter(|e| e["kind"] == "moment.escalated").collect();
    assert_eq!(escalated.len(), 1, "{escalated:?}");
    assert_eq!(escalated[0]["payload"]["moment"], "limit_claim");
    // Fresh evidence: a new candidate, a new evaluation. The claim is new.
    f.set_candidate("a true 88 100\nb true 99 100\nc true 88 100\n");
    common::reason(&d.stop(&id, "Even now, b is memory-bound at the hardware limit; nothing more to gain."));
    let log = d.api_get(&format!("/campaigns/{id}/log?limit=10000"));
    let events = log.as_array().unwrap();
    let limits: Vec<&Value> =
        events.iter().filter(|e| e["kind"] == "moment" && e["payload"]["moment"] == "limit_claim").collect();
    assert_eq!(limits.len(), 3);
    assert_eq!(limits[2]["payload"]["repeated"], false, "a new evaluation came between: {}", limits[2]);
    assert_eq!(events.iter().filter(|e| e["kind"] == "moment.escalated").count(), 1);
}

/// Tool calls with no evaluation between them raise an idle plateau each
/// time their count crosses a multiple of `plateau_tool_calls`: once per
/// crossing, however the calls arrive (posted at once from several threads,
/// the detector sees counts in jumps), and an evaluation starts the count
/// again.
#[test]
fn tool_calls_without_evaluation_raise_one_idle_plateau_per_crossing() {
    let f = Fixture::new("[moments]\nplateau_tool_calls = 5\n");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let client = reqwest::blocking::Client::builder().no_proxy().build().unwrap();
    let post = |n: usize| {
        let body = serde_json::json!({"session_id": "s1", "hook_event_name": "PostToolUse", "tool_name": "Bash", "tool_use_id": format!("toolu_{n}")});
        d.post_hook(&client, "post-tool-use", &id, &body);
    };
    let idle_plateaus = || -> usize {
        let log = d.api_get(&format!("/campaigns/{id}/log?tail=2000"));
        log.as_array()
            .unwrap()
            .iter()
            .filter(|e| e["kind"] == "moment" && e["payload"]["detector"] == "tool_calls_without_evaluation")
            .count()
    };
    let wait_for = |want: usize| {
        for _ in 0..100 {
            if idle_plateaus() >= want {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        // A moment the queue still held would show up now.
        std::thread::sleep(std::time::Duration::from_millis(300));
        idle_plateaus()
    };
    // 12 calls from three threads at once: the count crosses 5 and 10.
    std::thread::scope(|s| {
        for t in 0..3 {
            let post = &post;
            s.spawn(move || (0..4).for_each(|i| post(t * 4 + i)));
        }
    });
    assert_eq!(wait_for(2), 2, "one idle plateau per multiple of 5 crossed");
    // The same call again (a retry, or the transcript's copy) is not counted.
    post(11);
    post(12);
    post(13);
    assert_eq!(wait_for(3), 2, "14 distinct calls cross no new multiple");
    post(14);
    assert_eq!(wait_for(3), 3, "the 15th call crosses 15");
}

/// A suspicious gain whose re-measurement misses the bar on timing alone is
/// timed a third time: one slow measurement on a shared machine is noise
/// (the gain stands), two are a verdict (the gain is rejected, with the
/// three figures). Each re-measurement is recorded.
#[test]
fn a_gain_is_rejected_on_timing_only_after_two_slow_re_measurements() {
    for (mode, allowed) in [("once", true), ("always", false)] {
        let f = Fixture::with_run(AUTONOMOUS, "sh harness/timed.sh {results}");
        let counter = f.dir.path().join("re-measurements");
        // Re-measurements (a seed other than the one the 30 us kernel was
        // first evaluated with) read 95 us: the first only ("once"), or
        // every one ("always").
        std::fs::write(
            f.ws().join("harness/timed.sh"),
            format!(
                "if grep -q ' 30 100' candidate.txt; then\n  if [ ! -f '{first}' ]; then echo \"$GADFLY_SEED\" > '{first}';\n  elif [ \"$GADFLY_SEED\" != \"$(cat '{first}')\" ]; then\n    n=$(( $(cat '{c}' 2>/dev/null || echo 0) + 1 )); echo $n > '{c}'\n    if [ {mode} = always ] || [ $n = 1 ]; then sed -i 's/ 30 100/ 95 100/' candidate.txt; fi\n  fi\nfi\nsh harness/run.sh \"$1\"\n",
                c = counter.display(),
                first = f.dir.path().join("first-seed").display(),
            ),
        )
        .unwrap();
        opt_out_of_the_sandbox(&f);
        common::git(&f.ws(), &["add", "-A"]);
        common::git(&f.ws(), &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "timed harness"]);
        let d = Daemon::start(&f.data_dir());
        let id = d.create_campaign(&f.spec());
        evaluate(&d, &f, &id, "a true 90 100\nb true 90 100\nc true 90 100\n", "1");
        f.set_candidate("a true 30 100\nb true 30 100\nc true 30 100\n");
        let answer = d.stop(&id, "3x faster everywhere, done.");
        let log = d.api_get(&format!("/campaigns/{id}/log?limit=10000"));
        let kinds: Vec<&str> = log.as_array().unwrap().iter().map(|e| e["kind"].as_str().unwrap()).collect();
        assert_eq!(kinds.iter().filter(|k| **k == "gain.recheck").count(), 2, "{mode}: two re-measurements: {kinds:?}");
        assert_eq!(std::fs::read_to_string(&counter).unwrap().trim(), "2", "{mode}");
        if allowed {
            assert_eq!(answer, None, "{mode}: one slow re-measurement is noise, the stop is allowed");
            assert!(kinds.contains(&"gain.confirmed") && !kinds.contains(&"gain.rejected"), "{mode}: {kinds:?}");
        } else {
            let r = common::reason(&answer);
            assert!(
                r.contains("the gain did not survive gadfly's re-evaluation")
                    && r.contains("measured 3.33x, then 1.05x and 1.05x when timed twice again"),
                "{mode}: {r}"
            );
            assert!(kinds.contains(&"gain.rejected"), "{mode}: {kinds:?}");
        }
    }
}

/// A harness of these tests keeps state across evaluations in a file of
/// the host's: the sandbox (on by default) would hide it, so the campaign
/// opts out.
fn opt_out_of_the_sandbox(f: &Fixture) {
    let spec = std::fs::read_to_string(f.spec()).unwrap();
    assert!(spec.contains("[harness]\n"));
    std::fs::write(f.spec(), spec.replacen("[harness]\n", "[harness]\nsandbox = \"none\"\n", 1)).unwrap();
}
