//! Settings of the daemon and of its clients: listen address, data dir,
//! database URL, and the API token, from flags, the environment and (for
//! the clients) the client config file, `~/.config/gadfly/config.toml`.

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
    /// `GADFLY_TOKEN` or `DATA_DIR/token`: the environment only, as the
    /// hook reads it. The hook never reads the client config file: it runs
    /// as the agent's user, who can write that file, and a file that sent
    /// the Stop hook elsewhere would make the daemon look unreachable.
    pub fn from_env() -> ClientConfig {
        let url = std::env::var("GADFLY_URL").ok().filter(|u| !u.is_empty()).unwrap_or_else(|| DEFAULT_URL.to_string());
        let token = std::env::var("GADFLY_TOKEN")
            .ok()
            .filter(|t| !t.is_empty())
            .or_else(|| std::fs::read_to_string(default_data_dir().join("token")).ok().map(|t| t.trim().to_string()));
        ClientConfig { url: url.trim_end_matches('/').to_string(), token }
    }

    /// What the CLI's commands use: each setting from the environment
    /// (`GADFLY_URL`, `GADFLY_TOKEN`), else from the client config file
    /// ([`ClientFile`]: `url`, `token_file`), else the built-in default
    /// (http://127.0.0.1:7878, `DATA_DIR/token`).
    pub fn load() -> anyhow::Result<ClientConfig> {
        let file = ClientFile::load()?;
        ClientConfig::layered(env_var("GADFLY_URL"), env_var("GADFLY_TOKEN"), file.as_ref())
    }

    /// The layering of [`ClientConfig::load`], given what the environment holds.
    pub fn layered(
        url: Option<String>,
        token: Option<String>,
        file: Option<&ClientFile>,
    ) -> anyhow::Result<ClientConfig> {
        let url = url
            .or_else(|| file.and_then(|f| f.url.as_ref()).map(|u| u.get_ref().clone()))
            .unwrap_or_else(|| DEFAULT_URL.to_string());
        let token = match (token, file) {
            (Some(t), _) => Some(t),
            (None, Some(f)) if f.token_file.is_some() => f.token()?,
            (None, _) => std::fs::read_to_string(default_data_dir().join("token")).ok().map(|t| t.trim().to_string()),
        };
        Ok(ClientConfig { url: url.trim_end_matches('/').to_string(), token })
    }
}

fn env_var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// Where the client config file is: `$GADFLY_CONFIG`, else
/// `~/.config/gadfly/config.toml` (the platform config dir).
pub fn client_file_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("GADFLY_CONFIG").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    dirs::config_dir().map(|d| d.join("gadfly").join("config.toml"))
}

/// The client config file: defaults for the CLI, below its flags and the
/// environment. Every key is optional; any other key is an error.
///
/// ```toml
/// url = "http://127.0.0.1:7878"        # as GADFLY_URL
/// token_file = "~/.local/share/gadfly/token"   # a file holding the token, as GADFLY_TOKEN holds it
/// campaign = "qr-cpu-1"                # the campaign of `gadfly eval`, `claim`, `answer`, `beam tag`
/// ```
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientFile {
    #[serde(default)]
    pub url: Option<toml::Spanned<String>>,
    #[serde(default)]
    pub token_file: Option<toml::Spanned<String>>,
    #[serde(default)]
    pub campaign: Option<toml::Spanned<String>>,
    /// The file, and its text, for errors that point into it.
    #[serde(skip)]
    source: (PathBuf, String),
}

impl ClientFile {
    /// The file at [`client_file_path`]; None when there is none.
    pub fn load() -> anyhow::Result<Option<ClientFile>> {
        let Some(path) = client_file_path() else { return Ok(None) };
        let named = std::env::var_os("GADFLY_CONFIG").is_some_and(|p| !p.is_empty());
        match std::fs::read_to_string(&path) {
            Ok(text) => ClientFile::parse(&path, &text).map(Some),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            // The default place under a home that is not this user's (a
            // command run as another user with the caller's HOME, as the
            // agent's user is): not this user's file. One named by
            // GADFLY_CONFIG must be read.
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied && !named => Ok(None),
            Err(e) => Err(e).with_context(|| format!("reading the client config file {}", path.display())),
        }
    }

