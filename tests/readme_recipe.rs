//! What a newcomer runs, as they run it (issue 32): the README's by-hand
//! recipe, extracted from README.md between its `recipe:start`/`recipe:end`
//! markers and run in bash against a fresh daemon in a temporary home; the
//! spec's warnings at create and in `gadfly doctor`; and the CLI in
//! pipelines and scripts (a closed stdout, `gadfly eval`'s status, a wrong
//! `--moment`, a refused token).

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Output, Stdio};

use common::{Daemon, Fixture, ALL_PASS};
use serde_json::Value;

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// The shell lines of README.md's recipe block.
fn readme_recipe() -> String {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let start = readme.find("<!-- recipe:start -->").expect("README.md marks its recipe with <!-- recipe:start -->");
    let end = readme.find("<!-- recipe:end -->").expect("README.md ends its recipe with <!-- recipe:end -->");
    let block = &readme[start..end];
    let body = block.split("```sh\n").nth(1).expect("the recipe is a ```sh block");
    let body = body.split("```").next().unwrap();
    assert!(body.contains("gadfly campaign create"), "{body}");
    body.to_string()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The README's recipe from a clean clone: every line as written (the
/// release build aside: the test's own binary is put on PATH instead), in
/// a home of its own. The campaign it creates evaluates the untouched
/// initial kernel with the real harness: every scenario runs and is
/// correct, and the predicate fails on speed alone.
#[test]
fn the_readme_recipe_runs_the_real_harness_on_the_initial_kernel() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_gadfly")).parent().unwrap().to_path_buf();
    let mut script = String::from("trap 'kill $(jobs -p) 2>/dev/null; wait' EXIT\n");
    let mut built = false;
    for line in readme_recipe().lines() {
        if line.trim_start().starts_with("cargo build") {
            script.push_str(&format!("export PATH=\"{}:$PATH\"\n", bin_dir.display()));
            built = true;
        } else {
            script.push_str(line);
            script.push('\n');
        }
    }
    assert!(built, "the recipe starts with the build:\n{script}");
    script.push_str(
        "echo \"$ID\" > \"$HOME/id\"\n\
         gadfly eval --json \"$ID\" > \"$HOME/eval.json\"; echo $? > \"$HOME/eval.rc\"\n",
    );
    let port = free_port();
    let out = Command::new("bash")
        .arg("-c")
        .arg(&script)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("HOME", &home)
        .env_remove("XDG_DATA_HOME")
        .env_remove("GADFLY_DATA_DIR")
        .env_remove("GADFLY_TOKEN")
        .env_remove("GADFLY_CAMPAIGN")
        .env_remove("GADFLY_DATABASE_URL")
        .env("GADFLY_LISTEN", format!("127.0.0.1:{port}"))
        .env("GADFLY_URL", format!("http://127.0.0.1:{port}"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let log = text(&out);
    let id = std::fs::read_to_string(home.join("id")).unwrap_or_default().trim().to_string();
    assert!(!id.is_empty(), "the recipe created no campaign:\n{script}\n{log}");
    assert!(home.join("gadfly-qr/workspace/harness/cpu").is_dir(), "{log}");
    assert!(home.join("gadfly-qr/workspace/.git").is_dir(), "{log}");
    assert!(!log.contains("warning:"), "the example's spec has no warnings:\n{log}");
    // The recipe's own `gadfly eval` shows the table; `gadfly key` the key.
    assert!(log.contains("the predicate FAILS"), "{log}");
    let key = std::fs::read_to_string(home.join(".local/share/gadfly/daemon-key.pub")).unwrap();
    assert!(log.contains(key.trim()), "`gadfly key` prints the key:\n{log}");

    let rc = std::fs::read_to_string(home.join("eval.rc")).unwrap();
    assert_eq!(rc.trim(), "1", "`gadfly eval` exits 1 while the predicate fails:\n{log}");
    let e: Value = serde_json::from_str(&std::fs::read_to_string(home.join("eval.json")).unwrap()).unwrap();
    assert_eq!(e["holds"], false, "{e:#}");
    let scenarios = e["scenarios"].as_array().unwrap();
    assert_eq!(scenarios.len(), 9, "{e:#}");
    for s in scenarios {
        assert_ne!(s["present"], false, "every scenario ran: {s:#}");
        assert_eq!(s["correct"], true, "the initial kernel is correct: {s:#}");
        assert!(s["measured"]["time_us"].as_f64().is_some_and(|t| t > 0.0), "{s:#}");
        assert!(s["speedup"].as_f64().is_some_and(|x| x > 0.3 && x < 3.0), "{s:#}");
        for r in s["reasons"].as_array().into_iter().flatten() {
            let r = r.as_str().unwrap_or("");
            // On a loaded machine the harness may say its timing cannot be
            // trusted: "cannot tell", never a verdict on the kernel.
            assert!(
                r.contains("speedup") || r.starts_with("cannot tell"),
                "a failing scenario fails on speed alone: {s:#}"
            );
        }
    }
    // The predicate fails on speed: the geometric mean misses 1.2x.
    assert!(e["geomean_speedup"].as_f64().is_some_and(|g| g < 1.2), "{e:#}");
    let failures = e["failures"].to_string().to_lowercase();
    for harness_missing in ["no such file", "not found", "harness", "build failed", "exit status"] {
        assert!(!failures.contains(harness_missing), "no harness or build failure: {e:#}");
    }
}

/// `campaign create` and `doctor` name a protected glob that matches no
/// file, and a run command without `{seed}`, as warnings.
#[test]
fn create_and_doctor_warn_about_an_unmatched_protected_glob_and_a_missing_seed() {
    let f = Fixture::new("");
    let spec = std::fs::read_to_string(f.spec()).unwrap();
    std::fs::write(
        f.spec(),
        spec.replace("protected = [\"harness/**\"]", "protected = [\"harness/**\", \"bench/**\"]"),
    )
    .unwrap();
    let d = Daemon::start(&f.data_dir());
    let out = d.cmd().args(["campaign", "create"]).arg(f.spec()).output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("warning: [harness] protected glob `bench/**` matches no file"), "{stderr}");
    assert!(!stderr.contains("`harness/**` matches"), "{stderr}");
    assert!(stderr.contains("warning: [harness] run `sh harness/run.sh {results}` has no `{seed}`"), "{stderr}");
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let doctor = d.cmd().env("GADFLY_DATA_DIR", &d.data_dir).args(["doctor", &id]).output().unwrap();
    let report = text(&doctor);
    assert!(report.contains("campaign spec: [harness] protected glob `bench/**` matches no file"), "{report}");
    assert!(report.contains("has no `{seed}`"), "{report}");
    assert_eq!(doctor.status.code(), Some(1), "{report}");
}

/// Spawns `cmd` with its stdout a pipe; with `read_first`, reads one line
/// before closing the pipe, else closes it before the command writes.
fn with_closed_stdout(mut cmd: Command, read_first: bool) -> Output {
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    if read_first {
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).unwrap();
        assert!(!line.is_empty());
    } else {
        drop(stdout);
    }
    child.wait_with_output().unwrap()
}

