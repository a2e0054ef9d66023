//! Nanoseconds per classification for a 200-byte and a 4 KB message
//! (targets: ≤ 1 µs and ≤ 10 µs on the project's 2-core machine).

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use rebound::model::Outcome;
use rebound::policy::Policy;

// The sidecar's allocator, so that the figures are the binary's (see `rebound::memory`).
rebound::use_jemalloc!();

fn outcome(message: String) -> Outcome {
    Outcome { session_id: "bench".into(), tool: "search".into(), message, ..Default::default() }
}

fn bench(c: &mut Criterion) {
    let policy = Policy::default();
    // A real requests/urllib3 message, padded to 200 bytes.
    let base = "HTTPSConnectionPool(host='api.example.com', port=443): Max retries exceeded with url: /v1/search?q=rust (Caused by NewConnectionError('<urllib3.connection.HTTPSConnection object at 0x7f>: Failed to establish a new connection'))";
    let short = outcome(base.chars().take(200).collect());
    let mut long_text = String::new();
    while long_text.len() < 4096 {
        long_text.push_str("  File \"/usr/lib/python3.11/site-packages/httpx/_transports/default.py\", line 69, in map_httpcore_exceptions\n");
    }
    long_text.truncate(4000);
    long_text.push_str("\nhttpx.ConnectError: [Errno 111] Connection refused");
    let long = outcome(long_text);
    let mut group = c.benchmark_group("classify");
    group.bench_function("200B message", |b| b.iter(|| policy.classifier.classify(black_box(&short))));
    group.bench_function("4KB message", |b| b.iter(|| policy.classifier.classify(black_box(&long))));
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
