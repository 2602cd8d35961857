"""What the facade's methods return: typed values with the ``as_dict`` that ``--json``
prints (and the MCP server returns)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from memidex.errors import Problem

if TYPE_CHECKING:  # a search on an up-to-date index loads neither
    from memidex.records.model import Record
    from memidex.search.ranking import SearchHit

__all__ = ["AddResult", "CheckReport", "CurationResult", "SearchResult", "ShownRecord"]


@dataclass(frozen=True)
class SearchResult:
    query: str
    product: str | None
    level: str
    results: list[SearchHit]
    note: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "product": self.product,
            "level": self.level,
            "results": [h.as_dict() for h in self.results],
            **({"note": self.note} if self.note else {}),
        }


@dataclass(frozen=True)
class ShownRecord:
    record: Record
    path: str
    text: str
    duplicates: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        from memidex.records.shape import record_dict

        return {**record_dict(self.record, self.path), "duplicates": list(self.duplicates)}


@dataclass(frozen=True)
class AddResult:
    id: str
    path: str
    status: str
    change: str  # added | updated | unchanged

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "path": self.path, "status": self.status, "change": self.change}


@dataclass
class CheckReport:
    records: int = 0
    policies: int = 0
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def as_dict(self) -> dict[str, Any]:
        """``errors``: the one name of a problem list in every JSON output (doctor's
        ``records.errors``, rebuild-index's ``errors``), each ``{path, line, reason}``."""
        return {"ok": self.ok, "records": self.records, "policies": self.policies,
                "errors": [p.as_dict() for p in self.problems]}


@dataclass(frozen=True)
class CurationResult:
    """What a curation command did: ``--json`` prints :meth:`as_dict`."""

    id: str
    path: str
    status: str
    change: str  # confirmed | superseded | deprecated | quarantined | released | purged | unchanged
    extra: tuple[tuple[str, Any], ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "path": self.path, "status": self.status,
                "change": self.change, **dict(self.extra)}
