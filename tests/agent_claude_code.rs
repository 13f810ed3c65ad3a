//! The real Claude Code CLI, offline against the scripted mock model, with
//! gadfly's hooks installed through `--settings`: the Stop gate must keep it
//! working while a scenario fails, and let it stop when all pass.
//!
//! The CLI comes from `GADFLY_CLAUDE_BIN`, else from the cache that
//! `.ci/install-agents.sh` fills; without it these tests print `SKIPPED` and
//! pass.

mod common;
mod mock_model;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{Daemon, Fixture, ALL_PASS};
use mock_model::{
    agent_or_skip, last_user_text, messages_containing, offline_claude, run_agent, AgentRun, MockModel, Step,
};
use serde_json::Value;

const TIMEOUT: Duration = Duration::from_secs(120);

fn claude_bin(test: &str) -> Option<PathBuf> {
    agent_or_skip("GADFLY_CLAUDE_BIN", "claude", test)
}

/// The hooks `gadfly attach` writes for a campaign (and spawn mode passes
/// with `--settings`), with `gadfly` found on PATH.
fn settings(id: &str) -> Value {
    gadfly::agent::attach::hooks_settings("gadfly", id, Default::default())
}

/// `claude -p PROMPT` in the workspace, against the mock, with gadfly's hooks.
fn claude(bin: &Path, home: &Path, mock: &MockModel, d: &Daemon, id: &str, ws: &Path, prompt: &str) -> Command {
    let settings_file = home.join("gadfly-settings.json");
    std::fs::write(&settings_file, serde_json::to_string_pretty(&settings(id)).unwrap()).unwrap();
    let mut cmd = offline_claude(bin, home, mock, ws, prompt);
    cmd.arg("--settings").arg(&settings_file).env("GADFLY_URL", &d.url).env("GADFLY_TOKEN", &d.token);
    cmd
}

/// A shell command that writes `text` into candidate.txt.
fn write_candidate(text: &str) -> String {
    format!("printf '{}' > candidate.txt", text.replace('\n', "\\n"))
}

fn assert_success(run: &AgentRun, mock: &MockModel) {
    assert!(!run.timed_out && run.code() == Some(0), "claude failed: {}", run.explain(mock));
    let result = run.events().into_iter().rfind(|e| e["type"] == "result");
    let result = result.unwrap_or_else(|| panic!("no result line: {}", run.explain(mock)));
    assert_eq!(result["is_error"], false, "{result}\n{}", run.explain(mock));
}

fn log_kinds(d: &Daemon, id: &str) -> Vec<String> {
    let log = d.api_get(&format!("/campaigns/{id}/log"));
    log.as_array().unwrap().iter().map(|e| e["kind"].as_str().unwrap_or("").to_string()).collect()
}

