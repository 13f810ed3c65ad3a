//! Claims an agent files itself (`gadfly claim limit|blocked|done`, issue
//! #34): recorded as `claim` events with the agent's own words and
//! evidence. A limit claim is a `limit_claim` moment (in autonomous mode its
//! challenge question is queued first); a person may accept it ("stopped:
//! limit accepted by NAME", after which the Stop gate lets the agent stop
//! as an accepted limit, never as a success) or reject it with a reason,
//! delivered to the agent as a person's question. Also the block streak:
//! blocked stops in a row without a gain, recorded, and the reminder of the
//! sanctioned exit a block reason carries after `[gate]
//! remind_after_blocks` of them.

use serde::Serialize;
use serde_json::Value;

use crate::events::{kind, Claim, ClaimFile, ClaimKind, ClaimVerdict, Event};
use crate::moments::detect::Finding;
use crate::moments::ClaimMoment;

use super::{Result, Supervisor, SupervisorError};

pub use crate::events::{MAX_EVIDENCE_BYTES, MAX_EVIDENCE_FILES};
/// At most this many characters of `why`, and of a rejection's reason.
pub const MAX_WHY_CHARS: usize = 4000;
/// How many claims are looked back at (newest first).
const LOOK_BACK: i64 = 1000;

/// A filed claim, as the API answers it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct FiledClaim {
    /// The claim's id (its `claim` event).
    pub id: i64,
    /// `limit`, `blocked` or `done`.
    pub claim: String,
    /// What becomes of it.
    pub note: String,
}

/// The accepted limit that lets a campaign's agent stop.
#[derive(Debug, Clone, PartialEq)]
pub struct AcceptedLimit {
    pub claim_id: i64,
    pub by: String,
}

impl Supervisor {
    /// Records a claim the agent filed; a limit claim is raised as a
    /// `limit_claim` moment too.
    pub async fn file_claim(
        &self,
        campaign_id: &str,
        claim: ClaimKind,
        why: &str,
        evidence: Vec<ClaimFile>,
    ) -> Result<FiledClaim> {
        let why = why.trim();
        if why.is_empty() {
            return Err(SupervisorError::Invalid("a claim needs --why: what you claim and why".into()));
        }
        if why.chars().count() > MAX_WHY_CHARS {
            return Err(SupervisorError::Invalid(format!("`why` is longer than {MAX_WHY_CHARS} characters")));
        }
        check_evidence(&evidence)?;
        let (_row, spec) = self.campaign(campaign_id).await?;
        let latest = self.store().latest_evaluation(campaign_id).await?;
        let filed = Claim {
            claim,
            why: why.to_string(),
            evidence,
            evaluation_id: latest.as_ref().and_then(|e| e.id),
            geomean_speedup: latest.as_ref().and_then(|e| e.verdict.geomean_speedup),
        };
        let files = filed.evidence.len();
        let (id, _) = self.record_event(campaign_id, None, None, Event::Claim(filed)).await?;
        let note = match claim {
            ClaimKind::Limit => {
                let waiting = self
                    .store()
                    .list_questions(campaign_id, true)
                    .await?
                    .iter()
                    .any(|q| q.moment.as_deref() == Some("limit_claim"));
                let c = ClaimMoment {
                    finding: Finding {
                        moment: "limit_claim".into(),
                        detector: "gadfly_claim".into(),
                        evaluations: latest.as_ref().and_then(|e| e.id).into_iter().collect(),
                        scenarios: vec![],
                        detail: format!("claim id {id}, filed with `gadfly claim limit` ({files} evidence files)"),
                        facts: [("evidence_files".to_string(), files.to_string())].into(),
                    },
                    quote: why.to_string(),
                    waiting,
                };
                super::moments::raise_claim(self, campaign_id, None, &spec, &c, super::moments::ClaimAction::Ask)
                    .await?;
                "recorded as a limit claim: answer the question gadfly asks about it; a person may accept it \
                 (then you may stop), reject it with a reason, or leave it"
                    .to_string()
            }
            ClaimKind::Blocked => "recorded as a blocker: the person supervising sees it".to_string(),
            ClaimKind::Done => "recorded as a completion claim: gadfly still judges it when you stop".to_string(),
        };
        Ok(FiledClaim { id, claim: claim.as_str().into(), note })
    }

