//! Snippet templates (minijinja) and token counting (tiktoken), both optional:
//! the built-in snippet format needs neither, so the default path stays fast.

use minijinja::Environment;
use std::collections::BTreeMap;

/// The variables each template may use.
pub const VARIABLES: [(&str, &[&str]); 3] = [
    ("error_block", &["tool", "type", "message", "suggestion", "count", "location"]),
    ("summary", &["total", "parts"]),
    ("instruction", &["nudge", "advice", "action", "kind"]),
];

/// The built-in templates, equal to the built-in format (shown in docs and used as examples).
pub const BUILT_IN: [(&str, &str); 3] = [
    (
        "error_block",
        "<error>\ntool: {{ tool }}\ntype: {{ type }}\nmessage: {{ message }}{% if count > 1 %} (×{{ count }}){% endif %}\n{% if location %}where: {{ location }}\n{% endif %}{% if suggestion %}suggestion: {{ suggestion }}\n{% endif %}</error>",
    ),
    ("summary", "<error_summary>{{ total }} earlier unresolved error{% if total != 1 %}s{% endif %} not shown ({{ parts }})</error_summary>"),
    ("instruction", "{{ nudge }} {{ advice }}"),
];

/// Why a template was refused.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum TemplateError {
    /// Not a known template name.
    #[error("snippet.templates.{0}: no such template (known: error_block, summary, instruction)")]
    Unknown(String),
    /// It does not compile.
    #[error("snippet.templates.{name}: {message}")]
    Syntax {
        /// The template.
        name: String,
        /// minijinja's message.
        message: String,
    },
    /// It uses a variable it is not given.
    #[error("snippet.templates.{name}: unknown variable `{variable}` (allowed: {allowed})")]
    Variable {
        /// The template.
        name: String,
        /// The variable.
        variable: String,
        /// What it may use.
        allowed: String,
    },
}

/// User templates, compiled once at load.
#[derive(Clone, Debug)]
pub struct Templates {
    env: Environment<'static>,
    names: Vec<String>,
}

impl Templates {
    /// Compiles and checks the user's templates; `None` when there are none.
    pub fn build(sources: &BTreeMap<String, String>) -> Result<Option<Templates>, TemplateError> {
        if sources.is_empty() {
            return Ok(None);
        }
        let mut env = Environment::new();
        env.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
        for (name, source) in sources {
            let allowed = VARIABLES
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, vars)| *vars)
                .ok_or_else(|| TemplateError::Unknown(name.clone()))?;
            env.add_template_owned(name.clone(), source.clone())
                .map_err(|e| TemplateError::Syntax { name: name.clone(), message: e.to_string() })?;
            let template = env.get_template(name).expect("just added");
            let mut used: Vec<String> = template.undeclared_variables(false).into_iter().collect();
            used.sort();
            if let Some(variable) = used.into_iter().find(|v| !allowed.contains(&v.as_str())) {
                return Err(TemplateError::Variable { name: name.clone(), variable, allowed: allowed.join(", ") });
            }
        }
        Ok(Some(Templates { env, names: sources.keys().cloned().collect() }))
    }

    /// Renders `name` if the user gave it; `None` means: use the built-in format.
    pub fn render(&self, name: &str, ctx: minijinja::Value) -> Option<String> {
        if !self.names.iter().any(|n| n == name) {
            return None;
        }
        // Checked at load; a render error (a filter on a wrong type) falls back to the built-in format.
        self.env.get_template(name).ok()?.render(ctx).ok()
    }
}

/// The encodings a budget may count with.
pub const ENCODINGS: [&str; 4] = ["o200k_base", "cl100k_base", "p50k_base", "r50k_base"];

/// A tokenizer, loaded only when a token budget is configured.
#[derive(Clone, Copy)]
pub struct Tokenizer {
    bpe: &'static tiktoken_rs::CoreBPE,
    name: &'static str,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tokenizer({})", self.name)
    }
}

impl Tokenizer {
    /// The encoding by name: o200k_base, cl100k_base, p50k_base or r50k_base.
    pub fn by_name(name: &str) -> Option<Tokenizer> {
        let (bpe, name) = match name {
            "o200k_base" => (tiktoken_rs::o200k_base_singleton(), "o200k_base"),
            "cl100k_base" => (tiktoken_rs::cl100k_base_singleton(), "cl100k_base"),
            "p50k_base" => (tiktoken_rs::p50k_base_singleton(), "p50k_base"),
            "r50k_base" => (tiktoken_rs::r50k_base_singleton(), "r50k_base"),
            _ => return None,
        };
        Some(Tokenizer { bpe, name })
    }

    /// Tokens in `text`.
    pub fn count(&self, text: &str) -> u32 {
        self.bpe.encode_with_special_tokens(text).len() as u32
    }

