//! Group commit of single events: the events that arrive while a commit is
//! under way are written together, in one transaction, by a writer task,
//! and each caller is answered only once its row is committed. A hook call
//! is still acknowledged only after its event is on disk; what changes is
//! that ten sessions recording at once pay for one commit, not ten.
//!
//! A batch that fails as a whole (one row refused, say) is written again
//! row by row, so that one bad row fails only its own call.

use std::sync::Arc;

use anyhow::anyhow;
use sqlx::pool::PoolConnection;
use sqlx::{Any, AnyConnection, AnyPool, Row};
use tokio::sync::{mpsc, oneshot, Mutex};

use super::live::{Announced, Announcer};

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

/// At most this many events go in one transaction.
const MAX_BATCH: usize = 256;

/// Hands events to the writer tasks; cloning shares them.
#[derive(Clone)]
pub struct GroupCommit {
    tx: mpsc::UnboundedSender<(NewEvent, Reply)>,
}

impl GroupCommit {
    /// Starts `writers` tasks writing to `pool`. `gate`, when given, is
    /// held for each batch (SQLite's one writer at a time, shared with the
    /// store's other writes).
    pub fn start(
        pool: AnyPool,
        postgres: bool,
        writers: usize,
        gate: Option<Arc<Mutex<()>>>,
        announcer: Option<Announcer>,
    ) -> GroupCommit {
        let (tx, rx) = mpsc::unbounded_channel();
        let rx = Arc::new(Mutex::new(rx));
        for _ in 0..writers.max(1) {
            tokio::spawn(write_batches(pool.clone(), postgres, rx.clone(), gate.clone(), announcer.clone()));
        }
        GroupCommit { tx }
    }

    /// Writes one event (with a key already stored: records nothing) and
    /// answers once it is committed: its id, and whether it is new.
    pub async fn append(&self, event: NewEvent) -> anyhow::Result<(i64, bool)> {
        let (reply, answer) = oneshot::channel();
        self.tx.send((event, reply)).map_err(|_| anyhow!("the event writer has stopped"))?;
        answer.await.map_err(|_| anyhow!("the event writer stopped before committing the event"))?
    }
}

async fn write_batches(
    pool: AnyPool,
    postgres: bool,
    rx: Arc<Mutex<mpsc::UnboundedReceiver<(NewEvent, Reply)>>>,
    gate: Option<Arc<Mutex<()>>>,
    announcer: Option<Announcer>,
) {
    // The writer keeps its connection between batches: no pool checkout
    // (and no liveness ping) per batch. It is dropped after a failed
    // batch, so a broken connection is replaced by a fresh one.
    let mut held: Option<PoolConnection<Any>> = None;
    loop {
        // One writer at a time takes what is waiting: the first event, then
        // whatever else has arrived meanwhile.
        let mut batch = Vec::new();
        {
            let mut rx = rx.lock().await;
            match rx.recv().await {
                Some(first) => batch.push(first),
                None => return,
            }
            while batch.len() < MAX_BATCH {
                match rx.try_recv() {
                    Ok(more) => batch.push(more),
                    Err(_) => break,
                }
            }
        }
        let turn = match &gate {
            Some(g) => Some(g.lock().await),
            None => None,
        };
        let events: Vec<&NewEvent> = batch.iter().map(|(e, _)| e).collect();
        let results: Vec<anyhow::Result<(i64, bool)>> = match write_held(&pool, &mut held, &events, postgres).await {
            Ok(ids) => ids.into_iter().map(Ok).collect(),
            Err(e) if events.len() == 1 => vec![Err(e)],
            Err(_) => {
                let mut r = Vec::with_capacity(events.len());
                for e in &events {
                    r.push(write_held(&pool, &mut held, std::slice::from_ref(e), postgres).await.map(|ids| ids[0]));
                }
                r
            }
        };
        drop(turn);
        for ((event, reply), result) in batch.into_iter().zip(results) {
            if let (Some(a), Ok((id, true))) = (&announcer, &result) {
                a.send(Announced::Event { campaign_id: event.campaign_id.clone(), id: *id });
            }
            let _ = reply.send(result);
        }
    }
}

