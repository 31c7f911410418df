//! `tau chat` end to end on the `ollama` and `openai` providers: the real `taud` and `tau chat`
//! against one local mock server that speaks Ollama's `/api/chat` (NDJSON) and Chat Completions
//! (SSE) with recorded-shape bodies. A tool turn with a tier-2 approval on Ollama, then `/model`
//! switches to the role on the OpenAI-compatible server.

use std::io::{Read as _, Write as _};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use rexpect::session::PtySession;
use tau_e2e::chat::ChatSandbox;

const OLLAMA_TOOL_TURN: &[u8] =
    include_bytes!("../../daemon/tests/fixtures/providers/ollama/tool_turn.ndjson");
const OLLAMA_TEXT_TURN: &[u8] =
    include_bytes!("../../daemon/tests/fixtures/providers/ollama/text_turn.ndjson");
const OPENAI_TEXT: &str = "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hello from the \"}}]}\n\n\
data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"compatible server ✓\"},\"finish_reason\":null}]}\n\n\
data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n\
data: {\"choices\":[],\"usage\":{\"prompt_tokens\":30,\"completion_tokens\":6,\"total_tokens\":36}}\n\n\
data: [DONE]\n\n";

fn latin1(text: &str) -> String {
    text.bytes().map(char::from).collect()
}

fn see(chat: &mut PtySession, text: &str) -> anyhow::Result<String> {
    Ok(chat.exp_string(&latin1(text))?)
}

/// The request paths the mock saw, in order.
type Seen = Arc<Mutex<Vec<String>>>;

/// Serves until the test ends: `/api/chat` gets the tool turn first, then the text turn; the
/// Chat Completions path gets [`OPENAI_TEXT`].
fn serve() -> anyhow::Result<(u16, Seen)> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let port = listener.local_addr()?.port();
    let seen: Seen = Arc::default();
    let log = Arc::clone(&seen);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut request = Vec::new();
            let mut buf = [0u8; 8192];
            let head_end = loop {
                match stream.read(&mut buf) {
                    Ok(0) | Err(_) => break None,
                    Ok(n) => request.extend_from_slice(&buf[..n]),
                }
                if let Some(at) = request.windows(4).position(|w| w == b"\r\n\r\n") {
                    break Some(at + 4);
                }
            };
            let Some(head_end) = head_end else { continue };
            let head = String::from_utf8_lossy(&request[..head_end]).to_string();
            let length: usize = head
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse().ok())?
                })
                .unwrap_or(0);
            while request.len() < head_end + length {
                match stream.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => request.extend_from_slice(&buf[..n]),
                }
            }
            let path = head
                .split_whitespace()
                .nth(1)
                .unwrap_or_default()
                .to_owned();
            let (body, kind): (Vec<u8>, &str) = {
                let Ok(mut seen) = log.lock() else { return };
                seen.push(path.clone());
                let ollama_calls = seen.iter().filter(|p| *p == "/api/chat").count();
                match path.as_str() {
                    "/api/chat" if ollama_calls == 1 => {
                        (OLLAMA_TOOL_TURN.to_vec(), "application/x-ndjson")
                    }
                    "/api/chat" => (OLLAMA_TEXT_TURN.to_vec(), "application/x-ndjson"),
                    _ => (OPENAI_TEXT.as_bytes().to_vec(), "text/event-stream"),
                }
            };
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: {kind}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            );
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.write_all(&body);
        }
    });
    Ok((port, seen))
}

#[test]
fn a_chat_on_ollama_with_an_approval_then_on_an_openai_compatible_server() {
    let (port, seen) = serve().unwrap();
    let env = ChatSandbox::new().unwrap();
    let init = env
        .command("tau")
        .unwrap()
        .args(["init", "--provider", "ollama", "--yes", "--force"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(init.status.success(), "{init:?}");
    std::fs::write(
        env.sandbox.home().join("tau.toml"),
        format!(
            "[models.roles.brain]\nprovider = \"ollama\"\nmodel_id = \"qwen3:8b\"\nnum_ctx = 8192\n\
             [models.roles.fast]\nprovider = \"openai\"\nmodel_id = \"local-model\"\n\
             [component.ollama]\nbase_url = \"http://127.0.0.1:{port}\"\n\
             [component.openai]\nbase_url = \"http://127.0.0.1:{port}/v1\"\n"
        ),
    )
    .unwrap();
    let _hub = env.start_hub().unwrap();
    let mut chat = env.chat(&[]).unwrap();
    see(&mut chat, "is ready").unwrap();
    chat.send_line("What time is it? Then put the kettle on.")
        .unwrap();
    see(&mut chat, "Approval needed (tier 2)").unwrap();
    see(&mut chat, "Tool: demo_physical_action").unwrap();
    see(&mut chat, "Approve? [y/N]").unwrap();
    chat.send_line("y").unwrap();
    see(&mut chat, "✓ demo_physical_action: approved").unwrap();
    see(&mut chat, "Çay ister misiniz? 🍵").unwrap();

    chat.send_line("/model fast").unwrap();
    see(&mut chat, "Switched to role fast (openai, local-model).").unwrap();
    chat.send_line("and you?").unwrap();
    see(&mut chat, "Hello from the compatible server ✓").unwrap();
    see(&mut chat, "> ").unwrap();
    chat.send_control('d').unwrap();
    see(&mut chat, "Goodbye.").unwrap();
    chat.exp_eof().unwrap();

    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen.iter().filter(|p| *p == "/api/chat").count(),
        2,
        "{seen:?}"
    );
    assert!(seen.iter().any(|p| p == "/v1/chat/completions"), "{seen:?}");
}
