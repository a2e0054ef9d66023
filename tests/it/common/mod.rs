//! Test helpers: the real server in-process on an ephemeral port, and the
//! real `rebound` binary as a child process.

#![allow(dead_code)]

use rebound::clock::SystemClock;
use rebound::config::Config;
use rebound::engine::{Engine, EngineSettings};
use rebound::listener::Listener;
use rebound::metrics::Metrics;
use rebound::pb;
use rebound::pb::rebound_client::ReboundClient;
use rebound::policy::Policy;
use rebound::server;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;
use tonic::transport::{Channel, Endpoint};

/// A server running in this process.
pub struct TestServer {
    /// `127.0.0.1:PORT`
    pub addr: String,
    /// `127.0.0.1:PORT` of /metrics.
    pub metrics_addr: String,
    /// A connected channel.
    pub channel: Channel,
    /// A Rebound client on it.
    pub client: ReboundClient<Channel>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl TestServer {
    /// Starts with the default config.
    pub async fn start() -> TestServer {
        Self::start_with(Config::default()).await
    }

    /// Starts with a config.
    pub async fn start_with(config: Config) -> TestServer {
        Self::start_with_clock(config, Arc::new(SystemClock::new())).await
    }

    /// Starts with a config and a clock (a `ManualClock` makes breaker timing exact).
    pub async fn start_with_clock(config: Config, clock: Arc<dyn rebound::clock::Clock>) -> TestServer {
        let handle = rebound::metrics::install();
        let policy = Policy::from_config(&config).expect("test config is valid");
        let settings = EngineSettings::from_config(&config, 7);
        let engine =
            Arc::new(Engine::new(policy, settings, clock, Arc::new(Metrics::new(config.metrics.tool_label_cap))));
        let listener = Listener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.address();
        let metrics_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let metrics_addr = metrics_listener.local_addr().unwrap().to_string();
        tokio::spawn(server::serve_metrics(metrics_listener, handle, std::future::pending()));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server_config = config.server.clone();
        let task = tokio::spawn(async move {
            server::run(listener, engine, &server_config, async {
                let _ = stopped.await;
            })
            .await
        });
        let channel = connect(&addr).await;
        TestServer {
            addr,
            metrics_addr,
            client: ReboundClient::new(channel.clone())
                .max_decoding_message_size(64 << 20)
                .max_encoding_message_size(64 << 20),
            channel,
            stop: Some(stop),
            task,
        }
    }

    /// Stops and waits for the server.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = tokio::time::timeout(Duration::from_secs(15), &mut self.task).await;
    }
}

/// A channel to `addr`, retried briefly while the server comes up.
pub async fn connect(addr: &str) -> Channel {
    let endpoint = Endpoint::from_shared(format!("http://{addr}")).unwrap().connect_timeout(Duration::from_secs(2));
    for _ in 0..50 {
        if let Ok(ch) = endpoint.connect().await {
            return ch;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("could not connect to {addr}");
}

/// A failed outcome.
pub fn failure(session: &str, tool: &str, message: &str) -> pb::Outcome {
    pb::Outcome { session_id: session.into(), tool: tool.into(), message: message.into(), ..Default::default() }
}

/// A successful outcome.
pub fn success(session: &str, tool: &str) -> pb::Outcome {
    pb::Outcome { session_id: session.into(), tool: tool.into(), ok: true, ..Default::default() }
}

/// A plain HTTP GET on loopback, returning the body.
pub async fn http_get(addr: &str, path: &str) -> String {
    http_request(addr, "GET", path).await
}

/// One HTTP/1.1 request with no body; the whole response, status line first.
pub async fn http_request(addr: &str, method: &str, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect to metrics");
    let request = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut body = String::new();
    stream.read_to_string(&mut body).await.unwrap();
    body
}

/// The path of the real binary.
pub fn binary() -> &'static str {
    env!("CARGO_BIN_EXE_rebound")
}

/// The real binary running as a child process.
pub struct Sidecar {
    /// The child.
    pub child: Child,
    /// gRPC address from the ready line.
    pub grpc: String,
    /// Metrics address from the ready line.
    pub metrics: String,
}

/// The lines a sidecar wrote to stderr, gathered as they come.
pub type Log = Arc<std::sync::Mutex<Vec<String>>>;

impl Sidecar {
    /// Starts `rebound serve` with extra args and reads its ready line.
    pub fn spawn(extra: &[&str]) -> Sidecar {
        let mut command = Sidecar::command(extra);
        Sidecar::ready(command.stderr(Stdio::inherit()).stdout(Stdio::piped()).spawn().expect("spawn rebound"))
    }

    /// Starts `rebound serve` with extra args, its log lines gathered (uncoloured).
    pub fn spawn_logged(extra: &[&str]) -> (Sidecar, Log) {
        Sidecar::start_logged(Sidecar::command(extra))
    }

    /// `rebound serve` with extra args, on loopback ports unless they name theirs, logging warnings.
    pub fn command(extra: &[&str]) -> Command {
        let mut args = vec!["serve"];
        if !extra.contains(&"--listen") {
            args.extend(["--listen", "127.0.0.1:0"]);
        }
        if !extra.contains(&"--metrics-listen") {
            args.extend(["--metrics-listen", "127.0.0.1:0"]);
        }
        let mut command = Command::new(binary());
        command.args(args).args(extra).env("RUST_LOG", "warn");
        command
    }

    /// Starts `command`, which runs the sidecar, with its log lines gathered (uncoloured).
    pub fn start_logged(mut command: Command) -> (Sidecar, Log) {
        let log = Log::default();
        let gathered = log.clone();
        command.env("NO_COLOR", "1").stderr(Stdio::piped()).stdout(Stdio::piped());
        let mut child = command.spawn().expect("spawn rebound");
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                gathered.lock().unwrap().push(line);
            }
        });
        (Sidecar::ready(child), log)
    }

    /// The sidecar `child` (its stdout piped), once it wrote its ready line.
    fn ready(mut child: Child) -> Sidecar {
        let stdout = child.stdout.take().unwrap();
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).expect("ready line");
        let ready: serde_json::Value =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("ready line {line:?}: {e}"));
        assert_eq!(ready["event"], "ready");
        Sidecar {
            child,
            grpc: ready["grpc"].as_str().unwrap().to_string(),
            metrics: ready["metrics"].as_str().unwrap().to_string(),
        }
    }

    /// Starts `rebound serve --config` on a file holding `toml`; the file's folder goes with it.
    pub fn with_config(toml: &str) -> (Sidecar, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rebound.toml");
        std::fs::write(&path, toml).unwrap();
        (Sidecar::spawn(&["--config", path.to_str().unwrap()]), dir)
    }

    /// Sends a signal.
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill").args([&format!("-{signal}"), &self.child.id().to_string()]).status().unwrap();
        assert!(status.success());
    }

    /// Waits for exit up to `limit`; `None` if still running.
    pub fn wait_for_exit(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let deadline = std::time::Instant::now() + limit;
        while std::time::Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for Sidecar {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs the binary with args (and optional stdin), returning (exit code, stdout, stderr).
pub fn run_cli(args: &[&str], stdin: Option<&str>) -> (i32, String, String) {
    use std::io::Write;
    let mut child = Command::new(binary())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn rebound");
    if let Some(input) = stdin {
        child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    } else {
        drop(child.stdin.take());
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
