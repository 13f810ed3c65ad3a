//! Gate integrity by construction (issue 45): the verdict depends on
//! nothing the agent controls. Each test plays one class of attack as the
//! supervised agent, through the real hook and the hook token where the
//! agent would, and checks the invariant that closes the class (RELIABILITY.md,
//! "Threat classes").

mod common;

use common::{git, plant_git_config_traps, reason, signed_commit, Daemon, Fixture, ALL_PASS};
use serde_json::Value;

fn hook_token(d: &Daemon, id: &str) -> String {
    d.api_get(&format!("/campaigns/{id}/hook-token"))["token"].as_str().unwrap().to_string()
}

/// `gadfly ARGS` as the agent: the campaign's hook token, nothing else.
fn as_agent(d: &Daemon, token: &str, args: &[&str]) -> std::process::Output {
    d.cmd().env("GADFLY_TOKEN", token).args(args).output().unwrap()
}

fn evaluate(d: &Daemon, id: &str) -> Value {
    let out = d.run(&["eval", id, "--json"]);
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("eval --json: {e}: {}", String::from_utf8_lossy(&out.stderr)))
}

/// Class 1: the daemon never runs the agent's configuration or code with
/// its own privileges. The workspace repository's config names a program
/// for every setting that makes git run one, every hook is a trap, and a
/// signed commit invites signature checks; then every endpoint the hook
/// token reaches that touches the repository is called as the agent (beam
/// tag, beam list, eval, the Stop hook). Nothing may run; the beam still
/// works (it reads the refs and objects as data).
#[test]
fn no_endpoint_the_hook_token_reaches_runs_the_workspace_repositorys_git_config() {
    let f = Fixture::new("[beam]\nmin_families = 1\n");
    let ws = f.ws();
    let marker = f.dir.path().join("trap-ran.log");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    plant_git_config_traps(&ws, &marker);
    signed_commit(&ws, "try-signed", "signed-family");
    let token = hook_token(&d, &id);

    let tagged = as_agent(&d, &token, &["beam", "tag", "householder", "--campaign", &id]);
    assert!(tagged.status.success(), "beam tag as the agent: {}", String::from_utf8_lossy(&tagged.stderr));
    let listed = as_agent(&d, &token, &["beam", "list", &id, "--json"]);
    let beam: Value = serde_json::from_slice(&listed.stdout)
        .unwrap_or_else(|e| panic!("beam list as the agent: {e}: {}", String::from_utf8_lossy(&listed.stderr)));
    let families: Vec<&str> =
        beam["families"].as_array().unwrap().iter().map(|f| f["family"].as_str().unwrap()).collect();
    assert!(families.contains(&"householder") && families.contains(&"signed-family"), "{beam}");
    let head = std::fs::read_to_string(ws.join(".git/refs/heads/beam/householder")).unwrap();
    assert_eq!(head.trim().len(), 40, "the tag is a plain ref file: {head}");
    let eval = as_agent(&d, &token, &["eval", &id]);
    assert!(eval.status.code().is_some_and(|c| c < 2), "eval as the agent: {}", String::from_utf8_lossy(&eval.stderr));
    f.set_candidate(ALL_PASS);
    let _ = d.stop(&id, "done");

    assert!(
        !marker.exists(),
        "the workspace's git config ran as the daemon: {}",
        std::fs::read_to_string(&marker).unwrap_or_default()
    );
}

