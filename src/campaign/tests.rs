use super::*;

#[test]
fn candidate_globs_are_checked_and_a_missing_candidate_warns() {
    let dir = git_dir();
    let spec = parse(GOOD, "c.toml", dir.path()).unwrap();
    assert!(spec.harness.candidate.is_empty());
    assert!(warnings(&spec).iter().any(|w| w.contains("candidate")), "{:?}", warnings(&spec));
    let with = GOOD.replace("protected = [", "candidate = [\"kernel/**\", \"*.cu\"]\nprotected = [");
    // A glob that matches no file of the workspace is refused, naming it.
    let e = parse(&with, "c.toml", dir.path()).unwrap_err();
    assert_eq!(e.0.len(), 2, "{e}");
    assert_eq!((e.0[0].line, e.0[0].field.as_str()), (7, "harness.candidate"), "{e}");
    assert!(e.0[0].message.contains("`kernel/**` matches no file"), "{e}");
    assert!(e.0[1].message.contains("`*.cu` matches no file"), "{e}");
    std::fs::create_dir(dir.path().join("kernel")).unwrap();
    std::fs::write(dir.path().join("kernel/k.cu"), "").unwrap();
    let spec = parse(&with, "c.toml", dir.path()).unwrap();
    assert_eq!(spec.harness.candidate, vec!["kernel/**", "*.cu"]);
    assert!(!warnings(&spec).iter().any(|w| w.contains("candidate")), "{:?}", warnings(&spec));
    // A spec stored before `candidate` existed still loads.
    let mut v = serde_json::to_value(&spec).unwrap();
    v["harness"].as_object_mut().unwrap().remove("candidate");
    let old: CampaignSpec = serde_json::from_value(v).unwrap();
    assert!(old.harness.candidate.is_empty());
    let bad = GOOD.replace("protected = [", "candidate = [\"a/[\"]\nprotected = [");
    let e = parse(&bad, "c.toml", dir.path()).unwrap_err().to_string();
    assert!(e.contains("c.toml:") && e.contains("harness.candidate") && e.contains("invalid glob"), "{e}");
    let empty = GOOD.replace("protected = [", "candidate = []\nprotected = [");
    let e = parse(&empty, "c.toml", dir.path()).unwrap_err().to_string();
    assert!(e.contains("harness.candidate"), "{e}");
}

fn git_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let ok = std::process::Command::new("git").args(["init", "-q"]).current_dir(dir.path()).status().unwrap().success();
    assert!(ok);
    dir
}

const GOOD: &str = r#"
name = "t"
workspace = "."
[harness]
run = "sh run.sh {results}"
scenarios = ["a", "b"]
protected = ["harness/**"]
[constraints]
binary = "libk.so"
banned_symbols = ["cublas"]
[predicate]
min_speedup = 1.1
min_geomean_speedup = 1.2
[questions]
mode = "audit"
"#;

#[test]
fn the_stop_timeout_is_read_checked_and_defaulted_for_stored_specs() {
    let dir = git_dir();
    let spec = parse(GOOD, "c.toml", dir.path()).unwrap();
    assert_eq!(spec.gate.stop_timeout_s, 600);
    let with = format!("{GOOD}[gate]\nstop_timeout_s = 25\n");
    let spec = parse(&with, "c.toml", dir.path()).unwrap();
    assert_eq!(spec.gate.stop_timeout_s, 25);
    assert_eq!(spec.gate.stop_deadline_s(), 22.5);
    let bad = format!("{GOOD}[gate]\nstop_timeout_s = 2\n");
    let e = parse(&bad, "c.toml", dir.path()).unwrap_err().to_string();
    assert!(e.contains("c.toml:") && e.contains("gate.stop_timeout_s"), "{e}");
    // A spec stored before the key existed still loads, with the default.
    let mut v = serde_json::to_value(&spec).unwrap();
    v["gate"].as_object_mut().unwrap().remove("stop_timeout_s");
    let old: CampaignSpec = serde_json::from_value(v).unwrap();
    assert_eq!(old.gate.stop_timeout_s, 600);
}

