"""The Slack adapter: the bolt app, its HTTP server, Block Kit and Slack's wording."""
