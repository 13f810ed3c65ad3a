//! The budgets of one run: wall time, turns, blocked stops in a row
//! without a gain, and its spend in tokens and money as the agent reports
//! it (`max_tokens`, `max_cost_usd`); a run that exhausts one ends as
//! "stopped by budget", never as a success.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::AgentSpec;
use crate::events::{Event, Usage};
use crate::spend::{cost_text, tokens_text, Figures, Tally};

/// A budget that ran out: which one (its spec key), its limit, and why, in
/// words with the figures.
#[derive(Debug, Clone, PartialEq)]
pub struct Reached {
    pub budget: &'static str,
    pub limit: f64,
    pub text: String,
}

/// Budgets of one run.
pub struct Budget {
    started: Instant,
    max_wall: Option<Duration>,
    max_turns: Option<u32>,
    max_blocks: u32,
    pub turns: u32,
    blocks_without_gain: u32,
    best: Option<f64>,
    max_tokens: Option<u64>,
    max_cost_usd: Option<f64>,
    /// The run's usage reports so far.
    spent: Tally,
    /// The turn in progress, as far as its stream told (Claude Code: each
    /// message's usage, by message id), until its own report replaces it.
    in_turn: BTreeMap<String, Usage>,
}

impl Budget {
    pub fn new(a: &AgentSpec) -> Budget {
        Budget {
            started: Instant::now(),
            max_wall: a.max_wall_s.map(Duration::from_secs),
            max_turns: a.max_turns,
            max_blocks: a.max_blocks_without_gain.max(1),
            turns: 0,
            blocks_without_gain: 0,
            best: None,
            max_tokens: a.max_tokens,
            max_cost_usd: a.max_cost_usd,
            spent: Tally::default(),
            in_turn: BTreeMap::new(),
        }
    }

    /// Counts one usage report of the run (an `agent.usage` body, of
    /// `session`); a turn's report replaces what its stream told of it.
    /// Returns the spend budget it exhausts, if any.
    pub fn add_usage(&mut self, session: Option<&str>, body: &Value) -> Option<Reached> {
        self.spent.add(session, body);
        self.in_turn.clear();
        self.spend_reached()
    }

    /// Counts a message of the turn in progress, as its stream tells it;
    /// returns the spend budget it exhausts, if any.
    pub fn add_in_turn(&mut self, message_id: String, usage: Usage) -> Option<Reached> {
        self.in_turn.insert(message_id, usage);
        self.spend_reached()
    }

    /// What the turn in progress used as far as its stream told (none when
    /// nothing was told): recorded when a budget ends it before its report.
    pub fn take_in_turn(&mut self) -> Option<Usage> {
        let mut it = std::mem::take(&mut self.in_turn).into_values();
        let mut sum = it.next()?;
        for u in it {
            sum.input_tokens += u.input_tokens;
            sum.cached_input_tokens += u.cached_input_tokens;
            sum.output_tokens += u.output_tokens;
        }
        sum.message_id = None;
        sum.reported = Value::Null;
        Some(sum)
    }

    /// The run's spend now: its reports and the turn in progress.
    pub fn spent(&self) -> Figures {
        let mut f = self.spent.total();
        for u in self.in_turn.values() {
            f.input_tokens += u.input_tokens;
            f.output_tokens += u.output_tokens;
        }
        f.tokens = f.input_tokens.saturating_add(f.output_tokens);
        f
    }

    /// The spend budget the run has reached, if any.
    pub fn spend_reached(&self) -> Option<Reached> {
        let f = self.spent();
        if let Some(max) = self.max_tokens {
            if f.tokens >= max {
                return Some(Reached {
                    budget: "max_tokens",
                    limit: max as f64,
                    text: format!(
                        "{} tokens used, as the agent reports them (max_tokens = {max})",
                        tokens_text(f.tokens)
                    ),
                });
            }
        }
        if let (Some(max), Some(c)) = (self.max_cost_usd, f.cost_usd) {
            if c >= max {
                return Some(Reached {
                    budget: "max_cost_usd",
                    limit: max,
                    text: format!("{} spent, as the agent reports it (max_cost_usd = {max})", cost_text(Some(c))),
                });
            }
        }
        None
    }

    /// The `budget.reached` event of run `run_id` for `r`.
    pub fn reached_event(&self, run_id: i64, r: &Reached) -> Event {
        let f = self.spent();
        Event::BudgetReached(crate::events::BudgetReached {
            run_id,
            budget: r.budget.to_string(),
            limit: r.limit,
            tokens: f.tokens,
            cost_usd: f.cost_usd,
            turns: self.turns,
            detail: r.text.clone(),
        })
    }

    /// Counts a judged turn end; returns why the run must stop, if it must.
    pub fn after_blocked_turn(&mut self, geomean: Option<f64>) -> Option<Reached> {
        self.turns += 1;
        let gained = match (geomean, self.best) {
            (Some(g), Some(b)) => g > b * 1.001,
            (Some(_), None) => true,
            _ => false,
        };
        if gained {
            self.best = geomean;
            self.blocks_without_gain = 0;
        } else {
            self.blocks_without_gain += 1;
        }
        self.exhausted()
    }

    /// When the wall-time budget runs out, if there is one: a turn in
    /// progress (or a hung agent) is ended then, not only at its end.
    pub fn deadline(&self) -> Option<tokio::time::Instant> {
        self.max_wall.map(|w| tokio::time::Instant::from_std(self.started + w))
    }

