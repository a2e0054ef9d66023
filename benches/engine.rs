//! The engine alone: nanoseconds per outcome through `Engine::report_owned` (classify,
//! breakers, backoff, snippet) for a 200-byte message and a 4 KB trace
//! (targets ≤ 1 µs and ≤ 10 µs). 1,000 agent runs are in flight at a time, each
//! 16 outcomes long and then ended (EndSession), as a busy sidecar's would be; no
//! gRPC, no network. Each iteration also builds its outcome (the strings a decoded
//! request would hold) and hands it over, as the server does.
//!
//! Each workload runs twice: with one failure repeated, as a run looping on a failing
//! tool or an outage seen by every run sends it (the engine keeps its analysis, see
//! `rebound::analysis`), and with every failure new (`-new`: 4,096 variants taken in
//! turn, each differing from the others in one number, so none is still kept when it
//! comes again), which analyses every one.
//!
//! A third workload, `real`, takes the messages of the classification corpus
//! (`tests/data/classification`: every distinct message, from real libraries, 77 bytes on
//! average when there were 673) in turn: failures as varied as a fleet's, which the others, one message
//! or its variants, are not. Each is analysed, and the rules' lazy DFA must hold the
//! states all of them need (see `rebound::message_patterns`).
//!
//! With `REBOUND_COUNT=200B` (or `4KB`, `200B-new`, `4KB-new`, `real`) it runs the same workload once instead, for
//! callgrind: `bench/run` counts the instructions `counted` executes, which a shared,
//! noisy machine does not change as it changes time.

use criterion::{black_box, criterion_group, Criterion};
use rebound::clock::SystemClock;
use rebound::config::Config;
use rebound::engine::{Engine, EngineSettings};
use rebound::metrics::Metrics;
use rebound::model::{Outcome, Verdict};
use rebound::policy::Policy;
use std::sync::Arc;

// The sidecar's allocator, so that the figures are the binary's (see `rebound::memory`).
rebound::use_jemalloc!();

/// Agent runs in flight at once.
const RUNS: u64 = 1000;
/// Outcomes per run: one whole generation of runs is `RUNS * RUN_LENGTH` outcomes.
const RUN_LENGTH: u64 = 16;
/// Failures in the `-new` workloads: enough that each has left the engine's table
/// (`rebound::analysis::SLOTS` entries) before it comes again.
const VARIANTS: usize = 4096;

/// The engine and the outcomes it is fed, one at a time.
struct Workload {
    engine: Engine,
    /// The failures' messages and details, taken in turn: one, or `VARIANTS`.
    failures: Vec<(String, String)>,
    i: u64,
    /// The session ids of the current generation of runs, made once per generation: an
    /// outcome's id is a copy of one, as the server's is a copy of the request's bytes
    /// (formatting one per outcome cost about 1,000 instructions, counted as the engine's).
    ids: Vec<String>,
    generation: u64,
    /// Which failures have been judged: the uncounted warm-up runs until all have (see `main`).
    judged: Vec<bool>,
}

impl Workload {
    /// "200B" (a real requests/urllib3 message, cut to 200 bytes), "4KB" (the
    /// real Python traceback of the trace set nearest 4 KB), or "real" (the corpus's messages).
    fn new(name: &str) -> Option<Self> {
        if name == "real" {
            return Some(Self::with_failures(corpus_messages().into_iter().map(|m| (m, String::new())).collect()));
        }
        let message = "HTTPSConnectionPool(host='api.example.com', port=443): Max retries exceeded with url: /v1/search?q=rust (Caused by NewConnectionError('<urllib3.connection.HTTPSConnection object at 0x7f>: Failed to establish a new connection'))";
        let trace = include_str!("../tests/data/traces/py-requests-timeout.txt");
        let (workload, variants) = match name.strip_suffix("-new") {
            Some(workload) => (workload, VARIANTS),
            None => (name, 1),
        };
        // Variant 0 is the text itself; the others change one number in it.
        let failures = (0..variants)
            .map(|n| match workload {
                "200B" => {
                    let message = match n {
                        0 => message.to_string(),
                        n => message.replace("0x7f>", &format!("0x7f{n:04x}>")),
                    };
                    Some((message.chars().take(200).collect(), String::new()))
                }
                "4KB" => Some((String::new(), trace.replace("line 540,", &format!("line {},", 540 + n)))),
                _ => None,
            })
            .collect::<Option<Vec<_>>>()?;
        Some(Self::with_failures(failures))
    }

