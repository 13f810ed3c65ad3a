//! Answer tracking (issue #35 item 4): a delivered question counts as
//! answered only when fresh evidence follows it, never on the agent's
//! words alone. Fresh evidence is either
//!
//! - a new evaluation of a workspace tree other than the one the workspace
//!   had presented last when the question was delivered (its baseline); a
//!   tree answered from the store (unchanged, or one evaluated before) is
//!   not new, nor is a forced re-run of the baseline tree; or
//! - evidence files the agent files for the question (`gadfly answer ID
//!   --evidence FILE`, `POST /campaigns/{id}/answers` with the hook token).
//!
//! Every judged stop attempt is a turn, of the session that stopped: a
//! question delivered to one session waits for that session's stops (or
//! any stop, when it reached no session in particular). A question left unanswered for
//! `[questions] answer_within_turns` turns (default 3) is asked again in
//! another form: another entry of its bank group for the same moment, or
//! (a person's question, or a group with no other entry that fits) its own
//! text, prefixed as a repeat. When the re-ask is left unanswered for as
//! many turns again, the question is escalated: `question.escalated`, shown
//! on the console, sent to the webhooks that ask for `question_escalated`.
//! A question and its re-ask are one thread: evidence answers both, and a
//! re-ask still waiting when its first form is answered expires.
//!
//! Audit mode records answers but neither asks again nor escalates: it
//! never puts anything to the agent.

use serde::Serialize;
use serde_json::Value;

use crate::campaign::{CampaignSpec, Mode};
use crate::evaluation::{Evaluation, Origin};
use crate::events::{self, Answered, AnsweredBy, ClaimFile, DeliveredQuestion, Escalated, Event, ReaskForm, Reasked};
use crate::store::{tree_of, AnswerRow};

use super::{Result, Supervisor, SupervisorError};

/// What answer tracking does next about one thread (a question and its
/// re-asks) at a stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Due {
    Nothing,
    /// Left unanswered for `answer_within_turns`: ask it again.
    Reask,
    /// Its re-ask left unanswered as long: tell a person.
    Escalate,
}

/// What is due for the thread of `first` (delivered, unanswered), with
/// `reasks` its re-asks, oldest first. The second miss counts from the
/// re-ask's delivery; a re-ask that never reached the agent (it expired
/// at an allowed stop, or still waits) counts from when it was queued,
/// `within` turns after the first delivery.
pub(crate) fn due(first: &AnswerRow, reasks: &[&AnswerRow], within: u32) -> Due {
    let within = i64::from(within);
    if within == 0 || first.escalated_at.is_some() || first.answered_at.is_some() || first.status != "delivered" {
        return Due::Nothing;
    }
    let Some(last) = reasks.last() else {
        return if first.turns_open >= within { Due::Reask } else { Due::Nothing };
    };
    let second = if last.status == "delivered" { last.turns_open } else { first.turns_open - within };
    if second >= within {
        Due::Escalate
    } else {
        Due::Nothing
    }
}

/// The threads a new evaluation of `tree` answers: those with a delivered,
/// unanswered question whose baseline is another tree (or none: nothing was
/// evaluated before it was delivered).
pub(crate) fn answered_by_tree(open: &[AnswerRow], tree: &str) -> Vec<i64> {
    let tree = tree_of(tree);
    let mut threads: Vec<i64> = open
        .iter()
        .filter(|q| q.status == "delivered" && q.answered_at.is_none())
        .filter(|q| q.baseline_tree.as_deref().is_none_or(|b| tree_of(b) != tree))
        .map(AnswerRow::thread)
        .collect();
    threads.sort_unstable();
    threads.dedup();
    threads
}

/// The text of a re-ask: which question, how long it went unanswered,
/// what answers it, then the question again (`again`) and how.
pub(crate) fn reask_text(first: &AnswerRow, again: &str, form: ReaskForm) -> String {
    let how = match form {
        ReaskForm::AnotherEntry => "Asked another way",
        ReaskForm::Repeated => "Asked again",
    };
    format!(
        "Question {} is still unanswered after {} turns: gadfly has evaluated no changed tree since it was asked, and no evidence was filed for it. {how}: {again}",
        first.id, first.turns_open
    )
}

/// What tells the agent how question `id` is answered: fresh evidence,
/// never words.
pub fn how_to_answer(id: i64) -> String {
    format!(
        "(Question {id}: it counts as answered once gadfly evaluates a changed tree, or when you file the evidence: \
         `gadfly answer {id} --evidence FILE`.)"
    )
}

/// The line of a block reason after which the question's answer line goes
/// (`gate`'s wording of the question it carries).
const ASKED_LINE: &str = crate::gate::ANSWER_LINE;

