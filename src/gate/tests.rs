//! Unit tests of the stop gate: the pure stop decision, block reasons and question choice.

use super::*;
use crate::campaign::PredicateSpec;
use crate::predicate::judge;
use crate::results::ScenarioResult;

fn eval(results: &[(&str, bool, f64)]) -> Evaluation {
    eval_of(results, &["gone"])
}

/// An evaluation of `results`, with the `missing` scenarios required
/// but not measured.
fn eval_of(results: &[(&str, bool, f64)], missing: &[&str]) -> Evaluation {
    let spec = PredicateSpec { correct: true, min_speedup: 1.0, min_geomean_speedup: Some(1.1), ..Default::default() };
    let names: Vec<String> =
        results.iter().map(|r| r.0.to_string()).chain(missing.iter().map(|m| m.to_string())).collect();
    let measured: Vec<ScenarioResult> = results
        .iter()
        .map(|(n, c, s)| ScenarioResult {
            scenario: n.to_string(),
            correct: *c,
            time_us: 100.0 / s,
            baseline_us: 100.0,
            max_abs_err_ref: None,
            max_abs_err_hi: None,
            tolerance: None,
            rtol: None,
            max_tol_ratio: None,
            compare_us: None,
            bound_us: None,
            samples: None,
            cv: None,
            reason: None,
            cannot_tell: None,
            baseline_cv: None,
        })
        .collect();
    Evaluation {
        id: Some(1),
        tree: "0123456789abcdef".into(),
        verdict: judge(&spec, &names, &measured, vec![]),
        build: None,
        run: None,
        violations: vec![],
        duration_ms: 1,
        created_at: String::new(),
        cached: false,
        origin: Default::default(),
    }
}

// -----------------------------------------------------------------
// plan_stop: the stop decision, data in, data out.
// -----------------------------------------------------------------

/// b is incorrect: the predicate fails (a correctness question fits).
fn failing() -> Evaluation {
    eval_of(&[("a", true, 2.0), ("b", false, 2.0)], &[])
}

fn holding() -> Evaluation {
    let e = eval_of(&[("a", true, 2.0), ("b", true, 2.0)], &[]);
    assert!(e.verdict.holds);
    e
}

/// Every scenario correct, b too slow: the predicate fails on speed.
fn slow() -> Evaluation {
    let e = eval_of(&[("a", true, 2.0), ("b", true, 0.5)], &[]);
    assert!(!e.verdict.holds && !incorrect(&e));
    e
}

fn person(id: i64) -> Waiting {
    Waiting { id, human: true, moment: None }
}

fn queued(id: i64, moment: &str) -> Waiting {
    Waiting { id, human: false, moment: Some(moment.into()) }
}

