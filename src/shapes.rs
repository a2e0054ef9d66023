//! Messages as sessions keep them: each message's *shape*, the text with every
//! word that has a digit in it taken out, shared by all the kept messages of
//! that shape, and those words, the message's own.
//!
//! A fleet's failures differ mostly in their numbers: "Used 29717" and "Used
//! 29802", an id in a URL, a UUID, a port. Kept whole, 100,000 sessions with
//! three 200-byte messages each held about 650 bytes of text a session; kept
//! as a shared shape and their own words, about 230 (`benches/session_memory.rs`), and about
//! 40 fewer since a message's words share its block.
//!
//! The table of shapes is made for one session store. Each shape counts its bytes
//! into the store's count while a message holds it, once however many messages
//! share it (as a declared tool list does), and goes with the last of them. The
//! table holds shapes weakly, and forgets the gone ones in sweeps, each after as
//! many new shapes as it has places; it has at most [`MAX_SHAPES`]: past that, a
//! new shape is its message's own.

use crate::fingerprint::fingerprint;
use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use triomphe::ThinArc;

/// Stands in a shape for each word taken out, and separates the words. A text
/// that has it is kept whole: it has no words taken out.
const MARK: char = '\u{1}';

/// The most shapes the table holds.
pub const MAX_SHAPES: usize = 100_000;

/// New shapes before the first sweep.
const FIRST_SWEEP: usize = 1024;

/// What a shape holds beyond its text: itself, its reference counts and its place in the table (a hash
/// and a weak reference).
const SHAPE_BYTES: usize = std::mem::size_of::<Shape>() + 16 + 16;

/// What a kept message holds beyond its words: its reference count, its shape and the words' length.
const PARTS_BYTES: usize = 8 + std::mem::size_of::<triomphe::HeaderWithLength<Arc<Shape>>>();

/// A text shared by the messages of one shape, counted into a store's count while it lives.
#[derive(Debug)]
struct Shape {
    text: Box<str>,
    /// The text's fingerprint, the same as each of its messages' (see [`KeptMessage::fingerprint`]).
    fingerprint: u64,
    meter: Arc<AtomicUsize>,
}

impl Shape {
    fn new(text: &str, meter: &Arc<AtomicUsize>) -> Shape {
        meter.fetch_add(SHAPE_BYTES + text.len(), Ordering::Relaxed);
        Shape { text: text.into(), fingerprint: fingerprint(text), meter: meter.clone() }
    }
}

impl Drop for Shape {
    fn drop(&mut self) {
        self.meter.fetch_sub(SHAPE_BYTES + self.text.len(), Ordering::Relaxed);
    }
}

#[derive(Default)]
struct Table {
    /// The shapes by their text's hash, held weakly: a shape goes (and stops counting) with the
    /// last message that holds it, and its place here with the next sweep.
    shapes: HashMap<u64, Weak<Shape>>,
    /// Shapes made since the last sweep.
    made: usize,
}

/// The shapes of the messages one session store keeps.
pub struct Shapes {
    table: Mutex<Table>,
    hasher: foldhash::fast::RandomState,
    meter: Arc<AtomicUsize>,
}

impl fmt::Debug for Shapes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shapes").field("len", &self.len()).finish()
    }
}

impl Shapes {
    /// A table whose shapes count their bytes into `meter` (a store's: see `SessionStore::meter`).
    pub fn new(meter: Arc<AtomicUsize>) -> Shapes {
        Shapes { table: Mutex::default(), hasher: Default::default(), meter }
    }

    /// `text` as a session keeps it.
    pub fn keep(&self, text: &str) -> KeptMessage {
        thread_local! {
            /// A shape and words being split, kept for the thread's next: only what is kept is allocated.
            static SPLIT: RefCell<(String, String)> = const { RefCell::new((String::new(), String::new())) };
        }
        SPLIT.with_borrow_mut(|(shape, words)| {
            split(text, shape, words);
            KeptMessage(ThinArc::from_header_and_slice(self.shape(shape), words.as_bytes()))
        })
    }