    /// The encoding's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// `text` and its token count, cut (with an ellipsis) to the longest head
    /// that fits in `budget` tokens: the last resort when dropping parts was not enough.
    /// A block the cut leaves open (`<error …>`, `<error_summary>`) is closed, within
    /// the budget: a prompt should not hold half a tag.
    pub fn fit(&self, text: &str, budget: u32) -> (String, u32) {
        let tokens = self.count(text);
        if tokens <= budget {
            return (text.to_string(), tokens);
        }
        // Binary search on characters: fewer characters never need more tokens
        // than the budget allows once a prefix fits, and 0 characters always fit.
        let (mut lo, mut hi) = (0usize, text.chars().count());
        let mut best = (String::new(), 0);
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            let mut candidate = crate::compact::cut(text, mid);
            if let Some(tag) = open_tag(&candidate) {
                candidate = format!("{candidate}\n</{tag}>");
            }
            let n = self.count(&candidate);
            if n <= budget {
                best = (candidate, n);
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        best
    }
}

/// The name of the block left open at the end of `text`, if one is: the last
/// `<error` or `<error_summary` tag without its closing tag after it. Tool text
/// cannot open one: its `<error` is defused before it reaches a block.
fn open_tag(text: &str) -> Option<&str> {
    let start = text.rfind("<error")?;
    let name = text[start + 1..].split([' ', '>']).next()?;
    if !matches!(name, "error" | "error_summary") {
        return None;
    }
    (!text[start..].contains(&format!("</{name}>"))).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(name: &str, source: &str) -> Result<Option<Templates>, TemplateError> {
        Templates::build(&BTreeMap::from([(name.to_string(), source.to_string())]))
    }

    #[test]
    fn templates_are_checked_at_load() {
        assert!(matches!(one("error_block", "{{ tool }"), Err(TemplateError::Syntax { .. })));
        let err = one("error_block", "{{ tool }} {{ secret_sauce }}").unwrap_err();
        assert!(err.to_string().contains("unknown variable `secret_sauce`"), "{err}");
        assert!(matches!(one("footer", "x"), Err(TemplateError::Unknown(_))));
        let t = one("instruction", "NOTE: {{ advice }}").unwrap().unwrap();
        assert_eq!(
            t.render("instruction", minijinja::context! { advice => "fix it", nudge => "", action => "", kind => "" })
                .unwrap(),
            "NOTE: fix it"
        );
        assert_eq!(t.render("error_block", minijinja::context! {}), None);
    }

    #[test]
    fn the_built_in_templates_compile_with_their_variables() {
        let all: BTreeMap<String, String> = BUILT_IN.iter().map(|(n, s)| (n.to_string(), s.to_string())).collect();
        assert!(Templates::build(&all).unwrap().is_some());
    }

    #[test]
    fn tokens_are_counted_with_a_real_encoding() {
        let t = Tokenizer::by_name("cl100k_base").unwrap();
        assert_eq!(t.count("hello world"), 2);
        assert!(Tokenizer::by_name("nope").is_none());
        let text = "connection refused by upstream inventory service at 10.0.0.7:8080 ".repeat(20);
        let (fitted, n) = t.fit(&text, 30);
        assert!((25..=30).contains(&n), "{n}: {fitted}");
        assert_eq!(t.count(&fitted), n);
        assert!(fitted.ends_with('…'));
        assert_eq!(t.fit("short", 30), ("short".to_string(), 1));
    }

    #[test]
    fn a_cut_closes_the_block_it_leaves_open_within_the_budget() {
        let t = Tokenizer::by_name("cl100k_base").unwrap();
        let block = format!(
            "<error tool=\"search\" type=\"timeout\">\n{}\nsuggestion: Try a smaller input.\n</error>",
            "Read timed out after 30 seconds while waiting for the upstream index. ".repeat(4)
        );
        let (fitted, n) = t.fit(&block, 25);
        assert!(n <= 25 && t.count(&fitted) == n, "{n}: {fitted}");
        assert!(fitted.starts_with("<error tool=") && fitted.ends_with("…\n</error>"), "{fitted}");
        let two = format!("<error_summary>3 earlier unresolved errors not shown (timeout: 3)</error_summary>\n{block}");
        let (fitted, _) = t.fit(&two, 12);
        assert!(fitted.ends_with("…\n</error_summary>"), "{fitted}");
        let (fitted, _) = t.fit(&two, 40);
        assert!(fitted.contains("</error_summary>\n<error tool=") && fitted.ends_with("…\n</error>"), "{fitted}");
        // Text without blocks (a user's template) is cut as it is.
        assert!(t.fit(&"plain words here ".repeat(20), 10).0.ends_with('…'));
    }
}
