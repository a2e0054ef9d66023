//! `rebound replay` input: arbitrary bytes as JSON lines through a real engine.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rebound::clock::ManualClock;
use rebound::config::Config;
use rebound::engine::{Engine, EngineSettings};
use rebound::metrics::Metrics;
use rebound::policy::Policy;
use rebound::replay::replay;
use std::sync::Arc;

fuzz_target!(|data: &[u8]| {
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let engine =
        Engine::new(Policy::default(), EngineSettings::from_config(&Config::default(), 1), clock.clone(), Arc::new(Metrics::new(10)));
    let mut out = Vec::new();
    let _ = replay(data, &mut out, &engine, &clock);
});
