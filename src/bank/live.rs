//! The bank the daemon uses, reloaded when its folder changes. A reload
//! parses everything first and swaps only a bank without errors; a broken
//! edit keeps the last good bank and its error is reported (log and API).

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use notify::{RecursiveMode, Watcher};
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use super::Bank;

pub struct LiveBank {
    current: RwLock<Arc<Bank>>,
    status: RwLock<ReloadStatus>,
    dir: Option<PathBuf>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct ReloadStatus {
    pub loaded_at: String,
    pub reloads: u64,
    /// The last reload that was refused, and why; cleared by a good one.
    pub error: Option<String>,
}

impl LiveBank {
    /// The embedded bank, never reloaded.
    pub fn embedded() -> LiveBank {
        LiveBank {
            current: RwLock::new(Arc::new(super::embedded().clone())),
            status: RwLock::new(ReloadStatus { loaded_at: crate::time::now(), ..Default::default() }),
            dir: None,
        }
    }

    /// Loads `dir`; refuses to start on a bank with errors.
    pub fn from_dir(dir: &Path) -> anyhow::Result<LiveBank> {
        let bank = super::load::load_dir(dir)?;
        if !bank.problems.is_empty() {
            anyhow::bail!("the question bank in {} has errors:\n{}", dir.display(), bank.problems.join("\n"));
        }
        for w in &bank.warnings {
            tracing::warn!(warning = %w, "question bank");
        }
        Ok(LiveBank {
            current: RwLock::new(Arc::new(bank)),
            status: RwLock::new(ReloadStatus { loaded_at: crate::time::now(), ..Default::default() }),
            dir: Some(dir.to_path_buf()),
        })
    }

    pub fn get(&self) -> Arc<Bank> {
        self.current.read().expect("bank lock poisoned").clone()
    }

    pub fn status(&self) -> ReloadStatus {
        self.status.read().expect("bank status lock poisoned").clone()
    }

    /// Re-reads the folder: swaps in a clean bank, keeps the old one otherwise.
    pub fn reload(&self) -> Result<(), String> {
        let Some(dir) = &self.dir else { return Ok(()) };
        let result = super::load::load_dir(dir).map_err(|e| format!("{e:#}")).and_then(|bank| {
            if bank.problems.is_empty() {
                Ok(bank)
            } else {
                Err(bank.problems.join("\n"))
            }
        });
        let mut status = self.status.write().expect("bank status lock poisoned");
        match result {
            Ok(bank) => {
                tracing::info!(entries = bank.entries.len(), dir = %dir.display(), "question bank reloaded");
                *self.current.write().expect("bank lock poisoned") = Arc::new(bank);
                status.loaded_at = crate::time::now();
                status.reloads += 1;
                status.error = None;
                Ok(())
            }
            Err(e) => {
                tracing::error!(error = %e, "question bank edit refused; keeping the last good bank");
                status.error = Some(e.clone());
                Err(e)
            }
        }
    }

    /// Watches the folder (if any) until `token` is cancelled; changes are
    /// debounced so an editor's burst of writes is one reload.
    pub fn spawn_watcher(self: &Arc<Self>, token: CancellationToken) -> anyhow::Result<()> {
        if let Some(watch) = self.watcher(token)? {
            tokio::spawn(watch);
        }
        Ok(())
    }

    /// [`Self::spawn_watcher`], for the caller to spawn: the folder is
    /// watched from now on (an error if it cannot be), and the future
    /// reloads on changes until `token` is cancelled. None without a folder.
    pub fn watcher(
        self: &Arc<Self>,
        token: CancellationToken,
    ) -> anyhow::Result<Option<impl std::future::Future<Output = ()> + Send + 'static>> {
        let Some(dir) = self.dir.clone() else { return Ok(None) };
        let (tx, mut rx) = tokio::sync::mpsc::channel::<()>(64);
        let mut watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| match res {
            Ok(ev) if !ev.kind.is_access() => {
                let _ = tx.try_send(());
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "question bank watcher"),
        })?;
        watcher.watch(&dir, RecursiveMode::Recursive)?;
        let bank = self.clone();
        Ok(Some(async move {
            let _keep = watcher;
            loop {
                tokio::select! {
                    _ = token.cancelled() => break,
                    got = rx.recv() => {
                        if got.is_none() { break; }
                        tokio::time::sleep(Duration::from_millis(300)).await;
                        while rx.try_recv().is_ok() {}
                        let _ = bank.reload();
                    }
                }
            }
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "group = \"bound\"\n[[question]]\nid = \"bound-001\"\ntext = \"How far from the bound?\"\nmoments = [\"plateau\"]\nlevel = \"memory\"\nprovenance = \"unverified\"\nsource = \"roofline\"\nrationale = \"r\"\n";

    async fn wait_until(what: &str, pred: impl Fn() -> bool) {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !pred() {
            assert!(std::time::Instant::now() < deadline, "{what} did not happen");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    #[tokio::test]
    async fn hot_reload_takes_good_edits_and_keeps_the_last_good_bank_on_broken_ones() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("bound.toml");
        std::fs::write(&file, GOOD).unwrap();
        let bank = Arc::new(LiveBank::from_dir(dir.path()).unwrap());
        let token = CancellationToken::new();
        bank.spawn_watcher(token.clone()).unwrap();
        assert_eq!(bank.get().entries[0].text, "How far from the bound?");

        std::fs::write(&file, GOOD.replace("How far from the bound?", "What is the bound?")).unwrap();
        wait_until("the good edit", || bank.get().entries[0].text == "What is the bound?").await;
        assert_eq!(bank.status().reloads, 1);

        std::fs::write(&file, GOOD.replace("\"plateau\"", "\"plateu\"")).unwrap();
        wait_until("the broken edit's report", || bank.status().error.is_some()).await;
        let err = bank.status().error.unwrap();
        assert!(err.contains("bound.toml:5: field `question[0].moments`: unknown moment `plateu`"), "{err}");
        assert_eq!(bank.get().entries[0].text, "What is the bound?", "the last good bank stays");

        std::fs::write(&file, GOOD).unwrap();
        wait_until("the repair", || bank.status().error.is_none()).await;
        token.cancel();
    }
}
