//! The multi-session soak: many open sessions on one real `taud` (fake model, Unix socket), each
//! watched by subscribers, served a mix of text, tool and approved tier-2 turns, optionally with a
//! routine firing now and then. It samples the hub's resident memory, open files and threads as it
//! goes, and fits the slope of RSS per 10,000 turns after warm-up.
//!
//! Unlike the one-session soak (`soak.rs`), the hub runs with the allocator's default arenas (no
//! `MALLOC_ARENA_MAX`), as it does when installed: fragmentation across arenas is part of what a
//! long-running hub pays.
//!
//! The turns cycle through four kinds, round robin over the sessions: text ("hello"), tool
//! ("what time is it", `current_time`, tier 0), text again, and tier 2 ("turn on the lamp",
//! `demo_physical_action`), which the turn's own stream approves with a scripted decision as soon
//! as it is asked.

#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tau_api::proto::v1::{self as pb, tau_client::TauClient};
use tonic::transport::Channel;

use super::soak::{SoakHub, SoakResult, connect, new_session};

/// The texts of the four turn kinds, in the order they cycle.
pub const TURN_TEXTS: [(&str, &str); 4] = [
    ("text", "hello"),
    ("tool", "what time is it"),
    ("text", "hello again"),
    ("tier2", "turn on the lamp"),
];

/// What one multi-session soak does.
#[derive(Debug, Clone)]
pub struct MultiPlan {
    /// Open sessions the turns are spread over, round robin.
    pub sessions: usize,
    /// Subscribers per session (each its own Subscribe stream; subscriber `k` of every session
    /// shares connection `k`).
    pub subscribers: usize,
    /// Turns in all.
    pub turns: usize,
    /// Turns before the slope is measured.
    pub warmup: usize,
    /// A sample every this many turns.
    pub sample_every: usize,
    /// Turns per second over all sessions; `None`: as fast as the hub answers.
    pub rate: Option<f64>,
    /// Register a prompt routine firing every minute, and run it by hand every this many turns.
    pub routine_every: Option<usize>,
    /// Print each sample as it is taken.
    pub verbose: bool,
}

/// One sample of the hub.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    pub turns: usize,
    pub at: Duration,
    pub rss_kib: u64,
    pub fds: u64,
    pub threads: u64,
}

/// What a multi-session soak measured.
#[derive(Debug, Clone)]
pub struct MultiReport {
    /// Before any session was opened.
    pub idle: Sample,
    /// Every sample, the last taken after the last turn.
    pub samples: Vec<Sample>,
    pub turn_times: Vec<Duration>,
    /// Events the subscribers read, and how often one was cut off and subscribed again.
    pub events_seen: u64,
    pub resubscribed: u64,
    pub approvals_decided: u64,
    pub warmup: usize,
}

impl MultiReport {
    fn after_warmup(&self) -> impl Iterator<Item = &Sample> {
        self.samples.iter().filter(move |s| s.turns >= self.warmup)
    }

    /// The sample at warm-up's end (the first at or after it).
    pub fn at_warmup(&self) -> Option<Sample> {
        self.after_warmup().next().copied()
    }

    pub fn last(&self) -> Option<Sample> {
        self.samples.last().copied()
    }

    /// The least-squares slope of RSS over turns after warm-up, in MiB per 10,000 turns.
    pub fn slope_mib_per_10k(&self) -> f64 {
        let points: Vec<(f64, f64)> = self
            .after_warmup()
            .map(|s| (s.turns as f64, s.rss_kib as f64 / 1024.0))
            .collect();
        least_squares(&points) * 10_000.0
    }

    /// RSS growth from warm-up's end to the last sample, in MiB per 10,000 turns.
    pub fn end_to_end_mib_per_10k(&self) -> f64 {
        match (self.at_warmup(), self.last()) {
            (Some(first), Some(last)) if last.turns > first.turns => {
                (last.rss_kib as f64 - first.rss_kib as f64) / 1024.0 * 10_000.0
                    / (last.turns - first.turns) as f64
            }
            _ => 0.0,
        }
    }

    pub fn percentile_ms(&self, p: f64) -> f64 {
        let mut sorted = self.turn_times.clone();
        sorted.sort();
        if sorted.is_empty() {
            return 0.0;
        }
        let rank = ((sorted.len() as f64 - 1.0) * p).round() as usize;
        sorted[rank.min(sorted.len() - 1)].as_secs_f64() * 1e3
    }
}

