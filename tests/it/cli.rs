//! The binary's commands: replay, classify, check-config, print-config.

use crate::common::run_cli;
use serde_json::{json, Value};

/// Replays JSON lines through the real binary and returns the verdict lines.
fn replay(lines: &[Value], extra: &[&str]) -> Vec<Value> {
    let input: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let mut args = vec!["replay", "-", "--seed", "1"];
    args.extend_from_slice(extra);
    let (code, stdout, stderr) = run_cli(&args, Some(&input));
    assert_eq!(code, 0, "{stderr}");
    let out: Vec<Value> = stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(out.len(), lines.len());
    out
}

fn fail(session: &str, tool: &str, message: &str) -> Value {
    json!({"session_id": session, "tool": tool, "message": message})
}

#[test]
fn three_consecutive_failures_escalate_and_a_success_resets() {
    let mut lines = vec![];
    for i in 0..2 {
        lines.push(json!({"session_id": "c", "tool": "search", "kind": "timeout", "message": format!("timed out after {i}.5s")}));
    }
    lines.push(json!({"session_id": "c", "tool": "search", "ok": true}));
    for i in 0..3 {
        lines.push(json!({"session_id": "c", "tool": "search", "kind": "timeout", "message": format!("timed out after {i}.7s")}));
    }
    let out = replay(&lines, &[]);
    let actions: Vec<&str> = out.iter().map(|v| v["action"].as_str().unwrap()).collect();
    assert_eq!(actions, ["retry", "retry", "continue", "retry", "retry", "escalate"]);
    assert_eq!(out[5]["breaker"]["reason"], "consecutive_failures");
    assert_eq!(out[5]["breaker"]["session_state"], "escalated");
    assert!(out[5]["escalation"].as_str().unwrap().contains("3 consecutive failures of tool `search`"));
}

#[test]
fn ten_errors_escalate_and_five_identical_abort() {
    let words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"];
    let lines: Vec<Value> =
        words.iter().enumerate().map(|(i, w)| fail("ten", &format!("tool{i}"), &format!("{w} failed"))).collect();
    let out = replay(&lines, &[]);
    assert!(out[..9].iter().all(|v| v["action"] != "escalate"));
    assert_eq!(out[9]["action"], "escalate");
    assert_eq!(out[9]["breaker"]["reason"], "session_errors");

    // Identical: same tool, messages differing only in numbers; not retryable so the
    // consecutive breaker (3) would escalate first: raise it to see the identical breaker.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("c.toml");
    std::fs::write(&config, "[breakers]\ntool_consecutive_failures = 10\n").unwrap();
    let lines: Vec<Value> =
        (0..5).map(|i| fail("same", "calc", &format!("invalid literal for int() with base 10: '{i}a'"))).collect();
    let out = replay(&lines, &["--config", config.to_str().unwrap()]);
    assert_eq!(out[3]["action"], "recover");
    assert_eq!(out[4]["action"], "abort");
    assert_eq!(out[4]["breaker"]["reason"], "identical_errors");
    assert_eq!(out[4]["breaker"]["identical_errors"], 5);
}

