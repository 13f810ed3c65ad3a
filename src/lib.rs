//! gadfly: supervises coding agents through optimization campaigns. An
//! agent may stop only when a measured predicate holds on every scenario;
//! at the moments agents go wrong, gadfly asks one short, checkable question.
//!
//! # The modules
//!
//! Each module is in one layer. A layer may import the layers below it
//! and its own, never one above; the rows say where today's code still
//! breaks that (issue #33). From the top:
//!
//! - **entry**: the binary, the CLI and daemon start-up. Anything.
//! - **HTTP**: the API, the console's pages, logins, OpenAPI. Application
//!   and below.
//! - **application**: `app` and what it drives: the use cases, the only
//!   layer that holds the store and the live bank together. Adapters and
//!   below.
//! - **adapters** (`agent/`): the agents' command lines, hooks and
//!   transcripts. The evaluation machine and below.
//! - **evaluation machine**: snapshot a tree, run the harness in it,
//!   measure. Persistence (the job queue) and below.
//! - **persistence** (`store`): all SQL. Domain types and the leaves.
//! - **domain**: pure rules and types: findings in, findings out (no
//!   `Supervisor`, no `Store`; tests/layers.rs checks). Other domain
//!   modules and the leaves; three named exceptions, `moments/edit_loop.rs`
//!   (its `git diff` in the private snapshot store), `campaign` (the
//!   workspace check runs the hardened `git`) and `beam` (it lists and
//!   tags the workspace's refs with the hardened `git`).
//! - **client**: what `gadfly hook` runs at every agent event, beside the
//!   daemon rather than under it. One another, `signing`, and the types
//!   it shares with the daemon (`campaign::GateSpec`,
//!   `agent::CLAUDE_CODE_EVENTS`); never `store`, `api` or `app`
//!   (tests/layers.rs checks). Its leaves `time` and `config` may be
//!   imported by every layer; so may `git` (the hardened git command)
//!   and `token` (hook tokens), which name no module either.
//!
//! "Imports" lists the crate modules a module names today (tests included);
//! **breaks:** marks the ones that point the wrong way. tests/layers.rs
//! fails when a module under src/ has no row here.
//!
//! | module | owns | layer | imports |
//! |---|---|---|---|
//! | `main` | the `gadfly` binary: logging, then `cli::run` | entry | `cli`, `telemetry` |
//! | `cli` | the clap tree and the client-side commands (API call plus rendering); `cli/bank.rs`: `gadfly bank` (was `bank/cli.rs`) | entry | `agent`, `api`, `audit`, `bank`, `campaign`, `classify`, `client`, `config`, `daemon`, `demo`, `doctor`, `events`, `hook`, `jobs`, `signing`, `worker` |
//! | `daemon` | start-up and shutdown: open the store, build the supervisor, replay the spool, serve, drain | entry | `agent`, `api`, `app`, `bank`, `config`, `moments`, `process`, `signing`, `store` |
//! | `demo` | `gadfly demo`: a daemon and a replay agent on the qr-cpu example | entry | `cli`, `client`, `config`, `daemon`, `signing` |
//! | `doctor` | `gadfly doctor`: whether the gate is tamper-proof as deployed | entry | `agent`, `campaign`, `signing` |
//! | `telemetry` | tracing to stderr, filtered by `RUST_LOG` | entry | nothing |
//! | `api` | the HTTP layer, a file per concern: `mod.rs` (the router, `AppState`, the error shape, the extractors), `middleware.rs` (token, cookie and CSRF, Host and Origin, hook-answer signing, the error shape of every answer, the timeout), the handlers by resource (`campaigns.rs`, `hooks.rs`, `questions.rs`, `events.rs` with the SSE stream, `runs.rs`, `beam.rs`, `login.rs`, `status.rs`), `views.rs` (the JSON of `GET /campaigns[/{id}]`, shared by the API and the pages), `pages.rs` (the plain server-rendered pages), `web.rs` (the console's static assets), `openapi.rs` (the description, from the handlers' annotations), `auth.rs` (master token, hook tokens checked, login codes), `serve.rs` (the accept loop: hyper HTTP/1.1 with a header-read deadline) | HTTP | `agent`, `app`, `audit`, `bank`, `beam`, `client`, `evaluation`, `html`, `metrics`, `signing`, `store`, `token`; handlers reach past the supervisor into `store` (`state.supervisor.store()`) |
//! | `app/` | the use cases over one handle, `Supervisor` (to be renamed `App`): `mod.rs` (state, event record and publish, campaigns and their cache), `hooks` (hook calls, context delivery, ungated ends, spooled replays, the spool import), `stop` (`judge_stop`, `deliver_at_stop`; `judge_turn_end`, a spawned agent's turn end judged directly), `installs` (hook-install records, tamper checks), `evaluate` (eval locks, snapshot and pristine caches, local or worker dispatch), `questions` (ask, pick, suggest, bank stats, `record_delivered`), `moments` (acting on the detectors' findings by mode: queue, suggest, record; cooldowns, `SeenClaims`, `raise_claim`), `recheck` (a suspicious gain's second evaluation), `runs` (run registry, leases, lease keeper, transcript followers, `stop_everything`; a spawned agent's run started, taken over and ended: `start_run`, `resume_run`), `run_loop` (a spawned agent's loops: the Claude Code stream and the turn loop of Codex and the command adapter; its output recorded, each turn end judged by `judge_turn_end`, crashes resumed, budgets), `transcript` (an attached session's transcript followed and recorded), `escapes` (the watch of turns that end outside the gate, from Claude Code's own transcripts), `relay` (the PostgreSQL event relay), `beam` (the beam's use cases: registering the families found, evaluating their new commits, the beam as stored, the tag and abandon records, the new-family and revisit questions; the git parts are `beam`), `tasks` (every background task: named, tracked on one `TaskTracker`, stopped by the daemon's token, waited for at shutdown) | application | `agent`, `bank`, `beam`, `campaign`, `evaluation`, `events`, `gate`, `harness`, `jobs`, `metrics`, `moments`, `signing`, `snapshot`, `spool`, `store`, `time`, `token` |
//! | `audit` | claim audits: live (from the store) and offline (a transcript), as Markdown, JSON or HTML | application | `classify`, `evaluation`, `html`, `store` |
//! | `metrics` | the Prometheus registry (`METRICS`) the supervisor counts into and `api` serves | application | `agent`, `events` |
//! | `agent` | adapters only, no `Supervisor`, no `Store`, no `api` (tests/layers.rs checks): `attach` (hooks into Claude Code's settings), the line parsers that return events (`claude`: Claude Code's stream-json; `codex`: `codex exec --json`; `transcript`: an attached session's transcript; `escapes`: Claude Code's own transcripts, for turn ends outside the gate), `jail` (a spawned agent's sandbox), `budget` (a run's budgets); `AgentKind`, `AgentSpec`, `CLAUDE_CODE_EVENTS` | adapters | `campaign`, `events` |
//! | `harness` | one evaluation: export the tree, build and run with deadlines, parse, check, judge | evaluation machine | `campaign`, `constraints`, `evaluation`, `predicate`, `process`, `results`, `snapshot`, `time` |
//! | `snapshot` | workspace trees in gadfly's private git store, pristine files, `scrubbed_git` (re-exports `git::hardened_git` and `pristine::PristineFile`) | evaluation machine | `git`, `pristine` |
//! | `process` | one shell command in its own process group with a hard deadline | evaluation machine | nothing |
//! | `constraints` | banned symbols read from the built binary | evaluation machine | nothing |
//! | `jobs` | evaluation on other hosts: local or queued, and the wait for a worker | evaluation machine | `campaign`, `evaluation`, `harness`, `predicate`, `snapshot`, `store`, `time` |
//! | `worker` | `gadfly worker`: claims queued jobs and evaluates them on its host | evaluation machine | `campaign`, `evaluation`, `harness`, `snapshot`, `store` |
//! | `store` | persistence, the only SQL: one file per table family under `store/`, group commit, PostgreSQL announcements; `QuestionRow` as `events::DeliveredQuestion` | persistence | `bank`, `config`, `evaluation`, `events`, `pristine`, `time` |
//! | `gate` | the stop decision as a pure function of mode, verdict and waiting questions | domain | `bank` (`groups_for`), `campaign`, `evaluation`, `predicate`, `results` |
//! | `predicate` | whether the stop predicate holds on every scenario | domain | `campaign`, `results` |
//! | `results` | the harness results contract: JSON lines, one per scenario | domain | nothing |
//! | `campaign` | the campaign spec: parsing, spanned errors, the resolved form, `valid_tag` | domain | `git` (the workspace check runs `hardened_git`: the spec's one process, an exception tests/layers.rs names) |
//! | `beam` | a beam of candidate families kept as git refs: the `[beam]` settings, listing and tagging the candidate refs, the family and point types; its use cases (the store, its events, its questions) are `app/beam.rs` | domain | `campaign`, `evaluation`, `git` (lists and tags the workspace's refs with `hardened_git`, an exception tests/layers.rs names) |
//! | `evaluation` | `Evaluation` and `Step`: what one evaluation found | domain | `predicate` |
//! | `moments` | detection only, findings in and findings out: `detect` (numeric), `edit_loop`, the classifier's claim moments (`claims_in`, the classifier handle), `recheck` (a re-evaluation's disagreements), the moment event of a finding; acting on them is `app/moments.rs` | domain | `campaign`, `classify`, `evaluation`, `events`, `predicate`, `results`, `snapshot` (`edit_loop`: `scrubbed_git` for its `git diff` in the private store, an exception tests/layers.rs names) |
//! | `bank` | the question bank: `load`, `select`, `learn`, `live` (reloaded on change), `groups` (`groups_for`: the groups that fit each moment); its commands are `cli/bank.rs` | domain | `campaign`, `time` |
//! | `classify` | the text classifier of agent messages (rules plus a learned model) | domain | nothing |
//! | `events` | the typed event vocabulary: `Event`, its kinds and bodies, and the plain data they carry (`Installed`, re-exported as `agent::attach::Installed`) | domain | `evaluation`, `gate` |
//! | `html` | HTML text escaping (the pages and the audit report) | domain | nothing |
//! | `pristine` | `PristineFile`: a protected file as gadfly keeps it (the store persists it, `snapshot` reads and restores it) | domain | nothing |
//! | `hook` | `gadfly hook`: read the payload, call the daemon, verify, fail closed, spool | client | `agent` (`CLAUDE_CODE_EVENTS`), `campaign` (`GateSpec`), `client`, `config`, `signing`, `spool`, `time` |
//! | `spool` | the hook's durable local spool of undelivered calls, and the replay check | client | `config` |
//! | `client` | the typed HTTP client of the daemon's API, and `CALL_ID_HEADER` | client | `config`, `signing` |
//! | `config` | settings from flags and the environment; `redact` for database URLs | client | nothing |
//! | `time` | `now()`: the one timestamp format | client | nothing |
//! | `git` | `hardened_git`: the scrubbed `git` command every git call starts from (snapshots, the beam, the spec's workspace check) | leaf | nothing |
//! | `token` | hook tokens: a campaign's scoped credential, an HMAC of its id under the master token, minted for the agents the daemon spawns and checked by `api/auth.rs` | leaf | nothing |
//! | `signing` | the daemon's Ed25519 identity: it signs every hook answer, the hook verifies | client | nothing |

pub mod agent;
pub mod api;
pub mod app;
pub mod audit;
pub mod bank;
pub mod beam;
pub mod campaign;
pub mod classify;
pub mod cli;
pub mod client;
pub mod config;
pub mod constraints;
pub mod daemon;
pub mod demo;
pub mod doctor;
pub mod evaluation;
pub mod events;
pub mod gate;
pub mod git;
pub mod harness;
pub mod hook;
pub mod html;
pub mod jobs;
pub mod metrics;
pub mod moments;
pub mod predicate;
pub mod pristine;
pub mod process;
pub mod results;
pub mod signing;
pub mod snapshot;
pub mod spool;
pub mod store;
pub mod telemetry;
pub mod time;
pub mod token;
pub mod worker;
