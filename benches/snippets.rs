//! Snippet size against the raw error over the trace set (tests/data/traces/), in
//! o200k_base tokens (target: an average ratio ≤ 0.15), and the time to compact
//! a 4 KB trace (target ≤ 20 µs).

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use rebound::compact::{clean_message, error_block, headline, ErrorView};
use rebound::model::Category;
use rebound::templates::Tokenizer;

fn compact(detail: &str) -> String {
    let message = clean_message(&headline("", "", detail), 200);
    let location = rebound::trace::collapse(detail, 2).map(|t| clean_message(&t.location(), 200)).unwrap_or_default();
    error_block(&ErrorView {
        tool: "search",
        category: Category::Network,
        message: &message,
        suggestion: "Check the host and the connection; retry, or use an alternative.",
        count: 1,
        location: &location,
    })
}

fn traces() -> Vec<String> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/traces");
    let mut files: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|e| e == "txt")).collect();
    files.sort();
    files.iter().map(|p| std::fs::read_to_string(p).unwrap()).collect()
}

fn bench(c: &mut Criterion) {
    let tokenizer = Tokenizer::by_name("o200k_base").unwrap();
    let traces = traces();
    let (mut raw, mut compacted, mut ratios) = (0u64, 0u64, Vec::new());
    for t in &traces {
        let (r, s) = (tokenizer.count(t), tokenizer.count(&compact(t)));
        raw += u64::from(r);
        compacted += u64::from(s);
        ratios.push(f64::from(s) / f64::from(r));
    }
    let mean = ratios.iter().sum::<f64>() / ratios.len() as f64;
    println!(
        "snippet/raw tokens over {} traces: mean ratio {mean:.3}, total {compacted}/{raw} = {:.3} (target <= 0.15)",
        traces.len(),
        compacted as f64 / raw as f64
    );
    // A 4 KB trace: the longest Python one, repeated frames up to 4 KB.
    let base = traces.iter().find(|t| t.contains("Traceback")).unwrap().clone();
    let mut four_kb = String::new();
    while four_kb.len() < 4096 {
        four_kb.push_str(&base);
    }
    c.bench_function("compact a 4 KB trace", |b| b.iter(|| compact(black_box(&four_kb))));
}

criterion_group!(benches, bench);
criterion_main!(benches);
