"""The team index: a derived copy of a branch's records on PostgreSQL (docs/team-index.md).

Importing this package imports nothing else (PEP 562): psycopg is loaded by the first
push or read. ``push(root, url)`` brings the index to the branch's HEAD;
``TeamIndex.connect(url)`` reads it with the local index's queries; ``reachable(url)``
says whether it answers (for the fallback to the local index).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memidex.teamindex.connect import reachable
    from memidex.teamindex.pushing import PushReport, push
    from memidex.teamindex.read import Answer, Session, Snapshot, TeamIndex

__all__ = ["Answer", "PushReport", "Session", "Snapshot", "TeamIndex", "push", "reachable"]

_WHERE = {"Answer": "read", "Session": "read", "Snapshot": "read", "TeamIndex": "read",
          "PushReport": "pushing", "push": "pushing", "reachable": "connect"}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        import importlib

        return getattr(importlib.import_module(f"memidex.teamindex.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'memidex.teamindex' has no attribute {name!r}")