    pub fn wall_reason(&self) -> Reached {
        let max = self.max_wall.map_or(0, |w| w.as_secs());
        Reached {
            budget: "max_wall_s",
            limit: max as f64,
            text: format!("wall time {} s reached (max_wall_s = {max})", self.started.elapsed().as_secs()),
        }
    }

    pub fn exhausted(&self) -> Option<Reached> {
        if let Some(w) = self.max_wall {
            if self.started.elapsed() >= w {
                return Some(self.wall_reason());
            }
        }
        if let Some(t) = self.max_turns {
            if self.turns >= t {
                return Some(Reached {
                    budget: "max_turns",
                    limit: t as f64,
                    text: format!("{} turns (max_turns = {t})", self.turns),
                });
            }
        }
        if self.blocks_without_gain >= self.max_blocks {
            return Some(Reached {
                budget: "max_blocks_without_gain",
                limit: self.max_blocks as f64,
                text: format!(
                    "{} blocked stops in a row without any gain (max_blocks_without_gain = {})",
                    self.blocks_without_gain, self.max_blocks
                ),
            });
        }
        self.spend_reached()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_end_runs_with_a_reason() {
        let a = AgentSpec { max_turns: Some(3), max_blocks_without_gain: 2, ..Default::default() };
        let mut b = Budget::new(&a);
        assert_eq!(b.after_blocked_turn(Some(1.0)), None, "a first objective is a gain");
        assert_eq!(b.after_blocked_turn(Some(1.0005)), None);
        let why = b.after_blocked_turn(Some(0.9)).unwrap().text;
        assert!(why.contains("3 turns") || why.contains("without any gain"), "{why}");
        let a = AgentSpec { max_blocks_without_gain: 2, ..Default::default() };
        let mut b = Budget::new(&a);
        assert_eq!(b.after_blocked_turn(Some(1.0)), None);
        assert_eq!(b.after_blocked_turn(Some(1.2)), None, "a gain resets the count");
        assert_eq!(b.after_blocked_turn(Some(1.2)), None);
        let why = b.after_blocked_turn(None).unwrap();
        assert_eq!(why.budget, "max_blocks_without_gain");
        assert!(why.text.contains("2 blocked stops in a row without any gain"));
    }

    fn turn(input: u64, output: u64, running_cost: Option<f64>) -> Value {
        let u = Usage {
            source: crate::events::UsageSource::ClaudeCodeTurn,
            run_id: Some(1),
            message_id: None,
            cumulative: false,
            input_tokens: input,
            cached_input_tokens: 0,
            output_tokens: output,
            cost_usd: None,
            session_cost_usd: running_cost,
            reported: Value::Null,
        };
        Event::AgentUsage(u).body()
    }

    #[test]
    fn the_token_budget_counts_reports_and_the_turn_in_progress() {
        let a = AgentSpec { max_tokens: Some(500), max_blocks_without_gain: 8, ..Default::default() };
        let mut b = Budget::new(&a);
        assert_eq!(b.add_usage(Some("s"), &turn(200, 40, Some(0.0016))), None);
        // The next turn's messages, as the stream tells them (output not final yet).
        let msg = |i| {
            crate::agent::usage::claude_message(&serde_json::json!({"type": "assistant",
            "message": {"id": format!("m{i}"), "usage": {"input_tokens": 100, "output_tokens": 1}}}))
            .unwrap()
        };
        let (id, u) = msg(1);
        assert_eq!(b.add_in_turn(id.clone(), u.clone()), None, "341 tokens");
        assert_eq!(b.add_in_turn(id, u), None, "the same message again counts once");
        let (id, u) = msg(2);
        assert_eq!(b.add_in_turn(id, u), None, "442 tokens");
        assert_eq!(b.spent().tokens, 442);
        let (id, u) = msg(3);
        let r = b.add_in_turn(id, u).unwrap();
        assert_eq!((r.budget, r.limit), ("max_tokens", 500.0));
        assert!(r.text.contains("543 tokens used") && r.text.contains("max_tokens = 500"), "{}", r.text);
        let partial = b.take_in_turn().unwrap();
        assert_eq!((partial.input_tokens, partial.output_tokens), (300, 3));
        assert_eq!(b.spent().tokens, 240, "what was taken is no longer counted as in progress");
    }

    #[test]
    fn the_cost_budget_counts_the_agents_own_figure() {
        let a = AgentSpec { max_cost_usd: Some(0.003), max_blocks_without_gain: 8, ..Default::default() };
        let mut b = Budget::new(&a);
        assert_eq!(b.add_usage(Some("s"), &turn(200, 40, Some(0.0016))), None);
        // Claude Code's total_cost_usd is the session's running total: 0.0032, not 0.0048.
        let r = b.add_usage(Some("s"), &turn(200, 40, Some(0.0032))).unwrap();
        assert_eq!((r.budget, r.limit), ("max_cost_usd", 0.003));
        assert!(r.text.contains("$0.0032 spent"), "{}", r.text);
        match b.reached_event(4, &r) {
            Event::BudgetReached(e) => {
                assert_eq!((e.run_id, e.tokens, e.cost_usd), (4, 480, Some(0.0032)));
            }
            other => panic!("{other:?}"),
        }
        // Tokens alone never reach a money budget.
        let mut b = Budget::new(&a);
        assert_eq!(b.add_usage(Some("s"), &turn(10_000_000, 0, None)), None);
    }
}
