//! The command line: clap definitions and the client-side commands, each a
//! call of the daemon's API plus rendering.
//!
//! This file holds the clap tree and the dispatch; the larger commands
//! have a file each: `campaign` (and the verdict table), `eval` (and its
//! progress line), `attach` (and `detach`), `runs` (`gadfly run`), `beam`,
//! `moments`, `doctor` (and the daemon's key), `bank`, `replay` (`gadfly
//! replay`, its import and export).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use serde_json::json;

use crate::client::Client;
use crate::config::{self, ClientConfig, DaemonConfig};

mod attach;
mod bank;
mod beam;
mod campaign;
mod doctor;
mod eval;
mod moments;
mod redteam;
mod replay;
mod runs;

use beam::beam;
use campaign::{campaign, workspace_of};
use doctor::{daemon_public_key, doctor};
use moments::moments;
pub use moments::MomentsCommand;
use runs::follow_run;

pub use campaign::render_evaluation;

#[derive(Parser, Debug)]
#[command(
    name = "gadfly",
    version,
    about = "Supervises coding agents through optimization campaigns: no stop until every scenario holds"
)]
pub struct Cli {
    /// The daemon's public key for `gadfly hook` (see its --daemon-key), given before the
    /// subcommand as `gadfly attach` writes it: `gadfly --daemon-key KEY hook claude-code stop ...`.
    #[arg(long, value_name = "BASE64")]
    pub daemon_key: Option<String>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run the daemon (HTTP API, console, evaluations).
    Serve(ServeArgs),
    /// Create, list and show campaigns.
    #[command(subcommand)]
    Campaign(CampaignCommand),
    /// Evaluate a campaign's workspace now and print the verdict.
    ///
    /// Exit status: 0 when the predicate holds, 1 when it fails (a failed build or run fails it too),
    /// 2 on an error (the daemon unreachable, a refused token, an unknown campaign).
    Eval {
        /// The campaign (default: $GADFLY_CAMPAIGN, which gadfly sets for the agents it starts,
        /// else `campaign` in the client config file, ~/.config/gadfly/config.toml).
        #[arg(env = "GADFLY_CAMPAIGN")]
        id: Option<String>,
        #[arg(long)]
        json: bool,
        /// Run the harness even if this tree was evaluated before.
        #[arg(long)]
        force: bool,
    },
    /// Measure the initial kernel against itself: the harness's bias and noise per scenario.
    ///
    /// Calibrate the campaign's harness before it judges anyone: the initial kernel against itself,
    /// RUNS evaluations with fresh seeds; prints each scenario's bias and noise. Exit 0 when the
    /// harness is fair, 1 when a scenario's bias is beyond its noise or a run failed. Later
    /// evaluations are judged with the noise found. Run it before the agent changes the kernel.
    Calibrate {
        id: String,
        /// Evaluations of the initial kernel (2 to 20).
        #[arg(long, default_value_t = crate::calibration::DEFAULT_RUNS)]
        runs: u32,
        #[arg(long)]
        json: bool,
    },
    /// The hook command an agent's configuration runs (stdin: the hook's JSON).
    Hook {
        /// The agent whose hook protocol is spoken (claude-code).
        agent: HookAgent,
        /// The hook event in kebab case (stop, post-tool-use, ...).
        event: String,
        /// What a stop does when the daemon cannot be reached: `closed`
        /// blocks it ("supervisor unavailable") up to --unavailable-blocks
        /// times in a row, then lets it through; `open` lets it through.
        /// Either way the call is spooled and replayed at the next contact.
        #[arg(long, value_enum, default_value = "closed")]
        fail: FailMode,
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=1000))]
        unavailable_blocks: u32,
        /// The daemon's public key (base64; `gadfly doctor` prints it): only
        /// answers the daemon signed for this call are taken; any other
        /// answer (a server an agent put on the daemon's port, a replayed
        /// answer) counts as "daemon unavailable". `gadfly attach` writes it.
        #[arg(long, env = "GADFLY_DAEMON_KEY", value_name = "BASE64")]
        daemon_key: Option<String>,
        /// Seconds within which the hook answers, whatever the daemon does
        /// (default: 540 for a stop, 2 for the other events). Keep it below
        /// the agent's timeout for the hook: a hook the agent kills answers
        /// nothing and records nothing.
        #[arg(long, value_name = "SECONDS", value_parser = parse_deadline)]
        deadline: Option<f64>,
        #[arg(long)]
        campaign: String,
    },
    /// Check that the gate is tamper-proof as deployed (permissions, users, the pinned key).
    ///
    /// Whether the gate is tamper-proof as deployed: the data dir's and its files' permissions, the
    /// daemon's user against the agent's, the Stop hook's pinned key, the campaign spec's warnings.
    /// Exit 0 when nothing is wrong, 1 when a problem is found.
    Doctor {
        /// The campaign to check (its workspace, hooks and spec).
        id: Option<String>,
        /// The daemon's data dir (default: $GADFLY_DATA_DIR, else the platform data dir).
        #[arg(long)]
        data_dir: Option<PathBuf>,
    },
    /// Print the daemon's public key (the hook's --daemon-key).
    ///
    /// Print the daemon's public key (the hook's --daemon-key), from the data dir or the daemon.
    Key {
        /// The daemon's data dir (default: $GADFLY_DATA_DIR, else the platform data dir).
        #[arg(long)]
        data_dir: Option<PathBuf>,
    },
    /// Print a one-time login link to the web console.
    ///
    /// Print a one-time link that logs a browser into the web console (good once, for ten minutes).
    Console,
    /// Queue a question for the agent; it is delivered at its next stop.
    Ask { id: String, text: String },
    /// File a claim from the agent's shell: a limit, a blocker, or done.
    ///
    /// File a claim from the agent's shell (with the campaign's $GADFLY_TOKEN and $GADFLY_CAMPAIGN,
    /// which gadfly sets for the agents it supervises): `limit` says the goal cannot be reached, with
    /// evidence, and a person may accept it (then the agent may stop, as an accepted limit, not a
    /// success) or reject it with a reason; `blocked` says something outside the agent's reach stops
    /// it; `done` is a completion claim (the gate still judges it at the stop).
    Claim {
        claim: ClaimArg,
        /// What you claim and why, in your own words.
        #[arg(long)]
        why: String,
        /// A text file of evidence (a measurement, a profile, a roofline); repeat for more (at most 8, 64 KiB each).
        #[arg(long = "evidence", value_name = "FILE")]
        evidence: Vec<PathBuf>,
        /// The campaign (default: $GADFLY_CAMPAIGN, else `campaign` in the client config file).
        #[arg(long, env = "GADFLY_CAMPAIGN")]
        campaign: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// File the evidence that answers a question gadfly asked.
    ///
    /// File the evidence that answers a question gadfly asked (with the campaign's $GADFLY_TOKEN and
    /// $GADFLY_CAMPAIGN): a question counts as answered only when fresh evidence follows it, a changed
    /// tree gadfly evaluates or files filed here; words alone never answer one.
    Answer {
        /// The question's id (as its delivery names it).
        question: i64,
        /// A text file of evidence (a measurement, a profile, a log); repeat for more (at least 1, at
        /// most 8, 64 KiB each).
        #[arg(long = "evidence", value_name = "FILE", required = true)]
        evidence: Vec<PathBuf>,
        /// What the evidence shows, in your own words.
        #[arg(long)]
        why: Option<String>,
        /// The campaign (default: $GADFLY_CAMPAIGN, else `campaign` in the client config file).
        #[arg(long, env = "GADFLY_CAMPAIGN")]
        campaign: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Write gadfly's hooks into an agent's configuration.
    ///
    /// Write gadfly's hooks into an agent's configuration, so an agent you start by hand is supervised.
    Attach {
        id: String,
        #[arg(long, value_enum, default_value = "claude-code")]
        agent: HookAgent,
        /// The folder the agent runs in (default: the campaign's workspace).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// The gadfly binary the hooks run (default: this one).
        #[arg(long)]
        hook_bin: Option<PathBuf>,
    },
    /// Remove exactly the hooks `attach` wrote.
    Detach {
        id: String,
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// The daemon spawns the agent in the campaign's workspace and supervises it to the end.
    Run {
        id: String,
        #[arg(long, value_enum)]
        agent: crate::agent::AgentKind,
        /// Return once the run has started instead of following it.
        #[arg(long)]
        detach: bool,
        /// Start the agent even though the campaign's `[redteam] before_start` would run the
        /// red-team battery first (and refuse to start on a broken harness), or its latest
        /// calibration found the harness unfair.
        #[arg(long)]
        force: bool,
    },
    /// Attack the campaign's own harness with gadfly's red-team battery.
    ///
    /// Attack the campaign's own harness with gadfly's red-team battery (results forgery, output
    /// caching, stale outputs, timing and precision tricks, build tricks), each attack in a
    /// throwaway copy of the workspace through the campaign's evaluation pipeline, and print what
    /// each came to: held (with the check that caught it) or BROKEN (with the check to add).
    ///
    /// Exit status: 0 when every applicable attack held, 1 when one broke the harness, 2 on an
    /// error (the battery could not judge the harness, the daemon unreachable, an unknown campaign).
    Redteam {
        id: String,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Stop the campaign's running agent (its whole process group).
    Stop { id: String },
    /// The beam of candidate families (git refs under refs/heads/beam/).
    #[command(subcommand)]
    Beam(BeamCommand),
    /// Stop attempts and their verdicts.
    #[command(subcommand)]
    Audit(AuditCommand),
    /// The question bank: lint, list, learned statistics.
    #[command(subcommand)]
    Bank(BankCommand),
    /// The text classifier for agent messages.
    #[command(subcommand)]
    Moments(MomentsCommand),
    /// Replay a recorded session through gadfly's judgment offline.
    ///
    /// Replay a recorded session (a timeline, a Claude Code transcript, a Codex rollout) through
    /// gadfly's judgment offline: every moment, question and stop decision it would have made.
    /// `gadfly replay import` and `gadfly replay export` write timelines (docs/REPLAY.md).
    Replay(replay::ReplayArgs),
    /// Run the example campaign with a replay agent through the Stop gate.
    ///
    /// Run the example campaign (batched QR on the CPU) with a replay agent through the Stop gate.
    Demo(DemoArgs),
    /// Write the example campaign (or a harness template) into DIR.
    ///
    /// Write the example campaign (batched QR on the CPU, as `gadfly demo` runs it) into DIR, ready to
    /// supervise an agent by hand: DIR/campaign.toml, and DIR/workspace, a git repository holding the
    /// initial kernel and the CPU harness. With `--harness python|c|cuda`: a minimal hardened harness
    /// to start a campaign of your own from (docs/HARNESS.md). Then: `gadfly campaign create
    /// DIR/campaign.toml`.
    Example {
        /// A folder that does not exist yet, or an empty one.
        dir: PathBuf,
        /// Write the harness template for this language instead of the qr-cpu example.
        #[arg(long, value_name = "LANG", value_parser = clap::builder::PossibleValuesParser::new(crate::templates::LANGUAGES))]
        harness: Option<String>,
    },
    /// Evaluate queued jobs of campaigns whose [harness] names tags (on a GPU host).
    ///
    /// See docs/WORKERS.md.
    /// Evaluate queued jobs of campaigns whose [harness] names tags (on a GPU host; see docs/WORKERS.md).
    Worker(WorkerArgs),
    /// Print the HTTP API's OpenAPI description (JSON).
    ///
    /// The daemon serves it at /api/v1/openapi.json.
    /// Print the HTTP API's OpenAPI description (JSON; the daemon serves it at /api/v1/openapi.json).
    Openapi,
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell) on stdout.
    ///
    /// E.g. `gadfly completions bash > ~/.local/share/bash-completion/completions/gadfly`
    /// (docs/CLI.md has zsh and fish).
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

#[derive(Args, Debug)]
pub struct WorkerArgs {
    /// The daemon's database: postgres://... (sqlite:PATH on the daemon's host works too).
    #[arg(long, env = "GADFLY_DATABASE_URL")]
    pub database_url: String,
    /// What this host offers, NAME=VALUE (repeat, or comma-separate): a job is claimed
    /// only when every tag its campaign names is here with the same value.
    #[arg(long = "tags", value_name = "NAME=VALUE", env = "GADFLY_WORKER_TAGS", value_delimiter = ',')]
    pub tags: Vec<String>,
    /// Run each harness command (build, run) through this template: `{command}` is the
    /// command as one shell word for `sh -c`, `{workdir}` the tree's folder, both quoted.
    /// E.g. `srun --gres=gpu:1 --chdir {workdir} sh -c {command}`.
    #[arg(long, value_name = "TEMPLATE", env = "GADFLY_WORKER_LAUNCH")]
    pub launch: Option<String>,
    /// Evaluate one job, then exit.
    #[arg(long)]
    pub once: bool,
    /// Exit after this many seconds without a job (default: wait for ever).
    #[arg(long, value_name = "SECONDS")]
    pub idle_exit_s: Option<u64>,
    /// Where trees are unpacked and harnesses run (default: a folder under the system's temporary folder).
    #[arg(long, env = "GADFLY_WORKER_SCRATCH")]
    pub scratch: Option<PathBuf>,
    /// This worker's name in the queue (default: host-pid-random).
    #[arg(long)]
    pub name: Option<String>,
    /// A claimed job's lease: renewed every third of it while the harness runs; a worker
    /// silent for this long loses the job to another.
    #[arg(long, default_value_t = 30, env = "GADFLY_WORKER_LEASE_S", value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub lease_s: u64,
    /// How often an idle worker looks for a job, in milliseconds.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(50..=60000))]
    pub poll_ms: u64,
}

#[derive(clap::ValueEnum, Clone, Debug)]
pub enum HookAgent {
    ClaudeCode,
}

/// What `gadfly claim` files.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClaimArg {
    Limit,
    Blocked,
    Done,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailMode {
    Closed,
    Open,
}

#[derive(Args, Debug)]
pub struct ServeArgs {
    #[arg(long, env = "GADFLY_LISTEN", default_value = config::DEFAULT_LISTEN)]
    pub listen: String,
    /// Default: $GADFLY_DATA_DIR, else the platform data dir.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// sqlite:PATH or postgres://...; default: SQLite in the data dir.
    #[arg(long, env = "GADFLY_DATABASE_URL")]
    pub database_url: Option<String>,
    /// A question bank folder to use and watch for edits (default: the bank built into the binary).
    #[arg(long, env = "GADFLY_BANK_DIR")]
    pub bank_dir: Option<PathBuf>,
    /// Allow a listen address that is not loopback (every API call still needs the token).
    #[arg(long)]
    pub allow_remote: bool,
}

#[derive(Subcommand, Debug)]
pub enum CampaignCommand {
    /// Create a campaign from a spec file (and calibrate its harness).
    ///
    /// Create a campaign from a spec file and calibrate its harness (the initial kernel against
    /// itself, `[calibration] runs` times); prints its id. When the calibration finds a bias beyond
    /// noise or a failed run, it says so: the campaign exists, and `gadfly run` refuses it until a
    /// fair calibration (or `[calibration] accept_bias = true`, or `gadfly run --force`).
    Create {
        file: PathBuf,
        /// Do not calibrate now (the spec can say so too: `[calibration] at_create = false`).
        #[arg(long)]
        no_calibrate: bool,
    },
    /// List the campaigns (archived ones only with --archived).
    List {
        #[arg(long)]
        json: bool,
        /// List the archived campaigns too.
        #[arg(long)]
        archived: bool,
    },
    Show {
        id: String,
        #[arg(long)]
        json: bool,
    },
    /// Archive a campaign: the lists hide it, nothing is removed.
    ///
    /// Archive a campaign: the lists hide it; nothing it recorded is removed, and its hooks still answer.
    Archive { id: String },
    /// Unarchive a campaign: the lists show it again.
    Unarchive { id: String },
}

#[derive(Subcommand, Debug)]
pub enum AuditCommand {
    /// Every stop attempt of a campaign, with its verdict and what followed.
    ///
    /// Every completion claim (stop attempt) of a campaign: verdict, decision, question, what followed.
    Campaign {
        id: String,
        #[command(flatten)]
        format: ReportFormat,
    },
    /// Audit a Claude Code transcript or a Codex rollout for completion claims.
    ///
    /// Audit a Claude Code transcript or a Codex rollout for completion claims and the evidence against them.
    Transcript {
        file: PathBuf,
        #[command(flatten)]
        format: ReportFormat,
    },
}

#[derive(Args, Debug)]
#[group(multiple = false)]
pub struct ReportFormat {
    /// JSON for programs (documented in docs/AUDIT.md).
    #[arg(long)]
    pub json: bool,
    /// Markdown (the default is the same, for a terminal).
    #[arg(long)]
    pub md: bool,
    /// A self-contained HTML page.
    #[arg(long)]
    pub html: bool,
}

#[derive(Subcommand, Debug)]
pub enum BeamCommand {
    /// Point refs/heads/beam/FAMILY at the workspace's HEAD (or --from) and declare the family.
    Tag {
        family: String,
        /// The campaign (default: $GADFLY_CAMPAIGN, else `campaign` in the client config file).
        #[arg(long, env = "GADFLY_CAMPAIGN")]
        campaign: Option<String>,
        #[arg(long)]
        from: Option<String>,
    },
    /// Families, their best and status (evaluates new candidate commits first).
    ///
    /// Families, best per family, status, and each one's evaluations (evaluates new candidate commits first).
    List {
        id: String,
        #[arg(long)]
        json: bool,
    },
    /// Abandon a family, with the reason on record.
    Abandon {
        id: String,
        family: String,
        #[arg(long)]
        reason: String,
    },
}

#[derive(Subcommand, Debug)]
pub enum BankCommand {
    /// Validate the bank (exit 1 on problems).
    ///
    /// Validate the bank: counts per group, kind and moment, and every problem (exit 1 on problems).
    Lint {
        #[arg(long)]
        json: bool,
        /// Bank folder (default: ./question_bank if present, else the bank built into the binary).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// List entries.
    List {
        #[arg(long)]
        group: Option<String>,
        #[arg(long)]
        moment: Option<String>,
        #[arg(long)]
        json: bool,
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Asks, gains and status per entry, learned from campaigns or replays.
    ///
    /// Asks, gains and status per entry, learned by the daemon from its campaigns (or offline, from replay reports).
    Stats {
        #[arg(long)]
        json: bool,
        /// A `gadfly replay --json` report to learn from instead of the daemon (repeat to pool several, each a campaign).
        #[arg(long, value_name = "REPORT.json")]
        replay: Vec<PathBuf>,
        /// Bank folder for the entries' kinds and groups with --replay (default: ./question_bank if present, else the bank built into the binary).
        #[arg(long, requires = "replay")]
        bank: Option<PathBuf>,
    },
    /// Write the learned statistics as TOML that can be merged into the bank's provenance.
    ExportStats { file: PathBuf },
    /// Print the question gadfly would deliver at a moment, offline.
    ///
    /// Print the question gadfly would deliver at a moment, for this evidence, now (no daemon; no learned yield, nothing asked yet).
    Pick {
        /// The moment: start, plateau, limit_claim, completion_claim, suspicious_gain, correctness_dismissal, edit_loop.
        #[arg(long)]
        moment: String,
        /// A JSON object with the moment's evidence: quote, scenarios, facts (numbers or strings), detector.
        #[arg(long)]
        evidence: Option<PathBuf>,
        /// The campaign spec the question is for (architecture, device, comparison, domains, scenarios).
        #[arg(long)]
        spec: Option<PathBuf>,
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Print {"bank_id","group","moment","text"}.
        #[arg(long)]
        json: bool,
        /// Bank folder (default: ./question_bank if present, else the bank built into the binary).
        #[arg(long)]
        bank: Option<PathBuf>,
    },
}

#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Exit when the replay ends (status 0 only if the last stop was allowed after earlier blocks).
    #[arg(long)]
    pub exit: bool,
    /// Where the demo's daemon keeps its data (default: a fresh temporary folder).
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    #[arg(long, default_value = config::DEFAULT_LISTEN)]
    pub listen: String,
}

pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    // The daemon gets a thread pool; a client command (the hook above all,
    // paid at every agent stop) starts a single-threaded runtime.
    let runtime = match cli.command {
        Command::Serve(_) | Command::Demo(_) | Command::Worker(_) => {
            tokio::runtime::Builder::new_multi_thread().enable_all().build()
        }
        _ => tokio::runtime::Builder::new_current_thread().enable_all().build(),
    }
    .context("starting the async runtime")?;
    runtime.block_on(dispatch(cli))
}

async fn dispatch(cli: Cli) -> anyhow::Result<ExitCode> {
    let top_daemon_key = cli.daemon_key;
    match cli.command {
        Command::Serve(args) => {
            let config = DaemonConfig {
                listen: args.listen,
                data_dir: args.data_dir.unwrap_or_else(config::default_data_dir),
                database_url: args.database_url,
                bank_dir: args.bank_dir,
                allow_remote: args.allow_remote,
            };
            let token = tokio_util::sync::CancellationToken::new();
            crate::daemon::cancel_on_signals(token.clone());
            let daemon = crate::daemon::Daemon::build(config, token).await?;
            eprintln!(
                "gadfly serving on {} (console, a one-time link good for ten minutes: {}; `gadfly console` prints another)",
                daemon.url(),
                daemon.login_link()
            );
            daemon.run_until_stopped().await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Hook { agent: _, event, fail, unavailable_blocks, daemon_key, deadline, campaign } => {
            let input = crate::hook::read_stdin().context("reading the hook payload from stdin")?;
            let gate = crate::campaign::GateSpec {
                fail_closed: fail == FailMode::Closed,
                unavailable_blocks,
                ..Default::default()
            };
            let key = daemon_key.as_deref().or(top_daemon_key.as_deref()).filter(|k| !k.is_empty());
            let out = crate::hook::run("claude-code", &event, &campaign, &input, gate, key, deadline).await;
            if let Some(s) = &out.stdout {
                println!("{s}");
            }
            if let Some(e) = &out.stderr {
                eprintln!("{e}");
            }
            Ok(ExitCode::from(out.code))
        }
        Command::Doctor { id, data_dir } => doctor(id, data_dir).await,
        Command::Key { data_dir } => {
            let key = match crate::signing::read_public(&data_dir.unwrap_or_else(config::default_data_dir)) {
                Some(k) => k,
                None => daemon_public_key(&client(Duration::from_secs(10))?).await?,
            };
            println!("{key}");
            Ok(ExitCode::SUCCESS)
        }
        Command::Console => {
            let link = client(Duration::from_secs(10))?.post("/login-codes", &json!({})).await?;
            println!("{}", link["url"].as_str().context("the daemon answered without a login link")?);
            eprintln!("open it in your browser: it logs in once, within ten minutes, and leaves no token in the browser's history");
            Ok(ExitCode::SUCCESS)
        }
        Command::Demo(args) => crate::demo::run(args).await,
        Command::Replay(args) => replay::run(args).await,
        Command::Example { dir, harness } => campaign::example(&dir, harness.as_deref()),
        Command::Worker(args) => {
            let config = crate::worker::WorkerConfig {
                database_url: args.database_url,
                tags: crate::jobs::parse_tags(&args.tags)?,
                launch: args.launch.filter(|t| !t.trim().is_empty()),
                once: args.once,
                idle_exit: args.idle_exit_s.map(Duration::from_secs),
                scratch: args.scratch.unwrap_or_else(|| std::env::temp_dir().join("gadfly-worker")),
                name: args.name.unwrap_or_else(crate::worker::default_name),
                lease: Duration::from_secs(args.lease_s),
                poll: Duration::from_millis(args.poll_ms),
            };
            let token = tokio_util::sync::CancellationToken::new();
            crate::daemon::cancel_on_signals(token.clone());
            crate::worker::run(config, token).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Openapi => {
            println!("{}", crate::api::openapi::json());
            Ok(ExitCode::SUCCESS)
        }
        Command::Completions { shell } => {
            // Written whole, so a closed stdout is an error (quiet, as for
            // any command) rather than clap_complete's panic.
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut <Cli as clap::CommandFactory>::command(), "gadfly", &mut script);
            std::io::Write::write_all(&mut std::io::stdout().lock(), &script)
                .context("writing the completion script")?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Campaign(c) => campaign(c).await,
        Command::Eval { id, json, force } => eval::eval(id, json, force).await,
        Command::Calibrate { id, runs, json } => {
            let client = client(Duration::from_secs(24 * 3600))?;
            let c = client.post(&format!("/campaigns/{id}/calibrate?runs={runs}"), &json!({})).await?;
            let fair = c["fair"].as_bool() == Some(true);
            if json {
                println!("{}", serde_json::to_string_pretty(&c)?);
            } else {
                println!(
                    "calibration of {id}: the initial kernel (tree {}) against itself, {runs} runs",
                    c["calibration"]["tree"].as_str().unwrap_or("?").chars().take(10).collect::<String>()
                );
                println!("{}", c["summary"].as_str().unwrap_or(""));
                println!(
                    "{}",
                    if fair {
                        "fair: every scenario is 1.00x against itself within its noise; later evaluations are judged with this noise"
                    } else {
                        "NOT FAIR: fix the harness where it is biased (both kernels timed alike: same process, same build, interleaved), or a run failed"
                    }
                );
            }
            Ok(if fair { ExitCode::SUCCESS } else { ExitCode::from(1) })
        }
        Command::Ask { id, text } => {
            let q = client(Duration::from_secs(30))?
                .post(&format!("/campaigns/{id}/questions"), &json!({"text": text}))
                .await?;
            println!("queued question (id {}) for campaign {id}; it reaches the agent at its next stop", q["id"]);
            Ok(ExitCode::SUCCESS)
        }
        Command::Claim { claim, why, evidence, campaign, json } => {
            let claim = match claim {
                ClaimArg::Limit => "limit",
                ClaimArg::Blocked => "blocked",
                ClaimArg::Done => "done",
            };
            let campaign = config::campaign_or_default(campaign, "with --campaign")?;
            let files = read_evidence(&evidence)?;
            let filed = client(Duration::from_secs(60))?
                .post(&format!("/campaigns/{campaign}/claims"), &json!({"claim": claim, "why": why, "evidence": files}))
                .await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&filed)?);
            } else {
                println!("gadfly: claim id {} ({claim}) filed: {}", filed["id"], filed["note"].as_str().unwrap_or(""));
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Answer { question, evidence, why, campaign, json } => {
            let campaign = config::campaign_or_default(campaign, "with --campaign")?;
            let files = read_evidence(&evidence)?;
            let answered = client(Duration::from_secs(60))?
                .post(
                    &format!("/campaigns/{campaign}/answers"),
                    &json!({"question_id": question, "evidence": files, "why": why}),
                )
                .await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&answered)?);
            } else {
                println!("gadfly: {}", answered["note"].as_str().unwrap_or("answer filed"));
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Bank(b) => bank::run(b, client).await,
        Command::Moments(m) => moments(m),
        Command::Beam(b) => beam(b).await,
        Command::Attach { id, agent: _, dir, hook_bin } => attach::attach(&id, dir, hook_bin).await,
        Command::Detach { id, dir } => attach::detach(&id, dir).await,
        Command::Run { id, agent, detach, force } => follow_run(&id, agent, detach, force).await,
        Command::Redteam { id, json } => redteam::redteam(&id, json).await,
        Command::Stop { id } => {
            let v = client(Duration::from_secs(30))?.post(&format!("/campaigns/{id}/runs/stop"), &json!({})).await?;
            println!(
                "{}",
                if v["stopped"] == true { "stopping the agent" } else { "no agent is running for this campaign" }
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Audit(AuditCommand::Campaign { id, format }) => {
            let v = client(Duration::from_secs(60))?.get(&format!("/campaigns/{id}/audit")).await?;
            let audit: crate::audit::CampaignAudit = serde_json::from_value(v).context("reading the campaign audit")?;
            if format.json {
                println!("{}", serde_json::to_string_pretty(&crate::audit::campaign_json(&audit))?);
            } else if format.html {
                println!("{}", crate::audit::html(&format!("audit of {id}"), &crate::audit::campaign_markdown(&audit)));
            } else {
                print!("{}", crate::audit::campaign_markdown(&audit));
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Audit(AuditCommand::Transcript { file, format }) => {
            let report = crate::audit::transcript::audit_file(&file)?;
            for p in &report.problems {
                eprintln!("warning: {p}");
            }
            if format.json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else if format.html {
                println!(
                    "{}",
                    crate::audit::html(
                        &format!("audit of {}", file.display()),
                        &crate::audit::transcript_markdown(&report)
                    )
                );
            } else {
                print!("{}", crate::audit::transcript_markdown(&report));
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// A client of the daemon: its URL and token from the environment, else
/// the client config file, else the defaults ([`ClientConfig::load`]).
fn client(timeout: Duration) -> anyhow::Result<Client> {
    Client::new(&ClientConfig::load()?, timeout)
}

/// The evidence files of `gadfly claim`, read as text, refused before any
/// upload when there are too many or one is too large.
fn read_evidence(paths: &[PathBuf]) -> anyhow::Result<Vec<serde_json::Value>> {
    use crate::events::{MAX_EVIDENCE_BYTES, MAX_EVIDENCE_FILES};
    if paths.len() > MAX_EVIDENCE_FILES {
        anyhow::bail!("{} evidence files: at most {MAX_EVIDENCE_FILES} a claim", paths.len());
    }
    paths
        .iter()
        .map(|p| {
            let bytes = std::fs::read(p).with_context(|| format!("reading evidence file {}", p.display()))?;
            if bytes.len() > MAX_EVIDENCE_BYTES {
                anyhow::bail!(
                    "evidence file {} is {} bytes: at most {MAX_EVIDENCE_BYTES} a file (attach a summary or an excerpt)",
                    p.display(),
                    bytes.len()
                );
            }
            let name = p.file_name().map_or_else(|| p.display().to_string(), |n| n.to_string_lossy().to_string());
            Ok(json!({"name": name, "text": String::from_utf8_lossy(&bytes)}))
        })
        .collect()
}

/// `gadfly eval`'s status: 0 when the predicate holds, 1 when it fails
/// (an evaluation that could not run fails it too); errors (no daemon, a
/// refused token, an unknown campaign) exit 2 from `main`.
pub fn eval_exit(e: &serde_json::Value) -> ExitCode {
    if e["holds"].as_bool() == Some(true) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// Whether a command only prints to its caller, so that a closed stdout
/// (`gadfly bank list | head -1`) ends it quietly with status 0, as
/// ripgrep and fd do (not by SIGPIPE as `cat` does: status 141 would fail
/// a `set -o pipefail` script for a reader that had read enough). The
/// daemon, the worker, the demo and the hook are not: a closed stdout is
/// no reason for them to stop.
pub fn quiet_on_closed_stdout(command: &Command) -> bool {
    !matches!(command, Command::Serve(_) | Command::Worker(_) | Command::Demo(_) | Command::Hook { .. })
}

/// Makes `println!` on a closed stdout (EPIPE; Rust ignores SIGPIPE, and
/// `println!` panics, exit 101) end the process quietly with status 0.
/// Any other panic is reported as before.
pub fn exit_quietly_on_closed_stdout() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if is_closed_stdout(payload) {
            std::process::exit(0);
        }
        previous(info);
    }));
}

/// Whether a panic message is `println!`'s on a closed stdout.
pub fn is_closed_stdout(panic_message: &str) -> bool {
    panic_message.starts_with("failed printing to stdout")
        && (panic_message.contains("Broken pipe") || panic_message.contains("os error 32"))
}

/// Renders a client error for a person at a terminal: a refused token
/// says how the CLI finds one (the API's message speaks to HTTP clients).
pub fn render_client_error(e: &anyhow::Error) -> String {
    let refused = e.chain().any(|c| c.downcast_ref::<crate::client::ApiFailure>().is_some_and(|f| f.status == 401));
    if refused {
        let has_token = std::env::var_os("GADFLY_TOKEN").is_some_and(|t| !t.is_empty());
        let data_dir = config::default_data_dir();
        format!(
            "the daemon refused the token ({}): set GADFLY_TOKEN to the daemon's token, \
             `export GADFLY_TOKEN=$(cat DATA_DIR/token)`, DATA_DIR being the daemon's --data-dir \
             (default: $GADFLY_DATA_DIR, else {}); without GADFLY_TOKEN the CLI reads the `token_file` \
             of the client config file ({}), else {}",
            if has_token { "GADFLY_TOKEN is not this daemon's token" } else { "GADFLY_TOKEN is not set" },
            data_dir.display(),
            config::client_file_path().map_or_else(|| "none".to_string(), |p| p.display().to_string()),
            data_dir.join("token").display()
        )
    } else {
        format!("{e:#}")
    }
}

/// `--deadline`: a positive number of seconds.
fn parse_deadline(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(d) if d.is_finite() && d > 0.0 => Ok(d),
        _ => Err(format!("`{s}` is not a positive number of seconds")),
    }
}
