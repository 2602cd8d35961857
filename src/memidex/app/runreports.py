"""What the run commands return — ``runs ingest``, ``runs list|show|diff``, ``runs
rollback``, the proposals — kept apart from the other results
(:mod:`memidex.app.results`, which re-exports them): frozen values with the ``to_json()``
that ``--json`` prints (docs/schemas/)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from memidex.plain import Frozen, set_field

if TYPE_CHECKING:
    from memidex.errors import Problem
    from memidex.learning.plan import Proposal

__all__ = ["DiffReport", "IngestPreview", "IngestResult", "ProposalDecision", "ProposalDetail",
           "ProposalList", "RollbackResult", "RunDetail", "RunList", "RunRow", "RunTest"]


class IngestResult(Frozen):
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
    already: bool
    resumed: bool
    notes: tuple[str, ...]
    queued: str | None

    __slots__ = ("run_id", "product", "ordinal", "build_tag", "ci", "changes", "proposals",
                 "analysis", "already", "resumed", "notes", "queued")

    def __init__(self, run_id: str, product: str, ordinal: int, build_tag: str | None, ci: bool,
                 changes: tuple[Mapping[str, Any], ...], proposals: tuple[str, ...],
                 analysis: Mapping[str, str], already: bool = False, resumed: bool = False,
                 notes: tuple[str, ...] = (), queued: str | None = None) -> None:
        set_field(self, "run_id", run_id)
        set_field(self, "product", product)
        set_field(self, "ordinal", ordinal)
        set_field(self, "build_tag", build_tag)
        set_field(self, "ci", ci)
        set_field(self, "changes", changes)
        set_field(self, "proposals", proposals)
        set_field(self, "analysis", analysis)
        set_field(self, "already", already)
        set_field(self, "resumed", resumed)
        set_field(self, "notes", notes)
        set_field(self, "queued", queued)

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


class RunRow(Frozen):
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

    __slots__ = ("run_id", "product", "ordinal", "build_tag", "ci", "verdicts", "changes",
                 "proposals", "done", "rolled_back")

    def __init__(self, run_id: str, product: str, ordinal: int, build_tag: str | None, ci: bool,
                 verdicts: Mapping[str, int], changes: Mapping[str, int], proposals: int,
                 done: bool, rolled_back: bool) -> None:
        set_field(self, "run_id", run_id)
        set_field(self, "product", product)
        set_field(self, "ordinal", ordinal)
        set_field(self, "build_tag", build_tag)
        set_field(self, "ci", ci)
        set_field(self, "verdicts", verdicts)
        set_field(self, "changes", changes)
        set_field(self, "proposals", proposals)
        set_field(self, "done", done)
        set_field(self, "rolled_back", rolled_back)

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "product": self.product, "ordinal": self.ordinal,
                "build_tag": self.build_tag, "ci": self.ci, "verdicts": dict(self.verdicts),
                "changes": dict(self.changes), "proposals": self.proposals,
                "done": self.done, "rolled_back": self.rolled_back}


class RunList(Frozen):
    """``runs list``: the runs ingested, in ordinal order."""

    runs: tuple[RunRow, ...]

    __slots__ = ("runs",)

    def __init__(self, runs: tuple[RunRow, ...]) -> None:
        set_field(self, "runs", runs)

    def to_json(self) -> dict[str, Any]:
        return {"runs": [r.to_json() for r in self.runs]}


class RunTest(Frozen):
    """One test of a shown run: its verdict, cause, and what the agent knew."""

    test_id: str
    verdict: str
    cause: str | None
    failure: str | None
    steps: int
    served_records: tuple[str, ...]
    briefed: tuple[str, ...]
    not_briefed: tuple[str, ...]

    __slots__ = ("test_id", "verdict", "cause", "failure", "steps", "served_records", "briefed",
                 "not_briefed")

    def __init__(self, test_id: str, verdict: str, cause: str | None, failure: str | None,
                 steps: int, served_records: tuple[str, ...], briefed: tuple[str, ...] = (),
                 not_briefed: tuple[str, ...] = ()) -> None:
        set_field(self, "test_id", test_id)
        set_field(self, "verdict", verdict)
        set_field(self, "cause", cause)
        set_field(self, "failure", failure)
        set_field(self, "steps", steps)
        set_field(self, "served_records", served_records)
        set_field(self, "briefed", briefed)
        set_field(self, "not_briefed", not_briefed)

    def to_json(self) -> dict[str, Any]:
        return {"test_id": self.test_id, "verdict": self.verdict, "cause": self.cause,
                "failure": self.failure, "steps": self.steps,
                "served_records": list(self.served_records), "briefed": list(self.briefed),
                "not_briefed": list(self.not_briefed)}


class RunDetail(Frozen):
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
    levels: tuple[str, ...]

    __slots__ = ("run_id", "product", "ordinal", "build_tag", "ci", "digest", "path", "tests",
                 "changes", "proposals", "done", "rolled_back", "notes", "levels")

    def __init__(self, run_id: str, product: str, ordinal: int, build_tag: str | None, ci: bool,
                 digest: str | None, path: str, tests: tuple[RunTest, ...],
                 changes: tuple[tuple[str, str], ...], proposals: tuple[str, ...], done: bool,
                 rolled_back: bool, notes: tuple[str, ...], levels: tuple[str, ...] = ()) -> None:
        set_field(self, "run_id", run_id)
        set_field(self, "product", product)
        set_field(self, "ordinal", ordinal)
        set_field(self, "build_tag", build_tag)
        set_field(self, "ci", ci)
        set_field(self, "digest", digest)
        set_field(self, "path", path)
        set_field(self, "tests", tests)
        set_field(self, "changes", changes)
        set_field(self, "proposals", proposals)
        set_field(self, "done", done)
        set_field(self, "rolled_back", rolled_back)
        set_field(self, "notes", notes)
        set_field(self, "levels", levels)

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "product": self.product, "ordinal": self.ordinal,
                "build_tag": self.build_tag, "ci": self.ci, "digest": self.digest,
                "path": self.path, "tests": [t.to_json() for t in self.tests],
                "changes": [{"op": op, "id": rid} for op, rid in self.changes],
                "proposals": list(self.proposals), "done": self.done,
                "rolled_back": self.rolled_back, "notes": list(self.notes),
                "levels": list(self.levels)}


class DiffReport(Frozen):
    """``knowledge diff TAG``: record ids added, confirmed, superseded and deprecated by
    the runs since the build's first ordinal."""

    tag: str
    product: str
    since_ordinal: int
    runs: tuple[str, ...]
    added: tuple[str, ...]
    confirmed: tuple[str, ...]
    superseded: tuple[str, ...]
    deprecated: tuple[str, ...]
    resolved: tuple[str, ...]  # unknowns whose test passed again

    __slots__ = ("tag", "product", "since_ordinal", "runs", "added", "confirmed", "superseded",
                 "deprecated", "resolved")

    def __init__(self, tag: str, product: str, since_ordinal: int, runs: tuple[str, ...],
                 added: tuple[str, ...] = (), confirmed: tuple[str, ...] = (),
                 superseded: tuple[str, ...] = (), deprecated: tuple[str, ...] = (),
                 resolved: tuple[str, ...] = ()) -> None:
        set_field(self, "tag", tag)
        set_field(self, "product", product)
        set_field(self, "since_ordinal", since_ordinal)
        set_field(self, "runs", runs)
        set_field(self, "added", added)
        set_field(self, "confirmed", confirmed)
        set_field(self, "superseded", superseded)
        set_field(self, "deprecated", deprecated)
        set_field(self, "resolved", resolved)

    def to_json(self) -> dict[str, Any]:
        return {"tag": self.tag, "product": self.product, "since_ordinal": self.since_ordinal,
                "runs": list(self.runs), "added": list(self.added),
                "confirmed": list(self.confirmed), "superseded": list(self.superseded),
                "deprecated": list(self.deprecated), "resolved": list(self.resolved)}


