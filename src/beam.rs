//! A beam of candidates from different algorithm families, kept alive at
//! once so that one compile error does not kill a promising direction.
//! Candidates are git refs in the workspace under `refs/heads/beam/FAMILY`
//! (declared with `gadfly beam tag FAMILY`), or branches whose head commit
//! carries a `Gadfly-Family: NAME` trailer. Each candidate commit is
//! evaluated once; a family keeps its best and its last good evaluation
//! when its latest build fails, and is abandoned only by an explicit
//! decision recorded with its reason.
//!
//! This file is the pure and git part: the `[beam]` settings, listing and
//! tagging candidate refs (read and written as files, listed by git on a
//! private view of the workspace's repository, never in it), and the family and point
//! types. Registering, evaluating, the beam as stored, its events and its
//! questions (everything that needs the store) are `crate::app::beam`.

use std::path::Path;

use anyhow::{anyhow, bail};
use serde::{Deserialize, Serialize};

use crate::campaign::CampaignSpec;
use crate::evaluation::Evaluation;
use crate::git::WorkspaceView;

/// `[beam]` in the campaign spec; the beam is on when the section exists.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    #[serde(default = "default_min")]
    pub min_families: usize,
    /// An abandoned family whose best is within this share of the beam's
    /// best gets a question asking to revisit it.
    #[serde(default = "default_revisit")]
    pub revisit_within: f64,
}

fn default_min() -> usize {
    3
}
fn default_revisit() -> f64 {
    0.9
}

pub fn settings(spec: &CampaignSpec) -> anyhow::Result<Option<Settings>> {
    match spec.extra.get("beam") {
        None => Ok(None),
        Some(v) => serde_json::from_value(v.clone()).map(Some).map_err(|e| anyhow!("campaign spec [beam]: {e}")),
    }
}

/// Bank entries that ask for a new family, and to revisit a dropped one.
pub const NEW_FAMILY_QUESTIONS: &[&str] = &["algo-001", "process-001"];
pub const REVISIT_QUESTIONS: &[&str] = &["process-002"];

pub fn valid_family(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "-_.".contains(c))
        && !name.starts_with(['-', '.'])
}

/// Points `refs/heads/beam/FAMILY` at the commit `from` names (default the
/// workspace's HEAD). `from` is resolved in a view of the workspace's
/// repository (no git runs in the repository itself: [`WorkspaceView`]) and
/// the ref is written as a file, never through a link.
pub fn tag(ws: &Path, family: &str, from: &str) -> anyhow::Result<(String, String)> {
    if !valid_family(family) {
        bail!("family `{family}` must be lowercase letters, digits, `-`, `_` or `.` (at most 64)");
    }
    if from.starts_with('-') || from.is_empty() || from.len() > 256 || from.chars().any(char::is_control) {
        bail!("`{from}` is not a revision gadfly resolves (a ref name or a commit id)");
    }
    let view = WorkspaceView::open(ws)?;
    let commit = view
        .run(&["rev-parse", "--verify", "-q", &format!("{from}^{{commit}}")])
        .ok()
        .filter(|c| !c.is_empty())
        .ok_or_else(|| anyhow!("`{from}` is not a commit in the workspace (commit the candidate first)"))?;
    let r = format!("refs/heads/beam/{family}");
    view.write_ref(&r, &commit)?;
    Ok((r, commit))
}

/// The commit and tree a ref points at, if it exists.
pub fn resolve(ws: &Path, r: &str) -> Option<(String, String)> {
    if !crate::git::valid_ref_name(r) {
        return None;
    }
    let view = WorkspaceView::open(ws).ok()?;
    let commit = view.run(&["rev-parse", "--verify", "-q", &format!("{r}^{{commit}}")]).ok()?;
    let tree = view.run(&["rev-parse", "--verify", "-q", &format!("{r}^{{tree}}")]).ok()?;
    Some((commit, tree))
}

