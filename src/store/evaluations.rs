//! Evaluations of trees (tables `evaluations` and `scenario_results`),
//! kept as their JSON bodies and handed out decoded, with `id` set to the
//! row's (a body that does not decode: see the policy in `store.rs`).

use sqlx::Row;

use super::{decode, num, write_returning_one, Store};
use crate::evaluation::Evaluation;

/// The table an evaluation's body is read from, as errors name it.
const TABLE: &str = "evaluations";

/// The row's body decoded, its `id` set; an error names the row.
fn evaluation_from_row(r: &sqlx::any::AnyRow) -> anyhow::Result<Evaluation> {
    let id: i64 = r.try_get("id")?;
    let mut e: Evaluation = decode(TABLE, "body", id, &r.try_get::<String, _>("body")?)?;
    e.id = Some(id);
    Ok(e)
}

impl Store {
    /// The stored evaluation of a tree.
    pub async fn find_evaluation(&self, campaign_id: &str, tree: &str) -> anyhow::Result<Option<Evaluation>> {
        let row = sqlx::query("select id, body from evaluations where campaign_id = $1 and tree = $2")
            .bind(campaign_id)
            .bind(tree)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(evaluation_from_row).transpose()
    }

    pub async fn insert_evaluation(&self, campaign_id: &str, e: &Evaluation) -> anyhow::Result<i64> {
        let _turn = self.write_turn().await;
        let mut tx = self.pool.begin().await?;
        let body = serde_json::to_string(e)?;
        let row = write_returning_one(
        sqlx::query(
                "insert into evaluations (campaign_id, tree, holds, geomean, worst_scenario, worst_speedup, failing_count, body, duration_ms, created_at)
                 values ($1, $2, $3, cast($4 as double precision), $5, cast($6 as double precision), $7, $8, $9, $10) returning id",
            )
            .bind(campaign_id)
            .bind(&e.tree)
            .bind(e.verdict.holds as i64)
            .bind(num(e.verdict.geomean_speedup))
            .bind(e.verdict.worst_scenario.as_deref())
            .bind(num(e.verdict.worst_speedup))
            .bind(e.verdict.failing_count as i64)
            .bind(body)
            .bind(e.duration_ms as i64)
            .bind(&e.created_at),
        &mut *tx,
    )
        .await?;
        let id: i64 = row.try_get(0)?;
        for s in &e.verdict.scenarios {
            sqlx::query(
                "insert into scenario_results (evaluation_id, scenario, present, correct, passes, speedup, time_us, baseline_us, max_abs_err_ref, max_abs_err_hi, reasons)
                 values ($1, $2, $3, $4, $5, cast($6 as double precision), cast($7 as double precision), cast($8 as double precision),
                         cast($9 as double precision), cast($10 as double precision), $11)",
            )
            .bind(id)
            .bind(&s.scenario)
            .bind(s.present as i64)
            .bind(s.correct as i64)
            .bind(s.passes as i64)
            .bind(num(s.speedup))
            .bind(num(s.measured.as_ref().map(|m| m.time_us)))
            .bind(num(s.measured.as_ref().map(|m| m.baseline_us)))
            .bind(num(s.measured.as_ref().and_then(|m| m.max_abs_err_ref)))
            .bind(num(s.measured.as_ref().and_then(|m| m.max_abs_err_hi)))
            .bind(serde_json::to_string(&s.reasons)?)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(id)
    }

    /// Rewrites a stored evaluation after gadfly's own re-check changed its verdict.
    pub async fn replace_evaluation_body(&self, id: i64, e: &Evaluation) -> anyhow::Result<()> {
        let _turn = self.write_turn().await;
        sqlx::query("update evaluations set body = $1, holds = $2, failing_count = $3 where id = $4")
            .bind(serde_json::to_string(e)?)
            .bind(e.verdict.holds as i64)
            .bind(e.verdict.failing_count as i64)
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// The newest evaluation of a campaign.
    pub async fn latest_evaluation(&self, campaign_id: &str) -> anyhow::Result<Option<Evaluation>> {
        let row = sqlx::query("select id, body from evaluations where campaign_id = $1 order by id desc limit 1")
            .bind(campaign_id)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(evaluation_from_row).transpose()
    }

    /// Evaluations of a campaign, oldest first. A list scan: a body that
    /// does not decode is skipped, warned about once.
    pub async fn list_evaluations(&self, campaign_id: &str) -> anyhow::Result<Vec<Evaluation>> {
        let rows = sqlx::query("select id, body from evaluations where campaign_id = $1 order by id")
            .bind(campaign_id)
            .fetch_all(&self.pool)
            .await?;
        let mut out = Vec::with_capacity(rows.len());
        for r in &rows {
            let id: i64 = r.try_get("id")?;
            if let Some(mut e) = self.decode_or_skip::<Evaluation>(TABLE, "body", id, &r.try_get::<String, _>("body")?)
            {
                e.id = Some(id);
                out.push(e);
            }
        }
        Ok(out)
    }

    /// (id, created_at, holds, geometric mean) of every evaluation, oldest first.
    pub async fn evaluation_series(&self, campaign_id: &str) -> anyhow::Result<Vec<(i64, String, bool, Option<f64>)>> {
        let rows =
            sqlx::query("select id, created_at, holds, geomean from evaluations where campaign_id = $1 order by id")
                .bind(campaign_id)
                .fetch_all(&self.pool)
                .await?;
        rows.iter()
            .map(|r| {
                Ok((
                    r.try_get("id")?,
                    r.try_get("created_at")?,
                    r.try_get::<i64, _>("holds")? != 0,
                    r.try_get("geomean")?,
                ))
            })
            .collect()
    }

    pub async fn count_evaluations(&self, campaign_id: &str) -> anyhow::Result<i64> {
        let row = sqlx::query("select count(*) from evaluations where campaign_id = $1")
            .bind(campaign_id)
            .fetch_one(&self.pool)
            .await?;
        Ok(row.try_get::<i64, _>(0)?)
    }
}
