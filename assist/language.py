"""Which language a question is in, cheaply: the script, then a handful of stopwords.

Only what the FAQ has answers in is told apart (`LANGUAGES`); anything else reads as English,
the language every answer has. No library and no model: a question is short, and the three
languages differ in script (Chinese) or in their commonest words (Spanish, English).
"""

from __future__ import annotations

import re

LANGUAGES = ("en", "zh", "es")

_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")
_WORD = re.compile(r"[a-záéíóúüñ]+")
_SPANISH = frozenset({
    "el", "la", "los", "las", "un", "una", "es", "son", "está", "están", "qué", "que", "por",
    "porqué", "cómo", "como", "del", "de", "al", "en", "mi", "siempre", "sin", "tiene", "hay",
    "nodo", "nodos", "todos", "todas", "para", "con", "y", "entre", "fallo", "falla", "después",
    "cuál", "relación", "diferencia", "significa", "instalar",
})  # fmt: skip
_ENGLISH = frozenset({
    "the", "is", "are", "a", "an", "of", "in", "my", "why", "what", "does", "do", "after",
    "node", "nodes", "every", "always", "between", "and", "to", "it", "has", "no", "with",
})  # fmt: skip


def language(question: str) -> str:
    """ "zh", "es" or "en" (the default, and whatever else a question is written in)."""
    if _HAN.search(question):
        return "zh"
    q = question.lower()
    if "¿" in q or "ñ" in q:
        return "es"
    words = _WORD.findall(q)
    spanish = sum(w in _SPANISH and w not in _ENGLISH for w in words)
    english = sum(w in _ENGLISH for w in words)
    return "es" if spanish >= 2 and spanish > english else "en"
