//! The config file: one TOML file, every field defaulted, unknown keys refused
//! with their line, and `REBOUND_<SECTION>_<KEY>` environment overrides.
//!
//! This module only reads and writes the file's shape; `policy` checks the
//! values and builds what the engine uses.

use crate::backoff::Jitter;
use crate::classify::RuleSpec;
use crate::model::{Action, Category};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// The whole config file.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Listening addresses and transport limits.
    pub server: ServerConfig,
    /// Session store limits.
    pub sessions: SessionsConfig,
    /// Default retry backoff.
    pub retry: RetryConfig,
    /// Session breaker thresholds and limits.
    pub breakers: BreakersConfig,
    /// Snippet limits.
    pub snippet: SnippetConfig,
    /// Classification settings.
    pub classify: ClassifyConfig,
    /// Metrics settings.
    pub metrics: MetricsConfig,
    /// The per-tool breaker across sessions.
    pub tool_breaker: ToolBreakerConfig,
    /// The per-tool retry budget across sessions.
    pub retry_budget: RetryBudgetConfig,
    /// Where tool breakers and retry budgets live: this sidecar, or shared through Redis.
    pub state: StateConfig,
    /// Per-tool retry policies, first match wins.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolRetryConfig>,
    /// Per-category overrides of the built-in policy table.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub categories: BTreeMap<Category, CategoryPatch>,
    /// Classification rules added to (or replacing by id) the built-in ones.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<RuleSpec>,
    /// Named policy profiles a session asks for in StartSession: each sets some of
    /// the `PROFILE_SECTIONS` over the rest of the file (checked by `Policy::from_config`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub profiles: BTreeMap<String, toml::Table>,
}

/// What a profile may set: how one session is judged. The rest (listeners, the
/// session store, the fleet's tool breakers and budgets, metrics) is the sidecar's.
pub const PROFILE_SECTIONS: [&str; 5] = ["retry", "breakers", "categories", "tools", "snippet"];

/// `[server]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// gRPC address: `host:port` or `unix:/path`.
    pub listen: String,
    /// Metrics HTTP address: `host:port`.
    pub metrics_listen: String,
    /// The largest message accepted, in bytes.
    pub max_message_bytes: usize,
    /// The most concurrent HTTP/2 streams per connection.
    pub max_concurrent_streams: u32,
    /// The most gRPC connections served at once; more are closed as they arrive.
    pub max_connections: u32,
    /// HTTP/2 keepalive ping interval.
    pub keepalive_interval_ms: u64,
    /// How long a keepalive ping may go unanswered.
    pub keepalive_timeout_ms: u64,
    /// After SIGTERM, how long health says NOT_SERVING while still serving (so probes
    /// and load balancers notice) before new streams are refused.
    pub shutdown_delay_ms: u64,
    /// Then, how long open streams may drain.
    pub shutdown_grace_ms: u64,
    /// Threads that serve requests; 0 for one per CPU the process may use (its CPU limit).
    pub worker_threads: u32,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: "127.0.0.1:50051".into(),
            metrics_listen: "127.0.0.1:9464".into(),
            max_message_bytes: 4 << 20,
            max_concurrent_streams: 256,
            max_connections: 1024,
            keepalive_interval_ms: 30_000,
            keepalive_timeout_ms: 10_000,
            shutdown_delay_ms: 2_000,
            shutdown_grace_ms: 10_000,
            // Not one per core of the node: one agent's outcomes need a small part of one core (a
            // thread answers over 300,000 a second), and the manifests' CPU limit of 1 gives one anyway.
            worker_threads: 1,
        }
    }
}

/// `[sessions]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SessionsConfig {
    /// A session unused this long is dropped.
    pub idle_expiry_ms: u64,
    /// The most sessions kept; past it the least recently used is evicted.
    pub capacity: usize,
    /// The most bytes the sessions may hold together (as the store estimates them);
    /// past it the least recently used are evicted.
    pub max_bytes: u64,
    /// Lock shards of the session store.
    pub shards: usize,
    /// How many recent verdicts a session keeps for repeated call_ids.
    pub idempotency_window: usize,
    /// How many recent errors a session keeps for Context and escalation reports.
    pub history: usize,
}

