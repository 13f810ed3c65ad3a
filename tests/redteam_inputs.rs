//! Red team, the evaluation input (issue 29, THREATS rows 1, 3, 8, 9 and
//! 15): the agent shapes what the evaluation is built from, through a file
//! outside its kernel that the build picks up, a file name that is shell
//! code, its own `.git` (replace refs, config that runs programs), or a
//! protected folder turned into a link. Each attack runs against the real
//! binary (the shipped qr-cpu example where it says so) and must be held.

mod common;

use std::path::{Path, PathBuf};

use common::{git, Daemon, Fixture, ALL_PASS};
use serde_json::Value;

/// A candidate the fixture's harness fails: scenario b is wrong.
const WRONG_B: &str = "a true 50 100\nb false 40 100\nc true 80 100\n";

fn evaluate(d: &Daemon, id: &str) -> Value {
    let out = d.run(&["eval", id, "--json"]);
    // 0: the predicate holds, 1: it fails; either way a verdict.
    assert!(matches!(out.status.code(), Some(0 | 1)), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn failures(e: &Value) -> Vec<String> {
    e["failures"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).collect()
}

fn scenario<'a>(e: &'a Value, name: &str) -> &'a Value {
    e["scenarios"].as_array().unwrap().iter().find(|s| s["scenario"] == name).unwrap()
}

/// The qr-cpu example as `gadfly demo` sets it up, in `root` (its spec
/// declares `candidate = ["kernel/**"]`). Returns the spec and workspace.
fn qr_cpu(root: &Path) -> (PathBuf, PathBuf) {
    let spec = gadfly::demo::materialize_example(root).unwrap();
    let text = std::fs::read_to_string(&spec).unwrap();
    assert!(text.contains("candidate = [\"kernel/**\"]"), "the shipped example declares its candidate:\n{text}");
    (spec, root.join("workspace"))
}

/// The fixture with `candidate` added to its `[harness]`.
fn fixture_with_candidate(globs: &str) -> Fixture {
    let f = Fixture::new("");
    let text =
        std::fs::read_to_string(f.spec()).unwrap().replace("[harness]\n", &format!("[harness]\ncandidate = {globs}\n"));
    std::fs::write(f.spec(), text).unwrap();
    f
}

