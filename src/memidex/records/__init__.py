"""Records and policies: the model, validation, the canonical codec and ids. No I/O.

Names are loaded on first use (PEP 562), so importing ``memidex.records.model`` — as the
search path does — does not compile the codec's regular expressions.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # not typing's: a one-shot command imports no typing (~2 ms)
if TYPE_CHECKING:
    from typing import Any

_WHERE = {
    "content_hash": "codec", "dump_record": "codec", "parse_record": "codec",
    "parse_record_bytes": "codec", "verify_hash": "codec",
    "anchor_slug": "ids", "record_id": "ids",
    "KINDS": "model", "SERVABLE_STATUSES": "model", "STATUSES": "model",
    "HistoryEntry": "model", "Policy": "model", "Record": "model", "Relations": "model",
    "Trust": "model", "Valid": "model",
    "parse_policies": "policy",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'memidex.records' has no attribute {name!r}")
    return getattr(importlib.import_module(f"memidex.records.{_WHERE[name]}"), name)
