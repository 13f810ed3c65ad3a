//! Issue 49, item 5: the daemon's log is in colour only on a terminal and
//! never with `NO_COLOR`; a log redirected to a file holds no escape codes.
//! The terminal is a real pseudo-terminal, from util-linux's `script`.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn gadfly() -> &'static str {
    env!("CARGO_BIN_EXE_gadfly")
}

/// What `gadfly serve` wrote to stderr in its first moments, the daemon
/// run by `wrap` (a plain command, or one under `script`).
fn serve_log(dir: &Path, no_color: bool, pty: bool) -> String {
    let data = dir.join(format!("data-{no_color}-{pty}"));
    let log = dir.join(format!("log-{no_color}-{pty}"));
    let serve = format!("{} serve --listen 127.0.0.1:0 --data-dir {}", gadfly(), data.display());
    let mut cmd = if pty {
        let mut c = Command::new("script");
        c.args(["-qefc", &format!("{serve} 2>&1"), "/dev/null"]);
        c
    } else {
        let mut c = Command::new("sh");
        c.args(["-c", &serve]);
        c
    };
    cmd.env("RUST_LOG", "info").env_remove("NO_COLOR");
    if no_color {
        cmd.env("NO_COLOR", "1");
    }
    let file = std::fs::File::create(&log).unwrap();
    let (out, err) = if pty { (Stdio::from(file), Stdio::null()) } else { (Stdio::null(), Stdio::from(file)) };
    let mut child = cmd.stdin(Stdio::null()).stdout(out).stderr(err).process_group(0).spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !data.join("daemon.json").exists() {
        assert!(Instant::now() < deadline, "the daemon did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(300));
    // The whole group: `script` and the daemon under it.
    let _ = Command::new("kill").args(["-KILL", "--", &format!("-{}", child.id())]).status();
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "the daemon's group did not end");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::fs::read_to_string(&log).unwrap()
}

use std::os::unix::process::CommandExt;

#[test]
fn the_daemon_log_has_colour_only_on_a_terminal_and_never_with_no_color() {
    let dir = tempfile::tempdir().unwrap();
    let file = serve_log(dir.path(), false, false);
    assert!(file.contains("INFO"), "the log has lines: {file}");
    assert!(!file.contains('\u{1b}'), "escape codes in a redirected log: {file:?}");
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("SKIPPED the terminal half: no `script` (util-linux)");
        return;
    }
    let tty = serve_log(dir.path(), false, true);
    assert!(tty.contains("INFO"), "the log under a terminal: {tty:?}");
    assert!(tty.contains('\u{1b}'), "no colour on a terminal (the control): {tty:?}");
    let plain = serve_log(dir.path(), true, true);
    assert!(plain.contains("INFO"), "{plain:?}");
    assert!(!plain.contains('\u{1b}'), "escape codes with NO_COLOR set: {plain:?}");
}
