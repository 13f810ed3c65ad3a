//! The hooks gadfly installed for a campaign: their records, and the checks
//! that they were not tampered with.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::anyhow;
use serde_json::json;

use crate::events::{self, kind, Event};

use super::{Result, Supervisor, SupervisorError};

impl Supervisor {
    /// Records the hooks gadfly wrote (or removed) for a campaign.
    pub async fn record_hook_install(
        &self,
        campaign_id: &str,
        installed: Option<&crate::agent::attach::Installed>,
        removed: Option<&Path>,
    ) -> Result<()> {
        self.campaign(campaign_id).await?;
        let install = match (installed, removed) {
            (Some(i), _) => events::HooksInstall::Installed(i.clone()),
            (None, Some(p)) => events::HooksInstall::Removed { settings_path: p.to_path_buf() },
            (None, None) => return Err(SupervisorError::Invalid("give `installed` or `removed`".into())),
        };
        self.record_event(campaign_id, None, None, Event::HooksInstall(install)).await?;
        Ok(())
    }

    /// What changed in the hooks gadfly installed for the campaign (none
    /// when nothing did, or none were recorded). `check_exe` also hashes
    /// the hook binary (done at SessionStart, not at every stop).
    pub async fn hook_install_changes(&self, campaign_id: &str, check_exe: bool) -> anyhow::Result<Vec<String>> {
        // Decoded by the store; a record that does not decode is skipped (the store warns).
        let installs = self.inner.store.recent_hook_installs(campaign_id, 100).await?;
        let mut active: BTreeMap<String, crate::agent::attach::Installed> = BTreeMap::new();
        for install in installs.into_iter().rev() {
            match install {
                events::HooksInstall::Installed(i) => {
                    active.insert(i.settings_path.display().to_string(), i);
                }
                events::HooksInstall::Removed { settings_path } => {
                    active.remove(&settings_path.display().to_string());
                }
            }
        }
        let campaign = campaign_id.to_string();
        tokio::task::spawn_blocking(move || {
            active.values().flat_map(|i| i.changes(&campaign, check_exe)).collect::<Vec<String>>()
        })
        .await
        .map_err(|e| anyhow!(e))
    }

    /// Checks gadfly's installed hooks and records a violation when they
    /// changed (once per distinct change).
    pub(super) async fn check_hook_install(
        &self,
        campaign_id: &str,
        session: Option<&str>,
        check_exe: bool,
    ) -> anyhow::Result<Vec<String>> {
        let changes = self.hook_install_changes(campaign_id, check_exe).await?;
        if !changes.is_empty() {
            let last = self.inner.store.recent_events(campaign_id, kind::VIOLATION, 1).await?;
            let same = last.first().is_some_and(|e| e.payload["changes"] == json!(changes));
            if !same {
                let violation = events::Violation::HooksChanged { changes: changes.clone() };
                self.record_event(campaign_id, session, None, Event::Violation(violation)).await?;
                tracing::warn!(campaign = %campaign_id, ?changes, "gadfly's hooks were tampered with");
            }
        }
        Ok(changes)
    }
}
