"""Input checks that mirror the sidecar's, so a bad value fails here with a clear message."""

from __future__ import annotations

import math
from typing import Any

MAX_ID_BYTES = 256
"""The sidecar's limit on session ids, tool names and call ids."""
MAX_TOOLS = 1000
"""The sidecar's limit on the tools a session declares."""
MAX_LABELS = 64
"""The sidecar's limit on a session's labels."""
MAX_LABEL_VALUE_BYTES = 1024
"""The sidecar's limit on one label value."""
UINT32_MAX = 2**32 - 1


def check_id(field: str, value: Any) -> str:
    """Returns `value` if it is a usable id or name; raises ValueError naming `field` otherwise."""
    if not isinstance(value, str):
        raise TypeError(f"{field} must be a str, not {type(value).__name__}")
    if not value.strip():
        raise ValueError(f"{field} must not be empty")
    if len(value.encode("utf-8", "surrogatepass")) > MAX_ID_BYTES:
        raise ValueError(f"{field} {value[:40]!r}...: at most {MAX_ID_BYTES} bytes")
    if any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in value):
        raise ValueError(f"{field} {value!r}: must not contain control characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{field} {value!r}: must be valid UTF-8 (no lone surrogates)") from None
    return value


def check_uint32(field: str, value: Any) -> int:
    """Returns `value` if it is an int from 0 to 2**32-1; raises ValueError naming `field` otherwise."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{field} must be an int, not {type(value).__name__}")
    if not 0 <= value <= UINT32_MAX:
        raise ValueError(f"{field} = {value}: must be 0 to {UINT32_MAX}")
    return int(value)


def check_amount(field: str, value: Any) -> float:
    """Returns `value` as a float if it is finite and not negative (a cost, a limit, seconds)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{field} must be a number, not {type(value).__name__}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{field} = {value}: must be a finite number, zero or more")
    return float(value)