#[test]
fn stop_is_blocked_while_a_scenario_fails_then_allowed() {
    let Some(bin) = claude_bin("stop_is_blocked_while_a_scenario_fails_then_allowed") else { return };
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let home = tempfile::tempdir().unwrap();

    let mock = MockModel::start(vec![
        Step::shell(&write_candidate("a true 50 100\nb false 40 100\nc true 80 100\n"))
            .described("Write the new candidate"),
        Step::text("All scenarios pass now. Done."),
        Step::shell(&write_candidate(ALL_PASS)).described("Fix b").when_last_user_contains("Stop hook feedback"),
        Step::text("Fixed b. Done."),
    ]);
    let run = run_agent(claude(&bin, home.path(), &mock, &d, &id, &f.ws(), "Make every scenario pass"), TIMEOUT);
    eprintln!("claude ran for {:.2} s\n{}", run.elapsed.as_secs_f64(), mock.describe());
    assert_success(&run, &mock);
    assert_eq!(mock.steps_served(), 4, "every step was used: {}", run.explain(&mock));
    assert!(mock.unmatched().is_empty(), "{}", run.explain(&mock));

    // What the model received after the blocked stop.
    let requests = mock.agent_requests();
    let feedback = requests
        .iter()
        .map(last_user_text)
        .find(|t| t.contains("Stop hook feedback"))
        .unwrap_or_else(|| panic!("no request carried the Stop hook feedback: {}", run.explain(&mock)));
    let row = feedback
        .lines()
        .find(|l| l.starts_with("b "))
        .unwrap_or_else(|| panic!("no row for scenario b in the feedback:\n{feedback}"));
    assert!(row.contains("NO"), "{row}");
    assert!(!feedback.lines().any(|l| l.starts_with("a ") || l.starts_with("c ")), "{feedback}");
    assert!(feedback.contains("Question"), "a question is carried:\n{feedback}");
    // The last request is the answer to the fix, after which the stop went through.
    assert!(!last_user_text(requests.last().unwrap()).contains("Stop hook feedback"));

    // The daemon saw a block then an allow, from the CLI's own session.
    let stops = d.api_get(&format!("/campaigns/{id}/stops"));
    let stops = stops.as_array().unwrap();
    assert_eq!(stops.len(), 2, "{stops:?}");
    assert_eq!(stops[0]["decision"], "block", "{stops:?}");
    assert_eq!(stops[0]["claim"], "All scenarios pass now. Done.", "{stops:?}");
    assert_eq!(stops[1]["decision"], "allow", "{stops:?}");
    assert_eq!(stops[1]["claim"], "Fixed b. Done.", "{stops:?}");
    let session = run.events().into_iter().find(|e| e["type"] == "system" && e["subtype"] == "init").unwrap()
        ["session_id"]
        .clone();
    assert_eq!(stops[0]["session_id"], session, "{stops:?}");

    let kinds = log_kinds(&d, &id);
    for k in ["hook.session_start", "hook.user_prompt_submit", "hook.post_tool_use"] {
        assert!(kinds.iter().any(|x| x == k), "{k} not in the log: {kinds:?}");
    }
    assert_eq!(std::fs::read_to_string(f.ws().join("candidate.txt")).unwrap(), ALL_PASS);
}

