//! No secret leaves the sidecar: realistic secrets in realistic error messages
//! (tests/data/secrets/secrets.jsonl, fake but correctly shaped) go through
//! Report, Context, the escalation report and `rebound replay` without leaking;
//! ordinary ids (ordinary.jsonl) stay untouched.

use crate::common::{failure, run_cli, TestServer};
use rebound::pb;
use serde_json::Value;

fn load(name: &str) -> Vec<Value> {
    let path = format!("{}/tests/data/secrets/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn secrets_of(case: &Value) -> Vec<String> {
    case["secrets"].as_array().unwrap().iter().map(|s| s.as_str().unwrap().to_string()).collect()
}

#[tokio::test]
async fn the_secret_corpus_leaks_nothing_through_the_server() {
    let cases = load("secrets.jsonl");
    assert!(cases.len() >= 50);
    let mut server = TestServer::start().await;
    for (i, case) in cases.iter().enumerate() {
        let message = case["message"].as_str().unwrap();
        let session = format!("secret-{i}");
        // A 401 escalates, so the escalation report is produced too.
        let outcome = pb::Outcome { http_status: 401, detail: message.into(), ..failure(&session, "tool", message) };
        let v = server.client.report(outcome).await.unwrap().into_inner();
        let context = server
            .client
            .context(pb::ContextRequest { session_id: session, ..Default::default() })
            .await
            .unwrap()
            .into_inner();
        let escalation = v.escalation.as_ref().map(|e| format!("{} {:?}", e.text, e.history)).unwrap_or_default();
        for secret in secrets_of(case) {
            for (what, text) in [("snippet", &v.snippet), ("context", &context.text), ("escalation", &escalation)] {
                assert!(!text.contains(&secret), "{} leaked through the {what}: {text}", case["id"]);
            }
        }
        assert!(v.snippet.contains("[REDACTED:"), "{}: nothing redacted in {}", case["id"], v.snippet);
    }
    server.stop().await;
}

#[test]
fn the_secret_corpus_leaks_nothing_through_replay() {
    let cases = load("secrets.jsonl");
    let input: String = cases
        .iter()
        .enumerate()
        .map(|(i, c)| format!("{}\n", serde_json::json!({"session_id": format!("r{i}"), "tool": "t", "http_status": 401, "message": c["message"]})))
        .collect();
    let (code, stdout, stderr) = run_cli(&["replay", "-"], Some(&input));
    assert_eq!(code, 0, "{stderr}");
    for case in &cases {
        for secret in secrets_of(case) {
            assert!(!stdout.contains(&secret), "{} leaked through replay", case["id"]);
            assert!(!stderr.contains(&secret), "{} leaked into the logs", case["id"]);
        }
    }
}

#[test]
fn ordinary_ids_are_untouched() {
    for case in load("ordinary.jsonl") {
        let message = case["message"].as_str().unwrap();
        assert_eq!(rebound::redact::redact(message), message, "{}", case["id"]);
    }
}
