//! Classification: which category a failure belongs to, and which rule said so.
//!
//! Rules are data (`src/defaults/rules.toml`, compiled into the binary, plus
//! the user's `[[rules]]`). Every rule that matches gets a score from the
//! signals it names, and the highest score wins, so a structured signal
//! (outcome kind, error code, exception type, gRPC code, HTTP status, exit
//! code) beats words in the message, and a rule that names a signal *and*
//! words beats the bare signal (a 400 that says "prompt is too long").
//! Equal scores go to the rule listed first; user rules are listed before the
//! defaults.

use crate::message_patterns::MessagePatterns;
use crate::model::{Action, Category, Outcome, OutcomeKind};
use crate::named_codes::{named_codes, NamedCodes};
use arcstr::ArcStr;
use globset::{Glob, GlobMatcher};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::collections::HashMap;

/// The default rules, shipped inside the binary.
pub const DEFAULT_RULES: &str = include_str!("defaults/rules.toml");

/// Weights of each signal in a rule's score (see the module comment).
pub mod weight {
    /// The outcome kind the agent reported (unknown tool, cancelled, ...).
    pub const KIND: i32 = 100;
    /// An errno name or provider error code.
    pub const CODE: i32 = 80;
    /// An exception type.
    pub const EXCEPTION: i32 = 60;
    /// A gRPC status code.
    pub const GRPC_CODE: i32 = 50;
    /// One HTTP status.
    pub const HTTP_STATUS: i32 = 40;
    /// A range of HTTP statuses: less specific than one status.
    pub const HTTP_RANGE: i32 = 38;
    /// A process exit code.
    pub const EXIT_CODE: i32 = 40;
    /// Words in the message.
    pub const MESSAGE: i32 = 10;
    /// A tool name glob.
    pub const TOOL: i32 = 5;
}

/// An HTTP status or an inclusive range written `"500-599"`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum StatusSpec {
    /// One status.
    One(u16),
    /// A range, as text.
    Range(String),
}

/// A gRPC code by number or by name (`"UNAVAILABLE"`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum GrpcCodeSpec {
    /// By number.
    Number(i32),
    /// By name.
    Name(String),
}

/// A rule as written in a rules file.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleSpec {
    /// Unique id, named in every verdict the rule decides.
    pub id: String,
    /// Outcome kinds that match.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kind: Vec<OutcomeKind>,
    /// Error codes that match (case-insensitive).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub code: Vec<String>,
    /// Exception types that match: a full dotted name or its last part.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exception: Vec<String>,
    /// gRPC codes that match.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub grpc_code: Vec<GrpcCodeSpec>,
    /// HTTP statuses or ranges that match.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub http_status: Vec<StatusSpec>,
    /// Exit codes that match.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exit_code: Vec<i32>,
    /// Tool name globs that match.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool: Vec<String>,
    /// Regular expressions (case-insensitive) of which one must match the message or detail.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub message: Vec<String>,
    /// The category the rule yields.
    pub category: Option<Category>,
    /// Overrides the category's retryable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retryable: Option<bool>,
    /// Overrides the category's action.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<Action>,
    /// Overrides the category's suggestion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suggestion: Option<String>,
    /// Replaces the computed score.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
}

/// A rules file: `[[rules]]` tables.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RulesFile {
    /// The rules, in order.
    #[serde(default)]
    pub rules: Vec<RuleSpec>,
}

/// Why a rule set could not be built.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum RuleError {
    /// A rule has no id.
    #[error("rule #{index}: `id` is empty")]
    MissingId {
        /// Position in the list, from 1.
        index: usize,
    },
    /// Two rules share an id.
    #[error("rule `{id}`: the id is used twice")]
    DuplicateId {
        /// The id.
        id: String,
    },
    /// A field has a bad value.
    #[error("rule `{id}`: `{field}` = {value:?}: {problem}")]
    BadField {
        /// The rule.
        id: String,
        /// The field.
        field: &'static str,
        /// The bad value.
        value: String,
        /// What is wrong.
        problem: String,
    },
    /// The default rules file does not parse (a build defect).
    #[error("the built-in rules do not parse: {0}")]
    Defaults(String),
}

/// Per-category defaults the classifier needs: retryable and suggestion.
#[derive(Clone, Debug, PartialEq)]
pub struct CategoryDefaults {
    /// Whether failures of the category may succeed on retry.
    pub retryable: bool,
    /// The suggestion shown when the rule has none (shared with every classification that shows it).
    pub suggestion: ArcStr,
}

#[derive(Clone, Debug)]
enum StatusMatch {
    One(u16),
    Range(u16, u16),
}

#[derive(Clone, Debug)]
struct Rule {
    /// Shared with every classification it decides, which copies no text.
    id: ArcStr,
    kind: Vec<OutcomeKind>,
    code: Vec<String>,
    exception: Vec<String>,
    grpc_code: Vec<i32>,
    http_status: Vec<StatusMatch>,
    exit_code: Vec<i32>,
    tool: Vec<GlobMatcher>,
    has_message: bool,
    category: Category,
    retryable: Option<bool>,
    action: Option<Action>,
    suggestion: Option<ArcStr>,
    priority: Option<i32>,
}

/// The signals of an outcome that rules look at, prepared once.
#[derive(Clone, Debug, Serialize)]
pub struct Signals {
    /// The outcome kind.
    pub kind: Option<OutcomeKind>,
    /// The error code, lowercased.
    pub code: String,
    /// The exception type the rules read: the outcome's, or one its trace or its one-line message
    /// gives (see `Classifier::exception_read`).
    pub exception_type: String,
    /// gRPC code: the outcome's, or one its message names (`rpc error: code = Unavailable`).
    pub grpc_code: Option<i32>,
    /// HTTP status.
    pub http_status: Option<u16>,
    /// Exit code.
    pub exit_code: Option<i32>,
    /// The tool.
    pub tool: String,
    /// How many bytes of text the message rules saw.
    pub text_bytes: usize,
}

/// One rule that matched, for `--explain`.
#[derive(Clone, Debug, Serialize)]
pub struct RuleMatch {
    /// The rule id.
    pub rule: String,
    /// Its category.
    pub category: Category,
    /// Its score.
    pub score: i32,
}

/// What `classify --explain` prints.
#[derive(Clone, Debug, Serialize)]
pub struct Explanation {
    /// The signals seen.
    pub signals: Signals,
    /// Every rule that matched, best first.
    pub matched: Vec<RuleMatch>,
    /// The rule that won.
    pub winner: String,
}

/// The compiled rule set.
#[derive(Debug)]
pub struct Classifier {
    rules: Vec<Rule>,
    messages: MessagePatterns,
    /// Which rule each pattern in `messages` belongs to.
    pattern_rule: Vec<usize>,
    /// Rules indexed by the first structured signal they name, so a classification
    /// looks only at rules that can match (message-only rules come from `messages`).
    index: SignalIndex,
    categories: BTreeMap<Category, CategoryDefaults>,
    text_limit: usize,
    /// The most a rule that reads the message and no structured signal scores (see
    /// [`Classifier::words_may_decide`]).
    words_alone_max: i32,
    /// [`NO_MATCH_RULE`], shared like the rules' ids.
    no_match: ArcStr,
}

/// Rules by the value of the first structured signal each names.
#[derive(Debug, Default)]
struct SignalIndex {
    kind: HashMap<OutcomeKind, Vec<usize>>,
    code: HashMap<String, Vec<usize>>,
    exception: HashMap<String, Vec<usize>>,
    grpc_code: HashMap<i32, Vec<usize>>,
    http_status: HashMap<u16, Vec<usize>>,
    http_range: Vec<(u16, u16, usize)>,
    exit_code: HashMap<i32, Vec<usize>>,
}

impl SignalIndex {
    fn add(&mut self, i: usize, rule: &Rule) {
        fn push<K: std::hash::Hash + Eq>(map: &mut HashMap<K, Vec<usize>>, key: K, i: usize) {
            let list = map.entry(key).or_default();
            if list.last() != Some(&i) {
                list.push(i);
            }
        }
        if !rule.kind.is_empty() {
            rule.kind.iter().for_each(|k| push(&mut self.kind, *k, i));
        } else if !rule.code.is_empty() {
            rule.code.iter().for_each(|c| push(&mut self.code, c.to_ascii_lowercase(), i));
        } else if !rule.exception.is_empty() {
            rule.exception.iter().for_each(|e| push(&mut self.exception, e.clone(), i));
        } else if !rule.grpc_code.is_empty() {
            rule.grpc_code.iter().for_each(|g| push(&mut self.grpc_code, *g, i));
        } else if !rule.http_status.is_empty() {
            for m in &rule.http_status {
                match *m {
                    StatusMatch::One(s) => push(&mut self.http_status, s, i),
                    StatusMatch::Range(lo, hi) => self.http_range.push((lo, hi, i)),
                }
            }
        } else if !rule.exit_code.is_empty() {
            rule.exit_code.iter().for_each(|c| push(&mut self.exit_code, *c, i));
        }
        // Otherwise the rule names a message: it is a candidate when its pattern matches.
    }

    /// Rules whose first structured signal matches the outcome (may repeat a rule).
    /// True when some rule names this exception type (dotted, or its last part).
    fn knows(&self, exception: &str) -> bool {
        let last = exception.rsplit(['.', ':']).next().unwrap_or(exception);
        self.exception.contains_key(exception) || self.exception.contains_key(last)
    }

    /// Pushes every rule a signal of `o` names, each as (rule, false): not (yet) a message hit.
    fn candidates(&self, o: &Outcome, exception: &str, exception_last: &str, out: &mut Vec<(usize, bool)>) {
        let mut extend = |list: Option<&Vec<usize>>| out.extend(list.into_iter().flatten().map(|&i| (i, false)));
        if let Some(kind) = o.kind {
            extend(self.kind.get(&kind));
        }
        let code = o.code.trim();
        if !code.is_empty() {
            extend(self.code.get(&code.to_ascii_lowercase()));
        }
        if !exception.is_empty() {
            extend(self.exception.get(exception));
            if exception_last != exception {
                extend(self.exception.get(exception_last));
            }
        }
        if let Some(g) = o.grpc_code {
            extend(self.grpc_code.get(&g));
        }
        if let Some(status) = o.http_status {
            extend(self.http_status.get(&status));
        }
        if let Some(c) = o.exit_code {
            extend(self.exit_code.get(&c));
        }
        // Status ranges last: `extend` holds `out` until its last call above.
        if let Some(status) = o.http_status {
            let ranges = self.http_range.iter().filter(|(lo, hi, _)| (*lo..=*hi).contains(&status));
            out.extend(ranges.map(|&(_, _, i)| (i, false)));
        }
    }
}

/// The rule id used when nothing matches.
pub const NO_MATCH_RULE: &str = "default.unknown";

impl Classifier {
    /// Compiles `user` rules (which override defaults of the same id, or come first) over `defaults`.
    pub fn build(
        defaults: &[RuleSpec],
        user: &[RuleSpec],
        categories: BTreeMap<Category, CategoryDefaults>,
        text_limit: usize,
    ) -> Result<Self, RuleError> {
        let merged = merge_rules(defaults, user)?;
        let mut rules = Vec::with_capacity(merged.len());
        for spec in &merged {
            for pattern in &spec.message {
                // Check each pattern alone so the error names the rule and the pattern.
                MessagePatterns::check(pattern, 1 << 20).map_err(|e| bad(&spec.id, "message", pattern, e))?;
            }
            rules.push(compile_rule(spec)?);
        }
        let (patterns, pattern_rule) = message_patterns(&merged);
        let messages = MessagePatterns::new(&patterns, 64 << 20).map_err(|problem| RuleError::BadField {
            id: "(all)".into(),
            field: "message",
            value: format!("{} patterns", patterns.len()),
            problem,
        })?;
        let mut index = SignalIndex::default();
        for (i, rule) in rules.iter().enumerate() {
            index.add(i, rule);
        }
        let words_alone_max = rules
            .iter()
            .filter(|r| r.has_message && !r.names_a_signal())
            .map(|r| r.priority.unwrap_or(weight::MESSAGE + if r.tool.is_empty() { 0 } else { weight::TOOL }))
            .max()
            .unwrap_or(i32::MIN);
        Ok(Classifier {
            rules,
            messages,
            pattern_rule,
            index,
            categories,
            text_limit,
            words_alone_max,
            no_match: NO_MATCH_RULE.into(),
        })
    }

    /// The classifier with only the built-in rules and the given category defaults.
    pub fn with_defaults(categories: BTreeMap<Category, CategoryDefaults>) -> Result<Self, RuleError> {
        Self::build(&default_rules()?, &[], categories, 1024)
    }

    /// How many rules are loaded.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// True when no rules are loaded.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Classifies a failed outcome.
    pub fn classify(&self, outcome: &Outcome) -> crate::model::Classification {
        let (best, _) = self.best(outcome, false);
        self.classification(best)
    }

    /// Classifies and says why.
    pub fn explain(&self, outcome: &Outcome) -> (crate::model::Classification, Explanation) {
        let (best, matched) = self.best(outcome, true);
        let mut matched = matched;
        matched.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(&b.0)));
        let explanation = Explanation {
            signals: self.signals(outcome),
            matched: matched
                .iter()
                .map(|(i, _, score)| RuleMatch {
                    rule: self.rules[*i].id.to_string(),
                    category: self.rules[*i].category,
                    score: *score,
                })
                .collect(),
            winner: best.map_or_else(|| NO_MATCH_RULE.into(), |i| self.rules[i].id.to_string()),
        };
        (self.classification(best), explanation)
    }

    fn classification(&self, best: Option<usize>) -> crate::model::Classification {
        let (rule_id, category, retryable, action, suggestion) = match best {
            Some(i) => {
                let r = &self.rules[i];
                (&r.id, r.category, r.retryable, r.action, r.suggestion.as_ref())
            }
            None => (&self.no_match, Category::Unknown, None, None, None),
        };
        let defaults = self.categories.get(&category);
        crate::model::Classification {
            category,
            retryable: retryable.unwrap_or_else(|| defaults.is_some_and(|d| d.retryable)),
            rule: rule_id.clone(),
            suggestion: suggestion.or(defaults.map(|d| &d.suggestion)).cloned().unwrap_or_default(),
            action,
        }
    }

    /// The winning rule index and, when `collect`, every match as (index, category, score).
    fn best(&self, outcome: &Outcome, collect: bool) -> (Option<usize>, Vec<(usize, Category, i32)>) {
        let causes = self.causes_read(outcome);
        let exception = self.exception_read(outcome, &causes);
        let exception_last = exception.rsplit(['.', ':']).next().unwrap_or(exception);
        let mut candidates = Vec::with_capacity(16);
        let named = named_in_message(outcome);
        let derived_grpc = named.grpc.filter(|_| outcome.grpc_code.is_none());
        let derived_code = named.code.filter(|_| outcome.code.trim().is_empty());
        let derived_status = named.http_status.filter(|_| outcome.http_status.is_none());
        let with_code;
        let outcome = if derived_grpc.is_some() || derived_code.is_some() || derived_status.is_some() {
            with_code = Outcome {
                grpc_code: derived_grpc.or(outcome.grpc_code),
                http_status: derived_status.or(outcome.http_status),
                code: derived_code.map_or_else(|| outcome.code.clone(), str::to_string),
                ..outcome.clone()
            };
            &with_code
        } else {
            outcome
        };
        self.index.candidates(outcome, exception, exception_last, &mut candidates);
        if !self.messages.is_empty()
            && (collect || self.words_may_decide(outcome, exception, exception_last, &candidates))
        {
            // Each pattern that matched, once, as its rule's hit on the message.
            let text = match_text(outcome, self.text_limit, &causes);
            self.messages.matches_into(text.as_bytes(), &mut candidates, |p| (self.pattern_rule[p], true));
        }
        // One entry per rule, marked a message hit if any of its entries was.
        candidates.sort_unstable();
        candidates.dedup_by(|later, kept| {
            let same = later.0 == kept.0;
            kept.1 |= same && later.1;
            same
        });
        let mut best: Option<(usize, i32)> = None;
        let mut all = Vec::new();
        for (i, hit) in candidates {
            let rule = &self.rules[i];
            let Some(score) = rule.score(outcome, exception, exception_last, hit) else {
                continue;
            };
            if collect {
                all.push((i, rule.category, score));
            }
            // Candidates come in rule order, so on equal scores the earlier rule stays.
            if best.is_none_or(|(_, s)| score > s) {
                best = Some((i, score));
            }
        }
        (best.map(|(i, _)| i), all)
    }

    /// Whether a rule that reads the message could win for this outcome: unless a rule its structured
    /// signals match alone (a `candidates` entry that reads no words) scores more than any rule with
    /// words could (one that reads words and no structured signal, or a candidate whose signals all
    /// match), the words may decide and the message is scanned. A typed SDK error with a status and
    /// no rule that reads its words beside them is decided without reading its message.
    fn words_may_decide(
        &self,
        outcome: &Outcome,
        exception: &str,
        exception_last: &str,
        candidates: &[(usize, bool)],
    ) -> bool {
        let (mut signals_alone, mut with_words) = (None::<i32>, self.words_alone_max);
        for &(i, _) in candidates {
            let rule = &self.rules[i];
            let score = rule.score(outcome, exception, exception_last, rule.has_message);
            match (rule.has_message, score) {
                (false, Some(s)) => signals_alone = Some(signals_alone.map_or(s, |best| best.max(s))),
                (true, Some(s)) => with_words = with_words.max(s),
                (_, None) => {}
            }
        }
        signals_alone.is_none_or(|s| s <= with_words)
    }

    /// The trace's Python causes ([`python_causes`]), read once for the text and the type, when
    /// either reads them: the trace is longer than the text the rules see whole, or there is a
    /// trace and the outcome names no type a rule knows (asked second: the lookup costs more).
    fn causes_read<'a>(&self, outcome: &'a Outcome) -> Vec<&'a str> {
        let trace = trace_text(outcome);
        match trace.len() > self.text_limit || (!trace.is_empty() && !self.index.knows(outcome.exception_type.trim())) {
            true => python_causes(prefix(trace, TRACE_HEAD)),
            false => Vec::new(),
        }
    }

    /// The exception type the rules read. From a trace: the first type some rule knows (a root
    /// cause may be too generic to), when the outcome names no type, or one no rule knows (a wrapper
    /// such as Go's `exec.ExitError` around a process that printed its own exception); after those,
    /// the type a one-line message begins with. Else the outcome's own.
    ///
    /// `causes` are the trace's Python causes ([`Classifier::causes_read`]).
    fn exception_read<'a>(&self, outcome: &'a Outcome, causes: &[&'a str]) -> &'a str {
        let named = outcome.exception_type.trim();
        let derived = if named.is_empty() {
            let mut names = exceptions_in_trace(trace_text(outcome), causes);
            names.extend(type_in_message(&outcome.message));
            names.iter().copied().find(|n| self.index.knows(n)).or(names.first().copied())
        } else if !self.index.knows(named) {
            let mut names =
                exceptions_in_trace(trace_text(outcome), causes).into_iter().chain(type_in_message(&outcome.message));
            names.find(|n| self.index.knows(n))
        } else {
            None
        };
        derived.unwrap_or(named)
    }

    fn signals(&self, outcome: &Outcome) -> Signals {
        let named = named_in_message(outcome);
        let causes = self.causes_read(outcome);
        Signals {
            kind: outcome.kind,
            code: match outcome.code.trim() {
                "" => named.code.unwrap_or_default().to_ascii_lowercase(),
                code => code.to_ascii_lowercase(),
            },
            exception_type: self.exception_read(outcome, &causes).to_string(),
            grpc_code: outcome.grpc_code.or(named.grpc),
            http_status: outcome.http_status.or(named.http_status),
            exit_code: outcome.exit_code,
            tool: outcome.tool.clone(),
            text_bytes: match_text(outcome, self.text_limit, &causes).len(),
        }
    }
}

