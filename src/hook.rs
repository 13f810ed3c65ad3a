//! `gadfly hook AGENT EVENT --campaign ID`: the command an agent's hook
//! configuration runs. It reads the hook's JSON on stdin, hands it to the
//! daemon and prints what the agent expects on stdout.
//!
//! Claude Code lets an agent through when a hook times out, crashes or
//! prints something invalid, so the Stop gate fails closed here: if the
//! daemon cannot be reached before the deadline, a stop is blocked with a
//! reason that says so. A campaign the daemon does not know never blocks.
//!
//! With `--daemon-key` the hook takes only answers the daemon signed for
//! this very call (see `signing`); any other answer is treated like a daemon
//! that cannot be reached, since a server an agent started on the daemon's
//! port could otherwise let every stop through.

use std::io::Read;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::agent::CLAUDE_CODE_EVENTS;
use crate::campaign::GateSpec;
use crate::client::{ApiFailure, Client};
use crate::config::ClientConfig;

const MAX_PAYLOAD: usize = 16 * 1024 * 1024;

/// What the hook process does: its stdout, its stderr and its exit code.
#[derive(Debug, PartialEq)]
pub struct HookExit {
    pub stdout: Option<String>,
    pub stderr: Option<String>,
    pub code: u8,
}

impl HookExit {
    /// Adds a line to what the hook prints on stderr.
    fn add_note(&mut self, note: &str) {
        self.stderr = Some(match self.stderr.take() {
            Some(s) => format!("{s}\n{note}"),
            None => note.to_string(),
        });
    }
}

