//! Campaign leases (table `leases`): which daemon runs a campaign's agent.

use sqlx::Row;

use super::Store;
use crate::time::now;

impl Store {
    /// Takes (or renews) a campaign's lease for `owner` until
    /// `expires_at_ms`: true when `owner` holds it now. It is taken from
    /// another owner only once that owner's lease has expired (`now_ms`),
    /// or at once with `take_any` (one daemon per SQLite file: any other
    /// owner is a dead process).
    pub async fn acquire_lease(
        &self,
        campaign_id: &str,
        owner: &str,
        now_ms: i64,
        expires_at_ms: i64,
        take_any: bool,
    ) -> anyhow::Result<bool> {
        let _turn = self.write_turn().await;
        let done = sqlx::query(
            "insert into leases (campaign_id, owner, expires_at_ms, acquired_at) values ($1, $2, $3, $4)
             on conflict (campaign_id) do update set owner = excluded.owner, expires_at_ms = excluded.expires_at_ms,
               acquired_at = case when leases.owner = excluded.owner then leases.acquired_at else excluded.acquired_at end
             where leases.owner = excluded.owner or leases.expires_at_ms < $5 or $6 = 1",
        )
        .bind(campaign_id)
        .bind(owner)
        .bind(expires_at_ms)
        .bind(now())
        .bind(now_ms)
        .bind(take_any as i64)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Gives a lease back (the run ended).
    pub async fn release_lease(&self, campaign_id: &str, owner: &str) -> anyhow::Result<()> {
        let _turn = self.write_turn().await;
        sqlx::query("delete from leases where campaign_id = $1 and owner = $2")
            .bind(campaign_id)
            .bind(owner)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// The lease of a campaign: (owner, expires_at_ms).
    pub async fn lease(&self, campaign_id: &str) -> anyhow::Result<Option<(String, i64)>> {
        let row = sqlx::query("select owner, expires_at_ms from leases where campaign_id = $1")
            .bind(campaign_id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(match row {
            Some(r) => Some((r.try_get("owner")?, r.try_get("expires_at_ms")?)),
            None => None,
        })
    }
}
