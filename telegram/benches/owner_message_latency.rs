//! The latency the Telegram channel adds: from an owner's message appearing in the (fake) Bot API
//! to its turn starting in the (real, in-process) hub, seen by a subscriber of the session.
//! Prints p50/p99 over the samples.
//!
//! Run: `cargo bench -p tau-telegram --bench owner_message_latency` (`TAU_BENCH_SAMPLES` sets
//! the number of messages, default 60).

#![allow(clippy::unwrap_used, clippy::expect_used)]

// The test support, at the crate root so its `super::fake_bot` resolves here too.
#[path = "../tests/support/fake_bot.rs"]
mod fake_bot;
#[path = "../tests/support/hub.rs"]
mod hub;

use std::time::{Duration, Instant};

use fake_bot::FakeBot;
use hub::{TestHub, config, session_of, start_channel};
use tau_api::proto::v1::{self as pb, session_event::Kind};
use taud::testing::FakeReply;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

async fn next_kind(stream: &mut tonic::Streaming<pb::SubscribeResponse>) -> Kind {
    loop {
        let message = tokio::time::timeout(Duration::from_secs(20), stream.message())
            .await
            .expect("an event in time")
            .unwrap()
            .unwrap();
        if let Some(pb::subscribe_response::Kind::Event(pb::SessionEvent {
            kind: Some(kind),
            ..
        })) = message.kind
        {
            return kind;
        }
    }
}

fn main() {
    let samples: usize = std::env::var("TAU_BENCH_SAMPLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let bot = FakeBot::start().await;
        let replies = (0..=samples).map(|i| FakeReply::text(format!("reply {i}")));
        let hub = TestHub::start(replies.collect()).await;
        hub.pair_owner();
        let channel = start_channel(&hub, config(&bot));
        // Warm up: the first message opens the chat's session.
        bot.owner_says("hello");
        bot.wait_for_text("reply 0").await;
        let session = session_of(&hub).await;
        let mut stream = hub
            .client()
            .await
            .subscribe(pb::SubscribeRequest {
                session_id: session,
                after_seq: None,
                channel: "bench".into(),
                stream_id: String::new(),
            })
            .await
            .unwrap()
            .into_inner();
        stream.message().await.unwrap().unwrap();
        let mut latencies = Vec::with_capacity(samples);
        for i in 1..=samples {
            let sent = Instant::now();
            bot.owner_says(&format!("message {i}"));
            loop {
                if let Kind::TurnStarted(_) = next_kind(&mut stream).await {
                    latencies.push(sent.elapsed());
                    break;
                }
            }
            while !matches!(next_kind(&mut stream).await, Kind::TurnEnded(_)) {}
        }
        channel.stop().await.unwrap();
        latencies.sort();
        println!(
            "telegram owner message -> turn started ({samples} messages, fake Bot API, in-process hub): p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
            percentile(&latencies, 0.50).as_secs_f64() * 1000.0,
            percentile(&latencies, 0.99).as_secs_f64() * 1000.0,
            latencies.last().unwrap().as_secs_f64() * 1000.0,
        );
    });
}