    /// Parses the file's text; errors read `FILE:LINE:COLUMN: key `KEY`: ...`.
    pub fn parse(path: &Path, text: &str) -> anyhow::Result<ClientFile> {
        let mut file: ClientFile = match toml::from_str(text) {
            Ok(f) => f,
            Err(e) => {
                let span = e.span().unwrap_or(0..0);
                let message = e.message().lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>();
                let message = match key_at(text, span.start) {
                    Some(key) if !message.join(" ").contains(&format!("`{key}`")) => {
                        format!("key `{key}`: {}", message.join("; "))
                    }
                    _ => message.join("; "),
                };
                anyhow::bail!(located(path, text, span, &message));
            }
        };
        file.source = (path.to_path_buf(), text.to_string());
        for (key, value) in [("url", &file.url), ("token_file", &file.token_file), ("campaign", &file.campaign)] {
            if let Some(v) = value.as_ref().filter(|v| v.get_ref().trim().is_empty()) {
                anyhow::bail!(located(path, text, v.span(), &format!("key `{key}` is empty")));
            }
        }
        Ok(file)
    }

    /// The token held in `token_file`, trimmed: `~/` is the home folder,
    /// and a relative path is relative to the config file's folder.
    pub fn token(&self) -> anyhow::Result<Option<String>> {
        let Some(name) = &self.token_file else { return Ok(None) };
        let (file, text) = &self.source;
        let path = file.parent().unwrap_or(Path::new("")).join(expand_home(name.get_ref()));
        let here = |what: String| located(file, text, name.span(), &format!("key `token_file`: {what}"));
        match std::fs::read_to_string(&path) {
            Ok(t) if t.trim().is_empty() => anyhow::bail!(here(format!("{} is empty", path.display()))),
            Ok(t) => Ok(Some(t.trim().to_string())),
            Err(e) => anyhow::bail!(here(format!("cannot read {}: {e}", path.display()))),
        }
    }

    /// The default campaign, if the file names one.
    pub fn campaign(&self) -> Option<&str> {
        self.campaign.as_ref().map(|c| c.get_ref().as_str())
    }
}

/// `FILE:LINE:COLUMN: message`, as spec errors read.
fn located(path: &Path, text: &str, span: std::ops::Range<usize>, message: &str) -> String {
    let offset = span.start.min(text.len());
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let column = before[before.rfind('\n').map_or(0, |nl| nl + 1)..].chars().count() + 1;
    format!("{}:{line}:{column}: {message} (the client config file)", path.display())
}

/// The key of the `key = value` line at `offset`, if it is one.
fn key_at(text: &str, offset: usize) -> Option<String> {
    let offset = offset.min(text.len());
    let start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    let end = text[offset..].find('\n').map_or(text.len(), |i| offset + i);
    let (key, _) = text[start..end].split_once('=')?;
    let key = key.trim().trim_matches('"');
    (!key.is_empty() && !key.starts_with('[') && !key.starts_with('#')).then(|| key.to_string())
}

/// `~` and `~/...` are under the home folder; any other path is as written.
fn expand_home(p: &str) -> PathBuf {
    match (p.strip_prefix('~'), dirs::home_dir()) {
        (Some(rest), Some(home)) if rest.is_empty() || rest.starts_with('/') => home.join(rest.trim_start_matches('/')),
        _ => PathBuf::from(p),
    }
}

