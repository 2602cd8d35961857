"""The canonical codec: record file bytes <-> :class:`Record`.

Contract (``docs/records.md``):

* ``dump_record(parse_record(b)) == b`` for every canonical file ``b``;
* ``parse_record(dump_record(r)) == r`` for every valid record ``r``;
* parsing never touches the file; a file that is not canonical still parses (through
  PyYAML) and is left exactly as it is;
* ``content_hash`` is the tagged SHA-256 of the exact bytes (``sha256:<hex>``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from memidex.errors import Problem, RecordError
from memidex.records.canonical import read_canonical
from memidex.records.digest import HASH_TAG, content_hash, verify_hash
from memidex.records.model import HistoryEntry, Record, Scalar, Trust
from memidex.records.validate import record_from_mapping
from memidex.records.yamlfast import (
    dump_value,
    fast_load,
    one_line,
    strict_loader,
)

__all__ = [
    "HASH_TAG",
    "recall",
    "remember",
    "content_hash",
    "dump_record",
    "front_matter_of",
    "load_front_matter",
    "parse_record",
    "parse_record_bytes",
    "split_front_matter",
    "verify_hash",
]

def split_front_matter(text: str, path: str) -> tuple[str, str, int]:
    """Return (front matter, body, file line where the front matter starts)."""
    if text.startswith("\ufeff"):
        text = text[1:]
    if text.startswith("---\r\n"):
        text = text.replace("\r\n", "\n")
    if not text.startswith("---\n"):
        raise RecordError([Problem(path, 1, "a record must start with a '---' front matter line")])
    end = text.find("\n---\n", 3)
    if end < 0:
        if text.endswith("\n---"):
            end = len(text) - 4
        else:
            raise RecordError([Problem(path, 1, "front matter is not closed by a '---' line")])
    front = text[4 : end + 1]
    body = text[end + 5 :]
    return front, body.strip("\n").rstrip(), 2


def load_front_matter(front: str, path: str, first_line: int = 2) -> Any:
    """Fast canonical reader first, PyYAML's safe loader for anything else."""
    data = fast_load(front)
    if data is not None:
        return data
    import yaml

    try:
        return yaml.load(front, Loader=strict_loader())  # noqa: S506 - a safe loader
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = first_line + (mark.line if mark is not None else 0)
        reason = f"YAML: {exc.problem or exc.context or 'cannot parse'}"
        raise RecordError([Problem(path, line, reason)]) from None
    except yaml.YAMLError as exc:
        raise RecordError([Problem(path, first_line, f"YAML: {one_line(exc)}")]) from None
    except (ValueError, RecursionError) as exc:
        # A scalar PyYAML resolves but cannot build (2024-13-45, a 5,000-digit int), or
        # nesting too deep for the pure-Python loader: no mark, so the front matter line.
        reason = f"YAML: cannot read a value: {one_line(exc)}"
        raise RecordError([Problem(path, first_line, reason)]) from None


def parse_record(text: str, path: str) -> Record:
    """The record in ``text`` (the file at ``path``, named in a problem): a file in the
    canonical layout read straight into its record (:func:`read_canonical`, the same
    record), any other through the front matter's mapping and its validation."""
    record = read_canonical(text)
    if record is not None:
        return record
    front, body, first = split_front_matter(text, path)
    data = load_front_matter(front, path, first)
    return record_from_mapping(data, body, path=path, front_matter=front, first_line=first)


_RECENT: dict[str, Record] = {}
_RECENT_MAX = 8192


def remember(sha: str, record: Record) -> None:
    """Note that parsing the bytes with content hash ``sha`` gives ``record`` (the caller
    just parsed them): reading them back later in this process (the index refresh that
    follows an ingest) need not parse them again (:func:`recall`). Bounded."""
    if len(_RECENT) >= _RECENT_MAX:
        _RECENT.clear()
    _RECENT[sha] = record


def recall(sha: str) -> Record | None:
    """The record that parsing the bytes with content hash ``sha`` gave in this process
    (:func:`remember`), or None; exact by construction — the hash names the bytes."""
    return _RECENT.get(sha)


def parse_record_bytes(data: bytes, path: str) -> Record:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise RecordError([Problem(path, line, "not valid UTF-8")]) from None
    return parse_record(text, path)


def _pairs_dict(pairs: Iterable[tuple[str, Scalar]]) -> dict[str, Any]:
    return dict(pairs)


