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
            // Room for the bucket this failure leaves.
            if !self.make_room(&mut buckets, (policy.max_tokens - 1.0).max(0.0)) {
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
        } else if buckets.contains_key(tool) || self.make_room(&mut buckets, tokens) {
            buckets.insert(tool.to_string(), tokens);
        }
    }

    /// Room for a bucket of `tokens`: at the cap, the fullest of the first
    /// `EVICTION_SAMPLE` buckets goes if it is at least as full (it says least: a missing
    /// bucket is a full one). Refusing new tools instead would leave every tool named
    /// after a flood of distinct names (an id in each) without a budget until the sidecar
    /// restarts. False when there is no room.
    fn make_room(&self, buckets: &mut HashMap<String, f64>, tokens: f64) -> bool {
        /// Looked at when making room: a bounded step under the lock, however many buckets there are.
        const EVICTION_SAMPLE: usize = 64;
        if buckets.len() < self.max_tools {
            return true;
        }
        let fullest =
            buckets.iter().take(EVICTION_SAMPLE).max_by(|a, b| a.1.total_cmp(b.1)).filter(|(_, t)| **t >= tokens);
        match fullest.map(|(tool, _)| tool.clone()) {
            Some(tool) => buckets.remove(&tool).is_some(),
            None => false,
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

    #[test]
    fn at_the_cap_the_fullest_bucket_makes_room() {
        let p = BudgetPolicy { max_tokens: 10.0, token_ratio: 0.5 };
        let b = RetryBudgets::new(4);
        // A tool in an outage spends its budget.
        while b.on_failure("down", &p) {}
        // A flood of distinct names (an id in each), each failing once.
        for i in 0..1000 {
            b.on_failure(&format!("junk-{i}"), &p);
        }
        assert!(b.buckets.lock().unwrap().len() <= 4);
        assert!(!b.on_failure("down", &p), "the spent budget was kept");
        // A tool named afterwards still has a budget: it used to retry without end.
        let allowed = (0..30).filter(|_| b.on_failure("api2", &p)).count();
        assert_eq!(allowed, 4);
        // The fleet's count for another tool takes a fuller bucket's place, not an emptier one's.
        b.set("fleet", 3.0, &p);
        assert_eq!(b.tokens("fleet", &p), 3.0);
        assert!(RetryBudgets::new(0).on_failure("t", &p), "no cap, no budgets");
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
