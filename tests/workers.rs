//! Evaluation workers: a campaign whose [harness] names tags is evaluated by
//! `gadfly worker` processes that claim jobs from the daemon's database,
//! never by the daemon. On SQLite (daemon and workers share the file) by
//! default, on PostgreSQL with GADFLY_TEST_DATABASE_URL.

mod common;

use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{gadfly, postgres_for, reason, Daemon, Fixture, ALL_PASS};
use serde_json::Value;

/// A fixture whose campaign needs `gpu = "h200"` and whose run command is `run`.
fn tagged(run: &str) -> Fixture {
    let fx = Fixture::with_run("", run);
    let spec = std::fs::read_to_string(fx.spec()).unwrap();
    // These tests watch the harness from the host (what ran, where, how
    // often, in files of the host's): the sandbox, on by default, would hide
    // the host from it, so the campaign opts out. (The compose test in
    // tests/container.rs runs a worker with the sandbox on.)
    let spec = spec.replacen("[harness]\n", "[harness]\ntags = { gpu = \"h200\" }\nsandbox = \"none\"\n", 1);
    std::fs::write(fx.spec(), spec).unwrap();
    // The daemon's log next to the workers'.
    std::fs::create_dir_all(fx.dir.path().join("data")).unwrap();
    fx
}

/// Prints the workers' and the daemon's logs when a test fails.
struct Logs<'a>(&'a Fixture);

impl Drop for Logs<'_> {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        for entry in std::fs::read_dir(self.0.dir.path()).unwrap().flatten() {
            let name = entry.file_name().to_string_lossy().to_string();
            if name.ends_with(".log") {
                let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
                let tail: Vec<&str> = text.lines().rev().take(40).collect();
                eprintln!("--- {name} (last lines)");
                for l in tail.into_iter().rev() {
                    eprintln!("{l}");
                }
            }
        }
    }
}

/// The database the daemon of `data_dir` uses.
fn database_url(data_dir: &Path) -> String {
    postgres_for(data_dir).unwrap_or_else(|| format!("sqlite:{}", data_dir.join("gadfly.db").display()))
}

struct Worker {
    child: Child,
}

