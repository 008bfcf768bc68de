"""Composition root: CLI and settings that wire the engine to its adapters."""
