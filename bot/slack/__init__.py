"""The Slack adapter: the bolt app and its HTTP server (requests verified on their raw bytes),
the chat port over Slack's Web API, Block Kit, mrkdwn escaping, Slack's ids and wording.

It builds on `bot.core` (the dispatcher, the port, the registry); the core never imports it.
"""
