"""A loopback fake Kubernetes API server for tests and the benchmark (`FakeApiServer`).

kmock's emulator serves neither `limit`/`continue` pagination, field selectors, resource
versions, 410 Gone nor dropped watches, which is exactly what the live adapter and the cache
must get right; so this stdlib server speaks that part of the wire protocol, and the two
writes the product makes (access reviews, the test pod). It holds objects
in memory, serves get/list (paginated, field-selected) and watch (chunked, newline-delimited),
counts requests, and can inject faults: 401/403/5xx (per request or per resource, with
`Retry-After`), expired continue tokens, a body trickled a byte at a time, an answer that is no
Kubernetes API's; and it can drop watches and compact its history.
"""

from kube.testing.server import FakeApiServer
from kube.testing.wire import TOKEN, write_kubeconfig

__all__ = ["TOKEN", "FakeApiServer", "write_kubeconfig"]
