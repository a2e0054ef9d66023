//! Abuse through the real binary: more tools, sessions and headers than anyone
//! should send, huge tool output, clients that vanish mid-stream or stop reading,
//! bytes that are not protobuf, and replay input that is not JSON lines. Each test
//! checks the bound that must hold (label cap, session cap, RSS, stream gauge, a
//! status rather than a hang) and that the sidecar still answers another session
//! afterwards, or meanwhile.

use crate::common::{connect, failure, http_get, run_cli, success, Sidecar};
use rebound::pb;
use rebound::pb::rebound_client::ReboundClient;
use std::collections::HashSet;
use std::time::{Duration, Instant};

/// A sidecar with small caps, so that the abuse goes past them quickly.
fn capped_sidecar() -> (Sidecar, tempfile::TempDir) {
    Sidecar::with_config("[sessions]\ncapacity = 1000\nshards = 8\n\n[metrics]\ntool_label_cap = 50\n")
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
async fn a_flood_of_distinct_failing_tools_leaves_the_tools_named_after_it_guarded() {
    // Found by review: once the cap was reached, every tool named afterwards had no breaker
    // (and no retry budget) until the sidecar restarted.
    let (sidecar, _dir) = Sidecar::with_config("[tool_breaker]\nmax_tools = 100\n");
    let mut client = ReboundClient::new(connect(&sidecar.grpc).await);
    let unavailable = |session: &str, tool: &str| pb::Outcome {
        http_status: 503,
        ..failure(session, tool, "503 Service Unavailable")
    };
    let flood: Vec<pb::Outcome> =
        (0..2_000).map(|i| unavailable(&format!("flood-{i}"), &format!("junk-{i}"))).collect();
    let mut verdicts = client.observe(tokio_stream::iter(flood)).await.unwrap().into_inner();
    while verdicts.message().await.unwrap().is_some() {}

    for i in 0..5 {
        client.report(unavailable(&format!("agent-{i}"), "search_b")).await.unwrap();
    }
    let admit = pb::AdmitRequest { session_id: "newcomer".into(), tool: "search_b".into() };
    let a = client.admit(admit).await.unwrap().into_inner();
    assert!(!a.allowed, "five failures across sessions fence the tool off, after the flood as before it");
    assert_eq!(a.tool_state, pb::BreakerState::Open as i32);
    still_answers(&mut client).await;
}

#[tokio::test]
async fn sessions_that_declare_all_they_may_are_held_within_the_byte_budget() {
    // Found by review: each StartSession may declare 1,000 tools of 256 bytes and 64 labels of
    // over a kilobyte (about 340 KB a session); a few hundred took 377 MB, with room in the
    // capacity for a hundred thousand.
    const BUDGET: u64 = 16 << 20;
    let (sidecar, _dir) = Sidecar::with_config(&format!("[sessions]\nmax_bytes = {BUDGET}\n"));
    let mut client = ReboundClient::new(connect(&sidecar.grpc).await);
    let before = rss_kib(sidecar.child.id());
    for s in 0..400 {
        let request = pb::StartSessionRequest {
            session_id: format!("declares-{s}"),
            tools: (0..1000).map(|i| format!("{s:05}-{i:04}-{}", "x".repeat(245))).collect(),
            labels: (0..64).map(|i| (format!("{s:05}-{i:02}-{}", "k".repeat(240)), "v".repeat(1024))).collect(),
            ..Default::default()
        };
        client.start_session(request).await.unwrap();
    }
    let grown = rss_kib(sidecar.child.id()).saturating_sub(before);
    // 400 such sessions held would be 136 MB; the budget keeps 16 MiB of them, with the
    // allocator's overhead and the requests' buffers on top.
    assert!(grown < 64 * 1024, "RSS grew by {grown} KiB for a byte budget of {} KiB", BUDGET / 1024);
    let page = http_get(&sidecar.metrics, "/metrics").await;
    let evicted = labelled(&page, "rebound_sessions_evicted_total", "reason=\"memory\"");
    assert!(evicted >= 300.0, "{evicted} sessions evicted for memory");
    let bytes = gauge(&page, rebound::metrics::SESSIONS_BYTES);
    assert!(bytes <= (BUDGET + 400_000) as f64, "{bytes} bytes held past a budget of {BUDGET}");
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

// ---------------------------------------------------------------------------
// Many sessions

/// Sessions opened by the many-sessions test. The issue asks for 1,000,000, which takes about 65 s in
/// a debug build on two shared cores; 200,000 takes about 10 s and is still twenty times the capacity,
/// which is what the test is about: past the cap the store only evicts, so more sessions add run time,
/// not memory. (Measured here: RSS 38 MiB after the first 20,000 sessions, 46 MiB after 200,000,
/// 50 MiB after 1,000,000.)
const MANY_SESSIONS: usize = 200_000;
/// The session capacity of that sidecar.
const MANY_CAPACITY: usize = 10_000;
/// Observe streams the sessions are pipelined over, one connection each.
const MANY_STREAMS: usize = 4;
/// The RSS the sidecar stays under with `MANY_CAPACITY` sessions, after any number of them: 50 MiB
/// measured after a million; a store that kept every session passes it at about 80,000.
const MANY_RSS_BOUND_KIB: u64 = 96 * 1024;
/// How much RSS may grow from the first `2 × MANY_CAPACITY` sessions to the last: the allocator still
/// settles after the store is full (7 to 8 MiB measured), while keeping the 180,000 sessions it evicts
/// takes 140 MiB (measured with the cap lifted).
const MANY_RSS_GROWTH_KIB: u64 = 16 * 1024;

/// The value of a labelled counter or gauge line (`name{labels} value`) in a Prometheus text page.
fn labelled(page: &str, name: &str, labels: &str) -> f64 {
    let prefix = format!("{name}{{{labels}}} ");
    page.lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name}{{{labels}}} in the metrics page"))
}

/// Opens sessions `range`, one outcome each, over `MANY_STREAMS` Observe streams at once, and
/// waits for every verdict.
async fn open_sessions(grpc: &str, range: std::ops::Range<usize>) {
    let mut streams = Vec::new();
    for lane in 0..MANY_STREAMS {
        let mut client = ReboundClient::new(connect(grpc).await);
        let range = range.clone();
        streams.push(tokio::spawn(async move {
            // Built as they are sent, so the test's own memory stays small too.
            let outcomes = range.skip(lane).step_by(MANY_STREAMS).map(|i| {
                let (session, tool) = (format!("many-{i}"), format!("tool-{}", i % 8));
                if i % 4 == 0 {
                    // Python requests 2.31 on a read timeout; a stored error makes the session realistic.
                    failure(
                        &session,
                        &tool,
                        "HTTPSConnectionPool(host='api.example.com', port=443): Read timed out. (read timeout=10)",
                    )
                } else {
                    success(&session, &tool)
                }
            });
            let mut verdicts = client.observe(tokio_stream::iter(outcomes)).await.unwrap().into_inner();
            let mut answered = 0;
            while verdicts.message().await.unwrap().is_some() {
                answered += 1;
            }
            answered
        }));
    }
    let mut answered = 0;
    for stream in streams {
        answered += stream.await.unwrap();
    }
    assert_eq!(answered, range.len(), "verdicts for sessions {range:?}");
}

#[tokio::test]
async fn many_sessions_are_evicted_past_the_cap_and_memory_stays_flat() {
    let (sidecar, _dir) = Sidecar::with_config(&format!("[sessions]\ncapacity = {MANY_CAPACITY}\nshards = 16\n"));
    let pid = sidecar.child.id();

    open_sessions(&sidecar.grpc, 0..2 * MANY_CAPACITY).await;
    let full = rss_kib(pid);
    open_sessions(&sidecar.grpc, 2 * MANY_CAPACITY..MANY_SESSIONS).await;
    let after = rss_kib(pid);

    let page = http_get(&sidecar.metrics, "/metrics").await;
    let active = gauge(&page, rebound::metrics::SESSIONS_ACTIVE);
    assert!(active <= MANY_CAPACITY as f64, "{active} sessions active past a capacity of {MANY_CAPACITY}");
    let evicted = labelled(&page, rebound::metrics::SESSIONS_EVICTED_TOTAL, "reason=\"capacity\"");
    assert!(
        evicted >= (MANY_SESSIONS - MANY_CAPACITY) as f64,
        "{evicted} capacity evictions after {MANY_SESSIONS} sessions with a capacity of {MANY_CAPACITY}"
    );
    assert!(after < MANY_RSS_BOUND_KIB, "RSS {after} KiB after {MANY_SESSIONS} sessions");
    assert!(
        after.saturating_sub(full) < MANY_RSS_GROWTH_KIB,
        "RSS grew from {full} KiB after {} sessions to {after} KiB after {MANY_SESSIONS}",
        2 * MANY_CAPACITY
    );
    let mut client = ReboundClient::new(connect(&sidecar.grpc).await);
    still_answers(&mut client).await;
}

/// The largest capacity the config takes, with no session yet, holds little more than the default:
/// the store's tables grow with the sessions, not with the capacity (made for it at once, they held
/// 143 MiB).
#[tokio::test]
async fn the_largest_session_capacity_costs_nothing_before_the_sessions_come() {
    const LARGEST: usize = 100_000_000;
    let (sidecar, _dir) = Sidecar::with_config(&format!("[sessions]\ncapacity = {LARGEST}\n"));
    let idle = rss_kib(sidecar.child.id());
    assert!(idle < 48 * 1024, "RSS {idle} KiB with a capacity of {LARGEST} and no session");
    let mut client = ReboundClient::new(connect(&sidecar.grpc).await);
    still_answers(&mut client).await;
}

/// The binary runs on jemalloc with one background thread (`rebound::memory`), which gives
/// freed pages back while nothing else happens: no call, no allocation needed to trigger it.
#[tokio::test]
#[cfg(feature = "jemalloc")]
async fn an_idle_sidecar_gives_back_the_memory_of_a_burst() {
    /// Outcomes of the burst below, all in flight at once, each with a 3 MB `detail`.
    const BURST_CALLS: usize = 24;
    /// How far above its RSS before the burst an idle sidecar must come back (the burst takes it
    /// 70-80 MiB up: 24 details of 3 MB, each held as received and as the outcome's string).
    const BURST_RSS_LEFT_KIB: u64 = 24 * 1024;
    /// How long it may take (jemalloc's background thread gives back pages freed for a second).
    const BURST_RSS_WAIT: Duration = Duration::from_secs(30);

    let sidecar = Sidecar::spawn(&[]);
    let pid = sidecar.child.id();
    let threads: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .map(|task| std::fs::read_to_string(task.unwrap().path().join("comm")).unwrap().trim().to_string())
        .collect();
    assert_eq!(threads.iter().filter(|name| *name == "jemalloc_bg_thd").count(), 1, "threads: {threads:?}");

    let channel = connect(&sidecar.grpc).await;
    let detail = "  File \"/app/agent/tools.py\", line 42, in call\n".repeat(3_000_000 / 50);
    let before = rss_kib(pid);
    let calls: Vec<_> = (0..BURST_CALLS)
        .map(|i| {
            let mut client = ReboundClient::new(channel.clone());
            let mut outcome = failure(&format!("burst-{i}"), "search", "ConnectionResetError: [Errno 104]");
            outcome.detail = detail.clone();
            tokio::spawn(async move { client.report(outcome).await.map(|v| v.into_inner().action) })
        })
        .collect();
    for call in calls {
        let answer = call.await.unwrap();
        assert!(answer.is_ok(), "{answer:?}");
    }
    let peak = rss_kib(pid);
    let deadline = Instant::now() + BURST_RSS_WAIT;
    let mut now = peak;
    while now > before + BURST_RSS_LEFT_KIB && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(250)).await;
        now = rss_kib(pid);
    }
    assert!(
        now <= before + BURST_RSS_LEFT_KIB,
        "RSS {now} KiB {} s after the burst (before it {before} KiB, right after it {peak} KiB)",
        BURST_RSS_WAIT.as_secs()
    );
    let mut client = ReboundClient::new(channel);
    still_answers(&mut client).await;
}

