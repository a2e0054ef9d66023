//! The engine: takes an outcome, classifies it, updates its session, asks the
//! breakers, plans the retry and writes the snippet. Synchronous and free of
//! gRPC types; the server and `rebound replay` both drive it.

use crate::backoff::{provider_delay, ProviderDelay};
use crate::breaker::{self, Counters, SessionLimits};
use crate::clock::Clock;
use crate::compact::{self, ErrorView};
use crate::fingerprint::fingerprint;
use crate::metrics::Metrics;
use crate::model::{
    Action, BreakerState, BreakerStatus, Category, Classification, ErrorRecord, EscalationReport, Outcome, Reason,
    RetryPlan, SessionState, SessionSummary, Verdict,
};
use crate::policy::Policy;
use crate::rng::Rng;
use crate::session::{Eviction, HistoryEntry, Session, SessionStore};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::{Arc, RwLock};

/// The longest id (session, call, tool) accepted, in bytes.
pub const MAX_ID_BYTES: usize = 256;
/// The most tools a session may declare.
pub const MAX_TOOLS: usize = 1000;
/// The most labels a session may carry.
pub const MAX_LABELS: usize = 64;

/// Bad input, named by field and value.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum EngineError {
    /// A field's value is not acceptable.
    #[error("`{field}` = {value}: {problem}")]
    InvalidArgument {
        /// The field.
        field: String,
        /// The value as shown (strings quoted, cut when long).
        value: String,
        /// What is wrong.
        problem: String,
    },
}

fn invalid(field: impl Into<String>, value: impl std::fmt::Display, problem: impl Into<String>) -> EngineError {
    EngineError::InvalidArgument {
        field: field.into(),
        value: compact::cut(&value.to_string(), 80),
        problem: problem.into(),
    }
}

/// A StartSession request.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StartSession {
    /// The session id.
    pub session_id: String,
    /// Step limit; `None` for the configured default.
    pub step_limit: Option<u32>,
    /// Cost limit; `None` for the configured default.
    pub cost_limit: Option<f64>,
    /// Error limit; `None` for the configured default.
    pub error_limit: Option<u32>,
    /// The agent's tools.
    pub tools: Vec<String>,
    /// Policy profile name.
    pub profile: String,
    /// Labels.
    pub labels: BTreeMap<String, String>,
}

/// The session as StartSession left it.
#[derive(Clone, Debug, PartialEq)]
pub struct SessionInfo {
    /// True when this call created it.
    pub created: bool,
    /// Limits in force.
    pub limits: SessionLimits,
}

/// The answer to Admit.
#[derive(Clone, Debug, PartialEq)]
pub struct Admission {
    /// May the call go ahead.
    pub allowed: bool,
    /// Why not.
    pub reason: Option<Reason>,
    /// When to come back (0: allowed, or never).
    pub retry_after_ms: u64,
    /// The tool's breaker.
    pub tool_state: BreakerState,
    /// The session's state.
    pub session_state: SessionState,
    /// A sentence for logs and humans.
    pub message: String,
}

/// The Context answer.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ContextText {
    /// The text.
    pub text: String,
    /// Blocks shown.
    pub errors_shown: u32,
    /// Older unresolved errors only counted.
    pub errors_hidden: u32,
}

/// What the engine worked out about a failure before touching its session.
struct Judged {
    classification: Classification,
    fingerprint: u64,
    message: String,
    provider: Option<ProviderDelay>,
}

/// Settings of the engine fixed at start (not reloaded).
#[derive(Clone, Debug)]
pub struct EngineSettings {
    /// Session capacity.
    pub capacity: usize,
    /// Lock shards.
    pub shards: usize,
    /// Idle expiry.
    pub idle_expiry_ms: u64,
    /// Verdicts remembered per session for repeated call_ids.
    pub idempotency_window: usize,
    /// Errors remembered per session.
    pub history: usize,
    /// Jitter seed.
    pub seed: u64,
}

