use serde_json::json;

use super::*;
use crate::evaluation::Evaluation;

/// Checks an event's kind and body against what the call site that
/// recorded it before [`Event`] wrote by hand.
fn check(e: Event, kind: &str, body: Value) {
    assert_eq!(e.kind(), kind);
    assert_eq!(e.body(), body, "{kind}");
    assert!(ALL_KINDS.contains(&kind), "{kind} is missing from ALL_KINDS");
}

fn transcript() -> Option<TranscriptLine> {
    Some(TranscriptLine { uuid: "u1".into(), timestamp: json!("2026-01-01T00:00:00Z") })
}

#[test]
fn kinds_are_listed_once_and_hook_kinds_follow_the_event_name() {
    let mut all = ALL_KINDS.to_vec();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), ALL_KINDS.len(), "a kind is listed twice");
    // Each Claude Code hook event's own constant: tested beside
    // `CLAUDE_CODE_EVENTS`, in src/agent/mod.rs.
    assert!(matches!(hook_kind("stop"), Cow::Borrowed(_)));
    assert_eq!(hook_kind("some-new-event"), "hook.some_new_event");
}

#[test]
fn hook_calls() {
    let payload = json!({"session_id": "s1", "tool_use_id": "t1"});
    let call = |event: &str, spooled| Event::HookCall {
        agent: "claude-code".into(),
        event: event.into(),
        payload: payload.clone(),
        spooled,
    };
    check(
        call("post-tool-use", None),
        "hook.post_tool_use",
        json!({"agent": "claude-code", "event": "post-tool-use", "payload": {"session_id": "s1", "tool_use_id": "t1"}}),
    );
    let meta = json!({"at": "2026-01-01T00:00:00Z", "outcome": "blocked", "why": "down"});
    check(
        call("stop", Some(meta)),
        "hook.stop",
        json!({"agent": "claude-code", "event": "stop", "payload": {"session_id": "s1", "tool_use_id": "t1"},
               "spooled": {"at": "2026-01-01T00:00:00Z", "outcome": "blocked", "why": "down"}}),
    );
    let odd = call("custom-thing", None);
    assert_eq!(odd.kind(), "hook.custom_thing");
}

#[test]
fn campaign_and_hook_installs() {
    check(
        Event::CampaignCreated {
            name: "attn".into(),
            workspace: PathBuf::from("/w"),
            mode: "autonomous".into(),
            scenarios: vec!["a".into(), "b".into()],
            protected_files: 3,
        },
        "campaign.created",
        json!({"name": "attn", "workspace": "/w", "mode": "autonomous", "scenarios": ["a", "b"], "protected_files": 3}),
    );
    check(Event::CampaignArchived { archived: true }, "campaign.archived", json!({"archived": true}));
    check(Event::CampaignArchived { archived: false }, "campaign.archived", json!({"archived": false}));
    let installed = Installed {
        kind: "attach".into(),
        settings_path: PathBuf::from("/w/.claude/settings.local.json"),
        dir: PathBuf::from("/w"),
        exe: PathBuf::from("/bin/gadfly"),
        exe_sha256: "ab".into(),
        fingerprint: "cd".into(),
    };
    check(
        Event::HooksInstall(HooksInstall::Installed(installed.clone())),
        "hooks.install",
        json!({"action": "installed", "install": installed}),
    );
    check(
        Event::HooksInstall(HooksInstall::Removed { settings_path: PathBuf::from("/w/s.json") }),
        "hooks.install",
        json!({"action": "removed", "settings_path": "/w/s.json"}),
    );
}

