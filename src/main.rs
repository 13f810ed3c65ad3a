use std::process::ExitCode;

use clap::Parser;
use gadfly::cli::{Cli, Command};

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The hook is started at every agent event and writes its own messages
    // to stderr: logging is set up for it only when RUST_LOG asks (setting
    // it up is a tenth of the hook's start).
    let hook = matches!(cli.command, Command::Hook { .. });
    if !hook || std::env::var_os("RUST_LOG").is_some() {
        gadfly::telemetry::init(match cli.command {
            Command::Serve(_) | Command::Worker(_) => "info,tower_http=warn,sqlx=warn",
            _ => "warn",
        });
    }
    if gadfly::cli::quiet_on_closed_stdout(&cli.command) {
        gadfly::cli::exit_quietly_on_closed_stdout();
    }
    match gadfly::cli::run(cli) {
        Ok(code) => code,
        Err(e) => {
            if e.chain().any(|c| {
                c.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            }) {
                return ExitCode::SUCCESS;
            }
            eprintln!("gadfly: {}", gadfly::cli::render_client_error(&e));
            ExitCode::from(2)
        }
    }
}
