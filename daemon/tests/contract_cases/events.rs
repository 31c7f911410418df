//! Contract cases about a session's events and whole sessions: events appended in order with a
//! version, the event sink and the tier gate writing through it, and a session created whole (the
//! compaction path), visible only once complete. Part of `store_contract.rs`'s `cases`.

use super::*;

/// A tool for the gate case: returns its input.
struct Echo(taud::tool::ToolSpec);

#[async_trait::async_trait]
impl taud::tool::Tool for Echo {
    fn spec(&self) -> &taud::tool::ToolSpec {
        &self.0
    }

    async fn call(
        &self,
        input: serde_json::Value,
        _ctx: taud::tool::ToolContext,
    ) -> Result<taud::tool::ToolOutput, taud::tool::ToolError> {
        Ok(taud::tool::ToolOutput::json(input))
    }
}

pub fn events_are_appended_in_order_with_a_version(h: &Harness) {
    let store = h.store.as_ref();
    let id = create_fresh_session(store).unwrap().session_id;
    assert!(store.read_events(&id).unwrap().is_empty());
    for n in 0..3 {
        store
            .append_event(
                &id,
                &json!({"type": "tool_call", "n": n, "text": "line\nbreak"}),
            )
            .unwrap();
    }
    let events = store.read_events(&id).unwrap();
    assert_eq!(
        events,
        (0..3)
            .map(|n| json!({"v": 1, "type": "tool_call", "n": n, "text": "line\nbreak"}))
            .collect::<Vec<_>>()
    );
    let err = store
        .append_event(&id, &json!(["not", "an", "object"]))
        .unwrap_err();
    assert!(matches!(err, SessionError::InvalidEvent(_)), "{err}");
    let err = store
        .append_event("20000101-000000-0000", &json!({}))
        .unwrap_err();
    assert!(matches!(err, SessionError::SessionNotFound(_)), "{err}");
    let err = store.read_events("20000101-000000-0000").unwrap_err();
    assert!(matches!(err, SessionError::SessionNotFound(_)), "{err}");
}

pub fn the_event_sink_writes_into_its_session(h: &Harness) {
    let id = create_fresh_session(h.store.as_ref()).unwrap().session_id;
    let sink = StoreEventSink::new(h.store.clone(), id.clone());
    sink.emit_json(json!({"type": "approval", "decision": "rejected"}))
        .unwrap();
    assert_eq!(
        h.reopen().read_events(&id).unwrap(),
        vec![json!({"v": 1, "type": "approval", "decision": "rejected"})]
    );
    let missing = StoreEventSink::new(h.store.clone(), "20000101-000000-0000");
    assert!(missing.emit_json(json!({})).is_err());
}

