use super::*;
use crate::evaluation::{Evaluation, Step};

/// A spec parsed from `harness` (the `[harness]` table's body) and
/// `rest`, in a fresh git workspace.
fn spec(harness: &str, rest: &str) -> CampaignSpec {
    let dir = tempfile::tempdir().unwrap();
    std::process::Command::new("git").args(["init", "-q"]).current_dir(dir.path()).status().unwrap();
    // The candidate's files exist (a glob matching nothing is refused).
    std::fs::create_dir(dir.path().join("kernel")).unwrap();
    std::fs::write(dir.path().join("kernel/qr.c"), QR_C).unwrap();
    let text = format!("name='t'\nworkspace='.'\n[harness]\n{harness}\n{rest}");
    crate::campaign::parse(&text, "t.toml", dir.path()).unwrap()
}

fn qr_spec(candidate: bool) -> CampaignSpec {
    let c = if candidate { "candidate = ['kernel/**']\n" } else { "" };
    spec(
        &format!(
            "build='make -s'\nrun='build/qrbench --lib build/libkernel.so --out {{results}}'\nscenarios=['a','b']\nprotected=['harness/**','Makefile']\n{c}"
        ),
        "[constraints]\nbinary='build/libkernel.so'\nbanned_symbols=['dgeqrf']\n[predicate]\nmin_speedup=1.05\nmin_geomean_speedup=1.2\n",
    )
}

const QR_C: &str =
    "#include <math.h>\nvoid qr_batched(int batch, int m, int n, const double *A, double *Q, double *R)\n{\n}\n";

fn attack(name: &str) -> &'static Attack {
    battery().unwrap().attacks.iter().find(|a| a.manifest.name == name).unwrap_or_else(|| panic!("no attack {name}"))
}

fn files(list: &[(&str, &str)]) -> Vec<CandidateFile> {
    list.iter().map(|(p, t)| CandidateFile { path: p.to_string(), text: t.to_string() }).collect()
}

#[test]
fn every_manifest_of_the_battery_parses_and_names_its_suggestion() {
    let battery = battery().unwrap_or_else(|e| panic!("the embedded battery does not load:\n{e}"));
    let manifests = embedded_manifests();
    assert_eq!(battery.attacks.len(), manifests.len(), "every manifest is an attack");
    assert!(battery.attacks.len() >= 30, "{} attacks", battery.attacks.len());
    for a in &battery.attacks {
        let m = &a.manifest;
        assert!(m.suggestion.len() > 40, "{}: the suggestion says too little: {}", a.id, m.suggestion);
        assert!(!m.tries.is_empty() && !m.trick.is_empty(), "{}", a.id);
        assert_eq!(m.expect, "held", "{}", a.id);
        if m.apply != Apply::None {
            assert!(a.source.len() > 50, "{}: its sources were not read", a.id);
        }
        assert_eq!(a.file_sources.len(), m.files.len(), "{}", a.id);
    }
    for family in manifest::FAMILIES {
        assert!(battery.attacks.iter().any(|a| a.manifest.family == *family), "no attack of family {family}");
    }
    for language in ["c", "cpp", "cuda", "python", "rust"] {
        assert!(
            battery.attacks.iter().any(|a| a.manifest.languages.iter().any(|l| l == language)),
            "no attack for {language}"
        );
    }
}

/// The GPU part of the battery is the CUDA harness's exploit suite: every
/// exploit but the control has a manifest that applies it, with the reason
/// run_all.py expects.
#[test]
fn every_cuda_exploit_is_in_the_battery() {
    let battery = battery().unwrap();
    let mut mapped = 0;
    for f in EXPLOITS_DIR.files() {
        let name = f.path().display().to_string();
        if !(name.ends_with(".cu") || name.ends_with(".py")) || name.starts_with("e00") || name == "run_all.py" {
            continue;
        }
        let path = format!("harness/cuda/exploits/{name}");
        let a = battery
            .attacks
            .iter()
            .find(|a| a.manifest.sources.iter().any(|s| resolve("redteam/cuda", s).as_deref() == Some(path.as_str())))
            .unwrap_or_else(|| panic!("exploit {name} has no manifest under redteam/cuda"));
        assert_eq!(a.source, String::from_utf8_lossy(f.contents()), "{name}");
        assert!(!a.manifest.expect_reason.is_empty(), "{name}: no expected reason");
        mapped += 1;
    }
    assert_eq!(mapped, 16);
}

