//! Questions (table `questions`): queued, claimed by hooks, marked
//! delivered; and what question selection and learned yield read of their
//! history.

use serde::{Deserialize, Serialize};
use sqlx::{FromRow, Row};

use super::{live, num, write_returning, write_returning_one, Backend, Store};
use crate::time::now;

#[derive(Debug, Clone, Serialize, Deserialize, sqlx::FromRow)]
pub struct QuestionRow {
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
    /// When a question that never reached the agent stopped waiting
    /// (`status` is then `expired`), and why.
    pub expired_at: Option<String>,
    pub expired_reason: Option<String>,
}

impl Store {
    /// Questions queued and not yet delivered, across campaigns.
    pub async fn count_waiting_questions(&self) -> anyhow::Result<i64> {
        let row = sqlx::query("select count(*) from questions where status = 'queued'").fetch_one(&self.pool).await?;
        Ok(row.try_get(0)?)
    }

    /// A daemon announced a question queued for the campaign: another
    /// one's drops what this one knew of the campaign's queue and asks; its
    /// own (`origin` is this store's instance) changes nothing, since the
    /// queueing itself updated both.
    pub fn question_announced(&self, campaign_id: &str, origin: Option<&str>) {
        if origin == Some(&*self.instance) {
            return;
        }
        self.queued_hint.queued(campaign_id);
        self.asked.forget(campaign_id);
    }

    pub async fn queue_question(
        &self,
        campaign_id: &str,
        source: &str,
        bank_id: Option<&str>,
        moment: Option<&str>,
        text: &str,
    ) -> anyhow::Result<i64> {
        let _turn = self.write_turn().await;
        let row = write_returning_one(
            sqlx::query(
                "insert into questions (campaign_id, source, bank_id, moment, text, status, created_at)
                 values ($1, $2, $3, $4, $5, 'queued', $6) returning id",
            )
            .bind(campaign_id)
            .bind(source)
            .bind(bank_id)
            .bind(moment)
            .bind(text)
            .bind(now()),
            &self.pool,
        )
        .await?;
        let id = row.try_get::<i64, _>(0)?;
        self.queued_hint.queued(campaign_id);
        self.asked.queued(campaign_id, bank_id, id);
        if let Some(a) = &self.announcer {
            a.send(live::Announced::Question {
                campaign_id: campaign_id.to_string(),
                origin: Some(self.instance.to_string()),
            });
        }
        Ok(id)
    }

    /// A campaign's questions, or only its queued ones (answered from
    /// memory, without a query, when none is known to be queued: hooks ask
    /// at every event).
    pub async fn list_questions(&self, campaign_id: &str, only_queued: bool) -> anyhow::Result<Vec<QuestionRow>> {
        if only_queued && self.queued_hint.surely_none(campaign_id) {
            return Ok(vec![]);
        }
        let generation = self.queued_hint.before_lookup();
        let filter = if only_queued { "and status = 'queued'" } else { "" };
        let rows = sqlx::query(&format!(
            "select id, campaign_id, source, bank_id, moment, text, status, created_at, delivered_at, delivered_via,
                 expired_at, expired_reason
             from questions where campaign_id = $1 {filter} order by id"
        ))
        .bind(campaign_id)
        .fetch_all(&self.pool)
        .await?;
        let questions: Vec<QuestionRow> = rows.iter().map(QuestionRow::from_row).collect::<Result<_, _>>()?;
        if !questions.iter().any(|q| q.status == "queued") {
            self.queued_hint.found_none(campaign_id, generation);
        }
        Ok(questions)
    }