class ProposalList(Frozen):
    """``knowledge proposals``: the queue, and the files in it that cannot be read."""

    proposals: tuple[Proposal, ...]
    damaged: tuple[Problem, ...]

    __slots__ = ("proposals", "damaged")

    def __init__(self, proposals: tuple[Proposal, ...], damaged: tuple[Problem, ...] = ()) -> None:
        set_field(self, "proposals", proposals)
        set_field(self, "damaged", damaged)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"proposals": [p.summary() for p in self.proposals]}
        if self.damaged:
            out["damaged"] = [p.as_dict() for p in self.damaged]
        return out


class ProposalDecision(Frozen):
    """``knowledge proposals accept|reject ID``."""

    id: str
    record_id: str
    path: str
    op: str
    decision: str  # accepted | rejected
    changed: bool

    __slots__ = ("id", "record_id", "path", "op", "decision", "changed")

    def __init__(self, id: str, record_id: str, path: str, op: str, decision: str,
                 changed: bool) -> None:
        set_field(self, "id", id)
        set_field(self, "record_id", record_id)
        set_field(self, "path", path)
        set_field(self, "op", op)
        set_field(self, "decision", decision)
        set_field(self, "changed", changed)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "record_id": self.record_id, "path": self.path, "op": self.op,
                "decision": self.decision, "changed": self.changed}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ProposalDecision:
        return cls(str(data["id"]), str(data["record_id"]), str(data["path"]),
                   str(data["op"]), str(data["decision"]), bool(data["changed"]))


