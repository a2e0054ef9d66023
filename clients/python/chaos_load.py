"""The Python client under chaos: reports tool outcomes through one client for a fixed time,
whatever happens to the sidecar, and prints what it saw as JSON lines, for tests/chaos/run:

    clients/python/.venv/bin/python clients/python/chaos_load.py --addr 127.0.0.1:50051 --seconds 12

Every second: {"t":..., "calls":..., "fallbacks":..., "sidecar":..., "errors":...} (sidecar:
verdicts that came from the sidecar in that second). At the end: {"event":"done", ...} with the
totals and the client's own fallback counter (client_fallback_counter).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

import rebound

CALL_TIMEOUT = 0.1
"""A short deadline: a dead sidecar must not slow the agent much."""
CALLS_PER_SESSION = 50
"""A new session every so many calls, as agent runs come and go."""


class ServiceUnavailable(Exception):
    """A tool's failure: every fourth call fails as an HTTP 503 would."""

    status_code = 503


def main() -> int:
    """Reports in a loop for --seconds, printing a JSON line per second and a done line."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--addr", required=True, help="the sidecar: host:port or unix:/path")
    parser.add_argument("--seconds", type=int, default=12, help="how long to run (1 to 600)")
    args = parser.parse_args()
    if not 1 <= args.seconds <= 600:
        parser.error("--seconds must be 1 to 600")

    def emit(record: dict[str, Any]) -> None:
        print(json.dumps(record, separators=(",", ":")), flush=True)

    fields = ("calls", "fallbacks", "sidecar", "errors")
    total = dict.fromkeys(fields, 0)
    second = dict.fromkeys(fields, 0)
    failing = ServiceUnavailable("HTTP 503: Service Unavailable")
    with rebound.Client(args.addr, timeout=CALL_TIMEOUT) as client:
        start = time.monotonic()
        next_tick = start + 1
        i = 0
        session = client.session(f"chaos-py-{os.getpid()}-0")
        while time.monotonic() - start < args.seconds:
            if i and i % CALLS_PER_SESSION == 0:
                session = client.session(f"chaos-py-{os.getpid()}-{i // CALLS_PER_SESSION}")
            second["calls"] += 1
            try:
                v = session.report("search", error=failing if i % 4 == 3 else None)
            except Exception as exc:  # the point of the driver: count anything that escapes
                second["errors"] += 1
                print(f"chaos_load: report raised {type(exc).__name__}: {exc}", file=sys.stderr)
            else:
                second["fallbacks" if v.fallback else "sidecar"] += 1
            i += 1
            now = time.monotonic()
            if now >= next_tick:
                emit({"t": int(now - start), **second})
                for k in fields:
                    total[k] += second[k]
                    second[k] = 0
                next_tick += 1
            time.sleep(0.002)
        for k in fields:
            total[k] += second[k]
        emit({"t": int(time.monotonic() - start), **total, "event": "done", "client_fallback_counter": client.fallback_count})
    return 0


if __name__ == "__main__":
    sys.exit(main())
