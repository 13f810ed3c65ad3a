//! A scripted mock model server for driving the real agent CLIs offline.
//!
//! It listens on 127.0.0.1 (ephemeral port) and speaks two wire protocols:
//! - the Anthropic Messages API (`POST /v1/messages`, streamed as SSE), for
//!   Claude Code, whose shell tool is `Bash` with `{"command", "description"}`;
//! - the OpenAI Responses API (`POST /v1/responses`, streamed as SSE), for
//!   Codex, whose shell tool is `exec_command` with `{"cmd"}`.
//!
//! A [`Script`] is a list of [`Step`]s, each a reply (text, or a shell-tool
//! call) with an optional guard on what the latest request contains. Every
//! agent request takes the next step; a step whose guard does not match is
//! not consumed, and the request gets a fallback text (recorded in
//! [`MockModel::unmatched`]) so a test fails on its assertions instead of
//! hanging. Requests that are not the agent's own turn (Claude Code's title
//! or quota side requests: no `Bash` tool offered) get a short text and
//! consume nothing.
//!
//! Every request is recorded ([`MockModel::log`]), so tests assert on what
//! the model actually received. The server runs on its own thread with its
//! own Tokio runtime, so plain `#[test]` functions can use it.
#![allow(dead_code)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Router;
use serde_json::{json, Value};

/// One block of a scripted reply.
#[derive(Clone, Debug)]
pub enum Block {
    Text(String),
    /// A call of the agent's shell tool: `Bash` for Claude Code,
    /// `exec_command` for Codex.
    Shell {
        command: String,
        description: String,
    },
}

/// A guard on the request a step answers.
#[derive(Clone, Debug)]
pub enum Guard {
    /// The text of the latest user message (all of its text, tool results
    /// included) contains this.
    LastUserContains(String),
    /// The request body, serialized, contains this anywhere.
    BodyContains(String),
}

impl Guard {
    fn matches(&self, body: &Value) -> bool {
        match self {
            Guard::LastUserContains(s) => last_user_text(body).contains(s.as_str()),
            Guard::BodyContains(s) => body.to_string().contains(s.as_str()),
        }
    }
}

#[derive(Clone, Debug)]
pub struct Step {
    pub blocks: Vec<Block>,
    pub guard: Option<Guard>,
    /// What to answer, without consuming the step, while the guard does not
    /// match (None: the fallback text, recorded as unmatched).
    pub otherwise: Option<Vec<Block>>,
}

impl Step {
    /// Reply with text and end the turn.
    pub fn text(text: &str) -> Step {
        Step { blocks: vec![Block::Text(text.to_string())], guard: None, otherwise: None }
    }

    /// Call the shell tool with this command line.
    pub fn shell(command: &str) -> Step {
        Step {
            blocks: vec![Block::Shell { command: command.to_string(), description: "Run a command".to_string() }],
            guard: None,
            otherwise: None,
        }
    }

    /// Some text, then a shell-tool call, in one reply.
    pub fn say_then_shell(text: &str, command: &str) -> Step {
        Step {
            blocks: vec![
                Block::Text(text.to_string()),
                Block::Shell { command: command.to_string(), description: "Run a command".to_string() },
            ],
            guard: None,
            otherwise: None,
        }
    }

    pub fn described(mut self, description: &str) -> Step {
        for b in &mut self.blocks {
            if let Block::Shell { description: d, .. } = b {
                *d = description.to_string();
            }
        }
        self
    }

    /// Take this step only when the latest user message contains `needle`.
    pub fn when_last_user_contains(mut self, needle: &str) -> Step {
        self.guard = Some(Guard::LastUserContains(needle.to_string()));
        self
    }

    /// Take this step only when the request body contains `needle`.
    pub fn when_body_contains(mut self, needle: &str) -> Step {
        self.guard = Some(Guard::BodyContains(needle.to_string()));
        self
    }

    /// While the guard does not match, answer `text` (ending that turn)
    /// without consuming this step: "say X until the request shows Y".
    pub fn otherwise_text(mut self, text: &str) -> Step {
        self.otherwise = Some(vec![Block::Text(text.to_string())]);
        self
    }

