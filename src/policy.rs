//! The policy: the config's values checked once at load and turned into what
//! the engine uses (validated backoff policies, the compiled classifier, the
//! category table). Nothing on the request path validates again.

use crate::backoff::{BackoffError, BackoffPolicy};
use crate::breaker::ToolBreakerPolicy;
use crate::budget::BudgetPolicy;
use crate::classify::{default_rules, CategoryDefaults, Classifier, RuleError};
use crate::compact::SnippetPolicy;
use crate::config::{CategoryPatch, Config};
use crate::model::{Action, Category};
use globset::{Glob, GlobMatcher};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The most profiles a config may define (each compiles its own rules).
pub const MAX_PROFILES: usize = 32;

/// The next [`Policy::id`].
static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// The built-in category table.
pub const DEFAULT_CATEGORIES: &str = include_str!("defaults/categories.toml");

/// One category's policy.
#[derive(Clone, Debug, PartialEq)]
pub struct CategoryPolicy {
    /// Whether a retry may succeed.
    pub retryable: bool,
    /// The action when not retrying.
    pub action: Action,
    /// Delays and the retry count.
    pub backoff: BackoffPolicy,
    /// The suggestion shown.
    pub suggestion: String,
}

/// Session breaker thresholds and default limits.
#[derive(Clone, Debug, PartialEq)]
pub struct Limits {
    /// Consecutive failures of one tool before escalation.
    pub consecutive_failures: u32,
    /// Errors in a session before escalation.
    pub session_errors: u32,
    /// Identical errors in a row before abort.
    pub identical_errors: u32,
    /// Default step limit, if any.
    pub step_limit: Option<u32>,
    /// Default cost limit, if any.
    pub cost_limit: Option<f64>,
}

/// Why a config's values were refused.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// A value out of range.
    #[error("`{field}` = {value}: {problem}")]
    Invalid {
        /// The key, with its section.
        field: String,
        /// Its value.
        value: String,
        /// What is wrong.
        problem: String,
    },
    /// A retry policy was refused.
    #[error("[{section}] {source}")]
    Backoff {
        /// Where.
        section: String,
        /// Why.
        source: BackoffError,
    },
    /// A rule was refused.
    #[error("[[rules]] {0}")]
    Rule(#[from] RuleError),
    /// A profile was refused.
    #[error("[profiles.{name}] {problem}")]
    Profile {
        /// The profile.
        name: String,
        /// What is wrong with it.
        problem: String,
    },
}

/// Everything the engine decides with.
#[derive(Debug)]
pub struct Policy {
    /// Per-category policy; every category is present.
    pub categories: BTreeMap<Category, CategoryPolicy>,
    /// The compiled rules.
    pub classifier: Classifier,
    /// Session breakers.
    pub limits: Limits,
    /// Snippet limits.
    pub snippet: SnippetPolicy,
    /// A provider delay above this is not waited for.
    pub max_provider_delay_ms: u64,
    /// What to answer then.
    pub long_delay_action: Action,
    /// The tool breaker, unless disabled.
    pub tool_breaker: Option<ToolBreakerPolicy>,
    /// The retry budget, unless disabled.
    pub retry_budget: Option<BudgetPolicy>,
    /// Shadow mode: breakers and budgets never change an action.
    pub shadow: bool,
    /// Per-tool retry policies: a glob and its backoff for every category.
    pub tool_retry: Vec<(GlobMatcher, BTreeMap<Category, BackoffPolicy>)>,
    /// The profiles sessions may ask for, by name: whole policies, the file's with
    /// the profile's sections over it.
    pub profiles: BTreeMap<String, Arc<Policy>>,
    /// Tells this policy from every other built in the process (the failures' analyses
    /// kept by the engine are each for one policy: see `analysis`).
    pub id: u64,
}

impl Default for Policy {
    fn default() -> Self {
        Policy::from_config(&Config::default()).expect("the built-in policy is valid")
    }
}

fn invalid(field: &str, value: impl ToString, problem: &str) -> PolicyError {
    PolicyError::Invalid { field: field.to_string(), value: value.to_string(), problem: problem.to_string() }
}

