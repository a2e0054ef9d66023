//! Session breakers: the thresholds that stop an agent from looping.
//!
//! Pure functions over a session's counters: the engine updates the counters,
//! then asks here whether a breaker trips. Aborts (identical-error loops,
//! step and cost limits) come before escalations (consecutive failures of a
//! tool, too many errors), because an abort ends the run.

use crate::model::{Action, Reason};
use crate::policy::Limits;
use arcstr::ArcStr;

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
        SessionLimits {
            step_limit: limits.step_limit,
            cost_limit: limits.cost_limit,
            error_limit: limits.session_errors,
        }
    }
}

/// The limits StartSession declared, each over its configured default. One left out is
/// read from the policy in force when it is needed, so that a config reload changes it
/// for running sessions too: an operator lowering `cost_limit` in an incident must stop
/// the runs already spending.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DeclaredLimits {
    /// Steps before abort.
    pub step_limit: Option<u32>,
    /// Cost before abort.
    pub cost_limit: Option<f64>,
    /// Errors before escalation.
    pub error_limit: Option<u32>,
}

impl DeclaredLimits {
    /// The limits in force under the configured `defaults`.
    pub fn under(&self, defaults: &Limits) -> SessionLimits {
        SessionLimits {
            step_limit: self.step_limit.or(defaults.step_limit),
            cost_limit: self.cost_limit.or(defaults.cost_limit),
            error_limit: self.error_limit.unwrap_or(defaults.session_errors),
        }
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

/// How many more failures in a row the session breakers let pass before one trips: the
/// retries a retry verdict can still promise. Each counts as the same error again, which a
/// retry of the same call most often gives.
pub fn failures_before_a_trip(c: &Counters, limits: &SessionLimits, policy: &Limits) -> u32 {
    let left = |limit: u32, count: u32| limit.saturating_sub(count).saturating_sub(1);
    left(policy.identical_errors, c.identical_errors)
        .min(left(policy.consecutive_failures, c.consecutive_failures))
        .min(left(limits.error_limit, c.session_errors))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seeds() -> (SessionLimits, Limits) {
        let policy = crate::policy::Policy::default().limits;
        (SessionLimits::from_policy(&policy), policy)
    }

    /// A session's counters after one step, with these failure counts.
    fn c(consecutive: u32, errors: u32, identical: u32) -> Counters {
        Counters {
            steps: 1,
            cost: 0.0,
            session_errors: errors,
            consecutive_failures: consecutive,
            identical_errors: identical,
        }
    }

    #[test]
    fn seed_thresholds() {
        let (limits, policy) = seeds();
        assert_eq!(on_failure(&c(2, 2, 2), &limits, &policy), None);
        assert_eq!(on_failure(&c(3, 3, 3), &limits, &policy), Some((Action::Escalate, Reason::ConsecutiveFailures)));
        assert_eq!(on_failure(&c(1, 10, 1), &limits, &policy), Some((Action::Escalate, Reason::SessionErrors)));
        assert_eq!(on_failure(&c(5, 5, 5), &limits, &policy), Some((Action::Abort, Reason::IdenticalErrors)));
    }

    #[test]
    fn failures_before_a_trip_counts_to_the_nearest_breaker() {
        let (limits, policy) = seeds();
        // Three in a row escalate: after the first failure one more passes, after the second none.
        assert_eq!(failures_before_a_trip(&c(1, 1, 1), &limits, &policy), 1);
        assert_eq!(failures_before_a_trip(&c(2, 2, 2), &limits, &policy), 0);
        // Nine errors in the session: the tenth escalates.
        assert_eq!(failures_before_a_trip(&c(1, 9, 1), &limits, &policy), 0);
        let loose = Limits { consecutive_failures: 10, session_errors: 100, ..policy };
        let wide = SessionLimits { error_limit: 100, ..limits };
        assert_eq!(failures_before_a_trip(&c(1, 1, 4), &wide, &loose), 0, "the fifth identical error aborts");
        assert_eq!(failures_before_a_trip(&c(1, 1, 1), &wide, &loose), 3);
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

// ------------------------------------------------------------------ tool breakers

/// The longest a tool breaker stays open: the most `open_max_ms` may be, and the
/// longest provider wait (Retry-After) a breaker honours. An open period read from
/// the fleet's shared state is held to it too.
pub const LONGEST_OPEN_MS: u64 = 24 * 3_600_000;

/// A tool breaker's settings, validated at load.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolBreakerPolicy {
    /// Consecutive unhealthy failures that open the breaker.
    pub consecutive_failures: u32,
    /// Calls in the count-based window (at most 64).
    pub window: u32,
    /// Calls the window needs before the failure rate counts.
    pub min_calls: u32,
    /// Failure rate (0..1] over the window that opens the breaker.
    pub failure_rate: f64,
    /// The first open period.
    pub open_base_ms: u64,
    /// The longest open period.
    pub open_max_ms: u64,
    /// Probe calls let through when half open.
    pub probes: u32,
}

impl Default for ToolBreakerPolicy {
    /// The config file's defaults (one source of truth).
    fn default() -> Self {
        let c = crate::config::ToolBreakerConfig::default();
        ToolBreakerPolicy {
            consecutive_failures: c.consecutive_failures,
            window: c.window,
            min_calls: c.min_calls,
            failure_rate: c.failure_rate,
            open_base_ms: c.open_base_ms,
            open_max_ms: c.open_max_ms,
            probes: c.probes,
        }
    }
}

/// What an outcome means for its tool's health.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Health {
    /// The call succeeded.
    Success,
    /// The tool is unhealthy (timeout, network, unavailable, internal, rate limited);
    /// the provider's delay, if any, bounds the open period from below.
    Failure {
        /// Provider delay in ms.
        provider_delay_ms: Option<u64>,
    },
    /// The caller's own mistake (validation, format, not found...): says nothing about the tool.
    Neutral,
}

/// An Admit answer from a tool breaker.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Gate {
    /// Closed: go ahead.
    Allowed,
    /// Half open: go ahead as one of the probes.
    Probe,
    /// Open (or half open with every probe out): come back after this many ms.
    Denied {
        /// When to come back.
        retry_after_ms: u64,
    },
}

/// How long a half-open breaker waits for its probes' results before letting new probes through.
const PROBE_TIMEOUT_MS: u64 = 30_000;

/// One tool's breaker: closed, open or half open.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolBreaker {
    state: BreakerState,
    consecutive: u32,
    /// The last `len` calls, newest in bit 0; a set bit is a failure.
    window_bits: u64,
    window_len: u32,
    /// Times opened since last closed: each re-open doubles the open period.
    opens: u32,
    open_until_ms: u64,
    half_open_since_ms: u64,
    probes_out: u32,
    probe_successes: u32,
    /// When an Admit or a Report last named the tool (engine clock ms): when the
    /// breakers are at their cap, the closed one named longest ago makes room.
    last_used_ms: u64,
}

