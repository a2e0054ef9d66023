//! The command line: `serve` (the default), `check-config`, `print-config`,
//! `replay` and `classify`.

use crate::clock::{Clock as _, ManualClock, SystemClock};
use crate::config::Config;
use crate::engine::{Engine, EngineSettings};
use crate::metrics::Metrics;
use crate::model::{Headers, Outcome, OutcomeKind};
use crate::policy::Policy;
use anyhow::{anyhow, bail, Context as _};
use clap::parser::ValueSource;
use clap::{ArgMatches, Args, CommandFactory as _, FromArgMatches as _, Parser, Subcommand};
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

/// Rebound: the error-handling sidecar for AI agents.
#[derive(Debug, Parser)]
#[command(name = "rebound", version, about)]
pub struct Cli {
    /// What to do; `serve` when left out.
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Flags of `serve`, accepted without the word `serve`.
    #[command(flatten)]
    pub serve: ServeArgs,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the sidecar (the default).
    Serve(ServeArgs),
    /// Validate a config file and exit (0 valid, 2 invalid).
    CheckConfig {
        /// The file.
        file: PathBuf,
    },
    /// Print the effective default config as a starting file.
    PrintConfig {
        /// Print this file's effective config (defaults filled in) instead.
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Run recorded outcomes (JSON lines; `-` for stdin) through the engine; print one verdict per line.
    Replay {
        /// The JSONL file, or `-`.
        file: String,
        /// Config file.
        #[arg(long)]
        config: Option<PathBuf>,
        /// Seed for jitter, for reproducible delays.
        #[arg(long)]
        seed: Option<u64>,
    },
    /// Classify one error from the command line.
    Classify(ClassifyArgs),
}

/// Flags of `serve`.
#[derive(Debug, Args, Default)]
pub struct ServeArgs {
    /// gRPC address: host:port or unix:/path (overrides the config).
    #[arg(long)]
    pub listen: Option<String>,
    /// Metrics address host:port (overrides the config).
    #[arg(long)]
    pub metrics_listen: Option<String>,
    /// Config file (TOML); when left out, $REBOUND_CONFIG_FILE if set.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Log as JSON lines instead of text.
    #[arg(long)]
    pub log_json: bool,
}

/// Flags of `classify`.
#[derive(Debug, Args)]
pub struct ClassifyArgs {
    /// The error message.
    #[arg(long, default_value = "")]
    pub message: String,
    /// Full output or stack trace.
    #[arg(long, default_value = "")]
    pub detail: String,
    /// Exception type.
    #[arg(long, default_value = "")]
    pub exception_type: String,
    /// HTTP status.
    #[arg(long)]
    pub http_status: Option<u16>,
    /// gRPC code, by number or name.
    #[arg(long)]
    pub grpc_code: Option<String>,
    /// Exit code.
    #[arg(long, allow_hyphen_values = true)]
    pub exit_code: Option<i32>,
    /// errno or provider code.
    #[arg(long, default_value = "")]
    pub code: String,
    /// Outcome kind (tool_error, no_tool_call, invalid_tool_call, unknown_tool, timeout, cancelled, provider_error).
    #[arg(long)]
    pub kind: Option<String>,
    /// Tool name.
    #[arg(long, default_value = "cli")]
    pub tool: String,
    /// A response header, `Name: value` (repeatable).
    #[arg(long = "header")]
    pub headers: Vec<String>,
    /// Print the signals seen, every rule that matched and the winner.
    #[arg(long)]
    pub explain: bool,
    /// Config file with user rules.
    #[arg(long)]
    pub config: Option<PathBuf>,
}

/// Runs the command line; returns the process exit code.
pub fn main() -> ExitCode {
    let matches = Cli::command().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let log_json = match &cli.command {
        None => cli.serve.log_json,
        Some(Command::Serve(args)) => args.log_json || cli.serve.log_json,
        Some(_) => false,
    };
    let result = match cli.command {
        None => serve(cli.serve),
        Some(Command::Serve(args)) => args.with_flags_before(cli.serve).and_then(serve),
        Some(command) => match serve_flags_given(&matches).first() {
            Some(flag) => {
                Err(anyhow!("{flag} is a flag of `serve`, given before `{}`, which does not take it", command.name()))
            }
            None => run(command),
        },
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // The reader went away (`rebound replay ... | head`): it wants no more, which is no error.
        Err(err) if is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) if log_json => {
            // One JSON line, as the log pipeline reads the rest: toml's message spans several lines.
            // Before the logger is set up (a config that does not load), it is set up here.
            let _ = tracing_subscriber::fmt().json().flatten_event(true).with_writer(std::io::stderr).try_init();
            let error = crate::sidecar::one_line(&format!("{err:#}"));
            tracing::error!(%error, "rebound: error; not serving");
            ExitCode::from(2)
        }
        Err(err) => {
            eprintln!("rebound: error: {err:#}");
            ExitCode::from(2)
        }
    }
}

