//! A campaign's life as the API and the CLI show it (issue #32, console
//! details): where its agent stands (`state`), the session attached, the
//! moment the composer starts at, archiving, and an evaluation asked for
//! from the console (cookie and CSRF token).

mod common;

use common::{Daemon, Fixture, ALL_PASS};
use reqwest::blocking::Client;
use serde_json::{json, Value};

/// The candidate the fixture's predicate refuses (b is wrong).
const WRONG_B: &str = "a true 50 100\nb false 40 100\nc true 80 100\n";

fn stdout(out: &std::process::Output) -> String {
    assert!(out.status.success(), "{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn post(d: &Daemon, path: &str, token: &str) -> (u16, Value) {
    let r = Client::new().post(format!("{}/api/v1{path}", d.url)).bearer_auth(token).send().unwrap();
    let status = r.status().as_u16();
    (status, r.json().unwrap_or(Value::Null))
}

/// The `campaign list` line of campaign `id`, if listed.
fn listed(text: &str, id: &str) -> Option<String> {
    text.lines().find(|l| l.split_whitespace().next() == Some(id)).map(str::to_string)
}

fn summary(d: &Daemon, id: &str) -> Value {
    d.api_get("/campaigns").as_array().unwrap().iter().find(|c| c["id"] == id).cloned().unwrap()
}

#[test]
fn archiving_hides_a_campaign_from_the_lists_and_keeps_everything_it_recorded() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let other = d.create_campaign(&f.spec());
    f.set_candidate(WRONG_B);
    assert!(d.stop(&id, "All done.").is_some(), "blocked");
    d.run(&["ask", &id, "Why is b wrong?"]);
    let before = d.api_get(&format!("/campaigns/{id}"));
    let log_before = d.api_get(&format!("/campaigns/{id}/log?limit=10000")).as_array().unwrap().len();
    assert!(before["archived_at"].is_null(), "{before}");

    let out = stdout(&d.run(&["campaign", "archive", &id]));
    assert!(out.contains(&format!("campaign {id} archived at")) && out.contains("kept"), "{out}");

    // The CLI's list hides it and says so; --archived lists it, marked.
    let list = d.run(&["campaign", "list"]);
    let text = stdout(&list);
    assert!(listed(&text, &id).is_none(), "an archived campaign is listed:\n{text}");
    assert!(listed(&text, &other).is_some(), "{text}");
    assert!(String::from_utf8_lossy(&list.stderr).contains("1 archived campaign not listed (--archived"));
    let all = stdout(&d.run(&["campaign", "list", "--archived"]));
    assert!(listed(&all, &id).is_some_and(|l| l.contains(" archived ")), "{all}");
    let json: Value = serde_json::from_str(&stdout(&d.run(&["campaign", "list", "--json"]))).unwrap();
    assert!(json.as_array().unwrap().iter().all(|c| c["id"] != id.as_str()), "{json}");
    let show = stdout(&d.run(&["campaign", "show", &id]));
    assert!(show.contains("status archived") && show.contains("archived at "), "{show}");

    // The API still lists it, with the mark; nothing it recorded is gone.
    let after = d.api_get(&format!("/campaigns/{id}"));
    let at = after["archived_at"].as_str().expect("archived_at").to_string();
    assert_eq!(summary(&d, &id)["archived_at"], at.as_str());
    assert!(summary(&d, &other)["archived_at"].is_null());
    for k in ["evaluations", "stop_attempts", "questions", "latest_evaluation"] {
        assert_eq!(after[k], before[k], "{k} changed by archiving");
    }
    let log = d.api_get(&format!("/campaigns/{id}/log?limit=10000"));
    let log = log.as_array().unwrap();
    assert_eq!(log.len(), log_before + 1, "one event more: the archive itself");
    assert_eq!(
        (&log.last().unwrap()["kind"], &log.last().unwrap()["payload"]),
        (&json!("campaign.archived"), &json!({"archived": true}))
    );

    // Its hooks still answer: a stop on an archived campaign is judged.
    assert!(d.stop(&id, "Done now.").is_some_and(|a| a["decision"] == "block"));
    f.set_candidate(ALL_PASS);
    assert_eq!(d.stop(&id, "Done now, really."), None, "allowed");

    // Archiving twice keeps the first mark and records nothing more.
    let (status, again) = post(&d, &format!("/campaigns/{id}/archive"), &d.token);
    assert_eq!(
        (status, again["archived"].clone(), again["archived_at"].as_str()),
        (200, json!(true), Some(at.as_str()))
    );
    let marks = |d: &Daemon| {
        let log = d.api_get(&format!("/campaigns/{id}/log?limit=10000"));
        log.as_array().unwrap().iter().filter(|e| e["kind"] == "campaign.archived").count()
    };
    assert_eq!(marks(&d), 1);

    // A hook token may not archive; an unknown campaign is named.
    let hook_token = d.api_get(&format!("/campaigns/{other}/hook-token"))["token"].as_str().unwrap().to_string();
    let (status, body) = post(&d, &format!("/campaigns/{other}/archive"), &hook_token);
    assert_eq!(status, 403, "{body}");
    let (status, body) = post(&d, "/campaigns/no-such-campaign/archive", &d.token);
    assert_eq!((status, body["message"].as_str()), (404, Some("campaign no-such-campaign not found")), "{body}");
    let out = d.run(&["campaign", "archive", "no-such-campaign"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("campaign no-such-campaign not found"));

    // Unarchived, it is listed again.
    let out = stdout(&d.run(&["campaign", "unarchive", &id]));
    assert!(out.contains("unarchived"), "{out}");
    assert!(d.api_get(&format!("/campaigns/{id}"))["archived_at"].is_null());
    assert!(listed(&stdout(&d.run(&["campaign", "list"])), &id).is_some());
    assert_eq!(marks(&d), 2);
}

#[test]
fn the_console_evaluates_and_archives_with_its_cookie_and_csrf_token_only() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let http = Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let login = http.get(format!("{}/login?token={}", d.url, d.token)).send().unwrap();
    let cookie = login.headers()["set-cookie"].to_str().unwrap().split(';').next().unwrap().to_string();
    let html = http.get(format!("{}/campaigns/{id}", d.url)).header("cookie", &cookie).send().unwrap().text().unwrap();
    let csrf = html.split("<meta name=\"gadfly-csrf\" content=\"").nth(1).and_then(|r| r.split('"').next()).unwrap();
    let call = |path: &str, csrf: Option<&str>| {
        let mut r = http.post(format!("{}/api/v1/campaigns/{id}/{path}", d.url)).header("cookie", &cookie);
        if let Some(c) = csrf {
            r = r.header("x-gadfly-csrf", c);
        }
        let r = r.send().unwrap();
        (r.status().as_u16(), r.json::<Value>().unwrap_or(Value::Null))
    };
    for path in ["evaluate", "archive", "unarchive"] {
        let (status, body) = call(path, None);
        assert_eq!(status, 403, "{path} without the CSRF token: {body}");
    }
    assert_eq!(d.api_get(&format!("/campaigns/{id}"))["evaluations"], 0, "a refused evaluation ran");
    let (status, e) = call("evaluate", Some(csrf));
    assert_eq!((status, &e["holds"], &e["cached"]), (200, &json!(false), &json!(false)), "{e}");
    assert_eq!(d.api_get(&format!("/campaigns/{id}"))["latest_evaluation"]["id"], e["id"]);
    let (status, a) = call("archive", Some(csrf));
    assert_eq!((status, &a["archived"]), (200, &json!(true)), "{a}");
    let (status, a) = call("unarchive", Some(csrf));
    assert_eq!((status, &a["archived"], &a["archived_at"]), (200, &json!(false), &Value::Null), "{a}");
}

