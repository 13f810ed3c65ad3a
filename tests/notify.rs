//! Notifications end to end (issue #38): a campaign's `[notify]` webhooks
//! get a signed JSON POST when a chosen event is recorded, from a webhook
//! receiver on loopback (an axum server in the test): the signature checks
//! out with the secret the daemon's environment holds, a receiver that
//! answers 500 gets the same notification again until it takes it (each
//! attempt recorded), a receiver that sleeps never delays a hook call, and
//! the webhooks can be replaced from the API.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use common::{Daemon, Fixture, ALL_PASS};
use gadfly::notify::{verify, DELIVERY_HEADER, KIND_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER};
use serde_json::{json, Value};

const SECRET_ENV: &str = "GADFLY_TEST_WEBHOOK_SECRET";
const SECRET: &str = "correct horse battery staple";
const WRONG: &str = "a true 50 100\nb false 40 100\nc true 80 100\n";

/// One request the receiver got.
#[derive(Clone)]
struct Got {
    headers: HeaderMap,
    body: Bytes,
    at: i64,
}

#[derive(Default)]
struct Seen {
    got: Vec<Got>,
    /// Requests answered (after the sleep, if any).
    answered: usize,
}

/// A webhook receiver on loopback: it answers 500 to its first
/// `fail_first` requests, and sleeps `sleep` before answering each.
struct Receiver {
    url: String,
    seen: Arc<Mutex<Seen>>,
    _rt: tokio::runtime::Runtime,
}

#[derive(Clone)]
struct Behaviour {
    seen: Arc<Mutex<Seen>>,
    fail_first: usize,
    sleep: Duration,
}

async fn receive(State(b): State<Behaviour>, headers: HeaderMap, body: Bytes) -> StatusCode {
    let n = {
        let mut s = b.seen.lock().unwrap();
        s.got.push(Got { headers, body, at: now() });
        s.got.len()
    };
    tokio::time::sleep(b.sleep).await;
    b.seen.lock().unwrap().answered += 1;
    if n <= b.fail_first {
        StatusCode::INTERNAL_SERVER_ERROR
    } else {
        StatusCode::NO_CONTENT
    }
}

fn now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64
}

impl Receiver {
    fn start(fail_first: usize, sleep: Duration) -> Receiver {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let seen: Arc<Mutex<Seen>> = Default::default();
        let b = Behaviour { seen: seen.clone(), fail_first, sleep };
        let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
        let addr = listener.local_addr().unwrap();
        let app = axum::Router::new().route("/hooks/gadfly", axum::routing::post(receive)).with_state(b);
        rt.spawn(async move { axum::serve(listener, app).await.unwrap() });
        Receiver { url: format!("http://{addr}/hooks/gadfly"), seen, _rt: rt }
    }

    fn got(&self) -> Vec<Got> {
        self.seen.lock().unwrap().got.clone()
    }

    fn answered(&self) -> usize {
        self.seen.lock().unwrap().answered
    }
}

fn header(g: &Got, name: &str) -> String {
    g.headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("").to_string()
}

/// `[notify]` with one webhook per `(url, events, secret_env, timeout_s)`.
fn notify_section(block_streak: u32, hooks: &[(&str, &str, &str, u32)]) -> String {
    let mut s = format!("[notify]\nblock_streak = {block_streak}\n");
    for (url, events, env, timeout) in hooks {
        s.push_str(&format!(
            "\n[[notify.webhooks]]\nurl = \"{url}\"\nevents = {events}\nsecret_env = \"{env}\"\nmax_attempts = 4\ntimeout_s = {timeout}\n"
        ));
    }
    s
}

/// A daemon whose environment holds the webhooks' secret.
fn daemon(f: &Fixture) -> Daemon {
    let mut cmd = Daemon::serve_command(&f.data_dir());
    cmd.env(SECRET_ENV, SECRET);
    Daemon::start_cmd(&f.data_dir(), cmd)
}

fn log(d: &Daemon, id: &str) -> Vec<Value> {
    d.api_get(&format!("/campaigns/{id}/log?limit=10000")).as_array().unwrap().clone()
}

fn deliveries(d: &Daemon, id: &str) -> Vec<Value> {
    log(d, id).into_iter().filter(|e| e["kind"] == "notify.delivery").map(|e| e["payload"].clone()).collect()
}

