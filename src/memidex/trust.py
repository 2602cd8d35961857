"""Trust arithmetic and the promotion gate: pure functions over a record's front matter.

The formula, its reasons and worked examples are in ``docs/trust.md``; this module is
the one place that computes them. Everything here is deterministic and uses only
IEEE-754 basic operations (exact integer ratios, ``+ - * /`` and ``ldexp``), never a
transcendental function from the C library, so the same inputs give the same bits on
every machine.

    value = source × confirmation × contradiction × age

    source        = SOURCE_FACTOR[source]             (human 1, local 0.9, ci/import 0.7)
    confirmation  = (1 + e) / (2 + e),  e = CONFIRMATION_WEIGHT[source] × confirmations
    contradiction = 1 / (1 + contradictions)
    age           = 2^-(age / half_life), linear between whole half-lives

The record stores one ``source`` and one ``confirmations`` count, so the formula cannot
tell which runs confirmed it; :func:`confirm` is the rule that keeps that count honest
(a CI run keeps a local or human record fresh but does not make it stronger).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from memidex.config.tables import PromotionPolicy
from memidex.errors import ConfigError, InvalidInputError
from memidex.plain import Frozen, set_field
from memidex.records.vocab import MAX_ORDINAL, SOURCES

TYPE_CHECKING = False  # not typing's: a one-shot command imports no typing (~2 ms)
if TYPE_CHECKING:  # a brief scores index rows: no record classes
    from typing import Literal

    from memidex.records.model import Record, Trust

__all__ = [
    "CONFIRMATION_WEIGHT",
    "DEFAULT_PROMOTION",
    "SOURCE_FACTOR",
    "Promotion",
    "PromotionPolicy",
    "TrustScore",
    "age_factor",
    "age_runs",
    "confirm",
    "contradict",
    "promotion",
    "record_trust",
    "score",
]

SOURCE_FACTOR: Mapping[str, tuple[int, int]] = {
    "human": (1, 1),
    "local": (9, 10),
    "ci": (7, 10),
    "import": (7, 10),
}
"""The ceiling a record's trust can reach, by where it came from (an exact ratio:
numerator, denominator)."""

CONFIRMATION_WEIGHT: Mapping[str, tuple[int, int]] = {
    "human": (1, 1),
    "local": (1, 1),
    "ci": (1, 2),
    "import": (1, 2),
}
"""What one confirmation is worth, by source: a CI (or imported) one counts half (an exact
ratio: numerator, denominator)."""


class TrustScore(Frozen):
    """A trust value and the factors it is the product of (for a brief's ``reasons``)."""

    __slots__ = ("value", "source", "confirmation", "contradiction", "age", "age_runs",
                 "half_life")
    value: float
    source: float
    confirmation: float
    contradiction: float
    age: float
    age_runs: int
    half_life: int

    def __init__(self, value: float, source: float, confirmation: float, contradiction: float,
                 age: float, age_runs: int, half_life: int) -> None:
        set_field(self, "value", value)
        set_field(self, "source", source)
        set_field(self, "confirmation", confirmation)
        set_field(self, "contradiction", contradiction)
        set_field(self, "age", age)
        set_field(self, "age_runs", age_runs)
        set_field(self, "half_life", half_life)

    def as_dict(self) -> dict[str, float | int]:
        return {"value": self.value, "source": self.source,
                "confirmation": self.confirmation, "contradiction": self.contradiction,
                "age": self.age, "age_runs": self.age_runs, "half_life": self.half_life}


def _count(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidInputError(f"trust: `{name}` must be a whole number >= 0, got {value!r}")
    return value


def _ratio(num: int, den: int) -> float:
    """``num / den`` rounded once (Python's int division is correctly rounded)."""
    return num / den


def age_factor(age: int, half_life: int) -> float:
    """``2^-(age/half_life)`` at whole half-lives, linear in between; exactly 1 at age 0
    and exactly half of that at ``age == half_life``. Never raises or overflows."""
    _count("age", age)
    if isinstance(half_life, bool) or not isinstance(half_life, int) or half_life <= 0:
        raise ConfigError(f"half-life must be a whole number of runs > 0, got {half_life!r}")
    whole, rest = divmod(age, half_life)  # exact integers
    if whole > 1100:  # 2^-1100 is below the smallest float: the factor is 0
        return 0.0
    # between 2^-whole and 2^-(whole+1): 2^-whole × (1 - rest / (2 × half_life))
    return math.ldexp(1.0 - _ratio(rest, 2 * half_life), -whole)


def age_runs(trust: Trust, *, valid_from: int, ordinal: int) -> int:
    """Runs since the last confirmation (or since the version began, never confirmed);
    0 when ``ordinal`` is not after it."""
    return runs_since(trust.last_confirmed, valid_from=valid_from, ordinal=ordinal)


def runs_since(last_confirmed: int | None, *, valid_from: int, ordinal: int) -> int:
    """:func:`age_runs` from the last confirmation's ordinal itself."""
    since = last_confirmed if last_confirmed is not None else valid_from
    return max(0, _count("ordinal", ordinal) - _count("last_confirmed", since))


def score(source: str, confirmations: int, contradictions: int, age: int,
          half_life: int) -> TrustScore:
    """The trust of one record version from the numbers the formula reads."""
    if source not in SOURCE_FACTOR:
        raise InvalidInputError(f"trust: unknown source {source!r} "
                                f"(one of {', '.join(SOURCES)})")
    _count("confirmations", confirmations)
    _count("contradictions", contradictions)
    weight, per = CONFIRMATION_WEIGHT[source]
    # e = weight / per × confirmations; (1 + e) / (2 + e) as one exact ratio, rounded once
    num = per + weight * confirmations
    confirmation = _ratio(num, num + per)
    contradiction = _ratio(1, 1 + contradictions)
    source_factor = _ratio(*SOURCE_FACTOR[source])
    age_f = age_factor(age, half_life)
    value = source_factor * confirmation * contradiction * age_f
    return TrustScore(value=value, source=source_factor, confirmation=confirmation,
                      contradiction=contradiction, age=age_f, age_runs=age,
                      half_life=half_life)


def half_life_of(kind: str, half_life_runs: Mapping[str, int]) -> int:
    """The half-life for a kind from ``Config.half_life_runs`` (defaults merged in)."""
    try:
        return half_life_runs[kind]
    except KeyError:
        raise ConfigError(f"`half_life_runs` has no entry for kind `{kind}`") from None


def record_trust(record: Record, *, ordinal: int,
                 half_life_runs: Mapping[str, int]) -> TrustScore:
    """The trust of ``record`` as served at run ``ordinal``."""
    t = record.trust
    return version_trust(record.kind, t.source, t.confirmations, t.contradictions,
                         t.last_confirmed, record.valid.from_, ordinal=ordinal,
                         half_life_runs=half_life_runs)


def version_trust(kind: str, source: str, confirmations: int, contradictions: int,
                  last_confirmed: int | None, valid_from: int, *, ordinal: int,
                  half_life_runs: Mapping[str, int]) -> TrustScore:
    """:func:`record_trust` from the numbers a version's index row holds (a brief)."""
    return score(source, confirmations, contradictions,
                 runs_since(last_confirmed, valid_from=valid_from, ordinal=ordinal),
                 half_life_of(kind, half_life_runs))


def confirm(trust: Trust, *, ordinal: int, ci: bool) -> Trust:
    """The trust after one run confirmed the record (the curator's rule, docs/trust.md).

    - every confirmation refreshes ``last_confirmed`` (never moving it back);
    - a local run adds one confirmation; on a ``ci`` or ``import`` record it makes the
      record ``local`` and the count restarts at 1 (the count then means local runs,
      which is what the promotion gate reads);
    - a CI run adds one confirmation (worth half) to a ``ci`` or ``import`` record, and
      none to a ``local`` or ``human`` one.
    """
    from dataclasses import replace  # Trust is a record's dataclass

    last = ordinal if trust.last_confirmed is None else max(trust.last_confirmed, ordinal)
    bump = min(trust.confirmations + 1, MAX_ORDINAL)
    if ci:
        if trust.source in ("ci", "import"):
            return replace(trust, confirmations=bump, last_confirmed=last)
        return replace(trust, last_confirmed=last)
    if trust.source in ("ci", "import"):
        return replace(trust, source="local", confirmations=1, last_confirmed=last)
    return replace(trust, confirmations=bump, last_confirmed=last)


def contradict(trust: Trust) -> Trust:
    """The trust after a run contradicted the record (one more open contradiction)."""
    from dataclasses import replace

    return replace(trust, contradictions=min(trust.contradictions + 1, MAX_ORDINAL))


# -- the promotion gate -------------------------------------------------------------

if TYPE_CHECKING:
    PromotionReason = Literal["promoted", "human", "ci", "not-a-candidate", "not-local",
                              "too-few-confirmations", "open-contradiction"]


DEFAULT_PROMOTION = PromotionPolicy()


class Promotion(Frozen):
    """The gate's answer: whether the record becomes ``active``, and why."""

    __slots__ = ("promote", "reason", "detail")
    promote: bool
    reason: PromotionReason
    detail: str

    def __init__(self, promote: bool, reason: PromotionReason, detail: str) -> None:
        set_field(self, "promote", promote)
        set_field(self, "reason", reason)
        set_field(self, "detail", detail)


def promotion(status: str, trust: Trust, *, ci: bool,
              policy: PromotionPolicy = DEFAULT_PROMOTION) -> Promotion:
    """Should a record with this status and trust become active now?

    Checked in this order: only a ``candidate`` is promoted; on CI nothing is; a
    human-written record is at once; an open contradiction (more than
    ``max_contradictions``) holds it back; only local evidence counts; and it needs
    ``min_confirmations`` confirmations.
    """
    if status != "candidate":
        return Promotion(False, "not-a-candidate", f"status is {status}, not candidate")
    if ci:
        return Promotion(False, "ci", "nothing is promoted on CI")
    if trust.source == "human":
        return Promotion(True, "human", "written by a person: active at once")
    if trust.contradictions > policy.max_contradictions:
        return Promotion(False, "open-contradiction",
                         f"{trust.contradictions} contradiction(s), at most "
                         f"{policy.max_contradictions} allowed")
    if trust.source != "local":
        return Promotion(False, "not-local",
                         f"source is {trust.source}: only local runs promote")
    if trust.confirmations < policy.min_confirmations:
        return Promotion(False, "too-few-confirmations",
                         f"{trust.confirmations} of {policy.min_confirmations} "
                         "confirmations from local runs")
    return Promotion(True, "promoted", f"{trust.confirmations} confirmations from local "
                     "runs, no open contradiction")
