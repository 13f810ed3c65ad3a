//! Issue 49, item 5: the CLI's conventions, as a user of pueue, gh, cargo
//! or docker expects them: shell completions; a client config file below
//! the flags and the environment; `gadfly attach` keeping what it writes
//! out of `git status`; a progress line during `gadfly eval`, on a
//! terminal only.

mod common;

use std::path::Path;
use std::process::{Command, Output, Stdio};

use common::{gadfly, git, Daemon, Fixture};
use serde_json::Value;

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

#[test]
fn completions_are_printed_for_each_shell_and_an_unknown_shell_is_refused() {
    let out = gadfly().args(["completions", "bash"]).output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let script = String::from_utf8(out.stdout).unwrap();
    for word in ["campaign", "eval", "attach", "completions", "--force"] {
        assert!(script.contains(word), "the bash completion does not know `{word}`");
    }
    if Command::new("bash").arg("--version").output().is_ok() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("gadfly.bash");
        std::fs::write(&file, &script).unwrap();
        let check = Command::new("bash").arg("-n").arg(&file).output().unwrap();
        assert!(check.status.success(), "bash -n refuses the script: {}", text(&check));
    } else {
        eprintln!("SKIPPED `bash -n`: no bash");
    }
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        let out = gadfly().args(["completions", shell]).output().unwrap();
        assert!(out.status.success(), "{shell}: {}", text(&out));
        assert!(String::from_utf8_lossy(&out.stdout).contains("campaign"), "{shell}: {}", text(&out));
    }
    let out = gadfly().args(["completions", "tcsh"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("invalid value 'tcsh'") && err.contains("bash") && err.contains("zsh"), "{err}");
    assert!(out.stdout.is_empty());
}

/// `gadfly ARGS` with the client config file at `config` and nothing of
/// the environment's (no URL, token or campaign; an empty data dir, so the
/// daemon's token file is not found either), plus `env`.
fn client(config: &Path, env: &[(&str, &str)], args: &[&str]) -> Output {
    let empty = tempfile::tempdir().unwrap();
    let mut cmd = gadfly();
    cmd.env_remove("GADFLY_URL")
        .env_remove("GADFLY_TOKEN")
        .env_remove("GADFLY_CAMPAIGN")
        .env("GADFLY_DATA_DIR", empty.path())
        .env("GADFLY_CONFIG", config);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.args(args).output().unwrap()
}

/// An evaluation ran: `gadfly eval --json` answered a verdict (exit 0 or
/// 1; 2 is an error).
fn evaluated(out: &Output) -> bool {
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    matches!(out.status.code(), Some(0 | 1)) && v["holds"].is_boolean()
}