impl Default for SessionsConfig {
    fn default() -> Self {
        SessionsConfig {
            idle_expiry_ms: 3_600_000,
            capacity: 100_000,
            max_bytes: 512 << 20,
            shards: 64,
            idempotency_window: 16,
            history: 10,
        }
    }
}

/// `[retry]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RetryConfig {
    /// The first retry's delay.
    pub base_ms: u64,
    /// Growth per retry.
    pub multiplier: f64,
    /// The longest backoff delay.
    pub cap_ms: u64,
    /// How delays are spread.
    pub jitter: Jitter,
    /// The spread of proportional jitter (0.2 is ±20 %).
    pub jitter_fraction: f64,
    /// A provider delay above this is not waited for: the action becomes `long_delay_action`. At most
    /// a day.
    pub max_provider_delay_ms: u64,
    /// The action when the provider asks for more than `max_provider_delay_ms`.
    pub long_delay_action: Action,
}

impl Default for RetryConfig {
    fn default() -> Self {
        RetryConfig {
            base_ms: 1000,
            multiplier: 2.0,
            cap_ms: 10_000,
            jitter: Jitter::Proportional,
            jitter_fraction: 0.2,
            max_provider_delay_ms: 300_000,
            long_delay_action: Action::Escalate,
        }
    }
}

/// `[breakers]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BreakersConfig {
    /// Consecutive failures of one tool in a session before escalation.
    pub tool_consecutive_failures: u32,
    /// Errors in a session before escalation.
    pub session_errors: u32,
    /// Identical errors in a row before abort.
    pub identical_errors: u32,
    /// Outcomes per session before abort (0: no limit).
    pub step_limit: u32,
    /// Cost per session before abort (0: no limit).
    pub cost_limit: f64,
    /// Shadow mode: breakers and budgets are computed and counted but never change an action.
    pub shadow: bool,
}

impl Default for BreakersConfig {
    fn default() -> Self {
        BreakersConfig {
            tool_consecutive_failures: 3,
            session_errors: 10,
            identical_errors: 5,
            step_limit: 0,
            cost_limit: 0.0,
            shadow: false,
        }
    }
}

/// `[snippet]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SnippetConfig {
    /// The most characters of a message shown.
    pub message_chars: usize,
    /// The most error blocks in a Context.
    pub context_errors: usize,
    /// The most frames of the caller's own code shown where a stack trace is collapsed.
    pub frames: usize,
    /// A token budget per snippet (0: none); the message is shortened to fit.
    pub max_tokens: u32,
    /// A token budget per Context answer (0: none); the oldest errors go first to fit.
    pub context_max_tokens: u32,
    /// The tokenizer for budgets: o200k_base, cl100k_base, p50k_base or r50k_base.
    pub encoding: String,
    /// User templates by name (error_block, summary, instruction); left out: the built-in format.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub templates: BTreeMap<String, String>,
}

impl Default for SnippetConfig {
    fn default() -> Self {
        SnippetConfig {
            message_chars: 200,
            context_errors: 3,
            frames: 1,
            max_tokens: 0,
            context_max_tokens: 0,
            encoding: "o200k_base".into(),
            templates: BTreeMap::new(),
        }
    }
}

/// `[classify]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClassifyConfig {
    /// Bytes of message (and of detail) that message rules look at.
    pub text_limit: usize,
}

impl Default for ClassifyConfig {
    fn default() -> Self {
        ClassifyConfig { text_limit: 1024 }
    }
}

/// `[metrics]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsConfig {
    /// Distinct tool label values before the rest fold into `_other`.
    pub tool_label_cap: usize,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        MetricsConfig { tool_label_cap: 200 }
    }
}

/// `[tool_breaker]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ToolBreakerConfig {
    /// Off: tools are never fenced off.
    pub enabled: bool,
    /// Consecutive unhealthy failures (timeout, network, unavailable, internal, rate limited) that open it.
    pub consecutive_failures: u32,
    /// Calls in the count-based window (at most 64).
    pub window: u32,
    /// Calls the window needs before its failure rate counts.
    pub min_calls: u32,
    /// Failure rate over the window that opens it.
    pub failure_rate: f64,
    /// The first open period; it doubles with each re-open.
    pub open_base_ms: u64,
    /// The longest open period (a provider's Retry-After may still be longer).
    pub open_max_ms: u64,
    /// Probe calls let through when half open.
    pub probes: u32,
    /// Tools tracked; past it, a new tool takes the place of the closed breaker named longest ago.
    pub max_tools: usize,
}

