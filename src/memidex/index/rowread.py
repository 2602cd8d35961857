"""The index rows of a canonical record file, straight from its bytes.

A rebuild spends most of its time turning each file into its rows. For a file in the
canonical form memidex writes (``memidex.records.codec.dump_record``) whose every value
is of a shape this module knows (comments aside, taken out as the fast YAML reader takes
them out), :func:`canonical_rows` reads the front matter with one
regular expression and builds the rows from its groups: no YAML reader, no JSON text, no
:class:`~memidex.records.model.Record` objects. For anything else — another key order,
comments, block style, a value of an unusual shape, a record validation would refuse, a
secrets file to mask with — it returns ``None`` and the caller takes the full path
(parse, validate, mask, then :func:`memidex.index.build.record_row` and friends), so a
bad file's problems are exactly the full path's.

What it accepts, it reads as YAML does: a plain token is read as a string only in the
shapes the fast reader of :mod:`memidex.records.yamlfast` reads as strings (property
tested against PyYAML there), with YAML's booleans and nulls excluded; a double-quoted
string only with the escapes YAML and JSON read alike. A hypothesis test holds the rows
to the full path's for generated canonical records and for mutations of them (where
either both agree or this declines).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from functools import cache, cached_property

from memidex.records.ids import ANCHOR_RE, ID_RE, PRODUCT_RE, anchor_slug, scope_json
from memidex.records.layout import canonical_parts
from memidex.records.vocab import MAX_ORDINAL
from memidex.store.files import check_rel

__all__ = ["FileReader", "canonical_rows", "prepare"]  # (and the type CanonicalRows)

TYPE_CHECKING = False  # not typing's: the first search after an edit imports no typing
if TYPE_CHECKING:
    from typing import Any

    CanonicalRows = tuple[tuple[Any, ...], tuple[tuple[Any, ...], ...],
                          tuple[tuple[str, int], ...], tuple[tuple[str, str, str], ...]]
    """(record row, history_versions rows, anchors, edges) as ``FileRows`` holds them."""

# A plain token YAML reads as the string itself: the simple tokens of the fast reader
# (``yamlfast._SIMPLE_TOKEN``), not starting with what YAML may read as a number, a date or
# a merge key, and none of YAML 1.1's booleans and nulls (checked where the token ends).
_R = r"[A-Za-z0-9_/.@()+'-]"
_WORDS = ("yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF"
          "|null|Null|NULL")
_S = rf"(?!(?:{_WORDS})[,\]}}\n:])(?>[A-Za-z_/(]{_R}*+(?:[: ]{_R}++)*+)"
# A double-quoted string with only the escapes YAML and JSON read alike, no character
# PyYAML refuses or folds (as ``yamlfast._QUOTED`` under ``_MUST_ESCAPE``).
_Q = (r'"(?:[^"\\\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff\ufffe\uffff]++'
      r'|\\["\\/bfnrt]|\\u(?![dD][89a-fA-F])[0-9a-fA-F]{4})*+"')
_V = rf"(?:{_S}|{_Q})"
_INT = r"(?:0|[1-9][0-9]{0,17})"  # 18 digits at most: always <= MAX_ORDINAL
_INTN = rf"(?:{_INT}|null)"
_ID = r"[a-z][a-z0-9]*-[a-z0-9-]*"  # a '-' inside: never a YAML boolean or null
_IDS = rf"(?:{_ID}(?:, {_ID})*+)?"


def _ev(key: str, value: str, following: str) -> str:
    """One optional ``key: value`` of an evidence item, then ``, `` and a later key, or
    the closing brace: strictly separated, keys in the canonical order."""
    after = rf"(?:, (?=[{following}])|(?=\}}))" if following else r"(?=\})"
    return rf"(?:{key}: {value}{after})?"


_TRUST = (rf"\{{source: (?P<source>local|ci|human|import), confirmations: (?P<conf>{_INT}),"
          rf" contradictions: (?P<contra>{_INT}), last_confirmed: (?P<last>{_INTN})\}}")
# The check and the claim as the curator writes them (anything else: the full path):
# a check's name (a plain word, never one YAML reads as a boolean or null), and the
# claim's hex hash, plain or quoted (quoted when YAML would read it as a number; any
# scalar is a valid extra key's value). Narrow, as the pattern's compile is paid by the
# first search after an edit.
_CHECK = rf"(?!(?:{_WORDS})[,}}])[a-z][a-z0-9-]*+"
_CLAIM = r'(?:[0-9a-f]{1,64}|"[0-9a-f]{1,64}")'
_EVIDENCE_ITEM = (r"\{" + _ev("run", _V, "tsoc") + _ev("test", _V, "soc")
                  + _ev("step", _INT, "oc") + _ev("observed", _V, "c")
                  + _ev("check", _CHECK, "c") + _ev("claim", _CLAIM, "") + r"\}")

_FRONT = (
    rf"id: (?P<id>{_S})\n"
    r"kind: (?P<kind>fact|caution|procedure|unknown)\n"
    r"status: (?P<status>candidate|active|superseded|deprecated|quarantined)\n"
    r"(?:previous_status: (?P<previous>candidate|active|superseded|deprecated)\n)?"
    rf"product: (?P<product>{_S})\n"
    r"(?:scope: \{(?P<scope>[^\n]*)\}\n)?"
    rf"anchor: (?P<anchor>{_V})\n"
    rf"anchors: \[(?P<anchors>(?:{_V}(?:, {_V})*+)?)\]\n"
    rf"title: (?P<title>{_V})\n"
    r"(?:written_by: (?:template|model)\n)?"
    rf"trust: {_TRUST}\n"
    rf"valid: \{{from: (?P<start>{_INT}), until: (?P<until>{_INTN})\}}\n"
    rf"relations: \{{supersedes: \[(?P<sup>{_IDS})\], superseded_by: (?P<by>{_ID}|null),"
    rf" cites: \[(?P<cites>{_IDS})\], contradicts: \[(?P<against>{_IDS})\]\}}\n"
    rf"(?:evidence_total: (?P<total>{_INT})\n)?"
    rf"(?:evidence:\n(?P<evidence>(?:  - {_EVIDENCE_ITEM}\n)++))?"
    r"(?:history:\n(?P<history>(?:  - \{[^\n]*\n)++))?"
)
_HISTORY_ITEM = (
    rf"  - \{{valid: \{{from: (?P<start>{_INT}), until: (?P<until>{_INT})\}},"
    rf" title: (?P<title>{_V}), body: (?P<body>{_V})(?:, trust: {_TRUST})?"
    rf"(?:, anchors: \[(?P<anchors>(?:{_V}(?:, {_V})*+)?)\])?"
    r"(?:, status: (?P<status>candidate|active|superseded|deprecated|quarantined))?\}\n"
)
"""One earlier version, its keys in the canonical order (``codec._history_dict``)."""
_SCOPE = (
    rf"(?P<k>(?!(?:{_WORDS}):)[A-Za-z_][A-Za-z0-9_]*+): "
    rf"(?P<v>{_Q}|null(?=, |\}}$)|true(?=, |\}}$)|false(?=, |\}}$)|-?{_INT}(?=, |\}}$)|{_S})"
    r"(?:, |(?=\}$))"
)
"""One ``key: value`` of a scope, matched in its text with the closing brace put back (so
a value's end is seen as YAML sees it)."""
_LONG_TOKEN = r"(?<![^,\[\]{}\n])[^,\[\]{}\n]{1000}"
"""A run as long as a key YAML would forget: declined, as ``yamlfast._load_whole`` does."""



class _Patterns:
    """The expressions, each compiled on its first use (~7 ms together): a refresh of
    one changed record compiles the front matter's (~4 ms) and only what that record
    needs (its history's, its scope's, a quoted anchor's)."""

    @cached_property
    def front(self) -> re.Pattern[str]:
        return re.compile(_FRONT)

    @cached_property
    def history_item(self) -> re.Pattern[str]:
        return re.compile(_HISTORY_ITEM)

    @cached_property
    def value(self) -> re.Pattern[str]:
        return re.compile(_V)

    @cached_property
    def scope(self) -> re.Pattern[str]:
        return re.compile(_SCOPE)

    @cached_property
    def long_token(self) -> re.Pattern[str]:
        return re.compile(_LONG_TOKEN)

    def all(self) -> tuple[re.Pattern[str], ...]:
        """Every one, compiled (a rebuild's parent, before it forks)."""
        return self.front, self.history_item, self.value, self.scope, self.long_token


@cache
def _patterns() -> _Patterns:
    return _Patterns()


def prepare() -> None:
    """Compile the expressions and import what a file that declines needs (~30 ms): in a
    rebuild's parent before it forks its parser processes, which then inherit them."""
    import memidex.records.codec  # noqa: F401 - the full path, for the files declined
    import memidex.records.digest  # noqa: F401

    _patterns().all()


_SERVED = ("active", "candidate")
_JSON_ESCAPED = re.compile(r'[\x00-\x1f"\\]')  # what json.dumps escapes, ensure_ascii off
_GOOD_ANCHORS: set[str] = set()
_GOOD_PRODUCTS: set[str] = set()


class FileReader:
    """Reads record files as :meth:`Store.read_with_stat` does (the bytes, and the stat of
    exactly the file they came from), without the buffered file object, each file opened
    relative to its folder (kept open until :meth:`close`)."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.dirs: dict[str, int] = {}

    def read(self, relpath: str) -> tuple[bytes, os.stat_result]:
        folder, _, name = check_rel(relpath).rpartition("/")
        dfd = self.dirs.get(folder)
        if dfd is None:
            dfd = os.open(os.path.join(self.root, folder), os.O_RDONLY | os.O_DIRECTORY)
            self.dirs[folder] = dfd
        fd = os.open(name, os.O_RDONLY, dir_fd=dfd)
        try:
            st = os.fstat(fd)
            data = os.read(fd, st.st_size + 1)
            if len(data) > st.st_size:  # it grew since the fstat: to the end, as f.read()
                more = os.read(fd, 65536)
                while more:
                    data += more
                    more = os.read(fd, 65536)
        finally:
            os.close(fd)
        return data, st

    def close(self) -> None:
        for dfd in self.dirs.values():
            os.close(dfd)
        self.dirs.clear()


def _text(token: str) -> str:
    """The string a token of ``_V`` reads as."""
    if token[0] != '"':
        return token
    if "\\" not in token:
        return token[1:-1]
    value: str = json.loads(token)
    return value


def _anchor_ok(a: str) -> bool:
    if a in _GOOD_ANCHORS:
        return True
    if "\n" in a or ANCHOR_RE.fullmatch(a) is None:
        return False
    if len(_GOOD_ANCHORS) < 65536:
        _GOOD_ANCHORS.add(a)
    return True


def _ids(group: str) -> list[str] | None:
    """Sorted, without repeats; None when one is longer than an id may be."""
    if not group:
        return []
    ids = group.split(", ")
    if not all(ID_RE.fullmatch(i) for i in ids):
        return None
    return sorted(set(ids))


def _scope(group: str) -> dict[str, Any] | None:
    out: dict[str, Any] = {}
    pos, n = 0, 0
    text = group + "}"
    while pos < len(group):
        m = _patterns().scope.match(text, pos)
        if m is None:
            return None
        v = m.group("v")
        value: Any
        if v[0] == '"':
            value = _text(v)
        elif v == "null":
            value = None
        elif v == "true":
            value = True
        elif v == "false":
            value = False
        elif v[0] in "-0123456789":
            value = int(v)
        else:
            value = v
        out[m.group("k")] = value
        n += 1
        pos = m.end()
    return out if n == len(out) and out else None  # a key twice, or `{}`: the full path's


def _scope_json(scope: dict[str, Any]) -> str:
    """:func:`memidex.records.ids.scope_json`, written out by hand (``_SCOPE``'s keys hold
    nothing JSON escapes; a string that does is left to ``json.dumps``)."""
    if not scope:
        return "{}"
    parts = []
    for k in sorted(scope):
        v = scope[k]
        if type(v) is str:
            if _JSON_ESCAPED.search(v):
                return scope_json(scope)
            parts.append(f'"{k}":"{v}"')
        elif v is None:
            parts.append(f'"{k}":null')
        elif v is True or v is False:
            parts.append(f'"{k}":{"true" if v else "false"}')
        else:
            parts.append(f'"{k}":{v}')  # an int
    return "{" + ",".join(parts) + "}"


def _record_id(kind: str, anchor: str, product: str, scope_text: str) -> str:
    """:func:`memidex.records.ids.record_id` from the scope's JSON text (computed once for
    the id and the row; the tests hold the two to each other)."""
    material = "\x1f".join((kind, anchor, product, scope_text))
    return f"{kind}-{anchor_slug(anchor)}-{hashlib.sha256(material.encode()).hexdigest()[:16]}"


def _anchor_items(raw: str | None) -> list[str] | None:
    """The anchors of a ``[…]`` list's inside, or None when one is not an anchor."""
    if not raw:
        return []
    items = [_text(t) for t in _patterns().value.findall(raw)] if '"' in raw else raw.split(", ")
    return items if all(_anchor_ok(a) for a in items) else None


