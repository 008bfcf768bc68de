"""The checks as langchain-core tools, so a chat model can call them in a tool-calling loop.

Built per caller by `make_tools`: the access policy lives in `assist.checks`, inside the
function the tool runs, never in a prompt a model could be talked out of. Each tool returns
compact JSON text wrapped as cluster data (see `assist.prompting.as_data`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel

from assist.checks import (
    Backend,
    Caller,
    CapacityArgs,
    Checks,
    QuotaStatusArgs,
    Result,
    VerifyNodeArgs,
    WhyPendingArgs,
)
from assist.prompting import as_data

TOOL_DESCRIPTIONS = {
    "why_pending": "Run the GPU triage engine for one pod or workload and return its verdict: "
    "the failing layer (driver, device-plugin, scheduling, quota, or null), evidence, owner "
    "and next steps. The verdict is authoritative.",
    "verify_node": "Run the post-install verification template on one GPU node "
    "(labels, GPU capacity, operator pods). Operators only.",
    "quota_status": "Show the GPU ResourceQuotas and Kueue LocalQueues of one namespace.",
    "capacity": "GPUs per product across GPU nodes: capacity, allocatable, requested, free.",
}


def tool_output(result: Result) -> str:
    """What the model sees from a tool: compact JSON inside the cluster-data delimiters."""
    return as_data(json.dumps(result, separators=(",", ":"), ensure_ascii=False))


def _tool(name: str, schema: type[BaseModel], run: Callable[[Any], Result]) -> StructuredTool:
    def call(**kwargs: Any) -> str:
        return tool_output(run(schema(**kwargs)))

    return StructuredTool.from_function(
        func=call,
        name=name,
        description=TOOL_DESCRIPTIONS[name],
        args_schema=schema,
        # A bad argument from the model becomes a message it can correct, not an exception.
        handle_validation_error=True,
    )


def make_tools(
    *, caller: Caller, backend: Backend, cluster: str | None = None
) -> tuple[list[BaseTool], Checks]:
    """The four tools for `caller` in `cluster`, and the `Checks` behind them (it keeps the
    reports made)."""
    checks = Checks(caller=caller, backend=backend, cluster=cluster)
    tools: list[BaseTool] = [
        _tool("why_pending", WhyPendingArgs, checks.why_pending),
        _tool("verify_node", VerifyNodeArgs, checks.verify_node),
        _tool("quota_status", QuotaStatusArgs, checks.quota_status),
        _tool("capacity", CapacityArgs, checks.capacity),
    ]
    return tools, checks
