//! The budgets of one run: wall time, turns, and blocked stops in a row
//! without a gain; a run that exhausts one ends as "stopped by budget".

use std::time::{Duration, Instant};

use super::AgentSpec;

/// Budgets of one run.
pub struct Budget {
    started: Instant,
    max_wall: Option<Duration>,
    max_turns: Option<u32>,
    max_blocks: u32,
    pub turns: u32,
    blocks_without_gain: u32,
    best: Option<f64>,
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
        }
    }

    /// Counts a judged turn end; returns why the run must stop, if it must.
    pub fn after_blocked_turn(&mut self, geomean: Option<f64>) -> Option<String> {
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

    pub fn wall_reason(&self) -> String {
        format!(
            "wall time {} s reached (max_wall_s = {})",
            self.started.elapsed().as_secs(),
            self.max_wall.map_or(0, |w| w.as_secs())
        )
    }

    pub fn exhausted(&self) -> Option<String> {
        if let Some(w) = self.max_wall {
            if self.started.elapsed() >= w {
                return Some(self.wall_reason());
            }
        }
        if let Some(t) = self.max_turns {
            if self.turns >= t {
                return Some(format!("{} turns (max_turns = {t})", self.turns));
            }
        }
        if self.blocks_without_gain >= self.max_blocks {
            return Some(format!(
                "{} blocked stops in a row without any gain (max_blocks_without_gain = {})",
                self.blocks_without_gain, self.max_blocks
            ));
        }
        None
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
        let why = b.after_blocked_turn(Some(0.9)).unwrap();
        assert!(why.contains("3 turns") || why.contains("without any gain"), "{why}");
        let a = AgentSpec { max_blocks_without_gain: 2, ..Default::default() };
        let mut b = Budget::new(&a);
        assert_eq!(b.after_blocked_turn(Some(1.0)), None);
        assert_eq!(b.after_blocked_turn(Some(1.2)), None, "a gain resets the count");
        assert_eq!(b.after_blocked_turn(Some(1.2)), None);
        assert!(b.after_blocked_turn(None).unwrap().contains("2 blocked stops in a row without any gain"));
    }
}
