"""A record file in the canonical layout, read straight into its :class:`Record`.

:func:`read_canonical` gives :func:`memidex.records.codec.parse_record`'s record for a
file laid out as :func:`memidex.records.codec.dump_record` writes it — ``---`` lines, the
top-level keys in their fixed order, one ``key: value`` line each, ``evidence`` and
``history`` items one ``  - {…}`` line each, no comments — or ``None`` for anything else,
a problem included (the caller then parses it the full way, which reports the problem).

It reads as the full path reads, by the same parts: each line's value by the fast YAML
reader's own line reader (:func:`memidex.records.yamlfast._line`, what it reads a front
matter with line by line), each value checked by the validator's own checks
(:mod:`memidex.records.validate`), then the record-wide checks of
:func:`memidex.records.validate.record_from_mapping`. What it saves: a line that repeats
across records (``kind: fact``, ``trust: {…}``, ``valid: {…}``, ``relations: {…}`` …) is
read and checked once per process and its value shared (the values are frozen), and no
front-matter mapping is built to be walked again. A property test holds it to
:func:`parse_record` on generated canonical files and on damaged variants of them
(``tests/test_ingest_plan_read.py``): the same record, or ``None``.
"""

from __future__ import annotations

from typing import Any

from memidex.records.ids import ANCHOR_RE, ID_RE, PRODUCT_RE
from memidex.records.layout import canonical_parts
from memidex.records.loadback import cached_record_id
from memidex.records.model import (
    KINDS,
    MAX_ORDINAL,
    STATUSES,
    WRITERS,
    Evidence,
    HistoryEntry,
    Record,
    Relations,
    Trust,
    Valid,
)
from memidex.records.validate import (
    _Collector,
    _evidence,
    _history,
    _pairs,
    _relations,
    _status_combination,
    _trust,
    _valid,
)
from memidex.records.yamlfast import (
    _ITEM,
    _MUST_ESCAPE,
    _QUOTED,
    _SIMPLE_KEY_MAX,
    _line,
    _plain_json,
    _strict_loads,
    is_plain_str,
)

__all__ = ["read_canonical"]

_read_line = _line.__wrapped__  # uncached: most lines read here are one record's own


class _Decline(Exception):
    """Not a canonical file this reader takes: the full path's."""


_BAD = object()
_SEEN: dict[str, Any] = {}
"""A line that repeats across records -> its checked value (or ``_BAD``). Bounded."""
_SEEN_MAX = 4096
_WORDS = {name: frozenset(w for w in words if is_plain_str(w)) for name, words in
          (("kind", KINDS), ("status", STATUSES), ("written_by", WRITERS))}


def _text(line: str, key: str) -> Any:
    """The value of the ``key: …`` line, for a key whose value is a string: a plain one
    is the string itself (what :func:`_plain_json` makes of it, decoded), a lone quoted
    one is decoded as the line reader's one token (``_QUOTED``, nothing to escape)."""
    if not line.startswith(key + ": "):
        raise _Decline
    rest = line[len(key) + 2 :]
    if rest[:1] == '"':
        if _MUST_ESCAPE.search(rest) is None and _QUOTED.fullmatch(rest):
            try:
                return _strict_loads(rest)
            except ValueError:
                raise _Decline from None
    elif len(rest) <= _SIMPLE_KEY_MAX and is_plain_str(rest):
        return rest
    return _value(line, key)


def _value(line: str, key: str) -> Any:
    """The value of ``key: …`` on ``line`` as the fast reader reads it."""
    parsed = _read_line(line)
    if parsed is None or parsed[0] != key:
        raise _Decline
    try:
        return _strict_loads(parsed[1])
    except (ValueError, RecursionError):
        raise _Decline from None


def _flat(text: str) -> Any:
    """A flow list or mapping of plain tokens and nothing else (no quote, no nesting) —
    ``[a, b]``, ``{k: v, k: v}`` — read token by token by the line reader's rule for a
    plain token (:func:`_plain_json`), the list or mapping :func:`_read_line` reads;
    None for anything else (a mapping key that is no string, one given twice, an empty
    element), which the line reader then reads or declines."""
    inner = text[1:-1]
    if not inner or '"' in inner or "[" in inner or "]" in inner or "{" in inner \
            or "}" in inner:
        return None
    parts = inner.split(", ")
    if text[0] == "[":
        items = []
        for part in parts:
            token = _plain_json(part)
            if token is None or token[0] != '"':
                return None  # (a list of strings is all a record holds in one)
            items.append(part)
        return items
    out: dict[str, Any] = {}
    for part in parts:
        key, sep, raw = part.partition(": ")
        if not sep or ": " in raw or _plain_json(key) != f'"{key}"':
            return None
        token = _plain_json(raw)
        if token is None:
            return None
        out[key] = raw if token[0] == '"' else _SCALARS.get(token) if token in _SCALARS \
            else int(token)
    return out if len(out) == len(parts) else None


_SCALARS: dict[str, Any] = {"null": None, "true": True, "false": False}


def _item(line: str) -> Any:
    if line.startswith("  - {") and line.endswith("}"):
        flat = _flat(line[4:])
        if flat is not None:
            return flat
    parsed = _read_line(line)
    if parsed is None or parsed[0] != _ITEM:
        raise _Decline
    try:
        return _strict_loads(parsed[1])
    except (ValueError, RecursionError):
        raise _Decline from None


def _check(line: str, key: str) -> Any:
    """``key``'s line read and checked, once per process for a line seen before."""
    known = _SEEN.get(line)
    if known is None:
        known = _checked(line, key)
        if len(_SEEN) >= _SEEN_MAX:
            _SEEN.clear()
        _SEEN[line] = known
    if known is _BAD:
        raise _Decline
    return known


