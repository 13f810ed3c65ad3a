//! Who may call what. The daemon's master token (DATA_DIR/token) opens the
//! whole API and the console. A campaign's hook token opens only what an
//! agent supervised in that campaign needs: posting its hook events, asking
//! for an evaluation of its workspace, declaring beam families, filing
//! its own claims (`gadfly claim`), never a verdict on one, and filing
//! evidence that answers a question it was asked (`gadfly answer`). It
//! cannot post results, answer or queue questions, start or stop runs,
//! read other campaigns or create any. Spawned agents get the hook token,
//! never the master token.
//!
//! A hook token is `gfh1.<campaign>.<mac>`, where the MAC is an HMAC-SHA256
//! of the campaign id under the master token: the daemon checks it without
//! storing anything, and a new master token revokes every hook token.

// Minted in `crate::token`, below the application that hands them to
// the agents it spawns.
pub use crate::token::hook_token;
use crate::token::{mac, PREFIX};

/// What a presented token grants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Grant {
    /// The master token: everything.
    Full,
    /// A campaign's hook token.
    Hooks(String),
}

/// What `presented` grants, or None for a wrong token.
pub fn grant(master: &str, presented: &str) -> Option<Grant> {
    if constant_time_eq(presented, master) {
        return Some(Grant::Full);
    }
    let rest = presented.strip_prefix(PREFIX)?;
    let (campaign, tag) = rest.rsplit_once('.')?;
    (!campaign.is_empty() && constant_time_eq(tag, &mac(master, campaign))).then(|| Grant::Hooks(campaign.to_string()))
}

/// Whether a hook token of `campaign` may make this API call (`path` below /api/v1).
pub fn hook_scope_allows(method: &axum::http::Method, path: &str, campaign: &str) -> bool {
    let path = path.strip_prefix("/api/v1").unwrap_or(path);
    let Some(rest) = path.strip_prefix("/campaigns/").and_then(|r| r.strip_prefix(campaign)) else { return false };
    let post = method == axum::http::Method::POST;
    let get = method == axum::http::Method::GET;
    match rest {
        "/evaluate" | "/beam/tag" | "/claims" | "/answers" => post,
        "/beam" => get,
        r => post && r.strip_prefix("/hooks/").is_some_and(|ev| ev.split('/').count() == 2 && !ev.contains("..")),
    }
}

