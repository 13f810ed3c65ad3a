//! Spawn mode with the command adapter: a scripted shell agent, supervised
//! by the daemon through start/resume templates, budgets and stop.

mod common;

use common::{Daemon, Fixture};
use serde_json::Value;

/// A shell "agent": each call appends its arguments to ../calls.log (outside
/// the workspace), then writes the candidate for that call number.
const AGENT: &str = r#"#!/bin/sh
log="$(dirname "$PWD")/calls.log"
printf '%s\n---\n' "$*" >> "$log"
n=$(grep -c '^---$' "$log")
case "${MODE:-fix}:$n" in
  fix:1|never:*) printf 'a true 50 100\nb false 40 100\nc true 80 100\n' > candidate.txt ;;
  fix:*) printf 'a true 50 100\nb true 40 100\nc true 80 100\n' > candidate.txt ;;
  sleep:*) (sleep 3; touch "$(dirname "$PWD")/grandchild-survived") & sleep 60 ;;
  usage:*) printf 'a true 50 100\nb false 40 100\nc true 80 100\n' > candidate.txt
    echo '{"gadfly_usage": {"cost_usd": -1}}'
    echo '{"gadfly_usage": {"input_tokens": 1000, "cached_input_tokens": 400, "output_tokens": 200, "cost_usd": 0.4}}'
    sleep 0.3 ;;
esac
echo "All scenarios pass. Done."
"#;

fn fixture(mode: &str, extra: &str) -> Fixture {
    let agent = format!(
        "[agent]\nkind = \"command\"\nstart = \"sh ../agent.sh start {{prompt}}\"\nresume = \"sh ../agent.sh resume {{session}} {{message}}\"\nenv = {{ MODE = \"{mode}\" }}\n{extra}\n"
    );
    let f = Fixture::new(&agent);
    std::fs::write(f.dir.path().join("agent.sh"), AGENT).unwrap();
    f
}

/// Waits until the campaign's `state` (where its agent stands) is `state`.
fn wait_state(d: &Daemon, id: &str, state: &str) -> Value {
    common::wait_until(&format!("campaign state {state}"), || d.api_get(&format!("/campaigns/{id}"))["state"] == state);
    d.api_get(&format!("/campaigns/{id}"))
}

fn wait_run_end(d: &Daemon, id: &str) -> Value {
    common::wait_until("the run to end", || d.api_get(&format!("/campaigns/{id}/runs"))[0]["status"] == "ended");
    d.api_get(&format!("/campaigns/{id}/runs"))[0].clone()
}

#[test]
fn a_wrong_turn_is_sent_back_with_the_failing_scenario_then_the_run_completes() {
    let f = fixture("fix", "");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let out = d.run(&["run", &id, "--agent", "command"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("ended: the predicate holds"), "{stdout}");
    let run = wait_run_end(&d, &id);
    assert_eq!(run["outcome"], "completed");
    // The campaign says so (issue #32: it stayed "active").
    let c = wait_state(&d, &id, "done");
    assert_eq!(c["state_detail"], "run 1: the predicate holds on every scenario and the stop was allowed");
    let calls = std::fs::read_to_string(f.dir.path().join("calls.log")).unwrap();
    let parts: Vec<&str> = calls.split("---\n").collect();
    assert!(parts[0].starts_with("start every scenario faster"), "the first prompt carries the goal: {}", parts[0]);
    assert!(parts[1].starts_with("resume run-1 gadfly: you may not stop yet"), "{}", parts[1]);
    assert!(
        parts[1].lines().any(|l| l.starts_with("b ") && l.contains("NO")),
        "the failing scenario reaches the agent: {}",
        parts[1]
    );
    assert!(parts[1].contains("Question ("), "{}", parts[1]);
    let stops = d.api_get(&format!("/campaigns/{id}/stops"));
    let decisions: Vec<&str> = stops.as_array().unwrap().iter().map(|s| s["decision"].as_str().unwrap()).collect();
    assert_eq!(decisions, vec!["block", "allow"]);
    assert_eq!(stops[0]["claim"], "All scenarios pass. Done.");
    let log = d.api_get(&format!("/campaigns/{id}/log"));
    assert!(log
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["kind"] == "agent.output" && e["payload"]["line"] == "All scenarios pass. Done."));
}

