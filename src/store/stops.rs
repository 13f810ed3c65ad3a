//! Stop attempts (table `stop_attempts`): one row per judged Stop hook call.

use serde::{Deserialize, Serialize};
use sqlx::Row;

use super::{write_returning_one, Store};
use crate::time::now;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StopAttemptRow {
    pub id: i64,
    pub campaign_id: String,
    pub event_id: i64,
    pub session_id: Option<String>,
    pub agent: String,
    pub claim: Option<String>,
    pub stop_hook_active: bool,
    pub evaluation_id: Option<i64>,
    pub holds: bool,
    pub decision: String,
    pub reason: Option<String>,
    pub question_id: Option<i64>,
    pub created_at: String,
}

pub struct NewStopAttempt<'a> {
    pub campaign_id: &'a str,
    pub event_id: i64,
    pub session_id: Option<&'a str>,
    pub agent: &'a str,
    pub claim: Option<&'a str>,
    pub stop_hook_active: bool,
    pub evaluation_id: Option<i64>,
    pub holds: bool,
    pub decision: &'a str,
    pub reason: Option<&'a str>,
    pub question_id: Option<i64>,
}

impl Store {
    pub async fn insert_stop_attempt(&self, s: &NewStopAttempt<'_>) -> anyhow::Result<i64> {
        let _turn = self.write_turn().await;
        let mut conn = self.pool.acquire().await?;
        Self::stop_attempt_in(&mut conn, s).await
    }

    /// Records a stop attempt and the event that tells of it in one
    /// transaction (one commit on the stop's path, not two): the attempt's
    /// id and the event's.
    pub async fn insert_stop_attempt_with_event(
        &self,
        s: &NewStopAttempt<'_>,
        kind: &str,
        payload: &serde_json::Value,
        created_at: &str,
    ) -> anyhow::Result<(i64, i64)> {
        let _turn = self.write_turn().await;
        let mut tx = self.pool.begin().await?;
        let attempt = Self::stop_attempt_in(&mut tx, s).await?;
        let row = write_returning_one(
            sqlx::query(
                "insert into events (campaign_id, session_id, kind, payload, created_at)
                 values ($1, $2, $3, $4, $5) returning id",
            )
            .bind(s.campaign_id)
            .bind(s.session_id)
            .bind(kind)
            .bind(payload.to_string())
            .bind(created_at),
            &mut *tx,
        )
        .await?;
        let event = row.try_get::<i64, _>(0)?;
        tx.commit().await?;
        self.announce_event(s.campaign_id, event);
        Ok((attempt, event))
    }

    async fn stop_attempt_in(conn: &mut sqlx::AnyConnection, s: &NewStopAttempt<'_>) -> anyhow::Result<i64> {
        let row = write_returning_one(
        sqlx::query(
                "insert into stop_attempts (campaign_id, event_id, session_id, agent, claim, stop_hook_active, evaluation_id, holds, decision, reason, question_id, created_at)
                 values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
                 on conflict (event_id) do update set decision = stop_attempts.decision
                 returning id",
            )
            .bind(s.campaign_id)
            .bind(s.event_id)
            .bind(s.session_id)
            .bind(s.agent)
            .bind(s.claim)
            .bind(s.stop_hook_active as i64)
            .bind(s.evaluation_id)
            .bind(s.holds as i64)
            .bind(s.decision)
            .bind(s.reason)
            .bind(s.question_id)
            .bind(now()),
        &mut *conn,
    )
        .await?;
        Ok(row.try_get::<i64, _>(0)?)
    }

    pub async fn stop_attempt_for_event(&self, event_id: i64) -> anyhow::Result<Option<StopAttemptRow>> {
        let row = sqlx::query(&format!("{STOP_SELECT} where event_id = $1"))
            .bind(event_id)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(stop_from_row).transpose()
    }

    pub async fn list_stop_attempts(&self, campaign_id: &str) -> anyhow::Result<Vec<StopAttemptRow>> {
        let rows = sqlx::query(&format!("{STOP_SELECT} where campaign_id = $1 order by id"))
            .bind(campaign_id)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(stop_from_row).collect()
    }
}

const STOP_SELECT: &str = "select id, campaign_id, event_id, session_id, agent, claim, stop_hook_active, evaluation_id, holds, decision, reason, question_id, created_at from stop_attempts";

fn stop_from_row(r: &sqlx::any::AnyRow) -> anyhow::Result<StopAttemptRow> {
    Ok(StopAttemptRow {
        id: r.try_get("id")?,
        campaign_id: r.try_get("campaign_id")?,
        event_id: r.try_get("event_id")?,
        session_id: r.try_get("session_id")?,
        agent: r.try_get("agent")?,
        claim: r.try_get("claim")?,
        stop_hook_active: r.try_get::<i64, _>("stop_hook_active")? != 0,
        evaluation_id: r.try_get("evaluation_id")?,
        holds: r.try_get::<i64, _>("holds")? != 0,
        decision: r.try_get("decision")?,
        reason: r.try_get("reason")?,
        question_id: r.try_get("question_id")?,
        created_at: r.try_get("created_at")?,
    })
}
