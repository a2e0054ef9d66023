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

/// The value of the unlabelled metric `name` on `node`, if it is there.
async fn metric(node: &Node, name: &str) -> Option<f64> {
    let body = http_get(&node.sidecar.metrics, "/metrics").await;
    body.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

/// Two sidecars on the Redis at `port` (sync every 100 ms), and the config's directory.
async fn pair(port: u16) -> (Node, Node, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("shared.toml");
    std::fs::write(
        &config,
        format!("[state]\nbackend = \"redis\"\nredis_url = \"redis://127.0.0.1:{port}\"\nsync_interval_ms = 100\ntimeout_ms = 300\n"),
    )
    .unwrap();
    (node(&config).await, node(&config).await, dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_another_program_writes_into_the_keys_is_replaced_not_trusted() {
    let port = free_port();
    let _redis = Redis::start(port);
    let (mut a, mut b, _dir) = pair(port).await;
    let mut r = redis::Client::open(format!("redis://127.0.0.1:{port}"))
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let (seconds, _): (i64, i64) = redis::cmd("TIME").query_async(&mut r).await.unwrap();
    let now_ms = seconds * 1000;
    // As a typo, an operator's hand, an older sidecar or another program on the prefix could write them:
    // an open 31 years long, one without end, a tool key of another type, fields that are no numbers.
    let _: () = redis::cmd("ZADD")
        .arg("rebound:open")
        .arg(now_ms + 1_000_000_000_000)
        .arg("far_tool")
        .arg("+inf")
        .arg("endless_tool")
        .query_async(&mut r)
        .await
        .unwrap();
    let _: () = redis::cmd("SET").arg("rebound:tool:typed_tool").arg("x").query_async(&mut r).await.unwrap();
    let _: () = redis::cmd("HSET")
        .arg("rebound:tool:garbage_tool")
        .arg(&["open_until", "soon", "opens", "x", "consec", "-y", "tokens", "nan"])
        .query_async(&mut r)
        .await
        .unwrap();

    // The bad keys' tools are pushed alongside a tool that trips: the trip still reaches B.
    for i in 0..5 {
        fail(&mut a, &format!("t-{i}"), "typed_tool").await;
        fail(&mut a, &format!("g-{i}"), "garbage_tool").await;
    }
    for i in 0..5 {
        fail(&mut a, &format!("a-{i}"), "tripped_tool").await;
    }
    until_denied(&mut b, "tripped_tool", Duration::from_secs(3)).await;

    // The opens no sidecar could have made are dropped, not obeyed.
    assert!(allowed(&mut b, "far_tool").await, "a 31-year open was obeyed");
    assert!(allowed(&mut b, "endless_tool").await, "an endless open was obeyed");
    let far: Option<f64> = redis::cmd("ZSCORE").arg("rebound:open").arg("far_tool").query_async(&mut r).await.unwrap();
    let endless: Option<f64> =
        redis::cmd("ZSCORE").arg("rebound:open").arg("endless_tool").query_async(&mut r).await.unwrap();
    assert_eq!((far, endless), (None, None));
    // The bad keys are the sidecars' own again: hashes of numbers, with an expiry.
    for key in ["rebound:tool:typed_tool", "rebound:tool:garbage_tool"] {
        let fields: std::collections::HashMap<String, String> =
            redis::cmd("HGETALL").arg(key).query_async(&mut r).await.unwrap();
        for field in ["open_until", "opens", "consec", "tokens"] {
            let value = fields.get(field).and_then(|v| v.parse::<f64>().ok());
            assert!(value.is_some_and(f64::is_finite), "{key} {field}: {fields:?}");
        }
        let ttl: i64 = redis::cmd("PTTL").arg(key).query_async(&mut r).await.unwrap();
        assert!(ttl > 0, "{key} has no expiry ({ttl})");
    }
    // A budget of `nan` tokens read back would have refused every retry of the tool for good.
    let v = fail(&mut b, "budget-1", "nan_budget_tool").await;
    assert_eq!(v.action, pb::Action::Retry as i32);
    let _: () = redis::cmd("HSET")
        .arg("rebound:tool:nan_budget_tool")
        .arg("tokens")
        .arg("nan")
        .query_async(&mut r)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    for i in 0..2 {
        let _ = b.client.report(crate::common::success(&format!("ok-{i}"), "nan_budget_tool")).await.unwrap();
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let v = fail(&mut b, "budget-2", "nan_budget_tool").await;
    assert_eq!(v.action, pb::Action::Retry as i32, "the retry budget was emptied by a nan: {v:?}");
    assert_eq!(metric(&a, "rebound_state_backend_up").await, Some(1.0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sidecars_share_breakers_and_survive_redis_restarts() {
    let port = free_port();
    let mut redis = Redis::start(port);
    let (mut a, mut b, _dir) = pair(port).await;

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

    assert_eq!(metric(&a, "rebound_state_backend_up").await, Some(1.0));

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
    assert_eq!(metric(&a, "rebound_state_backend_up").await, Some(0.0));
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn why_redis_cannot_be_reached_is_logged_not_a_timeout() {
    // Every failure to connect used to be logged as "redis did not answer within 500 ms".
    let redis = Redis::start(free_port());
    let closed = free_port();
    let dir = tempfile::tempdir().unwrap();
    for (url, said) in [
        (format!("redis://:wrong-password@127.0.0.1:{}", redis.port), "password authentication failed"),
        (format!("redis://127.0.0.1:{closed}"), "refused"),
    ] {
        let config = dir.path().join("unreachable.toml");
        std::fs::write(&config, format!("[state]\nbackend = \"redis\"\nredis_url = \"{url}\"\ntimeout_ms = 2000\n"))
            .unwrap();
        let (sidecar, log) = Sidecar::spawn_logged(&["--config", config.to_str().unwrap()]);
        let deadline = Instant::now() + Duration::from_secs(20);
        let line = loop {
            let found = log.lock().unwrap().iter().find(|l| l.contains("shared state unreachable")).cloned();
            if let Some(line) = found {
                break line;
            }
            assert!(Instant::now() < deadline, "{url}: nothing logged: {:?}", log.lock().unwrap());
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        assert!(line.to_lowercase().contains(said), "{url}: {line}");
        assert!(!line.contains("wrong-password"), "{line}");
        drop(sidecar);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_backend_error_counter_and_the_build_are_exported_from_the_start() {
    // The counter appeared with the first error, which `increase()` then missed.
    let redis = Redis::start(free_port());
    let (first, _second, _dir) = pair(redis.port).await;
    assert_eq!(metric(&first, "rebound_state_backend_errors_total").await, Some(0.0));
    let body = http_get(&first.sidecar.metrics, "/metrics").await;
    let build = format!("rebound_build_info{{version=\"{}\"}} 1", env!("CARGO_PKG_VERSION"));
    assert!(body.lines().any(|l| l == build), "{body}");
}
