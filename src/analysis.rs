//! A failure's analysis: what its own fields give, whatever its session (the
//! classification, the fingerprint, the message and location to show), and
//! the recent analyses, so that a failure seen again is not analysed again.
//!
//! Agents meet the same failure over and over: a run loops on one failing
//! tool, and an outage gives every run in the pod the same message. Analysing
//! a failure is most of what a verdict costs (about 7,900 of 13,200
//! instructions per outcome when every 200-byte failure is new: the engine
//! bench's `200B-new`), and it depends only on the failure's
//! own fields and the policy. So the engine keeps the recent analyses in a
//! small table, looked up by those fields and the policy, all compared, not
//! only their hash: a failure that differs in any of them is analysed afresh.
//!
//! The table keeps the raw texts it compares, as the request buffers they came
//! from held them; they are never shown or logged (what is shown is the
//! analysis, redacted). It is bounded, whatever the policies and profiles:
//! [`SLOTS`] entries of at most [`MAX_TEXT_BYTES`] of text each and an analysis
//! (the headline under a token budget, as long as the texts at most, and the message and location
//! shown, cut), under 5 MiB at the very most.

use crate::backoff;
use crate::compact::{self, Digest};
use crate::fingerprint;
use crate::model::{Category, Classification, Outcome, OutcomeKind};
use crate::policy::Policy;
use crate::shapes::{KeptMessage, Shapes};
use std::borrow::Cow;
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex, PoisonError};

/// The entries a table holds. A failure goes to the slot its hash picks,
/// replacing what was there.
pub const SLOTS: usize = 256;

/// The most text (message, detail, exception type, code and tool together) a
/// failure may have to be kept; a longer one is analysed every time.
pub const MAX_TEXT_BYTES: usize = 8 * 1024;

/// What a failure's own fields give.
#[derive(Clone, Debug, PartialEq)]
pub struct Analysis {
    /// Its classification.
    pub classification: Classification,
    /// The fingerprint of the message and location shown (see [`fingerprint::of_shown`]).
    pub fingerprint: u64,
    /// The message, its headline (under a token budget only) and location, ready to show.
    pub digest: Digest<'static>,
    /// The message shown, as the sessions keep it (see [`crate::shapes`]).
    pub kept: KeptMessage,
    /// For a failure retried after a wait (rate limited, unavailable), the wait its message asks for
    /// ([`backoff::delay_in_text`]), which a provider's headers outrank.
    pub delay_in_text_ms: Option<u64>,
}

impl Analysis {
    /// Analyses a failure under a policy's rules and snippet limits, its message shaped in `shapes`.
    pub fn of(outcome: &Outcome, policy: &Policy, shapes: &Shapes) -> Analysis {
        let o = outcome;
        let mut digest = compact::digest(&o.message, &o.exception_type, &o.detail, &policy.snippet);
        if policy.snippet.max_tokens.is_none() {
            // Only a token budget shortens the message again from its headline: not kept (a copy of
            // the message, most often) where none is set.
            digest.headline = Cow::Borrowed("");
        }
        let digest = digest.into_owned();
        let kept = shapes.keep(&digest.message);
        let classification = policy.classifier.classify(o);
        let waits = matches!(classification.category, Category::RateLimited | Category::Unavailable);
        Analysis {
            delay_in_text_ms: if waits { backoff::delay_in_text(&o.message) } else { None },
            classification,
            fingerprint: fingerprint::of_shown(kept.fingerprint(), &digest.location),
            kept,
            digest,
        }
    }
}

/// What a failure's analysis depends on: the policy and the outcome's fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Key<'a> {
    policy: u64,
    tool: &'a str,
    kind: Option<OutcomeKind>,
    message: &'a str,
    exception_type: &'a str,
    http_status: Option<u16>,
    grpc_code: Option<i32>,
    exit_code: Option<i32>,
    code: &'a str,
    detail: &'a str,
}

