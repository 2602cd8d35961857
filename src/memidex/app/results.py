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
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memidex.app.answers import RecordList, SearchResult, ShownRecord
from memidex.errors import Problem

if TYPE_CHECKING:  # a search on an up-to-date index loads neither
    from memidex.learning.plan import Proposal

__all__ = ["SOURCES", "AddResult", "CheckReport", "CurationResult", "DiffReport",
           "DoctorReport", "HealthStatus", "IngestPreview", "IngestResult", "ProposalDecision",
           "ProposalDetail", "ProposalList", "RecordCounts", "RecordList", "RollbackResult",
           "RunDetail", "RunList", "RunRow", "RunTest", "SearchResult", "ShownRecord"]


SOURCES = ("team", "local")
"""Where a reading answer came from (docs/team-index.md): the team index on PostgreSQL,
or this clone's local index (or its records, at the bundle-scan level)."""


@dataclass(frozen=True)
class AddResult:
    """``knowledge add``: the record written and whether it was new."""

    id: str
    path: str
    status: str
    change: str  # added | updated | unchanged

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "path": self.path, "status": self.status, "change": self.change}


@dataclass(frozen=True)
class CheckReport:
    """``knowledge check``: how many records and policies were read, and every problem."""

    records: int = 0
    policies: int = 0
    problems: tuple[Problem, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        """``errors``: the one name of a problem list in every JSON output (doctor's
        ``records.errors``, rebuild-index's ``errors``), each ``{path, line, reason}``."""
        return {"ok": self.ok, "records": self.records, "policies": self.policies,
                "errors": [p.as_dict() for p in self.problems]}


@dataclass(frozen=True)
class CurationResult:
    """What a curation command did (``confirm``, ``supersede``, ``deprecate``,
    ``quarantine``, ``release``, ``purge``)."""

    id: str
    path: str
    status: str
    change: str  # confirmed | superseded | deprecated | quarantined | released | purged | unchanged
    extra: tuple[tuple[str, Any], ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "path": self.path, "status": self.status,
                "change": self.change, **dict(self.extra)}


@dataclass(frozen=True)
class IngestResult:
    """``runs ingest``: the run's ordinal and what its curation did (or, queued for a
    daemon with ``--no-wait``, the inbox item that will do it)."""

    run_id: str
    product: str
    ordinal: int
    build_tag: str | None
    ci: bool
    changes: tuple[Mapping[str, Any], ...]
    proposals: tuple[str, ...]
    analysis: Mapping[str, str]
    already: bool = False
    resumed: bool = False
    notes: tuple[str, ...] = ()
    queued: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "run_id": self.run_id, "product": self.product, "ordinal": self.ordinal,
            "build_tag": self.build_tag, "ci": self.ci,
            "changes": [dict(c) for c in self.changes],
            "proposals": list(self.proposals),
            "analysis": dict(sorted(self.analysis.items())),
            "already_ingested": self.already, "resumed": self.resumed,
            "notes": list(self.notes)}
        if self.queued is not None:
            out["queued"] = self.queued
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> IngestResult:
        """The result back from the daemon's outcome marker."""
        return cls(run_id=str(data["run_id"]), product=str(data["product"]),
                   ordinal=int(data["ordinal"]), build_tag=data.get("build_tag"),
                   ci=bool(data.get("ci")),
                   changes=tuple(dict(c) for c in data.get("changes") or ()),
                   proposals=tuple(str(p) for p in data.get("proposals") or ()),
                   analysis={str(k): str(v) for k, v in (data.get("analysis") or {}).items()},
                   already=bool(data.get("already_ingested")),
                   resumed=bool(data.get("resumed")),
                   notes=tuple(str(n) for n in data.get("notes") or ()))


@dataclass(frozen=True)
class RunRow:
    """One row of ``runs list``."""

    run_id: str
    product: str
    ordinal: int
    build_tag: str | None
    ci: bool
    verdicts: Mapping[str, int]
    changes: Mapping[str, int]  # op -> how many
    proposals: int
    done: bool
    rolled_back: bool

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "product": self.product, "ordinal": self.ordinal,
                "build_tag": self.build_tag, "ci": self.ci, "verdicts": dict(self.verdicts),
                "changes": dict(self.changes), "proposals": self.proposals,
                "done": self.done, "rolled_back": self.rolled_back}


@dataclass(frozen=True)
class RunList:
    """``runs list``: the runs ingested, in ordinal order."""

    runs: tuple[RunRow, ...]

    def to_json(self) -> dict[str, Any]:
        return {"runs": [r.to_json() for r in self.runs]}


@dataclass(frozen=True)
class RunTest:
    """One test of a shown run: its verdict, cause, and what the agent knew."""

    test_id: str
    verdict: str
    cause: str | None
    failure: str | None
    steps: int
    served_records: tuple[str, ...]
    briefed: tuple[str, ...] = ()
    not_briefed: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"test_id": self.test_id, "verdict": self.verdict, "cause": self.cause,
                "failure": self.failure, "steps": self.steps,
                "served_records": list(self.served_records), "briefed": list(self.briefed),
                "not_briefed": list(self.not_briefed)}


