"""`gpu-triage` command line. Subcommands live in `cmd_*` modules that each `register()` a parser.

Every failure a user can cause or meet (bad name, unknown pod, unreachable cluster, bad
snapshot, database down) ends as one line on stderr and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence
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
    "gpu_triage.cmd_bot",
    "gpu_triage.cmd_verify",
    "gpu_triage.cmd_ask",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=_prog(),
        description="Explain why a GPU pod is not running: driver, device plugin, scheduling, quota.",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks for internal errors")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module_name in COMMAND_MODULES:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as e:
            if e.name != module_name:
                raise
            continue  # that command family is not part of this build
        module.register(sub)
    return parser


def _prog() -> str:
    """`kubectl gpu-triage` when kubectl runs us as its plugin, else `gpu-triage`."""
    return "kubectl gpu-triage" if Path(sys.argv[0]).name.startswith("kubectl-") else "gpu-triage"


class _QuietKubernetesClient(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "kubernetes" not in record.pathname


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
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
