"""Optional language-model layer: plain-language summaries and free-form questions (`ask`).

The verdict always comes from the deterministic engine in `triage`; this package may only
explain it. Everything here works with no model configured (the default): only
`assist.tools`, `assist.loop`, `assist.summary` and `assist.provider` touch langchain-core,
and they import it lazily, so a base install without the `llm` extra can still `ask`.
"""
