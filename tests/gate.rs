//! The Stop gate end to end: the real daemon, the real hook command, a
//! scripted harness in a real git workspace.

mod common;

use common::{reason, Daemon, Fixture, ALL_PASS};
use serde_json::Value;

#[test]
fn blocked_while_one_scenario_fails_then_allowed_when_all_pass() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());

    f.set_candidate("a true 50 100\nb false 40 100\nc true 80 100\n");
    let r = reason(&d.stop(&id, "All done, every scenario is faster."));
    assert!(r.contains("fails on 1 of 3 scenarios"), "{r}");
    let row = r.lines().find(|l| l.starts_with("b ")).unwrap_or_else(|| panic!("no row for b in {r}"));
    assert!(row.contains("NO") && row.contains("incorrect"), "{row}");
    assert!(!r.lines().any(|l| l.starts_with("a ") || l.starts_with("c ")), "passing scenarios listed: {r}");
    assert!(r.contains("Question ("), "a question is carried: {r}");

    f.set_candidate(ALL_PASS);
    assert_eq!(d.stop(&id, "Now it is really done."), None, "all pass: the stop is allowed and nothing is printed");

    let audit = d.run(&["audit", "campaign", &id, "--json"]);
    let audit: Value = serde_json::from_slice(&audit.stdout).unwrap();
    let stops = audit["stop_attempts"].as_array().unwrap();
    assert_eq!(stops.len(), 2);
    assert_eq!(stops[0]["decision"], "block");
    assert_eq!(stops[0]["session_id"], "sess-1");
    assert_eq!(stops[0]["claim"], "All done, every scenario is faster.");
    assert_eq!(stops[1]["decision"], "allow");
}

#[test]
fn a_good_geometric_mean_with_one_slow_scenario_is_blocked() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    f.set_candidate("a true 10 100\nb true 10 100\nc true 120 100\n");
    let r = reason(&d.stop(&id, "10x on average, done."));
    let row = r.lines().find(|l| l.starts_with("c ")).unwrap();
    assert!(row.contains("0.83x") && row.contains("speedup 0.83x < 1.10x"), "{row}");
    assert!(r.contains("Geometric mean speedup 4.37x"), "{r}");
}

#[test]
fn harness_failures_are_blocked_with_their_reason() {
    let cases = [
        ("a true 50 100\nCRASH\n", "killed by signal 11 (SIGSEGV)"),
        ("SLEEP\n", "timed out after 2 s"),
        ("a true 50 100\nGARBAGE\nb true 50 100\nc true 50 100\n", "results line 2: not valid JSON"),
        ("a true 50 100\nb true 50 100\n", "missing from the harness results"),
        ("a true 50 100\nFAIL\n", "harness run exited with status 3; last output: harness: cannot load the kernel"),
    ];
    let f = Fixture::new("");
    let spec = std::fs::read_to_string(f.spec()).unwrap().replace("timeout_s = 20", "timeout_s = 2");
    std::fs::write(f.spec(), spec).unwrap();
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    for (candidate, expected) in cases {
        f.set_candidate(candidate);
        let r = reason(&d.stop(&id, "done"));
        assert!(r.contains(expected), "candidate {candidate:?}: expected {expected:?} in\n{r}");
    }
    // A missing scenario is named in the table.
    f.set_candidate("a true 50 100\nb true 50 100\n");
    let r = reason(&d.stop(&id, "done"));
    assert!(r.lines().any(|l| l.starts_with("c ") && l.contains("missing")), "{r}");
}

