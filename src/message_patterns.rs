//! Message patterns: which of the rules' message patterns match a text, in one
//! pass over it.
//!
//! The patterns compile to one lazy DFA (regex-automata's hybrid engine, the one
//! the `regex` crate's `RegexSet` runs) that reports every pattern matching
//! anywhere in the text. The pass walks the DFA's known transitions in a tight
//! loop and stops only at states that need a look (a match, a transition not
//! yet computed). `RegexSet::matches` checks every byte for them in a loop its
//! authors left unoptimised (about 28 instructions a byte of a 200-byte message,
//! all told; this loop takes 9), the largest single cost of classifying a failure.
//! A text of 64 bytes or more is walked in four parts side by side, which the CPU
//! runs at once (see `search_in_parts`): 160 ns for the engine bench's 200-byte
//! message on an Intel Xeon, not 300.
//!
//! The lazy DFA builds its states as texts need them, in a cache per thread
//! (`CACHE_BYTES`, sized for the variety of real messages). If a text makes it
//! give up (its cache cleared too often to pay off, or a Unicode word boundary
//! meeting a non-ASCII byte), that text is searched again by a PikeVM over the
//! same compiled patterns, as the `regex` crate would.

use regex_automata::hybrid::dfa::{Cache, DFA};
use regex_automata::hybrid::LazyStateID;
use regex_automata::nfa::thompson::{self, pikevm, NFA};
use regex_automata::util::pool::Pool;
use regex_automata::util::syntax;
use regex_automata::{Input, MatchKind, PatternID, PatternSet};
use std::panic::{RefUnwindSafe, UnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};

/// Makes a cache for a thread that has none free.
type MakeCache<C> = Box<dyn Fn() -> C + Send + Sync + UnwindSafe + RefUnwindSafe>;

/// The lazy DFA's cache per thread, an upper bound: states are built as texts need them.
///
/// The built-in rules need about 12.5 MiB of states for the 1,075 real messages and traces under
/// `tests/data` (8 MiB for 857 of them; 16 MiB held that with no room to spare when their variety grew,
/// and 24 MiB did at 12 MiB), and the need grows slower than the texts do. The `regex` crate's 2 MiB
/// made the cache fill and clear over and over on such texts, and then give up on most of them for the
/// PikeVM: the engine bench's `real` workload ran 266 µs an outcome with it, 2.7 µs with this.
const CACHE_BYTES: usize = 32 << 20;

/// Texts the lazy DFA gave up on and the PikeVM searched, in this process (every policy's patterns):
/// `rebound_message_pattern_fallbacks_total`. Each costs a hundred times a warm search.
static FALLBACKS: AtomicU64 = AtomicU64::new(0);

/// How many texts the lazy DFA gave up on in this process, for the metric.
pub fn fallbacks() -> u64 {
    FALLBACKS.load(Ordering::Relaxed)
}

/// Compiled message patterns, case-insensitive, with ASCII classes.
pub struct MessagePatterns {
    dfa: DFA,
    caches: Pool<Cache, MakeCache<Cache>>,
    fallback: pikevm::PikeVM,
    fallback_caches: Pool<pikevm::Cache, MakeCache<pikevm::Cache>>,
}

impl std::fmt::Debug for MessagePatterns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MessagePatterns").field("patterns", &self.len()).finish()
    }
}

impl MessagePatterns {
    /// Compiles `patterns`, with at most `size_limit` bytes of compiled program.
    /// The error says why (each pattern should have been checked alone first, so
    /// that an error can name its rule).
    pub fn new(patterns: &[String], size_limit: usize) -> Result<Self, String> {
        Self::with_cache(patterns, size_limit, CACHE_BYTES)
    }

