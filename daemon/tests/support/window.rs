//! What the conversation-window tests share: options for a window mode, the texts and kind of a
//! model request, a second store on a fixture's data, and a turn that returns its answer.

use std::sync::Arc;

use taud::context::CONTINUATION_PROMPT;
use taud::hub::CoreOptions;
use taud::message::{Message, SystemContentBlock};
use taud::model::ModelRequest;
use taud::store::{ContextMode, SessionBackends, SessionStore, open_session_store};

use super::hub::{Fixture, drain, ended_text, options, setup};

/// The test options with `context` and `window_size` set.
pub fn window_options(context: ContextMode, window_size: usize) -> CoreOptions {
    let mut options = options();
    options.context = context;
    options.window_size = window_size;
    options
}

/// The text of each message the model was sent.
pub fn texts(request: &ModelRequest) -> Vec<String> {
    request.messages.iter().map(Message::text).collect()
}

/// Whether the request is a summary call (its system prompt is the continuation prompt).
pub fn is_summary_call(request: &ModelRequest) -> bool {
    SystemContentBlock::join(&request.system).starts_with(CONTINUATION_PROMPT)
}

/// Another store on the fixture's data.
pub fn open_store(f: &Fixture) -> Arc<dyn SessionStore> {
    let config = setup(&f.dir, f.backend, &f.model, options()).store;
    open_session_store(&SessionBackends::builtin(), f.backend, &config).unwrap()
}

/// One turn on the terminal channel; the text it ended with.
pub async fn say(f: &Fixture, id: &str, text: &str) -> String {
    let events = drain(&mut f.turn(id, text, "terminal").await).await;
    ended_text(&events)
}