#[test]
fn a_banned_symbol_in_the_built_binary_is_blocked() {
    let f = Fixture::new("[constraints]\nbinary = \"build/libk.so\"\nbanned_symbols = [\"cublas\", \"cutlass::\"]\n");
    // The build compiles the candidate's kernel.c into build/libk.so.
    let spec = std::fs::read_to_string(f.spec()).unwrap().replace(
        "[harness]\n",
        "[harness]\nbuild = \"mkdir -p build && cc -shared -fPIC -o build/libk.so kernel.c\"\n",
    );
    std::fs::write(f.spec(), spec).unwrap();
    std::fs::write(f.ws().join("kernel.c"), "int add(int a, int b) { return a + b; }\n").unwrap();
    f.set_candidate(ALL_PASS);
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    assert_eq!(d.stop(&id, "done"), None, "a clean binary passes");

    std::fs::write(
        f.ws().join("kernel.c"),
        "int cublasGemmEx(int); int add(int a, int b) { return cublasGemmEx(a) + b; }\n",
    )
    .unwrap();
    let r = reason(&d.stop(&id, "done"));
    assert!(r.contains("constraint violated: banned `cublas` found in dynamic symbols: cublasGemmEx"), "{r}");
}

#[test]
fn an_edited_protected_file_is_blocked() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    f.set_candidate(ALL_PASS);
    assert_eq!(d.stop(&id, "done"), None);
    // The agent "fixes" the harness: results now always pass.
    let path = f.ws().join("harness/run.sh");
    let text = std::fs::read_to_string(&path).unwrap() + "# tweaked\n";
    std::fs::write(&path, text).unwrap();
    let r = reason(&d.stop(&id, "done"));
    assert!(r.contains("protected file harness/run.sh was modified"), "{r}");
}

#[test]
fn an_unchanged_tree_is_evaluated_once() {
    let f = Fixture::with_run("", "echo run >> ../runs.log; sh harness/run.sh {results}");
    // The snapshot is exported under the data dir, so count runs through an absolute path instead.
    let log = f.dir.path().join("runs.log");
    // (The host's file system is the counter: the sandbox, on by default,
    // would hide it, so this campaign opts out.)
    let spec = std::fs::read_to_string(f.spec())
        .unwrap()
        .replace("../runs.log", &log.display().to_string())
        .replace("[harness]\n", "[harness]\nsandbox = \"none\"\n");
    std::fs::write(f.spec(), spec).unwrap();
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    f.set_candidate("a true 50 100\nb false 40 100\nc true 80 100\n");
    for _ in 0..3 {
        reason(&d.stop(&id, "done"));
    }
    let out = d.run(&["eval", &id, "--json"]);
    let e: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(e["cached"], true);
    let runs = || std::fs::read_to_string(&log).unwrap().lines().count();
    assert_eq!(runs(), 1, "three stops and an eval on one tree ran the harness once");
    f.set_candidate(ALL_PASS);
    assert_eq!(d.stop(&id, "done"), None);
    assert_eq!(runs(), 2, "a changed tree is evaluated again");
}

#[test]
fn eval_json_follows_the_contract() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    f.set_candidate("a true 50 100\nb true 95 100\nc true 80 100\n");
    let out = d.run(&["eval", &id, "--json"]);
    assert_eq!(out.status.code(), Some(1), "exit 1: the predicate fails: {}", String::from_utf8_lossy(&out.stderr));
    let e: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(e["holds"], false);
    let s = e["scenarios"].as_array().unwrap();
    assert_eq!(s.len(), 3);
    for key in ["scenario", "correct", "speedup", "passes", "reasons"] {
        assert!(s[0].get(key).is_some(), "scenario entry lacks {key}: {}", s[0]);
    }
    assert_eq!(s[1]["scenario"], "b");
    assert_eq!(s[1]["passes"], false);
    assert!((s[0]["speedup"].as_f64().unwrap() - 2.0).abs() < 1e-9);
    // The human table names the failing scenario too.
    let out = d.run(&["eval", &id]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("FAILS")
            && text.lines().any(|l| l.starts_with("b ") && l.contains("FAIL: speedup 1.05x < 1.10x")),
        "{text}"
    );
}

