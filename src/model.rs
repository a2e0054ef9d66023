//! Domain types: the outcome an agent reports and the verdict Rebound answers.
//!
//! Plain Rust, no protobuf: the gRPC edge converts in `convert`. Every enum has
//! an `as_str()` that is also its name in config files, replay JSON and metric
//! labels, so the three never drift apart.

use arcstr::ArcStr;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Declares a closed enum with snake_case names shared by serde, `as_str` and `parse`.
macro_rules! named_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum $name { $($(#[$vmeta])* $variant),+ }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The lowercase name, safe as a Prometheus label value.
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }

            /// Parses the lowercase name.
            pub fn parse(text: &str) -> Option<Self> {
                match text { $($text => Some($name::$variant),)+ _ => None }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

named_enum!(
    /// What kind of outcome a failure was, as the agent saw it.
    OutcomeKind {
        /// The tool ran and failed (also the meaning of "not set").
        ToolError => "tool_error",
        /// The LLM answered without the tool call it had to make.
        NoToolCall => "no_tool_call",
        /// The LLM's tool call was malformed.
        InvalidToolCall => "invalid_tool_call",
        /// The LLM named a tool that does not exist.
        UnknownTool => "unknown_tool",
        /// The call did not finish in time.
        Timeout => "timeout",
        /// The call was cancelled.
        Cancelled => "cancelled",
        /// The LLM provider failed.
        ProviderError => "provider_error",
    }
);

named_enum!(
    /// The kind of failure, as DESIGN.md's table names them.
    Category {
        /// The call did not finish in time.
        Timeout => "timeout",
        /// The provider asked us to slow down.
        RateLimited => "rate_limited",
        /// Connection refused or reset, DNS, TLS.
        Network => "network",
        /// 502/503/504, overloaded.
        Unavailable => "unavailable",
        /// 500, panic, unexpected exception.
        Internal => "internal",
        /// Credentials missing, invalid or expired.
        Auth => "auth",
        /// Authenticated but not allowed.
        PermissionDenied => "permission_denied",
        /// Billing, insufficient quota, disk full.
        QuotaExceeded => "quota_exceeded",
        /// The resource does not exist.
        NotFound => "not_found",
        /// The arguments were wrong.
        Validation => "validation",
        /// Already exists, precondition failed.
        Conflict => "conflict",
        /// LLM output unparsable.
        Format => "format",
        /// The LLM named a tool that does not exist.
        UnknownTool => "unknown_tool",
        /// The input was too long for the model.
        ContextLength => "context_length",
        /// A safety or policy refusal.
        ContentFilter => "content_filter",
        /// User interrupt, context cancelled.
        Cancelled => "cancelled",
        /// Nothing recognised.
        Unknown => "unknown",
    }
);

named_enum!(
    /// What the agent should do next.
    Action {
        /// Go on: the call succeeded.
        Continue => "continue",
        /// Call the same tool again after the delay.
        Retry => "retry",
        /// Give the snippet to the LLM and let it choose another approach.
        Recover => "recover",
        /// Change the plan.
        Replan => "replan",
        /// Choose another tool.
        Reclassify => "reclassify",
        /// Stop and ask a human.
        Escalate => "escalate",
        /// End the run.
        Abort => "abort",
    }
);

named_enum!(
    /// A circuit breaker's state.
    BreakerState {
        /// Calls go through.
        Closed => "closed",
        /// Calls are stopped.
        Open => "open",
        /// A few probe calls go through.
        HalfOpen => "half_open",
    }
);

named_enum!(
    /// A session's state.
    SessionState {
        /// Runs normally.
        Active => "active",
        /// A session breaker asked for a human; reports are still judged.
        Escalated => "escalated",
        /// Aborted; every further report is answered with abort.
        Stopped => "stopped",
    }
);

named_enum!(
    /// Why a verdict departs from a plain retry or continue, or why Admit said no.
    Reason {
        /// The category's policy says so.
        CategoryPolicy => "category_policy",
        /// The category's retries are used up.
        RetriesExhausted => "retries_exhausted",
        /// Too many consecutive failures of one tool.
        ConsecutiveFailures => "consecutive_failures",
        /// Too many errors in the session.
        SessionErrors => "session_errors",
        /// The same error again and again.
        IdenticalErrors => "identical_errors",
        /// The step limit is reached.
        StepLimit => "step_limit",
        /// The cost limit is reached.
        CostLimit => "cost_limit",
        /// The session was stopped earlier.
        SessionStopped => "session_stopped",
        /// The tool's breaker is open.
        ToolBreakerOpen => "tool_breaker_open",
        /// The retry budget is spent.
        RetryBudgetExhausted => "retry_budget_exhausted",
        /// The provider asked for a delay past the maximum.
        DelayTooLong => "delay_too_long",
        /// The server asked not to retry (`x-should-retry: false`, or gRPC pushback below zero).
        ServerPushback => "server_pushback",
    }
);

impl Category {
    /// True for failures that say the tool itself is unwell (the tool breaker counts
    /// these), false for the caller's own mistakes and for policy refusals.
    pub fn is_unhealthy(self) -> bool {
        matches!(
            self,
            Category::Timeout | Category::Network | Category::Unavailable | Category::Internal | Category::RateLimited
        )
    }
}

/// Response headers with case-insensitive lookup (keys are stored lowercased).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Headers(BTreeMap<String, String>);

impl Headers {
    /// Builds the map, lowercasing keys. Of two names that differ only in case (or
    /// spaces around them), the greater value (in byte order) is kept: a protobuf map
    /// arrives in no fixed order, and the same outcome must get the same verdict every
    /// time, from the server and from `replay` alike.
    pub fn new<I, K, V>(pairs: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<str>,
        V: Into<String>,
    {
        let mut map = BTreeMap::new();
        for (k, v) in pairs {
            let v = v.into();
            match map.entry(k.as_ref().trim().to_ascii_lowercase()) {
                std::collections::btree_map::Entry::Vacant(e) => {
                    e.insert(v);
                }
                std::collections::btree_map::Entry::Occupied(mut e) => {
                    if v > *e.get() {
                        e.insert(v);
                    }
                }
            }
        }
        Headers(map)
    }

    /// The value of a header, by any case of its name.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.get(&name.to_ascii_lowercase()).map(|v| v.trim())
    }

    /// How many headers there are.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The result of one tool call, success or failure.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Outcome {
    /// The agent run.
    pub session_id: String,
    /// Idempotency key; empty means none.
    pub call_id: String,
    /// The tool called.
    pub tool: String,
    /// True on success.
    pub ok: bool,
    /// What kind of failure; `None` when not given.
    pub kind: Option<OutcomeKind>,
    /// The error message.
    pub message: String,
    /// The exception type, dotted or plain.
    pub exception_type: String,
    /// HTTP status, when there was one.
    pub http_status: Option<u16>,
    /// gRPC status code, when there was one.
    pub grpc_code: Option<i32>,
    /// Process exit code, when there was one.
    pub exit_code: Option<i32>,
    /// errno name or provider code.
    pub code: String,
    /// Response headers.
    pub headers: Headers,
    /// Full output or stack trace.
    pub detail: String,
    /// 1 for the first call, 2 for the first retry; 0 lets Rebound count.
    pub attempt: u32,
    /// How long the call took.
    pub duration_ms: u64,
    /// What the call cost.
    pub cost: f64,
}

impl Outcome {
    /// The bytes of the texts a failure's analysis reads: the message, the detail, the
    /// exception type, the code and the tool.
    pub fn text_bytes(&self) -> usize {
        [&self.message, &self.detail, &self.exception_type, &self.code, &self.tool].iter().map(|t| t.len()).sum()
    }
}

/// What kind of failure it was and why Rebound thinks so.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Classification {
    /// The category.
    pub category: Category,
    /// Whether the same call may succeed if retried.
    pub retryable: bool,
    /// The id of the rule that decided (shared with the rule: no copy per outcome).
    pub rule: ArcStr,
    /// What to do about it (shared with the rule or category table, or made for this outcome).
    pub suggestion: ArcStr,
    /// An action the rule asks for instead of the category's default.
    #[serde(skip)]
    pub action: Option<Action>,
}

/// When to retry.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RetryPlan {
    /// Wait before the retry.
    pub delay_ms: u64,
    /// Which retry this would be: 1 for the first.
    pub attempt: u32,
    /// Retries left after this one.
    pub attempts_left: u32,
    /// True when the delay came from the provider.
    pub provider_delay: bool,
}

/// The breakers' view after an outcome.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BreakerStatus {
    /// The tool's breaker across sessions.
    pub tool_state: BreakerState,
    /// The session's state.
    pub session_state: SessionState,
    /// Why the action differs from a plain retry or continue.
    pub reason: Option<Reason>,
    /// Consecutive failures of this tool in the session.
    pub consecutive_failures: u32,
    /// Errors in the session.
    pub session_errors: u32,
    /// Identical errors in a row.
    pub identical_errors: u32,
    /// Outcomes in the session.
    pub steps: u32,
    /// Cost in the session.
    pub cost: f64,
}

