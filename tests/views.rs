//! What the API views and the CLI call the campaign's figures (issue #32,
//! "incorrect results are never progress"): an evaluation with a scenario
//! incorrect or missing, or that failed, is marked so; it is never "best",
//! never on the progress history, and its geometric mean is shown only
//! with the reason it does not count.

mod common;

use common::{Daemon, Fixture, ALL_PASS};
use serde_json::{json, Value};

/// The geometric mean of ALL_PASS: 2x, 2.5x and 1.25x.
const ALL_PASS_GEOMEAN: f64 = 1.842;

fn near(v: &Value, x: f64) -> bool {
    v.as_f64().is_some_and(|g| (g - x).abs() < 1e-3)
}

fn eval(d: &Daemon, id: &str) -> Value {
    serde_json::from_slice(&d.run(&["eval", id, "--json"]).stdout).unwrap()
}

#[test]
fn a_kernel_wrong_everywhere_is_not_best_not_progress_and_its_geomean_does_not_count() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    // Another campaign's evaluation first: ids are global, numbers are per campaign.
    let other = d.create_campaign(&f.spec());
    f.set_candidate(ALL_PASS);
    eval(&d, &other);
    let id = d.create_campaign(&f.spec());
    let good = eval(&d, &id);
    assert_eq!((good["holds"].clone(), good["incorrect"].clone()), (Value::Bool(true), Value::Bool(false)), "{good}");
    assert_eq!(good["geomean_counts"], true);
    assert!(good["geomean_note"].is_null() && good["incorrect_reason"].is_null(), "{good}");
    // Correct but slow on c: the verdict fails, yet its figures are a
    // measurement of a correct kernel (a result, below the bar on c).
    f.set_candidate("a true 50 100\nb true 40 100\nc true 120 100\n");
    let slow = eval(&d, &id);
    assert_eq!((slow["holds"].clone(), slow["incorrect"].clone()), (Value::Bool(false), Value::Bool(false)), "{slow}");
    // Wrong on every scenario, and 25x "faster".
    f.set_candidate("a false 4 100\nb false 4 100\nc false 4 100\n");
    let out = d.run(&["eval", &id]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("geometric mean 25.00x does not count: 3 scenarios incorrect"), "{text}");
    let wrong = eval(&d, &id);
    assert!(near(&wrong["geomean_speedup"], 25.0), "the figure itself is kept: {wrong}");
    assert_eq!(wrong["incorrect"], true);
    assert_eq!(wrong["incorrect_reason"], "3 scenarios incorrect");
    assert_eq!(wrong["geomean_counts"], false);
    assert_eq!(wrong["geomean_note"], "geomean 25.00x does not count: 3 scenarios incorrect");

    // The campaign list: best over correct evaluations only, the history
    // with a gap where the wrong kernel was.
    let summary = d.api_get("/campaigns");
    let c = summary.as_array().unwrap().iter().find(|c| c["id"] == id.as_str()).unwrap();
    assert!(near(&c["best_geomean_speedup"], ALL_PASS_GEOMEAN), "{c}");
    assert_eq!(c["best_evaluation_id"], good["id"], "{c}");
    assert_eq!(c["latest_evaluation_id"], wrong["id"], "{c}");
    assert!(near(&c["geomean_speedup"], 25.0), "{c}");
    assert_eq!((c["incorrect"].clone(), c["geomean_counts"].clone()), (Value::Bool(true), Value::Bool(false)), "{c}");
    assert_eq!(c["geomean_note"], "geomean 25.00x does not count: 3 scenarios incorrect");
    let series = c["geomean_series"].as_array().unwrap();
    assert_eq!(series.len(), 3, "{c}");
    assert!(near(&series[0], ALL_PASS_GEOMEAN) && series[1].is_number() && series[2].is_null(), "{c}");

    // The campaign: its latest evaluation marked, best over correct ones.
    let detail = d.api_get(&format!("/campaigns/{id}"));
    let latest = &detail["latest_evaluation"];
    assert_eq!(
        (latest["id"].clone(), latest["incorrect"].clone()),
        (wrong["id"].clone(), Value::Bool(true)),
        "{latest}"
    );
    assert_eq!(latest["geomean_counts"], false);
    assert!(near(&detail["best_geomean_speedup"], ALL_PASS_GEOMEAN), "{detail}");
    assert_eq!(detail["best_evaluation_id"], good["id"]);
    assert_ne!(good["id"], 1, "the other campaign's evaluation came first");
    assert_eq!(
        (detail["best_evaluation_number"].clone(), detail["latest_evaluation_number"].clone()),
        (json!(1), json!(3))
    );
    let evals = d.api_get(&format!("/campaigns/{id}/evaluations"));
    let marks: Vec<(bool, bool)> = evals
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["incorrect"].as_bool().unwrap(), e["geomean_counts"].as_bool().unwrap()))
        .collect();
    assert_eq!(marks, [(false, true), (false, true), (true, false)], "{evals}");

    // The CLI.
    let list = String::from_utf8(d.run(&["campaign", "list"]).stdout).unwrap();
    let header = list.lines().next().unwrap();
    assert!(header.contains("best"), "{list}");
    let line = list.lines().find(|l| l.starts_with(id.as_str())).unwrap_or_else(|| panic!("{list}"));
    let cells: Vec<&str> = line.split_whitespace().collect();
    assert!(cells.contains(&"1.84x"), "best is the correct kernel's: {line}");
    assert!(line.contains("(geomean 25.00x does not count: 3 scenarios incorrect)"), "{line}");
    assert_eq!(line.matches("25.00x").count(), 1, "25x only in the note: {line}");
    let show = String::from_utf8(d.run(&["campaign", "show", &id]).stdout).unwrap();
    assert!(show.contains("geometric mean 25.00x does not count: 3 scenarios incorrect"), "{show}");
    assert!(show.contains(&format!("best 1.84x (evaluation 1, id {})", good["id"])), "{show}");
}

#[test]
fn a_failed_or_partly_wrong_evaluation_says_why_it_is_no_result() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    // The harness fails: nothing measured.
    f.set_candidate("FAIL\n");
    let failed = eval(&d, &id);
    assert_eq!(failed["incorrect"], true, "{failed}");
    let why = failed["incorrect_reason"].as_str().unwrap();
    assert!(why.starts_with("3 scenarios missing, the evaluation failed (harness run exited"), "{why}");
    assert!(failed["geomean_note"].is_null(), "no geometric mean to discount: {failed}");
    // One scenario wrong: its geometric mean does not count either.
    f.set_candidate("a true 50 100\nb false 40 100\nc true 80 100\n");
    let one = eval(&d, &id);
    assert_eq!(one["incorrect_reason"], "1 scenario incorrect", "{one}");
    assert_eq!(one["geomean_note"], "geomean 1.84x does not count: 1 scenario incorrect");
    let detail = d.api_get(&format!("/campaigns/{id}"));
    assert!(detail["best_geomean_speedup"].is_null(), "no correct evaluation, no best: {detail}");
    let show = String::from_utf8(d.run(&["campaign", "show", &id]).stdout).unwrap();
    assert!(show.contains("best -: no correct evaluation of the workspace yet"), "{show}");
    // Counts read as words: two evaluations, not one stop attempt yet.
    assert!(show.contains("2 evaluations, 0 stop attempts, "), "{show}");
    assert!(!show.contains("1 events") && !show.contains("1 evaluations"), "{show}");
}
