//! Learning that measures help (#35 item 5), end to end: two campaigns run
//! the same sequence of evaluations on one daemon, one with every moment's
//! bank question withheld (`[questions] withhold = 1`), one with none
//! withheld; `gadfly bank stats` then shows each kind's and group's rate of
//! reward after questions against the rate after withheld moments. The
//! test computes those figures itself from what the daemon recorded (the
//! evaluations, the delivered questions, the `moment.withheld` events and
//! the bank's groups), by the rule of `bank::learn` written out again here,
//! and checks the printed and JSON figures against them.
//!
//! Runs on PostgreSQL too with GADFLY_TEST_DATABASE_URL set.

mod common;

use std::collections::{BTreeSet, HashMap};

use common::{Daemon, Fixture};
use serde_json::{json, Value};

const MOMENTS: &str =
    "[moments]\nplateau_evaluations = 2\nplateau_min_gain = 0.05\ncooldown_evaluations = 1\nplateau_backoff = false\n";

/// Times of scenarios a, b, c against a baseline of 100: jumps (suspicious
/// gains), flat stretches (plateaus), scenarios turning incorrect
/// (correctness regressions), gains that hold and gains that go.
const STEPS: &[&str] = &[
    "a true 90 100\nb true 90 100\nc true 90 100\n",
    "a true 40 100\nb true 40 100\nc true 40 100\n",
    "a true 40 100\nb true 40 100\nc true 40 100\n",
    "a true 39 100\nb true 40 100\nc true 40 100\n",
    "a true 39 100\nb false 40 100\nc true 40 100\n",
    "a true 36 100\nb true 36 100\nc true 36 100\n",
    "a true 36 100\nb true 36 100\nc true 35 100\n",
    "a true 36 100\nb true 36 100\nc true 35 100\n",
    "a true 20 100\nb true 20 100\nc true 20 100\n",
    "a true 30 100\nb true 30 100\nc true 30 100\n",
    "a true 30 100\nb true 30 100\nc true 30 100\n",
    "a true 29 100\nb true 30 100\nc true 30 100\n",
    "a true 29 100\nb false 30 100\nc true 30 100\n",
    "a true 27 100\nb true 27 100\nc true 27 100\n",
    "a true 27 100\nb true 27 100\nc true 27 100\n",
    "a true 27 100\nb true 27 100\nc true 26 100\n",
    "a true 14 100\nb true 14 100\nc true 14 100\n",
    "a true 14 100\nb true 14 100\nc true 14 100\n",
    "a true 14 100\nb true 14 100\nc true 14 100\n",
    "a true 14 100\nb false 14 100\nc true 14 100\n",
    "a true 13 100\nb true 13 100\nc true 13 100\n",
    "a true 13 100\nb true 13 100\nc true 13 100\n",
];

/// Runs the steps in a campaign; after each evaluation, the questions its
/// moments queued reach the agent (a PostToolUse hook each).
fn campaign(d: &Daemon, f: &Fixture, client: &reqwest::blocking::Client) -> String {
    let id = d.create_campaign(&f.spec());
    for (i, step) in STEPS.iter().enumerate() {
        f.set_candidate(step);
        std::fs::write(f.ws().join("notes.txt"), format!("step {i}")).unwrap();
        let out = d.run(&["eval", &id, "--json"]);
        assert!(matches!(out.status.code(), Some(0 | 1)), "{}", String::from_utf8_lossy(&out.stderr));
        for n in 0..10 {
            let body = json!({"session_id": "s", "hook_event_name": "PostToolUse", "tool_name": "Bash",
                              "tool_use_id": format!("t-{i}-{n}")});
            let reply = d.post_hook(client, "post-tool-use", &id, &body);
            if !reply.to_string().contains("additionalContext") {
                break;
            }
        }
    }
    id
}

/// One evaluation as the rule reads it.
struct Ev {
    id: i64,
    at: String,
    geomean: Option<f64>,
    correct: bool,
    rejected: bool,
}

/// One ask: a delivered bank question (with its bank id) or a withheld moment.
struct Ask {
    at: String,
    moment: String,
    bank_id: Option<String>,
}