/// The flags of `serve` given on the command line before a subcommand (not from the environment).
fn serve_flags_given(matches: &ArgMatches) -> Vec<&'static str> {
    [("listen", "--listen"), ("metrics_listen", "--metrics-listen"), ("config", "--config"), ("log_json", "--log-json")]
        .into_iter()
        .filter(|(id, _)| matches.value_source(id) == Some(ValueSource::CommandLine))
        .map(|(_, flag)| flag)
        .collect()
}

impl Command {
    /// Its name on the command line.
    fn name(&self) -> &'static str {
        match self {
            Command::Serve(_) => "serve",
            Command::CheckConfig { .. } => "check-config",
            Command::PrintConfig { .. } => "print-config",
            Command::Replay { .. } => "replay",
            Command::Classify(_) => "classify",
        }
    }
}

impl ServeArgs {
    /// These flags (given after `serve`) with those given before it: `rebound --config f serve`
    /// reads `f`. One flag given on both sides with two values is an error.
    fn with_flags_before(self, before: ServeArgs) -> anyhow::Result<ServeArgs> {
        fn either<T: PartialEq + std::fmt::Debug>(
            flag: &str,
            after: Option<T>,
            before: Option<T>,
        ) -> anyhow::Result<Option<T>> {
            match (after, before) {
                (Some(a), Some(b)) if a != b => {
                    bail!("{flag} given twice, before `serve` ({b:?}) and after it ({a:?}): give it once")
                }
                (a, b) => Ok(a.or(b)),
            }
        }
        Ok(ServeArgs {
            listen: either("--listen", self.listen, before.listen)?,
            metrics_listen: either("--metrics-listen", self.metrics_listen, before.metrics_listen)?,
            config: either("--config", self.config, before.config)?,
            log_json: self.log_json || before.log_json,
        })
    }
}

/// Runs a subcommand (`main` merges the flags given before `serve` into its own first).
fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Serve(args) => serve(args),
        Command::CheckConfig { file } => check_config(&file),
        Command::PrintConfig { config } => print_config(config.as_deref()),
        Command::Replay { file, config, seed } => replay(&file, config.as_deref(), seed),
        Command::Classify(args) => classify(args),
    }
}

/// True when `err` is a write to a pipe whose reader has closed it.
fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        let io = match cause.downcast_ref::<crate::replay::ReplayError>() {
            Some(crate::replay::ReplayError::Write(io)) => Some(io),
            _ => cause.downcast_ref::<std::io::Error>(),
        };
        let json = cause.downcast_ref::<serde_json::Error>().and_then(serde_json::Error::io_error_kind);
        io.map(std::io::Error::kind).or(json) == Some(std::io::ErrorKind::BrokenPipe)
    })
}

/// The config from a file (or defaults) with `REBOUND_*` overrides, and its policy.
pub fn load(path: Option<&Path>) -> anyhow::Result<(Config, Policy)> {
    let config = match path {
        Some(p) => Config::read(p)?,
        None => Config::default(),
    };
    with_policy(config, path)
}

/// `config` (read from `path`, or the defaults) with `REBOUND_*` overrides, and its policy.
pub fn with_policy(config: Config, path: Option<&Path>) -> anyhow::Result<(Config, Policy)> {
    let vars = config_vars(std::env::vars_os())?;
    let merged = config.clone().with_env(vars.clone())?;
    match Policy::from_config(&merged) {
        Ok(policy) => Ok((merged, policy)),
        Err(e) => {
            let file = path.map_or_else(|| "defaults".to_string(), |p| p.display().to_string());
            // With the file alone fine, the error is the variables': one of them, or their values together.
            let origin = match Policy::from_config(&config) {
                Err(_) => file,
                Ok(_) => blame(&config, &vars).unwrap_or_else(|| format!("{file} with the REBOUND_* environment")),
            };
            Err(anyhow!("{origin}: {e}"))
        }
    }
}

