// Secret redaction for the text the fallback writes, so that no API key, token
// or password in a tool's error reaches the LLM or a log while the sidecar is
// down. A port of the sidecar's src/redact.rs, which is the source of truth:
// the same kinds in the same order, the same capture groups, the same
// `[REDACTED:kind]` placeholders, the same needles and the same passes.
//
// The patterns run with the `u` flag, so that they count characters and, with
// `i`, fold case as Rust's `(?i)` does (`ſ` is an `s`, the Kelvin sign a `k`).
// Rust's `(?-u:\b)` is an ASCII word boundary: so is `\b` with `u` alone, but
// with `u` and `i` JavaScript's `\b` counts `ſ` and the Kelvin sign as word
// characters, so there the pattern's leading `\b` is checked in code instead.

/** One kind of secret: a pattern and which capture group is the secret (0: all of it). */
export interface SecretPattern {
  kind: string;
  group: number;
  /** The pattern; `{space}` in a class stands for Rust's `\s` (see {@link SPACE}). */
  pattern: string;
  /** Rust's `(?i)`: JavaScript has no inline flags before Node 23, so the whole pattern is case-insensitive. */
  ignoreCase?: boolean;
  /**
   * Rust's `(?-i:...)` around the secret's group, within `(?i)`: what the group must also match, whole and
   * case-sensitively (`{space}` as in `pattern`). In `pattern` the group is written as it reads under `i`.
   */
  caseSensitiveSecret?: string;
}

/**
 * src/redact.rs's PATTERNS, ordered: specific shapes first, generic
 * `name=value` pairs last. Rust's `(?-u:\b)` is `\b`, and `\A` and `\z` are `^`
 * and `$` (without the `m` flag); `[\s\S]`, any character in both, is kept as it is.
 * @internal Exported for tests.
 */
