//! `gadfly replay`: gadfly's whole judgment on a recorded session, offline
//! (issue #39). A [`timeline`] (a Claude Code transcript or a Codex rollout
//! imported, or a live campaign exported) is run in order through the same
//! decision code as the daemon: the gate's [`gate::plan_stop`], the numeric
//! detectors ([`moments::detect`]), the text classifier
//! ([`moments::claims_in`]), the rules of [`moments::plan`] (cooldowns,
//! held moments, repeated claims and their escalation, the action by mode,
//! words seen once) and the bank's selection ([`gate::choose_question`],
//! [`bank::select`]). No daemon, no agent, no store: the replay keeps its
//! own queue of questions and its own list of moments, where the daemon
//! keeps them in its store.
//!
//! What a replay cannot do, and says so: run the harness (the evaluations
//! are the timeline's), re-check a suspicious gain with another seed, diff
//! trees for the edit-loop detector, check the hook install for tampering,
//! ask the beam for a new family.
//!
//! Deterministic for a seed: [`Options::seed`] 0 seeds the bank's sampling
//! as the daemon did for the recorded campaign (its id, from the header);
//! any other seed mixes in.

pub mod experiments;
pub mod export;
pub mod learning;
pub mod render;
pub mod timeline;

use std::collections::{HashMap, VecDeque};

use crate::bank::groups::groups_for;
use crate::bank::learn;
use crate::bank::select::{self, AskedHere};
use crate::bank::Entry;
use crate::campaign::{CampaignSpec, Mode};
use crate::evaluation::Evaluation;
use crate::events::{MomentEvidence, MomentOutcome, Via};
use crate::gate::{self, Decision, Question};
use crate::moments::detect::{self, Finding, Settings};
use crate::moments::plan::{self, Act, FindingPlan, Recorded, Seen};
use crate::moments::{claims_in, finding_moment, ClaimMoment};
use timeline::{Measured, RecordedStop, StepKind, Timeline};

mod report;
pub use report::*;

/// Replays `timeline` under `spec` with the question bank `entries`.
pub fn run(timeline: &Timeline, spec: &CampaignSpec, entries: &[Entry], opts: &Options) -> anyhow::Result<Report> {
    let mut spec = spec.clone();
    if let Some(m) = opts.mode {
        spec.mode = m;
    }
    let settings = Settings::from_campaign(&spec)?;
    let campaign = timeline.header.campaign.clone().unwrap_or_else(|| "replay".to_string());
    let seed_key = if opts.seed == 0 { campaign.clone() } else { format!("{campaign}#seed={}", opts.seed) };
    let mut r = Replayer {
        spec,
        entries,
        settings,
        campaign,
        seed_key,
        evaluations: vec![],
        moments: vec![],
        queue: vec![],
        seen: Seen::default(),
        pending: VecDeque::new(),
        tool_calls: 0,
        cadence: VecDeque::new(),
        message_step: None,
        clock: 0,
        told_slower: Default::default(),
        steps: vec![],
        clockless: timeline.header.extra.get("clock").and_then(|c| c.as_str()) == Some("none"),
        settings_only: timeline.header.extra.get("changes").and_then(|c| c.as_str()) == Some("settings"),
    };
    r.steps.push(StepReport {
        step: 0,
        t: 0.0,
        kind: "start".into(),
        excerpt: "the campaign starts".into(),
        did: vec![],
    });
    r.raise(0, &crate::moments::at_start(), "start", 0);
    for (i, step) in timeline.steps.iter().enumerate() {
        let n = i + 1;
        r.classify_due(step.t);
        r.steps.push(StepReport {
            step: n,
            t: step.t,
            kind: step.kind.name().to_string(),
            excerpt: excerpt(&step_text(&step.kind), 160),
            did: vec![],
        });
        r.step(n, step.t, &step.kind);
    }
    r.classify_due(f64::INFINITY);
    let notes = vec![
        "evaluations are the timeline's own: the harness is not run".to_string(),
        "a suspicious gain is not re-checked with another seed (the daemon re-runs the harness)".to_string(),
        "the edit-loop detector is not run (it diffs the evaluated trees)".to_string(),
        "hook tampering and the beam's new-family questions are not replayed".to_string(),
        "mid-turn questions go out with the next tool result, as a PostToolUse hook delivers them".to_string(),
        "learned question yield comes from this replay alone".to_string(),
    ];
    let summary = summarize(&r.steps);
    Ok(Report {
        source: timeline.header.source.clone(),
        campaign: timeline.header.campaign.clone(),
        spec: r.spec.name.clone(),
        mode: r.spec.mode,
        seed: opts.seed,
        notes,
        steps: r.steps,
        summary,
    })
}