    /// An engine with the default config, fed `failures` in turn.
    fn with_failures(failures: Vec<(String, String)>) -> Self {
        let config = Config::default();
        let engine = Engine::new(
            Policy::from_config(&config).expect("the default config is valid"),
            EngineSettings::from_config(&config, 1),
            Arc::new(SystemClock::new()),
            Arc::new(Metrics::new(200)),
        );
        Workload { engine, judged: vec![false; failures.len()], failures, i: 0, ids: Vec::new(), generation: 0 }
    }

    /// The next outcome, judged.
    fn step(&mut self) -> Verdict {
        self.i += 1;
        // The run in `slot` is at `step`; a new generation of runs starts every 16 steps.
        let (slot, step) = (self.i % RUNS, self.i / RUNS);
        if self.ids.is_empty() || self.generation != step / RUN_LENGTH {
            self.generation = step / RUN_LENGTH;
            self.ids = (0..RUNS).map(|slot| format!("s-{}-{slot}", self.generation)).collect();
        }
        let id = &self.ids[slot as usize];
        let failure = (self.i % self.failures.len() as u64) as usize;
        let (message, detail) = &self.failures[failure];
        // Every fourth call of each run succeeds (shifted per run), so runs are not
        // stopped by their breakers: their failures are all judged in full.
        let ok = (step + slot).is_multiple_of(4);
        self.judged[failure] |= !ok;
        let outcome = Outcome {
            session_id: id.clone(),
            tool: "search".into(),
            message: message.clone(),
            detail: detail.clone(),
            ok,
            ..Outcome::default()
        };
        let verdict = self.engine.report_owned(black_box(outcome)).expect("a valid outcome");
        // A run ends after its 16th call, as an agent ends its session: sessions
        // do not pile up to the store's cap.
        if step % RUN_LENGTH == RUN_LENGTH - 1 {
            black_box(self.engine.end_session(id).expect("a valid id"));
        }
        verdict
    }
}

/// The distinct messages of the classification corpus, in its order (each case notes its source).
fn corpus_messages() -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    let corpus = [
        include_str!("../tests/data/classification/corpus.jsonl"),
        include_str!("../tests/data/classification/holdout.jsonl"),
        include_str!("../tests/data/classification/holdout-real.jsonl"),
    ];
    corpus
        .iter()
        .flat_map(|file| file.lines())
        .filter_map(|line| {
            let case: serde_json::Value = serde_json::from_str(line).expect("a JSON case");
            case["outcome"]["message"].as_str().map(str::to_string)
        })
        .filter(|message| !message.is_empty() && seen.insert(message.clone()))
        .collect()
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("engine");
    for (name, workload) in [
        ("200B message", "200B"),
        ("4KB trace", "4KB"),
        ("200B message, each new", "200B-new"),
        ("4KB trace, each new", "4KB-new"),
        ("real messages, in turn", "real"),
    ] {
        let mut workload = Workload::new(workload).expect("a known workload");
        group.bench_function(name, |b| b.iter(|| black_box(workload.step())));
    }
    group.finish();
}

/// One whole generation of runs, the part callgrind counts (`--toggle-collect=*counted*`).
#[inline(never)]
fn counted(workload: &mut Workload) {
    for _ in 0..RUNS * RUN_LENGTH {
        black_box(workload.step());
    }
}

criterion_group!(benches, bench);

fn main() {
    let Ok(name) = std::env::var("REBOUND_COUNT") else {
        benches();
        Criterion::default().configure_from_args().final_summary();
        return;
    };
    let Some(mut workload) = Workload::new(&name) else {
        eprintln!("REBOUND_COUNT={name:?}: want 200B, 4KB, 200B-new, 4KB-new or real");
        std::process::exit(2);
    };
    // Generations first, uncounted, until every failure has been judged once: the patterns' lazy
    // DFA builds the states their texts need, the store its shards. One was not enough for `real`:
    // 52 of its messages first failed in the counted generation, and building their states (about
    // 280 transitions each, 4,700 instructions a transition) took a fifth of what it counted.
    // Criterion's timed runs are past it after their warm-up. Then the next, counted: each outcome
    // once, a run's start and end included.
    for generation in 1.. {
        for _ in 0..RUNS * RUN_LENGTH {
            black_box(workload.step());
        }
        let unjudged = workload.judged.iter().filter(|judged| !**judged).count();
        if unjudged == 0 {
            break;
        }
        assert!(generation < 100, "{unjudged} failures never judged in {generation} generations");
    }
    counted(&mut workload);
    println!("@outcomes {}", RUNS * RUN_LENGTH);
}
