"""Checks on model output before anyone sees it: does it agree with the engine, and does it
cite only what the report (or the tool results) contain?

A check that fails drops the text; it is never repaired. The checks are deliberately strict:
a wrongly dropped summary costs nothing (the report is still there), a wrong one misroutes an
incident.
"""

from __future__ import annotations

import re

from triage import Layer

# How each layer is named in prose. "scheduler" (the component whose event is often quoted as
# evidence) deliberately does not count as naming the scheduling layer.
LAYER_WORDS: dict[Layer, re.Pattern[str]] = {
    Layer.DRIVER: re.compile(r"\bdrivers?\b|container runtime|runtimeclass", re.I),
    Layer.DEVICE_PLUGIN: re.compile(r"\bdevice[- ]plugins?\b", re.I),
    Layer.SCHEDULING: re.compile(r"\bscheduling\b|\bplacement\b", re.I),
    Layer.QUOTA: re.compile(r"\bquotas?\b|\bqueues?\b|\bkueue\b|\bvolcano\b", re.I),
}
_NEGATION = re.compile(
    r"\b(not|no|isn't|aren't|wasn't|nothing|never|neither|nor|rather than|instead of|"
    r"without|ruled out|unrelated|side finding|does not|doesn't|is fine|are fine|healthy)\b"
    r"|n't\b",
    re.I,
)
_NOT_BLOCKED = re.compile(
    r"nothing (?:is )?block|not blocked|isn't blocked|is not blocked|no layer|is running|"
    r"not stuck|nothing stops|is not held|runs? normally",
    re.I,
)
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_CLAUSE = re.compile(
    r"(?<=[.!?])\s+|[,;:\u2014]|"
    r"\s(?:and|but|while|although|though|whereas|so|because)\s",
    re.I,
)
# Hyphenated or dotted words common in plain English that are not object names.
_ALLOWED = frozenset(
    {"device-plugin", "e.g", "i.e", "re-run", "rerun", "non-zero", "up-to-date", "nvidia.com/gpu",
     "kubectl", "follow-up", "built-in", "so-called", "step-by-step"}
)  # fmt: skip
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:-]*[A-Za-z0-9]|[0-9]")
_STRIP = ".,;:!?()[]{}\"'`*"


def sentences(text: str) -> list[str]:
    return [s for s in _SENTENCE.split(text.strip()) if s]


def layer_agrees(text: str, layer: Layer | None) -> bool:
    """True when `text` names `layer` (or says nothing blocks) and names no other as cause.

    Another layer may appear only in a clause that also negates it ("it is not a quota
    problem", "quota is fine"): a clause naming a second layer without a negation is treated
    as a claim about the cause.
    """
    if layer is None:
        if not _NOT_BLOCKED.search(text):
            return False
    elif not LAYER_WORDS[layer].search(text):
        return False
    for clause in _CLAUSE.split(text):
        others = [x for x in Layer if x != layer and LAYER_WORDS[x].search(clause)]
        if others and not _NEGATION.search(clause):
            return False
    return True


def candidates(text: str) -> list[str]:
    """Tokens that look like object names or quantities: they contain a digit, '-', '.', '/'."""
    out: list[str] = []
    for raw in _WORD.findall(text):
        word = raw.strip(_STRIP)
        if not word or word.lower() in _ALLOWED:
            continue
        if any(ch.isdigit() for ch in word) or any(ch in word for ch in "-./_:"):
            out.append(word)
    return out


def present(word: str, haystack: str) -> bool:
    """`word` occurs in `haystack` as a whole token (not as part of a longer name)."""
    pattern = r"(?<![A-Za-z0-9_-])" + re.escape(word) + r"(?![A-Za-z0-9_-])"
    return re.search(pattern, haystack, re.I) is not None


def unsupported(text: str, *, evidence: str) -> list[str]:
    """The names and numbers in `text` that `evidence` does not contain."""
    return [w for w in candidates(text) if not present(w, evidence)]
