//! A replay's report as text (every step where gadfly did something, then
//! the summary table) and as a self-contained HTML page (the steps, with
//! gadfly's moments, questions and stops marked beside the recorded
//! session, and the evaluations' geometric means charted).

use std::fmt::Write as _;

use super::{excerpt, Did, Report, Summary};
use crate::html::escape;

/// Every step where gadfly did something (and every human message), then
/// the summary.
pub fn text(r: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "gadfly replay: {} timeline{} under spec {} ({} mode, seed {})",
        if r.source.is_empty() { "a" } else { &r.source },
        r.campaign.as_ref().map_or(String::new(), |c| format!(" of campaign {c}")),
        r.spec,
        r.mode.as_str(),
        r.seed
    );
    for s in &r.steps {
        if s.did.is_empty() {
            continue;
        }
        let _ = writeln!(out, "\nstep {} (t={}s, {}): {}", s.step, seconds(s.t), s.kind, s.excerpt);
        for d in &s.did {
            for line in did_lines(d) {
                let _ = writeln!(out, "  {line}");
            }
        }
    }
    out.push('\n');
    out.push_str(&summary_table(&r.summary));
    out.push_str("\nnot replayed:\n");
    for n in &r.notes {
        let _ = writeln!(out, "  - {n}");
    }
    out
}

fn seconds(t: f64) -> String {
    if t.fract() == 0.0 {
        format!("{t:.0}")
    } else {
        format!("{t:.1}")
    }
}

/// One thing gadfly did, as lines of text.
pub fn did_lines(d: &Did) -> Vec<String> {
    match d {
        Did::Moment {
            moment,
            detector,
            source,
            detail,
            quote,
            message_step,
            repeated,
            outcome,
            question,
            suggestions,
            why,
            evaluation_count,
            ..
        } => {
            let mut v = vec![format!(
                "MOMENT {moment} ({source}, {detector}, after {evaluation_count} evaluations{}){}: {}",
                message_step.map_or(String::new(), |n| format!(", in the message of step {n}")),
                if *repeated { " REPEATED" } else { "" },
                excerpt(quote.as_deref().unwrap_or(detail), 200)
            )];
            match outcome.as_str() {
                "question" => {
                    if let Some(q) = question {
                        v.push(format!("  -> question {} ({}): {}", q.id.unwrap_or(0), q.source, excerpt(&q.text, 200)));
                    }
                }
                "suggestions" => {
                    for q in suggestions {
                        v.push(format!("  -> suggestion ({}): {}", q.source, excerpt(&q.text, 200)));
                    }
                }
                "no_question" => v.push(format!("  -> no question: {}", why.as_deref().unwrap_or(""))),
                "withheld" => v.push(format!("  -> withheld: {}", why.as_deref().unwrap_or(""))),
                _ => v.push("  -> recorded".to_string()),
            }
            v
        }
        Did::Escalated { moment, why, .. } => vec![format!("ESCALATED {moment}: {why}")],
        Did::Queued { question } => {
            vec![format!("queued question {} ({}): {}", question.id.unwrap_or(0), question.source, excerpt(&question.text, 160))]
        }
        Did::Delivered { question, via } => vec![format!(
            "ASKED {} question {} ({}): {}",
            if via == "stop_hook_reason" { "in the stop's block reason:" } else { "mid-turn, with the tool result:" },
            question.id.unwrap_or(0),
            question.source,
            excerpt(&question.text, 200)
        )],
        Did::Expired { question, reason } => {
            vec![format!("expired question {} ({}): {reason}", question.id.unwrap_or(0), question.source)]
        }
        Did::Evaluated { evaluation, holds, geomean_speedup, failing, failures, cached, .. } => {
            let mut v = vec![format!(
                "{} evaluation {evaluation}: the predicate {}; geomean {}",
                if *cached { "judged on" } else { "EVALUATED" },
                if *holds { "holds" } else { "fails" },
                geomean_speedup.map_or("unknown".to_string(), |g| format!("{g:.2}x"))
            )];
            if !cached {
                for f in failing {
                    v.push(format!("  failing {}: {}", f.scenario, f.reasons.join("; ")));
                }
                for f in failures {
                    v.push(format!("  failure: {}", excerpt(f, 200)));
                }
            }
            v
        }
        Did::RecheckNotReplayed { evaluation } => vec![format!(
            "a suspicious gain on evaluation {evaluation}, which passes: the daemon re-checks it with another seed (not replayed)"
        )],
        Did::Stop { decision, holds, failing, failures, unevaluated, question, recorded, .. } => {
            let mut v = vec![format!(
                "STOP: {}{}{}",
                decision.as_str().to_uppercase(),
                match holds {
                    Some(true) => " (the predicate holds)".to_string(),
                    Some(false) => format!(" (the predicate fails on {} scenarios)", failing.len()),
                    None => format!(" (not evaluated: {})", unevaluated.as_deref().unwrap_or("")),
                },
                match recorded {
                    Some(r) if r.decision == decision.as_str() => format!("; live: {} (same)", r.decision),
                    Some(r) => format!("; live: {} (DIFFERS)", r.decision),
                    None => String::new(),
                }
            )];
            for f in failing {
                v.push(format!("  failing {}: {}", f.scenario, f.reasons.join("; ")));
            }
            for f in failures {
                v.push(format!("  failure: {}", excerpt(f, 200)));
            }
            if let Some(q) = question {
                v.push(format!("  carries question {} ({}): {}", q.id.unwrap_or(0), q.source, excerpt(&q.text, 200)));
            }
            if let Some(live) = recorded.as_ref().and_then(|r| r.question.as_ref()) {
                if question.as_ref().is_none_or(|q| &q.text != live) {
                    v.push(format!("  the live run asked instead: {}", excerpt(live, 200)));
                }
            }
            v
        }
        Did::Human { text, queued } => vec![format!(
            "HUMAN{}: {}",
            if *queued { " (a question queued through gadfly)" } else { "" },
            excerpt(text, 200)
        )],
    }
}

