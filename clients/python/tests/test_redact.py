"""Secrets in what the fallback writes: every secret of the shared corpus
(tests/data/secrets/secrets.jsonl, messages in the shape of real SDK and tool errors) is out of
the snippet, the escalation report and the local context a client writes when its sidecar does
not answer, replaced by the sidecar's placeholder; the ordinary lines (ordinary.jsonl) stay as
they are. The patterns are src/redact.rs's, checked here for drift."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import rebound
from rebound import Action
from rebound.fallback import MAX_SNIPPET_MESSAGE, cut, defuse_tags
from rebound.redact import PATTERNS, UNSETTLED, _COMPILED, _redact_within, redact
from tests.conftest import unique
from tests.servers import refused_address
from tests.sidecar import REPO

CORPUS = REPO / "tests" / "data" / "secrets"
REDACT_RS = REPO / "src" / "redact.rs"
"""The sidecar's patterns, the source of truth for rebound.redact's."""


def lines(path: Path) -> list[Any]:
    """The corpus file's lines, as pytest parameters named by their ids."""
    parsed = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return [pytest.param(line, id=line["id"]) for line in parsed]


SECRETS = lines(CORPUS / "secrets.jsonl")
ORDINARY = lines(CORPUS / "ordinary.jsonl")


@pytest.fixture(scope="module")
def unreachable() -> Iterator[rebound.Client]:
    """A client with no sidecar to answer it: every verdict is its fallback's."""
    host, port = refused_address()
    with rebound.Client(f"{host}:{port}") as client:
        yield client


def test_the_corpora_are_there() -> None:
    assert (len(SECRETS), len(ORDINARY)) == (131, 71), f"the corpora under {CORPUS} changed"


@pytest.mark.parametrize("line", SECRETS)
def test_no_secret_reaches_what_the_fallback_writes(unreachable: rebound.Client, line: dict[str, Any]) -> None:
    with unreachable.session(unique("py-redact"), tools=["llm"]) as session:
        # Bad credentials escalate: the snippet and the escalation report both repeat the message. An
        # auth code with the 401: a message that begins with a type (`redis.exceptions.ConnectionError:
        # ...`) is read by that type, which outranks a status, as on the sidecar.
        v = session.report("llm", message=line["message"], http_status=401, code="invalid_api_key")
        assert v.fallback and v.action is Action.ESCALATE and v.escalation is not None
        written = {"snippet": v.snippet, "escalation": v.escalation.text, "context": session.context().text}
    for where, text in written.items():
        assert f"[REDACTED:{line['type']}]" in text, f"{where}: {text}"
        for secret in line["secrets"]:
            assert secret not in text, f"{where}: {text}"


@pytest.mark.parametrize("line", ORDINARY)
def test_ordinary_text_stays_as_it_is(unreachable: rebound.Client, line: dict[str, Any]) -> None:
    message = line["message"]
    assert redact(message) == message
    with unreachable.session(unique("py-redact"), tools=["llm"]) as session:
        v = session.report("llm", message=message)
    # The block's lines after its tag, as many as the message has (getopt's and cobra's messages have several).
    shown = defuse_tags(cut(message, MAX_SNIPPET_MESSAGE)).split("\n")
    assert v.fallback and v.snippet.split("\n")[1 : 1 + len(shown)] == shown


def test_a_cut_cannot_leave_half_a_secret(unreachable: rebound.Client) -> None:
    # Cut first, the key would keep 12 of its characters: too few for any pattern to know it.
    key = "sk-proj-" + "A1b2C3d4E5" * 4
    message = "x" * (MAX_SNIPPET_MESSAGE - 13) + " " + key
    with unreachable.session(unique("py-redact"), tools=["llm"]) as session:
        v = session.report("llm", message=message)
    assert v.fallback and "sk-proj-" not in v.snippet and "[REDACTED:" in v.snippet