    /// While the guard does not match, call the shell tool with `command`
    /// (the turn goes on) without consuming this step: "wait until the
    /// request shows Y". Used where what the guard waits for reaches the
    /// agent asynchronously (a question written to its stdin mid-turn), so a
    /// slow machine costs another round trip instead of a failed test.
    pub fn otherwise_shell(mut self, command: &str) -> Step {
        self.otherwise =
            Some(vec![Block::Shell { command: command.to_string(), description: "Wait a moment".to_string() }]);
        self
    }
}

pub type Script = Vec<Step>;

/// What a request was, as the mock classified it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// An agent turn answered from the script (or by the fallback).
    Agent,
    /// A side request of the CLI (title, quota, count_tokens...), answered
    /// without touching the script.
    Side,
    /// Anything else (model listing, unknown endpoints).
    Other,
}

#[derive(Clone, Debug)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub headers: Value,
    pub body: Value,
    pub kind: Kind,
    /// The index of the script step that answered it, if any.
    pub step: Option<usize>,
    pub at: Instant,
}

#[derive(Default)]
struct Inner {
    script: Vec<Step>,
    next: usize,
    log: Vec<Recorded>,
    unmatched: Vec<String>,
    counter: u64,
    /// How long an agent turn takes to answer (a real model's latency).
    latency: Duration,
}

pub struct MockModel {
    pub url: String,
    pub port: u16,
    state: Arc<Mutex<Inner>>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl MockModel {
    pub fn start(script: Script) -> MockModel {
        Self::start_with_latency(script, Duration::ZERO)
    }

    /// Like [`Self::start`], answering each agent turn after `latency`, as a
    /// real model would take (side requests stay instant).
    pub fn start_with_latency(script: Script, latency: Duration) -> MockModel {
        let state = Arc::new(Mutex::new(Inner { script, latency, ..Default::default() }));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind the mock model server");
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let app_state = state.clone();
        let thread = std::thread::Builder::new()
            .name("mock-model".into())
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                    .expect("mock model runtime");
                rt.block_on(async move {
                    let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                    let app = Router::new().fallback(handle).with_state(app_state);
                    axum::serve(listener, app)
                        .with_graceful_shutdown(async {
                            let _ = rx.await;
                        })
                        .await
                        .unwrap();
                });
            })
            .unwrap();
        MockModel { url: format!("http://127.0.0.1:{port}"), port, state, shutdown: Some(tx), thread: Some(thread) }
    }

    /// Every JSON body the server received, in order (all kinds).
    pub fn requests(&self) -> Vec<Value> {
        self.state.lock().unwrap().log.iter().map(|r| r.body.clone()).collect()
    }

    /// The agent's own model requests (side requests filtered out).
    pub fn agent_requests(&self) -> Vec<Value> {
        self.log().into_iter().filter(|r| r.kind == Kind::Agent).map(|r| r.body).collect()
    }

    pub fn log(&self) -> Vec<Recorded> {
        self.state.lock().unwrap().log.clone()
    }

    /// How many script steps were served.
    pub fn steps_served(&self) -> usize {
        self.state.lock().unwrap().next
    }

    /// Agent requests the script had no step for (a description of each).
    pub fn unmatched(&self) -> Vec<String> {
        self.state.lock().unwrap().unmatched.clone()
    }

    /// Waits until `n` script steps have been served; false on timeout.
    pub fn wait_for_steps(&self, n: usize, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if self.steps_served() >= n {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    /// A readable summary of what the mock saw, for failure messages.
    pub fn describe(&self) -> String {
        let mut out = String::new();
        for (i, r) in self.log().iter().enumerate() {
            let last = last_user_text(&r.body);
            let last: String = last.chars().rev().take(300).collect::<Vec<_>>().into_iter().rev().collect();
            out.push_str(&format!(
                "#{i} {} {} {:?} step={:?} last user: {:?}\n",
                r.method, r.path, r.kind, r.step, last
            ));
        }
        let unmatched = self.unmatched();
        if !unmatched.is_empty() {
            out.push_str(&format!("unmatched: {unmatched:?}\n"));
        }
        out
    }
}

impl Drop for MockModel {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        // Do not join: a CLI that still holds a keep-alive connection would
        // keep the graceful shutdown waiting. The thread ends with the test.
        let _ = self.thread.take();
    }
}

