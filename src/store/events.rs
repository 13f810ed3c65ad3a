//! A campaign's event log (table `events`): appended (single events in
//! groups, see [`super::group_commit`]), read by id, after an id or by kind,
//! and listened to on PostgreSQL.

use anyhow::Context;
use serde::{Deserialize, Serialize};
use sqlx::Row;

use super::{group_commit, live, write_returning, Backend, Store};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EventRow {
    pub id: i64,
    pub campaign_id: String,
    pub session_id: Option<String>,
    pub kind: String,
    pub payload: serde_json::Value,
    pub created_at: String,
}

impl Store {
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

    /// The hook installs and removals recorded for a campaign (its latest
    /// `limit` `hooks.install` events), newest first, decoded. A list
    /// scan: an event whose payload does not decode is skipped, warned
    /// about once (see the policy in `store.rs`).
    pub async fn recent_hook_installs(
        &self,
        campaign_id: &str,
        limit: i64,
    ) -> anyhow::Result<Vec<crate::events::HooksInstall>> {
        let events = self.recent_events(campaign_id, crate::events::kind::HOOKS_INSTALL, limit).await?;
        Ok(events
            .iter()
            .filter_map(|e| {
                hooks_install_of(&e.payload).map_err(|message| self.warn_skipped(&corrupt_event(e, message))).ok()
            })
            .collect())
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
}

/// The latest events of one kind in a campaign, newest first: read at every
/// stop and every moment, a seek on the `events_campaign_kind` index.
const RECENT_EVENTS: &str = "select id, campaign_id, session_id, kind, payload, created_at from events
     where campaign_id = $1 and kind = $2 order by id desc limit $3";

/// A `hooks.install` event's payload (see `events::Event::body`) as the
/// install or removal it records.
fn hooks_install_of(payload: &serde_json::Value) -> Result<crate::events::HooksInstall, String> {
    use crate::events::HooksInstall;
    match payload["action"].as_str() {
        Some("installed") => serde_json::from_value(payload["install"].clone())
            .map(HooksInstall::Installed)
            .map_err(|e| format!("payload.install: {e}")),
        Some("removed") => match payload["settings_path"].as_str() {
            Some(p) => Ok(HooksInstall::Removed { settings_path: p.into() }),
            None => Err("payload.settings_path: not a string".into()),
        },
        other => Err(format!("payload.action: {other:?} is neither \"installed\" nor \"removed\"")),
    }
}

/// The error that names an event whose payload does not decode.
fn corrupt_event(e: &EventRow, message: String) -> super::StoreError {
    super::StoreError::Corrupt { table: "events", id: e.id.to_string(), message }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::tests::{sqlite_plan, test_campaign};
    use crate::time::now;

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
