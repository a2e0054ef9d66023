//! Sessions: one agent run's counters and error history, kept in memory in a
//! sharded store with idle expiry and a capacity cap that evicts the least
//! recently used.

use crate::breaker::DeclaredLimits;
use crate::model::{
    Action, BreakerStatus, Category, Classification, EscalationReport, OutcomeKind, Reason, RetryPlan, SessionState,
    SessionSummary, Verdict,
};
use crate::rng::Rng;
use crate::shapes::KeptMessage;
use arcstr::ArcStr;
use lru::LruCache;
use std::collections::{BTreeMap, VecDeque};
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// The most tools a session keeps counters for. Each outcome looks its tool up
/// among them, so a run naming a new tool at every call (an id in the name) would
/// otherwise make each call slower than the last: 100,000 such calls took 36 s.
pub const TOOL_COUNTERS: usize = 1000;

/// The most consecutive failures a tool's counters hold: they stop there, and
/// `breakers.tool_consecutive_failures` may be at most this (see [`ToolStats`]).
pub const MOST_CONSECUTIVE_FAILURES: u16 = u16::MAX;

/// Per-tool counters within a session: 16 bytes, an allocator size class (three tools' counters take
/// a block of 48, not the 80 that 24 bytes each took). Narrow, since each is bounded: consecutive
/// failures stop at [`MOST_CONSECUTIVE_FAILURES`], past any threshold a config may set; retries are
/// a plan's attempts, at most [`crate::backoff::MOST_RETRIES`]; a delay is at most twice
/// [`crate::backoff::LONGEST_DELAY_MS`] (as a remembered verdict keeps it, see [`KeptRetry`]).
#[derive(Clone, Debug, PartialEq)]
pub struct ToolStats {
    /// The tool (shared with the session's history and remembered verdicts).
    pub tool: ArcStr,
    /// Failures since its last success (stops at [`MOST_CONSECUTIVE_FAILURES`]).
    pub consecutive_failures: u16,
    /// Retries asked for since its last success.
    pub retries: u16,
    /// The last retry delay given, for decorrelated jitter.
    pub last_delay_ms: u32,
}

impl ToolStats {
    /// Counts a failure.
    pub fn fail(&mut self) {
        self.consecutive_failures = self.consecutive_failures.saturating_add(1);
    }

    /// Counts a success: the counters start again.
    pub fn succeed(&mut self) {
        (self.consecutive_failures, self.retries, self.last_delay_ms) = (0, 0, 0);
    }

    /// Notes the retry `plan` given.
    pub fn retry(&mut self, plan: &RetryPlan) {
        self.retries = u16::try_from(plan.attempt).unwrap_or(u16::MAX);
        self.last_delay_ms = u32::try_from(plan.delay_ms).unwrap_or(u32::MAX);
    }
}

/// One error in a session's history, already redacted and cut.
#[derive(Clone, Debug, PartialEq)]
pub struct HistoryEntry {
    /// The tool (shared with escalation reports).
    pub tool: ArcStr,
    /// Its category.
    pub category: Category,
    /// The cleaned message (shared with the remembered verdict that showed it, and its shape
    /// with the other sessions': see [`crate::shapes`]).
    pub message: KeptMessage,
    /// The suggestion shown with it.
    pub suggestion: ArcStr,
    /// The low half of its fingerprint as shown (`Analysis::fingerprint`: its message's, with
    /// its location's). The message's own fingerprint is its shape's, kept there; with it, this
    /// tells a repeat (see [`HistoryEntry::is_same_error`]).
    pub shown: u32,
    /// Times in a row.
    pub count: u32,
    /// When, in the session.
    pub at: SessionTime,
    /// The action answered.
    pub action: Action,
    /// True once the same tool succeeded later.
    pub resolved: bool,
}

impl HistoryEntry {
    /// The bytes it points to: its message's own (as if it shared them with no remembered
    /// verdict; the tool and suggestion are shared, and the message's shape counts itself).
    fn held_bytes(&self) -> usize {
        self.message.held_bytes()
    }

    /// True when `tool` failing with `message`, whose fingerprint as shown is `fingerprint`, is this
    /// error again: the same tool, the same message fingerprint, and the same low half of the
    /// fingerprint as shown. Two messages with one fingerprint but shown at different locations
    /// pass for one error only when those halves meet by chance, about once in 4 billion.
    pub fn is_same_error(&self, tool: &str, message: &KeptMessage, fingerprint: u64) -> bool {
        self.is(tool, message.fingerprint(), low_half(fingerprint))
    }

    /// True when `other` is this error again (see [`HistoryEntry::is_same_error`]).
    pub fn is_same_error_as(&self, other: &HistoryEntry) -> bool {
        self.is(&other.tool, other.message.fingerprint(), other.shown)
    }

    fn is(&self, tool: &str, message_fingerprint: u64, shown: u32) -> bool {
        *self.tool == *tool && self.message.fingerprint() == message_fingerprint && self.shown == shown
    }
}

/// The low 32 bits of a fingerprint, as a history entry keeps them.
pub fn low_half(fingerprint: u64) -> u32 {
    fingerprint as u32
}

/// Milliseconds since a session started, in 5 bytes rather than 8: a history entry takes 40
/// bytes, an allocator size class (three took a block of 160 at 48 bytes each, and take 128).
/// It holds up to 2^40 - 1 ms, about 34.8 years; a later time reads as that.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SessionTime([u8; 5]);

impl SessionTime {
    /// The most it holds.
    pub const MAX_MS: u64 = (1 << 40) - 1;

    /// `ms` milliseconds into the session (at most [`SessionTime::MAX_MS`]).
    pub fn from_ms(ms: u64) -> Self {
        let [a, b, c, d, e, ..] = ms.min(Self::MAX_MS).to_le_bytes();
        SessionTime([a, b, c, d, e])
    }

    /// Milliseconds into the session.
    pub fn ms(self) -> u64 {
        let [a, b, c, d, e] = self.0;
        u64::from_le_bytes([a, b, c, d, e, 0, 0, 0])
    }
}

