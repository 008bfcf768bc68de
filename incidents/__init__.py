"""Incident store: SQLAlchemy models and the repository every adapter records triages through."""
