//! The red-team battery run against a campaign's harness (`gadfly
//! redteam`, the console's button, `[redteam] before_start`): each attack
//! of `crate::redteam`'s battery is applied to a throwaway copy of the
//! workspace and evaluated through the campaign's own pipeline (the same
//! snapshot, candidate allow-list, pristine protected files, sandbox,
//! build and run commands, constraints and predicate, here or on a
//! worker), under the campaign's evaluation lock, one at a time. Nothing
//! touches the real workspace or gadfly's snapshot store, and no verdict
//! is cached as the workspace's: the copies live in a private store under
//! DATA/redteam and are removed afterwards. What each attack came to is
//! recorded as events (`redteam.started`, `redteam.attack`,
//! `redteam.report`); the last report is what the API returns.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{LazyLock, Mutex};
use std::time::Duration;

use anyhow::{anyhow, Context as _};
use tokio_util::sync::CancellationToken;

use super::{Result, Supervisor};
use crate::campaign::CampaignSpec;
use crate::evaluation::Evaluation;
use crate::events::{kind, Event};
use crate::redteam::{self, AttackResult, Battery, CandidateFile, HostFacts, Outcome, Report, Status};
use crate::snapshot::PristineFile;

/// A battery in progress: its id and how far it got.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Progress {
    pub id: String,
    pub done: usize,
    pub total: usize,
}

/// Batteries in progress, by data dir and campaign (one at a time each).
static RUNNING: LazyLock<Mutex<HashMap<String, Progress>>> = LazyLock::new(Default::default);

/// What `GET /campaigns/{id}/redteam` answers: the battery in progress, if
/// any, and the latest report.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RedteamState {
    pub running: Option<Progress>,
    pub report: Option<Report>,
}

/// How long an attack's setup may take.
const SETUP_TIMEOUT: Duration = Duration::from_secs(300);

/// Removes a battery's entry from [`RUNNING`] when dropped (a task that
/// ends, panics or is cancelled).
struct Registered(String);

impl Drop for Registered {
    fn drop(&mut self) {
        RUNNING.lock().unwrap_or_else(|e| e.into_inner()).remove(&self.0);
    }
}

impl Supervisor {
    fn redteam_key(&self, campaign_id: &str) -> String {
        format!("{}\0{campaign_id}", self.inner.data_dir.display())
    }

    /// Takes the campaign's battery slot for a new battery; None when one
    /// runs already (its progress then).
    fn register_redteam(&self, campaign_id: &str) -> std::result::Result<(String, Registered), Progress> {
        let key = self.redteam_key(campaign_id);
        let mut running = RUNNING.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = running.get(&key) {
            return Err(p.clone());
        }
        let id = crate::config::random_hex(8);
        running.insert(key.clone(), Progress { id: id.clone(), done: 0, total: 0 });
        Ok((id, Registered(key)))
    }

    fn redteam_progress(&self, campaign_id: &str, done: usize, total: usize) {
        if let Some(p) = RUNNING.lock().unwrap_or_else(|e| e.into_inner()).get_mut(&self.redteam_key(campaign_id)) {
            p.done = done;
            p.total = total;
        }
    }

    /// Starts the battery against the campaign's harness in the
    /// background. Returns the battery's id, and false when one was running
    /// already (its id then).
    pub async fn start_redteam(&self, campaign_id: &str, why: &str) -> Result<(String, bool)> {
        self.campaign_with_workspace(campaign_id).await?;
        let (id, slot) = match self.register_redteam(campaign_id) {
            Ok(taken) => taken,
            Err(running) => return Ok((running.id, false)),
        };
        let (sup, campaign, why, battery_id) = (self.clone(), campaign_id.to_string(), why.to_string(), id.clone());
        self.spawn_task(format!("redteam {campaign_id}"), async move {
            let _slot = slot;
            let token = sup.shutdown_token().clone();
            let report = sup.run_redteam(&campaign, &battery_id, &why, &token).await;
            tracing::info!(campaign = %campaign, status = ?report.status, broken = report.broken, "red-team battery done");
        });
        Ok((id, true))
    }

