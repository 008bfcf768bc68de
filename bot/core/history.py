"""`/gpu incidents`, `/gpu incident ID` and `/gpu stats`: the incident history, for one asker.

Split from `bot.handlers` by concept: these commands only read the incident store, and what
they show an asker is filtered by the access policy: a tenant's list and counts hold only the
incidents of the namespaces they may see.
"""

from __future__ import annotations

from collections.abc import Callable

from bot.core.commands import ListIncidents, ShowIncident, ShowStats
from bot.core.handlers import Asker, Handlers
from bot.core.policy import Viewer
from bot.slack import messages as msg
from bot.slack.mrkdwn import escape
from incidents.values import IncidentStatus


class History:
    def __init__(self, *, handlers: Handlers) -> None:
        self.h = handlers

    def incidents(self, asker: Asker, cmd: ListIncidents) -> None:
        """Open incidents the asker may see: of every cluster, or of `--cluster`'s."""
        cluster = None
        if cmd.cluster is not None:
            cluster = self.h.cluster_for(asker, cmd.cluster)
            if cluster is None:
                return
        may_see = self._sees(asker)
        candidates = [
            *self.h.store.list(status=IncidentStatus.OPEN, limit=200, cluster=cluster),
            *self.h.store.list(status=IncidentStatus.ACKNOWLEDGED, limit=200, cluster=cluster),
        ]
        open_ = [i for i in candidates if may_see(i.cluster, i.namespace)][:20]
        if not open_:
            self.h.say(asker, msg.no_incidents())
            return
        lines = [
            msg.incident_line(
                incident_id=str(i.id),
                status=i.status.value,
                layer=None if i.failing_layer is None else i.failing_layer.value,
                namespace=i.namespace,
                name=i.name,
                cluster=i.cluster if len({i.cluster for i in open_}) > 1 else None,
            )
            for i in open_
        ]
        self.h.say(asker, "\n".join(lines))

    def incident(self, asker: Asker, cmd: ShowIncident) -> None:
        inc = self.h.store.get(cmd.incident_id)
        if inc is None or not self.h.viewer(asker, inc.cluster).may_see(inc.namespace):
            self.h.say(asker, msg.incident_not_found(str(cmd.incident_id)))
            return
        text = msg.incident_line(
            incident_id=str(inc.id),
            status=inc.status.value,
            layer=None if inc.failing_layer is None else inc.failing_layer.value,
            namespace=inc.namespace,
            name=inc.name,
            cluster=inc.cluster,
        )
        self.h.say(asker, f"{text}\n{escape(inc.headline)}")

    def _sees(self, asker: Asker) -> Callable[[str, str], bool]:
        """`may_see(cluster, namespace)` for `asker`, one policy resolution per cluster."""
        viewers: dict[str, Viewer] = {}

        def may_see(cluster: str, namespace: str) -> bool:
            if cluster not in viewers:
                viewers[cluster] = self.h.viewer(asker, cluster)
            return viewers[cluster].may_see(namespace)

        return may_see

    def stats(self, asker: Asker, cmd: ShowStats) -> None:
        cluster = None
        if cmd.cluster is not None:
            cluster = self.h.cluster_for(asker, cmd.cluster)
            if cluster is None:
                return
        operator = self.h.viewer(asker).operator
        # A tenant counts only the incidents of the namespaces they may see, in each cluster.
        s = self.h.store.stats(cluster=cluster, where=None if operator else self._sees(asker))
        lines = [] if operator else [msg.stats_scope_yours()]
        lines += [
            msg.stats_line(label="open now", count=s.open_now),
            msg.stats_line(label="resolved", count=s.resolved),
            msg.stats_line(label="total", count=s.total),
        ]
        lines += [
            msg.stats_line(label=f"{layer.value}", count=n) for layer, n in s.by_layer.items()
        ]
        if operator:  # group counts span every tenant
            groups = self.h.store.groups.counts(cluster=cluster)
            lines.append(msg.stats_line(label="root-cause groups open", count=groups["open"]))
        self.h.say(asker, "\n".join(lines))