/// A question in the replay's queue (the daemon's `questions` table).
#[derive(Debug, Clone)]
struct Queued {
    id: i64,
    human: bool,
    bank_id: Option<String>,
    moment: Option<String>,
    text: String,
    /// The step and the clock when it was delivered, and how.
    delivered: Option<(usize, u64, Via)>,
    expired: bool,
}

impl Queued {
    fn waiting(&self) -> bool {
        self.delivered.is_none() && !self.expired
    }

    fn as_ref(&self) -> QuestionRef {
        QuestionRef {
            id: Some(self.id),
            source: if self.human { "human".into() } else { self.bank_id.clone().unwrap_or_else(|| "bank".into()) },
            moment: self.moment.clone(),
            text: self.text.clone(),
        }
    }
}

/// A moment as the replay remembers it (the daemon's `moment` events).
#[derive(Debug, Clone)]
struct Remembered {
    moment: String,
    detector: String,
    source: String,
    evaluation_count: u64,
}

struct Replayer<'a> {
    spec: CampaignSpec,
    entries: &'a [Entry],
    settings: Settings,
    campaign: String,
    seed_key: String,
    /// Evaluations, oldest first, with the clock of each.
    evaluations: Vec<(Evaluation, u64)>,
    moments: Vec<Remembered>,
    queue: Vec<Queued>,
    seen: Seen<f64>,
    /// Agent messages waiting for [`plan::STREAM_GRACE`]: (due, step, t, text).
    pending: VecDeque<(f64, usize, f64, String)>,
    /// Tool calls since the last evaluation.
    tool_calls: usize,
    /// The counts between recent evaluations, oldest first.
    cadence: VecDeque<usize>,
    /// While a message is classified after its grace: its step.
    message_step: Option<usize>,
    /// Orders evaluations and deliveries, for the learned yield.
    clock: u64,
    steps: Vec<StepReport>,
    /// Evaluations a stop was blocked on once for being slower than the
    /// campaign's best (the daemon reads its decision events).
    told_slower: std::collections::HashSet<i64>,
    /// The timeline's times are made up (its header's `"clock": "none"`:
    /// an experiment log has no clock); a question about time spent does
    /// not fit it ([`crate::bank::vocabulary::contradicted_by_evidence`]).
    clockless: bool,
    /// The log's rows mostly share their commit (its header's `"changes":
    /// "settings"`): rows try settings of one code, and what is kept does
    /// not build on an earlier change.
    settings_only: bool,
}

