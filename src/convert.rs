//! The one place where generated protobuf types meet domain types, and where
//! domain errors become gRPC statuses.

use crate::engine::{Admission, ContextText, EngineError, SessionInfo, StartSession};
use crate::model::{self, Headers};
use crate::pb;
use tonic::Status;

/// The response headers Rebound reads; others are dropped at the edge so a
/// huge header map costs nothing past decoding.
pub use crate::backoff::PROVIDER_HEADERS as RETRY_HEADERS;

/// A domain error as a gRPC status whose message names the field and value.
pub fn status(err: EngineError) -> Status {
    match err {
        EngineError::InvalidArgument { .. } => Status::invalid_argument(err.to_string()),
    }
}

fn bad(field: &str, value: impl std::fmt::Display, problem: &str) -> Status {
    Status::invalid_argument(format!("`{field}` = {value}: {problem}"))
}

/// Converts a wire outcome, checking its enums and ranges.
pub fn outcome(o: pb::Outcome) -> Result<model::Outcome, Status> {
    let kind = match pb::OutcomeKind::try_from(o.kind) {
        Ok(pb::OutcomeKind::Unspecified) => None,
        Ok(k) => Some(outcome_kind(k)),
        Err(_) => return Err(bad("kind", o.kind, "not a known OutcomeKind")),
    };
    let http_status = match o.http_status {
        0 => None,
        s @ 100..=599 => Some(s as u16),
        s => return Err(bad("http_status", s, "an HTTP status is 100 to 599 (0 for none)")),
    };
    let headers = Headers::new(
        o.headers.into_iter().filter(|(k, _)| RETRY_HEADERS.iter().any(|h| h.eq_ignore_ascii_case(k.trim()))),
    );
    Ok(model::Outcome {
        session_id: o.session_id,
        call_id: o.call_id,
        tool: o.tool,
        ok: o.ok,
        kind,
        message: o.message,
        exception_type: o.exception_type,
        http_status,
        grpc_code: o.grpc_code,
        exit_code: o.exit_code,
        code: o.code,
        headers,
        detail: o.detail,
        attempt: o.attempt,
        duration_ms: o.duration_ms,
        cost: o.cost,
    })
}

fn outcome_kind(k: pb::OutcomeKind) -> model::OutcomeKind {
    use model::OutcomeKind as M;
    match k {
        pb::OutcomeKind::Unspecified | pb::OutcomeKind::ToolError => M::ToolError,
        pb::OutcomeKind::NoToolCall => M::NoToolCall,
        pb::OutcomeKind::InvalidToolCall => M::InvalidToolCall,
        pb::OutcomeKind::UnknownTool => M::UnknownTool,
        pb::OutcomeKind::Timeout => M::Timeout,
        pb::OutcomeKind::Cancelled => M::Cancelled,
        pb::OutcomeKind::ProviderError => M::ProviderError,
    }
}

/// The wire value of an action.
pub fn action(a: model::Action) -> pb::Action {
    use model::Action as M;
    match a {
        M::Continue => pb::Action::Continue,
        M::Retry => pb::Action::Retry,
        M::Recover => pb::Action::Recover,
        M::Replan => pb::Action::Replan,
        M::Reclassify => pb::Action::Reclassify,
        M::Escalate => pb::Action::Escalate,
        M::Abort => pb::Action::Abort,
    }
}

/// The wire value of a category.
pub fn category(c: model::Category) -> pb::Category {
    use model::Category as M;
    match c {
        M::Timeout => pb::Category::Timeout,
        M::RateLimited => pb::Category::RateLimited,
        M::Network => pb::Category::Network,
        M::Unavailable => pb::Category::Unavailable,
        M::Internal => pb::Category::Internal,
        M::Auth => pb::Category::Auth,
        M::PermissionDenied => pb::Category::PermissionDenied,
        M::QuotaExceeded => pb::Category::QuotaExceeded,
        M::NotFound => pb::Category::NotFound,
        M::Validation => pb::Category::Validation,
        M::Conflict => pb::Category::Conflict,
        M::Format => pb::Category::Format,
        M::UnknownTool => pb::Category::UnknownTool,
        M::ContextLength => pb::Category::ContextLength,
        M::ContentFilter => pb::Category::ContentFilter,
        M::Cancelled => pb::Category::Cancelled,
        M::Unknown => pb::Category::Unknown,
    }
}

