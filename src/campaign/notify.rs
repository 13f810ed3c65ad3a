//! `[notify]`: the webhooks a campaign tells of the moments a person should
//! know about, as the spec (or the API) gives them, and their checks. What
//! is sent and how is `crate::notify` (the payload and its signature) and
//! `app/notify.rs` (the delivery).
//!
//! ```toml
//! [notify]
//! block_streak = 5                          # blocked stops in a row that notify (default 5)
//! console_url = "https://gadfly.example"    # the console in links (default: the daemon's URL)
//!
//! [[notify.webhooks]]
//! url = "https://hooks.example/gadfly"
//! events = ["plateau", "block_streak", "ungated_stop", "violation", "run_ended"]
//! secret_env = "GADFLY_WEBHOOK_SECRET"      # the variable holding the HMAC secret, never the secret
//! max_attempts = 5                          # default 5
//! timeout_s = 10                            # each attempt's, default 10
//! ```

use serde::{Deserialize, Serialize};

/// The notifications a webhook may ask for: (name, what sends it).
pub const NOTIFY_KINDS: &[(&str, &str)] = &[
    ("claim", "the agent claims a limit, completion or that an error does not matter (a claim moment), or repeats a claim without fresh evidence"),
    ("limit_claim_pending", "a sanctioned limit claim waits for a person's verdict (issue #34: nothing sends it yet)"),
    ("plateau", "the objective stopped improving (a plateau moment)"),
    ("block_streak", "`block_streak` stop attempts in a row were blocked (and each further `block_streak`)"),
    ("ungated_stop", "a turn ended without the gate's decision (stop.ungated)"),
    ("violation", "gadfly's hooks were tampered with, or a turn ended with no Stop hook call (violation)"),
    ("run_ended", "a spawned agent's run ended: completed, stopped by budget, stopped or failed (run.ended)"),
    ("question_escalated", "a question and its re-ask both went unanswered: no changed tree evaluated, no evidence filed (question.escalated)"),
];

/// At most this many webhooks per campaign.
pub const MAX_WEBHOOKS: usize = 16;

/// `[notify]`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct NotifySpec {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub webhooks: Vec<WebhookSpec>,
    /// Blocked stop attempts in a row that make a `block_streak`
    /// notification (again at each further multiple).
    #[serde(default = "default_block_streak")]
    pub block_streak: u32,
    /// The console's address in the links notifications carry (default:
    /// the daemon's own URL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub console_url: Option<String>,
}

impl Default for NotifySpec {
    fn default() -> Self {
        NotifySpec { webhooks: Vec::new(), block_streak: default_block_streak(), console_url: None }
    }
}

impl NotifySpec {
    /// True for a spec without `[notify]` (nothing to store).
    pub fn is_empty(&self) -> bool {
        *self == NotifySpec::default()
    }
}

/// One `[[notify.webhooks]]`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WebhookSpec {
    /// An `http://` or `https://` URL; gadfly POSTs JSON to it.
    pub url: String,
    /// The notifications it gets (see `NOTIFY_KINDS`).
    pub events: Vec<String>,
    /// The name of the daemon's environment variable that holds the HMAC
    /// secret (never the secret itself).
    pub secret_env: String,
    /// Attempts per notification, retried with backoff (1 to 20).
    #[serde(default = "default_attempts")]
    pub max_attempts: u32,
    /// Each attempt's timeout in seconds (1 to 300).
    #[serde(default = "default_timeout")]
    pub timeout_s: u32,
}

fn default_block_streak() -> u32 {
    5
}
pub(crate) fn default_attempts() -> u32 {
    5
}
pub(crate) fn default_timeout() -> u32 {
    10
}

/// Checks an `http(s)` URL; the message says what is wrong.
pub fn check_url(url: &str) -> Result<(), String> {
    let u = reqwest::Url::parse(url).map_err(|e| format!("not a URL ({e})"))?;
    if !matches!(u.scheme(), "http" | "https") {
        return Err(format!("must be an http:// or https:// URL, not {}://", u.scheme()));
    }
    if u.host_str().is_none_or(str::is_empty) {
        return Err("has no host".into());
    }
    Ok(())
}