impl Replayer<'_> {
    fn did(&mut self, step: usize, d: Did) {
        self.steps[step].did.push(d);
    }

    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    fn step(&mut self, n: usize, t: f64, kind: &StepKind) {
        match kind {
            StepKind::AssistantText { text } => {
                if !text.trim().is_empty() {
                    let due = t + plan::STREAM_GRACE.as_secs_f64();
                    self.pending.push_back((due, n, t, text.clone()));
                }
            }
            StepKind::ToolCall { .. } => {
                self.tool_calls += 1;
                let from = self.tool_calls - 1;
                let cadence: Vec<usize> = self.cadence.iter().copied().collect();
                if let Some(f) = crate::moments::after_tool_calls(from, self.tool_calls, &cadence, &self.settings) {
                    let count = self.evaluations.len();
                    self.raise(n, &f, "numeric", count);
                }
            }
            StepKind::ToolResult { .. } => self.deliver_mid_turn(n),
            StepKind::Evaluation(m) => {
                self.evaluate(n, m, &[]);
            }
            StepKind::Stop { text, evaluation, cached, unevaluated, recorded } => {
                self.stop(n, t, text, evaluation.as_ref(), *cached, unevaluated.as_deref(), recorded.as_ref())
            }
            StepKind::Human { text, queued } => {
                self.did(n, Did::Human { text: text.clone(), queued: *queued });
                if *queued {
                    let id = self.queue_question(true, None, None, text);
                    let q = self.queue_ref(id);
                    self.did(n, Did::Queued { question: q });
                }
            }
        }
    }

    /// The agent messages whose grace is over by `now`, classified in
    /// order, unless the stop already handled the same words. What they
    /// raise goes in the report of the last step before `now` (when the
    /// daemon would have raised it), naming the message's step.
    fn classify_due(&mut self, now: f64) {
        while self.pending.front().is_some_and(|(due, ..)| *due <= now) {
            let Some((_, n, t, text)) = self.pending.pop_front() else { break };
            if !self.first_sight(t + plan::STREAM_GRACE.as_secs_f64(), &text) {
                continue;
            }
            let at = self.steps.len() - 1;
            self.message_step = Some(n);
            let mut claims = self.claim_moments(&text);
            self.read_gain_claims(&mut claims);
            for c in claims {
                self.raise_claim(at, &c, ClaimAction::Ask);
            }
            self.message_step = None;
        }
    }

    fn first_sight(&mut self, now: f64, text: &str) -> bool {
        let window = plan::SEEN_FOR.as_secs_f64();
        self.seen.first_sight(&self.campaign, None, text, now, |at| now - at >= window)
    }

    /// The moments a message shows, with whether a question for each waits.
    fn claim_moments(&self, text: &str) -> Vec<ClaimMoment> {
        let mut out = claims_in(text);
        for c in &mut out {
            c.waiting =
                self.queue.iter().any(|q| q.waiting() && q.moment.as_deref() == Some(c.finding.moment.as_str()));
        }
        out
    }

    /// A gain claimed in words, read against the evaluations so far (the
    /// daemon's `read_gain_claims`).
    fn read_gain_claims(&self, claims: &mut [ClaimMoment]) {
        if claims.iter().any(|c| c.finding.moment == "suspicious_gain") {
            let history: Vec<Evaluation> = self.evaluations.iter().map(|(e, _)| e.clone()).collect();
            crate::moments::gain_claim::read_claims(claims, &history, &self.spec.predicate);
        }
    }

    /// The latest moments, newest first, as the rules read them.
    fn recent(&self) -> Vec<Recorded<'_>> {
        self.moments
            .iter()
            .rev()
            .take(plan::LOOK_BACK)
            .map(|m| Recorded {
                moment: &m.moment,
                detector: &m.detector,
                source: &m.source,
                evaluation_count: Some(m.evaluation_count),
            })
            .collect()
    }

    fn remember(&mut self, moment: &crate::events::Moment) {
        let count = match &moment.evidence {
            MomentEvidence::Finding { evaluation_count, .. } => *evaluation_count as u64,
            MomentEvidence::Family { .. } => 0,
        };
        self.moments.push(Remembered {
            moment: moment.moment.clone(),
            detector: moment.detector.clone(),
            source: moment.source.clone(),
            evaluation_count: count,
        });
    }

    /// Records a moment (the daemon's `moment` event) in step `n`'s report.
    fn record_moment(&mut self, n: usize, m: crate::events::Moment) {
        self.remember(&m);
        let (evaluations, scenarios, evaluation_count) = match &m.evidence {
            MomentEvidence::Finding { evaluations, scenarios, evaluation_count } => {
                (evaluations.clone(), scenarios.clone(), *evaluation_count)
            }
            MomentEvidence::Family { .. } => (vec![], vec![], 0),
        };
        let (outcome, question, suggestions, why) = match &m.outcome {
            MomentOutcome::Recorded => ("recorded", None, vec![], None),
            // Withheld is told apart by its own outcome, not by its words.
            MomentOutcome::NoQuestion(why) if why == plan::WITHHELD_WHY => {
                ("withheld", None, vec![], Some(why.clone()))
            }
            MomentOutcome::NoQuestion(why) => ("no_question", None, vec![], Some(why.clone())),
            MomentOutcome::Question { question_id, bank_id, text, .. } => (
                "question",
                Some(QuestionRef {
                    id: Some(*question_id),
                    source: bank_id.clone(),
                    moment: Some(m.moment.clone()),
                    text: text.clone(),
                }),
                vec![],
                None,
            ),
            MomentOutcome::Suggestions(s) => (
                "suggestions",
                None,
                s.iter()
                    .map(|s| QuestionRef {
                        id: None,
                        source: s.id.clone(),
                        moment: Some(m.moment.clone()),
                        text: s.text.clone(),
                    })
                    .collect(),
                None,
            ),
        };
        let (quote, repeated) = match &m.claim {
            Some(c) => (Some(c.quote.clone()), c.repeated),
            None => (None, false),
        };
        self.did(
            n,
            Did::Moment {
                moment: m.moment,
                detector: m.detector,
                source: m.source,
                detail: m.detail,
                evaluations,
                scenarios,
                evaluation_count,
                quote,
                message_step: self.message_step,
                repeated,
                outcome: outcome.to_string(),
                question,
                suggestions,
                why,
            },
        );
    }

    /// A moment, recorded and acted on by mode (the daemon's `raise`).
    fn raise(&mut self, n: usize, f: &Finding, source: &str, count: usize) {
        let moment = finding_moment(f, source, count);
        self.raise_with(n, f, moment);
    }

    fn raise_with(&mut self, n: usize, f: &Finding, mut moment: crate::events::Moment) {
        match plan::act_for(self.spec.mode) {
            // `[questions] withhold`: under seed 0 the daemon's own draw,
            // so the same moments go without their question here; under
            // another seed another draw, so that replays under several
            // seeds are independent samples of which moments go without
            // (a replay has no beam, so none asks for a new family instead).
            Act::Queue if plan::withheld(&self.seed_key, self.spec.withhold, f, &moment) => {
                moment.outcome = MomentOutcome::NoQuestion(plan::WITHHELD_WHY.into());
                self.record_moment(n, moment);
            }
            Act::Queue => {
                let mut evidence = crate::bank::evidence::Evidence::of_finding(
                    &f.moment,
                    &f.detector,
                    &f.scenarios,
                    &f.detail,
                    f.evaluations.len(),
                    moment.claim.as_ref().map(|c| c.quote.as_str()),
                    &f.facts,
                );
                if self.clockless {
                    evidence.facts.insert("clock".into(), "none".into());
                    // An experiment log's figures are the agent's own rows.
                    evidence.facts.insert("figures".into(), "agent_log".into());
                }
                if self.settings_only {
                    evidence.facts.insert("changes".into(), "settings".into());
                }
                let q = self.pick_for(&f.moment, groups_for(&f.moment), Some(&evidence));
                let id = self.queue_question(false, Some(&q.source), Some(&f.moment), &q.text);
                moment.outcome =
                    MomentOutcome::Question { question_id: id, bank_id: q.source, text: q.text, via: None };
                self.record_moment(n, moment);
                let queued = self.queue_ref(id);
                self.did(n, Did::Queued { question: queued });
            }
            Act::Suggest => {
                let (asked, total, stats) = self.selection_inputs();
                let req = select::Request {
                    moment: &f.moment,
                    spec: &self.spec,
                    asked: &asked,
                    prefer: &[],
                    stats: &stats,
                    seed: select::seed_for(&self.seed_key, total),
                    evidence: None,
                };
                let suggestions = select::suggest(self.entries, &req, plan::SUGGESTIONS);
                moment.outcome = MomentOutcome::Suggestions(
                    suggestions
                        .iter()
                        .map(|c| crate::events::Suggestion {
                            id: c.entry.id.clone(),
                            text: c.text.clone(),
                            rationale: c.entry.rationale.clone(),
                        })
                        .collect(),
                );
                self.record_moment(n, moment);
            }
            Act::Record => self.record_moment(n, moment),
        }
    }

    /// A claim moment recorded with its evidence and acted on (the
    /// daemon's `raise_claim`).
    fn raise_claim(&mut self, n: usize, c: &ClaimMoment, action: ClaimAction) {
        let count = self.evaluations.len();
        let f = &c.finding;
        // The latest question of this moment delivered before these words.
        let delivered = self
            .queue
            .iter()
            .filter(|q| q.moment.as_deref() == Some(f.moment.as_str()))
            .filter_map(|q| q.delivered.filter(|(step, _, _)| *step < n).map(|(_, at, _)| at))
            .max();
        let repeated = plan::repeated_claim(delivered, self.evaluations.last().map(|(_, at)| *at));
        let mut base = finding_moment(f, "text", count);
        base.claim = Some(crate::events::ClaimEvidence { quote: c.quote.clone(), repeated });
        let action = match action {
            ClaimAction::Ask => {
                let latest_failure = self.evaluations.last().and_then(|(e, _)| e.failure_kind());
                plan::claim_record_only(f, c.waiting, latest_failure).map_or(action, ClaimAction::RecordOnly)
            }
            other => other,
        };
        match action {
            ClaimAction::Ask => self.raise_with(n, f, base),
            ClaimAction::AskedAtStop(q) => {
                base.outcome = MomentOutcome::Question {
                    question_id: q.id.unwrap_or(0),
                    bank_id: q.source,
                    text: q.text,
                    via: Some(Via::StopHookReason),
                };
                self.record_moment(n, base);
            }
            ClaimAction::RecordOnly(why) => {
                base.outcome = MomentOutcome::NoQuestion(why.to_string());
                self.record_moment(n, base);
            }
        }
        if plan::escalates(&f.moment, repeated) {
            let d =
                Did::Escalated { moment: f.moment.clone(), why: plan::ESCALATED_WHY.into(), quote: c.quote.clone() };
            self.did(n, d);
        }
    }

    /// What selection reads of the campaign: the bank ids asked here (one
    /// per id, by latest ask), how many questions were asked, and the
    /// learned yield (from this replay's questions and evaluations).
    fn selection_inputs(&self) -> (Vec<AskedHere>, usize, HashMap<String, learn::EntryStats>) {
        let ids: Vec<&str> = self.queue.iter().filter_map(|q| q.bank_id.as_deref()).collect();
        let asked = AskedHere::from_sequence(&ids);
        let stamp = |c: u64| format!("{c:012}");
        let delivered: Vec<learn::Asked> = self
            .queue
            .iter()
            .filter(|q| q.bank_id.is_some())
            .filter_map(|q| {
                q.delivered.map(|(_, at, _)| learn::Asked {
                    question_id: q.id,
                    campaign_id: self.campaign.clone(),
                    bank_id: q.bank_id.clone(),
                    delivered_at: stamp(at),
                    moment: q.moment.clone(),
                    // Selection reads no uplift, the one figure this changes.
                    claim: false,
                })
            })
            .collect();
        let evals: Vec<learn::EvalPoint> = self
            .evaluations
            .iter()
            .map(|(e, at)| learn::EvalPoint {
                id: e.id.unwrap_or(0),
                campaign_id: self.campaign.clone(),
                created_at: stamp(*at),
                geomean: e.verdict.geomean_speedup,
            })
            .collect();
        let attributions = learn::attribute(&delivered, &evals, learn::DEFAULT_WINDOW, learn::DEFAULT_THRESHOLD);
        let mut stats: HashMap<String, learn::EntryStats> = learn::stats(&attributions).into_iter().collect();
        stats.extend(learn::stats_by_moment(&delivered, &attributions));
        (asked, self.queue.len(), stats)
    }

    /// The question for `moment`, with the moment's evidence (the daemon's
    /// `pick_question_for`).
    fn pick_for(&self, moment: &str, prefer: &[&str], evidence: Option<&crate::bank::evidence::Evidence>) -> Question {
        let (asked, total, stats) = self.selection_inputs();
        let req = select::Request {
            moment,
            spec: &self.spec,
            asked: &asked,
            prefer,
            stats: &stats,
            seed: select::seed_for(&self.seed_key, total),
            evidence,
        };
        gate::choose_question(self.entries, &req)
    }

    fn queue_question(&mut self, human: bool, bank_id: Option<&str>, moment: Option<&str>, text: &str) -> i64 {
        let id = self.queue.len() as i64 + 1;
        self.queue.push(Queued {
            id,
            human,
            bank_id: bank_id.map(str::to_string),
            moment: moment.map(str::to_string),
            text: text.to_string(),
            delivered: None,
            expired: false,
        });
        id
    }

    fn queue_ref(&self, id: i64) -> QuestionRef {
        self.queue[(id - 1) as usize].as_ref()
    }

    fn deliver(&mut self, n: usize, id: i64, via: Via) -> QuestionRef {
        let at = self.tick();
        let q = &mut self.queue[(id - 1) as usize];
        q.delivered = Some((n, at, via));
        q.as_ref()
    }

    /// A tool result: a PostToolUse hook carries the next waiting question
    /// as added context (a person's first, then the oldest), as the store's
    /// `claim_next_question` picks it; not in audit mode.
    fn deliver_mid_turn(&mut self, n: usize) {
        if self.spec.mode == Mode::Audit {
            return;
        }
        let next = self.queue.iter().filter(|q| q.waiting()).min_by_key(|q| (!q.human, q.id)).map(|q| q.id);
        if let Some(id) = next {
            let q = self.deliver(n, id, Via::HookAdditionalContext);
            self.did(n, Did::Delivered { question: q, via: Via::HookAdditionalContext.as_str().into() });
        }
    }

    /// The timeline's measurements judged by the predicate, as the harness
    /// judges its results.
    fn judge(&self, n: usize, m: &Measured, id: Option<i64>) -> Evaluation {
        let verdict = crate::predicate::judge(
            &self.spec.predicate,
            &self.spec.harness.scenarios,
            &m.scenarios,
            m.failures.clone(),
        );
        Evaluation {
            id,
            tree: format!("replay-step-{n}"),
            verdict,
            build: None,
            // A timeline's evaluation with failures and no scenario is a
            // run that failed (the daemon's own would say so).
            run: (m.scenarios.is_empty() && !m.failures.is_empty()).then(|| crate::evaluation::Step {
                command: "(replayed)".into(),
                ok: false,
                exit: "failed".into(),
                seconds: 0.0,
                output_tail: m.failures.join("; "),
            }),
            violations: vec![],
            duration_ms: 0,
            created_at: String::new(),
            cached: false,
            origin: Default::default(),
        }
    }

    /// A new evaluation of the timeline's measurements; the numeric
    /// detectors run after it (the daemon's `after_evaluation`), `held`
    /// recorded without a question of their own. Returns it.
    fn evaluate(&mut self, n: usize, m: &Measured, held: &[String]) -> Evaluation {
        let id = self.evaluations.len() as i64 + 1;
        let eval = self.judge(n, m, Some(id));
        let at = self.tick();
        self.evaluations.push((eval.clone(), at));
        // An evaluation event resets the idle-plateau count, and its count
        // joins the campaign's cadence (the daemon's `count_tool_calls`).
        if self.cadence.len() >= 8 {
            self.cadence.pop_front();
        }
        self.cadence.push_back(self.tool_calls);
        self.tool_calls = 0;
        self.did(n, evaluated(&eval, false));
        {
            let history: Vec<Evaluation> = self.evaluations.iter().map(|(e, _)| e.clone()).collect();
            let findings = detect::detect(&history, &self.settings);
            let count = history.len();
            let suspicious = findings.iter().any(|f| f.moment == "suspicious_gain");
            for f in findings {
                let planned = plan::plan_finding(&f, &self.recent(), held, count, self.settings.cooldown_evaluations);
                match planned {
                    FindingPlan::Cooldown => {}
                    FindingPlan::Held => {
                        let mut moment = finding_moment(&f, "numeric", count);
                        moment.outcome = MomentOutcome::NoQuestion(plan::HELD_WHY.into());
                        self.record_moment(n, moment);
                    }
                    FindingPlan::Raise => self.raise(n, &f, "numeric", count),
                }
            }
            if suspicious && self.settings.recheck_suspicious && eval.verdict.holds {
                self.did(n, Did::RecheckNotReplayed { evaluation: id });
            }
        }
        eval
    }

    /// A stop attempt (the daemon's `judge_stop`): the claims of its words,
    /// the evaluation, the plan, the question carried and the claims raised.
    #[allow(clippy::too_many_arguments)]
    fn stop(
        &mut self,
        n: usize,
        t: f64,
        text: &str,
        evaluation: Option<&Measured>,
        cached: bool,
        unevaluated: Option<&str>,
        recorded: Option<&RecordedStop>,
    ) {
        let claims =
            if text.trim().is_empty() || !self.first_sight(t, text) { vec![] } else { self.claim_moments(text) };
        let names: Vec<String> = claims.iter().map(|c| c.finding.moment.clone()).collect();
        let claim_names: Vec<&str> = names.iter().map(String::as_str).collect();
        let held = gate::held_moments(self.spec.mode, &claim_names);
        let no_eval = "the timeline has no evaluation before this stop (the replay cannot run the harness)";
        let eval = match (unevaluated, evaluation) {
            (Some(_), _) => None,
            (None, Some(m)) if !cached => Some(self.evaluate(n, m, &held)),
            // The daemon's cache gave an earlier evaluation of the same tree.
            (None, Some(m)) => Some(self.judge(n, m, None)),
            // An unchanged tree: the latest evaluation, from the cache.
            (None, None) => self.evaluations.last().map(|(e, _)| e.clone()),
        };
        if let (Some(e), true) = (&eval, evaluation.is_none() || cached) {
            self.did(n, evaluated(e, true));
        }
        // A stop on a tree slower than the campaign's best: blocked once.
        let eval = match eval {
            Some(mut e) if e.verdict.holds && self.spec.gate.against_best => {
                let history: Vec<Evaluation> = self.evaluations.iter().map(|(e, _)| e.clone()).collect();
                if let Some(why) = gate::slower_than_best(&e, &history, &self.spec.predicate) {
                    if self.told_slower.insert(e.id.unwrap_or(0)) {
                        e.verdict.failures.push(why);
                        e.verdict.holds = false;
                    }
                }
                Some(e)
            }
            other => other,
        };
        let why = unevaluated.unwrap_or(no_eval).to_string();
        let waiting_rows: Vec<Queued> = match &eval {
            Some(_) => self.queue.iter().filter(|q| q.waiting()).cloned().collect(),
            None => vec![],
        };
        // A gain in the stop's words with no gain measured asks nothing
        // (the daemon's `judge_stop`).
        let mut claims = claims;
        if eval.is_some() {
            self.read_gain_claims(&mut claims);
        }
        let (unmeasured, claims): (Vec<_>, Vec<_>) =
            claims.into_iter().partition(|c| crate::moments::gain_claim::unmeasured(&c.finding));
        let names: Vec<String> = claims.iter().map(|c| c.finding.moment.clone()).collect();
        let claim_names: Vec<&str> = names.iter().map(String::as_str).collect();
        let campaign = self.campaign.clone();
        let predicate = self.spec.predicate.clone();
        let input = gate::StopInput {
            campaign_id: &campaign,
            mode: self.spec.mode,
            predicate: &predicate,
            judged: match &eval {
                Some(e) => gate::Judged::Evaluated(e),
                None => gate::Judged::Unevaluated(&why),
            },
            tampered: &[],
            waiting: waiting_rows
                .iter()
                .map(|q| gate::Waiting { id: q.id, human: q.human, moment: q.moment.clone() })
                .collect(),
            claims: claim_names.clone(),
        };
        let plan = gate::plan_stop(&input);
        // The question the plan carries: a waiting one, or a fresh pick queued first.
        let asked: Option<(i64, Question)> = match &plan.ask {
            None => None,
            Some(gate::Ask::Queued(id)) => {
                let row = waiting_rows.iter().find(|q| q.id == *id).cloned();
                row.map(|q| {
                    let question = Question {
                        queued_id: Some(q.id),
                        source: if q.human {
                            "human".into()
                        } else {
                            q.bank_id.clone().unwrap_or_else(|| "bank".into())
                        },
                        moment: q.moment.clone().unwrap_or_else(|| "completion_claim".into()),
                        text: q.text.clone(),
                    };
                    (q.id, question)
                })
            }
            Some(gate::Ask::Pick { moment, groups }) => {
                let quote = claims.iter().find(|c| c.finding.moment == *moment).map(|c| c.quote.as_str());
                let evidence = gate::stop_evidence(input.judged, moment, quote);
                let q = self.pick_for(moment, groups, Some(&evidence));
                let id = self.queue_question(false, Some(&q.source), Some(&q.moment), &q.text);
                let queued = self.queue_ref(id);
                self.did(n, Did::Queued { question: queued });
                Some((id, q))
            }
        };
        let reason = plan.reason_text(&input, asked.as_ref().map(|(_, q)| q));
        if let Some((id, q)) = &asked {
            let delivered = self.deliver(n, *id, Via::StopHookReason);
            if let Some(i) = plan.claims.iter().position(|c| *c == gate::ClaimPlan::AskedAtStop) {
                let asked_ref = QuestionRef {
                    id: Some(*id),
                    source: q.source.clone(),
                    moment: Some(q.moment.clone()),
                    text: q.text.clone(),
                };
                self.raise_claim(n, &claims[i], ClaimAction::AskedAtStop(asked_ref));
            }
            self.did(n, Did::Delivered { question: delivered, via: Via::StopHookReason.as_str().into() });
        }
        for (c, planned) in claims.iter().zip(&plan.claims) {
            let action = match *planned {
                gate::ClaimPlan::AskedAtStop => continue,
                gate::ClaimPlan::Ask => ClaimAction::Ask,
                gate::ClaimPlan::RecordOnly(why) => ClaimAction::RecordOnly(why),
            };
            self.raise_claim(n, c, action);
        }
        for c in &unmeasured {
            self.raise_claim(n, c, ClaimAction::RecordOnly(crate::moments::gain_claim::GAIN_UNMEASURED));
        }
        let (failing, failures) = match &eval {
            Some(e) => failing_of(e),
            None => (vec![], vec![]),
        };
        let question = asked.as_ref().map(|(id, q)| QuestionRef {
            id: Some(*id),
            source: q.source.clone(),
            moment: Some(q.moment.clone()),
            text: q.text.clone(),
        });
        self.did(
            n,
            Did::Stop {
                decision: plan.decision,
                holds: eval.as_ref().map(|e| e.verdict.holds),
                evaluation: eval.as_ref().and_then(|e| e.id),
                failing,
                failures,
                unevaluated: eval.is_none().then(|| why.clone()),
                question,
                reason,
                recorded: recorded.cloned(),
            },
        );
        // Allowed: what still waits will never be answered.
        for id in &plan.expire {
            if let Some(q) = self.queue.iter_mut().find(|q| q.id == *id && q.waiting()) {
                q.expired = true;
                let reason = gate::expiry_reason(q.moment.as_deref(), false).to_string();
                let question = q.as_ref();
                self.did(n, Did::Expired { question, reason });
            }
        }
    }
}

