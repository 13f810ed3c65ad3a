//! Spawn mode with the real Codex CLI: `gadfly run ID --agent codex` makes
//! the daemon run `codex exec --json --skip-git-repo-check [args] PROMPT` in
//! the workspace, against the scripted mock model (OpenAI Responses API),
//! judge each turn end, and continue the same thread with `codex exec ...
//! resume THREAD MESSAGE` while the predicate fails: a wrong claim is sent
//! back, a person's question reaches the model, a killed CLI is resumed on
//! the same thread. The assertions are on what the mock model received, on
//! the daemon's records and on `gadfly run`'s exit.
//!
//! The CLI comes from `GADFLY_CODEX_BIN`, else from the cache that
//! `.ci/install-agents.sh` fills; without it these tests print `SKIPPED` and
//! pass (with `GADFLY_REQUIRE_AGENTS=1` they fail).

mod common;
mod mock_model;

use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use common::{Daemon, Fixture, ALL_PASS};
use mock_model::{agent_or_skip, last_user_text, messages_containing, MockModel, Step};
use serde_json::Value;

/// Generous: a scripted run takes a few seconds, a loaded CI machine more.
const TIMEOUT: Duration = Duration::from_secs(180);
const WRONG: &str = "a true 50 100\nb false 40 100\nc true 80 100\n";

fn codex_bin(test: &str) -> Option<PathBuf> {
    agent_or_skip("GADFLY_CODEX_BIN", "codex", test)
}

fn write_candidate(text: &str) -> String {
    format!("printf '{}' > candidate.txt", text.replace('\n', "\\n"))
}

/// A shell command that touches `ready`, then waits (at most a minute) for `go`.
fn wait_for_file(ready: &Path, go: &Path) -> String {
    format!(
        "touch '{}' && for i in $(seq 1 600); do [ -f '{}' ] && break; sleep 0.1; done",
        ready.display(),
        go.display()
    )
}

