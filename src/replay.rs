//! `rebound replay`: recorded outcomes (one JSON object per line, the proto's
//! field names, enums as lowercase strings) through the engine, one JSON
//! verdict per line out. Also the JSON shape of outcomes for `classify` and
//! the shared test vectors.

use crate::classify::GrpcCodeSpec;
use crate::clock::ManualClock;
use crate::engine::Engine;
use crate::model::{Headers, Outcome, OutcomeKind, Verdict};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{BufRead, Write};

/// One outcome as JSON.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutcomeJson {
    /// The session.
    #[serde(default)]
    pub session_id: String,
    /// Idempotency key.
    #[serde(default)]
    pub call_id: String,
    /// The tool.
    #[serde(default)]
    pub tool: String,
    /// Success.
    #[serde(default)]
    pub ok: bool,
    /// Failure kind.
    #[serde(default)]
    pub kind: Option<OutcomeKind>,
    /// Message.
    #[serde(default)]
    pub message: String,
    /// Exception type.
    #[serde(default)]
    pub exception_type: String,
    /// HTTP status (0 or absent for none).
    #[serde(default)]
    pub http_status: Option<u16>,
    /// gRPC code, by number or name.
    #[serde(default)]
    pub grpc_code: Option<GrpcCodeSpec>,
    /// Exit code.
    #[serde(default)]
    pub exit_code: Option<i32>,
    /// errno or provider code.
    #[serde(default)]
    pub code: String,
    /// Headers.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Detail.
    #[serde(default)]
    pub detail: String,
    /// Attempt.
    #[serde(default)]
    pub attempt: u32,
    /// Duration; replay's clock moves on by it.
    #[serde(default)]
    pub duration_ms: u64,
    /// Cost.
    #[serde(default)]
    pub cost: f64,
    /// When it happened, in ms from the start of the recording (moves replay's clock).
    #[serde(default)]
    pub at_ms: Option<u64>,
}

impl OutcomeJson {
    /// The domain outcome, with the gRPC code name resolved.
    pub fn into_outcome(self) -> Result<Outcome, String> {
        let grpc_code = match self.grpc_code {
            None => None,
            Some(GrpcCodeSpec::Number(n)) => Some(n),
            Some(GrpcCodeSpec::Name(name)) => Some(
                crate::classify::grpc_code_from_name(&name)
                    .ok_or_else(|| format!("`grpc_code` = {name:?}: not a gRPC code name"))?,
            ),
        };
        Ok(Outcome {
            session_id: self.session_id,
            call_id: self.call_id,
            tool: self.tool,
            ok: self.ok,
            kind: self.kind,
            message: self.message,
            exception_type: self.exception_type,
            http_status: self.http_status.filter(|s| *s != 0),
            grpc_code,
            exit_code: self.exit_code,
            code: self.code,
            headers: Headers::new(self.headers),
            detail: self.detail,
            attempt: self.attempt,
            duration_ms: self.duration_ms,
            cost: self.cost,
        })
    }
}

/// The breaker part of a verdict line.
#[derive(Debug, Serialize)]
pub struct BreakerJson {
    /// Tool breaker state.
    pub tool_state: &'static str,
    /// Session state.
    pub session_state: &'static str,
    /// Reason, or null.
    pub reason: Option<&'static str>,
    /// Consecutive failures of the tool.
    pub consecutive_failures: u32,
    /// Errors in the session.
    pub session_errors: u32,
    /// Identical errors in a row.
    pub identical_errors: u32,
    /// Steps.
    pub steps: u32,
    /// Cost reported in the session.
    pub cost: f64,
}

