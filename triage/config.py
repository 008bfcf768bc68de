"""Engine settings that differ between clusters. The defaults find the GPU stack from the
cluster itself; set `operator_namespace` only to override what the engine finds."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class EngineConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    operator_namespace: str | None = Field(
        default=None,
        description="namespace the GPU Operator runs in; None finds it from the cluster",
    )
    node_join_grace_minutes: int = Field(
        default=15,
        ge=0,
        description="after a node becomes Ready, how long GPUs may take to register before it counts as broken",
    )
    max_evidence: int = Field(default=12, ge=1, description="evidence lines kept per finding")