fn assert_quiet(out: &Output, what: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{what} on a closed pipe: {:?}\n{stderr}", out.status);
    assert!(!stderr.contains("panicked") && !stderr.contains("Broken pipe"), "{what}: {stderr}");
}

#[test]
fn a_closed_stdout_ends_bank_list_and_campaign_show_quietly() {
    let empty = tempfile::tempdir().unwrap();
    for read_first in [false, true] {
        let mut cmd = common::gadfly();
        cmd.args(["bank", "list"]).current_dir(empty.path());
        assert_quiet(&with_closed_stdout(cmd, read_first), "bank list");
        let mut cmd = common::gadfly();
        cmd.args(["bank", "list", "--json"]).current_dir(empty.path());
        assert_quiet(&with_closed_stdout(cmd, read_first), "bank list --json");
    }
    // As a shell pipeline runs it.
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!("set -o pipefail; '{}' bank list | head -1", env!("CARGO_BIN_EXE_gadfly")))
        .current_dir(empty.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 1, "{}", text(&out));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"), "{}", text(&out));

    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    for read_first in [false, true] {
        let mut cmd = d.cmd();
        cmd.args(["campaign", "show", &id]);
        assert_quiet(&with_closed_stdout(cmd, read_first), "campaign show");
        let mut cmd = d.cmd();
        cmd.args(["campaign", "list"]);
        assert_quiet(&with_closed_stdout(cmd, read_first), "campaign list");
    }
}