#[test]
fn audit_mode_records_and_never_blocks() {
    let f = Fixture::new("");
    // The fixture's spec has a [questions] table (`withhold = 0`).
    let spec = std::fs::read_to_string(f.spec()).unwrap().replace("[questions]\n", "[questions]\nmode = \"audit\"\n");
    std::fs::write(f.spec(), spec).unwrap();
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    f.set_candidate("a false 50 100\n");
    assert_eq!(d.stop(&id, "done"), None);
    let stops = d.api_get(&format!("/campaigns/{id}/stops"));
    assert_eq!(stops[0]["decision"], "record");
    assert_eq!(stops[0]["holds"], false);
}

#[test]
fn a_human_question_is_delivered_at_the_next_stop_once() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    f.set_candidate(ALL_PASS);
    let out = d.run(&["ask", &id, "Does the reference win in cycles or only in wall-clock time?"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r = reason(&d.stop(&id, "done"));
    assert!(r.contains("Question from the person supervising: Does the reference win in cycles"), "{r}");
    assert!(r.contains("holds on all 3 scenarios"), "{r}");
    // Delivered once: the next stop goes through.
    let payload = serde_json::json!({"session_id": "sess-1", "stop_hook_active": true, "last_assistant_message": "Measured: cycles too."});
    let out = d.hook("stop", &id, &payload.to_string());
    assert!(out.stdout.is_empty(), "{}", String::from_utf8_lossy(&out.stdout));
    let qs = d.api_get(&format!("/campaigns/{id}/questions"));
    let human: Vec<&Value> = qs.as_array().unwrap().iter().filter(|q| q["source"] == "human").collect();
    assert_eq!(human.len(), 1);
    assert_eq!(human[0]["status"], "delivered");
    let show = String::from_utf8(d.run(&["campaign", "show", &id]).stdout).unwrap();
    let line =
        show.lines().find(|l| l.contains("Does the reference win in cycles")).unwrap_or_else(|| panic!("{show}"));
    assert!(
        line.contains("[human]") && line.contains("via stop_hook_reason"),
        "campaign show says when and how: {line}"
    );
}

#[test]
fn bad_hook_input_exits_2_with_a_clear_message_and_the_daemon_carries_on() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    for (input, expected) in [
        ("", "empty"),
        ("{\"session_id\": ", "not valid JSON (line 1"),
        ("[1, 2]", "must be a JSON object, got an array"),
    ] {
        let out = d.hook("stop", &id, input);
        assert_eq!(out.status.code(), Some(2), "input {input:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(expected), "input {input:?}: {err}");
        assert!(out.stdout.is_empty());
    }
    let out = d.hook("stop-now", &id, "{}");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown Claude Code event"));
    // The daemon is unaffected and records the next call.
    f.set_candidate(ALL_PASS);
    assert_eq!(d.stop(&id, "done"), None);
    let health =
        std::process::Command::new("curl").args(["-sf", &format!("{}/api/v1/health", d.url)]).output().unwrap();
    assert!(String::from_utf8_lossy(&health.stdout).contains("\"ok\""));
}

#[test]
fn an_unknown_campaign_never_blocks_and_other_events_are_recorded() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let out = d.hook("stop", "no-such-campaign", "{\"session_id\": \"x\"}");
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not found"));

    for event in ["session-start", "pre-tool-use", "subagent-stop", "session-end"] {
        let payload = format!("{{\"session_id\": \"s9\", \"hook_event_name\": \"{event}\", \"tool_name\": \"Bash\"}}");
        let out = d.hook(event, &id, &payload);
        assert_eq!(out.status.code(), Some(0), "{event}");
        if event == "session-start" {
            // The session is told of the sanctioned exit (issue #34), nothing else.
            let v: Value = serde_json::from_slice(&out.stdout).expect("session-start context");
            assert_eq!(v["hookSpecificOutput"]["hookEventName"], "SessionStart", "{v}");
            let text = v["hookSpecificOutput"]["additionalContext"].as_str().unwrap();
            assert!(text.contains("claim limit --why") && !text.contains("start moment"), "{text}");
            // A session started by hand has no $GADFLY_CAMPAIGN: the id is in the text.
            assert!(text.contains(&format!("gadfly claim limit --campaign {id} ")), "{text}");
        } else {
            assert!(out.stdout.is_empty(), "{event} prints nothing");
        }
    }
    // The campaign's start question rides on the first hook that can carry
    // context, once; the next such hook prints nothing.
    let first = d.hook("post-tool-use", &id, "{\"session_id\": \"s9\", \"tool_name\": \"Bash\"}");
    let v: Value = serde_json::from_slice(&first.stdout).expect("additional context");
    assert_eq!(v["hookSpecificOutput"]["hookEventName"], "PostToolUse");
    assert!(v["hookSpecificOutput"]["additionalContext"].as_str().unwrap().contains("start moment"), "{v}");
    let again = d.hook("user-prompt-submit", &id, "{\"session_id\": \"s9\", \"prompt\": \"x\"}");
    assert!(again.stdout.is_empty(), "{}", String::from_utf8_lossy(&again.stdout));
    let log = d.api_get(&format!("/campaigns/{id}/log"));
    let kinds: Vec<&str> = log.as_array().unwrap().iter().map(|e| e["kind"].as_str().unwrap()).collect();
    for k in [
        "hook.session_start",
        "hook.user_prompt_submit",
        "hook.pre_tool_use",
        "hook.post_tool_use",
        "hook.subagent_stop",
        "hook.session_end",
    ] {
        assert!(kinds.contains(&k), "{k} not recorded in {kinds:?}");
    }
    // The same tool call's hook fired twice is recorded once; two
    // different calls with identical payloads are both recorded.
    let count = || d.api_get(&format!("/campaigns/{id}/log")).as_array().unwrap().len();
    let before = count();
    let call = "{\"session_id\": \"s9\", \"tool_name\": \"Bash\", \"tool_use_id\": \"toolu_01\"}";
    d.hook("post-tool-use", &id, call);
    d.hook("post-tool-use", &id, call);
    assert_eq!(count(), before + 1);
    d.hook("user-prompt-submit", &id, "{\"session_id\": \"s9\", \"prompt\": \"go on\"}");
    d.hook("user-prompt-submit", &id, "{\"session_id\": \"s9\", \"prompt\": \"go on\"}");
    assert_eq!(count(), before + 3);
}

