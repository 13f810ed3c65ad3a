//! Acting on the moments (issue #33): the detectors in [`crate::moments`]
//! return findings; this file gathers what they read (the campaign's
//! evaluations, the waiting questions), keeps the cooldowns and the claims
//! seen lately, records each moment as an event with its evidence, and
//! acts on it by mode: in autonomous mode its question is queued for
//! delivery, in human mode it is offered as suggestions, in audit mode it
//! is only recorded. Cooldowns keep one moment from asking again and
//! again; a claim repeated without fresh evidence gets its question again,
//! in another form.

use crate::bank::groups::groups_for;
use crate::campaign::CampaignSpec;
use crate::evaluation::Evaluation;
use crate::events::{self, kind, ClaimEvidence, Event, MomentOutcome, QueuedBy, Suggestion, Via};
use crate::moments::detect::{Finding, Settings};
use crate::moments::plan::{self, Act, FindingPlan, Recorded};
use crate::moments::{finding_moment, ClaimMoment};

use super::Supervisor;

/// Runs the numeric detectors and the edit-loop check after a new
/// evaluation, and raises what they find.
/// Returns the evaluation as it stands afterwards: a suspicious gain that
/// fails gadfly's own re-evaluation makes it fail the predicate.
/// Moments named in `held` are recorded without a question of their own:
/// a stop attempt whose words show the same moment asks it.
pub(super) async fn after_evaluation(
    sup: &Supervisor,
    campaign_id: &str,
    spec: &CampaignSpec,
    eval: &Evaluation,
    held: &[String],
) -> anyhow::Result<Evaluation> {
    let settings = Settings::from_campaign(spec)?;
    let history: Vec<Evaluation> = sup
        .store()
        .list_evaluations(campaign_id)
        .await?
        .into_iter()
        // Only the workspace's evaluations are steps of the agent's search:
        // gadfly's own re-checks are not, nor a beam branch's candidates
        // (`gadfly beam list`), which were never in the workspace.
        .filter(|e| e.origin == crate::evaluation::Origin::Workspace && !e.tree.contains("+recheck-"))
        .collect();
    let store = crate::snapshot::store_path(sup.data_dir(), campaign_id);
    let findings = crate::moments::after_evaluation(&store, &history, &settings);
    let count = history.len();
    let suspicious = findings.iter().any(|f| f.moment == "suspicious_gain");
    for f in findings {
        let recent = recent_moments(sup, campaign_id).await?;
        let recorded: Vec<Recorded> = recent.iter().map(recorded).collect();
        match plan::plan_finding(&f, &recorded, held, count, settings.cooldown_evaluations) {
            FindingPlan::Cooldown => continue,
            FindingPlan::Held => {
                let mut moment = finding_moment(&f, "numeric", count);
                moment.outcome = MomentOutcome::NoQuestion(plan::HELD_WHY.into());
                sup.record_event(campaign_id, None, None, Event::Moment(moment)).await?;
            }
            FindingPlan::Raise => raise(sup, campaign_id, spec, &f, "numeric", count).await?,
        }
    }
    if suspicious && settings.recheck_suspicious && eval.verdict.holds {
        return super::recheck::recheck(sup, campaign_id, spec, eval).await;
    }
    Ok(eval.clone())
}

/// The idle plateau: the agent made `n` tool calls since the last
/// evaluation (`from` when the detector last looked). Raised once per
/// `plateau_tool_calls` calls.
pub(super) async fn after_tool_calls(
    sup: &Supervisor,
    campaign_id: &str,
    from: usize,
    n: usize,
    cadence: &[usize],
) -> anyhow::Result<()> {
    let (_row, spec) = sup.campaign(campaign_id).await.map_err(|e| anyhow::anyhow!("{e}"))?;
    let settings = Settings::from_campaign(&spec)?;
    let Some(f) = crate::moments::after_tool_calls(from, n, cadence, &settings) else { return Ok(()) };
    let count = sup.store().count_evaluations(campaign_id).await? as usize;
    raise(sup, campaign_id, &spec, &f, "numeric", count).await
}

