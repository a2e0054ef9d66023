//! One outcome's verdict, made within its session: the action the category, the
//! breakers and the limits settle on, the retry plan, the snippet and the
//! escalation report; and an earlier verdict made again for a repeated call_id.
//! The engine (`crate::engine`) finds the session and the tool's guards, then asks here.

use crate::analysis::Analysis;
use crate::backoff::ProviderDelay;
use crate::breaker::{self, Counters, OpenNotes, ToolView};
use crate::compact::{self, ErrorView};
use crate::model::{
    Action, BreakerState, BreakerStatus, Category, Classification, ErrorRecord, EscalationReport, Outcome, Reason,
    RetryPlan, SessionState, Verdict,
};
use crate::nearest::unknown_tool_suggestion;
use crate::policy::Policy;
use crate::session::{low_half, HistoryEntry, KeptRetry, Remembered, Session, SessionTime, SnippetRecipe};
use arcstr::ArcStr;
use std::fmt::Write;
use std::sync::Arc;

/// What the engine worked out about a failure before touching its session.
pub(crate) struct Judged {
    /// What the failure's own fields give (the engine keeps it for the failures that come again).
    pub analysis: Arc<Analysis>,
    /// What the provider's headers say of a retry.
    pub provider: Option<ProviderDelay>,
}

/// What the tool-level guards (tool breaker, retry budget) say about an outcome.
pub(crate) struct ToolGate<'a> {
    /// The tool breaker's view after recording the outcome.
    pub view: ToolView,
    /// False when the retry budget says no more retries for this tool.
    pub budget_ok: bool,
    /// What to suggest while the breaker is open.
    pub open_notes: &'a OpenNotes,
}

/// An earlier verdict again, for a repeated call_id: its ids from the request,
/// its snippet and report text made again from what the session kept (with the
/// templates in force: after a reload that changed them, it reads in the new ones).
pub(crate) fn recalled(earlier: &Remembered, policy: &Policy) -> Verdict {
    let mut verdict = Verdict {
        // `with_ids` gives it the request's ids.
        call_id: String::new(),
        session_id: String::new(),
        tool: earlier.tool.to_string(),
        action: earlier.action,
        classification: None,
        retry: None,
        snippet: String::new(),
        breaker: earlier.breaker.clone(),
        escalation: None,
        enforced: earlier.enforced,
        shadow_action: earlier.shadow_action,
        shadow_reason: earlier.shadow_reason,
        replayed: true,
        snippet_tokens: earlier.snippet_tokens,
    };
    let Some(details) = &earlier.details else {
        return verdict;
    };
    verdict.escalation = details.escalation.as_ref().map(|report| {
        Box::new(EscalationReport { text: escalation_text(report, earlier.breaker.steps), ..(**report).clone() })
    });
    verdict.snippet = match &details.snippet {
        SnippetRecipe::Text(text) => text.to_string(),
        SnippetRecipe::Block { message, location, kind, trim } => {
            let (category, suggestion) =
                details.classification.as_ref().map_or((Category::Unknown, ""), |c| (c.category, &*c.suggestion));
            let message = message.to_string();
            let parts =
                SnippetParts { tool: &earlier.tool, category, message: &message, suggestion, location, kind: *kind };
            render_snippet(&parts, earlier.action, *trim, policy)
        }
    };
    verdict.classification = details.classification.clone();
    verdict.retry = details.retry.map(KeptRetry::plan);
    verdict
}

/// What an `<error>` block is made of.
struct SnippetParts<'a> {
    tool: &'a str,
    category: Category,
    message: &'a str,
    suggestion: &'a str,
    location: &'a str,
    kind: Option<crate::model::OutcomeKind>,
}