/// The `REBOUND_*` variable that alone makes a policy of `config` (which makes one) fail.
fn blame(config: &Config, vars: &[(String, String)]) -> Option<String> {
    vars.iter().find_map(|(name, value)| {
        let alone = config.clone().with_env([(name.clone(), value.clone())]).ok()?;
        Policy::from_config(&alone).is_err().then(|| format!("{name}={value}"))
    })
}

/// The environment's variables that can override the config, as text. Any other
/// may hold bytes that are not UTF-8 (a locale's, a neighbour's, the clients'
/// `REBOUND_ADDR`), which are not ours to refuse: `std::env::vars` would panic on
/// them. A config variable whose value is not UTF-8 is an error that names it.
fn config_vars(
    vars: impl IntoIterator<Item = (std::ffi::OsString, std::ffi::OsString)>,
) -> anyhow::Result<Vec<(String, String)>> {
    let mut found = Vec::new();
    for (name, value) in vars {
        let Some(name) = name.to_str().filter(|n| crate::config::is_config_variable(n)) else {
            continue;
        };
        match value.into_string() {
            Ok(value) => found.push((name.to_string(), value)),
            Err(value) => bail!("{name}={value:?}: not UTF-8"),
        }
    }
    Ok(found)
}

fn check_config(file: &Path) -> anyhow::Result<()> {
    let (_, policy) = load(Some(file))?;
    write_out(&format!("{}: ok ({} rules)\n", file.display(), policy.classifier.len()))
}

fn print_config(file: Option<&Path>) -> anyhow::Result<()> {
    let (mut config, _) = load(file)?;
    // Its output is a starting file, which goes into a ConfigMap: no password goes with it.
    let url = crate::redact::redact(&config.state.redis_url).into_owned();
    if url == config.state.redis_url {
        return write_out(&config.to_toml());
    }
    config.state.redis_url = url;
    let note = "# state.redis_url's password is left out: name the variable that holds it in\n\
                # state.redis_password_env, and take it out of the URL.\n";
    write_out(&format!("{note}{}", config.to_toml()))
}

fn replay(file: &str, config: Option<&Path>, seed: Option<u64>) -> anyhow::Result<()> {
    let (config, policy) = load(config)?;
    let clock = Arc::new(ManualClock::new(SystemClock::new().wall_ms()));
    let seed = seed.unwrap_or_else(crate::rng::random_seed);
    let settings = EngineSettings::from_config(&config, seed);
    let engine = Engine::new(policy, settings, clock.clone(), Arc::new(Metrics::new(config.metrics.tool_label_cap)));
    let input: Box<dyn BufRead> = if file == "-" {
        Box::new(std::io::stdin().lock())
    } else {
        Box::new(std::io::BufReader::new(std::fs::File::open(file).with_context(|| format!("opening {file}"))?))
    };
    let stdout = std::io::stdout().lock();
    crate::replay::replay(input, std::io::BufWriter::new(stdout), &engine, &clock).with_context(|| file.to_string())?;
    Ok(())
}