/// One error from a session's history, already redacted and cut.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ErrorRecord {
    /// The tool that failed.
    pub tool: ArcStr,
    /// Its category.
    pub category: Category,
    /// The message, redacted and cut (shared with the session's history).
    pub message: crate::shapes::KeptMessage,
    /// How many times in a row.
    pub count: u32,
    /// Milliseconds since the session started.
    pub at_ms: u64,
    /// The action answered.
    pub action: Action,
}

/// A report a human can read when a session escalates.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EscalationReport {
    /// Why, in a sentence.
    pub summary: String,
    /// Recent errors, oldest first.
    pub history: Vec<ErrorRecord>,
    /// Errors by category, by name.
    pub errors_by_category: Vec<(Category, u32)>,
    /// Retries asked for.
    pub retries: u32,
    /// How long the session has run.
    pub session_duration_ms: u64,
    /// The whole report as text.
    pub text: String,
    /// The labels the session's StartSession declared.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

/// The answer to one outcome.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Verdict {
    /// The outcome's call_id.
    pub call_id: String,
    /// The outcome's session_id.
    pub session_id: String,
    /// The tool reported.
    pub tool: String,
    /// What to do.
    pub action: Action,
    /// The classification; `None` for a success.
    pub classification: Option<Classification>,
    /// The retry plan; `None` unless the action is retry.
    pub retry: Option<RetryPlan>,
    /// Text for the LLM; empty on success.
    pub snippet: String,
    /// The breakers' view.
    pub breaker: BreakerStatus,
    /// The report, for an escalation (boxed: most verdicts have none, and sessions remember verdicts).
    pub escalation: Option<Box<EscalationReport>>,
    /// False in shadow mode.
    pub enforced: bool,
    /// In shadow mode, what the breakers would have answered.
    pub shadow_action: Option<Action>,
    /// In shadow mode, why.
    pub shadow_reason: Option<Reason>,
    /// True when returned again for a repeated call_id.
    pub replayed: bool,
    /// The snippet's length in tokens, when a snippet budget is set.
    pub snippet_tokens: u32,
}

