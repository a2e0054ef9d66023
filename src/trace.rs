//! Stack traces collapsed to what an LLM needs: the exception (and its root
//! cause), and the innermost frames of the caller's own code; library frames
//! are counted by where they live ("… 23 frames in site-packages …"), not
//! shown. Python (with chained exceptions), Java/Kotlin (`Caused by:`,
//! `... N more`), Go panics and goroutine dumps, Node/V8 (with `cause:`), Rust
//! panics and backtraces, and .NET (with `--->` inner exceptions) are recognised.
//!
//! Pure functions over text; one pass over the lines, no regex on the hot path.

/// Where a library frame lives, by a mark in its path or its qualified name.
/// Checked in order: the first match names the place.
const PATH_PLACES: [(&str, &str); 15] = [
    ("site-packages", "site-packages"),
    // Code libraries write at run time: `<sqlalchemy generated warned() wrapper for …>`, `<attrs generated init …>`.
    (" generated ", "generated code"),
    ("dist-packages", "dist-packages"),
    ("<frozen ", "the Python standard library"),
    ("/lib/python3", "the Python standard library"),
    ("node_modules", "node_modules"),
    ("(node:", "Node internals"),
    ("(internal/", "Node internals"),
    ("/usr/local/go/src/", "the Go standard library"),
    ("/usr/lib/go", "the Go standard library"),
    ("/go/pkg/mod/", "Go modules"),
    ("/rustc/", "the Rust standard library"),
    (".cargo/registry", "crates"),
    ("java.base/", "the JDK"),
    ("System.Private.CoreLib", ".NET"),
];

/// Qualified-name prefixes of library frames (Java/Kotlin packages, .NET
/// namespaces, Rust crates, Go packages), for frames whose path says nothing.
const NAME_PLACES: [(&str, &str); 24] = [
    ("java.", "the JDK"),
    ("javax.", "the JDK"),
    ("jdk.", "the JDK"),
    ("sun.", "the JDK"),
    ("com.sun.", "the JDK"),
    ("kotlin.", "the Kotlin runtime"),
    ("kotlinx.", "the Kotlin runtime"),
    ("org.springframework.", "libraries"),
    ("org.apache.", "libraries"),
    ("com.google.", "libraries"),
    ("com.fasterxml.", "libraries"),
    ("io.netty.", "libraries"),
    ("okhttp3.", "libraries"),
    ("reactor.", "libraries"),
    ("System.", ".NET"),
    ("Microsoft.", ".NET"),
    ("std::", "the Rust standard library"),
    ("core::", "the Rust standard library"),
    ("alloc::", "the Rust standard library"),
    ("rust_begin_unwind", "the Rust standard library"),
    ("__rust", "the Rust standard library"),
    ("tokio::", "crates"),
    ("runtime.", "the Go runtime"),
    ("node:", "Node internals"),
];

/// A collapsed trace.
#[derive(Clone, Debug, PartialEq)]
pub struct Collapsed {
    /// The exception line (the last one raised, for chained Python exceptions;
    /// with its message joined on, for a Rust panic).
    pub exception: String,
    /// The root cause when it differs (Java `Caused by:`, .NET `--->`, Node
    /// `cause:`, Python's first exception of a chain).
    pub cause: Option<String>,
    /// Innermost frames of the caller's own code, innermost first.
    pub own_frames: Vec<String>,
    /// Library frames left out, by place, in order of first appearance.
    pub library: Vec<(&'static str, usize)>,
    /// Own frames left out, plus Java's `... N more`.
    pub more_frames: usize,
    /// Other goroutines of a Go dump, left out.
    pub other_goroutines: usize,
}

impl Collapsed {
    /// Library frames left out, all places together.
    pub fn library_frames(&self) -> usize {
        self.library.iter().map(|(_, n)| n).sum()
    }