impl Policy {
    /// Checks a config and builds the policy.
    pub fn from_config(config: &Config) -> Result<Self, PolicyError> {
        let b = &config.breakers;
        for (field, value) in [
            ("breakers.tool_consecutive_failures", b.tool_consecutive_failures),
            ("breakers.session_errors", b.session_errors),
            ("breakers.identical_errors", b.identical_errors),
        ] {
            if value == 0 {
                return Err(invalid(field, value, "must be at least 1"));
            }
        }
        // A session counts a tool's failures in a row up to this (see `crate::session::ToolStats`).
        let most = crate::session::MOST_CONSECUTIVE_FAILURES;
        if b.tool_consecutive_failures > u32::from(most) {
            let problem = format!("must be at most {most}");
            return Err(invalid("breakers.tool_consecutive_failures", b.tool_consecutive_failures, &problem));
        }
        if !b.cost_limit.is_finite() || b.cost_limit < 0.0 {
            return Err(invalid("breakers.cost_limit", b.cost_limit, "must be 0 (no limit) or positive"));
        }
        if config.snippet.message_chars < 20 || config.snippet.message_chars > 100_000 {
            return Err(invalid(
                "snippet.message_chars",
                config.snippet.message_chars,
                "must be between 20 and 100000",
            ));
        }
        if config.snippet.context_errors == 0 || config.snippet.context_errors > 100 {
            return Err(invalid("snippet.context_errors", config.snippet.context_errors, "must be between 1 and 100"));
        }
        if config.snippet.frames > 20 {
            return Err(invalid("snippet.frames", config.snippet.frames, "must be between 0 and 20"));
        }
        if config.classify.text_limit < 64 || config.classify.text_limit > 1 << 20 {
            return Err(invalid("classify.text_limit", config.classify.text_limit, "must be between 64 and 1048576"));
        }
        if matches!(config.retry.long_delay_action, Action::Continue | Action::Retry) {
            return Err(invalid(
                "retry.long_delay_action",
                config.retry.long_delay_action,
                "must not be continue or retry",
            ));
        }
        if config.retry.max_provider_delay_ms == 0 {
            return Err(invalid("retry.max_provider_delay_ms", 0, "must be above 0"));
        }
        let longest = crate::backoff::LONGEST_DELAY_MS;
        if config.retry.max_provider_delay_ms > longest {
            let problem = format!("must be at most a day ({longest})");
            return Err(invalid("retry.max_provider_delay_ms", config.retry.max_provider_delay_ms, &problem));
        }
        check_transport(config)?;
        let categories = build_categories(config)?;
        let categories_for_tools = categories.clone();
        let defaults: BTreeMap<Category, CategoryDefaults> = categories
            .iter()
            .map(|(c, p)| (*c, CategoryDefaults { retryable: p.retryable, suggestion: p.suggestion.as_str().into() }))
            .collect();
        let classifier = Classifier::build(&default_rules()?, &config.rules, defaults, config.classify.text_limit)?;
        Ok(Policy {
            categories,
            classifier,
            limits: Limits {
                consecutive_failures: b.tool_consecutive_failures,
                session_errors: b.session_errors,
                identical_errors: b.identical_errors,
                step_limit: (b.step_limit > 0).then_some(b.step_limit),
                cost_limit: (b.cost_limit > 0.0).then_some(b.cost_limit),
            },
            snippet: snippet_policy(&config.snippet)?,
            max_provider_delay_ms: config.retry.max_provider_delay_ms,
            long_delay_action: config.retry.long_delay_action,
            tool_breaker: tool_breaker(config)?,
            retry_budget: retry_budget(config)?,
            shadow: config.breakers.shadow,
            tool_retry: tool_retry(config, &categories_for_tools)?,
            profiles: profiles(config)?,
            id: NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        })
    }

    /// The backoff for a category and tool: the first `[[tools]]` match, else the category's.
    pub fn backoff(&self, category: Category, tool: &str) -> &BackoffPolicy {
        self.tool_retry
            .iter()
            .find(|(glob, _)| glob.is_match(tool))
            .map_or(&self.categories[&category].backoff, |(_, by_category)| &by_category[&category])
    }

    /// One category's policy.
    pub fn category(&self, category: Category) -> &CategoryPolicy {
        &self.categories[&category]
    }

    /// Retryable and suggestion per category, as the classifier needs them.
    pub fn category_defaults(&self) -> BTreeMap<Category, CategoryDefaults> {
        self.categories
            .iter()
            .map(|(c, p)| (*c, CategoryDefaults { retryable: p.retryable, suggestion: p.suggestion.as_str().into() }))
            .collect()
    }
}

