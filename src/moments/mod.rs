//! The moments where agents go wrong, noticed without a human watching:
//! numeric detectors over evaluations ([`detect`]), edit loops
//! ([`edit_loop`]), and the text classifier over the agent's messages
//! ([`crate::classify`]). Each moment is recorded as an event with its
//! evidence and triggers question selection: in autonomous mode the
//! question is queued for delivery, in human mode it is offered as
//! suggestions, in audit mode it is only recorded. Cooldowns keep one
//! moment from asking again and again; a claim repeated without fresh
//! evidence gets its question again, in another form.

pub mod detect;
pub mod edit_loop;
pub mod recheck;

use serde_json::{json, Value};

use crate::campaign::{CampaignSpec, Mode};
use crate::classify::{Label, RuleClassifier};
use crate::harness::Evaluation;
use crate::supervisor::Supervisor;
use detect::{Finding, Settings};

/// Bank groups that fit each moment, best first.
pub fn groups_for(moment: &str) -> &'static [&'static str] {
    match moment {
        "start" => &["bound", "measurement", "algorithm_family"],
        "plateau" => &["gap_analysis", "algorithm_family", "campaign_process", "memory_hierarchy"],
        "limit_claim" => &["bound", "gap_analysis", "campaign_process"],
        "suspicious_gain" => &["benchmark_validity", "measurement", "correctness"],
        "correctness_dismissal" => &["correctness", "measurement"],
        "edit_loop" => &["campaign_process", "algorithm_family"],
        _ => &[],
    }
}

/// Runs the numeric detectors and the edit-loop check after a new
/// evaluation, and raises what they find.
/// Returns the evaluation as it stands afterwards: a suspicious gain that
/// fails gadfly's own re-evaluation makes it fail the predicate.
pub async fn after_evaluation(
    sup: &Supervisor,
    campaign_id: &str,
    spec: &CampaignSpec,
    eval: &Evaluation,
) -> anyhow::Result<Evaluation> {
    let settings = Settings::from_campaign(spec)?;
    let history: Vec<Evaluation> = sup
        .store()
        .list_evaluations(campaign_id)
        .await?
        .into_iter()
        .filter_map(|(id, body)| {
            let mut e: Evaluation = serde_json::from_str(&body).ok()?;
            e.id = Some(id);
            // gadfly's own re-checks are not steps of the agent's search
            (!e.tree.contains("+recheck-")).then_some(e)
        })
        .collect();
    let mut findings = detect::detect(&history, &settings);
    if let Some(f) = edit_loop_finding(spec, &history, &settings) {
        findings.push(f);
    }
    let count = history.len();
    let suspicious = findings.iter().any(|f| f.moment == "suspicious_gain");
    for f in findings {
        if in_cooldown(sup, campaign_id, &f.detector, count, settings.cooldown_evaluations).await? {
            continue;
        }
        raise(sup, campaign_id, spec, &f, "numeric", count).await?;
    }
    if suspicious && settings.recheck_suspicious && eval.verdict.holds {
        return recheck::recheck(sup, campaign_id, spec, eval).await;
    }
    Ok(eval.clone())
}

fn edit_loop_finding(spec: &CampaignSpec, history: &[Evaluation], s: &Settings) -> Option<Finding> {
    if history.len() < 3 {
        return None;
    }
    let trees: Vec<&str> = history.iter().map(|e| e.tree.split('+').next().unwrap_or(&e.tree)).collect();
    let from = trees.len().saturating_sub(s.edit_loop_window + 1);
    let mut diffs = Vec::new();
    // Earlier diffs supply the deletions that later additions may repeat.
    for w in trees.windows(2) {
        if w[0] != w[1] {
            diffs.push(edit_loop::git_diff(&spec.workspace, w[0], w[1]).ok()?);
        }
    }
    let window = s.edit_loop_window.min(trees.len() - from);
    let (re, total) = edit_loop::readded(&diffs, window);
    if total < 5 || (re as f64) < s.edit_loop_share * total as f64 {
        return None;
    }
    Some(Finding {
        moment: "edit_loop".into(),
        detector: "edit_loop".into(),
        evaluations: history.iter().rev().take(window + 1).filter_map(|e| e.id).collect(),
        scenarios: vec![],
        detail: format!(
            "{re} of the {total} lines added over the last {window} snapshots ({:.0}%) are identical to lines deleted earlier",
            re as f64 / total as f64 * 100.0
        ),
    })
}

async fn in_cooldown(
    sup: &Supervisor,
    campaign_id: &str,
    detector: &str,
    count: usize,
    cooldown: usize,
) -> anyhow::Result<bool> {
    let recent = sup.store().recent_events(campaign_id, "moment", 50).await?;
    Ok(recent.iter().any(|e| {
        e.payload["detector"] == detector
            && e.payload["evaluation_count"].as_u64().is_some_and(|c| (c as usize) + cooldown > count)
    }))
}

