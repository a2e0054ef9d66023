//! The pause a session store's shard takes when its table grows. A shard's table is made
//! small and doubles as sessions come (`session::shard`: memory on demand, not for a
//! capacity that may never fill), and a doubling moves every session the shard holds while
//! its lock is held: the sessions of that shard wait for it. This puts sessions one at a time
//! into a store of one shard (`shards = 1`, the largest capacity) and prints each insert that
//! took over a millisecond, the doublings among them, with the sessions moved. Figures in
//! wall time: run it on a quiet machine. `cargo bench --bench session_growth [SESSIONS]`
//! (default 1,900,000: the doublings at 917,504 and 1,835,008 sessions).

use rebound::rng::Rng;
use rebound::session::{Session, SessionStore};
use std::time::{Duration, Instant};

rebound::use_jemalloc!();

fn main() {
    // cargo bench passes `--bench`; a number is the sessions to put in.
    let sessions = std::env::args().skip(1).find_map(|a| a.parse::<usize>().ok()).unwrap_or(1_900_000);
    let store = SessionStore::new(100_000_000, 1, u64::MAX / 4, 1 << 40);
    let ids: Vec<String> = (0..sessions).map(|i| format!("agent-run-{i:08}")).collect();
    let started = Instant::now();
    let mut slow = Vec::new();
    for (i, id) in ids.iter().enumerate() {
        let at = Instant::now();
        store.with_session(id, 0, || Session::new(0, Rng::new(i as u64)), |_| ());
        let took = at.elapsed();
        if took > Duration::from_millis(1) {
            slow.push((i, took));
        }
    }
    println!("{sessions} sessions into one shard in {:.2} s", started.elapsed().as_secs_f64());
    for (held, took) in slow {
        println!(
            "the insert after {held} sessions: {:.1} ms ({:.0} ns a session held)",
            took.as_secs_f64() * 1e3,
            took.as_secs_f64() * 1e9 / held.max(1) as f64
        );
    }
}