    /// Runs the battery now and returns its report (a run start's
    /// `[redteam] before_start`). Refused while another battery runs for
    /// the campaign.
    pub async fn redteam_now(&self, campaign_id: &str, why: &str, cancel: &CancellationToken) -> Result<Report> {
        self.campaign_with_workspace(campaign_id).await?;
        let (id, _slot) = self.register_redteam(campaign_id).map_err(|p| {
            super::SupervisorError::Invalid(format!(
                "a red-team battery ({}) is running for campaign {campaign_id}; wait for its report",
                p.id
            ))
        })?;
        Ok(self.run_redteam(campaign_id, &id, why, cancel).await)
    }

    /// The battery in progress and the latest report.
    pub async fn redteam_state(&self, campaign_id: &str) -> Result<RedteamState> {
        self.campaign(campaign_id).await?;
        let running = RUNNING.lock().unwrap_or_else(|e| e.into_inner()).get(&self.redteam_key(campaign_id)).cloned();
        Ok(RedteamState { running, report: self.latest_redteam_report(campaign_id).await? })
    }

    /// The latest report recorded for the campaign (a stored one that does
    /// not decode counts as none, with a warning).
    pub async fn latest_redteam_report(&self, campaign_id: &str) -> anyhow::Result<Option<Report>> {
        let rows = self.inner.store.recent_events(campaign_id, kind::REDTEAM_REPORT, 1).await?;
        Ok(rows.into_iter().next().and_then(|row| match serde_json::from_value::<Report>(row.payload) {
            Ok(r) => Some(r),
            Err(e) => {
                tracing::warn!(event = row.id, error = %e, "a stored red-team report does not decode; ignored");
                None
            }
        }))
    }

    /// The harness key of the campaign as it is now (see
    /// [`redteam::harness_key`]).
    pub async fn redteam_harness_key(&self, campaign_id: &str, spec: &CampaignSpec) -> anyhow::Result<String> {
        let pristine = self.pristine(campaign_id).await?;
        let hashes: Vec<(String, String)> = pristine.iter().map(|f| (f.path.clone(), f.sha256.clone())).collect();
        Ok(redteam::harness_key(spec, &hashes))
    }

    /// Runs the battery and records its report, whatever happens: a
    /// failure of gadfly's machinery is a report with status `error`.
    async fn run_redteam(&self, campaign_id: &str, id: &str, why: &str, cancel: &CancellationToken) -> Report {
        let started_at = crate::time::now();
        let mut report = Report {
            id: id.to_string(),
            campaign: campaign_id.to_string(),
            campaign_name: String::new(),
            why: why.to_string(),
            started_at,
            finished_at: String::new(),
            battery: String::new(),
            harness: String::new(),
            languages: vec![],
            status: Status::Held,
            error: None,
            control: None,
            attacks: vec![],
            held: 0,
            broken: 0,
            not_applicable: 0,
            errors: 0,
            coverage: None,
            accept_low_coverage: false,
        };
        if let Err(e) = self.battery_into(&mut report, cancel).await {
            report.status = Status::Error;
            report.error = Some(format!("{e:#}"));
        }
        report.finish();
        report.finished_at = crate::time::now();
        if let Err(e) = self.record_event(campaign_id, None, None, Event::RedteamReport(Box::new(report.clone()))).await
        {
            tracing::warn!(campaign = %campaign_id, error = %e, "recording a red-team report");
        }
        report
    }

