package rebound

import (
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// The port gives the sidecar's normalised text for every message of the shared
// file (tests/data/fingerprints/README.md), so that the fallback and the
// sidecar judge the same failures identical.
func TestNormaliseMatchesTheSidecar(t *testing.T) {
	type line struct {
		Message    string `json:"message"`
		Normalised string `json:"normalised"`
	}
	lines := loadJSONLines[line](t, filepath.Join("..", "..", "tests", "data", "fingerprints", "normalised.jsonl"))
	if len(lines) < 500 {
		t.Fatalf("%d lines in the shared file, want at least 500", len(lines))
	}
	for _, l := range lines {
		if got := normalise(l.Message); got != l.Normalised {
			t.Errorf("normalise(%q)\n = %q\nwant the sidecar's %q", l.Message, got, l.Normalised)
		}
	}
}

// A message longer than the prefix is cut between characters: a cut inside a
// two-byte character keeps none of it, and the text stays valid UTF-8.
func TestNormaliseCutsThePrefixBetweenCharacters(t *testing.T) {
	message := strings.Repeat("a", fingerprintPrefix-1) + "é and more"
	got := normalise(message)
	if want := strings.Repeat("a", fingerprintPrefix-1); got != want {
		t.Errorf("normalise of a cut inside é = %q…(%d bytes), want the %d bytes before it", got[:10], len(got), len(want))
	}
	if !utf8.ValidString(got) {
		t.Error("the normalised text is not valid UTF-8")
	}
}

// The sidecar's own examples (src/fingerprint.rs): variable parts fold alike, different errors differ.
func TestNormaliseFoldsWhatVaries(t *testing.T) {
	same := [][2]string{
		{"timed out after 30.1s", "timed out after 30.4s"},
		{"user 'alice' not found", "user 'bob' not found"},
		{"request 3f2b9c1e-8d4a-4c3b-9e2f-1a2b3c4d5e6f failed", "request 0a1b2c3d-8d4a-4c3b-9e2f-1a2b3c4d5e6f failed"},
		{"at 2024-05-01T12:00:01Z: refused", "at 2025-01-09T08:30:59.123Z: refused"},
		{"open /tmp/a/b.txt: no such file", "open /var/data/c.txt: no such file"},
		{"GET https://api.x.com/v1/items/1 -> 500", "GET https://api.x.com/v1/items/2 -> 500"},
		{"Connection   refused", "connection refused"},
		{`FileNotFoundError: C:\Users\a\x.txt`, `FileNotFoundError: D:\data\y.txt`},
		// Real: the OpenAI SDK's 429, with the wait and the counts that vary.
		{"Rate limit reached for gpt-4o on tokens per min (TPM): Limit 30000, Used 29867, Requested 1205. Please try again in 2.144s.",
			"Rate limit reached for gpt-4o on tokens per min (TPM): Limit 30000, Used 29001, Requested 990. Please try again in 812ms."},
	}
	for _, p := range same {
		if a, b := normalise(p[0]), normalise(p[1]); a != b {
			t.Errorf("%q and %q normalise to %q and %q, want the same", p[0], p[1], a, b)
		}
	}
	different := [][2]string{
		{"connection refused", "connection reset by peer"},
		{"don't retry", "do retry"},
		{"table 'users' is locked", "table 'users' is missing"},
	}
	for _, p := range different {
		if normalise(p[0]) == normalise(p[1]) {
			t.Errorf("%q and %q both normalise to %q", p[0], p[1], normalise(p[0]))
		}
	}
}
