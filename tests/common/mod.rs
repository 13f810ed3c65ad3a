//! A daemon on an ephemeral port with a temporary data dir, driven through
//! the real `gadfly` binary, plus fixture workspaces with a scripted harness.
#![allow(dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

pub fn gadfly() -> Command {
    Command::new(env!("CARGO_BIN_EXE_gadfly"))
}

pub struct Daemon {
    pub child: Child,
    pub data_dir: PathBuf,
    pub url: String,
    pub token: String,
}

impl Daemon {
    /// A daemon on SQLite in `data_dir`, or, when GADFLY_TEST_DATABASE_URL
    /// names a PostgreSQL server, on a fresh database of its own there (the
    /// same data dir keeps the same database across restarts).
    pub fn start(data_dir: &Path) -> Daemon {
        match postgres_for(data_dir) {
            Some(url) => Self::start_with(data_dir, Some(&url)),
            None => Self::start_with(data_dir, None),
        }
    }

    pub fn start_with(data_dir: &Path, database_url: Option<&str>) -> Daemon {
        let mut cmd = gadfly();
        cmd.args(["serve", "--listen", "127.0.0.1:0", "--data-dir"]).arg(data_dir);
        if let Some(u) = database_url {
            cmd.args(["--database-url", u]);
        }
        Self::start_cmd(data_dir, cmd)
    }

    /// The `gadfly serve` command [`Daemon::start`] runs (PostgreSQL when
    /// the tests use it), for a test to add to before [`Daemon::start_cmd`].
    pub fn serve_command(data_dir: &Path) -> Command {
        let mut cmd = gadfly();
        cmd.args(["serve", "--listen", "127.0.0.1:0", "--data-dir"]).arg(data_dir);
        if let Some(u) = postgres_for(data_dir) {
            cmd.args(["--database-url", &u]);
        }
        cmd
    }

    /// Starts `cmd` (a `gadfly serve` writing to `data_dir`) and waits for it.
    pub fn start_cmd(data_dir: &Path, mut cmd: Command) -> Daemon {
        let _ = std::fs::remove_file(data_dir.join("daemon.json"));
        let log = std::fs::File::create(data_dir.parent().unwrap().join(format!(
            "daemon-{}.log",
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
        )))
        .unwrap();
        let child = cmd.stdout(Stdio::null()).stderr(log).spawn().expect("start gadfly serve");
        let deadline = Instant::now() + Duration::from_secs(60);
        let info: Value = loop {
            if let Ok(text) = std::fs::read_to_string(data_dir.join("daemon.json")) {
                if let Ok(v) = serde_json::from_str(&text) {
                    break v;
                }
            }
            assert!(Instant::now() < deadline, "daemon did not start");
            std::thread::sleep(Duration::from_millis(20));
        };
        let token = std::fs::read_to_string(data_dir.join("token")).unwrap().trim().to_string();
        Daemon { child, data_dir: data_dir.to_path_buf(), url: info["url"].as_str().unwrap().to_string(), token }
    }

    /// A `gadfly` command pointed at this daemon.
    pub fn cmd(&self) -> Command {
        let mut c = gadfly();
        c.env("GADFLY_URL", &self.url)
            .env("GADFLY_TOKEN", &self.token)
            .env("GADFLY_SPOOL_DIR", self.data_dir.join("spool"))
            .env_remove("GADFLY_DATA_DIR");
        c
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd().args(args).output().unwrap()
    }

