"""The bot's watch mode: sweep every watched cluster every interval, keep the fleet gauges
current, and let the alerter post, update and resolve group alerts. Runs on its own thread;
a failing sweep (a cluster unreachable, the database down) is logged and retried next interval,
and one cluster's failure never holds up another's sweep. Never a crash of the bot."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from bot.core.alerts import Alerter, CycleResult
from gpu_triage.metrics import Metrics
from gpu_triage.service import TriageService

log = logging.getLogger(__name__)


class AlertLoop:
    def __init__(
        self,
        *,
        service: TriageService,
        alerter: Alerter,
        metrics: Metrics | None,
        interval: float,
        clusters: Callable[[], list[str | None]] = lambda: [None],
    ) -> None:
        self.service, self.alerter, self.metrics, self.interval = (
            service,
            alerter,
            metrics,
            interval,
        )
        self.clusters = clusters  # the watched ones (None: the default cluster)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gpu-triage-alerts", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def once(self) -> CycleResult | None:
        """One sweep and alert cycle over every watched cluster; None when every one failed
        (each reason is logged)."""
        total, ran = CycleResult(), False
        for cluster in self.clusters():
            result = self._cycle(cluster)
            if result is None:
                continue
            ran = True
            total.posted += result.posted
            total.updated += result.updated
            total.resolved += result.resolved
            total.held += result.held
        return total if ran else None

    def _cycle(self, cluster: str | None) -> CycleResult | None:
        name = cluster or "the default cluster"
        try:
            if not self.service.source_for(cluster).wait_synced(0):
                log.info("alert cycle for %s skipped: its cache is still syncing", name)
                return None  # a half-synced cache would resolve groups that still exist
            sweep = self.service.sweep(cluster=cluster)
            result = self.alerter.cycle(sweep)
        except Exception as e:  # the next interval tries again; the bot keeps answering
            log.warning("alert cycle for %s failed: %s: %s", name, type(e).__name__, e)
            return None
        if self.metrics is not None:
            self.metrics.count_alerts(
                posted=result.posted, updated=result.updated, resolved=result.resolved
            )
            self.metrics.observe_held(sweep.cluster, result.held)
        for why in result.held:
            log.info("alert held back (%s): %s", sweep.cluster, why)
        return result

    def _run(self) -> None:
        while not self._stop.is_set():
            self.once()
            self._stop.wait(self.interval)
