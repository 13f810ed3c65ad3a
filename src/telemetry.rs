//! Logging through tracing-subscriber, to stderr, filtered by RUST_LOG;
//! in colour only on a terminal, and never with `NO_COLOR` set
//! (<https://no-color.org>): a daemon's log redirected to a file or a
//! journal holds no escape codes.

use tracing_subscriber::EnvFilter;

/// `default` applies when RUST_LOG is unset (e.g. "info" for the daemon,
/// "warn" for client commands whose stdout is read by programs).
pub fn init(default: &str) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let colour = colour(std::io::IsTerminal::is_terminal(&std::io::stderr()), std::env::var_os("NO_COLOR").as_deref());
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_ansi(colour).with_writer(std::io::stderr).try_init();
}

/// Whether to colour the log: on a terminal, unless `NO_COLOR` is set to
/// anything but the empty string.
fn colour(terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    terminal && no_color.is_none_or(|v| v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::colour;
    use std::ffi::OsStr;

    #[test]
    fn colour_only_on_a_terminal_and_never_with_no_color() {
        assert!(colour(true, None));
        assert!(!colour(false, None), "a file or a pipe gets no escape codes");
        assert!(!colour(true, Some(OsStr::new("1"))));
        assert!(colour(true, Some(OsStr::new(""))), "an empty NO_COLOR does not count");
    }
}
