"""The run-evidence values: frozen dataclasses built from validated run JSON."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memidex.records.vocab import Pairs

__all__ = ["Attempt", "Check", "Failure", "Run", "Step", "TestResult"]


@dataclass(frozen=True, slots=True)
class Check:
    kind: str
    passed: bool
    expected: str | None = None
    not_found: bool = False
    """A failed check whose element was not found (``Received: <element(s) not found>``)."""


@dataclass(frozen=True, slots=True)
class Failure:
    message: str
    hint: str | None = None
    step: int | None = None


@dataclass(frozen=True, slots=True)
class Attempt:
    """One attempt of a test that the runner retried: how it ended and its error."""

    status: str
    error: str | None = None
    duration_ms: int | None = None


@dataclass(frozen=True, slots=True)
class Step:
    index: int
    action: str
    target: str | None = None
    anchors: tuple[str, ...] = ()
    value: str | None = None
    observed: str | None = None
    check: Check | None = None
    error: str | None = None
    served_records: tuple[str, ...] = ()
    scope: Pairs = ()
    artifacts: tuple[str, ...] = ()
    duration_ms: int | None = None
    title: str | None = None


@dataclass(frozen=True, slots=True)
class TestResult:
    __test__ = False  # not a pytest class

    test_id: str
    verdict: str
    steps: tuple[Step, ...] = ()
    failure: Failure | None = None
    anchors: tuple[str, ...] = ()
    artifacts: tuple[str, ...] = ()
    retries: int = 0
    duration_ms: int | None = None
    flaky: bool = False
    attempts: tuple[Attempt, ...] = ()
    title: str | None = None
    project: str | None = None

    @property
    def passed(self) -> bool:
        return self.verdict == "pass"

    def as_dict(self) -> dict[str, Any]:
        """The test as :meth:`Run.as_dict` writes it."""
        return _test_dict(self)


@dataclass(frozen=True, slots=True)
class Run:
    run_id: str
    product: str
    tests: tuple[TestResult, ...]
    build_tag: str | None = None
    ci: bool = False

    def as_dict(self) -> dict[str, Any]:
        """The run as JSON data in the schema's shape (every key, ``null`` when unset);
        :func:`parse_run` of it gives this run back."""
        return {
            "run_id": self.run_id, "product": self.product, "build_tag": self.build_tag,
            "ci": self.ci, "tests": [_test_dict(t) for t in self.tests],
        }


def _test_dict(t: TestResult) -> dict[str, Any]:
    failure = None if t.failure is None else {
        "message": t.failure.message, "hint": t.failure.hint, "step": t.failure.step}
    out: dict[str, Any] = {
        "test_id": t.test_id, "verdict": t.verdict, "retries": t.retries,
        "duration_ms": t.duration_ms, "anchors": list(t.anchors),
        "steps": [_step_dict(s) for s in t.steps], "failure": failure,
        "artifacts": list(t.artifacts), "flaky": t.flaky,
        "attempts": [{"status": a.status, "error": a.error, "duration_ms": a.duration_ms}
                     for a in t.attempts]}
    # keys added later are written only when set, so a run's digest stays what it was
    if t.title is not None:
        out["title"] = t.title
    if t.project is not None:
        out["project"] = t.project
    return out


def _step_dict(s: Step) -> dict[str, Any]:
    check: dict[str, Any] | None = None if s.check is None else {
        "kind": s.check.kind, "passed": s.check.passed, "expected": s.check.expected}
    if check is not None and s.check is not None and s.check.not_found:
        check["not_found"] = True
    return {"index": s.index, "action": s.action, "title": s.title, "target": s.target,
            "anchors": list(s.anchors), "value": s.value, "observed": s.observed,
            "check": check, "error": s.error, "served_records": list(s.served_records),
            "scope": dict(s.scope), "artifacts": list(s.artifacts),
            "duration_ms": s.duration_ms}