#[test]
fn the_state_says_done_after_an_allowed_stop_and_active_again_after_a_new_prompt() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let state = |d: &Daemon| {
        let c = d.api_get(&format!("/campaigns/{id}"));
        assert_eq!(summary(d, &id)["state"], c["state"], "the list and the campaign agree");
        assert_eq!(c["status"], "active", "the stored status is unchanged");
        (c["state"].as_str().unwrap().to_string(), c["state_detail"].as_str().unwrap().to_string())
    };
    assert_eq!(state(&d), ("active".to_string(), "no stop attempt yet".to_string()));
    f.set_candidate(WRONG_B);
    assert!(d.stop(&id, "All done.").is_some());
    let (s, detail) = state(&d);
    assert_eq!(s, "active");
    assert!(detail.contains("was block"), "{detail}");
    f.set_candidate(ALL_PASS);
    assert_eq!(d.stop(&id, "Done now."), None);
    let (s, detail) = state(&d);
    assert_eq!(s, "done");
    assert!(detail.contains("was allowed: the predicate holds"), "{detail}");
    let list = stdout(&d.run(&["campaign", "list"]));
    assert!(listed(&list, &id).is_some_and(|l| l.split_whitespace().nth(2) == Some("done")), "{list}");
    let show = stdout(&d.run(&["campaign", "show", &id]));
    assert!(show.lines().next().unwrap().ends_with("status done"), "{show}");
    // A new prompt after the allowed stop: the agent works again.
    d.post_hook(&Client::new(), "user-prompt-submit", &id, &json!({"session_id": "sess-1", "prompt": "And now c?"}));
    let (s, detail) = state(&d);
    assert_eq!(s, "active");
    assert!(detail.contains("new prompt"), "{detail}");
}