#[test]
fn parses_a_good_spec() {
    let dir = git_dir();
    let spec = parse(GOOD, "c.toml", dir.path()).unwrap();
    assert_eq!(spec.harness.scenarios, vec!["a", "b"]);
    assert_eq!(spec.mode, Mode::Audit);
    assert_eq!(spec.predicate.min_geomean_speedup, Some(1.2));
    assert_eq!(spec.harness.timeout_s, 600);
    assert!(spec.workspace.is_absolute());
}

#[test]
fn the_comparison_goal_and_per_scenario_thresholds_are_parsed_and_located() {
    let dir = git_dir();
    let with = GOOD.replace(
        "[questions]",
        "min_compare_speedup = 1.0\nmin_compare_geomean = 1.13\n[predicate.scenarios.b]\nmin_speedup = 0.9\n\
         min_compare_speedup = 0.8\n[questions]",
    );
    let spec = parse(&with, "c.toml", dir.path()).unwrap();
    let p = &spec.predicate;
    assert_eq!((p.min_compare_speedup, p.min_compare_geomean), (Some(1.0), Some(1.13)));
    assert_eq!((p.min_speedup_for("a"), p.min_speedup_for("b")), (1.1, 0.9));
    assert_eq!((p.min_compare_speedup_for("a"), p.min_compare_speedup_for("b")), (Some(1.0), Some(0.8)));
    assert!(p.uses_comparison());
    // A stored spec from before these keys still loads, without them.
    let old = serde_json::json!({"correct": true, "min_speedup": 1.0, "min_geomean_speedup": null});
    let old: PredicateSpec = serde_json::from_value(old).unwrap();
    assert!(!old.uses_comparison() && old.scenarios.is_empty());
    // An unknown scenario, a bad number and an unknown key are located.
    let bad = GOOD.replace(
        "[questions]",
        "min_compare_speedup = 0\n[predicate.scenarios.zz]\nmin_speedup = 2.0\n[predicate.scenarios.a]\n\
         min_compare = 1.0\n[questions]",
    );
    let err = parse(&bad, "c.toml", dir.path()).unwrap_err();
    let fields: Vec<(usize, &str)> = err.0.iter().map(|e| (e.line, e.field.as_str())).collect();
    assert!(fields.contains(&(18, "predicate.scenarios.a.min_compare")), "{err}");
    let bad = GOOD
        .replace("[questions]", "min_compare_speedup = 0\n[predicate.scenarios.zz]\nmin_speedup = 2.0\n[questions]");
    let err = parse(&bad, "c.toml", dir.path()).unwrap_err();
    let fields: Vec<(usize, &str)> = err.0.iter().map(|e| (e.line, e.field.as_str())).collect();
    assert!(fields.contains(&(14, "predicate.min_compare_speedup")), "{err}");
    assert!(fields.iter().any(|f| f.1 == "predicate.scenarios.zz"), "{err}");
    assert!(err.to_string().contains("`zz` is not one of the scenarios"), "{err}");
}

#[test]
fn errors_name_file_line_and_field() {
    let dir = git_dir();
    let bad = GOOD.replace("min_speedup = 1.1", "min_speedup = -2.0");
    let err = parse(&bad, "c.toml", dir.path()).unwrap_err();
    assert_eq!(err.0.len(), 1, "{err}");
    let e = &err.0[0];
    assert_eq!((e.file.as_str(), e.line, e.field.as_str()), ("c.toml", 12, "predicate.min_speedup"));
    assert!(err.to_string().starts_with("c.toml:12:"), "{err}");
}

