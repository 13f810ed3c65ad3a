//! Persistence: the only module that writes SQL. SQLite (WAL, FULL sync)
//! in the data dir by default; PostgreSQL when the URL says so. One code
//! path through sqlx's `Any` driver with portable SQL; the migrations are
//! kept per backend in migrations/sqlite and migrations/postgres.

use std::str::FromStr;
use std::time::Duration;

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};
use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::{AnyPool, FromRow, Row};

mod asked;
mod group_commit;
mod jobs;
pub mod live;
pub use jobs::{tags_match, ClaimedJob, JobState};

static SQLITE_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("migrations/sqlite");
static POSTGRES_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("migrations/postgres");

/// The latest events of one kind in a campaign, newest first: read at every
/// stop and every moment, a seek on the `events_campaign_kind` index.
const RECENT_EVENTS: &str = "select id, campaign_id, session_id, kind, payload, created_at from events
     where campaign_id = $1 and kind = $2 order by id desc limit $3";

#[derive(Clone)]
pub struct Store {
    pool: AnyPool,
    pub backend: Backend,
    /// The URL it was opened with (for PostgreSQL's LISTEN connection).
    url: String,
    /// On PostgreSQL, tells the other daemons what this one records.
    announcer: Option<live::Announcer>,
    /// This store's name in its announcements: a daemon skips the
    /// questions it announced itself (its own queueing already counted
    /// them).
    instance: std::sync::Arc<str>,
    queued_hint: std::sync::Arc<live::QueuedHint>,
    /// How often each bank id was asked, per campaign (see [`asked`]).
    asked: std::sync::Arc<asked::AskedCache>,
    /// On SQLite, whose turn it is to write (see [`Store::write_turn`]).
    write_gate: Option<std::sync::Arc<tokio::sync::Mutex<()>>>,
    /// On PostgreSQL, whose turn it is to claim a waiting question (see
    /// [`Store::claim_next_question`]).
    claim_gate: std::sync::Arc<tokio::sync::Mutex<()>>,
    /// How many claim statements this store sent (read by tests).
    claims_sent: std::sync::Arc<std::sync::atomic::AtomicU64>,
    /// Single events, written in groups (see [`group_commit`]).
    events: group_commit::GroupCommit,
    /// The last write probe (see [`Store::can_write`]): when, and its error.
    probe: std::sync::Arc<std::sync::Mutex<Option<(std::time::Instant, Option<String>)>>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// An optional number bound as text and cast in SQL: sqlx's Any driver
/// sends a NULL f64 to PostgreSQL as a float4, which then clashes with the
/// float8 of the same prepared statement ("incorrect binary data format").
fn num(x: Option<f64>) -> Option<String> {
    x.filter(|v| v.is_finite()).map(|v| format!("{v:?}"))
}

pub fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

#[derive(Debug, Clone, Serialize, Deserialize, sqlx::FromRow)]
pub struct CampaignRow {
    pub id: String,
    pub name: String,
    pub mode: String,
    pub status: String,
    pub spec_path: String,
    pub spec_toml: String,
    pub spec_json: String,
    pub protected_json: String,
    pub created_at: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EventRow {
    pub id: i64,
    pub campaign_id: String,
    pub session_id: Option<String>,
    pub kind: String,
    pub payload: serde_json::Value,
    pub created_at: String,
}

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
}

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
    /// Connects by URL (`sqlite:PATH` or `postgres://...`) and applies the
    /// backend's migrations.
    pub async fn connect(url: &str) -> anyhow::Result<Store> {
        sqlx::any::install_default_drivers();
        let backend = if url.starts_with("sqlite:") {
            Backend::Sqlite
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Backend::Postgres
        } else {
            bail!("unsupported database URL `{}`: expected sqlite:PATH or postgres://...", redact(url));
        };
        if backend == Backend::Sqlite {
            // Create the file and switch it to WAL once; the mode is persistent.
            use sqlx::{ConnectOptions, Connection};
            let opts = sqlx::sqlite::SqliteConnectOptions::from_str(url)?
                .create_if_missing(true)
                .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal);
            let mut conn = opts.connect().await.with_context(|| format!("opening {}", redact(url)))?;
            // A damaged file must not be served as healthy (THREATS row 20).
            let rows: Vec<String> = sqlx::query_scalar("pragma quick_check")
                .fetch_all(&mut conn)
                .await
                .unwrap_or_else(|e| vec![e.to_string()]);
            if rows.first().map(String::as_str) != Some("ok") {
                bail!(
                    "the database {} is damaged (PRAGMA quick_check: {}): gadfly will not serve from it; restore it from a backup, or move it aside to start afresh",
                    redact(url),
                    rows.iter().take(3).cloned().collect::<Vec<_>>().join("; ")
                );
            }
            conn.close().await?;
        }
        let options = AnyConnectOptions::from_str(url)?;
        let pool = AnyPoolOptions::new()
            .max_connections(if backend == Backend::Sqlite { 8 } else { 16 })
            .acquire_timeout(Duration::from_secs(30))
            // No liveness round trip at each checkout: a SQLite connection
            // is a file handle in this process and cannot go stale; a
            // PostgreSQL connection is pinged only after it has idled (a
            // server restart or an idle timeout may have closed it). sqlx
            // pings each connection again when it is returned, off the
            // caller's path, and drops it when that fails.
            .test_before_acquire(false)
            .before_acquire(move |conn, meta| {
                Box::pin(async move {
                    if backend == Backend::Postgres && meta.idle_for >= PING_AFTER_IDLE {
                        sqlx::Connection::ping(conn).await?;
                    }
                    Ok(true)
                })
            })
            .after_connect(move |conn, _meta| {
                Box::pin(async move {
                    if backend == Backend::Sqlite {
                        // Every acknowledged event must survive a crash: FULL, not NORMAL.
                        sqlx::query("pragma synchronous = full").execute(&mut *conn).await?;
                        sqlx::query(&format!("pragma busy_timeout = {}", SQLITE_BUSY_TIMEOUT.as_millis()))
                            .execute(&mut *conn)
                            .await?;
                        // 512 KiB of page cache per connection, not SQLite's
                        // 2 MiB: eight connections filled 16 MiB as the file
                        // grew (BENCHMARKS.md, memory); the OS caches the file too.
                        sqlx::query(&format!("pragma cache_size = {SQLITE_CACHE_SIZE}")).execute(&mut *conn).await?;
                        sqlx::query("pragma foreign_keys = on").execute(&mut *conn).await?;
                    }
                    Ok(())
                })
            })
            .connect_with(options)
            .await
            .with_context(|| format!("connecting to {}", redact(url)))?;
        let migrator = match backend {
            Backend::Sqlite => &SQLITE_MIGRATIONS,
            Backend::Postgres => &POSTGRES_MIGRATIONS,
        };
        migrator.run(&pool).await.context("applying database migrations")?;
        let announcer = (backend == Backend::Postgres).then(|| live::Announcer::start(url.to_string()));
        let write_gate: Option<std::sync::Arc<tokio::sync::Mutex<()>>> =
            (backend == Backend::Sqlite).then(Default::default);
        // SQLite commits one transaction at a time: one batch is written at
        // a time. PostgreSQL commits several at once: two batches at a time
        // (1, 2, 4 and 8 were measured with 10 and 100 sessions: 2 is as
        // fast as 1 and faster than 4 or 8, which only add contention).
        let writers = if backend == Backend::Sqlite { 1 } else { 2 };
        let source = match backend {
            Backend::Postgres => group_commit::WriterSource::Postgres(pool.clone()),
            Backend::Sqlite => group_commit::WriterSource::Sqlite(sqlite_file(url)?),
        };
        let events = group_commit::GroupCommit::start(source, writers, write_gate.clone(), announcer.clone());
        Ok(Store {
            pool,
            backend,
            url: url.to_string(),
            announcer,
            instance: format!("{:016x}", rand::random::<u64>()).into(),
            queued_hint: Default::default(),
            asked: Default::default(),
            write_gate,
            claim_gate: Default::default(),
            claims_sent: Default::default(),
            events,
            probe: Default::default(),
        })
    }

    /// Whether the store can write now: `None` when it can, else what
    /// stops it (a full disk, a lock that is never released). On SQLite a
    /// real write is tried (a commit that rewrites `user_version`, which
    /// nothing else uses) after checking the free space of its disk, at most
    /// every 5 s; a failed probe rolls back and discards its connection. On
    /// PostgreSQL, a round trip.
    pub async fn can_write(&self) -> Option<String> {
        const EVERY: Duration = Duration::from_secs(5);
        if let Some((at, result)) = self.probe.lock().expect("probe poisoned").clone() {
            if at.elapsed() < EVERY {
                return result;
            }
        }
        let result = self.probe_write().await.err().map(|e| format!("{e:#}"));
        *self.probe.lock().expect("probe poisoned") = Some((std::time::Instant::now(), result.clone()));
        result
    }

    async fn probe_write(&self) -> anyhow::Result<()> {
        use sqlx::Connection;
        let mut conn = tokio::time::timeout(Duration::from_secs(5), self.pool.acquire())
            .await
            .context("no database connection within 5 s")??;
        if self.backend == Backend::Postgres {
            sqlx::query("select 1").execute(&mut *conn).await?;
            return Ok(());
        }
        // A full disk first: SQLite may still fit a small write in its WAL
        // while every insert that needs a new page fails.
        if let Ok(file) = sqlite_file(&self.url) {
            let folder = file.parent().map(std::path::Path::to_path_buf).unwrap_or_default();
            if let Ok(st) = nix::sys::statvfs::statvfs(&folder) {
                let free = st.blocks_available() as u64 * st.fragment_size() as u64;
                if free < LOW_DISK {
                    anyhow::bail!(
                        "the disk holding {} has {} KiB free (writes fail below about {} KiB)",
                        file.display(),
                        free >> 10,
                        LOW_DISK >> 10
                    );
                }
            }
        }
        let _turn = self.write_turn().await;
        let attempt = async {
            sqlx::query("begin immediate").execute(&mut *conn).await?;
            let v: i64 = sqlx::query_scalar("pragma user_version").fetch_one(&mut *conn).await?;
            sqlx::query(&format!("pragma user_version = {v}")).execute(&mut *conn).await?;
            sqlx::query("commit").execute(&mut *conn).await?;
            anyhow::Ok(())
        };
        match tokio::time::timeout(Duration::from_secs(5), attempt).await {
            Ok(Ok(())) => Ok(()),
            failed => {
                let _ = sqlx::query("rollback").execute(&mut *conn).await;
                // Whatever state it is in, this connection goes.
                let _ = conn.detach().close().await;
                match failed {
                    Ok(Err(e)) => Err(e),
                    _ => Err(anyhow::anyhow!("a write did not finish within 5 s")),
                }
            }
        }
    }

    /// On SQLite, one write at a time in this process: writers wait here,
    /// in order, instead of meeting SQLite's busy handler, which sleeps 1,
    /// 2, 5, 10, 15, 20, 25... ms between retries while another connection
    /// holds the write lock (a hook call and the transcript follower
    /// writing at the same moment paid those sleeps). SQLite writes one
    /// transaction at a time anyway; the busy timeout stays for other
    /// processes on the same file. Nothing on PostgreSQL.
    async fn write_turn(&self) -> Option<tokio::sync::MutexGuard<'_, ()>> {
        match &self.write_gate {
            Some(gate) => Some(gate.lock().await),
            None => None,
        }
    }

    /// Writes the events handed over, then closes the pool (waiting for
    /// every connection to come back).
    pub async fn close(&self) {
        self.events.close().await;
        self.pool.close().await;
    }

    pub async fn insert_campaign(&self, c: &CampaignRow) -> anyhow::Result<()> {
        self.insert_campaign_with_pristine(c, &[]).await
    }

    /// A new campaign and its pristine protected files, in one transaction:
    /// a daemon killed in between leaves neither (THREATS row 17: an active
    /// campaign with no pristine files ran the agent's copies).
    pub async fn insert_campaign_with_pristine(
        &self,
        c: &CampaignRow,
        files: &[crate::snapshot::PristineFile],
    ) -> anyhow::Result<()> {
        let _turn = self.write_turn().await;
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "insert into campaigns (id, name, mode, status, spec_path, spec_toml, spec_json, protected_json, created_at)
             values ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        )
        .bind(&c.id)
        .bind(&c.name)
        .bind(&c.mode)
        .bind(&c.status)
        .bind(&c.spec_path)
        .bind(&c.spec_toml)
        .bind(&c.spec_json)
        .bind(&c.protected_json)
        .bind(&c.created_at)
        .execute(&mut *tx)
        .await?;
        for f in files {
            sqlx::query(
                "insert into pristine_files (campaign_id, path, sha256, mode, content_hex) values ($1, $2, $3, $4, $5)",
            )
            .bind(&c.id)
            .bind(&f.path)
            .bind(&f.sha256)
            .bind(f.mode as i64)
            .bind(hex::encode(&f.content))
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Questions queued and not yet delivered, across campaigns.
    pub async fn count_waiting_questions(&self) -> anyhow::Result<i64> {
        let row = sqlx::query("select count(*) from questions where status = 'queued'").fetch_one(&self.pool).await?;
        Ok(row.try_get(0)?)
    }

    /// The campaign's pristine protected files (none for a campaign made
    /// before gadfly kept them: its evaluations only compare hashes).
    pub async fn list_pristine(&self, campaign_id: &str) -> anyhow::Result<Vec<crate::snapshot::PristineFile>> {
        let rows = sqlx::query(
            "select path, sha256, mode, content_hex from pristine_files where campaign_id = $1 order by path",
        )
        .bind(campaign_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                let path: String = r.try_get("path")?;
                let content = hex::decode(r.try_get::<String, _>("content_hex")?)
                    .map_err(|e| anyhow::anyhow!("pristine copy of {path} is damaged: {e}"))?;
                Ok(crate::snapshot::PristineFile {
                    sha256: r.try_get("sha256")?,
                    mode: r.try_get::<i64, _>("mode")? as u32,
                    content,
                    path,
                })
            })
            .collect()
    }

    pub async fn list_campaigns(&self) -> anyhow::Result<Vec<CampaignRow>> {
        let rows = sqlx::query(&format!("{CAMPAIGN_SELECT} order by created_at, id")).fetch_all(&self.pool).await?;
        rows.iter().map(campaign_from_row).collect()
    }

    pub async fn get_campaign(&self, id: &str) -> anyhow::Result<Option<CampaignRow>> {
        let row = sqlx::query(&format!("{CAMPAIGN_SELECT} where id = $1")).bind(id).fetch_optional(&self.pool).await?;
        row.as_ref().map(campaign_from_row).transpose()
    }

    /// Appends an event. With an idempotency key, a second call with the
    /// same key records nothing and returns the first event's id.
    pub async fn append_event(
        &self,
        campaign_id: &str,
        session_id: Option<&str>,
        kind: &str,
        key: Option<&str>,
        payload: &serde_json::Value,
        created_at: &str,
    ) -> anyhow::Result<(i64, bool)> {
        self.events
            .append(group_commit::NewEvent {
                campaign_id: campaign_id.to_string(),
                session_id: session_id.map(str::to_string),
                kind: kind.to_string(),
                key: key.map(str::to_string),
                payload: payload.to_string(),
                created_at: created_at.to_string(),
            })
            .await
    }

    /// Appends events in one transaction; each keyed row already stored is
    /// skipped (None in the result), the others get their ids.
    pub async fn append_events(
        &self,
        campaign_id: &str,
        session_id: Option<&str>,
        rows: &[(String, String, serde_json::Value)],
        created_at: &str,
    ) -> anyhow::Result<Vec<Option<i64>>> {
        let _turn = self.write_turn().await;
        let mut tx = self.pool.begin().await?;
        let mut ids = Vec::with_capacity(rows.len());
        for (kind, key, payload) in rows {
            let row = write_returning(
                sqlx::query(group_commit::INSERT_EVENT_RETURNING_ID)
                    .bind(campaign_id)
                    .bind(session_id)
                    .bind(kind)
                    .bind(key)
                    .bind(payload.to_string())
                    .bind(created_at),
                &mut *tx,
            )
            .await?;
            ids.push(row.map(|r| r.try_get::<i64, _>(0)).transpose()?);
        }
        tx.commit().await?;
        for id in ids.iter().flatten() {
            self.announce_event(campaign_id, *id);
        }
        Ok(ids)
    }

    fn announce_event(&self, campaign_id: &str, id: i64) {
        if let Some(a) = &self.announcer {
            a.send(live::Announced::Event { campaign_id: campaign_id.to_string(), id });
        }
    }

    /// This store's name in its announcements.
    pub fn instance(&self) -> &str {
        &self.instance
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

    /// One event by id.
    pub async fn event_by_id(&self, id: i64) -> anyhow::Result<Option<EventRow>> {
        let row =
            sqlx::query("select id, campaign_id, session_id, kind, payload, created_at from events where id = $1")
                .bind(id)
                .fetch_optional(&self.pool)
                .await?;
        row.as_ref().map(event_from_row).transpose()
    }

    /// On PostgreSQL, a connection listening to the events every daemon
    /// records ("campaign_id id" on channel gadfly_events); None on SQLite.
    pub async fn listen_events(&self) -> anyhow::Result<Option<sqlx::postgres::PgListener>> {
        if self.backend != Backend::Postgres {
            return Ok(None);
        }
        let mut l = sqlx::postgres::PgListener::connect(&self.url).await.context("opening a LISTEN connection")?;
        l.listen(live::EVENTS_CHANNEL).await?;
        Ok(Some(l))
    }

    pub async fn events_after(&self, campaign_id: &str, after: i64, limit: i64) -> anyhow::Result<Vec<EventRow>> {
        let rows = sqlx::query(
            "select id, campaign_id, session_id, kind, payload, created_at from events
             where campaign_id = $1 and id > $2 order by id limit $3",
        )
        .bind(campaign_id)
        .bind(after)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(event_from_row).collect()
    }

    /// The latest `limit` events of one kind, newest first.
    pub async fn recent_events(&self, campaign_id: &str, kind: &str, limit: i64) -> anyhow::Result<Vec<EventRow>> {
        let rows = sqlx::query(RECENT_EVENTS).bind(campaign_id).bind(kind).bind(limit).fetch_all(&self.pool).await?;
        rows.iter().map(event_from_row).collect()
    }

    /// The last `n` events of a campaign, oldest first.
    pub async fn tail_events(&self, campaign_id: &str, n: i64) -> anyhow::Result<Vec<EventRow>> {
        let row = sqlx::query("select coalesce(max(id), 0) from events where campaign_id = $1")
            .bind(campaign_id)
            .fetch_one(&self.pool)
            .await?;
        let max: i64 = row.try_get(0)?;
        let floor = sqlx::query(
            "select coalesce(min(id), 0) from (select id from events where campaign_id = $1 and id <= $2 order by id desc limit $3) t",
        )
        .bind(campaign_id)
        .bind(max)
        .bind(n)
        .fetch_one(&self.pool)
        .await?;
        let from: i64 = floor.try_get(0)?;
        self.events_after(campaign_id, from.saturating_sub(1), n).await
    }

    pub async fn count_events(&self, campaign_id: &str) -> anyhow::Result<i64> {
        let row = sqlx::query("select count(*) from events where campaign_id = $1")
            .bind(campaign_id)
            .fetch_one(&self.pool)
            .await?;
        Ok(row.try_get::<i64, _>(0)?)
    }

    /// The stored evaluation of a tree, as its JSON body, with its id.
    pub async fn find_evaluation(&self, campaign_id: &str, tree: &str) -> anyhow::Result<Option<(i64, String)>> {
        let row = sqlx::query("select id, body from evaluations where campaign_id = $1 and tree = $2")
            .bind(campaign_id)
            .bind(tree)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r| Ok((r.try_get("id")?, r.try_get("body")?))).transpose()
    }

    pub async fn insert_evaluation(&self, campaign_id: &str, e: &crate::harness::Evaluation) -> anyhow::Result<i64> {
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
    pub async fn replace_evaluation_body(&self, id: i64, e: &crate::harness::Evaluation) -> anyhow::Result<()> {
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

    /// The newest evaluation of a campaign, as (id, JSON body).
    pub async fn latest_evaluation(&self, campaign_id: &str) -> anyhow::Result<Option<(i64, String)>> {
        let row = sqlx::query("select id, body from evaluations where campaign_id = $1 order by id desc limit 1")
            .bind(campaign_id)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r| Ok((r.try_get("id")?, r.try_get("body")?))).transpose()
    }

    /// Evaluations of a campaign, oldest first, as (id, JSON body).
    pub async fn list_evaluations(&self, campaign_id: &str) -> anyhow::Result<Vec<(i64, String)>> {
        let rows = sqlx::query("select id, body from evaluations where campaign_id = $1 order by id")
            .bind(campaign_id)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(|r| Ok((r.try_get("id")?, r.try_get("body")?))).collect()
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
            "select id, campaign_id, source, bank_id, moment, text, status, created_at, delivered_at, delivered_via
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

    /// What learned yield is computed from: every delivered bank question
    /// and every evaluation's objective, over all campaigns.
    pub async fn yield_history(
        &self,
    ) -> anyhow::Result<(Vec<crate::bank::learn::Asked>, Vec<crate::bank::learn::EvalPoint>)> {
        // The latest YIELD_QUESTIONS questions and YIELD_EVALUATIONS
        // evaluations: what a selection costs stays bounded however long
        // the campaigns run (the daemon picks a question at every moment).
        let qs = sqlx::query(
            "select id, campaign_id, bank_id, delivered_at from (
                 select id, campaign_id, bank_id, delivered_at from questions
                 where status = 'delivered' and delivered_at is not null and bank_id is not null
                 order by id desc limit $1) latest
             order by id",
        )
        .bind(YIELD_QUESTIONS)
        .fetch_all(&self.pool)
        .await?;
        let asked = qs
            .iter()
            .map(|r| {
                Ok(crate::bank::learn::Asked {
                    question_id: r.try_get("id")?,
                    campaign_id: r.try_get("campaign_id")?,
                    bank_id: r.try_get("bank_id")?,
                    delivered_at: r.try_get("delivered_at")?,
                })
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        let es = sqlx::query(
            "select id, campaign_id, created_at, geomean from (
                 select id, campaign_id, created_at, geomean from evaluations order by id desc limit $1) latest
             order by id",
        )
        .bind(YIELD_EVALUATIONS)
        .fetch_all(&self.pool)
        .await?;
        let evals = es
            .iter()
            .map(|r| {
                Ok(crate::bank::learn::EvalPoint {
                    id: r.try_get("id")?,
                    campaign_id: r.try_get("campaign_id")?,
                    created_at: r.try_get("created_at")?,
                    geomean: r.try_get("geomean")?,
                })
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        Ok((asked, evals))
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
                 (select count(*) from questions waiting
                  where waiting.campaign_id = $4 and waiting.status = 'queued' and waiting.id <> questions.id) as others_waiting"
        )
    };
}
use claim_next_sql;

/// How often each bank id (and none: a person's question) was asked in a
/// campaign, by latest ask; read from the index on (campaign_id, bank_id).
const ASKED_BY_BANK_ID: &str =
    "select bank_id, count(*), max(id) from questions where campaign_id = $1 group by bank_id order by max(id)";

/// How long a SQLite connection waits for another's write lock.
const SQLITE_BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// A SQLite connection's page cache, in SQLite's unit (negative: KiB).
const SQLITE_CACHE_SIZE: &str = "-512";

/// The database file a SQLite URL names.
/// Below this much free space on the database's disk, /health says the
/// store cannot write.
const LOW_DISK: u64 = 256 * 1024;

fn sqlite_file(url: &str) -> anyhow::Result<std::path::PathBuf> {
    Ok(sqlx::sqlite::SqliteConnectOptions::from_str(url)?.get_filename().to_path_buf())
}

/// The event writer's own SQLite connection (`group_commit`), with the
/// pragmas the pool's connections get (see `Store::connect`). The file
/// exists and is in WAL mode already.
pub(crate) fn open_sqlite_writer(path: &std::path::Path) -> anyhow::Result<rusqlite::Connection> {
    let open = || -> rusqlite::Result<rusqlite::Connection> {
        let conn = rusqlite::Connection::open_with_flags(
            path,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.busy_timeout(SQLITE_BUSY_TIMEOUT)?;
        conn.pragma_update(None, "synchronous", "full")?;
        conn.pragma_update(None, "cache_size", SQLITE_CACHE_SIZE)?;
        conn.pragma_update(None, "foreign_keys", "on")?;
        Ok(conn)
    };
    open().with_context(|| format!("opening the event writer's connection to {}", path.display()))
}

/// A pooled PostgreSQL connection idle this long is pinged before use.
const PING_AFTER_IDLE: Duration = Duration::from_secs(5);

/// How much history the learned yield of bank entries reads: the latest
/// questions asked (with a bank id, across campaigns) and evaluations.
pub const YIELD_QUESTIONS: i64 = 2000;
pub const YIELD_EVALUATIONS: i64 = 20_000;

const CAMPAIGN_SELECT: &str =
    "select id, name, mode, status, spec_path, spec_toml, spec_json, protected_json, created_at from campaigns";
const STOP_SELECT: &str = "select id, campaign_id, event_id, session_id, agent, claim, stop_hook_active, evaluation_id, holds, decision, reason, question_id, created_at from stop_attempts";

/// The row a write's `returning` clause gave (none: no row written),
/// read to the statement's end.
///
/// Writes read `returning` rows with this, never with `fetch_one` or
/// `fetch_optional`. On SQLite those stop the statement at its first row,
/// and a write outside a transaction then commits when sqlx resets the
/// statement, which ignores the outcome: a commit that failed (a deferred
/// constraint, a full disk) read as stored, and the caller got the id of
/// a row that was rolled back (`an_event_whose_commit_fails_is_an_error_not_an_id`
/// shows it). Stepping the statement to its end commits there and reports
/// the failure. Hook events, the hot path, skip `returning` on SQLite
/// altogether (see `group_commit`).
pub(crate) async fn write_returning<'q, 'e, 'c: 'e, E>(
    query: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>>,
    conn: E,
) -> anyhow::Result<Option<sqlx::any::AnyRow>>
where
    'q: 'e,
    E: 'e + sqlx::Executor<'c, Database = sqlx::Any>,
{
    let mut rows = query.fetch_all(conn).await?;
    if rows.len() > 1 {
        bail!("a write meant to return one row returned {}", rows.len());
    }
    Ok(rows.pop())
}

/// `write_returning` for a write that always returns its row.
pub(crate) async fn write_returning_one<'q, 'e, 'c: 'e, E>(
    query: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>>,
    conn: E,
) -> anyhow::Result<sqlx::any::AnyRow>
where
    'q: 'e,
    E: 'e + sqlx::Executor<'c, Database = sqlx::Any>,
{
    write_returning(query, conn).await?.context("the write returned no row")
}

fn event_from_row(r: &sqlx::any::AnyRow) -> anyhow::Result<EventRow> {
    let payload: String = r.try_get("payload")?;
    Ok(EventRow {
        id: r.try_get("id")?,
        campaign_id: r.try_get("campaign_id")?,
        session_id: r.try_get("session_id")?,
        kind: r.try_get("kind")?,
        payload: serde_json::from_str(&payload).unwrap_or(serde_json::Value::String(payload)),
        created_at: r.try_get("created_at")?,
    })
}

fn campaign_from_row(r: &sqlx::any::AnyRow) -> anyhow::Result<CampaignRow> {
    Ok(<CampaignRow as sqlx::FromRow<'_, sqlx::any::AnyRow>>::from_row(r)?)
}

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

/// Hides a password in a database URL.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            let creds = &url[s + 3..at];
            match creds.find(':') {
                Some(c) => format!("{}{}:***{}", &url[..s + 3], &creds[..c], &url[at..]),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[tokio::test]
    async fn a_campaign_and_its_pristine_files_are_stored_together_or_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::connect(&format!("sqlite:{}", dir.path().join("t.db").display())).await.unwrap();
        let file = |path: &str| crate::snapshot::PristineFile {
            path: path.into(),
            sha256: "00".into(),
            mode: 0o644,
            content: b"x".to_vec(),
        };
        // The second file fails (the same path twice): the campaign row goes too.
        let err = store.insert_campaign_with_pristine(&test_campaign("c1"), &[file("h.sh"), file("h.sh")]).await;
        assert!(err.is_err());
        assert!(store.get_campaign("c1").await.unwrap().is_none(), "a campaign without its pristine files");
        store.insert_campaign_with_pristine(&test_campaign("c1"), &[file("h.sh"), file("r.c")]).await.unwrap();
        assert_eq!(store.list_pristine("c1").await.unwrap().len(), 2);
    }

    /// A campaign row for the store's own tests.
    pub(crate) fn test_campaign(id: &str) -> CampaignRow {
        CampaignRow {
            id: id.into(),
            name: "n".into(),
            mode: "autonomous".into(),
            status: "active".into(),
            spec_path: "/x".into(),
            spec_toml: "".into(),
            spec_json: "{}".into(),
            protected_json: "{}".into(),
            created_at: now(),
        }
    }

    #[test]
    fn redacts_passwords() {
        assert_eq!(redact("postgres://u:secret@h/db"), "postgres://u:***@h/db");
        assert_eq!(redact("sqlite:/x/y.db"), "sqlite:/x/y.db");
    }

    /// Makes the commit of every row of `table` matching `when` fail: a
    /// trigger adds a row that breaks a deferred foreign key, which
    /// SQLite checks only at commit.
    pub(crate) async fn fail_commits_of(store: &Store, table: &str, when: &str) {
        for ddl in [
            "create table if not exists commit_parent (id integer primary key)".to_string(),
            "create table if not exists commit_child (parent integer references commit_parent(id) deferrable initially deferred)".to_string(),
            format!(
                "create trigger doomed_at_commit_{table} after insert on {table} when {when}
                 begin insert into commit_child values (999); end"
            ),
        ] {
            sqlx::query(&ddl).execute(&store.pool).await.unwrap();
        }
    }

    /// A question whose commit fails (a deferred foreign key, checked only
    /// at commit) is an error, not an id: `write_returning` steps the
    /// statement to its end. Read with `fetch_one`, the caller got the id
    /// of a question that was rolled back.
    #[tokio::test]
    async fn a_write_whose_commit_fails_is_an_error_not_an_id() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::connect(&format!("sqlite:{}", dir.path().join("g.db").display())).await.unwrap();
        store.insert_campaign(&test_campaign("c1")).await.unwrap();
        fail_commits_of(&store, "questions", "new.text = 'doomed'").await;
        let answer = store.queue_question("c1", "human", None, None, "doomed").await;
        assert!(answer.is_err(), "a rolled-back question was answered {answer:?}");
        assert!(store.list_questions("c1", false).await.unwrap().is_empty(), "the failed question is not stored");
        store.queue_question("c1", "human", None, None, "fine").await.unwrap();
        assert_eq!(store.list_questions("c1", false).await.unwrap().len(), 1);
        store.close().await;
    }

    /// The event writer's own connection (rusqlite, not the pool) commits
    /// with the pool's guarantees: FULL sync, foreign keys checked, the
    /// same busy timeout and page cache, on the WAL file.
    #[tokio::test]
    async fn the_event_writers_connection_has_the_stores_pragmas() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.db");
        let store = Store::connect(&format!("sqlite:{}", path.display())).await.unwrap();
        let conn = open_sqlite_writer(&path).unwrap();
        let pragma = |name: &str| -> String {
            conn.query_row(&format!("pragma {name}"), [], |r| r.get::<_, rusqlite::types::Value>(0))
                .map(|v| match v {
                    rusqlite::types::Value::Integer(i) => i.to_string(),
                    rusqlite::types::Value::Text(t) => t,
                    other => format!("{other:?}"),
                })
                .unwrap()
        };
        assert_eq!(pragma("journal_mode"), "wal");
        assert_eq!(pragma("synchronous"), "2", "FULL");
        assert_eq!(pragma("foreign_keys"), "1");
        assert_eq!(pragma("busy_timeout"), SQLITE_BUSY_TIMEOUT.as_millis().to_string());
        assert_eq!(pragma("cache_size"), SQLITE_CACHE_SIZE);
        drop(conn);
        store.close().await;
        let missing = open_sqlite_writer(&dir.path().join("absent").join("g.db")).unwrap_err();
        assert!(format!("{missing:#}").contains("absent/g.db"), "{missing:#}");
    }

    #[tokio::test]
    async fn sqlite_round_trip_with_idempotent_events() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite:{}", dir.path().join("g.db").display());
        let store = Store::connect(&url).await.unwrap();
        let c = test_campaign("c1");
        store.insert_campaign(&c).await.unwrap();
        let p = serde_json::json!({"a": 1});
        let (a, fresh) = store.append_event("c1", Some("s"), "hook.stop", Some("k1"), &p, &now()).await.unwrap();
        assert!(fresh);
        let (b, fresh) = store.append_event("c1", Some("s"), "hook.stop", Some("k1"), &p, &now()).await.unwrap();
        assert_eq!((a, fresh), (b, false));
        store.append_event("c1", None, "note", None, &p, &now()).await.unwrap();
        store.append_event("c1", None, "note", None, &p, &now()).await.unwrap();
        assert_eq!(store.count_events("c1").await.unwrap(), 3);
        let mode: String = sqlx::query("pragma journal_mode").fetch_one(&store.pool).await.unwrap().try_get(0).unwrap();
        assert_eq!(mode, "wal");
        store.close().await;
        let again = Store::connect(&url).await.unwrap();
        assert_eq!(again.list_campaigns().await.unwrap().len(), 1);
        assert_eq!(again.events_after("c1", 0, 10).await.unwrap()[0].payload, p);
    }

    /// The latest events of a kind are found through the index on
    /// (campaign, kind, id), not by walking back through the campaign's
    /// events: a stop reads the hooks gadfly installed, of which a campaign
    /// has one or two among a million events.
    #[tokio::test]
    async fn the_latest_events_of_a_kind_are_a_seek_on_their_index() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::connect(&format!("sqlite:{}", dir.path().join("g.db").display())).await.unwrap();
        let sql = format!("explain query plan {RECENT_EVENTS}");
        let plan = sqlite_plan(&store, sqlx::query(&sql).bind("c1").bind("hooks.install").bind(100i64)).await;
        assert!(plan.iter().any(|p| p.contains("events_campaign_kind (campaign_id=? AND kind=?)")), "plan: {plan:?}");
        store.insert_campaign(&test_campaign("c1")).await.unwrap();
        let p = serde_json::json!({});
        for kind in ["hooks.install", "note", "note", "hooks.install", "note"] {
            store.append_event("c1", None, kind, None, &p, &now()).await.unwrap();
        }
        let ids: Vec<i64> =
            store.recent_events("c1", "hooks.install", 100).await.unwrap().iter().map(|e| e.id).collect();
        assert_eq!(ids.len(), 2);
        assert!(ids[0] > ids[1], "newest first: {ids:?}");
    }

    /// SQLite's plan for a query (`explain query plan ...`), a line per step.
    async fn sqlite_plan<'a>(
        store: &Store,
        query: sqlx::query::Query<'a, sqlx::Any, sqlx::any::AnyArguments<'a>>,
    ) -> Vec<String> {
        query.fetch_all(&store.pool).await.unwrap().iter().map(|r| r.try_get::<String, _>(3).unwrap()).collect()
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

    /// Events recorded at once are written in groups: each call gets its own
    /// id, a key sent twice in one group is stored once, and a row the
    /// database refuses (an unknown campaign) fails only its own call.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn events_recorded_at_once_are_committed_in_groups_and_a_bad_row_fails_alone() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::connect(&format!("sqlite:{}", dir.path().join("g.db").display())).await.unwrap();
        let c = test_campaign("c1");
        store.insert_campaign(&c).await.unwrap();
        let mut calls = Vec::new();
        for i in 0..200 {
            let store = store.clone();
            calls.push(tokio::spawn(async move {
                let campaign = if i == 77 { "no-such-campaign" } else { "c1" };
                // Calls 10 and 11 carry the same key: a retried hook call.
                let key = if i == 11 { "k-10".to_string() } else { format!("k-{i}") };
                store
                    .append_event(
                        campaign,
                        Some("s"),
                        "hook.post_tool_use",
                        Some(&key),
                        &serde_json::json!({"i": i}),
                        &now(),
                    )
                    .await
            }));
        }
        let mut results = Vec::new();
        for c in calls {
            results.push(c.await.unwrap());
        }
        assert!(results[77].is_err(), "the row with an unknown campaign is refused");
        let ok: Vec<(i64, bool)> =
            results.iter().enumerate().filter(|(i, _)| *i != 77).map(|(_, r)| *r.as_ref().unwrap()).collect();
        assert_eq!(ok.iter().filter(|(_, fresh)| *fresh).count(), 198, "every other row is new but one duplicate key");
        assert_eq!(results[10].as_ref().unwrap().0, results[11].as_ref().unwrap().0, "the same key, the same event");
        let mut ids: Vec<i64> = ok.iter().filter(|(_, f)| *f).map(|(id, _)| *id).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), 198, "distinct ids");
        assert_eq!(store.count_events("c1").await.unwrap(), 198);
    }
}

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
