"""The CEL that DRA selectors are written in, as far as drivers and DeviceClasses use it.

A DeviceClass or a claim's request selects devices with CEL expressions over one `device`:
`device.driver`, `device.attributes["<domain>"].<name>` (string, int, bool or version),
`device.capacity["<domain>"].<name>` (a quantity). This module parses such an expression once
and evaluates it per device, with CEL's semantics for what drivers write: `&&`, `||`, `!`,
comparisons, `in` (a key of a map, an item of a list), `has()`, string `startsWith`,
`endsWith`, `contains`, `matches`, `size()`, and Kubernetes' `quantity()` and `semver()` with
`compareTo`, `isGreaterThan`, `isLessThan`, `isInteger`, `asInteger`, `major`, `minor`,
`patch`. Anything else (arithmetic, macros over lists, other functions) is `Unsupported`: the
caller says the selector was not evaluated instead of guessing. A device that lacks an
attribute the expression reads is a CEL runtime error, as in the scheduler: no match.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache, total_ordering
from typing import Any

from triage.cluster.quantities import quantity as parse_quantity


class Unsupported(Exception):
    """The expression uses CEL this module does not evaluate."""


class CelError(Exception):
    """A CEL runtime error (a missing key, a type mismatch): the device does not match."""


@total_ordering
@dataclass(frozen=True)
class Quantity:
    value: Decimal

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Quantity):
            raise CelError("no such overload: quantity compared with another type")
        return self.value < other.value


@total_ordering
@dataclass(frozen=True)
class Version:
    parts: tuple[int, int, int]
    pre: str = ""

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Version):
            raise CelError("no such overload: semver compared with another type")
        if self.parts != other.parts:
            return self.parts < other.parts
        # a pre-release sorts before its release
        return bool(self.pre) and (not other.pre or self.pre < other.pre)


_SEMVER = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?$")


def semver(text: Any) -> Version:
    m = _SEMVER.match(str(text))
    if not m:
        raise CelError(f"invalid semver {text!r}")
    return Version((int(m.group(1)), int(m.group(2)), int(m.group(3))), m.group(4) or "")


def quantity(text: Any) -> Quantity:
    try:
        return Quantity(parse_quantity(str(text)))
    except ValueError as e:
        raise CelError(str(e)) from e


# --- parsing ---------------------------------------------------------------------------------

_TOKEN = re.compile(
    r"""\s*(?:
      (?P<num>\d+(?:\.\d+)?(?:[eE][+-]?\d+)?u?)
    | (?P<str>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
    | (?P<op>&&|\|\||==|!=|<=|>=|[<>!().,\[\]?:+\-*/%{}])
    | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
    )""",
    re.VERBOSE,
)

Node = tuple[Any, ...]  # ("lit", v) ("name", n) ("get", obj, key) ("call", recv|None, fn, args) ...


def _tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise Unsupported(f"cannot read {text[pos : pos + 20]!r}")
        kind = m.lastgroup or ""
        out.append((kind, m.group(kind)))
        pos = m.end()
        while pos < len(text) and text[pos].isspace():
            pos += 1
    return out


class _Parser:
    def __init__(self, text: str) -> None:
        self.toks, self.i = _tokens(text), 0

    def peek(self) -> tuple[str, str]:
        return self.toks[self.i] if self.i < len(self.toks) else ("end", "")

    def take(self, value: str | None = None) -> tuple[str, str]:
        tok = self.peek()
        if tok[0] == "end" or (value is not None and tok[1] != value):
            raise Unsupported(f"expected {value or 'more'}, found {tok[1] or 'the end'}")
        self.i += 1
        return tok

    def parse(self) -> Node:
        node = self.or_()
        if self.peek()[0] != "end":
            raise Unsupported(f"unexpected {self.peek()[1]!r}")
        return node

    def or_(self) -> Node:
        node = self.and_()
        while self.peek() == ("op", "||"):
            self.take()
            node = ("or", node, self.and_())
        return node

    def and_(self) -> Node:
        node = self.relation()
        while self.peek() == ("op", "&&"):
            self.take()
            node = ("and", node, self.relation())
        return node

    def relation(self) -> Node:
        node = self.unary()
        tok = self.peek()
        if (tok[1] in ("==", "!=", "<", "<=", ">", ">=") and tok[0] == "op") or tok == (
            "name",
            "in",
        ):
            self.take()
            return ("cmp", tok[1], node, self.unary())
        return node

    def unary(self) -> Node:
        if self.peek() == ("op", "!"):
            self.take()
            return ("not", self.unary())
        if self.peek() == ("op", "-"):
            self.take()
            return ("neg", self.member())
        return self.member()

    def member(self) -> Node:
        node = self.primary()
        while True:
            tok = self.peek()
            if tok == ("op", "."):
                self.take()
                name = self.take()
                if name[0] != "name":
                    raise Unsupported(f"unexpected {name[1]!r} after '.'")
                if self.peek() == ("op", "("):
                    node = ("call", node, name[1], self.args())
                else:
                    node = ("get", node, ("lit", name[1]))
            elif tok == ("op", "["):
                self.take()
                key = self.or_()
                self.take("]")
                node = ("get", node, key)
            else:
                return node

    def args(self) -> list[Node]:
        self.take("(")
        out: list[Node] = []
        while self.peek() != ("op", ")"):
            out.append(self.or_())
            if self.peek() == ("op", ","):
                self.take()
        self.take(")")
        return out

    def primary(self) -> Node:
        kind, value = self.take()
        if kind == "num":
            if "." in value or "e" in value.lower():
                return ("lit", float(value))
            return ("lit", int(value.rstrip("u")))
        if kind == "str":
            return ("lit", bytes(value[1:-1], "utf-8").decode("unicode_escape"))
        if kind == "name":
            if value in ("true", "false"):
                return ("lit", value == "true")
            if value == "null":
                return ("lit", None)
            if self.peek() == ("op", "("):
                return ("call", None, value, self.args())
            return ("name", value)
        if value == "(":
            node = self.or_()
            self.take(")")
            return node
        if value == "[":
            items: list[Node] = []
            while self.peek() != ("op", "]"):
                items.append(self.or_())
                if self.peek() == ("op", ","):
                    self.take()
            self.take("]")
            return ("list", items)
        raise Unsupported(f"unexpected {value!r}")


@lru_cache(maxsize=1024)
def compile_selector(expression: str) -> Node:
    """The parsed expression; raises Unsupported for CEL this module does not read."""
    return _Parser(expression).parse()


# --- evaluation ------------------------------------------------------------------------------


_ORDER = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


def _cmp(op: str, a: Any, b: Any) -> bool:
    if op == "in":
        if isinstance(b, Mapping):
            return a in b
        if isinstance(b, list):
            return a in b
        raise CelError("no such overload: 'in' on a non-collection")
    if op in ("==", "!="):
        same = type(a) is type(b) or (
            isinstance(a, int | float) and isinstance(b, int | float)
            and not isinstance(a, bool) and not isinstance(b, bool)
        )  # fmt: skip
        if not same and a is not None and b is not None:
            raise CelError(f"no such overload: {type(a).__name__} {op} {type(b).__name__}")
        return bool(a == b) == (op == "==")
    try:
        return bool(_ORDER[op](a, b))
    except TypeError as e:
        raise CelError(f"no such overload: {type(a).__name__} {op} {type(b).__name__}") from e


def _compare(a: Any, b: Any) -> int:
    return -1 if a < b else 1 if a > b else 0


_METHODS: dict[str, Callable[..., Any]] = {
    "compareTo": _compare,
    "isGreaterThan": lambda a, b: a > b,
    "isLessThan": lambda a, b: a < b,
    "startsWith": lambda a, b: str(a).startswith(str(b)),
    "endsWith": lambda a, b: str(a).endswith(str(b)),
    "contains": lambda a, b: str(b) in str(a),
    "matches": lambda a, b: re.search(str(b), str(a)) is not None,
    "size": len,
    "isInteger": lambda q: q.value == q.value.to_integral_value(),
    "asInteger": lambda q: int(q.value),
    "major": lambda v: v.parts[0],
    "minor": lambda v: v.parts[1],
    "patch": lambda v: v.parts[2],
}
_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "quantity": quantity,
    "semver": semver,
    "size": len,
    "string": str,
    "int": int,
}


def evaluate(node: Node, env: Mapping[str, Any]) -> Any:
    kind = node[0]
    if kind == "lit":
        return node[1]
    if kind == "name":
        if node[1] not in env:
            raise Unsupported(f"unknown variable {node[1]}")
        return env[node[1]]
    if kind == "get":
        obj, key = evaluate(node[1], env), evaluate(node[2], env)
        if not isinstance(obj, Mapping):
            raise CelError(f"cannot select {key!r} from a {type(obj).__name__}")
        try:
            return obj[key]
        except KeyError:
            raise CelError(f"no such key: {key}") from None
    if kind in ("and", "or"):
        return _logic(kind, node[1], node[2], env)
    if kind == "not":
        value = evaluate(node[1], env)
        if not isinstance(value, bool):
            raise CelError("no such overload: !non-bool")
        return not value
    if kind == "neg":
        return -evaluate(node[1], env)
    if kind == "cmp":
        return _cmp(node[1], evaluate(node[2], env), evaluate(node[3], env))
    if kind == "list":
        return [evaluate(x, env) for x in node[1]]
    if kind == "call":
        return _call(node, env)
    raise Unsupported(kind)


def _logic(kind: str, left: Node, right: Node, env: Mapping[str, Any]) -> bool:
    """CEL's commutative && and ||: an error on one side is absorbed by a decisive other."""
    decisive = kind == "or"  # True decides ||, False decides &&
    error: CelError | None = None
    for side in (left, right):
        try:
            value = evaluate(side, env)
        except CelError as e:
            error = e
            continue
        if not isinstance(value, bool):
            error = CelError(f"no such overload: {kind} on a non-bool")
            continue
        if value is decisive:
            return decisive
    if error is not None:
        raise error
    return not decisive


def _call(node: Node, env: Mapping[str, Any]) -> Any:
    _, receiver, name, args = node
    if receiver is None and name == "has":
        if len(args) != 1 or args[0][0] != "get":
            raise Unsupported("has() takes a field selection")
        try:
            obj = evaluate(args[0][1], env)
        except CelError:
            return False
        key = evaluate(args[0][2], env)
        return isinstance(obj, Mapping) and key in obj
    values = [evaluate(a, env) for a in args]
    if receiver is None:
        fn = _FUNCTIONS.get(name)
        if fn is None:
            raise Unsupported(f"function {name}()")
        return fn(*values)
    fn = _METHODS.get(name)
    if fn is None:
        raise Unsupported(f"method .{name}()")
    try:
        return fn(evaluate(receiver, env), *values)
    except (AttributeError, TypeError) as e:
        raise CelError(f"no such overload: .{name}()") from e


class _Domains(dict[str, dict[str, Any]]):
    """A device's attributes (or capacity) by domain: a domain it has none of reads as empty,
    as in the scheduler (`has(device.attributes["x"].y)` is false, not an error)."""

    def __missing__(self, key: str) -> dict[str, Any]:
        return {}


def device_env(
    driver: str, attributes: Mapping[str, Any], capacity: Mapping[str, Any]
) -> dict[str, Any]:
    """The `device` a selector sees: attributes and capacity by domain (a bare name is the
    driver's), attributes typed as the slice says (`{"version": "1.2.3"}` is a semver),
    capacity as quantities (`{"value": "40Gi"}`, or the bare quantity of older shapes)."""
    attrs = _Domains()
    for key, raw in attributes.items():
        domain, _, name = key.rpartition("/")
        attrs.setdefault(domain or driver, {})[name] = _typed(raw)
    caps = _Domains()
    for key, raw in capacity.items():
        domain, _, name = key.rpartition("/")
        value = raw.get("value") if isinstance(raw, Mapping) else raw
        try:
            caps.setdefault(domain or driver, {})[name] = quantity(value)
        except CelError:
            continue
    return {"device": {"driver": driver, "attributes": attrs, "capacity": caps}}


def _typed(raw: Any) -> Any:
    if not isinstance(raw, Mapping) or len(raw) != 1:
        return raw
    kind, value = next(iter(raw.items()))
    if kind == "version":
        try:
            return semver(value)
        except CelError:
            return value
    return value


def matches(expression: str, env: Mapping[str, Any]) -> bool | None:
    """Whether the device `env` describes satisfies `expression`: None when the expression is
    CEL this module does not evaluate; a runtime error (a missing attribute) is no match."""
    try:
        value = evaluate(compile_selector(expression), env)
    except Unsupported:
        return None
    except CelError:
        return False
    except (ArithmeticError, ValueError, re.error):
        return False
    return value is True
