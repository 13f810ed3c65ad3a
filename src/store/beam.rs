//! Beam families (tables `beam_families` and `beam_evaluations`).

use serde::{Deserialize, Serialize};
use sqlx::{FromRow, Row};

use super::Store;
use crate::time::now;

#[derive(Debug, Clone, Serialize, Deserialize, sqlx::FromRow)]
pub struct FamilyRow {
    pub family: String,
    #[sqlx(rename = "ref")]
    pub git_ref: String,
    pub status: String,
    pub reason: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

impl Store {
    /// Declares a family (or points it at a new ref); an abandoned family
    /// declared again is alive again.
    pub async fn upsert_family(&self, campaign_id: &str, family: &str, git_ref: &str) -> anyhow::Result<()> {
        let _turn = self.write_turn().await;
        let at = now();
        sqlx::query(
            "insert into beam_families (campaign_id, family, ref, status, created_at, updated_at)
             values ($1, $2, $3, 'alive', $4, $4)
             on conflict (campaign_id, family) do update set ref = excluded.ref, status = 'alive', reason = null, updated_at = excluded.updated_at",
        )
        .bind(campaign_id)
        .bind(family)
        .bind(git_ref)
        .bind(&at)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Abandons a family with its reason; false when it does not exist.
    pub async fn abandon_family(&self, campaign_id: &str, family: &str, reason: &str) -> anyhow::Result<bool> {
        let _turn = self.write_turn().await;
        let done = sqlx::query(
            "update beam_families set status = 'abandoned', reason = $1, updated_at = $2 where campaign_id = $3 and family = $4",
        )
        .bind(reason)
        .bind(now())
        .bind(campaign_id)
        .bind(family)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    pub async fn list_families(&self, campaign_id: &str) -> anyhow::Result<Vec<FamilyRow>> {
        let rows = sqlx::query(
            "select family, ref, status, reason, created_at, updated_at from beam_families where campaign_id = $1 order by created_at, family",
        )
        .bind(campaign_id)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(FamilyRow::from_row).collect::<Result<_, _>>()?)
    }

    pub async fn record_family_evaluation(
        &self,
        campaign_id: &str,
        family: &str,
        commit: &str,
        evaluation_id: i64,
    ) -> anyhow::Result<()> {
        let _turn = self.write_turn().await;
        sqlx::query(
            "insert into beam_evaluations (campaign_id, family, commit_id, evaluation_id, created_at)
             values ($1, $2, $3, $4, $5) on conflict (campaign_id, family, commit_id) do nothing",
        )
        .bind(campaign_id)
        .bind(family)
        .bind(commit)
        .bind(evaluation_id)
        .bind(now())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// (family, commit, evaluation id) for every candidate evaluation, oldest first.
    pub async fn family_evaluations(&self, campaign_id: &str) -> anyhow::Result<Vec<(String, String, i64)>> {
        let rows = sqlx::query(
            "select family, commit_id, evaluation_id from beam_evaluations where campaign_id = $1 order by id",
        )
        .bind(campaign_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(|r| Ok((r.try_get("family")?, r.try_get("commit_id")?, r.try_get("evaluation_id")?))).collect()
    }
}
