//! Stack traces collapsed to what an LLM needs: the exception (and its root
//! cause), and the innermost frames of the caller's own code; library frames
//! are counted, not shown. Python (with chained exceptions), Java/Kotlin,
//! Go panics, Node/V8, Rust backtraces and .NET are recognised.

use regex::Regex;
use std::sync::LazyLock;

/// Paths and names that mark a frame as library code, not the caller's.
const LIBRARY_MARKS: [&str; 23] = [
    "System.",
    "site-packages",
    "dist-packages",
    "/lib/python3",
    "<frozen ",
    "node_modules",
    "node:internal",
    "internal/",
    "/usr/local/go/src",
    "/usr/lib/go",
    "/go/pkg/mod",
    "runtime/",
    "/rustc/",
    ".cargo/registry",
    "java.base/",
    "jdk.internal",
    "sun.",
    "java.",
    "kotlin.",
    "org.springframework",
    "okhttp3.",
    "System.Private.CoreLib",
    "Microsoft.",
];

/// A frame line of any of the languages: what to show of it and the text that
/// says whether it is library code. Plain string tests, no regex captures: a
/// long trace has hundreds of these lines.
fn frame(line: &str, go_function: &mut Option<String>) -> Option<(String, String)> {
    let t = line.trim();
    if let Some(rest) = t.strip_prefix("File \"") {
        // Python: File "path", line N, in func
        let (path, rest) = rest.split_once("\", line ")?;
        let (number, func) = rest.split_once(", in ")?;
        return Some((format!("{path}:{number} in {func}"), path.to_string()));
    }
    if let Some(at) = t.strip_prefix("at ") {
        // Java, Kotlin, Node, .NET; Rust's `at ./src/main.rs:42:10`.
        return Some((at.to_string(), at.to_string()));
    }
    if t.starts_with('/') && t.contains(".go:") {
        // Go: the file line under its function line.
        let location = t.split_whitespace().next()?;
        let shown = match go_function.take() {
            Some(func) => format!("{func} ({location})"),
            None => location.to_string(),
        };
        return Some((shown.clone(), shown));
    }
    let digits = t.find(|c: char| !c.is_ascii_digit())?;
    if digits > 0 && t[digits..].starts_with(": ") {
        // Rust backtrace: `  3: crate::module::function`.
        let name = t[digits + 2..].to_string();
        return Some((name.clone(), name));
    }
    None
}

/// A line that names an exception: `Type: message`, `Type`, `panic: ...`, `thread '...' panicked at ...`.
static EXCEPTION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:[A-Za-z_][\w.$]*(?:Error|Exception|Interrupt|Exit|Timeout|Failure|Fault|Warning)\b(?::.*)?|Caused by: .+|panic: .+|thread '.*' panicked at .+|Unhandled exception\. .+|Exception in thread .+|[A-Z]\w*Error: .+)$")
        .expect("the exception pattern is tested")
});

/// A collapsed trace.
#[derive(Clone, Debug, PartialEq)]
pub struct Collapsed {
    /// The exception line (the last one raised, for chained Python exceptions).
    pub exception: String,
    /// The root cause when it differs (Java `Caused by:`, Python's first exception of a chain).
    pub cause: Option<String>,
    /// Innermost frames of the caller's own code, innermost first.
    pub own_frames: Vec<String>,
    /// Library frames left out.
    pub library_frames: usize,
    /// Own frames left out.
    pub more_frames: usize,
}

impl Collapsed {
    /// One short line for a snippet: where it happened and what was left out.
    pub fn location(&self) -> String {
        let mut parts: Vec<String> = self.own_frames.clone();
        if self.more_frames > 0 {
            parts.push(format!("… {} more frames …", self.more_frames));
        }
        if self.library_frames > 0 {
            parts.push(format!("… {} library frames …", self.library_frames));
        }
        parts.join(" ← ")
    }
}

