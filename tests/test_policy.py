"""Policies: rules people wrote, one per mapping or several in a list, errors with lines."""

from __future__ import annotations

import pytest

from memidex.errors import Problem, RecordError
from memidex.records import Policy, parse_policies

MAPPING = b"""\
# the SPEC example, block style
id: no-real-cards
rule: Only use the test card 4242 4242 4242 4242
applies_to: {products: [shop-web], anchors: ["page:/checkout*"]}
severity: must
"""

LIST = b"""\
- {id: no-real-cards, rule: "Only use the test card 4242 4242 4242 4242",
   applies_to: {products: [shop-web], anchors: ["page:/checkout*"]}, severity: must}

- id: staging-only
  rule: Run against staging, never production
  severity: should

- id: be-polite
  rule: "  Say please  "
  applies_to:
    products: [shop-api, shop-web, shop-api]
    anchors: "api:*"
  severity: info
"""


def problems(data: bytes) -> list[Problem]:
    with pytest.raises(RecordError) as info:
        parse_policies(data, "policies/p.yaml")
    for p in info.value.problems:
        assert p.path == "policies/p.yaml" and "\n" not in p.reason
    return list(info.value.problems)


def test_mapping_file() -> None:
    [policy] = parse_policies(MAPPING, "policies/cards.yaml")
    assert policy == Policy(
        id="no-real-cards",
        rule="Only use the test card 4242 4242 4242 4242",
        severity="must",
        products=("shop-web",),
        anchors=("page:/checkout*",),
        path="policies/cards.yaml",
        line=2,
    )


def test_list_file() -> None:
    policies = parse_policies(LIST, "p.yaml")
    assert [p.id for p in policies] == ["no-real-cards", "staging-only", "be-polite"]
    assert [p.line for p in policies] == [1, 4, 8]
    assert [p.severity for p in policies] == ["must", "should", "info"]
    polite = policies[2]
    assert polite.rule == "Say please"
    assert polite.products == ("shop-api", "shop-web")  # sorted, without repeats
    assert polite.anchors == ("api:*",)  # a single string is a one-item list
    assert policies[1].products == () and policies[1].anchors == ()


def test_empty_file_and_defaults() -> None:
    assert parse_policies(b"", "p.yaml") == []
    assert parse_policies(b"# nothing yet\n", "p.yaml") == []
    [p] = parse_policies(b"id: x\nrule: y\n", "p.yaml")
    assert (p.severity, p.products, p.anchors) == ("must", (), ())


def test_bom_and_crlf() -> None:
    data = b"\xef\xbb\xbf" + MAPPING.replace(b"\n", b"\r\n")
    [policy] = parse_policies(data, "p.yaml")
    assert policy.id == "no-real-cards" and policy.line == 2


def test_applies_to() -> None:
    [p] = parse_policies(MAPPING, "p.yaml")
    assert p.applies_to("shop-web", ["page:/checkout/pay", "el:x"])
    assert p.applies_to("shop-web", ("page:/checkout",))
    assert not p.applies_to("shop-web", ["page:/cart"])
    assert not p.applies_to("shop-api", ["page:/checkout"])
    assert not p.applies_to("shop-web", None)
    [anywhere] = parse_policies(b"id: x\nrule: y\n", "p.yaml")
    assert anywhere.applies_to("any", None)


@pytest.mark.parametrize(
    ("old", "new", "reason"),
    [
        (b"severity: must", b"severity: critical", "policy no-real-cards: `severity` must be "
                                                   "one of must, should, info"),
        (b"severity: must", b"severity: [must]", "policy no-real-cards: `severity` must be"),
        (b"severity: must", b"sevrity: must", "unknown policy key `sevrity`"),
        (b"rule: Only use the test card 4242 4242 4242 4242\n", b"",
         "policy no-real-cards: `rule` must be a non-empty string"),
        (b"rule: Only use the test card 4242 4242 4242 4242", b"rule: 12",
         "policy no-real-cards: `rule`"),
        (b"id: no-real-cards", b"id: No Real Cards", "policy `id` must be lowercase"),
        (b"{products: [shop-web],", b"{product: [shop-web],",
         "policy no-real-cards: `applies_to` may hold `products` and `anchors` lists"),
        (b"products: [shop-web]", b"products: [shop-web, 1]",
         "policy no-real-cards: `applies_to.products` and `.anchors` must be string lists"),
    ],
)
def test_bad_policy_reports_file_and_line(old: bytes, new: bytes, reason: str) -> None:
    assert old in MAPPING
    [p] = problems(MAPPING.replace(old, new, 1))
    assert p.line == 2
    assert p.reason.startswith(reason), p.reason


def test_bad_item_in_a_list_reports_its_own_line() -> None:
    [p] = problems(LIST.replace(b"severity: should", b"severity: sometimes"))
    assert p.line == 4 and "policy staging-only: `severity`" in p.reason
    [p] = problems(LIST.replace(b"  rule: Run against staging, never production\n", b""))
    assert p.line == 4 and "`rule` must be a non-empty string" in p.reason
    [p] = problems(LIST + b"- just a string\n")
    assert p.line == 14 and p.reason.startswith("a policy must be a mapping")


def test_regression_every_bad_policy_in_a_file_is_reported() -> None:
    # parse_policies used to stop at the first bad policy of a list
    data = LIST.replace(b"severity: should", b"severity: sometimes").replace(
        b"severity: info", b"colour: blue"
    )
    found = problems(data)
    assert [(p.line, p.reason.split(":")[0]) for p in found] == [
        (4, "policy staging-only"),
        (8, "unknown policy key `colour`"),
    ]


def test_yaml_syntax_error_line() -> None:
    unclosed = MAPPING.replace(b'["page:/checkout*"]}', b'["page:/checkout*"]')
    [p] = problems(unclosed)
    assert p.line in (4, 5) and p.reason.startswith("YAML: ")
    [p] = problems(b"id: a\nrule: b\n  severity: must\n")
    assert p.line == 3 and p.reason.startswith("YAML: ")


def test_non_utf8_reports_its_line() -> None:
    [p] = problems(MAPPING.replace(b"4242 4242", b"4242 \xff", 1))
    assert (p.line, p.reason) == (3, "not valid UTF-8")


@pytest.mark.parametrize("value", [b"2024-13-45", b"1" * 5000, b"[" * 3000 + b"]" * 3000])
def test_regression_unbuildable_values_are_record_errors(value: bytes) -> None:
    # used to escape as ValueError / RecursionError instead of a RecordError with a line
    [p] = problems(b"id: a\nrule: " + value + b"\n")
    assert p.line >= 1 and p.reason.startswith("YAML")


def test_top_level_scalar_is_not_a_policy() -> None:
    [p] = problems(b"just words\n")
    assert p.line == 1 and p.reason.startswith("a policy must be a mapping")