impl Default for ToolBreaker {
    fn default() -> Self {
        ToolBreaker {
            state: BreakerState::Closed,
            consecutive: 0,
            window_bits: 0,
            window_len: 0,
            opens: 0,
            open_until_ms: 0,
            half_open_since_ms: 0,
            probes_out: 0,
            probe_successes: 0,
            last_used_ms: 0,
        }
    }
}

use crate::model::BreakerState;

impl ToolBreaker {
    /// The state, after moving from open to half open if the open period is over.
    pub fn state(&mut self, now_ms: u64, transitions: &mut Vec<BreakerState>) -> BreakerState {
        if self.state == BreakerState::Open && now_ms >= self.open_until_ms {
            self.state = BreakerState::HalfOpen;
            self.half_open_since_ms = now_ms;
            self.probes_out = 0;
            self.probe_successes = 0;
            transitions.push(BreakerState::HalfOpen);
        }
        if self.state == BreakerState::HalfOpen && now_ms.saturating_sub(self.half_open_since_ms) >= PROBE_TIMEOUT_MS {
            // Probes that never reported back: let new ones through.
            self.half_open_since_ms = now_ms;
            self.probes_out = self.probe_successes;
        }
        self.state
    }

    /// True while the breaker keeps its tool fenced off: open, or half open with probes
    /// out, as its next use would find it. One that is closed, whose open period is
    /// over, or whose probes never reported back says nothing a new breaker would not.
    fn fencing(&self, now_ms: u64) -> bool {
        match self.state {
            BreakerState::Closed => false,
            BreakerState::Open => now_ms < self.open_until_ms,
            BreakerState::HalfOpen => now_ms.saturating_sub(self.half_open_since_ms) < PROBE_TIMEOUT_MS,
        }
    }