def _history(group: str, head: tuple[str, str, str, str, str], start: int,
             extra: list[str]) -> tuple[str, tuple[tuple[Any, ...], ...]] | None:
    """(the ``history`` column, the ``history_versions`` rows) of the earlier versions;
    ``head`` is (id, product, kind, anchor, the joined anchors of the record)."""
    rid, product, kind, anchor, joined = head
    out: list[dict[str, Any]] = []
    rows: list[tuple[Any, ...]] = []
    pos, previous_until = 0, -1
    history_item = _patterns().history_item
    while pos < len(group):
        m = history_item.match(group, pos)
        if m is None:
            return None
        pos = m.end()
        g = m.group
        h_from, h_until = int(g("start")), int(g("until"))
        title, body = _text(g("title")), _text(g("body"))
        if h_until <= h_from or h_from < previous_until or not title:
            return None
        previous_until = h_until
        if g("source") is None:
            trust: tuple[Any, ...] = ("local", 0, 0, None)
        else:
            last = g("last")
            trust = (g("source"), int(g("conf")), int(g("contra")),
                     None if last == "null" else int(last))
        raw = g("anchors")
        if raw is None:
            anchors = joined
        else:
            items = _anchor_items(raw)
            if items is None:
                return None
            anchors = "\n".join((anchor, *sorted({a for a in items if a != anchor})))
        out.append({"from": h_from, "until": h_until, "title": title, "body": body})
        rows.append((len(rows) + 1, rid, product, kind, g("status") or "active", h_from,
                     h_until, title, body, anchors, *trust))
    if previous_until > start:
        return None  # the last earlier version ends after the current one begins
    return json.dumps(out, ensure_ascii=False, separators=(",", ":")), tuple(rows)


