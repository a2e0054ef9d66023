//! Fingerprints: the same error, however its numbers, ids, times, paths and
//! quoted values differ, gets the same fingerprint, so "timed out after 30.1s"
//! and "timed out after 30.4s" count as identical.
//!
//! What is fingerprinted is the error as the model is shown it ([`of_shown`]): the
//! message redacted and cut to the policy's length, and where it happened. Two
//! failures are identical when the agent is shown the same error twice. A Python
//! traceback's first bytes are its outermost frames, the same for every error a tool
//! raises through the same code; its exception and innermost frame tell the errors
//! apart. And the message's fingerprint is its shape's (`crate::shapes`), taken once
//! for all the messages of that shape: a fleet's failures differ mostly in numbers.
//!
//! One pass over the message's first bytes: whitespace folds to one space,
//! letters to lower case, quoted values become `<q>`, URLs `<url>`, paths
//! `<path>`, and any word with a digit in it (numbers with units, UUIDs, hex
//! ids, git SHAs, timestamps, versions) `<n>`; the normalised bytes, held on
//! the stack, are then hashed eight at a time. It runs on every failure, so it
//! allocates nothing and runs no regex.

/// How much of a message the fingerprint looks at.
const PREFIX_BYTES: usize = 512;

/// The most normalised bytes `PREFIX_BYTES` can give: a one-byte piece becomes
/// at most seven (`/,` → `<path>,`), so 3.5 times the prefix.
const NORMALISED_BYTES: usize = PREFIX_BYTES * 7 / 2;

/// What a byte is to the scanner: bits, so one lookup answers every question.
const SPACE: u8 = 1;
const QUOTE: u8 = 2;
/// Ends a word and stands alone.
const DELIMITER: u8 = 4;
const DIGIT: u8 = 8;
/// A `:`, which may start a URL's `://` or a drive's `C:\`.
const COLON: u8 = 16;
/// A `/`, which a path holds (`/tmp`, `~/x`).
const SLASH: u8 = 32;
/// Not part of a word (letters, digits, `.`, `-`, `:`, `/`, non-ASCII bytes...).
const BREAKS_WORD: u8 = SPACE | QUOTE | DELIMITER;

const CLASSES: [u8; 256] = {
    let mut classes = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        classes[b] = match b as u8 {
            b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | b' ' => SPACE,
            b'"' | b'\'' | b'`' => QUOTE,
            b',' | b';' | b'(' | b')' | b'[' | b']' | b'{' | b'}' | b'<' | b'>' | b'=' | b'|' | b'!' | b'?' | b'&' => {
                DELIMITER
            }
            // 0x01 too: it stands for a word with a digit in a message's shape (`crate::shapes`).
            b'0'..=b'9' | 0x01 => DIGIT,
            b':' => COLON,
            b'/' => SLASH,
            _ => 0,
        };
        b += 1;
    }
    classes
};

fn class(b: u8) -> u8 {
    CLASSES[usize::from(b)]
}

/// Each byte's class (high byte) and its lower case (low byte): one lookup per byte of a word.
const WORD_BYTES: [u16; 256] = {
    let mut table = [0u16; 256];
    let mut b = 0;
    while b < 256 {
        table[b] = (CLASSES[b] as u16) << 8 | (b as u8).to_ascii_lowercase() as u16;
        b += 1;
    }
    table
};

/// Writes the normalised text of `message` into `out` and gives its length: pieces with single
/// spaces between them where the text had whitespace. `out` holds the most any prefix gives.
///
/// A word's bytes are copied, lower-cased, as it is scanned (one table lookup a byte gives both):
/// most words are kept as they are, and one folded to `<n>`, `<path>` or `<url>` is written over.
/// Scanning a word, then copying it, took 4,860 instructions for the engine bench's 200-byte
/// message; this takes 3,790. The word always fits: `out` has room for 3.5 times the bytes read
/// so far, plus those not read yet.
fn normalise_into(message: &str, out: &mut [u8; NORMALISED_BYTES]) -> usize {
    let text = crate::classify::prefix(message, PREFIX_BYTES).as_bytes();
    let (mut i, mut len, mut space, mut started) = (0, 0, false, false);
    fn put(out: &mut [u8], len: &mut usize, bytes: &[u8]) {
        out[*len..*len + bytes.len()].copy_from_slice(bytes);
        *len += bytes.len();
    }
    while i < text.len() {
        let b = text[i];
        let kind = class(b);
        if kind & SPACE != 0 {
            space = started;
            i += 1;
            continue;
        }
        if std::mem::take(&mut space) {
            put(out, &mut len, b" ");
        }
        started = true;
        // A quoted value; an apostrophe inside a word ("don't") opens nothing.
        if kind & QUOTE != 0 && (b != b'\'' || i == 0 || !(text[i - 1].is_ascii_alphanumeric() || text[i - 1] == 1)) {
            if let Some(at) = memchr::memchr(b, &text[i + 1..]) {
                put(out, &mut len, b"<q>");
                i += at + 2;
                continue;
            }
        }
        if kind & BREAKS_WORD != 0 {
            put(out, &mut len, &text[i..=i]);
            i += 1;
            continue;
        }
        // The word, copied lower-cased, and the classes of its bytes together.
        let (mut seen, mut word_len) = (0u16, 0);
        for (to, &from) in out[len..].iter_mut().zip(&text[i..]) {
            let entry = WORD_BYTES[usize::from(from)];
            if entry & u16::from(BREAKS_WORD) << 8 != 0 {
                break;
            }
            seen |= entry;
            *to = entry as u8;
            word_len += 1;
        }
        let seen = (seen >> 8) as u8;
        let (word, mut end) = (&text[i..i + word_len], i + word_len);
        if seen & (DIGIT | COLON | SLASH) == 0 {
            // Most words: no number, URL or path can be in them.
            len += word_len;
        } else if seen & COLON != 0 && word.windows(3).any(|w| w == b"://") {
            // A URL runs to the next whitespace, through its query string.
            put(out, &mut len, b"<url>");
            end += text[end..].iter().position(|&c| class(c) & SPACE != 0).unwrap_or(text.len() - end);
        } else if word[0] == b'/'
            || word.starts_with(b"~/")
            || (word.len() > 2 && word[0].is_ascii_alphabetic() && word[1] == b':' && word[2] == b'\\')
        {
            put(out, &mut len, b"<path>");
        } else if seen & DIGIT != 0 {
            put(out, &mut len, b"<n>");
        } else {
            len += word_len;
        }
        i = end;
    }
    len
}

