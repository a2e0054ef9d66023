//! Fleet-wide tool breakers and retry budgets, shared through Redis.
//!
//! Consistency model: every sidecar decides from its own local state, so a
//! Report never waits on Redis. A background task exchanges what changed every
//! `sync_interval_ms` (default 200 ms): it pushes each tool's new failures,
//! successes, local opens and closes and budget use through one Lua script per
//! tool (atomic, timed by Redis's own clock), and pulls the set of tools open
//! anywhere. A trip on one sidecar therefore reaches the others within about
//! two sync intervals (well under a second). Failures of one tool on several
//! sidecars add up: the fleet opens the breaker after `consecutive_failures`
//! of them with no success in between. Probes stay local: each sidecar probes
//! a half-open tool itself, and a close resets the fleet's re-open count.
//! Keys expire when unused, so nothing leaks.
//!
//! Fail-open: when Redis is down or slow, decisions go on from local state,
//! `rebound_state_backend_errors_total` counts, health stays SERVING, and the
//! task reconnects with backoff; when Redis returns, sharing resumes.

use crate::breaker::Health;
use crate::config::StateConfig;
use crate::engine::Engine;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What happened to one tool since the last exchange.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ToolDelta {
    /// Unhealthy failures.
    pub failures: u32,
    /// Unhealthy failures after the last success.
    pub trailing_failures: u32,
    /// Whether a success was seen.
    pub had_success: bool,
    /// The longest open period a local breaker started, to publish.
    pub opened_ms: u64,
    /// Whether a local breaker closed (its probes succeeded).
    pub closed: bool,
    /// Retryable failures (each costs a budget token).
    pub budget_failures: u32,
    /// Successes (each refills a fraction of a token).
    pub budget_successes: u32,
}

/// Changes waiting for the next exchange; the Report path only adds to it.
#[derive(Debug, Default)]
pub struct Pending(Mutex<HashMap<String, ToolDelta>>);

impl Pending {
    /// Notes one outcome of `tool`: its health, whether it cost a budget token,
    /// the open period a local breaker just started, and whether one just closed.
    pub fn note(&self, tool: &str, health: Health, retryable_failure: bool, opened_ms: Option<u64>, closed: bool) {
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if !map.contains_key(tool) {
            if map.len() >= 100_000 {
                return;
            }
            map.insert(tool.to_string(), ToolDelta::default());
        }
        let d = map.get_mut(tool).expect("inserted above");
        match health {
            Health::Success => {
                d.had_success = true;
                d.trailing_failures = 0;
                d.budget_successes += 1;
            }
            Health::Failure { .. } => {
                d.failures += 1;
                d.trailing_failures += 1;
            }
            Health::Neutral => {}
        }
        if retryable_failure {
            d.budget_failures += 1;
        }
        if let Some(period) = opened_ms {
            d.opened_ms = d.opened_ms.max(period);
        }
        d.closed |= closed;
    }

