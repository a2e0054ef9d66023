//! Snippet size against the raw error over the trace set (tests/data/traces/), in
//! o200k_base tokens (target: an average ratio ≤ 0.15, read as the token-weighted
//! average: all snippet tokens over all raw tokens; the per-trace mean is printed
//! beside it, and is higher because a short error still gets the block's fixed
//! frame), and the time to compact a 4 KB trace (target ≤ 20 µs).
//!
//! The snippets are the ones `Engine::report` returns (the `<error>` block, its
//! location line and the recovery instruction), for each file given as the
//! outcome's `detail`. `SHOW=1 cargo bench --bench snippets` prints each one.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use rebound::clock::SystemClock;
use rebound::compact::{digest, SnippetPolicy};
use rebound::config::Config;
use rebound::engine::{Engine, EngineSettings};
use rebound::metrics::Metrics;
use rebound::model::Outcome;
use rebound::policy::Policy;
use rebound::templates::Tokenizer;
use std::path::PathBuf;
use std::sync::Arc;

// The sidecar's allocator, so that the figures are the binary's (see `rebound::memory`).
rebound::use_jemalloc!();

/// A trace this long (in tokens) is one an agent would not want in its prompt whole.
const LONG_TOKENS: u32 = 400;

fn traces() -> Vec<(PathBuf, String)> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/traces");
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .expect("tests/data/traces")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "txt"))
        .collect();
    files.sort();
    files.into_iter().map(|p| (p.clone(), std::fs::read_to_string(&p).expect("a UTF-8 trace"))).collect()
}

fn bench(c: &mut Criterion) {
    let config = Config::default();
    let engine = Engine::new(
        Policy::from_config(&config).expect("the default config is valid"),
        EngineSettings::from_config(&config, 1),
        Arc::new(SystemClock::new()),
        Arc::new(Metrics::new(100)),
    );
    let tokenizer = Tokenizer::by_name("o200k_base").expect("o200k_base ships with tiktoken-rs");
    let show = std::env::var_os("SHOW").is_some();
    let traces = traces();
    let (mut raw, mut compacted, mut ratios) = (0u64, 0u64, Vec::new());
    // The same over the longer inputs only: what compaction is for, shown beside the whole set.
    let (mut long_raw, mut long_compacted, mut long_count) = (0u64, 0u64, 0usize);
    for (i, (path, trace)) in traces.iter().enumerate() {
        let outcome = Outcome {
            session_id: format!("bench-{i}"),
            // A tool of its own per trace: one tool failing 48 times would open its breaker.
            tool: format!("tool_{i}"),
            detail: trace.clone(),
            ..Outcome::default()
        };
        let snippet = engine.report(&outcome).expect("a valid outcome").snippet;
        let (r, s) = (tokenizer.count(trace), tokenizer.count(&snippet));
        if show {
            println!("== {} ({s}/{r} tokens)\n{snippet}\n", path.file_name().unwrap_or_default().to_string_lossy());
        }
        raw += u64::from(r);
        compacted += u64::from(s);
        if r >= LONG_TOKENS {
            (long_raw, long_compacted, long_count) =
                (long_raw + u64::from(r), long_compacted + u64::from(s), long_count + 1);
        }
        ratios.push(f64::from(s) / f64::from(r));
    }
    let mean = ratios.iter().sum::<f64>() / ratios.len() as f64;
    println!(
        "snippet/raw tokens over {} traces: total {compacted}/{raw} = {:.4} (target <= 0.15), per-trace mean {mean:.3}",
        traces.len(),
        compacted as f64 / raw as f64
    );
    println!(
        "  over the {long_count} traces of {LONG_TOKENS} tokens or more: total {long_compacted}/{long_raw} = {:.3}",
        long_compacted as f64 / long_raw.max(1) as f64
    );
    // A 4 KB trace: the real Python traceback in the set whose size is nearest 4096 bytes.
    let (path, four_kb) = traces
        .iter()
        .filter(|(_, t)| t.contains("Traceback (most recent call last):"))
        .min_by_key(|(_, t)| t.len().abs_diff(4096))
        .expect("a Python traceback in the set");
    println!("4 KB trace: {} ({} bytes)", path.file_name().unwrap_or_default().to_string_lossy(), four_kb.len());
    let policy = SnippetPolicy::default();
    c.bench_function("compact a 4 KB trace", |b| b.iter(|| digest("", "", black_box(four_kb), &policy)));
}

criterion_group!(benches, bench);
criterion_main!(benches);
