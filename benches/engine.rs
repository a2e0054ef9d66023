//! The engine alone: nanoseconds per outcome through `Engine::report_owned` (classify,
//! breakers, backoff, snippet) for a 200-byte message and a 4 KB trace
//! (targets ≤ 1 µs and ≤ 10 µs). 1,000 agent runs are in flight at a time, each
//! 16 outcomes long and then ended (EndSession), as a busy sidecar's would be; no
//! gRPC, no network. Each iteration also builds its outcome (the strings a decoded
//! request would hold) and hands it over, as the server does.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use rebound::clock::SystemClock;
use rebound::config::Config;
use rebound::engine::{Engine, EngineSettings};
use rebound::metrics::Metrics;
use rebound::model::Outcome;
use rebound::policy::Policy;
use std::sync::Arc;

// The sidecar's allocator, so that the figures are the binary's (see `rebound::memory`).
rebound::use_jemalloc!();

fn engine() -> Engine {
    let config = Config::default();
    Engine::new(
        Policy::from_config(&config).expect("the default config is valid"),
        EngineSettings::from_config(&config, 1),
        Arc::new(SystemClock::new()),
        Arc::new(Metrics::new(200)),
    )
}

fn bench(c: &mut Criterion) {
    // A real requests/urllib3 message, cut to 200 bytes.
    let message = "HTTPSConnectionPool(host='api.example.com', port=443): Max retries exceeded with url: /v1/search?q=rust (Caused by NewConnectionError('<urllib3.connection.HTTPSConnection object at 0x7f>: Failed to establish a new connection'))";
    let short: String = message.chars().take(200).collect();
    // The real Python traceback of the trace set nearest 4 KB.
    let trace = include_str!("../tests/data/traces/py-requests-timeout.txt");
    let mut group = c.benchmark_group("engine");
    for (name, message, detail) in [("200B message", short.as_str(), ""), ("4KB trace", "", trace)] {
        let engine = engine();
        let mut i = 0u64;
        group.bench_function(name, |b| {
            b.iter(|| {
                i += 1;
                // The run in `slot` is at `step`; a new generation of runs starts every 16 steps.
                let (slot, step) = (i % 1000, i / 1000);
                let outcome = Outcome {
                    session_id: format!("s-{}-{slot}", step / 16),
                    tool: "search".into(),
                    message: message.into(),
                    detail: detail.into(),
                    // Every fourth call of each run succeeds (shifted per run), so runs are not
                    // stopped by their breakers: their failures are all judged in full.
                    ok: (step + slot).is_multiple_of(4),
                    ..Outcome::default()
                };
                let verdict = engine.report_owned(black_box(outcome)).expect("a valid outcome");
                // A run ends after its 16th call, as an agent ends its session: sessions
                // do not pile up to the store's cap.
                if step % 16 == 15 {
                    black_box(engine.end_session(&format!("s-{}-{slot}", step / 16)).expect("a valid id"));
                }
                black_box(verdict)
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