/// `[profiles.NAME]`: each a whole policy, checked as the file is.
fn profiles(config: &Config) -> Result<BTreeMap<String, Arc<Policy>>, PolicyError> {
    if config.profiles.len() > MAX_PROFILES {
        let count = format!("{} profiles", config.profiles.len());
        return Err(invalid("profiles", count, &format!("at most {MAX_PROFILES}")));
    }
    let refused = |name: &str, problem: String| PolicyError::Profile { name: name.to_string(), problem };
    config
        .profiles
        .iter()
        .map(|(name, overlay)| {
            let usable = !name.is_empty()
                && name.len() <= 64
                && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b));
            if !usable {
                return Err(refused(name, "a profile's name is 1 to 64 letters, digits, `_`, `.` or `-`".into()));
            }
            let merged = config.with_profile(overlay).map_err(|problem| refused(name, problem))?;
            let policy = Policy::from_config(&merged).map_err(|e| refused(name, e.to_string()))?;
            Ok((name.clone(), Arc::new(policy)))
        })
        .collect()
}

/// `[server]` and `[sessions]`: not policy, but checked here so that
/// `check-config` and a reload refuse them too.
fn check_transport(config: &Config) -> Result<(), PolicyError> {
    let s = &config.server;
    let ranges: [(&str, u64, u64, u64); 12] = [
        ("server.shutdown_delay_ms", s.shutdown_delay_ms, 0, 600_000),
        ("server.keepalive_timeout_ms", s.keepalive_timeout_ms, 100, 600_000),
        ("server.max_message_bytes", s.max_message_bytes as u64, 1024, 64 << 20),
        ("server.max_concurrent_streams", u64::from(s.max_concurrent_streams), 1, 100_000),
        ("server.max_connections", u64::from(s.max_connections), 1, 1_000_000),
        ("server.shutdown_grace_ms", s.shutdown_grace_ms, 0, 3_600_000),
        ("server.worker_threads", u64::from(s.worker_threads), 0, 256),
        ("sessions.capacity", config.sessions.capacity as u64, 1, 100_000_000),
        ("sessions.max_bytes", config.sessions.max_bytes, 1 << 20, 1 << 40),
        ("sessions.shards", config.sessions.shards as u64, 1, 4096),
        ("sessions.idle_expiry_ms", config.sessions.idle_expiry_ms, 1000, 30 * 24 * 3_600_000),
        ("sessions.history", config.sessions.history as u64, 1, 1000),
    ];
    for (field, value, min, max) in ranges {
        if value < min || value > max {
            return Err(invalid(field, value, &format!("must be between {min} and {max}")));
        }
    }
    // 0 turns the pings off; a ping every few milliseconds would only cost the agent CPU.
    if s.keepalive_interval_ms != 0 && !(1000..=86_400_000).contains(&s.keepalive_interval_ms) {
        let problem = "must be 0 (no pings) or between 1000 and 86400000";
        return Err(invalid("server.keepalive_interval_ms", s.keepalive_interval_ms, problem));
    }
    let st = &config.state;
    if config.state.backend == crate::config::Backend::Redis {
        let url = st.redis_url.as_str();
        if !(url.starts_with("redis://") || url.starts_with("rediss://")) {
            let shown = crate::redact::redact(url).into_owned();
            return Err(invalid("state.redis_url", format!("{shown:?}"), "must start with redis:// or rediss://"));
        }
        if st.sync_interval_ms < 10 || st.sync_interval_ms > 60_000 {
            return Err(invalid("state.sync_interval_ms", st.sync_interval_ms, "must be between 10 and 60000"));
        }
        if st.timeout_ms < 10 || st.timeout_ms > 60_000 {
            return Err(invalid("state.timeout_ms", st.timeout_ms, "must be between 10 and 60000"));
        }
        if let Err(crate::shared::SharedError::Url(why)) = crate::shared::connection_info(st) {
            let shown = crate::redact::redact(url).into_owned();
            return Err(invalid("state.redis_url", format!("{shown:?}"), &format!("does not parse ({why})")));
        }
        // print-config's placeholder, which Redis would be sent as the password.
        if st.redis_password_env.is_empty() && url.contains("[REDACTED:") {
            let problem = "holds a redaction placeholder (print-config's output) as its password: set \
                           state.redis_password_env to the name of a variable holding the password";
            return Err(invalid("state.redis_url", format!("{url:?}"), problem));
        }
        // Empty, every key would be a bare `open` or `tool:...`, in a Redis other programs may share.
        if st.key_prefix.is_empty() || st.key_prefix.len() > 64 {
            return Err(invalid("state.key_prefix", format!("{:?}", st.key_prefix), "must be 1 to 64 bytes"));
        }
    }
    if config.sessions.idempotency_window > 1000 {
        return Err(invalid("sessions.idempotency_window", config.sessions.idempotency_window, "must be at most 1000"));
    }
    check_listen("server.listen", &s.listen, true)?;
    check_listen("server.metrics_listen", &s.metrics_listen, false)?;
    check_apart("server.metrics_listen", &s.listen, &s.metrics_listen)
}

