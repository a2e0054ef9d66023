"""What a session remembers on the client side, always, so that the fallback policy carries on
where the sidecar left off: failures in a row per tool, unresolved errors for the context, and
the summary counters."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Optional

from rebound.fallback import error_block, error_type, message_line, shown_message
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


class LocalState:
    """One session's client-side memory; safe for concurrent use."""

    def __init__(self, now: float) -> None:
        self._lock = threading.Lock()
        self._started = now
        self._consecutive: dict[str, int] = {}
        # The latest error of each tool whose last call failed, oldest first.
        self._unresolved: list[_Error] = []
        self._summary = pb.SessionSummary(state=pb.SESSION_STATE_ACTIVE)
        # The latest call ids, oldest first, with their verdicts once given (None until then).
        # A repeated call id is the same call reported again (a retried request, a replayed
        # log): the sidecar answers it with the earlier verdict and counts nothing twice, and
        # so does the fallback. As on the sidecar, the oldest id goes when the window is full.
        self._recent: dict[str, Optional[pb.Verdict]] = {}

    def observe(self, o: pb.Outcome) -> int:
        """Counts an outcome before it is judged; returns its tool's failures in a row, this one
        included. A repeated call id counts nothing."""
        with self._lock:
            if o.call_id in self._recent:
                return 0 if o.ok else self._consecutive.get(o.tool, 0)
            if o.call_id:
                if len(self._recent) >= IDEMPOTENCY_WINDOW:
                    del self._recent[next(iter(self._recent))]
                self._recent[o.call_id] = None
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
