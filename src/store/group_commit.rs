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
use tokio_util::sync::CancellationToken;

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
    /// Tells the writers to write what is waiting and stop.
    closing: CancellationToken,
    writers: Arc<std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>>,
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
        let closing = CancellationToken::new();
        let writers = (0..writers.max(1))
            .map(|_| {
                tokio::spawn(write_batches(
                    pool.clone(),
                    postgres,
                    rx.clone(),
                    gate.clone(),
                    announcer.clone(),
                    closing.clone(),
                ))
            })
            .collect();
        GroupCommit { tx, closing, writers: Arc::new(std::sync::Mutex::new(writers)) }
    }

    /// Writes the events already handed over, then stops the writers and
    /// gives their connections back (a pool closes only once every
    /// connection is back). Events handed over afterwards fail.
    pub async fn close(&self) {
        self.closing.cancel();
        let writers = std::mem::take(&mut *self.writers.lock().expect("writers poisoned"));
        for w in writers {
            let _ = w.await;
        }
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
    closing: CancellationToken,
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
            let first = tokio::select! {
                first = rx.recv() => first,
                // Closing: what is still waiting is written, then the
                // writer stops and its connection goes back to the pool.
                _ = closing.cancelled() => rx.try_recv().ok(),
            };
            match first {
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
            created_at: crate::store::now(),
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
        let out = write_together(&mut conn, &batch, true).await.unwrap();
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
