//! The trace set (tests/data/traces/: real stack traces and tool outputs,
//! made by make/regenerate.sh): every snippet keeps the exception line (its head, when the line
//! is longer than the snippet's message budget).

use crate::common::{failure, TestServer};
use rebound::pb;
use serde_json::Value;

#[tokio::test]
async fn every_snippet_keeps_the_exception_line() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/traces");
    let index: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(format!("{dir}/index.json")).unwrap()).unwrap();
    assert!(index.len() >= 30);
    let mut server = TestServer::start().await;
    let mut missed = Vec::new();
    for (i, entry) in index.iter().enumerate() {
        let text = std::fs::read_to_string(format!("{dir}/{}", entry["file"].as_str().unwrap())).unwrap();
        let outcome = pb::Outcome { detail: text, ..failure(&format!("trace-{i}"), &format!("tool{i}"), "") };
        let v = server.client.report(outcome).await.unwrap().into_inner();
        // Snippets fold whitespace and show at most 200 characters of a message, head and tail.
        let line = entry["exception_line"].as_str().unwrap().split_whitespace().collect::<Vec<_>>().join(" ");
        let head: String = line.chars().take(80).collect();
        if !v.snippet.contains(head.trim_end()) {
            missed.push(format!("{}: wanted {head:?} in\n{}", entry["file"], v.snippet));
        }
    }
    assert!(
        missed.is_empty(),
        "{} of {} snippets lost their exception line:\n{}",
        missed.len(),
        index.len(),
        missed.join("\n\n")
    );
    server.stop().await;
}