    async fn battery_into(&self, report: &mut Report, cancel: &CancellationToken) -> anyhow::Result<()> {
        let campaign_id = report.campaign.clone();
        let (row, spec) = self.campaign(&campaign_id).await.map_err(|e| anyhow!("{e}"))?;
        report.campaign_name = spec.name.clone();
        report.accept_low_coverage = spec.redteam.accept_low_coverage;
        let battery = redteam::battery_for(&spec).map_err(|e| anyhow!("the battery does not load: {e}"))?;
        let battery = &battery;
        report.battery = battery.version.clone();
        report.harness = self.redteam_harness_key(&campaign_id, &spec).await?;
        let protected = row.protected()?;
        let pristine = self.pristine(&campaign_id).await?;
        let started =
            Event::RedteamStarted { id: report.id.clone(), why: report.why.clone(), attacks: battery.attacks.len() };
        self.record_event(&campaign_id, None, None, started).await?;
        self.redteam_progress(&campaign_id, 0, battery.attacks.len());

        let root = self.inner.data_dir.join("redteam");
        std::fs::create_dir_all(&root).with_context(|| format!("creating {}", root.display()))?;
        let work = tempfile::Builder::new()
            .prefix(&format!("{campaign_id}-"))
            .tempdir_in(&root)
            .with_context(|| format!("creating a folder for the battery in {}", root.display()))?;
        let work_dir = work.path().to_path_buf();
        let store = work_dir.join("store.git");
        let base = work_dir.join("base");
        {
            let (store, base, ws, index) =
                (store.clone(), base.clone(), spec.workspace.clone(), work_dir.join("index-ws"));
            tokio::task::spawn_blocking(move || -> anyhow::Result<()> {
                let tree = crate::snapshot::tree_hash_with_index(&store, &ws, &index)?;
                std::fs::create_dir(&base)?;
                crate::snapshot::export(&store, &tree, &base)
            })
            .await?
            .context("copying the workspace for the battery")?;
        }
        let (files, host) = {
            let (base, spec2) = (base.clone(), spec.clone());
            let battery2 = battery.clone();
            tokio::task::spawn_blocking(move || (candidate_files(&base, &spec2), host_facts(&battery2))).await?
        };
        report.languages = redteam::languages(&files);

        let run = Run {
            sup: self,
            spec: &spec,
            campaign_id: &campaign_id,
            protected: &protected,
            pristine: &pristine,
            store: &store,
            work: &work_dir,
        };
        let control =
            run.evaluate(&base, "control").await.context("evaluating the unchanged candidate (the control)")?;
        report.control = Some(redteam::evidence(&control));
        if let Some(problem) = redteam::control_problem(&control) {
            report.status = Status::Error;
            report.error = Some(problem);
            return Ok(());
        }
        let ctx = redteam::Context { spec: &spec, files: &files, host: &host };
        for (n, attack) in battery.attacks.iter().enumerate() {
            if cancel.is_cancelled() {
                anyhow::bail!("stopped after {n} attacks: the daemon is shutting down or the run was stopped");
            }
            let result = match redteam::plan(attack, &ctx) {
                Err(why) => AttackResult::new(attack, String::new(), Outcome::NotApplicable { why }, None),
                Ok(plan) => run.attack(n, attack, plan, &base).await,
            };
            tracing::info!(campaign = %campaign_id, attack = %result.name, result = result.outcome.label(), "red-team attack");
            let event = Event::RedteamAttack { id: report.id.clone(), result: Box::new(result.clone()) };
            self.record_event(&campaign_id, None, None, event).await?;
            report.attacks.push(result);
            self.redteam_progress(&campaign_id, n + 1, battery.attacks.len());
        }
        Ok(())
    }
}

/// One battery's fixed inputs.
struct Run<'a> {
    sup: &'a Supervisor,
    spec: &'a CampaignSpec,
    campaign_id: &'a str,
    protected: &'a BTreeMap<String, String>,
    pristine: &'a [PristineFile],
    /// The battery's private snapshot store (never the campaign's).
    store: &'a Path,
    work: &'a Path,
}

