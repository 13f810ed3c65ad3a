//! Runs one shell command in its own process group with a hard deadline.
//! A timeout kills the whole group (grandchildren included), so a harness
//! that forks cannot outlive its evaluation. A descendant that left the
//! group (`setsid`, a daemonizing double fork) still carries the run's own
//! mark in its environment, and is killed by it when the command ends, is
//! cancelled or times out; the candidate's sandbox (bubblewrap, its own PID
//! namespace) ends every descendant whatever its environment.

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
    let mut found = 0;
    for (pid, dir) in other_processes() {
        let Ok(cwd) = std::fs::read_link(dir.join("cwd")) else { continue };
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

/// Every process but this one: its pid and its folder under /proc (none
/// where there is no /proc).
fn other_processes() -> impl Iterator<Item = (i32, std::path::PathBuf)> {
    let me = std::process::id();
    std::fs::read_dir("/proc").into_iter().flatten().flatten().filter_map(move |entry| {
        let pid = entry.file_name().to_str()?.parse::<i32>().ok()?;
        (pid as u32 != me).then(|| (pid, entry.path()))
    })
}

/// The environment variable each command of [`run_shell`] carries, with a
/// value of its own, down to every descendant that keeps its environment.
pub const RUN_MARK: &str = "GADFLY_RUN_MARK";

/// A fresh value for [`RUN_MARK`].
fn new_mark() -> String {
    use rand::Rng;
    format!("{}-{:016x}", std::process::id(), rand::thread_rng().gen::<u64>())
}

/// Kills every process of this user whose environment carries `RUN_MARK=mark`
/// (what left the process group: `setsid`, a double fork). Returns how
/// many were found. Linux only (reads /proc).
pub fn kill_marked(mark: &str) -> usize {
    let needle = format!("{RUN_MARK}={mark}\0").into_bytes();
    let mut found = 0;
    for (pid, dir) in other_processes() {
        let Ok(env) = std::fs::read(dir.join("environ")) else { continue };
        if env.windows(needle.len()).any(|w| w == needle.as_slice()) {
            found += 1;
            let _ = nix::sys::signal::kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
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
    let mark = new_mark();
    cmd.env(RUN_MARK, &mark);
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
    let group = GroupGuard(pgid, mark);
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

/// Kills a process group, and every process carrying the run's mark, with
/// SIGKILL when dropped.
struct GroupGuard(Option<Pid>, String);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(pg) = self.0 {
            let _ = killpg(pg, Signal::SIGKILL);
        }
        let left = kill_marked(&self.1);
        if left > 0 {
            tracing::info!(processes = left, "killed what a command left running outside its process group");
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

    /// Issue #49: a helper that left the process group (`setsid`, a
    /// daemonizing double fork) is gone after a timeout, a normal end and a
    /// cancel alike, without the sandbox.
    #[tokio::test]
    async fn a_setsid_or_double_forked_helper_is_gone_after_any_end() {
        let dir = tempfile::tempdir().unwrap();
        let helper = |name: &str| {
            let m = dir.path().join(name);
            (format!("(setsid sh -c 'sleep 1.5; touch {}' </dev/null >/dev/null 2>&1 &)", m.display()), m)
        };
        let (timed, timed_mark) = helper("after-timeout");
        let o = run_shell(&format!("{timed}; sleep 30"), dir.path(), &[], Duration::from_millis(400)).await;
        assert_eq!(o.exit, Exit::TimedOut);
        let (ended, ended_mark) = helper("after-exit");
        let o = run_shell(&format!("{ended}; exit 0"), dir.path(), &[], Duration::from_secs(10)).await;
        assert_eq!(o.exit, Exit::Code(0));
        let (dropped, dropped_mark) = helper("after-cancel");
        let cmd = format!("{dropped}; sleep 30");
        let run = run_shell(&cmd, dir.path(), &[], Duration::from_secs(60));
        assert!(tokio::time::timeout(Duration::from_millis(400), run).await.is_err());
        tokio::time::sleep(Duration::from_millis(2500)).await;
        for m in [timed_mark, ended_mark, dropped_mark] {
            assert!(!m.exists(), "a helper outside the process group outlived its command: {}", m.display());
        }
    }

    /// The control: the same helper, started outside a command (no mark),
    /// is not touched by a command's end.
    #[tokio::test]
    async fn a_process_without_the_run_s_mark_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let mut other = std::process::Command::new("sleep").arg("5").spawn().unwrap();
        let o = run_shell("setsid sleep 0.1 & exit 0", dir.path(), &[], Duration::from_secs(10)).await;
        assert_eq!(o.exit, Exit::Code(0));
        assert!(other.try_wait().unwrap().is_none(), "an unrelated process was killed");
        let _ = other.kill();
        assert_eq!(kill_marked("no-such-mark"), 0);
    }
}
