"""Transitional: the ingest orchestration (moves to the learning service)."""