    pub fn create_campaign(&self, spec: &Path) -> String {
        // Most tests are about something else: calibration at create has its own (tests/calibrate.rs).
        let out = self.cmd().args(["campaign", "create", "--no-calibrate"]).arg(spec).output().unwrap();
        assert!(out.status.success(), "campaign create failed: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    }

    /// Posts a Claude Code hook event straight to the API (no hook process),
    /// as the admin; panics unless it is answered 2xx; the daemon's reply.
    pub fn post_hook(&self, client: &reqwest::blocking::Client, event: &str, campaign: &str, body: &Value) -> Value {
        let r = client
            .post(format!("{}/api/v1/campaigns/{campaign}/hooks/claude-code/{event}", self.url))
            .bearer_auth(&self.token)
            .json(body)
            .send()
            .unwrap();
        assert!(r.status().is_success(), "{event}: {}", r.status());
        r.json().unwrap()
    }

    /// Runs the real hook command with `payload` on stdin.
    pub fn hook(&self, event: &str, campaign: &str, payload: &str) -> Output {
        let mut child = self
            .cmd()
            .args(["hook", "claude-code", event, "--campaign", campaign])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(payload.as_bytes()).unwrap();
        child.wait_with_output().unwrap()
    }

    /// A stop attempt: returns the parsed stdout (None when it printed nothing).
    pub fn stop(&self, campaign: &str, claim: &str) -> Option<Value> {
        let payload = serde_json::json!({
            "session_id": "sess-1",
            "transcript_path": "/tmp/none.jsonl",
            "cwd": "/tmp",
            "hook_event_name": "Stop",
            "stop_hook_active": false,
            "last_assistant_message": claim,
        });
        let out = self.hook("stop", campaign, &payload.to_string());
        assert_eq!(out.status.code(), Some(0), "hook failed: {}", String::from_utf8_lossy(&out.stderr));
        let stdout = String::from_utf8(out.stdout).unwrap();
        if stdout.trim().is_empty() {
            None
        } else {
            Some(serde_json::from_str(stdout.trim()).expect("hook stdout is JSON"))
        }
    }

    /// `gadfly answer Q --campaign ID --evidence FILE` run as the agent
    /// would (with the campaign's hook token); panics unless it succeeds.
    pub fn file_evidence(&self, campaign: &str, question: i64, evidence: &Path) {
        let hook_token =
            self.api_get(&format!("/campaigns/{campaign}/hook-token"))["token"].as_str().unwrap().to_string();
        let out = self
            .cmd()
            .env("GADFLY_TOKEN", &hook_token)
            .args(["answer", &question.to_string(), "--campaign", campaign, "--evidence"])
            .arg(evidence)
            .output()
            .unwrap();
        assert!(out.status.success(), "gadfly answer: {}", String::from_utf8_lossy(&out.stderr));
    }

    /// The payloads of campaign `id`'s events of `kind`, oldest first.
    pub fn events(&self, id: &str, kind: &str) -> Vec<Value> {
        self.api_get(&format!("/campaigns/{id}/log?limit=10000"))
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["kind"] == kind)
            .map(|e| e["payload"].clone())
            .collect()
    }

    pub fn api_get(&self, path: &str) -> Value {
        let out = Command::new("curl")
            .args(["-sf", "-H"])
            .arg(format!("Authorization: Bearer {}", self.token))
            .arg(format!("{}/api/v1{}", self.url, path))
            .output()
            .unwrap();
        assert!(out.status.success(), "GET {path} failed");
        serde_json::from_slice(&out.stdout).unwrap()
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM and wait: the daemon shuts down gracefully.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        Command::new("kill").arg("-TERM").arg(self.child.id().to_string()).status().unwrap();
        self.child.wait().unwrap()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A campaign folder: `campaign.toml` next to a git workspace `ws/` whose
/// protected `harness/run.sh` turns `candidate.txt` into results lines.
pub struct Fixture {
    pub dir: tempfile::TempDir,
}

/// The scripted harness. Each line of candidate.txt is either
/// `SCENARIO CORRECT TIME BASELINE [EXTRA]` or a directive: CRASH, SLEEP,
/// GARBAGE, FAIL. EXTRA, when given, is JSON members written as they are
/// into the scenario's object (`"compare_us":60,"rtol":0.01`); without it the
/// line carries an absolute tolerance that its errors are well within, and a
/// timing of 50 samples with a spread of 0.2% (so a figure's interval is the
/// spec's `noise` floor, 1%: 90 us against 100 us clears a bar of 1.1x).
const RUN_SH: &str = r#"#!/bin/sh
out="$1"
: > "$out"
while read -r name correct time base extra; do
  case "$name" in
    CRASH) kill -SEGV $$ ;;
    SLEEP) sleep 60 ;;
    GARBAGE) echo '{"scenario": "a", "correct": tru' >> "$out" ;;
    FAIL) echo "harness: cannot load the kernel" >&2; exit 3 ;;
    "") ;;
    *) if [ -n "$extra" ]; then
         printf '{"scenario":"%s","correct":%s,"time_us":%s,"baseline_us":%s,%s}\n' "$name" "$correct" "$time" "$base" "$extra" >> "$out"
       else
         printf '{"scenario":"%s","correct":%s,"time_us":%s,"baseline_us":%s,"max_abs_err_ref":1e-15,"max_abs_err_hi":2e-15,"tolerance":1e-12,"samples":50,"cv":0.002}\n' "$name" "$correct" "$time" "$base" >> "$out"
       fi ;;
  esac