@dataclass(frozen=True)
class RunDetail:
    """``runs show``: the frozen run, its analysis and what its curation did."""

    run_id: str
    product: str
    ordinal: int
    build_tag: str | None
    ci: bool
    digest: str | None
    path: str
    tests: tuple[RunTest, ...]
    changes: tuple[tuple[str, str], ...]  # (op, record id)
    proposals: tuple[str, ...]
    done: bool
    rolled_back: bool
    notes: tuple[str, ...]
    levels: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "product": self.product, "ordinal": self.ordinal,
                "build_tag": self.build_tag, "ci": self.ci, "digest": self.digest,
                "path": self.path, "tests": [t.to_json() for t in self.tests],
                "changes": [{"op": op, "id": rid} for op, rid in self.changes],
                "proposals": list(self.proposals), "done": self.done,
                "rolled_back": self.rolled_back, "notes": list(self.notes),
                "levels": list(self.levels)}


@dataclass(frozen=True)
class DiffReport:
    """``knowledge diff TAG``: record ids added, confirmed, superseded and deprecated by
    the runs since the build's first ordinal."""

    tag: str
    product: str
    since_ordinal: int
    runs: tuple[str, ...]
    added: tuple[str, ...] = ()
    confirmed: tuple[str, ...] = ()
    superseded: tuple[str, ...] = ()
    deprecated: tuple[str, ...] = ()
    resolved: tuple[str, ...] = ()  # unknowns whose test passed again

    def to_json(self) -> dict[str, Any]:
        return {"tag": self.tag, "product": self.product, "since_ordinal": self.since_ordinal,
                "runs": list(self.runs), "added": list(self.added),
                "confirmed": list(self.confirmed), "superseded": list(self.superseded),
                "deprecated": list(self.deprecated), "resolved": list(self.resolved)}


@dataclass(frozen=True)
class ProposalList:
    """``knowledge proposals``: the queue, and the files in it that cannot be read."""

    proposals: tuple[Proposal, ...]
    damaged: tuple[Problem, ...] = ()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"proposals": [p.summary() for p in self.proposals]}
        if self.damaged:
            out["damaged"] = [p.as_dict() for p in self.damaged]
        return out


@dataclass(frozen=True)
class ProposalDecision:
    """``knowledge proposals accept|reject ID``."""

    id: str
    record_id: str
    path: str
    op: str
    decision: str  # accepted | rejected
    changed: bool

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "record_id": self.record_id, "path": self.path, "op": self.op,
                "decision": self.decision, "changed": self.changed}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ProposalDecision:
        return cls(str(data["id"]), str(data["record_id"]), str(data["path"]),
                   str(data["op"]), str(data["decision"]), bool(data["changed"]))


@dataclass(frozen=True)
class RollbackResult:
    """``knowledge rollback RUN_ID``: the runs rolled back and the records given back."""

    run_id: str
    runs: tuple[str, ...]
    restored: tuple[str, ...]
    removed: tuple[str, ...]
    changed: int
    already: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "runs": list(self.runs),
                "restored": list(self.restored), "removed": list(self.removed),
                "changed": self.changed, "already_rolled_back": self.already}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RollbackResult:
        return cls(str(data["run_id"]), tuple(data["runs"]), tuple(data["restored"]),
                   tuple(data["removed"]), int(data["changed"]),
                   bool(data.get("already_rolled_back")))


@dataclass(frozen=True)
class DoctorReport:
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
    recent_runs: tuple[Mapping[str, Any], ...] = ()
    vector_strategy: str = "sparse"  # what --strategy vector uses: memidex, static-floor

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



@dataclass(frozen=True)
class IngestPreview:
    """``runs ingest --dry-run``: what the run would teach at the ordinal it would get;
    nothing was written."""

    run_id: str
    product: str
    ordinal: int
    build_tag: str | None
    ci: bool
    changes: tuple[tuple[str, str, str], ...]  # (op, record id, title)
    proposals: tuple[tuple[str, str, str, str], ...]  # (id, op, record id, reason)
    analysis: Mapping[str, str]
    already: bool = False
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "product": self.product, "ordinal": self.ordinal,
                "build_tag": self.build_tag, "ci": self.ci, "dry_run": True,
                "changes": [{"op": op, "id": rid, "title": title}
                            for op, rid, title in self.changes],
                "proposals": [{"id": pid, "op": op, "record_id": rid, "reason": reason}
                              for pid, op, rid, reason in self.proposals],
                "analysis": dict(sorted(self.analysis.items())),
                "already_ingested": self.already, "notes": list(self.notes)}


@dataclass(frozen=True)
class ProposalDetail:
    """``knowledge proposals show ID``: the proposal, the record as it would be written
    and the record's file as it is now (None: the proposal adds it), secrets masked."""

    proposal: Proposal
    text: str
    current: str | None

    def to_json(self) -> dict[str, Any]:
        return {**self.proposal.summary(), "expected": self.proposal.expected,
                "text": self.text, "current": self.current}


@dataclass(frozen=True)
class RecordCounts:
    """How many records there are by product, kind and status — what counting the rows of
    ``knowledge list --all-products --json`` gives, in one query (the dashboard's overview)."""

    rows: tuple[tuple[str, str, str, int], ...]  # (product, kind, status, count), sorted
    level: str  # lexical-only (the index) or bundle-scan (the records read)

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


@dataclass(frozen=True)
class HealthStatus:
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

    def to_json(self) -> dict[str, Any]:
        return {"level": self.level, "levels": dict(self.levels), "note": self.note,
                "index": dict(self.index), "lease": dict(self.lease)}
