"""The analysis rules, the candidates and the curator as pure functions (docs/learning.md):
one test per analysis rule (with the cases that must NOT fire), claim normalisation, the
evidence cap, and "a flaky or environmental failure never contradicts or retires a fact"."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from learnkit import PRODUCT, a_run, a_test, fact_id, ingest, load, ops, step
from memidex.config.tables import LearningSettings
from memidex.evidence import Run, TestResult, parse_run
from memidex.learning.analysis import classify
from memidex.learning.candidates import normalise, project
from memidex.learning.curator import Context, contradicted, decide, subject_id
from memidex.records.model import Trust


def run_of(data: dict[str, Any]) -> Run:
    return parse_run(json.dumps(data).encode("utf-8"), source="run.json")


def failing(message: str | None = None, *, hint: str | None = None, check_failed: bool = True,
            error: str | None = None, verdict: str = "fail", **extra: Any) -> TestResult:
    failure = None
    if message is not None:
        failure = {"message": message, "step": 1, **({"hint": hint} if hint else {})}
    steps = [step(0, "el:input:q", "Search", kind="assert-visible"),
             step(1, "el:list:results", None, kind="assert-visible" if check_failed else None,
                  passed=False, **({"error": error} if error else {}))]
    return run_of(a_run("r-1", [a_test("t", steps, verdict=verdict, failure=failure,
                                       **extra)])).tests[0]


def cause(test: TestResult, passed_on: tuple[str, ...] = (), build: str | None = "v1") -> str:
    got = classify(test, passed_on_build=passed_on, build_tag=build)
    assert got is not None
    return got.cause


# --- rule 1: the runner said flaky ----------------------------------------------------------


def test_rule_runner_flaky() -> None:
    t = failing("expected list to be visible", flaky=True, hint="environment")
    got = classify(t, passed_on_build=(), build_tag="v1")
    assert got is not None and (got.cause, got.rule) == ("flaky", "runner-flaky")
    # a test that passed on a retry is flaky too
    passed = run_of(a_run("r-1", [a_test("t", [step(0, "el:a:b", "x")], flaky=True)])).tests[0]
    assert cause(passed) == "flaky"


# --- rule 2: the run's own hint -------------------------------------------------------------


@pytest.mark.parametrize("hint", ["flaky", "environment", "app-bug", "test-bug"])
def test_rule_hint(hint: str) -> None:
    # the hint wins over an error text that names the environment or the test
    t = failing("net::ERR_CONNECTION_REFUSED; strict mode violation", hint=hint)
    got = classify(t, passed_on_build=("v1",), build_tag="v1")
    assert got is not None and (got.cause, got.rule) == (hint, "hint")


def test_rule_hint_unknown_decides_nothing() -> None:
    assert cause(failing("getaddrinfo ENOTFOUND api.shop.test", hint="unknown")) == "environment"
    assert cause(failing("something odd", hint="unknown", check_failed=False)) == "unknown"


# --- rule 3: the error text names the environment ------------------------------------------

ENVIRONMENT = [
    "page.goto: net::ERR_NAME_NOT_RESOLVED at https://pay.test/",
    "net::ERR_CONNECTION_RESET",
    "getaddrinfo ENOTFOUND api.shop.test",
    "connect ECONNREFUSED 127.0.0.1:443",
    "Could not resolve host: api.shop.test",
    "SSL routines:tls_process_server_certificate:certificate verify failed",
    "TLS handshake timeout",
    "GET https://staging.shop.test/api/search -> 503 Service Unavailable",
    "502 Bad Gateway",
    "upstream answered 504 Gateway Timeout",
    "socket hang up",
]


@pytest.mark.parametrize("message", ENVIRONMENT)
def test_rule_environment_error_text(message: str) -> None:
    got = classify(failing(message), passed_on_build=("v1",), build_tag="v1")
    assert got is not None and (got.cause, got.rule) == ("environment", "error-environment")


@pytest.mark.parametrize("message", [
    # app text that merely contains a number or a word the rule looks for: an
    # assertion about the app, not an environmental failure
    "AssertionError: expected cart total to be 503.00 EUR, got 502.00 EUR",
    "expect(locator).toHaveText: expected 'Gift certificate applied', got 'Code expired'",
    "expected 'Order #504 confirmed' to be visible",
])
def test_rule_environment_does_not_fire_on_app_text(message: str) -> None:
    assert cause(failing(message)) == "app-bug"


# --- rule 4: the error text names the test --------------------------------------------------

TEST_BUG = [
    "Error: strict mode violation: locator('button') resolved to 2 elements",
    "SyntaxError: Unexpected token '}'",
    "TypeError: page.clik is not a function",
    "ReferenceError: cartTotal is not defined",
    "locator.click: Error: 'div >> >> x' is not a valid selector",
]


@pytest.mark.parametrize("message", TEST_BUG)
def test_rule_test_bug_error_text(message: str) -> None:
    got = classify(failing(message), passed_on_build=("v1",), build_tag="v1")
    assert got is not None and (got.cause, got.rule) == ("test-bug", "error-test-bug")


def test_rule_test_bug_from_the_step_error_when_the_failure_says_little() -> None:
    t = failing("step failed", error="TypeError: cannot read properties of undefined")
    assert cause(t) == "test-bug"


# --- rule 5: passed on this same build before ------------------------------------------------


def test_rule_passed_on_the_same_build_before() -> None:
    timeout = failing("TimeoutError: locator.waitFor: Timeout 5000ms exceeded")
    got = classify(timeout, passed_on_build=("v0", "v1"), build_tag="v1")
    assert got is not None and (got.cause, got.rule) == ("flaky", "timeout-passed-on-build")
    other = failing("expected list to be visible")
    got = classify(other, passed_on_build=("v1",), build_tag="v1")
    assert got is not None and (got.cause, got.rule) == ("flaky", "passed-on-build")


@pytest.mark.parametrize("passed_on,build", [(("v0",), "v1"), ((), "v1"), (("v1",), None)])
def test_rule_passed_before_needs_the_same_build(passed_on: tuple[str, ...],
                                                 build: str | None) -> None:
    t = failing("TimeoutError: locator.waitFor: Timeout 5000ms exceeded")
    assert cause(t, passed_on, build) == "app-bug"  # its check failed: rule 6


# --- rule 6: a check failed -------------------------------------------------------------------


def test_rule_check_failed_is_an_app_bug() -> None:
    got = classify(failing("the list did not show"), passed_on_build=(), build_tag="v1")
    assert got is not None and (got.cause, got.rule) == ("app-bug", "check-failed")
    # an assertion message without a failed check
    assert cause(failing("AssertionError: expected 3 items, got 2", check_failed=False)) == \
        "app-bug"


def test_rule_a_timeout_without_a_failed_check_is_not_an_app_bug() -> None:
    t = failing("Timeout 30000ms exceeded while expecting navigation", check_failed=False)
    assert cause(t) == "unknown"


# --- rule 7: otherwise unknown; passing and skipped tests have no cause ------------------------


def test_rule_otherwise_unknown() -> None:
    got = classify(failing("the browser went away", check_failed=False, verdict="error"),
                   passed_on_build=(), build_tag="v1")
    assert got is not None and (got.cause, got.rule) == ("unknown", "no-rule")
    assert cause(failing(None, check_failed=False)) == "unknown"


@pytest.mark.parametrize("verdict", ["pass", "skip"])
def test_a_test_that_did_not_fail_has_no_cause(verdict: str) -> None:
    t = run_of(a_run("r-1", [a_test("t", [step(0, "el:a:b", "x")], verdict=verdict)])).tests[0]
    assert classify(t, passed_on_build=(), build_tag="v1") is None


# --- candidates: claims ---------------------------------------------------------------------


@pytest.mark.parametrize("a,b", [
    ("8 suggestions after 620 ms; first: Ceramic mug", "8 suggestions after 2310 ms; first: "
                                                       "Ceramic mug"),
    ("Loaded in 1.5 s", "Loaded in 700ms"),
    ("Saved   in\t12 seconds", "Saved in 3 secs"),
    ("Loaded in 1,200 ms", "Loaded in 640 ms"),
])
def test_normalise_makes_a_timing_no_new_claim(a: str, b: str) -> None:
    assert normalise(a) == normalise(b)


@pytest.mark.parametrize("a,b", [
    ("8 suggestions", "9 suggestions"),
    ("Place order (disabled)", "Place order (enabled)"),
    ("Try again in 3 steps", "Try again in 4 steps"),
])
def test_normalise_keeps_what_is_not_a_timing(a: str, b: str) -> None:
    assert normalise(a) != normalise(b)


def test_normalise_cuts_long_text_and_collapses_whitespace() -> None:
    assert normalise("  a \n\n b\t") == "a b"
    assert normalise(None) == "" and normalise("") == ""
    long = normalise("x" * 10_000)
    assert 0 < len(long) <= 300


def _two_runs_same_subject(obs1: str, obs2: str) -> tuple[str, str]:
    keys = []
    for n, obs in ((1, obs1), (2, obs2)):
        run = run_of(a_run(f"r-{n}", [a_test("t", [step(0, "el:list:s", obs,
                                                        kind="assert-text")])]))
        (fact,) = [c for c in project(run, {}) if c.kind == "fact"]
        keys.append(fact.claim_key)
    return keys[0], keys[1]


def test_a_timing_makes_the_same_claim_and_a_text_change_another() -> None:
    a, b = _two_runs_same_subject("8 suggestions after 620 ms", "8 suggestions after 2310 ms")
    assert a == b
    a, b = _two_runs_same_subject("8 suggestions after 620 ms", "3 suggestions after 620 ms")
    assert a != b


def test_assert_enabled_and_assert_disabled_are_one_subject_two_claims() -> None:
    runs = [run_of(a_run(f"r-{k}", [a_test("t", [step(0, "el:button:go", f"Go ({k})",
                                                       kind=f"assert-{k}")])]))
            for k in ("enabled", "disabled")]
    facts = [next(c for c in project(r, {}) if c.kind == "fact") for r in runs]
    assert facts[0].subject == facts[1].subject
    assert subject_id(facts[0], PRODUCT) == fact_id("el:button:go", "enabled")
    assert facts[0].claim_key != facts[1].claim_key


def test_the_first_verified_step_on_a_subject_is_the_claim() -> None:
    run = run_of(a_run("r-1", [a_test("t", [
        step(0, "el:button:go", "Go (disabled)", kind="assert-disabled"),
        step(1, "el:button:go", "Go (enabled)", kind="assert-enabled")])]))
    facts = [c for c in project(run, {}) if c.kind == "fact"]
    assert len(facts) == 1 and facts[0].evidence.step == 0


# --- flaky and environmental failures never contradict -----------------------------------------


@pytest.mark.parametrize("kind", ["flaky", "environment"])
def test_a_flaky_or_environmental_failure_projects_a_caution_and_no_contradiction(
        kind: str) -> None:
    run = run_of(a_run("r-1", [
        a_test("a", [step(0, "el:list:s", "8 items", kind="assert-visible")]),
        a_test("b", [step(0, "el:list:s", None, kind="assert-visible", passed=False,
                          error="net::ERR_CONNECTION_RESET at https://api.shop.test/x")],
               verdict="fail", failure={"message": "net::ERR_CONNECTION_RESET at "
                                                   "https://api.shop.test/x", "step": 0}),
    ]))
    cands = project(run, {"b": kind})
    assert sorted(c.kind for c in cands) == ["caution", "fact", "procedure"]
    assert all(c.contradicts is None and not c.self_contradiction for c in cands)
    caution = next(c for c in cands if c.kind == "caution")
    assert caution.anchor == ("host:api.shop.test" if kind == "environment" else "el:list:s")


def test_an_app_bug_failure_names_the_fact_its_check_contradicts() -> None:
    run = run_of(a_run("r-1", [a_test("b", [step(0, "el:list:s", "0 items",
                                                 kind="assert-visible", passed=False)],
                                      verdict="fail", failure={"message": "expected visible",
                                                               "step": 0})]))
    found = project(run, {"b": "app-bug"})
    (unknown,) = [c for c in found if c.kind == "unknown"]
    assert unknown.contradicts == ("fact", "el:list:s", (("aspect", "visible"),))
    # and what the failed check saw: the element's state now, never a confirmed belief
    (seen,) = [c for c in found if c.kind == "fact"]
    assert seen.from_failure and seen.claim == "assert-hidden"


def _fact_run(run_id: str, *, failing_kind: str | None = None, build: str = "v1",
              with_b: bool = True) -> dict[str, Any]:
    tests = [a_test("keep", [step(0, "el:list:s", "8 items", kind="assert-visible")]
                    + ([step(1, "el:item:b", "B")] if with_b else []))]
    if failing_kind == "flaky":
        tests[0] = a_test("keep", [step(0, "el:list:s", None, kind="assert-visible",
                                        passed=False, error="Timeout 5000ms exceeded")],
                          verdict="fail", failure={"message": "Timeout 5000ms exceeded",
                                                   "hint": "flaky", "step": 0})
    elif failing_kind == "environment":
        tests[0] = a_test("keep", [step(0, "el:list:s", None, kind="assert-visible",
                                        passed=False, error="503 Service Unavailable")],
                          verdict="fail", failure={"message": "GET https://api.shop.test/ "
                                                   "-> 503 Service Unavailable", "step": 0})
    return a_run(run_id, tests, build=build)


@pytest.mark.parametrize("kind", ["flaky", "environment"])
def test_flaky_or_environmental_failures_never_contradict_or_retire_a_fact(
        repo: Path, kind: str) -> None:
    fact = fact_id("el:list:s", "visible")
    b = fact_id("el:item:b", "text")
    ingest(repo, _fact_run("r-1"))
    ingest(repo, _fact_run("r-2"))
    before = load(repo, fact)
    assert before.status == "active"
    for n in range(3, 9):  # failures of the very check the fact was learned from
        out = ingest(repo, _fact_run(f"r-{n}", failing_kind=kind,
                                     build="v1" if n % 2 else "v2"))
        assert fact not in ops(out) and b not in ops(out)
        assert not [c for c in out["changes"] if c["op"] in ("unknown", "deprecate",
                                                             "supersede")]
    after = load(repo, fact)
    assert after == before
    assert load(repo, b).status == "active"  # failing runs do not count towards retiring


# --- the curator ----------------------------------------------------------------------------


def _ctx(n: int, *, ci: bool = False, evidence_max: int = 5) -> Context:
    return Context(f"r-{n}", n, ci, PRODUCT, LearningSettings(evidence_max=evidence_max))


def _fact(n: int, observed: str = "8 items after 620 ms", check: str = "assert-visible",
          test: str = "t") -> Any:
    run = run_of(a_run(f"r-{n}", [a_test(test, [step(0, "el:list:s", observed, kind=check)])]))
    return next(c for c in project(run, {}) if c.kind == "fact")


def test_curator_add_confirm_promote() -> None:
    d = decide(_fact(1), None, _ctx(1))
    assert d.op == "add" and d.record is not None
    r = d.record
    assert (r.status, r.written_by, r.trust, r.valid.from_, r.valid.until) == \
        ("candidate", "template", Trust("local", 1, 0, 1), 1, None)
    d2 = decide(_fact(2, "8 items after 2310 ms"), r, _ctx(2))
    assert d2.op == "confirm" and d2.record is not None
    assert d2.record.trust == Trust("local", 2, 0, 2) and d2.record.status == "active"
    assert d2.record.title == r.title and d2.record.body == r.body


def test_curator_on_ci_adds_with_source_ci_and_never_promotes() -> None:
    r = decide(_fact(1), None, _ctx(1, ci=True)).record
    assert r is not None and r.trust.source == "ci" and r.status == "candidate"
    for n in range(2, 6):
        d = decide(_fact(n), r, _ctx(n, ci=True))
        assert d.op == "confirm" and d.record is not None
        r = d.record
        assert r.status == "candidate"


def test_curator_evidence_is_capped_and_counted() -> None:
    r = decide(_fact(1), None, _ctx(1, evidence_max=3)).record
    assert r is not None
    for n in range(2, 8):
        d = decide(_fact(n), r, _ctx(n, evidence_max=3))
        assert d.record is not None
        r = d.record
    assert [e.run for e in r.evidence] == ["r-5", "r-6", "r-7"]
    assert r.evidence_total == 7 and r.trust.confirmations == 7
    # the same run again (a clone without the run store ingesting it twice) is a no-op:
    # no evidence and no confirmation counted twice
    again = decide(_fact(7), r, _ctx(7, evidence_max=3))
    assert again.op == "noop" and again.record is None and "r-7" in again.note
    # while nothing was dropped, no total is written
    small = decide(_fact(2), decide(_fact(1), None, _ctx(1)).record, _ctx(2)).record
    assert small is not None and small.evidence_total is None and len(small.evidence) == 2


def test_curator_supersedes_with_a_closed_window() -> None:
    r = decide(_fact(1, "8 items", "assert-text"), None, _ctx(1)).record
    r = decide(_fact(2, "8 items", "assert-text"), r, _ctx(2)).record
    assert r is not None and r.status == "active"
    d = decide(_fact(5, "3 items", "assert-text"), r, _ctx(5))
    assert d.op == "supersede" and d.record is not None
    new = d.record
    assert new.id == r.id and new.valid.from_ == 5 and new.valid.until is None
    assert new.status == "candidate" and new.trust == Trust("local", 1, 0, 5)
    (h,) = new.history
    assert (h.valid.from_, h.valid.until, h.title, h.body) == (1, 5, r.title, r.body)
    assert [e.run for e in new.evidence] == ["r-5"]
    # a run at or before the current version's start cannot supersede it
    assert decide(_fact(5, "9 items", "assert-text"), new, _ctx(5)).op == "noop"
    assert decide(_fact(4, "9 items", "assert-text"), new, _ctx(4)).op == "noop"


@pytest.mark.parametrize("status", ["quarantined", "deprecated", "superseded"])
def test_curator_leaves_a_record_a_person_set_aside(status: str) -> None:
    r = decide(_fact(1), None, _ctx(1)).record
    assert r is not None
    d = decide(_fact(2, "something else"), replace(r, status=status), _ctx(2))
    assert d.op == "noop" and d.record is None


def test_contradicted_only_by_the_check_the_fact_was_learned_from() -> None:
    fact = decide(_fact(1), None, _ctx(1)).record
    assert fact is not None
    same = run_of(a_run("r-2", [a_test("t", [step(0, "el:list:s", None, kind="assert-visible",
                                                  passed=False)], verdict="fail")]))
    (unknown,) = [c for c in project(same, {"t": "app-bug"}) if c.kind == "unknown"]
    found = contradicted(fact, unknown, _ctx(2))
    assert found is not None and found[1] == "contradict"
    hit = found[0]
    assert hit.trust.contradictions == 1
    assert (hit.status, hit.valid, hit.title, hit.evidence) == \
        (fact.status, fact.valid, fact.title, fact.evidence)
    other = run_of(a_run("r-2", [a_test("t", [step(0, "el:list:s", None, kind="assert-text",
                                                   passed=False)], verdict="fail")]))
    (unknown2,) = [c for c in project(other, {"t": "app-bug"}) if c.kind == "unknown"]
    assert contradicted(fact, unknown2, _ctx(2)) is None