/// The beam refuses a repository that points outside its owner's files (a
/// `.git` link, an object store borrowing another one): the daemon reads
/// on the agent's behalf only what the agent's own repository holds.
#[test]
fn the_beam_refuses_a_repository_that_points_elsewhere() {
    let f = Fixture::new("[beam]\nmin_families = 1\n");
    let ws = f.ws();
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let token = hook_token(&d, &id);
    let elsewhere = f.dir.path().join("elsewhere-objects");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::write(ws.join(".git/objects/info/alternates"), format!("{}\n", elsewhere.display())).unwrap();
    let out = as_agent(&d, &token, &["beam", "tag", "householder", "--campaign", &id]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("names other object stores"), "{err}");
    std::fs::remove_file(ws.join(".git/objects/info/alternates")).unwrap();
    let out = as_agent(&d, &token, &["beam", "tag", "householder", "--campaign", &id]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// Class 2: the candidate runs sandboxed by default. A campaign that says
/// nothing of a sandbox: its build sees none of the host but the system's
/// folders (no workspace, no data dir, no home), is PID 1's descendant in
/// a namespace of its own, and a `setsid`'d helper it leaves dies with it;
/// the harness's run sees its tree read-only.
#[test]
fn the_candidate_runs_sandboxed_by_default_and_sees_nothing_of_the_host() {
    if common::skip_without_bwrap() {
        return;
    }
    let f = Fixture::with_run(
        "",
        "if touch run-probe 2>/dev/null; then echo run-tree-write:allowed; else echo run-tree-write:denied; fi; sh harness/run.sh {results}",
    );
    let d = Daemon::start(&f.data_dir());
    let ws = f.ws();
    let data = f.data_dir();
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    let stray = f.dir.path().join("stray-survived");
    let probe = format!(
        "for p in '{ws}' '{data}' '{home}'; do if [ -e \"$p\" ] && [ -n \"$(ls -A \"$p\" 2>/dev/null)\" ]; then echo \"see:$p\"; fi; done; \
         if cat '{data}/token' >/dev/null 2>&1; then echo token-read:allowed; else echo token-read:denied; fi; \
         echo \"procs:$(ls /proc | grep -c '^[0-9]')\"; \
         echo \"caps:$(awk '/^CapEff/ {{print $2}}' /proc/self/status)\"; \
         setsid sh -c 'sleep 3; echo survived > {stray}' </dev/null >/dev/null 2>&1 & \
         echo built",
        ws = ws.display(),
        data = data.display(),
        stray = stray.display(),
    );
    let spec = std::fs::read_to_string(f.spec()).unwrap().replace(
        "protected = [\"harness/**\"]",
        &format!("protected = [\"harness/**\"]\nbuild = {}", serde_json::to_string(&probe).unwrap()),
    );
    assert!(!spec.contains("sandbox"), "the spec says nothing of a sandbox");
    std::fs::write(f.spec(), spec).unwrap();
    let id = d.create_campaign(&f.spec());
    f.set_candidate(ALL_PASS);
    let e = evaluate(&d, &id);
    let out = e["build"]["output_tail"].as_str().unwrap_or_else(|| panic!("no build output: {e}"));
    assert!(!out.contains("see:"), "the build saw host folders:\n{out}");
    assert!(out.contains("token-read:denied"), "{out}");
    let procs: usize = out.lines().find_map(|l| l.strip_prefix("procs:")).unwrap().trim().parse().unwrap();
    assert!(procs < 10, "a PID namespace of its own shows only the sandbox's processes ({procs}):\n{out}");
    // No capability, even for a daemon run as root: with CAP_SYS_PTRACE a
    // candidate reads a non-dumpable grader's memory.
    let caps = out.lines().find_map(|l| l.strip_prefix("caps:")).unwrap().trim();
    assert_eq!(caps, "0000000000000000", "the sandbox has capabilities ({caps}):\n{out}");
    let run = e["run"]["output_tail"].as_str().unwrap_or_else(|| panic!("no run output: {e}"));
    assert!(run.contains("run-tree-write:denied"), "the harness run sees its tree read-only:\n{run}");
    assert_eq!(e["holds"], true, "the sandboxed harness still measured and judged: {e}");
    std::thread::sleep(std::time::Duration::from_secs(4));
    assert!(!stray.exists(), "a setsid'd helper of the build outlived its sandbox");
}

/// How many processes of this host run exactly `cmdline` (arguments joined
/// by spaces).
fn running(cmdline: &str) -> usize {
    std::fs::read_dir("/proc")
        .map(|d| {
            d.flatten()
                .filter_map(|p| std::fs::read(p.path().join("cmdline")).ok())
                .filter(|c| String::from_utf8_lossy(c).replace('\0', " ").trim() == cmdline)
                .count()
        })
        .unwrap_or(0)
}

/// With the sandbox, a build that runs past its timeout leaves nothing
/// running either (#49 item 2; the normal end is tested above): the helper
/// it started with setsid, alive in the sandbox's PID namespace when the
/// timeout struck, is gone once the evaluation is answered. Looked for in
/// the host's own /proc, where a child namespace's processes show.
#[test]
fn a_sandboxed_build_that_times_out_leaves_no_helper_running() {
    if common::skip_without_bwrap() {
        return;
    }
    let f = Fixture::new("");
    // A command line no other process has: this test's pid in the sleep.
    let marker = format!("sleep 4{:06}", std::process::id());
    let build = format!("setsid sh -c 'exec {marker}' </dev/null >/dev/null 2>&1 & echo helper-started; sleep 60");
    let spec = std::fs::read_to_string(f.spec()).unwrap().replace("timeout_s = 20", "timeout_s = 3").replace(
        "protected = [\"harness/**\"]",
        &format!("protected = [\"harness/**\"]\nbuild = {}", serde_json::to_string(&build).unwrap()),
    );
    std::fs::write(f.spec(), spec).unwrap();
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    f.set_candidate(ALL_PASS);
    let watch = {
        let marker_seen = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let seen = marker_seen.clone();
        let m = marker.clone();
        let stop = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let t = std::thread::spawn(move || {
            while std::time::Instant::now() < stop && !seen.load(std::sync::atomic::Ordering::SeqCst) {
                if running(&m) > 0 {
                    seen.store(true, std::sync::atomic::Ordering::SeqCst);
                }
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
        });
        (t, marker_seen)
    };
    let e = evaluate(&d, &id);
    assert_eq!(e["holds"], false, "the build timed out: {e}");
    let (t, seen) = watch;
    t.join().unwrap();
    assert!(seen.load(std::sync::atomic::Ordering::SeqCst), "the helper never ran, so this test shows nothing: {e}");
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert_eq!(running(&marker), 0, "the setsid'd helper of a timed-out sandboxed build is still running ({marker})");
}

/// Class 5: what is judged is exactly the bytes at the stop. The agent's
/// move against a stat fingerprint: a passing stop, then the candidate
/// rewritten in place with the same size, the old modification time put
/// back. The next stop is judged on the new bytes.
#[test]
fn a_same_size_same_time_rewrite_is_judged_on_its_new_bytes() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let file = f.ws().join("candidate.txt");
    let passing = "a true  50 100\nb true  40 100\nc true  80 100\n";
    let failing = "a true  50 100\nb false 40 100\nc true 180 100\n";
    assert_eq!(passing.len(), failing.len());
    std::fs::write(&file, passing).unwrap();
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    std::fs::File::options().write(true).open(&file).unwrap().set_modified(old).unwrap();
    assert_eq!(d.stop(&id, "done"), None, "the passing candidate is allowed");
    std::fs::write(&file, failing).unwrap();
    std::fs::File::options().write(true).open(&file).unwrap().set_modified(old).unwrap();
    let r = reason(&d.stop(&id, "done"));
    assert!(r.contains("incorrect") || r.contains("speedup"), "judged on the new bytes: {r}");
}

/// Class 4: every evaluation draws a seed nobody without the daemon's
/// token can predict: never the former public constant, another for each
/// tree; the build never sees it.
#[test]
fn every_evaluation_draws_a_secret_seed() {
    let f = Fixture::with_run("", "sh harness/run.sh {results} {seed}");
    let d = Daemon::start(&f.data_dir());
    let spec = std::fs::read_to_string(f.spec()).unwrap().replace(
        "protected = [\"harness/**\"]",
        "protected = [\"harness/**\"]\nbuild = \"env | grep -c GADFLY_SEED || true\"",
    );
    std::fs::write(f.spec(), spec).unwrap();
    let id = d.create_campaign(&f.spec());
    let mut seeds = Vec::new();
    for candidate in [ALL_PASS, "a true 60 100\nb true 40 100\nc true 80 100\n"] {
        f.set_candidate(candidate);
        let e = evaluate(&d, &id);
        let command = e["run"]["command"].as_str().unwrap_or_else(|| panic!("{e}"));
        let seed: u64 = command.rsplit(' ').next().unwrap().parse().unwrap();
        assert_eq!(e["build"]["output_tail"].as_str().unwrap().trim(), "0", "the build has no seed: {e}");
        seeds.push(seed);
    }
    assert!(seeds.iter().all(|s| *s != gadfly::harness::DEFAULT_SEED), "{seeds:?}");
    assert_ne!(seeds[0], seeds[1], "a new tree, a new seed");
    git(&f.ws(), &["status", "--short"]);
}

/// A harness that cannot trust its timing of a scenario says `cannot_tell`:
/// the stop stays blocked with that reason, and the scenario is not called
/// incorrect.
#[test]
fn a_scenario_the_harness_cannot_time_blocks_the_stop_as_cannot_tell() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    f.set_candidate(
        "a true 50 100\nb true 40 100 \"cannot_tell\":\"the baseline runner was stopped for 2.31 ms during a 0.48 ms call\"\nc true 80 100\n",
    );
    let e = evaluate(&d, &id);
    let b = e["scenarios"].as_array().unwrap().iter().find(|s| s["scenario"] == "b").unwrap().clone();
    assert_eq!(b["passes"], false, "{b}");
    assert_eq!(b["correct"], true, "a stall is not an incorrect result: {b}");
    let r = reason(&d.stop(&id, "done"));
    assert!(r.contains("cannot tell: the baseline runner was stopped"), "{r}");
}
