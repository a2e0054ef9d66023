//! Retry delays: exponential backoff with jitter, and the provider's own delay
//! (Retry-After and its family), which wins over backoff.

use crate::model::Headers;
use crate::rng::Rng;
use serde::{Deserialize, Serialize};

/// How a computed delay is spread so that a fleet does not retry in lock-step.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Jitter {
    /// ±fraction around the delay (the seed default, ±20 %).
    Proportional,
    /// Uniform in `[0, delay]` (AWS "full jitter").
    Full,
    /// `delay/2` plus uniform in `[0, delay/2]` (AWS "equal jitter").
    Equal,
    /// Uniform in `[base, previous × 3]`, capped (AWS "decorrelated jitter").
    Decorrelated,
    /// No jitter.
    None,
}

/// Why a backoff policy was refused.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum BackoffError {
    /// A field is out of range.
    #[error("`{field}` = {value}: {problem}")]
    Invalid {
        /// The field.
        field: &'static str,
        /// Its value.
        value: String,
        /// What is wrong.
        problem: &'static str,
    },
}

/// The longest wait a retry may be told: a day, for `cap_ms` and for a provider's delay
/// (`retry.max_provider_delay_ms`). Past that the run is better escalated than left to wait, and a
/// plan's delay, at most twice this with jitter, fits the 32 bits a remembered verdict keeps it in.
pub const LONGEST_DELAY_MS: u64 = 24 * 3_600_000;

/// The most retries a policy may allow: a retry plan's attempts fit a byte.
pub const MOST_RETRIES: u32 = 100;

/// A validated retry policy.
#[derive(Clone, Debug, PartialEq)]
pub struct BackoffPolicy {
    base_ms: u64,
    multiplier: f64,
    cap_ms: u64,
    max_retries: u32,
    jitter: Jitter,
    jitter_fraction: f64,
}

impl Default for BackoffPolicy {
    /// The seed defaults: base 1 s, ×2, cap 10 s, 3 retries, ±20 %.
    fn default() -> Self {
        BackoffPolicy {
            base_ms: 1000,
            multiplier: 2.0,
            cap_ms: 10_000,
            max_retries: 3,
            jitter: Jitter::Proportional,
            jitter_fraction: 0.2,
        }
    }
}

impl BackoffPolicy {
    /// Builds a policy, refusing impossible values.
    pub fn try_new(
        base_ms: u64,
        multiplier: f64,
        cap_ms: u64,
        max_retries: u32,
        jitter: Jitter,
        jitter_fraction: f64,
    ) -> Result<Self, BackoffError> {
        let invalid = |field, value: String, problem| Err(BackoffError::Invalid { field, value, problem });
        if base_ms == 0 {
            return invalid("base_ms", base_ms.to_string(), "must be above 0");
        }
        if !multiplier.is_finite() || !(1.0..=100.0).contains(&multiplier) {
            return invalid("multiplier", multiplier.to_string(), "must be between 1 and 100");
        }
        if cap_ms < base_ms {
            return invalid("cap_ms", cap_ms.to_string(), "must be at least base_ms");
        }
        if cap_ms > LONGEST_DELAY_MS {
            return invalid("cap_ms", cap_ms.to_string(), "must be at most a day");
        }
        if max_retries > MOST_RETRIES {
            return invalid("max_retries", max_retries.to_string(), "must be at most 100");
        }
        if !jitter_fraction.is_finite() || !(0.0..=1.0).contains(&jitter_fraction) {
            return invalid("jitter_fraction", jitter_fraction.to_string(), "must be between 0 and 1");
        }
        Ok(BackoffPolicy { base_ms, multiplier, cap_ms, max_retries, jitter, jitter_fraction })
    }

    /// The most retries allowed.
    pub fn max_retries(&self) -> u32 {
        self.max_retries
    }

    /// The longest delay backoff gives.
    pub fn cap_ms(&self) -> u64 {
        self.cap_ms
    }

