//! `gadfly doctor [ID]`: whether the gate is tamper-proof as deployed.
//! Plain text, one finding a line (`ok:`, `PROBLEM:`, `note:`); exit 1
//! when a problem is found.
//!
//! What it checks: the data dir and the files that decide verdicts or open
//! the API (database, token, the daemon's key) are the daemon's alone
//! (0700 / 0600, THREATS rows 4, 12, 13, 22); the daemon does not run as
//! the user of the agent (then the agent can rewrite verdicts, read the
//! token, kill the daemon: nothing in the data dir's modes stops it); the
//! campaign's Stop hook pins the daemon's key (row 5); the spec's warnings;
//! for a daemon in a container, that this user cannot drive the container
//! engine (its socket), and the port's holder is named as what it may be
//! (the daemon, or the engine's port forwarder).

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// What `doctor` found, in order.
#[derive(Debug, Default)]
pub struct Report {
    pub lines: Vec<String>,
    pub problems: usize,
}

impl Report {
    fn ok(&mut self, s: impl Into<String>) {
        self.lines.push(format!("ok: {}", s.into()));
    }
    fn note(&mut self, s: impl Into<String>) {
        self.lines.push(format!("note: {}", s.into()));
    }
    fn problem(&mut self, s: impl Into<String>) {
        self.problems += 1;
        self.lines.push(format!("PROBLEM: {}", s.into()));
    }
}

/// The recommended deployment, named wherever the same-user case is found.
pub const RECOMMENDED: &str = "run the daemon as a dedicated user (e.g. `gadfly`, see deploy/gadfly.service) with its data dir 0700, and the agent as your own user";

/// A user's name from /etc/passwd, else `uid N`.
pub fn user_name(uid: u32) -> String {
    std::fs::read_to_string("/etc/passwd")
        .ok()
        .and_then(|p| {
            p.lines().find_map(|l| {
                let f: Vec<&str> = l.split(':').collect();
                (f.len() > 2 && f[2] == uid.to_string()).then(|| f[0].to_string())
            })
        })
        .map(|n| format!("{n} (uid {uid})"))
        .unwrap_or_else(|| format!("uid {uid}"))
}

/// The uid the daemon of `data_dir` runs as: its process's (from
/// `daemon.json`'s pid), else the data dir's owner; None when neither can
/// be read.
pub fn daemon_uid(data_dir: &Path) -> Option<u32> {
    let from_pid = std::fs::read_to_string(data_dir.join("daemon.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .and_then(|v| v["pid"].as_u64())
        .and_then(|pid| std::fs::metadata(format!("/proc/{pid}")).ok())
        .map(|m| m.uid());
    from_pid.or_else(|| std::fs::metadata(data_dir).ok().map(|m| m.uid()))
}

/// The uid of the process listening on `url`'s loopback port, from the
/// kernel's socket tables (no data dir needed, and true of whatever holds
/// the port).
pub fn listener_uid(url: &str) -> Option<u32> {
    let rest = url.split("://").nth(1)?;
    let authority = rest.split('/').next()?;
    let port: u16 = authority.rsplit(':').next()?.parse().ok()?;
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else { continue };
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            // sl local_address rem_address st tx:rx tr:when retrnsmt uid ...
            if f.len() > 7 && f[3] == "0A" {
                let local_port = f[1].rsplit(':').next().and_then(|p| u16::from_str_radix(p, 16).ok());
                if local_port == Some(port) {
                    return f[7].parse().ok();
                }
            }
        }
    }
    None
}

/// The sentence `gadfly attach` and `gadfly doctor` print when the agent
/// (the owner of `workspace`, or this process's user) would run as the
/// daemon's user (the listener on `url`, else the owner of `data_dir`'s
/// daemon); None when it would not, or when that cannot be told.
pub fn same_user_warning(workspace: Option<&Path>, data_dir: &Path, url: Option<&str>) -> Option<String> {
    let daemon = url.and_then(listener_uid).or_else(|| daemon_uid(data_dir))?;
    let (agent, whose) = match workspace.and_then(|w| std::fs::metadata(w).ok()) {
        Some(m) => (m.uid(), "the campaign's workspace belongs to"),
        None => (current_uid(), "you run this as"),
    };
    if agent != daemon && agent != 0 {
        return None;
    }
    let who = user_name(agent);
    Some(if agent == daemon {
        format!(
            "the gadfly daemon runs as {who}, and {whose} that same user: an agent running as {who} can read and rewrite the daemon's data (verdicts in the database, the token, the daemon's key) and kill the daemon, so the gate is NOT tamper-proof against that agent; {RECOMMENDED}"
        )
    } else {
        format!(
            "{whose} root: an agent running as root can read and rewrite any user's data, so the gate is NOT tamper-proof against it; {RECOMMENDED}"
        )
    })
}

