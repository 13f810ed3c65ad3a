//! Spawn mode with the real Claude Code CLI: `gadfly run ID --agent
//! claude-code` makes the daemon start `claude -p --input-format stream-json
//! ...` in the workspace, against the scripted mock model, with gadfly's
//! hooks in a generated `--settings` file, and supervise it to the end: a
//! wrong claim is sent back, a person's question reaches the model, a killed
//! CLI is resumed in the same session. The assertions are on what the mock
//! model received, on the daemon's records and on `gadfly run`'s exit.
//!
//! The CLI comes from `GADFLY_CLAUDE_BIN`, else from the cache that
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

fn claude_bin(test: &str) -> Option<PathBuf> {
    agent_or_skip("GADFLY_CLAUDE_BIN", "claude", test)
}

/// A shell command that writes `text` into candidate.txt.
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

/// A fixture campaign whose `[agent]` section runs the real CLI against the
/// mock, and a daemon with a clean environment (its own HOME) to spawn it.
struct Setup {
    f: Fixture,
    d: Daemon,
    id: String,
    home: tempfile::TempDir,
}

impl Setup {
    fn new(bin: &Path, mock: &MockModel, extra_agent: &str) -> Setup {
        Setup::with_env(bin, mock, extra_agent, &[])
    }

    /// [`Setup::new`], with more environment for the agent.
    fn with_env(bin: &Path, mock: &MockModel, extra_agent: &str, extra_env: &[(&str, &str)]) -> Setup {
        let home = tempfile::tempdir().unwrap();
        let config = home.path().join("claude-config");
        std::fs::create_dir_all(&config).unwrap();
        let mut env = vec![
            ("HOME", home.path().display().to_string()),
            ("CLAUDE_CONFIG_DIR", config.display().to_string()),
            ("ANTHROPIC_BASE_URL", mock.url.clone()),
            ("ANTHROPIC_API_KEY", "dummy".into()),
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".into()),
            ("DISABLE_TELEMETRY", "1".into()),
            ("DISABLE_AUTOUPDATER", "1".into()),
            ("IS_SANDBOX", "1".into()),
        ];
        env.extend(extra_env.iter().map(|(k, v)| (*k, v.to_string())));
        let env: Vec<String> = env.iter().map(|(k, v)| format!("{k} = {}", toml_str(v))).collect();
        let agent = format!(
            "[agent]\nbin = {}\nenv = {{ {} }}\n{extra_agent}\n",
            toml_str(&bin.display().to_string()),
            env.join(", ")
        );
        let f = Fixture::new(&agent);
        let data = f.data_dir();
        let d = daemon_for(&data, home.path(), common::postgres_for(&data).as_deref());
        let id = d.create_campaign(&f.spec());
        Setup { f, d, id, home }
    }

