package rebound

import (
	"fmt"
	"regexp"
	"strings"
)

// Secret redaction for the text the fallback writes, so that no API key,
// token or password in a tool's error reaches the LLM while the sidecar is
// down. A port of the sidecar's src/redact.rs, which is the source of truth:
// the same kinds in the same order, the same capture groups, the same
// `[REDACTED:kind]` placeholders, the same gate of needles and the same passes.

// secretPattern is one kind of secret: a pattern and which capture group is the secret (0: all of it).
type secretPattern struct {
	kind    string
	group   int
	pattern string
}

// secretPatterns are src/redact.rs's PATTERNS, ordered: specific shapes first,
// generic name=value pairs last. Rust's `(?-u:\b)` is written `\b`, which is
// ASCII in Go. Rust's `\s` is Unicode White_Space and Go's only ASCII, so
// `{space}` in a class stands for White_Space (see unicodeSpace); `[\s\S]`,
// any character in both, is kept as it is, and so are `\A` and `(?-i:...)`
// (secret_argument's case-sensitive value), which Go reads as Rust does.
var secretPatterns = []secretPattern{
	{"private_key", 0, `-----BEGIN[A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----[\s\S]*?(?:-----END[A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----|\z)`},
	{"anthropic_key", 0, `\bsk-ant-[A-Za-z0-9_\-]{10,}`},
	{"stripe_key", 0, `\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{10,}|\bwhsec_[A-Za-z0-9+/=]{20,}`},
	{"openai_key", 0, `\bsk-(?:proj-|svcacct-|admin-|None-)?[A-Za-z0-9_\-]{20,}`},
	{"google_key", 0, `\bAIza[0-9A-Za-z_\-]{35}`},
	{"aws_access_key", 0, `\b(?:AKIA|ASIA|ABIA|ACCA|AIDA|AROA)[0-9A-Z]{16}\b`},
	{"aws_secret_key", 2, `(?i)(aws_?secret_?access_?key|secret_?access_?key|aws_?secret)["']?[{space}]*[:=][{space}]*["']?([A-Za-z0-9/+=]{40})`},
	{"github_token", 0, `\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{30,}|\bgithub_pat_[A-Za-z0-9_]{22,}`},
	{"slack_token", 0, `\bxox[abposre]-[A-Za-z0-9\-]{10,}`},
	{"gitlab_token", 0, `\b(?:glpat|gldt|glrt|glptt|glcbt|gloas)-[A-Za-z0-9_\-]{20,}`},
	{"npm_token", 0, `\bnpm_[A-Za-z0-9]{36}\b`},
	{"huggingface_token", 0, `\bhf_[A-Za-z0-9]{30,}`},
	{"sendgrid_key", 0, `\bSG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}`},
	{"slack_webhook", 1, `(?i)\bhooks\.slack\.com/(?:services|workflows|triggers)/([A-Za-z0-9_/]{16,})`},
	{"discord_webhook", 1, `(?i)\bdiscord(?:app)?\.com/api/webhooks/[0-9]+/([A-Za-z0-9_\-]{16,})`},
	{"jwt", 0, `\beyJ[A-Za-z0-9_\-]{5,}\.eyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]{5,}`},
	{"bearer_token", 1, `(?i)\bbearer[{space}]+([A-Za-z0-9._~+/=\-]{8,})`},
	{"basic_auth", 1, `(?i)\bbasic[{space}]+([A-Za-z0-9+/]{8,}={0,2})`},
	{"authorization", 1, `(?i)\b(?:[a-z0-9_]*_)?authorization["']?[ \t]*[:=][ \t]*["']?(?:\[?[a-z][a-z0-9._\-]*[ \t]+)?([^{space}"',;\]]{4,})`},
	{"cookie", 1, `(?i)\b(?:[a-z0-9_]*_)?(?:set-)?cookie["']?[ \t]*[:=][ \t]*["']?((?:=\\?"(?:[^\r\n",]*"|[^\r\n",;)}\]{space}][^\r\n"]*)|[^\r\n"'\]]){3,})`},
	{"url_signature", 2, `(?i)[?&;](sig|x-amz-signature|x-goog-signature)=([^{space}&"'#;)\]>]{8,})`},
	{"url_password", 1, `(?i)\b[a-z][a-z0-9+.\-]{1,20}://[^{space}:/?#]*:([^{space}/?#]+|[^{space}/?#]*[^{space}/?#0-9][^{space}/]*|[^{space}/?#@\[\]]*[^{space}/?#@0-9\[\]][^{space}@\]]*|[0-9]*#[^{space}/]*)@`},
	{"secret_argument", 1, `(?i)["']--?[a-z0-9_\-]*(?:password|passwd|passphrase|pwd|pass|token|secret|api[_\-]?key|apikey)["'],?[ \t]*["']([^"'\r\n\-][^"'\r\n]*)`},
	{"secret_argument", 1, `(?i)(?:\A|[{space}(])--?[a-z0-9_\-]*(?:password|passwd|passphrase|pwd|pass|token|secret|api[_\-]?key|apikey)[ \t]+(?-i:([^{space}"'\-]*[^{space}"'\-a-z][^{space}"']*))`},
	{"password", 2, `(?i)\b([a-z0-9_]*(?:password|passwd|passphrase)|(?:[a-z0-9_]*_)?(?:pwd|pass))(?:["']?[{space}]*[:=][{space}]*["']?|["']?[{space}]*=>[{space}]*["']?)([^{space}"'&,;}\])]{3,})|\(using password: (?:YES|NO)\)`},
	{"api_key", 2, `(?i)\b([a-z0-9_]*(?:api[_\-]?key|apikey|x-api-key|access[_\-]?key|account[_\-]?key))(?:["']?[{space}]*[:=][{space}]*["']?)([^{space}"'&,;}\])]{6,})`},
	{"secret", 2, `(?i)\b([a-z0-9_]*(?:client[_\-]?secret|secret[_\-]?key|secret|private[_\-]?key))(?:["']?[{space}]*[:=][{space}]*["']?)([^{space}"'&,;}\])]{6,})`},
	{"token", 2, `(?i)\b([a-z0-9_]*(?:access[_\-]?token|refresh[_\-]?token|auth[_\-]?token|id[_\-]?token|session[_\-]?token|token))(?:["']?[{space}]*[:=][{space}]*["']?)([^{space}"'&,;}\])]{8,})`},
}

