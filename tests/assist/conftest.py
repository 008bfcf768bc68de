"""The Slack bot's fixtures (fake Slack on loopback, real app), for the `/gpu ask` tests."""

from tests.bot.conftest import bot, delay, fake, settings, store

__all__ = ["bot", "delay", "fake", "settings", "store"]
