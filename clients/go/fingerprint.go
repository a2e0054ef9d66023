package rebound

import "strings"

// The normaliser of the sidecar's fingerprints (src/fingerprint.rs), byte for
// byte: the fallback's "identical errors in a row" compares the normalised
// texts of two failures, so that it judges two messages the same exactly when
// the sidecar does ("timed out after 30.1s" and "timed out after 30.4s").
// tests/data/fingerprints/normalised.jsonl holds the sidecar's texts, which
// TestNormaliseMatchesTheSidecar checks this port against.

// fingerprintPrefix is how much of a message the fingerprint looks at.
const fingerprintPrefix = 512

// What a byte is to the scanner: bits, so that one lookup answers every question.
const (
	byteSpace = 1 << iota
	byteQuote
	// byteDelimiter ends a word and stands alone.
	byteDelimiter
	byteDigit
	// byteColon may start a URL's "://".
	byteColon
	// breaksWord is what is not part of a word (letters, digits, '.', '-', ':', '/', non-ASCII bytes are).
	breaksWord = byteSpace | byteQuote | byteDelimiter
)

var byteClasses = func() (classes [256]uint8) {
	for _, b := range []byte("\t\n\v\f\r ") {
		classes[b] = byteSpace
	}
	for _, b := range []byte("\"'`") {
		classes[b] = byteQuote
	}
	for _, b := range []byte(",;()[]{}<>=|!?&") {
		classes[b] = byteDelimiter
	}
	for b := '0'; b <= '9'; b++ {
		classes[b] = byteDigit
	}
	classes[':'] = byteColon
	return classes
}()

// pythonTraceback starts a Python traceback, whose first lines are its outermost frames.
const pythonTraceback = "Traceback (most recent call last):"

// judgedText is what the fallback judges "the same error again" on: the
// message, or the detail when there is none, a Python traceback by its last
// line. The sidecar judges the error as it shows it (a trace's exception line
// and innermost frame); a traceback's first lines are its outermost frames,
// the same for every error a tool raises through the same code.
func judgedText(message, detail string) string {
	if message != "" {
		return message
	}
	if strings.HasPrefix(strings.TrimLeft(detail, " \t\r\n"), pythonTraceback) {
		rest := strings.TrimRight(detail, " \t\r\n")
		return rest[strings.LastIndexByte(rest, '\n')+1:]
	}
	return detail
}

// normalise is the text the sidecar fingerprints for a message: whitespace
// folded to one space, ASCII letters lower-cased, quoted values written <q>,
// URLs <url>, paths <path>, and any word with a digit in it (numbers with
// units, UUIDs, hex ids, timestamps, versions) <n>. Only the first 512 bytes
// count, cut between characters. The sidecar reads the result back with
// from_utf8_lossy, which changes nothing here: an outcome's text is valid
// UTF-8 (checkOutcome makes it so), the cut falls between characters, and the
// scan splits only at ASCII bytes and lower-cases only ASCII letters.
func normalise(message string) string {
	text := headBytes(message, fingerprintPrefix)
	var b strings.Builder
	b.Grow(len(text))
	space, started := false, false
	for i := 0; i < len(text); {
		c := text[i]
		kind := byteClasses[c]
		if kind&byteSpace != 0 {
			space = started
			i++
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		started = true
		// A quoted value; an apostrophe inside a word ("don't") opens nothing.
		if kind&byteQuote != 0 && (c != '\'' || i == 0 || !isASCIIAlnum(text[i-1])) {
			if n := strings.IndexByte(text[i+1:], c); n >= 0 {
				b.WriteString("<q>")
				i += n + 2
				continue
			}
		}
		if kind&breaksWord != 0 {
			b.WriteByte(c)
			i++
			continue
		}
		// The word, and the classes of its bytes together.
		end, seen := i, uint8(0)
		for end < len(text) && byteClasses[text[end]]&breaksWord == 0 {
			seen |= byteClasses[text[end]]
			end++
		}
		word := text[i:end]
		switch {
		case seen&byteColon != 0 && strings.Contains(word, "://"):
			// A URL runs to the next whitespace, through its query string.
			b.WriteString("<url>")
			for end < len(text) && byteClasses[text[end]]&byteSpace == 0 {
				end++
			}
		case word[0] == '/' || strings.HasPrefix(word, "~/") ||
			(len(word) > 2 && isASCIILetter(word[0]) && word[1] == ':' && word[2] == '\\'):
			b.WriteString("<path>")
		case seen&byteDigit != 0:
			b.WriteString("<n>")
		default:
			b.WriteString(asciiLower(word))
		}
		i = end
	}
	return b.String()
}

func isASCIILetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

func isASCIIAlnum(c byte) bool { return isASCIILetter(c) || '0' <= c && c <= '9' }