export const PATTERNS: readonly SecretPattern[] = [
  {
    kind: "private_key",
    group: 0,
    pattern: String.raw`-----BEGIN[A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----[\s\S]*?(?:-----END[A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----|$)`,
  },
  { kind: "anthropic_key", group: 0, pattern: String.raw`\bsk-ant-[A-Za-z0-9_\-]{10,}` },
  { kind: "stripe_key", group: 0, pattern: String.raw`\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{10,}|\bwhsec_[A-Za-z0-9+/=]{20,}` },
  { kind: "openai_key", group: 0, pattern: String.raw`\bsk-(?:proj-|svcacct-|admin-|None-)?[A-Za-z0-9_\-]{20,}` },
  { kind: "google_key", group: 0, pattern: String.raw`\bAIza[0-9A-Za-z_\-]{35}` },
  { kind: "aws_access_key", group: 0, pattern: String.raw`\b(?:AKIA|ASIA|ABIA|ACCA|AIDA|AROA)[0-9A-Z]{16}\b` },
  {
    kind: "aws_secret_key",
    group: 2,
    pattern: String.raw`(aws_?secret_?access_?key|secret_?access_?key|aws_?secret)["']?[{space}]*[:=][{space}]*["']?([A-Za-z0-9/+=]{40})`,
    ignoreCase: true,
  },
  { kind: "github_token", group: 0, pattern: String.raw`\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{30,}|\bgithub_pat_[A-Za-z0-9_]{22,}` },
  { kind: "slack_token", group: 0, pattern: String.raw`\bxox[abposre]-[A-Za-z0-9\-]{10,}` },
  { kind: "gitlab_token", group: 0, pattern: String.raw`\b(?:glpat|gldt|glrt|glptt|glcbt|gloas)-[A-Za-z0-9_\-]{20,}` },
  { kind: "npm_token", group: 0, pattern: String.raw`\bnpm_[A-Za-z0-9]{36}\b` },
  { kind: "huggingface_token", group: 0, pattern: String.raw`\bhf_[A-Za-z0-9]{30,}` },
  { kind: "sendgrid_key", group: 0, pattern: String.raw`\bSG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}` },
  {
    kind: "slack_webhook",
    group: 1,
    pattern: String.raw`\bhooks\.slack\.com/(?:services|workflows|triggers)/([A-Za-z0-9_/]{16,})`,
    ignoreCase: true,
  },
  {
    kind: "discord_webhook",
    group: 1,
    pattern: String.raw`\bdiscord(?:app)?\.com/api/webhooks/[0-9]+/([A-Za-z0-9_\-]{16,})`,
    ignoreCase: true,
  },
  { kind: "jwt", group: 0, pattern: String.raw`\beyJ[A-Za-z0-9_\-]{5,}\.eyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]{5,}` },
  { kind: "bearer_token", group: 1, pattern: String.raw`\bbearer[{space}]+([A-Za-z0-9._~+/=\-]{8,})`, ignoreCase: true },
  { kind: "basic_auth", group: 1, pattern: String.raw`\bbasic[{space}]+([A-Za-z0-9+/]{8,}={0,2})`, ignoreCase: true },
  {
    kind: "authorization",
    group: 1,
    pattern: String.raw`\b(?:[a-z0-9_]*_)?authorization["']?[ \t]*[:=][ \t]*["']?(?:\[?[a-z][a-z0-9._\-]*[ \t]+)?([^{space}"',;\]]{4,})`,
    ignoreCase: true,
  },
  {
    kind: "cookie",
    group: 1,
    pattern: String.raw`\b(?:[a-z0-9_]*_)?(?:set-)?cookie["']?[ \t]*[:=][ \t]*["']?((?:=\\?"(?:[^\r\n",]*"|[^\r\n",;)}\]{space}][^\r\n"]*)|[^\r\n"'\]]){3,})`,
    ignoreCase: true,
  },
  {
    kind: "url_signature",
    group: 2,
    pattern: String.raw`[?&;](sig|x-amz-signature|x-goog-signature)=([^{space}&"'#;)\]>]{8,})`,
    ignoreCase: true,
  },
  {
    kind: "url_password",
    group: 1,
    pattern: String.raw`\b[a-z][a-z0-9+.\-]{1,20}://[^{space}:/?#]*:([^{space}/?#]+|[^{space}/?#]*[^{space}/?#0-9][^{space}/]*|[^{space}/?#@\[\]]*[^{space}/?#@0-9\[\]][^{space}@\]]*|[0-9]*#[^{space}/]*)@`,
    ignoreCase: true,
  },
  {
    kind: "secret_argument",
    group: 1,
    pattern: String.raw`["']--?[a-z0-9_\-]*(?:password|passwd|passphrase|pwd|pass|token|secret|api[_\-]?key|apikey)["'],?[ \t]*["']([^"'\r\n\-][^"'\r\n]*)`,
    ignoreCase: true,
  },
  {
    kind: "secret_argument",
    group: 1,
    // Rust's `(?-i:([^\s"'\-]*[^\s"'\-a-z][^\s"']*))`: the group takes any word not starting with `-`, and
    // caseSensitiveSecret asks it for something besides lower-case letters, which `[^a-z]` under `i` cannot.
    pattern: String.raw`(?:^|[{space}(])--?[a-z0-9_\-]*(?:password|passwd|passphrase|pwd|pass|token|secret|api[_\-]?key|apikey)[ \t]+([^{space}"'\-][^{space}"']*)`,
    ignoreCase: true,
    caseSensitiveSecret: String.raw`[^{space}"'\-]*[^{space}"'\-a-z][^{space}"']*`,
  },
  {
    kind: "password",
    group: 2,
    pattern: String.raw`\b([a-z0-9_]*(?:password|passwd|passphrase)|(?:[a-z0-9_]*_)?(?:pwd|pass))(?:["']?[{space}]*[:=][{space}]*["']?|["']?[{space}]*=>[{space}]*["']?)([^{space}"'&,;}\])]{3,})|\(using password: (?:YES|NO)\)`,
    ignoreCase: true,
  },
  {
    kind: "api_key",
    group: 2,
    pattern: String.raw`\b([a-z0-9_]*(?:api[_\-]?key|apikey|x-api-key|access[_\-]?key|account[_\-]?key))(?:["']?[{space}]*[:=][{space}]*["']?)([^{space}"'&,;}\])]{6,})`,
    ignoreCase: true,
  },
  {
    kind: "secret",
    group: 2,
    pattern: String.raw`\b([a-z0-9_]*(?:client[_\-]?secret|secret[_\-]?key|secret|private[_\-]?key))(?:["']?[{space}]*[:=][{space}]*["']?)([^{space}"'&,;}\])]{6,})`,
    ignoreCase: true,
  },
  {
    kind: "token",
    group: 2,
    pattern: String.raw`\b([a-z0-9_]*(?:access[_\-]?token|refresh[_\-]?token|auth[_\-]?token|id[_\-]?token|session[_\-]?token|token))(?:["']?[{space}]*[:=][{space}]*["']?)([^{space}"'&,;}\])]{8,})`,
    ignoreCase: true,
  },
];

