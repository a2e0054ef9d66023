//! Tool breakers, Admit and shadow mode through the real server, with an
//! injected clock so open periods pass exactly and without sleeping.

use crate::common::{failure, success, TestServer};
use rebound::clock::ManualClock;
use rebound::config::Config;
use rebound::pb;
use std::sync::Arc;

fn unavailable(session: &str, tool: &str) -> pb::Outcome {
    pb::Outcome { http_status: 503, ..failure(session, tool, "503 Service Unavailable") }
}

async fn admit(server: &mut TestServer, session: &str, tool: &str) -> pb::AdmitResponse {
    server.client.admit(pb::AdmitRequest { session_id: session.into(), tool: tool.into() }).await.unwrap().into_inner()
}

#[tokio::test]
async fn five_failures_across_sessions_fence_the_tool_off_until_probes_succeed() {
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let mut server = TestServer::start_with_clock(Config::default(), clock.clone()).await;
    for i in 0..5 {
        server.client.report(unavailable(&format!("agent-{i}"), "geo_lookup")).await.unwrap();
    }
    let a = admit(&mut server, "newcomer", "geo_lookup").await;
    assert!(!a.allowed);
    assert_eq!(a.reason, pb::Reason::ToolBreakerOpen as i32);
    assert_eq!(a.tool_state, pb::BreakerState::Open as i32);
    assert_eq!(a.retry_after_ms, 30_000);

    // A report for the fenced-off tool says: use another one.
    let v = server.client.report(unavailable("newcomer", "geo_lookup")).await.unwrap().into_inner();
    assert_eq!(v.action, pb::Action::Reclassify as i32);
    assert_eq!(v.breaker.as_ref().unwrap().reason, pb::Reason::ToolBreakerOpen as i32);
    assert!(v.snippet.contains("use another tool"), "{}", v.snippet);

    clock.advance(29_999);
    assert!(!admit(&mut server, "newcomer", "geo_lookup").await.allowed);
    clock.advance(1);
    let first = admit(&mut server, "p1", "geo_lookup").await;
    let second = admit(&mut server, "p2", "geo_lookup").await;
    let third = admit(&mut server, "p3", "geo_lookup").await;
    assert!(first.allowed && second.allowed && !third.allowed);
    assert_eq!(first.tool_state, pb::BreakerState::HalfOpen as i32);
    server.client.report(success("p1", "geo_lookup")).await.unwrap();
    let v = server.client.report(success("p2", "geo_lookup")).await.unwrap().into_inner();
    assert_eq!(v.breaker.unwrap().tool_state, pb::BreakerState::Closed as i32);
    assert!(admit(&mut server, "p3", "geo_lookup").await.allowed);
    server.stop().await;
}

#[tokio::test]
async fn a_failed_probe_reopens_for_twice_as_long() {
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let mut server = TestServer::start_with_clock(Config::default(), clock.clone()).await;
    for i in 0..5 {
        server.client.report(unavailable(&format!("a{i}"), "ledger")).await.unwrap();
    }
    clock.advance(30_000);
    assert!(admit(&mut server, "probe", "ledger").await.allowed);
    server.client.report(unavailable("probe", "ledger")).await.unwrap();
    let a = admit(&mut server, "later", "ledger").await;
    assert_eq!((a.allowed, a.retry_after_ms), (false, 60_000));
    server.stop().await;
}

#[tokio::test]
async fn shadow_mode_never_blocks_but_still_counts() {
    let mut config = Config::default();
    config.breakers.shadow = true;
    let mut server = TestServer::start_with(config).await;
    let mut last = None;
    for i in 0..6 {
        last = Some(server.client.report(unavailable(&format!("s{i}"), "shadowed_tool")).await.unwrap().into_inner());
    }
    let v = last.unwrap();
    assert_eq!(v.action, pb::Action::Retry as i32);
    assert!(!v.enforced);
    assert_eq!(v.shadow_action, pb::Action::Reclassify as i32);
    assert_eq!(v.breaker.unwrap().tool_state, pb::BreakerState::Open as i32);
    let a = admit(&mut server, "s9", "shadowed_tool").await;
    assert!(a.allowed);
    let body = crate::common::http_get(&server.metrics_addr, "/metrics").await;
    assert!(body.contains("rebound_breaker_transitions_total{tool=\"shadowed_tool\",to=\"open\"}"), "{body}");
    assert!(body.contains("rebound_breaker_state{tool=\"shadowed_tool\"} 1"), "{body}");
    assert!(body.contains("rebound_admit_total{tool=\"shadowed_tool\",decision=\"shadow_denied\"}"), "{body}");
    // What enforcing would have answered is counted, for a dashboard before the switch: the fifth
    // failure opened the breaker, and it and the sixth would have been told to choose another tool.
    assert!(
        body.contains("rebound_shadow_verdicts_total{action=\"reclassify\",reason=\"tool_breaker_open\"} 2"),
        "{body}"
    );
    server.stop().await;
}

#[tokio::test]
async fn the_budget_metric_counts_only_the_retries_the_budget_refused() {
    // With the bucket low, failures answered for another reason (here the tool's breaker,
    // open from the fifth) were counted too: 16 against 1 refusal in an SRE's run.
    let mut config = Config::default();
    config.retry_budget.max_tokens = 4.0;
    let mut server = TestServer::start_with(config).await;
    let mut refused = 0;
    for i in 0..40 {
        let v = server.client.report(unavailable(&format!("b{i}"), "budgeted")).await.unwrap().into_inner();
        if v.breaker.unwrap().reason == pb::Reason::RetryBudgetExhausted as i32 {
            refused += 1;
        }
    }
    assert!(refused > 0, "the budget never refused a retry");
    let body = crate::common::http_get(&server.metrics_addr, "/metrics").await;
    let counted = body
        .lines()
        .find_map(|l| l.strip_prefix("rebound_retry_budget_exhausted_total{tool=\"budgeted\"} "))
        .unwrap_or_else(|| panic!("no budget counter for the tool: {body}"));
    assert_eq!(counted, refused.to_string(), "{body}");
    server.stop().await;
}
