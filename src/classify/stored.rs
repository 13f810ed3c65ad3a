//! A trained [`LinearModel`] as text, so the binary carries the shipped
//! model instead of training it at first use (issue 48: no training at
//! process start). `src/classify/trained/model.txt` is written by
//! `gadfly moments train --out src/classify/trained/model.txt`; a test
//! retrains the model from the embedded sets and asserts the file is that
//! model, bit for bit, so it never drifts from its data.
//!
//! Format (UTF-8 lines): a `#` comment, `config` and the training
//! configuration, `bias` and four numbers, then one line per feature in
//! the order of its id: four weights (in [`super::Label::ALL`] order), a
//! tab, the feature. Numbers are written in Rust's shortest form that
//! reads back to the same `f64`.

use std::collections::HashMap;

use anyhow::{bail, Context};

use super::model::{LinearModel, ModelConfig};

const HEADER: &str = "# gadfly classifier model v1 (written by `gadfly moments train`; do not edit)";

pub fn write(m: &LinearModel) -> String {
    let c = m.config();
    let mut out = String::with_capacity(64 * m.vocabulary_size());
    out.push_str(HEADER);
    out.push('\n');
    out.push_str(&format!(
        "config {} {} {} {} {} {} {} {} {} {} {} {}\n",
        c.lambda,
        c.epochs,
        c.eta0,
        c.pos_weight,
        c.seed,
        c.min_df,
        c.bigrams,
        c.classes,
        c.question_scope,
        c.stems,
        c.context,
        c.ratios
    ));
    let (weights, bias) = m.parameters();
    out.push_str(&format!("bias {} {} {} {}\n", bias[0], bias[1], bias[2], bias[3]));
    let mut names: Vec<(&String, u32)> = m.vocabulary().iter().map(|(k, v)| (k, *v)).collect();
    names.sort_by_key(|(_, id)| *id);
    for (name, id) in names {
        let w = weights[id as usize];
        out.push_str(&format!("{} {} {} {}\t{name}\n", w[0], w[1], w[2], w[3]));
    }
    out
}

pub fn read(text: &str, name: &str) -> anyhow::Result<LinearModel> {
    let mut lines = text.lines().enumerate();
    let at = |i: usize| format!("{name}:{}", i + 1);
    match lines.next() {
        Some((_, h)) if h == HEADER => {}
        _ => bail!("{name}:1: not a gadfly classifier model (expected the line {HEADER:?})"),
    }
    let (i, cfg_line) = lines.next().context(format!("{name}: no config line"))?;
    let f: Vec<&str> =
        cfg_line.strip_prefix("config ").with_context(|| format!("{}: expected `config`", at(i)))?.split(' ').collect();
    if f.len() != 12 {
        bail!("{}: `config` needs 12 fields, has {}", at(i), f.len());
    }
    let num = |s: &str| s.parse::<f64>().with_context(|| format!("{}: not a number: {s:?}", at(i)));
    let int = |s: &str| s.parse::<u64>().with_context(|| format!("{}: not an integer: {s:?}", at(i)));
    let flag = |s: &str| s.parse::<bool>().with_context(|| format!("{}: not true or false: {s:?}", at(i)));
    let cfg = ModelConfig {
        lambda: num(f[0])?,
        epochs: int(f[1])? as usize,
        eta0: num(f[2])?,
        pos_weight: num(f[3])?,
        seed: int(f[4])?,
        min_df: int(f[5])? as usize,
        bigrams: flag(f[6])?,
        classes: flag(f[7])?,
        question_scope: flag(f[8])?,
        stems: flag(f[9])?,
        context: flag(f[10])?,
        ratios: flag(f[11])?,
    };
    let four = |s: &str, i: usize| -> anyhow::Result<[f64; 4]> {
        let v: Vec<f64> = s
            .split(' ')
            .map(|x| x.parse::<f64>().with_context(|| format!("{}: not a number: {x:?}", at(i))))
            .collect::<anyhow::Result<_>>()?;
        <[f64; 4]>::try_from(v).map_err(|v| anyhow::anyhow!("{}: expected 4 numbers, found {}", at(i), v.len()))
    };
    let (i, bias_line) = lines.next().context(format!("{name}: no bias line"))?;
    let bias = four(bias_line.strip_prefix("bias ").with_context(|| format!("{}: expected `bias`", at(i)))?, i)?;
    let mut vocab = HashMap::new();
    let mut weights = Vec::new();
    for (i, line) in lines {
        let (w, feature) =
            line.split_once('\t').with_context(|| format!("{}: expected weights, a tab, a feature", at(i)))?;
        if vocab.insert(feature.to_string(), weights.len() as u32).is_some() {
            bail!("{}: feature {feature:?} twice", at(i));
        }
        weights.push(four(w, i)?);
    }
    Ok(LinearModel::from_parts(cfg, vocab, weights, bias))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::model::training_examples;

    #[test]
    fn a_model_reads_back_bit_for_bit() {
        let examples: Vec<_> = training_examples().into_iter().step_by(7).collect();
        let m = LinearModel::train(&examples, &ModelConfig { epochs: 2, ..ModelConfig::default() });
        let back = read(&write(&m), "test").unwrap();
        assert_eq!(back, m);
    }

    #[test]
    fn a_damaged_file_is_refused_with_its_line() {
        let m = LinearModel::train(&training_examples()[..40], &ModelConfig { epochs: 1, ..ModelConfig::default() });
        let text = write(&m);
        let bad = text.replacen("bias ", "bias x", 1);
        let e = format!("{:#}", read(&bad, "model.txt").unwrap_err());
        assert!(e.contains("model.txt:3") && e.contains("not a number"), "{e}");
        assert!(read("hello", "m").unwrap_err().to_string().contains("not a gadfly classifier model"));
    }

    /// The shipped model is the one the embedded sets train, bit for bit.
    #[test]
    fn the_shipped_model_is_what_its_data_trains() {
        let trained = LinearModel::train(&training_examples(), &ModelConfig::default());
        let shipped = read(super::super::model::SHIPPED_MODEL, "src/classify/trained/model.txt").unwrap();
        assert!(
            shipped == trained,
            "src/classify/trained/model.txt is not the model its data trains: run \
             `cargo run -- moments train --out src/classify/trained/model.txt`"
        );
    }
}
