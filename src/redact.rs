//! Secret redaction: one pass used by snippets, escalation reports and logs,
//! so no API key, token or password leaves the sidecar in any text it writes.
//!
//! Each pattern replaces the secret (and only the secret: the key name in a
//! `password=` pair stays, so the LLM still sees what was wrong) with a typed
//! placeholder such as `[REDACTED:openai_key]`.

use aho_corasick::AhoCorasick;
use regex::{Captures, Regex};
use std::borrow::Cow;
use std::sync::LazyLock;

/// One kind of secret: a pattern and which capture group is the secret (0: all of it).
struct Pattern {
    kind: &'static str,
    regex: Regex,
    group: usize,
}

fn p(kind: &'static str, group: usize, re: &str) -> Pattern {
    Pattern { kind, regex: Regex::new(re).expect("redaction patterns are tested"), group }
}

/// Ordered: specific shapes first, generic `name=value` pairs last. Word
/// boundaries are ASCII (`(?-u:\b)`): a Unicode `\b` makes the regex engine
/// leave its fast DFA on any non-ASCII text, and secrets are ASCII. `_` is a
/// word character, so a name's boundary is taken before the whole identifier,
/// which may run on in front of the name: `[a-z0-9_]*` for names that are no
/// part of ordinary words (`PGPASSWORD`, `SERPAPI_API_KEY`, `clientSecret`,
/// `HF_TOKEN`), `(?:[a-z0-9_]*_)?`, joined by `_` only, for short ones that
/// are (`MYSQL_PWD`, not `bypass`) and header names (`HTTP_AUTHORIZATION`).
///
/// A cookie's value may sit in double quotes (RFC 6265), escaped in JSON
/// (`=\"`); a quote opens one only right after the `=` and closes it before
/// any comma, so a JSON string ending in base64's `=` runs on no further. A
/// quoted value cut before its closing quote runs to the line's end, unless
/// the quote is followed by a space or one of `,;)}]`: then it closes the
/// string that held the value. A command's arguments, as Python, Node and Go
/// print a list (`'--password', 'x'`, `"--token" "x"`), give a secret flag's
/// value as the next quoted item; an item starting with `-` is the next flag,
/// not a value. On a command line (`--password Hq7x`, as Node's `Command
/// failed:` and Go's `Cmd.String` write one) the next word is the value only
/// when it holds something besides lower-case letters, so `--password
/// requires an argument` stays. A
/// URL's userinfo ends at the first `/`, `?` or `#`, so an `@` in a query is
/// no password's end; a password without an `@` before them may hold a `?`
/// or `#` (SQLAlchemy takes one unencoded), unless all before a `?` is a port
/// (a query after a port: `h:8080?email=a@b`). Digits, a `#` and an `@` are a
/// password's (`redis://root:12#ab@h`, which redis-py dials as `root:12`), even
/// where they could be a port and a fragment holding an `@`: masking such a
/// fragment is the safer way to be wrong;
/// and one with a `/` (base64 makes them; SQLAlchemy takes them too) when what
/// comes before the `/` is no port: the text up to the first `@` (an IPv6
/// address's `]` ends it: `http://[::1]:8080/a@b` has no password).
/// An alternative without the secret's group matches what must stay, as
/// MySQL's `(using password: YES)`, which says only whether one was sent.
static PATTERNS: LazyLock<Vec<Pattern>> = LazyLock::new(|| {
    vec![
        p(
            "private_key",
            0,
            r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----[\s\S]*?(?:-----END[A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----|\z)",
        ),
        p("anthropic_key", 0, r"(?-u:\b)sk-ant-[A-Za-z0-9_\-]{10,}"),
        p("stripe_key", 0, r"(?-u:\b)(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{10,}|(?-u:\b)whsec_[A-Za-z0-9+/=]{20,}"),
        p("openai_key", 0, r"(?-u:\b)sk-(?:proj-|svcacct-|admin-|None-)?[A-Za-z0-9_\-]{20,}"),
        p("google_key", 0, r"(?-u:\b)AIza[0-9A-Za-z_\-]{35}"),
        p("aws_access_key", 0, r"(?-u:\b)(?:AKIA|ASIA|ABIA|ACCA|AIDA|AROA)[0-9A-Z]{16}(?-u:\b)"),
        p(
            "aws_secret_key",
            2,
            r#"(?i)(aws_?secret_?access_?key|secret_?access_?key|aws_?secret)["']?\s*[:=]\s*["']?([A-Za-z0-9/+=]{40})"#,
        ),
        p("github_token", 0, r"(?-u:\b)(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{30,}|(?-u:\b)github_pat_[A-Za-z0-9_]{22,}"),
        p("slack_token", 0, r"(?-u:\b)xox[abposre]-[A-Za-z0-9\-]{10,}"),
        p("gitlab_token", 0, r"(?-u:\b)(?:glpat|gldt|glrt|glptt|glcbt|gloas)-[A-Za-z0-9_\-]{20,}"),
        p("npm_token", 0, r"(?-u:\b)npm_[A-Za-z0-9]{36}(?-u:\b)"),
        p("huggingface_token", 0, r"(?-u:\b)hf_[A-Za-z0-9]{30,}"),
        p("sendgrid_key", 0, r"(?-u:\b)SG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}"),
        p("slack_webhook", 1, r"(?i)(?-u:\b)hooks\.slack\.com/(?:services|workflows|triggers)/([A-Za-z0-9_/]{16,})"),
        p("discord_webhook", 1, r"(?i)(?-u:\b)discord(?:app)?\.com/api/webhooks/[0-9]+/([A-Za-z0-9_\-]{16,})"),
        p("jwt", 0, r"(?-u:\b)eyJ[A-Za-z0-9_\-]{5,}\.eyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]{5,}"),
        p("bearer_token", 1, r"(?i)(?-u:\b)bearer\s+([A-Za-z0-9._~+/=\-]{8,})"),
        p("basic_auth", 1, r"(?i)(?-u:\b)basic\s+([A-Za-z0-9+/]{8,}={0,2})"),
        p(
            "authorization",
            1,
            r#"(?i)(?-u:\b)(?:[a-z0-9_]*_)?authorization["']?[ \t]*[:=][ \t]*["']?(?:\[?[a-z][a-z0-9._\-]*[ \t]+)?([^\s"',;\]]{4,})"#,
        ),
        p(
            "cookie",
            1,
            r#"(?i)(?-u:\b)(?:[a-z0-9_]*_)?(?:set-)?cookie["']?[ \t]*[:=][ \t]*["']?((?:=\\?"(?:[^\r\n",]*"|[^\r\n",;)}\]\s][^\r\n"]*)|[^\r\n"'\]]){3,})"#,
        ),
        p("url_signature", 2, r#"(?i)[?&;](sig|x-amz-signature|x-goog-signature)=([^\s&"'#;)\]>]{8,})"#),
        p(
            "url_password",
            1,
            r"(?i)(?-u:\b)[a-z][a-z0-9+.\-]{1,20}://[^\s:/?#]*:([^\s/?#]+|[^\s/?#]*[^\s/?#0-9][^\s/]*|[^\s/?#@\[\]]*[^\s/?#@0-9\[\]][^\s@\]]*|[0-9]*#[^\s/]*)@",
        ),
        p(
            "secret_argument",
            1,
            r#"(?i)["']--?[a-z0-9_\-]*(?:password|passwd|passphrase|pwd|pass|token|secret|api[_\-]?key|apikey)["'],?[ \t]*["']([^"'\r\n\-][^"'\r\n]*)"#,
        ),
        p(
            "secret_argument",
            1,
            r#"(?i)(?:\A|[\s(])--?[a-z0-9_\-]*(?:password|passwd|passphrase|pwd|pass|token|secret|api[_\-]?key|apikey)[ \t]+(?-i:([^\s"'\-]*[^\s"'\-a-z][^\s"']*))"#,
        ),
        p(
            "password",
            2,
            r#"(?i)(?-u:\b)([a-z0-9_]*(?:password|passwd|passphrase)|(?:[a-z0-9_]*_)?(?:pwd|pass))(?:["']?\s*[:=]\s*["']?|["']?\s*=>\s*["']?)([^\s"'&,;}\])]{3,})|\(using password: (?:YES|NO)\)"#,
        ),
        p(
            "api_key",
            2,
            r#"(?i)(?-u:\b)([a-z0-9_]*(?:api[_\-]?key|apikey|x-api-key|access[_\-]?key|account[_\-]?key))(?:["']?\s*[:=]\s*["']?)([^\s"'&,;}\])]{6,})"#,
        ),
        p(
            "secret",
            2,
            r#"(?i)(?-u:\b)([a-z0-9_]*(?:client[_\-]?secret|secret[_\-]?key|secret|private[_\-]?key))(?:["']?\s*[:=]\s*["']?)([^\s"'&,;}\])]{6,})"#,
        ),
        p(
            "token",
            2,
            r#"(?i)(?-u:\b)([a-z0-9_]*(?:access[_\-]?token|refresh[_\-]?token|auth[_\-]?token|id[_\-]?token|session[_\-]?token|token))(?:["']?\s*[:=]\s*["']?)([^\s"'&,;}\])]{8,})"#,
        ),
    ]
});

/// Literals of which every match of a pattern holds one (ASCII case aside),
/// each with the patterns it lets through: text with none of them, most error
/// text, has no secret and is read once, cheaply; text with some (a URL's
/// `://`, "tokens per min") is matched against those patterns only.
const NEEDLES: &[(&str, &[&str])] = &[
    ("-----begin", &["private_key"]),
    ("sk-", &["anthropic_key", "openai_key"]),
    ("sk_", &["stripe_key"]),
    ("whsec_", &["stripe_key"]),
    ("rk_", &["stripe_key"]),
    ("aiza", &["google_key"]),
    ("akia", &["aws_access_key"]),
    ("asia", &["aws_access_key"]),
    ("abia", &["aws_access_key"]),
    ("acca", &["aws_access_key"]),
    ("aida", &["aws_access_key"]),
    ("aroa", &["aws_access_key"]),
    ("secret", &["aws_secret_key", "secret_argument", "secret"]),
    ("ghp_", &["github_token"]),
    ("gho_", &["github_token"]),
    ("ghu_", &["github_token"]),
    ("ghs_", &["github_token"]),
    ("ghr_", &["github_token"]),
    ("github_pat_", &["github_token"]),
    ("xox", &["slack_token"]),
    ("glpat-", &["gitlab_token"]),
    ("gldt-", &["gitlab_token"]),
    ("glrt-", &["gitlab_token"]),
    ("glptt-", &["gitlab_token"]),
    ("glcbt-", &["gitlab_token"]),
    ("gloas-", &["gitlab_token"]),
    ("npm_", &["npm_token"]),
    ("hf_", &["huggingface_token"]),
    ("sg.", &["sendgrid_key"]),
    ("hooks.slack.com", &["slack_webhook"]),
    ("/api/webhooks/", &["discord_webhook"]),
    ("eyj", &["jwt"]),
    ("bearer", &["bearer_token"]),
    ("basic", &["basic_auth"]),
    ("authorization", &["authorization"]),
    ("cookie", &["cookie"]),
    ("sig=", &["url_signature"]),
    ("signature=", &["url_signature"]),
    ("://", &["url_password"]),
    ("pass", &["secret_argument", "password"]),
    ("pwd", &["secret_argument", "password"]),
    ("api_key", &["secret_argument", "api_key"]),
    ("api-key", &["secret_argument", "api_key"]),
    ("apikey", &["secret_argument", "api_key"]),
    ("access_key", &["api_key"]),
    ("access-key", &["api_key"]),
    ("accesskey", &["api_key"]),
    ("account_key", &["api_key"]),
    ("account-key", &["api_key"]),
    ("accountkey", &["api_key"]),
    ("private", &["secret"]),
    ("token", &["secret_argument", "token"]),
];

/// For each needle, the patterns it lets through (every pattern of each kind it names), as bits by pattern index.
static GATES: LazyLock<Vec<u32>> = LazyLock::new(|| {
    assert!(PATTERNS.len() <= 32, "one bit per pattern");
    NEEDLES
        .iter()
        .map(|(needle, kinds)| {
            kinds.iter().fold(0, |bits, kind| {
                let of_kind = PATTERNS.iter().enumerate().filter(|(_, p)| p.kind == *kind);
                let kind_bits = of_kind.fold(0, |bits, (i, _)| bits | 1 << i);
                assert_ne!(kind_bits, 0, "needle {needle:?} names no pattern {kind:?}");
                bits | kind_bits
            })
        })
        .collect()
});

/// Finds the needles (lower case) in text lowered first: lowered, the search
/// can use the vector searcher (Teddy), which reads several bytes at a time;
/// a case-insensitive automaton steps byte by byte, three times slower.
#[allow(clippy::large_enum_variant)] // one, in a static
enum Prefilter {
    /// SIMD, where the CPU has it (SSSE3 or AVX2 on x86-64, NEON on aarch64): a searcher for
    /// the short needles and one for the others, each with its needles' gates.
    Packed([(aho_corasick::packed::Searcher, Vec<u32>); 2]),
    /// Elsewhere.
    Automaton(AhoCorasick),
}

/// Needles this long or shorter are searched apart from the others. A Teddy
/// searcher screens every position by as many leading bytes as its shortest
/// needle has (4 at most) and checks each position that passes: all needles in
/// one searcher, screened by 3 bytes, let 13 positions of the engine bench's
/// 200-byte message through, 1,600 instructions a failure; the longer needles
/// apart, screened by 4, let few through, and the two searches cost 900.
const SHORT_NEEDLE: usize = 3;

impl Prefilter {
    fn new(packed: bool) -> Option<Prefilter> {
        if packed {
            let searcher = |short: bool| {
                let needles =
                    || NEEDLES.iter().zip(GATES.iter()).filter(move |((n, _), _)| (n.len() <= SHORT_NEEDLE) == short);
                let searcher =
                    aho_corasick::packed::Config::new().builder().extend(needles().map(|((n, _), _)| n)).build()?;
                Some((searcher, needles().map(|(_, gate)| *gate).collect()))
            };
            return Some(Prefilter::Packed([searcher(true)?, searcher(false)?]));
        }
        let needles = NEEDLES.iter().map(|(needle, _)| needle);
        Some(Prefilter::Automaton(AhoCorasick::new(needles).expect("redaction needles are tested")))
    }

    /// The patterns let through by the needles in `lowered`, as bits.
    fn gates(&self, lowered: &[u8]) -> u32 {
        let mut bits = 0;
        match self {
            Prefilter::Packed(searchers) => {
                for (searcher, gates) in searchers {
                    // From one past each match's start: every needle is seen, even inside another.
                    let mut at = 0;
                    while let Some(m) = searcher.find_in(lowered, aho_corasick::Span::from(at..lowered.len())) {
                        bits |= gates[m.pattern().as_usize()];
                        at = m.start() + 1;
                    }
                }
            }
            Prefilter::Automaton(automaton) => {
                for m in automaton.find_overlapping_iter(lowered) {
                    bits |= GATES[m.pattern().as_usize()];
                }
            }
        }
        bits
    }
}

static PREFILTER: LazyLock<Prefilter> =
    LazyLock::new(|| Prefilter::new(true).or_else(|| Prefilter::new(false)).expect("the automaton always builds"));

/// Letters outside ASCII that a case-insensitive pattern takes for an ASCII
/// one (Unicode's simple case folding): the Kelvin sign for `k`, the long s for
/// `s`. Lowering ASCII leaves them, so a needle spelt with one (`paſsword`) is
/// not found; text holding either is matched against every pattern instead.
const FOLDED_TO_ASCII: [&str; 2] = ["\u{212A}", "\u{17F}"];

/// Bytes that every match of a pattern holds besides one of its needles: text
/// that lacks the byte skips the pattern. A URL (`://`) is in most error text,
/// and a password in one is rare, so `url_password` is asked for its `@` first.
const ALSO_NEEDED: &[(&str, u8)] = &[("url_password", b'@')];

/// For each of `ALSO_NEEDED`, its pattern as a bit.
static ALSO_NEEDED_BITS: LazyLock<Vec<(u32, u8)>> = LazyLock::new(|| {
    ALSO_NEEDED
        .iter()
        .map(|(kind, byte)| {
            let i = PATTERNS.iter().position(|p| p.kind == *kind);
            (1 << i.unwrap_or_else(|| panic!("{kind:?} in ALSO_NEEDED names no pattern")), *byte)
        })
        .collect()
});

/// The patterns `text` may match, as bits: the gates of the needles it holds,
/// ASCII case aside, less those missing a byte they also need.
fn candidates(text: &str) -> u32 {
    let folds = !text.is_ascii()
        && FOLDED_TO_ASCII.iter().any(|letter| memchr::memmem::find(text.as_bytes(), letter.as_bytes()).is_some());
    let bits = if folds { u32::MAX >> (32 - PATTERNS.len()) } else { needle_gates(text) };
    ALSO_NEEDED_BITS.iter().fold(bits, |bits, &(bit, byte)| {
        if bits & bit != 0 && memchr::memchr(byte, text.as_bytes()).is_none() {
            bits & !bit
        } else {
            bits
        }
    })
}

/// The gates of the needles `text` holds, ASCII case aside. Read in pieces
/// lowered on the stack, each overlapping the next by the longest needle less one.
fn needle_gates(text: &str) -> u32 {
    const PIECE: usize = 1024;
    const OVERLAP: usize = {
        let (mut i, mut longest) = (0, 0);
        while i < NEEDLES.len() {
            if NEEDLES[i].0.len() > longest {
                longest = NEEDLES[i].0.len();
            }
            i += 1;
        }
        longest - 1
    };
    let bytes = text.as_bytes();
    let mut lower = [0u8; PIECE + OVERLAP];
    let (mut start, mut bits) = (0, 0);
    loop {
        let end = (start + PIECE + OVERLAP).min(bytes.len());
        let piece = &mut lower[..end - start];
        piece.copy_from_slice(&bytes[start..end]);
        piece.make_ascii_lowercase();
        bits |= PREFILTER.gates(piece);
        if end == bytes.len() {
            return bits;
        }
        start += PIECE;
    }
}

/// Passes over one text at most, counting the last, which finds nothing. A pass
/// can uncover a secret the pass before could not see: replacing `w/cd://e:f`
/// after `pass:` takes away the `/` that kept `ab://u:]pass:w/cd://e:f@h` from
/// reading as a URL with a password (after a `]`, which ends an IPv6 address, a
/// password holds no `/`). So passes repeat until one changes
/// nothing: text with one secret settles in two, that one in three, and text
/// still changing after this many is given up.
const MAX_PASSES: usize = 8;

/// What is left of a text that never settled: nothing of it is shown.
const UNSETTLED: &str = "[REDACTED:text]";

/// The text with every secret replaced by `[REDACTED:kind]`; borrowed when nothing matched.
/// Redacting the result again changes nothing.
pub fn redact(text: &str) -> Cow<'_, str> {
    redact_within(text, MAX_PASSES)
}

fn redact_within(text: &str, passes: usize) -> Cow<'_, str> {
    let Some(mut out) = redact_once(text) else {
        return Cow::Borrowed(text);
    };
    for _ in 1..passes {
        match redact_once(&out) {
            None => return Cow::Owned(out),
            Some(next) => out = next,
        }
    }
    Cow::Borrowed(UNSETTLED)
}

