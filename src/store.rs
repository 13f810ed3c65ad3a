//! Persistence: the only module that writes SQL. SQLite (WAL, FULL sync)
//! in the data dir by default; PostgreSQL when the URL says so. One code
//! path through sqlx's `Any` driver with portable SQL; the migrations are
//! kept per backend in migrations/sqlite and migrations/postgres.
//!
//! # Stored JSON bodies: decoded here, once
//!
//! Some columns hold JSON text: an evaluation's `body` (table
//! `evaluations`), a job's `evaluation_json` and `tags_json`
//! (`eval_jobs`), a campaign's `spec_json` and `protected_json`
//! (`campaigns`), a `hooks.install` event's payload (`events`). The store
//! decodes them and hands out types
//! ([`Evaluation`](crate::evaluation::Evaluation),
//! [`CampaignSpec`](crate::campaign::CampaignSpec), the protected map, the
//! tags, [`HooksInstall`](crate::events::HooksInstall)); no caller parses
//! them. (Other events' payloads are handed out as JSON values,
//! [`EventRow::payload`], a payload that is not JSON as its text.) One
//! policy for a body that does not decode:
//!
//! - **Reading one row, it is an error**: [`StoreError::Corrupt`], naming
//!   the table, the row id and serde's message (`evaluations row 7 does
//!   not decode (body: ...)`); never a silent default. Callers may look
//!   for it with `downcast_ref::<StoreError>()`; these do, on purpose, as
//!   the code did before the store decoded, and say so where they do: an
//!   ungated stop records an unreadable latest evaluation as failing, with
//!   its id (`app/hooks.rs`, `record_ungated`), and the campaign pages
//!   (`api/views.rs`) show a campaign whose latest evaluation is
//!   unreadable as having none, and one whose spec is unreadable with no
//!   agent, through [`Store::skip_corrupt`] (warned about as below).
//! - **Scanning a list, the row is skipped** and the scan goes on, as it
//!   always did ([`Store::list_evaluations`] for the moment detectors, the
//!   beam, the audit and `GET /campaigns/{id}/evaluations`;
//!   [`Store::recent_hook_installs`] for the tamper check; the queued jobs
//!   a worker may claim, whose tags it reads): one row that
//!   does not decode must not hide the others. It is never silent:
//!   `tracing::warn!` names the table, the row and the message, once per
//!   row and store (not at every scan).

use std::str::FromStr;
use std::time::Duration;

use anyhow::{bail, Context};
use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::AnyPool;

use crate::config::redact;

mod answers;
mod asked;
mod beam;
mod campaigns;
mod evaluations;
mod events;
mod group_commit;
mod jobs;
mod leases;
pub mod live;
mod questions;
mod runs;
mod stops;
pub use answers::{tree_of, AnswerRow};
pub use beam::FamilyRow;
pub use campaigns::CampaignRow;
pub use evaluations::SeriesPoint;
pub use events::EventRow;
pub use jobs::{tags_match, ClaimedJob, JobState};
pub use questions::{QuestionRow, YIELD_EVALUATIONS, YIELD_QUESTIONS};
pub use runs::RunRow;
pub use stops::{NewStopAttempt, StopAttemptRow};

/// What the store reports besides the database's own errors (carried in
/// an `anyhow::Error`; see the policy at the top of this module).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// A stored JSON body that does not decode to its type: its table,
    /// its row's id, and the column with serde's message.
    #[error("{table} row {id} does not decode ({message})")]
    Corrupt { table: &'static str, id: String, message: String },
}

/// Decodes the JSON text of `table`.`column` in the row `id`; an error
/// names the three and serde's message.
pub(crate) fn decode<T: serde::de::DeserializeOwned>(
    table: &'static str,
    column: &str,
    id: impl std::fmt::Display,
    text: &str,
) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt {
        table,
        id: id.to_string(),
        message: format!("{column}: {e}"),
    })
}

