//! What a running evaluation is doing now, for `gadfly eval`'s progress
//! line (issue #49): the step (preparing, waiting for a worker, building,
//! running the harness, judging, measuring again) and since when.
//!
//! The daemon holds one [`Step`] per campaign while it evaluates and runs
//! the evaluation inside [`scoped`]; the code that does each step says so
//! with [`set`], which does nothing outside a scope (a worker, a test, the
//! calibration). No plumbing through the harness's inputs: the step lives
//! in the evaluation's task (a task-local), and the API reads it.

use std::sync::{Arc, Mutex};
use std::time::Instant;

tokio::task_local! {
    static CURRENT: Step;
}

/// The step of one evaluation, shared between the evaluating task and
/// whoever asks.
#[derive(Debug, Clone, Default)]
pub struct Step(Arc<Mutex<Option<(String, Instant)>>>);

impl Step {
    /// The step's words and the seconds spent in it so far; none before the
    /// first [`set`].
    pub fn now(&self) -> Option<(String, f64)> {
        let guard = self.0.lock().unwrap_or_else(|e| e.into_inner());
        guard.as_ref().map(|(what, since)| (what.clone(), since.elapsed().as_secs_f64()))
    }

    /// Whether both are the same board.
    pub fn same(&self, other: &Step) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    fn set(&self, what: &str) {
        let mut guard = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if guard.as_ref().map(|(w, _)| w.as_str()) != Some(what) {
            *guard = Some((what.to_string(), Instant::now()));
        }
    }
}

/// Runs `f` with `step` as the evaluation's step board.
pub async fn scoped<F: std::future::Future>(step: Step, f: F) -> F::Output {
    CURRENT.scope(step, f).await
}

/// Says which step the current evaluation is in (nothing outside
/// [`scoped`]).
pub fn set(what: &str) {
    let _ = CURRENT.try_with(|s| s.set(what));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_step_is_seen_from_outside_only_within_its_scope() {
        let board = Step::default();
        assert!(board.now().is_none());
        set("building");
        assert!(board.now().is_none(), "outside a scope nothing is told");
        let seen = board.clone();
        scoped(board.clone(), async move {
            set("building");
            assert_eq!(seen.now().map(|(w, _)| w), Some("building".to_string()));
            set("running the harness");
        })
        .await;
        let (what, secs) = board.now().expect("the last step stays readable");
        assert_eq!(what, "running the harness");
        assert!(secs >= 0.0);
    }
}
