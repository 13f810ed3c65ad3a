//! A beam of candidates from different algorithm families, kept alive at
//! once so that one compile error does not kill a promising direction.
//! Candidates are git refs in the workspace under `refs/heads/beam/FAMILY`
//! (declared with `gadfly beam tag FAMILY`), or branches whose head commit
//! carries a `Gadfly-Family: NAME` trailer. Each candidate commit is
//! evaluated once; a family keeps its best and its last good evaluation
//! when its latest build fails, and is abandoned only by an explicit
//! decision recorded with its reason.

use std::path::Path;

use anyhow::{anyhow, bail, Context};
use serde::{Deserialize, Serialize};

use crate::campaign::CampaignSpec;
use crate::evaluation::Evaluation;
use crate::events::{self, Event};
use crate::supervisor::Supervisor;

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

fn git(ws: &Path, args: &[&str]) -> anyhow::Result<String> {
    // The workspace's repository is the agent's: no hooks (update-ref would
    // run its reference-transaction hook in the daemon), no fsmonitor, no
    // replace refs, no global or system config.
    let home = std::env::temp_dir().join("gadfly-no-home");
    let out = crate::snapshot::hardened_git(&home).arg("-C").arg(ws).args(args).output().context("running git")?;
    if !out.status.success() {
        bail!("git {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

pub fn valid_family(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "-_.".contains(c))
        && !name.starts_with(['-', '.'])
}

/// Points `refs/heads/beam/FAMILY` at the workspace's HEAD commit.
pub fn tag(ws: &Path, family: &str, from: &str) -> anyhow::Result<(String, String)> {
    if !valid_family(family) {
        bail!("family `{family}` must be lowercase letters, digits, `-`, `_` or `.` (at most 64)");
    }
    let commit = git(ws, &["rev-parse", "--verify", &format!("{from}^{{commit}}")])
        .with_context(|| format!("`{from}` is not a commit in the workspace (commit the candidate first)"))?;
    let r = format!("refs/heads/beam/{family}");
    git(ws, &["update-ref", &r, &commit])?;
    Ok((r, commit))
}

/// The commit and tree a ref points at, if it exists.
pub fn resolve(ws: &Path, r: &str) -> Option<(String, String)> {
    let commit = git(ws, &["rev-parse", "--verify", "-q", &format!("{r}^{{commit}}")]).ok()?;
    let tree = git(ws, &["rev-parse", "--verify", "-q", &format!("{r}^{{tree}}")]).ok()?;
    Some((commit, tree))
}

/// Every candidate ref: (family, ref, commit, tree).
pub fn candidates(ws: &Path) -> anyhow::Result<Vec<(String, String, String, String)>> {
    let mut out = Vec::new();
    let listing = git(ws, &["for-each-ref", "--format=%(refname) %(objectname) %(tree)", "refs/heads/"])?;
    for line in listing.lines() {
        let parts: Vec<&str> = line.split(' ').collect();
        let [r, commit, tree] = parts[..] else { continue };
        if let Some(family) = r.strip_prefix("refs/heads/beam/") {
            out.push((family.to_string(), r.to_string(), commit.to_string(), tree.to_string()));
            continue;
        }
        let trailer =
            git(ws, &["log", "-1", "--format=%(trailers:key=Gadfly-Family,valueonly)", r]).unwrap_or_default();
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

fn point(id: i64, commit: &str, e: &Evaluation) -> Point {
    Point {
        evaluation_id: id,
        commit: commit.to_string(),
        holds: e.verdict.holds,
        geomean_speedup: e.verdict.geomean_speedup,
        built: e.build.as_ref().is_none_or(|b| b.ok) && e.run.as_ref().is_some_and(|r| r.ok),
        failing: e.verdict.failing_count,
    }
}

/// Registers new candidate refs, evaluates candidate commits not seen yet,
/// and returns the beam.
pub async fn sync(sup: &Supervisor, campaign_id: &str) -> anyhow::Result<Beam> {
    let (_row, spec) = sup.campaign(campaign_id).await.map_err(|e| anyhow!("{e}"))?;
    let cfg = settings(&spec)?;
    let ws = spec.workspace.clone();
    let found = tokio::task::spawn_blocking(move || candidates(&ws)).await??;
    let known = sup.store().list_families(campaign_id).await?;
    for (family, r, _, _) in &found {
        if !known.iter().any(|k| &k.family == family) {
            sup.store().upsert_family(campaign_id, family, r).await?;
            let discovered =
                Event::BeamFamily { family: family.clone(), git_ref: r.clone(), how: events::FamilyHow::Discovered };
            sup.record_event(campaign_id, None, None, discovered).await?;
        }
    }
    let families = sup.store().list_families(campaign_id).await?;
    let seen = sup.store().family_evaluations(campaign_id).await?;
    for f in families.iter().filter(|f| f.status == "alive") {
        // A known family follows its ref, whether or not the newest commit
        // repeats the trailer.
        let (ws, r) = (spec.workspace.clone(), f.git_ref.clone());
        let Some((commit, tree)) = tokio::task::spawn_blocking(move || resolve(&ws, &r)).await? else { continue };
        let (commit, tree) = (&commit, &tree);
        if seen.iter().any(|(fam, c, _)| fam == &f.family && c == commit) {
            continue;
        }
        let e = sup.evaluate_tree(campaign_id, tree).await.map_err(|e| anyhow!("{e}"))?;
        if let Some(id) = e.id {
            sup.store().record_family_evaluation(campaign_id, &f.family, commit, id).await?;
        }
    }
    let beam = view(sup, campaign_id, cfg.as_ref()).await?;
    if let Some(cfg) = &cfg {
        revisit_questions(sup, campaign_id, &spec, &beam, cfg).await?;
    }
    Ok(beam)
}

/// The beam as stored, without evaluating anything.
pub async fn view(sup: &Supervisor, campaign_id: &str, cfg: Option<&Settings>) -> anyhow::Result<Beam> {
    let families = sup.store().list_families(campaign_id).await?;
    let evals: std::collections::HashMap<i64, Evaluation> = sup
        .store()
        .list_evaluations(campaign_id)
        .await?
        .into_iter()
        .filter_map(|(id, body)| serde_json::from_str::<Evaluation>(&body).ok().map(|e| (id, e)))
        .collect();
    let history = sup.store().family_evaluations(campaign_id).await?;
    let mut views = Vec::new();
    for f in families {
        let points: Vec<Point> = history
            .iter()
            .filter(|(fam, ..)| fam == &f.family)
            .filter_map(|(_, commit, id)| evals.get(id).map(|e| point(*id, commit, e)))
            .collect();
        let last = points.last().cloned();
        let last_good = points.iter().rev().find(|p| p.built && p.geomean_speedup.is_some()).cloned();
        let best = points
            .iter()
            .filter(|p| p.geomean_speedup.is_some())
            .max_by(|a, b| a.geomean_speedup.unwrap_or(0.0).total_cmp(&b.geomean_speedup.unwrap_or(0.0)))
            .cloned();
        let note = match (&last, &last_good) {
            (Some(l), Some(g)) if !l.built && l.evaluation_id != g.evaluation_id => Some(format!(
                "the latest candidate did not build or run; the family stays alive on its last good evaluation #{}",
                g.evaluation_id
            )),
            (Some(l), None) if !l.built => Some("no candidate of this family has built yet; it stays alive".into()),
            _ => None,
        };
        views.push(FamilyView {
            family: f.family,
            git_ref: f.git_ref,
            status: f.status,
            reason: f.reason,
            best,
            last,
            last_good,
            note,
            history: points,
        });
    }
    let live = views.iter().filter(|v| v.status == "alive").count();
    Ok(Beam { enabled: cfg.is_some(), min_families: cfg.map_or(0, |c| c.min_families), live, families: views })
}

/// At a plateau or a claimed limit with too few live families: the
/// question to ask instead of the usual pick (a new family).
pub async fn new_family_question(
    sup: &Supervisor,
    campaign_id: &str,
    spec: &CampaignSpec,
) -> anyhow::Result<Option<(String, String)>> {
    let Some(cfg) = settings(spec)? else { return Ok(None) };
    let live = sup.store().list_families(campaign_id).await?.iter().filter(|f| f.status == "alive").count();
    if live >= cfg.min_families {
        return Ok(None);
    }
    Ok(bank_question(sup, campaign_id, NEW_FAMILY_QUESTIONS).await?.map(|(id, text)| {
        (
            id,
            format!(
                "{text} (The beam has {live} live famil{} of the {} this campaign keeps.)",
                if live == 1 { "y" } else { "ies" },
                cfg.min_families
            ),
        )
    }))
}

async fn bank_question(sup: &Supervisor, campaign_id: &str, ids: &[&str]) -> anyhow::Result<Option<(String, String)>> {
    let asked: Vec<String> =
        sup.store().list_questions(campaign_id, false).await?.into_iter().filter_map(|q| q.bank_id).collect();
    let bank = sup.bank().get();
    let pick = ids.iter().find(|id| !asked.iter().any(|a| a == *id)).or(ids.first());
    Ok(pick.and_then(|id| bank.get(id)).map(|e| (e.id.clone(), e.text.clone())))
}

/// An abandoned family whose best came close to the beam's best gets one
/// question asking to revisit it.
async fn revisit_questions(
    sup: &Supervisor,
    campaign_id: &str,
    spec: &CampaignSpec,
    beam: &Beam,
    cfg: &Settings,
) -> anyhow::Result<()> {
    if spec.mode != crate::campaign::Mode::Autonomous {
        return Ok(());
    }
    let top = beam.families.iter().filter_map(|f| f.best.as_ref()?.geomean_speedup).fold(0.0, f64::max);
    let recent = sup.store().recent_events(campaign_id, events::kind::MOMENT, 200).await?;
    for f in beam.families.iter().filter(|f| f.status == "abandoned") {
        let Some(best) = f.best.as_ref().and_then(|b| b.geomean_speedup) else { continue };
        if top <= 0.0 || best < top * cfg.revisit_within {
            continue;
        }
        if recent.iter().any(|e| e.payload["detector"] == "beam_revisit" && e.payload["family"] == f.family.as_str()) {
            continue;
        }
        let Some((bank_id, text)) = bank_question(sup, campaign_id, REVISIT_QUESTIONS).await? else { continue };
        let text = format!(
            "{text} (Family `{}` was abandoned at {best:.2}x, within {:.0}% of the beam's best {top:.2}x.)",
            f.family,
            (1.0 - best / top) * 100.0
        );
        let id = sup.store().queue_question(campaign_id, "bank", Some(&bank_id), Some("plateau"), &text).await?;
        let moment = events::Moment {
            moment: "plateau".into(),
            detector: "beam_revisit".into(),
            detail: format!("abandoned family {} reached {best:.2}x against the beam's best {top:.2}x", f.family),
            source: "beam".into(),
            evidence: events::MomentEvidence::Family { family: f.family.clone() },
            claim: None,
            beam: None,
            outcome: events::MomentOutcome::Question {
                question_id: id,
                bank_id: bank_id.clone(),
                text: text.clone(),
                via: None,
            },
        };
        sup.record_event(campaign_id, None, None, Event::Moment(moment)).await?;
        let by = events::QueuedBy::Bank { bank_id, moment: "plateau".into() };
        sup.record_event(campaign_id, None, None, Event::QuestionQueued { question_id: id, text, by }).await?;
    }
    Ok(())
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
