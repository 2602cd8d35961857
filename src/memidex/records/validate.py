"""Front matter mapping -> :class:`Record`, with every problem and its line.

Validation is strict about types and keys (a typo such as ``anchros`` is a problem, not
silently ignored) and lenient about order: lists whose order means nothing are sorted,
so a hand-written record and the canonical one compare equal.
"""

from __future__ import annotations

import re
from typing import Any

from memidex.errors import Problem, RecordError
from memidex.records.ids import ANCHOR_RE, ID_RE, PRODUCT_RE, record_id
from memidex.records.model import (
    EVIDENCE_KEY_ORDER,
    KINDS,
    MAX_ORDINAL,
    SOURCES,
    STATUSES,
    WRITERS,
    Evidence,
    HistoryEntry,
    Pairs,
    Record,
    Relations,
    Trust,
    Valid,
)

__all__ = ["TOP_KEYS", "EVIDENCE_KEY_ORDER", "record_from_mapping", "key_line"]

TOP_KEYS: tuple[str, ...] = (
    "id",
    "kind",
    "status",
    "previous_status",
    "product",
    "scope",
    "anchor",
    "anchors",
    "title",
    "written_by",
    "trust",
    "valid",
    "relations",
    "evidence_total",
    "evidence",
    "history",
)
_TOP_KEY_SET = frozenset(TOP_KEYS)
REQUIRED = ("id", "kind", "status", "product", "anchor", "title")
_EVIDENCE_STR = ("run", "test", "observed", "check", "artifact")
_EVIDENCE_USUAL = frozenset(("run", "test", "step", "observed"))
_EVIDENCE_KNOWN = _EVIDENCE_USUAL | {"check", "artifact"}
_HISTORY_KEYS = frozenset({"valid", "title", "body", "trust", "anchors", "status"})
_TRUST_KEYS = ("source", "confirmations", "contradictions", "last_confirmed")
_RELATION_KEYS = ("supersedes", "superseded_by", "cites", "contradicts")
_TRUST_KEY_SET = frozenset(_TRUST_KEYS)
_RELATION_KEY_SET = frozenset(_RELATION_KEYS)


def key_line(front_matter: str, key: str, first_line: int = 2) -> int:
    """The file line of top-level ``key`` (front matter starts on ``first_line``)."""
    m = re.search(rf"^{re.escape(key)}\s*:", front_matter, re.MULTILINE)
    if m is None:
        return first_line - 1
    return first_line + front_matter.count("\n", 0, m.start())


class _Collector:
    def __init__(self, path: str, front_matter: str, first_line: int) -> None:
        self.path = path
        self.fm = front_matter
        self.first_line = first_line
        self.problems: list[Problem] = []

    def add(self, key: str, reason: str) -> None:
        self.problems.append(Problem(self.path, key_line(self.fm, key, self.first_line), reason))


def _show(value: Any, *, bare: bool = False) -> str:
    """``value`` for a one-line reason: its repr (or, ``bare``, a printable string as is)."""
    if bare and isinstance(value, str) and value.isprintable() and len(value) <= 80:
        return value
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_count(v: Any) -> bool:
    """A run ordinal or a count: a whole number from 0 to :data:`MAX_ORDINAL`."""
    return _is_int(v) and 0 <= v <= MAX_ORDINAL


def _is_scalar(v: Any) -> bool:
    return v is None or isinstance(v, str | bool) or _is_int(v)


def _pairs(value: Any, c: _Collector, key: str, order: tuple[str, ...] = ()) -> Pairs | None:
    if value is None:
        return ()
    if not isinstance(value, dict):
        c.add(key, f"`{key}` must be a mapping")
        return None
    for k, v in value.items():
        if not isinstance(k, str) or not k:
            c.add(key, f"`{key}` keys must be non-empty strings")
            return None
        if not _is_scalar(v):
            c.add(key, f"`{key}.{k}` must be a string, a whole number, true/false or null")
            return None
    if tuple(value) == order:  # already in canonical order (as memidex writes it)
        return tuple(value.items())
    keys = [k for k in order if k in value] + sorted(k for k in value if k not in order)
    return tuple((k, value[k]) for k in keys)


