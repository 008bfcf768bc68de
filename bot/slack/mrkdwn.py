"""Escaping for Slack mrkdwn: nothing that came from a cluster may ping, link, format or forge.

Slack's own rule is to replace `&`, `<` and `>` with entities; that already defuses `<!channel>`,
`<@U…>` and `<http://…|…>`. Formatting characters (`*_~` and backticks) are not escapable in
mrkdwn, so we neutralise them by putting a zero-width joiner (U+2060 WORD JOINER) next to them:
the text reads the same but no longer pairs up into bold, italics, strike or code. Bare
`@channel`/`@here`/`@everyone` words do not notify when sent by a bot, but we break them too so a
copy-paste by a human cannot revive them.

Cluster text is also put on one line (`triage.render.one_line`: every line break, including
U+2028/2029, becomes a space): a termination message or an annotation could otherwise start a
line of its own that reads like the bot's. And text that begins with what would open a quote
(`>`) or look like a list item (`-`, `*`, `•`) at a line's start gets a word joiner first.
"""

from __future__ import annotations

import re

from bot.slack.ids import PUBLIC_CHANNEL
from triage.render import one_line

_WJ = "\u2060"
_ENTITIES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})
_FORMAT = re.compile(r"([*_~`])")
_BROADCAST = re.compile(r"@(channel|here|everyone)\b", re.IGNORECASE)
_LEADING_MARK = re.compile(r"\s*(?:&gt;|[-+•◦▪‣])")  # `*` and backticks are joined already


def escape(text: str) -> str:
    """Make cluster text safe to embed in mrkdwn: it renders as typed, on one line, and pings
    no one."""
    out = one_line(text).translate(_ENTITIES)
    out = _FORMAT.sub(_WJ + r"\1" + _WJ, out)
    out = _BROADCAST.sub("@" + _WJ + r"\1", out)
    return _WJ + out if _LEADING_MARK.match(out) else out


def code(text: str) -> str:
    """Inline code span around cluster text. Backticks inside are replaced so the span holds."""
    return "`" + one_line(text).replace("`", "'").translate(_ENTITIES) + "`"


def plain(text: str) -> str:
    """For `plain_text` objects (button labels, header): only entities matter there."""
    return one_line(text).translate(_ENTITIES)


def truncate(text: str, *, limit: int) -> str:
    """Cut at `limit` characters, ending with an ellipsis, never splitting an entity."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    amp = cut.rfind("&")
    if amp != -1 and ";" not in cut[amp:]:
        cut = cut[:amp]
    return cut + "…"


def channel_link(channel: str) -> str:
    """`<#C123>` for a channel id (Slack renders the name); escaped text for a `#name`."""
    return f"<#{channel}>" if PUBLIC_CHANNEL.fullmatch(channel) else escape(channel)
