//! Fleet-wide tool breakers and retry budgets, shared through Redis.
//!
//! Consistency model: every sidecar decides from its own local state, so a
//! Report never waits on Redis. A background task exchanges what changed every
//! `sync_interval_ms` (default 200 ms): it pushes each tool's new failures,
//! successes, local opens and closes and budget use through a Lua script (atomic,
//! timed by Redis's own clock, a batch of tools per call), and pulls the set of
//! tools open anywhere. A trip on one sidecar therefore reaches the others within about
//! two sync intervals (well under a second). Failures of one tool on several
//! sidecars add up: the fleet opens the breaker after `consecutive_failures`
//! of them with no success in between. Probes stay local: each sidecar probes
//! a half-open tool itself, and a close resets the fleet's re-open count.
//! Keys expire when unused, so nothing leaks. What is read back is checked: a
//! value another program wrote is replaced, and no open lasts past a day.
//!
//! Fail-open: when Redis is down or slow, decisions go on from local state,
//! `rebound_state_backend_errors_total` counts, `rebound_state_backend_up` is 0,
//! health stays SERVING, and the
//! task reconnects with backoff; when Redis returns, sharing resumes.

use crate::breaker::{Health, LONGEST_OPEN_MS};
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

    /// Puts back changes taken but not pushed, before those noted since.
    pub fn restore(&self, earlier: impl IntoIterator<Item = (String, ToolDelta)>) {
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        for (tool, before) in earlier {
            let merged = match map.remove(&tool) {
                Some(since) => before.then(since),
                None => before,
            };
            map.insert(tool, merged);
        }
    }
}

impl ToolDelta {
    /// These changes followed by `later`'s.
    fn then(self, later: ToolDelta) -> ToolDelta {
        ToolDelta {
            failures: self.failures + later.failures,
            // Failures after the last success: `later`'s alone if it saw one.
            trailing_failures: if later.had_success {
                later.trailing_failures
            } else {
                self.trailing_failures + later.trailing_failures
            },
            had_success: self.had_success || later.had_success,
            opened_ms: self.opened_ms.max(later.opened_ms),
            closed: self.closed || later.closed,
            budget_failures: self.budget_failures + later.budget_failures,
            budget_successes: self.budget_successes + later.budget_successes,
        }
    }
}

/// Tools one script call pushes: one round trip for many, yet a script short
/// enough that Redis answers its other clients meanwhile.
const PUSH_BATCH: usize = 256;

/// Tools one exchange pushes at most; the rest wait for the next. A flood of tool
/// names (an id in each) must not hold the exchange past its timeout, nor starve
/// the pull that brings the fleet's opens.
const PUSH_PER_EXCHANGE: usize = 16 * PUSH_BATCH;

/// Pushes the changes of a batch of tools and answers Redis's time and each tool's
/// budget. KEYS: the open set, then one hash per tool. ARGV: the policy (7 values),
/// then 8 per tool. What it reads is checked: a key of another type, or a value that
/// is not a finite number, is what something else wrote (another program on the
/// prefix, an older sidecar, an operator), and is replaced, never trusted: one bad
/// key must not stop the fleet's exchange nor fence a tool off for years.
const PUSH: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function num(v, default)
  local n = tonumber(v)
  if n == nil or n ~= n or n == math.huge or n == -math.huge then return default end
  return n
end
local function own(key, kind)
  local found = redis.call('TYPE', key)['ok']
  if found ~= kind and found ~= 'none' then redis.call('DEL', key) end
