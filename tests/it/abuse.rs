//! Abuse through the real binary: more tools, sessions and headers than anyone
//! should send, and clients that vanish mid-stream. Each test checks the bound
//! that must hold (label cap, session cap, RSS, stream gauge) and that the
//! sidecar still answers another session afterwards.

use crate::common::{connect, failure, http_get, success, Sidecar};
use rebound::pb;
use rebound::pb::rebound_client::ReboundClient;
use std::collections::HashSet;
use std::time::{Duration, Instant};

/// A sidecar with small caps, so that the abuse goes past them quickly.
fn capped_sidecar() -> (Sidecar, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rebound.toml");
    std::fs::write(&path, "[sessions]\ncapacity = 1000\nshards = 8\n\n[metrics]\ntool_label_cap = 50\n").unwrap();
    let sidecar = Sidecar::spawn(&["--config", path.to_str().unwrap()]);
    (sidecar, dir)
}

/// The value of an unlabelled gauge in a Prometheus text page.
fn gauge(page: &str, name: &str) -> f64 {
    page.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|rest| rest.strip_prefix(' ')))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in the metrics page"))
}

/// The sidecar's resident memory, from /proc.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

async fn still_answers(client: &mut ReboundClient<tonic::transport::Channel>) {
    let v = client.report(success("bystander", "search")).await.unwrap().into_inner();
    assert_eq!(v.action, pb::Action::Continue as i32);
}

#[tokio::test]
async fn ten_thousand_tools_and_sessions_stay_within_the_label_and_session_caps() {
    let (sidecar, _dir) = capped_sidecar();
    let mut client = ReboundClient::new(connect(&sidecar.grpc).await);
    let outcomes: Vec<pb::Outcome> = (0..10_000)
        .map(|i| {
            let (session, tool) = (format!("abuse-session-{i}"), format!("abuse-tool-{i}"));
            if i % 3 == 0 {
                failure(&session, &tool, "HTTPSConnectionPool(host='api.example.com', port=443): Read timed out.")
            } else {
                success(&session, &tool)
            }
        })
        .collect();
    let mut verdicts = client.observe(tokio_stream::iter(outcomes)).await.unwrap().into_inner();
    let mut answered = 0;
    while verdicts.message().await.unwrap().is_some() {
        answered += 1;
    }
    assert_eq!(answered, 10_000);

    let page = http_get(&sidecar.metrics, "/metrics").await;
    let tools: HashSet<&str> = page
        .lines()
        .filter(|l| l.starts_with("rebound_outcomes_total{"))
        .filter_map(|l| l.split("tool=\"").nth(1)?.split('"').next())
        .collect();
    // The cap's tools by name, every other tool folded into one label.
    assert!(tools.len() <= 51, "{} tool labels past a cap of 50", tools.len());
    assert!(tools.contains(rebound::metrics::OTHER_TOOL), "no {} label: {tools:?}", rebound::metrics::OTHER_TOOL);
    let active = gauge(&page, "rebound_sessions_active");
    assert!(active <= 1000.0, "{active} sessions active past a capacity of 1000");
    // A documented bound for this sidecar: 1,000 sessions and 10,000 outcomes fit well within 64 MiB.
    let rss = rss_kib(sidecar.child.id());
    assert!(rss < 64 * 1024, "RSS {rss} KiB after 10,000 sessions with a capacity of 1,000");
    still_answers(&mut client).await;
}

#[tokio::test]
async fn a_header_map_of_ten_thousand_entries_is_answered_and_harms_no_one() {
    let (sidecar, _dir) = capped_sidecar();
    let mut client = ReboundClient::new(connect(&sidecar.grpc).await)
        .max_encoding_message_size(64 << 20)
        .max_decoding_message_size(64 << 20);
    let mut outcome = failure("headers", "llm", "429 Too Many Requests");
    outcome.http_status = 429;
    outcome.headers = (0..10_000).map(|i| (format!("x-filler-{i}"), format!("value {i}"))).collect();
    outcome.headers.insert("Retry-After".into(), "7".into());
    match client.report(outcome).await {
        // Answered: the Retry-After among the noise is still honoured.
        Ok(v) => {
            let v = v.into_inner();
            assert_eq!(v.action, pb::Action::Retry as i32);
            assert!(v.retry.unwrap().delay_ms >= 7000);
        }
        // Or refused with a status that says what was too big.
        Err(status) => assert!(
            matches!(status.code(), tonic::Code::InvalidArgument | tonic::Code::ResourceExhausted),
            "{status:?}"
        ),
    }
    still_answers(&mut client).await;
}

#[tokio::test]
async fn clients_that_vanish_mid_stream_leave_no_streams_behind() {
    let (sidecar, _dir) = capped_sidecar();
    let metrics = sidecar.metrics.clone();
    let streams = |page: &str| gauge(page, "rebound_streams_active");
    let baseline = streams(&http_get(&metrics, "/metrics").await);
    // Twenty clients open a stream each, get one verdict, and vanish: their runtime is dropped with
    // the request sides still open, which closes their connections as a killed process would.
    let grpc = sidecar.grpc.clone();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let senders = runtime.block_on(async {
            let mut senders = Vec::new();
            for round in 0..20 {
                let mut client = ReboundClient::new(connect(&grpc).await);
                let (tx, rx) = tokio::sync::mpsc::channel(4);
                tx.send(failure(&format!("vanish-{round}"), "fetch", "connection reset by peer")).await.unwrap();
                let mut verdicts =
                    client.observe(tokio_stream::wrappers::ReceiverStream::new(rx)).await.unwrap().into_inner();
                assert!(verdicts.message().await.unwrap().is_some());
                senders.push((tx, verdicts, client));
            }
            senders
        });
        drop(runtime);
        drop(senders);
    })
    .join()
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let now = streams(&http_get(&metrics, "/metrics").await);
        if now <= baseline {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{now} streams still open 20 s after their clients left (baseline {baseline})"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut client = ReboundClient::new(connect(&sidecar.grpc).await);
    still_answers(&mut client).await;
}
