"""Slack adapter: slack-bolt app, command parsing, access policy, Block Kit rendering."""
