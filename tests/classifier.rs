//! The message classifiers against the labeled sets (tests/data/*.jsonl,
//! see tests/data/README.md). All four sets are development data now: the
//! rules were tuned on dev, holdout and fresh, and the learned model of
//! `HybridClassifier` is trained on all four (blind1 included), so every
//! table here is a fit. The honest figures are the cross-validated ones
//! (the rules are fixed, so only the model is cross-validated) and, for a
//! new author, the model trained without blind1 and scored on it.
//!
//! Asserted: the rules and the hybrid reach precision 0.9 and recall 0.8
//! per label on the dev set, and the hybrid does in 5-fold cross-validation
//! at its shipped thresholds and on blind2, a set by a third author that
//! was never trained or tuned on (measured once hybrid-v1 was frozen).
//!
//! Run with `cargo test --test classifier -- --nocapture` to see the tables;
//! set CLASSIFIER_ERRORS=1 to list the dev examples the rules get wrong, and
//! the cross-validation errors of the hybrid on blind1, with the sentences
//! they cite.

use std::path::{Path, PathBuf};

use gadfly::classify::{
    cross_validate, load_examples, score, training_examples, Classifier, Example, HybridClassifier, Label, LabelScore,
    LinearModel, ModelConfig, RuleClassifier, CV_MIN_PRECISION, THRESHOLDS,
};

const MIN_PRECISION: f64 = 0.9;
const MIN_RECALL: f64 = 0.8;

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name)
}

fn table(title: &str, scores: &[LabelScore], examples: &[Example]) -> String {
    let mut s = format!("\n{title} ({} examples)\n", examples.len());
    s.push_str(&format!(
        "  {:<24} {:>5} {:>4} {:>4} {:>4} {:>9} {:>7}\n",
        "label", "pos", "tp", "fp", "fn", "precision", "recall"
    ));
    for sc in scores {
        let pos = examples.iter().filter(|e| e.labels.contains(&sc.label)).count();
        s.push_str(&format!(
            "  {:<24} {:>5} {:>4} {:>4} {:>4} {:>9.3} {:>7.3}\n",
            sc.label.as_str(),
            pos,
            sc.tp,
            sc.fp,
            sc.fn_,
            sc.precision,
            sc.recall
        ));
    }
    s
}

fn is_corpus(e: &Example) -> bool {
    e.source.starts_with("corpus:")
}

#[test]
fn rule_classifier_meets_the_bar_on_the_dev_set() {
    let dev = load_examples(&data("moments_dev.jsonl")).expect("dev set");
    let holdout = load_examples(&data("moments_holdout.jsonl")).expect("holdout set");
    let fresh = load_examples(&data("moments_fresh.jsonl")).expect("fresh set");
    let c = RuleClassifier::default();

    for l in Label::ALL {
        let n = dev.iter().filter(|e| e.labels.contains(&l)).count();
        assert!(n >= 40, "the dev set needs at least 40 positives for {l}, has {n}");
    }
    assert!(dev.len() >= 300, "the dev set needs at least 300 examples, has {}", dev.len());

    let corpus: Vec<Example> = dev.iter().filter(|e| is_corpus(e)).cloned().collect();
    let written: Vec<Example> = dev.iter().filter(|e| !is_corpus(e)).cloned().collect();
    let overall = score(&c, &dev);

    let mut out = format!("classifier: {}\n", c.name());
    out += &table("dev, overall", &overall, &dev);
    out += &table("dev, corpus (real Claude Code transcripts)", &score(&c, &corpus), &corpus);
    out += &table("dev, written", &score(&c, &written), &written);
    out += &table("holdout (written; v1 not tuned on it, v2 was; not asserted)", &score(&c, &holdout), &holdout);
    out += &table("fresh (written after v1 was frozen; v2 was tuned on it; not asserted)", &score(&c, &fresh), &fresh);
    let blind1 = load_examples(&data("moments_blind1.jsonl")).expect("blind1 set");
    out +=
        &table("blind1 (another author; the rules were never tuned on it; not asserted)", &score(&c, &blind1), &blind1);
    println!("{out}");

    if std::env::var_os("CLASSIFIER_ERRORS").is_some() {
        for e in &dev {
            let got = c.classify(&e.text);
            if got != e.labels {
                let want: Vec<&str> = e.labels.iter().map(|l| l.as_str()).collect();
                let got_s: Vec<&str> = got.iter().map(|l| l.as_str()).collect();
                let head: String = e.text.chars().take(300).collect();
                println!("--- {} want {:?} got {:?}\n{}", e.id, want, got_s, head.replace('\n', " / "));
                for (l, ev) in c.explain(&e.text) {
                    println!("    [{l}] {ev}");
                }
            }
        }
    }

    let failing: Vec<String> = overall
        .iter()
        .filter(|s| s.precision < MIN_PRECISION || s.recall < MIN_RECALL)
        .map(|s| format!("{} (precision {:.3}, recall {:.3})", s.label, s.precision, s.recall))
        .collect();
    assert!(
        failing.is_empty(),
        "below precision {MIN_PRECISION} or recall {MIN_RECALL} on the dev set: {}\n{out}",
        failing.join(", ")
    );
}