    /// Checks one pattern alone, compiled as the set compiles it, with at most
    /// `size_limit` bytes of program, so that an error can name its rule. The
    /// error is the `regex` crate's, which points at the fault.
    ///
    /// Only the NFA is built: a whole `Regex` per pattern (its DFAs, its literal
    /// prefilters) made loading the built-in rules take 60 ms, not 8.
    pub fn check(pattern: &str, size_limit: usize) -> Result<(), String> {
        let Err(error) = compiler(size_limit).build(pattern) else {
            return Ok(());
        };
        let explained = regex::bytes::RegexBuilder::new(pattern)
            .case_insensitive(true)
            .unicode(false)
            .size_limit(size_limit)
            .build();
        Err(explained.err().map_or_else(|| error.to_string(), |e| e.to_string()))
    }

    fn with_cache(patterns: &[String], size_limit: usize, cache_bytes: usize) -> Result<Self, String> {
        let nfa = compiler(size_limit).build_many(patterns).map_err(|e| e.to_string())?;
        let dfa = DFA::builder()
            .configure(
                DFA::config()
                    .match_kind(MatchKind::All)
                    .cache_capacity(cache_bytes)
                    .unicode_word_boundary(true)
                    .minimum_cache_clear_count(Some(3))
                    .minimum_bytes_per_state(Some(10)),
            )
            .build_from_nfa(nfa.clone())
            .map_err(|e| e.to_string())?;
        let fallback = pikevm::PikeVM::builder()
            .configure(pikevm::Config::new().match_kind(MatchKind::All))
            .build_from_nfa(nfa)
            .map_err(|e| e.to_string())?;
        let for_cache = dfa.clone();
        let for_fallback = fallback.clone();
        Ok(MessagePatterns {
            dfa,
            caches: Pool::new(Box::new(move || for_cache.create_cache())),
            fallback,
            fallback_caches: Pool::new(Box::new(move || for_fallback.create_cache())),
        })
    }

