//! What the conversation-window tests share: options for a window mode, the texts and kind of a
//! model request, a second store on a fixture's data, and a turn that returns its answer.

use std::sync::Arc;

use taud::context::CONTINUATION_PROMPT;
use taud::hub::{CoreOptions, OpenTarget};
use taud::message::SystemContentBlock;
use taud::model::ModelRequest;
use taud::store::{ContextMode, SessionBackends, SessionStore, open_session_store};
use taud::testing::FakeModel;

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
    request.messages.iter().map(|m| m.text()).collect()
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

/// A hub started again on `f`'s data with `model` and `options`, with session `id` opened.
pub async fn restart(
    f: &Fixture,
    model: &Arc<FakeModel>,
    options: CoreOptions,
    id: &str,
) -> Fixture {
    let core = setup(&f.dir, f.backend, model, options)
        .start()
        .await
        .unwrap();
    core.open_session(OpenTarget::Id(id.to_owned()), None, "terminal", None)
        .await
        .unwrap();
    Fixture {
        _dir: crate::support::temp::dir(),
        dir: f.dir.clone(),
        model: Arc::clone(model),
        core,
        backend: f.backend,
    }
}
