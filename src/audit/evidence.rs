//! Reading verification evidence out of tool output: test-runner summaries
//! (cargo, pytest, ctest, go test, plain "N passed, M failed"), exit codes,
//! and which commands are verification runs at all.

use std::sync::LazyLock;

use regex::Regex;

/// What one tool output says about tests.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Summary {
    pub passed: Option<u64>,
    pub failed: Option<u64>,
    /// The line the numbers come from.
    pub line: String,
}

impl Summary {
    pub fn failing(&self) -> bool {
        self.failed.is_some_and(|f| f > 0)
    }
}

static CARGO: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"test result: (ok|FAILED)\. (\d+) passed; (\d+) failed").expect("cargo summary regex")
});
static CTEST: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(\d+)% tests passed, (\d+) tests? failed out of (\d+)").expect("ctest summary regex")
});
static PASSED: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)\b(\d+) (?:tests? )?passed\b").expect("passed regex"));
static FAILED: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)\b(\d+) (?:tests? )?(?:failed|failures?)\b").expect("failed regex"));
static GO_FAIL: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"(?m)^(--- FAIL:|FAIL\s)").expect("go fail regex"));
static GO_OK: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"(?m)^ok\s+\S+").expect("go ok regex"));
static EXIT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)(?:exit code|exited with code|process exited with code)[: ]+(-?\d+)").expect("exit regex")
});
/// The test summary a tool output carries, if any (the last one wins).
pub fn summarize(output: &str) -> Option<Summary> {
    let mut found: Option<Summary> = None;
    let mut cargo_total: Option<(u64, u64, String)> = None;
    for c in CARGO.captures_iter(output) {
        let (p, f) = (count(&c[2]), count(&c[3]));
        let e = cargo_total.get_or_insert((0, 0, String::new()));
        e.0 = e.0.saturating_add(p);
        e.1 = e.1.saturating_add(f);
        e.2 = c[0].to_string();
    }
    if let Some((p, f, line)) = cargo_total {
        return Some(Summary { passed: Some(p), failed: Some(f), line });
    }
    if let Some(c) = CTEST.captures_iter(output).last() {
        let failed = count(&c[2]);
        let total = count(&c[3]);
        return Some(Summary {
            passed: Some(total.saturating_sub(failed)),
            failed: Some(failed),
            line: c[0].to_string(),
        });
    }
    for line in output.lines() {
        let p = PASSED.captures(line).map(|c| count(&c[1]));
        let f = FAILED.captures(line).map(|c| count(&c[1]));
        if p.is_some() || f.is_some() {
            found =
                Some(Summary { passed: p, failed: f.or(p.map(|_| 0)), line: line.trim().chars().take(160).collect() });
        }
    }
    if found.is_none() {
        if let Some(m) = GO_FAIL.find_iter(output).last() {
            return Some(Summary { passed: None, failed: Some(1), line: m.as_str().trim().to_string() });
        }
        if let Some(m) = GO_OK.find_iter(output).last() {
            return Some(Summary { passed: Some(1), failed: Some(0), line: m.as_str().trim().to_string() });
        }
    }
    found
}

/// A count of tests as printed (digits only): one too large for a u64 is
/// still a count, never zero.
fn count(digits: &str) -> u64 {
    digits.parse().unwrap_or(u64::MAX)
}

/// An exit code printed in a tool output ("Exit code 2", "Process exited with code 1");
/// one too large for an i64 is still not zero.
pub fn exit_code(output: &str) -> Option<i64> {
    EXIT.captures_iter(output)
        .last()
        .map(|c| c[1].parse().unwrap_or(if c[1].starts_with('-') { i64::MIN } else { i64::MAX }))
}

/// Whether a command line is a test or benchmark run: one of its simple
/// commands runs a test runner (`cargo test`, `pytest`, `ctest`, `go test`,
/// `make test`, `npm test`...) or a program whose name says test or bench.
pub fn is_verification(command: &str) -> bool {
    command.split(['&', ';', '|', '\n']).any(|simple| {
        let words: Vec<&str> =
            simple.split_whitespace().skip_while(|w| w.contains('=') && !w.starts_with('-')).collect();
        let (program, rest) = match words.as_slice() {
            [] => return false,
            [p, rest @ ..]
                if matches!(*p, "python" | "python3" | "bash" | "sh" | "time" | "nice" | "exec" | "uv" | "poetry") =>
            {
                match rest.iter().find(|w| !w.starts_with('-')) {
                    Some(p2) => (*p2, &rest[1.min(rest.len())..]),
                    None => return false,
                }
            }
            [p, rest @ ..] => (*p, rest),
        };
        let base = program.rsplit('/').next().unwrap_or(program).to_lowercase();
        let sub = rest.first().copied().unwrap_or("");
        match base.as_str() {
            "cargo" => matches!(sub, "test" | "bench" | "nextest"),
            "go" => sub == "test",
            "make" | "ninja" => rest.iter().any(|w| matches!(*w, "test" | "check" | "bench" | "tests")),
            "npm" | "yarn" | "pnpm" => rest.iter().any(|w| *w == "test"),
            "pytest" | "py.test" | "ctest" | "tox" | "nox" | "gadfly" => base != "gadfly" || sub == "eval",
            _ => base.contains("test") || base.contains("bench"),
        }
    })
}