/// One agent run.
#[derive(Clone, Debug)]
pub struct Session {
    /// When it was created (engine clock).
    pub created_ms: u64,
    /// When it was last used.
    pub last_seen_ms: u64,
    /// What StartSession declared, if it was called (boxed: most sessions start with their first outcome).
    pub setup: Option<Box<Setup>>,
    /// Active, escalated or stopped.
    pub state: SessionState,
    /// Outcomes reported.
    pub steps: u32,
    /// Cost reported.
    pub cost: f64,
    /// Retries asked for.
    pub retries: u32,
    /// Escalations answered.
    pub escalations: u32,
    /// Failures by category (a few at most: a list, not a map; and no room to grow, see
    /// `push_exact`). Their sum is the failures reported: see [`Session::errors`].
    pub errors_by_category: Box<[(Category, u32)]>,
    /// Per-tool counters (no room to grow, as the category counts: see `push_exact`).
    pub tool_stats: Box<[ToolStats]>,
    /// Recent errors, oldest first. The newest, until its tool succeeds, also counts identical
    /// errors in a row (see [`Session::identical`]).
    pub history: VecDeque<HistoryEntry>,
    /// Unresolved errors pushed out of the history.
    pub dropped_unresolved: u32,
    /// Recent verdicts by call_id, for idempotency.
    pub recent: VecDeque<Remembered>,
    /// Jitter source.
    pub rng: Rng,
    /// The bytes the tool names in `tool_stats`, the history's entries and the remembered verdicts
    /// point to (see [`HistoryEntry::held_bytes`] and [`Remembered::held_bytes`]): kept as they
    /// change, since a session may count a thousand tools. One sum, not three, and 32 bits: the
    /// session is the store's entry, and each 8 bytes less counts towards an allocator size class
    /// (192 bytes for the entry). A session holds far less than 4 GiB: its tools, history, window
    /// and labels are all capped (at every cap, a thousand remembered escalations, each with the
    /// largest labels and a history of a thousand, come to about 0.2 GB).
    held_bytes: u32,
}

/// What StartSession declared.
#[derive(Clone, Debug, PartialEq)]
pub struct Setup {
    /// The limits it declared (the others are the policy's, read when needed).
    pub limits: DeclaredLimits,
    /// The agent's tools (shared with the sessions that declared the same list lately).
    pub tools: Arc<ToolList>,
    /// The policy profile named.
    pub profile: String,
    /// Free labels.
    pub labels: BTreeMap<String, String>,
    /// About how many bytes the profile and labels hold (the tools count themselves).
    pub bytes: usize,
}

const STRING: usize = std::mem::size_of::<String>();

/// What a shared text (`ArcStr`) holds before its bytes: its count and its length.
const TEXT_HEADER: usize = 16;

impl Setup {
    /// A setup, with what it holds counted: each string by its length and the room its
    /// handle takes. The tool list is counted on its own, once however many share it.
    pub fn new(
        limits: DeclaredLimits,
        tools: Arc<ToolList>,
        profile: String,
        labels: BTreeMap<String, String>,
    ) -> Setup {
        // A label is two strings and its place in the map's node.
        let bytes = std::mem::size_of::<Setup>()
            + profile.len()
            + labels.iter().map(|(k, v)| 2 * STRING + 16 + k.len() + v.len()).sum::<usize>();
        Setup { limits, tools, profile, labels, bytes }
    }
}

/// A declared tool list, shared by the sessions that declared the same one lately.
/// It counts its bytes into the store's count while it lives (see [`SessionStore::meter`]),
/// once however many sessions hold it: each session charging the whole list would
/// evict sessions for memory that sharing saves.
#[derive(Debug)]
pub struct ToolList {
    names: Box<[String]>,
    /// What it counted into `meter`.
    pub bytes: usize,
    meter: Arc<AtomicUsize>,
}

impl ToolList {
    /// The list `names`, counted into `meter` until it is dropped.
    pub fn new(names: &[String], meter: Arc<AtomicUsize>) -> ToolList {
        let bytes = std::mem::size_of::<ToolList>() + 16 + names.iter().map(|t| STRING + t.len()).sum::<usize>();
        meter.fetch_add(bytes, Ordering::Relaxed);
        ToolList { names: names.into(), bytes, meter }
    }
}

impl std::ops::Deref for ToolList {
    type Target = [String];
    fn deref(&self) -> &[String] {
        &self.names
    }
}

impl PartialEq for ToolList {
    fn eq(&self, other: &ToolList) -> bool {
        self.names == other.names
    }
}

