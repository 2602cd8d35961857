"""The record and policy model: frozen values, no I/O.

Defaults for every optional key are documented in ``docs/records.md``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from memidex.records.vocab import (
    KINDS,
    SERVABLE_STATUSES,
    SEVERITIES,
    SOURCES,
    STATUSES,
    Pairs,
    Scalar,
)

__all__ = [
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
    "Record",
    "Policy",
]



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

    def contains(self, ordinal: int) -> bool:
        return self.from_ <= ordinal and (self.until is None or ordinal < self.until)


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
    """An earlier version of the belief, with its window closed."""

    valid: Valid
    title: str
    body: str = ""


@dataclass(frozen=True, slots=True)
class Record:
    """One record file. ``scope`` and each evidence item are ordered key/value pairs."""

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
    evidence: tuple[Pairs, ...] = ()
    history: tuple[HistoryEntry, ...] = ()
    body: str = ""

    @property
    def scope_dict(self) -> dict[str, Scalar]:
        return dict(self.scope)

    @property
    def all_anchors(self) -> tuple[str, ...]:
        """The main anchor first, then the others (sorted, without repeats)."""
        return (self.anchor, *(a for a in self.anchors if a != self.anchor))

    @property
    def relpath(self) -> str:
        """Where the record lives inside the knowledge folder."""
        return f"records/{self.kind}/{self.id}.md"


@dataclass(frozen=True, slots=True)
class Policy:
    """A rule people wrote. ``anchors`` are glob patterns (``page:/checkout*``)."""

    id: str
    rule: str
    severity: str = "must"
    products: tuple[str, ...] = ()
    anchors: tuple[str, ...] = ()
    path: str = ""
    line: int = 1

    def applies_to(self, product: str, anchors: tuple[str, ...] | list[str] | None) -> bool:
        """True when the policy covers ``product`` and (if it names anchors) one of ``anchors``.

        A policy with no anchor patterns applies to every test of its products.
        """
        from fnmatch import fnmatchcase

        if self.products and product not in self.products:
            return False
        if not self.anchors:
            return True
        return any(fnmatchcase(a, pat) for pat in self.anchors for a in anchors or ())