    /// The jitter fraction (used to spread provider delays upward too).
    pub fn jitter_fraction(&self) -> f64 {
        self.jitter_fraction
    }

    /// The delay before retry number `retry` (0 for the first), never above the cap.
    /// `previous_ms` is the last delay given, for decorrelated jitter.
    pub fn delay_ms(&self, retry: u32, previous_ms: u64, rng: &mut Rng) -> u64 {
        let exp = self.base_ms as f64 * self.multiplier.powi(retry.min(64) as i32);
        let delay = exp.min(self.cap_ms as f64);
        let jittered = match self.jitter {
            Jitter::None => delay,
            Jitter::Proportional => {
                let spread = self.jitter_fraction * (2.0 * rng.next_f64() - 1.0);
                delay * (1.0 + spread)
            }
            Jitter::Full => delay * rng.next_f64(),
            Jitter::Equal => delay / 2.0 + delay / 2.0 * rng.next_f64(),
            Jitter::Decorrelated => {
                let base = self.base_ms as f64;
                let upper = (previous_ms.max(self.base_ms) as f64 * 3.0).max(base);
                base + (upper - base) * rng.next_f64()
            }
        };
        (jittered.round() as u64).min(self.cap_ms)
    }

    /// A provider delay spread upward: never earlier than asked, and later by up to the
    /// jitter fraction of the provider's delay or of the base delay, whichever is longer.
    /// The base keeps short waits apart: a `Retry-After: 0` (or a date already past)
    /// sent to a whole fleet at once would otherwise bring every agent back at once.
    pub fn spread_provider_delay(&self, provider_ms: u64, rng: &mut Rng) -> u64 {
        let spread = match self.jitter {
            Jitter::None => 0.0,
            _ => self.jitter_fraction * rng.next_f64(),
        };
        let scale = provider_ms.max(self.base_ms) as f64;
        (provider_ms as f64 + scale * spread).round() as u64
    }
}

/// What the provider's headers say about retrying.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProviderDelay {
    /// Wait this long.
    After(u64),
    /// Do not retry (`x-should-retry: false`, or gRPC pushback below zero).
    DoNotRetry {
        /// The wait the headers gave besides, which the tool's breaker still honours.
        after: Option<u64>,
    },
}

/// Epoch seconds above this are absolute times, below it durations (about 2001-09-09).
const EPOCH_THRESHOLD_S: u64 = 1_000_000_000;

/// Values above this are epoch milliseconds (OpenRouter's `X-RateLimit-Reset`): as epoch
/// seconds they would be the year 33658.
const EPOCH_THRESHOLD_MS: u64 = 1_000_000_000_000;

/// The headers `provider_delay` reads (and `x-should-retry`): the server keeps
/// these of an outcome's headers and drops the rest.
pub const PROVIDER_HEADERS: [&str; 10] = [
    "retry-after",
    "retry-after-ms",
    "grpc-retry-pushback-ms",
    "x-ratelimit-reset",
    "x-ratelimit-reset-requests",
    "x-ratelimit-reset-tokens",
    "x-ratelimit-remaining",
    "x-ratelimit-remaining-requests",
    "x-ratelimit-remaining-tokens",
    "x-should-retry",
];