static SQLITE_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("migrations/sqlite");
static POSTGRES_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("migrations/postgres");

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
    /// The rows skipped because their body does not decode, each warned
    /// about once (see the policy at the top of this module).
    skipped: std::sync::Arc<std::sync::Mutex<std::collections::HashSet<(&'static str, String)>>>,
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
        } else {
            reach_postgres(url).await?;
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
            skipped: Default::default(),
        })
    }

    /// A list scan's skip of a row that does not decode: warned about
    /// once per row (see the policy at the top of this module).
    fn warn_skipped(&self, e: &StoreError) {
        let StoreError::Corrupt { table, id, message } = e;
        if self.skipped.lock().expect("skipped poisoned").insert((*table, id.clone())) {
            tracing::warn!(table = *table, id = %id, error = %message, "a stored row does not decode: skipped");
        }
    }

    /// For a list scan: the row's body decoded, or none (the row skipped,
    /// warned about once).
    pub(crate) fn decode_or_skip<T: serde::de::DeserializeOwned>(
        &self,
        table: &'static str,
        column: &str,
        id: impl std::fmt::Display,
        text: &str,
    ) -> Option<T> {
        decode(table, column, id, text).map_err(|e| self.warn_skipped(&e)).ok()
    }

    /// A one-row read whose caller skips a row that does not decode:
    /// [`StoreError::Corrupt`] becomes none (warned about once); other
    /// errors stay errors.
    pub fn skip_corrupt<T>(&self, read: anyhow::Result<Option<T>>) -> anyhow::Result<Option<T>> {
        match read {
            Err(e) => match e.downcast_ref::<StoreError>() {
                Some(corrupt) => {
                    self.warn_skipped(corrupt);
                    Ok(None)
                }
                None => Err(e),
            },
            ok => ok,
        }
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
        // The announcements of the last events written, then its task ends.
        if let Some(a) = &self.announcer {
            a.close().await;
        }
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
}

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

/// How long the first PostgreSQL connection may take before startup gives up.
const FIRST_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Opens one PostgreSQL connection before the pool, within
/// [`FIRST_CONNECT_TIMEOUT`]: a server that is down, a host name that does
/// not resolve, a refused login or a missing database fails startup at once
/// with where, why and what to do, not after the pool's 30 s with "pool
/// timed out".
async fn reach_postgres(url: &str) -> anyhow::Result<()> {
    use sqlx::{ConnectOptions, Connection};
    let opts = sqlx::postgres::PgConnectOptions::from_str(url)
        .with_context(|| format!("reading the database URL {}", redact(url)))?;
    let (host, port) = (opts.get_host().to_string(), opts.get_port());
    let cause = match tokio::time::timeout(FIRST_CONNECT_TIMEOUT, opts.connect()).await {
        Ok(Ok(conn)) => {
            let _ = conn.close().await;
            return Ok(());
        }
        Ok(Err(e)) => why_unreachable(&e, &host, opts.get_database().unwrap_or("(the user's name)")),
        Err(_) => format!(
            "no answer within {} s (a firewall dropping the packets, or a server too busy to answer); check that \
             PostgreSQL runs there and that this host may reach it",
            FIRST_CONNECT_TIMEOUT.as_secs()
        ),
    };
    bail!("cannot reach PostgreSQL at {host}:{port} ({}): {cause}", redact(url))
}

/// What went wrong with a first PostgreSQL connection, and what to do.
fn why_unreachable(e: &sqlx::Error, host: &str, database: &str) -> String {
    let fix_url = "fix the database URL (`--database-url` or GADFLY_DATABASE_URL)";
    match e {
        sqlx::Error::Io(io) if io.kind() == std::io::ErrorKind::ConnectionRefused => format!(
            "connection refused: nothing listens there; start PostgreSQL, or {fix_url} to name the host and port \
             where it listens"
        ),
        sqlx::Error::Io(io) if io.to_string().contains("lookup address") || io.to_string().contains("resolve") => {
            format!("the host name `{host}` does not resolve ({io}); {fix_url}")
        }
        sqlx::Error::Database(db) if db.code().is_some_and(|c| c.starts_with("28")) => format!(
            "the server refused the login ({}); {fix_url} (user and password), or let this user in \
             (pg_hba.conf)",
            db.message()
        ),
        sqlx::Error::Database(db) if db.code().as_deref() == Some("3D000") => format!(
            "the database `{database}` does not exist ({}); create it (`createdb {database}`), or {fix_url} to \
             name one that exists",
            db.message()
        ),
        other => format!("{other}; check that PostgreSQL runs there and that the database URL is right"),
    }
}

/// A pooled PostgreSQL connection idle this long is pinged before use.
const PING_AFTER_IDLE: Duration = Duration::from_secs(5);

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

#[cfg(test)]
pub(crate) mod tests {
    use sqlx::Row;

