"""kubectl's conventions, as a script or a CI job meets them: `-o text|wide|json|yaml` on
every command that prints (`--format` too), documented exit codes, `--exit-code` for
pipelines that stop on a blocked workload, and `--record` into the incident store the bot
writes (one incident per cause, whoever asked, with where each run came from)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

BIN = Path(sys.executable).with_name("gpu-triage")
FIXTURES = Path(__file__).parents[1] / "fixtures"
FLEET = str(FIXTURES / "fleet-many-causes.yaml")
QUOTA = str(FIXTURES / "resourcequota-exceeded.yaml")
RUNNING = str(FIXTURES / "running.yaml")


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.parametrize(
    "command",
    [
        ["why-pending", "pretrain-13b", "-n", "team-nlp", "--snapshot", QUOTA],
        ["pending", "-A", "--snapshot", FLEET],
        ["demo"],
        ["preflight", "--snapshot", FLEET],
        ["verify-nodes", "--snapshot", FLEET],
        ["ask", "is a Pending GPU pod always an operator failure?"],
    ],
    ids=lambda c: c[0],
)
def test_every_printing_command_speaks_json_and_yaml_alike(command: list[str]) -> None:
    as_json = run(*command, "-o", "json")
    as_yaml = run(*command, "--output", "yaml")
    alias = run(*command, "--format", "json")
    assert as_json.stdout, as_json.stderr
    data = _timeless(json.loads(as_json.stdout))
    assert data == _timeless(json.loads(alias.stdout)) == _timeless(yaml.safe_load(as_yaml.stdout))
    assert as_json.returncode == as_yaml.returncode == alias.returncode


def _timeless(data: object) -> object:
    """Without the time each run was made at."""
    if isinstance(data, dict):
        return {k: _timeless(v) for k, v in data.items() if k != "generated_at"}
    if isinstance(data, list):
        return [_timeless(v) for v in data]
    return data


def test_wide_lists_every_member_where_text_truncates(tmp_path: Path) -> None:
    many = tmp_path / "many.yaml"
    docs = list(yaml.safe_load_all(Path(FLEET).read_text()))
    items = [o for d in docs if d for o in (d.get("items") or [d])]
    pod = next(
        o for o in items
        if o.get("kind") == "Pod" and o["metadata"]["name"].startswith("h100-probe")
    )  # fmt: skip
    for i in range(12):  # twelve more pods stuck on the same full pool
        copy = json.loads(json.dumps(pod))
        copy["metadata"]["name"] = f"probe-{i:02d}"
        copy["metadata"].pop("ownerReferences", None)
        items.append(copy)
    many.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    text = run("pending", "-A", "--snapshot", str(many)).stdout
    wide = run("pending", "-A", "--snapshot", str(many), "-o", "wide").stdout
    assert "and 5 more" in text and sum(f"research/probe-{i:02d}" in text for i in range(12)) < 12
    assert all(f"research/probe-{i:02d}" in wide for i in range(12))
    assert not re.search(r"and \d+ more", wide)


def test_exit_codes_say_what_went_wrong(tmp_path: Path) -> None:
    blocked = ["why-pending", "pretrain-13b", "-n", "team-nlp", "--snapshot", QUOTA]
    assert run(*blocked).returncode == 0  # the triage ran: the contract other tools rely on
    assert run(*blocked, "--exit-code").returncode == 1
    runs = run("why-pending", "resnet-serve-0", "-n", "team-vision", "--snapshot", RUNNING,
               "--exit-code")  # fmt: skip
    assert runs.returncode == 0 and "OK:" in runs.stdout
    assert run("pending", "-A", "--snapshot", FLEET, "--exit-code").returncode == 1
    assert run("why-pending", "nope", "-n", "team-nlp", "--snapshot", QUOTA).returncode == 2
    assert run("why-pending", "Bad_Name", "--snapshot", QUOTA).returncode == 2
    assert run("pending", "--bogus").returncode == 2
    dead = tmp_path / "kubeconfig"
    dead.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: dead\n"
        "clusters: [{name: dead, cluster: {server: 'http://127.0.0.1:9'}}]\n"
        "contexts: [{name: dead, context: {cluster: dead, user: u}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
    )
    assert run("pending", "-A", "--kubeconfig", str(dead)).returncode == 3
    down = run("incidents", "--database-url", "postgresql+psycopg://u:p@127.0.0.1:9/x")
    assert down.returncode == 4 and down.stderr.count("\n") == 1


def test_a_terminal_triage_and_a_slack_one_land_on_one_incident(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'incidents.sqlite'}"
    why = ["why-pending", "pretrain-13b", "-n", "team-nlp", "--snapshot", QUOTA]
    first = run(*why, "--record", "--database-url", url)
    assert first.returncode == 0, first.stderr
    assert "recorded in" in first.stderr and "1 incident(s) opened" in first.stderr
    # the bot records the same workload blocked for the same cause: the same incident
    sys.path.insert(0, str(Path(__file__).parents[2]))
    from incidents import IncidentStore
    from triage import load_snapshot, triage

    report = triage(load_snapshot(QUOTA), namespace="team-nlp", name="pretrain-13b")
    with IncidentStore.open(url, auto_migrate=True) as store:
        store.record(report, requested_by="U0SLACK", duration_ms=5, channel="C1")
    again = run(*why, "--record", "--database-url", url)
    assert "1 continued" in again.stderr
    listed = json.loads(run("incidents", "--database-url", url, "-o", "json").stdout)["items"]
    assert len(listed) == 1 and listed[0]["run_count"] == 3
    shown = run("incident", str(listed[0]["id"]), "--database-url", url).stdout.splitlines()
    header = next(line for line in shown if "FROM" in line)
    at = header.index("FROM")
    runs = shown[shown.index(header) + 1 :]
    assert [r[at:].split()[0] for r in runs] == ["cli", "slack", "cli"]  # the FROM column
    data = json.loads(
        run("incident", str(listed[0]["id"]), "--database-url", url, "-o", "json").stdout
    )
    assert [r["source"] for r in data["runs"]] == ["cli", "slack", "cli"]


def test_pending_records_every_stuck_workload_and_incidents_filter_by_namespace(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'incidents.sqlite'}"
    p = run("pending", "-A", "--snapshot", FLEET, "--record", "--database-url", url)
    assert p.returncode == 0, p.stderr
    assert "20 incident(s) opened" in p.stderr
    nlp = json.loads(
        run("incidents", "-n", "team-nlp", "--database-url", url, "-o", "json").stdout
    )["items"]
    assert nlp and {i["namespace"] for i in nlp} == {"team-nlp"}
    every = json.loads(run("incidents", "-A", "--database-url", url, "-o", "json").stdout)["items"]
    assert len(every) == 20
    # a triage of one of those pods continues its workload's incident, whatever was typed
    member = next(i for i in every if i["kind"] == "StatefulSet" and i["pod"])
    pod = ["why-pending", f"{member['namespace']}/{member['pod']}", "--snapshot", FLEET]
    again = run(*pod, "--record", "--database-url", url)
    assert "1 continued" in again.stderr and "opened" not in again.stderr, again.stderr
    wide = run("incidents", "--database-url", url, "-o", "wide").stdout
    assert "SLACK THREAD" in wide.splitlines()[0] and "HEADLINE" in wide.splitlines()[0]