/// All text of the latest user message of a request, either API: a string
/// content, text blocks, tool results (Anthropic) or `input_text` parts and
/// tool outputs (Responses). Messages with role `system` are skipped.
pub fn last_user_text(body: &Value) -> String {
    if let Some(messages) = body.get("messages").and_then(Value::as_array) {
        if let Some(m) = messages.iter().rev().find(|m| m["role"] == "user") {
            return content_text(&m["content"]);
        }
    }
    if let Some(input) = body.get("input") {
        if let Some(s) = input.as_str() {
            return s.to_string();
        }
        if let Some(items) = input.as_array() {
            if let Some(m) = items.iter().rev().find(|m| m["role"] == "user") {
                return content_text(&m["content"]);
            }
        }
    }
    String::new()
}

/// The messages of a request (either API) whose text contains `needle`, as
/// (role, text), in order. Claude Code puts some hook output in messages
/// with role `system` in the middle of the conversation.
pub fn messages_containing(body: &Value, needle: &str) -> Vec<(String, String)> {
    let list = body.get("messages").or_else(|| body.get("input")).and_then(Value::as_array);
    list.into_iter()
        .flatten()
        .filter_map(|m| {
            let text = content_text(&m["content"]);
            text.contains(needle).then(|| (m["role"].as_str().unwrap_or("").to_string(), text))
        })
        .collect()
}

/// The last input item of a Responses request, whatever its type.
pub fn last_input_item(body: &Value) -> Value {
    body["input"].as_array().and_then(|a| a.last().cloned()).unwrap_or(Value::Null)
}

fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => {
            let mut out = Vec::new();
            for p in parts {
                if let Some(t) = p.get("text").and_then(Value::as_str) {
                    out.push(t.to_string());
                } else if p["type"] == "tool_result" {
                    out.push(content_text(&p["content"]));
                }
            }
            out.join("\n")
        }
        _ => String::new(),
    }
}

/// A Claude Code request is the agent's turn when it offers the `Bash` tool;
/// title generation and quota checks offer no tools.
pub fn is_side_request(body: &Value) -> bool {
    let tools = body.get("tools").and_then(Value::as_array);
    match tools {
        None => true,
        Some(t) => !t.iter().any(|t| t["name"] == "Bash" || t["name"] == "exec_command"),
    }
}

async fn handle(State(state): State<Arc<Mutex<Inner>>>, req: Request) -> Response {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let query = req.uri().query().map(str::to_string);
    let headers = header_json(req.headers());
    let bytes: Bytes = axum::body::to_bytes(req.into_body(), 64 * 1024 * 1024).await.unwrap_or_default();
    let body: Value = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes).unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()))
    };
    let full_path = match &query {
        Some(q) => format!("{path}?{q}"),
        None => path.clone(),
    };
    let mut record = Recorded {
        method: method.to_string(),
        path: full_path,
        headers,
        body: body.clone(),
        kind: Kind::Other,
        step: None,
        at: Instant::now(),
    };

    let response = if method == Method::POST && path.ends_with("/messages/count_tokens") {
        record.kind = Kind::Side;
        axum::Json(json!({"input_tokens": 42})).into_response()
    } else if method == Method::POST && path.ends_with("/messages") {
        let (blocks, kind, step) = choose(&state, &body);
        record.kind = kind;
        record.step = step;
        let latency = state.lock().unwrap().latency;
        if kind == Kind::Agent && !latency.is_zero() {
            tokio::time::sleep(latency).await;
        }
        let n = bump(&state);
        anthropic_reply(&body, &blocks, n)
    } else if method == Method::POST && path.ends_with("/responses") {
        let (blocks, kind, step) = choose(&state, &body);
        record.kind = kind;
        record.step = step;
        let n = bump(&state);
        responses_reply(&body, &blocks, n)
    } else if method == Method::GET && path.ends_with("/models") {
        axum::Json(json!({
            "object": "list",
            "data": [{"id": "gpt-5.5", "object": "model", "created": 0, "owned_by": "mock"},
                     {"id": "claude-opus-5-5", "type": "model", "display_name": "mock"}],
            "models": [],
            "has_more": false
        }))
        .into_response()
    } else if method == Method::GET || method == Method::HEAD {
        axum::Json(json!({})).into_response()
    } else {
        (
            StatusCode::NOT_FOUND,
            axum::Json(json!({"error": {"type": "not_found", "message": "mock: no such endpoint"}})),
        )
            .into_response()
    };
    state.lock().unwrap().log.push(record);
    response
}

