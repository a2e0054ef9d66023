//! Config files: arbitrary TOML parsed, checked and compiled into a policy.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rebound::config::Config;
use rebound::policy::Policy;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(config) = Config::parse(text, "fuzz.toml") {
        let _ = Policy::from_config(&config);
        let _ = config.to_toml();
    }
});