/// Classifies one agent message and raises the moments it shows.
pub async fn after_message(
    sup: &Supervisor,
    campaign_id: &str,
    session: Option<&str>,
    text: &str,
) -> anyhow::Result<()> {
    let (_row, spec) = sup.campaign(campaign_id).await.map_err(|e| anyhow::anyhow!("{e}"))?;
    static CLASSIFIER: std::sync::LazyLock<RuleClassifier> = std::sync::LazyLock::new(RuleClassifier::default);
    let labels = CLASSIFIER.explain(text);
    let count = sup.store().count_evaluations(campaign_id).await? as usize;
    for (label, quote) in labels {
        let moment = match label {
            Label::LimitClaim => "limit_claim",
            Label::CorrectnessDismissal => "correctness_dismissal",
            Label::SuspiciousGainClaim => "suspicious_gain",
            // A completion claim is judged at the stop itself.
            Label::CompletionClaim => {
                sup.record(campaign_id, session, "moment", None, json!({"moment": "completion_claim", "detector": "text", "quote": quote, "evaluation_count": count, "source": "text"}))
                    .await?;
                continue;
            }
        };
        // Not again while its question waits; again (in another form) when
        // the claim is repeated without a new evaluation since the last one.
        let recent = sup.store().recent_events(campaign_id, "moment", 50).await?;
        let previous = recent.iter().find(|e| e.payload["moment"] == moment && e.payload["source"] == "text");
        let waiting =
            sup.store().list_questions(campaign_id, true).await?.iter().any(|q| q.moment.as_deref() == Some(moment));
        if waiting {
            continue;
        }
        let repeated = previous.is_some_and(|p| p.payload["evaluation_count"].as_u64() == Some(count as u64));
        let f = Finding {
            moment: moment.into(),
            detector: format!("text:{}", label.as_str()),
            evaluations: vec![],
            scenarios: vec![],
            detail: format!("the agent wrote: \"{quote}\""),
        };
        raise(sup, campaign_id, &spec, &f, "text", count).await?;
        if repeated {
            sup.record(
                campaign_id,
                session,
                "moment.escalated",
                None,
                json!({"moment": moment, "why": "the claim was repeated without fresh evidence (no new evaluation since its question)", "quote": quote}),
            )
            .await?;
        }
    }
    Ok(())
}

/// The start of a campaign is a moment too.
pub async fn at_start(sup: &Supervisor, campaign_id: &str, spec: &CampaignSpec) -> anyhow::Result<()> {
    let f = Finding {
        moment: "start".into(),
        detector: "start".into(),
        evaluations: vec![],
        scenarios: vec![],
        detail: "the campaign starts".into(),
    };
    raise(sup, campaign_id, spec, &f, "start", 0).await
}

/// Records a moment with its evidence and acts on it by mode.
pub async fn raise(
    sup: &Supervisor,
    campaign_id: &str,
    spec: &CampaignSpec,
    f: &Finding,
    source: &str,
    count: usize,
) -> anyhow::Result<()> {
    let mut payload = json!({
        "moment": f.moment, "detector": f.detector, "evaluations": f.evaluations, "scenarios": f.scenarios,
        "detail": f.detail, "source": source, "evaluation_count": count,
    });
    match spec.mode {
        Mode::Autonomous => {
            // With a beam of too few live families, a plateau or a claimed
            // limit asks for a new family.
            let beam_q = if f.moment == "plateau" || f.moment == "limit_claim" {
                crate::beam::new_family_question(sup, campaign_id, spec).await?
            } else {
                None
            };
            let q = match beam_q {
                Some((bank_id, text)) => {
                    payload["beam"] = json!("too few live families");
                    crate::gate::Question { queued_id: None, source: bank_id, moment: f.moment.clone(), text }
                }
                None => sup.pick_question(campaign_id, spec, &f.moment, groups_for(&f.moment)).await?,
            };
            let id = sup.store().queue_question(campaign_id, "bank", Some(&q.source), Some(&f.moment), &q.text).await?;
            payload["question"] = json!({"question_id": id, "bank_id": q.source, "text": q.text});
            sup.record(campaign_id, None, "moment", None, payload).await?;
            sup.record(
                campaign_id,
                None,
                "question.queued",
                None,
                json!({"question_id": id, "source": "bank", "bank_id": q.source, "moment": f.moment, "text": q.text}),
            )
            .await?;
        }
        Mode::Human => {
            let suggestions = sup.suggestions(campaign_id, &f.moment, 3).await.map_err(|e| anyhow::anyhow!("{e}"))?;
            payload["suggestions"] = Value::Array(
                suggestions
                    .iter()
                    .map(|c| json!({"id": c.entry.id, "text": c.entry.text, "rationale": c.entry.rationale}))
                    .collect(),
            );
            sup.record(campaign_id, None, "moment", None, payload).await?;
        }
        Mode::Audit => {
            sup.record(campaign_id, None, "moment", None, payload).await?;
        }
    }
    Ok(())
}
