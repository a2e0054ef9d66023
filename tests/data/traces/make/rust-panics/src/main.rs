//! Rust failures for the trace set: each scenario really panics; the panic message
//! (with RUST_BACKTRACE=1, and without) becomes one file. Run by regenerate.sh.
use std::collections::HashMap;

fn port(text: &str) -> u16 {
    text.parse().unwrap()
}

fn load(path: &str) -> String {
    std::fs::read_to_string(path).expect("could not read the tool registry")
}

fn nth_score(scores: &[u32], i: usize) -> u32 {
    scores[i]
}

fn main() {
    match std::env::args().nth(1).as_deref() {
        Some("unwrap") => println!("{}", port("80a")),
        Some("expect") => println!("{}", load("/etc/agent/tools.toml")),
        Some("index") => println!("{}", nth_score(&[1, 2, 3], 7)),
        Some("thread") => {
            let handle = std::thread::Builder::new()
                .name("worker-3".into())
                .spawn(|| {
                    let limits: HashMap<&str, u32> = HashMap::new();
                    limits["search"]
                })
                .unwrap();
            handle.join().unwrap();
        }
        other => panic!("unknown scenario {other:?}"),
    }
}
