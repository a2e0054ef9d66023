//! Classification of arbitrary outcomes: the input's text split into message,
//! exception type, code and detail; a few bytes choose the structured signals.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rebound::model::Outcome;
use rebound::policy::Policy;
use std::sync::LazyLock;

static POLICY: LazyLock<Policy> = LazyLock::new(Policy::default);

fuzz_target!(|data: &[u8]| {
    let Some((&[status, grpc, exit], rest)) = data.split_first_chunk::<3>() else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    let mut parts = text.splitn(4, '\u{1}');
    let outcome = Outcome {
        session_id: "fuzz".into(),
        tool: "tool".into(),
        message: parts.next().unwrap_or_default().to_string(),
        exception_type: parts.next().unwrap_or_default().to_string(),
        code: parts.next().unwrap_or_default().to_string(),
        detail: parts.next().unwrap_or_default().to_string(),
        http_status: (status > 0).then(|| 300 + u16::from(status)),
        grpc_code: (grpc > 0).then(|| i32::from(grpc % 20)),
        exit_code: (exit > 0).then(|| i32::from(exit)),
        ..Outcome::default()
    };
    let classification = POLICY.classifier.classify(&outcome);
    assert!(!classification.rule.is_empty());
    let _ = POLICY.classifier.explain(&outcome);
});
