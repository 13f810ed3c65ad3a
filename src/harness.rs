//! Evaluates a campaign's candidate: snapshot the workspace tree, export it
//! to a fresh folder, run the build and run commands there with a hard
//! timeout, parse the results, check the constraints and the protected
//! files, and judge the predicate. Anything that goes wrong is a failure
//! with its reason, never a pass.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::campaign::{CampaignSpec, SandboxMode};
use crate::evaluation::{Evaluation, Step};
use crate::predicate;
use crate::process::{self, Exit, Outcome};
use crate::{constraints, results, snapshot};

/// The last snapshot of a workspace and the content fingerprint it was
/// taken at.
#[derive(Debug, Clone)]
pub struct LastSnapshot {
    pub fingerprint: [u8; 32],
    pub tree: String,
}

/// Snapshots `spec.workspace` now into gadfly's private git store `store`
/// (see [`snapshot::store_path`]), through gadfly's own persistent index
/// at `index`. With `[harness] candidate`, the tree returned holds only
/// the candidate's files (so it names exactly what is evaluated). When
/// the workspace's content fingerprint equals `last`'s, the tree is known
/// without running git. A snapshot is remembered only when the content was
/// the same before and after git read it (an edit made meanwhile, or an
/// edit undone, can never pair a tree with content it does not hold).
/// Returns the tree and what to remember for next time.
pub async fn snapshot_tree(
    spec: &CampaignSpec,
    store: &Path,
    index: &Path,
    last: Option<LastSnapshot>,
) -> anyhow::Result<(String, Option<LastSnapshot>)> {
    let ws = spec.workspace.clone();
    let (store, index, candidate) = (store.to_path_buf(), index.to_path_buf(), spec.harness.candidate.clone());
    tokio::task::spawn_blocking(move || {
        let before = snapshot::fingerprint(&ws, &candidate)?;
        if let Some(last) = last.filter(|l| l.fingerprint == before.hash) {
            return Ok((last.tree.clone(), Some(last)));
        }
        if let Some(parent) = index.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let mut tree = snapshot::tree_hash_with_index(&store, &ws, &index)?;
        if !candidate.is_empty() {
            tree = snapshot::candidate_tree(&store, &tree, &candidate)?;
        }
        let after = snapshot::fingerprint(&ws, &candidate)?;
        let remember = (after == before).then(|| LastSnapshot { fingerprint: before.hash, tree: tree.clone() });
        Ok((tree, remember))
    })
    .await?
}

/// A seed no evaluation uses: a re-check draws its own, never this one.
/// (Before issue 45 every ordinary evaluation used it, a public constant:
/// a kernel could regenerate the inputs and do the work where it was not
/// timed.)
pub const DEFAULT_SEED: u64 = 1;

/// The secret seed of an evaluation: an HMAC of the campaign and the
/// evaluation's key (its tree, and a forced re-run's number) under the
/// daemon's master token. Nobody without the token can predict it, a new
/// tree gets a new one, and the same evaluation asked again (a stop waiting
/// for a worker, a second daemon on the same store) joins the same job.
/// Harnesses read it from `{seed}` in the run command or from
/// `$GADFLY_SEED` (the run step's only; the build never sees it, and a
/// harness must not pass it on to the candidate). Never [`DEFAULT_SEED`].
pub fn secret_seed(secret: &str, campaign_id: &str, key: &str) -> u64 {
    use hmac::{Hmac, Mac};
    let mut m = hmac::Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes a key of any length");
    m.update(b"gadfly evaluation seed v1\0");
    m.update(campaign_id.as_bytes());
    m.update(b"\0");
    m.update(key.as_bytes());
    let bytes: [u8; 32] = Hmac::finalize(m).into_bytes().into();
    let seed = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as u64;
    if seed == DEFAULT_SEED {
        2
    } else {
        seed
    }
}

/// Evaluates `tree` of the campaign's workspace in a fresh folder under
/// `scratch` with the inputs of `seed` (see [`secret_seed`]). `protected`
/// maps protected paths to the hashes recorded at campaign creation: a
/// difference is a violation. `pristine` is gadfly's own copy of those
/// files: the build and the harness run with it, never with the agent's.
#[allow(clippy::too_many_arguments)]
pub async fn evaluate_tree_seeded(
    spec: &CampaignSpec,
    campaign_id: &str,
    tree: &str,
    protected: &BTreeMap<String, String>,
    pristine: &[snapshot::PristineFile],
    store: &Path,
    scratch: &Path,
    seed: u64,
) -> anyhow::Result<Evaluation> {
    let inputs = Inputs { spec, campaign_id, tree, protected, pristine, seed, store };
    evaluate_inputs(&inputs, scratch).await
}

