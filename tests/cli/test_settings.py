"""Settings are read once, in `gpu_triage.settings`: one parse per variable, one default, the
command's flag over the variable, and every command that reads a cluster takes the same flags."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_triage.cli import build_parser
from gpu_triage.settings import SettingsError, load_common_settings, load_settings, settings_of

ENV = ("GPU_TRIAGE_AUTO_MIGRATE", "GPU_TRIAGE_OPERATOR_NAMESPACE", "GPU_TRIAGE_PLAYBOOK",
       "GPU_TRIAGE_TIMEOUT", "GPU_TRIAGE_DATA_DIR", "DATABASE_URL")  # fmt: skip


@pytest.fixture(autouse=True)
def clean(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ENV:
        monkeypatch.delenv(var, raising=False)


@pytest.mark.parametrize(
    ("value", "bot", "reader"),
    [(None, True, False), ("", True, False), ("1", True, True), ("on", True, True),
     ("yes", True, True), ("0", False, False), ("off", False, False), ("false", False, False)],
)  # fmt: skip
def test_auto_migrate_is_one_parse_with_each_commands_documented_default(
    value: str | None, bot: bool, reader: bool, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    if value is not None:
        monkeypatch.setenv("GPU_TRIAGE_AUTO_MIGRATE", value)
    settings = load_common_settings(database_url=f"sqlite:///{tmp_path / 'db.sqlite'}")
    # The bot migrates unless told not to; the read commands only when told to.
    with settings.open_store(migrate=True) as store:
        assert (store.current_revision() is not None) is bot
    with settings.open_store(migrate=False) as store:
        assert (store.current_revision() is not None) is (reader or bot)


def test_a_malformed_variable_is_one_line_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPU_TRIAGE_AUTO_MIGRATE", "maybe")
    with pytest.raises(SettingsError, match=r"^GPU_TRIAGE_AUTO_MIGRATE is malformed"):
        load_common_settings()
    monkeypatch.setenv("GPU_TRIAGE_AUTO_MIGRATE", "1")
    monkeypatch.setenv("GPU_TRIAGE_TIMEOUT", "soon")
    with pytest.raises(SettingsError, match=r"^GPU_TRIAGE_TIMEOUT is malformed: must be a number"):
        load_common_settings()


def test_the_bot_settings_are_the_common_ones_and_more(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPU_TRIAGE_OPERATOR_NAMESPACE", "nvidia")
    monkeypatch.setenv("GPU_TRIAGE_DATA_DIR", "/var/lib/triage")
    bot = load_settings(slack_signing_secret="s3cr3t-value", slack_bot_token="xoxb-1")
    assert bot.engine_config().operator_namespace == "nvidia"
    assert bot.store_url == "sqlite:////var/lib/triage/incidents.sqlite"
    assert (bot.store_timeouts.lock, bot.store_timeouts.statement) == (3.0, 5.0)


def test_a_flag_wins_over_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPU_TRIAGE_OPERATOR_NAMESPACE", "from-env")
    monkeypatch.setenv("GPU_TRIAGE_TIMEOUT", "30")
    parser = build_parser()
    given = settings_of(parser.parse_args(["why-pending", "p", "--operator-namespace", "flag"]))
    assert given.operator_namespace == "flag" and given.timeout == 30.0
    assert settings_of(parser.parse_args(["why-pending", "p"])).operator_namespace == "from-env"


@pytest.mark.parametrize("command", [["why-pending", "p"], ["pending"], ["ask", "q"],
                                     ["verify-node", "n"], ["preflight"]])  # fmt: skip
def test_every_command_that_reads_a_cluster_takes_the_shared_flags(command: list[str]) -> None:
    args = build_parser().parse_args(
        [*command, "--context", "east", "--timeout", "9", "--snapshot", "x.yaml"]
    )
    assert (args.context, args.timeout, args.snapshot) == ("east", 9.0, "x.yaml")
    # The GPU Operator's namespace is found from the cluster unless given (ask said
    # gpu-operator before).
    assert args.operator_namespace is None and settings_of(args).operator_namespace is None