fn bar_failures(scores: &[LabelScore]) -> Vec<String> {
    scores
        .iter()
        .filter(|s| s.precision < MIN_PRECISION || s.recall < MIN_RECALL)
        .map(|s| format!("{} (precision {:.3}, recall {:.3})", s.label, s.precision, s.recall))
        .collect()
}

fn row(name: &str, scores: &[LabelScore]) -> String {
    let cells: Vec<String> = scores.iter().map(|s| format!("{:.3}/{:.3}", s.precision, s.recall)).collect();
    format!("  {name:<34} {}\n", cells.iter().map(|c| format!("{c:>13}")).collect::<String>())
}

fn header() -> String {
    let names: String = Label::ALL.iter().map(|l| format!("{:>13}", &l.as_str()[..l.as_str().len().min(12)])).collect();
    format!("  {:<34} {names}\n", "precision/recall")
}

#[test]
fn hybrid_classifier_meets_the_bar_on_dev_and_in_cross_validation() {
    let sets: Vec<(&str, Vec<Example>)> = ["dev", "holdout", "fresh", "blind1"]
        .into_iter()
        .map(|n| (n, load_examples(&data(&format!("moments_{n}.jsonl"))).expect(n)))
        .collect();
    let all = training_examples();
    assert_eq!(all.len(), sets.iter().map(|(_, e)| e.len()).sum::<usize>(), "the embedded sets are the files");

    let t = std::time::Instant::now();
    let model = LinearModel::train(&all, &ModelConfig::default());
    let train_s = t.elapsed().as_secs_f64();
    let hybrid = HybridClassifier::with_model(model, THRESHOLDS);
    let rules = RuleClassifier::default();
    let mut out = format!(
        "classifier: {}\ntraining on {} examples: {train_s:.2} s in this build ({} features)\n",
        hybrid.name(),
        all.len(),
        hybrid.model().vocabulary_size()
    );

    out += "\nall development data now; rules tuned on dev/holdout/fresh, model trained on all four\n";
    out += &header();
    for (name, ex) in &sets {
        out += &row(&format!("{name}: rules"), &score(&rules, ex));
        out += &row(&format!("{name}: hybrid"), &score(&hybrid, ex));
    }
    let dev = &sets[0].1;
    let corpus: Vec<Example> = dev.iter().filter(|e| is_corpus(e)).cloned().collect();
    out += &row("dev corpus: hybrid", &score(&hybrid, &corpus));
    out += &table("dev, hybrid", &score(&hybrid, dev), dev);

    // Cross-validation: the model trained on 4/5, scored on the rest.
    let t = std::time::Instant::now();
    let cv = cross_validate(&all, &ModelConfig::default(), 5, CV_MIN_PRECISION);
    let cv_s = t.elapsed().as_secs_f64();
    let blind = |e: &Example| e.id.starts_with("blind");
    let real = |e: &Example| is_corpus(e);
    out += &format!(
        "\n5-fold cross-validation on all {} examples ({cv_s:.1} s); thresholds for precision >= {}\n",
        all.len(),
        cv.min_precision
    );
    out += &format!("  thresholds chosen for rules OR model: {:.3?}\n", cv.hybrid_thresholds);
    out += &format!("  thresholds chosen for the model alone: {:.3?}\n", cv.model_thresholds);
    out += &format!("  thresholds shipped: {THRESHOLDS:?}\n");
    out += &header();
    out += &row("rules (a fit, not an estimate)", &cv.rules);
    out += &row("model alone", &cv.model);
    out += &row("rules OR model (CV thresholds)", &cv.hybrid);
    out += &row("rules OR model (shipped)", &cv.shipped);
    out += &row("blind1 only: rules (blind)", &cv.score_subset(&all, [f64::INFINITY; 4], true, blind));
    out += &row("blind1 only: model alone", &cv.score_subset(&all, cv.model_thresholds, false, blind));
    out += &row("blind1 only: rules OR model", &cv.score_subset(&all, THRESHOLDS, true, blind));
    out += &row("corpus only: model alone", &cv.score_subset(&all, cv.model_thresholds, false, real));
    out += &row("corpus only: rules OR model", &cv.score_subset(&all, THRESHOLDS, true, real));

    // A new author: the model trained without blind1 (thresholds from the
    // model-alone CV of the rest), scored on blind1, where the rules are blind.
    let others: Vec<Example> = all.iter().filter(|e| !blind(e)).cloned().collect();
    let cv_others = cross_validate(&others, &ModelConfig::default(), 5, CV_MIN_PRECISION);
    let held_out =
        HybridClassifier::with_model(LinearModel::train(&others, &ModelConfig::default()), cv_others.model_thresholds);
    out += &format!(
        "\nblind1 held out: model trained on dev+holdout+fresh, thresholds {:.3?}\n",
        cv_others.model_thresholds
    );
    out += &header();
    out += &row("blind1: rules OR held-out model", &score(&held_out, &sets[3].1));
    // blind2: 240 messages by a third author, written while hybrid-v1 was
    // built and first scored once it was frozen. Never trained or tuned on.
    let blind2 = load_examples(&data("moments_blind2.jsonl")).expect("blind2 set");
    let blind2_scores = score(&hybrid, &blind2);
    out += &format!("\nblind2 (a third author; never trained or tuned on; {} examples)\n", blind2.len());
    out += &header();
    out += &row("blind2: hybrid-v1", &blind2_scores);
    println!("{out}");

    if std::env::var_os("CLASSIFIER_ERRORS").is_some() {
        for (i, e) in all.iter().enumerate().filter(|(_, e)| blind(e)) {
            for (l, label) in Label::ALL.into_iter().enumerate() {
                let pred = cv.rules_fired[i][l] || cv.probabilities[i][l] >= THRESHOLDS[l];
                if pred != e.labels.contains(&label) {
                    let head: String = e.text.chars().take(200).collect();
                    let kind = if pred { "FP" } else { "FN" };
                    println!("  CV {kind} {label} p={:.2} {}", cv.probabilities[i][l], head.replace('\n', " / "));
                }
            }
        }
    }

    let failing = bar_failures(&score(&hybrid, dev));
    assert!(failing.is_empty(), "hybrid below the bar on the dev set: {}\n{out}", failing.join(", "));
    let failing = bar_failures(&cv.shipped);
    assert!(failing.is_empty(), "hybrid below the bar in cross-validation: {}\n{out}", failing.join(", "));
    let failing = bar_failures(&blind2_scores);
    assert!(failing.is_empty(), "hybrid below the bar on the blind2 set: {}\n{out}", failing.join(", "));
}

