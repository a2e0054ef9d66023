"""The verdict a session gets for each outcome, and the enums it speaks in."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Optional, TypeVar, cast

from rebound.v1 import rebound_pb2 as pb

__all__ = ["Action", "Category", "Kind", "Reason", "Verdict", "ErrorContext"]

E = TypeVar("E", bound="_WireEnum")


class _WireEnum(enum.IntEnum):
    """What the enums of the proto share: reading a wire value, and a lowercase label."""

    @classmethod
    def of(cls: type[E], value: int) -> E:
        """The member for a wire value; one newer than this client reads as `_newer()`."""
        try:
            return cls(value)
        except ValueError:
            return cls._newer()

    @classmethod
    def _newer(cls: type[E]) -> E:
        """What a wire value newer than this client reads as: UNSPECIFIED, 0 in every proto enum."""
        return cls(0)

    @property
    def label(self) -> str:
        """The lowercase name the shared vectors, logs and metrics use ("rate_limited")."""
        return self.name.lower()


class Action(_WireEnum):
    """What the agent should do next; the values are the proto's `Action`."""

    UNSPECIFIED = pb.ACTION_UNSPECIFIED
    CONTINUE = pb.ACTION_CONTINUE
    RETRY = pb.ACTION_RETRY
    RECOVER = pb.ACTION_RECOVER
    REPLAN = pb.ACTION_REPLAN
    RECLASSIFY = pb.ACTION_RECLASSIFY
    ESCALATE = pb.ACTION_ESCALATE
    ABORT = pb.ACTION_ABORT

    @property
    def proto(self) -> pb.Action:
        """The value as the generated code types it."""
        return cast(pb.Action, int(self))


class Category(_WireEnum):
    """The kind of failure; the values are the proto's `Category`."""

    UNSPECIFIED = pb.CATEGORY_UNSPECIFIED
    TIMEOUT = pb.CATEGORY_TIMEOUT
    RATE_LIMITED = pb.CATEGORY_RATE_LIMITED
    NETWORK = pb.CATEGORY_NETWORK
    UNAVAILABLE = pb.CATEGORY_UNAVAILABLE
    INTERNAL = pb.CATEGORY_INTERNAL
    AUTH = pb.CATEGORY_AUTH
    PERMISSION_DENIED = pb.CATEGORY_PERMISSION_DENIED
    QUOTA_EXCEEDED = pb.CATEGORY_QUOTA_EXCEEDED
    NOT_FOUND = pb.CATEGORY_NOT_FOUND
    VALIDATION = pb.CATEGORY_VALIDATION
    CONFLICT = pb.CATEGORY_CONFLICT
    FORMAT = pb.CATEGORY_FORMAT
    UNKNOWN_TOOL = pb.CATEGORY_UNKNOWN_TOOL
    CONTEXT_LENGTH = pb.CATEGORY_CONTEXT_LENGTH
    CONTENT_FILTER = pb.CATEGORY_CONTENT_FILTER
    CANCELLED = pb.CATEGORY_CANCELLED
    UNKNOWN = pb.CATEGORY_UNKNOWN

    @classmethod
    def _newer(cls) -> Category:
        """A category newer than this client is a failure all the same: UNKNOWN."""
        return cls.UNKNOWN

    @property
    def proto(self) -> pb.Category:
        """The value as the generated code types it."""
        return cast(pb.Category, int(self))


class Kind(_WireEnum):
    """What kind of outcome a failure was, as the agent saw it; the proto's `OutcomeKind`."""

    UNSPECIFIED = pb.OUTCOME_KIND_UNSPECIFIED
    TOOL_ERROR = pb.OUTCOME_KIND_TOOL_ERROR
    NO_TOOL_CALL = pb.OUTCOME_KIND_NO_TOOL_CALL
    INVALID_TOOL_CALL = pb.OUTCOME_KIND_INVALID_TOOL_CALL
    UNKNOWN_TOOL = pb.OUTCOME_KIND_UNKNOWN_TOOL
    TIMEOUT = pb.OUTCOME_KIND_TIMEOUT
    CANCELLED = pb.OUTCOME_KIND_CANCELLED
    PROVIDER_ERROR = pb.OUTCOME_KIND_PROVIDER_ERROR

    @property
    def proto(self) -> pb.OutcomeKind:
        """The value as the generated code types it."""
        return cast(pb.OutcomeKind, int(self))