/// What one evaluation of a tree needs besides the tree's files.
#[derive(Clone, Copy)]
pub struct Inputs<'a> {
    pub spec: &'a CampaignSpec,
    pub campaign_id: &'a str,
    pub tree: &'a str,
    /// Protected paths and the hashes recorded at campaign creation.
    pub protected: &'a BTreeMap<String, String>,
    /// gadfly's own copies of the protected files.
    pub pristine: &'a [snapshot::PristineFile],
    pub seed: u64,
    /// gadfly's private git store that holds `tree` (see
    /// [`snapshot::store_path`]); a worker, which gets the files unpacked,
    /// does not read it.
    pub store: &'a Path,
}

/// Exports the tree from gadfly's private store into a fresh folder under
/// `scratch` and evaluates it there (the daemon's way).
pub async fn evaluate_inputs(inputs: &Inputs<'_>, scratch: &Path) -> anyhow::Result<Evaluation> {
    let started = Instant::now();
    if let Some(refused) = refused_candidate(inputs, started).await? {
        return Ok(refused);
    }
    let sandbox = snapshot::Sandbox::new(scratch)?;
    {
        let (store, t, d) = (inputs.store.to_path_buf(), inputs.tree.to_string(), sandbox.tree());
        tokio::task::spawn_blocking(move || snapshot::export(&store, &t, &d)).await??;
    }
    evaluate_unpacked(inputs, &sandbox, None, started).await
}

/// With `[harness] candidate`, a failing evaluation (nothing built or run)
/// when the candidate tree holds a file gadfly does not hand to a build:
/// a link, a submodule, or a name outside the safe set, each named.
pub async fn refused_candidate(inputs: &Inputs<'_>, started: Instant) -> anyhow::Result<Option<Evaluation>> {
    if inputs.spec.harness.candidate.is_empty() {
        return Ok(None);
    }
    let (store, t) = (inputs.store.to_path_buf(), inputs.tree.to_string());
    let problems = tokio::task::spawn_blocking(move || snapshot::candidate_problems(&store, &t)).await??;
    if problems.is_empty() {
        return Ok(None);
    }
    let spec = inputs.spec;
    let verdict = predicate::judge(&spec.predicate, &spec.harness.scenarios, &[], problems.clone());
    Ok(Some(Evaluation {
        id: None,
        tree: inputs.tree.to_string(),
        verdict,
        build: None,
        run: None,
        violations: problems,
        duration_ms: started.elapsed().as_millis() as u64,
        created_at: crate::time::now(),
        cached: false,
        origin: Default::default(),
    }))
}

