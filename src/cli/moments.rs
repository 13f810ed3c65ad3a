//! `gadfly moments ...`: the classifier of agent messages, offline.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Subcommand;
use serde_json::{json, Value};

#[derive(Subcommand, Debug)]
pub enum MomentsCommand {
    /// Classify agent messages (JSON lines) into moments.
    ///
    /// Read {"id", "text"} JSON lines (stdin by default; an optional "context" string carries the tool
    /// output that preceded the message), print {"id", "labels"} lines.
    Classify {
        #[arg(long)]
        input: Option<PathBuf>,
        /// Also print the sentence behind each label.
        #[arg(long)]
        explain: bool,
    },
    /// Precision and recall per label on a labeled set ({"id", "text", "labels"} lines).
    Score { file: PathBuf },
    /// Train the shipped classifier model from the embedded labeled sets.
    ///
    /// Train the shipped classifier model from the labeled sets embedded in the binary and write it.
    ///
    /// The binary carries the model it writes (src/classify/trained/model.txt), so no process trains one
    /// at start; run this after a change to those sets or to the features, then rebuild.
    Train {
        /// Where to write the model.
        #[arg(long, default_value = "src/classify/trained/model.txt")]
        out: PathBuf,
    },
    /// Leave-one-source-out scores on real agent text.
    ///
    /// Leave-one-source-out on real agent text: each corpus source scored by a model trained without it.
    ///
    /// The messages come from `python3 tests/moments/corpus.py extract --out FILE` (the shared corpus,
    /// not in this repository), the labels from tests/data/moments/labels.jsonl (references into it).
    Eval {
        /// The extracted messages (JSON lines: id, source, text, context).
        #[arg(long)]
        messages: PathBuf,
        /// The labels (JSON lines: id, source, labels, spans).
        #[arg(long, default_value = "tests/data/moments/labels.jsonl")]
        labels: PathBuf,
        /// Print the figures as JSON.
        #[arg(long)]
        json: bool,
    },
}

