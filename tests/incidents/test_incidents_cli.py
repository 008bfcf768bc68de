"""The real `gpu-triage` executable against a temporary SQLite database and PostgreSQL."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from incidents import IncidentStatus, IncidentStore
from tests.incidents.incident_helpers import make_report
from triage.model import Layer

ROOT = Path(__file__).resolve().parents[2]
EXE = Path(sys.executable).with_name("gpu-triage")


def run(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    full_env = {
        k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "GPU_TRIAGE_AUTO_MIGRATE"}
    }
    full_env.update(env or {})
    return subprocess.run(
        [str(EXE), *args], cwd=cwd, env=full_env, capture_output=True, text=True, timeout=60
    )


def _seed(db_url: str) -> str:
    with IncidentStore.from_url(db_url) as store:
        store.upgrade()
        a = store.record(
            make_report(Layer.DRIVER, name="a", codes=("crash",)),
            requested_by="U1",
            duration_ms=120,
        )
        store.record(
            make_report(Layer.DRIVER, name="a", codes=("crash",)), requested_by="U2", duration_ms=80
        )
        store.record(
            make_report(Layer.QUOTA, name="b", kind="Job"), requested_by="U3", duration_ms=5
        )
        assert a.incident is not None
        store.set_status(a.incident.id, IncidentStatus.ACKNOWLEDGED, by="alice")
    return db_url


@pytest.fixture
def seeded(sqlite_url: str) -> str:
    # Each CLI run is a fresh interpreter (~1 s): the full matrix runs on SQLite only, and
    # test_cli_on_postgres covers the PostgreSQL path of the same commands.
    return _seed(sqlite_url)


@pytest.mark.postgres
def test_cli_on_postgres(pg_url: str, tmp_path: Path) -> None:
    _seed(pg_url)
    out = run(
        "incidents",
        "--layer",
        "driver",
        "--format",
        "json",
        cwd=tmp_path,
        env={"DATABASE_URL": pg_url},
    )
    assert out.returncode == 0, out.stderr
    [item] = json.loads(out.stdout)["items"]
    assert (item["name"], item["status"], item["run_count"]) == ("a", "acknowledged", 2)


def test_db_upgrade_from_any_cwd(tmp_path: Path) -> None:
    data = tmp_path / "data-dir"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {"GPU_TRIAGE_DATA_DIR": str(data)}
    first = run("db", "upgrade", cwd=elsewhere, env=env)
    assert first.returncode == 0, first.stderr
    assert "upgraded empty -> 0006" in first.stdout
    assert (data / "incidents.sqlite").is_file()
    again = run("db", "upgrade", cwd=elsewhere, env=env)
    assert again.returncode == 0 and "already at 0006" in again.stdout
    listed = run("incidents", "--format", "json", cwd=elsewhere, env=env)
    assert listed.returncode == 0 and json.loads(listed.stdout)["items"] == []


def test_list_show_stats_json(seeded: str, tmp_path: Path) -> None:
    out = run("incidents", "--format", "json", "--database-url", seeded, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert (doc["apiVersion"], doc["kind"]) == ("gpu-triage.io/v1", "IncidentList")
    items = doc["items"]
    assert [(i["name"], i["status"], i["failing_layer"]) for i in items] == [
        ("b", "open", "quota"),
        ("a", "acknowledged", "driver"),
    ]
    filtered = run(
        "incidents",
        "--status",
        "acknowledged",
        "--format",
        "json",
        cwd=tmp_path,
        env={"DATABASE_URL": seeded},
    )
    assert [i["name"] for i in json.loads(filtered.stdout)["items"]] == ["a"]
    by_layer = run(
        "incidents",
        "--layer",
        "quota",
        "--limit",
        "5",
        "--format",
        "json",
        cwd=tmp_path,
        env={"DATABASE_URL": seeded},
    )
    assert [i["name"] for i in json.loads(by_layer.stdout)["items"]] == ["b"]

    driver_id = items[1]["id"]
    shown = run(
        "incident", str(driver_id), "--format", "json", "--database-url", seeded, cwd=tmp_path
    )
    assert shown.returncode == 0, shown.stderr
    body = json.loads(shown.stdout)
    assert body["incident"]["acknowledged_by"] == "alice"
    assert [r["requested_by"] for r in body["runs"]] == ["U1", "U2"]
    assert body["runs"][0]["report"]["failing_layer"] == "driver"

    stats = run("stats", "--format", "json", "--database-url", seeded, cwd=tmp_path)
    data = json.loads(stats.stdout)
    assert (data["total"], data["open_now"]) == (2, 2)
    assert data["by_layer"] == {"driver": 1, "device-plugin": 0, "scheduling": 0, "quota": 1}


def test_text_output(seeded: str, tmp_path: Path) -> None:
    listed = run("incidents", "--database-url", seeded, cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    header, *rows = listed.stdout.splitlines()
    assert header.split() == [
        "ID",
        "STATUS",
        "LAYER",
        "WORKLOAD",
        "OPENED",
        "(UTC)",
        "RUNS",
        "OWNER",
    ]
    assert "ml/Job b" in rows[0] and "ml/Pod a" in rows[1] and "acknowledged" in rows[1]

    first_id = listed.stdout.splitlines()[2].split()[0]
    shown = run("incident", first_id, "--database-url", seeded, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert f"Incident {first_id}: acknowledged" in shown.stdout
    assert "Acknowledged:" in shown.stdout and "alice" in shown.stdout
    assert "Runs (2):" in shown.stdout

    stats = run("stats", "--database-url", seeded, cwd=tmp_path)
    assert "Incidents: 2 total, 2 open now, 0 resolved" in stats.stdout
    assert any(line.split()[:3] == ["driver", "1", "1"] for line in stats.stdout.splitlines())


def test_errors_are_one_line(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'fresh.sqlite'}"
    missing = run("incidents", "--database-url", url, cwd=tmp_path)
    assert missing.returncode == 4  # the database, not the input
    assert missing.stderr.strip().splitlines() == [
        f"gpu-triage: error: incident database {url} is not initialised: run `gpu-triage db upgrade`"
    ]
    # --auto-migrate (or GPU_TRIAGE_AUTO_MIGRATE=1) creates the schema first.
    auto = run(
        "incident", "7", "--database-url", url, cwd=tmp_path, env={"GPU_TRIAGE_AUTO_MIGRATE": "1"}
    )
    assert auto.returncode == 2
    assert auto.stderr.strip() == "gpu-triage: error: incident 7 does not exist"

    down = run(
        "stats", "--database-url", "postgresql+psycopg://u:s3cret@127.0.0.1:9/x", cwd=tmp_path
    )
    assert down.returncode == 4
    assert len(down.stderr.strip().splitlines()) == 1 and "s3cret" not in down.stderr
    assert "Traceback" not in down.stderr

    bad = run("incidents", "--limit", "0", cwd=tmp_path)
    assert bad.returncode == 2 and "must be at least 1" in bad.stderr


def test_the_default_database_is_the_user_s_data_folder_whatever_the_directory(
    tmp_path: Path,
) -> None:
    """No DATABASE_URL, no GPU_TRIAGE_DATA_DIR: $XDG_DATA_HOME/gpu-triage, from any folder."""
    xdg, one, two = tmp_path / "xdg", tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    env = {"XDG_DATA_HOME": str(xdg), "GPU_TRIAGE_DATA_DIR": ""}
    assert run("db", "upgrade", cwd=one, env=env).returncode == 0
    assert (xdg / "gpu-triage" / "incidents.sqlite").is_file()
    assert not list(one.iterdir()) and not list(two.iterdir())
    again = run("db", "upgrade", cwd=two, env=env)
    assert "already at 0006" in again.stdout
    home = {"HOME": str(tmp_path / "home"), "XDG_DATA_HOME": "", "GPU_TRIAGE_DATA_DIR": ""}
    assert run("db", "upgrade", cwd=one, env=home).returncode == 0
    assert (tmp_path / "home/.local/share/gpu-triage/incidents.sqlite").is_file()


def test_ack_snooze_resolve_from_the_cli(seeded: str, tmp_path: Path) -> None:
    items = json.loads(
        run("incidents", "-o", "json", "--database-url", seeded, cwd=tmp_path).stdout
    )["items"]
    open_id = next(i["id"] for i in items if i["status"] == "open")
    acked = run("ack", str(open_id), "--as", "bob", "--database-url", seeded, cwd=tmp_path)
    assert acked.returncode == 0, acked.stderr
    assert (
        acked.stdout.startswith(f"incident {open_id} (")
        and "acknowledged by bob at " in acked.stdout
    )
    snoozed = run("snooze", str(open_id), "--until", "2h", "--as", "bob", "-o", "json",
                  "--database-url", seeded, cwd=tmp_path)  # fmt: skip
    doc = json.loads(snoozed.stdout)
    assert doc["kind"] == "IncidentDetail" and doc["incident"]["snoozed_by"] == "bob"
    assert doc["incident"]["snoozed_until"] and doc["runs"]
    listed = run("incidents", "--database-url", seeded, cwd=tmp_path).stdout
    assert any(line.split()[:2] == [str(open_id), "snoozed"] for line in listed.splitlines())
    bad = run("snooze", str(open_id), "--until", "soon", "--database-url", seeded, cwd=tmp_path)
    assert bad.returncode == 2 and "not a duration" in bad.stderr
    done = run("resolve", str(open_id), "--as", "carol", "--database-url", seeded, cwd=tmp_path)
    assert "resolved by carol" in done.stdout
    late = run("snooze", str(open_id), "--until", "1h", "--database-url", seeded, cwd=tmp_path)
    assert late.returncode == 2 and late.stderr.count("\n") == 1 and "resolved" in late.stderr
    stats = run("stats", "--database-url", seeded, cwd=tmp_path).stdout
    assert "MEDIAN TO ACK" in stats and "Median time to acknowledge:" in stats