/// One verdict line.
#[derive(Debug, Serialize)]
pub struct VerdictJson {
    /// call_id.
    pub call_id: String,
    /// session_id.
    pub session_id: String,
    /// tool.
    pub tool: String,
    /// Action name.
    pub action: &'static str,
    /// Category name, or null on success.
    pub category: Option<&'static str>,
    /// Retryable.
    pub retryable: bool,
    /// Deciding rule id, or null on success.
    pub rule: Option<String>,
    /// Suggestion.
    pub suggestion: Option<String>,
    /// Delay (0 when not retrying).
    pub delay_ms: u64,
    /// Which retry, when retrying.
    pub attempt: Option<u32>,
    /// Retries left, when retrying.
    pub attempts_left: Option<u32>,
    /// True when the delay is the provider's, when retrying.
    pub provider_delay: Option<bool>,
    /// Snippet.
    pub snippet: String,
    /// Breakers.
    pub breaker: BreakerJson,
    /// Escalation report text, when escalating.
    pub escalation: Option<String>,
    /// Repeated call_id.
    pub replayed: bool,
    /// False in shadow mode: the action is advisory.
    pub enforced: bool,
    /// In shadow mode, what the breakers would have answered, or null.
    pub shadow_action: Option<&'static str>,
    /// In shadow mode, why, or null.
    pub shadow_reason: Option<&'static str>,
    /// The snippet's length in tokens, when a snippet budget is set (0 otherwise).
    pub snippet_tokens: u32,
}

impl From<&Verdict> for VerdictJson {
    fn from(v: &Verdict) -> Self {
        VerdictJson {
            call_id: v.call_id.clone(),
            session_id: v.session_id.clone(),
            tool: v.tool.clone(),
            action: v.action.as_str(),
            category: v.classification.as_ref().map(|c| c.category.as_str()),
            retryable: v.classification.as_ref().is_some_and(|c| c.retryable),
            rule: v.classification.as_ref().map(|c| c.rule.to_string()),
            suggestion: v.classification.as_ref().map(|c| c.suggestion.to_string()),
            delay_ms: v.retry.as_ref().map_or(0, |r| r.delay_ms),
            attempt: v.retry.as_ref().map(|r| r.attempt),
            attempts_left: v.retry.as_ref().map(|r| r.attempts_left),
            provider_delay: v.retry.as_ref().map(|r| r.provider_delay),
            snippet: v.snippet.clone(),
            breaker: BreakerJson {
                tool_state: v.breaker.tool_state.as_str(),
                session_state: v.breaker.session_state.as_str(),
                reason: v.breaker.reason.map(|r| r.as_str()),
                consecutive_failures: v.breaker.consecutive_failures,
                session_errors: v.breaker.session_errors,
                identical_errors: v.breaker.identical_errors,
                steps: v.breaker.steps,
                cost: v.breaker.cost,
            },
            escalation: v.escalation.as_ref().map(|e| e.text.clone()),
            replayed: v.replayed,
            enforced: v.enforced,
            shadow_action: v.shadow_action.map(|a| a.as_str()),
            shadow_reason: v.shadow_reason.map(|r| r.as_str()),
            snippet_tokens: v.snippet_tokens,
        }
    }
}

/// Bad lines named in a [`ReplayError::BadLines`]; past this many they are only counted.
pub const MAX_NAMED_LINES: usize = 100;

/// A line that could not be replayed.
#[derive(Debug)]
pub struct BadLine {
    /// 1-based line number.
    pub line: usize,
    /// What was wrong.
    pub message: String,
}

/// Why a replay failed.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The input could not be read; nothing from `line` on was replayed.
    #[error("line {line}: reading the input: {error}")]
    Read {
        /// 1-based line number.
        line: usize,
        /// The read error.
        error: std::io::Error,
    },
    /// Some lines could not be replayed: each was skipped, every other line got its verdict.
    #[error("{}", bad_lines(*.answered, *.skipped, .named))]
    BadLines {
        /// Outcomes answered.
        answered: usize,
        /// Lines skipped.
        skipped: usize,
        /// The first `MAX_NAMED_LINES` of them, in order.
        named: Vec<BadLine>,
    },
    /// Writing the output failed (its reason is in the message, not a source:
    /// `{:#}` would print it twice).
    #[error("writing output: {0}")]
    Write(std::io::Error),
}