#[test]
fn manifest_errors_name_the_line_and_the_field() {
    let text = "name = \"x\"\nlanguages = [\"c\", \"fortran\"]\nfamily = \"results-forgery\"\ntries = \"t\"\ntrick = \"t\"\nsources = [\"a.c\"]\napply = \"wrap\"\nexpect = \"held\"\nsuggestion = \"s\"\n";
    let errors = manifest::parse(text, "m.toml").unwrap_err();
    let shown: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
    assert!(
        shown.iter().any(|e| e.starts_with("m.toml:2:") && e.contains("`languages`") && e.contains("fortran")),
        "{shown:?}"
    );
    assert!(shown.iter().any(|e| e.contains("`requires.entry`")), "{shown:?}");
    let typo = text.replace("suggestion", "sugestion");
    let errors = manifest::parse(&typo, "m.toml").unwrap_err();
    assert!(errors[0].to_string().contains("m.toml:9:") && errors[0].message.contains("sugestion"), "{errors:?}");
    let no_suggestion = text.lines().filter(|l| !l.starts_with("suggestion")).collect::<Vec<_>>().join("\n");
    let errors = manifest::parse(&no_suggestion, "m.toml").unwrap_err();
    assert!(errors[0].message.contains("suggestion"), "{errors:?}");
}

/// The forged lines every forgery writes pass the campaign's predicate:
/// when one reaches gadfly, the report says broken.
#[test]
fn the_forged_results_pass_the_predicate() {
    let s = spec(
        "run='x {results}'\nscenarios=['a','b','c']",
        "[predicate]\nmin_speedup=1.5\nmin_geomean_speedup=4\nmin_compare_speedup=1.0\n[predicate.scenarios.b]\nmin_speedup=5\n",
    );
    let parsed = crate::results::parse(&forged_results(&s));
    assert!(parsed.problems.is_empty(), "{:?}", parsed.problems);
    let v = crate::predicate::judge(&s.predicate, &s.harness.scenarios, &parsed.scenarios, vec![]);
    assert!(v.holds, "{v:?}");
    assert!(parsed.scenarios.iter().all(|r| r.time_us == FORGED_TIME_US));
}

#[test]
fn an_entry_point_is_wrapped_and_forgeries_are_appended() {
    let s = qr_spec(true);
    let host = HostFacts::default();
    let fs = files(&[("kernel/qr.c", QR_C), ("kernel/util.h", "int x;\n")]);
    let ctx = Context { spec: &s, files: &fs, host: &host };
    let p = plan(attack("output-cache"), &ctx).unwrap();
    assert_eq!(p.writes.len(), 1);
    assert_eq!(p.writes[0].path, "kernel/qr.c");
    let text = String::from_utf8(p.writes[0].content.clone()).unwrap();
    assert!(text.starts_with("#define qr_batched rt_real_qr_batched\n#include <math.h>"), "{text}");
    assert!(text.contains("#undef qr_batched\n") && text.contains("rt_real_qr_batched(batch, m, n, A, Q, R);"));
    let p = plan(attack("forge-atexit-env"), &ctx).unwrap();
    let text = String::from_utf8(p.writes[0].content.clone()).unwrap();
    assert!(text.starts_with(QR_C), "appended, not replaced");
    assert!(text.contains("getenv(\"GADFLY_RESULTS\")") && !text.contains("@@"), "placeholders left: {text}");
    assert!(text.contains("\\\"time_us\\\":123.25"), "the forged lines are a C string: {text}");
    assert_eq!(p.applied, "appended to kernel/qr.c");
    assert!(outside_candidate(&s, &p.touched).is_empty());
}