impl<'a> Key<'a> {
    fn of(o: &'a Outcome, policy: &Policy) -> Self {
        Key {
            policy: policy.id,
            tool: &o.tool,
            kind: o.kind,
            message: &o.message,
            exception_type: &o.exception_type,
            http_status: o.http_status,
            grpc_code: o.grpc_code,
            exit_code: o.exit_code,
            code: &o.code,
            detail: &o.detail,
        }
    }

    fn texts(&self) -> [&'a str; 5] {
        [self.tool, self.message, self.exception_type, self.code, self.detail]
    }

    /// A hash of the key that reads at most the first and last [`HASHED_BYTES`] of each
    /// text (and its length): the key is compared whole, so a hash shared by two keys
    /// costs only a miss, while hashing a 4 KB trace whole cost 3,000 instructions.
    fn hash(&self, hasher: &impl BuildHasher) -> u64 {
        let mut h = hasher.build_hasher();
        (self.policy, self.kind, self.http_status, self.grpc_code, self.exit_code).hash(&mut h);
        for text in self.texts().map(str::as_bytes) {
            h.write_usize(text.len());
            if text.len() <= 2 * HASHED_BYTES {
                h.write(text);
            } else {
                h.write(&text[..HASHED_BYTES]);
                h.write(&text[text.len() - HASHED_BYTES..]);
            }
        }
        h.finish()
    }
}

/// How much of each end of a text the hash reads.
const HASHED_BYTES: usize = 128;

/// A kept analysis with the key it was made for: the key's hash, and its texts in one string.
#[derive(Debug)]
struct Entry {
    hash: u64,
    policy: u64,
    texts: Box<str>,
    /// Where each of the key's texts ends in `texts`.
    ends: [usize; 5],
    kind: Option<OutcomeKind>,
    http_status: Option<u16>,
    grpc_code: Option<i32>,
    exit_code: Option<i32>,
    analysis: Arc<Analysis>,
}

impl Entry {
    fn new(hash: u64, key: &Key<'_>, analysis: Arc<Analysis>) -> Entry {
        let texts = key.texts();
        let mut joined = String::with_capacity(texts.iter().map(|t| t.len()).sum());
        let mut ends = [0; 5];
        for (end, text) in ends.iter_mut().zip(texts) {
            joined.push_str(text);
            *end = joined.len();
        }
        let Key { policy, kind, http_status, grpc_code, exit_code, .. } = *key;
        Entry { hash, policy, texts: joined.into(), ends, kind, http_status, grpc_code, exit_code, analysis }
    }

    fn is_for(&self, hash: u64, key: &Key<'_>) -> bool {
        if self.hash != hash {
            return false;
        }
        let text = |i: usize| &self.texts[if i == 0 { 0 } else { self.ends[i - 1] }..self.ends[i]];
        let kept = Key {
            policy: self.policy,
            tool: text(0),
            kind: self.kind,
            message: text(1),
            exception_type: text(2),
            http_status: self.http_status,
            grpc_code: self.grpc_code,
            exit_code: self.exit_code,
            code: text(3),
            detail: text(4),
        };
        kept == *key
    }
}

/// One place in the table: the failure last seen there, by its hash, and the analysis kept there.
#[derive(Debug, Default)]
struct Slot {
    seen: u64,
    kept: Option<Entry>,
}

/// The recent failures' analyses: a table of [`SLOTS`] places, each behind its own
/// lock (held to compare one key), so threads judging different failures never wait.
///
/// A failure's analysis is kept the second time in a row its place sees it: most
/// failures that come once never come again (an id or a time in the message), and
/// keeping theirs would cost a copy of their texts each and push out the ones that
/// do come again.
#[derive(Debug)]
pub struct Analyses {
    slots: Box<[Mutex<Slot>]>,
    hasher: foldhash::fast::RandomState,
    /// The shapes of the messages analysed, for the sessions that keep them.
    shapes: Shapes,
}

impl Analyses {
    /// A table of [`SLOTS`] places, whose messages' shapes count their bytes into `meter`
    /// (the session store's: the sessions keep the messages).
    pub fn new(meter: Arc<AtomicUsize>) -> Self {
        Analyses::with_slots(SLOTS, meter)
    }

