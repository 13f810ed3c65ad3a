//! The usage agents report, read into [`Usage`] (an `agent.usage` event;
//! summed by [`crate::spend`]):
//!
//! - Claude Code's stream-json: a `result` line has the turn's `usage` and
//!   the session's running `total_cost_usd` (the CLI's own price; it keeps
//!   counting across `--resume`); an `assistant` line has its message's
//!   `usage` as the stream knows it, input whole but output only as far as
//!   the message's start ([`claude_message`], for a budget mid-turn);
//! - a Claude Code transcript: an assistant line's `message.usage` (one line
//!   per content block, the last with the final output), and `cost-state`
//!   lines with the session's `totalCostUSD`, written when a CLI process
//!   ends (so a transcript's cost lags its tokens);
//! - Codex's `turn.completed` `usage`, the thread's running totals (tokens
//!   only: Codex reports no cost);
//! - a command agent's own report: a stdout line that is exactly a JSON
//!   object `{"gadfly_usage": {...}}` ([`command_line`]).
//!
//! gadfly prices nothing: no reported cost is no cost, never an estimate.

use serde_json::{json, Value};

use crate::events::{Event, Usage, UsageSource};

use super::transcript::Row;

/// Claude's usage object: (every input token, of which read from a cache, output tokens).
fn anthropic_tokens(u: &Value) -> (u64, u64, u64) {
    let n = |k: &str| u[k].as_u64().unwrap_or(0);
    let cached = n("cache_read_input_tokens");
    let input = n("input_tokens").saturating_add(n("cache_creation_input_tokens")).saturating_add(cached);
    (input, cached, n("output_tokens"))
}

fn usage(source: UsageSource, u: &Value) -> Usage {
    let (input_tokens, cached_input_tokens, output_tokens) = anthropic_tokens(u);
    Usage {
        source,
        run_id: None,
        message_id: None,
        cumulative: false,
        input_tokens,
        cached_input_tokens,
        output_tokens,
        cost_usd: None,
        session_cost_usd: None,
        reported: u.clone(),
    }
}

fn cost(v: &Value) -> Option<f64> {
    v.as_f64().filter(|c| c.is_finite() && *c >= 0.0)
}

/// A Claude Code stream-json `result` line: its turn's tokens and the
/// session's running cost.
pub fn claude_turn(ev: &Value) -> Option<Usage> {
    if ev["type"] != "result" {
        return None;
    }
    let u = &ev["usage"];
    let total = cost(&ev["total_cost_usd"]);
    if !u.is_object() && total.is_none() {
        return None;
    }
    let mut out = usage(UsageSource::ClaudeCodeTurn, u);
    out.session_cost_usd = total;
    Some(out)
}

/// A Claude Code stream-json `assistant` line: its message's id and usage
/// as the stream tells it (one line per content block, the same figures).
pub fn claude_message(ev: &Value) -> Option<(String, Usage)> {
    if ev["type"] != "assistant" {
        return None;
    }
    let m = &ev["message"];
    let id = m["id"].as_str().filter(|i| !i.is_empty())?;
    m["usage"].is_object().then(|| {
        let mut u = usage(UsageSource::ClaudeCodePartialTurn, &m["usage"]);
        u.message_id = Some(id.to_string());
        (id.to_string(), u)
    })
}

/// Codex's `turn.completed` line: the thread's tokens so far (they add up
/// across its turns, `exec resume` included, as the real CLI was seen to
/// report them: 240, then 360 after a second turn of one request;
/// `input_tokens` counts the cached ones too).
pub fn codex_turn(ev: &Value) -> Option<Usage> {
    if ev["type"] != "turn.completed" || !ev["usage"].is_object() {
        return None;
    }
    let u = &ev["usage"];
    let n = |k: &str| u[k].as_u64().unwrap_or(0);
    Some(Usage {
        source: UsageSource::Codex,
        run_id: None,
        message_id: None,
        cumulative: true,
        input_tokens: n("input_tokens"),
        cached_input_tokens: n("cached_input_tokens"),
        output_tokens: n("output_tokens"),
        cost_usd: None,
        session_cost_usd: None,
        reported: u.clone(),
    })
}

/// The fields a `gadfly_usage` line may have.
const COMMAND_FIELDS: [&str; 4] = ["input_tokens", "cached_input_tokens", "output_tokens", "cost_usd"];

