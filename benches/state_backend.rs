//! Report throughput with tool breakers and budgets shared through Redis,
//! against the in-memory backend, through the real gRPC server on loopback
//! (target: a ratio of at least 0.9, since no Report waits on Redis).
//! Needs Debian's redis-server. Run: `cargo bench --bench state_backend`.

use rebound::clock::SystemClock;
use rebound::config::{Backend, Config};
use rebound::engine::{Engine, EngineSettings};
use rebound::listener::Listener;
use rebound::metrics::Metrics;
use rebound::pb;
use rebound::policy::Policy;
use rebound::server;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

// The sidecar's allocator, so that the figures are the binary's (see `rebound::memory`).
rebound::use_jemalloc!();

const CLIENTS: usize = 8;
const SECONDS: u64 = 3;
const ROUNDS: usize = 3;

async fn throughput(config: Config) -> f64 {
    rebound::metrics::install();
    let policy = Policy::from_config(&config).expect("valid config");
    let engine = Arc::new(Engine::new(
        policy,
        EngineSettings::from_config(&config, 1),
        Arc::new(SystemClock::new()),
        Arc::new(Metrics::new(200)),
    ));
    let sync = (config.state.backend == Backend::Redis).then(|| {
        let client = rebound::shared::client(&config.state).expect("a usable Redis config");
        tokio::spawn(rebound::shared::run(engine.clone(), config.state.clone(), client))
    });
    let listener = Listener::bind("127.0.0.1:0").await.unwrap();
    let addr = format!("http://{}", listener.address());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server_config = config.server.clone();
    let server = tokio::spawn(async move {
        server::run(listener, engine, &server_config, async {
            let _ = stopped.await;
        })
        .await
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let done = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs(SECONDS);
    let mut tasks = Vec::new();
    for c in 0..CLIENTS {
        let addr = addr.clone();
        let done = done.clone();
        tasks.push(tokio::spawn(async move {
            let mut client = pb::rebound_client::ReboundClient::connect(addr).await.unwrap();
            let mut i = 0u64;
            while Instant::now() < deadline {
                // Mostly successes, some unhealthy failures, over 50 tools: the shared path is exercised.
                let tool = format!("tool-{}", i % 50);
                let outcome = pb::Outcome {
                    session_id: format!("s-{c}-{}", i % 100),
                    tool,
                    ok: !i.is_multiple_of(4),
                    http_status: if i.is_multiple_of(4) { 503 } else { 0 },
                    message: if i.is_multiple_of(4) { "503 Service Unavailable".into() } else { String::new() },
                    ..Default::default()
                };
                client.report(outcome).await.unwrap();
                done.fetch_add(1, Ordering::Relaxed);
                i += 1;
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let _ = stop.send(());
    let _ = server.await;
    if let Some(sync) = sync {
        sync.abort();
    }
    done.load(Ordering::Relaxed) as f64 / SECONDS as f64
}

fn main() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut redis = std::process::Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("redis-server (Debian: apt-get install redis-server)");
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        std::thread::sleep(Duration::from_millis(20));
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let mut shared = Config::default();
    shared.state.backend = Backend::Redis;
    shared.state.redis_url = format!("redis://127.0.0.1:{port}");
    // Alternate the two and take medians: the machine is shared and noisy.
    let (mut memories, mut redises) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        memories.push(runtime.block_on(throughput(Config::default())));
        redises.push(runtime.block_on(throughput(shared.clone())));
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (memory, with_redis) = (median(&mut memories), median(&mut redises));
    let _ = redis.kill();
    let _ = redis.wait();
    println!("Report throughput, {CLIENTS} clients over loopback, median of {ROUNDS} alternating runs of {SECONDS} s:");
    println!("  memory backend: {memory:>10.0} reports/s");
    println!("  redis backend:  {with_redis:>10.0} reports/s");
    println!("  ratio redis/memory: {:.3} (target >= 0.9)", with_redis / memory);
}
