//! Redaction, stack-trace collapsing and snippet text on arbitrary text: no panic,
//! messages within their limit, and redaction idempotent.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rebound::compact::{digest, elide_middle, failure_lines};
use rebound::redact::redact;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let once = redact(&text).into_owned();
    assert_eq!(redact(&once), once, "redaction must be idempotent");
    let d = digest("", "", &text, 200);
    assert!(d.message.chars().count() <= 200, "message over its limit: {}", d.message);
    assert!(d.location.chars().count() <= 200, "location over its limit: {}", d.location);
    let _ = digest(&text, "fuzz.Error", &text, 40);
    assert!(elide_middle(&text, 60).chars().count() <= 60);
    let _ = failure_lines(&text, 200);
    let _ = rebound::trace::collapse(&text, 2);
});