/// Evaluates the tree whose files are already in `sandbox.tree()` (exported
/// by the daemon, or unpacked by a worker): checks the protected files,
/// restores gadfly's copies, builds, runs, parses and judges. With
/// `launch`, each command runs through that template (see [`launch_command`]).
/// An error is a failure of the machinery, not of the candidate: the
/// candidate's failures are in the evaluation.
pub async fn evaluate_unpacked(
    inputs: &Inputs<'_>,
    sandbox: &snapshot::Sandbox,
    launch: Option<&str>,
    started: Instant,
) -> anyhow::Result<Evaluation> {
    let Inputs { spec, campaign_id, tree, protected, pristine, seed, .. } = *inputs;
    let tree_dir = sandbox.tree();
    let mut failures = Vec::new();
    let mut violations = Vec::new();

    let globs = spec.harness.protected.clone();
    let d = tree_dir.clone();
    let actual = tokio::task::spawn_blocking(move || snapshot::hash_matching(&d, &globs)).await??;
    // With `[harness] candidate`, the tree holds only the candidate's files:
    // only protected files among them are compared (the others never reach
    // the evaluation, gadfly's copies stand in for them).
    let expected = snapshot::protected_within(protected, &spec.harness.candidate)?;
    violations.extend(snapshot::protected_violations(&expected, &actual));
    // Whatever the agent did to them, the harness and reference that run
    // are gadfly's own copies.
    {
        let (d, globs, files) = (tree_dir.clone(), spec.harness.protected.clone(), pristine.to_vec());
        tokio::task::spawn_blocking(move || snapshot::restore_pristine(&d, &globs, &files)).await??;
    }

    let timeout = Duration::from_secs(spec.harness.timeout_s);
    // The build compiles candidate code (and, through a hostile file name
    // or build rule, may run it): it gets neither the results path nor the
    // seed (a re-check's seed must not be visible to what it judges).
    let build_env = vec![("GADFLY_CAMPAIGN", campaign_id.to_string()), ("GADFLY_TREE", tree.to_string())];
    // The sandbox, if the campaign asks for one and the host has it.
    // The sandbox: on unless the spec opts out; where it cannot work,
    // nothing is judged (an error, never an unsandboxed verdict) unless the
    // spec said `auto`.
    let jail = match spec.harness.sandbox {
        SandboxMode::None => None,
        SandboxMode::Bwrap => match bwrap_problem() {
            Some(why) => anyhow::bail!(
                "cannot judge: the candidate must run sandboxed and {why}; install bubblewrap (Debian: `apt install \
                 bubblewrap`) and allow unprivileged user namespaces, or opt out in the spec with `[harness] \
                 sandbox = \"none\"` (the candidate then runs as the daemon's user)"
            ),
            None => Some(sandbox.dir.path().to_path_buf()),
        },
        SandboxMode::Auto => match bwrap_problem() {
            Some(why) => {
                tracing::warn!(%why, "sandbox = \"auto\": the harness runs unsandboxed");
                None
            }
            None => Some(sandbox.dir.path().to_path_buf()),
        },
    };
    let run = |command: String, what: &'static str, env: Vec<(&'static str, String)>| {
        let tree_dir = tree_dir.clone();
        let writable = if what == "run" { Writable::ResultsOnly } else { Writable::EvaluationFolder };
        let command = match &jail {
            Some(dir) => bwrap_command(&command, dir, &tree_dir, writable, &spec.harness.readable),
            None => command,
        };
        async move {
            match launch {
                None => Ok(process::run_shell(&command, &tree_dir, &env, timeout).await),
                Some(template) => {
                    let marker = sandbox.dir.path().join(format!("launched-{what}-{:016x}", rand::random::<u64>()));
                    let wrapped = launch_command(template, &command, &tree_dir, &env, &marker);
                    let mut outcome = process::run_shell(&wrapped, &tree_dir, &env, timeout).await;
                    if !marker.exists() && outcome.exit == Exit::TimedOut {
                        // Still waiting for resources (a Slurm queue): a
                        // failing evaluation, as a timeout is, that says so.
                        outcome.output_tail.push_str(&format!(
                            "(gadfly: the launcher had not started the {what} command when the timeout came)\n"
                        ));
                    }
                    if !marker.exists() && outcome.exit != Exit::TimedOut {
                        anyhow::bail!(
                            "the launch template did not start the {what} command ({}): {}",
                            with_tail(outcome.exit.describe("the launcher", timeout), &outcome),
                            wrapped
                        );
                    }
                    // Started but never ended: the launcher (or the cluster
                    // under it: `scancel`, a preemption, a node lost) stopped
                    // it, which says nothing of the candidate: retried too.
                    if marker.exists() && !ended_marker(&marker).exists() && outcome.exit != Exit::TimedOut {
                        anyhow::bail!(
                            "the launcher stopped the {what} command before it ended ({})",
                            with_tail(outcome.exit.describe("the launcher", timeout), &outcome)
                        );
                    }
                    if let Some(signal) = launcher_signal(&ended_marker(&marker)) {
                        anyhow::bail!(
                            "the launcher stopped the {what} command before it ended (it died of {signal}; {})",
                            with_tail(outcome.exit.describe("the launcher", timeout), &outcome)
                        );
                    }
                    Ok(outcome)
                }
            }
        }
    };

    let mut build_step = None;
    let mut built = true;
    if let Some(build) = &spec.harness.build {
        crate::progress::set("building");
        let outcome = run(build.clone(), "build", build_env.clone()).await?;
        built = outcome.exit.success();
        if !built {
            failures.push(with_tail(outcome.exit.describe("build", timeout), &outcome));
        }
        build_step = Some(step(build, &outcome, timeout));
    }

    let mut run_step = None;
    let mut measured = Vec::new();
    if built {
        // A fresh, unguessable path drawn after the build, given to the run
        // step only. The harness contract: the process that writes it never
        // loads candidate code, and the candidate gets neither this path nor
        // the seed (harness/cpu/README.md, "Processes").
        let results_path = sandbox.results();
        // The path as the harness sees it (inside the sandbox, its own).
        let results_shown = match &jail {
            Some(dir) => in_sandbox(dir, &results_path),
            None => results_path.clone(),
        };
        let mut run_env = build_env.clone();
        run_env.push(("GADFLY_RESULTS", results_shown.display().to_string()));
        run_env.push(("GADFLY_SEED", seed.to_string()));
        let command = spec
            .harness
            .run
            .replace("{results}", &shell_quote(&results_shown.display().to_string()))
            .replace("{seed}", &seed.to_string());
        crate::progress::set("running the harness");
        let outcome = run(command.clone(), "run", run_env).await?;
        crate::progress::set("reading the results");
        if !outcome.exit.success() {
            failures.push(with_tail(outcome.exit.describe("harness run", timeout), &outcome));
        }
        // Never on an async worker: whatever sits at the path (a FIFO with
        // no writer, a file on a hung mount) cannot stall the daemon.
        let path = results_path.clone();
        let read = tokio::time::timeout(
            RESULTS_READ_TIMEOUT,
            tokio::task::spawn_blocking(move || read_results_file(&path, RESULTS_MAX_BYTES)),
        )
        .await;
        match read {
            Ok(Ok(Ok(bytes))) => {
                let parsed = results::parse(&String::from_utf8_lossy(&bytes));
                failures.extend(parsed.problems);
                measured = parsed.scenarios;
            }
            Ok(Ok(Err(ResultsReadError::Missing))) if outcome.exit.success() => {
                failures.push("the harness wrote no results file".into())
            }
            Ok(Ok(Err(ResultsReadError::Missing))) => {}
            Ok(Ok(Err(ResultsReadError::Refused(why)))) => failures.push(why),
            Ok(Err(e)) => failures.push(format!("reading the results file failed: {e}")),
            Err(_) => failures.push(format!(
                "reading the results file did not finish within {} s: refused",
                RESULTS_READ_TIMEOUT.as_secs()
            )),
        }
        run_step = Some(step(&command, &outcome, timeout));

        if let Some(binary) = &spec.constraints.binary {
            if !spec.constraints.banned_symbols.is_empty() {
                let path = tree_dir.join(binary);
                let banned = spec.constraints.banned_symbols.clone();
                match tokio::task::spawn_blocking(move || constraints::check_binary(&path, &banned)).await? {
                    Ok(hits) => violations.extend(hits.iter().map(|h| h.to_string())),
                    Err(e) => violations.push(e),
                }
            }
        }
    }

    failures.extend(violations.iter().map(|v| format!("{} {v}", crate::evaluation::CONSTRAINT_VIOLATED)));
    let verdict = predicate::judge(&spec.predicate, &spec.harness.scenarios, &measured, failures);
    Ok(Evaluation {
        id: None,
        tree: tree.to_string(),
        verdict,
        build: build_step,
        run: run_step,
        violations,
        duration_ms: started.elapsed().as_millis() as u64,
        created_at: crate::time::now(),
        cached: false,
        origin: Default::default(),
    })
}