def _trust_dict(t: Trust) -> dict[str, Any]:
    return {"source": t.source, "confirmations": t.confirmations,
            "contradictions": t.contradictions, "last_confirmed": t.last_confirmed}


def _history_dict(h: HistoryEntry) -> dict[str, Any]:
    """One earlier version: window, title and body, then trust, anchors and status when
    known (an entry without them is written exactly as before they existed)."""
    entry: dict[str, Any] = {
        "valid": {"from": h.valid.from_, "until": h.valid.until},
        "title": h.title,
        "body": h.body,
    }
    if h.trust is not None:
        entry["trust"] = _trust_dict(h.trust)
    if h.anchors is not None:
        entry["anchors"] = list(h.anchors)
    if h.status is not None:
        entry["status"] = h.status
    return entry


def front_matter_of(record: Record) -> dict[str, Any]:
    """The mapping :func:`dump_record` writes for ``record`` — its keys in their order, a
    key it leaves out left out — which is what reading that front matter back gives."""
    r = record
    out: dict[str, Any] = {"id": r.id, "kind": r.kind, "status": r.status}
    if r.previous_status is not None:
        out["previous_status"] = r.previous_status
    out["product"] = r.product
    if r.scope:
        out["scope"] = _pairs_dict(r.scope)
    out["anchor"] = r.anchor
    out["anchors"] = list(r.anchors)
    out["title"] = r.title
    if r.written_by is not None:
        out["written_by"] = r.written_by
    out["trust"] = _trust_dict(r.trust)
    out["valid"] = {"from": r.valid.from_, "until": r.valid.until}
    rel = r.relations
    out["relations"] = {"supersedes": list(rel.supersedes),
                        "superseded_by": rel.superseded_by, "cites": list(rel.cites),
                        "contradicts": list(rel.contradicts)}
    if r.evidence_total is not None:
        out["evidence_total"] = r.evidence_total
    if r.evidence:
        out["evidence"] = [_pairs_dict(e) for e in r.evidence]
    if r.history:
        out["history"] = [_history_dict(h) for h in r.history]
    return out


def dump_record(record: Record) -> str:
    """The canonical text of ``record``: fixed key order, flow values, stable bytes —
    each line of :func:`front_matter_of`'s mapping as :func:`dump_value` writes it
    (``key: value``; ``evidence`` and ``history`` one ``  - {…}`` line an item), written
    here field by field, without the mapping (a property test holds the two to each
    other, ``tests/test_ingest_plan_encoded.py``)."""
    r = record
    dv = dump_value
    lines = ["---", f"id: {dv(r.id)}", f"kind: {dv(r.kind)}", f"status: {dv(r.status)}"]
    if r.previous_status is not None:
        lines.append(f"previous_status: {dv(r.previous_status)}")
    lines.append(f"product: {dv(r.product)}")
    if r.scope:
        lines.append(f"scope: {dv(_pairs_dict(r.scope))}")
    lines.append(f"anchor: {dv(r.anchor)}")
    lines.append(f"anchors: {dv(list(r.anchors))}")
    lines.append(f"title: {dv(r.title)}")
    if r.written_by is not None:
        lines.append(f"written_by: {dv(r.written_by)}")
    t = r.trust
    lines.append(f"trust: {{source: {dv(t.source)}, confirmations: {dv(t.confirmations)}, "
                 f"contradictions: {dv(t.contradictions)}, "
                 f"last_confirmed: {dv(t.last_confirmed)}}}")
    lines.append(f"valid: {{from: {dv(r.valid.from_)}, until: {dv(r.valid.until)}}}")
    rel = r.relations
    lines.append(f"relations: {{supersedes: {dv(list(rel.supersedes))}, "
                 f"superseded_by: {dv(rel.superseded_by)}, cites: {dv(list(rel.cites))}, "
                 f"contradicts: {dv(list(rel.contradicts))}}}")
    if r.evidence_total is not None:
        lines.append(f"evidence_total: {dv(r.evidence_total)}")
    if r.evidence:
        lines.append("evidence:")
        lines += [f"  - {dv(_pairs_dict(e))}" for e in r.evidence]
    if r.history:
        lines.append("history:")
        lines += [f"  - {dv(_history_dict(h))}" for h in r.history]
    lines.append("---")
    body = r.body.strip("\n").rstrip()
    return "\n".join(lines) + "\n" + (body + "\n" if body else "")
