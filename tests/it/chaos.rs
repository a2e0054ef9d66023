//! SIGTERM under load, through the real binary: `Observe` streams and unary
//! `Report`s keep sending while the sidecar drains. Every outcome the server
//! took in must get its verdict before its stream ends, and the process must
//! exit 0. New calls may be refused with UNAVAILABLE once the drain began.
//!
//! "Took in" is measured on the server's side, not guessed: after the load, a
//! probe stream opened before the signal sends one more outcome to each
//! session, and the verdict's `steps` counter says how many outcomes the
//! engine decided for it; that must be exactly what the client was answered.

use crate::common::{connect, success, Sidecar};
use rebound::pb;
use rebound::pb::rebound_client::ReboundClient;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;
use tonic::{Code, Status};

/// How long health says NOT_SERVING before new streams are refused.
const DELAY_MS: u64 = 300;
/// Load keeps going this long past the start of the drain.
const LOAD_INTO_DRAIN_MS: u64 = 1_000;
/// A bound on anything the test waits for, so that a hang fails instead of blocking.
const PATIENCE: Duration = Duration::from_secs(20);

/// A sidecar whose shutdown delay and grace period are short.
fn draining_sidecar(grace_ms: u64) -> (Sidecar, tempfile::TempDir) {
    Sidecar::with_config(&format!("[server]\nshutdown_delay_ms = {DELAY_MS}\nshutdown_grace_ms = {grace_ms}\n"))
}

/// A successful outcome with a call id that says which one it is.
fn numbered(session: &str, n: u64) -> pb::Outcome {
    pb::Outcome { call_id: format!("{session}-{n}"), ..success(session, "search") }
}

/// What one `Observe` stream sent and got back.
#[derive(Debug)]
struct StreamTally {
    session: String,
    sent: u64,
    answered: u64,
    /// Verdicts that arrived after the drain had begun (signal + delay).
    answered_in_drain: u64,
    /// How the stream ended: `Ok` for a clean end after the client half-closed.
    end: Result<(), Status>,
}

/// Sends outcomes on one `Observe` stream, about one per millisecond, until
/// `stop` (then half-closes) or until the server ends the stream; reads the
/// verdicts and checks that they answer the outcomes one by one, in order.
async fn observe_load(
    channel: Channel,
    session: String,
    mut stop: watch::Receiver<bool>,
    drain_from: Arc<std::sync::OnceLock<Instant>>,
) -> StreamTally {
    let (tx, rx) = mpsc::channel::<pb::Outcome>(16);
    let sender = {
        let session = session.clone();
        tokio::spawn(async move {
            let mut sent = 0u64;
            while !*stop.borrow() {
                // A closed channel means the stream ended: nothing more can be sent.
                if tx.send(numbered(&session, sent)).await.is_err() {
                    break;
                }
                sent += 1;
                tokio::select! {
                    _ = stop.changed() => {}
                    _ = tokio::time::sleep(Duration::from_millis(1)) => {}
                }
            }
            sent
        })
    };
    let mut client = ReboundClient::new(channel);
    let mut verdicts =
        client.observe(ReceiverStream::new(rx)).await.expect("the stream opens before SIGTERM").into_inner();
    let (mut answered, mut answered_in_drain) = (0u64, 0u64);
    let end = loop {
        match verdicts.message().await {
            Ok(Some(v)) => {
                assert_eq!(v.call_id, format!("{session}-{answered}"), "verdicts out of order on {session}");
                answered += 1;
                if drain_from.get().is_some_and(|t| Instant::now() >= *t) {
                    answered_in_drain += 1;
                }
            }
            Ok(None) => break Ok(()),
            Err(status) => break Err(status),
        }
    };
    drop(verdicts);
    let sent = sender.await.unwrap();
    StreamTally { session, sent, answered, answered_in_drain, end }
}

/// What one unary worker sent and got back.
#[derive(Debug, Default)]
struct UnaryTally {
    session: String,
    answered: u64,
    /// Calls refused with UNAVAILABLE, or cut off by the GOAWAY before the server
    /// took them in (expected once the drain began).
    refused: u64,
    /// Any other failure: none is expected.
    unexpected: Vec<String>,
}

