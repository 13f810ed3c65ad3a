//! Pressure-aware checks (issue #34): an agent blocked again and again
//! without a gain is more likely to game the check than to beat it. Past
//! `[gate] remind_after_blocks` such blocks, a candidate that passes is
//! re-evaluated with a fresh seed (`app/recheck.rs`) and the lines it added
//! since the initial kernel are scanned for what detects the harness or its
//! timing: reads of gadfly's environment, clocks, the process's own
//! `/proc` entries. Pure: lines in, findings out.

/// (what a line contains, what that suggests), matched case-sensitively.
const PATTERNS: &[(&str, &str)] = &[
    ("GADFLY_", "reads gadfly's environment"),
    ("/proc/self", "reads its own process entries"),
    ("getppid", "looks at its parent process"),
    ("clock_gettime", "reads a clock"),
    ("gettimeofday", "reads a clock"),
    ("std::chrono", "reads a clock"),
    ("perf_counter", "reads a clock"),
    ("time.time(", "reads a clock"),
    ("rdtsc", "reads the time-stamp counter"),
    ("globaltimer", "reads the GPU's global timer"),
    ("clock64(", "reads the GPU's clock"),
    ("cudaEventElapsedTime", "times itself with CUDA events"),
    ("LD_PRELOAD", "touches the dynamic loader"),
];

/// The added lines that look like timing or harness detection, each as
/// "what it suggests: `line`" (at most `max`).
pub fn scan(added: &[String], max: usize) -> Vec<String> {
    let mut out = vec![];
    for line in added {
        if let Some((_, what)) = PATTERNS.iter().find(|(p, _)| line.contains(p)) {
            let shown: String = line.trim().chars().take(160).collect();
            out.push(format!("{what}: `{shown}`"));
            if out.len() >= max {
                break;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn harness_and_timing_detection_is_found_and_plain_kernel_code_is_not() {
        let added: Vec<String> = [
            "  float acc = 0.0f;",
            "  if (getenv(\"GADFLY_CAMPAIGN\")) return fast_path();",
            "  for (int i = 0; i < n; ++i) acc += a[i] * b[i];",
            "  FILE *f = fopen(\"/proc/self/cmdline\", \"r\");",
            "  auto t0 = std::chrono::steady_clock::now();",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let found = scan(&added, 10);
        assert_eq!(found.len(), 3, "{found:?}");
        assert!(found[0].starts_with("reads gadfly's environment: `if (getenv(\"GADFLY_CAMPAIGN\"))"), "{found:?}");
        assert!(found[1].starts_with("reads its own process entries"), "{found:?}");
        assert!(found[2].starts_with("reads a clock"), "{found:?}");
        assert_eq!(scan(&added, 1).len(), 1, "bounded");
        assert!(scan(&added[..1], 10).is_empty());
    }
}