#[test]
fn backoff_is_within_twenty_percent_and_retry_after_wins() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("c.toml");
    std::fs::write(&config, "[breakers]\ntool_consecutive_failures = 10\n").unwrap();
    let mut lines: Vec<Value> = (0..4)
        .map(|i| json!({"session_id": "b", "tool": "api", "http_status": 503, "message": format!("busy {i}")}))
        .collect();
    lines.push(json!({"session_id": "r", "tool": "limited_api", "http_status": 429, "headers": {"Retry-After": "7"}, "message": "slow down"}));
    lines.push(json!({"session_id": "r2", "tool": "busy_api", "http_status": 503, "headers": {"retry-after-ms": "1500"}, "message": "busy"}));
    let out = replay(&lines, &["--config", config.to_str().unwrap()]);
    for (i, nominal) in [1000.0, 2000.0, 4000.0].iter().enumerate() {
        let d = out[i]["delay_ms"].as_f64().unwrap();
        assert!(d >= nominal * 0.8 && d <= nominal * 1.2, "retry {i}: {d}");
        assert_eq!(out[i]["attempt"], i + 1);
    }
    assert_eq!(out[3]["action"], "recover", "three retries used up");
    assert_eq!(out[3]["delay_ms"], 0);
    let d = out[4]["delay_ms"].as_u64().unwrap();
    assert!((7000..=8400).contains(&d), "{d}");
    let d = out[5]["delay_ms"].as_u64().unwrap();
    assert!((1500..=1800).contains(&d), "{d}");
    // A provider delay past the maximum (5 min) is not waited for: a human decides.
    let long = json!({"session_id": "long", "tool": "slow_api", "http_status": 429, "headers": {"retry-after": "3600"}, "message": "quota window"});
    let out_long = replay(&[long], &[]);
    assert_eq!(
        (out_long[0]["action"].as_str(), out_long[0]["breaker"]["reason"].as_str()),
        (Some("escalate"), Some("delay_too_long"))
    );
    // The same seed gives the same delays.
    assert_eq!(out, replay(&lines, &["--config", config.to_str().unwrap()]));
}

#[test]
fn snippets_are_shaped_cut_and_redacted() {
    let long = format!("upstream said {} end", "blah ".repeat(100));
    let lines = vec![
        json!({"session_id": "s", "tool": "search", "exception_type": "ValueError", "message": "query must not be empty"}),
        json!({"session_id": "s", "tool": "fetch", "message": long}),
        json!({"session_id": "s", "tool": "llm", "http_status": 401, "message": "Incorrect API key provided: sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789abcd"}),
        json!({"session_id": "s2", "tool": "db", "code": "ECONNREFUSED", "message": "could not connect to postgres://app:hunter2@db.internal:5432/app"}),
    ];
    let out = replay(&lines, &[]);
    assert_eq!(
        out[0]["snippet"],
        "<error tool=\"search\" type=\"validation\">\nValueError: query must not be empty\nsuggestion: Fix the arguments to fit the schema.\n</error>\nPlease analyze what went wrong and try a different approach."
    );
    let snippet = out[1]["snippet"].as_str().unwrap();
    // The message is the line after the opening tag.
    let message = snippet.lines().nth(1).unwrap();
    assert_eq!(message.chars().count(), 200);
    assert!(message.contains("characters elided …]") && message.ends_with(" end"), "{message}");
    let all = serde_json::to_string(&out).unwrap();
    assert!(!all.contains("AbCdEfGhIjKlMnOpQrStUvWxYz0123456789abcd"), "{all}");
    assert!(!all.contains("hunter2"), "{all}");
    assert!(out[2]["snippet"].as_str().unwrap().contains("[REDACTED:openai_key]"));
    assert!(out[3]["snippet"].as_str().unwrap().contains("postgres://app:[REDACTED:url_password]@db.internal"));
}

#[test]
fn a_repeated_call_id_returns_the_first_verdict_and_counts_once() {
    let o = json!({"session_id": "idem", "call_id": "c-1", "tool": "api", "http_status": 503, "message": "busy"});
    let out = replay(&[o.clone(), o.clone(), o], &[]);
    assert_eq!(out[0]["delay_ms"], out[1]["delay_ms"]);
    assert_eq!(out[1]["replayed"], true);
    assert_eq!(out[2]["breaker"]["session_errors"], 1);
    assert_eq!(out[2]["breaker"]["steps"], 1);
}

