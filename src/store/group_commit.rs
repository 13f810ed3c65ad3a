//! Group commit of single events: the events that arrive while a commit is
//! under way are written together, in one transaction, and each caller is
//! answered only once its row is committed. A hook call is still
//! acknowledged only after its event is on disk; what changes is that ten
//! sessions recording at once pay for one commit, not ten.
//!
//! There is no writer task. A caller queues its event and waits for either
//! its answer or a writer's turn (one of `writers` slots, each keeping its
//! connection between batches). A caller that gets a turn writes whatever
//! is queued, its own event among it, and answers every caller in the
//! batch. A lone session therefore writes its own event on its own task:
//! no handoff to another task and back, two wake-ups fewer per event.
//! Should the caller that writes be dropped mid-batch (its client gone),
//! the batch is finished on a task of its own, so no other caller's event
//! is lost.
//!
//! A batch that fails as a whole (one row refused, say) is written again
//! row by row, so that one bad row fails only its own call.
//!
//! On SQLite the writer keeps a connection of its own, opened through
//! rusqlite on the same SQLite library as sqlx, and writes on the calling
//! task's own thread (`on_this_thread`): no message to sqlx's SQLite
//! thread and back, whose two wake-ups per statement cost a lone session
//! more than a tenth of its rate on two cores (BENCHMARKS.md, ingestion).
//! Each insert is stepped to its end, so a commit that fails is an error
//! (see `write_returning`), and gives the rows changed and the new rowid
//! without a `returning` clause.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use anyhow::anyhow;
use std::path::PathBuf;

use sqlx::pool::PoolConnection;
use sqlx::{Any, AnyConnection, AnyPool, Row};
use tokio::sync::{oneshot, Mutex, OwnedSemaphorePermit, Semaphore};

use super::live::{Announced, Announcer};
use super::write_returning;

/// One event waiting to be written.
pub struct NewEvent {
    pub campaign_id: String,
    pub session_id: Option<String>,
    pub kind: String,
    pub key: Option<String>,
    pub payload: String,
    pub created_at: String,
}

type Reply = oneshot::Sender<anyhow::Result<(i64, bool)>>;

/// The insert of one event; a key already stored inserts nothing. Both
/// databases read `$1` to `$6` as the parameters in order.
macro_rules! insert_event {
    () => {
        "insert into events (campaign_id, session_id, kind, idempotency_key, payload, created_at)
         values ($1, $2, $3, $4, $5, $6)
         on conflict (idempotency_key) do nothing"
    };
}
const INSERT_EVENT: &str = insert_event!();
pub(super) const INSERT_EVENT_RETURNING_ID: &str = concat!(insert_event!(), " returning id");

/// The id of the event stored under a key.
const STORED_ID: &str = "select id from events where idempotency_key = $1";

/// At most this many events go in one transaction.
const MAX_BATCH: usize = 256;

/// Queues events and gives callers their turn to write; cloning shares it.
#[derive(Clone)]
pub struct GroupCommit {
    inner: Arc<Inner>,
}

/// Where the event writers' connections come from.
pub enum WriterSource {
    /// PostgreSQL: connections of the store's pool.
    Postgres(AnyPool),
    /// SQLite: connections of its own to this database file, opened with
    /// the store's pragmas (`store::open_sqlite_writer`).
    Sqlite(PathBuf),
}

/// A connection an event writer keeps between batches.
enum WriterConnection {
    Postgres(PoolConnection<Any>),
    Sqlite(rusqlite::Connection),
}

struct Inner {
    source: WriterSource,
    /// `closed` is set under this lock: no event is queued after it.
    queue: std::sync::Mutex<Queue>,
    /// One permit per writer slot: its holder writes a batch.
    turns: Arc<Semaphore>,
    writers: u32,
    /// Connections kept between batches (at most one per slot): no pool
    /// checkout, and no liveness ping, per batch. A connection whose
    /// batch failed is dropped, so a broken one is replaced.
    held: std::sync::Mutex<Vec<WriterConnection>>,
    /// SQLite's one writer at a time, shared with the store's other writes.
    gate: Option<Arc<Mutex<()>>>,
    announcer: Option<Announcer>,
}

#[derive(Default)]
struct Queue {
    waiting: VecDeque<(NewEvent, Reply)>,
    closed: bool,
}

