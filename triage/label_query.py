"""`-l` label selectors in kubectl's grammar (k8s.io/apimachinery/pkg/labels), parsed into the
`metav1.LabelSelector` shape the cluster view already matches (`label_selector_matches`).

    key=value   key==value   key!=value   key in (a,b)   key notin (a,b)   key   !key
    key>3   key<3  (whole numbers, as for node selector terms)

Requirements are separated by commas (outside parentheses) and all must hold. `!=` and
`notin` also match objects without the key, as in kubectl. Keys are qualified names
(`prefix/name`), values label values; anything else is one line naming what is wrong.
"""

from __future__ import annotations

import re

from triage.cluster.objects import Obj
from triage.names import InvalidNameError

_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_KEY = re.compile(rf"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?{_NAME}$")
_VALUE = re.compile(rf"^({_NAME})?$")
_SET = re.compile(r"^(?P<key>\S+)\s+(?P<op>in|notin)\s*\((?P<values>[^()]*)\)$")
_CMP = re.compile(r"^(?P<key>[^!=<>\s]+)\s*(?P<op>==|=|!=|>|<)\s*(?P<value>\S*)$")
_OPERATORS = {"in": "In", "notin": "NotIn", "!=": "NotIn", ">": "Gt", "<": "Lt"}


class SelectorError(InvalidNameError):
    """A label selector kubectl would refuse; the message says which part and why."""


def parse_label_selector(text: str) -> Obj:
    """`text` as a LabelSelector (`matchLabels` for equality, `matchExpressions` for the rest);
    an empty selector selects everything."""
    labels: dict[str, str] = {}
    expressions: list[Obj] = []
    for part in _split(text):
        term = part.strip()
        if not term:
            raise SelectorError(f"invalid selector {text!r}: an empty requirement")
        if m := _SET.match(term):
            values = [v.strip() for v in m["values"].split(",")]
            for v in values:
                _value(v, text)
            expressions.append(
                {"key": _key(m["key"], text), "operator": _OPERATORS[m["op"]], "values": values}
            )
        elif m := _CMP.match(term):
            key, op, value = _key(m["key"], text), m["op"], m["value"]
            if op in ("=", "=="):
                labels[key] = _value(value, text)
            elif op == "!=":
                expressions.append(
                    {"key": key, "operator": "NotIn", "values": [_value(value, text)]}
                )
            elif not value.isdigit():
                raise SelectorError(f"invalid selector {text!r}: {key}{op} needs a whole number")
            else:
                expressions.append({"key": key, "operator": _OPERATORS[op], "values": [value]})
        elif term.startswith("!"):
            expressions.append({"key": _key(term[1:].strip(), text), "operator": "DoesNotExist"})
        else:
            expressions.append({"key": _key(term, text), "operator": "Exists"})
    selector: Obj = {}
    if labels:
        selector["matchLabels"] = labels
    if expressions:
        selector["matchExpressions"] = expressions
    return selector


def _split(text: str) -> list[str]:
    """Comma-separated requirements; commas inside `( )` belong to a set."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                raise SelectorError(f"invalid selector {text!r}: unbalanced ')'")
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth:
        raise SelectorError(f"invalid selector {text!r}: unbalanced '('")
    parts.append(text[start:])
    return parts


def _key(key: str, text: str) -> str:
    if len(key) > 316 or not _KEY.match(key):
        raise SelectorError(
            f"invalid selector {text!r}: {key!r} is not a label key (prefix/name, letters, "
            "digits, '-', '_', '.')"
        )
    return key


def _value(value: str, text: str) -> str:
    if not _VALUE.match(value):
        raise SelectorError(
            f"invalid selector {text!r}: {value!r} is not a label value (at most 63 letters, "
            "digits, '-', '_', '.', starting and ending alphanumeric)"
        )
    return value
