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
    let progress = Progress::start(&client, &id, !json && std::io::stderr().is_terminal());
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

/// The line `⠋ evaluating ID: building 3s (12s)` on stderr, redrawn
/// while the daemon evaluates, and cleared when it answers (or fails): the
/// step the daemon says the evaluation is in
/// (`GET /campaigns/{id}/evaluation-progress`), asked twice a second, and
/// the time since the command started.
struct Progress(Option<(indicatif::ProgressBar, tokio::task::JoinHandle<()>)>);

impl Progress {
    fn start(client: &crate::client::Client, campaign: &str, on_terminal: bool) -> Progress {
        if !on_terminal {
            return Progress(None);
        }
        let bar = indicatif::ProgressBar::with_draw_target(None, indicatif::ProgressDrawTarget::stderr());
        bar.set_style(
            indicatif::ProgressStyle::with_template("{spinner} evaluating {msg} ({elapsed})")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
        );
        bar.set_message(format!("{campaign}: starting"));
        bar.enable_steady_tick(Duration::from_millis(250));
        let (asker, shown, id) = (client.clone(), bar.clone(), campaign.to_string());
        let poll = tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(500)).await;
                // A daemon that does not answer this leaves the last words up.
                if let Ok(now) = asker.get(&format!("/campaigns/{id}/evaluation-progress")).await {
                    if let Some(line) = step_line(&now) {
                        shown.set_message(format!("{id}: {line}"));
                    }
                }
            }
        });
        Progress(Some((bar, poll)))
    }
}

/// The words of a step the daemon reports, with its seconds so far.
fn step_line(now: &serde_json::Value) -> Option<String> {
    let step = now["step"].as_str()?;
    Some(match now["seconds"].as_f64() {
        Some(s) => format!("{step} {s:.0}s"),
        None => step.to_string(),
    })
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some((bar, poll)) = self.0.take() {
            poll.abort();
            bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_step_reads_as_its_words_and_seconds() {
        let now = serde_json::json!({"evaluating": true, "step": "building", "seconds": 3.4});
        assert_eq!(super::step_line(&now).as_deref(), Some("building 3s"));
        assert_eq!(super::step_line(&serde_json::json!({"evaluating": false})), None);
    }
}
