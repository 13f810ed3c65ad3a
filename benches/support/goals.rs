//! The goals of BENCHMARKS.md, judged by each bench from the figures it
//! just measured: printed as a `goal:` line, and appended as one JSON line
//! to the file that `BENCH_GOALS` names. `benches/all.sh` sets it, runs
//! every bench, and ends with one table of all the goals.

use std::io::Write;

/// Whether a figure meets its goal: `None` for a figure the issue sets no
/// goal for (printed beside the goals for context).
pub fn verdict(goal: &str, measured: &str, met: Option<bool>) {
    let word = match met {
        Some(true) => "met",
        Some(false) => "NOT MET",
        None => "no goal set",
    };
    println!("goal: {goal}: {measured}: {word}");
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
    });
    let written =
        std::fs::OpenOptions::new().create(true).append(true).open(&path).and_then(|mut f| writeln!(f, "{line}"));
    if let Err(e) = written {
        eprintln!("cannot append to BENCH_GOALS ({}): {e}", std::path::Path::new(&path).display());
    }
}