/// Checks the payload the agent gave on stdin: a JSON object.
pub fn read_payload(input: &[u8]) -> Result<Value, String> {
    if input.len() > MAX_PAYLOAD {
        return Err(format!("the hook payload on stdin is {} bytes, over the {} byte limit", input.len(), MAX_PAYLOAD));
    }
    let text = std::str::from_utf8(input).map_err(|e| format!("the hook payload on stdin is not UTF-8: {e}"))?;
    if text.trim().is_empty() {
        return Err("the hook payload on stdin is empty: expected one JSON object from the agent".into());
    }
    let value: Value = serde_json::from_str(text).map_err(|e| {
        format!("the hook payload on stdin is not valid JSON (line {}, column {}): {e}", e.line(), e.column())
    })?;
    if !value.is_object() {
        return Err(format!("the hook payload on stdin must be a JSON object, got {}", kind(&value)));
    }
    Ok(value)
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// How long a hook keeps retrying a daemon it cannot connect to at all
/// (down, restarting) before it answers on its own; a daemon that took the
/// connection is waited for up to the deadline (an evaluation may be slow).
const CONNECT_WAIT: Duration = Duration::from_secs(20);

/// At most this long is spent replaying spooled calls in one hook run.
const REPLAY_BUDGET: Duration = Duration::from_secs(3);

/// The events whose answer decides whether the agent may stop.
const GATE_EVENTS: &[&str] = &["stop", "subagent-stop"];

/// Runs the hook for `agent`/`event` on `input`. `gate` is the campaign's
/// policy for a stop the daemon cannot judge. `daemon_key` is the daemon's
/// public key pinned in the hook's command line (`--daemon-key`): with it,
/// an answer the daemon did not sign for this call (a fake server on its
/// port, a replayed answer) counts as "daemon unavailable": the stop fails
/// closed per `gate` and the call is spooled. Without it the hook cannot
/// tell the daemon from another server, and says so on stderr at a stop.
/// The hook answers within `deadline` seconds (`--deadline`), else within
/// `GADFLY_HOOK_DEADLINE_S`, else 540 s for a stop and 2 s for the rest.
pub async fn run(
    agent: &str,
    event: &str,
    campaign: &str,
    input: &[u8],
    gate: GateSpec,
    daemon_key: Option<&str>,
    deadline: Option<f64>,
) -> HookExit {
    let mut exit = call(agent, event, campaign, input, gate, daemon_key, deadline, &Where::from_env()).await;
    if daemon_key.is_none() && exit.code == 0 && GATE_EVENTS.contains(&event) {
        exit.add_note("gadfly hook: no --daemon-key pinned, so this hook cannot tell the gadfly daemon from another server on its port; `gadfly attach` writes hooks that pin it (`gadfly doctor` prints the key)");
    }
    exit
}

/// Where a hook finds its daemon and its spool (from the environment:
/// `GADFLY_URL`, `GADFLY_TOKEN`, `GADFLY_SPOOL_DIR`).
#[derive(Debug, Clone)]
pub struct Where {
    pub config: ClientConfig,
    pub spool: std::path::PathBuf,
}

impl Where {
    pub fn from_env() -> Where {
        Where { config: ClientConfig::from_env(), spool: crate::spool::dir() }
    }
}

#[allow(clippy::too_many_arguments)]
async fn call(
    agent: &str,
    event: &str,
    campaign: &str,
    input: &[u8],
    gate: GateSpec,
    daemon_key: Option<&str>,
    deadline: Option<f64>,
    at: &Where,
) -> HookExit {
    if agent == "claude-code" && !CLAUDE_CODE_EVENTS.contains(&event) {
        return HookExit {
            stdout: None,
            stderr: Some(format!(
                "gadfly hook: unknown Claude Code event `{event}`; expected one of: {}",
                CLAUDE_CODE_EVENTS.join(", ")
            )),
            code: 2,
        };
    }
    let payload = match read_payload(input) {
        Ok(p) => p,
        Err(e) => return HookExit { stdout: None, stderr: Some(format!("gadfly hook {event}: {e}")), code: 2 },
    };
    let is_stop = event == "stop";
    // The stop gate may wait for a whole evaluation (the deadline stays
    // below the 600 s timeout gadfly writes for it); other events must not
    // slow the agent down: they fail open fast.
    // `--deadline` (or GADFLY_HOOK_DEADLINE_S): the hook answers within it
    // whatever happens, so set it below the agent's own timeout for the
    // hook (a hook the agent kills answers nothing and spools nothing).
    let deadline = Duration::from_secs_f64(
        deadline
            .or_else(|| std::env::var("GADFLY_HOOK_DEADLINE_S").ok().and_then(|v| v.parse::<f64>().ok()))
            .filter(|d| d.is_finite() && *d > 0.0)
            .unwrap_or(if is_stop { 540.0 } else { 2.0 }),
    );
    let connect_wait = CONNECT_WAIT.min(deadline);
    let call_id = crate::config::random_hex(16);
    let unreachable = |why: String| Unreachable {
        agent,
        event,
        campaign,
        call_id: call_id.clone(),
        payload: payload.clone(),
        why,
        gate,
        spool: at.spool.clone(),
    };
    let pin = match daemon_key.map(crate::signing::parse_public) {
        None => None,
        Some(Ok(key)) => Some(key),
        // Nothing could be trusted: answer as if the daemon were down.
        Some(Err(e)) => return unreachable(format!("--daemon-key: {e}")).answer(),
    };
    let config = at.config.clone();
    let client = match Client::new(&config, deadline) {
        Ok(c) => c,
        Err(e) => return unreachable(format!("cannot build an HTTP client: {e}")).answer(),
    };
    let spool_dir = at.spool.clone();
    let path = format!("/campaigns/{campaign}/hooks/{agent}/{event}");
    let body = serde_json::to_vec(&payload).unwrap_or_default();
    let started = Instant::now();
    let mut backoff = Duration::from_millis(100);
    let mut replayed = false;
    loop {
        // What an earlier hook could not deliver goes first, in order.
        if !replayed {
            replayed = replay(&client, &spool_dir, campaign, pin.as_ref()).await;
        }
        let to = Addressee { campaign, agent, event };
        let answer = post_signed(&client, &path, body.clone(), &call_id, pin.as_ref(), to).await;
        match answer {
            Ok(reply) => {
                if is_stop {
                    let session = payload.get("session_id").and_then(Value::as_str);
                    unspooled_blocks::clear(campaign, session);
                }
                let stdout = match &reply["output"] {
                    Value::Null => None,
                    v => Some(v.to_string()),
                };
                return HookExit { stdout, stderr: None, code: 0 };
            }
            Err(e) => {
                // Whoever answered is not the daemon this hook pins: waiting
                // will not change that (it holds the port).
                if let Some(NotTheDaemon(why)) = e.downcast_ref::<NotTheDaemon>() {
                    return unreachable(why.clone()).answer();
                }
                if let Some(api) = e.downcast_ref::<ApiFailure>() {
                    if api.status == 404 {
                        // Never block a session gadfly cannot tie to a campaign.
                        return HookExit {
                            stdout: None,
                            stderr: Some(format!("gadfly hook: {} (this hook call is not gated)", api.message)),
                            code: 0,
                        };
                    }
                    if api.status == 413 {
                        // Too large for the daemon: kept in the spool (never
                        // dropped) and answered as if the daemon were down.
                        return unreachable(format!("the daemon refused this call for its size: {api}")).answer();
                    }
                    if api.status < 500 && api.status != 408 && api.status != 429 {
                        return fail_refused(is_stop, &api.to_string());
                    }
                }
                let no_connection =
                    e.chain().any(|c| c.downcast_ref::<reqwest::Error>().is_some_and(|r| r.is_connect()));
                // A campaign that fails open lets a stop through at once when
                // nothing answers: waiting would only hold the agent up.
                if no_connection && is_stop && !gate.fail_closed {
                    return unreachable(format!("{e:#}")).answer();
                }
                let limit = if no_connection { connect_wait } else { deadline };
                if started.elapsed() + backoff >= limit {
                    return unreachable(format!("{e:#}")).answer();
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(2));
            }
        }
    }
}

/// The hook route an answer was signed for.
#[derive(Clone, Copy)]
struct Addressee<'a> {
    campaign: &'a str,
    agent: &'a str,
    event: &'a str,
}

