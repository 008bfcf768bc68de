"""The bot's watch mode: sweep the default cluster every interval, keep the fleet gauges
current, and let the alerter post, update and resolve group alerts. Runs on its own thread;
a failing sweep (cluster unreachable, database down) is logged and retried next interval,
never a crash of the bot."""

from __future__ import annotations

import logging
import threading

from bot.alerts import Alerter, CycleResult
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
    ) -> None:
        self.service, self.alerter, self.metrics, self.interval = (
            service,
            alerter,
            metrics,
            interval,
        )
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gpu-triage-alerts", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def once(self) -> CycleResult | None:
        """One sweep and alert cycle; None when it failed (the reason is logged)."""
        try:
            ready = getattr(self.service.source_for(None), "wait_synced", None)
            if callable(ready) and not ready(0):
                log.info("alert cycle skipped: the cluster cache is still syncing")
                return None  # a half-synced cache would resolve groups that still exist
            sweep = self.service.sweep(cluster=None)
            result = self.alerter.cycle(sweep)
        except Exception as e:  # the next interval tries again; the bot keeps answering
            log.warning("alert cycle failed: %s: %s", type(e).__name__, e)
            return None
        if self.metrics is not None:
            self.metrics.count_alerts(
                posted=result.posted, updated=result.updated, resolved=result.resolved
            )
        for why in result.held:
            log.info("alert held back: %s", why)
        return result

    def _run(self) -> None:
        while not self._stop.is_set():
            self.once()
            self._stop.wait(self.interval)