/// The wire value of a breaker state.
pub fn breaker_state(s: model::BreakerState) -> pb::BreakerState {
    match s {
        model::BreakerState::Closed => pb::BreakerState::Closed,
        model::BreakerState::Open => pb::BreakerState::Open,
        model::BreakerState::HalfOpen => pb::BreakerState::HalfOpen,
    }
}

/// The wire value of a session state.
pub fn session_state(s: model::SessionState) -> pb::SessionState {
    match s {
        model::SessionState::Active => pb::SessionState::Active,
        model::SessionState::Escalated => pb::SessionState::Escalated,
        model::SessionState::Stopped => pb::SessionState::Stopped,
    }
}

/// The wire value of a reason (`Unspecified` for none).
pub fn reason(r: Option<model::Reason>) -> pb::Reason {
    use model::Reason as M;
    match r {
        None => pb::Reason::Unspecified,
        Some(M::CategoryPolicy) => pb::Reason::CategoryPolicy,
        Some(M::RetriesExhausted) => pb::Reason::RetriesExhausted,
        Some(M::ConsecutiveFailures) => pb::Reason::ConsecutiveFailures,
        Some(M::SessionErrors) => pb::Reason::SessionErrors,
        Some(M::IdenticalErrors) => pb::Reason::IdenticalErrors,
        Some(M::StepLimit) => pb::Reason::StepLimit,
        Some(M::CostLimit) => pb::Reason::CostLimit,
        Some(M::SessionStopped) => pb::Reason::SessionStopped,
        Some(M::ToolBreakerOpen) => pb::Reason::ToolBreakerOpen,
        Some(M::RetryBudgetExhausted) => pb::Reason::RetryBudgetExhausted,
        Some(M::DelayTooLong) => pb::Reason::DelayTooLong,
        Some(M::ServerPushback) => pb::Reason::ServerPushback,
    }
}

/// A verdict for the wire.
pub fn verdict(v: model::Verdict) -> pb::Verdict {
    pb::Verdict {
        call_id: v.call_id,
        session_id: v.session_id,
        action: action(v.action) as i32,
        classification: v.classification.map(|c| pb::Classification {
            category: category(c.category) as i32,
            retryable: c.retryable,
            rule: c.rule.to_string(),
            suggestion: c.suggestion.to_string(),
        }),
        retry: v.retry.map(|r| pb::RetryPlan {
            delay_ms: r.delay_ms,
            attempt: r.attempt,
            attempts_left: r.attempts_left,
            provider_delay: r.provider_delay,
        }),
        snippet: v.snippet,
        breaker: Some(pb::BreakerStatus {
            tool_state: breaker_state(v.breaker.tool_state) as i32,
            session_state: session_state(v.breaker.session_state) as i32,
            reason: reason(v.breaker.reason) as i32,
            consecutive_failures: v.breaker.consecutive_failures,
            session_errors: v.breaker.session_errors,
            identical_errors: v.breaker.identical_errors,
            steps: v.breaker.steps,
            cost: v.breaker.cost,
        }),
        escalation: v.escalation.map(|e| *e).map(|e| pb::EscalationReport {
            summary: e.summary,
            history: e
                .history
                .into_iter()
                .map(|r| pb::ErrorRecord {
                    tool: r.tool.to_string(),
                    category: category(r.category) as i32,
                    message: r.message.to_string(),
                    count: r.count,
                    at_ms: r.at_ms,
                    action: action(r.action) as i32,
                })
                .collect(),
            errors_by_category: e.errors_by_category.into_iter().map(|(c, n)| (c.as_str().to_string(), n)).collect(),
            retries: e.retries,
            session_duration_ms: e.session_duration_ms,
            text: e.text,
            labels: e.labels.into_iter().collect(),
        }),
        enforced: v.enforced,
        shadow_action: v.shadow_action.map_or(pb::Action::Unspecified, action) as i32,
        replayed: v.replayed,
        snippet_tokens: v.snippet_tokens,
        shadow_reason: reason(v.shadow_reason) as i32,
    }
}

/// A StartSession request from the wire.
pub fn start_session(r: pb::StartSessionRequest) -> StartSession {
    StartSession {
        session_id: r.session_id,
        step_limit: (r.step_limit > 0).then_some(r.step_limit),
        cost_limit: (r.cost_limit != 0.0).then_some(r.cost_limit),
        error_limit: (r.error_limit > 0).then_some(r.error_limit),
        tools: r.tools,
        profile: r.profile,
        labels: r.labels.into_iter().collect(),
    }
}