/// Collapses `text` if it holds a stack trace; `None` otherwise.
pub fn collapse(text: &str, max_frames: usize) -> Option<Collapsed> {
    let lines: Vec<&str> = text.lines().collect();
    let python = text.contains("Traceback (most recent call last):");
    let go_trace = text.contains("goroutine ");
    let mut frames: Vec<String> = Vec::new();
    let mut library = 0;
    let mut exceptions: Vec<&str> = Vec::new();
    let mut go_function: Option<String> = None;
    for line in &lines {
        if let Some((shown, raw)) = frame(line, &mut go_function) {
            if LIBRARY_MARKS.iter().any(|m| raw.contains(m)) {
                library += 1;
            } else {
                frames.push(shown);
            }
            continue;
        }
        let trimmed = line.trim_end();
        if !trimmed.is_empty() && !trimmed.starts_with([' ', '\t']) && trimmed.contains([':', '.']) && EXCEPTION.is_match(trimmed) {
            exceptions.push(trimmed);
        } else if trimmed.ends_with(')') && trimmed.contains('(') && !trimmed.starts_with([' ', '\t']) && go_trace {
            // A Go function line: the file line that follows says where.
            go_function = Some(trimmed.to_string());
        }
    }
    if exceptions.is_empty() || (frames.is_empty() && library == 0) {
        return None;
    }
    // Python prints the newest exception last and its innermost frame last;
    // the others print the exception first and the innermost frame first.
    let (exception, cause) = if python {
        let last = exceptions[exceptions.len() - 1];
        let first = exceptions[0];
        (last, (first != last).then_some(first))
    } else {
        let first = exceptions[0];
        let root = exceptions.iter().rev().find(|e| e.starts_with("Caused by: ")).copied();
        (first, root.map(|r| r.trim_start_matches("Caused by: ")))
    };
    if python {
        frames.reverse();
    }
    let own_total = frames.len();
    frames.truncate(max_frames);
    Some(Collapsed {
        exception: exception.to_string(),
        cause: cause.map(str::to_string),
        more_frames: own_total - frames.len(),
        own_frames: frames,
        library_frames: library,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const PY_CHAINED: &str = "Traceback (most recent call last):\n  File \"/usr/local/lib/python3.11/site-packages/httpx/_transports/default.py\", line 69, in map_httpcore_exceptions\n    yield\n  File \"/usr/local/lib/python3.11/site-packages/httpcore/_sync/connection_pool.py\", line 216, in handle_request\n    raise exc from None\nhttpcore.ConnectError: [Errno 111] Connection refused\n\nThe above exception was the direct cause of the following exception:\n\nTraceback (most recent call last):\n  File \"/app/agent/tools/search.py\", line 41, in run\n    r = client.get(self.url)\n  File \"/app/agent/tools/http.py\", line 12, in get\n    return self.client.get(url)\n  File \"/usr/local/lib/python3.11/site-packages/httpx/_client.py\", line 1054, in get\n    return self.request(\nhttpx.ConnectError: [Errno 111] Connection refused\n";

    #[test]
    fn python_chained_keeps_the_last_exception_its_cause_and_own_frames_innermost_first() {
        let c = collapse(PY_CHAINED, 2).unwrap();
        assert_eq!(c.exception, "httpx.ConnectError: [Errno 111] Connection refused");
        assert_eq!(c.cause.as_deref(), Some("httpcore.ConnectError: [Errno 111] Connection refused"));
        assert_eq!(c.own_frames, vec!["/app/agent/tools/http.py:12 in get", "/app/agent/tools/search.py:41 in run"]);
        assert_eq!(c.library_frames, 3);
        assert!(c.location().contains("… 3 library frames …"));
    }

    #[test]
    fn java_keeps_the_first_line_and_the_root_cause() {
        let java = "org.springframework.web.client.ResourceAccessException: I/O error on GET request: Connection refused\n\tat org.springframework.web.client.RestTemplate.doExecute(RestTemplate.java:895)\n\tat com.acme.agent.tools.InventoryTool.items(InventoryTool.java:44)\nCaused by: java.net.ConnectException: Connection refused\n\tat java.base/sun.nio.ch.Net.pollConnect(Native Method)\n\t... 12 more\n";
        let c = collapse(java, 3).unwrap();
        assert!(c.exception.starts_with("org.springframework.web.client.ResourceAccessException"));
        assert_eq!(c.cause.as_deref(), Some("java.net.ConnectException: Connection refused"));
        assert_eq!(c.own_frames, vec!["com.acme.agent.tools.InventoryTool.items(InventoryTool.java:44)"]);
        assert_eq!(c.library_frames, 2);
    }

    #[test]
    fn go_node_and_rust() {
        let go = "panic: runtime error: invalid memory address or nil pointer dereference\n[signal SIGSEGV: segmentation violation]\n\ngoroutine 1 [running]:\nmain.(*Tool).Run(0x0)\n\t/src/cmd/tool/main.go:42 +0x1c\nruntime.main()\n\t/usr/local/go/src/runtime/proc.go:271 +0x29d\n";
        let c = collapse(go, 2).unwrap();
        assert!(c.exception.starts_with("panic: runtime error"));
        assert_eq!(c.own_frames, vec!["main.(*Tool).Run(0x0) (/src/cmd/tool/main.go:42)"]);
        let node = "TypeError: Cannot read properties of undefined (reading 'items')\n    at parseResults (/app/src/tools/search.ts:44:23)\n    at process.processTicksAndRejections (node:internal/process/task_queues:95:5)\n";
        let c = collapse(node, 2).unwrap();
        assert_eq!(c.own_frames, vec!["parseResults (/app/src/tools/search.ts:44:23)"]);
        assert_eq!(c.library_frames, 1);
        let rust = "thread 'main' panicked at src/main.rs:42:10:\ncalled `Option::unwrap()` on a `None` value\nstack backtrace:\n   0: rust_begin_unwind\n             at /rustc/59807616e/library/std/src/panicking.rs:689:5\n   1: app::run\n             at ./src/main.rs:42:10\n";
        let c = collapse(rust, 3).unwrap();
        assert!(c.exception.starts_with("thread 'main' panicked"));
        assert!(c.own_frames.iter().any(|f| f.contains("./src/main.rs:42:10")), "{:?}", c.own_frames);
    }

    #[test]
    fn plain_text_is_not_a_trace() {
        assert_eq!(collapse("npm ERR! code ELIFECYCLE\nnpm ERR! errno 1", 3), None);
        assert_eq!(collapse("", 3), None);
    }
}
