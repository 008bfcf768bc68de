"""The chart as a platform team installs it: every option rendered by real helm and what it
renders checked as the API server and its operators would read it.

`kubectl apply --dry-run=client` needs a cluster for the resource mappings, so the rendered
manifests are checked here structurally: names, labels, selectors that select, volumes that
exist for every mount, ports the Service, probes, Ingress and ServiceMonitor name; the
values schema refuses a typo; the PrometheusRule and the Grafana dashboard use only metric
names a bot exports (collected from a real `Metrics` and incident store); NOTES.txt says what
to do next; a SQLite trial gets a volume or is refused.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

CHART = Path(__file__).resolve().parents[2] / "deploy" / "helm" / "gpu-triage"
pytestmark = pytest.mark.skipif(
    shutil.which("helm") is None,
    reason="helm is not on PATH (make test installs it through .ci/tools)",
)
EVERYTHING: dict[str, Any] = {
    "imagePullSecrets": [{"name": "regcred"}],
    "podAnnotations": {"sidecar.istio.io/inject": "false"},
    "podLabels": {"team": "platform"},
    "extraEnv": [{"name": "GPU_TRIAGE_LLM_PROVIDER", "value": "openai"},
                 {"name": "OPENAI_API_KEY", "valueFrom": {"secretKeyRef": {"name": "llm", "key": "key"}}}],
    "envFrom": [{"secretRef": {"name": "more-settings"}}],
    "extraVolumes": [{"name": "ca", "configMap": {"name": "corp-ca"}}],
    "extraVolumeMounts": [{"name": "ca", "mountPath": "/etc/ssl/corp", "readOnly": True}],
    "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "2Gi"}},
    "ingress": {"enabled": True, "className": "nginx", "host": "gpu-triage.corp.example",
                "annotations": {"cert-manager.io/cluster-issuer": "letsencrypt"}},
    "metrics": {"serviceMonitor": {"enabled": True, "labels": {"release": "prom"}},
                "prometheusRule": {"enabled": True, "labels": {"release": "prom"}},
                "dashboard": {"enabled": True, "annotations": {"grafana_folder": "GPU"}}},
    "accessPolicy": "tenants: []\n",
}  # fmt: skip
API_VERSIONS = {
    "Deployment": "apps/v1", "Service": "v1", "ServiceAccount": "v1", "ConfigMap": "v1",
    "PersistentVolumeClaim": "v1", "Ingress": "networking.k8s.io/v1",
    "ClusterRole": "rbac.authorization.k8s.io/v1", "ClusterRoleBinding": "rbac.authorization.k8s.io/v1",
    "Role": "rbac.authorization.k8s.io/v1", "RoleBinding": "rbac.authorization.k8s.io/v1",
    "PodDisruptionBudget": "policy/v1", "ServiceMonitor": "monitoring.coreos.com/v1",
    "PrometheusRule": "monitoring.coreos.com/v1",
}  # fmt: skip
DNS_1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def helm(*args: str, values: dict[str, Any] | None = None, tmp: Path | None = None,
         check: bool = True) -> subprocess.CompletedProcess[str]:  # fmt: skip
    flags: list[str] = []
    if values is not None:
        assert tmp is not None
        path = tmp / "values.yaml"
        path.write_text(yaml.safe_dump(values))
        flags = ["-f", str(path)]
    done = subprocess.run(["helm", *args, str(CHART), *flags], capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    if check:
        assert done.returncode == 0, done.stderr
    return done


def render(tmp: Path, values: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    out = helm("template", "t", values=values or {}, tmp=tmp).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    [found] = [d for d in docs if d["kind"] == kind]
    return found


def exported_metric_names(tmp: Path) -> set[str]:
    """Every sample name a bot exports: a real Metrics with a real (SQLite) incident store
    and the cache families, as /metrics renders them."""
    from gpu_triage.metrics import Metrics
    from incidents.store import IncidentStore

    with IncidentStore.open(f"sqlite:///{tmp / 'm.sqlite'}", auto_migrate=True) as store:
        body, _ = Metrics(store=store, caches=lambda: {}).render()
    names = set()
    for name, kind in re.findall(r"^# TYPE (\S+) (\S+)$", body.decode(), re.M):
        names.add(name)
        if kind == "histogram":
            names |= {f"{name}_bucket", f"{name}_sum", f"{name}_count"}
    return names


def metric_names(expr: str) -> set[str]:
    return set(re.findall(r"\bgpu_triage_[a-z_]+\b", expr))


def check_manifests(docs: list[dict[str, Any]]) -> None:
    """What the API server and the controllers would refuse or silently ignore."""
    for d in docs:
        assert d["apiVersion"] == API_VERSIONS[d["kind"]], d["kind"]
        meta = d["metadata"]
        assert DNS_1123.match(meta["name"]) and len(meta["name"]) <= 253, meta["name"]
        assert meta["labels"]["app.kubernetes.io/name"] == "gpu-triage", d["kind"]
    services = [d for d in docs if d["kind"] == "Service"]
    for deploy in (d for d in docs if d["kind"] == "Deployment"):
        pod = deploy["spec"]["template"]
        assert (
            deploy["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
        )
        spec = pod["spec"]
        volumes = {v["name"] for v in spec.get("volumes", [])}
        assert len(volumes) == len(spec.get("volumes", [])), "duplicate volume names"
        for c in spec["containers"]:
            assert {m["name"] for m in c.get("volumeMounts", [])} <= volumes, c["name"]
            names = [e["name"] for e in c.get("env", [])]
            assert len(names) == len(set(names)), f"duplicate env: {names}"
            assert all(("value" in e) != ("valueFrom" in e) for e in c["env"])
            ports = {p["name"]: p["containerPort"] for p in c["ports"]}
            assert all(len(n) <= 15 for n in ports)
            for probe in ("readinessProbe", "livenessProbe"):
                assert c[probe]["httpGet"]["port"] in ports
            for svc in services:
                assert svc["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
                assert {p["targetPort"] for p in svc["spec"]["ports"]} <= set(ports)
    svc_ports = {p["name"] for s in services for p in s["spec"]["ports"]}
    for ingress in (d for d in docs if d["kind"] == "Ingress"):
        [rule] = ingress["spec"]["rules"]
        [path] = rule["http"]["paths"]
        assert (path["path"], path["pathType"]) == ("/slack/events", "Exact")  # nothing else
        backend = path["backend"]["service"]
        assert backend["name"] in {s["metadata"]["name"] for s in services}
        assert backend["port"]["name"] in svc_ports
        for tls in ingress["spec"].get("tls", []):
            assert rule["host"] in tls["hosts"] and tls["secretName"]
    for monitor in (d for d in docs if d["kind"] == "ServiceMonitor"):
        assert all(e["port"] in svc_ports for e in monitor["spec"]["endpoints"])


def test_every_option_renders_lints_and_holds_together(tmp_path: Path) -> None:
    path = tmp_path / "all.yaml"
    path.write_text(yaml.safe_dump(EVERYTHING))
    lint = subprocess.run(["helm", "lint", "--strict", str(CHART), "-f", str(path)],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert lint.returncode == 0, lint.stdout + lint.stderr
    docs = render(tmp_path, EVERYTHING)
    check_manifests(docs)
    check_manifests(render(tmp_path))  # the defaults too
    pod = one(docs, "Deployment")["spec"]["template"]
    spec, [bot] = pod["spec"], pod["spec"]["containers"]
    assert spec["imagePullSecrets"] == [{"name": "regcred"}]
    assert pod["metadata"]["annotations"]["sidecar.istio.io/inject"] == "false"
    assert pod["metadata"]["labels"]["team"] == "platform"
    env = {e["name"]: e for e in bot["env"]}
    assert env["OPENAI_API_KEY"]["valueFrom"]["secretKeyRef"] == {"name": "llm", "key": "key"}
    assert env["LOG_FORMAT"]["value"] == "json" and env["LOG_LEVEL"]["value"] == "info"
    assert bot["envFrom"] == [{"secretRef": {"name": "more-settings"}}]
    assert {"name": "ca", "mountPath": "/etc/ssl/corp", "readOnly": True} in bot["volumeMounts"]
    assert bot["resources"]["limits"]["memory"] == "2Gi"
    ingress = one(docs, "Ingress")
    assert ingress["spec"]["ingressClassName"] == "nginx"
    assert ingress["spec"]["tls"] == [{"hosts": ["gpu-triage.corp.example"],
                                       "secretName": "gpu-triage-tls"}]  # fmt: skip
    assert ingress["metadata"]["annotations"]["cert-manager.io/cluster-issuer"] == "letsencrypt"


def test_metrics_have_a_port_of_their_own_that_the_bot_and_the_monitor_agree_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpu_triage.settings import load_settings

    docs = render(tmp_path, EVERYTHING)
    [bot] = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in bot["env"]}
    ports = {p["name"]: p["containerPort"] for p in bot["ports"]}
    assert env["GPU_TRIAGE_METRICS_PORT"] == str(ports["metrics"]) != env["PORT"]
    service = {p["name"]: p for p in one(docs, "Service")["spec"]["ports"]}
    assert service["metrics"]["targetPort"] == "metrics"
    [endpoint] = one(docs, "ServiceMonitor")["spec"]["endpoints"]
    assert (endpoint["port"], endpoint["path"]) == ("metrics", "/metrics")
    assert one(docs, "ServiceMonitor")["metadata"]["labels"]["release"] == "prom"
    monkeypatch.setenv("GPU_TRIAGE_METRICS_PORT", env["GPU_TRIAGE_METRICS_PORT"])
    settings = load_settings(slack_signing_secret="s3cr3t-value", slack_bot_token="xoxb-1")
    assert settings.metrics_port == ports["metrics"]


def test_alert_rules_and_dashboard_use_only_what_the_bot_exports(tmp_path: Path) -> None:
    exported = exported_metric_names(tmp_path)
    docs = render(tmp_path, EVERYTHING)
    rules = [r for g in one(docs, "PrometheusRule")["spec"]["groups"] for r in g["rules"]]
    assert {r["alert"] for r in rules} >= {
        "GPUTriageStuckGPUWorkloads",
        "GPUTriageClusterUnreadable",
        "GPUTriageAlertsHeldBack",
    }
    for rule in rules:
        used = metric_names(rule["expr"])
        assert used and used <= exported, (rule["alert"], used - exported)
        assert re.fullmatch(r"[0-9]+[smh]", rule["for"]) and rule["labels"]["severity"]
        if "by (" in rule["expr"]:  # Prometheus' own templates survived helm's
            assert "{{ $labels." in rule["annotations"]["summary"], rule["alert"]
    stuck = next(r for r in rules if r["alert"] == "GPUTriageStuckGPUWorkloads")
    assert "by (cluster, layer)" in stuck["expr"]  # by layer and cluster, as the issue asks
    config = next(d for d in docs if d["kind"] == "ConfigMap" and "gpu-triage.json" in d["data"])
    assert config["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert config["metadata"]["annotations"] == {"grafana_folder": "GPU"}
    dashboard = json.loads(config["data"]["gpu-triage.json"])
    panels = dashboard["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    for panel in panels:
        assert {"x", "y", "w", "h"} <= set(panel["gridPos"]) and panel["targets"]
        for target in panel["targets"]:
            used = metric_names(target["expr"])
            assert used and used <= exported, (panel["title"], used - exported)
    titles = " | ".join(p["title"].lower() for p in panels)
    for topic in ("stuck gpus by layer and cluster", "time to resolve by layer", "triage latency",
                  "cache age"):  # fmt: skip
        assert topic in titles, topic
    variables = {v["name"] for v in dashboard["templating"]["list"]}
    assert variables == {"datasource", "cluster"}


@pytest.mark.parametrize(
    ("values", "said"),
    [
        ({"ingres": {"enabled": True}}, "additional properties 'ingres' not allowed"),
        ({"metrics": {"port": 0}}, "/metrics/port"),
        ({"logging": {"format": "xml"}}, "/logging/format"),
        ({"database": {"type": "mysql"}}, "/database/type"),
        ({"extraEnv": [{"value": "x"}]}, "/extraEnv/0"),
    ],
)
def test_the_values_schema_refuses_typos_and_wrong_types(
    tmp_path: Path, values: dict[str, Any], said: str
) -> None:
    done = helm("template", "t", values=values, tmp=tmp_path, check=False)
    assert done.returncode != 0 and said in done.stderr, done.stderr


def test_a_sqlite_trial_gets_a_volume_or_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    done = helm("template", "t", values={"database": {"type": "sqlite"}}, tmp=tmp_path,
                check=False)  # fmt: skip
    assert done.returncode != 0
    assert "database.type=sqlite needs persistence.enabled=true" in done.stderr
    two = {"database": {"type": "sqlite"}, "persistence": {"enabled": True}, "replicaCount": 2}
    done = helm("template", "t", values=two, tmp=tmp_path, check=False)
    assert "serves one replica" in done.stderr
    docs = render(tmp_path, {"database": {"type": "sqlite"}, "persistence": {"enabled": True}})
    check_manifests(docs)
    claim = one(docs, "PersistentVolumeClaim")
    assert claim["spec"]["resources"]["requests"]["storage"] == "1Gi"
    assert claim["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    deploy = one(docs, "Deployment")
    assert deploy["spec"]["strategy"] == {"type": "Recreate"}
    spec = deploy["spec"]["template"]["spec"]
    [bot] = spec["containers"]
    env = {e["name"]: e.get("value") for e in bot["env"]}
    assert "DATABASE_URL" not in env
    mount = next(m["mountPath"] for m in bot["volumeMounts"] if m["name"] == "data")
    assert env["GPU_TRIAGE_DATA_DIR"] == mount
    volume = next(v for v in spec["volumes"] if v["name"] == "data")
    assert volume["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
    from incidents.database import resolve_url  # where the bot puts the file: on the volume

    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("GPU_TRIAGE_DATA_DIR", str(tmp_path / "mnt"))
    assert str(resolve_url(None)).startswith(f"sqlite:///{tmp_path / 'mnt'}/")


def test_notes_say_what_to_do_next(tmp_path: Path) -> None:
    plain = helm("install", "t", "--dry-run=client").stdout.split("NOTES:", 1)[1]
    assert "create secret generic gpu-triage" in plain and "DATABASE_URL=postgresql" in plain
    assert "rollout status deploy/t" in plain and "port-forward svc/t 3000" in plain
    assert "No access policy is set" in plain
    public = helm("install", "t", "--dry-run=client", values=EVERYTHING, tmp=tmp_path).stdout
    notes = public.split("NOTES:", 1)[1]
    url = "https://gpu-triage.corp.example/slack/events"
    assert f"Request URL (slash command, events, interactivity): {url}" in notes
    assert "No access policy" not in notes and "PrometheusRule t" in notes
    assert "ConfigMap t-dashboard" in notes
