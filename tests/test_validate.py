"""Validation: every problem in a record file, each with its line and a one-line reason."""

from __future__ import annotations

import pytest

from conftest import SPEC_RECORD
from memidex.errors import Problem, RecordError
from memidex.records import parse_record, record_id

BASE = SPEC_RECORD  # its lines: see tests/conftest.py
LINE = {"id": 2, "kind": 3, "status": 4, "product": 5, "scope": 6, "anchor": 7,
        "anchors": 8, "title": 9, "trust": 10, "valid": 11, "relations": 12, "evidence": 13}


def edit(*pairs: tuple[str, str]) -> str:
    text = BASE
    for old, new in pairs:
        assert old in text, old
        text = text.replace(old, new, 1)
    return text


def problems(text: str) -> list[Problem]:
    with pytest.raises(RecordError) as info:
        parse_record(text, "records/fact/r.md")
    found = list(info.value.problems)
    for p in found:
        assert p.path == "records/fact/r.md"
        assert p.reason and "\n" not in p.reason and "\r" not in p.reason, p
        assert str(p) == f"records/fact/r.md:{p.line}: {p.reason}"
    return found


def only(text: str) -> Problem:
    found = problems(text)
    assert len(found) == 1, found
    return found[0]


def test_base_is_valid() -> None:
    assert parse_record(BASE, "r.md").id == "fact-el-button-place-order-97c05f92322716e0"


@pytest.mark.parametrize("key", ["id", "kind", "status", "product", "anchor", "title"])
def test_missing_required_key(key: str) -> None:
    lines = [ln for ln in BASE.split("\n") if not ln.startswith(f"{key}:")]
    found = problems("\n".join(lines))
    missing = [p for p in found if p.reason == f"missing required key `{key}`"]
    assert len(missing) == 1
    assert missing[0].line == 1  # the front matter's opening line: the key is nowhere


@pytest.mark.parametrize("key", ["title", "status"])
def test_empty_required_value_counts_as_missing(key: str) -> None:
    line = next(ln for ln in BASE.split("\n") if ln.startswith(f"{key}:"))
    assert only(edit((line, f"{key}: ")).replace(f"{key}: \n", f"{key}:\n")).reason == (
        f"missing required key `{key}`"
    )


def test_bad_kind() -> None:
    p = problems(edit(("kind: fact", "kind: fakt")))[0]
    assert p.line == LINE["kind"]
    assert "`kind` must be one of fact, caution, procedure, unknown" in p.reason
    assert "fakt" in p.reason


def test_bad_status() -> None:
    p = only(edit(("status: active", "status: live")))
    assert p.line == LINE["status"]
    assert "`status` must be one of" in p.reason and "live" in p.reason


def test_unknown_top_level_key_typo() -> None:
    p = only(edit(("anchors:", "anchros:")))
    assert p.line == LINE["anchors"]
    assert p.reason == "unknown key `anchros`"


@pytest.mark.parametrize("anchor", ["button", "EL:x", "el:", "el: x", ":x", "1el:x", "el:x "])
def test_bad_anchor(anchor: str) -> None:
    found = problems(edit(("anchor: el:button:place-order", f"anchor: {anchor!r}")))
    assert found[0].line == LINE["anchor"]
    assert "`anchor` must look like type:value" in found[0].reason


def test_bad_further_anchors() -> None:
    p = only(edit(("anchors: [page:/checkout,", "anchors: [Page,")))
    assert p.line == LINE["anchors"]
    assert "`anchors` must be a list of type:value strings" in p.reason


def test_id_that_does_not_match_content_names_the_expected_id() -> None:
    p = only(edit(("product: shop-web", "product: shop-api")))
    expected = record_id("fact", "el:button:place-order", "shop-api", {"page": "/checkout"})
    assert p.line == LINE["id"]
    assert "id does not match its content" in p.reason
    assert p.reason.endswith(f"expected {expected}")


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("scope: {page: /checkout}", "scope: {page: /cart}"),
        ("scope: {page: /checkout}\n", ""),
        ("kind: fact", "kind: caution"),
        ("anchor: el:button:place-order", "anchor: el:button:Place-Order"),
    ],
)
def test_any_identity_change_breaks_the_id(old: str, new: str) -> None:
    p = only(edit((old, new)))
    assert p.line == LINE["id"] and "expected " in p.reason