impl Default for ToolBreakerConfig {
    fn default() -> Self {
        ToolBreakerConfig {
            enabled: true,
            consecutive_failures: 5,
            window: 20,
            min_calls: 10,
            failure_rate: 0.5,
            open_base_ms: 30_000,
            open_max_ms: 300_000,
            probes: 2,
            max_tools: 10_000,
        }
    }
}

/// Where shared state lives.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Backend {
    /// In this sidecar only.
    #[default]
    Memory,
    /// Shared with other sidecars through Redis.
    Redis,
}

/// `[state]` (at start only)
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StateConfig {
    /// `memory` (default) or `redis`.
    pub backend: Backend,
    /// `redis://[:password@]host:port[/db]` or `rediss://` for TLS.
    pub redis_url: String,
    /// An environment variable holding the Redis password (instead of the URL).
    pub redis_password_env: String,
    /// Prefix of every key Rebound writes.
    pub key_prefix: String,
    /// How often local changes are exchanged with Redis.
    pub sync_interval_ms: u64,
    /// How long one exchange may take before it counts as an error.
    pub timeout_ms: u64,
}

impl Default for StateConfig {
    fn default() -> Self {
        StateConfig {
            backend: Backend::Memory,
            redis_url: "redis://127.0.0.1:6379".into(),
            redis_password_env: String::new(),
            key_prefix: "rebound:".into(),
            sync_interval_ms: 200,
            timeout_ms: 500,
        }
    }
}

/// `[retry_budget]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RetryBudgetConfig {
    /// Off: retries are never throttled.
    pub enabled: bool,
    /// Tokens in a full bucket; retries stop at or below half.
    pub max_tokens: f64,
    /// Tokens a success puts back.
    pub token_ratio: f64,
}

impl Default for RetryBudgetConfig {
    fn default() -> Self {
        RetryBudgetConfig { enabled: true, max_tokens: 50.0, token_ratio: 0.1 }
    }
}

/// `[[tools]]`: a retry policy for tools whose name matches a glob.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolRetryConfig {
    /// Tool name glob (`search_*`).
    pub tool: String,
    /// Retries before the category's action.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_retries: Option<u32>,
    /// First retry delay.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_ms: Option<u64>,
    /// Growth per retry.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub multiplier: Option<f64>,
    /// Longest delay.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cap_ms: Option<u64>,
    /// Jitter.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jitter: Option<Jitter>,
}

/// `[categories.NAME]`: any field left out keeps the built-in value.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CategoryPatch {
    /// Whether a retry may succeed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retryable: Option<bool>,
    /// Retries before `action`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_retries: Option<u32>,
    /// The action when not retrying.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action: Option<Action>,
    /// The suggestion shown.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suggestion: Option<String>,
    /// This category's first retry delay.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_ms: Option<u64>,
    /// This category's growth per retry.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub multiplier: Option<f64>,
    /// This category's longest delay.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cap_ms: Option<u64>,
    /// This category's jitter.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jitter: Option<Jitter>,
}

/// The longest config file read: far past any real one (the built-in rules are
/// 24 KiB), short of what would strain memory.
pub const MAX_FILE_BYTES: u64 = 16 << 20;

/// A config file's bytes, read no further than one past `MAX_FILE_BYTES` (so a
/// longer file shows as longer): `/dev/zero`, or a log given by mistake, would
/// otherwise be read until memory ran out.
pub fn read_file(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut bytes = Vec::new();
    std::fs::File::open(path)?.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Why a config could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{path}: {reason}")]
    Read {
        /// The file.
        path: String,
        /// Why (in the message, not a source: `{:#}` would print it twice).
        reason: std::io::Error,
    },
    /// The file does not parse or has unknown keys (the message names line and key).
    #[error("{origin}: {message}")]
    Parse {
        /// The file, or the environment variable.
        origin: String,
        /// toml's message, with the line.
        message: String,
    },
}

