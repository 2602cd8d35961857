"""The canonical codec: record file bytes <-> Record, stable bytes, a tagged content hash."""

from __future__ import annotations

import hashlib

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import SPEC_RECORD
from memidex.errors import RecordError
from memidex.records import (
    Record,
    content_hash,
    dump_record,
    parse_record,
    parse_record_bytes,
    record_id,
    verify_hash,
)
from memidex.records.codec import split_front_matter
from memidex.records.model import Evidence
from memidex.records.yamlfast import fast_load
from strategies import canonical_texts, records

# SPEC §2, copied verbatim: hand-written, with comments, so it needs the PyYAML fallback.
SPEC_EXAMPLE = """\
---
id: fact-el-button-place-order-97c05f92322716e0
kind: fact                  # fact | caution | procedure | unknown
status: active              # candidate | active | superseded | deprecated | quarantined
product: shop-web
scope: {page: /checkout}    # optional mapping; part of the identity
anchor: el:button:place-order        # the main anchor: type:value
anchors: [page:/checkout, test:checkout-happy-path]   # further anchors
title: Place order stays disabled until the terms box is ticked
trust: {source: local, confirmations: 3, contradictions: 0, last_confirmed: 41}
valid: {from: 36, until: null}       # run ordinals: served while from <= n < until
relations: {supersedes: [], superseded_by: null, cites: [], contradicts: []}
evidence:
  - {run: r-0041, test: checkout-happy-path, step: 3, observed: "Place order (disabled)"}
---
The **Place order** button on /checkout is disabled until "I accept the terms" is ticked.
"""

SPEC_CANONICAL = SPEC_RECORD


def front(text: str) -> str:
    return split_front_matter(text, "x.md")[0]


# --- the round trips ------------------------------------------------------------------------


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(records())
def test_parse_of_dump_is_the_record(record: Record) -> None:
    text = dump_record(record)
    assert parse_record(text, "x.md") == record
    assert parse_record_bytes(text.encode("utf-8"), "x.md") == record


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(canonical_texts())
def test_dump_of_parse_is_byte_identical_and_fast(text: str) -> None:
    fast = fast_load(front(text))
    if "{? " not in text and ", ? " not in text:  # explicit (over-long) keys go to PyYAML
        assert fast is not None, "canonical front matter left the fast path"
    # and the fast path reads what any YAML reader reads (it agreeing with itself is not
    # enough: a 1100-character scope key used to round-trip here and break PyYAML)
    for loader in (yaml.CSafeLoader, yaml.SafeLoader):
        assert fast is None or fast == yaml.load(front(text), Loader=loader)  # noqa: S506
    assert dump_record(parse_record(text, "x.md")) == text
    data = text.encode("utf-8")
    assert dump_record(parse_record_bytes(data, "x.md")).encode("utf-8") == data


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(records())
def test_bom_and_crlf_files_parse_to_the_same_record(record: Record) -> None:
    text = dump_record(record)
    if "\r" in text:  # a CR in the body makes CRLF conversion ambiguous; covered below
        return
    crlf = text.replace("\n", "\r\n").encode("utf-8")
    bom = b"\xef\xbb\xbf" + text.encode("utf-8")
    for data in (crlf, bom, b"\xef\xbb\xbf" + crlf):
        parsed = parse_record_bytes(data, "x.md")
        assert parsed == record
        assert dump_record(parsed) == text