impl Run<'_> {
    /// Evaluates the files in `dir` as the campaign evaluates its
    /// workspace: snapshot (into the battery's store), cut to the
    /// candidate, then the campaign's pipeline, here or on a worker, under
    /// the campaign's evaluation lock. Not stored as an evaluation.
    async fn evaluate(&self, dir: &Path, label: &str) -> anyhow::Result<Evaluation> {
        let (store, dir, index, candidate) = (
            self.store.to_path_buf(),
            dir.to_path_buf(),
            self.work.join(format!("index-{label}")),
            self.spec.harness.candidate.clone(),
        );
        let tree = tokio::task::spawn_blocking(move || -> anyhow::Result<String> {
            let tree = crate::snapshot::tree_hash_with_index(&store, &dir, &index)?;
            if candidate.is_empty() {
                Ok(tree)
            } else {
                crate::snapshot::candidate_tree(&store, &tree, &candidate)
            }
        })
        .await??;
        let inputs = crate::harness::Inputs {
            spec: self.spec,
            campaign_id: self.campaign_id,
            tree: &tree,
            protected: self.protected,
            pristine: self.pristine,
            seed: crate::harness::secret_seed(&self.sup.inner.endpoint.1, self.campaign_id, &format!("redteam {tree}")),
            store: self.store,
        };
        let lock = self.sup.eval_lock(self.campaign_id);
        let _held = lock.lock().await;
        crate::jobs::evaluate(&self.sup.inner.store, &inputs, &self.sup.inner.scratch).await
    }

    /// Applies one attack to a fresh copy of `base`, evaluates it and
    /// judges what came of it.
    async fn attack(&self, n: usize, attack: &redteam::Attack, plan: redteam::Plan, base: &Path) -> AttackResult {
        let label = format!("attack-{n:02}");
        let dir = self.work.join(&label);
        let applied = plan.applied.clone();
        let error = |why: String| AttackResult::new(attack, applied.clone(), Outcome::Error { why }, None);
        let (b, d, writes) = (base.to_path_buf(), dir.clone(), plan.writes.clone());
        let copied = tokio::task::spawn_blocking(move || -> anyhow::Result<()> {
            copy_tree(&b, &d)?;
            for w in &writes {
                write_file(&d, w)?;
            }
            Ok(())
        })
        .await;
        match copied {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return error(format!("applying the attack to a copy of the workspace failed: {e:#}")),
            Err(e) => return error(format!("applying the attack failed: {e}")),
        }
        if let Some(setup) = &plan.setup {
            if let Err(why) = self.setup(&label, &dir, setup).await {
                return error(why);
            }
        }
        let eval = match self.evaluate(&dir, &label).await {
            Ok(e) => e,
            Err(e) => return error(format!("gadfly could not evaluate the attack: {e:#}")),
        };
        let kept_out = redteam::outside_candidate(self.spec, &plan.touched);
        let outcome = redteam::judge(&eval, &kept_out, &plan.touched);
        let mut result = AttackResult::new(attack, applied, outcome, Some(redteam::evidence(&eval)));
        result.expected_reason = redteam::expected_reason(&attack.manifest, &result.outcome, Some(&eval));
        result
    }

    /// Runs an attack's setup command in its copy.
    async fn setup(&self, label: &str, dir: &Path, setup: &redteam::Setup) -> std::result::Result<(), String> {
        let src = self.work.join(format!("{label}.src"));
        let tmp = self.work.join(format!("{label}.tmp"));
        std::fs::write(&src, &setup.source).map_err(|e| format!("writing the attack's source: {e}"))?;
        std::fs::create_dir_all(&tmp).map_err(|e| format!("creating the attack's scratch folder: {e}"))?;
        let env = vec![
            ("RT_TARGET", setup.target.clone()),
            ("RT_SOURCE", src.display().to_string()),
            ("RT_BINARY", setup.binary.clone()),
            ("RT_TMP", tmp.display().to_string()),
        ];
        let outcome = crate::process::run_shell(&setup.command, dir, &env, SETUP_TIMEOUT).await;
        if outcome.exit.success() {
            Ok(())
        } else {
            Err(format!(
                "the attack's setup failed ({}): {}",
                outcome.exit.describe("setup", SETUP_TIMEOUT),
                outcome.output_tail.trim()
            ))
        }
    }
}