#[test]
fn build_attacks_write_what_the_allow_list_keeps_out() {
    let host = HostFacts::default();
    let fs = files(&[("kernel/qr.c", QR_C)]);
    let hardened = qr_spec(true);
    let ctx = Context { spec: &hardened, files: &fs, host: &host };
    let p = plan(attack("gnumakefile-shadow"), &ctx).unwrap();
    let paths: Vec<&str> = p.writes.iter().map(|w| w.path.as_str()).collect();
    assert_eq!(paths, ["GNUmakefile", "rt_wrap.sh"]);
    let mk = String::from_utf8(p.writes[0].content.clone()).unwrap();
    assert!(mk.contains("mv -f build/qrbench build/qrbench.rt-real"), "{mk}");
    assert_eq!(p.writes[1].mode, Some(0o755));
    assert!(String::from_utf8(p.writes[1].content.clone()).unwrap().contains("\"scenario\":\"b\""));
    assert_eq!(outside_candidate(&hardened, &p.touched), ["GNUmakefile", "rt_wrap.sh"]);
    let open = qr_spec(false);
    assert!(outside_candidate(&open, &p.touched).is_empty(), "no allow-list keeps nothing out");
    let p = plan(attack("file-name-code"), &ctx).unwrap();
    let paths: Vec<&str> = p.writes.iter().map(|w| w.path.as_str()).collect();
    assert_eq!(paths, ["rt_payload.sh", "kernel/a`sh${IFS}rt_payload.sh`.c"]);
    assert_eq!(outside_candidate(&hardened, &p.touched), ["rt_payload.sh"]);
}

#[test]
fn attacks_that_do_not_fit_say_why() {
    let host = HostFacts::default();
    let qr = qr_spec(true);
    let cu = files(&[("kernel/attention.cu", "extern \"C\" int attention_forward(int x) { return 0; }\n")]);
    let ctx = Context { spec: &qr, files: &cu, host: &host };
    let why = plan(attack("forge-atexit-env"), &ctx).unwrap_err();
    assert!(why.contains("c or cpp") && why.contains("cuda only"), "{why}");
    let c = files(&[("kernel/other.c", "void other(void) {}\n")]);
    let ctx = Context { spec: &qr, files: &c, host: &host };
    let why = plan(attack("output-cache"), &ctx).unwrap_err();
    assert!(why.contains("`qr_batched`") && why.contains("no candidate file defines it"), "{why}");
    let fs = files(&[("kernel/qr.c", QR_C)]);
    let ctx = Context { spec: &qr, files: &fs, host: &host };
    let why = plan(attack("dlopen-banned-library"), &ctx).unwrap_err();
    assert!(why.contains("liblapack.so.3") && why.contains("none is there"), "{why}");
    let with_lapack = HostFacts { libraries: ["liblapack.so.3".to_string()].into(), ..Default::default() };
    let ctx = Context { spec: &qr, files: &fs, host: &with_lapack };
    assert!(plan(attack("dlopen-banned-library"), &ctx).is_ok());
    let py_build = spec("build='python3 -I build.py'\nrun='python3 -I run.py --out {results}'\nscenarios=['a']", "");
    let ctx = Context { spec: &py_build, files: &fs, host: &host };
    let why = plan(attack("gnumakefile-shadow"), &ctx).unwrap_err();
    assert!(why.contains("make or gmake") && why.contains("python3 -I build.py"), "{why}");
    let why = plan(attack("py-conftest"), &ctx).unwrap_err();
    assert!(why.contains("python"), "{why}");
    let py = files(&[("kernel/k.py", "def attention_forward(q):\n    pass\n")]);
    let ctx = Context { spec: &py_build, files: &py, host: &host };
    let why = plan(attack("py-conftest"), &ctx).unwrap_err();
    assert!(why.contains("pytest"), "{why}");
    assert!(plan(attack("py-import-forge"), &ctx).is_ok());
    assert!(plan(attack("cuda-py-sdpa-fallback"), &ctx).is_ok());
}

