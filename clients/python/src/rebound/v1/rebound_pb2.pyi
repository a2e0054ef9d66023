from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class OutcomeKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OUTCOME_KIND_UNSPECIFIED: _ClassVar[OutcomeKind]
    OUTCOME_KIND_TOOL_ERROR: _ClassVar[OutcomeKind]
    OUTCOME_KIND_NO_TOOL_CALL: _ClassVar[OutcomeKind]
    OUTCOME_KIND_INVALID_TOOL_CALL: _ClassVar[OutcomeKind]
    OUTCOME_KIND_UNKNOWN_TOOL: _ClassVar[OutcomeKind]
    OUTCOME_KIND_TIMEOUT: _ClassVar[OutcomeKind]
    OUTCOME_KIND_CANCELLED: _ClassVar[OutcomeKind]
    OUTCOME_KIND_PROVIDER_ERROR: _ClassVar[OutcomeKind]

class Action(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ACTION_UNSPECIFIED: _ClassVar[Action]
    ACTION_CONTINUE: _ClassVar[Action]
    ACTION_RETRY: _ClassVar[Action]
    ACTION_RECOVER: _ClassVar[Action]
    ACTION_REPLAN: _ClassVar[Action]
    ACTION_RECLASSIFY: _ClassVar[Action]
    ACTION_ESCALATE: _ClassVar[Action]
    ACTION_ABORT: _ClassVar[Action]

class Category(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CATEGORY_UNSPECIFIED: _ClassVar[Category]
    CATEGORY_TIMEOUT: _ClassVar[Category]
    CATEGORY_RATE_LIMITED: _ClassVar[Category]
    CATEGORY_NETWORK: _ClassVar[Category]
    CATEGORY_UNAVAILABLE: _ClassVar[Category]
    CATEGORY_INTERNAL: _ClassVar[Category]
    CATEGORY_AUTH: _ClassVar[Category]
    CATEGORY_PERMISSION_DENIED: _ClassVar[Category]
    CATEGORY_QUOTA_EXCEEDED: _ClassVar[Category]
    CATEGORY_NOT_FOUND: _ClassVar[Category]
    CATEGORY_VALIDATION: _ClassVar[Category]
    CATEGORY_CONFLICT: _ClassVar[Category]
    CATEGORY_FORMAT: _ClassVar[Category]
    CATEGORY_UNKNOWN_TOOL: _ClassVar[Category]
    CATEGORY_CONTEXT_LENGTH: _ClassVar[Category]
    CATEGORY_CONTENT_FILTER: _ClassVar[Category]
    CATEGORY_CANCELLED: _ClassVar[Category]
    CATEGORY_UNKNOWN: _ClassVar[Category]

class BreakerState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    BREAKER_STATE_UNSPECIFIED: _ClassVar[BreakerState]
    BREAKER_STATE_CLOSED: _ClassVar[BreakerState]
    BREAKER_STATE_OPEN: _ClassVar[BreakerState]
    BREAKER_STATE_HALF_OPEN: _ClassVar[BreakerState]

class SessionState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SESSION_STATE_UNSPECIFIED: _ClassVar[SessionState]
    SESSION_STATE_ACTIVE: _ClassVar[SessionState]
    SESSION_STATE_ESCALATED: _ClassVar[SessionState]
    SESSION_STATE_STOPPED: _ClassVar[SessionState]

class Reason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    REASON_UNSPECIFIED: _ClassVar[Reason]
    REASON_CATEGORY_POLICY: _ClassVar[Reason]
    REASON_RETRIES_EXHAUSTED: _ClassVar[Reason]
    REASON_CONSECUTIVE_FAILURES: _ClassVar[Reason]
    REASON_SESSION_ERRORS: _ClassVar[Reason]
    REASON_IDENTICAL_ERRORS: _ClassVar[Reason]
    REASON_STEP_LIMIT: _ClassVar[Reason]
    REASON_COST_LIMIT: _ClassVar[Reason]
    REASON_SESSION_STOPPED: _ClassVar[Reason]
    REASON_TOOL_BREAKER_OPEN: _ClassVar[Reason]
    REASON_RETRY_BUDGET_EXHAUSTED: _ClassVar[Reason]
    REASON_DELAY_TOO_LONG: _ClassVar[Reason]
    REASON_SERVER_PUSHBACK: _ClassVar[Reason]
OUTCOME_KIND_UNSPECIFIED: OutcomeKind
OUTCOME_KIND_TOOL_ERROR: OutcomeKind
OUTCOME_KIND_NO_TOOL_CALL: OutcomeKind
OUTCOME_KIND_INVALID_TOOL_CALL: OutcomeKind
OUTCOME_KIND_UNKNOWN_TOOL: OutcomeKind
OUTCOME_KIND_TIMEOUT: OutcomeKind
OUTCOME_KIND_CANCELLED: OutcomeKind
OUTCOME_KIND_PROVIDER_ERROR: OutcomeKind
ACTION_UNSPECIFIED: Action
ACTION_CONTINUE: Action
ACTION_RETRY: Action
ACTION_RECOVER: Action
ACTION_REPLAN: Action
ACTION_RECLASSIFY: Action
ACTION_ESCALATE: Action
ACTION_ABORT: Action
CATEGORY_UNSPECIFIED: Category
CATEGORY_TIMEOUT: Category
CATEGORY_RATE_LIMITED: Category
CATEGORY_NETWORK: Category
CATEGORY_UNAVAILABLE: Category
CATEGORY_INTERNAL: Category
CATEGORY_AUTH: Category
CATEGORY_PERMISSION_DENIED: Category
CATEGORY_QUOTA_EXCEEDED: Category
CATEGORY_NOT_FOUND: Category
CATEGORY_VALIDATION: Category
CATEGORY_CONFLICT: Category
CATEGORY_FORMAT: Category
CATEGORY_UNKNOWN_TOOL: Category
CATEGORY_CONTEXT_LENGTH: Category
CATEGORY_CONTENT_FILTER: Category
CATEGORY_CANCELLED: Category
CATEGORY_UNKNOWN: Category
BREAKER_STATE_UNSPECIFIED: BreakerState
BREAKER_STATE_CLOSED: BreakerState
BREAKER_STATE_OPEN: BreakerState
BREAKER_STATE_HALF_OPEN: BreakerState
SESSION_STATE_UNSPECIFIED: SessionState
SESSION_STATE_ACTIVE: SessionState
SESSION_STATE_ESCALATED: SessionState
SESSION_STATE_STOPPED: SessionState
REASON_UNSPECIFIED: Reason
REASON_CATEGORY_POLICY: Reason
REASON_RETRIES_EXHAUSTED: Reason
REASON_CONSECUTIVE_FAILURES: Reason
REASON_SESSION_ERRORS: Reason
REASON_IDENTICAL_ERRORS: Reason
REASON_STEP_LIMIT: Reason
REASON_COST_LIMIT: Reason
REASON_SESSION_STOPPED: Reason
REASON_TOOL_BREAKER_OPEN: Reason
REASON_RETRY_BUDGET_EXHAUSTED: Reason
REASON_DELAY_TOO_LONG: Reason
REASON_SERVER_PUSHBACK: Reason

class Outcome(_message.Message):
    __slots__ = ("session_id", "call_id", "tool", "ok", "kind", "message", "exception_type", "http_status", "grpc_code", "exit_code", "code", "headers", "detail", "attempt", "duration_ms", "cost")
    class HeadersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    OK_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    EXCEPTION_TYPE_FIELD_NUMBER: _ClassVar[int]
    HTTP_STATUS_FIELD_NUMBER: _ClassVar[int]
    GRPC_CODE_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    HEADERS_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    COST_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    call_id: str
    tool: str
    ok: bool
    kind: OutcomeKind
    message: str
    exception_type: str
    http_status: int
    grpc_code: int
    exit_code: int
    code: str
    headers: _containers.ScalarMap[str, str]
    detail: str
    attempt: int
    duration_ms: int
    cost: float
    def __init__(self, session_id: _Optional[str] = ..., call_id: _Optional[str] = ..., tool: _Optional[str] = ..., ok: bool = ..., kind: _Optional[_Union[OutcomeKind, str]] = ..., message: _Optional[str] = ..., exception_type: _Optional[str] = ..., http_status: _Optional[int] = ..., grpc_code: _Optional[int] = ..., exit_code: _Optional[int] = ..., code: _Optional[str] = ..., headers: _Optional[_Mapping[str, str]] = ..., detail: _Optional[str] = ..., attempt: _Optional[int] = ..., duration_ms: _Optional[int] = ..., cost: _Optional[float] = ...) -> None: ...

class Classification(_message.Message):
    __slots__ = ("category", "retryable", "rule", "suggestion")
    CATEGORY_FIELD_NUMBER: _ClassVar[int]
    RETRYABLE_FIELD_NUMBER: _ClassVar[int]
    RULE_FIELD_NUMBER: _ClassVar[int]
    SUGGESTION_FIELD_NUMBER: _ClassVar[int]
    category: Category
    retryable: bool
    rule: str
    suggestion: str
    def __init__(self, category: _Optional[_Union[Category, str]] = ..., retryable: bool = ..., rule: _Optional[str] = ..., suggestion: _Optional[str] = ...) -> None: ...

class RetryPlan(_message.Message):
    __slots__ = ("delay_ms", "attempt", "attempts_left", "provider_delay")
    DELAY_MS_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_LEFT_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_DELAY_FIELD_NUMBER: _ClassVar[int]
    delay_ms: int
    attempt: int
    attempts_left: int
    provider_delay: bool
    def __init__(self, delay_ms: _Optional[int] = ..., attempt: _Optional[int] = ..., attempts_left: _Optional[int] = ..., provider_delay: bool = ...) -> None: ...

class BreakerStatus(_message.Message):
    __slots__ = ("tool_state", "session_state", "reason", "consecutive_failures", "session_errors", "identical_errors", "steps", "cost")
    TOOL_STATE_FIELD_NUMBER: _ClassVar[int]
    SESSION_STATE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    CONSECUTIVE_FAILURES_FIELD_NUMBER: _ClassVar[int]
    SESSION_ERRORS_FIELD_NUMBER: _ClassVar[int]
    IDENTICAL_ERRORS_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    COST_FIELD_NUMBER: _ClassVar[int]
    tool_state: BreakerState
    session_state: SessionState
    reason: Reason
    consecutive_failures: int
    session_errors: int
    identical_errors: int
    steps: int
    cost: float
    def __init__(self, tool_state: _Optional[_Union[BreakerState, str]] = ..., session_state: _Optional[_Union[SessionState, str]] = ..., reason: _Optional[_Union[Reason, str]] = ..., consecutive_failures: _Optional[int] = ..., session_errors: _Optional[int] = ..., identical_errors: _Optional[int] = ..., steps: _Optional[int] = ..., cost: _Optional[float] = ...) -> None: ...

class ErrorRecord(_message.Message):
    __slots__ = ("tool", "category", "message", "count", "at_ms", "action")
    TOOL_FIELD_NUMBER: _ClassVar[int]
    CATEGORY_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    AT_MS_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    tool: str
    category: Category
    message: str
    count: int
    at_ms: int
    action: Action
    def __init__(self, tool: _Optional[str] = ..., category: _Optional[_Union[Category, str]] = ..., message: _Optional[str] = ..., count: _Optional[int] = ..., at_ms: _Optional[int] = ..., action: _Optional[_Union[Action, str]] = ...) -> None: ...

class EscalationReport(_message.Message):
    __slots__ = ("summary", "history", "errors_by_category", "retries", "session_duration_ms", "text", "labels")
    class ErrorsByCategoryEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    HISTORY_FIELD_NUMBER: _ClassVar[int]
    ERRORS_BY_CATEGORY_FIELD_NUMBER: _ClassVar[int]
    RETRIES_FIELD_NUMBER: _ClassVar[int]
    SESSION_DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    summary: str
    history: _containers.RepeatedCompositeFieldContainer[ErrorRecord]
    errors_by_category: _containers.ScalarMap[str, int]
    retries: int
    session_duration_ms: int
    text: str
    labels: _containers.ScalarMap[str, str]
    def __init__(self, summary: _Optional[str] = ..., history: _Optional[_Iterable[_Union[ErrorRecord, _Mapping]]] = ..., errors_by_category: _Optional[_Mapping[str, int]] = ..., retries: _Optional[int] = ..., session_duration_ms: _Optional[int] = ..., text: _Optional[str] = ..., labels: _Optional[_Mapping[str, str]] = ...) -> None: ...

class Verdict(_message.Message):
    __slots__ = ("call_id", "session_id", "action", "classification", "retry", "snippet", "breaker", "escalation", "enforced", "shadow_action", "replayed", "snippet_tokens", "shadow_reason")
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    CLASSIFICATION_FIELD_NUMBER: _ClassVar[int]
    RETRY_FIELD_NUMBER: _ClassVar[int]
    SNIPPET_FIELD_NUMBER: _ClassVar[int]
    BREAKER_FIELD_NUMBER: _ClassVar[int]
    ESCALATION_FIELD_NUMBER: _ClassVar[int]
    ENFORCED_FIELD_NUMBER: _ClassVar[int]
    SHADOW_ACTION_FIELD_NUMBER: _ClassVar[int]
    REPLAYED_FIELD_NUMBER: _ClassVar[int]
    SNIPPET_TOKENS_FIELD_NUMBER: _ClassVar[int]
    SHADOW_REASON_FIELD_NUMBER: _ClassVar[int]
    call_id: str
    session_id: str
    action: Action
    classification: Classification
    retry: RetryPlan
    snippet: str
    breaker: BreakerStatus
    escalation: EscalationReport
    enforced: bool
    shadow_action: Action
    replayed: bool
    snippet_tokens: int
    shadow_reason: Reason
    def __init__(self, call_id: _Optional[str] = ..., session_id: _Optional[str] = ..., action: _Optional[_Union[Action, str]] = ..., classification: _Optional[_Union[Classification, _Mapping]] = ..., retry: _Optional[_Union[RetryPlan, _Mapping]] = ..., snippet: _Optional[str] = ..., breaker: _Optional[_Union[BreakerStatus, _Mapping]] = ..., escalation: _Optional[_Union[EscalationReport, _Mapping]] = ..., enforced: bool = ..., shadow_action: _Optional[_Union[Action, str]] = ..., replayed: bool = ..., snippet_tokens: _Optional[int] = ..., shadow_reason: _Optional[_Union[Reason, str]] = ...) -> None: ...

class StartSessionRequest(_message.Message):
    __slots__ = ("session_id", "step_limit", "cost_limit", "error_limit", "tools", "profile", "labels")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    STEP_LIMIT_FIELD_NUMBER: _ClassVar[int]
    COST_LIMIT_FIELD_NUMBER: _ClassVar[int]
    ERROR_LIMIT_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    PROFILE_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    step_limit: int
    cost_limit: float
    error_limit: int
    tools: _containers.RepeatedScalarFieldContainer[str]
    profile: str
    labels: _containers.ScalarMap[str, str]
    def __init__(self, session_id: _Optional[str] = ..., step_limit: _Optional[int] = ..., cost_limit: _Optional[float] = ..., error_limit: _Optional[int] = ..., tools: _Optional[_Iterable[str]] = ..., profile: _Optional[str] = ..., labels: _Optional[_Mapping[str, str]] = ...) -> None: ...

class StartSessionResponse(_message.Message):
    __slots__ = ("session_id", "created", "step_limit", "cost_limit", "error_limit")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    STEP_LIMIT_FIELD_NUMBER: _ClassVar[int]
    COST_LIMIT_FIELD_NUMBER: _ClassVar[int]
    ERROR_LIMIT_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    created: bool
    step_limit: int
    cost_limit: float
    error_limit: int
    def __init__(self, session_id: _Optional[str] = ..., created: bool = ..., step_limit: _Optional[int] = ..., cost_limit: _Optional[float] = ..., error_limit: _Optional[int] = ...) -> None: ...

class AdmitRequest(_message.Message):
    __slots__ = ("session_id", "tool")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    tool: str
    def __init__(self, session_id: _Optional[str] = ..., tool: _Optional[str] = ...) -> None: ...

class AdmitResponse(_message.Message):
    __slots__ = ("allowed", "reason", "retry_after_ms", "tool_state", "session_state", "message")
    ALLOWED_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    RETRY_AFTER_MS_FIELD_NUMBER: _ClassVar[int]
    TOOL_STATE_FIELD_NUMBER: _ClassVar[int]
    SESSION_STATE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    allowed: bool
    reason: Reason
    retry_after_ms: int
    tool_state: BreakerState
    session_state: SessionState
    message: str
    def __init__(self, allowed: bool = ..., reason: _Optional[_Union[Reason, str]] = ..., retry_after_ms: _Optional[int] = ..., tool_state: _Optional[_Union[BreakerState, str]] = ..., session_state: _Optional[_Union[SessionState, str]] = ..., message: _Optional[str] = ...) -> None: ...

class ContextRequest(_message.Message):
    __slots__ = ("session_id", "max_tokens")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    max_tokens: int
    def __init__(self, session_id: _Optional[str] = ..., max_tokens: _Optional[int] = ...) -> None: ...

class ContextResponse(_message.Message):
    __slots__ = ("text", "errors_shown", "errors_hidden", "tokens")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    ERRORS_SHOWN_FIELD_NUMBER: _ClassVar[int]
    ERRORS_HIDDEN_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    text: str
    errors_shown: int
    errors_hidden: int
    tokens: int
    def __init__(self, text: _Optional[str] = ..., errors_shown: _Optional[int] = ..., errors_hidden: _Optional[int] = ..., tokens: _Optional[int] = ...) -> None: ...

class EndSessionRequest(_message.Message):
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class SessionSummary(_message.Message):
    __slots__ = ("calls", "errors", "errors_by_category", "retries", "escalations", "cost", "duration_ms", "state", "labels")
    class ErrorsByCategoryEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CALLS_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    ERRORS_BY_CATEGORY_FIELD_NUMBER: _ClassVar[int]
    RETRIES_FIELD_NUMBER: _ClassVar[int]
    ESCALATIONS_FIELD_NUMBER: _ClassVar[int]
    COST_FIELD_NUMBER: _ClassVar[int]
    DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    calls: int
    errors: int
    errors_by_category: _containers.ScalarMap[str, int]
    retries: int
    escalations: int
    cost: float
    duration_ms: int
    state: SessionState
    labels: _containers.ScalarMap[str, str]
    def __init__(self, calls: _Optional[int] = ..., errors: _Optional[int] = ..., errors_by_category: _Optional[_Mapping[str, int]] = ..., retries: _Optional[int] = ..., escalations: _Optional[int] = ..., cost: _Optional[float] = ..., duration_ms: _Optional[int] = ..., state: _Optional[_Union[SessionState, str]] = ..., labels: _Optional[_Mapping[str, str]] = ...) -> None: ...

class EndSessionResponse(_message.Message):
    __slots__ = ("session_id", "found", "summary")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    FOUND_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    found: bool
    summary: SessionSummary
    def __init__(self, session_id: _Optional[str] = ..., found: bool = ..., summary: _Optional[_Union[SessionSummary, _Mapping]] = ...) -> None: ...
