"""How long a watch waits before it reconnects: exponential, capped, and jittered.

A bot keeps about thirty watches per cluster, and several replicas keep the same ones. When
the API server goes away (an upgrade, a control-plane outage, a network partition), every
watch fails within the same second. With plain doubling they would all come back at the same
instants (0.5 s, 1 s, 2 s ... 30 s after the failure), each time as one burst of lists and
watches, on a server that is just coming back: the thundering herd client-go avoids with
jitter. Here each wait is drawn from the upper half of its doubling step ("equal jitter":
never less than half the step, so the backoff still backs off), from a generator of its own
per informer, so two watches never share a sequence. Watch timeouts are spread the same way
(`watch_timeout`, as client-go draws between its minimum and twice that), so watches that
opened together do not all end together every minute.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass
class Backoff:
    """Waits before reconnecting: the step doubles from `first` up to `cap`; each wait is
    uniform in [step/2, step]. `reset()` after a success."""

    first: float = 0.5
    cap: float = 30.0
    rng: random.Random = field(default_factory=random.Random)
    step: float = field(init=False)
    waits: list[float] = field(default_factory=list, repr=False)  # the last few, for tests

    def __post_init__(self) -> None:
        self.step = min(self.first, self.cap)

    def next(self) -> float:
        wait = self.rng.uniform(self.step / 2, self.step)
        self.step = min(self.step * 2, self.cap)
        self.waits = [*self.waits[-15:], wait]
        return wait

    def reset(self) -> None:
        self.step = min(self.first, self.cap)


def watch_timeout(base: float, rng: random.Random) -> float:
    """Seconds a watch asks the server to keep it open: between `base` and twice that."""
    return base * rng.uniform(1.0, 2.0)