end
local open_set = KEYS[1]
own(open_set, 'zset')
local threshold, base, max_open = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local max_tokens, ratio, ttl, longest = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local set_ttl = ttl
local tokens_out = {}
for i = 2, #KEYS do
  local key, a = KEYS[i], 7 + (i - 2) * 8
  local tool = ARGV[a + 1]
  local failures, trailing = tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
  local had_success, local_open, closed = ARGV[a + 4] == '1', tonumber(ARGV[a + 5]), ARGV[a + 6] == '1'
  own(key, 'hash')
  local f = redis.call('HMGET', key, 'open_until', 'opens', 'consec', 'tokens')
  local until_ms = math.min(num(f[1], 0), now + longest)
  local opens = math.max(num(f[2], 0), 0)
  local consec = math.max(num(f[3], 0), 0)
  local tokens = num(f[4], max_tokens)
  local open = until_ms > now
  if closed and not open then
    opens = 0
    redis.call('ZREM', open_set, tool)
  end
  -- Failures while the fleet holds the tool open count for nothing, as a local breaker's do.
  if had_success then consec = trailing elseif not open then consec = consec + failures end
  if local_open > 0 then
    -- A sidecar opening a tool the fleet already holds open is the same open, not another.
    if not open then opens = opens + 1 end
    until_ms = math.max(until_ms, now + math.min(local_open, longest))
    consec = 0
  elseif not open and consec >= threshold then
    local period = math.min(max_open, base * math.pow(2, math.min(opens, 20)))
    opens = opens + 1
    until_ms = now + math.floor(period)
    consec = 0
  end
  if until_ms > now then redis.call('ZADD', open_set, until_ms, tool) end
  tokens = tokens - tonumber(ARGV[a + 7]) + tonumber(ARGV[a + 8]) * ratio
  if tokens < 0 then tokens = 0 end
  if tokens > max_tokens then tokens = max_tokens end
  redis.call('HSET', key, 'open_until', until_ms, 'opens', opens, 'consec', consec, 'tokens', tostring(tokens))
  -- Kept at least as long as its open period, however long that is.
  local key_ttl = math.max(ttl, until_ms - now + ttl)
  redis.call('PEXPIRE', key, key_ttl)
  set_ttl = math.max(set_ttl, key_ttl)
  tokens_out[#tokens_out + 1] = tostring(tokens)
end
-- The open set outlives its longest open (only ever lengthened here; a set without one gets one).
if redis.call('PTTL', open_set) < set_ttl then redis.call('PEXPIRE', open_set, set_ttl) end
return {now, tokens_out}
"#;

/// Answers Redis's time and every tool open anywhere, with its open-until. ARGV[1]:
/// the longest open period; a later open-until (or a key of another type) is not a
/// sidecar's writing, and is dropped.
const PULL: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local found = redis.call('TYPE', KEYS[1])['ok']
if found ~= 'zset' then
  if found ~= 'none' then redis.call('DEL', KEYS[1]) end
  return {now, {}}
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '(' .. string.format('%d', now + tonumber(ARGV[1])), '+inf')
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
    #[error("state.redis_url does not parse: {0}")]
    Url(String),
    /// `state.redis_password_env` names a variable that is not set.
    #[error("state.redis_password_env: the variable {0} is not set (or not UTF-8)")]
    Password(String),
}

impl SharedError {
    /// True when the connection itself failed, so the rest of the exchange would too.
    fn is_connection(&self) -> bool {
        match self {
            SharedError::Redis(e) => e.is_io_error() || e.is_connection_dropped() || e.is_timeout(),
            SharedError::Timeout(_) => true,
            SharedError::Url(_) | SharedError::Password(_) => false,
        }
    }
}

/// What `state.redis_url` says: checked when the config loads, so that `check-config`
/// refuses a URL the sidecar could not use.
pub fn connection_info(config: &StateConfig) -> Result<redis::ConnectionInfo, SharedError> {
    use redis::IntoConnectionInfo;
    // The error is redacted: redis may quote the URL, password and all.
    config
        .redis_url
        .as_str()
        .into_connection_info()
        .map_err(|e| SharedError::Url(crate::redact::redact(&e.to_string()).into_owned()))
}

