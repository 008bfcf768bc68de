"""The checks as langchain tools: typed arguments, and access policy enforced inside them."""

from __future__ import annotations

import json
from typing import Any

from langchain_core.messages import ToolMessage

from assist.checks import LocalOperator, WhyPendingArgs
from assist.prompting import DATA_CLOSE, DATA_OPEN
from assist.tools import make_tools
from bot.core.policy import AccessPolicy, Viewer
from tests.assist.fakes import backend

POLICY = AccessPolicy.model_validate(
    {
        "operators": {"users": ["UOPS"]},
        "tenants": [
            {"name": "vision", "namespaces": ["team-vision"], "users": ["UVIS"]},
            {"name": "other", "namespaces": ["team-other"], "users": ["UOTH"]},
        ],
    }
)


def viewer(user: str) -> Viewer:
    return POLICY.viewer(user=user, channel=None, groups_of=lambda u: [])


def run(tool_name: str, who: Any, **args: Any) -> dict[str, Any]:
    tools, _ = make_tools(caller=who, backend=backend())
    tool = next(t for t in tools if t.name == tool_name)
    out = tool.invoke(args)
    assert out.startswith(DATA_OPEN) and out.endswith(DATA_CLOSE)
    payload = out[len(DATA_OPEN) : -len(DATA_CLOSE)]
    return dict(json.loads(payload))


def test_tools_have_pydantic_schemas() -> None:
    tools, _ = make_tools(caller=LocalOperator(), backend=backend())
    assert [t.name for t in tools] == ["why_pending", "verify_node", "quota_status", "capacity"]
    assert tools[0].args_schema is WhyPendingArgs
    assert set(WhyPendingArgs.model_json_schema()["required"]) == {"namespace", "name"}


def test_tenant_gets_own_triage_without_operator_detail() -> None:
    mine = run("why_pending", viewer("UVIS"), namespace="team-vision", name="resnet-train-0")
    assert mine["failing_layer"] == "driver"
    assert all("detail" not in f for f in mine["findings"])
    ops = run("why_pending", viewer("UOPS"), namespace="team-vision", name="resnet-train-0")
    assert any(f.get("detail") for f in ops["findings"])  # operators do see it
    assert "nvidia-driver-daemonset-kjkrk" in json.dumps(ops)
    assert "nvidia-driver-daemonset-kjkrk" not in json.dumps(mine)


def test_foreign_namespace_answers_exactly_like_a_missing_pod() -> None:
    foreign = run("why_pending", viewer("UOTH"), namespace="team-vision", name="resnet-train-0")
    missing = run("why_pending", viewer("UOTH"), namespace="team-vision", name="no-such-pod")
    assert foreign["error"] == "not_found"
    assert foreign == {
        "error": "not_found",
        "message": "no pod or workload resnet-train-0 in namespace team-vision",
    }
    assert missing["error"] == "not_found"
    assert foreign["message"].replace("resnet-train-0", "X") == missing["message"].replace(
        "no-such-pod", "X"
    )
    # and the same for quota: a foreign namespace is not even read
    q1 = run("quota_status", viewer("UOTH"), namespace="team-vision")
    q2 = run("quota_status", viewer("UOTH"), namespace="no-such-ns")
    assert q1["error"] == q2["error"] == "not_found"


def test_verify_node_is_operator_only() -> None:
    assert run("verify_node", viewer("UVIS"), node="gpu-a100-01")["error"] == "operator_only"
    ok = run("verify_node", viewer("UOPS"), node="gpu-a100-01")
    assert ok["node"] == "gpu-a100-01" and ok["failing_layer"] == "driver"
    assert run("verify_node", viewer("UOPS"), node="nope-9")["error"] == "not_found"


def test_capacity_hides_node_names_from_tenants() -> None:
    tenant = run("capacity", viewer("UVIS"), product="A100")
    assert tenant["products"] and all("node_names" not in p for p in tenant["products"])
    assert all("A100" in p["product"] for p in tenant["products"])
    ops = run("capacity", viewer("UOPS"))
    assert any("gpu-a100-01" in p.get("node_names", []) for p in ops["products"])
    assert all(p["free"] <= p["allocatable"] for p in ops["products"])


def test_quota_status_reads_resourcequotas() -> None:
    from tests.assist.fakes import fixture_source

    source = fixture_source("resourcequota-exceeded.yaml")
    quotas = source.objects("ResourceQuota")
    ns = quotas[0]["metadata"]["namespace"]
    tools, _ = make_tools(caller=LocalOperator(), backend=backend(source))
    out = next(t for t in tools if t.name == "quota_status").invoke({"namespace": ns})
    data = json.loads(out[len(DATA_OPEN) : -len(DATA_CLOSE)])
    assert data["quotas"][0]["exhausted"] == ["requests.nvidia.com/gpu"]


def test_bad_arguments_are_reported_to_the_model_not_raised() -> None:
    tools, _ = make_tools(caller=LocalOperator(), backend=backend())
    why = tools[0]
    msg = why.invoke(
        {"name": "why_pending", "args": {"namespace": "x"}, "id": "1", "type": "tool_call"}
    )
    assert isinstance(msg, ToolMessage)  # missing `name`: a message, not an exception
    bad = run("why_pending", LocalOperator(), namespace="Bad_NS", name="p")
    assert bad["error"] == "invalid_name"
