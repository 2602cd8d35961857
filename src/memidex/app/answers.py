"""What the reading commands return — ``knowledge search``, ``show`` and ``list`` — kept
apart from the other results (:mod:`memidex.app.results`, which re-exports them) so that a
one-shot search defines 3 dataclasses, not 23 (each costs ~0.5 ms to define).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memidex.records.model import Record
    from memidex.records.shape import RecordSummary
    from memidex.search.ranking import SearchHit

__all__ = ["RecordList", "SearchResult", "ShownRecord"]


def _note(*parts: str) -> dict[str, str]:
    text = "; ".join(p for p in parts if p)
    return {"note": text} if text else {}


@dataclass(frozen=True)
class SearchResult:
    """``knowledge search``: the hits, best first, and the search level that found them.

    ``source`` and ``commit``: the team index and the commit of its snapshot, or the
    local index and this clone's HEAD (None outside git); ``warning``: why the local
    index answered although a team index is configured (the CLI prints it on stderr;
    the JSON ``note`` carries it)."""

    query: str
    product: str | None
    level: str
    results: list[SearchHit]
    note: str = ""
    strategy: str = "lexical"  # lexical | vector | hybrid: what was asked
    vector_strategy: str | None = None  # memidex | static-floor | sparse: what ranked
    fallback: Mapping[str, Any] | None = None  # hybrid: the full-text fallback
    source: str = "local"
    commit: str | None = None
    warning: str = ""

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


@dataclass(frozen=True)
class ShownRecord:
    """``knowledge show``: a record, where it is, its text, and other files with its id."""

    record: Record
    path: str
    text: str
    duplicates: tuple[str, ...] = ()
    source: str = "local"  # as SearchResult's
    commit: str | None = None
    warning: str = ""

    def to_json(self) -> dict[str, Any]:
        from memidex.records.shape import record_dict

        return {**record_dict(self.record, self.path), "duplicates": list(self.duplicates),
                **_note(self.warning), "source": self.source, "commit": self.commit}


@dataclass(frozen=True)
class RecordList:
    """``knowledge list``: listing rows, by kind then id."""

    records: tuple[RecordSummary, ...]
    source: str = "local"  # as SearchResult's
    commit: str | None = None
    warning: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"count": len(self.records), "records": [r.to_json() for r in self.records],
                **_note(self.warning), "source": self.source, "commit": self.commit}