/// The rule of `bank::learn`, written out plainly: (performance reward,
/// validity reward) of the ask `i` of a campaign.
fn rewards(evs: &[Ev], asks: &[Ask], i: usize) -> (bool, bool) {
    let at = &asks[i].at;
    let next = asks.iter().map(|a| &a.at).filter(|t| *t > at).min();
    let before: Vec<&Ev> = evs.iter().filter(|e| &e.at <= at).collect();
    let after: Vec<&Ev> = evs.iter().filter(|e| &e.at > at && next.is_none_or(|n| &e.at <= n)).take(5).collect();
    let baseline = before.iter().rev().find(|e| e.correct && e.geomean.is_some()).and_then(|e| e.geomean);
    let best = after
        .iter()
        .filter(|e| e.correct)
        .filter_map(|e| e.geomean)
        .fold(None, |m: Option<f64>, g| Some(m.map_or(g, |m| m.max(g))));
    let performance = matches!((baseline, best), (Some(b), Some(a)) if b > 0.0 && a / b - 1.0 >= 0.05);
    let validity = match before.last() {
        None => false,
        Some(q) if q.rejected => true,
        Some(q) if !q.correct => after.iter().any(|e| e.correct),
        Some(q) => {
            after.iter().any(|e| !e.correct)
                || matches!((q.geomean, best), (Some(was), Some(now)) if now < was * (1.0 - 0.05))
        }
    };
    (performance, validity)
}

/// Newcombe's hybrid score interval for p1 − p2, from the Wilson intervals.
fn newcombe(k1: u32, n1: u32, k2: u32, n2: u32) -> (f64, f64) {
    let z: f64 = 1.959_964;
    let wilson = |k: u32, n: u32| {
        let (n, p) = (n as f64, k as f64 / n as f64);
        let c = (p + z * z / (2.0 * n)) / (1.0 + z * z / n);
        let h = z / (1.0 + z * z / n) * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt();
        (p, c - h, c + h)
    };
    let ((p1, l1, u1), (p2, l2, u2)) = (wilson(k1, n1), wilson(k2, n2));
    (p1 - p2 - ((p1 - l1).powi(2) + (u2 - p2).powi(2)).sqrt(), p1 - p2 + ((u1 - p1).powi(2) + (p2 - l2).powi(2)).sqrt())
}

/// The interval of the asked rate minus a weighted sum of withheld rates
/// ((weight, rewarded, n) a moment), by Zou and Donner's MOVER from the
/// Wilson intervals: Newcombe's method, for the weighted sum.
fn mover(k1: u32, n1: u32, strata: &[(f64, u32, u32)]) -> (f64, f64) {
    let z: f64 = 1.959_964;
    let wilson = |k: u32, n: u32| {
        let (n, p) = (n as f64, k as f64 / n as f64);
        let c = (p + z * z / (2.0 * n)) / (1.0 + z * z / n);
        let h = z / (1.0 + z * z / n) * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt();
        (p, (c - h).max(0.0), (c + h).min(1.0))
    };
    let (p1, l1, u1) = wilson(k1, n1);
    let (mut p2, mut below, mut above) = (0.0, 0.0, 0.0);
    for (w, k, n) in strata {
        let (p, l, u) = wilson(*k, *n);
        p2 += w * p;
        below += (w * (p - l)).powi(2);
        above += (w * (u - p)).powi(2);
    }
    (p1 - p2 - ((p1 - l1).powi(2) + above).sqrt(), p1 - p2 + ((u1 - p1).powi(2) + below).sqrt())
}

