"""`/gpu incidents`, `/gpu incident ID` and `/gpu stats`: the incident history, for one asker.

These commands only read the incident store, and what they show an asker is filtered by the
access policy: a tenant's list and counts hold only the incidents of the namespaces they may
see.
"""

from __future__ import annotations

from collections.abc import Callable

from bot.core.chat import Asker
from bot.core.commands import ListIncidents, ShowIncident, ShowStats
from bot.core.context import Context
from bot.core.policy import Viewer
from incidents.values import IncidentStatus


class History:
    def __init__(self, *, ctx: Context) -> None:
        self.ctx = ctx

    def incidents(self, asker: Asker, cmd: ListIncidents) -> None:
        """Open incidents the asker may see: of every cluster, or of `--cluster`'s."""
        known, cluster = self._cluster(asker, cmd.cluster)
        if not known:
            return
        may_see = self._sees(asker)
        candidates = [
            *self.ctx.store.list(status=IncidentStatus.OPEN, limit=200, cluster=cluster),
            *self.ctx.store.list(status=IncidentStatus.ACKNOWLEDGED, limit=200, cluster=cluster),
        ]
        open_ = [i for i in candidates if may_see(i.cluster, i.namespace)][:20]
        if not open_:
            self.ctx.say(asker, self.ctx.words.no_incidents())
            return
        clusters = len({i.cluster for i in open_}) > 1
        lines = [self.ctx.words.incident_line(i, cluster=clusters) for i in open_]
        self.ctx.say(asker, "\n".join(lines))

    def incident(self, asker: Asker, cmd: ShowIncident) -> None:
        inc = self.ctx.store.get(cmd.incident_id)
        if inc is None or not self.ctx.viewer(asker, inc.cluster).may_see(inc.namespace):
            self.ctx.say(asker, self.ctx.words.incident_not_found(str(cmd.incident_id)))
            return
        self.ctx.say(asker, self.ctx.words.incident_detail(inc))

    def _cluster(self, asker: Asker, named: str | None) -> tuple[bool, str | None]:
        """The cluster `--cluster` names (None: every cluster's incidents); False once an
        unknown name was answered."""
        if named is None:
            return True, None
        cluster = self.ctx.cluster_for(asker, named)
        return cluster is not None, cluster

    def _sees(self, asker: Asker) -> Callable[[str, str], bool]:
        """`may_see(cluster, namespace)` for `asker`, one policy resolution per cluster."""
        viewers: dict[str, Viewer] = {}

        def may_see(cluster: str, namespace: str) -> bool:
            if cluster not in viewers:
                viewers[cluster] = self.ctx.viewer(asker, cluster)
            return viewers[cluster].may_see(namespace)

        return may_see

    def stats(self, asker: Asker, cmd: ShowStats) -> None:
        known, cluster = self._cluster(asker, cmd.cluster)
        if not known:
            return
        operator = self.ctx.viewer(asker).operator
        # A tenant counts only the incidents of the namespaces they may see, in each cluster.
        s = self.ctx.store.stats(cluster=cluster, where=None if operator else self._sees(asker))
        lines = [] if operator else [self.ctx.words.stats_scope_yours()]
        lines += [
            self.ctx.words.stats_line(label="open now", count=s.open_now),
            self.ctx.words.stats_line(label="resolved", count=s.resolved),
            self.ctx.words.stats_line(label="total", count=s.total),
        ]
        lines += [
            self.ctx.words.stats_line(label=f"{layer.value}", count=n)
            for layer, n in s.by_layer.items()
        ]
        if operator:  # group counts span every tenant
            groups = self.ctx.store.groups.counts(cluster=cluster)
            lines.append(
                self.ctx.words.stats_line(label="root-cause groups open", count=groups["open"])
            )
        self.ctx.say(asker, "\n".join(lines))
