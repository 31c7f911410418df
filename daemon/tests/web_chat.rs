//! Chat and approvals through the web client, against a real `taud` with the fake model: a turn's
//! reply streamed to the session's event stream in order (and resumed after a dropped connection),
//! an approval card's content, a decision only from a stream of this device that was shown it, one
//! winner (a second device sees it decided elsewhere, a late decision is `already_decided`), and
//! the pending list across sessions.

use serde_json::json;

use crate::support::web::{Browser, Sse, WebHub};

fn signed_in(web: &WebHub, name: &str) -> Browser {
    let mut browser = Browser::enroll(web, &web.pair(name));
    browser.login(web);
    browser
}

#[test]
fn a_message_streams_its_reply_in_order_and_a_dropped_stream_resumes() {
    let web = WebHub::start();
    let browser = signed_in(&web, "laptop");
    let session = browser.new_session(&web);
    let mut stream = browser.stream(&web, &session);
    let snapshot = stream.until("snapshot");
    let stream_id = snapshot.data["stream_id"].as_str().unwrap().to_owned();

    let answer = browser.post(
        &web,
        "/api/turn",
        json!({"session_id": session, "text": "hello"}),
    );
    assert_eq!(answer.status, 200, "{}", answer.body);
    let turn_id = answer.json()["turn_id"].as_str().unwrap().to_owned();
    let mut seqs = Vec::new();
    let mut text = String::new();
    let mut last_id;
    loop {
        let event = stream.next().expect("the turn's events");
        if event.event != "session" {
            continue;
        }
        assert_eq!(event.data["turn_id"], turn_id.as_str());
        seqs.push(event.data["seq"].as_u64().unwrap());
        last_id = event.id.clone().unwrap_or_default();
        if event.data["type"] == "text_delta" {
            text.push_str(event.data["text"].as_str().unwrap());
        }
        if event.data["type"] == "turn_ended" {
            break;
        }
    }
    assert!(!text.is_empty(), "a streamed reply");
    assert!(
        seqs.windows(2).all(|w| w[1] == w[0] + 1),
        "contiguous: {seqs:?}"
    );
    assert_eq!(last_id, format!("{stream_id}.{}", seqs.last().unwrap()));
    drop(stream);

    // The page reconnects with the last id it saw: the next turn's events follow, none replayed.
    let first_of_resume = seqs.last().unwrap() + 1;
    let answer = browser.post(
        &web,
        "/api/turn",
        json!({"session_id": session, "text": "again"}),
    );
    assert_eq!(answer.status, 200);
    let cookie = browser.cookie.clone().unwrap();
    let mut resumed = Sse::open(
        &web,
        &format!("/api/events?session={session}"),
        Some(&cookie),
        &[("Last-Event-ID", &last_id)],
    );
    resumed.until("snapshot");
    let next = resumed.until("turn_queued");
    assert_eq!(next.data["seq"].as_u64().unwrap(), first_of_resume);
    resumed.until("turn_ended");

    // The stored conversation reads back as chat lines.
    let messages = browser
        .get(&web, &format!("/api/messages?session={session}"))
        .json();
    let lines = messages["messages"].as_array().unwrap();
    assert_eq!(lines[0]["role"], "user");
    assert_eq!(lines[0]["text"], "hello");
}

#[test]
fn an_approval_is_decided_once_by_a_device_that_was_shown_it() {
    let web = WebHub::start();
    let laptop = signed_in(&web, "laptop");
    let phone = signed_in(&web, "phone");
    let session = laptop.new_session(&web);
    let mut laptop_stream = laptop.stream(&web, &session);
    let laptop_key = laptop_stream.until("snapshot").data["stream_key"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut phone_stream = phone.stream(&web, &session);
    let phone_key = phone_stream.until("snapshot").data["stream_key"]
        .as_str()
        .unwrap()
        .to_owned();

    let answer = laptop.post(
        &web,
        "/api/turn",
        json!({"session_id": session, "text": "turn on the lamp"}),
    );
    assert_eq!(answer.status, 200, "{}", answer.body);
    let asked = laptop_stream.until("approval_requested");
    let card = &asked.data["approval"];
    assert_eq!(card["tool"], "demo_physical_action");
    assert_eq!(card["tier"], 2);
    assert_eq!(card["arguments"], r#"{"action": "turn on the lamp"}"#);
    assert!(!card["effect"].as_str().unwrap().is_empty());
    let approval_id = card["approval_id"].as_str().unwrap().to_owned();
    phone_stream.until("approval_requested");

    // Pending across sessions.
    let pending = phone.get(&web, "/api/pending").json();
    assert_eq!(pending["approvals"][0]["approval_id"], approval_id.as_str());

    // A stream key of another device does not decide; nor does a made-up one.
    for key in [phone_key.as_str(), "00"] {
        let answer = laptop.post(
            &web,
            "/api/decide",
            json!({"approval_id": approval_id, "decision": "approved", "stream_key": key}),
        );
        assert_eq!(answer.status, 403, "{}", answer.body);
    }
    let answer = laptop.post(
        &web,
        "/api/decide",
        json!({"approval_id": approval_id, "decision": "approved", "stream_key": laptop_key}),
    );
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.json()["result"], "applied");
    assert_eq!(answer.json()["resolution"], "approved");

    // The phone sees the winner; its own late decision changes nothing.
    let resolved = phone_stream.until("approval_resolved");
    assert_eq!(resolved.data["resolution"], "approved");
    assert_eq!(resolved.data["decided_by_channel"], "web");
    let late = phone.post(
        &web,
        "/api/decide",
        json!({"approval_id": approval_id, "decision": "rejected", "stream_key": phone_key}),
    );
    assert_eq!(late.json()["result"], "already_decided", "{}", late.body);
    // The tool ran once.
    let call = laptop_stream.until("tool_call");
    assert_eq!(call.data["approval"], "approved");
    assert_eq!(call.data["status"], "success");
    laptop_stream.until("turn_ended");
}

#[test]
fn a_turn_whose_page_went_away_is_never_approved() {
    let web = WebHub::start();
    let laptop = signed_in(&web, "laptop");
    let session = laptop.new_session(&web);
    // No stream open: nobody is shown the question, so it ends rejected at once.
    let answer = laptop.post(
        &web,
        "/api/turn",
        json!({"session_id": session, "text": "turn on the lamp"}),
    );
    assert_eq!(answer.status, 200);
    let messages = crate::support::process::wait_for("the turn to end", || {
        let messages = laptop
            .get(&web, &format!("/api/messages?session={session}"))
            .json();
        let done = messages["busy"] == false && messages["messages"].as_array()?.len() >= 2;
        done.then_some(messages)
    });
    assert!(messages.to_string().contains("demo_physical_action"));
    let pending = laptop.get(&web, "/api/pending").json();
    assert_eq!(pending["approvals"].as_array().unwrap().len(), 0);
}