/// The summary as a readable table.
pub fn summary_table(s: &Summary) -> String {
    let mut out = String::from("summary\n");
    let row = |out: &mut String, k: &str, v: String| {
        let _ = writeln!(out, "  {k:<34} {v}");
    };
    row(&mut out, "steps", s.steps.to_string());
    row(&mut out, "evaluations", s.evaluations.to_string());
    row(&mut out, "stops judged", s.stops.to_string());
    row(
        &mut out,
        "  would have been blocked",
        format!("{} ({} with no evaluation to judge)", s.blocked, s.unevaluated),
    );
    row(&mut out, "  allowed", s.allowed.to_string());
    if s.recorded > 0 {
        row(&mut out, "  recorded (audit mode)", s.recorded.to_string());
    }
    if let Some(a) = &s.agreement {
        let differ = if a.differ.is_empty() {
            String::new()
        } else {
            format!(" (differ at steps {})", a.differ.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", "))
        };
        row(&mut out, "  same decision as the live run", format!("{} of {}{differ}", a.agree, a.compared));
    }
    row(
        &mut out,
        "questions asked",
        format!("{} ({} at stops, {} mid-turn)", s.questions_asked, s.asked_at_stop, s.asked_mid_turn),
    );
    row(&mut out, "questions queued", s.questions_queued.to_string());
    if s.suggested > 0 {
        row(&mut out, "moments with suggestions", s.suggested.to_string());
    }
    row(&mut out, "escalations", s.escalations.to_string());
    let _ = writeln!(out, "  moments by kind                    count  first at step");
    if s.moments.is_empty() {
        let _ = writeln!(out, "    (none)");
    }
    for (m, t) in &s.moments {
        let _ = writeln!(out, "    {m:<32} {:>5}  {}", t.count, t.first_step);
    }
    if !s.humans.is_empty() {
        let _ = writeln!(out, "  human messages, and gadfly's nearest question before each");
        for h in &s.humans {
            let _ = writeln!(out, "    step {}: {}", h.step, excerpt(&h.text, 100));
            match &h.nearest {
                Some(n) => {
                    let _ = writeln!(
                        out,
                        "      {} steps ({}s) earlier, step {} ({}): {}",
                        n.steps_earlier,
                        seconds(n.seconds_earlier),
                        n.step,
                        n.via,
                        excerpt(&n.question.text, 100)
                    );
                }
                None => {
                    let _ = writeln!(out, "      (no question from gadfly before it)");
                }
            }
        }
    }
    out
}