def _id_list(value: Any, c: _Collector, key: str) -> tuple[str, ...] | None:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(
        isinstance(v, str) and ID_RE.fullmatch(v) for v in value
    ):
        c.add("relations", f"`relations.{key}` must be a list of record ids")
        return None
    return tuple(sorted(set(value)))


def _valid(value: Any, c: _Collector, key: str, name: str | None = None,
           closed: bool = False) -> Valid | None:
    """A window; ``name`` is how the reason names it (``key`` gives the line), ``closed``
    that ``until`` must be set (an earlier version's window)."""
    name = name or key
    if value is None:
        if closed:
            c.add(key, f"`{name}` needs a closed window: `valid: {{from, until}}`")
            return None
        return Valid()
    if not isinstance(value, dict) or set(value) - {"from", "until"}:
        c.add(key, f"`{name}` must be a mapping with `from` and `until`")
        return None
    start = value.get("from", 0)
    until = value.get("until")
    if not _is_count(start):
        c.add(key, f"`{name}.from` must be a run ordinal (a whole number from 0 to "
                   f"{MAX_ORDINAL})")
        return None
    if until is None and closed:
        c.add(key, f"`{name}.until` must be set: an earlier version's window is closed "
                   "(the first ordinal where it no longer held)")
        return None
    if until is not None and (not _is_count(until) or until <= start):
        if closed:
            c.add(key, f"`{name}.until` must be a run ordinal greater than `from` "
                       f"(from {start}, until {_show(until)})")
        else:
            c.add(key, f"`{name}.until` must be null or a run ordinal greater than `from`")
        return None
    return Valid(from_=start, until=until)


def _trust(value: Any, c: _Collector, key: str = "trust", name: str = "trust"
           ) -> Trust | None:
    if value is None:
        return Trust()
    if not isinstance(value, dict):
        c.add(key, f"`{name}` must be a mapping")
        return None
    if not value.keys() <= _TRUST_KEY_SET:
        unknown = sorted(set(value) - _TRUST_KEY_SET, key=str)
        c.add(key, f"unknown key `{name}.{_show(unknown[0], bare=True)}`")
        return None
    source = value.get("source", "local")
    if source not in SOURCES:
        c.add(key, f"`{name}.source` must be one of {', '.join(SOURCES)}")
        return None
    counts = []
    for field in ("confirmations", "contradictions"):
        n = value.get(field, 0)
        if not _is_count(n):
            c.add(key, f"`{name}.{field}` must be a whole number >= 0"
                  + (f" (at most {MAX_ORDINAL})" if _is_int(n) and n > 0 else ""))
            return None
        counts.append(n)
    last = value.get("last_confirmed")
    if last is not None and not _is_count(last):
        c.add(key, f"`{name}.last_confirmed` must be null or a run ordinal (0 to "
                   f"{MAX_ORDINAL})")
        return None
    return Trust(source=source, confirmations=counts[0], contradictions=counts[1],
                 last_confirmed=last)


def _relations(value: Any, c: _Collector) -> Relations | None:
    if value is None:
        return Relations()
    if not isinstance(value, dict):
        c.add("relations", "`relations` must be a mapping")
        return None
    if not value.keys() <= _RELATION_KEY_SET:
        unknown = sorted(set(value) - _RELATION_KEY_SET, key=str)
        c.add("relations", f"unknown key `relations.{unknown[0]}`")
        return None
    by = value.get("superseded_by")
    if by is not None and not (isinstance(by, str) and ID_RE.fullmatch(by)):
        c.add("relations", "`relations.superseded_by` must be null or a record id")
        return None
    lists = [_id_list(value.get(k), c, k) for k in ("supersedes", "cites", "contradicts")]
    if any(x is None for x in lists):
        return None
    sup, cites, contra = (x or () for x in lists)
    return Relations(supersedes=sup, superseded_by=by, cites=cites, contradicts=contra)


