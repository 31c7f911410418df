//! The `ollama` and `openai` providers' own cost: (1) the time from a local mock server writing
//! the first token to the provider yielding the first text delta (HTTP, chunked decoding, line
//! splitting, JSON, retry wrapper), p50/p99 per provider; (2) parse throughput of a long streamed
//! reply through each decoder, in memory, fed in 16 KiB pieces.
//!
//! Run: `cargo bench -p taud --bench provider_stream [-- ITERATIONS]` (default 500).

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use tau_api::config::{ModelTuning, RoleConfig};
use tau_api::env::Env;
use taud::message::Message;
use taud::model::{ModelEvent, ModelRequest};
use taud::provider::http::FrameDecoder;
use taud::provider::ollama::chat_chunk::OllamaDecoder;
use taud::provider::openai::completion_chunk::OpenAiDecoder;
use taud::provider::{ProviderOptions, RetryPolicy, build_model_with};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

const WARMUP: usize = 50;

fn ollama_record(text: &str, done: bool) -> String {
    let record = if done {
        serde_json::json!({"model": "m", "message": {"role": "assistant", "content": text},
            "done": true, "done_reason": "stop", "prompt_eval_count": 10, "eval_count": 20})
    } else {
        serde_json::json!({"model": "m", "message": {"role": "assistant", "content": text},
            "done": false})
    };
    format!("{record}\n")
}

fn openai_record(text: &str) -> String {
    let record = serde_json::json!({"id": "c", "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]});
    format!("data: {record}\n\n")
}

const OPENAI_END: &str = "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":20}}\n\ndata: [DONE]\n\n";

/// The first record and the rest of a reply of `words` tokens.
fn reply(provider: &str, words: usize) -> (String, String) {
    let word = "merhaba çay ";
    if provider == "ollama" {
        let first = ollama_record(word, false);
        let mut rest: String = (1..words).map(|_| ollama_record(word, false)).collect();
        rest.push_str(&ollama_record("", true));
        (first, rest)
    } else {
        let first = openai_record(word);
        let mut rest: String = (1..words).map(|_| openai_record(word)).collect();
        rest.push_str(OPENAI_END);
        (first, rest)
    }
}

/// A server that answers every connection with `first` then `rest` (chunked), and reports the
/// instant just before it writes `first`.
async fn serve(first: String, rest: String) -> Result<(u16, mpsc::Receiver<Instant>), BoxError> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    let (tx, rx) = mpsc::channel(4);
    let (first, rest) = (Arc::new(first), Arc::new(rest));
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let (tx, first, rest) = (tx.clone(), Arc::clone(&first), Arc::clone(&rest));
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = vec![0u8; 16 * 1024];
                // Headers, then the body its content-length names.
                loop {
                    let Ok(n) = socket.read(&mut buf).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    request.extend_from_slice(&buf[..n]);
                    let Some(at) = request.windows(4).position(|w| w == b"\r\n\r\n") else {
                        continue;
                    };
                    let head = String::from_utf8_lossy(&request[..at]).to_ascii_lowercase();
                    let length: usize = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .and_then(|v| v.trim().parse().ok())
                        .unwrap_or(0);
                    if request.len() >= at + 4 + length {
                        break;
                    }
                }
                let head = "HTTP/1.1 200 OK\r\ncontent-type: application/octet-stream\r\n\
                            transfer-encoding: chunked\r\nconnection: close\r\n\r\n";
                if socket.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                let chunk = |body: &str| format!("{:x}\r\n{body}\r\n", body.len());
                let _ = tx.send(Instant::now()).await;
                let _ = socket.write_all(chunk(&first).as_bytes()).await;
                let _ = socket.flush().await;
                let _ = socket.write_all(chunk(&rest).as_bytes()).await;
                let _ = socket.write_all(b"0\r\n\r\n").await;
                let _ = socket.shutdown().await;
            });
        }
    });
    Ok((port, rx))
}