/// The largest results file the daemon reads.
pub const RESULTS_MAX_BYTES: u64 = 16 << 20;
/// How long reading the results file may take.
const RESULTS_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Why the results file could not be read.
#[derive(Debug, PartialEq)]
pub enum ResultsReadError {
    /// Nothing at the path.
    Missing,
    /// Something is there but it is not a results file to trust; the
    /// sentence says what.
    Refused(String),
}

/// Reads the results file without trusting what is at `path`: a symbolic
/// link is not followed (`O_NOFOLLOW`), opening never waits for a writer
/// (`O_NONBLOCK`, so a FIFO cannot block), only a regular file is read
/// (checked on the open descriptor) and at most `limit` bytes. Blocking:
/// call it off the async workers.
pub fn read_results_file(path: &Path, limit: u64) -> Result<Vec<u8>, ResultsReadError> {
    use std::io::Read;
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let shown = path.display();
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK | nix::libc::O_CLOEXEC)
        .open(path);
    let file = match file {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(ResultsReadError::Missing),
        Err(e) if e.raw_os_error() == Some(nix::libc::ELOOP) => {
            return Err(ResultsReadError::Refused(format!(
                "the results file {shown} is a symbolic link, not a regular file: refused (the harness must write a regular file)"
            )))
        }
        Err(e) => return Err(ResultsReadError::Refused(format!("the results file {shown} could not be opened: {e}"))),
    };
    let meta = file
        .metadata()
        .map_err(|e| ResultsReadError::Refused(format!("the results file {shown} could not be examined: {e}")))?;
    let ft = meta.file_type();
    if !ft.is_file() {
        let what = if ft.is_fifo() {
            "a FIFO (named pipe)"
        } else if ft.is_dir() {
            "a folder"
        } else if ft.is_socket() {
            "a socket"
        } else if ft.is_char_device() || ft.is_block_device() {
            "a device"
        } else {
            "not a regular file"
        };
        return Err(ResultsReadError::Refused(format!(
            "the results file {shown} is {what}, not a regular file: refused (the harness must write a regular file)"
        )));
    }
    if meta.len() > limit {
        return Err(ResultsReadError::Refused(format!(
            "the results file {shown} is {} bytes, over the limit of {} MiB: refused",
            meta.len(),
            limit >> 20
        )));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| ResultsReadError::Refused(format!("the results file {shown} could not be read: {e}")))?;
    if bytes.len() as u64 > limit {
        return Err(ResultsReadError::Refused(format!(
            "the results file {shown} grew past the limit of {} MiB while it was read: refused",
            limit >> 20
        )));
    }
    Ok(bytes)
}

