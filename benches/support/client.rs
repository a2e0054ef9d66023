//! Dialing a server (TCP or `unix:`) and driving one pipelined `Observe`
//! stream: outcomes are sent as fast as HTTP/2 flow control lets them go while
//! the verdicts are read concurrently, and every verdict is checked to answer
//! its outcome, in order.

use anyhow::{bail, Context as _};
use rebound::pb::{self, rebound_client::ReboundClient};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio_stream::StreamExt;
use tonic::transport::{Channel, Endpoint};

/// Connects to `host:port` or `unix:/path`.
pub async fn connect(address: &str) -> anyhow::Result<Channel> {
    if let Some(path) = address.strip_prefix("unix:") {
        let path = std::path::PathBuf::from(path);
        return Endpoint::from_static("http://localhost")
            .connect_with_connector(tower::service_fn(move |_: tonic::transport::Uri| {
                let path = path.clone();
                async move {
                    let stream = tokio::net::UnixStream::connect(path).await?;
                    Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
                }
            }))
            .await
            .with_context(|| format!("connecting to {address}"));
    }
    Endpoint::from_shared(format!("http://{address}"))?
        .tcp_nodelay(true)
        .connect()
        .await
        .with_context(|| format!("connecting to {address}"))
}

/// Counters a pipelined stream keeps, readable while it runs.
#[derive(Debug, Default)]
pub struct Progress {
    /// Verdicts received so far.
    pub received: AtomicU64,
    /// Set to stop sending; the stream then ends once the verdicts in flight are in.
    pub stop: AtomicBool,
}

/// How often a verdict is checked against its outcome (a power of two; a check formats a string).
const CHECK_EVERY: u64 = 256;

/// Sends `outcome(i)` for i = 0, 1, ... up to `count` (or until `progress.stop`)
/// on one Observe stream, reads the verdicts concurrently, and returns how many
/// were sent once every one has its verdict. Fails on a status, a verdict
/// that answers another outcome, a missing verdict, or after `limit`.
pub async fn pipeline<F>(
    channel: Channel,
    count: u64,
    outcome: F,
    progress: Arc<Progress>,
    limit: Duration,
) -> anyhow::Result<u64>
where
    F: Fn(u64) -> pb::Outcome + Send + Sync + 'static,
{
    let outcome = Arc::new(outcome);
    let sent = Arc::new(AtomicU64::new(0));
    let requests = {
        let (outcome, sent, progress) = (outcome.clone(), sent.clone(), progress.clone());
        tokio_stream::iter(0..count).take_while(move |_| !progress.stop.load(Ordering::Relaxed)).map(move |i| {
            sent.store(i + 1, Ordering::Relaxed);
            outcome(i)
        })
    };
    let mut client =
        ReboundClient::new(channel).max_decoding_message_size(64 << 20).max_encoding_message_size(64 << 20);
    let run = async {
        let mut verdicts = client.observe(requests).await.context("opening Observe")?.into_inner();
        let mut i = 0u64;
        while let Some(verdict) = verdicts.message().await.with_context(|| format!("verdict #{i}"))? {
            if i.is_multiple_of(CHECK_EVERY) {
                let expected = outcome(i);
                if verdict.session_id != expected.session_id || verdict.call_id != expected.call_id {
                    bail!(
                        "verdict #{i} answers {}/{}, not {}/{}",
                        verdict.session_id,
                        verdict.call_id,
                        expected.session_id,
                        expected.call_id
                    );
                }
            }
            i += 1;
            progress.received.store(i, Ordering::Relaxed);
        }
        let sent = sent.load(Ordering::Relaxed);
        if i != sent {
            bail!("{sent} outcomes sent but {i} verdicts received");
        }
        Ok(sent)
    };
    tokio::time::timeout(limit, run)
        .await
        .map_err(|_| anyhow::anyhow!("the Observe stream did not finish within {limit:?}"))?
}