def _anchor_list(value: Any) -> list[str] | None:
    if value is None:
        return []
    if not isinstance(value, list) or not all(
            isinstance(a, str) and ANCHOR_RE.fullmatch(a) and "\n" not in a for a in value):
        return None
    return value


def _history(value: Any, c: _Collector, anchor: Any) -> tuple[HistoryEntry, ...] | None:
    """Earlier versions: each window closed, oldest first, none overlapping the next."""
    if value is None:
        return ()
    if not isinstance(value, list):
        c.add("history", "`history` must be a list of earlier versions")
        return None
    out: list[HistoryEntry] = []
    for i, item in enumerate(value):
        name = f"history[{i}]"
        if not isinstance(item, dict) or not item.keys() <= _HISTORY_KEYS:
            c.add("history", f"`{name}` must be a mapping of valid, title, body and "
                             "optionally trust, anchors and status")
            return None
        valid = _valid(item.get("valid"), c, "history", "history" if "valid" in item
                       else name, closed=True)
        title, body = item.get("title"), item.get("body", "")
        if not isinstance(title, str) or not title or not isinstance(body, str):
            c.add("history", f"`{name}` needs a string title (and a string body)")
            return None
        if valid is None:
            return None
        trust = None
        if "trust" in item:
            trust = _trust(item["trust"], c, "history", f"{name}.trust")
            if trust is None:
                return None
        anchors = None
        if "anchors" in item:
            raw = _anchor_list(item["anchors"])
            if raw is None:
                c.add("history", f"`{name}.anchors` must be a list of type:value strings")
                return None
            anchors = tuple(sorted({a for a in raw if a != anchor}))
        status = item.get("status")
        if status is not None and status not in STATUSES:
            c.add("history", f"`{name}.status` must be one of {', '.join(STATUSES)}, "
                             f"not {_show(status)}")
            return None
        prev = out[-1].valid if out else None
        if prev is not None and valid.from_ < (prev.until or 0):
            c.add("history", f"`{name}` (runs {valid.from_}..{valid.until}) must start at or "
                             f"after the end of history[{i - 1}] (runs {prev.from_}.."
                             f"{prev.until}): versions are listed oldest first and their "
                             "windows do not overlap")
            return None
        out.append(HistoryEntry(valid=valid, title=title, body=body, trust=trust,
                                anchors=anchors, status=status))
    return tuple(out)


def _evidence_item(item: dict[Any, Any]) -> Evidence | None:
    """The evidence item the general path below builds from ``item``, when every value
    is of its type (None: let that path look, and name the problem): the same fields, and
    the other keys in ``extra`` sorted by key, as it orders them."""
    get = item.get
    run, test, step, observed = get("run"), get("test"), get("step"), get("observed")
    check, artifact = get("check"), get("artifact")
    if not ((run is None or type(run) is str) and (test is None or type(test) is str)
            and (observed is None or type(observed) is str)
            and (check is None or type(check) is str)
            and (artifact is None or type(artifact) is str)
            and (step is None or (type(step) is int and 0 <= step <= MAX_ORDINAL))):
        return None
    extra = [(k, v) for k, v in item.items() if k not in _EVIDENCE_KNOWN]
    if not all(type(k) is str and k and _is_scalar(v) for k, v in extra):
        return None
    extra.sort(key=_first)
    return Evidence(run, test, step, observed, check, artifact, tuple(extra))


def _first(pair: tuple[str, Any]) -> str:
    return pair[0]