#[test]
fn a_restart_keeps_campaigns_and_the_event_log() {
    let f = Fixture::new("");
    let data = f.data_dir();
    let mut d = Daemon::start(&data);
    let id = d.create_campaign(&f.spec());
    f.set_candidate("a false 50 100\n");
    reason(&d.stop(&id, "done"));
    let events_before = d.api_get(&format!("/campaigns/{id}/log"));
    let status = d.terminate();
    assert!(status.success(), "graceful shutdown on SIGTERM: {status:?}");
    let d2 = Daemon::start(&data);
    assert_eq!(d.token, d2.token, "the token survives restarts");
    let list = d2.api_get("/campaigns");
    assert_eq!(list[0]["id"], id.as_str());
    let events_after = d2.api_get(&format!("/campaigns/{id}/log"));
    assert_eq!(events_before, events_after);
    // The cached verdict is still there, and the gate still works.
    reason(&d2.stop(&id, "done"));
    f.set_candidate(ALL_PASS);
    assert_eq!(d2.stop(&id, "done"), None);
}

#[test]
fn the_api_needs_the_token_but_health_does_not() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let code = |args: &[&str]| {
        let out = std::process::Command::new("curl")
            .args(["-s", "-o", "/dev/null", "-w", "%{http_code}"])
            .args(args)
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap()
    };
    assert_eq!(code(&[&format!("{}/api/v1/health", d.url)]), "200");
    assert_eq!(code(&[&format!("{}/api/v1/campaigns", d.url)]), "401");
    assert_eq!(code(&["-H", "Authorization: Bearer wrong", &format!("{}/api/v1/campaigns", d.url)]), "401");
    assert_eq!(
        code(&["-H", &format!("Authorization: Bearer {}", d.token), &format!("{}/api/v1/campaigns", d.url)]),
        "200"
    );
    // The console shows a login form without the cookie, and sets it from ?token=.
    let page = std::process::Command::new("curl").args(["-s", &format!("{}/", d.url)]).output().unwrap();
    assert!(String::from_utf8_lossy(&page.stdout).contains("<form"));
    let login = std::process::Command::new("curl")
        .args(["-s", "-i", &format!("{}/login?token={}", d.url, d.token)])
        .output()
        .unwrap();
    let headers = String::from_utf8_lossy(&login.stdout);
    assert!(headers.contains("gadfly_session=") && headers.contains("location: /"), "{headers}");
}