/// The snippet for a failure. `trim` 0 is the whole snippet; under a token
/// budget, higher levels drop the instruction, then the location, then the suggestion.
fn render_snippet(parts: &SnippetParts<'_>, action: Action, trim: u8, policy: &Policy) -> String {
    let templates = policy.snippet.templates.as_ref();
    let view = ErrorView {
        tool: parts.tool,
        category: parts.category,
        message: parts.message,
        suggestion: if trim >= 3 { "" } else { parts.suggestion },
        count: 1,
        location: if trim >= 2 { "" } else { parts.location },
    };
    let mut text = compact::render_block(&view, templates);
    if trim == 0 {
        if let Some(instruction) = compact::render_instruction(action, parts.kind, templates) {
            text.push('\n');
            text.push_str(&instruction);
        }
    }
    text
}

/// Updates the session for one outcome and builds the verdict, with what it
/// takes to make its snippet again for a repeated call_id.
pub(crate) fn decide(
    s: &mut Session,
    o: &Outcome,
    judged: Option<Judged>,
    policy: &Policy,
    gate: &ToolGate,
    now: u64,
    history: usize,
) -> (Verdict, SnippetRecipe) {
    let mut verdict = Verdict {
        // `with_ids` gives it the outcome's ids and tool.
        call_id: String::new(),
        session_id: String::new(),
        tool: String::new(),
        action: Action::Continue,
        classification: None,
        retry: None,
        snippet: String::new(),
        // The session's state and counters: each way out below fills them (`fill_counters`).
        breaker: BreakerStatus {
            tool_state: gate.view.after,
            session_state: s.state,
            reason: None,
            consecutive_failures: 0,
            session_errors: 0,
            identical_errors: 0,
            steps: 0,
            cost: 0.0,
        },
        escalation: None,
        enforced: !policy.shadow,
        shadow_action: None,
        shadow_reason: None,
        replayed: false,
        snippet_tokens: 0,
    };
    // Two huge finite costs must not sum to infinity, which JSON cannot carry.
    s.cost = (s.cost + o.cost).min(f64::MAX);
    s.steps = s.steps.saturating_add(1);
    if s.state == SessionState::Stopped {
        // Still counted (above and here): the summary of a run that went on after its
        // abort shows what it did since, not what it had done when it was told to stop.
        if let Some(j) = &judged {
            s.count_error(j.analysis.classification.category);
        }
        let consecutive = s.consecutive_failures(&o.tool);
        fill_counters(&mut verdict.breaker, s, consecutive);
        verdict.action = Action::Abort;
        verdict.breaker.reason = Some(Reason::SessionStopped);
        verdict.classification = judged.map(|j| j.analysis.classification.clone());
        verdict.snippet = "<error>\nThe session was stopped earlier; end the run.\n</error>".into();
        if let (Some(budget), Some(tokenizer)) = (policy.snippet.max_tokens, policy.snippet.tokenizer) {
            (verdict.snippet, verdict.snippet_tokens) = tokenizer.fit(&verdict.snippet, budget);
        }
        let recipe = SnippetRecipe::Text(verdict.snippet.as_str().into());
        return (verdict, recipe);
    }
    let Some(j) = judged else {
        s.tool_mut(&o.tool).succeed();
        s.resolve(&o.tool);
        let counters = Counters { steps: s.steps, cost: s.cost, ..Default::default() };
        let guard =
            breaker::limit_reached(&counters, &s.limits().under(&policy.limits)).map(|reason| (Action::Abort, reason));
        let (action, reason) = settle(&mut verdict, policy, guard, (Action::Continue, None));
        if action == Action::Abort {
            s.state = SessionState::Stopped;
            // The run ends on a success: say why, as a failure's abort does.
            verdict.snippet = limit_snippet(reason);
            if let (Some(budget), Some(tokenizer)) = (policy.snippet.max_tokens, policy.snippet.tokenizer) {
                (verdict.snippet, verdict.snippet_tokens) = tokenizer.fit(&verdict.snippet, budget);
            }
        }
        verdict.action = action;
        verdict.breaker.reason = reason;
        fill_counters(&mut verdict.breaker, s, 0);
        let recipe = SnippetRecipe::Text(verdict.snippet.as_str().into());
        return (verdict, recipe);
    };

    let category = j.analysis.classification.category;
    s.count_error(category);
    let (consecutive, tool) = {
        let t = s.tool_mut(&o.tool);
        t.fail();
        (t.consecutive_failures.into(), t.tool.clone())
    };
    let counters = Counters {
        steps: s.steps,
        cost: s.cost,
        session_errors: s.errors(),
        consecutive_failures: consecutive,
        identical_errors: s.identical_after(&tool, &j.analysis.kept, j.analysis.fingerprint),
    };
    let rule_action = j.analysis.classification.action;
    let retryable = j.analysis.classification.retryable || rule_action == Some(Action::Retry);
    let fallback = match rule_action {
        Some(a) if !matches!(a, Action::Retry | Action::Continue) => a,
        _ => policy.category(category).action,
    };

    // What the category's policy alone says ...
    let (planned, plan) = if retryable {
        plan_retry(s, o, &j, policy.backoff(category, &o.tool), fallback, policy)
    } else {
        ((fallback, matches!(fallback, Action::Escalate | Action::Abort).then_some(Reason::CategoryPolicy)), None)
    };
    // ... and what the breakers and budgets say: aborts first, then a fenced-off
    // tool, then escalations, then the budget. A plan that ends the run or asks for
    // a human stands over a fenced-off tool, and one that ends the run over an
    // escalation: a user's cancel still ends the run, a revoked key still needs a human.
    let tool_open = gate.view.after == BreakerState::Open;
    let stands = matches!(planned.0, Action::Escalate | Action::Abort);
    let limits = s.limits().under(&policy.limits);
    let guard = match breaker::on_failure(&counters, &limits, &policy.limits) {
        Some(trip @ (Action::Abort, _)) => Some(trip),
        _ if planned.0 == Action::Abort => None,
        _ if tool_open && !stands => Some((Action::Reclassify, Reason::ToolBreakerOpen)),
        Some(trip) => Some(trip),
        None if planned.0 == Action::Retry && !gate.budget_ok => Some((fallback, Reason::RetryBudgetExhausted)),
        None => None,
    };
    let (action, reason) = settle(&mut verdict, policy, guard, planned);
    if let (Action::Retry, Some(mut plan)) = (action, plan) {
        if !policy.shadow {
            // A retry that fails and trips a session breaker is not retried: promise no more than those left.
            plan.attempts_left =
                plan.attempts_left.min(breaker::failures_before_a_trip(&counters, &limits, &policy.limits));
        }
        s.tool_mut(&o.tool).retry(&plan);
        s.retries += 1;
        verdict.retry = Some(plan);
    }
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
    let suggestion: ArcStr = if reason == Some(Reason::ToolBreakerOpen) {
        gate.open_notes.get(&o.tool, gate.view.open_until_ms.saturating_sub(now).div_ceil(1000))
    } else if category == Category::UnknownTool {
        ArcStr::from(unknown_tool_suggestion(&o.tool, s.tools(), &j.analysis.classification.suggestion))
    } else {
        j.analysis.classification.suggestion.clone()
    };
    let message = &j.analysis.digest.message;
    s.push_error(
        HistoryEntry {
            tool,
            category,
            message: j.analysis.kept.clone(),
            suggestion: suggestion.clone(),
            shown: low_half(j.analysis.fingerprint),
            count: 1,
            at: SessionTime::from_ms(now.saturating_sub(s.created_ms)),
            action,
            resolved: false,
        },
        history,
    );
    let render = |message: &str, trim: u8| {
        let parts = SnippetParts {
            tool: &o.tool,
            category,
            message,
            suggestion: &suggestion,
            location: &j.analysis.digest.location,
            kind: o.kind,
        };
        render_snippet(&parts, action, trim, policy)
    };
    let mut trim = 0u8;
    let mut shortened: Option<String> = None;
    verdict.snippet = render(message, trim);
    let mut cut_to_fit = false;
    if let (Some(budget), Some(tokenizer)) = (policy.snippet.max_tokens, policy.snippet.tokenizer) {
        // Shorten the message first, then drop the optional parts, until the snippet fits.
        let mut chars = policy.snippet.message_chars;
        let mut tokens = tokenizer.count(&verdict.snippet);
        while tokens > budget && (chars > 20 || trim < 3) {
            if chars > 20 {
                chars = (chars * 3 / 4).max(20);
                shortened = Some(compact::clean_message(&j.analysis.digest.headline, chars));
            } else {
                trim += 1;
            }
            verdict.snippet = render(shortened.as_deref().unwrap_or(message), trim);
            tokens = tokenizer.count(&verdict.snippet);
        }
        if tokens > budget {
            // A long tool name or template text: cut the snippet itself, so it never exceeds its budget.
            (verdict.snippet, tokens) = tokenizer.fit(&verdict.snippet, budget);
            cut_to_fit = true;
        }
        verdict.snippet_tokens = tokens;
    }
    // A message shortened to fit is no message the session keeps: its snippet is kept whole.
    let recipe = if cut_to_fit || shortened.is_some() {
        SnippetRecipe::Text(verdict.snippet.as_str().into())
    } else {
        SnippetRecipe::Block {
            message: j.analysis.kept.clone(),
            location: j.analysis.digest.location.clone(),
            kind: o.kind,
            trim,
        }
    };
    fill_counters(&mut verdict.breaker, s, consecutive);
    if action == Action::Escalate {
        verdict.escalation =
            Some(Box::new(escalation_report(s, o, reason.unwrap_or(Reason::CategoryPolicy), category, now)));
    }
    verdict.classification = Some(Classification { suggestion, ..j.analysis.classification.clone() });
    (verdict, recipe)
}