/// A command agent's usage report: a stdout line that is exactly
/// `{"gadfly_usage": {"input_tokens": N, "output_tokens": N,
/// "cached_input_tokens": N, "cost_usd": X}}` (every field optional, at
/// least one given; tokens are whole numbers, `cost_usd` a number of US
/// dollars, none negative). Each line reports what was used since the
/// previous one. None for any other line; an error for a `gadfly_usage`
/// line that breaks these rules (it is then an output line like any other).
pub fn command_line(line: &str) -> Option<Result<Usage, String>> {
    let t = line.trim();
    if !t.starts_with('{') || !t.contains("gadfly_usage") {
        return None;
    }
    let v: Value = serde_json::from_str(t).ok()?;
    let o = v.as_object()?;
    let u = o.get("gadfly_usage")?;
    Some(check_command(o.len(), u))
}

fn check_command(keys: usize, u: &Value) -> Result<Usage, String> {
    if keys != 1 {
        return Err("a gadfly_usage line is an object with the one key `gadfly_usage`".into());
    }
    let Some(fields) = u.as_object() else { return Err("`gadfly_usage` must be an object".into()) };
    if let Some(k) = fields.keys().find(|k| !COMMAND_FIELDS.contains(&k.as_str())) {
        return Err(format!("unknown field `{k}` in gadfly_usage; expected {}", COMMAND_FIELDS.join(", ")));
    }
    if fields.is_empty() {
        return Err("gadfly_usage reports nothing".into());
    }
    let tokens = |k: &str| match fields.get(k) {
        None => Ok(0),
        Some(v) => v.as_u64().ok_or_else(|| format!("gadfly_usage `{k}` must be a whole number of tokens, not {v}")),
    };
    let cost_usd = match fields.get("cost_usd") {
        None => None,
        Some(v) => {
            Some(cost(v).ok_or_else(|| format!("gadfly_usage `cost_usd` must be a number of dollars, not {v}"))?)
        }
    };
    let (input_tokens, cached_input_tokens) = (tokens("input_tokens")?, tokens("cached_input_tokens")?);
    if cached_input_tokens > input_tokens {
        return Err("gadfly_usage `cached_input_tokens` is part of `input_tokens`: it cannot be larger".into());
    }
    Ok(Usage {
        source: UsageSource::Command,
        run_id: None,
        message_id: None,
        cumulative: false,
        input_tokens,
        cached_input_tokens,
        output_tokens: tokens("output_tokens")?,
        cost_usd,
        session_cost_usd: None,
        reported: u.clone(),
    })
}