fn current_uid() -> u32 {
    // The owner of a file this process just made is its effective uid.
    std::fs::metadata("/proc/self").map(|m| m.uid()).unwrap_or(u32::MAX)
}

/// What is checked when a campaign is named: read from the daemon.
pub struct CampaignFacts {
    pub id: String,
    pub workspace: Option<PathBuf>,
    pub spec: Option<crate::campaign::CampaignSpec>,
}

/// Runs every check. `daemon_key` is the key the daemon at GADFLY_URL
/// announces (None when it could not be reached).
pub fn check(data_dir: &Path, url: Option<&str>, daemon_key: Option<&str>, campaign: Option<&CampaignFacts>) -> Report {
    let mut r = Report::default();
    check_data_dir(&mut r, data_dir);
    // The daemon's key, and whether the daemon on the port holds it.
    let file_key = crate::signing::read_public(data_dir);
    match (&file_key, daemon_key) {
        (Some(f), Some(d)) if f != d => r.problem(format!(
            "the daemon at GADFLY_URL announces the key {d}, but {} holds {f}: another server holds the daemon's port, or GADFLY_URL and the data dir name different daemons",
            data_dir.join(crate::signing::PUB_FILE).display()
        )),
        (_, Some(d)) => r.ok(format!("the daemon's public key (the Stop hook's --daemon-key): {d}")),
        (Some(f), None) => r.note(format!(
            "the daemon's public key (the Stop hook's --daemon-key): {f} (from the data dir; no daemon answered at GADFLY_URL)"
        )),
        (None, None) => r.note("no daemon answered at GADFLY_URL and the data dir holds no daemon key: start `gadfly serve`"),
    }
    let key = daemon_key.map(str::to_string).or(file_key);
    if let Some(c) = campaign {
        let workspace = c.workspace.as_deref();
        match same_user_warning(workspace, data_dir, url) {
            Some(w) => r.problem(w),
            None => match (
                url.and_then(listener_uid),
                daemon_uid(data_dir),
                workspace.and_then(|w| std::fs::metadata(w).ok()),
            ) {
                // What the port tells is who holds it: the daemon, or (a
                // daemon in a container with a published port) the
                // engine's port forwarder, e.g. podman's conmon as root.
                // Either way the workspace's owner cannot signal it.
                (Some(d), _, Some(m)) => r.ok(format!(
                    "the daemon's port is held by a process of {} (the daemon, or the port forwarder of the container it runs in), the workspace belongs to {}: an agent running as that user cannot signal it",
                    user_name(d),
                    user_name(m.uid())
                )),
                (None, Some(d), Some(m)) => r.ok(format!(
                    "the daemon runs as {}, the workspace belongs to {}",
                    user_name(d),
                    user_name(m.uid())
                )),
                _ => r.note("cannot tell which user the daemon runs as (its data dir is not readable here)"),
            },
        }
        if let Some(ws) = workspace {
            check_pinned(&mut r, ws, &c.id, key.as_deref());
        }
        match &c.spec {
            Some(spec) => {
                let warnings = spec_warnings(spec);
                if warnings.is_empty() {
                    r.ok("the campaign spec has no warnings");
                }
                for w in warnings {
                    r.problem(format!("campaign spec: {w}"));
                }
            }
            None => r.note("the campaign's spec could not be read from the daemon; its warnings are not checked"),
        }
    } else if let Some(w) = same_user_warning(None, data_dir, url) {
        r.problem(w);
    }
    check_sandbox(&mut r, campaign.and_then(|c| c.spec.as_ref()).map(|s| s.harness.sandbox));
    check_engine_sockets(&mut r, ENGINE_SOCKETS);
    r
}

