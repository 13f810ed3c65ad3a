//! The real Codex CLI, offline against the scripted mock model (OpenAI
//! Responses API), supervised two ways:
//! - from outside, the way the `command`/spawn adapters will: run a turn,
//!   evaluate with `gadfly eval`, and `codex exec resume THREAD` with the
//!   failing scenarios and a question;
//! - from inside, through Codex's Claude-compatible Stop hook running
//!   `gadfly hook claude-code stop`.
//!
//! The CLI comes from `GADFLY_CODEX_BIN`, else from the cache that
//! `.ci/install-agents.sh` fills; without it these tests print `SKIPPED` and
//! pass.

mod common;
mod mock_model;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{Daemon, Fixture, ALL_PASS};
use mock_model::{
    agent_or_skip, last_user_text, messages_containing, path_with_gadfly, run_agent, AgentRun, MockModel, Step,
};
use serde_json::Value;

const TIMEOUT: Duration = Duration::from_secs(120);

fn codex_bin(test: &str) -> Option<PathBuf> {
    agent_or_skip("GADFLY_CODEX_BIN", "codex", test)
}

/// A CODEX_HOME whose only provider is the mock, with nothing that phones home.
fn codex_home(dir: &Path, mock: &MockModel) {
    std::fs::create_dir_all(dir).unwrap();
    let config = format!(
        r#"model = "gpt-5.5"
model_provider = "mock"
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false

[model_providers.mock]
name = "mock"
base_url = "{}/v1"
env_key = "MOCK_API_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0

[analytics]
enabled = false

[features]
plugins = false
"#,
        mock.url
    );
    std::fs::write(dir.join("config.toml"), config).unwrap();
}

/// gadfly's Claude-format hooks (what `gadfly attach` writes for Claude
/// Code) as `$CODEX_HOME/hooks.json`; they run only when trusted, here with
/// `--dangerously-bypass-hook-trust`.
fn write_hooks(codex_home: &Path, id: &str) {
    let hooks = gadfly::agent::attach::hooks_settings("gadfly", id, Default::default());
    std::fs::write(codex_home.join("hooks.json"), serde_json::to_string_pretty(&hooks).unwrap()).unwrap();
}

/// `codex exec --json ...` in the workspace; `args` follow the common flags
/// (a prompt, or `resume THREAD MESSAGE`).
fn codex(bin: &Path, home: &Path, d: &Daemon, ws: &Path, extra: &[&str], args: &[&str]) -> Command {
    let mut cmd = Command::new(bin);
    cmd.args(["exec", "--json", "--skip-git-repo-check", "--strict-config", "--disable", "plugins"])
        .args(extra)
        .args(args)
        .current_dir(ws)
        .env_clear()
        .env("PATH", path_with_gadfly())
        .env("HOME", home)
        .env("LANG", "C.UTF-8")
        .env("CODEX_HOME", home.join("codex-home"))
        .env("MOCK_API_KEY", "dummy")
        .env("GADFLY_URL", &d.url)
        .env("GADFLY_TOKEN", &d.token);
    cmd
}

fn write_candidate(text: &str) -> String {
    format!("printf '{}' > candidate.txt", text.replace('\n', "\\n"))
}

/// The run ended its turn normally: rc 0, `turn.completed`, no `turn.failed`.
fn assert_turn_completed(run: &AgentRun, mock: &MockModel) {
    assert!(!run.timed_out && run.code() == Some(0), "codex failed: {}", run.explain(mock));
    let events = run.events();
    assert!(events.iter().any(|e| e["type"] == "turn.completed"), "no turn.completed: {}", run.explain(mock));
    assert!(!events.iter().any(|e| e["type"] == "turn.failed"), "{}", run.explain(mock));
}

fn thread_id(run: &AgentRun) -> String {
    let started = run.events().into_iter().find(|e| e["type"] == "thread.started");
    started.and_then(|e| e["thread_id"].as_str().map(str::to_string)).expect("thread.started with a thread_id")
}

fn agent_messages(run: &AgentRun) -> Vec<String> {
    run.events()
        .iter()
        .filter(|e| e["type"] == "item.completed" && e["item"]["type"] == "agent_message")
        .map(|e| e["item"]["text"].as_str().unwrap_or("").to_string())
        .collect()
}