    /// A table of `slots` places (at least one).
    fn with_slots(slots: usize, meter: Arc<AtomicUsize>) -> Self {
        Analyses {
            slots: (0..slots.max(1)).map(|_| Mutex::default()).collect(),
            hasher: Default::default(),
            shapes: Shapes::new(meter),
        }
    }

    /// The analysis of a failure: the one kept for the same fields, or a new one (then
    /// kept if its place saw the same failure last); and true when it was the kept one.
    pub fn get(&self, outcome: &Outcome, policy: &Policy) -> (Arc<Analysis>, bool) {
        let key = Key::of(outcome, policy);
        if outcome.text_bytes() > MAX_TEXT_BYTES {
            return (Arc::new(Analysis::of(outcome, policy, &self.shapes)), false);
        }
        let hash = key.hash(&self.hasher);
        let slot = &self.slots[hash as usize % self.slots.len()];
        let seen_before = {
            let mut slot = slot.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(entry) = slot.kept.as_ref().filter(|e| e.is_for(hash, &key)) {
                return (entry.analysis.clone(), true);
            }
            std::mem::replace(&mut slot.seen, hash) == hash
        };
        // Analysed without the lock: another thread may want the place meanwhile.
        let analysis = Arc::new(Analysis::of(outcome, policy, &self.shapes));
        if seen_before {
            let entry = Entry::new(hash, &key, analysis.clone());
            // The entry it replaces is dropped after the lock is let go.
            let _replaced = slot.lock().unwrap_or_else(PoisonError::into_inner).kept.replace(entry);
        }
        (analysis, false)
    }

    /// How many analyses are kept (for tests).
    pub fn len(&self) -> usize {
        self.slots.iter().filter(|s| s.lock().unwrap_or_else(PoisonError::into_inner).kept.is_some()).count()
    }

    /// True when none is.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::policy::Policy;
    use proptest::prelude::*;

    /// The built-in rules and one that reads the tool, so that the tool matters too.
    fn policy() -> Policy {
        let toml =
            "[[rules]]\nid = \"searc.auth\"\ntool = [\"searc\"]\nmessage = [\"request failed\"]\ncategory = \"auth\"\n";
        Policy::from_config(&Config::parse(toml, "test").expect("valid")).expect("valid")
    }

    /// A failure that no built-in rule knows, so that every signal added to it changes its analysis.
    fn failure() -> Outcome {
        Outcome {
            session_id: "s".into(),
            tool: "search".into(),
            message: "request failed".into(),
            ..Outcome::default()
        }
    }

    /// Each field the analysis reads, changed, with what it is changed to.
    fn variants() -> Vec<(&'static str, Outcome)> {
        let base = failure();
        let with = |f: fn(&mut Outcome)| {
            let mut o = base.clone();
            f(&mut o);
            o
        };
        vec![
            ("tool", with(|o| o.tool = "searc".into())),
            ("kind", with(|o| o.kind = Some(OutcomeKind::Timeout))),
            ("message", with(|o| o.message = "Error code: 401 - invalid api key".into())),
            ("exception_type", with(|o| o.exception_type = "openai.AuthenticationError".into())),
            ("http_status", with(|o| o.http_status = Some(429))),
            ("grpc_code", with(|o| o.grpc_code = Some(16))),
            ("exit_code", with(|o| o.exit_code = Some(137))),
            ("code", with(|o| o.code = "rate_limit_exceeded".into())),
            ("detail", with(|o| o.detail = "Traceback (most recent call last):\nValueError: x\n".into())),
            // Texts that meet at another place: the same bytes in all, split otherwise.
            (
                "tool and message split",
                with(|o| {
                    o.tool = "searchreq".into();
                    o.message = "uest failed".into();
                }),
            ),
        ]
    }

    /// Analyses `o` three times: the second keeps its analysis, the third finds it.
    fn kept(analyses: &Analyses, o: &Outcome, policy: &Policy) -> Arc<Analysis> {
        analyses.get(o, policy);
        analyses.get(o, policy);
        analyses.get(o, policy).0
    }

