//! Real Rust failures for holdout-real.jsonl: each case runs a crate against something on this machine
//! (a loopback HTTP server started here, a closed port, the resolver, files) and prints the outcome a
//! Rust agent reports over gRPC (there is no Rust client), one JSON line per case, labelled beforehand
//! by DESIGN.md's category table: the error's text with its sources after it, joined by ": " as
//! anyhow's `{:#}` writes a chain (reqwest 0.12's own Display leaves its sources out: one case shows
//! that too, as `to_string()` gives it).
//!
//! Run: `cargo run -q > rust.jsonl` in this directory (the crates' versions are in Cargo.lock after
//! the run). Random ports are written as 8787 (the server) and 8799 (a closed port).

use serde::Deserialize;
use serde_json::json;
use std::error::Error;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// An error and its sources, joined by ": ", as anyhow's `{:#}` writes them.
fn chain(error: &(dyn Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

struct Run {
    port: u16,
    closed: u16,
}

impl Run {
    fn emit(&self, id: &str, category: &str, source: &str, message: String) {
        let retryable = matches!(category, "timeout" | "rate_limited" | "network" | "unavailable" | "internal");
        let message = message
            .replace(&format!(":{}", self.port), ":8787")
            .replace(&format!(":{}", self.closed), ":8799");
        let line = json!({
            "id": id, "source": source, "category": category, "retryable": retryable, "tags": ["message-only"],
            "outcome": {"message": message},
        });
        println!("{line}");
    }
}

/// The OpenAI API's error body.
fn openai(message: &str, kind: &str, code: &str) -> String {
    json!({"error": {"message": message, "type": kind, "param": null, "code": code}}).to_string()
}

/// Answers each request by its path's first part: a status and a body, or a wait first ("sleep"), or
/// an HTML page where JSON was expected ("html").
async fn serve(listener: TcpListener) {
    loop {
        let Ok((mut socket, _)) = listener.accept().await else { return };
        tokio::spawn(async move {
            let mut buf = vec![0u8; 4096];
            let n = socket.read(&mut buf).await.unwrap_or(0);
            let request = String::from_utf8_lossy(&buf[..n]).to_string();
            let path = request.split_whitespace().nth(1).unwrap_or("/").to_string();
            let route = path.trim_start_matches('/').split('/').next().unwrap_or("").to_string();
            let (status, body) = match route.as_str() {
                "429" => ("429 Too Many Requests", openai("Rate limit reached for gpt-4o in organization org-abc on requests per min (RPM): Limit 500, Used 500, Requested 1. Please try again in 120ms.", "requests", "rate_limit_exceeded")),
                "401" => ("401 Unauthorized", openai("Incorrect API key provided: sk-proj-****************************abcd. You can find your API key at https://platform.openai.com/account/api-keys.", "invalid_request_error", "invalid_api_key")),
                "404" => ("404 Not Found", "{\"detail\":\"Not Found\"}".to_string()),
                "503" => ("503 Service Unavailable", "upstream connect error or disconnect/reset before headers".to_string()),
                "html" => ("200 OK", "<html><body>Please enable JavaScript</body></html>".to_string()),
                "sleep" => {
                    tokio::time::sleep(Duration::from_secs(5)).await;
                    ("200 OK", "{}".to_string())
                }
                _ => ("200 OK", "{}".to_string()),
            };
            let response = format!(
                "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = socket.write_all(response.as_bytes()).await;
        });
    }
}

#[derive(Debug, Deserialize)]
#[allow(dead_code)]
struct SearchArgs {
    query: String,
    limit: Option<u32>,
}

#[tokio::main]
async fn main() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
    let port = listener.local_addr().expect("its address").port();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("a port").local_addr().expect("its address").port();
    tokio::spawn(serve(listener));
    let run = Run { port, closed };

    let reqwest_source = "reqwest 0.12 (hyper 1, against the loopback server)";
    let client = reqwest::Client::builder().timeout(Duration::from_millis(500)).build().expect("a client");
    let url = |route: &str| format!("http://127.0.0.1:{port}/{route}/v1/chat");

    match client.get(format!("http://127.0.0.1:{closed}/v1/search")).send().await {
        Err(e) => {
            run.emit("r-rust-reqwest-refused", "network", reqwest_source, chain(&e));
            run.emit("r-rust-reqwest-refused-display", "network", reqwest_source, e.to_string());
        }
        Ok(_) => eprintln!("r-rust-reqwest-refused: did not fail"),
    }
    match client.get(url("sleep")).send().await {
        Err(e) => run.emit("r-rust-reqwest-timeout", "timeout", reqwest_source, chain(&e)),
        Ok(_) => eprintln!("r-rust-reqwest-timeout: did not fail"),
    }
    match reqwest::Client::new().get("http://api.example.invalid/v1/search").send().await {
        Err(e) => run.emit("r-rust-reqwest-dns", "network", reqwest_source, chain(&e)),
        Ok(_) => eprintln!("r-rust-reqwest-dns: did not fail"),
    }
    for (route, category) in [("429", "rate_limited"), ("401", "auth"), ("404", "not_found"), ("503", "unavailable")] {
        let id = format!("r-rust-reqwest-{route}");
        match client.get(url(route)).send().await.and_then(|r| r.error_for_status()) {
            Err(e) => run.emit(&id, category, reqwest_source, chain(&e)),
            Ok(_) => eprintln!("{id}: did not fail"),
        }
    }
    match client.get(url("html")).send().await {
        Ok(response) => match response.json::<serde_json::Value>().await {
            Err(e) => run.emit("r-rust-reqwest-json", "format", reqwest_source, chain(&e)),
            Ok(_) => eprintln!("r-rust-reqwest-json: did not fail"),
        },
        Err(e) => eprintln!("r-rust-reqwest-json: {e}"),
    }

    let serde_source = "serde_json 1";
    let cases: [(&str, &str, &str); 4] = [
        ("r-rust-serde-json-bad", "format", "<html><body>Please enable JavaScript</body></html>"),
        ("r-rust-serde-json-eof", "format", "{\"query\": \"rust"),
        ("r-rust-serde-missing-field", "validation", "{\"limit\": 5}"),
        ("r-rust-serde-wrong-type", "validation", "{\"query\": 42}"),
    ];
    for (id, category, text) in cases {
        match serde_json::from_str::<SearchArgs>(text) {
            Err(e) => run.emit(id, category, serde_source, chain(&e)),
            Ok(_) => eprintln!("{id}: did not fail"),
        }
    }

    let tokio_source = "tokio 1 (tokio::time::timeout)";
    match tokio::time::timeout(Duration::from_millis(50), tokio::time::sleep(Duration::from_secs(5))).await {
        Err(e) => run.emit("r-rust-tokio-timeout", "timeout", tokio_source, chain(&e)),
        Ok(()) => eprintln!("r-rust-tokio-timeout: did not fail"),
    }
    match tokio::net::TcpStream::connect(("127.0.0.1", closed)).await {
        Err(e) => run.emit("r-rust-tcp-refused", "network", "tokio 1 (TcpStream::connect)", chain(&e)),
        Ok(_) => eprintln!("r-rust-tcp-refused: did not fail"),
    }

    let std_source = "Rust std";
    let dir = std::env::temp_dir().join(format!("rebound-rust-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    match std::fs::read_to_string(dir.join("input.csv")) {
        Err(e) => run.emit("r-rust-fs-missing", "not_found", std_source, chain(&e)),
        Ok(_) => eprintln!("r-rust-fs-missing: did not fail"),
    }
    match std::fs::create_dir(&dir) {
        Err(e) => run.emit("r-rust-fs-exists", "conflict", std_source, chain(&e)),
        Ok(()) => eprintln!("r-rust-fs-exists: did not fail"),
    }
    match "twelve".parse::<i64>() {
        Err(e) => run.emit("r-rust-parse-int", "validation", std_source, chain(&e)),
        Ok(_) => eprintln!("r-rust-parse-int: did not fail"),
    }
    let _ = std::fs::remove_dir_all(&dir);
}
