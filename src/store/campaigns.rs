//! Campaigns (table `campaigns`) and their pristine protected files
//! (`pristine_files`), written together.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sqlx::Row;

use super::{decode, Store};
use crate::campaign::CampaignSpec;

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
    /// When the campaign was archived (hidden from the lists, nothing it
    /// recorded removed); None while it is not.
    #[serde(default)]
    #[sqlx(default)]
    pub archived_at: Option<String>,
}

impl CampaignRow {
    /// The campaign's spec, decoded from `spec_json`; an error names the
    /// row (see the policy in `store.rs`).
    pub fn spec(&self) -> anyhow::Result<CampaignSpec> {
        Ok(decode("campaigns", "spec_json", &self.id, &self.spec_json)?)
    }

    /// The protected files' hashes (path to sha256), decoded from
    /// `protected_json`; an error names the row.
    pub fn protected(&self) -> anyhow::Result<BTreeMap<String, String>> {
        Ok(decode("campaigns", "protected_json", &self.id, &self.protected_json)?)
    }
}

impl Store {
    pub async fn insert_campaign(&self, c: &CampaignRow) -> anyhow::Result<()> {
        self.insert_campaign_with_pristine(c, &[]).await
    }

    /// A new campaign and its pristine protected files, in one transaction:
    /// a daemon killed in between leaves neither (THREATS row 17: an active
    /// campaign with no pristine files ran the agent's copies).
    pub async fn insert_campaign_with_pristine(
        &self,
        c: &CampaignRow,
        files: &[crate::pristine::PristineFile],
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

    /// The campaign's pristine protected files (none for a campaign made
    /// before gadfly kept them: its evaluations only compare hashes).
    pub async fn list_pristine(&self, campaign_id: &str) -> anyhow::Result<Vec<crate::pristine::PristineFile>> {
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
                Ok(crate::pristine::PristineFile {
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

    /// Archives the campaign (`at`, a time) or unarchives it (None); only
    /// the mark changes, nothing the campaign recorded. False when no such
    /// campaign exists or it was already so.
    pub async fn set_campaign_archived(&self, id: &str, at: Option<&str>) -> anyhow::Result<bool> {
        let _turn = self.write_turn().await;
        let sql = if at.is_some() {
            "update campaigns set archived_at = $1 where id = $2 and archived_at is null"
        } else {
            "update campaigns set archived_at = $1 where id = $2 and archived_at is not null"
        };
        let done = sqlx::query(sql).bind(at).bind(id).execute(&self.pool).await?;
        Ok(done.rows_affected() == 1)
    }

    /// A campaign's row with its spec and protected hashes decoded; an
    /// error names the row when either does not decode.
    pub async fn get_campaign_spec(
        &self,
        id: &str,
    ) -> anyhow::Result<Option<(CampaignRow, CampaignSpec, BTreeMap<String, String>)>> {
        let Some(row) = self.get_campaign(id).await? else { return Ok(None) };
        let (spec, protected) = (row.spec()?, row.protected()?);
        Ok(Some((row, spec, protected)))
    }
}

const CAMPAIGN_SELECT: &str =
    "select id, name, mode, status, spec_path, spec_toml, spec_json, protected_json, created_at, \
     archived_at from campaigns";

fn campaign_from_row(r: &sqlx::any::AnyRow) -> anyhow::Result<CampaignRow> {
    Ok(<CampaignRow as sqlx::FromRow<'_, sqlx::any::AnyRow>>::from_row(r)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::tests::test_campaign;

    #[tokio::test]
    async fn a_campaign_and_its_pristine_files_are_stored_together_or_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::connect(&format!("sqlite:{}", dir.path().join("t.db").display())).await.unwrap();
        let file = |path: &str| crate::pristine::PristineFile {
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

    #[tokio::test]
    async fn archiving_marks_the_campaign_and_unarchiving_clears_the_mark_once_each() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::connect(&format!("sqlite:{}", dir.path().join("t.db").display())).await.unwrap();
        store.insert_campaign(&test_campaign("c1")).await.unwrap();
        assert_eq!(store.get_campaign("c1").await.unwrap().unwrap().archived_at, None);
        assert!(store.set_campaign_archived("c1", Some("2026-12-07T10:00:00.000Z")).await.unwrap());
        assert!(!store.set_campaign_archived("c1", Some("2026-12-07T11:00:00.000Z")).await.unwrap(), "twice");
        let row = store.get_campaign("c1").await.unwrap().unwrap();
        assert_eq!(row.archived_at.as_deref(), Some("2026-12-07T10:00:00.000Z"), "the first time is kept");
        assert_eq!(store.list_campaigns().await.unwrap()[0].archived_at, row.archived_at);
        assert!(store.set_campaign_archived("c1", None).await.unwrap());
        assert!(!store.set_campaign_archived("c1", None).await.unwrap(), "not archived any more");
        assert_eq!(store.get_campaign("c1").await.unwrap().unwrap().archived_at, None);
        assert!(!store.set_campaign_archived("nope", Some("2026-12-07T10:00:00.000Z")).await.unwrap());
    }
}