#[test]
fn bank_stats_show_uplift_against_withheld_moments() {
    let withheld_all = Fixture::new(&format!("{MOMENTS}[questions]\nwithhold = 1.0\n"));
    let asked_all = Fixture::new(&format!("{MOMENTS}[questions]\nwithhold = 0\n"));
    let d = Daemon::start(&withheld_all.data_dir());
    let client = reqwest::blocking::Client::new();
    let a = campaign(&d, &withheld_all, &client);
    let b = campaign(&d, &asked_all, &client);

    // What the daemon recorded.
    let bank = d.api_get("/bank");
    let group_of: HashMap<String, String> = bank["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["id"].as_str().unwrap().to_string(), e["group"].as_str().unwrap().to_string()))
        .collect();
    let validity_group = |g: &str| ["benchmark_validity", "correctness", "measurement"].contains(&g);
    // (kind is validity, group, moment, rewarded by the question's kind)
    let mut asked: Vec<(bool, String, String, bool)> = Vec::new();
    // (moment, performance reward, validity reward)
    let mut control: Vec<(String, bool, bool)> = Vec::new();
    for id in [&a, &b] {
        let list = d.api_get(&format!("/campaigns/{id}/evaluations"));
        let list = list.as_array().unwrap();
        let rechecked: BTreeSet<&str> =
            list.iter().filter_map(|e| e["tree"].as_str().unwrap().split_once("+recheck-").map(|(t, _)| t)).collect();
        let mut evs: Vec<Ev> = list
            .iter()
            .filter(|e| e["origin"] == "workspace" && !e["tree"].as_str().unwrap().contains("+recheck-"))
            .map(|e| {
                let correct = !e["incorrect"].as_bool().unwrap();
                Ev {
                    id: e["id"].as_i64().unwrap(),
                    at: e["created_at"].as_str().unwrap().to_string(),
                    geomean: e["geomean_speedup"].as_f64(),
                    correct,
                    rejected: !correct && rechecked.contains(e["tree"].as_str().unwrap()),
                }
            })
            .collect();
        evs.sort_by(|x, y| x.at.cmp(&y.at).then(x.id.cmp(&y.id)));
        let mut asks: Vec<Ask> = d
            .api_get(&format!("/campaigns/{id}/questions"))
            .as_array()
            .unwrap()
            .iter()
            .filter(|q| q["status"] == "delivered" && q["bank_id"].is_string())
            .map(|q| Ask {
                at: q["delivered_at"].as_str().unwrap().to_string(),
                moment: q["moment"].as_str().unwrap_or("").to_string(),
                bank_id: q["bank_id"].as_str().map(str::to_string),
            })
            .collect();
        let log = d.api_get(&format!("/campaigns/{id}/log?limit=100000"));
        for e in log.as_array().unwrap().iter().filter(|e| e["kind"] == "moment.withheld") {
            let p = &e["payload"];
            assert!(p["share"] == 1.0 && p["objective_before"].is_number(), "{e}");
            asks.push(Ask {
                at: e["created_at"].as_str().unwrap().to_string(),
                moment: p["moment"].as_str().unwrap().to_string(),
                bank_id: None,
            });
        }
        for (i, ask) in asks.iter().enumerate() {
            let (performance, validity) = rewards(&evs, &asks, i);
            match &ask.bank_id {
                None => control.push((ask.moment.clone(), performance, validity)),
                Some(bank_id) => {
                    let Some(g) = group_of.get(bank_id) else { continue };
                    let v = validity_group(g);
                    asked.push((v, g.clone(), ask.moment.clone(), if v { validity } else { performance }));
                }
            }
        }
    }
    // Campaign a withheld every numeric moment and was asked only at its
    // start; campaign b withheld none.
    assert!(control.len() >= 5, "withheld moments: {control:?}");
    let moments_of = |kind_validity: Option<bool>, group: Option<&str>| {
        asked
            .iter()
            .filter(|x| kind_validity.is_none_or(|v| x.0 == v) && group.is_none_or(|g| x.1 == g))
            .map(|x| x.2.clone())
            .collect::<BTreeSet<_>>()
    };

    let stats = d.run(&["bank", "stats", "--json"]);
    assert!(stats.status.success(), "{}", String::from_utf8_lossy(&stats.stderr));
    let stats: Value = serde_json::from_slice(&stats.stdout).unwrap();
    let text = d.run(&["bank", "stats"]);
    assert!(text.status.success());
    let text = String::from_utf8_lossy(&text.stdout).to_string();
    eprintln!("{text}");
    let rows = stats["uplift"].as_array().expect("the uplift rows");
    let mut compared = 0;
    for row in rows {
        let validity = row["kind"] == "validity";
        let group = row["group"].as_str();
        let moment = row["moment"].as_str();
        let mine: Vec<&(bool, String, String, bool)> = asked
            .iter()
            .filter(|x| x.0 == validity && group.is_none_or(|g| x.1 == g) && moment.is_none_or(|m| x.2 == m))
            .collect();
        let moments = match moment {
            Some(m) => BTreeSet::from([m.to_string()]),
            None => moments_of(Some(validity), group),
        };
        let ctl: Vec<&(String, bool, bool)> = control.iter().filter(|c| moments.contains(&c.0)).collect();
        let won = |c: &&(String, bool, bool)| if validity { c.2 } else { c.1 };
        // Moment by moment: the questions asked at a moment withheld fewer
        // than 5 times are left out (unless no moment of the row was
        // withheld 5 times: then both arms are shown whole, uncompared),
        // and the withheld rate is weighted to the questions' moments.
        let withheld_at: BTreeSet<&str> =
            ctl.iter().map(|c| c.0.as_str()).filter(|m| ctl.iter().filter(|c| c.0 == *m).count() >= 5).collect();
        let matched: Vec<&&(bool, String, String, bool)> =
            mine.iter().filter(|x| withheld_at.is_empty() || withheld_at.contains(x.2.as_str())).collect();
        let counted: Vec<&&(String, bool, bool)> =
            ctl.iter().filter(|c| withheld_at.is_empty() || withheld_at.contains(c.0.as_str())).collect();
        let (n1, k1) = (matched.len() as u32, matched.iter().filter(|x| x.3).count() as u32);
        let (n2, k2) = (counted.len() as u32, counted.iter().filter(|c| won(c)).count() as u32);
        // (weight, rewarded, n) of each moment of the withheld arm
        let strata: Vec<(f64, u32, u32)> = withheld_at
            .iter()
            .map(|m| {
                let asked_here = matched.iter().filter(|x| x.2 == *m).count() as f64;
                let here: Vec<&&(String, bool, bool)> = ctl.iter().filter(|c| c.0 == *m).collect();
                (asked_here / n1 as f64, here.iter().filter(|c| won(c)).count() as u32, here.len() as u32)
            })
            .collect();
        let rate2 = if strata.is_empty() {
            k2 as f64 / n2.max(1) as f64
        } else {
            strata.iter().map(|(w, k, n)| w * *k as f64 / *n as f64).sum::<f64>()
        };
        assert_eq!(
            row["unmatched"].as_u64(),
            (!withheld_at.is_empty()).then_some((mine.len() - matched.len()) as u64),
            "questions left out of {row}"
        );
        assert_eq!(
            (row["asked"]["n"].as_u64(), row["asked"]["rewarded"].as_u64()),
            (Some(n1 as u64), Some(k1 as u64)),
            "asked side of {row}"
        );
        assert_eq!(
            (row["withheld"]["n"].as_u64(), row["withheld"]["rewarded"].as_u64()),
            (Some(n2 as u64), Some(k2 as u64)),
            "withheld side of {row}"
        );
        let line = text
            .lines()
            .find(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                w.len() > 3 && w[0] == row["kind"] && w[1] == group.unwrap_or("all") && w[2] == moment.unwrap_or("all")
            })
            .unwrap_or_else(|| panic!("no line for {row} in\n{text}"));
        let pct = |k: u32, n: u32| format!("{k}/{n} {:.1}%", 100.0 * k as f64 / n as f64);
        assert!(line.contains(&pct(k1, n1)), "{line}: {}", pct(k1, n1));
        if n2 > 0 && (rate2 - k2 as f64 / n2 as f64).abs() > 1e-9 {
            let adj = format!("{k2}/{n2} adj {:.1}%", 100.0 * rate2);
            assert!(line.contains(&adj), "{line}: {adj}");
        } else if n2 > 0 {
            assert!(line.contains(&pct(k2, n2)), "{line}: {}", pct(k2, n2));
        }
        if withheld_at.is_empty() || n2 < 5 {
            assert!(line.contains("not enough withheld moments") && row["uplift"].is_null(), "{line}");
        } else if n1 < 5 {
            assert!(line.contains("not enough questions") && row["uplift"].is_null(), "{line}");
        } else {
            let uplift = k1 as f64 / n1 as f64 - rate2;
            let (lo, hi) = if let [(_, k, n)] = strata[..] { newcombe(k1, n1, k, n) } else { mover(k1, n1, &strata) };
            assert!((row["uplift"].as_f64().unwrap() - uplift).abs() < 1e-9, "{row}");
            let interval = row["interval"].as_array().unwrap();
            assert!((interval[0].as_f64().unwrap() - lo).abs() < 1e-5, "{row}: {lo}");
            assert!((interval[1].as_f64().unwrap() - hi).abs() < 1e-5, "{row}: {hi}");
            // Printed from the row's own figure (checked above to 1e-9), so
            // that a difference of zero printed as -0.0 or +0.0 matches.
            let shown = row["uplift"].as_f64().unwrap();
            let mut printed = format!("{:+.1} pts [{:+.1}, {:+.1}]", shown * 100.0, lo * 100.0, hi * 100.0);
            if mine.len() > matched.len() {
                printed +=
                    &format!(" ({} asked at moments rarely or never withheld left out)", mine.len() - matched.len());
            }
            assert!(line.ends_with(&printed), "{line}: {printed}");
            compared += 1;
        }
    }
    assert!(compared >= 1, "at least one uplift with enough on both sides:\n{text}");
    // The entries keep their fields, with rewards, kind and moments added.
    let (id, entry) = stats.as_object().unwrap().iter().find(|(k, _)| k.as_str() != "uplift").unwrap();
    for field in ["asks", "gains", "status", "evidence", "rewards", "kind", "moments"] {
        assert!(!entry[field].is_null(), "{id}: {field} in {entry}");
    }
}
