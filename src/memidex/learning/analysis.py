"""Analysis by rules: a root cause for every failing test (SPEC §3.3, ``docs/learning.md``).

Pure functions, no I/O. The rules, in the order they are tried (the first that decides
wins), each with its own test in ``tests/test_learning_analysis.py``:

1. the runner said the test is flaky (it failed, then passed on a retry) → ``flaky``;
2. the run's own ``hint`` (anything but ``unknown``) → that hint;
3. the error text names the environment — DNS and connection errors, TLS and certificate
   failures, a 502/503/504 from a gateway (with its reason phrase, or as an HTTP status),
   a browser ``net::ERR_*`` → ``environment`` (a number or a word in the app's own text,
   "503.00 EUR" or "Gift certificate applied", is not);
4. **failures are correlated within a run**: when another test of the same run failed for
   an environmental cause (rule 3, or its hint), a failure that shares an endpoint, a page
   or an element with it (an ``api:``, ``page:`` or ``el:`` anchor), or whose failed check
   found nothing (the element not found, an empty value), is ``environment`` too — the
   outage, not the app, and never ``flaky`` by history;
5. the error text names the test — a strict-mode violation, a malformed locator or
   selector, a script error (``SyntaxError``, ``TypeError``, ``ReferenceError``,
   ``is not a function``) → ``test-bug``;
6. the test passed on this same build before (its history), in a run without an
   environmental failure → ``flaky``: a timeout, or any failure the app did not change to
   cause;
7. a check failed (a step's check did not hold — a web-first assertion that timed out
   waiting for its value is still an assertion — or the error is an assertion) →
   ``app-bug`` (an app change and an app bug look alike: the curator raises an unknown and
   closes the fact the check contradicts); but a check whose element was not found at all
   is ``unknown``: a slow page and a missing element look alike;
8. otherwise ``unknown`` (a configured model may classify it later).

:func:`classify_run` applies them to every test of a run (rule 4 needs the others).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence

from memidex.evidence import Run, Step, TestResult
from memidex.plain import Frozen, set_field

__all__ = ["CAUSES", "Cause", "RunContext", "classify", "classify_run", "error_text",
           "failing_step", "failed_check"]


CAUSES: tuple[str, ...] = ("app-bug", "test-bug", "flaky", "environment", "unknown")

# Patterns, compiled on a failing test's first use (re's cache keeps them): a run that
# passes, the common case, never pays the few milliseconds their compiling costs.
_ENVIRONMENT = (
    r"net::ERR_[A-Z_]+|\bE(?:NOTFOUND|CONNREFUSED|CONNRESET|AI_AGAIN|HOSTUNREACH|"
    r"NETUNREACH|TIMEDOUT|PIPE)\b|getaddrinfo|name or service not known|"
    r"could not resolve host|temporary failure in name resolution|\bdns\b|"
    r"connection (?:refused|reset|closed by peer|aborted)|socket hang up|"
    r"ssl_error|ssl routines|\bSSL(?:Error|_ERROR)|tls handshake|handshake (?:failed|failure)|"
    r"certificate (?:verify failed|has expired|is not (?:valid|trusted))|"
    r"self[- ]signed certificate|unable to (?:get|verify) .{0,30}certificate|ERR_CERT_|"
    r"\b50[234] (?:bad gateway|service (?:temporarily )?unavailable|gateway time-?out)|"
    r"\b(?:http|status|status code|response|responded with)[ :=]*50[234]\b|"
    r"\bbad gateway\b|\bservice unavailable\b|\bgateway time-?out\b")
_TEST_BUG = (
    r"strict mode violation|is not a valid selector|unexpected token|unknown engine|"
    r"invalid selector|malformed|\bSyntaxError\b|\bTypeError\b|\bReferenceError\b|"
    r"is not a function|is not defined|locator\.\w+: Error: .*selector")
_TIMEOUT = r"timeout|timed out|time-?out"
_ASSERTION = r"\bexpect(?:ed)?\b|AssertionError|assert|to(?:Be|Have)[A-Z]\w*"


def _search(pattern: str, text: str) -> bool:
    return re.search(pattern, text, re.IGNORECASE) is not None


class Cause(Frozen):
    """A failing test's root cause and the rule that gave it (and, for a correlated
    failure, why)."""

    cause: str
    rule: str
    why: str

    __slots__ = ("cause", "rule", "why")

    def __init__(self, cause: str, rule: str, why: str = "") -> None:
        set_field(self, "cause", cause)
        set_field(self, "rule", rule)
        set_field(self, "why", why)


class RunContext(Frozen):
    """What the other tests of the run say: the environmental failures and what each
    touched (rule 4)."""

    environmental: Mapping[str, frozenset[str]]
    """test id -> the ``api:``, ``page:`` and ``el:`` anchors of an environmental failure"""

    __slots__ = ("environmental",)

    def __init__(self, environmental: Mapping[str, frozenset[str]] | None = None) -> None:
        set_field(self, "environmental", environmental if environmental is not None else dict())

    @property
    def outage(self) -> bool:
        return bool(self.environmental)

def failing_step(test: TestResult) -> int | None:
    """The index of the step that failed: the failure's own ``step``, else the first step
    with an error or a check that did not hold."""
    if test.failure is not None and test.failure.step is not None:
        return test.failure.step
    for s in test.steps:
        if s.error or (s.check is not None and not s.check.passed):
            return s.index
    return None


def error_text(test: TestResult) -> str:
    """The failure's message and the failing step's error, one string."""
    parts = []
    if test.failure is not None:
        parts.append(test.failure.message)
    at = failing_step(test)
    for s in test.steps:
        if s.index == at and s.error:
            parts.append(s.error)
    return "\n".join(parts)


def failed_check(test: TestResult) -> Step | None:
    """The step whose check did not hold (the failing step's, else the first one)."""
    at = failing_step(test)
    failed = [s for s in test.steps if s.check is not None and not s.check.passed]
    return next((s for s in failed if s.index == at), failed[0] if failed else None)


_EMPTY = {"", "0", "[]", "{}", "null", "none", "undefined"}
_CORRELATED_TYPES = ("api:", "page:", "el:")


def touched(test: TestResult) -> frozenset[str]:
    """The endpoints, pages and elements a test touched (what rule 4 correlates on)."""
    out = {a for a in test.anchors if a.startswith(_CORRELATED_TYPES)}
    for s in test.steps:
        out.update(a for a in s.anchors if a.startswith(_CORRELATED_TYPES))
        if s.target and s.target.startswith(_CORRELATED_TYPES):
            out.add(s.target)
    return frozenset(out)


def _found_nothing(step: Step | None) -> bool:
    if step is None or step.check is None:
        return False
    if step.check.not_found:
        return True
    observed = (step.observed or "").strip().strip("'\"").lower()
    return step.observed is not None and observed in _EMPTY


def classify(test: TestResult, *, passed_on_build: Collection[str],
             build_tag: str | None, context: RunContext | None = None,
             reach: frozenset[str] | None = None) -> Cause | None:
    """The root cause of ``test`` (None for a test that did not fail).

    ``passed_on_build``: the build tags this test passed on in earlier runs; ``context``:
    the rest of the run (:func:`classify_run` gives it)."""
    if test.verdict not in ("fail", "error") and not getattr(test, "flaky", False):
        return None
    if getattr(test, "flaky", False):
        return Cause("flaky", "runner-flaky")
    hint = test.failure.hint if test.failure is not None else None
    if hint is not None and hint != "unknown":
        return Cause(hint, "hint")
    text = error_text(test)
    if _search(_ENVIRONMENT, text):
        return Cause("environment", "error-environment")
    check = failed_check(test)
    if context is not None and context.outage:
        mine = reach if reach is not None else touched(test)
        for other, anchors in sorted(context.environmental.items()):
            if other == test.test_id:
                continue
            shared = sorted(mine & anchors)
            if shared:
                return Cause("environment", "correlated-environment",
                             f"{other} failed for an environmental cause in the same run "
                             f"and shares {shared[0]} with it")
        if _found_nothing(check):
            other = sorted(context.environmental)[0]
            return Cause("environment", "correlated-environment",
                         f"its check found nothing while {other} failed for an "
                         "environmental cause in the same run")
    if _search(_TEST_BUG, text):
        return Cause("test-bug", "error-test-bug")
    passed_before = build_tag is not None and build_tag in passed_on_build
    if passed_before and not (context is not None and context.outage):
        return Cause("flaky", "timeout-passed-on-build" if _search(_TIMEOUT, text)
                     else "passed-on-build")
    if check is not None:
        if check.check is not None and check.check.not_found:
            return Cause("unknown", "element-missing")
        return Cause("app-bug", "check-failed")
    if _search(_ASSERTION, text) and not _search(_TIMEOUT, text):
        return Cause("app-bug", "check-failed")
    return Cause("unknown", "no-rule")


def classify_run(run: Run, passed_on_build: Mapping[str, Sequence[str]],
                 endpoints: Mapping[str, Collection[str]] | None = None) -> dict[str, Cause]:
    """Every failing test's cause (``passed_on_build``: test id -> the builds it passed
    on before): the rules, with rule 4's context taken from the run's own environmental
    failures. ``endpoints``: test id -> the ``api:`` anchors of its past runs — a failure
    that names no endpoint (an API test's failed status) still shares the one it calls."""
    first = {t.test_id: classify(t, passed_on_build=passed_on_build.get(t.test_id, ()),
                                 build_tag=run.build_tag) for t in run.tests}
    past = endpoints or {}

    def reach(t: TestResult) -> frozenset[str]:
        return touched(t) | {a for a in past.get(t.test_id, ()) if a.startswith("api:")}

    environmental = {t.test_id: reach(t) for t in run.tests
                     if (c := first[t.test_id]) is not None and c.cause == "environment"
                     and c.rule in ("error-environment", "hint")}
    context = RunContext(environmental)
    out: dict[str, Cause] = {}
    for t in run.tests:
        c = first[t.test_id]
        if c is None:
            continue
        if environmental and c.rule not in ("runner-flaky", "hint", "error-environment"):
            c = classify(t, passed_on_build=passed_on_build.get(t.test_id, ()),
                         build_tag=run.build_tag, context=context, reach=reach(t)) or c
        out[t.test_id] = c
    return out
