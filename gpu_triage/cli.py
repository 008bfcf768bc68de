"""`gpu-triage` command line. Subcommands live in `cmd_*` modules that each `register()` a parser.

Every failure a user can cause or meet (bad name, unknown pod, unreachable cluster, bad
snapshot, database down) ends as one line on stderr and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from gpu_triage.errors import (
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    USER_ERRORS,
    exit_status,
)
from gpu_triage.extras import MissingExtraError, extra_for, require
from gpu_triage.logs import configure

COMMAND_MODULES = (
    "gpu_triage.cmd_triage",
    "gpu_triage.cmd_pending",
    "gpu_triage.cmd_snapshot",
    "gpu_triage.cmd_incidents",
    "gpu_triage.cmd_lifecycle",
    "gpu_triage.cmd_bot",
    "gpu_triage.cmd_verify",
    "gpu_triage.cmd_ask",
    "gpu_triage.completion",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=_prog(),
        description="Explain why a GPU pod is not running: driver, device plugin, scheduling, quota.",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks for internal errors")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module_name in COMMAND_MODULES:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as e:
            if e.name != module_name:
                raise
            continue  # that command family is not part of this build
        module.register(sub)
    _global_flags(sub)
    return parser


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("gpu-triage")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown"


def _global_flags(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`--debug` after the subcommand too (kubectl's flags go anywhere): every subcommand,
    nested ones included, takes it without a default of its own, so one given before the
    subcommand is not undone."""
    for parser in set(sub.choices.values()):
        parser.add_argument(
            "--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS
        )
        for action in parser._subparsers._group_actions if parser._subparsers else ():
            if isinstance(action, argparse._SubParsersAction):
                _global_flags(action)


# Flags a command takes that may also come before its name (`gpu-triage -n ns why-pending x`,
# `gpu-triage --context prod pending`), with whether each takes a value.
_HOISTED = {
    "-n": True, "--namespace": True, "--context": True, "--cluster": True,
    "--kubeconfig": True, "--snapshot": True, "-o": True, "--output": True, "--format": True,
    "--timeout": True, "--chunk-size": True, "--playbook": True, "--operator-namespace": True,
    "--database-url": True, "-A": False, "--all-namespaces": False, "--no-headers": False,
}  # fmt: skip


def hoist(argv: Sequence[str], commands: Iterable[str]) -> list[str]:
    """`argv` with the command flags given before the subcommand moved after it, where its
    parser reads them (argparse reads a flag only in the parser it belongs to)."""
    names, args = set(commands), list(argv)
    main: list[str] = []  # what the main parser reads: --debug, --version, -h
    moved: list[str] = []
    i = 0
    while i < len(args):
        token = args[i]
        flag = token.split("=", 1)[0]
        if token in names:
            return [*main, token, *moved, *args[i + 1 :]]
        if flag in _HOISTED:
            moved.append(token)
            if _HOISTED[flag] and "=" not in token and i + 1 < len(args):
                moved.append(args[i + 1])
                i += 1
        elif token.startswith("-"):
            main.append(token)
        else:
            break  # not a command: argparse says so
        i += 1
    return args


def _commands(parser: argparse.ArgumentParser) -> list[str]:
    sub = parser._subparsers
    actions = sub._group_actions if sub is not None else []
    return [n for a in actions if isinstance(a, argparse._SubParsersAction) for n in a.choices]


def _prog() -> str:
    """`kubectl gpu-triage` when kubectl runs us as its plugin, else `gpu-triage`."""
    return "kubectl gpu-triage" if Path(sys.argv[0]).name.startswith("kubectl-") else "gpu-triage"


class _QuietKubernetesClient(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "kubernetes" not in record.pathname


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    if "_ARGCOMPLETE" in os.environ:  # a shell asking for completions (`gpu-triage completion`)
        from gpu_triage.completion import complete

        complete(parser)
    given = sys.argv[1:] if argv is None else list(argv)
    args = parser.parse_args(hoist(given, _commands(parser)))
    try:
        # The kubernetes client logs auth failures we report as our one line.
        configure(command=args.command, debug=args.debug, quiet=_QuietKubernetesClient())
        if getattr(args, "needs", None):  # an extra the command runs on (gpu_triage.extras)
            require(args.needs, what=f"`{parser.prog} {args.command}`")
        code: int = args.handler(args)
        return code
    except USER_ERRORS as e:
        print(f"gpu-triage: error: {e}", file=sys.stderr)
        return exit_status(e)
    except ModuleNotFoundError as e:
        extra = extra_for(e.name or "")
        if extra is None or args.debug:
            raise
        missing = MissingExtraError(extra=extra, what=f"`{parser.prog} {args.command}`")
        print(f"gpu-triage: error: {missing}", file=sys.stderr)
        return exit_status(missing)
    except BrokenPipeError:  # output piped into `head` and closed early
        sys.stderr.close()
        return EXIT_OK
    except KeyboardInterrupt:
        print("gpu-triage: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as e:  # last resort: a bug must still not print a traceback to users
        if args.debug:
            raise
        print(
            f"gpu-triage: internal error: {type(e).__name__}: {e} (rerun with --debug)",
            file=sys.stderr,
        )
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