class RollbackResult(Frozen):
    """``knowledge rollback RUN_ID``: the runs rolled back and the records given back."""

    run_id: str
    runs: tuple[str, ...]
    restored: tuple[str, ...]
    removed: tuple[str, ...]
    changed: int
    already: bool

    __slots__ = ("run_id", "runs", "restored", "removed", "changed", "already")

    def __init__(self, run_id: str, runs: tuple[str, ...], restored: tuple[str, ...],
                 removed: tuple[str, ...], changed: int, already: bool = False) -> None:
        set_field(self, "run_id", run_id)
        set_field(self, "runs", runs)
        set_field(self, "restored", restored)
        set_field(self, "removed", removed)
        set_field(self, "changed", changed)
        set_field(self, "already", already)

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "runs": list(self.runs),
                "restored": list(self.restored), "removed": list(self.removed),
                "changed": self.changed, "already_rolled_back": self.already}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RollbackResult:
        return cls(str(data["run_id"]), tuple(data["runs"]), tuple(data["restored"]),
                   tuple(data["removed"]), int(data["changed"]),
                   bool(data.get("already_rolled_back")))


class IngestPreview(Frozen):
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
    already: bool
    notes: tuple[str, ...]

    __slots__ = ("run_id", "product", "ordinal", "build_tag", "ci", "changes", "proposals",
                 "analysis", "already", "notes")

    def __init__(self, run_id: str, product: str, ordinal: int, build_tag: str | None, ci: bool,
                 changes: tuple[tuple[str, str, str], ...],
                 proposals: tuple[tuple[str, str, str, str], ...], analysis: Mapping[str, str],
                 already: bool = False, notes: tuple[str, ...] = ()) -> None:
        set_field(self, "run_id", run_id)
        set_field(self, "product", product)
        set_field(self, "ordinal", ordinal)
        set_field(self, "build_tag", build_tag)
        set_field(self, "ci", ci)
        set_field(self, "changes", changes)
        set_field(self, "proposals", proposals)
        set_field(self, "analysis", analysis)
        set_field(self, "already", already)
        set_field(self, "notes", notes)

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "product": self.product, "ordinal": self.ordinal,
                "build_tag": self.build_tag, "ci": self.ci, "dry_run": True,
                "changes": [{"op": op, "id": rid, "title": title}
                            for op, rid, title in self.changes],
                "proposals": [{"id": pid, "op": op, "record_id": rid, "reason": reason}
                              for pid, op, rid, reason in self.proposals],
                "analysis": dict(sorted(self.analysis.items())),
                "already_ingested": self.already, "notes": list(self.notes)}


class ProposalDetail(Frozen):
    """``knowledge proposals show ID``: the proposal, the record as it would be written
    and the record's file as it is now (None: the proposal adds it), secrets masked."""

    proposal: Proposal
    text: str
    current: str | None

    __slots__ = ("proposal", "text", "current")

    def __init__(self, proposal: Proposal, text: str, current: str | None) -> None:
        set_field(self, "proposal", proposal)
        set_field(self, "text", text)
        set_field(self, "current", current)

    def to_json(self) -> dict[str, Any]:
        return {**self.proposal.summary(), "expected": self.proposal.expected,
                "text": self.text, "current": self.current}