/**
 * The inside of a class matching Rust's `\s`, Unicode White_Space: JavaScript's
 * `\s` lacks U+0085 (NEL) and adds U+FEFF (BOM), either of which would move
 * where a name, a separator or a value ends.
 */
const SPACE = String.raw`\t-\r \x85\xA0\u1680\u2000-\u200A\u2028\u2029\u202F\u205F\u3000`;

/**
 * src/redact.rs's NEEDLES: literals (lower case) of which every match of a
 * pattern holds one, ASCII case aside, each with the kinds it lets through.
 * Text with none of them, most error text, is read once, cheaply; text with
 * some is matched against those patterns only.
 * @internal Exported for tests.
 */
export const NEEDLES: readonly (readonly [string, readonly string[]])[] = [
  ["-----begin", ["private_key"]],
  ["sk-", ["anthropic_key", "openai_key"]],
  ["sk_", ["stripe_key"]],
  ["whsec_", ["stripe_key"]],
  ["rk_", ["stripe_key"]],
  ["aiza", ["google_key"]],
  ["akia", ["aws_access_key"]],
  ["asia", ["aws_access_key"]],
  ["abia", ["aws_access_key"]],
  ["acca", ["aws_access_key"]],
  ["aida", ["aws_access_key"]],
  ["aroa", ["aws_access_key"]],
  ["secret", ["aws_secret_key", "secret_argument", "secret"]],
  ["ghp_", ["github_token"]],
  ["gho_", ["github_token"]],
  ["ghu_", ["github_token"]],
  ["ghs_", ["github_token"]],
  ["ghr_", ["github_token"]],
  ["github_pat_", ["github_token"]],
  ["xox", ["slack_token"]],
  ["glpat-", ["gitlab_token"]],
  ["gldt-", ["gitlab_token"]],
  ["glrt-", ["gitlab_token"]],
  ["glptt-", ["gitlab_token"]],
  ["glcbt-", ["gitlab_token"]],
  ["gloas-", ["gitlab_token"]],
  ["npm_", ["npm_token"]],
  ["hf_", ["huggingface_token"]],
  ["sg.", ["sendgrid_key"]],
  ["hooks.slack.com", ["slack_webhook"]],
  ["/api/webhooks/", ["discord_webhook"]],
  ["eyj", ["jwt"]],
  ["bearer", ["bearer_token"]],
  ["basic", ["basic_auth"]],
  ["authorization", ["authorization"]],
  ["cookie", ["cookie"]],
  ["sig=", ["url_signature"]],
  ["signature=", ["url_signature"]],
  ["://", ["url_password"]],
  ["pass", ["secret_argument", "password"]],
  ["pwd", ["secret_argument", "password"]],
  ["api_key", ["secret_argument", "api_key"]],
  ["api-key", ["secret_argument", "api_key"]],
  ["apikey", ["secret_argument", "api_key"]],
  ["access_key", ["api_key"]],
  ["access-key", ["api_key"]],
  ["accesskey", ["api_key"]],
  ["account_key", ["api_key"]],
  ["account-key", ["api_key"]],
  ["accountkey", ["api_key"]],
  ["private", ["secret"]],
  ["token", ["secret_argument", "token"]],
];

