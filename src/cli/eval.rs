//! `gadfly eval`: one evaluation of the campaign's workspace, and its
//! verdict; on a terminal, a progress line while the daemon evaluates.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::Duration;

use serde_json::json;

use super::{client, eval_exit, render_evaluation};

pub(super) async fn eval(id: Option<String>, json: bool, force: bool) -> anyhow::Result<ExitCode> {
    let id = crate::config::campaign_or_default(id, "as `gadfly eval ID`")?;
    let client = client(Duration::from_secs(24 * 3600))?;
    let progress = Progress::start(&id, !json && std::io::stderr().is_terminal());
    let e = client.post(&format!("/campaigns/{id}/evaluate?force={force}"), &json!({})).await;
    drop(progress);
    let e = e?;
    if json {
        println!("{}", serde_json::to_string_pretty(&e)?);
    } else {
        print!("{}", render_evaluation(&e));
    }
    Ok(eval_exit(&e))
}

/// The line `⠋ evaluating ID: 12s` on stderr, redrawn while the daemon
/// evaluates, and cleared when it answers (or fails). The API answers the
/// evaluation in one call and records no phase (snapshot, build, run,
/// scenarios) until the verdict, so the time is all there is to show.
struct Progress(Option<indicatif::ProgressBar>);

impl Progress {
    fn start(campaign: &str, on_terminal: bool) -> Progress {
        if !on_terminal {
            return Progress(None);
        }
        let bar = indicatif::ProgressBar::with_draw_target(None, indicatif::ProgressDrawTarget::stderr());
        bar.set_style(
            indicatif::ProgressStyle::with_template("{spinner} evaluating {msg}: {elapsed}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
        );
        bar.set_message(campaign.to_string());
        bar.enable_steady_tick(Duration::from_millis(250));
        Progress(Some(bar))
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(bar) = self.0.take() {
            bar.finish_and_clear();
        }
    }
}