/// Names question `id` in a block reason that carries it, with how it is
/// answered, right after the question (the reason's last line stays the
/// gate's).
pub(super) fn name_in_reason(reason: &mut String, id: i64) {
    if let Some(at) = reason.find(ASKED_LINE) {
        reason.insert_str(at + ASKED_LINE.len(), &format!("{}\n", how_to_answer(id)));
    }
}

/// An open question as the console shows it: its first form, how long it
/// has waited for an answer, its re-asks and whether it was escalated.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct OpenQuestion {
    pub question_id: i64,
    /// `human` or `bank`.
    pub source: String,
    pub bank_id: Option<String>,
    pub moment: Option<String>,
    pub text: String,
    pub delivered_at: Option<String>,
    pub delivered_via: Option<String>,
    /// The agent session it was delivered to, whose stops are its turns.
    pub session: Option<String>,
    /// Seconds since it was delivered.
    pub age_s: Option<i64>,
    /// Stop attempts judged since, without an answer.
    pub turns: i64,
    /// The tree the workspace had presented when it was delivered.
    pub baseline_tree: Option<String>,
    pub reasks: Vec<OpenReask>,
    pub escalated: bool,
    pub escalated_at: Option<String>,
}

/// A re-ask of an open question.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct OpenReask {
    pub question_id: i64,
    /// `queued`, `delivered` or `expired`.
    pub status: String,
    pub bank_id: Option<String>,
    pub text: String,
    pub created_at: String,
    pub delivered_at: Option<String>,
    pub turns: i64,
}

/// The open threads of `rows` (unanswered, from the store), oldest first.
fn threads(rows: &[AnswerRow]) -> Vec<(&AnswerRow, Vec<&AnswerRow>)> {
    rows.iter()
        .filter(|r| r.reask_of.is_none() && r.status == "delivered")
        .map(|first| (first, rows.iter().filter(|r| r.reask_of == Some(first.id)).collect()))
        .collect()
}

fn seconds_since(at: &str) -> Option<i64> {
    let t = chrono::DateTime::parse_from_rfc3339(at).ok()?;
    Some((chrono::Utc::now() - t.with_timezone(&chrono::Utc)).num_seconds().max(0))
}

impl Supervisor {
    /// A question reached the agent (`session`, if known): the tree it is
    /// asked against is the one the workspace presented last, and the
    /// turns it waits are that session's stops.
    pub(super) async fn answer_baseline(
        &self,
        campaign_id: &str,
        question_id: i64,
        session: Option<&str>,
    ) -> anyhow::Result<()> {
        let tree = self.inner.store.latest_workspace_tree(campaign_id).await?;
        self.inner.store.set_answer_baseline(question_id, tree.as_deref(), session).await
    }

    /// A new evaluation of the workspace (never one answered from the
    /// store, a beam candidate's or a re-check's): the questions it
    /// answers, with their threads.
    pub(super) async fn answers_after_evaluation(&self, campaign_id: &str, eval: &Evaluation) -> anyhow::Result<()> {
        if eval.cached || eval.origin != Origin::Workspace {
            return Ok(());
        }
        let Some(evaluation_id) = eval.id else { return Ok(()) };
        let open = self.inner.store.unanswered_questions(campaign_id).await?;
        for thread in answered_by_tree(&open, &eval.tree) {
            let baseline = open.iter().find(|q| q.id == thread).and_then(|q| q.baseline_tree.clone());
            let detail = format!(
                "evaluation {evaluation_id} of tree {} (asked at {})",
                short(tree_of(&eval.tree)),
                baseline.as_deref().map_or_else(|| "no evaluation yet".to_string(), |b| format!("tree {}", short(b)))
            );
            let by = AnsweredBy::Evaluation { evaluation_id, tree: eval.tree.clone(), baseline };
            self.answer_thread(campaign_id, None, &open, thread, "evaluation", &detail, Some(evaluation_id), by)
                .await?;
        }
        Ok(())
    }