#[test]
fn evaluations_and_decisions() {
    check(Event::EvaluationStarted { tree: "t1".into() }, "evaluation.started", json!({"tree": "t1"}));
    let eval: Evaluation = serde_json::from_value(json!({
        "tree": "t1", "holds": false, "scenarios": [], "geomean_speedup": 1.5, "worst_scenario": "b",
        "worst_speedup": 0.9, "failures": ["b is slower"], "failing_count": 1,
        "build": null, "run": null, "violations": [], "duration_ms": 1200, "created_at": "t"
    }))
    .unwrap_or_else(|e| panic!("an evaluation fixture: {e}"));
    check(
        Event::evaluated(7, &eval),
        "evaluation",
        json!({"evaluation_id": 7, "tree": "t1", "holds": false, "geomean_speedup": 1.5, "worst_scenario": "b",
               "worst_speedup": 0.9, "failing": 1, "failures": ["b is slower"], "duration_ms": 1200}),
    );
    check(
        Event::Decision {
            decision: Decision::Block,
            holds: false,
            evaluation_id: Some(7),
            stop_event_id: 12,
            question_id: None,
            reason: Some("no".into()),
        },
        "decision",
        json!({"decision": "block", "holds": false, "evaluation_id": 7, "stop_event_id": 12, "question_id": null,
               "reason": "no"}),
    );
}

#[test]
fn questions() {
    check(
        Event::QuestionQueued { question_id: 3, text: "Why?".into(), by: QueuedBy::Human },
        "question.queued",
        json!({"question_id": 3, "source": "human", "text": "Why?"}),
    );
    check(
        Event::QuestionQueued {
            question_id: 4,
            text: "Bound?".into(),
            by: QueuedBy::Bank { bank_id: "bound-001".into(), moment: "plateau".into() },
        },
        "question.queued",
        json!({"question_id": 4, "source": "bank", "bank_id": "bound-001", "moment": "plateau", "text": "Bound?"}),
    );
    // A queued question's row, as the store tells it (`From<&QuestionRow>`).
    let row = DeliveredQuestion {
        question_id: 5,
        source: "bank".into(),
        bank_id: Some("bound-001".into()),
        moment: None,
        text: "Bound?".into(),
    };
    for (via, s) in [
        (Via::HookAdditionalContext, "hook_additional_context"),
        (Via::AgentPrompt, "agent_prompt"),
        (Via::AgentStdin, "agent_stdin"),
    ] {
        check(
            Event::QuestionDelivered { question: row.clone(), via },
            "question.delivered",
            json!({"question_id": 5, "source": "bank", "bank_id": "bound-001", "moment": null, "text": "Bound?", "via": s}),
        );
    }
    // At a stop: the source is the bank entry (its id is the bank id), or human.
    let picked = gate::Question {
        queued_id: None,
        source: "bound-001".into(),
        moment: "completion_claim".into(),
        text: "Bound?".into(),
    };
    check(
        Event::QuestionDelivered { question: DeliveredQuestion::asked_at_stop(6, &picked), via: Via::StopHookReason },
        "question.delivered",
        json!({"question_id": 6, "source": "bound-001", "bank_id": "bound-001", "moment": "completion_claim",
               "text": "Bound?", "via": "stop_hook_reason"}),
    );
    let human =
        gate::Question { queued_id: Some(3), source: "human".into(), moment: "plateau".into(), text: "Why?".into() };
    check(
        Event::QuestionDelivered { question: DeliveredQuestion::asked_at_stop(3, &human), via: Via::StopHookReason },
        "question.delivered",
        json!({"question_id": 3, "source": "human", "bank_id": null, "moment": "plateau", "text": "Why?",
               "via": "stop_hook_reason"}),
    );
    // Expired: the row as the store tells it, with why.
    check(
        Event::QuestionExpired { question: row.clone(), reason: "the stop was allowed".into() },
        "question.expired",
        json!({"question_id": 5, "source": "bank", "bank_id": "bound-001", "moment": null, "text": "Bound?",
               "reason": "the stop was allowed"}),
    );
}