    /// When an open breaker lets probes through again (engine clock ms).
    pub fn open_until_ms(&self) -> u64 {
        self.open_until_ms
    }

    /// May a call go ahead now?
    pub fn admit(&mut self, now_ms: u64, policy: &ToolBreakerPolicy, transitions: &mut Vec<BreakerState>) -> Gate {
        match self.state(now_ms, transitions) {
            BreakerState::Closed => Gate::Allowed,
            BreakerState::Open => Gate::Denied { retry_after_ms: self.open_until_ms - now_ms },
            BreakerState::HalfOpen if self.probes_out < policy.probes => {
                self.probes_out += 1;
                Gate::Probe
            }
            BreakerState::HalfOpen => Gate::Denied { retry_after_ms: 1000 },
        }
    }

    /// Records an outcome; pushes the states it moved to.
    pub fn record(
        &mut self,
        now_ms: u64,
        health: Health,
        policy: &ToolBreakerPolicy,
        transitions: &mut Vec<BreakerState>,
    ) {
        match (self.state(now_ms, transitions), health) {
            (_, Health::Neutral) | (BreakerState::Open, _) => {}
            (BreakerState::Closed, Health::Success) => {
                self.consecutive = 0;
                self.push_window(false, policy.window);
            }
            (BreakerState::Closed, Health::Failure { provider_delay_ms }) => {
                self.consecutive += 1;
                self.push_window(true, policy.window);
                let failures = self.window_bits.count_ones();
                let rate_trips = self.window_len >= policy.min_calls
                    && f64::from(failures) >= policy.failure_rate * f64::from(self.window_len);
                if self.consecutive >= policy.consecutive_failures || rate_trips {
                    self.open(now_ms, provider_delay_ms, policy, transitions);
                }
            }
            (BreakerState::HalfOpen, Health::Success) => {
                self.probe_successes += 1;
                self.probes_out = self.probes_out.max(self.probe_successes);
                if self.probe_successes >= policy.probes {
                    *self = ToolBreaker { last_used_ms: self.last_used_ms, ..ToolBreaker::default() };
                    transitions.push(BreakerState::Closed);
                }
            }
            (BreakerState::HalfOpen, Health::Failure { provider_delay_ms }) => {
                self.open(now_ms, provider_delay_ms, policy, transitions);
            }
        }
    }

    /// Opens the breaker until `until_ms` because another sidecar says the tool is down
    /// (never shortens an open period already running). It counts as an open here: a
    /// probe that fails after it keeps the tool out twice as long, as after a local open.
    pub fn force_open(&mut self, now_ms: u64, until_ms: u64, transitions: &mut Vec<BreakerState>) {
        if until_ms <= now_ms || (self.state == BreakerState::Open && self.open_until_ms >= until_ms) {
            return;
        }
        if self.state != BreakerState::Open {
            self.opens = self.opens.saturating_add(1);
            transitions.push(BreakerState::Open);
        }
        self.state = BreakerState::Open;
        self.open_until_ms = until_ms;
        self.consecutive = 0;
        self.window_bits = 0;
        self.window_len = 0;
        self.probes_out = 0;
        self.probe_successes = 0;
    }