/// The campaign's latest moment events, newest first (what the rules of
/// [`plan`] read, through [`recorded`]).
async fn recent_moments(sup: &Supervisor, campaign_id: &str) -> anyhow::Result<Vec<crate::store::EventRow>> {
    sup.store().recent_events(campaign_id, kind::MOMENT, plan::LOOK_BACK as i64).await
}

/// A moment event as the rules of [`plan`] read it.
fn recorded(e: &crate::store::EventRow) -> Recorded<'_> {
    Recorded {
        moment: e.payload["moment"].as_str().unwrap_or(""),
        detector: e.payload["detector"].as_str().unwrap_or(""),
        source: e.payload["source"].as_str().unwrap_or(""),
        evaluation_count: e.payload["evaluation_count"].as_u64(),
    }
}

/// How long a message read from the agent's stream or transcript waits
/// before it is classified (see [`plan::STREAM_GRACE`]).
pub const STREAM_GRACE: std::time::Duration = plan::STREAM_GRACE;

/// Which messages were classified recently, by (campaign, session, text).
#[derive(Default)]
pub struct SeenClaims(tokio::sync::Mutex<plan::Seen<std::time::Instant>>);

impl SeenClaims {
    /// True the first time these words are seen (within [`plan::SEEN_FOR`]).
    fn first_sight(
        seen: &mut plan::Seen<std::time::Instant>,
        campaign_id: &str,
        session: Option<&str>,
        text: &str,
    ) -> bool {
        let now = std::time::Instant::now();
        seen.first_sight(campaign_id, session, text, now, |at| now.duration_since(at) >= plan::SEEN_FOR)
    }
}

/// The moments a message shows (text classifier), with whether a question
/// for them already waits. Records nothing.
async fn claim_moments(sup: &Supervisor, campaign_id: &str, text: &str) -> anyhow::Result<Vec<ClaimMoment>> {
    let mut out = crate::moments::claims_in(text);
    if out.is_empty() {
        return Ok(out);
    }
    let waiting = sup.store().list_questions(campaign_id, true).await?;
    for c in &mut out {
        c.waiting = waiting.iter().any(|q| q.moment.as_deref() == Some(c.finding.moment.as_str()));
    }
    Ok(out)
}

/// Classifies one agent message read from its stream or transcript, after
/// [`STREAM_GRACE`], and raises the moments it shows, unless the Stop hook
/// already handled the same words.
pub(super) async fn after_message(
    sup: &Supervisor,
    campaign_id: &str,
    session: Option<&str>,
    text: &str,
    received: tokio::time::Instant,
) -> anyhow::Result<()> {
    tokio::time::sleep_until(received + STREAM_GRACE).await;
    // Held while the moments are raised: a Stop hook with the same words
    // waits, then finds their question queued.
    let mut seen = sup.seen_claims().0.lock().await;
    if !SeenClaims::first_sight(&mut seen, campaign_id, session, text) {
        return Ok(());
    }
    let (_row, spec) = sup.campaign(campaign_id).await.map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut claims = claim_moments(sup, campaign_id, text).await?;
    read_gain_claims(sup, campaign_id, &spec, &mut claims).await?;
    for c in claims {
        raise_claim(sup, campaign_id, session, &spec, &c, ClaimAction::Ask).await?;
    }
    Ok(())
}

/// Reads the gain claims of `claims` against the campaign's evaluations
/// ([`crate::moments::gain_claim`]): a claim with no measured gain is
/// recorded without a question. The Stop hook reads them once its own
/// evaluation is stored.
pub(super) async fn read_gain_claims(
    sup: &Supervisor,
    campaign_id: &str,
    spec: &CampaignSpec,
    claims: &mut [ClaimMoment],
) -> anyhow::Result<()> {
    if claims.iter().any(|c| c.finding.moment == "suspicious_gain") {
        let history = sup.store().list_evaluations(campaign_id).await?;
        crate::moments::gain_claim::read_claims(claims, &history, &spec.predicate);
    }
    Ok(())
}

/// The moments in the words an agent stops with (the Stop hook's last
/// assistant message), unless its stream already handled them. The caller
/// decides the stop, then records each with [`raise_claim`].
pub(super) async fn at_stop(
    sup: &Supervisor,
    campaign_id: &str,
    session: Option<&str>,
    text: &str,
) -> anyhow::Result<Vec<ClaimMoment>> {
    if text.trim().is_empty() {
        return Ok(vec![]);
    }
    let mut seen = sup.seen_claims().0.lock().await;
    if !SeenClaims::first_sight(&mut seen, campaign_id, session, text) {
        return Ok(vec![]);
    }
    drop(seen);
    claim_moments(sup, campaign_id, text).await
}

