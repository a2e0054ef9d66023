//! The serving process: bind both listeners, announce them, serve until
//! SIGTERM or SIGINT, and reload the config file when it changes.

use crate::clock::SystemClock;
use crate::config::Config;
use crate::engine::{Engine, EngineSettings};
use crate::listener::Listener;
use crate::metrics::Metrics;
use crate::policy::Policy;
use crate::server;
use anyhow::Context as _;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// How often the config file is checked for changes.
const RELOAD_INTERVAL: Duration = Duration::from_secs(2);

/// The config file the sidecar watches.
#[derive(Debug)]
pub struct ConfigFile {
    /// Where it is.
    pub path: PathBuf,
    /// What it gave at start, before the command line's flags: a reload is told
    /// from it, so a `--listen` flag is not taken for a change to `[server]`.
    pub loaded: Config,
    /// The bytes `loaded` was parsed from: the watch reloads when the file's differ.
    pub bytes: Vec<u8>,
}

/// The runtime the sidecar serves on: `worker_threads` threads, or with 0 one
/// per CPU the process may use (tokio's default, which reads the cgroup's CPU
/// limit: one in the shipped manifests).
pub fn runtime(server: &crate::config::ServerConfig) -> std::io::Result<tokio::runtime::Runtime> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if server.worker_threads > 0 {
        builder.worker_threads(server.worker_threads as usize);
    }
    builder.enable_all().build()
}

/// Runs the sidecar until a termination signal.
pub async fn serve(config: Config, policy: Policy, file: Option<ConfigFile>) -> anyhow::Result<()> {
    raise_open_files_limit();
    let handle = crate::metrics::install();
    let metrics = Arc::new(Metrics::new(config.metrics.tool_label_cap));
    let settings = EngineSettings::from_config(&config, crate::rng::random_seed());
    let engine = Arc::new(Engine::new(policy, settings, Arc::new(SystemClock::new()), metrics));
    engine.warm_up();

    let grpc = Listener::bind(&config.server.listen)
        .await
        .with_context(|| format!("binding --listen {}", config.server.listen))?;
    let metrics_listener = tokio::net::TcpListener::bind(&config.server.metrics_listen)
        .await
        .with_context(|| format!("binding --metrics-listen {}", config.server.metrics_listen))?;
    let metrics_address = metrics_listener.local_addr()?.to_string();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let metrics_stop = {
        let mut rx = stop_rx.clone();
        async move {
            let _ = rx.wait_for(|stop| *stop).await;
        }
    };
    let metrics_task = tokio::spawn(server::serve_metrics(metrics_listener, handle, metrics_stop));
    let reload_task = file.map(|file| tokio::spawn(watch_config(file, engine.clone())));
    let shared_task = match config.state.backend {
        crate::config::Backend::Redis => {
            let client = crate::shared::client(&config.state)?;
            Some(tokio::spawn(crate::shared::run(engine.clone(), config.state.clone(), client)))
        }
        crate::config::Backend::Memory => None,
    };

    // Handlers first: a SIGTERM right after the ready line must drain, not kill.
    let shutdown = termination()?;
    // The one line on stdout: tests and supervisors read it to learn the ports.
    let ready = serde_json::json!({"event": "ready", "grpc": grpc.address(), "metrics": metrics_address});
    {
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "{ready}").and_then(|()| stdout.flush()).context("writing the ready line to stdout")?;
    }
    let workers = tokio::runtime::Handle::current().metrics().num_workers();
    tracing::info!(grpc = %grpc.address(), metrics = %metrics_address, workers, "rebound serving");

    let result = server::run(grpc, engine, &config.server, shutdown).await;
    let _ = stop_tx.send(true);
    let _ = metrics_task.await;
    for task in reload_task.into_iter().chain(shared_task) {
        task.abort();
    }
    tracing::info!("rebound stopped");
    result
}

/// Installs the SIGTERM and SIGINT handlers now; the future resolves on either.
/// Raises the soft limit on open files to the hard one, as Go's runtime does for
/// every Go program. The soft limit, 1,024 under systemd and containerd 2, is
/// there for select(2), which nothing here uses; every connection takes a file
/// descriptor, and running out of them stops gRPC from accepting.
fn raise_open_files_limit() {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let Rlimit { current: Some(soft), maximum: Some(hard) } = getrlimit(Resource::Nofile) else { return };
    if soft >= hard {
        return;
    }
    match setrlimit(Resource::Nofile, Rlimit { current: Some(hard), maximum: Some(hard) }) {
        Ok(()) => tracing::debug!(from = soft, to = hard, "open files limit raised"),
        Err(error) => tracing::warn!(soft, hard, %error, "the open files limit could not be raised"),
    }
}

fn termination() -> anyhow::Result<impl std::future::Future<Output = ()> + Send + 'static> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).context("installing a SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("installing a SIGINT handler")?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => tracing::info!("SIGTERM"),
            _ = int.recv() => tracing::info!("SIGINT"),
        }
    })
}