/// Posts one hook call with a fresh nonce and, with a pinned key, takes the
/// answer only if the daemon signed it for this nonce and route (else
/// [`NotTheDaemon`]).
async fn post_signed(
    client: &Client,
    path: &str,
    body: Vec<u8>,
    call_id: &str,
    pin: Option<&ed25519_dalek::VerifyingKey>,
    to: Addressee<'_>,
) -> anyhow::Result<Value> {
    let nonce = crate::signing::nonce();
    let raw = client.post_hook(path, body, call_id, &nonce).await?;
    if let Some(key) = pin {
        let signature = raw.signature.as_deref();
        crate::signing::verify_answer(key, signature, &nonce, to.campaign, to.agent, to.event, raw.status, &raw.body)
            .map_err(|why| anyhow::Error::new(NotTheDaemon(why)))?;
    }
    raw.into_result().map_err(anyhow::Error::from)
}

/// An answer that the daemon whose key the hook pins did not sign.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct NotTheDaemon(String);

/// Sends the spooled calls of `campaign` (the campaign this hook speaks
/// for, with its token) to the daemon, oldest first, within
/// [`REPLAY_BUDGET`]; true when none of them is left. Another campaign's
/// calls are left for its own hooks: replayed with this hook's token they
/// would be refused, and a hook of one campaign must never be able to
/// discard another's records. With a pinned key, a file is removed only
/// when the daemon signed its answer: a fake server cannot make the hook
/// drop what it spooled.
async fn replay(
    client: &Client,
    dir: &std::path::Path,
    campaign: &str,
    pin: Option<&ed25519_dalek::VerifyingKey>,
) -> bool {
    let (pending, _damaged) = crate::spool::pending(dir);
    let started = Instant::now();
    for (path, call) in pending.into_iter().filter(|(_, c)| c.campaign == campaign) {
        if started.elapsed() > REPLAY_BUDGET {
            return false;
        }
        let Some(claimed) = crate::spool::claim(&path) else { continue };
        let replay_path = format!(
            "/campaigns/{}/hooks/{}/{}?spooled_at={}&outcome={}&why={}",
            call.campaign,
            call.agent,
            call.event,
            urlencode(&call.spooled_at),
            urlencode(&call.outcome),
            urlencode(&call.why)
        );
        let body = serde_json::to_vec(&call.payload).unwrap_or_default();
        let to = Addressee { campaign: &call.campaign, agent: &call.agent, event: &call.event };
        let answer = post_signed(client, &replay_path, body, &call.call_id, pin, to).await;
        match answer {
            Ok(_) => crate::spool::done(&claimed),
            // A token refused (this hook's, not the record's fault): the
            // record stays for a hook that holds the right one.
            Err(e) if e.downcast_ref::<ApiFailure>().is_some_and(|a| a.status == 401 || a.status == 403) => {
                crate::spool::release(&claimed, &path);
                return false;
            }
            // A campaign the daemon does not know, or a call it refuses:
            // replaying again will not help; keep the file aside.
            Err(e) if e.downcast_ref::<ApiFailure>().is_some_and(|a| a.status < 500 && a.status != 429) => {
                let kept = path.with_extension("rejected");
                let _ = std::fs::rename(&claimed, &kept);
                eprintln!("gadfly hook: a spooled call was refused by the daemon ({e:#}); kept in {}", kept.display());
            }
            Err(_) => {
                crate::spool::release(&claimed, &path);
                return false;
            }
        }
    }
    true
}

