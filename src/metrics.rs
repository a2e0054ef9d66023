//! Prometheus metrics: every name in one place, handles stored so hot paths
//! do not register anything, and the tool label capped so a flood of tool
//! names cannot blow up the series count. Raw error text is never a label.

use crate::model::{Action, Category, Reason};
use metrics::{Counter, Gauge, Histogram};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
// Hot-path maps hash with foldhash (seeded per process): std's SipHash cost more than the lookups.
use arcstr::ArcStr;
use foldhash::{HashMap, HashMapExt, HashSet, HashSetExt};
use std::sync::{Mutex, OnceLock, RwLock};

/// Outcomes by tool, category and action.
pub const OUTCOMES_TOTAL: &str = "rebound_outcomes_total";
/// Retry delays given, in seconds.
pub const RETRY_DELAY_SECONDS: &str = "rebound_retry_delay_seconds";
/// Escalations by reason.
pub const ESCALATIONS_TOTAL: &str = "rebound_escalations_total";
/// Sessions held.
pub const SESSIONS_ACTIVE: &str = "rebound_sessions_active";
/// Gauge: the bytes the sessions hold, as the store estimates them for `sessions.max_bytes`.
pub const SESSIONS_BYTES: &str = "rebound_sessions_bytes";
/// Sessions dropped without EndSession, by reason (idle, capacity).
pub const SESSIONS_EVICTED_TOTAL: &str = "rebound_sessions_evicted_total";
/// RPC durations by method, in seconds.
pub const RPC_DURATION_SECONDS: &str = "rebound_rpc_duration_seconds";
/// Failures analysed, by whether the analysis was taken from the engine's table of recent
/// failures (`reused`) or made afresh (`new`): see `analysis`.
pub const FAILURE_ANALYSES_TOTAL: &str = "rebound_failure_analyses_total";
/// Texts the rules' lazy DFA gave up on, searched by the slower PikeVM instead: see `message_patterns`.
pub const MESSAGE_PATTERN_FALLBACKS_TOTAL: &str = "rebound_message_pattern_fallbacks_total";
/// Snippet sizes in bytes.
pub const SNIPPET_BYTES: &str = "rebound_snippet_bytes";
/// Open Observe streams.
pub const STREAMS_ACTIVE: &str = "rebound_streams_active";
/// Config reloads by result (ok, error).
pub const CONFIG_RELOADS_TOTAL: &str = "rebound_config_reloads_total";
/// 1 while the config in use is the file's (at start, and after a reload that loaded), 0 after a
/// reload that failed (or a file that could not be read), until one loads: the old policy runs on
/// meanwhile.
pub const CONFIG_LAST_RELOAD_SUCCESSFUL: &str = "rebound_config_last_reload_successful";

/// Tool breaker state by tool: 0 closed, 1 open, 2 half_open.
pub const BREAKER_STATE: &str = "rebound_breaker_state";
/// Tool breaker transitions by tool and the state moved to.
pub const BREAKER_TRANSITIONS_TOTAL: &str = "rebound_breaker_transitions_total";
/// Retryable failures refused a retry by the budget, by tool.
pub const RETRY_BUDGET_EXHAUSTED_TOTAL: &str = "rebound_retry_budget_exhausted_total";
/// Admit answers by tool and decision (allowed, probe, denied, shadow_denied).
pub const ADMIT_TOTAL: &str = "rebound_admit_total";
/// In shadow mode, verdicts that enforcing would have changed, by the action and reason it would have given.
pub const SHADOW_VERDICTS_TOTAL: &str = "rebound_shadow_verdicts_total";

/// 1, labelled with the version: which sidecars of a fleet run which build.
pub const BUILD_INFO: &str = "rebound_build_info";

/// Failed exchanges with the shared state backend (Redis).
pub const STATE_BACKEND_ERRORS_TOTAL: &str = "rebound_state_backend_errors_total";
/// 1 while exchanges with the shared state backend succeed, else 0 (absent without one).
pub const STATE_BACKEND_UP: &str = "rebound_state_backend_up";

/// The value the tool label takes past the cap.
pub const OTHER_TOOL: &str = "_other";