/** A pattern ready to match. */
interface CompiledSecret {
  kind: string;
  group: number;
  /** Flags `g` to find every match, `d` for where the secret group is, `u`, and `i` for `(?i)`. */
  regex: RegExp;
  /** The pattern's leading `\b`, taken out of `regex` and checked by {@link isAsciiBoundary}. */
  leadingBoundary: boolean;
  /** {@link SecretPattern.caseSensitiveSecret}, anchored at both ends, without the `i` flag. */
  caseSensitiveSecret: RegExp | undefined;
}

const SECRETS: readonly CompiledSecret[] = PATTERNS.map((p) => {
  let source = p.pattern.replaceAll("{space}", SPACE);
  const caseless = p.ignoreCase === true;
  const leadingBoundary = caseless && source.startsWith(String.raw`\b`);
  if (leadingBoundary) source = source.slice(2);
  if (caseless && source.includes(String.raw`\b`)) {
    throw new Error(`redaction pattern ${p.kind}: only a leading \\b can be checked as ASCII under the i flag`);
  }
  const caseSensitiveSecret =
    p.caseSensitiveSecret === undefined ? undefined : new RegExp(`^(?:${p.caseSensitiveSecret.replaceAll("{space}", SPACE)})$`, "u");
  return { kind: p.kind, group: p.group, regex: new RegExp(source, caseless ? "dgiu" : "dgu"), leadingBoundary, caseSensitiveSecret };
});

/** An ASCII word character: letter, digit or underscore (Rust's `(?-u:\w)`). */
function isAsciiWord(code: number): boolean {
  return (code >= 0x30 && code <= 0x39) || (code >= 0x41 && code <= 0x5a) || (code >= 0x61 && code <= 0x7a) || code === 0x5f;
}

/** Whether Rust's `(?-u:\b)` holds at `at`: an ASCII word character on one side only. */
function isAsciiBoundary(text: string, at: number): boolean {
  return isAsciiWord(text.charCodeAt(at - 1)) !== isAsciiWord(text.charCodeAt(at));
}

/**
 * Passes over one text at most, counting the last, which finds nothing. A pass
 * can uncover a secret the pass before could not see (replacing `w/cd://e:f`
 * after `pass:` takes away the `/` that kept `ab://u:]pass:w/cd://e:f@h` from
 * reading as a URL with a password: after a `]`, which ends an IPv6 address, a
 * password holds no `/`), so passes repeat until one changes nothing.
 */
const MAX_PASSES = 8;

/** What is left of a text still changing after {@link MAX_PASSES}: nothing of it. */
export const UNSETTLED = "[REDACTED:text]";

/**
 * `text` with every secret replaced by `[REDACTED:kind]`, as the sidecar writes
 * it. Redacting the result again changes nothing.
 */
export function redact(text: string): string {
  return redactWithin(text, MAX_PASSES);
}

/**
 * How much of a text {@link redactHead} redacts, in UTF-16 units (8 KiB, as the
 * Python and Go clients): far more than a snippet's 200 characters, so that a
 * secret starting in the shown part is read whole (a JWT runs to a few KB), yet
 * bounded: JavaScript's regex engine backtracks where the sidecar's runs in
 * linear time, and on some crafted text takes time quadratic in its length,
 * holding up the whole process (256 KiB of `-eyJ` takes tens of seconds on
 * Node 20; 16 KiB, about a tenth of one).
 */
export const REDACTED_UNITS = 8 * 1024;

