//! The engine: takes an outcome, classifies it, updates its session, asks the
//! breakers, plans the retry and writes the snippet. Synchronous and free of
//! gRPC types; the server and `rebound replay` both drive it.

use crate::analysis::Analyses;
use crate::backoff::{provider_delay, ProviderDelay};
use crate::breaker::{self, Counters, DeclaredLimits, Gate, Health, OpenNotes, SessionLimits, ToolBreakers, ToolView};
use crate::budget::RetryBudgets;
use crate::clock::Clock;
use crate::compact::{self, ErrorView};
use crate::fingerprint::fingerprint;
use crate::metrics::Metrics;
use crate::model::{Action, BreakerState, Category, Outcome, Reason, SessionState, SessionSummary, Verdict};
use crate::policy::Policy;
use crate::rng::Rng;
use crate::session::{Eviction, HistoryEntry, Removal, Session, SessionStore, Setup, ToolList};
use crate::verdict::{decide, recalled, Judged, ToolGate};
use arcstr::ArcStr;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, RwLock};

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
    /// The text's tokens, when a budget applied.
    pub tokens: u32,
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
    /// The most bytes the sessions may hold together.
    pub max_bytes: usize,
    /// Verdicts remembered per session for repeated call_ids.
    pub idempotency_window: usize,
    /// Errors remembered per session.
    pub history: usize,
    /// Jitter seed.
    pub seed: u64,
    /// Tools tracked by tool breakers and retry budgets.
    pub max_tools: usize,
    /// Whether tool breakers and budgets are shared with other sidecars.
    pub shared: bool,
}

impl EngineSettings {
    /// From the config's `[sessions]` and a seed.
    pub fn from_config(config: &crate::config::Config, seed: u64) -> Self {
        let sessions = &config.sessions;
        EngineSettings {
            max_tools: config.tool_breaker.max_tools,
            shared: config.state.backend == crate::config::Backend::Redis,
            capacity: sessions.capacity,
            shards: sessions.shards,
            idle_expiry_ms: sessions.idle_expiry_ms,
            max_bytes: usize::try_from(sessions.max_bytes).unwrap_or(usize::MAX),
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
    tools: ToolBreakers,
    /// What verdicts suggest while a tool's breaker is open.
    open_notes: OpenNotes,
    budgets: RetryBudgets,
    /// Changes waiting to be shared, when state is shared.
    shared: Option<crate::shared::Pending>,
    /// The tool lists declared lately, newest first, shared by the sessions that declare them.
    declared_tools: Mutex<Vec<Arc<ToolList>>>,
    /// The recent failures' analyses, for the failures that come again.
    analyses: Analyses,
}

/// How many recent tool lists StartSession shares. A fleet's agents declare the
/// same few lists, which copied into each of 100,000 sessions would cost 1.5 KB
/// a session for 40 tools.
const DECLARED_TOOL_LISTS: usize = 8;

impl Engine {
    /// An engine with a policy, settings, a clock and metric handles.
    pub fn new(policy: Policy, settings: EngineSettings, clock: Arc<dyn Clock>, metrics: Arc<Metrics>) -> Self {
        let sessions =
            SessionStore::new(settings.capacity, settings.shards, settings.idle_expiry_ms, settings.max_bytes);
        Engine {
            policy: RwLock::new(Arc::new(policy)),
            // The sessions keep the messages analysed: their shapes count into the store's bytes.
            analyses: Analyses::new(sessions.meter()),
            sessions,
            clock,
            metrics,
            tools: ToolBreakers::new(settings.max_tools),
            open_notes: OpenNotes::default(),
            budgets: RetryBudgets::new(settings.max_tools),
            shared: settings.shared.then(crate::shared::Pending::default),
            settings,
            declared_tools: Mutex::new(Vec::new()),
        }
    }

    /// `tools` as a list shared with the sessions that declared the same lately.
    fn shared_tools(&self, tools: &[String]) -> Arc<ToolList> {
        let mut recent = self.declared_tools.lock().unwrap_or_else(|p| p.into_inner());
        let list = match recent.iter().position(|list| ***list == *tools) {
            Some(i) => recent.remove(i),
            None => Arc::new(ToolList::new(tools, self.sessions.meter())),
        };
        recent.insert(0, list.clone());
        recent.truncate(DECLARED_TOOL_LISTS);
        list
    }

    /// The policy in force.
    pub fn policy(&self) -> Arc<Policy> {
        self.policy.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The policy a session is judged by: its profile's, when StartSession named one
    /// (and the config still defines it), else the file's. Looked up only when the
    /// config defines profiles.
    fn policy_for(&self, session_id: &str, now: u64) -> Arc<Policy> {
        let policy = self.policy();
        if policy.profiles.is_empty() {
            return policy;
        }
        let profile = self.sessions.with_existing(session_id, now, |s| s.setup.as_ref().map(|x| x.profile.clone()));
        match profile.flatten().and_then(|name| policy.profiles.get(&name).cloned()) {
            Some(profile) => profile,
            None => policy,
        }
    }

    /// Replaces the policy (config reload); sessions keep their counters.
    pub fn set_policy(&self, policy: Policy) {
        let breakers_off = policy.tool_breaker.is_none();
        *self.policy.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(policy);
        // After the swap: a transition recorded under the old policy before it is overwritten.
        if breakers_off {
            self.tools.clear();
            self.metrics.tool_breakers_off();
        }
    }

    /// The metric handles.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// Sessions held.
    pub fn session_count(&self) -> usize {
        self.sessions.len()
    }

    fn new_session(&self, id: &str, now: u64) -> Session {
        Session::new(now, Rng::for_session(self.settings.seed, id))
    }

    /// Sets the gauges of the sessions held and of their bytes.
    fn gauge_sessions(&self) {
        self.metrics.sessions(self.sessions.len(), self.sessions.bytes());
    }

    fn count_evictions(&self, evictions: &[Eviction]) {
        for e in evictions {
            self.metrics.evicted(*e, 1);
        }
        if !evictions.is_empty() {
            self.gauge_sessions();
        }
    }

    /// Compiles every lazily built pattern (classifier, redaction, fingerprint,
    /// traces) so the first real Report is as fast as the rest; touches no session.
    pub fn warm_up(&self) {
        let policy = self.policy();
        let sample = Outcome {
            session_id: "warm-up".into(),
            tool: "warm-up".into(),
            message: "HTTPSConnectionPool(host='api.example.com', port=443): Read timed out. (read timeout=30) sk-proj-warmupwarmupwarmupwarmup".into(),
            detail: "Traceback (most recent call last):\n  File \"/app/x.py\", line 1, in run\nValueError: warm up\n".into(),
            ..Default::default()
        };
        let _ = policy.classifier.classify(&sample);
        let _ = fingerprint(&sample.message);
        let _ = compact::digest(&sample.message, "", &sample.detail, &policy.snippet);
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
                return Err(invalid("cost_limit", cost, "must be 0 (the configured default) or a positive number"));
            }
        }
        let file = self.policy();
        let policy = match file.profiles.get(&req.profile) {
            _ if req.profile.is_empty() => file.clone(),
            Some(profile) => profile.clone(),
            None if file.profiles.is_empty() => {
                return Err(invalid(
                    "profile",
                    format!("{:?}", req.profile),
                    "no such profile: the config defines none",
                ));
            }
            None => {
                let known: Vec<&str> = file.profiles.keys().map(String::as_str).collect();
                let problem = format!("no such profile; the config defines {}", known.join(", "));
                return Err(invalid("profile", format!("{:?}", req.profile), &problem));
            }
        };
        if req.labels.len() > MAX_LABELS {
            return Err(invalid("labels", format!("{} labels", req.labels.len()), format!("at most {MAX_LABELS}")));
        }
        for (k, v) in &req.labels {
            check_id("labels key", k)?;
            if v.len() > 1024 {
                return Err(invalid(format!("labels[{k}]"), format!("{v:?}"), "at most 1024 bytes"));
            }
        }
        let now = self.clock.now_ms();
        // 0 asks for the default, as leaving it out does.
        let declared = DeclaredLimits {
            step_limit: req.step_limit.filter(|n| *n > 0),
            cost_limit: req.cost_limit.filter(|c| *c > 0.0),
            error_limit: req.error_limit.filter(|n| *n > 0),
        };
        let tools = self.shared_tools(&req.tools);
        let (_, created, evictions) = self.sessions.with_session(
            &req.session_id,
            now,
            || self.new_session(&req.session_id, now),
            |s| {
                s.setup = Some(Box::new(Setup::new(declared, tools, req.profile.clone(), req.labels.clone())));
            },
        );
        self.count_evictions(&evictions);
        if created {
            self.gauge_sessions();
        }
        Ok(SessionInfo { created, limits: declared.under(&policy.limits) })
    }

    /// One outcome in, one verdict out.
    pub fn report(&self, outcome: &Outcome) -> Result<Verdict, EngineError> {
        let verdict = self.judge(outcome)?;
        Ok(with_ids(verdict, outcome.call_id.clone(), outcome.session_id.clone(), || outcome.tool.clone()))
    }

    /// `report` for an outcome the caller no longer needs: the verdict takes its
    /// ids instead of copies (the server's path, once per outcome).
    pub fn report_owned(&self, outcome: Outcome) -> Result<Verdict, EngineError> {
        let verdict = self.judge(&outcome)?;
        Ok(with_ids(verdict, outcome.call_id, outcome.session_id, || outcome.tool))
    }

    /// The verdict for an outcome, without the ids that `with_ids` gives it.
    fn judge(&self, outcome: &Outcome) -> Result<Verdict, EngineError> {
        validate_outcome(outcome)?;
        let now = self.clock.now_ms();
        let policy = self.policy_for(&outcome.session_id, now);
        // Classify before taking the session's lock: it is the costly part and needs no state.
        let judged = (!outcome.ok).then(|| {
            let (analysis, reused) = self.analyses.get(outcome, &policy);
            self.metrics.failure_analysis(reused);
            let provider = provider_delay(&outcome.headers, || self.clock.wall_ms())
                .or_else(|| analysis.delay_in_text_ms.map(ProviderDelay::After));
            Judged { analysis, provider }
        });
        let window = self.settings.idempotency_window;
        let history = self.settings.history;
        // Looked up once: the outcome is counted under it, and while it is the tool's own
        // name (under the label cap) sessions share it instead of copying the name each.
        // A tool that does not exist takes no label of its own (see `existing_tool_label`).
        let unknown_tool = judged.as_ref().is_some_and(|j| j.analysis.classification.category == Category::UnknownTool);
        let label = if unknown_tool {
            self.metrics.existing_tool_label(&outcome.tool)
        } else {
            self.metrics.tool_label(&outcome.tool)
        };
        let ((verdict, fresh), created, evictions) = self.sessions.with_session(
            &outcome.session_id,
            now,
            || self.new_session(&outcome.session_id, now),
            |s| {
                if let Some(earlier) = s.recall(&outcome.call_id) {
                    return (recalled(earlier, &policy), false);
                }
                if *label == *outcome.tool {
                    s.know_tool(&label);
                }
                let gate = self.tool_gate(outcome, judged.as_ref(), &policy, now);
                let (verdict, recipe) = decide(s, outcome, judged, &policy, &gate, now, history);
                s.remember(&outcome.call_id, &outcome.tool, &verdict, recipe, window);
                (verdict, true)
            },
        );
        self.count_evictions(&evictions);
        if created {
            self.gauge_sessions();
        }
        if fresh {
            self.record(label, &verdict);
        }
        Ok(verdict)
    }

    /// Records the outcome with its tool's breaker and budget (once per outcome:
    /// called under the session's lock, after the repeated-call_id check).
    fn tool_gate(&self, o: &Outcome, judged: Option<&Judged>, policy: &Policy, now: u64) -> ToolGate<'_> {
        let health = match judged {
            None => Health::Success,
            Some(j) if j.analysis.classification.category.is_unhealthy() => Health::Failure {
                provider_delay_ms: match j.provider {
                    Some(ProviderDelay::After(ms) | ProviderDelay::DoNotRetry { after: Some(ms) }) => {
                        Some(ms.min(crate::breaker::LONGEST_OPEN_MS))
                    }
                    _ => None,
                },
            },
            Some(_) => Health::Neutral,
        };
        let view = match &policy.tool_breaker {
            Some(p) => self.tools.record(&o.tool, now, health, p),
            None => ToolView {
                before: BreakerState::Closed,
                after: BreakerState::Closed,
                open_until_ms: 0,
                transitions: Vec::new(),
            },
        };
        self.metrics.breaker_transitions(&o.tool, &view.transitions);
        let budget_ok = match (&policy.retry_budget, judged) {
            (Some(b), None) => {
                self.budgets.on_success(&o.tool, b);
                true
            }
            (Some(b), Some(j)) if j.analysis.classification.retryable => self.budgets.on_failure(&o.tool, b),
            _ => true,
        };
        if let Some(pending) = &self.shared {
            let opened = view.transitions.contains(&BreakerState::Open).then(|| view.open_until_ms.saturating_sub(now));
            let closed = view.transitions.contains(&BreakerState::Closed);
            let retryable = judged.is_some_and(|j| j.analysis.classification.retryable);
            pending.note(&o.tool, health, retryable, opened, closed);
        }
        ToolGate { view, budget_ok, open_notes: &self.open_notes }
    }