fn bad_lines(answered: usize, skipped: usize, named: &[BadLine]) -> String {
    let plural = |n: usize| if n == 1 { "" } else { "s" };
    let mut text =
        format!("{skipped} line{} skipped, {answered} outcome{} answered", plural(skipped), plural(answered));
    for bad in named {
        text.push_str(&format!("\nline {}: {}", bad.line, bad.message));
    }
    if skipped > named.len() {
        text.push_str(&format!("\n… and {} more", skipped - named.len()));
    }
    text
}

/// Replays `input` through `engine`, writing one verdict line per outcome line.
/// Blank lines and lines starting with `#` are skipped. A line that is not
/// UTF-8, not an outcome, or refused by the engine is skipped too, and the
/// replay goes on: a recording cut off mid-line or holding one corrupt line
/// still gets every other verdict, and the error names each bad line.
/// A line longer than `MAX_LINE_BYTES` is skipped without being kept, so that
/// memory stays bounded whatever the input (`/dev/zero`, a JSON export on one line).
pub fn replay(
    input: impl BufRead,
    output: impl Write,
    engine: &Engine,
    clock: &ManualClock,
) -> Result<usize, ReplayError> {
    replay_lines(input, output, engine, clock, MAX_LINE_BYTES)
}

/// The longest line replayed: four times the largest gRPC message the sidecar can
/// be set to take (64 MiB), room for an outcome's JSON escapes.
pub const MAX_LINE_BYTES: usize = 256 << 20;

fn replay_lines(
    mut input: impl BufRead,
    mut output: impl Write,
    engine: &Engine,
    clock: &ManualClock,
    max_line_bytes: usize,
) -> Result<usize, ReplayError> {
    let (mut answered, mut skipped, mut named) = (0, 0, Vec::new());
    let mut bytes = Vec::new();
    for number in 1.. {
        let fits = match next_line(&mut input, &mut bytes, max_line_bytes) {
            Ok(Some(fits)) => fits,
            Ok(None) => break,
            Err(error) => return Err(ReplayError::Read { line: number, error }),
        };
        let replayed = if fits {
            replay_line(&bytes, engine, clock)
        } else {
            Err(format!("longer than {max_line_bytes} bytes, the most a line may be"))
        };
        match replayed {
            Ok(None) => {}
            Ok(Some(verdict)) => {
                serde_json::to_writer(&mut output, &VerdictJson::from(&verdict))
                    .map_err(|e| ReplayError::Write(e.into()))?;
                output.write_all(b"\n").map_err(ReplayError::Write)?;
                answered += 1;
            }
            Err(message) => {
                skipped += 1;
                if named.len() < MAX_NAMED_LINES {
                    named.push(BadLine { line: number, message });
                }
            }
        }
    }
    output.flush().map_err(ReplayError::Write)?;
    if skipped > 0 {
        return Err(ReplayError::BadLines { answered, skipped, named });
    }
    Ok(answered)
}

/// Reads the next line into `line`, without its newline: `Some(true)`, or
/// `Some(false)` when it is longer than `max_bytes` (then `line` is empty and
/// the rest of the line is read past, not kept); `None` at the end of the input.
fn next_line(input: &mut impl BufRead, line: &mut Vec<u8>, max_bytes: usize) -> std::io::Result<Option<bool>> {
    line.clear();
    let (mut started, mut fits) = (false, true);
    loop {
        let available = match input.fill_buf() {
            Ok(available) => available,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            return Ok(started.then_some(fits));
        }
        started = true;
        let newline = memchr::memchr(b'\n', available);
        let piece = &available[..newline.unwrap_or(available.len())];
        if fits && line.len() + piece.len() > max_bytes {
            fits = false;
            *line = Vec::new();
        } else if fits {
            line.extend_from_slice(piece);
        }
        let used = newline.map_or(available.len(), |at| at + 1);
        input.consume(used);
        if newline.is_some() {
            return Ok(Some(fits));
        }
    }
}