/// `write_together` on the writer's held connection (taken from the pool
/// when it has none); a failure drops the connection.
async fn write_held(
    pool: &AnyPool,
    held: &mut Option<PoolConnection<Any>>,
    batch: &[&NewEvent],
    postgres: bool,
) -> anyhow::Result<Vec<(i64, bool)>> {
    let conn = match held {
        Some(c) => c,
        None => held.insert(pool.acquire().await?),
    };
    let out = write_together(conn, batch, postgres).await;
    if out.is_err() {
        *held = None;
    }
    out
}

/// Writes the events in one transaction (a single event: one statement,
/// committed by itself). Err only when the transaction failed as a whole.
async fn write_together(
    conn: &mut AnyConnection,
    batch: &[&NewEvent],
    postgres: bool,
) -> anyhow::Result<Vec<(i64, bool)>> {
    if postgres && batch.len() > 1 {
        return write_postgres(conn, batch).await;
    }
    if batch.len() == 1 {
        return insert_each(conn, batch).await;
    }
    let mut tx = sqlx::Connection::begin(&mut *conn).await?;
    let out = insert_each(&mut tx, batch).await?;
    tx.commit().await?;
    Ok(out)
}

/// One insert per event, on `conn` (a transaction or not).
async fn insert_each(conn: &mut AnyConnection, batch: &[&NewEvent]) -> anyhow::Result<Vec<(i64, bool)>> {
    let mut out = Vec::with_capacity(batch.len());
    for e in batch {
        let row = sqlx::query(
            "insert into events (campaign_id, session_id, kind, idempotency_key, payload, created_at)
             values ($1, $2, $3, $4, $5, $6)
             on conflict (idempotency_key) do nothing
             returning id",
        )
        .bind(&e.campaign_id)
        .bind(&e.session_id)
        .bind(&e.kind)
        .bind(&e.key)
        .bind(&e.payload)
        .bind(&e.created_at)
        .fetch_optional(&mut *conn)
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
    let row =
        sqlx::query("select id from events where idempotency_key = $1").bind(&e.key).fetch_one(&mut *conn).await?;
    Ok(row.try_get::<i64, _>(0)?)
}

/// PostgreSQL: the batch's ids drawn from the sequence first, then every
/// row in one statement (two round trips for the batch, one commit). The
/// ids the insert returns say which rows are new; a row skipped for its key
/// (a retried call) gets the stored event's id.
async fn write_postgres(conn: &mut AnyConnection, batch: &[&NewEvent]) -> anyhow::Result<Vec<(i64, bool)>> {
    let ids: Vec<i64> =
        sqlx::query("select nextval(pg_get_serial_sequence('events', 'id')) from generate_series(1, $1)")
            .bind(batch.len() as i64)
            .fetch_all(&mut *conn)
            .await?
            .iter()
            .map(|r| r.try_get::<i64, _>(0))
            .collect::<Result<_, _>>()?;
    let mut sql = String::from(
        "insert into events (id, campaign_id, session_id, kind, idempotency_key, payload, created_at) values ",
    );
    for i in 0..batch.len() {
        let b = i * 7;
        if i > 0 {
            sql.push_str(", ");
        }
        sql.push_str(&format!("(${}, ${}, ${}, ${}, ${}, ${}, ${})", b + 1, b + 2, b + 3, b + 4, b + 5, b + 6, b + 7));
    }
    sql.push_str(" on conflict (idempotency_key) do nothing returning id");
    let mut q = sqlx::query(&sql);
    for (e, id) in batch.iter().zip(&ids) {
        q = q
            .bind(*id)
            .bind(&e.campaign_id)
            .bind(&e.session_id)
            .bind(&e.kind)
            .bind(&e.key)
            .bind(&e.payload)
            .bind(&e.created_at);
    }
    let inserted: std::collections::HashSet<i64> =
        q.fetch_all(&mut *conn).await?.iter().map(|r| r.try_get::<i64, _>(0)).collect::<Result<_, _>>()?;
    let mut out = Vec::with_capacity(batch.len());
    for (e, id) in batch.iter().zip(ids) {
        // Skipped rows: their key is stored already.
        out.push(if inserted.contains(&id) { (id, true) } else { (stored_id(conn, e).await?, false) });
    }
    Ok(out)
}