#[test]
fn eval_exits_1_when_the_predicate_fails_0_when_it_holds_2_on_an_error() {
    let help = common::gadfly().args(["eval", "--help"]).output().unwrap();
    let help = text(&help);
    assert!(help.contains("0 when the predicate holds, 1 when it fails") && help.contains("2 on an error"), "{help}");
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let fails = d.run(&["eval", &id]);
    assert_eq!(fails.status.code(), Some(1), "{}", text(&fails));
    assert!(text(&fails).contains("the predicate FAILS"), "{}", text(&fails));
    let fails_json = d.run(&["eval", "--json", &id]);
    assert_eq!(fails_json.status.code(), Some(1), "{}", text(&fails_json));
    f.set_candidate(ALL_PASS);
    let holds = d.run(&["eval", &id]);
    assert_eq!(holds.status.code(), Some(0), "{}", text(&holds));
    assert!(text(&holds).contains("the predicate HOLDS"), "{}", text(&holds));
    let unknown = d.run(&["eval", "no-such-campaign"]);
    assert_eq!(unknown.status.code(), Some(2), "{}", text(&unknown));
}

#[test]
fn bank_list_names_the_valid_moments_for_an_unknown_one() {
    let out = common::gadfly().args(["bank", "list", "--moment", "plateu"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("unknown moment `plateu`"), "{stderr}");
    for m in gadfly::bank::MOMENTS {
        assert!(stderr.contains(m), "names {m}: {stderr}");
    }
    assert!(out.stdout.is_empty());
    let ok = common::gadfly().args(["bank", "list", "--moment", "plateau"]).output().unwrap();
    assert!(ok.status.success() && !ok.stdout.is_empty(), "{}", text(&ok));
}

/// A refused token tells a CLI user to set GADFLY_TOKEN (or where the CLI
/// reads it), not to send an HTTP header; the API keeps its message.
#[test]
fn a_refused_token_tells_the_cli_user_to_set_gadfly_token() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let elsewhere = tempfile::tempdir().unwrap();
    for token in [Some("not-the-token"), None] {
        let mut cmd = d.cmd();
        cmd.env("GADFLY_DATA_DIR", elsewhere.path()).args(["campaign", "list"]);
        match token {
            Some(t) => cmd.env("GADFLY_TOKEN", t),
            None => cmd.env_remove("GADFLY_TOKEN"),
        };
        let out = cmd.output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("set GADFLY_TOKEN"), "{stderr}");
        assert!(stderr.contains(&elsewhere.path().join("token").display().to_string()), "{stderr}");
        assert!(!stderr.contains("Authorization"), "{stderr}");
    }
}

/// Every shipped example gives the re-check fresh inputs: qr-cpu passes
/// `{seed}`, the CUDA grader draws its own (`fresh_inputs = true`).
#[test]
fn the_shipped_examples_give_the_recheck_fresh_inputs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    for spec in ["qr-cpu/campaign.toml", "attention-h200/campaign.toml", "attention-h200/campaign-initial.toml"] {
        let s = match gadfly::campaign::load(&root.join(spec)) {
            Ok(s) => s,
            // An exported source tree: the example's workspace is in no git work tree.
            Err(e) if !Path::new(env!("CARGO_MANIFEST_DIR")).join(".git").exists() => {
                eprintln!("{spec}: {e:#}");
                continue;
            }
            Err(e) => panic!("{spec}: {e:#}"),
        };
        let w = gadfly::campaign::warnings(&s);
        assert!(!w.iter().any(|w| w.contains("{seed}")), "{spec}: {w:?}");
    }
}

/// The README is what a newcomer reads in five minutes (#49 item 5): what
/// gadfly is, the two commands, how long the first build and the suite
/// take on 2 cores, how to install it, supervising, and where the rest is;
/// every document it points to exists. The detail lives in docs/.
#[test]
fn the_readme_is_a_five_minute_read_that_points_to_the_rest() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(lines <= 250, "README.md has {lines} lines: move the detail to docs/");
    for heading in ["## The two commands", "## Supervising agents", "## Where the rest is"] {
        assert!(readme.lines().any(|l| l.trim() == heading), "README.md lacks `{heading}`");
    }
    assert!(readme.contains("cargo run --release -- demo"), "the first command");
    assert!(readme.contains("cargo install --path ."), "how to put gadfly on the PATH");
    let timing = readme.split("\n\n").find(|p| p.contains("2-core")).expect("a paragraph on a 2-core machine's times");
    for what in ["first debug build", "first release build", "suite"] {
        assert!(timing.contains(what), "the 2-core paragraph names the time of the {what}: {timing}");
    }
    assert!(timing.matches("minutes").count() >= 2, "{timing}");
    let rest = readme.split("## Where the rest is").nth(1).unwrap();
    let targets: Vec<&str> = rest.split("](").skip(1).filter_map(|s| s.split(')').next()).collect();
    assert!(targets.len() >= 10, "the README points to the docs: {targets:?}");
    for t in targets {
        assert!(root.join(t).is_file(), "README.md points to {t}, which does not exist");
    }
}