    /// Changes since the last exchange with shared state.
    pub fn take_shared_pending(&self) -> std::collections::HashMap<String, crate::shared::ToolDelta> {
        self.shared.as_ref().map(crate::shared::Pending::take).unwrap_or_default()
    }

    /// Puts back changes taken but not exchanged, for the next exchange.
    pub fn restore_shared_pending(&self, earlier: Vec<(String, crate::shared::ToolDelta)>) {
        if let Some(pending) = &self.shared {
            pending.restore(earlier);
        }
    }

    /// Opens `tool`'s breaker for `remaining_ms` (at most [`LONGEST_OPEN_MS`](crate::breaker::LONGEST_OPEN_MS))
    /// because another sidecar says it is down.
    pub fn open_tool_for(&self, tool: &str, remaining_ms: u64) {
        if self.policy().tool_breaker.is_none() {
            return;
        }
        let now = self.clock.now_ms();
        let until = now.saturating_add(remaining_ms.min(crate::breaker::LONGEST_OPEN_MS));
        let transitions = self.tools.force_open(tool, now, until);
        self.metrics.breaker_transitions(tool, &transitions);
    }

    /// Sets `tool`'s retry budget to the fleet's count.
    pub fn set_budget_tokens(&self, tool: &str, tokens: f64) {
        if let Some(b) = &self.policy().retry_budget {
            self.budgets.set(tool, tokens, b);
        }
    }

    fn record(&self, label: ArcStr, v: &Verdict) {
        let m = &self.metrics;
        // Only a retry the budget refused: with the bucket low, a failure may still be
        // answered otherwise first (an open breaker, a session limit).
        if v.breaker.reason == Some(Reason::RetryBudgetExhausted) {
            m.budget_exhausted(&label);
        }
        m.outcome(label, v.classification.as_ref().map(|c| c.category), v.action);
        if let Some(retry) = &v.retry {
            m.retry_delay(retry.delay_ms);
        }
        if v.action == Action::Escalate {
            m.escalation(v.breaker.reason.unwrap_or(Reason::CategoryPolicy));
        }

        if let (Some(action), Some(reason)) = (v.shadow_action, v.shadow_reason) {
            m.shadowed(action, reason);
        }
        if !v.snippet.is_empty() {
            m.snippet(v.snippet.len());
        }
    }

    /// May `tool` be called now in `session_id`? In shadow mode always yes, with
    /// what would have been said in the message.
    pub fn admit(&self, session_id: &str, tool: &str) -> Result<Admission, EngineError> {
        check_id("session_id", session_id)?;
        check_id("tool", tool)?;
        let now = self.clock.now_ms();
        let policy = self.policy_for(session_id, now);
        // A name the model made up takes no metric label of its own, as in `judge`: one asked
        // about takes a label once it has reported an outcome, or when the session declared it
        // (its tools are looked through only for a name without a label yet).
        let known = self.metrics.existing_tool_label(tool);
        let labelled = *known == *tool;
        let session = self.sessions.with_existing(session_id, now, |s| {
            let counters = Counters { steps: s.steps, cost: s.cost, ..Default::default() };
            let refusal = if s.state == SessionState::Stopped {
                Some((Reason::SessionStopped, "the session was aborted; start a new one".to_string()))
            } else {
                breaker::limit_reached(&counters, &s.limits().under(&policy.limits)).map(|reason| match reason {
                    Reason::StepLimit => (reason, format!("the step limit is reached ({} steps)", s.steps)),
                    _ => (reason, format!("the cost limit is reached ({:.4} spent)", s.cost)),
                })
            };
            let declared = !labelled && s.setup.as_ref().is_some_and(|setup| setup.tools.iter().any(|t| t == tool));
            (s.state, refusal, declared)
        });
        let (session_state, refusal, declared) = session.unwrap_or((SessionState::Active, None, false));
        let (gate, view) = match &policy.tool_breaker {
            Some(p) if refusal.is_none() => self.tools.admit(tool, now, p),
            // Refused for the session's sake: the tool's state is still told, no probe spent.
            Some(_) => (Gate::Allowed, self.tools.view(tool, now)),
            None => (Gate::Allowed, breaker::closed_view()),
        };
        self.metrics.breaker_transitions(tool, &view.transitions);
        let (reason, retry_after_ms, message) = match (refusal, gate) {
            (Some((reason, message)), _) => (Some(reason), 0, message),
            (None, Gate::Denied { retry_after_ms }) => (
                Some(Reason::ToolBreakerOpen),
                retry_after_ms,
                format!(
                    "tool `{}` is fenced off (breaker {}); come back in {retry_after_ms} ms",
                    compact::cut(tool, 100),
                    view.after
                ),
            ),
            (None, Gate::Probe) => (None, 0, "allowed as a probe of a half-open breaker".to_string()),
            (None, Gate::Allowed) => (None, 0, "allowed".to_string()),
        };
        let decision = match (reason, gate) {
            (Some(_), _) if policy.shadow => "shadow_denied",
            (Some(_), _) => "denied",
            (None, Gate::Probe) => "probe",
            _ => "allowed",
        };
        let label = if declared { self.metrics.tool_label(tool) } else { known };
        self.metrics.admit(label, decision);
        let allowed = reason.is_none() || policy.shadow;
        Ok(Admission {
            allowed,
            reason,
            retry_after_ms: if allowed { 0 } else { retry_after_ms },
            tool_state: view.after,
            session_state,
            message: if policy.shadow && reason.is_some() {
                format!("allowed (shadow mode; would deny: {message})")
            } else {
                message
            },
        })
    }

