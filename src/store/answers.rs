//! Answer tracking on the `questions` table (issue #35 item 4): the tree a
//! question was delivered against, the turns it stays unanswered, what
//! answered it, its re-ask and its escalation. What counts as an answer,
//! and when a question is asked again or escalated, is `app/answers.rs`'s;
//! this file only reads and writes the columns.

use serde::Serialize;
use sqlx::{FromRow, Row};

use super::{write_returning, Store};
use crate::time::now;

/// The columns of a question that answer tracking reads.
const COLUMNS: &str = "id, campaign_id, source, bank_id, moment, text, status, created_at, delivered_at,
    delivered_via, answered_at, answered_by, answer_detail, answer_evaluation_id, baseline_tree, delivered_session, turns_open,
    reask_of, escalated_at";

/// A question as answer tracking sees it: delivered (or a re-ask, which
/// may still wait), and whether and how it was answered.
#[derive(Debug, Clone, PartialEq, Serialize, FromRow)]
pub struct AnswerRow {
    pub id: i64,
    pub campaign_id: String,
    pub source: String,
    pub bank_id: Option<String>,
    pub moment: Option<String>,
    pub text: String,
    pub status: String,
    pub created_at: String,
    pub delivered_at: Option<String>,
    pub delivered_via: Option<String>,
    pub answered_at: Option<String>,
    /// `evaluation` or `artifact`.
    pub answered_by: Option<String>,
    pub answer_detail: Option<String>,
    pub answer_evaluation_id: Option<i64>,
    /// The tree the workspace had presented last when it was delivered.
    pub baseline_tree: Option<String>,
    /// The agent session it was delivered to (none: any, e.g. a spawned
    /// agent's stdin).
    pub delivered_session: Option<String>,
    /// Stop attempts of that session judged since its delivery while it
    /// stayed unanswered.
    pub turns_open: i64,
    /// A re-ask: the question it asks again.
    pub reask_of: Option<i64>,
    pub escalated_at: Option<String>,
}

impl AnswerRow {
    /// The question this one belongs to: itself, or the one it asks again.
    pub fn thread(&self) -> i64 {
        self.reask_of.unwrap_or(self.id)
    }
}

pub use crate::evaluation::tree_of;