#[test]
fn a_webhook_gets_signed_notifications_and_is_retried_after_500s() {
    let rx = Receiver::start(2, Duration::ZERO);
    let spec = notify_section(
        1,
        &[
            (&rx.url, "[\"block_streak\", \"run_ended\"]", SECRET_ENV, 10),
            // A webhook whose secret the daemon does not hold: nothing is sent to it.
            (&rx.url, "[\"block_streak\"]", "GADFLY_TEST_NO_SUCH_SECRET", 10),
            // One that did not ask for blocked stops.
            (&rx.url, "[\"plateau\"]", SECRET_ENV, 10),
        ],
    );
    let f = Fixture::new(&spec);
    let d = daemon(&f);
    let id = d.create_campaign(&f.spec());
    f.set_candidate(WRONG);
    let answer = d.stop(&id, "All done.");
    assert!(common::reason(&answer).contains("you may not stop yet"), "{answer:?}");

    // Two 500s, then the third attempt is taken.
    common::wait_until("three attempts", || rx.got().len() >= 3);
    common::wait_until("the attempts recorded", || deliveries(&d, &id).len() >= 4);
    std::thread::sleep(Duration::from_millis(500));
    let got = rx.got();
    assert_eq!(got.len(), 3, "one notification, three attempts, nothing for the other webhooks");
    for g in &got {
        let (ts, sig) = (header(g, TIMESTAMP_HEADER), header(g, SIGNATURE_HEADER));
        assert_eq!(verify(SECRET.as_bytes(), &ts, &sig, &g.body, g.at, 300), Ok(()), "{sig}");
        assert!(verify(b"another secret", &ts, &sig, &g.body, g.at, 300).is_err());
        assert_eq!(header(g, KIND_HEADER), "block_streak");
        assert_eq!(header(g, "content-type"), "application/json");
    }
    let ids: Vec<String> = got.iter().map(|g| header(g, DELIVERY_HEADER)).collect();
    assert!(ids.iter().all(|i| i == &ids[0] && !i.is_empty()), "one delivery id for every attempt: {ids:?}");
    let body: Value = serde_json::from_slice(&got[2].body).unwrap();
    assert_eq!(body["notification"], "block_streak");
    assert_eq!(body["campaign"], json!({"id": id, "name": "fixture"}));
    assert_eq!(body["event"]["kind"], "decision");
    assert_eq!(body["event"]["payload"]["decision"], "block");
    assert_eq!(body["text"], "A stop attempt was blocked: the predicate still fails", "{body}");
    assert_eq!(body["link"], format!("{}/campaigns/{id}", d.url));
    assert_eq!(body["delivery"], ids[0].as_str());

    // Each attempt is recorded, with its status.
    let mine: Vec<Value> = deliveries(&d, &id).into_iter().filter(|p| p["webhook"] == 0).collect();
    let seen: Vec<(u64, &str, Option<u64>)> = mine
        .iter()
        .map(|p| (p["attempt"].as_u64().unwrap(), p["status"].as_str().unwrap(), p["http_status"].as_u64()))
        .collect();
    assert_eq!(seen, [(1, "retrying", Some(500)), (2, "retrying", Some(500)), (3, "delivered", Some(204))]);
    assert!(mine.iter().all(|p| p["url"] == format!("{}/…", rx.url.trim_end_matches("/hooks/gadfly"))), "{mine:?}");
    let unsigned: Vec<Value> = deliveries(&d, &id).into_iter().filter(|p| p["webhook"] == 1).collect();
    assert_eq!(unsigned.len(), 1, "{unsigned:?}");
    assert_eq!(unsigned[0]["status"], "failed");
    assert!(unsigned[0]["error"].as_str().unwrap().contains("GADFLY_TEST_NO_SUCH_SECRET"), "{unsigned:?}");
    assert!(deliveries(&d, &id).iter().all(|p| p["webhook"] != 2));

    // The console's view: the webhooks and their latest attempts, newest first.
    let view = d.api_get(&format!("/campaigns/{id}/notify"));
    assert_eq!(view["source"], "spec");
    let w = &view["webhooks"][0];
    assert_eq!((w["secret_env"].as_str(), w["secret_set"].as_bool()), (Some(SECRET_ENV), Some(true)), "{view}");
    assert_eq!(view["webhooks"][1]["secret_set"], false);
    let last: Vec<&str> =
        w["last_deliveries"].as_array().unwrap().iter().map(|a| a["status"].as_str().unwrap()).collect();
    assert_eq!(last, ["delivered", "retrying", "retrying"], "{view}");
    assert!(!view.to_string().contains(SECRET), "the secret is never shown");
}