impl Worker {
    fn start(fx: &Fixture, name: &str, tags: &str, extra: &[&str]) -> Worker {
        let log = std::fs::File::create(fx.dir.path().join(format!("worker-{name}.log"))).unwrap();
        let mut args: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        for (flag, default) in [("--poll-ms", "100"), ("--lease-s", "2")] {
            if !extra.contains(&flag) {
                args.extend([flag.to_string(), default.to_string()]);
            }
        }
        let child = gadfly()
            .args(["worker", "--database-url", &database_url(&fx.data_dir()), "--tags", tags, "--name", name])
            .arg("--scratch")
            .arg(fx.dir.path().join(format!("scratch-{name}")))
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start gadfly worker");
        Worker { child }
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A stop attempt started in the background (it waits for the evaluation).
fn stop_started(d: &Daemon, campaign: &str) -> Child {
    let payload = serde_json::json!({
        "session_id": "sess-1", "transcript_path": "/tmp/none.jsonl", "cwd": "/tmp",
        "hook_event_name": "Stop", "stop_hook_active": false, "last_assistant_message": "done",
    });
    let mut child = d
        .cmd()
        .args(["hook", "claude-code", "stop", "--campaign", campaign])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(payload.to_string().as_bytes()).unwrap();
    child
}

fn stop_answer(child: Child) -> Option<Value> {
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "hook failed: {}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8(out.stdout).unwrap();
    (!stdout.trim().is_empty()).then(|| serde_json::from_str(stdout.trim()).expect("hook stdout is JSON"))
}

fn finished(child: &mut Child) -> bool {
    child.try_wait().unwrap().is_some()
}

/// gadfly_eval_jobs_queued from the daemon's /metrics.
fn queued_jobs(d: &Daemon) -> f64 {
    let out = Command::new("curl")
        .args(["-sf", "-H"])
        .arg(format!("Authorization: Bearer {}", d.token))
        .arg(format!("{}/metrics", d.url))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    text.lines()
        .find(|l| l.starts_with("gadfly_eval_jobs_queued "))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no gadfly_eval_jobs_queued in:\n{text}"))
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path).unwrap_or_default().lines().map(str::to_string).collect()
}

/// Waits up to `secs` for `pred`.
fn wait_for(what: &str, secs: u64, pred: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !pred() {
        assert!(Instant::now() < deadline, "{what} did not happen in time");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Kills the harness process group whose leader's pid is the last line of `started`.
fn kill_harness(started: &Path) {
    if let Some(pid) = lines(started).last() {
        let _ = Command::new("kill").args(["-KILL", "--", &format!("-{pid}")]).status();
    }
}

fn events(d: &Daemon, campaign: &str, kind: &str) -> Vec<Value> {
    let all = d.api_get(&format!("/campaigns/{campaign}/log"));
    all.as_array().unwrap().iter().filter(|e| e["kind"] == kind).map(|e| e["payload"].clone()).collect()
}

#[test]
fn a_tagged_campaign_is_evaluated_by_a_worker_never_the_daemon() {
    let fx0 = tempfile::tempdir().unwrap();
    let pwd = fx0.path().join("pwd.log");
    let fx = tagged(&format!("pwd >> {}; sh harness/run.sh {{results}}", pwd.display()));
    let _logs = Logs(&fx);
    let d = Daemon::start(&fx.data_dir());
    let id = d.create_campaign(&fx.spec());

    let mut stop = stop_started(&d, &id);
    wait_for("the job is queued", 15, || queued_jobs(&d) == 1.0);
    std::thread::sleep(Duration::from_millis(800));
    assert!(!finished(&mut stop), "the stop was answered with no worker");
    assert!(lines(&pwd).is_empty(), "the daemon ran the harness");

    let _w = Worker::start(&fx, "w1", "gpu=h200", &[]);
    let r = reason(&stop_answer(stop));
    assert!(r.contains("speedup"), "{r}");
    assert!(!r.contains("could not be carried out"), "{r}");
    let ran = lines(&pwd);
    assert_eq!(ran.len(), 1);
    assert!(ran[0].starts_with(&fx.dir.path().join("scratch-w1").display().to_string()), "ran in {}", ran[0]);
    assert_eq!(queued_jobs(&d), 0.0);

    fx.set_candidate(ALL_PASS);
    assert_eq!(d.stop(&id, "done now"), None, "a passing tree evaluated by the worker lets the stop through");
    // (A large gain is re-checked with another seed: on a worker too.)
    let n = lines(&pwd).len();
    assert!(n >= 2);
    // The same tree again: answered from the store, no new job.
    assert_eq!(d.stop(&id, "done"), None);
    assert_eq!(lines(&pwd).len(), n);
    let evals = events(&d, &id, "evaluation");
    assert_eq!(evals.len(), 2, "{evals:?}");
    assert_eq!(evals[1]["holds"], true);
}

#[test]
fn a_worker_without_the_tags_never_claims_the_job() {
    let fx = tagged("sh harness/run.sh {results}");
    fx.set_candidate(ALL_PASS);
    let _logs = Logs(&fx);
    let d = Daemon::start(&fx.data_dir());
    let id = d.create_campaign(&fx.spec());
    let _a100 = Worker::start(&fx, "a100", "gpu=a100", &[]);
    let _none = Worker::start(&fx, "untagged", "", &[]);
    let mut stop = stop_started(&d, &id);
    wait_for("the job is queued", 15, || queued_jobs(&d) == 1.0);
    std::thread::sleep(Duration::from_secs(3));
    assert!(!finished(&mut stop), "a worker without gpu=h200 evaluated the job");
    assert_eq!(queued_jobs(&d), 1.0);
    let _h200 = Worker::start(&fx, "h200", "gpu=h200,zone=eu", &[]);
    assert_eq!(stop_answer(stop), None);
    assert_eq!(queued_jobs(&d), 0.0);
}

#[test]
fn two_workers_never_run_the_same_job_twice() {
    let runs = tempfile::tempdir().unwrap();
    let count = runs.path().join("runs.log");
    let fx = tagged(&format!("echo $GADFLY_CAMPAIGN >> {}; sh harness/run.sh {{results}}", count.display()));
    fx.set_candidate(ALL_PASS);
    let _logs = Logs(&fx);
    let d = Daemon::start(&fx.data_dir());
    const N: usize = 12;
    let ids: Vec<String> = (0..N).map(|_| d.create_campaign(&fx.spec())).collect();
    let stops: Vec<Child> = ids.iter().map(|id| stop_started(&d, id)).collect();
    wait_for("every job is queued", 30, || queued_jobs(&d) == N as f64);
    let workers: Vec<Worker> =
        (0..3).map(|i| Worker::start(&fx, &format!("w{i}"), "gpu=h200", &["--poll-ms", "50"])).collect();
    for s in stops {
        assert_eq!(stop_answer(s), None);
    }
    drop(workers);
    let mut ran = lines(&count);
    ran.sort();
    let mut expected = ids.clone();
    expected.sort();
    assert_eq!(ran, expected, "each job ran exactly once");
}

#[test]
fn a_killed_workers_job_goes_to_another_worker() {
    let runs = tempfile::tempdir().unwrap();
    let started = runs.path().join("started.log");
    let fx = tagged(&format!("echo $$ >> {}; sleep 3; sh harness/run.sh {{results}}", started.display()));
    let _logs = Logs(&fx);
    let d = Daemon::start(&fx.data_dir());
    let id = d.create_campaign(&fx.spec());
    let stop = stop_started(&d, &id);
    let mut first = Worker::start(&fx, "first", "gpu=h200", &[]);
    wait_for("the first worker starts the harness", 20, || lines(&started).len() == 1);
    first.kill();
    kill_harness(&started);
    let _second = Worker::start(&fx, "second", "gpu=h200", &[]);
    let r = reason(&stop_answer(stop));
    assert!(!r.contains("could not be carried out"), "{r}");
    assert!(r.contains("speedup"), "{r}");
    assert_eq!(lines(&started).len(), 2, "the second worker ran it once more");
}

#[test]
fn a_job_whose_workers_keep_dying_fails_and_blocks_the_stop() {
    let runs = tempfile::tempdir().unwrap();
    let started = runs.path().join("started.log");
    let fx = tagged(&format!("echo $$ >> {}; sleep 2; sh harness/run.sh {{results}}", started.display()));
    fx.set_candidate(ALL_PASS);
    let _logs = Logs(&fx);
    let d = Daemon::start(&fx.data_dir());
    let id = d.create_campaign(&fx.spec());
    let mut stop = stop_started(&d, &id);
    for i in 1..=3 {
        let mut w = Worker::start(&fx, &format!("doomed{i}"), "gpu=h200", &["--lease-s", "1"]);
        wait_for("a worker starts the harness", 20, || lines(&started).len() == i);
        w.kill();
        kill_harness(&started);
        assert!(!finished(&mut stop));
    }
    let r = reason(&stop_answer(stop));
    assert!(r.contains("stopped answering 3 times"), "{r}");
    // A failed job is not a cached answer: the same tree is queued again.
    let _healthy = Worker::start(&fx, "healthy", "gpu=h200", &[]);
    assert_eq!(d.stop(&id, "done"), None);
    assert_eq!(lines(&started).len(), 4);
}

#[test]
fn a_launch_template_runs_each_command_and_a_broken_one_is_retried_then_failed() {
    let runs = tempfile::tempdir().unwrap();
    let marker = runs.path().join("launched.log");
    let launcher = runs.path().join("launch.sh");
    std::fs::write(&launcher, format!("echo \"$1\" >> {}\ncd \"$1\" && exec sh -c \"$2\"\n", marker.display()))
        .unwrap();
    let fx = tagged("sh harness/run.sh {results}");
    fx.set_candidate(ALL_PASS);
    let _logs = Logs(&fx);
    let d = Daemon::start(&fx.data_dir());
    let id = d.create_campaign(&fx.spec());
    let template = format!("sh {} {{workdir}} {{command}}", launcher.display());
    let mut w = Worker::start(&fx, "slurmish", "gpu=h200", &["--launch", &template]);
    assert_eq!(d.stop(&id, "done"), None);
    let launched = lines(&marker);
    assert_eq!(launched.len(), 1, "the run command went through the template");
    assert!(launched[0].ends_with("/tree"), "{launched:?}");
    w.kill();

    // A launcher that never starts the command: an infrastructure failure,
    // retried on the next claim, failed after three, the stop blocked.
    fx.set_candidate("a true 10 100\nb true 10 100\nc true 10 100\n");
    let _broken = Worker::start(&fx, "broken", "gpu=h200", &["--launch", "false {command}"]);
    let r = reason(&d.stop(&id, "done again"));
    assert!(r.contains("failed 3 times"), "{r}");
    assert!(r.contains("the launch template did not start the run command"), "{r}");
}

#[test]
fn a_launcher_that_stops_the_command_before_it_ends_is_retried_then_failed() {
    // A launcher that ends the command it started (as Slurm does to a
    // cancelled job; here GNU timeout): no candidate's failure, the
    // worker's, retried, and after three the job fails with the reason.
    let runs = tempfile::tempdir().unwrap();
    let started = runs.path().join("started.log");
    let slow = runs.path().join("slow");
    std::fs::write(&slow, "").unwrap();
    let fx = tagged(&format!(
        "echo $$ >> {}; if test -e {}; then sleep 30; fi; sh harness/run.sh {{results}}",
        started.display(),
        slow.display()
    ));
    fx.set_candidate(ALL_PASS);
    let _logs = Logs(&fx);
    let d = Daemon::start(&fx.data_dir());
    let id = d.create_campaign(&fx.spec());
    let mut w = Worker::start(&fx, "stopper", "gpu=h200", &["--launch", "timeout -s TERM 1 sh -c {command}"]);
    let r = reason(&d.stop(&id, "done"));
    assert!(r.contains("failed 3 times"), "{r}");
    assert!(r.contains("the launcher stopped the run command before it ended"), "{r}");
    assert!(r.contains("exited with status 124"), "{r}");
    assert_eq!(lines(&started).len(), 3, "each attempt started the command");
    w.kill();
    // A command that ends by itself, failing, is the candidate's: judged, not retried.
    std::fs::remove_file(&slow).unwrap();
    fx.set_candidate("FAIL\n");
    let _ok = Worker::start(&fx, "plain", "gpu=h200", &["--launch", "sh -c {command}"]);
    let r = reason(&d.stop(&id, "done again"));
    assert!(!r.contains("could not be carried out"), "{r}");
    assert!(r.contains("cannot load the kernel"), "{r}");
}