done < candidate.txt
"#;

pub const ALL_PASS: &str = "a true 50 100\nb true 40 100\nc true 80 100\n";

impl Fixture {
    pub fn new(extra_spec: &str) -> Fixture {
        Self::with_run(extra_spec, "sh harness/run.sh {results}")
    }

    pub fn with_run(extra_spec: &str, run: &str) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join("harness")).unwrap();
        std::fs::write(ws.join("harness/run.sh"), RUN_SH).unwrap();
        std::fs::write(ws.join("candidate.txt"), "a true 100 100\nb true 100 100\nc true 100 100\n").unwrap();
        std::fs::write(ws.join(".gitignore"), "build/\n").unwrap();
        git(&ws, &["init", "-q"]);
        git(&ws, &["add", "-A"]);
        git(&ws, &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "initial"]);
        // A fixture asks at every moment unless its test says otherwise: a
        // moment left without its question (`[questions] withhold`, one in
        // ten by default, drawn per campaign) would fail a test that waits
        // for that question one run in ten.
        let (extra_spec, withhold_after) = if extra_spec.contains("withhold") {
            (extra_spec.to_string(), "")
        } else if extra_spec.contains("[questions]\n") {
            (extra_spec.replacen("[questions]\n", "[questions]\nwithhold = 0\n", 1), "")
        } else {
            (extra_spec.to_string(), "\n[questions]\nwithhold = 0\n")
        };
        let spec = format!(
            r#"name = "fixture"
workspace = "ws"
goal = "every scenario faster"
{extra_spec}
[harness]
run = "{run}"
timeout_s = 20
scenarios = ["a", "b", "c"]
protected = ["harness/**"]

[predicate]
correct = true
min_speedup = 1.1
min_geomean_speedup = 1.2
{withhold_after}"#
        );
        std::fs::write(dir.path().join("campaign.toml"), spec).unwrap();
        Fixture { dir }
    }

    pub fn spec(&self) -> PathBuf {
        self.dir.path().join("campaign.toml")
    }

    pub fn ws(&self) -> PathBuf {
        self.dir.path().join("ws")
    }

    pub fn set_candidate(&self, text: &str) {
        std::fs::write(self.ws().join("candidate.txt"), text).unwrap();
    }

    pub fn data_dir(&self) -> PathBuf {
        let d = self.dir.path().join("data");
        std::fs::create_dir_all(&d).unwrap();
        d
    }
}

