//! The daemon's identity: an Ed25519 key pair kept in the data dir, with
//! which the daemon signs every answer to a hook call (THREATS row 5: an
//! agent that kills the daemon and serves a fake on its port must not be
//! able to answer the Stop hook).
//!
//! The hook sends a fresh nonce with each call ([`NONCE_HEADER`]); the
//! daemon signs [`answer_message`] (the nonce, the campaign, the agent, the
//! event, the HTTP status and the exact body bytes) and sends the signature
//! in [`SIGNATURE_HEADER`]. The hook verifies it with the public key pinned
//! in its command line (`--daemon-key`, written by `gadfly attach` and
//! spawn mode, covered by the hook-settings fingerprint). A recorded answer
//! cannot be replayed (another nonce), nor moved to another campaign or
//! event, nor edited.
//!
//! Also here: the data dir's permissions (0700 folder, 0600 files), set at
//! every start.

use std::io::Write;
use std::path::Path;

use anyhow::Context;
use base64::Engine;
use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};

/// The private key (32-byte seed, base64), mode 0600.
pub const KEY_FILE: &str = "daemon-key";
/// The public key (base64), for `gadfly attach` on the daemon's machine.
pub const PUB_FILE: &str = "daemon-key.pub";
/// The hook's nonce for one call (fresh per hook run).
pub const NONCE_HEADER: &str = "x-gadfly-nonce";
/// The daemon's Ed25519 signature over [`answer_message`], base64.
pub const SIGNATURE_HEADER: &str = "x-gadfly-signature";

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// The daemon's signing key.
pub struct DaemonKey {
    key: SigningKey,
}

impl std::fmt::Debug for DaemonKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DaemonKey").field("public", &self.public_b64()).finish()
    }
}

impl DaemonKey {
    /// Reads `DATA_DIR/daemon-key`, creating it (mode 0600, with its public
    /// half beside it) on first start.
    pub fn load_or_create(data_dir: &Path) -> anyhow::Result<DaemonKey> {
        let path = data_dir.join(KEY_FILE);
        let key = match std::fs::read_to_string(&path) {
            Ok(text) => {
                let seed = B64
                    .decode(text.trim())
                    .ok()
                    .and_then(|b| <[u8; 32]>::try_from(b.as_slice()).ok())
                    .with_context(|| format!("{} is not a daemon key (32 bytes, base64); move it away to make a new one (hooks pinned to the old key must then be written again with `gadfly attach`)", path.display()))?;
                SigningKey::from_bytes(&seed)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let seed: [u8; 32] = rand::random();
                let key = SigningKey::from_bytes(&seed);
                use std::os::unix::fs::OpenOptionsExt;
                let tmp = data_dir.join(format!(".{KEY_FILE}.tmp"));
                let mut f = std::fs::OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .mode(0o600)
                    .open(&tmp)
                    .with_context(|| format!("writing {}", tmp.display()))?;
                f.write_all(B64.encode(seed).as_bytes())?;
                f.sync_all()?;
                drop(f);
                std::fs::rename(&tmp, &path).with_context(|| format!("writing {}", path.display()))?;
                key
            }
            Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
        };
        let key = DaemonKey { key };
        let public = data_dir.join(PUB_FILE);
        if std::fs::read_to_string(&public).map(|p| p.trim() != key.public_b64()).unwrap_or(true) {
            std::fs::write(&public, format!("{}\n", key.public_b64()))
                .with_context(|| format!("writing {}", public.display()))?;
        }
        Ok(key)
    }

    /// The public key, base64 (what `--daemon-key` takes).
    pub fn public_b64(&self) -> String {
        B64.encode(self.key.verifying_key().as_bytes())
    }

    /// The signature (base64) of one answer.
    pub fn sign_answer(
        &self,
        nonce: &str,
        campaign: &str,
        agent: &str,
        event: &str,
        status: u16,
        body: &[u8],
    ) -> String {
        let sig = self.key.sign(&answer_message(nonce, campaign, agent, event, status, body));
        B64.encode(sig.to_bytes())
    }
}

/// The public key in `DATA_DIR/daemon-key.pub`, if there is one.
pub fn read_public(data_dir: &Path) -> Option<String> {
    std::fs::read_to_string(data_dir.join(PUB_FILE)).ok().map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
}

/// Reads a pinned public key (base64 of 32 bytes).
pub fn parse_public(b64: &str) -> Result<VerifyingKey, String> {
    let bytes = B64.decode(b64.trim()).map_err(|e| format!("the pinned daemon key is not base64: {e}"))?;
    let bytes = <[u8; 32]>::try_from(bytes.as_slice())
        .map_err(|_| format!("the pinned daemon key is {} bytes, not 32", bytes.len()))?;
    VerifyingKey::from_bytes(&bytes).map_err(|e| format!("the pinned daemon key is not an Ed25519 key: {e}"))
}

/// The bytes signed for one answer: a domain tag, then the nonce, the
/// campaign, the agent, the event and the status, NUL-separated (none of
/// them may hold a NUL), then the body exactly as sent.
pub fn answer_message(nonce: &str, campaign: &str, agent: &str, event: &str, status: u16, body: &[u8]) -> Vec<u8> {
    let mut m = Vec::with_capacity(64 + body.len());
    m.extend_from_slice(b"gadfly-hook-answer-v1\0");
    for part in [nonce, campaign, agent, event, &status.to_string()] {
        m.extend_from_slice(part.as_bytes());
        m.push(0);
    }
    m.extend_from_slice(body);
    m
}

