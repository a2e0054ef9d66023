package rebound

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rebound-dev/rebound/clients/go/reboundpb"
)

// secretLine is one line of tests/data/secrets/*.jsonl (see its README):
// a real-shaped message, and for secrets.jsonl the kind and the exact
// substrings that must never be shown.
type secretLine struct {
	ID      string   `json:"id"`
	Type    string   `json:"type"`
	Message string   `json:"message"`
	Secrets []string `json:"secrets"`
}

func loadSecretLines(t *testing.T, name string) []secretLine {
	t.Helper()
	return loadJSONLines[secretLine](t, filepath.Join("..", "..", "tests", "data", "secrets", name))
}

// loadJSONLines reads one of the repository's shared test files, a JSON object a line.
func loadJSONLines[T any](t *testing.T, path string) []T {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []T
	scan := bufio.NewScanner(f)
	scan.Buffer(nil, 1<<20)
	for n := 1; scan.Scan(); n++ {
		if strings.TrimSpace(scan.Text()) == "" {
			continue
		}
		var l T
		if err := json.Unmarshal(scan.Bytes(), &l); err != nil {
			t.Fatalf("%s:%d: %v", path, n, err)
		}
		lines = append(lines, l)
	}
	if err := scan.Err(); err != nil {
		t.Fatal(err)
	}
	if len(lines) == 0 {
		t.Fatalf("%s is empty", path)
	}
	return lines
}

