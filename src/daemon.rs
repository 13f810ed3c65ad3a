//! Startup and shutdown of the daemon: bind, open and migrate the store,
//! write the token, serve until SIGINT/SIGTERM, drain: the background
//! tasks are stopped by one token and waited for, for a bounded time.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use crate::bank::live::LiveBank;
use crate::config::{self, DaemonConfig};
use crate::api::{self, AppState};
use crate::store::Store;
use crate::app::Supervisor;

pub struct Daemon {
    listener: tokio::net::TcpListener,
    state: AppState,
    addr: SocketAddr,
    config: DaemonConfig,
    /// Held for the daemon's life: one daemon per data dir (and SQLite file).
    _lock: std::fs::File,
}

impl Daemon {
    /// Binds the listener (port 0 is allowed), connects and migrates the
    /// store and writes the token file, without serving yet.
    pub async fn build(config: DaemonConfig, shutdown: CancellationToken) -> anyhow::Result<Daemon> {
        // The daemon's data (verdicts, tokens, its key) is its own: the
        // folder 0700, the files 0600, fixed at every start (THREATS 4, 22).
        for problem in crate::signing::secure_data_dir(&config.data_dir)? {
            tracing::warn!("data dir permissions: {problem}");
        }
        let lock_path = config.data_dir.join("daemon.lock");
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .with_context(|| format!("opening {}", lock_path.display()))?;
        if lock.try_lock().is_err() {
            anyhow::bail!(
                "another gadfly daemon already uses the data dir {} (its lock {} is held)",
                config.data_dir.display(),
                lock_path.display()
            );
        }
        let token = config::ensure_token(&config.data_dir)?;
        // Signs every answer to a hook call (THREATS row 5).
        let key = Arc::new(crate::signing::DaemonKey::load_or_create(&config.data_dir)?);
        let store = Store::connect(&config.database_url()).await?;
        // SQLite made the database (and its -wal/-shm) with the umask's mode.
        for problem in crate::signing::secure_data_dir(&config.data_dir)? {
            tracing::warn!("data dir permissions: {problem}");
        }
        let listener = tokio::net::TcpListener::bind(&config.listen)
            .await
            .with_context(|| format!("listening on {}", config.listen))?;
        let addr = listener.local_addr()?;
        if !addr.ip().is_loopback() && !config.allow_remote {
            anyhow::bail!(
                "refusing to listen on {addr}, which is not a loopback address: pass --allow-remote (the API still needs the token) or listen on 127.0.0.1"
            );
        }
        let bank = Arc::new(match &config.bank_dir {
            Some(dir) => LiveBank::from_dir(dir)?,
            None => LiveBank::embedded(),
        });
        let bank_watch = bank.watcher(shutdown.child_token()).context("watching the question bank folder")?;
        // Every background task from here on is the supervisor's: named,
        // tracked, and stopped by `shutdown` (see app/tasks.rs).
        let supervisor = Supervisor::new(
            store,
            &config.data_dir,
            bank,
            (format!("http://{addr}"), token.clone()),
            shutdown.clone(),
        );
        if let Some(watch) = bank_watch {
            supervisor.spawn_task("bank-watch", watch);
        }
        // Left over from a run that was killed mid-evaluation: its harness
        // processes first (they would hold the CPU or GPU), then its folders.
        let leftovers = crate::process::kill_leftovers(&config.data_dir.join("evaluations"));
        if leftovers > 0 {
            tracing::warn!(processes = leftovers, "killed harness processes left running by an earlier daemon");
        }
        let _ = std::fs::remove_dir_all(config.data_dir.join("evaluations"));
        // The text classifier trains at first use: do it now, not in a hook.
        tokio::task::spawn_blocking(|| {
            crate::moments::classifier();
        });
        // Hook calls spooled while no daemon ran, into this data dir's spool.
        let (imported, left) = crate::app::import_spool(&supervisor, &config.data_dir.join("spool")).await;
        if imported + left > 0 {
            tracing::info!(imported, left, "spooled hook calls replayed into the store");
        }
        let state = AppState {
            supervisor,
            token,
            shutdown,
            allow_remote: config.allow_remote,
            key,
            login_codes: Default::default(),
        };
        Ok(Daemon { listener, state, addr, config, _lock: lock })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn token(&self) -> &str {
        &self.state.token
    }

    /// A one-time link that logs a browser into the console.
    pub fn login_link(&self) -> String {
        format!("{}/login?code={}", self.url(), self.state.login_codes.mint())
    }

    pub fn supervisor(&self) -> Supervisor {
        self.state.supervisor.clone()
    }

    /// Serves until the shutdown token is cancelled, then drains.
    pub async fn run_until_stopped(self) -> anyhow::Result<()> {
        let info = serde_json::json!({"url": self.url(), "pid": std::process::id()});
        let info_path = self.config.data_dir.join("daemon.json");
        std::fs::write(&info_path, info.to_string()).with_context(|| format!("writing {}", info_path.display()))?;
        tracing::info!(url = %self.url(), data_dir = %self.config.data_dir.display(), database = %crate::config::redact(&self.config.database_url()), "gadfly daemon serving");
        let shutdown = self.state.shutdown.clone();
        let store = self.state.supervisor.store().clone();
        let supervisor = self.state.supervisor.clone();
        // Runs left running by a daemon that stopped (this one before a
        // restart, or another on the same database) are taken over here.
        supervisor.spawn_lease_keeper(shutdown.clone());
        // Other daemons' events, for this one's live views (PostgreSQL).
        supervisor.spawn_event_relay(shutdown.clone());
        // Turns that end with no Stop hook call, seen in the agents' own
        // transcripts (hooks switched off): recorded as ungated stops.
        supervisor.spawn_escape_watch(shutdown.clone());
        let app = api::router(self.state);
        crate::api::serve::serve(self.listener, app, shutdown.clone()).await.context("serving HTTP")?;
        // The server has drained: every background task is told to stop
        // (the watches and the relay by the token, the runs and transcript
        // followers by stop_everything), then waited for, for a bounded
        // time: the runs end their agents and record their suspension.
        shutdown.cancel();
        supervisor.stop_everything();
        let _ = supervisor.wait_for_tasks(crate::app::SHUTDOWN_WAIT).await;
        tokio::time::timeout(Duration::from_secs(5), store.close()).await.ok();
        let _ = std::fs::remove_file(&info_path);
        tracing::info!("gadfly daemon stopped");
        Ok(())
    }
}

/// Cancels `token` at the first SIGINT or SIGTERM; a second one exits at once.
pub fn cancel_on_signals(token: CancellationToken) {
    tokio::spawn(async move {
        let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(error = %e, "cannot listen for SIGTERM");
                return;
            }
        };
        for round in 0..2 {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {},
                _ = term.recv() => {},
            }
            if round == 0 {
                tracing::info!("shutting down (a second signal exits at once)");
                token.cancel();
            } else {
                std::process::exit(130);
            }
        }
    });
}
