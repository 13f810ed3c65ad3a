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
