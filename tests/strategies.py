"""Hypothesis strategies for the records layer, for any test that needs records.

``records()`` builds valid :class:`Record` values exactly as the validator would return
them (sorted anchors without the main one, sorted and de-duplicated relation ids, scope
sorted by key, evidence keys in the canonical order, a normalised body) with the id
computed by :func:`record_id`; ``canonical_texts()`` is their canonical file text.
Strings never hold lone surrogates: they cannot be written as UTF-8 at all.
"""

from __future__ import annotations

import string
from functools import cache
from typing import Any

from hypothesis import strategies as st

from memidex.records import KINDS, STATUSES, HistoryEntry, Record, Relations, Trust, Valid
from memidex.records.codec import dump_record
from memidex.records.ids import record_id
from memidex.records.model import MAX_ORDINAL, SOURCES, Evidence

__all__ = [
    "YAML_SPECIALS",
    "anchors",
    "canonical_texts",
    "evidence_items",
    "front_matter_dicts",
    "ids",
    "products",
    "records",
    "scalars",
    "trusts",
    "tricky_text",
    "yaml_values",
]

# Strings YAML 1.1 (PyYAML) resolves to something other than a string, or reads oddly.
YAML_SPECIALS: tuple[str, ...] = (
    "yes", "no", "Yes", "NO", "on", "off", "On", "OFF", "y", "n", "true", "False", "TRUE",
    "null", "Null", "NULL", "~", "", " ", "1e3", "1.5", "1.", ".5", "-1", "+1", "0", "00",
    "012", "0x1f", "0o17", "0b101", "1_000", "1:20", "-1:20", "2024-01-01",
    "2024-01-01 10:00:00", "2024-1-1", ".inf", "-.inf", ".nan", ".NaN", "<<", "=", "-", "--",
    "---", "...", "- a", "a: b", "a:", "a:b", ":a", "#x", "a #b", "a#b", "'a'", '"a"', "'",
    '"', "a'b", "&a", "*a", "!a", "!!str", "|", ">", "%YAML", "@a", "`a", "?", "? a", "[a]",
    "{a: b}", "a, b", ",", "a,b", "a  b", " a", "a ", "\t", "a\tb", "\n", "a\nb", "\r\n",
    "\x00", "\x07", "\x1b", "\x7f", "\x85", "\xa0", "\u2028", "\u2029", "\ufeff", "\ufffe",
    "é", "ü:x", "😀", "\U0010ffff", "\\", "\\n", "/", "(x)", "page:/checkout",
    "el:button:place-order", "Place order (disabled)", "http://x.y/z?q=1",
)

_TEXT = st.text(st.characters(codec="utf-8"), max_size=20)
_PLAINISH = st.text(
    st.sampled_from(string.ascii_letters + string.digits + " _/.:@()+'-#,[]{}?&*!|>%=~\"\t"),
    max_size=12,
)


@cache
def tricky_text() -> st.SearchStrategy[str]:
    """Any text, biased towards what YAML reads differently from what it looks like."""
    piece = st.one_of(st.sampled_from(YAML_SPECIALS), _PLAINISH, _TEXT)
    return st.one_of(
        st.sampled_from(YAML_SPECIALS),
        _PLAINISH,
        _TEXT,
        st.lists(piece, min_size=2, max_size=4).map("".join),
    )


@cache
def scalars() -> st.SearchStrategy[Any]:
    """What a record may hold in scope and evidence: str, int, bool, None."""
    return st.one_of(
        tricky_text(),
        st.integers(min_value=-(10**40), max_value=10**40),
        st.booleans(),
        st.none(),
    )


# Keys: mostly short, now and then past YAML's 1024-character implicit-key limit (raw, or
# short but long once escaped).
_LONG_KEYS = st.sampled_from(["k" * 1100, "\x00" * 200, "é" * 1001, "a b" * 400])
_KEYS = st.one_of(tricky_text(), _LONG_KEYS)


@cache
def yaml_values(*, str_keys_only: bool = False) -> st.SearchStrategy[Any]:
    """Nested values :func:`dump_value` writes: scalars, lists and mappings."""
    keys = _KEYS if str_keys_only else st.one_of(_KEYS, st.integers(-5, 5), st.booleans())
    return st.recursive(
        scalars(),
        lambda inner: st.one_of(
            st.lists(inner, max_size=4),
            st.dictionaries(keys, inner, max_size=4),
        ),
        max_leaves=12,
    )


_TOP_KEY = st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True).filter(
    lambda k: k not in {"y", "n", "yes", "no", "on", "off", "true", "false", "null"}
)


@cache
def front_matter_dicts() -> st.SearchStrategy[dict[str, Any]]:
    """Top-level mappings shaped like front matter (lists of mappings go in block style)."""
    value = st.one_of(
        yaml_values(str_keys_only=True),
        st.lists(st.dictionaries(_KEYS, yaml_values(str_keys_only=True), max_size=3),
                 min_size=1, max_size=3),
    )
    return st.dictionaries(_TOP_KEY, value, min_size=1, max_size=6)


@cache
def ids() -> st.SearchStrategy[str]:
    """Strings ``ID_RE`` accepts (shorter than it allows: generating is the slow part)."""
    return st.from_regex(r"[a-z0-9][a-z0-9-]{0,30}", fullmatch=True)


@cache
def products() -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from(["shop-web", "shop.api", "App_2", "1.0", "123", "yes", "null"]),
        st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,20}", fullmatch=True),
    )


def _anchor_value(text: str) -> str:
    """Make any text a valid anchor value: one line, no whitespace at either edge."""
    value = "".join(" " if ch == "\n" else ch for ch in text)
    value = "".join(ch for ch in value if not ch.isspace() or ch == " ")
    return value.strip() or "x"