/// A harness command wrapped in a launch template (`srun --gres=gpu:1
/// --chdir {workdir} sh -c {command}`): `{workdir}` becomes the tree's
/// folder and `{command}` one shell word that, run by `sh -c`, writes
/// `marker` (proof that the launcher started it), sets the GADFLY_*
/// variables (a launcher may not pass the environment on), enters the
/// tree, runs the command (in a subshell: its `exit` or `exec` ends only
/// that) and, once it ended, whatever its status, writes
/// [`ended_marker`] and exits with the command's status. A command that
/// started and has no end marker was stopped by the launcher (a Slurm
/// job cancelled). Both are shell-quoted.
///
/// The end marker holds the command's exit status, written whole or not at
/// all (a `.part` file renamed). A launcher that stops the job signals every
/// process of it at about the same time: the command may die first and the
/// wrapping shell, still alive for an instant, then writes the end marker;
/// a status of death by HUP, INT, KILL or TERM in it is read as the
/// launcher's doing too ([`launcher_signal`]). (Seen on a real single-node
/// Slurm: the end marker written, empty, by a shell killed mid-write, and a
/// cancelled job judged as the candidate's failure, 1 run in 8.)
pub fn launch_command(template: &str, command: &str, workdir: &Path, env: &[(&str, String)], marker: &Path) -> String {
    let exports: Vec<String> = env.iter().map(|(k, v)| format!("{k}={}", shell_quote(v))).collect();
    let inner = format!(
        ": > {} && export {} && cd {} && {{ (\n{command}\n); s=$?; echo $s > {part} && mv -f {part} {}; exit $s; }}",
        shell_quote(&marker.display().to_string()),
        exports.join(" "),
        shell_quote(&workdir.display().to_string()),
        shell_quote(&ended_marker(marker).display().to_string()),
        part = shell_quote(&format!("{}.part", ended_marker(marker).display())),
    );
    fill(template, &[("{command}", &shell_quote(&inner)), ("{workdir}", &shell_quote(&workdir.display().to_string()))])
}