#[test]
fn violations_and_ungated_stops() {
    check(
        Event::Violation(Violation::HooksChanged { changes: vec!["removed".into()] }),
        "violation",
        json!({"kind": "hooks_changed", "changes": ["removed"]}),
    );
    check(
        Event::Violation(Violation::TurnEndedUngated {
            why: "no Stop".into(),
            uuid: "u9".into(),
            timestamp: "2026-01-01T00:00:00Z".into(),
        }),
        "violation",
        json!({"kind": "turn_ended_ungated", "changes": ["no Stop"], "source": "transcript", "uuid": "u9",
               "timestamp": "2026-01-01T00:00:00Z"}),
    );
    check(
        Event::StopUngated {
            why: "ended".into(),
            claim: None,
            by: UngatedBy::Gate { event_id: 4, latest_evaluation_id: None, holds: false },
        },
        "stop.ungated",
        json!({"why": "ended", "event_id": 4, "latest_evaluation_id": null, "holds": false, "claim": null}),
    );
    check(
        Event::StopUngated { why: "ended".into(), claim: Some("Done.".into()), by: UngatedBy::Run },
        "stop.ungated",
        json!({"why": "ended", "claim": "Done.", "resumed_by": "run"}),
    );
    check(
        Event::SessionFailedStart {
            why: "ended before any prompt".into(),
            error: Some("ECONNREFUSED".into()),
            event_id: 7,
        },
        "session.failed_start",
        json!({"why": "ended before any prompt", "error": "ECONNREFUSED", "event_id": 7}),
    );
}

#[test]
fn runs() {
    check(
        Event::RunStarted { run_id: 1, agent: "codex".into(), daemon: "d1".into(), sandbox: "bwrap: hidden".into() },
        "run.started",
        json!({"run_id": 1, "agent": "codex", "daemon": "d1", "sandbox": "bwrap: hidden"}),
    );
    check(
        Event::RunResumed {
            run_id: 1,
            agent: "claude-code".into(),
            session_id: Some("s1".into()),
            from_daemon: None,
            daemon: "d2".into(),
        },
        "run.resumed",
        json!({"run_id": 1, "agent": "claude-code", "session_id": "s1", "from_daemon": null, "daemon": "d2"}),
    );
    check(
        Event::RunSuspended { run_id: 1, why: "shut down".into() },
        "run.suspended",
        json!({"run_id": 1, "why": "shut down"}),
    );
    check(
        Event::RunEnded { run_id: 1, outcome: "completed".into(), detail: "ok".into() },
        "run.ended",
        json!({"run_id": 1, "outcome": "completed", "detail": "ok"}),
    );
}

