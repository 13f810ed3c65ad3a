//! `gadfly moments ...`: the classifier of agent messages, offline.

use std::process::ExitCode;

use anyhow::Context;
use serde_json::{json, Value};

use super::MomentsCommand;

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
                let Some(text) = v["text"].as_str() else {
                    eprintln!("{name}:{}: field `text` is missing or not a string", i + 1);
                    bad += 1;
                    continue;
                };
                let labels: Vec<&str> = classifier.classify(text).iter().map(|l| l.as_str()).collect();
                let mut o = json!({"id": v["id"], "labels": labels});
                if explain {
                    o["evidence"] = json!(classifier
                        .explain(text)
                        .into_iter()
                        .map(|(l, q)| json!({"label": l.as_str(), "quote": q}))
                        .collect::<Vec<_>>());
                }
                writeln!(out, "{o}")?;
            }
            Ok(if bad == 0 { ExitCode::SUCCESS } else { ExitCode::from(1) })
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
