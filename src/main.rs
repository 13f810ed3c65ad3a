use std::process::ExitCode;

use clap::Parser;
use gadfly::cli::{Cli, Command};

fn main() -> ExitCode {
    let cli = Cli::parse();
    gadfly::telemetry::init(match cli.command {
        Command::Serve(_) | Command::Worker(_) => "info,tower_http=warn,sqlx=warn",
        _ => "warn",
    });
    match gadfly::cli::run(cli) {
        Ok(code) => code,
        Err(e) => {
            if e.chain().any(|c| {
                c.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            }) {
                return ExitCode::SUCCESS;
            }
            eprintln!("gadfly: {e:#}");
            ExitCode::from(2)
        }
    }
}