/// Reads the provider's delay from the Retry-After family of headers. A provider
/// that says not to retry is heeded first: `x-should-retry: false` (OpenAI's and
/// Anthropic's APIs send it, and their SDKs obey it) or a negative
/// `grpc-retry-pushback-ms`. (`x-should-retry: true` changes nothing: a failure
/// the rules find not worth retrying, a revoked key say, is not retried on the
/// provider's word.) Then what the provider asks of this response wins, the first given of `retry-after-ms`,
/// `Retry-After`, `grpc-retry-pushback-ms`. Failing those, the rate limits' reset
/// times say when a retry can pass: the latest of them, or of those whose
/// `x-ratelimit-remaining-*` is 0 when the headers say which limit was hit (a
/// 429 for tokens is not over when the requests' limit resets in 6 ms).
/// `wall_ms` reads now, for HTTP dates and epoch resets: only when a header that may hold one
/// is there (a clock read is about 100 instructions, and most failures have no headers).
pub fn provider_delay(headers: &Headers, wall_ms: impl Fn() -> u64) -> Option<ProviderDelay> {
    if headers.is_empty() {
        return None;
    }
    let should_not = headers.get("x-should-retry").is_some_and(|v| v.trim().eq_ignore_ascii_case("false"));
    let pushed_back =
        headers.get("grpc-retry-pushback-ms").and_then(|v| v.parse::<i64>().ok()).is_some_and(|ms| ms < 0);
    let wait = provider_wait(headers, &wall_ms);
    if should_not || pushed_back {
        return Some(ProviderDelay::DoNotRetry { after: wait });
    }
    wait.map(ProviderDelay::After)
}

/// The wait the Retry-After family asks for, as `provider_delay` orders it.
fn provider_wait(headers: &Headers, wall_ms: &impl Fn() -> u64) -> Option<u64> {
    let asked = headers
        .get("retry-after-ms")
        .and_then(parse_millis)
        .or_else(|| headers.get("retry-after").and_then(|v| parse_retry_after(v, wall_ms())))
        .or_else(|| headers.get("grpc-retry-pushback-ms").and_then(parse_millis));
    if asked.is_some() {
        return asked;
    }
    // Each limit's reset, and whether its remaining count says it was hit.
    let exhausted = |remaining: &str| headers.get(remaining).is_some_and(|v| v.trim().parse::<f64>() == Ok(0.0));
    let resets = [
        (
            headers.get("x-ratelimit-reset-requests").and_then(parse_go_duration),
            exhausted("x-ratelimit-remaining-requests"),
        ),
        (
            headers.get("x-ratelimit-reset-tokens").and_then(parse_go_duration),
            exhausted("x-ratelimit-remaining-tokens"),
        ),
        (headers.get("x-ratelimit-reset").and_then(|v| parse_reset(v, wall_ms())), exhausted("x-ratelimit-remaining")),
    ];
    let hit = resets.iter().filter(|(ms, hit)| ms.is_some() && *hit).filter_map(|(ms, _)| *ms).max();
    hit.or_else(|| resets.iter().filter_map(|(ms, _)| *ms).max())
}

/// `retry-after-ms: 250` (fractions allowed).
fn parse_millis(value: &str) -> Option<u64> {
    let ms: f64 = value.trim().parse().ok()?;
    (ms.is_finite() && ms >= 0.0).then(|| ms.round() as u64)
}

/// `Retry-After: 7` (seconds, fractions tolerated) or an HTTP date.
pub fn parse_retry_after(value: &str, wall_ms: u64) -> Option<u64> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<f64>() {
        return (seconds.is_finite() && seconds >= 0.0).then(|| (seconds * 1000.0).round() as u64);
    }
    let at = httpdate::parse_http_date(value).ok()?;
    let at_ms = at.duration_since(std::time::UNIX_EPOCH).ok()?.as_millis() as u64;
    Some(at_ms.saturating_sub(wall_ms))
}

/// `x-ratelimit-reset`: seconds from now, epoch seconds or epoch milliseconds (told apart by size).
fn parse_reset(value: &str, wall_ms: u64) -> Option<u64> {
    let seconds: f64 = value.trim().parse().ok()?;
    if !seconds.is_finite() || seconds < 0.0 {
        return None;
    }
    if seconds >= EPOCH_THRESHOLD_MS as f64 {
        Some((seconds as u64).saturating_sub(wall_ms))
    } else if seconds >= EPOCH_THRESHOLD_S as f64 {
        Some(((seconds * 1000.0) as u64).saturating_sub(wall_ms))
    } else {
        Some((seconds * 1000.0).round() as u64)
    }
}

