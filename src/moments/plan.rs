//! What becomes of a finding, as data: the rules `app/moments.rs` carries
//! out against the store, and `gadfly replay` (`crate::replay`) against a
//! recorded timeline, so both decide with the same code. Cooldowns, the
//! moments a stop holds back, repeated claims, the claims only recorded,
//! the action by mode, and which words were classified already.

use std::collections::HashMap;

use crate::campaign::Mode;

use super::detect::Finding;

/// How long a message read from the agent's stream or transcript waits
/// before it is classified. An agent's last words before it stops reach the
/// Stop hook too, which classifies them at once and asks the moment's
/// question in its block reason; the grace lets the hook see them first, so
/// a claim made while stopping is not asked about twice, by two paths.
pub const STREAM_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// How long a classified message is remembered, so that the stream and the
/// Stop hook handle the same words once.
pub const SEEN_FOR: std::time::Duration = std::time::Duration::from_secs(120);

/// A moment recorded earlier, as the rules read it (the `moment` events'
/// `moment`, `detector`, `source` and `evaluation_count`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recorded<'a> {
    pub moment: &'a str,
    pub detector: &'a str,
    pub source: &'a str,
    pub evaluation_count: Option<u64>,
}

/// How many recorded moments the rules look back on (the latest ones).
pub const LOOK_BACK: usize = 50;

/// Whether `detector` found something within the last `cooldown`
/// evaluations (`count`: the campaign's evaluations now). `recent`: the
/// latest recorded moments, newest first.
pub fn in_cooldown(recent: &[Recorded], detector: &str, count: usize, cooldown: usize) -> bool {
    recent.iter().any(|e| e.detector == detector && e.evaluation_count.is_some_and(|c| (c as usize) + cooldown > count))
}

/// What becomes of a detector's finding after an evaluation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FindingPlan {
    /// The same detector spoke within the cooldown: nothing is recorded.
    Cooldown,
    /// A stop whose words show the same moment asks it: recorded with no
    /// question of its own.
    Held,
    /// Recorded and acted on by mode.
    Raise,
}

/// Why a held finding asks no question (its moment event's `no_question`).
pub const HELD_WHY: &str = "asked at the stop, whose claim shows the same moment";

/// The plan for one finding of an evaluation (see [`FindingPlan`]).
pub fn plan_finding(f: &Finding, recent: &[Recorded], held: &[String], count: usize, cooldown: usize) -> FindingPlan {
    if in_cooldown(recent, &f.detector, count, cooldown) {
        FindingPlan::Cooldown
    } else if held.contains(&f.moment) {
        FindingPlan::Held
    } else {
        FindingPlan::Raise
    }
}

/// Whether a claim repeats words already challenged: a question for its
/// moment reached the agent (`question_delivered`: when the latest did,
/// before these words) and no evaluation came after it (`last_evaluation`:
/// when the latest was made). Words written before the question was
/// delivered are not a repeat, nor words after fresh evidence, nor a
/// second sentence of one message ([`crate::moments::claims_in`] gives one
/// moment per message and kind). `T`: the daemon's timestamps, a replay's
/// clock.
pub fn repeated_claim<T: PartialOrd>(question_delivered: Option<T>, last_evaluation: Option<T>) -> bool {
    match (question_delivered, last_evaluation) {
        (Some(d), Some(e)) => e <= d,
        (Some(_), None) => true,
        (None, _) => false,
    }
}

/// Why a claim moment to be asked by mode is recorded only, if it is: a
/// completion claim is judged at the stop itself, a moment whose question
/// already waits is not asked again, and a correctness dismissal is asked
/// only when the campaign's latest evaluation (`latest_failure`, its
/// [`crate::evaluation::Evaluation::failure_kind`]) shows a wrong result
/// to wave away ([`DISMISSAL_UNSUPPORTED`]); a gain claimed in words is
/// asked only when gadfly's latest evaluation measured a new best
/// ([`super::gain_claim`], whose facts the finding carries).
pub fn claim_record_only(f: &Finding, waiting: bool, latest_failure: Option<&str>) -> Option<&'static str> {
    let moment = f.moment.as_str();
    if moment == "completion_claim" {
        Some("judged at the stop itself")
    } else if waiting {
        Some("a question for this moment already waits")
    } else if moment == "correctness_dismissal" && !latest_failure.is_some_and(|k| WRONG_RESULTS.contains(&k)) {
        Some(DISMISSAL_UNSUPPORTED)
    } else if super::gain_claim::unmeasured(f) {
        Some(super::gain_claim::GAIN_UNMEASURED)
    } else {
        None
    }
}