def canonical_rows(text: str, relpath: str) -> CanonicalRows | None:
    """The rows of a valid canonical record file's ``text``, or None (the full path's)."""
    parts = canonical_parts(text)
    if parts is None:
        return None
    front, body = parts
    p = _patterns()
    m = p.front.fullmatch(front)
    if m is None or p.long_token.search(front):
        return None
    (rid, kind, status, previous, product, scope_text, anchor_t, anchors_t, title_t, source,
     conf, contra, last_s, start_s, until_s, sup_t, by_s, cites_t, against_t, total, evidence,
     history_t) = m.groups()  # one call, not 22 (the groups of _FRONT, in order)
    anchor, title = _text(anchor_t), _text(title_t)
    if not title or "\n" in title or not _anchor_ok(anchor):
        return None
    if product not in _GOOD_PRODUCTS:
        if PRODUCT_RE.fullmatch(product) is None:
            return None
        _GOOD_PRODUCTS.add(product)
    items = _anchor_items(anchors_t)
    if items is None:
        return None
    extra = sorted({a for a in items if a != anchor})
    start = int(start_s)
    until = None if until_s == "null" else int(until_s)
    if until is not None and until <= start:
        return None
    by = None if by_s == "null" else by_s
    if previous is not None and status != "quarantined":
        return None
    if by is not None and (status in _SERVED or (
            status == "quarantined" and previous in (*_SERVED, "deprecated"))):
        return None
    if total is not None:
        if int(total) < (evidence.count("\n") if evidence else 0):
            return None
    sup, cites, against = _ids(sup_t), _ids(cites_t), _ids(against_t)
    if sup is None or cites is None or against is None or (
            by is not None and len(by) > 200):
        return None
    scope = {} if scope_text is None else _scope(scope_text)
    if scope is None:
        return None
    scope_text = _scope_json(scope)
    if rid != _record_id(kind, anchor, product, scope_text):
        return None
    joined = "\n".join((anchor, *extra))
    history_text: str | None = None
    versions: tuple[tuple[Any, ...], ...] = ()
    if history_t is not None:
        history = _history(history_t, (rid, product, kind, anchor, joined), start, extra)
        if history is None:
            return None
        history_text, versions = history
    row = (
        rid, relpath, kind, status, product, anchor, title, body, joined, scope_text,
        source, int(conf), int(contra),
        None if last_s == "null" else int(last_s), start, until, history_text,
    )
    edges = [(rid, "supersedes", t) for t in sup]
    if by is not None:
        edges.append((rid, "superseded_by", by))
    edges += [(rid, "cites", t) for t in cites]
    edges += [(rid, "contradicts", t) for t in against]
    anchors = ((anchor, 1), *((a, 0) for a in extra))
    return row, versions, anchors, tuple(edges)


assert MAX_ORDINAL >= 10**18  # _INT's 18 digits always fit