#[test]
fn unknown_and_missing_keys_are_located() {
    let dir = git_dir();
    let typo = GOOD.replace("min_speedup = 1.1", "min_sepedup = 1.1");
    let err = parse(&typo, "c.toml", dir.path()).unwrap_err();
    assert_eq!(err.0[0].line, 12, "{err}");
    assert_eq!(err.0[0].field, "predicate.min_sepedup");
    let missing = GOOD.replace("run = \"sh run.sh {results}\"\n", "");
    let err = parse(&missing, "c.toml", dir.path()).unwrap_err();
    assert_eq!(err.0[0].field, "harness.run", "{err}");
    let wrong_type = GOOD.replace("min_speedup = 1.1", "min_speedup = \"fast\"");
    let err = parse(&wrong_type, "c.toml", dir.path()).unwrap_err();
    assert_eq!((err.0[0].line, err.0[0].field.as_str()), (12, "predicate.min_speedup"), "{err}");
}

#[test]
fn reports_every_problem_at_once() {
    let dir = git_dir();
    let bad = GOOD
        .replace("{results}", "out.json")
        .replace("\"audit\"", "\"lazy\"")
        .replace("[\"a\", \"b\"]", "[\"a\", \"a\"]");
    let err = parse(&bad, "c.toml", dir.path()).unwrap_err();
    let fields: Vec<&str> = err.0.iter().map(|e| e.field.as_str()).collect();
    assert_eq!(fields, vec!["harness.run", "harness.scenarios", "questions.mode"], "{err}");
}

#[test]
fn harness_tags_are_strings_with_located_errors() {
    let dir = git_dir();
    let spec =
        parse(&GOOD.replace("protected =", "tags = { gpu = \"h200\" }\nprotected ="), "c.toml", dir.path()).unwrap();
    assert_eq!(spec.harness.tags.get("gpu").map(String::as_str), Some("h200"));
    assert!(parse(GOOD, "c.toml", dir.path()).unwrap().harness.tags.is_empty());
    let bad = GOOD.replace("protected =", "tags = { gpu = 200 }\nprotected =");
    let err = parse(&bad, "c.toml", dir.path()).unwrap_err();
    assert_eq!((err.0[0].line, err.0[0].field.as_str()), (7, "harness.tags.gpu"), "{err}");
    assert!(err.0[0].message.contains("must be a string"), "{err}");
    // A spec stored before tags existed still loads.
    let mut old = serde_json::to_value(&spec).unwrap();
    old["harness"].as_object_mut().unwrap().remove("tags");
    let back: CampaignSpec = serde_json::from_value(old).unwrap();
    assert!(back.harness.tags.is_empty());
}