fn toml_str(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

/// A CODEX_HOME whose only provider is the mock, with nothing that phones home.
fn write_codex_home(dir: &Path, mock: &MockModel) {
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

/// How the campaign tells gadfly where CODEX_HOME is.
#[derive(Clone, Copy, PartialEq)]
enum HomeVia {
    /// `[agent] codex_home = "..."`
    Field,
    /// `[agent] env = { CODEX_HOME = "..." }`
    Env,
}

/// A fixture campaign whose `[agent]` section runs the real CLI against the
/// mock, and a daemon with a clean environment (its own HOME) to spawn it.
struct Setup {
    f: Fixture,
    d: Daemon,
    id: String,
    home: tempfile::TempDir,
}

impl Setup {
    fn new(bin: &Path, mock: &MockModel, via: HomeVia, extra_agent: &str) -> Setup {
        let home = tempfile::tempdir().unwrap();
        let codex_home = home.path().join("codex-home");
        write_codex_home(&codex_home, mock);
        let mut env = vec![("HOME", home.path().display().to_string()), ("MOCK_API_KEY", "dummy".into())];
        let mut field = String::new();
        match via {
            HomeVia::Env => env.push(("CODEX_HOME", codex_home.display().to_string())),
            HomeVia::Field => field = format!("codex_home = {}\n", toml_str(&codex_home.display().to_string())),
        }
        let env: Vec<String> = env.iter().map(|(k, v)| format!("{k} = {}", toml_str(v))).collect();
        let agent = format!(
            "[agent]\nbin = {}\nargs = [\"--strict-config\", \"--disable\", \"plugins\"]\nenv = {{ {} }}\n{field}{extra_agent}\n",
            toml_str(&bin.display().to_string()),
            env.join(", ")
        );
        let f = Fixture::new(&agent);
        let data = f.data_dir();
        // The daemon passes its environment on to the agent: keep it clean,
        // so nothing of the machine running the tests (API keys, a CODEX_HOME
        // of its own) reaches the CLI.
        let mut cmd = common::gadfly();
        cmd.args(["serve", "--listen", "127.0.0.1:0", "--data-dir"]).arg(&data);
        if let Some(url) = common::postgres_for(&data) {
            cmd.args(["--database-url", &url]);
        }
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", home.path())
            .env("LANG", "C.UTF-8")
            .env("RUST_LOG", "info,sqlx=warn");
        let d = Daemon::start_cmd(&data, cmd);
        let id = d.create_campaign(&f.spec());
        Setup { f, d, id, home }
    }

    /// `gadfly run ID --agent codex`, followed in the background.
    fn start_run(&self) -> RunProc {
        let out = self.home.path().join(format!("run-{}.out", self.id));
        let err = self.home.path().join(format!("run-{}.err", self.id));
        let child = self
            .d
            .cmd()
            .args(["run", &self.id, "--agent", "codex"])
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(std::fs::File::create(&err).unwrap())
            .spawn()
            .unwrap();
        RunProc { child, out, err, started: Instant::now() }
    }

    fn runs(&self) -> Value {
        self.d.api_get(&format!("/campaigns/{}/runs", self.id))
    }

    fn log(&self) -> Vec<Value> {
        self.d.api_get(&format!("/campaigns/{}/log?limit=10000", self.id)).as_array().unwrap().clone()
    }

    fn stops(&self) -> Vec<Value> {
        self.d.api_get(&format!("/campaigns/{}/stops", self.id)).as_array().unwrap().clone()
    }

    fn questions(&self) -> Vec<Value> {
        self.d.api_get(&format!("/campaigns/{}/questions", self.id)).as_array().unwrap().clone()
    }

    /// What the mock saw, the daemon's agent events and its log, for failures.
    fn explain(&self, mock: &MockModel) -> String {
        let mut out = format!("--- mock ---\n{}", mock.describe());
        out.push_str("--- events ---\n");
        for e in self.log() {
            let p = e["payload"].to_string();
            let p: String = p.chars().take(300).collect();
            out.push_str(&format!("{} {} {}\n", e["kind"].as_str().unwrap_or(""), e["session_id"], p));
        }
        for entry in std::fs::read_dir(self.f.dir.path()).unwrap().flatten() {
            let name = entry.file_name().to_string_lossy().to_string();
            if name.starts_with("daemon-") {
                let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
                let lines: Vec<&str> = text.lines().collect();
                out.push_str(&format!(
                    "--- {name} (tail) ---\n{}\n",
                    lines[lines.len().saturating_sub(30)..].join("\n")
                ));
            }
        }
        out
    }
}

impl Drop for Setup {
    /// The daemon is killed (SIGKILL) when `d` drops: end the agent's
    /// process groups first, which would outlive it.
    fn drop(&mut self) {
        kill_agents(self.d.child.id());
    }
}

/// A `gadfly run` being followed.
struct RunProc {
    child: Child,
    out: PathBuf,
    err: PathBuf,
    started: Instant,
}

struct RunEnd {
    status: Option<ExitStatus>,
    stdout: String,
    stderr: String,
    elapsed: Duration,
}

impl RunProc {
    /// Waits for `gadfly run` to exit (killed at `timeout`).
    fn finish(mut self, timeout: Duration) -> RunEnd {
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break Some(s);
            }
            if self.started.elapsed() > timeout {
                let _ = self.child.kill();
                let _ = self.child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        RunEnd {
            status,
            stdout: std::fs::read_to_string(&self.out).unwrap_or_default(),
            stderr: std::fs::read_to_string(&self.err).unwrap_or_default(),
            elapsed: self.started.elapsed(),
        }
    }
}

impl RunEnd {
    fn assert_completed(&self, s: &Setup, mock: &MockModel) {
        let ok = self.status.is_some_and(|st| st.success());
        assert!(
            ok && self.stdout.contains("ended: the predicate holds"),
            "gadfly run: {:?} after {:.1} s\n--- stdout ---\n{}\n--- stderr ---\n{}\n{}",
            self.status,
            self.elapsed.as_secs_f64(),
            self.stdout,
            self.stderr,
            s.explain(mock)
        );
        let runs = s.runs();
        assert_eq!(runs[0]["status"], "ended", "{runs}");
        assert_eq!(runs[0]["outcome"], "completed", "{runs}");
        assert_eq!(runs[0]["agent"], "codex", "{runs}");
    }
}

/// Polls `pred` until it holds or `timeout` passes; false on timeout.
fn wait_for(timeout: Duration, pred: impl Fn() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if pred() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    pred()
}

/// The thread ids the daemon recorded from `thread.started` lines.
fn threads(s: &Setup) -> Vec<String> {
    s.log()
        .iter()
        .filter(|e| e["kind"] == "agent.session")
        .filter_map(|e| e["payload"]["session_id"].as_str().map(str::to_string))
        .collect()
}

/// The items of a Responses request's `input`.
fn input(body: &Value) -> Vec<Value> {
    body["input"].as_array().cloned().unwrap_or_default()
}

/// The `exec_command` calls in a request's history, as their `cmd`.
fn shell_calls(body: &Value) -> Vec<String> {
    input(body)
        .iter()
        .filter(|i| i["type"] == "function_call" && i["name"] == "exec_command")
        .filter_map(|i| serde_json::from_str::<Value>(i["arguments"].as_str()?).ok())
        .filter_map(|a| a["cmd"].as_str().map(str::to_string))
        .collect()
}

/// Processes below `root` (children, grandchildren...) as (pid, exe path).
fn descendants(root: u32) -> Vec<(u32, PathBuf)> {
    let mut parent = std::collections::HashMap::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        // "pid (comm) state ppid ...": comm may hold spaces and parentheses.
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else { continue };
        if let Some(ppid) = rest.split_whitespace().nth(1).and_then(|p| p.parse::<u32>().ok()) {
            parent.insert(pid, ppid);
        }
    }
    let mut out = Vec::new();
    for &pid in parent.keys() {
        let mut p = pid;
        while let Some(&pp) = parent.get(&p) {
            if pp == root {
                let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap_or_default();
                out.push((pid, exe));
                break;
            }
            if pp <= 1 {
                break;
            }
            p = pp;
        }
    }
    out
}

/// SIGKILLs the process groups of everything below `root` (the agents the
/// daemon spawned run in process groups of their own).
fn kill_agents(root: u32) {
    let own = nix::unistd::getpgrp();
    for (pid, _) in descendants(root) {
        if let Ok(pg) = nix::unistd::getpgid(Some(nix::unistd::Pid::from_raw(pid as i32))) {
            if pg != own {
                let _ = nix::sys::signal::killpg(pg, nix::sys::signal::Signal::SIGKILL);
            }
        }
    }
}

/// The pid of the native Codex process below the daemon (npm's `codex` is a
/// Node.js launcher that runs the native `codex` binary as its child, or
/// becomes it where Node.js can execve).
fn codex_pid(s: &Setup) -> Option<u32> {
    descendants(s.d.child.id())
        .into_iter()
        .find(|(_, exe)| exe.file_name().is_some_and(|n| n == "codex"))
        .map(|(pid, _)| pid)
}

#[test]
fn a_spawned_codex_is_resumed_with_the_failing_scenario_then_the_run_completes() {
    let Some(bin) = codex_bin("a_spawned_codex_is_resumed_with_the_failing_scenario_then_the_run_completes") else {
        return;
    };
    let mock = MockModel::start(vec![
        Step::shell(&write_candidate(WRONG)),
        Step::text("All scenarios pass now. Done."),
        Step::shell(&write_candidate(ALL_PASS)).when_last_user_contains("gadfly: you may not stop yet"),
        Step::text("Fixed b. Done."),
    ]);
    let s = Setup::new(&bin, &mock, HomeVia::Field, "");
    let end = s.start_run().finish(TIMEOUT);
    eprintln!("gadfly run (codex) took {:.2} s\n{}", end.elapsed.as_secs_f64(), mock.describe());
    end.assert_completed(&s, &mock);
    assert_eq!(mock.steps_served(), 4, "every step was used: {}", s.explain(&mock));
    assert!(mock.unmatched().is_empty(), "{}", s.explain(&mock));

    // The first turn opens with gadfly's first prompt, built from the goal.
    let requests = mock.agent_requests();
    let opening = last_user_text(&requests[0]);
    assert!(opening.contains("every scenario faster") && opening.contains("supervised by gadfly"), "{opening}");
    // Codex has no hook or stdin here: the campaign's start question, queued
    // before the run, goes with the first prompt.
    let qs = s.questions();
    let start = qs.iter().find(|q| q["moment"] == "start").unwrap_or_else(|| panic!("no start question: {qs:?}"));
    assert_eq!(start["status"], "delivered", "{qs:?}");
    assert_eq!(start["delivered_via"], "agent_prompt", "{qs:?}");
    assert!(opening.contains(start["text"].as_str().unwrap()), "{opening}");
    assert!(opening.starts_with("every scenario faster"), "{opening}");

    // The second turn is the block reason: the failing scenario and a question.
    let at = requests
        .iter()
        .position(|r| last_user_text(r).contains("gadfly: you may not stop yet"))
        .unwrap_or_else(|| panic!("the block reason never reached the model: {}", s.explain(&mock)));
    let feedback = last_user_text(&requests[at]);
    assert!(feedback.starts_with("gadfly: you may not stop yet"), "the resume message is the reason: {feedback}");
    let row = feedback
        .lines()
        .find(|l| l.starts_with("b "))
        .unwrap_or_else(|| panic!("no row for scenario b in the feedback:\n{feedback}"));
    assert!(row.contains("NO"), "{row}");
    assert!(!feedback.lines().any(|l| l.starts_with("a ") || l.starts_with("c ")), "{feedback}");
    assert!(feedback.contains("Question"), "a question is carried:\n{feedback}");

    // On the same thread: the first turn's prompt, call and claim come first.
    let thread = threads(&s);
    assert!(!thread.is_empty(), "no agent.session event: {}", s.explain(&mock));
    assert!(thread.iter().all(|t| t == &thread[0]), "one thread: {thread:?}");
    assert_eq!(requests[at]["prompt_cache_key"], thread[0].as_str(), "the same thread");
    assert_eq!(shell_calls(&requests[at]), [write_candidate(WRONG)]);
    let history = Value::Array(input(&requests[at])).to_string();
    assert!(history.contains("every scenario faster") && history.contains("All scenarios pass now. Done."));

    let stops = s.stops();
    let decisions: Vec<&str> = stops.iter().map(|x| x["decision"].as_str().unwrap()).collect();
    assert_eq!(decisions, ["block", "allow"], "{}", s.explain(&mock));
    assert_eq!(stops[0]["claim"], "All scenarios pass now. Done.");
    assert_eq!(stops[1]["claim"], "Fixed b. Done.");
    assert_eq!(stops[1]["stop_hook_active"], true, "the second stop follows a block");
    for st in &stops {
        assert_eq!(st["session_id"], thread[0].as_str(), "{st}");
        assert_eq!(st["agent"], "codex", "{st}");
    }
    let runs = s.runs();
    assert_eq!(runs[0]["session_id"], thread[0].as_str(), "{runs}");

    let kinds: Vec<String> = s.log().iter().map(|e| e["kind"].as_str().unwrap_or("").to_string()).collect();
    for k in ["agent.session", "agent.tool_call", "agent.tool_result", "agent.message", "agent.result"] {
        assert!(kinds.iter().any(|x| x == k), "{k} not in the log: {kinds:?}");
    }
    assert!(!kinds.iter().any(|x| x == "agent.crashed"), "{}", s.explain(&mock));
    assert_eq!(std::fs::read_to_string(s.f.ws().join("candidate.txt")).unwrap(), ALL_PASS);
}

#[test]
fn a_question_asked_while_the_spawned_codex_works_reaches_the_model() {
    let Some(bin) = codex_bin("a_question_asked_while_the_spawned_codex_works_reaches_the_model") else { return };
    let dir = tempfile::tempdir().unwrap();
    let (ready, go) = (dir.path().join("ready"), dir.path().join("go"));
    let question = "Does the reference win in cycles or only in wall-clock time?";
    // Step 1 writes a passing candidate, then stays in its command until
    // the test has queued its question; the turn then ends with a claim.
    let mock = MockModel::start(vec![
        Step::shell(&format!("{} && {}", write_candidate(ALL_PASS), wait_for_file(&ready, &go))),
        Step::text("Every scenario passes. Done."),
        Step::text("Measured with perf: cycles too, not only wall-clock time. Done.").when_body_contains(question),
    ]);
    let s = Setup::new(&bin, &mock, HomeVia::Env, "");
    let run = s.start_run();
    assert!(wait_for(TIMEOUT, || ready.exists()), "the agent never ran its command: {}", s.explain(&mock));
    let asked_after = mock.agent_requests().len();
    let out = s.d.run(&["ask", &s.id, question]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    std::fs::write(&go, "").unwrap();
    let end = run.finish(TIMEOUT);
    eprintln!("gadfly run (codex) took {:.2} s\n{}", end.elapsed.as_secs_f64(), mock.describe());
    end.assert_completed(&s, &mock);
    assert!(mock.unmatched().is_empty(), "{}", s.explain(&mock));
    assert_eq!(mock.steps_served(), 3, "the model answered the question: {}", s.explain(&mock));

    let requests = mock.agent_requests();
    assert!(requests[..asked_after].iter().all(|r| !r.to_string().contains(question)));
    let first = requests
        .iter()
        .position(|r| r.to_string().contains(question))
        .unwrap_or_else(|| panic!("the question never reached the model: {}", s.explain(&mock)));
    let found = messages_containing(&requests[first], question);
    let (role, text) = found.last().unwrap();
    eprintln!("the question reached the model in request #{first}, in a {role} message: {text:?}");
    assert_eq!(role, "user", "{text}");
    // The turn ended with the predicate holding: gadfly still sends the
    // agent back once, with the person's question, on the same thread.
    assert!(text.starts_with("gadfly: the predicate holds"), "{text}");
    assert!(text.contains("Question from the person supervising"), "{text}");
    assert_eq!(requests[first]["prompt_cache_key"], requests[0]["prompt_cache_key"], "the same thread");
    for r in &requests[first..] {
        assert_eq!(messages_containing(r, question).len(), 1, "delivered once: {}", s.explain(&mock));
    }

    let qs = s.questions();
    let human: Vec<&Value> = qs.iter().filter(|q| q["source"] == "human").collect();
    assert_eq!(human.len(), 1, "{qs:?}");
    assert_eq!(human[0]["status"], "delivered", "{qs:?}");
    assert_eq!(human[0]["delivered_via"], "stop_hook_reason", "{qs:?}");
    let stops = s.stops();
    let decisions: Vec<(&str, bool)> =
        stops.iter().map(|x| (x["decision"].as_str().unwrap(), x["holds"].as_bool().unwrap())).collect();
    assert_eq!(decisions, [("block", true), ("allow", true)], "{}", s.explain(&mock));
    assert_eq!(stops[0]["question_id"], human[0]["id"]);
}

#[test]
fn a_killed_codex_is_resumed_on_the_same_thread_and_the_run_completes() {
    let Some(bin) = codex_bin("a_killed_codex_is_resumed_on_the_same_thread_and_the_run_completes") else { return };
    let dir = tempfile::tempdir().unwrap();
    let (ready, go) = (dir.path().join("ready"), dir.path().join("go"));
    let hang = format!("{} && {}", write_candidate(WRONG), wait_for_file(&ready, &go));
    let mock = MockModel::start(vec![
        Step::shell(&hang),
        Step::shell(&write_candidate(ALL_PASS)).when_last_user_contains("stopped unexpectedly"),
        Step::text("Fixed after the restart. Done."),
    ]);
    let s = Setup::new(&bin, &mock, HomeVia::Env, "max_restarts = 3");
    let run = s.start_run();
    assert!(wait_for(TIMEOUT, || ready.exists()), "the agent never ran its command: {}", s.explain(&mock));
    let before = mock.agent_requests().len();
    let pid = codex_pid(&s).unwrap_or_else(|| {
        panic!("no codex process under the daemon: {:?}\n{}", descendants(s.d.child.id()), s.explain(&mock))
    });
    let thread = threads(&s);
    assert_eq!(thread.len(), 1, "{thread:?}");
    let killed_at = Instant::now();
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), nix::sys::signal::Signal::SIGKILL).unwrap();
    assert!(mock.wait_for_steps(2, TIMEOUT), "the resumed agent never asked the model again: {}", s.explain(&mock));
    eprintln!("resumed {:.2} s after the kill", killed_at.elapsed().as_secs_f64());
    std::fs::write(&go, "").unwrap(); // lets the orphaned command of the killed CLI end
    let end = run.finish(TIMEOUT);
    eprintln!("gadfly run (codex) took {:.2} s\n{}", end.elapsed.as_secs_f64(), mock.describe());
    end.assert_completed(&s, &mock);
    assert_eq!(mock.steps_served(), 3, "{}", s.explain(&mock));
    assert!(mock.unmatched().is_empty(), "{}", s.explain(&mock));

    // The daemon saw the crash and resumed the same thread.
    let log = s.log();
    let crashed: Vec<&Value> = log.iter().filter(|e| e["kind"] == "agent.crashed").collect();
    assert_eq!(crashed.len(), 1, "{}", s.explain(&mock));
    assert_eq!(crashed[0]["payload"]["restart"], 1);
    assert_eq!(crashed[0]["payload"]["turn_started"], true, "{}", crashed[0]);
    assert_eq!(crashed[0]["payload"]["message_resent"], false, "{}", crashed[0]);
    let all = threads(&s);
    assert!(all.len() >= 2 && all.iter().all(|t| t == &thread[0]), "one thread resumed: {all:?}");

    // The resumed turn continues the conversation: the history before the
    // kill (the first prompt, the interrupted call), then the restart note.
    let requests = mock.agent_requests();
    let resumed = &requests[before];
    assert_eq!(resumed["prompt_cache_key"], thread[0].as_str(), "the same thread");
    assert_eq!(requests[0]["prompt_cache_key"], thread[0].as_str());
    assert!(shell_calls(resumed).contains(&hang), "the killed call is in the history: {resumed}");
    let prompts = messages_containing(resumed, "supervised by gadfly");
    assert_eq!(prompts.len(), 1, "the first prompt once, not sent again: {prompts:?}");
    assert!(last_user_text(resumed).contains("stopped unexpectedly"), "{}", s.explain(&mock));

    let stops = s.stops();
    let decisions: Vec<&str> = stops.iter().map(|x| x["decision"].as_str().unwrap()).collect();
    assert_eq!(decisions, ["allow"], "{}", s.explain(&mock));
    assert_eq!(stops[0]["session_id"], thread[0].as_str());
    assert_eq!(std::fs::read_to_string(s.f.ws().join("candidate.txt")).unwrap(), ALL_PASS);
}

