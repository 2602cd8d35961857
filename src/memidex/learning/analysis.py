"""Analysis by rules: a root cause for every failing test (SPEC §3.3, ``docs/learning.md``).

Pure functions, no I/O. The rules, in the order they are tried (the first that decides
wins), each with its own test in ``tests/test_learning_analysis.py``:

1. the runner said the test is flaky (it failed, then passed on a retry) → ``flaky``;
2. the run's own ``hint`` (anything but ``unknown``) → that hint;
3. the error text names the environment — DNS and connection errors, TLS and certificate
   failures, a 502/503/504 from a gateway (with its reason phrase, or as an HTTP status),
   a browser ``net::ERR_*`` → ``environment`` (a number or a word in the app's own text,
   "503.00 EUR" or "Gift certificate applied", is not);
4. the error text names the test — a strict-mode violation, a malformed locator or
   selector, a script error (``SyntaxError``, ``TypeError``, ``ReferenceError``,
   ``is not a function``) → ``test-bug``;
5. the test passed on this same build before (its history) → ``flaky``: a timeout, or any
   failure the app did not change to cause;
6. a check failed (a step's check did not hold, or the error is an assertion) →
   ``app-bug`` (an app change and an app bug look alike: the curator raises an unknown);
7. otherwise ``unknown`` (a configured model may classify it later).
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass

from memidex.evidence import TestResult

__all__ = ["CAUSES", "Cause", "classify", "error_text", "failing_step"]

CAUSES: tuple[str, ...] = ("app-bug", "test-bug", "flaky", "environment", "unknown")

_ENVIRONMENT = re.compile(
    r"net::ERR_[A-Z_]+|\bE(?:NOTFOUND|CONNREFUSED|CONNRESET|AI_AGAIN|HOSTUNREACH|"
    r"NETUNREACH|TIMEDOUT|PIPE)\b|getaddrinfo|name or service not known|"
    r"could not resolve host|temporary failure in name resolution|\bdns\b|"
    r"connection (?:refused|reset|closed by peer|aborted)|socket hang up|"
    r"ssl_error|ssl routines|\bSSL(?:Error|_ERROR)|tls handshake|handshake (?:failed|failure)|"
    r"certificate (?:verify failed|has expired|is not (?:valid|trusted))|"
    r"self[- ]signed certificate|unable to (?:get|verify) .{0,30}certificate|ERR_CERT_|"
    r"\b50[234] (?:bad gateway|service (?:temporarily )?unavailable|gateway time-?out)|"
    r"\b(?:http|status|status code|response|responded with)[ :=]*50[234]\b|"
    r"\bbad gateway\b|\bservice unavailable\b|\bgateway time-?out\b",
    re.IGNORECASE)
_TEST_BUG = re.compile(
    r"strict mode violation|is not a valid selector|unexpected token|unknown engine|"
    r"invalid selector|malformed|\bSyntaxError\b|\bTypeError\b|\bReferenceError\b|"
    r"is not a function|is not defined|locator\.\w+: Error: .*selector",
    re.IGNORECASE)
_TIMEOUT = re.compile(r"timeout|timed out|time-?out", re.IGNORECASE)
_ASSERTION = re.compile(r"\bexpect(?:ed)?\b|AssertionError|assert|to(?:Be|Have)[A-Z]\w*",
                        re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Cause:
    """A failing test's root cause and the rule that gave it."""

    cause: str
    rule: str


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


def _check_failed(test: TestResult) -> bool:
    return any(s.check is not None and not s.check.passed for s in test.steps)


def classify(test: TestResult, *, passed_on_build: Collection[str],
             build_tag: str | None) -> Cause | None:
    """The root cause of ``test`` (None for a test that did not fail).

    ``passed_on_build``: the build tags this test passed on in earlier runs.
    """
    if test.verdict not in ("fail", "error") and not getattr(test, "flaky", False):
        return None
    if getattr(test, "flaky", False):
        return Cause("flaky", "runner-flaky")
    hint = test.failure.hint if test.failure is not None else None
    if hint is not None and hint != "unknown":
        return Cause(hint, "hint")
    text = error_text(test)
    if _ENVIRONMENT.search(text):
        return Cause("environment", "error-environment")
    if _TEST_BUG.search(text):
        return Cause("test-bug", "error-test-bug")
    passed_before = build_tag is not None and build_tag in passed_on_build
    if passed_before:
        return Cause("flaky", "timeout-passed-on-build" if _TIMEOUT.search(text)
                     else "passed-on-build")
    if _check_failed(test) or (_ASSERTION.search(text) and not _TIMEOUT.search(text)):
        return Cause("app-bug", "check-failed")
    return Cause("unknown", "no-rule")