/// Whether the candidate's sandbox works on this host (where `gadfly
/// doctor` runs: the daemon's host when it is run there), and what the
/// campaign's `[harness] sandbox` makes of it.
fn check_sandbox(r: &mut Report, mode: Option<crate::campaign::SandboxMode>) {
    use crate::campaign::SandboxMode;
    match (crate::harness::bwrap_problem(), mode) {
        (_, Some(SandboxMode::None)) => r.problem(
            "the campaign opts out of the sandbox (`[harness] sandbox = \"none\"`): its candidate runs as the daemon's \
             user, with the daemon's files and the host in reach",
        ),
        (None, _) => r.ok("the candidate's sandbox works on this host (bubblewrap, its own PID and user namespaces)"),
        (Some(why), Some(SandboxMode::Auto)) => {
            r.problem(format!("{why}: with `sandbox = \"auto\"` the candidate runs unsandboxed on this host"))
        }
        (Some(why), _) => r.problem(format!(
            "{why}: on this host evaluations refuse to judge (the sandbox is on by default); install bubblewrap and \
             allow unprivileged user namespaces, or opt out with `[harness] sandbox = \"none\"`"
        )),
    }
}

/// Where Docker's and rootful podman's API sockets live.
const ENGINE_SOCKETS: &[&str] = &["/var/run/docker.sock", "/run/podman/podman.sock"];

/// A daemon in a container is out of the agent's reach only while the
/// agent cannot drive the container engine: whoever can connect to its
/// socket can exec into the daemon's container (read the token, rewrite
/// the database) or stop it. Silent where no such socket exists.
fn check_engine_sockets(r: &mut Report, sockets: &[&str]) {
    for path in sockets {
        if std::fs::symlink_metadata(path).is_err() {
            continue;
        }
        match std::os::unix::net::UnixStream::connect(path) {
            Ok(_) => r.problem(format!(
                "this user can connect to the container engine's socket {path}: if the daemon runs in a container, an agent running as this user can exec into it (read the token, rewrite the database) or stop it"
            )),
            Err(e) => r.ok(format!("this user cannot use the container engine's socket {path} ({e})")),
        }
    }
}

/// The spec's weak points (`campaign::warnings`).
fn spec_warnings(spec: &crate::campaign::CampaignSpec) -> Vec<String> {
    crate::campaign::warnings(spec)
}

fn check_data_dir(r: &mut Report, data_dir: &Path) {
    let meta = match std::fs::symlink_metadata(data_dir) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            r.ok(format!("the data dir {} is not readable by this user", data_dir.display()));
            return;
        }
        Err(e) => {
            r.note(format!("the data dir {} cannot be read ({e}); pass --data-dir", data_dir.display()));
            return;
        }
    };
    let mode = meta.mode() & 0o777;
    if mode & 0o077 != 0 {
        r.problem(format!(
            "the data dir {} is mode {mode:03o}: other users can {} it (the daemon makes it 0700 at start)",
            data_dir.display(),
            access(mode)
        ));
    } else {
        r.ok(format!("the data dir {} is mode {mode:03o}, owned by {}", data_dir.display(), user_name(meta.uid())));
    }
    for name in crate::signing::PRIVATE_FILES {
        let p = data_dir.join(name);
        let Ok(m) = std::fs::symlink_metadata(&p) else { continue };
        let mode = m.mode() & 0o777;
        if m.file_type().is_symlink() {
            r.problem(format!("{} is a symbolic link", p.display()));
        } else if mode & 0o077 != 0 {
            r.problem(format!(
                "{} is mode {mode:03o}: other users can {} it (the daemon makes it 0600 at start)",
                p.display(),
                access(mode)
            ));
        } else if m.uid() != meta.uid() {
            r.problem(format!(
                "{} belongs to {}, not to the data dir's owner {}",
                p.display(),
                user_name(m.uid()),
                user_name(meta.uid())
            ));
        } else {
            r.ok(format!("{} is mode {mode:03o}", p.display()));
        }
    }
}

fn access(mode: u32) -> &'static str {
    match (mode & 0o044 != 0, mode & 0o022 != 0) {
        (true, true) => "read and write",
        (false, true) => "write",
        _ => "read",
    }
}

