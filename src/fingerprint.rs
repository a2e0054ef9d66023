//! Fingerprints: the same error, however its numbers, ids, times, paths and
//! quoted values differ, gets the same fingerprint, so "timed out after 30.1s"
//! and "timed out after 30.4s" count as identical.
//!
//! One pass over the message's first bytes, hashing as it goes: whitespace
//! folds to one space, letters to lower case, quoted values become `<q>`,
//! URLs `<url>`, paths `<path>`, and any word with a digit in it (numbers with
//! units, UUIDs, hex ids, git SHAs, timestamps, versions) `<n>`. It runs on
//! every failure, so it allocates nothing and runs no regex.

/// How much of a message the fingerprint looks at.
const PREFIX_BYTES: usize = 512;

/// Characters that end a word, besides whitespace and quotes.
fn is_delimiter(b: u8) -> bool {
    matches!(b, b',' | b';' | b'(' | b')' | b'[' | b']' | b'{' | b'}' | b'<' | b'>' | b'=' | b'|' | b'!' | b'?' | b'&')
}

fn is_quote(b: u8) -> bool {
    matches!(b, b'"' | b'\'' | b'`')
}

/// Writes pieces with single spaces between them where the text had whitespace.
struct Pieces<F: FnMut(&[u8])> {
    emit: F,
    space: bool,
    started: bool,
}

impl<F: FnMut(&[u8])> Pieces<F> {
    fn push(&mut self, bytes: &[u8]) {
        if self.space && self.started {
            (self.emit)(b" ");
        }
        self.space = false;
        self.started = true;
        (self.emit)(bytes);
    }

    /// A word in lower case, through a small buffer (no allocation).
    fn push_lower(&mut self, word: &[u8]) {
        let mut buf = [0u8; 64];
        for chunk in word.chunks(buf.len()) {
            let lower = &mut buf[..chunk.len()];
            lower.copy_from_slice(chunk);
            lower.make_ascii_lowercase();
            self.push(lower);
        }
    }
}

/// Feeds the normalised pieces of `message` to `emit`, in order.
fn normalise_into(message: &str, emit: impl FnMut(&[u8])) {
    let text = crate::classify::prefix(message, PREFIX_BYTES).as_bytes();
    let mut out = Pieces { emit, space: false, started: false };
    let mut i = 0;
    while i < text.len() {
        let b = text[i];
        if b.is_ascii_whitespace() {
            out.space = true;
            i += 1;
            continue;
        }
        // A quoted value; an apostrophe inside a word ("don't") opens nothing.
        let opens = is_quote(b) && (b != b'\'' || i == 0 || !text[i - 1].is_ascii_alphanumeric());
        if opens {
            if let Some(len) = text[i + 1..].iter().position(|&c| c == b) {
                out.push(b"<q>");
                i += len + 2;
                continue;
            }
        }
        if is_quote(b) || is_delimiter(b) {
            out.push(&[b]);
            i += 1;
            continue;
        }
        let rest = &text[i..];
        let word_len =
            rest.iter().position(|&c| c.is_ascii_whitespace() || is_quote(c) || is_delimiter(c)).unwrap_or(rest.len());
        let word = &rest[..word_len];
        if word.windows(3).any(|w| w == b"://") {
            // A URL runs to the next whitespace, through its query string.
            out.push(b"<url>");
            i += rest.iter().position(u8::is_ascii_whitespace).unwrap_or(rest.len());
            continue;
        }
        let windows_path = word.len() > 2 && word[0].is_ascii_alphabetic() && word[1] == b':' && word[2] == b'\\';
        if word[0] == b'/' || word.starts_with(b"~/") || windows_path {
            out.push(b"<path>");
        } else if word.iter().any(u8::is_ascii_digit) {
            out.push(b"<n>");
        } else {
            out.push_lower(word);
        }
        i += word_len;
    }
}

/// The normalised text a fingerprint hashes (shown in tests and explanations).
pub fn normalise(message: &str) -> String {
    let mut bytes = Vec::with_capacity(message.len().min(PREFIX_BYTES));
    normalise_into(message, |piece| bytes.extend_from_slice(piece));
    // Whole words and ASCII pieces only, cut at a char boundary: still UTF-8.
    String::from_utf8_lossy(&bytes).into_owned()
}

/// A 64-bit fingerprint of the normalised message (FNV-1a: stable across runs).
pub fn fingerprint(message: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    normalise_into(message, |piece| {
        for b in piece {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    });
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

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
            // Real: Python's socket timeout and Windows paths.
            ("[Errno 110] Connection timed out", "[Errno 110]  Connection timed out "),
            (r"FileNotFoundError: C:\Users\a\x.txt", r"FileNotFoundError: D:\data\y.txt"),
            // Real: the OpenAI SDK's 429 with the wait and the counts that vary.
            (
                "Rate limit reached for gpt-4o on tokens per min (TPM): Limit 30000, Used 29867, Requested 1205. Please try again in 2.144s.",
                "Rate limit reached for gpt-4o on tokens per min (TPM): Limit 30000, Used 29001, Requested 990. Please try again in 812ms.",
            ),
        ];
        for (a, b) in same {
            assert_eq!(fingerprint(a), fingerprint(b), "{a:?} vs {b:?}: {:?} {:?}", normalise(a), normalise(b));
        }
    }

    #[test]
    fn different_errors_differ() {
        assert_ne!(fingerprint("connection refused"), fingerprint("connection reset by peer"));
        assert_ne!(fingerprint("user not found"), fingerprint("permission denied"));
        assert_ne!(fingerprint("don't retry"), fingerprint("do retry"));
        assert_ne!(fingerprint("table 'users' is locked"), fingerprint("table 'users' is missing"));
    }

    #[test]
    fn normalised_text_reads_as_the_folds_say() {
        assert_eq!(
            normalise("GET https://x.io/a?b=1 failed after 3.2s: open /tmp/f: 'x' denied"),
            "get <url> failed after <n> open <path> <q> denied"
        );
        assert_eq!(normalise("  Don't  PANIC  "), "don't panic");
    }

    proptest! {
        #[test]
        fn fingerprint_is_the_hash_of_the_normalised_text(text in "\\PC{0,600}") {
            let mut h: u64 = 0xcbf2_9ce4_8422_2325;
            for b in normalise(&text).as_bytes() {
                h ^= u64::from(*b);
                h = h.wrapping_mul(0x0100_0000_01b3);
            }
            prop_assert_eq!(h, fingerprint(&text));
        }

        #[test]
        fn numbers_never_change_the_fingerprint(a in 0u64..1_000_000, b in 0u64..1_000_000) {
            prop_assert_eq!(
                fingerprint(&format!("upstream timed out after {a} ms (attempt {b})")),
                fingerprint(&format!("upstream timed out after {b} ms (attempt {a})"))
            );
        }
    }
}
