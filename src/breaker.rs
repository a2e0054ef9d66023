//! Session breakers: the thresholds that stop an agent from looping.
//!
//! Pure functions over a session's counters: the engine updates the counters,
//! then asks here whether a breaker trips. Aborts (identical-error loops,
//! step and cost limits) come before escalations (consecutive failures of a
//! tool, too many errors), because an abort ends the run.

use crate::model::{Action, Reason};
use crate::policy::Limits;

/// A session's counters after the current outcome.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Counters {
    /// Outcomes reported, this one included.
    pub steps: u32,
    /// Cost reported, this one included.
    pub cost: f64,
    /// Errors in the session.
    pub session_errors: u32,
    /// Consecutive failures of this outcome's tool.
    pub consecutive_failures: u32,
    /// Identical errors in a row (same tool and fingerprint).
    pub identical_errors: u32,
}

/// The limits in force for one session (StartSession may set its own).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SessionLimits {
    /// Steps before abort.
    pub step_limit: Option<u32>,
    /// Cost before abort.
    pub cost_limit: Option<f64>,
    /// Errors before escalation.
    pub error_limit: u32,
}

impl SessionLimits {
    /// The configured defaults.
    pub fn from_policy(limits: &Limits) -> Self {
        SessionLimits { step_limit: limits.step_limit, cost_limit: limits.cost_limit, error_limit: limits.session_errors }
    }
}

/// Whether a step or cost limit is reached (checked for successes and failures alike).
pub fn limit_reached(c: &Counters, limits: &SessionLimits) -> Option<Reason> {
    if limits.step_limit.is_some_and(|max| c.steps >= max) {
        return Some(Reason::StepLimit);
    }
    if limits.cost_limit.is_some_and(|max| c.cost >= max) {
        return Some(Reason::CostLimit);
    }
    None
}

/// The breaker that trips on a failure, if any, with the action it asks for.
pub fn on_failure(c: &Counters, limits: &SessionLimits, policy: &Limits) -> Option<(Action, Reason)> {
    if c.identical_errors >= policy.identical_errors {
        return Some((Action::Abort, Reason::IdenticalErrors));
    }
    if let Some(reason) = limit_reached(c, limits) {
        return Some((Action::Abort, reason));
    }
    if c.consecutive_failures >= policy.consecutive_failures {
        return Some((Action::Escalate, Reason::ConsecutiveFailures));
    }
    if c.session_errors >= limits.error_limit {
        return Some((Action::Escalate, Reason::SessionErrors));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seeds() -> (SessionLimits, Limits) {
        let policy = crate::policy::Policy::default().limits;
        (SessionLimits::from_policy(&policy), policy)
    }

    #[test]
    fn seed_thresholds() {
        let (limits, policy) = seeds();
        let c = |consecutive, errors, identical| Counters {
            steps: 1,
            cost: 0.0,
            session_errors: errors,
            consecutive_failures: consecutive,
            identical_errors: identical,
        };
        assert_eq!(on_failure(&c(2, 2, 2), &limits, &policy), None);
        assert_eq!(on_failure(&c(3, 3, 3), &limits, &policy), Some((Action::Escalate, Reason::ConsecutiveFailures)));
        assert_eq!(on_failure(&c(1, 10, 1), &limits, &policy), Some((Action::Escalate, Reason::SessionErrors)));
        assert_eq!(on_failure(&c(5, 5, 5), &limits, &policy), Some((Action::Abort, Reason::IdenticalErrors)));
    }

    #[test]
    fn limits_abort_before_escalation() {
        let (_, policy) = seeds();
        let limits = SessionLimits { step_limit: Some(4), cost_limit: Some(1.0), error_limit: 10 };
        let c = Counters { steps: 4, consecutive_failures: 3, ..Default::default() };
        assert_eq!(on_failure(&c, &limits, &policy), Some((Action::Abort, Reason::StepLimit)));
        let c = Counters { steps: 1, cost: 1.5, ..Default::default() };
        assert_eq!(limit_reached(&c, &limits), Some(Reason::CostLimit));
        assert_eq!(limit_reached(&Counters { steps: 3, cost: 0.5, ..Default::default() }, &limits), None);
    }
}
