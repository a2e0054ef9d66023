//! The baseline the benchmarks measure Rebound against: a no-op implementation
//! of the same `rebound.v1.Rebound` service. It decodes each Outcome and answers
//! a fixed, realistic Verdict (the one Rebound gives a urllib3 connection
//! failure, snippet included), so both servers move the same message shapes
//! over the same tonic stack and differ only by the work Rebound does.

use rebound::pb::{self, rebound_server::Rebound, rebound_server::ReboundServer};
use std::future::Future;
use std::pin::Pin;
use tokio_stream::{Stream, StreamExt};
use tonic::{Request, Response, Status, Streaming};

/// The snippet Rebound writes for the urllib3 message of `workload::URLLIB3`
/// (`rebound replay`, default config).
const SNIPPET: &str = "<error>\ntool: search\ntype: network\nmessage: HTTPSConnectionPool(host='api.example.com', port=443): Max retries exceeded with url: /v1/search?q=rust [… 56 characters elided …] PSConnection object at 0x7f>: Failed to establish a new connection'))\nsuggestion: Check the host and the connection; retry, or use an alternative.\n</error>";
/// Its category's suggestion.
const SUGGESTION: &str = "Check the host and the connection; retry, or use an alternative.";

/// A verdict shaped like Rebound's: `retry` with its classification, plan,
/// snippet and breaker view for a failure; `continue` for a success.
pub fn verdict(ok: bool) -> pb::Verdict {
    let breaker = pb::BreakerStatus {
        tool_state: pb::BreakerState::Closed as i32,
        session_state: pb::SessionState::Active as i32,
        reason: pb::Reason::Unspecified as i32,
        consecutive_failures: u32::from(!ok),
        session_errors: 2,
        identical_errors: u32::from(!ok),
        steps: 7,
        cost: 0.0,
    };
    if ok {
        return pb::Verdict {
            action: pb::Action::Continue as i32,
            breaker: Some(breaker),
            enforced: true,
            ..Default::default()
        };
    }
    pb::Verdict {
        action: pb::Action::Retry as i32,
        classification: Some(pb::Classification {
            category: pb::Category::Network as i32,
            retryable: true,
            rule: "exception.network".into(),
            suggestion: SUGGESTION.into(),
        }),
        retry: Some(pb::RetryPlan { delay_ms: 1008, attempt: 1, attempts_left: 2, provider_delay: false }),
        snippet: SNIPPET.into(),
        breaker: Some(breaker),
        enforced: true,
        ..Default::default()
    }
}

/// The no-op service: every answer is a clone of one of two fixed verdicts,
/// with the outcome's ids moved in (as Rebound's are).
#[derive(Clone, Debug)]
pub struct Echo {
    ok: pb::Verdict,
    failed: pb::Verdict,
}

impl Default for Echo {
    fn default() -> Self {
        Echo { ok: verdict(true), failed: verdict(false) }
    }
}

impl Echo {
    fn answer(&self, outcome: pb::Outcome) -> pb::Verdict {
        let mut v = if outcome.ok { self.ok.clone() } else { self.failed.clone() };
        v.session_id = outcome.session_id;
        v.call_id = outcome.call_id;
        v
    }

    /// The service with the same message size limits as Rebound's defaults.
    pub fn server(self) -> ReboundServer<Echo> {
        let max = rebound::config::ServerConfig::default().max_message_bytes;
        ReboundServer::new(self).max_decoding_message_size(max).max_encoding_message_size(max)
    }
}

type VerdictStream = Pin<Box<dyn Stream<Item = Result<pb::Verdict, Status>> + Send>>;

#[tonic::async_trait]
impl Rebound for Echo {
    async fn start_session(
        &self,
        request: Request<pb::StartSessionRequest>,
    ) -> Result<Response<pb::StartSessionResponse>, Status> {
        let session_id = request.into_inner().session_id;
        Ok(Response::new(pb::StartSessionResponse { session_id, created: true, error_limit: 10, ..Default::default() }))
    }

    async fn report(&self, request: Request<pb::Outcome>) -> Result<Response<pb::Verdict>, Status> {
        Ok(Response::new(self.answer(request.into_inner())))
    }

    type ObserveStream = VerdictStream;

    async fn observe(&self, request: Request<Streaming<pb::Outcome>>) -> Result<Response<Self::ObserveStream>, Status> {
        // The leanest correct echo: answer inline as the inbound stream is polled, no task, no channel.
        let echo = self.clone();
        let answers = request.into_inner().map(move |next| next.map(|o| echo.answer(o)));
        Ok(Response::new(Box::pin(answers) as VerdictStream))
    }

    async fn admit(&self, _: Request<pb::AdmitRequest>) -> Result<Response<pb::AdmitResponse>, Status> {
        Ok(Response::new(pb::AdmitResponse { allowed: true, ..Default::default() }))
    }

    async fn context(&self, _: Request<pb::ContextRequest>) -> Result<Response<pb::ContextResponse>, Status> {
        Ok(Response::new(pb::ContextResponse { text: SNIPPET.into(), errors_shown: 1, ..Default::default() }))
    }

    async fn end_session(
        &self,
        request: Request<pb::EndSessionRequest>,
    ) -> Result<Response<pb::EndSessionResponse>, Status> {
        let session_id = request.into_inner().session_id;
        Ok(Response::new(pb::EndSessionResponse { session_id, found: true, ..Default::default() }))
    }
}

/// Serves the echo on `listener` with the transport settings of `server::run`
/// (same windows, stream limit, TCP_NODELAY, and its connections accepted and
/// written as the sidecar's: `listener::counted`) until `shutdown` resolves.
pub async fn serve(
    listener: rebound::listener::Listener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), tonic::transport::Error> {
    use rebound::listener::{counted, paced, Listener};
    use tokio_stream::wrappers::{TcpListenerStream, UnixListenerStream};
    let config = rebound::config::ServerConfig::default();
    let places = std::sync::Arc::new(tokio::sync::Semaphore::new(config.max_connections as usize));
    // Reflection too (both versions, as the sidecar has them): outside tools need no proto file.
    let reflection = || {
        tonic_reflection::server::Builder::configure().register_encoded_file_descriptor_set(rebound::server::DESCRIPTOR)
    };
    let v1 = reflection().build_v1().expect("the compiled-in descriptor set is valid");
    let v1alpha = reflection().build_v1alpha().expect("the compiled-in descriptor set is valid");
    let router =
        rebound::server::transport(&config).add_service(v1).add_service(v1alpha).add_service(Echo::default().server());
    match listener {
        Listener::Tcp(l) => {
            let incoming = TcpListenerStream::new(l).map(|s| {
                if let Ok(s) = &s {
                    let _ = s.set_nodelay(true);
                }
                s
            });
            router.serve_with_incoming_shutdown(counted(paced(incoming, "grpc"), places), shutdown).await
        }
        Listener::Unix(l, file) => {
            let incoming = counted(paced(UnixListenerStream::new(l), "grpc"), places);
            let result = router.serve_with_incoming_shutdown(incoming, shutdown).await;
            file.remove();
            result
        }
    }
}