pub fn constant_time_eq(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// One-time console logins. A link carrying the master token
/// (`/login?token=...`) stays in the browser's history, where the token
/// opens the whole API for as long as it lives. A login code is good for
/// one login within [`LoginCodes::TTL`]: the history keeps a spent code.
/// `gadfly serve` prints a link with one, `gadfly console` asks the daemon
/// for another (`POST /api/v1/login-codes`, master token only). Codes live
/// in the daemon's memory: a restart voids the ones not used.
#[derive(Default)]
pub struct LoginCodes {
    codes: std::sync::Mutex<std::collections::HashMap<String, std::time::Instant>>,
}

impl LoginCodes {
    /// How long a code stays good.
    pub const TTL: std::time::Duration = std::time::Duration::from_secs(600);
    /// At most this many codes wait at once; minting more drops the oldest.
    const MAX: usize = 64;

    /// A fresh code (128 random bits, hex).
    pub fn mint(&self) -> String {
        let code = crate::config::random_hex(16);
        let now = std::time::Instant::now();
        let mut codes = self.codes.lock().unwrap_or_else(|e| e.into_inner());
        codes.retain(|_, made| now.duration_since(*made) < Self::TTL);
        while codes.len() >= Self::MAX {
            let Some(oldest) = codes.iter().min_by_key(|(_, made)| **made).map(|(c, _)| c.clone()) else { break };
            codes.remove(&oldest);
        }
        codes.insert(code.clone(), now);
        code
    }

    /// Whether `code` is good now; a good code is spent by this call.
    pub fn redeem(&self, code: &str) -> bool {
        let mut codes = self.codes.lock().unwrap_or_else(|e| e.into_inner());
        let found = codes.keys().find(|c| constant_time_eq(c, code)).cloned();
        match found.and_then(|c| codes.remove(&c)) {
            Some(made) => made.elapsed() < Self::TTL,
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::Method;

    #[test]
    fn a_login_code_is_good_once() {
        let codes = LoginCodes::default();
        let a = codes.mint();
        let b = codes.mint();
        assert_ne!(a, b);
        assert_eq!(a.len(), 32);
        assert!(!codes.redeem("not-a-code"));
        assert!(!codes.redeem(""));
        assert!(codes.redeem(&a), "a fresh code logs in");
        assert!(!codes.redeem(&a), "a spent code does not");
        assert!(codes.redeem(&b), "other codes stay good");
        for _ in 0..200 {
            codes.mint();
        }
        assert!(codes.codes.lock().unwrap().len() <= 64, "the waiting codes are bounded");
    }

    #[test]
    fn a_hook_token_names_its_campaign_and_cannot_be_forged_or_moved() {
        let t = hook_token("master-1", "qr-abc123");
        assert!(t.starts_with("gfh1.qr-abc123."), "{t}");
        assert_eq!(grant("master-1", &t), Some(Grant::Hooks("qr-abc123".into())));
        assert_eq!(grant("master-1", "master-1"), Some(Grant::Full));
        assert_eq!(grant("master-2", &t), None, "another master token revokes it");
        let moved = t.replace("qr-abc123", "qr-other");
        assert_eq!(grant("master-1", &moved), None, "the MAC covers the campaign");
        assert_eq!(grant("master-1", "gfh1.qr-abc123.00"), None);
        assert_eq!(grant("master-1", ""), None);
    }

    #[test]
    fn the_hook_scope_is_hooks_evaluate_and_beam_of_one_campaign() {
        let c = "qr-abc123";
        assert!(hook_scope_allows(&Method::POST, "/api/v1/campaigns/qr-abc123/hooks/claude-code/stop", c));
        assert!(hook_scope_allows(&Method::POST, "/campaigns/qr-abc123/evaluate", c));
        assert!(hook_scope_allows(&Method::POST, "/campaigns/qr-abc123/beam/tag", c));
        assert!(hook_scope_allows(&Method::GET, "/campaigns/qr-abc123/beam", c));
        assert!(
            hook_scope_allows(&Method::POST, "/api/v1/campaigns/qr-abc123/claims", c),
            "the agent files its claims"
        );
        assert!(
            hook_scope_allows(&Method::POST, "/campaigns/qr-abc123/answers", c),
            "the agent files the evidence that answers a question"
        );
        for (m, p) in [
            (Method::GET, "/campaigns/qr-abc123/answers"),
            (Method::GET, "/campaigns/qr-abc123/questions/open"),
            (Method::POST, "/campaigns/qr-other/answers"),
            (Method::POST, "/campaigns/qr-other/hooks/claude-code/stop"),
            (Method::POST, "/campaigns/qr-abc123x/hooks/claude-code/stop"),
            (Method::POST, "/campaigns/qr-abc123/questions"),
            (Method::GET, "/campaigns/qr-abc123/questions"),
            (Method::GET, "/campaigns/qr-abc123"),
            (Method::POST, "/campaigns/qr-abc123/runs"),
            (Method::POST, "/campaigns/qr-abc123/runs/stop"),
            (Method::POST, "/campaigns/qr-abc123/beam/abandon"),
            // A person's verdict on a claim: never the agent's.
            (Method::POST, "/campaigns/qr-abc123/claims/7/accept"),
            (Method::POST, "/campaigns/qr-abc123/claims/7/reject"),
            (Method::GET, "/campaigns/qr-abc123/claims"),
            (Method::POST, "/campaigns/qr-other/claims"),
            (Method::GET, "/campaigns"),
            (Method::POST, "/campaigns"),
            (Method::GET, "/campaigns/qr-abc123/hooks/claude-code/stop"),
            (Method::POST, "/campaigns/qr-abc123/hooks/claude-code/stop/extra"),
        ] {
            assert!(!hook_scope_allows(&m, p, c), "{m} {p}");
        }
    }
}