#[test]
fn toml_errors_are_one_line_in_character_columns() {
    // Found by tests/fuzz_parsers.rs: a value cut off by the end of the
    // text had an empty message; columns counted bytes, past the end
    // of a line with non-ASCII text; messages spanned two lines; a
    // missing field was named after the key on the line it points at;
    // a date-time given as `tags` was reported as a private toml key;
    // a wrong value on a line of its own was named after the value.
    let dir = git_dir();
    let err = parse("a = \"Σ", "c.toml", dir.path()).unwrap_err();
    assert_eq!((err.0[0].line, err.0[0].column), (1, 7), "{err}");
    let cut = GOOD.trim_end().trim_end_matches("\"audit\"");
    let err = parse(cut, "c.toml", dir.path()).unwrap_err();
    assert_eq!(err.0[0].message, "the text ends in the middle of an entry: a value is missing", "{err}");
    assert_eq!(err.0[0].field, "questions.mode", "{err}");
    let err = parse("a = tru\n", "c.toml", dir.path()).unwrap_err();
    assert!(!err.0[0].message.contains('\n') && !err.0[0].message.is_empty(), "{err}");
    let err = parse("workspace = \".\"\n[harness]\nrun = \"{results}\"\nscenarios = [\"a\"]\n", "c.toml", dir.path())
        .unwrap_err();
    assert_eq!((err.0[0].line, err.0[0].field.as_str()), (1, "name"), "{err}");
    let err = parse("[harness]\nrun = \"{results}\"\n", "c.toml", dir.path()).unwrap_err();
    assert_eq!((err.0[0].line, err.0[0].field.as_str()), (1, "harness.scenarios"), "{err}");
    let err = parse("name = \"t\"\nworkspace = \".\"\nharness = { run = \"{results}\" }\n", "c.toml", dir.path())
        .unwrap_err();
    assert_eq!((err.0[0].line, err.0[0].field.as_str()), (3, "harness.scenarios"), "{err}");
    let err =
        parse("name = \"t\"\nworkspace = \".\"\nharness.run = \"{results}\"\n", "c.toml", dir.path()).unwrap_err();
    assert_eq!((err.0[0].line, err.0[0].field.as_str()), (3, "harness.scenarios"), "{err}");
    let spread = GOOD.replace("[\"a\", \"b\"]", "[\n  \"a\",\n  0x10,\n]");
    let err = parse(&spread, "c.toml", dir.path()).unwrap_err();
    assert_eq!((err.0[0].line, err.0[0].field.as_str()), (8, "harness.scenarios"), "{err}");
    let dated = GOOD.replace("protected =", "tags = 1979-05-27T07:32:00Z\nprotected =");
    let err = parse(&dated, "c.toml", dir.path()).unwrap_err();
    assert_eq!((err.0[0].line, err.0[0].field.as_str()), (7, "harness.tags"), "{err}");
    assert!(err.0[0].message.ends_with("not a date-time"), "{err}");
    let bad = GOOD.replace("[\"a\", \"b\"]", "[\"a\\nb\", \"a\\nb\"]");
    let err = parse(&bad, "c.toml", dir.path()).unwrap_err();
    assert_eq!(err.0[0].message, "scenario `a\\nb` is listed twice", "{err}");
}

#[test]
fn workspace_must_be_a_git_repository() {
    let dir = tempfile::tempdir().unwrap();
    let err = parse(GOOD, "c.toml", dir.path()).unwrap_err();
    assert_eq!(err.0[0].field, "workspace");
    assert!(err.0[0].message.contains("not a git repository"));
    assert_eq!(err.0[0].line, 3);
}

/// A protected glob that matches nothing, and a run without `{seed}`, warn
/// (the same list `gadfly campaign create` and `gadfly doctor` print).
#[test]
fn an_unmatched_protected_glob_and_a_run_without_seed_warn() {
    let dir = git_dir();
    let spec = parse(GOOD, "c.toml", dir.path()).unwrap();
    let w = warnings(&spec);
    assert!(w.iter().any(|w| w.contains("`harness/**`") && w.contains("matches no file")), "{w:?}");
    assert!(w.iter().any(|w| w.contains("no `{seed}`") && w.contains("re-check")), "{w:?}");
    std::fs::create_dir_all(dir.path().join("harness/sub")).unwrap();
    std::fs::write(dir.path().join("harness/sub/run.sh"), "true\n").unwrap();
    let seeded = GOOD.replace("{results}", "{results} --seed {seed}");
    let spec = parse(&seeded, "c.toml", dir.path()).unwrap();
    let w = warnings(&spec);
    assert!(!w.iter().any(|w| w.contains("matches no file") || w.contains("{seed}")), "{w:?}");
    // $GADFLY_SEED is the seed too.
    let env = GOOD.replace("{results}", "{results} \\\"$GADFLY_SEED\\\"");
    let spec = parse(&env, "c.toml", dir.path()).unwrap();
    assert!(!warnings(&spec).iter().any(|w| w.contains("{seed}")), "{:?}", warnings(&spec));
    // A harness that draws fresh inputs by itself says so.
    let own = GOOD.replace("[harness]\n", "[harness]\nfresh_inputs = true\n");
    let spec = parse(&own, "c.toml", dir.path()).unwrap();
    assert!(spec.harness.fresh_inputs);
    assert!(!warnings(&spec).iter().any(|w| w.contains("{seed}")), "{:?}", warnings(&spec));
    // A file inside .git does not count.
    let only_git = GOOD.replace("harness/**", "HEAD");
    let spec = parse(&only_git, "c.toml", dir.path()).unwrap();
    assert!(warnings(&spec).iter().any(|w| w.contains("`HEAD`")), "{:?}", warnings(&spec));
}

