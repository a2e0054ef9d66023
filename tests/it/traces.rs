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

#[tokio::test]
async fn a_trace_sent_as_the_message_is_read_as_one_sent_as_the_detail() {
    // Agents send `traceback.format_exc()` or `err.stack` as the message: a requests traceback so
    // sent used to read as `unknown` (recover), and its snippet showed "Traceback (most recent…".
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/traces");
    let index: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(format!("{dir}/index.json")).unwrap()).unwrap();
    let mut server = TestServer::start().await;
    let mut differ = Vec::new();
    for (i, entry) in index.iter().enumerate() {
        let file = entry["file"].as_str().unwrap();
        let text = std::fs::read_to_string(format!("{dir}/{file}")).unwrap();
        let as_detail = pb::Outcome { detail: text.clone(), ..failure(&format!("d-{i}"), &format!("d{i}"), "") };
        let as_message = failure(&format!("m-{i}"), &format!("m{i}"), &text);
        let d = server.client.report(as_detail).await.unwrap().into_inner();
        let m = server.client.report(as_message).await.unwrap().into_inner();
        let (dc, mc) = (d.classification.unwrap(), m.classification.unwrap());
        let line = entry["exception_line"].as_str().unwrap().split_whitespace().collect::<Vec<_>>().join(" ");
        let head: String = line.chars().take(80).collect();
        if (dc.category, &dc.rule) != (mc.category, &mc.rule) || !m.snippet.contains(head.trim_end()) {
            differ.push(format!(
                "{file}: as detail {} ({}), as message {} ({}):\n{}",
                dc.category, dc.rule, mc.category, mc.rule, m.snippet
            ));
        }
    }
    assert!(
        differ.is_empty(),
        "{} of {} traces read otherwise as the message:\n{}",
        differ.len(),
        index.len(),
        differ.join("\n\n")
    );
    server.stop().await;
}