async fn first_delta(provider: &str, iterations: usize) -> Result<Vec<Duration>, BoxError> {
    let (first, rest) = reply(provider, 50);
    let (port, mut written) = serve(first, rest).await?;
    let role = RoleConfig {
        provider: provider.to_owned(),
        model_id: "m".to_owned(),
        max_tokens: 256,
        cache: None,
        fallback: None,
        tuning: ModelTuning::default(),
    };
    let options = ProviderOptions {
        ollama_base_url: Some(format!("http://127.0.0.1:{port}")),
        openai_base_url: Some(format!("http://127.0.0.1:{port}/v1")),
        retry: Some(RetryPolicy::immediate(1)),
        ..ProviderOptions::default()
    };
    let model = build_model_with("bench", &role, &Env::new(), &options)?;
    let request = ModelRequest {
        system: Vec::new(),
        messages: vec![Message::user_text("hello").into()],
        tools: Vec::new().into(),
    };
    let mut samples = Vec::with_capacity(iterations);
    for i in 0..WARMUP + iterations {
        let mut stream = model
            .stream(request.clone(), CancellationToken::new())
            .await?;
        let mut first_at = None;
        while let Some(event) = stream.next().await {
            if let ModelEvent::TextDelta { .. } = event? {
                first_at.get_or_insert_with(Instant::now);
            }
        }
        let wrote = written.recv().await.ok_or("the server stopped")?;
        let got = first_at.ok_or("no text delta")?;
        if i >= WARMUP {
            samples.push(got.saturating_duration_since(wrote));
        }
    }
    samples.sort();
    Ok(samples)
}

/// Decodes `body` in 16 KiB pieces; returns the text deltas seen.
fn decode(decoder: &mut dyn FrameDecoder, body: &[u8]) -> Result<usize, BoxError> {
    let mut out = Vec::with_capacity(64);
    let mut deltas = 0;
    for piece in body.chunks(16 * 1024) {
        out.clear();
        let finished = decoder
            .feed(piece, &mut out)
            .map_err(|f| f.error.to_string())?;
        deltas += out
            .iter()
            .filter(|e| matches!(e, ModelEvent::TextDelta { .. }))
            .count();
        if finished {
            return Ok(deltas);
        }
    }
    Err("the reply did not finish".into())
}

fn throughput(provider: &str) -> Result<(), BoxError> {
    let words = 20_000;
    let (first, rest) = reply(provider, words);
    let body = format!("{first}{rest}");
    let rounds = 10;
    let started = Instant::now();
    for _ in 0..rounds {
        let mut decoder: Box<dyn FrameDecoder> = if provider == "ollama" {
            Box::new(OllamaDecoder::new("m", "call_"))
        } else {
            Box::new(OpenAiDecoder::new("m"))
        };
        let deltas = decode(decoder.as_mut(), body.as_bytes())?;
        if deltas != words {
            return Err(format!("{deltas} deltas, expected {words}").into());
        }
    }
    let secs = started.elapsed().as_secs_f64();
    let bytes = (body.len() * rounds) as f64;
    println!(
        "{provider:<7} parse: {:>7.1} MB/s, {:>9.0} records/s ({} records, {:.1} MB per reply)",
        bytes / secs / 1e6,
        (words * rounds) as f64 / secs,
        words,
        body.len() as f64 / 1e6
    );
    Ok(())
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

fn main() -> Result<(), BoxError> {
    let iterations = std::env::args()
        .skip(1)
        .find(|arg| !arg.starts_with("--"))
        .and_then(|arg| arg.parse().ok())
        .unwrap_or(500);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async {
        for provider in ["ollama", "openai"] {
            let samples = first_delta(provider, iterations).await?;
            println!(
                "{provider:<7} first token → first text delta: n={} p50={:.1} µs p99={:.1} µs",
                samples.len(),
                percentile(&samples, 0.50).as_secs_f64() * 1e6,
                percentile(&samples, 0.99).as_secs_f64() * 1e6,
            );
        }
        Ok::<_, BoxError>(())
    })?;
    for provider in ["ollama", "openai"] {
        throughput(provider)?;
    }
    Ok(())
}