#[test]
fn a_run_without_gain_is_stopped_by_budget_never_as_success() {
    let f = fixture("never", "max_blocks_without_gain = 2");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let out = d.run(&["run", &id, "--agent", "command"]);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stdout));
    let run = wait_run_end(&d, &id);
    assert_eq!(run["outcome"], "stopped_by_budget");
    let c = wait_state(&d, &id, "stopped_by_budget");
    assert!(c["state_detail"].as_str().unwrap().starts_with("run 1: stopped by budget: "), "{c}");
    let list = String::from_utf8_lossy(&d.run(&["campaign", "list"]).stdout).into_owned();
    assert!(list.lines().any(|l| l.starts_with(&id) && l.contains(" stopped_by_budget ")), "{list}");
    let log = d.api_get(&format!("/campaigns/{id}/log"));
    let ended = log.as_array().unwrap().iter().find(|e| e["kind"] == "run.ended").unwrap();
    assert!(
        ended["payload"]["detail"].as_str().unwrap().contains("blocked stops in a row without any gain"),
        "{ended}"
    );
    // Each block carried a different question.
    let qs = d.api_get(&format!("/campaigns/{id}/questions"));
    let ids: Vec<&str> = qs.as_array().unwrap().iter().filter_map(|q| q["bank_id"].as_str()).collect();
    assert!(ids.len() >= 2 && ids.windows(2).all(|w| w[0] != w[1]), "{ids:?}");
}

#[test]
fn stopping_a_run_ends_the_agents_whole_process_group() {
    let f = fixture("sleep", "");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let out = d.run(&["run", &id, "--agent", "command", "--detach"]);
    assert!(out.status.success());
    std::thread::sleep(std::time::Duration::from_millis(800));
    let c = d.api_get(&format!("/campaigns/{id}"));
    assert_eq!(
        (&c["state"], &c["attached"]["agent"], &c["attached"]["via"]),
        (&Value::from("running"), &Value::from("command"), &Value::from("run")),
        "{c}"
    );
    let out = d.run(&["stop", &id]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("stopping"));
    let run = wait_run_end(&d, &id);
    assert_eq!(run["outcome"], "stopped");
    wait_state(&d, &id, "stopped");
    std::thread::sleep(std::time::Duration::from_millis(3500));
    assert!(!f.dir.path().join("grandchild-survived").exists(), "a grandchild of the agent survived the stop");
}

#[test]
fn attach_and_detach_through_the_cli() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let out = d.run(&["attach", &id]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let path = f.ws().join(".claude/settings.local.json");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let cmd = v["hooks"]["Stop"][0]["hooks"][0]["command"].as_str().unwrap();
    assert!(
        cmd.ends_with(&format!("hook claude-code stop --fail closed --unavailable-blocks 3 --campaign {id}")),
        "{cmd}"
    );
    let out = d.run(&["detach", &id]);
    assert!(out.status.success());
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(v, serde_json::json!({}));
}

