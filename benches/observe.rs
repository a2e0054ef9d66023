//! `Observe` throughput: one stream, pipelined (outcomes sent continuously,
//! verdicts read concurrently), over loopback TCP and over a Unix socket,
//! against the real Rebound service (`server::run`, default config, in this
//! process) and against a no-op echo of the same service (`support/echo.rs`),
//! measured in the same run. Each transport gets `ROUNDS` rounds, each a
//! window of the service and one of the echo, in turns (so a spell of load
//! from a neighbour falls on both); prints each round, then the median
//! outcomes/s of each and the median of the rounds' ratios (targets:
//! ≥ 500,000/s and ≥ 30 % of the echo). The server (either one) runs on a
//! runtime of its own built as the sidecar builds its (`sidecar::runtime`:
//! `[server] worker_threads`, one by default), the client on another, as an
//! agent and its sidecar are two processes.
//!
//! Run: `cargo bench --bench observe` (`REBOUND_BENCH_SECONDS` sets the
//! measurement window, default 5; `REBOUND_BENCH_ONLY=rebound` or `=echo`
//! measures one side, to profile it). The lines starting `@result` are for
//! `bench/run`.

#[path = "support/client.rs"]
mod client;
#[path = "support/echo.rs"]
mod echo;
#[path = "support/workload.rs"]
mod workload;

use client::Progress;
use rebound::clock::SystemClock;
use rebound::config::Config;
use rebound::engine::{Engine, EngineSettings};
use rebound::listener::Listener;
use rebound::metrics::Metrics;
use rebound::policy::Policy;
use rebound::server;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::runtime::Handle;

// The sidecar's allocator, so that the figures are the binary's (see `rebound::memory`).
rebound::use_jemalloc!();

/// Unmeasured time first: connections, allocator and caches settle.
const WARMUP: Duration = Duration::from_secs(1);
/// Bounds a run whatever the window.
const MAX_OUTCOMES: u64 = 200_000_000;
/// Rounds per transport. One round's ratio read anywhere from 21 % to 41 % on this
/// 2-core machine while other work came and went; the median of three varies less.
const ROUNDS: usize = 3;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Target {
    Rebound = 0,
    Echo = 1,
}

/// Starts `target` on `address`, on the `server` runtime; returns the address to dial and a stop handle.
async fn start(
    server: &Handle,
    target: Target,
    address: &str,
) -> anyhow::Result<(String, tokio::sync::oneshot::Sender<()>)> {
    // Bound on the server's runtime, so that its accepts are that runtime's work too.
    let listener = {
        let address = address.to_string();
        server.spawn(async move { Listener::bind(&address).await }).await??
    };
    let dial = listener.address();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let shutdown = async {
        let _ = stopped.await;
    };
    match target {
        Target::Rebound => {
            // REBOUND_* variables override the defaults as they do for the sidecar (to try a [server] setting).
            let config = Config::default().with_env(std::env::vars())?;
            let engine = Arc::new(Engine::new(
                Policy::from_config(&config)?,
                EngineSettings::from_config(&config, 1),
                Arc::new(SystemClock::new()),
                Arc::new(Metrics::new(config.metrics.tool_label_cap)),
            ));
            engine.warm_up();
            server.spawn(async move { server::run(listener, engine, &config.server, shutdown).await });
        }
        Target::Echo => {
            server.spawn(echo::serve(listener, shutdown));
        }
    }
    Ok((dial, stop))
}

/// Outcomes per second over the window, after the warm-up, on one pipelined stream.
async fn throughput(
    server: &Handle,
    target: Target,
    address: &str,
    stream: u64,
    window: Duration,
) -> anyhow::Result<f64> {
    let (dial, stop) = start(server, target, address).await?;
    let channel = client::connect(&dial).await?;
    let progress = Arc::new(Progress::default());
    let limit = WARMUP + window + Duration::from_secs(60);
    let run = tokio::spawn(client::pipeline(
        channel,
        MAX_OUTCOMES,
        move |i| workload::outcome(stream, i),
        progress.clone(),
        limit,
    ));
    tokio::time::sleep(WARMUP).await;
    let (c0, t0, cpu0) = (progress.received.load(Ordering::Relaxed), Instant::now(), cpu_seconds());
    tokio::time::sleep(window).await;
    let (c1, t1, cpu1) = (progress.received.load(Ordering::Relaxed), Instant::now(), cpu_seconds());
    progress.stop.store(true, Ordering::Relaxed);
    let sent = run.await??;
    let _ = stop.send(());
    let rate = (c1 - c0) as f64 / (t1 - t0).as_secs_f64();
    // CPU per outcome (client and server together) varies less than the rate on a busy machine.
    let cpu = (cpu1 - cpu0) / (c1 - c0).max(1) as f64 * 1e6;
    eprintln!("  {target:?} on {dial}: {sent} outcomes, every one answered; {rate:.0}/s, {cpu:.2} µs CPU each");
    Ok(rate)
}