/// The campaign a command works on: the one given (its argument or flag,
/// else `GADFLY_CAMPAIGN`, which clap reads), else the client config
/// file's `campaign`; an error naming all three places when none says.
/// `how` names the command's own way, e.g. "as `gadfly eval ID`".
pub fn campaign_or_default(given: Option<String>, how: &str) -> anyhow::Result<String> {
    if let Some(id) = given.filter(|c| !c.is_empty()) {
        return Ok(id);
    }
    if let Some(id) = ClientFile::load()?.as_ref().and_then(ClientFile::campaign) {
        return Ok(id.to_string());
    }
    let file =
        client_file_path().map_or_else(|| "~/.config/gadfly/config.toml".to_string(), |p| p.display().to_string());
    anyhow::bail!("no campaign given: name it {how}, set GADFLY_CAMPAIGN, or write `campaign = \"ID\"` in {file}")
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

    fn file(text: &str) -> anyhow::Result<ClientFile> {
        ClientFile::parse(Path::new("/home/u/.config/gadfly/config.toml"), text)
    }

    #[test]
    fn the_client_file_alone_gives_url_token_and_campaign() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("token"), "abc123\n").unwrap();
        let f = file(&format!(
            "url = \"http://h:9/\"\ntoken_file = \"{}\"\ncampaign = \"c7\"\n",
            dir.path().join("token").display()
        ))
        .unwrap();
        let c = ClientConfig::layered(None, None, Some(&f)).unwrap();
        assert_eq!((c.url.as_str(), c.token.as_deref()), ("http://h:9", Some("abc123")));
        assert_eq!(f.campaign(), Some("c7"));
    }

    #[test]
    fn the_environment_wins_over_the_client_file() {
        let f = file("url = \"http://file:1\"\ntoken_file = \"/nonexistent/token\"\n").unwrap();
        let c = ClientConfig::layered(Some("http://env:2".into()), Some("t-env".into()), Some(&f)).unwrap();
        // The file's token_file is not read at all when GADFLY_TOKEN is set.
        assert_eq!((c.url.as_str(), c.token.as_deref()), ("http://env:2", Some("t-env")));
        let c = ClientConfig::layered(None, Some("t-env".into()), None).unwrap();
        assert_eq!(c.url, DEFAULT_URL);
    }

    #[test]
    fn a_bad_client_file_is_refused_at_its_line_and_key() {
        let e = file("url = \"http://h:1\"\ntokn_file = \"x\"\n").unwrap_err().to_string();
        assert!(e.starts_with("/home/u/.config/gadfly/config.toml:2:1: unknown field `tokn_file`"), "{e}");
        let e = file("url = \"http://h:1\"\ncampaign = 3\n").unwrap_err().to_string();
        assert!(e.starts_with("/home/u/.config/gadfly/config.toml:2:12: key `campaign`: invalid type"), "{e}");
        let e = file("url = \"http://h:1\nx").unwrap_err().to_string();
        assert!(e.starts_with("/home/u/.config/gadfly/config.toml:1:"), "{e}");
        let e = file("\n\ncampaign = \"\"").unwrap_err().to_string();
        assert!(e.starts_with("/home/u/.config/gadfly/config.toml:3:12: key `campaign` is empty"), "{e}");
        // A token file that cannot be read: the file, line and key that name it.
        let f = file("# mine\ntoken_file = \"/nonexistent/gadfly-token\"\n").unwrap();
        let e = ClientConfig::layered(None, None, Some(&f)).unwrap_err().to_string();
        assert!(
            e.starts_with(
                "/home/u/.config/gadfly/config.toml:2:14: key `token_file`: cannot read /nonexistent/gadfly-token"
            ),
            "{e}"
        );
    }

    #[test]
    fn a_relative_token_file_is_next_to_the_config_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("token"), "t-rel").unwrap();
        let f = ClientFile::parse(&dir.path().join("config.toml"), "token_file = \"token\"").unwrap();
        assert_eq!(f.token().unwrap().as_deref(), Some("t-rel"));
    }

    #[test]
    fn a_tilde_is_the_home_folder() {
        let home = dirs::home_dir().unwrap();
        assert_eq!(expand_home("~/t/token"), home.join("t/token"));
        assert_eq!(expand_home("~"), home);
        assert_eq!(expand_home("~other/token"), PathBuf::from("~other/token"));
        assert_eq!(expand_home("/abs/token"), PathBuf::from("/abs/token"));
    }
}
