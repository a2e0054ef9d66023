//! The gRPC edge: the Rebound service, health and reflection, transport
//! limits, and a graceful drain on shutdown. It translates and delegates to
//! the engine; no decisions are made here.

use crate::config::ServerConfig;
use crate::convert;
use crate::engine::Engine;
use crate::listener::Listener;
use crate::pb::{self, rebound_server::Rebound, rebound_server::ReboundServer};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tokio_stream::wrappers::{TcpListenerStream, UnixListenerStream};
use tokio_stream::{Stream, StreamExt};
use tonic::{Request, Response, Status, Streaming};

/// The file descriptor set of the proto, for reflection.
pub const DESCRIPTOR: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/rebound_descriptor.bin"));

/// The service name health reports on besides "".
pub const SERVICE_NAME: &str = "rebound.v1.Rebound";

/// The most connections the metrics endpoint serves at once; more are closed as
/// they arrive. A scraper needs one, and the port is open to the pod's network:
/// idle connections without a bound would take the descriptors gRPC needs.
pub const METRICS_CONNECTIONS: usize = 64;

/// How long the metrics endpoint waits for a request's headers, on a new
/// connection or between two requests of a kept-alive one.
pub const METRICS_HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// A failure with more text than this (see [`crate::model::Outcome::text_bytes`]) is judged
/// on the blocking pool, not on a serving thread. Its analysis reads the text whole, and
/// redaction above all costs by the byte: a one-line log of 3 MiB dense with tokens took
/// 0.17 s, and with one serving thread (the default) every call of every session waited
/// for it. One of 16 KiB costs a millisecond at most, and most failures are far smaller:
/// they stay where they are, spared the hand-over to another thread.
const LARGE_FAILURE_BYTES: usize = 16 * 1024;

/// The Rebound service.
#[derive(Clone, Debug)]
pub struct Service {
    engine: Arc<Engine>,
    judge: Judge,
    closing: watch::Receiver<bool>,
}

type VerdictStream = Pin<Box<dyn Stream<Item = Result<pb::Verdict, Status>> + Send>>;

type Pending = Pin<Box<dyn Future<Output = Result<pb::Verdict, Status>> + Send>>;

/// Large failures that may wait for a place to be judged in, besides those judged. Each holds
/// its text (up to `max_message_bytes`) while it waits; past them, a serving thread judges a
/// large failure itself, as it did every one before, and reads nothing meanwhile. Measured with
/// 64 Reports of 3 MiB at once on one connection: RSS +145 MiB when the serving thread judged
/// them all (the requests' own bodies), +170 MiB with this bound, +232 MiB with none.
const LARGE_FAILURES_WAITING: usize = 4;

/// Judges outcomes for `Report` and `Observe`: most at once, where they arrived, and large
/// failures on the blocking pool, as many at a time as the runtime has serving threads.
/// So a neighbour's huge tool output takes a thread of its own and holds up no other
/// call, and a flood of them takes no more CPU than the serving threads do, nor more
/// memory than [`LARGE_FAILURES_WAITING`] more of them.
#[derive(Clone, Debug)]
struct Judge {
    engine: Arc<Engine>,
    /// Places to judge a large failure in: one per serving thread.
    places: Arc<Semaphore>,
    /// Large failures off the serving threads, judged or waiting for a place.
    admitted: Arc<Semaphore>,
}

impl Judge {
    /// A judge for a runtime of `threads` serving threads.
    fn new(engine: Arc<Engine>, threads: usize) -> Judge {
        let threads = threads.max(1);
        Judge {
            engine,
            places: Arc::new(Semaphore::new(threads)),
            admitted: Arc::new(Semaphore::new(threads + LARGE_FAILURES_WAITING)),
        }
    }

    /// For a large failure, its admission to be judged off the serving thread, if there is room
    /// (see [`LARGE_FAILURES_WAITING`]); for any other outcome, none: it is judged [`Judge::now`].
    fn admit(&self, outcome: &crate::model::Outcome) -> Option<OwnedSemaphorePermit> {
        let large = !outcome.ok && outcome.text_bytes() > LARGE_FAILURE_BYTES;
        large.then(|| self.admitted.clone().try_acquire_owned().ok()).flatten()
    }