// ---------------------------------------------------------------------------
// A slow reader on Observe

/// Outcomes the slow reader sends on its one stream.
const SLOW_OUTCOMES: usize = 50_000;
/// How long, at least, it leaves its verdicts unread.
const SLOW_STALL: Duration = Duration::from_secs(3);
/// How much the sidecar's RSS may grow while the reader stalls. What it holds is bounded by the
/// HTTP/2 windows (a verdict is decided only when the transport takes it, so none wait in a queue:
/// the stream's send window of encoded verdicts and its 1 MiB receive window of unread outcomes)
/// and the capped session store: 2.5 to 4.6 MiB measured. (The client's 2 MiB receive window is
/// why some 5,000 outcomes are answered before the stream stops.) Buffering every verdict instead
/// would take at least their 22 MB encoded, more as structs, and reading every outcome ahead 69 MB.
const SLOW_RSS_GROWTH_KIB: u64 = 10 * 1024;
/// Its tool, so its outcomes can be counted in the metrics page.
const SLOW_TOOL: &str = "slow-reader";

/// A real 4 KB message: aiohttp failing to connect, traceback and all (tests/data/traces).
const TRACE_4K: &str = include_str!("../data/traces/py-aiohttp-connect.txt");

/// The slow reader's outcome `i`, in a session of its own so that every failure gets a full
/// snippet: a third carry the 4 KB trace, a third a one-line error, a third succeed.
fn slow_outcome(i: usize) -> pb::Outcome {
    let session = format!("slow-{i}");
    let mut outcome = match i % 3 {
        0 => failure(&session, SLOW_TOOL, TRACE_4K),
        // Envoy's answer when the upstream resets the connection.
        1 => failure(
            &session,
            SLOW_TOOL,
            "upstream connect error or disconnect/reset before headers. reset reason: connection termination",
        ),
        _ => success(&session, SLOW_TOOL),
    };
    outcome.call_id = i.to_string();
    outcome
}