/// When a launched command's end marker says it died of a signal a
/// launcher stops jobs with (HUP, INT, KILL, TERM: exit statuses 129, 130,
/// 137, 143), that signal's name. A candidate that exits with one of these
/// on its own is retried as a cancelled job and, after the last attempt,
/// fails the evaluation all the same: never a pass.
/// An end marker that does not hold a status (an older wrapper's, or one
/// cut short) is read as a stop by the launcher too: only a whole status
/// makes an end.
pub fn launcher_signal(ended: &Path) -> Option<&'static str> {
    let status = std::fs::read_to_string(ended).ok()?;
    match status.trim() {
        "129" => Some("SIGHUP"),
        "130" => Some("SIGINT"),
        "137" => Some("SIGKILL"),
        "143" => Some("SIGTERM"),
        s if s.parse::<u8>().is_err() => Some("an unknown signal (the end marker holds no exit status)"),
        _ => None,
    }
}

/// The file a launched command writes once it ended: `marker` + `-ended`,
/// holding its exit status.
pub fn ended_marker(marker: &Path) -> std::path::PathBuf {
    let mut name = marker.file_name().unwrap_or_default().to_os_string();
    name.push("-ended");
    marker.with_file_name(name)
}

/// Replaces each placeholder in one pass, so a value that contains another
/// placeholder's name is left as it is.
fn fill(template: &str, values: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    'scan: while !rest.is_empty() {
        for (name, value) in values {
            if let Some(after) = rest.strip_prefix(name) {
                out.push_str(value);
                rest = after;
                continue 'scan;
            }
        }
        let c = rest.chars().next().expect("rest is not empty");
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

fn step(command: &str, o: &Outcome, timeout: Duration) -> Step {
    Step {
        command: command.to_string(),
        ok: o.exit.success(),
        exit: o.exit.describe("command", timeout),
        seconds: o.elapsed.as_secs_f64(),
        output_tail: o.output_tail.clone(),
    }
}

fn with_tail(message: String, o: &Outcome) -> String {
    let tail: Vec<&str> = o.output_tail.lines().rev().take(6).collect();
    if tail.is_empty() {
        message
    } else {
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        format!("{message}; last output: {}", tail.join(" | "))
    }
}

/// The host's folders a sandboxed build or harness sees, read-only: the
/// system's programs, libraries and settings, nothing else of the host (no
/// home folder, no workspace, no data dir, no other campaign). A spec adds
/// its own with `[harness] readable`.
pub const SYSTEM_FOLDERS: &[&str] = &["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt"];

/// The namespaces every sandbox unshares: its own PID namespace (every
/// process the candidate starts, `setsid` and double forks included, dies
/// with the sandbox, and nothing outside it can be seen or signalled), its
/// own user namespace (no privilege over the host, even for a daemon run as
/// root), no network, no IPC with the host, its own host name and session;
/// and no capability at all, even inside its own namespaces: a daemon run as
/// root otherwise hands the sandbox every capability of its user namespace,
/// and a candidate with CAP_SYS_PTRACE reads the grader's memory
/// (`/proc/PID/mem`) and environment however the harness protects them
/// (non-dumpable processes, a scrubbed environment).
const UNSHARE: &[&str] = &[
    "--unshare-user",
    "--unshare-pid",
    "--unshare-net",
    "--unshare-ipc",
    "--unshare-uts",
    "--new-session",
    "--cap-drop",
    "ALL",
];

/// Whether bubblewrap runs here with every namespace [`bwrap_command`]
/// asks for (probed once).
pub fn bwrap_works() -> bool {
    static WORKS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *WORKS.get_or_init(|| bwrap_problem().is_none())
}

/// Why bubblewrap does not work here, or None when it does (probed once).
pub fn bwrap_problem() -> Option<String> {
    static PROBLEM: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    PROBLEM
        .get_or_init(|| {
            let mut cmd = std::process::Command::new("bwrap");
            cmd.args(["--die-with-parent"]).args(UNSHARE);
            for f in SYSTEM_FOLDERS {
                cmd.args(["--ro-bind-try", f, f]);
            }
            cmd.args(["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--", "true"]);
            match cmd.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::piped()).output() {
                Err(e) => Some(format!("bubblewrap (bwrap) cannot be started: {e}")),
                Ok(o) if o.status.success() => None,
                Ok(o) => Some(format!(
                    "bubblewrap (bwrap) fails here with its own PID and user namespaces: {}",
                    String::from_utf8_lossy(&o.stderr).trim()
                )),
            }
        })
        .clone()
}

