//! Where a spawned agent runs when `[agent] sandbox = "bwrap"`: in a
//! bubblewrap sandbox that keeps it away from the daemon that judges it.
//!
//! The agent shares the daemon's Unix user, so without this it could read
//! the master token, rewrite a cached verdict in the database, kill the
//! daemon and serve a fake on its port (THREATS.md rows 4, 5, 12). In the
//! sandbox:
//! - the daemon's data dir is an empty folder (the token, the signing key,
//!   the database, the evaluation folders are not there), except the
//!   campaign's run folder (read-only: the generated hook settings) and the
//!   spool (where the hooks leave what they could not deliver);
//! - the agent has its own PID namespace: it cannot see or signal the
//!   daemon, the harness or anything else outside;
//! - it has no capability, even when the daemon runs as root (it could
//!   otherwise unmount what hides the data dir);
//! - the file system is read-only but for the workspace, the agent's home
//!   (its CLI keeps its configuration and transcripts there), `/tmp` and the
//!   folders named in `[agent] writable`;
//! - the network is the host's: the agent reaches the daemon on loopback and
//!   its model's API.
//!
//! What it does not hide: the spool can still be written (a forged spool
//! file is judged by the daemon, which keeps the counts that decide a stop),
//! and anything else readable by the user outside the data dir stays
//! readable.

use std::path::{Path, PathBuf};

/// The paths one sandbox is made of.
#[derive(Debug, Clone)]
pub struct Jail {
    pub workspace: PathBuf,
    pub data_dir: PathBuf,
    /// Mounted read-only inside the hidden data dir (the hook settings).
    pub readable: Vec<PathBuf>,
    /// Mounted writable inside the hidden data dir (the spool).
    pub writable_in_data: Vec<PathBuf>,
    /// Writable besides the workspace and /tmp (the agent's home, CODEX_HOME,
    /// `[agent] writable`).
    pub writable: Vec<PathBuf>,
}

impl Jail {
    /// The command line that runs `program args` in the sandbox.
    pub fn wrap(&self, program: &str, args: &[String]) -> (String, Vec<String>) {
        let mut a: Vec<String> = Vec::new();
        let mut push = |items: &[&str]| a.extend(items.iter().map(|s| s.to_string()));
        // No capability: a daemon run as root would otherwise hand the agent
        // root's (CAP_SYS_ADMIN unmounts the tmpfs that hides the data dir).
        push(&["--die-with-parent", "--unshare-pid", "--unshare-ipc", "--new-session", "--cap-drop", "ALL"]);
        push(&["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--bind", "/tmp", "/tmp"]);
        let shown = |p: &Path| p.display().to_string();
        for w in &self.writable {
            if w.exists() {
                a.extend(["--bind".into(), shown(w), shown(w)]);
            }
        }
        a.extend(["--bind".into(), shown(&self.workspace), shown(&self.workspace)]);
        // Last, so that it hides the data dir wherever it is (under the
        // home or /tmp included), then lets through only what the agent's
        // hooks need.
        a.extend(["--tmpfs".into(), shown(&self.data_dir)]);
        for r in &self.readable {
            if r.exists() {
                a.extend(["--ro-bind".into(), shown(r), shown(r)]);
            }
        }
        for w in &self.writable_in_data {
            if w.exists() {
                a.extend(["--bind".into(), shown(w), shown(w)]);
            }
        }
        a.extend(["--chdir".into(), shown(&self.workspace), "--".into(), program.to_string()]);
        a.extend(args.iter().cloned());
        ("bwrap".to_string(), a)
    }
}

/// True when the workspace lies inside the data dir (or is it): the
/// sandbox would then hide the workspace, or show the data dir.
pub fn overlaps(workspace: &Path, data_dir: &Path) -> bool {
    let (w, d) = (canonical(workspace), canonical(data_dir));
    w.starts_with(&d) || d.starts_with(&w)
}

fn canonical(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_data_dir_is_hidden_after_everything_writable_and_the_hook_paths_come_back() {
        let j = Jail {
            workspace: "/w".into(),
            data_dir: "/home/u/.local/share/gadfly".into(),
            readable: vec![],
            writable_in_data: vec![],
            writable: vec!["/".into()],
        };
        let (prog, args) = j.wrap("claude", &["-p".into()]);
        assert_eq!(prog, "bwrap");
        let pos = |s: &str| args.iter().position(|a| a == s).unwrap();
        assert!(pos("--tmpfs") > pos("/w"), "{args:?}");
        assert_eq!(&args[args.len() - 3..], ["--", "claude", "-p"]);
        assert!(args.contains(&"--unshare-pid".to_string()));
        assert!(args.windows(2).any(|w| w[0] == "--cap-drop" && w[1] == "ALL"), "{args:?}");
        assert!(overlaps(Path::new("/a/b/c"), Path::new("/a/b")));
        assert!(overlaps(Path::new("/a/b"), Path::new("/a/b/data")));
        assert!(!overlaps(Path::new("/a/ws"), Path::new("/a/data")));
    }
}