impl EngineSettings {
    /// From the config's `[sessions]` and a seed.
    pub fn from_config(sessions: &crate::config::SessionsConfig, seed: u64) -> Self {
        EngineSettings {
            capacity: sessions.capacity,
            shards: sessions.shards,
            idle_expiry_ms: sessions.idle_expiry_ms,
            idempotency_window: sessions.idempotency_window,
            history: sessions.history,
            seed,
        }
    }
}

/// The decision engine with its sessions.
#[derive(Debug)]
pub struct Engine {
    policy: RwLock<Arc<Policy>>,
    sessions: SessionStore,
    clock: Arc<dyn Clock>,
    metrics: Arc<Metrics>,
    settings: EngineSettings,
}

impl Engine {
    /// An engine with a policy, settings, a clock and metric handles.
    pub fn new(policy: Policy, settings: EngineSettings, clock: Arc<dyn Clock>, metrics: Arc<Metrics>) -> Self {
        Engine {
            policy: RwLock::new(Arc::new(policy)),
            sessions: SessionStore::new(settings.capacity, settings.shards, settings.idle_expiry_ms),
            clock,
            metrics,
            settings,
        }
    }

    /// The policy in force.
    pub fn policy(&self) -> Arc<Policy> {
        self.policy.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Replaces the policy (config reload); sessions keep their counters.
    pub fn set_policy(&self, policy: Policy) {
        *self.policy.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(policy);
    }

    /// The metric handles.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// Sessions held.
    pub fn session_count(&self) -> usize {
        self.sessions.len()
    }

    fn new_session(&self, policy: &Policy, id: &str, now: u64) -> Session {
        Session::new(now, SessionLimits::from_policy(&policy.limits), Rng::for_session(self.settings.seed, id))
    }

    fn count_evictions(&self, evictions: &[Eviction]) {
        for e in evictions {
            self.metrics.evicted(*e, 1);
        }
        if !evictions.is_empty() {
            self.metrics.sessions_active(self.sessions.len());
        }
    }

    /// Declares a session (idempotent: a second call updates limits and tools).
    pub fn start_session(&self, req: &StartSession) -> Result<SessionInfo, EngineError> {
        check_id("session_id", &req.session_id)?;
        if req.tools.len() > MAX_TOOLS {
            return Err(invalid("tools", format!("{} tools", req.tools.len()), format!("at most {MAX_TOOLS}")));
        }
        for (i, tool) in req.tools.iter().enumerate() {
            check_id(&format!("tools[{i}]"), tool)?;
        }
        if let Some(cost) = req.cost_limit {
            if !cost.is_finite() || cost < 0.0 {
                return Err(invalid("cost_limit", cost, "must be a positive number"));
            }
        }
        if !req.profile.is_empty() {
            return Err(invalid("profile", format!("{:?}", req.profile), "no such profile: the config defines none"));
        }
        if req.labels.len() > MAX_LABELS {
            return Err(invalid("labels", format!("{} labels", req.labels.len()), format!("at most {MAX_LABELS}")));
        }
        for (k, v) in &req.labels {
            check_id("labels key", k)?;
            if v.len() > 1024 {
                return Err(invalid(format!("labels[{k}]"), format!("{v:?}"), "at most 1024 bytes"));
            }
        }
        let policy = self.policy();
        let now = self.clock.now_ms();
        let defaults = SessionLimits::from_policy(&policy.limits);
        let limits = SessionLimits {
            step_limit: req.step_limit.filter(|n| *n > 0).or(defaults.step_limit),
            cost_limit: req.cost_limit.filter(|c| *c > 0.0).or(defaults.cost_limit),
            error_limit: req.error_limit.filter(|n| *n > 0).unwrap_or(defaults.error_limit),
        };
        let (_, created, evictions) = self.sessions.with_session(
            &req.session_id,
            now,
            || self.new_session(&policy, &req.session_id, now),
            |s| {
                s.limits = limits;
                s.tools = req.tools.clone();
                s.labels = req.labels.clone();
                s.profile = req.profile.clone();
            },
        );
        self.count_evictions(&evictions);
        if created {
            self.metrics.sessions_active(self.sessions.len());
        }
        Ok(SessionInfo { created, limits })
    }

    /// One outcome in, one verdict out.
    pub fn report(&self, outcome: &Outcome) -> Result<Verdict, EngineError> {
        validate_outcome(outcome)?;
        let policy = self.policy();
        let now = self.clock.now_ms();
        // Classify before taking the session's lock: it is the costly part and needs no state.
        let judged = (!outcome.ok).then(|| Judged {
            classification: policy.classifier.classify(outcome),
            fingerprint: fingerprint(if outcome.message.is_empty() { &outcome.detail } else { &outcome.message }),
            message: compact::clean_message(
                &compact::headline(&outcome.message, &outcome.exception_type, &outcome.detail),
                policy.snippet.message_chars,
            ),
            provider: provider_delay(&outcome.headers, self.clock.wall_ms()),
        });
        let window = self.settings.idempotency_window;
        let history = self.settings.history;
        let ((verdict, fresh), created, evictions) = self.sessions.with_session(
            &outcome.session_id,
            now,
            || self.new_session(&policy, &outcome.session_id, now),
            |s| {
                if let Some(earlier) = s.recall(&outcome.call_id) {
                    let mut again = earlier.clone();
                    again.replayed = true;
                    return (again, false);
                }
                let verdict = decide(s, outcome, judged, &policy, now, history);
                s.remember(&verdict, window);
                (verdict, true)
            },
        );
        self.count_evictions(&evictions);
        if created {
            self.metrics.sessions_active(self.sessions.len());
        }
        if fresh {
            self.record(&verdict);
        }
        Ok(verdict)
    }

    fn record(&self, v: &Verdict) {
        let m = &self.metrics;
        m.outcome(&v.tool, v.classification.as_ref().map(|c| c.category), v.action);
        if let Some(retry) = &v.retry {
            m.retry_delay(retry.delay_ms);
        }
        if v.action == Action::Escalate {
            m.escalation(v.breaker.reason.unwrap_or(Reason::CategoryPolicy));
        }
        if !v.snippet.is_empty() {
            m.snippet(v.snippet.len());
        }
    }

    /// May `tool` be called now in `session_id`?
    pub fn admit(&self, session_id: &str, tool: &str) -> Result<Admission, EngineError> {
        check_id("session_id", session_id)?;
        check_id("tool", tool)?;
        let now = self.clock.now_ms();
        let allowed = Admission {
            allowed: true,
            reason: None,
            retry_after_ms: 0,
            tool_state: BreakerState::Closed,
            session_state: SessionState::Active,
            message: "allowed".into(),
        };
        let answer = self.sessions.with_existing(session_id, now, |s| {
            let state = s.state;
            let deny = |reason: Reason, message: String| Admission {
                allowed: false,
                reason: Some(reason),
                retry_after_ms: 0,
                tool_state: BreakerState::Closed,
                session_state: state,
                message,
            };
            if state == SessionState::Stopped {
                return deny(Reason::SessionStopped, "the session was aborted; start a new one".into());
            }
            let counters = Counters { steps: s.steps, cost: s.cost, ..Default::default() };
            match breaker::limit_reached(&counters, &s.limits) {
                Some(Reason::StepLimit) => deny(Reason::StepLimit, format!("the step limit of {} is reached", s.steps)),
                Some(reason) => deny(reason, format!("the cost limit is reached ({:.4} spent)", s.cost)),
                None => Admission { session_state: state, ..allowed.clone() },
            }
        });
        Ok(answer.unwrap_or(allowed))
    }

    /// The compacted error context for the session's next LLM turn.
    pub fn context(&self, session_id: &str) -> Result<ContextText, EngineError> {
        check_id("session_id", session_id)?;
        let policy = self.policy();
        let now = self.clock.now_ms();
        let text = self.sessions.with_existing(session_id, now, |s| {
            let views: Vec<ErrorView<'_>> = s
                .history
                .iter()
                .filter(|e| !e.resolved)
                .map(|e| ErrorView {
                    tool: &e.tool,
                    category: e.category,
                    message: &e.message,
                    suggestion: &e.suggestion,
                    count: e.count,
                })
                .collect();
            let (text, shown, hidden) = compact::context_text(&views, s.dropped_unresolved, &policy.snippet);
            ContextText { text, errors_shown: shown, errors_hidden: hidden }
        });
        Ok(text.unwrap_or_default())
    }

    /// Ends a session and returns its summary (`None` when there was none).
    pub fn end_session(&self, session_id: &str) -> Result<Option<SessionSummary>, EngineError> {
        check_id("session_id", session_id)?;
        let now = self.clock.now_ms();
        let removed = self.sessions.remove(session_id);
        if removed.is_some() {
            self.metrics.sessions_active(self.sessions.len());
        }
        Ok(removed.map(|s| s.summary(now)))
    }

    /// Drops idle sessions; returns how many.
    pub fn expire_idle(&self) -> usize {
        let n = self.sessions.expire_idle(self.clock.now_ms());
        if n > 0 {
            self.metrics.evicted(Eviction::Idle, n as u64);
            self.metrics.sessions_active(self.sessions.len());
        }
        n
    }
}

fn check_id(field: &str, value: &str) -> Result<(), EngineError> {
    if value.trim().is_empty() {
        return Err(invalid(field, format!("{value:?}"), "must not be empty"));
    }
    if value.len() > MAX_ID_BYTES {
        return Err(invalid(field, format!("{value:?}"), format!("at most {MAX_ID_BYTES} bytes")));
    }
    if value.chars().any(char::is_control) {
        return Err(invalid(field, format!("{value:?}"), "must not contain control characters"));
    }
    Ok(())
}

fn validate_outcome(o: &Outcome) -> Result<(), EngineError> {
    check_id("session_id", &o.session_id)?;
    check_id("tool", &o.tool)?;
    if o.call_id.len() > MAX_ID_BYTES {
        return Err(invalid("call_id", format!("{:?}", o.call_id), format!("at most {MAX_ID_BYTES} bytes")));
    }
    if !o.cost.is_finite() || o.cost < 0.0 {
        return Err(invalid("cost", o.cost, "must be zero or a positive number"));
    }
    if let Some(code) = o.grpc_code {
        if !(0..=16).contains(&code) {
            return Err(invalid("grpc_code", code, "a gRPC status code is 0 to 16"));
        }
    }
    if let Some(status) = o.http_status {
        if !(100..=599).contains(&status) {
            return Err(invalid("http_status", status, "an HTTP status is 100 to 599 (0 for none)"));
        }
    }
    Ok(())
}

/// The tools nearest to `wanted` by edit distance, nearest first.
pub fn nearest_tools<'a>(wanted: &str, tools: &'a [String]) -> Vec<&'a str> {
    let wanted = wanted.to_lowercase();
    let mut scored: Vec<(usize, &str)> =
        tools.iter().map(|t| (edit_distance(&wanted, &t.to_lowercase()), t.as_str())).collect();
    scored.sort();
    scored.into_iter().map(|(_, t)| t).collect()
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