fn evaluation(s: &CampaignSpec, lines: &str, violations: Vec<String>, build_ok: bool) -> Evaluation {
    let parsed = crate::results::parse(lines);
    let mut failures: Vec<String> = violations.iter().map(|v| format!("constraint violated: {v}")).collect();
    if !build_ok {
        failures.insert(0, "build exited with status 1; last output: build: refused, banned text".into());
    }
    let verdict = crate::predicate::judge(&s.predicate, &s.harness.scenarios, &parsed.scenarios, failures);
    let step = |ok| Step { command: "c".into(), ok, exit: "x".into(), seconds: 0.1, output_tail: String::new() };
    Evaluation {
        id: None,
        tree: "t".into(),
        verdict,
        build: Some(step(build_ok)),
        run: build_ok.then(|| step(true)),
        violations,
        duration_ms: 5,
        created_at: "now".into(),
        cached: false,
        origin: Default::default(),
    }
}

#[test]
fn the_judge_names_the_check_that_caught_an_attack() {
    let s = qr_spec(true);
    let forged = forged_results(&s);
    let broken = judge(&evaluation(&s, &forged, vec![], true), &[], &["kernel/qr.c".into()]);
    let Outcome::Broken { reason } = &broken else { panic!("{broken:?}") };
    assert!(reason.contains("forged results reached gadfly on 2 of 2"), "{reason}");
    let e = evaluation(&s, &forged, vec!["candidate file name `kernel/a`x`.c` is refused: ...".into()], true);
    assert_eq!(judge(&e, &[], &[]).label(), "held");
    assert!(matches!(judge(&e, &[], &[]), Outcome::Held { by, .. } if by == "gadfly: candidate files"));
    let slow = "{\"scenario\":\"a\",\"correct\":true,\"time_us\":100,\"baseline_us\":101}\n{\"scenario\":\"b\",\"correct\":true,\"time_us\":100,\"baseline_us\":99}\n";
    let e = evaluation(&s, slow, vec![], true);
    let kept = vec!["GNUmakefile".to_string()];
    assert!(matches!(judge(&e, &kept, &kept), Outcome::Held { by, .. } if by == "gadfly: candidate allow-list"));
    let Outcome::Held { by, reason } = judge(&e, &[], &kept) else { panic!() };
    assert_eq!(by, "predicate");
    assert!(reason.contains("speedup") && reason.contains("gained nothing"), "{reason}");
    let wrong = "{\"scenario\":\"a\",\"correct\":false,\"time_us\":1,\"baseline_us\":101,\"reason\":\"call 3: Q has NaN\"}\n{\"scenario\":\"b\",\"correct\":true,\"time_us\":1,\"baseline_us\":99}\n";
    let Outcome::Held { by, reason } = judge(&evaluation(&s, wrong, vec![], true), &[], &kept) else { panic!() };
    assert_eq!((by.as_str(), reason.contains("call 3: Q has NaN")), ("harness check", true), "{reason}");
    let e = evaluation(&s, "", vec![], false);
    let out = judge(&e, &[], &kept);
    assert!(matches!(&out, Outcome::Held { by, reason } if by == "build" && reason.contains("banned text")), "{out:?}");
    let mut m = attack("cuda-dlopen-cublas").manifest.clone();
    assert_eq!(expected_reason(&m, &out, Some(&e)), Some(true));
    m.expect_reason = vec!["never said".into()];
    assert_eq!(expected_reason(&m, &out, Some(&e)), Some(false));
}