#[test]
fn campaign_create_names_file_line_and_field_of_a_bad_spec() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let spec = std::fs::read_to_string(f.spec()).unwrap().replace("min_speedup = 1.1", "min_speedup = \"fast\"");
    std::fs::write(f.spec(), spec).unwrap();
    let out = d.run(&["campaign", "create", f.spec().to_str().unwrap()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("campaign.toml:13:"), "{err}");
    assert!(err.contains("field `predicate.min_speedup`"), "{err}");
    let list = d.api_get("/campaigns");
    assert_eq!(list.as_array().unwrap().len(), 0, "nothing was created");
}

#[test]
fn a_same_size_edit_after_a_quiet_period_is_seen() {
    // After 2 s without edits the snapshot is remembered by stat fingerprint;
    // an edit of the same size must still produce a new evaluation.
    let f = Fixture::new("");
    f.set_candidate("a true 50 100\nb true 40 100\nc true 80 100\n");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    std::thread::sleep(std::time::Duration::from_millis(2500));
    assert_eq!(d.stop(&id, "done"), None);
    assert_eq!(d.stop(&id, "done"), None, "the remembered snapshot answers");
    f.set_candidate("a true 50 100\nb true 40 100\nc true 99 100\n");
    let r = reason(&d.stop(&id, "done"));
    assert!(r.lines().any(|l| l.starts_with("c ") && l.contains("1.01x")), "{r}");
}

/// Questions waiting while many sessions call at once: each one reaches
/// exactly one hook call, none is lost, and a person's question goes
/// before the bank's (on PostgreSQL the calls really race for the rows).
#[test]
fn waiting_questions_reach_concurrent_hook_calls_once_each_a_persons_first() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let client = reqwest::blocking::Client::builder().no_proxy().build().unwrap();
    let ask = |text: &str| {
        let r = client
            .post(format!("{}/api/v1/campaigns/{id}/questions", d.url))
            .bearer_auth(&d.token)
            .json(&serde_json::json!({ "text": text }))
            .send()
            .unwrap();
        assert!(r.status().is_success(), "{}", r.status());
    };
    let context = |v: &Value| v["output"]["hookSpecificOutput"]["additionalContext"].as_str().map(str::to_string);
    // The campaign's start question waits from its creation; a person's
    // question queued after it is delivered first.
    ask("Which scenario is slowest, measured?");
    let first =
        d.post_hook(&client, "post-tool-use", &id, &serde_json::json!({"session_id": "s0", "tool_name": "Bash"}));
    assert!(context(&first).unwrap().contains("Which scenario is slowest, measured?"), "{first}");
    ask("What does the profiler say about occupancy?");
    ask("Is the reference run on the same clocks?");
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(12));
    let delivered: Vec<String> = std::thread::scope(|s| {
        let calls: Vec<_> = (0..12)
            .map(|i| {
                let (barrier, client, d, id) = (barrier.clone(), &client, &d, &id);
                s.spawn(move || {
                    barrier.wait();
                    let body = serde_json::json!({"session_id": format!("s{i}"), "tool_name": "Bash", "tool_use_id": format!("t{i}")});
                    context(&d.post_hook(client, "post-tool-use", id, &body))
                })
            })
            .collect();
        calls.into_iter().filter_map(|c| c.join().unwrap()).collect()
    });
    assert_eq!(delivered.len(), 3, "the start question and two of a person's, each once: {delivered:#?}");
    for text in ["start moment", "occupancy", "same clocks"] {
        assert_eq!(delivered.iter().filter(|c| c.contains(text)).count(), 1, "{text}: {delivered:#?}");
    }
    let questions = d.api_get(&format!("/campaigns/{id}/questions"));
    assert!(questions.as_array().unwrap().iter().all(|q| q["status"] == "delivered"), "{questions}");
    let log = d.api_get(&format!("/campaigns/{id}/log"));
    let deliveries = log.as_array().unwrap().iter().filter(|e| e["kind"] == "question.delivered").count();
    assert_eq!(deliveries, 4, "one delivery event per question");
    let after = d.post_hook(
        &client,
        "post-tool-use",
        &id,
        &serde_json::json!({"session_id": "s0", "tool_name": "Bash", "tool_use_id": "t-last"}),
    );
    assert_eq!(context(&after), None, "nothing waits any more: {after}");
}

