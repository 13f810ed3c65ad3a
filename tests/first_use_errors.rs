//! What a new user runs into first (issue #49): each mistake gets an
//! error that names what is wrong and what to do, a 4xx when it is the
//! caller's to fix (5xx stays for gadfly's own faults), and no printed URL
//! holds the master token.

mod common;

use common::{Daemon, Fixture};

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).to_string()
}

/// The workspace folder removed after `campaign create`: eval, calibrate,
/// a run and the red-team battery are refused with a 409 naming the folder
/// and the campaign and saying what to do; a stop attempt is blocked with
/// the same words.
#[test]
fn a_deleted_workspace_is_a_409_that_names_the_folder_and_what_to_do() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let ws = f.ws().canonicalize().unwrap();
    std::fs::rename(&ws, f.dir.path().join("moved")).unwrap();

    let client = reqwest::blocking::Client::new();
    for (path, body) in [
        ("evaluate", None),
        ("calibrate", None),
        ("redteam", None),
        ("runs", Some(serde_json::json!({"agent": "command"}))),
    ] {
        let mut req = client.post(format!("{}/api/v1/campaigns/{id}/{path}", d.url)).bearer_auth(&d.token);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let r = req.send().unwrap();
        let status = r.status().as_u16();
        let v: serde_json::Value = r.json().unwrap();
        assert_eq!(status, 409, "{path}: {v}");
        assert_eq!(v["code"], "conflict", "{path}: {v}");
        let m = v["message"].as_str().unwrap();
        for word in [ws.display().to_string().as_str(), id.as_str(), "no longer exists", "restore", "campaign create"] {
            assert!(m.contains(word), "{path}: `{word}` missing from: {m}");
        }
    }

    let out = d.run(&["eval", &id]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("no longer exists") && err.contains("HTTP 409"), "{err}");
    assert!(!err.contains("internal"), "{err}");

    let answer = d.stop(&id, "done");
    let reason = common::reason(&answer);
    assert!(reason.contains("no longer exists"), "{answer:?}");
}

/// `gadfly serve --database-url ARGS` with a fresh data dir: its exit
/// status and stderr.
fn serve_on(database_url: &str) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let out = common::gadfly()
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path())
        .args(["--database-url", database_url])
        .env_remove("GADFLY_DATABASE_URL")
        .output()
        .unwrap();
    (out.status.success(), stderr(&out))
}

/// A PostgreSQL URL where nothing listens: the daemon stops at once with
/// the host and port, the cause and what to do, not "pool timed out".
#[test]
fn an_unreachable_postgres_fails_fast_naming_host_port_cause_and_fix() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let (ok, err) = serve_on(&format!("postgres://gadfly:secret@127.0.0.1:{port}/test"));
    assert!(!ok, "{err}");
    for word in [format!("127.0.0.1:{port}").as_str(), "connection refused", "start PostgreSQL", "--database-url"] {
        assert!(err.contains(word), "`{word}` missing from: {err}");
    }
    assert!(!err.contains("pool timed out") && !err.contains("secret"), "{err}");
}

/// A server that answers, with a database that does not exist (the
/// PostgreSQL of the tests at 127.0.0.1:5432, when it runs): the message
/// names the database and how to create it.
#[test]
fn a_missing_postgres_database_is_named_with_how_to_create_it() {
    if std::net::TcpStream::connect("127.0.0.1:5432").is_err() {
        eprintln!("no PostgreSQL at 127.0.0.1:5432; skipped");
        return;
    }
    let (ok, err) = serve_on("postgres://postgres@127.0.0.1:5432/gadfly_no_such_db");
    assert!(!ok, "{err}");
    for word in ["127.0.0.1:5432", "gadfly_no_such_db", "does not exist", "createdb"] {
        assert!(err.contains(word), "`{word}` missing from: {err}");
    }
}

/// The fixture's spec with `edit` applied, written back.
fn edit_spec(f: &Fixture, edit: impl Fn(&str) -> String) {
    let text = std::fs::read_to_string(f.spec()).unwrap();
    std::fs::write(f.spec(), edit(&text)).unwrap();
}