    /// Takes the campaign's next queued question (a person's first, then
    /// the oldest) and marks it delivered, in one statement: the hooks of
    /// ten sessions that all see a question waiting do not each read the
    /// queue and race to mark the same row (on PostgreSQL the row is locked
    /// and skipped by the others, which take the next one or none). None
    /// when nothing waits.
    pub async fn claim_next_question(
        &self,
        campaign_id: &str,
        via: &str,
        objective_before: Option<f64>,
    ) -> anyhow::Result<Option<QuestionRow>> {
        if self.queued_hint.surely_none(campaign_id) {
            return Ok(None);
        }
        // One claim at a time in this daemon (on SQLite, its write turn):
        // a hook call that waited for another's claim looks at the hint
        // again, and sends nothing when that claim took the last question.
        // Ten sessions whose calls all saw a question queued sent ten
        // claims for it; now one, and one more only if others wait.
        let _turn = match &self.write_gate {
            Some(gate) => gate.lock().await,
            None => self.claim_gate.lock().await,
        };
        if self.queued_hint.surely_none(campaign_id) {
            return Ok(None);
        }
        let generation = self.queued_hint.before_lookup();
        // PostgreSQL needs the row lock as well: another daemon's call may
        // claim at the same time, and without it one of the two gets nothing.
        let sql = match self.backend {
            Backend::Postgres => claim_next_sql!("for update skip locked"),
            Backend::Sqlite => claim_next_sql!(""),
        };
        self.claims_sent.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let row = write_returning(
            sqlx::query(sql).bind(now()).bind(via).bind(num(objective_before)).bind(campaign_id),
            &self.pool,
        )
        .await?;
        match row {
            Some(r) => {
                // Nothing else waits: the next hook need not look (a
                // question queued meanwhile moved the generation on).
                if r.try_get::<i64, _>("others_waiting")? == 0 {
                    self.queued_hint.found_none(campaign_id, generation);
                }
                Ok(Some(QuestionRow::from_row(&r)?))
            }
            None => {
                self.queued_hint.found_none(campaign_id, generation);
                Ok(None)
            }
        }
    }

    /// Marks a queued question delivered; false when it was already.
    pub async fn mark_delivered(
        &self,
        question_id: i64,
        via: &str,
        objective_before: Option<f64>,
    ) -> anyhow::Result<bool> {
        let _turn = self.write_turn().await;
        let done = sqlx::query(
            "update questions set status = 'delivered', delivered_at = $1, delivered_via = $2,
                 objective_before = cast($3 as double precision)
             where id = $4 and status = 'queued'",
        )
        .bind(now())
        .bind(via)
        .bind(num(objective_before))
        .bind(question_id)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Marks a question that still waits expired, with why: it will never
    /// reach the agent. Its row as expired; None when it no longer waited
    /// (delivered or expired meanwhile).
    pub async fn expire_question(&self, question_id: i64, reason: &str) -> anyhow::Result<Option<QuestionRow>> {
        let _turn = self.write_turn().await;
        let row = write_returning(
            sqlx::query(
                "update questions set status = 'expired', expired_at = $1, expired_reason = $2
                 where id = $3 and status = 'queued'
                 returning id, campaign_id, source, bank_id, moment, text, status, created_at, delivered_at,
                     delivered_via, expired_at, expired_reason",
            )
            .bind(now())
            .bind(reason)
            .bind(question_id),
            &self.pool,
        )
        .await?;
        row.map(|r| QuestionRow::from_row(&r)).transpose().map_err(Into::into)
    }
}

impl Store {
    /// What question selection needs of a campaign's history, without its
    /// texts: how many questions it was asked, and its bank ids, each once
    /// with how often it was asked, ordered by their latest ask. One query: the
    /// questions without a bank id (a person's own) are one more group,
    /// counted in the total only.
    pub async fn asked_bank_ids(
        &self,
        campaign_id: &str,
    ) -> anyhow::Result<(Vec<crate::bank::select::AskedHere>, usize)> {
        if let Some(known) = self.asked.get(campaign_id) {
            return Ok(known);
        }
        let generation = self.asked.before_read();
        let rows = sqlx::query(ASKED_BY_BANK_ID).bind(campaign_id).fetch_all(&self.pool).await?;
        let mut ids = Vec::new();
        let mut total = 0usize;
        for r in &rows {
            let n: i64 = r.try_get(1)?;
            total += n.max(0) as usize;
            if let Some(bank_id) = r.try_get::<Option<String>, _>(0)? {
                ids.push((
                    crate::bank::select::AskedHere { bank_id, times: n.max(1) as usize },
                    r.try_get::<i64, _>(2)?,
                ));
            }
        }
        self.asked.store(campaign_id, ids.clone(), total, generation);
        Ok((ids.into_iter().map(|(a, _)| a).collect(), total))
    }