    /// One short line for a snippet: the root cause when the exception does not
    /// already say it, where it happened (a frame in the same file as the one
    /// before it names only its line: `a.py:12 in f ← :30 in g`), and one count
    /// of what was left out (`… 1 more frame, 5 in site-packages …`).
    pub fn location(&self) -> String {
        // Written into one string: a string for each part, then joined, cost about 7,200 instructions
        // for the 4 KB trace of `benches/engine.rs`; one string, about 4,000.
        let frames: usize = self.own_frames.iter().map(|f| f.len() + 5).sum();
        let mut out = String::with_capacity(frames + 256 + 32 * self.library.len());
        let part = |out: &mut String| {
            if !out.is_empty() {
                out.push_str(" ← ");
            }
        };
        if let Some(cause) = self.cause.as_deref().filter(|c| !self.exception.contains(cause_message(c))) {
            part(&mut out);
            out.push_str("caused by ");
            out.push_str(&crate::compact::redact_and_cut(cause, CAUSE_CHARS));
        }
        let mut previous_file = "";
        for frame in &self.own_frames {
            let file = file_of(frame).unwrap_or(0..0);
            let name = &frame[file.clone()];
            part(&mut out);
            if !name.is_empty() && name == previous_file {
                out.push_str(&frame[..file.start]);
                out.push_str(&frame[file.end..]);
            } else {
                out.push_str(frame);
            }
            previous_file = name;
        }
        // What was left out, counted (numbers written by `itoa`, not `write!`: its formatting
        // machinery cost more than the rest of this).
        if self.more_frames > 0 || !self.library.is_empty() || self.other_goroutines > 0 {
            part(&mut out);
            out.push_str("… ");
            let mut first = true;
            // `n`, then what is counted (if said), plural unless 1.
            let mut count = |out: &mut String, n: usize, what: &str| {
                if !std::mem::take(&mut first) {
                    out.push_str(", ");
                }
                out.push_str(itoa::Buffer::new().format(n));
                out.push_str(what);
                if !what.is_empty() && n != 1 {
                    out.push('s');
                }
            };
            if self.more_frames > 0 {
                count(&mut out, self.more_frames, " more frame");
            }
            for (i, (place, n)) in self.library.iter().enumerate() {
                // The first count says what is counted; the ones after it need not.
                count(&mut out, *n, if i == 0 && self.more_frames == 0 { " frame" } else { "" });
                out.push_str(" in ");
                out.push_str(place);
            }
            if self.other_goroutines > 0 {
                count(&mut out, self.other_goroutines, " other goroutine");
            }
            out.push_str(" …");
        }
        out
    }
}

/// The parts in one string (`format!` cost several hundred instructions more a frame).
fn concat(parts: &[&str]) -> String {
    let mut out = String::with_capacity(parts.iter().map(|p| p.len()).sum());
    for part in parts {
        out.push_str(part);
    }
    out
}

/// The longest root cause shown, in characters: the exception line above it says most.
const CAUSE_CHARS: usize = 80;

/// Where the file of a frame is: the first `path.ext` followed by `:` and a line
/// number (`tools/search.py` in `tools/search.py:41 in run`, `Failures.java` in
/// `Failures.main(Failures.java:75)`).
fn file_of(frame: &str) -> Option<std::ops::Range<usize>> {
    let bytes = frame.as_bytes();
    let colon = (0..bytes.len().saturating_sub(1)).find(|&i| bytes[i] == b':' && bytes[i + 1].is_ascii_digit())?;
    let start = frame[..colon].rfind([' ', '(']).map_or(0, |i| i + 1);
    frame[start..colon].contains('.').then_some(start..colon)
}

/// The exception line without what only the runtime needed: Java's
/// `Exception in thread "main" `, Rust's `thread 'main'` and the numeric id Rust
/// 1.91 puts after a thread's name (`thread 'main' (5064) panicked at`), a Go log
/// line's date and time.
fn tidy_exception(line: &str) -> String {
    if let Some(rest) = line.strip_prefix("Exception in thread \"") {
        if let Some((_, exception)) = rest.split_once("\" ") {
            return exception.to_string();
        }
    }
    if let Some((thread, rest)) = line.strip_prefix("thread '").and_then(|r| r.split_once('\'')) {
        let rest = rest.trim_start();
        let rest = match rest.strip_prefix('(').and_then(|r| r.split_once(") ")) {
            Some((id, after)) if !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()) => after,
            _ => rest,
        };
        if let Some(after) = rest.strip_prefix("panicked at ") {
            return match thread {
                "main" => format!("panicked at {after}"),
                _ => format!("thread '{thread}' panicked at {after}"),
            };
        }
    }
    // `2026/11/24 03:36:20 ` (Go's log package): 20 bytes of digits, slashes, a space and colons.
    let stamp = line.as_bytes().get(..20).is_some_and(|b| {
        b.iter().enumerate().all(|(i, c)| match i {
            4 | 7 => *c == b'/',
            10 | 19 => *c == b' ',
            13 | 16 => *c == b':',
            _ => c.is_ascii_digit(),
        })
    });
    if stamp {
        line[20..].to_string()
    } else {
        line.to_string()
    }
}

/// `frame` with each path in it cut to its file name (`file:///app/src/tools/search.mjs:21:15`
/// → `search.mjs:21:15`): the file, line and function tell the model where; the folders
/// above cost tokens and say little to a model that cannot open them.
fn short_paths(frame: &str) -> String {
    let mut out = String::with_capacity(frame.len());
    let mut rest = frame;
    while let Some(start) = rest.find(|c: char| !matches!(c, ' ' | '(' | ')')) {
        out.push_str(&rest[..start]);
        rest = &rest[start..];
        let end = rest.find([' ', '(', ')']).unwrap_or(rest.len());
        let token = &rest[..end];
        // A path (two parts or more): its last part, the file.
        let mut parts = token.split('/').filter(|p| !p.is_empty());
        match (parts.next_back(), parts.next()) {
            (Some(file), Some(_)) => out.push_str(file),
            _ => out.push_str(token),
        }
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// The message part of `Type: message` (all of it when there is no type).
fn cause_message(line: &str) -> &str {
    line.split_once(": ").map_or(line, |(_, m)| m).trim()
}

/// A searcher for each mark of `PATH_PLACES`, built once (`str::contains` builds one on each call).
static PATH_MARKS: std::sync::LazyLock<[memchr::memmem::Finder<'static>; PATH_PLACES.len()]> =
    std::sync::LazyLock::new(|| PATH_PLACES.map(|(mark, _)| memchr::memmem::Finder::new(mark)));

/// The library place of a frame, from its path or its qualified name. The marks are searched in
/// turn: one automaton for all of them cost more, with or without its prefilter (about 200
/// instructions a frame to find one, and the order still to check).
fn library_place(frame: &str) -> Option<&'static str> {
    if let Some(((_, place), _)) =
        PATH_PLACES.iter().zip(PATH_MARKS.iter()).find(|(_, mark)| mark.find(frame.as_bytes()).is_some())
    {
        return Some(place);
    }
    let mut name = frame;
    while let Some(rest) = name.strip_prefix("async ") {
        name = rest;
    }
    NAME_PLACES.iter().find(|(prefix, _)| name.starts_with(prefix)).map(|(_, place)| *place)
}

/// The lines of `text`, as `str::lines` gives them (each ended by `\n` or `\r\n`, the last
/// perhaps by neither), found with memchr: std's line search costs more than the reading of a
/// short line.
fn lines_of(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let line = match memchr::memchr(b'\n', rest.as_bytes()) {
            Some(end) => {
                let line = &rest[..end];
                rest = &rest[end + 1..];
                line.strip_suffix('\r').unwrap_or(line)
            }
            None => std::mem::take(&mut rest),
        };
        Some(line)
    })
}

/// Where `pattern` (which starts with an ASCII byte) first is in `text`, as `str::find` says,
/// found by looking for its first byte with memchr: std sets up a Two-Way searcher on each
/// call, which costs more than searching a frame's line.
fn find(text: &str, pattern: &str) -> Option<usize> {
    let (first, bytes) = (pattern.as_bytes()[0], text.as_bytes());
    debug_assert!(first.is_ascii(), "{pattern:?} starts with an ASCII byte");
    memchr::memchr_iter(first, bytes).find(|&at| bytes[at..].starts_with(pattern.as_bytes()))
}