/// What happened in a session, for EndSession.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SessionSummary {
    /// Outcomes reported.
    pub calls: u32,
    /// Failures reported.
    pub errors: u32,
    /// Failures by category.
    pub errors_by_category: BTreeMap<String, u32>,
    /// Retries asked for.
    pub retries: u32,
    /// Escalations answered.
    pub escalations: u32,
    /// Cost reported.
    pub cost: f64,
    /// How long the session ran.
    pub duration_ms: u64,
    /// The state it ended in.
    pub state: SessionState,
    /// The labels its StartSession declared.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_through_parse() {
        for c in Category::ALL {
            assert_eq!(Category::parse(c.as_str()), Some(*c));
        }
        for a in Action::ALL {
            assert_eq!(Action::parse(a.as_str()), Some(*a));
        }
        assert_eq!(OutcomeKind::parse("unknown_tool"), Some(OutcomeKind::UnknownTool));
        assert_eq!(Category::parse("nope"), None);
    }

    #[test]
    fn headers_are_case_insensitive() {
        let h = Headers::new([("Retry-After", " 7 ")]);
        assert_eq!(h.get("retry-after"), Some("7"));
        assert_eq!(h.get("RETRY-AFTER"), Some("7"));
        assert_eq!(h.get("x"), None);
    }

    #[test]
    fn names_that_differ_only_in_case_give_the_same_value_in_any_order() {
        // A protobuf map's order changes from request to request: the verdict must not.
        let pairs = [("Retry-After", "120"), ("retry-after", "1"), (" RETRY-AFTER ", "30")];
        let mut orders = vec![pairs.to_vec()];
        orders.push(pairs.iter().rev().copied().collect());
        orders.push(vec![pairs[1], pairs[0], pairs[2]]);
        for order in orders {
            assert_eq!(Headers::new(order.clone()).get("retry-after"), Some("30"), "{order:?}");
        }
    }
}