/// What becomes of a claim moment once recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimAction<'a> {
    /// Act on it by mode (queue its question, offer suggestions...).
    Ask,
    /// Its question went out in a stop's block reason: (question id, bank id, text).
    AskedAtStop(i64, &'a str, &'a str),
    /// Recorded only, with why no question is asked.
    RecordOnly(&'a str),
}

/// Records a claim moment with its evidence and acts on it: a completion
/// claim is recorded only (it is judged at the stop itself); a moment whose
/// question already waits is not asked again; a claim repeated without
/// fresh evidence is asked again and escalated.
pub(super) async fn raise_claim(
    sup: &Supervisor,
    campaign_id: &str,
    session: Option<&str>,
    spec: &CampaignSpec,
    c: &ClaimMoment,
    action: ClaimAction<'_>,
) -> anyhow::Result<()> {
    // Counted now, after the evaluation a stop attempt runs: a claim is a
    // repeat only when no evaluation came between it and the last one.
    let count = sup.store().count_evaluations(campaign_id).await? as usize;
    let f = &c.finding;
    // The latest question of this moment that reached the agent before
    // these words (not the one a stop asks about them now), and the latest
    // evaluation the workspace presented.
    let asked_now = match action {
        ClaimAction::AskedAtStop(id, ..) => Some(id),
        _ => None,
    };
    let delivered = sup
        .store()
        .list_questions(campaign_id, false)
        .await?
        .into_iter()
        .filter(|q| q.moment.as_deref() == Some(f.moment.as_str()) && Some(q.id) != asked_now)
        .filter_map(|q| q.delivered_at)
        .max();
    let latest = sup.store().latest_evaluation(campaign_id).await?;
    let latest_failure = latest.as_ref().and_then(|e| e.failure_kind());
    let last_evaluation = latest.map(|e| e.created_at);
    let repeated = plan::repeated_claim(delivered, last_evaluation);
    let mut base = finding_moment(f, "text", count);
    base.claim = Some(ClaimEvidence { quote: c.quote.clone(), repeated });
    let action = match action {
        ClaimAction::Ask => {
            plan::claim_record_only(f, c.waiting, latest_failure).map_or(action, ClaimAction::RecordOnly)
        }
        other => other,
    };
    match action {
        ClaimAction::Ask => raise_with(sup, campaign_id, spec, f, base).await?,
        ClaimAction::AskedAtStop(id, bank_id, text) => {
            let mut moment = base;
            moment.outcome = MomentOutcome::Question {
                question_id: id,
                bank_id: bank_id.to_string(),
                text: text.to_string(),
                via: Some(Via::StopHookReason),
            };
            sup.record_event(campaign_id, session, None, Event::Moment(moment)).await?;
        }
        ClaimAction::RecordOnly(why) => {
            let mut moment = base;
            moment.outcome = MomentOutcome::NoQuestion(why.to_string());
            sup.record_event(campaign_id, session, None, Event::Moment(moment)).await?;
        }
    }
    if plan::escalates(&f.moment, repeated) {
        let escalated = Event::MomentEscalated {
            moment: f.moment.clone(),
            why: plan::ESCALATED_WHY.into(),
            quote: c.quote.clone(),
        };
        sup.record_event(campaign_id, session, None, escalated).await?;
    }
    Ok(())
}

/// The start of a campaign is a moment too.
pub(super) async fn at_start(sup: &Supervisor, campaign_id: &str, spec: &CampaignSpec) -> anyhow::Result<()> {
    raise(sup, campaign_id, spec, &crate::moments::at_start(), "start", 0).await
}

/// Records a moment with its evidence and acts on it by mode.
pub(super) async fn raise(
    sup: &Supervisor,
    campaign_id: &str,
    spec: &CampaignSpec,
    f: &Finding,
    source: &str,
    count: usize,
) -> anyhow::Result<()> {
    raise_with(sup, campaign_id, spec, f, finding_moment(f, source, count)).await
}