    /// Takes everything noted so far.
    pub fn take(&self) -> HashMap<String, ToolDelta> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

/// Pushes one tool's changes and answers Redis's time, the tool's open-until and its budget.
const PUSH: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local key, open_set, tool = KEYS[1], KEYS[2], ARGV[1]
local until_ms = tonumber(redis.call('HGET', key, 'open_until') or '0')
local opens = tonumber(redis.call('HGET', key, 'opens') or '0')
local consec = tonumber(redis.call('HGET', key, 'consec') or '0')
if ARGV[6] == '1' and until_ms <= now then
  opens = 0
  redis.call('ZREM', open_set, tool)
end
if ARGV[4] == '1' then consec = tonumber(ARGV[3]) else consec = consec + tonumber(ARGV[2]) end
local local_open = tonumber(ARGV[5])
if local_open > 0 then
  if now + local_open > until_ms then until_ms = now + local_open end
  opens = opens + 1
  consec = 0
elseif until_ms <= now and consec >= tonumber(ARGV[7]) then
  local period = math.min(tonumber(ARGV[9]), tonumber(ARGV[8]) * math.pow(2, math.min(opens, 20)))
  opens = opens + 1
  until_ms = now + math.floor(period)
  consec = 0
end
if until_ms > now then redis.call('ZADD', open_set, until_ms, tool) end
local max_tokens = tonumber(ARGV[12])
local tokens = tonumber(redis.call('HGET', key, 'tokens') or ARGV[12])
tokens = tokens - tonumber(ARGV[10]) + tonumber(ARGV[11]) * tonumber(ARGV[13])
if tokens < 0 then tokens = 0 end
if tokens > max_tokens then tokens = max_tokens end
redis.call('HSET', key, 'open_until', until_ms, 'opens', opens, 'consec', consec, 'tokens', tostring(tokens))
redis.call('PEXPIRE', key, tonumber(ARGV[14]))
redis.call('PEXPIRE', open_set, tonumber(ARGV[14]))
return {now, until_ms, tostring(tokens)}
"#;

/// Answers Redis's time and every tool open anywhere, with its open-until.
const PULL: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
return {now, redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf', 'WITHSCORES', 'LIMIT', 0, 10000)}
"#;

/// Why the exchange failed (always counted, never shown to agents).
#[derive(Debug, thiserror::Error)]
pub enum SharedError {
    /// Redis said no or the connection broke.
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
    /// It took longer than `timeout_ms`.
    #[error("redis did not answer within {0} ms")]
    Timeout(u64),
    /// The URL does not parse.
    #[error("state.redis_url: {0}")]
    Url(String),
}

/// The Redis client settings, with the password from the environment if so configured.
pub fn client(config: &StateConfig) -> Result<redis::Client, SharedError> {
    use redis::IntoConnectionInfo;
    let mut info = config.redis_url.as_str().into_connection_info().map_err(|e| {
        SharedError::Url(format!(
            "{}: {}",
            crate::redact::redact(&config.redis_url),
            crate::redact::redact(&e.to_string())
        ))
    })?;
    if !config.redis_password_env.is_empty() {
        if let Ok(password) = std::env::var(&config.redis_password_env) {
            info.redis.password = Some(password);
        }
    }
    if config.redis_url.starts_with("rediss://") {
        // rustls needs a process-wide crypto provider; a second install is harmless.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
    redis::Client::open(info).map_err(SharedError::from)
}

/// Runs the exchange until the task is dropped.
pub async fn run(engine: Arc<Engine>, config: StateConfig) {
    let shown = crate::redact::redact(&config.redis_url).into_owned();
    let client = match client(&config) {
        Ok(c) => c,
        Err(e) => {
            // Validated at load; if it still fails, keep deciding locally.
            tracing::error!(error = %e, "shared state disabled");
            return;
        }
    };
    let push = redis::Script::new(PUSH);
    let pull = redis::Script::new(PULL);
    let timeout = Duration::from_millis(config.timeout_ms);
    let mut tick = tokio::time::interval(Duration::from_millis(config.sync_interval_ms));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut connection: Option<redis::aio::ConnectionManager> = None;
    let mut backoff_ms = 100u64;
    let mut next_attempt = tokio::time::Instant::now();
    let mut healthy = true;
    loop {
        tick.tick().await;
        if connection.is_none() {
            if tokio::time::Instant::now() < next_attempt {
                engine.take_shared_pending();
                continue;
            }
            match tokio::time::timeout(timeout, redis::aio::ConnectionManager::new(client.clone())).await {
                Ok(Ok(c)) => {
                    tracing::info!(redis = %shown, "shared state connected");
                    connection = Some(c);
                    backoff_ms = 100;
                }
                failed => {
                    let err = match failed {
                        Ok(Err(e)) => SharedError::from(e),
                        _ => SharedError::Timeout(config.timeout_ms),
                    };
                    engine.metrics().backend_error();
                    if healthy {
                        tracing::warn!(redis = %shown, error = %err, "shared state unreachable; deciding locally");
                        healthy = false;
                    }
                    engine.take_shared_pending();
                    next_attempt = tokio::time::Instant::now() + Duration::from_millis(backoff_ms);
                    backoff_ms = (backoff_ms * 2).min(5000);
                    continue;
                }
            }
        }
        let con = connection.as_mut().expect("connected above");
        let pending = engine.take_shared_pending();
        match tokio::time::timeout(timeout, exchange(con, &push, &pull, &config, &engine, pending)).await {
            Ok(Ok(())) => {
                if !healthy {
                    tracing::info!(redis = %shown, "shared state back");
                    healthy = true;
                }
            }
            failed => {
                let err = match failed {
                    Ok(Err(e)) => e,
                    _ => SharedError::Timeout(config.timeout_ms),
                };
                engine.metrics().backend_error();
                if healthy {
                    tracing::warn!(redis = %shown, error = %err, "shared state exchange failed; deciding locally");
                    healthy = false;
                }
                // The manager reconnects by itself; after a timeout start afresh.
                if matches!(err, SharedError::Timeout(_)) {
                    connection = None;
                }
            }
        }
    }
}

/// One exchange: push every tool's changes, then pull the tools open anywhere.
async fn exchange(
    con: &mut redis::aio::ConnectionManager,
    push: &redis::Script,
    pull: &redis::Script,
    config: &StateConfig,
    engine: &Engine,
    pending: HashMap<String, ToolDelta>,
) -> Result<(), SharedError> {
    let policy = engine.policy();
    let breaker = policy.tool_breaker.clone().unwrap_or_default();
    let budget = policy.retry_budget.clone().unwrap_or_default();
    let open_set = format!("{}open", config.key_prefix);
    let ttl_ms = (breaker.open_max_ms * 2).max(600_000);
    for (tool, d) in pending {
        let (redis_now, _until, tokens): (i64, i64, String) = push
            .key(format!("{}tool:{tool}", config.key_prefix))
            .key(&open_set)
            .arg(&tool)
            .arg(d.failures)
            .arg(d.trailing_failures)
            .arg(u8::from(d.had_success))
            .arg(d.opened_ms)
            .arg(u8::from(d.closed))
            .arg(breaker.consecutive_failures)
            .arg(breaker.open_base_ms)
            .arg(breaker.open_max_ms)
            .arg(d.budget_failures)
            .arg(d.budget_successes)
            .arg(budget.max_tokens)
            .arg(budget.token_ratio)
            .arg(ttl_ms)
            .invoke_async(con)
            .await?;
        let _ = redis_now;
        if policy.retry_budget.is_some() {
            if let Ok(tokens) = tokens.parse::<f64>() {
                engine.set_budget_tokens(&tool, tokens);
            }
        }
    }
    let (redis_now, open): (i64, Vec<(String, i64)>) = pull.key(&open_set).invoke_async(con).await?;
    for (tool, until) in open {
        let remaining = u64::try_from(until - redis_now).unwrap_or(0);
        if remaining > 0 {
            engine.open_tool_for(&tool, remaining);
        }
    }
    Ok(())
}