/// The config sections that environment variables may override.
/// Longest first, so `retry_budget` is not read as `retry` with key `budget_...`.
const ENV_SECTIONS: [&str; 10] = [
    "tool_breaker",
    "retry_budget",
    "breakers",
    "sessions",
    "classify",
    "snippet",
    "metrics",
    "server",
    "retry",
    "state",
];

/// serde's names for the types a key wants, in words: "expected usize" means nothing to
/// someone who has not written Rust.
const TYPE_WORDS: [(&str, &str); 8] = [
    ("expected usize", "expected a whole number, 0 or more"),
    ("expected u64", "expected a whole number, 0 or more"),
    ("expected u32", "expected a whole number, 0 or more (at most 4294967295)"),
    ("expected u16", "expected a whole number, 0 or more (at most 65535)"),
    ("expected u8", "expected a whole number, 0 or more (at most 255)"),
    ("expected i64", "expected a whole number"),
    ("expected i32", "expected a whole number"),
    ("expected f64", "expected a number"),
];

/// `message` with serde's type names in words.
fn plain_types(message: &str) -> String {
    TYPE_WORDS.iter().fold(message.to_string(), |text, (rust, words)| text.replace(rust, words))
}

impl Config {
    /// Parses a config file's text; `origin` names it in errors. toml's message quotes the
    /// line, which may hold a secret (a `redis_url` with its password): it is redacted.
    pub fn parse(text: &str, origin: &str) -> Result<Config, ConfigError> {
        toml::from_str(text).map_err(|e| ConfigError::Parse {
            origin: origin.to_string(),
            message: plain_types(&crate::redact::redact(&e.to_string())),
        })
    }

    /// Reads and parses a file of at most `MAX_FILE_BYTES`.
    pub fn read(path: &Path) -> Result<Config, ConfigError> {
        Self::read_keeping_bytes(path).map(|(config, _)| config)
    }

    /// [`Config::read`], with the bytes it parsed (the reload watch compares the file with them).
    pub fn read_keeping_bytes(path: &Path) -> Result<(Config, Vec<u8>), ConfigError> {
        let bytes = read_file(path).map_err(|reason| ConfigError::Read { path: path.display().to_string(), reason })?;
        Ok((Self::from_file(path, &bytes)?, bytes))
    }

    /// Parses the bytes read from `path` (by `read_file`): at most `MAX_FILE_BYTES` of UTF-8.
    pub fn from_file(path: &Path, bytes: &[u8]) -> Result<Config, ConfigError> {
        use std::io::{Error, ErrorKind};
        let failed = |reason| ConfigError::Read { path: path.display().to_string(), reason };
        if bytes.len() as u64 > MAX_FILE_BYTES {
            return Err(failed(Error::new(
                ErrorKind::InvalidData,
                format!("longer than {MAX_FILE_BYTES} bytes, the most a config file may be"),
            )));
        }
        let text = std::str::from_utf8(bytes)
            .map_err(|e| failed(Error::new(ErrorKind::InvalidData, format!("not UTF-8: {e}"))))?;
        Self::parse(text, &path.display().to_string())
    }

    /// Applies `REBOUND_<SECTION>_<KEY>=value` overrides. Variables whose section is
    /// not a config section (REBOUND_ADDR for clients, REBOUND_SERVICE_HOST from
    /// Kubernetes service links) are not config and are left alone.
    pub fn with_env<I>(self, vars: I) -> Result<Config, ConfigError>
    where
        I: IntoIterator<Item = (String, String)>,
    {
        let overrides = env_overrides(vars);
        if overrides.is_empty() {
            return Ok(self);
        }
        let base = toml::Table::try_from(&self).map_err(|e| too_large_for_toml(&self, e))?;
        let mut table = base.clone();
        for o in &overrides {
            o.apply(&mut table)?;
        }
        toml::Value::Table(table).try_into().map_err(|e: toml::de::Error| {
            // Name the variable whose value is wrong: the first that fails when applied alone.
            let culprit = overrides.iter().find_map(|o| {
                let mut alone = base.clone();
                o.apply(&mut alone).ok()?;
                let refused: toml::de::Error = toml::Value::Table(alone).try_into::<Config>().err()?;
                Some(ConfigError::Parse {
                    origin: crate::redact::redact(&format!("{}={}", o.name, o.raw)).into_owned(),
                    message: plain_types(refused.message()),
                })
            });
            culprit.unwrap_or(ConfigError::Parse { origin: "REBOUND_* environment".into(), message: e.to_string() })
        })
    }