/// `text.split_once(pattern)`, by `find`.
fn split_once<'a>(text: &'a str, pattern: &str) -> Option<(&'a str, &'a str)> {
    find(text, pattern).map(|at| (&text[..at], &text[at + pattern.len()..]))
}

/// `line.trim_start()`, without its look-ups in Unicode's table of spaces while the
/// line starts with ASCII ones (as every line of a trace seen does).
fn trim_start(line: &str) -> &str {
    let t = line.trim_ascii_start();
    // Vertical tab is Unicode's space but not ASCII's; a non-ASCII character may be a space.
    match t.as_bytes().first() {
        Some(&b) if !b.is_ascii() || b == 0x0B => t.trim_start(),
        _ => t,
    }
}

/// `line.trim_end()`, likewise.
fn trim_end(line: &str) -> &str {
    let t = line.trim_ascii_end();
    match t.as_bytes().last() {
        Some(&b) if !b.is_ascii() || b == 0x0B => t.trim_end(),
        _ => t,
    }
}

/// `line.trim()`, likewise.
fn trim(line: &str) -> &str {
    trim_end(trim_start(line))
}

/// The trace's runtime, from markers only it prints.
#[derive(Clone, Copy, PartialEq)]
enum Runtime {
    Python,
    Go,
    Rust,
    /// Java, Kotlin, Node and .NET: the exception first, `at …` frames after.
    AtFrames,
}

/// Frames and exceptions as they are read.
#[derive(Default)]
struct Reading {
    frames: Vec<String>,
    library: Vec<(&'static str, usize)>,
    more: usize,
    exceptions: Vec<String>,
    causes: Vec<String>,
    goroutines: usize,
}

impl Reading {
    /// Counts a library frame by place, or keeps an own frame as `shown` says.
    fn frame(&mut self, raw: &str, shown: impl FnOnce() -> String) {
        match library_place(raw) {
            Some(place) => match self.library.iter_mut().find(|(p, _)| *p == place) {
                Some((_, n)) => *n += 1,
                None => self.library.push((place, 1)),
            },
            None => self.frames.push(shown()),
        }
    }