#[test]
fn the_replay_pattern_is_checked_with_its_groups_at_parse_time() {
    let dir = git_dir();
    let spec = parse(GOOD, "c.toml", dir.path()).unwrap();
    assert!(spec.replay.is_empty());
    assert!(!serde_json::to_value(&spec).unwrap().as_object().unwrap().contains_key("replay"), "left out when unset");
    let pattern =
        r#"(?m)^(?P<scenario>\w+): (?P<time_us>[0-9.]+) us vs (?P<baseline_us>[0-9.]+) us (?P<correct>ok|WRONG)$"#;
    let with = format!("{GOOD}[replay]\nevaluation = '{pattern}'\n");
    let spec = parse(&with, "c.toml", dir.path()).unwrap();
    assert_eq!(spec.replay.evaluation.as_deref(), Some(pattern));
    // A stored spec without it still loads.
    let mut v = serde_json::to_value(&spec).unwrap();
    v.as_object_mut().unwrap().remove("replay");
    assert!(serde_json::from_value::<CampaignSpec>(v).unwrap().replay.is_empty());
    // Each error names the file, the line of the pattern and the field.
    let line = GOOD.lines().count() + 2;
    for (bad, says) in [
        (r"(?P<name>\w+) (?P<correct>\w+)", "unknown named group `name`"),
        (r"(?P<scenario>\w+) (?P<time_us>[0-9.]+)", "`time_us` without `baseline_us`"),
        (r"(?P<scenario>\w+) (?P<baseline_us>[0-9.]+)", "`baseline_us` without `time_us`"),
        (r"(?P<scenario>\w+) (?P<x>\d+)", "unknown named group `x`"),
        (r"(?P<scenario>\w+) \d+", "missing the named groups `correct` or `time_us` and `baseline_us`"),
        (r"(?P<scenario>\w+", "not a valid regular expression"),
    ] {
        let text = format!("{GOOD}[replay]\nevaluation = '{bad}'\n");
        let e = parse(&text, "c.toml", dir.path()).unwrap_err().to_string();
        assert!(e.starts_with(&format!("c.toml:{line}:")), "{e}");
        assert!(e.contains("field `replay.evaluation`") && e.contains(says), "{bad}: {e}");
        assert_eq!(e.lines().count(), 1, "one line: {e}");
    }
    let unknown = format!("{GOOD}[replay]\npattern = 'x'\n");
    let e = parse(&unknown, "c.toml", dir.path()).unwrap_err().to_string();
    assert!(e.contains("replay.pattern") || e.contains("unknown field `pattern`"), "{e}");
    // `gadfly replay` reads a spec whose workspace is gone; a campaign may not.
    let gone =
        format!("{}[replay]\nevaluation = '{pattern}'\n", GOOD.replace("workspace = \".\"", "workspace = \"nowhere\""));
    assert!(parse(&gone, "c.toml", dir.path()).unwrap_err().to_string().contains("field `workspace`"));
    assert_eq!(parse_detached(&gone, "c.toml", dir.path()).unwrap().replay.evaluation.as_deref(), Some(pattern));
    // The optional groups are taken; correctness alone, or times alone, will do.
    for ok in [
        r"(?P<scenario>\w+) (?P<time_us>\d+) (?P<baseline_us>\d+) (?P<correct>\w+) (?P<compare_us>\d+)",
        r"Running test: (?P<scenario>.+?)\.\.\. (?P<correct>PASSED|FAILED)",
        r"\| (?P<scenario>\w+) \| (?P<time_us>[\d.]+) \| (?P<baseline_us>[\d.]+) \|",
    ] {
        assert!(check_replay_pattern(ok).is_ok(), "{ok}");
    }
}