def _checked(line: str, key: str) -> Any:
    try:
        value = _value(line, key)
    except _Decline:
        return _BAD
    c = _Collector("", "", 2)
    out: Any
    if key in _WORDS:
        out = value if isinstance(value, str) and value in _WORDS[key] else _BAD
    elif key == "previous_status":
        out = value if isinstance(value, str) and value in STATUSES else _BAD
    elif key == "product":
        out = value if isinstance(value, str) and PRODUCT_RE.fullmatch(value) else _BAD
    elif key == "scope":
        scope = _pairs(value, c, "scope") if value is not None else None
        out = scope if scope else _BAD  # `scope: {}` or null: never written so
    elif key == "trust":
        out = _trust(value, c) if value is not None else _BAD
    elif key == "valid":
        out = _valid(value, c, "valid") if value is not None else _BAD
    elif key == "relations":
        out = _relations(value, c) if value is not None else _BAD
    elif key == "evidence_total":
        out = value if type(value) is int and 0 <= value <= MAX_ORDINAL else _BAD
    else:  # pragma: no cover - the callers name the keys above
        raise AssertionError(key)
    return _BAD if out is None or c.problems else out


def _anchor_ok(value: Any) -> bool:
    return isinstance(value, str) and ANCHOR_RE.fullmatch(value) is not None and \
        "\n" not in value


def read_canonical(text: str) -> Record | None:
    """``parse_record(text, path)`` for a canonical file (see the module doc); None for
    any other text, or one the full path would refuse."""
    parts = canonical_parts(text)
    if parts is None:
        return None
    front, body = parts
    try:
        return _read(front.split("\n"), body)
    except (_Decline, IndexError):  # (IndexError: never, lines[n] is "" — but declined)
        return None


def _read(lines: list[str], body: str) -> Record:
    if lines[-1] != "":
        raise _Decline
    n = len(lines) - 1  # lines[n] is "": a look one line past the last never fails
    i = 0
    rid = _text(lines[0], "id")
    if not (isinstance(rid, str) and ID_RE.fullmatch(rid)):
        raise _Decline
    i = 1
    if not lines[i].startswith("kind: "):
        raise _Decline
    kind = _check(lines[i], "kind")
    i += 1
    if not lines[i].startswith("status: "):
        raise _Decline
    status = _check(lines[i], "status")
    i += 1
    previous = None
    if lines[i].startswith("previous_status: "):
        previous = _check(lines[i], "previous_status")
        i += 1
    if not lines[i].startswith("product: "):
        raise _Decline
    product = _check(lines[i], "product")
    i += 1
    scope: tuple[tuple[str, Any], ...] = ()
    if lines[i].startswith("scope: "):
        scope = _check(lines[i], "scope")
        i += 1
    if not lines[i].startswith("anchor: "):
        raise _Decline
    anchor = _text(lines[i], "anchor")
    if not _anchor_ok(anchor):
        raise _Decline
    i += 1
    if not lines[i].startswith("anchors: "):
        raise _Decline
    line = lines[i]
    anchors_raw = _flat(line[9:]) if line[9:10] == "[" and line[-1] == "]" else None
    if anchors_raw is None:
        anchors_raw = _value(line, "anchors")
    if not isinstance(anchors_raw, list) or not all(_anchor_ok(a) for a in anchors_raw):
        raise _Decline
    i += 1
    if not lines[i].startswith("title: "):
        raise _Decline
    title = _text(lines[i], "title")
    if not (isinstance(title, str) and title and "\n" not in title):
        raise _Decline
    i += 1
    written_by = None
    if lines[i].startswith("written_by: "):
        written_by = _check(lines[i], "written_by")
        i += 1
    if not lines[i].startswith("trust: "):
        raise _Decline
    trust: Trust = _check(lines[i], "trust")
    i += 1
    if not lines[i].startswith("valid: "):
        raise _Decline
    valid: Valid = _check(lines[i], "valid")
    i += 1
    if not lines[i].startswith("relations: "):
        raise _Decline
    relations: Relations = _check(lines[i], "relations")
    i += 1
    total = None
    if lines[i].startswith("evidence_total: "):
        total = _check(lines[i], "evidence_total")
        i += 1
    c = _Collector("", "", 2)
    evidence: tuple[Evidence, ...] = ()
    if lines[i] == "evidence:":
        i += 1
        items = []
        while lines[i].startswith("  - "):
            items.append(_item(lines[i]))
            i += 1
        checked = _evidence(items, c) if items else None
        if checked is None:
            raise _Decline  # (`evidence:` with no items is null: never written so)
        evidence = checked
    history: tuple[HistoryEntry, ...] = ()
    if lines[i] == "history:":
        i += 1
        items = []
        while lines[i].startswith("  - "):
            items.append(_item(lines[i]))
            i += 1
        versions = _history(items, c, anchor) if items else None
        if versions is None:
            raise _Decline
        history = versions
    if i != n or c.problems:
        raise _Decline
    # the record-wide checks of record_from_mapping
    if total is not None and total < len(evidence):
        raise _Decline
    _status_combination(c, status, previous, relations)
    if c.problems:
        raise _Decline
    if history:
        until = history[-1].valid.until
        if until is None or until > valid.from_:
            raise _Decline
    if rid != cached_record_id(kind, anchor, product, scope):
        raise _Decline
    return Record(
        id=rid, kind=kind, status=status, product=product, anchor=anchor, title=title,
        scope=tuple(sorted(scope)), anchors=tuple(sorted({a for a in anchors_raw
                                                          if a != anchor})),
        trust=trust, valid=valid, relations=relations, evidence=evidence,
        history=history, body=body, written_by=written_by, evidence_total=total,
        previous_status=previous,
    )