    fn push_window(&mut self, failure: bool, window: u32) {
        let mask = if window >= 64 { u64::MAX } else { (1u64 << window) - 1 };
        self.window_bits = ((self.window_bits << 1) | u64::from(failure)) & mask;
        self.window_len = (self.window_len + 1).min(window);
    }

    fn open(
        &mut self,
        now_ms: u64,
        provider_delay_ms: Option<u64>,
        policy: &ToolBreakerPolicy,
        transitions: &mut Vec<BreakerState>,
    ) {
        let grown = policy.open_base_ms.saturating_mul(1u64 << self.opens.min(20));
        let period = grown.min(policy.open_max_ms).max(provider_delay_ms.unwrap_or(0));
        self.opens += 1;
        self.state = BreakerState::Open;
        self.open_until_ms = now_ms + period;
        self.consecutive = 0;
        self.window_bits = 0;
        self.window_len = 0;
        self.probes_out = 0;
        self.probe_successes = 0;
        transitions.push(BreakerState::Open);
    }
}

/// The tool breakers of this sidecar, sharded by tool name, at most `max_tools` of
/// them (an equal share in each shard).
#[derive(Debug)]
pub struct ToolBreakers {
    shards: Vec<std::sync::Mutex<foldhash::HashMap<String, ToolBreaker>>>,
    /// Picks a tool's shard, seeded per process: names cannot be chosen to land in
    /// one shard and push a tool's breaker out.
    picker: foldhash::fast::RandomState,
    per_shard: usize,
}

/// A tool breaker's view after an Admit or a Report.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolView {
    /// The state before this call.
    pub before: BreakerState,
    /// The state after it.
    pub after: BreakerState,
    /// When an open breaker lets probes through (engine clock ms).
    pub open_until_ms: u64,
    /// States moved to, in order.
    pub transitions: Vec<BreakerState>,
}

impl ToolBreakers {
    /// Forgets every tool's breaker: tool breakers were turned off, and a breaker left open
    /// would fence its tool off again the moment they are turned back on, however long ago.
    pub fn clear(&self) {
        for shard in &self.shards {
            shard.lock().unwrap_or_else(|p| p.into_inner()).clear();
        }
    }

    /// An empty set tracking at most `max_tools` tools.
    pub fn new(max_tools: usize) -> Self {
        // Shares of at least 64: with a share of one, two tools of one shard would keep
        // dropping each other's breaker and never count five failures in a row.
        let shards = (max_tools / 64).clamp(1, 16);
        ToolBreakers {
            shards: (0..shards).map(|_| std::sync::Mutex::new(foldhash::HashMap::default())).collect(),
            picker: Default::default(),
            per_shard: max_tools / shards,
        }
    }

    /// Runs `f` on `tool`'s breaker, made first when `create` says so. A shard at its
    /// share of the cap makes room by dropping, of the first `EVICTION_SAMPLE` it holds,
    /// the breaker named longest ago that is closed or whose open period (or probes'
    /// wait) is over: refusing instead would leave every tool named after a flood of
    /// distinct names (an id in each) without a breaker until the sidecar restarts. A
    /// breaker still fencing its tool off is never dropped; while a sample holds only
    /// those, no new tool is broken.
    fn with<R>(&self, tool: &str, now_ms: u64, create: bool, f: impl FnOnce(&mut ToolBreaker) -> R) -> Option<R> {
        /// Looked at when making room: a bounded step, under the shard's lock, however many it holds.
        const EVICTION_SAMPLE: usize = 64;
        use std::hash::BuildHasher as _;
        let index = (self.picker.hash_one(tool) % self.shards.len() as u64) as usize;
        let mut shard = self.shards[index].lock().unwrap_or_else(|p| p.into_inner());
        if let Some(b) = shard.get_mut(tool) {
            b.last_used_ms = now_ms;
            return Some(f(b));
        }
        if !create || self.per_shard == 0 {
            return None;
        }
        if shard.len() >= self.per_shard {
            let oldest = shard
                .iter()
                .take(EVICTION_SAMPLE)
                .filter(|(_, b)| !b.fencing(now_ms))
                .min_by_key(|(_, b)| b.last_used_ms)
                .map(|(name, _)| name.clone())?;
            shard.remove(&oldest);
        }
        let b = shard.entry(tool.to_string()).or_default();
        b.last_used_ms = now_ms;
        Some(f(b))
    }

