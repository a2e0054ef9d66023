//! The Retry-After family: `name: value` lines of arbitrary text as response headers; and the same
//! text as an error message that may name a wait.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rebound::backoff::{delay_in_text, parse_go_duration, parse_retry_after, provider_delay};
use rebound::model::Headers;

const WALL_MS: u64 = 1_700_000_000_000;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let headers = Headers::new(text.lines().filter_map(|l| l.split_once(':')).map(|(k, v)| (k, v.to_string())));
    let _ = provider_delay(&headers, || WALL_MS);
    let _ = provider_delay(&headers, || 0);
    let _ = parse_retry_after(&text, WALL_MS);
    let _ = parse_go_duration(&text);
    let _ = delay_in_text(&text);
});
