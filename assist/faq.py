"""The deterministic intent matcher `ask` uses when no model is configured (the default).

It recognises the seed's four FAQ questions (in English, in the seed's Chinese phrasing and in
Spanish; the answer is in the question's language, `assist.language`, where the FAQ has it)
and command-like questions ("why is pod X pending in ns Y", "is node N ok?", "what is stuck
in ns Y", "quota in ns Y", "how many free A100s"), and maps them to a playbook answer or one of the checks. Anything else
gets a plain "I cannot answer that" with the questions it can answer. No guessing: a pod
question without a recognisable pod name asks for one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from triage import InvalidNameError, validate_name, validate_namespace


@dataclass(frozen=True)
class Intent:
    kind: str  # faq-no-gpu | faq-pending | faq-operator-fit | faq-operator-vs-scheduling |
    # why-pending | verify-node | pending | quota | capacity | unknown
    name: str | None = None
    namespace: str | None = None
    product: str | None = None


# The FAQ in the other languages it is asked in (`assist.language`); `{prefix}` is the command
# prefix. The seed's questions were asked in Chinese, so every entry has a Chinese answer; the
# Spanish ones are for the Spanish-speaking teams.
_TRANSLATED: dict[str, dict[str, str]] = {
    "zh": {
        "faq-no-gpu": (
            "Operator 安装后节点没有 GPU 资源，是驱动或 device-plugin 的问题，按这个顺序排查。"
            "先确认节点能看到硬件和驱动（该节点上的 driver 和 toolkit Pod，在 driver Pod 里运行 "
            "`nvidia-smi`）：操作系统看不到 GPU，Kubernetes 也不会看到。如果驱动正常但节点的 "
            "Capacity 里没有 `nvidia.com/gpu`，检查该节点上的 device-plugin Pod 以及它在 kubelet "
            "的注册。\n"
            "运行 `{prefix}verify-node <node>` 做完整的安装后检查，或 "
            "`kubectl get nodes -L nvidia.com/gpu.present -L nvidia.com/gpu.count`。"
        ),
        "faq-pending": (
            "不是。GPU Pod Pending 往往不是 Operator 的故障：空闲 GPU 不够、nodeSelector 或亲和性"
            "匹配不到 GPU 节点、缺少容忍、命名空间配额用尽，或队列（Kueue、Volcano）扣住了它，"
            "都会导致 Pending。先看 Pod 的事件，再逐层看节点资源和调度策略（驱动、device-plugin、"
            "调度、配额）。\n"
            "运行 `{prefix}why-pending <pod> -n <namespace>`：它正是这样做的，并指出出问题的层"
            "和负责人。"
        ),
        "faq-operator-fit": (
            "不一定。GPU Operator 适合需要统一管理驱动、device plugin 和节点状态的大规模或多团队"
            "集群。几台测试节点可以手动安装驱动和插件，代价是升级、审计和一致性上更费力。诊断两种"
            "方式都支持（标注了 `nvidia.com/gpu.deploy.driver=pre-installed` 的节点按预装驱动"
            "检查）。\n"
            "`{prefix}verify-node <node>` 会记录节点使用哪种驱动方式。"
        ),
        "faq-operator-vs-scheduling": (
            "GPU Operator 让节点的 GPU 对 Kubernetes 可见（资源接入：驱动、运行时、device "
            "plugin）。算力调度决定租户、队列和作业如何公平地共享这些 GPU（分配与治理：调度约束、"
            "配额、队列）。两者要一起看：驱动和 device-plugin 层属于前者，调度和配额层属于后者。\n"
            "`{prefix}why-pending <pod> -n <namespace>` 会告诉你卡住的 Pod 属于哪一边。"
        ),
    },
    "es": {
        "faq-no-gpu": (
            "Un nodo sin recurso GPU tras instalar el operator es un problema del driver o del "
            "device plugin, revisados en ese orden. Primero confirma que el hardware y el driver "
            "son visibles (los pods driver y toolkit de ese nodo, `nvidia-smi` en el pod del "
            "driver): si el sistema operativo no ve la GPU, Kubernetes tampoco. Si el driver está "
            "bien pero la Capacity del nodo no tiene `nvidia.com/gpu`, revisa el pod del device "
            "plugin en ese nodo y su registro en kubelet.\n"
            "Ejecuta `{prefix}verify-node <node>` para la comprobación completa, o "
            "`kubectl get nodes -L nvidia.com/gpu.present -L nvidia.com/gpu.count`."
        ),
        "faq-pending": (
            "No. Un pod GPU en Pending a menudo no es un fallo del operator: pocas GPU libres, un "
            "nodeSelector o una afinidad que no coincide con ningún nodo GPU, una toleration que "
            "falta, la cuota del namespace agotada o una cola (Kueue, Volcano) que lo retiene. "
            "Lee primero los eventos del pod, luego los recursos del nodo y la política de "
            "planificación, capa por capa (driver, device plugin, planificación, cuota).\n"
            "Ejecuta `{prefix}why-pending <pod> -n <namespace>`: hace exactamente eso y nombra "
            "la capa que falla y su responsable."
        ),
        "faq-operator-fit": (
            "No necesariamente. El GPU Operator compensa en clústeres grandes o de varios equipos "
            "que necesitan gestionar de forma uniforme drivers, device plugin y estado de los "
            "nodos. Unos pocos nodos de prueba pueden usar drivers y plugin instalados a mano, con "
            "más coste en actualizaciones, auditorías y coherencia. El diagnóstico admite ambos "
            "(un nodo con la etiqueta `nvidia.com/gpu.deploy.driver=pre-installed` se revisa como "
            "preinstalado).\n"
            "`{prefix}verify-node <node>` registra qué estrategia de driver usa un nodo."
        ),
        "faq-operator-vs-scheduling": (
            "El GPU Operator hace visibles para Kubernetes las GPU de un nodo (incorporación de "
            "recursos: driver, runtime, device plugin). La planificación de cómputo decide cómo "
            "comparten esas GPU de forma justa inquilinos, colas y trabajos (asignación y "
            "gobierno: restricciones de planificación, cuotas, colas). Léelos juntos: las capas "
            "driver y device plugin son del primero; planificación y cuota, del segundo.\n"
            "`{prefix}why-pending <pod> -n <namespace>` te dice de qué lado está un pod atascado."
        ),
    },
}


def faq_answer(kind: str, *, prefix: str, language: str = "en") -> str:
    """The playbook answer for an FAQ intent, in `language` when the FAQ has it there (else
    English). `prefix` is `/gpu ` (Slack) or `gpu-triage `."""
    translated = _TRANSLATED.get(language, {}).get(kind)
    if translated is not None:
        return translated.replace("{prefix}", prefix)
    answers = {
        "faq-no-gpu": (
            "A node with no GPU resource after the operator install is a driver or device-plugin "
            "problem, checked in that order. First confirm the node's hardware and driver are "
            "visible (driver and toolkit pods on that node, `nvidia-smi` in the driver pod): if "
            "the OS cannot see the GPU, Kubernetes never will. If the driver is fine but the "
            "node's Capacity lacks `nvidia.com/gpu`, check the device-plugin pod on that node "
            "and its registration with kubelet.\n"
            f"Run `{prefix}verify-node <node>` for the full post-install check, or "
            "`kubectl get nodes -L nvidia.com/gpu.present -L nvidia.com/gpu.count`."
        ),
        "faq-pending": (
            "No. A Pending GPU pod is often not an operator failure: too few free GPUs, a "
            "nodeSelector or affinity that matches no GPU node, a missing toleration, an "
            "exhausted namespace quota or a queue (Kueue, Volcano) holding it all cause it. "
            "Read the pod's events first, then node resources and scheduling policy, layer by "
            "layer (driver, device-plugin, scheduling, quota).\n"
            f"Run `{prefix}why-pending <pod> -n <namespace>`: it does exactly that and names "
            "the failing layer and its owner."
        ),
        "faq-operator-fit": (
            "Not necessarily. The GPU Operator pays off in large or multi-team clusters that "
            "need uniform management of drivers, the device plugin and node state. A few test "
            "nodes can run hand-installed drivers and plugin, at a higher cost in upgrades, "
            "audits and consistency. The triage supports both (a node labelled "
            "`nvidia.com/gpu.deploy.driver=pre-installed` is checked as pre-installed).\n"
            f"`{prefix}verify-node <node>` records which driver strategy a node uses."
        ),
        "faq-operator-vs-scheduling": (
            "The GPU Operator makes a node's GPUs visible to Kubernetes (resource onboarding: "
            "driver, runtime, device plugin). Compute scheduling decides how tenants, queues "
            "and jobs share those GPUs fairly (allocation and governance: scheduling "
            "constraints, quotas, queues). Read them together: the driver and device-plugin "
            "layers belong to the first, scheduling and quota to the second.\n"
            f"`{prefix}why-pending <pod> -n <namespace>` tells you which side a stuck pod is on."
        ),
    }
    return answers[kind]


def cannot_answer(*, prefix: str) -> str:
    return (
        "I cannot answer that without a language model configured. I can answer:\n"
        "• why is pod <pod> pending in namespace <namespace>\n"
        "• is node <node> ok / verify node <node> (operators)\n"
        "• what is stuck / what's pending in <namespace>\n"
        "• GPU quota in namespace <namespace>\n"
        "• how many free GPUs [of product <product>]\n"
        "• the FAQ: node has no GPU resource after the operator install; is a Pending GPU pod "
        "always an operator failure; does the operator suit every GPU node; operator vs "
        "compute scheduling.\n"
        f"Or run `{prefix}{'help' if prefix.startswith('/') else '--help'}`."
    )


def _has(text: str, *words: str) -> bool:
    return any(w in text for w in words)


_GPU = ("gpu",)
_NEGATIVE = ("no ", "not ", "ningún", "missing", "without", "lack", "doesn't", "does not", "没有", "不显示",
             "看不到", "zero", "0 ")  # fmt: skip
_OPERATOR = ("operator",)
_PENDING = ("pending", "stuck", "卡住", "挂起")
_ALWAYS = ("always", "necessarily", "mean", "一定", "是不是", "failure", "failed", "失败", "broken",
           "siempre", "fallo", "falla", "significa")  # fmt: skip
_FIT = ("suit", "fit", "every", "all ", "all gpu", "适合", "所有", "each", "right for", "todos",
        "sirve", "conviene")  # fmt: skip
_SCHED = ("scheduling", "scheduler", "调度", "算力", "planificación", "planificacion")
_RELATION = ("relation", "vs", "versus", "difference", "differ", "compare", "关系", "区别",
             "and compute", "between", "relación", "diferencia", "entre")  # fmt: skip
_WHY = ("why", "为什么", "what blocks", "what's blocking", "explain")
_NAME = r"([a-z0-9](?:[-a-z0-9.]*[a-z0-9])?)"
_HEALTHY = (" ok", "okay", "healthy", "fine", "working", "broken", "good", "正常", "健康")
_FLEET = re.compile(
    r"\b(?:what|which|anything|any|show|list)\b(?:'s|\s+(?:is|are|jobs?|pods?|workloads?|"
    r"gpu\s+pods?|gpu\s+jobs?))?\s+(?:is\s+|are\s+)?(?:stuck|pending)\b"
)


def _asks_fleet(q: str) -> bool:
    """ "what is stuck", "what's pending in team-a", "which pods are pending", "list pending"."""
    return bool(_FLEET.search(q)) or (
        _has(q, "哪些", "什么") and _has(q, "卡住", "挂起", "pending")
    )


_STOP = frozenset({"is", "in", "the", "a", "an", "my", "of", "on", "that", "which", "this", "it",
                   "always", "stuck", "pending", "has", "have", "with", "and", "or", "for"})  # fmt: skip


def _looks_named(word: str) -> bool:
    return any(ch.isdigit() or ch in "-." for ch in word)


def _after(text: str, keywords: tuple[str, ...], *, strict: bool = True) -> str | None:
    """The DNS name right after one of `keywords` ("pod X", "in namespace Y", "-n Y").

    `strict` wants something name-shaped (a digit, '-' or '.') unless it was quoted, so that
    "is a pod always…" does not read "always" as a pod name.
    """
    for kw in keywords:
        pattern = r"(?:^|[^a-z0-9._-])" + re.escape(kw) + r"\s*[:=]?\s*([`'\"]?)" + _NAME
        for m in re.finditer(pattern, text):
            word, quoted = m.group(2), bool(m.group(1))
            if word in _STOP:
                continue
            if not strict or quoted or _looks_named(word):
                return word
    return None


def _first_name(text: str) -> str | None:
    """The first name-shaped word: "why is resnet-train-0 pending" has no keyword before it."""
    words: list[str] = re.findall(_NAME, text)
    for word in words:
        if _looks_named(word) and not word.startswith("nvidia.com") and _valid(word):
            return word
    return None


def _valid(value: str | None, *, namespace: bool = False) -> str | None:
    if value is None:
        return None
    try:
        return validate_namespace(value) if namespace else validate_name(value)
    except InvalidNameError:
        return None


def match(question: str) -> Intent:
    """Map a question to an intent. Pure: reads nothing, runs nothing."""
    q = " ".join(question.lower().split())
    qz = q.replace(" ", "")  # the Chinese phrasing has no spaces; compare without them too

    # Command-like questions first: they name an object.
    slash = re.search(r"(?<![\w./-])" + _NAME + r"/" + _NAME + r"(?![\w/])", q)
    pod = _valid(_after(q, ("pod", "job", "workload", "deployment", "statefulset", "作业")))
    ns = _valid(
        _after(q, ("namespace", "-n", "ns", "命名空间"), strict=False)
        or _after(q, ("in",), strict=True),
        namespace=True,
    )
    if slash and not pod and "." not in slash.group(1):
        ns = ns or _valid(slash.group(1), namespace=True)
        pod = _valid(slash.group(2))
    asks_why = _has(q, *_WHY) and _has(q, *_PENDING, "not running", "blocked", "not start")
    if asks_why and pod is None:
        pod = _first_name(q.replace(ns or "\0", " "))
    if asks_why or (pod and _has(q, *_PENDING, "not running", "blocked")):
        return Intent("why-pending", name=pod, namespace=ns)
    node = _valid(_after(q, ("node", "节点")))
    if node and _has(q, "verify", "check", "validate", "验证", "检查", *_HEALTHY):
        return Intent("verify-node", name=node)
    if _asks_fleet(q):  # "what is stuck", "what's pending in team-a": the fleet view
        return Intent("pending", namespace=ns)
    if _has(q, "quota", "配额") and ns:
        return Intent("quota", namespace=ns)
    if _has(q, "how many", "free", "available", "capacity", "空闲", "多少", "容量") and _has(
        q, *_GPU, "a100", "h100", "l40", "t4"
    ):
        product = _after(q, ("product",))
        m = re.search(r"\b(a100|h100|h200|l40s?|l4|t4|a10g?|v100)\b", q)
        return Intent("capacity", product=product or (m.group(1) if m else None))

    # The FAQ.
    if _has(q, *_OPERATOR) and _has(qz, *_SCHED) and _has(q, *_RELATION):
        return Intent("faq-operator-vs-scheduling")
    if _has(q, *_PENDING) and (_has(q, *_OPERATOR) or _has(q, *_ALWAYS)):
        return Intent("faq-pending")
    if _has(q, *_OPERATOR) and _has(q, *_FIT) and not _has(q, *_PENDING):
        return Intent("faq-operator-fit")
    if (_has(q, "node", "节点", "nodo") and _has(q, *_GPU) and _has(q, *_NEGATIVE)) or (
        _has(qz, "没有gpu资源", "nvidia.com/gpu") and _has(q, *_NEGATIVE, "没有")
    ):
        return Intent("faq-no-gpu")
    if pod:
        return Intent("why-pending", name=pod, namespace=ns)
    return Intent("unknown")