@cache
def anchors() -> st.SearchStrategy[str]:
    """``type:value`` anchors, from the plain ones to odd unicode values."""
    kind = st.from_regex(r"[a-z][a-z0-9_-]{0,6}", fullmatch=True)
    value = st.one_of(
        st.sampled_from(["/checkout", "button:place-order", "Place Order", "/café", "a, b",
                         "x:", "1e3", "#frag", "\"q\"", "'q'", "a\rb", "a\x85b", "😀"]),
        tricky_text().map(_anchor_value),
    )
    return st.builds(lambda k, v: f"{k}:{v}", kind, value)


_TYPED_KEYS = frozenset({"run", "test", "step", "observed", "check", "artifact"})


@cache
def evidence_items() -> st.SearchStrategy[Evidence]:
    """Evidence as the validator returns it: typed known keys (any of them may be
    absent), odd extra keys with any scalar, kept sorted."""
    text = st.none() | tricky_text()
    extra = st.dictionaries(
        _KEYS.map(lambda k: k or "k").filter(lambda k: k not in _TYPED_KEYS), scalars(),
        max_size=3,
    ).map(lambda d: tuple(sorted(d.items(), key=lambda kv: kv[0])))
    return st.builds(
        Evidence,
        run=text, test=text, step=st.none() | st.integers(0, MAX_ORDINAL), observed=text,
        check=text, artifact=text, extra=extra,
    )


_ORDINAL = st.integers(min_value=0, max_value=10**6)


@cache
def trusts() -> st.SearchStrategy[Trust]:
    return st.builds(
        Trust,
        source=st.sampled_from(SOURCES),
        confirmations=st.integers(0, 10**9) | st.just(MAX_ORDINAL),
        contradictions=st.integers(0, 10**9),
        last_confirmed=st.none() | _ORDINAL,
    )


@st.composite
def _versions(draw: st.DrawFn, anchor: str) -> tuple[tuple[HistoryEntry, ...], Valid]:
    """Earlier versions (closed, oldest first, gaps allowed, never overlapping) and the
    current window, which begins where the last one ends or later."""
    at = draw(_ORDINAL)
    history = []
    for _ in range(draw(st.integers(0, 3))):
        start = at + draw(st.integers(0, 5))
        until = start + draw(st.integers(1, 1000))
        full = draw(st.booleans())  # written by this memidex, or before it kept more
        history.append(HistoryEntry(
            valid=Valid(start, until),
            title=draw(tricky_text().map(lambda t: t or "t")),
            body=draw(tricky_text()),
            trust=draw(trusts()) if full else None,
            anchors=draw(st.lists(anchors(), max_size=3).map(
                lambda xs: tuple(sorted({a for a in xs if a != anchor})))) if full else None,
            status=draw(st.sampled_from(STATUSES)) if full else None,
        ))
        at = until
    start = at + draw(st.integers(0, 5)) if history else at
    span = draw(st.none() | st.integers(min_value=1, max_value=1000))
    return tuple(history), Valid(start, None if span is None else start + span)


@cache
def _id_tuple() -> st.SearchStrategy[tuple[str, ...]]:
    return st.lists(ids(), max_size=3).map(lambda xs: tuple(sorted(set(xs))))


@cache
def _body() -> st.SearchStrategy[str]:
    text = st.one_of(
        _TEXT,
        st.sampled_from(["Plain words.", "---", "a\n---\nb", "  indented\n\n\ttab", "\r\nx",
                         "**bold** and `code`", "# heading\n\n- item"]),
        st.lists(tricky_text(), max_size=4).map("\n".join),
    )
    # a NUL byte in a body is refused by validation (never silently dropped)
    return text.map(lambda b: b.replace("\0", "").strip("\n").rstrip())


@st.composite
def records(draw: st.DrawFn) -> Record:
    """A valid record, normalised as the validator returns it, its id computed."""
    kind = draw(st.sampled_from(KINDS))
    anchor = draw(anchors())
    product = draw(products())
    scope_map = draw(st.dictionaries(_KEYS.map(lambda k: k or "k"), scalars(), max_size=3))
    others = draw(st.lists(anchors(), max_size=4))
    title = draw(tricky_text().map(lambda t: t.replace("\n", " ") or "t"))
    trust = draw(trusts())
    status = draw(st.sampled_from(STATUSES))
    # only a superseded (or since quarantined) record names its replacement (docs/curation.md)
    names_successor = status in ("superseded", "quarantined")
    relations = Relations(
        supersedes=draw(_id_tuple()),
        superseded_by=draw(st.none() | ids()) if names_successor else None,
        cites=draw(_id_tuple()),
        contradicts=draw(_id_tuple()),
    )
    history, valid = draw(_versions(anchor))
    evidence = tuple(draw(st.lists(evidence_items(), max_size=3)))
    return Record(
        id=record_id(kind, anchor, product, scope_map),
        kind=kind,
        status=status,
        product=product,
        anchor=anchor,
        title=title,
        scope=tuple(sorted(scope_map.items(), key=lambda kv: kv[0])),
        anchors=tuple(sorted({a for a in others if a != anchor})),
        trust=trust,
        valid=valid,
        relations=relations,
        evidence=evidence,
        history=history,
        body=draw(_body()),
        written_by=draw(st.sampled_from([None, None, "template", "model"])),
        evidence_total=draw(st.none() | st.integers(len(evidence), 2**63 - 1)),
    )


@cache
def canonical_texts() -> st.SearchStrategy[str]:
    return records().map(dump_record)
