//! The evaluation job queue (table `eval_jobs`): the daemon enqueues a
//! tree, workers claim jobs whose tags they have, under a lease they renew.
//! Every transition is one conditional update, so two workers never hold
//! the same job: PostgreSQL picks candidates with `FOR UPDATE SKIP LOCKED`,
//! SQLite (one writer at a time) with a plain select; both then take the
//! job with `update ... where id = $1 and status = 'queued'`.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Context;
use sqlx::Row;

use super::{write_returning, write_returning_one, Backend, Store};
use crate::time::now;

/// A job a worker holds: everything it needs besides the campaign.
#[derive(Debug, Clone)]
pub struct ClaimedJob {
    pub id: i64,
    pub campaign_id: String,
    pub tree: String,
    pub seed: u64,
    pub tags: BTreeMap<String, String>,
    /// The tree's files as a tar.
    pub archive: Vec<u8>,
    /// Attempts that ended badly before this one (it guards every update,
    /// so a worker whose lease ran out cannot touch the job's next attempt).
    pub attempts: i64,
    pub max_attempts: i64,
}

/// Where a job stands, as the daemon polls it.
#[derive(Debug, Clone, PartialEq)]
pub struct JobState {
    pub status: String,
    /// A done job's evaluation, decoded (one that does not decode is an
    /// error naming the job: see the policy in `store.rs`).
    pub evaluation: Option<crate::evaluation::Evaluation>,
    pub error: Option<String>,
    pub worker: Option<String>,
    pub attempts: i64,
}

