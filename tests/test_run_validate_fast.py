"""The fast run validator (issue 21, item 3) against the reference, jsonschema: on runs
hypothesis generates — valid ones and ones broken in one place or several, with every
kind of wrong value — the fast one accepts exactly what jsonschema accepts, and
``validate_run`` names exactly the reference's violations."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memidex.evidence import validate_run
from memidex.evidence.schema import run_schema
from memidex.evidence.validate import conforms, reference_violations

# Values that break some rule somewhere: wrong types, edges of every limit, patterns.
ODD: list[Any] = [None, True, False, 0, -1, 1, 1.0, 2.5, -0.0, math.inf, math.nan, "",
                  "x", "a" * 65, "a" * 129, "a" * 201, "b" * 1001, "c" * 10_001, "Pass",
                  "pass\n", " pass", "el:x", "el:x ", "el:", ":x", "EL:x", "page:/a\n",
                  "artifacts/a.png", "artifacts/../a", "artifacts/", "/abs", [], [1], {},
                  {"a": 1}, 2**63, 2**63 - 1, -(2**63) - 1, "fact-x-0123456789abcdef",
                  "x-extension", "run-1", "a/b", "a:b@c", "ünï"]

WORDS = st.sampled_from(["click", "assert", "goto", "fill", "verify", "x_y-1"])
ANCHORS = st.sampled_from(["el:button:buy", "page:/checkout", "test:t-1", "api:/v1/x"])
TEXT = st.one_of(st.none(), st.text(max_size=30))
COUNT = st.one_of(st.none(), st.integers(0, 10**6))


def _step(index: int) -> st.SearchStrategy[dict[str, Any]]:
    check = st.fixed_dictionaries({"kind": WORDS, "passed": st.booleans()},
                                  optional={"expected": TEXT, "not_found": st.booleans()})
    return st.fixed_dictionaries(
        {"index": st.just(index), "action": WORDS},
        optional={"title": TEXT, "target": st.one_of(st.none(), ANCHORS),
                  "anchors": st.lists(ANCHORS, max_size=3), "value": TEXT,
                  "observed": TEXT, "check": st.one_of(st.none(), check), "error": TEXT,
                  "served_records": st.lists(st.just("fact-x-0123456789abcdef"),
                                             max_size=2),
                  "scope": st.dictionaries(st.sampled_from(["page", "role", "n"]),
                                           st.one_of(st.text(max_size=5), st.integers(),
                                                     st.booleans()), max_size=2),
                  "artifacts": st.lists(st.just("artifacts/shot.png"), max_size=2),
                  "duration_ms": COUNT, "x-note": st.text(max_size=5)})


@st.composite
def _test(draw: st.DrawFn, i: int) -> dict[str, Any]:
    steps = [draw(_step(k)) for k in range(draw(st.integers(0, 3)))]
    attempt = st.fixed_dictionaries(
        {"status": st.sampled_from(["pass", "fail", "timeout", "skip", "interrupted",
                                    "error"])},
        optional={"error": TEXT, "duration_ms": COUNT})
    failure = st.fixed_dictionaries(
        {"message": st.text(max_size=20)},
        optional={"hint": st.sampled_from(["flaky", "environment", "app-bug", "test-bug",
                                           "unknown", None]), "step": COUNT})
    return draw(st.fixed_dictionaries(
        {"test_id": st.just(f"t-{i}"),
         "verdict": st.sampled_from(["pass", "fail", "skip", "error"])},
        optional={"title": TEXT, "project": TEXT, "retries": COUNT,
                  "flaky": st.one_of(st.none(), st.booleans()),
                  "attempts": st.lists(attempt, max_size=2), "duration_ms": COUNT,
                  "anchors": st.lists(ANCHORS, max_size=3), "steps": st.just(steps),
                  "failure": st.one_of(st.none(), failure),
                  "artifacts": st.lists(st.just("artifacts/t.zip"), max_size=1)}))


@st.composite
def runs(draw: st.DrawFn) -> dict[str, Any]:
    tests = [draw(_test(i)) for i in range(draw(st.integers(1, 3)))]
    return draw(st.fixed_dictionaries(
        {"run_id": st.sampled_from(["r-1", "run.2_x"]), "product": st.just("shop-web"),
         "tests": st.just(tests)},
        optional={"build_tag": st.one_of(st.none(), st.just("v1.2+b/3")),
                  "ci": st.one_of(st.none(), st.booleans()), "x-source": st.text(max_size=3)}))


def _places(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a JSON tree (a key of an object, an index of a list)."""
    out = [path]
    if isinstance(node, dict):
        for k, v in node.items():
            out += _places(v, (*path, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _places(v, (*path, i))
    return out


@st.composite
def broken(draw: st.DrawFn) -> Any:
    """A run with one to three places replaced, removed or given an unknown key."""
    run = json.loads(json.dumps(draw(runs())))
    for _ in range(draw(st.integers(1, 3))):
        places = _places(run)
        where = draw(st.sampled_from(places))
        how = draw(st.sampled_from(["replace", "remove", "extra"]))
        if not where:
            if how == "replace":
                return draw(st.sampled_from(ODD))
            continue
        parent: Any = run
        for part in where[:-1]:
            parent = parent[part]
        last = where[-1]
        if how == "replace":
            parent[last] = draw(st.sampled_from(ODD))
        elif how == "remove" and isinstance(parent, dict):
            del parent[last]
        elif isinstance(parent[last], dict):
            parent[last][draw(st.sampled_from(["unknown", "x-ok", "Title"]))] = 1
        elif isinstance(parent[last], list):
            parent[last].append(draw(st.sampled_from(ODD)))
    return run


def _jsonschema_accepts(data: Any) -> bool:
    import jsonschema

    return not any(True for _ in jsonschema.Draft202012Validator(run_schema())
                   .iter_errors(data))


@given(runs())
def test_valid_runs_are_accepted_alike(run: dict[str, Any]) -> None:
    assert conforms(run) == _jsonschema_accepts(run)
    assert validate_run(run) == reference_violations(run)


@given(broken())
def test_broken_runs_are_judged_alike(data: Any) -> None:
    assert conforms(data) == _jsonschema_accepts(data)
    assert validate_run(data) == reference_violations(data)


@pytest.mark.parametrize("value", ODD)
def test_every_odd_value_in_every_kind_of_place(value: Any) -> None:
    base = {"run_id": "r-1", "product": "shop-web", "tests": [{
        "test_id": "t-1", "verdict": "fail", "failure": {"message": "m"},
        "attempts": [{"status": "fail"}],
        "steps": [{"index": 0, "action": "click", "check": {"kind": "k", "passed": True},
                   "scope": {"page": "/x"}}]}]}
    for where in _places(base)[1:]:
        data = json.loads(json.dumps(base))
        parent: Any = data
        for part in where[:-1]:
            parent = parent[part]
        parent[where[-1]] = value
        assert conforms(data) == _jsonschema_accepts(data), (where, value)


def test_a_keyword_the_fast_validator_does_not_know_is_refused() -> None:
    from memidex.evidence.validate import _compile

    with pytest.raises(ValueError, match="uniqueItems"):
        _compile({"type": "array", "uniqueItems": True}, {}, {})
