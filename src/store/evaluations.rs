//! Evaluations of trees (tables `evaluations` and `scenario_results`),
//! kept as their JSON bodies and handed out decoded, with `id` and
//! `origin` set to the row's (a body that does not decode: see the policy
//! in `store.rs`).
//!
//! Whose evaluation it is has columns of its own: `origin` (the
//! workspace's, only a beam candidate's, or a re-check's) and
//! `workspace_seq`, the order in which the workspace presented its trees.
//! The campaign's latest verdict is the tree the workspace presented last
//! ([`Store::latest_evaluation`]), not the newest row: a beam candidate
//! evaluated since, or a re-check, is not the workspace's verdict, and a
//! tree the workspace comes back to is answered from the store yet is its
//! verdict again ([`Store::present_evaluation`]).

use sqlx::Row;

use super::{decode, num, write_returning_one, Store};
use crate::evaluation::{Evaluation, Origin};

/// One evaluation in a campaign's history, without its body (see
/// [`Store::evaluation_series`]).
#[derive(Debug, Clone, PartialEq)]
pub struct SeriesPoint {
    pub id: i64,
    pub created_at: String,
    pub holds: bool,
    pub geomean: Option<f64>,
    pub origin: Origin,
    /// Its figures are no result (see [`Evaluation::incorrect`]).
    pub incorrect: bool,
}

/// The table an evaluation's body is read from, as errors name it.
const TABLE: &str = "evaluations";

/// The row's body decoded, its `id` set; an error names the row.
fn evaluation_from_row(r: &sqlx::any::AnyRow) -> anyhow::Result<Evaluation> {
    let id: i64 = r.try_get("id")?;
    let mut e: Evaluation = decode(TABLE, "body", id, &r.try_get::<String, _>("body")?)?;
    e.id = Some(id);
    e.origin = Origin::parse(&r.try_get::<String, _>("origin")?);
    Ok(e)
}

/// The next place in the workspace's order of its campaign's trees.
const NEXT_SEQ: &str = "(select coalesce(max(workspace_seq), 0) + 1 from evaluations where campaign_id = $1)";

impl Store {
    /// The stored evaluation of a tree.
    pub async fn find_evaluation(&self, campaign_id: &str, tree: &str) -> anyhow::Result<Option<Evaluation>> {
        let row = sqlx::query("select id, body, origin from evaluations where campaign_id = $1 and tree = $2")
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
                "insert into evaluations (campaign_id, tree, holds, geomean, worst_scenario, worst_speedup, failing_count, body, duration_ms, created_at, origin, incorrect)
                 values ($1, $2, $3, cast($4 as double precision), $5, cast($6 as double precision), $7, $8, $9, $10, $11, $12) returning id",
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
            .bind(&e.created_at)
            .bind(e.origin.as_str())
            .bind(e.incorrect() as i64),
        &mut *tx,
    )
        .await?;
        let id: i64 = row.try_get(0)?;
        if e.origin == Origin::Workspace {
            // The workspace presents it now: its latest verdict.
            sqlx::query(&format!("update evaluations set workspace_seq = {NEXT_SEQ} where id = $2"))
                .bind(campaign_id)
                .bind(id)
                .execute(&mut *tx)
                .await?;
        }
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
        sqlx::query("update evaluations set body = $1, holds = $2, failing_count = $3, incorrect = $4 where id = $5")
            .bind(serde_json::to_string(e)?)
            .bind(e.verdict.holds as i64)
            .bind(e.verdict.failing_count as i64)
            .bind(e.incorrect() as i64)
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// The campaign's latest verdict: the evaluation of the tree the
    /// workspace presented last (at a stop attempt, an `eval`), never a
    /// beam candidate's nor a re-check's row.
    pub async fn latest_evaluation(&self, campaign_id: &str) -> anyhow::Result<Option<Evaluation>> {
        let row = sqlx::query(
            "select id, body, origin from evaluations where campaign_id = $1 and workspace_seq is not null
             order by workspace_seq desc, id desc limit 1",
        )
        .bind(campaign_id)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(evaluation_from_row).transpose()
    }