/// The slope of the least-squares line through `points` (0 for fewer than two distinct x).
pub fn least_squares(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    if points.len() < 2 {
        return 0.0;
    }
    let mean_x = points.iter().map(|p| p.0).sum::<f64>() / n;
    let mean_y = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mean_x).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mean_x) * (p.1 - mean_y)).sum();
    if sxx == 0.0 { 0.0 } else { sxy / sxx }
}

/// Takes one sample of `hub`.
pub fn sample(hub: &SoakHub, turns: usize, started: Instant) -> SoakResult<Sample> {
    Ok(Sample {
        turns,
        at: started.elapsed(),
        rss_kib: hub.rss_kib()?,
        fds: hub.fds()?,
        threads: hub.threads()?,
    })
}

/// Prints one sample as a line.
pub fn print_sample(label: &str, s: &Sample) {
    println!(
        "  {label:<10} turns {:>7}  {:>7.1} s  RSS {:>7.1} MiB  fds {:>4}  threads {:>3}",
        s.turns,
        s.at.as_secs_f64(),
        s.rss_kib as f64 / 1024.0,
        s.fds,
        s.threads
    );
}

/// The soak's open sessions and their subscribers, kept open while turns run.
pub struct Running {
    /// The hub before any session was opened.
    pub idle: Sample,
    /// When the soak began (samples count from it).
    pub started: Instant,
    pub sessions: Vec<String>,
    subscribers: Vec<tokio::task::JoinHandle<()>>,
    pub events_seen: Arc<AtomicU64>,
    pub resubscribed: Arc<AtomicU64>,
}

impl Running {
    /// Ends every subscription (their streams close, so the sessions become unused).
    pub async fn drop_subscribers(&mut self) {
        for task in self.subscribers.drain(..) {
            task.abort();
            let _ = task.await;
        }
    }
}

