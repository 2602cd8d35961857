"""What the facade's methods return: frozen values with the ``to_json()`` that ``--json``
prints and the MCP server returns (their shapes are published in ``docs/schemas/``, and
the schema tests hold each command's output to them).

Every public method of :class:`memidex.Memidex` returns one of these (or a value of the
layer that owns it: a :class:`memidex.serve.values.Brief`, a
:class:`memidex.review.changes.ReviewReport`, an :class:`memidex.index.build.BuildReport`,
a :class:`memidex.importers.ImportResult`, a :class:`memidex.write.daemon.DaemonReport`,
the trust chart's :class:`memidex.app.history.TrustSeries`, the vectors'
:class:`memidex.app.semantic.VectorsReport`), never ``Any`` or a bare dictionary.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memidex.app.answers import RecordList, SearchResult, ShownRecord
from memidex.app.runreports import (
    DiffReport,
    IngestPreview,
    IngestResult,
    ProposalDecision,
    ProposalDetail,
    ProposalList,
    RollbackResult,
    RunDetail,
    RunList,
    RunRow,
    RunTest,
)
from memidex.errors import Problem
from memidex.plain import Frozen, set_field

__all__ = ["SOURCES", "AddResult", "CheckReport", "CurationResult", "DiffReport",
           "DoctorReport", "HealthStatus", "IngestPreview", "IngestResult", "ProposalDecision",
           "ProposalDetail", "ProposalList", "RecordCounts", "RecordList", "RollbackResult",
           "RunDetail", "RunList", "RunRow", "RunTest", "SearchResult", "ShownRecord"]


SOURCES = ("team", "local")
"""Where a reading answer came from (docs/team-index.md): the team index on PostgreSQL,
or this clone's local index (or its records, at the bundle-scan level)."""


class AddResult(Frozen):
    """``knowledge add``: the record written and whether it was new."""

    id: str
    path: str
    status: str
    change: str  # added | updated | unchanged

    __slots__ = ("id", "path", "status", "change")

    def __init__(self, id: str, path: str, status: str, change: str) -> None:
        set_field(self, "id", id)
        set_field(self, "path", path)
        set_field(self, "status", status)
        set_field(self, "change", change)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "path": self.path, "status": self.status, "change": self.change}


class CheckReport(Frozen):
    """``knowledge check``: how many records and policies were read, and every problem."""

    records: int
    policies: int
    problems: tuple[Problem, ...]

    __slots__ = ("records", "policies", "problems")

    def __init__(self, records: int = 0, policies: int = 0,
                 problems: tuple[Problem, ...] = ()) -> None:
        set_field(self, "records", records)
        set_field(self, "policies", policies)
        set_field(self, "problems", problems)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        """``errors``: the one name of a problem list in every JSON output (doctor's
        ``records.errors``, rebuild-index's ``errors``), each ``{path, line, reason}``."""
        return {"ok": self.ok, "records": self.records, "policies": self.policies,
                "errors": [p.as_dict() for p in self.problems]}


class CurationResult(Frozen):
    """What a curation command did (``confirm``, ``supersede``, ``deprecate``,
    ``quarantine``, ``release``, ``purge``)."""

    id: str
    path: str
    status: str
    change: str  # confirmed | superseded | deprecated | quarantined | released | purged | unchanged
    extra: tuple[tuple[str, Any], ...]

    __slots__ = ("id", "path", "status", "change", "extra")

    def __init__(self, id: str, path: str, status: str, change: str,
                 extra: tuple[tuple[str, Any], ...] = ()) -> None:
        set_field(self, "id", id)
        set_field(self, "path", path)
        set_field(self, "status", status)
        set_field(self, "change", change)
        set_field(self, "extra", extra)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "path": self.path, "status": self.status,
                "change": self.change, **dict(self.extra)}