/// What a step may write in a sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Writable {
    /// The whole evaluation folder (the build writes its outputs in the tree).
    EvaluationFolder,
    /// Only the results folder: the tree the harness runs is read-only.
    ResultsOnly,
}

/// `command` run by `sh` in a bubblewrap sandbox: its own PID, user,
/// network, IPC and UTS namespaces ([`UNSHARE`]); the host's
/// [`SYSTEM_FOLDERS`] and `readable` read-only and nothing else of the host
/// (the daemon's data dir hidden behind an empty folder should it lie in
/// one); a fresh `/tmp` that is also `HOME`; the evaluation folder
/// `eval_dir` at [`SANDBOX_EVAL_DIR`] (its host path, under the data dir,
/// never shown), writable as `writable` says (its `out/` folder, where the
/// results go, always); `cwd` (a folder of `eval_dir`) as the working
/// folder; the minimal devices plus the GPUs' (`/dev/nvidia*`, `/dev/dri`,
/// `/dev/kfd`); `/sys` read-only (GPU drivers read it).
/// Where the evaluation folder is seen inside a sandbox: the host's path
/// to it (under the daemon's data dir) is never shown to the candidate.
pub const SANDBOX_EVAL_DIR: &str = "/gadfly";

/// A path of the evaluation folder `eval_dir` as a sandboxed step sees it.
pub fn in_sandbox(eval_dir: &Path, path: &Path) -> std::path::PathBuf {
    match path.strip_prefix(eval_dir) {
        Ok(rel) => Path::new(SANDBOX_EVAL_DIR).join(rel),
        Err(_) => path.to_path_buf(),
    }
}

