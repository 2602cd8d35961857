"""What was served is recorded (docs/brief.md, "What was served").

Each brief appends one line to ``<state_dir>/served/<product>.jsonl``::

    {"ids": ["fact-…", …], "level": "lexical-only", "ordinal": 42,
     "test_id": "checkout-happy-path"}

(local state, ignored by git; one ``O_APPEND`` write through
:func:`memidex.store.fsio.append`, so concurrent briefs never interleave a line).
:func:`served_at` answers "which records was this test served for run N" — the union of
every brief recorded for that test and ordinal — so the ingest can check a run's
``served_records`` against it and ``runs show`` can say what the agent knew.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from memidex.config import Config
from memidex.errors import UsageError
from memidex.records.ids import PRODUCT_RE
from memidex.store.fsio import append, dump_json, load_json

__all__ = ["levels_by_ordinal", "record_served", "served_at", "served_path"]


def served_path(config: Config, product: str) -> Path:
    if not PRODUCT_RE.fullmatch(product):
        raise UsageError(f"product {product!r} must be letters, digits, . _ -")
    return config.state_path / "served" / f"{product}.jsonl"


def record_served(config: Config, product: str, test_id: str, ordinal: int,
                  ids: Sequence[str], level: str | None = None) -> None:
    """Append one brief's served record ids and the search level it had (the folder is
    created when missing)."""
    path = served_path(config, product)
    path.parent.mkdir(parents=True, exist_ok=True)
    entry: dict[str, object] = {"test_id": test_id, "ordinal": ordinal, "ids": list(ids)}
    if level is not None:
        entry["level"] = level
    append(path, dump_json(entry))


def _entries(config: Config, product: str) -> list[dict[str, object]]:
    try:
        data = served_path(config, product).read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        return []
    out = []
    for line in data.splitlines():
        try:
            entry = load_json(line)
        except ValueError:
            continue
        ordinal = entry.get("ordinal") if isinstance(entry, dict) else None
        if isinstance(ordinal, int) and not isinstance(ordinal, bool):
            out.append(entry)
    return out


def levels_by_ordinal(config: Config, product: str) -> dict[int, list[str]]:
    """Per run ordinal, the search levels its briefs had (sorted, without repeats)."""
    out: dict[int, set[str]] = {}
    for entry in _entries(config, product):
        level = entry.get("level")
        ordinal = entry["ordinal"]
        assert isinstance(ordinal, int)
        if isinstance(level, str):
            out.setdefault(ordinal, set()).add(level)
    return {k: sorted(v) for k, v in sorted(out.items())}


def served_at(config: Config, product: str, test_id: str, ordinal: int) -> list[str]:
    """The ids of every record served to ``test_id`` for run ``ordinal`` of ``product``
    (sorted, without repeats; empty when no brief was recorded). A line that is not
    one brief's record (a torn write, an edit) is skipped."""
    try:
        data = served_path(config, product).read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        return []
    out: set[str] = set()
    for line in data.splitlines():
        try:
            entry = load_json(line)
        except ValueError:
            continue
        if not isinstance(entry, dict) or entry.get("test_id") != test_id or \
                entry.get("ordinal") != ordinal or isinstance(entry.get("ordinal"), bool):
            continue
        ids = entry.get("ids")
        if isinstance(ids, list):
            out.update(i for i in ids if isinstance(i, str))
    return sorted(out)