#[test]
fn the_client_config_file_sits_below_the_flags_and_the_environment() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    let token = d.data_dir.join("token");

    // The file alone: the daemon's URL, its token (from token_file), the campaign.
    std::fs::write(
        &config,
        format!("# gadfly\nurl = \"{}\"\ntoken_file = \"{}\"\ncampaign = \"{id}\"\n", d.url, token.display()),
    )
    .unwrap();
    let out = client(&config, &[], &["eval", "--json"]);
    assert!(evaluated(&out), "{}", text(&out));

    // The environment wins over the file; a flag wins over the environment.
    std::fs::write(
        &config,
        "url = \"http://127.0.0.1:9\"\ntoken_file = \"/nonexistent/gadfly-token\"\ncampaign = \"no-such-campaign\"\n",
    )
    .unwrap();
    let out = client(&config, &[], &["campaign", "list"]);
    assert_eq!(out.status.code(), Some(2), "the control: the file alone names a token that is not there");
    assert!(text(&out).contains(&format!("{}:2:14: key `token_file`", config.display())), "{}", text(&out));
    let env = [("GADFLY_URL", d.url.as_str()), ("GADFLY_TOKEN", d.token.as_str()), ("GADFLY_CAMPAIGN", id.as_str())];
    let out = client(&config, &env, &["eval", "--json"]);
    assert!(evaluated(&out), "{}", text(&out));
    let env = [("GADFLY_URL", d.url.as_str()), ("GADFLY_TOKEN", d.token.as_str()), ("GADFLY_CAMPAIGN", "no-such")];
    let out = client(&config, &env, &["eval", &id, "--json"]);
    assert!(evaluated(&out), "{}", text(&out));
    let out = client(&config, &env, &["eval", "--json"]);
    assert_eq!(out.status.code(), Some(2), "the control: GADFLY_CAMPAIGN names no campaign: {}", text(&out));

    // A key the file may not hold: its file, line and key, before anything is sent.
    std::fs::write(&config, format!("url = \"{}\"\nurll = \"http://x\"\n", d.url)).unwrap();
    let out = client(&config, &env, &["campaign", "list"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("{}:2:1: unknown field `urll`", config.display())), "{err}");

    // No file at all is fine; with no campaign anywhere, the error names the three places.
    let absent = dir.path().join("absent.toml");
    let env = [("GADFLY_URL", d.url.as_str()), ("GADFLY_TOKEN", d.token.as_str())];
    let out = client(&absent, &env, &["campaign", "list"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains(&id), "{}", text(&out));
    let out = client(&absent, &env, &["eval"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("gadfly eval ID")
            && err.contains("GADFLY_CAMPAIGN")
            && err.contains(&absent.display().to_string()),
        "{err}"
    );
    let out = client(&absent, &env, &["claim", "limit", "--why", "w"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("with --campaign"), "{}", text(&out));
}

fn porcelain(dir: &Path) -> String {
    let out = Command::new("git").args(["status", "--porcelain", "--untracked-files=all"]).current_dir(dir).output();
    String::from_utf8(out.unwrap().stdout).unwrap()
}

fn git_path_exclude(dir: &Path) -> std::path::PathBuf {
    let out = Command::new("git").args(["rev-parse", "--git-path", "info/exclude"]).current_dir(dir).output().unwrap();
    let p = std::path::PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
    if p.is_absolute() {
        p
    } else {
        dir.join(p)
    }
}

/// The exclude file `gadfly attach` says it listed its files in.
fn listed_in(out: &Output) -> std::path::PathBuf {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().find_map(|l| l.strip_prefix("listed in ")).expect("attach names the exclude file");
    let path = line.split(" (git status").next().unwrap();
    Path::new(path).canonicalize().unwrap()
}

#[test]
fn attach_keeps_its_files_out_of_git_status_and_detach_restores_the_exclude_file() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let ws = f.ws();
    let exclude = git_path_exclude(&ws);
    // The user's own lines, the last without its line break.
    let original = "# git ls-files --others --exclude-from=.git/info/exclude\n*.swp\n/notes";
    std::fs::write(&exclude, original).unwrap();
    assert_eq!(porcelain(&ws), "", "the fixture's workspace starts clean");

    let out = d.run(&["attach", &id]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(ws.join(".claude/settings.local.json").is_file());
    assert_eq!(listed_in(&out), exclude.canonicalize().unwrap(), "{}", text(&out));
    assert_eq!(porcelain(&ws), "", "git status shows what attach wrote");
    let once = std::fs::read_to_string(&exclude).unwrap();
    assert!(once.starts_with(original), "{once:?}");

    let out = d.run(&["attach", &id]);
    assert!(out.status.success(), "{}", text(&out));
    let twice = std::fs::read_to_string(&exclude).unwrap();
    assert_eq!(twice, once, "attaching twice added a line");
    assert_eq!(twice.lines().filter(|l| *l == "/.claude/settings.local.json").count(), 1, "{twice:?}");

    let out = d.run(&["detach", &id]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(std::fs::read(&exclude).unwrap(), original.as_bytes(), "detach left the exclude file changed");
    // The control: the settings file is still there, and git sees it again.
    assert!(porcelain(&ws).contains(".claude/settings.local.json"), "{}", porcelain(&ws));
}

#[test]
fn attach_in_a_linked_worktree_writes_the_exclude_file_git_reads() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let tree = f.dir.path().join("linked");
    git(&f.ws(), &["worktree", "add", "-q", "--detach", tree.to_str().unwrap()]);
    assert!(tree.join(".git").is_file(), "a linked worktree's .git is a file");
    let exclude = git_path_exclude(&tree);
    let before = std::fs::read(&exclude).ok();

    let out = d.run(&["attach", &id, "--dir", tree.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(listed_in(&out), exclude.canonicalize().unwrap(), "{}", text(&out));
    assert_eq!(porcelain(&tree), "", "git status in the worktree shows what attach wrote");
    let out = d.run(&["detach", &id, "--dir", tree.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(std::fs::read(&exclude).ok(), before, "detach left the exclude file changed");
}

/// A campaign whose harness takes a few seconds, so a progress line has
/// time to be drawn.
fn slow_campaign() -> (Fixture, Daemon, String) {
    let f = Fixture::with_run("", "sleep 2; sh harness/run.sh {results}");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    (f, d, id)
}

#[test]
fn eval_draws_no_progress_when_stderr_is_not_a_terminal() {
    let (f, d, id) = slow_campaign();
    let err = f.dir.path().join("stderr");
    let out = d
        .cmd()
        .args(["eval", &id, "--force"])
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&err).unwrap())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "the initial kernel fails the predicate: {}", text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("FAILS"), "{}", text(&out));
    let err = std::fs::read_to_string(&err).unwrap();
    assert!(!err.contains("evaluating"), "progress in a redirected stderr: {err:?}");
    assert!(!err.contains('\u{1b}') && !err.contains('\r'), "escape codes in a redirected stderr: {err:?}");
}

#[test]
fn eval_draws_its_progress_on_a_terminal_but_not_with_json() {
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("SKIPPED: no `script` (util-linux) for a pseudo-terminal");
        return;
    }
    let (_f, d, id) = slow_campaign();
    let on_terminal = |args: &str| -> String {
        // `script -qefc LINE /dev/null`: LINE run on a pseudo-terminal.
        let line = format!("{} {args} 2>&1", env!("CARGO_BIN_EXE_gadfly"));
        let out = Command::new("script")
            .args(["-qefc", &line, "/dev/null"])
            .env("GADFLY_URL", &d.url)
            .env("GADFLY_TOKEN", &d.token)
            .env_remove("GADFLY_DATA_DIR")
            .env("TERM", "xterm")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let shown = on_terminal(&format!("eval {id} --force"));
    assert!(shown.contains(&format!("evaluating {id}: ")), "no progress line on a terminal: {shown:?}");
    // The step the daemon reports: the harness's run sleeps 2 s.
    assert!(shown.contains("running the harness"), "the line names the evaluation's step: {shown:?}");
    assert!(shown.contains('\r') || shown.contains('\u{1b}'), "the line is never redrawn: {shown:?}");
    assert!(shown.contains("FAILS"), "the verdict follows: {shown:?}");
    let json = on_terminal(&format!("eval {id} --force --json"));
    assert!(json.contains("\"holds\""), "{json:?}");
    assert!(!json.contains("evaluating"), "progress with --json: {json:?}");
}

/// The daemon says what a running evaluation is doing (the progress
/// line's source): nothing while none runs, the step while one does; an
/// unknown campaign is a 404.
#[test]
fn the_evaluation_progress_names_the_running_step() {
    let (_f, d, id) = slow_campaign();
    let idle = d.api_get(&format!("/campaigns/{id}/evaluation-progress"));
    assert_eq!(idle, serde_json::json!({"evaluating": false}));
    let (url, token, id2) = (d.url.clone(), d.token.clone(), id.clone());
    let eval = std::thread::spawn(move || {
        gadfly().args(["eval", &id2, "--force", "--json"]).env("GADFLY_URL", url).env("GADFLY_TOKEN", token).output()
    });
    let mut steps = std::collections::BTreeSet::new();
    let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !eval.is_finished() && std::time::Instant::now() < until {
        let now = d.api_get(&format!("/campaigns/{id}/evaluation-progress"));
        if now["evaluating"] == true {
            steps.insert(now["step"].as_str().unwrap_or("?").to_string());
            assert!(now["seconds"].as_f64().is_some_and(|s| s >= 0.0), "{now}");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    eval.join().unwrap().unwrap();
    assert!(steps.contains("running the harness"), "the 2 s run was seen: {steps:?}");
    let done = d.api_get(&format!("/campaigns/{id}/evaluation-progress"));
    assert_eq!(done, serde_json::json!({"evaluating": false}), "nothing runs once the verdict is in");
    let unknown = Command::new("curl")
        .args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "-H"])
        .arg(format!("Authorization: Bearer {}", d.token))
        .arg(format!("{}/api/v1/campaigns/no-such-campaign/evaluation-progress", d.url))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&unknown.stdout), "404");
}

/// The top-level help and each group's help list one short line a command,
/// as `cargo --help` or `gh --help` do; the detail is in `gadfly X --help`.
#[test]
fn help_lists_one_short_line_a_command_with_the_detail_one_level_down() {
    let groups: [&[&str]; 8] =
        [&[], &["campaign"], &["audit"], &["bank"], &["moments"], &["beam"], &["replay"], &["hook"]];
    for group in groups {
        let mut args = group.to_vec();
        args.push("--help");
        let out = gadfly().args(&args).output().unwrap();
        let help = text(&out);
        assert!(out.status.success(), "gadfly {args:?}: {help}");
        let commands: Vec<&str> = help
            .lines()
            .skip_while(|l| !l.starts_with("Commands:"))
            .skip(1)
            .take_while(|l| !l.trim().is_empty())
            .collect();
        assert!(!commands.is_empty() || !group.is_empty(), "no commands listed: {help}");
        for line in commands {
            assert!(line.len() <= 100, "gadfly {args:?}: a command's summary is longer than a line:\n{line}");
            assert!(line.starts_with("  "), "gadfly {args:?}: a summary runs on to a second line:\n{line}");
        }
    }
    // The detail is one level down.
    let calibrate = text(&gadfly().args(["calibrate", "--help"]).output().unwrap());
    assert!(calibrate.contains("Exit 0 when the") && calibrate.contains("harness is fair"), "{calibrate}");
    let redteam = text(&gadfly().args(["redteam", "--help"]).output().unwrap());
    assert!(redteam.contains("BROKEN (with the check to add)"), "{redteam}");
}