    /// The compacted error context for the session's next LLM turn; `max_tokens`
    /// overrides the configured budget (the oldest errors go first to fit).
    pub fn context(&self, session_id: &str, max_tokens: Option<u32>) -> Result<ContextText, EngineError> {
        check_id("session_id", session_id)?;
        let now = self.clock.now_ms();
        let policy = self.policy_for(session_id, now);
        let text = self.sessions.with_existing(session_id, now, |s| {
            // Repeats of one error (same tool and fingerprint), even with others
            // between them, show once, where the newest was, with their count.
            let mut folded: Vec<(&HistoryEntry, u32)> = Vec::new();
            for e in s.history.iter().filter(|e| !e.resolved) {
                let earlier = folded.iter().position(|(f, _)| f.is_same_error_as(e));
                let count = e.count + earlier.map_or(0, |i| folded.remove(i).1);
                folded.push((e, count));
            }
            let messages: Vec<String> = folded.iter().map(|(e, _)| e.message.to_string()).collect();
            let views: Vec<ErrorView<'_>> = folded
                .iter()
                .zip(&messages)
                .map(|((e, count), message)| ErrorView {
                    tool: &e.tool,
                    category: e.category,
                    message,
                    suggestion: &e.suggestion,
                    count: *count,
                    location: "",
                })
                .collect();
            let budget = max_tokens.filter(|n| *n > 0).or(policy.snippet.context_max_tokens);
            let tokenizer = match (budget, policy.snippet.tokenizer) {
                (Some(_), Some(t)) => Some(t),
                // A per-call budget with none configured: the configured encoding, loaded on first use.
                (Some(_), None) => crate::templates::Tokenizer::by_name(&policy.snippet.encoding),
                _ => None,
            };
            let mut shape = policy.snippet.clone();
            loop {
                let (text, shown, hidden) = compact::context_text(&views, s.dropped_unresolved, &shape);
                let (Some(budget), Some(tokenizer)) = (budget, tokenizer) else {
                    return ContextText { text, errors_shown: shown, errors_hidden: hidden, tokens: 0 };
                };
                let tokens = tokenizer.count(&text);
                if tokens <= budget {
                    return ContextText { text, errors_shown: shown, errors_hidden: hidden, tokens };
                }
                if shown == 1 {
                    // One block and the summary still too long: the newest error's block alone, cut
                    // to fit (the error to handle now matters more than the count of older ones). A
                    // cut that keeps nothing of its message shows no error, and gives no text: the
                    // head of a tag (`<error tool="…`) would only puzzle the model.
                    let newest = &views[views.len() - 1];
                    let (block, _, _) = compact::context_text(std::slice::from_ref(newest), 0, &shape);
                    let (text, tokens) = tokenizer.fit(&block, budget);
                    // Where the message starts: after the block's first line (its tag), where
                    // a word such as "error" or "timeout" cannot be mistaken for it.
                    let head = crate::classify::prefix(newest.message, 32);
                    let body = block.find('\n').map_or(0, |at| at + 1);
                    let message_at = (!head.is_empty()).then(|| block[body..].find(head).map(|at| body + at)).flatten();
                    let kept = text.strip_suffix("\n</error>").unwrap_or(&text).trim_end_matches('…');
                    if kept.trim().is_empty() || message_at.is_some_and(|at| kept.len() <= at) {
                        // Hidden counts occurrences, as the summary line does: a repeat counts its times.
                        let errors_hidden = hidden + newest.count.max(1);
                        return ContextText { text: String::new(), errors_shown: 0, errors_hidden, tokens: 0 };
                    }
                    return ContextText { text, errors_shown: 1, errors_hidden: hidden, tokens };
                }
                if shown == 0 {
                    // The summary alone too long: cut it.
                    let (text, tokens) = tokenizer.fit(&text, budget);
                    return ContextText { text, errors_shown: 0, errors_hidden: hidden, tokens };
                }
                // The oldest shown error goes into the summary line.
                shape.context_errors = shown as usize - 1;
            }
        });
        Ok(text.unwrap_or_default())
    }

    /// Ends a session and returns its summary (`None` when there was none).
    pub fn end_session(&self, session_id: &str) -> Result<Option<SessionSummary>, EngineError> {
        check_id("session_id", session_id)?;
        let now = self.clock.now_ms();
        let summary = match self.sessions.remove(session_id, now) {
            Removal::Ended(s) => Some(s.summary(now)),
            Removal::Expired => {
                self.metrics.evicted(Eviction::Idle, 1);
                None
            }
            Removal::Missing => return Ok(None),
        };
        self.gauge_sessions();
        Ok(summary)
    }

    /// Drops idle sessions; returns how many.
    pub fn expire_idle(&self) -> usize {
        let n = self.sessions.expire_idle(self.clock.now_ms());
        if n > 0 {
            self.metrics.evicted(Eviction::Idle, n as u64);
        }
        // Every sweep: the sessions' bytes change with every outcome, not only as sessions come and go.
        self.gauge_sessions();
        n
    }
}

/// Checks an id or name as every RPC does: not blank, at most `MAX_ID_BYTES`,
/// no control characters.
pub fn check_id(field: &str, value: &str) -> Result<(), EngineError> {
    // Most ids are printable ASCII, found in one branch-free pass over the bytes (vectorised):
    // blank when all are spaces. Otherwise an ASCII id holds a control character (C0 or DEL,
    // `is_control`'s ASCII part); any other is decoded and looked at character by character.
    let printable_ascii = value.bytes().fold(true, |ok, b| ok & (0x20..0x7f).contains(&b));
    let blank = if printable_ascii { value.bytes().all(|b| b == b' ') } else { value.trim().is_empty() };
    if blank {
        return Err(invalid(field, format!("{value:?}"), "must not be empty"));
    }
    if value.len() > MAX_ID_BYTES {
        return Err(invalid(field, format!("{value:?}"), format!("at most {MAX_ID_BYTES} bytes")));
    }
    let control = !printable_ascii && (value.is_ascii() || value.chars().any(char::is_control));
    if control {
        return Err(invalid(field, format!("{value:?}"), "must not contain control characters"));
    }
    Ok(())
}