/// The snippet of a success that reached a session limit.
fn limit_snippet(reason: Option<Reason>) -> String {
    let limit = match reason {
        Some(Reason::CostLimit) => "cost",
        _ => "step",
    };
    format!("<error>\nThe session reached its {limit} limit; end the run.\n</error>")
}

/// The action in force: the guard's when enforcing, the plan's in shadow mode
/// (where the guard is only reported as what would have happened).
fn settle(
    verdict: &mut Verdict,
    policy: &Policy,
    guard: Option<(Action, Reason)>,
    planned: (Action, Option<Reason>),
) -> (Action, Option<Reason>) {
    match guard {
        Some((action, reason)) if policy.shadow => {
            if action != planned.0 {
                verdict.shadow_action = Some(action);
                verdict.shadow_reason = Some(reason);
            }
            planned
        }
        Some((action, reason)) => (action, Some(reason)),
        None => planned,
    }
}

/// Plans a retry if the category's retries and the provider allow it; else the
/// fallback action. Changes nothing but the session's jitter source: the plan
/// is applied only if the retry stands after the breakers have spoken.
fn plan_retry(
    s: &mut Session,
    o: &Outcome,
    j: &Judged,
    backoff: &crate::backoff::BackoffPolicy,
    fallback: Action,
    policy: &Policy,
) -> ((Action, Option<Reason>), Option<RetryPlan>) {
    let max = backoff.max_retries();
    let (done, previous) = {
        let t = s.tool_mut(&o.tool);
        (if o.attempt > 0 { o.attempt - 1 } else { t.retries.into() }, t.last_delay_ms.into())
    };
    if done >= max {
        return ((fallback, Some(Reason::RetriesExhausted)), None);
    }
    let (delay, provider) = match j.provider {
        Some(ProviderDelay::DoNotRetry { .. }) => return ((fallback, Some(Reason::ServerPushback)), None),
        Some(ProviderDelay::After(ms)) if ms > policy.max_provider_delay_ms => {
            return ((policy.long_delay_action, Some(Reason::DelayTooLong)), None);
        }
        Some(ProviderDelay::After(ms)) => (backoff.spread_provider_delay(ms, &mut s.rng), true),
        None => (backoff.delay_ms(done, previous, &mut s.rng), false),
    };
    let plan =
        RetryPlan { delay_ms: delay, attempt: done + 1, attempts_left: max - done - 1, provider_delay: provider };
    ((Action::Retry, None), Some(plan))
}

