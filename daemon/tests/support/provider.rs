//! A tiny HTTP/1.1 mock server for the provider tests: it records each request and answers with a
//! scripted response whose body is written in the given pieces (chunked encoding, one flush per
//! piece), so decoders meet bodies split at awkward points over a real socket. A server can also
//! answer each request from what it carries (a clock check, say).
// Test-only helpers: a broken mock server should fail the test loudly.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

pub mod sigv4_check;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use taud::model::{
    AssembledMessage, MessageAssembler, Model, ModelError, ModelEvent, ModelRequest,
};

pub const DEADLINE: Duration = Duration::from_secs(20);

/// One scripted response.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub pieces: Vec<Vec<u8>>,
}

impl Reply {
    /// 200 with `body` cut at `cuts` (byte offsets).
    pub fn ok(content_type: &str, body: &[u8], cuts: &[usize]) -> Self {
        Self {
            status: 200,
            headers: vec![("content-type".into(), content_type.into())],
            pieces: split_at(body, cuts),
        }
    }

    /// An error status with a JSON (or any) body.
    pub fn status(status: u16, body: &str) -> Self {
        Self {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            pieces: vec![body.as_bytes().to_vec()],
        }
    }

    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }
}

/// `body` split at the given offsets (out-of-range offsets are ignored).
pub fn split_at(body: &[u8], cuts: &[usize]) -> Vec<Vec<u8>> {
    let mut cuts: Vec<usize> = cuts
        .iter()
        .copied()
        .filter(|c| *c > 0 && *c < body.len())
        .collect();
    cuts.sort_unstable();
    cuts.dedup();
    let mut pieces = Vec::new();
    let mut start = 0;
    for cut in cuts {
        pieces.push(body[start..cut].to_vec());
        start = cut;
    }
    pieces.push(body[start..].to_vec());
    pieces
}

/// A request as the server saw it.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    /// The raw request target (path and query, as sent).
    pub target: String,
    /// Header names lowercased.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("a JSON request body")
    }
}

/// Makes the reply to one request.
type Responder = Arc<dyn Fn(&Recorded) -> Reply + Send + Sync>;

/// The running server.
pub struct MockServer {
    pub addr: SocketAddr,
    requests: Arc<Mutex<Vec<Recorded>>>,
    stop: CancellationToken,
}

impl Drop for MockServer {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl MockServer {
    /// Serves `replies` in order, one connection each; after the last it answers 500.
    pub async fn start(replies: Vec<Reply>) -> Self {
        let replies = Mutex::new(VecDeque::from(replies));
        Self::respond(move |_| {
            replies.lock().unwrap().pop_front().unwrap_or_else(|| {
                Reply::status(
                    500,
                    r#"{"type":"error","error":{"type":"api_error","message":"no more replies"}}"#,
                )
            })
        })
        .await
    }

    /// Answers each request (one connection each) with what `respond` makes of it.
    pub async fn respond(respond: impl Fn(&Recorded) -> Reply + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let requests = Arc::new(Mutex::new(Vec::new()));
        let stop = CancellationToken::new();
        let respond: Responder = Arc::new(respond);
        let (rec, token) = (Arc::clone(&requests), stop.clone());
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    () = token.cancelled() => return,
                    a = listener.accept() => a,
                };
                let Ok((socket, _)) = accepted else { return };
                let (rec, respond) = (Arc::clone(&rec), Arc::clone(&respond));
                tokio::spawn(async move {
                    let _ = serve(socket, respond, rec).await;
                });
            }
        });
        Self {
            addr,
            requests,
            stop,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }
}

