//! Redaction, stack-trace collapsing and snippet text on arbitrary text: no panic,
//! messages and tool output's failure lines within their limit, no `<error` tag of their own, redaction idempotent,
//! and a message kept as its shape and words written out again as it was.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rebound::compact::{digest, elide_middle, failure_lines, SnippetPolicy};
use rebound::redact::redact;
use rebound::shapes::Shapes;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let once = redact(&text).into_owned();
    assert_eq!(redact(&once), once, "redaction must be idempotent");
    let d = digest("", "", &text, &SnippetPolicy::default());
    assert!(d.message.chars().count() <= 200, "message over its limit: {}", d.message);
    assert!(d.location.chars().count() <= 200, "location over its limit: {}", d.location);
    let short = SnippetPolicy { message_chars: 40, frames: 5, ..SnippetPolicy::default() };
    let d = digest(&text, "fuzz.Error", &text, &short);
    assert!(d.message.chars().count() <= 40 && d.location.chars().count() <= 40);
    for shown in [&*d.message, &d.location] {
        let lower = shown.to_ascii_lowercase();
        assert!(!lower.contains("<error") && !lower.contains("</error"), "a tag in snippet text: {shown}");
    }
    assert!(elide_middle(&text, 60).chars().count() <= 60);
    assert!(failure_lines(&text, 200).chars().count() <= 200, "failure lines over their limit");
    let _ = rebound::trace::collapse(&text, 2);
    let shapes = Shapes::new(Default::default());
    for shown in [&*text, &*d.message] {
        let kept = shapes.keep(shown);
        assert_eq!(kept.to_string(), shown);
        assert_eq!(kept.len(), shown.len());
    }
});
