//! Spend: what the agents reported they used (`agent.usage` events, see
//! [`crate::events::Usage`]), summed per session, per run and per
//! campaign. Pure: event bodies in, figures out. The run loop sums its own
//! run with it (for `max_tokens` / `max_cost_usd`), the API and the audit
//! sum a campaign's log with it.
//!
//! gadfly prices nothing: money is only ever the agent's own figure
//! (Claude Code's `total_cost_usd` and its transcripts' `cost-state`
//! lines, a command agent's `cost_usd`); Codex reports tokens only, and a
//! session without a reported cost shows none (`cost_usd: null`), never 0.
//!
//! Counting rules:
//! - tokens are every input token (those read from a cache included) plus
//!   every output token;
//! - a report of one API message (`message_id`) counts once per session,
//!   at its largest (a transcript writes a message once per content block,
//!   the later lines with the final output count);
//! - a session's running cost (`session_cost_usd`) counts at its largest,
//!   and so do running totals of tokens (`cumulative`: Codex's);
//! - a spawned Claude Code session is reported twice, by its stream and by
//!   its transcript (which gadfly follows too): it counts once, as the
//!   report that is further along.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use crate::events::UsageSource;

/// Figures of usage: tokens, and money when it was reported.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Figures {
    /// Every input token, those read from a cache included.
    pub input_tokens: u64,
    /// Of `input_tokens`, those read from a cache.
    pub cached_input_tokens: u64,
    pub output_tokens: u64,
    /// `input_tokens + output_tokens`.
    pub tokens: u64,
    /// The agents' own figure in USD; none when no agent reported money.
    pub cost_usd: Option<f64>,
}

impl Figures {
    fn add(&mut self, o: &Figures) {
        self.input_tokens = self.input_tokens.saturating_add(o.input_tokens);
        self.cached_input_tokens = self.cached_input_tokens.saturating_add(o.cached_input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(o.output_tokens);
        self.tokens = self.input_tokens.saturating_add(self.output_tokens);
        self.cost_usd = add_cost(self.cost_usd, o.cost_usd);
    }

    /// The larger of two reports of the same thing, field by field.
    fn max(&self, o: &Figures) -> Figures {
        let mut m = Figures {
            input_tokens: self.input_tokens.max(o.input_tokens),
            cached_input_tokens: self.cached_input_tokens.max(o.cached_input_tokens),
            output_tokens: self.output_tokens.max(o.output_tokens),
            tokens: 0,
            cost_usd: max_cost(self.cost_usd, o.cost_usd),
        };
        m.tokens = m.input_tokens.saturating_add(m.output_tokens);
        m
    }

    /// The figures of one `agent.usage` body (its own, not the session's
    /// running cost).
    fn of(body: &Value) -> Figures {
        let n = |k: &str| body[k].as_u64().unwrap_or(0);
        let (input, output) = (n("input_tokens"), n("output_tokens"));
        Figures {
            input_tokens: input,
            cached_input_tokens: n("cached_input_tokens"),
            output_tokens: output,
            tokens: input.saturating_add(output),
            cost_usd: money(&body["cost_usd"]),
        }
    }
}

fn money(v: &Value) -> Option<f64> {
    v.as_f64().filter(|c| c.is_finite() && *c >= 0.0)
}

fn add_cost(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a + b),
        (a, b) => a.or(b),
    }
}

fn max_cost(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

/// One account of a session's usage: by its stream or by its transcript.
#[derive(Debug, Clone, Default)]
struct Account {
    summed: Figures,
    messages: BTreeMap<String, Figures>,
    /// The largest running totals of tokens reported (`cumulative`).
    running: Figures,
    running_cost: Option<f64>,
    reports: usize,
}

impl Account {
    fn add(&mut self, body: &Value) {
        self.reports += 1;
        let f = Figures::of(body);
        match body["message_id"].as_str().filter(|m| !m.is_empty()) {
            _ if body["cumulative"] == true => self.running = self.running.max(&f),
            Some(m) => {
                let seen = self.messages.entry(m.to_string()).or_default();
                *seen = seen.max(&f);
            }
            None => self.summed.add(&f),
        }
        self.running_cost = max_cost(self.running_cost, money(&body["session_cost_usd"]));
    }

    fn figures(&self) -> Figures {
        let mut f = self.summed;
        for m in self.messages.values() {
            f.add(m);
        }
        f.add(&self.running);
        f.cost_usd = add_cost(f.cost_usd, self.running_cost);
        f
    }
}

/// One session's spend.
#[derive(Debug, Clone, Default)]
struct Session {
    run_id: Option<i64>,
    sources: Vec<String>,
    stream: Account,
    transcript: Account,
}

impl Session {
    fn figures(&self) -> Figures {
        let (s, t) = (self.stream.figures(), self.transcript.figures());
        let mut f = if t.tokens > s.tokens { t } else { s };
        f.cost_usd = max_cost(s.cost_usd, t.cost_usd);
        f
    }
}

/// A session's spend, as the API shows it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SessionSpend {
    /// None: reports recorded outside any session.
    pub session_id: Option<String>,
    pub run_id: Option<i64>,
    /// Where its reports came from (`claude-code`, `codex`, ...).
    pub sources: Vec<String>,
    pub reports: usize,
    #[serde(flatten)]
    pub figures: Figures,
}