/// A batch being written: if the caller writing it is dropped, the rest
/// runs on a task of its own.
struct FinishOnDrop(Option<Pin<Box<dyn Future<Output = ()> + Send>>>);

impl Drop for FinishOnDrop {
    fn drop(&mut self) {
        if let Some(rest) = self.0.take() {
            finish_elsewhere(rest);
        }
    }
}

/// Runs `rest` on a task of its own. With no runtime left (the process is
/// ending) it is dropped: the callers it would answer are gone too.
fn finish_elsewhere(rest: impl Future<Output = ()> + Send + 'static) {
    if let Ok(rt) = tokio::runtime::Handle::try_current() {
        rt.spawn(rest);
    }
}

/// A caller whose event is still queued: if it is dropped, a task of its
/// own waits for a turn and writes what is queued. Nothing is allocated
/// unless that happens.
struct TurnOnDrop<'a>(Option<&'a Arc<Inner>>);

impl Drop for TurnOnDrop<'_> {
    fn drop(&mut self) {
        if let Some(inner) = self.0.take() {
            finish_elsewhere(inner.clone().write_queued(None));
        }
    }
}

impl GroupCommit {
    /// `writers` batches may be written at once, on connections from
    /// `source`. `gate`, when given, is held for each batch.
    pub fn start(
        source: WriterSource,
        writers: usize,
        gate: Option<Arc<Mutex<()>>>,
        announcer: Option<Announcer>,
    ) -> GroupCommit {
        let writers = writers.clamp(1, 64) as u32;
        GroupCommit {
            inner: Arc::new(Inner {
                source,
                queue: Default::default(),
                turns: Arc::new(Semaphore::new(writers as usize)),
                writers,
                held: Default::default(),
                gate,
                announcer,
            }),
        }
    }

    /// Writes the events already handed over, then gives the kept
    /// connections back (a pool closes only once every connection is
    /// back). Events handed over afterwards fail.
    pub async fn close(&self) {
        self.inner.queue.lock().expect("event queue poisoned").closed = true;
        // Every batch under way ends; what is still queued is written here.
        if let Ok(all) = self.inner.turns.clone().acquire_many_owned(self.inner.writers).await {
            loop {
                let batch = self.inner.take_batch();
                if batch.is_empty() {
                    break;
                }
                let answers = self.inner.write(batch).await;
                self.inner.answer(answers);
            }
            self.inner.turns.close();
            drop(all);
        }
        let held = std::mem::take(&mut *self.inner.held.lock().expect("held connections poisoned"));
        for c in held {
            if let WriterConnection::Sqlite(c) = c {
                // The last connection to close checkpoints the WAL.
                on_this_thread(|| drop(c.close()));
            }
        }
    }

    /// Writes one event (with a key already stored: records nothing) and
    /// answers once it is committed: its id, and whether it is new.
    pub async fn append(&self, event: NewEvent) -> anyhow::Result<(i64, bool)> {
        let (reply, mut answer) = oneshot::channel();
        {
            let mut q = self.inner.queue.lock().expect("event queue poisoned");
            if q.closed {
                return Err(anyhow!("the event writer has stopped"));
            }
            q.waiting.push_back((event, reply));
        }
        // Should this caller be dropped before its event is written (its
        // client gone), a task of its own takes its turn instead.
        let mut still_queued = TurnOnDrop(Some(&self.inner));
        let turn = tokio::select! {
            biased;
            // Written in another caller's batch.
            done = &mut answer => {
                still_queued.0 = None;
                return flatten(done);
            }
            turn = self.inner.turns.clone().acquire_owned() => turn,
        };
        still_queued.0 = None;
        if let Ok(turn) = turn {
            // This caller's event is still queued, or in a batch another
            // caller is writing (which answers it): writing what is queued
            // once is enough.
            let mut work = FinishOnDrop(Some(Box::pin(self.inner.clone().write_queued(Some(turn)))));
            if let Some(w) = work.0.as_mut() {
                w.await;
            }
            work.0 = None;
        }
        // No turn: the writers closed, after writing what was queued.
        flatten(answer.await)
    }
}

fn flatten(done: Result<anyhow::Result<(i64, bool)>, oneshot::error::RecvError>) -> anyhow::Result<(i64, bool)> {
    done.map_err(|_| anyhow!("the event writer stopped before committing the event"))?
}

