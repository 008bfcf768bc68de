"""Bundled playbook data (YAML). Loaded through `triage.playbooks.load_playbook`."""
