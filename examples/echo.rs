//! The benchmarks' baseline as a standalone server: a no-op `rebound.v1.Rebound`
//! (fixed verdicts, the same message shapes and transport settings as the
//! sidecar, see `benches/support/echo.rs`) with reflection, for outside load
//! generators such as ghz. Prints one ready line like the sidecar's and serves
//! until SIGTERM or SIGINT.
//!
//!     cargo run --release --example echo -- 127.0.0.1:0     (or unix:/path)

#[path = "../benches/support/echo.rs"]
mod echo;

use rebound::listener::Listener;
use std::io::Write;
use tokio::signal::unix::{signal, SignalKind};

// The sidecar's allocator, so that the baseline differs from it only by the service's work.
rebound::use_jemalloc!();

// On the runtime the sidecar serves on by default, so that it is the same shape too.
fn main() -> anyhow::Result<()> {
    // REBOUND_SERVER_WORKER_THREADS applies here as it does to the sidecar, so a comparison stays even.
    let server = rebound::config::Config::default().with_env(std::env::vars())?.server;
    rebound::sidecar::runtime(&server)?.block_on(serve())
}

async fn serve() -> anyhow::Result<()> {
    let address = std::env::args().nth(1).unwrap_or_else(|| "127.0.0.1:0".into());
    let listener = Listener::bind(&address).await?;
    let ready = serde_json::json!({"event": "ready", "grpc": listener.address()});
    {
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "{ready}")?;
        stdout.flush()?;
    }
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let shutdown = async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    };
    echo::serve(listener, shutdown).await?;
    Ok(())
}