// unicodeSpace is the inside of a class matching Rust's `\s`, Unicode
// White_Space: U+0009 to U+000D, U+0085, and the separators (Zs, Zl, Zp).
const unicodeSpace = `\t-\r\x{85}\p{Z}`

// secretNeedles are src/redact.rs's NEEDLES: literals (lower case) of which
// every match of a pattern holds one, ASCII case aside, each with the kinds it
// lets through. Text with none of them, most error text, is read once,
// cheaply; text with some is matched against those patterns only.
var secretNeedles = []struct {
	needle string
	kinds  []string
}{
	{"-----begin", []string{"private_key"}},
	{"sk-", []string{"anthropic_key", "openai_key"}},
	{"sk_", []string{"stripe_key"}},
	{"whsec_", []string{"stripe_key"}},
	{"rk_", []string{"stripe_key"}},
	{"aiza", []string{"google_key"}},
	{"akia", []string{"aws_access_key"}},
	{"asia", []string{"aws_access_key"}},
	{"abia", []string{"aws_access_key"}},
	{"acca", []string{"aws_access_key"}},
	{"aida", []string{"aws_access_key"}},
	{"aroa", []string{"aws_access_key"}},
	{"secret", []string{"aws_secret_key", "secret_argument", "secret"}},
	{"ghp_", []string{"github_token"}},
	{"gho_", []string{"github_token"}},
	{"ghu_", []string{"github_token"}},
	{"ghs_", []string{"github_token"}},
	{"ghr_", []string{"github_token"}},
	{"github_pat_", []string{"github_token"}},
	{"xox", []string{"slack_token"}},
	{"glpat-", []string{"gitlab_token"}},
	{"gldt-", []string{"gitlab_token"}},
	{"glrt-", []string{"gitlab_token"}},
	{"glptt-", []string{"gitlab_token"}},
	{"glcbt-", []string{"gitlab_token"}},
	{"gloas-", []string{"gitlab_token"}},
	{"npm_", []string{"npm_token"}},
	{"hf_", []string{"huggingface_token"}},
	{"sg.", []string{"sendgrid_key"}},
	{"hooks.slack.com", []string{"slack_webhook"}},
	{"/api/webhooks/", []string{"discord_webhook"}},
	{"eyj", []string{"jwt"}},
	{"bearer", []string{"bearer_token"}},
	{"basic", []string{"basic_auth"}},
	{"authorization", []string{"authorization"}},
	{"cookie", []string{"cookie"}},
	{"sig=", []string{"url_signature"}},
	{"signature=", []string{"url_signature"}},
	{"://", []string{"url_password"}},
	{"pass", []string{"secret_argument", "password"}},
	{"pwd", []string{"secret_argument", "password"}},
	{"api_key", []string{"secret_argument", "api_key"}},
	{"api-key", []string{"secret_argument", "api_key"}},
	{"apikey", []string{"secret_argument", "api_key"}},
	{"access_key", []string{"api_key"}},
	{"access-key", []string{"api_key"}},
	{"accesskey", []string{"api_key"}},
	{"account_key", []string{"api_key"}},
	{"account-key", []string{"api_key"}},
	{"accountkey", []string{"api_key"}},
	{"private", []string{"secret"}},
	{"token", []string{"secret_argument", "token"}},
}