def _evidence(value: Any, c: _Collector) -> tuple[Evidence, ...] | None:
    if value is None:
        return ()
    if not isinstance(value, list):
        c.add("evidence", "`evidence` must be a list of mappings")
        return None
    out = []
    for i, item in enumerate(value):
        # the common case first: a mapping of the four usual keys, each of its type
        if type(item) is dict and item.keys() <= _EVIDENCE_USUAL:
            run, test, step, observed = (item.get("run"), item.get("test"), item.get("step"),
                                         item.get("observed"))
            if ((run is None or type(run) is str) and (test is None or type(test) is str)
                    and (observed is None or type(observed) is str)
                    and (step is None or (type(step) is int and 0 <= step <= MAX_ORDINAL))):
                out.append(Evidence(run, test, step, observed))
                continue
        if type(item) is dict:  # then as the curator writes it: a check, a claim
            found = _evidence_item(item)
            if found is not None:
                out.append(found)
                continue
        pairs = _pairs(item, c, "evidence", EVIDENCE_KEY_ORDER)
        if pairs is None:
            return None
        known: dict[str, Any] = {}
        extra = []
        for k, v in pairs:
            if k == "step" or k in _EVIDENCE_STR:
                known[k] = v
            else:
                extra.append((k, v))
        for k in _EVIDENCE_STR:
            if known.get(k) is not None and not isinstance(known[k], str):
                c.add("evidence", f"`evidence[{i}].{k}` must be a string, not "
                                  f"{_show(known[k])} (quote it: YAML reads yes, no, on, "
                                  "off, null and numbers as other types)")
                return None
        step = known.get("step")
        if step is not None and not _is_count(step):
            c.add("evidence", f"`evidence[{i}].step` must be a step index (a whole number "
                              f">= 0), not {_show(step)}")
            return None
        out.append(Evidence(run=known.get("run"), test=known.get("test"), step=step,
                            observed=known.get("observed"), check=known.get("check"),
                            artifact=known.get("artifact"), extra=tuple(extra)))
    return tuple(out)