/// Numbers a claim states about tests: ("all", None) or (count, total).
pub fn claimed_counts(claim: &str) -> Option<(Option<u64>, Option<u64>)> {
    static ALL: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(
            r"(?i)\ball (?:(\d+) )?(?:\w+ )?(?:tests?|scenarios|checks)\b[^.]{0,40}\b(pass|passing|green|succeed)",
        )
        .expect("all regex")
    });
    static FRACTION: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"\b(\d+)\s*/\s*(\d+)\s+(?:tests?|scenarios|checks)").expect("fraction regex"));
    if let Some(c) = FRACTION.captures(claim) {
        return Some((c[1].parse().ok(), c[2].parse().ok()));
    }
    ALL.captures(claim).map(|c| (None, c.get(1).and_then(|m| m.as_str().parse().ok())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_runner_summaries() {
        let cargo = "running 3 tests\ntest result: ok. 3 passed; 0 failed; 0 ignored\n\ntest result: FAILED. 5 passed; 2 failed; 0 ignored";
        let s = summarize(cargo).unwrap();
        assert_eq!((s.passed, s.failed), (Some(8), Some(2)));
        let py = "============ 12 passed, 1 failed in 0.31s ============";
        assert_eq!(summarize(py).unwrap().failed, Some(1));
        let py_ok = "===== 7 passed in 0.10s =====";
        assert_eq!(summarize(py_ok).unwrap(), Summary { passed: Some(7), failed: Some(0), line: py_ok.to_string() });
        let ctest = "90% tests passed, 1 tests failed out of 10";
        assert_eq!(summarize(ctest).unwrap().passed, Some(9));
        assert!(summarize("--- FAIL: TestX (0.00s)\nFAIL\tpkg 0.1s").unwrap().failing());
        assert!(!summarize("ok  \tgithub.com/x/y\t0.2s").unwrap().failing());
        assert_eq!(summarize("compiled fine"), None);
        assert_eq!(exit_code("Error: Exit code 2\nmake: *** [all] Error 2"), Some(2));
        assert!(is_verification("cd build && ctest --output-on-failure"));
        assert!(!is_verification("git status"));
        assert!(!is_verification("git push --force origin feature/paper-improvements-and-benchmarks"));
        assert!(is_verification("cd /x && ./benchmark.sh --quick"));
        assert!(is_verification("python3 run_full_benchmark.py --enable-gpu"));
        assert!(is_verification("FOO=1 cargo test --release"));
        assert!(!is_verification("python3 setup.py build"));
        assert_eq!(claimed_counts("All 42 tests pass now."), Some((None, Some(42))));
        assert_eq!(claimed_counts("40/42 tests pass"), Some((Some(40), Some(42))));
        assert_eq!(claimed_counts("all tests are passing"), Some((None, None)));
    }

    #[test]
    fn huge_counts_neither_overflow_nor_read_as_zero() {
        // Found by tests/fuzz_parsers.rs: two cargo summaries whose counts
        // add past u64::MAX panicked (debug) or wrapped.
        let big = "test result: ok. 0 passed; 9223372036854775808 failed\n\
                   test result: FAILED. 0 passed; 9223372036854775808 failed";
        assert_eq!(summarize(big).unwrap().failed, Some(u64::MAX));
        let huge = "test result: FAILED. 1 passed; 99999999999999999999 failed";
        assert!(summarize(huge).unwrap().failing());
        assert!(summarize("3 passed, 99999999999999999999 failed").unwrap().failing());
        assert_eq!(exit_code("Exit code 99999999999999999999"), Some(i64::MAX));
        assert_eq!(exit_code("exited with code -99999999999999999999"), Some(i64::MIN));
    }
}
