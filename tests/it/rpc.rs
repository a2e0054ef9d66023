//! Every RPC through the real server.

use crate::common::{connect, failure, http_get, http_request, success, Sidecar, TestServer};
use rebound::pb;
use rebound::pb::rebound_client::ReboundClient;
use std::time::Duration;
use tonic::Code;

#[tokio::test]
async fn health_reports_serving_for_both_names() {
    let server = TestServer::start().await;
    let mut health = tonic_health::pb::health_client::HealthClient::new(server.channel.clone());
    for service in ["", "rebound.v1.Rebound"] {
        let reply =
            health.check(tonic_health::pb::HealthCheckRequest { service: service.into() }).await.unwrap().into_inner();
        assert_eq!(reply.status, tonic_health::pb::health_check_response::ServingStatus::Serving as i32, "{service:?}");
    }
    server.stop().await;
}

#[tokio::test]
async fn reflection_lists_the_service_in_v1_and_v1alpha() {
    use tonic_reflection::pb::{v1, v1alpha};
    let server = TestServer::start().await;
    let mut client = v1::server_reflection_client::ServerReflectionClient::new(server.channel.clone());
    let request = v1::ServerReflectionRequest {
        host: String::new(),
        message_request: Some(v1::server_reflection_request::MessageRequest::ListServices(String::new())),
    };
    let mut replies = client.server_reflection_info(tokio_stream::iter([request])).await.unwrap().into_inner();
    let reply = replies.message().await.unwrap().unwrap();
    let Some(v1::server_reflection_response::MessageResponse::ListServicesResponse(list)) = reply.message_response
    else {
        panic!("unexpected reflection reply");
    };
    let names: Vec<String> = list.service.into_iter().map(|s| s.name).collect();
    assert!(names.contains(&"rebound.v1.Rebound".to_string()), "{names:?}");
    assert!(names.contains(&"grpc.health.v1.Health".to_string()), "{names:?}");

    let mut alpha = v1alpha::server_reflection_client::ServerReflectionClient::new(server.channel.clone());
    let request = v1alpha::ServerReflectionRequest {
        host: String::new(),
        message_request: Some(v1alpha::server_reflection_request::MessageRequest::ListServices(String::new())),
    };
    let mut replies = alpha.server_reflection_info(tokio_stream::iter([request])).await.unwrap().into_inner();
    let reply = replies.message().await.unwrap().unwrap();
    assert!(format!("{reply:?}").contains("rebound.v1.Rebound"));
    server.stop().await;
}

#[tokio::test]
async fn a_429_with_retry_after_is_retried_after_the_providers_delay() {
    let mut server = TestServer::start().await;
    let outcome = pb::Outcome {
        http_status: 429,
        headers: [("retry-after".to_string(), "7".to_string())].into(),
        ..failure("rpc-429", "search", "Too Many Requests")
    };
    let v = server.client.report(outcome).await.unwrap().into_inner();
    assert_eq!(v.action, pb::Action::Retry as i32);
    let c = v.classification.unwrap();
    assert_eq!(c.category, pb::Category::RateLimited as i32);
    assert!(c.retryable);
    assert!(c.rule.starts_with("http."), "{}", c.rule);
    let retry = v.retry.unwrap();
    assert!((7000..=8400).contains(&retry.delay_ms), "{}", retry.delay_ms);
    assert!(retry.provider_delay);
    assert_eq!(v.breaker.unwrap().tool_state, pb::BreakerState::Closed as i32);
    server.stop().await;
}

#[tokio::test]
async fn observe_answers_two_thousand_outcomes_in_order() {
    let mut server = TestServer::start().await;
    let outcomes: Vec<pb::Outcome> = (0..2000)
        .map(|i| {
            let session = format!("obs-{}", i % 50);
            let mut o = if i % 3 == 0 {
                success(&session, "search")
            } else {
                failure(&session, "fetch", "503 Service Unavailable")
            };
            o.call_id = format!("call-{i}");
            o
        })
        .collect();
    let mut verdicts = server.client.observe(tokio_stream::iter(outcomes)).await.unwrap().into_inner();
    let mut seen = 0;
    while let Some(v) = verdicts.message().await.unwrap() {
        assert_eq!(v.call_id, format!("call-{seen}"));
        seen += 1;
    }
    assert_eq!(seen, 2000);
    server.stop().await;
}

