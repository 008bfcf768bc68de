"""Playbooks: remediation steps, verification commands and owner routes, as validated data.

Nothing about who owns what is hard-coded: the bundled `playbooks/default.yaml` is a starting
point that a platform team copies and edits. A bad file fails at load with the field at fault.
"""

from __future__ import annotations

import functools
import string
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from triage.model import Layer, OwnerRoute


class PlaybookError(ValueError):
    """The playbook file is missing or invalid. The message names the file and the field."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Route(_Strict):
    """An owner: a team, the chat channel to escalate to and the user group to mention there,
    as the chat names them (its adapter checks they are its ids: the Slack bot at start)."""

    team: str = Field(min_length=1)
    channel: str | None = None
    usergroup: str | None = Field(default=None, min_length=1)


# The values a triage can fill into steps. A step naming one the triage does not have (no
# node, no GPU Operator) is left out of that report; a name outside this set is a typo.
PLACEHOLDERS = frozenset({
    "namespace", "pod", "resource", "node",
    "operator_namespace", "cluster_policy", "runtime_class",  # only where the operator runs
    "component_namespace", "component_pod",  # the GPU component pod at fault
    "daemonset_namespace", "daemonset_name", "skip_reason",  # the DaemonSet that should serve
    "setting", "switch_key", "component",  # what switched a component off
    "claim", "volume", "storage_class", "driver", "port", "key", "zone", "where",  # filters
    "vendor", "devices",  # the accelerator vendor the report is about ("AMD"), its devices
    "fix", "toolkit_mode",  # a container start failure: its fix, the runtime's device mode
    "upgrade_state", "upgrade_label",  # a node in its operator's driver upgrade
    "webhook",  # the admission webhook that refused the pods
})  # fmt: skip
# Placeholders that make a step operator-only: tenants do not see GPU component pod names.
OPERATOR_ONLY = frozenset({"component_pod"})


@functools.cache
def _placeholders(template: str) -> tuple[str, ...]:
    return tuple(f for _, f, _, _ in string.Formatter().parse(template) if f is not None)


class LayerPlaybook(_Strict):
    steps: list[str] = Field(min_length=1)
    signals: dict[str, list[str]] = Field(default_factory=dict)
    verification: list[str] = Field(default_factory=list)

    def model_post_init(self, __context: Any) -> None:
        _check_placeholders(self.steps, self.verification, self.signals)


def _check_placeholders(
    steps: list[str], verification: list[str], signals: dict[str, list[str]]
) -> None:
    for text in [*steps, *verification, *(s for v in signals.values() for s in v)]:
        try:
            unknown = [f for f in _placeholders(text) if f not in PLACEHOLDERS]
        except ValueError as e:
            raise ValueError(f"bad placeholder syntax in {text!r}: {e}") from e
        if unknown:
            raise ValueError(
                f"unknown placeholder {{{unknown[0]}}} in {text!r} "
                f"(known: {', '.join(sorted(PLACEHOLDERS))})"
            )


class VendorLayer(_Strict):
    """A vendor's own steps for one layer: its signal steps come before the layer's shared
    ones for the same code, and its layer steps (and checks), when it has any, replace the
    shared ones."""

    steps: list[str] = Field(default_factory=list)
    signals: dict[str, list[str]] = Field(default_factory=dict)
    verification: list[str] = Field(default_factory=list)

    def model_post_init(self, __context: Any) -> None:
        _check_placeholders(self.steps, self.verification, self.signals)


class VendorPlaybook(_Strict):
    layers: dict[Layer, VendorLayer] = Field(default_factory=dict)


class NodePools(_Strict):
    labels: list[str] = Field(default_factory=list, description="node labels naming the pool")
    routes: dict[str, dict[Layer, Route]] = Field(default_factory=dict)


class Namespaces(_Strict):
    team_keys: list[str] = Field(
        default_factory=lambda: ["gpu-triage.io/team"],
        description="namespace label or annotation keys naming the owning team",
    )
    layers: list[Layer] = Field(default_factory=lambda: [Layer.SCHEDULING, Layer.QUOTA])


class Playbook(_Strict):
    routes: dict[Layer, Route]
    teams: dict[str, Route] = Field(default_factory=dict)
    namespaces: Namespaces = Field(default_factory=Namespaces)
    node_pools: NodePools = Field(default_factory=NodePools)
    signal_routes: dict[str, Route] = Field(
        default_factory=dict,
        description="owner per signal code, over the layer's (an autoscaler at its limits is "
        "the platform's, though the layer is scheduling)",
    )
    layers: dict[Layer, LayerPlaybook]
    vendors: dict[str, VendorPlaybook] = Field(
        default_factory=dict,
        description="per accelerator vendor (nvidia, amd, intel-gaudi, intel-gpu, aws-neuron, "
        "google-tpu): its own steps, used for reports about its devices; the layers' own "
        "steps say nothing vendor-specific",
    )

    def model_post_init(self, __context: Any) -> None:
        for field_name, mapping in (("routes", self.routes), ("layers", self.layers)):
            missing = [layer.value for layer in Layer if layer not in mapping]
            if missing:
                raise ValueError(f"{field_name}: missing layers {', '.join(missing)}")

    def route(
        self,
        layer: Layer,
        *,
        namespace: Mapping[str, Any] | None = None,
        node_labels: list[Mapping[str, str]] | None = None,
        codes: list[str] | None = None,
    ) -> OwnerRoute:
        """Owner for a failing layer: the first signal code with a route of its own, then the
        node pool override, then the namespace team, then the layer's default."""
        for code in codes or []:
            if code in self.signal_routes:
                return _owner(self.signal_routes[code], f"signal {code}")
        for lab in node_labels or []:
            for key in self.node_pools.labels:
                pool = lab.get(key)
                route = self.node_pools.routes.get(pool or "", {}).get(layer)
                if route is not None:
                    return _owner(route, f"node pool {key}={pool}")
        if namespace is not None and layer in self.namespaces.layers:
            meta = namespace.get("metadata") or {}
            for key in self.namespaces.team_keys:
                team = (meta.get("labels") or {}).get(key) or (meta.get("annotations") or {}).get(
                    key
                )
                if team:
                    route = self.teams.get(team) or Route(team=team)
                    return _owner(route, f"namespace {meta.get('name')} {key}={team}")
        return _owner(self.routes[layer], "default")

    def steps(
        self, layer: Layer, codes: list[str], *, vendor_key: str | None = None, **values: str
    ) -> tuple[list[str], list[str]]:
        """(steps anyone may read, operator-only steps): the code-specific steps, then the
        layer's; the vendor's (`vendor_key`) own first where it has them. A step naming a value this triage
        does not have (no node, no component pod) is left out rather than shown half filled;
        one naming a GPU component pod is for operators only."""
        lp = self.layers[layer]
        own = self._vendor_layer(layer, vendor_key)
        out: list[str] = []
        for code in codes:
            found = own.signals.get(code) if own is not None else None
            out.extend(s for s in (found or lp.signals.get(code, [])) if s not in out)
        shared = own.steps if own is not None and own.steps else lp.steps
        out.extend(s for s in shared if s not in out)
        public = [s for s in out if not OPERATOR_ONLY.intersection(_placeholders(s))]
        private = [s for s in out if s not in public]
        return _filled(public, values), _filled(private, values)

    def verification(
        self, layer: Layer, *, vendor_key: str | None = None, **values: str
    ) -> list[str]:
        own = self._vendor_layer(layer, vendor_key)
        checks = own.verification if own is not None and own.verification else None
        return _filled(checks or self.layers[layer].verification, values)

    def _vendor_layer(self, layer: Layer, vendor: str | None) -> VendorLayer | None:
        found = self.vendors.get(vendor) if vendor else None
        return found.layers.get(layer) if found is not None else None