    /// The shape with this text: the table's, or a new one.
    fn shape(&self, text: &str) -> Arc<Shape> {
        let hash = self.hasher.hash_one(text);
        let found = self.lock().shapes.get(&hash).and_then(Weak::upgrade);
        if let Some(shape) = found.filter(|shape| *shape.text == *text) {
            return shape;
        }
        // Made (its fingerprint taken) with the table unlocked. Two threads making the same
        // shape at once each get one; the table keeps the later, and only sharing is lost.
        let shape = Arc::new(Shape::new(text, &self.meter));
        let mut table = self.lock();
        table.made += 1;
        if table.made >= table.shapes.len().max(FIRST_SWEEP) {
            table.shapes.retain(|_, shape| shape.strong_count() > 0);
            table.made = 0;
        }
        // A shape whose hash another has (one in 2^64) replaces it: it is the one in use.
        if table.shapes.len() < MAX_SHAPES || table.shapes.contains_key(&hash) {
            table.shapes.insert(hash, Arc::downgrade(&shape));
        }
        shape
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The places in the table, the shapes of gone messages among them until a sweep.
    pub fn len(&self) -> usize {
        self.lock().shapes.len()
    }

    /// True when it has none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Whether a byte is part of a word: ASCII letters, digits, `_` and `-` (not `.`: `urllib3.connection` keeps its `connection`).
fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-')
}

/// Where the first ASCII digit at or after `from` is. Eight bytes at a time, as one number: most
/// of a message has none. (Sixteen at a time, tested byte by byte, took about 600 instructions
/// more for the engine bench's 200-byte message.)
fn next_digit(bytes: &[u8], from: usize) -> Option<usize> {
    let rest = &bytes[from.min(bytes.len())..];
    let mut chunks = rest.chunks_exact(8);
    let mut at = from;
    for chunk in chunks.by_ref() {
        let digits = digit_bytes(u64::from_le_bytes(chunk.try_into().expect("eight bytes")));
        if digits != 0 {
            return Some(at + digits.trailing_zeros() as usize / 8);
        }
        at += 8;
    }
    chunks.remainder().iter().position(u8::is_ascii_digit).map(|p| at + p)
}

/// The top bit of each byte of `x` that is an ASCII digit, the others clear ("has a byte between",
/// from Bit Twiddling Hacks). Exact: each byte's sums stay within it, and a byte of 0x80 or more
/// is no digit.
fn digit_bytes(x: u64) -> u64 {
    const ONES: u64 = u64::MAX / 255;
    const LOW: u64 = ONES * 0x7f;
    let low = x & LOW;
    // At most 0x39 sets the top bit of 0xb9 - low; at least 0x30 sets that of low + 0x50.
    (ONES * (0x7f + 0x3a) - low) & !x & (low + ONES * (0x7f - 0x2f)) & (ONES * 0x80)
}

/// Writes `text`'s shape and its words (joined by [`MARK`]) into `shape` and `words`, which it
/// empties first. A word is a run of ASCII letters, digits, `_` and `-`; one with a digit in
/// it is taken out.
fn split(text: &str, shape: &mut String, words: &mut String) {
    shape.clear();
    words.clear();
    // The memchr crate's search, not `str::contains`: core's took about 230 instructions for 200 bytes.
    if memchr::memchr(MARK as u8, text.as_bytes()).is_some() {
        shape.push_str(text);
        return;
    }
    let bytes = text.as_bytes();
    let mut kept_to = 0;
    while let Some(digit) = next_digit(bytes, kept_to) {
        // The word around the digit. ASCII bytes bound it, so both ends are char boundaries; the
        // last word taken out ended at a byte of no word, so this one starts after it.
        let start = bytes[..digit].iter().rposition(|&b| !is_word(b)).map_or(0, |p| p + 1);
        let mut end = bytes[digit..].iter().position(|&b| !is_word(b)).map_or(bytes.len(), |p| digit + p);
        // Its trailing `-` and `_` stay in the shape: a fingerprint reads a quote after one as opening a
        // quoted value, and after the mark as after a letter or digit (`0-''` is not `0''`).
        while end > digit + 1 && matches!(bytes[end - 1], b'-' | b'_') {
            end -= 1;
        }
        shape.push_str(&text[kept_to..start]);
        shape.push(MARK);
        if !words.is_empty() {
            words.push(MARK);
        }
        words.push_str(&text[start..end]);
        kept_to = end;
    }
    shape.push_str(&text[kept_to..]);
}

/// A message as a session keeps it (see the module's comment): cheap to clone, and written out
/// again whole with `Display` (`to_string()`).
///
/// One block holds its shape and its own words (joined by a mark; none when the shape is the
/// text), behind a single pointer. As an `Arc` of the shape and a boxed `str` of the words, it
/// took two blocks, and the allocator rounds each up to its size class: the RSS per session of
/// `bench/run`'s memory step (3 messages each) went from 1,280 bytes to 1,199 with one.
#[derive(Clone)]
pub struct KeptMessage(ThinArc<Arc<Shape>, u8>);

impl KeptMessage {
    fn shape(&self) -> &Shape {
        &self.0.header.header
    }

