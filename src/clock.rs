//! Time, injected: the engine asks a `Clock`, so tests set the time exactly.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// A source of time: a monotonic millisecond count and the wall clock.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Milliseconds on a monotonic clock (only differences mean anything).
    fn now_ms(&self) -> u64;
    /// Milliseconds since the Unix epoch, for HTTP dates in Retry-After.
    fn wall_ms(&self) -> u64;
}

/// The real clock.
#[derive(Debug)]
pub struct SystemClock {
    start: Instant,
}

impl SystemClock {
    /// A clock starting now.
    pub fn new() -> Self {
        SystemClock { start: Instant::now() }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }

    fn wall_ms(&self) -> u64 {
        SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
    }
}

/// A clock that moves only when told: for tests and for replay.
#[derive(Debug, Default)]
pub struct ManualClock {
    now: AtomicU64,
    wall_start: u64,
}

impl ManualClock {
    /// A clock at monotonic 0 whose wall time starts at `wall_start_ms`.
    pub fn new(wall_start_ms: u64) -> Self {
        ManualClock { now: AtomicU64::new(0), wall_start: wall_start_ms }
    }

    /// Moves the clock forward.
    pub fn advance(&self, ms: u64) {
        self.now.fetch_add(ms, Ordering::SeqCst);
    }

    /// Sets the monotonic time (never backwards).
    pub fn set(&self, ms: u64) {
        self.now.fetch_max(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.now.load(Ordering::SeqCst)
    }

    fn wall_ms(&self) -> u64 {
        self.wall_start + self.now_ms()
    }
}

/// tokio's clock, so integration tests can pause and advance time.
#[derive(Debug)]
pub struct TokioClock {
    start: tokio::time::Instant,
    wall_start: u64,
}

impl TokioClock {
    /// A clock starting now.
    pub fn new() -> Self {
        TokioClock { start: tokio::time::Instant::now(), wall_start: SystemClock::new().wall_ms() }
    }
}

impl Default for TokioClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for TokioClock {
    fn now_ms(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }

    fn wall_ms(&self) -> u64 {
        self.wall_start + self.now_ms()
    }
}
