"""Statistics over incidents: counts per layer, open now, median time to acknowledge and to
resolve (from when it was opened, or reopened: the cause's latest return).

Medians are computed here rather than in SQL: SQLite has no percentile function, and one query
of four narrow columns stays cheap at the scale of an incident history.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from incidents.values import IncidentStatus, Stats
from triage.model import LAYER_ORDER, Layer


def per_layer(counts: dict[str | None, int]) -> dict[Layer, int]:
    """Every layer present, zero when it has no entry (None-layer entries are left out)."""
    return {layer: counts.get(layer.value, 0) for layer in LAYER_ORDER}


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def summarise(rows: Iterable[Sequence[Any]]) -> Stats:
    """Rows of (failing_layer, status, opened_at, resolved_at[, acknowledged_at,
    reopened_at]) → Stats."""
    total: dict[str | None, int] = {}
    open_: dict[str | None, int] = {}
    durations: dict[str | None, list[float]] = {}
    to_ack: dict[str | None, list[float]] = {}
    count = 0
    for layer, status, opened_at, resolved_at, *rest in rows:
        acknowledged_at, reopened_at = (*rest, None, None)[:2]
        since = reopened_at if isinstance(reopened_at, datetime) else opened_at
        count += 1
        total[layer] = total.get(layer, 0) + 1
        if isinstance(acknowledged_at, datetime) and acknowledged_at >= since:
            to_ack.setdefault(layer, []).append((acknowledged_at - since).total_seconds())
        if status != IncidentStatus.RESOLVED.value:
            open_[layer] = open_.get(layer, 0) + 1
        elif isinstance(resolved_at, datetime):
            durations.setdefault(layer, []).append((resolved_at - since).total_seconds())
    every = [d for ds in durations.values() for d in ds]
    open_now = sum(open_.values())
    return Stats(
        total=count,
        open_now=open_now,
        resolved=count - open_now,
        by_layer=per_layer(total),
        open_by_layer=per_layer(open_),
        median_time_to_resolve_seconds=statistics.median(every) if every else None,
        median_time_to_resolve_seconds_by_layer={
            layer: statistics.median(durations[layer.value]) if layer.value in durations else None
            for layer in LAYER_ORDER
        },
        median_time_to_acknowledge_seconds=_median([d for ds in to_ack.values() for d in ds]),
        median_time_to_acknowledge_seconds_by_layer={
            layer: _median(to_ack.get(layer.value, [])) for layer in LAYER_ORDER
        },
    )
