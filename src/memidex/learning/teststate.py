"""What the learning remembers about one test between runs: :class:`TestState`, kept
apart from the folding (:mod:`memidex.learning.fold`, which re-exports it) so that
reading a tests file — every brief does — loads neither the run evidence nor the
candidates."""

from __future__ import annotations

from collections.abc import Mapping

from memidex.plain import Plain

TYPE_CHECKING = False  # not typing's: a one-shot command imports no typing (~2 ms)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["TestState", "copy_states"]


class TestState(Plain):
    """What the learning remembers about one test of one product.

    ``passed_builds``: newest last, at most 20; ``taught``: fact id -> its main anchor;
    ``missing``: fact id -> passing runs missed; ``raised``: unknown id -> [its main
    anchor, passing runs in a row since it was raised]; ``last_cause``: the root cause of
    its last run's failure (None: it passed); ``recent``: the anchors of its last run
    (``"anchors"``), what the brief matches on — a test that moved on from an element no
    longer drags that element's records along."""

    __test__ = False  # not a pytest class
    __slots__ = ("anchors", "last_ordinal", "runs", "passed_builds", "taught", "missing",
                 "raised", "last_cause", "recent")

    def __init__(self, anchors: set[str] | None = None, last_ordinal: int = 0, runs: int = 0,
                 passed_builds: list[str] | None = None, taught: dict[str, str] | None = None,
                 missing: dict[str, int] | None = None,
                 raised: dict[str, list[Any]] | None = None, last_cause: str | None = None,
                 recent: dict[str, list[str]] | None = None) -> None:
        self.anchors: set[str] = set() if anchors is None else anchors
        self.last_ordinal = last_ordinal
        self.runs = runs
        self.passed_builds: list[str] = [] if passed_builds is None else passed_builds
        self.taught: dict[str, str] = {} if taught is None else taught
        self.missing: dict[str, int] = {} if missing is None else missing
        self.raised: dict[str, list[Any]] = {} if raised is None else raised
        self.last_cause = last_cause
        self.recent: dict[str, list[str]] = {} if recent is None else recent

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "anchors": sorted(self.anchors), "last_ordinal": self.last_ordinal,
            "runs": self.runs, "passed_builds": list(self.passed_builds),
            "taught": dict(sorted(self.taught.items())),
            "missing": dict(sorted(self.missing.items()))}
        if self.raised:
            out["raised"] = {k: list(v) for k, v in sorted(self.raised.items())}
        if self.last_cause is not None:
            out["last_cause"] = self.last_cause
        if self.recent:
            out["recent"] = {k: sorted(v) for k, v in sorted(self.recent.items())}
        return out

    @classmethod
    def from_dict(cls, entry: Mapping[str, Any]) -> TestState:
        return cls(
            anchors=set(entry.get("anchors") or ()),
            last_ordinal=int(entry.get("last_ordinal") or 0),
            runs=int(entry.get("runs") or 0),
            passed_builds=[str(b) for b in entry.get("passed_builds") or ()],
            taught={str(k): str(v) for k, v in (entry.get("taught") or {}).items()},
            missing={str(k): int(v) for k, v in (entry.get("missing") or {}).items()},
            raised={str(k): [str(v[0]), int(v[1])]
                    for k, v in (entry.get("raised") or {}).items()},
            last_cause=entry.get("last_cause"),
            recent={str(k): [str(a) for a in v]
                    for k, v in (entry.get("recent") or {}).items()})


def copy_states(tests: Mapping[str, TestState]) -> dict[str, TestState]:
    """A deep copy, so a plan can fold into it and leave the loaded states as they were."""
    return {k: TestState(anchors=set(v.anchors), last_ordinal=v.last_ordinal, runs=v.runs,
                         passed_builds=list(v.passed_builds), taught=dict(v.taught),
                         missing=dict(v.missing),
                         raised={r: list(x) for r, x in v.raised.items()},
                         last_cause=v.last_cause,
                         recent={r: list(x) for r, x in v.recent.items()})
            for k, v in tests.items()}