fn header_json(h: &HeaderMap) -> Value {
    let mut m = serde_json::Map::new();
    for (k, v) in h {
        m.insert(k.to_string(), Value::String(v.to_str().unwrap_or("").to_string()));
    }
    Value::Object(m)
}

fn bump(state: &Arc<Mutex<Inner>>) -> u64 {
    let mut s = state.lock().unwrap();
    s.counter += 1;
    s.counter
}

/// Picks the reply: a side request gets a short text; an agent request
/// gets the next script step if its guard matches, else the fallback.
fn choose(state: &Arc<Mutex<Inner>>, body: &Value) -> (Vec<Block>, Kind, Option<usize>) {
    if is_side_request(body) {
        return (vec![Block::Text("Mock title".to_string())], Kind::Side, None);
    }
    let mut s = state.lock().unwrap();
    let idx = s.next;
    match s.script.get(idx).cloned() {
        Some(step) if step.guard.as_ref().is_none_or(|g| g.matches(body)) => {
            s.next += 1;
            (step.blocks, Kind::Agent, Some(idx))
        }
        Some(Step { otherwise: Some(blocks), .. }) => (blocks, Kind::Agent, None),
        Some(step) => {
            let last = last_user_text(body);
            s.unmatched.push(format!("step {idx} waits for {:?}; the last user message was {last:?}", step.guard));
            (vec![Block::Text(format!("mock model: step {idx} is waiting for {:?}.", step.guard))], Kind::Agent, None)
        }
        None => {
            let last = last_user_text(body);
            s.unmatched.push(format!("script exhausted after {idx} steps; the last user message was {last:?}"));
            (vec![Block::Text("mock model: the script has ended.".to_string())], Kind::Agent, None)
        }
    }
}

fn sse(events: &[(&str, Value)]) -> String {
    let mut out = String::new();
    for (name, data) in events {
        out.push_str(&format!("event: {name}\ndata: {data}\n\n"));
    }
    out
}

fn sse_response(text: String) -> Response {
    Response::builder()
        .status(200)
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
        .body(axum::body::Body::from(text))
        .unwrap()
}

// ---------------------------------------------------------------- Anthropic

fn anthropic_reply(req: &Value, blocks: &[Block], n: u64) -> Response {
    let model = req["model"].as_str().unwrap_or("claude-opus-5-5").to_string();
    let id = format!("msg_mock_{n:04}");
    let mut content = Vec::new();
    let mut has_tool = false;
    for (i, b) in blocks.iter().enumerate() {
        match b {
            Block::Text(t) => content.push(json!({"type": "text", "text": t})),
            Block::Shell { command, description } => {
                has_tool = true;
                content.push(json!({
                    "type": "tool_use",
                    "id": format!("toolu_mock_{n:04}_{i}"),
                    "name": "Bash",
                    "input": {"command": command, "description": description},
                }))
            }
        }
    }
    let stop_reason = if has_tool { "tool_use" } else { "end_turn" };
    let usage = json!({"input_tokens": 100, "output_tokens": 20, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0});
    if req["stream"] != true {
        return axum::Json(json!({
            "id": id, "type": "message", "role": "assistant", "model": model, "content": content,
            "stop_reason": stop_reason, "stop_sequence": null, "usage": usage,
        }))
        .into_response();
    }
    let mut events = vec![
        (
            "message_start",
            json!({"type": "message_start", "message": {
                "id": id, "type": "message", "role": "assistant", "model": model, "content": [],
                "stop_reason": null, "stop_sequence": null,
                "usage": {"input_tokens": 100, "output_tokens": 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}}),
        ),
        ("ping", json!({"type": "ping"})),
    ];
    for (i, c) in content.iter().enumerate() {
        if c["type"] == "text" {
            events.push((
                "content_block_start",
                json!({"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}}),
            ));
            events.push((
                "content_block_delta",
                json!({"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": c["text"]}}),
            ));
        } else {
            events.push((
                "content_block_start",
                json!({"type": "content_block_start", "index": i, "content_block": {"type": "tool_use", "id": c["id"], "name": c["name"], "input": {}}}),
            ));
            events.push((
                "content_block_delta",
                json!({"type": "content_block_delta", "index": i, "delta": {"type": "input_json_delta", "partial_json": c["input"].to_string()}}),
            ));
        }
        events.push(("content_block_stop", json!({"type": "content_block_stop", "index": i})));
    }
    events.push((
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null}, "usage": {"output_tokens": 20}}),
    ));
    events.push(("message_stop", json!({"type": "message_stop"})));
    sse_response(sse(&events))
}