/// The usage a Claude Code transcript line holds, as an event row: an
/// assistant line's message usage, or a `cost-state` line's running cost.
pub fn transcript_line(line: &str) -> Option<Row> {
    if !line.contains("\"usage\"") && !line.contains("cost-state") {
        return None;
    }
    let v: Value = serde_json::from_str(line).ok()?;
    let (key, u) = match v["type"].as_str() {
        Some("assistant") => {
            let uuid = v["uuid"].as_str().filter(|u| !u.is_empty())?;
            let m = &v["message"];
            if !m["usage"].is_object() {
                return None;
            }
            let mut u = usage(UsageSource::ClaudeCodeTranscript, &m["usage"]);
            u.message_id = m["id"].as_str().filter(|i| !i.is_empty()).map(str::to_string);
            (format!("cc-transcript-usage:{uuid}"), u)
        }
        Some("cost-state") => {
            let total = cost(&v["totalCostUSD"])?;
            let session = v["sessionId"].as_str().unwrap_or("");
            let mut u = usage(UsageSource::ClaudeCodeTranscript, &Value::Null);
            u.session_cost_usd = Some(total);
            u.reported = json!({"totalCostUSD": v["totalCostUSD"], "modelUsage": v["modelUsage"]});
            (format!("cc-cost-state:{session}:{total}"), u)
        }
        _ => return None,
    };
    let event = Event::AgentUsage(u);
    Some((event.kind().into_owned(), key, event.body()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claude_result_gives_the_turn_and_the_running_cost() {
        // As the real CLI printed it against the mock model (two requests of 100 in, 20 out).
        let ev = json!({"type": "result", "subtype": "success", "total_cost_usd": 0.0016,
            "usage": {"input_tokens": 200, "cache_creation_input_tokens": 5, "cache_read_input_tokens": 10, "output_tokens": 40}});
        let u = claude_turn(&ev).unwrap();
        assert_eq!((u.input_tokens, u.cached_input_tokens, u.output_tokens), (215, 10, 40));
        assert_eq!((u.cost_usd, u.session_cost_usd), (None, Some(0.0016)));
        assert!(claude_turn(&json!({"type": "result"})).is_none());
        let (id, m) = claude_message(&json!({"type": "assistant", "message": {"id": "msg_1",
            "usage": {"input_tokens": 100, "output_tokens": 1}}}))
        .unwrap();
        assert_eq!((id.as_str(), m.input_tokens, m.output_tokens), ("msg_1", 100, 1));
    }

    #[test]
    fn codex_turns_report_tokens_only() {
        let ev = json!({"type": "turn.completed", "usage": {"input_tokens": 300, "cached_input_tokens": 100,
            "cache_write_input_tokens": 0, "output_tokens": 60, "reasoning_output_tokens": 0}});
        let u = codex_turn(&ev).unwrap();
        assert_eq!((u.input_tokens, u.cached_input_tokens, u.output_tokens, u.cost_usd), (300, 100, 60, None));
        assert!(u.cumulative, "a thread's running totals");
        assert!(codex_turn(&json!({"type": "turn.failed"})).is_none());
    }

    #[test]
    fn command_lines_follow_the_documented_format() {
        let u = command_line(r#"{"gadfly_usage": {"cost_usd": 0.42, "input_tokens": 1200, "output_tokens": 300}}"#)
            .unwrap()
            .unwrap();
        assert_eq!((u.input_tokens, u.output_tokens, u.cost_usd), (1200, 300, Some(0.42)));
        assert!(command_line("All scenarios pass. Done.").is_none());
        assert!(command_line(r#"{"note": "gadfly_usage is great"}"#).is_none());
        for bad in [
            r#"{"gadfly_usage": {"cost_usd": -1}}"#,
            r#"{"gadfly_usage": {"input_tokens": 1.5}}"#,
            r#"{"gadfly_usage": {"tokens": 3}}"#,
            r#"{"gadfly_usage": {}}"#,
            r#"{"gadfly_usage": {"input_tokens": 1}, "x": 1}"#,
            r#"{"gadfly_usage": {"input_tokens": 1, "cached_input_tokens": 2}}"#,
            r#"{"gadfly_usage": 5}"#,
        ] {
            assert!(command_line(bad).unwrap().is_err(), "{bad}");
        }
    }

    #[test]
    fn transcripts_give_message_usage_and_the_sessions_cost() {
        let a = r#"{"type":"assistant","uuid":"u1","message":{"id":"msg_1","usage":{"input_tokens":4,"cache_creation_input_tokens":14056,"cache_read_input_tokens":0,"output_tokens":3}}}"#;
        let (kind, key, body) = transcript_line(a).unwrap();
        assert_eq!((kind.as_str(), key.as_str()), ("agent.usage", "cc-transcript-usage:u1"));
        assert_eq!((body["input_tokens"].as_u64(), body["message_id"].as_str()), (Some(14060), Some("msg_1")));
        assert_eq!(body["cost_usd"], Value::Null, "a transcript's message has no price");
        // As the real CLI wrote it when its process ended.
        let c = r#"{"type":"cost-state","sessionId":"s1","totalCostUSD":0.0032,"modelUsage":{"claude-opus-5-5":{"inputTokens":400}}}"#;
        let (_, key, body) = transcript_line(c).unwrap();
        assert_eq!(key, "cc-cost-state:s1:0.0032");
        assert_eq!((body["session_cost_usd"].as_f64(), body["tokens"].as_u64()), (Some(0.0032), Some(0)));
        assert!(transcript_line(r#"{"type":"user","uuid":"u2","message":{"content":"usage"}}"#).is_none());
        assert!(transcript_line("not json \"usage\"").is_none());
    }

    #[test]
    fn the_real_corpus_transcripts_give_usage() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/corpus/claude-code-vsla");
        let Ok(entries) = std::fs::read_dir(dir) else {
            eprintln!("SKIPPED: corpus not found at {dir}");
            return;
        };
        let mut tally = crate::spend::Tally::default();
        let mut rows = 0;
        for e in entries.flatten().take(3) {
            for line in std::fs::read_to_string(e.path()).unwrap().lines() {
                if let Some((_, _, body)) = transcript_line(line) {
                    rows += 1;
                    tally.add(Some("s"), &body);
                }
            }
        }
        let f = tally.total();
        assert!(rows > 10 && f.input_tokens > 10_000 && f.output_tokens > 100, "{rows} rows, {f:?}");
    }
}
