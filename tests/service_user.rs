//! The recommended deployment, measured: the daemon runs as a user of its
//! own (here uid 65534) and the agent as another (uid 65533). Everything
//! THREATS.md rows 4, 5 and 12 did as the daemon's own user (read the
//! master token and the signing key, rewrite a verdict in `gadfly.db`, kill
//! the daemon to serve a fake) fails, and the agent's Stop hook, pinned to
//! the daemon's key, is still judged. Needs root to switch users (CI runs
//! as root); skipped elsewhere, and on PostgreSQL (the data dir's files are
//! the point).

mod common;

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use common::{Daemon, Fixture, ALL_PASS};
use serde_json::Value;

const DAEMON_UID: &str = "65534";
const AGENT_UID: &str = "65533";

fn as_user(uid: &str) -> Command {
    let mut cmd = Command::new("setpriv");
    cmd.args([&format!("--reuid={uid}"), &format!("--regid={uid}"), "--clear-groups"]);
    cmd
}

/// A shell command run as the agent's user.
fn agent_sh(script: &str) -> Output {
    as_user(AGENT_UID).args(["sh", "-c", script]).output().unwrap()
}

fn open_up(dir: &Path) {
    for entry in walkdir(dir) {
        let mode = if entry.is_dir() { 0o755 } else { 0o644 };
        let _ = std::fs::set_permissions(&entry, std::fs::Permissions::from_mode(mode));
    }
}

fn walkdir(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = vec![dir.to_path_buf()];
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() && !p.is_symlink() {
                out.extend(walkdir(&p));
            } else {
                out.push(p);
            }
        }
    }
    out
}

/// False (with a SKIPPED notice) unless this test can switch users: not on
/// PostgreSQL (the point is the data dir's files and the users), root, and
/// setpriv; fails instead under GADFLY_REQUIRE_MOUNT=1 (CI).
fn can_switch_users() -> bool {
    if std::env::var_os("GADFLY_TEST_DATABASE_URL").is_some() {
        eprintln!("SKIPPED on PostgreSQL: the point is the data dir's files");
        return false;
    }
    // Root when a file this process makes belongs to uid 0.
    let probe = tempfile::NamedTempFile::new().unwrap();
    let root = std::os::unix::fs::MetadataExt::uid(&probe.as_file().metadata().unwrap()) == 0;
    if !root || Command::new("setpriv").arg("--version").output().is_err() {
        assert!(std::env::var_os("GADFLY_REQUIRE_MOUNT").is_none(), "switching users needs root and setpriv");
        eprintln!("SKIPPED: switching users needs root and setpriv");
        return false;
    }
    true
}

/// `gadfly serve` as the daemon's user, on a data dir of its own under the
/// fixture's folder.
fn daemon_as_its_user(f: &Fixture) -> (Daemon, std::path::PathBuf) {
    let data = f.dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    std::os::unix::fs::chown(&data, Some(65534), Some(65534)).unwrap();
    let mut serve = as_user(DAEMON_UID);
    serve.arg(common::gadfly().get_program()).args(["serve", "--listen", "127.0.0.1:0", "--data-dir"]).arg(&data);
    serve.env("HOME", &data);
    (Daemon::start_cmd(&data, serve), data)
}

