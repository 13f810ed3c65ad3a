//! Hook tokens: a campaign's scoped credential, `gfh1.<campaign>.<mac>`,
//! where the MAC is an HMAC-SHA256 of the campaign id under the daemon's
//! master token. The daemon mints one for each agent it spawns
//! (`app/run_loop.rs`) and for `GET /campaigns/{id}/hook-token`, and checks
//! the ones presented to the API (`api/auth.rs`), storing nothing; a new
//! master token revokes every hook token.

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// What every hook token starts with.
pub const PREFIX: &str = "gfh1.";

/// The MAC of `campaign` under `master` (hex).
pub fn mac(master: &str, campaign: &str) -> String {
    let mut m = Hmac::<Sha256>::new_from_slice(master.as_bytes()).expect("HMAC takes a key of any length");
    m.update(b"gadfly hook token v1\0");
    m.update(campaign.as_bytes());
    hex::encode(m.finalize().into_bytes())
}

/// The hook token of `campaign`.
pub fn hook_token(master: &str, campaign: &str) -> String {
    format!("{PREFIX}{campaign}.{}", mac(master, campaign))
}
