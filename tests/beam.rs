//! The beam: families declared by tag and by commit trailer, evaluated per
//! commit, kept alive through a failed build, abandoned only with a reason,
//! and the questions it asks (a new family, a revisit).

mod common;

use common::{git, Daemon, Fixture};
use serde_json::Value;

const SPEC: &str = "[beam]\nmin_families = 3\n\n[moments]\nplateau_evaluations = 2\nplateau_min_gain = 0.05\ncooldown_evaluations = 1\n";

fn commit(f: &Fixture, candidate: &str, message: &str) {
    f.set_candidate(candidate);
    git(&f.ws(), &["add", "-A"]);
    git(&f.ws(), &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", message]);
}

fn family<'a>(b: &'a Value, name: &str) -> &'a Value {
    b["families"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["family"] == name)
        .unwrap_or_else(|| panic!("no family {name} in {b}"))
}

#[test]
fn families_live_through_failed_builds_and_die_only_by_decision() {
    let f = Fixture::new(SPEC);
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    commit(&f, "a true 66 100\nb true 66 100\nc true 66 100\n", "householder 1.5x");
    let out = d.run(&["beam", "tag", "householder", "--campaign", &id]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    git(&f.ws(), &["checkout", "-qb", "try-cholesky"]);
    commit(&f, "a true 70 100\nb true 70 100\nc true 70 100\n", "cholesky QR\n\nGadfly-Family: cholesky-qr");
    let b: Value = serde_json::from_slice(&d.run(&["beam", "list", &id, "--json"]).stdout).unwrap();
    assert_eq!(b["live"], 2);
    assert!((family(&b, "householder")["best"]["geomean_speedup"].as_f64().unwrap() - 100.0 / 66.0).abs() < 1e-9);
    assert_eq!(family(&b, "cholesky-qr")["git_ref"], "refs/heads/try-cholesky");

    // The cholesky branch's next commit does not even run: the family stays alive.
    commit(&f, "FAIL\n", "cholesky: broken blocking");
    let b: Value = serde_json::from_slice(&d.run(&["beam", "list", &id, "--json"]).stdout).unwrap();
    let ch = family(&b, "cholesky-qr");
    assert_eq!(ch["status"], "alive");
    assert_eq!(ch["history"].as_array().unwrap().len(), 2);
    assert_eq!(ch["last"]["built"], false);
    assert!(ch["note"].as_str().unwrap().contains("stays alive on its last good evaluation"), "{ch}");
    assert!((ch["best"]["geomean_speedup"].as_f64().unwrap() - 100.0 / 70.0).abs() < 1e-9);

    // Abandoned only by decision, with the reason on record; its best is
    // within 10% of the beam's best, so a revisit question is queued once.
    let out = d.run(&["beam", "abandon", &id, "cholesky-qr", "--reason", "blocked panels do not fit in cache"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let b: Value = serde_json::from_slice(&d.run(&["beam", "list", &id, "--json"]).stdout).unwrap();
    assert_eq!(family(&b, "cholesky-qr")["status"], "abandoned");
    assert_eq!(family(&b, "cholesky-qr")["reason"], "blocked panels do not fit in cache");
    assert_eq!(b["live"], 1);
    d.run(&["beam", "list", &id, "--json"]);
    let qs = d.api_get(&format!("/campaigns/{id}/questions"));
    let revisits: Vec<&Value> =
        qs.as_array().unwrap().iter().filter(|q| q["text"].as_str().unwrap().contains("was abandoned at")).collect();
    assert_eq!(revisits.len(), 1, "one revisit question: {qs}");
    assert_eq!(revisits[0]["bank_id"], "process-002");
    let text = String::from_utf8(d.run(&["beam", "list", &id]).stdout).unwrap();
    assert!(text.lines().any(|l| l.starts_with("cholesky-qr") && l.contains("abandoned")), "{text}");
}

#[test]
fn a_plateau_with_too_few_families_asks_for_a_new_family() {
    let f = Fixture::new(SPEC);
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    commit(&f, "a true 66 100\nb true 66 100\nc true 66 100\n", "first");
    d.run(&["beam", "tag", "householder", "--campaign", &id]);
    for (i, t) in ["66", "65", "66"].iter().enumerate() {
        f.set_candidate(&format!("a true {t} 100\nb true 66 100\nc true 66 100\n"));
        std::fs::write(f.ws().join("notes.txt"), i.to_string()).unwrap();
        d.run(&["eval", &id, "--json"]);
    }
    let log = d.api_get(&format!("/campaigns/{id}/log?limit=10000"));
    let plateau = log
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "moment" && e["payload"]["moment"] == "plateau")
        .unwrap_or_else(|| panic!("no plateau moment"));
    let q = &plateau["payload"]["question"];
    assert!(["algo-001", "process-001"].contains(&q["bank_id"].as_str().unwrap()), "{plateau}");
    assert!(q["text"].as_str().unwrap().contains("The beam has 1 live family of the 3"), "{q}");
}

/// A branch the workspace never had, evaluated by `beam list`, is its
/// family's: the campaign's headline (API views, `campaign list|show`)
/// stays the workspace's verdict, and "best" the workspace's. When the
/// workspace checks that branch out, or comes back to a tree evaluated
/// before, its verdict follows the workspace, answered from the store.
#[test]
fn the_headline_is_the_workspaces_verdict_not_the_last_beam_branch() {
    let f = Fixture::new("[beam]\nmin_families = 1\n");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    // The workspace passes at about 1.84x.
    commit(&f, common::ALL_PASS, "the workspace's kernel");
    let ws: Value = serde_json::from_slice(&d.run(&["eval", &id, "--json"]).stdout).unwrap();
    assert_eq!(ws["holds"], true, "{ws}");
    // A fast correct branch and a broken one, neither ever in the workspace.
    git(&f.ws(), &["checkout", "-qb", "estrin"]);
    commit(&f, "a true 10 100\nb true 10 100\nc true 10 100\n", "estrin\n\nGadfly-Family: estrin");
    git(&f.ws(), &["checkout", "-q", "-"]);
    git(&f.ws(), &["checkout", "-qb", "broken"]);
    commit(&f, "FAIL\n", "does not build\n\nGadfly-Family: broken-family");
    git(&f.ws(), &["checkout", "-q", "-"]);
    git(&f.ws(), &["checkout", "-qb", "wrong"]);
    commit(&f, "a false 4 100\nb false 4 100\nc false 4 100\n", "fast and wrong\n\nGadfly-Family: wrong");
    git(&f.ws(), &["checkout", "-q", "-"]);
    assert_eq!(std::fs::read_to_string(f.ws().join("candidate.txt")).unwrap(), common::ALL_PASS);

    let b: Value = serde_json::from_slice(&d.run(&["beam", "list", &id, "--json"]).stdout).unwrap();
    assert!((family(&b, "estrin")["best"]["geomean_speedup"].as_f64().unwrap() - 10.0).abs() < 1e-9, "{b}");
    assert_eq!(family(&b, "broken-family")["last"]["built"], false, "{b}");
    // A candidate wrong on every scenario is no family's best either.
    let wrong = family(&b, "wrong");
    assert_eq!(
        (wrong["last"]["incorrect"].clone(), wrong["best"].clone()),
        (Value::Bool(true), Value::Null),
        "{wrong}"
    );

    // The headline everywhere: the workspace's tree, holding at 1.84x.
    let headline_is_workspace = |what: &str| {
        let detail = d.api_get(&format!("/campaigns/{id}"));
        let latest = &detail["latest_evaluation"];
        assert_eq!(
            (latest["id"].clone(), latest["tree"].clone()),
            (ws["id"].clone(), ws["tree"].clone()),
            "{what}: {latest}"
        );
        assert_eq!(latest["holds"], true, "{what}");
        let summary = d.api_get("/campaigns");
        let c = summary.as_array().unwrap().iter().find(|c| c["id"] == id.as_str()).unwrap();
        assert_eq!(c["holds"], true, "{what}: {c}");
        assert_eq!(c["latest_evaluation_id"], ws["id"], "{what}: {c}");
        assert_eq!(c["geomean_speedup"], ws["geomean_speedup"], "{what}: {c}");
        assert_eq!(
            c["best_geomean_speedup"], ws["geomean_speedup"],
            "{what}: the beam's 10x is its family's best: {c}"
        );
        let list = String::from_utf8(d.run(&["campaign", "list"]).stdout).unwrap();
        let line = list.lines().find(|l| l.starts_with(id.as_str())).unwrap_or_else(|| panic!("{list}"));
        assert!(line.contains("holds") && line.contains("1.84x") && !line.contains("10.00x"), "{what}: {line}");
        let show = String::from_utf8(d.run(&["campaign", "show", &id]).stdout).unwrap();
        let tree: String = ws["tree"].as_str().unwrap().chars().take(12).collect();
        assert!(show.contains(&format!("tree {tree}")) && show.contains("the predicate HOLDS"), "{what}: {show}");
        assert!(!show.contains("harness run exited") && !show.contains("10.00x"), "{what}: {show}");
    };
    headline_is_workspace("after beam list");
    let evals = d.api_get(&format!("/campaigns/{id}/evaluations"));
    let origins: Vec<&str> = evals.as_array().unwrap().iter().map(|e| e["origin"].as_str().unwrap_or("?")).collect();
    assert_eq!(origins, ["workspace", "beam", "beam", "beam"], "{evals}");
    // A new commit on the broken branch, listed again: still the workspace's.
    git(&f.ws(), &["checkout", "-q", "broken"]);
    commit(&f, "FAIL\nFAIL\n", "still broken");
    git(&f.ws(), &["checkout", "-q", "-"]);
    d.run(&["beam", "list", &id, "--json"]);
    headline_is_workspace("after a second beam list");

    // The workspace takes up the estrin branch: its tree, evaluated by the
    // beam, answered from the store, is now the workspace's verdict.
    git(&f.ws(), &["checkout", "-q", "estrin"]);
    let e: Value = serde_json::from_slice(&d.run(&["eval", &id, "--json"]).stdout).unwrap();
    assert_eq!((e["cached"].clone(), e["origin"].clone()), (Value::Bool(true), Value::from("workspace")), "{e}");
    let detail = d.api_get(&format!("/campaigns/{id}"));
    assert_eq!(detail["latest_evaluation"]["id"], e["id"], "{detail}");
    assert_eq!(detail["best_geomean_speedup"], e["geomean_speedup"], "now the workspace's best");
    // And comes back to its first tree: that verdict again.
    git(&f.ws(), &["checkout", "-q", "-"]);
    let back: Value = serde_json::from_slice(&d.run(&["eval", &id, "--json"]).stdout).unwrap();
    assert_eq!(back["id"], ws["id"], "{back}");
    assert_eq!(d.api_get(&format!("/campaigns/{id}"))["latest_evaluation"]["id"], ws["id"]);
}

/// The moment detectors read the workspace's search only: a fast branch
/// evaluated by `gadfly beam list` between the workspace's flat
/// evaluations neither hides their plateau nor counts as a step of it.
#[test]
fn a_beam_branch_evaluated_between_flat_workspace_evaluations_does_not_hide_the_plateau() {
    let f = Fixture::new("[beam]\nmin_families = 1\n\n[moments]\nplateau_evaluations = 3\nplateau_min_gain = 0.05\n");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    commit(&f, "a true 80 100\nb true 80 100\nc true 80 100\n", "first");
    let eval = |t: &str, note: &str| {
        f.set_candidate(&format!("a true {t} 100\nb true 80 100\nc true 80 100\n"));
        std::fs::write(f.ws().join("notes.txt"), note).unwrap();
        let out = d.run(&["eval", &id, "--json"]);
        assert!(out.status.code() != Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    };
    eval("80", "1");
    eval("79", "2");
    // A branch ten times faster, never in the workspace, evaluated by the beam.
    git(&f.ws(), &["stash", "-q", "--include-untracked"]);
    git(&f.ws(), &["checkout", "-qb", "fast"]);
    commit(&f, "a true 8 100\nb true 8 100\nc true 8 100\n", "fast\n\nGadfly-Family: fast");
    git(&f.ws(), &["checkout", "-q", "-"]);
    git(&f.ws(), &["stash", "pop", "-q"]);
    let b: Value = serde_json::from_slice(&d.run(&["beam", "list", &id, "--json"]).stdout).unwrap();
    assert!((family(&b, "fast")["best"]["geomean_speedup"].as_f64().unwrap() - 12.5).abs() < 1e-9, "{b}");
    let plateaus = || {
        d.api_get(&format!("/campaigns/{id}/log?limit=10000"))
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["kind"] == "moment" && e["payload"]["moment"] == "plateau")
            .cloned()
            .collect::<Vec<Value>>()
    };
    eval("80.5", "3");
    assert!(plateaus().is_empty(), "a reference and two flat evaluations are no plateau of three yet: {:?}", plateaus());
    eval("79.5", "4");
    let found = plateaus();
    assert_eq!(found.len(), 1, "three flat workspace evaluations after the first, the beam's fast branch among them: {found:?}");
    let trees: Vec<&Value> = found[0]["payload"]["evaluations"].as_array().unwrap().iter().collect();
    assert_eq!(trees.len(), 3, "the plateau's evidence is the workspace's three evaluations: {}", found[0]);
}