#[test]
fn agent_streams() {
    check(Event::AgentOutput { line: "hi".into() }, "agent.output", json!({"line": "hi"}));
    check(
        Event::AgentSession(AgentSession::ClaudeCode {
            session_id: Some("s1".into()),
            model: json!("opus"),
            cwd: json!("/w"),
            version: Value::Null,
        }),
        "agent.session",
        json!({"agent": "claude-code", "session_id": "s1", "model": "opus", "cwd": "/w", "version": null}),
    );
    check(
        Event::AgentSession(AgentSession::Codex { session_id: "th1".into() }),
        "agent.session",
        json!({"agent": "codex", "session_id": "th1"}),
    );
    check(Event::AgentMessage { text: json!("Done."), transcript: None }, "agent.message", json!({"text": "Done."}));
    check(
        Event::AgentMessage { text: json!("Done."), transcript: transcript() },
        "agent.message",
        json!({"text": "Done.", "uuid": "u1", "timestamp": "2026-01-01T00:00:00Z", "source": "transcript"}),
    );
    check(
        Event::AgentToolCall {
            id: json!("t1"),
            name: json!("Bash"),
            input: json!({"command": "make"}),
            transcript: None,
        },
        "agent.tool_call",
        json!({"id": "t1", "name": "Bash", "input": {"command": "make"}}),
    );
    check(
        Event::AgentToolCall {
            id: json!("t1"),
            name: json!("exec_command"),
            input: json!({"cmd": "make"}),
            transcript: transcript(),
        },
        "agent.tool_call",
        json!({"id": "t1", "name": "exec_command", "input": {"cmd": "make"}, "uuid": "u1",
               "timestamp": "2026-01-01T00:00:00Z", "source": "transcript"}),
    );
    check(
        Event::AgentToolResult {
            tool_use_id: json!("t1"),
            status: ToolStatus::IsError(json!(false)),
            content: "ok".into(),
            transcript: None,
        },
        "agent.tool_result",
        json!({"tool_use_id": "t1", "is_error": false, "content": "ok"}),
    );
    check(
        Event::AgentToolResult {
            tool_use_id: json!("t1"),
            status: ToolStatus::ExitCode(json!(2)),
            content: "boom".into(),
            transcript: None,
        },
        "agent.tool_result",
        json!({"tool_use_id": "t1", "exit_code": 2, "content": "boom"}),
    );
    check(
        Event::AgentToolResult {
            tool_use_id: json!("t1"),
            status: ToolStatus::IsError(Value::Null),
            content: "ok".into(),
            transcript: transcript(),
        },
        "agent.tool_result",
        json!({"tool_use_id": "t1", "is_error": null, "content": "ok", "uuid": "u1",
               "timestamp": "2026-01-01T00:00:00Z", "source": "transcript"}),
    );
    check(Event::AgentFeedback { text: "blocked".into() }, "agent.feedback", json!({"text": "blocked"}));
    check(
        Event::AgentUserMessage {
            text: "go".into(),
            transcript: TranscriptLine { uuid: "u2".into(), timestamp: Value::Null },
        },
        "agent.user_message",
        json!({"text": "go", "uuid": "u2", "timestamp": null, "source": "transcript"}),
    );
    check(
        Event::AgentResult(AgentResult::ClaudeCode {
            subtype: json!("success"),
            is_error: json!(false),
            num_turns: json!(3),
            terminal_reason: Value::Null,
            result: "Done.".into(),
        }),
        "agent.result",
        json!({"subtype": "success", "is_error": false, "num_turns": 3, "terminal_reason": null, "result": "Done."}),
    );
    check(
        Event::AgentResult(AgentResult::Codex {
            event: "turn.completed".into(),
            detail: json!({"type": "turn.completed"}),
        }),
        "agent.result",
        json!({"agent": "codex", "event": "turn.completed", "detail": {"type": "turn.completed"}}),
    );
    check(
        Event::AgentSystem { subtype: json!("compact_boundary"), content: Value::Null },
        "agent.system",
        json!({"subtype": "compact_boundary", "content": null}),
    );
    check(
        Event::AgentEvent { event: json!({"type": "item.updated"}) },
        "agent.event",
        json!({"agent": "codex", "event": {"type": "item.updated"}}),
    );
    check(
        Event::AgentCrashed {
            agent: "claude-code".into(),
            restart: 1,
            status: "Ok(Ok(ExitStatus(unix_wait_status(256))))".into(),
            stderr_tail: "err".into(),
            detail: CrashDetail::Stream { resent_messages: 2, first_prompt_taken: true },
        },
        "agent.crashed",
        json!({"agent": "claude-code", "restart": 1, "stderr_tail": "err",
               "status": "Ok(Ok(ExitStatus(unix_wait_status(256))))", "resent_messages": 2,
               "first_prompt_taken": true}),
    );
    check(
        Event::AgentCrashed {
            agent: "codex".into(),
            restart: 2,
            status: "exit status: 1".into(),
            stderr_tail: "".into(),
            detail: CrashDetail::Turn { turn_started: true, message_resent: false },
        },
        "agent.crashed",
        json!({"agent": "codex", "restart": 2, "status": "exit status: 1", "turn_started": true,
               "message_resent": false, "stderr_tail": ""}),
    );
}

