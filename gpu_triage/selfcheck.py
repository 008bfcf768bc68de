"""`python -m gpu_triage.selfcheck`: does this installation hold everything `gpu-triage bot`
loads at start? The image build runs it from outside the source tree, so only the installed
wheel can answer; a test runs it against the wheel the project builds.

Why `gpu-triage --help` is not enough: the bot imports most of its modules inside `run()`, so
that the other commands start quickly, and `--help` loads almost none of them. A package left
out of what the image installs (it once lacked `assist/`) then showed only when a pod started
and crashed. This check follows the import statements themselves, at module level and inside
functions, from the entry point and every command module through the project's own modules,
then imports each module it found and loads the data files the bot reads at start (the
bundled playbook, the migration scripts). Nothing is listed by hand.

Imports that may be missing on purpose are not followed: those under `if TYPE_CHECKING:`,
those inside a `try` that catches ImportError, and the packages of the extras the bot does
not run on (`gpu-triage[llm]`). The bot's own extra, `gpu-triage[bot]`, is required: the
image installs it, and a CLI-only install (`pipx install gpu-triage`) is told it lacks it.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import importlib.metadata
import importlib.util
import io
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field

from gpu_triage.extras import modules_of

DIST = "gpu-triage"
ENTRY = "gpu_triage.cli"
_IMPORT_ERRORS = re.compile(r"\b(?:ImportError|ModuleNotFoundError)\b")


@dataclass
class Walk:
    """What the import walk found: our modules (and who imports each), and problems."""

    ours: set[str]
    optional: set[str]
    found: dict[str, str] = field(default_factory=dict)  # module -> a module importing it
    problems: list[str] = field(default_factory=list)


def first_party() -> set[str]:
    """Top-level packages this distribution installed (its top_level.txt, else its files)."""
    dist = importlib.metadata.distribution(DIST)
    listed = (dist.read_text("top_level.txt") or "").split()
    if listed:
        return set(listed)
    files = dist.files or []
    tops = {str(f).split("/", 1)[0] for f in files if str(f).endswith(".py")}
    return {t.removesuffix(".py") for t in tops if not t.endswith((".dist-info", ".data"))}


def optional_packages() -> set[str]:
    """Import names of requirements that only an extra the bot does not run on pulls in (e.g.
    langchain_core, `gpu-triage[llm]`). The bot's own extra (`gpu-triage[bot]`, with the
    incident store) is what the image installs: its packages must be there."""
    extras = importlib.metadata.metadata(DIST).get_all("Provides-Extra") or []
    required = set(modules_of("bot"))
    return {m for e in extras if e not in ("bot", "dev") for m in modules_of(e)} - required


def _imports(tree: ast.AST, module: str, is_package: bool) -> Iterator[tuple[str, list[str]]]:
    """(module, names) of each import that runs, skipping TYPE_CHECKING blocks and imports
    guarded by `except ImportError`."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.Try) and any(
            h.type is not None and _IMPORT_ERRORS.search(ast.unparse(h.type)) for h in node.handlers
        ):
            stack.extend([*node.handlers, *node.orelse, *node.finalbody])
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, []
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module if is_package else module.rpartition(".")[0]
                for _ in range(node.level - 1):
                    package = package.rpartition(".")[0]
                base = f"{package}.{base}".strip(".")
            yield base, [a.name for a in node.names]
        stack.extend(ast.iter_child_nodes(node))


def _spec(name: str) -> importlib.machinery.ModuleSpec | None:
    try:
        return importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None


def walk(roots: list[str]) -> Walk:
    """Follow the imports of `roots` through the distribution's own packages."""
    result = Walk(ours=first_party(), optional=optional_packages())
    queue = [(root, "the entry point") for root in roots]
    while queue:
        name, by = queue.pop()
        if name in result.found:
            continue
        spec = _spec(name)
        if spec is None or spec.origin is None:
            result.problems.append(f"{name} (imported by {by}) is not installed")
            continue
        result.found[name] = by
        if not spec.origin.endswith(".py"):
            continue
        with open(spec.origin, encoding="utf-8") as f:
            tree = ast.parse(f.read(), filename=spec.origin)
        is_package = spec.submodule_search_locations is not None
        for target, names in _imports(tree, name, is_package):
            for module in _targets(target, names, result, by=name):
                queue.append((module, name))
    return result


def _targets(base: str, names: list[str], result: Walk, *, by: str) -> list[str]:
    """Our modules an import statement names (`from pkg import mod` names `pkg.mod`); a
    missing third-party package is a problem unless an extra provides it."""
    top = base.split(".")[0]
    if not top or top in sys.stdlib_module_names:
        return []
    if top not in result.ours:
        if top not in result.optional and _spec(top) is None:
            result.problems.append(f"{top} (imported by {by}) is not installed")
        return []
    found = [base]
    spec = _spec(base)
    if spec is not None and spec.submodule_search_locations is not None:
        found += [f"{base}.{n}" for n in names if n != "*" and _spec(f"{base}.{n}") is not None]
    return found


def check() -> list[str]:
    """Every problem found, as one line each (empty: the installation is complete)."""
    from gpu_triage import cli

    result = walk([ENTRY, *cli.COMMAND_MODULES])
    for module in sorted(result.found):
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as e:
            if (e.name or "").split(".")[0] not in result.optional:
                result.problems.append(f"{module} cannot be imported: {e}")
        except Exception as e:
            result.problems.append(f"{module} cannot be imported: {type(e).__name__}: {e}")
    result.problems += _data_files()
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        cli.main(["bot", "--help"])
    if "usage:" not in out.getvalue():
        result.problems.append("`gpu-triage bot --help` printed no usage")
    return result.problems


def _data_files() -> list[str]:
    from incidents.migrate import head_revision
    from triage import load_playbook

    problems = []
    try:
        load_playbook(None)
    except Exception as e:
        problems.append(f"the bundled playbook does not load: {e}")
    try:
        if head_revision() is None:
            problems.append("the migration scripts are missing")
    except Exception as e:
        problems.append(f"the migration scripts do not load: {e}")
    return problems


def main() -> int:
    problems = check()
    for problem in problems:
        print(f"selfcheck: error: {problem}", file=sys.stderr)
    if problems:
        return 1
    print(f"selfcheck: {DIST} is complete: every module `gpu-triage bot` imports is installed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
