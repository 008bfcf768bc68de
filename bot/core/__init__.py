"""The bot's chat-neutral core: commands and their registry, access policy over the chat's ids,
the work pool and shared triages, the replicas' relay, and the handlers, which talk to a chat
through its port (`bot.core.chat`) in its words (`bot.core.wording`).

It imports neither `slack_bolt`, `slack_sdk`, `waitress` nor `bot.slack`: a second chat is an
adapter beside `bot.slack`, not a change here (`docs/architecture.md`, "The chat port").
"""
