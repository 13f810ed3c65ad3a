use super::timeline::{parse, Step, StepKind};
use super::*;
use crate::results::ScenarioResult;

/// A spec over scenarios a, b, c (each at least 1.1x, the mean 1.2x), in
/// a fresh git folder; `extra` is added to it (a `[moments]` section...).
fn spec(mode: &str, extra: &str) -> CampaignSpec {
    let dir = tempfile::tempdir().unwrap();
    std::process::Command::new("git").args(["init", "-q"]).current_dir(dir.path()).status().unwrap();
    let text = format!(
        "name = 'r'\nworkspace = '.'\n[harness]\nrun = 'x {{results}}'\nscenarios = ['a', 'b', 'c']\n\
         [predicate]\nmin_speedup = 1.1\nmin_geomean_speedup = 1.2\n[questions]\nmode = '{mode}'\n{extra}"
    );
    crate::campaign::parse(&text, "r.toml", dir.path()).unwrap()
}

fn scen(name: &str, correct: bool, time: f64) -> ScenarioResult {
    ScenarioResult {
        scenario: name.into(),
        correct,
        time_us: time,
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
    }
}

fn measured(list: &[(&str, bool, f64)]) -> Measured {
    Measured { scenarios: list.iter().map(|(n, c, t)| scen(n, *c, *t)).collect(), failures: vec![] }
}

const WRONG_B: &[(&str, bool, f64)] = &[("a", true, 50.0), ("b", false, 40.0), ("c", true, 80.0)];
const ALL_PASS: &[(&str, bool, f64)] = &[("a", true, 50.0), ("b", true, 40.0), ("c", true, 80.0)];
/// Correct, but b is too slow.
const SLOW_B: &[(&str, bool, f64)] = &[("a", true, 50.0), ("b", true, 95.0), ("c", true, 80.0)];

fn step(t: f64, kind: StepKind) -> Step {
    Step { t, kind }
}

fn text(s: &str) -> StepKind {
    StepKind::AssistantText { text: s.into() }
}

fn stop(s: &str, m: Option<Measured>) -> StepKind {
    StepKind::Stop { text: s.into(), evaluation: m, cached: false, unevaluated: None, recorded: None }
}

fn call(cmd: &str) -> StepKind {
    StepKind::ToolCall { tool: "Bash".into(), text: cmd.into() }
}

fn result(s: &str) -> StepKind {
    StepKind::ToolResult { text: s.into() }
}

fn human(s: &str) -> StepKind {
    StepKind::Human { text: s.into(), queued: false }
}

fn timeline(steps: Vec<Step>) -> Timeline {
    Timeline {
        header: timeline::Header { source: "test".into(), campaign: Some("c-test".into()), ..Default::default() },
        steps,
    }
}

fn bank() -> &'static [Entry] {
    &crate::bank::embedded().entries
}

fn replay(t: &Timeline, spec: &CampaignSpec, seed: u64) -> Report {
    run(t, spec, bank(), &Options { mode: None, seed }).unwrap()
}

/// Every `Did` of the report, with its step.
fn all(r: &Report) -> Vec<(usize, &Did)> {
    r.steps.iter().flat_map(|s| s.did.iter().map(move |d| (s.step, d))).collect()
}

fn stops(r: &Report) -> Vec<(usize, Decision)> {
    all(r)
        .into_iter()
        .filter_map(|(n, d)| match d {
            Did::Stop { decision, .. } => Some((n, *decision)),
            _ => None,
        })
        .collect()
}

/// A session in the daemon's own order: work, a wrong claim, a fix, a
/// right one.
fn session() -> Timeline {
    timeline(vec![
        step(0.0, human("Make every scenario faster.")),
        step(1.0, text("Let me run the benchmark.")),
        step(2.0, call("make bench")),
        step(9.0, result("a 50 us, b 40 us, c 80 us")),
        step(10.0, stop("All scenarios pass now. Done.", Some(measured(WRONG_B)))),
        step(12.0, human("Is b really correct?")),
        step(20.0, call("make bench")),
        step(30.0, result("fixed")),
        step(31.0, stop("Fixed b. Done.", Some(measured(ALL_PASS)))),
    ])
}