// quietClient is a client of the sidecar at addr that logs nothing, closed when the test ends.
func quietClient(t *testing.T, addr string, opts ...Option) *Client {
	t.Helper()
	c, err := Dial(context.Background(), addr, append([]Option{WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// unreachableSession is a session of a client whose sidecar is down, so that
// every answer is the local fallback's.
func unreachableSession(t *testing.T) *Session {
	t.Helper()
	s, err := quietClient(t, refusedAddr(t)).Session(sessionID(t, "s"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// With the sidecar down, no secret of the corpus reaches the snippet, the
// escalation report or the local context, and each is replaced by its kind's placeholder.
func TestFallbackRedactsSecrets(t *testing.T) {
	ctx := context.Background()
	for _, l := range loadSecretLines(t, "secrets.jsonl") {
		t.Run(l.ID, func(t *testing.T) {
			s := unreachableSession(t)
			placeholder := "[REDACTED:" + l.Type + "]"
			check := func(where, text string) {
				t.Helper()
				for _, secret := range l.Secrets {
					if strings.Contains(text, secret) {
						t.Errorf("%s shows the secret %q:\n%s", where, secret, text)
					}
				}
				if !strings.Contains(text, placeholder) {
					t.Errorf("%s has no %s:\n%s", where, placeholder, text)
				}
			}

			v, err := s.Report(ctx, "tool", errors.New(l.Message))
			if err != nil || !v.Fallback {
				t.Fatalf("Report = %v, %v; want the local fallback's verdict", v, err)
			}
			check("snippet", v.GetSnippet())

			// An auth code with the 401: a message that begins with a type (redis.exceptions.ConnectionError: ...)
			// is read by that type, which outranks a status, as on the sidecar.
			v, err = s.Report(ctx, "llm", errors.New(l.Message), WithHTTPStatus(401), WithCode("invalid_api_key"))
			if err != nil || !v.Fallback || v.Action != ActionEscalate {
				t.Fatalf("Report(401) = %v, %v; want a local escalation", v, err)
			}
			check("escalation report", v.GetEscalation().GetText())

			c, err := s.Context(ctx)
			if err != nil {
				t.Fatal(err)
			}
			check("local context", c.GetText())
		})
	}
}

// Ordinary ids and phrases near the patterns' shapes ("invalid token", git
// SHAs, image digests) are left as they are, in redact and in the snippet.
func TestRedactLeavesOrdinaryText(t *testing.T) {
	s := unreachableSession(t)
	for _, l := range loadSecretLines(t, "ordinary.jsonl") {
		if got := redact(l.Message); got != l.Message {
			t.Errorf("%s: redact(%q) = %q, want it unchanged", l.ID, l.Message, got)
		}
		v, err := s.Report(context.Background(), l.ID, errors.New(l.Message))
		if err != nil || !v.Fallback {
			t.Fatalf("%s: Report = %v, %v; want the local fallback's verdict", l.ID, v, err)
		}
		if !strings.Contains(v.GetSnippet(), l.Message) {
			t.Errorf("%s: the snippet lost %q:\n%s", l.ID, l.Message, v.GetSnippet())
		}
	}
}

// The constructs the port had to translate behave as the sidecar's: capture
// groups keep the key name, Rust's Unicode \s, the PEM block cut off by the
// end of the text, and redaction before the cut.
func TestRedactMatchesTheSidecar(t *testing.T) {
	tests := []struct{ text, want string }{
		// The cases of src/redact.rs's own tests.
		{"could not connect to postgres://app:hunter2@db.internal:5432/app",
			"could not connect to postgres://app:[REDACTED:url_password]@db.internal:5432/app"},
		{"DATABASE password=s3cr3tpass host=db", "DATABASE password=[REDACTED:password] host=db"},
		{"aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
			"aws_secret_access_key = [REDACTED:aws_secret_key]"},
		{"headers={'Authorization': 'Bearer abcDEF123456.xyz'}", "headers={'Authorization': 'Bearer [REDACTED:bearer_token]'}"},
		{"-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----\nthen", "[REDACTED:private_key]\nthen"},
		// A key the message cut off: the match runs to the end of the text (\z).
		{"key:\n-----BEGIN PRIVATE KEY-----\nMIIEowIBAAKCAQEA", "key:\n[REDACTED:private_key]"},
		// Rust's \s is Unicode White_Space: a no-break space may separate, and ends a value.
		{"password\u00a0=\u00a0hunter22 then", "password\u00a0=\u00a0[REDACTED:password] then"},
		{"api_key=abcdef123456\u2003next", "api_key=[REDACTED:api_key]\u2003next"},
		// Word boundaries are ASCII: a letter before the key keeps it from matching, é does not.
		{"xsk-ant-api03-AbCdEfGhIjKl", "xsk-ant-api03-AbCdEfGhIjKl"},
		{"ésk-ant-api03-AbCdEfGhIjKl", "é[REDACTED:anthropic_key]"},
		// A value that is already a placeholder stays.
		{"token=[REDACTED:jwt]", "token=[REDACTED:jwt]"},
		// (?i) takes the Kelvin sign for k and the long s for s, and so do the needles' gates.
		{"api_\u212aey=abcdef123456", "api_\u212aey=[REDACTED:api_key]"},
		{"login failed: pa\u017fsword=hunter22 rejected", "login failed: pa\u017fsword=[REDACTED:password] rejected"},
		{"the \u212aelvin sign, alone", "the \u212aelvin sign, alone"},
		// Names joined to a prefix, as environment variables and camelCase keys spell them.
		{"env DB_PASSWORD=Tr0ub4dor3xyz psql -h db", "env DB_PASSWORD=[REDACTED:password] psql -h db"},
		{"PGPASSWORD=Tr0ub4dor3xyz pg_dump mydb", "PGPASSWORD=[REDACTED:password] pg_dump mydb"},
		{"MYSQL_PWD=Tr0ub4dor3xyz mysql", "MYSQL_PWD=[REDACTED:password] mysql"},
		{"HF_TOKEN=hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567", "HF_TOKEN=[REDACTED:huggingface_token]"},
		{`{"clientSecret": "s3cr3t-value-1"}`, `{"clientSecret": "[REDACTED:secret]"}`},
		{"bypass: enabled, compass=north, OLDPWD=/home/app", "bypass: enabled, compass=north, OLDPWD=/home/app"},
		// (?i) folds ſ into the prefix's [a-z0-9_], as Rust's does; the boundary is before the prefix.
		{"a\u017f_pass=abcdef", "a\u017f_pass=[REDACTED:password]"},
		// Any Authorization scheme, Go's http.Header printed, cookies, URL signatures.
		{"'Authorization': 'Token 9944b09199c62bcf'", "'Authorization': 'Token [REDACTED:authorization]'"},
		{"map[Authorization:[SSWS 00abcdef0123]]", "map[Authorization:[SSWS [REDACTED:authorization]]]"},
		{"> Cookie: sessionid=abc123; csrftoken=def456\n< HTTP/1.1 403", "> Cookie: [REDACTED:cookie]\n< HTTP/1.1 403"},
		{"GET /c/f?sv=2022-11-02&sig=AbC%2Bdef0123%3D&sp=r", "GET /c/f?sv=2022-11-02&sig=[REDACTED:url_signature]&sp=r"},
		{"/o?X-Amz-Signature=fe5f80f77d5fa3beca038a248ff027d0", "/o?X-Amz-Signature=[REDACTED:url_signature]"},
		// A password holding an unencoded @: the userinfo runs to the last @.
		{"postgresql://app:p@ssw0rd!@db.internal:5432/app", "postgresql://app:[REDACTED:url_password]@db.internal:5432/app"},
		// A cookie value in double quotes (RFC 6265), JSON-escaped too; a base64 = before a JSON quote opens none.
		{`> Cookie: sessionid="abc123def456"`, "> Cookie: [REDACTED:cookie]"},
		{`Set-Cookie: token="YWJjZGVmMTIz=="; Path=/; HttpOnly`, "Set-Cookie: [REDACTED:cookie]"},
		{`'Cookie': 'csrftoken=abcdef; sessionid="abc123def456"'}`, "'Cookie': '[REDACTED:cookie]'}"},
		{`{"cookie":"sid=\"abc123def456\"","host":"h"}`, `{"cookie":"[REDACTED:cookie]","host":"h"}`},
		{`{"Cookie": "s=YWJjZA=", "Host": "h"}`, `{"Cookie": "[REDACTED:cookie]", "Host": "h"}`},
		// A value cut before its closing quote runs to the line's end.
		{"> Cookie: sid=\"abc123def456\n< HTTP/1.1 403", "> Cookie: [REDACTED:cookie]\n< HTTP/1.1 403"},
		{`{"cookie":"sid=\"abc123def`, `{"cookie":"[REDACTED:cookie]`},
		{"> Cookie: sid=\"abc123def456\r\n", "> Cookie: [REDACTED:cookie]\r\n"},
		{`{"Cookie": "s=YWJjZA="}`, `{"Cookie": "[REDACTED:cookie]"}`},
		// Only MySQL's own phrase keeps its YES.
		{"MYSQL_PWD=Tr0ub4dor3xyz mysql (using password: YES)", "MYSQL_PWD=[REDACTED:password] mysql (using password: YES)"},
		{"login with password: YES rejected", "login with password: [REDACTED:password] rejected"},
		{"(using password: hunter2)", "(using password: [REDACTED:password])"},
		// Userinfo ends at the first /, ? or #; a password with no @ before them may hold one.
		{"https://app:hunter2@h:8080?email=a@b.com", "https://app:[REDACTED:url_password]@h:8080?email=a@b.com"},
		{"postgres://user:p@ss@host/db?x=a@b", "postgres://user:[REDACTED:url_password]@host/db?x=a@b"},
		{"mysql://app:Tq4#bW9?kLz2@db:3306/app", "mysql://app:[REDACTED:url_password]@db:3306/app"},
		{`Get "http://localhost:8080?email=jane.doe@example.com"`, `Get "http://localhost:8080?email=jane.doe@example.com"`},
		// Digits then a # before an @ are a password's (redis-py dialed "default:1987"), not a port and a
		// fragment: a fragment holding an @ is masked too, the safer way to be wrong.
		{"redis://default:1987#kLz2qW@cache:6379/0", "redis://default:[REDACTED:url_password]@cache:6379/0"},
		{"https://h:8443#contact=ops@example.com", "https://h:[REDACTED:url_password]@example.com"},
		// A secret flag's value in a command's arguments: Python's CalledProcessError and Node's
		// spawnargs list quoted items, Go's %q of a []string has no commas.
		{"Command '['mysql', '--password', 'Hq7!x P2', '-e', 'SELECT 1']' returned",
			"Command '['mysql', '--password', '[REDACTED:secret_argument]', '-e', 'SELECT 1']' returned"},
		{"[ 'deploy', '--api-key', 'dk8f2a', '--region', 'eu' ]",
			"[ 'deploy', '--api-key', '[REDACTED:secret_argument]', '--region', 'eu' ]"},
		{`["vault" "-token" "hvs.CAES"]`, `["vault" "-token" "[REDACTED:secret_argument]"]`},
		// On a command line, a value with anything besides lower-case letters; the flag's
		// name is read case-insensitively, its value case-sensitively.
		{"Command failed: mysql --password Hq7xkP2 -e", "Command failed: mysql --password [REDACTED:secret_argument] -e"},
		{"+ vault login -token hvs.CAESIJ8", "+ vault login -token [REDACTED:secret_argument]"},
		{"--db-pass s3cret", "--db-pass [REDACTED:secret_argument]"},
		{"mysql --PASSWORD Hunter", "mysql --PASSWORD [REDACTED:secret_argument]"},
		// The next item is a flag, so this one takes no value; prose about a flag stays.
		{"['psql', '--no-password', '-h', 'db']", "['psql', '--no-password', '-h', 'db']"},
		{"['docker', 'login', '--password-stdin', 'registry.example.com']",
			"['docker', 'login', '--password-stdin', 'registry.example.com']"},
		{"option --password requires an argument", "option --password requires an argument"},
		{"psql: option '--password' doesn't allow an argument", "psql: option '--password' doesn't allow an argument"},
		{"      --token string   API token", "      --token string   API token"},
		{"foo--password Hq7xkP2", "foo--password Hq7xkP2"},
		// Webhook URLs, SendGrid keys and Stripe webhook secrets.
		{"for url: https://hooks.slack.com/services/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",
			"for url: https://hooks.slack.com/services/[REDACTED:slack_webhook]"},
		{"https://discordapp.com/api/webhooks/1182736450912837465/Kp3Xz8Qw1Lm6Nb4Vc9Rt2Yh7-_x",
			"https://discordapp.com/api/webhooks/1182736450912837465/[REDACTED:discord_webhook]"},
		{"key SG.ngeVfQFYQlKU0ufo8x5d1A.TwL2iGABf9DHoTf-09kqe rejected", "key [REDACTED:sendgrid_key] rejected"},
		{"secret is whsec_4f9b2c7e1a8d3f6b0c5e9a2d (^C", "secret is [REDACTED:stripe_key] (^C"},
		{"https://slack.com/api/chat.postMessage", "https://slack.com/api/chat.postMessage"},
		{"msg.SGx.bla", "msg.SGx.bla"},
		{"https://hooks.slack.com/services/", "https://hooks.slack.com/services/"},
		// Uncovered by another redaction: the second pass sees the URL.
		{"ab://u:]pass:w/cd://e:f@h", "ab://u:[REDACTED:url_password]@h"},
	}
	for _, tt := range tests {
		if got := redact(tt.text); got != tt.want {
			t.Errorf("redact(%q) =\n%q\nwant\n%q", tt.text, got, tt.want)
		}
	}
	if got := redactWithin("ab://u:]pass:w/cd://e:f@h", 2); got != unsettled {
		t.Errorf("a text still changing after its last pass = %q, want %q", got, unsettled)
	}

	// The input cargo-fuzz found for the sidecar: one pass was not enough.
	data, err := os.ReadFile(filepath.Join("..", "..", "tests", "data", "fuzz", "redact_compact-two-passes"))
	if err != nil {
		t.Fatal(err)
	}
	// Each invalid byte becomes U+FFFD, as Rust's from_utf8_lossy does with these bytes.
	found := string([]rune(string(data)))
	once := redact(found)
	if again := redact(once); again != once {
		t.Errorf("redacting twice changed the text:\n%q\n%q", once, again)
	}
	if !strings.Contains(once, "[REDACTED:url_password]@d_por0") {
		t.Errorf("the fuzz input's URL password stays: %q", once)
	}

	// Redacted before the cut: a key past the cut's edge leaves no head of itself behind.
	key := "sk-proj-" + strings.Repeat("A", 40)
	message := strings.Repeat("x", maxSnippetMessage-12) + " " + key
	if got := shownMessage(&reboundpb.Outcome{Message: message}); strings.Contains(got, "sk-proj-AAA") {
		t.Errorf("the cut kept the head of the key: %q", got)
	}

	// A long message is redacted from its head (redactedBytes of it), a PEM key running past
	// that bound included, and cut between characters.
	pem := "é-----BEGIN PRIVATE KEY-----\n" + strings.Repeat("MIIEowIBAAKCAQEA", redactedBytes/8)
	if got := shownMessage(&reboundpb.Outcome{Message: pem}); got != "é[REDACTED:private_key]" {
		t.Errorf("a key longer than the redacted head: %q", got)
	}
	if got := headBytes("aé", 2); got != "a" {
		t.Errorf("headBytes cut inside a character: %q", got)
	}
	if got := tailBytes("éa", 2); got != "a" {
		t.Errorf("tailBytes cut inside a character: %q", got)
	}
}

// Every pattern that matches a corpus line is let through by its needles, or
// the gate would hide a secret from its pattern.
func TestSecretNeedlesLetEveryMatchThrough(t *testing.T) {
	for _, l := range loadSecretLines(t, "secrets.jsonl") {
		gates := secretCandidates(l.Message)
		for i, p := range secrets {
			if p.re.MatchString(l.Message) && gates&(1<<i) == 0 {
				t.Errorf("%s: %s matches, but no needle lets it through", l.ID, p.kind)
			}
		}
	}
	for i, n := range secretNeedles {
		if n.needle != asciiLower(n.needle) {
			t.Errorf("needle %q: the text is lowered, so the needles must be", n.needle)
		}
		// A needle lets through every pattern of each kind it names (secret_argument has two).
		for _, kind := range n.kinds {
			for j, p := range secretPatterns {
				if p.kind == kind && secretGates[i]&(1<<j) == 0 {
					t.Errorf("needle %q lets %s's pattern %d not through", n.needle, kind, j)
				}
			}
		}
	}
}

// Redacting a redacted text changes nothing, and a secret of a known shape never stays.
func FuzzRedact(f *testing.F) {
	f.Add("Incorrect API key provided: sk-proj-abcdefghijklmnopqrstuvwxyz0123456789ABCD.", "abcdefghijklmnopqrstuvwxyz0123456789ABCD")
	f.Add("ab://u:]pass:w/cd://e:f@h", "0123456789abcdef")
	f.Fuzz(func(t *testing.T, text, secret string) {
		once := redact(text)
		if again := redact(once); again != once {
			t.Errorf("redact(%q) = %q, and again %q", text, once, again)
		}
		if len(secret) < 40 || strings.Trim(secret, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789") != "" {
			return
		}
		for _, shape := range []string{"sk-proj-%s", "https://user:%s@example.com", "Authorization: Bearer %s", "api_key=%s&q=1"} {
			if out := redact(strings.Replace(shape, "%s", secret, 1)); strings.Contains(out, secret) {
				t.Errorf("the secret stays in %q", out)
			}
		}
	})
}