#[test]
fn default_actions_follow_the_design() {
    let cases = [
        (json!({"http_status": 401, "message": "Unauthorized"}), "escalate", "auth"),
        (json!({"exception_type": "ValueError", "message": "bad value"}), "recover", "validation"),
        (json!({"kind": "unknown_tool", "message": "no such tool"}), "reclassify", "unknown_tool"),
        (json!({"kind": "cancelled", "message": ""}), "abort", "cancelled"),
        (
            json!({"kind": "invalid_tool_call", "message": "Expecting value: line 1 column 1 (char 0)"}),
            "recover",
            "format",
        ),
        (json!({"kind": "no_tool_call"}), "recover", "format"),
        (
            json!({"http_status": 400, "message": "This model's maximum context length is 8192 tokens"}),
            "replan",
            "context_length",
        ),
        (json!({"http_status": 404, "message": "Not Found"}), "recover", "not_found"),
    ];
    for (i, (fields, action, category)) in cases.iter().enumerate() {
        let mut line = fields.clone();
        line["session_id"] = json!(format!("d{i}"));
        line["tool"] = json!("t");
        let out = replay(&[line], &[]);
        assert_eq!(
            (out[0]["action"].as_str().unwrap(), out[0]["category"].as_str().unwrap()),
            (*action, *category),
            "{fields}"
        );
    }
}

#[test]
fn replay_names_the_bad_line() {
    let (code, _, stderr) = run_cli(&["replay", "-"], Some("{\"session_id\":\"s\",\"tool\":\"t\"}\n{not json}\n"));
    assert_eq!(code, 2);
    assert!(stderr.contains("line 2"), "{stderr}");
    let (code, _, stderr) = run_cli(&["replay", "/nonexistent/file.jsonl"], None);
    assert_eq!(code, 2);
    assert!(stderr.contains("/nonexistent/file.jsonl"), "{stderr}");
}

#[test]
fn classify_explains_the_deciding_rule() {
    let (code, stdout, stderr) =
        run_cli(&["classify", "--message", "upstream request timeout", "--http-status", "504", "--explain"], None);
    assert_eq!(code, 0, "{stderr}");
    let v: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["category"], "unavailable");
    assert_eq!(v["action"], "retry");
    assert_eq!(v["explain"]["winner"], v["rule"]);
    let matched: Vec<&str> =
        v["explain"]["matched"].as_array().unwrap().iter().map(|m| m["rule"].as_str().unwrap()).collect();
    assert!(matched.contains(&"message.timeout"), "{matched:?}");
    assert_eq!(v["explain"]["signals"]["http_status"], 504);
    let (code, _, stderr) = run_cli(&["classify", "--message", "x", "--kind", "nope"], None);
    assert_eq!(code, 2);
    assert!(stderr.contains("--kind \"nope\""), "{stderr}");
    // A tool name every RPC refuses was classified as if it were one.
    for tool in ["", "  ", "a\u{7}b"] {
        let (code, _, stderr) = run_cli(&["classify", "--message", "x", "--tool", tool], None);
        assert_eq!(code, 2, "{tool:?}: {stderr}");
        assert!(stderr.contains(&format!("--tool {tool:?}: must not")), "{stderr}");
    }
    // A header with no name was taken and dropped without a word.
    for header in ["Retry-After 7", ": 7"] {
        let (code, _, stderr) = run_cli(&["classify", "--http-status", "429", "--header", header], None);
        assert_eq!(code, 2, "{header:?}: {stderr}");
        assert!(stderr.contains(&format!("--header {header:?}")), "{stderr}");
    }
}

#[test]
fn check_config_names_unknown_keys_and_print_config_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[retry]\nbase_ms = 500\nmultiplyer = 3\n").unwrap();
    let (code, _, stderr) = run_cli(&["check-config", bad.to_str().unwrap()], None);
    assert_eq!(code, 2);
    assert!(stderr.contains("multiplyer") && stderr.contains("line 3"), "{stderr}");

    let (code, printed, _) = run_cli(&["print-config"], None);
    assert_eq!(code, 0);
    let good = dir.path().join("good.toml");
    std::fs::write(&good, &printed).unwrap();
    let (code, stdout, stderr) = run_cli(&["check-config", good.to_str().unwrap()], None);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("ok"));

    let bad_rule = dir.path().join("rule.toml");
    std::fs::write(&bad_rule, "[[rules]]\nid = \"mine\"\nmessage = [\"(unclosed\"]\ncategory = \"timeout\"\n").unwrap();
    let (code, _, stderr) = run_cli(&["check-config", bad_rule.to_str().unwrap()], None);
    assert_eq!(code, 2);
    assert!(stderr.contains("rule `mine`"), "{stderr}");
}