/// Polls the config file's content; a change that loads replaces the policy,
/// one that does not keeps the old policy. Polling the content (not inotify)
/// also sees a Kubernetes ConfigMap update, which swaps a symlink.
async fn watch_config(file: ConfigFile, engine: Arc<Engine>) {
    let ConfigFile { path, loaded: started, bytes } = file;
    // Shared with each check's thread, not copied to it.
    let mut last: Arc<[u8]> = bytes.into();
    let mut tick = tokio::time::interval(RELOAD_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        // Off the runtime's threads (one by default): compiling the rules takes milliseconds, which
        // would hold up every stream's verdicts meanwhile.
        let changed = {
            let (path, last) = (path.clone(), last.clone());
            tokio::task::spawn_blocking(move || {
                let bytes = crate::config::read_file(&path).ok().filter(|bytes| **bytes != *last)?;
                let reloaded = reload(&path, &bytes);
                Some((bytes, reloaded))
            })
        };
        let reloaded = match changed.await {
            Ok(Some((bytes, reloaded))) => {
                last = bytes.into();
                reloaded
            }
            Ok(None) => continue,
            // A panic while loading fails as any other reload does: the old policy stays.
            Err(error) => Err(anyhow::Error::new(error).context("loading the config panicked")),
        };
        match reloaded {
            Ok((config, policy)) => {
                // Against the config the process started with: those settings are still its.
                let waiting = started.restart_only_changes(&config);
                if !waiting.is_empty() {
                    tracing::warn!(settings = %waiting.join(", "), "changes that take effect only after a restart");
                }
                engine.set_policy(policy);
                engine.metrics().reload(true);
                tracing::info!(path = %path.display(), "config reloaded");
            }
            Err(err) => {
                engine.metrics().reload(false);
                let error = one_line(&format!("{err:#}"));
                tracing::error!(path = %path.display(), %error, "config reload failed; keeping the old policy");
            }
        }
    }
}

/// `text` on one line: its lines, trimmed, joined by " | ". toml's and regex's messages span
/// several lines, the key or pattern at fault named on a later one than the first, and a text
/// log line that `grep 'config reload failed'` finds must say all of it.
fn one_line(text: &str) -> String {
    text.lines().map(str::trim).filter(|line| !line.is_empty()).collect::<Vec<_>>().join(" | ")
}

/// The config and policy of `bytes`, read from `path` (the bytes compared, not a second read).
fn reload(path: &std::path::Path, bytes: &[u8]) -> anyhow::Result<(Config, Policy)> {
    crate::cli::with_policy(Config::from_file(path, bytes)?, Some(path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Outcome;

    fn rule_of(engine: &Engine) -> String {
        let outcome = Outcome {
            session_id: "s".into(),
            tool: "t".into(),
            message: "the frobnicator declined".into(),
            ..Default::default()
        };
        engine.report(&outcome).unwrap().classification.unwrap().rule.to_string()
    }

    #[test]
    fn the_runtime_has_the_configured_threads() {
        let workers = |n| {
            let server = crate::config::ServerConfig { worker_threads: n, ..Default::default() };
            runtime(&server).unwrap().metrics().num_workers()
        };
        assert_eq!(workers(Config::default().server.worker_threads), 1, "one by default");
        assert_eq!(workers(3), 3);
        // 0 is tokio's default, which TOKIO_WORKER_THREADS would set.
        if std::env::var_os("TOKIO_WORKER_THREADS").is_none() {
            let cpus = std::thread::available_parallelism().unwrap().get();
            assert_eq!(workers(0), cpus, "0 is one per CPU the process may use");
        }
    }

    #[tokio::test]
    async fn a_change_made_after_the_load_and_before_the_watch_began_is_reloaded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rebound.toml");
        // Loaded from an empty file; the file changed before the watch read it first.
        std::fs::write(
            &path,
            "[[rules]]\nid = \"acme.frobnicator\"\nmessage = [\"frobnicator declined\"]\ncategory = \"unavailable\"\n",
        )
        .unwrap();
        let settings = EngineSettings::from_config(&Config::default(), 1);
        let engine = Arc::new(Engine::new(
            Policy::default(),
            settings,
            Arc::new(SystemClock::new()),
            Arc::new(Metrics::new(200)),
        ));
        assert_ne!(rule_of(&engine), "acme.frobnicator");
        let file = ConfigFile { path, loaded: Config::default(), bytes: Vec::new() };
        let watch = tokio::spawn(watch_config(file, engine.clone()));
        // The first check is at once; a missed change would wait for a next one that never comes.
        let mut reloaded = false;
        for _ in 0..100 {
            tokio::time::sleep(Duration::from_millis(50)).await;
            if rule_of(&engine) == "acme.frobnicator" {
                reloaded = true;
                break;
            }
        }
        watch.abort();
        assert!(reloaded, "the change was never loaded");
    }
}
