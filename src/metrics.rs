//! Prometheus metrics, served at `/metrics` (OpenMetrics text, bearer
//! token): hook calls and their latency, evaluations, decisions at stop
//! attempts, questions, moments, events recorded, and what waits (queued
//! questions). Counters are process-wide; they start at zero when the
//! daemon starts, as Prometheus expects.

use std::sync::LazyLock;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

type Labels = Vec<(String, String)>;

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

pub struct Metrics {
    registry: Registry,
    hook_calls: Family<Labels, Counter>,
    hook_seconds: Family<Labels, Histogram>,
    evaluations: Family<Labels, Counter>,
    evaluation_seconds: Histogram,
    decisions: Family<Labels, Counter>,
    questions: Family<Labels, Counter>,
    moments: Family<Labels, Counter>,
    events: Counter,
    questions_waiting: Gauge,
    eval_jobs_queued: Gauge,
}

fn hook_histogram() -> Histogram {
    // 0.25 ms to about 8 s.
    Histogram::new(exponential_buckets(0.00025, 2.0, 16))
}

pub static METRICS: LazyLock<Metrics> = LazyLock::new(|| {
    let mut registry = Registry::with_prefix("gadfly");
    let m = Metrics {
        hook_calls: Family::default(),
        hook_seconds: Family::new_with_constructor(hook_histogram as fn() -> Histogram),
        evaluations: Family::default(),
        evaluation_seconds: Histogram::new(exponential_buckets(0.01, 2.0, 16)),
        decisions: Family::default(),
        questions: Family::default(),
        moments: Family::default(),
        events: Counter::default(),
        questions_waiting: Gauge::default(),
        eval_jobs_queued: Gauge::default(),
        registry: Registry::default(),
    };
    registry.register("hook_calls", "Hook calls answered, by event and outcome (ok, error)", m.hook_calls.clone());
    registry.register("hook_duration_seconds", "Time to answer a hook call, by event", m.hook_seconds.clone());
    registry.register("evaluations", "Evaluations run, by result (holds, fails)", m.evaluations.clone());
    registry.register("evaluation_duration_seconds", "Time an evaluation took", m.evaluation_seconds.clone());
    registry.register(
        "decisions",
        "Stop attempts judged, by decision (allow, block, record, ungated, unavailable_block)",
        m.decisions.clone(),
    );
    registry.register("questions", "Questions, by state (queued, delivered) and source", m.questions.clone());
    registry.register("moments", "Moments noticed, by moment", m.moments.clone());
    registry.register("events_recorded", "Events recorded in the store", m.events.clone());
    registry.register("questions_waiting", "Questions queued and not yet delivered", m.questions_waiting.clone());
    registry.register(
        "eval_jobs_queued",
        "Evaluation jobs waiting for a worker (campaigns with [harness] tags)",
        m.eval_jobs_queued.clone(),
    );
    Metrics { registry, ..m }
});

impl Metrics {
    pub fn hook_call(&self, event: &str, ok: bool, seconds: f64) {
        let event = if crate::agent::CLAUDE_CODE_EVENTS.contains(&event) { event } else { "other" };
        self.hook_calls.get_or_create(&labels(&[("event", event), ("outcome", if ok { "ok" } else { "error" })])).inc();
        self.hook_seconds.get_or_create(&labels(&[("event", event)])).observe(seconds);
    }

    /// Counts what a recorded event says (one place sees every event).
    pub fn event(&self, kind: &str, payload: &serde_json::Value) {
        self.events.inc();
        let s = |k: &str| payload.get(k).and_then(|v| v.as_str()).unwrap_or("unknown").to_string();
        use crate::events::kind as k;
        match kind {
            k::EVALUATION => {
                let holds = payload.get("holds").and_then(|v| v.as_bool()).unwrap_or(false);
                self.evaluations.get_or_create(&labels(&[("result", if holds { "holds" } else { "fails" })])).inc();
                if let Some(ms) = payload.get("duration_ms").and_then(|v| v.as_f64()) {
                    self.evaluation_seconds.observe(ms / 1000.0);
                }
            }
            k::DECISION => {
                self.decisions.get_or_create(&labels(&[("decision", &s("decision"))])).inc();
            }
            k::STOP_UNGATED => {
                self.decisions.get_or_create(&labels(&[("decision", "ungated")])).inc();
            }
            k::QUESTION_QUEUED | k::QUESTION_DELIVERED => {
                let state = if kind == k::QUESTION_QUEUED { "queued" } else { "delivered" };
                let source = if s("source") == "human" { "human" } else { "bank" };
                self.questions.get_or_create(&labels(&[("state", state), ("source", source)])).inc();
            }
            k::MOMENT => {
                self.moments.get_or_create(&labels(&[("moment", &s("moment"))])).inc();
            }
            _ => {}
        }
    }

    /// The text exposition, with the gauges set to `questions_waiting` and
    /// `eval_jobs_queued`.
    pub fn render(&self, questions_waiting: i64, eval_jobs_queued: i64) -> String {
        self.questions_waiting.set(questions_waiting);
        self.eval_jobs_queued.set(eval_jobs_queued);
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_and_histograms_render_as_openmetrics() {
        let m = &*METRICS;
        m.hook_call("stop", true, 0.004);
        m.event("decision", &serde_json::json!({"decision": "block"}));
        m.event("evaluation", &serde_json::json!({"holds": true, "duration_ms": 1500}));
        m.event("question.queued", &serde_json::json!({"source": "bank"}));
        let text = m.render(3, 2);
        for needle in [
            "gadfly_hook_calls_total{event=\"stop\",outcome=\"ok\"}",
            "gadfly_hook_duration_seconds_bucket{le=",
            "gadfly_decisions_total{decision=\"block\"}",
            "gadfly_evaluations_total{result=\"holds\"}",
            "gadfly_questions_total{state=\"queued\",source=\"bank\"}",
            "gadfly_questions_waiting 3",
            "gadfly_eval_jobs_queued 2",
            "# EOF",
        ] {
            assert!(text.contains(needle), "{needle} not in:\n{text}");
        }
    }
}