/// What becomes of a claim moment (the daemon's `ClaimAction`).
#[derive(Debug, Clone)]
enum ClaimAction {
    Ask,
    AskedAtStop(QuestionRef),
    RecordOnly(&'static str),
}

fn failing_of(e: &Evaluation) -> (Vec<Failing>, Vec<String>) {
    let failing = e
        .verdict
        .scenarios
        .iter()
        .filter(|s| !s.passes)
        .map(|s| Failing { scenario: s.scenario.clone(), reasons: s.reasons.clone() })
        .collect();
    (failing, e.verdict.failures.clone())
}

fn evaluated(e: &Evaluation, cached: bool) -> Did {
    let (failing, failures) = failing_of(e);
    Did::Evaluated {
        evaluation: e.id.unwrap_or(0),
        holds: e.verdict.holds,
        geomean_speedup: e.verdict.geomean_speedup,
        geomean_interval: e.verdict.geomean_interval,
        failing,
        failures,
        cached,
        incorrect: e.incorrect(),
    }
}

fn step_text(k: &StepKind) -> String {
    match k {
        StepKind::AssistantText { text } | StepKind::ToolResult { text } | StepKind::Human { text, .. } => text.clone(),
        StepKind::ToolCall { tool, text } => format!("{tool}: {text}"),
        StepKind::Evaluation(m) => format!("{} scenarios measured", m.scenarios.len()),
        StepKind::Stop { text, .. } => text.clone(),
    }
}

/// `s` on one line, at most `n` characters (an ellipsis when cut).
pub fn excerpt(s: &str, n: usize) -> String {
    let one: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if one.chars().count() <= n {
        one
    } else {
        format!("{}…", one.chars().take(n.saturating_sub(1)).collect::<String>())
    }
}

#[cfg(test)]
mod tests;