def test_wording_does_not_change_the_id() -> None:
    # title and body are wording: the same id still validates (no "expected ..." problem)
    base = parse_record(BASE, "r.md")
    reworded = parse_record(edit(("title: Place order", "title: The place order"),
                                 ("The **Place order** button", "The order button")), "r.md")
    assert reworded.title == "The place order stays disabled until the terms box is ticked"
    assert reworded.body != base.body
    assert reworded.id == base.id == record_id("fact", "el:button:place-order", "shop-web",
                                               {"page": "/checkout"})


def test_badly_formed_id() -> None:
    p = only(edit(("id: fact-el", "id: Fact_el")))
    assert p.line == LINE["id"] and "`id` must be lowercase" in p.reason


@pytest.mark.parametrize(
    ("old", "new", "reason"),
    [
        ("cites: []", "cites: [Not An Id]", "`relations.cites` must be a list of record ids"),
        ("cites: []", "cites: [../../etc]", "`relations.cites` must be a list of record ids"),
        ("supersedes: []", "supersedes: x", "`relations.supersedes` must be a list"),
        ("contradicts: []", "contradicts: [1]", "`relations.contradicts` must be a list"),
        ("superseded_by: null", "superseded_by: A/B",
         "`relations.superseded_by` must be null or a record id"),
        ("superseded_by: null", "replaced_by: null", "unknown key `relations.replaced_by`"),
    ],
)
def test_relations_naming_non_ids(old: str, new: str, reason: str) -> None:
    p = only(edit((old, new)))
    assert p.line == LINE["relations"]
    assert p.reason.startswith(reason)


@pytest.mark.parametrize("until", ["36", "10", "0", "-1", "37.5", "'40'"])
def test_valid_until_must_be_after_from(until: str) -> None:
    p = only(edit(("until: null", f"until: {until}")))
    assert p.line == LINE["valid"]
    assert p.reason == "`valid.until` must be null or a run ordinal greater than `from`"


def test_valid_until_after_from_is_fine() -> None:
    assert parse_record(edit(("until: null", "until: 37")), "r.md").valid.until == 37


@pytest.mark.parametrize("field", ["confirmations", "contradictions"])
def test_negative_counts(field: str) -> None:
    text = edit((f"{field}: {3 if field == 'confirmations' else 0}", f"{field}: -1"))
    p = only(text)
    assert p.line == LINE["trust"]
    assert p.reason == f"`trust.{field}` must be a whole number >= 0"


@pytest.mark.parametrize(
    ("old", "new", "key"),
    [
        ("confirmations: 3", "confirmations: 3.0", "trust"),
        ("last_confirmed: 41", "last_confirmed: 4.1e1", "trust"),
        ("from: 36", "from: 36.0", "valid"),
        ("until: null", "until: .inf", "valid"),
        ("step: 3", "step: 3.5", "evidence"),
        ("page: /checkout", "page: 1.5", "scope"),
        ("title: Place order stays disabled until the terms box is ticked", "title: 2.5", "title"),
    ],
)
def test_floats_are_rejected(old: str, new: str, key: str) -> None:
    found = problems(edit((old, new)))
    assert found[0].line == LINE[key], found


def test_booleans_are_not_counts() -> None:
    p = only(edit(("confirmations: 3", "confirmations: true")))
    assert p.line == LINE["trust"]


def test_trust_source_and_keys() -> None:
    assert only(edit(("source: local", "source: web"))).reason.startswith(
        "`trust.source` must be one of local, ci, human, import"
    )
    assert only(edit(("source: local", "sauce: local"))).reason == "unknown key `trust.sauce`"