/// Go-style durations as OpenAI writes them: `1s`, `6ms`, `1m30s`, `2h0m0s`, `0.5s`.
pub fn parse_go_duration(value: &str) -> Option<u64> {
    let mut rest = value.trim();
    if rest.is_empty() {
        return None;
    }
    let mut total_ms = 0f64;
    while !rest.is_empty() {
        let number_len = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        if number_len == 0 {
            return None;
        }
        let number: f64 = rest[..number_len].parse().ok()?;
        rest = &rest[number_len..];
        let unit_len = rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "h" => 3_600_000.0,
            "m" => 60_000.0,
            "s" => 1000.0,
            "ms" => 1.0,
            "us" | "µs" => 0.001,
            "ns" => 0.000_001,
            _ => return None,
        };
        rest = &rest[unit_len..];
        total_ms += number * scale;
    }
    Some(total_ms.round() as u64)
}

/// The wait a provider wrote into its error's text, for a failure whose headers gave none: the Gemini
/// API's body, `'retryDelay': '23s'` (its `google.rpc.RetryInfo`) and "Please retry in 23.47s", OpenAI's
/// and Groq's "Please try again in 1.836s" (or `812ms`, `6m0s`), Azure OpenAI's "Please retry after 20
/// seconds", python-telegram-bot's "Flood control exceeded. Retry in 23 seconds". A bare number after
/// "retry after" is seconds, as in the header of that name (the Telegram Bot API's "Too Many Requests:
/// retry after 23"). The first of those phrases the text holds decides; one without a number ("try
/// again later") gives nothing.
pub fn delay_in_text(text: &str) -> Option<u64> {
    const PHRASES: [&str; 4] = ["retrydelay", "retry in ", "try again in ", "retry after "];
    let lower = text.to_ascii_lowercase();
    let (at, phrase) = PHRASES.iter().filter_map(|p| lower.find(p).map(|at| (at + p.len(), *p))).min()?;
    let rest = text[at..].trim_start_matches(['"', '\'', ':', ' ']);
    leading_duration(rest).or_else(|| (phrase == "retry after ").then(|| bare_seconds(rest)).flatten())
}

/// The whole seconds `text` begins with when nothing but the end of a sentence follows them (`23`,
/// `23.`, `23, `): not a number a word of some other unit follows (`5 fortnights`), nor a date's.
fn bare_seconds(text: &str) -> Option<u64> {
    let digits = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let mut after = text[digits..].chars();
    let ends = match after.next() {
        None | Some(',' | ';' | ')' | '"' | '\'' | '\n' | '\r') => true,
        Some('.' | ' ') => !after.next().is_some_and(|c| c.is_ascii_alphanumeric()),
        Some(_) => false,
    };
    let seconds: u64 = text[..digits].parse().ok()?;
    ends.then(|| seconds.saturating_mul(1000))
}

