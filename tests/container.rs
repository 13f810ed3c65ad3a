//! The daemon in its container image, for real: `localhost/gadfly:ci`
//! (docker/Containerfile.ci, built by tests/container/build.sh from the
//! binary under test) run with rootful podman, the daemon as uid 10001
//! inside, its data dir a named volume, its port published on loopback.
//!
//! 1. A campaign driven from the host through the published port (hooks,
//!    the console, `/metrics`); `podman restart`; nothing lost.
//! 2. The trusted deployment: the agent's user on the host (another uid)
//!    cannot read the token, edit the database, forge the spool or kill the
//!    daemon, and `gadfly doctor` says so; the same user running the daemon
//!    itself (no container) is told it is not tamper-proof.
//! 3. docker/compose.yaml with podman-compose (PostgreSQL, the daemon, a
//!    worker; tests/container/compose.ci.yaml names images that can be had
//!    here): a stop blocked, then let through, on the worker's evaluations.
//!
//! Needs root, podman and podman-compose (CI runs `tests/container/build.sh` first); it
//! prints SKIPPED without them, and fails under GADFLY_REQUIRE_CONTAINER=1.

mod common;

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::{Daemon, Fixture, ALL_PASS};
use serde_json::{json, Value};

const IMAGE: &str = "localhost/gadfly:ci";
/// The uid the agent (and its human) runs as on the host in test 2.
const AGENT_UID: u32 = 65531;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn podman() -> Command {
    let mut c = Command::new("podman");
    c.env("CONTAINERS_CONF", repo().join("tests/container/containers.conf"));
    c
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

fn podman_ok(args: &[&str]) -> String {
    let out = podman().args(args).output().expect("podman");
    assert!(out.status.success(), "podman {args:?}: {}", text(&out));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Whether the tests can run here (root, podman); else SKIPPED, or a
/// failure under GADFLY_REQUIRE_CONTAINER=1. The image is built once.
fn ready() -> bool {
    static READY: OnceLock<Result<(), String>> = OnceLock::new();
    let r = READY.get_or_init(|| {
        let probe = tempfile::NamedTempFile::new().unwrap();
        if std::os::unix::fs::MetadataExt::uid(&probe.as_file().metadata().unwrap()) != 0 {
            return Err("rootful podman and switching users need root".into());
        }
        if podman().arg("--version").output().map(|o| !o.status.success()).unwrap_or(true) {
            return Err("podman is not installed (tests/container/build.sh installs it)".into());
        }
        let t = Instant::now();
        let out = Command::new("bash")
            .arg(repo().join("tests/container/build.sh"))
            .arg(env!("CARGO_BIN_EXE_gadfly"))
            .output()
            .unwrap();
        if !out.status.success() {
            return Err(format!("tests/container/build.sh failed: {}", text(&out)));
        }
        eprintln!("{}(image ready in {:.1} s)", String::from_utf8_lossy(&out.stdout), t.elapsed().as_secs_f64());
        Ok(())
    });
    match r {
        Ok(()) => true,
        Err(why) => {
            assert!(std::env::var_os("GADFLY_REQUIRE_CONTAINER").is_none(), "GADFLY_REQUIRE_CONTAINER=1: {why}");
            eprintln!("SKIPPED: {why}");
            false
        }
    }
}

/// A running container of the image and its volume, both removed on drop.
struct Container {
    name: String,
    volume: String,
    url: String,
}

impl Container {
    /// Runs the image with a fresh volume for the data dir, `shared` (a
    /// host folder) bind-mounted at the same path, and port 7878 published
    /// on a free loopback port; waits until the daemon answers.
    fn start(tag: &str, shared: &Path) -> Container {
        let name = format!("gadfly-ci-{tag}-{}", std::process::id());
        let volume = format!("{name}-data");
        let _ = podman().args(["rm", "-f", &name]).output();
        let _ = podman().args(["volume", "rm", "-f", &volume]).output();
        let mount = format!("{}:{}", shared.display(), shared.display());
        podman_ok(&[
            "run",
            "-d",
            // As docker/compose.yaml: the candidate's sandbox mounts a /proc.
            "--security-opt",
            "systempaths=unconfined",
            "--name",
            &name,
            "-v",
            &format!("{volume}:/home/gadfly/data"),
            "-v",
            &mount,
            "-p",
            "127.0.0.1::7878",
            IMAGE,
        ]);
        let port = podman_ok(&["port", &name, "7878"]);
        let url = format!("http://{}", port.lines().next().unwrap().trim());
        let c = Container { name, volume, url };
        c.wait_healthy();
        c
    }

    fn wait_healthy(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let ok = reqwest::blocking::get(format!("{}/api/v1/health", self.url))
                .map(|r| r.status().is_success())
                .unwrap_or(false);
            if ok {
                return;
            }
            assert!(Instant::now() < deadline, "the daemon in {} did not answer: {}", self.name, self.logs());
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn logs(&self) -> String {
        podman().args(["logs", "--tail", "40", &self.name]).output().map(|o| text(&o)).unwrap_or_default()
    }

    fn exec(&self, args: &[&str]) -> String {
        let mut all = vec!["exec", self.name.as_str()];
        all.extend_from_slice(args);
        podman_ok(&all)
    }

    /// The master token, read inside the container (as root on the host
    /// can: the admin's way, docker/README.md).
    fn token(&self) -> String {
        self.exec(&["cat", "/home/gadfly/data/token"])
    }

    /// Where the volume lies on the host.
    fn volume_dir(&self) -> PathBuf {
        PathBuf::from(podman_ok(&["volume", "inspect", "-f", "{{.Mountpoint}}", &self.volume]))
    }

    /// The daemon's pid on the host.
    fn pid(&self) -> u32 {
        podman_ok(&["inspect", "-f", "{{.State.Pid}}", &self.name]).parse().unwrap()
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("--- {} (last lines)\n{}", self.name, self.logs());
        }
        let _ = podman().args(["rm", "-f", "-t", "2", &self.name]).output();
        let _ = podman().args(["volume", "rm", "-f", &self.volume]).output();
    }
}

/// The API of a daemon at `url` with `token`.
struct Api {
    url: String,
    token: String,
    http: reqwest::blocking::Client,
}

impl Api {
    fn new(url: &str, token: &str) -> Api {
        let http = reqwest::blocking::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(600))
            .build()
            .unwrap();
        Api { url: url.to_string(), token: token.to_string(), http }
    }

    fn get(&self, path: &str) -> Value {
        let r = self.http.get(format!("{}/api/v1{path}", self.url)).bearer_auth(&self.token).send().unwrap();
        assert!(r.status().is_success(), "GET {path}: {}", r.status());
        r.json().unwrap()
    }

    fn post(&self, path: &str, body: &Value) -> Value {
        let r =
            self.http.post(format!("{}/api/v1{path}", self.url)).bearer_auth(&self.token).json(body).send().unwrap();
        assert!(r.status().is_success(), "POST {path}: {}", r.status());
        r.json().unwrap()
    }

    fn create_campaign(&self, spec: &Path) -> String {
        let text = std::fs::read_to_string(spec).unwrap();
        let created = self.post("/campaigns", &json!({"spec_toml": text, "spec_path": spec.display().to_string()}));
        created["id"].as_str().unwrap().to_string()
    }
}

/// A `gadfly` command for the daemon at `url` with `token`, run as `uid`
/// (None: this process's user) with HOME at `home`.
fn gadfly_as(uid: Option<u32>, home: &Path, url: &str, token: &str) -> Command {
    let mut c = match uid {
        Some(u) => {
            let mut c = Command::new("setpriv");
            c.args([&format!("--reuid={u}"), &format!("--regid={u}"), "--clear-groups"]);
            c.arg(env!("CARGO_BIN_EXE_gadfly"));
            c
        }
        None => common::gadfly(),
    };
    c.env("GADFLY_URL", url)
        .env("GADFLY_TOKEN", token)
        .env("HOME", home)
        .env("GADFLY_SPOOL_DIR", home.join("spool"))
        .env_remove("GADFLY_DATA_DIR");
    c
}

/// Runs a hook command with `payload` on stdin; its exit status must be 0.
fn hook(mut cmd: Command, payload: &Value) -> Option<Value> {
    let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    child.stdin.take().unwrap().write_all(payload.to_string().as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "hook: {}", text(&out));
    let s = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (!s.is_empty()).then(|| serde_json::from_str(&s).expect("hook stdout is JSON"))
}

fn stop_payload(session: &str, claim: &str) -> Value {
    json!({"session_id": session, "transcript_path": "/nonexistent/t.jsonl", "cwd": "/tmp",
        "hook_event_name": "Stop", "stop_hook_active": false, "last_assistant_message": claim})
}

/// Makes the fixture readable by the daemon's uid in the container (dirs
/// 0755, files 0644), owned by `owner` when given.
fn share(dir: &Path, owner: Option<u32>) {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(p) = stack.pop() {
        let md = std::fs::symlink_metadata(&p).unwrap();
        if md.is_dir() {
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
            stack.extend(std::fs::read_dir(&p).unwrap().flatten().map(|e| e.path()));
        } else if md.is_file() {
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        }
        if let Some(uid) = owner {
            std::os::unix::fs::lchown(&p, Some(uid), Some(uid)).unwrap();
        }
    }
}

/// A fixture campaign whose spec has no warnings (a declared candidate, `{seed}`).
fn fixture() -> Fixture {
    let f = Fixture::new("");
    let spec = std::fs::read_to_string(f.spec()).unwrap();
    // The harness gets `{seed}` too (it ignores it): a run without one warns.
    let spec = spec.replacen("{results}\"", "{results} {seed}\"", 1);
    std::fs::write(f.spec(), spec.replacen("[harness]\n", "[harness]\ncandidate = [\"candidate.txt\"]\n", 1)).unwrap();
    f
}

fn kinds(events: &Value) -> Vec<String> {
    events.as_array().unwrap().iter().map(|e| e["kind"].as_str().unwrap_or("").to_string()).collect()
}

#[test]
fn a_campaign_through_the_container_survives_a_restart() {
    if !ready() {
        return;
    }
    let f = fixture();
    share(f.dir.path(), None);
    let home = tempfile::tempdir().unwrap();
    let c = Container::start("campaign", f.dir.path());
    assert_eq!(c.exec(&["id", "-u"]), "10001", "the daemon's user in the image");
    let token = c.token();
    let api = Api::new(&c.url, &token);
    let key = api.get("/health")["daemon_key"].as_str().unwrap().to_string();

    // The campaign, created from the host with the real CLI.
    let out = gadfly_as(None, home.path(), &c.url, &token).args(["campaign", "create", "--no-calibrate"]).arg(f.spec()).output().unwrap();
    assert!(out.status.success(), "campaign create: {}", text(&out));
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let hook_token = api.get(&format!("/campaigns/{id}/hook-token"))["token"].as_str().unwrap().to_string();
    let agent_hook = |event: &str| {
        let mut cmd = gadfly_as(None, home.path(), &c.url, &hook_token);
        cmd.args(["hook", "claude-code", event, "--campaign", &id]);
        if event == "stop" {
            cmd.args(["--daemon-key", &key]);
        }
        cmd
    };

    // The agent's hooks over the published port: a tool call, a stop that
    // is blocked (the candidate is no faster), a stop that is let through.
    let tool = json!({"session_id": "s-ct", "transcript_path": "/nonexistent/t.jsonl", "cwd": "/tmp",
        "hook_event_name": "PostToolUse", "tool_name": "Bash",
        "tool_input": {"command": "make"}, "tool_response": {"stdout": "ok"}});
    hook(agent_hook("post-tool-use"), &tool);
    let blocked = hook(agent_hook("stop"), &stop_payload("s-ct", "Done.")).expect("the unchanged candidate is blocked");
    assert_eq!(blocked["decision"], "block", "{blocked}");
    assert!(blocked["reason"].as_str().unwrap().contains("speedup"), "{blocked}");
    f.set_candidate(ALL_PASS);
    assert_eq!(hook(agent_hook("stop"), &stop_payload("s-ct", "Done: every scenario is faster.")), None);

    // The console: a one-time code logs a browser in; the page lists the campaign.
    let login = api.post("/login-codes", &json!({}));
    let link = login["url"].as_str().unwrap();
    assert!(link.starts_with(&format!("{}/login?code=", c.url)), "{login}");
    let r = api.http.get(link).send().unwrap();
    assert_eq!(r.status().as_u16(), 303, "the login link redirects");
    let cookie = r.headers()["set-cookie"].to_str().unwrap().split(';').next().unwrap().to_string();
    let page = api.http.get(format!("{}/campaigns/{id}", c.url)).header("cookie", &cookie).send().unwrap();
    assert_eq!(page.status().as_u16(), 200);
    let html = page.text().unwrap();
    assert!(html.contains("<html") && html.contains("gadfly"), "{html}");
    // The page's own API calls, with the cookie alone.
    let shown = api.http.get(format!("{}/api/v1/campaigns/{id}", c.url)).header("cookie", &cookie).send().unwrap();
    assert!(shown.status().is_success(), "{}", shown.status());
    assert_eq!(shown.json::<Value>().unwrap()["id"], id.as_str());
    let anon = api.http.get(format!("{}/campaigns/{id}", c.url)).send().unwrap();
    assert_ne!(anon.status().as_u16(), 200, "the console needs the login");

    // /metrics, with the token.
    let metrics = api.http.get(format!("{}/metrics", c.url)).bearer_auth(&token).send().unwrap();
    assert!(metrics.status().is_success());
    let metrics = metrics.text().unwrap();
    assert!(metrics.contains("gadfly_hook_duration_seconds_count{event=\"stop\""), "{metrics}");
    assert_eq!(api.http.get(format!("{}/metrics", c.url)).send().unwrap().status().as_u16(), 401);

    // The image's health check (curl inside the container).
    podman_ok(&["healthcheck", "run", &c.name]);

    // A restart: the same volume, nothing lost.
    let stops = api.get(&format!("/campaigns/{id}/stops"));
    let events = api.get(&format!("/campaigns/{id}/log"));
    assert_eq!(stops.as_array().unwrap().len(), 2, "{stops}");
    let k = kinds(&events);
    for kind in ["campaign.created", "hook.post_tool_use", "hook.stop", "evaluation", "decision"] {
        assert!(k.iter().any(|x| x == kind), "no {kind} event in {k:?}");
    }
    podman_ok(&["restart", "-t", "10", &c.name]);
    assert_eq!(
        podman_ok(&["port", &c.name, "7878"]).lines().next().map(|l| format!("http://{}", l.trim())),
        Some(c.url.clone())
    );
    c.wait_healthy();
    assert_eq!(c.token(), token, "the token is the volume's");
    let api = Api::new(&c.url, &token);
    assert_eq!(api.get("/health")["daemon_key"], key.as_str(), "the key is the volume's");
    assert_eq!(api.get(&format!("/campaigns/{id}/stops")), stops, "every stop attempt is still there");
    let after = api.get(&format!("/campaigns/{id}/log"));
    let before: Vec<&Value> = events.as_array().unwrap().iter().collect();
    assert_eq!(
        after.as_array().unwrap()[..before.len()].iter().collect::<Vec<_>>(),
        before,
        "every event is still there"
    );
    // And the campaign goes on: the passing tree is answered from the store.
    assert_eq!(hook(agent_hook("stop"), &stop_payload("s-ct", "Still done.")), None);
    eprintln!(
        "container: {} stops, {} events before the restart, all there after it ({})",
        stops.as_array().unwrap().len(),
        before.len(),
        c.url
    );
}

/// A shell command run as `uid` on the host.
fn sh_as(uid: u32, home: &Path, script: &str) -> Output {
    Command::new("setpriv")
        .args([&format!("--reuid={uid}"), &format!("--regid={uid}"), "--clear-groups"])
        .args(["sh", "-c", script])
        .env("HOME", home)
        .env("XDG_RUNTIME_DIR", home)
        .output()
        .unwrap()
}

fn denied(what: &str, o: &Output) {
    assert!(!o.status.success(), "{what} succeeded: {}", text(o));
    let t = text(o);
    assert!(["Permission denied", "not permitted"].iter().any(|w| t.contains(w)), "{what}: {t}");
    eprintln!("refused as it should: {what}: {}", t.trim().lines().last().unwrap_or(""));
}

#[test]
fn the_daemon_in_a_container_is_out_of_the_agents_reach_and_doctor_says_so() {
    if !ready() {
        return;
    }
    // The workspace is the agent's (its user's) own, readable by the daemon.
    let f = fixture();
    share(f.dir.path(), Some(AGENT_UID));
    let home = f.dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    std::os::unix::fs::chown(&home, Some(AGENT_UID), Some(AGENT_UID)).unwrap();
    let c = Container::start("trust", f.dir.path());
    let token = c.token();
    let api = Api::new(&c.url, &token);
    let key = api.get("/health")["daemon_key"].as_str().unwrap().to_string();
    let id = api.create_campaign(&f.spec());
    let hook_token = api.get(&format!("/campaigns/{id}/hook-token"))["token"].as_str().unwrap().to_string();
    let vol = c.volume_dir();
    let pid = c.pid();
    let v = vol.display();

    // The user attaches the campaign (the Stop hook pins the daemon's key).
    let out = gadfly_as(Some(AGENT_UID), &home, &c.url, &token).args(["attach", &id]).output().unwrap();
    assert!(out.status.success(), "attach: {}", text(&out));
    assert!(!text(&out).contains("NOT tamper-proof"), "{}", text(&out));

    // What the agent tries against the daemon's files and process.
    let a = |script: &str| sh_as(AGENT_UID, &home, script);
    denied("reading the master token", &a(&format!("cat '{v}/token'")));
    denied("reading the signing key", &a(&format!("cat '{v}/daemon-key'")));
    denied("appending to gadfly.db", &a(&format!("printf x >> '{v}/gadfly.db'")));
    denied("listing the data dir", &a(&format!("ls '{v}'")));
    // The daemon replays its data dir's spool at start: a forged stop there
    // would be recorded as if a hook had spooled it.
    let forged = format!("{v}/spool/forged.json");
    denied("forging a spooled call in the daemon's spool", &a(&format!("printf '{{}}' > '{forged}'")));
    denied("reading the token through /proc/PID/root", &a(&format!("cat /proc/{pid}/root/home/gadfly/data/token")));
    denied("killing the daemon", &a(&format!("kill -9 {pid}")));
    denied("stopping the daemon", &a(&format!("kill -STOP {pid}")));
    let conmon = podman_ok(&["inspect", "-f", "{{.State.ConmonPid}}", &c.name]);
    denied("killing the container's monitor", &a(&format!("kill -9 {conmon}")));
    assert!(Path::new(&format!("/proc/{pid}")).exists(), "the daemon is gone");
    assert_eq!(podman_ok(&["inspect", "-f", "{{.State.Status}}", &c.name]), "running");
    assert!(!Path::new(&forged).exists());

    // The agent's Stop hook, pinned to the daemon's key, is judged as ever.
    let stop = |claim: &str| {
        let mut cmd = gadfly_as(Some(AGENT_UID), &home, &c.url, &hook_token);
        cmd.args(["hook", "claude-code", "stop", "--daemon-key", &key, "--campaign", &id]);
        hook(cmd, &stop_payload("s-agent", claim))
    };
    let blocked = stop("Done.").expect("the unchanged candidate is blocked");
    assert!(blocked["reason"].as_str().unwrap().contains("you may not stop yet"), "{blocked}");
    f.set_candidate(ALL_PASS);
    assert_eq!(stop("Done, every scenario passes."), None);

    // `gadfly doctor` as that user: sound.
    let doctor = gadfly_as(Some(AGENT_UID), &home, &c.url, &token)
        .args(["doctor", &id, "--data-dir"])
        .arg(&vol)
        .output()
        .unwrap();
    let report = text(&doctor);
    eprintln!("gadfly doctor (daemon in the container), as uid {AGENT_UID}:\n{report}");
    assert_eq!(doctor.status.code(), Some(0), "{report}");
    assert!(report.contains("no problem found"), "{report}");
    assert!(report.contains(&format!("ok: the data dir {v} is not readable by this user")), "{report}");
    assert!(report.contains("ok: the daemon's port is held by a process of root (uid 0)"), "{report}");
    assert!(report.contains(&format!("the workspace belongs to uid {AGENT_UID}")), "{report}");
    assert!(report.contains("pins the daemon's key"), "{report}");
    assert!(!report.contains("PROBLEM"), "{report}");

    // Without the container: the same user runs the daemon itself (today's
    // default). Its files are the agent's to read, and doctor says so.
    let data = f.dir.path().join("same-user-data");
    std::fs::create_dir_all(&data).unwrap();
    std::os::unix::fs::chown(&data, Some(AGENT_UID), Some(AGENT_UID)).unwrap();
    let mut serve = Command::new("setpriv");
    serve
        .args([&format!("--reuid={AGENT_UID}"), &format!("--regid={AGENT_UID}"), "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_gadfly"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(&data)
        .env("HOME", &home);
    let d = Daemon::start_cmd(&data, serve);
    let same = Api::new(&d.url, &d.token);
    let id2 = same.create_campaign(&f.spec());
    let read = a(&format!("cat '{}/token'", data.display()));
    assert!(read.status.success(), "the same user reads the token: {}", text(&read));
    let doctor = gadfly_as(Some(AGENT_UID), &home, &d.url, &d.token)
        .args(["doctor", &id2, "--data-dir"])
        .arg(&data)
        .output()
        .unwrap();
    let report = text(&doctor);
    eprintln!("gadfly doctor (daemon as the agent's own user), as uid {AGENT_UID}:\n{report}");
    assert_eq!(doctor.status.code(), Some(1), "{report}");
    assert!(report.contains("NOT tamper-proof"), "{report}");
}

/// docker/compose.yaml brought up with podman-compose (with
/// tests/container/compose.ci.yaml for images that can be had here), torn
/// down on drop: its containers and their volumes, named and anonymous,
/// and its network.
struct Compose {
    project: String,
    dir: tempfile::TempDir,
}

impl Compose {
    fn run(&self, args: &[&str]) -> Output {
        let out = Command::new("podman-compose")
            .env("CONTAINERS_CONF", repo().join("tests/container/containers.conf"))
            .current_dir(self.dir.path())
            .args(["-p", &self.project, "-f", "compose.yaml", "-f", "compose.ci.yaml"])
            .args(args)
            .output()
            .expect("podman-compose");
        assert!(out.status.success(), "podman-compose {args:?}: {}", text(&out));
        out
    }

    fn container(&self, service: &str) -> String {
        format!("{}_{service}_1", self.project)
    }
}

impl Drop for Compose {
    fn drop(&mut self) {
        let label = format!("label=io.podman.compose.project={}", self.project);
        let ids = podman().args(["ps", "-a", "-q", "--filter", &label]).output().map(|o| o.stdout).unwrap_or_default();
        for id in String::from_utf8_lossy(&ids).split_whitespace() {
            if std::thread::panicking() {
                let logs = podman().args(["logs", "--tail", "30", id]).output().map(|o| text(&o)).unwrap_or_default();
                eprintln!("--- {id} (last lines)\n{logs}");
            }
            let _ = podman().args(["rm", "-f", "-v", "-t", "2", id]).output();
        }
        for v in ["pgdata", "gadfly-data"] {
            let _ = podman().args(["volume", "rm", "-f", &format!("{}_{v}", self.project)]).output();
        }
        let _ = podman().args(["network", "rm", "-f", &format!("{}_default", self.project)]).output();
    }
}

#[test]
fn the_compose_file_runs_a_stop_through_postgres_and_a_worker() {
    if !ready() {
        return;
    }
    if Command::new("podman-compose").arg("version").output().map(|o| !o.status.success()).unwrap_or(true) {
        assert!(
            std::env::var_os("GADFLY_REQUIRE_CONTAINER").is_none(),
            "GADFLY_REQUIRE_CONTAINER=1: no podman-compose"
        );
        eprintln!("SKIPPED: no podman-compose (tests/container/build.sh installs it)");
        return;
    }
    // compose.yaml publishes the console on 127.0.0.1:7878, as users get it.
    assert!(
        std::net::TcpListener::bind("127.0.0.1:7878").is_ok(),
        "port 7878 is taken: the compose test needs it (docker/compose.yaml publishes 127.0.0.1:7878)"
    );
    let dir = tempfile::Builder::new().prefix("gadfly-ci-compose").tempdir().unwrap();
    std::fs::copy(repo().join("docker/compose.yaml"), dir.path().join("compose.yaml")).unwrap();
    std::fs::copy(repo().join("tests/container/compose.ci.yaml"), dir.path().join("compose.ci.yaml")).unwrap();
    // The campaign under ./work, which the daemon sees as /work.
    let f = fixture();
    let work = dir.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let cp = Command::new("cp").arg("-a").arg(f.ws()).arg(work.join("ws")).status().unwrap();
    assert!(cp.success());
    let spec = std::fs::read_to_string(f.spec()).unwrap().replacen(
        "[harness]\n",
        "[harness]\ntags = { pool = \"compose\" }\n",
        1,
    );
    share(dir.path(), None);
    let compose = Compose { project: format!("gadfly-ci-compose-{}", std::process::id()), dir };

    // podman-compose 1.0 does not wait for `condition: service_healthy`:
    // PostgreSQL first, until it answers, then the rest.
    compose.run(&["up", "-d", "--no-build", "postgres"]);
    let pg = compose.container("postgres");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !podman()
        .args(["exec", &pg, "pg_isready", "-q", "-h", "127.0.0.1", "-U", "gadfly", "-d", "gadfly"])
        .status()
        .unwrap()
        .success()
    {
        assert!(Instant::now() < deadline, "PostgreSQL did not come up");
        std::thread::sleep(Duration::from_millis(200));
    }
    compose.run(&["up", "-d", "--no-build"]);
    let url = "http://127.0.0.1:7878";
    let deadline = Instant::now() + Duration::from_secs(60);
    while !reqwest::blocking::get(format!("{url}/api/v1/health")).map(|r| r.status().is_success()).unwrap_or(false) {
        assert!(Instant::now() < deadline, "the daemon did not answer on 7878");
        std::thread::sleep(Duration::from_millis(200));
    }
    let token = podman_ok(&["exec", &compose.container("gadfly"), "cat", "/home/gadfly/data/token"]);
    let api = Api::new(url, &token);
    let key = api.get("/health")["daemon_key"].as_str().unwrap().to_string();
    let created = api.post("/campaigns", &json!({"spec_toml": spec, "spec_path": "/work/campaign.toml"}));
    let id = created["id"].as_str().unwrap().to_string();
    let hook_token = api.get(&format!("/campaigns/{id}/hook-token"))["token"].as_str().unwrap().to_string();
    let home = tempfile::tempdir().unwrap();
    let stop = |claim: &str| {
        let mut cmd = gadfly_as(None, home.path(), url, &hook_token);
        cmd.args(["hook", "claude-code", "stop", "--daemon-key", &key, "--campaign", &id]);
        hook(cmd, &stop_payload("s-compose", claim))
    };

    // Evaluated by the worker service (pool=compose), through PostgreSQL.
    let blocked = stop("Done.").expect("the unchanged candidate is blocked");
    assert!(blocked["reason"].as_str().unwrap().contains("speedup"), "{blocked}");
    assert!(!blocked["reason"].as_str().unwrap().contains("could not be carried out"), "{blocked}");
    std::fs::write(work.join("ws/candidate.txt"), ALL_PASS).unwrap();
    assert_eq!(stop("Done, every scenario is faster."), None);
    let worker_log = podman().args(["logs", &compose.container("worker")]).output().map(|o| text(&o)).unwrap();
    let evaluated = worker_log.lines().filter(|l| l.contains("job evaluated")).count();
    assert!(evaluated >= 2, "the worker evaluated the jobs: {worker_log}");
    let done = podman_ok(&[
        "exec",
        &pg,
        "psql",
        "-U",
        "gadfly",
        "-d",
        "gadfly",
        "-Atc",
        &format!("select count(*) from eval_jobs where campaign_id = '{id}' and status = 'done'"),
    ]);
    assert_eq!(done.parse::<usize>().unwrap(), evaluated, "the jobs are PostgreSQL's");
    let stops = api.get(&format!("/campaigns/{id}/stops"));
    assert_eq!(stops.as_array().unwrap().len(), 2, "{stops}");
    eprintln!("compose: postgres, gadfly and worker up; {evaluated} jobs evaluated by the worker, 2 stops judged");
}