/// The two listeners need two ports (each `:0` gets its own): binding both to one failed
/// with a bare "Address already in use" for the metrics port.
pub fn check_apart(field: &str, listen: &str, metrics_listen: &str) -> Result<(), PolicyError> {
    if listen != metrics_listen || listen.ends_with(":0") {
        return Ok(());
    }
    Err(invalid(field, format!("{metrics_listen:?}"), "is the gRPC address too: give the metrics another port"))
}

/// The longest path a Unix socket may have: Linux's `sun_path` holds 108 bytes, its NUL included.
const SOCKET_PATH_BYTES: usize = 107;

/// Checks an address to listen on, named `field` in the error: `host:port`, or
/// `unix:/path` where `unix` allows it.
pub fn check_listen(field: &str, address: &str, unix: bool) -> Result<(), PolicyError> {
    let ok = match address.strip_prefix("unix:") {
        Some(path) if unix && path.len() > SOCKET_PATH_BYTES => {
            let problem =
                format!("the path is {} bytes; a Unix socket's may be at most {SOCKET_PATH_BYTES}", path.len());
            return Err(invalid(field, format!("{address:?}"), &problem));
        }
        Some(path) => unix && !path.is_empty(),
        None => address.rsplit_once(':').is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok()),
    };
    if ok {
        return Ok(());
    }
    let form = if unix { "host:port or unix:/path" } else { "host:port" };
    Err(invalid(field, format!("{address:?}"), &format!("write it as {form}")))
}

fn snippet_policy(s: &crate::config::SnippetConfig) -> Result<SnippetPolicy, PolicyError> {
    let budget = |n: u32| (n > 0).then_some(n);
    let (max_tokens, context_max_tokens) = (budget(s.max_tokens), budget(s.context_max_tokens));
    for (field, value) in [("snippet.max_tokens", s.max_tokens), ("snippet.context_max_tokens", s.context_max_tokens)] {
        if value > 0 && value < 16 {
            return Err(invalid(field, value, "must be 0 (no budget) or at least 16"));
        }
    }
    if !crate::templates::ENCODINGS.contains(&s.encoding.as_str()) {
        return Err(invalid(
            "snippet.encoding",
            format!("{:?}", s.encoding),
            "must be o200k_base, cl100k_base, p50k_base or r50k_base",
        ));
    }
    let templates = crate::templates::Templates::build(&s.templates).map_err(|e| PolicyError::Invalid {
        field: "snippet.templates".into(),
        value: String::new(),
        problem: e.to_string(),
    })?;
    Ok(SnippetPolicy {
        message_chars: s.message_chars,
        context_errors: s.context_errors,
        frames: s.frames,
        max_tokens,
        context_max_tokens,
        // The encoding is loaded (once per process) only when a budget needs it.
        tokenizer: if max_tokens.is_some() || context_max_tokens.is_some() {
            crate::templates::Tokenizer::by_name(&s.encoding)
        } else {
            None
        },
        encoding: s.encoding.clone(),
        templates,
    })
}