    /// The words: text, as they were split from one.
    fn words(&self) -> Cow<'_, str> {
        String::from_utf8_lossy(&self.0.slice)
    }

    /// The bytes it holds as if its own: its block (its shape counts itself).
    pub fn held_bytes(&self) -> usize {
        PARTS_BYTES + self.0.slice.len()
    }

    /// The text's length in bytes.
    pub fn len(&self) -> usize {
        let (shape, words) = (&self.shape().text, &self.0.slice);
        match words.is_empty() {
            true => shape.len(),
            // Each mark in the shape stands for a word; the marks between the words take its place.
            false => shape.len() + words.len() - 2 * shape.matches(MARK).count() + 1,
        }
    }

    /// True for an empty text.
    pub fn is_empty(&self) -> bool {
        self.shape().text.is_empty()
    }

    /// Its fingerprint, its shape's: a fingerprint folds each word with a digit in it, the words
    /// the shape takes out (see [`crate::fingerprint`]), so this is `fingerprint(text)` (of a text
    /// of up to the 512 bytes one reads), taken once a shape rather than once a message.
    pub fn fingerprint(&self) -> u64 {
        self.shape().fingerprint
    }

    /// True when both share one shape (made by the same table from texts of the same shape).
    pub fn shares_shape_with(&self, other: &KeptMessage) -> bool {
        Arc::ptr_eq(&self.0.header.header, &other.0.header.header)
    }
}

impl fmt::Display for KeptMessage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (shape, words) = (self.shape(), self.words());
        if words.is_empty() {
            return f.write_str(&shape.text);
        }
        let mut words = words.split(MARK);
        for (i, piece) in shape.text.split(MARK).enumerate() {
            if i > 0 {
                f.write_str(words.next().unwrap_or_default())?;
            }
            f.write_str(piece)?;
        }
        Ok(())
    }
}

impl fmt::Debug for KeptMessage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.to_string(), f)
    }
}

impl PartialEq for KeptMessage {
    fn eq(&self, other: &KeptMessage) -> bool {
        self.0.slice == other.0.slice && self.shape().text == other.shape().text
    }
}

impl serde::Serialize for KeptMessage {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn shapes() -> (Shapes, Arc<AtomicUsize>) {
        let meter = Arc::new(AtomicUsize::new(0));
        (Shapes::new(meter.clone()), meter)
    }