fn urlencode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A hook call the daemon could not take.
struct Unreachable<'a> {
    agent: &'a str,
    event: &'a str,
    campaign: &'a str,
    call_id: String,
    payload: Value,
    why: String,
    gate: GateSpec,
    spool: std::path::PathBuf,
}

impl Unreachable<'_> {
    /// Answers on the daemon's behalf and spools the call. A stop is
    /// blocked with "supervisor unavailable" (fail closed) at most
    /// `unavailable_blocks` times in a row for a session, then let through;
    /// with `fail open` it is let through at once; other events pass.
    fn answer(self) -> HookExit {
        let dir = self.spool.clone();
        let session = self.payload.get("session_id").and_then(Value::as_str).map(str::to_string);
        let (outcome, exit) = if self.event != "stop" {
            ("passed", HookExit { stdout: None, stderr: Some(format!("gadfly hook: {}", self.why)), code: 0 })
        } else {
            let blocked = crate::spool::blocked_stops(&dir, self.campaign, session.as_deref())
                + unspooled_blocks::count(self.campaign, session.as_deref());
            let limit = self.gate.unavailable_blocks as usize;
            if self.gate.fail_closed && blocked < limit {
                let reason = format!(
                    "gadfly: supervisor unavailable, so this stop is not allowed yet ({} of {limit}): {}. The supervisor may be restarting; try to stop again shortly, and tell the person supervising if this repeats.",
                    blocked + 1,
                    self.why
                );
                (
                    "blocked",
                    HookExit {
                        stdout: Some(json!({"decision": "block", "reason": reason}).to_string()),
                        stderr: Some(format!("gadfly hook: {}", self.why)),
                        code: 0,
                    },
                )
            } else {
                let why = if self.gate.fail_closed {
                    format!("the supervisor stayed unavailable through {limit} blocked stops; this stop goes through ungated")
                } else {
                    "the campaign fails open; this stop goes through ungated".to_string()
                };
                (
                    "allowed",
                    HookExit { stdout: None, stderr: Some(format!("gadfly hook: {}: {why}", self.why)), code: 0 },
                )
            }
        };
        let call = crate::spool::SpooledCall {
            campaign: self.campaign.to_string(),
            agent: self.agent.to_string(),
            event: self.event.to_string(),
            call_id: self.call_id,
            payload: self.payload,
            spooled_at: crate::time::now(),
            outcome: outcome.to_string(),
            why: self.why,
        };
        let blocked = outcome == "blocked";
        let (campaign, session) = (call.campaign.clone(), session);
        match crate::spool::write(&dir, &call) {
            Ok(_) => exit,
            Err(e) => {
                // The block still counts towards `unavailable_blocks`, or an
                // unwritable spool would block the agent for ever.
                if blocked {
                    unspooled_blocks::add(&campaign, session.as_deref());
                }
                // Nothing durable holds this call: say so where a person looks.
                let mut exit = exit;
                exit.add_note(&format!("gadfly hook: could not spool this call to {}: {e:#}", dir.display()));
                exit
            }
        }
    }
}