    use super::*;
    use crate::time::now;

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
            archived_at: None,
        }
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

    /// An evaluation of `tree` to store.
    pub(crate) fn test_evaluation(tree: &str) -> crate::evaluation::Evaluation {
        crate::evaluation::Evaluation {
            id: None,
            tree: tree.into(),
            verdict: crate::predicate::Verdict {
                holds: true,
                scenarios: vec![],
                geomean_speedup: Some(1.5),
                geomean_interval: None,
                geomean_compare_speedup: None,
                worst_scenario: None,
                worst_speedup: None,
                failures: vec![],
                failing_count: 0,
                runs: 1,
            },
            build: None,
            run: None,
            violations: vec![],
            duration_ms: 1,
            created_at: now(),
            cached: false,
            origin: Default::default(),
        }
    }

    /// The store's one policy for a stored body that does not decode: read
    /// alone, it is an error naming the table, the row and serde's message;
    /// in a list scan, the row is skipped (warned about once) and the scan
    /// goes on.
    #[tokio::test]
    async fn a_stored_body_that_does_not_decode_is_an_error_naming_its_row_and_lists_skip_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::connect(&format!("sqlite:{}", dir.path().join("g.db").display())).await.unwrap();
        let corrupt = |e: anyhow::Error| -> (String, String, String) {
            match e.downcast_ref::<StoreError>() {
                Some(StoreError::Corrupt { table, id, message }) => (table.to_string(), id.clone(), message.clone()),
                None => panic!("not a Corrupt error: {e:#}"),
            }
        };
        let set = |sql: &str, text: &str, id: String| {
            let (sql, text) = (sql.to_string(), text.to_string());
            let pool = store.pool.clone();
            async move {
                let done = sqlx::query(&sql).bind(text).bind(id).execute(&pool).await.unwrap();
                assert_eq!(done.rows_affected(), 1, "{sql}");
            }
        };

        // Evaluations: each read alone decodes, or names its row.
        store.insert_campaign(&test_campaign("c1")).await.unwrap();
        let mut ids = Vec::new();
        for tree in ["t1", "t2", "t3"] {
            ids.push(store.insert_evaluation("c1", &test_evaluation(tree)).await.unwrap());
        }
        set("update evaluations set body = $1 where cast(id as text) = $2", r#"{"tree": 1}"#, ids[1].to_string()).await;
        let found = store.find_evaluation("c1", "t1").await.unwrap().unwrap();
        assert_eq!((found.id, found.tree.as_str(), found.verdict.geomean_speedup), (Some(ids[0]), "t1", Some(1.5)));
        let e = store.find_evaluation("c1", "t2").await.unwrap_err();
        let (table, id, message) = corrupt(e);
        assert_eq!((table.as_str(), id), ("evaluations", ids[1].to_string()));
        assert!(message.starts_with("body: ") && message.contains("invalid type"), "{message}");
        let shown = format!("{:#}", store.find_evaluation("c1", "t2").await.unwrap_err());
        assert!(shown.contains(&format!("evaluations row {} does not decode (body: ", ids[1])), "{shown}");
        // The list scan skips it and keeps going, warned about once.
        let listed: Vec<Option<i64>> = store.list_evaluations("c1").await.unwrap().iter().map(|e| e.id).collect();
        assert_eq!(listed, vec![Some(ids[0]), Some(ids[2])]);
        assert_eq!(store.list_evaluations("c1").await.unwrap().len(), 2);
        assert_eq!(
            store.skipped.lock().unwrap().iter().cloned().collect::<Vec<_>>(),
            vec![("evaluations", ids[1].to_string())],
            "one warning for the row, however often it is scanned"
        );
        assert_eq!(store.latest_evaluation("c1").await.unwrap().unwrap().id, Some(ids[2]));
        set("update evaluations set body = $1 where cast(id as text) = $2", "not json", ids[2].to_string()).await;
        let (table, id, _) = corrupt(store.latest_evaluation("c1").await.unwrap_err());
        assert_eq!((table.as_str(), id), ("evaluations", ids[2].to_string()));
        // A caller that shows an unreadable row as none says so explicitly.
        assert!(store.skip_corrupt(store.latest_evaluation("c1").await).unwrap().is_none());
        assert_eq!(store.list_evaluations("c1").await.unwrap().len(), 1);

        // A campaign's spec and protected hashes.
        let ws = tempfile::tempdir().unwrap();
        std::process::Command::new("git").args(["init", "-q"]).current_dir(ws.path()).status().unwrap();
        let text = "name='t'\nworkspace='.'\n[harness]\nrun='x {results}'\nscenarios=['a']\n";
        let spec = crate::campaign::parse(text, "t.toml", ws.path()).unwrap();
        let protected: std::collections::BTreeMap<String, String> = [("h.sh".to_string(), "00".to_string())].into();
        let mut row = test_campaign("c2");
        row.spec_json = serde_json::to_string(&spec).unwrap();
        row.protected_json = serde_json::to_string(&protected).unwrap();
        store.insert_campaign(&row).await.unwrap();
        let (got, got_spec, got_protected) = store.get_campaign_spec("c2").await.unwrap().unwrap();
        assert_eq!((got.id.as_str(), &got_spec, &got_protected), ("c2", &spec, &protected));
        assert!(store.get_campaign_spec("absent").await.unwrap().is_none());
        set("update campaigns set protected_json = $1 where id = $2", "[]", "c2".into()).await;
        let (table, id, message) = corrupt(store.get_campaign_spec("c2").await.unwrap_err());
        assert_eq!((table.as_str(), id.as_str()), ("campaigns", "c2"));
        assert!(message.starts_with("protected_json: "), "{message}");
        // c1's spec is `{}`: no spec at all.
        let (table, id, message) = corrupt(store.get_campaign_spec("c1").await.unwrap_err());
        assert_eq!((table.as_str(), id.as_str()), ("campaigns", "c1"));
        assert!(message.starts_with("spec_json: ") && message.contains("missing field"), "{message}");
        assert!(store.get_campaign("c1").await.unwrap().is_some(), "the row itself is still read");

        // A done job's evaluation.
        let tags = std::collections::BTreeMap::new();
        let job = store.enqueue_job("c1", "t9", 1, &tags, b"tar", 2).await.unwrap();
        let claimed = store.claim_job("w", &tags, Duration::from_secs(30)).await.unwrap().unwrap();
        let done = test_evaluation("t9");
        assert!(store.finish_job(&claimed, "w", &serde_json::to_string(&done).unwrap()).await.unwrap());
        assert_eq!(store.job_state(job).await.unwrap().unwrap().evaluation, Some(done));
        set("update eval_jobs set evaluation_json = $1 where cast(id as text) = $2", "{", job.to_string()).await;
        let (table, id, message) = corrupt(store.job_state(job).await.unwrap_err());
        assert_eq!((table.as_str(), id), ("eval_jobs", job.to_string()));
        assert!(message.starts_with("evaluation_json: "), "{message}");

        // Queued jobs whose tags do not decode are claimed by no one; the scan goes on to the next.
        let unreadable = store.enqueue_job("c1", "t10", 1, &tags, b"tar", 2).await.unwrap();
        let readable = store.enqueue_job("c1", "t11", 1, &tags, b"tar", 2).await.unwrap();
        set("update eval_jobs set tags_json = $1 where cast(id as text) = $2", "gpu=h200", unreadable.to_string())
            .await;
        let next = store.claim_job("w", &tags, Duration::from_secs(30)).await.unwrap().unwrap();
        assert_eq!(next.id, readable);
        assert!(store.claim_job("w", &tags, Duration::from_secs(30)).await.unwrap().is_none());
        assert!(store.skipped.lock().unwrap().contains(&("eval_jobs", unreadable.to_string())));

        // Hook installs: the events that do not decode are skipped, the others kept, newest first.
        use crate::events::{Event, HooksInstall, Installed};
        let installed = Installed {
            kind: "attach".into(),
            settings_path: "/w/.claude/settings.json".into(),
            dir: "/w".into(),
            exe: "/bin/gadfly".into(),
            exe_sha256: "00".into(),
            fingerprint: "ff".into(),
        };
        let removed = HooksInstall::Removed { settings_path: "/w/.claude/settings.json".into() };
        let payloads = [
            Event::HooksInstall(HooksInstall::Installed(installed.clone())).body(),
            serde_json::json!({"action": "installed", "install": {"kind": "attach"}}),
            serde_json::json!({"action": "reinstalled"}),
            serde_json::json!({"action": "removed", "settings_path": 7}),
            Event::HooksInstall(removed.clone()).body(),
        ];
        let mut event_ids = Vec::new();
        for p in &payloads {
            let (id, _) =
                store.append_event("c1", None, crate::events::kind::HOOKS_INSTALL, None, p, &now()).await.unwrap();
            event_ids.push(id);
        }
        let installs = store.recent_hook_installs("c1", 100).await.unwrap();
        assert_eq!(installs, vec![removed, HooksInstall::Installed(installed)]);
        let skipped = store.skipped.lock().unwrap().clone();
        for id in &event_ids[1..4] {
            assert!(skipped.contains(&("events", id.to_string())), "event {id} skipped and named: {skipped:?}");
        }
        store.close().await;
    }

    /// SQLite's plan for a query (`explain query plan ...`), a line per step.
    pub(crate) async fn sqlite_plan<'a>(
        store: &Store,
        query: sqlx::query::Query<'a, sqlx::Any, sqlx::any::AnyArguments<'a>>,
    ) -> Vec<String> {
        query.fetch_all(&store.pool).await.unwrap().iter().map(|r| r.try_get::<String, _>(3).unwrap()).collect()
    }
}
