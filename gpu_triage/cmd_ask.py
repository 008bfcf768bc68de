"""`gpu-triage ask "<question>"`: the FAQ, or a question answered with the triage checks.

Without GPU_TRIAGE_LLM_PROVIDER (the default) a deterministic matcher answers; the cluster is
opened only if the question needs it, so FAQ answers work with no kubeconfig at all.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from gpu_triage.errors import EXIT_OK, EXIT_USAGE, UserError
from gpu_triage.output import add_output_arg, structured


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
    p.add_argument("--snapshot", help="read cluster state from `kubectl get … -o yaml|json` output")
    p.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
    p.add_argument("--context", help="kubeconfig context (default: current context)")
    add_output_arg(p)
    p.add_argument(
        "--playbook", default=os.environ.get("GPU_TRIAGE_PLAYBOOK"), help="playbook YAML"
    )
    p.add_argument(
        "--operator-namespace",
        default=os.environ.get("GPU_TRIAGE_OPERATOR_NAMESPACE", "gpu-operator"),
        help="namespace of the GPU Operator (default: gpu-operator)",
    )
    p.set_defaults(handler=ask)


def ask(args: argparse.Namespace) -> int:
    from assist.ask import Assistant
    from assist.checks import EngineBackend, LocalOperator
    from assist.provider import ProviderError, model_from_env
    from gpu_triage.sources import open_source
    from triage import ClusterSource, EngineConfig, load_playbook
    from triage.render import to_text

    try:
        model = model_from_env()
    except ProviderError as e:
        raise UserError(str(e)) from None
    opened: list[ClusterSource] = []

    def source() -> ClusterSource:
        if not opened:
            opened.append(
                open_source(
                    snapshot=args.snapshot, kubeconfig=args.kubeconfig, context=args.context
                )
            )
        return opened[0]

    backend = EngineBackend(
        source_for=source,
        config=EngineConfig(operator_namespace=args.operator_namespace),
        playbook=load_playbook(args.playbook),
    )
    default_ns = args.namespace
    if default_ns is None and not args.snapshot:
        default_ns = None  # the live source's context namespace is used once it is opened
    answer = Assistant(backend=backend, model=model).ask(
        " ".join(args.question), caller=LocalOperator(), default_namespace=default_ns
    )
    if args.output in ("json", "yaml"):
        data: dict[str, Any] = {"kind": answer.kind, "intent": answer.intent, "text": answer.text}
        if answer.report is not None:
            data["report"] = answer.report
        if answer.discarded:
            data["model_answer_discarded"] = answer.discarded
        print(structured(data, args.output))
        return EXIT_USAGE if answer.kind == "error" else EXIT_OK
    if answer.discarded:
        print(f"gpu-triage: the language model's answer was discarded ({answer.discarded}); "
              "this is the triage engine's", file=sys.stderr)  # fmt: skip
    if answer.kind == "error":
        raise UserError(answer.text.replace("\n", " "))
    print(to_text(answer.report) if answer.report is not None else answer.text)
    return EXIT_OK