/// The time `d` from now, in the same text form as [`now`] (fixed width,
/// UTC), so leases compare as text on both backends.
fn after(d: Duration) -> String {
    let d = chrono::Duration::from_std(d).unwrap_or(chrono::Duration::seconds(30));
    (chrono::Utc::now() + d).to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// True when every tag the job needs is one the worker has, same value.
pub fn tags_match(job: &BTreeMap<String, String>, worker: &BTreeMap<String, String>) -> bool {
    job.iter().all(|(k, v)| worker.get(k) == Some(v))
}

const CLAIMED: &str = "returning id, campaign_id, tree, seed, tags_json, archive_hex, attempts, max_attempts";

impl Store {
    /// Queues an evaluation of `tree` (its files in `archive`, a tar).
    pub async fn enqueue_job(
        &self,
        campaign_id: &str,
        tree: &str,
        seed: u64,
        tags: &BTreeMap<String, String>,
        archive: &[u8],
        max_attempts: i64,
    ) -> anyhow::Result<i64> {
        let _turn = self.write_turn().await;
        let at = now();
        let row = write_returning_one(
        sqlx::query(
                "insert into eval_jobs (campaign_id, tree, seed, tags_json, archive_hex, status, attempts, max_attempts, lost, created_at, updated_at)
                 values ($1, $2, $3, $4, $5, 'queued', 0, $6, 0, $7, $7) returning id",
            )
            .bind(campaign_id)
            .bind(tree)
            .bind(seed as i64)
            .bind(serde_json::to_string(tags)?)
            .bind(hex::encode(archive))
            .bind(max_attempts)
            .bind(&at),
        &self.pool,
    )
        .await?;
        Ok(row.try_get(0)?)
    }

    /// A queued or running job for the same evaluation (one a daemon that
    /// stopped waiting left behind), to wait on instead of queueing again.
    pub async fn find_open_job(&self, campaign_id: &str, tree: &str, seed: u64) -> anyhow::Result<Option<i64>> {
        let row = sqlx::query(
            "select id from eval_jobs where campaign_id = $1 and tree = $2 and seed = $3
             and status in ('queued', 'running') order by id limit 1",
        )
        .bind(campaign_id)
        .bind(tree)
        .bind(seed as i64)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(|r| r.try_get(0)).transpose()?)
    }

    /// Claims the oldest queued job whose tags `worker_tags` include, under
    /// a lease of `lease`; none when there is no such job.
    pub async fn claim_job(
        &self,
        worker: &str,
        worker_tags: &BTreeMap<String, String>,
        lease: Duration,
    ) -> anyhow::Result<Option<ClaimedJob>> {
        let _turn = self.write_turn().await;
        const PAGE: i64 = 32;
        let take = "update eval_jobs set status = 'running', worker = $1, lease_expires_at = $2, updated_at = $3
                    where id = $4 and status = 'queued' ";
        let mut cursor = 0i64;
        if self.backend == Backend::Postgres {
            let mut tx = self.pool.begin().await?;
            loop {
                let rows = sqlx::query(
                    "select id, tags_json from eval_jobs where status = 'queued' and id > $1
                     order by id limit $2 for update skip locked",
                )
                .bind(cursor)
                .bind(PAGE)
                .fetch_all(&mut *tx)
                .await?;
                let Some(last) = rows.last() else { break };
                cursor = last.try_get("id")?;
                for r in &rows {
                    if !self.candidate_matches(r, worker_tags)? {
                        continue;
                    }
                    let id: i64 = r.try_get("id")?;
                    let row = write_returning(
                        sqlx::query(&format!("{take}{CLAIMED}")).bind(worker).bind(after(lease)).bind(now()).bind(id),
                        &mut *tx,
                    )
                    .await?;
                    if let Some(row) = row {
                        tx.commit().await?;
                        return Ok(Some(claimed(&row)?));
                    }
                }
            }
            tx.commit().await?;
            return Ok(None);
        }
        loop {
            let rows = sqlx::query(
                "select id, tags_json from eval_jobs where status = 'queued' and id > $1 order by id limit $2",
            )
            .bind(cursor)
            .bind(PAGE)
            .fetch_all(&self.pool)
            .await?;
            let Some(last) = rows.last() else { return Ok(None) };
            cursor = last.try_get("id")?;
            for r in &rows {
                if !self.candidate_matches(r, worker_tags)? {
                    continue;
                }
                let id: i64 = r.try_get("id")?;
                let row = write_returning(
                    sqlx::query(&format!("{take}{CLAIMED}")).bind(worker).bind(after(lease)).bind(now()).bind(id),
                    &self.pool,
                )
                .await?;
                if let Some(row) = row {
                    return Ok(Some(claimed(&row)?));
                }
            }
        }
    }

    /// Renews the lease of a job this worker holds; false when it no
    /// longer holds it (its lease ran out and the job moved on).
    pub async fn renew_job_lease(&self, job: &ClaimedJob, worker: &str, lease: Duration) -> anyhow::Result<bool> {
        let _turn = self.write_turn().await;
        let done = sqlx::query(
            "update eval_jobs set lease_expires_at = $1, updated_at = $2
             where id = $3 and status = 'running' and worker = $4 and attempts = $5",
        )
        .bind(after(lease))
        .bind(now())
        .bind(job.id)
        .bind(worker)
        .bind(job.attempts)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Stores the evaluation of a job this worker holds; false when it no
    /// longer holds it (the result is then not used).
    pub async fn finish_job(&self, job: &ClaimedJob, worker: &str, evaluation_json: &str) -> anyhow::Result<bool> {
        let _turn = self.write_turn().await;
        let done = sqlx::query(
            "update eval_jobs set status = 'done', evaluation_json = $1, archive_hex = '', lease_expires_at = null,
                 error = null, updated_at = $2
             where id = $3 and status = 'running' and worker = $4 and attempts = $5",
        )
        .bind(evaluation_json)
        .bind(now())
        .bind(job.id)
        .bind(worker)
        .bind(job.attempts)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Records an attempt that the worker's machinery could not carry out
    /// (not a failing harness: that is a done job whose evaluation fails).
    /// The job goes back to the queue, or fails once it used all its
    /// attempts. Returns the job's new status, none when not held.
    pub async fn fail_job_attempt(
        &self,
        job: &ClaimedJob,
        worker: &str,
        reason: &str,
    ) -> anyhow::Result<Option<&'static str>> {
        let _turn = self.write_turn().await;
        let attempts = job.attempts + 1;
        let (status, error) = if attempts >= job.max_attempts {
            ("failed", format!("the evaluation job failed {attempts} times on workers; the last time: {reason}"))
        } else {
            ("queued", reason.to_string())
        };
        let done = sqlx::query(
            "update eval_jobs set status = $1, attempts = $2, error = $3, worker = null, lease_expires_at = null,
                 archive_hex = case when $1 = 'failed' then '' else archive_hex end, updated_at = $4
             where id = $5 and status = 'running' and worker = $6 and attempts = $7",
        )
        .bind(status)
        .bind(attempts)
        .bind(&error)
        .bind(now())
        .bind(job.id)
        .bind(worker)
        .bind(job.attempts)
        .execute(&self.pool)
        .await?;
        Ok((done.rows_affected() == 1).then_some(status))
    }

    /// Hands a held job back to the queue without counting an attempt
    /// (a worker asked to stop).
    pub async fn release_job(&self, job: &ClaimedJob, worker: &str) -> anyhow::Result<bool> {
        let _turn = self.write_turn().await;
        let done = sqlx::query(
            "update eval_jobs set status = 'queued', worker = null, lease_expires_at = null, updated_at = $1
             where id = $2 and status = 'running' and worker = $3 and attempts = $4",
        )
        .bind(now())
        .bind(job.id)
        .bind(worker)
        .bind(job.attempts)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Running jobs whose lease ran out (their worker was killed, lost its
    /// host or its database connection) go back to the queue, or fail once
    /// they used all their attempts. Returns how many were moved.
    pub async fn requeue_expired_jobs(&self) -> anyhow::Result<u64> {
        let _turn = self.write_turn().await;
        let at = now();
        let rows = sqlx::query(
            "select id, attempts, max_attempts, lost, worker from eval_jobs
             where status = 'running' and lease_expires_at < $1 order by id",
        )
        .bind(&at)
        .fetch_all(&self.pool)
        .await?;
        let mut moved = 0;
        for r in &rows {
            let id: i64 = r.try_get("id")?;
            let before: i64 = r.try_get("attempts")?;
            let max: i64 = r.try_get("max_attempts")?;
            let lost: i64 = r.try_get::<i64, _>("lost")? + 1;
            let worker: Option<String> = r.try_get("worker")?;
            let worker = worker.unwrap_or_else(|| "?".into());
            let attempts = before + 1;
            let (status, error) = if attempts < max {
                ("queued", format!("the worker running it ({worker}) stopped answering"))
            } else if lost == attempts {
                ("failed", format!("the worker running it stopped answering {lost} times (the last one: {worker})"))
            } else {
                (
                    "failed",
                    format!(
                        "the evaluation job failed {attempts} times on workers; the last time the worker running it ({worker}) stopped answering"
                    ),
                )
            };
            let done = sqlx::query(
                "update eval_jobs set status = $1, attempts = $2, lost = $3, error = $4, worker = null,
                     lease_expires_at = null, archive_hex = case when $1 = 'failed' then '' else archive_hex end,
                     updated_at = $5
                 where id = $6 and status = 'running' and attempts = $7 and lease_expires_at < $5",
            )
            .bind(status)
            .bind(attempts)
            .bind(lost)
            .bind(&error)
            .bind(&at)
            .bind(id)
            .bind(before)
            .execute(&self.pool)
            .await?;
            if done.rows_affected() == 1 {
                tracing::warn!(job = id, %worker, status, "an evaluation job's lease ran out");
                moved += 1;
            }
        }
        Ok(moved)
    }

    pub async fn job_state(&self, id: i64) -> anyhow::Result<Option<JobState>> {
        let row = sqlx::query("select status, evaluation_json, error, worker, attempts from eval_jobs where id = $1")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r| {
            let evaluation: Option<String> = r.try_get("evaluation_json")?;
            Ok(JobState {
                status: r.try_get("status")?,
                evaluation: evaluation
                    .map(|body| super::decode("eval_jobs", "evaluation_json", id, &body))
                    .transpose()?,
                error: r.try_get("error")?,
                worker: r.try_get("worker")?,
                attempts: r.try_get("attempts")?,
            })
        })
        .transpose()
    }

    /// Jobs waiting for a worker, across campaigns.
    pub async fn count_queued_jobs(&self) -> anyhow::Result<i64> {
        let row = sqlx::query("select count(*) from eval_jobs where status = 'queued'").fetch_one(&self.pool).await?;
        Ok(row.try_get(0)?)
    }
}

impl Store {
    /// Whether a queued job's tags are among the worker's. A list scan: a
    /// job whose tags cannot be read is claimed by no one; it waits, named
    /// in the log once (see the policy in `store.rs`).
    fn candidate_matches(&self, r: &sqlx::any::AnyRow, worker_tags: &BTreeMap<String, String>) -> anyhow::Result<bool> {
        let id: i64 = r.try_get("id")?;
        let tags: String = r.try_get("tags_json")?;
        Ok(self
            .decode_or_skip::<BTreeMap<String, String>>("eval_jobs", "tags_json", id, &tags)
            .is_some_and(|t| tags_match(&t, worker_tags)))
    }
}

fn claimed(r: &sqlx::any::AnyRow) -> anyhow::Result<ClaimedJob> {
    let id: i64 = r.try_get("id")?;
    let archive = hex::decode(r.try_get::<String, _>("archive_hex")?)
        .with_context(|| format!("the archive of evaluation job {id} is damaged"))?;
    Ok(ClaimedJob {
        id,
        campaign_id: r.try_get("campaign_id")?,
        tree: r.try_get("tree")?,
        seed: r.try_get::<i64, _>("seed")? as u64,
        tags: super::decode("eval_jobs", "tags_json", id, &r.try_get::<String, _>("tags_json")?)?,
        archive,
        attempts: r.try_get("attempts")?,
        max_attempts: r.try_get("max_attempts")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn a_job_needs_a_subset_of_the_workers_tags() {
        assert!(tags_match(&tags(&[]), &tags(&[])));
        assert!(tags_match(&tags(&[("gpu", "h200")]), &tags(&[("gpu", "h200"), ("zone", "a")])));
        assert!(!tags_match(&tags(&[("gpu", "h200")]), &tags(&[("gpu", "a100")])));
        assert!(!tags_match(&tags(&[("gpu", "h200"), ("zone", "a")]), &tags(&[("gpu", "h200")])));
    }

    #[tokio::test]
    async fn claims_leases_and_retries_on_sqlite() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::connect(&format!("sqlite:{}", dir.path().join("g.db").display())).await.unwrap();
        let c = crate::store::tests::test_campaign("c1");
        store.insert_campaign(&c).await.unwrap();
        let h200 = tags(&[("gpu", "h200")]);
        let id = store.enqueue_job("c1", "t1", 1, &h200, b"tar", 2).await.unwrap();
        assert_eq!(store.find_open_job("c1", "t1", 1).await.unwrap(), Some(id));
        assert_eq!(store.count_queued_jobs().await.unwrap(), 1);
        let lease = Duration::from_millis(200);
        assert!(store.claim_job("w0", &tags(&[("gpu", "a100")]), lease).await.unwrap().is_none());
        let job = store.claim_job("w1", &h200, lease).await.unwrap().unwrap();
        assert_eq!((job.id, job.archive.as_slice(), job.attempts), (id, &b"tar"[..], 0));
        assert!(store.claim_job("w2", &h200, lease).await.unwrap().is_none(), "held by w1");
        assert!(store.renew_job_lease(&job, "w1", lease).await.unwrap());
        assert!(!store.renew_job_lease(&job, "w2", lease).await.unwrap());
        // w1 stops answering: the job goes back to the queue, then w2 takes it.
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(store.requeue_expired_jobs().await.unwrap(), 1);
        assert!(!store.finish_job(&job, "w1", "{}").await.unwrap(), "w1 lost it");
        let again = store.claim_job("w2", &h200, lease).await.unwrap().unwrap();
        assert_eq!(again.attempts, 1);
        // An infrastructure failure on the last attempt fails the job.
        assert_eq!(store.fail_job_attempt(&again, "w2", "tar broke").await.unwrap(), Some("failed"));
        let state = store.job_state(id).await.unwrap().unwrap();
        assert_eq!(state.status, "failed");
        assert!(state.error.unwrap().contains("tar broke"));
        assert_eq!(store.find_open_job("c1", "t1", 1).await.unwrap(), None);
    }
}