/// Outcomes of `tool` the sidecar has answered, from its metrics page.
async fn outcomes_answered(metrics: &str, tool: &str) -> f64 {
    let label = format!("tool=\"{tool}\"");
    http_get(metrics, "/metrics")
        .await
        .lines()
        .filter(|l| l.starts_with("rebound_outcomes_total{") && l.contains(&label))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test]
async fn a_slow_observe_reader_is_held_back_by_bounded_buffers_and_blocks_no_one() {
    let (sidecar, _dir) = capped_sidecar();
    let pid = sidecar.child.id();
    // Warm the allocator, the session store and the connection machinery before the baseline.
    open_sessions(&sidecar.grpc, 0..2_000).await;
    let baseline = rss_kib(pid);

    let slow_channel = connect(&sidecar.grpc).await;
    let mut slow = ReboundClient::new(slow_channel.clone());
    let outcomes = tokio_stream::iter((0..SLOW_OUTCOMES).map(slow_outcome));
    let mut verdicts = slow.observe(outcomes).await.unwrap().into_inner();
    let stalled_at = Instant::now();

    // Unread, the stream comes to a stop short of the end: the HTTP/2 windows fill, and the
    // server stops reading outcomes.
    let mut peak = baseline;
    let mut last = -1.0;
    let held = loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        peak = peak.max(rss_kib(pid));
        let now = outcomes_answered(&sidecar.metrics, SLOW_TOOL).await;
        if now == last {
            break now;
        }
        assert!(
            stalled_at.elapsed() < Duration::from_secs(30),
            "the unread stream is still being answered after 30 s: {now} outcomes"
        );
        last = now;
    };
    assert!(held < SLOW_OUTCOMES as f64, "all {held} outcomes answered with no verdict read");

    // Meanwhile others are answered: on another connection, and on the slow reader's own.
    let limit = Duration::from_secs(30);
    let mut other = ReboundClient::new(connect(&sidecar.grpc).await);
    tokio::time::timeout(limit, still_answers(&mut other)).await.expect("another connection's Report hung");
    let mut same = ReboundClient::new(slow_channel);
    tokio::time::timeout(limit, still_answers(&mut same)).await.expect("a Report beside the slow stream hung");

    while stalled_at.elapsed() < SLOW_STALL {
        tokio::time::sleep(Duration::from_millis(250)).await;
        peak = peak.max(rss_kib(pid));
    }
    let still_held = outcomes_answered(&sidecar.metrics, SLOW_TOOL).await;
    assert!(still_held < SLOW_OUTCOMES as f64, "the slow stream was answered in full while unread");

    // Then everything, once each and in order.
    let mut received = 0usize;
    let mut verdict_bytes = 0usize;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(180);
    while let Some(v) = tokio::time::timeout_at(deadline, verdicts.message()).await.expect("verdicts stopped").unwrap()
    {
        assert_eq!(v.call_id, received.to_string(), "verdict {received} out of order");
        assert!(!v.replayed, "verdict {received} replayed");
        verdict_bytes += prost::Message::encoded_len(&v);
        received += 1;
    }
    assert_eq!(received, SLOW_OUTCOMES);

    // Holding every verdict takes at least their encoded size (22 MB here); make sure the run is big
    // enough for that to pass the bound, then that the server stayed under it while unread.
    let growth = peak.saturating_sub(baseline);
    assert!(
        verdict_bytes as u64 / 1024 >= 2 * SLOW_RSS_GROWTH_KIB,
        "{verdict_bytes} bytes of verdicts: too few to tell buffering from backpressure"
    );
    assert!(
        growth < SLOW_RSS_GROWTH_KIB,
        "RSS grew by {growth} KiB (from {baseline}) while {verdict_bytes} bytes of verdicts went unread"
    );
    still_answers(&mut other).await;
}