fn classify(args: ClassifyArgs) -> anyhow::Result<()> {
    let (_, policy) = load(args.config.as_deref())?;
    let kind = match args.kind.as_deref() {
        None => None,
        Some(k) => Some(OutcomeKind::parse(k).ok_or_else(|| anyhow!("--kind {k:?}: not an outcome kind"))?),
    };
    let grpc_code = match args.grpc_code.as_deref() {
        None => None,
        Some(text) => Some(
            text.parse::<i32>()
                .ok()
                .filter(|n| (0..=16).contains(n))
                .or_else(|| crate::classify::grpc_code_from_name(text))
                .ok_or_else(|| anyhow!("--grpc-code {text:?}: not a gRPC code (0-16 or a name)"))?,
        ),
    };
    if let Some(status) = args.http_status {
        if !(100..=599).contains(&status) {
            bail!("--http-status {status}: an HTTP status is 100 to 599");
        }
    }
    // The name the RPCs would take: `classify` answers what the sidecar would.
    if let Err(crate::engine::EngineError::InvalidArgument { value, problem, .. }) =
        crate::engine::check_id("tool", &args.tool)
    {
        bail!("--tool {value}: {problem}");
    }
    let mut headers = Vec::new();
    for h in &args.headers {
        let (name, value) = h.split_once(':').ok_or_else(|| anyhow!("--header {h:?}: write it as `Name: value`"))?;
        if name.trim().is_empty() {
            return Err(anyhow!("--header {h:?}: the name is empty; write it as `Name: value`"));
        }
        headers.push((name.to_string(), value.trim().to_string()));
    }
    let outcome = Outcome {
        session_id: "cli".into(),
        tool: args.tool,
        kind,
        message: args.message,
        exception_type: args.exception_type,
        http_status: args.http_status,
        grpc_code,
        exit_code: args.exit_code,
        code: args.code,
        headers: Headers::new(headers),
        detail: args.detail,
        ..Default::default()
    };
    let (c, explanation) = policy.classifier.explain(&outcome);
    let action = c.action.unwrap_or_else(|| {
        let cat = policy.category(c.category);
        if c.retryable && cat.backoff.max_retries() > 0 {
            crate::model::Action::Retry
        } else {
            cat.action
        }
    });
    let mut out = serde_json::json!({
        "category": c.category.as_str(),
        "retryable": c.retryable,
        "action": action.as_str(),
        "rule": c.rule,
        "suggestion": c.suggestion,
    });
    if args.explain {
        out["explain"] = serde_json::to_value(&explanation)?;
    }
    write_out(&format!("{}\n", serde_json::to_string_pretty(&out)?))
}

/// Writes `text` to stdout. `print!` would panic where stdout cannot be written
/// (a full disk, a closed pipe); this says so as an error.
fn write_out(text: &str) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()).context("writing output")
}

/// Logs to stderr at `RUST_LOG`'s levels (`info` when it is unset or blank). A
/// filter that does not parse is an error: ignored, it would leave the operator
/// wondering where the debug lines went.
fn init_tracing(json: bool) -> anyhow::Result<()> {
    let filter = match std::env::var("RUST_LOG") {
        Ok(value) if !value.trim().is_empty() => {
            tracing_subscriber::EnvFilter::try_new(&value).map_err(|e| anyhow!("RUST_LOG={value:?}: {e}"))?
        }
        Err(std::env::VarError::NotUnicode(value)) => bail!("RUST_LOG={value:?}: not UTF-8"),
        _ => tracing_subscriber::EnvFilter::new("info"),
    };
    // Colours only for a person at a terminal: a file, a pipe or a container's log keeps
    // plain text (and NO_COLOR, https://no-color.org, turns them off there too).
    use std::io::IsTerminal as _;
    let colour = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(colour);
    if json {
        // The event's fields at the top level, `message` among them, where log pipelines look.
        builder.json().flatten_event(true).init();
    } else {
        builder.init();
    }
    Ok(())
}

fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let config_file = match (args.config, std::env::var_os("REBOUND_CONFIG_FILE")) {
        (Some(path), _) => Some(path),
        // As a manifest's `value: ""` sets it: no file named, which is not "no file".
        (None, Some(value)) if value.is_empty() => {
            bail!("REBOUND_CONFIG_FILE is set but empty: set it to a config file's path, or unset it")
        }
        (None, value) => value.map(PathBuf::from),
    };
    // The file's bytes are kept for the reload watch: it compares what it reads with what was
    // loaded here, so a ConfigMap update that lands while the sidecar starts is not missed.
    let (mut config, policy, file) = match config_file {
        Some(path) => {
            let (config, bytes) = Config::read_keeping_bytes(&path)?;
            let (config, policy) = with_policy(config, Some(&path))?;
            let file = crate::sidecar::ConfigFile { path, loaded: config.clone(), bytes };
            (config, policy, Some(file))
        }
        None => {
            let (config, policy) = load(None)?;
            (config, policy, None)
        }
    };
    // The flags replace what the config said, past the policy's checks: check them as it would.
    if let Some(listen) = args.listen {
        crate::policy::check_listen("--listen", &listen, true)?;
        config.server.listen = listen;
    }
    if let Some(metrics_listen) = args.metrics_listen {
        crate::policy::check_listen("--metrics-listen", &metrics_listen, false)?;
        config.server.metrics_listen = metrics_listen;
    }
    crate::policy::check_apart("--metrics-listen", &config.server.listen, &config.server.metrics_listen)?;
    init_tracing(args.log_json)?;
    let runtime = crate::sidecar::runtime(&config.server)?;
    runtime.block_on(crate::sidecar::serve(config, policy, file))
}