    /// The verdict for `outcome`, judged here.
    fn now(&self, outcome: crate::model::Outcome) -> Result<pb::Verdict, Status> {
        self.engine.report_owned(outcome).map(convert::verdict).map_err(convert::status)
    }

    /// The judging of an `admitted` large failure, on the blocking pool.
    fn later(&self, outcome: crate::model::Outcome, admitted: OwnedSemaphorePermit) -> Pending {
        let (engine, places) = (self.engine.clone(), self.places.clone());
        // A task of its own: a call given up on (past its deadline, say) still has its outcome
        // counted, as every outcome that arrived is.
        let judged = tokio::spawn(async move {
            // The semaphore is never closed: a place always comes.
            let place = places.acquire_owned().await;
            tokio::task::spawn_blocking(move || {
                let _held = (admitted, place);
                engine.report_owned(outcome)
            })
            .await
        });
        Box::pin(async move {
            judged
                .await
                .and_then(|judged| judged)
                .map_err(|e| Status::internal(format!("judging a large failure failed: {e}")))?
                .map(convert::verdict)
                .map_err(convert::status)
        })
    }
}

/// Decrements the open-stream gauge when an Observe stream ends, however it ends.
struct StreamGuard(Arc<Engine>);

impl Drop for StreamGuard {
    fn drop(&mut self) {
        self.0.metrics().stream_opened(false);
    }
}

/// tonic reports an oversized message as OUT_OF_RANGE; gRPC's convention (and
/// grpc-go's, grpc-java's) is RESOURCE_EXHAUSTED, which clients expect.
fn oversize(status: Status) -> Status {
    if status.code() == tonic::Code::OutOfRange && status.message().contains("message length too large") {
        return Status::resource_exhausted(status.message().to_string());
    }
    status
}

/// An `Observe` stream's verdicts, each decided as the transport asks for the
/// next: the outcome is read, judged and answered in the connection's own
/// task, in order. Nothing is queued: a reader that stops reading stops this
/// stream's reading too (HTTP/2 flow control), and no other stream waits.
struct Answers {
    inbound: Streaming<pb::Outcome>,
    judge: Judge,
    /// A large failure being judged (off this task: see [`Judge`]), and when it was read.
    pending: Option<(Pending, Instant)>,
    /// Resolves when the server starts closing streams (after the drain's grace period).
    closed: Pin<Box<dyn Future<Output = ()> + Send>>,
    /// The next outcome's number in the stream, for error messages.
    index: u64,
    /// True once the stream has ended, with or without an error.
    done: bool,
    _guard: StreamGuard,
}

impl Stream for Answers {
    type Item = Result<pb::Verdict, Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Option<Self::Item>> {
        use std::task::Poll;
        let this = &mut *self;
        if this.done {
            return Poll::Ready(None);
        }
        // An outcome read is answered, even once the stream is to close.
        if let Some((pending, start)) = &mut this.pending {
            let mut answer = std::task::ready!(pending.as_mut().poll(cx));
            let start = *start;
            this.pending = None;
            this.answered(&mut answer, start);
            return Poll::Ready(Some(answer));
        }
        if this.closed.as_mut().poll(cx).is_ready() {
            this.done = true;
            return Poll::Ready(Some(Err(Status::unavailable("the sidecar is shutting down; reconnect"))));
        }
        let outcome = match std::task::ready!(Pin::new(&mut this.inbound).poll_next(cx)) {
            Some(Ok(outcome)) => outcome,
            None => {
                this.done = true;
                return Poll::Ready(None);
            }
            Some(Err(status)) => {
                // The transport refused the next message (too large, or not a valid Outcome).
                this.done = true;
                let status = oversize(status);
                let index = this.index;
                return Poll::Ready(Some(Err(Status::new(
                    status.code(),
                    format!("outcome #{index}: {}", status.message()),
                ))));
            }
        };
        let start = Instant::now();
        let mut answer = match convert::outcome(outcome) {
            Ok(outcome) => match this.judge.admit(&outcome) {
                Some(admitted) => {
                    // Polled at once, from the top: so it is woken when the judging is done.
                    this.pending = Some((this.judge.later(outcome, admitted), start));
                    return self.poll_next(cx);
                }
                None => this.judge.now(outcome),
            },
            Err(status) => Err(status),
        };
        this.answered(&mut answer, start);
        Poll::Ready(Some(answer))
    }
}

