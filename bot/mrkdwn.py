"""Escaping for Slack mrkdwn: nothing that came from a cluster may ping, link or format.

Slack's own rule is to replace `&`, `<` and `>` with entities; that already defuses `<!channel>`,
`<@U…>` and `<http://…|…>`. Formatting characters (`*_~` and backticks) are not escapable in
mrkdwn, so we neutralise them by putting a zero-width joiner (U+2060 WORD JOINER) next to them:
the text reads the same but no longer pairs up into bold, italics, strike or code. Bare
`@channel`/`@here`/`@everyone` words do not notify when sent by a bot, but we break them too so a
copy-paste by a human cannot revive them.
"""

from __future__ import annotations

import re

_WJ = "\u2060"
_ENTITIES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})
_FORMAT = re.compile(r"([*_~`])")
_BROADCAST = re.compile(r"@(channel|here|everyone)\b", re.IGNORECASE)


def escape(text: str) -> str:
    """Make cluster text safe to embed in mrkdwn: it renders as typed and pings no one."""
    out = text.translate(_ENTITIES)
    out = _FORMAT.sub(_WJ + r"\1" + _WJ, out)
    return _BROADCAST.sub("@" + _WJ + r"\1", out)


def code(text: str) -> str:
    """Inline code span around cluster text. Backticks inside are replaced so the span holds."""
    return "`" + text.replace("`", "'").translate(_ENTITIES) + "`"


def plain(text: str) -> str:
    """For `plain_text` objects (button labels, header): only entities matter there."""
    return text.translate(_ENTITIES)


def truncate(text: str, *, limit: int) -> str:
    """Cut at `limit` characters, ending with an ellipsis, never splitting an entity."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    amp = cut.rfind("&")
    if amp != -1 and ";" not in cut[amp:]:
        cut = cut[:amp]
    return cut + "…"
