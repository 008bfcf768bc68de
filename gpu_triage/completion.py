"""Shell completion (bash, zsh, fish) through argcomplete, with the names a user means from
the current source: pods and workloads, namespaces and nodes from `--snapshot` (else the
kubeconfig context, read within a few seconds), and kubeconfig contexts.

`gpu-triage completion bash` prints the script to source (`source <(gpu-triage completion
bash)`); the shell then runs `gpu-triage` with `_ARGCOMPLETE` set, and `cli.main` calls
`complete` before anything else. argcomplete is imported only then: `--help` and every
command stay as fast as without completion.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

SHELLS = ("bash", "zsh", "fish")
PROGRAMS = ("gpu-triage", "kubectl-gpu_triage")
_LIVE_TIMEOUT = 5.0  # seconds a completion may spend reading a live cluster


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "completion",
        help="print a shell completion script: source <(gpu-triage completion bash)",
    )
    p.add_argument("shell", choices=SHELLS)
    p.set_defaults(handler=_script)


def _script(args: argparse.Namespace) -> int:
    from argcomplete.shell_integration import shellcode

    shell: str = args.shell
    sys.stdout.write(shellcode(list(PROGRAMS), shell=shell))
    return 0


def complete(parser: argparse.ArgumentParser) -> None:
    """Answer the shell's completion request (argcomplete exits the process when it does)."""
    import argcomplete

    for sub in _subparsers(parser):
        for action in sub._actions:
            completer = _COMPLETERS.get(
                (sub.prog.rsplit(" ", 1)[-1], action.dest)
            ) or _COMPLETERS.get(("*", action.dest))
            if completer is not None:
                action.completer = completer  # type: ignore[attr-defined]
    argcomplete.autocomplete(parser)


def _subparsers(parser: argparse.ArgumentParser) -> Iterable[argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in set(action.choices.values()):
                yield child
                yield from _subparsers(child)


def contexts(**_: Any) -> list[str]:
    """The kubeconfig's context names (read as YAML: no kubernetes client import)."""
    import yaml

    paths = os.environ.get("KUBECONFIG") or str(Path.home() / ".kube" / "config")
    names: list[str] = []
    for path in paths.split(os.pathsep):
        try:
            data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
        except (OSError, yaml.YAMLError):
            continue
        for ctx in data.get("contexts") or [] if isinstance(data, dict) else []:
            if isinstance(ctx, dict) and isinstance(ctx.get("name"), str):
                names.append(ctx["name"])
    return sorted(set(names))


def _names(kind: str, *, namespaced: bool) -> Callable[..., list[str]]:
    def complete_names(*, parsed_args: argparse.Namespace, **_: Any) -> list[str]:
        try:
            source = _source(parsed_args)
            namespace = getattr(parsed_args, "namespace", None)
            if isinstance(namespace, list):  # `-n` repeatable
                namespace = namespace[0] if namespace else None
            if namespaced:
                namespace = namespace or source.default_namespace or "default"
                objects = source.objects(kind, namespace=namespace)
            else:
                objects = source.objects(kind)
            return sorted({str((o.get("metadata") or {}).get("name", "")) for o in objects} - {""})
        except Exception:  # a completion never prints an error into the user's line
            return []

    return complete_names


def _workloads(*, parsed_args: argparse.Namespace, **kwargs: Any) -> list[str]:
    """Pods first, then `kind/name` of the workloads that own them (kubectl's short kinds)."""
    pods = _names("Pod", namespaced=True)(parsed_args=parsed_args, **kwargs)
    out = list(pods)
    for kind, short in (("Job", "job"), ("Deployment", "deploy"), ("StatefulSet", "sts")):
        out += [f"{short}/{n}" for n in _names(kind, namespaced=True)(parsed_args=parsed_args)]
    return out


def _source(args: argparse.Namespace) -> Any:
    from gpu_triage.sources import open_source

    return open_source(
        snapshot=getattr(args, "snapshot", None),
        kubeconfig=getattr(args, "kubeconfig", None),
        context=getattr(args, "context", None),
        timeout=_LIVE_TIMEOUT,
    )


# (command, argument dest) → completer; "*" for every command.
_COMPLETERS: dict[tuple[str, str], Callable[..., list[str]]] = {
    ("why-pending", "name"): _workloads,
    ("verify-node", "node"): _names("Node", namespaced=False),
    ("*", "namespace"): _names("Namespace", namespaced=False),
    ("*", "context"): contexts,
}