impl Answers {
    /// Done with the answer to the outcome read at `start`: its error, if any, names its place in
    /// the stream (and ends it).
    fn answered(&mut self, answer: &mut Result<pb::Verdict, Status>, start: Instant) {
        if let Err(status) = answer {
            let index = self.index;
            *status = Status::new(status.code(), format!("outcome #{index}: {}", status.message()));
        }
        self.judge.engine.metrics().rpc_duration("Observe", start.elapsed().as_secs_f64());
        // Bad input ends the stream with its error.
        self.done = answer.is_err();
        self.index += 1;
    }
}

impl Service {
    fn timed<T>(&self, method: &'static str, start: Instant, result: T) -> T {
        self.engine.metrics().rpc_duration(method, start.elapsed().as_secs_f64());
        result
    }
}

#[tonic::async_trait]
impl Rebound for Service {
    async fn start_session(
        &self,
        request: Request<pb::StartSessionRequest>,
    ) -> Result<Response<pb::StartSessionResponse>, Status> {
        let start = Instant::now();
        let req = convert::start_session(request.into_inner());
        let id = req.session_id.clone();
        let result = self.engine.start_session(&req).map_err(convert::status);
        self.timed("StartSession", start, result.map(|info| Response::new(convert::session_info(id, info))))
    }

    async fn report(&self, request: Request<pb::Outcome>) -> Result<Response<pb::Verdict>, Status> {
        let start = Instant::now();
        let outcome = convert::outcome(request.into_inner())?;
        let result = match self.judge.admit(&outcome) {
            Some(admitted) => self.judge.later(outcome, admitted).await,
            None => self.judge.now(outcome),
        };
        self.timed("Report", start, result.map(Response::new))
    }

    type ObserveStream = VerdictStream;

    async fn observe(&self, request: Request<Streaming<pb::Outcome>>) -> Result<Response<Self::ObserveStream>, Status> {
        let mut closing = self.closing.clone();
        self.engine.metrics().stream_opened(true);
        let answers = Answers {
            inbound: request.into_inner(),
            judge: self.judge.clone(),
            pending: None,
            // Made once and polled by reference: a `changed()` made anew for each outcome
            // would register with (and leave) the watch's waiter list, under its lock, every time.
            closed: Box::pin(async move {
                let _ = closing.wait_for(|closing| *closing).await;
            }),
            index: 0,
            done: false,
            _guard: StreamGuard(self.engine.clone()),
        };
        Ok(Response::new(Box::pin(answers) as VerdictStream))
    }

    async fn admit(&self, request: Request<pb::AdmitRequest>) -> Result<Response<pb::AdmitResponse>, Status> {
        let start = Instant::now();
        let req = request.into_inner();
        let result = self.engine.admit(&req.session_id, &req.tool).map_err(convert::status);
        self.timed("Admit", start, result.map(|a| Response::new(convert::admission(a))))
    }

    async fn context(&self, request: Request<pb::ContextRequest>) -> Result<Response<pb::ContextResponse>, Status> {
        let start = Instant::now();
        let req = request.into_inner();
        let budget = (req.max_tokens > 0).then_some(req.max_tokens);
        let result = if budget.is_some() {
            // Off the serving threads (one by default), which every other call waits on: counting
            // tokens, and the first time loading the encoding (0.1 s, which held up every session).
            let engine = self.engine.clone();
            tokio::task::spawn_blocking(move || engine.context(&req.session_id, budget))
                .await
                .map_err(|e| Status::internal(format!("Context failed: {e}")))?
        } else {
            self.engine.context(&req.session_id, budget)
        };
        let result = result.map_err(convert::status);
        self.timed("Context", start, result.map(|c| Response::new(convert::context(c))))
    }

    async fn end_session(
        &self,
        request: Request<pb::EndSessionRequest>,
    ) -> Result<Response<pb::EndSessionResponse>, Status> {
        let start = Instant::now();
        let id = request.into_inner().session_id;
        let result = self.engine.end_session(&id).map_err(convert::status);
        self.timed("EndSession", start, result.map(|s| Response::new(convert::end_session(id, s))))
    }
}

