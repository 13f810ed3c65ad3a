//! `gadfly replay`: gadfly's judgment on a recorded session, offline (the
//! pure core is `crate::replay`; the importers are `crate::agent::timeline`).
//! `gadfly replay TIMELINE --spec SPEC` replays a timeline (or, with
//! `--from claude-code|codex`, a session file imported on the fly);
//! `gadfly replay import` writes a session file as a timeline;
//! `gadfly replay export ID` writes a live campaign's timeline, from the
//! daemon.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Subcommand, ValueEnum};

use crate::campaign::Mode;
use crate::replay::{self, render, timeline};

#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct ReplayArgs {
    #[command(subcommand)]
    pub command: Option<ReplayCommand>,
    /// The timeline to replay (JSON lines, docs/REPLAY.md), or with --from a session file or an
    /// experiment log.
    #[arg(required = true)]
    pub timeline: Option<PathBuf>,
    /// The campaign spec to judge with: its scenarios, predicate, mode, [moments] and
    /// [replay] sections.
    #[arg(long, required = true)]
    pub spec: Option<PathBuf>,
    /// What TIMELINE is: a timeline (the default), or a session file or an experiment log to
    /// import first.
    #[arg(long, value_enum, default_value = "timeline")]
    pub from: Source,
    /// Print the report as JSON (every step, then the summary).
    #[arg(long)]
    pub json: bool,
    /// Judge in this mode instead of the spec's.
    #[arg(long, value_enum)]
    pub mode: Option<ModeArg>,
    /// The bank's sampling seed: 0 (the default) draws as the daemon drew for the recorded
    /// campaign; another value, another draw. The same seed gives the same replay.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Also write the replay as a self-contained HTML page.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// A question bank folder (default: the bank built into this binary).
    #[arg(long, env = "GADFLY_BANK_DIR")]
    pub bank: Option<PathBuf>,
    /// With --from experiments: how to read the log.
    #[command(flatten)]
    pub log: LogArgs,
}