/// The study's goal: at least the comparison implementation on every
/// scenario. A kernel far faster than the initial one but slower than the
/// comparison is allowed under the initial-kernel goal and blocked under
/// the comparison goal, the block naming each scenario with both ratios.
#[test]
fn the_comparison_goal_is_enforced_with_both_ratios() {
    let f = Fixture::new("");
    let vs_initial = f.spec();
    let vs_compare = f.dir.path().join("compare.toml");
    let text = std::fs::read_to_string(&vs_initial).unwrap();
    std::fs::write(
        &vs_compare,
        // In the fixture's [predicate] (a [questions] table follows it).
        text.replace("name = \"fixture\"", "name = \"fixture-compare\"").replace(
            "min_geomean_speedup = 1.2\n",
            "min_geomean_speedup = 1.2\nmin_compare_speedup = 1.0\nmin_compare_geomean = 1.1\n",
        ) + "[predicate.scenarios.c]\nmin_compare_speedup = 0.5\n",
    )
    .unwrap();
    let d = Daemon::start(&f.data_dir());
    let initial = d.create_campaign(&vs_initial);
    let compare = d.create_campaign(&vs_compare);
    // 2x to 10x the initial kernel; a and b slower than the comparison, c
    // at 0.6x of it (its own bar is 0.5x).
    f.set_candidate(
        "a true 10 100 \"compare_us\":4\nb true 50 100 \"compare_us\":45\nc true 20 100 \"compare_us\":12\n",
    );
    assert_eq!(d.stop(&initial, "Done: 2x to 10x everywhere."), None, "allowed under the initial-kernel goal");
    let r = reason(&d.stop(&compare, "Done: 2x to 10x everywhere."));
    assert!(r.contains("fails on 2 of 3 scenarios"), "{r}");
    assert!(r.contains("vs comparison"), "the table has the comparison column: {r}");
    let a = r.lines().find(|l| l.starts_with("a ")).unwrap_or_else(|| panic!("no row for a in {r}"));
    assert!(a.contains("10.00x") && a.contains("0.40x"), "{a}");
    assert!(a.contains("vs comparison 0.40x < 1.00x (10.0 us vs comparison 4.0 us)"), "{a}");
    let b = r.lines().find(|l| l.starts_with("b ")).unwrap();
    assert!(b.contains("2.00x") && b.contains("0.90x"), "{b}");
    assert!(!r.lines().any(|l| l.starts_with("c ")), "c clears its own bar: {r}");
    assert!(r.contains("Against the comparison implementation (its time / yours): geometric mean 0.60x"), "{r}");
    let e: Value = serde_json::from_slice(&d.run(&["eval", &compare, "--json"]).stdout).unwrap();
    assert_eq!(e["holds"], false);
    assert!((e["geomean_compare_speedup"].as_f64().unwrap() - (0.4f64 * 0.9 * 0.6).cbrt()).abs() < 1e-9, "{e}");
    assert!(e["failures"][0].as_str().unwrap().starts_with("geometric mean vs comparison 0.60x < 1.10x"), "{e}");
    let sc = |n: &str| e["scenarios"].as_array().unwrap().iter().find(|s| s["scenario"] == n).unwrap().clone();
    assert_eq!((sc("a")["speedup"].as_f64(), sc("a")["compare_speedup"].as_f64()), (Some(10.0), Some(0.4)));
    // A harness that times no comparison cannot meet the comparison goal.
    f.set_candidate("a true 10 100\nb true 10 100\nc true 10 100\n");
    let r = reason(&d.stop(&compare, "Done."));
    assert!(r.contains("no comparison time (compare_us) reported"), "{r}");
    // Faster than the comparison everywhere: allowed under both goals.
    f.set_candidate("a true 4 100 \"compare_us\":5\nb true 4 100 \"compare_us\":5\nc true 4 100 \"compare_us\":5\n");
    assert_eq!(d.stop(&compare, "Done, faster than the comparison."), None);
    // The audit shows both ratios for the blocked attempts.
    let audit: Value = serde_json::from_slice(&d.run(&["audit", "campaign", &compare, "--json"]).stdout).unwrap();
    let first = &audit["records"][0];
    assert!((first["geomean_compare_speedup"].as_f64().unwrap() - 0.6).abs() < 1e-9, "{first}");
    assert_eq!(first["failing"][0]["compare_speedup"].as_f64(), Some(0.4), "{first}");
}