    /// Real messages: requests/urllib3 2.31 and openai-python 1.x (as in `benches/support/workload.rs`).
    const URLLIB3: &str = "HTTPSConnectionPool(host='api.example.com', port=443): Max retries exceeded with url: /v1/search?q=rust-17 (Caused by NewConnectionError('<urllib3.connection.HTTPSConnection object at 0x7f>: Failed to establish a new connection'))";
    const RATE_LIMITED: &str = "Rate limit reached for gpt-4o in organization org-XXXX on tokens per min (TPM): Limit 30000, Used 29717, Requested 1201. Please try again in 1.836s.";

    #[test]
    fn messages_differing_in_their_numbers_share_one_shape() {
        let (shapes, _) = shapes();
        let one = shapes.keep(RATE_LIMITED);
        let other = shapes.keep(&RATE_LIMITED.replace("Used 29717", "Used 29802"));
        assert_eq!(one.to_string(), RATE_LIMITED);
        assert!(one.shares_shape_with(&other));
        assert_ne!(one, other);
        assert_eq!(shapes.len(), 1);
        // What each holds of its own is its words, not the text.
        assert_eq!(one.held_bytes(), PARTS_BYTES + "gpt-4o\u{1}30000\u{1}29717\u{1}1201\u{1}1\u{1}836s".len());
        let elsewhere = shapes.keep(URLLIB3);
        assert!(!elsewhere.shares_shape_with(&one));
        assert_eq!(elsewhere.to_string(), URLLIB3);
    }

    #[test]
    #[cfg(target_pointer_width = "64")]
    fn a_kept_message_is_one_pointer_to_one_block_of_24_bytes_and_its_words() {
        // Its count, its shape and the words' length, then the words. As an `Arc` of the shape and
        // a boxed `str`, it held 40 bytes and a block of their own for the words.
        assert_eq!((std::mem::size_of::<KeptMessage>(), PARTS_BYTES), (8, 24));
        let (shapes, _) = shapes();
        let kept = shapes.keep(RATE_LIMITED);
        assert_eq!(kept.0.slice.len(), "gpt-4o\u{1}30000\u{1}29717\u{1}1201\u{1}1\u{1}836s".len());
    }

    #[test]
    fn texts_come_back_whole_and_their_length_is_theirs() {
        let (shapes, _) = shapes();
        for text in [
            "",
            "42",
            "no digits at all",
            "ends in 7",
            "7 starts it",
            "a\u{1}mark 12 kept whole",
            "ünïcode 12€ around 3.5ms ✓",
            "8d3c9a1e-52b7-4f0e-9a55-0c4f0d1e7b21",
        ] {
            let kept = shapes.keep(text);
            assert_eq!(kept.to_string(), text);
            assert_eq!(kept.len(), text.len(), "{text:?}");
            assert_eq!(kept.is_empty(), text.is_empty());
        }
    }

    /// Distinct shapes: words without digits.
    fn letters(mut i: usize) -> String {
        let mut text = String::from("shape ");
        while i > 0 {
            text.push(char::from(b'a' + (i % 26) as u8));
            i /= 26;
        }
        text
    }

    /// What the live shapes in the table count.
    fn counted(shapes: &Shapes) -> usize {
        let table = shapes.table.lock().expect("not poisoned");
        table.shapes.values().filter_map(Weak::upgrade).map(|shape| SHAPE_BYTES + shape.text.len()).sum()
    }