/// The duration `text` begins with: Go's form (`23.47s`, `1m30s`, `812ms`) or a number and a word
/// (`20 seconds`, `1 minute`).
fn leading_duration(text: &str) -> Option<u64> {
    let token_len = text.find(|c: char| !(c.is_ascii_alphanumeric() || c == '.')).unwrap_or(text.len());
    let token = text[..token_len].trim_end_matches('.');
    if let Some(ms) = parse_go_duration(token) {
        return Some(ms);
    }
    let number: f64 = token.parse().ok()?;
    let rest = text[token_len..].trim_start_matches(' ');
    let word = &rest[..rest.find(|c: char| !c.is_ascii_alphabetic()).unwrap_or(rest.len())];
    let scale = match word.to_ascii_lowercase().as_str() {
        "ms" | "millisecond" | "milliseconds" => 1.0,
        "s" | "sec" | "secs" | "second" | "seconds" => 1000.0,
        "min" | "mins" | "minute" | "minutes" => 60_000.0,
        "h" | "hour" | "hours" => 3_600_000.0,
        _ => return None,
    };
    (number.is_finite() && number >= 0.0).then(|| (number * scale).round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;
    use proptest::prelude::*;

    const NOW: u64 = 1_700_000_000_000;

    fn headers(pairs: &[(&str, &str)]) -> Headers {
        Headers::new(pairs.iter().map(|(k, v)| (*k, v.to_string())))
    }

    #[test]
    fn seed_defaults_grow_by_two_within_twenty_percent() {
        let p = BackoffPolicy::default();
        let mut rng = Rng::new(3);
        for (retry, nominal) in [(0u32, 1000f64), (1, 2000.0), (2, 4000.0), (3, 8000.0), (4, 10_000.0)] {
            for _ in 0..1000 {
                let d = p.delay_ms(retry, 0, &mut rng) as f64;
                assert!(d >= nominal * 0.8 - 1.0 && d <= (nominal * 1.2).min(10_000.0) + 1.0, "retry {retry}: {d}");
            }
        }
    }

    #[test]
    fn jitter_strategies_stay_in_bounds_over_many_draws() {
        let mut rng = Rng::new(11);
        let make = |j| BackoffPolicy::try_new(100, 2.0, 5000, 5, j, 0.2).unwrap();
        for retry in 0..6u32 {
            let nominal = (100.0 * 2f64.powi(retry as i32)).min(5000.0);
            for _ in 0..10_000 {
                let full = make(Jitter::Full).delay_ms(retry, 0, &mut rng) as f64;
                assert!((0.0..=nominal).contains(&full));
                let equal = make(Jitter::Equal).delay_ms(retry, 0, &mut rng) as f64;
                assert!(equal >= (nominal / 2.0).floor() && equal <= nominal);
                let none = make(Jitter::None).delay_ms(retry, 0, &mut rng) as f64;
                assert_eq!(none, nominal);
                let prev = 400;
                let dec = make(Jitter::Decorrelated).delay_ms(retry, prev, &mut rng);
                assert!((100..=1200).contains(&dec), "{dec}");
            }
        }
    }

    #[test]
    fn a_delay_written_in_the_text_is_read() {
        for (text, ms) in [
            // google-genai 3.6's ClientError for the Gemini API's 429 (holdout-real's r-py-gemini-per-minute, cut).
            ("429 RESOURCE_EXHAUSTED. {'error': {'code': 429, 'message': 'You exceeded your current quota ... Please retry in 23.472316927s.', 'status': 'RESOURCE_EXHAUSTED', 'details': [{'@type': 'type.googleapis.com/google.rpc.RetryInfo', 'retryDelay': '23s'}]}}", 23_472),
            ("{\"@type\": \"type.googleapis.com/google.rpc.RetryInfo\", \"retryDelay\": \"37s\"}", 37_000),
            // OpenAI's 429 (the engine's and shapes' tests quote it).
            ("Rate limit reached for gpt-4o on tokens per min (TPM): Limit 30000, Used 29867, Requested 1205. Please try again in 2.144s.", 2_144),
            ("Rate limit reached for gpt-4o on tokens per min (TPM): Limit 30000, Used 29001, Requested 990. Please try again in 812ms.", 812),
            ("Rate limit reached for gpt-4o on requests per day (RPD): Limit 10000, Used 10000, Requested 1. Please try again in 8m38.4s.", 518_400),
            ("Requests to the ChatCompletions_Create Operation under Azure OpenAI API version 2024-02-01 have exceeded token rate limit of your current OpenAI S0 pricing tier. Please retry after 20 seconds.", 20_000),
            // python-telegram-bot 22.8's RetryAfter, and the Telegram Bot API's own description it is made
            // from (a bare number, seconds as in the Retry-After header).
            ("Flood control exceeded. Retry in 23 seconds", 23_000),
            ("Too Many Requests: retry after 23", 23_000),
            ("429: Too Many Requests: retry after 7. Slow down.", 7_000),
        ] {
            assert_eq!(delay_in_text(text), Some(ms), "{text}");
        }
        for text in [
            "The model is overloaded. Please try again later.",
            "retry in a moment",
            "Please try again in",
            "retry after -5 seconds",
            "try again in 5 fortnights",
            "retry after 5 fortnights",
            "retry after 2026-11-30T10:00:00Z",
            "retry after 23.5",
            "retry after 23 a",
            "",
        ] {
            assert_eq!(delay_in_text(text), None, "{text}");
        }
    }

    proptest! {
        #[test]
        fn reading_a_delay_from_any_text_never_panics(text in "\\PC{0,80}") {
            let _ = delay_in_text(&text);
            let _ = delay_in_text(&format!("retry in {text}"));
            let _ = delay_in_text(&format!("retry after {text}"));
        }
    }

    #[test]
    fn provider_delay_spreads_upward_only() {
        let p = BackoffPolicy::default();
        let mut rng = Rng::new(5);
        for _ in 0..1000 {
            let d = p.spread_provider_delay(7000, &mut rng);
            assert!((7000..=8400).contains(&d), "{d}");
        }
    }

    #[test]
    fn a_provider_asking_for_no_wait_still_spreads_the_fleet() {
        // Base 1 s, jitter 0.2: "retry now" spreads over 0 to 200 ms, a short wait by as much.
        let p = BackoffPolicy::default();
        let mut rng = Rng::new(9);
        for provider_ms in [0, 6, 250] {
            let delays: Vec<u64> = (0..1000).map(|_| p.spread_provider_delay(provider_ms, &mut rng)).collect();
            assert!(delays.iter().all(|d| (provider_ms..=provider_ms + 200).contains(d)), "{provider_ms}: {delays:?}");
            let distinct: std::collections::BTreeSet<_> = delays.iter().collect();
            assert!(distinct.len() > 100, "{provider_ms} ms: only {} distinct delays", distinct.len());
        }
        // Asked for no jitter, none is added.
        let none = BackoffPolicy::try_new(1000, 2.0, 10_000, 3, Jitter::None, 0.2).expect("valid");
        assert_eq!(none.spread_provider_delay(0, &mut rng), 0);
    }

    #[test]
    fn invalid_policies_are_refused_by_name() {
        let err = BackoffPolicy::try_new(0, 2.0, 10, 3, Jitter::Full, 0.2).unwrap_err();
        assert!(err.to_string().contains("base_ms"));
        let err = BackoffPolicy::try_new(100, 2.0, 10, 3, Jitter::Full, 0.2).unwrap_err();
        assert!(err.to_string().contains("cap_ms"));
        let err = BackoffPolicy::try_new(100, f64::NAN, 1000, 3, Jitter::Full, 0.2).unwrap_err();
        assert!(err.to_string().contains("multiplier"));
        let err = BackoffPolicy::try_new(100, 2.0, 1000, 3, Jitter::Full, 1.5).unwrap_err();
        assert!(err.to_string().contains("jitter_fraction"));
    }

    #[test]
    fn header_forms_as_providers_document_them() {
        type Case<'a> = (&'a [(&'a str, &'a str)], Option<ProviderDelay>);
        let cases: &[Case] = &[
            (&[("Retry-After", "7")], Some(ProviderDelay::After(7000))),
            (&[("retry-after", "Tue, 14 Nov 2023 22:13:30 GMT")], Some(ProviderDelay::After(10_000))),
            (&[("retry-after", "Tue, 14 Nov 2023 22:13:00 GMT")], Some(ProviderDelay::After(0))),
            (&[("retry-after-ms", "250")], Some(ProviderDelay::After(250))),
            (&[("x-ratelimit-reset-requests", "1s")], Some(ProviderDelay::After(1000))),
            (&[("x-ratelimit-reset-tokens", "6ms")], Some(ProviderDelay::After(6))),
            (&[("x-ratelimit-reset-requests", "1m30s")], Some(ProviderDelay::After(90_000))),
            (&[("x-ratelimit-reset-requests", "2h0m0s")], Some(ProviderDelay::After(7_200_000))),
            (&[("x-ratelimit-reset", "30")], Some(ProviderDelay::After(30_000))),
            (&[("x-ratelimit-reset", "1700000060")], Some(ProviderDelay::After(60_000))),
            // OpenRouter's, in epoch milliseconds.
            (&[("x-ratelimit-reset", "1700000042500")], Some(ProviderDelay::After(42_500))),
            (&[("grpc-retry-pushback-ms", "1500")], Some(ProviderDelay::After(1500))),
            (&[("grpc-retry-pushback-ms", "-1")], Some(ProviderDelay::DoNotRetry { after: None })),
            (&[("x-should-retry", "false")], Some(ProviderDelay::DoNotRetry { after: None })),
            // Not retried, but the wait still says how long the tool's breaker stays open.
            (
                &[("X-Should-Retry", " False"), ("retry-after", "2")],
                Some(ProviderDelay::DoNotRetry { after: Some(2000) }),
            ),
            (&[("x-should-retry", "true"), ("retry-after", "2")], Some(ProviderDelay::After(2000))),
            (&[("x-should-retry", "true")], None),
            (&[("retry-after", "soon")], None),
            (&[("retry-after", "-3")], None),
            (&[("Retry-After", "20"), ("retry-after-ms", "1500")], Some(ProviderDelay::After(1500))),
            // What the provider asks of this response wins over its limits' reset times.
            (&[("retry-after", "20"), ("x-ratelimit-reset-requests", "6ms")], Some(ProviderDelay::After(20_000))),
            (&[("grpc-retry-pushback-ms", "900"), ("x-ratelimit-reset", "30")], Some(ProviderDelay::After(900))),
            // OpenAI's 429 for tokens: the tokens' reset, not the requests' (the limit that was hit).
            (
                &[
                    ("x-ratelimit-reset-requests", "6ms"),
                    ("x-ratelimit-remaining-requests", "499"),
                    ("x-ratelimit-reset-tokens", "19.5s"),
                    ("x-ratelimit-remaining-tokens", "0"),
                ],
                Some(ProviderDelay::After(19_500)),
            ),
            // Which limit was hit not said: the later reset, when a retry passes both.
            (
                &[("x-ratelimit-reset-requests", "2s"), ("x-ratelimit-reset-tokens", "40s")],
                Some(ProviderDelay::After(40_000)),
            ),
            (&[("content-type", "application/json")], None),
        ];
        // 2023-11-14T22:13:20Z
        let now = NOW;
        for (pairs, want) in cases {
            assert_eq!(provider_delay(&headers(pairs), || now), *want, "{pairs:?}");
        }
    }

    #[test]
    fn go_durations() {
        assert_eq!(parse_go_duration("0.5s"), Some(500));
        assert_eq!(parse_go_duration("1h"), Some(3_600_000));
        assert_eq!(parse_go_duration("12x"), None);
        assert_eq!(parse_go_duration("s"), None);
        assert_eq!(parse_go_duration(""), None);
    }

    proptest! {
        #[test]
        fn a_delay_never_exceeds_its_cap(
            base in 1u64..5000, mult in 1.0f64..10.0, extra in 0u64..100_000, retry in 0u32..200,
            prev in 0u64..1_000_000, seed in any::<u64>(), fraction in 0.0f64..1.0,
            jitter in prop::sample::select(vec![Jitter::Proportional, Jitter::Full, Jitter::Equal, Jitter::Decorrelated, Jitter::None]),
        ) {
            let cap = base + extra;
            let p = BackoffPolicy::try_new(base, mult, cap, 3, jitter, fraction).unwrap();
            let mut rng = Rng::new(seed);
            prop_assert!(p.delay_ms(retry, prev, &mut rng) <= cap);
        }

        #[test]
        fn header_parsing_never_panics(name in "[a-zA-Z-]{1,30}", value in "\\PC{0,40}") {
            let _ = provider_delay(&headers(&[(&name, &value)]), || NOW);
            let _ = provider_delay(&headers(&[("retry-after", &value)]), || NOW);
            let _ = parse_go_duration(&value);
        }
    }
}
