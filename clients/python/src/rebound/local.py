"""What a session remembers on the client side, always, so that the fallback policy carries on
where the sidecar left off: failures in a row per tool, unresolved errors for the context, and
the summary counters."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from rebound.fallback import error_block, error_type, message_line, shown_message
from rebound.v1 import rebound_pb2 as pb
from rebound.verdict import Action, Category, ErrorContext

MAX_UNRESOLVED = 64
"""Bounds the local error list; the sidecar keeps the full history."""
CONTEXT_SHOWN = 3
"""How many errors the local context shows as blocks, as the sidecar's default."""


@dataclass
class _Error:
    tool: str
    kind: str
    message: str
    count: int = 1
    category: Category = Category.UNSPECIFIED
    suggestion: str = ""


class LocalState:
    """One session's client-side memory; safe for concurrent use."""

    def __init__(self, now: float) -> None:
        self._lock = threading.Lock()
        self._started = now
        self._consecutive: dict[str, int] = {}
        # The latest error of each tool whose last call failed, oldest first.
        self._unresolved: list[_Error] = []
        self._summary = pb.SessionSummary(state=pb.SESSION_STATE_ACTIVE)

    def observe(self, o: pb.Outcome) -> int:
        """Counts an outcome before it is judged; returns its tool's failures in a row, this one included."""
        with self._lock:
            self._summary.calls += 1
            self._summary.cost += o.cost
            idx = next((i for i, e in enumerate(self._unresolved) if e.tool == o.tool), None)
            if o.ok:
                self._consecutive.pop(o.tool, None)
                if idx is not None:
                    # A success of the same tool resolves its error, as on the sidecar.
                    del self._unresolved[idx]
                return 0
            self._summary.errors += 1
            self._consecutive[o.tool] = self._consecutive.get(o.tool, 0) + 1
            error = _Error(o.tool, error_type(o), shown_message(o))
            if idx is not None:
                previous = self._unresolved.pop(idx)
                if previous.message == error.message:
                    error.count = previous.count + 1
            if len(self._unresolved) >= MAX_UNRESOLVED:
                del self._unresolved[0]
            self._unresolved.append(error)
            return self._consecutive[o.tool]

    def record(self, o: pb.Outcome, v: pb.Verdict) -> None:
        """Counts what a verdict decided."""
        with self._lock:
            action = Action.of(v.action)
            if action is Action.RETRY:
                self._summary.retries += 1
            elif action is Action.ESCALATE:
                self._summary.escalations += 1
                self._summary.state = pb.SESSION_STATE_ESCALATED
            elif action is Action.ABORT:
                self._summary.state = pb.SESSION_STATE_STOPPED
            if o.ok:
                return
            category = Category.of(v.classification.category)
            self._summary.errors_by_category[category.label] += 1
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