// ---------------------------------------------------------------------------
// Malformed protobuf bytes

/// The largest message the malformed-bytes sidecar accepts.
const RAW_MAX_MESSAGE: usize = 1 << 20;

/// A gRPC message frame: the compressed flag, the length, the bytes.
fn frame(compressed: bool, claimed_len: u32, bytes: &[u8]) -> Vec<u8> {
    let mut out = vec![u8::from(compressed)];
    out.extend_from_slice(&claimed_len.to_be_bytes());
    out.extend_from_slice(bytes);
    out
}

/// A frame whose length is the bytes' own.
fn message(bytes: &[u8]) -> Vec<u8> {
    frame(false, bytes.len() as u32, bytes)
}

/// What a raw gRPC call got back: its status, and the messages before it.
struct RawAnswer {
    status: tonic::Status,
    messages: Vec<Vec<u8>>,
}

/// Posts `body` as is to a Rebound method: tonic's channel as a plain HTTP/2 client, so that
/// nothing checks or re-frames the bytes on the way out.
async fn raw_call(channel: &tonic::transport::Channel, method: &str, body: Vec<u8>) -> RawAnswer {
    use http_body_util::BodyExt;
    use tower::ServiceExt;
    let request = http::Request::builder()
        .method("POST")
        .uri(format!("http://localhost/rebound.v1.Rebound/{method}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(tonic::body::Body::new(http_body_util::Full::new(hyper::body::Bytes::from(body))))
        .unwrap();
    let call = async {
        let response = channel.clone().oneshot(request).await.expect("HTTP/2 exchange");
        assert_eq!(response.status(), http::StatusCode::OK, "{method}");
        let (parts, body) = response.into_parts();
        let collected = body.collect().await.expect("response body");
        let trailers = collected.trailers().cloned().unwrap_or_default();
        let status = tonic::Status::from_header_map(&parts.headers)
            .or_else(|| tonic::Status::from_header_map(&trailers))
            .expect("a grpc-status in the headers or trailers");
        let data = collected.to_bytes();
        let mut messages = Vec::new();
        let mut rest = &data[..];
        while rest.len() >= 5 {
            let len = u32::from_be_bytes(rest[1..5].try_into().unwrap()) as usize;
            messages.push(rest[5..5 + len].to_vec());
            rest = &rest[5 + len..];
        }
        RawAnswer { status, messages }
    };
    tokio::time::timeout(Duration::from_secs(30), call).await.unwrap_or_else(|_| panic!("{method}: no answer in 30 s"))
}

#[tokio::test]
async fn malformed_protobuf_bytes_get_a_status_and_harm_no_one() {
    let (mut sidecar, _dir) = Sidecar::with_config(&format!("[server]\nmax_message_bytes = {RAW_MAX_MESSAGE}\n"));
    let channel = connect(&sidecar.grpc).await;
    let valid = prost::Message::encode_to_vec(&failure("raw", "fetch", "connection reset by peer"));

    // Bodies a confused or hostile client might send, each refused by the protobuf decoder.
    let garbage: [(&str, Vec<u8>); 6] = [
        ("wire type 7", vec![0x0f, 0x01]),
        ("a string cut short", vec![0x0a, 100, b'a', b'b', b'c']),
        ("a string not UTF-8", vec![0x0a, 2, 0xff, 0xfe]),
        ("a varint that never ends", vec![0xff; 11]),
        ("a field number of 0", vec![0x02, 0x00]),
        ("the valid outcome cut in half", valid[..valid.len() / 2].to_vec()),
    ];
    // And frames that are wrong as gRPC.
    let framing: [(&str, Vec<u8>); 4] = [
        ("a frame shorter than its length", frame(false, 100, b"0123456789")),
        ("half a frame header", vec![0, 0, 0]),
        ("the compressed flag with no grpc-encoding", frame(true, valid.len() as u32, &valid)),
        ("no message at all", Vec::new()),
    ];
    for method in ["Report", "Observe"] {
        let cases = garbage.iter().map(|(what, bytes)| (*what, message(bytes))).chain(framing.iter().cloned());
        for (what, body) in cases {
            let answer = raw_call(&channel, method, body).await;
            let (code, text) = (answer.status.code(), answer.status.message());
            if method == "Observe" && what == "no message at all" {
                // An Observe stream with no outcomes is a stream that ends: no verdicts, OK.
                assert_eq!(code, tonic::Code::Ok, "{method}, {what}: {text}");
                assert!(answer.messages.is_empty());
                continue;
            }
            assert!(
                matches!(code, tonic::Code::Internal | tonic::Code::InvalidArgument),
                "{method}, {what}: {code:?} {text}"
            );
            assert!(!text.is_empty(), "{method}, {what}: {code:?} with no message");
            assert!(answer.messages.is_empty(), "{method}, {what}: a verdict for bad bytes");
        }

        // A length past max_message_bytes is refused from the header alone, before the bytes come.
        for claimed in [RAW_MAX_MESSAGE as u32 + 1, u32::MAX] {
            let answer = raw_call(&channel, method, frame(false, claimed, &valid)).await;
            assert_eq!(
                answer.status.code(),
                tonic::Code::ResourceExhausted,
                "{method}, {claimed} bytes: {:?}",
                answer.status
            );
        }
    }

    // On a stream, the outcomes before the bad bytes are answered and the stream then ends with the error.
    let mut body = message(&valid);
    body.extend(message(&[0x0a, 100, b'a']));
    let answer = raw_call(&channel, "Observe", body).await;
    assert_eq!(answer.messages.len(), 1, "{:?}", answer.status);
    let verdict: pb::Verdict = prost::Message::decode(&answer.messages[0][..]).unwrap();
    assert_eq!(verdict.session_id, "raw");
    assert_eq!(answer.status.code(), tonic::Code::Internal, "{:?}", answer.status);

    assert!(sidecar.child.try_wait().unwrap().is_none(), "the sidecar exited");
    let mut client = ReboundClient::new(channel);
    still_answers(&mut client).await;
    let mut client = ReboundClient::new(connect(&sidecar.grpc).await);
    still_answers(&mut client).await;
}

// ---------------------------------------------------------------------------
// Bad replay input

/// The real binary under `ulimit LIMIT` (`-n 64`: both limits on open files), its stderr lines gathered as they come.
fn sidecar_under_ulimit(limit: &str) -> (Sidecar, crate::common::Log) {
    let script = format!("ulimit {limit} && exec \"$0\" serve --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0");
    let mut command = std::process::Command::new("bash");
    command.args(["-c", &script, crate::common::binary()]).env("RUST_LOG", "warn");
    Sidecar::start_logged(command)
}

#[tokio::test]
async fn a_sidecar_out_of_file_descriptors_waits_for_one_says_why_and_serves_again() {
    let (sidecar, log) = sidecar_under_ulimit("-n 64");
    // More connections than it may open files: accepting fails on both ports until some close.
    let held: Vec<std::net::TcpStream> =
        (0..100).map(|_| std::net::TcpStream::connect(&sidecar.metrics).unwrap()).collect();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let failed = || log.lock().unwrap().iter().filter(|l| l.contains("accept failed")).count();
    let before = failed();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let in_two_seconds = failed() - before;
    // Each listener waits 100 ms after a failure: about 40 lines in 2 s, not a core spinning silently.
    assert!((1..=60).contains(&in_two_seconds), "{in_two_seconds} failed accepts logged in 2 s");
    let line = log.lock().unwrap().iter().find(|l| l.contains("accept failed")).cloned().unwrap();
    assert!(line.contains("Too many open files"), "{line}");

    drop(held);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let answered = async {
            let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", sidecar.grpc))
                .ok()?
                .connect()
                .await
                .ok()?;
            ReboundClient::new(channel).report(success("after-the-flood", "search")).await.ok()
        };
        if let Ok(Some(verdict)) = tokio::time::timeout(Duration::from_secs(2), answered).await {
            assert_eq!(verdict.into_inner().action, pb::Action::Continue as i32);
            break;
        }
        assert!(Instant::now() < deadline, "no Report answered within 20 s of the connections closing");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// (soft, hard) limits on open files of a process, from /proc.
fn open_files_limits(pid: u32) -> (String, String) {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits.lines().find(|l| l.starts_with("Max open files")).unwrap();
    let words: Vec<&str> = line.split_whitespace().collect();
    (words[3].to_string(), words[4].to_string())
}

#[test]
fn the_sidecar_raises_its_soft_limit_on_open_files_to_the_hard_one() {
    let hard = open_files_limits(std::process::id()).1;
    let (sidecar, _log) = sidecar_under_ulimit("-Sn 64");
    let (soft, its_hard) = open_files_limits(sidecar.child.id());
    assert_eq!((soft.as_str(), its_hard.as_str()), (hard.as_str(), hard.as_str()), "soft limit was set to 64");
}

/// One Report on a connection of its own, or why not, given at most 10 s.
async fn report_on_a_new_connection(grpc: &str, session: &str) -> Result<pb::Verdict, String> {
    let endpoint = tonic::transport::Endpoint::from_shared(format!("http://{grpc}")).unwrap();
    let call = async {
        let channel = endpoint.connect().await.map_err(|e| format!("connect: {e:?}"))?;
        let verdict = ReboundClient::new(channel).report(success(session, "search")).await;
        verdict.map(|v| v.into_inner()).map_err(|status| format!("{status:?}"))
    };
    tokio::time::timeout(Duration::from_secs(10), call).await.unwrap_or_else(|_| Err("no answer in 10 s".into()))
}

#[tokio::test]
async fn grpc_connections_past_max_connections_are_closed_and_a_freed_place_serves_again() {
    let (sidecar, _dir) = Sidecar::with_config("[server]\nmax_connections = 4\n");
    let mut kept = Vec::new();
    for i in 0..4 {
        let mut client = ReboundClient::new(connect(&sidecar.grpc).await);
        client.report(success(&format!("kept-{i}"), "search")).await.unwrap();
        kept.push(client);
    }
    // A fifth is closed as it arrives: its call fails at once instead of being served or left waiting.
    let fifth = report_on_a_new_connection(&sidecar.grpc, "fifth").await;
    assert!(fifth.as_ref().is_err_and(|e| !e.contains("no answer")), "a fifth connection: {fifth:?}");

    drop(kept.pop());
    let deadline = Instant::now() + Duration::from_secs(10);
    while let Err(error) = report_on_a_new_connection(&sidecar.grpc, "after-one-closed").await {
        assert!(Instant::now() < deadline, "no place freed 10 s after a connection closed: {error}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The kept connections were served all along.
    kept[0].report(success("kept-0", "search")).await.unwrap();
}

#[tokio::test]
async fn a_grpc_connection_that_sends_nothing_is_closed_and_gives_back_its_place() {
    use tokio::io::AsyncReadExt;
    let (sidecar, _dir) = Sidecar::with_config("[server]\nmax_connections = 1\n");
    // It takes the one place, and sends no HTTP/2 preface.
    let mut silent = tokio::net::TcpStream::connect(&sidecar.grpc).await.unwrap();
    let waited = Instant::now();
    let limit = rebound::listener::OPENING_TIMEOUT + Duration::from_secs(10);
    let read = tokio::time::timeout(limit, silent.read_to_end(&mut Vec::new())).await;
    assert!(read.is_ok(), "a connection that sent nothing was still open after {:?}", waited.elapsed());
    let verdict = report_on_a_new_connection(&sidecar.grpc, "after-the-silent-one").await;
    assert_eq!(verdict.map(|v| v.action), Ok(pb::Action::Continue as i32));
}

#[tokio::test]
async fn the_metrics_port_closes_connections_past_its_cap_and_idle_ones_after_a_timeout() {
    use tokio::io::AsyncReadExt;
    let (sidecar, _dir) = capped_sidecar();
    let mut idle = Vec::new();
    for _ in 0..rebound::server::METRICS_CONNECTIONS {
        idle.push(tokio::net::TcpStream::connect(&sidecar.metrics).await.unwrap());
    }
    // One more is closed at once: the server ends it (a read sees the end), it does not keep it.
    let mut extra = tokio::net::TcpStream::connect(&sidecar.metrics).await.unwrap();
    let read = tokio::time::timeout(Duration::from_secs(5), extra.read(&mut [0u8; 64])).await;
    assert!(matches!(read, Ok(Ok(0)) | Ok(Err(_))), "a connection past the cap was kept: {read:?}");

    // A connection that sends no request is closed once the header timeout is over.
    let waited = Instant::now();
    let limit = rebound::server::METRICS_HEADER_TIMEOUT + Duration::from_secs(10);
    let read = tokio::time::timeout(limit, idle[0].read(&mut [0u8; 64])).await;
    assert!(matches!(read, Ok(Ok(0)) | Ok(Err(_))), "an idle connection was kept {:?}: {read:?}", waited.elapsed());
    drop(idle);
    assert!(http_get(&sidecar.metrics, "/metrics").await.contains("rebound_sessions_active"));
}

#[test]
fn replay_names_each_bad_line_and_answers_every_good_one() {
    let good = |id: &str| {
        format!(r#"{{"session_id":"rp","call_id":"{id}","tool":"fetch","kind":"timeout","message":"Read timed out"}}"#)
    };
    let mut input = Vec::new();
    for line in [
        good("1").into_bytes(),
        // A recorder writing Latin-1: "café" with é as the byte E9.
        b"{\"session_id\":\"rp\",\"call_id\":\"2\",\"tool\":\"fetch\",\"message\":\"caf\xe9 closed\"}".to_vec(),
        good("3").into_bytes(),
        Vec::new(),
        // Cut mid-object, as a crash mid-write leaves a line.
        br#"{"session_id":"rp","call_id":"5","tool":"fetch","mess"#.to_vec(),
        good("6").into_bytes(),
        b"\xff\xfe\x00garbage".to_vec(),
        good("8").into_bytes(),
    ] {
        input.extend(line);
        input.push(b'\n');
    }
    // And the last line cut short with no newline, as a recorder killed mid-write leaves a file.
    input.extend_from_slice(br#"{"session_id":"rp","call_id":"9","to"#);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("outcomes.jsonl");
    std::fs::write(&path, &input).unwrap();

    let (code, stdout, stderr) = run_cli(&["replay", path.to_str().unwrap(), "--seed", "1"], None);
    assert_eq!(code, 2, "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let verdicts: Vec<serde_json::Value> = stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let ids: Vec<&str> = verdicts.iter().map(|v| v["call_id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["1", "3", "6", "8"], "{stderr}");
    // The good lines are one session's four timeouts in a row: the bad ones in between count for nothing.
    let actions: Vec<&str> = verdicts.iter().map(|v| v["action"].as_str().unwrap()).collect();
    assert_eq!(actions, ["retry", "retry", "escalate", "escalate"], "{stderr}");
    assert!(stderr.contains("4 lines skipped, 4 outcomes answered"), "{stderr}");
    for (line, says) in [(2, "not UTF-8"), (5, "EOF while parsing"), (7, "not UTF-8"), (9, "EOF while parsing")] {
        let named = stderr
            .lines()
            .find(|l| l.starts_with(&format!("line {line}: ")))
            .unwrap_or_else(|| panic!("line {line} not named: {stderr}"));
        assert!(named.contains(says), "{named}");
    }
    assert!(!stderr.contains("line 4"), "the empty line is not an error: {stderr}");

    // Without the bad lines, empty lines and comments included, the replay succeeds.
    let clean: Vec<u8> =
        [good("1"), String::new(), "# a comment".into(), good("3"), String::new()].join("\n").into_bytes();
    std::fs::write(&path, clean).unwrap();
    let (code, stdout, stderr) = run_cli(&["replay", path.to_str().unwrap(), "--seed", "1"], None);
    assert_eq!((code, stdout.lines().count()), (0, 2), "{stderr}");
}

// ---------------------------------------------------------------------------
// Huge outcomes

/// A huge outcome's message: just under the 4 MiB a message may have by default.
const HUGE_BYTES: usize = 3 << 20;
/// Huge outcomes sent in a row.
const HUGE_OUTCOMES: usize = 6;
/// Calls of another session answered, at the least, for each huge outcome judged meanwhile. Judged on
/// the serving thread, the huge ones let 3 to 22 calls through each (17 to 132 in all, in 6 runs);
/// judged beside it, over a thousand each (7,016 to 7,489 in all, in 5 runs).
const CALLS_PER_HUGE: usize = 100;

/// Failure `i` of a tool whose output is 3 MiB of request logs, each line with a bearer token (made
/// up): of the texts tried (random, URLs, stack frames, JWTs, blank lines), the costliest to judge,
/// about 0.3 s in a release build, nearly all of it redaction.
fn huge_failure(i: usize) -> pb::Outcome {
    let line = format!("GET /v1/items/{i} 401 Authorization: Bearer abcdefghijklmnop{i:04} ");
    let mut outcome = failure(&format!("huge-{i}"), "log-reader", &line.repeat(HUGE_BYTES / line.len()));
    outcome.call_id = i.to_string();
    outcome
}

#[tokio::test]
async fn huge_failures_are_judged_beside_other_calls_not_ahead_of_them() {
    // One serving thread, the default: what it judges, no other call gets until it is done.
    let sidecar = Sidecar::spawn(&[]);
    let mut huge = ReboundClient::new(connect(&sidecar.grpc).await);
    let huge_stream = tokio::spawn(async move {
        let outcomes = tokio_stream::iter((0..HUGE_OUTCOMES).map(huge_failure));
        let mut verdicts = huge.observe(outcomes).await.unwrap().into_inner();
        let mut judged = 0;
        while let Some(v) = verdicts.message().await.unwrap() {
            assert_eq!(v.call_id, judged.to_string());
            assert!(v.snippet.contains("[REDACTED:bearer_token]"), "{}", v.snippet);
            assert!(!v.snippet.contains("abcdefghijklmnop"), "{}", v.snippet);
            judged += 1;
        }
        judged
    });
    let mut other = ReboundClient::new(connect(&sidecar.grpc).await);
    let mut answered = 0;
    while !huge_stream.is_finished() {
        still_answers(&mut other).await;
        answered += 1;
    }
    assert_eq!(huge_stream.await.unwrap(), HUGE_OUTCOMES);
    eprintln!("{answered} calls answered while {HUGE_OUTCOMES} huge failures were judged");
    assert!(
        answered >= CALLS_PER_HUGE * HUGE_OUTCOMES,
        "{answered} calls answered while {HUGE_OUTCOMES} huge failures were judged"
    );
}