/// The suggestion for an unknown tool: the session's tools, nearest first.
fn unknown_tool_suggestion(wanted: &str, tools: &[String], fallback: &str) -> String {
    if tools.is_empty() {
        return fallback.to_string();
    }
    let nearest = nearest_tools(wanted, tools);
    let listed: Vec<String> = nearest.iter().take(20).map(|t| format!("`{t}`")).collect();
    let more = nearest.len().saturating_sub(20);
    let mut text = format!("Did you mean `{}`? Use one of the available tools: {}", nearest[0], listed.join(", "));
    if more > 0 {
        let _ = write!(text, " and {more} more");
    }
    text.push('.');
    text
}

/// Updates the session for one outcome and builds the verdict.
fn decide(s: &mut Session, o: &Outcome, judged: Option<Judged>, policy: &Policy, now: u64, history: usize) -> Verdict {
    let mut verdict = Verdict {
        call_id: o.call_id.clone(),
        session_id: o.session_id.clone(),
        tool: o.tool.clone(),
        action: Action::Continue,
        classification: None,
        retry: None,
        snippet: String::new(),
        breaker: BreakerStatus {
            tool_state: BreakerState::Closed,
            session_state: s.state,
            reason: None,
            consecutive_failures: 0,
            session_errors: s.errors,
            identical_errors: s.identical,
            steps: s.steps,
            cost: s.cost,
        },
        escalation: None,
        enforced: true,
        shadow_action: None,
        replayed: false,
    };
    if s.state == SessionState::Stopped {
        verdict.action = Action::Abort;
        verdict.breaker.reason = Some(Reason::SessionStopped);
        verdict.classification = judged.map(|j| j.classification);
        verdict.snippet = "<error>\nThe session was stopped earlier; end the run.\n</error>".into();
        return verdict;
    }
    s.steps += 1;
    s.cost += o.cost;
    let Some(j) = judged else {
        let t = s.tool_mut(&o.tool);
        t.consecutive_failures = 0;
        t.retries = 0;
        t.last_delay_ms = 0;
        s.resolve(&o.tool);
        if s.last_error.as_ref().is_some_and(|(tool, _)| *tool == o.tool) {
            s.last_error = None;
            s.identical = 0;
        }
        let counters = Counters { steps: s.steps, cost: s.cost, ..Default::default() };
        if let Some(reason) = breaker::limit_reached(&counters, &s.limits) {
            s.state = SessionState::Stopped;
            verdict.action = Action::Abort;
            verdict.breaker.reason = Some(reason);
        }
        fill_counters(&mut verdict.breaker, s, 0);
        return verdict;
    };

    let category = j.classification.category;
    s.errors += 1;
    *s.errors_by_category.entry(category).or_default() += 1;
    let same_as_last = s.last_error.as_ref().is_some_and(|(tool, fp)| *tool == o.tool && *fp == j.fingerprint);
    if same_as_last {
        s.identical += 1;
    } else {
        s.last_error = Some((o.tool.clone(), j.fingerprint));
        s.identical = 1;
    }
    let consecutive = {
        let t = s.tool_mut(&o.tool);
        t.consecutive_failures += 1;
        t.consecutive_failures
    };
    let counters = Counters {
        steps: s.steps,
        cost: s.cost,
        session_errors: s.errors,
        consecutive_failures: consecutive,
        identical_errors: s.identical,
    };
    let cat = policy.category(category);
    let rule_action = j.classification.action;
    let retryable = j.classification.retryable || rule_action == Some(Action::Retry);
    let fallback = match rule_action {
        Some(a) if !matches!(a, Action::Retry | Action::Continue) => a,
        _ => cat.action,
    };
    let (action, reason) = if let Some((action, reason)) = breaker::on_failure(&counters, &s.limits, &policy.limits) {
        (action, Some(reason))
    } else if retryable {
        plan_retry(s, o, &j, cat, fallback, policy, &mut verdict)
    } else {
        (fallback, matches!(fallback, Action::Escalate | Action::Abort).then_some(Reason::CategoryPolicy))
    };
    verdict.action = action;
    verdict.breaker.reason = reason;
    match action {
        Action::Abort => s.state = SessionState::Stopped,
        Action::Escalate => {
            s.state = SessionState::Escalated;
            s.escalations += 1;
        }
        _ => {}
    }
    let suggestion: Arc<str> = if category == Category::UnknownTool {
        Arc::from(unknown_tool_suggestion(&o.tool, &s.tools, &j.classification.suggestion))
    } else {
        Arc::from(j.classification.suggestion.as_str())
    };
    s.push_error(
        HistoryEntry {
            tool: o.tool.clone(),
            category,
            message: j.message.clone(),
            suggestion: suggestion.clone(),
            fingerprint: j.fingerprint,
            count: 1,
            at_ms: now.saturating_sub(s.created_ms),
            action,
            resolved: false,
        },
        history,
    );
    verdict.snippet = compact::error_block(&ErrorView {
        tool: &o.tool,
        category,
        message: &j.message,
        suggestion: &suggestion,
        count: 1,
    });
    fill_counters(&mut verdict.breaker, s, consecutive);
    if action == Action::Escalate {
        verdict.escalation = Some(escalation_report(s, o, reason.unwrap_or(Reason::CategoryPolicy), category, now));
    }
    verdict.classification = Some(Classification { suggestion: suggestion.to_string(), ..j.classification });
    verdict
}