#[derive(Subcommand, Debug)]
pub enum ReplayCommand {
    /// Write a recorded agent session as a timeline, on stdout.
    Import {
        #[arg(value_enum)]
        agent: SessionKind,
        /// A Claude Code session transcript, a Codex rollout file (or `codex exec --json`
        /// output), or an experiment log (a TSV or CSV table, one row per experiment).
        file: PathBuf,
        /// A campaign spec whose [replay] evaluation pattern finds the harness's results in
        /// the tool results.
        #[arg(long)]
        spec: Option<PathBuf>,
        #[command(flatten)]
        log: LogArgs,
    },
    /// Write a live campaign's recorded events as a timeline.
    ///
    /// Write a live campaign's recorded events as a timeline, on stdout (from the daemon at
    /// $GADFLY_URL).
    Export { id: String },
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    Timeline,
    ClaudeCode,
    Codex,
    /// An experiment log, read as `gadfly replay import experiments` reads it.
    Experiments,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionKind {
    ClaudeCode,
    Codex,
    /// An optimization loop's experiment log (autoresearch's `results.tsv` and the like).
    Experiments,
}

/// How to read an experiment log (`gadfly replay import experiments`).
#[derive(Args, Debug, Default)]
pub struct LogArgs {
    /// The objective's column (default `val_bpb`, autoresearch's).
    #[arg(long)]
    pub metric: Option<String>,
    /// Higher values of the objective are better (throughput); by default lower are (loss,
    /// latency).
    #[arg(long)]
    pub maximize: bool,
    /// Only the rows whose COLUMN holds VALUE (repeatable), e.g. `--where kernel_type=matmul`.
    #[arg(long = "where", value_name = "COLUMN=VALUE", value_parser = crate::replay::experiments::column_value)]
    pub only: Vec<(String, String)>,
    /// Seconds between two experiments in the timeline (the log has no clock).
    #[arg(long, default_value_t = 300.0)]
    pub every: f64,
}

impl LogArgs {
    fn said(&self) -> bool {
        self.metric.is_some() || self.maximize || !self.only.is_empty() || self.every != 300.0
    }
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModeArg {
    Autonomous,
    Human,
    Audit,
}

impl ModeArg {
    fn mode(self) -> Mode {
        match self {
            ModeArg::Autonomous => Mode::Autonomous,
            ModeArg::Human => Mode::Human,
            ModeArg::Audit => Mode::Audit,
        }
    }
}

pub async fn run(args: ReplayArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        Some(ReplayCommand::Import { agent: SessionKind::Experiments, file, spec, log }) => {
            if spec.is_some() {
                anyhow::bail!(
                    "an experiment log needs no --spec: its rows are the evaluations (--metric says which column)"
                );
            }
            let imported = import_log(&file, &log)?;
            for p in &imported.problems {
                eprintln!("warning: {}: {p}", file.display());
            }
            print!("{}", timeline::write(&imported.timeline));
            Ok(ExitCode::SUCCESS)
        }
        Some(ReplayCommand::Import { agent, file, spec, log }) => {
            if log.said() {
                anyhow::bail!("--metric, --maximize, --where and --every read an experiment log: `gadfly replay import experiments FILE`");
            }
            let pattern = match &spec {
                Some(p) => pattern_of(&crate::campaign::load_detached(p)?)?,
                None => None,
            };
            let imported = import(agent, &file, pattern.as_ref())?;
            for p in &imported.problems {
                eprintln!("warning: {}: {p}", file.display());
            }
            if pattern.is_none() {
                eprintln!("note: no --spec with a [replay] evaluation pattern: the timeline has no evaluations");
            }
            print!("{}", timeline::write(&imported.timeline));
            Ok(ExitCode::SUCCESS)
        }
        Some(ReplayCommand::Export { id }) => {
            let client = super::client(Duration::from_secs(120))?;
            let mut events = vec![];
            let mut after = 0i64;
            loop {
                let page = client.get(&format!("/campaigns/{id}/log?after={after}&limit=10000")).await?;
                let page = page.as_array().cloned().unwrap_or_default();
                let Some(last) = page.last().and_then(|e| e["id"].as_i64()) else { break };
                after = last;
                let n = page.len();
                events.extend(page);
                if n < 10_000 {
                    break;
                }
            }
            let evaluations = client.get(&format!("/campaigns/{id}/evaluations")).await?;
            let evaluations = evaluations.as_array().cloned().unwrap_or_default();
            let t = replay::export::timeline(&id, &events, &evaluations)?;
            print!("{}", timeline::write(&t));
            Ok(ExitCode::SUCCESS)
        }
        None => {
            let (Some(path), Some(spec_path)) = (args.timeline, args.spec) else {
                anyhow::bail!("gadfly replay TIMELINE --spec CAMPAIGN.toml");
            };
            let spec = crate::campaign::load_detached(&spec_path)?;
            if args.from != Source::Experiments && args.log.said() {
                anyhow::bail!("--metric, --maximize, --where and --every read an experiment log: --from experiments");
            }
            let t = match args.from {
                Source::Experiments => {
                    let imported = import_log(&path, &args.log)?;
                    for p in &imported.problems {
                        eprintln!("warning: {}: {p}", path.display());
                    }
                    imported.timeline
                }
                Source::Timeline => {
                    let text = std::fs::read_to_string(&path)
                        .with_context(|| format!("reading the timeline {}", path.display()))?;
                    timeline::parse(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?
                }
                Source::ClaudeCode | Source::Codex => {
                    let kind = if args.from == Source::Codex { SessionKind::Codex } else { SessionKind::ClaudeCode };
                    let imported = import(kind, &path, pattern_of(&spec)?.as_ref())?;
                    for p in &imported.problems {
                        eprintln!("warning: {}: {p}", path.display());
                    }
                    imported.timeline
                }
            };
            let bank = match &args.bank {
                Some(dir) => crate::bank::load::load_dir(dir)?,
                None => crate::bank::embedded().clone(),
            };
            let opts = replay::Options { mode: args.mode.map(ModeArg::mode), seed: args.seed };
            let report = replay::run(&t, &spec, &bank.entries, &opts)?;
            if let Some(html) = &args.html {
                std::fs::write(html, render::html(&report)).with_context(|| format!("writing {}", html.display()))?;
                eprintln!("wrote {}", html.display());
            }
            if args.json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                print!("{}", render::text(&report));
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// The spec's `[replay] evaluation` pattern, compiled (it was checked when
/// the spec was read).
fn pattern_of(spec: &crate::campaign::CampaignSpec) -> anyhow::Result<Option<regex::Regex>> {
    spec.replay
        .evaluation
        .as_deref()
        .map(|p| crate::campaign::check_replay_pattern(p).map_err(|e| anyhow::anyhow!("[replay] evaluation: {e}")))
        .transpose()
}

fn import(
    kind: SessionKind,
    file: &Path,
    pattern: Option<&regex::Regex>,
) -> anyhow::Result<crate::agent::timeline::Imported> {
    let text = std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let imported = match kind {
        SessionKind::ClaudeCode => crate::agent::timeline::from_claude_code(&text, pattern),
        SessionKind::Codex => crate::agent::timeline::from_codex(&text, pattern),
        SessionKind::Experiments => return import_log(file, &LogArgs::default()),
    };
    let mut imported = imported.with_context(|| format!("importing {}", file.display()))?;
    imported.timeline.header.extra.insert(
        "file".into(),
        serde_json::Value::String(file.file_name().unwrap_or_default().to_string_lossy().into()),
    );
    Ok(imported)
}

/// An experiment log read as a timeline, its file named in the header.
fn import_log(file: &Path, log: &LogArgs) -> anyhow::Result<timeline::Imported> {
    if !(log.every.is_finite() && log.every > 0.0) {
        anyhow::bail!("--every must be a positive number of seconds, got {}", log.every);
    }
    let text = std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let layout = crate::replay::experiments::Layout {
        metric: log.metric.clone(),
        maximize: log.maximize,
        only: log.only.clone(),
        every: log.every,
    };
    let mut imported =
        crate::replay::experiments::import(&text, &layout).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
    imported.timeline.header.extra.insert(
        "file".into(),
        serde_json::Value::String(file.file_name().unwrap_or_default().to_string_lossy().into()),
    );
    Ok(imported)
}