/// With GADFLY_TEST_DATABASE_URL set (postgres://.../DB), a database made
/// for this data dir (created on first use, remembered in the data dir).
pub fn postgres_for(data_dir: &Path) -> Option<String> {
    let base = std::env::var("GADFLY_TEST_DATABASE_URL").ok().filter(|u| u.starts_with("postgres"))?;
    let marker = data_dir.join("test-database-url");
    if let Ok(url) = std::fs::read_to_string(&marker) {
        return Some(url);
    }
    // The process, a counter and the time: two threads of one test binary
    // once read the same nanosecond and raced to create one database.
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let name = format!(
        "gadfly_t_{}_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
    );
    let out = Command::new("psql")
        .arg(&base)
        .args(["-v", "ON_ERROR_STOP=1", "-qc", &format!("create database {name}")])
        .output()
        .expect("psql");
    assert!(out.status.success(), "creating a test database: {}", String::from_utf8_lossy(&out.stderr));
    let url = match base.rfind('/') {
        Some(i) if i > "postgres://".len() => format!("{}/{name}", &base[..i]),
        _ => format!("{base}/{name}"),
    };
    std::fs::create_dir_all(data_dir).unwrap();
    std::fs::write(&marker, &url).unwrap();
    Some(url)
}

/// Polls `pred` until it holds, for at most 15 s.
pub fn wait_until(what: &str, pred: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while !pred() {
        assert!(Instant::now() < deadline, "{what} did not happen in time");
        std::thread::sleep(Duration::from_millis(100));
    }
}

pub fn git(dir: &Path, args: &[&str]) {
    let ok = Command::new("git").args(args).current_dir(dir).status().unwrap().success();
    assert!(ok, "git {args:?}");
}

/// The block reason of a stop answer, or a panic naming what came instead.
pub fn reason(answer: &Option<Value>) -> String {
    let a = answer.as_ref().expect("the stop was allowed, expected a block");
    assert_eq!(a["decision"], "block", "{a}");
    a["reason"].as_str().unwrap().to_string()
}

/// A process's CPU time so far (user + system), s, from /proc.
pub fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces): utime is 14th, stime 15th.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

/// The CPU time a process uses while this thread sleeps `wait`: (CPU s,
/// wall s).
pub fn cpu_over(pid: u32, wait: Duration) -> (f64, f64) {
    let (cpu, t) = (cpu_seconds(pid), Instant::now());
    std::thread::sleep(wait);
    (cpu_seconds(pid) - cpu, t.elapsed().as_secs_f64())
}

/// The daemon's own time answering hook calls, from the text of its
/// /metrics: for each event, the number of calls and their mean time, ms.
pub fn hook_time_by_event(metrics: &str) -> Vec<(String, f64, f64)> {
    let mut by_event: std::collections::BTreeMap<String, (f64, f64)> = Default::default();
    for line in metrics.lines() {
        let Some((name, rest)) = line.split_once('{') else { continue };
        let (Some(event), Some(value)) = (
            rest.split("event=\"").nth(1).and_then(|r| r.split('"').next()),
            rest.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()),
        ) else {
            continue;
        };
        let entry = by_event.entry(event.to_string()).or_default();
        match name {
            "gadfly_hook_duration_seconds_count" => entry.0 = value,
            "gadfly_hook_duration_seconds_sum" => entry.1 = value,
            _ => {}
        }
    }
    by_event.into_iter().filter(|(_, (n, _))| *n > 0.0).map(|(e, (n, sum))| (e, n, sum / n * 1e3)).collect()
}