impl Inner {
    /// Writes one batch of what is queued, on `turn` (waiting for one when
    /// none is given; none when the writers have closed).
    async fn write_queued(self: Arc<Self>, turn: Option<OwnedSemaphorePermit>) {
        let turn = match turn {
            Some(t) => t,
            None => match self.turns.clone().acquire_owned().await {
                Ok(t) => t,
                Err(_) => return,
            },
        };
        let batch = self.take_batch();
        if !batch.is_empty() {
            let answers = self.write(batch).await;
            drop(turn);
            self.answer(answers);
        }
    }

    /// The events waiting, oldest first, at most a batch of them.
    fn take_batch(&self) -> Vec<(NewEvent, Reply)> {
        let mut q = self.queue.lock().expect("event queue poisoned");
        let n = q.waiting.len().min(MAX_BATCH);
        q.waiting.drain(..n).collect()
    }

    /// Writes a batch (row by row when it fails as a whole) on a kept
    /// connection; the answers, in the batch's order.
    async fn write(&self, batch: Vec<(NewEvent, Reply)>) -> Vec<((NewEvent, Reply), anyhow::Result<(i64, bool)>)> {
        let turn = match &self.gate {
            Some(g) => Some(g.lock().await),
            None => None,
        };
        let mut held = self.held.lock().expect("held connections poisoned").pop();
        let events: Vec<&NewEvent> = batch.iter().map(|(e, _)| e).collect();
        let results: Vec<anyhow::Result<(i64, bool)>> = match write_held(&self.source, &mut held, &events).await {
            Ok(ids) => ids.into_iter().map(Ok).collect(),
            Err(e) if events.len() == 1 => vec![Err(e)],
            Err(_) => {
                let mut r = Vec::with_capacity(events.len());
                for e in &events {
                    r.push(write_held(&self.source, &mut held, std::slice::from_ref(e)).await.map(|ids| ids[0]));
                }
                r
            }
        };
        drop(turn);
        if let Some(c) = held {
            self.held.lock().expect("held connections poisoned").push(c);
        }
        batch.into_iter().zip(results).collect()
    }

    /// Announces the new events and answers their callers.
    fn answer(&self, answers: Vec<((NewEvent, Reply), anyhow::Result<(i64, bool)>)>) {
        for ((event, reply), result) in answers {
            if let (Some(a), Ok((id, true))) = (&self.announcer, &result) {
                a.send(Announced::Event { campaign_id: event.campaign_id, id: *id });
            }
            let _ = reply.send(result);
        }
    }
}

/// Writes the batch on the writer's held connection (a new one when it
/// has none); a failure drops the connection, so a broken one is replaced.
async fn write_held(
    source: &WriterSource,
    held: &mut Option<WriterConnection>,
    batch: &[&NewEvent],
) -> anyhow::Result<Vec<(i64, bool)>> {
    let out = match source {
        WriterSource::Postgres(pool) => {
            let conn = match held {
                Some(WriterConnection::Postgres(c)) => c,
                _ => match held.insert(WriterConnection::Postgres(pool.acquire().await?)) {
                    WriterConnection::Postgres(c) => c,
                    WriterConnection::Sqlite(_) => unreachable!("just inserted"),
                },
            };
            write_together(conn, batch).await
        }
        WriterSource::Sqlite(path) => on_this_thread(|| {
            let conn = match held {
                Some(WriterConnection::Sqlite(c)) => c,
                _ => match held.insert(WriterConnection::Sqlite(super::open_sqlite_writer(path)?)) {
                    WriterConnection::Sqlite(c) => c,
                    WriterConnection::Postgres(_) => unreachable!("just inserted"),
                },
            };
            write_sqlite(conn, batch)
        }),
    };
    if out.is_err() {
        *held = None;
    }
    out
}

/// Runs SQLite's blocking work on the calling task's thread. On the
/// multi-thread runtime `block_in_place` first hands this thread's other
/// tasks to another worker, so nothing waits behind the commit; on a
/// current-thread runtime (some tests) the runtime simply waits.
fn on_this_thread<T>(work: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(work),
        _ => work(),
    }
}