/// How often histogram samples are drained when nobody scrapes (the exporter's default is 5 s:
/// at 100,000 outcomes a second that holds ~30 MiB of samples between two drains). Drained
/// every second, a loaded sidecar held ~7 MiB of sample blocks at a time among its sessions'
/// memory, and the holes they left made RSS at rest swing by up to 20 % from one reading to the
/// next (`cargo bench --bench sidecar_memory`: 33-40 MiB at capacity 10,000); every 100 ms, the
/// blocks are reused before the heap grows around them, and the readings level off (33 MiB).
/// (Measured with glibc's malloc, before the sidecar moved to jemalloc: see `memory`.)
const UPKEEP_PERIOD: std::time::Duration = std::time::Duration::from_millis(100);

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// Installs the global Prometheus recorder once (later calls return the same handle).
pub fn install() -> PrometheusHandle {
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new()
                .set_buckets_for_metric(
                    Matcher::Full(RETRY_DELAY_SECONDS.into()),
                    &[0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 60.0, 300.0],
                )
                .and_then(|b| {
                    b.set_buckets_for_metric(
                        Matcher::Full(RPC_DURATION_SECONDS.into()),
                        &[0.000_025, 0.000_05, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.25, 1.0],
                    )
                })
                .and_then(|b| {
                    b.set_buckets_for_metric(
                        Matcher::Full(SNIPPET_BYTES.into()),
                        &[64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0, 4096.0, 16384.0],
                    )
                })
                .expect("bucket lists are non-empty")
                .build_recorder();
            let handle = recorder.handle();
            // A built recorder keeps every histogram sample until something drains it: a scrape, or
            // upkeep. A sidecar nobody scrapes would grow by each sample (about 25 bytes an outcome),
            // so drain often (the allocator gives freed pages back on its own: see `memory`).
            // It also exports the patterns' fallback count.
            let upkeep = handle.clone();
            let _ = std::thread::Builder::new().name("metrics-upkeep".into()).spawn(move || loop {
                std::thread::sleep(UPKEEP_PERIOD);
                export_pattern_fallbacks();
                upkeep.run_upkeep();
            });
            // Another recorder may already be set (a host embedding the library); then ours only renders.
            let _ = metrics::set_global_recorder(recorder);
            describe();
            metrics::gauge!(BUILD_INFO, "version" => env!("CARGO_PKG_VERSION")).set(1.0);
            export_pattern_fallbacks();
            handle
        })
        .clone()
}

/// Copies the patterns' fallback count, kept where they run (`message_patterns`), to its counter.
fn export_pattern_fallbacks() {
    metrics::counter!(MESSAGE_PATTERN_FALLBACKS_TOTAL).absolute(crate::message_patterns::fallbacks());
}

fn describe() {
    metrics::describe_counter!(OUTCOMES_TOTAL, "Outcomes reported, by tool, category and action.");
    metrics::describe_histogram!(RETRY_DELAY_SECONDS, metrics::Unit::Seconds, "Retry delays given.");
    metrics::describe_counter!(ESCALATIONS_TOTAL, "Escalations answered, by reason.");
    metrics::describe_gauge!(SESSIONS_ACTIVE, "Sessions held in memory.");
    metrics::describe_gauge!(
        SESSIONS_BYTES,
        metrics::Unit::Bytes,
        "Bytes the sessions hold, as estimated for sessions.max_bytes (resident memory runs up to a fifth above)."
    );
    metrics::describe_counter!(SESSIONS_EVICTED_TOTAL, "Sessions dropped without EndSession, by reason.");
    metrics::describe_histogram!(RPC_DURATION_SECONDS, metrics::Unit::Seconds, "RPC handling time, by method.");
    metrics::describe_histogram!(SNIPPET_BYTES, metrics::Unit::Bytes, "Sizes of the snippets returned.");
    metrics::describe_counter!(
        FAILURE_ANALYSES_TOTAL,
        "Failures analysed, by result: reused from the table of recent failures, or new."
    );
    metrics::describe_counter!(
        MESSAGE_PATTERN_FALLBACKS_TOTAL,
        "Texts the rules' lazy DFA gave up on (its cache too small for them, or a Unicode word boundary), searched by a PikeVM."
    );
    metrics::describe_gauge!(STREAMS_ACTIVE, "Open Observe streams.");
    metrics::describe_counter!(CONFIG_RELOADS_TOTAL, "Config reloads, by result.");
    metrics::describe_gauge!(
        CONFIG_LAST_RELOAD_SUCCESSFUL,
        "1 when the config loaded at start or by the last reload, 0 when the last reload failed."
    );
    metrics::describe_gauge!(BREAKER_STATE, "Tool breaker state: 0 closed, 1 open, 2 half_open.");
    metrics::describe_counter!(BREAKER_TRANSITIONS_TOTAL, "Tool breaker transitions, by tool and new state.");
    metrics::describe_counter!(RETRY_BUDGET_EXHAUSTED_TOTAL, "Retries refused by the retry budget, by tool.");
    metrics::describe_counter!(ADMIT_TOTAL, "Admit answers, by tool and decision.");
    metrics::describe_counter!(
        SHADOW_VERDICTS_TOTAL,
        "In shadow mode, verdicts that enforcing would have changed, by the action and reason it would have given."
    );
    metrics::describe_gauge!(BUILD_INFO, "1, labelled with the sidecar's version.");
    metrics::describe_counter!(STATE_BACKEND_ERRORS_TOTAL, "Failed exchanges with the shared state backend.");
    metrics::describe_gauge!(
        STATE_BACKEND_UP,
        "1 while exchanges with the shared state backend (Redis) succeed, 0 while they fail."
    );
}

