"""A brief as a value: what :func:`memidex.serve.brief.build_brief` returns, with the
``to_json`` that ``brief --json`` prints (docs/schemas/brief.schema.json)."""

from __future__ import annotations

from memidex.plain import Frozen, set_field
from memidex.serve.rank import Ranked

TYPE_CHECKING = False  # not typing's: a one-shot command imports no typing (~2 ms)
if TYPE_CHECKING:
    from typing import Any

    from memidex.records.rule import Policy

__all__ = ["WITHHELD_IDS", "Brief", "BriefRecord"]

WITHHELD_IDS = 100
"""Ids listed per withheld reason (the count is always whole)."""


class BriefRecord(Frozen):
    """One served record, every string masked."""

    __slots__ = ("id", "kind", "status", "title", "body", "anchors", "ranked", "rank", "shared",
                 "hop", "tokens")
    id: str
    kind: str
    status: str
    title: str
    body: str
    anchors: tuple[str, ...]
    ranked: Ranked
    rank: int
    shared: tuple[str, ...]
    hop: tuple[str, ...]
    tokens: int

    def __init__(self, id: str, kind: str, status: str, title: str, body: str,
                 anchors: tuple[str, ...], ranked: Ranked, rank: int, shared: tuple[str, ...],
                 hop: tuple[str, ...], tokens: int = 0) -> None:
        set_field(self, "id", id)
        set_field(self, "kind", kind)
        set_field(self, "status", status)
        set_field(self, "title", title)
        set_field(self, "body", body)
        set_field(self, "anchors", anchors)
        set_field(self, "ranked", ranked)
        set_field(self, "rank", rank)
        set_field(self, "shared", shared)
        set_field(self, "hop", hop)
        set_field(self, "tokens", tokens)

    @property
    def trust(self) -> float:
        return self.ranked.trust.value

    def reasons(self) -> dict[str, Any]:
        r = self.ranked
        return {
            "rank": self.rank,
            "score": r.score,
            "tier": r.tier,
            "overlap": r.overlap,
            "shared": list(self.shared),
            "hop": list(self.hop),
            "cited": list(r.cited),
            "trust": r.trust.as_dict(),
            "version": {"number": r.row.version, "current": r.row.current,
                        "from": r.row.valid_from, "until": r.row.valid_until},
        }

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "status": self.status,
                "candidate": self.status == "candidate", "title": self.title,
                "body": self.body, "anchors": list(self.anchors), "trust": self.trust,
                "tokens": self.tokens, "reasons": self.reasons()}


class Brief(Frozen):
    """A brief: ``to_json`` is ``brief --json``; :func:`memidex.serve.render.markdown`
    its markdown.

    ``source``: ``team`` (the team index on PostgreSQL) or ``local``
    (docs/team-index.md); ``commit``: the team index's snapshot commit, or this clone's
    HEAD (None outside git); ``warning``: why the local index answered although a team
    index is configured (the JSON's ``notes`` carry it; the markdown does not)."""

    __slots__ = ("test_id", "product", "ordinal", "next_ordinal", "level", "test_anchors",
                 "hop_anchors", "policies", "records", "withheld", "fence", "budget", "tokens",
                 "explain", "notes", "source", "commit", "warning")
    test_id: str
    product: str
    ordinal: int
    next_ordinal: int
    level: str
    test_anchors: tuple[str, ...]
    hop_anchors: tuple[str, ...]
    policies: tuple[Policy, ...]
    records: tuple[BriefRecord, ...]
    withheld: dict[str, list[str]]
    fence: str
    budget: int | None
    tokens: int
    explain: bool
    notes: tuple[str, ...]
    source: str
    commit: str | None
    warning: str

    def __init__(self, test_id: str, product: str, ordinal: int, next_ordinal: int, level: str,
                 test_anchors: tuple[str, ...], hop_anchors: tuple[str, ...],
                 policies: tuple[Policy, ...], records: tuple[BriefRecord, ...],
                 withheld: dict[str, list[str]], fence: str, budget: int | None, tokens: int,
                 explain: bool = False, notes: tuple[str, ...] = (), source: str = "local",
                 commit: str | None = None, warning: str = "") -> None:
        set_field(self, "test_id", test_id)
        set_field(self, "product", product)
        set_field(self, "ordinal", ordinal)
        set_field(self, "next_ordinal", next_ordinal)
        set_field(self, "level", level)
        set_field(self, "test_anchors", test_anchors)
        set_field(self, "hop_anchors", hop_anchors)
        set_field(self, "policies", policies)
        set_field(self, "records", records)
        set_field(self, "withheld", withheld)
        set_field(self, "fence", fence)
        set_field(self, "budget", budget)
        set_field(self, "tokens", tokens)
        set_field(self, "explain", explain)
        set_field(self, "notes", notes)
        set_field(self, "source", source)
        set_field(self, "commit", commit)
        set_field(self, "warning", warning)

    @property
    def ids(self) -> list[str]:
        return [r.id for r in self.records]

    def to_json(self) -> dict[str, Any]:
        from memidex.fence import notice

        return {
            "test_id": self.test_id,
            "product": self.product,
            "ordinal": self.ordinal,
            "next_ordinal": self.next_ordinal,
            "level": self.level,
            "anchors": {"test": list(self.test_anchors), "hop": list(self.hop_anchors)},
            "fence": self.fence,
            "notice": notice(self.fence),
            "policies": [{"id": p.id, "rule": p.rule, "severity": p.severity}
                         for p in self.policies],
            "records": [r.to_json() for r in self.records],
            "withheld": {reason: {"count": len(ids), "ids": ids[:WITHHELD_IDS]}
                         for reason, ids in self.withheld.items()},
            "budget": {"tokens": self.budget, "used": self.tokens},
            "notes": [*self.notes, *([self.warning] if self.warning else [])],
            "source": self.source,
            "commit": self.commit,
        }