    /// This config with profile `name`'s sections laid over it (and no profiles):
    /// tables merge key by key, a profile's `[[tools]]` come before the file's (the
    /// first match wins). The error says what is wrong, without the profile's name.
    pub fn with_profile(&self, overlay: &toml::Table) -> Result<Config, String> {
        let mut table = toml::Table::try_from(self).map_err(|e| too_large_for_toml(self, e).to_string())?;
        table.remove("profiles");
        for (key, value) in overlay {
            if !PROFILE_SECTIONS.contains(&key.as_str()) {
                return Err(format!(
                    "`{key}` cannot be set per profile; a profile sets {}",
                    PROFILE_SECTIONS.join(", ")
                ));
            }
            match (table.get_mut(key), value) {
                (Some(toml::Value::Table(base)), toml::Value::Table(patch)) => merge(base, patch),
                (Some(toml::Value::Array(base)), toml::Value::Array(first)) => {
                    let rest = std::mem::take(base);
                    *base = first.iter().cloned().chain(rest).collect();
                }
                _ => {
                    table.insert(key.clone(), value.clone());
                }
            }
        }
        toml::Value::Table(table).try_into().map_err(|e: toml::de::Error| e.message().to_string())
    }

    /// The settings read only at start that differ in `newer`, by name: a reload
    /// cannot apply them (the listeners, the session store, the state backend and
    /// the metric registry are built once).
    pub fn restart_only_changes(&self, newer: &Config) -> Vec<&'static str> {
        let changed = [
            ("[server]", self.server != newer.server),
            ("[sessions]", self.sessions != newer.sessions),
            ("[state]", self.state != newer.state),
            ("[metrics]", self.metrics != newer.metrics),
            ("tool_breaker.max_tools", self.tool_breaker.max_tools != newer.tool_breaker.max_tools),
        ];
        changed.into_iter().filter(|(_, differs)| *differs).map(|(name, _)| name).collect()
    }

    /// The effective config as a TOML starting file.
    pub fn to_toml(&self) -> String {
        toml::to_string_pretty(self).expect("the config serializes")
    }
}

/// One `REBOUND_<SECTION>_<KEY>=value` variable.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct EnvOverride {
    /// The variable, as set.
    name: String,
    /// Its value.
    raw: String,
    /// The config section.
    section: &'static str,
    /// The key in it, lower case.
    key: String,
}

impl EnvOverride {
    /// Sets the key in `table` (a serialized config), refusing a key its section does not have.
    fn apply(&self, table: &mut toml::Table) -> Result<(), ConfigError> {
        let entry = table
            .get_mut(self.section)
            .and_then(|v| v.as_table_mut())
            .expect("every env section is a table in the serialized config");
        if !entry.contains_key(&self.key) {
            let known: Vec<&str> = entry.keys().map(String::as_str).collect();
            return Err(ConfigError::Parse {
                origin: self.name.clone(),
                message: format!("unknown key `{}` in [{}]; known keys: {}", self.key, self.section, known.join(", ")),
            });
        }
        let value = env_value(&self.raw, entry.get(&self.key));
        entry.insert(self.key.clone(), value);
        Ok(())
    }
}

/// The config variables among `vars`, sorted by name. Others are not config:
/// REBOUND_ADDR for the clients, and Kubernetes service links (a Service named
/// rebound-metrics gives REBOUND_METRICS_PORT, REBOUND_METRICS_PORT_9464_TCP_ADDR,
/// REBOUND_METRICS_SERVICE_HOST...; one named rebound-state-redis gives
/// REBOUND_STATE_REDIS_SERVICE_HOST and REBOUND_STATE_REDIS_PORT).
/// True when the variable `name` would set a config key (or name an unknown one in a
/// section): `REBOUND_ADDR` (the clients'), service links and the like do not.
pub fn is_config_variable(name: &str) -> bool {
    !env_overrides([(name.to_string(), String::new())]).is_empty()
}

