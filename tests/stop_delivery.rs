//! A question a stop chose may be delivered by another hook before the stop
//! marks it delivered: a PostToolUse hook claims the queue's next question,
//! or another session's stop chose the same one. The stop then neither
//! carries it nor records a second `question.delivered`: it is planned
//! again without it (issue #33; `gate::StopInput::delivered_elsewhere`).
//!
//! The race is provoked, not staged: stops and tool hooks of several
//! sessions are posted at once, round after round, and every assertion is
//! an invariant of what the daemon stored, whoever won each race.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::{Daemon, Fixture, ALL_PASS};
use serde_json::{json, Value};

fn client() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder().no_proxy().build().unwrap()
}

fn ask(d: &Daemon, c: &reqwest::blocking::Client, id: &str, text: &str) -> i64 {
    let r = c
        .post(format!("{}/api/v1/campaigns/{id}/questions", d.url))
        .bearer_auth(&d.token)
        .json(&json!({ "text": text }))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 201, "queueing a question");
    r.json::<Value>().unwrap()["id"].as_i64().unwrap()
}

/// Rounds of: QUESTIONS persons' questions queued, then STOPS stops (one
/// session each) and TOOLS PostToolUse calls (each of its own session)
/// posted at once.
const ROUNDS: usize = 6;
const QUESTIONS: usize = 3;
const STOPS: usize = 4;
const TOOLS: usize = 4;

#[test]
fn a_question_claimed_elsewhere_meanwhile_is_neither_carried_nor_recorded_again() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let c = client();
    // The predicate holds: only a person's question blocks a stop, and the
    // stops are answered from the cached evaluation.
    f.set_candidate(ALL_PASS);
    let out = d.run(&["eval", &id, "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    let mut replies: Vec<(String, Value)> = vec![];
    for round in 0..ROUNDS {
        for q in 0..QUESTIONS {
            ask(&d, &c, &id, &format!("Question {q} of round {round}: what limits scenario c?"));
        }
        let barrier = std::sync::Barrier::new(STOPS + TOOLS);
        let (barrier, d, c, id) = (&barrier, &d, &c, id.as_str());
        let got: Vec<(String, Value)> = std::thread::scope(|s| {
            let stops: Vec<_> = (0..STOPS)
                .map(|i| {
                    s.spawn(move || {
                        let body = json!({
                            "session_id": format!("stop-{round}-{i}"),
                            "hook_event_name": "Stop",
                            "stop_hook_active": false,
                            "last_assistant_message": "Done: every scenario passes.",
                        });
                        barrier.wait();
                        ("stop".to_string(), d.post_hook(c, "stop", id, &body))
                    })
                })
                .collect();
            let tools: Vec<_> = (0..TOOLS)
                .map(|i| {
                    s.spawn(move || {
                        let body = json!({
                            "session_id": format!("tool-{round}-{i}"),
                            "hook_event_name": "PostToolUse",
                            "tool_name": "Bash",
                            "tool_use_id": format!("toolu-{round}-{i}"),
                        });
                        barrier.wait();
                        ("post-tool-use".to_string(), d.post_hook(c, "post-tool-use", id, &body))
                    })
                })
                .collect();
            stops.into_iter().chain(tools).map(|h| h.join().unwrap()).collect()
        });
        replies.extend(got);
    }

    let delivered = d.events(&id, "question.delivered");
    let expired = d.events(&id, "question.expired");
    let stops = d.api_get(&format!("/campaigns/{id}/stops")).as_array().unwrap().clone();
    let questions = d.api_get(&format!("/campaigns/{id}/questions")).as_array().unwrap().clone();
    let context = || format!("delivered: {delivered:#?}\nstops: {stops:#?}");

    // Each question is delivered once: one event, whoever claimed it.
    let mut by_question: BTreeMap<i64, Vec<&Value>> = BTreeMap::new();
    for e in &delivered {
        by_question.entry(e["question_id"].as_i64().unwrap()).or_default().push(e);
    }
    for (q, es) in &by_question {
        assert_eq!(es.len(), 1, "question {q} delivered {} times\n{}", es.len(), context());
    }
    // The event agrees with the row: the same way, and the row delivered.
    for q in &questions {
        let qid = q["id"].as_i64().unwrap();
        match by_question.get(&qid) {
            Some(es) => {
                assert_eq!(q["status"], "delivered", "{q}");
                assert_eq!(es[0]["via"], q["delivered_via"], "{q}\n{}", context());
            }
            // Never delivered: it waits, or an allowed stop expired it
            // (the start question, when no hook took it first), saying so.
            None if q["status"] == "expired" => {
                let e = expired.iter().find(|e| e["question_id"] == qid);
                assert_eq!(e.map(|e| &e["reason"]), Some(&q["expired_reason"]), "{q}\n{expired:#?}");
                assert_ne!(q["source"], "human", "a person's question waiting blocks the stop: {q}");
            }
            None => assert_eq!(q["status"], "queued", "delivered without an event: {q}"),
        }
    }
    // A blocked stop carries a question no one else carried, delivered in
    // its block reason; an allowed stop carries none.
    assert_eq!(stops.len(), ROUNDS * STOPS);
    let mut carried = BTreeSet::new();
    for s in &stops {
        match s["decision"].as_str().unwrap() {
            "block" => {
                let q = s["question_id"].as_i64().unwrap_or_else(|| panic!("a block with no question: {s}"));
                assert!(carried.insert(q), "question {q} carried by two stops\n{}", context());
                let e = by_question.get(&q).unwrap_or_else(|| panic!("no delivery of {q}\n{}", context()));
                assert_eq!(e[0]["via"], "stop_hook_reason", "question {q} was delivered elsewhere\n{}", context());
                assert_eq!(e[0]["source"], "human", "{}", context());
            }
            "allow" => assert_eq!(s["question_id"], Value::Null, "{s}"),
            other => panic!("decision {other}: {s}"),
        }
    }
    // The replies agree: a block's reason carries its question's text.
    let text_of: BTreeMap<i64, &str> =
        questions.iter().map(|q| (q["id"].as_i64().unwrap(), q["text"].as_str().unwrap())).collect();
    for (event, reply) in &replies {
        if event != "stop" {
            continue;
        }
        let s = stops.iter().find(|s| s["event_id"] == reply["event_id"]).expect("the stop's attempt");
        assert_eq!(reply["decision"], s["decision"], "{reply}");
        if let Some(q) = s["question_id"].as_i64() {
            let reason = reply["output"]["reason"].as_str().unwrap();
            assert!(reason.contains(&format!("\nQuestion from the person supervising: {}\n", text_of[&q])), "{reason}");
        }
    }
    // Every person's question went out (the blocked stops and the tool
    // hooks took them all), each once.
    let persons: Vec<&Value> = questions.iter().filter(|q| q["source"] == "human").collect();
    assert_eq!(persons.len(), ROUNDS * QUESTIONS);
    let waiting: Vec<&&Value> = persons.iter().filter(|q| q["status"] == "queued").collect();
    assert!(waiting.is_empty(), "still queued: {waiting:#?}");
}
