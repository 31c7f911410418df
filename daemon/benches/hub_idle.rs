//! Benchmark of the idle hub (`cargo bench -p taud --bench hub_idle`): starts the real `taud`
//! against a temporary installation and reports its start-up time, idle RSS (VmRSS from
//! /proc/<pid>/status; budget ≤ 20 MiB), CPU used while idle, `/health` latency (p50/p99, a new
//! connection per request as `tau doctor` does, and on one keep-alive connection), `GetStatus`
//! latency over the Unix socket, and the time a SIGTERM takes to stop it.
//!
//! The idle RSS is also split into the hub's own (anonymous) memory, its executable's pages and
//! the shared libraries' (`resident/mod.rs`). `TAU_BENCH_TAUD=<path>` runs another `taud`.
//!
//! Run it alone on a quiet machine; it uses only loopback and a temporary directory.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod resident;

const REQUESTS: usize = 2000;
const IDLE: Duration = Duration::from_secs(3);
const DEADLINE: Duration = Duration::from_secs(20);

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn main() -> anyhow::Result<()> {
    let tmp = tempfile::tempdir()?;
    let home = tmp.path().join("home");
    std::fs::create_dir_all(&home)?;
    std::fs::create_dir_all(tmp.path().join("user"))?;
    std::fs::write(home.join("tau.toml"), "[hub]\nheartbeat_seconds = 30\n")?;
    // An installation with a tau.toml needs its persona, or taud refuses to start (exit 78).
    std::fs::create_dir_all(home.join("persona"))?;
    std::fs::write(
        home.join("persona/persona.md"),
        include_str!("../../persona/persona.md"),
    )?;
    let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let data = tmp.path().join("data");

    let taud = resident::taud_binary(env!("CARGO_BIN_EXE_taud"));
    let started = Instant::now();
    let child = Command::new(&taud)
        .env_clear()
        .env("HOME", tmp.path().join("user"))
        .env("TAU_HOME", &home)
        .env("TAU_DATA_DIR", &data)
        .env("TAU_HUB_PORT", port.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let mut hub = Killed(child);
    let pid = hub.0.id();
    let socket = data.join("hub/taud.sock");
    poll("/health", || {
        (socket.exists() && health(port).is_ok()).then_some(())
    })
    .map_err(|e| match hub.0.try_wait() {
        Ok(Some(status)) => anyhow::anyhow!("taud exited ({status}) before it answered"),
        _ => e,
    })?;
    let ready = started.elapsed();

    let rss_start = vm_rss_kib(pid);
    let cpu_before = cpu_ticks(pid);
    std::thread::sleep(IDLE);
    let cpu_after = cpu_ticks(pid);
    let rss_idle = vm_rss_kib(pid);
    let idle_split = resident::Resident::of(pid, &taud);

    let fresh = latencies(REQUESTS, || health(port).map(|_| ()))?;
    let mut keep = TcpStream::connect(("127.0.0.1", port))?;
    let mut reader = BufReader::new(keep.try_clone()?);
    let kept = latencies(REQUESTS, || keep_alive_health(&mut keep, &mut reader))?;
    let grpc = grpc_latencies(&socket)?;
    let rss_loaded = vm_rss_kib(pid);

    let stop_started = Instant::now();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(pid)?),
        nix::sys::signal::Signal::SIGTERM,
    )?;
    let child = &mut hub.0;
    let status = poll("taud to exit", || child.try_wait().ok().flatten())?;
    let stop = stop_started.elapsed();

    let mib = |kib: Option<u64>| {
        kib.map_or_else(
            || "n/a".to_owned(),
            |k| format!("{:.1} MiB", k as f64 / 1024.0),
        )
    };
    println!(
        "taud idle benchmark ({} build)",
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        }
    );
    println!("  binary: {}", resident::describe(&taud));
    println!("  ready (spawn → /health answers):   {:.1} ms", ms(ready));
    println!("  RSS after start:                   {}", mib(rss_start));
    println!(
        "  RSS after {}s idle:                 {}",
        IDLE.as_secs(),
        mib(rss_idle)
    );
    if let Some(split) = idle_split {
        println!("    = {}", split.line());
    }
    println!(
        "  RSS after {} requests:           {}",
        REQUESTS * 3,
        mib(rss_loaded)
    );
    match (cpu_before, cpu_after) {
        (Some(a), Some(b)) => println!(
            "  CPU while idle {}s:                 {} ticks ({} per second)",
            IDLE.as_secs(),
            b - a,
            ticks_per_second()
        ),
        _ => println!("  CPU while idle:                    n/a"),
    }
    report("GET /health, new connection", &fresh);
    report("GET /health, keep-alive", &kept);
    report("GetStatus over the Unix socket", &grpc);
    println!(
        "  SIGTERM → exit:                    {:.1} ms (exit code {:?})",
        ms(stop),
        status.code()
    );
    Ok(())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn poll<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> anyhow::Result<T> {
    let end = Instant::now() + DEADLINE;
    loop {
        if let Some(v) = f() {
            return Ok(v);
        }
        if Instant::now() > end {
            anyhow::bail!("timed out waiting for {what}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn health(port: u16) -> std::io::Result<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    if out.starts_with("HTTP/1.1 200") {
        Ok(out)
    } else {
        Err(std::io::Error::other(out))
    }
}

fn keep_alive_health(s: &mut TcpStream, r: &mut BufReader<TcpStream>) -> std::io::Result<()> {
    s.write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")?;
    let mut length = 0usize;
    let mut line = String::new();
    loop {
        line.clear();
        r.read_line(&mut line)?;
        if line == "\r\n" || line.is_empty() {
            break;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().map_err(std::io::Error::other)?;
        }
    }
    let mut body = vec![0; length];
    r.read_exact(&mut body)?;
    Ok(())
}

fn latencies(
    n: usize,
    mut f: impl FnMut() -> std::io::Result<()>,
) -> anyhow::Result<Vec<Duration>> {
    for _ in 0..50 {
        f()?;
    }
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        f()?;
        out.push(t.elapsed());
    }
    Ok(out)
}

fn grpc_latencies(socket: &std::path::Path) -> anyhow::Result<Vec<Duration>> {
    use tau_api::proto::v1::{GetStatusRequest, tau_client::TauClient};
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let channel = tau_client::connect::unix_channel(socket, Duration::from_secs(10)).await?;
        let mut client = TauClient::new(channel);
        for _ in 0..50 {
            client.get_status(GetStatusRequest {}).await?;
        }
        let mut out = Vec::with_capacity(REQUESTS);
        for _ in 0..REQUESTS {
            let t = Instant::now();
            client.get_status(GetStatusRequest {}).await?;
            out.push(t.elapsed());
        }
        Ok(out)
    })
}

fn report(name: &str, samples: &[Duration]) {
    let mut sorted = samples.to_vec();
    sorted.sort();
    let at = |q: f64| {
        let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
        sorted.get(i).copied().unwrap_or_default()
    };
    println!(
        "  {name:<34} p50 {:.3} ms, p99 {:.3} ms ({} requests)",
        ms(at(0.50)),
        ms(at(0.99)),
        sorted.len()
    );
}

fn vm_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// utime + stime of the process, in clock ticks.
fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    // After the name: state is field 3 of the whole line, utime 14 and stime 15.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

fn ticks_per_second() -> i64 {
    nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .unwrap_or(100)
}
