import json


def plan_steps(goal):
    return [{"tool": "search", "query": goal}, {"tool": "summarize"}]


def test_plan_has_three_steps():
    steps = plan_steps("find the rust sidecar docs")
    assert len(steps) == 3


def test_tool_call_is_json():
    text = '{"tool": "search", "query": "x",}'
    assert json.loads(text)["tool"] == "search"


def test_summary_mentions_goal():
    summary = "Found 3 pages about tokio"
    assert "sidecar" in summary