/// Opens `plan.sessions` sessions and starts `plan.subscribers` subscribers on each.
pub async fn open(hub: &SoakHub, plan: &MultiPlan) -> SoakResult<Running> {
    let mut client = hub.client().await?;
    // Let the hub settle after start before the idle sample.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = Instant::now();
    let idle = sample(hub, 0, started)?;
    let mut sessions = Vec::with_capacity(plan.sessions);
    for _ in 0..plan.sessions.max(1) {
        sessions.push(new_session(&mut client).await?);
    }
    let events_seen = Arc::new(AtomicU64::new(0));
    let resubscribed = Arc::new(AtomicU64::new(0));
    let mut subscribers = Vec::new();
    for k in 0..plan.subscribers {
        let connection = connect(hub.socket()).await?;
        for session in &sessions {
            subscribers.push(tokio::spawn(subscribe_loop(
                connection.clone(),
                session.clone(),
                format!("watch-{k}"),
                Arc::clone(&events_seen),
                Arc::clone(&resubscribed),
            )));
        }
    }
    // Every subscription is live before the first turn (each reads its snapshot first).
    let deadline = Instant::now() + Duration::from_secs(30);
    while events_seen.load(Ordering::Relaxed) < subscribers.len() as u64 {
        if Instant::now() > deadline {
            return Err("the subscribers did not get their snapshots within 30 s".into());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    events_seen.store(0, Ordering::Relaxed);
    Ok(Running {
        idle,
        started,
        sessions,
        subscribers,
        events_seen,
        resubscribed,
    })
}

/// Reads a session's events until the stream ends, subscribing again (resuming after the last
/// seq it saw) when it is cut off, as a client that keeps watching does.
async fn subscribe_loop(
    mut client: TauClient<Channel>,
    session_id: String,
    channel: String,
    seen: Arc<AtomicU64>,
    resubscribed: Arc<AtomicU64>,
) {
    let mut resume: Option<(u64, String)> = None;
    loop {
        let request = pb::SubscribeRequest {
            session_id: session_id.clone(),
            after_seq: resume.as_ref().map(|r| r.0),
            channel: channel.clone(),
            stream_id: resume.as_ref().map(|r| r.1.clone()).unwrap_or_default(),
        };
        let Ok(response) = client.subscribe(request).await else {
            return;
        };
        let mut stream = response.into_inner();
        let mut stream_id = String::new();
        let mut last_seq = 0;
        loop {
            match stream.message().await {
                Ok(Some(message)) => {
                    match message.kind {
                        Some(pb::subscribe_response::Kind::Snapshot(snapshot)) => {
                            stream_id = snapshot.stream_id;
                            last_seq = snapshot.last_seq;
                        }
                        Some(pb::subscribe_response::Kind::Event(event)) => last_seq = event.seq,
                        None => {}
                    }
                    seen.fetch_add(1, Ordering::Relaxed);
                }
                Ok(None) => return,
                Err(_) => break,
            }
        }
        resubscribed.fetch_add(1, Ordering::Relaxed);
        resume = (!stream_id.is_empty()).then_some((last_seq, stream_id));
    }
}

/// Runs `plan.turns` turns over the open sessions, sampling as it goes.
pub async fn run(hub: &SoakHub, plan: &MultiPlan, open: &Running) -> SoakResult<MultiReport> {
    let started = open.started;
    let mut client = hub.client().await?;
    if plan.routine_every.is_some() {
        add_routine(&mut client, &open.sessions[0]).await?;
    }
    let mut samples = Vec::new();
    let mut turn_times = Vec::with_capacity(plan.turns);
    let decided = AtomicU64::new(0);
    let every = plan.sample_every.max(1);
    for i in 0..plan.turns {
        if i % every == 0 {
            let s = sample(hub, i, started)?;
            if plan.verbose {
                print_sample("", &s);
            }
            samples.push(s);
        }
        if let Some(rate) = plan.rate {
            let due = started + Duration::from_secs_f64(i as f64 / rate);
            tokio::time::sleep_until(due.into()).await;
        }
        if let Some(routine_every) = plan.routine_every
            && i > 0
            && i % routine_every == 0
        {
            run_routine(&mut client, &open.sessions[0]).await?;
        }
        let session = &open.sessions[i % open.sessions.len()];
        let text = TURN_TEXTS[(i / open.sessions.len()) % TURN_TEXTS.len()].1;
        let turn_started = Instant::now();
        turn_approving(&mut client, session, text, &decided).await?;
        turn_times.push(turn_started.elapsed());
    }
    let last = sample(hub, plan.turns, started)?;
    if plan.verbose {
        print_sample("end", &last);
    }
    samples.push(last);
    Ok(MultiReport {
        idle: open.idle,
        samples,
        turn_times,
        events_seen: open.events_seen.load(Ordering::Relaxed),
        resubscribed: open.resubscribed.load(Ordering::Relaxed),
        approvals_decided: decided.load(Ordering::Relaxed),
        warmup: plan.warmup,
    })
}

/// Runs one turn of `text` on `session` and reads its stream to `TurnEnded`, approving every
/// question it asks (a scripted decision, through the stream's own attachment).
pub async fn turn_approving(
    client: &mut TauClient<Channel>,
    session: &str,
    text: &str,
    decided: &AtomicU64,
) -> SoakResult<()> {
    let mut stream = client
        .start_turn(pb::StartTurnRequest {
            session_id: session.to_owned(),
            text: text.to_owned(),
            channel: "soak".into(),
            idempotency_key: String::new(),
            new_session: false,
        })
        .await?
        .into_inner();
    let mut attachment = String::new();
    let mut ended = false;
    while let Some(message) = stream.message().await? {
        match message.kind {
            Some(pb::start_turn_response::Kind::Accepted(accepted)) => {
                attachment = accepted.attachment_id;
            }
            Some(pb::start_turn_response::Kind::Event(event)) => match event.kind {
                Some(pb::session_event::Kind::TurnEnded(_)) => ended = true,
                Some(pb::session_event::Kind::ApprovalRequested(asked)) => {
                    let approval_id = asked.approval.map(|a| a.approval_id).unwrap_or_default();
                    let outcome = client
                        .clone()
                        .decide_approval(pb::DecideApprovalRequest {
                            approval_id,
                            decision: pb::ApprovalDecision::Approved.into(),
                            attachment_id: attachment.clone(),
                        })
                        .await?
                        .into_inner();
                    if outcome.outcome != i32::from(pb::DecideOutcome::Applied) {
                        return Err(format!("an approval was not applied: {outcome:?}").into());
                    }
                    decided.fetch_add(1, Ordering::Relaxed);
                }
                _ => {}
            },
            None => {}
        }
    }
    if ended {
        Ok(())
    } else {
        Err("a turn's stream closed before TurnEnded".into())
    }
}

/// The routine the soak registers: a prompt on the first session's channel, every minute.
pub const ROUTINE: &str = "soak-routine";

async fn add_routine(client: &mut TauClient<Channel>, session: &str) -> SoakResult<()> {
    client
        .add_routine(pb::AddRoutineRequest {
            name: ROUTINE.into(),
            every: "1m".into(),
            action: Some(pb::add_routine_request::Action::Prompt(
                pb::RoutinePromptAction {
                    text: "what time is it".into(),
                    approval_channel: "soak".into(),
                },
            )),
            session_id: session.to_owned(),
            channel: "soak".into(),
            ..Default::default()
        })
        .await?;
    Ok(())
}

async fn run_routine(client: &mut TauClient<Channel>, session: &str) -> SoakResult<()> {
    client
        .run_routine(pb::RunRoutineRequest {
            name: ROUTINE.into(),
            session_id: session.to_owned(),
            channel: "soak".into(),
        })
        .await?;
    Ok(())
}

/// What closing the idle sessions gave back.
#[derive(Debug, Clone, Copy)]
pub struct IdleClose {
    /// After the last turn, with every subscriber gone.
    pub before: Sample,
    /// Once no session was open any more.
    pub after: Sample,
    /// How long the sessions took to close.
    pub waited: Duration,
    /// Messages the sessions' agents held, and their encoded size (about what they take in
    /// memory), summed over the sessions.
    pub held_messages: u64,
    pub held_bytes: u64,
    pub sessions: usize,
}

impl IdleClose {
    /// RSS given back per session, in KiB.
    pub fn freed_per_session_kib(&self) -> f64 {
        (self.before.rss_kib as f64 - self.after.rss_kib as f64) / self.sessions.max(1) as f64
    }

    /// The held messages' encoded size per session, in KiB.
    pub fn held_per_session_kib(&self) -> f64 {
        self.held_bytes as f64 / 1024.0 / self.sessions.max(1) as f64
    }
}

/// After the turns: drops the subscribers, measures what the sessions' agents hold, and waits
/// (at most `limit`) for the hub to close the idle sessions (`[hub] idle_session_close`),
/// sampling RSS before and after.
pub async fn idle_close(
    hub: &SoakHub,
    running: &mut Running,
    limit: Duration,
) -> SoakResult<IdleClose> {
    use prost::Message as _;
    running.drop_subscribers().await;
    let mut client = hub.client().await?;
    let mut held_messages = 0;
    let mut held_bytes = 0;
    for session in &running.sessions {
        let info = client
            .get_session(pb::GetSessionRequest {
                session_id: session.clone(),
                include_messages: false,
                page: None,
            })
            .await?
            .into_inner();
        if !info.open || info.in_memory_messages == 0 {
            continue;
        }
        let page = client
            .get_session(pb::GetSessionRequest {
                session_id: session.clone(),
                include_messages: true,
                page: Some(pb::MessagePage {
                    size: u32::try_from(info.in_memory_messages).unwrap_or(1000),
                    before_index: None,
                }),
            })
            .await?
            .into_inner();
        held_messages += page.messages.len() as u64;
        held_bytes += page
            .messages
            .iter()
            .map(|m| m.encoded_len() as u64)
            .sum::<u64>();
    }
    // Let the last turns' delayed writes and the runtime's threads settle.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = sample(hub, 0, running.started)?;
    let waiting = Instant::now();
    loop {
        let status = client
            .get_status(pb::GetStatusRequest {})
            .await?
            .into_inner();
        if status.sessions_open == 0 {
            break;
        }
        if waiting.elapsed() > limit {
            return Err(format!(
                "{} sessions were still open {} s after the last turn",
                status.sessions_open,
                limit.as_secs()
            )
            .into());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let waited = waiting.elapsed();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = sample(hub, 0, running.started)?;
    Ok(IdleClose {
        before,
        after,
        waited,
        held_messages,
        held_bytes,
        sessions: running.sessions.len(),
    })
}
