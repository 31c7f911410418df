//! Contract cases for records that carry images: a record in the shape earlier versions wrote (an
//! MCP image as a `json` block, a bare `image` block kept as an unknown block) and one with image
//! blocks, each read back byte for byte by every backend, also after a reopen.

use serde_json::{Value, json};
use taud::message::{ContentBlock, Message, ToolResultContent};
use taud::store::{SessionMessage, now_utc};

use super::Harness;

/// A tool result as earlier versions stored an MCP image, next to a user image they kept unread.
pub fn old_image_record() -> Value {
    json!({"role": "user", "content": [
        {"toolResult": {"toolUseId": "t1", "status": "success", "content": [
            {"json": {"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo="}}
        ]}},
        {"image": {"format": "png", "source": {"bytes": "iVBORw0KGgo="}, "extra": 1}},
        {"text": "what is it?"}
    ]})
}

/// A tool result with an image, as this version writes it.
pub fn image_record() -> Value {
    json!({"role": "user", "content": [
        {"toolResult": {"toolUseId": "t2", "status": "success", "content": [
            {"text": "the camera"},
            {"image": {"format": "jpeg", "source": {"bytes": "/9j/4AAQ"}}}
        ]}},
        {"image": {"format": "webp", "source": {"bytes": "UklGRgAAAABXRUJQ"}}}
    ]})
}

pub fn image_records_read_back_unchanged(h: &Harness) {
    let id = h.session_with_agent();
    let store = h.store.as_ref();
    let old: Message = serde_json::from_value(old_image_record()).unwrap();
    let new: Message = serde_json::from_value(image_record()).unwrap();
    let ToolResultContent::Json(_) = &old.tool_results().next().unwrap().content[0] else {
        panic!("an old json block stays a json block")
    };
    assert!(matches!(old.content[1], ContentBlock::Other(_)));
    assert!(matches!(
        new.tool_results().next().unwrap().content[1],
        ToolResultContent::Image(_)
    ));
    assert!(matches!(new.content[1], ContentBlock::Image(_)));
    for (n, message) in [old, new].into_iter().enumerate() {
        let record = SessionMessage::new(n as u64, message, now_utc());
        store.create_message(&id, "tau", &record).unwrap();
    }
    let expected = [old_image_record(), image_record()];
    for listed in [
        store.list_messages(&id, "tau", None, 0).unwrap(),
        h.reopen().list_messages(&id, "tau", None, 0).unwrap(),
    ] {
        let read: Vec<Value> = listed
            .iter()
            .map(|m| serde_json::to_value(&m.message).unwrap())
            .collect();
        assert_eq!(read, expected);
    }
}
