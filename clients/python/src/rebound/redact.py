"""Secret redaction for the text the fallback writes, a port of the sidecar's src/redact.rs: the
same kinds in the same order, the same capture groups and the same `[REDACTED:kind]`
placeholders, so an API key in a tool's error reaches the LLM no more when the sidecar is down
than when it answers. Only the secret is replaced: the key name in a `password=` pair stays, so
the LLM still sees what was wrong."""

from __future__ import annotations

import re
from typing import Optional

__all__ = ["redact"]

PATTERNS: tuple[tuple[str, int, str], ...] = (
    # (kind, group, pattern): the group is the capture group that is the secret (0: all of it).
    # Copied verbatim, in the Rust regex crate's syntax, from src/redact.rs, the source of truth
    # (tests/test_redact.py checks that they agree); `_python` rewrites what Python spells
    # otherwise. Ordered as there: specific shapes first, generic `name=value` pairs last.
    (
        "private_key",
        0,
        r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----[\s\S]*?(?:-----END[A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----|\z)",
    ),
    ("anthropic_key", 0, r"(?-u:\b)sk-ant-[A-Za-z0-9_\-]{10,}"),
    ("stripe_key", 0, r"(?-u:\b)(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{10,}|(?-u:\b)whsec_[A-Za-z0-9+/=]{20,}"),
    ("openai_key", 0, r"(?-u:\b)sk-(?:proj-|svcacct-|admin-|None-)?[A-Za-z0-9_\-]{20,}"),
    ("google_key", 0, r"(?-u:\b)AIza[0-9A-Za-z_\-]{35}"),
    ("aws_access_key", 0, r"(?-u:\b)(?:AKIA|ASIA|ABIA|ACCA|AIDA|AROA)[0-9A-Z]{16}(?-u:\b)"),
    (
        "aws_secret_key",
        2,
        r"""(?i)(aws_?secret_?access_?key|secret_?access_?key|aws_?secret)["']?\s*[:=]\s*["']?([A-Za-z0-9/+=]{40})""",
    ),
    ("github_token", 0, r"(?-u:\b)(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{30,}|(?-u:\b)github_pat_[A-Za-z0-9_]{22,}"),
    ("slack_token", 0, r"(?-u:\b)xox[abposre]-[A-Za-z0-9\-]{10,}"),
    ("gitlab_token", 0, r"(?-u:\b)(?:glpat|gldt|glrt|glptt|glcbt|gloas)-[A-Za-z0-9_\-]{20,}"),
    ("npm_token", 0, r"(?-u:\b)npm_[A-Za-z0-9]{36}(?-u:\b)"),
    ("huggingface_token", 0, r"(?-u:\b)hf_[A-Za-z0-9]{30,}"),
    ("sendgrid_key", 0, r"(?-u:\b)SG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}"),
    ("slack_webhook", 1, r"(?i)(?-u:\b)hooks\.slack\.com/(?:services|workflows|triggers)/([A-Za-z0-9_/]{16,})"),
    ("discord_webhook", 1, r"(?i)(?-u:\b)discord(?:app)?\.com/api/webhooks/[0-9]+/([A-Za-z0-9_\-]{16,})"),
    ("jwt", 0, r"(?-u:\b)eyJ[A-Za-z0-9_\-]{5,}\.eyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]{5,}"),
    ("bearer_token", 1, r"(?i)(?-u:\b)bearer\s+([A-Za-z0-9._~+/=\-]{8,})"),
    ("basic_auth", 1, r"(?i)(?-u:\b)basic\s+([A-Za-z0-9+/]{8,}={0,2})"),
    (
        "authorization",
        1,
        r"""(?i)(?-u:\b)(?:[a-z0-9_]*_)?authorization["']?[ \t]*[:=][ \t]*["']?(?:\[?[a-z][a-z0-9._\-]*[ \t]+)?([^\s"',;\]]{4,})""",
    ),
    (
        "cookie",
        1,
        r"""(?i)(?-u:\b)(?:[a-z0-9_]*_)?(?:set-)?cookie["']?[ \t]*[:=][ \t]*["']?((?:=\\?"(?:[^\r\n",]*"|[^\r\n",;)}\]\s][^\r\n"]*)|[^\r\n"'\]]){3,})""",
    ),
    ("url_signature", 2, r"""(?i)[?&;](sig|x-amz-signature|x-goog-signature)=([^\s&"'#;)\]>]{8,})"""),
    (
        "url_password",
        1,
        r"(?i)(?-u:\b)[a-z][a-z0-9+.\-]{1,20}://[^\s:/?#]*:([^\s/?#]+|[^\s/?#]*[^\s/?#0-9][^\s/]*|[^\s/?#@\[\]]*[^\s/?#@0-9\[\]][^\s@\]]*|[0-9]*#[^\s/]*)@",
    ),
    (
        "secret_argument",
        1,
        r"""(?i)["']--?[a-z0-9_\-]*(?:password|passwd|passphrase|pwd|pass|token|secret|api[_\-]?key|apikey)["'],?[ \t]*["']([^"'\r\n\-][^"'\r\n]*)""",
    ),
    (
        "secret_argument",
        1,
        r"""(?i)(?:\A|[\s(])--?[a-z0-9_\-]*(?:password|passwd|passphrase|pwd|pass|token|secret|api[_\-]?key|apikey)[ \t]+(?-i:([^\s"'\-]*[^\s"'\-a-z][^\s"']*))""",
    ),
    (
        "password",
        2,
        r"""(?i)(?-u:\b)([a-z0-9_]*(?:password|passwd|passphrase)|(?:[a-z0-9_]*_)?(?:pwd|pass))(?:["']?\s*[:=]\s*["']?|["']?\s*=>\s*["']?)([^\s"'&,;}\])]{3,})|\(using password: (?:YES|NO)\)""",
    ),
    (
        "api_key",
        2,
        r"""(?i)(?-u:\b)([a-z0-9_]*(?:api[_\-]?key|apikey|x-api-key|access[_\-]?key|account[_\-]?key))(?:["']?\s*[:=]\s*["']?)([^\s"'&,;}\])]{6,})""",
    ),
    (
        "secret",
        2,
        r"""(?i)(?-u:\b)([a-z0-9_]*(?:client[_\-]?secret|secret[_\-]?key|secret|private[_\-]?key))(?:["']?\s*[:=]\s*["']?)([^\s"'&,;}\])]{6,})""",
    ),
    (
        "token",
        2,
        r"""(?i)(?-u:\b)([a-z0-9_]*(?:access[_\-]?token|refresh[_\-]?token|auth[_\-]?token|id[_\-]?token|session[_\-]?token|token))(?:["']?\s*[:=]\s*["']?)([^\s"'&,;}\])]{8,})""",
    ),
)

# Rust's `\s` is the Unicode White_Space property. Python's is wider (str.isspace takes \x1c-\x1f
# too), and a wider `[^\s...]` would end a `password=` value at such a character and show the rest.
_WHITE_SPACE = r"\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"

# The constructs of the patterns above that Python spells otherwise, rewritten in one pass (the
# classes before a bare `\s`). `(?i)` opens a pattern in both and covers all of it, `(?-i:...)` turns
# it off within the group in both (a secret_argument's value), and `\A` and lazy `*?` are the same.
_REWRITES = {
    r"(?-u:\b)": r"(?a:\b)",  # an ASCII word boundary: `a` scopes ASCII matching to the group
    r"\z": r"\Z",  # the end of the text (Python's `\Z` never matches before a final newline)
    r"[\s\S]": r"[\s\S]",  # any character: the same set in both
    r"[^\s": "[^" + _WHITE_SPACE,  # the negated classes of values, most of which open with `\s`
    r"[\s(": "[" + _WHITE_SPACE + "(",  # the space or `(` before a command's flag (secret_argument)
    r"\s]": _WHITE_SPACE + "]",  # a class closing with `\s`: a cut cookie value's first character
    r"\s": "[" + _WHITE_SPACE + "]",
}
_REWRITE = re.compile("|".join(re.escape(rust) for rust in _REWRITES))


def _python(rust: str) -> str:
    """`rust`, a pattern of the regex crate, in Python's `re` syntax."""
    return _REWRITE.sub(lambda m: _REWRITES[m.group()], rust)


_COMPILED = tuple((kind, group, re.compile(_python(rust))) for kind, group, rust in PATTERNS)

MAX_PASSES = 8
"""Passes over one text at most, counting the last, which finds nothing. A pass can uncover a
secret the pass before could not see: replacing `w/cd://e:f` after `pass:` takes away the `/`
that kept `ab://u:]pass:w/cd://e:f@h` from reading as a URL with a password (after a `]`, which
ends an IPv6 address, a password holds no `/`). So passes repeat
until one changes nothing, and text still changing after this many is given up."""

UNSETTLED = "[REDACTED:text]"
"""What is left of a text that never settled: nothing of it is shown."""


def redact(text: str) -> str:
    """`text` with every secret replaced by `[REDACTED:kind]`, as the sidecar replaces it.
    Redacting the result again changes nothing."""
    return _redact_within(text, MAX_PASSES)


def _redact_within(text: str, passes: int) -> str:
    """`redact` with at most `passes` passes."""
    for _ in range(passes):
        changed = _redact_once(text)
        if changed is None:
            return text
        text = changed
    return UNSETTLED


def _redact_once(text: str) -> Optional[str]:
    """One pass of every pattern, in order; None when nothing was replaced."""
    out = text
    for kind, group, regex in _COMPILED:
        out = _replace(out, kind, group, regex)
    # Every replacement changes the text: a secret that is already a placeholder is left as it is.
    return None if out == text else out


# Under `(?i)`, Python takes the Turkish ı (U+0131) and İ (U+0130) for an i, and Rust does not (its
# simple case folding pairs only the Kelvin sign K and the long ſ with ASCII letters, as Python's
# does too). A match grown over them can swallow the name of the next secret (`Bearer abcdefghıpwd:
# x` would show x), so the patterns read the text with both as é, which they all treat as Rust
# treats ı and İ: no ASCII letter, no word character, no space. Same length, so the same places.
_TURKISH_I = str.maketrans("\u0130\u0131", "\u00e9\u00e9")


def _replace(text: str, kind: str, group: int, regex: re.Pattern[str]) -> str:
    """`text` with the secret, the capture group `group`, of each match replaced by `[REDACTED:kind]`."""
    pieces: list[str] = []
    at = 0
    for m in regex.finditer(text if text.isascii() else text.translate(_TURKISH_I)):
        start, end = m.span(group)
        # A group that took no part, or a value that is already a placeholder, stays as it is.
        if start < 0 or text.startswith("[REDACTED", start, end):
            continue
        pieces += (text[at:start], f"[REDACTED:{kind}]")
        at = end
    return "".join(pieces) + text[at:] if pieces else text