/** The first {@link REDACTED_UNITS} of `text` (not ending inside a surrogate pair), redacted; the rest is dropped. */
export function redactHead(text: string): string {
  let n = REDACTED_UNITS;
  if (text.length > n) {
    const last = text.charCodeAt(n - 1);
    if (last >= 0xd800 && last <= 0xdbff) n--;
    text = text.slice(0, n);
  }
  return redact(text);
}

/** @internal {@link redact} with a bound on the passes, for tests. */
export function redactWithin(text: string, passes: number): string {
  for (let i = 0; i < passes; i++) {
    const next = redactOnce(text);
    if (next === undefined) return text;
    text = next;
  }
  return UNSETTLED;
}

/**
 * Runs every pattern the text's needles let through (every pattern of each kind
 * they name: secret_argument has two), in order, each over what the ones before
 * it left; undefined when nothing was replaced.
 */
function redactOnce(text: string): string | undefined {
  const kinds = candidates(text);
  if (kinds.size === 0) return undefined;
  let out: string | undefined;
  for (const secret of SECRETS) {
    if (!kinds.has(secret.kind)) continue;
    const next = replaceSecrets(secret, out ?? text);
    if (next !== undefined) out = next;
  }
  return out;
}

/** Writes the placeholder over the secret group of every match; undefined when nothing was replaced. */
function replaceSecrets(secret: CompiledSecret, text: string): string | undefined {
  const re = secret.regex;
  let out = "";
  let from = 0;
  let replaced = false;
  re.lastIndex = 0;
  for (let m = re.exec(text); m !== null; m = re.exec(text)) {
    const span = m.indices?.[secret.group];
    // An alternative without the secret's group (MySQL's "(using password: YES)") matched what must stay.
    // The leading \b is the first alternative's only, so it is checked after this.
    if (span === undefined) continue;
    if (secret.leadingBoundary && !isAsciiBoundary(text, m.index)) {
      // No match starts here; look for the leftmost one after it, as the regex with its \b would.
      re.lastIndex = m.index + 1;
      continue;
    }
    if (secret.caseSensitiveSecret !== undefined && !secret.caseSensitiveSecret.test(text.slice(span[0], span[1]))) {
      // No match starts here either: from a given start the flag and its value are fixed, so the
      // pattern with its (?-i:...) has no other way to match; look for the leftmost one after it.
      re.lastIndex = m.index + 1;
      continue;
    }
    // A value that is already a placeholder stays as it is.
    if (text.slice(span[0], span[1]).startsWith("[REDACTED")) continue;
    out += `${text.slice(from, span[0])}[REDACTED:${secret.kind}]`;
    from = span[1];
    replaced = true;
  }
  return replaced ? out + text.slice(from) : undefined;
}

/**
 * Letters outside ASCII that a case-insensitive pattern takes for an ASCII one
 * (Unicode's simple case folding): the Kelvin sign for `k`, the long s for `s`.
 * Lowering ASCII leaves them, so a needle spelt with one (`paſsword`) is not
 * found; text holding either is matched against every pattern instead.
 */
const FOLDED_TO_ASCII = ["\u212A", "\u017F"];

const ALL_KINDS: ReadonlySet<string> = new Set(PATTERNS.map((p) => p.kind));

/**
 * The kinds `text` may hold: those let through by the needles in it, ASCII
 * case aside. Only ASCII is lowered, as on the sidecar: Unicode lowering (the
 * Kelvin sign to `k`) must not let more patterns through than there.
 * @internal Exported for tests.
 */
export function candidates(text: string): ReadonlySet<string> {
  if (FOLDED_TO_ASCII.some((letter) => text.includes(letter))) return ALL_KINDS;
  const lowered = text.replace(/[A-Z]+/g, (s) => s.toLowerCase());
  const kinds = new Set<string>();
  for (const [needle, lets] of NEEDLES) {
    if (lowered.includes(needle)) for (const kind of lets) kinds.add(kind);
  }
  return kinds;
}