impl Drop for ToolList {
    fn drop(&mut self) {
        self.meter.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

impl Session {
    /// A new session.
    pub fn new(now_ms: u64, rng: Rng) -> Self {
        Session {
            created_ms: now_ms,
            last_seen_ms: now_ms,
            setup: None,
            state: SessionState::Active,
            steps: 0,
            cost: 0.0,
            retries: 0,
            escalations: 0,
            errors_by_category: Box::default(),
            tool_stats: Box::default(),
            history: VecDeque::new(),
            dropped_unresolved: 0,
            recent: VecDeque::new(),
            rng,
            held_bytes: 0,
        }
    }

    /// About how many bytes the session holds: its place in the store and what it points
    /// to, text counted by its length. What the store's byte budget counts. A tool's name
    /// is counted as if the session's own (it is often shared), a kept message by its own
    /// numbers, and a declared tool list and a message's shape not at all (they count
    /// themselves: see [`ToolList`] and [`crate::shapes`]). The allocator's own overhead is
    /// not in it: resident memory runs up to a fifth above, as it rounds each block up to
    /// its size class (for sessions of 3 errors it is within 3 % of it, either way:
    /// `benches/sidecar_memory.rs`).
    /// Counted in a few steps, from sums kept as the session changes: it is asked after
    /// every outcome.
    pub fn weight(&self) -> usize {
        // The store's entry: the key, the session and the list links; and the table's slot.
        const ENTRY: usize = std::mem::size_of::<Session>() + std::mem::size_of::<Key>() + 16 + 8;
        ENTRY
            + self.setup.as_ref().map_or(0, |s| s.bytes)
            + self.errors_by_category.len() * std::mem::size_of::<(Category, u32)>()
            + self.tool_stats.len() * (std::mem::size_of::<ToolStats>() + TEXT_HEADER)
            + self.history.capacity() * std::mem::size_of::<HistoryEntry>()
            + self.recent.capacity() * std::mem::size_of::<Remembered>()
            + self.held_bytes as usize
    }

    /// True when the sum kept as the session changes equals what its tool names, history
    /// and remembered verdicts hold, counted afresh.
    #[cfg(test)]
    pub(crate) fn held_bytes_are_exact(&self) -> bool {
        self.held_bytes as usize
            == self.history.iter().map(HistoryEntry::held_bytes).sum::<usize>()
                + self.recent.iter().map(Remembered::held_bytes).sum::<usize>()
                + self.tool_stats.iter().map(|t| t.tool.len()).sum::<usize>()
    }

    /// Counts `bytes` more that the session points to (see `held_bytes`).
    fn hold(&mut self, bytes: usize) {
        self.held_bytes = self.held_bytes.saturating_add(u32::try_from(bytes).unwrap_or(u32::MAX));
    }

    /// Counts `bytes` fewer that the session points to.
    fn release(&mut self, bytes: usize) {
        self.held_bytes = self.held_bytes.saturating_sub(u32::try_from(bytes).unwrap_or(u32::MAX));
    }

    /// Failures reported.
    pub fn errors(&self) -> u32 {
        self.errors_by_category.iter().fold(0, |sum, (_, n)| sum.saturating_add(*n))
    }

    /// Counts a failure of `category`.
    pub fn count_error(&mut self, category: Category) {
        match self.errors_by_category.iter_mut().find(|(c, _)| *c == category) {
            Some((_, n)) => *n = n.saturating_add(1),
            // A session meets a few categories: see `push_exact`.
            None => push_exact(&mut self.errors_by_category, (category, 1)),
        }
    }

    /// The limits StartSession declared (none if it was not called: the policy's apply).
    pub fn limits(&self) -> DeclaredLimits {
        self.setup.as_ref().map_or_else(DeclaredLimits::default, |s| s.limits)
    }

    /// The agent's tools, as StartSession declared them (none if it was not called).
    pub fn tools(&self) -> &[String] {
        self.setup.as_ref().map_or(&[], |s| &s.tools[..])
    }

    /// A tool's failures in a row (0 for a tool without counters).
    pub fn consecutive_failures(&self, tool: &str) -> u32 {
        self.tool_stats.iter().find(|t| *t.tool == *tool).map_or(0, |t| t.consecutive_failures.into())
    }

    /// The counters of one tool, created on first use.
    pub fn tool_mut(&mut self, tool: &str) -> &mut ToolStats {
        if let Some(i) = self.tool_stats.iter().position(|t| *t.tool == *tool) {
            return &mut self.tool_stats[i];
        }
        self.add_tool(tool.into())
    }

    /// Gives the tool its counters, named by `name` (shared: the sessions of one
    /// sidecar use the same few tools), unless it has them.
    pub fn know_tool(&mut self, name: &ArcStr) {
        if !self.tool_stats.iter().any(|t| t.tool == *name) {
            self.add_tool(name.clone());
        }
    }

    fn add_tool(&mut self, name: ArcStr) -> &mut ToolStats {
        self.hold(name.len());
        let counters = ToolStats { tool: name, consecutive_failures: 0, retries: 0, last_delay_ms: 0 };
        if self.tool_stats.len() >= TOOL_COUNTERS {
            // Make room: a tool whose counters are as a new tool's loses nothing; failing that, the
            // oldest goes. The ones after it move up, and the new one takes the last place.
            let tools = &mut self.tool_stats;
            let idle = tools.iter().position(|t| (t.consecutive_failures, t.retries, t.last_delay_ms) == (0, 0, 0));
            tools[idle.unwrap_or(0)..].rotate_left(1);
            let gone = std::mem::replace(tools.last_mut().expect("full"), counters);
            self.release(gone.tool.len());
        } else {
            // A session uses a few tools: see `push_exact`.
            push_exact(&mut self.tool_stats, counters);
        }
        self.tool_stats.last_mut().expect("just added")
    }

    /// The earlier verdict for a call_id, if it is still remembered.
    pub fn recall(&self, call_id: &str) -> Option<&Remembered> {
        if call_id.is_empty() {
            return None;
        }
        let call = id_hash(call_id);
        self.recent.iter().find(|r| r.call == call)
    }

    /// Remembers the verdict for `call_id` of `tool`, forgetting the oldest past `window`.
    /// Its ids and snippet are not kept: the request has the ids, and
    /// `snippet` rebuilds the rest from text the history already holds.
    pub fn remember(&mut self, call_id: &str, tool: &str, verdict: &Verdict, snippet: SnippetRecipe, window: usize) {
        if call_id.is_empty() || window == 0 {
            return;
        }
        if self.recent.len() >= window {
            if let Some(old) = self.recent.pop_front() {
                self.release(old.held_bytes());
            }
        }
        let tool = self.tool_mut(tool).tool.clone();
        if self.recent.len() == self.recent.capacity() {
            // One at a time while few (most sessions remember a handful), then doubling up to
            // the window: a run that reaches it moves its verdicts a few times, not at every call.
            let len = self.recent.len();
            grow_exact_deque(&mut self.recent, if len < 4 { 1 } else { len.min(window.saturating_sub(len)).max(1) });
        }
        let plain = verdict.classification.is_none()
            && verdict.retry.is_none()
            && verdict.escalation.is_none()
            && matches!(&snippet, SnippetRecipe::Text(text) if text.is_empty());
        let details = (!plain).then(|| {
            Box::new(Details {
                classification: verdict.classification.clone(),
                retry: verdict.retry.as_ref().map(KeptRetry::keep),
                // Its text is made again from its parts on recall.
                escalation: verdict
                    .escalation
                    .as_ref()
                    .map(|e| Box::new(EscalationReport { text: String::new(), ..(**e).clone() })),
                snippet,
            })
        });
        let remembered = Remembered {
            call: id_hash(call_id),
            tool,
            action: verdict.action,
            breaker: verdict.breaker.clone(),
            enforced: verdict.enforced,
            shadow_action: verdict.shadow_action,
            shadow_reason: verdict.shadow_reason,
            snippet_tokens: verdict.snippet_tokens,
            details,
        };
        self.hold(remembered.held_bytes());
        self.recent.push_back(remembered);
    }

    /// Identical errors in a row: the newest error's count, until its tool succeeds.
    pub fn identical(&self) -> u32 {
        self.history.back().filter(|e| !e.resolved).map_or(0, |e| e.count)
    }

    /// Identical errors in a row once `tool` fails with `message` (its fingerprint as shown,
    /// `fingerprint`): the history folds a repeat of its newest unresolved error into it (see
    /// [`Session::push_error`]).
    pub fn identical_after(&self, tool: &str, message: &KeptMessage, fingerprint: u64) -> u32 {
        match self.history.back() {
            Some(last) if !last.resolved && last.is_same_error(tool, message, fingerprint) => {
                last.count.saturating_add(1)
            }
            _ => 1,
        }
    }

    /// Adds an error to the history, folding a repeat of the newest unresolved one.
    pub fn push_error(&mut self, entry: HistoryEntry, capacity: usize) {
        if let Some(last) = self.history.back_mut() {
            if !last.resolved && last.is_same_error_as(&entry) {
                last.count = last.count.saturating_add(1);
                let (gone, kept) = (last.held_bytes(), entry.held_bytes());
                last.message = entry.message;
                last.at = entry.at;
                last.action = entry.action;
                self.release(gone);
                self.hold(kept);
                return;
            }
        }
        while self.history.len() >= capacity.max(1) {
            if let Some(old) = self.history.pop_front() {
                self.release(old.held_bytes());
                if !old.resolved {
                    self.dropped_unresolved += old.count;
                }
            }
        }
        grow_exact_deque(&mut self.history, 1);
        self.hold(entry.held_bytes());
        self.history.push_back(entry);
    }

    /// Marks a tool's errors resolved after its success.
    pub fn resolve(&mut self, tool: &str) {
        for e in self.history.iter_mut().filter(|e| *e.tool == *tool) {
            e.resolved = true;
        }
    }

    /// The session's summary.
    pub fn summary(&self, now_ms: u64) -> SessionSummary {
        SessionSummary {
            calls: self.steps,
            errors: self.errors(),
            errors_by_category: self.errors_by_category.iter().map(|(c, n)| (c.as_str().to_string(), *n)).collect(),
            retries: self.retries,
            escalations: self.escalations,
            cost: self.cost,
            duration_ms: now_ms.saturating_sub(self.created_ms),
            state: self.state,
            labels: self.setup.as_ref().map(|setup| setup.labels.clone()).unwrap_or_default(),
        }
    }
}

/// How a remembered verdict's snippet is made again on recall.
#[derive(Clone, Debug, PartialEq)]
pub enum SnippetRecipe {
    /// The text itself: empty for a success, a fixed sentence, or a snippet shortened or cut to its
    /// token budget.
    Text(Box<str>),
    /// An `<error>` block, rendered again from the parts it was made of.
    Block {
        /// The message shown (the history's).
        message: KeptMessage,
        /// The location line, or empty (shared with the engine's analysis of the failure).
        location: ArcStr,
        /// The outcome's kind, for the recovery instruction.
        kind: Option<OutcomeKind>,
        /// How much a token budget left out (see `verdict::render_snippet`).
        trim: u8,
    },
}

/// A verdict remembered for its call_id, for idempotency: all of it but its
/// ids (the repeated request has them) and its texts (made again on recall).
#[derive(Clone, Debug, PartialEq)]
pub struct Remembered {
    /// The call_id's hash. Two call_ids of one window colliding by chance is
    /// about 16 in 2^64; a crafted collision only replays a verdict of the
    /// session that sent it.
    call: u64,
    /// The tool (shared with the session's tool counters).
    pub tool: ArcStr,
    /// What to do.
    pub action: Action,
    /// The breakers' view.
    pub breaker: BreakerStatus,
    /// False in shadow mode.
    pub enforced: bool,
    /// In shadow mode, what the breakers would have answered.
    pub shadow_action: Option<Action>,
    /// In shadow mode, why.
    pub shadow_reason: Option<Reason>,
    /// The snippet's length in tokens, when a snippet budget is set.
    pub snippet_tokens: u32,
    /// The rest, which a plain success's verdict does not have (boxed: most
    /// calls succeed, and the window holds their verdicts in 64 bytes each).
    pub details: Option<Box<Details>>,
}

impl Remembered {
    /// The bytes it points to: its details, with an escalation's report and the snippet's
    /// own text (the message is the history's, counted there).
    fn held_bytes(&self) -> usize {
        let Some(d) = &self.details else { return 0 };
        let snippet = match &d.snippet {
            SnippetRecipe::Text(text) => text.len(),
            // Counted as if its own, like the history's message.
            SnippetRecipe::Block { location, .. } if !location.is_empty() => TEXT_HEADER + location.len(),
            SnippetRecipe::Block { .. } => 0,
        };
        let report = d.escalation.as_ref().map_or(0, |r| {
            std::mem::size_of::<EscalationReport>()
                + 16
                + r.summary.capacity()
                + r.history.capacity() * std::mem::size_of::<crate::model::ErrorRecord>()
                + r.errors_by_category.capacity() * std::mem::size_of::<(Category, u32)>()
                + r.labels.iter().map(|(k, v)| 2 * STRING + 16 + k.len() + v.len()).sum::<usize>()
        });
        std::mem::size_of::<Details>() + 16 + snippet + report
    }
}

/// What a remembered verdict holds beyond a plain success's: 64 bytes, an allocator size class
/// (80 with a [`RetryPlan`] of 24 bytes in it rather than a [`KeptRetry`] of 8).
#[derive(Clone, Debug, PartialEq)]
pub struct Details {
    /// The classification (its rule and suggestion shared, not copied).
    pub classification: Option<Classification>,
    /// The retry plan.
    pub retry: Option<KeptRetry>,
    /// The escalation report, without its text.
    pub escalation: Option<Box<EscalationReport>>,
    /// How to make its snippet again.
    pub snippet: SnippetRecipe,
}

/// A retry plan as a remembered verdict keeps it: in 8 bytes, not 24. Whole, since a policy's
/// delays are at most [`crate::backoff::LONGEST_DELAY_MS`] (and jitter at most doubles them)
/// and its retries at most [`crate::backoff::MOST_RETRIES`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct KeptRetry {
    delay_ms: u32,
    attempt: u8,
    attempts_left: u8,
    provider_delay: bool,
}

impl KeptRetry {
    /// `plan`, kept. A plan past the bounds above (none is made) would keep its largest values.
    pub fn keep(plan: &RetryPlan) -> KeptRetry {
        KeptRetry {
            delay_ms: u32::try_from(plan.delay_ms).unwrap_or(u32::MAX),
            attempt: u8::try_from(plan.attempt).unwrap_or(u8::MAX),
            attempts_left: u8::try_from(plan.attempts_left).unwrap_or(u8::MAX),
            provider_delay: plan.provider_delay,
        }
    }