    /// What learned value is computed from ([`crate::bank::learn`]): the
    /// latest delivered bank questions, the latest moments left without a
    /// question, and the latest evaluations with whose they are (the
    /// workspace's, a beam candidate, a re-check), whether they are correct
    /// and whether gadfly's re-check rejected their gain, over all campaigns.
    pub async fn yield_history(&self) -> anyhow::Result<crate::bank::learn::History> {
        use crate::bank::learn::{Asked, EvalPoint, Evaluated, History, Withheld};
        // The latest YIELD_QUESTIONS questions and YIELD_EVALUATIONS
        // evaluations: what a selection costs stays bounded however long
        // the campaigns run (the daemon picks a question at every moment).
        let qs = sqlx::query(
            "select id, campaign_id, bank_id, delivered_at, moment from (
                 select id, campaign_id, bank_id, delivered_at, moment from questions
                 where status = 'delivered' and delivered_at is not null and bank_id is not null
                 order by id desc limit $1) latest
             order by id",
        )
        .bind(YIELD_QUESTIONS)
        .fetch_all(&self.pool)
        .await?;
        // The questions asked at an agent's claim (a moment event with the
        // claim's quote): never withheld, so the uplift leaves them out.
        let mut at_claims: std::collections::HashSet<(String, i64)> = std::collections::HashSet::new();
        for r in sqlx::query(CLAIM_MOMENTS_LATEST).bind(YIELD_QUESTIONS).fetch_all(&self.pool).await? {
            let payload: String = r.try_get("payload")?;
            let payload: serde_json::Value = serde_json::from_str(&payload).unwrap_or_default();
            if let (true, Some(q)) = (payload["quote"].is_string(), payload["question"]["question_id"].as_i64()) {
                at_claims.insert((r.try_get("campaign_id")?, q));
            }
        }
        let asked = qs
            .iter()
            .map(|r| {
                let (question_id, campaign_id): (i64, String) = (r.try_get("id")?, r.try_get("campaign_id")?);
                Ok(Asked {
                    claim: at_claims.contains(&(campaign_id.clone(), question_id)),
                    question_id,
                    campaign_id,
                    bank_id: r.try_get("bank_id")?,
                    delivered_at: r.try_get("delivered_at")?,
                    moment: r.try_get("moment")?,
                })
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        let ws = sqlx::query(WITHHELD_LATEST).bind(YIELD_QUESTIONS).fetch_all(&self.pool).await?;
        let mut withheld = Vec::with_capacity(ws.len());
        for r in ws.iter().rev() {
            let payload: String = r.try_get("payload")?;
            let payload: serde_json::Value = serde_json::from_str(&payload).unwrap_or_default();
            let Some(moment) = payload["moment"].as_str() else { continue };
            withheld.push(Withheld {
                id: r.try_get("id")?,
                campaign_id: r.try_get("campaign_id")?,
                moment: moment.to_string(),
                at: r.try_get("created_at")?,
            });
        }
        let es = sqlx::query(
            "select id, campaign_id, created_at, geomean, origin, incorrect, tree from (
                 select id, campaign_id, created_at, geomean, origin, incorrect, tree from evaluations
                 order by id desc limit $1) latest
             order by id",
        )
        .bind(YIELD_EVALUATIONS)
        .fetch_all(&self.pool)
        .await?;
        // A re-check is stored as `TREE+recheck-SEED`; it runs only on a
        // correct evaluation, so one of its trees now incorrect had its
        // gain rejected (the outcome is written into its own row).
        let mut rechecked: std::collections::HashSet<(String, String)> = std::collections::HashSet::new();
        for r in &es {
            let tree: String = r.try_get("tree")?;
            if let Some((base, _)) = tree.split_once("+recheck-") {
                rechecked.insert((r.try_get("campaign_id")?, base.to_string()));
            }
        }
        let evals = es
            .iter()
            .map(|r| {
                let campaign_id: String = r.try_get("campaign_id")?;
                let tree: String = r.try_get("tree")?;
                let origin = crate::evaluation::Origin::parse(&r.try_get::<String, _>("origin")?);
                let correct = r.try_get::<i64, _>("incorrect")? == 0;
                let rejected = !correct && rechecked.contains(&(campaign_id.clone(), tree.clone()));
                Ok(Evaluated {
                    point: EvalPoint {
                        id: r.try_get("id")?,
                        campaign_id,
                        created_at: r.try_get("created_at")?,
                        geomean: r.try_get("geomean")?,
                    },
                    workspace: origin == crate::evaluation::Origin::Workspace && !tree.contains("+recheck-"),
                    correct,
                    rejected,
                })
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        Ok(History { asked, withheld, evals })
    }
}

/// The statement that takes a campaign's next queued question (see
/// [`Store::claim_next_question`]), with the backend's row lock, built once.
macro_rules! claim_next_sql {
    ($lock:literal) => {
        concat!(
            "update questions set status = 'delivered', delivered_at = $1, delivered_via = $2,
                 objective_before = cast($3 as double precision)
             where id = (select id from questions where campaign_id = $4 and status = 'queued'
                         order by case when source = 'human' then 0 else 1 end, id limit 1 ",
            $lock,
            ") and status = 'queued'
             returning id, campaign_id, source, bank_id, moment, text, status, created_at, delivered_at, delivered_via,
                 expired_at, expired_reason,
                 (select count(*) from questions waiting
                  where waiting.campaign_id = $4 and waiting.status = 'queued' and waiting.id <> questions.id) as others_waiting"
        )
    };
}

use claim_next_sql;

/// The latest moments left without a question, newest first. The kind is
/// written in the statement, not bound: only then may either engine read
/// the partial index `events_withheld` (a seek, not a scan of every event).
/// The latest moments raised by a claim in the agent's words (their
/// payload holds the claim's `quote`).
const CLAIM_MOMENTS_LATEST: &str = "select campaign_id, payload from events
     where kind = 'moment' and payload like '%\"quote\":%' order by id desc limit $1";

const WITHHELD_LATEST: &str =
    "select id, campaign_id, created_at, payload from events where kind = 'moment.withheld' order by id desc limit $1";

/// How often each bank id (and none: a person's question) was asked in a
/// campaign, by latest ask; read from the index on (campaign_id, bank_id).
const ASKED_BY_BANK_ID: &str =
    "select bank_id, count(*), max(id) from questions where campaign_id = $1 group by bank_id order by max(id)";

/// How much history the learned yield of bank entries reads: the latest
/// questions asked (with a bank id, across campaigns) and evaluations.
pub const YIELD_QUESTIONS: i64 = 2000;

pub const YIELD_EVALUATIONS: i64 = 20_000;

/// A question row as `question.delivered` tells it.
impl From<&QuestionRow> for crate::events::DeliveredQuestion {
    fn from(q: &QuestionRow) -> Self {
        crate::events::DeliveredQuestion {
            question_id: q.id,
            source: q.source.clone(),
            bank_id: q.bank_id.clone(),
            moment: q.moment.clone(),
            text: q.text.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::tests::{sqlite_plan, test_campaign};

    #[test]
    fn a_question_row_is_told_as_delivered_with_its_own_fields() {
        let row = QuestionRow {
            id: 5,
            campaign_id: "c".into(),
            source: "bank".into(),
            bank_id: Some("bound-001".into()),
            moment: None,
            text: "Bound?".into(),
            status: "delivered".into(),
            created_at: "t".into(),
            delivered_at: None,
            delivered_via: None,
            expired_at: None,
            expired_reason: None,
        };
        let told = crate::events::DeliveredQuestion::from(&row);
        let expected = crate::events::DeliveredQuestion {
            question_id: 5,
            source: "bank".into(),
            bank_id: Some("bound-001".into()),
            moment: None,
            text: "Bound?".into(),
        };
        assert_eq!(told, expected);
    }

    /// The next question goes to a hook in one statement: a person's first,
    /// then the oldest bank question; none once the queue is empty, after
    /// which the queue is known empty until a question is queued.
    #[tokio::test]
    async fn questions_are_claimed_a_persons_first_then_the_oldest_and_counted_for_selection() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::connect(&format!("sqlite:{}", dir.path().join("g.db").display())).await.unwrap();
        store.insert_campaign(&test_campaign("c1")).await.unwrap();
        let sql = format!("explain query plan {ASKED_BY_BANK_ID}");
        let plan = sqlite_plan(&store, sqlx::query(&sql).bind("c1")).await;
        assert!(plan.iter().any(|p| p.contains("COVERING INDEX questions_campaign_bank")), "plan: {plan:?}");
        let bank_a = store.queue_question("c1", "bank", Some("a"), Some("start"), "bank a?").await.unwrap();
        let bank_b = store.queue_question("c1", "bank", Some("b"), Some("plateau"), "bank b?").await.unwrap();
        let person = store.queue_question("c1", "human", None, None, "a person's?").await.unwrap();
        let mut order = Vec::new();
        while let Some(q) = store.claim_next_question("c1", "hook_additional_context", Some(1.5)).await.unwrap() {
            assert_eq!((q.status.as_str(), q.delivered_via.as_deref()), ("delivered", Some("hook_additional_context")));
            assert!(q.delivered_at.is_some());
            order.push(q.id);
            assert_eq!(
                store.queued_hint.surely_none("c1"),
                order.len() == 3,
                "the claim of the last one tells the hint"
            );
        }
        assert_eq!(order, vec![person, bank_a, bank_b]);
        store.queued_hint.queued("c1");
        assert!(store.claim_next_question("c1", "hook_additional_context", None).await.unwrap().is_none());
        assert!(store.queued_hint.surely_none("c1"), "an empty claim tells the hint");
        assert!(store.list_questions("c1", true).await.unwrap().is_empty());
        assert!(!store.mark_delivered(bank_a, "again", None).await.unwrap(), "delivered once");
        // A person's question (no bank id) counts in the total, not in the ids.
        let (ids, total) = store.asked_bank_ids("c1").await.unwrap();
        assert_eq!((ids, total), (crate::bank::select::AskedHere::from_sequence(&["a", "b"]), 3));
        store.queue_question("c1", "bank", Some("a"), Some("plateau"), "bank a again?").await.unwrap();
        assert!(!store.queued_hint.surely_none("c1"));
        let (ids, total) = store.asked_bank_ids("c1").await.unwrap();
        assert_eq!((ids, total), (crate::bank::select::AskedHere::from_sequence(&["a", "b", "a"]), 4));
        // That came from memory, kept up to date by the queueing; the table says the same.
        assert!(store.asked.get("c1").is_some());
        let own = store.instance().to_string();
        store.question_announced("c1", Some(&own));
        assert!(store.asked.get("c1").is_some(), "its own announcement changes nothing");
        let g = store.queued_hint.before_lookup();
        store.queued_hint.found_none("c1", g);
        store.question_announced("c1", Some(&own));
        assert!(store.queued_hint.surely_none("c1"), "its own announcement does not reopen the queue");
        store.question_announced("c1", Some("another-daemon"));
        assert!(store.asked.get("c1").is_none(), "another daemon's question: read again");
        assert!(!store.queued_hint.surely_none("c1"), "another daemon's question is looked for");
        store.question_announced("c1", None);
        assert!(store.asked.get("c1").is_none(), "an announcement without its origin is another daemon's");
        let (ids, total) = store.asked_bank_ids("c1").await.unwrap();
        assert_eq!((ids, total), (crate::bank::select::AskedHere::from_sequence(&["a", "b", "a"]), 4));
    }

    /// A question that still waits can be expired, once, with why; it
    /// waits no more (neither listed as queued nor claimed by a hook), and
    /// a delivered one is not expired.
    #[tokio::test]
    async fn a_waiting_question_expires_once_with_its_reason_and_waits_no_more() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::connect(&format!("sqlite:{}", dir.path().join("g.db").display())).await.unwrap();
        store.insert_campaign(&test_campaign("c1")).await.unwrap();
        let waiting = store.queue_question("c1", "bank", Some("a"), Some("start"), "a?").await.unwrap();
        let delivered = store.queue_question("c1", "bank", Some("b"), Some("plateau"), "b?").await.unwrap();
        assert!(store.mark_delivered(delivered, "stop_hook_reason", None).await.unwrap());
        let row = store.expire_question(waiting, "the stop was allowed").await.unwrap().expect("it waited");
        assert_eq!((row.id, row.status.as_str()), (waiting, "expired"));
        assert_eq!(row.expired_reason.as_deref(), Some("the stop was allowed"));
        assert!(row.expired_at.is_some() && row.delivered_at.is_none());
        assert!(store.expire_question(waiting, "again").await.unwrap().is_none(), "expired once");
        assert!(store.expire_question(delivered, "late").await.unwrap().is_none(), "a delivered one stays delivered");
        assert!(store.list_questions("c1", true).await.unwrap().is_empty());
        assert!(store.claim_next_question("c1", "hook_additional_context", None).await.unwrap().is_none());
        let all = store.list_questions("c1", false).await.unwrap();
        let statuses: Vec<(&str, Option<&str>)> =
            all.iter().map(|q| (q.status.as_str(), q.expired_reason.as_deref())).collect();
        assert_eq!(statuses, [("expired", Some("the stop was allowed")), ("delivered", None)]);
        assert_eq!(store.count_waiting_questions().await.unwrap(), 0);
    }

    /// Ten hook calls that all see a question waiting send one claim
    /// between them: the others wait their turn, and the claim that took
    /// the last question has told the hint that nothing else waits.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_calls_send_one_claim_for_one_waiting_question() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::connect(&format!("sqlite:{}", dir.path().join("g.db").display())).await.unwrap();
        store.insert_campaign(&test_campaign("c1")).await.unwrap();
        let q = store.queue_question("c1", "bank", Some("a"), Some("plateau"), "a?").await.unwrap();
        let calls: Vec<_> = (0..10)
            .map(|_| {
                let store = store.clone();
                tokio::spawn(async move { store.claim_next_question("c1", "hook_additional_context", None).await })
            })
            .collect();
        let mut got = Vec::new();
        for c in calls {
            got.extend(c.await.unwrap().unwrap().map(|q| q.id));
        }
        assert_eq!(got, vec![q], "the question reaches one call");
        assert_eq!(store.claims_sent.load(std::sync::atomic::Ordering::Relaxed), 1, "one claim statement for all ten");
    }

    /// What learning reads (#35): delivered bank questions, withheld
    /// moments (through their partial index, whatever else the log holds),
    /// and evaluations with whose they are, whether correct, and whether
    /// gadfly's re-check rejected their gain (incorrect, with a re-check
    /// row of their tree; an evaluation incorrect of itself is not).
    #[tokio::test]
    async fn yield_history_reads_withheld_moments_and_rejected_gains() {
        assert_eq!(crate::events::kind::MOMENT_WITHHELD, "moment.withheld", "the kind WITHHELD_LATEST names");
        let dir = tempfile::tempdir().unwrap();
        let store = Store::connect(&format!("sqlite:{}", dir.path().join("g.db").display())).await.unwrap();
        store.insert_campaign(&test_campaign("c1")).await.unwrap();
        let plan = sqlite_plan(&store, sqlx::query(&format!("explain query plan {WITHHELD_LATEST}")).bind(5)).await;
        assert!(plan.iter().any(|p| p.contains("events_withheld")), "plan: {plan:?}");
        for (tree, geomean, origin, incorrect) in [
            ("t1", 1.0, "workspace", 0),
            ("t2", 2.0, "workspace", 1),
            ("t2+recheck-7", 1.1, "recheck", 0),
            ("t3", 1.5, "beam", 0),
            ("t4", 1.2, "workspace", 1),
        ] {
            sqlx::query(
                "insert into evaluations (campaign_id, tree, holds, geomean, failing_count, body, duration_ms, created_at, origin, incorrect)
                 values ('c1', $1, 0, cast($2 as double precision), 0, '{}', 0, '2026-01-01T00:00:00.000Z', $3, $4)",
            )
            .bind(tree)
            .bind(geomean)
            .bind(origin)
            .bind(incorrect as i64)
            .execute(&store.pool)
            .await
            .unwrap();
        }
        let payload = serde_json::json!({"moment": "plateau", "detector": "plateau", "share": 0.1});
        let at = "2026-01-01T00:00:01.000Z";
        store.append_event("c1", None, "moment", None, &payload, at).await.unwrap();
        let (withheld_id, _) = store.append_event("c1", None, "moment.withheld", None, &payload, at).await.unwrap();
        store.queue_question("c1", "bank", Some("gap-001"), Some("plateau"), "q?").await.unwrap();
        store.claim_next_question("c1", "hook_additional_context", None).await.unwrap().unwrap();
        // A question asked at a claim in the agent's words: its moment
        // event quotes the claim.
        let claimed = store.queue_question("c1", "bank", Some("bound-001"), Some("limit_claim"), "why?").await.unwrap();
        store.claim_next_question("c1", "hook_additional_context", None).await.unwrap().unwrap();
        let claim = serde_json::json!({"moment": "limit_claim", "source": "text", "quote": "This is the ceiling.",
                                       "question": {"question_id": claimed, "bank_id": "bound-001", "text": "why?"}});
        store.append_event("c1", None, "moment", None, &claim, at).await.unwrap();

        let h = store.yield_history().await.unwrap();
        assert_eq!(
            h.asked.iter().map(|a| (a.bank_id.as_deref(), a.moment.as_deref(), a.claim)).collect::<Vec<_>>(),
            [(Some("gap-001"), Some("plateau"), false), (Some("bound-001"), Some("limit_claim"), true)]
        );
        assert_eq!(h.withheld.len(), 1);
        assert_eq!(
            (h.withheld[0].id, h.withheld[0].moment.as_str(), h.withheld[0].at.as_str()),
            (withheld_id, "plateau", at)
        );
        let seen: Vec<(i64, bool, bool, bool)> =
            h.evals.iter().map(|e| (e.point.id, e.workspace, e.correct, e.rejected)).collect();
        assert_eq!(
            seen,
            [
                (1, true, true, false),
                (2, true, false, true),
                (3, false, true, false),
                (4, false, true, false),
                (5, true, false, false)
            ]
        );
    }
}
