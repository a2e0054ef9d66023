"""What a session remembers on the client side, always, so that the fallback policy carries on
where the sidecar left off: the session breakers' counts (failures in a row per tool, errors,
identical errors in a row, steps, cost, the state), the limits the session declared,
unresolved errors for the context, and the summary counters (with the labels it declared)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import NamedTuple, Optional

from rebound.fallback import (
    NO_LABELS,
    DeclaredLimits,
    SessionCounters,
    error_block,
    error_type,
    message_line,
    shown_message,
)
from rebound.fingerprint import judged_text, normalise
from rebound.v1 import rebound_pb2 as pb
from rebound.verdict import Action, Category, ErrorContext

MAX_UNRESOLVED = 64
"""Bounds the local error list; the sidecar keeps the full history."""
CONTEXT_SHOWN = 3
"""How many errors the local context shows as blocks, as the sidecar's default."""
IDEMPOTENCY_WINDOW = 16
"""How many recent call ids and their verdicts a session remembers, as the sidecar's default
(`sessions.idempotency_window`)."""


@dataclass
class _Error:
    tool: str
    kind: str
    message: str
    count: int = 1
    category: Category = Category.UNSPECIFIED
    suggestion: str = ""


class Counted(NamedTuple):
    """What the fallback policy reads for one outcome, as `LocalState.observe` counted it."""

    consecutive: int
    """Failures of the outcome's tool in a row, this one included."""
    session: SessionCounters
    """The session's counts after the outcome, and its state before it."""