#[test]
fn a_variable_that_is_not_utf8_is_no_panic_and_a_rebound_one_is_named() {
    use std::os::unix::ffi::OsStrExt;
    let not_utf8 = std::ffi::OsStr::from_bytes(b"\xff");
    let run = |name: &str| {
        let out = std::process::Command::new(crate::common::binary())
            .arg("print-config")
            .env(name, not_utf8)
            .output()
            .unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    // Someone else's variable (a locale's, a neighbour's, the clients' REBOUND_ADDR) is not
    // ours to refuse: it used to panic.
    for name in ["SOMEONE_ELSES", "REBOUND_ADDR", "REBOUND_SERVICE_HOST"] {
        let (code, stderr) = run(name);
        assert_eq!(code, Some(0), "{name}: {stderr}");
    }
    let (code, stderr) = run("REBOUND_RETRY_BASE_MS");
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("REBOUND_RETRY_BASE_MS") && stderr.contains("not UTF-8"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn an_empty_config_file_variable_is_named_not_the_flag() {
    // As a manifest's `value: ""` or a shell's `REBOUND_CONFIG_FILE= rebound` sets it.
    let out = std::process::Command::new(crate::common::binary())
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env("REBOUND_CONFIG_FILE", "")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("REBOUND_CONFIG_FILE is set but empty"), "{stderr}");
    assert!(!stderr.contains("--config"), "{stderr}");
}

#[test]
fn a_redis_password_variable_that_is_not_set_stops_the_start_and_is_named() {
    // It used to be ignored: the sidecar then met Redis without a password and said only NOAUTH.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("rebound.toml");
    std::fs::write(&config, "[state]\nbackend = \"redis\"\nredis_password_env = \"REBOUND_TEST_NO_SUCH_PASSWORD\"\n")
        .unwrap();
    let out = std::process::Command::new(crate::common::binary())
        .args(["serve", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--config"])
        .arg(&config)
        .env_remove("REBOUND_TEST_NO_SUCH_PASSWORD")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("state.redis_password_env") && stderr.contains("REBOUND_TEST_NO_SUCH_PASSWORD"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty(), "it said it was ready: {}", String::from_utf8_lossy(&out.stdout));
}

#[test]
fn serve_refuses_a_listen_flag_the_config_would_refuse() {
    // `--listen unix:` used to start a server on an unnamed socket that nothing could dial.
    for (flag, value) in [("--listen", "unix:"), ("--listen", "nowhere"), ("--metrics-listen", "unix:/tmp/m.sock")] {
        let mut child = std::process::Command::new(crate::common::binary())
            .args(["serve", flag, value])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break Some(status);
            }
            if std::time::Instant::now() > deadline {
                break None;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        let Some(status) = status else {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("{flag} {value}: the sidecar started");
        };
        let mut stderr = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
        assert_eq!(status.code(), Some(2), "{flag} {value}: {stderr}");
        assert!(stderr.contains(&format!("`{flag}` = {value:?}: write it as")), "{stderr}");
    }
}

#[test]
fn a_read_or_write_error_is_said_once() {
    // The OS's reason used to come twice ("Is a directory (os error 21): Is a directory
    // (os error 21)"): once in the message and again as its source in `{:#}`.
    let dir = tempfile::tempdir().unwrap();
    let (code, _, stderr) = run_cli(&["check-config", dir.path().to_str().unwrap()], None);
    assert_eq!(code, 2);
    assert_eq!(stderr.matches("os error 21").count(), 1, "{stderr}");

    // Replay's output on a full disk.
    let input = dir.path().join("outcomes.jsonl");
    std::fs::write(&input, "{\"session_id\":\"w\",\"tool\":\"t\",\"ok\":true}\n").unwrap();
    let Some((code, stderr)) = run_on_a_full_disk(&["replay", input.to_str().unwrap()]) else { return };
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("writing output"), "{stderr}");
    assert_eq!(stderr.matches("os error 28").count(), 1, "{stderr}");
}

/// The binary's exit code and stderr with its stdout on Linux's /dev/full, which
/// refuses every write; None where there is no /dev/full.
fn run_on_a_full_disk(args: &[&str]) -> Option<(Option<i32>, String)> {
    let full = std::fs::OpenOptions::new().write(true).open("/dev/full").ok()?;
    let out = std::process::Command::new(crate::common::binary()).args(args).stdout(full).output().unwrap();
    Some((out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned()))
}

#[test]
fn a_command_whose_output_cannot_be_written_says_so_instead_of_panicking() {
    // print-config and check-config used `print!`, which panics (exit 101) where stdout refuses writes.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("rebound.toml");
    std::fs::write(&config, "").unwrap();
    let config = config.to_str().unwrap();
    for args in [&["print-config"][..], &["check-config", config], &["classify", "--message", "boom"]] {
        let Some((code, stderr)) = run_on_a_full_disk(args) else { return };
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(stderr.starts_with("rebound: error: writing output: No space left on device"), "{args:?}: {stderr}");
    }
    // serve's ready line, which supervisors read: it said only "No space left on device".
    let serve = ["serve", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"];
    let (code, stderr) = run_on_a_full_disk(&serve).unwrap();
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("rebound: error: writing the ready line to stdout: No space left on device"), "{stderr}");
}

#[test]
fn replay_stops_quietly_when_its_reader_goes_away() {
    // `rebound replay big.jsonl | head -1`: it used to end with "error: ... Broken pipe" and exit 2.
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("outcomes.jsonl");
    let line =
        |i: usize| format!("{{\"session_id\":\"p{i}\",\"call_id\":\"{i}\",\"tool\":\"t\",\"kind\":\"timeout\"}}\n");
    // Far more verdicts than a pipe holds (64 KiB), so writing goes on after the reader left.
    std::fs::write(&input, (0..5000).map(line).collect::<String>()).unwrap();
    let mut child = std::process::Command::new(crate::common::binary())
        .args(["replay", input.to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.take().unwrap()), &mut first).unwrap();
    assert!(first.contains("\"call_id\":\"0\""), "{first}");
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!((out.status.code(), stderr.as_ref()), (Some(0), ""));
}

#[test]
fn user_rules_override_defaults_and_add_new_ones_in_replay() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("rules.toml");
    std::fs::write(
        &config,
        r#"
[[rules]]
id = "http.404"
http_status = [404]
category = "unavailable"

[[rules]]
id = "acme.frobnicator"
message = ["frobnicator declined"]
category = "rate_limited"
suggestion = "Wait for the frobnicator."
"#,
    )
    .unwrap();
    let lines = vec![
        json!({"session_id": "u", "tool": "a", "http_status": 404, "message": "Not Found"}),
        json!({"session_id": "u", "tool": "b", "message": "the frobnicator declined"}),
    ];
    let out = replay(&lines, &["--config", config.to_str().unwrap()]);
    assert_eq!((out[0]["category"].as_str(), out[0]["rule"].as_str()), (Some("unavailable"), Some("http.404")));
    assert_eq!(out[1]["rule"], "acme.frobnicator");
    assert_eq!(out[1]["action"], "retry");
    assert!(out[1]["snippet"].as_str().unwrap().contains("Wait for the frobnicator."));
}

/// `rebound print-config` run with one more environment variable.
fn print_config_with(name: &str, value: &str) -> std::process::Output {
    std::process::Command::new(crate::common::binary()).args(["print-config"]).env(name, value).output().unwrap()
}

#[test]
fn environment_overrides_apply_and_unknown_keys_fail() {
    let output = print_config_with("REBOUND_RETRY_BASE_MS", "250");
    assert!(String::from_utf8_lossy(&output.stdout).contains("base_ms = 250"));
    let output = print_config_with("REBOUND_RETRY_BASEMS", "250");
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("REBOUND_RETRY_BASEMS"));
    // A value the policy refuses is the variable's error, not the file's (or the defaults').
    let output = print_config_with("REBOUND_RETRY_MULTIPLIER", "nan");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("REBOUND_RETRY_MULTIPLIER=nan: [retry] `multiplier` = NaN"), "{stderr}");
    // Two that are refused only together are the environment's, not the defaults'.
    let output = std::process::Command::new(crate::common::binary())
        .arg("print-config")
        .env("REBOUND_TOOL_BREAKER_OPEN_BASE_MS", "200000")
        .env("REBOUND_TOOL_BREAKER_OPEN_MAX_MS", "100000")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("error: defaults with the REBOUND_* environment: "), "{stderr}");
}