// ---------------------------------------------------------- OpenAI Responses

fn responses_reply(req: &Value, blocks: &[Block], n: u64) -> Response {
    let model = req["model"].as_str().unwrap_or("gpt-5.5").to_string();
    let resp_id = format!("resp_mock_{n:04}");
    let mut items = Vec::new();
    for (i, b) in blocks.iter().enumerate() {
        match b {
            Block::Text(t) => items.push(json!({
                "type": "message", "role": "assistant", "id": format!("msg_mock_{n:04}_{i}"), "status": "completed",
                "content": [{"type": "output_text", "text": t, "annotations": []}],
            })),
            Block::Shell { command, .. } => items.push(json!({
                "type": "function_call", "id": format!("fc_mock_{n:04}_{i}"), "call_id": format!("call_mock_{n:04}_{i}"),
                "name": "exec_command", "arguments": json!({"cmd": command}).to_string(), "status": "completed",
            })),
        }
    }
    let usage = json!({
        "input_tokens": 100, "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 20, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 120
    });
    let mut seq = 0u64;
    let mut next = || {
        seq += 1;
        seq
    };
    let mut events = vec![(
        "response.created",
        json!({"type": "response.created", "sequence_number": next(), "response": {
            "id": resp_id, "object": "response", "status": "in_progress", "model": model, "output": []}}),
    )];
    for (i, item) in items.iter().enumerate() {
        let mut started = item.clone();
        started["status"] = json!("in_progress");
        if item["type"] == "message" {
            started["content"] = json!([]);
        }
        events.push((
            "response.output_item.added",
            json!({"type": "response.output_item.added", "sequence_number": next(), "output_index": i, "item": started}),
        ));
        if item["type"] == "message" {
            events.push((
                "response.output_text.delta",
                json!({"type": "response.output_text.delta", "sequence_number": next(), "item_id": item["id"],
                       "output_index": i, "content_index": 0, "delta": item["content"][0]["text"]}),
            ));
        }
        events.push((
            "response.output_item.done",
            json!({"type": "response.output_item.done", "sequence_number": next(), "output_index": i, "item": item}),
        ));
    }
    events.push((
        "response.completed",
        json!({"type": "response.completed", "sequence_number": next(), "response": {
            "id": resp_id, "object": "response", "status": "completed", "model": model, "output": items, "usage": usage}}),
    ));
    sse_response(sse(&events))
}

// ------------------------------------------------------- running a real CLI

/// A finished (or killed) agent CLI run.
pub struct AgentRun {
    pub status: Option<std::process::ExitStatus>,
    pub timed_out: bool,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl AgentRun {
    /// The stdout lines that parse as JSON (stream-json / --json events).
    pub fn events(&self) -> Vec<Value> {
        self.stdout.lines().filter_map(|l| serde_json::from_str(l.trim()).ok()).collect()
    }

    pub fn code(&self) -> Option<i32> {
        self.status.and_then(|s| s.code())
    }

    /// A failure message with the CLI's output and what the mock saw.
    pub fn explain(&self, mock: &MockModel) -> String {
        let tail = |s: &str, n: usize| -> String {
            let lines: Vec<&str> = s.lines().collect();
            lines[lines.len().saturating_sub(n)..].join("\n")
        };
        format!(
            "exit {:?}{} after {:.1} s\n--- stderr (tail) ---\n{}\n--- stdout (tail) ---\n{}\n--- mock ---\n{}",
            self.code(),
            if self.timed_out { " (killed at the timeout)" } else { "" },
            self.elapsed.as_secs_f64(),
            tail(&self.stderr, 40),
            tail(&self.stdout, 40),
            mock.describe()
        )
    }
}

/// Runs `cmd` in its own process group with stdin from /dev/null and
/// stdout/stderr captured in files; after `timeout` the whole group gets
/// SIGINT, then SIGKILL two seconds later.
pub fn run_agent(mut cmd: std::process::Command, timeout: Duration) -> AgentRun {
    use std::os::unix::process::CommandExt;
    use std::process::Stdio;
    let dir = tempfile::tempdir().unwrap();
    let out_path = dir.path().join("stdout");
    let err_path = dir.path().join("stderr");
    cmd.stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .process_group(0);
    let started = Instant::now();
    let mut child = cmd.spawn().expect("spawn the agent CLI");
    let pgid = nix::unistd::Pid::from_raw(child.id() as i32);
    let mut timed_out = false;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if started.elapsed() > timeout {
            timed_out = true;
            let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGINT);
            let grace = Instant::now();
            while grace.elapsed() < Duration::from_secs(2) {
                if child.try_wait().unwrap().is_some() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
            break child.wait().ok();
        }
        std::thread::sleep(Duration::from_millis(25));
    };
    // Tools the agent started in the background must not outlive the test.
    let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
    AgentRun {
        status,
        timed_out,
        stdout: std::fs::read_to_string(&out_path).unwrap_or_default(),
        stderr: std::fs::read_to_string(&err_path).unwrap_or_default(),
        elapsed: started.elapsed(),
    }
}