#[test]
fn spend_budgets_are_checked_where_they_are_written() {
    let dir = git_dir();
    let ok = format!("{GOOD}[agent]\nkind = \"claude-code\"\nmax_tokens = 2000000\nmax_cost_usd = 25\n");
    let spec = parse(&ok, "c.toml", dir.path()).unwrap();
    assert_eq!(spec.extra["agent"]["max_tokens"], 2_000_000);
    assert_eq!(spec.extra["agent"]["max_cost_usd"], 25);
    let bad = format!("{GOOD}[agent]\nkind = \"claude-code\"\nmax_tokens = 1.5\nmax_cost_usd = -2\n");
    let e = parse(&bad, "c.toml", dir.path()).unwrap_err();
    let line_of = |needle: &str| bad.lines().position(|l| l.starts_with(needle)).unwrap() + 1;
    assert_eq!(e.0.len(), 2, "{e}");
    assert_eq!((e.0[0].field.as_str(), e.0[0].line), ("agent.max_tokens", line_of("max_tokens")));
    assert!(e.0[0].message.contains("whole number of tokens"), "{e}");
    assert_eq!((e.0[1].field.as_str(), e.0[1].line), ("agent.max_cost_usd", line_of("max_cost_usd")));
    assert_eq!(e.0[1].column, "max_cost_usd = ".len() + 1, "{e}");
    let e = parse(&format!("{GOOD}[agent]\nmax_cost_usd = \"5 dollars\"\n"), "c.toml", dir.path()).unwrap_err();
    assert!(e.to_string().contains("field `agent.max_cost_usd`: must be a positive amount of US dollars"), "{e}");
}

#[test]
fn notify_webhooks_are_parsed_and_each_bad_value_is_located() {
    let dir = git_dir();
    let ok = format!(
        "{GOOD}[notify]\nblock_streak = 3\n\n[[notify.webhooks]]\nurl = \"https://hooks.example/g\"\nevents = [\"plateau\", \"run_ended\"]\nsecret_env = \"GADFLY_WEBHOOK_SECRET\"\n"
    );
    let spec = parse(&ok, "c.toml", dir.path()).unwrap();
    assert_eq!(spec.notify.block_streak, 3);
    assert_eq!(spec.notify.webhooks.len(), 1);
    let w = &spec.notify.webhooks[0];
    assert_eq!(
        (w.url.as_str(), w.secret_env.as_str(), w.max_attempts, w.timeout_s),
        ("https://hooks.example/g", "GADFLY_WEBHOOK_SECRET", 5, 10)
    );
    assert_eq!(w.events, ["plateau", "run_ended"]);
    // Stored and read back; a spec stored without [notify] reads as none.
    let back: CampaignSpec = serde_json::from_value(serde_json::to_value(&spec).unwrap()).unwrap();
    assert_eq!(back.notify, spec.notify);
    let plain = parse(GOOD, "c.toml", dir.path()).unwrap();
    assert!(serde_json::to_value(&plain).unwrap().get("notify").is_none());
    assert!(plain.notify.webhooks.is_empty());

    let bad = format!(
        "{GOOD}[notify]\nblock_streak = 0\n\n[[notify.webhooks]]\nurl = \"ftp://x\"\nevents = [\"plateaus\"]\nsecret_env = \"hunter2 is my secret\"\nmax_attempts = 99\n"
    );
    let e = parse(&bad, "c.toml", dir.path()).unwrap_err();
    let line_of = |needle: &str| bad.lines().position(|l| l.starts_with(needle)).unwrap() + 1;
    let got: Vec<(&str, usize)> = e.0.iter().map(|x| (x.field.as_str(), x.line)).collect();
    assert_eq!(
        got,
        [
            ("notify.block_streak", line_of("block_streak")),
            ("notify.webhooks[0].url", line_of("url =")),
            ("notify.webhooks[0].events", line_of("events =")),
            ("notify.webhooks[0].secret_env", line_of("secret_env =")),
            ("notify.webhooks[0].max_attempts", line_of("max_attempts =")),
        ],
        "{e}"
    );
    assert!(e.to_string().contains("unknown notification `plateaus`"), "{e}");
    // The secret itself has no place in the spec.
    let secret =
        format!("{GOOD}[[notify.webhooks]]\nurl = \"https://h.example\"\nevents = [\"claim\"]\nsecret = \"s3cr3t\"\n");
    let e = parse(&secret, "c.toml", dir.path()).unwrap_err().to_string();
    assert!(e.contains("unknown key `secret` in [notify.webhooks]") && e.contains("secret_env"), "{e}");
}

