"""Alembic migrations of the incident store. `incidents.migrate` finds them through this package,
so `gpu-triage db upgrade` works from any working directory."""
