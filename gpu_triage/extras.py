"""The optional parts of the package, and the one line that says how to get a missing one.

`pipx install gpu-triage` installs the CLI alone: the engine, the kubernetes client and the
snapshot reader. The Slack bot and the incident store are extras (`pyproject.toml`):

- `incidents`: SQLAlchemy, Alembic, psycopg. `--record`, `incidents`, `incident`, `stats` and
  `db upgrade` use it: a CI job that records its triages needs the database, not Slack.
- `bot`: `incidents` plus slack-bolt, slack-sdk, waitress, prometheus-client and the rest of
  what `gpu-triage bot` runs on.

Which packages an extra brings is read from the installed distribution's own metadata, so
this module lists no package by hand; a command that needs an extra asks `require()` before
it starts, and an import that still fails later is mapped to its extra by `extra_for()`.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re

DIST = "gpu-triage"
# What each extra is for, in the error line.
PURPOSE = {"bot": "the Slack bot", "incidents": "the incident store"}
_EXTRA = re.compile(r"""extra\s*==\s*["']([^"']+)["']""")
_NAME = re.compile(r"[\s;<>=!~\[(]")


class MissingExtraError(Exception):
    """A command needs packages of an extra that is not installed. `str(e)` is one line."""

    def __init__(self, *, extra: str, what: str) -> None:
        self.extra = extra
        super().__init__(
            f"{what} needs {PURPOSE.get(extra, extra)}'s dependencies, which this installation "
            f"lacks: pip install 'gpu-triage[{extra}]' (with pipx: pipx install --force "
            f"'gpu-triage[{extra}]')"
        )


def _import_name(requirement: str) -> str:
    """`slack-bolt<2,>=1.20` -> `slack_bolt`; `psycopg[binary]>=3.2` -> `psycopg`."""
    return _NAME.split(requirement.strip(), maxsplit=1)[0].lower().replace("-", "_")


def modules_of(extra: str) -> list[str]:
    """Top-level import names of the packages `extra` adds (extras it names included).
    Empty when the distribution's metadata cannot be read (a source tree on sys.path)."""
    try:
        requires = importlib.metadata.requires(DIST) or []
    except importlib.metadata.PackageNotFoundError:
        return []
    found: list[str] = []
    wanted, seen = [extra], set()
    while wanted:
        name = wanted.pop()
        if name in seen:
            continue
        seen.add(name)
        for req in requires:
            m = _EXTRA.search(req)
            if m is None or m.group(1) != name:
                continue
            module = _import_name(req)
            if module == DIST.replace("-", "_"):  # gpu-triage[incidents]: another extra
                inner = re.search(r"\[([^\]]+)\]", req)
                wanted += [e.strip() for e in inner.group(1).split(",")] if inner else []
            elif module not in found:
                found.append(module)
    return found


def require(extra: str, *, what: str) -> None:
    """Raise MissingExtraError, naming `what` needs it, unless `extra`'s packages import."""
    for module in modules_of(extra):
        if importlib.util.find_spec(module) is None:
            raise MissingExtraError(extra=extra, what=what)


def extra_for(module: str) -> str | None:
    """The smallest extra that provides the top-level import `module`, if one does."""
    top = module.split(".")[0]
    for extra in ("incidents", "bot"):
        if top in modules_of(extra):
            return extra
    return None