/// Rewrites tonic's OUT_OF_RANGE for an oversized unary request into RESOURCE_EXHAUSTED.
fn oversize_layer<B>(mut response: http::Response<B>) -> http::Response<B> {
    let headers = response.headers_mut();
    let is_out_of_range = headers.get("grpc-status").is_some_and(|v| v == "11");
    let too_large = headers
        .get("grpc-message")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|m| m.contains("message%20length%20too%20large") || m.contains("message length too large"));
    if is_out_of_range && too_large {
        headers.insert("grpc-status", http::HeaderValue::from_static("8"));
    }
    response
}

/// The HTTP/2 transport with every limit set explicitly (the benchmarks' echo
/// baseline is served with the same one).
pub fn transport(config: &ServerConfig) -> tonic::transport::Server {
    let keepalive = Duration::from_millis(config.keepalive_interval_ms);
    tonic::transport::Server::builder()
        .max_concurrent_streams(config.max_concurrent_streams)
        .http2_keepalive_interval((config.keepalive_interval_ms > 0).then_some(keepalive))
        .http2_keepalive_timeout(Some(Duration::from_millis(config.keepalive_timeout_ms)))
        .initial_stream_window_size(1 << 20)
        .initial_connection_window_size(4 << 20)
        .tcp_nodelay(true)
}

/// Serves until `shutdown` resolves, then reports NOT_SERVING, refuses new
/// streams and lets open ones drain for the grace period.
pub async fn run(
    listener: Listener,
    engine: Arc<Engine>,
    config: &ServerConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let (health, health_service) = tonic_health::server::health_reporter();
    health.set_service_status("", tonic_health::ServingStatus::Serving).await;
    health.set_service_status(SERVICE_NAME, tonic_health::ServingStatus::Serving).await;
    let reflection_v1 = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(DESCRIPTOR)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()?;
    let reflection_v1alpha = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(DESCRIPTOR)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1alpha()?;

    let (closing_tx, closing_rx) = watch::channel(false);
    let threads = tokio::runtime::Handle::current().metrics().num_workers();
    let service = Service { engine: engine.clone(), judge: Judge::new(engine.clone(), threads), closing: closing_rx };
    let rebound = ReboundServer::new(service)
        .max_decoding_message_size(config.max_message_bytes)
        .max_encoding_message_size(config.max_message_bytes);

    let sweeper = spawn_idle_sweeper(engine.clone());
    let (started_tx, started_rx) = tokio::sync::oneshot::channel::<()>();
    let health_on_shutdown = health.clone();
    let delay = Duration::from_millis(config.shutdown_delay_ms);
    let signal = async move {
        shutdown.await;
        tracing::info!(delay_ms = delay.as_millis() as u64, "shutting down: health NOT_SERVING");
        health_on_shutdown.set_service_status("", tonic_health::ServingStatus::NotServing).await;
        health_on_shutdown.set_service_status(SERVICE_NAME, tonic_health::ServingStatus::NotServing).await;
        // Keep serving a moment so probes and load balancers see NOT_SERVING and stop
        // sending new work; only then refuse new streams and drain the open ones.
        tokio::time::sleep(delay).await;
        tracing::info!("refusing new streams, draining open ones");
        let _ = started_tx.send(());
    };

    let mut builder = transport(config).layer(tower::util::MapResponseLayer::new(oversize_layer));
    let router = builder
        .add_service(health_service)
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha)
        .add_service(rebound);

    let mut socket_file = None;
    let places = Arc::new(Semaphore::new(config.max_connections as usize));
    let server: Pin<Box<dyn Future<Output = Result<(), tonic::transport::Error>> + Send>> = match listener {
        Listener::Tcp(l) => {
            let incoming = TcpListenerStream::new(l).map(|s| {
                if let Ok(s) = &s {
                    let _ = s.set_nodelay(true);
                }
                s
            });
            Box::pin(router.serve_with_incoming_shutdown(
                crate::listener::counted(crate::listener::paced(incoming, "grpc"), places),
                signal,
            ))
        }
        Listener::Unix(l, file) => {
            socket_file = Some(file);
            let incoming = crate::listener::counted(crate::listener::paced(UnixListenerStream::new(l), "grpc"), places);
            Box::pin(router.serve_with_incoming_shutdown(incoming, signal))
        }
    };
    let mut server = server;
    let result = tokio::select! {
        result = &mut server => result.map_err(anyhow::Error::from),
        _ = started_rx => {
            let grace = Duration::from_millis(config.shutdown_grace_ms);
            match tokio::time::timeout(grace, &mut server).await {
                Ok(result) => result.map_err(anyhow::Error::from),
                Err(_) => {
                    tracing::warn!(grace_ms = config.shutdown_grace_ms, "grace period over: closing open streams");
                    let _ = closing_tx.send(true);
                    // Streams end with UNAVAILABLE; give the last verdicts a moment to flush.
                    let _ = tokio::time::timeout(Duration::from_secs(1), &mut server).await;
                    Ok(())
                }
            }
        }
    };
    sweeper.abort();
    if let Some(file) = socket_file {
        file.remove();
    }
    result
}

