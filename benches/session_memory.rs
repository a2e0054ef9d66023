//! Heap bytes per session, counted by a counting allocator: 100,000 sessions
//! with 3 stored errors each (3 real messages, each made distinct per session as
//! `sidecar_memory` makes them, each with a call_id, so the idempotency window
//! holds their verdicts too), through `Engine::report` as the server would drive
//! it. Target: ≤ 1 KiB per session. Also: without call_ids, with the same 3
//! messages in every session (an outage every run meets: the sessions share the
//! engine's analysis of each, see `rebound::analysis`), at the default limits, and
//! a typical run (16 calls, 4 failing). The real
//! binary's RSS is measured by `bench/run`; this counts only what the
//! sessions hold, so it is exact and repeatable.

use rebound::clock::SystemClock;
use rebound::config::Config;
use rebound::engine::{Engine, EngineSettings, StartSession};
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

/// Heap bytes held per session after `sessions` sessions each reported `calls`
/// outcomes, every `failing_every`-th a failure (cycling through the real
/// messages, each session's own unless `same_messages`, past the first round
/// numbered so that none repeats within the session) and the others successes. With
/// `declared`, each session first declares those tools (StartSession).
fn bytes_per_session(
    sessions: usize,
    calls: usize,
    failing_every: usize,
    with_call_ids: bool,
    same_messages: bool,
    declared: Option<&[String]>,
) -> f64 {
    let mut config = Config::default();
    config.sessions.capacity = sessions * 2;
    let engine = Engine::new(
        Policy::from_config(&config).expect("valid"),
        EngineSettings::from_config(&config, 1),
        Arc::new(SystemClock::new()),
        Arc::new(Metrics::new(200)),
    );
    engine.warm_up();
    let declare = |session: usize| {
        if let Some(tools) = declared {
            let session_id = format!("agent-run-{session:08}");
            engine
                .start_session(&StartSession { session_id, tools: tools.to_vec(), ..Default::default() })
                .expect("valid");
        }
    };
    let report = |session: usize, i: usize| {
        let m = i % MESSAGES.len();
        let outcome = Outcome {
            session_id: format!("agent-run-{session:08}"),
            call_id: if with_call_ids { format!("call-{session:08}-{i}") } else { String::new() },
            tool: ["web_search", "llm", "sql_query"][m].into(),
            // Past the first round, a word that changes the fingerprint: no repeats fold.
            message: {
                // Each session's own, unless every session sends the same: a number in it changed.
                let message = match (same_messages, m) {
                    (true, _) => MESSAGES[m].to_string(),
                    (false, 0) => MESSAGES[m].replace("example", &format!("{session:07}")),
                    (false, 1) => MESSAGES[m].replace("Used 29867", &format!("Used {session}")),
                    (false, _) => MESSAGES[m].replace("orders_2024", &format!("orders_{session}")),
                };
                match i < MESSAGES.len() {
                    true => message,
                    false => format!("{message} (stage {})", ["a", "b", "c", "d", "e", "f", "g"][i % 7]),
                }
            },
            http_status: (m == 1).then_some(429),
            ok: !(i + 1).is_multiple_of(failing_every),
            ..Outcome::default()
        };
        engine.report(&outcome).expect("valid");
    };
    // One session first, so lazily built state (patterns, metric handles) is not counted.
    declare(sessions * 4);
    for i in 0..calls {
        report(sessions * 4, i);
    }
    let before = LIVE.load(Ordering::Relaxed);
    for session in 0..sessions {
        declare(session);
        for i in 0..calls {
            report(session, i);
        }
    }
    let after = LIVE.load(Ordering::Relaxed);
    assert_eq!(engine.session_count(), sessions + 1);
    (after - before) as f64 / sessions as f64
}

fn main() {
    // Clients give every call a call_id, so the usual case remembers the verdicts too.
    let with = bytes_per_session(SESSIONS, 3, 1, true, false, None);
    let without = bytes_per_session(SESSIONS, 3, 1, false, false, None);
    let same = bytes_per_session(SESSIONS, 3, 1, true, true, None);
    // A session at its limits: the default history (10 errors) and idempotency window (16 verdicts) full.
    let full = bytes_per_session(SESSIONS / 10, 20, 1, true, false, None);
    // An agent run as the load benchmarks make them: 16 calls, one in four failing.
    let typical = bytes_per_session(SESSIONS / 10, 16, 4, true, false, None);
    // The same run after StartSession declared the agent's 40 tools (the same list in every session).
    let tools: Vec<String> =
        (0..40).map(|i| format!("{}_{i}", ["web_search", "fetch_url", "run_sql", "send_email"][i % 4])).collect();
    let declared = bytes_per_session(SESSIONS / 10, 16, 4, true, false, Some(&tools));
    println!(
        "session memory: {with:.0} bytes per session with 3 errors and their 3 verdicts remembered (target <= 1024)"
    );
    println!("session memory: {without:.0} bytes per session with 3 errors, no call_ids (target <= 1024)");
    println!(
        "session memory: {same:.0} bytes per session with 3 errors and their verdicts, the same 3 in every session"
    );
    println!("session memory: {full:.0} bytes per session at the default limits (10 errors, 16 verdicts remembered)");
    println!(
        "session memory: {typical:.0} bytes per session after 16 calls, 4 of them failures (16 verdicts remembered)"
    );
    println!("session memory: {declared:.0} bytes per session after StartSession with 40 tools and the same 16 calls");
    // For bench/run.
    println!("@result heap_bytes_per_session {with:.0}");
    println!("@result heap_bytes_per_session_no_call_ids {without:.0}");
    println!("@result heap_bytes_per_session_same_messages {same:.0}");
    println!("@result heap_bytes_per_session_at_limits {full:.0}");
    println!("@result heap_bytes_per_session_typical {typical:.0}");
    println!("@result heap_bytes_per_session_declared {declared:.0}");
}