    /// Marks every delivered question of `thread` answered (each recorded
    /// as `question.answered`) and expires its re-asks still waiting.
    #[allow(clippy::too_many_arguments)]
    async fn answer_thread(
        &self,
        campaign_id: &str,
        session: Option<&str>,
        open: &[AnswerRow],
        thread: i64,
        by_name: &str,
        detail: &str,
        evaluation_id: Option<i64>,
        by: AnsweredBy,
    ) -> anyhow::Result<usize> {
        let mut answered = 0;
        for q in open.iter().filter(|q| q.thread() == thread) {
            if q.status == "queued" {
                if let Some(row) = self.inner.store.expire_question(q.id, "answered before it was asked again").await? {
                    let reason = row.expired_reason.clone().unwrap_or_default();
                    self.record_event(
                        campaign_id,
                        session,
                        None,
                        Event::QuestionExpired { question: (&row).into(), reason },
                    )
                    .await?;
                }
                continue;
            }
            let Some(row) = self.inner.store.mark_answered(q.id, by_name, detail, evaluation_id).await? else {
                continue;
            };
            answered += 1;
            let told = Answered { question_id: row.id, reask_of: row.reask_of, turns: row.turns_open, by: by.clone() };
            self.record_event(campaign_id, session, None, Event::QuestionAnswered(told)).await?;
        }
        Ok(answered)
    }

    /// The agent files evidence for question `question_id` (`gadfly
    /// answer`): its thread counts as answered. Plain words are not
    /// enough: at least one file with something in it.
    pub async fn answer_with_files(
        &self,
        campaign_id: &str,
        question_id: i64,
        why: Option<&str>,
        files: Vec<ClaimFile>,
    ) -> Result<Value> {
        self.campaign(campaign_id).await?;
        if !files.iter().any(|f| !f.text.trim().is_empty()) {
            return Err(SupervisorError::Invalid(
                "an answer needs at least one evidence file with something in it (--evidence FILE: a measurement, \
                 a profile, a log); words alone do not answer a question"
                    .into(),
            ));
        }
        super::claims::check_evidence(&files)?;
        let why = why.map(str::trim).filter(|w| !w.is_empty());
        if why.is_some_and(|w| w.chars().count() > super::claims::MAX_WHY_CHARS) {
            return Err(SupervisorError::Invalid(format!(
                "`why` is longer than {} characters",
                super::claims::MAX_WHY_CHARS
            )));
        }
        let Some(row) = self.inner.store.answer_row(campaign_id, question_id).await? else {
            return Err(SupervisorError::Invalid(format!(
                "campaign {campaign_id} has no question with id {question_id}"
            )));
        };
        if let (Some(at), Some(by)) = (&row.answered_at, &row.answered_by) {
            return Err(SupervisorError::Invalid(format!(
                "question id {question_id} was answered already, at {at}, by {by}: {}",
                row.answer_detail.as_deref().unwrap_or("")
            )));
        }
        if row.status != "delivered" {
            return Err(SupervisorError::Invalid(format!(
                "question id {question_id} is {}: only a question the agent was asked can be answered",
                row.status
            )));
        }
        let open = self.inner.store.unanswered_questions(campaign_id).await?;
        let names: Vec<&str> = files.iter().map(|f| f.name.as_str()).collect();
        let detail = format!("evidence filed: {}", names.join(", "));
        let by = AnsweredBy::Artifact { files: files.clone(), why: why.map(str::to_string) };
        let thread = row.thread();
        let answered = self.answer_thread(campaign_id, None, &open, thread, "artifact", &detail, None, by).await?;
        Ok(serde_json::json!({
            "question_id": question_id,
            "thread": thread,
            "answered": answered,
            "note": format!("question id {question_id} counts as answered ({detail})"),
        }))
    }

    /// A judged stop attempt is a turn: every delivered question still
    /// unanswered counts it (one delivered to another session does not); those left unanswered too long are asked
    /// again, then escalated. Runs after the stop's evaluation (which may
    /// have answered some) and before the stop reads the waiting
    /// questions, so a re-ask can ride on this very stop.
    pub(super) async fn answers_at_stop(
        &self,
        campaign_id: &str,
        session: Option<&str>,
        spec: &CampaignSpec,
    ) -> anyhow::Result<()> {
        if self.inner.store.count_unanswered_turn(campaign_id, session).await? == 0 {
            return Ok(());
        }
        if spec.mode == Mode::Audit {
            return Ok(());
        }
        let within = spec.questions.answer_within_turns;
        let open = self.inner.store.unanswered_questions(campaign_id).await?;
        for (first, reasks) in threads(&open) {
            match due(first, &reasks, within) {
                Due::Nothing => {}
                Due::Reask => self.reask(campaign_id, session, spec, first, &reasks).await?,
                Due::Escalate => {
                    if self.inner.store.mark_escalated(first.id).await? {
                        let told = Escalated {
                            question: delivered_question(first),
                            reasks: reasks.iter().map(|r| r.id).collect(),
                            turns: first.turns_open,
                        };
                        self.record_event(campaign_id, session, None, Event::QuestionEscalated(told)).await?;
                        tracing::info!(campaign = %campaign_id, question = first.id, "unanswered question escalated");
                    }
                }
            }
        }
        Ok(())
    }