    /// `gadfly run ID --agent claude-code`, followed in the background.
    fn start_run(&self) -> RunProc {
        let out = self.home.path().join(format!("run-{}.out", self.id));
        let err = self.home.path().join(format!("run-{}.err", self.id));
        let child = self
            .d
            .cmd()
            .args(["run", &self.id, "--agent", "claude-code"])
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

/// A daemon on `data` (and `database`, else SQLite in `data`) whose
/// environment is clean: it passes its environment on to the agent, so
/// nothing of the machine running the tests (API keys, a Claude Code session
/// around `cargo test`) reaches the CLI. Leases last 2 s, so a takeover is
/// quick.
fn daemon_for(data: &Path, home: &Path, database: Option<&str>) -> Daemon {
    let mut cmd = common::gadfly();
    cmd.args(["serve", "--listen", "127.0.0.1:0", "--data-dir"]).arg(data);
    if let Some(url) = database {
        cmd.args(["--database-url", url]);
    }
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("LANG", "C.UTF-8")
        .env("GADFLY_LEASE_SECONDS", "2")
        .env("RUST_LOG", "info,sqlx=warn");
    Daemon::start_cmd(data, cmd)
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
        assert_eq!(runs[0]["agent"], "claude-code", "{runs}");
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

/// The session ids the daemon recorded from the CLI's `system/init` lines.
fn sessions(s: &Setup) -> Vec<String> {
    s.log()
        .iter()
        .filter(|e| e["kind"] == "agent.session")
        .filter_map(|e| e["payload"]["session_id"].as_str().map(str::to_string))
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
    for (&pid, _) in parent.iter() {
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

/// The pid of the Claude Code process the daemon spawned (its own child
/// whose executable is the CLI).
fn claude_pid(s: &Setup, bin: &Path) -> Option<u32> {
    let real = std::fs::canonicalize(bin).unwrap_or_else(|_| bin.to_path_buf());
    let name = real.file_name().unwrap().to_string_lossy().to_string();
    descendants(s.d.child.id())
        .into_iter()
        .find(|(_, exe)| exe.file_name().is_some_and(|n| n.to_string_lossy() == name))
        .map(|(pid, _)| pid)
}

#[test]
fn a_spawned_claude_is_sent_back_while_a_scenario_fails_then_the_run_completes() {
    let Some(bin) = claude_bin("a_spawned_claude_is_sent_back_while_a_scenario_fails_then_the_run_completes") else {
        return;
    };
    let seen = tempfile::tempdir().unwrap();
    let agent_token = seen.path().join("agent-token");
    let mock = MockModel::start(vec![
        Step::shell(&format!("{} && printenv GADFLY_TOKEN > '{}'", write_candidate(WRONG), agent_token.display()))
            .described("Write the new candidate"),
        Step::text("All scenarios pass now. Done."),
        Step::shell(&write_candidate(ALL_PASS))
            .described("Fix b")
            .when_last_user_contains("gadfly: you may not stop yet"),
        Step::text("Fixed b. Done."),
    ]);
    let s = Setup::new(&bin, &mock, "");
    let end = s.start_run().finish(TIMEOUT);
    eprintln!("gadfly run (claude-code) took {:.2} s\n{}", end.elapsed.as_secs_f64(), mock.describe());
    end.assert_completed(&s, &mock);
    assert_eq!(mock.steps_served(), 4, "every step was used: {}", s.explain(&mock));
    assert!(mock.unmatched().is_empty(), "{}", s.explain(&mock));

    // The opening message is gadfly's first prompt, built from the goal.
    let requests = mock.agent_requests();
    let opening = last_user_text(&requests[0]);
    assert!(opening.contains("every scenario faster") && opening.contains("supervised by gadfly"), "{opening}");

    // After the wrong claim the model got the failing scenario and a question.
    let feedback = requests
        .iter()
        .map(last_user_text)
        .find(|t| t.contains("gadfly: you may not stop yet"))
        .unwrap_or_else(|| panic!("the block reason never reached the model: {}", s.explain(&mock)));
    // The Stop hook in the generated settings blocked inside the turn (the
    // CLI wraps its feedback in a system reminder), not the run loop after it.
    assert!(feedback.contains("Stop hook feedback:\ngadfly: you may not stop yet"), "{feedback}");
    let row = feedback
        .lines()
        .find(|l| l.starts_with("b "))
        .unwrap_or_else(|| panic!("no row for scenario b in the feedback:\n{feedback}"));
    assert!(row.contains("NO"), "{row}");
    assert!(!feedback.lines().any(|l| l.starts_with("a ") || l.starts_with("c ")), "{feedback}");
    assert!(feedback.contains("Question"), "a question is carried:\n{feedback}");
    assert!(!last_user_text(requests.last().unwrap()).contains("gadfly: you may not stop yet"));

    // Stop attempts: block, then allow, from the CLI's own session.
    let session = sessions(&s);
    assert!(!session.is_empty(), "no agent.session event: {}", s.explain(&mock));
    assert!(session.iter().all(|x| x == &session[0]), "one session: {session:?}");
    let stops = s.stops();
    let decisions: Vec<&str> = stops.iter().map(|x| x["decision"].as_str().unwrap()).collect();
    assert_eq!(decisions, ["block", "allow"], "{}", s.explain(&mock));
    assert_eq!(stops[0]["claim"], "All scenarios pass now. Done.");
    assert_eq!(stops[1]["claim"], "Fixed b. Done.");
    for st in &stops {
        assert_eq!(st["session_id"], session[0].as_str(), "{st}");
    }
    assert_eq!(s.runs()[0]["session_id"], session[0].as_str());

    // The generated settings file wired gadfly's hooks; the stream was recorded.
    let kinds: Vec<String> = s.log().iter().map(|e| e["kind"].as_str().unwrap_or("").to_string()).collect();
    for k in ["hook.session_start", "hook.post_tool_use", "agent.tool_call", "agent.tool_result", "agent.result"] {
        assert!(kinds.iter().any(|x| x == k), "{k} not in the log: {kinds:?}");
    }
    assert!(!kinds.iter().any(|x| x == "agent.crashed"), "{kinds:?}");
    assert_eq!(std::fs::read_to_string(s.f.ws().join("candidate.txt")).unwrap(), ALL_PASS);
    // The agent's shell held the campaign's hook token, not the master token.
    let held = std::fs::read_to_string(&agent_token).unwrap().trim().to_string();
    assert!(held.starts_with(&format!("gfh1.{}.", s.id)), "{held}");
    assert_ne!(held, s.d.token);
}

#[test]
fn a_question_asked_while_the_spawned_claude_works_reaches_the_model() {
    let Some(bin) = claude_bin("a_question_asked_while_the_spawned_claude_works_reaches_the_model") else { return };
    let dir = tempfile::tempdir().unwrap();
    let (ready, go) = (dir.path().join("ready"), dir.path().join("go"));
    let question = "Does the reference win in cycles or only in wall-clock time?";
    // Step 1 writes a passing candidate, then stays in its tool call until
    // the test has queued its question.
    let mock = MockModel::start(vec![
        Step::shell(&format!("{} && {}", write_candidate(ALL_PASS), wait_for_file(&ready, &go)))
            .described("Write the candidate and measure"),
        Step::text("Measured with perf: cycles too, not only wall-clock time. Done.")
            .when_body_contains(question)
            .otherwise_text("Every scenario passes. Done."),
    ]);
    let s = Setup::new(&bin, &mock, "");
    let run = s.start_run();
    assert!(wait_for(TIMEOUT, || ready.exists()), "the agent never made its tool call: {}", s.explain(&mock));
    let asked_after = mock.agent_requests().len();
    let out = s.d.run(&["ask", &s.id, question]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // gadfly writes it to the agent's stdin at once.
    let delivered = wait_for(Duration::from_secs(30), || {
        s.d.api_get(&format!("/campaigns/{}/questions", s.id))
            .as_array()
            .unwrap()
            .iter()
            .any(|q| q["source"] == "human" && q["status"] == "delivered")
    });
    let qs = s.d.api_get(&format!("/campaigns/{}/questions", s.id));
    assert!(delivered, "the question was not delivered while the tool ran: {qs}\n{}", s.explain(&mock));
    // Written to the pipe; give the CLI a moment to read it before the tool ends.
    std::thread::sleep(Duration::from_millis(500));
    std::fs::write(&go, "").unwrap();
    let end = run.finish(TIMEOUT);
    eprintln!("gadfly run (claude-code) took {:.2} s\n{}", end.elapsed.as_secs_f64(), mock.describe());
    end.assert_completed(&s, &mock);
    assert!(mock.unmatched().is_empty(), "{}", s.explain(&mock));
    assert_eq!(mock.steps_served(), 2, "the model answered the question: {}", s.explain(&mock));

    let qs = s.d.api_get(&format!("/campaigns/{}/questions", s.id));
    let human: Vec<&Value> = qs.as_array().unwrap().iter().filter(|q| q["source"] == "human").collect();
    assert_eq!(human.len(), 1, "{qs}");
    assert_eq!(human[0]["status"], "delivered", "{qs}");
    let via = human[0]["delivered_via"].as_str().unwrap_or("").to_string();

    let requests = mock.agent_requests();
    assert!(requests[..asked_after].iter().all(|r| !r.to_string().contains(question)));
    let first = requests
        .iter()
        .position(|r| r.to_string().contains(question))
        .unwrap_or_else(|| panic!("the question never reached the model: {}", s.explain(&mock)));
    let found = messages_containing(&requests[first], question);
    let (role, text) = found.last().unwrap();
    eprintln!(
        "the question (delivered via {via}) reached the model in request #{first}, in a {role} message: {text:?}"
    );
    assert_eq!(via, "agent_stdin", "spawn mode writes a question to the agent's stdin at once: {qs}");
    assert_eq!(first, asked_after, "the model's first request after the tool call carries the question");
    assert!(text.contains("from the person supervising"), "{text}");
    for r in &requests[first..] {
        assert_eq!(messages_containing(r, question).len(), 1, "delivered once: {}", s.explain(&mock));
    }
    let stops = s.stops();
    assert_eq!(stops.last().unwrap()["decision"], "allow", "{stops:?}");
    assert_eq!(stops.last().unwrap()["claim"], "Measured with perf: cycles too, not only wall-clock time. Done.");
}

/// The daemon's CLI dies in the middle of a tool call (SIGKILL, from the
/// test): the daemon resumes the same session with `--resume`, and what the
/// dead process had been written but never took in (the campaign's start
/// question and a person's question, both written to its stdin while the
/// tool ran) is written to the new one, so no question is lost.
#[test]
fn a_killed_claude_is_resumed_in_the_same_session_and_the_run_completes() {
    let Some(bin) = claude_bin("a_killed_claude_is_resumed_in_the_same_session_and_the_run_completes") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (ready, go) = (dir.path().join("ready"), dir.path().join("go"));
    let question = "Which scenario did you measure last, and with what tool?";
    let hang = format!("{} && {}", write_candidate(WRONG), wait_for_file(&ready, &go));
    let mock = MockModel::start(vec![
        Step::shell(&hang).described("Write a candidate and measure"),
        Step::shell(&write_candidate(ALL_PASS)).described("Fix b").when_body_contains("stopped unexpectedly"),
        Step::text("Fixed after the restart; b was measured last, with the harness. Done."),
    ]);
    let s = Setup::new(&bin, &mock, "max_restarts = 3");
    let run = s.start_run();
    assert!(wait_for(TIMEOUT, || ready.exists()), "the agent never made its tool call: {}", s.explain(&mock));
    // A question written to the CLI's stdin while the tool runs.
    let out = s.d.run(&["ask", &s.id, question]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        wait_for(Duration::from_secs(30), || s.questions().iter().all(|q| q["status"] == "delivered")),
        "the questions were not written to the agent: {:?}",
        s.questions()
    );
    let start_question =
        s.questions().into_iter().find(|q| q["moment"] == "start").map(|q| q["text"].as_str().unwrap().to_string());
    let before = mock.log().len();
    let pid = claude_pid(&s, &bin).unwrap_or_else(|| {
        panic!("no claude process under the daemon: {:?}\n{}", descendants(s.d.child.id()), s.explain(&mock))
    });
    let first_session = sessions(&s);
    assert_eq!(first_session.len(), 1, "{first_session:?}");
    let killed_at = Instant::now();
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), nix::sys::signal::Signal::SIGKILL).unwrap();
    assert!(mock.wait_for_steps(2, TIMEOUT), "the resumed agent never asked the model again: {}", s.explain(&mock));
    eprintln!("resumed {:.2} s after the kill", killed_at.elapsed().as_secs_f64());
    std::fs::write(&go, "").unwrap(); // lets the orphaned tool of the killed CLI end
    let end = run.finish(TIMEOUT);
    eprintln!("gadfly run (claude-code) took {:.2} s\n{}", end.elapsed.as_secs_f64(), mock.describe());
    end.assert_completed(&s, &mock);
    assert_eq!(mock.steps_served(), 3, "{}", s.explain(&mock));
    assert!(mock.unmatched().is_empty(), "{}", s.explain(&mock));

    // The daemon saw the crash and resumed the same session.
    let log = s.log();
    let crashed: Vec<&Value> = log.iter().filter(|e| e["kind"] == "agent.crashed").collect();
    assert_eq!(crashed.len(), 1, "{}", s.explain(&mock));
    assert_eq!(crashed[0]["payload"]["restart"], 1);
    let all = sessions(&s);
    assert!(all.len() >= 2 && all.iter().all(|x| x == &first_session[0]), "one session resumed: {all:?}");

    // The resumed process continues the conversation: its first model
    // request carries the history before the kill, then the restart note.
    let pre: Vec<_> = mock.log().into_iter().take(before).filter(|r| r.kind == mock_model::Kind::Agent).collect();
    let post: Vec<_> = mock.log().into_iter().skip(before).filter(|r| r.kind == mock_model::Kind::Agent).collect();
    let resumed = &post[0];
    let text = resumed.body.to_string();
    assert!(text.contains("every scenario faster"), "the first prompt is in the history: {text}");
    assert_eq!(messages_containing(&resumed.body, "supervised by gadfly").len(), 1, "the first prompt, once");
    let calls: Vec<&Value> = resumed.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["content"].as_array().into_iter().flatten())
        .filter(|b| b["type"] == "tool_use")
        .collect();
    assert!(
        calls.iter().any(|b| b["input"]["command"] == hang.as_str()),
        "the killed tool call is in the history: {text}"
    );
    assert!(text.contains("stopped unexpectedly"), "{}", s.explain(&mock));
    let n_pre = pre.last().unwrap().body["messages"].as_array().unwrap().len();
    let n_resumed = resumed.body["messages"].as_array().unwrap().len();
    assert!(n_resumed > n_pre, "the history grew: {n_pre} then {n_resumed} messages");
    // Claude Code names its session in a header: the same before and after.
    let header = |r: &mock_model::Recorded| r.headers["x-claude-code-session-id"].as_str().map(str::to_string);
    assert_eq!(header(&pre[0]).as_deref(), Some(first_session[0].as_str()), "{:?}", pre[0].headers);
    assert_eq!(header(resumed).as_deref(), Some(first_session[0].as_str()), "{:?}", resumed.headers);

    // No question was lost with the killed process: both reach the model
    // after the restart, once.
    let last = &post.last().unwrap().body;
    assert!(pre.iter().all(|r| !r.body.to_string().contains(question)));
    assert_eq!(messages_containing(last, question).len(), 1, "the person's question: {}", s.explain(&mock));
    if let Some(q) = &start_question {
        assert_eq!(messages_containing(last, q).len(), 1, "the start question: {}", s.explain(&mock));
    }
    // What the dead process never took in was written again, once.
    let lost = [Some(question.to_string()), start_question.clone()]
        .into_iter()
        .flatten()
        .filter(|q| pre.iter().all(|r| !r.body.to_string().contains(q.as_str())))
        .count();
    assert_eq!(crashed[0]["payload"]["resent_messages"], lost, "{}", crashed[0]);

    let stops = s.stops();
    assert_eq!(stops.last().unwrap()["decision"], "allow", "{stops:?}");
    assert_eq!(stops.last().unwrap()["session_id"], first_session[0].as_str());
    assert_eq!(std::fs::read_to_string(s.f.ws().join("candidate.txt")).unwrap(), ALL_PASS);
}

/// An autonomous campaign end to end, with no person watching: the scripted
/// agent tries four variants that gain nothing (measuring each with
/// `"$GADFLY_BIN" eval`), then claims a hardware limit, then makes scenario b
/// faster but wrong and explains the mismatch away, then fixes it. gadfly
/// notices each moment by itself: the plateau (numeric detector, question
/// written to the agent's stdin), the claimed limit and the dismissal (text
/// classifier on the words the agent stops with, question in the block
/// reason). The model receives the three questions in that order, each from
/// the bank, each once; no stop is allowed while the predicate fails.
#[test]
fn an_autonomous_campaign_asks_about_a_plateau_a_claimed_limit_and_a_dismissal_in_order() {
    let Some(bin) = claude_bin("an_autonomous_campaign_asks_about_a_plateau_a_claimed_limit_and_a_dismissal_in_order")
    else {
        return;
    };
    const LIMIT: &str = "I profiled it: scenario b is memory-bound and already at the DRAM bandwidth limit, so no further speedup is possible on this hardware.";
    const DISMISSAL: &str = "Done. The only remaining failure is b, whose mismatch against the reference is floating-point rounding noise from the different accumulation order; it is harmless and can be ignored.";
    const FIXED_CLAIM: &str = "Fixed b by restoring the reference accumulation order; every scenario passes. Done.";
    // Four variants within 1% of each other (no line repeats, so no edit loop).
    let flat = [
        "a true 82 100\nb true 100 100\nc true 82 100\n",
        "a true 81 100\nb true 101 100\nc true 83 100\n",
        "a true 83 100\nb true 99 100\nc true 81 100\n",
        "a true 82.5 100\nb true 100.5 100\nc true 81.5 100\n",
    ];
    let wrong_b = "a true 82.2 100\nb false 60 100\nc true 81.8 100\n";
    let fixed = "a true 70 100\nb true 80 100\nc true 70 100\n";
    let eval = r#""$GADFLY_BIN" eval"#;
    let mut steps: Vec<Step> = flat
        .iter()
        .enumerate()
        .map(|(i, c)| {
            // The last one lingers a second, so the question its evaluation
            // raised is read with the tool's result.
            let linger = if i + 1 == flat.len() { " && sleep 1" } else { "" };
            Step::shell(&format!("{} && {eval}{linger}", write_candidate(c))).described(&format!("Variant {}", i + 1))
        })
        .collect();
    // The plateau question reaches the agent's stdin asynchronously: on a
    // slow machine it may miss the lingering variant's result, so until it
    // shows up the model waits a second more instead of moving on.
    steps.push(Step::text(LIMIT).when_body_contains("gadfly noticed a plateau moment").otherwise_shell("sleep 1"));
    steps.push(
        Step::shell(&write_candidate(wrong_b))
            .described("Reorder b's accumulation")
            .when_last_user_contains("gadfly: you may not stop yet"),
    );
    steps.push(Step::text(DISMISSAL));
    steps.push(
        Step::shell(&write_candidate(fixed))
            .described("Restore b's accumulation order")
            .when_last_user_contains("gadfly: you may not stop yet"),
    );
    steps.push(Step::text(FIXED_CLAIM));
    let n_steps = steps.len();
    let mock = MockModel::start(steps);
    let s = Setup::new(&bin, &mock, "\n[moments]\nplateau_evaluations = 3\n");
    let end = s.start_run().finish(TIMEOUT);
    eprintln!("gadfly run (claude-code, autonomous) took {:.2} s\n{}", end.elapsed.as_secs_f64(), mock.describe());
    end.assert_completed(&s, &mock);
    assert_eq!(mock.steps_served(), n_steps, "every step was used: {}", s.explain(&mock));
    assert!(mock.unmatched().is_empty(), "{}", s.explain(&mock));

    // The agent measured each variant itself, through the daemon.
    let log = s.log();
    let evaluations = log.iter().filter(|e| e["kind"] == "evaluation").count();
    assert!(evaluations >= 6, "4 variants, then 2 stops on new trees: {evaluations}\n{}", s.explain(&mock));

    // Each moment was noticed, with its evidence, and asked once.
    let moment_events: Vec<&Value> = log.iter().filter(|e| e["kind"] == "moment").collect();
    let plateau = moment_events
        .iter()
        .find(|e| e["payload"]["moment"] == "plateau")
        .unwrap_or_else(|| panic!("no plateau moment: {}", s.explain(&mock)));
    assert_eq!(plateau["payload"]["detector"], "plateau");
    assert_eq!(plateau["payload"]["evaluations"].as_array().unwrap().len(), 3, "{plateau}");
    let limit = moment_events
        .iter()
        .find(|e| e["payload"]["moment"] == "limit_claim")
        .unwrap_or_else(|| panic!("no limit_claim moment: {}", s.explain(&mock)));
    assert_eq!(limit["payload"]["quote"], LIMIT, "{limit}");
    assert_eq!(limit["payload"]["question"]["via"], "stop_hook_reason", "{limit}");
    let dismissals: Vec<&&Value> =
        moment_events.iter().filter(|e| e["payload"]["moment"] == "correctness_dismissal").collect();
    let from_text = dismissals
        .iter()
        .find(|e| e["payload"]["source"] == "text")
        .unwrap_or_else(|| panic!("no dismissal moment from the agent's words: {}", s.explain(&mock)));
    assert!(DISMISSAL.contains(from_text["payload"]["quote"].as_str().unwrap()), "{from_text}");
    // The evaluation saw the same moment (b correct, then not): recorded
    // as evidence, asked once, with the claim.
    let regression = dismissals.iter().find(|e| e["payload"]["detector"] == "correctness_regression");
    if let Some(r) = regression {
        assert!(r["payload"]["question"].is_null(), "{r}");
        assert_eq!(r["payload"]["scenarios"], serde_json::json!(["b"]), "{r}");
    }

    let questions = s.questions();
    let asked = |moment: &str| -> Vec<Value> {
        questions.iter().filter(|q| q["moment"] == moment && q["source"] == "bank").cloned().collect()
    };
    let mut texts = Vec::new();
    for (moment, via) in [
        ("plateau", None),
        ("limit_claim", Some("stop_hook_reason")),
        ("correctness_dismissal", Some("stop_hook_reason")),
    ] {
        let qs = asked(moment);
        assert_eq!(qs.len(), 1, "one {moment} question: {questions:?}");
        let q = &qs[0];
        assert_eq!(q["status"], "delivered", "{q}");
        let bank_id = q["bank_id"].as_str().unwrap_or("");
        assert!(!bank_id.is_empty() && !bank_id.starts_with("builtin"), "a bank entry: {q}");
        if let Some(v) = via {
            assert_eq!(q["delivered_via"], v, "{q}");
        }
        texts.push((moment, q["text"].as_str().unwrap().to_string(), bank_id.to_string()));
    }
    // Each is its bank entry's text, after the line naming its evidence
    // (the scenarios, or the agent's own words) where the text does not.
    let bank = s.d.api_get("/bank");
    for (moment, text, bank_id) in &texts {
        let entry = bank["entries"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["id"] == bank_id.as_str())
            .unwrap_or_else(|| panic!("{bank_id} is not in the bank"));
        let entry_text = entry["text"].as_str().unwrap();
        assert!(
            entry_text.contains('{') || text.ends_with(entry_text),
            "the {moment} question is {bank_id}'s text: {text}"
        );
        if *moment == "plateau" {
            assert!(text.starts_with("About scenario"), "the plateau question names its scenarios: {text}");
        }
    }
    let texts: Vec<(&str, String)> = texts.into_iter().map(|(m, t, _)| (m, t)).collect();

    // The model received them in that order, each once.
    let requests = mock.agent_requests();
    let first_seen: Vec<usize> = texts
        .iter()
        .map(|(moment, text)| {
            // As it appears in a serialized request (a question may span lines).
            let quoted = serde_json::to_string(text).unwrap();
            let escaped = &quoted[1..quoted.len() - 1];
            requests.iter().position(|r| r.to_string().contains(escaped)).unwrap_or_else(|| {
                panic!("the {moment} question never reached the model: {text}\n{}", s.explain(&mock))
            })
        })
        .collect();
    assert!(
        first_seen.windows(2).all(|w| w[0] < w[1]),
        "plateau, then limit, then dismissal: first seen in requests {first_seen:?}"
    );
    let last = requests.last().unwrap();
    for (moment, text) in &texts {
        // Claude Code also shows a Stop hook's feedback to the model as a
        // system note of its own: count what reached it as user messages.
        let found: Vec<_> = messages_containing(last, text).into_iter().filter(|(role, _)| role == "user").collect();
        assert_eq!(found.len(), 1, "the {moment} question once: {found:#?}\n{}", s.explain(&mock));
    }
    // gadfly delivered each once (one delivery event per question).
    for (moment, text) in &texts {
        let deliveries =
            log.iter().filter(|e| e["kind"] == "question.delivered" && e["payload"]["text"] == text.as_str()).count();
        assert_eq!(deliveries, 1, "the {moment} question was delivered once: {}", s.explain(&mock));
    }
    // The limit question answered the claim, the dismissal question the dismissal.
    let after = |needle: &str| requests.iter().position(|r| last_user_text(r).contains(needle));
    assert_eq!(Some(first_seen[1]), after(&texts[1].1), "the limit question came in the block reason");
    assert!(last_user_text(&requests[first_seen[1]]).contains("Stop hook feedback"));
    assert!(last_user_text(&requests[first_seen[2]]).contains("Stop hook feedback"));

    // No stop was allowed while the predicate failed.
    let stops = s.stops();
    let decisions: Vec<(&str, bool)> =
        stops.iter().map(|x| (x["decision"].as_str().unwrap(), x["holds"].as_bool().unwrap())).collect();
    assert_eq!(decisions, [("block", false), ("block", false), ("allow", true)], "{}", s.explain(&mock));
    assert_eq!(stops[0]["claim"], LIMIT);
    assert_eq!(stops[1]["claim"], DISMISSAL);
    assert_eq!(std::fs::read_to_string(s.f.ws().join("candidate.txt")).unwrap(), fixed);
}

/// `curl -X POST` with the daemon's token; the parsed answer.
fn api_post(d: &Daemon, path: &str, body: &str) -> Value {
    let out = std::process::Command::new("curl")
        .args(["-sf", "-X", "POST", "-H", "content-type: application/json", "-H"])
        .arg(format!("Authorization: Bearer {}", d.token))
        .args(["--data-binary", body])
        .arg(format!("{}/api/v1{path}", d.url))
        .output()
        .unwrap();
    assert!(out.status.success(), "POST {path}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The daemon running a campaign's agent is killed (SIGKILL, and its agent
/// with it, as when its host dies) in the middle of a tool call. On SQLite
/// the daemon restarted on the same data dir takes the run over at once;
/// on PostgreSQL a second daemon, already serving the same database, takes
/// it over once the dead one's lease expires. Either way the run is resumed
/// in the same Claude Code session and completes; nothing recorded before
/// the kill is lost.
#[test]
fn a_run_whose_daemon_is_killed_is_taken_over_and_completes() {
    let Some(bin) = claude_bin("a_run_whose_daemon_is_killed_is_taken_over_and_completes") else { return };
    let dir = tempfile::tempdir().unwrap();
    let (ready, go) = (dir.path().join("ready"), dir.path().join("go"));
    let hang = format!("{} && {}", write_candidate(WRONG), wait_for_file(&ready, &go));
    let mock = MockModel::start(vec![
        Step::shell(&hang).described("Write a candidate and measure"),
        Step::shell(&write_candidate(ALL_PASS)).described("Fix b").when_body_contains("stopped unexpectedly"),
        Step::text("Fixed b after the takeover. Done."),
    ]);
    let mut s = Setup::new(&bin, &mock, "");
    let database = common::postgres_for(&s.f.data_dir());
    // On PostgreSQL, the second daemon serves the same database from the start.
    let other_data = s.home.path().join("data-b");
    std::fs::create_dir_all(&other_data).unwrap();
    let mut other = database.as_ref().map(|url| daemon_for(&other_data, s.home.path(), Some(url)));

    let run = api_post(&s.d, &format!("/campaigns/{}/runs", s.id), r#"{"agent":"claude-code"}"#);
    let run_id = run["run_id"].as_i64().or_else(|| run["id"].as_i64()).unwrap_or_else(|| panic!("{run}"));
    assert!(wait_for(TIMEOUT, || ready.exists()), "the agent never made its tool call: {}", s.explain(&mock));
    let before: Vec<i64> = s.log().iter().map(|e| e["id"].as_i64().unwrap()).collect();
    let first_session = sessions(&s);
    assert_eq!(first_session.len(), 1, "{first_session:?}");

    // The host dies: the daemon and its agent, at once.
    let agents = descendants(s.d.child.id());
    s.d.kill();
    for (pid, _) in agents {
        if let Ok(pg) = nix::unistd::getpgid(Some(nix::unistd::Pid::from_raw(pid as i32))) {
            if pg != nix::unistd::getpgrp() {
                let _ = nix::sys::signal::killpg(pg, nix::sys::signal::Signal::SIGKILL);
            }
        }
    }
    let killed_at = Instant::now();
    let taker = match other.take() {
        Some(d) => d,
        None => daemon_for(&s.f.data_dir(), s.home.path(), None),
    };
    s.d = taker;
    assert!(mock.wait_for_steps(2, TIMEOUT), "the run was not taken over: {}", s.explain(&mock));
    eprintln!(
        "taken over ({}) {:.2} s after the kill",
        if database.is_some() { "a second daemon on PostgreSQL" } else { "the daemon restarted on SQLite" },
        killed_at.elapsed().as_secs_f64()
    );
    std::fs::write(&go, "").unwrap();
    let ended = wait_for(TIMEOUT, || s.runs()[0]["status"] == "ended");
    assert!(ended, "the run did not end: {}\n{}", s.runs(), s.explain(&mock));
    let runs = s.runs();
    assert_eq!(runs.as_array().unwrap().len(), 1, "the same run carried on: {runs}");
    assert_eq!(runs[0]["id"], run_id);
    assert_eq!(runs[0]["outcome"], "completed", "{runs}\n{}", s.explain(&mock));
    assert_eq!(mock.steps_served(), 3, "{}", s.explain(&mock));
    assert!(mock.unmatched().is_empty(), "{}", s.explain(&mock));

    // Nothing recorded before the kill was lost; the takeover is on record.
    let log = s.log();
    let ids: std::collections::HashSet<i64> = log.iter().map(|e| e["id"].as_i64().unwrap()).collect();
    assert!(before.iter().all(|i| ids.contains(i)), "events recorded before the kill are all there");
    let resumed: Vec<&Value> = log.iter().filter(|e| e["kind"] == "run.resumed").collect();
    assert_eq!(resumed.len(), 1, "{}", s.explain(&mock));
    let p = &resumed[0]["payload"];
    assert_eq!(p["run_id"], run_id);
    assert_eq!(p["session_id"], first_session[0].as_str());
    assert_ne!(p["from_daemon"], p["daemon"], "another daemon took over: {p}");
    // The resumed CLI continued the same session, told of the restart once.
    let all = sessions(&s);
    assert!(all.iter().all(|x| x == &first_session[0]), "one session: {all:?}");
    let last = &mock.agent_requests().last().unwrap().clone();
    assert_eq!(messages_containing(last, "stopped unexpectedly").len(), 1, "{}", s.explain(&mock));
    let stops = s.stops();
    assert_eq!(stops.last().unwrap()["decision"], "allow", "{stops:?}");
    assert_eq!(std::fs::read_to_string(s.f.ws().join("candidate.txt")).unwrap(), ALL_PASS);
}

/// Issue 29, privilege separation: by default (no `[agent] sandbox`: `auto`,
/// the sandbox wherever bubblewrap works) the real
/// Claude Code CLI, driven by the mock model, runs the attacks of THREATS.md
/// rows 4, 5 and 12 through its Bash tool (read the master token, reach the
/// database, kill the daemon) and gets nowhere: the data dir is an empty
/// folder but for the spool and its own hook settings, the daemon is not in
/// its PID namespace, and the stop is still judged by the daemon, which is
/// still running.
#[test]
fn a_sandboxed_claude_cannot_reach_the_daemon_that_judges_it() {
    let Some(bin) = claude_bin("a_sandboxed_claude_cannot_reach_the_daemon_that_judges_it") else { return };
    if !gadfly::harness::bwrap_works() {
        assert!(std::env::var_os("GADFLY_REQUIRE_SANDBOX").is_none(), "bubblewrap does not work on this host");
        eprintln!("SKIPPED: a_sandboxed_claude_cannot_reach_the_daemon_that_judges_it needs bubblewrap");
        return;
    }
    // The daemon's pid is known only once it runs: the script reads it from
    // a file the test writes, as an agent would find it with pgrep.
    let seen = tempfile::tempdir().unwrap();
    let pid_file = seen.path().join("daemon-pid");
    let report = seen.path().join("attack.txt");
    let attack = format!(
        "D=$(dirname \"$GADFLY_SPOOL_DIR\"); P=$(cat '{pid}'); R='{report}'; \
         echo \"token: $(cat \"$D/token\" 2>&1 | head -c 200)\" > \"$R\"; \
         echo \"data: $(ls -A \"$D\" 2>&1 | tr '\\n' ' ')\" >> \"$R\"; \
         echo \"db: $(ls \"$D/gadfly.db\" 2>&1)\" >> \"$R\"; \
         echo \"signal: $(kill -0 \"$P\" 2>/dev/null && echo reached || echo refused)\" >> \"$R\"; \
         echo \"pid1: $(cat /proc/1/comm 2>&1)\" >> \"$R\"; \
         echo \"caps: $(awk '/^CapEff/ {{print $2}}' /proc/self/status)\" >> \"$R\"; \
         echo \"unmount: $(umount \"$D\" 2>/dev/null && echo done || echo refused)\" >> \"$R\"; \
         kill -9 \"$P\" 2>/dev/null; {}",
        write_candidate(WRONG),
        pid = pid_file.display(),
        report = report.display(),
    );
    let mock = MockModel::start(vec![
        Step::shell(&attack).described("Look around"),
        Step::text("All scenarios pass now. Done."),
        Step::shell(&write_candidate(ALL_PASS))
            .described("Fix b")
            .when_last_user_contains("gadfly: you may not stop yet"),
        Step::text("Fixed b. Done."),
    ]);
    // Nothing said: spawn mode's default sandboxes the agent.
    let s = Setup::new(&bin, &mock, "");
    let daemon_pid = s.d.child.id();
    std::fs::write(&pid_file, daemon_pid.to_string()).unwrap();
    let end = s.start_run().finish(TIMEOUT);
    let seen_by_agent = std::fs::read_to_string(&report)
        .unwrap_or_else(|e| panic!("the attack step did not run ({e}): {}", s.explain(&mock)));
    // The run's start says where the agent ran.
    let started: Vec<Value> = s.log().into_iter().filter(|e| e["kind"] == "run.started").collect();
    assert_eq!(started.len(), 1, "{started:?}");
    let sandbox = started[0]["payload"]["sandbox"].as_str().unwrap_or_default().to_string();
    assert!(sandbox.starts_with("bwrap:"), "the default run was not sandboxed: {sandbox:?}");
    eprintln!("what the sandboxed agent saw:\n{seen_by_agent}");
    end.assert_completed(&s, &mock);

    let line = |k: &str| seen_by_agent.lines().find(|l| l.starts_with(k)).unwrap_or_default().to_string();
    assert!(line("token:").contains("No such file"), "the master token was readable: {seen_by_agent}");
    assert!(!seen_by_agent.contains(&s.d.token), "{seen_by_agent}");
    assert!(line("db:").contains("No such file"), "the database was visible: {seen_by_agent}");
    let data_line = line("data:");
    let data: Vec<&str> = data_line.trim_start_matches("data:").split_whitespace().collect();
    assert!(data.iter().all(|e| ["runs", "spool"].contains(e)), "the data dir shows only runs and spool: {data:?}");
    assert_eq!(line("signal:"), "signal: refused", "{seen_by_agent}");
    // Its own PID namespace: process 1 is the sandbox's, not the host's init.
    assert_eq!(line("pid1:"), "pid1: bwrap", "{seen_by_agent}");
    // No capability, even when the daemon runs as root: the tmpfs that
    // hides the data dir stays.
    assert_eq!(line("caps:"), "caps: 0000000000000000", "{seen_by_agent}");
    assert_eq!(line("unmount:"), "unmount: refused", "{seen_by_agent}");
    // The daemon is the same process, still answering, and it judged both stops.
    assert!(std::path::Path::new(&format!("/proc/{daemon_pid}")).exists(), "the daemon was killed");
    let stops = s.stops();
    let decisions: Vec<&str> = stops.iter().map(|x| x["decision"].as_str().unwrap()).collect();
    assert_eq!(decisions, ["block", "allow"], "{}", s.explain(&mock));
}

/// The usage the mock model reports for each request (tests/mock_model's
/// `anthropic_reply`): 100 input tokens; 1 output token when the message
/// starts, 20 when it ends.
const MOCK_INPUT: u64 = 100;
const MOCK_OUTPUT_AT_START: u64 = 1;
const MOCK_OUTPUT: u64 = 20;

/// `max_tokens` holds mid-turn: the CLI's stream tells each message's usage
/// as it starts, and the run ends as soon as the messages of the turn in
/// progress (the Stop hook blocked the first claim, the turn goes on) reach
/// the budget, before the turn's own report: stopped by budget, with the
/// budget and the figures in `budget.reached`, the run's end and the API.
#[test]
fn a_spawned_claude_is_stopped_by_max_tokens_mid_turn() {
    let Some(bin) = claude_bin("a_spawned_claude_is_stopped_by_max_tokens_mid_turn") else { return };
    let mock = MockModel::start(vec![
        Step::shell(&write_candidate(WRONG)).described("Write the new candidate"),
        Step::text("All scenarios pass now. Done."),
        Step::shell(&write_candidate(ALL_PASS))
            .described("Fix b")
            .when_last_user_contains("gadfly: you may not stop yet"),
        Step::text("Fixed b. Done."),
    ]);
    // Two messages (202 tokens as the stream tells them) stay under it; the third reaches it.
    let max = 2 * (MOCK_INPUT + MOCK_OUTPUT_AT_START) + 48;
    let s = Setup::new(&bin, &mock, &format!("max_tokens = {max}"));
    let end = s.start_run().finish(TIMEOUT);
    eprintln!("gadfly run (claude-code) took {:.2} s\n{}", end.elapsed.as_secs_f64(), mock.describe());
    assert_eq!(end.status.and_then(|st| st.code()), Some(1), "{}\n{}\n{}", end.stdout, end.stderr, s.explain(&mock));
    let runs = s.runs();
    assert_eq!(runs[0]["outcome"], "stopped_by_budget", "{runs}\n{}", s.explain(&mock));
    // The budget is decided at the third message (its tokens are what
    // budget.reached tells, below); Claude Code may already have sent its
    // next request in the milliseconds before it is killed (seen once on a
    // loaded CI machine, PostgreSQL), never one more.
    let served = mock.steps_served();
    assert!((3..=4).contains(&served), "the run ended at the third message, served {served}: {}", s.explain(&mock));
    let log = s.log();
    let reached: Vec<&Value> = log.iter().filter(|e| e["kind"] == "budget.reached").collect();
    assert_eq!(reached.len(), 1, "{}", s.explain(&mock));
    let r = &reached[0]["payload"];
    let told = 3 * (MOCK_INPUT + MOCK_OUTPUT_AT_START);
    assert_eq!(
        (r["budget"].as_str(), r["limit"].as_f64(), r["tokens"].as_u64()),
        (Some("max_tokens"), Some(max as f64), Some(told)),
        "{r}"
    );
    assert_eq!(r["cost_usd"], Value::Null, "Claude Code tells its cost only at a turn's end: none yet, not 0");
    let ended = log.iter().find(|e| e["kind"] == "run.ended").unwrap();
    let detail = ended["payload"]["detail"].as_str().unwrap();
    assert!(
        detail.contains(&format!("{told} tokens used")) && detail.contains(&format!("max_tokens = {max}")),
        "{detail}"
    );
    // The turn cut short is recorded as far as the stream told it.
    let partial: Vec<&Value> = log
        .iter()
        .filter(|e| e["kind"] == "agent.usage" && e["payload"]["source"] == "claude-code-partial-turn")
        .collect();
    assert_eq!(partial.len(), 1, "{}", s.explain(&mock));
    assert_eq!(partial[0]["payload"]["input_tokens"].as_u64(), Some(3 * MOCK_INPUT));
    // The API's figure: the run's session, at least what the budget saw
    // (its transcript, which gadfly follows too, has the final output
    // tokens of the messages it holds by then).
    let spend = s.d.api_get(&format!("/campaigns/{}/spend", s.id));
    assert_eq!(spend["runs"][0]["run_id"], runs[0]["id"], "{spend}");
    assert_eq!(spend["runs"][0]["input_tokens"].as_u64(), Some(3 * MOCK_INPUT), "{spend}");
    assert!(spend["campaign"]["tokens"].as_u64().unwrap() >= told, "{spend}");
    assert_eq!(spend["budgets"]["max_tokens"].as_u64(), Some(max));
}

/// `max_cost_usd` counts Claude Code's own `total_cost_usd` (the CLI
/// prices the mock's usage itself; gadfly prices nothing), told when a
/// turn ends: here after two blocked stops in a row (the CLI's Stop-hook
/// block cap, set to 1, ends the turn past one block), whose cost
/// reaches the budget.
#[test]
fn a_spawned_claude_is_stopped_by_its_own_reported_cost() {
    let Some(bin) = claude_bin("a_spawned_claude_is_stopped_by_its_own_reported_cost") else { return };
    let mock = MockModel::start(vec![
        Step::shell(&write_candidate(WRONG)).described("Write the new candidate"),
        Step::text("All scenarios pass now. Done."),
        Step::text("They still pass. Done.").when_last_user_contains("gadfly: you may not stop yet"),
    ]);
    let requests = 3;
    let s = Setup::with_env(&bin, &mock, "max_cost_usd = 0.001", &[("CLAUDE_CODE_STOP_HOOK_BLOCK_CAP", "1")]);
    let end = s.start_run().finish(TIMEOUT);
    eprintln!("gadfly run (claude-code) took {:.2} s\n{}", end.elapsed.as_secs_f64(), mock.describe());
    assert_eq!(end.status.and_then(|st| st.code()), Some(1), "{}\n{}\n{}", end.stdout, end.stderr, s.explain(&mock));
    let runs = s.runs();
    assert_eq!(runs[0]["outcome"], "stopped_by_budget", "{runs}\n{}", s.explain(&mock));
    let log = s.log();
    let turns: Vec<&Value> =
        log.iter().filter(|e| e["kind"] == "agent.usage" && e["payload"]["source"] == "claude-code").collect();
    assert_eq!(turns.len(), 1, "one turn reported: {}", s.explain(&mock));
    let t = &turns[0]["payload"];
    let cost = t["session_cost_usd"].as_f64().expect("the CLI reports total_cost_usd");
    assert!(cost > 0.001, "the CLI priced {requests} requests at {cost}");
    assert_eq!(mock.steps_served(), 3, "{}", s.explain(&mock));
    assert_eq!(
        (t["input_tokens"].as_u64(), t["output_tokens"].as_u64()),
        (Some(requests * MOCK_INPUT), Some(requests * MOCK_OUTPUT)),
        "{t}"
    );
    let reached = log.iter().find(|e| e["kind"] == "budget.reached").unwrap_or_else(|| panic!("{}", s.explain(&mock)));
    let r = &reached["payload"];
    assert_eq!((r["budget"].as_str(), r["limit"].as_f64()), (Some("max_cost_usd"), Some(0.001)), "{r}");
    assert_eq!(
        (r["cost_usd"].as_f64(), r["tokens"].as_u64()),
        (Some(cost), Some(requests * (MOCK_INPUT + MOCK_OUTPUT))),
        "{r}"
    );
    let ended = log.iter().find(|e| e["kind"] == "run.ended").unwrap();
    assert!(ended["payload"]["detail"].as_str().unwrap().contains("max_cost_usd = 0.001"), "{ended}");
    // The API shows the same figure for the campaign, the session and the run.
    let spend = s.d.api_get(&format!("/campaigns/{}/spend", s.id));
    for f in [&spend["campaign"], &spend["sessions"][0], &spend["runs"][0]] {
        assert_eq!(f["cost_usd"].as_f64(), Some(cost), "{spend}");
        assert_eq!(f["tokens"].as_u64(), Some(requests * (MOCK_INPUT + MOCK_OUTPUT)), "{spend}");
    }
    eprintln!("spend: {spend}");
}

/// The sanctioned exit (issue #34), end to end with the real CLI: the
/// model, told of `gadfly claim` in its first prompt, claims a limit with
/// evidence from its Bash tool (the hook token in its shell); the limit
/// claim's challenge question reaches the model; a person accepts the claim
/// through the API the console uses; the model's stop is then let through
/// as an accepted limit, the run ends "stopped: limit accepted by NAME" (not
/// completed), and the audit counts it apart from completion claims.
#[test]
fn a_spawned_claude_claims_a_limit_is_challenged_and_stops_once_a_person_accepts_it() {
    let Some(bin) = claude_bin("a_spawned_claude_claims_a_limit_is_challenged_and_stops_once_a_person_accepts_it")
    else {
        return;
    };
    const WHY: &str = "Scenario b is memory bound at 97% of peak DRAM bandwidth; no schedule can beat it.";
    const STOP: &str = "The measurement stands: b is at the bandwidth limit. Stopping at the accepted limit.";
    let dir = tempfile::tempdir().unwrap();
    let (ready, go) = (dir.path().join("ready"), dir.path().join("go"));
    let evidence = dir.path().join("roofline.txt");
    let claim = format!(
        "printf 'achieved 1.31 TB/s of 1.35 TB/s peak\\n' > '{ev}' && \"$GADFLY_BIN\" claim limit --why '{WHY}' --evidence '{ev}' && sleep 1",
        ev = evidence.display()
    );
    let mock = MockModel::start(vec![
        Step::shell(&claim).described("Claim the limit"),
        // Until the challenge question arrives the model waits a second more.
        Step::shell(&wait_for_file(&ready, &go))
            .described("Wait for the verdict")
            .when_body_contains("gadfly noticed a limit claim moment")
            .otherwise_shell("sleep 1"),
        Step::text(STOP),
    ]);
    let s = Setup::new(&bin, &mock, "");
    let run = s.start_run();
    assert!(
        wait_for(TIMEOUT, || ready.exists()),
        "the challenge question never reached the model: {}",
        s.explain(&mock)
    );

    // The claim, with the agent's words and evidence, and its question.
    let log = s.log();
    let filed =
        log.iter().find(|e| e["kind"] == "claim").unwrap_or_else(|| panic!("no claim was filed: {}", s.explain(&mock)));
    assert_eq!(filed["payload"]["claim"], "limit");
    assert_eq!(filed["payload"]["why"], WHY);
    assert_eq!(filed["payload"]["evidence"][0]["name"], "roofline.txt");
    assert!(filed["payload"]["evidence"][0]["text"].as_str().unwrap().contains("1.35 TB/s peak"));
    let moment = log
        .iter()
        .find(|e| e["kind"] == "moment" && e["payload"]["detector"] == "gadfly_claim")
        .unwrap_or_else(|| panic!("no limit_claim moment: {}", s.explain(&mock)));
    let question = moment["payload"]["question"]["text"].as_str().unwrap().to_string();
    let requests = mock.agent_requests();
    assert!(
        requests.iter().any(|r| last_user_text(r).contains(&question)),
        "the challenge question reached the model: {question}\n{}",
        s.explain(&mock)
    );

    // A person accepts it through the console's API (the master token).
    let claim_id = filed["id"].as_i64().unwrap();
    let verdict = api_post(&s.d, &format!("/campaigns/{}/claims/{claim_id}/accept", s.id), r#"{"by": "ana"}"#);
    assert_eq!(verdict["state"], "stopped: limit accepted by ana", "{verdict}");
    std::fs::write(&go, "").unwrap();

    let end = run.finish(TIMEOUT);
    eprintln!("gadfly run (claude-code, limit claim) took {:.2} s\n{}", end.elapsed.as_secs_f64(), mock.describe());
    assert!(end.stdout.contains("ended: stopped: limit accepted by ana"), "{}\n{}", end.stdout, s.explain(&mock));
    assert!(!end.status.is_some_and(|st| st.success()), "an accepted limit is not a completed run");
    assert_eq!(mock.steps_served(), 3, "{}", s.explain(&mock));
    let runs = s.runs();
    assert_eq!(runs[0]["outcome"], "limit_accepted", "{runs}");

    // The opening message told the model of the exit.
    let opening = last_user_text(&mock.agent_requests()[0]);
    assert!(opening.contains("claim limit --why"), "{opening}");

    // Its stop was let through as an accepted limit, with the predicate failing.
    let stops = s.stops();
    let last = stops.last().unwrap();
    assert_eq!(last["decision"], "limit_accepted", "{stops:?}");
    assert_eq!(last["holds"], false);
    assert_eq!(last["claim"], STOP);

    // The audit shows the accepted limit apart from completions.
    let audit = s.d.api_get(&format!("/campaigns/{}/audit", s.id));
    assert_eq!(audit["limits_accepted"].as_array().unwrap().len(), 1, "{audit}");
    assert_eq!(audit["limits_accepted"][0]["by"], "ana");
    assert!(audit["records"].as_array().unwrap().iter().all(|r| r["decision"] != "limit_accepted"), "{audit}");
    assert!(audit["sessions"].as_array().unwrap().iter().all(|x| x["ended"] != "accepted"), "{audit}");
}
