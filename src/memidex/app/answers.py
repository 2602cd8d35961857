"""What the reading commands return — ``knowledge search``, ``show`` and ``list`` — kept
apart from the other results (:mod:`memidex.app.results`, which re-exports them) so that a
one-shot search defines 3 types, not 23 (and :mod:`memidex.plain` types, not dataclasses,
which cost ~0.3 ms each to define).
"""

from __future__ import annotations

from collections.abc import Mapping

from memidex.plain import Frozen, set_field

TYPE_CHECKING = False  # not typing's: a one-shot command imports no typing (~2 ms)
if TYPE_CHECKING:
    from typing import Any

    from memidex.records.model import Record
    from memidex.records.shape import RecordSummary
    from memidex.search.ranking import SearchHit

__all__ = ["RecordList", "SearchResult", "ShownRecord"]


def _note(*parts: str) -> dict[str, str]:
    text = "; ".join(p for p in parts if p)
    return {"note": text} if text else {}


class SearchResult(Frozen):
    """``knowledge search``: the hits, best first, and the search level that found them.

    ``strategy``: what was asked (lexical, vector, hybrid); ``vector_strategy``: what
    ranked (memidex, static-floor, sparse); ``fallback``: hybrid's full-text fallback.
    ``source`` and ``commit``: the team index and the commit of its snapshot, or the
    local index and this clone's HEAD (None outside git); ``warning``: why the local
    index answered although a team index is configured (the CLI prints it on stderr;
    the JSON ``note`` carries it)."""

    __slots__ = ("query", "product", "level", "results", "note", "strategy", "vector_strategy",
                 "fallback", "source", "commit", "warning")
    query: str
    product: str | None
    level: str
    results: list[SearchHit]
    note: str
    strategy: str
    vector_strategy: str | None
    fallback: Mapping[str, Any] | None
    source: str
    commit: str | None
    warning: str

    def __init__(self, query: str, product: str | None, level: str, results: list[SearchHit],
                 note: str = "", strategy: str = "lexical", vector_strategy: str | None = None,
                 fallback: Mapping[str, Any] | None = None, source: str = "local",
                 commit: str | None = None, warning: str = "") -> None:
        set_field(self, "query", query)
        set_field(self, "product", product)
        set_field(self, "level", level)
        set_field(self, "results", results)
        set_field(self, "note", note)
        set_field(self, "strategy", strategy)
        set_field(self, "vector_strategy", vector_strategy)
        set_field(self, "fallback", fallback)
        set_field(self, "source", source)
        set_field(self, "commit", commit)
        set_field(self, "warning", warning)

    def to_json(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "product": self.product,
            "level": self.level,
            "strategy": self.strategy,
            **({"vector_strategy": self.vector_strategy} if self.vector_strategy else {}),
            **({"fallback": dict(self.fallback)} if self.fallback is not None else {}),
            "results": [h.as_dict() for h in self.results],
            **_note(self.warning, self.note),
            "source": self.source,
            "commit": self.commit,
        }


class ShownRecord(Frozen):
    """``knowledge show``: a record, where it is, its text, and other files with its id.

    ``source``, ``commit``, ``warning``: as :class:`SearchResult`'s."""

    __slots__ = ("record", "path", "text", "duplicates", "source", "commit", "warning")
    record: Record
    path: str
    text: str
    duplicates: tuple[str, ...]
    source: str
    commit: str | None
    warning: str

    def __init__(self, record: Record, path: str, text: str, duplicates: tuple[str, ...] = (),
                 source: str = "local", commit: str | None = None, warning: str = "") -> None:
        set_field(self, "record", record)
        set_field(self, "path", path)
        set_field(self, "text", text)
        set_field(self, "duplicates", duplicates)
        set_field(self, "source", source)
        set_field(self, "commit", commit)
        set_field(self, "warning", warning)

    def to_json(self) -> dict[str, Any]:
        from memidex.records.shape import record_dict

        return {**record_dict(self.record, self.path), "duplicates": list(self.duplicates),
                **_note(self.warning), "source": self.source, "commit": self.commit}


class RecordList(Frozen):
    """``knowledge list``: listing rows, by kind then id.

    ``source``, ``commit``, ``warning``: as :class:`SearchResult`'s."""

    __slots__ = ("records", "source", "commit", "warning")
    records: tuple[RecordSummary, ...]
    source: str
    commit: str | None
    warning: str

    def __init__(self, records: tuple[RecordSummary, ...], source: str = "local",
                 commit: str | None = None, warning: str = "") -> None:
        set_field(self, "records", records)
        set_field(self, "source", source)
        set_field(self, "commit", commit)
        set_field(self, "warning", warning)

    def to_json(self) -> dict[str, Any]:
        return {"count": len(self.records), "records": [r.to_json() for r in self.records],
                **_note(self.warning), "source": self.source, "commit": self.commit}