/// One line's verdict, `None` for a line without an outcome, or what is wrong with it.
fn replay_line(bytes: &[u8], engine: &Engine, clock: &ManualClock) -> Result<Option<Verdict>, String> {
    let text = std::str::from_utf8(bytes).map_err(|e| format!("not UTF-8: {e}"))?;
    let text = text.trim();
    if text.is_empty() || text.starts_with('#') {
        return Ok(None);
    }
    // serde would read an array as the struct's fields in order, and complain about the first.
    if !text.starts_with('{') {
        let start: String = text.chars().take(12).collect();
        return Err(format!(
            "not a JSON object: a line is one outcome, {{\"session_id\": ...}}; this one starts {start:?}"
        ));
    }
    // serde_json counts lines within the text it was given, always one here. A value the
    // field cannot hold (`"attempt": -1`, `"cost": 1e400`) is told with the field's name.
    let json: OutcomeJson =
        serde_path_to_error::deserialize(&mut serde_json::Deserializer::from_str(text)).map_err(|e| {
            let message = e.inner().to_string().replace(" at line 1 column ", " at column ");
            match field_of(&e.path().to_string()) {
                "" => message,
                field => format!("`{field}`: {message}"),
            }
        })?;
    match json.at_ms {
        Some(at) => clock.set(at),
        None => clock.advance(json.duration_ms),
    }
    let outcome = json.into_outcome()?;
    engine.report_owned(outcome).map(Some).map_err(|e| e.to_string())
}