/// Checks an environment variable's name.
pub fn check_env_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 128
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else {
        Err("must name an environment variable (letters, digits and `_`, not starting with a digit), never hold the secret itself".into())
    }
}

/// Checks the notifications a webhook asks for.
pub fn check_events(events: &[String]) -> Result<(), String> {
    if events.is_empty() {
        return Err(format!("must list at least one of {}", kind_names()));
    }
    for (i, e) in events.iter().enumerate() {
        if !NOTIFY_KINDS.iter().any(|(k, _)| k == e) {
            return Err(format!("unknown notification `{e}`; expected one of {}", kind_names()));
        }
        if events[..i].contains(e) {
            return Err(format!("`{e}` is listed twice"));
        }
    }
    Ok(())
}

fn kind_names() -> String {
    NOTIFY_KINDS.iter().map(|(k, _)| *k).collect::<Vec<_>>().join(", ")
}

/// Checks a whole `[notify]` (as the API takes it): each problem as
/// (dotted field, message).
pub fn check(n: &NotifySpec) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if n.webhooks.len() > MAX_WEBHOOKS {
        out.push(("notify.webhooks".into(), format!("at most {MAX_WEBHOOKS} webhooks")));
    }
    if !(1..=1000).contains(&n.block_streak) {
        out.push(("notify.block_streak".into(), "must be between 1 and 1000".into()));
    }
    if let Some(u) = &n.console_url {
        if let Err(e) = check_url(u) {
            out.push(("notify.console_url".into(), e));
        }
    }
    for (i, w) in n.webhooks.iter().enumerate() {
        let f = |k: &str| format!("notify.webhooks[{i}].{k}");
        if let Err(e) = check_url(&w.url) {
            out.push((f("url"), e));
        }
        if let Err(e) = check_events(&w.events) {
            out.push((f("events"), e));
        }
        if let Err(e) = check_env_name(&w.secret_env) {
            out.push((f("secret_env"), e));
        }
        if !(1..=20).contains(&w.max_attempts) {
            out.push((f("max_attempts"), "must be between 1 and 20".into()));
        }
        if !(1..=300).contains(&w.timeout_s) {
            out.push((f("timeout_s"), "must be between 1 and 300 seconds".into()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hook(url: &str, events: &[&str], env: &str) -> WebhookSpec {
        WebhookSpec {
            url: url.into(),
            events: events.iter().map(|e| e.to_string()).collect(),
            secret_env: env.into(),
            max_attempts: 5,
            timeout_s: 10,
        }
    }

    #[test]
    fn a_good_section_passes_and_each_bad_field_is_named() {
        let good = NotifySpec {
            webhooks: vec![hook("https://hooks.example/x?a=1", &["plateau", "run_ended"], "GADFLY_WEBHOOK_SECRET")],
            ..Default::default()
        };
        assert!(check(&good).is_empty(), "{:?}", check(&good));
        let bad = NotifySpec {
            webhooks: vec![
                hook("ftp://x", &["plateau"], "S"),
                hook("https://ok.example", &[], "S"),
                hook("https://ok.example", &["plateaus"], "S"),
                hook("https://ok.example", &["plateau", "plateau"], "S"),
                hook("https://ok.example", &["plateau"], "s3cr3t value!"),
                WebhookSpec { max_attempts: 0, timeout_s: 0, ..hook("https://ok.example", &["claim"], "S") },
            ],
            block_streak: 0,
            console_url: Some("not a url".into()),
        };
        let fields: Vec<String> = check(&bad).into_iter().map(|(f, _)| f).collect();
        assert_eq!(
            fields,
            [
                "notify.block_streak",
                "notify.console_url",
                "notify.webhooks[0].url",
                "notify.webhooks[1].events",
                "notify.webhooks[2].events",
                "notify.webhooks[3].events",
                "notify.webhooks[4].secret_env",
                "notify.webhooks[5].max_attempts",
                "notify.webhooks[5].timeout_s",
            ]
        );
        assert!(check_events(&["plateaus".into()]).unwrap_err().contains("unknown notification `plateaus`"));
    }
}
