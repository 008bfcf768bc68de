"""What a snapshot must not carry out of a cluster, and what it must keep to be judged."""

from __future__ import annotations

from kube.redact import REDACTED, Redactions, redact, scrub


def test_secret_data_env_values_and_last_applied_go_references_and_words_stay() -> None:
    counts = Redactions()
    secret = redact({"kind": "Secret", "metadata": {"name": "db"},
                     "data": {"password": "aHVudGVyMg=="}, "stringData": {"url": "x"}}, counts)  # fmt: skip
    assert "data" not in secret and "stringData" not in secret
    job = redact({
        "kind": "Job",
        "metadata": {"name": "train", "annotations": {
            "kubectl.kubernetes.io/last-applied-configuration": '{"env": "hunter2"}',
            "team": "vision"}},
        "spec": {"template": {"spec": {"containers": [{
            "name": "t", "image": "pytorch:2",
            "env": [{"name": "WANDB_API_KEY", "value": "abc123secret"},
                    {"name": "DB", "valueFrom": {"secretKeyRef": {"name": "db", "key": "url"}}}],
            "command": ["torchrun", "--nproc-per-node", "8", "train.py"],
            "args": ["--db=postgresql://trainer:hunter2@db:5432/x"],
            "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}}},
    }, counts)  # fmt: skip
    [ctr] = job["spec"]["template"]["spec"]["containers"]
    assert ctr["env"][0]["value"] == REDACTED and "value" not in ctr["env"][1]
    assert ctr["env"][1]["valueFrom"]["secretKeyRef"] == {"name": "db", "key": "url"}
    assert ctr["command"] == ["torchrun", "--nproc-per-node", "8", "train.py"]
    assert ctr["args"] == [f"--db=postgresql://{REDACTED}@db:5432/x"]
    assert ctr["resources"]["limits"]["nvidia.com/gpu"] == "8"
    assert job["metadata"]["annotations"] == {"team": "vision"}
    assert counts.as_dict() == {"envValues": 1, "tokens": 1, "lastAppliedAnnotations": 1,
                                "secretData": 2}  # fmt: skip


def test_tokens_are_redacted_and_ordinary_words_are_not() -> None:
    counts = Redactions()
    kept = ["the token expired", "secret gpu-triage not found", "requests.nvidia.com/gpu=8",
            "secretName: tls", "0/8 nodes are available: 8 Insufficient nvidia.com/gpu."]  # fmt: skip
    assert [scrub(s, counts) for s in kept] == kept and counts.tokens == 0
    for text in ("Authorization: Bearer abcdefghijklmnop1234", "SLACK_BOT_TOKEN=xoxb-1234-5678-abcdefgh",
                 "DB_PASSWORD=hunter22", "--token abcdefgh", "AKIAABCDEFGHIJKLMNOP",
                 "eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJrdWJlcm5ldGVzIn0.c2lnbmF0dXJlLXNpZ25hdHVyZQ"):  # fmt: skip
        assert REDACTED in scrub(text, counts), text
    assert counts.tokens == 6


def test_the_quick_look_skips_only_strings_the_patterns_cannot_match() -> None:
    """`scrub` first looks for any piece a token or a secret pair needs; what it answers must
    be what running both patterns on every string answers, on every string of the fixtures
    and on random strings made of the pieces, of their neighbours in case, and of noise."""
    import random
    from pathlib import Path

    from kube.redact import _PAIR, _TOKEN
    from triage.cluster.snapshot import load_objects

    def reference(text: str) -> str:
        return _PAIR.sub(lambda m: m.group(0) if m.group(2) == REDACTED
                         else m.group(1) + REDACTED, _TOKEN.sub(REDACTED, text))  # fmt: skip

    strings: list[str] = []

    def collect(node: object) -> None:
        if isinstance(node, str):
            strings.append(node)
        elif isinstance(node, dict):
            for k, v in node.items():
                strings.append(str(k))
                collect(v)
        elif isinstance(node, list):
            for v in node:
                collect(v)

    fixtures = Path(__file__).parents[1] / "fixtures"
    for path in sorted(fixtures.glob("*.yaml")):
        if path.name != "expected.yaml":  # the fixtures' answers, not a cluster
            collect(load_objects(path))
    pieces = ["eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJrdWJl.c2lnbmF0dXJl", ".", "bearer ", "BEARER\t", "xoxb-",
              "xapp-1-", "ghp_", "gho_", "glpat-", "AKIA", "akia", "sk-", "://", "user:pw@",
              "Password", "PASSWD", "ſecret", "Token", "api_key", "API-KEY", "apikey",
              "access_key", "Credentials", "=", ": ", "\"", "'", "--", " ", "abcdefghij",
              "0123456789ABCDEFGHIJ", "nvidia.com/gpu", "ĸ", "K", "İ", "\n", "AKIAABCDEFGHIJKLMNOP",
              "credentials=", "ſecret: ", "--token ", "API-KEY='", "PASS=", "access-key:",
              "postgres://admin:hunter22@"]  # fmt: skip
    rnd = random.Random(7)
    strings += ["".join(rnd.choice(pieces) for _ in range(rnd.randrange(1, 9)))
                for _ in range(8_000)]  # fmt: skip
    assert len(strings) > 50_000
    changed = 0
    for text in strings:
        want = reference(text)
        assert scrub(text, Redactions()) == want, text
        changed += want != text
    assert changed > 500  # the random strings do hold secrets