pub fn bwrap_command(command: &str, eval_dir: &Path, cwd: &Path, writable: Writable, readable: &[String]) -> String {
    let mut args: Vec<String> = vec!["bwrap".into(), "--die-with-parent".into()];
    args.extend(UNSHARE.iter().map(|s| s.to_string()));
    for f in SYSTEM_FOLDERS.iter().map(|s| s.to_string()).chain(readable.iter().cloned()) {
        args.extend(["--ro-bind-try".to_string(), f.clone(), f]);
    }
    args.extend(
        ["--ro-bind-try", "/sys", "/sys", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"].map(String::from),
    );
    args.extend(["--setenv", "HOME", "/tmp", "--setenv", "TMPDIR", "/tmp"].map(String::from));
    if let Ok(entries) = std::fs::read_dir("/dev") {
        let mut gpus: Vec<String> = entries
            .flatten()
            .map(|e| e.file_name().to_string_lossy().to_string())
            .filter(|n| n.starts_with("nvidia") || n == "dri" || n == "kfd")
            .map(|n| format!("/dev/{n}"))
            .collect();
        gpus.sort();
        for g in gpus {
            args.extend(["--dev-bind-try".to_string(), g.clone(), g]);
        }
    }
    // The daemon's data dir, should it lie in a folder shown read-only.
    let scratch = eval_dir.parent();
    if let Some(data_dir) = scratch.filter(|s| s.file_name().is_some_and(|n| n == "evaluations")).and_then(Path::parent)
    {
        let shown = SYSTEM_FOLDERS.iter().copied().chain(readable.iter().map(String::as_str));
        if shown.clone().any(|f| data_dir.starts_with(f)) {
            args.extend(["--tmpfs".to_string(), data_dir.display().to_string()]);
        }
    }
    let (e, inside) = (eval_dir.display().to_string(), SANDBOX_EVAL_DIR.to_string());
    match writable {
        Writable::EvaluationFolder => args.extend(["--bind".to_string(), e, inside]),
        Writable::ResultsOnly => {
            args.extend(["--ro-bind".to_string(), e, inside.clone()]);
            let r = eval_dir.join("out").display().to_string();
            args.extend(["--bind".to_string(), r, format!("{inside}/out")]);
        }
    }
    let cwd = in_sandbox(eval_dir, cwd);
    args.extend(["--chdir".to_string(), cwd.display().to_string(), "--".into(), "sh".into(), "-c".into()]);
    args.push(command.to_string());
    args.iter().map(|a| shell_quote(a)).collect::<Vec<_>>().join(" ")
}

pub fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launch_templates_quote_and_fill_once() {
        let env = vec![("GADFLY_SEED", "1".to_string())];
        let cmd = launch_command(
            "srun --chdir {workdir} sh -c {command}",
            "sh harness/run.sh '/r/x y'",
            Path::new("/s/it's/tree"),
            &env,
            Path::new("/s/m"),
        );
        assert!(cmd.starts_with("srun --chdir '/s/it'\\''s/tree' sh -c '"), "{cmd}");
        // Run through sh -c, the command word is the inner script verbatim.
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("printf %s {}", &cmd[cmd.find("sh -c ").unwrap() + 6..]))
            .output()
            .unwrap();
        let inner = String::from_utf8(out.stdout).unwrap();
        assert_eq!(
            inner,
            ": > '/s/m' && export GADFLY_SEED='1' && cd '/s/it'\\''s/tree' && { (\nsh harness/run.sh '/r/x y'\n); s=$?; echo $s > '/s/m-ended.part' && mv -f '/s/m-ended.part' '/s/m-ended'; exit $s; }"
        );
        assert_eq!(fill("{a}{b}", &[("{a}", "{b}"), ("{b}", "x")]), "{b}x");
    }

    /// A cancelled job: the launcher signals the wrapping shell and the
    /// command together. When the command dies first, the shell still
    /// writes the end marker, with the status that says the command died of
    /// the launcher's signal; a command that fails on its own says so.
    #[test]
    fn a_launched_command_that_dies_of_a_signal_is_told_from_one_that_fails() {
        let dir = tempfile::tempdir().unwrap();
        let run = |name: &str, command: &str| {
            let marker = dir.path().join(name);
            let env = [("GADFLY_SEED", "1".to_string())];
            let cmd = launch_command("sh -c {command}", command, dir.path(), &env, &marker);
            let status = std::process::Command::new("sh").arg("-c").arg(&cmd).status().unwrap();
            (ended_marker(&marker).exists(), launcher_signal(&ended_marker(&marker)), status.code())
        };
        // The command dies of SIGTERM, its shell lives on (the race that let
        // a cancelled Slurm job pass as a candidate failure, not retried).
        assert_eq!(run("cancelled", "sh -c 'kill -TERM $$; sleep 5'"), (true, Some("SIGTERM"), Some(143)));
        assert_eq!(run("killed", "sh -c 'kill -KILL $$'"), (true, Some("SIGKILL"), Some(137)));
        assert_eq!(run("failed", "exit 3"), (true, None, Some(3)));
        assert_eq!(run("passed", "true"), (true, None, Some(0)));
        // The wrapping shell itself signalled: no end marker at all.
        assert_eq!(run("shell", "kill -TERM $$; sleep 5"), (false, None, Some(143)));
        // An end marker cut short holds no status: the launcher's doing.
        let cut = dir.path().join("cut-ended");
        std::fs::write(&cut, "").unwrap();
        assert!(launcher_signal(&cut).is_some_and(|s| s.contains("no exit status")));
    }

    #[test]
    fn results_file_read_refuses_fifos_links_and_huge_files() {
        let dir = tempfile::tempdir().unwrap();
        let ok = dir.path().join("ok.jsonl");
        std::fs::write(&ok, "{}\n").unwrap();
        assert_eq!(read_results_file(&ok, 1 << 20).unwrap(), b"{}\n");
        assert_eq!(read_results_file(&dir.path().join("none"), 1 << 20), Err(ResultsReadError::Missing));
        // A FIFO with no writer: refused at once, never waited on.
        let fifo = dir.path().join("fifo.jsonl");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        let started = Instant::now();
        let why = format!("{:?}", read_results_file(&fifo, 1 << 20));
        assert!(why.contains("FIFO"), "{why}");
        assert!(started.elapsed() < Duration::from_secs(2));
        let link = dir.path().join("link.jsonl");
        std::os::unix::fs::symlink(&ok, &link).unwrap();
        let why = format!("{:?}", read_results_file(&link, 1 << 20));
        assert!(why.contains("symbolic link"), "{why}");
        let big = dir.path().join("big.jsonl");
        std::fs::write(&big, vec![b' '; 2048]).unwrap();
        let why = format!("{:?}", read_results_file(&big, 1024));
        assert!(why.contains("over the limit"), "{why}");
        let why = format!("{:?}", read_results_file(dir.path(), 1024));
        assert!(why.contains("folder"), "{why}");
    }
}