    /// The campaign's claims, newest first, each with its verdict (if any).
    pub async fn list_claims(&self, campaign_id: &str) -> Result<Vec<Value>> {
        self.campaign(campaign_id).await?;
        let claims = self.store().recent_events(campaign_id, kind::CLAIM, LOOK_BACK).await?;
        let verdicts = self.store().recent_events(campaign_id, kind::CLAIM_VERDICT, LOOK_BACK).await?;
        Ok(claims
            .iter()
            .map(|c| {
                let mut v = c.payload.clone();
                v["id"] = c.id.into();
                v["created_at"] = c.created_at.clone().into();
                v["verdict"] = verdicts
                    .iter()
                    .find(|x| x.payload["claim_id"].as_i64() == Some(c.id))
                    .map(|x| {
                        let mut p = x.payload.clone();
                        p["created_at"] = x.created_at.clone().into();
                        p
                    })
                    .unwrap_or(Value::Null);
                v
            })
            .collect())
    }

    /// A person's verdict on limit claim `claim_id`: accepted (the agent
    /// may stop, as an accepted limit) or rejected with `reason`, which
    /// reaches the agent as a person's question. The verdict's event.
    pub async fn judge_claim(
        &self,
        campaign_id: &str,
        claim_id: i64,
        accepted: bool,
        by: &str,
        reason: Option<&str>,
    ) -> Result<Value> {
        self.campaign(campaign_id).await?;
        let claims = self.list_claims(campaign_id).await?;
        let Some(claim) = claims.iter().find(|c| c["id"].as_i64() == Some(claim_id)) else {
            return Err(SupervisorError::Invalid(format!("no claim with id {claim_id} in campaign {campaign_id}")));
        };
        if claim["claim"] != "limit" {
            return Err(SupervisorError::Invalid(format!(
                "claim {claim_id} is a `{}` claim: only a limit claim is accepted or rejected",
                claim["claim"].as_str().unwrap_or("?")
            )));
        }
        if !claim["verdict"].is_null() {
            return Err(SupervisorError::Invalid(format!(
                "claim {claim_id} was {} already",
                claim["verdict"]["verdict"].as_str().unwrap_or("judged")
            )));
        }
        let by = by.trim();
        let by = if by.is_empty() { "operator" } else { by };
        let by: String = by.chars().take(100).collect();
        let reason = reason.map(str::trim).filter(|r| !r.is_empty());
        if !accepted && reason.is_none() {
            return Err(SupervisorError::Invalid("rejecting a claim needs a reason (the agent reads it)".into()));
        }
        if reason.is_some_and(|r| r.chars().count() > MAX_WHY_CHARS) {
            return Err(SupervisorError::Invalid(format!("the reason is longer than {MAX_WHY_CHARS} characters")));
        }
        let latest = self.store().latest_evaluation(campaign_id).await?;
        let verdict = ClaimVerdict {
            claim_id,
            accepted,
            by: by.clone(),
            reason: reason.map(str::to_string),
            evaluation_id: latest.as_ref().and_then(|e| e.id),
            holds: latest.as_ref().map(|e| e.verdict.holds),
            geomean_speedup: latest.as_ref().and_then(|e| e.verdict.geomean_speedup),
        };
        let event = Event::ClaimVerdict(verdict);
        let mut body = event.body();
        let (id, _) = self.record_event(campaign_id, None, None, event).await?;
        if let Some(r) = reason.filter(|_| !accepted) {
            self.ask(campaign_id, &format!("Your limit claim (claim id {claim_id}) was rejected by {by}: {r}")).await?;
        }
        body["id"] = id.into();
        body["state"] =
            if accepted { format!("stopped: limit accepted by {by}") } else { "limit rejected".into() }.into();
        Ok(body)
    }

    /// The limit a person accepted for this campaign, if the latest verdict
    /// on its limit claims is an acceptance.
    pub async fn accepted_limit(&self, campaign_id: &str) -> anyhow::Result<Option<AcceptedLimit>> {
        let verdicts = self.store().recent_events(campaign_id, kind::CLAIM_VERDICT, 1).await?;
        Ok(verdicts.first().filter(|v| v.payload["verdict"] == "accepted").map(|v| AcceptedLimit {
            claim_id: v.payload["claim_id"].as_i64().unwrap_or(0),
            by: v.payload["by"].as_str().unwrap_or("operator").to_string(),
        }))
    }

