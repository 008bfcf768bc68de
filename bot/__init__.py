"""The chat bot: a chat-neutral core (`bot.core`) and its Slack adapter (`bot.slack`)."""