/// An outcome counter's labels: tool, category (none for a success), action.
type OutcomeKey = (ArcStr, Option<Category>, Action);

/// Counters registered with the recorder the first time their labels are seen,
/// then kept: registering builds a key and allocates, incrementing a kept one does not.
#[derive(Debug)]
struct Counters<K>(RwLock<HashMap<K, Counter>>);

impl<K: std::hash::Hash + Eq> Counters<K> {
    fn new() -> Self {
        Counters(RwLock::new(HashMap::new()))
    }

    /// Adds one to the counter of `key`, registered by `register` the first time.
    fn increment(&self, key: K, register: impl FnOnce(&K) -> Counter) {
        if let Some(counter) = self.0.read().unwrap_or_else(|p| p.into_inner()).get(&key) {
            counter.increment(1);
            return;
        }
        let counter = register(&key);
        counter.increment(1);
        self.0.write().unwrap_or_else(|p| p.into_inner()).insert(key, counter);
    }
}

/// Stored metric handles and the capped tool label.
#[derive(Debug)]
pub struct Metrics {
    tool_cap: usize,
    tools: RwLock<HashSet<ArcStr>>,
    /// The label of every tool past the cap.
    other_tool: ArcStr,
    outcomes: Counters<OutcomeKey>,
    escalations: HashMap<Reason, Counter>,
    evicted_idle: Counter,
    evicted_capacity: Counter,
    evicted_memory: Counter,
    sessions_active: Gauge,
    sessions_bytes: Gauge,
    analyses_reused: Counter,
    analyses_new: Counter,
    retry_delay: Histogram,
    snippet_bytes: Histogram,
    streams_active: Gauge,
    reload_ok: Counter,
    reload_error: Counter,
    reload_successful: Gauge,
    rpc: HashMap<&'static str, Histogram>,
    admits: Counters<(ArcStr, &'static str)>,
    shadowed: Counters<(Action, Reason)>,
    budget_exhausted: Counters<ArcStr>,
    /// The breaker-state gauge of every tool label it was set for, so that all can be closed at once.
    breaker_states: Mutex<HashMap<ArcStr, Gauge>>,
}

/// The RPC methods timed in `rebound_rpc_duration_seconds`.
pub const RPC_METHODS: [&str; 6] = ["StartSession", "Report", "Observe", "Admit", "Context", "EndSession"];

impl Metrics {
    /// Handles registered with the global recorder (install it first).
    pub fn new(tool_cap: usize) -> Self {
        Metrics {
            tool_cap,
            tools: RwLock::new(HashSet::new()),
            other_tool: ArcStr::from(OTHER_TOOL),
            outcomes: Counters::new(),
            escalations: Reason::ALL
                .iter()
                .map(|r| (*r, metrics::counter!(ESCALATIONS_TOTAL, "reason" => r.as_str())))
                .collect(),
            evicted_idle: metrics::counter!(SESSIONS_EVICTED_TOTAL, "reason" => "idle"),
            evicted_capacity: metrics::counter!(SESSIONS_EVICTED_TOTAL, "reason" => "capacity"),
            evicted_memory: metrics::counter!(SESSIONS_EVICTED_TOTAL, "reason" => "memory"),
            sessions_active: metrics::gauge!(SESSIONS_ACTIVE),
            sessions_bytes: metrics::gauge!(SESSIONS_BYTES),
            analyses_reused: metrics::counter!(FAILURE_ANALYSES_TOTAL, "result" => "reused"),
            analyses_new: metrics::counter!(FAILURE_ANALYSES_TOTAL, "result" => "new"),
            retry_delay: metrics::histogram!(RETRY_DELAY_SECONDS),
            snippet_bytes: metrics::histogram!(SNIPPET_BYTES),
            streams_active: metrics::gauge!(STREAMS_ACTIVE),
            reload_ok: metrics::counter!(CONFIG_RELOADS_TOTAL, "result" => "ok"),
            reload_error: metrics::counter!(CONFIG_RELOADS_TOTAL, "result" => "error"),
            // A sidecar starts only with a config that loads.
            reload_successful: {
                let gauge = metrics::gauge!(CONFIG_LAST_RELOAD_SUCCESSFUL);
                gauge.set(1.0);
                gauge
            },
            admits: Counters::new(),
            shadowed: Counters::new(),
            budget_exhausted: Counters::new(),
            breaker_states: Mutex::new(HashMap::new()),
            rpc: RPC_METHODS.iter().map(|m| (*m, metrics::histogram!(RPC_DURATION_SECONDS, "method" => *m))).collect(),
        }
    }