/// `campaign create` of a spec whose `[harness] candidate` glob matches no
/// file of the workspace: refused, naming the glob, the spec's file, line
/// and field, and what to do.
#[test]
fn a_candidate_glob_that_matches_nothing_is_refused_at_create() {
    let f = Fixture::new("");
    edit_spec(&f, |t| t.replacen("[harness]\n", "[harness]\ncandidate = [\"kernel/**\"]\n", 1));
    let d = Daemon::start(&f.data_dir());
    let out = d.cmd().args(["campaign", "create", "--no-calibrate"]).arg(f.spec()).output().unwrap();
    assert!(!out.status.success());
    let err = stderr(&out);
    for word in ["campaign.toml:6:", "harness.candidate", "`kernel/**` matches no file", "fix the glob"] {
        assert!(err.contains(word), "`{word}` missing from: {err}");
    }
    assert!(!err.contains("HTTP 5"), "{err}");
    // The glob fixed, the same spec is taken.
    edit_spec(&f, |t| t.replace("kernel/**", "candidate.txt"));
    d.create_campaign(&f.spec());
}

/// A misspelt section and a misspelt key: the message says which it is,
/// where, and the nearest valid name.
#[test]
fn a_misspelt_section_or_key_is_named_with_the_nearest_valid_one() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    edit_spec(&f, |t| t.replacen("[harness]", "[harnes]", 1));
    let err = stderr(&d.cmd().args(["campaign", "create", "--no-calibrate"]).arg(f.spec()).output().unwrap());
    assert!(err.contains("campaign.toml:5:2: field `harnes`: unknown section `harnes`; did you mean `harness`?"), "{err}");
    assert!(!err.contains("harnes.harnes"), "{err}");
    edit_spec(&f, |t| t.replacen("[harnes]", "[harness]", 1).replacen("timeout_s", "timeout_sec", 1));
    let err = stderr(&d.cmd().args(["campaign", "create", "--no-calibrate"]).arg(f.spec()).output().unwrap());
    assert!(
        err.contains("field `harness.timeout_sec`: unknown key `timeout_sec` in [harness]; did you mean `timeout_s`?"),
        "{err}"
    );
}

/// `PUT /notify` with a webhook whose secret variable the daemon's
/// environment lacks: refused with a 409 naming the variable and saying it
/// must be set where `gadfly serve` starts; with it set, taken.
#[test]
fn a_webhook_secret_missing_from_the_daemons_environment_is_refused_at_put() {
    let f = Fixture::new("");
    let mut cmd = Daemon::serve_command(&f.data_dir());
    cmd.env("GADFLY_TEST_HOOK_SECRET_SET", "s3cret").env_remove("GADFLY_TEST_HOOK_SECRET_UNSET");
    let d = Daemon::start_cmd(&f.data_dir(), cmd);
    let id = d.create_campaign(&f.spec());
    let put = |env: &str| {
        let body = serde_json::json!({"webhooks": [
            {"url": "https://hooks.example.com/x", "events": ["block_streak"], "secret_env": env}]});
        let r = reqwest::blocking::Client::new()
            .put(format!("{}/api/v1/campaigns/{id}/notify", d.url))
            .bearer_auth(&d.token)
            .json(&body)
            .send()
            .unwrap();
        (r.status().as_u16(), r.json::<serde_json::Value>().unwrap())
    };
    let (status, v) = put("GADFLY_TEST_HOOK_SECRET_UNSET");
    assert_eq!(status, 409, "{v}");
    let m = v["message"].as_str().unwrap();
    for word in ["GADFLY_TEST_HOOK_SECRET_UNSET", "environment of `gadfly serve` before it starts", "restart"] {
        assert!(m.contains(word), "`{word}` missing from: {m}");
    }
    let (status, v) = put("GADFLY_TEST_HOOK_SECRET_SET");
    assert_eq!(status, 200, "{v}");
}

/// `gadfly demo` (serving on after the replay) prints a console link with a
/// one-time code, never the master token; the link logs a browser in once.
#[test]
fn the_demo_prints_a_one_time_login_link_not_the_master_token() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut child = common::gadfly()
        .args(["demo", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(&data)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut printed = String::new();
    let mut console = None;
    for line in std::io::BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        printed.push_str(&line);
        printed.push('\n');
        if let Some(rest) = line.strip_prefix("console: ") {
            console = Some(rest.split_whitespace().next().unwrap().to_string());
            break;
        }
    }
    let token = std::fs::read_to_string(data.join("token")).unwrap().trim().to_string();
    let link = console.unwrap_or_else(|| panic!("no console link printed:\n{printed}"));
    let browser = reqwest::blocking::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let first = browser.get(&link).send().unwrap();
    let again = browser.get(&link).send().unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert!(!printed.contains(&token), "the master token is printed:\n{printed}");
    assert!(link.contains("/login?code=") && !link.contains("token="), "{link}");
    assert!(first.headers().contains_key("set-cookie"), "the link does not log in: {}", first.status());
    assert!(!again.headers().contains_key("set-cookie"), "the link logs in twice");
}