def test_scope_and_evidence_shapes() -> None:
    p = problems(edit(("scope: {page: /checkout}", "scope: {page: [a]}")))[0]
    assert (p.line, p.reason) == (LINE["scope"], "`scope.page` must be a string, a whole number, "
                                                 "true/false or null")
    p = problems(edit(("scope: {page: /checkout}", "scope: [page]")))[0]
    assert (p.line, p.reason) == (LINE["scope"], "`scope` must be a mapping")
    p = only(edit(("  - {run:", "  - [run,"), ("(disabled)}", "(disabled)]")))
    assert (p.line, p.reason) == (LINE["evidence"], "`evidence` must be a mapping")


def test_history_entries() -> None:
    good = BASE.replace("---\nThe", "history:\n  - {valid: {from: 1, until: 36}, title: Old, "
                                   "body: was enabled}\n---\nThe")
    record = parse_record(good, "r.md")
    assert record.history[0].title == "Old" and record.history[0].valid.until == 36
    bad = good.replace("until: 36}", "until: 1}")
    p = only(bad)
    assert p.line == 15 and "`history.until`" in p.reason
    p = only(good.replace("title: Old", "name: Old"))
    assert p.line == 15 and "`history[0]`" in p.reason


def test_yaml_syntax_error_line() -> None:
    p = only(edit(("valid: {from: 36, until: null}", "valid: {from: 36, until: null")))
    assert p.line in (LINE["valid"], LINE["relations"])
    assert p.reason.startswith("YAML: ")
    p = only(edit(("status: active", "status: active\n  bad: indent")))
    assert p.line == LINE["status"] + 1 and p.reason.startswith("YAML: ")


def test_front_matter_that_is_not_a_mapping() -> None:
    p = only("---\n- a\n- b\n---\nbody\n")
    assert (p.line, p.reason) == (2, "front matter must be a YAML mapping")
    p = only("---\n---\nbody\n")
    assert (p.line, p.reason) == (2, "front matter must be a YAML mapping")


def test_several_problems_are_all_reported() -> None:
    text = edit(
        ("status: active", "status: live"),
        ("product: shop-web", "product: shop-api"),
        ("anchors:", "anchros:"),
        ("confirmations: 3", "confirmations: -2"),
        ("until: null", "until: 20"),
        ("cites: []", "cites: [Nope!]"),
    )
    found = problems(text)
    lines = sorted(p.line for p in found)
    assert lines == [LINE[k] for k in
                     ("id", "status", "anchors", "trust", "valid", "relations")], found
    by_line = {p.line: p.reason for p in found}
    assert by_line[LINE["anchors"]] == "unknown key `anchros`"
    # regression: the id check used to run only on an otherwise valid file, so the
    # expected id was missing from a report that had other problems
    expected = record_id("fact", "el:button:place-order", "shop-api", {"page": "/checkout"})
    assert by_line[LINE["id"]].endswith(f"expected {expected}")
    with pytest.raises(RecordError) as info:
        parse_record(text, "r.md")
    assert str(info.value).endswith("(and 5 more)")


def test_id_is_not_checked_when_its_inputs_are_invalid() -> None:
    found = problems(edit(("kind: fact", "kind: fakt"), ("product: shop-web", "product: a b")))
    assert sorted(p.line for p in found) == [LINE["kind"], LINE["product"]]


def test_regression_unknown_key_with_a_line_break_stays_one_line() -> None:
    # the reason used to embed the key as is, breaking the one-line `path:line: reason`
    p = only(edit(("anchors:", '"anch\\nros":')))
    assert p.reason == "unknown key `'anch\\nros'`"


def test_bad_values_are_shown_on_one_line() -> None:
    title = "title: Place order stays disabled until the terms box is ticked"
    found = problems(edit(("kind: fact", 'kind: "fa\\nct\\r"'), (title, 'title: "a\\nb"')))
    assert {p.line for p in found} == {LINE["kind"], LINE["title"]}