/// A self-contained page: the summary, a chart of the evaluations'
/// geometric means with the stops and questions marked, and every step of
/// the session with what gadfly did beside it.
pub fn html(r: &Report) -> String {
    let title = format!("gadfly replay: {}", r.campaign.as_deref().unwrap_or(&r.source));
    let mut body = String::new();
    let _ = write!(
        body,
        "<h1>{}</h1><p class=meta>spec {} · {} mode · seed {} · source {}</p>",
        escape(&title),
        escape(&r.spec),
        r.mode.as_str(),
        r.seed,
        escape(&r.source)
    );
    body.push_str(&chart(r));
    let _ = write!(body, "<h2>Summary</h2><pre>{}</pre>", escape(&summary_table(&r.summary)));
    body.push_str("<h2>Steps</h2><table><tr><th>step</th><th>t (s)</th><th>recorded session</th><th>gadfly</th></tr>");
    for s in &r.steps {
        let class = s
            .did
            .iter()
            .find_map(|d| match d {
                Did::Stop { decision, .. } => Some(format!("stop-{}", decision.as_str())),
                Did::Delivered { .. } => Some("asked".into()),
                Did::Moment { .. } => Some("moment".into()),
                Did::Human { .. } => Some("human".into()),
                _ => None,
            })
            .unwrap_or_default();
        let did: Vec<String> = s.did.iter().flat_map(did_lines).map(|l| escape(&l)).collect();
        let _ = write!(
            body,
            "<tr id=\"step-{}\" class=\"{class}\"><td>{}</td><td>{}</td><td><b>{}</b> {}</td><td>{}</td></tr>",
            s.step,
            s.step,
            seconds(s.t),
            escape(&s.kind),
            escape(&s.excerpt),
            did.join("<br>")
        );
    }
    body.push_str("</table><h2>Not replayed</h2><ul>");
    for n in &r.notes {
        let _ = write!(body, "<li>{}</li>", escape(n));
    }
    body.push_str("</ul>");
    format!(
        "<!doctype html><html><head><meta charset=utf-8><title>{}</title><style>{STYLE}</style></head><body>{body}</body></html>\n",
        escape(&title)
    )
}

const STYLE: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse;width:100%}\
td,th{border-bottom:1px solid #ddd;padding:4px 6px;vertical-align:top;text-align:left}td:nth-child(4){font-family:monospace;font-size:12px}\
tr.stop-block{background:#fde2e2}tr.stop-allow{background:#e2f5e2}tr.stop-record{background:#eef}tr.asked{background:#fff6d6}\
tr.moment{background:#f6f0ff}tr.human{background:#e6f0ff}.meta{color:#666}svg{border:1px solid #ddd;background:#fff}";

/// The geometric mean of each evaluation against the step it came at,
/// with the stops (red: blocked, green: allowed), the questions asked
/// (orange) and the human messages (blue) marked on the step axis.
fn chart(r: &Report) -> String {
    let (w, h, pad) = (900.0f64, 220.0f64, 30.0f64);
    let last = r.steps.last().map_or(1, |s| s.step).max(1) as f64;
    let x = |step: usize| pad + (step as f64) / last * (w - 2.0 * pad);
    let mut points: Vec<(usize, f64)> = vec![];
    let mut marks = String::new();
    for s in &r.steps {
        for d in &s.did {
            let (color, label) = match d {
                Did::Evaluated { geomean_speedup: Some(g), cached: false, .. } => {
                    points.push((s.step, *g));
                    continue;
                }
                Did::Stop { decision, .. } => (
                    match decision {
                        super::Decision::Block => "#c0392b",
                        super::Decision::Allow => "#27ae60",
                        super::Decision::LimitAccepted => "#b7950b",
                        super::Decision::Record => "#5560c0",
                    },
                    format!("step {}: stop, {}", s.step, decision.as_str()),
                ),
                Did::Delivered { question, .. } => ("#e67e22", format!("step {}: asked {}", s.step, question.source)),
                Did::Human { text, .. } => ("#2e6fd0", format!("step {}: human: {}", s.step, excerpt(text, 80))),
                _ => continue,
            };
            let _ = write!(
                marks,
                "<a href=\"#step-{}\"><line x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{pad}\" y2=\"{y2}\" stroke=\"{color}\" stroke-width=\"2\"><title>{}</title></line></a>",
                s.step,
                escape(&label),
                x = x(s.step),
                y2 = h - pad
            );
        }
    }
    let top = points.iter().map(|p| p.1).fold(1.0f64, f64::max) * 1.1;
    let y = |g: f64| h - pad - g / top * (h - 2.0 * pad);
    let line: Vec<String> = points.iter().map(|(s, g)| format!("{:.1},{:.1}", x(*s), y(*g))).collect();
    let dots: String = points
        .iter()
        .map(|(s, g)| {
            format!(
                "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"#222\"><title>step {s}: geomean {g:.2}x</title></circle>",
                x(*s),
                y(*g)
            )
        })
        .collect();
    format!(
        "<h2>Evaluations</h2><svg width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\">{marks}\
         <line x1=\"{pad}\" x2=\"{x2}\" y1=\"{y1}\" y2=\"{y1}\" stroke=\"#999\" stroke-dasharray=\"4\"><title>1.00x</title></line>\
         <polyline fill=\"none\" stroke=\"#222\" points=\"{}\"/>{dots}\
         <text x=\"{pad}\" y=\"16\" font-size=\"12\">geometric mean speedup by step (top {top:.2}x); red blocked, green allowed, orange asked, blue human</text></svg>",
        line.join(" "),
        x2 = w - pad,
        y1 = y(1.0)
    )
}