/// The field a serde path names: `headers` for `headers.?`, and nothing for `.` (the line itself)
/// or `?`. A `?` is a place the parser had not named yet: a key it was reading, or the comma or brace
/// it expected after a value (`{"tool":"t",}`).
fn field_of(path: &str) -> &str {
    let mut field = path;
    while let Some(rest) = field.strip_suffix('?') {
        field = rest.strip_suffix('.').unwrap_or(rest);
    }
    if field == "." {
        ""
    } else {
        field
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::EngineSettings;
    use crate::metrics::Metrics;
    use crate::policy::Policy;
    use std::sync::Arc;

    fn run(input: &str, seed: u64) -> Result<String, ReplayError> {
        let clock = Arc::new(ManualClock::new(1_700_000_000_000));
        let settings = EngineSettings::from_config(&crate::config::Config::default(), seed);
        let engine = Engine::new(Policy::default(), settings, clock.clone(), Arc::new(Metrics::new(10)));
        let mut out = Vec::new();
        replay(input.as_bytes(), &mut out, &engine, &clock)?;
        Ok(String::from_utf8(out).unwrap())
    }

    const INPUT: &str = r#"{"session_id":"s","call_id":"1","tool":"search","kind":"timeout","message":"Read timed out"}
{"session_id":"s","call_id":"2","tool":"search","http_status":503,"message":"Service Unavailable"}
"#;

    #[test]
    fn same_seed_same_output() {
        let a = run(INPUT, 9).unwrap();
        assert_eq!(a, run(INPUT, 9).unwrap());
        assert_ne!(a, run(INPUT, 10).unwrap());
        assert_eq!(a.lines().count(), 2);
        let first: serde_json::Value = serde_json::from_str(a.lines().next().unwrap()).unwrap();
        assert_eq!(first["action"], "retry");
        assert_eq!(first["category"], "timeout");
        assert_eq!(first["breaker"]["tool_state"], "closed");
    }

    #[test]
    fn shadow_mode_shows_what_would_have_been_answered() {
        let mut config = crate::config::Config::default();
        config.breakers.shadow = true;
        let clock = Arc::new(ManualClock::new(1_700_000_000_000));
        let engine = Engine::new(
            Policy::from_config(&config).unwrap(),
            EngineSettings::from_config(&config, 1),
            clock.clone(),
            Arc::new(Metrics::new(10)),
        );
        // Three failures of one tool in a row: the third would escalate.
        let line = |n: u32| {
            format!("{{\"session_id\":\"s\",\"tool\":\"t\",\"kind\":\"timeout\",\"message\":\"timed out {n}\",\"cost\":0.5}}\n")
        };
        let input: String = (1..=3).map(line).collect();
        let mut out = Vec::new();
        replay(input.as_bytes(), &mut out, &engine, &clock).unwrap();
        let last: serde_json::Value =
            serde_json::from_str(String::from_utf8(out).unwrap().lines().last().unwrap()).unwrap();
        assert_eq!(last["enforced"], false);
        assert_eq!(last["shadow_action"], "escalate");
        assert_eq!(last["shadow_reason"], "consecutive_failures");
        assert_eq!(last["provider_delay"], false);
        assert_eq!(last["breaker"]["cost"], 1.5);
    }

    #[test]
    fn bad_lines_are_named_by_number() {
        let err = run("\n{\"session_id\":\"s\",\"tool\":\"t\"}\n{\"tool\": 3}\n", 1).unwrap_err().to_string();
        assert!(err.contains("\nline 3: `tool`: invalid type"), "{err}");
        let err = run("{\"session_id\":\"s\",\"tool\":\"t\",\"kind\":\"nope\"}\n", 1).unwrap_err().to_string();
        assert!(err.contains("\nline 1: ") && err.contains("nope"), "{err}");
        let err = run("{\"session_id\":\"s\",\"tool\":\"\"}\n", 1).unwrap_err().to_string();
        assert!(err.contains("`tool`"), "{err}");
        let err = run("{\"session_id\":\"s\",\"tool\":\"t\",\"bogus\":1}\n", 1).unwrap_err().to_string();
        assert!(err.contains("bogus"), "{err}");
        let err = run("[\"s\", \"c\", \"t\"]\n\"s\"\n", 1).unwrap_err().to_string();
        assert!(err.contains("\nline 1: not a JSON object") && err.contains(r#"this one starts "[\"s\", "#), "{err}");
        assert!(err.contains("\nline 2: not a JSON object"), "{err}");
    }

    #[test]
    fn a_line_past_the_limit_is_named_and_the_others_answered() {
        let good = |id: &str| format!("{{\"session_id\":\"s\",\"call_id\":\"{id}\",\"tool\":\"t\"}}\n");
        // A well-formed outcome, answered but for its length.
        let long = format!("{{\"session_id\":\"s\",\"tool\":\"t\",\"message\":\"{}\"}}\n", "x".repeat(500));
        let input = [good("1"), long, good("3")].concat();
        let clock = Arc::new(ManualClock::new(0));
        let settings = EngineSettings::from_config(&crate::config::Config::default(), 1);
        let engine = Engine::new(Policy::default(), settings, clock.clone(), Arc::new(Metrics::new(10)));
        let mut out = Vec::new();
        // Read in pieces smaller than a line, as a pipe hands them over.
        let reader = std::io::BufReader::with_capacity(16, input.as_bytes());
        let err = replay_lines(reader, &mut out, &engine, &clock, 100).unwrap_err();
        let ReplayError::BadLines { answered, skipped, ref named } = err else { panic!("{err}") };
        assert_eq!((answered, skipped), (2, 1));
        assert_eq!(named[0].line, 2);
        assert_eq!(named[0].message, "longer than 100 bytes, the most a line may be");
        assert_eq!(String::from_utf8(out).unwrap().lines().count(), 2);
    }

    #[test]
    fn lines_are_read_whole_up_to_the_limit_across_buffer_edges() {
        for capacity in 1..10 {
            let mut input = std::io::BufReader::with_capacity(capacity, &b"ab\n\nabcd\nabcde\nxyz"[..]);
            let mut line = Vec::new();
            let mut lines = Vec::new();
            while let Some(fits) = next_line(&mut input, &mut line, 4).unwrap() {
                lines.push(fits.then(|| String::from_utf8(line.clone()).unwrap()));
            }
            let want = [Some("ab"), Some(""), Some("abcd"), None, Some("xyz")].map(|l| l.map(str::to_string));
            assert_eq!(lines, want, "buffer of {capacity}");
        }
    }

    #[test]
    fn bad_lines_are_skipped_and_the_others_answered() {
        let good = |id: &str| {
            format!("{{\"session_id\":\"s\",\"call_id\":\"{id}\",\"tool\":\"t\",\"message\":\"Read timed out\"}}\n")
        };
        let mut input = good("1").into_bytes();
        input.extend_from_slice(b"{\"session_id\":\"s\",\"tool\":\"t\",\"message\":\"caf\xe9\"}\n");
        input.extend_from_slice(good("3").as_bytes());
        input.extend_from_slice(b"{\"session_id\":\"s\",\"tool\":\"t\",\"mess\n");
        input.extend_from_slice(good("5").as_bytes());
        input.extend_from_slice(b"{\"session_id\":\"s\",\"call_id\":\"6\",\"tool\"");
        let clock = Arc::new(ManualClock::new(0));
        let settings = EngineSettings::from_config(&crate::config::Config::default(), 1);
        let engine = Engine::new(Policy::default(), settings, clock.clone(), Arc::new(Metrics::new(10)));
        let mut out = Vec::new();
        let err = replay(&input[..], &mut out, &engine, &clock).unwrap_err();
        let ReplayError::BadLines { answered, skipped, ref named } = err else { panic!("{err}") };
        assert_eq!((answered, skipped), (3, 3));
        let lines: Vec<usize> = named.iter().map(|b| b.line).collect();
        assert_eq!(lines, [2, 4, 6]);
        assert!(named[0].message.starts_with("not UTF-8"), "{}", named[0].message);
        assert!(named[1].message.contains("EOF while parsing a string at column"), "{}", named[1].message);
        assert!(named[2].message.contains("EOF while parsing an object at column"), "{}", named[2].message);
        let text = String::from_utf8(out).unwrap();
        let ids: Vec<String> = text
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["call_id"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(ids, ["1", "3", "5"]);
        assert!(err.to_string().starts_with("3 lines skipped, 3 outcomes answered\nline 2: not UTF-8"), "{err}");
    }

    #[test]
    fn a_value_its_field_cannot_hold_is_told_with_the_field() {
        for (line, field) in [
            (r#"{"session_id":"s","tool":"t","cost":1e400}"#, "`cost`"),
            (r#"{"session_id":"s","tool":"t","attempt":-1}"#, "`attempt`"),
            (r#"{"session_id":"s","tool":"t","exit_code":4294967296}"#, "`exit_code`"),
            (r#"{"session_id":"s","tool":"t","http_status":70000}"#, "`http_status`"),
        ] {
            let err = run(&format!("{line}\n"), 1).unwrap_err().to_string();
            assert!(err.contains(&format!("line 1: {field}: ")), "{line}: {err}");
        }
    }

    #[test]
    fn a_line_that_is_not_json_is_told_without_a_made_up_field() {
        for (line, told) in [
            (r#"{"session_id":"s","tool":"t",}"#, "line 1: trailing comma at column 30"),
            (r#"{"session_id":"s" "tool":"t"}"#, "line 1: expected `,` or `}` at column 19"),
            (r#"{bad}"#, "line 1: key must be a string at column 2"),
            (
                r#"{"session_id":"s","tool":"t","headers":{bad}}"#,
                "line 1: `headers`: key must be a string at column 41",
            ),
        ] {
            let err = run(&format!("{line}\n"), 1).unwrap_err().to_string();
            assert!(err.ends_with(told), "{line}: {err}");
        }
        assert_eq!(field_of("."), "");
        assert_eq!(field_of("?"), "");
        assert_eq!(field_of("headers.?"), "headers");
        assert_eq!(field_of("headers.?.?"), "headers");
        assert_eq!(field_of("cost"), "cost");
    }

    #[test]
    fn past_the_named_lines_bad_ones_are_counted() {
        let input = "{\n".repeat(MAX_NAMED_LINES + 5);
        let err = run(&input, 1).unwrap_err();
        let ReplayError::BadLines { skipped, ref named, .. } = err else { panic!("{err}") };
        assert_eq!((skipped, named.len()), (MAX_NAMED_LINES + 5, MAX_NAMED_LINES));
        assert!(err.to_string().ends_with("\n… and 5 more"), "{err}");
    }
}