/// The normalised text a fingerprint hashes (shown in tests and explanations).
pub fn normalise(message: &str) -> String {
    let mut out = Box::new([0; NORMALISED_BYTES]);
    let len = normalise_into(message, &mut out);
    // Whole words and ASCII pieces only, cut at a char boundary: still UTF-8.
    String::from_utf8_lossy(&out[..len]).into_owned()
}

/// A 64-bit fingerprint of the normalised message.
pub fn fingerprint(message: &str) -> u64 {
    let mut out = [0; NORMALISED_BYTES];
    let len = normalise_into(message, &mut out);
    hash(&out[..len])
}

/// The fingerprint of a failure as it is shown: its message's (a kept message's, its shape's,
/// taken once: see `KeptMessage::fingerprint`) with the location shown, if any.
pub fn of_shown(message: u64, location: &str) -> u64 {
    match location.is_empty() {
        true => message,
        false => mix(message, fingerprint(location)),
    }
}

/// A 64-bit hash of `bytes`, eight at a time: each word is mixed in by a
/// multiply folded to 64 bits (as foldhash and wyhash do). Fixed constants, so
/// it is the same in every process; fingerprints never leave one, but tests
/// and explanations can rely on that.
fn hash(bytes: &[u8]) -> u64 {
    const SEED: u64 = 0x243f_6a88_85a3_08d3;
    let mut chunks = bytes.chunks_exact(8);
    let mut h = SEED;
    for chunk in &mut chunks {
        h = mix(h, u64::from_le_bytes(chunk.try_into().expect("eight bytes")));
    }
    let mut tail = [0u8; 8];
    tail[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
    // The length tells "ab" from "ab\0".
    mix(mix(h, u64::from_le_bytes(tail)), bytes.len() as u64)
}

/// `h` with `word` mixed in: a multiply folded to 64 bits.
fn mix(h: u64, word: u64) -> u64 {
    const MULTIPLIER: u64 = 0x9e37_79b9_7f4a_7c15;
    let full = u128::from(h ^ word) * u128::from(MULTIPLIER);
    (full as u64) ^ ((full >> 64) as u64)
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

    #[test]
    fn the_most_expanding_messages_fit_the_buffer() {
        // Each of these pieces grows the most a piece can: one byte becomes `<path>`.
        for piece in ["/,", "/ ", "/\t", "5,", "'' "] {
            let message = piece.repeat(PREFIX_BYTES);
            assert!(normalise(&message).len() <= NORMALISED_BYTES, "{piece:?}");
            assert_eq!(fingerprint(&message), hash(normalise(&message).as_bytes()));
        }
        assert_eq!(normalise(&"/,".repeat(PREFIX_BYTES)).len(), NORMALISED_BYTES);
    }

    /// tests/data/fingerprints/normalised.jsonl: messages and their normalised text, which the
    /// clients' fallbacks must give too (they judge identical errors as the sidecar does).
    /// `REBOUND_BLESS=1 cargo test --lib fingerprint` writes the texts anew from the messages.
    #[test]
    fn the_shared_normalised_texts_are_this_normalise() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/fingerprints/normalised.jsonl");
        let file = std::fs::read_to_string(path).expect("the shared file");
        let mut cases: Vec<serde_json::Value> =
            file.lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect();
        assert!(cases.len() >= 500, "{} cases", cases.len());
        if std::env::var_os("REBOUND_BLESS").is_some() {
            for case in &mut cases {
                let message = case["message"].as_str().expect("a message").to_string();
                case["normalised"] = normalise(&message).into();
            }
            let lines: Vec<String> = cases.iter().map(|c| serde_json::to_string(c).expect("JSON")).collect();
            std::fs::write(path, lines.join("\n") + "\n").expect("written");
        }
        for case in &cases {
            let message = case["message"].as_str().expect("a message");
            assert_eq!(normalise(message), case["normalised"].as_str().expect("a text"), "{message:?}");
        }
    }

    proptest! {
        #[test]
        fn fingerprint_is_the_hash_of_the_normalised_text(text in "\\PC{0,600}") {
            prop_assert_eq!(hash(normalise(&text).as_bytes()), fingerprint(&text));
        }

        #[test]
        fn short_pieces_never_overflow_the_buffer(text in "[/5'`,~: a\\\\\t]{0,700}") {
            prop_assert!(normalise(&text).len() <= NORMALISED_BYTES);
            prop_assert_eq!(hash(normalise(&text).as_bytes()), fingerprint(&text));
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
