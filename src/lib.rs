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
//! - **application**: `app` (still reachable as `supervisor`) and what it
//!   drives: the use cases, the only layer that holds the store and the
//!   live bank together. Adapters and below.
//! - **adapters** (`agent/`): the agents' command lines, hooks and
//!   transcripts. The evaluation machine and below.
//! - **evaluation machine**: snapshot a tree, run the harness in it,
//!   measure. Persistence (the job queue) and below.
//! - **persistence** (`store`): all SQL. Domain types and the leaves.
//! - **domain**: pure rules and types (no `Supervisor`, no `Store`). Other
//!   domain modules and the leaves.
//! - **client**: what `gadfly hook` runs at every agent event, beside the
//!   daemon rather than under it. One another, `signing`, and the types
//!   it shares with the daemon (`campaign::GateSpec`,
//!   `agent::CLAUDE_CODE_EVENTS`); never `store`, `api`, `app` or
//!   `supervisor` (tests/layers.rs checks). Its leaves `time` and
//!   `config` may be imported by every layer.
//!
//! "Imports" lists the crate modules a module names today (tests included);
//! **breaks:** marks the ones that point the wrong way. tests/layers.rs
//! fails when a module under src/ has no row here.
//!
//! | module | owns | layer | imports |
//! |---|---|---|---|
//! | `main` | the `gadfly` binary: logging, then `cli::run` | entry | `cli`, `telemetry` |
//! | `cli` | the clap tree and the client-side commands (API call plus rendering) | entry | `agent`, `api`, `audit`, `bank`, `campaign`, `classify`, `client`, `config`, `daemon`, `demo`, `doctor`, `events`, `hook`, `jobs`, `signing`, `worker` |
//! | `daemon` | start-up and shutdown: open the store, build the supervisor, replay the spool, serve, drain | entry | `agent`, `api`, `bank`, `config`, `moments`, `process`, `signing`, `store`, `supervisor` |
//! | `demo` | `gadfly demo`: a daemon and a replay agent on the qr-cpu example | entry | `cli`, `client`, `config`, `daemon`, `signing` |
//! | `doctor` | `gadfly doctor`: whether the gate is tamper-proof as deployed | entry | `agent`, `campaign`, `signing` |
//! | `telemetry` | tracing to stderr, filtered by `RUST_LOG` | entry | nothing |
//! | `api` | the HTTP layer, a file per concern: `mod.rs` (the router, `AppState`, the error shape, the extractors), `middleware.rs` (token, cookie and CSRF, Host and Origin, hook-answer signing, the error shape of every answer, the timeout), the handlers by resource (`campaigns.rs`, `hooks.rs`, `questions.rs`, `events.rs` with the SSE stream, `runs.rs`, `beam.rs`, `login.rs`, `status.rs`), `views.rs` (the JSON of `GET /campaigns[/{id}]`, shared by the API and the pages), `pages.rs` (the plain server-rendered pages), `web.rs` (the console's static assets), `openapi.rs` (the description, from the handlers' annotations), `auth.rs` (master token, hook tokens, login codes), `serve.rs` (the accept loop: hyper HTTP/1.1 with a header-read deadline) | HTTP | `agent`, `app`, `audit`, `bank`, `beam`, `client`, `evaluation`, `events`, `html`, `metrics`, `signing`, `store`; handlers reach past the supervisor into `store` (`state.supervisor.store()`) |
//! | `app/` | the use cases over one handle, `Supervisor` (to be renamed `App`): `mod.rs` (state, event record and publish, campaigns and their cache), `hooks` (hook calls, context delivery, ungated ends, spooled replays, the spool import), `stop` (`judge_stop`, `deliver_at_stop`), `installs` (hook-install records, tamper checks), `evaluate` (eval locks, snapshot and pristine caches, local or worker dispatch), `questions` (ask, pick, suggest, bank stats, `record_delivered`), `runs` (run registry, leases, lease keeper, transcript followers, `stop_everything`), `relay` (the PostgreSQL event relay) | application | `agent`, `bank`, `campaign`, `evaluation`, `events`, `gate`, `harness`, `jobs`, `metrics`, `moments`, `snapshot`, `spool`, `store`, `time` |
//! | `supervisor` | shim re-exporting `app`, to be removed once every caller names `crate::app` | application | `app` |
//! | `beam` | a beam of candidate families kept as git refs; revisit questions | application | `campaign`, `evaluation`, `events`, `snapshot`, `supervisor` |
//! | `audit` | claim audits: live (from the store) and offline (a transcript), as Markdown, JSON or HTML | application | `classify`, `evaluation`, `html`, `store` |
//! | `metrics` | the Prometheus registry (`METRICS`) the supervisor counts into and `api` serves | application | `agent`, `events` |
//! | `agent` | adapters: `attach` (hooks into Claude Code's settings), `run` (spawned agents and their loops), `transcript`, `escapes`, `jail`; `AgentKind`, `CLAUDE_CODE_EVENTS` | adapters | `campaign`, `events`, `harness`, `signing`; **breaks:** `supervisor` (`run`, `transcript` and `escapes` hold a `Supervisor`; `run` judges a turn end through `handle_hook`), `store` (`run`: `RunRow`), `api` (`run`: `auth::hook_token`) |
//! | `harness` | one evaluation: export the tree, build and run with deadlines, parse, check, judge | evaluation machine | `campaign`, `constraints`, `evaluation`, `predicate`, `process`, `results`, `snapshot`, `time` |
//! | `snapshot` | workspace trees in gadfly's private git store, pristine files, hardened git | evaluation machine | nothing |
//! | `process` | one shell command in its own process group with a hard deadline | evaluation machine | nothing |
//! | `constraints` | banned symbols read from the built binary | evaluation machine | nothing |
//! | `jobs` | evaluation on other hosts: local or queued, and the wait for a worker | evaluation machine | `campaign`, `evaluation`, `harness`, `predicate`, `snapshot`, `store`, `time` |
//! | `worker` | `gadfly worker`: claims queued jobs and evaluates them on its host | evaluation machine | `campaign`, `evaluation`, `harness`, `snapshot`, `store` |
//! | `store` | persistence, the only SQL: one file per table family under `store/`, group commit, PostgreSQL announcements | persistence | `bank`, `config`, `evaluation`, `time`; **breaks:** `snapshot` (the `PristineFile` type) |
//! | `gate` | the stop decision as a pure function of mode, verdict and waiting questions | domain | `campaign`, `evaluation`, `moments` (`groups_for`; the `moments` folder still calls back into `supervisor`, so `gate` sits in that cycle), `predicate`, `results` |
//! | `predicate` | whether the stop predicate holds on every scenario | domain | `campaign`, `results` |
//! | `results` | the harness results contract: JSON lines, one per scenario | domain | nothing |
//! | `campaign` | the campaign spec: parsing, spanned errors, the resolved form, `valid_tag` | domain | **breaks:** `snapshot` (the workspace git check runs `hardened_git`) |
//! | `evaluation` | `Evaluation` and `Step`: what one evaluation found | domain | `predicate` |
//! | `moments` | the moments agents go wrong: `detect` (numeric), `edit_loop`, the classifier's findings, `recheck` | domain | `campaign`, `classify`, `evaluation`, `events`, `gate`, `predicate`, `results`, `snapshot`; **breaks:** `supervisor` (`mod.rs` and `recheck` take a `Supervisor` and call back into it), `beam`, `harness` and `jobs` (`recheck` runs an evaluation pipeline of its own) |
//! | `bank` | the question bank: `load`, `select`, `learn`, `live` (reloaded on change), `cli` | domain | `campaign`, `time`; **breaks:** `cli`, `client` (`bank/cli.rs` is entry code in the domain folder) |
//! | `classify` | the text classifier of agent messages (rules plus a learned model) | domain | nothing |
//! | `events` | the typed event vocabulary: `Event`, its kinds and bodies | domain | `evaluation`, `gate`; **breaks:** `store` (`QuestionRow`), `agent` (`attach::Installed`; `CLAUDE_CODE_EVENTS` in tests) |
//! | `html` | HTML text escaping (the pages and the audit report) | domain | nothing |
//! | `hook` | `gadfly hook`: read the payload, call the daemon, verify, fail closed, spool | client | `agent` (`CLAUDE_CODE_EVENTS`), `campaign` (`GateSpec`), `client`, `config`, `signing`, `spool`, `time` |
//! | `spool` | the hook's durable local spool of undelivered calls, and the replay check | client | `config` |
//! | `client` | the typed HTTP client of the daemon's API, and `CALL_ID_HEADER` | client | `config`, `signing` |
//! | `config` | settings from flags and the environment; `redact` for database URLs | client | nothing |
//! | `time` | `now()`: the one timestamp format | client | nothing |
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
pub mod harness;
pub mod hook;
pub mod html;
pub mod jobs;
pub mod metrics;
pub mod moments;
pub mod predicate;
pub mod process;
pub mod results;
pub mod signing;
pub mod snapshot;
pub mod spool;
pub mod store;
pub mod supervisor;
pub mod telemetry;
pub mod time;
pub mod worker;