/// `[questions] withhold` (#35): a share between 0 and 1, an integer 0 or
/// 1 included; anything else is an error naming the field and its line; a
/// spec stored before the option withholds nothing.
#[test]
fn questions_withhold_is_a_share_checked_where_written() {
    let dir = git_dir();
    let spec = parse(GOOD, "c.toml", dir.path()).unwrap();
    assert_eq!(spec.withhold, DEFAULT_WITHHOLD);
    for (written, share) in [("0.25", 0.25), ("0", 0.0), ("1", 1.0), ("1.0", 1.0)] {
        let with = GOOD.replace("mode = \"audit\"", &format!("mode = \"audit\"\nwithhold = {written}"));
        assert_eq!(parse(&with, "c.toml", dir.path()).unwrap().withhold, share, "{written}");
    }
    for bad in ["1.5", "-0.1", "\"some\"", "nan"] {
        let with = GOOD.replace("mode = \"audit\"", &format!("mode = \"audit\"\nwithhold = {bad}"));
        let err = parse(&with, "c.toml", dir.path()).unwrap_err();
        assert_eq!((err.0[0].line, err.0[0].field.as_str()), (16, "questions.withhold"), "{bad}: {err}");
        assert!(err.0[0].message.contains("between 0 and 1"), "{err}");
    }
    let mut stored = serde_json::to_value(&spec).unwrap();
    stored.as_object_mut().unwrap().remove("withhold");
    let back: CampaignSpec = serde_json::from_value(stored).unwrap();
    assert_eq!(back.withhold, 0.0);
}

/// `[questions] answer_within_turns` (#35 item 4): 3 unless written, 0
/// turns re-asking off, anything outside 0..=1000 an error naming the
/// field and its line; a spec stored before the option gets the default.
#[test]
fn questions_answer_within_turns_is_checked_where_written() {
    let dir = git_dir();
    let spec = parse(GOOD, "c.toml", dir.path()).unwrap();
    assert_eq!(spec.questions.answer_within_turns, DEFAULT_ANSWER_WITHIN_TURNS);
    for n in [0, 5] {
        let with = GOOD.replace("mode = \"audit\"", &format!("mode = \"audit\"\nanswer_within_turns = {n}"));
        assert_eq!(parse(&with, "c.toml", dir.path()).unwrap().questions.answer_within_turns, n);
    }
    for bad in ["-1", "1001"] {
        let with = GOOD.replace("mode = \"audit\"", &format!("mode = \"audit\"\nanswer_within_turns = {bad}"));
        let err = parse(&with, "c.toml", dir.path()).unwrap_err();
        assert_eq!((err.0[0].line, err.0[0].field.as_str()), (16, "questions.answer_within_turns"), "{bad}: {err}");
    }
    let mut stored = serde_json::to_value(&spec).unwrap();
    stored.as_object_mut().unwrap().remove("questions");
    let back: CampaignSpec = serde_json::from_value(stored).unwrap();
    assert_eq!(back.questions.answer_within_turns, DEFAULT_ANSWER_WITHIN_TURNS);
}