fn tool_breaker(config: &Config) -> Result<Option<ToolBreakerPolicy>, PolicyError> {
    let t = &config.tool_breaker;
    if !t.enabled {
        return Ok(None);
    }
    if t.consecutive_failures == 0 {
        return Err(invalid("tool_breaker.consecutive_failures", 0, "must be at least 1"));
    }
    if t.window == 0 || t.window > 64 {
        return Err(invalid("tool_breaker.window", t.window, "must be between 1 and 64"));
    }
    if t.min_calls == 0 || t.min_calls > t.window {
        return Err(invalid("tool_breaker.min_calls", t.min_calls, "must be between 1 and `window`"));
    }
    if !(t.failure_rate > 0.0 && t.failure_rate <= 1.0) {
        return Err(invalid("tool_breaker.failure_rate", t.failure_rate, "must be above 0 and at most 1"));
    }
    if t.open_base_ms == 0 {
        return Err(invalid("tool_breaker.open_base_ms", t.open_base_ms, "must be above 0"));
    }
    if t.open_max_ms < t.open_base_ms || t.open_max_ms > crate::breaker::LONGEST_OPEN_MS {
        return Err(invalid("tool_breaker.open_max_ms", t.open_max_ms, "must be between open_base_ms and a day"));
    }
    if t.probes == 0 || t.probes > 100 {
        return Err(invalid("tool_breaker.probes", t.probes, "must be between 1 and 100"));
    }
    Ok(Some(ToolBreakerPolicy {
        consecutive_failures: t.consecutive_failures,
        window: t.window,
        min_calls: t.min_calls,
        failure_rate: t.failure_rate,
        open_base_ms: t.open_base_ms,
        open_max_ms: t.open_max_ms,
        probes: t.probes,
    }))
}

fn retry_budget(config: &Config) -> Result<Option<BudgetPolicy>, PolicyError> {
    let b = &config.retry_budget;
    if !b.enabled {
        return Ok(None);
    }
    if !b.max_tokens.is_finite() || b.max_tokens < 1.0 || b.max_tokens > 1e6 {
        return Err(invalid("retry_budget.max_tokens", b.max_tokens, "must be between 1 and 1000000"));
    }
    if !b.token_ratio.is_finite() || b.token_ratio < 0.0 || b.token_ratio > b.max_tokens {
        return Err(invalid("retry_budget.token_ratio", b.token_ratio, "must be between 0 and max_tokens"));
    }
    Ok(Some(BudgetPolicy { max_tokens: b.max_tokens, token_ratio: b.token_ratio }))
}

/// A tool glob with the backoff per category it sets.
type ToolBackoff = (GlobMatcher, BTreeMap<Category, BackoffPolicy>);

/// `[[tools]]`: each glob's backoff for every category, built (and so checked) at load.
fn tool_retry(
    config: &Config,
    categories: &BTreeMap<Category, CategoryPolicy>,
) -> Result<Vec<ToolBackoff>, PolicyError> {
    let r = &config.retry;
    config
        .tools
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let glob = Glob::new(&t.tool)
                .map_err(|e| invalid(&format!("tools[{i}].tool"), format!("{:?}", t.tool), &e.to_string()))?
                .compile_matcher();
            let by_category = categories
                .iter()
                .map(|(c, p)| {
                    let max = if p.retryable { t.max_retries.unwrap_or(p.backoff.max_retries()) } else { 0 };
                    BackoffPolicy::try_new(
                        t.base_ms.unwrap_or(r.base_ms),
                        t.multiplier.unwrap_or(r.multiplier),
                        t.cap_ms.unwrap_or(r.cap_ms),
                        max,
                        t.jitter.unwrap_or(r.jitter),
                        r.jitter_fraction,
                    )
                    .map(|b| (*c, b))
                    .map_err(|source| PolicyError::Backoff { section: format!("tools[{i}]"), source })
                })
                .collect::<Result<_, _>>()?;
            Ok((glob, by_category))
        })
        .collect()
}

