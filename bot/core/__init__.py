"""The bot's chat-neutral core: commands, access policy, shared triages, replicas, replies."""