/// Drops idle sessions in the background, often enough that expiry is timely.
fn spawn_idle_sweeper(engine: Arc<Engine>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(10));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            // Off the serving threads (one by default): dropping many sessions at once takes a while.
            let sweeping = engine.clone();
            let dropped = tokio::task::spawn_blocking(move || sweeping.expire_idle()).await.unwrap_or(0);
            if dropped > 0 {
                tracing::debug!(dropped, "idle sessions expired");
            }
        }
    })
}

/// Serves Prometheus text at `/metrics` until `shutdown` resolves.
pub async fn serve_metrics(
    listener: TcpListener,
    handle: metrics_exporter_prometheus::PrometheusHandle,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    use http_body_util::Full;
    use hyper::body::Bytes;
    let shutdown = tokio::spawn(shutdown);
    tokio::pin!(shutdown);
    let connections = Arc::new(Semaphore::new(METRICS_CONNECTIONS));
    let mut refused = crate::listener::Refused::new("metrics");
    loop {
        let accepted = tokio::select! {
            _ = &mut shutdown => return,
            accepted = listener.accept() => accepted,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(error) => {
                crate::listener::accept_failed("metrics", &error).await;
                continue;
            }
        };
        // Past the cap the connection is dropped, which closes it.
        let Ok(permit) = connections.clone().try_acquire_owned() else {
            refused.note();
            continue;
        };
        let handle = handle.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                let handle = handle.clone();
                async move {
                    let response = if req.uri().path() != "/metrics" {
                        hyper::Response::builder()
                            .status(404)
                            .body(Full::new(Bytes::from_static(b"not found: try /metrics\n")))
                    } else if req.method() == hyper::Method::GET || req.method() == hyper::Method::HEAD {
                        // Rendered off the serving threads (one by default), as it takes a while with
                        // many series. hyper sends no body for HEAD.
                        match tokio::task::spawn_blocking(move || handle.render()).await {
                            Ok(text) => hyper::Response::builder()
                                .header("content-type", "text/plain; version=0.0.4; charset=utf-8")
                                .body(Full::new(Bytes::from(text))),
                            Err(_) => hyper::Response::builder()
                                .status(500)
                                .body(Full::new(Bytes::from_static(b"rendering the metrics failed\n"))),
                        }
                    } else {
                        // A scrape is a GET: a POST or a DELETE here is a client mistaken about what this is.
                        hyper::Response::builder()
                            .status(405)
                            .header("allow", "GET, HEAD")
                            .body(Full::new(Bytes::from_static(b"method not allowed: /metrics answers GET and HEAD\n")))
                    };
                    Ok::<_, std::convert::Infallible>(response.expect("static response parts are valid"))
                }
            });
            let io = hyper_util::rt::TokioIo::new(crate::listener::Counted::new(stream, permit));
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(METRICS_HEADER_TIMEOUT)
                .serve_connection(io, service)
                .await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::engine::EngineSettings;
    use crate::metrics::Metrics;
    use crate::model::Outcome;
    use crate::policy::Policy;

    fn judge(threads: usize) -> Judge {
        let clock = Arc::new(ManualClock::new(1_700_000_000_000));
        let settings = EngineSettings::from_config(&crate::config::Config::default(), 42);
        Judge::new(Arc::new(Engine::new(Policy::default(), settings, clock, Arc::new(Metrics::new(10)))), threads)
    }

    fn failure(session: &str, message: String) -> Outcome {
        Outcome { session_id: session.into(), tool: "search".into(), message, ..Default::default() }
    }

    /// The judging of `outcome` off the serving thread, which it must be admitted to.
    fn later(judge: &Judge, outcome: Outcome) -> Pending {
        let admitted = judge.admit(&outcome).expect("admitted to be judged off the serving thread");
        judge.later(outcome, admitted)
    }

    #[tokio::test]
    async fn large_failures_are_judged_off_the_thread_one_per_serving_thread_a_few_waiting_and_even_when_given_up_on() {
        let judge = judge(1);
        let small = failure("s1", "x".repeat(LARGE_FAILURE_BYTES - "search".len()));
        assert!(judge.admit(&small).is_none(), "a failure at the limit is judged at once");
        let large = failure("s2", "x".repeat(LARGE_FAILURE_BYTES));
        let success = Outcome { ok: true, ..large.clone() };
        assert!(judge.admit(&success).is_none(), "a success is not analysed: judged at once");

        // With the one thread's place taken, a large failure waits for it.
        let taken = judge.places.clone().acquire_owned().await.unwrap();
        let mut pending = later(&judge, large.clone());
        assert!(
            tokio::time::timeout(Duration::from_millis(200), &mut pending).await.is_err(),
            "judged with no place free"
        );
        // One given up on while it waits is judged all the same.
        drop(later(&judge, Outcome { session_id: "s3".into(), ..large.clone() }));
        // So many wait besides the one judged; past them, one is judged on the serving thread.
        let waiting: Vec<Pending> = (1..LARGE_FAILURES_WAITING)
            .map(|i| later(&judge, Outcome { session_id: format!("w{i}"), ..large.clone() }))
            .collect();
        assert!(judge.admit(&large).is_none(), "a failure past those waiting waits too");
        drop(taken);
        let verdict = pending.await.unwrap();
        assert_eq!(verdict.session_id, "s2");
        assert_eq!(verdict.action, pb::Action::Recover as i32);
        for (i, pending) in (1..).zip(waiting) {
            assert_eq!(pending.await.unwrap().session_id, format!("w{i}"));
        }
        // Bad input is refused there as anywhere, with the field named.
        let status = later(&judge, failure("", "x".repeat(LARGE_FAILURE_BYTES))).await.unwrap_err();
        assert_eq!(status.code(), tonic::Code::InvalidArgument);
        assert!(status.message().contains("session_id"), "{}", status.message());
        let mut counted = None;
        for _ in 0..500 {
            counted = judge.engine.end_session("s3").unwrap().map(|summary| summary.errors);
            if counted.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(counted, Some(1), "the failure given up on was not counted");
    }

    use std::task::{Context, Poll};
    use tokio::io::{AsyncRead, AsyncWrite, DuplexStream, ReadBuf};

    /// The server's end of a connection, as a TCP socket would be (vectored writes), keeping
    /// each write the server makes.
    struct Recorded {
        io: DuplexStream,
        writes: Arc<std::sync::Mutex<Vec<Vec<u8>>>>,
    }

    impl Recorded {
        fn write(&mut self, cx: &mut Context<'_>, bytes: Vec<u8>) -> Poll<std::io::Result<usize>> {
            let written = Pin::new(&mut self.io).poll_write(cx, &bytes);
            if let Poll::Ready(Ok(n)) = written {
                self.writes.lock().unwrap().push(bytes[..n].to_vec());
            }
            written
        }
    }

    impl AsyncRead for Recorded {
        fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
            Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
        }
    }

    impl AsyncWrite for Recorded {
        fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
            self.get_mut().write(cx, buf.to_vec())
        }

        fn poll_write_vectored(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            bufs: &[std::io::IoSlice<'_>],
        ) -> Poll<std::io::Result<usize>> {
            self.get_mut().write(cx, bufs.iter().flat_map(|b| b.iter().copied()).collect())
        }

        fn is_write_vectored(&self) -> bool {
            true
        }

        fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Pin::new(&mut self.get_mut().io).poll_flush(cx)
        }

        fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
        }
    }

    impl tonic::transport::server::Connected for Recorded {
        type ConnectInfo = ();
        fn connect_info(&self) {}
    }

    /// The HTTP/2 frames of one write: (type, flags, stream, payload length); a frame the write
    /// holds only part of (its head, say) is told as an error.
    fn frames(mut write: &[u8]) -> Result<Vec<(u8, u8, u32, usize)>, String> {
        let mut frames = Vec::new();
        while !write.is_empty() {
            if write.len() < 9 {
                return Err(format!("{} bytes of a frame's head", write.len()));
            }
            let length = usize::from(write[0]) << 16 | usize::from(write[1]) << 8 | usize::from(write[2]);
            let stream = u32::from_be_bytes([write[5], write[6], write[7], write[8]]) & 0x7fff_ffff;
            if write.len() < 9 + length {
                return Err(format!("a frame of {length} bytes cut after {}", write.len() - 9));
            }
            frames.push((write[3], write[4], stream, length));
            write = &write[9 + length..];
        }
        Ok(frames)
    }

    #[tokio::test]
    async fn a_failures_verdict_goes_out_in_one_write_with_its_trailers_and_no_write_splits_a_frame() {
        const DATA: u8 = 0;
        const HEADERS: u8 = 1;
        const END_STREAM: u8 = 1;
        let (client_end, server_end) = tokio::io::duplex(1 << 20);
        let writes = Arc::new(std::sync::Mutex::new(Vec::new()));
        let recorded = Recorded { io: server_end, writes: writes.clone() };
        let incoming = crate::listener::counted(
            tokio_stream::iter([Ok::<_, std::io::Error>(recorded)]),
            Arc::new(Semaphore::new(1)),
        );
        let judge = judge(1);
        let (_closing_tx, closing) = watch::channel(false);
        let service = Service { engine: judge.engine.clone(), judge, closing };
        tokio::spawn(
            transport(&ServerConfig::default()).add_service(ReboundServer::new(service)).serve_with_incoming(incoming),
        );

        let mut client_end = Some(client_end);
        let channel = tonic::transport::Endpoint::from_static("http://localhost")
            .connect_with_connector(tower::service_fn(move |_: tonic::transport::Uri| {
                let io = client_end.take().ok_or_else(|| std::io::Error::other("one connection only"));
                async move { io.map(hyper_util::rt::TokioIo::new) }
            }))
            .await
            .unwrap();
        let message = "HTTPSConnectionPool(host='api.example.com', port=443): Max retries exceeded with url: /v1/search \
                       (Caused by NewConnectionError('Failed to establish a new connection: [Errno 111] Connection refused'))";
        let outcome = pb::Outcome {
            session_id: "s".into(),
            call_id: "c1".into(),
            tool: "search".into(),
            message: message.into(),
            exception_type: "requests.exceptions.ConnectionError".into(),
            ..Default::default()
        };
        let mut client = pb::rebound_client::ReboundClient::new(channel);
        let verdict = client.report(outcome.clone()).await.unwrap().into_inner();
        assert_eq!(verdict.action(), pb::Action::Retry);
        // A larger answer (over 1 KiB): the third failure in a row escalates, with its report.
        // h2 writes its DATA frame as two chunks, head and payload.
        client.report(pb::Outcome { call_id: "c2".into(), ..outcome.clone() }).await.unwrap();
        let verdict = client.report(pb::Outcome { call_id: "c3".into(), ..outcome }).await.unwrap().into_inner();
        assert_eq!(verdict.action(), pb::Action::Escalate);

        let writes = writes.lock().unwrap();
        let frames: Vec<_> = writes
            .iter()
            .map(|write| frames(write).unwrap_or_else(|cut| panic!("a write splits a frame: {cut}")))
            .collect();
        let data = |stream: u32| {
            frames.iter().enumerate().find_map(|(i, write)| {
                write.iter().find(|&&(kind, _, s, _)| kind == DATA && s == stream).map(|&(.., length)| (i, length))
            })
        };
        let (write, length) = data(1).expect("the verdict was written");
        // Between h2's two thresholds (256 bytes with vectored writes, 1 KiB without), where it matters.
        assert!((256..1024).contains(&length), "the verdict's frame is {length} bytes");
        assert!(
            frames[write].iter().any(|&(kind, flags, s, _)| kind == HEADERS && flags & END_STREAM != 0 && s == 1),
            "the trailers were written apart from the verdict: {frames:?}"
        );
        let (_, length) = data(5).expect("the escalation was written");
        assert!(length >= 1024, "the escalation's frame is {length} bytes");
    }
}