/// [`raise`] with the moment event already built (a claim's quote added...).
async fn raise_with(
    sup: &Supervisor,
    campaign_id: &str,
    spec: &CampaignSpec,
    f: &Finding,
    mut moment: events::Moment,
) -> anyhow::Result<()> {
    match plan::act_for(spec.mode) {
        Act::Queue => {
            // With a beam of too few live families, a plateau or a claimed
            // limit asks for a new family.
            let beam_q = if f.moment == "plateau" || f.moment == "limit_claim" {
                super::beam::new_family_question(sup, campaign_id, spec).await?
            } else {
                None
            };
            if beam_q.is_none() && crate::moments::plan::withheld(campaign_id, spec.withhold, f, &moment) {
                return withhold(sup, campaign_id, spec, f, moment).await;
            }
            let q = match beam_q {
                Some((bank_id, text)) => {
                    moment.beam = Some("too few live families".into());
                    crate::gate::Question { queued_id: None, source: bank_id, moment: f.moment.clone(), text }
                }
                None => {
                    let evidence = crate::bank::evidence::Evidence::of_finding(
                        &f.moment,
                        &f.detector,
                        &f.scenarios,
                        &f.detail,
                        f.evaluations.len(),
                        moment.claim.as_ref().map(|c| c.quote.as_str()),
                        &f.facts,
                    );
                    sup.pick_question_for(campaign_id, spec, &f.moment, groups_for(&f.moment), Some(&evidence)).await?
                }
            };
            let id = sup.store().queue_question(campaign_id, "bank", Some(&q.source), Some(&f.moment), &q.text).await?;
            moment.outcome =
                MomentOutcome::Question { question_id: id, bank_id: q.source.clone(), text: q.text.clone(), via: None };
            sup.record_event(campaign_id, None, None, Event::Moment(moment)).await?;
            let by = QueuedBy::Bank { bank_id: q.source, moment: f.moment.clone() };
            let queued = Event::QuestionQueued { question_id: id, text: q.text, by };
            sup.record_event(campaign_id, None, None, queued).await?;
        }
        Act::Suggest => {
            let suggestions =
                sup.suggestions(campaign_id, &f.moment, plan::SUGGESTIONS).await.map_err(|e| anyhow::anyhow!("{e}"))?;
            moment.outcome = MomentOutcome::Suggestions(
                suggestions
                    .iter()
                    .map(|c| Suggestion {
                        id: c.entry.id.clone(),
                        text: c.text.clone(),
                        rationale: c.entry.rationale.clone(),
                    })
                    .collect(),
            );
            sup.record_event(campaign_id, None, None, Event::Moment(moment)).await?;
        }
        Act::Record => {
            sup.record_event(campaign_id, None, None, Event::Moment(moment)).await?;
        }
    }
    Ok(())
}

/// Records a moment left without its question: the moment itself (as any
/// other, its `no_question` saying why) and a `moment.withheld` with the
/// objective before it, so that what follows is measured as what follows
/// a question ([`crate::bank::learn`]).
async fn withhold(
    sup: &Supervisor,
    campaign_id: &str,
    spec: &CampaignSpec,
    f: &Finding,
    mut moment: events::Moment,
) -> anyhow::Result<()> {
    let series = sup.store().evaluation_series(campaign_id).await?;
    let workspace: Vec<_> = series.iter().filter(|p| p.origin == crate::evaluation::Origin::Workspace).collect();
    let objective = workspace.iter().rev().find(|p| !p.incorrect && p.geomean.is_some());
    let withheld = events::Withheld {
        moment: f.moment.clone(),
        detector: f.detector.clone(),
        share: spec.withhold,
        evaluation_before: workspace.last().map(|p| p.id),
        objective_evaluation: objective.map(|p| p.id),
        objective_before: objective.and_then(|p| p.geomean),
    };
    moment.outcome = MomentOutcome::NoQuestion(crate::moments::plan::WITHHELD_WHY.into());
    sup.record_event(campaign_id, None, None, Event::Moment(moment)).await?;
    sup.record_event(campaign_id, None, None, Event::MomentWithheld(withheld)).await?;
    Ok(())
}