fn env_overrides(vars: impl IntoIterator<Item = (String, String)>) -> Vec<EnvOverride> {
    let mut found: Vec<EnvOverride> = vars
        .into_iter()
        .filter_map(|(name, raw)| {
            let lower = name.strip_prefix("REBOUND_")?.to_ascii_lowercase();
            let section = ENV_SECTIONS.iter().find(|s| lower.starts_with(&format!("{s}_")))?;
            let key = lower[section.len() + 1..].to_string();
            if is_service_link(&key) {
                return None;
            }
            Some(EnvOverride { name, raw, section, key })
        })
        .collect();
    found.sort();
    found
}

/// Lays `patch` over `base`, table by table.
fn merge(base: &mut toml::Table, patch: &toml::Table) {
    for (key, value) in patch {
        match (base.get_mut(key), value) {
            (Some(toml::Value::Table(inner)), toml::Value::Table(patch)) => merge(inner, patch),
            _ => {
                base.insert(key.clone(), value.clone());
            }
        }
    }
}

/// True for the key of a service link variable: one of its words is `port` or
/// `service`, which no config key has (a test checks).
fn is_service_link(key: &str) -> bool {
    key.split('_').any(|word| word == "port" || word == "service")
}

/// Why `config` does not serialize to TOML: a number past TOML's largest integer
/// (a u64 setting may be read that large), named by its key.
fn too_large_for_toml(config: &Config, error: toml::ser::Error) -> ConfigError {
    fn find(value: &serde_json::Value, path: &str) -> Option<(String, u64)> {
        match value {
            serde_json::Value::Number(n) => n.as_u64().filter(|&n| n > i64::MAX as u64).map(|n| (path.to_string(), n)),
            serde_json::Value::Object(fields) => fields
                .iter()
                .find_map(|(k, v)| find(v, &if path.is_empty() { k.clone() } else { format!("{path}.{k}") })),
            serde_json::Value::Array(items) => items.iter().find_map(|v| find(v, path)),
            _ => None,
        }
    }
    let found = serde_json::to_value(config).ok().and_then(|v| find(&v, ""));
    ConfigError::Parse {
        origin: "config".into(),
        message: match found {
            Some((key, n)) => format!("`{key}` = {n}: more than {}, the largest TOML integer", i64::MAX),
            None => error.to_string(),
        },
    }
}

