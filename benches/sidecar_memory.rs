//! The real sidecar's memory, read from /proc/PID/status (VmRSS) while this
//! program drives it over one pipelined `Observe` stream:
//! - how long the binary takes from its start to its ready line (its config,
//!   rules and patterns compiled, its sockets bound), and idle RSS right after;
//! - bytes per session: `[sessions] capacity = 250000`, 100,000 sessions with
//!   3 stored errors each (3 real messages made distinct per session, 3 tools),
//!   each with a call_id as the clients send them, RSS after minus RSS before (a
//!   warmed-up connection), divided by 100,000 (target ≤ 1 KiB); then 100,000 more
//!   without call_ids, the 3 stored errors alone; beside each, the store's own
//!   estimate of the same sessions (`rebound_sessions_bytes`, what
//!   `[sessions] max_bytes` counts);
//! - RSS held flat past the cap: `capacity = 10000`, RSS after 10,000 sessions
//!   and after 100,000 (target: at most 10 % more); readings up to 300,000
//!   show whether any growth levels off.
//!
//! Run: `cargo bench --bench sidecar_memory` (the binary is $REBOUND_BIN, by
//! default the one cargo built beside this bench). Linux only. The lines
//! starting `@result` are for `bench/run`.

#[path = "support/client.rs"]
mod client;
#[path = "support/workload.rs"]
mod workload;

use anyhow::{bail, Context as _};
use client::Progress;
use rebound::pb;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

const SESSIONS: u64 = 100_000;
const ERRORS_PER_SESSION: u64 = 3;
/// Sessions reported before the "before" reading: connection buffers and caches warm.
const WARM_SESSIONS: u64 = 1_000;
/// How long a phase may take before the run fails (a slow machine, not a hang).
const PHASE_LIMIT: Duration = Duration::from_secs(300);
/// Waits before a reading, past the sidecar's metric upkeep (it drains the histogram
/// samples taken under load every 100 ms) and its allocator's background thread (it gives
/// back pages freed for a second), so every reading is taken at rest. With half a second,
/// some readings came before them and held up to a second's samples and freed pages:
/// +13-18 % past the cap, not +6 % (measured with glibc and `malloc_trim` every second).
const SETTLE: Duration = Duration::from_millis(2500);

/// A sidecar child process, stopped on drop.
struct Sidecar {
    child: Child,
    grpc: String,
    metrics: String,
    /// From the start of the process to its ready line.
    ready_after: Duration,
    _dir: tempfile::TempDir,
}

impl Sidecar {
    fn start(capacity: usize) -> anyhow::Result<Sidecar> {
        let bin = std::env::var("REBOUND_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_rebound").to_string());
        let dir = tempfile::tempdir()?;
        let config = dir.path().join("rebound.toml");
        std::fs::write(&config, format!("[sessions]\ncapacity = {capacity}\n"))?;
        let started = Instant::now();
        let mut child = Command::new(&bin)
            .args(["serve", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--config"])
            .arg(&config)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("starting {bin}"))?;
        // The one stdout line, read on a thread so a silent child cannot hang us.
        let stdout = child.stdout.take().expect("piped");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(line) => line,
            Err(_) => {
                let _ = child.kill();
                bail!("{bin} printed no ready line within 30 s");
            }
        };
        let ready: serde_json::Value = serde_json::from_str(&line).with_context(|| format!("ready line {line:?}"))?;
        let field = |k: &str| ready[k].as_str().map(str::to_string).with_context(|| format!("no {k} in {line:?}"));
        let ready_after = started.elapsed();
        Ok(Sidecar { grpc: field("grpc")?, metrics: field("metrics")?, ready_after, child, _dir: dir })
    }

    /// VmRSS in bytes.
    fn rss(&self) -> anyhow::Result<u64> {
        std::thread::sleep(SETTLE);
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))?;
        let kb = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .context("no VmRSS in /proc/PID/status")?;
        Ok(kb * 1024)
    }

    /// A gauge's value from /metrics (plain HTTP/1.0 GET).
    fn gauge(&self, name: &str) -> anyhow::Result<f64> {
        let mut conn = std::net::TcpStream::connect(&self.metrics)?;
        conn.set_read_timeout(Some(Duration::from_secs(10)))?;
        write!(conn, "GET /metrics HTTP/1.0\r\nHost: {}\r\n\r\n", self.metrics)?;
        let mut body = String::new();
        conn.read_to_string(&mut body)?;
        body.lines()
            .find_map(|l| l.strip_prefix(name).and_then(|rest| rest.trim().parse().ok()))
            .with_context(|| format!("no {name} in /metrics"))
    }
}

impl Drop for Sidecar {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The j-th failure of session `s`: three real messages, each made distinct per session, with a
/// call_id when `call_ids` (the sidecar then remembers each verdict for a repeat of the call).
fn failure(run: &str, s: u64, j: u64, call_ids: bool) -> pb::Outcome {
    let (tool, message) = workload::stored_error(s, j);
    pb::Outcome {
        session_id: format!("{run}-{s}"),
        call_id: if call_ids { format!("call-{j}") } else { String::new() },
        tool: tool.into(),
        ok: false,
        message,
        ..Default::default()
    }
}

/// Reports `ERRORS_PER_SESSION` failures for sessions `from..to` on one pipelined stream.
async fn fill(sidecar: &Sidecar, run: &'static str, from: u64, to: u64, call_ids: bool) -> anyhow::Result<()> {
    let channel = client::connect(&sidecar.grpc).await?;
    let count = (to - from) * ERRORS_PER_SESSION;
    let outcome = move |i: u64| failure(run, from + i / ERRORS_PER_SESSION, i % ERRORS_PER_SESSION, call_ids);
    let sent = client::pipeline(channel, count, outcome, Arc::new(Progress::default()), PHASE_LIMIT).await?;
    if sent != count {
        bail!("{sent} of {count} outcomes sent");
    }
    Ok(())
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1 << 20) as f64
}