fn finding(source: &str) -> Moment {
    Moment {
        moment: "plateau".into(),
        detector: "plateau".into(),
        detail: "flat".into(),
        source: source.into(),
        evidence: MomentEvidence::Finding { evaluations: vec![1, 2], scenarios: vec!["a".into()], evaluation_count: 2 },
        claim: None,
        beam: None,
        outcome: MomentOutcome::Recorded,
    }
}

#[test]
fn moments() {
    let base = json!({"moment": "plateau", "detector": "plateau", "evaluations": [1, 2], "scenarios": ["a"],
                      "detail": "flat", "source": "numeric", "evaluation_count": 2});
    let with = |extra: Value| {
        let mut b = base.clone();
        for (k, v) in extra.as_object().into_iter().flatten() {
            b[k] = v.clone();
        }
        b
    };
    // Audit mode: the finding alone.
    check(Event::Moment(finding("numeric")), "moment", base.clone());
    // Held for the stop's question.
    let mut m = finding("numeric");
    m.outcome = MomentOutcome::NoQuestion("asked at the stop, whose claim shows the same moment".into());
    check(
        Event::Moment(m),
        "moment",
        with(json!({"no_question": "asked at the stop, whose claim shows the same moment"})),
    );
    // Autonomous: queued, maybe from the beam.
    let mut m = finding("numeric");
    m.beam = Some("too few live families".into());
    m.outcome =
        MomentOutcome::Question { question_id: 9, bank_id: "family-001".into(), text: "New family?".into(), via: None };
    check(
        Event::Moment(m),
        "moment",
        with(json!({"beam": "too few live families",
                    "question": {"question_id": 9, "bank_id": "family-001", "text": "New family?"}})),
    );
    // Human: suggestions.
    let mut m = finding("numeric");
    m.outcome = MomentOutcome::Suggestions(vec![Suggestion {
        id: "bound-001".into(),
        text: "Bound?".into(),
        rationale: "r".into(),
    }]);
    check(
        Event::Moment(m),
        "moment",
        with(json!({"suggestions": [{"id": "bound-001", "text": "Bound?", "rationale": "r"}]})),
    );
    // A claim asked at the stop.
    let mut m = finding("text");
    m.claim = Some(ClaimEvidence { quote: "this is the limit".into(), repeated: true });
    m.outcome = MomentOutcome::Question {
        question_id: 10,
        bank_id: "bound-002".into(),
        text: "Measured?".into(),
        via: Some(Via::StopHookReason),
    };
    check(
        Event::Moment(m),
        "moment",
        with(json!({"source": "text", "quote": "this is the limit", "repeated": true,
                    "question": {"question_id": 10, "bank_id": "bound-002", "text": "Measured?",
                                 "via": "stop_hook_reason"}})),
    );
    // The beam's revisit question.
    check(
        Event::Moment(Moment {
            moment: "plateau".into(),
            detector: "beam_revisit".into(),
            detail: "abandoned family f reached 1.90x against the beam's best 2.00x".into(),
            source: "beam".into(),
            evidence: MomentEvidence::Family { family: "f".into() },
            claim: None,
            beam: None,
            outcome: MomentOutcome::Question {
                question_id: 11,
                bank_id: "revisit-001".into(),
                text: "Revisit?".into(),
                via: None,
            },
        }),
        "moment",
        json!({"moment": "plateau", "detector": "beam_revisit", "family": "f",
               "detail": "abandoned family f reached 1.90x against the beam's best 2.00x", "source": "beam",
               "question": {"question_id": 11, "bank_id": "revisit-001", "text": "Revisit?"}}),
    );
    check(
        Event::MomentEscalated { moment: "limit_claim".into(), why: "repeated".into(), quote: "q".into() },
        "moment.escalated",
        json!({"moment": "limit_claim", "why": "repeated", "quote": "q"}),
    );
    let withheld = crate::events::Withheld {
        moment: "plateau".into(),
        detector: "plateau".into(),
        share: 0.1,
        evaluation_before: Some(5),
        objective_evaluation: Some(4),
        objective_before: Some(1.25),
    };
    check(
        Event::MomentWithheld(withheld),
        "moment.withheld",
        json!({"moment": "plateau", "detector": "plateau", "share": 0.1, "evaluation_before": 5,
               "objective_evaluation": 4, "objective_before": 1.25}),
    );
}

