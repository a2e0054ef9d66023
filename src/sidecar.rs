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
    let (shutdown, again) = termination()?;
    let hangup_task = tokio::spawn(hangups(reload_task.is_some())?);
    // The one line on stdout: tests and supervisors read it to learn the ports.
    let ready = serde_json::json!({"event": "ready", "grpc": grpc.address(), "metrics": metrics_address});
    {
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "{ready}").and_then(|()| stdout.flush()).context("writing the ready line to stdout")?;
    }
    let workers = tokio::runtime::Handle::current().metrics().num_workers();
    let version = env!("CARGO_PKG_VERSION");
    tracing::info!(version, grpc = %grpc.address(), metrics = %metrics_address, workers, "rebound serving");

    let result = tokio::select! {
        result = server::run(grpc, engine, &config.server, shutdown) => result,
        signal = again => {
            tracing::warn!("{signal} again: stopping now, without waiting for open streams");
            Ok(())
        }
    };
    let _ = stop_tx.send(true);
    let _ = metrics_task.await;
    for task in reload_task.into_iter().chain(shared_task).chain([hangup_task]) {
        task.abort();
    }
    tracing::info!("rebound stopped");
    result
}

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

/// Installs the SIGTERM and SIGINT handlers now. The first future resolves on the first
/// of either, which starts the drain; the second on another, which cuts it short (a person
/// pressing Ctrl-C twice, who would otherwise wait out the delay and the open streams' grace).
fn termination() -> anyhow::Result<(
    impl std::future::Future<Output = ()> + Send + 'static,
    impl std::future::Future<Output = &'static str> + Send + 'static,
)> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).context("installing a SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("installing a SIGINT handler")?;
    // How many arrived, and the last one's name.
    let (counted, mut first) = tokio::sync::watch::channel((0u32, ""));
    let mut second = first.clone();
    tokio::spawn(async move {
        loop {
            let name = tokio::select! {
                _ = term.recv() => "SIGTERM",
                _ = int.recv() => "SIGINT",
            };
            if counted.borrow().0 == 0 {
                tracing::info!("{name}");
            }
            counted.send_modify(|(n, last)| (*n, *last) = (n.saturating_add(1), name));
        }
    });
    let first = async move {
        let _ = first.wait_for(|(n, _)| *n >= 1).await;
    };
    let second = async move {
        let seen = second.wait_for(|(n, _)| *n >= 2).await.map(|seen| seen.1);
        match seen {
            Ok(name) => name,
            Err(_) => std::future::pending().await,
        }
    };
    Ok((first, second))
}

/// Installs the SIGHUP handler now; the future logs each one, for ever. Unhandled, SIGHUP ended the
/// process without a word, and it is the signal many send to have a daemon reload its config.
fn hangups(watching: bool) -> anyhow::Result<impl std::future::Future<Output = ()> + Send + 'static> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut hup = signal(SignalKind::hangup()).context("installing a SIGHUP handler")?;
    Ok(async move {
        while hup.recv().await.is_some() {
            if watching {
                let every = RELOAD_INTERVAL.as_secs();
                tracing::info!(
                    "SIGHUP: nothing to do; the config file is reloaded when it changes (read every {every} s)"
                );
            } else {
                tracing::info!("SIGHUP: nothing to do; started without a config file");
            }
        }
    })
}

