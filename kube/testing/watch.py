"""The fake API server's watch: newline-delimited JSON events over a chunked response, the
watch-list protocol's initial events and bookmark, 410 for a resourceVersion compacted away,
and an abrupt end when the server drops its watches (as a restarting API server would)."""

from __future__ import annotations

import bisect
import contextlib
import json
import time
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler
from itertools import chain
from typing import TYPE_CHECKING

from kube.testing.wire import status_body
from triage.cluster.source import ResourceType

if TYPE_CHECKING:
    from kube.testing.server import FakeApiServer


def _added(raw: bytes) -> bytes:
    return b'{"type": "ADDED", "object": ' + raw + b"}\n"


def serve_watch(
    self: FakeApiServer, handler: BaseHTTPRequestHandler, rt: ResourceType, q: dict[str, str]
) -> None:
    """A watch: every object first (sendInitialEvents) or from a resourceVersion, then each
    change as it happens, until its timeout, a dropped watch or the server stopping."""
    res = self._res[rt.kind]
    timeout = float(q.get("timeoutSeconds") or 300)
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Transfer-Encoding", "chunked")
    handler.end_headers()

    def send(data: bytes) -> None:
        handler.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        handler.wfile.flush()

    initial = q.get("sendInitialEvents") == "true" and self.watch_list is True
    pending: Iterable[bytes]
    with self._cond:
        drops, since = self._drops, int(q.get("resourceVersion") or 0)
        if initial:  # every object, then the bookmark that says the state is complete
            end = {"metadata": {"resourceVersion": str(self.rv),
                                "annotations": {"k8s.io/initial-events-end": "true"}}}  # fmt: skip
            # The objects as they are now (references: their JSON is already made), each
            # framed as it is sent, as an API server streams from its watch cache: building
            # every frame first held a second copy of the whole kind (1.7 GB at 600,000
            # pods) and sent nothing until it was made.
            raws = [raw for _, raw in res.items.values()]
            bookmark = json.dumps({"type": "BOOKMARK", "object": end}).encode() + b"\n"
            since, pending = self.rv, chain(map(_added, raws), (bookmark,))
        elif since < self.min_rv:
            gone = status_body(410, "Expired", f"too old resource version: {since}")
            pending = [json.dumps({"type": "ERROR", "object": json.loads(gone)}).encode() + b"\n"]
            since = -1
        elif not since:
            since, pending = (
                self.rv,
                [
                    json.dumps({"type": "ADDED", "object": o}).encode() + b"\n"
                    for o, _ in res.items.values()
                ],
            )
        else:
            pending = []
    deadline = time.monotonic() + timeout
    try:
        while True:
            for line in pending:
                send(line)
            if since < 0:
                break
            with self._cond:
                while not self._stopping and drops == self._drops and time.monotonic() < deadline:
                    i = bisect.bisect_right(res.history, (since, b"\xff"))
                    if i < len(res.history):
                        pending = [line for _, line in res.history[i:]]
                        since = res.history[-1][0]
                        break
                    self._cond.wait(min(1.0, max(0.0, deadline - time.monotonic())))
                else:
                    if drops != self._drops or self._stopping:
                        handler.close_connection = True
                        handler.wfile.flush()
                        with contextlib.suppress(OSError):  # the client may be gone
                            handler.connection.shutdown(2)  # abrupt: no final chunk
                        return
                    break
        send(b"")
    except (BrokenPipeError, ConnectionResetError):
        handler.close_connection = True