/// The StartSession answer.
pub fn session_info(session_id: String, info: SessionInfo) -> pb::StartSessionResponse {
    pb::StartSessionResponse {
        session_id,
        created: info.created,
        step_limit: info.limits.step_limit.unwrap_or(0),
        cost_limit: info.limits.cost_limit.unwrap_or(0.0),
        error_limit: info.limits.error_limit,
    }
}

/// The Admit answer.
pub fn admission(a: Admission) -> pb::AdmitResponse {
    pb::AdmitResponse {
        allowed: a.allowed,
        reason: reason(a.reason) as i32,
        retry_after_ms: a.retry_after_ms,
        tool_state: breaker_state(a.tool_state) as i32,
        session_state: session_state(a.session_state) as i32,
        message: a.message,
    }
}

/// The Context answer.
pub fn context(c: ContextText) -> pb::ContextResponse {
    pb::ContextResponse { text: c.text, errors_shown: c.errors_shown, errors_hidden: c.errors_hidden, tokens: c.tokens }
}

/// The EndSession answer.
pub fn end_session(session_id: String, summary: Option<model::SessionSummary>) -> pb::EndSessionResponse {
    pb::EndSessionResponse {
        session_id,
        found: summary.is_some(),
        summary: summary.map(|s| pb::SessionSummary {
            calls: s.calls,
            errors: s.errors,
            errors_by_category: s.errors_by_category.into_iter().collect(),
            retries: s.retries,
            escalations: s.escalations,
            cost: s.cost,
            duration_ms: s.duration_ms,
            state: session_state(s.state) as i32,
            labels: s.labels.into_iter().collect(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_enum_values_and_bad_statuses_are_named() {
        let o = pb::Outcome { session_id: "s".into(), tool: "t".into(), kind: 99, ..Default::default() };
        let err = outcome(o).unwrap_err();
        assert_eq!(err.code(), tonic::Code::InvalidArgument);
        assert!(err.message().contains("`kind` = 99"), "{}", err.message());
        let o = pb::Outcome { session_id: "s".into(), tool: "t".into(), http_status: 700, ..Default::default() };
        assert!(outcome(o).unwrap_err().message().contains("`http_status` = 700"));
    }

    #[test]
    fn the_headers_that_say_which_limit_was_hit_get_through() {
        // A 429 for requests: their limit resets in 1 s; the tokens', not hit, in 40 s.
        let headers = [
            ("x-ratelimit-reset-requests", "1s"),
            ("x-ratelimit-remaining-requests", "0"),
            ("x-ratelimit-reset-tokens", "40s"),
            ("x-ratelimit-remaining-tokens", "12000"),
            ("set-cookie", "session=abc"),
        ];
        let headers = headers.into_iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let o = pb::Outcome { session_id: "s".into(), tool: "t".into(), headers, ..Default::default() };
        let got = outcome(o).unwrap();
        assert_eq!(got.headers.len(), 4);
        let delay = crate::backoff::provider_delay(&got.headers, || 0);
        assert_eq!(delay, Some(crate::backoff::ProviderDelay::After(1000)));
    }

    #[test]
    fn only_retry_headers_are_kept() {
        let mut headers: std::collections::HashMap<String, String> =
            (0..10_000).map(|i| (format!("x-noise-{i}"), "v".to_string())).collect();
        headers.insert("Retry-After".into(), "3".into());
        let o = pb::Outcome { session_id: "s".into(), tool: "t".into(), headers, ..Default::default() };
        let got = outcome(o).unwrap();
        assert_eq!(got.headers.len(), 1);
        assert_eq!(got.headers.get("retry-after"), Some("3"));
    }

    #[test]
    fn every_domain_enum_has_a_wire_value() {
        for c in model::Category::ALL {
            assert_ne!(category(*c), pb::Category::Unspecified);
        }
        for a in model::Action::ALL {
            assert_ne!(action(*a), pb::Action::Unspecified);
        }
        for r in model::Reason::ALL {
            assert_ne!(reason(Some(*r)), pb::Reason::Unspecified);
            // The wire name matches the domain name.
            assert_eq!(reason(Some(*r)).as_str_name().to_ascii_lowercase(), format!("reason_{}", r.as_str()));
        }
    }
}