def test_the_patterns_are_the_sidecars() -> None:
    source = REDACT_RS.read_text(encoding="utf-8")
    table = source[source.index("static PATTERNS") : source.index("]\n});")]
    entry = re.compile(r'p\(\s*"(\w+)",\s*(\d+),\s*(?:r#"(.*?)"#|r"(.*?)")\s*,?\s*\)', re.DOTALL)
    sidecar = [(kind, int(group), raw or plain) for kind, group, raw, plain in entry.findall(table)]
    assert len(sidecar) == 28, f"read {len(sidecar)} patterns from {REDACT_RS}"
    assert list(PATTERNS) == sidecar


def test_no_rust_syntax_is_left_in_the_python_patterns() -> None:
    for kind, _, regex in _COMPILED:
        python = regex.pattern.replace(r"[\s\S]", "")
        assert not re.search(r"\(\?-u|\\z|\\[sS]", python), f"{kind}: {regex.pattern}"


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        # Rust's (?-u:\b) is an ASCII word boundary: a CJK character before a key is not a word character.
        ("无效的密钥sk-proj-abcdefghijklmnopqrstuvwxyz0123 已拒绝", "无效的密钥[REDACTED:openai_key] 已拒绝"),
        # ... and a boundary still: a key's prefix inside a word is no key.
        ("task-0123456789abcdefghijklmnop failed", "task-0123456789abcdefghijklmnop failed"),
        # Rust's \s is Unicode White_Space, which \x1f is not: the value goes on past it.
        ("password=ab\x1fcd host=db", "password=[REDACTED:password] host=db"),
        # Rust does not take ı for an i: the token ends there, and the password after it is found.
        ("Bearer abcdefghıpwd: hunter2", "Bearer [REDACTED:bearer_token]ıpwd: [REDACTED:password]"),
        # But it takes the Kelvin sign for a k, as Python does.
        ("api_\u212aey=abcdef123456", "api_\u212aey=[REDACTED:api_key]"),
        # (?i) folds ſ into a name's [a-z0-9_] prefix, as Rust's does, and the boundary is before the prefix.
        ("a\u017f_pass=abcdef", "a\u017f_pass=[REDACTED:password]"),
        ("\u0131DB_PASSWORD=abc", "\u0131DB_PASSWORD=[REDACTED:password]"),
        # An unterminated PEM key is redacted to the end of the text.
        ("bad key: -----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkq\n", "bad key: [REDACTED:private_key]"),
    ],
)
def test_regex_constructs_read_as_in_rust(text: str, redacted: str) -> None:
    assert redact(text) == redacted


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        ("env DB_PASSWORD=Tr0ub4dor3xyz psql -h db", "env DB_PASSWORD=[REDACTED:password] psql -h db"),
        ("PGPASSWORD=Tr0ub4dor3xyz pg_dump mydb", "PGPASSWORD=[REDACTED:password] pg_dump mydb"),
        ("MYSQL_PWD=Tr0ub4dor3xyz mysql", "MYSQL_PWD=[REDACTED:password] mysql"),
        ("HF_TOKEN=hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567", "HF_TOKEN=[REDACTED:huggingface_token]"),
        ('{"clientSecret": "s3cr3t-value-1"}', '{"clientSecret": "[REDACTED:secret]"}'),
        ("bypass: enabled, compass=north, OLDPWD=/home/app", "bypass: enabled, compass=north, OLDPWD=/home/app"),
        ("'Authorization': 'Token 9944b09199c62bcf'", "'Authorization': 'Token [REDACTED:authorization]'"),
        ("'HTTP_AUTHORIZATION': 'abcdef012345'", "'HTTP_AUTHORIZATION': '[REDACTED:authorization]'"),
        ("> Cookie: sessionid=abc123; csrftoken=def456\n< HTTP/1.1 403", "> Cookie: [REDACTED:cookie]\n< HTTP/1.1 403"),
        ("GET /c/f?sv=2022-11-02&sig=AbC%2Bdef0123%3D&sp=r", "GET /c/f?sv=2022-11-02&sig=[REDACTED:url_signature]&sp=r"),
        ("/o?X-Amz-Signature=fe5f80f77d5fa3beca038a248ff027d0", "/o?X-Amz-Signature=[REDACTED:url_signature]"),
        ("postgresql://app:p@ssw0rd!@db.internal:5432/app", "postgresql://app:[REDACTED:url_password]@db.internal:5432/app"),
    ],
)
def test_names_joined_to_a_prefix_and_other_headers(text: str, redacted: str) -> None:
    # Environment variables and camelCase keys, any Authorization scheme, cookies, URL signatures, and a
    # URL password holding an unencoded @, as src/redact.rs's names_joined_to_a_prefix_and_other_headers_are_redacted.
    assert redact(text) == redacted


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        ('> Cookie: sessionid="abc123def456"', "> Cookie: [REDACTED:cookie]"),
        ('Set-Cookie: token="YWJjZGVmMTIz=="; Path=/; HttpOnly', "Set-Cookie: [REDACTED:cookie]"),
        ("""'Cookie': 'csrftoken=abcdef; sessionid="abc123def456"'}""", "'Cookie': '[REDACTED:cookie]'}"),
        (r'{"cookie":"sid=\"abc123def456\"","host":"h"}', '{"cookie":"[REDACTED:cookie]","host":"h"}'),
        ('{"Cookie": "s=YWJjZA=", "Host": "h"}', '{"Cookie": "[REDACTED:cookie]", "Host": "h"}'),
        # A value cut before its closing quote runs to the line's end.
        ('> Cookie: sid="abc123def456\n< HTTP/1.1 403', "> Cookie: [REDACTED:cookie]\n< HTTP/1.1 403"),
        (r'{"cookie":"sid=\"abc123def', '{"cookie":"[REDACTED:cookie]'),
        ('> Cookie: sid="abc123def456\r\n', "> Cookie: [REDACTED:cookie]\r\n"),
        ('{"Cookie": "s=YWJjZA="}', '{"Cookie": "[REDACTED:cookie]"}'),
        ("MYSQL_PWD=Tr0ub4dor3xyz mysql (using password: YES)", "MYSQL_PWD=[REDACTED:password] mysql (using password: YES)"),
        ("login with password: YES rejected", "login with password: [REDACTED:password] rejected"),
        ("(using password: hunter2)", "(using password: [REDACTED:password])"),
        ("https://app:hunter2@h:8080?email=a@b.com", "https://app:[REDACTED:url_password]@h:8080?email=a@b.com"),
        ("postgres://user:p@ss@host/db?x=a@b", "postgres://user:[REDACTED:url_password]@host/db?x=a@b"),
        ("mysql://app:Tq4#bW9?kLz2@db:3306/app", "mysql://app:[REDACTED:url_password]@db:3306/app"),
        ('Get "http://localhost:8080?email=jane.doe@example.com"', 'Get "http://localhost:8080?email=jane.doe@example.com"'),
        # Digits then a # before an @ are a password's (redis-py dialed "default:1987"), not a port and a
        # fragment: a fragment holding an @ is masked too, the safer way to be wrong.
        ("redis://default:1987#kLz2qW@cache:6379/0", "redis://default:[REDACTED:url_password]@cache:6379/0"),
        ("https://h:8443#contact=ops@example.com", "https://h:[REDACTED:url_password]@example.com"),
    ],
)
def test_quoted_cookies_the_mysql_phrase_and_an_at_after_the_host(text: str, redacted: str) -> None:
    # As src/redact.rs's quoted_cookie_values_and_passwords_beside_the_mysql_phrase_are_redacted and
    # the_mysql_phrase_and_an_at_sign_after_the_host_stay.
    assert redact(text) == redacted


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        # Python's CalledProcessError and Node's spawnargs: a list of quoted items.
        (
            "Command '['mysql', '--password', 'Hq7!x P2', '-e', 'SELECT 1']' returned",
            "Command '['mysql', '--password', '[REDACTED:secret_argument]', '-e', 'SELECT 1']' returned",
        ),
        (
            "[ 'deploy', '--api-key', 'dk8f2a', '--region', 'eu' ]",
            "[ 'deploy', '--api-key', '[REDACTED:secret_argument]', '--region', 'eu' ]",
        ),
        # Go's %q of a []string: no commas.
        ('["vault" "-token" "hvs.CAES"]', '["vault" "-token" "[REDACTED:secret_argument]"]'),
        # A command line: a value with anything besides lower-case letters.
        ("Command failed: mysql --password Hq7xkP2 -e", "Command failed: mysql --password [REDACTED:secret_argument] -e"),
        ("+ vault login -token hvs.CAESIJ8", "+ vault login -token [REDACTED:secret_argument]"),
        ("--db-pass s3cret", "--db-pass [REDACTED:secret_argument]"),
        # The flag's name is read case-insensitively, its value case-sensitively: upper-case letters are something else.
        ("mysql --PASSWORD Hunter", "mysql --PASSWORD [REDACTED:secret_argument]"),
        # The next item is a flag: this one takes no value.
        ("['psql', '--no-password', '-h', 'db']", "['psql', '--no-password', '-h', 'db']"),
        (
            "['docker', 'login', '--password-stdin', 'registry.example.com']",
            "['docker', 'login', '--password-stdin', 'registry.example.com']",
        ),
        # Prose about a flag.
        ("option --password requires an argument", "option --password requires an argument"),
        ("psql: option '--password' doesn't allow an argument", "psql: option '--password' doesn't allow an argument"),
        ("      --token string   API token", "      --token string   API token"),
        ("foo--password Hq7xkP2", "foo--password Hq7xkP2"),
    ],
)
def test_secret_flags_in_a_commands_arguments(text: str, redacted: str) -> None:
    # As src/redact.rs's secret_flags_in_a_commands_arguments_are_redacted.
    assert redact(text) == redacted


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        (
            "for url: https://hooks.slack.com/services/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",
            "for url: https://hooks.slack.com/services/[REDACTED:slack_webhook]",
        ),
        (
            "https://discordapp.com/api/webhooks/1182736450912837465/Kp3Xz8Qw1Lm6Nb4Vc9Rt2Yh7-_x",
            "https://discordapp.com/api/webhooks/1182736450912837465/[REDACTED:discord_webhook]",
        ),
        ("key SG.ngeVfQFYQlKU0ufo8x5d1A.TwL2iGABf9DHoTf-09kqe rejected", "key [REDACTED:sendgrid_key] rejected"),
        ("secret is whsec_4f9b2c7e1a8d3f6b0c5e9a2d (^C", "secret is [REDACTED:stripe_key] (^C"),
        ("https://slack.com/api/chat.postMessage", "https://slack.com/api/chat.postMessage"),
        ("msg.SGx.bla", "msg.SGx.bla"),
        ("https://hooks.slack.com/services/", "https://hooks.slack.com/services/"),
    ],
)
def test_webhook_urls_and_more_provider_keys(text: str, redacted: str) -> None:
    # As src/redact.rs's webhook_urls_and_more_provider_keys_are_redacted.
    assert redact(text) == redacted


def test_a_secret_uncovered_by_another_redaction_is_redacted_too() -> None:
    # The `/` in `w/cd://` keeps the first URL from matching (after the `]`) until `pass:`'s value, which
    # holds it, is replaced.
    assert redact("ab://u:]pass:w/cd://e:f@h") == "ab://u:[REDACTED:url_password]@h"
    # The input cargo-fuzz found for the sidecar: one pass was not enough.
    found = (REPO / "tests" / "data" / "fuzz" / "redact_compact-two-passes").read_bytes()
    once = redact(found.decode("utf-8", "replace"))
    assert redact(once) == once and "[REDACTED:url_password]@d_por0" in once, once


def test_text_that_does_not_settle_is_given_up_whole() -> None:
    # Two passes replace something here, and the third finds nothing more.
    assert _redact_within("ab://u:]pass:w/cd://e:f@h", 2) == UNSETTLED
    assert _redact_within("ab://u:]pass:w/cd://e:f@h", 3) == "ab://u:[REDACTED:url_password]@h"
    assert redact(UNSETTLED) == UNSETTLED