impl Rule {
    /// True when it names a structured signal (a kind, code, exception type, gRPC code, HTTP status
    /// or exit code), as [`SignalIndex::add`] indexes it; else it reads words (and perhaps a tool).
    fn names_a_signal(&self) -> bool {
        !(self.kind.is_empty()
            && self.code.is_empty()
            && self.exception.is_empty()
            && self.grpc_code.is_empty()
            && self.http_status.is_empty()
            && self.exit_code.is_empty())
    }

    /// The rule's score when every signal it names matches, else `None`.
    fn score(&self, outcome: &Outcome, exception: &str, exception_last: &str, message_hit: bool) -> Option<i32> {
        let mut score = 0;
        if !self.kind.is_empty() {
            let kind = outcome.kind?;
            if !self.kind.contains(&kind) {
                return None;
            }
            score += weight::KIND;
        }
        if !self.code.is_empty() {
            let code = outcome.code.trim();
            if code.is_empty() || !self.code.iter().any(|c| c.eq_ignore_ascii_case(code)) {
                return None;
            }
            score += weight::CODE;
        }
        if !self.exception.is_empty() {
            if exception.is_empty() || !self.exception.iter().any(|e| e == exception || e == exception_last) {
                return None;
            }
            score += weight::EXCEPTION;
        }
        if !self.grpc_code.is_empty() {
            if !self.grpc_code.contains(&outcome.grpc_code?) {
                return None;
            }
            score += weight::GRPC_CODE;
        }
        if !self.http_status.is_empty() {
            let status = outcome.http_status?;
            let hit = self.http_status.iter().find_map(|m| match *m {
                StatusMatch::One(s) if s == status => Some(weight::HTTP_STATUS),
                StatusMatch::Range(lo, hi) if (lo..=hi).contains(&status) => Some(weight::HTTP_RANGE),
                _ => None,
            })?;
            score += hit;
        }
        if !self.exit_code.is_empty() {
            if !self.exit_code.contains(&outcome.exit_code?) {
                return None;
            }
            score += weight::EXIT_CODE;
        }
        if !self.tool.is_empty() {
            if !self.tool.iter().any(|g| g.is_match(&outcome.tool)) {
                return None;
            }
            score += weight::TOOL;
        }
        if self.has_message {
            if !message_hit {
                return None;
            }
            score += weight::MESSAGE;
        }
        Some(self.priority.unwrap_or(score))
    }
}

/// The exception types a stack trace names, for when the outcome did not say,
/// in the order to try them: a Java trace's `Caused by:` types innermost first
/// (the root cause is what can be acted on), then the exception itself: the
/// last `Name: message` line of a Python traceback, or the first such line of a
/// Java, Node or .NET trace (`Exception in thread "main" java.net.ConnectException`,
/// or Node's after the source line it quotes).
///
/// `causes` are `detail`'s Python causes ([`python_causes`]), read by the caller.
fn exceptions_in_trace<'a>(detail: &'a str, causes: &[&'a str]) -> Vec<&'a str> {
    if detail.is_empty() {
        return Vec::new();
    }
    let head = prefix(detail, TRACE_HEAD);
    let mut names = caused_by_types(head);
    names.reverse();
    let tail = suffix(detail, 2048);
    let own = tail
        .lines()
        .rev()
        .filter(|l| !l.trim().is_empty())
        .take(6)
        .find_map(type_named_by)
        .or_else(|| head.lines().take(8).find_map(type_named_by));
    names.extend(own);
    // A Python chain's earlier exceptions after the one raised last, the first raised first: they
    // decide only when no rule knows that one, as a wrapper's type seldom says what went wrong
    // (pydantic-ai's UnexpectedModelBehavior around the ValidationError of a tool's arguments,
    // tenacity's RetryError around the last attempt's ConnectError).
    names.extend(causes.iter().filter_map(|cause| type_named_by(first_line(cause))));
    names
}

/// How much of a trace's start is searched for its chain of causes.
const TRACE_HEAD: usize = 8192;

/// The longest a cause's text is read, its message's lines included (pydantic lists each field's error there).
const CAUSE_BYTES: usize = 256;

/// The exceptions a Python traceback printed before its last one, the first raised first: each
/// block before a `The above exception was the direct cause of the following exception:` or
/// `During handling of the above exception, another exception occurred:` line ends with its
/// exception, the first unindented line after its frames, and the lines its message goes on
/// over, up to a blank line. Each is at most [`CAUSE_BYTES`] long. Found by searching for the words
/// the two sentences share (one vector pass; most traces have neither), then reading back from each
/// a line at a time to its block's last frame.
fn python_causes(text: &str) -> Vec<&str> {
    static SHARED: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new("he above exception"));
    let mut causes = Vec::new();
    let mut start = 0;
    for at in SHARED.find_iter(text.as_bytes()) {
        let line_start = memchr::memrchr(b'\n', &text.as_bytes()[..at]).map_or(0, |n| n + 1);
        let line = &text[line_start..];
        let separator = crate::trace::CHAIN_SEPARATORS.iter().any(|s| line.starts_with(s));
        if !separator || line_start < start {
            continue;
        }
        causes.extend(block_exception(&text[start..line_start]));
        start = memchr::memchr(b'\n', line.as_bytes()).map_or(text.len(), |n| line_start + n + 1);
    }
    causes
}

/// How many lines back from a block's end its last frame is looked for; past them, its lines are
/// read from its start.
const CAUSE_LINES_BACK: usize = 64;

/// The exception one block of a Python traceback ends with (see [`python_causes`]).
fn block_exception(block: &str) -> Option<&str> {
    // After the last frame and its source lines (indented), or else from the block's start (a
    // block's frames and their lines are all indented: its first unindented line after its
    // `Traceback` header is its exception).
    let bytes = block.as_bytes();
    let mut end = bytes.len();
    let mut after_frames = block;
    for _ in 0..CAUSE_LINES_BACK {
        let line_start = memchr::memrchr(b'\n', &bytes[..end]).map_or(0, |n| n + 1);
        if block[line_start..end].starts_with("  File \"") {
            after_frames = &block[end..];
            break;
        }
        if line_start == 0 {
            break;
        }
        end = line_start - 1;
    }
    let mut at = 0;
    let start = after_frames.split_inclusive('\n').find_map(|line| {
        let here = at;
        at += line.len();
        let unindented = !line.starts_with([' ', '\t']) && !line.trim().is_empty();
        (unindented && !line.starts_with("Traceback (most recent call last)")).then_some(here)
    })?;
    let exception = prefix(&after_frames[start..], CAUSE_BYTES);
    // Up to a blank line (its few line breaks looked at, not every byte).
    let bytes = exception.as_bytes();
    let blank = memchr::memchr_iter(b'\n', bytes).find(|&n| bytes.get(n + 1) == Some(&b'\n'));
    Some(exception[..blank.unwrap_or(exception.len())].trim_end())
}

/// The first line of `text`.
fn first_line(text: &str) -> &str {
    text.split('\n').next().unwrap_or(text)
}

/// The types named by `text`'s `Caused by: Type: ...` lines (the words first on their line),
/// in order. Found by searching for the words (one vector pass; most traces have none)
/// rather than by trimming every line. The searcher is built once.
fn caused_by_types(text: &str) -> Vec<&str> {
    const CAUSED_BY: &str = "Caused by: ";
    static FINDER: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new(CAUSED_BY));
    FINDER
        .find_iter(text.as_bytes())
        .filter(|&at| text[..at].rsplit('\n').next().is_some_and(|before| before.trim().is_empty()))
        .filter_map(|at| {
            let rest = &text[at + CAUSED_BY.len()..];
            type_named_by(first_line(rest))
        })
        .collect()
}

/// The exception type a trace line starts with (`java.net.ConnectException: ...`,
/// `Exception in thread "main" java.lang.Error`), if its name looks like one.
fn type_named_by(line: &str) -> Option<&str> {
    let mut line = line.trim();
    if let Some(rest) = line.strip_prefix("Exception in thread \"") {
        line = rest.split_once("\" ").map_or(rest, |(_, r)| r);
    }
    // The name runs to the first `:` (or the line's end), all of it ASCII letters, digits, `_` and `.`.
    // Its ending is asked first: it rules out most lines at once, and reading a line up to its first
    // other character cost about 590 instructions for the engine bench's 200-byte message.
    let name = &line[..memchr::memchr(b':', line.as_bytes()).unwrap_or(line.len())];
    let looks_like_type = ["Error", "Exception", "Interrupt", "Exit", "Timeout"].iter().any(|s| name.ends_with(s));
    (looks_like_type && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.')).then_some(name)
}

/// The type a one-line message names before its text, as JavaScript's `String(error)` and Python's
/// `traceback.format_exception_only` write an error (`TimeoutError: The operation was aborted due to
/// timeout`), if it looks like one. A message of more lines is read as a trace (see [`trace_text`]).
fn type_in_message(message: &str) -> Option<&str> {
    // Lines asked for only once a type is found: most messages begin with none.
    type_named_by(message).filter(|_| !has_line_break(message))
}

/// True when `text` has a line break (`\n`). The memchr crate's search: `str::contains('\n')`
/// (core's) took about 270 instructions for a 200-byte message on every failure.
pub(crate) fn has_line_break(text: &str) -> bool {
    memchr::memchr(b'\n', text.as_bytes()).is_some()
}

/// Where a stack trace may be: the detail, or else a message of more than one
/// line (agents send `traceback.format_exc()` or `err.stack` as the message).
fn trace_text(outcome: &Outcome) -> &str {
    match outcome.detail.is_empty() && has_line_break(&outcome.message) {
        true => &outcome.message,
        false => &outcome.detail,
    }
}

/// The text message rules look at: a bounded prefix of the message, and the
/// head and tail of the detail (a Python traceback ends with its exception), with
/// the first exception of a Python chain when they leave it out. A long message of
/// many lines with no detail is read as a detail would be.
///
/// `causes` are the trace's Python causes ([`python_causes`] of [`trace_text`]).
fn match_text<'a>(outcome: &'a Outcome, limit: usize, causes: &[&str]) -> std::borrow::Cow<'a, str> {
    let half = limit / 2;
    let head_and_tail = |text: &mut String, long: &str| {
        text.push_str(prefix(long, half));
        text.push('\n');
        text.push_str(suffix(long, half));
        // A Python chain's first exception, when it is deep in a long trace: a wrapper raised last
        // (pydantic-ai's "Tool 'x' exceeded max retries count of 1") seldom says what its cause does.
        if let Some(cause) = causes.first() {
            // Where it is in the trace (it is a part of it).
            let at = (cause.as_ptr() as usize).wrapping_sub(long.as_ptr() as usize);
            if at < long.len() && at + cause.len() > half && at < long.len() - half {
                text.push('\n');
                text.push_str(cause);
            }
        }
    };
    if outcome.detail.is_empty() {
        let message = &outcome.message;
        if message.len() <= limit || !has_line_break(message) {
            return std::borrow::Cow::Borrowed(prefix(message, limit));
        }
        let mut text = String::with_capacity(limit + CAUSE_BYTES + 2);
        head_and_tail(&mut text, message);
        return std::borrow::Cow::Owned(text);
    }
    let message = prefix(&outcome.message, limit);
    let detail = &outcome.detail;
    let mut text = String::with_capacity(message.len() + limit + CAUSE_BYTES + 3);
    text.push_str(message);
    text.push('\n');
    if detail.len() <= limit {
        text.push_str(detail);
    } else {
        head_and_tail(&mut text, detail);
    }
    std::borrow::Cow::Owned(text)
}