#[test]
fn a_log_filter_that_does_not_parse_stops_the_sidecar_before_it_serves_and_names_it() {
    use std::process::{Command, Stdio};
    // Given 10 s to exit: one that serves instead is stopped, and its output shows it.
    let serve = |filter: &str| {
        let mut child = Command::new(crate::common::binary())
            .args(["serve", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"])
            .env("RUST_LOG", filter)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while child.try_wait().unwrap().is_none() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let _ = child.kill();
        child.wait_with_output().unwrap()
    };
    for filter in ["rebound=loud", "[", "a=b=c"] {
        let output = serve(filter);
        assert_eq!(output.status.code(), Some(2), "RUST_LOG={filter:?}");
        assert!(output.stdout.is_empty(), "it served: {}", String::from_utf8_lossy(&output.stdout));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(&format!("RUST_LOG={filter:?}")), "{stderr}");
    }
}

#[test]
#[cfg(feature = "jemalloc")]
fn a_bad_allocator_option_stops_the_sidecar_before_it_starts_and_names_it() {
    let output = print_config_with("_RJEM_MALLOC_CONF", "dirty_decay_ms:soon");
    assert!(!output.status.success(), "{:?}", output.status);
    assert!(output.stdout.is_empty(), "it ran: {}", String::from_utf8_lossy(&output.stdout));
    assert!(String::from_utf8_lossy(&output.stderr).contains("dirty_decay_ms:soon"));
    // A good one is taken.
    let output = print_config_with("_RJEM_MALLOC_CONF", "dirty_decay_ms:5000");
    assert!(output.status.success(), "{:?}: {}", output.status, String::from_utf8_lossy(&output.stderr));
}

#[test]
fn logs_to_a_pipe_are_plain_text() {
    use std::io::{BufRead as _, BufReader, Read as _};
    use std::process::{Command, Stdio};
    // A pipe, as a container runtime or a log file gives: no colour codes, NO_COLOR or not.
    let mut child = Command::new(crate::common::binary())
        .args(["serve", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"])
        .env("RUST_LOG", "info")
        .env_remove("NO_COLOR")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut ready = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut ready).unwrap();
    assert!(ready.contains("\"ready\""), "{ready}");
    // SIGTERM: its shutdown lines are logged, and the log is whole once the process ends
    // (killed at once, it may not have written a line yet on a loaded machine).
    assert!(Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap().success());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let _ = child.kill();
    let mut log = String::new();
    child.stderr.take().unwrap().read_to_string(&mut log).unwrap();
    assert!(child.wait().unwrap().success(), "{log}");
    assert!(log.contains("INFO") && log.contains("SIGTERM"), "no info line to look at: {log}");
    assert!(!log.contains('\u{1b}'), "{log:?}");
}

#[test]
fn serve_flags_before_the_word_serve_apply_and_before_another_command_are_refused() {
    use std::io::{BufRead as _, BufReader};
    use std::process::{Command, Stdio};
    // `rebound --config f serve` used to run on the built-in defaults, on 127.0.0.1:50051.
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("r.sock");
    let file = dir.path().join("rebound.toml");
    std::fs::write(
        &file,
        format!("[server]\nlisten = \"unix:{}\"\nmetrics_listen = \"127.0.0.1:0\"\n", socket.display()),
    )
    .unwrap();
    let mut child = Command::new(crate::common::binary())
        .args(["--config", file.to_str().unwrap(), "--log-json", "serve"])
        .env_remove("REBOUND_CONFIG_FILE")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut ready = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut ready).unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(ready.contains(&format!("unix:{}", socket.display())), "the file was not read: {ready}");

    // The same flag on both sides with two values, and a serve flag before another command.
    for (args, said) in [
        (
            vec!["--listen", "127.0.0.1:0", "serve", "--listen", "127.0.0.1:1"],
            "--listen given twice, before `serve` (\"127.0.0.1:0\") and after it (\"127.0.0.1:1\")",
        ),
        (vec!["--listen", "127.0.0.1:0", "replay", "-"], "--listen is a flag of `serve`, given before `replay`"),
        (
            vec!["--config", "x.toml", "check-config", "y.toml"],
            "--config is a flag of `serve`, given before `check-config`",
        ),
    ] {
        let out = Command::new(crate::common::binary()).args(&args).stdin(Stdio::null()).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(said), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}: {}", String::from_utf8_lossy(&out.stdout));
    }
}