/// The agent CLI for a test, or None after a visible `SKIPPED` line when it
/// is not installed. With `GADFLY_REQUIRE_AGENTS=1` (CI, after
/// `.ci/install-agents.sh`) a missing CLI fails the test instead.
pub fn agent_or_skip(env_var: &str, name: &str, test: &str) -> Option<std::path::PathBuf> {
    use std::io::Write;
    let bin = agent_bin(env_var, name);
    if bin.is_none() {
        let why = format!(
            "the `{name}` CLI is not installed (set {env_var}, or run .ci/install-agents.sh to fill \
             ${{GADFLY_AGENTS_DIR:-$HOME/.cache/gadfly-agents}})"
        );
        assert!(std::env::var("GADFLY_REQUIRE_AGENTS").map_or(true, |v| v != "1"), "{test}: {why}");
        // Straight to the stderr handle: the test harness captures eprintln!.
        let _ = writeln!(std::io::stderr().lock(), "SKIPPED: {test}: {why}");
    }
    bin
}

/// The path of an agent CLI: `$ENV_VAR`, else the cache that
/// `.ci/install-agents.sh` fills. None when it is not installed.
pub fn agent_bin(env_var: &str, name: &str) -> Option<std::path::PathBuf> {
    if let Some(p) = std::env::var_os(env_var).filter(|p| !p.is_empty()) {
        let p = std::path::PathBuf::from(p);
        return p.exists().then_some(p);
    }
    let dir = std::env::var_os("GADFLY_AGENTS_DIR")
        .filter(|d| !d.is_empty())
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| std::path::PathBuf::from(h).join(".cache/gadfly-agents")))?;
    let p = dir.join("node_modules/.bin").join(name);
    p.exists().then_some(p)
}

/// `claude -p PROMPT` (stream-json, permissions skipped) in `workspace`,
/// offline against `mock`: a clean environment with its own HOME and
/// CLAUDE_CONFIG_DIR (`home/claude-config`), the `gadfly` under test first
/// on PATH. Callers add gadfly's settings and variables.
pub fn offline_claude(
    bin: &std::path::Path,
    home: &std::path::Path,
    mock: &MockModel,
    workspace: &std::path::Path,
    prompt: &str,
) -> std::process::Command {
    let config = home.join("claude-config");
    std::fs::create_dir_all(&config).unwrap();
    let mut cmd = std::process::Command::new(bin);
    cmd.args(["-p", prompt, "--output-format", "stream-json", "--verbose", "--dangerously-skip-permissions"])
        .current_dir(workspace)
        .env_clear()
        .env("PATH", path_with_gadfly())
        .env("HOME", home)
        .env("LANG", "C.UTF-8")
        .env("CLAUDE_CONFIG_DIR", &config)
        .env("ANTHROPIC_BASE_URL", &mock.url)
        .env("ANTHROPIC_API_KEY", "dummy")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("IS_SANDBOX", "1");
    cmd
}

/// PATH with the directory of the `gadfly` binary under test first.
pub fn path_with_gadfly() -> std::ffi::OsString {
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_gadfly"));
    let mut dirs = vec![bin.parent().unwrap().to_path_buf()];
    if let Some(p) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&p));
    }
    std::env::join_paths(dirs).unwrap()
}