class DoctorReport(Frozen):
    """``doctor``: the search level, index health, staleness, record errors, the lease,
    the merge driver, the configuration and what to do about each problem."""

    healthy: bool
    level: str
    levels: Mapping[str, str]
    index: Mapping[str, Any]
    record_count: int
    errors: tuple[Problem, ...]
    lease: Mapping[str, Any]
    merge_driver: Mapping[str, Any]
    notes: tuple[str, ...]
    yaml_loader: str
    config: Mapping[str, Any]
    recent_runs: tuple[Mapping[str, Any], ...]
    vector_strategy: str  # what --strategy vector uses: memidex, static-floor

    __slots__ = ("healthy", "level", "levels", "index", "record_count", "errors", "lease",
                 "merge_driver", "notes", "yaml_loader", "config", "recent_runs",
                 "vector_strategy")

    def __init__(self, healthy: bool, level: str, levels: Mapping[str, str],
                 index: Mapping[str, Any], record_count: int, errors: tuple[Problem, ...],
                 lease: Mapping[str, Any], merge_driver: Mapping[str, Any], notes: tuple[str, ...],
                 yaml_loader: str, config: Mapping[str, Any],
                 recent_runs: tuple[Mapping[str, Any], ...] = (),
                 vector_strategy: str = "sparse") -> None:
        set_field(self, "healthy", healthy)
        set_field(self, "level", level)
        set_field(self, "levels", levels)
        set_field(self, "index", index)
        set_field(self, "record_count", record_count)
        set_field(self, "errors", errors)
        set_field(self, "lease", lease)
        set_field(self, "merge_driver", merge_driver)
        set_field(self, "notes", notes)
        set_field(self, "yaml_loader", yaml_loader)
        set_field(self, "config", config)
        set_field(self, "recent_runs", recent_runs)
        set_field(self, "vector_strategy", vector_strategy)

    def to_json(self) -> dict[str, Any]:
        loader = self.yaml_loader
        return {
            "healthy": self.healthy, "level": self.level,
            "vector_strategy": self.vector_strategy,
            "recent_runs": [dict(r) for r in self.recent_runs],
            "levels": dict(self.levels), "index": dict(self.index),
            "records": {"count": self.record_count,
                        "errors": [p.as_dict() for p in self.errors]},
            "lease": dict(self.lease), "merge_driver": dict(self.merge_driver),
            "notes": list(self.notes),
            "yaml": {"loader": loader, "c_loader": loader == "CSafeLoader",
                     "note": "" if loader == "CSafeLoader" else
                     "PyYAML has no C loader here: hand-written records parse 8x slower"},
            "config": dict(self.config),
        }



class RecordCounts(Frozen):
    """How many records there are by product, kind and status — what counting the rows of
    ``knowledge list --all-products --json`` gives, in one query (the dashboard's overview)."""

    rows: tuple[tuple[str, str, str, int], ...]  # (product, kind, status, count), sorted
    level: str  # lexical-only (the index) or bundle-scan (the records read)

    __slots__ = ("rows", "level")

    def __init__(self, rows: tuple[tuple[str, str, str, int], ...], level: str) -> None:
        set_field(self, "rows", rows)
        set_field(self, "level", level)

    def products(self) -> list[str]:
        return sorted({r[0] for r in self.rows})

    def of(self, product: str) -> dict[str, dict[str, int]]:
        """kind -> status -> count, for one product."""
        out: dict[str, dict[str, int]] = {}
        for p, kind, status, n in self.rows:
            if p == product:
                out.setdefault(kind, {})[status] = n
        return out

    def total(self, product: str | None = None) -> int:
        return sum(r[3] for r in self.rows if product is None or r[0] == product)

    def to_json(self) -> dict[str, Any]:
        return {"level": self.level,
                "products": {p: {"total": self.total(p), "kinds": self.of(p)}
                             for p in self.products()}}


class HealthStatus(Frozen):
    """What ``doctor`` says that costs no walk of the index: the search level and why,
    the index as opened (schema, row counts, what its refresh found), the lease and the
    daemon's inbox. Every key means what it means in ``doctor --json``; ``doctor`` adds
    ``quick_check``, the files compared with the index and the records' problems (O(N):
    ~0.3 s at 100,000 records)."""

    level: str
    levels: Mapping[str, str]
    note: str
    index: Mapping[str, Any]
    lease: Mapping[str, Any]

    __slots__ = ("level", "levels", "note", "index", "lease")

    def __init__(self, level: str, levels: Mapping[str, str], note: str, index: Mapping[str, Any],
                 lease: Mapping[str, Any]) -> None:
        set_field(self, "level", level)
        set_field(self, "levels", levels)
        set_field(self, "note", note)
        set_field(self, "index", index)
        set_field(self, "lease", lease)

    def to_json(self) -> dict[str, Any]:
        return {"level": self.level, "levels": dict(self.levels), "note": self.note,
                "index": dict(self.index), "lease": dict(self.lease)}