/// The failures a dismissal can wave away: results the harness judged
/// wrong, or a scenario gone ([`crate::evaluation::FAILURE_KINDS`]); not a
/// build error or a crash, nor a passing evaluation.
const WRONG_RESULTS: [&str; 4] = ["missing_scenario", "far_from_tolerance", "near_tolerance", "wrong_values"];

/// Why a correctness dismissal in the agent's words asks no question when
/// gadfly's own latest evaluation shows no wrong result. On real agent
/// text the classifier's dismissals were right about one time in nine
/// (tests/data/moments/loso.txt): a failed experiment explained and
/// dropped, a crash blamed on memory, a test log read aloud; and the
/// questions a dismissal asks (a tolerance changed, the last passing
/// version) fit only a check failing on values. The moment is recorded all
/// the same; a wrong result, when gadfly measures one, is its own moment.
pub const DISMISSAL_UNSUPPORTED: &str =
    "no wrong result in the latest evaluation for these words to wave away (a dismissal is asked when gadfly measures one)";

/// A repeated claim is escalated (a `moment.escalated`), unless it is a
/// completion claim.
pub fn escalates(moment: &str, repeated: bool) -> bool {
    repeated && moment != "completion_claim"
}

/// Why a claim is escalated.
pub const ESCALATED_WHY: &str = "the claim was repeated without fresh evidence (no new evaluation since its question)";

/// How a raised moment is acted on, by the campaign's mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Act {
    /// Autonomous: a question picked (for the moment's groups) and queued.
    Queue,
    /// Human: bank questions offered to the person.
    Suggest,
    /// Audit: recorded only.
    Record,
}

pub fn act_for(mode: Mode) -> Act {
    match mode {
        Mode::Autonomous => Act::Queue,
        Mode::Human => Act::Suggest,
        Mode::Audit => Act::Record,
    }
}

/// How many suggestions a person is offered for a moment.
pub const SUGGESTIONS: usize = 3;

/// Which words were classified lately, by (campaign, session, text): the
/// stream and the Stop hook carry the same last words, handled once. `T`
/// is the clock: the daemon's `Instant`, a replay's timeline seconds.
pub struct Seen<T> {
    map: HashMap<(String, String, [u8; 32]), T>,
}

impl<T> Default for Seen<T> {
    fn default() -> Self {
        Seen { map: HashMap::new() }
    }
}

impl<T: Copy> Seen<T> {
    /// True the first time these words are seen; `expired(at)` says when
    /// a sighting at `at` is forgotten (after [`SEEN_FOR`]).
    pub fn first_sight(
        &mut self,
        campaign_id: &str,
        session: Option<&str>,
        text: &str,
        now: T,
        expired: impl Fn(T) -> bool,
    ) -> bool {
        use sha2::Digest;
        self.map.retain(|_, at| !expired(*at));
        let key =
            (campaign_id.to_string(), session.unwrap_or("").to_string(), sha2::Sha256::digest(text.trim()).into());
        self.map.insert(key, now).is_none()
    }
}

/// Why a withheld moment asked nothing (its `moment` event's `no_question`).
pub const WITHHELD_WHY: &str =
    "withheld: no question at this moment, drawn by [questions] withhold, so that gadfly bank stats can compare what follows a question with what follows none";

