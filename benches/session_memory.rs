//! Heap bytes per session, counted by a counting allocator: 100,000 sessions
//! with 3 stored errors each (the 3 real messages `sidecar_memory` sends, each
//! made distinct per session as it makes them, so this count and that binary's
//! RSS compare), each with a call_id, so the idempotency window holds their
//! verdicts too, through `Engine::report` as the server would drive it. Target:
//! ≤ 1 KiB per session. Also: without call_ids, with the same 3 messages in every
//! session (an outage every run meets: the sessions share the engine's analysis of
//! each, see `rebound::analysis`), and, for sizing, runs that meet a mix with an
//! error no retry fixes (so they escalate): at the default limits, and a typical
//! run (16 calls, 4 failing). The real binary's RSS is measured by `bench/run`;
//! this counts only what the sessions hold (with the store's table, which grows with
//! them), so it is exact and repeatable.

#[path = "support/workload.rs"]
mod workload;

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

/// Which failures the sessions report.
#[derive(Clone, Copy)]
enum Messages {
    /// The three `sidecar_memory` sends, each session's own (`workload::stored_error`): near
    /// the 200 characters a stored message is cut to, so this heap count and that RSS compare.
    Sidecar,
    /// The same three in every session (session 0's): an outage every run meets.
    Shared,
    /// A mix with a shorter timeout and a database error no retry fixes, each session's own:
    /// runs at their limits escalate, and an escalation's verdict carries its report.
    Mixed,
}

/// Real messages: requests/urllib3, the OpenAI SDK, and psycopg2.
const MIXED: [&str; 3] = [
    "HTTPSConnectionPool(host='api.example.com', port=443): Read timed out. (read timeout=30)",
    "Error code: 429 - {'error': {'message': 'Rate limit reached for gpt-4o in organization org-abc on tokens per min (TPM): Limit 30000, Used 29867, Requested 1205. Please try again in 2.144s.', 'type': 'tokens', 'code': 'rate_limit_exceeded'}}",
    "psycopg2.errors.UndefinedTable: relation \"orders_2024\" does not exist\nLINE 1: SELECT * FROM orders_2024 WHERE id = 42",
];

/// Session `session`'s `i`-th failure, before any numbering past the first round: tool, message
/// and HTTP status.
fn failure(messages: Messages, session: usize, i: usize) -> (&'static str, String, Option<u16>) {
    match messages {
        Messages::Sidecar => with_no_status(workload::stored_error(session as u64, i as u64)),
        Messages::Shared => with_no_status(workload::stored_error(0, i as u64)),
        Messages::Mixed => {
            // A number in each changed, so that no two sessions share one.
            let m = i % 3;
            let message = match m {
                0 => MIXED[m].replace("example", &format!("{session:07}")),
                1 => MIXED[m].replace("Used 29867", &format!("Used {session}")),
                _ => MIXED[m].replace("orders_2024", &format!("orders_{session}")),
            };
            (["web_search", "llm", "sql_query"][m], message, (m == 1).then_some(429))
        }
    }
}

/// A tool and message sent without an HTTP status, as `sidecar_memory` sends them.
fn with_no_status((tool, message): (&'static str, String)) -> (&'static str, String, Option<u16>) {
    (tool, message, None)
}

/// Heap bytes held per session after `sessions` sessions each reported `calls`
/// outcomes, every `failing_every`-th a failure (cycling through `messages`, past the
/// first round numbered so that none repeats within the session) and the others
/// successes. With `declared`, each session first declares those tools (StartSession).
fn bytes_per_session(
    sessions: usize,
    calls: usize,
    failing_every: usize,
    with_call_ids: bool,
    messages: Messages,
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
        let (tool, message, http_status) = failure(messages, session, i);
        let outcome = Outcome {
            session_id: format!("agent-run-{session:08}"),
            call_id: if with_call_ids { format!("call-{session:08}-{i}") } else { String::new() },
            tool: tool.into(),
            // Past the first round, a word that changes the fingerprint: no repeats fold.
            message: match i < 3 {
                true => message,
                false => format!("{message} (stage {})", ["a", "b", "c", "d", "e", "f", "g"][i % 7]),
            },
            http_status,
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
    let with = bytes_per_session(SESSIONS, 3, 1, true, Messages::Sidecar, None);
    let without = bytes_per_session(SESSIONS, 3, 1, false, Messages::Sidecar, None);
    let same = bytes_per_session(SESSIONS, 3, 1, true, Messages::Shared, None);
    // A session at its limits: the default history (10 errors) and idempotency window (16 verdicts) full.
    let full = bytes_per_session(SESSIONS / 10, 20, 1, true, Messages::Mixed, None);
    // An agent run as the load benchmarks make them: 16 calls, one in four failing.
    let typical = bytes_per_session(SESSIONS / 10, 16, 4, true, Messages::Mixed, None);
    // The same run after StartSession declared the agent's 40 tools (the same list in every session).
    let tools: Vec<String> =
        (0..40).map(|i| format!("{}_{i}", ["web_search", "fetch_url", "run_sql", "send_email"][i % 4])).collect();
    let declared = bytes_per_session(SESSIONS / 10, 16, 4, true, Messages::Mixed, Some(&tools));
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
