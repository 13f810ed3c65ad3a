//! Runs one shell command in its own process group with a hard deadline.
//! A timeout kills the whole group (grandchildren included), so a harness
//! that forks cannot outlive its evaluation.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use tokio::io::AsyncReadExt;
use tokio::process::Command;

/// How a command ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exit {
    Code(i32),
    Signal(i32),
    TimedOut,
    FailedToSpawn(String),
}

impl Exit {
    pub fn success(&self) -> bool {
        matches!(self, Exit::Code(0))
    }

    /// A sentence for a verdict: what went wrong with this command.
    pub fn describe(&self, what: &str, timeout: Duration) -> String {
        match self {
            Exit::Code(0) => format!("{what} succeeded"),
            Exit::Code(c) if (129..=192).contains(c) => format!(
                "{what} exited with status {c}: a process it ran crashed, killed by signal {} ({})",
                c - 128,
                signal_name(c - 128)
            ),
            Exit::Code(c) => format!("{what} exited with status {c}"),
            Exit::Signal(s) => {
                format!("{what} crashed: killed by signal {s} ({})", signal_name(*s))
            }
            Exit::TimedOut => {
                format!("{what} timed out after {} s (its whole process group was killed)", timeout.as_secs())
            }
            Exit::FailedToSpawn(e) => format!("{what} could not start: {e}"),
        }
    }
}

fn signal_name(sig: i32) -> &'static str {
    Signal::try_from(sig).map(|s| s.as_str()).unwrap_or("unknown")
}

#[derive(Debug, Clone)]
pub struct Outcome {
    pub exit: Exit,
    /// The last bytes of stdout and stderr, interleaved per stream.
    pub output_tail: String,
    pub elapsed: Duration,
}

const TAIL_BYTES: usize = 4096;

/// Kills what an earlier daemon left running under `root` (its evaluation
/// folders): a daemon killed mid-evaluation cannot end its harness, which
/// then holds the CPU or the GPU through the next evaluations (THREATS.md
/// row 18). Every process whose working directory is under `root` is
/// killed with its whole process group. Returns how many processes were
/// found. Linux only (reads /proc); elsewhere it finds nothing.
pub fn kill_leftovers(root: &Path) -> usize {
    let Ok(root) = std::fs::canonicalize(root) else { return 0 };
    let Ok(procs) = std::fs::read_dir("/proc") else { return 0 };
    let me = std::process::id();
    let mut found = 0;
    for entry in procs.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
        if pid as u32 == me {
            continue;
        }
        let Ok(cwd) = std::fs::read_link(entry.path().join("cwd")) else { continue };
        if !cwd.starts_with(&root) {
            continue;
        }
        found += 1;
        let pid = Pid::from_raw(pid);
        if let Ok(pg) = nix::unistd::getpgid(Some(pid)) {
            if pg.as_raw() > 1 && pg != nix::unistd::getpgrp() {
                let _ = killpg(pg, Signal::SIGKILL);
            }
        }
        let _ = nix::sys::signal::kill(pid, Signal::SIGKILL);
        tracing::warn!(pid = pid.as_raw(), cwd = %cwd.display(), "killed a process an earlier daemon left in its evaluation folder");
    }
    found
}

/// Runs `sh -c command` in `dir` with extra environment variables.
pub async fn run_shell(command: &str, dir: &Path, env: &[(&str, String)], timeout: Duration) -> Outcome {
    let start = Instant::now();
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(command)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            return Outcome {
                exit: Exit::FailedToSpawn(e.to_string()),
                output_tail: String::new(),
                elapsed: start.elapsed(),
            }
        }
    };
    let pgid = child.id().map(|id| Pid::from_raw(id as i32));
    // Dropped (the evaluation given up, e.g. a worker that lost its job)
    // or done, the whole group goes, not just the leader.
    let group = GroupGuard(pgid);
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let out_task = tokio::spawn(read_tail(stdout));
    let err_task = tokio::spawn(read_tail(stderr));

    let exit = match tokio::time::timeout(timeout, child.wait()).await {
        Ok(Ok(status)) => {
            use std::os::unix::process::ExitStatusExt;
            match (status.code(), status.signal()) {
                (Some(c), _) => Exit::Code(c),
                (None, Some(s)) => Exit::Signal(s),
                _ => Exit::Code(-1),
            }
        }
        Ok(Err(e)) => Exit::FailedToSpawn(e.to_string()),
        Err(_) => {
            if let Some(pg) = pgid {
                let _ = killpg(pg, Signal::SIGTERM);
                // The grace is the group's, not only its leader's: `sh -c
                // srun ...` ends at once, srun needs a moment to withdraw
                // its request from Slurm's queue (killed, it cannot).
                let deadline = Instant::now() + Duration::from_millis(500);
                let _ = tokio::time::timeout(Duration::from_millis(500), child.wait()).await;
                while Instant::now() < deadline && killpg(pg, None).is_ok() {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                let _ = killpg(pg, Signal::SIGKILL);
            }
            let _ = child.kill().await;
            Exit::TimedOut
        }
    };
    // Sweep the group once the leader is gone: helpers that double-forked
    // or were left in the background must not survive the evaluation.
    drop(group);
    let out = tokio::time::timeout(Duration::from_secs(2), out_task).await;
    let err = tokio::time::timeout(Duration::from_secs(2), err_task).await;
    let mut output_tail = String::new();
    for part in [out, err].into_iter().flatten().flatten() {
        if !part.trim().is_empty() {
            output_tail.push_str(part.trim_end());
            output_tail.push('\n');
        }
    }
    Outcome { exit, output_tail, elapsed: start.elapsed() }
}

