//! `gadfly attach` / `gadfly detach` for Claude Code: gadfly's hooks merged
//! into DIR/.claude/settings.local.json, leaving every other hook and
//! setting as it was. Attaching twice changes nothing; detaching removes
//! exactly the hook entries gadfly added (recognised by their command).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use serde_json::{json, Map, Value};

use crate::campaign::GateSpec;

/// Claude Code hook events gadfly listens to, with the kebab-case name its
/// hook command takes and the timeout written for it (seconds).
pub const HOOKS: &[(&str, &str, u64)] = &[
    ("Stop", "stop", 600),
    ("SubagentStop", "subagent-stop", 30),
    ("PostToolUse", "post-tool-use", 30),
    ("UserPromptSubmit", "user-prompt-submit", 30),
    ("SessionStart", "session-start", 30),
    ("SessionEnd", "session-end", 10),
];

pub fn settings_path(dir: &Path) -> PathBuf {
    dir.join(".claude").join("settings.local.json")
}

/// The files attach writes into DIR (listed in the repository's
/// `info/exclude` by [`super::exclude`]).
pub fn written_files(dir: &Path) -> Vec<PathBuf> {
    vec![settings_path(dir)]
}

/// The hook command for one event of one campaign. The Stop hook carries
/// the campaign's `[gate]` policy, which it needs when the daemon is down.
pub fn hook_command(exe: &str, event: &str, campaign: &str, gate: GateSpec) -> String {
    hook_command_pinned(exe, event, campaign, gate, None)
}

/// [`hook_command`] with the daemon's public key pinned (`--daemon-key`):
/// the hook then takes only answers the daemon signed for its call. The
/// key is part of the command line, so the hook-settings fingerprint
/// covers it: an agent that swaps or drops it is caught like one that
/// edits the hook.
pub fn hook_command_pinned(exe: &str, event: &str, campaign: &str, gate: GateSpec, daemon_key: Option<&str>) -> String {
    let policy = if event == "stop" {
        // The deadline only where the timeout is not the default, so the
        // command of a default campaign reads as it always did.
        let deadline = if gate.stop_timeout_s == GateSpec::default().stop_timeout_s {
            String::new()
        } else {
            format!(" --deadline {}", gate.stop_deadline_s())
        };
        format!(
            " --fail {} --unavailable-blocks {}{deadline}",
            if gate.fail_closed { "closed" } else { "open" },
            gate.unavailable_blocks
        )
    } else {
        String::new()
    };
    let key_word = |k: &str| {
        if !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || "+/=".contains(c)) {
            k.to_string()
        } else {
            shell_word(k)
        }
    };
    let pin = daemon_key.map(|k| format!(" --daemon-key {}", key_word(k))).unwrap_or_default();
    // Before `hook`, so the command from `hook` on reads as it always did
    // (what outside checks and `gadfly detach` match).
    format!("{}{pin} hook claude-code {event}{policy} --campaign {campaign}", shell_word(exe))
}