/// `max_wall_s` ends a run whose agent is stuck in a turn (a command that
/// never returns; Codex itself never exits while its model server is
/// unreachable), not only at a turn's end: stopped by budget, never a
/// success, and the agent's process group is gone.
#[test]
fn a_stuck_codex_turn_is_ended_by_the_wall_time_budget() {
    let Some(bin) = codex_bin("a_stuck_codex_turn_is_ended_by_the_wall_time_budget") else { return };
    let dir = tempfile::tempdir().unwrap();
    let (ready, go) = (dir.path().join("ready"), dir.path().join("go"));
    let mock = MockModel::start(vec![Step::shell(&wait_for_file(&ready, &go))]);
    let s = Setup::new(&bin, &mock, HomeVia::Env, "max_wall_s = 4");
    let run = s.start_run();
    assert!(wait_for(TIMEOUT, || ready.exists()), "the agent never ran its command: {}", s.explain(&mock));
    let end = run.finish(TIMEOUT);
    eprintln!("gadfly run (codex) took {:.2} s", end.elapsed.as_secs_f64());
    assert_eq!(end.status.and_then(|st| st.code()), Some(1), "{}\n{}", end.stdout, s.explain(&mock));
    assert!(end.elapsed < Duration::from_secs(40), "the budget ended the run late: {:.1} s", end.elapsed.as_secs_f64());
    let runs = s.runs();
    assert_eq!(runs[0]["outcome"], "stopped_by_budget", "{runs}");
    let log = s.log();
    let ended = log.iter().find(|e| e["kind"] == "run.ended").unwrap();
    assert!(ended["payload"]["detail"].as_str().unwrap().contains("max_wall_s = 4"), "{ended}");
    assert!(s.stops().is_empty(), "a stuck turn is no claim");
    assert!(
        wait_for(Duration::from_secs(10), || codex_pid(&s).is_none()),
        "the agent outlived its run: {:?}",
        descendants(s.d.child.id())
    );
}