def test_spec_example_parses_on_the_fast_path() -> None:
    # comments and a quoted string: read by the fast reader, as PyYAML reads them
    fast = fast_load(front(SPEC_EXAMPLE))
    assert fast is not None
    assert fast == yaml.load(front(SPEC_EXAMPLE), Loader=yaml.CSafeLoader)  # noqa: S506
    record = parse_record(SPEC_EXAMPLE, "records/fact/x.md")
    assert record.id == "fact-el-button-place-order-97c05f92322716e0"
    assert record.scope == (("page", "/checkout"),)
    assert record.anchors == ("page:/checkout", "test:checkout-happy-path")
    assert (record.trust.confirmations, record.trust.last_confirmed) == (3, 41)
    assert (record.valid.from_, record.valid.until) == (36, None)
    assert record.evidence == (
        Evidence(run="r-0041", test="checkout-happy-path", step=3,
                 observed="Place order (disabled)"),
    )
    assert tuple(record.evidence[0]) == (  # iterating gives the pairs as written
        ("run", "r-0041"), ("test", "checkout-happy-path"), ("step", 3),
        ("observed", "Place order (disabled)"))
    assert record.body.startswith("The **Place order** button")
    assert record.relpath == "records/fact/fact-el-button-place-order-97c05f92322716e0.md"


def test_spec_example_canonical_dump_round_trips() -> None:
    record = parse_record(SPEC_EXAMPLE, "x.md")
    canonical = dump_record(record)
    assert canonical == SPEC_CANONICAL
    assert fast_load(front(canonical)) is not None
    assert parse_record(canonical, "x.md") == record
    assert dump_record(parse_record(canonical, "x.md")) == canonical


def test_hand_written_order_and_duplicates_are_normalised() -> None:
    text = SPEC_EXAMPLE.replace(
        "anchors: [page:/checkout, test:checkout-happy-path]",
        "anchors: [test:checkout-happy-path, el:button:place-order, page:/checkout, "
        "page:/checkout]",
    ).replace("cites: []", "cites: [b-2, a-1, b-2]")
    record = parse_record(text, "x.md")
    assert record.anchors == ("page:/checkout", "test:checkout-happy-path")
    assert record.relations.cites == ("a-1", "b-2")


def test_crlf_spec_example_with_bom_parses() -> None:
    data = b"\xef\xbb\xbf" + SPEC_EXAMPLE.replace("\n", "\r\n").encode("utf-8")
    assert parse_record_bytes(data, "x.md") == parse_record(SPEC_EXAMPLE, "x.md")


@pytest.mark.parametrize(
    "body", ["", "x", "a\n\nb", "  indented", "---", "a\n---\nb", "ends with spaces   "]
)
def test_body_is_normalised_and_kept(body: str) -> None:
    record = parse_record(SPEC_CANONICAL.split("---\n", 2)[0] + "---\n"
                          + SPEC_CANONICAL.split("---\n", 2)[1] + "---\n\n" + body + "\n\n",
                          "x.md")
    assert record.body == body.strip("\n").rstrip()
    assert parse_record(dump_record(record), "x.md") == record


def test_front_matter_closed_at_end_of_file() -> None:
    text = SPEC_CANONICAL.split("---\nThe")[0] + "---"
    assert parse_record(text, "x.md").body == ""


# --- errors with their line ----------------------------------------------------------------


def problem(text: str | bytes) -> tuple[int, str]:
    with pytest.raises(RecordError) as info:
        if isinstance(text, bytes):
            parse_record_bytes(text, "r.md")
        else:
            parse_record(text, "r.md")
    p = info.value.problem
    assert p.path == "r.md"
    assert "\n" not in p.reason
    return p.line, p.reason


def test_non_utf8_reports_its_line() -> None:
    data = SPEC_CANONICAL.encode("utf-8").replace(b"shop-web", b"shop-\xffweb", 1)
    line, reason = problem(data)
    assert (line, reason) == (5, "not valid UTF-8")
    line, _ = problem(b"---\n\xc3")
    assert line == 2


def test_missing_or_unclosed_front_matter() -> None:
    assert problem("id: x\n")[0] == 1
    assert "---" in problem("no front matter")[1]
    assert problem("---\nid: x\n")[0] == 1
    assert "not closed" in problem("---\nid: x\n")[1]


def test_yaml_syntax_error_reports_the_file_line() -> None:
    text = SPEC_CANONICAL.replace("trust: {source: local,", "trust: {source: [local,")
    line, reason = problem(text)
    assert line == 10  # the trust line
    assert reason.startswith("YAML: ")
    line, _ = problem(SPEC_CANONICAL.replace("title: Place", "title: : Place"))
    assert line == 9