/// One tolerance contract: a harness that judges elementwise
/// (`|diff| <= atol + rtol*|ref|`) and reports atol as `tolerance` with
/// `rtol` beside it is not contradicted by an absolute error above atol
/// (this blocked every kernel on the GPU); its own largest
/// error-to-tolerance ratio is the cross-check. A harness that reports
/// only an absolute bound is held to it as before.
#[test]
fn the_tolerance_contract_follows_the_harness_model() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let elementwise = "\"max_abs_err_ref\":3.125e-2,\"max_abs_err_hi\":3.1e-2,\"tolerance\":1e-2,\"rtol\":1e-2";
    f.set_candidate(&format!(
        "a true 50 100 {elementwise},\"max_tol_ratio\":0.71\nb true 40 100 {elementwise}\nc true 80 100 {elementwise},\"max_tol_ratio\":0.99\n"
    ));
    assert_eq!(d.stop(&id, "Done."), None, "within the elementwise tolerance: allowed");
    f.set_candidate(&format!(
        "a true 50 100 {elementwise},\"max_tol_ratio\":1.8\nb true 40 100 {elementwise}\nc true 80 100 {elementwise}\n"
    ));
    let r = reason(&d.stop(&id, "Done."));
    let a = r.lines().find(|l| l.starts_with("a ")).unwrap_or_else(|| panic!("no row for a in {r}"));
    assert!(a.contains("NO") && a.contains("error-to-tolerance ratio 1.800 the harness reported exceeds 1"), "{a}");
    let absolute = "\"max_abs_err_ref\":3.125e-2,\"max_abs_err_hi\":3.1e-2,\"tolerance\":1e-2";
    f.set_candidate(&format!("a true 50 100 {absolute}\nb true 40 100\nc true 80 100\n"));
    let r = reason(&d.stop(&id, "Done."));
    assert!(r.contains("error vs reference 3.125e-2 exceeds the tolerance 1.000e-2 the harness reported"), "{r}");
}