/// Every setting of a repository's config that makes git run a program,
/// each naming a script that leaves a mark: plus hooks for every event, a
/// required filter on every file and a signed commit (so `log` would ask
/// `gpg.program` to verify it).
pub fn plant_git_config_traps(ws: &Path, marker: &Path) {
    let script = ws.parent().unwrap().join("trap.sh");
    std::fs::write(
        &script,
        format!("#!/bin/sh\necho \"$0 $*\" >> '{}'\ncat >/dev/null 2>&1\nexit 0\n", marker.display()),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let s = script.display().to_string();
    let hooks = ws.join(".git/hooks-trap");
    std::fs::create_dir_all(&hooks).unwrap();
    for hook in [
        "reference-transaction",
        "post-checkout",
        "post-index-change",
        "pre-commit",
        "post-commit",
        "post-rewrite",
        "pre-auto-gc",
        "fsmonitor-watchman",
        "push-to-checkout",
    ] {
        std::fs::copy(&script, hooks.join(hook)).unwrap();
    }
    let included = ws.parent().unwrap().join("included.config");
    std::fs::write(&included, format!("[core]\n\tpager = {s}\n")).unwrap();
    let config = format!(
        "[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tfsmonitor = {s}\n\tpager = {s}\n\thooksPath = {h}\n\
         \tsshCommand = {s}\n\taskPass = {s}\n\teditor = {s}\n\tattributesFile = {a}\n\
         [include]\n\tpath = {i}\n\
         [log]\n\tshowSignature = true\n\
         [gpg]\n\tprogram = {s}\n[gpg \"ssh\"]\n\tprogram = {s}\n[gpg \"x509\"]\n\tprogram = {s}\n\
         [diff]\n\texternal = {s}\n[diff \"trap\"]\n\ttextconv = {s}\n\
         [filter \"trap\"]\n\tclean = {s}\n\tsmudge = {s}\n\tprocess = {s}\n\trequired = true\n\
         [credential]\n\thelper = !{s}\n[uploadpack]\n\tpackObjectsHook = {s}\n\
         [pager]\n\tlog = {s}\n\tfor-each-ref = {s}\n\
         [alias]\n\tlg = !{s}\n",
        h = hooks.display(),
        a = ws.join(".git/info/attrs-trap").display(),
        i = included.display(),
    );
    std::fs::create_dir_all(ws.join(".git/info")).unwrap();
    std::fs::write(ws.join(".git/info/attrs-trap"), "* filter=trap diff=trap\n").unwrap();
    std::fs::write(ws.join(".gitattributes"), "* filter=trap diff=trap\n").unwrap();
    std::fs::write(ws.join(".git/config"), config).unwrap();
}

/// A commit on `branch` signed (a `gpgsig` header git would hand to
/// `gpg.program` to verify when `log.showSignature` is on), carrying the
/// family trailer, made with plumbing that reads no config of the repo's.
pub fn signed_commit(ws: &Path, branch: &str, family: &str) {
    let run = |args: &[&str], stdin: Option<&str>| -> String {
        use std::io::Write;
        let mut c = std::process::Command::new("git");
        c.args(["-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false"])
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .args(args)
            .current_dir(ws)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped());
        let mut child = c.spawn().unwrap();
        if let Some(text) = stdin {
            child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
        }
        drop(child.stdin.take());
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "git {args:?}");
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    let tree = run(&["rev-parse", "HEAD^{tree}"], None);
    let parent = run(&["rev-parse", "HEAD"], None);
    let body = format!(
        "tree {tree}\nparent {parent}\nauthor t <t@t> 1700000000 +0000\ncommitter t <t@t> 1700000000 +0000\n\
         gpgsig -----BEGIN PGP SIGNATURE-----\n \n iQEzBAABCAAdFiEE0000000000000000000000000000000000000000\n \
         -----END PGP SIGNATURE-----\n\na family\n\nGadfly-Family: {family}\n"
    );
    let commit = run(&["hash-object", "-t", "commit", "-w", "--stdin"], Some(&body));
    run(&["update-ref", &format!("refs/heads/{branch}"), &commit], None);
}


/// True (and a SKIPPED notice) where bubblewrap does not work; fails instead
/// under GADFLY_REQUIRE_SANDBOX=1 (CI).
pub fn skip_without_bwrap() -> bool {
    if gadfly::harness::bwrap_works() {
        return false;
    }
    assert!(std::env::var_os("GADFLY_REQUIRE_SANDBOX").is_none(), "bubblewrap does not work on this host");
    eprintln!("SKIPPED: bubblewrap (bwrap) does not work on this host");
    true
}
