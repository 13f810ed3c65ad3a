//! The hook client's local spool: a hook call the daemon could not take
//! (down, restarting, unreachable) is written here, durably (the file and
//! its folder are fsynced before the hook answers the agent), and replayed
//! into the store at the next contact, with the call id it was first made
//! with, so a call replayed twice is still recorded once.
//!
//! One JSON file per call, named so that a listing sorts oldest first.
//! A hook that replays a file first renames it (`.claiming`), so two hooks
//! running at once never send the same file together; a file whose replay
//! failed is renamed back.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One hook call that was not recorded when it was made.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SpooledCall {
    pub campaign: String,
    pub agent: String,
    pub event: String,
    pub call_id: String,
    pub payload: Value,
    /// When the hook ran (RFC 3339).
    pub spooled_at: String,
    /// What the hook answered the agent on its own: `blocked` (a stop held
    /// back while the supervisor was unavailable), `allowed` (a stop let
    /// through: the campaign fails open, or the blocks ran out), `passed`
    /// (an observational event).
    pub outcome: String,
    /// Why the daemon was not reached.
    pub why: String,
}

/// `$GADFLY_SPOOL_DIR`, else `spool/` in the data dir.
pub fn dir() -> PathBuf {
    match std::env::var_os("GADFLY_SPOOL_DIR").filter(|d| !d.is_empty()) {
        Some(d) => PathBuf::from(d),
        None => crate::config::default_data_dir().join("spool"),
    }
}

/// Writes `call` into `dir` and makes it durable before returning.
pub fn write(dir: &Path, call: &SpooledCall) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating the spool folder {}", dir.display()))?;
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    let name = format!("{nanos:020}-{}.json", sanitize(&call.call_id));
    let tmp = dir.join(format!(".{name}.tmp"));
    let path = dir.join(&name);
    let mut f = std::fs::File::create(&tmp).with_context(|| format!("writing {}", tmp.display()))?;
    f.write_all(&serde_json::to_vec(call)?)?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, &path)?;
    std::fs::File::open(dir)?.sync_all()?;
    Ok(path)
}

fn sanitize(s: &str) -> String {
    s.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '-').take(64).collect()
}

/// The spooled calls waiting in `dir`, oldest first, with their files. A
/// file that cannot be read as a call is skipped and left in place (named
/// in the error list) so nothing is lost silently.
pub fn pending(dir: &Path) -> (Vec<(PathBuf, SpooledCall)>, Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return (vec![], vec![]) };
    let mut files: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json") && !is_hidden(p))
        .collect();
    files.sort();
    let mut out = Vec::new();
    let mut bad = Vec::new();
    for p in files {
        match std::fs::read(&p).map_err(anyhow::Error::from).and_then(|b| Ok(serde_json::from_slice(&b)?)) {
            Ok(call) => out.push((p, call)),
            Err(e) => bad.push(format!("{}: {e}", p.display())),
        }
    }
    (out, bad)
}

fn is_hidden(p: &Path) -> bool {
    p.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.'))
}

/// Takes a spooled file for replay (renames it); None when another hook
/// took it first.
pub fn claim(path: &Path) -> Option<PathBuf> {
    let name = path.file_name()?.to_string_lossy().to_string();
    let claimed = path.with_file_name(format!(".{name}.claiming-{}", std::process::id()));
    std::fs::rename(path, &claimed).ok().map(|_| claimed)
}

/// Puts a claimed file back (its replay failed).
pub fn release(claimed: &Path, original: &Path) {
    let _ = std::fs::rename(claimed, original);
}

/// Removes a replayed file.
pub fn done(claimed: &Path) {
    let _ = std::fs::remove_file(claimed);
    if let Some(parent) = claimed.parent() {
        if let Ok(d) = std::fs::File::open(parent) {
            let _ = d.sync_all();
        }
    }
}

/// How many stops of this session the hook blocked on its own, still
/// waiting in the spool (they count towards the campaign's bound).
pub fn blocked_stops(dir: &Path, campaign: &str, session: Option<&str>) -> usize {
    pending(dir)
        .0
        .iter()
        .filter(|(_, c)| {
            c.campaign == campaign
                && c.event == "stop"
                && c.outcome == "blocked"
                && c.payload.get("session_id").and_then(Value::as_str) == session
        })
        .count()
}

/// How far a replayed call's `spooled_at` may lie outside the campaign's
/// life (clocks of the hook's and the daemon's hosts may differ a little).
const CLOCK_SLACK: chrono::TimeDelta = chrono::TimeDelta::minutes(2);