    /// The plan kept.
    pub fn plan(self) -> RetryPlan {
        RetryPlan {
            delay_ms: self.delay_ms.into(),
            attempt: self.attempt.into(),
            attempts_left: self.attempts_left.into(),
            provider_delay: self.provider_delay,
        }
    }
}

/// Makes room in `list` for `additional` more, exactly, unless it has it. It moves the items to a new
/// block rather than reallocating the old: jemalloc's realloc of a small block cost about 600
/// instructions on the Observe bench (it looks the block up and tries to grow it in place before it
/// moves it), a new block and the old one freed far less.
fn grow_exact<T>(list: &mut Vec<T>, additional: usize) {
    if list.capacity() - list.len() < additional {
        let mut grown = Vec::with_capacity(list.len() + additional);
        grown.append(list);
        *list = grown;
    }
}

/// Adds `item` at the end of `list`, which has no room to grow: a few items each across 100,000
/// sessions, where a list with room would leave most of it unused. Its items move to a new block
/// one longer (see [`grow_exact`]).
fn push_exact<T>(list: &mut Box<[T]>, item: T) {
    let mut grown = std::mem::take(list).into_vec();
    grow_exact(&mut grown, 1);
    grown.push(item);
    *list = grown.into_boxed_slice();
}

/// [`grow_exact`] for a deque.
fn grow_exact_deque<T>(list: &mut VecDeque<T>, additional: usize) {
    if list.capacity() - list.len() < additional {
        let mut grown = VecDeque::with_capacity(list.len() + additional);
        grown.append(list);
        *list = grown;
    }
}

/// FNV-1a of an id (a call_id in the idempotency window).
pub(crate) fn id_hash(id: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in id.as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// Why a session left the store without EndSession.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Eviction {
    /// Unused for the idle expiry.
    Idle,
    /// Pushed out by the capacity cap.
    Capacity,
    /// Pushed out by the byte budget (`sessions.max_bytes`).
    Memory,
}

impl Eviction {
    /// The metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            Eviction::Idle => "idle",
            Eviction::Capacity => "capacity",
            Eviction::Memory => "memory",
        }
    }
}