/// Whether the campaign's Stop hook in the workspace's Claude Code settings
/// pins the daemon's key.
fn check_pinned(r: &mut Report, workspace: &Path, campaign: &str, key: Option<&str>) {
    let path = crate::agent::attach::settings_path(workspace);
    let Ok(text) = std::fs::read_to_string(&path) else {
        r.note(format!("no {}: the campaign is not attached there (spawn mode pins the key itself)", path.display()));
        return;
    };
    let settings: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    let stop = settings["hooks"]["Stop"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|g| g["hooks"].as_array().cloned().unwrap_or_default())
        .filter_map(|h| h["command"].as_str().map(str::to_string))
        .find(|c| c.contains(" hook claude-code stop") && c.ends_with(&format!("--campaign {campaign}")));
    let Some(stop) = stop else {
        r.problem(format!(
            "{} has no gadfly Stop hook for campaign {campaign}: run `gadfly attach {campaign}`",
            path.display()
        ));
        return;
    };
    let pinned = stop.split_whitespace().skip_while(|w| *w != "--daemon-key").nth(1).map(|k| k.trim_matches('\''));
    match (pinned, key) {
        (None, _) => r.problem(format!(
            "the Stop hook in {} does not pin the daemon's key (--daemon-key): a server an agent puts on the daemon's port could answer it; run `gadfly attach {campaign}` again",
            path.display()
        )),
        (Some(p), Some(k)) if p != k => r.problem(format!(
            "the Stop hook in {} pins the key {p}, not the daemon's {k}: every stop will count as \"supervisor unavailable\"; run `gadfly attach {campaign}` again",
            path.display()
        )),
        (Some(_), _) => r.ok(format!("the Stop hook in {} pins the daemon's key", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loose_data_dir_and_an_unpinned_hook_are_problems() {
        use std::os::unix::fs::PermissionsExt;
        let root = tempfile::tempdir().unwrap();
        let data = root.path().join("data");
        crate::signing::secure_data_dir(&data).unwrap();
        let key = crate::signing::DaemonKey::load_or_create(&data).unwrap();
        std::fs::write(data.join("token"), "t").unwrap();
        std::fs::set_permissions(data.join("token"), std::fs::Permissions::from_mode(0o600)).unwrap();
        let r = check(&data, None, Some(&key.public_b64()), None);
        assert!(r.lines.iter().any(|l| l.starts_with("ok: the data dir")), "{:?}", r.lines);
        assert!(r.lines.iter().any(|l| l.contains(&key.public_b64())), "{:?}", r.lines);
        std::fs::set_permissions(data.join("token"), std::fs::Permissions::from_mode(0o644)).unwrap();
        let r = check(&data, None, Some(&key.public_b64()), None);
        assert!(r.lines.iter().any(|l| l.starts_with("PROBLEM:") && l.contains("token is mode 644")), "{:?}", r.lines);
        // Another key on the port.
        let r = check(&data, None, Some("AAAA"), None);
        assert!(r.lines.iter().any(|l| l.contains("another server holds the daemon's port")), "{:?}", r.lines);
        // The workspace's Stop hook without, then with the key.
        let ws = root.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        crate::agent::attach::attach(&ws, "gadfly", "c1", Default::default(), None).unwrap();
        let facts = CampaignFacts { id: "c1".into(), workspace: Some(ws.clone()), spec: None };
        let r = check(&data, None, Some(&key.public_b64()), Some(&facts));
        assert!(r.lines.iter().any(|l| l.contains("does not pin the daemon's key")), "{:?}", r.lines);
        crate::agent::attach::attach_pinned(&ws, "gadfly", "c1", Default::default(), None, Some(&key.public_b64()))
            .unwrap();
        let r = check(&data, None, Some(&key.public_b64()), Some(&facts));
        assert!(r.lines.iter().any(|l| l.contains("pins the daemon's key")), "{:?}", r.lines);
    }

    #[test]
    fn a_container_engine_socket_this_user_can_use_is_a_problem() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("engine.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let mut r = Report::default();
        check_engine_sockets(&mut r, &[path.to_str().unwrap(), "/nonexistent/engine.sock"]);
        assert_eq!(r.problems, 1, "{:?}", r.lines);
        assert!(r.lines[0].contains("can exec into it"), "{:?}", r.lines);
        assert_eq!(r.lines.len(), 1, "a missing socket says nothing: {:?}", r.lines);
    }
}