class Reason(_WireEnum):
    """Why a policy, a breaker or a limit decided the action; the values are the proto's `Reason`."""

    UNSPECIFIED = pb.REASON_UNSPECIFIED
    CATEGORY_POLICY = pb.REASON_CATEGORY_POLICY
    RETRIES_EXHAUSTED = pb.REASON_RETRIES_EXHAUSTED
    CONSECUTIVE_FAILURES = pb.REASON_CONSECUTIVE_FAILURES
    SESSION_ERRORS = pb.REASON_SESSION_ERRORS
    IDENTICAL_ERRORS = pb.REASON_IDENTICAL_ERRORS
    STEP_LIMIT = pb.REASON_STEP_LIMIT
    COST_LIMIT = pb.REASON_COST_LIMIT
    SESSION_STOPPED = pb.REASON_SESSION_STOPPED
    TOOL_BREAKER_OPEN = pb.REASON_TOOL_BREAKER_OPEN
    RETRY_BUDGET_EXHAUSTED = pb.REASON_RETRY_BUDGET_EXHAUSTED
    DELAY_TOO_LONG = pb.REASON_DELAY_TOO_LONG
    SERVER_PUSHBACK = pb.REASON_SERVER_PUSHBACK

    @property
    def proto(self) -> pb.Reason:
        """The value as the generated code types it."""
        return cast(pb.Reason, int(self))


@dataclass(frozen=True)
class Verdict:
    """The answer to one outcome: the sidecar's, or the local fallback policy's."""

    proto: pb.Verdict
    """The full protobuf verdict, for the fields this class does not surface."""
    fallback: bool = False
    """True when the local fallback policy decided because the sidecar did not answer in time."""

    @property
    def action(self) -> Action:
        """What to do next; an action newer than this client reads as UNSPECIFIED (treated as recover)."""
        return Action.of(self.proto.action)

    @property
    def category(self) -> Category:
        """The kind of failure (UNSPECIFIED for a success)."""
        return Category.of(self.proto.classification.category)

    @property
    def retryable(self) -> bool:
        """Whether the same call may succeed if retried."""
        return self.proto.classification.retryable

    @property
    def rule(self) -> str:
        """The id of the rule that matched (fallback rules start with "fallback.")."""
        return self.proto.classification.rule

    @property
    def delay(self) -> float:
        """Seconds to wait before retrying (0.0 unless the action is retry)."""
        return self.proto.retry.delay_ms / 1000.0

    @property
    def delay_ms(self) -> int:
        """Milliseconds to wait before retrying (0 unless the action is retry)."""
        return self.proto.retry.delay_ms

    @property
    def snippet(self) -> str:
        """The compact error text for the LLM's next turn (empty on success)."""
        return self.proto.snippet

    @property
    def call_id(self) -> str:
        """The outcome's call id."""
        return self.proto.call_id

    @property
    def escalation(self) -> Optional[pb.EscalationReport]:
        """The report for a human, when the action is escalate."""
        return self.proto.escalation if self.proto.HasField("escalation") else None

    @property
    def breaker(self) -> pb.BreakerStatus:
        """The breakers' view after this outcome."""
        return self.proto.breaker

    @property
    def reason(self) -> Reason:
        """Why a policy, a breaker or a limit decided the action (UNSPECIFIED when none did)."""
        return Reason.of(self.proto.breaker.reason)

    def __str__(self) -> str:
        parts = [self.action.label]
        if self.category is not Category.UNSPECIFIED:
            parts.append(self.category.label)
        if self.action is Action.RETRY:
            parts.append(f"in {self.delay_ms} ms")
        if self.fallback:
            parts.append("[local fallback]")
        return " ".join(parts)


@dataclass(frozen=True)
class ErrorContext:
    """The compacted error context for the session's next LLM turn; str() gives the text."""

    text: str
    """The text to put into the prompt (empty when nothing is unresolved)."""
    errors_shown: int = 0
    """How many errors are shown as blocks."""
    errors_hidden: int = 0
    """How many unresolved errors are not shown as blocks: counted in a summary line, or left out
    with it when a token budget leaves room for the newest block alone."""
    tokens: int = 0
    """The text's length in tokens, when a token budget applies (0 otherwise)."""
    fallback: bool = False
    """True when the text was built locally because the sidecar did not answer."""

    def __str__(self) -> str:
        return self.text