@functools.lru_cache(maxsize=1024)
def _owner(route: Route, source: str) -> OwnerRoute:
    """The owner a route names (both immutable: a sweep's thousands of verdicts routed
    alike share one)."""
    return OwnerRoute(
        team=route.team, channel=route.channel, usergroup=route.usergroup, source=source
    )


def _filled(templates: list[str], values: Mapping[str, str]) -> list[str]:
    out = []
    for template in templates:
        try:
            text = template.format_map(values)
        except (KeyError, IndexError):
            continue
        if text not in out:
            out.append(text)
    return out


def load_playbook(path: str | Path | None = None) -> Playbook:
    """Load and validate a playbook; None loads the bundled default (parsed once: playbooks
    are frozen)."""
    if path is None:
        return _bundled()
    return _load(path)


@functools.cache
def _bundled() -> Playbook:
    return _load(None)


def _load(path: str | Path | None) -> Playbook:
    if path is None:
        text = resources.files("playbooks").joinpath("default.yaml").read_text(encoding="utf-8")
        where = "bundled playbooks/default.yaml"
    else:
        where = str(path)
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as e:
            raise PlaybookError(f"{where}: cannot read: {e.strerror or e}") from e
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise PlaybookError(f"{where}: invalid YAML: {str(e).splitlines()[0]}") from e
    if not isinstance(data, dict):
        raise PlaybookError(f"{where}: expected a mapping at the top level")
    try:
        return Playbook.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(p) for p in err["loc"]) or "(top level)"
        raise PlaybookError(f"{where}: {loc}: {err['msg']}") from e