impl Store {
    /// The tree the workspace presented last (a stop, an `eval`), without
    /// the suffix of a forced re-run; none before its first evaluation.
    pub async fn latest_workspace_tree(&self, campaign_id: &str) -> anyhow::Result<Option<String>> {
        let row = sqlx::query(
            "select tree from evaluations where campaign_id = $1 and workspace_seq is not null
             order by workspace_seq desc, id desc limit 1",
        )
        .bind(campaign_id)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(|r| r.try_get::<String, _>(0)).transpose()?.map(|t| tree_of(&t).to_string()))
    }

    /// Records the tree a delivered question was asked against and the
    /// session it reached (once: a second delivery record changes nothing).
    pub async fn set_answer_baseline(
        &self,
        question_id: i64,
        tree: Option<&str>,
        session: Option<&str>,
    ) -> anyhow::Result<()> {
        let _turn = self.write_turn().await;
        sqlx::query(
            "update questions set baseline_tree = $1, delivered_session = $2, tracked_at = $3
             where id = $4 and tracked_at is null",
        )
        .bind(tree)
        .bind(session)
        .bind(now())
        .bind(question_id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// The campaign's questions not answered yet that answer tracking
    /// follows: the delivered ones, and every re-ask (waiting, delivered or
    /// expired), oldest first.
    pub async fn unanswered_questions(&self, campaign_id: &str) -> anyhow::Result<Vec<AnswerRow>> {
        let rows = sqlx::query(&format!(
            "select {COLUMNS} from questions
             where campaign_id = $1 and answered_at is null and (status = 'delivered' or reask_of is not null)
             order by id"
        ))
        .bind(campaign_id)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(AnswerRow::from_row).collect::<Result<_, _>>()?)
    }

    /// Whether a question of `moment` delivered at or after `since` was
    /// answered with evidence filed for it (`gadfly answer`), not by a new
    /// evaluation.
    pub async fn answered_with_evidence(&self, campaign_id: &str, moment: &str, since: &str) -> anyhow::Result<bool> {
        let n: i64 = sqlx::query_scalar(
            "select count(*) from questions
             where campaign_id = $1 and moment = $2 and answered_by = 'artifact' and delivered_at >= $3",
        )
        .bind(campaign_id)
        .bind(moment)
        .bind(since)
        .fetch_one(&self.pool)
        .await?;
        Ok(n > 0)
    }

    /// One question of the campaign as answer tracking sees it.
    pub async fn answer_row(&self, campaign_id: &str, question_id: i64) -> anyhow::Result<Option<AnswerRow>> {
        let row = sqlx::query(&format!("select {COLUMNS} from questions where campaign_id = $1 and id = $2"))
            .bind(campaign_id)
            .bind(question_id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.as_ref().map(AnswerRow::from_row).transpose()?)
    }

    /// One more turn (a judged stop attempt of `session`) for every
    /// delivered question of the campaign still unanswered that reached
    /// that session, or no session in particular; a stop of no known
    /// session counts for them all.
    pub async fn count_unanswered_turn(&self, campaign_id: &str, session: Option<&str>) -> anyhow::Result<u64> {
        let _turn = self.write_turn().await;
        let open = "update questions set turns_open = turns_open + 1
             where campaign_id = $1 and status = 'delivered' and answered_at is null and tracked_at is not null";
        let done = match session {
            Some(s) => {
                sqlx::query(&format!("{open} and (delivered_session is null or delivered_session = $2)"))
                    .bind(campaign_id)
                    .bind(s)
                    .execute(&self.pool)
                    .await?
            }
            None => sqlx::query(open).bind(campaign_id).execute(&self.pool).await?,
        };
        Ok(done.rows_affected())
    }

    /// Marks a delivered question answered, with what answered it; its row
    /// as answered, or None when it was answered already (or never
    /// delivered).
    pub async fn mark_answered(
        &self,
        question_id: i64,
        by: &str,
        detail: &str,
        evaluation_id: Option<i64>,
    ) -> anyhow::Result<Option<AnswerRow>> {
        let _turn = self.write_turn().await;
        let row = write_returning(
            sqlx::query(&format!(
                "update questions set answered_at = $1, answered_by = $2, answer_detail = $3, answer_evaluation_id = $4
                 where id = $5 and status = 'delivered' and answered_at is null
                 returning {COLUMNS}"
            ))
            .bind(now())
            .bind(by)
            .bind(detail)
            .bind(evaluation_id)
            .bind(question_id),
            &self.pool,
        )
        .await?;
        Ok(row.as_ref().map(AnswerRow::from_row).transpose()?)
    }

    /// Names the question a re-ask asks again.
    pub async fn set_reask_of(&self, question_id: i64, reask_of: i64) -> anyhow::Result<()> {
        let _turn = self.write_turn().await;
        sqlx::query("update questions set reask_of = $1 where id = $2")
            .bind(reask_of)
            .bind(question_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Marks a question asked again, once; false when it was already (a
    /// concurrent stop of another session asks it again, not this one).
    pub async fn mark_reasked(&self, question_id: i64) -> anyhow::Result<bool> {
        let _turn = self.write_turn().await;
        let done = sqlx::query("update questions set reasked_at = $1 where id = $2 and reasked_at is null")
            .bind(now())
            .bind(question_id)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Marks a question escalated, once; false when it was already.
    pub async fn mark_escalated(&self, question_id: i64) -> anyhow::Result<bool> {
        let _turn = self.write_turn().await;
        let done = sqlx::query("update questions set escalated_at = $1 where id = $2 and escalated_at is null")
            .bind(now())
            .bind(question_id)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::tests::test_campaign;

    #[test]
    fn a_forced_re_run_or_a_re_check_is_the_same_tree() {
        assert_eq!(tree_of("abc"), "abc");
        assert_eq!(tree_of("abc+3"), "abc");
        assert_eq!(tree_of("abc+recheck-42"), "abc");
    }

    /// A delivered question keeps its baseline, counts turns while it is
    /// unanswered, is answered once, and leaves the unanswered list; a
    /// re-ask is followed even while it waits.
    #[tokio::test]
    async fn a_delivered_question_counts_turns_until_answered_once() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::connect(&format!("sqlite:{}", dir.path().join("g.db").display())).await.unwrap();
        store.insert_campaign(&test_campaign("c1")).await.unwrap();
        assert_eq!(store.latest_workspace_tree("c1").await.unwrap(), None, "no evaluation yet");
        let q = store.queue_question("c1", "bank", Some("a"), Some("plateau"), "a?").await.unwrap();
        let waiting = store.queue_question("c1", "bank", Some("b"), Some("plateau"), "b?").await.unwrap();
        assert!(store.mark_delivered(q, "stop_hook_reason", None).await.unwrap());
        assert_eq!(store.count_unanswered_turn("c1", None).await.unwrap(), 0, "not counted before it is tracked");
        store.set_answer_baseline(q, Some("t1"), Some("s1")).await.unwrap();
        store.set_answer_baseline(q, Some("t2"), Some("s2")).await.unwrap();
        assert_eq!(store.count_unanswered_turn("c1", Some("s2")).await.unwrap(), 0, "another session's stop");
        assert!(store.mark_reasked(q).await.unwrap());
        assert!(!store.mark_reasked(q).await.unwrap(), "asked again once");
        assert_eq!(store.count_unanswered_turn("c1", Some("s1")).await.unwrap(), 1, "only the delivered one counts");
        store.count_unanswered_turn("c1", None).await.unwrap();
        let open = store.unanswered_questions("c1").await.unwrap();
        assert_eq!(open.len(), 1, "a waiting first ask is not followed yet: {open:?}");
        assert_eq!((open[0].id, open[0].turns_open, open[0].baseline_tree.as_deref()), (q, 2, Some("t1")));
        assert_eq!(open[0].delivered_session.as_deref(), Some("s1"), "the first delivery record");
        store.set_reask_of(waiting, q).await.unwrap();
        let open = store.unanswered_questions("c1").await.unwrap();
        assert_eq!(open.iter().map(|r| (r.id, r.thread())).collect::<Vec<_>>(), [(q, q), (waiting, q)]);
        assert!(store.mark_answered(waiting, "evaluation", "x", Some(1)).await.unwrap().is_none(), "never delivered");
        let row = store.mark_answered(q, "artifact", "profile.txt", None).await.unwrap().expect("it was open");
        assert_eq!((row.answered_by.as_deref(), row.answer_detail.as_deref()), (Some("artifact"), Some("profile.txt")));
        assert!(row.answered_at.is_some());
        assert!(store.mark_answered(q, "evaluation", "again", Some(2)).await.unwrap().is_none(), "answered once");
        assert_eq!(store.count_unanswered_turn("c1", None).await.unwrap(), 0);
        assert!(store.mark_escalated(q).await.unwrap());
        assert!(!store.mark_escalated(q).await.unwrap(), "escalated once");
        let row = store.answer_row("c1", q).await.unwrap().unwrap();
        assert_eq!((row.turns_open, row.escalated_at.is_some()), (2, true));
        assert!(store.answer_row("other", q).await.unwrap().is_none(), "another campaign's question is not found");
    }
}