/// Stops blocked "supervisor unavailable" that could not be spooled (a full
/// or unwritable spool): counted in a small file of the system's temporary
/// folder, per campaign and session, so that `unavailable_blocks` still
/// bounds the blocks. Cleared when the daemon answers a stop again.
mod unspooled_blocks {
    use sha2::Digest;

    fn path(campaign: &str, session: Option<&str>) -> std::path::PathBuf {
        let key = format!("{campaign}\0{}", session.unwrap_or(""));
        let id = hex::encode(&sha2::Sha256::digest(key.as_bytes())[..12]);
        std::env::temp_dir().join(format!("gadfly-unspooled-blocks-{id}"))
    }

    pub fn count(campaign: &str, session: Option<&str>) -> usize {
        std::fs::read_to_string(path(campaign, session)).ok().and_then(|t| t.trim().parse().ok()).unwrap_or(0)
    }

    pub fn add(campaign: &str, session: Option<&str>) {
        let n = count(campaign, session) + 1;
        if let Err(e) = std::fs::write(path(campaign, session), n.to_string()) {
            eprintln!("gadfly hook: this block could not be counted either ({e}); the next stop may be blocked again");
        }
    }

    pub fn clear(campaign: &str, session: Option<&str>) {
        let _ = std::fs::remove_file(path(campaign, session));
    }
}

/// The daemon refused the call (a 4xx other than 404): a stop is blocked
/// with the daemon's message (it is up, so the agent can fix its call or
/// retry), any other event goes through with a warning.
fn fail_refused(is_stop: bool, why: &str) -> HookExit {
    if is_stop {
        let reason = format!(
            "gadfly could not judge this stop attempt, so it is not allowed: {why}. Tell the person supervising if this repeats."
        );
        HookExit {
            stdout: Some(json!({"decision": "block", "reason": reason}).to_string()),
            stderr: Some(format!("gadfly hook: {why}")),
            code: 0,
        }
    } else {
        HookExit { stdout: None, stderr: Some(format!("gadfly hook: {why}")), code: 0 }
    }
}