#[test]
fn a_wrong_claim_is_blocked_with_the_failing_scenario_then_the_fixed_one_allowed() {
    let r = replay(&session(), &spec("autonomous", ""), 0);
    assert_eq!(stops(&r), [(5, Decision::Block), (9, Decision::Allow)]);
    let Some((_, Did::Stop { failing, question: Some(q), reason: Some(reason), holds: Some(false), .. })) =
        all(&r).into_iter().find(|(n, d)| *n == 5 && matches!(d, Did::Stop { .. }))
    else {
        panic!("{:#?}", r.steps[5])
    };
    assert_eq!(failing.iter().map(|f| f.scenario.as_str()).collect::<Vec<_>>(), ["b"]);
    assert!(failing[0].reasons.iter().any(|r| r.starts_with("incorrect")), "{failing:?}");
    // The gate's own block reason, with the question it carries.
    assert!(reason.contains("gadfly: you may not stop yet") && reason.contains(&q.text), "{reason}");
    // The start moment's question went out with the first tool result.
    assert!(
        matches!(r.steps[0].did[0], Did::Moment { ref moment, ref outcome, .. } if moment == "start" && outcome == "question")
    );
    assert!(
        r.steps[4].did.iter().any(|d| matches!(d, Did::Delivered { via, question } if via == "hook_additional_context" && question.moment.as_deref() == Some("start"))),
        "{:#?}",
        r.steps[4]
    );
    // The completion claims, recorded (judged at the stop itself).
    let claims: Vec<usize> = all(&r)
        .into_iter()
        .filter(|(_, d)| matches!(d, Did::Moment { moment, .. } if moment == "completion_claim"))
        .map(|(n, _)| n)
        .collect();
    // "Fixed b. Done." shows it twice: one moment per message and kind.
    assert_eq!(claims, [5, 9]);
    let s = &r.summary;
    assert_eq!((s.stops, s.blocked, s.allowed, s.unevaluated, s.evaluations), (2, 1, 1, 0, 2));
    assert_eq!(s.moments["completion_claim"], MomentTally { count: 2, first_step: 5 });
    assert_eq!(s.moments["start"], MomentTally { count: 1, first_step: 0 });
    assert_eq!((s.asked_at_stop, s.asked_mid_turn, s.questions_asked), (1, 1, 2));
    // Each human message beside gadfly's nearest question before it.
    assert_eq!(s.humans.len(), 2);
    assert!(s.humans[0].nearest.is_none(), "nothing asked before the first prompt");
    let n = s.humans[1].nearest.as_ref().unwrap();
    assert_eq!((n.step, n.steps_earlier, n.via.as_str()), (5, 1, "stop_hook_reason"));
    // The text report says the same.
    let out = render::text(&r);
    assert!(out.contains("STOP: BLOCK (the predicate fails on 1 scenarios)"), "{out}");
    assert!(out.contains("failing b: incorrect"), "{out}");
    assert!(out.contains("would have been blocked") && out.contains("completion_claim"), "{out}");
}

#[test]
fn a_stop_with_no_evaluation_fails_closed_and_audit_mode_only_records() {
    let t = timeline(vec![step(0.0, text("Done, all faster.")), step(0.0, stop("Done, all faster.", None))]);
    let r = replay(&t, &spec("autonomous", ""), 0);
    assert_eq!(stops(&r), [(2, Decision::Block)]);
    assert_eq!((r.summary.unevaluated, r.summary.questions_asked), (1, 0), "no question without an evaluation");
    let audit =
        run(&session(), &spec("autonomous", ""), bank(), &Options { mode: Some(Mode::Audit), seed: 0 }).unwrap();
    assert_eq!(audit.mode, Mode::Audit);
    assert_eq!(stops(&audit), [(5, Decision::Record), (9, Decision::Record)]);
    assert_eq!((audit.summary.questions_asked, audit.summary.questions_queued, audit.summary.recorded), (0, 0, 2));
    assert!(audit.steps[0].did.iter().all(|d| matches!(d, Did::Moment { outcome, .. } if outcome == "recorded")));
}