/// A run's spend.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RunSpend {
    pub run_id: i64,
    #[serde(flatten)]
    pub figures: Figures,
}

/// The sum of `agent.usage` bodies, by session.
#[derive(Debug, Clone, Default)]
pub struct Tally {
    sessions: BTreeMap<Option<String>, Session>,
}

impl Tally {
    /// Adds one `agent.usage` event (its session and its body).
    pub fn add(&mut self, session: Option<&str>, body: &Value) {
        let s = self.sessions.entry(session.map(str::to_string)).or_default();
        if let Some(r) = body["run_id"].as_i64() {
            s.run_id = Some(r);
        }
        let source = body["source"].as_str().unwrap_or("").to_string();
        if !s.sources.contains(&source) {
            s.sources.push(source.clone());
        }
        if source == UsageSource::ClaudeCodeTranscript.as_str() {
            s.transcript.add(body);
        } else {
            s.stream.add(body);
        }
    }

    /// True when nothing was added.
    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }

    /// Every session together.
    pub fn total(&self) -> Figures {
        let mut f = Figures::default();
        for s in self.sessions.values() {
            f.add(&s.figures());
        }
        f
    }

    /// Each session's spend, in session order.
    pub fn sessions(&self) -> Vec<SessionSpend> {
        self.sessions
            .iter()
            .map(|(id, s)| SessionSpend {
                session_id: id.clone(),
                run_id: s.run_id,
                sources: s.sources.clone(),
                reports: s.stream.reports + s.transcript.reports,
                figures: s.figures(),
            })
            .collect()
    }

    /// Each spawned run's spend (the sessions its reports name it in).
    pub fn runs(&self) -> Vec<RunSpend> {
        let mut by: BTreeMap<i64, Figures> = BTreeMap::new();
        for s in self.sessions.values() {
            if let Some(r) = s.run_id {
                by.entry(r).or_default().add(&s.figures());
            }
        }
        by.into_iter().map(|(run_id, figures)| RunSpend { run_id, figures }).collect()
    }
}

/// `1234567` as `1.23M`, `12345` as `12.3k`: token counts for a person.
pub fn tokens_text(n: u64) -> String {
    match n {
        0..=9_999 => n.to_string(),
        10_000..=999_999 => format!("{:.1}k", n as f64 / 1e3),
        _ => format!("{:.2}M", n as f64 / 1e6),
    }
}

/// Money for a person: `$0.0016`, `$1.23`; `no cost reported` for none.
pub fn cost_text(c: Option<f64>) -> String {
    match c {
        None => "no cost reported".into(),
        Some(c) if c < 1.0 => format!("${}", trim_zeros(&format!("{c:.4}"))),
        Some(c) => format!("${c:.2}"),
    }
}

