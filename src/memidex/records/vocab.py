"""The words a record may use (kinds, statuses, sources, severities) and its scalar
types: constants only, so that code needing them imports no model classes."""

from __future__ import annotations

__all__ = ["KINDS", "MAX_ORDINAL", "STATUSES", "SERVABLE_STATUSES", "SOURCES", "SEVERITIES",
           "Scalar", "Pairs"]

MAX_ORDINAL = 2**63 - 1
"""The largest run ordinal or count a record may hold (SQLite's largest integer)."""

KINDS: tuple[str, ...] = ("fact", "caution", "procedure", "unknown")
STATUSES: tuple[str, ...] = ("candidate", "active", "superseded", "deprecated", "quarantined")
SERVABLE_STATUSES: tuple[str, ...] = ("active", "candidate")
SOURCES: tuple[str, ...] = ("local", "ci", "human", "import")
SEVERITIES: tuple[str, ...] = ("must", "should", "info")

Scalar = str | int | bool | None
Pairs = tuple[tuple[str, Scalar], ...]