class LocalState:
    """One session's client-side memory; safe for concurrent use."""

    def __init__(
        self, now: float, limits: DeclaredLimits = DeclaredLimits(), labels: Mapping[str, str] = NO_LABELS
    ) -> None:
        self._lock = threading.Lock()
        self._started = now
        self.limits = limits
        """The limits the session declared, which the fallback enforces."""
        self.labels: Mapping[str, str] = MappingProxyType(dict(labels))
        """The labels the session declared, which the fallback's escalation reports and the
        local summary carry, as the sidecar's do."""
        self._consecutive: dict[str, int] = {}
        # The tool and normalised message of the session's last error while it repeats, and how
        # many times in a row it came; a success of that tool clears it, as on the sidecar.
        self._last_error: Optional[tuple[str, str]] = None
        self._identical = 0
        # The latest error of each tool whose last call failed, oldest first.
        self._unresolved: list[_Error] = []
        self._summary = pb.SessionSummary(state=pb.SESSION_STATE_ACTIVE, labels=dict(labels))
        # The latest call ids, oldest first, with their verdicts once given (None until then).
        # A repeated call id is the same call reported again (a retried request, a replayed
        # log): the sidecar answers it with the earlier verdict and counts nothing twice, and
        # so does the fallback. As on the sidecar, the oldest id goes when the window is full.
        self._recent: dict[str, Optional[pb.Verdict]] = {}

    def observe(self, o: pb.Outcome) -> Counted:
        """Counts an outcome before it is judged; returns what the fallback policy reads for it.
        A repeated call id counts nothing. After an abort the outcome still counts as a step,
        its cost and its error, but no longer in the breakers' runs or the context, as on the
        sidecar."""
        with self._lock:
            if o.call_id in self._recent:
                return self._counted(0 if o.ok else self._consecutive.get(o.tool, 0))
            if o.call_id:
                if len(self._recent) >= IDEMPOTENCY_WINDOW:
                    del self._recent[next(iter(self._recent))]
                self._recent[o.call_id] = None
            self._summary.calls += 1
            # Two huge finite costs must not sum to infinity, as on the sidecar.
            self._summary.cost = min(self._summary.cost + o.cost, sys.float_info.max)
            if not o.ok:
                self._summary.errors += 1
            if self._summary.state == pb.SESSION_STATE_STOPPED:
                return self._counted(self._consecutive.get(o.tool, 0))
            idx = next((i for i, e in enumerate(self._unresolved) if e.tool == o.tool), None)
            if o.ok:
                self._consecutive.pop(o.tool, None)
                if idx is not None:
                    # A success of the same tool resolves its error, as on the sidecar.
                    del self._unresolved[idx]
                if self._last_error is not None and self._last_error[0] == o.tool:
                    self._last_error, self._identical = None, 0
                return self._counted(0)
            self._consecutive[o.tool] = self._consecutive.get(o.tool, 0) + 1
            last = (o.tool, normalise(judged_text(o.message, o.detail)))
            self._identical = self._identical + 1 if last == self._last_error else 1
            self._last_error = last
            error = _Error(o.tool, error_type(o), shown_message(o))
            if idx is not None:
                previous = self._unresolved.pop(idx)
                if previous.message == error.message:
                    error.count = previous.count + 1
            if len(self._unresolved) >= MAX_UNRESOLVED:
                del self._unresolved[0]
            self._unresolved.append(error)
            return self._counted(self._consecutive[o.tool])

    def _counted(self, consecutive: int) -> Counted:
        # Called with the lock held.
        s = self._summary
        return Counted(consecutive, SessionCounters(s.calls, s.cost, s.errors, self._identical, s.state))

    def recall(self, o: pb.Outcome) -> Optional[pb.Verdict]:
        """The earlier verdict for the outcome's call id, if it is still remembered, marked
        replayed, as the sidecar answers a repeated call id."""
        with self._lock:
            earlier = self._recent.get(o.call_id)
            if earlier is None:
                return None
            v = pb.Verdict()
            v.CopyFrom(earlier)
        v.call_id, v.session_id, v.replayed = o.call_id, o.session_id, True
        return v

    def record(self, o: pb.Outcome, v: pb.Verdict) -> None:
        """Counts what a verdict decided, once per call id."""
        with self._lock:
            if self._recent.get(o.call_id) is not None:
                return  # the verdict of a repeated call id, counted the first time
            if o.call_id in self._recent:
                kept = pb.Verdict()
                kept.CopyFrom(v)
                self._recent[o.call_id] = kept
            action = Action.of(v.action)
            if action is Action.RETRY:
                self._summary.retries += 1
            elif action is Action.ESCALATE:
                self._summary.escalations += 1
                if self._summary.state != pb.SESSION_STATE_STOPPED:  # a stopped session stays stopped
                    self._summary.state = pb.SESSION_STATE_ESCALATED
            elif action is Action.ABORT:
                self._summary.state = pb.SESSION_STATE_STOPPED
            if o.ok:
                return
            category = Category.of(v.classification.category)
            self._summary.errors_by_category[category.label] += 1
            if v.breaker.reason == pb.REASON_SESSION_STOPPED:
                return  # the outcome did not go into the context (see `observe`)
            for e in self._unresolved:
                if e.tool == o.tool:
                    e.category = category
                    e.suggestion = v.classification.suggestion

    def context(self) -> ErrorContext:
        """The error context built from the unresolved errors: the latest few as <error> blocks,
        the older ones counted in a summary line."""
        with self._lock:
            shown = self._unresolved[-CONTEXT_SHOWN:]
            hidden = len(self._unresolved) - len(shown)
            lines = []
            if hidden:
                lines.append(f"{hidden} earlier unresolved error(s) not shown.")
            for e in shown:
                lines.append(error_block(e.tool, e.category, message_line(e.kind, e.message), e.suggestion, e.count))
            return ErrorContext("\n".join(lines), len(shown), hidden, fallback=True)

    def state(self) -> pb.SessionState:
        """The session's state as the verdicts this client saw left it."""
        with self._lock:
            return self._summary.state

    def summary(self, now: float) -> pb.SessionSummary:
        """The locally kept session summary."""
        with self._lock:
            s = pb.SessionSummary()
            s.CopyFrom(self._summary)
            s.duration_ms = max(round((now - self._started) * 1000), 0)
            return s