/// The candidate's source files in an exported tree: those matching
/// `[harness] candidate` (without it, every file the protected globs do
/// not match), in a language the battery knows, at most 1 MiB each.
fn candidate_files(root: &Path, spec: &CampaignSpec) -> Vec<CandidateFile> {
    let set = |globs: &[String]| {
        let mut b = globset::GlobSetBuilder::new();
        for g in globs {
            if let Ok(g) = globset::GlobBuilder::new(g).literal_separator(false).build() {
                b.add(g);
            }
        }
        b.build().ok()
    };
    let candidate = set(&spec.harness.candidate);
    let protected = set(&spec.harness.protected);
    let mut out = Vec::new();
    for entry in walkdir::WalkDir::new(root).sort_by_file_name().into_iter().flatten() {
        if !entry.file_type().is_file() {
            continue;
        }
        let Ok(rel) = entry.path().strip_prefix(root) else { continue };
        let rel = rel.to_string_lossy().replace('\\', "/");
        let wanted = if spec.harness.candidate.is_empty() {
            !protected.as_ref().is_some_and(|p| p.is_match(&rel))
        } else {
            candidate.as_ref().is_some_and(|c| c.is_match(&rel))
        };
        if !wanted || redteam::language_of(&rel).is_none() {
            continue;
        }
        if entry.metadata().map(|m| m.len() > (1 << 20)).unwrap_or(true) {
            continue;
        }
        if let Ok(bytes) = std::fs::read(entry.path()) {
            out.push(CandidateFile { path: rel, text: String::from_utf8_lossy(&bytes).into_owned() });
        }
    }
    out
}

/// The libraries and programs the battery asks about, as this host has
/// them.
fn host_facts(battery: &Battery) -> HostFacts {
    let mut wanted_libs = BTreeSet::new();
    let mut wanted_programs: BTreeSet<String> = ["cc", "make"].map(String::from).into();
    for a in &battery.attacks {
        wanted_libs.extend(a.manifest.requires.host_library_any.iter().cloned());
        wanted_programs.extend(a.manifest.requires.host_program.iter().cloned());
    }
    let mut libraries = BTreeSet::new();
    for ldconfig in ["ldconfig", "/sbin/ldconfig", "/usr/sbin/ldconfig"] {
        if let Ok(out) = std::process::Command::new(ldconfig).arg("-p").output() {
            if out.status.success() {
                for line in String::from_utf8_lossy(&out.stdout).lines().skip(1) {
                    if let Some(name) = line.split_whitespace().next() {
                        libraries.insert(name.to_string());
                    }
                }
                break;
            }
        }
    }
    for dir in [
        "/lib",
        "/usr/lib",
        "/lib64",
        "/usr/lib64",
        "/usr/local/lib",
        "/lib/x86_64-linux-gnu",
        "/usr/lib/x86_64-linux-gnu",
        "/lib/aarch64-linux-gnu",
        "/usr/lib/aarch64-linux-gnu",
    ] {
        for lib in &wanted_libs {
            if Path::new(dir).join(lib).exists() {
                libraries.insert(lib.clone());
            }
        }
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    let programs = wanted_programs
        .into_iter()
        .filter(|p| std::env::split_paths(&path).any(|d| is_executable(&d.join(p))))
        .collect();
    HostFacts { libraries, programs }
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Copies the exported tree `from` to `to` (files with their modes, links
/// as links).
fn copy_tree(from: &Path, to: &Path) -> anyhow::Result<()> {
    for entry in walkdir::WalkDir::new(from) {
        let entry = entry?;
        let rel = entry.path().strip_prefix(from)?;
        let dest = to.join(rel);
        let ft = entry.file_type();
        if ft.is_dir() {
            std::fs::create_dir_all(&dest)?;
        } else if ft.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(entry.path())?, &dest)?;
        } else {
            std::fs::copy(entry.path(), &dest).with_context(|| format!("copying {}", rel.display()))?;
        }
    }
    Ok(())
}

/// Writes one of an attack's files into its copy `root` (an existing file
/// or link in its place is replaced; its folders are made).
fn write_file(root: &Path, w: &redteam::FileWrite) -> anyhow::Result<()> {
    let path: PathBuf = root.join(&w.path);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    if std::fs::symlink_metadata(&path).is_ok() {
        std::fs::remove_file(&path)?;
    }
    std::fs::write(&path, &w.content).with_context(|| format!("writing {}", w.path))?;
    if let Some(mode) = w.mode {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))?;
    }
    Ok(())
}