/// The gate writes its events through the sink into the store: a tier-1 call, a refused
/// tier-2 call (its approval asked and decided) and an unknown tool, in order.
pub fn the_gate_records_its_events_through_the_sink(h: &Harness) {
    use std::sync::Arc;
    use taud::gate::{ApprovalOutcome, CallContext, GateCall, TierGate, Verdict};
    use taud::testing::ScriptedApprover;
    use taud::tool::{Tier, ToolCatalog, ToolSpec};

    let id = create_fresh_session(h.store.as_ref()).unwrap().session_id;
    let mut catalog = ToolCatalog::new();
    for (name, tier) in [("note", Tier::DigitalWrite), ("lamp", Tier::Physical)] {
        let spec = ToolSpec::builder(name, format!("The {name} tool."))
            .effect(format!("Changes the {name}."))
            .tier(tier)
            .build();
        assert_eq!(catalog.add(Arc::new(Echo(spec))), Ok(()));
    }
    let gate = TierGate::builder(Arc::new(catalog))
        .approver(Arc::new(ScriptedApprover::decisions([
            ApprovalOutcome::Rejected,
        ])))
        .sink(Arc::new(StoreEventSink::new(h.store.clone(), id.clone())))
        .build();
    let ctx = CallContext {
        session_id: id.clone(),
        channel: "terminal".into(),
        cancel: tokio_util::sync::CancellationToken::new(),
    };
    let call = |tool: &str, tool_use_id: &str| GateCall {
        tool_use_id: tool_use_id.into(),
        tool: tool.into(),
        arguments: json!({"x": 1}),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        for (tool, tool_use_id) in [("note", "u1"), ("lamp", "u2"), ("ghost", "u3")] {
            let record = match gate.check(call(tool, tool_use_id), &ctx).await {
                Verdict::Allowed(permit) => permit.run(ctx.clone()).await,
                Verdict::Refused(refusal) => refusal.into_record(),
            };
            gate.record(&record, &ctx);
        }
    });
    let events = h.reopen().read_events(&id).unwrap();
    let summary: Vec<(String, String, String)> = events
        .iter()
        .map(|e| {
            let text = |key: &str| e[key].as_str().unwrap_or_default().to_owned();
            (text("type"), text("tool_use_id"), text("status"))
        })
        .collect();
    let expected: Vec<(String, String, String)> = [
        ("tool_call", "u1", "success"),
        ("approval", "u2", "pending"),
        ("approval", "u2", "rejected"),
        ("tool_call", "u2", "refused"),
        ("error", "u3", ""),
        ("tool_call", "u3", "refused"),
    ]
    .iter()
    .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
    .collect();
    assert_eq!(summary, expected, "{events:#?}");
    assert!(
        events
            .iter()
            .all(|e| e["v"] == 1 && e["session_id"] == id.as_str())
    );
    assert_eq!(events[0]["channel"], "terminal");
    assert_eq!(events[0]["arguments"], json!({"x": 1}));
}

fn new_session(messages: Vec<taud::store::SessionMessage>) -> taud::store::NewSession {
    let now = now_utc();
    taud::store::NewSession {
        session: Session::new(taud::store::new_session_id(now).unwrap(), now),
        agent: SessionAgent::new(DEFAULT_AGENT_ID, ContextMode::Summarize, now),
        messages,
        meta: SessionMeta {
            title: Some("continued".into()),
            ..SessionMeta::default()
        },
    }
}

pub fn a_complete_session_is_created_whole(h: &Harness) {
    let store = h.store.as_ref();
    let new = new_session(vec![user_message(0, "summary"), assistant_message(1, "ok")]);
    let id = new.session.session_id.clone();
    store.create_complete_session(&new).unwrap();
    for store in [h.store.clone(), h.reopen()] {
        assert_eq!(
            store.read_session(&id).unwrap().map(|s| s.session_id),
            Some(id.clone())
        );
        let agent = store.read_agent(&id, DEFAULT_AGENT_ID).unwrap().unwrap();
        assert_eq!(
            agent.conversation_manager_state,
            new.agent.conversation_manager_state
        );
        let texts: Vec<String> = store
            .list_messages(&id, DEFAULT_AGENT_ID, None, 0)
            .unwrap()
            .iter()
            .map(|m| m.to_message().text())
            .collect();
        assert_eq!(texts, ["summary", "ok"]);
        assert_eq!(
            store.read_meta(&id).unwrap().unwrap().title.as_deref(),
            Some("continued")
        );
        let listed = store.list_sessions().unwrap();
        let info = listed.iter().find(|s| s.session_id == id).unwrap();
        assert_eq!(info.message_count, 2);
    }
    // The session goes on like any other.
    store
        .create_message(&id, DEFAULT_AGENT_ID, &user_message(2, "next"))
        .unwrap();
    let err = store.create_complete_session(&new).unwrap_err();
    assert!(matches!(err, SessionError::SessionExists(_)), "{err}");
}

