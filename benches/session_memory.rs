//! Heap bytes per session, counted by a counting allocator: 100,000 sessions
//! with 3 stored errors each (distinct real messages, each with a call_id, so
//! the idempotency window holds their verdicts too), through `Engine::report`
//! as the server would drive it. Target: ≤ 1 KiB per session. The real
//! binary's RSS is measured by `bench/run`; this counts only what the
//! sessions hold, so it is exact and repeatable.

use rebound::clock::SystemClock;
use rebound::config::Config;
use rebound::engine::{Engine, EngineSettings};
use rebound::metrics::Metrics;
use rebound::model::Outcome;
use rebound::policy::Policy;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::sync::Arc;

struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size as isize - layout.size() as isize, Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const SESSIONS: usize = 100_000;

/// Real messages: requests/urllib3, the OpenAI SDK, and psycopg2.
const MESSAGES: [&str; 3] = [
    "HTTPSConnectionPool(host='api.example.com', port=443): Read timed out. (read timeout=30)",
    "Error code: 429 - {'error': {'message': 'Rate limit reached for gpt-4o in organization org-abc on tokens per min (TPM): Limit 30000, Used 29867, Requested 1205. Please try again in 2.144s.', 'type': 'tokens', 'code': 'rate_limit_exceeded'}}",
    "psycopg2.errors.UndefinedTable: relation \"orders_2024\" does not exist\nLINE 1: SELECT * FROM orders_2024 WHERE id = 42",
];

/// Heap bytes held per session after `SESSIONS` sessions each reported three failures.
fn bytes_per_session(with_call_ids: bool) -> f64 {
    let mut config = Config::default();
    config.sessions.capacity = SESSIONS * 2;
    let engine = Engine::new(
        Policy::from_config(&config).expect("valid"),
        EngineSettings::from_config(&config, 1),
        Arc::new(SystemClock::new()),
        Arc::new(Metrics::new(200)),
    );
    engine.warm_up();
    let report = |session: usize, i: usize| {
        let outcome = Outcome {
            session_id: format!("agent-run-{session:08}"),
            call_id: if with_call_ids { format!("call-{session:08}-{i}") } else { String::new() },
            tool: ["web_search", "llm", "sql_query"][i].into(),
            message: MESSAGES[i].into(),
            http_status: (i == 1).then_some(429),
            ..Outcome::default()
        };
        engine.report(&outcome).expect("valid");
    };
    // One session first, so lazily built state (patterns, metric handles) is not counted.
    for i in 0..3 {
        report(SESSIONS * 4, i);
    }
    let before = LIVE.load(Ordering::Relaxed);
    for session in 0..SESSIONS {
        for i in 0..3 {
            report(session, i);
        }
    }
    let after = LIVE.load(Ordering::Relaxed);
    assert_eq!(engine.session_count(), SESSIONS + 1);
    (after - before) as f64 / SESSIONS as f64
}

fn main() {
    // Clients give every call a call_id, so the usual case remembers the verdicts too.
    let with = bytes_per_session(true);
    let without = bytes_per_session(false);
    println!(
        "session memory: {with:.0} bytes per session with 3 errors and their 3 verdicts remembered (target <= 1024)"
    );
    println!("session memory: {without:.0} bytes per session with 3 errors, no call_ids");
}
