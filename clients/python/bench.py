"""Measures the Python client's report round trip (outcome sent, verdict back) against a real
sidecar, over loopback TCP and over a Unix socket, and prints p50 and p99 per transport:

    python tcp p50=412us p99=901us n=2000          (Session.report: one unary Report RPC)
    python tcp stream p50=... p99=... n=2000      (Reporter.report over one Observe stream)
    python tcp async p50=... p99=... n=2000       (AsyncSession.report)

It starts its own sidecars ($REBOUND_BIN, or the repository's target/debug/rebound) unless
given running ones:

    .venv/bin/python bench.py -n 2000 [--tcp HOST:PORT] [--unix unix:/path.sock]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

import rebound

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tests.sidecar import Sidecar  # noqa: E402 - the helper lives with the tests

MAX_COUNT = 100_000
"""Bounds a run: the benchmark must stop by itself in reasonable time."""
CALL_TIMEOUT = 5.0
"""Generous: a slow answer must be measured, not replaced by the fallback."""


def measure(report: Callable[[], rebound.Verdict], n: int, warmup: int) -> list[float]:
    """Times n reports after `warmup` unmeasured ones; every one must be the sidecar's answer."""
    samples = []
    for i in range(warmup + n):
        start = time.perf_counter()
        v = report()
        elapsed = time.perf_counter() - start
        if v.fallback:
            raise SystemExit("bench: the local fallback answered: the sidecar is not reachable")
        if i >= warmup:
            samples.append(elapsed)
    return samples


def measure_async(address: str, n: int, warmup: int) -> list[float]:
    """Times n AsyncSession reports after `warmup` unmeasured ones."""
    async def run() -> list[float]:
        async with rebound.AsyncClient(address, timeout=CALL_TIMEOUT) as client:
            session = client.session(f"bench-async-{time.time_ns()}")
            samples = []
            for i in range(warmup + n):
                start = time.perf_counter()
                v = await session.report("bench")
                elapsed = time.perf_counter() - start
                if v.fallback:
                    raise SystemExit("bench: the local fallback answered: the sidecar is not reachable")
                if i >= warmup:
                    samples.append(elapsed)
            await session.end()
            return samples

    return asyncio.run(run())


def percentile(samples: list[float], p: float) -> int:
    """The p-quantile in microseconds (nearest rank)."""
    ordered = sorted(samples)
    return round(ordered[min(int(p * len(ordered)), len(ordered) - 1)] * 1e6)


def line(transport: str, samples: list[float]) -> str:
    """One output line: transport, p50, p99 and the count."""
    return f"python {transport} p50={percentile(samples, 0.50)}us p99={percentile(samples, 0.99)}us n={len(samples)}"


def main() -> None:
    """Starts the sidecars (unless given), measures each transport and mode, prints the lines."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=2000, help=f"reports measured per transport and mode (1 to {MAX_COUNT})")
    parser.add_argument("--warmup", type=int, default=200, help="reports sent first and not measured")
    parser.add_argument("--tcp", default="", help="a running sidecar's host:port (default: start one)")
    parser.add_argument("--unix", default="", help="a running sidecar's unix:/path (default: start one)")
    args = parser.parse_args()
    if not 1 <= args.n <= MAX_COUNT or not 0 <= args.warmup <= MAX_COUNT:
        parser.error(f"-n must be 1 to {MAX_COUNT} and --warmup 0 to {MAX_COUNT}")

    with ExitStack() as stack:
        scratch = stack.enter_context(tempfile.TemporaryDirectory(prefix="rb-bench"))
        targets = [("tcp", args.tcp, "127.0.0.1:0"), ("unix", args.unix, f"unix:{scratch}/rebound.sock")]
        for transport, address, listen in targets:
            if not address:
                address = stack.enter_context(Sidecar.start(listen)).grpc
            with rebound.Client(address, timeout=CALL_TIMEOUT) as client:
                if not client.wait_for_ready(10):
                    raise SystemExit(f"bench: no sidecar answers at {address}")
                session = client.session(f"bench-unary-{time.time_ns()}")
                print(line(transport, measure(lambda: session.report("bench"), args.n, args.warmup)), flush=True)
                session.end()
                session = client.session(f"bench-stream-{time.time_ns()}")
                with session.reporter() as reporter:
                    samples = measure(lambda: reporter.report("bench"), args.n, args.warmup)
                print(line(f"{transport} stream", samples), flush=True)
                session.end()
            print(line(f"{transport} async", measure_async(address, args.n, args.warmup)), flush=True)


if __name__ == "__main__":
    main()
