"""What the learning remembers about each test between runs, and how a run is folded in.

:class:`TestState` is one test's memory (the anchors of its past runs, the builds it
passed on, the facts it taught and how many passing runs each was missing from);
:func:`fold_run` folds one run into a product's states and :func:`count_missing` finds
the facts due for deprecation. Pure: the tests file that keeps these states is owned by
:mod:`memidex.runstate.tests`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from memidex.evidence import Run, TestResult
from memidex.learning.candidates import Candidate
from memidex.learning.teststate import TestState, copy_states
from memidex.records.loadback import cached_record_id

__all__ = ["MAX_PASSED_BUILDS", "TestState", "copy_states", "count_missing", "count_resolved",
           "fold_run", "reached"]

MAX_PASSED_BUILDS = 20


def reached(test: TestResult) -> set[str]:
    """Every anchor a test's run reached: its own, its steps' and their targets."""
    seen = {f"test:{test.test_id}", *test.anchors}
    for s in test.steps:
        seen.update(s.anchors)
        if s.target:
            seen.add(s.target)
    return seen


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
        seen = reached(test)
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


def count_resolved(tests: dict[str, TestState], run: Run, after: int,
                   touched: set[str]) -> list[str]:
    """For each test of ``run``: the unknowns it raised count one more passing run in a
    row when it passed (the test that failed on the anchor passes again: whatever broke
    it no longer does; a failure starts the count again); the ids of those that reach
    ``after`` are returned (and no longer tracked) — unless the run itself changes them.
    Updates ``tests`` in place."""
    due: list[str] = []
    for test in run.tests:
        state = tests.get(test.test_id)
        if state is None or not state.raised:
            continue
        if test.verdict != "pass":
            if test.verdict in ("fail", "error"):
                for entry in state.raised.values():
                    entry[1] = 0
            continue
        for rid, entry in sorted(state.raised.items()):
            entry[1] = int(entry[1]) + 1
            if entry[1] >= after and rid not in touched:
                state.raised.pop(rid)
                due.append(rid)
    return due


def fold_run(tests: dict[str, TestState], run: Run, n: int,
             candidates: Sequence[Candidate],
             causes: Mapping[str, str] | None = None) -> None:
    """Fold run ``n`` into the tests' states: each test's anchors, last ordinal, run
    count, the builds it passed on, the facts it taught, the unknowns it raised and how
    its run ended (``causes``: the run's analysis). Updates ``tests`` in place."""
    taught: dict[str, dict[str, str]] = {}
    raised: dict[str, dict[str, str]] = {}
    for c in candidates:
        rid = cached_record_id(c.kind, c.anchor, run.product, c.scope)
        if c.kind == "fact" and not c.from_failure and not c.held:
            taught.setdefault(c.test_id, {})[rid] = c.anchor
        elif c.kind == "unknown":
            raised.setdefault(c.test_id, {})[rid] = c.anchor
    for test in run.tests:
        state = tests.setdefault(test.test_id, TestState())
        mine = reached(test) - {f"test:{test.test_id}"}
        state.anchors.update(mine)
        if test.verdict == "pass":
            state.recent = {"anchors": sorted(mine)}
        elif test.verdict != "skip":  # a failure stops early: it keeps what it reached before
            state.recent = {"anchors": sorted(mine | set(state.recent.get("anchors", ())))}
        state.last_ordinal = max(state.last_ordinal, n)
        state.runs += 1
        if test.verdict == "pass" and run.build_tag:
            builds = [b for b in state.passed_builds if b != run.build_tag]
            state.passed_builds = [*builds, run.build_tag][-MAX_PASSED_BUILDS:]
        state.taught.update(taught.get(test.test_id, {}))
        for rid, anchor in raised.get(test.test_id, {}).items():
            state.raised[rid] = [anchor, 0]
        if test.verdict != "skip":
            state.last_cause = (causes or {}).get(test.test_id)
            # the facts it taught that its failing run (an app's or the test's fault) no
            # longer reached: not served while it fails (they may be what broke)
            state.recent["suspended"] = sorted(
                rid for rid, anchor in state.taught.items() if anchor not in mine
            ) if state.last_cause in ("app-bug", "unknown", "test-bug") else []
            if not state.recent["suspended"]:
                del state.recent["suspended"]
