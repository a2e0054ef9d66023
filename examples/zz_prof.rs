use rebound::clock::SystemClock;
use rebound::config::Config;
use rebound::engine::{Engine, EngineSettings};
use rebound::metrics::Metrics;
use rebound::model::Outcome;
use rebound::policy::Policy;
use std::sync::Arc;
#[path = "../benches/support/workload.rs"]
mod workload;
rebound::use_jemalloc!();
fn main() {
    let n: u64 = std::env::args().nth(1).unwrap().parse().unwrap();
    let mode = std::env::args().nth(2).unwrap_or_default();
    let config = Config::default();
    let engine = Engine::new(
        Policy::from_config(&config).unwrap(),
        EngineSettings::from_config(&config, 1),
        Arc::new(SystemClock::new()),
        Arc::new(Metrics::new(200)),
    );
    engine.warm_up();
    let message: String = workload::URLLIB3.chars().take(200).collect();
    for i in 0..n {
        let outcome = if mode == "ok" {
            let mut o = workload::outcome(1, i);
            o.ok = true;
            o.message.clear();
            o.exception_type.clear();
            o.http_status = 0;
            o.headers.clear();
            rebound::convert::outcome(o).unwrap()
        } else if mode == "trace" {
            Outcome {
                session_id: format!("s-{}", i % 1000),
                tool: "search".into(),
                detail: include_str!("../tests/data/traces/py-requests-timeout.txt").into(),
                ok: i % 4 == 0,
                ..Outcome::default()
            }
        } else if mode == "workload" {
            rebound::convert::outcome(workload::outcome(1, i)).unwrap()
        } else {
            Outcome {
                session_id: format!("s-{}", i % 1000),
                tool: "search".into(),
                message: message.clone(),
                ok: i % 4 == 0,
                ..Outcome::default()
            }
        };
        std::hint::black_box(engine.report_owned(outcome).unwrap());
    }
}