/// A command agent's own usage report (`{"gadfly_usage": {...}}` lines) is
/// recorded, summed and held to `max_cost_usd`: the third report reaches
/// it and the run ends at once, stopped by budget (never a success), with
/// the budget and the figures in its end and in `budget.reached`.
#[test]
fn a_command_agents_reported_cost_stops_the_run_by_budget() {
    let f = fixture("usage", "max_cost_usd = 1.0");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let out = d.run(&["run", &id, "--agent", "command"]);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stdout));
    let run = wait_run_end(&d, &id);
    assert_eq!(run["outcome"], "stopped_by_budget", "{run}");
    let log = d.api_get(&format!("/campaigns/{id}/log?limit=10000"));
    let log = log.as_array().unwrap();
    let usage: Vec<&Value> = log.iter().filter(|e| e["kind"] == "agent.usage").collect();
    assert_eq!(usage.len(), 3, "one report per turn: {usage:?}");
    assert!(usage.iter().all(|u| u["payload"]["source"] == "command" && u["payload"]["run_id"] == run["id"]));
    // The malformed report (a negative cost) is an output line, not spend.
    assert!(log
        .iter()
        .any(|e| e["kind"] == "agent.output" && e["payload"]["line"] == r#"{"gadfly_usage": {"cost_usd": -1}}"#));
    let reached: Vec<&Value> = log.iter().filter(|e| e["kind"] == "budget.reached").collect();
    assert_eq!(reached.len(), 1, "{reached:?}");
    let r = &reached[0]["payload"];
    assert_eq!(
        (r["budget"].as_str(), r["limit"].as_f64(), r["tokens"].as_u64()),
        (Some("max_cost_usd"), Some(1.0), Some(3600))
    );
    assert!((r["cost_usd"].as_f64().unwrap() - 1.2).abs() < 1e-9, "{r}");
    let ended = log.iter().find(|e| e["kind"] == "run.ended").unwrap();
    let detail = ended["payload"]["detail"].as_str().unwrap();
    assert!(detail.contains("stopped by budget: $1.20 spent") && detail.contains("max_cost_usd = 1"), "{detail}");
    // The third turn ended at its report: only two turn ends were judged.
    let stops = d.api_get(&format!("/campaigns/{id}/stops"));
    assert_eq!(stops.as_array().unwrap().len(), 2, "{stops}");
    // The API's spend view: per campaign, per session and per run.
    let spend = d.api_get(&format!("/campaigns/{id}/spend"));
    let c = &spend["campaign"];
    assert_eq!(
        (c["input_tokens"].as_u64(), c["cached_input_tokens"].as_u64(), c["output_tokens"].as_u64()),
        (Some(3000), Some(1200), Some(600))
    );
    assert!((c["cost_usd"].as_f64().unwrap() - 1.2).abs() < 1e-9, "{spend}");
    assert_eq!(spend["runs"][0]["run_id"], run["id"]);
    assert_eq!(spend["runs"][0]["tokens"], 3600);
    assert_eq!(spend["sessions"][0]["session_id"], format!("run-{}", run["id"]));
    assert_eq!(spend["budgets"]["max_cost_usd"], 1.0);
    // And the audit.
    let audit = d.run(&["audit", "campaign", &id]);
    let text = String::from_utf8_lossy(&audit.stdout);
    assert!(text.contains("## Spend") && text.contains("3600 tokens") && text.contains("$1.20"), "{text}");
}

/// Issue 45, class 1, from inside spawn mode's sandbox: the agent (a
/// scripted command agent, sandboxed by default) makes its repository's
/// config name a program for the settings that make git run one, adds a
/// signed commit carrying a family trailer, then calls with its hook token
/// what reaches the repository (`beam tag`, `beam list`, `eval`) and ends its
/// turn (judged by the daemon). Nothing of the agent's config runs, in the
/// sandbox or in the daemon; the beam finds the family.
#[test]
fn an_agents_git_config_never_runs_from_spawn_mode() {
    let agent = r#"#!/bin/sh
trap="$PWD/.git/trap.sh"
printf '#!/bin/sh\necho "$0 $*" >> "%s/.git/trap-ran.log"\ncat >/dev/null 2>&1\nexit 0\n' "$PWD" > "$trap"
chmod +x "$trap"
git config core.fsmonitor "$trap"; git config core.pager "$trap"; git config core.sshCommand "$trap"
git config log.showSignature true; git config gpg.program "$trap"; git config diff.external "$trap"
git config filter.trap.clean "$trap"; git config filter.trap.smudge "$trap"; git config filter.trap.required true
git config core.hooksPath "$PWD/.git/trap-hooks"; mkdir -p .git/trap-hooks
for h in reference-transaction post-checkout post-index-change pre-commit; do cp "$trap" ".git/trap-hooks/$h"; done
tree=$(git -c core.fsmonitor=false rev-parse 'HEAD^{tree}'); parent=$(git -c core.fsmonitor=false rev-parse HEAD)
c=$(printf 'tree %s\nparent %s\nauthor t <t@t> 1700000000 +0000\ncommitter t <t@t> 1700000000 +0000\ngpgsig -----BEGIN PGP SIGNATURE-----\n \n iQEz\n -----END PGP SIGNATURE-----\n\nsigned\n\nGadfly-Family: signed-family\n' "$tree" "$parent" | git -c core.fsmonitor=false hash-object -t commit -w --stdin)
git -c core.hooksPath=/dev/null update-ref refs/heads/try-signed "$c"
"$GADFLY_BIN" beam tag householder --campaign "$GADFLY_CAMPAIGN" > "$PWD/.git/agent-calls.log" 2>&1
"$GADFLY_BIN" beam list "$GADFLY_CAMPAIGN" --json >> "$PWD/.git/agent-calls.log" 2>&1
"$GADFLY_BIN" eval "$GADFLY_CAMPAIGN" >> "$PWD/.git/agent-calls.log" 2>&1
printf 'a true 50 100\nb true 40 100\nc true 80 100\n' > candidate.txt
echo "All scenarios pass. Done."
"#;
    let spec = "[agent]\nkind = \"command\"\nstart = \"sh ../agent.sh\"\nresume = \"sh ../agent.sh\"\n\n[beam]\nmin_families = 1\n";
    let f = Fixture::new(spec);
    std::fs::write(f.dir.path().join("agent.sh"), agent).unwrap();
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let out = d.run(&["run", &id, "--agent", "command"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let run = wait_run_end(&d, &id);
    let calls = std::fs::read_to_string(f.ws().join(".git/agent-calls.log")).unwrap_or_default();
    assert!(calls.contains("signed-family"), "the agent's beam list found the trailer's family: {calls}\nrun: {run}");
    let ran = f.ws().join(".git/trap-ran.log");
    assert!(!ran.exists(), "the agent's git config ran: {}", std::fs::read_to_string(&ran).unwrap_or_default());
    let beam = d.api_get(&format!("/campaigns/{id}/beam"));
    assert!(beam["families"].as_array().unwrap().iter().any(|f| f["family"] == "signed-family"), "{beam}");
}
