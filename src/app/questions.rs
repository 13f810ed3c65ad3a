//! Questions: a person's, queued; a bank pick or suggestions for a moment;
//! the bank's learned yield; and the record that a question reached the
//! agent (the one writer of `question.delivered`).

use std::collections::HashMap;

use anyhow::anyhow;

use crate::bank::learn::{self, EntryStats};
use crate::bank::select;
use crate::campaign::CampaignSpec;
use crate::events::{self, DeliveredQuestion, Event, Via};
use crate::gate::{self, Question};

use super::{Result, Supervisor, SupervisorError};

impl Supervisor {
    /// Queues a person's question; it reaches the agent at its next stop.
    pub async fn ask(&self, campaign_id: &str, text: &str) -> Result<crate::store::QuestionRow> {
        self.ask_with(campaign_id, text, None, None).await
    }

    /// Like [`Self::ask`], naming the bank entry and moment it started from.
    pub async fn ask_with(
        &self,
        campaign_id: &str,
        text: &str,
        bank_id: Option<&str>,
        moment: Option<&str>,
    ) -> Result<crate::store::QuestionRow> {
        let text = text.trim();
        if text.is_empty() {
            return Err(SupervisorError::Invalid("the question text is empty".into()));
        }
        if text.chars().count() > 4000 {
            return Err(SupervisorError::Invalid("the question is longer than 4000 characters".into()));
        }
        self.campaign(campaign_id).await?;
        if let Some(m) = moment {
            if !crate::bank::MOMENTS.contains(&m) {
                return Err(SupervisorError::Invalid(format!("unknown moment `{m}`")));
            }
        }
        let id = self.inner.store.queue_question(campaign_id, "human", bank_id, moment, text).await?;
        let queued = Event::QuestionQueued { question_id: id, text: text.to_string(), by: events::QueuedBy::Human };
        self.record_event(campaign_id, None, None, queued).await?;
        let q = self
            .inner
            .store
            .list_questions(campaign_id, false)
            .await?
            .into_iter()
            .find(|q| q.id == id)
            .ok_or_else(|| anyhow!("question {id} vanished"))?;
        Ok(q)
    }

    /// Records that a question reached the agent (the one writer of
    /// `question.delivered`), and the tree it was asked at; its row is
    /// marked delivered by the caller.
    pub async fn record_delivered(
        &self,
        campaign_id: &str,
        session_id: Option<&str>,
        question: impl Into<DeliveredQuestion>,
        via: Via,
    ) -> anyhow::Result<()> {
        let question = question.into();
        let id = question.question_id;
        let event = Event::QuestionDelivered { question, via };
        self.record_event(campaign_id, session_id, None, event).await?;
        // What answers it is measured from here (`answers.rs`); a question
        // without its baseline is answered by any new evaluation.
        if let Err(e) = self.answer_baseline(campaign_id, id, session_id).await {
            tracing::warn!(campaign = %campaign_id, question = id, error = %e, "recording the tree a question was asked at");
        }
        Ok(())
    }

    /// What selection needs of a campaign: the bank ids asked there (oldest
    /// first), how many questions it was asked, and the learned yield.
    async fn selection_inputs(
        &self,
        campaign_id: &str,
    ) -> anyhow::Result<(Vec<select::AskedHere>, usize, HashMap<String, EntryStats>)> {
        let (asked_ids, asked) = self.inner.store.asked_bank_ids(campaign_id).await?;
        let history = self.inner.store.yield_history().await?;
        let stats: HashMap<String, EntryStats> = learn::selection_stats(&history, &self.inner.bank.get());
        Ok((asked_ids, asked, stats))
    }

    /// A bank question for `moment` (see [`crate::bank::select`]), or a
    /// built-in one when no entry applies (the stop's pick; see
    /// [`gate::choose_question`]).
    pub async fn pick_question(
        &self,
        campaign_id: &str,
        spec: &CampaignSpec,
        moment: &str,
        prefer: &[&str],
    ) -> anyhow::Result<Question> {
        self.pick_question_for(campaign_id, spec, moment, prefer, None).await
    }

    /// [`Self::pick_question`] for a moment with its evidence: it routes
    /// the choice and the delivered text names it.
    pub async fn pick_question_for(
        &self,
        campaign_id: &str,
        spec: &CampaignSpec,
        moment: &str,
        prefer: &[&str],
        evidence: Option<&crate::bank::evidence::Evidence>,
    ) -> anyhow::Result<Question> {
        let (asked_ids, asked, stats) = self.selection_inputs(campaign_id).await?;
        let bank = self.inner.bank.get();
        let req = select::Request {
            moment,
            spec,
            asked: &asked_ids,
            prefer,
            stats: &stats,
            seed: select::seed_for(campaign_id, asked),
            evidence,
        };
        Ok(gate::choose_question(&bank.entries, &req))
    }

    /// Bank suggestions for a person choosing a question for `moment`.
    pub async fn suggestions(&self, campaign_id: &str, moment: &str, n: usize) -> Result<Vec<select::Choice>> {
        if !crate::bank::MOMENTS.contains(&moment) {
            return Err(SupervisorError::Invalid(format!(
                "unknown moment `{moment}`; expected one of {}",
                crate::bank::MOMENTS.join(", ")
            )));
        }
        let (_row, spec) = self.campaign(campaign_id).await?;
        let (asked_ids, asked, stats) = self.selection_inputs(campaign_id).await?;
        let bank = self.inner.bank.get();
        let req = select::Request {
            moment,
            spec: &spec,
            asked: &asked_ids,
            prefer: &[],
            stats: &stats,
            seed: select::seed_for(campaign_id, asked),
            evidence: None,
        };
        Ok(select::suggest(&bank.entries, &req, n))
    }

    /// Learned value of every bank entry asked so far, over all campaigns.
    pub async fn bank_stats(&self) -> anyhow::Result<std::collections::BTreeMap<String, EntryStats>> {
        Ok(self.bank_report().await?.0)
    }

    /// [`Self::bank_stats`] and each group's uplift against the moments
    /// left without a question ([`learn::uplift`]).
    pub async fn bank_report(
        &self,
    ) -> anyhow::Result<(std::collections::BTreeMap<String, EntryStats>, Vec<learn::Uplift>)> {
        let history = self.inner.store.yield_history().await?;
        Ok(learn::report(&history, &self.inner.bank.get()))
    }
}

/// How a queued question is put to the agent outside a block reason,
/// with what counts as its answer.
pub fn question_message(q: &crate::store::QuestionRow) -> String {
    let asked = match q.source.as_str() {
        "human" => format!("A question from the person supervising this campaign: {}\nAnswer it with a measurement or an experiment.", q.text),
        _ => format!(
            "gadfly noticed a {} moment. Question ({}): {}\nAnswer it with a measurement or an experiment, not an argument.",
            q.moment.as_deref().unwrap_or("campaign").replace('_', " "),
            q.bank_id.as_deref().unwrap_or("bank"),
            q.text
        ),
    };
    format!("{asked}\n{}", super::answers::how_to_answer(q.id))
}
