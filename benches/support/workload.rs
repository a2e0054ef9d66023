//! Realistic outcomes for the load benchmarks: what a fleet of agent runs
//! reports. Sessions live for `SESSION_LENGTH` outcomes, `LIVE_SESSIONS` at a
//! time, interleaved, so new sessions keep arriving; one outcome in four is a
//! failure, with real error messages of about 200 bytes, and the next call of
//! a failed tool succeeds (as a retry would), so sessions do not all end in a
//! breaker.

#![allow(dead_code)] // each bench uses a part

use rebound::pb;
use std::collections::HashMap;

/// A requests/urllib3 connection failure, as printed by requests 2.31 (201 bytes).
pub const URLLIB3: &str = "HTTPSConnectionPool(host='api.example.com', port=443): Max retries exceeded with url: /v1/search?q=rust (Caused by NewConnectionError('<urllib3.connection.HTTPSConnection object at 0x7f>: Failed to establish a new connection'))";

/// OpenAI's 429 body message (openai-python 1.x, RateLimitError), with its Retry-After.
pub const RATE_LIMITED: &str = "Rate limit reached for gpt-4o in organization org-XXXX on tokens per min (TPM): Limit 30000, Used 29717, Requested 1201. Please try again in 1.836s. Visit https://platform.openai.com/account/rate-limits to learn more.";

/// httpx's read timeout, as raised from a tool's HTTP call.
pub const READ_TIMEOUT: &str = "httpx.ReadTimeout: The read operation timed out while waiting for https://api.example.com/v1/documents/8d3c9a1e-52b7-4f0e-9a55-0c4f0d1e7b21 (timeout=30.0s, attempt 1 of 3, pool connections=10)";

/// The `j`-th of the three failures a session stores in the memory benches: a tool and one of the
/// three messages above, made distinct per session `s` by a number in it (so no two sessions share
/// one). `session_memory` counts their heap and `sidecar_memory` the real binary's RSS.
pub fn stored_error(s: u64, j: u64) -> (&'static str, String) {
    match j % 3 {
        0 => ("search", URLLIB3.replace("q=rust", &format!("q=rust-{s}"))),
        1 => ("fetch_url", RATE_LIMITED.replace("Used 29717", &format!("Used {}", 20_000 + s))),
        _ => ("run_sql", READ_TIMEOUT.replace("8d3c9a1e", &format!("{s:08x}"))),
    }
}

/// Agent runs in flight at once.
pub const LIVE_SESSIONS: u64 = 1_000;
/// Outcomes per agent run.
pub const SESSION_LENGTH: u64 = 16;
/// The tools an agent has.
pub const TOOLS: [&str; 4] = ["search", "fetch_url", "run_sql", "write_file"];

/// The `i`-th outcome of the stream `stream` (streams draw distinct session ids).
pub fn outcome(stream: u64, i: u64) -> pb::Outcome {
    let slot = i % LIVE_SESSIONS;
    let generation = i / (LIVE_SESSIONS * SESSION_LENGTH);
    let step = (i / LIVE_SESSIONS) % SESSION_LENGTH;
    let tool = TOOLS[(step % TOOLS.len() as u64) as usize];
    let mut o = pb::Outcome {
        session_id: format!("run-{stream}-{generation}-{slot}"),
        call_id: format!("call-{step}"),
        tool: tool.into(),
        ok: true,
        duration_ms: 120 + step * 7,
        ..Default::default()
    };
    // Steps 3 and 6 of every 8 (shifted per session) fail; the same tool's next call, 4 steps on, succeeds.
    let phase = (step + slot) % 8;
    if phase == 3 || phase == 6 {
        o.ok = false;
        match (step + slot) % 3 {
            0 => {
                o.message = URLLIB3.into();
                o.exception_type = "requests.exceptions.ConnectionError".into();
            }
            1 => {
                o.message = RATE_LIMITED.into();
                o.exception_type = "openai.RateLimitError".into();
                o.http_status = 429;
                o.headers = HashMap::from([("retry-after".into(), "2".into())]);
            }
            _ => {
                o.message = READ_TIMEOUT.into();
                o.exception_type = "httpx.ReadTimeout".into();
            }
        }
    }
    o
}