/// Whether this moment's bank question is withheld (`[questions]
/// withhold` = `share`, drawn by [`withhold_draw`]), for the daemon
/// (`app/moments.rs`) and `gadfly replay` alike. Only a numeric moment's
/// own bank question may be: never a claim's challenge question (a claim
/// the agent made is always answered), never a beam's new-family question,
/// never the campaign's start (no evaluation before it, so nothing to
/// measure what follows against), and never a person's question or the
/// gate's (they do not come through here).
pub fn withheld(campaign_id: &str, share: f64, f: &Finding, moment: &crate::events::Moment) -> bool {
    if moment.claim.is_some() || f.moment == "start" {
        return false;
    }
    let count = match &moment.evidence {
        crate::events::MomentEvidence::Finding { evaluation_count, .. } => *evaluation_count,
        crate::events::MomentEvidence::Family { .. } => return false,
    };
    withhold_draw(campaign_id, &f.moment, &f.detector, &f.detail, count, share)
}

/// Whether a moment is left without its question: a draw of `share` from
/// a seed of the campaign, the moment, its detector, its detail (two idle
/// plateaus between the same evaluations differ by their count of tool
/// calls) and the campaign's evaluation count. Random across campaigns and
/// moments, yet the same for the same record (the `moment` event holds
/// each), so a replay of the campaign can draw it again.
pub fn withhold_draw(
    campaign_id: &str,
    moment: &str,
    detector: &str,
    detail: &str,
    evaluation_count: usize,
    share: f64,
) -> bool {
    use rand::{Rng, SeedableRng};
    use std::hash::{Hash, Hasher};
    if share <= 0.0 {
        return false;
    }
    let mut h = std::collections::hash_map::DefaultHasher::new();
    ("withhold", campaign_id, moment, detector, detail, evaluation_count).hash(&mut h);
    rand::rngs::StdRng::seed_from_u64(h.finish()).gen::<f64>() < share
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec<'a>(moment: &'a str, detector: &'a str, source: &'a str, count: u64) -> Recorded<'a> {
        Recorded { moment, detector, source, evaluation_count: Some(count) }
    }

    fn finding(moment: &str, detector: &str) -> Finding {
        Finding {
            moment: moment.into(),
            detector: detector.into(),
            evaluations: vec![],
            scenarios: vec![],
            detail: String::new(),
            ..Default::default()
        }
    }

    #[test]
    fn a_detector_that_spoke_within_the_cooldown_is_quiet() {
        let recent = [rec("plateau", "plateau", "numeric", 5)];
        assert!(in_cooldown(&recent, "plateau", 7, 3), "5 + 3 > 7");
        assert!(!in_cooldown(&recent, "plateau", 8, 3), "5 + 3 = 8: cooled down");
        assert!(!in_cooldown(&recent, "geomean_jump", 6, 3), "another detector");
        let held = vec!["plateau".to_string()];
        assert_eq!(plan_finding(&finding("plateau", "plateau"), &recent, &held, 6, 3), FindingPlan::Cooldown);
        assert_eq!(plan_finding(&finding("plateau", "plateau"), &recent, &held, 9, 3), FindingPlan::Held);
        assert_eq!(plan_finding(&finding("plateau", "plateau"), &recent, &[], 9, 3), FindingPlan::Raise);
    }

    fn claim(moment: &str) -> Finding {
        Finding { moment: moment.into(), ..Default::default() }
    }

    /// A gain claimed in words with no gain measured asks nothing; one
    /// with a measured gain, or with no measurement yet, is asked.
    #[test]
    fn a_gain_in_words_is_asked_only_over_a_measured_gain() {
        let with = |m: &str| Finding {
            facts: [(super::super::gain_claim::MEASURED_GAIN.to_string(), m.to_string())].into(),
            ..claim("suspicious_gain")
        };
        assert_eq!(claim_record_only(&with("none"), false, None), Some(super::super::gain_claim::GAIN_UNMEASURED));
        assert_eq!(claim_record_only(&with("inside_noise"), false, None), None);
        assert_eq!(claim_record_only(&with("beyond_noise"), false, None), None);
        assert_eq!(claim_record_only(&claim("suspicious_gain"), false, None), None, "nothing measured yet");
        assert_eq!(claim_record_only(&with("none"), true, None), Some("a question for this moment already waits"));
    }

    #[test]
    fn a_claim_is_repeated_only_after_its_question_reached_the_agent_and_no_evaluation_came() {
        assert!(repeated_claim(Some(10), Some(5)), "delivered at 10, nothing measured since");
        assert!(repeated_claim(Some(10), Some(10)), "measured before the delivery at the same time");
        assert!(!repeated_claim(Some(10), Some(11)), "fresh evidence since");
        assert!(!repeated_claim(None, Some(1)), "never delivered: not a repeat");
        assert!(!repeated_claim::<u64>(None, None));
        assert!(repeated_claim(Some("2026-12-07T01:00:00.000Z"), None));
        assert!(escalates("limit_claim", true) && !escalates("completion_claim", true) && !escalates("x", false));
        assert_eq!(claim_record_only(&claim("completion_claim"), false, None), Some("judged at the stop itself"));
        assert_eq!(
            claim_record_only(&claim("limit_claim"), true, None),
            Some("a question for this moment already waits")
        );
        assert_eq!(claim_record_only(&claim("limit_claim"), false, None), None);
        // A dismissal is asked when gadfly measured a wrong result, not of a
        // passing evaluation, a crash or a build error.
        for wrong in ["wrong_values", "near_tolerance", "far_from_tolerance", "missing_scenario"] {
            assert_eq!(claim_record_only(&claim("correctness_dismissal"), false, Some(wrong)), None, "{wrong}");
        }
        for not_wrong in [None, Some("crash"), Some("build_error")] {
            assert_eq!(
                claim_record_only(&claim("correctness_dismissal"), false, not_wrong),
                Some(DISMISSAL_UNSUPPORTED),
                "{not_wrong:?}"
            );
        }
        for k in WRONG_RESULTS {
            assert!(crate::evaluation::FAILURE_KINDS.contains(&k), "{k}");
        }
    }

    #[test]
    fn words_are_seen_once_until_they_are_forgotten() {
        let mut seen: Seen<f64> = Seen::default();
        let expired = |now: f64| move |at: f64| now - at >= SEEN_FOR.as_secs_f64();
        assert!(seen.first_sight("c", Some("s"), "Done.", 0.0, expired(0.0)));
        assert!(!seen.first_sight("c", Some("s"), " Done. ", 10.0, expired(10.0)), "trimmed: the same words");
        assert!(seen.first_sight("c", Some("t"), "Done.", 10.0, expired(10.0)), "another session");
        assert!(seen.first_sight("c", Some("s"), "Done.", 200.0, expired(200.0)), "forgotten after SEEN_FOR");
        assert_eq!(act_for(Mode::Autonomous), Act::Queue);
        assert_eq!(act_for(Mode::Audit), Act::Record);
    }

    #[test]
    fn the_withhold_draw_takes_its_share_and_is_reproducible() {
        let drawn = (0..4000).filter(|i| withhold_draw(&format!("c-{i}"), "plateau", "plateau", "d", 3, 0.1)).count();
        assert!((300..500).contains(&drawn), "{drawn} of 4000 at 0.1");
        assert_eq!(
            withhold_draw("c-1", "plateau", "plateau", "d", 3, 0.5),
            withhold_draw("c-1", "plateau", "plateau", "d", 3, 0.5)
        );
        assert!((0..100).all(|i| !withhold_draw(&format!("c-{i}"), "plateau", "plateau", "d", i, 0.0)));
        assert!((0..100).all(|i| withhold_draw(&format!("c-{i}"), "plateau", "plateau", "d", i, 1.0)));
        // Two idle plateaus between the same evaluations are two draws.
        let idle = |c: &str, detail: &str| withhold_draw(c, "plateau", "tool_calls_without_evaluation", detail, 4, 0.5);
        assert!((0..200).map(|i| format!("c-{i}")).any(|c| idle(&c, "60 tool calls") != idle(&c, "120 tool calls")));
    }
}