fn shell_word(s: &str) -> String {
    if s.chars().all(|c| c.is_ascii_alphanumeric() || "/._-+:".contains(c)) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// Whether a hook entry is one of gadfly's for this campaign: a
/// `gadfly hook` command, or an HTTP hook posting to its hook route.
fn is_ours(hook: &Value, campaign: &str) -> bool {
    if let Some(command) = hook["command"].as_str() {
        return command.contains(" hook claude-code ") && command.ends_with(&format!("--campaign {campaign}"));
    }
    hook["url"].as_str().is_some_and(|u| u.contains(&format!("/api/v1/campaigns/{campaign}/hooks/claude-code/")))
}

/// Where HTTP hooks post: the daemon's URL. The hook token they show is
/// never written into the settings (a file in the agent's workspace, kept
/// in every snapshot): Claude Code fills the `Authorization` header from
/// the `GADFLY_TOKEN` variable of its own environment, the one the command
/// hooks read (`gadfly attach` says to export it; spawn mode sets it).
#[derive(Debug, Clone)]
pub struct HttpHooks {
    pub url: String,
}

/// The environment variable an HTTP hook's `Authorization` header is
/// filled from (Claude Code's `allowedEnvVars`).
pub const TOKEN_VAR: &str = "GADFLY_TOKEN";

/// The events that go over HTTP with `[hooks] transport = "http"`: the
/// frequent ones, which record and may carry a queued question. Never the
/// stop gate, which must fail closed and spool, nor SessionEnd; nor
/// SessionStart, for which Claude Code (2.1.332) skips HTTP hooks.
pub const HTTP_EVENTS: &[&str] = &["PostToolUse", "UserPromptSubmit"];

/// gadfly's hooks as a settings object (what spawn mode passes with
/// --settings), all as `gadfly hook` commands.
pub fn hooks_settings(exe: &str, campaign: &str, gate: GateSpec) -> Value {
    hooks_settings_with(exe, campaign, gate, None)
}

/// gadfly's hooks, the [`HTTP_EVENTS`] as HTTP hooks when `http` is given.
pub fn hooks_settings_with(exe: &str, campaign: &str, gate: GateSpec, http: Option<&HttpHooks>) -> Value {
    hooks_settings_pinned(exe, campaign, gate, http, None)
}

/// [`hooks_settings_with`], every hook command pinned to the daemon's
/// public key when `daemon_key` is given.
pub fn hooks_settings_pinned(
    exe: &str,
    campaign: &str,
    gate: GateSpec,
    http: Option<&HttpHooks>,
    daemon_key: Option<&str>,
) -> Value {
    let mut hooks = Map::new();
    for (event, kebab, timeout) in HOOKS {
        let timeout = if *event == "Stop" { u64::from(gate.stop_timeout_s) } else { *timeout };
        let hook = match http {
            Some(h) if HTTP_EVENTS.contains(event) => json!({
                "type": "http",
                "url": format!("{}/api/v1/campaigns/{campaign}/hooks/claude-code/{kebab}?answer=agent", h.url.trim_end_matches('/')),
                "headers": {"Authorization": format!("Bearer ${TOKEN_VAR}")},
                "allowedEnvVars": [TOKEN_VAR],
                "timeout": 10,
            }),
            _ => {
                json!({"type": "command", "command": hook_command_pinned(exe, kebab, campaign, gate, daemon_key), "timeout": timeout})
            }
        };
        let mut group = json!({"hooks": [hook]});
        if *event == "PostToolUse" {
            group["matcher"] = json!("*");
        }
        hooks.insert(event.to_string(), json!([group]));
    }
    json!({"hooks": hooks})
}

/// Merges gadfly's hooks into `settings` (idempotent).
pub fn merge(
    settings: &mut Value,
    exe: &str,
    campaign: &str,
    gate: GateSpec,
    http: Option<&HttpHooks>,
) -> anyhow::Result<()> {
    merge_pinned(settings, exe, campaign, gate, http, None)
}

/// [`merge`] with the hook commands pinned to the daemon's public key.
pub fn merge_pinned(
    settings: &mut Value,
    exe: &str,
    campaign: &str,
    gate: GateSpec,
    http: Option<&HttpHooks>,
    daemon_key: Option<&str>,
) -> anyhow::Result<()> {
    if !settings.is_object() {
        bail!("the settings file must hold a JSON object");
    }
    // gadfly's entries are rewritten as they should be (an edited one is
    // restored), everything else is left as it was.
    remove(settings, campaign);
    let obj = settings.as_object_mut().context("the settings file must hold a JSON object")?;
    let hooks = obj.entry("hooks").or_insert_with(|| json!({}));
    let hooks = hooks.as_object_mut().context("`hooks` in the settings file must be an object")?;
    let ours = hooks_settings_pinned(exe, campaign, gate, http, daemon_key);
    for (event, groups) in ours["hooks"].as_object().into_iter().flatten() {
        let list = hooks.entry(event.clone()).or_insert_with(|| json!([]));
        let list = list.as_array_mut().with_context(|| format!("`hooks.{event}` must be an array"))?;
        let present = list.iter().any(|g| g["hooks"].as_array().into_iter().flatten().any(|h| is_ours(h, campaign)));
        if !present {
            list.extend(groups.as_array().cloned().unwrap_or_default());
        }
    }
    Ok(())
}

/// Removes the hook entries gadfly added for `campaign`; returns how many.
pub fn remove(settings: &mut Value, campaign: &str) -> usize {
    let mut removed = 0;
    let Some(hooks) = settings.get_mut("hooks").and_then(Value::as_object_mut) else { return 0 };
    for list in hooks.values_mut() {
        let Some(groups) = list.as_array_mut() else { continue };
        for g in groups.iter_mut() {
            if let Some(hs) = g.get_mut("hooks").and_then(Value::as_array_mut) {
                let before = hs.len();
                hs.retain(|h| !is_ours(h, campaign));
                removed += before - hs.len();
            }
        }
        groups.retain(|g| g.get("hooks").and_then(Value::as_array).is_none_or(|hs| !hs.is_empty()));
    }
    hooks.retain(|_, list| list.as_array().is_none_or(|l| !l.is_empty()));
    if hooks.is_empty() {
        if let Some(obj) = settings.as_object_mut() {
            obj.remove("hooks");
        }
    }
    removed
}

fn read(path: &Path) -> anyhow::Result<Value> {
    match std::fs::read_to_string(path) {
        Ok(text) if text.trim().is_empty() => Ok(json!({})),
        Ok(text) => serde_json::from_str(&text).with_context(|| {
            format!("{} is not valid JSON; fix or move it, gadfly will not overwrite it", path.display())
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(json!({})),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

fn write(path: &Path, value: &Value) -> anyhow::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let tmp = path.with_extension("json.gadfly-tmp");
    std::fs::write(&tmp, serde_json::to_string_pretty(value)? + "\n")?;
    std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// Attaches: writes the hooks into DIR/.claude/settings.local.json.
pub fn attach(
    dir: &Path,
    exe: &str,
    campaign: &str,
    gate: GateSpec,
    http: Option<&HttpHooks>,
) -> anyhow::Result<PathBuf> {
    attach_pinned(dir, exe, campaign, gate, http, None)
}

/// [`attach`] with the hook commands pinned to the daemon's public key.
pub fn attach_pinned(
    dir: &Path,
    exe: &str,
    campaign: &str,
    gate: GateSpec,
    http: Option<&HttpHooks>,
    daemon_key: Option<&str>,
) -> anyhow::Result<PathBuf> {
    if !dir.is_dir() {
        bail!("{} is not a directory", dir.display());
    }
    let path = settings_path(dir);
    let mut settings = read(&path)?;
    merge_pinned(&mut settings, exe, campaign, gate, http, daemon_key)?;
    write(&path, &settings)?;
    Ok(path)
}

/// Detaches: removes exactly what attach added; returns how many hooks.
pub fn detach(dir: &Path, campaign: &str) -> anyhow::Result<usize> {
    let path = settings_path(dir);
    if !path.exists() {
        return Ok(0);
    }
    let mut settings = read(&path)?;
    let n = remove(&mut settings, campaign);
    write(&path, &settings)?;
    Ok(n)
}

/// Whether DIR's settings still hold a hook of gadfly's, for any campaign.
pub fn has_gadfly_hooks(dir: &Path) -> anyhow::Result<bool> {
    let settings = read(&settings_path(dir))?;
    let hooks = settings["hooks"].as_object().into_iter().flatten().flat_map(|(_, groups)| {
        groups.as_array().into_iter().flatten().flat_map(|g| g["hooks"].as_array().into_iter().flatten())
    });
    let ours = |h: &Value| {
        h["command"].as_str().is_some_and(|c| c.contains(" hook claude-code "))
            || h["url"].as_str().is_some_and(|u| u.contains("/hooks/claude-code/"))
    };
    Ok(hooks.into_iter().any(ours))
}

/// The hooks gadfly installed for a campaign, as recorded when it wrote
/// them: checked again at every SessionStart and stop, so an agent that
/// edits them (or disables hooks, or swaps the hook binary) is caught. The
/// plain data is the event vocabulary's (`hooks.install` carries it); its
/// reading and checking are here.
pub use crate::events::Installed;

impl Installed {
    pub fn new(kind: &str, settings_path: &Path, dir: &Path, exe: &Path, campaign: &str) -> anyhow::Result<Installed> {
        let mut i = Installed {
            kind: kind.to_string(),
            settings_path: settings_path.to_path_buf(),
            dir: dir.to_path_buf(),
            exe: exe.to_path_buf(),
            exe_sha256: file_sha256(exe)?,
            fingerprint: String::new(),
        };
        i.fingerprint = i.current_fingerprint(campaign)?;
        Ok(i)
    }

    /// What gadfly's hooks look like now: its own entries (attach) or its
    /// whole settings file (spawn), and any `disableAllHooks` in the
    /// project's settings, hashed.
    pub fn current_fingerprint(&self, campaign: &str) -> anyhow::Result<String> {
        let ours = match self.kind.as_str() {
            "spawn" => Value::String(
                std::fs::read_to_string(&self.settings_path)
                    .with_context(|| format!("reading {}", self.settings_path.display()))?,
            ),
            _ => {
                let settings = read(&self.settings_path)?;
                let mut entries = Vec::new();
                for (event, groups) in settings["hooks"].as_object().into_iter().flatten() {
                    for g in groups.as_array().into_iter().flatten() {
                        for h in g["hooks"].as_array().into_iter().flatten() {
                            if is_ours(h, campaign) {
                                entries.push(json!([event, g["matcher"], h]));
                            }
                        }
                    }
                }
                entries.sort_by_key(|e| e.to_string());
                Value::Array(entries)
            }
        };
        let mut disabled = Vec::new();
        for name in ["settings.json", "settings.local.json"] {
            let p = self.dir.join(".claude").join(name);
            if let Ok(v) = read(&p) {
                disabled.push(json!([name, v.get("disableAllHooks")]));
            }
        }
        let canonical = json!({"ours": ours, "disableAllHooks": disabled}).to_string();
        use sha2::Digest;
        Ok(hex::encode(sha2::Sha256::digest(canonical.as_bytes())))
    }

    /// What changed since gadfly installed the hooks, as sentences (none
    /// when nothing did).
    pub fn changes(&self, campaign: &str, check_exe: bool) -> Vec<String> {
        let mut out = Vec::new();
        match self.current_fingerprint(campaign) {
            Ok(f) if f == self.fingerprint => {}
            Ok(_) => out.push(format!(
                "the hook settings gadfly wrote ({}) were changed, or hooks were disabled in {}",
                self.settings_path.display(),
                self.dir.join(".claude").display()
            )),
            Err(e) => out.push(format!("the hook settings gadfly wrote cannot be read: {e:#}")),
        }
        if check_exe {
            match file_sha256(&self.exe) {
                Ok(h) if h == self.exe_sha256 => {}
                Ok(_) => out.push(format!("the hook binary {} was replaced or modified", self.exe.display())),
                Err(e) => out.push(format!("the hook binary cannot be read: {e:#}")),
            }
        }
        out
    }
}

/// A file's SHA-256, hashed again only when its identity changed: device,
/// inode, size, modification time and status-change time. The last is set
/// by the kernel on any write, rename or chmod and cannot be set back by a
/// user, so a binary modified in place is always hashed again. (Hashing the
/// 20 MB hook binary at every SessionStart cost tens of milliseconds of CPU
/// beside the agent.)
fn file_sha256(path: &Path) -> anyhow::Result<String> {
    use std::os::unix::fs::MetadataExt;
    type Identity = (u64, u64, u64, i64, i64, i64, i64);
    static HASHED: std::sync::Mutex<Vec<(std::path::PathBuf, Identity, String)>> = std::sync::Mutex::new(Vec::new());
    let identity = |m: &std::fs::Metadata| -> Identity {
        (m.dev(), m.ino(), m.size(), m.mtime(), m.mtime_nsec(), m.ctime(), m.ctime_nsec())
    };
    let mut f = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let before = identity(&f.metadata()?);
    if let Some((_, _, h)) =
        HASHED.lock().expect("hash cache poisoned").iter().find(|(p, id, _)| p == path && *id == before)
    {
        return Ok(h.clone());
    }
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    std::io::copy(&mut f, &mut h)?;
    let hash = hex::encode(h.finalize());
    // Kept only when nothing changed while it was read, and when its
    // status-change time is over a second old: file times advance by clock
    // ticks, so a change in the same tick as the read would look the same.
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64);
    let settled = now.is_ok_and(|n| n - before.5 >= 2);
    if settled && identity(&std::fs::metadata(path)?) == before {
        let mut cache = HASHED.lock().expect("hash cache poisoned");
        cache.retain(|(p, _, _)| p != path);
        if cache.len() >= 64 {
            cache.remove(0);
        }
        cache.push((path.to_path_buf(), before, hash.clone()));
    }
    Ok(hash)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_transport_posts_the_frequent_hooks_and_keeps_the_gate_a_command() {
        let dir = tempfile::tempdir().unwrap();
        let http = HttpHooks { url: "http://127.0.0.1:7300/".into() };
        let path = settings_path(dir.path());
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, r#"{"hooks": {"PostToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "lint.sh"}]}]}}"#).unwrap();
        attach(dir.path(), "/opt/gadfly", "qr-1", GateSpec::default(), Some(&http)).unwrap();
        attach(dir.path(), "/opt/gadfly", "qr-1", GateSpec::default(), Some(&http)).unwrap();
        let s = read(&path).unwrap();
        let post = &s["hooks"]["PostToolUse"];
        assert_eq!(post.as_array().unwrap().len(), 2, "the user's hook and gadfly's, once: {post}");
        let ours = &post[1]["hooks"][0];
        assert_eq!(ours["type"], "http");
        assert_eq!(
            ours["url"],
            "http://127.0.0.1:7300/api/v1/campaigns/qr-1/hooks/claude-code/post-tool-use?answer=agent"
        );
        // No token in the file: Claude Code fills it from its environment.
        assert_eq!(ours["headers"]["Authorization"], "Bearer $GADFLY_TOKEN");
        assert_eq!(ours["allowedEnvVars"], json!(["GADFLY_TOKEN"]));
        assert!(!std::fs::read_to_string(&path).unwrap().contains("gfh1."), "no hook token in the workspace");
        for event in ["Stop", "SubagentStop", "SessionEnd", "SessionStart"] {
            let h = &s["hooks"][event][0]["hooks"][0];
            assert_eq!(h["type"], "command", "{event} stays a gadfly hook command: {h}");
        }
        assert_eq!(s["hooks"]["UserPromptSubmit"][0]["hooks"][0]["type"], "http");
        // The fingerprint covers the HTTP entries too: editing one shows.
        let installed = Installed {
            kind: "attach".into(),
            settings_path: path.clone(),
            dir: dir.path().to_path_buf(),
            exe: "/opt/gadfly".into(),
            exe_sha256: String::new(),
            fingerprint: String::new(),
        };
        let before = installed.current_fingerprint("qr-1").unwrap();
        let edited = std::fs::read_to_string(&path).unwrap().replace("post-tool-use?answer=agent", "nowhere");
        std::fs::write(&path, edited).unwrap();
        assert_ne!(installed.current_fingerprint("qr-1").unwrap(), before);
        assert_eq!(detach(dir.path(), "qr-1").unwrap(), 6, "every entry gadfly wrote, HTTP or command");
        let left = read(&path).unwrap();
        assert_eq!(left["hooks"]["PostToolUse"][0]["hooks"][0]["command"], "lint.sh");
    }

    #[test]
    fn a_file_changed_in_place_is_hashed_again_even_with_its_old_times_and_size() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gadfly");
        std::fs::write(&path, b"binary one").unwrap();
        // A file changed in the last seconds is not cached (clock ticks).
        std::thread::sleep(std::time::Duration::from_millis(2100));
        let first = file_sha256(&path).unwrap();
        assert_eq!(file_sha256(&path).unwrap(), first, "unchanged: same hash (from the cache)");
        // Same size, and the modification time put back as it was.
        let mtime = std::fs::metadata(&path).unwrap().modified().unwrap();
        std::fs::write(&path, b"binary two").unwrap();
        std::fs::File::options().write(true).open(&path).unwrap().set_modified(mtime).unwrap();
        assert_ne!(file_sha256(&path).unwrap(), first, "the status-change time gives the edit away");
    }

    #[test]
    fn attach_merges_is_idempotent_and_detach_restores() {
        let dir = tempfile::tempdir().unwrap();
        let path = settings_path(dir.path());
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let original = json!({
            "permissions": {"allow": ["Bash(make:*)"]},
            "hooks": {
                "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
                "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "guard.sh"}]}]
            }
        });
        std::fs::write(&path, serde_json::to_string_pretty(&original).unwrap()).unwrap();
        attach(dir.path(), "/opt/gadfly/bin/gadfly", "qr-1", GateSpec::default(), None).unwrap();
        let once = std::fs::read_to_string(&path).unwrap();
        attach(dir.path(), "/opt/gadfly/bin/gadfly", "qr-1", GateSpec::default(), None).unwrap();
        assert_eq!(once, std::fs::read_to_string(&path).unwrap(), "attach is idempotent");
        let v: Value = serde_json::from_str(&once).unwrap();
        assert_eq!(v["permissions"], original["permissions"]);
        assert_eq!(v["hooks"]["Stop"].as_array().unwrap().len(), 2, "the user's Stop hook stays");
        assert_eq!(
            v["hooks"]["Stop"][1]["hooks"][0]["command"],
            "/opt/gadfly/bin/gadfly hook claude-code stop --fail closed --unavailable-blocks 3 --campaign qr-1"
        );
        assert_eq!(v["hooks"]["Stop"][1]["hooks"][0]["timeout"], 600);
        assert_eq!(v["hooks"]["PostToolUse"][0]["matcher"], "*");
        for (event, _, _) in HOOKS {
            assert!(v["hooks"][event].is_array(), "{event}");
        }
        assert_eq!(detach(dir.path(), "qr-1").unwrap(), HOOKS.len());
        let back: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(back, original, "detach removes exactly what attach added");
    }

    #[test]
    fn every_hook_command_pins_the_daemon_key_before_the_campaign() {
        let key = "MCowBQYDK2VwAyEA+abc/def=";
        let s = hooks_settings_pinned("/opt/gadfly", "qr-1", GateSpec::default(), None, Some(key));
        for (event, kebab, _) in HOOKS {
            let command = s["hooks"][event][0]["hooks"][0]["command"].as_str().unwrap();
            assert!(
                command.starts_with(&format!("/opt/gadfly --daemon-key {key} hook claude-code {kebab}")),
                "{command}"
            );
            assert!(command.ends_with(" --campaign qr-1"), "{command}");
            assert!(is_ours(&s["hooks"][event][0]["hooks"][0], "qr-1"), "detach still finds it: {command}");
        }
        let odd = hook_command_pinned("gadfly", "stop", "c", GateSpec::default(), Some("a b"));
        assert_eq!(
            odd,
            "gadfly --daemon-key 'a b' hook claude-code stop --fail closed --unavailable-blocks 3 --campaign c"
        );
    }

    /// Issue 31: whatever Stop timeout the campaign sets, the hook is told
    /// to answer within 90% of it, so the agent never kills it first.
    #[test]
    fn the_stop_timeout_and_the_hooks_deadline_are_written_together() {
        let gate = GateSpec { stop_timeout_s: 25, ..GateSpec::default() };
        let s = hooks_settings("gadfly", "c", gate);
        let stop = &s["hooks"]["Stop"][0]["hooks"][0];
        assert_eq!(stop["timeout"], 25);
        assert_eq!(
            stop["command"],
            "gadfly hook claude-code stop --fail closed --unavailable-blocks 3 --deadline 22.5 --campaign c"
        );
        assert!(is_ours(stop, "c"), "detach still finds it");
        assert_eq!(s["hooks"]["PostToolUse"][0]["hooks"][0]["timeout"], 30, "other hooks keep theirs");
        // The deadline the command names parses back as the CLI reads it.
        let flag = stop["command"].as_str().unwrap().split("--deadline ").nth(1).unwrap();
        let d: f64 = flag.split(' ').next().unwrap().parse().unwrap();
        assert!(d < 25.0 && d >= 20.0, "{d}");
    }

    #[test]
    fn another_campaigns_hooks_are_left_alone_and_bad_json_is_refused() {
        let mut s = json!({});
        merge(&mut s, "gadfly", "a", GateSpec::default(), None).unwrap();
        merge(&mut s, "gadfly", "b", GateSpec::default(), None).unwrap();
        assert_eq!(remove(&mut s, "a"), HOOKS.len());
        assert_eq!(
            s["hooks"]["Stop"][0]["hooks"][0]["command"],
            "gadfly hook claude-code stop --fail closed --unavailable-blocks 3 --campaign b"
        );
        assert_eq!(
            s["hooks"]["PostToolUse"][0]["hooks"][0]["command"],
            "gadfly hook claude-code post-tool-use --campaign b"
        );
        let dir = tempfile::tempdir().unwrap();
        let path = settings_path(dir.path());
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, "{ not json").unwrap();
        let err = attach(dir.path(), "gadfly", "a", GateSpec::default(), None).unwrap_err();
        assert!(format!("{err:#}").contains("is not valid JSON"), "{err:#}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{ not json", "nothing overwritten");
    }
}