fn fill_counters(b: &mut crate::model::BreakerStatus, s: &Session, consecutive: u32) {
    b.session_state = s.state;
    b.consecutive_failures = consecutive;
    b.session_errors = s.errors();
    b.identical_errors = s.identical();
    b.steps = s.steps;
    b.cost = s.cost;
}

/// The report a human reads when a session escalates.
fn escalation_report(s: &Session, o: &Outcome, reason: Reason, category: Category, now: u64) -> EscalationReport {
    let consecutive = s.consecutive_failures(&o.tool);
    let tool = compact::cut(&o.tool, 100);
    let summary = match reason {
        Reason::ConsecutiveFailures => {
            format!("{consecutive} consecutive failures of tool `{tool}` (last: {category}).")
        }
        Reason::SessionErrors => format!("{} errors in this session (last: {category} from `{tool}`).", s.errors()),
        _ => {
            let article = if category.as_str().starts_with(['a', 'e', 'i', 'o', 'u']) { "An" } else { "A" };
            format!("{article} {category} error from tool `{tool}` needs a human.")
        }
    };
    let history: Vec<ErrorRecord> = s
        .history
        .iter()
        .map(|e| ErrorRecord {
            tool: e.tool.clone(),
            category: e.category,
            message: e.message.clone(),
            count: e.count,
            at_ms: e.at.ms(),
            action: e.action,
        })
        .collect();
    let mut errors_by_category = s.errors_by_category.to_vec();
    errors_by_category.sort_by_key(|(c, _)| c.as_str());
    let mut report = EscalationReport {
        summary,
        history,
        errors_by_category,
        retries: s.retries,
        session_duration_ms: now.saturating_sub(s.created_ms),
        text: String::new(),
        labels: s.setup.as_ref().map(|setup| setup.labels.clone()).unwrap_or_default(),
    };
    report.text = escalation_text(&report, s.steps);
    report
}

