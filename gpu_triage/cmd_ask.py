"""`gpu-triage ask "<question>"`: the FAQ, or a question answered with the triage checks.

Without GPU_TRIAGE_LLM_PROVIDER (the default) a deterministic matcher answers; the cluster is
opened only if the question needs it, so FAQ answers work with no kubeconfig at all. The checks
read through the same `TriageService` as every other command, with the shared cluster and
engine flags (`--snapshot`, `--context`, `--operator-namespace`, ...).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from gpu_triage.errors import EXIT_OK, EXIT_USAGE, UserError
from gpu_triage.output import structured
from gpu_triage.settings import settings_of
from gpu_triage.sources import add_cluster_args, source_from


def register(sub: Any) -> None:
    p = sub.add_parser(
        "ask",
        help="ask a question: the FAQ, or 'why is pod X pending in namespace Y'",
        description="Answer a free-form question. With GPU_TRIAGE_LLM_PROVIDER and "
        "GPU_TRIAGE_LLM_MODEL set, a chat model answers using the triage checks as tools; "
        "otherwise a deterministic matcher answers the FAQ and command-like questions.",
    )
    p.add_argument("question", nargs="+", help="the question (quote it)")
    p.add_argument("-n", "--namespace", help="namespace for questions that name only a pod")
    add_cluster_args(p)
    p.set_defaults(handler=ask)


def _as_command(args: argparse.Namespace) -> int | None:
    """A node question or a "what is stuck" question, answered as `verify-node` or `pending`
    answers it (same output, same exit code); None for any other question."""
    from assist.faq import match

    intent = match(" ".join(args.question))
    if intent.kind == "verify-node" and intent.name is not None:
        from gpu_triage.cmd_verify import verify_node_cmd

        return verify_node_cmd(argparse.Namespace(**{**vars(args), "node": intent.name,
                                                     "test_pod": False}))  # fmt: skip
    if intent.kind == "pending":
        from gpu_triage.cmd_pending import pending

        namespace = intent.namespace or args.namespace
        return pending(argparse.Namespace(**{**vars(args), "record": False, "exit_code": False,
            "namespace": [namespace] if namespace else None, "all_namespaces": False}))  # fmt: skip
    return None


def ask(args: argparse.Namespace) -> int:
    from assist.ask import Assistant
    from assist.checks import LocalOperator
    from assist.provider import ProviderError, model_from_env
    from gpu_triage.service import TriageService
    from triage import ClusterSource, load_playbook
    from triage.render import to_text

    settings = settings_of(args)
    try:
        model = model_from_env(settings.llm)
    except ProviderError as e:
        raise UserError(str(e)) from None
    if model is None:
        routed = _as_command(args)
        if routed is not None:
            return routed
    opened: list[ClusterSource] = []

    def source(cluster: str | None) -> ClusterSource:
        if not opened:  # the flags name the one cluster a terminal reads
            opened.append(source_from(args, settings=settings))
        return opened[0]

    service = TriageService(
        source_for=source,
        config=settings.engine_config(),
        playbook=load_playbook(settings.playbook),
    )
    answer = Assistant(backend=service, model=model).ask(
        " ".join(args.question), caller=LocalOperator(), default_namespace=args.namespace
    )
    if args.output in ("json", "yaml"):
        data: dict[str, Any] = {"type": answer.kind, "intent": answer.intent, "text": answer.text}
        if answer.report is not None:
            data["report"] = answer.report
        if answer.discarded:
            data["model_answer_discarded"] = answer.discarded
        print(structured(data, args.output, kind="Answer"))
        return EXIT_USAGE if answer.kind == "error" else EXIT_OK
    if answer.discarded:
        print(f"gpu-triage: the language model's answer was discarded ({answer.discarded}); "
              "this is the triage engine's", file=sys.stderr)  # fmt: skip
    if answer.kind == "error":
        raise UserError(answer.text.replace("\n", " "))
    print(to_text(answer.report) if answer.report is not None else answer.text)
    return EXIT_OK