/// Reads all of stdin (bounded).
pub fn read_stdin() -> std::io::Result<Vec<u8>> {
    let mut buf = Vec::new();
    std::io::stdin().take(MAX_PAYLOAD as u64 + 1).read_to_end(&mut buf)?;
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_errors_say_what_is_wrong() {
        assert!(read_payload(b"").unwrap_err().contains("empty"));
        let e = read_payload(b"{\"a\":\n  1,,}").unwrap_err();
        assert!(e.contains("line 2"), "{e}");
        assert!(read_payload(b"[1]").unwrap_err().contains("an array"));
        assert!(read_payload(&[0xff, 0xfe]).unwrap_err().contains("UTF-8"));
        assert!(read_payload(b"{\"session_id\":\"x\"}").is_ok());
    }

    #[tokio::test]
    async fn a_stop_is_blocked_a_bounded_number_of_times_when_the_daemon_is_down_and_every_call_is_spooled() {
        // The counting, not the timing (tests/hook_deadlines.rs runs the
        // real deadlines): a short deadline, and no process-wide variable.
        let spool = tempfile::tempdir().unwrap();
        let at = Where {
            config: ClientConfig { url: "http://127.0.0.1:9".into(), token: None },
            spool: spool.path().to_path_buf(),
        };
        let run = |agent: &'static str, event: &'static str, campaign: &'static str, input: &'static [u8], gate| {
            let at = at.clone();
            async move { call(agent, event, campaign, input, gate, None, Some(0.3), &at).await }
        };
        let closed = GateSpec { fail_closed: true, unavailable_blocks: 2, ..GateSpec::default() };
        let stop = br#"{"session_id":"s"}"#;
        for n in 1..=2 {
            let out = run("claude-code", "stop", "c1", stop, closed).await;
            assert_eq!(out.code, 0);
            let v: Value = serde_json::from_str(out.stdout.as_deref().unwrap()).unwrap();
            assert_eq!(v["decision"], "block");
            let reason = v["reason"].as_str().unwrap();
            assert!(reason.contains("supervisor unavailable") && reason.contains(&format!("({n} of 2)")), "{reason}");
        }
        let out = run("claude-code", "stop", "c1", stop, closed).await;
        assert_eq!(out.stdout, None, "the third stop goes through");
        assert!(out.stderr.unwrap().contains("ungated"));
        // Another session has its own count; a campaign that fails open lets it through at once.
        let other = run("claude-code", "stop", "c1", br#"{"session_id":"t"}"#, closed).await;
        assert!(other.stdout.is_some());
        let open = GateSpec { fail_closed: false, unavailable_blocks: 3, ..GateSpec::default() };
        let out = run("claude-code", "stop", "c2", stop, open).await;
        assert_eq!(out.stdout, None);
        let out = run("claude-code", "post-tool-use", "c1", stop, closed).await;
        assert_eq!((out.code, out.stdout), (0, None));
        let out = run("claude-code", "stopp", "c1", b"{}", closed).await;
        assert_eq!(out.code, 2);
        let (calls, bad) = crate::spool::pending(spool.path());
        assert!(bad.is_empty(), "{bad:?}");
        let outcomes: Vec<(&str, &str)> = calls.iter().map(|(_, c)| (c.event.as_str(), c.outcome.as_str())).collect();
        assert_eq!(
            outcomes,
            [
                ("stop", "blocked"),
                ("stop", "blocked"),
                ("stop", "allowed"),
                ("stop", "blocked"),
                ("stop", "allowed"),
                ("post-tool-use", "passed")
            ]
        );
        assert!(calls.iter().all(|(_, c)| c.why.contains("127.0.0.1:9")), "each says what it could not reach");
    }

    /// THREATS row 14: a call the daemon refuses for its size (413) was
    /// dropped; it is spooled now, and a stop is answered as if the daemon
    /// were down.
    #[tokio::test]
    async fn a_call_refused_for_its_size_is_spooled_not_dropped() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            loop {
                let Ok((mut conn, _)) = listener.accept().await else { return };
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 65536];
                    let _ = conn.read(&mut buf).await;
                    let body = r#"{"code":"too_large","message":"the request body is over the limit of 16 MiB"}"#;
                    let head = format!(
                        "HTTP/1.1 413 Payload Too Large\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = conn.write_all(head.as_bytes()).await;
                    let _ = conn.write_all(body.as_bytes()).await;
                });
            }
        });
        let spool = tempfile::tempdir().unwrap();
        let at = Where {
            config: ClientConfig { url: format!("http://127.0.0.1:{port}"), token: None },
            spool: spool.path().to_path_buf(),
        };
        let closed = GateSpec { fail_closed: true, unavailable_blocks: 3, ..GateSpec::default() };
        let tool = br#"{"session_id":"s","tool_use_id":"t"}"#;
        let out = call("claude-code", "post-tool-use", "c1", tool, closed, None, Some(5.0), &at).await;
        assert_eq!((out.code, out.stdout.as_deref()), (0, None));
        assert!(out.stderr.as_deref().unwrap_or("").contains("for its size"), "{:?}", out.stderr);
        let outcomes = |dir: &std::path::Path| {
            let (calls, _) = crate::spool::pending(dir);
            calls.iter().map(|(_, c)| (c.event.clone(), c.outcome.clone())).collect::<Vec<_>>()
        };
        assert_eq!(outcomes(spool.path()), [("post-tool-use".to_string(), "passed".to_string())]);
        let out = call("claude-code", "stop", "c1", br#"{"session_id":"s"}"#, closed, None, Some(5.0), &at).await;
        let v: Value = serde_json::from_str(out.stdout.as_deref().unwrap()).unwrap();
        assert_eq!(v["decision"], "block");
        // The stop's replay offered the first call again; refused again, it
        // is kept aside (`.rejected`), still not dropped.
        assert_eq!(outcomes(spool.path()), [("stop".to_string(), "blocked".to_string())]);
        let rejected = std::fs::read_dir(spool.path())
            .unwrap()
            .flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "rejected"))
            .count();
        assert_eq!(rejected, 1);
    }
}
