//! The tools nearest to a name: what an unknown tool's verdict suggests instead,
//! from the tools its session declared.

use std::fmt::Write;

/// How many characters of a name the nearest-tool ranking compares. The major
/// LLM APIs allow tool names of at most 64; comparing whole 256-byte names made
/// one unknown-tool outcome of a session with 1,000 tools take 100 ms, holding its
/// shard of sessions all along.
const NEAREST_CHARS: usize = 64;

/// The tools nearest to `wanted`, nearest first (by name on a tie): by edit distance,
/// case-insensitive, on their first `NEAREST_CHARS` characters, as written or with their
/// words in order (`search_web` for `web_search`), whichever is nearer.
pub fn nearest_tools<'a>(wanted: &str, tools: &'a [String]) -> Vec<&'a str> {
    let (wanted, mut row) = (Folded::new(wanted), Vec::new());
    let mut scored: Vec<(usize, &str)> =
        tools.iter().map(|t| (wanted.distance(&Folded::new(t), &mut row), t.as_str())).collect();
    scored.sort();
    scored.into_iter().map(|(_, t)| t).collect()
}

/// Whether `tool` is near enough to `wanted` to ask "did you mean": a few edits away (a
/// third of the name, at least two), or sharing a word of three letters or more with it.
fn near_enough(wanted: &str, tool: &str) -> bool {
    let (a, b) = (Folded::new(wanted), Folded::new(tool));
    a.distance(&b, &mut Vec::new()) <= (a.chars.len() / 3).max(2)
        || a.words().any(|w| w.len() >= 3 && b.words().any(|v| v == w))
}

/// A name as the nearest-tool ranking compares it: lower case, cut, and with its words sorted.
struct Folded {
    chars: Vec<char>,
    sorted: Vec<char>,
}

impl Folded {
    fn new(name: &str) -> Folded {
        let chars: Vec<char> = name.chars().flat_map(char::to_lowercase).take(NEAREST_CHARS).collect();
        let mut words: Vec<&[char]> = chars.split(|c| !c.is_alphanumeric()).filter(|w| !w.is_empty()).collect();
        words.sort();
        let sorted = words.join(&'_');
        Folded { chars, sorted }
    }

    fn words(&self) -> impl Iterator<Item = &[char]> {
        self.chars.split(|c| !c.is_alphanumeric()).filter(|w| !w.is_empty())
    }

    /// The edit distance to `other`, as written or with the words sorted (`row` is scratch space).
    fn distance(&self, other: &Folded, row: &mut Vec<usize>) -> usize {
        let plain = edit_distance(&self.chars, &other.chars, row);
        if plain == 0 || self.sorted == self.chars && other.sorted == other.chars {
            return plain;
        }
        plain.min(edit_distance(&self.sorted, &other.sorted, row))
    }
}

/// Levenshtein distance, in one row (`row` is scratch space, kept between calls).
fn edit_distance(a: &[char], b: &[char], row: &mut Vec<usize>) -> usize {
    row.clear();
    row.extend(0..=b.len());
    for (i, ca) in a.iter().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

/// The suggestion for an unknown tool: the session's tools, nearest first.
pub(crate) fn unknown_tool_suggestion(wanted: &str, tools: &[String], fallback: &str) -> String {
    if tools.is_empty() {
        return fallback.to_string();
    }
    let nearest = nearest_tools(wanted, tools);
    let listed: Vec<String> = nearest.iter().take(20).map(|t| format!("`{t}`")).collect();
    let more = nearest.len().saturating_sub(20);
    // Name one only if it is near: pointing a browser's intent at `write_file` misleads.
    let mut text =
        if near_enough(wanted, nearest[0]) { format!("Did you mean `{}`? ", nearest[0]) } else { String::new() };
    let _ = write!(text, "Use one of the available tools: {}", listed.join(", "));
    if more > 0 {
        let _ = write!(text, " and {more} more");
    }
    text.push('.');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_tools_by_edit_distance() {
        let tools = vec!["read_file".to_string(), "search_web".to_string(), "search_docs".to_string()];
        assert_eq!(nearest_tools("serch_web", &tools)[0], "search_web");
        assert_eq!(nearest_tools("SEARCH_DOC", &tools)[0], "search_docs");
        let chars = |s: &str| s.chars().collect::<Vec<_>>();
        assert_eq!(edit_distance(&chars("kitten"), &chars("sitting"), &mut Vec::new()), 3);
    }

    #[test]
    fn nearest_tools_compare_the_first_64_characters_of_a_name() {
        // Past them, names count as equal: the one nearer only in its tail is not ranked first.
        let head = "t".repeat(NEAREST_CHARS);
        let tools = vec![format!("{head}_zzzzzzzzzzzz"), format!("{head}_search"), "search".to_string()];
        assert_eq!(nearest_tools(&format!("{head}_search"), &tools), [&tools[1], &tools[0], &tools[2]]);
        assert_eq!(nearest_tools(&format!("{head}_zzzzzzzzzzzz"), &tools)[0], tools[1], "sorted by name on a tie");
    }
}