    /// Blocked stops in a row without a gain, counting the stop being
    /// judged (`this`: its decision and geomean) when given, as
    /// [`crate::gate::blocks_without_gain`] counts them.
    pub(super) async fn block_streak(
        &self,
        campaign_id: &str,
        this: Option<(&str, Option<f64>)>,
    ) -> anyhow::Result<u32> {
        let stops = self.store().list_stop_attempts(campaign_id).await?;
        let geomeans: std::collections::HashMap<i64, Option<f64>> = if stops.iter().any(|s| s.evaluation_id.is_some()) {
            self.store()
                .list_evaluations(campaign_id)
                .await?
                .into_iter()
                .filter_map(|e| Some((e.id?, e.verdict.geomean_speedup)))
                .collect()
        } else {
            Default::default()
        };
        let mut seq: Vec<(&str, Option<f64>)> = stops
            .iter()
            .map(|s| (s.decision.as_str(), s.evaluation_id.and_then(|id| geomeans.get(&id).copied().flatten())))
            .collect();
        seq.extend(this);
        Ok(crate::gate::blocks_without_gain(&seq))
    }

    /// The integrity checks escalated under pressure: past `[gate]
    /// remind_after_blocks` blocked stops without a gain, a candidate that
    /// passes is re-evaluated with a fresh seed (a gain that does not
    /// reproduce fails the predicate) and the lines it added since the
    /// initial kernel are scanned for timing or harness detection, raised as
    /// a `suspicious_gain` finding (`pressure_scan`). The evaluation as it
    /// then stands.
    pub(super) async fn pressure_checks(
        &self,
        campaign_id: &str,
        spec: &crate::campaign::CampaignSpec,
        eval: crate::evaluation::Evaluation,
    ) -> anyhow::Result<crate::evaluation::Evaluation> {
        if !eval.verdict.holds || spec.mode == crate::campaign::Mode::Audit {
            return Ok(eval);
        }
        let streak = self.block_streak(campaign_id, None).await?;
        if streak < spec.gate.remind_after_blocks.max(1) {
            return Ok(eval);
        }
        tracing::info!(campaign = %campaign_id, streak, "a passing candidate after a block streak: escalated checks");
        let checked = {
            let lock = self.eval_lock(campaign_id);
            let _guard = lock.lock().await;
            super::recheck::recheck(self, campaign_id, spec, &eval).await?
        };
        let first = self
            .store()
            .list_evaluations(campaign_id)
            .await?
            .into_iter()
            .find(|e| e.origin == crate::evaluation::Origin::Workspace);
        if let Some(first) = first.filter(|f| f.tree != eval.tree) {
            let repo = crate::snapshot::store_path(self.data_dir(), campaign_id);
            let (from, to) = (first.tree.clone(), eval.tree.clone());
            let diff =
                tokio::task::spawn_blocking(move || crate::moments::edit_loop::git_diff(&repo, &from, &to)).await?;
            match diff {
                Ok(d) => {
                    let found = crate::moments::pressure::scan(&d.added, 10);
                    if !found.is_empty() {
                        let f = Finding {
                            moment: "suspicious_gain".into(),
                            detector: "pressure_scan".into(),
                            evaluations: eval.id.into_iter().collect(),
                            scenarios: vec![],
                            detail: format!(
                                "after {streak} blocked stops without a gain, the candidate's added lines: {}",
                                found.join("; ")
                            ),
                            facts: [
                                ("blocks_without_gain".to_string(), streak.to_string()),
                                ("findings".to_string(), found.len().to_string()),
                            ]
                            .into(),
                        };
                        let count = self.store().count_evaluations(campaign_id).await? as usize;
                        super::moments::raise(self, campaign_id, spec, &f, "numeric", count).await?;
                    }
                }
                Err(e) => tracing::warn!(campaign = %campaign_id, error = %e, "the pressure scan's diff"),
            }
        }
        Ok(checked)
    }
}

/// The evidence files' limits, with errors that say which file and why.
pub(super) fn check_evidence(files: &[ClaimFile]) -> Result<()> {
    if files.len() > MAX_EVIDENCE_FILES {
        return Err(SupervisorError::Invalid(format!(
            "{} evidence files: at most {MAX_EVIDENCE_FILES} a claim",
            files.len()
        )));
    }
    for f in files {
        if f.name.trim().is_empty() || f.name.chars().count() > 200 {
            return Err(SupervisorError::Invalid("an evidence file needs a name of 1 to 200 characters".into()));
        }
        if f.text.len() > MAX_EVIDENCE_BYTES {
            return Err(SupervisorError::Invalid(format!(
                "evidence file `{}` is {} bytes: at most {MAX_EVIDENCE_BYTES} a file (attach a summary or an excerpt)",
                f.name,
                f.text.len()
            )));
        }
    }
    Ok(())
}