/// A run of a campaign with `[redteam] before_start`: the battery first
/// (or its latest report, when it is of the same battery on the same
/// harness and every attack held), then the agent, only if every attack
/// held; otherwise the run ends `refused`, naming the broken attacks.
pub(super) fn launch_after_battery(
    sup: &Supervisor,
    campaign_id: &str,
    spec: CampaignSpec,
    agent: crate::agent::AgentSpec,
    kind: crate::agent::AgentKind,
    run_id: i64,
    token: CancellationToken,
) {
    let (sup2, campaign) = (sup.clone(), campaign_id.to_string());
    sup.spawn_task(format!("run {campaign_id} red team"), async move {
        match sup2.battery_before_run(&campaign, &spec, &token).await {
            Ok(()) => super::runs::launch(&sup2, &campaign, spec, agent, kind, run_id, None, token),
            Err(why) => {
                tracing::warn!(campaign = %campaign, run = run_id, why = %why, "run refused by the red-team battery");
                let _ = sup2.store().end_run(run_id, "ended", "refused").await;
                let ended = Event::RunEnded { run_id, outcome: "refused".into(), detail: why };
                let _ = sup2.record_event(&campaign, None, None, ended).await;
                sup2.unregister_run(&campaign);
                sup2.release_lease(&campaign).await;
            }
        }
    });
}

impl Supervisor {
    /// Ok when the harness held the battery (now, or in a current report);
    /// else why the agent must not start.
    async fn battery_before_run(
        &self,
        campaign_id: &str,
        spec: &CampaignSpec,
        token: &CancellationToken,
    ) -> std::result::Result<(), String> {
        let battery = redteam::battery_for(spec).map_err(|e| format!("the red-team battery does not load: {e}"))?;
        let key = self.redteam_harness_key(campaign_id, spec).await.map_err(|e| format!("{e:#}"))?;
        if let Ok(Some(r)) = self.latest_redteam_report(campaign_id).await {
            if r.status == Status::Held && r.harness == key && r.battery == battery.version {
                tracing::info!(campaign = %campaign_id, report = %r.id, "the harness held this battery already; the agent starts");
                return Ok(());
            }
        }
        let report = self.redteam_now(campaign_id, "run start", token).await.map_err(|e| format!("{e}"))?;
        let fix = format!(
            "`gadfly redteam {campaign_id}` shows the report; fix the harness, or start with `gadfly run --force` \
             ([redteam] before_start)"
        );
        match report.status {
            Status::Held => Ok(()),
            Status::Broken => {
                let names: Vec<&str> = report
                    .attacks
                    .iter()
                    .filter(|a| matches!(a.outcome, Outcome::Broken { .. }))
                    .map(|a| a.name.as_str())
                    .collect();
                Err(format!(
                    "the red-team battery broke the harness: {} attack{} would have been allowed to stop ({}); {fix}",
                    names.len(),
                    if names.len() == 1 { "" } else { "s" },
                    names.join(", ")
                ))
            }
            Status::Error => Err(format!(
                "the red-team battery could not judge the harness: {}; {fix}",
                report.error.as_deref().unwrap_or("an error")
            )),
            Status::LowCoverage => Err(format!(
                "the red-team battery could try too little on this harness to vouch for it: {}; add attacks for its \
                 language or accept it ([redteam] accept_low_coverage = true); {fix}",
                report.coverage.as_ref().map(|c| c.describe()).unwrap_or_default()
            )),
        }
    }
}
