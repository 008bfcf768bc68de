"""The FAQ answers in the language it was asked in, where it has that language (Chinese,
Spanish); any other language, and every question that is not an FAQ, is as before."""

from __future__ import annotations

import pytest

from assist.ask import Assistant
from assist.checks import LocalOperator
from assist.language import language
from tests.assist.fakes import backend
from tests.bot.conftest import Bot


def _ask(question: str) -> tuple[str | None, str]:
    answer = Assistant(backend=backend()).ask(question, caller=LocalOperator())
    return answer.intent, answer.text


@pytest.mark.parametrize(
    ("question", "kind", "starts"),
    [
        ("¿Un pod GPU en Pending siempre es un fallo del operator?", "faq-pending",
         "No. Un pod GPU en Pending a menudo no es un fallo del operator"),
        ("El nodo no tiene recurso GPU después de instalar el GPU operator", "faq-no-gpu",
         "Un nodo sin recurso GPU tras instalar el operator"),
        ("¿El GPU Operator sirve para todos los nodos GPU?", "faq-operator-fit",
         "No necesariamente."),
        ("¿Cuál es la relación entre el GPU Operator y la planificación de cómputo?",
         "faq-operator-vs-scheduling", "El GPU Operator hace visibles"),
        ("GPU Pod Pending一定是Operator部署失败吗？", "faq-pending", "不是。"),
        ("GPU Operator适合所有GPU节点吗？", "faq-operator-fit", "不一定。"),
        ("GPU Operator和算力调度是什么关系？", "faq-operator-vs-scheduling", "GPU Operator 让节点"),
    ],
)  # fmt: skip
def test_an_faq_question_is_answered_in_its_language(question: str, kind: str, starts: str) -> None:
    intent, text = _ask(question)
    assert intent == kind and text.startswith(starts)
    assert "`gpu-triage " in text  # the commands it points at are spelled for this terminal


def test_english_and_unknown_languages_keep_the_english_answer() -> None:
    english = _ask("Is a Pending GPU pod always an operator failure?")[1]
    assert english.startswith("No. A Pending GPU pod is often not an operator failure")
    # French is not in the FAQ: the English answer, as before
    assert _ask("Un pod GPU Pending est-il always an operator failure ?")[1] == english


@pytest.mark.parametrize(
    ("question", "lang"),
    [
        ("why is pod train-0 pending in namespace team-a", "en"),
        ("is node gpu-a100-01 ok?", "en"),
        ("el nodo no tiene GPU", "es"),
        ("¿qué pasa?", "es"),
        ("节点没有GPU资源", "zh"),
    ],
)
def test_language_is_told_by_script_and_common_words(question: str, lang: str) -> None:
    assert language(question) == lang


def test_slack_answers_the_faq_in_the_askers_language(bot: Bot) -> None:
    bot.slack.command(
        "ask ¿Un pod GPU en Pending siempre es un fallo del operator?",
        user="UTENA",
        channel="CTEAMA",
    )
    text = bot.fake.wait_posts(1)[0].args["text"]
    assert text.startswith("No. Un pod GPU en Pending") and "`/gpu why-pending" in text