#[test]
fn human_mode_offers_suggestions_for_moments() {
    let t = timeline(vec![step(
        0.0,
        text("This is the hardware limit: we are memory bound, so no further speedup is possible."),
    )]);
    let r = replay(&t, &spec("human", ""), 0);
    let limit = all(&r).into_iter().find_map(|(n, d)| match d {
        Did::Moment { moment, outcome, suggestions, .. } if moment == "limit_claim" => Some((n, outcome, suggestions)),
        _ => None,
    });
    let (n, outcome, suggestions) = limit.expect("the limit claim is a moment");
    assert_eq!((n, outcome.as_str(), suggestions.len()), (1, "suggestions", plan::SUGGESTIONS));
    assert_eq!(r.summary.suggested, 2, "the start moment and the claim");
}

#[test]
fn the_same_seed_gives_the_same_replay_and_the_seed_reaches_the_bank() {
    // Many moments, so many picks: a limit claim after each evaluation.
    let mut steps = vec![];
    for i in 0..8 {
        let t = i as f64 * 100.0;
        steps.push(step(t, StepKind::Evaluation(measured(WRONG_B))));
        steps.push(step(
            t + 1.0,
            text(&format!(
                "Attempt {i}: this is the hardware limit, we are memory bound, so no further speedup is possible."
            )),
        ));
        steps.push(step(t + 20.0, call("make")));
        steps.push(step(t + 21.0, result("ok")));
    }
    let t = timeline(steps);
    let s = spec("autonomous", "");
    let json = |r: &Report| serde_json::to_string(r).unwrap();
    let asked = |r: &Report| -> Vec<String> {
        all(r)
            .into_iter()
            .filter_map(|(_, d)| match d {
                Did::Queued { question } => Some(question.source.clone()),
                _ => None,
            })
            .collect()
    };
    let a = replay(&t, &s, 7);
    assert_eq!(json(&a), json(&replay(&t, &s, 7)), "same seed, same replay");
    assert_eq!(render::text(&a), render::text(&replay(&t, &s, 7)));
    assert!(asked(&a).len() >= 8, "{:?}", asked(&a));
    let draws: std::collections::HashSet<Vec<String>> = (1..=6).map(|seed| asked(&replay(&t, &s, seed))).collect();
    assert!(draws.len() > 1, "the seed changes the bank's draws: {draws:?}");
    // Seed 0 seeds as the daemon seeds the recorded campaign.
    let zero = replay(&t, &s, 0);
    let first = zero.steps[0].did.iter().find_map(|d| match d {
        Did::Queued { question } => Some(question.source.clone()),
        _ => None,
    });
    let req = select::Request {
        moment: "start",
        spec: &s,
        asked: &[],
        prefer: groups_for("start"),
        stats: &HashMap::new(),
        seed: select::seed_for("c-test", 0),
        evidence: None,
    };
    assert_eq!(first, Some(gate::choose_question(bank(), &req).source));
}

