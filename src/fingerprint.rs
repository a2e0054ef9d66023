//! Fingerprints: the same error, however its numbers, ids, times, paths and
//! quoted values differ, gets the same fingerprint, so "timed out after 30.1s"
//! and "timed out after 30.4s" count as identical.

use regex::Regex;
use std::sync::LazyLock;

/// How much of a message the fingerprint looks at.
const PREFIX_BYTES: usize = 512;

/// Ordered folds: quoted values and URLs first (they contain numbers and paths).
static FOLDS: LazyLock<Vec<(Regex, &'static str)>> = LazyLock::new(|| {
    [
        (r#""[^"]*"|'[^']*'|`[^`]*`"#, "<q>"),
        (r"[a-z][a-z0-9+.\-]*://\S+", "<url>"),
        (r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "<uuid>"),
        (r"\d{4}-\d{2}-\d{2}[t ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(z|[+-]\d{2}:?\d{2})?", "<ts>"),
        (r"\d{1,2}:\d{2}:\d{2}(\.\d+)?", "<ts>"),
        (r"(?:[a-z]:\\|~?/)[^\s:,;)]*", "<path>"),
        (r"\b0x[0-9a-f]+\b|\b[0-9a-f]*\d[0-9a-f]*[a-f][0-9a-f]*\b|\b[0-9a-f]*[a-f][0-9a-f]*\d[0-9a-f]*\b", "<hex>"),
        (r"\d+(\.\d+)?(ns|us|µs|ms|s|m|h|kb|mb|gb|b|%)?\b", "<n>"),
        (r"\s+", " "),
    ]
    .into_iter()
    .map(|(re, with)| (Regex::new(re).expect("fingerprint folds are tested"), with))
    .collect()
});

/// The normalised text a fingerprint hashes (shown in tests and explanations).
pub fn normalise(message: &str) -> String {
    let mut text = crate::classify::prefix(message, PREFIX_BYTES).to_lowercase();
    for (regex, with) in FOLDS.iter() {
        if regex.is_match(&text) {
            text = regex.replace_all(&text, *with).into_owned();
        }
    }
    text.trim().to_string()
}

/// A 64-bit fingerprint of the normalised message (FNV-1a: stable across runs).
pub fn fingerprint(message: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in normalise(message).as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variable_parts_fold_to_the_same_fingerprint() {
        let same = [
            ("timed out after 30.1s", "timed out after 30.4s"),
            ("user 'alice' not found", "user 'bob' not found"),
            (
                "request 3f2b9c1e-8d4a-4c3b-9e2f-1a2b3c4d5e6f failed",
                "request 0a1b2c3d-8d4a-4c3b-9e2f-1a2b3c4d5e6f failed",
            ),
            ("at 2024-05-01T12:00:01Z: refused", "at 2025-01-09T08:30:59.123Z: refused"),
            ("open /tmp/a/b.txt: no such file", "open /var/data/c.txt: no such file"),
            ("GET https://api.x.com/v1/items/1 -> 500", "GET https://api.x.com/v1/items/2 -> 500"),
            (
                "object 9fceb02d0ae598e95dc970b74767f19372d61af8 missing",
                "object 0123456789abcdef0123456789abcdef01234567 missing",
            ),
            ("Connection   refused", "connection refused"),
        ];
        for (a, b) in same {
            assert_eq!(fingerprint(a), fingerprint(b), "{a:?} vs {b:?}: {:?} {:?}", normalise(a), normalise(b));
        }
    }

    #[test]
    fn different_errors_differ() {
        assert_ne!(fingerprint("connection refused"), fingerprint("connection reset by peer"));
        assert_ne!(fingerprint("user not found"), fingerprint("permission denied"));
    }
}