pub(super) fn moments(cmd: MomentsCommand) -> anyhow::Result<ExitCode> {
    use crate::classify::{Classifier, HybridClassifier};
    use std::io::{BufRead, Write};
    let classifier = HybridClassifier::default();
    match cmd {
        MomentsCommand::Classify { input, explain } => {
            let reader: Box<dyn BufRead> = match &input {
                Some(p) => Box::new(std::io::BufReader::new(
                    std::fs::File::open(p).with_context(|| format!("opening {}", p.display()))?,
                )),
                None => Box::new(std::io::BufReader::new(std::io::stdin())),
            };
            let name = input.as_ref().map_or("stdin".to_string(), |p| p.display().to_string());
            let mut out = std::io::stdout().lock();
            let mut bad = 0;
            for (i, line) in reader.lines().enumerate() {
                let line = line?;
                if line.trim().is_empty() {
                    continue;
                }
                let v: Value = match serde_json::from_str(&line) {
                    Ok(v) => v,
                    Err(e) => {
                        eprintln!("{name}:{}: not valid JSON: {e}", i + 1);
                        bad += 1;
                        continue;
                    }
                };
                match classify_line(&classifier, &v, explain) {
                    Ok(o) => writeln!(out, "{o}")?,
                    Err(why) => {
                        eprintln!("{name}:{}: {why}", i + 1);
                        bad += 1;
                    }
                }
            }
            Ok(if bad == 0 { ExitCode::SUCCESS } else { ExitCode::from(1) })
        }
        MomentsCommand::Train { out } => {
            let started = std::time::Instant::now();
            let examples = crate::classify::training_examples();
            let model = crate::classify::LinearModel::train(&examples, &crate::classify::ModelConfig::default());
            let text = crate::classify::stored::write(&model);
            std::fs::write(&out, &text).with_context(|| format!("writing {}", out.display()))?;
            println!(
                "trained on {} examples in {:.2} s: {} features, {} bytes written to {}",
                examples.len(),
                started.elapsed().as_secs_f64(),
                model.vocabulary_size(),
                text.len(),
                out.display()
            );
            Ok(ExitCode::SUCCESS)
        }
        MomentsCommand::Eval { messages, labels, json } => {
            use crate::classify::corpus;
            let m = corpus::load_messages(&messages)?;
            let l = corpus::load_labels(&labels)?;
            let set = corpus::join(&m, &l)?;
            let started = std::time::Instant::now();
            let report = corpus::leave_one_source_out(
                &set,
                &crate::classify::ModelConfig::default(),
                crate::classify::THRESHOLDS,
            );
            if json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                println!(
                    "{} labelled messages of {} sources ({} from {}, labels {}), leave one source out in {:.1} s",
                    set.len(),
                    report.sources.len(),
                    m.len(),
                    messages.display(),
                    labels.display(),
                    started.elapsed().as_secs_f64()
                );
                print!("{}", report.text());
            }
            Ok(ExitCode::SUCCESS)
        }
        MomentsCommand::Score { file } => {
            let examples = crate::classify::load_examples(&file)?;
            let scores = crate::classify::score(&classifier, &examples);
            println!("{} examples from {}, classifier {}", examples.len(), file.display(), classifier.name());
            println!("{:<24} {:>5} {:>5} {:>5} {:>10} {:>8}", "label", "tp", "fp", "fn", "precision", "recall");
            for s in scores {
                println!(
                    "{:<24} {:>5} {:>5} {:>5} {:>10.3} {:>8.3}",
                    s.label.as_str(),
                    s.tp,
                    s.fp,
                    s.fn_,
                    s.precision,
                    s.recall
                );
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// One input line of `gadfly moments classify`: `text` (required), `id`
/// (echoed), `context` (optional: the tool output that preceded the
/// message, a string or null; the classifier judges the message's own
/// words, so it does not change the labels); other fields are ignored.
fn classify_line(classifier: &crate::classify::HybridClassifier, v: &Value, explain: bool) -> Result<Value, String> {
    use crate::classify::Classifier;
    let Some(text) = v["text"].as_str() else {
        return Err("field `text` is missing or not a string".into());
    };
    if !(v["context"].is_null() || v["context"].is_string()) {
        return Err("field `context` (the preceding tool output) must be a string".into());
    }
    let labels: Vec<&str> = classifier.classify(text).iter().map(|l| l.as_str()).collect();
    let mut o = json!({"id": v["id"], "labels": labels});
    if explain {
        o["evidence"] = json!(classifier
            .explain(text)
            .into_iter()
            .map(|(l, q)| json!({"label": l.as_str(), "quote": q}))
            .collect::<Vec<_>>());
    }
    Ok(o)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::HybridClassifier;

    #[test]
    fn a_line_may_carry_the_preceding_tool_output_as_context() {
        let c = HybridClassifier::default();
        let text = "cuBLAS is already highly optimized; this is the hardware limit, we cannot beat it.";
        let plain = classify_line(&c, &json!({"id": 1, "text": text}), false).unwrap();
        let with = classify_line(
            &c,
            &json!({"id": 1, "text": text, "context": "$ ./bench\nours 1.02 ms, cublas 0.98 ms", "source": "x"}),
            true,
        )
        .unwrap();
        assert_eq!(with["id"], 1);
        assert_eq!(with["labels"], plain["labels"], "the context is accepted beside the text");
        assert!(with["evidence"].is_array());
        let null = classify_line(&c, &json!({"id": 2, "text": text, "context": null}), false).unwrap();
        assert_eq!(null["labels"], plain["labels"]);
        // A context that is not text is refused with a clear message, as a bad `text` is.
        let bad = classify_line(&c, &json!({"id": 3, "text": text, "context": {"out": 1}}), false).unwrap_err();
        assert!(bad.contains("`context`") && bad.contains("string"), "{bad}");
        assert!(classify_line(&c, &json!({"context": "x"}), false).unwrap_err().contains("`text`"));
    }
}