/// PostgreSQL: writes the events in one statement (a single event: the
/// plain insert). Err only when the statement failed as a whole.
async fn write_together(conn: &mut AnyConnection, batch: &[&NewEvent]) -> anyhow::Result<Vec<(i64, bool)>> {
    if batch.len() > 1 {
        return write_postgres(conn, batch).await;
    }
    insert_each(conn, batch).await
}

/// SQLite: writes the events in one transaction (a single event: one
/// statement, committed by itself). Err only when the transaction failed
/// as a whole.
fn write_sqlite(conn: &mut rusqlite::Connection, batch: &[&NewEvent]) -> anyhow::Result<Vec<(i64, bool)>> {
    if let [e] = batch {
        return Ok(vec![insert_sqlite(conn, e)?]);
    }
    let tx = conn.transaction()?;
    let mut out = Vec::with_capacity(batch.len());
    for e in batch {
        out.push(insert_sqlite(&tx, e)?);
    }
    tx.commit()?;
    Ok(out)
}

/// One event on SQLite: its id and whether it is new. The statement has no
/// `returning` clause: the id is the connection's last rowid; a row
/// skipped for its key (a retried call, perhaps an earlier row of the
/// same batch) gets the stored event's id. `execute` steps the statement
/// to its end, where a statement outside a transaction commits.
fn insert_sqlite(conn: &rusqlite::Connection, e: &NewEvent) -> anyhow::Result<(i64, bool)> {
    let changed = conn.prepare_cached(INSERT_EVENT)?.execute(rusqlite::params![
        e.campaign_id,
        e.session_id,
        e.kind,
        e.key,
        e.payload,
        e.created_at
    ])?;
    if changed == 1 {
        return Ok((conn.last_insert_rowid(), true));
    }
    let id = conn.prepare_cached(STORED_ID)?.query_row([&e.key], |row| row.get(0))?;
    Ok((id, false))
}

/// One insert per event, on `conn` (a transaction or not).
async fn insert_each(conn: &mut AnyConnection, batch: &[&NewEvent]) -> anyhow::Result<Vec<(i64, bool)>> {
    let mut out = Vec::with_capacity(batch.len());
    for e in batch {
        let row = write_returning(
            sqlx::query(INSERT_EVENT_RETURNING_ID)
                .bind(&e.campaign_id)
                .bind(&e.session_id)
                .bind(&e.kind)
                .bind(&e.key)
                .bind(&e.payload)
                .bind(&e.created_at),
            &mut *conn,
        )
        .await?;
        out.push(match row {
            Some(row) => (row.try_get::<i64, _>(0)?, true),
            None => (stored_id(conn, e).await?, false),
        });
    }
    Ok(out)
}

/// The id of the event already stored under `e`'s key (a retried call,
/// perhaps an earlier row of the same batch).
async fn stored_id(conn: &mut AnyConnection, e: &NewEvent) -> anyhow::Result<i64> {
    let row = sqlx::query(STORED_ID).bind(&e.key).fetch_one(&mut *conn).await?;
    Ok(row.try_get::<i64, _>(0)?)
}