#[test]
fn with_log_json_an_error_that_stops_the_start_is_one_json_line_with_its_fields_at_the_top() {
    // It was toml's several lines of plain text, which a JSON log pipeline splits into records.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("wrongtype.toml");
    std::fs::write(&file, "[sessions]\ncapacity = \"lots\"\n").unwrap();
    let out = std::process::Command::new(crate::common::binary())
        .args(["serve", "--log-json", "--config", file.to_str().unwrap()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    let line: Value = serde_json::from_str(stderr.trim()).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    assert_eq!(line["level"], "ERROR", "{line}");
    let error = line["error"].as_str().unwrap();
    assert_eq!(line["message"], "rebound: error; not serving", "{line}");
    assert!(
        error.contains("wrongtype.toml")
            && error.contains("line 2")
            && error.contains("expected a whole number, 0 or more"),
        "{error}"
    );
}

#[test]
fn print_config_leaves_a_redis_password_out_and_check_config_refuses_its_placeholder() {
    // The README's `print-config > rebound.toml` put the password into a file bound for a ConfigMap.
    let out = print_config_with("REBOUND_STATE_REDIS_URL", "redis://:Sup3rS3cret@redis:6379/0");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && !text.contains("Sup3rS3cret"), "{text}");
    assert!(text.starts_with("# state.redis_url's password is left out"), "{text}");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("printed.toml");
    std::fs::write(&file, text.replace("backend = \"memory\"", "backend = \"redis\"")).unwrap();
    let (code, _, stderr) = run_cli(&["check-config", file.to_str().unwrap()], None);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("holds a redaction placeholder"), "{stderr}");
    std::fs::write(
        &file,
        text.replace("backend = \"memory\"", "backend = \"redis\"")
            .replace("redis_password_env = \"\"", "redis_password_env = \"REDIS_PASSWORD\""),
    )
    .unwrap();
    let (code, _, stderr) = run_cli(&["check-config", file.to_str().unwrap()], None);
    assert_eq!(code, 0, "{stderr}");
}