/// Polls the config file's content; a change that loads replaces the policy,
/// one that does not, or a file that cannot be read, keeps the old policy. Polling the content (not inotify)
/// also sees a Kubernetes ConfigMap update, which swaps a symlink.
async fn watch_config(file: ConfigFile, engine: Arc<Engine>) {
    let ConfigFile { path, loaded: started, bytes } = file;
    let mut watch = Watch::new(bytes);
    let mut tick = tokio::time::interval(RELOAD_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        // Off the runtime's threads (one by default), as the load is: a read can wait on a slow disk.
        let read = {
            let path = path.clone();
            tokio::task::spawn_blocking(move || crate::config::read_file(&path))
        };
        let read = read.await.unwrap_or_else(|panic| Err(std::io::Error::other(panic)));
        let reloaded = match watch.poll(read) {
            Step::Wait => continue,
            // The old policy runs on, but a restart would not start: a failed reload.
            Step::Unreadable(error) => Err(anyhow::anyhow!("cannot read the file: {error}")),
            Step::Load(bytes) => {
                // Off the runtime's threads too: compiling the rules takes milliseconds, which would
                // hold up every stream's verdicts meanwhile.
                let path = path.clone();
                let reloaded = tokio::task::spawn_blocking(move || reload(&path, &bytes)).await;
                // A panic while loading fails as any other reload does: the old policy stays.
                reloaded.unwrap_or_else(|panic| Err(anyhow::Error::new(panic).context("loading the config panicked")))
            }
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

/// What the watch knows of the config file from one poll to the next: plain state, so that its
/// rules are tested without files or clocks.
#[derive(Debug)]
struct Watch {
    /// The bytes last loaded, or refused: the file is loaded again when it reads otherwise. None
    /// after a read error was reported: the file is loaded when it is back, even with the bytes in
    /// use. The failure set the gauge to 0, and this load sets it back: to 1, counted ok, when the
    /// file loads, but left at 0 when it is back with a config that still does not load.
    current: Option<Arc<[u8]>>,
    /// What the last poll found, when it called for nothing yet.
    last_poll: LastPoll,
    /// The read error reported last, not reported again while it lasts (the watch polls every 2 s).
    reported: Option<String>,
}

/// What a poll found that the next one must find again before it counts.
#[derive(Debug)]
enum LastPoll {
    /// Nothing waits on the next poll.
    Settled,
    /// New bytes: loaded only if the next poll reads them too. A file written in place (`cat new >
    /// rebound.toml`, cp, nano, rsync --inplace) is empty or partial for a moment, and an empty
    /// file is a valid config: all defaults, the custom rules gone.
    New(Vec<u8>),
    /// A read error: reported only if the next poll fails too. An editor that saves by deleting
    /// the file and writing a new one leaves none for a moment.
    Unreadable,
}

/// What a poll of the config file calls for.
#[derive(Debug, PartialEq)]
enum Step {
    /// Nothing yet.
    Wait,
    /// Loading these bytes, which the file has held for two polls in a row.
    Load(Arc<[u8]>),
    /// Reporting this read error, the second in a row.
    Unreadable(String),
}

impl Watch {
    /// A watch of the file whose `bytes` the sidecar started with.
    fn new(bytes: Vec<u8>) -> Self {
        Watch { current: Some(bytes.into()), last_poll: LastPoll::Settled, reported: None }
    }

    /// What this poll's `read` of the file calls for.
    fn poll(&mut self, read: std::io::Result<Vec<u8>>) -> Step {
        let bytes = match read {
            Ok(bytes) => bytes,
            Err(error) => return self.unreadable(error.to_string()),
        };
        self.reported = None;
        if self.current.as_deref() == Some(&bytes[..]) {
            self.last_poll = LastPoll::Settled;
            return Step::Wait;
        }
        if !matches!(&self.last_poll, LastPoll::New(unsettled) if *unsettled == bytes) {
            self.last_poll = LastPoll::New(bytes);
            return Step::Wait;
        }
        self.last_poll = LastPoll::Settled;
        let bytes: Arc<[u8]> = bytes.into();
        self.current = Some(bytes.clone());
        Step::Load(bytes)
    }

    /// What a read that failed with `error` calls for.
    fn unreadable(&mut self, error: String) -> Step {
        let again = matches!(self.last_poll, LastPoll::Unreadable);
        self.last_poll = LastPoll::Unreadable;
        if !again || self.reported.as_ref() == Some(&error) {
            return Step::Wait;
        }
        self.reported = Some(error.clone());
        self.current = None;
        Step::Unreadable(error)
    }
}

/// `text` on one line: its lines, trimmed, joined by " | ". toml's and regex's messages span
/// several lines, the key or pattern at fault named on a later one than the first, and a text
/// log line that `grep 'config reload failed'` finds must say all of it.
pub(crate) fn one_line(text: &str) -> String {
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

    /// An engine with the policy of `config`'s text.
    fn engine_of(config: &str) -> Arc<Engine> {
        let policy = Policy::from_config(&Config::parse(config, "test").unwrap()).unwrap();
        let settings = EngineSettings::from_config(&Config::default(), 1);
        Arc::new(Engine::new(policy, settings, Arc::new(SystemClock::new()), Arc::new(Metrics::new(200))))
    }

    const FROBNICATOR: &str =
        "[[rules]]\nid = \"acme.frobnicator\"\nmessage = [\"frobnicator declined\"]\ncategory = \"unavailable\"\n";

    // The paused clock moves only when every task waits: a read or a load on the blocking pool
    // holds it, so each poll is over before the test's next step.
    #[tokio::test(start_paused = true)]
    async fn a_change_made_after_the_load_and_before_the_watch_began_is_reloaded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rebound.toml");
        // Loaded from an empty file; the file changed before the watch read it first.
        std::fs::write(&path, FROBNICATOR).unwrap();
        let engine = engine_of("");
        assert_ne!(rule_of(&engine), "acme.frobnicator");
        let file = ConfigFile { path, loaded: Config::default(), bytes: Vec::new() };
        let watch = tokio::spawn(watch_config(file, engine.clone()));
        // The first poll is at once, the next loads what it read again; a missed change would wait
        // for a change that never comes.
        tokio::time::sleep(RELOAD_INTERVAL * 3 / 2).await;
        watch.abort();
        assert_eq!(rule_of(&engine), "acme.frobnicator", "the change was never loaded");
    }

    #[tokio::test(start_paused = true)]
    async fn a_file_written_in_place_is_loaded_whole_never_half_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rebound.toml");
        std::fs::write(&path, FROBNICATOR).unwrap();
        let engine = engine_of(FROBNICATOR);
        let file = ConfigFile { path: path.clone(), loaded: Config::default(), bytes: FROBNICATOR.into() };
        let watch = tokio::spawn(watch_config(file, engine.clone()));
        let half_an_interval = RELOAD_INTERVAL / 2;
        tokio::time::sleep(half_an_interval).await;
        // `cat new > rebound.toml`: truncated, then written, with a poll in between. An empty file
        // is a valid config, whose rules are the built-in ones.
        std::fs::write(&path, "").unwrap();
        tokio::time::sleep(RELOAD_INTERVAL).await;
        assert_eq!(rule_of(&engine), "acme.frobnicator", "the file was loaded while empty");
        let renamed = FROBNICATOR.replace("acme.frobnicator", "acme.frobnicator.v2");
        std::fs::write(&path, &renamed).unwrap();
        tokio::time::sleep(RELOAD_INTERVAL).await;
        assert_eq!(rule_of(&engine), "acme.frobnicator", "loaded before a second poll read it");
        tokio::time::sleep(RELOAD_INTERVAL).await;
        watch.abort();
        assert_eq!(rule_of(&engine), "acme.frobnicator.v2", "the whole file was never loaded");
    }

    #[test]
    fn a_read_error_is_reported_once_two_polls_in_a_row_meet_it_and_once_while_it_lasts() {
        use std::io::{Error, ErrorKind};
        let mut watch = Watch::new(b"in use".to_vec());
        let (gone, denied) = (ErrorKind::NotFound, ErrorKind::PermissionDenied);
        let mut poll = |read: Result<&[u8], ErrorKind>| watch.poll(read.map(<[u8]>::to_vec).map_err(Error::from));
        // Deleted and written anew (some editors save so): one poll finds no file.
        assert_eq!(poll(Err(gone)), Step::Wait);
        assert_eq!(poll(Ok(b"in use")), Step::Wait);
        // Gone for good.
        assert_eq!(poll(Err(gone)), Step::Wait);
        assert_eq!(poll(Err(gone)), Step::Unreadable(Error::from(gone).to_string()));
        assert_eq!(poll(Err(gone)), Step::Wait, "reported once");
        // The file has been unreadable since: another error is reported at once.
        assert_eq!(poll(Err(denied)), Step::Unreadable(Error::from(denied).to_string()));
        // Back with the bytes in use: loaded again, once settled, for the gauge to say they load.
        assert_eq!(poll(Ok(b"in use")), Step::Wait);
        assert_eq!(poll(Ok(b"in use")), Step::Load(Arc::from(&b"in use"[..])));
        // Gone again after it was back: a new failure, reported.
        assert_eq!(poll(Err(gone)), Step::Wait);
        assert_eq!(poll(Err(gone)), Step::Unreadable(Error::from(gone).to_string()));
    }

    #[test]
    fn new_bytes_are_loaded_once_two_polls_in_a_row_read_them() {
        let mut watch = Watch::new(b"old".to_vec());
        let mut poll = |bytes: &[u8]| watch.poll(Ok(bytes.to_vec()));
        assert_eq!(poll(b"old"), Step::Wait);
        assert_eq!(poll(b"ne"), Step::Wait, "half written");
        assert_eq!(poll(b"new"), Step::Wait, "read once");
        assert_eq!(poll(b"new"), Step::Load(Arc::from(&b"new"[..])));
        assert_eq!(poll(b"new"), Step::Wait, "loaded once");
        // Changed and changed back before a second poll: nothing to load.
        assert_eq!(poll(b"newer"), Step::Wait);
        assert_eq!(poll(b"new"), Step::Wait);
        assert_eq!(poll(b"newer"), Step::Wait);
    }
}