/// Checks an answer's signature; the error says what was wrong.
#[allow(clippy::too_many_arguments)]
pub fn verify_answer(
    key: &VerifyingKey,
    signature: Option<&str>,
    nonce: &str,
    campaign: &str,
    agent: &str,
    event: &str,
    status: u16,
    body: &[u8],
) -> Result<(), String> {
    let Some(sig) = signature else {
        return Err("the answer on the daemon's port is not signed: it does not come from the gadfly daemon whose key this hook pins (a stale or fake server?)".into());
    };
    let sig = B64
        .decode(sig.trim())
        .ok()
        .and_then(|b| <[u8; 64]>::try_from(b.as_slice()).ok())
        .map(|b| Signature::from_bytes(&b))
        .ok_or("the answer's signature is malformed")?;
    key.verify(&answer_message(nonce, campaign, agent, event, status, body), &sig).map_err(|_| {
        "the answer's signature does not match the daemon key this hook pins (another server on the daemon's port, a replayed answer, or a daemon with a new data dir: then run `gadfly attach` again)".to_string()
    })
}

/// A fresh nonce (16 random bytes, hex).
pub fn nonce() -> String {
    hex::encode(rand::random::<[u8; 16]>())
}

/// The files of the data dir that must be the daemon's alone.
pub const PRIVATE_FILES: &[&str] =
    &["gadfly.db", "gadfly.db-wal", "gadfly.db-shm", "gadfly.db-journal", "token", KEY_FILE];

/// Makes the data dir the daemon's alone: the folder 0700, the database,
/// token and key 0600 (existing files included). Creates the folder.
/// Returns what could not be fixed (e.g. a file of another owner).
pub fn secure_data_dir(data_dir: &Path) -> anyhow::Result<Vec<String>> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    if !data_dir.exists() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(data_dir)
            .with_context(|| format!("creating data dir {}", data_dir.display()))?;
    }
    let mut problems = Vec::new();
    let mut fix = |path: &Path, mode: u32| {
        let Ok(meta) = std::fs::symlink_metadata(path) else { return };
        if meta.file_type().is_symlink() {
            problems.push(format!("{} is a symbolic link; gadfly does not change its permissions", path.display()));
            return;
        }
        if meta.permissions().mode() & 0o077 != 0 {
            if let Err(e) = std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)) {
                problems.push(format!("{}: cannot make it mode {mode:o}: {e}", path.display()));
            }
        }
    };
    fix(data_dir, 0o700);
    for f in PRIVATE_FILES {
        fix(&data_dir.join(f), 0o600);
    }
    Ok(problems)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_verify_only_with_their_nonce_campaign_event_status_and_body() {
        let dir = tempfile::tempdir().unwrap();
        let k = DaemonKey::load_or_create(dir.path()).unwrap();
        let again = DaemonKey::load_or_create(dir.path()).unwrap();
        assert_eq!(k.public_b64(), again.public_b64(), "the key is kept");
        assert_eq!(read_public(dir.path()).as_deref(), Some(k.public_b64().as_str()));
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join(KEY_FILE)).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let public = parse_public(&k.public_b64()).unwrap();
        let sig = k.sign_answer("n1", "c", "claude-code", "stop", 200, b"{\"output\":null}");
        let ok = |sig: Option<&str>, nonce, campaign, event, status, body: &[u8]| {
            verify_answer(&public, sig, nonce, campaign, "claude-code", event, status, body).is_ok()
        };
        assert!(ok(Some(&sig), "n1", "c", "stop", 200, b"{\"output\":null}"));
        assert!(!ok(Some(&sig), "n2", "c", "stop", 200, b"{\"output\":null}"), "another nonce: a replay");
        assert!(!ok(Some(&sig), "n1", "d", "stop", 200, b"{\"output\":null}"), "another campaign");
        assert!(!ok(Some(&sig), "n1", "c", "subagent-stop", 200, b"{\"output\":null}"), "another event");
        assert!(!ok(Some(&sig), "n1", "c", "stop", 404, b"{\"output\":null}"), "another status");
        assert!(!ok(Some(&sig), "n1", "c", "stop", 200, b"{\"output\":{}}"), "another body");
        assert!(!ok(None, "n1", "c", "stop", 200, b"{\"output\":null}"), "unsigned");
        assert!(!ok(Some("AAAA"), "n1", "c", "stop", 200, b"{\"output\":null}"), "malformed");
        let other = DaemonKey::load_or_create(tempfile::tempdir().unwrap().path()).unwrap();
        let forged = other.sign_answer("n1", "c", "claude-code", "stop", 200, b"{\"output\":null}");
        assert!(!ok(Some(&forged), "n1", "c", "stop", 200, b"{\"output\":null}"), "another key");
        assert!(parse_public("not a key").is_err());
        assert!(parse_public(&B64.encode([1u8; 31])).is_err());
    }

    #[test]
    fn the_data_dir_is_made_private_at_start() {
        use std::os::unix::fs::PermissionsExt;
        let root = tempfile::tempdir().unwrap();
        let data = root.path().join("data");
        secure_data_dir(&data).unwrap();
        assert_eq!(std::fs::metadata(&data).unwrap().permissions().mode() & 0o777, 0o700);
        std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o755)).unwrap();
        for f in ["gadfly.db", "gadfly.db-wal", "token"] {
            std::fs::write(data.join(f), "x").unwrap();
            std::fs::set_permissions(data.join(f), std::fs::Permissions::from_mode(0o644)).unwrap();
        }
        assert!(secure_data_dir(&data).unwrap().is_empty());
        assert_eq!(std::fs::metadata(&data).unwrap().permissions().mode() & 0o777, 0o700);
        for f in ["gadfly.db", "gadfly.db-wal", "token"] {
            assert_eq!(std::fs::metadata(data.join(f)).unwrap().permissions().mode() & 0o777, 0o600, "{f}");
        }
    }
}
