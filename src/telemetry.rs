//! Logging through tracing-subscriber, to stderr, filtered by RUST_LOG.

use tracing_subscriber::EnvFilter;

/// `default` applies when RUST_LOG is unset (e.g. "info" for the daemon,
/// "warn" for client commands whose stdout is read by programs).
pub fn init(default: &str) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).try_init();
}