fn stop<'a>(mode: Mode, judged: Judged<'a>, waiting: Vec<Waiting>, claims: &[&'a str]) -> StopInput<'a> {
    StopInput {
        campaign_id: "c1",
        mode,
        predicate: Box::leak(Box::default()),
        judged,
        tampered: &[],
        waiting,
        claims: claims.to_vec(),
    }
}

fn pick(moment: &str, groups: &[&'static str]) -> Option<Ask> {
    Some(Ask::Pick { moment: moment.into(), groups: groups.to_vec() })
}

use ClaimPlan::{Ask as AskByMode, AskedAtStop};

#[test]
fn a_persons_oldest_question_comes_first() {
    let e = failing();
    let waiting = vec![queued(1, "correctness_dismissal"), person(2), person(3), queued(4, "suspicious_gain")];
    // The stop's words show a claimed limit too: the person still wins.
    let plan = plan_stop(&stop(Mode::Autonomous, Judged::Evaluated(&e), waiting, &["limit_claim"]));
    assert_eq!(plan.decision, Decision::Block);
    assert_eq!(plan.ask, Some(Ask::Queued(2)), "the oldest person's question");
    assert_eq!(plan.claims, [AskByMode], "the claimed limit lost the stop: raised by mode");
    assert_eq!(plan.reason, [ReasonPart::Verdict]);
}

#[test]
fn then_the_first_claim_moment_of_the_stops_words_in_autonomous_mode() {
    let e = slow();
    let waiting = vec![
        queued(1, "start"),
        queued(2, "correctness_dismissal"),
        queued(3, "correctness_dismissal"),
        queued(4, "suspicious_gain"),
    ];
    // The classifier's order (dismissal, then limit, then gain); a
    // completion claim is never the one asked. The latest question
    // waiting for that moment is carried.
    let claims = ["correctness_dismissal", "limit_claim", "completion_claim"];
    let plan = plan_stop(&stop(Mode::Autonomous, Judged::Evaluated(&e), waiting.clone(), &claims));
    assert_eq!(plan.ask, Some(Ask::Queued(3)));
    assert_eq!(plan.claims, [AskedAtStop, AskByMode, AskByMode]);
    // No question waits for it: a fresh pick for that moment, in its groups.
    let claims = ["completion_claim", "limit_claim", "suspicious_gain"];
    let plan = plan_stop(&stop(Mode::Autonomous, Judged::Evaluated(&e), waiting.clone(), &claims));
    assert_eq!(plan.ask, pick("limit_claim", groups_for("limit_claim")));
    assert_eq!(plan.claims, [AskByMode, AskedAtStop, AskByMode]);
    // Human mode: the words ask nothing themselves, and no bank
    // question is sent (the moments offer suggestions to the person).
    let plan = plan_stop(&stop(Mode::Human, Judged::Evaluated(&e), waiting, &claims));
    assert_eq!((plan.decision, plan.ask), (Decision::Block, None));
    assert_eq!(plan.claims, [AskByMode; 3]);
}

#[test]
fn then_the_latest_queued_moment_question_never_the_start_one() {
    let e = slow();
    let waiting = vec![queued(1, "correctness_dismissal"), queued(2, "suspicious_gain"), queued(3, "start")];
    let plan = plan_stop(&stop(Mode::Autonomous, Judged::Evaluated(&e), waiting, &["completion_claim"]));
    assert_eq!(plan.ask, Some(Ask::Queued(2)));
    assert_eq!(plan.claims, [AskByMode], "a completion claim is judged by the stop itself");
    // Only the start question waits: a completion-claim pick.
    let e = failing();
    let plan = plan_stop(&stop(Mode::Autonomous, Judged::Evaluated(&e), vec![queued(3, "start")], &[]));
    assert_eq!(plan.ask, pick("completion_claim", &["correctness"]));
}

#[test]
fn then_a_completion_claim_pick_preferring_the_groups_that_fit_what_failed() {
    let cases = [
        (eval_of(&[("a", true, 2.0), ("b", false, 2.0)], &[]), vec!["correctness"]),
        (eval_of(&[("a", true, 2.0), ("b", true, 0.5)], &[]), vec!["gap_analysis", "bound", "measurement"]),
        (eval_of(&[("a", true, 2.0)], &["gone"]), vec!["benchmark_validity", "measurement", "correctness"]),
    ];
    for (e, groups) in cases {
        assert!(!e.verdict.holds);
        let plan = plan_stop(&stop(Mode::Autonomous, Judged::Evaluated(&e), vec![], &[]));
        assert_eq!(plan.ask, pick("completion_claim", &groups));
        assert_eq!(plan.reason, [ReasonPart::Verdict]);
    }
    assert!(prefer_groups(&holding()).is_empty());
}

#[test]
fn allowed_when_the_predicate_holds_and_no_persons_question_waits() {
    let e = holding();
    // Moment questions do not block; the claims are recorded only.
    let waiting = vec![queued(1, "start"), queued(2, "plateau")];
    let claims = ["limit_claim", "completion_claim"];
    let plan = plan_stop(&stop(Mode::Autonomous, Judged::Evaluated(&e), waiting, &claims));
    let allowed = ClaimPlan::RecordOnly("the stop was allowed: the predicate holds");
    assert_eq!(
        plan,
        StopPlan {
            decision: Decision::Allow,
            ask: None,
            claims: vec![allowed, allowed],
            reason: vec![],
            expire: vec![1, 2],
        },
        "nobody is left to answer the waiting questions: they expire"
    );
    let input = stop(Mode::Autonomous, Judged::Evaluated(&e), vec![], &[]);
    assert_eq!(plan_stop(&input).reason_text(&input, None), None);
    // A person's question waiting blocks it, and is carried.
    let plan = plan_stop(&stop(Mode::Autonomous, Judged::Evaluated(&e), vec![person(7)], &claims));
    assert_eq!((plan.decision, plan.ask), (Decision::Block, Some(Ask::Queued(7))));
    assert_eq!(plan.claims, [AskByMode; 2]);
}

#[test]
fn human_mode_blocks_a_failing_stop_and_allows_a_holding_one() {
    let (bad, good) = (failing(), holding());
    let plan = plan_stop(&stop(Mode::Human, Judged::Evaluated(&bad), vec![queued(1, "start")], &["limit_claim"]));
    assert_eq!(plan.decision, Decision::Block);
    assert_eq!(plan.ask, None, "no bank question in human mode");
    assert_eq!(plan.reason, [ReasonPart::Verdict]);
    assert_eq!(plan.claims, [AskByMode]);
    let plan = plan_stop(&stop(Mode::Human, Judged::Evaluated(&good), vec![], &["limit_claim"]));
    assert_eq!((plan.decision, plan.ask), (Decision::Allow, None));
    assert_eq!(plan.claims, [AskByMode], "asked by mode: a person is there to answer");
    let plan = plan_stop(&stop(Mode::Human, Judged::Evaluated(&good), vec![person(3)], &[]));
    assert_eq!((plan.decision, plan.ask), (Decision::Block, Some(Ask::Queued(3))));
}

#[test]
fn audit_mode_only_records_even_with_a_persons_question_waiting() {
    for e in [failing(), holding()] {
        let plan = plan_stop(&stop(
            Mode::Audit,
            Judged::Evaluated(&e),
            vec![person(1), queued(2, "plateau")],
            &["limit_claim"],
        ));
        assert_eq!(
            plan,
            StopPlan { decision: Decision::Record, ask: None, claims: vec![AskByMode], reason: vec![], expire: vec![] }
        );
    }
}

#[test]
fn a_stop_that_cannot_be_evaluated_blocks_with_no_question_and_is_recorded_in_audit_mode() {
    let why = "taking a snapshot of the workspace: gone";
    let text = format!(
        "gadfly could not evaluate the candidate, so the stop predicate is not known to hold: {why}. Fix what this names (or ask the person supervising), then try to stop again."
    );
    for (mode, decision) in
        [(Mode::Autonomous, Decision::Block), (Mode::Human, Decision::Block), (Mode::Audit, Decision::Record)]
    {
        let input = stop(mode, Judged::Unevaluated(why), vec![person(1)], &["limit_claim"]);
        let plan = plan_stop(&input);
        assert_eq!(plan.decision, decision, "{mode:?}");
        assert_eq!(plan.ask, None, "no question without an evaluation");
        assert_eq!(plan.reason, [ReasonPart::Unevaluated(text.clone())], "kept in audit mode too");
        assert_eq!(plan.reason_text(&input, None).as_deref(), Some(text.as_str()));
        assert_eq!(plan.claims, [AskByMode]);
    }
}

#[test]
fn tampered_hooks_block_outside_audit_mode_their_line_first() {
    let tampered = ["hooks were disabled".to_string(), "the hook binary changed".to_string()];
    let line = "gadfly: you may not stop: the hooks that supervise this campaign were tampered with: hooks were disabled; the hook binary changed. Restore them (the person supervising can run `gadfly attach c1` again), then try to stop again.";
    let (good, bad) = (holding(), failing());
    // The predicate holds: blocked, with the tamper line alone and no question.
    let mut input = stop(Mode::Autonomous, Judged::Evaluated(&good), vec![queued(1, "plateau")], &["limit_claim"]);
    input.tampered = &tampered;
    let plan = plan_stop(&input);
    assert_eq!(plan.decision, Decision::Block);
    assert_eq!(plan.ask, None);
    assert_eq!(plan.reason, [ReasonPart::Tampered(line.into())]);
    assert_eq!(plan.reason_text(&input, None), Some(format!("{line}\n")));
    assert_eq!(plan.claims, [AskByMode], "blocked: the claim is asked by mode");
    assert!(plan.expire.is_empty(), "blocked: the plateau question still waits");
    // The predicate fails: the tamper line, then the verdict's reason and question.
    let mut input = stop(Mode::Autonomous, Judged::Evaluated(&bad), vec![], &[]);
    input.tampered = &tampered;
    let plan = plan_stop(&input);
    assert_eq!(plan.decision, Decision::Block);
    assert_eq!(plan.ask, pick("completion_claim", &["correctness"]));
    assert_eq!(plan.reason, [ReasonPart::Tampered(line.into()), ReasonPart::Verdict]);
    let q = Question {
        queued_id: None,
        source: "correct-001".into(),
        moment: "completion_claim".into(),
        text: "Why?".into(),
    };
    let text = plan.reason_text(&input, Some(&q)).unwrap();
    let (first, rest) = text.split_once('\n').unwrap();
    assert_eq!(first, line);
    assert_eq!(rest, block_reason(&bad, input.predicate, Some(&q)));
    // Not evaluated: the tamper line, then why.
    let mut input = stop(Mode::Autonomous, Judged::Unevaluated("no workspace"), vec![], &[]);
    input.tampered = &tampered;
    let plan = plan_stop(&input);
    assert!(matches!(plan.reason.as_slice(), [ReasonPart::Tampered(_), ReasonPart::Unevaluated(_)]));
    // Audit mode: recorded, no reason.
    for judged in [Judged::Evaluated(&good), Judged::Evaluated(&bad)] {
        let mut input = stop(Mode::Audit, judged, vec![], &[]);
        input.tampered = &tampered;
        let plan = plan_stop(&input);
        assert_eq!((plan.decision, plan.ask, plan.reason), (Decision::Record, None, vec![]));
    }
}

#[test]
fn a_question_delivered_elsewhere_meanwhile_gives_way_to_the_next_choice() {
    let (bad, good) = (slow(), holding());
    let waiting = vec![person(1), person(2), queued(3, "limit_claim"), queued(4, "plateau")];
    let mut input = stop(Mode::Autonomous, Judged::Evaluated(&bad), waiting, &["limit_claim"]);
    let mut asked = vec![];
    loop {
        let plan = plan_stop(&input);
        match plan.ask {
            Some(Ask::Queued(id)) => {
                asked.push((id, plan.claims.clone()));
                input.delivered_elsewhere(id);
            }
            other => {
                assert_eq!(other, pick("limit_claim", groups_for("limit_claim")));
                break;
            }
        }
    }
    // The next person's question, then the claim moment's waiting
    // question, then a fresh pick for it (the plateau question waits).
    assert_eq!(asked, [(1, vec![AskByMode]), (2, vec![AskByMode]), (3, vec![AskedAtStop])]);
    assert_eq!(input.waiting, [queued(4, "plateau")]);
    // A person's question was all that blocked a holding stop: once it
    // is delivered elsewhere, the stop is allowed.
    let mut input = stop(Mode::Autonomous, Judged::Evaluated(&good), vec![person(5)], &[]);
    assert_eq!(plan_stop(&input).ask, Some(Ask::Queued(5)));
    input.delivered_elsewhere(5);
    let plan = plan_stop(&input);
    assert_eq!((plan.decision, plan.ask, plan.reason), (Decision::Allow, None, vec![]));
    assert!(plan.expire.is_empty(), "the person's question was delivered, not expired");
    // An id not waiting changes nothing.
    let before = plan_stop(&input);
    input.delivered_elsewhere(99);
    assert_eq!(plan_stop(&input), before);
}

#[test]
fn a_plan_without_its_question_asks_the_claim_moment_by_mode() {
    let e = slow();
    let input = stop(Mode::Autonomous, Judged::Evaluated(&e), vec![], &["limit_claim", "suspicious_gain"]);
    let plan = plan_stop(&input);
    assert_eq!(plan.claims, [AskedAtStop, AskByMode]);
    let bare = plan.clone().without_question();
    assert_eq!(bare, StopPlan { ask: None, claims: vec![AskByMode, AskByMode], ..plan });
}

/// Issue #32: on a kernel wrong everywhere, the stop's words "10x
/// faster" (a claimed gain) took the stop from the correctness question
/// a regression had queued. On an incorrect candidate a correctness
/// question wins over every benchmark or performance one.
#[test]
fn correctness_first_on_an_incorrect_candidate() {
    let (bad, slow) = (failing(), slow());
    let waiting = vec![queued(1, "correctness_dismissal"), queued(2, "suspicious_gain"), queued(3, "plateau")];
    let claims = ["suspicious_gain", "completion_claim"];
    let plan = plan_stop(&stop(Mode::Autonomous, Judged::Evaluated(&bad), waiting.clone(), &claims));
    assert_eq!(plan.ask, Some(Ask::Queued(1)), "the waiting correctness question, not the gain's");
    assert_eq!(plan.claims, [AskByMode, AskByMode], "the claimed gain is asked by mode");
    // The same stop on a correct (slow) candidate: the claimed gain wins.
    let plan = plan_stop(&stop(Mode::Autonomous, Judged::Evaluated(&slow), waiting, &claims));
    assert_eq!(plan.ask, Some(Ask::Queued(2)));
    assert_eq!(plan.claims, [AskedAtStop, AskByMode]);
    // No correctness question waits: a fresh one, never the claim's
    // groups (benchmark validity first) nor a waiting plateau question.
    let waiting = vec![queued(2, "suspicious_gain"), queued(3, "plateau")];
    let plan = plan_stop(&stop(Mode::Autonomous, Judged::Evaluated(&bad), waiting, &claims));
    assert_eq!(plan.ask, pick("completion_claim", &["correctness"]));
    assert_eq!(plan.claims, [AskByMode, AskByMode]);
    // Words that explain the failure away: that moment is the one asked,
    // with its latest waiting question, else a fresh pick for it.
    let waiting =
        vec![queued(1, "correctness_dismissal"), queued(4, "limit_claim"), queued(5, "correctness_dismissal")];
    let claims = ["correctness_dismissal", "limit_claim"];
    let plan = plan_stop(&stop(Mode::Autonomous, Judged::Evaluated(&bad), waiting, &claims));
    assert_eq!(plan.ask, Some(Ask::Queued(5)));
    assert_eq!(plan.claims, [AskedAtStop, AskByMode]);
    let plan = plan_stop(&stop(Mode::Autonomous, Judged::Evaluated(&bad), vec![queued(4, "limit_claim")], &claims));
    assert_eq!(plan.ask, pick("correctness_dismissal", &["correctness", "measurement"]));
    assert_eq!(plan.claims, [AskedAtStop, AskByMode]);
    // A person's question still comes first.
    let waiting = vec![queued(1, "correctness_dismissal"), person(6)];
    let plan = plan_stop(&stop(Mode::Autonomous, Judged::Evaluated(&bad), waiting, &["suspicious_gain"]));
    assert_eq!(plan.ask, Some(Ask::Queued(6)));
}

/// Issue #32: in human mode the person chooses every question; a
/// blocked stop carries theirs, or none (never a bank pick or a
/// question queued for a moment).
#[test]
fn human_mode_carries_only_a_persons_question() {
    let bad = failing();
    let waiting = vec![queued(1, "correctness_dismissal"), queued(2, "plateau")];
    for claims in [&["limit_claim", "completion_claim"][..], &["correctness_dismissal"], &[]] {
        let input = stop(Mode::Human, Judged::Evaluated(&bad), waiting.clone(), claims);
        let plan = plan_stop(&input);
        assert_eq!((plan.decision, &plan.ask), (Decision::Block, &None), "{claims:?}");
        assert_eq!(plan.claims, vec![AskByMode; claims.len()], "raised by mode: suggestions");
        let text = plan.reason_text(&input, None).unwrap();
        assert!(text.starts_with("gadfly: you may not stop yet.") && !text.contains("Question"), "{text}");
    }
    let mut with_person = waiting.clone();
    with_person.push(person(3));
    let plan = plan_stop(&stop(Mode::Human, Judged::Evaluated(&bad), with_person, &["limit_claim"]));
    assert_eq!(plan.ask, Some(Ask::Queued(3)));
}

/// Issue #32: questions queued for a campaign whose stop was allowed
/// waited for ever as "waiting". An allowed stop expires every question
/// still waiting (a suspicious gain's one queued by the allowing
/// evaluation included), with why; a block or an audit record expires
/// none.
#[test]
fn an_allowed_stop_expires_what_still_waits_with_why() {
    let (good, bad) = (holding(), failing());
    let waiting = vec![queued(1, "start"), queued(2, "plateau"), queued(3, "suspicious_gain")];
    for mode in [Mode::Autonomous, Mode::Human] {
        let plan = plan_stop(&stop(mode, Judged::Evaluated(&good), waiting.clone(), &["completion_claim"]));
        assert_eq!((plan.decision, plan.expire), (Decision::Allow, vec![1, 2, 3]), "{mode:?}");
    }
    for (mode, judged) in [
        (Mode::Autonomous, Judged::Evaluated(&bad)),
        (Mode::Human, Judged::Evaluated(&bad)),
        (Mode::Audit, Judged::Evaluated(&good)),
        (Mode::Autonomous, Judged::Unevaluated("gone")),
    ] {
        let plan = plan_stop(&stop(mode, judged, waiting.clone(), &[]));
        assert_ne!(plan.decision, Decision::Allow);
        assert!(plan.expire.is_empty(), "{mode:?}: {plan:?}");
    }
    assert_eq!(expiry_reason(Some("plateau"), true), "the stop was allowed");
    assert_eq!(expiry_reason(None, false), "the stop was allowed");
    assert_eq!(expiry_reason(Some("suspicious_gain"), false), "the stop was allowed");
    assert_eq!(
        expiry_reason(Some("suspicious_gain"), true),
        "the stop was allowed: gadfly's re-evaluation with another seed confirmed the gain"
    );
}

#[test]
fn decisions_by_mode() {
    assert_eq!(decide(Mode::Autonomous, false, false), Decision::Block);
    assert_eq!(decide(Mode::Human, true, false), Decision::Allow);
    assert_eq!(decide(Mode::Human, true, true), Decision::Block);
    assert_eq!(decide(Mode::Audit, false, true), Decision::Record);
}

#[test]
fn reason_names_every_failing_scenario_and_the_question() {
    let e = eval(&[("fast", true, 2.0), ("wrong", false, 3.0), ("slow", true, 0.5)]);
    let q = Question {
        queued_id: None,
        source: "bench-001".into(),
        moment: "completion_claim".into(),
        text: "Why?".into(),
    };
    let spec = PredicateSpec { min_geomean_speedup: Some(1.1), ..Default::default() };
    let r = block_reason(&e, &spec, Some(&q));
    assert!(r.contains("fails on 3 of 4 scenarios"), "{r}");
    for name in ["wrong", "slow", "gone"] {
        assert!(r.lines().any(|l| l.starts_with(name)), "{name} missing in {r}");
    }
    assert!(!r.lines().any(|l| l.starts_with("fast")), "{r}");
    assert!(r.contains("0.50x"));
    assert!(r.contains("Question (bench-001): Why?"));
}

#[test]
fn blocks_without_gain_count_from_the_last_gain_or_allow() {
    assert_eq!(blocks_without_gain(&[]), 0);
    // The first judged block sets the best; three more without gain.
    let stuck = [("block", Some(1.2)), ("block", Some(1.2)), ("block", Some(1.19)), ("block", None)];
    assert_eq!(blocks_without_gain(&stuck), 3);
    // A real gain starts the count again; a 0.05% gain is noise.
    let gained = [("block", Some(1.2)), ("block", Some(1.2)), ("block", Some(1.5)), ("block", Some(1.5005))];
    assert_eq!(blocks_without_gain(&gained), 1);
    // An allowed stop ends a streak.
    let allowed = [("block", Some(1.2)), ("block", Some(1.1)), ("allow", Some(2.0)), ("block", Some(1.0))];
    assert_eq!(blocks_without_gain(&allowed), 1);
    let limit = [("block", Some(1.2)), ("limit_accepted", None), ("block", Some(1.0))];
    assert_eq!(blocks_without_gain(&limit), 1);
}

#[test]
fn stops_the_daemon_did_not_judge_neither_add_to_nor_end_a_streak() {
    // The agent replays forged "blocked by the hook" records through its
    // hook token, and escapes the gate once: the streak of real blocks
    // stands (a reset would switch the escalated checks off). The first
    // block sets the best; two blocks without gain follow.
    let forged = [
        ("block", Some(1.2)),
        ("block", Some(1.2)),
        ("unavailable_block", None),
        ("unavailable_block", None),
        ("ungated", None),
        ("block", Some(1.1)),
    ];
    assert_eq!(blocks_without_gain(&forged), 2);
    // Nor do they count as blocks on their own.
    assert_eq!(blocks_without_gain(&[("unavailable_block", None), ("unavailable_block", None)]), 0);
    // An unknown decision is not a verdict either.
    assert_eq!(blocks_without_gain(&[("block", Some(1.0)), ("something_new", None), ("block", None)]), 1);
}

#[test]
fn the_block_reason_reminds_of_the_limit_claim_after_n_blocks_without_gain() {
    assert_eq!(limit_reminder(0, 3), None);
    assert_eq!(limit_reminder(2, 3), None, "below the threshold: nothing added");
    let r = limit_reminder(3, 3).expect("at the threshold");
    assert!(r.contains("3 blocked stops in a row without a gain"), "{r}");
    assert!(r.contains("\"$GADFLY_BIN\" claim limit --why"), "the exit, as the agent runs it: {r}");
    assert!(r.contains("--evidence FILE"), "{r}");
    assert!(r.contains("is recorded"), "editing what judges it is recorded: {r}");
    assert!(limit_reminder(7, 3).unwrap().contains("7 blocked stops"));
    // A threshold of 0 is read as 1.
    assert!(limit_reminder(1, 0).is_some());
}

// -----------------------------------------------------------------
// Questions that fit the failure (issue 46).
// -----------------------------------------------------------------

fn with_errors(mut e: Evaluation, scenario: &str, err: f64, tol: f64) -> Evaluation {
    for s in e.verdict.scenarios.iter_mut().filter(|s| s.scenario == scenario) {
        let m = s.measured.as_mut().unwrap();
        m.max_abs_err_ref = Some(err);
        m.tolerance = Some(tol);
    }
    e
}

#[test]
fn a_failure_is_told_by_its_kind() {
    assert_eq!(holding().failure_kind(), None);
    assert_eq!(failing().failure_kind(), Some("wrong_values"), "no figures to tell");
    assert_eq!(with_errors(failing(), "b", 3e-3, 1e-3).failure_kind(), Some("near_tolerance"));
    assert_eq!(with_errors(failing(), "b", 0.5, 1e-3).failure_kind(), Some("far_from_tolerance"));
    assert_eq!(with_errors(failing(), "b", f64::NAN, 1e-3).failure_kind(), Some("far_from_tolerance"));
    assert_eq!(eval(&[("a", true, 2.0)]).failure_kind(), Some("missing_scenario"));
    let step = |ok| {
        Some(crate::evaluation::Step {
            command: "make".into(),
            ok,
            exit: "status 2".into(),
            seconds: 1.0,
            output_tail: "kernel.c:3: error".into(),
        })
    };
    let mut built_wrong = eval_of(&[], &["a", "b"]);
    built_wrong.build = step(false);
    assert_eq!(built_wrong.failure_kind(), Some("build_error"));
    let mut crashed = eval_of(&[], &["a", "b"]);
    crashed.build = step(true);
    crashed.run = step(false);
    assert_eq!(crashed.failure_kind(), Some("crash"));
}

/// A build that failed or a run that crashed: the block quotes the error,
/// and no bank question rides on it (none can find a compiler's error).
#[test]
fn a_build_error_or_a_crash_asks_no_bank_question() {
    let mut e = eval_of(&[], &["a", "b"]);
    e.build = Some(crate::evaluation::Step {
        command: "make".into(),
        ok: false,
        exit: "status 2".into(),
        seconds: 1.0,
        output_tail: "kernel.c:3: error".into(),
    });
    let plan = plan_stop(&stop(Mode::Autonomous, Judged::Evaluated(&e), vec![], &[]));
    assert_eq!((plan.decision, plan.ask), (Decision::Block, None));
    // A person's question still goes out.
    let plan = plan_stop(&stop(Mode::Autonomous, Judged::Evaluated(&e), vec![person(4)], &[]));
    assert_eq!(plan.ask, Some(Ask::Queued(4)));
}

/// The correctness question at a stop fits the failure's kind: near the
/// tolerance, the numerics questions; far beyond it, the bug hunters;
/// never the other kind's.
#[test]
fn the_correctness_question_fits_the_kind_of_failure() {
    let bank = crate::bank::embedded();
    let dir = tempfile::tempdir().unwrap();
    std::process::Command::new("git").args(["init", "-q"]).current_dir(dir.path()).status().unwrap();
    let text = "name='t'\nworkspace='.'\n[harness]\nrun='x {results}'\nscenarios=['a','b']\n";
    let spec = crate::campaign::parse(text, "t.toml", dir.path()).unwrap();
    let stats = std::collections::HashMap::new();
    for (e, kind, fits) in [
        (with_errors(failing(), "b", 3e-3, 1e-3), "near_tolerance", "correct-010"),
        (with_errors(failing(), "b", 0.5, 1e-3), "far_from_tolerance", "correct-005"),
    ] {
        let ev = stop_evidence(Judged::Evaluated(&e), CORRECTNESS_MOMENT, None);
        assert_eq!(ev.facts.get("failure_kind").map(String::as_str), Some(kind));
        let req = select::Request {
            moment: CORRECTNESS_MOMENT,
            spec: &spec,
            asked: &[],
            prefer: &["correctness"],
            stats: &stats,
            seed: 3,
            evidence: Some(&ev),
        };
        let ranked = select::rank(&bank.entries, &req);
        assert!(ranked.iter().any(|c| c.entry.id == fits), "{kind}: {fits} is asked");
        for c in &ranked {
            let f = &c.entry.applies.failures;
            assert!(f.is_empty() || f.iter().any(|k| k == kind), "{kind}: {} fits {f:?}", c.entry.id);
        }
    }
}

#[test]
fn a_tree_is_named_by_its_id_or_whole() {
    assert_eq!(short_tree("0123456789abcdef0123"), "0123456789");
    assert_eq!(short_tree("0123456789abcdef+3"), "0123456789");
    assert_eq!(short_tree("replay-step-12"), "replay-step-12", "never cut to replay-ste");
}

/// The better tree is named with its evaluation and, where it has one,
/// its time; a replayed evaluation has none, and no empty field is shown.
#[test]
fn a_slower_stop_names_the_better_evaluation_without_an_empty_time() {
    let spec = PredicateSpec { correct: true, min_speedup: 1.0, ..Default::default() };
    // The store's ids are global: this campaign's first evaluation is id 16.
    let mut first = eval_of(&[("a", true, 0.5), ("b", false, 0.5)], &[]);
    first.id = Some(16);
    let mut best = eval_of(&[("a", true, 3.0), ("b", true, 3.0)], &[]);
    best.tree = "bbbbbbbbbbbbbbbb".into();
    best.id = Some(20);
    let mut now = eval_of(&[("a", true, 1.5), ("b", true, 1.5)], &[]);
    now.id = Some(31);
    let history = [first.clone(), best.clone(), now.clone()];
    let why = slower_than_best(&now, &history, &spec).expect("2x slower than the best");
    assert!(why.contains("(evaluation 2 of this campaign) measured 3.000x"), "{why}");
    best.created_at = "2026-12-07 10:00:00".into();
    let why = slower_than_best(&now, &[first, best, now.clone()], &spec).unwrap();
    assert!(why.contains("(evaluation 2 of this campaign, 2026-12-07 10:00:00) measured"), "{why}");
    assert!(!why.contains("#20") && !why.contains(" 20 "), "no global id: {why}");
}