/// Kills a process group with SIGKILL when dropped.
struct GroupGuard(Option<Pid>);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(pg) = self.0 {
            let _ = killpg(pg, Signal::SIGKILL);
        }
    }
}

async fn read_tail<R: tokio::io::AsyncRead + Unpin>(reader: Option<R>) -> String {
    let Some(mut reader) = reader else {
        return String::new();
    };
    let mut tail: Vec<u8> = Vec::new();
    let mut buf = vec![0u8; 8192];
    loop {
        match reader.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                tail.extend_from_slice(&buf[..n]);
                if tail.len() > 2 * TAIL_BYTES {
                    tail.drain(..tail.len() - TAIL_BYTES);
                }
            }
        }
    }
    if tail.len() > TAIL_BYTES {
        tail.drain(..tail.len() - TAIL_BYTES);
    }
    String::from_utf8_lossy(&tail).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn maps_exit_codes_and_signals() {
        let dir = tempfile::tempdir().unwrap();
        let o = run_shell("echo hi; exit 3", dir.path(), &[], Duration::from_secs(10)).await;
        assert_eq!(o.exit, Exit::Code(3));
        assert!(o.output_tail.contains("hi"));
        let o = run_shell("kill -SEGV $$", dir.path(), &[], Duration::from_secs(10)).await;
        assert_eq!(o.exit, Exit::Signal(11));
        assert!(o.exit.describe("run", Duration::from_secs(1)).contains("SIGSEGV"));
    }

    #[tokio::test]
    async fn timeout_kills_the_whole_group() {
        let dir = tempfile::tempdir().unwrap();
        let mark = dir.path().join("survivor");
        let cmd = format!("(sleep 2; touch {}) & sleep 30", mark.display());
        let o = run_shell(&cmd, dir.path(), &[], Duration::from_millis(300)).await;
        assert_eq!(o.exit, Exit::TimedOut);
        tokio::time::sleep(Duration::from_millis(2500)).await;
        assert!(!mark.exists(), "a grandchild outlived the timeout");
    }

    #[tokio::test]
    async fn a_timeout_gives_the_whole_group_its_grace() {
        // Like `sh -c 'srun ...'`: the leader ends at SIGTERM at once, a
        // member needs a moment to clean up (srun withdrawing its request).
        let dir = tempfile::tempdir().unwrap();
        let mark = dir.path().join("cleaned");
        let cmd =
            format!("(trap 'sleep 0.2; touch {}; exit 0' TERM; while :; do sleep 0.05; done) & wait", mark.display());
        let o = run_shell(&cmd, dir.path(), &[], Duration::from_millis(300)).await;
        assert_eq!(o.exit, Exit::TimedOut);
        assert!(mark.exists(), "the member was killed before its cleanup");
    }

    #[tokio::test]
    async fn a_dropped_command_takes_its_group_with_it() {
        let dir = tempfile::tempdir().unwrap();
        let mark = dir.path().join("orphan");
        let cmd = format!("(sleep 1; touch {}) & sleep 30", mark.display());
        let run = run_shell(&cmd, dir.path(), &[], Duration::from_secs(60));
        assert!(tokio::time::timeout(Duration::from_millis(300), run).await.is_err());
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert!(!mark.exists(), "a child outlived its dropped command");
    }

    #[tokio::test]
    async fn background_children_are_swept_after_exit() {
        let dir = tempfile::tempdir().unwrap();
        let mark = dir.path().join("late");
        let cmd = format!("(sleep 1; touch {}) & exit 0", mark.display());
        let o = run_shell(&cmd, dir.path(), &[], Duration::from_secs(10)).await;
        assert_eq!(o.exit, Exit::Code(0));
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert!(!mark.exists(), "a background child outlived its command");
    }
}