    #[test]
    fn a_failure_seen_twice_in_a_row_is_kept_and_found_after() {
        let policy = policy();
        let analyses = Analyses::new(Default::default());
        let (first, reused) = analyses.get(&failure(), &policy);
        assert!(analyses.is_empty() && !reused, "kept at first sight");
        let (second, reused) = analyses.get(&failure(), &policy);
        assert!(!Arc::ptr_eq(&first, &second) && !reused);
        assert_eq!(analyses.len(), 1);
        let (third, reused) = analyses.get(&failure(), &policy);
        assert!(Arc::ptr_eq(&second, &third) && reused, "analysed again");
        assert_eq!(*third, Analysis::of(&failure(), &policy, &analyses.shapes));
    }

    #[test]
    fn a_failure_differing_in_any_field_it_is_analysed_by_is_analysed_afresh() {
        let policy = policy();
        let analyses = Analyses::new(Default::default());
        kept(&analyses, &failure(), &policy);
        for (field, o) in variants() {
            // Once, when the first failure's analysis is the one kept, and again once its own is.
            for _ in 0..3 {
                let got = analyses.get(&o, &policy).0;
                assert_eq!(*got, Analysis::of(&o, &policy, &analyses.shapes), "{field}");
            }
            // And the first failure's analysis is still its own, wherever the variant went.
            let first = kept(&analyses, &failure(), &policy);
            assert_eq!(*first, Analysis::of(&failure(), &policy, &analyses.shapes), "after {field}");
        }
    }

    #[test]
    fn the_same_failure_under_another_policy_is_analysed_afresh() {
        let (reads_tool, built_in) = (policy(), Policy::default());
        let analyses = Analyses::new(Default::default());
        let mut o = failure();
        o.tool = "searc".into();
        let first = kept(&analyses, &o, &reads_tool);
        let other = kept(&analyses, &o, &built_in);
        assert_eq!(*other, Analysis::of(&o, &built_in, &analyses.shapes));
        assert_ne!(first.classification.rule, other.classification.rule);
    }

    #[test]
    fn a_failure_seen_once_does_not_push_out_a_kept_one() {
        let policy = policy();
        let analyses = Analyses::new(Default::default());
        let kept_first = kept(&analyses, &failure(), &policy);
        for i in 0..SLOTS * 4 {
            let mut o = failure();
            o.message = format!("request {i} failed");
            analyses.get(&o, &policy);
        }
        let again = analyses.get(&failure(), &policy).0;
        assert!(Arc::ptr_eq(&kept_first, &again), "pushed out");
        assert_eq!(analyses.len(), 1);
    }

    #[test]
    fn the_variants_are_analysed_differently_so_a_shared_entry_would_show() {
        // Guards the test above: a variant whose analysis equals the first failure's
        // would pass it even if that field were left out of the key.
        let policy = policy();
        let analyses = Analyses::new(Default::default());
        let first = Analysis::of(&failure(), &policy, &analyses.shapes);
        for (field, o) in variants() {
            let other = Analysis::of(&o, &policy, &analyses.shapes);
            assert_ne!(other, first, "{field}: change it to one analysed otherwise");
        }
    }

    #[test]
    fn failures_differing_only_where_the_hash_does_not_read_are_told_apart() {
        let policy = policy();
        let analyses = Analyses::new(Default::default());
        let with_middle = |word: &str| Outcome {
            message: String::new(),
            detail: format!("{}\nfatal: {word} refused\n{}", "a ".repeat(200), "b ".repeat(300)),
            ..failure()
        };
        let (one, other) = (with_middle("alpha"), with_middle("omega"));
        let (a, b) = (Key::of(&one, &policy), Key::of(&other, &policy));
        assert_eq!(a.hash(&analyses.hasher), b.hash(&analyses.hasher), "the texts must differ only in the middle");
        kept(&analyses, &one, &policy);
        let got = analyses.get(&other, &policy).0;
        assert_eq!(*got, Analysis::of(&other, &policy, &analyses.shapes));
        assert_ne!(*got, Analysis::of(&one, &policy, &analyses.shapes));
    }

