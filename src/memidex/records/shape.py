"""The one dictionary shape of a record that ``--json`` prints and the MCP server returns.

A listing row (:class:`RecordSummary`, its :func:`summary` dictionary) is the record's
first keys; :func:`record_dict` adds the rest. The index's rows and a record read from its
file give the same value.

``anchor`` is the main anchor and ``anchors`` is *every* anchor, main first — in
``show``, ``list`` and ``search`` alike (the file's ``anchors`` key holds only the
further ones; ``docs/cli.md`` documents the difference).
"""

from __future__ import annotations

from collections.abc import Sequence

from memidex.plain import Frozen, set_field

TYPE_CHECKING = False  # not typing's: a one-shot command imports no typing (~2 ms)
if TYPE_CHECKING:  # a search on the index reads no record file: no model import
    from typing import Any

    from memidex.records.model import HistoryEntry, Record

__all__ = ["RecordSummary", "record_dict", "summary", "summary_of"]


class RecordSummary(Frozen):
    """A listing row: a record's identity, title, every anchor (main first), trust and
    window — what ``knowledge list`` shows, from the index or from the file."""

    __slots__ = ("id", "path", "kind", "status", "product", "anchor", "title", "anchors", "source",
                 "confirmations", "contradictions", "last_confirmed", "valid_from", "valid_until")
    id: str
    path: str
    kind: str
    status: str
    product: str
    anchor: str
    title: str
    anchors: tuple[str, ...]
    source: str
    confirmations: int
    contradictions: int
    last_confirmed: int | None
    valid_from: int
    valid_until: int | None

    def __init__(self, id: str, path: str, kind: str, status: str, product: str, anchor: str,
                 title: str, anchors: tuple[str, ...], source: str, confirmations: int,
                 contradictions: int, last_confirmed: int | None, valid_from: int,
                 valid_until: int | None) -> None:
        set_field(self, "id", id)
        set_field(self, "path", path)
        set_field(self, "kind", kind)
        set_field(self, "status", status)
        set_field(self, "product", product)
        set_field(self, "anchor", anchor)
        set_field(self, "title", title)
        set_field(self, "anchors", anchors)
        set_field(self, "source", source)
        set_field(self, "confirmations", confirmations)
        set_field(self, "contradictions", contradictions)
        set_field(self, "last_confirmed", last_confirmed)
        set_field(self, "valid_from", valid_from)
        set_field(self, "valid_until", valid_until)

    def to_json(self) -> dict[str, Any]:
        return summary(id=self.id, path=self.path, kind=self.kind, status=self.status,
                       product=self.product, anchor=self.anchor, title=self.title,
                       anchors=self.anchors, source=self.source,
                       confirmations=self.confirmations, contradictions=self.contradictions,
                       last_confirmed=self.last_confirmed, valid_from=self.valid_from,
                       valid_until=self.valid_until)


def summary(*, id: str, path: str, kind: str, status: str, product: str, anchor: str,
            title: str, anchors: Sequence[str], source: str, confirmations: int,
            contradictions: int, last_confirmed: int | None, valid_from: int,
            valid_until: int | None) -> dict[str, Any]:
    """A listing row: identity, title, every anchor (main first), trust and window."""
    return {
        "id": id, "path": path, "kind": kind, "status": status, "product": product,
        "anchor": anchor, "title": title, "anchors": list(anchors),
        "trust": {"source": source, "confirmations": confirmations,
                  "contradictions": contradictions, "last_confirmed": last_confirmed},
        "valid": {"from": valid_from, "until": valid_until},
    }


def summary_of(r: Record, path: str) -> RecordSummary:
    """The listing row of a parsed record."""
    t = r.trust
    return RecordSummary(id=r.id, path=path, kind=r.kind, status=r.status,
                         product=r.product, anchor=r.anchor, title=r.title,
                         anchors=tuple(r.all_anchors), source=t.source,
                         confirmations=t.confirmations, contradictions=t.contradictions,
                         last_confirmed=t.last_confirmed, valid_from=r.valid.from_,
                         valid_until=r.valid.until)


def record_dict(r: Record, path: str) -> dict[str, Any]:
    """Everything a record holds: :func:`summary_of` plus scope, body, relations,
    evidence (each item as written, and how many it has seen: ``evidence_total``), who
    worded it (``written_by``: ``template``, ``model`` or null for a person) and history
    (each version's window, title, body, status, anchors and trust). ``anchors`` is every
    anchor, main first, as in a listing row."""
    out = summary_of(r, path).to_json()
    rel = r.relations
    out.update({
        "scope": dict(r.scope), "body": r.body,
        "relations": {"supersedes": list(rel.supersedes), "superseded_by": rel.superseded_by,
                      "cites": list(rel.cites), "contradicts": list(rel.contradicts)},
        "evidence": [dict(e) for e in r.evidence],
        "evidence_total": (r.evidence_total if r.evidence_total is not None
                           else len(r.evidence)),
        "written_by": r.written_by,
        "history": [_version(r, h) for h in r.history],
    })
    return out


def _version(r: Record, h: HistoryEntry) -> dict[str, Any]:
    """An earlier version, what the file leaves out filled in (``HistoryEntry.resolved``)."""
    trust, anchors, status = h.resolved(r)
    return {"valid": {"from": h.valid.from_, "until": h.valid.until}, "title": h.title,
            "body": h.body, "status": status,
            "anchors": [r.anchor, *(a for a in anchors if a != r.anchor)],
            "trust": {"source": trust.source, "confirmations": trust.confirmations,
                      "contradictions": trust.contradictions,
                      "last_confirmed": trust.last_confirmed}}