// compiledSecret is a secretPattern ready to match.
type compiledSecret struct {
	kind  string
	group int
	re    *regexp.Regexp
}

var (
	// secrets are secretPatterns compiled once, in their order.
	secrets = compileSecrets()
	// secretGates are, for each of secretNeedles, the patterns it lets through
	// (every pattern of each kind it names) as bits by index.
	secretGates = needleGates()
)

func compileSecrets() []compiledSecret {
	out := make([]compiledSecret, len(secretPatterns))
	for i, p := range secretPatterns {
		re := regexp.MustCompile(strings.ReplaceAll(p.pattern, "{space}", unicodeSpace))
		if p.group > re.NumSubexp() {
			panic(fmt.Sprintf("redaction pattern %s has no group %d", p.kind, p.group))
		}
		out[i] = compiledSecret{kind: p.kind, group: p.group, re: re}
	}
	return out
}

func needleGates() []uint32 {
	if len(secretPatterns) > 32 {
		panic("one bit per redaction pattern")
	}
	gates := make([]uint32, len(secretNeedles))
	for i, n := range secretNeedles {
		for _, kind := range n.kinds {
			// Every pattern of the kind: secret_argument has two.
			var ofKind uint32
			for j, p := range secretPatterns {
				if p.kind == kind {
					ofKind |= 1 << j
				}
			}
			if ofKind == 0 {
				panic(fmt.Sprintf("needle %q names no redaction pattern %q", n.needle, kind))
			}
			gates[i] |= ofKind
		}
	}
	return gates
}

// maxRedactionPasses bounds the passes over one text, counting the last,
// which finds nothing. A pass can uncover a secret the pass before could not
// see (replacing `w/cd://e:f` after `pass:` takes away the `/` that kept
// `ab://u:]pass:w/cd://e:f@h` from reading as a URL with a password: after a
// `]`, which ends an IPv6 address, a password holds no `/`), so passes repeat
// until one changes nothing.
const maxRedactionPasses = 8

// unsettled is what is left of a text still changing after maxRedactionPasses: nothing of it.
const unsettled = "[REDACTED:text]"

// redact returns text with every secret replaced by `[REDACTED:kind]`, as the
// sidecar writes it. Redacting the result again changes nothing.
func redact(text string) string {
	return redactWithin(text, maxRedactionPasses)
}

func redactWithin(text string, passes int) string {
	for range passes {
		next, changed := redactOnce(text)
		if !changed {
			return text
		}
		text = next
	}
	return unsettled
}

// redactOnce runs every pattern the text's needles let through, in order, each
// over the text the ones before it left; changed is false when nothing was replaced.
func redactOnce(text string) (out string, changed bool) {
	gates := secretCandidates(text)
	out = text
	for i, p := range secrets {
		if gates&(1<<i) == 0 {
			continue
		}
		if next, ok := p.replace(out); ok {
			out, changed = next, true
		}
	}
	return out, changed
}

// replace writes the placeholder over the secret group of every match; ok is
// false when nothing was replaced. A secret that is already a placeholder stays.
func (p compiledSecret) replace(text string) (string, bool) {
	var b strings.Builder
	replaced, from := false, 0
	for _, m := range p.re.FindAllStringSubmatchIndex(text, -1) {
		start, end := m[2*p.group], m[2*p.group+1]
		if start < 0 || strings.HasPrefix(text[start:end], "[REDACTED") {
			continue
		}
		replaced = true
		b.WriteString(text[from:start])
		b.WriteString("[REDACTED:" + p.kind + "]")
		from = end
	}
	if !replaced {
		return text, false
	}
	b.WriteString(text[from:])
	return b.String(), true
}

// foldedToASCII are the letters outside ASCII that a case-insensitive pattern
// takes for an ASCII one (Unicode's simple case folding): the Kelvin sign for
// k, the long s for s. Lowering ASCII leaves them, so a needle spelt with one
// (`paſsword`) would not be found: text holding either is matched against
// every pattern, as on the sidecar.
const foldedToASCII = "\u212a\u017f"

// secretCandidates returns the patterns text may match, as bits: the gates of
// the needles it holds, ASCII case aside.
func secretCandidates(text string) uint32 {
	if strings.ContainsAny(text, foldedToASCII) {
		return 1<<len(secrets) - 1
	}
	lowered := asciiLower(text)
	var bits uint32
	for i, n := range secretNeedles {
		if strings.Contains(lowered, n.needle) {
			bits |= secretGates[i]
		}
	}
	return bits
}

// asciiLower lowers the ASCII letters of s and leaves every other byte as it is.
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + ('a' - 'A')
		}
	}
	return string(b)
}