#[test]
fn a_report_is_broken_when_one_attack_broke_and_renders_its_missing_check() {
    let a = attack("forge-atexit-env");
    let mut r = Report {
        id: "1".into(),
        campaign: "c".into(),
        campaign_name: "qr".into(),
        why: "cli".into(),
        started_at: "s".into(),
        finished_at: "f".into(),
        battery: "b".into(),
        harness: "h".into(),
        languages: vec!["c".into()],
        status: Status::Held,
        error: None,
        control: None,
        attacks: vec![
            AttackResult::new(a, "appended".into(), Outcome::Broken { reason: "holds".into() }, None),
            AttackResult::new(a, String::new(), Outcome::NotApplicable { why: "no".into() }, None),
        ],
        held: 0,
        broken: 0,
        not_applicable: 0,
        errors: 0,
        coverage: None,
        accept_low_coverage: false,
    };
    r.finish();
    assert_eq!((r.status, r.broken, r.not_applicable), (Status::Broken, 1, 1));
    let text = render(&r);
    assert!(text.contains("| 1 | forge-atexit-env | results-forgery | BROKEN |"), "{text}");
    assert!(text.contains("not applicable:\n- forge-atexit-env: no\n"), "{text}");
    assert!(text.contains("missing checks:\n- forge-atexit-env: The results path is reachable"), "{text}");
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["attacks"][0]["result"], "broken");
    assert_eq!(serde_json::from_value::<Report>(json).unwrap(), r);
    // Recorded as an event whose body is the report, read back whole.
    let event = crate::events::Event::RedteamReport(Box::new(r.clone()));
    assert_eq!(event.kind(), crate::events::kind::REDTEAM_REPORT);
    assert_eq!(serde_json::from_value::<Report>(event.body()).unwrap(), r);
    let one = crate::events::Event::RedteamAttack { id: "1".into(), result: Box::new(r.attacks[0].clone()) };
    assert_eq!((one.body()["name"].as_str(), one.body()["id"].as_str()), (Some("forge-atexit-env"), Some("1")));
    for k in ["redteam.started", "redteam.attack", "redteam.report"] {
        assert!(crate::events::ALL_KINDS.contains(&k), "{k}");
    }
    r.attacks.remove(0);
    r.status = Status::Held;
    r.finish();
    assert_eq!(r.status, Status::Error, "nothing applied: nothing is known");
    assert!(r.error.as_deref().unwrap().contains("no attack of the battery applies"), "{r:?}");
    r.error = None;
    r.status = Status::Held;
    r.attacks.push(AttackResult::new(
        a,
        "x".into(),
        Outcome::Held { by: "predicate".into(), reason: "r".into() },
        None,
    ));
    r.finish();
    // One attack of the candidate's language tried of two, and no
    // output-caching attack: too little to vouch for the harness.
    assert_eq!((r.status, r.held), (Status::LowCoverage, 1));
    let c = r.coverage.clone().unwrap();
    assert_eq!((c.for_languages, c.applied, c.low), (2, 1, true), "{c:?}");
    assert_eq!(c.core_missing, ["output-caching"]);
    let text = render(&r);
    assert!(
        text.contains("coverage LOW: 1 of the 2 attacks") && text.contains("never tried: output-caching"),
        "{text}"
    );
    assert!(text.contains("accept_low_coverage = true"), "{text}");
    r.accept_low_coverage = true;
    r.status = Status::Held;
    r.finish();
    assert_eq!(r.status, Status::Held, "the spec accepts a low coverage");
    assert!(render(&r).contains("(accepted: [redteam] accept_low_coverage)"));
    // An output-caching attack held too, and most of the battery applied.
    r.accept_low_coverage = false;
    r.attacks.remove(0);
    let cache = attack("output-cache");
    r.attacks.push(AttackResult::new(
        cache,
        "x".into(),
        Outcome::Held { by: "harness check".into(), reason: "r".into() },
        None,
    ));
    r.finish();
    assert_eq!(r.status, Status::Held, "{:?}", r.coverage);
    // Attacks written for other languages do not count against coverage.
    let py = attack("py-memo-identity");
    for _ in 0..5 {
        r.attacks.push(AttackResult::new(py, String::new(), Outcome::NotApplicable { why: "python".into() }, None));
    }
    r.finish();
    assert_eq!(r.status, Status::Held, "{:?}", r.coverage);
    assert_eq!(r.coverage.as_ref().unwrap().for_languages, 2);
}

#[test]
fn resolve_climbs_out_of_the_manifest_folder() {
    assert_eq!(resolve("redteam/cuda", "../../harness/cuda/exploits/e05.cu").unwrap(), "harness/cuda/exploits/e05.cu");
    assert_eq!(resolve("redteam/build", "../c/forge_common.c").unwrap(), "redteam/c/forge_common.c");
    assert!(resolve("redteam", "../../../x").is_none());
}