#[test]
fn gains_and_beams() {
    check(
        Event::GainRecheck { evaluation_id: 7, tree: "t1".into(), seed: 42 },
        "gain.recheck",
        json!({"evaluation_id": 7, "tree": "t1", "seed": 42}),
    );
    check(
        Event::EvaluationRemeasured {
            evaluation_id: 7,
            recheck_ids: vec![8, 9],
            seeds: vec![42, 43],
            runs: 3,
            holds: true,
            decided: true,
        },
        "evaluation.remeasured",
        json!({"evaluation_id": 7, "recheck_ids": [8, 9], "seeds": [42, 43], "runs": 3, "holds": true, "decided": true}),
    );
    check(
        Event::GainConfirmed { evaluation_id: 7, recheck_id: 8, seed: 42 },
        "gain.confirmed",
        json!({"evaluation_id": 7, "recheck_id": 8, "seed": 42}),
    );
    check(
        Event::GainRejected { evaluation_id: 7, recheck_id: 8, seed: 42, reasons: vec!["a differs".into()] },
        "gain.rejected",
        json!({"evaluation_id": 7, "recheck_id": 8, "seed": 42, "reasons": ["a differs"]}),
    );
    check(
        Event::BeamFamily { family: "f".into(), git_ref: "refs/heads/beam/f".into(), how: FamilyHow::Discovered },
        "beam.family",
        json!({"family": "f", "ref": "refs/heads/beam/f", "how": "discovered"}),
    );
    check(
        Event::BeamFamily {
            family: "f".into(),
            git_ref: "refs/heads/beam/f".into(),
            how: FamilyHow::Tagged { commit: "abc".into() },
        },
        "beam.family",
        json!({"family": "f", "ref": "refs/heads/beam/f", "commit": "abc", "how": "tagged"}),
    );
    check(
        Event::BeamAbandoned { family: "f".into(), reason: "slow".into() },
        "beam.abandoned",
        json!({"family": "f", "reason": "slow"}),
    );
}

#[test]
fn usage_budgets_and_notifications() {
    let usage = Usage {
        source: UsageSource::ClaudeCodeTurn,
        run_id: Some(3),
        message_id: None,
        cumulative: false,
        input_tokens: 200,
        cached_input_tokens: 50,
        output_tokens: 40,
        cost_usd: None,
        session_cost_usd: Some(0.0016),
        reported: json!({"input_tokens": 150}),
    };
    check(
        Event::AgentUsage(usage),
        "agent.usage",
        json!({"source": "claude-code", "run_id": 3, "message_id": null, "cumulative": false, "input_tokens": 200, "cached_input_tokens": 50,
               "output_tokens": 40, "tokens": 240, "cost_usd": null, "session_cost_usd": 0.0016,
               "reported": {"input_tokens": 150}}),
    );
    let reached = BudgetReached {
        run_id: 3,
        budget: "max_tokens".into(),
        limit: 230.0,
        tokens: 240,
        cost_usd: Some(0.0016),
        turns: 1,
        detail: "240 tokens (max_tokens = 230)".into(),
    };
    check(
        Event::BudgetReached(reached),
        "budget.reached",
        json!({"run_id": 3, "budget": "max_tokens", "limit": 230.0, "tokens": 240, "cost_usd": 0.0016, "turns": 1,
               "detail": "240 tokens (max_tokens = 230)"}),
    );
    let attempt = NotifyDelivery {
        delivery: "d1".into(),
        webhook: 0,
        url: "https://hooks.example/…".into(),
        notify: "run_ended".into(),
        event_id: 9,
        attempt: 2,
        status: DeliveryStatus::Retrying,
        http_status: Some(500),
        error: None,
    };
    check(
        Event::NotifyDelivery(attempt),
        "notify.delivery",
        json!({"delivery": "d1", "webhook": 0, "url": "https://hooks.example/…", "notify": "run_ended", "event_id": 9,
               "attempt": 2, "status": "retrying", "http_status": 500, "error": null}),
    );
    check(
        Event::NotifyConfigured { notify: json!({"webhooks": []}) },
        "notify.configured",
        json!({"notify": {"webhooks": []}}),
    );
}