/// PostgreSQL: every row of the batch in one statement, one round trip
/// and one commit. Each row's id is drawn from the sequence inside the
/// statement, and the statement answers, in the batch's order, each row's
/// id and whether it was inserted; a row skipped for its key (a retried
/// call) gets the stored event's id.
async fn write_postgres(conn: &mut AnyConnection, batch: &[&NewEvent]) -> anyhow::Result<Vec<(i64, bool)>> {
    let mut sql = String::from(
        "with new_rows (campaign_id, session_id, kind, idempotency_key, payload, created_at, ord) as (values ",
    );
    for i in 0..batch.len() {
        let b = i * 6;
        if i > 0 {
            sql.push_str(", ");
        }
        sql.push_str(&format!("(${}, ${}, ${}, ${}, ${}, ${}, {i})", b + 1, b + 2, b + 3, b + 4, b + 5, b + 6));
    }
    // `numbered` is read twice and calls a volatile function: PostgreSQL
    // computes it once, so each row keeps the id it was given.
    sql.push_str(
        "), numbered as (
             select nextval(pg_get_serial_sequence('events', 'id')) as id, * from new_rows
         ), inserted as (
             insert into events (id, campaign_id, session_id, kind, idempotency_key, payload, created_at)
             select id, campaign_id, session_id, kind, idempotency_key, payload, created_at from numbered
             on conflict (idempotency_key) do nothing
             returning id
         )
         select n.id, (i.id is not null) as fresh from numbered n left join inserted i on i.id = n.id order by n.ord",
    );
    let mut q = sqlx::query(&sql);
    for e in batch {
        q = q.bind(&e.campaign_id).bind(&e.session_id).bind(&e.kind).bind(&e.key).bind(&e.payload).bind(&e.created_at);
    }
    let rows = q.fetch_all(&mut *conn).await?;
    if rows.len() != batch.len() {
        return Err(anyhow!("the batch insert answered {} rows for {} events", rows.len(), batch.len()));
    }
    let mut out = Vec::with_capacity(batch.len());
    for (e, row) in batch.iter().zip(rows) {
        let (id, fresh): (i64, bool) = (row.try_get(0)?, row.try_get(1)?);
        // Skipped rows: their key is stored already.
        out.push(if fresh { (id, true) } else { (stored_id(conn, e).await?, false) });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

    fn event(key: Option<&str>, i: usize) -> NewEvent {
        NewEvent {
            campaign_id: "c1".into(),
            session_id: Some("s".into()),
            kind: "hook.post_tool_use".into(),
            key: key.map(str::to_string),
            payload: format!("{{\"i\": {i}}}"),
            created_at: crate::time::now(),
        }
    }

    async fn sqlite_store(dir: &tempfile::TempDir) -> Store {
        let store = Store::connect(&format!("sqlite:{}", dir.path().join("g.db").display())).await.unwrap();
        store.insert_campaign(&crate::store::tests::test_campaign("c1")).await.unwrap();
        store
    }

    /// Many callers at once, some with the same key: every caller gets one
    /// answer, new events distinct ids, a repeated key the first one's id;
    /// events arrive in batches, so most callers never write themselves.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_appends_each_get_their_own_answer() {
        let dir = tempfile::tempdir().unwrap();
        let store = sqlite_store(&dir).await;
        let gc = store.events.clone();
        let mut calls = tokio::task::JoinSet::new();
        for i in 0..300 {
            let gc = gc.clone();
            // Keys k0..k249, and k0..k49 once more.
            let key = format!("k{}", i % 250);
            calls.spawn(async move { (key.clone(), gc.append(event(Some(&key), i)).await.unwrap()) });
        }
        let mut by_key: std::collections::HashMap<String, Vec<(i64, bool)>> = Default::default();
        while let Some(done) = calls.join_next().await {
            let (key, answer) = done.unwrap();
            by_key.entry(key).or_default().push(answer);
        }
        assert_eq!(by_key.len(), 250);
        let mut ids = std::collections::HashSet::new();
        for (key, answers) in &by_key {
            let fresh = answers.iter().filter(|(_, f)| *f).count();
            assert_eq!(fresh, 1, "{key}: exactly one call stores it: {answers:?}");
            assert!(answers.iter().all(|(id, _)| *id == answers[0].0), "{key}: one id: {answers:?}");
            assert!(ids.insert(answers[0].0), "{key}: an id of its own");
        }
        assert_eq!(store.count_events("c1").await.unwrap(), 250);
        store.close().await;
    }

    /// An event whose commit fails is an error to its caller, never an id:
    /// its answer waits for the commit. A trigger makes the commit fail
    /// (a deferred foreign key checked only then); read the first way
    /// (`fetch_optional`, see `write_returning`), sqlx ignored that
    /// failure and the caller got the id of a row that was rolled back.
    #[tokio::test]
    async fn an_event_whose_commit_fails_is_an_error_not_an_id() {
        let dir = tempfile::tempdir().unwrap();
        let store = sqlite_store(&dir).await;
        crate::store::tests::fail_commits_of(&store, "events", "new.kind = 'doomed'").await;
        let mut doomed = event(Some("doomed"), 0);
        doomed.kind = "doomed".into();
        let answer = store.events.append(doomed).await;
        assert!(answer.is_err(), "a rolled-back event was answered {answer:?}");
        assert_eq!(store.count_events("c1").await.unwrap(), 0, "the failed event is not stored");
        // The writer goes on: the next event is stored and answered.
        let (id, fresh) = store.events.append(event(Some("fine"), 1)).await.unwrap();
        assert!(fresh && id > 0);
        assert_eq!(store.count_events("c1").await.unwrap(), 1);
        store.close().await;
    }

    /// Callers dropped after handing their event over (a client gone):
    /// the one writing a batch, and those still queued behind it. Their
    /// events are written all the same, with no further call to carry
    /// them and no close, and the callers still waiting are answered.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn events_of_dropped_callers_are_still_written() {
        let dir = tempfile::tempdir().unwrap();
        let store = sqlite_store(&dir).await;
        let gc = store.events.clone();
        // Polled once, then dropped: queued, and the first one holding
        // the writer's turn mid-batch.
        for i in 0..20 {
            let _ = tokio::time::timeout(std::time::Duration::ZERO, gc.append(event(None, i))).await;
        }
        wait_for_events(&store, 20).await;
        // Dropped callers among waiting ones: every waiting one answered.
        let mut live = tokio::task::JoinSet::new();
        for i in 20..40 {
            if i % 2 == 0 {
                let _ = tokio::time::timeout(std::time::Duration::ZERO, gc.append(event(None, i))).await;
            } else {
                let gc = gc.clone();
                live.spawn(async move { gc.append(event(None, i)).await });
            }
        }
        while let Some(done) = tokio::time::timeout(std::time::Duration::from_secs(30), live.join_next())
            .await
            .expect("a waiting caller is answered")
        {
            done.unwrap().unwrap();
        }
        wait_for_events(&store, 40).await;
        store.close().await;
    }

    async fn wait_for_events(store: &Store, want: i64) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let n = store.count_events("c1").await.unwrap();
            if n == want {
                return;
            }
            assert!(n < want && std::time::Instant::now() < deadline, "{n} events written, {want} handed over");
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    /// On PostgreSQL a batch is one statement: it answers every row in the
    /// batch's order with its id, new ids in that order, and a row whose
    /// key is already stored (earlier, or by a row before it in the same
    /// batch) with the stored event's id, marked not new. The store then
    /// closes, its writers' held connections given back.
    #[tokio::test]
    async fn a_postgres_batch_answers_each_row_in_order_new_or_already_stored() {
        let Some(base) = std::env::var("GADFLY_TEST_DATABASE_URL").ok().filter(|u| u.starts_with("postgres")) else {
            eprintln!("SKIPPED: needs GADFLY_TEST_DATABASE_URL (PostgreSQL)");
            return;
        };
        use sqlx::Connection;
        let name = format!(
            "gadfly_t_gc_{}_{}",
            std::process::id(),
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
        );
        let mut admin = sqlx::PgConnection::connect(&base).await.unwrap();
        sqlx::query(&format!("create database {name}")).execute(&mut admin).await.unwrap();
        let url = format!("{}/{name}", &base[..base.rfind('/').unwrap()]);
        let store = Store::connect(&url).await.unwrap();
        store.insert_campaign(&crate::store::tests::test_campaign("c1")).await.unwrap();
        let (stored, fresh) = store
            .append_event("c1", Some("s"), "hook.post_tool_use", Some("old"), &serde_json::json!({}), "t")
            .await
            .unwrap();
        assert!(fresh);
        let rows =
            [event(Some("a"), 0), event(Some("b"), 1), event(Some("a"), 2), event(Some("old"), 3), event(None, 4)];
        let batch: Vec<&NewEvent> = rows.iter().collect();
        let mut conn = store.pool.acquire().await.unwrap();
        let out = write_together(&mut conn, &batch).await.unwrap();
        let fresh: Vec<bool> = out.iter().map(|(_, f)| *f).collect();
        assert_eq!(fresh, [true, true, false, false, true], "{out:?}");
        assert_eq!(out[2].0, out[0].0, "a key twice in one batch: the first row's event");
        assert_eq!(out[3].0, stored, "a key stored before: that event");
        assert!(
            stored < out[0].0 && out[0].0 < out[1].0 && out[1].0 < out[4].0,
            "new ids in the batch's order: {out:?}"
        );
        assert_eq!(store.count_events("c1").await.unwrap(), 4);
        drop(conn);
        // The event writers hold their connections between batches: a
        // close that did not stop them first waited for them for ever.
        tokio::time::timeout(std::time::Duration::from_secs(30), store.close())
            .await
            .expect("the store closes once its event writers stop");
        let _ = sqlx::query(&format!("drop database if exists {name} with (force)")).execute(&mut admin).await;
    }
}