/// The longest prefix of at most `max` bytes that ends on a char boundary.
pub fn prefix(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// The longest suffix of at most `max` bytes that starts on a char boundary.
pub fn suffix(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

/// Parses the built-in rules.
pub fn default_rules() -> Result<Vec<RuleSpec>, RuleError> {
    toml::from_str::<RulesFile>(DEFAULT_RULES).map(|f| f.rules).map_err(|e| RuleError::Defaults(e.to_string()))
}

/// One pattern per rule with message patterns (its alternatives joined: a set of
/// fewer, larger patterns is markedly faster to match than one pattern per
/// alternative), and the rule each belongs to.
fn message_patterns(rules: &[RuleSpec]) -> (Vec<String>, Vec<usize>) {
    let with_words = rules.iter().enumerate().filter(|(_, spec)| !spec.message.is_empty());
    with_words
        .map(|(index, spec)| {
            let joined: Vec<String> = spec.message.iter().map(|p| format!("(?:{p})")).collect();
            (joined.join("|"), index)
        })
        .unzip()
}

/// The built-in rules' message patterns, as the classifier compiles them (for tests).
#[cfg(test)]
pub(crate) fn default_message_patterns() -> Vec<String> {
    message_patterns(&default_rules().expect("the default rules parse")).0
}

/// User rules replace defaults with the same id in place; new ones go first.
fn merge_rules(defaults: &[RuleSpec], user: &[RuleSpec]) -> Result<Vec<RuleSpec>, RuleError> {
    let mut seen = std::collections::HashSet::new();
    for (index, spec) in defaults.iter().chain(user).enumerate() {
        if spec.id.trim().is_empty() {
            return Err(RuleError::MissingId { index: index + 1 });
        }
    }
    for spec in user {
        if !seen.insert(spec.id.as_str()) {
            return Err(RuleError::DuplicateId { id: spec.id.clone() });
        }
    }
    let mut default_ids = std::collections::HashSet::new();
    for spec in defaults {
        if !default_ids.insert(spec.id.as_str()) {
            return Err(RuleError::DuplicateId { id: spec.id.clone() });
        }
    }
    let overrides: BTreeMap<&str, &RuleSpec> = user.iter().map(|r| (r.id.as_str(), r)).collect();
    let mut merged: Vec<RuleSpec> = user.iter().filter(|r| !default_ids.contains(r.id.as_str())).cloned().collect();
    merged.extend(defaults.iter().map(|d| overrides.get(d.id.as_str()).map_or_else(|| d.clone(), |u| (*u).clone())));
    Ok(merged)
}

fn bad(id: &str, field: &'static str, value: impl ToString, problem: impl ToString) -> RuleError {
    RuleError::BadField { id: id.to_string(), field, value: value.to_string(), problem: problem.to_string() }
}

fn compile_rule(spec: &RuleSpec) -> Result<Rule, RuleError> {
    let id = spec.id.as_str();
    let category = spec.category.ok_or_else(|| bad(id, "category", "", "every rule needs a category"))?;
    let no_signal = spec.kind.is_empty()
        && spec.code.is_empty()
        && spec.exception.is_empty()
        && spec.grpc_code.is_empty()
        && spec.http_status.is_empty()
        && spec.exit_code.is_empty()
        && spec.message.is_empty();
    if no_signal {
        return Err(bad(id, "(signals)", "", "a rule must name at least one signal besides the tool"));
    }
    let http_status = spec
        .http_status
        .iter()
        .map(|s| match s {
            StatusSpec::One(n) if (100..=599).contains(n) => Ok(StatusMatch::One(*n)),
            StatusSpec::One(n) => Err(bad(id, "http_status", n, "an HTTP status is 100 to 599")),
            StatusSpec::Range(text) => parse_range(text)
                .ok_or_else(|| bad(id, "http_status", text, "write a status range as \"500-599\" within 100-599")),
        })
        .collect::<Result<_, _>>()?;
    let grpc_code = spec
        .grpc_code
        .iter()
        .map(|g| match g {
            GrpcCodeSpec::Number(n) if (0..=16).contains(n) => Ok(*n),
            GrpcCodeSpec::Number(n) => Err(bad(id, "grpc_code", n, "a gRPC code is 0 to 16")),
            GrpcCodeSpec::Name(name) => grpc_code_from_name(name)
                .ok_or_else(|| bad(id, "grpc_code", name, "not a gRPC code name such as UNAVAILABLE")),
        })
        .collect::<Result<_, _>>()?;
    let tool = spec
        .tool
        .iter()
        .map(|g| Glob::new(g).map(|g| g.compile_matcher()).map_err(|e| bad(id, "tool", g, e)))
        .collect::<Result<_, _>>()?;
    for (field, list) in [("code", &spec.code), ("exception", &spec.exception)] {
        if let Some(empty) = list.iter().find(|s| s.trim().is_empty()) {
            return Err(bad(id, field, empty, "must not be empty"));
        }
    }
    Ok(Rule {
        id: spec.id.as_str().into(),
        kind: spec.kind.clone(),
        code: spec.code.iter().map(|c| c.trim().to_string()).collect(),
        exception: spec.exception.iter().map(|e| e.trim().to_string()).collect(),
        grpc_code,
        http_status,
        exit_code: spec.exit_code.clone(),
        tool,
        has_message: !spec.message.is_empty(),
        category,
        retryable: spec.retryable,
        action: spec.action,
        suggestion: spec.suggestion.as_deref().map(ArcStr::from),
        priority: spec.priority,
    })
}

fn parse_range(text: &str) -> Option<StatusMatch> {
    let (lo, hi) = text.split_once('-')?;
    let (lo, hi): (u16, u16) = (lo.trim().parse().ok()?, hi.trim().parse().ok()?);
    (100 <= lo && lo <= hi && hi <= 599).then_some(StatusMatch::Range(lo, hi))
}

/// The codes an outcome's message names, when it sends no code, gRPC code or HTTP status of its own
/// (see [`crate::named_codes`]): they count as its own.
fn named_in_message(outcome: &Outcome) -> NamedCodes<'_> {
    if outcome.grpc_code.is_none() || outcome.code.trim().is_empty() || outcome.http_status.is_none() {
        named_codes(&outcome.message)
    } else {
        NamedCodes::default()
    }
}

/// The gRPC code names, in code order (0 = OK).
pub const GRPC_CODE_NAMES: [&str; 17] = [
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
];

/// A gRPC code from its name, in any case, with or without spaces (`"Deadline Exceeded"`).
pub fn grpc_code_from_name(name: &str) -> Option<i32> {
    // CamelCase (Go's DeadlineExceeded) gets underscores between its words.
    let name = name.trim();
    let mut spaced = String::with_capacity(name.len() + 4);
    let mut previous: Option<char> = None;
    for c in name.chars() {
        if c.is_ascii_uppercase() && previous.is_some_and(|p| p.is_ascii_lowercase()) {
            spaced.push('_');
        }
        spaced.push(c);
        previous = Some(c);
    }
    let normal: String = spaced.chars().map(|c| if c == ' ' { '_' } else { c.to_ascii_uppercase() }).collect();
    let normal = if normal == "CANCELED" { "CANCELLED".to_string() } else { normal };
    GRPC_CODE_NAMES.iter().position(|n| *n == normal).map(|i| i as i32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Headers;
    use proptest::prelude::*;

    fn categories() -> BTreeMap<Category, CategoryDefaults> {
        crate::policy::Policy::default().category_defaults()
    }

    fn classifier() -> Classifier {
        Classifier::with_defaults(categories()).expect("default rules compile")
    }

    fn failure(message: &str) -> Outcome {
        Outcome { tool: "t".into(), message: message.into(), headers: Headers::default(), ..Default::default() }
    }

    /// A failure with its exception's type.
    fn typed(exception_type: &str, message: &str) -> Outcome {
        Outcome { exception_type: exception_type.into(), ..failure(message) }
    }

    /// Each (exception type, message) classified as its category by the default rules.
    fn assert_categories(cases: &[(&str, &str, Category)]) {
        let c = classifier();
        for &(exception_type, message, category) in cases {
            assert_eq!(c.classify(&typed(exception_type, message)).category, category, "{exception_type}: {message}");
        }
    }

    #[test]
    fn default_rules_compile() {
        assert!(classifier().len() > 50);
    }

    #[test]
    fn structured_signal_beats_misleading_words() {
        let c = classifier();
        let gateway = Outcome { http_status: Some(504), ..failure("upstream request timeout") };
        assert_eq!(c.classify(&gateway).category, Category::Unavailable);
        let not_found = Outcome { exit_code: Some(127), ..failure("timeout: command not found") };
        assert_eq!(c.classify(&not_found).category, Category::NotFound);
        let quota = Outcome { http_status: Some(429), code: "insufficient_quota".into(), ..failure("quota") };
        assert_eq!(c.classify(&quota).category, Category::QuotaExceeded);
    }

    #[test]
    fn a_full_disk_is_a_quota_in_any_of_its_wordings() {
        let c = classifier();
        // SQLite's SQLITE_FULL, as Python's sqlite3 raises it; ENOSPC's strerror.
        for message in ["sqlite3.OperationalError: database or disk is full", "write /data/x: no space left on device"]
        {
            assert_eq!(c.classify(&failure(message)).category, Category::QuotaExceeded, "{message}");
        }
    }

    #[test]
    fn words_refine_a_generic_signal() {
        let c = classifier();
        let long = Outcome { http_status: Some(400), ..failure("prompt is too long: 210000 tokens > 200000 maximum") };
        assert_eq!(c.classify(&long).category, Category::ContextLength);
        let rate = Outcome { http_status: Some(403), ..failure("API rate limit exceeded for user ID 1234.") };
        assert_eq!(c.classify(&rate).category, Category::RateLimited);
        let plain = Outcome { http_status: Some(400), ..failure("missing field `query`") };
        assert_eq!(c.classify(&plain).category, Category::Validation);
        // OpenAI's used-up quota is a 429, and HTTP clients put the status line's "Too Many
        // Requests" before its body (the Go and TS clients' HTTP errors do): a quota, not a rate limit.
        let body = r#"{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}"#;
        let quota = Outcome { http_status: Some(429), ..failure(&format!("HTTP 429 Too Many Requests: {body}")) };
        assert_eq!(c.classify(&quota).category, Category::QuotaExceeded);
    }

    #[test]
    fn exception_matches_by_last_dotted_part() {
        let c = classifier();
        let o = Outcome { exception_type: "requests.exceptions.ReadTimeout".into(), ..failure("") };
        let got = c.classify(&o);
        assert_eq!(got.category, Category::Timeout);
        assert!(got.retryable);
    }

    #[test]
    fn a_one_line_message_that_begins_with_a_type_is_classified_by_the_type() {
        // Errors passed on as text alone, with no type beside them: Node 20's `String(error)` and
        // CPython 3.11's `traceback.format_exception_only` (holdout-real.jsonl's `type-in-message`
        // cases, made by tests/data/classification/real/). By their words alone the first was
        // `cancelled` ("aborted") and the others `unknown`.
        let c = classifier();
        for (message, category) in [
            ("TimeoutError: The operation was aborted due to timeout", Category::Timeout),
            ("RangeError: Maximum call stack size exceeded", Category::Internal),
            ("KeyError: 'query'", Category::Validation),
            ("RecursionError: maximum recursion depth exceeded", Category::Internal),
            ("asyncio.exceptions.CancelledError", Category::Cancelled),
        ] {
            assert_eq!(c.classify(&failure(message)).category, category, "{message:?}");
        }
        // A type beside the message still decides, and a word that only looks like a type is none.
        let typed = Outcome { exception_type: "ValueError".into(), ..failure("TimeoutError: the cache said so") };
        assert_eq!(c.classify(&typed).category, Category::Validation);
        assert_eq!(c.classify(&failure("KeyError reading the config")).category, Category::Unknown);
        // A wrapper no rule knows gives way to the message's type, as it does to a trace's.
        let wrapped = Outcome { exception_type: "ToolException".into(), ..failure("KeyError: 'query'") };
        assert_eq!(c.classify(&wrapped).category, Category::Validation);
    }

    #[test]
    fn a_generic_type_gives_way_to_words_that_say_what_ran_out() {
        // PyTorch's CPU allocator (c10/core/impl/alloc_cpu.cpp; still a RuntimeError in torch 2), CUDA's
        // before torch 1.13, and llama-cpp-python's prompt over its context window (llama_cpp/llama.py,
        // `create_completion`): sent with their type, or as text that begins with it.
        let c = classifier();
        for (exception, message, category) in [
            (
                "RuntimeError",
                "[enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: not enough memory: you tried to allocate 911360 bytes.",
                Category::QuotaExceeded,
            ),
            ("RuntimeError", "CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 7.79 GiB total capacity; 6.42 GiB already allocated)", Category::QuotaExceeded),
            ("ValueError", "Requested tokens (5000) exceed context window of 4096", Category::ContextLength),
        ] {
            let typed = Outcome { exception_type: exception.into(), ..failure(message) };
            assert_eq!(c.classify(&typed).category, category, "{message}");
            assert_eq!(c.classify(&failure(&format!("{exception}: {message}"))).category, category, "{message}");
        }
        // Without those words the type decides, as before.
        let plain = Outcome { exception_type: "RuntimeError".into(), ..failure("Event loop is closed") };
        assert_eq!(c.classify(&plain).category, Category::Internal);
        let plain = Outcome { exception_type: "ValueError".into(), ..failure("max_tokens must be at least 1") };
        assert_eq!(c.classify(&plain).category, Category::Validation);
    }

    #[test]
    fn a_credential_missing_from_the_configuration_is_auth_whatever_its_type() {
        // Made here: anthropic 2.14 (Python, a TypeError) and @anthropic-ai/sdk 1.14 (Node, an Error)
        // built with no key, LangChain's `get_from_dict_or_env` (langchain-core 1.8, a ValueError).
        // From the Stainless-made SDKs' sources: openai-python 1.x's `OpenAIError` and openai-node
        // 4.x's (groq, runloop and others raise the same texts with their own names).
        let c = classifier();
        for (exception, message) in [
            ("TypeError", "\"Could not resolve authentication method. Expected one of api_key, auth_token, or credentials to be set. Or for the `Authorization` header to be explicitly omitted\""),
            ("Error", "Could not resolve authentication method. Expected one of apiKey, authToken, credentials, config, or profile to be set. Or for the \"Authorization\" header to be explicitly omitted"),
            ("ValueError", "Did not find openai_api_key, please add an environment variable `OPENAI_API_KEY` which contains it, or pass `openai_api_key` as a named parameter."),
            ("openai.OpenAIError", "The api_key client option must be set either by passing api_key to the client or by setting the OPENAI_API_KEY environment variable"),
            ("OpenAIError", "The OPENAI_API_KEY environment variable is missing or empty; either provide it, or instantiate the OpenAI client with an apiKey option, like new OpenAI({ apiKey: 'My API Key' })."),
            ("ValueError", "HF_TOKEN environment variable is missing or empty."),
        ] {
            let typed = Outcome { exception_type: exception.into(), ..failure(message) };
            assert_eq!(c.classify(&typed).category, Category::Auth, "{exception}: {message}");
            assert_eq!(c.classify(&failure(&format!("{exception}: {message}"))).category, Category::Auth, "{message}");
        }
        // Other words about keys and tokens leave the type its say.
        for message in [
            "Did not find token ')' at position 5",
            "api_key must be a string, got int",
            "The TIMEOUT environment variable is missing or empty",
        ] {
            let typed = Outcome { exception_type: "ValueError".into(), ..failure(message) };
            assert_eq!(c.classify(&typed).category, Category::Validation, "{message}");
        }
    }

    #[test]
    fn a_key_error_naming_a_credential_is_auth() {
        // CPython 3.11's `os.environ["SERPAPI_API_KEY"]` unset (holdout-real.jsonl's r-py-environ-no-key):
        // the variable's name, quoted. A tool's own dict names its keys in lower case.
        let c = classifier();
        let key_error = |message: &str| Outcome { exception_type: "KeyError".into(), ..failure(message) };
        for name in
            ["'SERPAPI_API_KEY'", "'GITHUB_TOKEN'", "'AWS_SECRET_ACCESS_KEY'", "'PGPASSWORD'", "'OPENAI_APIKEY'"]
        {
            assert_eq!(c.classify(&key_error(name)).category, Category::Auth, "{name}");
            assert_eq!(c.classify(&failure(&format!("KeyError: {name}"))).category, Category::Auth, "{name}");
        }
        for name in ["'api_key'", "'token'", "'Token'", "'query'", "'TOKENIZER_PATH'"] {
            assert_eq!(c.classify(&key_error(name)).category, Category::Validation, "{name}");
        }
    }

    #[test]
    fn a_status_named_by_an_http_clients_phrasing_is_read_from_the_words() {
        // Made here: openai 3.57 (Python) on a status with no body, passed on as text
        // (holdout-real.jsonl's r-py-text-openai-empty-*). From the libraries' sources: openai-node's
        // `400 status code (no body)`, axios's `Request failed with status code 422`.
        let c = classifier();
        for (message, category) in [
            ("openai.BadRequestError: Error code: 400", Category::Validation),
            ("openai.APIStatusError: Error code: 408", Category::Timeout),
            ("openai.APIStatusError: Error code: 413", Category::ContextLength),
            ("Error code: 529 - {'type': 'error'}", Category::Unavailable),
            ("400 status code (no body)", Category::Validation),
            ("Request failed with status code 422", Category::Validation),
            ("upstream answered status_code=410", Category::NotFound),
            ("Error code: 501", Category::Internal),
        ] {
            assert_eq!(c.classify(&failure(message)).category, category, "{message}");
        }
        // The same numbers elsewhere say nothing; a body's words still win over the bare status.
        for message in ["processed 400 rows", "retry 408 of 1000", "HTTP/1.1 400"] {
            assert_eq!(c.classify(&failure(message)).category, Category::Unknown, "{message}");
        }
        let got = c.classify(&failure("Error code: 400 - This model's maximum context length is 8192 tokens"));
        assert_eq!(got.category, Category::ContextLength);
    }

    #[test]
    fn a_browsers_network_errors_and_a_git_credential_prompt_are_read() {
        // Made here with Debian's chromium 156: playwright 1.65 (holdout-real.jsonl's r-py-playwright-*)
        // and puppeteer-core 24.43 (whose errors are plain `Error`s); git 2.39 cloning from a loopback
        // server that answers 401 (r-git-http-no-credentials). The timed-out names are Chromium's
        // (net/base/net_error_list.h), as the others.
        let c = classifier();
        for (exception, message, category) in [
            ("playwright._impl._errors.Error", "Page.goto: net::ERR_CONNECTION_REFUSED at http://127.0.0.1:8799/\nCall log:\n  - navigating to \"http://127.0.0.1:8799/\", waiting until \"load\"\n", Category::Network),
            ("Error", "net::ERR_NAME_NOT_RESOLVED at http://api.nonexistent.invalid/", Category::Network),
            ("Error", "net::ERR_CONNECTION_RESET at https://example.com/", Category::Network),
            ("Error", "net::ERR_CONNECTION_TIMED_OUT at https://example.com/", Category::Timeout),
            ("Error", "No element found for selector: #missing", Category::NotFound),
            ("", "Cloning into 'private'...\nfatal: could not read Username for 'http://127.0.0.1:8787': terminal prompts disabled", Category::Auth),
            ("", "fatal: could not read Password for 'https://bot@github.com': terminal prompts disabled", Category::Auth),
        ] {
            let o = Outcome { exception_type: exception.into(), ..failure(message) };
            assert_eq!(c.classify(&o).category, category, "{message}");
        }
        // A navigation the page itself cut short (a download, another navigation) is no network failure.
        let aborted =
            Outcome { exception_type: "Error".into(), ..failure("net::ERR_ABORTED at https://example.com/file.pdf") };
        assert_ne!(c.classify(&aborted).category, Category::Network);
    }

    #[test]
    fn postgres_errors_that_no_type_names_are_read_by_their_words() {
        // Made here with Debian's PostgreSQL 15.18 through psql (holdout-real.jsonl's r-psql-*); psycopg
        // raises the server's same text under a type no rule lists (`psycopg2.errors.NotNullViolation`).
        let c = classifier();
        for (message, category) in [
            ("ERROR:  null value in column \"email\" of relation \"users\" violates not-null constraint\nDETAIL:  Failing row contains (3, null).", Category::Validation),
            ("ERROR:  insert or update on table \"orders\" violates foreign key constraint \"orders_user_id_fkey\"\nDETAIL:  Key (user_id)=(999) is not present in table \"users\".", Category::NotFound),
            ("ERROR:  update or delete on table \"users\" violates foreign key constraint \"orders_user_id_fkey\" on table \"orders\"\nDETAIL:  Key (id)=(1) is still referenced from table \"orders\".", Category::Conflict),
            ("ERROR:  could not serialize access due to concurrent update", Category::Conflict),
            ("ERROR:  cannot execute INSERT in a read-only transaction", Category::PermissionDenied),
            ("FATAL:  terminating connection due to administrator command\nserver closed the connection unexpectedly", Category::Unavailable),
        ] {
            assert_eq!(c.classify(&Outcome { exit_code: Some(1), ..failure(message) }).category, category, "{message}");
            let typed = Outcome { exception_type: "psycopg2.errors.DatabaseError".into(), ..failure(message) };
            assert_eq!(c.classify(&typed).category, category, "{message}");
        }
    }

    #[test]
    fn a_prompt_past_the_context_is_read_in_each_providers_words() {
        // The providers' texts as agent toolkits quote them in their context-overflow tests (no
        // provider's server runs here): Gemini's, which "maximum number of" made a used-up quota and
        // so an escalation, xAI's, Moonshot's Kimi, GitHub Copilot's, Bedrock's, Anthropic's second
        // form, Ollama's two, llama.cpp's server, vLLM's. As an agent passes them on: text alone.
        let c = classifier();
        for message in [
            "The input token count (1196265) exceeds the maximum number of tokens allowed (1048575).",
            "The input token count exceeds the maximum number of tokens allowed 1048576.",
            "This model's maximum prompt length is 131072 but the request contains 537812 tokens",
            "Invalid request: Your request exceeded model token limit: 262144 (requested: 291351)",
            "prompt token count of 5000 exceeds the limit of 4096",
            "Input is too long for requested model.",
            "input length and `max_tokens` exceed context limit: 178902 + 32000 > 200000, decrease input length or `max_tokens` and try again",
            "Ollama model error: the input length exceeds the context length (status code: 400)",
            "prompt too long; exceeded max context length by 4 tokens",
            "the request exceeds the available context size, try increasing it",
            "The decoder prompt (length 5000) is longer than the maximum model length of 4096. Make sure that `max_model_len` is no smaller than the number of text tokens.",
        ] {
            let got = c.classify(&failure(message));
            assert_eq!((got.category, &*got.rule), (Category::ContextLength, "message.context_length"), "{message}");
        }
        // Bedrock's throttling speaks of tokens too, and is a rate limit (as agent toolkits' tests pin it).
        for message in [
            "Throttling error: Too many tokens, please wait before trying again.",
            "An error occurred (ThrottlingException) when calling the InvokeModel operation (reached max retries: 4): Too many tokens, please wait before trying again.",
        ] {
            assert_eq!(c.classify(&failure(message)).category, Category::RateLimited, "{message}");
        }
        // OpenAI's 429 for one request over its limit per minute (openai 3.57's text, holdout-real's
        // r-py-openai-tpm-too-large) must shrink, however it comes; a limit reached for now waits.
        let too_large = "Error code: 429 - Request too large for gpt-4o in organization org-abc on tokens per min (TPM): Limit 30000, Requested 50000. The input or output tokens must be reduced in order to run successfully. Visit https://platform.openai.com/account/rate-limits to learn more.";
        let reached = "Error code: 429 - Rate limit reached for gpt-4o in organization org-abc on tokens per min (TPM): Limit 30000, Used 29000, Requested 2000. Please try again in 2s. Visit https://platform.openai.com/account/rate-limits to learn more.";
        for (message, category) in [(too_large, Category::ContextLength), (reached, Category::RateLimited)] {
            for outcome in [
                Outcome { http_status: Some(429), code: "rate_limit_exceeded".into(), ..failure(message) },
                Outcome { exception_type: "openai.RateLimitError".into(), ..failure(message) },
                Outcome { http_status: Some(429), ..failure(message) },
                failure(message),
            ] {
                assert_eq!(c.classify(&outcome).category, category, "{outcome:?}");
            }
        }
        // The quota words still read a limit of things other than tokens.
        let buckets = "You have attempted to create more buckets than allowed: exceeded the maximum number of buckets";
        assert_eq!(c.classify(&failure(buckets)).category, Category::QuotaExceeded);
    }

    #[test]
    fn googles_quota_per_minute_is_a_rate_limit_and_per_day_a_used_up_quota() {
        // The Gemini API's 429 says "exceeded your current quota ... billing" for both; the quota's id
        // decides, in the forms it is written in: google-genai's dict (holdout-real's r-py-gemini-*),
        // JSON, and google-api-core's protobuf text (as quoted from a project's notes).
        let c = classifier();
        let words = "429 You exceeded your current quota, please check your plan and billing details.";
        for (details, category) in [
            ("'quotaId': 'GenerateRequestsPerMinutePerProjectPerModel-FreeTier'", Category::RateLimited),
            ("\"quotaId\": \"GenerateContentInputTokensPerModelPerMinute-FreeTier\"", Category::RateLimited),
            ("quota_id: \"GenerateRequestsPerMinutePerProjectPerModel\"", Category::RateLimited),
            ("'quotaId': 'GenerateRequestsPerDayPerProjectPerModel-FreeTier'", Category::QuotaExceeded),
            (
                "\"quotaId\": \"GenerateRequestsPerMinutePerProjectPerModel-FreeTier\" \"quotaId\": \"GenerateRequestsPerDayPerProjectPerModel-FreeTier\"",
                Category::QuotaExceeded,
            ),
            ("", Category::QuotaExceeded),
        ] {
            let message = format!("{words} {details}");
            let status = Outcome { http_status: Some(429), ..failure(&message) };
            assert_eq!(c.classify(&status).category, category, "{message}");
            assert_eq!(c.classify(&failure(&message)).category, category, "as text: {message}");
        }
    }

    #[test]
    fn gos_no_rows_is_not_found() {
        // database/sql's ErrNoRows (holdout-real's r-go-sql-no-rows), alone and wrapped as Go code wraps it.
        let c = classifier();
        for message in ["sql: no rows in result set", "load user 42: sql: no rows in result set"] {
            assert_eq!(c.classify(&failure(message)).category, Category::NotFound, "{message}");
        }
    }

    #[test]
    fn mysqls_own_words_are_read() {
        // MySQL's client and server errors as PyMySQL raises them (`(code, message)`), in the words of
        // MySQL's error reference: a query the agent wrote wrong, a connection lost mid-query.
        let c = classifier();
        for (exception, message, category) in [
            ("pymysql.err.ProgrammingError", "(1064, \"You have an error in your SQL syntax; check the manual that corresponds to your MySQL server version for the right syntax to use near 'FORM users' at line 1\")", Category::Validation),
            ("pymysql.err.OperationalError", "(2013, 'Lost connection to MySQL server during query')", Category::Network),
            ("pymysql.err.OperationalError", "(2006, 'MySQL server has gone away')", Category::Network),
        ] {
            let outcome = Outcome { exception_type: exception.into(), ..failure(message) };
            assert_eq!(c.classify(&outcome).category, category, "{message}");
            assert_eq!(c.classify(&failure(message)).category, category, "as text: {message}");
        }
    }

    #[test]
    fn a_tools_error_code_quoted_in_its_text_is_read() {
        // slack_sdk 3.48's SlackApiError (holdout-real's r-py-slack-*: HTTP 200 and the code in the body
        // it quotes), and Stripe's "No such customer" (as projects' tests quote stripe's errors).
        let c = classifier();
        let slack = |code: &str| {
            format!("The request to the Slack API failed. (url: https://slack.com/api/chat.postMessage)\nThe server responded with: {{'ok': False, 'error': '{code}'}}")
        };
        for (message, category) in [
            (slack("not_in_channel"), Category::PermissionDenied),
            (slack("missing_scope"), Category::PermissionDenied),
            (slack("invalid_auth"), Category::Auth),
            (slack("token_revoked"), Category::Auth),
            (slack("channel_not_found"), Category::NotFound),
            ("Request req_123: No such customer: 'cus_NffrFeUfNV2Hib'".to_string(), Category::NotFound),
            ("No such price: 'price_1MoBy5LkdIwHu7ixZhnattbh'".to_string(), Category::NotFound),
        ] {
            let outcome = Outcome { http_status: Some(200), ..failure(&message) };
            assert_eq!(c.classify(&outcome).category, category, "{message}");
        }
    }

    #[test]
    fn a_google_status_name_in_text_is_read_as_its_words() {
        // google-genai 3.6 writes its errors `{code} {STATUS}. {body}` (holdout-real's r-py-gemini-*);
        // passed on as text, INVALID_ARGUMENT is an invalid argument unless the body says more.
        let c = classifier();
        let text = |body: &str| {
            format!(
                "400 INVALID_ARGUMENT. {{'error': {{'code': 400, 'message': '{body}', 'status': 'INVALID_ARGUMENT'}}}}"
            )
        };
        for (body, category) in [
            ("* GenerateContentRequest.contents: contents is not specified", Category::Validation),
            ("API key not valid. Please pass a valid API key.", Category::Auth),
            (
                "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).",
                Category::ContextLength,
            ),
        ] {
            assert_eq!(c.classify(&failure(&text(body))).category, category, "{body}");
        }
    }

    #[test]
    fn an_account_a_human_must_act_for_is_escalated_whatever_its_status() {
        // OpenAI's unfunded account (a 429, as projects' tests and notes quote it), its unverified
        // organization (403, and 400 or 404 as some reports show it), the Gemini API's region refusal
        // (400 FAILED_PRECONDITION): none is retried or handed back to the agent to fix.
        let c = classifier();
        for (status, message, category) in [
            (Some(429), "Your account is not active, please check your billing details on our website.", Category::QuotaExceeded),
            (None, "Error code: 429 - Your account is not active, please check your billing details.", Category::QuotaExceeded),
            // The search tools agents call most: SerpApi's used-up plan (a 429), Tavily's (its own 432, 433;
            // the texts of its API reference).
            (Some(429), "Your account has run out of searches.", Category::QuotaExceeded),
            (Some(432), "This request exceeds your plan's set usage limit. Please upgrade your plan or contact support@tavily.com", Category::QuotaExceeded),
            (Some(433), "This request exceeds the pay-as-you-go limit. You can increase your limit on the Tavily dashboard.", Category::QuotaExceeded),
            (Some(400), "Your organization must be verified to use the model `o3`. Please go to: https://platform.openai.com/settings/organization/general and click on Verify Organization.", Category::PermissionDenied),
            (Some(404), "Your organization must be verified to use the model `gpt-5`.", Category::PermissionDenied),
            (None, "Error [AI_APICallError]: Your organization must be verified to use the model `gpt-image-1`.", Category::PermissionDenied),
            (Some(400), "User location is not supported for the API use.", Category::PermissionDenied),
            (None, "400 FAILED_PRECONDITION. {'error': {'code': 400, 'message': 'User location is not supported for the API use.', 'status': 'FAILED_PRECONDITION'}}", Category::PermissionDenied),
        ] {
            let outcome = Outcome { http_status: status, ..failure(message) };
            assert_eq!(c.classify(&outcome).category, category, "{status:?} {message}");
        }
    }

    #[test]
    fn a_wrapper_no_rule_knows_gives_way_to_the_trace_it_carries() {
        // Go's exec reports a child's failure as `exec.ExitError` (`exit status 1`) with the
        // child's stderr: a real Python traceback of the set.
        let c = classifier();
        let child = |trace: &str| Outcome {
            exception_type: "exec.ExitError".into(),
            exit_code: Some(1),
            detail: trace.into(),
            ..failure("exit status 1")
        };
        let got = c.classify(&child(include_str!("../tests/data/traces/py-recursion.txt")));
        assert_eq!((got.category, &*got.rule), (Category::Internal, "exception.internal"));
        let got = c.classify(&child(include_str!("../tests/data/traces/py-key-error.txt")));
        assert_eq!((got.category, &*got.rule), (Category::Validation, "exception.validation"));
        // A type some rule knows keeps its say over the trace's.
        let timeout = Outcome {
            exception_type: "TimeoutError".into(),
            ..child(include_str!("../tests/data/traces/py-key-error.txt"))
        };
        assert_eq!(c.classify(&timeout).category, Category::Timeout);
    }

    #[test]
    fn the_sdks_status_classes_are_known_without_their_status() {
        // anthropic 2.14's classes (anthropic/_exceptions.py), one a status, as a client
        // reports them when it has no status to send; the generic ones (BadRequestError,
        // InternalServerError) are left to the status and the words, which they do not decide.
        let c = classifier();
        for (exception, category) in [
            ("anthropic.PaymentRequiredError", Category::QuotaExceeded),
            ("anthropic.RequestTimeoutError", Category::Timeout),
            ("anthropic.PreconditionFailedError", Category::Conflict),
            ("anthropic.ContentTooLargeError", Category::ContextLength),
            ("anthropic.UnprocessableEntityError", Category::Validation),
            ("anthropic.RequestHeaderFieldsTooLargeError", Category::Validation),
            ("anthropic.ClientClosedRequestError", Category::Cancelled),
            ("anthropic.HTTPNotImplementedError", Category::Internal),
            ("anthropic.GatewayTimeoutError", Category::Unavailable),
            ("anthropic.CredentialsError", Category::Auth),
        ] {
            let o = Outcome { exception_type: exception.into(), ..failure("boom") };
            assert_eq!(c.classify(&o).category, category, "{exception}");
        }
        // The error types of Anthropic's API reference, as a client reads them from the body.
        for (code, category) in [
            ("billing_error", Category::QuotaExceeded),
            ("request_too_large", Category::ContextLength),
            ("timeout_error", Category::Timeout),
        ] {
            let o = Outcome { code: code.into(), ..failure("boom") };
            assert_eq!(c.classify(&o).category, category, "{code}");
        }
    }
    #[test]
    fn a_trace_names_its_exception_when_the_outcome_does_not() {
        let c = classifier();
        let py = Outcome {
            detail:
                "Traceback (most recent call last):\n  File \"a.py\", line 3, in run\n    x = d['k']\nKeyError: 'k'\n"
                    .into(),
            ..failure("")
        };
        assert_eq!(c.classify(&py).category, Category::Validation);
        let java = Outcome {
            detail: "java.net.ConnectException: Connection refused\n\tat x.y(Z.java:1)\n".into(),
            ..failure("")
        };
        assert_eq!(c.classify(&java).category, Category::Network);
        assert!(exceptions_in_trace("no trace here\njust words", &[]).is_empty());
        // Java 17: the JVM's prefix, and the root cause when a rule knows it, else the next one out
        // (from tests/data/traces/java-caused-by.txt and java-connect-refused.txt).
        let wrapped = "Exception in thread \"main\" java.lang.IllegalStateException: agent failed to start\n\tat Failures.causedBy(Failures.java:54)\nCaused by: java.io.UncheckedIOException: could not read settings\n\tat Failures.readSettings(Failures.java:46)\nCaused by: java.nio.file.NoSuchFileException: /etc/agent/settings.json\n\tat java.base/sun.nio.fs.UnixException.translateToIOException(UnixException.java:92)\n";
        assert_eq!(c.classify(&Outcome { detail: wrapped.into(), ..failure("") }).category, Category::NotFound);
        let refused = "Exception in thread \"main\" java.net.ConnectException\n\tat java.net.http/jdk.internal.net.http.HttpClientImpl.send(HttpClientImpl.java:951)\nCaused by: java.net.ConnectException\n\tat java.net.http/jdk.internal.net.http.common.Utils.toConnectException(Utils.java:1055)\nCaused by: java.nio.channels.ClosedChannelException\n\tat java.base/sun.nio.ch.SocketChannelImpl.ensureOpen(SocketChannelImpl.java:195)\n";
        assert_eq!(c.classify(&Outcome { detail: refused.into(), ..failure("") }).category, Category::Network);
        // Node quotes the source line first; the exception comes after it.
        let node = "file:///app/tools.mjs:24\n  return JSON.parse(text);\n              ^\n\nSyntaxError: Expected double-quoted property name in JSON at position 46\n    at JSON.parse (<anonymous>)\n";
        assert_eq!(c.classify(&Outcome { detail: node.into(), ..failure("") }).category, Category::Format);
        // A Go panic in the output, under a message of the tool's own: a bug, whatever its words
        // ("index out of range" reads as bad input) (tests/data/traces/go-index-range.txt).
        let go = "panic: runtime error: index out of range [5] with length 2\n\ngoroutine 1 [running]:\nmain.pick(...)\n\t/app/main.go:28\n";
        assert_eq!(c.classify(&Outcome { detail: go.into(), ..failure("tool failed") }).category, Category::Internal);
    }

    /// `Caused by:` types as first written: every line trimmed, then the words stripped.
    fn caused_by_types_line_by_line(text: &str) -> Vec<&str> {
        text.lines().filter_map(|l| l.trim().strip_prefix("Caused by: ")).filter_map(type_named_by).collect()
    }

    #[test]
    fn caused_by_types_are_read_from_real_java_traces() {
        let traces = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/traces");
        let text = std::fs::read_to_string(format!("{traces}/java-caused-by.txt")).expect("the trace");
        assert_eq!(caused_by_types(&text), ["java.io.UncheckedIOException", "java.nio.file.NoSuchFileException"]);
        for entry in std::fs::read_dir(traces).expect("the traces") {
            let path = entry.expect("an entry").path();
            if path.extension().is_some_and(|e| e == "txt") {
                let text = std::fs::read_to_string(&path).expect("a trace");
                assert_eq!(caused_by_types(&text), caused_by_types_line_by_line(&text), "{}", path.display());
            }
        }
    }

    proptest! {
        #[test]
        fn caused_by_types_are_those_of_the_trimmed_lines(
            pieces in proptest::collection::vec(
                prop_oneof![
                    Just("Caused by: "), Just("Caused by:"), Just("java.io.IOException"), Just(": x"), Just("\n"),
                    Just("\r\n"), Just("  "), Just("\t"), Just("\u{a0}"), Just("é"), Just("\tat A.b(A.java:1)"),
                ],
                0..24,
            )
        ) {
            let text = pieces.concat();
            prop_assert_eq!(caused_by_types(&text), caused_by_types_line_by_line(&text));
        }
    }

    /// `type_named_by` as it read before it asked the name's ending first: the name is the line's
    /// first run of name characters, and what follows it must be nothing or a `:`.
    fn type_named_by_as_it_read(line: &str) -> Option<&str> {
        let mut line = line.trim();
        if let Some(rest) = line.strip_prefix("Exception in thread \"") {
            line = rest.split_once("\" ").map_or(rest, |(_, r)| r);
        }
        let end = line.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.')).unwrap_or(line.len());
        let (name, rest) = line.split_at(end);
        let looks_like_type = ["Error", "Exception", "Interrupt", "Exit", "Timeout"].iter().any(|s| name.ends_with(s));
        (looks_like_type && (rest.is_empty() || rest.starts_with(':'))).then_some(name)
    }

    proptest! {
        #[test]
        fn a_type_is_the_same_name_read_either_way(
            pieces in proptest::collection::vec(
                prop_oneof![
                    Just("java.net."), Just("KeyError"), Just("Timeout"), Just("Exception"), Just("Exit"), Just(":"),
                    Just(": x"), Just(" "), Just("_"), Just("("), Just("é"), Just("\u{a0}"), Just("Exception in thread \"main\" "),
                ],
                0..8,
            )
        ) {
            let line = pieces.concat();
            prop_assert_eq!(type_named_by(&line), type_named_by_as_it_read(&line));
        }
    }

    #[test]
    fn compiler_and_test_runner_output_is_the_code_to_fix() {
        // Lines in the shapes gcc/clang, javac, Go, jest, go test and cargo test print (the trace set
        // has full runs of rustc, tsc, gcc, go build and pytest: tests/data/traces/tool-*.txt).
        let c = classifier();
        for (text, rule) in [
            ("main.cpp:3:5: error: use of undeclared identifier 'x'", "message.compile_error"),
            ("src/lib.rs:4:9: error[E0425]: cannot find value `y` in this scope", "message.compile_error"),
            ("Main.java:5: error: cannot find symbol", "message.compile_error"),
            ("# example.com/agent\n./plan.go:14:2: undefined: stepz", "message.compile_error"),
            ("Tests:       1 failed, 2 passed, 3 total", "message.tests_failed"),
            ("--- FAIL: TestPlan (0.00s)\n    plan_test.go:12: got 2, want 3", "message.tests_failed"),
            ("test result: FAILED. 3 passed; 1 failed; 0 ignored", "message.tests_failed"),
        ] {
            let got = c.classify(&failure(text));
            assert_eq!((got.category, &*got.rule), (Category::Validation, rule), "{text}");
            assert!(!got.retryable, "{text}");
        }
        // Near misses keep their own meaning: a timestamp is not a file position, nor a Go frame a build error.
        for (text, category) in [
            ("2024-05-01 12:30:45: error: connection refused", Category::Network),
            ("panic: runtime error: index out of range\n\t/app/main.go:12 +0x1d", Category::Internal),
            ("error: failed to push some refs: non-fast-forward", Category::Conflict),
        ] {
            assert_eq!(c.classify(&failure(text)).category, category, "{text}");
        }
    }

    #[test]
    fn a_file_system_error_reads_the_same_by_errno_name_or_by_its_text() {
        // Node's fs errors carry the errno name; Go's carry only strerror's text
        // (tests/data/classification/real/: node_cases.mjs, go_cases.go).
        let c = classifier();
        for (code, message, category) in [
            ("EISDIR", "EISDIR: illegal operation on a directory, read", Category::NotFound),
            ("", "read /srv/data: is a directory", Category::NotFound),
            ("ENOTEMPTY", "ENOTEMPTY: directory not empty, rmdir '/tmp/agent-x'", Category::Conflict),
            ("", "remove /srv/out: directory not empty", Category::Conflict),
            ("", "mkdir /tmp: file exists", Category::Conflict),
        ] {
            let o = Outcome { code: code.into(), ..failure(message) };
            assert_eq!(c.classify(&o).category, category, "{message}");
            if !code.is_empty() {
                let bare = Outcome { code: code.into(), ..failure("") };
                assert_eq!(c.classify(&bare).category, category, "{code} alone");
            }
        }
    }

    #[test]
    fn a_socket_the_peer_closed_is_a_network_failure() {
        // Python 3.11's socket.getpeername() on a socket that is not connected (the Python
        // client sends the errno name as the code): retried with a new connection.
        let c = classifier();
        let o = Outcome { code: "ENOTCONN".into(), ..failure("[Errno 107] Transport endpoint is not connected") };
        let classification = c.classify(&o);
        assert_eq!((classification.category, &*classification.rule), (Category::Network, "code.network"));
    }

    #[test]
    fn command_line_tools_and_servers_are_read_by_their_own_words() {
        // As redis-server 7, git, make, npm, the sqlite3 shell, curl and jq print them
        // (tests/data/classification/real/tool_cases.py).
        let c = classifier();
        for (message, category) in [
            ("WRONGTYPE Operation against a key holding the wrong kind of value", Category::Validation),
            ("(error) NOPERM this user has no permissions to run the 'set' command", Category::PermissionDenied),
            ("AUTH failed: WRONGPASS invalid username-password pair or user is disabled.", Category::Auth),
            ("LOADING Redis is loading the dataset in memory", Category::Unavailable),
            (
                "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSCRIPT.",
                Category::Unavailable,
            ),
            ("ERR unknown command 'JSON.GET', with args beginning with: 'doc'", Category::Validation),
            ("ERR wrong number of arguments for 'get' command", Category::Validation),
            ("Error: unknown flag: --verbos", Category::Validation),
            ("fatal: not a git repository (or any of the parent directories): .git", Category::NotFound),
            (
                "error: Your local changes to the following files would be overwritten by checkout:\n\ta.txt",
                Category::Conflict,
            ),
            ("make: *** No rule to make target 'deploy'.  Stop.", Category::NotFound),
            ("make: *** No targets specified and no makefile found.  Stop.", Category::NotFound),
            ("npm error Missing script: \"deploy\"", Category::NotFound),
            ("Error: unable to open database \"/srv/a.db\": unable to open database file", Category::NotFound),
            ("curl: (52) Empty reply from server", Category::Network),
            ("curl: (3) URL using bad/illegal format or missing URL", Category::Validation),
            ("jq: error (at <stdin>:0): Cannot index object with number", Category::Validation),
        ] {
            assert_eq!(c.classify(&failure(message)).category, category, "{message}");
        }
        // Redis's codes are capitals at the start of a reply: the same words in a sentence are not one.
        for message in ["Busy day: the job queue is long", "loading the model weights"] {
            assert_eq!(c.classify(&failure(message)).category, Category::Unknown, "{message}");
        }
    }

    #[test]
    fn text_that_does_not_decode_is_format_and_a_value_of_the_wrong_type_is_validation() {
        // Go's encoding/json and strconv, as go1.26 prints them (tests/data/classification/real/go_cases.go).
        let c = classifier();
        for (message, category) in [
            ("invalid character 'e' in literal true (expecting 'r')", Category::Format),
            ("invalid character '}' after object key", Category::Format),
            ("invalid character 'x' in string literal", Category::Format),
            ("json: cannot unmarshal string into Go struct field .limit of type int", Category::Validation),
            ("strconv.Atoi: parsing \"twelve\": invalid syntax", Category::Validation),
        ] {
            assert_eq!(c.classify(&failure(message)).category, category, "{message}");
        }
    }

    #[test]
    fn fetch_given_a_url_it_cannot_use_is_validation_not_network() {
        // Node 20's undici: the TypeError says "fetch failed"; its cause names the reason.
        let c = classifier();
        let bad_url = Outcome { exception_type: "TypeError".into(), ..failure("fetch failed: unknown scheme") };
        assert_eq!(c.classify(&bad_url).category, Category::Validation);
        let refused = Outcome {
            exception_type: "TypeError".into(),
            ..failure("fetch failed: connect ECONNREFUSED 127.0.0.1:8799")
        };
        assert_eq!(c.classify(&refused).category, Category::Network);
    }

    #[test]
    fn a_providers_words_refine_its_generic_code_or_status() {
        let c = classifier();
        // anthropic 2.14's BadRequestError for a used-up credit balance (real/python_cases.py).
        let credit = Outcome {
            http_status: Some(400),
            code: "invalid_request_error".into(),
            ..failure("Error code: 400 - {'type': 'error', 'error': {'type': 'invalid_request_error', 'message': 'Your credit balance is too low to access the Anthropic API.'}}")
        };
        assert_eq!(c.classify(&credit).category, Category::QuotaExceeded);
        let plain =
            Outcome { code: "invalid_request_error".into(), ..failure("messages: at least one message is required") };
        assert_eq!(c.classify(&plain).category, Category::Validation);
        // A refused card is the payment details to change; a bare 402 is still a quota.
        let card = Outcome { http_status: Some(402), ..failure("Your card was declined.") };
        assert_eq!(c.classify(&card).category, Category::Validation);
        let stripe = Outcome { http_status: Some(402), code: "card_declined".into(), ..failure("") };
        assert_eq!(c.classify(&stripe).category, Category::Validation);
        let bare = Outcome { http_status: Some(402), ..failure("Payment Required") };
        assert_eq!(c.classify(&bare).category, Category::QuotaExceeded);
        // A request that names billing details is not a quota (Stripe's invalid_request_error).
        for outcome in [
            Outcome { http_status: Some(400), ..failure("Missing required param: billing_details[address][line1].") },
            Outcome { code: "invalid_request_error".into(), ..failure("Invalid billing_cycle_anchor: must be future") },
        ] {
            assert_eq!(c.classify(&outcome).category, Category::Validation, "{}", outcome.message);
        }
    }

    #[test]
    fn the_message_is_read_only_when_words_could_outscore_the_signals() {
        let c = classifier();
        let reads_words = |o: &Outcome| {
            let exception = c.exception_read(o, &[]);
            let last = exception.rsplit(['.', ':']).next().unwrap_or(exception);
            let mut candidates = vec![];
            c.index.candidates(o, exception, last, &mut candidates);
            c.words_may_decide(o, exception, last, &candidates)
        };
        // No rule reads words beside requests' ConnectionError, nor beside a 503: the signal decides.
        assert!(!reads_words(&typed(
            "requests.exceptions.ConnectionError",
            "Max retries exceeded with url: /v1 (Caused by ...)"
        )));
        assert!(!reads_words(&Outcome { http_status: Some(503), ..failure("upstream connect error") }));
        // Words beside RateLimitError can make it a used-up quota; a 4xx can say the context is too
        // long; with no signal, or only a weak one (priority 9), words decide.
        assert!(reads_words(&typed("openai.RateLimitError", "You exceeded your current quota")));
        assert!(reads_words(&Outcome { http_status: Some(400), ..failure("maximum context length is 8192 tokens") }));
        assert!(reads_words(&failure("connection refused")));
        assert!(reads_words(&Outcome { grpc_code: Some(2), ..failure("Exception calling application: boom") }));
    }

    #[test]
    fn a_type_or_code_every_api_error_has_gives_way_to_the_status_and_words() {
        // go-openai 1.43 raises `openai.APIError` for whatever the API answered, and OpenAI's body
        // names its 500 and its overloaded 503 `server_error` alike (real/go_sdks: r-go-goopenai-*).
        let c = classifier();
        let api = |status: u16, code: &str, message: &str| Outcome {
            exception_type: "openai.APIError".into(),
            http_status: Some(status),
            code: code.into(),
            ..failure(message)
        };
        for (outcome, category) in [
            (
                api(403, "unsupported_country_region_territory", "error, status code: 403, status: 403 Forbidden, message: Country, region, or territory not supported"),
                Category::PermissionDenied,
            ),
            (
                api(400, "invalid_prompt", "error, status code: 400, status: 400 Bad Request, message: Invalid prompt: your prompt was flagged as potentially violating our usage policy."),
                Category::ContentFilter,
            ),
            (
                api(503, "server_error", "error, status code: 503, status: 503 Service Unavailable, message: The engine is currently overloaded, please try again later."),
                Category::Unavailable,
            ),
            (api(500, "server_error", "error, status code: 500, status: 500 Internal Server Error, message: The server had an error while processing your request. Sorry about that!"), Category::Internal),
            // Alone, each is what it names.
            (typed("openai.APIError", "An error occurred during streaming"), Category::Internal),
            (Outcome { code: "api_error".into(), ..failure("Internal server error") }, Category::Internal),
        ] {
            assert_eq!(c.classify(&outcome).category, category, "{}", outcome.message);
        }
    }

    #[test]
    fn a_model_the_project_may_not_use_is_a_permission_and_one_that_does_not_exist_is_not_found() {
        // OpenAI's 403 and 404, both `model_not_found` (openai-go 3.98: r-go-openai-403-project-model, -404-model).
        let c = classifier();
        let model = |status: u16, message: &str| Outcome {
            http_status: Some(status),
            code: "model_not_found".into(),
            ..failure(message)
        };
        let denied = model(
            403,
            "OpenAI API error: 403 Forbidden: Project `proj_AbCdEf123` does not have access to model `gpt-4o`",
        );
        assert_eq!(c.classify(&denied).category, Category::PermissionDenied);
        let missing = model(404, "The model `gpt-9-turbo` does not exist or you do not have access to it.");
        assert_eq!(c.classify(&missing).category, Category::NotFound);
    }

    #[test]
    fn a_gateways_error_page_that_did_not_parse_is_the_gateways_failure() {
        // go-openai 1.43 at a 502 page of Cloudflare's (r-go-goopenai-502-html), and at a 500 page.
        let c = classifier();
        let page = |status: u16| {
            Outcome {
            exception_type: "json.SyntaxError".into(),
            http_status: Some(status),
            ..failure(&format!("error, status code: {status}, status: {status}, message: invalid character '<' looking for beginning of value, body: <html>"))
        }
        };
        assert_eq!(c.classify(&page(502)).category, Category::Unavailable);
        assert_eq!(c.classify(&page(500)).category, Category::Internal);
        // With no status, a body that did not parse is still the answer's form.
        assert_eq!(
            c.classify(&typed("json.SyntaxError", "invalid character '<' looking for beginning of value")).category,
            Category::Format
        );
    }

    #[test]
    fn a_parse_error_inside_a_tool_that_ran_is_the_tools_not_the_models() {
        let c = classifier();
        // Python 3.11's json.loads of a 502 page, raised inside a tool (the clients report kind tool_error).
        let parse = |kind| Outcome {
            exception_type: "json.decoder.JSONDecodeError".into(),
            kind,
            ..failure("Expecting value: line 1 column 1 (char 0)")
        };
        let got = c.classify(&parse(Some(OutcomeKind::ToolError)));
        assert_eq!((got.category, got.rule.as_ref()), (Category::Internal, "kind.tool_error.parse"));
        assert!(got.retryable);
        // Without the agent's word, or for the model's own call, it stays a format error.
        assert_eq!(c.classify(&parse(None)).category, Category::Format);
        assert_eq!(c.classify(&parse(Some(OutcomeKind::InvalidToolCall))).category, Category::Format);
    }

    #[test]
    fn a_404_that_will_not_say_whether_it_exists_is_not_found() {
        // npm 11's E404 for a package that does not exist, OpenAI's for a model, and Docker's for an image
        // (the daemon's text, as a Kubernetes troubleshooting page quotes kubelet relaying it).
        let c = classifier();
        for message in [
            "npm error 404  The requested resource 'x@*' could not be found or you do not have permission to access it.",
            "The model `gpt-9` does not exist or you do not have access to it.",
            "Error response from daemon: pull access denied for 1.9.3, repository does not exist or may require 'docker login': denied: requested access to the resource is denied",
        ] {
            assert_eq!(c.classify(&failure(message)).category, Category::NotFound, "{message}");
        }
        let denied = failure("You do not have permission to access this repository.");
        assert_eq!(c.classify(&denied).category, Category::PermissionDenied);
    }

    #[test]
    fn nothing_matches_gives_unknown() {
        let got = classifier().classify(&failure("the frobnicator declined"));
        assert_eq!((got.category, &*got.rule), (Category::Unknown, NO_MATCH_RULE));
        assert!(!got.retryable);
    }

    #[test]
    fn user_rule_overrides_by_id_and_new_rules_come_first() {
        let defaults = default_rules().unwrap();
        let user = vec![
            RuleSpec {
                id: "http.404".into(),
                http_status: vec![StatusSpec::One(404)],
                category: Some(Category::Unavailable),
                ..Default::default()
            },
            RuleSpec {
                id: "acme.flaky".into(),
                message: vec!["frobnicator declined".into()],
                category: Some(Category::Unavailable),
                suggestion: Some("wait for the frobnicator".into()),
                ..Default::default()
            },
        ];
        let c = Classifier::build(&defaults, &user, categories(), 2048).unwrap();
        let got = c.classify(&Outcome { http_status: Some(404), ..failure("Not Found") });
        assert_eq!((got.category, &*got.rule), (Category::Unavailable, "http.404"));
        let got = c.classify(&failure("the frobnicator declined"));
        assert_eq!(&*got.rule, "acme.flaky");
        assert_eq!(&*got.suggestion, "wait for the frobnicator");
    }

    #[test]
    fn bad_rules_are_refused_with_their_id() {
        let bad_regex = RuleSpec {
            id: "mine".into(),
            message: vec!["(unclosed".into()],
            category: Some(Category::Unknown),
            ..Default::default()
        };
        let err = Classifier::build(&[], &[bad_regex], categories(), 2048).unwrap_err();
        assert!(err.to_string().contains("rule `mine`: `message`"), "{err}");
        let bad_status = RuleSpec {
            id: "s".into(),
            http_status: vec![StatusSpec::Range("600-700".into())],
            category: Some(Category::Unknown),
            ..Default::default()
        };
        let err = Classifier::build(&[], &[bad_status], categories(), 2048).unwrap_err();
        assert!(err.to_string().contains("600-700"), "{err}");
        let twice = RuleSpec {
            id: "a".into(),
            code: vec!["x".into()],
            category: Some(Category::Unknown),
            ..Default::default()
        };
        let err = Classifier::build(&[], &[twice.clone(), twice], categories(), 2048).unwrap_err();
        assert_eq!(err, RuleError::DuplicateId { id: "a".into() });
    }

    #[test]
    fn explain_lists_matches_best_first() {
        let c = classifier();
        let o = Outcome { http_status: Some(504), ..failure("upstream request timeout") };
        let (_, e) = c.explain(&o);
        assert_eq!(e.winner, e.matched[0].rule);
        assert!(e.matched.len() >= 2, "{:?}", e.matched);
        assert!(e.matched.windows(2).all(|w| w[0].score >= w[1].score));
        // The signals are what the rules read: a type and a gRPC code the message gives too.
        let (_, e) = c.explain(&failure("TimeoutError: The operation was aborted due to timeout"));
        assert_eq!((e.signals.exception_type.as_str(), e.winner.as_str()), ("TimeoutError", "exception.timeout"));
        let (_, e) = c.explain(&failure("rpc error: code = Unavailable desc = connection refused"));
        assert_eq!(e.signals.grpc_code, Some(14));
        let typed = Outcome { exception_type: " httpx.ReadTimeout ".into(), ..failure("boom") };
        assert_eq!(c.explain(&typed).1.signals.exception_type, "httpx.ReadTimeout");
    }

    #[test]
    fn an_aws_sdks_error_code_in_its_text_is_read_as_a_code() {
        // botocore's ClientError (boto3; the AWS CLI prints the same) and aws-sdk-go-v2's operation error,
        // in their formats: the code decides as it would sent as a field.
        let c = classifier();
        for (message, category) in [
            ("An error occurred (ExpiredToken) when calling the GetCallerIdentity operation: The security token included in the request is expired", Category::Auth),
            ("An error occurred (NoSuchKey) when calling the GetObject operation: The specified key does not exist.", Category::NotFound),
            // Bedrock's prompt too long: its code with its words (code.validation.context_length).
            ("An error occurred (ValidationException) when calling the InvokeModel operation: Input is too long for requested model.", Category::ContextLength),
            ("An error occurred (ThrottlingException) when calling the InvokeModel operation (reached max retries: 4): Rate exceeded", Category::RateLimited),
            ("operation error S3: GetObject, https response error StatusCode: 404, RequestID: X, HostID: Y, api error NoSuchKey: The specified key does not exist.", Category::NotFound),
            ("operation error STS: GetCallerIdentity, https response error StatusCode: 403, RequestID: X, api error ExpiredToken: The security token included in the request is expired", Category::Auth),
        ] {
            let typed = Outcome { exception_type: "botocore.exceptions.ClientError".into(), ..failure(message) };
            assert_eq!(c.classify(&typed).category, category, "{message}");
            assert_eq!(c.classify(&failure(message)).category, category, "as text: {message}");
        }
        // A code sent as a field is the one read.
        let sent = Outcome {
            code: "AccessDenied".into(),
            ..failure("An error occurred (NoSuchKey) when calling the GetObject operation")
        };
        assert_eq!(c.classify(&sent).category, Category::PermissionDenied);
    }

    #[test]
    fn azures_errors_are_read_by_their_code_type_and_words() {
        // azure-core's texts, as azure-mgmt-resource 26 and azure-storage-blob 12.31 raise them
        // (tests/data/classification/real/python_cases.py): Resource Manager's code on a line of
        // its own after the message, Storage's as `ErrorCode:`. Unknown before, or a bad key
        // escalated as a missing permission (by its 403).
        let c = classifier();
        for (exception, message, status, category) in [
            ("HttpResponseError", "(AuthorizationFailed) The client 'x' with object id 'x' does not have authorization to perform action 'Microsoft.Resources/subscriptions/resourcegroups/read' over scope '/subscriptions/s'.\nCode: AuthorizationFailed\nMessage: The client 'x'", Some(403), Category::PermissionDenied),
            ("ClientAuthenticationError", "(ExpiredAuthenticationToken) The access token expiry UTC time '11/29/2026 21:00:00' is earlier than current UTC time '11/29/2026 22:30:00'.\nCode: ExpiredAuthenticationToken\nMessage: The access token expiry", Some(401), Category::Auth),
            ("ClientAuthenticationError", "Server failed to authenticate the request. Make sure the value of Authorization header is formed correctly including the signature.\nRequestId:r\nTime:t\nErrorCode:AuthenticationFailed\nContent: <?xml", Some(403), Category::Auth),
            ("ResourceNotFoundError", "The specified blob does not exist.\nRequestId:r\nTime:t\nErrorCode:BlobNotFound\nContent: <?xml", Some(404), Category::NotFound),
            ("HttpResponseError", "The server is busy.\nRequestId:r\nTime:t\nErrorCode:ServerBusy\nContent: <?xml", Some(503), Category::Unavailable),
            ("CredentialUnavailableError", "EnvironmentCredential authentication unavailable. Environment variables are not fully configured.\nVisit https://aka.ms/azsdk/python/identity/environmentcredential/troubleshoot to troubleshoot this issue.", None, Category::Auth),
        ] {
            let typed = Outcome {
                exception_type: format!("azure.core.exceptions.{exception}"),
                http_status: status,
                ..failure(message)
            };
            assert_eq!(c.classify(&typed).category, category, "{message}");
            let text = failure(&format!("azure.core.exceptions.{exception}: {message}"));
            assert_eq!(c.classify(&text).category, category, "as text: {message}");
        }
    }

    #[test]
    fn an_oauth_grant_the_token_endpoint_refuses_is_auth() {
        // google-auth 2.63's RefreshError for a refresh token Google's endpoint refused (RFC 6749's
        // invalid_grant), often with no more than "Bad Request": it was `validation`, handed back to
        // the agent, which cannot mint a new grant; a human must sign in again.
        let c = classifier();
        let bare = "('invalid_grant: Bad Request', {'error': 'invalid_grant', 'error_description': 'Bad Request'})";
        let typed = Outcome { exception_type: "google.auth.exceptions.RefreshError".into(), ..failure(bare) };
        assert_eq!(c.classify(&typed).category, Category::Auth);
        assert_eq!(
            c.classify(&failure(&format!("google.auth.exceptions.RefreshError: {bare}"))).category,
            Category::Auth
        );
        assert_eq!(c.classify(&failure(bare)).category, Category::Auth);
        for code in ["invalid_grant", "invalid_client", "unauthorized_client"] {
            let sent = Outcome { code: code.into(), http_status: Some(400), ..failure("Bad Request") };
            assert_eq!(c.classify(&sent).category, Category::Auth, "{code}");
        }
    }

    #[test]
    fn telegrams_flood_control_is_a_rate_limit_and_a_scrapers_used_credits_a_quota() {
        // python-telegram-bot 22.8's RetryAfter (unknown before), aiogram's and Telethon's types, and
        // firecrawl-py 4.55's text for a plan out of credits (402) passed on without its type.
        let c = classifier();
        for (exception, message, category) in [
            ("telegram.error.RetryAfter", "Flood control exceeded. Retry in 23 seconds", Category::RateLimited),
            ("", "telegram.error.RetryAfter: Flood control exceeded. Retry in 23 seconds", Category::RateLimited),
            ("aiogram.exceptions.TelegramRetryAfter", "Telegram server says - Flood control exceeded on method 'SendMessage' in chat 1. Retry in 23 seconds.", Category::RateLimited),
            ("telethon.errors.rpcerrorlist.FloodWaitError", "A wait of 23 seconds is required (caused by SendMessageRequest)", Category::RateLimited),
            ("", "Payment Required: Failed to scrape. Insufficient credits to perform this request. For more credits, you can upgrade your plan at https://firecrawl.dev/pricing", Category::QuotaExceeded),
        ] {
            let outcome = Outcome { exception_type: exception.into(), ..failure(message) };
            assert_eq!(c.classify(&outcome).category, category, "{message}");
        }
    }

    #[test]
    fn a_command_line_tool_not_logged_in_a_port_taken_and_a_missing_container_are_read() {
        // What agents meet running command-line tools, as the tools print it (all `unknown` before):
        // the cloud CLIs' and Terraform's AWS provider's "log in first", a port another process holds
        // (Node's and Python's), Docker's daemon on a container it does not have, and Anthropic's answer
        // to a conversation whose tool call has no result.
        let c = classifier();
        for (message, category) in [
            ("ERROR: Please run 'az login' to setup account.", Category::Auth),
            ("To get started with GitHub CLI, please run:  gh auth login\nAlternatively, populate the GH_TOKEN environment variable with a GitHub API authentication token.", Category::Auth),
            ("ERROR: (gcloud.compute.instances.list) You do not currently have an active account selected.", Category::Auth),
            ("Error: No valid credential sources found", Category::Auth),
            ("Error: listen EADDRINUSE: address already in use :::3000", Category::Conflict),
            ("OSError: [Errno 98] Address already in use", Category::Conflict),
            ("Error response from daemon: No such container: web", Category::NotFound),
            ("messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_01. Each `tool_use` block must have a corresponding `tool_result` block in the next message.", Category::Validation),
        ] {
            assert_eq!(c.classify(&failure(message)).category, category, "{message}");
        }
        let sent = Outcome { code: "EADDRINUSE".into(), ..failure("listen failed") };
        assert_eq!(c.classify(&sent).category, Category::Conflict);
    }

    #[test]
    fn vector_stores_dimensions_and_a_providers_capacity_are_read() {
        // Texts of services that do not run here (the kubectl, ssh, PostgreSQL and Playwright ones
        // of the same commit are in holdout-real): Chroma's InvalidDimensionException (its docs),
        // Weaviate's distancer (adapters/repos/db/vector/hnsw/distancer), Mistral's 429 body.
        let c = classifier();
        for (message, category) in [
            ("Embedding dimension 384 does not match collection dimensionality 768", Category::Validation),
            ("vector lengths don't match: 1536 vs 768", Category::Validation),
            ("Service tier capacity exceeded for this model.", Category::RateLimited),
        ] {
            assert_eq!(c.classify(&failure(message)).category, category, "{message}");
        }
        // An SSH host key gone wrong is auth with its own suggestion: a human checks the key.
        let changed = "@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\n@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @\n@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\nIT IS POSSIBLE THAT SOMEONE IS DOING SOMETHING NASTY!";
        let classification = c.classify(&failure(changed));
        assert_eq!((classification.category, classification.rule.as_str()), (Category::Auth, "message.ssh_host_key"));
        assert!(classification.suggestion.contains("known_hosts"), "{}", classification.suggestion);
    }

    #[test]
    fn hubs_queues_and_saas_apis_are_read_by_their_words() {
        // As the services word them (not run here; npm's ERESOLVE, pip's externally managed
        // environment and the Hub's gated repo are real cases in holdout-real): the Hugging Face Hub's
        // gated-repo line alone, Salesforce's daily API limit, Notion's refused token, kafka-python's
        // and librdkafka's topic errors, OpenAI's answer to a tool call without its result, Vertex AI's
        // per-minute quota.
        let c = classifier();
        for (message, category) in [
            ("Cannot access gated repo for url https://huggingface.co/meta-llama/Llama-3.1-8B/resolve/main/config.json.", Category::PermissionDenied),
            ("REQUEST_LIMIT_EXCEEDED: TotalRequests Limit exceeded.", Category::QuotaExceeded),
            ("API token is invalid.", Category::Auth),
            ("kafka.errors.UnknownTopicOrPartitionError: This server does not host this topic-partition", Category::NotFound),
            ("KafkaError{code=UNKNOWN_TOPIC_OR_PART,val=3,str=\"Broker: Unknown topic or partition\"}", Category::NotFound),
            ("[Error 6] NotLeaderForPartitionError: This server is not the leader for that topic-partition.", Category::Unavailable),
            ("An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: call_8Vd2", Category::Validation),
            ("Quota exceeded for aiplatform.googleapis.com/generate_content_requests_per_minute_per_project_per_base_model with base model: gemini-1.5-pro. Please submit a quota increase request.", Category::RateLimited),
            ("Quota exceeded for quota metric 'Generate Content API requests per minute' and limit 'GenerateContent request limit per minute for a region' of service 'generativelanguage.googleapis.com'", Category::RateLimited),
        ] {
            assert_eq!(c.classify(&failure(message)).category, category, "{message}");
        }
        // The Hub's "not found" names gated repos in its advice: still not found.
        let missing = "Repository Not Found for url: https://huggingface.co/api/models/acme/nope.\nPlease make sure you specified the correct `repo_id` and `repo_type`.\nIf you are trying to access a private or gated repo, make sure you are authenticated.";
        assert_eq!(c.classify(&failure(missing)).category, Category::NotFound);
    }

    #[test]
    fn typescript_agents_sdks_are_read_by_their_words() {
        // The Vercel AI SDK's errors, Prisma's P1001 and ioredis's give-up, as each words them
        // (`unknown` before), alone and with the type the TypeScript client reads from each.
        let c = classifier();
        for (message, exception_type, category) in [
            ("No object generated: could not parse the response.", "AI_NoObjectGeneratedError", Category::Format),
            ("No object generated: response did not match schema.", "AI_NoObjectGeneratedError", Category::Format),
            ("Invalid prompt: messages must not be empty", "AI_InvalidPromptError", Category::Validation),
            ("Can't reach database server at `localhost:5432`\n\nPlease make sure your database server is running at `localhost:5432`.", "PrismaClientInitializationError", Category::Network),
            ("Reached the max retries per request limit (which is 20). Refer to \"maxRetriesPerRequest\" option for details.", "MaxRetriesPerRequestError", Category::Network),
        ] {
            assert_eq!(c.classify(&failure(message)).category, category, "{message}");
            assert_eq!(c.classify(&typed(exception_type, message)).category, category, "with {exception_type}: {message}");
        }
    }

    #[test]
    fn terraform_diagnostics_and_stripe_idempotency_keys() {
        // Terraform's diagnostics for a configuration that is wrong (as `terraform validate` and
        // `plan` print them, boxed; texts from public tutorials and issue threads), `unknown` before:
        // the agent fixes the configuration. Exit status 1, as Terraform's.
        let c = classifier();
        for message in [
            "╷\n│ Error: Invalid reference\n│\n│   on main.tf line 9, in resource \"docker_container\" \"nginx\":\n│    9:   name = tutorial\n│\n│ A reference to a resource type must be followed by at least one attribute access, specifying the resource name.\n╵",
            "╷\n│ Error: Reference to undeclared resource\n│ \n│   on main.tf line 18, in output \"random_bucket_name_id\":\n│   18:   value = random_string.bucket_name.id\n│ \n│ A managed resource \"random_string\" \"bucket_name\" has not been declared in the\n│ root module.\n╵",
            "Error: Unsupported attribute\n   on .terraform/modules/landing_zone/dynamic_values/config_modules/vsi/vsi.tf line 20, in module \"vsi_subnets\":\n   20:   subnet_zone_list = var.vpc_modules[each.value.vpc_name].subnet_zone_list",
            "Error: Unsupported argument\n\n  on main.tf line 4, in resource \"aws_instance\" \"web\":\n   4:   instance_typ = \"t3.micro\"\n\nAn argument named \"instance_typ\" is not expected here. Did you mean \"instance_type\"?",
        ] {
            let outcome = Outcome { exit_code: Some(1), ..failure(message) };
            assert_eq!(c.classify(&outcome).category, Category::Validation, "{message}");
        }
        // git 2.39's own "invalid reference" is a branch that does not exist (`git switch nope`).
        let branch = Outcome { exit_code: Some(128), ..failure("fatal: invalid reference: nope") };
        assert_eq!(c.classify(&branch).category, Category::NotFound);
        // Stripe's answer to an idempotency key reused with other parameters (a 400, its error type
        // idempotency_error, the Python SDK's IdempotencyError): a conflict (use a new key), not the
        // arguments' validation.
        let reused = "Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than 'order-42' if you meant to execute a different request.";
        for outcome in [
            Outcome { http_status: Some(400), code: "idempotency_error".into(), ..failure(reused) },
            Outcome { exception_type: "stripe.error.IdempotencyError".into(), ..failure(reused) },
            Outcome { http_status: Some(400), ..failure(reused) },
        ] {
            assert_eq!(c.classify(&outcome).category, Category::Conflict, "{outcome:?}");
        }
    }

    #[test]
    fn dotnets_http_request_exception_is_judged_by_its_status_and_words() {
        // .NET's HttpClient: dotnet/runtime's texts (HttpResponseMessage.EnsureSuccessStatusCode's
        // `net_http_message_not_success_statuscode_reason`, with its key as a trimmed build prints it;
        // SocketsHttpHandler's socket errors with the host and port; HttpClient's timeout), as C# agents
        // (Semantic Kernel's) meet them. Every one was `network` by its type before, a 401 and a 404
        // retried; a timeout was `cancelled`.
        let c = classifier();
        for (message, category) in [
            ("Response status code does not indicate success: 429 (Too Many Requests).", Category::RateLimited),
            ("Response status code does not indicate success: 401 (Unauthorized).", Category::Auth),
            ("Response status code does not indicate success: 403 (Forbidden).", Category::PermissionDenied),
            ("Response status code does not indicate success: 404 (Not Found).", Category::NotFound),
            ("Response status code does not indicate success: 409 (Conflict).", Category::Conflict),
            ("Response status code does not indicate success: 422 (Unprocessable Entity).", Category::Validation),
            ("Response status code does not indicate success: 500 (Internal Server Error).", Category::Internal),
            ("Response status code does not indicate success: 503 (Service Unavailable).", Category::Unavailable),
            ("Response status code does not indicate success: 404.", Category::NotFound),
            ("net_http_message_not_success_statuscode_reason, 401, Unauthorized", Category::Auth),
            ("Connection refused (localhost:5000)", Category::Network),
            ("Resource temporarily unavailable (api.openai.com:443)", Category::Network),
            ("No such host is known. (api.example.com:443)", Category::Network),
            ("The SSL connection could not be established, see inner exception.", Category::Network),
            ("An error occurred while sending the request.", Category::Network),
            ("", Category::Network),
        ] {
            let outcome = Outcome { exception_type: "System.Net.Http.HttpRequestException".into(), ..failure(message) };
            assert_eq!(c.classify(&outcome).category, category, "{message:?}");
            // Written as `ex.ToString()` begins, the type before the message.
            let text = format!("System.Net.Http.HttpRequestException: {message}");
            assert_eq!(c.classify(&failure(&text)).category, category, "{text:?}");
        }
        // The status sent beside it (.NET 5's HttpRequestException.StatusCode) decides as well.
        let sent = Outcome {
            exception_type: "HttpRequestException".into(),
            http_status: Some(429),
            ..failure("Response status code does not indicate success: 429 (Too Many Requests).")
        };
        assert_eq!(c.classify(&sent).category, Category::RateLimited);
        let timeout = "The request was canceled due to the configured HttpClient.Timeout of 100 seconds elapsing.";
        let canceled =
            Outcome { exception_type: "System.Threading.Tasks.TaskCanceledException".into(), ..failure(timeout) };
        assert_eq!(c.classify(&canceled).category, Category::Timeout);
        let own = Outcome {
            exception_type: "System.Threading.Tasks.TaskCanceledException".into(),
            ..failure("A task was canceled.")
        };
        assert_eq!(c.classify(&own).category, Category::Cancelled);
        // grpc-java's StatusRuntimeException, by its message (`UNAVAILABLE: io exception`, the code
        // in capitals): `unknown` before.
        let grpc =
            Outcome { exception_type: "io.grpc.StatusRuntimeException".into(), ..failure("UNAVAILABLE: io exception") };
        assert_eq!(c.classify(&grpc).category, Category::Unavailable);
    }

    #[test]
    fn java_and_rust_failures_as_their_libraries_write_them() {
        // holdout-real's r-java-* and r-rust-* (real/java, real/rust), each `unknown` before its rule:
        // the class name and getMessage() a Java agent sends, and a Rust error's chain as anyhow writes it.
        assert_categories(&[
            ("org.springframework.web.client.ResourceAccessException", "I/O error on GET request for \"http://127.0.0.1:8799/x\": null", Category::Network),
            ("org.springframework.web.client.ResourceAccessException", "I/O error on GET request for \"http://127.0.0.1:8787/x\": Read timed out", Category::Timeout),
            ("dev.langchain4j.exception.InternalServerException", "{\"error\":{\"message\":\"The server had an error while processing your request. Sorry about that!\",\"type\":\"server_error\",\"param\":null,\"code\":null}}", Category::Internal),
            ("dev.langchain4j.exception.InternalServerException", "{\"error\":{\"message\":\"The engine is currently overloaded, please try again later.\",\"type\":\"server_error\",\"param\":null,\"code\":null}}", Category::Unavailable),
            ("dev.langchain4j.exception.InvalidRequestException", "{\"error\":{\"message\":\"This model's maximum context length is 128000 tokens. However, your messages resulted in 131072 tokens. Please reduce the length of the messages.\",\"type\":\"invalid_request_error\",\"param\":\"messages\",\"code\":\"context_length_exceeded\"}}", Category::ContextLength),
            ("dev.langchain4j.exception.InvalidRequestException", "", Category::Validation),
            ("com.openai.errors.OpenAIIoException", "Request failed", Category::Network),
            ("java.nio.file.FileAlreadyExistsException", "/tmp/rebound-java5406011337374986667", Category::Conflict),
            ("org.postgresql.util.PSQLException", "Connection to 127.0.0.1:8799 refused. Check that the hostname and port are correct and that the postmaster is accepting TCP/IP connections.", Category::Network),
            ("", "error sending request for url (http://127.0.0.1:8799/v1/search)", Category::Network),
            ("", "error sending request for url (http://127.0.0.1:8787/sleep/v1/chat): operation timed out", Category::Timeout),
            ("", "error decoding response body: expected value at line 1 column 1", Category::Format),
            ("", "expected value at line 1 column 1", Category::Format),
            ("", "deadline has elapsed", Category::Timeout),
            ("", "invalid digit found in string", Category::Validation),
        ]);
    }

    #[test]
    fn a_used_up_quota_under_a_rate_limits_type_or_code_is_a_quota() {
        // LiteLLM 1.110's RateLimitError for OpenAI's insufficient_quota 429 (holdout-real's
        // r-py-litellm-quota: the code it carries is "429", the status), and passed on as text: it was
        // retried as a rate limit. Gemini's per-minute quota, through the same type and code, says the
        // same words and stays a rate limit; LiteLLM's own budget is a used-up quota.
        let c = classifier();
        let quota = "litellm.RateLimitError: RateLimitError: OpenAIException - You exceeded your current quota, please check your plan and billing details.";
        let per_minute = "litellm.RateLimitError: VertexAIException - {\"error\": {\"code\": 429, \"message\": \"You exceeded your current quota, please check your plan and billing details.\", \"status\": \"RESOURCE_EXHAUSTED\", \"details\": [{\"violations\": [{\"quotaId\": \"GenerateRequestsPerMinutePerProjectPerModel-FreeTier\"}]}]}}";
        for (outcome, category) in [
            (
                Outcome {
                    exception_type: "litellm.exceptions.RateLimitError".into(),
                    http_status: Some(429),
                    code: "429".into(),
                    ..failure(quota)
                },
                Category::QuotaExceeded,
            ),
            (
                Outcome { exception_type: "litellm.exceptions.RateLimitError".into(), ..failure(quota) },
                Category::QuotaExceeded,
            ),
            (Outcome { code: "429".into(), ..failure(quota) }, Category::QuotaExceeded),
            (
                Outcome {
                    exception_type: "litellm.exceptions.RateLimitError".into(),
                    http_status: Some(429),
                    code: "429".into(),
                    ..failure(per_minute)
                },
                Category::RateLimited,
            ),
            (Outcome { exception_type: "RateLimitError".into(), ..failure(per_minute) }, Category::RateLimited),
            (
                Outcome {
                    exception_type: "litellm.exceptions.BudgetExceededError".into(),
                    http_status: Some(422),
                    ..failure("Budget has been exceeded! Current cost: 0.02, Max budget: 0.01")
                },
                Category::QuotaExceeded,
            ),
            (
                Outcome {
                    http_status: Some(400),
                    ..failure("Budget has been exceeded! Current cost: 0.02, Max budget: 0.01")
                },
                Category::QuotaExceeded,
            ),
        ] {
            assert_eq!(c.classify(&outcome).category, category, "{outcome:?}");
        }
    }

    #[test]
    fn an_mcp_clients_own_failures_without_their_codes() {
        // The MCP TypeScript SDK 1.32 (holdout-real's r-node-mcp-*): a call before connecting, and a
        // stdio server whose command is not installed, as their texts alone say it (`unknown` before).
        let c = classifier();
        for (message, category) in [
            ("Not connected", Category::Network),
            ("Error: Not connected", Category::Network),
            ("Client is not connected", Category::Network),
            ("spawn rebound-no-such-mcp-server ENOENT", Category::NotFound),
        ] {
            assert_eq!(c.classify(&failure(message)).category, category, "{message}");
        }
        // Not every "not connected": an account not linked to a service is no socket's failure.
        assert_ne!(c.classify(&failure("Your GitHub account is not connected")).category, Category::Network);
    }

    #[test]
    fn what_helm_gh_docker_gcloud_and_kubectl_print() {
        // Texts from public READMEs, tests and threads that quote these tools' output (none runs here),
        // each `unknown` before: a DevOps agent's everyday refusals.
        let c = classifier();
        for (message, category) in [
            ("Error: INSTALLATION FAILED: cannot re-use a name that is still in use", Category::Conflict),
            ("Error: UPGRADE FAILED: another operation (install/upgrade/rollback) is in progress", Category::Conflict),
            ("docker: Error response from daemon: driver failed programming external connectivity on endpoint web (df68e7b4): Bind for 0.0.0.0:3000 failed: port is already allocated.", Category::Conflict),
            ("gh: To use GitHub CLI in a GitHub Actions workflow, set the GH_TOKEN environment variable. Example:\n  env:\n    GH_TOKEN: ${{ github.token }}", Category::Auth),
            ("GraphQL: Could not resolve to a Repository with the name 'acme/private-app'. (repository)", Category::NotFound),
            ("pull request create failed: GraphQL: No commits between main and feature (createPullRequest)", Category::Validation),
            ("ERROR: (gcloud.compute.instances.list) Some requests did not succeed:\n - Required 'compute.instances.list' permission for 'projects/acme'", Category::PermissionDenied),
            ("error: error validating \"deploy.yaml\": error validating data: ValidationError(Deployment.spec): unknown field \"replica\" in io.k8s.api.apps.v1.DeploymentSpec; if you choose to ignore these errors, turn validation off with --validate=false", Category::Validation),
        ] {
            let outcome = Outcome { exit_code: Some(1), ..failure(message) };
            assert_eq!(c.classify(&outcome).category, category, "{message}");
        }
    }

    #[test]
    fn an_agent_frameworks_word_that_the_model_answered_out_of_form() {
        // The model's answer did not fit, as agent frameworks say it (`unknown`, `not_found` or
        // `validation` before): pydantic-ai's UnexpectedModelBehavior after its output retries,
        // smolagents' AgentParsingError for a reply with no code block, LangChain's ReAct parser, the
        // OpenAI Agents SDK's tool result for arguments that do not parse.
        let c = classifier();
        for (exception_type, message) in [
            ("pydantic_ai.exceptions.UnexpectedModelBehavior", "Exceeded maximum retries (1) for output validation"),
            ("pydantic_ai.exceptions.UnexpectedModelBehavior", "Exceeded maximum retries (2) for result validation"),
            ("smolagents.utils.AgentParsingError", "Error in code parsing:\nYour code snippet is invalid, because the regex pattern ```(?:py|python)?\\s*\\n(.*?)\\n``` was not found in it."),
            ("langchain_core.exceptions.OutputParserException", "Invalid Format: Missing 'Action:' after 'Thought:'"),
            ("", "Invalid Format: Missing 'Action Input:' after 'Action:'"),
            // The OpenAI Agents SDK 0.20 (TypeScript) answers the model this for arguments that are not JSON.
            ("", "An error occurred while parsing tool arguments. Please try again with valid JSON."),
        ] {
            assert_eq!(c.classify(&typed(exception_type, message)).category, Category::Format, "{message}");
        }
    }

    /// A Python traceback of `frames` frames in a library, raising `exception` (its line and those
    /// after it), as `traceback.format_exception` writes one block of a chain.
    fn python_block(frames: usize, exception: &str) -> String {
        let mut block = String::from("Traceback (most recent call last):\n");
        for n in 0..frames {
            block.push_str(&format!(
                "  File \"/venv/lib/python3.11/site-packages/pydantic_ai/_agent_graph.py\", line {}, in run\n    \
                 return await self._call(ctx)\n           ^^^^^^^^^^^^^^^^^^^^^^^^\n",
                100 + n
            ));
        }
        block.push_str(exception);
        block.push('\n');
        block
    }

    /// `blocks` chained as `raise ... from ...` prints them, the first raised first.
    fn python_chain(blocks: &[String]) -> String {
        blocks.join("\nThe above exception was the direct cause of the following exception:\n\n")
    }

    #[test]
    fn python_causes_are_the_exceptions_each_block_of_a_chain_ends_with() {
        let trace = python_chain(&[
            python_block(2, "pydantic_core._pydantic_core.ValidationError: 1 validation error for get_weather\ncity\n  Field required [type=missing, input_value={'town': 'Paris'}, input_type=dict]\n\nmore after a blank line"),
            // A cause raised without a traceback of its own.
            "httpx.ConnectError: [Errno 111] Connection refused\n".into(),
            python_block(1, "tenacity.RetryError: RetryError[<Future at 0x7f state=finished raised ConnectError>]"),
        ]);
        assert_eq!(
            python_causes(&trace),
            [
                "pydantic_core._pydantic_core.ValidationError: 1 validation error for get_weather\ncity\n  Field required [type=missing, input_value={'town': 'Paris'}, input_type=dict]",
                "httpx.ConnectError: [Errno 111] Connection refused",
            ]
        );
        // The same with the sentence of an exception raised while handling another.
        let handled = trace.replacen(
            "The above exception was the direct cause of the following exception:",
            "During handling of the above exception, another exception occurred:",
            1,
        );
        assert_eq!(python_causes(&handled).len(), 2);
        // A long message is cut; a trace of one exception, or none, has no causes.
        let long = python_chain(&[
            python_block(1, &format!("ValueError: {}", "x".repeat(1000))),
            python_block(1, "RuntimeError: y"),
        ]);
        assert_eq!(python_causes(&long)[0].len(), CAUSE_BYTES);
        assert!(python_causes(&python_block(3, "KeyError: 'k'")).is_empty());
        assert!(python_causes("The above exception was the direct cause of the following exception:").is_empty());
    }

    #[test]
    fn an_agent_frameworks_failed_tool_call_is_read_from_its_chain_and_words() {
        // pydantic-ai 2.68 raises the same words for every way its model kept calling a tool wrongly;
        // the chain says which (r-py-pydantic-ai-*, whose traces are 7 to 10 KB: the cause is deep in them).
        let c = classifier();
        let wrapper = "pydantic_ai.exceptions.UnexpectedModelBehavior: Tool 'get_weather' exceeded max retries count of 1. Consider raising the retry limit, or see the docs on tool retries: https://pydantic.dev/docs/ai/tools-toolsets/tools-advanced/#tool-retries";
        let pai = |cause: &str| Outcome {
            exception_type: "pydantic_ai.exceptions.UnexpectedModelBehavior".into(),
            detail: python_chain(&[python_block(12, cause), python_block(12, wrapper)]),
            ..failure(wrapper.split_once(": ").expect("a type").1)
        };
        for (cause, category) in [
            ("pydantic_core._pydantic_core.ValidationError: 1 validation error for get_weather\ncity\n  Field required [type=missing, input_value={'town': 'Paris'}, input_type=dict]", Category::Validation),
            ("pydantic_core._pydantic_core.ValidationError: 1 validation error for get_weather\n  Invalid JSON: EOF while parsing an object at line 1 column 16 [type=json_invalid, input_value='{\"city\": \"Paris\"', input_type=str]", Category::Format),
            ("pydantic_ai.tool_manager._UnknownTool: Unknown tool name: 'get_wether'. Available tools: 'get_weather'", Category::UnknownTool),
        ] {
            let o = pai(cause);
            assert!(o.detail.len() > 2 * 1024, "the cause is past the head the rules read");
            assert_eq!(c.classify(&o).category, category, "{cause}");
        }
        // Its output retries, in 2.68's words.
        let prose = typed("pydantic_ai.exceptions.UnexpectedModelBehavior", "Exceeded maximum output retries (1)");
        assert_eq!(c.classify(&prose).category, Category::Format);
        // tenacity's RetryError around the last attempt's failure.
        let retried = Outcome {
            exception_type: "tenacity.RetryError".into(),
            detail: python_chain(&[
                python_block(12, "httpx.ConnectError: [Errno 111] Connection refused"),
                python_block(
                    12,
                    "tenacity.RetryError: RetryError[<Future at 0x7f3c state=finished raised ConnectError>]",
                ),
            ]),
            ..failure("RetryError[<Future at 0x7f3c state=finished raised ConnectError>]")
        };
        assert_eq!(c.classify(&retried).category, Category::Network);
        // A type some rule knows keeps its say over its causes'.
        let known = Outcome { exception_type: "TimeoutError".into(), ..retried.clone() };
        assert_eq!(c.classify(&known).category, Category::Timeout);
        // LangGraph 1.2's ToolNode and smolagents 1.26, in their own words (r-py-langgraph-*, r-py-smolagents-*).
        for (exception_type, message, category) in [
            ("", "Error: ToolInvocationError(\"Error invoking tool 'get_weather' with kwargs {'town': 'Paris'} with error:\\n city: Field required\\n Please fix the error and try again.\")\n Please fix your mistakes.", Category::Validation),
            ("langgraph.prebuilt.tool_node.ToolInvocationError", "Error invoking tool 'get_weather' with kwargs {'town': 'Paris'} with error:\n city: Field required\n Please fix the error and try again.", Category::Validation),
            ("smolagents.utils.AgentToolCallError", "Argument town is not in the tool's input schema", Category::Validation),
            ("", "Argument town is not in the tool's input schema", Category::Validation),
            ("smolagents.utils.AgentExecutionError", "Code parsing failed on line 1 due to: SyntaxError: '(' was never closed (<unknown>, line 1)", Category::Format),
            ("smolagents.utils.AgentExecutionError", "Code execution failed at line 'print(get_wether(city='Paris'))' due to: InterpreterError: Forbidden function evaluation: 'get_wether' is not among the explicitly allowed tools or defined/imported in the preceding code", Category::UnknownTool),
        ] {
            assert_eq!(c.classify(&typed(exception_type, message)).category, category, "{message}");
        }
    }

    #[test]
    fn search_and_data_tools_of_python_agents() {
        // tavily-python's MissingAPIKeyError, the wikipedia package's PageError and DisambiguationError,
        // yfinance's YFPricesMissingError: their own texts (as their sources write them), `unknown`
        // before. A key a human must set; a page or ticker that is not there; a title that needs a choice.
        assert_categories(&[
            ("tavily.errors.MissingAPIKeyError", "No API key provided. Please provide the api_key attribute or set the TAVILY_API_KEY environment variable.", Category::Auth),
            ("wikipedia.exceptions.PageError", "Page id \"Rsut\" does not match any pages. Try another id!", Category::NotFound),
            ("wikipedia.exceptions.DisambiguationError", "\"Mercury\" may refer to: \nMercury (planet)\nMercury (element)", Category::Validation),
            ("yfinance.exceptions.YFPricesMissingError", "$XYZQ: possibly delisted; no price data found  (period=1mo)", Category::NotFound),
        ]);
    }

    #[test]
    fn prismas_invalid_query_and_node_postgres_dropped_connection() {
        // Prisma 6's PrismaClientValidationError (its own text for a misspelt field) and node-postgres'
        // "Connection terminated unexpectedly" (its client's error when the server closes the
        // connection): `unknown` before.
        let c = classifier();
        let prisma = "\nInvalid `prisma.user.findMany()` invocation:\n\n{\n  where: {\n    emial: \"a@b.c\"\n  }\n}\n\nUnknown argument `emial`. Did you mean `email`? Available options are marked with ?.";
        for (outcome, category) in [
            (typed("PrismaClientValidationError", prisma), Category::Validation),
            (failure(prisma), Category::Validation),
            (failure("Connection terminated unexpectedly"), Category::Network),
        ] {
            assert_eq!(c.classify(&outcome).category, category, "{outcome:?}");
        }
    }

    #[test]
    fn enoent_on_a_connection_is_nothing_listening() {
        // Node 20's net.connect to a Unix socket that is not there, the docker SDK 7.2 with no daemon
        // (as the Python client reads it: ENOENT from the chain); a file that is missing stays not found.
        let c = classifier();
        for message in [
            "connect ENOENT /var/run/docker.sock",
            "Error while fetching server API version: ('Connection aborted.', FileNotFoundError(2, 'No such file or directory'))",
        ] {
            let outcome = Outcome { code: "ENOENT".into(), ..failure(message) };
            assert_eq!(c.classify(&outcome).rule.as_str(), "code.enoent.connection", "{message}");
            assert_eq!(c.classify(&outcome).category, Category::Network, "{message}");
        }
        let missing =
            Outcome { code: "ENOENT".into(), ..failure("ENOENT: no such file or directory, open 'notes.txt'") };
        assert_eq!(c.classify(&missing).category, Category::NotFound);
    }

    #[test]
    fn a_bodys_class_of_error_gives_way_to_the_status_and_the_words() {
        // OpenAI's 401 for a missing API key (`"type": "invalid_request_error", "code": null`, as a
        // client that reads a body's code else its type sends it): auth by its status, as any
        // words outrank it too; alone, validation (was validation whatever the status).
        let c = classifier();
        let missing = "HTTP 401 Unauthorized: {\"error\": {\"message\": \"You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).\", \"type\": \"invalid_request_error\", \"param\": null, \"code\": null}}";
        let with_status = Outcome { http_status: Some(401), code: "invalid_request_error".into(), ..failure(missing) };
        assert_eq!(
            (c.classify(&with_status).category, c.classify(&with_status).rule.as_str()),
            (Category::Auth, "http.401")
        );
        let said = Outcome {
            code: "invalid_request_error".into(),
            ..failure("Incorrect API key provided: sk-proj-****abcd.")
        };
        assert_eq!(c.classify(&said).category, Category::Auth);
        let alone = Outcome { code: "Invalid_Request".into(), ..failure("") };
        assert_eq!(
            (c.classify(&alone).category, c.classify(&alone).rule.as_str()),
            (Category::Validation, "code.invalid_request")
        );
        // With billing words it is still a used-up quota (code.validation.quota).
        let credits = Outcome {
            http_status: Some(400),
            code: "invalid_request_error".into(),
            ..failure("Your credit balance is too low to access the Anthropic API.")
        };
        assert_eq!(c.classify(&credits).category, Category::QuotaExceeded);
    }

    #[test]
    fn the_ai_sdks_error_names_are_exception_rules() {
        // The Vercel AI SDK 6's own messages (holdout-real's r-node-ai-*), whose words say too little
        // (a model or provider missing was `unknown`) or the wrong thing (a tool call that does not fit
        // the schema is the model's `format`, as the kind invalid_tool_call is, not `validation`).
        let c = classifier();
        for (exception_type, message, category) in [
            ("AI_NoSuchToolError", "Model tried to call unavailable tool 'search_web'. Available tools: get_weather.", Category::UnknownTool),
            ("AI_InvalidToolInputError", "Invalid input for tool get_weather: Type validation failed: Value: {\"city\":42}.\nError message: [{\"expected\": \"string\", \"code\": \"invalid_type\"}]", Category::Format),
            ("AI_InvalidToolInputError", "Invalid input for tool get_weather: JSON parsing failed: Text: {\"city\": \"Par.\nError message: Unterminated string in JSON at position 13", Category::Format),
            ("AI_LoadAPIKeyError", "OpenAI API key is missing. Pass it using the 'apiKey' parameter or the OPENAI_API_KEY environment variable.", Category::Auth),
            ("AI_NoSuchModelError", "No such languageModel: gpt-9", Category::NotFound),
            ("AI_NoSuchProviderError", "No such provider: anthropic (available providers: openai)", Category::NotFound),
            ("AI_UnsupportedFunctionalityError", "'image parts' functionality not supported.", Category::Validation),
        ] {
            let classification = c.classify(&typed(exception_type, message));
            assert_eq!(classification.category, category, "{exception_type}: {message}");
            assert!(classification.rule.starts_with("exception."), "{exception_type}: {}", classification.rule);
        }
    }

    #[test]
    fn a_click_another_element_takes_is_a_conflict() {
        // chromedriver's answer (through Selenium) and Playwright's call log when an overlay takes the
        // click: the page's state is in the way, not the locator; read the page again first.
        let c = classifier();
        for message in [
            "Message: element click intercepted: Element <button id=\"go\">...</button> is not clickable at point (512, 300). Other element would receive the click: <div class=\"overlay\"></div>",
            "  - <div class=\"overlay\"></div> intercepts pointer events\n  - retrying click action",
        ] {
            assert_eq!(c.classify(&failure(message)).category, Category::Conflict, "{message}");
        }
    }

    #[test]
    fn an_e2b_sandbox_past_its_lifetime_is_gone_not_slow() {
        // The e2b SDKs' error for a call to a sandbox whose lifetime ran out (a 502), Python's and
        // JavaScript's, with their types and as text: a timeout, retried to fail the same way, before.
        let c = classifier();
        let python = "502: This error is likely due to sandbox timeout. You can modify the sandbox timeout by passing 'timeout' when starting the sandbox or calling '.set_timeout' on the sandbox with the desired timeout.";
        let js = "502: This error is likely due to sandbox timeout. You can modify the sandbox timeout by passing 'timeoutMs' when starting the sandbox or calling '.setTimeout' on the sandbox with the desired timeout.";
        for outcome in [
            Outcome { exception_type: "e2b.exceptions.TimeoutException".into(), ..failure(python) },
            failure(&format!("e2b.exceptions.TimeoutException: {python}")),
            Outcome { exception_type: "TimeoutError".into(), ..failure(js) },
            failure(&format!("TimeoutError: {js}")),
            Outcome {
                exception_type: "SandboxNotFoundError".into(),
                ..failure("Sandbox is probably not running anymore")
            },
        ] {
            let got = c.classify(&outcome);
            assert_eq!(got.category, Category::NotFound, "{outcome:?}");
            assert!(got.suggestion.contains("start a new one"), "{}", got.suggestion);
        }
        // Any other timeout stays one.
        let other = Outcome { exception_type: "TimeoutException".into(), ..failure("Request timed out") };
        assert_eq!(c.classify(&other).category, Category::Timeout);
    }

    #[test]
    fn a_mail_or_file_server_refusing_a_login_is_auth() {
        // smtplib's SMTPAuthenticationError for Gmail's 535 (holdout-real's r-py-smtp-auth), ftplib's
        // 530; kafka-python's NoBrokersAvailable and botocore's NoRegionError beside them (all unknown before).
        let c = classifier();
        for (exception, message, category) in [
            ("smtplib.SMTPAuthenticationError", "(535, b'5.7.8 Username and Password not accepted. For more information, go to\\n5.7.8  https://support.google.com/mail/?p=BadCredentials')", Category::Auth),
            ("", "(535, b'5.7.8 Username and Password not accepted.')", Category::Auth),
            ("ftplib.error_perm", "530 Login incorrect.", Category::Auth),
            ("kafka.errors.NoBrokersAvailable", "NoBrokersAvailable", Category::Network),
            ("botocore.exceptions.NoRegionError", "You must specify a region.", Category::Validation),
        ] {
            let outcome = Outcome { exception_type: exception.into(), ..failure(message) };
            assert_eq!(c.classify(&outcome).category, category, "{message}");
        }
    }

    #[test]
    fn an_mcp_servers_unknown_tool_is_an_unknown_tool_under_its_invalid_params_code() {
        // MCP servers answer a call to a tool they lack with -32602 (invalid params), as they answer
        // bad arguments: the words tell the two apart. The TypeScript SDK's McpError writes its code
        // into its text, which is read as the code when the outcome sends none.
        let c = classifier();
        for (message, category) in [
            ("MCP error -32602: Tool search_web not found", Category::UnknownTool),
            ("MCP error -32602: Unknown tool: search_web", Category::UnknownTool),
            ("MCP error -32602: Invalid params", Category::Validation),
            // The Python SDK's (mcp 2.3) for a resource it does not have.
            ("MCP error -32602: Unknown resource: file:///notes.txt", Category::NotFound),
            ("MCP error -32602: Input validation error: Invalid arguments for tool add: [...]", Category::Validation),
            ("MCP error -32001: Request timed out", Category::Timeout),
        ] {
            assert_eq!(c.classify(&failure(message)).category, category, "{message}");
            let sent = Outcome { code: message[10..16].to_string(), ..failure(message) };
            assert_eq!(c.classify(&sent).category, category, "with its code: {message}");
        }
        // JSON-RPC's internal error wraps whatever a handler threw: its words decide, in text or
        // with the code sent as a field (rule code.mcp.internal scores below words, as grpc.unknown);
        // alone, it is internal.
        let internal = "MCP error -32603: connect ECONNREFUSED 127.0.0.1:8080";
        assert_eq!(c.classify(&failure(internal)).category, Category::Network);
        let sent = Outcome { code: "-32603".into(), ..failure(internal) };
        assert_eq!(c.classify(&sent).category, Category::Network);
        let sent = Outcome { code: "-32603".into(), ..failure("the frobnicator declined") };
        assert_eq!(
            (c.classify(&sent).category, c.classify(&sent).rule.as_str()),
            (Category::Internal, "code.mcp.internal")
        );
    }

    #[test]
    fn a_grpc_unknown_gives_way_to_its_words() {
        // grpc-go's text for a plain error, as a Go service or kubelet relays it: `Unknown` is no
        // signal, the words after it are.
        let c = classifier();
        for (message, category) in [
            ("rpc error: code = Unknown desc = context deadline exceeded", Category::Timeout),
            ("rpc error: code = Unknown desc = connection refused", Category::Network),
            ("rpc error: code = Unknown desc = the frobnicator declined", Category::Unknown),
            ("rpc error: code = Unavailable desc = the frobnicator declined", Category::Unavailable),
        ] {
            assert_eq!(c.classify(&failure(message)).category, category, "{message}");
        }
        // Sent as a field, as grpcio answers an exception its handler did not map ("Exception
        // calling application: ..."): the words decide (rule grpc.unknown scores below them), and
        // so does every other signal; alone, it is internal.
        let unknown = |message: &str| Outcome { grpc_code: Some(crate::named_codes::GRPC_UNKNOWN), ..failure(message) };
        for (outcome, category) in [
            (unknown("Exception calling application: Read timed out"), Category::Timeout),
            (
                unknown("Exception calling application: [Errno 13] Permission denied: '/data/x'"),
                Category::PermissionDenied,
            ),
            (Outcome { http_status: Some(503), ..unknown("the frobnicator declined") }, Category::Unavailable),
            (unknown("the frobnicator declined"), Category::Internal),
        ] {
            assert_eq!(c.classify(&outcome).category, category, "{}", outcome.message);
        }
        assert_eq!(c.classify(&unknown("the frobnicator declined")).rule.as_str(), "grpc.unknown");
    }

    #[test]
    fn a_timeout_over_an_unreachable_server_is_the_network() {
        // pymongo's ServerSelectionTimeoutError at a closed port (holdout-real's r-py-pymongo-refused),
        // reported as the Python client reports it, with the kind its type's name gives, and in words alone.
        let c = classifier();
        let refused = "127.0.0.1:8799: [Errno 111] Connection refused (configured timeouts: socketTimeoutMS: \
                       20000.0ms, connectTimeoutMS: 20000.0ms), Timeout: 0.5s, Topology Description: <...>";
        let silent = "127.0.0.1:8798: timed out (configured timeouts: socketTimeoutMS: 300.0ms), Timeout: 0.8s";
        let exception = "pymongo.errors.ServerSelectionTimeoutError";
        let timed_out = |message| Outcome { kind: Some(OutcomeKind::Timeout), ..typed(exception, message) };
        let read = |outcome: &Outcome| (c.classify(outcome).category, c.classify(outcome).rule.to_string());
        assert_eq!(read(&timed_out(refused)), (Category::Network, "kind.timeout.unreachable".into()));
        assert_eq!(read(&typed(exception, refused)), (Category::Network, "message.unreachable".into()));
        // A server that never answers is the timeout it says, and so are a name lookup's own words.
        assert_eq!(read(&timed_out(silent)), (Category::Timeout, "kind.timeout".into()));
        assert_eq!(c.classify(&typed(exception, silent)).category, Category::Timeout);
        let dns = "dial tcp: lookup db.internal: no such host; gave up after 30s: timed out";
        assert_eq!(c.classify(&failure(dns)).category, Category::Network);
        // The two rules read the same words (rules.toml cannot share a list): kept so.
        let rules = default_rules().expect("the default rules");
        let words = |id: &str| rules.iter().find(|r| r.id == id).map(|r| r.message.clone());
        assert_eq!(words("kind.timeout.unreachable"), words("message.unreachable"));
    }

    #[test]
    fn data_store_and_transport_clients_read_as_what_happened() {
        // Their texts as holdout-real's r-py-websockets-*, r-py-paramiko-* and r-py-pymongo-* have them.
        let closed = "websockets.exceptions.ConnectionClosedError";
        assert_categories(&[
            (
                closed,
                "received 1011 (internal error) internal error; then sent 1011 (internal error) internal error",
                Category::Internal,
            ),
            (
                closed,
                "received 1013 (try again later) overloaded; then sent 1013 (try again later) overloaded",
                Category::Unavailable,
            ),
            (
                closed,
                "received 1008 (policy violation) invalid api key; then sent 1008 (policy violation) invalid api key",
                Category::Auth,
            ),
            (
                closed,
                "received 1008 (policy violation) too many subscriptions; then sent 1008 (policy violation)",
                Category::PermissionDenied,
            ),
            // The close code the client sent is not the server's answer; without one, the connection's loss.
            (closed, "sent 1011 (internal error) keepalive ping timeout; no close frame received", Category::Network),
            (closed, "no close frame received or sent", Category::Network),
            ("paramiko.ssh_exception.SSHException", "No existing session", Category::Timeout),
            ("paramiko.ssh_exception.SSHException", "Error reading SSH protocol banner", Category::Network),
            ("paramiko.ssh_exception.SSHException", "Incompatible version (1.5 instead of 2.0)", Category::Unknown),
            (
                "pymongo.errors.InvalidURI",
                "Username and password must be escaped according to RFC 3986, use urllib.parse.quote_plus",
                Category::Validation,
            ),
            // Node's clients (r-node-*): the mongodb driver's, ssh2's at a port that speaks no SSH, Qdrant's timeout.
            ("MongoParseError", "Invalid connection string", Category::Validation),
            ("", "Connection lost before handshake", Category::Network),
            ("QdrantClientTimeoutError", "This operation was aborted", Category::Timeout),
            // Go's (r-go-pgx-*, r-go-mongo-*, r-go-ssh-*).
            (
                "pgconn.ConnectError",
                "failed to connect to `user=agent database=app`:\n\t127.0.0.1:8798 (127.0.0.1): dial error: timeout: \
                 context deadline exceeded",
                Category::Timeout,
            ),
            (
                "pgconn.ConnectError",
                "failed to connect to `user=agent database=app`: 127.0.0.1:8799 (127.0.0.1): dial error: dial tcp \
                 127.0.0.1:8799: connect: connection refused",
                Category::Network,
            ),
            ("pgconn.ParseConfigError", "cannot parse `postgres://agent:xxxxx@ss:xxxxxx@127.0.0.1:8799/app`: invalid port", Category::Validation),
            ("", "error parsing uri: unescaped @ sign in user info", Category::Validation),
            ("", "ssh: handshake failed: ssh: unable to authenticate, attempted methods [none password], no supported methods remain", Category::Auth),
            ("", "ssh: handshake failed: ssh: host key mismatch", Category::Auth),
            ("", "ssh: handshake failed: knownhosts: key is unknown", Category::Auth),
            // Message brokers' (r-py-pika-*, r-py-aiokafka-*): pika's says no more than its type.
            ("pika.exceptions.AMQPConnectionError", "AMQPConnectionError", Category::Network),
            (
                "aiokafka.errors.KafkaConnectionError",
                "KafkaConnectionError: Unable to bootstrap from [('127.0.0.1', 8799, <AddressFamily.AF_INET: 2>)]",
                Category::Network,
            ),
        ]);
        // axios's timeout comes with a network code, and its words say what happened.
        let c = classifier();
        let axios = |message: &str| Outcome { code: "ECONNABORTED".into(), ..typed("AxiosError", message) };
        assert_eq!(c.classify(&axios("timeout of 500ms exceeded")).category, Category::Timeout);
        assert_eq!(c.classify(&axios("Request aborted")).category, Category::Network);
    }

    #[test]
    fn grpc_names_parse() {
        assert_eq!(grpc_code_from_name("UNAVAILABLE"), Some(14));
        assert_eq!(grpc_code_from_name("Deadline Exceeded"), Some(4));
        assert_eq!(grpc_code_from_name("canceled"), Some(1));
        assert_eq!(grpc_code_from_name("DeadlineExceeded"), Some(4));
        assert_eq!(grpc_code_from_name("nope"), None);
        // A rule's code name comes from the config file: other scripts must not panic.
        assert_eq!(grpc_code_from_name("éUnavailable"), None);
    }

    #[test]
    fn prefix_and_suffix_respect_char_boundaries() {
        let s = "ééé";
        assert_eq!(prefix(s, 3), "é");
        assert_eq!(suffix(s, 3), "é");
    }
}
