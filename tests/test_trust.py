"""Trust arithmetic and the promotion gate (memidex.trust, docs/trust.md)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memidex.config import DEFAULT_HALF_LIFE_RUNS
from memidex.errors import ConfigError, InvalidInputError
from memidex.records.model import Record, Trust, Valid
from memidex.trust import (
    DEFAULT_PROMOTION,
    PromotionPolicy,
    age_factor,
    age_runs,
    confirm,
    contradict,
    promotion,
    record_trust,
    score,
)

BIG = 2**63 - 1
counts = st.integers(min_value=0, max_value=BIG)
small = st.integers(min_value=0, max_value=10_000)
anycount = st.one_of(small, counts)
half_lives = st.one_of(st.integers(min_value=1, max_value=1_000), st.integers(1, BIG))
sources = st.sampled_from(["human", "local", "ci", "import"])


@given(sources, anycount, anycount, anycount, anycount, half_lives)
def test_monotone_in_confirmations(source: str, a: int, b: int, d: int, age: int,
                                   h: int) -> None:
    lo, hi = sorted((a, b))
    assert score(source, lo, d, age, h).value <= score(source, hi, d, age, h).value


@given(sources, anycount, anycount, anycount, anycount, half_lives)
def test_non_increasing_in_contradictions(source: str, n: int, a: int, b: int, age: int,
                                          h: int) -> None:
    lo, hi = sorted((a, b))
    assert score(source, n, lo, age, h).value >= score(source, n, hi, age, h).value


@given(sources, anycount, anycount, anycount, anycount, half_lives)
def test_non_increasing_in_age(source: str, n: int, d: int, a: int, b: int, h: int) -> None:
    lo, hi = sorted((a, b))
    assert score(source, n, d, lo, h).value >= score(source, n, d, hi, h).value
    assert age_factor(lo, h) >= age_factor(hi, h)


@given(sources, anycount, anycount, anycount, half_lives)
def test_bounded_and_deterministic(source: str, n: int, d: int, age: int, h: int) -> None:
    s = score(source, n, d, age, h)
    assert 0.0 <= s.value <= 1.0
    for factor in (s.source, s.confirmation, s.contradiction, s.age):
        assert 0.0 <= factor <= 1.0
    assert s == score(source, n, d, age, h)
    assert s.value == s.source * s.confirmation * s.contradiction * s.age


@given(half_lives, st.integers(min_value=0, max_value=60))
def test_half_life_halves_exactly(h: int, k: int) -> None:
    assert age_factor(0, h) == 1.0
    assert age_factor(h, h) == 0.5 * age_factor(0, h)
    if h * (k + 1) <= BIG:
        assert age_factor(h * (k + 1), h) == 0.5 * age_factor(h * k, h)


def test_huge_inputs_neither_overflow_nor_raise() -> None:
    s = score("ci", BIG, BIG, BIG, 1)
    assert s.value == 0.0 and s.confirmation == 1.0
    assert score("local", BIG, 0, 0, BIG).value == pytest.approx(0.9)
    assert age_factor(BIG, BIG) == 0.5
    assert age_factor(BIG - 1, BIG) >= 0.5 and age_factor(BIG // 2, BIG) == 0.75


def test_worked_examples_of_the_doc() -> None:
    # docs/trust.md, "Worked examples"
    assert score("local", 3, 0, 5, 200).value == pytest.approx(0.711)
    assert score("ci", 9, 0, 0, 200).value == pytest.approx(0.5923, abs=1e-4)
    assert score("local", 0, 0, 0, 200).value == pytest.approx(0.45)
    assert score("human", 0, 0, 0, 200).value == 0.5
    assert score("local", 4, 1, 30, 20).value == pytest.approx(0.140625)
    assert score("local", 2, 0, 20, 20).value == pytest.approx(0.3375)


def test_a_ci_confirmation_counts_less_than_a_local_one() -> None:
    for n in range(1, 50):
        assert score("ci", n, 0, 0, 200).confirmation < score("local", n, 0, 0, 200).confirmation
    # a CI run refreshes a local record but does not strengthen it
    local = Trust(source="local", confirmations=3, last_confirmed=10)
    assert confirm(local, ordinal=12, ci=True) == Trust("local", 3, 0, 12)
    assert confirm(local, ordinal=12, ci=False) == Trust("local", 4, 0, 12)
    ci = Trust(source="ci", confirmations=5, last_confirmed=10)
    assert confirm(ci, ordinal=11, ci=True) == Trust("ci", 6, 0, 11)
    assert confirm(ci, ordinal=11, ci=False) == Trust("local", 1, 0, 11)
    assert confirm(Trust(), ordinal=3, ci=False) == Trust("local", 1, 0, 3)
    # never moves last_confirmed back, never goes past 2^63 - 1
    assert confirm(local, ordinal=2, ci=False).last_confirmed == 10
    assert confirm(Trust("local", BIG, BIG), ordinal=1, ci=False).confirmations == BIG
    assert contradict(Trust("local", 1, BIG)).contradictions == BIG
    assert contradict(local).contradictions == 1


def test_age_counts_from_last_confirmation_or_the_window() -> None:
    assert age_runs(Trust(last_confirmed=41), valid_from=36, ordinal=50) == 9
    assert age_runs(Trust(), valid_from=36, ordinal=50) == 14
    assert age_runs(Trust(last_confirmed=60), valid_from=36, ordinal=50) == 0


def test_record_trust_uses_the_kind_half_life() -> None:
    def rec(kind: str) -> Record:
        return Record(id="x", kind=kind, status="active", product="shop-web",
                      anchor="el:button:place-order", title="t",
                      trust=Trust("local", 3, 0, 40), valid=Valid(30))
    fact = record_trust(rec("fact"), ordinal=60, half_life_runs=DEFAULT_HALF_LIFE_RUNS)
    caution = record_trust(rec("caution"), ordinal=60, half_life_runs=DEFAULT_HALF_LIFE_RUNS)
    assert fact.age_runs == caution.age_runs == 20
    assert caution.age == 0.5 and caution.value < fact.value  # cautions fade fast
    assert fact.as_dict()["half_life"] == 200
    with pytest.raises(ConfigError, match="no entry for kind `fact`"):
        record_trust(rec("fact"), ordinal=60, half_life_runs={})


@pytest.mark.parametrize("args", [("nobody", 0, 0, 0, 1), ("local", -1, 0, 0, 1),
                                  ("local", 0, True, 0, 1), ("local", 0, 0, -5, 1)])
def test_bad_inputs_are_invalid_input(args: tuple[str, int, int, int, int]) -> None:
    with pytest.raises(InvalidInputError):
        score(*args)


@pytest.mark.parametrize("h", [0, -1, True])
def test_half_life_must_be_positive(h: int) -> None:
    with pytest.raises(ConfigError):
        age_factor(1, h)


# -- the promotion gate -------------------------------------------------------------

def test_promotion_needs_enough_local_confirmations() -> None:
    out = promotion("candidate", Trust("local", 1, 0, 5), ci=False)
    assert (out.promote, out.reason) == (False, "too-few-confirmations")
    assert "1 of 2" in out.detail
    out = promotion("candidate", Trust("local", 2, 0, 5), ci=False)
    assert (out.promote, out.reason) == (True, "promoted")


def test_promotion_never_on_ci() -> None:
    for source in ("local", "human", "ci"):
        out = promotion("candidate", Trust(source, 99, 0, 5), ci=True)
        assert (out.promote, out.reason) == (False, "ci")


def test_promotion_refusals() -> None:
    assert promotion("candidate", Trust("human"), ci=False).reason == "human"
    assert promotion("candidate", Trust("human"), ci=False).promote
    assert promotion("active", Trust("local", 9), ci=False).reason == "not-a-candidate"
    assert promotion("candidate", Trust("ci", 9), ci=False).reason == "not-local"
    assert promotion("candidate", Trust("import", 9), ci=False).reason == "not-local"
    held = promotion("candidate", Trust("local", 9, 1), ci=False)
    assert (held.promote, held.reason) == (False, "open-contradiction")
    lenient = PromotionPolicy(min_confirmations=1, max_contradictions=1)
    assert promotion("candidate", Trust("local", 1, 1), ci=False, policy=lenient).promote


@given(sources, small, small, st.booleans(), st.integers(1, 5), st.integers(0, 3))
def test_promotion_is_monotone_in_confirmations(source: str, n: int, d: int, ci: bool,
                                                lo: int, hi: int) -> None:
    policy = PromotionPolicy(min_confirmations=lo, max_contradictions=hi)
    if promotion("candidate", Trust(source, n, d), ci=ci, policy=policy).promote:
        assert promotion("candidate", Trust(source, n + 1, d), ci=ci, policy=policy).promote
        assert not ci


def test_promotion_policy_from_config() -> None:
    assert PromotionPolicy.from_table({}) == DEFAULT_PROMOTION
    assert PromotionPolicy.from_table({"min_confirmations": 3}) == PromotionPolicy(3, 0)
    assert PromotionPolicy.from_table({"max_contradictions": 2}).max_contradictions == 2
    for bad in ({"min_confirmation": 2}, {"min_confirmations": 0},
                {"min_confirmations": True}, {"max_contradictions": -1},
                {"max_contradictions": "1"}, {"min_confirmations": 2**63}):
        with pytest.raises(ConfigError, match=r"\[promotion\]"):
            PromotionPolicy.from_table(bad)