fn validate_outcome(o: &Outcome) -> Result<(), EngineError> {
    check_id("session_id", &o.session_id)?;
    check_id("tool", &o.tool)?;
    // An id as the others are, but it may be left out.
    if !o.call_id.is_empty() {
        check_id("call_id", &o.call_id)?;
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

/// `verdict` with the request's ids, and its tool unless it has one (a recalled
/// verdict keeps the tool it was first given for).
fn with_ids(mut verdict: Verdict, call_id: String, session_id: String, tool: impl FnOnce() -> String) -> Verdict {
    verdict.call_id = call_id;
    verdict.session_id = session_id;
    if verdict.tool.is_empty() {
        verdict.tool = tool();
    }
    verdict
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::model::{Headers, OutcomeKind};
    use crate::nearest::nearest_tools;
    use crate::templates::Tokenizer;

    fn engine() -> (Engine, Arc<ManualClock>) {
        let clock = Arc::new(ManualClock::new(1_700_000_000_000));
        let settings = EngineSettings::from_config(&crate::config::Config::default(), 42);
        (Engine::new(Policy::default(), settings, clock.clone(), Arc::new(Metrics::new(200))), clock)
    }

    fn fail(session: &str, tool: &str, message: &str) -> Outcome {
        Outcome { session_id: session.into(), tool: tool.into(), message: message.into(), ..Default::default() }
    }

    fn ok(session: &str, tool: &str) -> Outcome {
        Outcome { session_id: session.into(), tool: tool.into(), ok: true, ..Default::default() }
    }

    #[test]
    fn an_open_from_the_fleet_lasts_at_most_a_day() {
        // Redis may hold anything: an open of u64::MAX ms used to overflow the clock's addition.
        let (e, clock) = engine();
        e.open_tool_for("search", u64::MAX);
        let denied = e.admit("s", "search").unwrap();
        assert!(!denied.allowed);
        assert_eq!(denied.retry_after_ms, crate::breaker::LONGEST_OPEN_MS);
        clock.advance(crate::breaker::LONGEST_OPEN_MS + 1);
        assert!(e.admit("s", "search").unwrap().allowed, "still fenced off after a day");
    }

    #[test]
    fn three_consecutive_failures_escalate_and_success_resets() {
        let (e, _) = engine();
        let timeout = |n: u32| Outcome {
            kind: Some(OutcomeKind::Timeout),
            ..fail("s", "search", &format!("timed out after {n}.1s"))
        };
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
            let v = e
                .report(&fail(
                    "s",
                    &format!("tool{i}"),
                    &format!("distinct failure {}", ["a", "b", "c", "d", "e", "f", "g", "h", "i"][i]),
                ))
                .unwrap();
            assert_ne!(v.action, Action::Escalate, "error {i}");
        }
        let v = e.report(&fail("s", "tool9", "the tenth")).unwrap();
        assert_eq!((v.action, v.breaker.reason), (Action::Escalate, Some(Reason::SessionErrors)));
    }

    #[test]
    fn a_reload_changes_the_limits_of_running_sessions_but_not_the_declared_ones() {
        let (e, _) = engine();
        e.report(&ok("running", "t")).unwrap();
        let declared = StartSession { session_id: "declared".into(), step_limit: Some(10), ..Default::default() };
        e.start_session(&declared).unwrap();
        // An operator lowers the step limit in an incident: the runs already going stop too.
        let mut config = crate::config::Config::default();
        config.breakers.step_limit = 3;
        e.set_policy(Policy::from_config(&config).unwrap());
        let actions: Vec<Action> = (0..3).map(|_| e.report(&ok("running", "t")).unwrap().action).collect();
        assert_eq!(actions, [Action::Continue, Action::Abort, Action::Abort]);
        // A session that declared its own limit keeps it.
        let actions: Vec<Action> = (0..3).map(|_| e.report(&ok("declared", "t")).unwrap().action).collect();
        assert_eq!(actions, [Action::Continue; 3]);
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
            last =
                Some(e.report(&fail("s", "calc", &format!("invalid literal for int() with base 10: '{n}x'"))).unwrap());
        }
        let v = last.unwrap();
        assert_eq!((v.action, v.breaker.reason), (Action::Abort, Some(Reason::IdenticalErrors)));
        assert_eq!(v.breaker.session_state, SessionState::Stopped);
        assert_eq!(e.report(&ok("s", "calc")).unwrap().action, Action::Abort);
        // A stopped session's verdicts still show the tool's run of failures.
        let after = e.report(&fail("s", "calc", "invalid literal for int() with base 10: '9x'")).unwrap();
        assert_eq!((after.breaker.reason, after.breaker.consecutive_failures), (Some(Reason::SessionStopped), 5));
        let admit = e.admit("s", "calc").unwrap();
        assert!(!admit.allowed);
        assert_eq!(admit.reason, Some(Reason::SessionStopped));
    }

    #[test]
    fn identical_means_the_same_error_shown_not_the_same_first_frames() {
        // Real Python 3.11 tracebacks (tests/data/traces/make/failures.py, `tool_arguments`): one tool's
        // arguments malformed two ways, through the same frames to two exceptions. Their first 512
        // bytes, all a raw text's fingerprint reads, are the same outer frames.
        let truncated = include_str!("../tests/data/traces/py-tool-arguments-truncated.txt");
        let quoted = include_str!("../tests/data/traces/py-tool-arguments-single-quoted.txt");
        assert_eq!(fingerprint(truncated), fingerprint(quoted), "the set no longer shows what this test is about");
        let trace = |detail: &str| Outcome { detail: detail.into(), ..fail("s", "search_web", "") };
        let (e, _) = engine();
        let counts: Vec<u32> =
            [truncated, quoted, quoted, &truncated.replace("column 37 (char 36)", "column 52 (char 51)")]
                .iter()
                .map(|t| e.report(&trace(t)).unwrap().breaker.identical_errors)
                .collect();
        // Two errors, then the second again, then the first at another column: new again.
        assert_eq!(counts, [1, 1, 2, 1]);
        let again = e.report(&trace(&truncated.replace("column 37 (char 36)", "column 9 (char 8)"))).unwrap();
        assert_eq!(again.breaker.identical_errors, 2, "the same error at another column");
    }

    #[test]
    fn a_run_of_identical_errors_ends_with_its_tools_success_not_another_tools() {
        let (e, _) = engine();
        let timeout = |tool: &str| fail("s", tool, "Read timed out. (read timeout=30)");
        let identical = |o: &Outcome| e.report(o).unwrap().breaker.identical_errors;
        let counts = [
            identical(&timeout("search")),
            identical(&timeout("search")),
            identical(&ok("s", "calc")),
            identical(&timeout("search")),
            identical(&ok("s", "search")),
            identical(&timeout("search")),
            identical(&timeout("calc")),
            identical(&timeout("search")),
        ];
        // Another tool's success leaves the run; its own ends it; the same error from another tool is not it.
        assert_eq!(counts, [1, 2, 2, 3, 0, 1, 1, 1]);
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
    fn a_wait_the_provider_wrote_in_its_error_is_kept_when_no_header_gives_one() {
        let (e, _) = engine();
        // google-genai 3.6's ClientError for the Gemini API's 429 for a quota per minute (holdout-real's
        // r-py-gemini-per-minute, cut): no Retry-After, the wait is in the body.
        let gemini = "429 RESOURCE_EXHAUSTED. {'error': {'code': 429, 'message': 'You exceeded your current quota, please check your plan and billing details. Please retry in 23.472316927s.', 'status': 'RESOURCE_EXHAUSTED', 'details': [{'@type': 'type.googleapis.com/google.rpc.QuotaFailure', 'violations': [{'quotaId': 'GenerateRequestsPerMinutePerProjectPerModel-FreeTier'}]}, {'@type': 'type.googleapis.com/google.rpc.RetryInfo', 'retryDelay': '23s'}]}}";
        let v = e.report(&Outcome { http_status: Some(429), ..fail("s", "gemini", gemini) }).unwrap();
        assert_eq!(v.action, Action::Retry);
        let retry = v.retry.unwrap();
        assert!(retry.provider_delay);
        assert!((23_472..=28_167).contains(&retry.delay_ms), "{}", retry.delay_ms);
        // A header outranks the text.
        let headed = Outcome {
            http_status: Some(429),
            headers: Headers::new([("retry-after", "7")]),
            ..fail("s2", "gemini", gemini)
        };
        let delay = e.report(&headed).unwrap().retry.unwrap().delay_ms;
        assert!((7000..=8400).contains(&delay), "{delay}");
        // The words of a failure that is not waited out ask for nothing.
        let told = fail("s3", "search", "ValueError: bad query; retry in 30 seconds with another one");
        let v = e.report(&Outcome { exception_type: "ValueError".into(), ..told }).unwrap();
        assert_eq!((v.action, v.retry), (Action::Recover, None));
    }

    #[test]
    fn a_provider_that_says_not_to_retry_is_not_retried() {
        let (e, _) = engine();
        // Anthropic's 529 overloaded_error (its SDK's message), the header its SDK obeys set to false.
        let overloaded =
            "Error code: 529 - {'type': 'error', 'error': {'type': 'overloaded_error', 'message': 'Overloaded'}}";
        let o = Outcome {
            http_status: Some(529),
            headers: Headers::new([("x-should-retry", "false"), ("retry-after", "2")]),
            ..fail("s", "claude", overloaded)
        };
        let v = e.report(&o).unwrap();
        assert!(v.classification.as_ref().unwrap().retryable, "the rules alone would retry it");
        assert_ne!(v.action, Action::Retry);
        assert_eq!(v.retry, None);
        assert_eq!(v.breaker.reason, Some(Reason::ServerPushback));
        let said_yes = Outcome {
            headers: Headers::new([("x-should-retry", "true"), ("retry-after", "2")]),
            ..fail("s2", "claude", overloaded)
        };
        assert_eq!(e.report(&said_yes).unwrap().action, Action::Retry);
    }

    #[test]
    fn an_owned_outcome_gets_the_verdict_a_borrowed_one_gets_with_its_ids() {
        let (borrowed, _) = engine();
        let (owned, _) = engine();
        let outcomes = [
            Outcome { call_id: "c1".into(), ..fail("s", "search", "Read timed out. (read timeout=30)") },
            Outcome { call_id: "c2".into(), ..ok("s", "search") },
            fail("s", "search", "Read timed out. (read timeout=30)"),
            // A repeated call_id sent with another tool: the verdict is the first one, for its tool.
            Outcome { call_id: "c1".into(), ..fail("s", "fetch", "404") },
        ];
        for o in outcomes {
            let v = borrowed.report(&o).unwrap();
            assert_eq!((v.call_id.as_str(), v.session_id.as_str()), (o.call_id.as_str(), "s"));
            assert_eq!(v.tool, "search");
            assert_eq!(owned.report_owned(o).unwrap(), v);
        }
    }

    #[test]
    fn a_repeated_call_id_gets_the_earlier_verdict_whole() {
        let (e, _) = engine();
        let tools = vec!["search_web".to_string(), "fetch_url".to_string()];
        e.start_session(&StartSession { session_id: "s".into(), tools, ..Default::default() }).unwrap();
        // Real texts: a Python traceback from the trace set, an unknown tool, a 401 from the OpenAI SDK.
        let trace = include_str!("../tests/data/traces/py-requests-timeout.txt");
        let outcomes = [
            Outcome { call_id: "c1".into(), detail: trace.into(), ..fail("s", "search_web", "") },
            Outcome { call_id: "c2".into(), kind: Some(OutcomeKind::UnknownTool), ..fail("s", "serch_web", "no such tool") },
            Outcome { call_id: "c3".into(), ..ok("s", "fetch_url") },
            Outcome { call_id: "c4".into(), detail: trace.into(), ..fail("s", "search_web", "") },
            Outcome {
                call_id: "c5".into(),
                http_status: Some(401),
                ..fail("s", "llm", "Error code: 401 - {'error': {'message': 'Incorrect API key provided: sk-proj-********abcd.', 'type': 'invalid_request_error', 'code': 'invalid_api_key'}}")
            },
        ];
        let first: Vec<Verdict> = outcomes.iter().map(|o| e.report(o).unwrap()).collect();
        assert!(first[0].snippet.contains("where: "), "{}", first[0].snippet);
        assert!(first[1].snippet.contains("Did you mean `search_web`?"), "{}", first[1].snippet);
        assert_eq!(first[4].action, Action::Escalate);
        // c4 folded into c1's history entry; every verdict still comes back as it was, in any order.
        for (o, v) in outcomes.iter().zip(&first).rev() {
            assert_eq!(e.report(o).unwrap(), Verdict { replayed: true, ..v.clone() }, "{}", o.call_id);
        }
        assert_eq!(e.end_session("s").unwrap().unwrap().calls, 5, "repeats counted nothing");
    }

    #[test]
    fn a_plain_success_is_remembered_small_and_comes_back_whole() {
        let (e, _) = engine();
        let start = StartSession { session_id: "s".into(), step_limit: Some(2), ..Default::default() };
        e.start_session(&start).unwrap();
        let outcomes = [
            Outcome { call_id: "c1".into(), ..ok("s", "search") },
            Outcome { call_id: "c2".into(), ..fail("s", "search", "503 Service Unavailable") },
            // Past the step limit: a success whose verdict still has a snippet.
            Outcome { call_id: "c3".into(), ..ok("s", "search") },
        ];
        let first: Vec<Verdict> = outcomes.iter().map(|o| e.report(o).unwrap()).collect();
        assert_eq!(first[2].action, Action::Abort);
        assert!(first[2].classification.is_none() && !first[2].snippet.is_empty(), "{:?}", first[2]);
        let now = e.clock.now_ms();
        let held = e.sessions.with_existing("s", now, |s| s.recent.iter().map(|r| r.details.is_some()).collect());
        assert_eq!(held, Some(vec![false, true, true]), "only the plain success is held without details");
        for (o, v) in outcomes.iter().zip(&first) {
            assert_eq!(e.report(o).unwrap(), Verdict { replayed: true, ..v.clone() }, "{}", o.call_id);
        }
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
        let v = e
            .report(&Outcome { kind: Some(OutcomeKind::UnknownTool), ..fail("s", "serch_web", "no such tool") })
            .unwrap();
        assert_eq!(v.action, Action::Reclassify);
        assert!(v.snippet.contains("Did you mean `search_web`?"), "{}", v.snippet);
    }

    #[test]
    fn context_hides_resolved_errors() {
        let (e, _) = engine();
        e.report(&fail("s", "a", "boom one")).unwrap();
        e.report(&fail("s", "b", "boom two")).unwrap();
        e.report(&ok("s", "a")).unwrap();
        let c = e.context("s", None).unwrap();
        assert_eq!(c.errors_shown, 1);
        assert!(c.text.contains("tool=\"b\"") && !c.text.contains("tool=\"a\""), "{}", c.text);
        assert_eq!(e.context("nobody", None).unwrap(), ContextText::default());
    }

    #[test]
    fn context_folds_repeats_even_with_others_between_them_newest_last() {
        let (e, _) = engine();
        e.report(&fail("s", "fetch", "GET /items/17 returned 404")).unwrap();
        e.report(&fail("s", "parse", "unexpected token at line 3")).unwrap();
        e.report(&fail("s", "fetch", "GET /items/18 returned 404")).unwrap();
        let c = e.context("s", None).unwrap();
        assert_eq!(c.errors_shown, 2, "{}", c.text);
        assert_eq!(c.text.matches("tool=\"fetch\"").count(), 1, "{}", c.text);
        assert!(c.text.contains("\nGET /items/18 returned 404 (×2)\n"), "{}", c.text);
        // The repeat moved to where its newest occurrence was: after `parse`.
        assert!(c.text.find("tool=\"parse\"") < c.text.find("tool=\"fetch\""), "{}", c.text);
    }

    #[test]
    fn a_sessions_byte_count_follows_its_history_and_verdicts_as_they_come_and_go() {
        // Escalations remember a report each; repeats fold; the history and the window drop their oldest.
        let mut config = crate::config::Config::default();
        config.breakers.session_errors = 1000;
        config.breakers.tool_consecutive_failures = 2;
        config.breakers.identical_errors = 1000;
        let (e, _) = engine();
        e.set_policy(Policy::from_config(&config).unwrap());
        for i in 0..200 {
            let message =
                if i % 3 == 0 { "same failure".to_string() } else { format!("failure {i} {}", "x".repeat(i)) };
            let o = Outcome { call_id: format!("c{i}"), ..fail("s", &format!("tool{}", i % 7), &message) };
            e.report(&o).unwrap();
            if i % 5 == 0 {
                e.report(&Outcome { call_id: format!("ok{i}"), ..ok("s", "tool1") }).unwrap();
            }
            let exact = e.sessions.with_existing("s", e.clock.now_ms(), |s| s.held_bytes_are_exact()).unwrap();
            assert!(exact, "after outcome {i}");
        }
        let escalated = e.sessions.with_existing("s", e.clock.now_ms(), |s| {
            s.recent.iter().filter(|r| r.details.as_ref().is_some_and(|d| d.escalation.is_some())).count()
        });
        assert!(escalated.unwrap() > 0, "the window holds escalations with their reports");
    }

    #[test]
    fn a_context_budget_drops_the_oldest_errors_then_cuts() {
        let mut config = crate::config::Config::default();
        config.snippet.context_errors = 10;
        config.breakers.session_errors = 100;
        config.breakers.tool_consecutive_failures = 100;
        let (e, _) = engine();
        e.set_policy(Policy::from_config(&config).unwrap());
        for i in 0..6 {
            e.report(&fail("s", &format!("tool{i}"), &format!("failure number {i} of the inventory service"))).unwrap();
        }
        let all = e.context("s", None).unwrap();
        assert_eq!((all.errors_shown, all.tokens), (6, 0), "no budget: nothing counted");
        let fitted = e.context("s", Some(80)).unwrap();
        assert!(fitted.tokens > 0 && fitted.tokens <= 80, "{}", fitted.tokens);
        assert!(fitted.errors_shown < 6 && fitted.errors_hidden == 6 - fitted.errors_shown);
        assert!(fitted.text.contains("tool=\"tool5\"") && !fitted.text.contains("tool=\"tool0\""), "{}", fitted.text);
        let tiny = e.context("s", Some(16)).unwrap();
        assert!(tiny.tokens <= 16, "{}", tiny.tokens);
        // The newest error's block, cut, not the head of the summary line above it.
        assert!(tiny.text.starts_with("<error") && tiny.text.contains("tool5"), "{}", tiny.text);
        assert_eq!((tiny.errors_shown, tiny.errors_hidden), (1, 5));
        let none = e.context("s", Some(1)).unwrap();
        assert!(none.tokens <= 1, "{}", none.tokens);
        assert_eq!((none.errors_shown, none.errors_hidden), (0, 6), "{:?}", none.text);
        // Room for the head of the tag but not for a word of the message: no error shown, and no
        // fragment of a tag either (5 tokens gave `<error tool="…` counted as shown).
        for budget in 1..=16 {
            let c = e.context("s", Some(budget)).unwrap();
            match c.errors_shown {
                0 => assert_eq!((c.text.as_str(), c.errors_hidden), ("", 6), "{budget}"),
                _ => assert!(c.text.contains(">\nf"), "{budget}: {:?}", c.text),
            }
        }
        assert_eq!(e.context("s", Some(5)).unwrap().errors_shown, 0);
        // A message that the tag itself spells (`<error`, `type="timeout"`) is not found in it.
        for message in ["error", "timeout"] {
            let (e, _) = engine();
            e.report(&Outcome { kind: Some(OutcomeKind::Timeout), ..fail("t", "search", message) }).unwrap();
            for budget in 1..=12 {
                let c = e.context("t", Some(budget)).unwrap();
                match c.errors_shown {
                    0 => assert_eq!(c.text, "", "{message} {budget}"),
                    _ => assert!(c.text.contains(&format!(">\n{}", &message[..1])), "{message} {budget}: {:?}", c.text),
                }
            }
        }
        // The newest error repeated twice more: hidden counts its three times, as the summary would.
        for _ in 0..2 {
            e.report(&fail("s", "tool5", "failure number 5 of the inventory service")).unwrap();
        }
        let none = e.context("s", Some(1)).unwrap();
        assert_eq!((none.errors_shown, none.errors_hidden), (0, 8), "{:?}", none.text);
    }

    /// Engines with snippet budgets of 16, 24, 40 and 80 tokens, built once: a
    /// policy takes seconds to build in a debug build, a case microseconds.
    fn budget_engines() -> &'static [(u32, Engine); 4] {
        static ENGINES: std::sync::OnceLock<[(u32, Engine); 4]> = std::sync::OnceLock::new();
        ENGINES.get_or_init(|| {
            [16, 24, 40, 80].map(|budget| {
                let mut config = crate::config::Config::default();
                config.snippet.max_tokens = budget;
                let (e, _) = engine();
                e.set_policy(Policy::from_config(&config).unwrap());
                (budget, e)
            })
        })
    }

    #[test]
    fn a_budget_shortens_the_message_shown_from_its_start() {
        // Real: requests/urllib3 2.x failing to connect (as in benches/engine.rs).
        let message = "HTTPSConnectionPool(host='api.example.com', port=443): Max retries exceeded with url: /v1/search?q=rust (Caused by NewConnectionError('<urllib3.connection.HTTPSConnection object at 0x7f>: Failed to establish a new connection'))";
        let (budget, e) = &budget_engines()[2];
        let v = e.report(&fail("shortened", "search", message)).unwrap();
        // Shortened again from the message (its head and tail kept), not cut at the budget.
        let shown = v.snippet.lines().nth(1).unwrap_or_default();
        assert!(shown.starts_with("HTTPSConnectionPool(") && shown.ends_with("connection'))"), "{:?}", v.snippet);
        assert!(shown.contains("characters elided") && v.snippet_tokens <= *budget, "{:?}", v.snippet);
    }

    #[test]
    fn a_stopped_session_s_snippet_counts_its_tokens_under_a_budget() {
        let (_, e) = &budget_engines()[0];
        let cancelled = Outcome { kind: Some(OutcomeKind::Cancelled), ..fail("stopped", "search", "cancelled") };
        assert_eq!(e.report(&cancelled).unwrap().action, Action::Abort);
        let v = e.report(&fail("stopped", "search", "boom")).unwrap();
        assert_eq!(v.breaker.reason, Some(Reason::SessionStopped));
        assert!(v.snippet_tokens > 0 && v.snippet_tokens <= 16, "{}", v.snippet_tokens);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(32))]
        #[test]
        fn a_snippet_never_exceeds_its_budget(
            which in 0usize..4,
            session in "[a-z]{12}",
            tool in "[a-z_]{1,100}",
            message in "\\PC{0,400}",
            secret in "[A-Za-z0-9]{40}",
        ) {
            let (budget, e) = &budget_engines()[which];
            let outcome = Outcome {
                kind: Some(OutcomeKind::InvalidToolCall),
                call_id: "call-1".into(),
                ..fail(&session, &tool, &format!("{message} api_key={secret} {message}"))
            };
            let v = e.report(&outcome).unwrap();
            let counted = Tokenizer::by_name("o200k_base").unwrap().count(&v.snippet);
            proptest::prop_assert!(counted <= *budget, "{} > {}: {}", counted, budget, v.snippet);
            proptest::prop_assert_eq!(counted, v.snippet_tokens);
            proptest::prop_assert!(!v.snippet.contains(&secret));
            // A repeated call_id gets the same snippet back, however the budget shaped it.
            let again = e.report(&outcome).unwrap();
            proptest::prop_assert!(again.replayed);
            proptest::prop_assert_eq!(again, Verdict { replayed: true, ..v });
        }
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
    fn a_run_that_goes_on_after_its_abort_is_still_counted_and_told_why_it_ended() {
        let (e, _) = engine();
        e.start_session(&StartSession { session_id: "s".into(), step_limit: Some(2), ..Default::default() }).unwrap();
        e.report(&Outcome { cost: 1.0, ..ok("s", "a") }).unwrap();
        let v = e.report(&Outcome { cost: 1.0, ..ok("s", "a") }).unwrap();
        assert_eq!((v.action, v.breaker.reason), (Action::Abort, Some(Reason::StepLimit)));
        assert!(v.snippet.contains("reached its step limit; end the run"), "{:?}", v.snippet);
        // The agent ignores the abort: two timeouts and a success, 5.0 spent.
        let timeout = Outcome { kind: Some(OutcomeKind::Timeout), cost: 2.0, ..fail("s", "a", "timed out") };
        let v = e.report(&timeout).unwrap();
        assert_eq!((v.action, v.breaker.reason), (Action::Abort, Some(Reason::SessionStopped)));
        assert_eq!((v.breaker.steps, v.breaker.session_errors), (3, 1));
        e.report(&timeout).unwrap();
        e.report(&Outcome { cost: 1.0, ..ok("s", "a") }).unwrap();
        let summary = e.end_session("s").unwrap().unwrap();
        assert_eq!((summary.calls, summary.errors, summary.cost), (5, 2, 7.0));
        assert_eq!(summary.errors_by_category.get("timeout"), Some(&2));
    }

    #[test]
    fn an_escalation_summary_reads_as_english() {
        let (e, _) = engine();
        let v = e.report(&Outcome { http_status: Some(401), ..fail("s", "crm", "Unauthorized") }).unwrap();
        assert_eq!(v.escalation.unwrap().summary, "An auth error from tool `crm` needs a human.");
        let v = e.report(&Outcome { http_status: Some(402), ..fail("t", "crm", "Payment Required") }).unwrap();
        assert_eq!(v.escalation.unwrap().summary, "A quota_exceeded error from tool `crm` needs a human.");
    }

    #[test]
    fn an_escalation_report_reads_in_full() {
        let (e, clock) = engine();
        let timeout = Outcome { kind: Some(OutcomeKind::Timeout), ..fail("s", "search", "read timed out after 30s") };
        e.report(&timeout).unwrap();
        clock.advance(1_250);
        e.report(&timeout).unwrap();
        clock.advance(1_000);
        e.report(&ok("s", "search")).unwrap();
        clock.advance(1_049);
        let v = e.report(&Outcome { http_status: Some(401), ..fail("s", "crm", "Unauthorized") }).unwrap();
        let text = v.escalation.unwrap().text;
        let expected = "Rebound escalation: An auth error from tool `crm` needs a human.\n\
            Errors, oldest first:\n\
            - 1.2s [timeout] search: read timed out after 30s (×2) → retry\n\
            - 3.3s [auth] crm: Unauthorized → escalate\n\
            Totals: 4 calls, 3 errors (auth=1, timeout=2), 2 retries; session running 3.3s.";
        assert_eq!(text, expected);
    }

    #[test]
    fn the_labels_a_session_declared_come_back_in_its_escalation_and_its_summary() {
        // They were checked and kept, but never returned: nothing told the human which run it was.
        let (e, _) = engine();
        let labels: BTreeMap<String, String> = [("run", "nightly-42"), ("user", "alice")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        e.start_session(&StartSession { session_id: "s".into(), labels: labels.clone(), ..Default::default() })
            .unwrap();
        let call = Outcome { call_id: "c1".into(), http_status: Some(401), ..fail("s", "crm", "Unauthorized") };
        let report = e.report(&call).unwrap().escalation.unwrap();
        assert_eq!(report.labels, labels);
        assert!(report.text.starts_with("Rebound escalation: An auth error from tool `crm` needs a human.\nLabels: run=nightly-42, user=alice\nErrors"), "{}", report.text);
        // A repeated call_id's verdict, made again from what was remembered, has them too.
        assert_eq!(*e.report(&call).unwrap().escalation.unwrap(), *report);
        assert_eq!(e.end_session("s").unwrap().unwrap().labels, labels);
        // A value's line breaks and secrets stay out of the text (the fields keep what was given).
        let odd: BTreeMap<String, String> =
            [("note".to_string(), "a\nb".to_string()), ("token".to_string(), "abcdef0123456789".to_string())].into();
        e.start_session(&StartSession { session_id: "u".into(), labels: odd.clone(), ..Default::default() }).unwrap();
        let v = e.report(&Outcome { http_status: Some(401), ..fail("u", "crm", "Unauthorized") }).unwrap();
        let report = v.escalation.unwrap();
        assert!(report.text.contains("\nLabels: note=a b, token=[REDACTED:token]\n"), "{}", report.text);
        assert_eq!(report.labels, odd);
        // Without StartSession, none.
        let v = e.report(&Outcome { http_status: Some(401), ..fail("t", "crm", "Unauthorized") }).unwrap();
        assert!(v.escalation.unwrap().labels.is_empty());
    }

    #[test]
    fn a_cost_limit_reached_on_a_success_says_so() {
        let (e, _) = engine();
        e.start_session(&StartSession { session_id: "s".into(), cost_limit: Some(1.5), ..Default::default() }).unwrap();
        let v = e.report(&Outcome { cost: 2.0, ..ok("s", "a") }).unwrap();
        assert_eq!((v.action, v.breaker.reason), (Action::Abort, Some(Reason::CostLimit)));
        assert_eq!(v.snippet, "<error>\nThe session reached its cost limit; end the run.\n</error>");
    }

    #[test]
    fn attempts_left_counts_the_session_breakers_that_end_the_retries_first() {
        let (e, _) = engine();
        let timeout = |n: u32| Outcome {
            kind: Some(OutcomeKind::Timeout),
            attempt: n,
            ..fail("s", "search", &format!("timed out after {n}.1s"))
        };
        // Three retries by the category, but the third failure in a row escalates.
        let first = e.report(&timeout(1)).unwrap().retry.unwrap();
        assert_eq!((first.attempt, first.attempts_left), (1, 1));
        let second = e.report(&timeout(2)).unwrap().retry.unwrap();
        assert_eq!((second.attempt, second.attempts_left), (2, 0));
        assert_eq!(e.report(&timeout(3)).unwrap().action, Action::Escalate);
        // With the breaker further off, the category's own count shows.
        let (e, _) = engine();
        let mut policy = Policy::default();
        policy.limits.consecutive_failures = 10;
        e.set_policy(policy);
        let first = e.report(&timeout(1)).unwrap().retry.unwrap();
        assert_eq!((first.attempt, first.attempts_left), (1, 2));
    }

    #[test]
    fn bad_input_is_named() {
        let (e, _) = engine();
        let err = e.report(&fail("s", "", "x")).unwrap_err().to_string();
        assert!(err.contains("`tool`") && err.contains("must not be empty"), "{err}");
        let err = e.report(&Outcome { cost: f64::NAN, ..fail("s", "t", "x") }).unwrap_err().to_string();
        assert!(err.contains("`cost`"), "{err}");
        let err =
            e.start_session(&StartSession { session_id: "s".into(), profile: "gold".into(), ..Default::default() });
        assert!(err.unwrap_err().to_string().contains("`profile`"));
    }

    #[test]
    fn a_session_cost_saturates_instead_of_reaching_infinity() {
        let (e, _) = engine();
        let huge = Outcome { cost: 1.7e308, ..ok("s", "t") };
        e.report(&huge).unwrap();
        let v = e.report(&huge).unwrap();
        assert_eq!(v.breaker.cost, f64::MAX);
        assert_eq!(e.end_session("s").unwrap().unwrap().cost, f64::MAX);
    }

    #[test]
    fn blank_ids_are_refused_ascii_or_not() {
        for blank in ["", " ", "    ", "\t", " \n ", "\u{3000}", " \u{a0} "] {
            let err = check_id("session_id", blank).unwrap_err().to_string();
            assert!(err.contains("must not be empty"), "{blank:?}: {err}");
        }
        for id in ["a", " a ", "\u{3000}x", "é"] {
            assert!(check_id("session_id", id).is_ok(), "{id:?}");
        }
    }

    #[test]
    fn ids_with_control_characters_are_refused_ascii_or_not() {
        for c in (0u8..128).map(char::from).chain(['\u{85}', '\u{9f}', 'é', '\u{2028}', '日']) {
            let id = format!("run-{c}-1");
            assert_eq!(check_id("session_id", &id).is_err(), c.is_control(), "{c:?}");
        }
    }

    fn unavailable(session: &str) -> Outcome {
        Outcome { http_status: Some(503), ..fail(session, "search", "503 Service Unavailable") }
    }

    /// The shared text a session holds for `tool`: its counters' name and its errors' suggestions.
    fn held(e: &Engine, session: &str, tool: &str) -> (ArcStr, Vec<ArcStr>) {
        let now = e.clock.now_ms();
        e.sessions
            .with_existing(session, now, |s| {
                let name = s.tool_stats.iter().find(|t| &*t.tool == tool).expect("counted").tool.clone();
                (name, s.history.iter().map(|h| h.suggestion.clone()).collect())
            })
            .expect("held")
    }

    #[test]
    fn sessions_that_declare_the_same_tools_share_one_list() {
        let (e, _) = engine();
        let declare = |session: &str, tools: &[&str]| {
            let tools = tools.iter().map(|t| t.to_string()).collect();
            e.start_session(&StartSession { session_id: session.into(), tools, ..Default::default() }).unwrap();
            let now = e.clock.now_ms();
            e.sessions.with_existing(session, now, |s| s.setup.as_ref().unwrap().tools.clone()).unwrap()
        };
        let first = declare("a", &["search", "fetch_url"]);
        let other = declare("b", &["calculator"]);
        let same = declare("c", &["search", "fetch_url"]);
        assert!(Arc::ptr_eq(&first, &same), "the same list is shared");
        assert_eq!(
            (&same[..], &other[..]),
            (&["search".to_string(), "fetch_url".to_string()][..], &["calculator".to_string()][..])
        );
        // Past the lists kept, a list is made anew (equal, not shared).
        for i in 0..DECLARED_TOOL_LISTS {
            declare(&format!("filler-{i}"), &[&format!("tool-{i}")]);
        }
        let again = declare("d", &["search", "fetch_url"]);
        assert!(!Arc::ptr_eq(&first, &again) && first == again);

        // A shared list counts into the store's bytes once, however many sessions declare it.
        let (e, _) = engine();
        let tools: Vec<String> = (0..100).map(|i| format!("tool_number_{i}")).collect();
        let start = |session: &str| {
            let request = StartSession { session_id: session.into(), tools: tools.clone(), ..Default::default() };
            e.start_session(&request).unwrap();
            e.sessions.bytes()
        };
        let one = start("one");
        let list =
            e.sessions.with_existing("one", e.clock.now_ms(), |s| s.setup.as_ref().unwrap().tools.bytes).unwrap();
        let two = start("two");
        assert!(list > 2000 && two - one < list / 2, "a second session added {} bytes; the list is {list}", two - one);
    }

    #[test]
    fn sessions_keep_messages_of_one_shape_as_one_shared_shape_and_their_own_numbers() {
        let (e, _) = engine();
        // openai-python 1.x's RateLimitError message, its numbers differing from run to run.
        let message = |used: u32| {
            format!("Rate limit reached for gpt-4o in organization org-XXXX on tokens per min (TPM): Limit 30000, Used {used}, Requested 1201. Please try again in 1.836s.")
        };
        let report = |session: &str, used: u32| {
            let o = Outcome { call_id: format!("call-{used}"), ..fail(session, "llm", &message(used)) };
            let v = e.report(&o).unwrap();
            (o, v)
        };
        let (first, verdict) = report("a", 29717);
        let one = e.sessions.bytes();
        report("b", 29802);
        let two = e.sessions.bytes();
        let kept = |session: &str| {
            e.sessions.with_existing(session, e.clock.now_ms(), |s| s.history[0].message.clone()).unwrap()
        };
        assert!(kept("a").shares_shape_with(&kept("b")));
        assert_eq!((kept("a").to_string(), kept("b").to_string()), (message(29717), message(29802)));
        // The second session's message adds its numbers, not its text.
        let added = two - one;
        assert!(added + message(0).len() * 3 / 4 < one, "the first session {one} bytes, the second {added}");
        // Shown whole wherever a session shows it: its context, a recalled verdict, an escalation.
        assert!(e.context("a", None).unwrap().text.contains(&message(29717)));
        assert_eq!(e.report(&first).unwrap(), Verdict { replayed: true, ..verdict });
        let stopped = Outcome { http_status: Some(401), ..fail("a", "llm", "Error code: 401 - invalid api key 4242") };
        let escalation = e.report(&stopped).unwrap().escalation.expect("an auth error escalates");
        assert!(escalation.text.contains(&message(29717)), "{}", escalation.text);
        assert_eq!(escalation.history[0].message.to_string(), message(29717));
    }

    #[test]
    fn sessions_share_tool_names_under_the_label_cap_and_copy_them_past_it() {
        let clock = Arc::new(ManualClock::new(1_700_000_000_000));
        let settings = EngineSettings::from_config(&crate::config::Config::default(), 42);
        let e = Engine::new(Policy::default(), settings, clock, Arc::new(Metrics::new(1)));
        for session in ["a", "b"] {
            e.report(&ok(session, "search")).unwrap();
            e.report(&fail(session, "fetch", "boom")).unwrap();
        }
        let (a, _) = held(&e, "a", "search");
        let (b, _) = held(&e, "b", "search");
        assert!(ArcStr::ptr_eq(&a, &b), "one copy of the labelled tool's name");
        // Past the cap of one label, `fetch` is counted as `_other`: each session names it itself.
        let (a, _) = held(&e, "a", "fetch");
        let (b, _) = held(&e, "b", "fetch");
        assert_eq!((&*a, &*b), ("fetch", "fetch"));
        assert!(!ArcStr::ptr_eq(&a, &b));
    }

    #[test]
    fn an_open_breaker_s_suggestion_is_shared_within_a_second_and_counts_down() {
        let (e, clock) = engine();
        for i in 0..5 {
            e.report(&unavailable(&format!("s{i}"))).unwrap();
        }
        for session in ["x", "y"] {
            let v = e.report(&unavailable(session)).unwrap();
            assert_eq!(v.breaker.reason, Some(Reason::ToolBreakerOpen));
        }
        let (_, x) = held(&e, "x", "search");
        let (_, y) = held(&e, "y", "search");
        assert!(x[0].contains("for about 30s"), "{}", x[0]);
        assert!(ArcStr::ptr_eq(&x[0], &y[0]), "one copy per tool and second");
        clock.advance(10_500);
        let v = e.report(&unavailable("z")).unwrap();
        assert!(v.snippet.contains("Tool `search` is unavailable for about 20s"), "{}", v.snippet);
        let (_, z) = held(&e, "z", "search");
        assert!(!ArcStr::ptr_eq(&x[0], &z[0]));
    }

    #[test]
    fn a_session_is_judged_by_the_profile_it_named() {
        let config = crate::config::Config::parse(
            "[profiles.strict.breakers]\ntool_consecutive_failures = 1\n\n[profiles.fast.retry]\nbase_ms = 10\ncap_ms = 50\n",
            "t",
        )
        .unwrap();
        let clock = Arc::new(ManualClock::new(1_700_000_000_000));
        let e = Engine::new(
            Policy::from_config(&config).unwrap(),
            EngineSettings::from_config(&config, 42),
            clock,
            Arc::new(Metrics::new(200)),
        );
        let start = |id: &str, profile: &str| StartSession {
            session_id: id.into(),
            profile: profile.into(),
            ..Default::default()
        };
        e.start_session(&start("s", "strict")).unwrap();
        e.start_session(&start("f", "fast")).unwrap();
        let timeout =
            |session: &str| Outcome { kind: Some(OutcomeKind::Timeout), ..fail(session, "search", "timed out") };
        // One failure is enough in the strict profile; the file's three are not reached elsewhere.
        let v = e.report(&timeout("s")).unwrap();
        assert_eq!((v.action, v.breaker.reason), (Action::Escalate, Some(Reason::ConsecutiveFailures)));
        let v = e.report(&timeout("f")).unwrap();
        assert_eq!(v.action, Action::Retry);
        assert!(v.retry.unwrap().delay_ms <= 50, "the fast profile's backoff");
        let v = e.report(&timeout("plain")).unwrap();
        assert_eq!(v.action, Action::Retry);
        assert!(v.retry.unwrap().delay_ms >= 800, "the file's backoff");
        // A profile the config does not define is refused, naming those it does.
        let err = e.start_session(&start("x", "lenient")).unwrap_err().to_string();
        assert!(err.contains("`profile` = \"lenient\"") && err.contains("fast, strict"), "{err}");
    }

    #[test]
    fn an_open_tool_breaker_does_not_overrule_a_cancel_or_a_call_for_a_human() {
        let (e, _) = engine();
        for i in 0..5 {
            e.report(&unavailable(&format!("s{i}"))).unwrap();
        }
        let cancelled = Outcome { kind: Some(OutcomeKind::Cancelled), ..fail("c", "search", "cancelled by the user") };
        let v = e.report(&cancelled).unwrap();
        assert_eq!(v.breaker.tool_state, BreakerState::Open);
        assert_eq!((v.action, v.breaker.reason), (Action::Abort, Some(Reason::CategoryPolicy)));
        let revoked = Outcome { http_status: Some(401), ..fail("a", "search", "Incorrect API key provided") };
        let v = e.report(&revoked).unwrap();
        assert_eq!((v.action, v.breaker.reason), (Action::Escalate, Some(Reason::CategoryPolicy)));
        // Nor does an escalation: a cancel that is the tool's third failure in a row still aborts.
        let timeout =
            |session: &str| Outcome { kind: Some(OutcomeKind::Timeout), ..fail(session, "fetch", "timed out") };
        e.report(&timeout("k")).unwrap();
        e.report(&timeout("k")).unwrap();
        let third = Outcome { kind: Some(OutcomeKind::Cancelled), ..fail("k", "fetch", "cancelled by the user") };
        let v = e.report(&third).unwrap();
        assert_eq!(
            (v.action, v.breaker.reason, v.breaker.consecutive_failures),
            (Action::Abort, Some(Reason::CategoryPolicy), 3)
        );
        // What the agent can do without the tool, it is told to: use another one.
        let too_long = Outcome { http_status: Some(400), ..fail("r", "search", "context_length_exceeded") };
        assert_eq!(e.report(&too_long).unwrap().action, Action::Reclassify);
        assert_eq!(e.report(&unavailable("t")).unwrap().action, Action::Reclassify);
    }

    #[test]
    fn tool_breaker_opens_across_sessions_and_reports_reclassify() {
        let (e, clock) = engine();
        for i in 0..4 {
            let v = e.report(&unavailable(&format!("s{i}"))).unwrap();
            assert_eq!((v.action, v.breaker.tool_state), (Action::Retry, BreakerState::Closed), "{i}");
        }
        let v = e.report(&unavailable("s4")).unwrap();
        assert_eq!(v.breaker.tool_state, BreakerState::Open);
        assert_eq!((v.action, v.breaker.reason), (Action::Reclassify, Some(Reason::ToolBreakerOpen)));
        assert!(v.snippet.contains("Tool `search` is unavailable for about 30s"), "{}", v.snippet);
        let admit = e.admit("fresh", "search").unwrap();
        assert!(!admit.allowed);
        assert_eq!((admit.reason, admit.retry_after_ms), (Some(Reason::ToolBreakerOpen), 30_000));
        assert!(e.admit("fresh", "other_tool").unwrap().allowed);
        clock.advance(30_000);
        let probes: Vec<bool> = (0..3).map(|_| e.admit("fresh", "search").unwrap().allowed).collect();
        assert_eq!(probes, [true, true, false]);
        e.report(&ok("p1", "search")).unwrap();
        let v = e.report(&ok("p2", "search")).unwrap();
        assert_eq!(v.breaker.tool_state, BreakerState::Closed);
        assert!(e.admit("fresh", "search").unwrap().allowed);
    }

    #[test]
    fn an_admit_refused_for_the_session_still_tells_the_tools_state_and_spends_no_probe() {
        let (e, clock) = engine();
        for i in 0..5 {
            e.report(&unavailable(&format!("s{i}"))).unwrap();
        }
        let cancelled = Outcome { kind: Some(OutcomeKind::Cancelled), ..fail("stopped", "search", "cancelled") };
        assert_eq!(e.report(&cancelled).unwrap().action, Action::Abort);
        let admit = e.admit("stopped", "search").unwrap();
        assert_eq!((admit.reason, admit.tool_state), (Some(Reason::SessionStopped), BreakerState::Open));
        clock.advance(30_000);
        let admit = e.admit("stopped", "search").unwrap();
        assert_eq!(admit.tool_state, BreakerState::HalfOpen);
        // Both probes are still there for a live session.
        let probes: Vec<bool> = (0..3).map(|_| e.admit("fresh", "search").unwrap().allowed).collect();
        assert_eq!(probes, [true, true, false]);
    }

    #[test]
    fn made_up_tools_take_no_metric_label_and_tools_past_the_cap_no_breaker_gauge() {
        let handle = crate::metrics::install();
        let clock = Arc::new(ManualClock::new(1_700_000_000_000));
        let settings = EngineSettings::from_config(&crate::config::Config::default(), 42);
        let e = Engine::new(Policy::default(), settings, clock, Arc::new(Metrics::new(2)));
        // Names the model made up, before any real tool: they used to take the cap's two places.
        for made_up in ["capped_serch", "capped_seach", "capped_sarch"] {
            let o = Outcome { kind: Some(OutcomeKind::UnknownTool), ..fail("s", made_up, "Tool not found") };
            assert_eq!(e.report(&o).unwrap().classification.unwrap().category, Category::UnknownTool);
        }
        for (i, tool) in ["capped_real_a", "capped_real_b", "capped_real_c"].into_iter().enumerate() {
            for n in 0..5 {
                let o =
                    Outcome { http_status: Some(503), ..fail(&format!("r{i}-{n}"), tool, "503 Service Unavailable") };
                e.report(&o).unwrap();
            }
        }
        let text = handle.render();
        let labelled = |tool: &str| text.contains(&format!("tool=\"{tool}\""));
        assert!(labelled("capped_real_a") && labelled("capped_real_b"), "{text}");
        assert!(!labelled("capped_serch") && !labelled("capped_real_c"), "{text}");
        // The third real tool's breaker opened under `_other`: counted, but no gauge says `_other` is open.
        assert!(text.lines().any(|l| l.starts_with("rebound_breaker_state{tool=\"capped_real_b\"} 1")), "{text}");
        assert!(!text.contains("rebound_breaker_state{tool=\"_other\"}"), "{text}");
    }

    #[test]
    fn a_reload_that_turns_tool_breakers_off_closes_their_gauges() {
        let handle = crate::metrics::install();
        let (e, _) = engine();
        let tool = "gauged_after_reload";
        for i in 0..5 {
            e.report(&Outcome { http_status: Some(503), ..fail(&format!("g{i}"), tool, "503 Service Unavailable") })
                .unwrap();
        }
        let gauge = |value| format!("rebound_breaker_state{{tool=\"{tool}\"}} {value}");
        assert!(handle.render().lines().any(|l| l == gauge(1)), "the breaker did not open");
        let mut config = crate::config::Config::default();
        config.tool_breaker.enabled = false;
        e.set_policy(Policy::from_config(&config).unwrap());
        // No transition is recorded with breakers off: the gauge held 1, and the alert fired, for good.
        let text = handle.render();
        assert!(text.lines().any(|l| l == gauge(0)), "{text}");
        // Turned back on, the tool is not fenced off by the breaker it had before they were off.
        e.set_policy(Policy::default());
        assert!(e.admit("after", tool).unwrap().allowed, "the old open breaker came back");
    }

    #[test]
    fn a_wait_given_with_do_not_retry_still_holds_the_tool_breaker_open() {
        let (e, _) = engine();
        let overloaded = |session: &str| Outcome {
            http_status: Some(503),
            headers: Headers::new([("x-should-retry", "false"), ("retry-after", "120")]),
            ..fail(session, "search", "503 Service Unavailable: overloaded")
        };
        for i in 0..5 {
            let v = e.report(&overloaded(&format!("s{i}"))).unwrap();
            assert_ne!(v.action, Action::Retry, "{i}");
        }
        let admit = e.admit("fresh", "search").unwrap();
        assert_eq!((admit.reason, admit.retry_after_ms), (Some(Reason::ToolBreakerOpen), 120_000));
    }

    #[test]
    fn caller_mistakes_do_not_open_the_tool_breaker() {
        let (e, _) = engine();
        for i in 0..10 {
            let v =
                e.report(&Outcome { http_status: Some(400), ..fail(&format!("v{i}"), "search", "bad query") }).unwrap();
            assert_eq!(v.breaker.tool_state, BreakerState::Closed);
        }
    }

    #[test]
    fn an_empty_retry_budget_turns_retries_into_recover() {
        let mut config = crate::config::Config::default();
        config.retry_budget.max_tokens = 4.0;
        config.tool_breaker.enabled = false;
        let (e, _) = engine();
        e.set_policy(Policy::from_config(&config).unwrap());
        let actions: Vec<(Action, Option<Reason>)> = (0..3)
            .map(|i| e.report(&unavailable(&format!("b{i}"))).unwrap())
            .map(|v| (v.action, v.breaker.reason))
            .collect();
        assert_eq!(actions[0], (Action::Retry, None));
        assert_eq!(actions[1], (Action::Recover, Some(Reason::RetryBudgetExhausted)));
        assert_eq!(actions[2], (Action::Recover, Some(Reason::RetryBudgetExhausted)));
    }

    #[test]
    fn shadow_mode_changes_no_action_but_reports_what_would_have_happened() {
        let mut config = crate::config::Config::default();
        config.breakers.shadow = true;
        let (e, _) = engine();
        e.set_policy(Policy::from_config(&config).unwrap());
        let mut last = None;
        for i in 0..5 {
            last = Some(e.report(&unavailable(&format!("sh{i}"))).unwrap());
        }
        let v = last.unwrap();
        assert_eq!(v.action, Action::Retry);
        assert!(!v.enforced);
        assert_eq!(v.breaker.tool_state, BreakerState::Open, "still computed");
        assert_eq!((v.shadow_action, v.shadow_reason), (Some(Action::Reclassify), Some(Reason::ToolBreakerOpen)));
        let admit = e.admit("x", "search").unwrap();
        assert!(admit.allowed);
        assert!(admit.message.contains("would deny"), "{}", admit.message);
        // Session breakers too: three consecutive failures stay retries, flagged as escalate.
        let mut v = None;
        for _ in 0..3 {
            v = Some(
                e.report(&Outcome { kind: Some(OutcomeKind::Timeout), ..fail("one", "slow", "timed out") }).unwrap(),
            );
        }
        let v = v.unwrap();
        assert_eq!((v.action, v.shadow_action), (Action::Retry, Some(Action::Escalate)));
        assert_eq!(v.breaker.session_state, SessionState::Active);
    }

    #[test]
    fn nearest_tools_see_words_in_another_order_and_name_only_a_near_one() {
        let (e, _) = engine();
        let tools: Vec<String> =
            ["web_search", "fetch_url", "read_file", "write_file", "run_python"].map(String::from).into();
        e.start_session(&StartSession { session_id: "s".into(), tools: tools.clone(), ..Default::default() }).unwrap();
        let snippet = |tool: &str| {
            e.report(&Outcome { kind: Some(OutcomeKind::UnknownTool), ..fail("s", tool, "no such tool") })
                .unwrap()
                .snippet
        };
        assert!(snippet("search_web").contains("Did you mean `web_search`?"), "{}", snippet("search_web"));
        assert!(snippet("search").contains("Did you mean `web_search`?"), "a shared word");
        assert!(snippet("readfile").contains("Did you mean `read_file`?"));
        let far = snippet("browser.open");
        assert!(!far.contains("Did you mean"), "{far}");
        assert!(far.contains("Use one of the available tools: `"), "{far}");
        assert_eq!(nearest_tools("search_web", &tools)[0], "web_search");
    }
}