/// One pass of every pattern the text's needles let through, in order; `None` when nothing was replaced.
fn redact_once(text: &str) -> Option<String> {
    let let_through = candidates(text);
    if let_through == 0 {
        return None;
    }
    let mut out: Option<String> = None;
    let chosen = PATTERNS.iter().enumerate().filter(|(i, _)| let_through & 1 << i != 0);
    for pattern in chosen.map(|(_, p)| p) {
        let current = out.as_deref().unwrap_or(text);
        if !pattern.regex.is_match(current) {
            continue;
        }
        let mut replaced_any = false;
        let replaced = pattern.regex.replace_all(current, |caps: &Captures<'_>| {
            let whole = caps.get(0).expect("group 0 always matches");
            // An alternative without the secret's group matched what must stay.
            let Some(secret) = caps.get(pattern.group) else {
                return whole.as_str().to_string();
            };
            // A value that is already a placeholder stays as it is.
            if secret.as_str().starts_with("[REDACTED") {
                return whole.as_str().to_string();
            }
            replaced_any = true;
            let start = secret.start() - whole.start();
            let end = secret.end() - whole.start();
            let w = whole.as_str();
            format!("{}[REDACTED:{}]{}", &w[..start], pattern.kind, &w[end..])
        });
        if replaced_any {
            out = Some(replaced.into_owned());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn provider_keys_and_url_passwords_are_redacted() {
        let cases = [
            ("Incorrect API key provided: sk-proj-abcdefghijklmnopqrstuvwxyz0123456789ABCD.", "openai_key"),
            ("x-api-key: sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789-_AbCdEfGh", "anthropic_key"),
            ("could not connect to postgres://app:hunter2@db.internal:5432/app", "url_password"),
            ("headers={'Authorization': 'Bearer abcDEF123456.xyz'}", "bearer_token"),
            ("token ghp_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789 rejected", "github_token"),
            ("key=AIzaSyA1234567890abcdefghijklmnopqrstuv used", "google_key"),
            ("AKIAIOSFODNN7EXAMPLE is not authorized", "aws_access_key"),
            ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "aws_secret_key"),
            ("stripe said: sk_live_4eC39HqLyjWDarjtT1zdp7dc is invalid", "stripe_key"),
            ("slack: xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", "slack_token"),
            ("jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U", "jwt"),
            ("DATABASE password=s3cr3tpass host=db", "password"),
            ("-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----", "private_key"),
        ];
        for (text, kind) in cases {
            let out = redact(text);
            assert!(out.contains(&format!("[REDACTED:{kind}]")), "{kind}: {out}");
        }
        assert!(!redact(cases[2].0).contains("hunter2"));
    }

    #[test]
    fn the_prefilter_lets_every_pattern_through() {
        // Each pattern's shortest shapes, in both cases: a needle must be found in all of them.
        for text in [
            "-----BEGIN PRIVATE KEY-----",
            "sk-ant-0123456789",
            "sk_live_0123456789",
            "rk_test_0123456789",
            "sk-0123456789abcdefghij",
            "AIza0123",
            "AKIA0123456789ABCDEF",
            "ASIA",
            "ABIA",
            "ACCA",
            "AIDA",
            "AROA",
            "aws_secret_access_key=x",
            "SecretAccessKey=x",
            "ghp_x",
            "gho_x",
            "ghu_x",
            "ghs_x",
            "ghr_x",
            "github_pat_x",
            "xoxb-1",
            "eyJa.eyJb.c",
            "Bearer x",
            "BASIC x",
            "http://u:p@h",
            "PASSWD=x",
            "pwd=x",
            "API_KEY=x",
            "x-api-key: x",
            "ApiKey=x",
            "access_key=x",
            "Access-Key=x",
            "client_secret=x",
            "private_key=x",
            "PrivateKey=x",
            "id_token=x",
            "Authorization: x",
            "COOKIE: x",
            "?sig=x",
            "&X-Amz-Signature=x",
            "AccountKey=x",
            "account_key=x",
            "Account-Key=x",
            "GPG_PASSPHRASE=x",
            "glpat-x",
            "GLDT-x",
            "npm_x",
            "HF_x",
            "WHSEC_x",
            "SG.x.y",
            "HOOKS.SLACK.COM/services/x",
            "discord.com/API/WEBHOOKS/1/x",
            "'--PWD', 'x'",
            "--Api-Key X",
            "--TOKEN X",
        ] {
            assert_ne!(candidates(text), 0, "{text}");
        }
        assert!(
            NEEDLES.iter().all(|(n, _)| *n == n.to_ascii_lowercase()),
            "the text is lowered, so the needles must be"
        );
        assert!(GATES.iter().all(|bits| *bits != 0));
    }

    #[test]
    fn every_secret_in_the_examples_is_let_through_by_its_needles() {
        let examples = [
            "Incorrect API key provided: sk-proj-abcdefghijklmnopqrstuvwxyz0123456789ABCD.",
            "x-api-key: sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789-_AbCdEfGh",
            "could not connect to postgres://app:hunter2@db.internal:5432/app",
            "headers={'Authorization': 'Bearer abcDEF123456.xyz'}",
            "Authorization: Basic dXNlcjpwYXNzd29yZA==",
            "token ghp_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789 rejected",
            "github_pat_11ABCDEFG0123456789_abcdefghijklmnop",
            "key=AIzaSyA1234567890abcdefghijklmnopqrstuv used",
            "AKIAIOSFODNN7EXAMPLE is not authorized",
            "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "stripe said: sk_live_4eC39HqLyjWDarjtT1zdp7dc is invalid",
            "slack: xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
            "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
            "DATABASE password=s3cr3tpass host=db",
            "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----",
            "client_secret: 'abcdef123456'",
            "PRIVATE_KEY=abcdef123456",
            "refresh_token=abcdefgh12345678",
            "ApiKey: abcdef123456",
            "{'Authorization': 'Token 9944b09199c62bcf9418ad846dd0e4bbdfc6ee4b'}",
            "> Cookie: sessionid=abc123def456; csrftoken=abcdef",
            "https://a.blob.core.windows.net/c/f?sv=2022-11-02&sig=AbC%2Bdef0123%3D",
            "AccountKey=abcdef0123456789==;EndpointSuffix=core.windows.net",
            "> Cookie: sessionid=\"abc123def456\"",
            "mysql://app:Tq4#bW9?kLz2@db:3306/app",
        ];
        for text in examples {
            let let_through = candidates(text);
            for (i, pattern) in PATTERNS.iter().enumerate() {
                if pattern.regex.is_match(text) {
                    assert_ne!(let_through & 1 << i, 0, "{}: {text}", pattern.kind);
                }
            }
        }
    }

    #[test]
    fn both_prefilters_find_every_needle_even_inside_another() {
        let packed = Prefilter::new(true);
        // Where the CPU has the vector searcher, both groups of needles build one.
        #[cfg(target_arch = "x86_64")]
        assert!(packed.is_some() || !std::arch::is_x86_feature_detected!("ssse3"), "no packed searcher");
        let automaton = Prefilter::new(false).expect("always builds");
        let texts = NEEDLES.iter().flat_map(|(needle, _)| {
            [
                needle.to_string(),
                format!("a long line of error text then {needle}"),
                needle[1..].to_string(),
                // Overlapping needles: "passwd" holds "pass"; "access_token" "token"; "aws_secret_access_key" three.
                format!("{needle}{needle}"),
            ]
        });
        for text in texts.chain(["aws_secret_access_key".into(), "access_token".into(), "sk-ant-sk_".into()]) {
            let expected = NEEDLES
                .iter()
                .zip(GATES.iter())
                .filter(|((n, _), _)| text.contains(n))
                .fold(0, |bits, (_, gate)| bits | gate);
            assert_eq!(automaton.gates(text.as_bytes()), expected, "{text}");
            if let Some(packed) = &packed {
                assert_eq!(packed.gates(text.as_bytes()), expected, "{text}");
            }
        }
    }

    #[test]
    fn a_name_spelt_with_a_letter_that_folds_to_ascii_is_redacted_all_the_same() {
        // The patterns' (?i) takes the Kelvin sign for k and the long s for s; the needles must too.
        for (text, secret, kind) in [
            ("login failed: pa\u{17F}sword=hunter22 rejected", "hunter22", "password"),
            ("api_\u{212A}ey=abcdef123456 was revoked", "abcdef123456", "api_key"),
            ("client_\u{17F}ecret: s3cr3t-value-1", "s3cr3t-value-1", "secret"),
        ] {
            let out = redact(text);
            assert!(!out.contains(secret) && out.contains(&format!("[REDACTED:{kind}]")), "{text:?} -> {out:?}");
        }
        assert_eq!(redact("the \u{212A}elvin sign, alone"), "the \u{212A}elvin sign, alone");
    }

    #[test]
    fn a_url_without_an_at_sign_is_not_searched_for_a_password() {
        let url_password = 1 << PATTERNS.iter().position(|p| p.kind == "url_password").expect("a pattern");
        assert_eq!(candidates("timed out waiting for https://api.example.com/v1/items?id=4") & url_password, 0);
        assert_ne!(candidates("could not connect to postgres://app:hunter2@db:5432/app") & url_password, 0);
        assert_ne!(candidates("pa\u{17F}sword=x at https://u:p@h") & url_password, 0);
        assert_eq!(candidates("pa\u{17F}sword=x at https://h/") & url_password, 0);
    }

    #[test]
    fn ordinary_ids_stay() {
        for text in [
            "request id 3f2b9c1e-8d4a-4c3b-9e2f-1a2b3c4d5e6f failed",
            "commit 9fceb02d0ae598e95dc970b74767f19372d61af8 not found",
            "token_count=1234 exceeds limit",
            "invalid token",
            "password is incorrect",
            "Authorization header missing",
            "see https://api.example.com/v1/items?id=42",
            "image sha256:4e07408562bedb8b60ce05c1decfe3ad16b72230967de01f640b7e4729b49fce",
        ] {
            assert_eq!(redact(text), text);
        }
    }

    #[test]
    fn names_joined_to_a_prefix_and_other_headers_are_redacted() {
        for (text, redacted) in [
            ("env DB_PASSWORD=Tr0ub4dor3xyz psql -h db", "env DB_PASSWORD=[REDACTED:password] psql -h db"),
            ("PGPASSWORD=Tr0ub4dor3xyz pg_dump mydb", "PGPASSWORD=[REDACTED:password] pg_dump mydb"),
            (r#"{"POSTGRES_PASSWORD": "Tr0ub4dor3xyz"}"#, r#"{"POSTGRES_PASSWORD": "[REDACTED:password]"}"#),
            ("MYSQL_PWD=Tr0ub4dor3xyz mysql", "MYSQL_PWD=[REDACTED:password] mysql"),
            ("SMTP_PASS: Tr0ub4dor3xyz", "SMTP_PASS: [REDACTED:password]"),
            ("OPENAI_API_KEY=0123456789abcdef0123", "OPENAI_API_KEY=[REDACTED:api_key]"),
            ("HF_TOKEN=hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567", "HF_TOKEN=[REDACTED:huggingface_token]"),
            (r#"{"clientSecret": "s3cr3t-value-1"}"#, r#"{"clientSecret": "[REDACTED:secret]"}"#),
            ("'Authorization': 'Token 9944b09199c62bcf'", "'Authorization': 'Token [REDACTED:authorization]'"),
            ("Authorization: ApiKey dGhlLWlkOnRoZS1rZXk=", "Authorization: ApiKey [REDACTED:authorization]"),
            ("map[Authorization:[SSWS 00abcdef0123]]", "map[Authorization:[SSWS [REDACTED:authorization]]]"),
            ("'HTTP_AUTHORIZATION': 'abcdef012345'", "'HTTP_AUTHORIZATION': '[REDACTED:authorization]'"),
            (
                "> Cookie: sessionid=abc123; csrftoken=def456\n< HTTP/1.1 403",
                "> Cookie: [REDACTED:cookie]\n< HTTP/1.1 403",
            ),
            ("'Set-Cookie': 'sid=abc123; Path=/'", "'Set-Cookie': '[REDACTED:cookie]'"),
            (
                "GET /c/f?sv=2022-11-02&sig=AbC%2Bdef0123%3D&sp=r",
                "GET /c/f?sv=2022-11-02&sig=[REDACTED:url_signature]&sp=r",
            ),
            (
                "/o?X-Amz-SignedHeaders=host&X-Amz-Signature=fe5f80f77d5fa3beca038a248ff027d0",
                "/o?X-Amz-SignedHeaders=host&X-Amz-Signature=[REDACTED:url_signature]",
            ),
            (
                "postgresql://app:p@ssw0rd!@db.internal:5432/app",
                "postgresql://app:[REDACTED:url_password]@db.internal:5432/app",
            ),
        ] {
            assert_eq!(redact(text), redacted, "{text}");
        }
        // Already covered before the names could be joined: a Bearer token keeps its own kind.
        assert_eq!(redact("Authorization: Bearer abcDEF123456.xyz"), "Authorization: Bearer [REDACTED:bearer_token]");
    }

    #[test]
    fn secret_flags_in_a_commands_arguments_are_redacted() {
        for (text, redacted) in [
            // Python's CalledProcessError and Node's spawnargs: a list of quoted items.
            (
                "Command '['mysql', '--password', 'Hq7!x P2', '-e', 'SELECT 1']' returned",
                "Command '['mysql', '--password', '[REDACTED:secret_argument]', '-e', 'SELECT 1']' returned",
            ),
            (
                "[ 'deploy', '--api-key', 'dk8f2a', '--region', 'eu' ]",
                "[ 'deploy', '--api-key', '[REDACTED:secret_argument]', '--region', 'eu' ]",
            ),
            // Go's %q of a []string: no commas.
            (r#"["vault" "-token" "hvs.CAES"]"#, r#"["vault" "-token" "[REDACTED:secret_argument]"]"#),
            // A command line: a value with anything besides lower-case letters.
            (
                "Command failed: mysql --password Hq7xkP2 -e",
                "Command failed: mysql --password [REDACTED:secret_argument] -e",
            ),
            ("+ vault login -token hvs.CAESIJ8", "+ vault login -token [REDACTED:secret_argument]"),
            ("--db-pass s3cret", "--db-pass [REDACTED:secret_argument]"),
        ] {
            assert_eq!(redact(text), redacted, "{text}");
        }
        for text in [
            // The next item is a flag: this one takes no value.
            "['psql', '--no-password', '-h', 'db']",
            "['docker', 'login', '--password-stdin', 'registry.example.com']",
            // Prose about a flag.
            "option --password requires an argument",
            "psql: option '--password' doesn't allow an argument",
            "      --token string   API token",
            "foo--password Hq7xkP2",
        ] {
            assert_eq!(redact(text), text);
        }
    }

    #[test]
    fn webhook_urls_and_more_provider_keys_are_redacted() {
        for (text, redacted) in [
            (
                "for url: https://hooks.slack.com/services/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",
                "for url: https://hooks.slack.com/services/[REDACTED:slack_webhook]",
            ),
            (
                "https://discordapp.com/api/webhooks/1182736450912837465/Kp3Xz8Qw1Lm6Nb4Vc9Rt2Yh7-_x",
                "https://discordapp.com/api/webhooks/1182736450912837465/[REDACTED:discord_webhook]",
            ),
            ("key SG.ngeVfQFYQlKU0ufo8x5d1A.TwL2iGABf9DHoTf-09kqe rejected", "key [REDACTED:sendgrid_key] rejected"),
            ("secret is whsec_4f9b2c7e1a8d3f6b0c5e9a2d (^C", "secret is [REDACTED:stripe_key] (^C"),
        ] {
            assert_eq!(redact(text), redacted, "{text}");
        }
        for text in ["https://slack.com/api/chat.postMessage", "msg.SGx.bla", "https://hooks.slack.com/services/"] {
            assert_eq!(redact(text), text);
        }
    }

    #[test]
    fn names_inside_ordinary_words_and_counts_stay() {
        for text in [
            r#"FATAL:  password authentication failed for user "app""#,
            "KeyError: 'api_key'",
            "KeyError: 'DB_PASSWORD'",
            "missing required field api_key",
            "max_tokens=4096 exceeds the limit",
            "tokens_used=123456789 token_count=1234",
            "bypass: enabled, compass=north",
            "OLDPWD=/home/app/src",
            "Access-Control-Allow-Headers: Authorization, Cookie",
            "see https://example.com/search?q=sig&signal=9",
        ] {
            assert_eq!(redact(text), text);
        }
    }

    #[test]
    fn quoted_cookie_values_and_passwords_beside_the_mysql_phrase_are_redacted() {
        for (text, redacted) in [
            // RFC 6265 lets a cookie value sit in double quotes; JSON escapes them.
            (r#"> Cookie: sessionid="abc123def456""#, "> Cookie: [REDACTED:cookie]"),
            (r#"Set-Cookie: token="YWJjZGVmMTIz=="; Path=/; HttpOnly"#, "Set-Cookie: [REDACTED:cookie]"),
            (r#"'Cookie': 'csrftoken=abcdef; sessionid="abc123def456"'}"#, "'Cookie': '[REDACTED:cookie]'}"),
            (r#"{"cookie":"sid=\"abc123def456\"","host":"h"}"#, r#"{"cookie":"[REDACTED:cookie]","host":"h"}"#),
            // A base64 value's = before a JSON string's closing quote opens no quoted value.
            (r#"{"Cookie": "s=YWJjZA=", "Host": "h"}"#, r#"{"Cookie": "[REDACTED:cookie]", "Host": "h"}"#),
            // A value cut before its closing quote runs to the line's end.
            ("> Cookie: sid=\"abc123def456\n< HTTP/1.1 403", "> Cookie: [REDACTED:cookie]\n< HTTP/1.1 403"),
            (r#"{"cookie":"sid=\"abc123def"#, r#"{"cookie":"[REDACTED:cookie]"#),
            ("> Cookie: sid=\"abc123def456\r\n", "> Cookie: [REDACTED:cookie]\r\n"),
            (r#"{"Cookie": "s=YWJjZA="}"#, r#"{"Cookie": "[REDACTED:cookie]"}"#),
            // Only MySQL's own phrase keeps its YES.
            (
                "+ MYSQL_PWD=Tr0ub4dor3xyz mysql\nERROR 1045 (28000): Access denied for user 'app'@'h' (using password: YES)",
                "+ MYSQL_PWD=[REDACTED:password] mysql\nERROR 1045 (28000): Access denied for user 'app'@'h' (using password: YES)",
            ),
            ("login with password: YES rejected", "login with password: [REDACTED:password] rejected"),
            ("(using password: hunter2)", "(using password: [REDACTED:password])"),
            // Userinfo ends at the first /, ? or #: a password's @ is before it, a query's after.
            (
                "https://app:hunter2@h:8080?email=a@b.com",
                "https://app:[REDACTED:url_password]@h:8080?email=a@b.com",
            ),
            ("postgres://user:p@ss@host/db?x=a@b", "postgres://user:[REDACTED:url_password]@host/db?x=a@b"),
            // A password holding an unencoded # or ? (SQLAlchemy takes it) has no @ before them.
            (
                "mysql://app:Tq4#bW9?kLz2@db:3306/app",
                "mysql://app:[REDACTED:url_password]@db:3306/app",
            ),
            // One holding an unencoded / (base64 makes them), when what comes before it is no port.
            (
                "postgres://app:Xy7/aB+q=@db:5432/app?x=a@b",
                "postgres://app:[REDACTED:url_password]@db:5432/app?x=a@b",
            ),
            ("amqp://guest:a/b/c@rabbit:5672/%2f", "amqp://guest:[REDACTED:url_password]@rabbit:5672/%2f"),
            // One whose digits before a # looked like a port (the URL then had no password).
            ("redis://root:12#ab@cache:6379/0", "redis://root:[REDACTED:url_password]@cache:6379/0"),
            ("redis://:8675309#@redis:6379", "redis://:[REDACTED:url_password]@redis:6379"),
            // So a fragment holding an @ after a port is masked too: the safer way to be wrong.
            ("https://h:8443#contact=ops@example.com", "https://h:[REDACTED:url_password]@example.com"),
            // A user name holding an @ (an e-mail address, as SMTP logins are).
            ("smtps://me@x.com:pa/ss@smtp:465", "smtps://me@x.com:[REDACTED:url_password]@smtp:465"),
        ] {
            assert_eq!(redact(text), redacted, "{text}");
        }
    }

    #[test]
    fn the_mysql_phrase_and_an_at_sign_after_the_host_stay() {
        for text in [
            "ERROR 1045 (28000): Access denied for user 'app'@'10.0.0.5' (using password: YES)",
            "Access denied for user 'root'@'localhost' (using password: NO)",
            r#"Get "http://localhost:8080?email=jane.doe@example.com": connection refused"#,
            r#"Get "https://api.example.com?since=12:30&notify=ops@example.com": timeout"#,
            "https://h:8080/users/jane.doe@example.com",
            "http://[::1]:8080/users/jane.doe@example.com",
            "https://[2001:db8::1]/a@b",
        ] {
            assert_eq!(redact(text), text);
        }
    }

    #[test]
    fn the_shared_corpora_are_redacted_and_left_alone() {
        // tests/data/secrets: the corpora every client's fallback is held to as well.
        let secrets = include_str!("../tests/data/secrets/secrets.jsonl");
        for line in secrets.lines() {
            let case: serde_json::Value = serde_json::from_str(line).expect("one JSON object a line");
            let out = redact(case["message"].as_str().expect("a message"));
            let kind = case["type"].as_str().expect("a type");
            assert!(out.contains(&format!("[REDACTED:{kind}]")), "{}: {out}", case["id"]);
            for secret in case["secrets"].as_array().expect("secrets") {
                assert!(!out.contains(secret.as_str().expect("a string")), "{}: {out}", case["id"]);
            }
        }
        for line in include_str!("../tests/data/secrets/ordinary.jsonl").lines() {
            let case: serde_json::Value = serde_json::from_str(line).expect("one JSON object a line");
            let message = case["message"].as_str().expect("a message");
            assert_eq!(redact(message), message, "{}", case["id"]);
        }
    }

    #[test]
    fn a_secret_uncovered_by_another_redaction_is_redacted_too() {
        // The `/` in `w/cd://` keeps the first URL from matching (after the `]`) until `pass:`'s value,
        // which holds it, is replaced.
        let text = "ab://u:]pass:w/cd://e:f@h";
        assert_eq!(redact(text), "ab://u:[REDACTED:url_password]@h");
        // The input cargo-fuzz found (redact_compact, in CI): one pass was not enough.
        let found = String::from_utf8_lossy(include_bytes!("../tests/data/fuzz/redact_compact-two-passes"));
        let once = redact(&found).into_owned();
        assert_eq!(redact(&once), once);
        assert!(once.contains("[REDACTED:url_password]@d_por0"), "{once}");
    }

    #[test]
    fn text_that_does_not_settle_is_given_up_whole() {
        // Two passes replace something here, and the third finds nothing more.
        assert_eq!(redact_within("ab://u:]pass:w/cd://e:f@h", 2), UNSETTLED);
        assert_eq!(redact_within("ab://u:]pass:w/cd://e:f@h", 3), "ab://u:[REDACTED:url_password]@h");
        assert!(matches!(redact(UNSETTLED), Cow::Borrowed(UNSETTLED)));
        assert!(matches!(redact("no secret here"), Cow::Borrowed(_)));
    }

    proptest! {
        #[test]
        fn a_redacted_secret_never_appears(secret in "[A-Za-z0-9]{40}", before in "[a-z ]{0,20}", after in "[a-z ]{0,20}") {
            for text in [
                format!("{before} sk-proj-{secret} {after}"),
                format!("{before} https://user:{secret}@example.com {after}"),
                format!("{before} Authorization: Bearer {secret} {after}"),
                format!("{before} api_key={secret}&q=1 {after}"),
            ] {
                let out = redact(&text);
                prop_assert!(!out.contains(&secret), "{}", out);
            }
        }

        #[test]
        fn needles_are_found_anywhere_in_any_case(
            before in 0usize..3000,
            needle in proptest::sample::select(NEEDLES.iter().map(|(n, _)| *n).collect::<Vec<_>>()),
            upper in proptest::collection::vec(any::<bool>(), 11),
        ) {
            // Around the pieces' edges too: every offset up to three pieces in.
            let cased: String = needle
                .chars()
                .zip(upper.iter().cycle())
                .map(|(c, &up)| if up { c.to_ascii_uppercase() } else { c })
                .collect();
            let text = format!("{}{cased}{}", "x".repeat(before), "y".repeat(before % 7));
            let gate = GATES[NEEDLES.iter().position(|(n, _)| *n == needle).expect("drawn from NEEDLES")];
            prop_assert_eq!(needle_gates(&text) & gate, gate, "{} at {}", cased, before);
            prop_assert_eq!(candidates(&"x".repeat(before)), 0);
        }

        #[test]
        fn only_the_patterns_let_through_ever_match(
            pieces in proptest::collection::vec(proptest::sample::select(&[
                "sk-proj-", "sk-ant-", "sk_live_", "AIza", "AKIA", "aws_secret_access_key=", "ghp_", "github_pat_",
                "xoxb-", "eyJ", ".eyJ", "Bearer ", "basic ", "https://u:", "@h", "password=", "pwd: ", "api_key=",
                "X-Api-Key: ", "client_secret=", "private_key=", "token=", "-----BEGIN PRIVATE KEY-----",
                "DB_", "PG", "Authorization: ", "Token ", "Cookie: ", "Set-Cookie: ", "?sig=", "&X-Amz-Signature=",
                "AccountKey=", "a@b", "?", "#", "=\"", "(using password: YES)",
                "0123456789abcdefABCDEF0123456789", "ABCDEFGHIJKLMNOP", " ", "'", "\"", "=", ":", "/", "x",
                "pa\u{17F}sword=", "api_\u{212A}ey=", "\u{2026}",
            ][..]), 0..12),
        ) {
            // Every pattern that matches the text must be among those its needles let through.
            let text = pieces.concat();
            let let_through = candidates(&text);
            for (i, pattern) in PATTERNS.iter().enumerate() {
                prop_assert!(!pattern.regex.is_match(&text) || let_through & 1 << i != 0, "{}: {}", pattern.kind, text);
            }
        }

        #[test]
        fn redaction_is_idempotent(text in "\\PC{0,200}") {
            let once = redact(&text).into_owned();
            prop_assert_eq!(redact(&once).into_owned(), once.clone());
        }
    }
}
