"""The fallback's normaliser against the sidecar's: every line of the shared file
(tests/data/fingerprints/normalised.jsonl, a message and the text src/fingerprint.rs's
`normalise` makes of it) must come out the same here, or the fallback would count identical
errors differently from the sidecar."""

from __future__ import annotations

import json
from typing import Any

import pytest

from rebound.fingerprint import normalise
from tests.sidecar import REPO

SHARED = REPO / "tests" / "data" / "fingerprints" / "normalised.jsonl"
CASES = [json.loads(line) for line in SHARED.read_text(encoding="utf-8").splitlines()]


def test_the_shared_file_is_there() -> None:
    assert len(CASES) == 714, f"{SHARED} changed"


@pytest.mark.parametrize("case", [pytest.param(c, id=str(i)) for i, c in enumerate(CASES)])
def test_normalise_is_the_sidecars(case: dict[str, Any]) -> None:
    assert normalise(case["message"]) == case["normalised"]
