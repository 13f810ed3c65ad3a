//! The goals of BENCHMARKS.md, judged by each bench from the figures it
//! just measured: printed as a `goal:` line, and appended as one JSON line
//! to the file that `BENCH_GOALS` names. `benches/all.sh` sets it, runs
//! every bench, and ends with one table of all the goals.

use std::io::Write;

/// Whether a figure meets one of the goals: `None` for a figure it
/// sets no goal for (printed beside the goals for context).
pub fn verdict(goal: &str, measured: &str, met: Option<bool>) {
    record(goal, measured, met, false);
}

/// A reading of a goal stricter than the wording (shown beside
/// the goals, counted apart from them).
#[allow(dead_code)] // used by some benches only
pub fn stricter(goal: &str, measured: &str, met: bool) {
    record(goal, measured, Some(met), true);
}

fn record(goal: &str, measured: &str, met: Option<bool>, stricter: bool) {
    let word = match met {
        Some(true) => "met",
        Some(false) => "NOT MET",
        None => "no goal set",
    };
    let label = if stricter { "stricter reading" } else { "goal" };
    println!("{label}: {goal}: {measured}: {word}");
    let Some(path) = std::env::var_os("BENCH_GOALS") else { return };
    let line = serde_json::json!({
        "bench": std::env::args().next().and_then(|a| {
            let name = std::path::Path::new(&a).file_stem()?.to_string_lossy().into_owned();
            // cargo names the binary `<bench>-<hash>`.
            Some(name.rsplit_once('-').map_or(name.clone(), |(b, _)| b.to_string()))
        }),
        "goal": goal,
        "measured": measured,
        "met": met,
        "stricter": stricter,
    });
    let written =
        std::fs::OpenOptions::new().create(true).append(true).open(&path).and_then(|mut f| writeln!(f, "{line}"));
    if let Err(e) = written {
        eprintln!("cannot append to BENCH_GOALS ({}): {e}", std::path::Path::new(&path).display());
    }
}
