"""The shared vectors (tests/vectors/*.json): each case's outcome, reported to the real
sidecar in a fresh session, gets the expected action, category, retryability and delay. Each
pass (hand-built outcome, keyword fields, streamed, asyncio) gives its tools a suffix of its
own, since tool breakers and retry budgets are shared by all sessions of a sidecar."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format

import rebound
from rebound import FallbackPolicy, Kind, Verdict
from rebound.v1 import rebound_pb2 as pb
from tests.conftest import LIVE_TIMEOUT, unique
from tests.sidecar import REPO, Sidecar

VECTORS = sorted((REPO / "tests" / "vectors").glob("*.json"))
MODES = ("outcome", "fields", "stream", "async")
# One suffix per pass, fixed for the run.
SUFFIX = {mode: unique(mode) for mode in MODES}


def load() -> list[Any]:
    """Every case of every vector file, as pytest parameters."""
    cases = []
    for path in VECTORS:
        for case in json.loads(path.read_text(encoding="utf-8")):
            cases.append(pytest.param(case, id=f"{path.stem}:{case['name']}"))
    return cases


def test_the_vectors_are_there() -> None:
    assert VECTORS, f"no vector files under {REPO / 'tests' / 'vectors'}"
    assert len(load()) >= 20


def outcome_of(case: dict[str, Any], mode: str) -> pb.Outcome:
    """The case's outcome as the proto message; enums are lowercase without prefix in the vectors."""
    fields = dict(case["outcome"])
    fields["tool"] = f"{fields['tool']}-{SUFFIX[mode]}"
    if "kind" in fields:
        fields["kind"] = "OUTCOME_KIND_" + fields["kind"].upper()
    return json_format.ParseDict(fields, pb.Outcome())


def report_fields(session: rebound.Session, o: pb.Outcome) -> Verdict:
    """The same outcome through `Session.report`'s keyword fields."""
    if o.ok:
        return session.report(o.tool)
    return session.report(
        o.tool,
        kind=Kind(o.kind) if o.kind else None,
        message=o.message,
        exception_type=o.exception_type or None,
        http_status=o.http_status or None,
        headers=dict(o.headers) or None,
        code=o.code or None,
        exit_code=o.exit_code if o.HasField("exit_code") else None,
    )


async def report_async(address: str, session_id: str, o: pb.Outcome) -> Verdict:
    """The outcome through a fresh AsyncClient."""
    async with rebound.AsyncClient(address, timeout=LIVE_TIMEOUT) as client:
        session = client.session(session_id)
        return await session.report_outcome(o)


@pytest.mark.parametrize("case", load())
def test_vector_through_the_fallback(case: dict[str, Any]) -> None:
    """The case through the local fallback alone: its `fallback` expectation where the case has one
    (the fallback reads fewer signals than the sidecar), else the sidecar's. Both ends of the jitter."""
    fields = dict(case["outcome"])
    if "kind" in fields:
        fields["kind"] = "OUTCOME_KIND_" + fields["kind"].upper()
    o = json_format.ParseDict(fields, pb.Outcome())
    expect = case.get("fallback", case["expect"])
    for random in (0.0, 0.999999):
        v = Verdict(FallbackPolicy().decide(o, 0 if o.ok else 1, now=1_700_000_000.0, random=random), fallback=True)
        assert (v.action.label, v.category.label, v.retryable) == (
            expect["action"],
            expect["category"],
            expect["retryable"],
        ), f"rule {v.rule}; source: {case.get('source', '')}"
        assert expect.get("delay_ms_min", 0) <= v.delay_ms <= expect.get("delay_ms_max", 0), f"rule {v.rule}"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", load())
def test_vector(case: dict[str, Any], mode: str, sidecar: Sidecar, client: rebound.Client) -> None:
    session_id = unique(f"py-vector-{case['name']}-{mode}")
    o = outcome_of(case, mode)
    if mode == "outcome":
        v = client.session(session_id).report_outcome(o)
    elif mode == "fields":
        v = report_fields(client.session(session_id), o)
    elif mode == "stream":
        with client.session(session_id).reporter() as reporter:
            v = reporter.send_outcome(o).result()
    else:
        v = asyncio.run(report_async(sidecar.grpc, session_id, o))

    expect = case["expect"]
    source = case.get("source", "")
    assert not v.fallback, f"the local fallback answered, not the sidecar ({source})"
    assert (v.action.label, v.category.label, v.retryable) == (
        expect["action"],
        expect["category"],
        expect["retryable"],
    ), f"rule {v.rule}; source: {source}"
    if "delay_ms_min" in expect:
        assert v.delay_ms >= expect["delay_ms_min"], f"rule {v.rule}"
    if "delay_ms_max" in expect:
        assert v.delay_ms <= expect["delay_ms_max"], f"rule {v.rule}"