/// The report as text: made from its parts alone (and the session's steps), so
/// that a remembered verdict need not keep it. Written straight into one string, not
/// a string a line and one a total joined: 16,000 instructions a report on the engine
/// bench's `real` workload, not 23,000.
pub fn escalation_text(report: &EscalationReport, steps: u32) -> String {
    let mut text = String::with_capacity(128 + report.history.len() * 256);
    let _ = writeln!(text, "Rebound escalation: {}", report.summary);
    if !report.labels.is_empty() {
        // One line (a value's control characters as spaces), redacted as all the report's text is.
        let labels: Vec<String> =
            report.labels.iter().map(|(k, v)| format!("{k}={}", v.replace(char::is_control, " "))).collect();
        let _ = writeln!(text, "{}", crate::redact::redact(&format!("Labels: {}", labels.join(", "))));
    }
    text.push_str("Errors, oldest first:\n");
    for e in &report.history {
        let _ = write!(text, "- {:.1}s [{}] {}: {}", e.at_ms as f64 / 1000.0, e.category, e.tool, e.message);
        if e.count > 1 {
            let _ = write!(text, " (×{})", e.count);
        }
        let _ = writeln!(text, " → {}", e.action);
    }
    let errors: u32 = report.errors_by_category.iter().map(|(_, n)| n).sum();
    let _ = write!(text, "Totals: {steps} calls, {errors} errors (");
    for (i, (category, n)) in report.errors_by_category.iter().enumerate() {
        let _ = write!(text, "{}{category}={n}", if i == 0 { "" } else { ", " });
    }
    let seconds = report.session_duration_ms as f64 / 1000.0;
    let _ = write!(text, "), {} retries; session running {seconds:.1}s.", report.retries);
    text
}