fn main() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;

    let started = Instant::now();
    let sidecar = Sidecar::start(250_000)?;
    let ready_ms = sidecar.ready_after.as_secs_f64() * 1000.0;
    let idle = sidecar.rss()?;
    runtime.block_on(fill(&sidecar, "warm", 0, WARM_SESSIONS, true))?;
    let before = sidecar.rss()?;
    // What the store estimates for its byte budget (`[sessions] max_bytes`), beside the RSS.
    let estimate_before = sidecar.gauge("rebound_sessions_bytes")?;
    runtime.block_on(fill(&sidecar, "run", 0, SESSIONS, true))?;
    let after = sidecar.rss()?;
    let estimate_after = sidecar.gauge("rebound_sessions_bytes")?;
    // Then as many again without call_ids: the 3 stored errors alone, no verdicts remembered.
    runtime.block_on(fill(&sidecar, "plain", 0, SESSIONS, false))?;
    let after_plain = sidecar.rss()?;
    let estimate_plain = sidecar.gauge("rebound_sessions_bytes")?;
    let active = sidecar.gauge("rebound_sessions_active")?;
    if active < (2 * SESSIONS + WARM_SESSIONS) as f64 {
        bail!("only {active} sessions active after reporting {} (evicted or expired?)", 2 * SESSIONS + WARM_SESSIONS);
    }
    let per_session = after.saturating_sub(before) as f64 / SESSIONS as f64;
    let per_session_plain = after_plain.saturating_sub(after) as f64 / SESSIONS as f64;
    let estimate = (estimate_after - estimate_before) / SESSIONS as f64;
    let estimate_plain = (estimate_plain - estimate_after) / SESSIONS as f64;
    drop(sidecar);
    println!("Sidecar memory (VmRSS), capacity 250,000:");
    println!("  start to ready: {ready_ms:.1} ms");
    println!("  idle: {:.1} MiB; before: {:.1} MiB; after {SESSIONS} sessions x {ERRORS_PER_SESSION} errors: {:.1} MiB; after {SESSIONS} more without call_ids: {:.1} MiB ({active} active)", mib(idle), mib(before), mib(after), mib(after_plain));
    println!(
        "  per session: {per_session:.0} bytes with call_ids, {per_session_plain:.0} bytes without (target <= 1024)"
    );
    println!(
        "  the store's estimate (rebound_sessions_bytes) per session: {estimate:.0} bytes with call_ids, {estimate_plain:.0} without: RSS {:+.0} % and {:+.0} % above it",
        (per_session / estimate - 1.0) * 100.0,
        (per_session_plain / estimate_plain - 1.0) * 100.0
    );
    println!("@result start_to_ready_ms {ready_ms:.1}");
    println!("@result rss_idle_bytes {idle}");
    println!("@result bytes_per_session {per_session:.0}");
    println!("@result bytes_per_session_no_call_ids {per_session_plain:.0}");
    println!("@result estimate_per_session {estimate:.0}");
    println!("@result estimate_per_session_no_call_ids {estimate_plain:.0}");

    let cap = 10_000;
    let sidecar = Sidecar::start(cap as usize)?;
    runtime.block_on(fill(&sidecar, "cap", 0, cap, true))?;
    let at_cap = sidecar.rss()?;
    // Readings on the way show whether growth past the cap levels off (allocator) or keeps on (a leak).
    let mut done = cap;
    let mut past_cap = at_cap;
    for upto in [2 * cap, 5 * cap, SESSIONS, 2 * SESSIONS, 3 * SESSIONS] {
        runtime.block_on(fill(&sidecar, "cap", done, upto, true))?;
        done = upto;
        let rss = sidecar.rss()?;
        println!("  capacity {cap}: RSS after {upto} sessions: {:.1} MiB", mib(rss));
        if upto == SESSIONS {
            past_cap = rss;
        }
    }
    let last = sidecar.rss()?;
    let active = sidecar.gauge("rebound_sessions_active")?;
    // The cap holds per lock shard (capacity / shards each, rounded up), so the total may pass it by a few.
    if active > cap as f64 * 1.05 {
        bail!("{active} sessions active with a capacity of {cap}");
    }
    drop(sidecar);
    let growth = past_cap as f64 / at_cap as f64 - 1.0;
    println!("Capacity {cap}: RSS after {cap} sessions {:.1} MiB, after {SESSIONS} sessions {:.1} MiB ({active} active): {:+.1} % (target <= +10 %)", mib(at_cap), mib(past_cap), growth * 100.0);
    println!("@result rss_at_cap_bytes {at_cap}");
    println!("@result rss_past_cap_bytes {past_cap}");
    println!("@result rss_300k_bytes {last}");
    println!("(took {:.0} s)", started.elapsed().as_secs_f64());
    Ok(())
}
