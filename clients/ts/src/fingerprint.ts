// The normalised text of an error message, as the sidecar makes it
// (src/fingerprint.rs, `normalise`), so that the fallback judges "the same
// error again" as the sidecar does: "timed out after 30.1s" and "timed out
// after 30.4s" are one error. The sidecar hashes this text; the fallback
// compares it as it is.
//
// It works on the message's UTF-8 bytes, as the sidecar does (a JS string is
// UTF-16): the 512-byte prefix is cut on a character boundary, the byte
// classes are the sidecar's, and only ASCII letters are lower-cased.

/** How a Python traceback starts: its first lines are its outermost frames. */
const PYTHON_TRACEBACK = "Traceback (most recent call last):";

/**
 * What the fallback judges "the same error again" on: the message, or the
 * detail when there is none, a Python traceback by its last line. The sidecar
 * judges the error as it shows it (a trace's exception line and innermost
 * frame); a traceback's first lines are its outermost frames, the same for
 * every error a tool raises through the same code.
 */
export function judgedText(message: string, detail: string): string {
  if (message !== "") return message;
  if (detail.trimStart().startsWith(PYTHON_TRACEBACK)) {
    const rest = detail.trimEnd();
    return rest.slice(rest.lastIndexOf("\n") + 1);
  }
  return detail;
}

/** How much of a message, in UTF-8 bytes, the sidecar's fingerprint looks at. */
export const PREFIX_BYTES = 512;

// What a byte is to the scanner: bits, so that one lookup answers every question (the sidecar's table).
const SPACE = 1;
const QUOTE = 2;
/** Ends a word and stands alone. */
const DELIMITER = 4;
const DIGIT = 8;
/** A `:`, which may start a URL's `://`. */
const COLON = 16;
/** Not part of a word (letters, digits, `.`, `-`, `:`, `/`, non-ASCII bytes... are). */
const BREAKS_WORD = SPACE | QUOTE | DELIMITER;

const CLASSES = ((): Uint8Array => {
  const table = new Uint8Array(256);
  const mark = (chars: string, kind: number): void => {
    for (let i = 0; i < chars.length; i++) table[chars.charCodeAt(i)] = kind;
  };
  mark("\t\n\x0b\x0c\r ", SPACE);
  mark("\"'`", QUOTE);
  mark(",;()[]{}<>=|!?&", DELIMITER);
  mark("0123456789", DIGIT);
  mark(":", COLON);
  return table;
})();

// What a folded piece becomes.
const [QUOTED, URL_MARK, PATH_MARK, NUMBER_MARK] = ["<q>", "<url>", "<path>", "<n>"].map((m) => Buffer.from(m)) as [Buffer, Buffer, Buffer, Buffer];
const APOSTROPHE = 0x27;
const SLASH = 0x2f;

function cls(b: number): number {
  return CLASSES[b] ?? 0;
}

function isAsciiAlpha(b: number): boolean {
  return (b >= 0x41 && b <= 0x5a) || (b >= 0x61 && b <= 0x7a);
}

function isAsciiAlnum(b: number): boolean {
  return isAsciiAlpha(b) || (b >= 0x30 && b <= 0x39);
}

/**
 * The text the sidecar's fingerprint hashes for `message`: pieces with single
 * spaces between them where the message had whitespace; quoted values become
 * `<q>`, URLs `<url>`, paths `<path>`, any word with a digit in it `<n>`, and
 * the rest is lower-cased (ASCII letters only).
 */
export function normalise(message: string): string {
  // 512 UTF-16 code units encode to at least 512 bytes: no need to encode more. A surrogate pair
  // split at the end encodes as U+FFFD, which starts where the pair would and is cut with it.
  const text = prefix(Buffer.from(message.slice(0, PREFIX_BYTES), "utf8"), PREFIX_BYTES);
  const out: number[] = [];
  const put = (bytes: Uint8Array): void => {
    for (const b of bytes) out.push(b);
  };
  const n = text.length;
  let [i, space, started] = [0, false, false];
  while (i < n) {
    const b = text[i] as number;
    const kind = cls(b);
    if (kind & SPACE) {
      space = started;
      i++;
      continue;
    }
    if (space) {
      out.push(0x20);
      space = false;
    }
    started = true;
    // A quoted value; an apostrophe inside a word ("don't") opens nothing.
    if (kind & QUOTE && (b !== APOSTROPHE || i === 0 || !isAsciiAlnum(text[i - 1] as number))) {
      const close = text.indexOf(b, i + 1);
      if (close !== -1) {
        put(QUOTED);
        i = close + 1;
        continue;
      }
    }
    if (kind & BREAKS_WORD) {
      out.push(b);
      i++;
      continue;
    }
    // The word, and the classes of its bytes together.
    let [end, seen] = [i, 0];
    while (end < n && !(cls(text[end] as number) & BREAKS_WORD)) {
      seen |= cls(text[end] as number);
      end++;
    }
    const word = text.subarray(i, end);
    if (seen & COLON && word.includes("://")) {
      // A URL runs to the next whitespace, through its query string.
      put(URL_MARK);
      while (end < n && !(cls(text[end] as number) & SPACE)) end++;
    } else if (
      word[0] === SLASH ||
      (word[0] === 0x7e && word[1] === SLASH) ||
      (word.length > 2 && isAsciiAlpha(word[0] as number) && word[1] === 0x3a && word[2] === 0x5c)
    ) {
      put(PATH_MARK);
    } else if (seen & DIGIT) {
      put(NUMBER_MARK);
    } else {
      for (const c of word) out.push(c >= 0x41 && c <= 0x5a ? c + 0x20 : c);
    }
    i = end;
  }
  // Whole words and ASCII pieces of a prefix cut at a character boundary: still UTF-8.
  return Buffer.from(out).toString("utf8");
}

/** The longest prefix of at most `limit` bytes that ends on a UTF-8 character boundary. */
function prefix(bytes: Buffer, limit: number): Buffer {
  if (bytes.length <= limit) return bytes;
  let end = limit;
  // A continuation byte (10xxxxxx) is inside a character.
  while (end > 0 && ((bytes[end] as number) & 0xc0) === 0x80) end--;
  return bytes.subarray(0, end);
}
