//! `rebound replay` input: arbitrary bytes as JSON lines through a real engine.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rebound::clock::ManualClock;
use rebound::config::Config;
use rebound::engine::{Engine, EngineSettings};
use rebound::metrics::Metrics;
use rebound::policy::Policy;
use rebound::replay::replay;
use std::sync::{Arc, LazyLock};

/// One engine for the whole run (compiling the rules per input would leave little time to fuzz);
/// its sessions live on from input to input, as a long replay's would.
static ENGINE: LazyLock<(Engine, Arc<ManualClock>)> = LazyLock::new(|| {
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let settings = EngineSettings::from_config(&Config::default(), 1);
    (Engine::new(Policy::default(), settings, clock.clone(), Arc::new(Metrics::new(10))), clock)
});

fuzz_target!(|data: &[u8]| {
    let (engine, clock) = &*ENGINE;
    let mut out = Vec::new();
    let _ = replay(data, &mut out, engine, clock);
});