    /// A failure built from a few values per field, each value one that changes the
    /// analysis, so that runs of them repeat and meet in the table's places; the tool and
    /// the message can hold the same bytes split at another place (`searc` + `hrequest failed`).
    fn small_failure() -> impl Strategy<Value = Outcome> {
        // The first value, which changes nothing, comes up as often as the others together:
        // a field's change shows in the analysis only where the others leave it the winner.
        let pick = |values: &[&'static str]| {
            let (first, others) = (values[0], values.len() as u32 - 1);
            prop_oneof![others => Just(first), others => prop::sample::select(values[1..].to_vec())]
        };
        let number = |values: &[i32]| prop::option::weighted(0.5, prop::sample::select(values.to_vec()));
        (
            pick(&["search", "searc"]),
            prop::option::weighted(0.5, prop::sample::select(vec![OutcomeKind::Timeout, OutcomeKind::UnknownTool])),
            pick(&["request failed", "hrequest failed", "", "Error code: 401 - invalid api key"]),
            pick(&["", "openai.RateLimitError", "requests.exceptions.ReadTimeout"]),
            pick(&["", "rate_limit_exceeded", "context_length_exceeded"]),
            pick(&["", "Traceback (most recent call last):\nValueError: x\n", "fatal: refused"]),
            (number(&[401, 429, 500]), number(&[14, 16]), number(&[1, 137])),
        )
            .prop_map(|(tool, kind, message, exception_type, code, detail, (http, grpc, exit))| Outcome {
                tool: tool.into(),
                kind,
                message: message.into(),
                exception_type: exception_type.into(),
                code: code.into(),
                detail: detail.into(),
                http_status: http.map(|s| s as u16),
                grpc_code: grpc,
                exit_code: exit,
                ..failure()
            })
    }

    /// `base` with one field (by number) taken from `other`.
    fn with_field(base: &Outcome, field: usize, other: &Outcome) -> Outcome {
        let mut o = base.clone();
        match field {
            0 => o.tool = other.tool.clone(),
            1 => o.kind = other.kind,
            2 => o.message = other.message.clone(),
            3 => o.exception_type = other.exception_type.clone(),
            4 => o.code = other.code.clone(),
            5 => o.detail = other.detail.clone(),
            6 => o.http_status = other.http_status,
            7 => o.grpc_code = other.grpc_code,
            _ => o.exit_code = other.exit_code,
        }
        o
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1024))]
        #[test]
        fn every_failure_gets_its_own_analysis(
            base in small_failure(),
            changes in prop::collection::vec((0..9usize, small_failure()), 1..4),
            order in prop::collection::vec(any::<prop::sample::Index>(), 1..40),
        ) {
            // A few failures, each the first with one field changed, in any order.
            let mut failures = vec![base.clone()];
            failures.extend(changes.iter().map(|(field, other)| with_field(&base, *field, other)));
            static POLICY: std::sync::LazyLock<Policy> = std::sync::LazyLock::new(policy);
            let policy = &*POLICY;
            // A table of two places, so that the failures meet in them.
            let analyses = Analyses::with_slots(2, Default::default());
            for i in &order {
                let o = i.get(&failures);
                prop_assert_eq!(&*analyses.get(o, policy).0, &Analysis::of(o, policy, &analyses.shapes));
            }
        }
    }

    #[test]
    fn a_long_failure_is_analysed_but_not_kept() {
        let policy = policy();
        let analyses = Analyses::new(Default::default());
        let mut long = failure();
        long.detail = "x".repeat(MAX_TEXT_BYTES);
        let got = kept(&analyses, &long, &policy);
        assert_eq!(*got, Analysis::of(&long, &policy, &analyses.shapes));
        assert!(analyses.is_empty());
    }

    #[test]
    fn the_table_holds_at_most_its_slots() {
        let policy = policy();
        let analyses = Analyses::new(Default::default());
        for i in 0..SLOTS * 4 {
            let mut o = failure();
            o.message = format!("request {i} failed");
            kept(&analyses, &o, &policy);
        }
        // Every place holds one, bar the few that chance sent none of the 1,024.
        assert!((SLOTS * 9 / 10..=SLOTS).contains(&analyses.len()), "{}", analyses.len());
    }
}