    /// The tool's label if it already has one, else `_other`, taking no place under the cap: for
    /// a tool that does not exist (a name the agent's model made up), which would otherwise keep a
    /// place for good that a real tool seen later needs.
    pub fn existing_tool_label(&self, tool: &str) -> ArcStr {
        let tools = self.tools.read().unwrap_or_else(|p| p.into_inner());
        tools.get(tool).cloned().unwrap_or_else(|| self.other_tool.clone())
    }

    /// The tool's label: its name while under the cap, else `_other`.
    pub fn tool_label(&self, tool: &str) -> ArcStr {
        if let Some(known) = self.tools.read().unwrap_or_else(|p| p.into_inner()).get(tool) {
            return known.clone();
        }
        let mut tools = self.tools.write().unwrap_or_else(|p| p.into_inner());
        if let Some(known) = tools.get(tool) {
            return known.clone();
        }
        if tools.len() >= self.tool_cap {
            return self.other_tool.clone();
        }
        let label: ArcStr = ArcStr::from(tool);
        tools.insert(label.clone());
        label
    }

    /// Counts an outcome of the tool labelled `label` (from `tool_label`).
    pub fn outcome(&self, label: ArcStr, category: Option<Category>, action: Action) {
        self.outcomes.increment((label, category, action), |(tool, category, action)| {
            metrics::counter!(
                OUTCOMES_TOTAL,
                "tool" => tool.to_string(),
                "category" => category.map_or("none", Category::as_str),
                "action" => action.as_str(),
            )
        });
    }

    /// Counts a failure's analysis: `reused` from the engine's table, or new.
    pub fn failure_analysis(&self, reused: bool) {
        match reused {
            true => self.analyses_reused.increment(1),
            false => self.analyses_new.increment(1),
        }
    }

    /// Records a retry delay.
    pub fn retry_delay(&self, delay_ms: u64) {
        self.retry_delay.record(delay_ms as f64 / 1000.0);
    }

    /// Counts an escalation.
    pub fn escalation(&self, reason: Reason) {
        if let Some(c) = self.escalations.get(&reason) {
            c.increment(1);
        }
    }

    /// Counts a verdict that enforcing would have changed (shadow mode): to `action`, for `reason`.
    pub fn shadowed(&self, action: Action, reason: Reason) {
        self.shadowed.increment((action, reason), |(action, reason)| {
            metrics::counter!(SHADOW_VERDICTS_TOTAL, "action" => action.as_str(), "reason" => reason.as_str())
        });
    }

    /// Counts an eviction.
    pub fn evicted(&self, reason: crate::session::Eviction, n: u64) {
        match reason {
            crate::session::Eviction::Idle => self.evicted_idle.increment(n),
            crate::session::Eviction::Capacity => self.evicted_capacity.increment(n),
            crate::session::Eviction::Memory => self.evicted_memory.increment(n),
        }
    }

    /// Sets the gauges of the sessions held and of their bytes.
    pub fn sessions(&self, held: usize, bytes: usize) {
        self.sessions_active.set(held as f64);
        self.sessions_bytes.set(bytes as f64);
    }

    /// Records a snippet's size.
    pub fn snippet(&self, bytes: usize) {
        self.snippet_bytes.record(bytes as f64);
    }

    /// Moves the open stream gauge.
    pub fn stream_opened(&self, opened: bool) {
        if opened {
            self.streams_active.increment(1.0);
        } else {
            self.streams_active.decrement(1.0);
        }
    }

    /// Records one RPC's duration (Observe: per outcome).
    pub fn rpc_duration(&self, method: &str, seconds: f64) {
        if let Some(h) = self.rpc.get(method) {
            h.record(seconds);
        }
    }