/// Every candidate ref: (family, ref, commit, tree).
pub fn candidates(ws: &Path) -> anyhow::Result<Vec<(String, String, String, String)>> {
    let view = WorkspaceView::open(ws)?;
    let mut out = Vec::new();
    let listing = view.run(&["for-each-ref", "--format=%(refname) %(objectname) %(tree)", "refs/heads/"])?;
    for line in listing.lines() {
        let parts: Vec<&str> = line.split(' ').collect();
        let [r, commit, tree] = parts[..] else { continue };
        if let Some(family) = r.strip_prefix("refs/heads/beam/") {
            out.push((family.to_string(), r.to_string(), commit.to_string(), tree.to_string()));
            continue;
        }
        let trailer = view
            .run(&["log", "-1", "--no-show-signature", "--format=%(trailers:key=Gadfly-Family,valueonly)", r])
            .unwrap_or_default();
        if let Some(family) = trailer.lines().map(str::trim).find(|f| valid_family(f)) {
            if !out.iter().any(|(f, ..)| f == family) {
                out.push((family.to_string(), r.to_string(), commit.to_string(), tree.to_string()));
            }
        }
    }
    Ok(out)
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Point {
    pub evaluation_id: i64,
    pub commit: String,
    pub holds: bool,
    pub geomean_speedup: Option<f64>,
    pub built: bool,
    pub failing: usize,
    /// A scenario incorrect or missing, or the evaluation failed: its
    /// figures are no result, never the family's best.
    #[serde(default)]
    pub incorrect: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FamilyView {
    pub family: String,
    pub git_ref: String,
    /// `alive` or `abandoned`.
    pub status: String,
    pub reason: Option<String>,
    pub best: Option<Point>,
    pub last: Option<Point>,
    pub last_good: Option<Point>,
    /// Said when the latest evaluation failed to build or measure.
    pub note: Option<String>,
    pub history: Vec<Point>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Beam {
    pub enabled: bool,
    pub min_families: usize,
    pub live: usize,
    pub families: Vec<FamilyView>,
}

/// A family's point for one evaluation of one of its commits.
pub fn point(id: i64, commit: &str, e: &Evaluation) -> Point {
    Point {
        evaluation_id: id,
        commit: commit.to_string(),
        holds: e.verdict.holds,
        geomean_speedup: e.verdict.geomean_speedup,
        built: e.build.as_ref().is_none_or(|b| b.ok) && e.run.as_ref().is_some_and(|r| r.ok),
        failing: e.verdict.failing_count,
        incorrect: e.incorrect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn tags_and_trailers_declare_candidates() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        let g = |args: &[&str]| {
            let ok = Command::new("git")
                .args(["-c", "user.name=t", "-c", "user.email=t@t"])
                .args(args)
                .current_dir(ws)
                .status()
                .unwrap()
                .success();
            assert!(ok, "{args:?}");
        };
        g(&["init", "-q", "-b", "main"]);
        std::fs::write(ws.join("k.c"), "int v = 1;\n").unwrap();
        g(&["add", "-A"]);
        g(&["commit", "-qm", "householder"]);
        let (r, _) = tag(ws, "householder", "HEAD").unwrap();
        assert_eq!(r, "refs/heads/beam/householder");
        g(&["checkout", "-qb", "try-cholesky"]);
        std::fs::write(ws.join("k.c"), "int v = 2;\n").unwrap();
        g(&["commit", "-qam", "cholesky variant\n\nGadfly-Family: cholesky-qr"]);
        let c = candidates(ws).unwrap();
        let families: Vec<&str> = c.iter().map(|c| c.0.as_str()).collect();
        assert_eq!(families, vec!["householder", "cholesky-qr"], "{c:?}");
        assert_ne!(c[0].3, c[1].3, "different trees");
        assert!(tag(ws, "Bad Name", "HEAD").is_err());
        assert!(tag(ws, "x", "no-such-ref").unwrap_err().to_string().contains("not a commit"));
    }
}