#[test]
fn a_daemon_run_as_its_own_user_is_out_of_the_agents_reach() {
    if !can_switch_users() {
        return;
    }
    let f = Fixture::new("");
    open_up(f.dir.path());
    let (d, data) = daemon_as_its_user(&f);
    let id = d.create_campaign(&f.spec());
    let key = String::from_utf8(d.run(&["key", "--data-dir", data.to_str().unwrap()]).stdout).unwrap();
    let key = key.trim().to_string();
    let hook_token = d.api_get(&format!("/campaigns/{id}/hook-token"))["token"].as_str().unwrap().to_string();
    let pid = d.child.id();
    let db = data.join("gadfly.db");

    // What the agent tries, as its own user.
    let d_ = data.display();
    let token = agent_sh(&format!("cat '{d_}/token'"));
    assert!(!token.status.success(), "the agent read the master token");
    let signing = agent_sh(&format!("cat '{d_}/daemon-key'"));
    assert!(!signing.status.success(), "the agent read the signing key");
    let write = agent_sh(&format!("printf x >> '{}'", db.display()));
    assert!(!write.status.success(), "the agent wrote into gadfly.db");
    let list = agent_sh(&format!("ls '{d_}'"));
    assert!(!list.status.success(), "the agent listed the data dir");
    let kill = agent_sh(&format!("kill -9 {pid}"));
    assert!(!kill.status.success(), "the agent signalled the daemon");
    assert!(
        String::from_utf8_lossy(&kill.stderr).contains("not permitted"),
        "{}",
        String::from_utf8_lossy(&kill.stderr)
    );
    assert!(Path::new(&format!("/proc/{pid}")).exists(), "the daemon is gone");

    // The agent's Stop hook, pinned to the daemon's key, is still judged.
    let spool = tempfile::tempdir().unwrap();
    std::fs::set_permissions(spool.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let stop = |claim: &str| -> Option<Value> {
        let payload = serde_json::json!({"session_id": "s-user", "hook_event_name": "Stop", "stop_hook_active": false,
            "last_assistant_message": claim});
        let mut child = as_user(AGENT_UID)
            .arg(common::gadfly().get_program())
            .args(["hook", "claude-code", "stop", "--daemon-key", &key, "--campaign", &id])
            .env("GADFLY_URL", &d.url)
            .env("GADFLY_TOKEN", &hook_token)
            .env("GADFLY_SPOOL_DIR", spool.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(payload.to_string().as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        let s = String::from_utf8_lossy(&out.stdout).trim().to_string();
        (!s.is_empty()).then(|| serde_json::from_str(&s).unwrap())
    };
    let blocked = stop("Done.").expect("the unchanged candidate is blocked");
    assert!(blocked["reason"].as_str().unwrap().contains("you may not stop yet"), "judged: {blocked}");
    f.set_candidate(ALL_PASS);
    assert_eq!(stop("Done, every scenario passes."), None, "a passing candidate is let through");
    // The daemon's files are its own.
    use std::os::unix::fs::MetadataExt;
    for (path, mode) in [(data.clone(), 0o700), (db.clone(), 0o600), (data.join("token"), 0o600)] {
        let md = std::fs::metadata(&path).unwrap();
        assert_eq!((md.uid(), md.mode() & 0o777), (65534, mode), "{}", path.display());
    }
}

/// Issue 45, class 1, in the recommended deployment: the workspace is the
/// agent's (its user owns it), its repository's config names a program for
/// every setting that makes git run one, and the agent calls, with its hook
/// token and as its own user, every endpoint that touches the repository:
/// nothing of it runs as the daemon's user (or at all).
#[test]
fn the_agents_git_config_never_runs_as_the_daemon() {
    if !can_switch_users() {
        return;
    }
    let f = Fixture::new("[beam]\nmin_families = 1\n");
    let ws = f.ws();
    let marker_dir = f.dir.path().join("marks");
    std::fs::create_dir_all(&marker_dir).unwrap();
    std::fs::set_permissions(&marker_dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let marker = marker_dir.join("trap-ran.log");
    common::plant_git_config_traps(&ws, &marker);
    common::signed_commit(&ws, "try-signed", "signed-family");
    open_up(f.dir.path());
    std::fs::set_permissions(&marker_dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    // The traps stay runnable by anyone (open_up made every file 0644).
    std::fs::set_permissions(f.dir.path().join("trap.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    for hook in std::fs::read_dir(ws.join(".git/hooks-trap")).unwrap().flatten() {
        std::fs::set_permissions(hook.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    for p in walkdir(&ws) {
        std::os::unix::fs::lchown(&p, Some(65533), Some(65533)).unwrap();
    }
    let (d, _data) = daemon_as_its_user(&f);
    let id = d.create_campaign(&f.spec());
    let hook_token = d.api_get(&format!("/campaigns/{id}/hook-token"))["token"].as_str().unwrap().to_string();
    let as_agent = |args: &[&str]| -> Output {
        as_user(AGENT_UID)
            .arg(common::gadfly().get_program())
            .args(args)
            .env("GADFLY_URL", &d.url)
            .env("GADFLY_TOKEN", &hook_token)
            .output()
            .unwrap()
    };
    // The tag is written by the daemon's user into the agent's repository,
    // which that user may not write: refused with a clear message, nothing run.
    let tagged = as_agent(&["beam", "tag", "householder", "--campaign", &id]);
    if !tagged.status.success() {
        let err = String::from_utf8_lossy(&tagged.stderr);
        assert!(err.contains("Permission denied") || err.contains("permission denied"), "{err}");
    }
    let listed = as_agent(&["beam", "list", &id, "--json"]);
    let beam: Value = serde_json::from_slice(&listed.stdout)
        .unwrap_or_else(|e| panic!("beam list as the agent: {e}: {}", String::from_utf8_lossy(&listed.stderr)));
    assert!(
        beam["families"].as_array().unwrap().iter().any(|f| f["family"] == "signed-family"),
        "the trailer's family is found: {beam}"
    );
    let eval = as_agent(&["eval", &id]);
    assert!(eval.status.code().is_some_and(|c| c < 2), "{}", String::from_utf8_lossy(&eval.stderr));
    assert!(
        !marker.exists(),
        "the agent's git config ran: {}",
        std::fs::read_to_string(&marker).unwrap_or_default()
    );
}