def record_from_mapping(
    data: Any, body: str, *, path: str, front_matter: str, first_line: int = 2
) -> Record:
    """Validate front matter and build the record, or raise :class:`RecordError`."""
    c = _Collector(path, front_matter, first_line)
    if not isinstance(data, dict):
        raise RecordError([Problem(path, first_line, "front matter must be a YAML mapping")])
    if not data.keys() <= _TOP_KEY_SET:
        for key in data:
            if key not in _TOP_KEY_SET:
                c.add(str(key), f"unknown key `{_show(key, bare=True)}`")
    missing = [k for k in REQUIRED if data.get(k) in (None, "")]
    for key in missing:
        c.problems.append(Problem(path, first_line - 1, f"missing required key `{key}`"))
    rid, kind, status = data.get("id"), data.get("kind"), data.get("status")
    product, anchor, title = data.get("product"), data.get("anchor"), data.get("title")
    if "id" not in missing and not (isinstance(rid, str) and ID_RE.fullmatch(rid)):
        c.add("id", "`id` must be lowercase letters, digits and '-'")
    kind_ok = kind in KINDS
    if "kind" not in missing and not kind_ok:
        c.add("kind", f"`kind` must be one of {', '.join(KINDS)}, not {_show(kind)}")
    if "status" not in missing and status not in STATUSES:
        c.add("status", f"`status` must be one of {', '.join(STATUSES)}, not {_show(status)}")
    product_ok = isinstance(product, str) and PRODUCT_RE.fullmatch(product) is not None
    if "product" not in missing and not product_ok:
        c.add("product", "`product` must be a name of letters, digits, '.', '_' or '-'")
    anchor_ok = (
        isinstance(anchor, str) and ANCHOR_RE.fullmatch(anchor) is not None and "\n" not in anchor
    )
    if "anchor" not in missing and not anchor_ok:
        c.add("anchor", f"`anchor` must look like type:value, not {_show(anchor)}")
    if "title" not in missing and not (isinstance(title, str) and "\n" not in title):
        c.add("title", "`title` must be a one-line string")
    anchors_raw = data.get("anchors") or []
    if not isinstance(anchors_raw, list) or not all(
        isinstance(a, str) and ANCHOR_RE.fullmatch(a) and "\n" not in a for a in anchors_raw
    ):
        c.add("anchors", "`anchors` must be a list of type:value strings")
        anchors_raw = []
    scope = _pairs(data.get("scope"), c, "scope")
    trust = _trust(data.get("trust"), c)
    valid = _valid(data.get("valid"), c, "valid")
    relations = _relations(data.get("relations"), c)
    history = _history(data.get("history"), c, anchor)
    evidence = _evidence(data.get("evidence"), c)
    previous = data.get("previous_status")
    written_by = data.get("written_by")
    if written_by is not None and written_by not in WRITERS:
        c.add("written_by", f"`written_by` must be one of {', '.join(WRITERS)}, not "
                            f"{_show(written_by)}")
    evidence_total = data.get("evidence_total")
    if evidence_total is not None and (
            isinstance(evidence_total, bool) or not isinstance(evidence_total, int)
            or not len(evidence or ()) <= evidence_total <= MAX_ORDINAL):
        c.add("evidence_total", "`evidence_total` must be a whole number, at least the "
                                "number of `evidence` items")
    if relations is not None and status in STATUSES:
        _status_combination(c, status, previous, relations)
    if "\x00" in body:
        c.problems.append(Problem(path, first_line + front_matter.count("\n") + 1
                                  + body.count("\n", 0, body.index("\x00")),
                                  "the body holds a NUL byte (\\0): remove it"))
    if valid is not None and history:
        last = history[-1].valid
        assert last.until is not None
        if last.until > valid.from_:
            c.add("history", f"`history[{len(history) - 1}]` ends at {last.until}, after "
                             f"`valid.from` ({valid.from_}): the current version begins "
                             "where the last earlier one ends, or later")
    # The id is checked whenever what it is derived from is valid, so a file with other
    # problems still learns its expected id in the same report.
    if (
        isinstance(rid, str)
        and ID_RE.fullmatch(rid)
        and kind_ok
        and anchor_ok
        and product_ok
        and scope is not None
    ):
        assert isinstance(kind, str) and isinstance(anchor, str) and isinstance(product, str)
        expected = record_id(kind, anchor, product, dict(scope))
        if rid != expected:
            c.add("id", "id does not match its content (kind, anchor, product, scope): "
                        f"expected {expected}")
    if c.problems:
        raise RecordError(c.problems)
    assert isinstance(rid, str) and isinstance(kind, str) and isinstance(status, str)
    assert isinstance(product, str) and isinstance(anchor, str) and isinstance(title, str)
    assert scope is not None and trust is not None and valid is not None
    assert relations is not None and history is not None and evidence is not None
    anchors = tuple(sorted({a for a in anchors_raw if a != anchor}))
    return Record(
        id=rid,
        kind=kind,
        status=status,
        product=product,
        anchor=anchor,
        title=title,
        scope=tuple(sorted(scope)),
        anchors=anchors,
        trust=trust,
        valid=valid,
        relations=relations,
        evidence=evidence,
        history=history,
        body=body,
        written_by=written_by,
        evidence_total=evidence_total,
        previous_status=previous,
    )


_SERVED = ("active", "candidate")


def _status_combination(c: _Collector, status: str, previous: Any,
                        relations: Relations) -> None:
    """Status and the keys that go with it agree (``docs/curation.md``): only a superseded
    record (or a quarantined one that was superseded) names a replacement, and
    ``previous_status`` is kept only while quarantined."""
    by = relations.superseded_by
    if previous is not None:
        if status != "quarantined":
            c.add("previous_status", f"`previous_status` is kept only while a record is "
                                     f"quarantined, not {status}")
            return
        if previous not in STATUSES or previous == "quarantined":
            c.add("previous_status", "`previous_status` must be one of "
                                     f"{', '.join(s for s in STATUSES if s != 'quarantined')}"
                                     f", not {_show(previous)}")
            return
    if by is None:
        return
    if status in _SERVED or (status == "quarantined" and previous in _SERVED + (
            "deprecated",)):
        shown = status if status != "quarantined" else f"quarantined from {previous}"
        c.add("relations", f"`relations.superseded_by` is set but the record is {shown}: "
                           "a record replaced by another has status superseded")

