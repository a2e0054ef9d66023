"""The exceptions Rebound raises: the verdicts that stop `Session.run`, and bad input."""

from __future__ import annotations

from typing import Any, Optional

from rebound.redact import redact
from rebound.verdict import Action, Category, Reason, Verdict

__all__ = ["ReboundError", "VerdictError", "RecoverError", "EscalationError", "AbortError"]


class ReboundError(Exception):
    """Base class of the exceptions this package raises on its own account."""


class VerdictError(ReboundError):
    """A verdict that stops `Session.run`; `__cause__` is the tool's own exception, if any.
    A verdict can stop the run after a successful call too (a step or cost limit reached, the
    session stopped): `error` is then None and `result` holds what the tool returned. The
    message shows the tool's error with secrets redacted (`rebound.redact`); `error` is as raised."""

    def __init__(
        self,
        tool: str,
        verdict: Verdict,
        error: Optional[BaseException] = None,
        *,
        attempts: int = 1,
        result: Any = None,
    ) -> None:
        self.tool = tool
        """The tool whose outcome gave the verdict."""
        self.verdict = verdict
        """The full verdict."""
        self.error = error
        """The tool's exception (None when the call succeeded but a limit stopped the run)."""
        self.result = result
        """What the tool returned when the call succeeded and the verdict still stopped the run;
        None when it failed. A tool can return None too: `error is None` tells that the call
        succeeded, and `result` is then its value."""
        self.attempts = attempts
        """How many calls were made (more than one when verdicts said retry)."""
        super().__init__(self._describe())

    @property
    def action(self) -> Action:
        """The verdict's action."""
        return self.verdict.action

    @property
    def snippet(self) -> str:
        """The compact error text for the LLM's next turn."""
        return self.verdict.snippet

    def _describe(self) -> str:
        text = f"rebound: {self.verdict.action.label} after {self.tool!r}"
        if self.verdict.category is not Category.UNSPECIFIED:
            text += f" ({self.verdict.category.label})"
        if self.verdict.reason is not Reason.UNSPECIFIED:
            text += f" (reason {self.verdict.reason.label})"
        if self.verdict.fallback:
            text += " [local fallback]"
        if self.attempts > 1:
            text += f" after {self.attempts} attempts"
        if self.error is not None:
            # Agents log this text: no secret from the tool's error (an API key in a URL) in it.
            text += f": {type(self.error).__name__}: {redact(str(self.error))}"
        return text


class RecoverError(VerdictError):
    """The failure goes back to the LLM: recover (another approach), replan, or reclassify
    (another tool); or retry when `Client(max_attempts=...)` ran out. Put `snippet` into the
    LLM's next turn."""


class EscalationError(VerdictError):
    """Stop and ask a human; `report` is the escalation report as plain text."""

    @property
    def report(self) -> str:
        """The escalation report for a human (its text, else its summary)."""
        esc = self.verdict.escalation
        if esc is None:
            return self.snippet
        return esc.text or esc.summary


class AbortError(VerdictError):
    """End the run (cancelled, fatal, a limit reached, an identical-error loop)."""
