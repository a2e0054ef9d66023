//! Tool breakers shared across two real sidecar processes through a real
//! Redis (Debian's redis-server on a loopback port), including Redis dying
//! and coming back.

use crate::common::{failure, http_get, Sidecar};
use rebound::pb;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tonic::transport::Channel;

/// A redis-server child on a loopback port, without persistence.
struct Redis {
    child: Child,
    port: u16,
}

impl Redis {
    fn start(port: u16) -> Redis {
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("redis-server is needed for these tests (Debian: apt-get install redis-server): {e}")
            });
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "redis-server did not start on {port}");
            std::thread::sleep(Duration::from_millis(20));
        }
        Redis { child, port }
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.kill();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

struct Node {
    sidecar: Sidecar,
    client: pb::rebound_client::ReboundClient<Channel>,
}

async fn node(config: &std::path::Path) -> Node {
    let sidecar = Sidecar::spawn(&["--config", config.to_str().unwrap()]);
    let client = pb::rebound_client::ReboundClient::new(crate::common::connect(&sidecar.grpc).await);
    Node { sidecar, client }
}

async fn fail(node: &mut Node, session: &str, tool: &str) -> pb::Verdict {
    let o = pb::Outcome { http_status: 503, ..failure(session, tool, "503 Service Unavailable") };
    node.client.report(o).await.expect("a report never fails because of Redis").into_inner()
}

async fn allowed(node: &mut Node, tool: &str) -> bool {
    let request = pb::AdmitRequest { session_id: "probe-session".into(), tool: tool.into() };
    node.client.admit(request).await.expect("admit never fails because of Redis").into_inner().allowed
}

/// Polls Admit on `node` until `tool` is fenced off; returns how long it took.
async fn until_denied(node: &mut Node, tool: &str, limit: Duration) -> Duration {
    let start = Instant::now();
    while allowed(node, tool).await {
        assert!(start.elapsed() < limit, "{tool} still allowed after {:?}", start.elapsed());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    start.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sidecars_share_breakers_and_survive_redis_restarts() {
    let port = free_port();
    let mut redis = Redis::start(port);
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("shared.toml");
    std::fs::write(
        &config,
        format!("[state]\nbackend = \"redis\"\nredis_url = \"redis://127.0.0.1:{port}\"\nsync_interval_ms = 100\ntimeout_ms = 300\n"),
    )
    .unwrap();
    let mut a = node(&config).await;
    let mut b = node(&config).await;

    // A trip on A reaches B.
    for i in 0..5 {
        fail(&mut a, &format!("a-{i}"), "shared_search").await;
    }
    let took = until_denied(&mut b, "shared_search", Duration::from_secs(3)).await;
    println!("a trip on sidecar A reached sidecar B in {took:?}");

    // Failures spread over both sidecars add up: 3 on A and 2 on B open the tool everywhere.
    for i in 0..3 {
        fail(&mut a, &format!("sa-{i}"), "spread_tool").await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    for i in 0..2 {
        fail(&mut b, &format!("sb-{i}"), "spread_tool").await;
    }
    until_denied(&mut a, "spread_tool", Duration::from_secs(3)).await;
    until_denied(&mut b, "spread_tool", Duration::from_secs(3)).await;

    // Redis dies: both keep answering from local state, errors are counted, health stays SERVING.
    redis.kill();
    for i in 0..20 {
        let v = fail(&mut a, &format!("down-{i}"), &format!("local_tool_{i}")).await;
        assert_eq!(v.action, pb::Action::Retry as i32);
        assert!(allowed(&mut b, "some_other_tool").await);
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let body = http_get(&a.sidecar.metrics, "/metrics").await;
    let errors = body
        .lines()
        .find(|l| l.starts_with("rebound_state_backend_errors_total"))
        .and_then(|l| l.split_whitespace().last())
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(0.0);
    assert!(errors > 0.0, "backend errors not counted:\n{body}");
    let mut health = tonic_health::pb::health_client::HealthClient::new(crate::common::connect(&a.sidecar.grpc).await);
    let status =
        health.check(tonic_health::pb::HealthCheckRequest { service: String::new() }).await.unwrap().into_inner();
    assert_eq!(status.status, tonic_health::pb::health_check_response::ServingStatus::Serving as i32);

    // Redis returns on the same port: sharing resumes (after the reconnect backoff).
    let _redis_again = Redis::start(redis.port);
    let start = Instant::now();
    loop {
        for i in 0..5 {
            fail(&mut a, &format!("back-{i}"), "after_restart").await;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        if !allowed(&mut b, "after_restart").await {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "sharing did not resume");
    }
    println!("sharing resumed {:?} after Redis came back", start.elapsed());
}
