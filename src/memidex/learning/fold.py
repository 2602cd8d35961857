"""What the learning remembers about each test between runs, and how a run is folded in.

:class:`TestState` is one test's memory (the anchors of its past runs, the builds it
passed on, the facts it taught and how many passing runs each was missing from);
:func:`fold_run` folds one run into a product's states and :func:`count_missing` finds
the facts due for deprecation. Pure: the tests file that keeps these states is owned by
:mod:`memidex.runstate.tests`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from memidex.evidence import Run
from memidex.learning.candidates import Candidate
from memidex.records.ids import record_id

__all__ = ["MAX_PASSED_BUILDS", "TestState", "copy_states", "count_missing", "fold_run"]

MAX_PASSED_BUILDS = 20


@dataclass
class TestState:
    """What the learning remembers about one test of one product."""

    __test__ = False  # not a pytest class

    anchors: set[str] = field(default_factory=set)
    last_ordinal: int = 0
    runs: int = 0
    passed_builds: list[str] = field(default_factory=list)  # newest last, at most 20
    taught: dict[str, str] = field(default_factory=dict)  # fact id -> its main anchor
    missing: dict[str, int] = field(default_factory=dict)  # fact id -> passing runs missed

    def as_dict(self) -> dict[str, Any]:
        return {"anchors": sorted(self.anchors), "last_ordinal": self.last_ordinal,
                "runs": self.runs, "passed_builds": list(self.passed_builds),
                "taught": dict(sorted(self.taught.items())),
                "missing": dict(sorted(self.missing.items()))}

    @classmethod
    def from_dict(cls, entry: Mapping[str, Any]) -> TestState:
        return cls(
            anchors=set(entry.get("anchors") or ()),
            last_ordinal=int(entry.get("last_ordinal") or 0),
            runs=int(entry.get("runs") or 0),
            passed_builds=[str(b) for b in entry.get("passed_builds") or ()],
            taught={str(k): str(v) for k, v in (entry.get("taught") or {}).items()},
            missing={str(k): int(v) for k, v in (entry.get("missing") or {}).items()})


def copy_states(tests: Mapping[str, TestState]) -> dict[str, TestState]:
    """A deep copy, so a plan can fold into it and leave the loaded states as they were."""
    return {k: TestState(anchors=set(v.anchors), last_ordinal=v.last_ordinal, runs=v.runs,
                         passed_builds=list(v.passed_builds), taught=dict(v.taught),
                         missing=dict(v.missing))
            for k, v in tests.items()}


def count_missing(tests: dict[str, TestState], run: Run, after: int,
                  touched: set[str]) -> list[str]:
    """For each passing test of ``run``: the facts it taught whose anchor it no longer
    reached count one more missed run (one it reached is reset); the ids of those that
    reach ``after`` missed runs are returned (and no longer tracked) — unless the run
    itself changes them (``touched``). Updates ``tests`` in place."""
    due: list[str] = []
    for test in run.tests:
        if test.verdict != "pass":
            continue
        state = tests.get(test.test_id)
        if state is None or not state.taught:
            continue
        seen = {f"test:{test.test_id}", *test.anchors}
        for s in test.steps:
            seen.update(s.anchors)
            if s.target:
                seen.add(s.target)
        for rid, anchor in sorted(state.taught.items()):
            if anchor in seen:
                state.missing.pop(rid, None)
                continue
            missed = state.missing.get(rid, 0) + 1
            state.missing[rid] = missed
            if missed < after or rid in touched:
                continue
            state.taught.pop(rid, None)
            state.missing.pop(rid, None)
            due.append(rid)
    return due


def fold_run(tests: dict[str, TestState], run: Run, n: int,
             candidates: Sequence[Candidate]) -> None:
    """Fold run ``n`` into the tests' states: each test's anchors, last ordinal, run
    count, the builds it passed on, the facts it taught. Updates ``tests`` in place."""
    taught: dict[str, dict[str, str]] = {}
    for c in candidates:
        if c.kind == "fact":
            rid = record_id(c.kind, c.anchor, run.product, dict(c.scope))
            taught.setdefault(c.test_id, {})[rid] = c.anchor
    for test in run.tests:
        state = tests.setdefault(test.test_id, TestState())
        state.anchors.update(test.anchors)
        for s in test.steps:
            state.anchors.update(s.anchors)
            if s.target:
                state.anchors.add(s.target)
        state.last_ordinal = max(state.last_ordinal, n)
        state.runs += 1
        if test.verdict == "pass" and run.build_tag:
            builds = [b for b in state.passed_builds if b != run.build_tag]
            state.passed_builds = [*builds, run.build_tag][-MAX_PASSED_BUILDS:]
        state.taught.update(taught.get(test.test_id, {}))