fn trim_zeros(s: &str) -> String {
    if !s.contains('.') {
        return s.to_string();
    }
    let t = s.trim_end_matches('0');
    let t = t.strip_suffix('.').map(|x| format!("{x}.0")).unwrap_or_else(|| t.to_string());
    t
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn body(
        source: &str,
        run: Option<i64>,
        msg: Option<&str>,
        i: u64,
        o: u64,
        cost: Option<f64>,
        run_cost: Option<f64>,
    ) -> Value {
        json!({"source": source, "run_id": run, "message_id": msg, "input_tokens": i, "cached_input_tokens": 0,
               "output_tokens": o, "cost_usd": cost, "session_cost_usd": run_cost})
    }

    #[test]
    fn turns_add_up_and_a_running_cost_counts_at_its_largest() {
        let mut t = Tally::default();
        t.add(Some("s1"), &body("claude-code", Some(1), None, 200, 40, None, Some(0.0016)));
        t.add(Some("s1"), &body("claude-code", Some(1), None, 200, 40, None, Some(0.0032)));
        let f = t.total();
        assert_eq!((f.input_tokens, f.output_tokens, f.tokens), (400, 80, 480));
        assert_eq!(f.cost_usd, Some(0.0032), "a running total is not summed");
        assert_eq!(t.runs(), vec![RunSpend { run_id: 1, figures: f }]);
    }

    #[test]
    fn a_message_reported_twice_counts_once_at_its_largest() {
        let mut t = Tally::default();
        // A transcript writes a message once per content block; the later line has the final output.
        t.add(Some("s"), &body("claude-code-transcript", None, Some("m1"), 16653, 4, None, None));
        t.add(Some("s"), &body("claude-code-transcript", None, Some("m1"), 16653, 928, None, None));
        t.add(Some("s"), &body("claude-code-transcript", None, Some("m2"), 100, 20, None, None));
        let f = t.total();
        assert_eq!((f.input_tokens, f.output_tokens), (16753, 948));
        assert_eq!(f.cost_usd, None, "no cost was reported: none, not 0");
        assert!(t.runs().is_empty(), "an attached session belongs to no run");
    }

    #[test]
    fn a_spawned_session_reported_by_stream_and_transcript_counts_once() {
        let mut t = Tally::default();
        t.add(Some("s"), &body("claude-code-transcript", None, Some("m1"), 100, 20, None, None));
        t.add(Some("s"), &body("claude-code-transcript", None, Some("m2"), 100, 20, None, None));
        t.add(Some("s"), &body("claude-code", Some(7), None, 200, 40, None, Some(0.0016)));
        t.add(Some("s"), &body("claude-code-transcript", None, None, 0, 0, None, Some(0.0016)));
        let f = t.total();
        assert_eq!((f.tokens, f.cost_usd), (240, Some(0.0016)));
        // The transcript runs ahead of the stream mid-turn: it counts then.
        t.add(Some("s"), &body("claude-code-transcript", None, Some("m3"), 100, 20, None, None));
        assert_eq!(t.total().tokens, 360);
        assert_eq!(t.sessions()[0].run_id, Some(7));
        assert_eq!(t.sessions()[0].sources, vec!["claude-code-transcript", "claude-code"]);
    }

    #[test]
    fn running_totals_of_tokens_count_at_their_largest() {
        let mut t = Tally::default();
        let codex = |i: u64, o: u64| {
            let mut b = body("codex", Some(2), None, i, o, None, None);
            b["cumulative"] = json!(true);
            b
        };
        // As the real Codex CLI reported a thread over two turns.
        t.add(Some("thread"), &codex(200, 40));
        t.add(Some("thread"), &codex(300, 60));
        assert_eq!(t.total().tokens, 360);
        t.add(Some("other"), &codex(100, 20));
        assert_eq!(t.total().tokens, 480, "another thread counts on its own");
    }

    #[test]
    fn sessions_and_increments_sum_into_the_campaign() {
        let mut t = Tally::default();
        t.add(Some("a"), &body("command", Some(1), None, 1000, 10, Some(0.25), None));
        t.add(Some("a"), &body("command", Some(1), None, 500, 5, Some(0.5), None));
        t.add(Some("b"), &body("codex", Some(2), None, 300, 60, None, None));
        let f = t.total();
        assert_eq!((f.tokens, f.cost_usd), (1875, Some(0.75)));
        let runs = t.runs();
        assert_eq!(runs[0].figures.cost_usd, Some(0.75));
        assert_eq!((runs[1].figures.tokens, runs[1].figures.cost_usd), (360, None));
        // Garbage is counted as nothing, never a panic or a negative cost.
        t.add(None, &json!({"input_tokens": -5, "cost_usd": -1.0, "message_id": 3}));
        assert_eq!(t.total().tokens, 1875);
    }

    #[test]
    fn figures_for_a_person() {
        assert_eq!(tokens_text(240), "240");
        assert_eq!(tokens_text(16_753), "16.8k");
        assert_eq!(tokens_text(2_500_000), "2.50M");
        assert_eq!(cost_text(Some(0.0016)), "$0.0016");
        assert_eq!(cost_text(Some(0.5)), "$0.5");
        assert_eq!(cost_text(Some(12.345)), "$12.35");
        assert_eq!(cost_text(None), "no cost reported");
    }
}
