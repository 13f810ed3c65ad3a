//! The labels of real agent text (issue 48, `tests/data/moments/`) against
//! the shared corpus they point into: every label resolves to a message of
//! `tests/moments/corpus.py extract`, every span lies inside its message
//! and holds words. Skipped (with a notice) where `../shared/corpus` is not
//! beside the repository.

use std::path::PathBuf;
use std::process::Command;

use gadfly::classify::corpus::{join, load_labels, load_messages};

fn repo(p: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(p)
}

#[test]
fn every_label_points_at_a_message_of_the_corpus_and_its_span_at_words() {
    let corpus = repo("../shared/corpus");
    if !corpus.join("README.md").exists() {
        eprintln!("SKIPPED: the shared corpus is not at {}", corpus.display());
        return;
    }
    let out = tempfile::tempdir().unwrap();
    let messages = out.path().join("messages.jsonl");
    let st = Command::new("python3")
        .arg(repo("tests/moments/corpus.py"))
        .args(["extract", "--corpus"])
        .arg(&corpus)
        .arg("--out")
        .arg(&messages)
        .status()
        .expect("python3");
    assert!(st.success(), "corpus.py extract failed");
    let m = load_messages(&messages).unwrap();
    let l = load_labels(&repo("tests/data/moments/labels.jsonl")).unwrap();
    assert!(l.len() >= 4000, "{} labelled messages", l.len());
    let set = join(&m, &l).expect("every label resolves to an extracted message");
    let mut spans = 0;
    for x in &set {
        let n = x.example.text.chars().count();
        for (label, [a, b]) in &x.spans {
            assert!(x.example.labels.contains(label), "{}: a span for a label it lacks", x.example.id);
            assert!(a < b && *b <= n, "{}: span {a}..{b} outside a message of {n} characters", x.example.id);
            let words: String = x.example.text.chars().skip(*a).take(b - a).collect();
            assert!(words.chars().any(char::is_alphanumeric), "{}: the span holds no word: {words:?}", x.example.id);
            spans += 1;
        }
    }
    let positives: usize = set.iter().map(|x| x.example.labels.len()).sum();
    assert!(spans * 100 >= positives * 99, "{spans} spans for {positives} labels: quotes were lost");
    eprintln!("{} labelled messages, {positives} labels, {spans} spans", set.len());
}
