"""The record and policy model: frozen values, no I/O.

Defaults for every optional key are documented in ``docs/records.md``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from memidex.records.rule import Policy
from memidex.records.vocab import (
    KINDS,
    MAX_ORDINAL,
    SERVABLE_STATUSES,
    SEVERITIES,
    SOURCES,
    STATUSES,
    Pairs,
    Scalar,
)

__all__ = [
    "WRITERS",
    "KINDS",
    "STATUSES",
    "SERVABLE_STATUSES",
    "SOURCES",
    "SEVERITIES",
    "Scalar",
    "Pairs",
    "Trust",
    "Valid",
    "Relations",
    "HistoryEntry",
    "Evidence",
    "EVIDENCE_KEY_ORDER",
    "MAX_ORDINAL",
    "Record",
    "Policy",
]

WRITERS: tuple[str, ...] = ("template", "model")
"""The values of ``written_by``: who worded a learned record."""


EVIDENCE_KEY_ORDER: tuple[str, ...] = ("run", "test", "step", "observed")
"""Evidence keys written first, in this order; every other key follows, sorted."""


@dataclass(frozen=True, slots=True)
class Trust:
    """What the trust arithmetic reads (``memidex.trust``)."""

    source: str = "local"
    confirmations: int = 0
    contradictions: int = 0
    last_confirmed: int | None = None


@dataclass(frozen=True, slots=True)
class Valid:
    """The run-ordinal window a version is served in: ``from <= n < until``."""

    from_: int = 0
    until: int | None = None


@dataclass(frozen=True, slots=True)
class Relations:
    supersedes: tuple[str, ...] = ()
    superseded_by: str | None = None
    cites: tuple[str, ...] = ()
    contradicts: tuple[str, ...] = ()

    def edges(self) -> list[tuple[str, str]]:
        """Every (relation, target id) pair, in a fixed order."""
        out = [("supersedes", t) for t in self.supersedes]
        if self.superseded_by:
            out.append(("superseded_by", self.superseded_by))
        out += [("cites", t) for t in self.cites]
        out += [("contradicts", t) for t in self.contradicts]
        return out


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    """An earlier version of the belief, with its window closed: what a replay at an
    ordinal inside that window is served.

    ``trust``, ``anchors`` (the further anchors, without the main one) and ``status`` are
    ``None`` when the file does not say (entries written before memidex kept them); see
    :meth:`resolved` for what they then stand for.
    """

    valid: Valid
    title: str
    body: str = ""
    trust: Trust | None = None
    anchors: tuple[str, ...] | None = None
    status: str | None = None

    def resolved(self, record: Record) -> tuple[Trust, tuple[str, ...], str]:
        """(trust, further anchors, status) with what the file leaves out filled in: the
        default trust, the record's anchors (they name the subject, which no version
        changes) and ``active`` (the only status a version was retired from in place)."""
        return (self.trust if self.trust is not None else Trust(),
                self.anchors if self.anchors is not None else record.anchors,
                self.status if self.status is not None else "active")


@dataclass(frozen=True, slots=True)
class Evidence:
    """What one step of one run showed: the run id, the test, the step index and the
    observed text, optionally how it was checked (``check``, a check kind such as
    ``assert-disabled``) and a local artifact (``artifact``, a path under ``artifacts/``).

    Every field is optional (``None``: the file does not say); keys memidex does not know
    are kept, in ``extra``, so a record another tool wrote round-trips unchanged.
    Iterating gives the (key, value) pairs in the canonical order, so ``dict(e)`` is the
    mapping as written.
    """

    run: str | None = None
    test: str | None = None
    step: int | None = None
    observed: str | None = None
    check: str | None = None
    artifact: str | None = None
    extra: Pairs = ()

    def pairs(self) -> Pairs:
        """(key, value) pairs as written: run, test, step, observed, then the rest sorted
        by key (``artifact`` and ``check`` among them, where they always stood)."""
        first = ((k, v) for k, v in (("run", self.run), ("test", self.test),
                                     ("step", self.step), ("observed", self.observed))
                 if v is not None)
        rest: list[tuple[str, Scalar]] = [*self.extra]
        if self.check is not None:
            rest.append(("check", self.check))
        if self.artifact is not None:
            rest.append(("artifact", self.artifact))
        return (*first, *sorted(rest, key=lambda kv: kv[0]))

    def __iter__(self) -> Iterator[tuple[str, Scalar]]:
        return iter(self.pairs())


@dataclass(frozen=True, slots=True)
class Record:
    """One record file. ``scope`` is ordered key/value pairs."""

    id: str
    kind: str
    status: str
    product: str
    anchor: str
    title: str
    scope: Pairs = ()
    anchors: tuple[str, ...] = ()
    trust: Trust = field(default_factory=Trust)
    valid: Valid = field(default_factory=Valid)
    relations: Relations = field(default_factory=Relations)
    evidence: tuple[Evidence, ...] = ()
    history: tuple[HistoryEntry, ...] = ()
    body: str = ""
    written_by: str | None = None
    """Who chose the wording of a learned record: ``template`` (memidex's fixed templates)
    or ``model`` (the configured model); ``None``: a person, or not said."""
    evidence_total: int | None = None
    """How many evidence items the record has seen when ``evidence`` keeps only the last
    ones (the curator caps it); ``None``: ``evidence`` is all of it."""
    previous_status: str | None = None
    """Only while ``status`` is ``quarantined``: the status ``release`` restores
    (``None``: read from the front matter, :func:`memidex.records.transitions.release`)."""

    @property
    def all_anchors(self) -> tuple[str, ...]:
        """The main anchor first, then the others (sorted, without repeats)."""
        return (self.anchor, *(a for a in self.anchors if a != self.anchor))

    @property
    def relpath(self) -> str:
        """Where the record lives inside the knowledge folder."""
        return f"records/{self.kind}/{self.id}.md"