/// Retry if the category's retries and the provider allow it; else the fallback action.
fn plan_retry(
    s: &mut Session,
    o: &Outcome,
    j: &Judged,
    cat: &crate::policy::CategoryPolicy,
    fallback: Action,
    policy: &Policy,
    verdict: &mut Verdict,
) -> (Action, Option<Reason>) {
    let max = cat.backoff.max_retries();
    let (done, previous) = {
        let t = s.tool_mut(&o.tool);
        (if o.attempt > 0 { o.attempt - 1 } else { t.retries }, t.last_delay_ms)
    };
    if done >= max {
        return (fallback, Some(Reason::RetriesExhausted));
    }
    let (delay, provider) = match j.provider {
        Some(ProviderDelay::DoNotRetry) => return (fallback, Some(Reason::ServerPushback)),
        Some(ProviderDelay::After(ms)) if ms > policy.max_provider_delay_ms => {
            return (fallback, Some(Reason::DelayTooLong));
        }
        Some(ProviderDelay::After(ms)) => (cat.backoff.spread_provider_delay(ms, &mut s.rng), true),
        None => (cat.backoff.delay_ms(done, previous, &mut s.rng), false),
    };
    let t = s.tool_mut(&o.tool);
    t.retries = done + 1;
    t.last_delay_ms = delay;
    s.retries += 1;
    verdict.retry =
        Some(RetryPlan { delay_ms: delay, attempt: done + 1, attempts_left: max - done - 1, provider_delay: provider });
    (Action::Retry, None)
}