    /// The workspace presents the stored evaluation `id` again (its tree
    /// answered from the store: an unchanged tree, a revert, a beam
    /// candidate checked out): it becomes the campaign's latest verdict,
    /// and the workspace's own from now on. Nothing is written when it
    /// already is the latest.
    pub async fn present_evaluation(&self, campaign_id: &str, id: i64) -> anyhow::Result<()> {
        let latest: Option<i64> = sqlx::query_scalar(
            "select id from evaluations where campaign_id = $1 and workspace_seq is not null
             order by workspace_seq desc, id desc limit 1",
        )
        .bind(campaign_id)
        .fetch_optional(&self.pool)
        .await?;
        if latest == Some(id) {
            return Ok(());
        }
        let _turn = self.write_turn().await;
        sqlx::query(&format!(
            "update evaluations set workspace_seq = {NEXT_SEQ},
                    origin = case when origin = 'beam' then 'workspace' else origin end
             where id = $2 and campaign_id = $1"
        ))
        .bind(campaign_id)
        .bind(id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Evaluations of a campaign, oldest first. A list scan: a body that
    /// does not decode is skipped, warned about once.
    pub async fn list_evaluations(&self, campaign_id: &str) -> anyhow::Result<Vec<Evaluation>> {
        let rows = sqlx::query("select id, body, origin from evaluations where campaign_id = $1 order by id")
            .bind(campaign_id)
            .fetch_all(&self.pool)
            .await?;
        let mut out = Vec::with_capacity(rows.len());
        for r in &rows {
            let id: i64 = r.try_get("id")?;
            if let Some(mut e) = self.decode_or_skip::<Evaluation>(TABLE, "body", id, &r.try_get::<String, _>("body")?)
            {
                e.id = Some(id);
                e.origin = Origin::parse(&r.try_get::<String, _>("origin")?);
                out.push(e);
            }
        }
        Ok(out)
    }

    /// Every evaluation of a campaign without its body, oldest first.
    pub async fn evaluation_series(&self, campaign_id: &str) -> anyhow::Result<Vec<SeriesPoint>> {
        let rows = sqlx::query(
            "select id, created_at, holds, geomean, origin, incorrect from evaluations where campaign_id = $1 order by id",
        )
        .bind(campaign_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(SeriesPoint {
                    id: r.try_get("id")?,
                    created_at: r.try_get("created_at")?,
                    holds: r.try_get::<i64, _>("holds")? != 0,
                    geomean: r.try_get("geomean")?,
                    origin: Origin::parse(&r.try_get::<String, _>("origin")?),
                    incorrect: r.try_get::<i64, _>("incorrect")? != 0,
                })
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

#[cfg(test)]
mod tests {
    use sqlx::any::AnyPoolOptions;

    use super::*;
    use crate::evaluation::Origin;
    use crate::store::tests::{test_campaign, test_evaluation};

    /// The first migration that knows whose evaluation a row is.
    const ORIGIN_MIGRATION: i64 = 20261204000011;

    /// A database at the schema before [`ORIGIN_MIGRATION`], as a daemon of
    /// that time left it.
    async fn old_schema(url: &str, backend: &str) -> sqlx::AnyPool {
        sqlx::any::install_default_drivers();
        let dir = tempfile::tempdir().unwrap();
        let from = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations").join(backend);
        for entry in std::fs::read_dir(&from).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let version: i64 = name.split('_').next().unwrap().parse().unwrap();
            if version < ORIGIN_MIGRATION {
                std::fs::copy(&path, dir.path().join(&name)).unwrap();
            }
        }
        let pool = AnyPoolOptions::new().max_connections(1).connect(url).await.unwrap();
        sqlx::migrate::Migrator::new(dir.path()).await.unwrap().run(&pool).await.unwrap();
        pool
    }

    /// Rows written before the origin was recorded: read sensibly after
    /// the migration (a re-check by its tree key, a beam candidate by its
    /// family's record unless a stop was judged on it, a scenario incorrect
    /// or missing, a constraint violated or a rejected gain as incorrect),
    /// and the latest verdict is the workspace's.
    async fn old_rows_migrate(url: &str, backend: &str) {
        let pool = old_schema(url, backend).await;
        let exec = |sql: String| {
            let pool = pool.clone();
            async move {
                sqlx::query(&sql).execute(&pool).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
            }
        };
        exec("insert into campaigns (id, name, mode, status, spec_path, spec_toml, spec_json, protected_json, created_at)
              values ('c1', 'n', 'autonomous', 'active', '/x', '', '{}', '{}', 't')"
            .into())
        .await;
        // (id, tree, each scenario (present, correct), a failure of the evaluation, violations)
        type OldRow<'a> = (i64, &'a str, (i64, i64), Option<&'a str>, bool);
        let rows: [OldRow; 8] = [
            (1, "t1", (1, 1), None, false),
            (2, "t2", (1, 1), None, false),
            (3, "t3", (1, 1), None, false),
            (4, "t1+recheck-7", (1, 1), None, false),
            (5, "t5", (1, 0), None, false),
            (6, "t6", (1, 1), None, true),
            (7, "t7", (1, 1), Some("the gain did not survive gadfly's re-evaluation: a 2.00x vs 1.00x"), false),
            (8, "t8", (0, 0), Some("harness run exited with status 3"), false),
        ];
        for (id, tree, (present, correct), failure, violated) in rows {
            let mut e = test_evaluation(tree);
            e.verdict.failures.extend(failure.map(str::to_string));
            if violated {
                e.violations.push("harness/run.sh was modified".into());
            }
            let mut body = serde_json::to_value(&e).unwrap();
            body.as_object_mut().unwrap().remove("origin");
            exec(format!(
                "insert into evaluations (id, campaign_id, tree, holds, geomean, failing_count, body, duration_ms, created_at)
                 values ({id}, 'c1', '{tree}', 1, 1.5, 0, '{}', 1, 't')",
                body.to_string().replace('\'', "''")
            ))
            .await;
            exec(format!(
                "insert into scenario_results (evaluation_id, scenario, present, correct, passes, reasons)
                 values ({id}, 'a', {present}, {correct}, {correct}, '[]')"
            ))
            .await;
        }
        // t2 and t3 were beam candidates; a stop attempt was judged on t3.
        exec(
            "insert into beam_evaluations (campaign_id, family, commit_id, evaluation_id, created_at)
              values ('c1', 'f', 'k2', 2, 't'), ('c1', 'f', 'k3', 3, 't')"
                .into(),
        )
        .await;
        exec(
            "insert into events (id, campaign_id, kind, payload, created_at) values (1, 'c1', 'hook.stop', '{}', 't')"
                .into(),
        )
        .await;
        exec("insert into stop_attempts (campaign_id, event_id, agent, stop_hook_active, evaluation_id, holds, decision, created_at)
              values ('c1', 1, 'claude-code', 0, 3, 1, 'allow', 't')"
            .into())
        .await;
        if backend == "postgres" {
            exec("select setval('evaluations_id_seq', 8)".into()).await;
        }
        pool.close().await;

        let store = Store::connect(url).await.unwrap();
        let series = store.evaluation_series("c1").await.unwrap();
        let seen: Vec<(i64, Origin, bool)> = series.iter().map(|p| (p.id, p.origin, p.incorrect)).collect();
        use Origin::*;
        assert_eq!(
            seen,
            [
                (1, Workspace, false),
                (2, Beam, false),
                (3, Workspace, false),
                (4, Recheck, false),
                (5, Workspace, true),
                (6, Workspace, true),
                (7, Workspace, true),
                (8, Workspace, true),
            ]
        );
        assert_eq!(store.list_evaluations("c1").await.unwrap()[1].origin, Beam, "the origin is read from its column");
        // The workspace's newest row is its latest verdict; a beam candidate
        // evaluated after it is not.
        assert_eq!(store.latest_evaluation("c1").await.unwrap().unwrap().id, Some(8));
        store.insert_campaign(&test_campaign("c2")).await.unwrap();
        let mut beam = test_evaluation("b1");
        beam.origin = Beam;
        store.insert_evaluation("c1", &beam).await.unwrap();
        assert_eq!(store.latest_evaluation("c1").await.unwrap().unwrap().id, Some(8));
        // The workspace comes back to t1: its verdict again, answered from the store.
        store.present_evaluation("c1", 1).await.unwrap();
        assert_eq!(store.latest_evaluation("c1").await.unwrap().unwrap().id, Some(1));
        // And takes up the beam candidate's tree: the workspace's from now on.
        let b1 = store.find_evaluation("c1", "b1").await.unwrap().unwrap();
        store.present_evaluation("c1", b1.id.unwrap()).await.unwrap();
        let latest = store.latest_evaluation("c1").await.unwrap().unwrap();
        assert_eq!((latest.id, latest.origin), (b1.id, Workspace));
        store.close().await;
    }

    #[tokio::test]
    async fn old_rows_migrate_on_sqlite() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.db");
        old_rows_migrate(&format!("sqlite:{}?mode=rwc", path.display()), "sqlite").await;
    }

    #[tokio::test]
    async fn old_rows_migrate_on_postgres() {
        let Some(base) = std::env::var("GADFLY_TEST_DATABASE_URL").ok().filter(|u| u.starts_with("postgres")) else {
            eprintln!("SKIPPED: needs GADFLY_TEST_DATABASE_URL (PostgreSQL)");
            return;
        };
        use sqlx::Connection;
        let name = format!(
            "gadfly_t_mig_{}_{}",
            std::process::id(),
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
        );
        let mut admin = sqlx::PgConnection::connect(&base).await.unwrap();
        sqlx::query(&format!("create database {name}")).execute(&mut admin).await.unwrap();
        let url = format!("{}/{name}", &base[..base.rfind('/').unwrap()]);
        old_rows_migrate(&url, "postgres").await;
        let _ = sqlx::query(&format!("drop database if exists {name} with (force)")).execute(&mut admin).await;
    }
}