/// What `SessionStore::remove` found.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)] // returned and taken apart at once, never stored
pub enum Removal {
    /// The session, now removed.
    Ended(Session),
    /// A session idle past expiry, now dropped.
    Expired,
    /// None by that id.
    Missing,
}

/// A session's key in the store: its id hashed with a key secret to the process (SipHash-1-3, 128
/// bits). The store keeps these 16 bytes, not the id: a session costs the same whatever its id's
/// length (a UUID's 36 bytes took an allocator block of 48 of their own, besides the 16-byte
/// pointer to them), and no id can be chosen to land on another's session. Two of n ids share a
/// key by chance about once in 2^129/n² (for a million sessions held, under 1 in 10^26).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Key(u64, u64);

/// One shard: sessions by key, least recently used first out. Keys hash with foldhash (seeded
/// per process), cheap for their 16 bytes.
type Shard = LruCache<Key, Session, foldhash::fast::RandomState>;

/// The store's hasher, keyed with 128 bits no other process has: two draws of std's hash map seeds,
/// which come from the system's randomness.
fn secret_keys() -> siphasher::sip128::SipHasher13 {
    use std::hash::BuildHasher as _;
    let draw = || std::hash::RandomState::new().hash_one(0u8);
    siphasher::sip128::SipHasher13::new_with_keys(draw(), draw())
}

/// A shard for `capacity` sessions whose table grows as they come. Made for its capacity at
/// once (17 bytes a slot, for 8/7 of it or more), the tables of a capacity of 100,000,000 held
/// 143 MiB before any session came, and with a capacity of 250,000, 100,000 sessions held
/// 144.8 MiB, not 138.3 (`cargo bench --bench sidecar_memory`). The price: each doubling moves the
/// shard's sessions while its lock is held, about 100 ns a session (`benches/session_growth.rs`).
fn shard(capacity: NonZeroUsize) -> Shard {
    let mut shard = LruCache::unbounded_with_hasher(Default::default());
    shard.resize(capacity);
    shard
}

/// The fewest sessions a shard is made for. Each shard evicts on its own once it
/// holds its share of the capacity: with a few sessions each, chance alone fills one
/// shard while others are empty (a capacity of 100 in 64 shards evicted 2 sessions of 40).
pub const MIN_SESSIONS_PER_SHARD: usize = 256;

/// The sessions, sharded by id so unrelated sessions never wait on one lock.
#[derive(Debug)]
pub struct SessionStore {
    shards: Vec<Mutex<Shard>>,
    /// Makes a session's [`Key`] from its id, which also picks its shard: with a key secret to
    /// the process, ids cannot be chosen to land in one shard and push another agent's session
    /// out long before the store is full.
    keys: siphasher::sip128::SipHasher13,
    idle_ms: u64,
    len: AtomicUsize,
    /// The most bytes the sessions may hold together, as [`Session::weight`] counts them.
    max_bytes: usize,
    /// What they hold now, and the tool lists they declared (see [`ToolList`]).
    bytes: Arc<AtomicUsize>,
}