#[test]
fn the_attached_session_is_named_from_its_install_record_and_hook_calls() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    assert!(d.api_get(&format!("/campaigns/{id}"))["attached"].is_null());
    // `gadfly attach` writes the hooks and records them: Claude Code's, no session yet.
    let out = stdout(&d.run(&["attach", &id]));
    assert!(out.contains("gadfly hooks for campaign"), "{out}");
    let a = d.api_get(&format!("/campaigns/{id}"))["attached"].clone();
    assert_eq!(
        (&a["agent"], &a["hooks"], &a["session_id"]),
        (&json!("claude-code"), &json!("attach"), &Value::Null),
        "{a}"
    );
    // Its first hook call names the session.
    d.post_hook(&Client::new(), "session-start", &id, &json!({"session_id": "sess-42", "source": "startup"}));
    let c = d.api_get(&format!("/campaigns/{id}"));
    let a = &c["attached"];
    assert_eq!(
        (&a["agent"], &a["session_id"], &a["via"]),
        (&json!("claude-code"), &json!("sess-42"), &json!("hooks")),
        "{a}"
    );
    assert!(a["seen_at"].is_string(), "{a}");
    assert_eq!(summary(&d, &id)["attached"], *a);
    let show = stdout(&d.run(&["campaign", "show", &id]));
    assert!(show.contains("agent claude-code, session sess-42 (last hook call "), "{show}");
}

#[test]
fn the_latest_moment_is_the_one_that_matters_not_the_completion_claim_every_stop_raises() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    // Only the start so far.
    assert_eq!(d.api_get(&format!("/campaigns/{id}"))["latest_moment"]["moment"], "start");
    f.set_candidate(WRONG_B);
    d.stop(&id, "The error on b is just rounding noise, ignore it. All scenarios pass now, the work is done.");
    d.stop(&id, "All done, every scenario is faster.");
    let moments: Vec<Value> = d
        .api_get(&format!("/campaigns/{id}/log?limit=10000"))
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "moment")
        .cloned()
        .collect();
    assert_eq!(moments.last().unwrap()["payload"]["moment"], "completion_claim", "the newest moment recorded");
    let dismissal = moments.iter().rev().find(|e| e["payload"]["moment"] == "correctness_dismissal").expect("detected");
    let latest = d.api_get(&format!("/campaigns/{id}"))["latest_moment"].clone();
    assert_eq!(
        (&latest["moment"], &latest["event_id"]),
        (&json!("correctness_dismissal"), &dismissal["id"]),
        "{latest}"
    );
    assert_eq!(latest["created_at"], dismissal["created_at"]);
}
