"""The chat bot: a chat-neutral core (`bot.core`) and one adapter per chat platform
(`bot.slack`, the only one so far).

Arrows: `bot.slack` → `bot.core` → `triage`, `incidents` (values and errors), `assist`; the
core imports no chat SDK and no adapter, and nothing in `bot` imports `gpu_triage`, the
composition root that wires it (import-linter contracts in `pyproject.toml`).
"""
