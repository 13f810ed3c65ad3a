//! The beam's use cases (issue #33): registering the families found in
//! the workspace, evaluating their new candidate commits, the beam as
//! stored, recording the beam's events, and the questions it asks (a new
//! family when too few are alive, a revisit of an abandoned one that came
//! close). The git parts and the types are in [`crate::beam`].

use anyhow::anyhow;

use crate::beam::{
    candidates, point, resolve, settings, Beam, FamilyView, Point, Settings, NEW_FAMILY_QUESTIONS, REVISIT_QUESTIONS,
};
use crate::campaign::CampaignSpec;
use crate::evaluation::Evaluation;
use crate::events::{self, Event};

use super::Supervisor;

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
    let evals: std::collections::HashMap<i64, Evaluation> =
        sup.store().list_evaluations(campaign_id).await?.into_iter().filter_map(|e| Some((e.id?, e))).collect();
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
        // An incorrect candidate is never the family's best.
        let best = points
            .iter()
            .filter(|p| p.geomean_speedup.is_some() && !p.incorrect)
            .max_by(|a, b| a.geomean_speedup.unwrap_or(0.0).total_cmp(&b.geomean_speedup.unwrap_or(0.0)))
            .cloned();
        let note = match (&last, &last_good) {
            (Some(l), Some(g)) if !l.built && l.evaluation_id != g.evaluation_id => Some(format!(
                "the latest candidate did not build or run; the family stays alive on its last good evaluation, {} \
                 of this campaign",
                crate::evaluation::number_in(evals.keys().copied(), g.evaluation_id)
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

/// Declares a family tagged by `gadfly beam tag` (its ref already points
/// at `commit`): registers it and records the tag.
pub async fn record_tagged(
    sup: &Supervisor,
    campaign_id: &str,
    family: &str,
    git_ref: &str,
    commit: &str,
) -> anyhow::Result<()> {
    sup.store().upsert_family(campaign_id, family, git_ref).await?;
    let tagged = Event::BeamFamily {
        family: family.to_string(),
        git_ref: git_ref.to_string(),
        how: events::FamilyHow::Tagged { commit: commit.to_string() },
    };
    sup.record_event(campaign_id, None, None, tagged).await?;
    Ok(())
}

/// Abandons a family with its reason on record; false when the campaign
/// has no such family.
pub async fn abandon(sup: &Supervisor, campaign_id: &str, family: &str, reason: &str) -> anyhow::Result<bool> {
    if !sup.store().abandon_family(campaign_id, family, reason.trim()).await? {
        return Ok(false);
    }
    let abandoned = Event::BeamAbandoned { family: family.to_string(), reason: reason.to_string() };
    sup.record_event(campaign_id, None, None, abandoned).await?;
    Ok(true)
}