    /// Admit: may `tool` be called now?
    pub fn admit(&self, tool: &str, now_ms: u64, policy: &ToolBreakerPolicy) -> (Gate, ToolView) {
        self.with(tool, now_ms, false, |b| {
            let mut transitions = Vec::new();
            let before = b.state;
            let gate = b.admit(now_ms, policy, &mut transitions);
            (gate, ToolView { before, after: b.state, open_until_ms: b.open_until_ms, transitions })
        })
        .unwrap_or((Gate::Allowed, closed_view()))
    }

    /// How `tool`'s breaker stands now, letting no probe through: what an Admit
    /// refused for its session's sake reports.
    pub fn view(&self, tool: &str, now_ms: u64) -> ToolView {
        self.with(tool, now_ms, false, |b| {
            let mut transitions = Vec::new();
            let before = b.state;
            b.state(now_ms, &mut transitions);
            ToolView { before, after: b.state, open_until_ms: b.open_until_ms, transitions }
        })
        .unwrap_or_else(closed_view)
    }

    /// Opens `tool`'s breaker until `until_ms` (shared state from another sidecar).
    pub fn force_open(&self, tool: &str, now_ms: u64, until_ms: u64) -> Vec<BreakerState> {
        self.with(tool, now_ms, true, |b| {
            let mut transitions = Vec::new();
            b.state(now_ms, &mut transitions);
            b.force_open(now_ms, until_ms, &mut transitions);
            transitions
        })
        .unwrap_or_default()
    }

    /// Records an outcome of `tool`.
    pub fn record(&self, tool: &str, now_ms: u64, health: Health, policy: &ToolBreakerPolicy) -> ToolView {
        // Successes and neutral outcomes of a tool never seen failing need no breaker.
        let create = matches!(health, Health::Failure { .. });
        self.with(tool, now_ms, create, |b| {
            let mut transitions = Vec::new();
            let before = b.state(now_ms, &mut transitions);
            b.record(now_ms, health, policy, &mut transitions);
            ToolView { before, after: b.state, open_until_ms: b.open_until_ms, transitions }
        })
        .unwrap_or_else(closed_view)
    }
}

/// What a verdict suggests while its tool's breaker is open, made once per tool
/// and second and shared by every verdict (and session history) that says it
/// then: a busy tool's open breaker would otherwise have the same sentence
/// written, and kept, once per failure.
#[derive(Debug, Default)]
pub struct OpenNotes(std::sync::Mutex<foldhash::HashMap<Box<str>, Note>>);

/// The seconds a note says and the note.
type Note = (u64, ArcStr);

impl OpenNotes {
    /// The most notes kept. Breakers come and go at the cap, so the tools ever seen open
    /// are not bounded: past this, the notes are dropped all at once and made again as
    /// asked for (a sentence each).
    const MAX: usize = 1024;

    /// The note for `tool`, open for about `seconds` more.
    pub fn get(&self, tool: &str, seconds: u64) -> ArcStr {
        let mut notes = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((said, note)) = notes.get_mut(tool) {
            if *said != seconds {
                *said = seconds;
                *note = open_note(tool, seconds);
            }
            return note.clone();
        }
        if notes.len() >= Self::MAX {
            notes.clear();
        }
        let note = open_note(tool, seconds);
        notes.insert(tool.into(), (seconds, note.clone()));
        note
    }
}

fn open_note(tool: &str, seconds: u64) -> ArcStr {
    ArcStr::from(format!(
        "Tool `{}` is unavailable for about {seconds}s (circuit open): use another tool.",
        crate::compact::cut(tool, 100)
    ))
}