fn write_exec(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A marker path outside every workspace and data dir of the test.
fn marker(root: &Path, name: &str) -> PathBuf {
    let dir = root.join("markers");
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// THREATS row 1 / Details 1: a `GNUmakefile` (read by make before the
/// protected `Makefile`) swaps the harness binary for a wrapper that
/// writes passing numbers. With the candidate declared, neither file
/// reaches the evaluation: the real harness measures the untouched initial
/// kernel, and edits outside the candidate do not even change the tree.
#[test]
fn a_gnumakefile_outside_the_candidate_never_reaches_the_build() {
    let root = tempfile::tempdir().unwrap();
    let (spec, ws) = qr_cpu(root.path());
    let ran = marker(root.path(), "gnumakefile-ran");
    std::fs::write(
        ws.join("GNUmakefile"),
        format!(
            ".DEFAULT_GOAL := forged\n$(shell touch {0})\ninclude Makefile\nforged: all\n\t@touch {0}\n\t@mv build/qrbench build/qrbench.real\n\t@cp tools/wrap.sh build/qrbench\n\t@chmod +x build/qrbench\n",
            ran.display()
        ),
    )
    .unwrap();
    // The wrapper: every scenario correct, 1 us against 1000 us.
    write_exec(
        &ws.join("tools/wrap.sh"),
        r#"#!/bin/sh
out=""; prev=""; for a in "$@"; do [ "$prev" = "--out" ] && out="$a"; prev="$a"; done
[ -n "$out" ] || out="$GADFLY_RESULTS"
: > "$out"
for s in b4096_m4_n4 b2048_m8_n8 b1024_m13_n13 b512_m17_n17 b128_m33_n33 b32_m50_n50 b16_m64_n64 b4_m100_n100 b128_m60_n20; do
  printf '{"scenario":"%s","correct":true,"max_abs_err_ref":0,"max_abs_err_hi":0,"tolerance":1e-12,"time_us":1,"baseline_us":1000,"samples":9,"cv":0.01}\n' "$s" >> "$out"
done
"#,
    );
    let d = Daemon::start(&root.path().join("data"));
    let id = d.create_campaign(&spec);
    let e = evaluate(&d, &id);
    assert!(!ran.exists(), "the workspace's GNUmakefile ran in the build: {e}");
    assert_eq!(e["holds"], false, "the unchanged initial kernel passed: {e}");
    assert_eq!(e["build"]["ok"], true, "{e}");
    for s in e["scenarios"].as_array().unwrap() {
        assert_ne!(s["time_us"].as_f64(), Some(1.0), "a forged time reached the verdict: {e}");
    }
    // The tree is the candidate's content only: an edit outside it is not
    // a new candidate (the verdict comes from the cache), one inside is.
    std::fs::write(ws.join("GNUmakefile"), "all:\n\ttrue\n").unwrap();
    std::fs::write(ws.join("README.md"), "edited\n").unwrap();
    let again = evaluate(&d, &id);
    assert_eq!(again["tree"], e["tree"], "{again}");
    assert_eq!(again["cached"], true, "{again}");
    let qr = ws.join("kernel/qr.c");
    let text = std::fs::read_to_string(&qr).unwrap();
    std::fs::write(&qr, format!("{text}\n/* edited */\n")).unwrap();
    let third = evaluate(&d, &id);
    assert_ne!(third["tree"], e["tree"], "{third}");
    assert!(!ran.exists());
}

/// THREATS row 3 / Details 3: a kernel file whose name is shell code
/// (``kernel/a`sh${IFS}t.sh`.c``) would reach `sh` through the Makefile's
/// wildcard. The candidate file name is refused by name and nothing is
/// built or run.
#[test]
fn a_file_name_that_is_shell_code_is_refused_by_name() {
    let root = tempfile::tempdir().unwrap();
    let (spec, ws) = qr_cpu(root.path());
    let ran = marker(root.path(), "file-name-ran");
    write_exec(&ws.join("t.sh"), &format!("#!/bin/sh\ntouch {}\n: > kernel/a.c\n", ran.display()));
    std::fs::write(ws.join("kernel/a`sh${IFS}t.sh`.c"), "").unwrap();
    let d = Daemon::start(&root.path().join("data"));
    let id = d.create_campaign(&spec);
    let e = evaluate(&d, &id);
    assert_eq!(e["holds"], false, "{e}");
    assert!(!ran.exists(), "the file name ran as code: {e}");
    assert!(e["build"].is_null() && e["run"].is_null(), "something was built or run: {e}");
    assert!(
        failures(&e).iter().any(|f| f.contains("kernel/a`sh${IFS}t.sh`.c") && f.contains("refused")),
        "the refusal names the file: {e}"
    );
    // A link in the candidate is refused the same way.
    std::fs::remove_file(ws.join("kernel/a`sh${IFS}t.sh`.c")).unwrap();
    std::os::unix::fs::symlink("/etc/hostname", ws.join("kernel/linked.c")).unwrap();
    let e = evaluate(&d, &id);
    assert_eq!(e["holds"], false, "{e}");
    assert!(failures(&e).iter().any(|f| f.contains("kernel/linked.c") && f.contains("symbolic link")), "{e}");
    assert!(!ran.exists());
}

/// THREATS row 8 / Details 8: `git replace` in the workspace's repository
/// makes its own `git archive` export another blob (a passing candidate)
/// than the snapshot's tree names (the failing one in the workspace).
/// Snapshots never read that repository: what is evaluated is the files.
#[test]
fn git_replace_has_no_effect_on_what_is_evaluated() {
    let f = Fixture::new("");
    let ws = f.ws();
    // The failing candidate, committed; the passing one as a blob only.
    f.set_candidate(WRONG_B);
    git(&ws, &["add", "-A"]);
    git(&ws, &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "wrong b"]);
    let rev = |args: &[&str]| {
        let out = std::process::Command::new("git").args(args).current_dir(&ws).output().unwrap();
        assert!(out.status.success());
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    let honest = rev(&["rev-parse", "HEAD:candidate.txt"]);
    std::fs::write(f.dir.path().join("pass.txt"), ALL_PASS).unwrap();
    let forged = rev(&["hash-object", "-w", f.dir.path().join("pass.txt").to_str().unwrap()]);
    git(&ws, &["replace", &honest, &forged]);
    assert_eq!(rev(&["cat-file", "-p", "HEAD:candidate.txt"]), ALL_PASS.trim(), "the replace ref is in effect");

    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let e = evaluate(&d, &id);
    assert_eq!(e["holds"], false, "the replaced blob was evaluated: {e}");
    assert_eq!(scenario(&e, "b")["correct"], false, "{e}");
    // With the replace ref gone, the same files give the same tree and verdict.
    git(&ws, &["replace", "-d", &honest]);
    let again = evaluate(&d, &id);
    assert_eq!(again["tree"], e["tree"], "{again}");
    assert_eq!(again["holds"], false, "{again}");
    // The stop is blocked too.
    let answer = d.stop(&id, "done");
    assert!(answer.is_some_and(|a| a["decision"] == "block"), "the stop was let through");
}

/// THREATS row 9 / Details 9: the workspace's `.git/config` names an
/// fsmonitor hook and a clean filter (applied through `.gitattributes`);
/// git would run them inside the daemon, unsandboxed, at every snapshot.
/// They never run, at creation or at any evaluation.
#[test]
fn the_workspace_git_config_never_runs() {
    let f = Fixture::new("[beam]\nmin_families = 1\n");
    let ws = f.ws();
    let ran = marker(f.dir.path(), "git-config-ran");
    let hook = f.dir.path().join("hook.sh");
    write_exec(&hook, &format!("#!/bin/sh\necho \"$0 $*\" >> {}\ncat\n", ran.display()));
    let h = hook.display().to_string();
    git(&ws, &["config", "core.fsmonitor", &h]);
    git(&ws, &["config", "filter.x.clean", &h]);
    git(&ws, &["config", "filter.x.smudge", &h]);
    git(&ws, &["config", "filter.x.required", "true"]);
    // Hooks too: the beam's `update-ref` would run reference-transaction.
    git(&ws, &["config", "core.hooksPath", f.dir.path().to_str().unwrap()]);
    std::fs::copy(&hook, f.dir.path().join("reference-transaction")).unwrap();
    std::fs::write(ws.join(".gitattributes"), "* filter=x\n").unwrap();
    std::fs::write(ws.join(".git/info/attributes"), "* filter=x\n").unwrap();

    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    f.set_candidate(ALL_PASS);
    let e = evaluate(&d, &id);
    assert_eq!(e["holds"], true, "{e}");
    f.set_candidate(WRONG_B);
    let e = evaluate(&d, &id);
    assert_eq!(e["holds"], false, "{e}");
    // The beam tags and evaluates a commit of the workspace's repository.
    let out = d.run(&["beam", "tag", "initial", "--campaign", &id]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = d.run(&["beam", "list", &id, "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let b: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(b.to_string().contains("initial"), "{b}");
    assert!(!ran.exists(), "the workspace's git config ran: {}", std::fs::read_to_string(&ran).unwrap_or_default());
}

/// THREATS row 15: the protected `harness` folder made a link to a folder
/// of the agent's. The evaluation reports it, runs gadfly's copy, and the
/// restore of the pristine files writes nothing through the link.
#[test]
fn a_symlinked_protected_folder_writes_nothing_outside() {
    let f = Fixture::new("");
    let ws = f.ws();
    let elsewhere = f.dir.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    // The agent's harness: every scenario passes.
    let fake = "#!/bin/sh\nprintf '{\"scenario\":\"a\",\"correct\":true,\"time_us\":1,\"baseline_us\":100}\\n{\"scenario\":\"b\",\"correct\":true,\"time_us\":1,\"baseline_us\":100}\\n{\"scenario\":\"c\",\"correct\":true,\"time_us\":1,\"baseline_us\":100}\\n' > \"$1\"\n";
    std::fs::write(elsewhere.join("run.sh"), fake).unwrap();
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    f.set_candidate(WRONG_B);
    std::fs::remove_dir_all(ws.join("harness")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, ws.join("harness")).unwrap();
    let e = evaluate(&d, &id);
    assert_eq!(e["holds"], false, "{e}");
    assert_eq!(scenario(&e, "b")["correct"], false, "the agent's harness ran: {e}");
    assert!(!e["violations"].as_array().unwrap().is_empty(), "{e}");
    assert_eq!(std::fs::read_to_string(elsewhere.join("run.sh")).unwrap(), fake, "the restore wrote through the link");
    let names: Vec<String> =
        std::fs::read_dir(&elsewhere).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(names, vec!["run.sh"], "the restore wrote into the linked folder");
}

/// A spec with a candidate evaluates only it, so a protected file the
/// agent edits outside the candidate is simply not used (and no longer a
/// violation to report), while a spec without one still warns at create,
/// on stderr, with stdout just the id.
#[test]
fn a_spec_without_candidate_warns_on_stderr_only() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let out = d.cmd().args(["campaign", "create", "--no-calibrate"]).arg(f.spec()).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(stdout.lines().count(), 1, "stdout is the id only: {stdout:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("warning") && stderr.contains("candidate"), "{stderr}");

    let g = fixture_with_candidate("[\"candidate.txt\"]");
    let d = Daemon::start(&g.data_dir());
    let out = d.cmd().args(["campaign", "create", "--no-calibrate"]).arg(g.spec()).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // (The fixture's run has no `{seed}`: that warning is another one.)
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.lines().any(|l| l.contains("warning") && l.contains("candidate")), "{stderr}");
    let id = String::from_utf8(out.stdout).unwrap().trim().to_string();
    g.set_candidate(WRONG_B);
    let path = g.ws().join("harness/run.sh");
    let text = std::fs::read_to_string(&path).unwrap().replace("\"$correct\"", "true");
    std::fs::write(&path, text).unwrap();
    std::fs::write(g.ws().join("conftest.py"), "raise SystemExit\n").unwrap();
    let e = evaluate(&d, &id);
    assert_eq!(e["holds"], false, "{e}");
    assert_eq!(scenario(&e, "b")["correct"], false, "the agent's harness ran: {e}");
    g.set_candidate(ALL_PASS);
    let e = evaluate(&d, &id);
    assert_eq!(e["holds"], true, "{e}");
}