async fn serve(
    socket: tokio::net::TcpStream,
    respond: Responder,
    requests: Arc<Mutex<Vec<Recorded>>>,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(socket);
    let mut line = String::new();
    reader.read_line(&mut line).await?;
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_owned();
    let target = parts.next().unwrap_or_default().to_owned();
    let mut headers = Vec::new();
    loop {
        line.clear();
        reader.read_line(&mut line).await?;
        let trimmed = line.trim_end();
        if trimmed.is_empty() {
            break;
        }
        if let Some((name, value)) = trimmed.split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
        }
    }
    let length: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body).await?;
    let recorded = Recorded {
        method,
        target,
        headers,
        body,
    };
    let reply = respond(&recorded);
    requests.lock().unwrap().push(recorded);
    let mut socket = reader.into_inner();
    let mut head = format!("HTTP/1.1 {} Mock\r\n", reply.status);
    for (name, value) in &reply.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("transfer-encoding: chunked\r\nconnection: close\r\n\r\n");
    socket.write_all(head.as_bytes()).await?;
    socket.flush().await?;
    for piece in reply.pieces {
        if piece.is_empty() {
            continue;
        }
        socket
            .write_all(format!("{:x}\r\n", piece.len()).as_bytes())
            .await?;
        socket.write_all(&piece).await?;
        socket.write_all(b"\r\n").await?;
        socket.flush().await?;
        tokio::task::yield_now().await;
    }
    socket.write_all(b"0\r\n\r\n").await?;
    socket.flush().await?;
    socket.shutdown().await
}

/// Every item of one model call (bounded by [`DEADLINE`]).
pub async fn call(model: &dyn Model, request: ModelRequest) -> Vec<Result<ModelEvent, ModelError>> {
    let run = async {
        match model.stream(request, CancellationToken::new()).await {
            Ok(stream) => stream.collect::<Vec<_>>().await,
            Err(error) => vec![Err(error)],
        }
    };
    tokio::time::timeout(DEADLINE, run)
        .await
        .expect("the call finished in time")
}

/// The events assembled as the agent loop does (a `Throttled` or `OutputDiscarded` resets).
pub fn assemble(items: &[Result<ModelEvent, ModelError>]) -> Result<AssembledMessage, ModelError> {
    let mut assembler = MessageAssembler::new();
    for item in items {
        let event = item.clone()?;
        if matches!(
            event,
            ModelEvent::Throttled { .. } | ModelEvent::OutputDiscarded
        ) {
            assembler.reset();
        }
        assembler.push(&event)?;
    }
    Ok(assembler.finish(0))
}

/// A one-message request.
pub fn hello() -> ModelRequest {
    ModelRequest {
        system: Vec::new(),
        messages: vec![taud::message::Message::user_text("Merhaba")]
            .into_iter()
            .map(Arc::new)
            .collect(),
        tools: Vec::new().into(),
    }
}

/// Offsets that cut `body` inside its multi-byte characters and right after every `data:`.
pub fn awkward_cuts(body: &[u8]) -> Vec<usize> {
    let mut cuts = Vec::new();
    for (i, b) in body.iter().enumerate() {
        if *b >= 0x80 && (b & 0xC0) == 0x80 {
            cuts.push(i);
        }
    }
    let text = String::from_utf8_lossy(body);
    let mut from = 0;
    while let Some(pos) = text[from..].find("data:") {
        cuts.push(from + pos + 3);
        from += pos + 5;
    }
    cuts
}

/// The base64 of the 8-byte PNG signature: the image in [`image_result`].
pub const PIXEL_PNG: &str = "iVBORw0KGgo=";

/// A history whose last message answers a `camera` call with a text and a PNG image.
pub fn image_result() -> ModelRequest {
    use taud::message::{
        ContentBlock, ImageBlock, Message, Role, ToolResult, ToolResultContent, ToolResultStatus,
        ToolUse,
    };
    let image = ImageBlock::from_base64("image/png", PIXEL_PNG).expect("png is supported");
    ModelRequest {
        system: Vec::new(),
        messages: vec![
            Message::user_text("What does the camera see?"),
            Message {
                role: Role::Assistant,
                content: vec![ContentBlock::ToolUse(ToolUse {
                    tool_use_id: "call_cam".into(),
                    name: "camera".into(),
                    input: serde_json::json!({}),
                })],
                metadata: None,
            },
            Message {
                role: Role::User,
                content: vec![ContentBlock::ToolResult(ToolResult {
                    tool_use_id: "call_cam".into(),
                    status: ToolResultStatus::Success,
                    content: vec![
                        ToolResultContent::Text("one frame".into()),
                        ToolResultContent::Image(image),
                    ],
                })],
                metadata: None,
            },
        ]
        .into_iter()
        .map(Arc::new)
        .collect(),
        tools: Vec::new().into(),
    }
}