/// Codex reports its thread's tokens at each turn's end (`turn.completed`'s
/// `usage`, running totals across `exec resume`; no cost): recorded, and
/// held to `max_tokens` at the turn's end: the second turn reaches it, the
/// run ends stopped by budget.
#[test]
fn a_spawned_codex_is_stopped_by_max_tokens() {
    let Some(bin) = codex_bin("a_spawned_codex_is_stopped_by_max_tokens") else { return };
    let mock = MockModel::start(vec![
        Step::shell(&write_candidate(WRONG)),
        Step::text("All scenarios pass now. Done."),
        Step::text("They pass, I checked again. Done.").when_last_user_contains("gadfly: you may not stop yet"),
        Step::text("Still done.").when_last_user_contains("gadfly: you may not stop yet"),
    ]);
    // The mock's Responses usage: 100 input and 20 output tokens a request.
    let per_request = 120u64;
    let s = Setup::new(&bin, &mock, HomeVia::Field, &format!("max_tokens = {}", 3 * per_request));
    let end = s.start_run().finish(TIMEOUT);
    eprintln!("gadfly run (codex) took {:.2} s\n{}", end.elapsed.as_secs_f64(), mock.describe());
    let log = s.log();
    let usage: Vec<&Value> = log.iter().filter(|e| e["kind"] == "agent.usage").map(|e| &e["payload"]).collect();
    eprintln!("usage: {usage:?}");
    assert_eq!(end.status.and_then(|st| st.code()), Some(1), "{}\n{}", end.stdout, s.explain(&mock));
    let runs = s.runs();
    assert_eq!(runs[0]["outcome"], "stopped_by_budget", "{runs}");
    assert_eq!(mock.steps_served(), 3, "two turns: {}", s.explain(&mock));
    let tokens: Vec<u64> = usage.iter().map(|u| u["tokens"].as_u64().unwrap()).collect();
    assert_eq!(tokens, [2 * per_request, 3 * per_request], "the thread's totals at each turn's end: {usage:?}");
    assert!(
        usage.iter().all(|u| u["source"] == "codex" && u["cost_usd"].is_null() && u["cumulative"] == true),
        "{usage:?}"
    );
    let reached = log.iter().find(|e| e["kind"] == "budget.reached").unwrap();
    let r = &reached["payload"];
    assert_eq!(
        (r["budget"].as_str(), r["tokens"].as_u64(), r["turns"].as_u64()),
        (Some("max_tokens"), Some(3 * per_request), Some(2)),
        "{r}"
    );
    let spend = s.d.api_get(&format!("/campaigns/{}/spend", s.id));
    assert_eq!(spend["campaign"]["tokens"].as_u64(), Some(3 * per_request), "{spend}");
    assert_eq!(spend["campaign"]["cost_usd"], Value::Null, "Codex reports no cost: none, not $0");
}