#[test]
fn a_claim_in_the_last_words_is_asked_at_the_stop_once_not_twice() {
    let claim = "This is the hardware limit: we are memory bound, so no further speedup is possible.";
    // The stop comes within the stream's grace: the stop classifies the words.
    let t = timeline(vec![
        step(0.0, StepKind::Evaluation(measured(SLOW_B))),
        step(10.0, text(claim)),
        step(11.0, stop(claim, None)),
        step(30.0, call("x")),
    ]);
    let r = replay(&t, &spec("autonomous", ""), 0);
    let limits: Vec<(usize, String)> = all(&r)
        .into_iter()
        .filter_map(|(n, d)| match d {
            Did::Moment { moment, outcome, question, .. } if moment == "limit_claim" => {
                Some((n, format!("{outcome}:{}", question.as_ref().map_or("", |q| q.source.as_str()))))
            }
            _ => None,
        })
        .collect();
    assert_eq!(limits.len(), 1, "{limits:?}");
    assert_eq!(limits[0].0, 3, "raised at the stop");
    let Did::Stop { question: Some(q), .. } = r.steps[3].did.iter().find(|d| matches!(d, Did::Stop { .. })).unwrap()
    else {
        panic!()
    };
    assert_eq!(q.moment.as_deref(), Some("limit_claim"), "the stop carries the claim's question");
    // The stop comes after the grace: the message was classified first (its
    // question queued), and the stop's words are not classified again.
    let t = timeline(vec![
        step(0.0, StepKind::Evaluation(measured(SLOW_B))),
        step(10.0, text(claim)),
        step(16.0, stop(claim, None)),
    ]);
    let r = replay(&t, &spec("autonomous", ""), 0);
    let limits: Vec<usize> = all(&r)
        .into_iter()
        .filter(|(_, d)| matches!(d, Did::Moment { moment, .. } if moment == "limit_claim"))
        .map(|(n, _)| n)
        .collect();
    assert_eq!(limits, [2]);
    let Did::Stop { question: Some(q), .. } = r.steps[3].did.iter().find(|d| matches!(d, Did::Stop { .. })).unwrap()
    else {
        panic!()
    };
    assert_eq!(q.moment.as_deref(), Some("limit_claim"), "the waiting question is carried");
}

/// Two sentences of one claim in one message are one moment: one question,
/// no escalation of the message by itself.
#[test]
fn a_message_with_two_sentences_of_one_claim_is_one_moment() {
    let t = timeline(vec![
        step(0.0, StepKind::Evaluation(measured(WRONG_B))),
        step(
            10.0,
            text(
                "This is the hardware limit: we are memory bound, so no further speedup is possible. \
                 We have hit the theoretical peak bandwidth and there is nothing left to gain.",
            ),
        ),
    ]);
    let r = replay(&t, &spec("autonomous", ""), 0);
    let queued = r.steps[2].did.iter().filter(|d| matches!(d, Did::Queued { .. })).count();
    let moments =
        r.steps[2].did.iter().filter(|d| matches!(d, Did::Moment { moment, .. } if moment == "limit_claim")).count();
    assert_eq!((moments, queued), (1, 1), "{:#?}", r.steps[2]);
    assert_eq!(r.summary.escalations, 0);
}

#[test]
fn a_repeated_claim_is_escalated_and_a_plateau_waits_out_its_cooldown() {
    let claim = "This is the hardware limit: we are memory bound, so no further speedup is possible.";
    let t = timeline(vec![
        step(0.0, StepKind::Evaluation(measured(WRONG_B))),
        step(10.0, text(claim)),
        // Before its question reached the agent: not a repeat.
        step(20.0, text(&format!("As I said: {claim}"))),
        // The start's question goes out first, then the claim's.
        step(30.0, call("ls")),
        step(31.0, result("kernel.c")),
        step(32.0, call("ls")),
        step(33.0, result("kernel.c")),
        step(100.0, text(&format!("Again: {claim}"))),
    ]);
    let r = replay(&t, &spec("autonomous", ""), 0);
    assert!(
        r.steps[8].did.iter().any(|d| matches!(d, Did::Escalated { moment, .. } if moment == "limit_claim")),
        "{:#?}",
        r.steps[8]
    );
    assert!(
        r.steps[7]
            .did
            .iter()
            .any(|d| matches!(d, Did::Delivered { question, .. } if question.moment.as_deref() == Some("limit_claim"))),
        "{:#?}",
        r.steps[7]
    );
    assert_eq!(r.summary.escalations, 1, "{:#?}", r.steps);
    // Fresh evidence after the question: the same words are not a repeat.
    let t = timeline(vec![
        step(0.0, StepKind::Evaluation(measured(WRONG_B))),
        step(10.0, text(claim)),
        step(30.0, call("ls")),
        step(31.0, result("kernel.c")),
        step(32.0, call("ls")),
        step(33.0, result("kernel.c")),
        step(40.0, StepKind::Evaluation(measured(SLOW_B))),
        step(100.0, text(&format!("Again: {claim}"))),
    ]);
    assert_eq!(replay(&t, &spec("autonomous", ""), 0).summary.escalations, 0);
    // A flat series, spoken of at every evaluation of the stall
    // (`plateau_backoff = false`): the plateau after 3, quiet for the
    // cooldown of 2, again.
    let t = timeline((0..10).map(|i| step(i as f64, StepKind::Evaluation(measured(ALL_PASS)))).collect());
    let plateaus = |extra: &str| -> Vec<usize> {
        let moments = format!("[moments]\nplateau_evaluations = 2\ncooldown_evaluations = 2\n{extra}");
        all(&replay(&t, &spec("autonomous", &moments), 0))
            .into_iter()
            .filter(|(_, d)| matches!(d, Did::Moment { moment, .. } if moment == "plateau"))
            .map(|(n, _)| n)
            .collect()
    };
    assert_eq!(plateaus("plateau_backoff = false\n"), [3, 5, 7, 9], "every other evaluation");
    // By default at 2, 4 and 8 evaluations without a gain.
    assert_eq!(plateaus(""), [3, 5, 9], "on a doubling schedule");
}