pub fn a_failed_complete_session_is_never_visible(h: &Harness) {
    let store = h.store.as_ref();
    // The second message repeats the first's id.
    let mut new = new_session(vec![user_message(0, "a"), assistant_message(1, "b")]);
    new.messages[1].message_id = 0;
    let id = new.session.session_id.clone();
    let err = store.create_complete_session(&new).unwrap_err();
    assert!(
        matches!(
            err,
            SessionError::InvalidMessageOrder {
                expected: 1,
                found: 0
            }
        ),
        "{err}"
    );
    // A bad agent id is refused too, with nothing left behind.
    let mut new = new_session(vec![user_message(0, "a"), assistant_message(1, "b")]);
    new.agent.agent_id = "../evil".into();
    let bad_agent = new.session.session_id.clone();
    let err = store.create_complete_session(&new).unwrap_err();
    assert!(matches!(err, SessionError::InvalidId { .. }), "{err}");
    for store in [h.store.clone(), h.reopen()] {
        for id in [&id, &bad_agent] {
            assert_eq!(store.read_session(id).unwrap(), None);
            assert!(
                store
                    .list_sessions()
                    .unwrap()
                    .iter()
                    .all(|s| s.session_id != *id)
            );
        }
    }
}

/// `append_batch`: events first, then messages, in one write; every record follows the rules of
/// its own method, and a refused message is never overwritten.
pub fn a_batch_stores_events_then_messages(h: &Harness) {
    let store = h.store.as_ref();
    let id = h.session_with_agent();
    store
        .append_event(&id, &json!({"type": "approval", "n": 0}))
        .unwrap();
    let events = [
        json!({"type": "tool_call", "n": 1}),
        json!({"type": "tool_call", "n": 2, "v": 1}),
    ];
    let messages = [assistant_message(0, "calls"), user_message(1, "results")];
    store.append_batch(&id, "tau", &events, &messages).unwrap();
    store.append_batch(&id, "tau", &[], &[]).unwrap();

    let reopened = h.reopen();
    let ns: Vec<_> = reopened
        .read_events(&id)
        .unwrap()
        .into_iter()
        .map(|e| (e["v"].clone(), e["n"].clone()))
        .collect();
    assert_eq!(
        ns,
        [
            (json!(1), json!(0)),
            (json!(1), json!(1)),
            (json!(1), json!(2))
        ]
    );
    let texts: Vec<_> = reopened
        .list_messages(&id, "tau", None, 0)
        .unwrap()
        .iter()
        .map(|m| (m.message_id, m.message.text()))
        .collect();
    assert_eq!(texts, [(0, "calls".to_owned()), (1, "results".to_owned())]);
    assert_eq!(store.session_info(&id).unwrap().unwrap().message_count, 2);

    // A taken id is refused and the stored message stays; the count matches what is listed.
    let err = store
        .append_batch(
            &id,
            "tau",
            &[],
            &[user_message(2, "new"), user_message(1, "replacement")],
        )
        .unwrap_err();
    assert!(
        matches!(err, SessionError::MessageExists { message_id: 1, .. }),
        "{err}"
    );
    assert_eq!(
        store
            .read_message(&id, "tau", 1)
            .unwrap()
            .unwrap()
            .message
            .text(),
        "results"
    );
    let listed = store.list_messages(&id, "tau", None, 0).unwrap().len() as u64;
    assert_eq!(
        store.session_info(&id).unwrap().unwrap().message_count,
        listed
    );
    assert_eq!(
        h.reopen().session_info(&id).unwrap().unwrap().message_count,
        listed
    );

    let err = store
        .append_batch(&id, "tau", &[json!("not an object")], &[])
        .unwrap_err();
    assert!(matches!(err, SessionError::InvalidEvent(_)), "{err}");
    let err = store
        .append_batch("20000101-000000-0000", "tau", &events, &[])
        .unwrap_err();
    assert!(matches!(err, SessionError::SessionNotFound(_)), "{err}");
    let bare = create_fresh_session(store).unwrap().session_id;
    let err = store
        .append_batch(&bare, "tau", &[], &[user_message(0, "x")])
        .unwrap_err();
    assert!(matches!(err, SessionError::AgentNotFound { .. }), "{err}");
    let err = store
        .append_batch(&id, "../x", &[], &[user_message(3, "x")])
        .unwrap_err();
    assert!(matches!(err, SessionError::InvalidId { .. }), "{err}");
}