/// Whether a replayed call reads as a hook's spool writes it. The hook
/// token that replays a call is the agent's too, so a replay is the
/// agent's word: it is taken only in the shape the hook gives it. A stop
/// is spooled `blocked` or `allowed`, every other event `passed`; the time
/// is RFC 3339, within the campaign's life (not before it was created, not
/// in the future); the reason is given and bounded. Anything
/// else was not written by gadfly's hook and is refused, naming the field.
pub fn check_replay(
    event: &str,
    outcome: &str,
    at: &str,
    why: &str,
    campaign_created: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<(), String> {
    let expected: &[&str] = if event == "stop" { &["blocked", "allowed"] } else { &["passed"] };
    if !expected.contains(&outcome) {
        return Err(format!(
            "`outcome` {outcome:?} is not what the hook spools for a {event} call (it spools {})",
            expected.join(" or ")
        ));
    }
    let at_time = chrono::DateTime::parse_from_rfc3339(at)
        .map_err(|e| format!("`spooled_at` {at:?} is not an RFC 3339 time: {e}"))?
        .with_timezone(&chrono::Utc);
    if at_time > now + CLOCK_SLACK {
        return Err(format!("`spooled_at` {at} is in the future (the daemon's clock says {})", now.to_rfc3339()));
    }
    if let Ok(created) = chrono::DateTime::parse_from_rfc3339(campaign_created) {
        if at_time < created.with_timezone(&chrono::Utc) - CLOCK_SLACK {
            return Err(format!("`spooled_at` {at} is before the campaign was created ({campaign_created})"));
        }
    }
    if why.trim().is_empty() || why.len() > 8192 {
        return Err("`why` must be the hook's reason (1 to 8192 bytes)".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_replay_is_taken_only_as_the_hook_spools_it() {
        use super::check_replay;
        let now = chrono::DateTime::parse_from_rfc3339("2026-12-06T12:00:00Z").unwrap().with_timezone(&chrono::Utc);
        let created = "2026-12-06T10:00:00.000Z";
        let ok = |e, o, at| check_replay(e, o, at, "connection refused", created, now);
        assert!(ok("stop", "blocked", "2026-12-06T11:59:00Z").is_ok());
        assert!(ok("stop", "allowed", "2026-12-06T10:30:00+01:00").is_err(), "before the campaign");
        assert!(ok("stop", "allowed", "2026-12-06T11:30:00+01:00").is_ok(), "any offset");
        assert!(ok("post-tool-use", "passed", "2026-12-06T11:00:00Z").is_ok());
        let e = ok("post-tool-use", "allowed", "2026-12-06T11:00:00Z").unwrap_err();
        assert!(e.contains("`outcome`") && e.contains("passed"), "{e}");
        assert!(ok("stop", "passed", "2026-12-06T11:00:00Z").is_err(), "a stop is never just passed");
        assert!(ok("subagent-stop", "allowed", "2026-12-06T11:00:00Z").is_err());
        let e = ok("stop", "allowed", "2027-01-01T00:00:00Z").unwrap_err();
        assert!(e.contains("future"), "{e}");
        assert!(ok("stop", "allowed", "2026-12-06T12:01:00Z").is_ok(), "within the clock slack");
        let e = ok("stop", "allowed", "2026-12-06T09:00:00Z").unwrap_err();
        assert!(e.contains("before the campaign"), "{e}");
        assert!(ok("stop", "allowed", "yesterday").unwrap_err().contains("RFC 3339"));
        assert!(check_replay("stop", "allowed", "2026-12-06T11:00:00Z", "", created, now).is_err());
        assert!(check_replay("stop", "allowed", "2026-12-06T11:00:00Z", &"x".repeat(9000), created, now).is_err());
    }

    use super::*;

    fn call(id: &str, outcome: &str) -> SpooledCall {
        SpooledCall {
            campaign: "c1".into(),
            agent: "claude-code".into(),
            event: "stop".into(),
            call_id: id.into(),
            payload: serde_json::json!({"session_id": "s1"}),
            spooled_at: "2026-12-02T00:00:00Z".into(),
            outcome: outcome.into(),
            why: "connection refused".into(),
        }
    }

    #[test]
    fn calls_are_kept_in_order_claimed_once_and_removed_when_done() {
        let dir = tempfile::tempdir().unwrap();
        let a = write(dir.path(), &call("aaa", "blocked")).unwrap();
        let b = write(dir.path(), &call("bbb", "allowed")).unwrap();
        let (list, bad) = pending(dir.path());
        assert!(bad.is_empty());
        assert_eq!(list.iter().map(|(_, c)| c.call_id.as_str()).collect::<Vec<_>>(), ["aaa", "bbb"]);
        assert_eq!(blocked_stops(dir.path(), "c1", Some("s1")), 1);
        assert_eq!(blocked_stops(dir.path(), "c1", Some("other")), 0);
        let claimed = claim(&a).unwrap();
        assert!(claim(&a).is_none(), "a file is claimed once");
        assert_eq!(pending(dir.path()).0.len(), 1, "a claimed file is not pending");
        release(&claimed, &a);
        assert_eq!(pending(dir.path()).0.len(), 2);
        let claimed = claim(&b).unwrap();
        done(&claimed);
        assert_eq!(pending(dir.path()).0.len(), 1);
    }

    #[test]
    fn a_damaged_file_is_reported_and_left_in_place() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), &call("aaa", "passed")).unwrap();
        std::fs::write(dir.path().join("00000000000000000001-bad.json"), "{not json").unwrap();
        let (list, bad) = pending(dir.path());
        assert_eq!(list.len(), 1);
        assert_eq!(bad.len(), 1);
        assert!(bad[0].contains("bad.json"), "{bad:?}");
        assert!(dir.path().join("00000000000000000001-bad.json").exists());
    }
}