/// The Redis client settings, with the password from the environment if so configured
/// (a variable that is not set is an error, checked before the sidecar serves).
pub fn client(config: &StateConfig) -> Result<redis::Client, SharedError> {
    let mut info = connection_info(config)?;
    if !config.redis_password_env.is_empty() {
        let password = std::env::var(&config.redis_password_env)
            .map_err(|_| SharedError::Password(config.redis_password_env.clone()))?;
        info.redis.password = Some(password);
    }
    if config.redis_url.starts_with("rediss://") {
        // rustls needs a process-wide crypto provider; a second install is harmless.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
    redis::Client::open(info).map_err(SharedError::from)
}

/// Clean exchanges in a row after which a backend that failed is said to be back:
/// an exchange with nothing to push can succeed while pushes still fail (Redis out
/// of memory), and a log line each way every few hundred milliseconds says nothing.
const BACK_AFTER: u32 = 10;

/// Runs the exchange through `client` (see [`client`]) until the task is dropped.
pub async fn run(engine: Arc<Engine>, config: StateConfig, client: redis::Client) {
    let shown = crate::redact::redact(&config.redis_url).into_owned();
    engine.metrics().backend_started();
    let push = redis::Script::new(PUSH);
    let pull = redis::Script::new(PULL);
    let timeout = Duration::from_millis(config.timeout_ms);
    let mut tick = tokio::time::interval(Duration::from_millis(config.sync_interval_ms));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut connection: Option<redis::aio::ConnectionManager> = None;
    let mut backoff_ms = 100u64;
    let mut next_attempt = tokio::time::Instant::now();
    // Clean exchanges in a row; the backend is up once there are BACK_AFTER.
    let mut clean = BACK_AFTER;
    loop {
        tick.tick().await;
        if connection.is_none() {
            if tokio::time::Instant::now() < next_attempt {
                engine.take_shared_pending();
                continue;
            }
            // One attempt, whose error is said: the manager's own retries outlast `timeout`, so
            // a refused connection or a wrong password read as a timeout. This loop backs off.
            let once =
                redis::aio::ConnectionManagerConfig::new().set_number_of_retries(0).set_connection_timeout(timeout);
            match tokio::time::timeout(timeout, redis::aio::ConnectionManager::new_with_config(client.clone(), once))
                .await
            {
                Ok(Ok(c)) => {
                    tracing::debug!(redis = %shown, "shared state connected");
                    connection = Some(c);
                    backoff_ms = 100;
                }
                failed => {
                    let err = match failed {
                        Ok(Err(e)) => SharedError::from(e),
                        _ => SharedError::Timeout(config.timeout_ms),
                    };
                    failing(&engine, &shown, &err, &mut clean, "shared state unreachable; deciding locally");
                    engine.take_shared_pending();
                    next_attempt = tokio::time::Instant::now() + Duration::from_millis(backoff_ms);
                    backoff_ms = (backoff_ms * 2).min(5000);
                    continue;
                }
            }
        }
        let con = connection.as_mut().expect("connected above");
        let pending = engine.take_shared_pending();
        match exchange(con, &push, &pull, &config, &engine, pending).await {
            Ok(()) => {
                clean = clean.saturating_add(1);
                if clean == BACK_AFTER {
                    tracing::info!(redis = %shown, "shared state back");
                }
                if clean >= BACK_AFTER {
                    engine.metrics().backend_up(true);
                }
            }
            Err(err) => {
                failing(&engine, &shown, &err, &mut clean, "shared state exchange failed; deciding locally");
                // The manager reconnects by itself after an I/O error; after a timeout start afresh,
                // after a pause (as for a failed connect), so that a slow Redis is not hammered.
                if matches!(err, SharedError::Timeout(_)) {
                    connection = None;
                    next_attempt = tokio::time::Instant::now() + Duration::from_millis(backoff_ms);
                    backoff_ms = (backoff_ms * 2).min(5000);
                }
            }
        }
    }
}

/// Counts a failure; warns when the backend was up until now.
fn failing(engine: &Engine, shown: &str, err: &SharedError, clean: &mut u32, message: &str) {
    engine.metrics().backend_error();
    engine.metrics().backend_up(false);
    if *clean >= BACK_AFTER {
        tracing::warn!(redis = %shown, error = %err, "{message}");
    }
    *clean = 0;
}

/// `call`'s answer, or a timeout after `timeout_ms`.
async fn within<T>(
    timeout_ms: u64,
    call: impl std::future::Future<Output = redis::RedisResult<T>>,
) -> Result<T, SharedError> {
    match tokio::time::timeout(Duration::from_millis(timeout_ms), call).await {
        Ok(answer) => Ok(answer?),
        Err(_) => Err(SharedError::Timeout(timeout_ms)),
    }
}

/// One exchange: push the tools' changes (at most `PUSH_PER_EXCHANGE`, the rest put
/// back for the next), then pull the tools open anywhere. Each call to Redis has its own
/// `timeout_ms`; the pull runs even when a push failed, unless the connection is gone.
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
    let mut pending: Vec<(String, ToolDelta)> = pending.into_iter().collect();
    if pending.len() > PUSH_PER_EXCHANGE {
        engine.restore_shared_pending(pending.split_off(PUSH_PER_EXCHANGE));
    }
    let mut failed = None;
    for batch in pending.chunks(PUSH_BATCH) {
        let mut call = push.prepare_invoke();
        call.key(&open_set);
        call.arg(breaker.consecutive_failures)
            .arg(breaker.open_base_ms)
            .arg(breaker.open_max_ms)
            .arg(budget.max_tokens)
            .arg(budget.token_ratio)
            .arg(ttl_ms)
            .arg(LONGEST_OPEN_MS);
        for (tool, d) in batch {
            call.key(format!("{}tool:{tool}", config.key_prefix));
            call.arg(tool)
                .arg(d.failures)
                .arg(d.trailing_failures)
                .arg(u8::from(d.had_success))
                .arg(d.opened_ms)
                .arg(u8::from(d.closed))
                .arg(d.budget_failures)
                .arg(d.budget_successes);
        }
        let answered: Result<(i64, Vec<String>), SharedError> = within(config.timeout_ms, call.invoke_async(con)).await;
        match answered {
            Ok((_, tokens)) if policy.retry_budget.is_some() => {
                for ((tool, _), tokens) in batch.iter().zip(tokens) {
                    // A budget is a finite count of tokens; anything else was not a sidecar's writing.
                    if let Some(tokens) = tokens.parse::<f64>().ok().filter(|t| t.is_finite()) {
                        engine.set_budget_tokens(tool, tokens);
                    }
                }
            }
            Ok(_) => {}
            Err(e) if e.is_connection() => return Err(e),
            // Redis refused this batch (out of memory, say): the next may pass, and the pull still runs.
            Err(e) => failed = Some(e),
        }
    }
    let (redis_now, open): (i64, Vec<(String, f64)>) =
        within(config.timeout_ms, pull.key(&open_set).arg(LONGEST_OPEN_MS).invoke_async(con)).await?;
    for (tool, until) in open {
        // Held to the longest open period, whatever the score: another program may have written it.
        let remaining = (until - redis_now as f64).min(LONGEST_OPEN_MS as f64);
        if remaining >= 1.0 && crate::engine::check_id("tool", &tool).is_ok() {
            engine.open_tool_for(&tool, remaining as u64);
        }
    }
    failed.map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn noted(outcomes: &[Health]) -> ToolDelta {
        let pending = Pending::default();
        for &health in outcomes {
            pending.note("t", health, matches!(health, Health::Failure { .. }), None, false);
        }
        pending.take().remove("t").unwrap_or_default()
    }

    const FAIL: Health = Health::Failure { provider_delay_ms: None };

    #[test]
    fn changes_put_back_come_before_those_noted_since() {
        let runs: [&[Health]; 4] = [&[FAIL, FAIL], &[Health::Success, FAIL], &[FAIL, Health::Success], &[]];
        for earlier in runs {
            for later in runs {
                let pending = Pending::default();
                pending.restore([("t".to_string(), noted(earlier))]);
                for &health in later {
                    pending.note("t", health, matches!(health, Health::Failure { .. }), None, false);
                }
                let both: Vec<Health> = earlier.iter().chain(later).copied().collect();
                let merged = pending.take().remove("t").unwrap_or_default();
                assert_eq!(merged, noted(&both), "{earlier:?} then {later:?}");
            }
        }
        // Opens and closes carry over too.
        let pending = Pending::default();
        pending.note("t", FAIL, false, Some(5000), false);
        let taken = pending.take();
        pending.note("t", Health::Success, false, Some(1000), true);
        pending.restore(taken);
        let merged = pending.take().remove("t").expect("restored");
        assert_eq!((merged.opened_ms, merged.closed, merged.failures), (5000, true, 1));
    }
}
