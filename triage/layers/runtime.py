"""A container bound to its node that cannot start in its vendor's container runtime: which
cause the runtime's words name, and how the node's runtime injects devices (CDI or legacy).

The NVIDIA container stack fails a container in three ways SREs meet every week (the vendor
lists the words, `Vendor.runtime_causes`): CDI device resolution (the spec under /var/run/cdi
is stale or missing: the GPU kubelet handed over has no entry), a driver whose kernel module
and libraries differ ("driver/library version mismatch": upgraded under a loaded module), and
nvidia-container-cli failing to initialise (no driver loaded, no libnvidia-ml). Each has its
own fix (regenerate the CDI spec, reload the driver, restart the toolkit), so each has its
own code; words none of them match stay `driver.container-start-failed`.
"""

from __future__ import annotations

from collections.abc import Iterable

from triage.cluster.objects import Obj, name_of
from triage.vendors import Vendor

CODES = {
    "cdi": "driver.cdi-spec-unresolvable",
    "version-mismatch": "driver.library-mismatch",
    "runtime-init": "driver.runtime-init-failed",
}
GENERIC = "driver.container-start-failed"


def cause_of(vendor: Vendor, texts: Iterable[str]) -> str | None:
    """The first of the vendor's known causes the runtime's words name, most specific first."""
    texts = list(texts)
    for cause, pattern in vendor.runtime_causes:
        if any(pattern.search(t) for t in texts):
            return cause
    return None


def mode_of(vendor: Vendor, *, pod: Obj, texts: Iterable[str], cause: str | None,
            policy: Obj | None) -> tuple[str, list[str]]:  # fmt: skip
    """How the node's runtime injects the vendor's devices for this pod ("CDI", "legacy",
    or "unknown"), with the lines that say so."""
    why: list[str] = []
    mode = "unknown"
    rc = str((pod.get("spec") or {}).get("runtimeClassName") or "")
    said = " ".join(texts)
    if cause == "cdi":
        mode = "CDI"
        why.append("the runtime failed injecting CDI devices")
    elif "mode as 'legacy'" in said or "nvidia-container-cli" in said:
        mode = "legacy"
        why.append("the runtime ran the nvidia-container-cli hook (legacy mode)")
    if rc in vendor.runtime_modes:
        mode = mode if mode != "unknown" else vendor.runtime_modes[rc]
        why.append(f"pod spec.runtimeClassName {rc} selects {vendor.runtime_modes[rc]} mode")
    cdi = ((policy or {}).get("spec") or {}).get("cdi")
    if isinstance(cdi, dict):
        why.append(
            f"ClusterPolicy {name_of(policy or {})} spec.cdi.enabled={str(cdi.get('enabled', False)).lower()}"
            f", spec.cdi.default={str(cdi.get('default', False)).lower()}"
        )
    return mode, why


# What each cause means, after "its container cannot start: ".
MEANING = {
    "cdi": "the container runtime finds no CDI spec entry for the {vendor} device kubelet "
    "handed over (the CDI spec under /var/run/cdi is stale or missing)",
    "version-mismatch": "the loaded {vendor} kernel module and the driver's user-space "
    "libraries are different versions (driver/library version mismatch): the driver was "
    "upgraded while its old module stayed loaded",
    "runtime-init": "the {vendor} container runtime hook (nvidia-container-cli) cannot "
    "initialise: no driver loaded, or its libraries are not where the toolkit looks",
}
# The fix, by cause and by who manages the driver ("operator" or "host").
FIX = {
    ("cdi", "operator"): "regenerate the CDI spec: restart the container toolkit pod on the node",
    ("cdi", "host"): "regenerate the CDI spec on the node (nvidia-ctk cdi generate "
    "--output=/var/run/cdi/nvidia.yaml)",
    ("version-mismatch", "operator"): "reload the driver: drain the node and restart its "
    "driver pod (or reboot the node)",
    ("version-mismatch", "host"): "reload the driver: drain and reboot the node (or unload "
    "and reload the kernel modules)",
    ("runtime-init", "operator"): "check the driver pod on the node, then restart the "
    "container toolkit pod so it configures the runtime again",
    ("runtime-init", "host"): "check that the driver is loaded on the host (nvidia-smi), "
    "then restart the container runtime",
}
