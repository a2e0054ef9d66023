"""The normalised text of an error message, as the sidecar makes it (src/fingerprint.rs,
`normalise`), so that the fallback judges "the same error again" as the sidecar does: numbers,
ids, times, paths and quoted values differ, the error is the same ("timed out after 30.1s" and
"timed out after 30.4s"). The sidecar hashes this text; the fallback compares it as it is.

One pass over the message's first 512 bytes of UTF-8: whitespace folds to one space, ASCII
letters to lower case, quoted values become `<q>`, URLs `<url>`, paths `<path>`, and any word
with a digit in it `<n>`. It works on bytes, as the sidecar does, so that a non-ASCII message
folds exactly as there."""

from __future__ import annotations

__all__ = ["judged_text", "normalise", "PREFIX_BYTES"]

PREFIX_BYTES = 512
"""How much of a message (in UTF-8 bytes) the sidecar's fingerprint looks at."""

# What a byte is to the scanner: bits, so one lookup answers every question (as the sidecar's table).
_SPACE = 1
_QUOTE = 2
_DELIMITER = 4
"""Ends a word and stands alone."""
_DIGIT = 8
_COLON = 16
"""A `:`, which may start a URL's `://`."""
_BREAKS_WORD = _SPACE | _QUOTE | _DELIMITER


def _classes() -> bytes:
    table = bytearray(256)
    for b in b"\t\n\x0b\x0c\r ":
        table[b] = _SPACE
    for b in b"\"'`":
        table[b] = _QUOTE
    for b in b",;()[]{}<>=|!?&":
        table[b] = _DELIMITER
    for b in b"0123456789":
        table[b] = _DIGIT
    table[ord(":")] = _COLON
    return bytes(table)


_CLASSES = _classes()


_PYTHON_TRACEBACK = "Traceback (most recent call last):"


def judged_text(message: str, detail: str) -> str:
    """What the fallback judges "the same error again" on: the message, or the detail when there
    is none, a Python traceback by its last line. The sidecar judges the error as it shows it (a
    trace's exception line and innermost frame); a traceback's first lines are its outermost
    frames, the same for every error a tool raises through the same code."""
    if message:
        return message
    if detail.lstrip().startswith(_PYTHON_TRACEBACK):
        return detail.rstrip().rsplit("\n", 1)[-1]
    return detail


def normalise(message: str) -> str:
    """The text the sidecar's fingerprint hashes for `message`: pieces with single spaces
    between them where the message had whitespace."""
    # 512 characters are at least 512 bytes: no need to encode more.
    text = _prefix(message[:PREFIX_BYTES].encode("utf-8", "surrogatepass"), PREFIX_BYTES)
    out = bytearray()
    n = len(text)
    i, space, started = 0, False, False
    while i < n:
        b = text[i]
        kind = _CLASSES[b]
        if kind & _SPACE:
            space = started
            i += 1
            continue
        if space:
            out += b" "
            space = False
        started = True
        # A quoted value; an apostrophe inside a word ("don't") opens nothing.
        if kind & _QUOTE and (b != 0x27 or i == 0 or not _ascii_alnum(text[i - 1])):
            close = text.find(b, i + 1)
            if close != -1:
                out += b"<q>"
                i = close + 1
                continue
        if kind & _BREAKS_WORD:
            out.append(b)
            i += 1
            continue
        # The word, and the classes of its bytes together.
        end, seen = i, 0
        while end < n and not _CLASSES[text[end]] & _BREAKS_WORD:
            seen |= _CLASSES[text[end]]
            end += 1
        word = text[i:end]
        if seen & _COLON and b"://" in word:
            # A URL runs to the next whitespace, through its query string.
            out += b"<url>"
            while end < n and not _CLASSES[text[end]] & _SPACE:
                end += 1
        elif word[:1] == b"/" or word.startswith(b"~/") or (
            len(word) > 2 and _ascii_alpha(word[0]) and word[1:3] == b":\\"
        ):
            out += b"<path>"
        elif seen & _DIGIT:
            out += b"<n>"
        else:
            out += word.lower()  # bytes.lower() folds ASCII letters only, as the sidecar does
        i = end
    # Whole words and ASCII pieces of a prefix cut at a character boundary: still UTF-8.
    return out.decode("utf-8", "replace")


def _prefix(text: bytes, limit: int) -> bytes:
    """The longest prefix of at most `limit` bytes that ends on a UTF-8 character boundary."""
    if len(text) <= limit:
        return text
    end = limit
    while end > 0 and text[end] & 0xC0 == 0x80:  # a continuation byte: inside a character
        end -= 1
    return text[:end]


def _ascii_alnum(b: int) -> bool:
    return _ascii_alpha(b) or 0x30 <= b <= 0x39


def _ascii_alpha(b: int) -> bool:
    return 0x41 <= b <= 0x5A or 0x61 <= b <= 0x7A