pub fn closed_view() -> ToolView {
    ToolView { before: BreakerState::Closed, after: BreakerState::Closed, open_until_ms: 0, transitions: Vec::new() }
}

#[cfg(test)]
mod tool_tests {
    use super::*;
    use proptest::prelude::*;

    const FAIL: Health = Health::Failure { provider_delay_ms: None };

    fn record(b: &mut ToolBreaker, now: u64, h: Health) -> Vec<BreakerState> {
        let mut t = Vec::new();
        b.record(now, h, &ToolBreakerPolicy::default(), &mut t);
        t
    }

    #[test]
    fn five_consecutive_failures_open_then_probes_close() {
        let p = ToolBreakerPolicy::default();
        let mut b = ToolBreaker::default();
        for i in 0..4 {
            assert!(record(&mut b, i, FAIL).is_empty());
        }
        assert_eq!(record(&mut b, 4, FAIL), vec![BreakerState::Open]);
        let mut t = Vec::new();
        assert_eq!(b.admit(10_000, &p, &mut t), Gate::Denied { retry_after_ms: 30_004 - 10_000 });
        assert_eq!(b.admit(30_004, &p, &mut t), Gate::Probe);
        assert_eq!(t, vec![BreakerState::HalfOpen]);
        assert_eq!(b.admit(30_005, &p, &mut t), Gate::Probe);
        assert_eq!(b.admit(30_006, &p, &mut t), Gate::Denied { retry_after_ms: 1000 }, "only two probes");
        assert!(record(&mut b, 30_010, Health::Success).is_empty());
        assert_eq!(record(&mut b, 30_011, Health::Success), vec![BreakerState::Closed]);
        assert_eq!(b.admit(30_012, &p, &mut t), Gate::Allowed);
    }

    #[test]
    fn open_period_doubles_on_each_reopen_up_to_the_cap_and_respects_retry_after() {
        let p = ToolBreakerPolicy::default();
        let mut b = ToolBreaker::default();
        let mut now = 0;
        for _ in 0..5 {
            record(&mut b, now, FAIL);
        }
        let mut periods = vec![b.open_until_ms() - now];
        for _ in 0..5 {
            now = b.open_until_ms();
            let mut t = Vec::new();
            assert_eq!(b.admit(now, &p, &mut t), Gate::Probe);
            record(&mut b, now, FAIL);
            periods.push(b.open_until_ms() - now);
        }
        assert_eq!(periods, vec![30_000, 60_000, 120_000, 240_000, 300_000, 300_000]);
        let mut b = ToolBreaker::default();
        for _ in 0..4 {
            record(&mut b, 0, FAIL);
        }
        record(&mut b, 0, Health::Failure { provider_delay_ms: Some(90_000) });
        assert_eq!(b.open_until_ms(), 90_000);
    }

    #[test]
    fn an_open_forced_by_the_fleet_counts_so_a_failed_probe_after_it_doubles_the_period() {
        let p = ToolBreakerPolicy::default();
        let mut b = ToolBreaker::default();
        let mut t = Vec::new();
        b.force_open(0, 45_000, &mut t);
        assert_eq!(t, vec![BreakerState::Open]);
        // Extended while open: the same open, not another.
        b.force_open(1_000, 50_000, &mut t);
        assert_eq!(t, vec![BreakerState::Open]);
        assert_eq!(b.admit(50_000, &p, &mut t), Gate::Probe);
        record(&mut b, 50_000, FAIL);
        assert_eq!(b.open_until_ms() - 50_000, 60_000, "the base period doubled once");
    }

    #[test]
    fn failure_rate_over_the_window_opens_and_caller_mistakes_do_not_count() {
        let mut b = ToolBreaker::default();
        for i in 0..100 {
            assert!(record(&mut b, i, Health::Neutral).is_empty());
        }
        // Alternate: never 5 in a row, but 50 % of the window once it has 10 calls.
        let mut opened = false;
        for i in 0..12 {
            let h = if i % 2 == 0 { FAIL } else { Health::Success };
            opened |= record(&mut b, 200 + i, h).contains(&BreakerState::Open);
        }
        assert!(opened);
    }