#[test]
fn a_slow_webhook_never_delays_a_hook_call() {
    let rx = Receiver::start(0, Duration::from_secs(10));
    let spec = notify_section(1, &[(&rx.url, "[\"block_streak\"]", SECRET_ENV, 60)]);
    let f = Fixture::new(&spec);
    let mut d = daemon(&f);
    let id = d.create_campaign(&f.spec());
    f.set_candidate(WRONG);
    // The first blocked stop's notification reaches the receiver, which sleeps on it.
    assert!(common::reason(&d.stop(&id, "Done.")).contains("you may not stop yet"));
    common::wait_until("the receiver to get the first notification", || !rx.got().is_empty());
    assert_eq!(rx.answered(), 0);
    // Another stop while the receiver sleeps: its hook call answers at once,
    // though its own notification goes to the same sleeping receiver.
    f.set_candidate(ALL_PASS);
    let second = d.stop(&id, "Fixed, done.");
    let answered_then = rx.answered();
    assert_eq!(second, None, "the stop was allowed: {second:?}");
    f.set_candidate(WRONG);
    assert!(common::reason(&d.stop(&id, "Done again.")).contains("you may not stop yet"));
    let answered_after_third = rx.answered();
    assert_eq!(
        (answered_then, answered_after_third),
        (0, 0),
        "the Stop hook calls answered while the receiver was still sleeping on a notification"
    );
    common::wait_until("the second notification to reach the receiver", || rx.got().len() >= 2);
    // The deliveries in flight are tasks of the daemon's: they stop at shutdown.
    let status = d.terminate();
    assert!(status.success(), "{status}");
    let logs: String = std::fs::read_dir(f.dir.path())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("daemon-"))
        .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
        .collect();
    assert!(logs.contains("every background task stopped"), "{logs}");
    assert!(!logs.contains("background tasks still running at shutdown"), "{logs}");
}

#[test]
fn webhooks_set_from_the_api_replace_the_specs() {
    let rx = Receiver::start(0, Duration::ZERO);
    let f = Fixture::new("");
    let d = daemon(&f);
    let id = d.create_campaign(&f.spec());
    let client = reqwest::blocking::Client::new();
    let put = |body: Value| {
        client.put(format!("{}/api/v1/campaigns/{id}/notify", d.url)).bearer_auth(&d.token).json(&body).send().unwrap()
    };
    assert_eq!(d.api_get(&format!("/campaigns/{id}/notify"))["webhooks"], json!([]));
    // Checked as the spec's: the field is named; the secret has no field.
    let bad = put(json!({"webhooks": [{"url": rx.url, "events": ["plateaus"], "secret_env": SECRET_ENV}]}));
    assert_eq!(bad.status(), 400);
    assert!(bad.text().unwrap().contains("notify.webhooks[0].events"));
    let bad = put(json!({"webhooks": [{"url": rx.url, "events": ["claim"], "secret_env": SECRET_ENV, "secret": "x"}]}));
    assert_eq!(bad.status(), 400);
    let res = put(
        json!({"webhooks": [{"url": rx.url, "events": ["block_streak"], "secret_env": SECRET_ENV}], "block_streak": 2}),
    );
    assert!(res.status().is_success(), "{}", res.text().unwrap());
    let view: Value = res.json().unwrap();
    assert_eq!((view["source"].as_str(), view["block_streak"].as_u64()), (Some("api"), Some(2)), "{view}");
    // Two blocks in a row make one notification, to the webhook set from the API.
    f.set_candidate(WRONG);
    d.stop(&id, "Done.");
    d.stop(&id, "Done, really.");
    common::wait_until("the notification", || !rx.got().is_empty());
    let body: Value = serde_json::from_slice(&rx.got()[0].body).unwrap();
    assert!(body["text"].as_str().unwrap().starts_with("2 stop attempts in a row"), "{body}");
    assert!(log(&d, &id).iter().any(|e| e["kind"] == "notify.configured"));
}