#[test]
fn claims_their_verdicts_and_block_streaks() {
    let claim = Claim {
        claim: ClaimKind::Limit,
        why: "cuBLAS is at 92% of peak".into(),
        evidence: vec![ClaimFile { name: "roofline.txt".into(), text: "peak 989 TFLOPS".into() }],
        evaluation_id: Some(4),
        geomean_speedup: Some(1.3),
    };
    check(
        Event::Claim(claim),
        "claim",
        json!({"claim": "limit", "why": "cuBLAS is at 92% of peak",
               "evidence": [{"name": "roofline.txt", "text": "peak 989 TFLOPS"}],
               "evaluation_id": 4, "geomean_speedup": 1.3}),
    );
    let verdict = ClaimVerdict {
        claim_id: 9,
        accepted: true,
        by: "ana".into(),
        reason: None,
        evaluation_id: Some(4),
        holds: Some(false),
        geomean_speedup: Some(1.3),
    };
    check(
        Event::ClaimVerdict(verdict),
        "claim.verdict",
        json!({"claim_id": 9, "verdict": "accepted", "by": "ana", "reason": null, "evaluation_id": 4,
               "holds": false, "geomean_speedup": 1.3}),
    );
    check(
        Event::BlockStreak { blocks: 3, best_geomean: Some(1.2), escalated: true },
        "block.streak",
        json!({"blocks": 3, "best_geomean": 1.2, "escalated": true}),
    );
}

#[test]
fn answers_reasks_and_escalations() {
    check(
        Event::QuestionAnswered(Answered {
            question_id: 7,
            reask_of: None,
            turns: 2,
            by: AnsweredBy::Evaluation { evaluation_id: 12, tree: "t2".into(), baseline: Some("t1".into()) },
        }),
        "question.answered",
        json!({"question_id": 7, "reask_of": null, "turns": 2, "by": "evaluation", "evaluation_id": 12,
               "tree": "t2", "baseline_tree": "t1"}),
    );
    check(
        Event::QuestionAnswered(Answered {
            question_id: 9,
            reask_of: Some(7),
            turns: 0,
            by: AnsweredBy::Artifact {
                files: vec![ClaimFile { name: "ncu.txt".into(), text: "dram 91%".into() }],
                why: None,
            },
        }),
        "question.answered",
        json!({"question_id": 9, "reask_of": 7, "turns": 0, "by": "artifact",
               "evidence": [{"name": "ncu.txt", "text": "dram 91%"}], "why": null}),
    );
    check(
        Event::QuestionReasked(Reasked {
            question_id: 9,
            reask_of: 7,
            form: ReaskForm::AnotherEntry,
            bank_id: Some("gap-002".into()),
            text: "Again?".into(),
            turns: 3,
        }),
        "question.reasked",
        json!({"question_id": 9, "reask_of": 7, "form": "another_entry", "bank_id": "gap-002", "text": "Again?",
               "turns": 3}),
    );
    let first =
        DeliveredQuestion { question_id: 7, source: "human".into(), bank_id: None, moment: None, text: "Why?".into() };
    check(
        Event::QuestionEscalated(Escalated { question: first, reasks: vec![9], turns: 6 }),
        "question.escalated",
        json!({"question_id": 7, "source": "human", "bank_id": null, "moment": null, "text": "Why?",
               "reasks": [9], "turns": 6}),
    );
}
