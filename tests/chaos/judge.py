"""Judges one client's chaos run for tests/chaos/run, from the load driver's JSON lines.

Each line of --log is "<arrival time> <JSON>", the time taken by the runner (seconds since the
epoch) as the line arrived. A per-second line ({"t","calls","fallbacks","sidecar","errors"}) counts
the calls since the previous line, so it covers the span from the previous line's arrival to its
own. The last line is {"event":"done",...}: the totals and the client's own fallback counter.

The sidecar was dead from --killed-at (after SIGKILL, once reaped) until --relaunched-at (when the
new process was started; it cannot answer before) and ready at --ready-at. The client passes if:
  - before the kill, verdicts came from the sidecar (else nothing here means anything);
  - every whole second of the outage had calls, all decided by the local fallback;
  - the fallback decisions are counted (> 0) in the totals and by the client itself;
  - no call raised an error;
  - after the restart, the same client process got verdicts from the sidecar again, in each of the
    last seconds of the run.
Prints one summary line; exits 1 naming every check that failed.

    python3 tests/chaos/judge.py --client go --log driver.log --killed-at T1 --relaunched-at T2 \\
        --ready-at T3 --driver-status 0
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from typing import Any

MARGIN = 0.05
"""Seconds of slack at the outage's edges for the lag between a driver's print and its arrival."""
LAST_SECONDS = 2
"""How many of the run's last seconds must each have verdicts from the sidecar."""


@dataclass
class Tick:
    """One per-second line and the span it covers."""

    start: float
    end: float
    t: int
    calls: int
    fallbacks: int
    sidecar: int
    errors: int


def seconds(value: str) -> float:
    """A time as bash's $EPOCHREALTIME prints it (the decimal mark follows the locale)."""
    return float(value.replace(",", "."))


def parse(path: str) -> tuple[list[Tick], dict[str, Any] | None, list[str]]:
    """The per-second lines, the done line, and lines that were not the driver's JSON."""
    ticks: list[Tick] = []
    done: dict[str, Any] | None = None
    junk: list[str] = []
    previous: float | None = None
    with open(path, encoding="utf-8") as f:
        for raw in f:
            stamp, _, text = raw.rstrip("\n").partition(" ")
            try:
                at = seconds(stamp)
                record = json.loads(text)
            except ValueError:
                junk.append(raw.strip())
                continue
            if not isinstance(record, dict):
                junk.append(raw.strip())
            elif record.get("event") == "done":
                done = record
            else:
                # The first line's span starts when the driver began its loop, about a second before.
                start = previous if previous is not None else at - 1.0
                ticks.append(
                    Tick(start, at, *(int(record[k]) for k in ("t", "calls", "fallbacks", "sidecar", "errors")))
                )
                previous = at
    return ticks, done, junk


def main() -> int:
    """Checks one run; prints a summary line and returns 0, or names what failed and returns 1."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--client", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--killed-at", required=True, type=seconds)
    parser.add_argument("--relaunched-at", required=True, type=seconds)
    parser.add_argument("--ready-at", required=True, type=seconds)
    parser.add_argument("--driver-status", required=True, type=int)
    args = parser.parse_args()

    ticks, done, junk = parse(args.log)
    failures: list[str] = []
    if args.driver_status != 0:
        failures.append(f"the load driver exited with status {args.driver_status}")
    if junk:
        failures.append(f"{len(junk)} line(s) on the driver's stdout are not its JSON, first: {junk[0]!r}")
    if done is None:
        failures.append("the load driver printed no done line")
        done = {}

    before = [k for k in ticks if k.end <= args.killed_at]
    if not any(k.sidecar for k in before):
        failures.append("before the kill, no verdict came from the sidecar: the client never reached it")

    outage = [k for k in ticks if k.start >= args.killed_at + MARGIN and k.end <= args.relaunched_at - MARGIN]
    if not outage:
        failures.append(
            f"no whole second of load fell inside the outage ({args.relaunched_at - args.killed_at:.1f} s): "
            "the driver stalled or printed nothing while the sidecar was dead"
        )
    for k in outage:
        if k.calls == 0:
            failures.append(f"outage second t={k.t}: no call was decided: the client stopped")
        if k.sidecar:
            failures.append(f"outage second t={k.t}: {k.sidecar} verdict(s) claimed to come from a dead sidecar")
        if k.fallbacks != k.calls:
            failures.append(f"outage second t={k.t}: {k.fallbacks} of {k.calls} calls decided by the fallback")

    fallbacks = int(done.get("fallbacks", 0))
    counter = int(done.get("client_fallback_counter", 0))
    if fallbacks <= 0:
        failures.append("no verdict was marked as a fallback decision")
    if counter <= 0:
        failures.append("the client's own fallback counter is 0")
    elif counter != fallbacks:
        failures.append(f"the client counted {counter} fallback decisions, its verdicts say {fallbacks}")
    if int(done.get("errors", 0)) or any(k.errors for k in ticks):
        failures.append(f"{done.get('errors', sum(k.errors for k in ticks))} call(s) raised an error instead of deciding")

    after = [k for k in ticks if k.start >= args.ready_at]
    last = after[-LAST_SECONDS:]
    if len(last) < LAST_SECONDS:
        failures.append(
            f"fewer than {LAST_SECONDS} whole seconds of load after the restart (the restarted sidecar took "
            f"{args.ready_at - args.relaunched_at:.1f} s to be ready; a longer CHAOS_SECONDS leaves more)"
        )
    elif not all(k.sidecar for k in last):
        failures.append(
            "after the restart the client did not get verdicts from the sidecar again in its last "
            f"{LAST_SECONDS} seconds (sidecar counts {[k.sidecar for k in last]})"
        )
    back = next((k for k in ticks if k.end > args.ready_at and k.sidecar), None)
    # An upper bound: the end of the first second after the restart with a verdict from the sidecar.
    reconnect = f"within {back.end - args.ready_at:.1f} s of the restart" if back else "never after the restart"

    summary = (
        f"{done.get('calls', 0)} calls, {fallbacks} by the fallback (client counter {counter}); "
        f"{len(outage)} whole second(s) of outage: {sum(k.calls for k in outage)} calls, "
        f"{sum(k.fallbacks for k in outage)} by the fallback; restarted sidecar ready in "
        f"{args.ready_at - args.relaunched_at:.1f} s, its verdicts again {reconnect}"
    )
    if failures:
        print(f"chaos {args.client}: FAILED: {summary}")
        for failure in failures:
            print(f"chaos {args.client}: FAILED: {failure}")
        return 1
    print(f"chaos {args.client}: ok: {summary}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
