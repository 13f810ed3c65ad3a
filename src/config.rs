//! Settings of the daemon and of its clients: listen address, data dir,
//! database URL, and the API token, from flags and the environment.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;

pub const DEFAULT_LISTEN: &str = "127.0.0.1:7878";
pub const DEFAULT_URL: &str = "http://127.0.0.1:7878";

/// `$GADFLY_DATA_DIR`, else the platform data dir (`~/.local/share/gadfly`).
pub fn default_data_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("GADFLY_DATA_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    dirs::data_dir().map(|d| d.join("gadfly")).unwrap_or_else(|| PathBuf::from(".gadfly-data"))
}

#[derive(Clone)]
pub struct DaemonConfig {
    pub listen: String,
    pub data_dir: PathBuf,
    pub database_url: Option<String>,
    /// A question bank folder to load and watch; None: the embedded bank.
    pub bank_dir: Option<PathBuf>,
    /// Listen on a non-loopback address and accept any Host header.
    pub allow_remote: bool,
}

impl std::fmt::Debug for DaemonConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DaemonConfig")
            .field("listen", &self.listen)
            .field("data_dir", &self.data_dir)
            .field("database_url", &self.database_url.as_deref().map(redact))
            .field("bank_dir", &self.bank_dir)
            .finish()
    }
}

impl DaemonConfig {
    pub fn database_url(&self) -> String {
        match &self.database_url {
            Some(u) if !u.is_empty() => u.clone(),
            _ => format!("sqlite:{}", self.data_dir.join("gadfly.db").display()),
        }
    }
}

/// Hides a password in a database URL.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            let creds = &url[s + 3..at];
            match creds.find(':') {
                Some(c) => format!("{}{}:***{}", &url[..s + 3], &creds[..c], &url[at..]),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    }
}

/// `bytes` random bytes as lowercase hex: tokens, login codes, call ids.
pub fn random_hex(bytes: usize) -> String {
    (0..bytes).map(|_| format!("{:02x}", rand::random::<u8>())).collect()
}

/// Reads the API token from `DATA_DIR/token`, creating it (mode 0600) on
/// first start.
pub fn ensure_token(data_dir: &Path) -> anyhow::Result<String> {
    std::fs::create_dir_all(data_dir).with_context(|| format!("creating data dir {}", data_dir.display()))?;
    let path = data_dir.join("token");
    if let Ok(existing) = std::fs::read_to_string(&path) {
        let t = existing.trim().to_string();
        if !t.is_empty() {
            return Ok(t);
        }
    }
    let token = random_hex(32);
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&path)
        .with_context(|| format!("writing {}", path.display()))?;
    f.write_all(token.as_bytes())?;
    f.sync_all()?;
    Ok(token)
}

/// Where a client finds the daemon and its token.
#[derive(Clone, Debug)]
pub struct ClientConfig {
    pub url: String,
    pub token: Option<String>,
}

impl ClientConfig {
    /// `GADFLY_URL` (default http://127.0.0.1:7878), and the token from
    /// `GADFLY_TOKEN` or `DATA_DIR/token`.
    pub fn from_env() -> ClientConfig {
        let url = std::env::var("GADFLY_URL").ok().filter(|u| !u.is_empty()).unwrap_or_else(|| DEFAULT_URL.to_string());
        let token = std::env::var("GADFLY_TOKEN")
            .ok()
            .filter(|t| !t.is_empty())
            .or_else(|| std::fs::read_to_string(default_data_dir().join("token")).ok().map(|t| t.trim().to_string()));
        ClientConfig { url: url.trim_end_matches('/').to_string(), token }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_passwords() {
        assert_eq!(redact("postgres://u:secret@h/db"), "postgres://u:***@h/db");
        assert_eq!(redact("sqlite:/x/y.db"), "sqlite:/x/y.db");
    }

    #[test]
    fn token_is_created_once_with_mode_0600() {
        let dir = tempfile::tempdir().unwrap();
        let t1 = ensure_token(dir.path()).unwrap();
        let t2 = ensure_token(dir.path()).unwrap();
        assert_eq!(t1, t2);
        assert_eq!(t1.len(), 64);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join("token")).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