    /// Queues `first` again in another form (see the module's doc).
    async fn reask(
        &self,
        campaign_id: &str,
        session: Option<&str>,
        spec: &CampaignSpec,
        first: &AnswerRow,
        reasks: &[&AnswerRow],
    ) -> anyhow::Result<()> {
        if !self.inner.store.mark_reasked(first.id).await? {
            return Ok(());
        }
        let other = match (&first.source[..], &first.bank_id) {
            ("human", _) | (_, None) => None,
            (_, Some(id)) => {
                let used: Vec<&str> = reasks.iter().filter_map(|r| r.bank_id.as_deref()).chain([id.as_str()]).collect();
                self.another_entry(campaign_id, spec, id, first.moment.as_deref(), &used).await?
            }
        };
        let (form, bank_id, again) = match other {
            Some((id, text)) => (ReaskForm::AnotherEntry, Some(id), text),
            None => (ReaskForm::Repeated, first.bank_id.clone(), first.text.clone()),
        };
        let text = reask_text(first, &again, form);
        let source = if first.source == "human" { "human" } else { "bank" };
        let moment = first.moment.as_deref();
        let id = self.inner.store.queue_question(campaign_id, source, bank_id.as_deref(), moment, &text).await?;
        self.inner.store.set_reask_of(id, first.id).await?;
        let by = match (source, &bank_id) {
            ("bank", Some(b)) => {
                events::QueuedBy::Bank { bank_id: b.clone(), moment: moment.unwrap_or("completion_claim").to_string() }
            }
            _ => events::QueuedBy::Human,
        };
        self.record_event(
            campaign_id,
            session,
            None,
            Event::QuestionQueued { question_id: id, text: text.clone(), by },
        )
        .await?;
        let told = Reasked { question_id: id, reask_of: first.id, form, bank_id, text, turns: first.turns_open };
        self.record_event(campaign_id, session, None, Event::QuestionReasked(told)).await?;
        tracing::info!(campaign = %campaign_id, question = first.id, reask = id, form = form.as_str(), "unanswered question asked again");
        Ok(())
    }

    /// Another entry of bank entry `bank_id`'s group for `moment` that
    /// applies to the campaign and is not in `used`: its id and text.
    async fn another_entry(
        &self,
        campaign_id: &str,
        spec: &CampaignSpec,
        bank_id: &str,
        moment: Option<&str>,
        used: &[&str],
    ) -> anyhow::Result<Option<(String, String)>> {
        let bank = self.inner.bank.get();
        let Some(group) = bank.entries.iter().find(|e| e.id == bank_id).map(|e| e.group.clone()) else {
            return Ok(None);
        };
        let moment = moment.unwrap_or("completion_claim");
        let same_group: Vec<crate::bank::Entry> =
            bank.entries.iter().filter(|e| e.group == group && !used.contains(&e.id.as_str())).cloned().collect();
        let (asked, total) = self.inner.store.asked_bank_ids(campaign_id).await?;
        let stats = std::collections::HashMap::new();
        let req = crate::bank::select::Request {
            moment,
            spec,
            asked: &asked,
            prefer: &[group.as_str()],
            stats: &stats,
            seed: crate::bank::select::seed_for(campaign_id, total),
            evidence: None,
        };
        Ok(crate::bank::select::pick(&same_group, &req).map(|c| (c.entry.id, c.text)))
    }

    /// The campaign's open questions: delivered, unanswered, each with its
    /// age, re-asks and whether it was escalated; oldest first.
    pub async fn open_questions(&self, campaign_id: &str) -> Result<Vec<OpenQuestion>> {
        self.campaign(campaign_id).await?;
        let rows = self.inner.store.unanswered_questions(campaign_id).await?;
        Ok(threads(&rows)
            .into_iter()
            .map(|(q, reasks)| OpenQuestion {
                question_id: q.id,
                source: q.source.clone(),
                bank_id: q.bank_id.clone(),
                moment: q.moment.clone(),
                text: q.text.clone(),
                delivered_at: q.delivered_at.clone(),
                delivered_via: q.delivered_via.clone(),
                session: q.delivered_session.clone(),
                age_s: q.delivered_at.as_deref().and_then(seconds_since),
                turns: q.turns_open,
                baseline_tree: q.baseline_tree.clone(),
                reasks: reasks
                    .iter()
                    .map(|r| OpenReask {
                        question_id: r.id,
                        status: r.status.clone(),
                        bank_id: r.bank_id.clone(),
                        text: r.text.clone(),
                        created_at: r.created_at.clone(),
                        delivered_at: r.delivered_at.clone(),
                        turns: r.turns_open,
                    })
                    .collect(),
                escalated: q.escalated_at.is_some(),
                escalated_at: q.escalated_at.clone(),
            })
            .collect())
    }
}