/// An environment value as TOML, for a key whose value now is `current`: a string
/// for a string key (a key prefix of `2024` stays text), else a number, bool or
/// array when it parses as one, else a string (which the key's type then refuses).
fn env_value(raw: &str, current: Option<&toml::Value>) -> toml::Value {
    if matches!(current, Some(toml::Value::String(_))) {
        return toml::Value::String(raw.to_string());
    }
    let parsed: Result<toml::Table, _> = toml::from_str(&format!("v = {raw}"));
    match parsed.ok().and_then(|mut t| t.remove("v")) {
        Some(
            v @ (toml::Value::Integer(_) | toml::Value::Float(_) | toml::Value::Boolean(_) | toml::Value::Array(_)),
        ) => v,
        _ => toml::Value::String(raw.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_past_the_limit_or_not_utf8_is_refused_with_its_path() {
        let dir = tempfile::tempdir().unwrap();
        // Blank lines: valid TOML, so only the length refuses it.
        let long = dir.path().join("long.toml");
        std::fs::write(&long, "\n".repeat(MAX_FILE_BYTES as usize + 1)).unwrap();
        let err = Config::read(&long).unwrap_err().to_string();
        assert_eq!(err, format!("{}: longer than 16777216 bytes, the most a config file may be", long.display()));
        let at_limit = dir.path().join("at_limit.toml");
        std::fs::write(&at_limit, "\n".repeat(MAX_FILE_BYTES as usize)).unwrap();
        assert_eq!(Config::read(&at_limit).unwrap(), Config::default());
        let latin1 = dir.path().join("latin1.toml");
        std::fs::write(&latin1, b"# caf\xe9\n").unwrap();
        let err = Config::read(&latin1).unwrap_err().to_string();
        assert!(err.ends_with("latin1.toml: not UTF-8: invalid utf-8 sequence of 1 bytes from index 5"), "{err}");
    }

    #[test]
    fn empty_file_is_all_defaults() {
        assert_eq!(Config::parse("", "t").unwrap(), Config::default());
    }

    #[test]
    fn unknown_keys_are_refused_with_name_and_line() {
        let err = Config::parse("[retry]\nbase_ms = 10\nbsae = 3\n", "my.toml").unwrap_err().to_string();
        assert!(err.contains("my.toml"), "{err}");
        assert!(err.contains("bsae"), "{err}");
        assert!(err.contains("line 3"), "{err}");
        let err = Config::parse("[categories.timeot]\nmax_retries = 1\n", "c.toml").unwrap_err().to_string();
        assert!(err.contains("timeot"), "{err}");
    }

    #[test]
    fn a_password_in_a_line_that_does_not_parse_is_not_quoted() {
        // toml quotes the line; an SRE reported this one in the logs of a failed reload.
        let text = "[state]\nbackend = \"redis\"\nredis_url = \"redis://:TopS3cretPass@127.0.0.1:16379\n";
        let err = Config::parse(text, "pw.toml").unwrap_err().to_string();
        assert!(err.contains("line 3") && err.contains("[REDACTED:url_password]"), "{err}");
        assert!(!err.contains("TopS3cretPass"), "{err}");
        // A variable's value that is not of the key's type is quoted too (one meant for the next key).
        let vars = [("REBOUND_STATE_TIMEOUT_MS".to_string(), "redis://:TopS3cretPass@h:6379".to_string())];
        let err = Config::default().with_env(vars).unwrap_err().to_string();
        assert!(err.contains("REBOUND_STATE_TIMEOUT_MS=redis://:[REDACTED:url_password]@h"), "{err}");
    }

    #[test]
    fn a_value_of_the_wrong_type_is_told_what_the_key_wants_in_words() {
        for (text, wanted) in [
            ("[sessions]\ncapacity = -1\n", "expected a whole number, 0 or more"),
            ("[retry]\nmultiplier = \"x\"\n", "expected a number"),
            ("[breakers]\nsession_errors = 5000000000\n", "(at most 4294967295)"),
        ] {
            let err = Config::parse(text, "t.toml").unwrap_err().to_string();
            assert!(err.contains(wanted) && !err.contains("expected u") && !err.contains("f64"), "{err}");
        }
        let vars = [("REBOUND_SESSIONS_CAPACITY".to_string(), "lots".to_string())];
        let err = Config::default().with_env(vars).unwrap_err().to_string();
        assert!(err.ends_with("expected a whole number, 0 or more"), "{err}");
    }

    #[test]
    fn a_reload_names_the_settings_only_a_restart_applies() {
        let old = Config::default();
        let mut new = Config::default();
        new.retry.base_ms = 10;
        new.tool_breaker.consecutive_failures = 9;
        assert!(old.restart_only_changes(&new).is_empty(), "policy changes apply on reload");
        new.state.sync_interval_ms = 1000;
        new.metrics.tool_label_cap = 10;
        new.tool_breaker.max_tools = 10;
        assert_eq!(old.restart_only_changes(&new), ["[state]", "[metrics]", "tool_breaker.max_tools"]);
        new.server.max_connections = 8;
        new.sessions.history = 3;
        assert_eq!(old.restart_only_changes(&new).len(), 5);
    }

    #[test]
    fn env_overrides_known_keys_and_refuses_unknown_ones() {
        let vars = [
            ("REBOUND_RETRY_BASE_MS".to_string(), "250".to_string()),
            ("REBOUND_SERVER_LISTEN".to_string(), "unix:/tmp/r.sock".to_string()),
            ("REBOUND_ADDR".to_string(), "127.0.0.1:1".to_string()),
            ("REBOUND_SERVICE_HOST".to_string(), "10.0.0.1".to_string()),
            ("REBOUND_METRICS_PORT".to_string(), "tcp://10.0.0.2:9464".to_string()),
            ("REBOUND_METRICS_PORT_9464_TCP_ADDR".to_string(), "10.0.0.2".to_string()),
            ("REBOUND_STATE_SERVICE_HOST".to_string(), "10.0.0.3".to_string()),
            // A Service named rebound-state-redis.
            ("REBOUND_STATE_REDIS_SERVICE_HOST".to_string(), "10.0.0.5".to_string()),
            ("REBOUND_STATE_REDIS_SERVICE_PORT_REDIS".to_string(), "6379".to_string()),
            ("REBOUND_STATE_REDIS_PORT".to_string(), "tcp://10.0.0.5:6379".to_string()),
            ("REBOUND_STATE_REDIS_PORT_6379_TCP_PROTO".to_string(), "tcp".to_string()),
            ("HOME".to_string(), "/root".to_string()),
        ];
        let config = Config::default()
            .with_env(vars.into_iter().chain([("REBOUND_RETRY_BUDGET_MAX_TOKENS".to_string(), "8".to_string())]))
            .unwrap();
        assert_eq!(config.retry.base_ms, 250);
        assert_eq!(config.retry_budget.max_tokens, 8.0);
        assert_eq!(config.server.listen, "unix:/tmp/r.sock");
        let err = Config::default()
            .with_env([("REBOUND_RETRY_BASEMS".to_string(), "1".to_string())])
            .unwrap_err()
            .to_string();
        assert!(err.contains("REBOUND_RETRY_BASEMS") && err.contains("basems"), "{err}");
    }

    #[test]
    fn no_config_key_reads_as_a_service_link() {
        let table = toml::Table::try_from(Config::default()).unwrap();
        for section in ENV_SECTIONS {
            for key in table[section].as_table().expect("a section").keys() {
                assert!(!is_service_link(key), "[{section}] {key} would be skipped as a service link variable");
            }
        }
    }

    #[test]
    fn a_bad_env_value_names_its_variable_and_value() {
        let vars = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
        };
        let err = Config::default()
            .with_env(vars(&[("REBOUND_RETRY_BASE_MS", "250"), ("REBOUND_SESSIONS_CAPACITY", "lots")]))
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("REBOUND_SESSIONS_CAPACITY=lots: invalid type: string \"lots\""), "{err}");
        let err = Config::default().with_env(vars(&[("REBOUND_RETRY_BASE_MS", "-1")])).unwrap_err().to_string();
        assert!(err.starts_with("REBOUND_RETRY_BASE_MS=-1: invalid value: integer `-1`"), "{err}");
        assert!(!err.contains('\n'), "one line: {err:?}");
    }

    #[test]
    fn a_number_past_tomls_largest_integer_is_named() {
        // toml reads a u64 setting past i64::MAX, but cannot hold it in a table to apply overrides to.
        let config = Config::parse("[sessions]\nidle_expiry_ms = 18446744073709551615\n", "f.toml").unwrap();
        // No override: the config goes on as read, to the policy's range check.
        let same = config.clone().with_env([("HOME".to_string(), "/root".to_string())]).unwrap();
        assert_eq!(same.sessions.idle_expiry_ms, u64::MAX);
        let err = config.with_env([("REBOUND_RETRY_BASE_MS".to_string(), "250".to_string())]).unwrap_err().to_string();
        assert!(err.contains("`sessions.idle_expiry_ms` = 18446744073709551615: more than"), "{err}");
    }

    #[test]
    fn a_string_setting_takes_a_value_that_looks_like_a_number() {
        let config = Config::default()
            .with_env([
                ("REBOUND_STATE_KEY_PREFIX".to_string(), "2024".to_string()),
                ("REBOUND_SNIPPET_ENCODING".to_string(), "true".to_string()),
            ])
            .unwrap();
        assert_eq!(config.state.key_prefix, "2024");
        assert_eq!(config.snippet.encoding, "true");
    }

    #[test]
    fn printed_config_parses_back_to_itself() {
        let config = Config::default();
        assert_eq!(Config::parse(&config.to_toml(), "printed").unwrap(), config);
    }
}
