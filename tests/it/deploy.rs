//! Every metric the Grafana dashboard and the alert rules use is exported by
//! the real sidecar once it has seen some traffic.

use crate::common::{failure, http_get, success, TestServer};
use rebound::config::Config;
use rebound::pb;
use std::collections::BTreeSet;

/// The `rebound_*` metric names in a text, with histogram suffixes removed.
fn metric_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while let Some(at) = text[i..].find("rebound_") {
        let start = i + at;
        let mut end = start;
        while end < bytes.len()
            && (bytes[end].is_ascii_lowercase() || bytes[end] == b'_' || bytes[end].is_ascii_digit())
        {
            end += 1;
        }
        let name = &text[start..end];
        let name = ["_bucket", "_sum", "_count"].iter().fold(name, |n, s| n.strip_suffix(s).unwrap_or(n));
        names.insert(name.to_string());
        i = end;
    }
    names
}

#[tokio::test]
async fn dashboard_and_alert_metrics_are_all_exported() {
    let root = env!("CARGO_MANIFEST_DIR");
    let mut wanted =
        metric_names(&std::fs::read_to_string(format!("{root}/deploy/monitoring/dashboard.json")).unwrap());
    wanted.extend(metric_names(&std::fs::read_to_string(format!("{root}/deploy/monitoring/rules.yml")).unwrap()));
    assert!(wanted.len() >= 10, "{wanted:?}");

    let mut config = Config::default();
    config.retry_budget.max_tokens = 4.0;
    let mut server = TestServer::start_with(config).await;
    // Retries, escalations, a tripped tool breaker, Admit, an exhausted budget, a session ended.
    for i in 0..5 {
        let o = pb::Outcome { http_status: 503, ..failure(&format!("m{i}"), "dash_tool", "503 Service Unavailable") };
        server.client.report(o).await.unwrap();
    }
    server.client.admit(pb::AdmitRequest { session_id: "m0".into(), tool: "dash_tool".into() }).await.unwrap();
    for i in 0..3 {
        let o = pb::Outcome {
            kind: pb::OutcomeKind::Timeout as i32,
            ..failure(&format!("b{i}"), "budget_tool", "timed out")
        };
        server.client.report(o).await.unwrap();
    }
    server.client.report(pb::Outcome { http_status: 401, ..failure("auth", "llm", "Unauthorized") }).await.unwrap();
    server.client.report(success("ok", "dash_tool")).await.unwrap();
    server.client.end_session(pb::EndSessionRequest { session_id: "ok".into() }).await.unwrap();

    let mut exported = metric_names(&http_get(&server.metrics_addr, "/metrics").await);
    // Exported only with `[state] backend = "redis"` or `[breakers] shadow = true`, which this server
    // does not run: the names are looked for in the source instead, so that a misspelt one still
    // fails (deploy/checks/live.py does the same).
    let source = std::fs::read_to_string(format!("{root}/src/metrics.rs")).unwrap();
    for config_only in ["rebound_state_backend_up", "rebound_shadow_verdicts_total"] {
        assert!(source.contains(&format!("\"{config_only}\"")), "{config_only} is not a metric of src/metrics.rs");
        exported.insert(config_only.to_string());
    }
    let missing: Vec<&String> = wanted.difference(&exported).collect();
    assert!(missing.is_empty(), "used by the dashboard or alerts but not exported: {missing:?}");
    server.stop().await;
}