fn delivered_question(q: &AnswerRow) -> DeliveredQuestion {
    DeliveredQuestion {
        question_id: q.id,
        source: q.source.clone(),
        bank_id: q.bank_id.clone(),
        moment: q.moment.clone(),
        text: q.text.clone(),
    }
}

/// A tree id as a person reads it.
fn short(tree: &str) -> &str {
    tree.get(..10).unwrap_or(tree)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: i64, status: &str, turns: i64, baseline: Option<&str>, reask_of: Option<i64>) -> AnswerRow {
        AnswerRow {
            id,
            campaign_id: "c".into(),
            source: "bank".into(),
            bank_id: Some("gap-001".into()),
            moment: Some("plateau".into()),
            text: "Where does the time go?".into(),
            status: status.into(),
            created_at: "2026-12-06T10:00:00.000Z".into(),
            delivered_at: (status == "delivered").then(|| "2026-12-06T10:00:01.000Z".into()),
            delivered_via: None,
            answered_at: None,
            answered_by: None,
            answer_detail: None,
            answer_evaluation_id: None,
            baseline_tree: baseline.map(str::to_string),
            delivered_session: None,
            turns_open: turns,
            reask_of,
            escalated_at: None,
        }
    }

    /// Asked again after `within` turns, escalated after as many more with
    /// the re-ask; never when the setting is 0 or once escalated.
    #[test]
    fn a_question_is_asked_again_then_escalated() {
        let first = row(1, "delivered", 2, Some("t1"), None);
        assert_eq!(due(&first, &[], 3), Due::Nothing);
        let first = row(1, "delivered", 3, Some("t1"), None);
        assert_eq!(due(&first, &[], 3), Due::Reask);
        assert_eq!(due(&first, &[], 0), Due::Nothing, "0 turns it off");
        let waiting = row(2, "queued", 0, None, Some(1));
        assert_eq!(due(&first, &[&waiting], 3), Due::Nothing, "the re-ask waits");
        let reask = row(2, "delivered", 2, Some("t1"), Some(1));
        assert_eq!(due(&row(1, "delivered", 5, Some("t1"), None), &[&reask], 3), Due::Nothing);
        let reask = row(2, "delivered", 3, Some("t1"), Some(1));
        assert_eq!(due(&row(1, "delivered", 6, Some("t1"), None), &[&reask], 3), Due::Escalate);
        // A re-ask that expired unasked: the miss counts from its queueing.
        let expired = row(2, "expired", 0, None, Some(1));
        assert_eq!(due(&row(1, "delivered", 5, Some("t1"), None), &[&expired], 3), Due::Nothing);
        assert_eq!(due(&row(1, "delivered", 6, Some("t1"), None), &[&expired], 3), Due::Escalate);
        let mut escalated = row(1, "delivered", 9, Some("t1"), None);
        escalated.escalated_at = Some("now".into());
        assert_eq!(due(&escalated, &[&reask], 3), Due::Nothing, "escalated once");
    }

    /// Only a tree other than the baseline answers; a forced re-run of the
    /// baseline does not; no baseline: any new evaluation does.
    #[test]
    fn only_a_changed_tree_answers() {
        let open = vec![
            row(1, "delivered", 1, Some("t1"), None),
            row(2, "delivered", 0, Some("t2"), None),
            row(3, "delivered", 0, None, None),
            row(4, "queued", 0, None, Some(1)),
        ];
        assert_eq!(answered_by_tree(&open, "t1"), [2, 3]);
        assert_eq!(answered_by_tree(&open, "t1+7"), [2, 3], "a forced re-run of t1 is t1");
        assert_eq!(answered_by_tree(&open, "t3"), [1, 2, 3]);
        let reask = vec![row(5, "delivered", 0, Some("t1"), Some(1))];
        assert_eq!(answered_by_tree(&reask, "t9"), [1], "a re-ask answers its thread");
    }

    #[test]
    fn a_reask_names_the_question_and_says_what_answers_it() {
        let first = row(7, "delivered", 3, Some("t1"), None);
        let text = reask_text(&first, "Which level is untouched?", ReaskForm::AnotherEntry);
        assert_eq!(
            text,
            "Question 7 is still unanswered after 3 turns: gadfly has evaluated no changed tree since it was asked, \
             and no evidence was filed for it. Asked another way: Which level is untouched?"
        );
        assert!(reask_text(&first, "Why?", ReaskForm::Repeated).ends_with("Asked again: Why?"));
    }
}