#[test]
fn a_moment_the_stops_words_show_is_held_from_the_evaluation() {
    // A geometric-mean jump of more than 1.5x at the stop, which claims the gain.
    let slow: &[(&str, bool, f64)] = &[("a", true, 90.0), ("b", true, 90.0), ("c", true, 90.0)];
    let fast: &[(&str, bool, f64)] = &[("a", true, 20.0), ("b", true, 20.0), ("c", true, 20.0)];
    let t = timeline(vec![
        step(0.0, StepKind::Evaluation(measured(slow))),
        step(5.0, stop("The kernel is now 40x faster than cuBLAS. Done.", Some(measured(fast)))),
    ]);
    let r = replay(&t, &spec("autonomous", ""), 0);
    let gains: Vec<(&str, &str)> = r.steps[2]
        .did
        .iter()
        .filter_map(|d| match d {
            Did::Moment { moment, source, outcome, .. } if moment == "suspicious_gain" => {
                Some((source.as_str(), outcome.as_str()))
            }
            _ => None,
        })
        .collect();
    assert!(gains.contains(&("numeric", "no_question")), "held: {gains:?}");
    assert!(r.steps[2].did.iter().any(|d| matches!(d, Did::RecheckNotReplayed { .. })), "{:#?}", r.steps[2]);
    assert_eq!(stops(&r), [(2, Decision::Allow)], "the predicate holds");
}

#[test]
fn the_builtin_questions_take_turns_when_no_entry_fits() {
    let s = spec("autonomous", "");
    let asked = AskedHere::from_sequence(&["builtin-completion-1", "x", "builtin-completion-2"]);
    let req = select::Request {
        moment: "completion_claim",
        spec: &s,
        asked: &asked,
        prefer: &[],
        stats: &HashMap::new(),
        seed: 1,
        evidence: None,
    };
    let q = gate::choose_question(&[], &req);
    assert_eq!((q.source.as_str(), q.moment.as_str()), ("builtin-completion-3", "completion_claim"));
}

#[test]
fn a_timeline_file_replays_as_its_steps() {
    let text = "{\"v\":1,\"kind\":\"header\",\"source\":\"hand\"}\n\
        {\"t\":0,\"kind\":\"evaluation\",\"scenarios\":[{\"scenario\":\"a\",\"correct\":true,\"time_us\":50,\"baseline_us\":100}]}\n\
        {\"t\":1,\"kind\":\"stop\",\"text\":\"Done.\",\"recorded\":{\"decision\":\"allow\"}}\n";
    let r = replay(&parse(text).unwrap(), &spec("autonomous", ""), 0);
    // b and c are missing from the evaluation: blocked, unlike the recording.
    assert_eq!(stops(&r), [(2, Decision::Block)]);
    assert_eq!(r.summary.agreement, Some(Agreement { compared: 1, agree: 0, differ: vec![2] }));
    let page = render::html(&r);
    assert!(
        page.starts_with("<!doctype html>") && page.contains("id=\"step-2\"") && page.contains("stop-block"),
        "{page}"
    );
    assert!(!page.contains("<script"), "self-contained, no script");
}