    /// How many patterns there are.
    pub fn len(&self) -> usize {
        self.dfa.pattern_len()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The patterns that match somewhere in `text`, each once, in ascending order.
    ///
    /// A list, not a `PatternSet`: a set holds a flag per pattern, made and read whole for every
    /// text (about 400 instructions a failure more, with the built-in rules' 332 patterns), while
    /// a text matches a few at most.
    pub fn matches(&self, text: &[u8]) -> Vec<PatternID> {
        let mut found = Vec::new();
        self.matches_into(text, &mut found, |p| p);
        found.sort_unstable();
        found
    }

    /// Adds to `found` what `each` makes of each pattern that matches somewhere in `text`, unless
    /// `found` has it already; in no set order. The classifier adds its candidate rules so, with
    /// no list of patterns made and dropped for each text.
    pub fn matches_into<T: PartialEq>(&self, text: &[u8], found: &mut Vec<T>, each: impl Fn(PatternID) -> T) {
        if self.is_empty() {
            return;
        }
        let start = found.len();
        let searched = search(&self.dfa, &mut self.caches.get(), text, &mut |p| add_new(found, each(p)));
        if searched.is_err() {
            FALLBACKS.fetch_add(1, Ordering::Relaxed);
            // What the search added is added again, in full.
            found.truncate(start);
            let input = Input::new(text);
            let mut all = PatternSet::new(self.len());
            self.fallback.which_overlapping_matches(&mut self.fallback_caches.get(), &input, &mut all);
            for p in all.iter() {
                add_new(found, each(p));
            }
        }
    }
}

/// Adds `item` to `found` unless it is there: a match state may come again at each byte after its
/// match, and a list of a few is searched faster than a set is made.
fn add_new<T: PartialEq>(found: &mut Vec<T>, item: T) {
    if !found.contains(&item) {
        found.push(item);
    }
}

/// The patterns' compiler: case-insensitive, ASCII classes, any bytes.
fn compiler(size_limit: usize) -> thompson::Compiler {
    let mut compiler = NFA::compiler();
    compiler
        .syntax(syntax::Config::new().case_insensitive(true).unicode(false).utf8(false))
        .configure(thompson::Config::new().utf8(false).nfa_size_limit(Some(size_limit)));
    compiler
}

/// Why the lazy DFA stopped short: its cache gave up, or it met a byte it quits on.
struct GaveUp;

/// Gives `found` every pattern matching in `text` (some more than once): in parts when it is long
/// enough ([`search_in_parts`]), else whole ([`search_whole`]).
fn search(dfa: &DFA, cache: &mut Cache, text: &[u8], found: &mut impl FnMut(PatternID)) -> Result<(), GaveUp> {
    if text.len() >= PARTS * PART_MIN {
        match search_in_parts(dfa, cache, text, found) {
            // What the parts found stands (each was found before the cache was cleared); the
            // whole text's walk finds the rest.
            Err(Stop::Cleared) => {}
            Err(Stop::GaveUp) => return Err(GaveUp),
            Ok(()) => return Ok(()),
        }
    }
    search_whole(dfa, cache, text, found)
}

/// The parts a long text is walked in: on the engine bench's 200-byte message (one part, the whole
/// text, took 300 ns), 2 parts took 240 ns, 3 took 210, 4 took 200, 6 took 290 and 8 took 315, in
/// a first form of the loop; 4 take 160 in this one.
const PARTS: usize = 4;
/// The shortest part: a shorter text is walked whole.
const PART_MIN: usize = 16;
/// How many of a part's first states are kept, for the whole text's walk to meet one of them.
const KEPT_STATES: usize = 32;

/// Why a walk in parts stopped short.
enum Stop {
    /// As [`GaveUp`].
    GaveUp,
    /// The cache was cleared to make room for a new state: the states kept of the other parts
    /// went stale with it.
    Cleared,
}

/// [`search`] in [`PARTS`] parts of the text walked side by side.
///
/// A DFA's walk is a chain: each step reads the next state from the table at the state before,
/// so the 200 bytes of a message take 200 reads one after another (about 1.5 ns each, the CPU
/// mostly waiting on the read before). The walks of four parts, each from the start state at its
/// place, are four chains that the CPU runs side by side.
///
/// A part's walk does not know what began before the part. So the whole text's walk goes on from
/// the end of each part into the next, until it comes to the state the next part's walk had at
/// the same place: a DFA's walk from one state over the same bytes is the same walk, so from
/// there on the part's walk is the whole text's. That is mostly within a few bytes, where what
/// began before the part has ended (a `.*` keeps it going to the end of its line, or until the
/// part's walk begins it too). Every pattern either walk comes to a match of is one the whole
/// text matches, and every match state of the whole text's walk is one of theirs.
fn search_in_parts(dfa: &DFA, cache: &mut Cache, text: &[u8], found: &mut impl FnMut(PatternID)) -> Result<(), Stop> {
    let clears = cache.clear_count();
    let part = text.len() / PARTS;
    let starts: [usize; PARTS] = std::array::from_fn(|p| p * part);
    let mut sids = [LazyStateID::default(); PARTS];
    for (sid, &start) in sids.iter_mut().zip(&starts) {
        *sid = dfa.start_state_forward(cache, &Input::new(text).range(start..)).map_err(|_| Stop::GaveUp)?;
        kept_valid(cache, clears)?;
    }
    cache.search_start(0);
    // Each part's first `part` bytes side by side; the last part's remainder (at most three) after.
    let parts: [&[u8]; PARTS] = std::array::from_fn(|p| &text[starts[p]..starts[p] + part]);
    let mut kept = [[LazyStateID::default(); KEPT_STATES]; PARTS];
    let mut at = walk_parts(dfa, cache, &mut sids, &parts, 0, &mut kept);
    while at < part {
        // A part's next state is tagged: each part steps over its byte on its own.
        cache.search_update(PARTS * at);
        for p in 0..PARTS {
            if at < KEPT_STATES {
                kept[p][at] = sids[p];
            }
            sids[p] = step(dfa, cache, clears, sids[p], parts[p][at], found)?;
        }
        at = walk_parts(dfa, cache, &mut sids, &parts, at + 1, &mut kept);
    }
    let last = PARTS - 1;
    for &byte in &text[starts[last] + part..] {
        sids[last] = step(dfa, cache, clears, sids[last], byte, found)?;
    }
    // The whole text's walk: part 0's, then on from the end of each part until it meets the next.
    let mut whole = sids[0];
    for p in 1..PARTS {
        let end = if p == last { text.len() } else { starts[p] + part };
        let mut at = starts[p];
        let met = loop {
            let i = at - starts[p];
            if i < KEPT_STATES.min(part) && whole == kept[p][i] {
                break true;
            }
            if at == end {
                break false;
            }
            whole = step(dfa, cache, clears, whole, text[at], found)?;
            at += 1;
        };
        if met {
            whole = sids[p];
        }
    }
    // Matches show one byte late: the end of the text is one more step.
    let eoi = dfa.next_eoi_state(cache, whole).map_err(|_| Stop::GaveUp)?;
    if eoi.is_match() {
        add_matches(dfa, cache, eoi, found);
    }
    cache.search_finish(text.len());
    Ok(())
}

/// `Err(Stop::Cleared)` when the cache was cleared since it had been `clears` times.
fn kept_valid(cache: &Cache, clears: usize) -> Result<(), Stop> {
    match cache.clear_count() == clears {
        true => Ok(()),
        false => Err(Stop::Cleared),
    }
}

/// Walks the parts side by side from `at` over known transitions between ordinary states, keeping
/// each part's state before each of its first [`KEPT_STATES`] bytes, until one part's next state
/// is tagged (a match, or not yet computed) or the parts end. Returns where it stopped, none of
/// the parts having taken that step. The cache is only read: a loop of its own, the states stay in
/// registers.
fn walk_parts(
    dfa: &DFA,
    cache: &Cache,
    sids: &mut [LazyStateID; PARTS],
    parts: &[&[u8]; PARTS],
    mut at: usize,
    kept: &mut [[LazyStateID; KEPT_STATES]; PARTS],
) -> usize {
    if sids.iter().any(|sid| sid.is_tagged()) {
        return at;
    }
    let mut now = *sids;
    while at < parts[0].len() {
        let next: [LazyStateID; PARTS] = std::array::from_fn(|p| dfa.next_state_untagged(cache, now[p], parts[p][at]));
        if next.iter().any(|sid| sid.is_tagged()) {
            break;
        }
        if at < KEPT_STATES {
            for p in 0..PARTS {
                kept[p][at] = now[p];
            }
        }
        now = next;
        at += 1;
    }
    *sids = now;
    at
}

/// The state after `sid` on `byte` (computed if it was not yet), its matches given to `found`;
/// `Stop::Cleared` when computing it cleared the cache, which had been cleared `clears` times.
fn step(
    dfa: &DFA,
    cache: &mut Cache,
    clears: usize,
    sid: LazyStateID,
    byte: u8,
    found: &mut impl FnMut(PatternID),
) -> Result<LazyStateID, Stop> {
    let next = dfa.next_state(cache, sid, byte).map_err(|_| Stop::GaveUp)?;
    kept_valid(cache, clears)?;
    if next.is_match() {
        add_matches(dfa, cache, next, found);
    } else if next.is_quit() {
        return Err(Stop::GaveUp);
    }
    Ok(next)
}

/// Gives `found` every pattern matching in `text` (some more than once), walking `dfa` once.
fn search_whole(dfa: &DFA, cache: &mut Cache, text: &[u8], found: &mut impl FnMut(PatternID)) -> Result<(), GaveUp> {
    let mut sid = dfa.start_state_forward(cache, &Input::new(text)).map_err(|_| GaveUp)?;
    cache.search_start(0);
    let mut at = 0;
    while at < text.len() {
        if sid.is_tagged() {
            sid = dfa.next_state(cache, sid, text[at]).map_err(|_| GaveUp)?;
            at += 1;
        } else {
            let (prev, next, walked) = walk(dfa, cache, sid, &text[at..]);
            (sid, at) = (next, at + walked);
            if !sid.is_tagged() {
                break;
            }
            if sid.is_unknown() {
                // Not computed yet: compute it from the state before.
                sid = dfa.next_state(cache, prev, text[at - 1]).map_err(|_| GaveUp)?;
                cache.search_update(at);
            }
        }
        if sid.is_match() {
            add_matches(dfa, cache, sid, found);
        } else if sid.is_dead() {
            cache.search_finish(at);
            return Ok(());
        } else if sid.is_quit() {
            cache.search_finish(at);
            return Err(GaveUp);
        }
    }
    // Matches show one byte late: the end of the text is one more step.
    sid = dfa.next_eoi_state(cache, sid).map_err(|_| GaveUp)?;
    if sid.is_match() {
        add_matches(dfa, cache, sid, found);
    }
    cache.search_finish(text.len());
    Ok(())
}

/// Follows known transitions between ordinary states from `sid` over `bytes`
/// (most of a text), until a tagged state (a match, dead, quit, or not yet
/// computed) or the end. Returns the state before the last step, the last, and
/// the bytes walked. A loop of its own, with the cache shared, keeps it tight;
/// four steps a round, with no loop test or copy of the state between them,
/// make it 9 instructions a byte, not 12.
fn walk(dfa: &DFA, cache: &Cache, mut sid: LazyStateID, bytes: &[u8]) -> (LazyStateID, LazyStateID, usize) {
    let step = |sid, b| dfa.next_state_untagged(cache, sid, b);
    let mut rounds = bytes.chunks_exact(4);
    for (round, four) in rounds.by_ref().enumerate() {
        let at = 4 * round;
        let s1 = step(sid, four[0]);
        if s1.is_tagged() {
            return (sid, s1, at + 1);
        }
        let s2 = step(s1, four[1]);
        if s2.is_tagged() {
            return (s1, s2, at + 2);
        }
        let s3 = step(s2, four[2]);
        if s3.is_tagged() {
            return (s2, s3, at + 3);
        }
        sid = step(s3, four[3]);
        if sid.is_tagged() {
            return (s3, sid, at + 4);
        }
    }
    let done = bytes.len() - rounds.remainder().len();
    let mut prev = sid;
    for (i, &b) in rounds.remainder().iter().enumerate() {
        prev = sid;
        sid = step(sid, b);
        if sid.is_tagged() {
            return (prev, sid, done + i + 1);
        }
    }
    (prev, sid, bytes.len())
}

/// Gives `found` the patterns `sid` matches.
fn add_matches(dfa: &DFA, cache: &Cache, sid: LazyStateID, found: &mut impl FnMut(PatternID)) {
    for i in 0..dfa.match_len(cache, sid) {
        found(dfa.match_pattern(cache, sid, i));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::sync::LazyLock;

    fn compile(patterns: &[&str]) -> MessagePatterns {
        let patterns: Vec<String> = patterns.iter().map(|p| p.to_string()).collect();
        MessagePatterns::new(&patterns, 1 << 20).expect("valid patterns")
    }

    fn matching(patterns: &MessagePatterns, text: &str) -> Vec<usize> {
        patterns.matches(text.as_bytes()).iter().map(|p| p.as_usize()).collect()
    }

    /// The default rules' patterns, compiled here and by the `regex` crate's
    /// `RegexSet` (configured as the classifier used to configure it), once.
    static DEFAULTS: LazyLock<(MessagePatterns, regex::bytes::RegexSet)> = LazyLock::new(|| {
        let patterns = crate::classify::default_message_patterns();
        let set = regex::bytes::RegexSetBuilder::new(&patterns)
            .case_insensitive(true)
            .unicode(false)
            .size_limit(64 << 20)
            .build()
            .expect("valid patterns");
        (MessagePatterns::new(&patterns, 64 << 20).expect("the default patterns compile"), set)
    });

    /// Both answers for `text`: ours and the `regex` crate's.
    fn both(text: &[u8]) -> (Vec<usize>, Vec<usize>) {
        let (ours, reference) = &*DEFAULTS;
        (ours.matches(text).iter().map(|p| p.as_usize()).collect(), reference.matches(text).iter().collect())
    }

    #[test]
    fn every_pattern_that_matches_anywhere_is_found() {
        let patterns = compile(&[r"rate limit", r"\btimed? ?out\b", r"^error", r"refused$", r"429"]);
        assert_eq!(matching(&patterns, "Connection REFUSED"), vec![3]);
        assert_eq!(matching(&patterns, "error: rate limit hit, timed out (429)"), vec![0, 1, 2, 4]);
        assert_eq!(matching(&patterns, "timeouts happen"), Vec::<usize>::new());
        assert_eq!(matching(&patterns, "429"), vec![4]);
        assert_eq!(matching(&patterns, ""), Vec::<usize>::new());
    }

    #[test]
    fn no_patterns_match_nothing() {
        // Every rule with words replaced by one without: the set is empty, and still builds.
        let none = MessagePatterns::new(&[], 1 << 20).expect("an empty set builds");
        assert!(none.is_empty());
        assert_eq!(none.matches(b"rate limit exceeded").len(), 0);
    }

    #[test]
    fn a_set_past_its_size_limit_is_an_error() {
        let patterns = vec!["timeout".to_string(), "x{2000}".to_string()];
        let error = MessagePatterns::new(&patterns, 10_000).expect_err("past the limit");
        assert!(error.contains("exceeded limit of 10000"), "{error}");
        assert!(MessagePatterns::new(&patterns, 1 << 20).is_ok());
    }

    #[test]
    fn a_pattern_checked_alone_is_refused_as_the_regex_crate_refuses_it() {
        assert_eq!(MessagePatterns::check(r"\btimed? ?out\b", 1 << 20), Ok(()));
        let unclosed = MessagePatterns::check("(unclosed", 1 << 20).expect_err("a syntax error");
        assert!(unclosed.contains("(unclosed\n    ^\nerror: unclosed group"), "{unclosed}");
        let range = MessagePatterns::check("[z-a]", 1 << 20).expect_err("a syntax error");
        assert!(range.contains("invalid character class range"), "{range}");
        let large = MessagePatterns::check("a{1000}{1000}", 1 << 20).expect_err("past the limit");
        assert_eq!(large, "Compiled regex exceeds size limit of 1048576 bytes.");
        assert_eq!(MessagePatterns::check("x{2000}", 1 << 20), Ok(()));
    }

    #[test]
    fn a_match_at_the_very_end_is_found() {
        let patterns = compile(&[r"out\b", r"x$"]);
        assert_eq!(matching(&patterns, "read timed out"), vec![0]);
        assert_eq!(matching(&patterns, "max"), vec![1]);
    }

    #[test]
    fn a_unicode_word_boundary_meeting_non_ascii_text_falls_back() {
        // The lazy DFA quits on non-ASCII bytes for (?u:\b); the PikeVM answers instead.
        let patterns = compile(&[r"(?u:\bfehler\b)", "zeit"]);
        let before = fallbacks();
        assert_eq!(matching(&patterns, "Fehler: Zeitüberschreitung"), vec![0, 1]);
        assert_eq!(matching(&patterns, "Fehlerü"), Vec::<usize>::new());
        // Counted (other tests may count theirs meanwhile).
        assert!(fallbacks() >= before + 2, "{before} then {}", fallbacks());
    }

    #[test]
    fn a_text_that_makes_the_lazy_dfa_give_up_is_searched_again() {
        // An `a` 16 bytes before a `z`: tens of thousands of states over a random
        // text of a and b, far more than a 64 KiB cache holds, so it clears too
        // often to pay off and gives up; the PikeVM finds the match instead.
        let patterns = vec!["a[ab]{16}z".to_string(), "^b".to_string()];
        let small = MessagePatterns::with_cache(&patterns, 1 << 20, 64 << 10).expect("valid patterns");
        let mut rng = crate::rng::Rng::new(7);
        let mut text: Vec<u8> =
            (0..100_000).map(|_| if rng.next_u64().is_multiple_of(2) { b'a' } else { b'b' }).collect();
        text[0] = b'a';
        text[50_000..50_018].copy_from_slice(b"abababababababaabz");
        assert!(search(&small.dfa, &mut small.dfa.create_cache(), &text, &mut |_| ()).is_err());
        assert_eq!(small.matches(&text).iter().map(|p| p.as_usize()).collect::<Vec<_>>(), vec![0]);
        // What a list held before is kept; the search's own additions are made again by the PikeVM.
        let mut found = vec![("index", 7)];
        small.matches_into(&text, &mut found, |p| ("pattern", p.as_usize()));
        assert_eq!(found, [("index", 7), ("pattern", 0)]);
    }

    /// The real messages of the classification corpus and the real traces (`tests/data`).
    fn real_texts() -> Vec<Vec<u8>> {
        let data = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data");
        let mut texts = Vec::new();
        for corpus in ["corpus.jsonl", "holdout.jsonl", "holdout-real.jsonl"] {
            let lines = std::fs::read_to_string(format!("{data}/classification/{corpus}")).expect("the corpus");
            for line in lines.lines() {
                let case: serde_json::Value = serde_json::from_str(line).expect("a JSON case");
                texts.push(case["outcome"]["message"].as_str().unwrap_or_default().as_bytes().to_vec());
            }
        }
        for entry in std::fs::read_dir(format!("{data}/traces")).expect("the traces") {
            let path = entry.expect("an entry").path();
            if path.extension().is_some_and(|e| e == "txt") {
                texts.push(std::fs::read(&path).expect("a trace"));
            }
        }
        texts
    }

    /// The patterns `search_in_parts` (`Ok`) or `search_whole` finds in `text`, each once, in order.
    fn found_by(dfa: &DFA, cache: &mut Cache, text: &[u8], in_parts: bool) -> Option<Vec<usize>> {
        let mut found = Vec::new();
        let mut add = |p: PatternID| found.push(p.as_usize());
        let searched = match in_parts {
            true => search_in_parts(dfa, cache, text, &mut add).is_ok(),
            false => search_whole(dfa, cache, text, &mut add).is_ok(),
        };
        found.sort_unstable();
        found.dedup();
        searched.then_some(found)
    }

    #[test]
    fn real_texts_walked_in_parts_match_what_they_match_walked_whole() {
        let (ours, _) = &*DEFAULTS;
        let mut cache = ours.dfa.create_cache();
        let long = real_texts().into_iter().filter(|t| t.len() >= PARTS * PART_MIN).collect::<Vec<_>>();
        for text in &long {
            let whole = found_by(&ours.dfa, &mut cache, text, false);
            // `Some`: the parts answered, not the whole walk after a clear.
            let in_parts = found_by(&ours.dfa, &mut cache, text, true);
            assert!(in_parts.is_some() && in_parts == whole, "{}", String::from_utf8_lossy(text));
        }
        assert!(long.len() > 300, "{} long texts", long.len());
    }

    #[test]
    fn a_cache_cleared_while_the_parts_are_walked_leaves_the_text_to_the_whole_walk() {
        // A 64 KiB cache holds too few of the states 1,000 random bytes of a and b need for an `a`
        // 16 bytes before a `z`: it is cleared once, which the parts' walk cannot go on from.
        let patterns = vec!["a[ab]{16}z".to_string(), "^b".to_string(), "zb+$".to_string()];
        let small = MessagePatterns::with_cache(&patterns, 1 << 20, 64 << 10).expect("valid patterns");
        let mut rng = crate::rng::Rng::new(7);
        let mut text: Vec<u8> = (0..1000).map(|_| if rng.next_u64().is_multiple_of(2) { b'a' } else { b'b' }).collect();
        text[0] = b'b';
        text[600..618].copy_from_slice(b"abababababababaabz");
        let cleared = search_in_parts(&small.dfa, &mut small.dfa.create_cache(), &text, &mut |_| ());
        assert!(matches!(cleared, Err(Stop::Cleared)));
        let reference = regex::bytes::RegexSetBuilder::new(&patterns).case_insensitive(true).unicode(false).build();
        let expected: Vec<usize> = reference.expect("valid patterns").matches(&text).iter().collect();
        assert_eq!(expected, [0, 1]);
        assert_eq!(matching_bytes(&small, &text), expected);
    }

    fn matching_bytes(patterns: &MessagePatterns, text: &[u8]) -> Vec<usize> {
        patterns.matches(text).iter().map(|p| p.as_usize()).collect()
    }

    /// Patterns whose matches cross the parts' ends in texts of a few letters: long ones, ones
    /// with `.*` that go on to the end of a line, and ones that look at the byte before or after.
    const CROSSING: [&str; 8] = [r"ab.*ba", r"\bab\b", r"(?m)^b+$", "a{5}", r"b[ab ]{6}a", r"ab$", r"^a", r"b\nb"];

    static CROSSING_SET: LazyLock<(MessagePatterns, regex::bytes::RegexSet)> = LazyLock::new(|| {
        let patterns: Vec<String> = CROSSING.iter().map(|p| p.to_string()).collect();
        let reference = regex::bytes::RegexSetBuilder::new(&patterns).case_insensitive(true).unicode(false).build();
        (MessagePatterns::new(&patterns, 1 << 20).expect("valid patterns"), reference.expect("valid patterns"))
    });

    #[test]
    fn the_states_real_texts_need_fit_the_cache_with_room_to_spare() {
        // With the `regex` crate's 2 MiB, these texts filled the cache, cleared it and then gave up on
        // most of them for the PikeVM (266 µs an outcome in the engine bench's `real` workload, not 2.7).
        let (ours, _) = &*DEFAULTS;
        let mut cache = ours.dfa.create_cache();
        let texts = real_texts();
        for _ in 0..2 {
            for text in &texts {
                let searched = search(&ours.dfa, &mut cache, text, &mut |_| ());
                assert!(searched.is_ok(), "gave up on {}", String::from_utf8_lossy(text));
            }
        }
        assert_eq!(cache.clear_count(), 0);
        assert!(cache.memory_usage() < CACHE_BYTES / 2, "{} bytes of states", cache.memory_usage());
    }

    #[test]
    fn the_default_rules_agree_with_the_regex_crate_on_real_messages_and_traces() {
        let texts = real_texts();
        let mut matched = 0;
        for text in &texts {
            let (ours, reference) = both(text);
            assert_eq!(ours, reference, "{}", String::from_utf8_lossy(text));
            matched += usize::from(!ours.is_empty());
        }
        assert!(texts.len() > 600 && matched > 300, "{matched} of {} texts matched some pattern", texts.len());
    }

    proptest! {
        #[test]
        fn a_pattern_passes_its_check_when_the_regex_crate_builds_it(pattern in "[a-z()\\[\\]{}|?*+^$\\\\.0-9,-]{0,12}") {
            // Far from the size limit: there the two count a little differently.
            let built = regex::bytes::RegexBuilder::new(&pattern).case_insensitive(true).unicode(false).build();
            let checked = MessagePatterns::check(&pattern, 1 << 20);
            prop_assert_eq!(checked.is_ok(), built.is_ok(), "{:?}", built.err());
            if let (Err(ours), Err(theirs)) = (checked, built) {
                prop_assert_eq!(ours, theirs.to_string());
            }
        }

        #[test]
        fn matches_across_the_parts_ends_are_found(text in "[abAB \n]{0,300}") {
            let (ours, reference) = &*CROSSING_SET;
            prop_assert_eq!(matching_bytes(ours, text.as_bytes()), reference.matches(text.as_bytes()).iter().collect::<Vec<_>>());
        }

        #[test]
        fn any_text_gets_the_regex_crates_answer(
            words in proptest::collection::vec(
                prop_oneof![
                    Just("rate limit".to_string()), Just("Timed Out".to_string()), Just("429".to_string()),
                    Just("connection refused".to_string()), Just("permission denied".to_string()),
                    Just("\u{e9}".to_string()), "[ -~]{0,8}", any::<String>(),
                ],
                0..40,
            ),
            cut in 0usize..4,
        ) {
            let text = words.join(" ");
            // Invalid UTF-8 too: a cut inside a character.
            let (ours, reference) = both(&text.as_bytes()[..text.len().saturating_sub(cut)]);
            prop_assert_eq!(ours, reference);
        }
    }
}
