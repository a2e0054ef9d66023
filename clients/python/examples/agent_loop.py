"""A small agent loop against real tools that fail in scripted ways. It follows Rebound's
verdicts and prints what it did:

- search: a local HTTP API (started here on 127.0.0.1:0) that answers 429 with Retry-After: 1,
  then 503, then 200;
- shell: `sleep 5` run with a 0.5 s timeout, which always times out;
- the LLM naming a tool that does not exist.

Run it against a sidecar:

    python examples/agent_loop.py --addr 127.0.0.1:50051

Without a sidecar it still runs: the client's local fallback policy decides (and says so).
"""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Optional

import rebound

SHELL_TIMEOUT = 0.5
"""Seconds the scripted command may run; it sleeps far longer."""


@contextmanager
def flaky_api() -> Iterator[str]:
    """A local HTTP API that answers 429 (Retry-After: 1), then 503, then 200 from then on."""
    lock = threading.Lock()
    calls = [0]

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            with lock:
                calls[0] += 1
                n = calls[0]
            if n == 1:
                self.answer(429, "rate limit exceeded, slow down", {"Retry-After": "1"})
            elif n == 2:
                self.answer(503, "upstream overloaded")
            else:
                self.answer(200, f"3 results for {self.path.partition('q=')[2]!r}")

        def answer(self, status: int, body: str, headers: dict[str, str] = {}) -> None:
            data = body.encode()
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def get(url: str) -> str:
    """The search tool: GET url. A 4xx/5xx answer raises urllib.error.HTTPError, which carries
    the status and the headers (Retry-After) that Rebound reads."""
    with urllib.request.urlopen(url, timeout=5) as response:
        body: bytes = response.read(4096)
        return body.decode()


def search(session: rebound.Session, url: str) -> str:
    """Calls the API and acts on each verdict by hand, to show the loop `Session.run` runs."""
    for attempt in range(1, 11):
        start = time.monotonic()
        try:
            result = get(url)
        except urllib.error.HTTPError as exc:
            verdict = session.report("search", error=exc, attempt=attempt, duration=time.monotonic() - start)
            outcome = f"HTTP {exc.code}"
            exc.close()
        else:
            verdict = session.report("search", attempt=attempt, duration=time.monotonic() - start)
            outcome = "ok"
        print(f"  attempt {attempt}: {outcome} -> {verdict.action.label} ({category(verdict)}){source(verdict)}")
        if verdict.action is rebound.Action.CONTINUE:
            return result
        if verdict.action is not rebound.Action.RETRY:
            raise SystemExit(f"search did not recover: the verdict says {verdict.action.label}:\n{verdict.snippet}")
        why = "the provider's Retry-After" if verdict.proto.retry.provider_delay else "backoff"
        print(f"    waiting {verdict.delay:.3f} s ({why})")
        time.sleep(verdict.delay)
    raise SystemExit("search did not succeed in 10 attempts")


def shell(session: rebound.Session) -> None:
    """Runs a command that always times out, letting `Session.run` follow the verdicts."""
    attempts = []

    def sleep_five() -> None:
        attempts.append(time.monotonic())
        print(f"  attempt {len(attempts)}: running `sleep 5` with a {SHELL_TIMEOUT} s timeout")
        subprocess.run(["sleep", "5"], timeout=SHELL_TIMEOUT, check=True)

    try:
        session.run("shell", sleep_five)
        print("  the command finished")
    except rebound.EscalationError as err:
        print(f"  escalated after {len(attempts)} attempts{source(err.verdict)}: a human is needed. Report:")
        print(indent(err.report))
    except rebound.RecoverError as err:
        print(f"  {err.action.label} after {len(attempts)} attempts{source(err.verdict)}; for the LLM:")
        print(indent(err.snippet))
    except rebound.AbortError as err:
        print(f"  the run must end after {len(attempts)} attempts{source(err.verdict)}: {err}")


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    """The command line; --addr defaults to $REBOUND_ADDR, which counts as unset when empty
    (as in the client)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--addr",
        default=os.environ.get("REBOUND_ADDR", "").strip() or rebound.DEFAULT_ADDRESS,
        help="the Rebound sidecar: host:port or unix:/path/to.sock (default: $REBOUND_ADDR or %(default)s)",
    )
    return parser.parse_args(argv)


def main() -> int:
    """Runs the scripted tools through one session and prints what happened."""
    args = parse_args()
    # The client logs one warning if the sidecar cannot be reached.
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

    with flaky_api() as api, rebound.Client(args.addr) as client:
        session_id = f"agent-loop-{os.getpid()}-{int(time.time())}"
        with client.session(session_id, tools=["search", "shell"]) as session:
            print(f"session {session_id} on sidecar {args.addr}")

            print("\n== search: a local API that answers 429 (Retry-After: 1), then 503, then 200")
            print(f"  result: {search(session, api + '/search?q=rebound')}")

            print(f"\n== shell: `sleep 5` with a {SHELL_TIMEOUT} s timeout, run through Session.run")
            shell(session)

            print("\n== the LLM calls a tool that does not exist: serch")
            verdict = session.report("serch", kind=rebound.Kind.UNKNOWN_TOOL, message="Tool serch not found")
            print(f"  verdict: {verdict.action.label}{source(verdict)}")
            print(indent(verdict.snippet))

            context = session.context()
            print(f"\n== context for the LLM's next turn ({context.errors_shown} error(s) shown)")
            print(indent(context.text))

            summary = session.end()
        print(
            f"\n== session summary: {summary.calls} calls, {summary.errors} errors "
            f"{dict(summary.errors_by_category)}, {summary.retries} retries, {summary.escalations} escalations; "
            f"{client.fallback_count} local fallback decisions"
        )
    return 0


def category(v: rebound.Verdict) -> str:
    """The verdict's category name, "success" for none."""
    return "success" if v.category is rebound.Category.UNSPECIFIED else v.category.label


def source(v: rebound.Verdict) -> str:
    """A note when the local fallback decided instead of the sidecar."""
    return " [local fallback: sidecar unreachable]" if v.fallback else ""


def indent(text: str) -> str:
    """Indents a block of text for printing."""
    return "    " + text.strip().replace("\n", "\n    ") if text.strip() else "    (empty)"


if __name__ == "__main__":
    sys.exit(main())
