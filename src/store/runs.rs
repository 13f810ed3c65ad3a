//! The agent runs gadfly started (table `runs`).

use serde::{Deserialize, Serialize};
use sqlx::{FromRow, Row};

use super::{write_returning_one, Store};
use crate::time::now;

#[derive(Debug, Clone, Serialize, Deserialize, sqlx::FromRow)]
pub struct RunRow {
    pub id: i64,
    pub campaign_id: String,
    pub agent: String,
    pub status: String,
    pub session_id: Option<String>,
    pub turns: i64,
    pub outcome: Option<String>,
    pub started_at: String,
    pub ended_at: Option<String>,
    /// The daemon running it (its lease owner id).
    #[sqlx(default)]
    pub owner: Option<String>,
}

impl Store {
    pub async fn insert_run(&self, campaign_id: &str, agent: &str) -> anyhow::Result<i64> {
        let _turn = self.write_turn().await;
        let row = write_returning_one(
        sqlx::query(
                "insert into runs (campaign_id, agent, status, turns, started_at) values ($1, $2, 'running', 0, $3) returning id",
            )
            .bind(campaign_id)
            .bind(agent)
            .bind(now()),
        &self.pool,
    )
        .await?;
        Ok(row.try_get::<i64, _>(0)?)
    }

    pub async fn update_run(&self, id: i64, session_id: Option<&str>, turns: i64) -> anyhow::Result<()> {
        let _turn = self.write_turn().await;
        sqlx::query("update runs set session_id = coalesce($1, session_id), turns = case when $2 > turns then $2 else turns end where id = $3")
            .bind(session_id)
            .bind(turns)
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Ends a running run; false when it had already ended.
    pub async fn end_run(&self, id: i64, status: &str, outcome: &str) -> anyhow::Result<bool> {
        let _turn = self.write_turn().await;
        let done = sqlx::query(
            "update runs set status = $1, outcome = $2, ended_at = $3 where id = $4 and status = 'running'",
        )
        .bind(status)
        .bind(outcome)
        .bind(now())
        .bind(id)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    pub async fn list_runs(&self, campaign_id: &str) -> anyhow::Result<Vec<RunRow>> {
        let rows = sqlx::query(
            "select id, campaign_id, agent, status, session_id, turns, outcome, started_at, ended_at, owner from runs
             where campaign_id = $1 order by id",
        )
        .bind(campaign_id)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(RunRow::from_row).collect::<Result<_, _>>()?)
    }

    /// Runs still marked running, whatever daemon started them.
    pub async fn running_runs(&self) -> anyhow::Result<Vec<RunRow>> {
        let rows = sqlx::query(
            "select id, campaign_id, agent, status, session_id, turns, outcome, started_at, ended_at, owner
             from runs where status = 'running' order by id",
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(RunRow::from_row).collect::<Result<_, _>>()?)
    }

    /// Records which daemon runs the run now.
    pub async fn set_run_owner(&self, id: i64, owner: &str) -> anyhow::Result<()> {
        let _turn = self.write_turn().await;
        sqlx::query("update runs set owner = $1 where id = $2").bind(owner).bind(id).execute(&self.pool).await?;
        Ok(())
    }
}
