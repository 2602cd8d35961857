"""A product's tests file: ``<state_dir>/runs/tests-<product>.json`` (SPEC §3).

Per test of the product, what the learning remembers between runs
(:class:`memidex.learning.teststate.TestState`): the anchors of its past runs, the last
ordinal it ran at, the builds it passed on, the facts it taught and how many passing
runs each was missing from. The file also names the ordinal of the last run folded into
it, so a resumed ingest folds a run once. The ingest reads it once and writes it once;
the brief reads a test's anchors from it (cached by the file's size and mtime, for a
long-lived server). A file that cannot be read back is a
:class:`memidex.errors.StateDamagedError`, never an empty history.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from memidex.config import Config
from memidex.errors import StateDamagedError
from memidex.learning.teststate import TestState
from memidex.plain import Frozen, set_field
from memidex.records.ids import PRODUCT_RE
from memidex.store.fsio import dump_json, refuse_symlink
from memidex.store.state import StateWriter, load_state

__all__ = ["TestsFile", "TestsState", "tests_path"]

VERSION = 1


def tests_path(config: Config, product: str) -> Path:
    if not PRODUCT_RE.fullmatch(product):
        raise StateDamagedError(f"product {product!r} is not a product name")
    return config.state_path / "runs" / f"tests-{product}.json"


class TestsState(Frozen):
    """The tests file's contents: the last ordinal folded in and each test's state."""

    __test__ = False  # not a pytest class
    __slots__ = ("ordinal", "tests")
    ordinal: int
    tests: Mapping[str, TestState]

    def __init__(self, ordinal: int = 0, tests: Mapping[str, TestState] | None = None) -> None:
        set_field(self, "ordinal", ordinal)
        set_field(self, "tests", {} if tests is None else tests)


class TestsFile:
    """The owner of one product's tests file."""

    __test__ = False

    def __init__(self, config: Config, product: str) -> None:
        self.product = product
        self.path = tests_path(config, product)
        refuse_symlink(self.path.parent)

    def exists(self) -> bool:
        return self.path.exists()

    def load(self) -> TestsState:
        data = load_state(self.path, what="tests file")
        if data is None:
            return TestsState()
        try:
            ordinal = data.get("ordinal", 0)
            tests = {str(k): TestState.from_dict(v)
                     for k, v in (data.get("tests") or {}).items() if isinstance(v, dict)}
        except (TypeError, ValueError, AttributeError) as exc:
            raise StateDamagedError(f"{self.path}: the tests file is damaged ({exc})") from None
        if isinstance(ordinal, bool) or not isinstance(ordinal, int):
            raise StateDamagedError(f"{self.path}: the tests file is damaged (`ordinal` is "
                                    "not a whole number)")
        return TestsState(ordinal, tests)

    def save(self, writer: StateWriter, tests: Mapping[str, TestState], *,
             ordinal: int) -> None:
        data = {"version": VERSION, "product": self.product, "ordinal": ordinal,
                "tests": {k: v.as_dict() for k, v in sorted(tests.items())}}
        # compact: the C encoder (indent= takes Python's: 12 ms against 2.7 ms at 150 tests)
        writer.put(self.path, dump_json(data))

    def test_anchors(self, test_id: str) -> tuple[str, ...]:
        """The anchors ``test_id`` reached in its latest runs (its last passing run, and
        what failing runs since reached; sorted; empty if unknown) — a test that moved on
        from an element no longer brings its records. The file is read again only when
        its size or modification time changed (a long-lived process — the MCP server —
        briefs many tests)."""
        return self._view().anchors.get(test_id, ())

    def serving(self) -> Serving:
        """What the tests' states say about serving (:class:`Serving`)."""
        return self._view()

    def _view(self) -> Serving:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return Serving()
        key = (str(self.path), st.st_size, st.st_mtime_ns)
        cached = _VIEWS.get(str(self.path))
        if cached is None or cached[0] != key:
            cached = (key, _serving(self.load().tests))
            _VIEWS[str(self.path)] = cached
        return cached[1]


class Serving(Frozen):
    """What a brief reads from the tests' states: each test's anchors, the facts its last
    passing run no longer reached — or its last failing run, when it failed for a cause of
    the app's or the test's (``not_reached``), and the procedures of tests whose
    last run failed for a cause that is neither flaky nor environmental
    (``failing``, by the procedure's ``test:`` anchor)."""

    __slots__ = ("anchors", "not_reached", "failing")
    anchors: Mapping[str, tuple[str, ...]]
    not_reached: frozenset[str]
    failing: frozenset[str]

    def __init__(self, anchors: Mapping[str, tuple[str, ...]] | None = None,
                 not_reached: frozenset[str] = frozenset(),
                 failing: frozenset[str] = frozenset()) -> None:
        set_field(self, "anchors", {} if anchors is None else anchors)
        set_field(self, "not_reached", not_reached)
        set_field(self, "failing", failing)


def _serving(tests: Mapping[str, TestState]) -> Serving:
    anchors = {t: tuple(sorted(s.recent.get("anchors") or s.anchors))
               for t, s in tests.items()}
    missing = frozenset({rid for s in tests.values() for rid, n in s.missing.items() if n > 0}
                        | {rid for s in tests.values() for rid in s.recent.get("suspended", ())})
    failing = set()
    for test_id, s in tests.items():
        if s.last_cause is not None and s.last_cause not in ("flaky", "environment"):
            failing.add(f"test:{test_id}")
            if "@" in test_id:
                failing.add(f"test:{test_id.rsplit('@', 1)[0]}")
    return Serving(anchors, missing, frozenset(failing))


_VIEWS: dict[str, tuple[tuple[str, int, int], Serving]] = {}