@pytest.mark.parametrize(
    ("replacement", "why"),
    [
        ("title: 2024-13-45", "a date PyYAML resolves but cannot build"),
        ("title: " + "1" * 5000, "an int past Python's digit limit"),
        ("title: " + "[" * 3000 + "]" * 3000, "nesting past the parser's limit"),
        ("title: 2024-02-30 10:00:00", "an impossible timestamp"),
    ],
)
def test_regression_unbuildable_values_are_record_errors(replacement: str, why: str) -> None:
    # These used to escape parse_record as ValueError / RecursionError (not RecordError).
    text = SPEC_CANONICAL.replace(
        "title: Place order stays disabled until the terms box is ticked", replacement
    )
    line, reason = problem(text)
    assert reason.startswith("YAML"), why
    assert line >= 2


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(canonical_texts(), st.data())
def test_damaged_files_raise_record_error_only(text: str, data: st.DataObject) -> None:
    """Whatever a person does to a file, parsing answers a record or a RecordError."""
    for _ in range(data.draw(st.integers(1, 3))):
        i = data.draw(st.integers(0, len(text)))
        op = data.draw(st.sampled_from(["insert", "delete", "swap-line"]))
        if op == "insert":
            text = text[:i] + data.draw(st.sampled_from(list(":,[]{}#&*!|>'\"-? \t\n\r1a"))) + (
                text[i:]
            )
        elif op == "delete":
            text = text[:i] + text[i + 1 :]
        else:
            lines = text.split("\n")
            j = data.draw(st.integers(0, len(lines) - 1))
            lines.insert(j, lines.pop(data.draw(st.integers(0, len(lines) - 1))))
            text = "\n".join(lines)
    try:
        parse_record(text, "x.md")
    except RecordError as exc:
        for p in exc.problems:
            assert p.line >= 1 and "\n" not in p.reason


# --- content hash ------------------------------------------------------------------------


def test_content_hash_is_tagged_sha256_of_the_bytes() -> None:
    data = SPEC_CANONICAL.encode("utf-8")
    tagged = content_hash(data)
    assert tagged == "sha256:" + hashlib.sha256(data).hexdigest()
    assert verify_hash(data, tagged)
    assert not verify_hash(data + b" ", tagged)
    assert not verify_hash(data, tagged.removeprefix("sha256:"))  # untagged is refused
    assert not verify_hash(data, "md5:" + tagged.removeprefix("sha256:"))


@settings(max_examples=50, suppress_health_check=[HealthCheck.too_slow])
@given(canonical_texts())
def test_unchanged_record_keeps_its_hash(text: str) -> None:
    data = text.encode("utf-8")
    again = dump_record(parse_record_bytes(data, "x.md")).encode("utf-8")
    assert content_hash(again) == content_hash(data)
    assert verify_hash(again, content_hash(data))


@pytest.mark.parametrize("key", ["k" * 1100, "\x00" * 200])
def test_regression_long_scope_key_is_readable_by_pyyaml(key: str) -> None:
    # dump_record used to write `scope: {<1100 characters>: 1}`, which only fast_load read;
    # PyYAML (and any other YAML reader) refuses keys past 1024 characters.
    record = parse_record(SPEC_CANONICAL, "x.md")
    scope = ((key, 1),)
    record = Record(**{
        **{f: getattr(record, f) for f in Record.__slots__},
        "scope": scope,
        "id": record_id(record.kind, record.anchor, record.product, dict(scope)),
    })
    text = dump_record(record)
    assert "scope: {? " in text
    for loader in (yaml.CSafeLoader, yaml.SafeLoader):
        assert yaml.load(front(text), Loader=loader)["scope"] == {key: 1}  # noqa: S506
    assert parse_record(text, "x.md") == record
    assert dump_record(parse_record(text, "x.md")) == text
