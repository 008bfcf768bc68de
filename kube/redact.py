"""What a snapshot must not carry out of a cluster: secret values, environment values, tokens.

A snapshot is handed around (attached to a ticket, sent to a vendor), so `gpu-triage
snapshot` redacts as it collects, and the engine never needs what it removes:

- Secrets are not collected at all (the engine reads none); any `data`/`stringData` of one
  that reaches here anyway is dropped.
- Every container environment value (`env[].value`, in pods and in every pod template:
  Deployments, Jobs, Kueue Workloads...) becomes `<redacted>`; `valueFrom` references stay,
  they name a Secret or ConfigMap key, not its value.
- `kubectl.kubernetes.io/last-applied-configuration` is dropped: it is the whole object
  again, environment values included.
- Anything that looks like a token or a password in any other string (command lines,
  annotations, messages, logs): JWTs (service account tokens), bearer tokens, Slack, GitHub
  and AWS keys, `password=`/`token:` pairs, URLs with a password in them.

`Redactions` counts what was removed, for the snapshot's manifest.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

REDACTED = "<redacted>"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
_TOKEN = re.compile(
    r"eyJ[\w-]{8,}\.[\w-]{8,}\.[\w-]{8,}"  # a JWT: service account and OIDC tokens
    r"|(?i:bearer)\s+[\w.~+/=-]{12,}"
    r"|\bxox[abposr]-[\w-]{8,}|\bxapp-[\w-]{8,}"  # Slack
    r"|\bgh[pousr]_\w{20,}|\bglpat-[\w-]{16,}"  # GitHub, GitLab
    r"|\bAKIA[0-9A-Z]{16}\b"  # AWS access key id
    r"|\bsk-[A-Za-z0-9_-]{20,}"  # model provider API keys
    r"|(?<=://)[^/\s:@]+:[^/\s@]+(?=@)"  # user:password@ in a URL
)
# `password=x`, `"api_key": "x"`, `--token x`: the value after a secret-sounding key (a key
# followed by a space only as a command-line flag: "the token expired" keeps its words).
_KEY = r"(?:pass(?:word|wd)?|secret|token|api[_-]?key|access[_-]?key|credentials?)"
_PAIR = re.compile(
    rf"""(?i)((?:(?<![a-z0-9]){_KEY}["']?\s*[=:]\s*["']?|--{_KEY}\s+))([^\s"',;&]{{4,}})"""
)


# Every match of `_TOKEN` or `_PAIR` in an ASCII string holds one of these once the string is
# lowercased: a string with none is left as it is without running them. Most strings of a
# snapshot are names, labels, images and times, and the two substitutions on each took 70% of
# a snapshot's time. (Lowercased first, as a case-insensitive search of the pieces takes six
# times longer; a string with other letters, which fold in ways `str.lower` does not, always
# meets the patterns themselves.)
_MAYBE = re.compile(
    r"eyj|bearer|xox|xapp-|gh[pousr]_|glpat-|akia|sk-|://"
    r"|pass|secret|token|api[_-]?key|access[_-]?key|credential"
)


@dataclass
class Redactions:
    """What was taken out of a snapshot, by kind of value."""

    env_values: int = 0
    tokens: int = 0
    annotations: int = 0
    secrets: int = 0

    def add(self, other: Redactions) -> None:
        self.env_values += other.env_values
        self.tokens += other.tokens
        self.annotations += other.annotations
        self.secrets += other.secrets

    def as_dict(self) -> dict[str, int]:
        return {
            "envValues": self.env_values,
            "tokens": self.tokens,
            "lastAppliedAnnotations": self.annotations,
            "secretData": self.secrets,
        }


def scrub(text: str, counts: Redactions) -> str:
    """`text` with every token or password-like value replaced by `<redacted>`."""
    if not text or (text.isascii() and _MAYBE.search(text.lower()) is None):
        return text

    def token(_: re.Match[str]) -> str:
        counts.tokens += 1
        return REDACTED

    def pair(m: re.Match[str]) -> str:
        if m.group(2) == REDACTED:
            return m.group(0)
        counts.tokens += 1
        return m.group(1) + REDACTED

    return _PAIR.sub(pair, _TOKEN.sub(token, text))


def redact(obj: dict[str, Any], counts: Redactions) -> dict[str, Any]:
    """The object with secret values, environment values and tokens removed (in place)."""
    if obj.get("kind") == "Secret":
        for key in ("data", "stringData"):
            if obj.pop(key, None) is not None:
                counts.secrets += 1
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)  # bulk the engine never reads
        annotations = meta.get("annotations")
        if isinstance(annotations, dict) and annotations.pop(LAST_APPLIED, None) is not None:
            counts.annotations += 1
    _walk(obj, counts)
    return obj


def _walk(node: Any, counts: Redactions) -> None:
    stack = [node]
    while stack:
        cur = stack.pop()
        if isinstance(cur, dict):
            env = cur.get("env")
            if isinstance(env, list):
                for var in env:
                    if isinstance(var, dict) and "value" in var and var["value"] != REDACTED:
                        var["value"] = REDACTED
                        counts.env_values += 1
            for key, value in cur.items():
                if isinstance(value, str):
                    cleaned = scrub(value, counts)
                    if cleaned is not value:
                        cur[key] = cleaned
                elif isinstance(value, (dict, list)):
                    stack.append(value)
        elif isinstance(cur, list):
            for i, value in enumerate(cur):
                if isinstance(value, str):
                    cur[i] = scrub(value, counts)
                elif isinstance(value, (dict, list)):
                    stack.append(value)