/// The built-in table, patched by the config, every category checked.
fn build_categories(config: &Config) -> Result<BTreeMap<Category, CategoryPolicy>, PolicyError> {
    let builtin: BTreeMap<Category, CategoryPatch> =
        toml::from_str(DEFAULT_CATEGORIES).map_err(|e| invalid("(built-in categories)", "", &e.to_string()))?;
    let r = &config.retry;
    // [retry] itself first: every category takes what it does not set from it, and a
    // bad value there should be named where it was written, not in the first category.
    BackoffPolicy::try_new(r.base_ms, r.multiplier, r.cap_ms, 0, r.jitter, r.jitter_fraction)
        .map_err(|source| PolicyError::Backoff { section: "retry".into(), source })?;
    let mut out = BTreeMap::new();
    for category in Category::ALL {
        let base = builtin.get(category).cloned().unwrap_or_default();
        let patch = config.categories.get(category).cloned().unwrap_or_default();
        let section = format!("categories.{category}");
        let field = |name: &str| format!("{section}.{name}");
        let retryable =
            patch.retryable.or(base.retryable).ok_or_else(|| invalid(&field("retryable"), "", "missing"))?;
        let action = patch.action.or(base.action).ok_or_else(|| invalid(&field("action"), "", "missing"))?;
        if matches!(action, Action::Continue | Action::Retry) {
            return Err(invalid(
                &field("action"),
                action,
                "is what to do when not retrying: one of recover, replan, reclassify, escalate, abort",
            ));
        }
        let max_retries = if retryable { patch.max_retries.or(base.max_retries).unwrap_or(0) } else { 0 };
        let backoff = BackoffPolicy::try_new(
            patch.base_ms.or(base.base_ms).unwrap_or(r.base_ms),
            patch.multiplier.or(base.multiplier).unwrap_or(r.multiplier),
            patch.cap_ms.or(base.cap_ms).unwrap_or(r.cap_ms),
            max_retries,
            patch.jitter.or(base.jitter).unwrap_or(r.jitter),
            r.jitter_fraction,
        )
        .map_err(|source| PolicyError::Backoff { section: section.clone(), source })?;
        let suggestion = patch.suggestion.or(base.suggestion).unwrap_or_default();
        out.insert(*category, CategoryPolicy { retryable, action, backoff, suggestion });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_the_design_table() {
        let p = Policy::default();
        let row = |c| {
            let cp = p.category(c);
            (cp.retryable, cp.action, cp.backoff.max_retries())
        };
        assert_eq!(row(Category::Timeout), (true, Action::Recover, 3));
        assert_eq!(row(Category::Internal), (true, Action::Recover, 1));
        assert_eq!(row(Category::Auth), (false, Action::Escalate, 0));
        assert_eq!(row(Category::UnknownTool), (false, Action::Reclassify, 0));
        assert_eq!(row(Category::ContextLength), (false, Action::Replan, 0));
        assert_eq!(row(Category::Cancelled), (false, Action::Abort, 0));
        assert_eq!(p.limits.consecutive_failures, 3);
        assert_eq!(p.limits.session_errors, 10);
        assert_eq!(p.limits.identical_errors, 5);
    }

    #[test]
    fn bad_values_are_named() {
        let mut c = Config::default();
        c.breakers.identical_errors = 0;
        assert!(Policy::from_config(&c).unwrap_err().to_string().contains("breakers.identical_errors"));
        // A session's counters hold 65,535 failures in a row: a threshold past them would never trip.
        let mut c = Config::default();
        c.breakers.tool_consecutive_failures = 65_535;
        assert!(Policy::from_config(&c).is_ok());
        c.breakers.tool_consecutive_failures = 65_536;
        let error = Policy::from_config(&c).unwrap_err().to_string();
        assert_eq!(error, "`breakers.tool_consecutive_failures` = 65536: must be at most 65535");
        let c = Config::parse("[categories.timeout]\naction = \"retry\"\n", "t").unwrap();
        assert!(Policy::from_config(&c).unwrap_err().to_string().contains("categories.timeout.action"));
        let c = Config::parse("[retry]\nbase_ms = 0\n", "t").unwrap();
        assert!(Policy::from_config(&c).unwrap_err().to_string().contains("base_ms"));
        // Named in [retry], where it was written, not in the first category that inherits it.
        let c = Config::parse("[retry]\nmultiplier = nan\n", "t").unwrap();
        let err = Policy::from_config(&c).unwrap_err().to_string();
        assert!(err.starts_with("[retry] `multiplier` = NaN"), "{err}");
        let c = Config::parse("[server]\nlisten = \"nowhere\"\n", "t").unwrap();
        assert!(Policy::from_config(&c).unwrap_err().to_string().contains("`server.listen` = \"nowhere\""));
        // A path bind would refuse as "path must be shorter than SUN_LEN", and one port for both.
        let long = format!("[server]\nlisten = \"unix:/run/{}\"\n", "a".repeat(103));
        let err = Policy::from_config(&Config::parse(&long, "t").unwrap()).unwrap_err().to_string();
        assert!(err.contains("the path is 108 bytes; a Unix socket's may be at most 107"), "{err}");
        let at_most = format!("[server]\nlisten = \"unix:/run/{}\"\n", "a".repeat(102));
        assert!(Policy::from_config(&Config::parse(&at_most, "t").unwrap()).is_ok());
        let c = Config::parse("[server]\nlisten = \"0.0.0.0:7\"\nmetrics_listen = \"0.0.0.0:7\"\n", "t").unwrap();
        let err = Policy::from_config(&c).unwrap_err().to_string();
        assert!(err.contains("`server.metrics_listen` = \"0.0.0.0:7\": is the gRPC address too"), "{err}");
        let c = Config::parse("[server]\nlisten = \"127.0.0.1:0\"\nmetrics_listen = \"127.0.0.1:0\"\n", "t").unwrap();
        assert!(Policy::from_config(&c).is_ok(), "each :0 gets its own port");
        let c = Config::parse("[sessions]\ncapacity = 0\n", "t").unwrap();
        assert!(Policy::from_config(&c).unwrap_err().to_string().contains("sessions.capacity"));
        let c = Config::parse("[server]\nmax_connections = 0\n", "t").unwrap();
        assert!(Policy::from_config(&c).unwrap_err().to_string().contains("`server.max_connections` = 0"));
        for (toml, named) in [
            ("keepalive_interval_ms = 9223372036854775807", "`server.keepalive_interval_ms` = 9223372036854775807"),
            ("keepalive_interval_ms = 5", "`server.keepalive_interval_ms` = 5"),
            ("keepalive_timeout_ms = 0", "`server.keepalive_timeout_ms` = 0"),
            ("keepalive_timeout_ms = 600001", "`server.keepalive_timeout_ms` = 600001"),
            ("worker_threads = 257", "`server.worker_threads` = 257"),
        ] {
            let c = Config::parse(&format!("[server]\n{toml}\n"), "t").unwrap();
            assert!(Policy::from_config(&c).unwrap_err().to_string().contains(named), "{toml}");
        }
        // Each names the key that is wrong (open_base_ms = 0 used to be told as open_max_ms).
        for (toml, named) in [
            ("open_base_ms = 0", "`tool_breaker.open_base_ms` = 0"),
            ("open_max_ms = 86400001", "`tool_breaker.open_max_ms` = 86400001"),
            ("open_base_ms = 5000\nopen_max_ms = 4000", "`tool_breaker.open_max_ms` = 4000"),
        ] {
            let c = Config::parse(&format!("[tool_breaker]\n{toml}\n"), "t").unwrap();
            let err = Policy::from_config(&c).unwrap_err().to_string();
            assert!(err.contains(named), "{toml}: {err}");
        }
        // A Redis URL the sidecar could not use fails `check-config`, not only the start
        // (which used to switch sharing off with one log line); a password in it is not shown.
        for (toml, named) in [
            (
                "redis_url = \"redis://127.0.0.1:notaport\"",
                "`state.redis_url` = \"redis://127.0.0.1:notaport\": does not parse",
            ),
            ("redis_url = \"redis://:hunter2@127.0.0.1:6379/abc\"", "does not parse (Invalid database number"),
            ("key_prefix = \"\"", "`state.key_prefix` = \"\""),
            ("redis_url = \"redis://:[REDACTED:url_password]@h:6379\"", "holds a redaction placeholder"),
        ] {
            let c = Config::parse(&format!("[state]\nbackend = \"redis\"\n{toml}\n"), "t").unwrap();
            let err = Policy::from_config(&c).unwrap_err().to_string();
            assert!(err.contains(named) && !err.contains("hunter2"), "{toml}: {err}");
        }
        let c = Config::parse("[server]\nkeepalive_interval_ms = 0\nkeepalive_timeout_ms = 100\n", "t").unwrap();
        assert!(Policy::from_config(&c).is_ok(), "0 turns the pings off");
        let c = Config::parse("[server]\nworker_threads = 0\n", "t").unwrap();
        assert!(Policy::from_config(&c).is_ok(), "0 is one thread per CPU");
        let c = Config::parse("[retry]\nmax_provider_delay_ms = 86400001\n", "t").unwrap();
        let err = Policy::from_config(&c).unwrap_err().to_string();
        assert!(err.contains("`retry.max_provider_delay_ms` = 86400001: must be at most a day"), "{err}");
        let c = Config::parse("[retry]\nmax_provider_delay_ms = 86400000\n", "t").unwrap();
        assert!(Policy::from_config(&c).is_ok());
        let c = Config::parse("[snippet]\nframes = 21\n", "t").unwrap();
        assert!(Policy::from_config(&c).unwrap_err().to_string().contains("`snippet.frames` = 21"));
        let c = Config::parse("[snippet]\nframes = 3\n", "t").unwrap();
        assert_eq!(Policy::from_config(&c).unwrap().snippet.frames, 3);
    }

    #[test]
    fn profiles_lay_their_sections_over_the_file_and_are_checked_as_it_is() {
        let toml = "[categories.timeout]\nmax_retries = 5\n\n[[tools]]\ntool = \"search\"\nmax_retries = 1\n\n\
                    [profiles.patient.retry]\nbase_ms = 2000\ncap_ms = 20000\n\n[profiles.patient.categories.timeout]\naction = \"replan\"\n\n\
                    [[profiles.patient.tools]]\ntool = \"search\"\nmax_retries = 4\n";
        let p = Policy::from_config(&Config::parse(toml, "t").unwrap()).unwrap();
        let patient = &p.profiles["patient"];
        // Tables merge key by key: the file's max_retries stays, the profile's action joins it.
        assert_eq!(patient.category(Category::Timeout).backoff.max_retries(), 5);
        assert_eq!(patient.category(Category::Timeout).action, Action::Replan);
        assert_eq!(p.category(Category::Timeout).action, Action::Recover);
        assert_eq!(patient.category(Category::Unavailable).backoff.max_retries(), 3);
        assert_eq!(patient.backoff(Category::Unavailable, "fetch").cap_ms(), 20_000);
        // The profile's [[tools]] come first.
        assert_eq!(patient.backoff(Category::Unavailable, "search").max_retries(), 4);
        assert_eq!(p.backoff(Category::Unavailable, "search").max_retries(), 1);
        assert!(p.profiles["patient"].profiles.is_empty());
        for (toml, named) in [
            ("[profiles.a.server]\nlisten = \"127.0.0.1:1\"\n", "[profiles.a] `server` cannot be set per profile"),
            ("[profiles.b.breakers]\nidentical_errors = 0\n", "[profiles.b] `breakers.identical_errors` = 0"),
            ("[profiles.c.retry]\nbase_msec = 1\n", "[profiles.c] unknown field `base_msec`"),
            ("[profiles.\"d e\".retry]\nbase_ms = 10\n", "[profiles.d e] a profile's name is"),
        ] {
            let err = Policy::from_config(&Config::parse(toml, "t").unwrap()).unwrap_err().to_string();
            assert!(err.starts_with(named), "{err}");
        }
    }

    #[test]
    fn tool_globs_pick_their_own_backoff() {
        let c = Config::parse("[[tools]]\ntool = \"search_*\"\nmax_retries = 6\nbase_ms = 50\ncap_ms = 100\n", "t")
            .unwrap();
        let p = Policy::from_config(&c).unwrap();
        assert_eq!(p.backoff(Category::Timeout, "search_web").max_retries(), 6);
        assert_eq!(p.backoff(Category::Timeout, "search_web").cap_ms(), 100);
        assert_eq!(p.backoff(Category::Timeout, "fetch").max_retries(), 3);
        assert_eq!(p.backoff(Category::Auth, "search_web").max_retries(), 0, "not retryable stays so");
        let c = Config::parse("[[tools]]\ntool = \"a\"\nbase_ms = 0\n", "t").unwrap();
        assert!(Policy::from_config(&c).unwrap_err().to_string().contains("tools[0]"));
        let c = Config::parse("[tool_breaker]\nwindow = 65\n", "t").unwrap();
        assert!(Policy::from_config(&c).unwrap_err().to_string().contains("tool_breaker.window"));
    }

    #[test]
    fn category_patches_keep_unnamed_fields() {
        let c = Config::parse("[categories.timeout]\nmax_retries = 5\n", "t").unwrap();
        let p = Policy::from_config(&c).unwrap();
        assert_eq!(p.category(Category::Timeout).backoff.max_retries(), 5);
        assert_eq!(p.category(Category::Timeout).action, Action::Recover);
        assert!(p.category(Category::Timeout).suggestion.contains("simpler"));
    }
}