#[tokio::test]
async fn context_start_admit_and_end_session() {
    let mut server = TestServer::start().await;
    let started = server
        .client
        .start_session(pb::StartSessionRequest {
            session_id: "life".into(),
            step_limit: 3,
            tools: vec!["search_web".into(), "read_file".into()],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(started.created);
    assert_eq!(started.step_limit, 3);
    let again = server
        .client
        .start_session(pb::StartSessionRequest {
            session_id: "life".into(),
            step_limit: 3,
            labels: [("run".to_string(), "it-1".to_string())].into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(!again.created, "StartSession is idempotent");

    let v = server
        .client
        .report(failure("life", "read_file", "No such file or directory: '/data/x.csv'"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(v.action, pb::Action::Recover as i32);
    let context = server
        .client
        .context(pb::ContextRequest { session_id: "life".into(), ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    assert!(context.text.contains("<error tool=\"read_file\" type=\"not_found\">\n"), "{}", context.text);
    assert_eq!(context.errors_shown, 1);

    let admit = server
        .client
        .admit(pb::AdmitRequest { session_id: "life".into(), tool: "search_web".into() })
        .await
        .unwrap()
        .into_inner();
    assert!(admit.allowed);
    server.client.report(success("life", "search_web")).await.unwrap();
    let v = server.client.report(success("life", "search_web")).await.unwrap().into_inner();
    assert_eq!(v.action, pb::Action::Abort as i32, "the third step reaches the limit of 3");
    let admit = server
        .client
        .admit(pb::AdmitRequest { session_id: "life".into(), tool: "search_web".into() })
        .await
        .unwrap()
        .into_inner();
    assert!(!admit.allowed);
    assert_eq!(admit.reason, pb::Reason::SessionStopped as i32);

    let ended =
        server.client.end_session(pb::EndSessionRequest { session_id: "life".into() }).await.unwrap().into_inner();
    assert!(ended.found);
    let summary = ended.summary.unwrap();
    assert_eq!((summary.calls, summary.errors), (3, 1));
    assert_eq!(summary.errors_by_category.get("not_found"), Some(&1));
    assert_eq!(summary.labels.get("run").map(String::as_str), Some("it-1"), "the labels StartSession declared last");
    let gone =
        server.client.end_session(pb::EndSessionRequest { session_id: "life".into() }).await.unwrap().into_inner();
    assert!(!gone.found);
    server.stop().await;
}

#[tokio::test]
async fn bad_inputs_get_invalid_argument_naming_the_field() {
    let mut server = TestServer::start().await;
    let err = server.client.report(failure("bad", "", "x")).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().contains("`tool`"), "{}", err.message());
    let err = server.client.report(pb::Outcome { kind: 42, ..failure("bad", "t", "x") }).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().contains("`kind` = 42"), "{}", err.message());
    let err = server.client.report(pb::Outcome { grpc_code: Some(99), ..failure("bad", "t", "x") }).await.unwrap_err();
    assert!(err.message().contains("`grpc_code` = 99"), "{}", err.message());
    // A call_id follows the rules of ids, as the proto says, except that it may be left out.
    let err =
        server.client.report(pb::Outcome { call_id: "c\0".into(), ..failure("bad", "t", "x") }).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().contains("`call_id` = \"c\\0\": must not contain control characters"), "{}", err.message());
    let err = server.client.admit(pb::AdmitRequest { session_id: String::new(), tool: "t".into() }).await.unwrap_err();
    assert!(err.message().contains("`session_id`"), "{}", err.message());
    let err = server
        .client
        .start_session(pb::StartSessionRequest { session_id: "s".into(), cost_limit: -1.0, ..Default::default() })
        .await
        .unwrap_err();
    assert!(err.message().contains("`cost_limit` = -1"), "{}", err.message());
    // A bad outcome in a stream ends that stream with a status naming its position.
    let stream = vec![success("bad-stream", "t"), failure("bad-stream", "", "x")];
    let mut verdicts = server.client.observe(tokio_stream::iter(stream)).await.unwrap().into_inner();
    assert!(verdicts.message().await.unwrap().is_some());
    let err = verdicts.message().await.unwrap_err();
    assert!(err.message().starts_with("outcome #1:"), "{}", err.message());
    // So does one large enough to be judged off the serving thread (see `server::LARGE_FAILURE_BYTES`).
    let large = "x".repeat(64 << 10);
    let stream = vec![success("bad-stream", "t"), failure("bad-stream", "", &large)];
    let mut verdicts = server.client.observe(tokio_stream::iter(stream)).await.unwrap().into_inner();
    assert!(verdicts.message().await.unwrap().is_some());
    let err = verdicts.message().await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().starts_with("outcome #1: ") && err.message().contains("`tool`"), "{}", err.message());
    // And another session is unharmed.
    let v = server.client.report(success("good", "t")).await.unwrap().into_inner();
    assert_eq!(v.action, pb::Action::Continue as i32);
    server.stop().await;
}

#[tokio::test]
async fn an_oversized_outcome_is_resource_exhausted_and_the_server_keeps_serving() {
    let mut server = TestServer::start().await;
    let huge = failure("big", "t", &"x".repeat(5 << 20));
    let err = server.client.report(huge.clone()).await.unwrap_err();
    assert_eq!(err.code(), Code::ResourceExhausted, "{err:?}");
    let stream = vec![success("big", "t"), success("big", "t"), huge];
    let mut verdicts = server.client.observe(tokio_stream::iter(stream)).await.unwrap().into_inner();
    for _ in 0..2 {
        assert_eq!(verdicts.message().await.unwrap().unwrap().action, pb::Action::Continue as i32);
    }
    let err = verdicts.message().await.unwrap_err();
    assert_eq!(err.code(), Code::ResourceExhausted, "{err:?}");
    // Which outcome of the stream it was, as for any other refused outcome.
    assert!(err.message().starts_with("outcome #2: "), "{err:?}");
    let v = server.client.report(success("big", "t")).await.unwrap().into_inner();
    assert_eq!(v.action, pb::Action::Continue as i32);
    server.stop().await;
}

#[tokio::test]
async fn metrics_count_outcomes_without_raw_text_in_labels() {
    let mut server = TestServer::start().await;
    server.client.report(failure("m", "metric_tool", "secret message text 12345")).await.unwrap();
    let body = http_get(&server.metrics_addr, "/metrics").await;
    assert!(body.starts_with("HTTP/1.1 200"), "{body}");
    assert!(body.contains("rebound_outcomes_total{"), "{body}");
    assert!(body.contains("tool=\"metric_tool\""), "{body}");
    assert!(body.contains("rebound_rpc_duration_seconds_bucket{method=\"Report\""), "{body}");
    assert!(!body.contains("secret message text"));
    assert!(http_get(&server.metrics_addr, "/nope").await.starts_with("HTTP/1.1 404"));
    server.stop().await;
}

/// The value of the sample `name{labels}` on a metrics page (`name` alone when `labels` is empty).
fn sample(page: &str, name: &str, labels: &str) -> Option<f64> {
    let prefix = if labels.is_empty() { format!("{name} ") } else { format!("{name}{{{labels}}} ") };
    page.lines().find_map(|l| l.strip_prefix(prefix.as_str())).and_then(|v| v.trim().parse().ok())
}

#[tokio::test]
async fn failure_analyses_are_counted_as_reused_or_new() {
    // The real binary: its metrics are its own, not those of every test in this process.
    let sidecar = Sidecar::spawn(&[]);
    let mut client = ReboundClient::new(connect(&sidecar.grpc).await);
    let counts = |page: &str| {
        let count = |result| sample(page, "rebound_failure_analyses_total", &format!("result=\"{result}\""));
        (count("new"), count("reused"))
    };
    let page = http_get(&sidecar.metrics, "/metrics").await;
    assert_eq!(counts(&page), (Some(0.0), Some(0.0)), "exported from the start: {page}");
    // The same failure four times: analysed twice (the second time it is kept), then found twice.
    let message = "HTTPSConnectionPool(host='api.example.com', port=443): Read timed out. (read timeout=30)";
    for i in 0..4 {
        client.report(failure(&format!("analyses-{i}"), "search", message)).await.unwrap();
    }
    client.report(success("analyses-0", "search")).await.unwrap();
    let page = http_get(&sidecar.metrics, "/metrics").await;
    assert_eq!(counts(&page), (Some(2.0), Some(2.0)), "{page}");
}

#[tokio::test]
async fn texts_the_rules_lazy_dfa_gives_up_on_are_counted() {
    // A rule with a Unicode word boundary: the lazy DFA quits at the first non-ASCII byte it
    // meets, and the PikeVM searches that text instead (`rebound::message_patterns`).
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("rebound.toml");
    let rule = "[[rules]]\nid = \"acme.fehler\"\nmessage = ['(?u:\\bfehler\\b)']\ncategory = \"unavailable\"\n";
    std::fs::write(&config, rule).unwrap();
    let sidecar = Sidecar::spawn(&["--config", config.to_str().unwrap()]);
    let mut client = ReboundClient::new(connect(&sidecar.grpc).await);
    let count = |page: &str| sample(page, "rebound_message_pattern_fallbacks_total", "");
    let page = http_get(&sidecar.metrics, "/metrics").await;
    assert_eq!(count(&page), Some(0.0), "exported from the start: {page}");
    let verdict = client.report(failure("fallbacks", "search", "Fehler: Zeitüberschreitung")).await.unwrap();
    assert_eq!(verdict.into_inner().classification.unwrap().rule, "acme.fehler", "the PikeVM's answer");
    // The count is copied to the metric every 100 ms.
    let mut page = String::new();
    for _ in 0..50 {
        page = http_get(&sidecar.metrics, "/metrics").await;
        if count(&page) == Some(1.0) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("one text searched by the PikeVM, not counted: {page}");
}

#[tokio::test]
async fn the_metrics_endpoint_answers_get_and_head_and_refuses_other_methods() {
    let server = TestServer::start().await;
    let head = http_request(&server.metrics_addr, "HEAD", "/metrics").await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(!head.contains("rebound_"), "a HEAD answered with a body: {head}");
    for method in ["POST", "PUT", "DELETE"] {
        let answer = http_request(&server.metrics_addr, method, "/metrics").await;
        assert!(answer.starts_with("HTTP/1.1 405"), "{method}: {answer}");
        assert!(answer.to_ascii_lowercase().contains("allow: get, head"), "{method}: {answer}");
        assert!(!answer.contains("rebound_"), "{method} was answered with the metrics: {answer}");
    }
    server.stop().await;
}

/// A client on the Unix socket at `path`.
async fn unix_client(
    path: &std::path::Path,
) -> Result<pb::rebound_client::ReboundClient<tonic::transport::Channel>, tonic::transport::Error> {
    let socket = path.to_path_buf();
    let channel = tonic::transport::Endpoint::from_static("http://localhost")
        .connect_with_connector(tower::service_fn(move |_: tonic::transport::Uri| {
            let socket = socket.clone();
            async move {
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(tokio::net::UnixStream::connect(socket).await?))
            }
        }))
        .await?;
    Ok(pb::rebound_client::ReboundClient::new(channel))
}

#[tokio::test]
async fn unix_socket_serving() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rebound.sock");
    let address = format!("unix:{}", path.display());
    let sidecar = Sidecar::spawn(&["--listen", &address]);
    assert_eq!(sidecar.grpc, address);
    let mut client = unix_client(&path).await.unwrap();
    let v = client.report(success("unix", "t")).await.unwrap().into_inner();
    assert_eq!(v.action, pb::Action::Continue as i32);
}

#[tokio::test]
async fn a_second_sidecar_on_a_socket_in_use_refuses_to_start_and_the_first_keeps_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rebound.sock");
    let address = format!("unix:{}", path.display());
    let first = Sidecar::spawn(&["--listen", &address]);
    // Taking the path over would leave the first sidecar running but unreachable.
    let mut second = Sidecar::command(&["--listen", &address])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while second.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = second.kill();
            panic!("the second sidecar started on the path the first serves on");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let out = second.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(&format!("binding --listen {address}")), "{stderr}");
    assert!(stderr.contains("is in use: a process (another sidecar?) serves on it"), "{stderr}");
    let mut client = unix_client(&path).await.expect("the first sidecar is still reachable at the path");
    let v = client.report(success("still-first", "t")).await.unwrap().into_inner();
    assert_eq!(v.action, pb::Action::Continue as i32);
    drop(first);
}

#[tokio::test]
async fn a_socket_file_left_by_a_killed_sidecar_is_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rebound.sock");
    let address = format!("unix:{}", path.display());
    let mut killed = Sidecar::spawn(&["--listen", &address]);
    killed.signal("KILL");
    killed.wait_for_exit(Duration::from_secs(10)).expect("SIGKILL ends it");
    assert!(path.exists(), "SIGKILL leaves the socket file");
    let _next = Sidecar::spawn(&["--listen", &address]);
    let mut client = unix_client(&path).await.expect("the next sidecar serves at the path");
    let v = client.report(success("after-kill", "t")).await.unwrap().into_inner();
    assert_eq!(v.action, pb::Action::Continue as i32);
}