impl SessionStore {
    /// A store of at most `capacity` sessions in `shards` shards (fewer when the
    /// capacity is small: see [`MIN_SESSIONS_PER_SHARD`]), holding at most about
    /// `max_bytes` together.
    pub fn new(capacity: usize, shards: usize, idle_ms: u64, max_bytes: usize) -> Self {
        let shards = shards.clamp(1, (capacity / MIN_SESSIONS_PER_SHARD).max(1));
        // The capacity shared out exactly: the first shards take one more of what does not divide.
        let share = |i: usize| NonZeroUsize::new((capacity / shards + usize::from(i < capacity % shards)).max(1));
        SessionStore {
            shards: (0..shards).map(|i| Mutex::new(shard(share(i).expect("at least one")))).collect(),
            keys: secret_keys(),
            idle_ms,
            len: AtomicUsize::new(0),
            max_bytes,
            bytes: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// About how many bytes the sessions hold together (see [`Session::weight`]).
    pub fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    /// The store's count, for a [`ToolList`] to count itself into.
    pub fn meter(&self) -> Arc<AtomicUsize> {
        self.bytes.clone()
    }

    /// Counts what a session holds after a change, from what it weighed before (`before`: 0 for a
    /// new one). A session in the store always weighs what the count has of it, so neither is kept.
    fn charge(&self, before: usize, after: usize) {
        if after > before {
            self.bytes.fetch_add(after - before, Ordering::Relaxed);
        } else if after < before {
            // The shared count is written only when it changes.
            self.bytes.fetch_sub(before - after, Ordering::Relaxed);
        }
    }

    /// Forgets what a session that left the store held.
    fn discharge(&self, session: &Session) {
        self.bytes.fetch_sub(session.weight(), Ordering::Relaxed);
    }

    /// Past the byte budget: the least recently used sessions of the whole store go,
    /// until it is within it, never `keep` (the session just used). Each round looks
    /// at every shard's least recently used, one lock at a time (never two held at
    /// once), and drops the one used longest ago: a step per shard for each session
    /// dropped, taken only past the budget.
    fn shed(&self, keep: Key, evictions: &mut Vec<Eviction>) {
        while self.bytes() > self.max_bytes {
            let lock = |i: usize| self.shards[i].lock().unwrap_or_else(|p| p.into_inner());
            let oldest = (0..self.shards.len())
                .filter_map(|i| {
                    let shard = lock(i);
                    let (key, s) = shard.peek_lru()?;
                    (*key != keep).then_some((s.last_seen_ms, i))
                })
                .min();
            let Some((_, i)) = oldest else { return };
            let mut shard = lock(i);
            // Another thread may have used it meanwhile: its least recently used now goes.
            if shard.peek_lru().is_some_and(|(key, _)| *key != keep) {
                if let Some((_, old)) = shard.pop_lru() {
                    self.discharge(&old);
                    self.len.fetch_sub(1, Ordering::Relaxed);
                    evictions.push(Eviction::Memory);
                }
            }
        }
    }

    fn key(&self, id: &str) -> Key {
        let hash = self.keys.hash(id.as_bytes());
        Key(hash.h1, hash.h2)
    }

    fn shard(&self, key: Key) -> MutexGuard<'_, Shard> {
        let shard = &self.shards[(key.0 % self.shards.len() as u64) as usize];
        // A panic while holding a shard would be a bug; keep serving the other sessions.
        shard.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// How many sessions are held.
    pub fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }

    /// True when none are held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Runs `f` on the session, creating it with `create` when missing (or idle
    /// past expiry). Returns what `f` returned, whether the session was created,
    /// and the evictions this caused.
    pub fn with_session<R>(
        &self,
        id: &str,
        now_ms: u64,
        create: impl FnOnce() -> Session,
        f: impl FnOnce(&mut Session) -> R,
    ) -> (R, bool, Vec<Eviction>) {
        let mut evictions = Vec::new();
        let key = self.key(id);
        let mut shard = self.shard(key);
        // One lookup for a session that exists, however it goes on.
        let (result, created) = if let Some(session) = shard.get_mut(&key) {
            // What the count holds of it, whether it stays or a new one takes its place.
            let before = session.weight();
            let expired = now_ms.saturating_sub(session.last_seen_ms) >= self.idle_ms;
            if expired {
                // Idle past expiry: a new session takes its place (and its place in the order).
                *session = create();
                evictions.push(Eviction::Idle);
            }
            session.last_seen_ms = now_ms;
            let result = f(session);
            self.charge(before, session.weight());
            (result, expired)
        } else {
            if let Some((_, old)) = shard.push(key, create()) {
                // The least recently used may have been idle past expiry, waiting for the sweep.
                let idle = now_ms.saturating_sub(old.last_seen_ms) >= self.idle_ms;
                evictions.push(if idle { Eviction::Idle } else { Eviction::Capacity });
                self.discharge(&old);
            } else {
                self.len.fetch_add(1, Ordering::Relaxed);
            }
            let session = shard.get_mut(&key).expect("present: just inserted");
            session.last_seen_ms = now_ms;
            let result = f(session);
            self.charge(0, session.weight());
            (result, true)
        };
        drop(shard);
        if self.bytes() > self.max_bytes {
            self.shed(key, &mut evictions);
        }
        (result, created, evictions)
    }

    /// Runs `f` on the session if it exists (and is not idle past expiry), without creating it.
    pub fn with_existing<R>(&self, id: &str, now_ms: u64, f: impl FnOnce(&Session) -> R) -> Option<R> {
        let key = self.key(id);
        let mut shard = self.shard(key);
        let session = shard.get_mut(&key)?;
        if now_ms.saturating_sub(session.last_seen_ms) >= self.idle_ms {
            return None;
        }
        Some(f(session))
    }

    /// Removes a session. One idle past expiry, which the sweep has not dropped
    /// yet, is gone already, as it is for every other call: it is dropped as expired.
    pub fn remove(&self, id: &str, now_ms: u64) -> Removal {
        let key = self.key(id);
        let Some(removed) = self.shard(key).pop(&key) else {
            return Removal::Missing;
        };
        self.len.fetch_sub(1, Ordering::Relaxed);
        self.discharge(&removed);
        if now_ms.saturating_sub(removed.last_seen_ms) >= self.idle_ms {
            return Removal::Expired;
        }
        Removal::Ended(removed)
    }

    /// Drops sessions idle past expiry; returns how many.
    pub fn expire_idle(&self, now_ms: u64) -> usize {
        let mut dropped = 0;
        for shard in &self.shards {
            let mut shard = shard.lock().unwrap_or_else(|p| p.into_inner());
            // Least recently used first: stop at the first session still fresh.
            while let Some((_, s)) = shard.peek_lru() {
                if now_ms.saturating_sub(s.last_seen_ms) < self.idle_ms {
                    break;
                }
                if let Some((_, gone)) = shard.pop_lru() {
                    self.discharge(&gone);
                }
                dropped += 1;
            }
        }
        self.len.fetch_sub(dropped, Ordering::Relaxed);
        dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new_session(now: u64) -> Session {
        Session::new(now, Rng::new(1))
    }

    #[test]
    fn growing_exactly_keeps_the_items_in_order_and_no_more_room() {
        let mut list = vec![1, 2];
        grow_exact(&mut list, 1);
        assert_eq!((list.as_slice(), list.capacity()), (&[1, 2][..], 3));
        grow_exact(&mut list, 1);
        assert_eq!(list.capacity(), 3, "room enough: unchanged");
        // A deque whose items wrap around the end of its block.
        let mut deque = VecDeque::with_capacity(3);
        deque.extend([0, 1, 2]);
        deque.pop_front();
        deque.push_back(3);
        grow_exact_deque(&mut deque, 2);
        assert_eq!((deque.iter().copied().collect::<Vec<_>>(), deque.capacity()), (vec![1, 2, 3], 5));
    }

    #[test]
    fn capacity_evicts_the_least_recently_used() {
        let store = SessionStore::new(2, 1, 1000, usize::MAX);
        store.with_session("a", 0, || new_session(0), |_| ());
        store.with_session("b", 1, || new_session(1), |_| ());
        store.with_session("a", 2, || new_session(2), |s| s.steps = 7);
        let (_, created, ev) = store.with_session("c", 3, || new_session(3), |_| ());
        assert!(created);
        assert_eq!(ev, vec![Eviction::Capacity]);
        assert_eq!(store.len(), 2);
        assert!(store.with_existing("b", 4, |_| ()).is_none(), "b was least recently used");
        assert_eq!(store.with_existing("a", 4, |s| s.steps), Some(7));
    }

    #[test]
    fn a_session_idle_past_expiry_is_gone_before_the_sweep_drops_it() {
        let store = SessionStore::new(2, 1, 1000, usize::MAX);
        store.with_session("a", 0, || new_session(0), |_| ());
        store.with_session("b", 1, || new_session(1), |_| ());
        // At capacity, pushed out after its expiry: counted as idle, not as the cap's.
        let (_, _, ev) = store.with_session("c", 1500, || new_session(1500), |_| ());
        assert_eq!(ev, vec![Eviction::Idle]);
        assert!(matches!(store.remove("b", 1500), Removal::Expired));
        assert!(matches!(store.remove("c", 1600), Removal::Ended(_)));
        assert!(matches!(store.remove("c", 1600), Removal::Missing));
        assert!(store.is_empty());
    }

    #[test]
    fn a_small_capacity_holds_that_many_sessions_whatever_the_shards() {
        // 64 shards of 2 used to push sessions out by chance long before 100 were held.
        let store = SessionStore::new(100, 64, 1000, usize::MAX);
        for i in 0..100 {
            let (_, _, evictions) = store.with_session(&format!("run-{i}"), 0, || new_session(0), |_| ());
            assert!(evictions.is_empty(), "session {i} pushed one out");
        }
        assert_eq!(store.len(), 100);
        assert_eq!(SessionStore::new(100_000, 64, 1000, usize::MAX).shards.len(), 64, "a large store keeps its shards");
        // Shared out exactly: never more than the capacity in all.
        let store = SessionStore::new(1000, 8, 1000, usize::MAX);
        let caps: usize = store.shards.iter().map(|s| s.lock().unwrap().cap().get()).sum();
        assert_eq!((store.shards.len(), caps), (3, 1000));
    }

    #[test]
    fn a_session_is_found_by_its_whole_id_and_costs_the_same_whatever_its_length() {
        let store = SessionStore::new(1000, 4, 1000, usize::MAX);
        let long = "x".repeat(256);
        let ids = ["a", "a\0", "ab", "b", "", long.as_str()];
        for (i, id) in ids.iter().enumerate() {
            let (_, created, _) = store.with_session(id, 0, || new_session(0), |s| s.steps = i as u32);
            assert!(created, "{id:?} found another's session");
        }
        for (i, id) in ids.iter().enumerate() {
            assert_eq!(store.with_existing(id, 0, |s| s.steps), Some(i as u32), "{id:?}");
        }
        // The store keeps a key of 16 bytes, not the id: the longest id weighs what the shortest does.
        assert_eq!(store.bytes(), ids.len() * new_session(0).weight());
        assert!(matches!(store.remove(&long, 0), Removal::Ended(s) if s.steps == 5));
        assert!(matches!(store.remove(&long, 0), Removal::Missing));
        assert_eq!(store.with_existing("a", 0, |s| s.steps), Some(0));
    }

    /// What the store's sessions weigh, added up one by one, with their (unshared) tool lists.
    fn weights(store: &SessionStore) -> usize {
        let each = |s: &Session| s.weight() + s.setup.as_ref().map_or(0, |x| x.tools.bytes);
        store.shards.iter().map(|s| s.lock().unwrap().iter().map(|(_, s)| each(s)).sum::<usize>()).sum()
    }

    fn big_setup(n: usize, store: &SessionStore) -> Box<Setup> {
        let tools: Vec<String> = (0..1000).map(|i| format!("{n:05}-{i:04}-{}", "x".repeat(245))).collect();
        let labels = (0..64).map(|i| (format!("{n:05}-{i:02}-{}", "k".repeat(240)), "v".repeat(1024))).collect();
        Box::new(Setup::new(
            DeclaredLimits::default(),
            Arc::new(ToolList::new(&tools, store.meter())),
            String::new(),
            labels,
        ))
    }

    #[test]
    fn past_the_byte_budget_the_least_recently_used_go_and_the_count_stays_exact() {
        // StartSession's largest setup is about 340 KB: a few hundred of them took 377 MB, with
        // room in the capacity for a hundred thousand.
        let max = 4 << 20;
        let store = SessionStore::new(100_000, 4, 1_000_000, max);
        let mut memory = 0;
        for n in 0..100 {
            let (_, _, ev) = store.with_session(
                &format!("big-{n}"),
                n as u64,
                || new_session(0),
                |s| {
                    s.setup = Some(big_setup(n, &store));
                },
            );
            memory += ev.iter().filter(|e| **e == Eviction::Memory).count();
            let one = store
                .with_existing(&format!("big-{n}"), n as u64, |s| s.weight() + s.setup.as_ref().unwrap().tools.bytes)
                .unwrap();
            assert!(store.bytes() <= max + one, "{} bytes held past a budget of {max}", store.bytes());
            assert_eq!(store.bytes(), weights(&store), "the running count is the sum of the weights");
        }
        assert!(memory > 80, "{memory} evicted for memory");
        assert_eq!(memory + store.len(), 100);
        // A small session keeps its place among big ones only while it is used.
        let (_, _, ev) = store.with_session("small", 200, || new_session(200), |s| s.steps = 1);
        assert!(ev.iter().all(|e| *e == Eviction::Memory));
        // Those that go are the least recently used of the whole store, whatever their shard.
        let small = SessionStore::new(100_000, 8, 1_000_000, 50 * new_session(0).weight());
        for i in 0..100u64 {
            small.with_session(&format!("run-{i:02}"), i, || new_session(i), |_| ());
        }
        let held: Vec<u64> =
            (0..100u64).filter(|i| small.with_existing(&format!("run-{i:02}"), 100, |_| ()).is_some()).collect();
        assert!(held.len() >= 45 && held.len() <= 50, "{held:?}");
        assert_eq!(held, (100 - held.len() as u64..100).collect::<Vec<_>>(), "the newest are kept");
        // Every way out gives back its count.
        for n in 0..100 {
            store.remove(&format!("big-{n}"), 300);
        }
        store.expire_idle(10_000_000);
        assert_eq!((store.len(), store.bytes()), (0, 0));
    }

    #[test]
    fn the_count_stays_exact_when_a_session_is_pushed_out_or_replaced_after_its_expiry() {
        let store = SessionStore::new(2, 1, 1000, usize::MAX);
        let grow = |s: &mut Session| {
            s.count_error(Category::Timeout);
            s.count_error(Category::Network);
        };
        store.with_session("a", 0, || new_session(0), grow);
        store.with_session("b", 1, || new_session(1), grow);
        // Past the capacity: the least recently used goes.
        let (_, _, ev) = store.with_session("c", 2, || new_session(2), grow);
        assert_eq!(ev, vec![Eviction::Capacity]);
        assert_eq!(store.bytes(), weights(&store));
        // Idle past expiry: a new session takes the old one's place.
        let (_, created, ev) = store.with_session("b", 5000, || new_session(5000), |_| ());
        assert_eq!((created, ev), (true, vec![Eviction::Idle]));
        assert_eq!(store.bytes(), weights(&store));
        assert_eq!(store.with_existing("b", 5000, |s| s.errors_by_category.len()), Some(0));
    }

    #[test]
    fn a_kept_retry_plan_gives_back_the_largest_plan_a_policy_can_make() {
        use crate::backoff;
        let largest = RetryPlan {
            delay_ms: 2 * backoff::LONGEST_DELAY_MS,
            attempt: backoff::MOST_RETRIES,
            attempts_left: backoff::MOST_RETRIES - 1,
            provider_delay: true,
        };
        let smallest = RetryPlan { delay_ms: 0, attempt: 1, attempts_left: 0, provider_delay: false };
        for plan in [largest, smallest] {
            assert_eq!(KeptRetry::keep(&plan).plan(), plan);
        }
        assert_eq!(std::mem::size_of::<Option<KeptRetry>>(), 8);
    }

    #[test]
    fn idle_sessions_expire() {
        let store = SessionStore::new(10, 2, 1000, usize::MAX);
        store.with_session("a", 0, || new_session(0), |_| ());
        store.with_session("b", 900, || new_session(900), |_| ());
        assert_eq!(store.expire_idle(1000), 1);
        assert_eq!(store.len(), 1);
        assert!(store.with_existing("a", 1000, |_| ()).is_none());
        assert!(store.with_existing("b", 1000, |_| ()).is_some());
        let (_, created, ev) = store.with_session("b", 5000, || new_session(5000), |_| ());
        assert!(created, "an idle session is not resumed");
        assert_eq!(ev, vec![Eviction::Idle]);
        assert_eq!(store.len(), 1);
    }

    #[test]
    fn a_session_keeps_counters_for_at_most_tool_counters_tools_and_drops_idle_ones_first() {
        let mut s = new_session(0);
        s.tool_mut("failing").consecutive_failures = 2;
        for i in 0..TOOL_COUNTERS * 2 {
            s.tool_mut(&format!("tool-{i}"));
        }
        assert_eq!(s.tool_stats.len(), TOOL_COUNTERS);
        assert_eq!(s.tool_mut("failing").consecutive_failures, 2, "a tool with counts is kept over idle ones");
        let newest = format!("tool-{}", TOOL_COUNTERS * 2 - 1);
        assert!(s.tool_stats.iter().any(|t| *t.tool == *newest));

        // When every tool has counts, the oldest makes room.
        for t in &mut s.tool_stats {
            t.retries = 1;
        }
        s.tool_mut("one more");
        assert_eq!(s.tool_stats.len(), TOOL_COUNTERS);
        assert!(!s.tool_stats.iter().any(|t| &*t.tool == "failing"), "the oldest went");
    }

    #[test]
    fn repeats_fold_and_history_is_bounded() {
        let mut s = new_session(0);
        let shapes = crate::shapes::Shapes::new(Default::default());
        let entry = |tool: &str, fp| HistoryEntry {
            tool: tool.into(),
            category: Category::Timeout,
            message: shapes.keep("m"),
            suggestion: ArcStr::new(),
            shown: fp,
            count: 1,
            at: SessionTime::default(),
            action: Action::Retry,
            resolved: false,
        };
        s.push_error(entry("a", 1), 2);
        s.push_error(entry("a", 1), 2);
        assert_eq!((s.history.len(), s.history[0].count), (1, 2));
        s.push_error(entry("b", 2), 2);
        s.push_error(entry("c", 3), 2);
        assert_eq!(s.history.len(), 2);
        assert_eq!(s.dropped_unresolved, 2);
        s.resolve("b");
        assert!(s.history[0].resolved);
    }

    #[test]
    #[cfg(target_pointer_width = "64")]
    fn what_a_session_keeps_per_error_stays_as_small_as_measured() {
        use std::mem::size_of;
        // The store's entry is the session, its key and two list links: 192 bytes at most is one
        // of jemalloc's size classes (200 took 224, 232 took 256, and 272 took 320). Texts are single pointers
        // (`ArcStr`), 8 bytes less each than `Arc<str>`: 1,651 to 1,406 bytes per session in
        // `session_memory`.
        assert!(size_of::<Session>() + size_of::<Key>() + 16 <= 192, "{}", size_of::<Session>());
        // 40 and 16 bytes are size classes too: three errors' entries take a block of 128 (160 at
        // 48 bytes each), three tools' counters one of 48 (80 at 24).
        assert!(size_of::<HistoryEntry>() <= 40, "{}", size_of::<HistoryEntry>());
        assert!(size_of::<Remembered>() <= 64, "{}", size_of::<Remembered>());
        assert!(size_of::<Details>() <= 64, "{}", size_of::<Details>());
        assert!(size_of::<ToolStats>() <= 16, "{}", size_of::<ToolStats>());
    }

    #[test]
    fn a_time_in_a_session_keeps_its_milliseconds_up_to_34_years() {
        for ms in [0, 1, 255, 256, 86_400_000, u64::from(u32::MAX) + 1, SessionTime::MAX_MS] {
            assert_eq!(SessionTime::from_ms(ms).ms(), ms);
        }
        assert_eq!(SessionTime::MAX_MS / (365 * 86_400_000), 34, "years");
        assert_eq!(SessionTime::from_ms(SessionTime::MAX_MS + 1).ms(), SessionTime::MAX_MS);
        assert_eq!(SessionTime::from_ms(u64::MAX).ms(), SessionTime::MAX_MS);
    }

    #[test]
    fn a_tools_counters_stop_at_their_bounds_and_a_success_clears_them() {
        let mut t = ToolStats { tool: "t".into(), consecutive_failures: 0, retries: 0, last_delay_ms: 0 };
        for _ in 0..70_000 {
            t.fail();
        }
        assert_eq!(t.consecutive_failures, MOST_CONSECUTIVE_FAILURES);
        let plan = |attempt, delay_ms| RetryPlan { delay_ms, attempt, attempts_left: 0, provider_delay: false };
        t.retry(&plan(100, 2 * crate::backoff::LONGEST_DELAY_MS));
        assert_eq!((t.retries, u64::from(t.last_delay_ms)), (100, 2 * crate::backoff::LONGEST_DELAY_MS));
        // Past the bounds no plan reaches, the largest values.
        t.retry(&plan(u32::MAX, u64::MAX));
        assert_eq!((t.retries, t.last_delay_ms), (u16::MAX, u32::MAX));
        t.succeed();
        assert_eq!((t.consecutive_failures, t.retries, t.last_delay_ms), (0, 0, 0));
    }

    #[test]
    fn an_error_repeats_with_its_message_fingerprint_and_its_location() {
        let shapes = crate::shapes::Shapes::new(Default::default());
        let (message, other) = (shapes.keep("timed out after 30.1s"), shapes.keep("connection refused"));
        let shown = |location: &str| crate::fingerprint::of_shown(message.fingerprint(), location);
        let entry = HistoryEntry {
            tool: "search".into(),
            category: Category::Timeout,
            message: message.clone(),
            suggestion: ArcStr::new(),
            shown: low_half(shown("app.py:12 in search")),
            count: 1,
            at: SessionTime::default(),
            action: Action::Retry,
            resolved: false,
        };
        // The same words but for a number: one fingerprint.
        let again = shapes.keep("timed out after 30.4s");
        assert!(entry.is_same_error("search", &again, shown("app.py:12 in search")));
        assert!(!entry.is_same_error("fetch", &again, shown("app.py:12 in search")), "another tool");
        // Its line aside (a fingerprint folds numbers and paths), as before.
        assert!(entry.is_same_error("search", &again, shown("app.py:40 in search")));
        assert!(!entry.is_same_error("search", &again, shown("app.py:12 in fetch")), "another location");
        assert!(!entry.is_same_error("search", &again, shown("")), "no location");
        let elsewhere = crate::fingerprint::of_shown(other.fingerprint(), "app.py:12 in search");
        assert!(!entry.is_same_error("search", &other, elsewhere), "another message");
        // A message with the other's fingerprint but whose shown fingerprint's low half is this one's.
        assert!(!entry.is_same_error("search", &other, u64::from(entry.shown)), "another message, same low half");
    }
}
