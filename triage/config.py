"""Engine settings that differ between clusters. Everything has a default that fits a stock
GPU Operator install."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class EngineConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    operator_namespace: str = Field(
        default="gpu-operator", description="namespace the GPU Operator's pods run in"
    )
    dra_driver_namespace: str = Field(
        default="nvidia-dra-driver-gpu", description="namespace of the NVIDIA DRA driver's pods"
    )
    node_join_grace_minutes: int = Field(
        default=15,
        ge=0,
        description="after a node becomes Ready, how long GPUs may take to register before it counts as broken",
    )
    max_evidence: int = Field(default=12, ge=1, description="evidence lines kept per finding")
