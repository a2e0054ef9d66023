//! The shared test vectors (tests/vectors/*.json) through the real server:
//! the same cases every client runs.

use crate::common::TestServer;
use rebound::pb;
use serde_json::Value;

fn enum_name(prefix: &str, wire: &str) -> String {
    wire.strip_prefix(prefix).unwrap_or(wire).to_ascii_lowercase()
}

#[tokio::test]
async fn shared_vectors_hold() {
    let mut server = TestServer::start().await;
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/vectors");
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    assert!(!files.is_empty());
    let mut ran = 0;
    for file in files {
        let cases: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        for (i, case) in cases.iter().enumerate() {
            let name = case["name"].as_str().unwrap();
            // The TypeScript client reads an error's message trimmed, and compares it with the case's.
            let message = case["outcome"]["message"].as_str().unwrap_or_default();
            assert_eq!(message, message.trim(), "{name}: a message with leading or trailing whitespace");
            let mut json = case["outcome"].clone();
            json["session_id"] = Value::from(format!("vector-{}-{i}", file.display()));
            let outcome: rebound::replay::OutcomeJson = serde_json::from_value(json).unwrap();
            let o = outcome.into_outcome().unwrap();
            let request = pb::Outcome {
                session_id: o.session_id,
                tool: o.tool,
                ok: o.ok,
                kind: o.kind.map_or(0, |k| {
                    pb::OutcomeKind::from_str_name(&format!("OUTCOME_KIND_{}", k.as_str().to_ascii_uppercase()))
                        .unwrap() as i32
                }),
                message: o.message,
                exception_type: o.exception_type,
                http_status: o.http_status.map_or(0, i32::from),
                grpc_code: o.grpc_code,
                exit_code: o.exit_code,
                code: o.code,
                headers: case["outcome"]["headers"]
                    .as_object()
                    .map(|h| h.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string())).collect())
                    .unwrap_or_default(),
                detail: o.detail,
                ..Default::default()
            };
            let v = server.client.report(request).await.unwrap().into_inner();
            let expect = &case["expect"];
            let action = enum_name("ACTION_", pb::Action::try_from(v.action).unwrap().as_str_name());
            let c = v.classification.clone().unwrap_or_default();
            let category = enum_name("CATEGORY_", pb::Category::try_from(c.category).unwrap().as_str_name());
            assert_eq!(action, expect["action"].as_str().unwrap(), "{name}: action ({v:?})");
            assert_eq!(category, expect["category"].as_str().unwrap(), "{name}: category ({v:?})");
            assert_eq!(c.retryable, expect["retryable"].as_bool().unwrap(), "{name}: retryable");
            if let Some(min) = expect["delay_ms_min"].as_u64() {
                let delay = v.retry.as_ref().map_or(0, |r| r.delay_ms);
                let max = expect["delay_ms_max"].as_u64().unwrap();
                assert!((min..=max).contains(&delay), "{name}: delay {delay} not in {min}..={max}");
            }
            ran += 1;
        }
    }
    assert!(ran >= 20, "ran {ran}");
    server.stop().await;
}
