//! The Stop use case: gather the stop's claims, evaluate, read the waiting
//! questions, plan with [`gate::plan_stop`], deliver the planned question
//! and persist one stop attempt with its decision event; an allowed stop
//! then expires the questions still waiting (`question.expired`).

use anyhow::Context;
use serde_json::{json, Value};

use crate::campaign::CampaignSpec;
use crate::events::{DeliveredQuestion, Event, Via};
use crate::gate::{self, Decision, Question};
use crate::store::NewStopAttempt;

use super::hooks::block_json;
use super::{HookReply, Result, Supervisor, SupervisorError};

impl Supervisor {
    /// The end of a spawned agent's turn (`run_loop.rs`), judged as a
    /// completion claim by the Stop gate, as a Stop hook call is: recorded
    /// as the `stop` hook call of `agent` (a `TurnEnd` payload, keyed by a
    /// call id of the run), then judged. Returns the block reason, or None
    /// when the stop is allowed.
    #[tracing::instrument(name = "turn_end", skip_all, fields(
        campaign = %campaign_id,
        agent = %agent,
        session = %session,
    ))]
    pub async fn judge_turn_end(
        &self,
        campaign_id: &str,
        run_id: i64,
        agent: &str,
        session: &str,
        claim: &str,
        after_block: bool,
    ) -> Result<Option<String>> {
        let started = std::time::Instant::now();
        let judged = self.judge_turn_end_timed(campaign_id, run_id, agent, session, claim, after_block).await;
        // Counted with the Stop hook calls, as it always was.
        crate::metrics::METRICS.hook_call("stop", judged.is_ok(), started.elapsed().as_secs_f64());
        let reply = judged?;
        Ok(match reply.decision.as_deref() {
            Some("block") => Some(
                reply.output.as_ref().and_then(|o| o["reason"].as_str()).unwrap_or("the predicate fails").to_string(),
            ),
            _ => None,
        })
    }

    async fn judge_turn_end_timed(
        &self,
        campaign_id: &str,
        run_id: i64,
        agent: &str,
        session: &str,
        claim: &str,
        after_block: bool,
    ) -> Result<HookReply> {
        let (_row, spec) = self.campaign(campaign_id).await?;
        let payload = json!({
            "session_id": session,
            "hook_event_name": "TurnEnd",
            "stop_hook_active": after_block,
            "last_assistant_message": claim,
        });
        let call_id = format!("run-{run_id}-{}", rand::random::<u64>());
        let (event_id, _, session) =
            self.record_hook_call(campaign_id, agent, "stop", Some(&call_id), &payload, None).await?;
        tracing::debug!(event_id, "turn end recorded");
        self.judge_stop(campaign_id, &spec, agent, event_id, session.as_deref(), &payload).await
    }

    pub(super) async fn judge_stop(
        &self,
        campaign_id: &str,
        spec: &CampaignSpec,
        agent: &str,
        event_id: i64,
        session: Option<&str>,
        payload: &Value,
    ) -> Result<HookReply> {
        let claim = payload.get("last_assistant_message").and_then(Value::as_str);
        let stop_hook_active = payload.get("stop_hook_active").and_then(Value::as_bool).unwrap_or(false);
        // The moments the agent's last words show (a claimed limit, a
        // dismissed failure...): in autonomous mode a blocked stop asks
        // their question, and the evaluation below does not ask its own
        // question for the same moment.
        let claims = match claim {
            Some(text) => super::moments::at_stop(self, campaign_id, session, text).await.unwrap_or_else(|e| {
                tracing::warn!(error = %e, "classifying the stop's claim");
                vec![]
            }),
            None => vec![],
        };
        let claim_moments: Vec<&str> = claims.iter().map(|c| c.finding.moment.as_str()).collect();
        let held = gate::held_moments(spec.mode, &claim_moments);
        let tampered = self.check_hook_install(campaign_id, session, false).await?;
        let evaluation = match self.evaluate_holding(campaign_id, false, &held).await {
            Ok(eval) => Ok(eval),
            // The gate fails closed: no verdict, no stop (except in audit mode).
            Err(SupervisorError::Internal(e)) => Err(format!("{e:#}")),
            // A workspace folder gone: the stop is blocked with the message
            // that says what to do, as any evaluation that cannot run.
            Err(SupervisorError::Conflict(m)) => Err(m),
            Err(other) => return Err(other),
        };
        // Under pressure (blocked again and again without a gain) a passing
        // candidate gets the escalated checks first (`app/claims.rs`).
        let evaluation = match evaluation {
            Ok(eval) if eval.verdict.holds => match self.pressure_checks(campaign_id, spec, eval).await {
                Ok(eval) => Ok(eval),
                Err(e) => Err(format!("{e:#}")),
            },
            other => other,
        };
        // A holding stop measured against the campaign's history: a tree
        // slower than its best is blocked once; a gain too large to take on
        // numbers alone is held until evidence is filed for its question.
        let evaluation = match evaluation {
            Ok(eval) if eval.verdict.holds && (spec.gate.against_best || spec.gate.hold_gain > 0.0) => {
                self.against_history(campaign_id, spec, eval).await.map_err(|e| format!("{e:#}"))
            }
            other => other,
        };
        // A turn for the questions still unanswered: one left too long is
        // asked again (queued now, so this stop may carry it), then escalated.
        if let Err(e) = self.answers_at_stop(campaign_id, session, spec).await {
            tracing::warn!(campaign = %campaign_id, error = %e, "following the unanswered questions");
        }
        let waiting = match &evaluation {
            Ok(_) => self.inner.store.list_questions(campaign_id, true).await?,
            Err(_) => vec![],
        };
        // A gain in the stop's words, read against the evaluation just
        // stored: with no gain measured it asks nothing here (recorded
        // with why, below), and the stop's question is chosen without it.
        let mut claims = claims;
        if evaluation.is_ok() {
            super::moments::read_gain_claims(self, campaign_id, spec, &mut claims).await?;
        }
        let (unmeasured, claims): (Vec<_>, Vec<_>) =
            claims.into_iter().partition(|c| crate::moments::gain_claim::unmeasured(&c.finding));
        let claim_moments: Vec<&str> = claims.iter().map(|c| c.finding.moment.as_str()).collect();
        let mut input = gate::StopInput {
            campaign_id,
            mode: spec.mode,
            predicate: &spec.predicate,
            judged: match &evaluation {
                Ok(eval) => gate::Judged::Evaluated(eval),
                Err(why) => gate::Judged::Unevaluated(why),
            },
            tampered: &tampered,
            waiting: waiting
                .iter()
                .map(|q| gate::Waiting { id: q.id, human: q.source == "human", moment: q.moment.clone() })
                .collect(),
            claims: claim_moments,
        };
        let objective = evaluation.as_ref().ok().and_then(|e| e.verdict.geomean_speedup);
        // A limit a person accepted lets the agent stop (as an accepted
        // limit, never a success), unless its hooks were tampered with.
        let accepted = match spec.mode {
            crate::campaign::Mode::Audit => None,
            _ if !tampered.is_empty() => None,
            _ => self.accepted_limit(campaign_id).await?,
        };
        let (plan, asked) = match &accepted {
            Some(_) => (gate::plan_stop(&input).limit_accepted(&input), None),
            None => {
                let quotes: Vec<(&str, &str)> =
                    claims.iter().map(|c| (c.finding.moment.as_str(), c.quote.as_str())).collect();
                self.deliver_at_stop(campaign_id, spec, &mut input, &waiting, objective, &quotes).await?
            }
        };
        let mut reason = match &accepted {
            Some(a) => Some(format!("stopped: limit accepted by {} (claim id {})", a.by, a.claim_id)),
            None => plan.reason_text(&input, asked.as_ref().map(|(_, q)| q)),
        };
        // Blocked again without a gain: the streak is recorded, and past
        // `[gate] remind_after_blocks` the reason names the sanctioned exit.
        if plan.decision == Decision::Block && evaluation.is_ok() {
            let streak = self.block_streak(campaign_id, Some(("block", objective))).await?;
            if streak > 0 {
                let after = spec.gate.remind_after_blocks;
                let told = Event::BlockStreak { blocks: streak, best_geomean: objective, escalated: streak >= after };
                self.record_event(campaign_id, session, None, told).await?;
            }
            if let (Some(r), Some(more)) =
                (reason.as_mut(), gate::limit_reminder(streak, spec.gate.remind_after_blocks))
            {
                r.push_str(&more);
            }
        }
        if let (Some(r), Some((id, _))) = (reason.as_mut(), &asked) {
            super::answers::name_in_reason(r, *id);
        }
        let question_id = asked.as_ref().map(|(id, _)| *id);
        if let Some((id, q)) = &asked {
            if let Some(i) = plan.claims.iter().position(|c| *c == gate::ClaimPlan::AskedAtStop) {
                let action = super::moments::ClaimAction::AskedAtStop(*id, &q.source, &q.text);
                super::moments::raise_claim(self, campaign_id, session, spec, &claims[i], action).await?;
            }
            let via = Via::StopHookReason;
            self.record_delivered(campaign_id, session, DeliveredQuestion::asked_at_stop(*id, q), via).await?;
        }
        // The other claim moments, as planned (by mode, or recorded only).
        for (c, planned) in claims.iter().zip(&plan.claims) {
            let action = match *planned {
                gate::ClaimPlan::AskedAtStop => continue,
                gate::ClaimPlan::Ask => super::moments::ClaimAction::Ask,
                gate::ClaimPlan::RecordOnly(why) => super::moments::ClaimAction::RecordOnly(why),
            };
            super::moments::raise_claim(self, campaign_id, session, spec, c, action).await?;
        }
        for c in &unmeasured {
            let why = crate::moments::gain_claim::GAIN_UNMEASURED;
            super::moments::raise_claim(
                self,
                campaign_id,
                session,
                spec,
                c,
                super::moments::ClaimAction::RecordOnly(why),
            )
            .await?;
        }
        let decision = plan.decision;
        let (eval_id, holds) = match &evaluation {
            Ok(eval) => (eval.id, eval.verdict.holds),
            Err(_) => (None, false),
        };
        let told = Event::Decision {
            decision,
            holds,
            evaluation_id: eval_id,
            stop_event_id: event_id,
            question_id,
            reason: reason.clone(),
        };
        let (told_kind, told) = (told.kind(), told.body());
        let created_at = crate::time::now();
        let (_, decision_event) = self
            .inner
            .store
            .insert_stop_attempt_with_event(
                &NewStopAttempt {
                    campaign_id,
                    event_id,
                    session_id: session,
                    agent,
                    claim,
                    stop_hook_active,
                    evaluation_id: eval_id,
                    holds,
                    decision: decision.as_str(),
                    reason: reason.as_deref(),
                    question_id,
                },
                &told_kind,
                &told,
                &created_at,
            )
            .await?;
        self.publish(decision_event, campaign_id, session, &told_kind, told, created_at);
        tracing::info!(campaign = %campaign_id, decision = decision.as_str(), holds, "stop attempt judged");
        // The allow is recorded: what still waits will never be answered.
        // Not the hook's failure if this fails (the stop stands as allowed).
        if let Err(e) = self.expire_waiting(campaign_id, session, &plan.expire, &waiting, eval_id).await {
            tracing::warn!(campaign = %campaign_id, error = %e, "expiring the questions an allowed stop left waiting");
        }
        Ok(HookReply {
            output: match decision {
                Decision::Block => reason.as_deref().map(block_json),
                _ => None,
            },
            decision: Some(decision.as_str().to_string()),
            event_id,
        })
    }

    /// A holding evaluation at a stop, against the campaign's history (read
    /// once): [`gate::slower_than_best`] fails it with the better tree named,
    /// unless a stop on this evaluation was already blocked so (the agent
    /// stopped again: it stands); [`gate::gain_to_hold`] fails it with why,
    /// unless a suspicious-gain question delivered since that evaluation was
    /// answered with evidence filed for it.
    async fn against_history(
        &self,
        campaign_id: &str,
        spec: &CampaignSpec,
        mut eval: crate::evaluation::Evaluation,
    ) -> anyhow::Result<crate::evaluation::Evaluation> {
        let history = self.inner.store.list_evaluations(campaign_id).await?;
        let slower = spec.gate.against_best.then(|| gate::slower_than_best(&eval, &history, &spec.predicate)).flatten();
        if let Some(why) = slower {
            let decisions = self.inner.store.recent_events(campaign_id, crate::events::kind::DECISION, 200).await?;
            let told_before = decisions.iter().any(|d| {
                d.payload["evaluation_id"].as_i64() == eval.id
                    && d.payload["reason"].as_str().is_some_and(|r| r.contains(gate::SLOWER_THAN_BEST))
            });
            if !told_before {
                eval.verdict.failures.push(why);
                eval.verdict.holds = false;
            }
        }
        if let Some(why) =
            gate::gain_to_hold(&eval, &history, spec.gate.hold_gain).filter(|_| spec.gate.hold_gain > 0.0)
        {
            let answered =
                self.inner.store.answered_with_evidence(campaign_id, "suspicious_gain", &eval.created_at).await?;
            if !answered {
                eval.verdict.failures.push(why);
                eval.verdict.holds = false;
            }
        }
        Ok(eval)
    }

    /// Expires the questions `expire` (of `waiting`) once a stop is allowed,
    /// each with why ([`gate::expiry_reason`]), recorded as
    /// `question.expired`. A suspicious gain's question says whether
    /// gadfly's re-evaluation of the allowing evaluation confirmed the gain
    /// (it runs before the allow, in the evaluation; `app/recheck.rs`).
    async fn expire_waiting(
        &self,
        campaign_id: &str,
        session: Option<&str>,
        expire: &[i64],
        waiting: &[crate::store::QuestionRow],
        evaluation_id: Option<i64>,
    ) -> anyhow::Result<()> {
        let gains = waiting.iter().any(|q| expire.contains(&q.id) && q.moment.as_deref() == Some("suspicious_gain"));
        let confirmed = match evaluation_id {
            Some(id) if gains => self
                .inner
                .store
                .recent_events(campaign_id, crate::events::kind::GAIN_CONFIRMED, 50)
                .await?
                .iter()
                .any(|e| e.payload["evaluation_id"].as_i64() == Some(id)),
            _ => false,
        };
        for q in waiting.iter().filter(|q| expire.contains(&q.id)) {
            let reason = gate::expiry_reason(q.moment.as_deref(), confirmed);
            // None: delivered meanwhile (a hook claimed it), or expired already.
            if let Some(row) = self.inner.store.expire_question(q.id, reason).await? {
                let expired = Event::QuestionExpired { question: (&row).into(), reason: reason.to_string() };
                self.record_event(campaign_id, session, None, expired).await?;
            }
        }
        Ok(())
    }

    /// Plans the stop ([`gate::plan_stop`]) and delivers the question the
    /// plan carries: a waiting one, or a fresh pick queued first. A waiting
    /// question that another hook delivered since the queue was read (a
    /// PostToolUse hook claimed it: its row is no longer queued) is not
    /// carried, nor recorded as delivered again: the stop is planned again
    /// without it. The plan, and the question delivered (its row id).
    async fn deliver_at_stop(
        &self,
        campaign_id: &str,
        spec: &CampaignSpec,
        input: &mut gate::StopInput<'_>,
        waiting: &[crate::store::QuestionRow],
        objective: Option<f64>,
        quotes: &[(&str, &str)],
    ) -> anyhow::Result<(gate::StopPlan, Option<(i64, Question)>)> {
        // Each waiting question is lost at most once; a fresh pick lost to
        // a hook that claimed it within moments is picked again, a few times.
        for _ in 0..input.waiting.len() + 3 {
            let plan = gate::plan_stop(input);
            let question = match &plan.ask {
                None => return Ok((plan, None)),
                Some(gate::Ask::Queued(id)) => queued_question(
                    waiting.iter().find(|q| q.id == *id).context("a planned question not in the queue")?,
                ),
                Some(gate::Ask::Pick { moment, groups }) => {
                    // The question names what it is about: the failing
                    // scenarios, the stop's own words.
                    let quote = quotes.iter().find(|(m, _)| m == moment).map(|(_, q)| *q);
                    let evidence = gate::stop_evidence(input.judged, moment, quote);
                    self.pick_question_for(campaign_id, spec, moment, groups, Some(&evidence)).await?
                }
            };
            let id = match question.queued_id {
                Some(id) => id,
                None => {
                    let q = &question;
                    self.inner
                        .store
                        .queue_question(campaign_id, "bank", Some(&q.source), Some(&q.moment), &q.text)
                        .await?
                }
            };
            if self.inner.store.mark_delivered(id, Via::StopHookReason.as_str(), objective).await? {
                return Ok((plan, Some((id, question))));
            }
            tracing::info!(campaign = %campaign_id, question = id, "the stop's question was delivered elsewhere meanwhile");
            input.delivered_elsewhere(id);
        }
        Ok((gate::plan_stop(input).without_question(), None))
    }
}

/// A queued question, as the gate carries it.
fn queued_question(q: &crate::store::QuestionRow) -> Question {
    Question {
        queued_id: Some(q.id),
        source: if q.source == "human" { "human".into() } else { q.bank_id.clone().unwrap_or_else(|| "bank".into()) },
        moment: q.moment.clone().unwrap_or_else(|| "completion_claim".into()),
        text: q.text.clone(),
    }
}