fn fill_counters(b: &mut crate::model::BreakerStatus, s: &Session, consecutive: u32) {
    b.session_state = s.state;
    b.consecutive_failures = consecutive;
    b.session_errors = s.errors;
    b.identical_errors = s.identical;
    b.steps = s.steps;
    b.cost = s.cost;
}

/// The report a human reads when a session escalates.
fn escalation_report(s: &Session, o: &Outcome, reason: Reason, category: Category, now: u64) -> EscalationReport {
    let consecutive = s.tool_stats.iter().find(|t| t.tool == o.tool).map_or(0, |t| t.consecutive_failures);
    let tool = compact::cut(&o.tool, 100);
    let summary = match reason {
        Reason::ConsecutiveFailures => format!("{consecutive} consecutive failures of tool `{tool}` (last: {category})."),
        Reason::SessionErrors => format!("{} errors in this session (last: {category} from `{tool}`).", s.errors),
        _ => format!("A {category} error from tool `{tool}` needs a human."),
    };
    let history: Vec<ErrorRecord> = s
        .history
        .iter()
        .map(|e| ErrorRecord {
            tool: e.tool.clone(),
            category: e.category,
            message: e.message.clone(),
            count: e.count,
            at_ms: e.at_ms,
            action: e.action,
        })
        .collect();
    let errors_by_category: BTreeMap<String, u32> =
        s.errors_by_category.iter().map(|(c, n)| (c.as_str().to_string(), *n)).collect();
    let duration = now.saturating_sub(s.created_ms);
    let mut text = format!("Rebound escalation: {summary}\nErrors, oldest first:\n");
    for e in &history {
        let times = if e.count > 1 { format!(" (×{})", e.count) } else { String::new() };
        let _ = writeln!(text, "- {:.1}s [{}] {}: {}{} → {}", e.at_ms as f64 / 1000.0, e.category, e.tool, e.message, times, e.action);
    }
    let totals: Vec<String> = errors_by_category.iter().map(|(c, n)| format!("{c}={n}")).collect();
    let _ = write!(
        text,
        "Totals: {} calls, {} errors ({}), {} retries; session running {:.1}s.",
        s.steps,
        s.errors,
        totals.join(", "),
        s.retries,
        duration as f64 / 1000.0
    );
    EscalationReport { summary, history, errors_by_category, retries: s.retries, session_duration_ms: duration, text }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::model::{Headers, OutcomeKind};

    fn engine() -> (Engine, Arc<ManualClock>) {
        let clock = Arc::new(ManualClock::new(1_700_000_000_000));
        let settings = EngineSettings::from_config(&crate::config::SessionsConfig::default(), 42);
        (Engine::new(Policy::default(), settings, clock.clone(), Arc::new(Metrics::new(200))), clock)
    }

    fn fail(session: &str, tool: &str, message: &str) -> Outcome {
        Outcome { session_id: session.into(), tool: tool.into(), message: message.into(), ..Default::default() }
    }

    fn ok(session: &str, tool: &str) -> Outcome {
        Outcome { session_id: session.into(), tool: tool.into(), ok: true, ..Default::default() }
    }

    #[test]
    fn three_consecutive_failures_escalate_and_success_resets() {
        let (e, _) = engine();
        let timeout = |n: u32| Outcome { kind: Some(OutcomeKind::Timeout), ..fail("s", "search", &format!("timed out after {n}.1s")) };
        assert_eq!(e.report(&timeout(1)).unwrap().action, Action::Retry);
        assert_eq!(e.report(&timeout(2)).unwrap().action, Action::Retry);
        assert_eq!(e.report(&ok("s", "search")).unwrap().action, Action::Continue);
        assert_eq!(e.report(&timeout(3)).unwrap().action, Action::Retry, "success reset the count");
        assert_eq!(e.report(&timeout(4)).unwrap().action, Action::Retry);
        let v = e.report(&timeout(5)).unwrap();
        assert_eq!(v.action, Action::Escalate);
        assert_eq!(v.breaker.reason, Some(Reason::ConsecutiveFailures));
        let report = v.escalation.unwrap();
        assert!(report.summary.contains("3 consecutive failures of tool `search`"), "{}", report.summary);
        assert!(report.text.contains("[timeout] search"), "{}", report.text);
    }

    #[test]
    fn ten_errors_in_a_session_escalate() {
        let (e, _) = engine();
        for i in 0..9 {
            let v = e.report(&fail("s", &format!("tool{i}"), &format!("distinct failure {}", ["a", "b", "c", "d", "e", "f", "g", "h", "i"][i]))).unwrap();
            assert_ne!(v.action, Action::Escalate, "error {i}");
        }
        let v = e.report(&fail("s", "tool9", "the tenth")).unwrap();
        assert_eq!((v.action, v.breaker.reason), (Action::Escalate, Some(Reason::SessionErrors)));
    }

    #[test]
    fn five_identical_errors_abort_and_stop_the_session() {
        let mut policy = crate::config::Config::default();
        policy.breakers.tool_consecutive_failures = 100;
        let (e, clock) = engine();
        e.set_policy(Policy::from_config(&policy).unwrap());
        let mut last = None;
        for n in 0..5 {
            clock.advance(10);
            last = Some(e.report(&fail("s", "calc", &format!("invalid literal for int() with base 10: '{n}x'"))).unwrap());
        }
        let v = last.unwrap();
        assert_eq!((v.action, v.breaker.reason), (Action::Abort, Some(Reason::IdenticalErrors)));
        assert_eq!(v.breaker.session_state, SessionState::Stopped);
        assert_eq!(e.report(&ok("s", "calc")).unwrap().action, Action::Abort);
        let admit = e.admit("s", "calc").unwrap();
        assert!(!admit.allowed);
        assert_eq!(admit.reason, Some(Reason::SessionStopped));
    }

    #[test]
    fn retry_after_wins_and_repeated_call_ids_count_once() {
        let (e, _) = engine();
        let o = Outcome {
            call_id: "c1".into(),
            http_status: Some(429),
            headers: Headers::new([("Retry-After", "7")]),
            ..fail("s", "api", "Too Many Requests")
        };
        let v = e.report(&o).unwrap();
        assert_eq!(v.action, Action::Retry);
        let delay = v.retry.as_ref().unwrap().delay_ms;
        assert!((7000..=8400).contains(&delay), "{delay}");
        let again = e.report(&o).unwrap();
        assert!(again.replayed);
        assert_eq!(again.retry.unwrap().delay_ms, delay);
        assert_eq!(e.end_session("s").unwrap().unwrap().errors, 1);
    }

    #[test]
    fn retries_run_out_into_the_category_action() {
        let (e, _) = engine();
        let o = |attempt| Outcome { http_status: Some(500), attempt, ..fail("s", "api", "Internal Server Error") };
        assert_eq!(e.report(&o(1)).unwrap().action, Action::Retry);
        let v = e.report(&o(2)).unwrap();
        assert_eq!((v.action, v.breaker.reason), (Action::Recover, Some(Reason::RetriesExhausted)));
    }

    #[test]
    fn unknown_tool_lists_the_nearest_tools_first() {
        let (e, _) = engine();
        e.start_session(&StartSession {
            session_id: "s".into(),
            tools: vec!["fetch_url".into(), "search_web".into(), "calculator".into()],
            ..Default::default()
        })
        .unwrap();
        let v = e.report(&Outcome { kind: Some(OutcomeKind::UnknownTool), ..fail("s", "serch_web", "no such tool") }).unwrap();
        assert_eq!(v.action, Action::Reclassify);
        assert!(v.snippet.contains("Did you mean `search_web`?"), "{}", v.snippet);
    }

    #[test]
    fn context_hides_resolved_errors() {
        let (e, _) = engine();
        e.report(&fail("s", "a", "boom one")).unwrap();
        e.report(&fail("s", "b", "boom two")).unwrap();
        e.report(&ok("s", "a")).unwrap();
        let c = e.context("s").unwrap();
        assert_eq!(c.errors_shown, 1);
        assert!(c.text.contains("tool: b") && !c.text.contains("tool: a"), "{}", c.text);
        assert_eq!(e.context("nobody").unwrap(), ContextText::default());
    }

    #[test]
    fn step_limit_aborts_and_admit_refuses() {
        let (e, _) = engine();
        e.start_session(&StartSession { session_id: "s".into(), step_limit: Some(2), ..Default::default() }).unwrap();
        assert_eq!(e.report(&ok("s", "a")).unwrap().action, Action::Continue);
        assert!(e.admit("s", "a").unwrap().allowed);
        let v = e.report(&ok("s", "a")).unwrap();
        assert_eq!((v.action, v.breaker.reason), (Action::Abort, Some(Reason::StepLimit)));
        assert!(!e.admit("s", "a").unwrap().allowed);
    }

    #[test]
    fn bad_input_is_named() {
        let (e, _) = engine();
        let err = e.report(&fail("s", "", "x")).unwrap_err().to_string();
        assert!(err.contains("`tool`") && err.contains("must not be empty"), "{err}");
        let err = e.report(&Outcome { cost: f64::NAN, ..fail("s", "t", "x") }).unwrap_err().to_string();
        assert!(err.contains("`cost`"), "{err}");
        let err = e.start_session(&StartSession { session_id: "s".into(), profile: "gold".into(), ..Default::default() });
        assert!(err.unwrap_err().to_string().contains("`profile`"));
    }

    #[test]
    fn nearest_tools_by_edit_distance() {
        let tools = vec!["read_file".to_string(), "search_web".to_string(), "search_docs".to_string()];
        assert_eq!(nearest_tools("serch_web", &tools)[0], "search_web");
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }
}