    #[test]
    fn a_shape_counts_itself_once_while_a_message_holds_it() {
        let (shapes, meter) = shapes();
        let one = SHAPE_BYTES + "request \u{1} failed".len();
        let kept: Vec<KeptMessage> = (0..100).map(|i| shapes.keep(&format!("request {i} failed"))).collect();
        assert_eq!((meter.load(Ordering::Relaxed), shapes.len()), (one, 1));
        drop(kept);
        // Gone with its last message; its place waits for a sweep.
        assert_eq!((meter.load(Ordering::Relaxed), shapes.len()), (0, 1));
        let held = shapes.keep("request 7 failed");
        for i in 1..=FIRST_SWEEP {
            drop(shapes.keep(&letters(i)));
        }
        // Swept: the places of gone shapes went, the held one's stayed.
        assert!(shapes.len() < FIRST_SWEEP, "{}", shapes.len());
        assert!(shapes.keep("request 8 failed").shares_shape_with(&held));
        assert_eq!(meter.load(Ordering::Relaxed), one);
        assert_eq!(meter.load(Ordering::Relaxed), counted(&shapes));
    }

    #[test]
    fn the_table_stays_bounded_when_every_shape_is_held() {
        let (shapes, meter) = shapes();
        let held: Vec<KeptMessage> = (0..MAX_SHAPES + 5_000).map(|i| shapes.keep(&letters(i))).collect();
        assert!(shapes.len() <= MAX_SHAPES, "{}", shapes.len());
        // Past the table, a message still keeps its text, and its shape counts itself.
        let last = held.last().expect("made");
        assert_eq!(last.to_string(), letters(MAX_SHAPES + 4_999));
        let all: usize = (0..MAX_SHAPES + 5_000).map(|i| SHAPE_BYTES + letters(i).len()).sum();
        assert_eq!(meter.load(Ordering::Relaxed), all);
        drop(held);
        assert_eq!(meter.load(Ordering::Relaxed), 0);
    }

    proptest! {
        #[test]
        fn the_first_digit_is_found_wherever_it_is(
            // Any byte; the digits and the bytes either side of them; the same with the top bit set.
            bytes in proptest::collection::vec(prop_oneof![any::<u8>(), 0x2fu8..=0x3a, 0xafu8..=0xba], 0..40),
            from in 0usize..45,
        ) {
            let plain = bytes.iter().skip(from).position(u8::is_ascii_digit).map(|p| from + p);
            prop_assert_eq!(next_digit(&bytes, from), plain);
        }

        #[test]
        fn any_text_comes_back_as_it_was(text in "\\PC{0,80}|[a-z0-9 .:_/-]{0,80}") {
            let (shapes, _) = shapes();
            let kept = shapes.keep(&text);
            prop_assert_eq!(kept.to_string(), text.clone());
            prop_assert_eq!(kept.len(), text.len());
            prop_assert_eq!(kept, shapes.keep(&text));
        }

        #[test]
        fn a_kept_message_has_its_whole_texts_fingerprint(
            pieces in proptest::collection::vec(
                // Words with digits or none; what ends a word, quotes and starts a path or URL; a mark.
                prop_oneof!["[a-zA-Z0-9_-]{1,6}", "[ \t'\"`.:/,(>é]", "://|~/|C:\\\\|0x7f|30\\.1s|\u{1}"],
                0..40,
            )
        ) {
            // A text of up to the 512 bytes a fingerprint reads; one with a mark in it is kept whole.
            let text = pieces.concat();
            let (shapes, _) = shapes();
            prop_assert_eq!(shapes.keep(&text).fingerprint(), fingerprint(&text), "{:?}", text);
        }
    }

    #[test]
    fn a_shape_takes_its_fingerprint_once() {
        let (shapes, _) = shapes();
        let one = shapes.keep(RATE_LIMITED);
        let other = shapes.keep(&RATE_LIMITED.replace("Used 29717", "Used 29802"));
        assert_eq!((one.fingerprint(), other.fingerprint()), (fingerprint(RATE_LIMITED), fingerprint(RATE_LIMITED)));
        assert_ne!(shapes.keep(URLLIB3).fingerprint(), one.fingerprint());
        // An apostrophe after a word taken out (a mark in the shape) opens no quote, as after the word.
        let text = "worker-3's job 'x' failed";
        assert_eq!(shapes.keep(text).fingerprint(), fingerprint(text));
    }
}