    #[test]
    fn open_notes_are_shared_while_they_say_the_same_and_bounded_in_number() {
        let notes = OpenNotes::default();
        let a = notes.get("search", 30);
        assert!(ArcStr::ptr_eq(&a, &notes.get("search", 30)));
        assert!(notes.get("search", 29).contains("about 29s"));
        for i in 0..10_000 {
            notes.get(&format!("junk-{i}"), 30);
        }
        assert!(notes.0.lock().unwrap().len() <= OpenNotes::MAX);
    }

    #[test]
    fn at_the_cap_the_closed_breaker_named_longest_ago_makes_room_and_open_ones_stay() {
        let p = ToolBreakerPolicy::default();
        let set = ToolBreakers::new(32);
        let count = |set: &ToolBreakers| set.shards.iter().map(|s| s.lock().unwrap().len()).sum::<usize>();
        // A tool that is down opens its breaker.
        for t in 0..5 {
            set.record("down", t, FAIL, &p);
        }
        assert!(matches!(set.admit("down", 10, &p).0, Gate::Denied { .. }));
        // A flood of distinct names (an id in each), each failing once, fills every shard.
        for i in 0..10_000 {
            set.record(&format!("junk-{i}"), 100 + i, FAIL, &p);
        }
        assert!(count(&set) <= 32, "{} breakers", count(&set));
        // A tool named afterwards still gets a breaker: it used to be left unbroken until a restart.
        for t in 0..5 {
            set.record("search", 20_000 + t, FAIL, &p);
        }
        assert!(matches!(set.admit("search", 20_010, &p).0, Gate::Denied { .. }), "a new tool is still broken");
        assert!(matches!(set.admit("down", 20_010, &p).0, Gate::Denied { .. }), "an open breaker is never dropped");
        assert!(count(&set) <= 32);

        // A flood whose names each fail five times leaves breakers open: none is dropped while
        // it fences its tool off, and each may be once its period is over.
        let set = ToolBreakers::new(64);
        let mut now = 0;
        for i in 0..1000 {
            for _ in 0..5 {
                set.record(&format!("junk-{i}"), now, FAIL, &p);
            }
            now += 1;
        }
        assert!(count(&set) <= 64);
        for t in 0..5 {
            set.record("search", now + t, FAIL, &p);
        }
        assert_eq!(set.admit("search", now + 10, &p).0, Gate::Allowed, "every breaker still fences its tool off");
        now += 30_000; // the junk's open periods are over
        for t in 0..5 {
            set.record("search", now + t, FAIL, &p);
        }
        assert!(matches!(set.admit("search", now + 10, &p).0, Gate::Denied { .. }), "a stale open breaker made room");
        // No cap, no breakers.
        let none = ToolBreakers::new(0);
        for t in 0..5 {
            none.record("search", t, FAIL, &p);
        }
        assert_eq!(none.admit("search", 10, &p).0, Gate::Allowed);
    }

    proptest! {
        #[test]
        fn never_more_probes_than_allowed(events in prop::collection::vec((0u8..3, 0u64..90), 1..300), probes in 1u32..5) {
            let p = ToolBreakerPolicy { probes, open_base_ms: 1000, ..Default::default() };
            let mut b = ToolBreaker::default();
            let mut now = 0;
            let mut t = Vec::new();
            let mut probes_since_half_open = 0;
            for (kind, dt) in events {
                now += dt; // under PROBE_TIMEOUT_MS in total, so probes are never re-armed
                let before = b.state(now, &mut t);
                if before != BreakerState::HalfOpen { probes_since_half_open = 0; }
                match kind {
                    0 => if b.admit(now, &p, &mut t) == Gate::Probe { probes_since_half_open += 1 },
                    1 => b.record(now, Health::Success, &p, &mut t),
                    _ => b.record(now, FAIL, &p, &mut t),
                }
                prop_assert!(probes_since_half_open <= probes);
            }
        }
    }
}