#[tokio::test]
async fn sigterm_reports_not_serving_drains_and_exits_zero() {
    let mut sidecar = Sidecar::spawn(&[]);
    let channel = crate::common::connect(&sidecar.grpc).await;
    let mut client = pb::rebound_client::ReboundClient::new(channel.clone());
    // An open stream with one outcome answered.
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    tx.send(success("term", "t")).await.unwrap();
    let mut verdicts = client.observe(tokio_stream::wrappers::ReceiverStream::new(rx)).await.unwrap().into_inner();
    assert!(verdicts.message().await.unwrap().is_some());
    let started = std::time::Instant::now();
    sidecar.signal("TERM");
    // The open stream still answers while draining.
    tx.send(success("term", "t")).await.unwrap();
    let drained = tokio::time::timeout(Duration::from_secs(5), verdicts.message()).await.unwrap();
    assert!(matches!(drained, Ok(Some(_))), "{drained:?}");
    drop(tx);
    let status = tokio::task::spawn_blocking(move || sidecar.wait_for_exit(Duration::from_secs(12)))
        .await
        .unwrap()
        .expect("exits within the grace period");
    assert!(status.success(), "{status:?}");
    assert!(started.elapsed() < Duration::from_secs(12));
}

#[tokio::test]
async fn sigterm_with_an_idle_open_stream_exits_after_the_grace_period() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("c.toml");
    std::fs::write(&config, "[server]\nshutdown_delay_ms = 1500\nshutdown_grace_ms = 500\n").unwrap();
    let mut sidecar = Sidecar::spawn(&["--config", config.to_str().unwrap()]);
    let channel = crate::common::connect(&sidecar.grpc).await;
    let mut client = pb::rebound_client::ReboundClient::new(channel.clone());
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel);
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    tx.send(success("idle", "t")).await.unwrap();
    let mut verdicts = client.observe(tokio_stream::wrappers::ReceiverStream::new(rx)).await.unwrap().into_inner();
    assert!(verdicts.message().await.unwrap().is_some());
    sidecar.signal("TERM");
    // Health turns NOT_SERVING while the stream keeps the server draining.
    let mut not_serving = false;
    for _ in 0..50 {
        match health.check(tonic_health::pb::HealthCheckRequest { service: String::new() }).await {
            Ok(r)
                if r.get_ref().status == tonic_health::pb::health_check_response::ServingStatus::NotServing as i32 =>
            {
                not_serving = true;
                break;
            }
            Err(_) => break,
            _ => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
    assert!(not_serving, "health never said NOT_SERVING");
    // The open stream is ended with UNAVAILABLE when the grace period is over.
    let end = tokio::time::timeout(Duration::from_secs(5), verdicts.message()).await.unwrap();
    assert!(end.is_err() || matches!(end, Ok(None)), "{end:?}");
    let status = tokio::task::spawn_blocking(move || sidecar.wait_for_exit(Duration::from_secs(5))).await.unwrap();
    assert!(status.expect("exited").success());
    drop(tx);
}

#[tokio::test]
async fn user_rules_from_the_config_override_defaults_and_add_new_ones_through_the_server() {
    let config = rebound::config::Config::parse(
        r#"
[[rules]]
id = "http.404"
http_status = [404]
category = "unavailable"

[[rules]]
id = "acme.frobnicator"
message = ["frobnicator declined"]
category = "rate_limited"
"#,
        "test",
    )
    .unwrap();
    let mut server = TestServer::start_with(config).await;
    let v = server
        .client
        .report(pb::Outcome { http_status: 404, ..failure("rules", "a", "Not Found") })
        .await
        .unwrap()
        .into_inner();
    let c = v.classification.unwrap();
    assert_eq!((c.category, c.rule.as_str()), (pb::Category::Unavailable as i32, "http.404"));
    let v = server.client.report(failure("rules", "b", "the frobnicator declined")).await.unwrap().into_inner();
    assert_eq!(v.classification.unwrap().rule, "acme.frobnicator");
    server.stop().await;
}

#[tokio::test]
async fn admit_gives_a_metric_label_only_to_tools_that_reported_or_were_declared() {
    // Admit on a name the model made up took one of the label cap's places, as Report does not.
    let mut server = TestServer::start().await;
    let tools = vec!["declared_label_tool".to_string()];
    let start = pb::StartSessionRequest { session_id: "labels".into(), tools, ..Default::default() };
    server.client.start_session(start).await.unwrap();
    server.client.report(success("labels", "reported_label_tool")).await.unwrap();
    for tool in ["made_up_label_tool", "declared_label_tool", "reported_label_tool"] {
        let request = pb::AdmitRequest { session_id: "labels".into(), tool: tool.into() };
        assert!(server.client.admit(request).await.unwrap().into_inner().allowed, "{tool}");
    }
    let body = http_get(&server.metrics_addr, "/metrics").await;
    assert!(!body.contains("made_up_label_tool"), "{body}");
    for tool in ["declared_label_tool", "reported_label_tool"] {
        let line = format!("rebound_admit_total{{tool=\"{tool}\",decision=\"allowed\"}} 1");
        assert!(body.lines().any(|l| l == line), "{line}: {body}");
    }
    server.stop().await;
}