    /// Records tool breaker transitions and the state they end in (rare: counters registered per call).
    pub fn breaker_transitions(&self, tool: &str, transitions: &[crate::model::BreakerState]) {
        let Some(last) = transitions.last() else {
            return;
        };
        let label = self.tool_label(tool);
        for to in transitions {
            metrics::counter!(BREAKER_TRANSITIONS_TOTAL, "tool" => label.to_string(), "to" => to.as_str()).increment(1);
        }
        // Every tool past the cap would set the one `_other` gauge in turn: its value would be
        // whichever moved last, an open breaker hidden by another's close, or the reverse.
        if label == self.other_tool {
            return;
        }
        let value = match last {
            crate::model::BreakerState::Closed => 0.0,
            crate::model::BreakerState::Open => 1.0,
            crate::model::BreakerState::HalfOpen => 2.0,
        };
        let mut gauges = self.breaker_states.lock().unwrap_or_else(|p| p.into_inner());
        let gauge =
            gauges.entry(label).or_insert_with_key(|tool| metrics::gauge!(BREAKER_STATE, "tool" => tool.to_string()));
        gauge.set(value);
    }

    /// Sets every tool's breaker-state gauge to closed: tool breakers are off. The gauges move only
    /// on transitions, and with the breakers off there are none, so one left open would say so for
    /// good (and ReboundToolBreakerOpen would fire on it).
    pub fn tool_breakers_off(&self) {
        for gauge in self.breaker_states.lock().unwrap_or_else(|p| p.into_inner()).values() {
            gauge.set(0.0);
        }
    }

    /// Counts a retry refused by the budget.
    pub fn budget_exhausted(&self, tool: &str) {
        self.budget_exhausted.increment(
            self.tool_label(tool),
            |tool| metrics::counter!(RETRY_BUDGET_EXHAUSTED_TOTAL, "tool" => tool.to_string()),
        );
    }

    /// Counts an Admit answer under `label` (see `Engine::admit` for which tools take their own).
    pub fn admit(&self, label: ArcStr, decision: &'static str) {
        self.admits.increment(
            (label, decision),
            |(tool, decision)| metrics::counter!(ADMIT_TOTAL, "tool" => tool.to_string(), "decision" => *decision),
        );
    }

    /// Counts a failed exchange with the shared state backend.
    pub fn backend_error(&self) {
        metrics::counter!(STATE_BACKEND_ERRORS_TOTAL).increment(1);
    }

    /// Exports the backend's error counter at 0 from the start: `increase()` misses the
    /// first error of a series that appears with it.
    pub fn backend_started(&self) {
        metrics::counter!(STATE_BACKEND_ERRORS_TOTAL).absolute(0);
    }

    /// Notes whether the shared state backend answers.
    pub fn backend_up(&self, up: bool) {
        metrics::gauge!(STATE_BACKEND_UP).set(if up { 1.0 } else { 0.0 });
    }

    /// Counts a config reload, and notes whether the config in use is the file's.
    pub fn reload(&self, ok: bool) {
        self.reload_successful.set(if ok { 1.0 } else { 0.0 });
        if ok {
            self.reload_ok.increment(1);
        } else {
            self.reload_error.increment(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_label_is_capped() {
        let m = Metrics::new(2);
        assert_eq!(&*m.tool_label("a"), "a");
        assert_eq!(&*m.tool_label("b"), "b");
        assert_eq!(&*m.tool_label("c"), OTHER_TOOL);
        assert_eq!(&*m.tool_label("a"), "a");
    }

    #[test]
    fn rendered_output_has_the_outcome_counter() {
        let handle = install();
        let m = Metrics::new(10);
        m.outcome(m.tool_label("search"), Some(Category::Timeout), Action::Retry);
        let text = handle.render();
        assert!(text.contains("rebound_outcomes_total{"), "{text}");
        assert!(text.contains("tool=\"search\""), "{text}");
    }

    #[test]
    fn kept_counters_go_on_counting() {
        let handle = install();
        let m = Metrics::new(10);
        for _ in 0..3 {
            m.budget_exhausted("kept_tool");
            m.admit(m.tool_label("kept_tool"), "allowed");
        }
        let text = handle.render();
        assert!(text.contains("rebound_retry_budget_exhausted_total{tool=\"kept_tool\"} 3"), "{text}");
        assert!(text.contains("rebound_admit_total{tool=\"kept_tool\",decision=\"allowed\"} 3"), "{text}");
    }
}
