"""Pure parts of the bot: mrkdwn escaping, Block Kit limits, policy, settings, parsing."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from bot.core.commands import (
    ListClusters,
    ListIncidents,
    Pending,
    ShowStats,
    UsageError,
    VerifyNode,
    WhyPending,
)
from bot.core.policy import AccessPolicy, PolicyError, UsergroupCache
from bot.core.refs import ButtonRef
from bot.core.registry import parse
from bot.core.work import Done, Flights, WorkerPool
from bot.slack.app import parse_mention
from bot.slack.blocks import MAX_BLOCKS, report_blocks
from bot.slack.ids import load_policy
from bot.slack.mrkdwn import escape, truncate
from gpu_triage.settings import SettingsError, load_settings
from triage import (
    Audience,
    Finding,
    InvalidNameError,
    Layer,
    OwnerRoute,
    PodRef,
    Status,
    TriageReport,
)

WJ = "\u2060"


@pytest.mark.parametrize(
    ("raw", "must_not_contain"),
    [
        ("<!channel>", "<!channel>"),
        ("<!here|here>", "<!here"),
        ("<@U123ABC>", "<@U"),
        ("<http://evil.example|click here>", "<http"),
        ("<#C123|general>", "<#C"),
        ("<!subteam^S123>", "<!subteam"),
        ("a & b", " & "),
    ],
)
def test_escape_defuses_control_sequences(raw: str, must_not_contain: str) -> None:
    out = escape(raw)
    assert must_not_contain not in out
    assert "<" not in out and ">" not in out


def test_escape_keeps_the_text_readable() -> None:
    assert escape("<!channel> & *x*").replace(WJ, "") == "&lt;!channel&gt; &amp; *x*"


def test_escape_neutralises_formatting_and_broadcast_words() -> None:
    out = escape("*bold* _it_ ~strike~ `code` @channel @here")
    for pair in ("*bold*", "_it_", "~strike~", "`code`", "@channel", "@here"):
        assert pair not in out
    assert out.replace(WJ, "") == "*bold* _it_ ~strike~ `code` @channel @here"


def test_truncate_never_splits_an_entity() -> None:
    assert truncate("abc&amp;def", limit=6) == "abc…"
    assert truncate("short", limit=10) == "short"


def _report(evidence: list[str], *, detail: list[str] | None = None) -> TriageReport:
    findings = [
        Finding(layer=layer, status=Status.OK, summary="ok")
        for layer in (Layer.DRIVER, Layer.DEVICE_PLUGIN, Layer.QUOTA)
    ]
    findings.insert(
        2,
        Finding(
            layer=Layer.SCHEDULING,
            status=Status.FAIL,
            summary="full",
            evidence=evidence,
            detail=detail or [],
        ),
    )
    return TriageReport(
        pod=PodRef(namespace="ns", name="p"),
        failing_layer=Layer.SCHEDULING,
        headline="all nodes full <!channel>",
        findings=findings,
        owner=OwnerRoute(team="t", channel="C0123ABCD", usergroup="S0123ABC"),
        remediation=[f"step {i}" for i in range(20)],
    )


def test_long_evidence_is_truncated_with_a_count_within_slack_limits() -> None:
    report = _report([f"line {i} " + "x" * 2000 for i in range(500)])
    blocks = report_blocks(report, audience=Audience.OPERATOR, ref=ButtonRef(None, "ns", "p", "1"))
    assert len(blocks) <= MAX_BLOCKS
    text = json.dumps(blocks, ensure_ascii=False)
    assert "… and 492 more" in text
    assert "… and 14 more" in text  # remediation steps
    for b in blocks:
        if b["type"] == "section":
            assert len(b["text"]["text"]) <= 3000
        if b["type"] == "header":
            assert len(b["text"]["text"]) <= 150


def test_owner_route_links_channel_and_mentions_usergroup() -> None:
    blocks = report_blocks(_report(["e"]), audience=Audience.TENANT, ref=ButtonRef(None, "ns", "p"))
    text = json.dumps(blocks)
    assert "<#C0123ABCD>" in text and "<!subteam^S0123ABC>" in text
    assert "<!channel>" not in text


def test_detail_only_for_operators() -> None:
    report = _report(["mine"], detail=["other-ns/their-pod"])
    tenant = json.dumps(
        report_blocks(report, audience=Audience.TENANT, ref=ButtonRef(None, "n", "p"))
    )
    ops = json.dumps(
        report_blocks(report, audience=Audience.OPERATOR, ref=ButtonRef(None, "n", "p"))
    )
    assert "their-pod" not in tenant and "their-pod" in ops


def test_button_ref_round_trips() -> None:
    ref = ButtonRef(cluster="c", namespace="ns", name="p", incident_id="7")
    assert ButtonRef.from_value(ref.to_value()) == ref
    with pytest.raises(ValueError):
        ButtonRef.from_value("[]")


def test_parse() -> None:
    assert parse("why-pending p -n ns --cluster c") == WhyPending("p", "ns", "c")
    assert parse("why-pending p --namespace=ns") == WhyPending("p", "ns", None)
    assert parse_mention("<@UBOT> why-pending p") == WhyPending("p", None, None)
    with pytest.raises(UsageError):
        parse("why-pending p extra")
    # kubeconfig context names as the clouds write them are cluster names
    gke, eks = "gke_proj-1_us-central1_prod", "arn:aws:eks:us-east-1:123456789012:cluster/prod"
    assert parse(f"pending --cluster {gke}") == Pending(cluster=gke)
    assert parse(f"incidents --cluster={eks}") == ListIncidents(cluster=eks)
    assert parse("stats --cluster lab") == ShowStats(cluster="lab")
    assert parse("verify-node n1 --cluster lab") == VerifyNode("n1", "lab")
    assert parse("clusters") == ListClusters()
    for bad in ("pending --cluster '<!channel>'", "why-pending p --cluster", "clusters x"):
        with pytest.raises((UsageError, InvalidNameError)):
            parse(bad)


def test_flights_keep_a_slow_lane_to_its_share_of_the_workers() -> None:
    pool = WorkerPool(workers=2, max_pending=8)
    flights, gate = Flights(pool, per_lane=1, limit=4), threading.Event()
    done: list[str] = []
    lock = threading.Lock()

    def deliver(what: str) -> Callable[[Done[str]], None]:
        def record(d: Done[str]) -> None:
            with lock:
                done.append(what if d.error is None else f"{what}: {type(d.error).__name__}")

        return record

    try:
        for i in range(3):  # the slow lane: one runs, two wait without a thread
            flights.join(("slow", i), lambda: gate.wait(5) and "ok", deliver(f"slow-{i}"),
                         lane="slow")  # fmt: skip
        started = threading.Event()
        flights.join("fast", lambda: started.set() or "ok", deliver("fast"), lane="fast")
        assert started.wait(5)  # on the second worker while slow-0 holds the first
        deadline = time.monotonic() + 5
        while len(done) < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert done == ["fast"]
        flights.join("fourth", lambda: "ok", deliver("4th"), lane="slow")
        flights.join("extra", lambda: "ok", deliver("extra"), lane="fast")  # over the limit
        assert done == ["fast", "extra: Busy"]
        gate.set()
        while len(done) < 6 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert done[2:] == ["slow-0", "slow-1", "slow-2", "4th"]  # the lane's turns, in order
        assert len(flights) == 0
    finally:
        gate.set()
        pool.shutdown()


def test_policy_resolution() -> None:
    policy = AccessPolicy.model_validate(
        {
            "operators": {"usergroups": ["SOPS"]},
            "tenants": [
                {"name": "a", "namespaces": ["a1", "a2"], "default_namespace": "a2",
                 "channels": ["CA"]},
                {"name": "b", "namespaces": ["b"], "users": ["UB"]},
            ],
            "defaults": {"channels": {"COPS": "kube-system"}},
        }
    )  # fmt: skip
    groups = {"UOP": ["SOPS"]}
    v = policy.viewer(user="UX", channel="CA", groups_of=lambda u: groups.get(u, []))
    assert not v.operator and v.may_see("a1") and not v.may_see("b")
    assert v.default_namespace == "a2"
    v = policy.viewer(user="UB", channel="CZ", groups_of=lambda u: groups.get(u, []))
    assert v.namespaces == {"b"} and v.default_namespace == "b"
    v = policy.viewer(user="UOP", channel="COPS", groups_of=lambda u: groups.get(u, []))
    assert v.operator and v.may_see("anything") and v.default_namespace == "kube-system"


def test_policy_grants_and_defaults_per_cluster() -> None:
    policy = AccessPolicy.model_validate(
        {
            "tenants": [
                {"name": "a", "namespaces": ["ml"], "users": ["UA"], "clusters": ["east"]},
                {"name": "b", "namespaces": ["ml"], "users": ["UB"], "clusters": ["west"],
                 "channels": ["CB"]},
                {"name": "c", "namespaces": ["shared"], "users": ["UA", "UB"]},
            ],
            "defaults": {"clusters": {"CB": "west"}},
        }
    )  # fmt: skip
    none: Callable[[str], list[str]] = lambda u: []  # noqa: E731
    assert policy.viewer(user="UA", channel=None, groups_of=none, cluster="east").may_see("ml")
    assert not policy.viewer(user="UA", channel=None, groups_of=none, cluster="west").may_see("ml")
    unnamed = policy.viewer(user="UA", channel=None, groups_of=none)
    assert unnamed.namespaces == {"shared"}  # unnamed cluster: only the grants for every one
    assert policy.cluster_for("CB") == "west" and policy.cluster_for("CX") is None
    assert policy.audience("CB", cluster="west").namespaces == {"ml"}
    assert not policy.audience("CB", cluster="east").namespaces
    with pytest.raises(ValueError, match="cluster name"):
        AccessPolicy.model_validate({"defaults": {"clusters": {"CB": "no spaces"}}})


def test_policy_errors_name_the_field(tmp_path: Path) -> None:
    bad = tmp_path / "p.yaml"
    bad.write_text("tenants:\n  - name: a\n    namespaces: [Bad_NS]\n")
    with pytest.raises(PolicyError, match=r"tenants\.0\.namespaces: .*invalid namespace"):
        load_policy(bad)
    bad.write_text("operators: {users: [nope]}\n")
    with pytest.raises(PolicyError, match="not a Slack user id"):
        load_policy(bad)
    with pytest.raises(PolicyError, match="cannot read"):
        load_policy(tmp_path / "missing.yaml")
    example = Path(__file__).parents[2] / "access-policy.example.yaml"
    assert load_policy(example).tenants


def test_usergroup_cache_expires_and_fails_closed() -> None:
    now = [0.0]
    calls: list[str] = []

    def fetch(group: str) -> list[str]:
        calls.append(group)
        if len(calls) == 3:
            raise RuntimeError("slack down")
        return ["U1"]

    cache = UsergroupCache(groups=["S1"], fetch=fetch, ttl=60, clock=lambda: now[0])
    assert cache.groups_of("U1") == ["S1"] and cache.groups_of("U1") == ["S1"]
    assert len(calls) == 1
    now[0] = 61
    assert cache.groups_of("U1") == ["S1"] and len(calls) == 2
    now[0] = 130
    assert cache.groups_of("U1") == []  # lookup failed: no access


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"SLACK_BOT_TOKEN": "xoxb-1"}, "SLACK_SIGNING_SECRET is not set"),
        ({"SLACK_SIGNING_SECRET": "s"}, "SLACK_BOT_TOKEN is not set"),
        ({"SLACK_SIGNING_SECRET": "changeme", "SLACK_BOT_TOKEN": "xoxb-1"},
         "SLACK_SIGNING_SECRET is malformed: is empty or a placeholder"),
        ({"SLACK_SIGNING_SECRET": "s", "SLACK_BOT_TOKEN": "xoxp-1"},
         "SLACK_BOT_TOKEN is malformed: must be a bot token"),
        ({"SLACK_SIGNING_SECRET": "s", "SLACK_BOT_TOKEN": "xoxb-1", "SLACK_APP_TOKEN": "x"},
         "SLACK_APP_TOKEN is malformed"),
        ({"SLACK_SIGNING_SECRET": "s", "SLACK_BOT_TOKEN": "xoxb-1", "PORT": "http"},
         "PORT is malformed"),
        ({"SLACK_SIGNING_SECRET": "s", "SLACK_BOT_TOKEN": "xoxb-1", "SLACK_API_URL": "nope"},
         "SLACK_API_URL is malformed"),
    ],
)  # fmt: skip
def test_settings_errors_name_the_variable(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], message: str
) -> None:
    for var in (
        "SLACK_SIGNING_SECRET",
        "SLACK_BOT_TOKEN",
        "SLACK_APP_TOKEN",
        "PORT",
        "SLACK_API_URL",
    ):
        monkeypatch.delenv(var, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(SettingsError) as e:
        load_settings()
    assert message in str(e.value)
    assert "\n" not in str(e.value)


def test_settings_hide_secrets_and_pick_socket_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLACK_SIGNING_SECRET", "topsecret")
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-hidden")
    monkeypatch.setenv("SLACK_APP_TOKEN", "xapp-1")
    monkeypatch.setenv("SLACK_API_URL", "http://127.0.0.1:9/api")
    s = load_settings(port=4000)
    assert s.port == 4000 and s.socket_mode
    assert s.api_base_url == "http://127.0.0.1:9/api/"
    assert "topsecret" not in repr(s) and "xoxb-hidden" not in repr(s)