#[test]
fn every_example_is_well_formed() {
    for name in [
        "moments_dev.jsonl",
        "moments_holdout.jsonl",
        "moments_fresh.jsonl",
        "moments_blind1.jsonl",
        "moments_blind2.jsonl",
    ] {
        let examples = load_examples(&data(name)).expect(name);
        for e in &examples {
            assert!(!e.text.trim().is_empty(), "{name}: {} has no text", e.id);
            assert!(
                e.source == "written" || e.source.starts_with("corpus:"),
                "{name}: {} has source {:?}",
                e.id,
                e.source
            );
            let mut sorted = e.labels.clone();
            sorted.sort();
            sorted.dedup();
            assert_eq!(sorted.len(), e.labels.len(), "{name}: {} repeats a label", e.id);
        }
    }
}

/// A probe, not a check, so it never runs (nor passes) in the suite: with
/// CLASSIFY_FILE=path (one message a line, `\n` for line breaks), prints the
/// labels and cited sentences for each line.
///
///   CLASSIFY_FILE=msgs.txt cargo test --test classifier -- --ignored --nocapture classify_file_from_env
#[test]
#[ignore = "a probe: run it with CLASSIFY_FILE=path and --ignored"]
fn classify_file_from_env() {
    let path = std::env::var_os("CLASSIFY_FILE").expect("set CLASSIFY_FILE to a file of messages, one a line");
    let text = std::fs::read_to_string(&path).expect("CLASSIFY_FILE");
    let c = HybridClassifier::default();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let msg = line.replace("\\n", "\n");
        let labels: Vec<&str> = c.classify(&msg).iter().map(|l| l.as_str()).collect();
        println!("{labels:?} <- {line}");
        for (l, ev) in c.explain(&msg) {
            println!("    [{l}] {ev}");
        }
    }
}