    fn any_frames(&self) -> bool {
        !self.frames.is_empty() || !self.library.is_empty()
    }
}

/// What `collapse` looks for in a whole text to tell its runtime, each with a searcher built once:
/// `str::contains` builds one on each call, and finding no exception group in the 4 KB trace of
/// `benches/engine.rs` cost about 2,800 instructions with it.
struct RuntimeMarks {
    python: memchr::memmem::Finder<'static>,
    rust_thread: memchr::memmem::Finder<'static>,
    rust_panic: memchr::memmem::Finder<'static>,
    goroutine: memchr::memmem::Finder<'static>,
    go_file: memchr::memmem::Finder<'static>,
    exception_group: memchr::memmem::Finder<'static>,
}

static RUNTIME_MARKS: std::sync::LazyLock<RuntimeMarks> = std::sync::LazyLock::new(|| RuntimeMarks {
    python: memchr::memmem::Finder::new("Traceback (most recent call last):"),
    rust_thread: memchr::memmem::Finder::new("thread '"),
    rust_panic: memchr::memmem::Finder::new(" panicked at "),
    goroutine: memchr::memmem::Finder::new("goroutine "),
    go_file: memchr::memmem::Finder::new(".go:"),
    exception_group: memchr::memmem::Finder::new("Exception Group Traceback"),
});

/// The longest frame shown, in characters.
const FRAME_CHARS: usize = 160;

/// Collapses `text` if it holds a stack trace; `None` otherwise. At most
/// `max_frames` own frames are kept, innermost first.
pub fn collapse(text: &str, max_frames: usize) -> Option<Collapsed> {
    // A text of one line is not a trace.
    memchr::memchr(b'\n', text.as_bytes())?;
    let (marks, has) = (&*RUNTIME_MARKS, |mark: &memchr::memmem::Finder<'_>| mark.find(text.as_bytes()).is_some());
    let runtime = if has(&marks.python) {
        Runtime::Python
    } else if has(&marks.rust_thread) && has(&marks.rust_panic) {
        Runtime::Rust
    } else if has(&marks.goroutine) && has(&marks.go_file) {
        Runtime::Go
    } else {
        Runtime::AtFrames
    };
    let mut r = Reading::default();
    let grouped = runtime == Runtime::Python && has(&marks.exception_group);
    // Counting the newlines first (one vector pass) spares the growing Vec its reallocations.
    let mut lines: Vec<&str> = Vec::with_capacity(memchr::memchr_iter(b'\n', text.as_bytes()).count() + 1);
    if grouped {
        lines.extend(lines_of(text).filter_map(ungroup));
    } else {
        lines.extend(lines_of(text));
    }
    match runtime {
        Runtime::Python => read_python(&lines, &mut r),
        Runtime::Go => read_go(&lines, &mut r),
        Runtime::Rust => read_rust(&lines, &mut r),
        Runtime::AtFrames => read_at_frames(&lines, &mut r),
    }
    // A Rust panic without RUST_BACKTRACE has no frames, but its location is in the panic line.
    if (!r.any_frames() && runtime != Runtime::Rust) || r.exceptions.is_empty() {
        return None;
    }
    let (exception, cause) = if grouped {
        // An exception group is raised last but printed first; its first sub-exception is the cause.
        let at = r.exceptions.iter().position(|e| python_type(e).ends_with("Group")).unwrap_or(0);
        let group = r.exceptions.remove(at);
        r.frames.reverse();
        (group, r.exceptions.into_iter().next())
    } else if runtime == Runtime::Python {
        // Python prints the newest exception last and the root of the chain first.
        let last = r.exceptions.pop().expect("not empty");
        let first = r.exceptions.into_iter().next().filter(|f| *f != last);
        r.frames.reverse();
        (last, first)
    } else {
        (r.exceptions.swap_remove(0), r.causes.pop())
    };
    let own_total = r.frames.len();
    r.frames.truncate(max_frames);
    Some(Collapsed {
        exception: tidy_exception(&exception),
        cause,
        more_frames: own_total - r.frames.len() + r.more,
        own_frames: r
            .frames
            .into_iter()
            .map(|f| crate::compact::redact_and_cut(&short_paths(&f), FRAME_CHARS))
            .collect(),
        library: r.library,
        other_goroutines: r.goroutines.saturating_sub(1),
    })
}

/// `File "path", line N, in function` frames; the exception is the first
/// unindented line after each traceback's frames.
fn read_python(lines: &[&str], r: &mut Reading) {
    let mut after_frames = false;
    // An exception's message may go on over the lines after it (pydantic lists each field's
    // error there), up to a blank line; they are joined on.
    let mut message_goes_on = false;
    for line in lines {
        let t = trim_start(line);
        if let Some(rest) = t.strip_prefix("File \"") {
            if let Some((path, rest)) = split_once(rest, "\", line ") {
                let (number, function) = number_and_function(rest);
                r.frame(path, || concat(&[path, ":", number, " in ", function.trim()]));
                after_frames = true;
            }
            message_goes_on = false;
            continue;
        }
        let header = t.starts_with("Traceback (most recent call last)")
            || t.starts_with("Exception Group Traceback (most recent call last)")
            || CHAIN_SEPARATORS.iter().any(|s| t.starts_with(s));
        if t.is_empty() || header {
            (after_frames, message_goes_on) = (false, false);
            continue;
        }
        if message_goes_on {
            let exception = r.exceptions.last_mut().expect("a message goes on after its exception");
            if exception.len() < MESSAGE_LINES_BYTES && !DOCS_POINTERS.iter().any(|p| t.starts_with(p)) {
                exception.push(' ');
                exception.push_str(t.trim_end());
            }
            continue;
        }
        if line.starts_with([' ', '\t']) {
            continue;
        }
        if after_frames {
            r.exceptions.push(t.trim_end().to_string());
            (after_frames, message_goes_on) = (false, true);
        }
    }
}

/// `540, in send` (what follows `", line ` in a Python frame) → `("540", "send")`; a
/// frame without `, in ` has the function `?`.
fn number_and_function(rest: &str) -> (&str, &str) {
    // The number's digits hold no comma, so a `, in ` right after them is the first one.
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    match rest[digits..].strip_prefix(", in ") {
        Some(function) => (&rest[..digits], function),
        None => split_once(rest, ", in ").unwrap_or((rest, "?")),
    }
}

/// How the lines between the exceptions of a Python chain begin (`The above exception was the direct
/// cause of the following exception:`, `During handling of the above exception, another exception
/// occurred:`). The classifier reads a chain's causes by them too.
pub(crate) const CHAIN_SEPARATORS: [&str; 2] =
    ["The above exception was the direct cause", "During handling of the above exception"];

/// Lines after an exception's message that only say where to read more: left out of its message
/// (pydantic's, SQLAlchemy's, LangChain's in Python and in TypeScript).
pub(crate) const DOCS_POINTERS: [&str; 5] = [
    "For further information visit ",
    "For more information check: ",
    "(Background on this error at: ",
    "For troubleshooting, visit: ",
    "Troubleshooting URL: ",
];

/// How long an exception's message may grow with the lines after it, in bytes (a snippet shows 200 characters).
const MESSAGE_LINES_BYTES: usize = 1024;

/// A line of a Python exception group with its box drawing taken off (`  | `
/// before each line, deeper for nested groups); `None` for a border line
/// (`+-+---- 1 ----`, `+------`).
fn ungroup(line: &str) -> Option<&str> {
    let mut rest = line;
    loop {
        let t = rest.trim_start();
        if let Some(after) = t.strip_prefix('|') {
            rest = after.strip_prefix(' ').unwrap_or(after);
        } else if let Some(after) = t.strip_prefix('+') {
            if after.is_empty() || after.starts_with('-') {
                return None;
            }
            rest = after.strip_prefix(' ').unwrap_or(after);
        } else {
            return Some(rest);
        }
    }
}

/// The exception type of a Python exception line: `ExceptionGroup` of `ExceptionGroup: …`.
fn python_type(line: &str) -> &str {
    line.split_once(':').map_or(line, |(t, _)| t).trim()
}

/// Go: `panic: …` (or the log line before the first goroutine), then per
/// goroutine a function line and a tab-indented `path.go:N +0x…` line; only
/// the first goroutine (the one that panicked) is read, the others counted.
fn read_go(lines: &[&str], r: &mut Reading) {
    let mut function: Option<&str> = None;
    let mut headline: Option<&str> = None;
    for line in lines {
        let t = trim(line);
        if t.starts_with("goroutine ") && t.ends_with(':') {
            r.goroutines += 1;
            continue;
        }
        if r.goroutines == 0 {
            if t.starts_with("panic: ") || t.starts_with("fatal error: ") {
                r.exceptions.push(t.to_string());
            } else if headline.is_none() && !t.is_empty() && !t.starts_with('[') {
                headline = Some(t);
            }
            continue;
        }
        if r.goroutines > 1 || t.is_empty() {
            continue;
        }
        if line.starts_with('\t') && find(t, ".go:").is_some() {
            let path = find(t, " +0x").map_or(t, |end| &t[..end]);
            let name = function.take().unwrap_or("");
            let shown = || {
                if name.is_empty() {
                    path.to_string()
                } else {
                    concat(&[name, " (", path, ")"])
                }
            };
            // The Go standard library is told by its path; without GOROOT in it, by its package.
            if library_place(path).is_none() && !name.is_empty() && go_std_package(name) {
                r.frame("runtime.", shown);
            } else {
                r.frame(path, shown);
            }
        } else if !line.starts_with([' ', '\t']) && !t.starts_with("created by ") {
            // `pkg.(*T).Method(0x0, {…})`: the arguments are noise.
            function = Some(t.rfind('(').map_or(t, |i| &t[..i]));
        }
    }
    if r.exceptions.is_empty() {
        r.exceptions.extend(headline.map(str::to_string));
    }
}

/// A Go function of the standard library: its import path's first element has no dot
/// (`net/http.(*Client).do`, `runtime.gopanic`) and it is not `main`.
fn go_std_package(function: &str) -> bool {
    let path = function.split(['(', '.']).next().unwrap_or("");
    let first = function.split('/').next().unwrap_or("");
    path != "main" && !first.contains('.') || function.starts_with("runtime.")
}

/// Rust: `thread 'x' panicked at path:line:col:` with the message on the next
/// lines (joined on), then `N: function` frames with an optional `at path` line.
fn read_rust(lines: &[&str], r: &mut Reading) {
    let mut i = 0;
    while i < lines.len() {
        let t = trim(lines[i]);
        // `thread 'main' panicked at`, or since Rust 1.91 `thread 'main' (6636) panicked at`.
        if t.starts_with("thread '") && t.contains(" panicked at ") {
            let mut exception = t.to_string();
            // Rust 1.73+ puts the message on the lines after the location.
            while let Some(next) = lines.get(i + 1).map(|l| trim(l)) {
                if next.is_empty() || next.starts_with("note:") || next.starts_with("stack backtrace:") {
                    break;
                }
                exception.push(' ');
                exception.push_str(next);
                i += 1;
            }
            r.exceptions.push(exception);
        } else if let Some(function) = rust_frame(t) {
            let at = lines.get(i + 1).and_then(|l| trim(l).strip_prefix("at "));
            if at.is_some() {
                i += 1;
            }
            match at {
                // A frame with a path is told by it; one without, by its crate.
                Some(path) if library_place(path).is_some() => r.frame(path, String::new),
                Some(path) => r.frame(function, || concat(&[function, " (", path, ")"])),
                None => r.frame(function, || function.to_string()),
            }
        }
        i += 1;
    }
}

/// `12: app::run` → `app::run`.
fn rust_frame(t: &str) -> Option<&str> {
    let (number, function) = split_once(t, ": ")?;
    (!number.is_empty() && number.bytes().all(|b| b.is_ascii_digit())).then_some(function.trim())
}

/// Java, Kotlin, Node, .NET: the exception is the last unindented line before
/// the first `at …` frame; causes are `Caused by:`, ` ---> ` and `cause:` lines.
fn read_at_frames(lines: &[&str], r: &mut Reading) {
    let mut candidate: Option<&str> = None;
    for line in lines {
        let t = trim(line);
        // Jackson ends its messages with ` at [Source: …; line: 1, column: 33]`: not a frame.
        if let Some(frame) = t.strip_prefix("at ").filter(|f| !f.starts_with('[')) {
            if r.exceptions.is_empty() {
                r.exceptions.extend(candidate.map(str::to_string));
            }
            // Java's `at java.base/…`, Node's `at fn (path:line:col)`, .NET's `at N.M() in path:line 3`.
            r.frame(frame, || frame.trim_end_matches(" {").to_string());
        } else if let Some(rest) = t.strip_prefix("... ").and_then(|s| s.strip_suffix(" more")) {
            r.more += rest.parse::<usize>().unwrap_or(0);
        } else if let Some(cause) = t
            .strip_prefix("Caused by: ")
            .or_else(|| t.strip_prefix("---> "))
            .or_else(|| t.strip_prefix("[cause]: "))
            .or_else(|| t.strip_prefix("cause: "))
        {
            r.causes.push(cause.trim_end_matches(" {").to_string());
        } else if !t.is_empty() && !line.starts_with([' ', '\t']) && r.exceptions.is_empty() {
            candidate = Some(t);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A file of the trace set (real formats; see tests/data/traces/README.md).
    fn data(name: &str) -> String {
        std::fs::read_to_string(format!("{}/tests/data/traces/written/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
    }

    #[test]
    fn python_chained_keeps_the_last_exception_its_cause_and_own_frames_innermost_first() {
        let c = collapse(&data("01-py-httpx.txt"), 2).unwrap();
        assert_eq!(c.exception, "httpx.ConnectError: [Errno 111] Connection refused");
        assert_eq!(c.cause.as_deref(), Some("httpcore.ConnectError: [Errno 111] Connection refused"));
        assert_eq!(c.own_frames, vec!["search.py:41 in run"]);
        assert_eq!(c.library, vec![("site-packages", 5)]);
        // The cause says nothing the exception does not: left out of the line.
        assert_eq!(c.location(), "search.py:41 in run ← … 5 frames in site-packages …");
    }

    #[test]
    fn python_during_handling_and_custom_exception_types() {
        let c = collapse(&data("06-py-timeout.txt"), 2).unwrap();
        assert!(c.exception.starts_with("requests.exceptions.ReadTimeout: HTTPSConnectionPool"), "{}", c.exception);
        assert_eq!(c.cause.as_deref(), Some("TimeoutError: The read operation timed out"));
        assert!(
            c.location().starts_with("caused by TimeoutError: The read operation timed out ← fetch.py:22 in fetch"),
            "{}",
            c.location()
        );
        let custom = "Traceback (most recent call last):\n  File \"/app/run.py\", line 3, in <module>\n    main()\napp.errors.ToolFailed: the index is empty\n";
        assert_eq!(collapse(custom, 2).unwrap().exception, "app.errors.ToolFailed: the index is empty");
        let c = collapse(&data("09-py-cancel.txt"), 2).unwrap();
        assert_eq!(c.exception, "asyncio.exceptions.CancelledError");
        assert_eq!(c.library, vec![("the Python standard library", 1)]);
    }

    #[test]
    fn python_messages_go_on_over_the_lines_after_the_exception_without_pointers_to_docs() {
        // pydantic 2.10 and SQLAlchemy 2.0, as they print (tests/data/traces/py-pydantic-validation.txt,
        // py-sqlalchemy-integrity.txt).
        let text = "Traceback (most recent call last):\n  File \"/app/tools.py\", line 87, in parse\n    return SearchArgs(**args)\npydantic_core._pydantic_core.ValidationError: 1 validation error for SearchArgs\nquery\n  Input should be a valid string [type=string_type, input_value=None, input_type=NoneType]\n    For further information visit https://errors.pydantic.dev/2.10/v/string_type\n";
        assert_eq!(
            collapse(text, 1).unwrap().exception,
            "pydantic_core._pydantic_core.ValidationError: 1 validation error for SearchArgs query Input should be a valid string [type=string_type, input_value=None, input_type=NoneType]"
        );
        let sql = "Traceback (most recent call last):\n  File \"<sqlalchemy generated warned() wrapper for sqlalchemy.orm.session.Session._flush>\", line 2, in _flush\n  File \"/app/db.py\", line 5, in add\nsqlalchemy.exc.IntegrityError: (sqlite3.IntegrityError) UNIQUE constraint failed: users.email\n[SQL: INSERT INTO users (email) VALUES (?)]\n(Background on this error at: https://sqlalche.me/e/21/gkpj)\n\nDuring handling of the above exception, another exception occurred:\n\nTraceback (most recent call last):\n  File \"/app/run.py\", line 9, in main\nRuntimeError: could not add the user\n";
        let c = collapse(sql, 2).unwrap();
        // The chain's lines do not run into the message; code a library generated is a library's.
        assert_eq!(c.exception, "RuntimeError: could not add the user");
        assert_eq!(
            c.cause.as_deref(),
            Some("sqlalchemy.exc.IntegrityError: (sqlite3.IntegrityError) UNIQUE constraint failed: users.email [SQL: INSERT INTO users (email) VALUES (?)]")
        );
        assert_eq!(c.library, vec![("generated code", 1)]);
    }

    #[test]
    fn java_keeps_the_first_line_the_root_cause_and_counts_more() {
        let c = collapse(&data("11-java-conn.txt"), 3).unwrap();
        assert!(c.exception.starts_with("org.springframework.web.client.ResourceAccessException: I/O error"));
        assert_eq!(c.cause.as_deref(), Some("java.net.ConnectException: Connection refused"));
        assert_eq!(c.own_frames, vec!["com.acme.agent.tools.InventoryTool.items(InventoryTool.java:44)"]);
        assert_eq!(c.library, vec![("libraries", 2), ("the JDK", 2)]);
        assert_eq!(c.more_frames, 12);
        let kotlin = collapse(&data("30-kotlin-illegalstate.txt"), 2).unwrap();
        // `Exception in thread "main"` is the JVM's, not the error's.
        assert!(kotlin.exception.starts_with("java.lang.IllegalStateException"), "{}", kotlin.exception);
        assert_eq!(kotlin.own_frames[0], "com.acme.agent.tools.WeatherTool.parse(WeatherTool.kt:51)");
        assert_eq!((kotlin.more_frames, kotlin.library_frames()), (1, 2));
    }

    #[test]
    fn go_panics_read_the_panicking_goroutine_only() {
        let c = collapse(&data("13-go-panic.txt"), 2).unwrap();
        assert_eq!(c.exception, "panic: runtime error: invalid memory address or nil pointer dereference");
        assert_eq!(c.own_frames, vec!["main.(*Tool).Run (main.go:42)", "main.main (main.go:17)"]);
        // The second frame is in the same file: its line is enough.
        assert!(c.location().starts_with("main.(*Tool).Run (main.go:42) ← main.main (:17)"), "{}", c.location());
        let dump = "panic: send on closed channel\n\ngoroutine 12 [running]:\nmain.(*Pool).submit(0xc000010000, {0x0, 0x0})\n\t/app/internal/pool/pool.go:57 +0x65\nnet/http.(*conn).serve(0xc0001a2000)\n\t/usr/local/go/src/net/http/server.go:2092 +0x5d4\ncreated by net/http.(*Server).Serve in goroutine 1\n\t/usr/local/go/src/net/http/server.go:3285 +0x4b4\n\ngoroutine 1 [IO wait]:\ninternal/poll.runtime_pollWait(0x7f, 0x72)\n\t/usr/local/go/src/runtime/netpoll.go:345 +0x85\n\ngoroutine 7 [select]:\ngithub.com/acme/agent/worker.loop()\n\t/go/pkg/mod/github.com/acme/agent@v1.2.0/worker/loop.go:30 +0x1a\nexit status 2\n";
        let c = collapse(dump, 3).unwrap();
        assert_eq!(c.exception, "panic: send on closed channel");
        // /app/internal/… is the caller's own code, not Go's internal packages.
        assert_eq!(c.own_frames, vec!["main.(*Pool).submit (pool.go:57)"]);
        assert_eq!(c.library, vec![("the Go standard library", 2)]);
        assert_eq!(c.other_goroutines, 2);
        assert!(
            c.location().ends_with(" ← … 2 frames in the Go standard library, 2 other goroutines …"),
            "{}",
            c.location()
        );
        let logged = collapse(&data("14-go-dial.txt"), 2).unwrap();
        // The log line's date and time are left out.
        assert!(logged.exception.starts_with("search failed: Post"), "{}", logged.exception);
    }

    #[test]
    fn node_frames_and_causes() {
        let c = collapse(&data("16-node-fetch.txt"), 2).unwrap();
        assert_eq!(c.exception, "TypeError: fetch failed");
        assert_eq!(c.cause.as_deref(), Some("ConnectTimeoutError: Connect Timeout Error"));
        assert_eq!(c.own_frames, vec!["async searchTool (search.ts:21:15)"]);
        assert_eq!(c.library, vec![("Node internals", 3)]);
        let c = collapse(&data("15-node-econn.txt"), 2).unwrap();
        assert_eq!(c.exception, "Error: connect ECONNREFUSED 127.0.0.1:5432");
        assert_eq!(c.library, vec![("Node internals", 1)]);
        let modules = "Error: Request failed with status code 500\n    at settle (/app/node_modules/axios/lib/core/settle.js:19:12)\n    at Client.run (src/client.js:10:3)\n";
        assert_eq!(
            collapse(modules, 2).unwrap().location(),
            "Client.run (client.js:10:3) ← … 1 frame in node_modules …"
        );
    }

    #[test]
    fn rust_panics_join_the_message_and_pair_frames_with_their_paths() {
        let c = collapse(&data("18-rust-panic.txt"), 2).unwrap();
        assert!(c.exception.starts_with("thread 'tokio-runtime-worker' panicked at src/tools/index.rs:88:14: called `Result::unwrap()` on an `Err` value"), "{}", c.exception);
        assert_eq!(c.own_frames, vec!["indexer::tools::index::build (index.rs:88:14)"]);
        assert_eq!(c.library, vec![("the Rust standard library", 3)]);
        let full = "thread 'main' panicked at src/main.rs:42:10:\ncalled `Option::unwrap()` on a `None` value\nstack backtrace:\n   0: rust_begin_unwind\n             at /rustc/59807616e/library/std/src/panicking.rs:689:5\n   1: serde_json::de::from_str\n             at /root/.cargo/registry/src/index.crates.io-6f17d22bba15001f/serde_json-1.0.1/src/de.rs:2676:5\n   2: app::run\n             at ./src/main.rs:42:10\nnote: Some details are omitted, run with `RUST_BACKTRACE=full` for a verbose backtrace.\n";
        let c = collapse(full, 3).unwrap();
        assert_eq!(c.exception, "panicked at src/main.rs:42:10: called `Option::unwrap()` on a `None` value");
        assert_eq!(c.own_frames, vec!["app::run (main.rs:42:10)"]);
        assert_eq!(c.library, vec![("the Rust standard library", 1), ("crates", 1)]);
    }

    #[test]
    fn dotnet_inner_exceptions_and_frames() {
        let c = collapse(&data("29-dotnet-httprequest.txt"), 2).unwrap();
        assert_eq!(
            c.exception,
            "Unhandled exception. System.Net.Http.HttpRequestException: Connection refused (inventory:8080)"
        );
        assert_eq!(c.cause.as_deref(), Some("System.Net.Sockets.SocketException (111): Connection refused"));
        assert_eq!(
            c.own_frames,
            vec![
                "Acme.Agent.Tools.InventoryTool.ListAsync(String sku) in InventoryTool.cs:line 37",
                "Acme.Agent.Program.Main(String[] args) in Program.cs:line 12"
            ]
        );
        assert_eq!(c.library, vec![(".NET", 3)]);
    }

    #[test]
    fn own_frames_are_capped_and_the_rest_counted() {
        let c = collapse(&data("11-java-conn.txt"), 0).unwrap();
        assert!(c.own_frames.is_empty());
        assert_eq!(c.more_frames, 13);
    }

    #[test]
    fn plain_text_is_not_a_trace() {
        assert_eq!(collapse("npm ERR! code ELIFECYCLE\nnpm ERR! errno 1", 3), None);
        assert_eq!(collapse("", 3), None);
        assert_eq!(collapse("ValueError: bad input at position 3", 3), None);
        assert_eq!(collapse(&data("24-pip-install-nomatch.txt"), 3), None);
        assert_eq!(collapse(&data("25-cargo-build-error.txt"), 3), None);
    }

    #[test]
    fn paths_in_frames_keep_their_file_name() {
        assert_eq!(
            short_paths("loadConfig (file:///work/app/src/tools/config.mjs:28:10)"),
            "loadConfig (config.mjs:28:10)"
        );
        assert_eq!(short_paths("/srv/app/agent/search.py:41 in run"), "search.py:41 in run");
        assert_eq!(short_paths("Failures.main(Failures.java:77)"), "Failures.main(Failures.java:77)");
        assert_eq!(short_paths("app::run (src/main.rs:4:9)"), "app::run (main.rs:4:9)");
    }

    #[test]
    fn a_frame_in_the_file_of_the_frame_before_it_gives_only_its_line() {
        let c = Collapsed {
            exception: "ValueError: bad".into(),
            cause: None,
            own_frames: vec!["run.py:4 in fetch".into(), "run.py:9 in gather".into(), "main.py:2 in <module>".into()],
            library: vec![("site-packages", 3), ("the Python standard library", 1)],
            more_frames: 2,
            other_goroutines: 0,
        };
        assert_eq!(
            c.location(),
            "run.py:4 in fetch ← :9 in gather ← main.py:2 in <module> ← … 2 more frames, 3 in site-packages, 1 in the Python standard library …"
        );
        assert_eq!(file_of("Failures.main(Failures.java:75)"), Some(14..27));
        assert_eq!(file_of("JSON.parse (<anonymous>)"), None);
    }

    #[test]
    fn what_only_the_runtime_needed_is_taken_off_the_exception() {
        assert_eq!(
            tidy_exception("Exception in thread \"main\" java.lang.NullPointerException"),
            "java.lang.NullPointerException"
        );
        assert_eq!(
            tidy_exception("thread 'main' (5064) panicked at src/main.rs:1:2: boom"),
            "panicked at src/main.rs:1:2: boom"
        );
        assert_eq!(tidy_exception("thread 'w-3' (71) panicked at a.rs:1:2: x"), "thread 'w-3' panicked at a.rs:1:2: x");
        assert_eq!(tidy_exception("2026/11/24 03:36:20 http: panic serving"), "http: panic serving");
        // Anything else is left as it is.
        assert_eq!(tidy_exception("2026-11-24 boom"), "2026-11-24 boom");
        assert_eq!(tidy_exception("thread 'x' is fine"), "thread 'x' is fine");
    }

    #[test]
    fn python_exception_groups_show_the_group_and_its_first_sub_exception() {
        let text = "  + Exception Group Traceback (most recent call last):\n  |   File \"/srv/agent/run.py\", line 9, in gather\n  |     async with asyncio.TaskGroup() as tg:\n  | ExceptionGroup: unhandled errors in a TaskGroup (2 sub-exceptions)\n  +-+---------------- 1 ----------------\n    | Traceback (most recent call last):\n    |   File \"/srv/agent/run.py\", line 4, in fetch\n    |     raise ConnectionError(name)\n    | ConnectionError: news\n    +---------------- 2 ----------------\n    | Traceback (most recent call last):\n    |   File \"/srv/agent/run.py\", line 4, in fetch\n    |     raise ConnectionError(name)\n    | ConnectionError: weather\n    +------------------------------------";
        let c = collapse(text, 2).unwrap();
        assert_eq!(c.exception, "ExceptionGroup: unhandled errors in a TaskGroup (2 sub-exceptions)");
        assert_eq!(c.cause.as_deref(), Some("ConnectionError: news"));
        assert_eq!(c.own_frames[0], "run.py:4 in fetch");
    }

    #[test]
    fn rust_panics_with_thread_ids_and_without_a_backtrace() {
        // rustc 1.95, RUST_BACKTRACE=0: the location is in the panic line, and there are no frames.
        let text = "\nthread 'main' (30658) panicked at src/main.rs:6:18:\ncalled `Result::unwrap()` on an `Err` value: ParseIntError { kind: InvalidDigit }\nnote: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n";
        let c = collapse(text, 2).unwrap();
        assert_eq!(
            c.exception,
            "panicked at src/main.rs:6:18: called `Result::unwrap()` on an `Err` value: ParseIntError { kind: InvalidDigit }"
        );
        assert!(c.own_frames.is_empty() && c.library.is_empty());
        assert!(collapse(
            &std::fs::read_to_string(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/data/traces/rust-thread-backtrace.txt"
            ))
            .unwrap(),
            2
        )
        .unwrap()
        .exception
        .starts_with("thread 'worker-3' panicked at "));
    }

    #[test]
    fn jackson_source_locations_are_not_frames() {
        let text = "Exception in thread \"main\" com.fasterxml.jackson.core.JsonParseException: Unexpected character ('}')\n at [Source: REDACTED; line: 1, column: 33]\n\tat com.fasterxml.jackson.core.JsonParser._constructError(JsonParser.java:2596)\n\tat Agent.main(Agent.java:12)";
        let c = collapse(text, 2).unwrap();
        assert_eq!(c.own_frames, vec!["Agent.main(Agent.java:12)"]);
        assert_eq!(c.library, vec![("libraries", 1)]);
    }

    /// Every real trace of the trace set, whole.
    fn real_traces() -> Vec<String> {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/traces");
        let mut traces = Vec::new();
        for folder in [root.to_string(), format!("{root}/written")] {
            for entry in std::fs::read_dir(folder).unwrap() {
                let path = entry.unwrap().path();
                if path.extension().is_some_and(|e| e == "txt") {
                    traces.push(std::fs::read_to_string(path).unwrap());
                }
            }
        }
        assert!(traces.len() >= 80, "{} traces", traces.len());
        traces
    }

    /// `library_place` as it read before its marks had searchers built once: `str::contains`
    /// for each mark in turn.
    fn library_place_by_contains(frame: &str) -> Option<&'static str> {
        if let Some((_, place)) = PATH_PLACES.iter().find(|(mark, _)| frame.contains(mark)) {
            return Some(place);
        }
        let name = frame.trim_start_matches("async ");
        NAME_PLACES.iter().find(|(prefix, _)| name.starts_with(prefix)).map(|(_, place)| *place)
    }

    /// The patterns `find` and `split_once` are given in this module.
    const PATTERNS: [&str; 5] = ["\", line ", ", in ", ": ", ".go:", " +0x"];

    #[test]
    fn the_line_and_text_helpers_read_real_traces_as_std_does() {
        for trace in real_traces() {
            assert_eq!(lines_of(&trace).collect::<Vec<_>>(), trace.lines().collect::<Vec<_>>());
            for line in trace.lines() {
                assert_eq!(library_place(line), library_place_by_contains(line), "{line:?}");
                assert_eq!(
                    (trim(line), trim_start(line), trim_end(line)),
                    (line.trim(), line.trim_start(), line.trim_end())
                );
                for pattern in PATTERNS {
                    assert_eq!(split_once(line, pattern), line.split_once(pattern), "{line:?} {pattern:?}");
                }
                if let Some((_, rest)) = line.split_once("\", line ") {
                    assert_eq!(number_and_function(rest), rest.split_once(", in ").unwrap_or((rest, "?")));
                }
            }
        }
    }

    /// Texts made of the pieces the helpers look for and what could confuse them.
    fn pieces() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            Just("\n"),
            Just("\r\n"),
            Just("\r"),
            Just(" "),
            Just("\t"),
            Just("\u{b}"),
            Just("\u{c}"),
            Just("\u{85}"),
            Just("\u{a0}"),
            Just("\u{3000}"),
            Just("é"),
            Just("12"),
            Just(","),
            Just(", in "),
            Just("\""),
            Just("\", line "),
            Just(": "),
            Just(".go:"),
            Just(" +0x"),
            Just("async "),
            Just("site-packages"),
            Just("/lib/python3"),
            Just("node_modules"),
            Just("java."),
            Just("std::"),
            Just("/app/run.py"),
            Just("x"),
        ];
        proptest::collection::vec(piece, 0..16).prop_map(|p| p.concat())
    }

    proptest! {
        #[test]
        fn the_line_and_text_helpers_give_what_std_gives(text in pieces()) {
            prop_assert_eq!(lines_of(&text).collect::<Vec<_>>(), text.lines().collect::<Vec<_>>());
            prop_assert_eq!(trim(&text), text.trim());
            prop_assert_eq!(trim_start(&text), text.trim_start());
            prop_assert_eq!(trim_end(&text), text.trim_end());
            prop_assert_eq!(library_place(&text), library_place_by_contains(&text));
            prop_assert_eq!(number_and_function(&text), text.split_once(", in ").unwrap_or((&text, "?")));
            for pattern in PATTERNS {
                prop_assert_eq!(find(&text, pattern), text.find(pattern));
                prop_assert_eq!(split_once(&text, pattern), text.split_once(pattern));
            }
        }
    }
}