fn eval(d: &Daemon, id: &str) -> Value {
    let out = d.run(&["eval", id, "--json"]);
    // 0: the predicate holds, 1: it fails; either way a verdict.
    assert!(matches!(out.status.code(), Some(0 | 1)), "gadfly eval: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The items of a Responses request's `input`.
fn input(body: &Value) -> Vec<Value> {
    body["input"].as_array().cloned().unwrap_or_default()
}

#[test]
fn a_failing_turn_is_resumed_with_the_failing_scenarios_and_a_question() {
    let Some(bin) = codex_bin("a_failing_turn_is_resumed_with_the_failing_scenarios_and_a_question") else { return };
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let home = tempfile::tempdir().unwrap();
    let failing = write_candidate("a true 50 100\nb false 40 100\nc true 80 100\n");
    let mock = MockModel::start(vec![
        Step::shell(&failing),
        Step::text("All scenarios pass now. Done."),
        Step::shell(&write_candidate(ALL_PASS)).when_last_user_contains("gadfly: the stop predicate fails"),
        Step::text("Fixed b. Done."),
    ]);
    codex_home(&home.path().join("codex-home"), &mock);

    // Turn 1: the agent writes a candidate where b is wrong and claims success.
    let run1 = run_agent(codex(&bin, home.path(), &d, &f.ws(), &[], &["Make every scenario pass"]), TIMEOUT);
    eprintln!("codex exec ran for {:.2} s\n{}", run1.elapsed.as_secs_f64(), mock.describe());
    assert_turn_completed(&run1, &mock);
    assert_eq!(agent_messages(&run1), ["All scenarios pass now. Done."], "{}", run1.explain(&mock));
    let executed =
        run1.events().into_iter().find(|e| e["item"]["type"] == "command_execution" && e["type"] == "item.completed");
    let executed = executed.unwrap_or_else(|| panic!("no command_execution item: {}", run1.explain(&mock)));
    assert_eq!(executed["item"]["exit_code"], 0, "{executed}");
    assert_eq!(mock.steps_served(), 2);
    let thread = thread_id(&run1);

    // The supervisor judges the claim: b fails.
    let verdict = eval(&d, &id);
    assert_eq!(verdict["holds"], false, "{verdict}");
    let failing_rows: Vec<String> = verdict["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["passes"] == false)
        .map(|s| {
            let reasons: Vec<&str> = s["reasons"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
            format!("{}: {}", s["scenario"].as_str().unwrap(), reasons.join("; "))
        })
        .collect();
    assert_eq!(failing_rows.len(), 1, "{verdict}");
    assert!(failing_rows[0].starts_with("b: "), "{failing_rows:?}");
    let message = format!(
        "gadfly: the stop predicate fails on {} of 3 scenarios.\n{}\nQuestion: what does a run of scenario b alone print, and which line of your change produces it?",
        failing_rows.len(),
        failing_rows.join("\n")
    );

    // Turn 2 on the same thread, carrying the verdict and the question.
    let before = mock.agent_requests().len();
    let run2 = run_agent(codex(&bin, home.path(), &d, &f.ws(), &[], &["resume", &thread, &message]), TIMEOUT);
    eprintln!("codex exec resume ran for {:.2} s\n{}", run2.elapsed.as_secs_f64(), mock.describe());
    assert_turn_completed(&run2, &mock);
    assert_eq!(thread_id(&run2), thread, "resume keeps the thread");
    assert_eq!(agent_messages(&run2), ["Fixed b. Done."], "{}", run2.explain(&mock));
    assert!(mock.unmatched().is_empty(), "{}", run2.explain(&mock));

    let requests = mock.agent_requests();
    let first = &requests[before];
    assert_eq!(last_user_text(first), message, "the resume message is the model's latest user message");
    // The same conversation: the earlier prompt, tool call, its output and claim come first.
    let items = input(first);
    let text = Value::Array(items.clone()).to_string();
    assert!(text.contains("Make every scenario pass"), "{text}");
    let call =
        items.iter().find(|i| i["type"] == "function_call").unwrap_or_else(|| panic!("no function_call in {text}"));
    assert_eq!(call["name"], "exec_command");
    let args: Value = serde_json::from_str(call["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(args["cmd"], failing.as_str());
    assert!(items.iter().any(|i| i["type"] == "function_call_output" && i["call_id"] == call["call_id"]), "{text}");
    assert!(text.contains("All scenarios pass now. Done."), "{text}");
    assert_eq!(first["prompt_cache_key"], thread.as_str(), "the same thread");

    let verdict = eval(&d, &id);
    assert_eq!(verdict["holds"], true, "{verdict}");
}

/// Codex runs Claude-format hooks from `$CODEX_HOME/hooks.json` when trusted
/// (`--dangerously-bypass-hook-trust` for this invocation); its Stop payload
/// is close enough to Claude Code's that `gadfly hook claude-code stop`
/// gates it, and the block reason reaches the model as a `<hook_prompt>`.
#[test]
fn the_stop_hook_blocks_codex_while_a_scenario_fails() {
    let Some(bin) = codex_bin("the_stop_hook_blocks_codex_while_a_scenario_fails") else { return };
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let home = tempfile::tempdir().unwrap();
    // b is wrong and c is slow: the reason then holds a `<` (0.83x < 1.10x).
    let mock = MockModel::start(vec![
        Step::shell(&write_candidate("a true 50 100\nb false 40 100\nc true 120 100\n")),
        Step::text("All scenarios pass now. Done."),
        Step::shell(&write_candidate(ALL_PASS)).when_last_user_contains("gadfly: you may not stop yet"),
        Step::text("Fixed b. Done."),
    ]);
    let codex_dir = home.path().join("codex-home");
    codex_home(&codex_dir, &mock);
    write_hooks(&codex_dir, &id);

    let run = run_agent(
        codex(&bin, home.path(), &d, &f.ws(), &["--dangerously-bypass-hook-trust"], &["Make every scenario pass"]),
        TIMEOUT,
    );
    eprintln!("codex exec with hooks ran for {:.2} s\n{}", run.elapsed.as_secs_f64(), mock.describe());
    assert_turn_completed(&run, &mock);
    assert!(mock.unmatched().is_empty(), "{}", run.explain(&mock));
    assert_eq!(mock.steps_served(), 4, "{}", run.explain(&mock));
    // One turn: the blocked claim and the final answer are both in it.
    assert_eq!(run.events().iter().filter(|e| e["type"] == "turn.completed").count(), 1);
    assert_eq!(agent_messages(&run), ["All scenarios pass now. Done.", "Fixed b. Done."], "{}", run.explain(&mock));

    // The block reason reached the model as a user message in a <hook_prompt>.
    let requests = mock.agent_requests();
    let feedback = requests
        .iter()
        .map(last_user_text)
        .find(|t| t.contains("gadfly: you may not stop yet"))
        .unwrap_or_else(|| panic!("the block reason never reached the model: {}", run.explain(&mock)));
    assert!(feedback.starts_with("<hook_prompt") && feedback.trim_end().ends_with("</hook_prompt>"), "{feedback}");
    let row = feedback.lines().find(|l| l.starts_with("b ")).unwrap_or_else(|| panic!("no row for b:\n{feedback}"));
    assert!(row.contains("NO"), "{row}");
    assert!(feedback.contains("Question"), "{feedback}");
    // Codex escapes the reason as XML text inside <hook_prompt>.
    let row = feedback.lines().find(|l| l.starts_with("c ")).unwrap_or_else(|| panic!("no row for c:\n{feedback}"));
    assert!(row.contains("speedup 0.83x &lt; 1.10x"), "{row}");

    let stops = d.api_get(&format!("/campaigns/{id}/stops"));
    let stops = stops.as_array().unwrap();
    assert_eq!(stops.len(), 2, "{stops:?}");
    assert_eq!(stops[0]["decision"], "block");
    assert_eq!(stops[0]["claim"], "All scenarios pass now. Done.");
    assert_eq!(stops[0]["session_id"], thread_id(&run).as_str(), "Codex's session id is the thread id");
    assert_eq!(stops[1]["decision"], "allow");
    assert_eq!(stops[1]["claim"], "Fixed b. Done.");

    let log = d.api_get(&format!("/campaigns/{id}/log"));
    let kinds: Vec<&str> = log.as_array().unwrap().iter().filter_map(|e| e["kind"].as_str()).collect();
    for k in ["hook.session_start", "hook.user_prompt_submit", "hook.post_tool_use"] {
        assert!(kinds.contains(&k), "{k} not in the log: {kinds:?}");
    }
    assert_eq!(eval(&d, &id)["holds"], true);
}

/// A question a person queues with `gadfly ask` while Codex is busy in a
/// command reaches the model in a later request, once, through the hooks
/// (PostToolUse context or a Stop block reason, whichever gadfly uses).
#[test]
fn a_human_question_queued_mid_run_reaches_the_model() {
    let Some(bin) = codex_bin("a_human_question_queued_mid_run_reaches_the_model") else { return };
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let home = tempfile::tempdir().unwrap();
    let go = home.path().join("go");
    let question = "Does the reference win in cycles or only in wall-clock time?";
    let wait = format!(
        "{} && for i in $(seq 1 600); do [ -f '{}' ] && break; sleep 0.1; done",
        write_candidate(ALL_PASS),
        go.display()
    );
    let mock = MockModel::start(vec![
        Step::shell(&wait),
        Step::text("Measured with perf: cycles too, not only wall-clock time. Done.")
            .when_body_contains(question)
            .otherwise_text("Every scenario passes. Done."),
    ]);
    let codex_dir = home.path().join("codex-home");
    codex_home(&codex_dir, &mock);
    write_hooks(&codex_dir, &id);
    let cmd =
        codex(&bin, home.path(), &d, &f.ws(), &["--dangerously-bypass-hook-trust"], &["Make every scenario pass"]);
    let agent = std::thread::spawn(move || run_agent(cmd, TIMEOUT));

    assert!(mock.wait_for_steps(1, TIMEOUT), "the agent never made its tool call: {}", mock.describe());
    let asked_after = mock.agent_requests().len();
    let out = d.run(&["ask", &id, question]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    std::fs::write(&go, "").unwrap();
    let run = agent.join().unwrap();
    eprintln!("codex exec ran for {:.2} s\n{}", run.elapsed.as_secs_f64(), mock.describe());
    assert_turn_completed(&run, &mock);
    assert!(mock.unmatched().is_empty(), "{}", run.explain(&mock));

    let requests = mock.agent_requests();
    assert!(requests[..asked_after].iter().all(|r| !r.to_string().contains(question)));
    let first = requests.iter().position(|r| r.to_string().contains(question)).unwrap_or_else(|| {
        panic!(
            "the question never reached the model (questions: {}): {}",
            d.api_get(&format!("/campaigns/{id}/questions")),
            run.explain(&mock)
        )
    });
    let found = messages_containing(&requests[first], question);
    let (role, text) = found.last().unwrap();
    eprintln!("the question reached the model in request #{first}, in a {role} message: {text:?}");
    // A Stop block reason arrives as a user `<hook_prompt>`; PostToolUse
    // `additionalContext` as a `developer` message that Codex 0.171 places
    // between the `function_call` and its `function_call_output`.
    match role.as_str() {
        "user" => assert!(text.starts_with("<hook_prompt"), "{text}"),
        "developer" => {
            let input = requests[first]["input"].as_array().unwrap();
            let at = input.iter().rposition(|i| i["role"] == "developer").unwrap();
            let (call, output) = (&input[at - 1], &input[at + 1]);
            assert_eq!(call["type"], "function_call", "{call}");
            assert_eq!(output["type"], "function_call_output", "{output}");
            assert_eq!(call["call_id"], output["call_id"]);
        }
        other => panic!("the question came in a {other} message: {text}"),
    }
    assert!(text.contains("from the person supervising"), "{text}");
    assert_eq!(mock.steps_served(), 2, "the model answered the question: {}", run.explain(&mock));
    for r in &requests[first..] {
        assert_eq!(messages_containing(r, question).len(), 1, "delivered once: {}", run.explain(&mock));
    }

    let stops = d.api_get(&format!("/campaigns/{id}/stops"));
    assert_eq!(stops.as_array().unwrap().last().unwrap()["decision"], "allow", "{stops}");
    let qs = d.api_get(&format!("/campaigns/{id}/questions"));
    let human: Vec<&Value> = qs.as_array().unwrap().iter().filter(|q| q["source"] == "human").collect();
    assert_eq!(human.len(), 1, "{qs}");
    assert_eq!(human[0]["status"], "delivered", "{qs}");
}