/// Calls `Report` in a loop until `stop`, counting answers and refusals.
async fn report_load(channel: Channel, session: String, stop: watch::Receiver<bool>) -> UnaryTally {
    let mut client = ReboundClient::new(channel);
    let mut tally = UnaryTally { session: session.clone(), ..Default::default() };
    let mut n = 0u64;
    while !*stop.borrow() {
        let call = tokio::time::timeout(Duration::from_secs(5), client.report(numbered(&session, n))).await;
        n += 1;
        match call {
            Ok(Ok(v)) => {
                assert_eq!(v.get_ref().call_id, format!("{session}-{}", n - 1));
                tally.answered += 1;
            }
            // A call that met the GOAWAY before it was sent fails in tonic with CANCELLED,
            // "connection closed", where gRPC would say UNAVAILABLE; either way the server
            // never saw it, which the probe's count checks.
            Ok(Err(status)) if status.code() == Code::Unavailable || closed_before_sent(&status) => {
                tally.refused += 1;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Ok(Err(status)) => tally.unexpected.push(format!("{status:?}")),
            Err(_) => tally.unexpected.push("no answer within 5 s".into()),
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    tally
}

/// tonic's errors for a call the server never took in: its connection closed
/// before the call was sent, or the server's graceful GOAWAY (NO_ERROR) named
/// it as past the last stream it would process. Either way the probe's count
/// shows whether the server decided it after all.
fn closed_before_sent(status: &Status) -> bool {
    let text = format!("{status:?}");
    (status.code() == Code::Cancelled && text.contains("connection closed"))
        || (status.code() == Code::Internal && text.contains("GoAway") && text.contains("NO_ERROR"))
}

/// An `Observe` stream kept open for questions after the load: it sends one
/// outcome at a time and waits for its verdict.
struct Probe {
    tx: mpsc::Sender<pb::Outcome>,
    verdicts: tonic::Streaming<pb::Verdict>,
}

impl Probe {
    async fn open(channel: Channel) -> Probe {
        let (tx, rx) = mpsc::channel(1);
        let mut client = ReboundClient::new(channel);
        let verdicts = client.observe(ReceiverStream::new(rx)).await.unwrap().into_inner();
        let mut probe = Probe { tx, verdicts };
        probe.steps("probe").await;
        probe
    }

    /// How many outcomes the server has decided for `session`, not counting this question.
    async fn steps(&mut self, session: &str) -> u64 {
        let question = pb::Outcome { call_id: format!("{session}-probe"), ..success(session, "probe") };
        self.tx.send(question).await.expect("the probe stream is open");
        let v = tokio::time::timeout(PATIENCE, self.verdicts.message())
            .await
            .expect("the probe is answered")
            .unwrap_or_else(|s| panic!("the probe stream failed while draining: {s:?}"))
            .expect("the probe stream ended early");
        assert_eq!(v.call_id, format!("{session}-probe"));
        u64::from(v.breaker.expect("a verdict carries its breaker status").steps) - 1
    }

    /// Half-closes and returns how the stream ended.
    async fn close(self) -> Result<Option<pb::Verdict>, Status> {
        let Probe { tx, mut verdicts } = self;
        drop(tx);
        tokio::time::timeout(PATIENCE, verdicts.message()).await.expect("the probe stream ends")
    }
}

/// Waits for the sidecar to exit, off the async threads.
async fn exit_status(mut sidecar: Sidecar) -> std::process::ExitStatus {
    tokio::task::spawn_blocking(move || sidecar.wait_for_exit(PATIENCE)).await.unwrap().expect("the sidecar exits")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_under_load_answers_every_outcome_the_server_took_in() {
    // A grace period far longer than the load runs into the drain: the streams
    // half-close within it, so each must end cleanly with every verdict.
    let (sidecar, _dir) = draining_sidecar(10_000);
    let (stop_tx, stop) = watch::channel(false);
    let drain_from = Arc::new(std::sync::OnceLock::new());

    // Streams on a shared connection and on connections of their own; unary
    // workers likewise.
    let shared = connect(&sidecar.grpc).await;
    let mut streams = Vec::new();
    for i in 0..4 {
        let channel = if i % 2 == 0 { shared.clone() } else { connect(&sidecar.grpc).await };
        streams.push(tokio::spawn(observe_load(
            channel,
            format!("drain-stream-{i}"),
            stop.clone(),
            drain_from.clone(),
        )));
    }
    let mut unary = Vec::new();
    for i in 0..3 {
        let channel = if i == 0 { shared.clone() } else { connect(&sidecar.grpc).await };
        unary.push(tokio::spawn(report_load(channel, format!("drain-unary-{i}"), stop.clone())));
    }
    let mut probe = Probe::open(connect(&sidecar.grpc).await).await;

    tokio::time::sleep(Duration::from_millis(500)).await;
    let _ = drain_from.set(Instant::now() + Duration::from_millis(DELAY_MS));
    sidecar.signal("TERM");
    tokio::time::sleep(Duration::from_millis(DELAY_MS + LOAD_INTO_DRAIN_MS)).await;
    stop_tx.send(true).unwrap();

    let mut stream_tallies = Vec::new();
    for s in streams {
        stream_tallies.push(tokio::time::timeout(PATIENCE, s).await.expect("every stream ends").unwrap());
    }
    let mut unary_tallies = Vec::new();
    for u in unary {
        unary_tallies.push(tokio::time::timeout(PATIENCE, u).await.expect("every unary worker stops").unwrap());
    }

    for t in &stream_tallies {
        assert!(t.end.is_ok(), "{}: the stream ended with {:?} inside the grace period", t.session, t.end);
        assert_eq!(t.answered, t.sent, "{}: {} outcomes sent, {} answered", t.session, t.sent, t.answered);
        assert!(t.answered_in_drain > 0, "{}: no verdict arrived while draining: {t:?}", t.session);
        let decided = probe.steps(&t.session).await;
        assert_eq!(
            decided, t.answered,
            "{}: the server decided {decided} outcomes, {} answered",
            t.session, t.answered
        );
    }
    for t in &unary_tallies {
        assert!(t.unexpected.is_empty(), "{}: unexpected failures: {:?}", t.session, t.unexpected);
        assert!(t.answered > 0, "{}: no report answered", t.session);
        let decided = probe.steps(&t.session).await;
        assert_eq!(decided, t.answered, "{}: the server decided {decided} reports, {} answered", t.session, t.answered);
    }
    // The load reached the drain: new calls were refused there (or this test tested nothing).
    let refused: u64 = unary_tallies.iter().map(|t| t.refused).sum();
    assert!(refused > 0, "no unary call was refused: the load never reached the drain: {unary_tallies:?}");

    let end = probe.close().await;
    assert!(matches!(end, Ok(None)), "the probe stream ended with {end:?}");
    let status = exit_status(sidecar).await;
    assert!(status.success(), "the sidecar exited with {status:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_still_sending_when_the_grace_period_ends_is_answered_up_to_an_unavailable_end() {
    // The stream never half-closes: the server must cut it when the grace
    // period is over, after the verdicts of everything it read, in order.
    let (sidecar, _dir) = draining_sidecar(800);
    let (_stop_tx, stop) = watch::channel(false);
    let drain_from = Arc::new(std::sync::OnceLock::new());
    let stream = tokio::spawn(observe_load(connect(&sidecar.grpc).await, "stubborn".into(), stop, drain_from.clone()));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let _ = drain_from.set(Instant::now() + Duration::from_millis(DELAY_MS));
    sidecar.signal("TERM");

    let t = tokio::time::timeout(PATIENCE, stream).await.expect("the server ends the stream").unwrap();
    let status = t.end.as_ref().expect_err("a stream still sending is ended by the server");
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    assert!(status.message().contains("shutting down"), "{status:?}");
    assert!(t.answered_in_drain > 0, "no verdict arrived while draining: {t:?}");
    // The outcomes past the cut were never read; the client resends them elsewhere.
    assert!(t.answered <= t.sent, "{t:?}");
    let exit = exit_status(sidecar).await;
    assert!(exit.success(), "the sidecar exited with {exit:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_signal_stops_the_drain_at_once() {
    // A person pressing Ctrl-C twice waited out the delay and the open streams' grace (here 60 s).
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("drain.toml");
    std::fs::write(&config, "[server]\nshutdown_delay_ms = 30000\nshutdown_grace_ms = 30000\n").unwrap();
    let mut command = Sidecar::command(&["--config", config.to_str().unwrap()]);
    command.env("RUST_LOG", "info");
    let (sidecar, log) = Sidecar::start_logged(command);
    // A stream left open, which the drain would wait for.
    let (tx, rx) = mpsc::channel(1);
    tx.send(success("twice", "t")).await.unwrap();
    let mut client = ReboundClient::new(connect(&sidecar.grpc).await);
    let mut verdicts = client.observe(ReceiverStream::new(rx)).await.unwrap().into_inner();
    assert!(verdicts.message().await.unwrap().is_some());
    sidecar.signal("INT");
    let logged = |text: &str| log.lock().unwrap().iter().any(|l| l.contains(text));
    let deadline = Instant::now() + PATIENCE;
    while !logged("shutting down: health NOT_SERVING") {
        assert!(Instant::now() < deadline, "{:?}", log.lock().unwrap());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    sidecar.signal("INT");
    let status = exit_status(sidecar).await;
    assert!(status.success(), "{status:?}");
    assert!(logged("SIGINT again: stopping now"), "{:?}", log.lock().unwrap());
    drop(tx);
}
