//! Following an attached Claude Code session's transcript (the JSONL file
//! its hooks name in `transcript_path`): the assistant's text and tool
//! calls that hook payloads do not carry are recorded as they are written,
//! with the usage the transcript holds (`agent::usage::transcript_line`).
//! The file is read from where the last read stopped, on every change
//! notify reports and every few seconds besides; only whole lines are read.
//! The lines are read and parsed by `agent::transcript`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use notify::{EventKind, RecursiveMode, Watcher};
use tokio_util::sync::CancellationToken;

use crate::agent::transcript::{read_new_lines, rows_of, Row};
use crate::agent::usage;

use super::Supervisor;

/// Follows `path` for the session until `token` is cancelled; a final read
/// happens after cancellation so the session's last lines are kept. A
/// background task of the supervisor's (`transcript-follower`).
pub(super) fn spawn_follower(
    sup: Supervisor,
    campaign: String,
    session: String,
    path: PathBuf,
    token: CancellationToken,
) {
    let (tasks, name) = (sup.clone(), format!("transcript-follower {campaign}/{session}"));
    tasks.spawn_task(name, async move {
        let (tx, mut rx) = tokio::sync::mpsc::channel::<()>(16);
        // The transcript's folder may not exist yet when the session starts
        // (a first session in a project): until it does, the file is polled
        // and the watch tried again at each poll.
        let mut watcher = watch(&path, &tx);
        let mut offset = 0u64;
        loop {
            let wait = if watcher.is_some() { WATCHED_POLL } else { UNWATCHED_POLL };
            let done = tokio::select! {
                _ = token.cancelled() => true,
                Some(()) = rx.recv() => false,
                _ = tokio::time::sleep(wait) => false,
            };
            if watcher.is_none() {
                watcher = watch(&path, &tx);
            }
            let p = path.clone();
            if let Ok(Ok((lines, next))) = tokio::task::spawn_blocking(move || read_new_lines(&p, offset)).await {
                // With each line's usage (tokens; the session's cost from
                // `cost-state` lines): what an attached session reports.
                let rows: Vec<Row> =
                    lines.iter().flat_map(|l| rows_of(l).into_iter().chain(usage::transcript_line(l))).collect();
                match sup.record_batch(&campaign, Some(&session), rows).await {
                    // Read again from here only once the rows are stored.
                    Ok(_) => offset = next,
                    Err(e) => tracing::warn!(error = %e, "recording transcript lines"),
                }
            }
            if done {
                break;
            }
        }
    });
}

/// How often a watched transcript is read anyway (a missed notification).
const WATCHED_POLL: Duration = Duration::from_secs(2);
/// How often a transcript is read while its folder cannot be watched.
const UNWATCHED_POLL: Duration = Duration::from_millis(500);

/// Watches the transcript's folder, telling `tx` when the transcript
/// changes; None when the folder cannot be watched (yet).
fn watch(path: &Path, tx: &tokio::sync::mpsc::Sender<()>) -> Option<notify::RecommendedWatcher> {
    let (watched, tx) = (path.to_path_buf(), tx.clone());
    notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        if let Ok(ev) = res {
            // Only what changes the file: our own reads of it are reported
            // too (open, close), and would wake the follower to read again,
            // round and round.
            let changed = matches!(ev.kind, EventKind::Create(_) | EventKind::Modify(_) | EventKind::Any);
            if changed && ev.paths.iter().any(|p| p == &watched) {
                let _ = tx.try_send(());
            }
        }
    })
    .and_then(|mut w| {
        w.watch(path.parent().unwrap_or(Path::new("/")), RecursiveMode::NonRecursive)?;
        Ok(w)
    })
    .map_err(|e| tracing::debug!(error = %e, "transcript folder not watchable yet; polling"))
    .ok()
}
