"""Rebound's Python client: report each tool outcome to the Rebound sidecar and act on its
verdict (retry after a delay, hand a snippet to the LLM, escalate, abort), failing open to a
local policy when the sidecar cannot be reached.

# Layout
- `client`: `Client` and `AsyncClient`, the connection, deadlines and fail-open bookkeeping.
- `session`: `Session` and `AsyncSession`: report, call, run, admit, context, end.
- `stream`: `Reporter` and `AsyncReporter`, streaming reports over Observe.
- `outcome`: `build_outcome`, an Outcome from a Python exception.
- `fallback`: `FallbackPolicy`, what the client decides when the sidecar does not answer.
- `local`: the session state the client keeps for the fallback.
- `fingerprint`: `normalise`, an error message as the sidecar folds it to tell identical errors.
- `redact`: secrets out of the text the fallback writes, with the sidecar's patterns.
- `verdict`: `Verdict`, `ErrorContext` and the `Action`, `Category`, `Kind` and `Reason` enums.
- `errors`: the exceptions `run` raises.
- `v1`: code generated from proto/rebound/v1/rebound.proto (`generate.sh`).
"""

import os as _os

# grpcio turned its fork handlers on by default (1.80 and later), and with them a child process
# forked while a channel is open can abort before it execs (grpc/grpc#43055): subprocess.run on
# Python 3.9, or with preexec_fn on newer ones, fails now and then with -SIGABRT. Agents run
# shell tools, so unless the user chose otherwise, this turns the handlers off, as gRPC's fork
# support notes advise for programs that exec right after fork. It has to happen before grpc is
# first imported; set GRPC_ENABLE_FORK_SUPPORT yourself if a child process must use gRPC.
_os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

from rebound.client import DEFAULT_ADDRESS, DEFAULT_MAX_ATTEMPTS, DEFAULT_TIMEOUT, AsyncClient, Client
from rebound.errors import AbortError, EscalationError, ReboundError, RecoverError, VerdictError
from rebound.fallback import FallbackPolicy
from rebound.outcome import build_outcome, exception_type_name
from rebound.session import AsyncCall, AsyncSession, Call, Session
from rebound.stream import AsyncPendingVerdict, AsyncReporter, PendingVerdict, Reporter
from rebound.verdict import Action, Category, ErrorContext, Kind, Reason, Verdict

__all__ = [
    "AbortError",
    "Action",
    "AsyncCall",
    "AsyncClient",
    "AsyncPendingVerdict",
    "AsyncReporter",
    "AsyncSession",
    "Call",
    "Category",
    "Client",
    "DEFAULT_ADDRESS",
    "DEFAULT_MAX_ATTEMPTS",
    "DEFAULT_TIMEOUT",
    "ErrorContext",
    "EscalationError",
    "FallbackPolicy",
    "Kind",
    "PendingVerdict",
    "Reason",
    "ReboundError",
    "RecoverError",
    "Reporter",
    "Session",
    "Verdict",
    "VerdictError",
    "build_outcome",
    "exception_type_name",
]

__version__ = "0.1.0"
