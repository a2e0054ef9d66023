//! Retry budgets: a token bucket per tool across sessions, in the manner of
//! gRPC retry throttling, so a fleet does not multiply an outage by retrying.
//! A retryable failure costs a token, a success refills a fraction of one,
//! and retries stop while the bucket is at or below half.

use foldhash::HashMap;
use std::sync::Mutex;

/// A budget's settings, validated at load.
#[derive(Clone, Debug, PartialEq)]
pub struct BudgetPolicy {
    /// Tokens in a full bucket.
    pub max_tokens: f64,
    /// Tokens a success puts back.
    pub token_ratio: f64,
}

impl Default for BudgetPolicy {
    /// The config file's defaults (one source of truth).
    fn default() -> Self {
        let c = crate::config::RetryBudgetConfig::default();
        BudgetPolicy { max_tokens: c.max_tokens, token_ratio: c.token_ratio }
    }
}

/// The buckets, one per tool, at most `max_tools` of them.
#[derive(Debug)]
pub struct RetryBudgets {
    buckets: Mutex<HashMap<String, f64>>,
    max_tools: usize,
}

impl RetryBudgets {
    /// No buckets yet: every tool starts full.
    pub fn new(max_tools: usize) -> Self {
        RetryBudgets { buckets: Mutex::new(HashMap::default()), max_tools }
    }

    /// A retryable failure of `tool`: takes a token; true while retries are still allowed.
    pub fn on_failure(&self, tool: &str, policy: &BudgetPolicy) -> bool {
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        if !buckets.contains_key(tool) {
            if buckets.len() >= self.max_tools {
                return true;
            }
            // The tool's name is copied only when its bucket is made.
            buckets.insert(tool.to_string(), policy.max_tokens);
        }
        let tokens = buckets.get_mut(tool).expect("inserted above");
        *tokens = (*tokens - 1.0).max(0.0);
        *tokens > policy.max_tokens / 2.0
    }

    /// A success of `tool`: refills a fraction of a token.
    pub fn on_success(&self, tool: &str, policy: &BudgetPolicy) {
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(tokens) = buckets.get_mut(tool) {
            *tokens = (*tokens + policy.token_ratio).min(policy.max_tokens);
            if *tokens >= policy.max_tokens {
                // Full again: forget it, so the map only holds tools with a recent failure.
                buckets.remove(tool);
            }
        }
    }

    /// Sets `tool`'s tokens (the fleet's count, from shared state).
    pub fn set(&self, tool: &str, tokens: f64, policy: &BudgetPolicy) {
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        let tokens = tokens.clamp(0.0, policy.max_tokens);
        if tokens >= policy.max_tokens {
            buckets.remove(tool);
        } else if buckets.contains_key(tool) || buckets.len() < self.max_tools {
            buckets.insert(tool.to_string(), tokens);
        }
    }

    /// Tokens left for `tool`.
    pub fn tokens(&self, tool: &str, policy: &BudgetPolicy) -> f64 {
        self.buckets.lock().unwrap_or_else(|p| p.into_inner()).get(tool).copied().unwrap_or(policy.max_tokens)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn retries_stop_at_half_and_successes_refill() {
        let p = BudgetPolicy { max_tokens: 10.0, token_ratio: 0.5 };
        let b = RetryBudgets::new(10);
        let allowed: Vec<bool> = (0..6).map(|_| b.on_failure("t", &p)).collect();
        assert_eq!(allowed, [true, true, true, true, false, false]);
        for _ in 0..6 {
            b.on_success("t", &p);
        }
        assert!(b.on_failure("t", &p), "refilled above half");
        assert!(b.on_failure("other", &p), "budgets are per tool");
    }

    proptest! {
        #[test]
        fn the_budget_is_never_negative_nor_above_max(events in prop::collection::vec(any::<bool>(), 0..500), max in 1.0f64..100.0, ratio in 0.0f64..2.0) {
            let p = BudgetPolicy { max_tokens: max, token_ratio: ratio };
            let b = RetryBudgets::new(10);
            for success in events {
                if success { b.on_success("t", &p) } else { b.on_failure("t", &p); }
                let t = b.tokens("t", &p);
                prop_assert!((0.0..=max).contains(&t), "{}", t);
            }
        }
    }
}
