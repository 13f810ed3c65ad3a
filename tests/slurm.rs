//! Evaluation workers through a real Slurm: the single-node cluster of
//! tests/slurm/start.sh (Debian's slurm-wlm), a campaign tagged
//! `pool = "slurm"`, and `gadfly worker --launch 'srun ... sh -c {command}'`
//! (docs/WORKERS.md, "A worker on a login node that submits each command
//! with srun"). A normal job is judged; a job that Slurm cancels mid-run
//! (`scancel`) goes back to the queue and, after its attempts, fails the
//! stop with Slurm's reason; an srun that gets no resources (refused at
//! once, or still queued when the campaign's timeout comes) blocks the stop
//! with the reason; two workers never run one job twice.
//!
//! Prints SKIPPED without a running Slurm (`sinfo`), and fails instead
//! under GADFLY_REQUIRE_SLURM=1 (CI runs tests/slurm/start.sh first). The
//! tests take the cluster one at a time (it has one node).

mod common;

use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::{gadfly, postgres_for, reason, Daemon, Fixture, ALL_PASS};
use serde_json::Value;

/// The cluster has one node: one test on it at a time.
static CLUSTER: Mutex<()> = Mutex::new(());

/// Whether a Slurm cluster answers here; else SKIPPED, or a failure under
/// GADFLY_REQUIRE_SLURM=1.
fn slurm_up() -> bool {
    let state = Command::new("sinfo").args(["-h", "-o", "%t"]).output();
    let up = matches!(&state, Ok(o) if o.status.success()
        && String::from_utf8_lossy(&o.stdout).lines().any(|l| ["idle", "mix", "alloc"].contains(&l.trim())));
    if !up {
        let why = match state {
            Err(e) => format!("no sinfo ({e})"),
            Ok(o) => format!("sinfo: {}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr)),
        };
        assert!(
            std::env::var_os("GADFLY_REQUIRE_SLURM").is_none(),
            "GADFLY_REQUIRE_SLURM=1 but no Slurm node is up ({why}); run tests/slurm/start.sh"
        );
        eprintln!("SKIPPED: no Slurm cluster here ({why}); tests/slurm/start.sh starts one");
    }
    up
}

/// This test's Slurm job name, and its jobs cancelled when it ends.
struct Jobs(String);

impl Jobs {
    fn new(test: &str) -> Jobs {
        Jobs(format!("gadfly-ci-{test}-{}", std::process::id()))
    }

    /// The launch template: one srun per harness command, in this test's
    /// name, asking for `shape` (e.g. `-N1 -n1`).
    fn srun(&self, shape: &str) -> String {
        format!("srun {shape} --job-name={} --chdir {{workdir}} sh -c {{command}}", self.0)
    }

    /// (id, state, reason) of this test's jobs in the queue.
    fn queue(&self) -> Vec<String> {
        let out = Command::new("squeue").args(["-h", "-n", &self.0, "-o", "%i %T %r"]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect()
    }
}

impl Drop for Jobs {
    fn drop(&mut self) {
        let _ = Command::new("scancel").args(["--name", &self.0]).status();
    }
}

/// A fixture whose campaign needs `pool = "slurm"` and runs `run`.
fn tagged(run: &str, timeout_s: u64) -> Fixture {
    let fx = Fixture::with_run("", run);
    let spec = std::fs::read_to_string(fx.spec()).unwrap();
    // The harness is watched from the host (runs counted in a file of the
    // host's, the job's start seen there): the sandbox, on by default,
    // would hide the host from it, so the campaign opts out.
    let spec = spec.replacen("[harness]\n", "[harness]\ntags = { pool = \"slurm\" }\nsandbox = \"none\"\n", 1).replacen(
        "timeout_s = 20\n",
        &format!("timeout_s = {timeout_s}\n"),
        1,
    );
    std::fs::write(fx.spec(), spec).unwrap();
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

struct Worker(Child);

impl Worker {
    fn start(fx: &Fixture, name: &str, launch: &str) -> Worker {
        let data = fx.data_dir();
        let db = postgres_for(&data).unwrap_or_else(|| format!("sqlite:{}", data.join("gadfly.db").display()));
        let log = std::fs::File::create(fx.dir.path().join(format!("worker-{name}.log"))).unwrap();
        let child = gadfly()
            .args(["worker", "--database-url", &db, "--tags", "pool=slurm", "--name", name])
            .args(["--poll-ms", "100", "--lease-s", "5", "--launch", launch])
            .arg("--scratch")
            .arg(fx.dir.path().join(format!("scratch-{name}")))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start gadfly worker");
        Worker(child)
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        // SIGTERM: a job in progress goes back to the queue, its srun ends.
        let _ = Command::new("kill").args(["-TERM", &self.0.id().to_string()]).status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.0.try_wait().unwrap().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A stop attempt started in the background (it waits for the evaluation).
fn stop_started(d: &Daemon, campaign: &str) -> Child {
    let payload = serde_json::json!({
        "session_id": "sess-slurm", "transcript_path": "/tmp/none.jsonl", "cwd": "/tmp",
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

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path).unwrap_or_default().lines().map(str::to_string).collect()
}

fn wait_for(what: &str, secs: u64, pred: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !pred() {
        assert!(Instant::now() < deadline, "{what} did not happen in time");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_job_runs_through_srun_and_is_judged() {
    if !slurm_up() {
        return;
    }
    let _cluster = CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let runs = tempfile::tempdir().unwrap();
    let ran = runs.path().join("ran.log");
    let fx = tagged(&format!("echo $SLURM_JOB_ID $(pwd) >> {}; sh harness/run.sh {{results}}", ran.display()), 20);
    let _logs = Logs(&fx);
    let jobs = Jobs::new("judged");
    let d = Daemon::start(&fx.data_dir());
    let id = d.create_campaign(&fx.spec());
    let _w = Worker::start(&fx, "slurm-1", &jobs.srun("-N1 -n1"));

    let r = reason(&d.stop(&id, "done"));
    assert!(r.contains("speedup"), "judged on the worker's evaluation: {r}");
    assert!(!r.contains("could not be carried out"), "{r}");
    let first = lines(&ran);
    assert_eq!(first.len(), 1, "{first:?}");
    let (job, dir) = first[0].split_once(' ').unwrap();
    assert!(job.parse::<u64>().is_ok(), "the harness ran in a Slurm job (SLURM_JOB_ID {job:?})");
    assert!(dir.starts_with(&fx.dir.path().join("scratch-slurm-1").display().to_string()), "ran in {dir}");

    fx.set_candidate(ALL_PASS);
    assert_eq!(d.stop(&id, "done now"), None, "a passing tree evaluated through srun lets the stop through");
    let all = lines(&ran);
    let ids: std::collections::BTreeSet<&str> = all.iter().map(|l| l.split(' ').next().unwrap()).collect();
    assert_eq!(ids.len(), all.len(), "one Slurm job per evaluation: {all:?}");
    eprintln!("slurm: {} evaluations, Slurm jobs {:?}", all.len(), ids);
}

#[test]
fn a_job_cancelled_by_slurm_goes_back_to_the_queue_then_fails_with_slurms_reason() {
    if !slurm_up() {
        return;
    }
    let _cluster = CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let runs = tempfile::tempdir().unwrap();
    let started = runs.path().join("started.log");
    let fx =
        tagged(&format!("echo $SLURM_JOB_ID >> {}; sleep 30; sh harness/run.sh {{results}}", started.display()), 60);
    fx.set_candidate(ALL_PASS);
    let _logs = Logs(&fx);
    let jobs = Jobs::new("scancel");
    let d = Daemon::start(&fx.data_dir());
    let id = d.create_campaign(&fx.spec());
    let mut stop = stop_started(&d, &id);
    let _w = Worker::start(&fx, "slurm-c", &jobs.srun("-N1 -n1"));
    // Three attempts (GADFLY_JOB_MAX_ATTEMPTS), each a Slurm job cancelled mid-run.
    for i in 1..=3 {
        wait_for("the harness starts in a Slurm job", 30, || lines(&started).len() == i);
        let job = lines(&started)[i - 1].clone();
        let out = Command::new("scancel").arg(&job).output().unwrap();
        assert!(out.status.success(), "scancel {job}: {}", String::from_utf8_lossy(&out.stderr));
        if i < 3 {
            std::thread::sleep(Duration::from_millis(300));
            assert!(
                stop.try_wait().unwrap().is_none(),
                "the stop was answered after attempt {i} (a cancelled job judged as the candidate's failure?): {}",
                d.api_get(&format!("/campaigns/{id}/evaluations"))
            );
        }
    }
    let r = reason(&stop_answer(stop));
    eprintln!("the blocked stop's reason: {r}");
    assert!(r.contains("could not be carried out on a worker"), "{r}");
    assert!(r.contains("failed 3 times"), "{r}");
    assert!(r.contains("the launcher stopped the run command before it ended"), "{r}");
    let last = lines(&started)[2].clone();
    assert!(r.contains(&format!("STEP {last}.0")) && r.contains("CANCELLED"), "Slurm's own words: {r}");
    let ids: std::collections::BTreeSet<String> = lines(&started).into_iter().collect();
    assert_eq!(ids.len(), 3, "three Slurm jobs, one per attempt");
    assert!(jobs.queue().is_empty(), "{:?}", jobs.queue());
}

#[test]
fn an_srun_that_gets_no_resources_blocks_the_stop_with_the_reason() {
    if !slurm_up() {
        return;
    }
    let _cluster = CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let runs = tempfile::tempdir().unwrap();
    let ran = runs.path().join("ran.log");
    let fx = tagged(&format!("echo ran >> {}; sh harness/run.sh {{results}}", ran.display()), 4);
    fx.set_candidate(ALL_PASS);
    let _logs = Logs(&fx);
    let jobs = Jobs::new("noresources");
    let d = Daemon::start(&fx.data_dir());
    let id = d.create_campaign(&fx.spec());

    // Refused at once (a feature no node has): the command never started,
    // each attempt is the worker's failure, the third fails the job.
    let w = Worker::start(&fx, "slurm-r", &jobs.srun("-N1 -n1 --constraint=gadfly-ci-no-such-feature"));
    let t = Instant::now();
    let r = reason(&d.stop(&id, "done"));
    eprintln!("refused at once ({:.1} s): {r}", t.elapsed().as_secs_f64());
    assert!(r.contains("failed 3 times"), "{r}");
    assert!(r.contains("the launch template did not start the run command"), "{r}");
    assert!(r.contains("Unable to allocate resources: Invalid feature specification"), "Slurm's reason: {r}");
    drop(w);
    let w = Worker::start(&fx, "slurm-q", &jobs.srun("-N 5 -n 5"));

    // Queued for ever (five nodes on a one-node cluster): still waiting when
    // the campaign's 4 s timeout comes, a failing evaluation with the reason.
    let t = Instant::now();
    let r = reason(&d.stop(&id, "done again"));
    let took = t.elapsed().as_secs_f64();
    eprintln!("still queued at the timeout ({took:.1} s): {r}");
    assert!(r.contains("timed out after 4 s"), "{r}");
    assert!(r.contains("queued and waiting for resources"), "Slurm's reason: {r}");
    assert!(r.contains("the launcher had not started the run command when the timeout came"), "{r}");
    assert!((4.0..30.0).contains(&took), "{took}");
    assert!(lines(&ran).is_empty(), "the harness never ran");
    // srun, stopped at the timeout, withdrew its request.
    wait_for("the request leaves Slurm's queue", 10, || jobs.queue().is_empty());
    drop(w);
}

#[test]
fn two_workers_on_the_cluster_never_run_one_job_twice() {
    if !slurm_up() {
        return;
    }
    let _cluster = CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let runs = tempfile::tempdir().unwrap();
    let count = runs.path().join("runs.log");
    let fx = tagged(
        &format!("echo $GADFLY_CAMPAIGN $SLURM_JOB_ID >> {}; sh harness/run.sh {{results}}", count.display()),
        60,
    );
    fx.set_candidate(ALL_PASS);
    let _logs = Logs(&fx);
    let jobs = Jobs::new("twoworkers");
    let d = Daemon::start(&fx.data_dir());
    const N: usize = 8;
    let ids: Vec<String> = (0..N).map(|_| d.create_campaign(&fx.spec())).collect();
    let stops: Vec<Child> = ids.iter().map(|id| stop_started(&d, id)).collect();
    let workers: Vec<Worker> =
        (0..2).map(|i| Worker::start(&fx, &format!("slurm-w{i}"), &jobs.srun("-N1 -n1"))).collect();
    for s in stops {
        assert_eq!(stop_answer(s), None);
    }
    drop(workers);
    let all = lines(&count);
    let mut ran: Vec<String> = all.iter().map(|l| l.split(' ').next().unwrap().to_string()).collect();
    ran.sort();
    let mut expected = ids.clone();
    expected.sort();
    assert_eq!(ran, expected, "each job ran exactly once");
    let slurm_ids: std::collections::BTreeSet<&str> = all.iter().map(|l| l.split(' ').nth(1).unwrap()).collect();
    assert_eq!(slurm_ids.len(), N, "one Slurm job each: {all:?}");
    let by: Vec<usize> = (0..2)
        .map(|i| {
            let log = std::fs::read_to_string(fx.dir.path().join(format!("worker-slurm-w{i}.log"))).unwrap();
            log.lines().filter(|l| l.contains("job evaluated")).count()
        })
        .collect();
    eprintln!("two workers: {N} jobs, evaluated {by:?}");
    assert_eq!(by.iter().sum::<usize>(), N);
}