/// A question a person queues with `gadfly ask` while the agent is busy in a
/// tool call reaches the model in a later request, once. gadfly may carry it
/// as hook context (PostToolUse `additionalContext`) or in a Stop block
/// reason; the test accepts either and says which it saw.
#[test]
fn a_human_question_queued_mid_run_reaches_the_model() {
    let Some(bin) = claude_bin("a_human_question_queued_mid_run_reaches_the_model") else { return };
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let home = tempfile::tempdir().unwrap();
    let go = home.path().join("go");
    let question = "Does the reference win in cycles or only in wall-clock time?";

    // Step 1 writes a passing candidate, then waits (inside the tool call)
    // until the test has queued its question.
    let wait = format!(
        "{} && for i in $(seq 1 600); do [ -f '{}' ] && break; sleep 0.1; done",
        write_candidate(ALL_PASS),
        go.display()
    );
    let mock = MockModel::start(vec![
        Step::shell(&wait).described("Write the candidate and measure"),
        Step::text("Measured with perf: cycles too, not only wall-clock time. Done.")
            .when_body_contains(question)
            .otherwise_text("Every scenario passes. Done."),
    ]);
    let cmd = claude(&bin, home.path(), &mock, &d, &id, &f.ws(), "Make every scenario pass");
    let agent = std::thread::spawn(move || run_agent(cmd, TIMEOUT));

    assert!(mock.wait_for_steps(1, TIMEOUT), "the agent never made its tool call: {}", mock.describe());
    let asked_after = mock.agent_requests().len();
    let out = d.run(&["ask", &id, question]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    std::fs::write(&go, "").unwrap();
    let run = agent.join().unwrap();
    eprintln!("claude ran for {:.2} s\n{}", run.elapsed.as_secs_f64(), mock.describe());
    assert_success(&run, &mock);
    assert!(mock.unmatched().is_empty(), "{}", run.explain(&mock));
    assert_eq!(mock.steps_served(), 2, "the model answered the question: {}", run.explain(&mock));

    let requests = mock.agent_requests();
    assert!(requests[..asked_after].iter().all(|r| !r.to_string().contains(question)));
    let first = requests
        .iter()
        .position(|r| r.to_string().contains(question))
        .unwrap_or_else(|| panic!("the question never reached the model: {}", run.explain(&mock)));
    // Where it is: a Stop block reason arrives as a user message ("Stop hook
    // feedback"); PostToolUse context as a `system` message right after the
    // tool result ("PostToolUse:Bash hook additional context: ...").
    let found = messages_containing(&requests[first], question);
    let (role, text) = found.last().unwrap();
    eprintln!("the question reached the model in request #{first}, in a {role} message: {text:?}");
    match role.as_str() {
        "user" => assert!(text.contains("Stop hook feedback"), "{text}"),
        "system" => assert!(text.starts_with("PostToolUse:Bash hook additional context: "), "{text}"),
        other => panic!("the question came in a {other} message: {text}"),
    }
    assert!(text.contains("from the person supervising"), "{text}");

    // The run ended with an allowed stop, and the question was delivered once.
    let stops = d.api_get(&format!("/campaigns/{id}/stops"));
    let stops = stops.as_array().unwrap();
    assert_eq!(stops.last().unwrap()["decision"], "allow", "{stops:?}");
    let qs = d.api_get(&format!("/campaigns/{id}/questions"));
    let human: Vec<&Value> = qs.as_array().unwrap().iter().filter(|q| q["source"] == "human").collect();
    assert_eq!(human.len(), 1, "{qs}");
    assert_eq!(human[0]["status"], "delivered", "{qs}");
    for r in &requests[first..] {
        assert_eq!(messages_containing(r, question).len(), 1, "delivered once: {}", run.explain(&mock));
    }
}

/// Claude Code overrides a Stop hook after a number of consecutive blocks
/// (`CLAUDE_CODE_STOP_HOOK_BLOCK_CAP`, 8 by default, the turn ends on the
/// block after that) and the run then ends like a success: exit 0, result
/// `success`, no error, an empty `result`. Only a `system`/`informational`
/// line tells. gadfly must not read such an end as a verdict.
#[test]
fn the_block_cap_ends_a_blocked_turn_looking_like_a_success() {
    let Some(bin) = claude_bin("the_block_cap_ends_a_blocked_turn_looking_like_a_success") else { return };
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let home = tempfile::tempdir().unwrap();
    // b stays wrong whatever the agent says.
    let mut script = vec![Step::shell(&write_candidate("a true 50 100\nb false 40 100\nc true 80 100\n"))];
    for i in 1..=5 {
        script.push(Step::text(&format!("Done, attempt {i}.")));
    }
    let mock = MockModel::start(script);
    let mut cmd = claude(&bin, home.path(), &mock, &d, &id, &f.ws(), "Make every scenario pass");
    cmd.env("CLAUDE_CODE_STOP_HOOK_BLOCK_CAP", "2");
    let run = run_agent(cmd, TIMEOUT);
    eprintln!("claude ran for {:.2} s\n{}", run.elapsed.as_secs_f64(), mock.describe());
    assert_success(&run, &mock);

    // A cap of 2 lets the third consecutive block end the turn; the session
    // then ends with its last stop blocked, which gadfly records as an
    // ungated stop (SessionEnd), not as a verdict.
    let stops = d.api_get(&format!("/campaigns/{id}/stops"));
    let decisions: Vec<&str> = stops.as_array().unwrap().iter().map(|s| s["decision"].as_str().unwrap()).collect();
    assert_eq!(decisions, ["block", "block", "block", "ungated"], "{}", run.explain(&mock));
    let ungated = &stops[3];
    assert!(ungated["reason"].as_str().unwrap().contains("last stop was blocked"), "{ungated}");
    assert_eq!(ungated["holds"], false, "{ungated}");
    assert_eq!(ungated["session_id"], stops[2]["session_id"]);
    assert_eq!(mock.steps_served(), 4, "{}", run.explain(&mock));
    let events = run.events();
    let result = events.iter().rfind(|e| e["type"] == "result").unwrap();
    assert_eq!(result["subtype"], "success", "{result}");
    assert_eq!(result["terminal_reason"], "completed", "{result}");
    assert_eq!(result["result"], "", "{result}");
    let capped = events
        .iter()
        .find(|e| e["type"] == "system" && e["subtype"] == "informational")
        .unwrap_or_else(|| panic!("no informational line: {}", run.explain(&mock)));
    assert!(
        capped["content"].as_str().unwrap().contains("blocked the turn from ending 3 consecutive times"),
        "{capped}"
    );
    assert!(
        events.iter().any(|e| e["subtype"] == "notification" && e["key"] == "stop-hook-block-cap"),
        "{}",
        run.explain(&mock)
    );
}

/// With `[hooks] transport = "http"`, Claude Code posts its frequent hooks
/// (UserPromptSubmit, PostToolUse) to the daemon itself, no
/// process started, and reads the daemon's answer as the hook's output:
/// they are recorded, a person's question reaches the model as hook
/// context, and the Stop gate, still a `gadfly hook` command, judges the
/// stop.
#[test]
fn http_hooks_record_tool_calls_and_deliver_a_question_while_the_gate_stays_a_command() {
    let Some(bin) = claude_bin("http_hooks_record_tool_calls_and_deliver_a_question_while_the_gate_stays_a_command")
    else {
        return;
    };
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let home = tempfile::tempdir().unwrap();
    let question = "Which scenario is slowest, and what bounds it?";
    let out = d.run(&["ask", &id, question]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    let mock = MockModel::start(vec![
        Step::shell(&write_candidate(ALL_PASS)).described("Write the candidate"),
        Step::shell("true").described("Check"),
        Step::text("Every scenario passes. Done."),
    ]);
    let token = d.api_get(&format!("/campaigns/{id}/hook-token"))["token"].as_str().unwrap().to_string();
    let http = gadfly::agent::attach::HttpHooks { url: d.url.clone() };
    let ours = gadfly::agent::attach::hooks_settings_with("gadfly", &id, Default::default(), Some(&http));
    assert_eq!(ours["hooks"]["PostToolUse"][0]["hooks"][0]["type"], "http");
    assert_eq!(ours["hooks"]["Stop"][0]["hooks"][0]["type"], "command");
    let mut cmd = claude(&bin, home.path(), &mock, &d, &id, &f.ws(), "Make every scenario pass");
    std::fs::write(home.path().join("gadfly-settings.json"), serde_json::to_string_pretty(&ours).unwrap()).unwrap();
    // No token in the settings: the HTTP hooks take theirs from Claude
    // Code's environment, as the command hooks do (GADFLY_URL and
    // GADFLY_TOKEN, the campaign's hook token as `gadfly attach` says).
    let settings_text = std::fs::read_to_string(home.path().join("gadfly-settings.json")).unwrap();
    assert!(!settings_text.contains(&token), "the hook token was written into the settings");
    cmd.env("GADFLY_TOKEN", &token);
    let run = run_agent(cmd, TIMEOUT);
    eprintln!("claude ran for {:.2} s\n{}", run.elapsed.as_secs_f64(), mock.describe());
    assert_success(&run, &mock);
    assert!(mock.unmatched().is_empty(), "{}", run.explain(&mock));

    let log = d.api_get(&format!("/campaigns/{id}/log"));
    let count = |kind: &str| log.as_array().unwrap().iter().filter(|e| e["kind"] == kind).count();
    assert_eq!(count("hook.post_tool_use"), 2, "both tool calls, posted by Claude Code itself: {log}");
    assert_eq!(count("hook.session_start"), 1, "{log}");
    assert_eq!(count("hook.user_prompt_submit"), 1, "{log}");
    let stops = d.api_get(&format!("/campaigns/{id}/stops"));
    assert_eq!(stops.as_array().unwrap().last().unwrap()["decision"], "allow", "{stops}");

    // The question went out in an HTTP hook's answer, once, and the model got it.
    let qs = d.api_get(&format!("/campaigns/{id}/questions"));
    let human = qs.as_array().unwrap().iter().find(|q| q["source"] == "human").expect("the question");
    assert_eq!(human["status"], "delivered", "{qs}");
    assert_eq!(human["delivered_via"], "hook_additional_context", "{qs}");
    let requests = mock.agent_requests();
    assert!(
        requests.iter().any(|r| r.to_string().contains(question)),
        "the question never reached the model: {}",
        run.explain(&mock)
    );
}

/// A daemon that reads the Claude Code transcripts under `config` and
/// judges a turn end after 1 s (not 60).
fn daemon_reading_transcripts_in(f: &Fixture, config: &Path) -> Daemon {
    let data = f.data_dir();
    let mut serve = Daemon::serve_command(&data);
    serve.env("GADFLY_CLAUDE_CONFIG_DIRS", config).env("GADFLY_ESCAPE_GRACE_S", "1");
    Daemon::start_cmd(&data, serve)
}

/// Issue 29, row 21 of THREATS.md: an agent that switches every hook off
/// (`disableAllHooks` in its user-level settings) stops without the Stop
/// gate, and no hook is left to say so. The daemon reads the session's
/// transcript on its own: the turn that ended with no Stop hook call is
/// recorded as an ungated stop and a violation.
#[test]
fn a_turn_that_ends_with_hooks_disabled_is_recorded_as_ungated() {
    let Some(bin) = claude_bin("a_turn_that_ends_with_hooks_disabled_is_recorded_as_ungated") else { return };
    let f = Fixture::new("");
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("claude-config");
    std::fs::create_dir_all(&config).unwrap();
    // The agent's own user settings switch every hook off.
    std::fs::write(config.join("settings.json"), r#"{"disableAllHooks": true}"#).unwrap();
    let d = daemon_reading_transcripts_in(&f, &config);
    let id = d.create_campaign(&f.spec());

    let mock = MockModel::start(vec![
        Step::shell(&write_candidate("a true 50 100\nb false 40 100\nc true 80 100\n"))
            .described("Write the new candidate"),
        Step::text("All scenarios pass now. Done."),
    ]);
    let run = run_agent(claude(&bin, home.path(), &mock, &d, &id, &f.ws(), "Make every scenario pass"), TIMEOUT);
    assert_success(&run, &mock);
    assert_eq!(mock.steps_served(), 2, "{}", run.explain(&mock));
    // The hooks really were off: the daemon heard nothing from them.
    let kinds = log_kinds(&d, &id);
    assert!(!kinds.iter().any(|k| k.starts_with("hook.")), "hooks fired although disabled: {kinds:?}");

    let session = run.events().into_iter().find(|e| e["type"] == "system" && e["subtype"] == "init").unwrap()
        ["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let stops = loop {
        let stops = d.api_get(&format!("/campaigns/{id}/stops"));
        if !stops.as_array().unwrap().is_empty() || std::time::Instant::now() > deadline {
            break stops;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let stops = stops.as_array().unwrap();
    assert_eq!(stops.len(), 1, "the ungated turn end was not recorded: {stops:?}\n{kinds:?}");
    assert_eq!(stops[0]["decision"], "ungated", "{stops:?}");
    assert_eq!(stops[0]["session_id"], session.as_str(), "{stops:?}");
    assert_eq!(stops[0]["claim"], "All scenarios pass now. Done.", "{stops:?}");
    assert!(stops[0]["reason"].as_str().unwrap().contains("no Stop hook call"), "{stops:?}");
    // The stop row is written just before its events: wait for them.
    for k in ["violation", "stop.ungated"] {
        common::wait_until(&format!("{k} in the log"), || log_kinds(&d, &id).iter().any(|x| x == k));
    }
    // Judged once: the next rounds of the watch add nothing.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(d.api_get(&format!("/campaigns/{id}/stops")).as_array().unwrap().len(), 1);
}

/// The same watch leaves a gated session alone: every turn end there had
/// its Stop hook call.
#[test]
fn a_gated_session_is_not_reported_by_the_transcript_watch() {
    let Some(bin) = claude_bin("a_gated_session_is_not_reported_by_the_transcript_watch") else { return };
    let f = Fixture::new("");
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("claude-config");
    std::fs::create_dir_all(&config).unwrap();
    let d = daemon_reading_transcripts_in(&f, &config);
    let id = d.create_campaign(&f.spec());
    let mock = MockModel::start(vec![
        Step::shell(&write_candidate(ALL_PASS)).described("Write the candidate"),
        Step::text("All scenarios pass now. Done."),
    ]);
    let run = run_agent(claude(&bin, home.path(), &mock, &d, &id, &f.ws(), "Make every scenario pass"), TIMEOUT);
    assert_success(&run, &mock);
    std::thread::sleep(Duration::from_secs(5));
    let stops = d.api_get(&format!("/campaigns/{id}/stops"));
    let decisions: Vec<&str> = stops.as_array().unwrap().iter().map(|s| s["decision"].as_str().unwrap()).collect();
    assert_eq!(decisions, ["allow"], "{stops}");
}

/// Issue 29: an agent that runs as its hook's user can forge the hook's
/// count of "supervisor unavailable" blocks. With the daemon down (here
/// killed, as the agent could), it writes `unavailable_blocks` fake
/// blocked stops of its own session into the spool, so its very first stop
/// goes through ungated; then it deletes the spool, so nothing is ever
/// replayed. While the daemon is down the count can only live in files the
/// agent can write; what must hold is that the daemon, once back, still
/// records that stop as ungated and a violation, from the transcript.
#[test]
fn a_forged_unavailable_count_and_a_deleted_spool_still_leave_an_ungated_stop() {
    let Some(bin) = claude_bin("a_forged_unavailable_count_and_a_deleted_spool_still_leave_an_ungated_stop") else {
        return;
    };
    let f = Fixture::new("");
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("claude-config");
    std::fs::create_dir_all(&config).unwrap();
    let spool = home.path().join("spool");
    let mut d = daemon_reading_transcripts_in(&f, &config);
    let id = d.create_campaign(&f.spec());
    let mock = MockModel::start(vec![
        Step::shell(&write_candidate("a true 50 100\nb false 40 100\nc true 80 100\n"))
            .described("Write the new candidate"),
        Step::text("All scenarios pass now. Done."),
    ]);
    // The session id the CLI will use, chosen here so the forgery can name it.
    let r: u128 = rand::random();
    let session = format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        (r >> 96) as u32,
        (r >> 80) as u16,
        (r >> 68) as u16 & 0xfff,
        ((r >> 52) as u16 & 0x3fff) | 0x8000,
        r as u64 & 0xffff_ffff_ffff
    );
    let mut cmd = claude(&bin, home.path(), &mock, &d, &id, &f.ws(), "Make every scenario pass");
    cmd.arg("--session-id").arg(&session).env("GADFLY_SPOOL_DIR", &spool).env("GADFLY_HOOK_DEADLINE_S", "1");
    d.kill();

    // The forgery: as many "blocked" stops of this session as the hook
    // allows, in the hook's own spool format.
    let gate = gadfly::campaign::GateSpec::default();
    for n in 0..gate.unavailable_blocks {
        let forged = gadfly::spool::SpooledCall {
            campaign: id.clone(),
            agent: "claude-code".into(),
            event: "stop".into(),
            call_id: format!("forged{n}"),
            payload: serde_json::json!({"session_id": session, "hook_event_name": "Stop"}),
            spooled_at: chrono::Utc::now().to_rfc3339(),
            outcome: "blocked".into(),
            why: "connection refused".into(),
        };
        gadfly::spool::write(&spool, &forged).unwrap();
    }
    assert_eq!(gadfly::spool::blocked_stops(&spool, &id, Some(&session)), gate.unavailable_blocks as usize);

    let run = run_agent(cmd, TIMEOUT);
    eprintln!("claude ran for {:.2} s\n{}", run.elapsed.as_secs_f64(), mock.describe());
    assert_success(&run, &mock);
    let init = run.events().into_iter().find(|e| e["type"] == "system" && e["subtype"] == "init").unwrap();
    assert_eq!(init["session_id"], session.as_str(), "{}", run.explain(&mock));
    // The first stop went through: no block reached the model, no request
    // came after the stop, and the hook spooled it as let through ungated.
    assert_eq!(mock.steps_served(), 2, "{}", run.explain(&mock));
    assert!(mock.unmatched().is_empty(), "{}", run.explain(&mock));
    for r in mock.agent_requests() {
        let text = r.to_string();
        assert!(!text.contains("Stop hook feedback") && !text.contains("supervisor unavailable"), "{text}");
    }
    let (calls, _) = gadfly::spool::pending(&spool);
    let stops: Vec<&gadfly::spool::SpooledCall> =
        calls.iter().map(|(_, c)| c).filter(|c| c.event == "stop" && !c.call_id.starts_with("forged")).collect();
    assert_eq!(stops.len(), 1, "{calls:?}");
    assert_eq!(stops[0].outcome, "allowed", "{calls:?}");
    assert!(stops[0].why.contains("Connection refused"), "{calls:?}");
    assert_eq!(stops[0].payload["session_id"], session.as_str(), "{calls:?}");

    // The agent hides its tracks.
    for e in std::fs::read_dir(&spool).unwrap().flatten() {
        std::fs::remove_file(e.path()).unwrap();
    }
    assert!(gadfly::spool::pending(&spool).0.is_empty());

    let d = daemon_reading_transcripts_in(&f, &config);
    let ungated = || {
        let stops = d.api_get(&format!("/campaigns/{id}/stops"));
        stops.as_array().unwrap().iter().any(|s| s["decision"] == "ungated" && s["session_id"] == session.as_str())
    };
    let violation = || {
        let log = d.api_get(&format!("/campaigns/{id}/log"));
        log.as_array().unwrap().iter().any(|e| {
            e["kind"] == "violation"
                && e["session_id"] == session.as_str()
                && e["payload"]["kind"] == "turn_ended_ungated"
                && e["payload"]["source"] == "transcript"
        })
    };
    common::wait_until("the ungated stop and its violation, from the transcript", || ungated() && violation());
    let stops = d.api_get(&format!("/campaigns/{id}/stops"));
    let stops = stops.as_array().unwrap();
    assert_eq!(stops.len(), 1, "{stops:?}");
    assert_eq!(stops[0]["claim"], "All scenarios pass now. Done.", "{stops:?}");
    assert!(stops[0]["reason"].as_str().unwrap().contains("no Stop hook call"), "{stops:?}");
    // Judged once: the next rounds of the watch add nothing.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(d.api_get(&format!("/campaigns/{id}/stops")).as_array().unwrap().len(), 1);
}

/// An attached session reports what its transcript holds: each assistant
/// message's tokens (counted once, though the transcript writes a message
/// once per content block) and the session's cost from the `cost-state`
/// line the CLI writes when it ends, the CLI's own price (gadfly prices
/// nothing): the same figure as its stream's `total_cost_usd`.
#[test]
fn an_attached_sessions_transcript_reports_its_tokens_and_cost() {
    let Some(bin) = claude_bin("an_attached_sessions_transcript_reports_its_tokens_and_cost") else { return };
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let home = tempfile::tempdir().unwrap();
    let mock = MockModel::start(vec![
        Step::say_then_shell("Writing the fix now.", &write_candidate(ALL_PASS)).described("Write the candidate"),
        Step::text("All scenarios pass. Done."),
    ]);
    let run = run_agent(claude(&bin, home.path(), &mock, &d, &id, &f.ws(), "Make every scenario pass"), TIMEOUT);
    assert_success(&run, &mock);
    let result = run.events().into_iter().rfind(|e| e["type"] == "result").unwrap();
    let cost = result["total_cost_usd"].as_f64().expect("the CLI prices its session");
    // Two requests of 100 input and 20 output tokens (tests/mock_model).
    let (input, output) = (2 * 100, 2 * 20);
    let spend = || d.api_get(&format!("/campaigns/{id}/spend"));
    common::wait_until("the transcript's usage and cost", || {
        let c = &spend()["campaign"];
        c["tokens"].as_u64() == Some(input + output) && c["cost_usd"].as_f64().is_some()
    });
    let sp = spend();
    let c = &sp["campaign"];
    assert_eq!((c["input_tokens"].as_u64(), c["output_tokens"].as_u64()), (Some(input), Some(output)), "{sp}");
    assert_eq!(c["cost_usd"].as_f64(), Some(cost), "the cost-state line's figure is the stream's: {sp}");
    let s = &sp["sessions"][0];
    assert_eq!(s["sources"], serde_json::json!(["claude-code-transcript"]), "{sp}");
    assert_eq!(s["run_id"], Value::Null, "an attached session is no run of gadfly's");
    assert!(sp["runs"].as_array().unwrap().is_empty(), "{sp}");
    // The first message has text and a tool call: two transcript lines, one count.
    let log = d.api_get(&format!("/campaigns/{id}/log?limit=10000"));
    let first: Vec<&Value> = log
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "agent.usage" && e["payload"]["message_id"] == "msg_mock_0001")
        .collect();
    assert_eq!(first.len(), 2, "{}", run.explain(&mock));
}