/// The middle value (NaN when there is none, or when a side was not measured).
fn median(values: impl Iterator<Item = f64>) -> f64 {
    let mut values: Vec<f64> = values.collect();
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

/// This process's CPU time (user and system, all threads), from /proc/self/stat; 0 where there is none.
fn cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // The fields after the command name (which may hold spaces) end with ')'; utime and stime are 14 and 15.
    let fields: Vec<&str> = stat.rsplit_once(')').map_or("", |(_, rest)| rest).split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // Field n is at index n - 3 after the name; the kernel's USER_HZ is 100 on every Linux target.
    (ticks(11) + ticks(12)) / 100.0
}

fn main() -> anyhow::Result<()> {
    let seconds: u64 = std::env::var("REBOUND_BENCH_SECONDS").ok().and_then(|s| s.parse().ok()).unwrap_or(5);
    let window = Duration::from_secs(seconds.clamp(1, 60));
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let server_runtime = rebound::sidecar::runtime(&Config::default().with_env(std::env::vars())?.server)?;
    // As in the sidecar: the Prometheus recorder is installed, so metrics cost what they cost there.
    rebound::metrics::install();
    let dir = tempfile::tempdir()?;
    println!("Observe throughput: one pipelined stream, {seconds} s windows after {}s warm-up", WARMUP.as_secs());
    println!("{:<8} {:>14} {:>14} {:>8}", "via", "rebound/s", "echo/s", "ratio");
    let only = std::env::var("REBOUND_BENCH_ONLY").unwrap_or_default().to_ascii_lowercase();
    let mut stream = 0;
    for via in ["tcp", "unix"] {
        let mut rounds = Vec::with_capacity(ROUNDS);
        for round in 0..ROUNDS {
            // Turns alternate who goes first, so neither always runs on a machine the other warmed.
            let order = if round % 2 == 0 { [Target::Rebound, Target::Echo] } else { [Target::Echo, Target::Rebound] };
            let mut rates = [f64::NAN; 2];
            for target in order {
                if only.is_empty() || format!("{target:?}").eq_ignore_ascii_case(&only) {
                    stream += 1;
                    // A socket path of its own each time, so a server still stopping never shares a
                    // path with the next one.
                    let address = match via {
                        "tcp" => "127.0.0.1:0".to_string(),
                        _ => format!("unix:{}", dir.path().join(format!("observe-{stream}.sock")).display()),
                    };
                    rates[target as usize] =
                        runtime.block_on(throughput(server_runtime.handle(), target, &address, stream, window))?;
                }
            }
            let [rebound, echo] = rates;
            println!("{:<8} {rebound:>14.0} {echo:>14.0} {:>8.3}", format!("{via} {}", round + 1), rebound / echo);
            rounds.push(rates);
        }
        let rebound = median(rounds.iter().map(|r| r[0]));
        let echo = median(rounds.iter().map(|r| r[1]));
        let ratio = median(rounds.iter().map(|r| r[0] / r[1]));
        println!("{:<8} {rebound:>14.0} {echo:>14.0} {ratio:>8.3}", format!("{via} med"));
        println!("@result observe_{via}_rebound {rebound:.0}");
        println!("@result observe_{via}_echo {echo:.0}");
        println!("@result observe_{via}_ratio {ratio:.4}");
    }
    runtime.shutdown_timeout(Duration::from_secs(5));
    server_runtime.shutdown_timeout(Duration::from_secs(5));
    Ok(())
}
