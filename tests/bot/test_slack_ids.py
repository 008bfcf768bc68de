"""Slack's id patterns live in the Slack adapter: the engine's playbook and the core's access
policy take any id; the Slack bot checks them where they enter (policy file, playbook) and
refuses at start in one line naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.core.policy import AccessPolicy, PolicyError
from bot.slack.ids import PlaybookIdError, check_playbook, load_policy
from bot.slack.messages import escalation_summary
from tests.bot.test_bot_cli import _bot, _env
from triage import load_playbook

PLAYBOOK = Path(__file__).parents[2] / "playbooks" / "default.yaml"


def _playbook(tmp_path: Path, usergroup: str) -> Path:
    text = PLAYBOOK.read_text().replace(
        "teams: {}",
        f"teams: {{nlp: {{team: nlp-platform, channel: '#nlp', usergroup: {usergroup}}}}}",
    )
    path = tmp_path / "playbook.yaml"
    path.write_text(text)
    return path


def test_the_playbook_schema_takes_any_chats_ids(tmp_path: Path) -> None:
    playbook = load_playbook(_playbook(tmp_path, "team-nlp-oncall"))  # not a Slack id
    assert playbook.teams["nlp"].usergroup == "team-nlp-oncall"
    with pytest.raises(PlaybookIdError, match=r"teams\.nlp\.usergroup: not a Slack user group"):
        check_playbook(playbook)
    check_playbook(load_playbook(_playbook(tmp_path, "S0NLP")))
    check_playbook(load_playbook(None))


def test_the_slack_bot_refuses_such_a_playbook_at_start(tmp_path: Path) -> None:
    env = _env(SLACK_SIGNING_SECRET="a-real-secret", SLACK_BOT_TOKEN="xoxb-1",
               GPU_TRIAGE_PLAYBOOK=str(_playbook(tmp_path, "team-nlp-oncall")),
               DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite'}")  # fmt: skip
    proc = _bot(env=env)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert err.strip().splitlines()[-1] == (
        "gpu-triage: error: playbook teams.nlp.usergroup: not a Slack user group id: "
        "'team-nlp-oncall'"
    )


def test_policy_ids_are_checked_by_the_chat_not_the_core(tmp_path: Path) -> None:
    odd = {"operators": {"users": ["alice@example.org"], "channels": ["!room:example.org"]}}
    assert AccessPolicy.model_validate(odd).operators.users == ["alice@example.org"]
    path = tmp_path / "policy.yaml"
    path.write_text("operators: {users: [alice@example.org]}\n")
    with pytest.raises(PolicyError, match=r"operators\.users: not a Slack user id"):
        load_policy(path)
    with pytest.raises(ValueError, match="an empty user id"):
        AccessPolicy.model_validate({"operators": {"users": [" "]}})


def test_only_a_slack_user_group_is_mentioned() -> None:
    said = escalation_summary(layer="quota", headline="h", permalink=None, user="U1",
                              usergroup="S0NLP")  # fmt: skip
    assert said.startswith("<!subteam^S0NLP> ")
    plain = escalation_summary(layer="quota", headline="h", permalink=None, user="U1",
                               usergroup="team-nlp")  # fmt: skip
    assert "subteam" not in plain
