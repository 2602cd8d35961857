"""Record ids (SPEC §2): ``<kind>-<slug>-<hash>``, computable by any runner in any language."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memidex.records import KINDS, anchor_slug, record_id
from memidex.records.ids import ID_RE, scope_json
from strategies import anchors, products, scalars, tricky_text

# --- an independent reimplementation of SPEC §2, written from the text, not the code ------

_SLUG_CHARS = set("abcdefghijklmnopqrstuvwxyz0123456789")
_JSON_SHORT = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r",
               "\t": "\\t"}


def ref_slug(anchor: str) -> str:
    out: list[str] = []
    for ch in anchor.lower():
        if ch in _SLUG_CHARS:
            out.append(ch)
        elif not out or out[-1] != "-":
            out.append("-")
    return "".join(out).strip("-")[:48].strip("-")


def ref_json_value(v: object) -> str:
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int):
        return str(v)
    assert isinstance(v, str)
    body = "".join(
        _JSON_SHORT.get(ch) or (f"\\u{ord(ch):04x}" if ord(ch) < 0x20 else ch) for ch in v
    )
    return f'"{body}"'


def ref_scope(scope: dict[str, object] | None) -> str:
    items = sorted((scope or {}).items())
    return "{" + ",".join(f"{ref_json_value(k)}:{ref_json_value(v)}" for k, v in items) + "}"


def ref_id(kind: str, anchor: str, product: str, scope: dict[str, object] | None) -> str:
    material = kind + "\x1f" + anchor + "\x1f" + product + "\x1f" + ref_scope(scope)
    return f"{kind}-{ref_slug(anchor)}-{hashlib.sha256(material.encode('utf-8')).hexdigest()[:16]}"


# --- the SPEC examples ---------------------------------------------------------------------


def test_spec_example_with_scope() -> None:
    rid = record_id("fact", "el:button:place-order", "shop-web", {"page": "/checkout"})
    assert rid == "fact-el-button-place-order-97c05f92322716e0"


@pytest.mark.parametrize("scope", [None, {}])
def test_spec_example_without_scope(scope: dict[str, object] | None) -> None:
    rid = record_id("fact", "el:button:place-order", "shop-web", scope)
    assert rid == "fact-el-button-place-order-60f22344989ae9fc"


def test_reference_implementation_agrees_with_spec_examples() -> None:
    assert ref_id("fact", "el:button:place-order", "shop-web", {"page": "/checkout"}) == (
        "fact-el-button-place-order-97c05f92322716e0"
    )
    assert ref_id("fact", "el:button:place-order", "shop-web", None) == (
        "fact-el-button-place-order-60f22344989ae9fc"
    )


def test_id_never_depends_on_wording_or_scope_order() -> None:
    a = record_id("caution", "el:x", "p", {"a": 1, "b": "two"})
    b = record_id("caution", "el:x", "p", {"b": "two", "a": 1})
    assert a == b
    assert a != record_id("fact", "el:x", "p", {"a": 1, "b": "two"})
    assert a != record_id("caution", "el:x", "q", {"a": 1, "b": "two"})
    assert a != record_id("caution", "el:x", "p", {"a": "1", "b": "two"})
    assert a != record_id("caution", "el:x", "p", {"a": True, "b": "two"})


# --- slug rules ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("anchor", "slug"),
    [
        ("el:button:place-order", "el-button-place-order"),
        ("EL:Button:Place-ORDER", "el-button-place-order"),
        ("page:/checkout//cart??step=2", "page-checkout-cart-step-2"),
        ("el:--a__b--", "el-a-b"),
        ("api:GET /v1/orders/{id}", "api-get-v1-orders-id"),
        ("el:café crème", "el-caf-cr-me"),
        ("el:😀", "el"),
        ("el:x" + "!" * 100, "el-x"),
        # cut to 48, then trimmed again: the cut lands just after a '-'
        ("a" * 47 + ":b", "a" * 47),
        ("a" * 46 + ":bc", "a" * 46 + "-b"),
        ("a" * 60, "a" * 48),
    ],
)
def test_anchor_slug_rules(anchor: str, slug: str) -> None:
    assert anchor_slug(anchor) == slug
    assert ref_slug(anchor) == slug


def test_slug_is_lowercased_before_filtering() -> None:
    # upper-case letters are kept (lowered), not treated as separators
    assert anchor_slug("el:ABC") == "el-abc"
    assert record_id("fact", "el:ABC", "p", None).startswith("fact-el-abc-")


# --- scope JSON ----------------------------------------------------------------------------


def test_non_ascii_scope_values_hash_as_utf8_not_escapes() -> None:
    scope = {"page": "/café", "größe": "😀"}
    assert scope_json(scope) == '{"größe":"😀","page":"/café"}'
    rid = record_id("fact", "el:x", "shop-web", scope)
    material = 'fact\x1fel:x\x1fshop-web\x1f{"größe":"😀","page":"/café"}'
    assert rid == "fact-el-x-" + hashlib.sha256(material.encode("utf-8")).hexdigest()[:16]
    escaped = (
        'fact\x1fel:x\x1fshop-web\x1f{"gr\\u00f6\\u00dfe":"\\ud83d\\ude00","page":"/caf\\u00e9"}'
    )
    assert rid != "fact-el-x-" + hashlib.sha256(escaped.encode("utf-8")).hexdigest()[:16]


def test_scope_json_is_compact_and_sorted() -> None:
    assert scope_json({"b": 1, "a": None, "c": True}) == '{"a":null,"b":1,"c":true}'
    assert scope_json({}) == "{}"


# --- properties ----------------------------------------------------------------------------

_scopes = st.none() | st.dictionaries(tricky_text(), scalars(), max_size=4)


@settings(max_examples=300)
@given(st.sampled_from(KINDS), anchors(), products(), _scopes)
def test_record_id_matches_independent_reimplementation(
    kind: str, anchor: str, product: str, scope: dict[str, object] | None
) -> None:
    rid = record_id(kind, anchor, product, scope)
    assert rid == ref_id(kind, anchor, product, scope)
    assert ID_RE.fullmatch(rid)


@settings(max_examples=300)
@given(st.text(max_size=120))
def test_slug_properties(anchor: str) -> None:
    slug = anchor_slug(anchor)
    assert slug == ref_slug(anchor)
    assert len(slug) <= 48
    assert not slug.startswith("-") and not slug.endswith("-")
    assert "--" not in slug
    assert set(slug) <= _SLUG_CHARS | {"-"}
