"""What the learning remembers about one test between runs: :class:`TestState`, kept
apart from the folding (:mod:`memidex.learning.fold`, which re-exports it) so that
reading a tests file — every brief does — loads neither the run evidence nor the
candidates."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["TestState", "copy_states"]


class TestState:
    """What the learning remembers about one test of one product."""

    __test__ = False  # not a pytest class

    anchors: set[str]
    last_ordinal: int
    runs: int
    passed_builds: list[str]  # newest last, at most 20
    taught: dict[str, str]  # fact id -> its main anchor
    missing: dict[str, int]  # fact id -> passing runs missed
    raised: dict[str, list[Any]]
    """unknown id -> [its main anchor, passing runs in a row since it was raised]"""
    last_cause: str | None
    """The root cause of its last run's failure (None: it passed)."""
    recent: dict[str, list[str]]
    """The anchors of its last run (``"anchors"``): what the brief matches on — a test that
    moved on from an element no longer drags that element's records along."""

    def __init__(self, anchors: set[str] | None = None, last_ordinal: int = 0,
                 runs: int = 0, passed_builds: list[str] | None = None,
                 taught: dict[str, str] | None = None,
                 missing: dict[str, int] | None = None,
                 raised: dict[str, list[Any]] | None = None, last_cause: str | None = None,
                 recent: dict[str, list[str]] | None = None) -> None:
        self.anchors = anchors if anchors is not None else set()
        self.last_ordinal = last_ordinal
        self.runs = runs
        self.passed_builds = passed_builds if passed_builds is not None else list()
        self.taught = taught if taught is not None else dict()
        self.missing = missing if missing is not None else dict()
        self.raised = raised if raised is not None else dict()
        self.last_cause = last_cause
        self.recent = recent if recent is not None else dict()

    def __repr__(self) -> str:
        return (f"TestState(anchors={self.anchors!r}, last_ordinal={self.last_ordinal!r}, "
                f"runs={self.runs!r}, passed_builds={self.passed_builds!r}, "
                f"taught={self.taught!r}, missing={self.missing!r}, "
                f"raised={self.raised!r}, last_cause={self.last_cause!r}, "
                f"recent={self.recent!r})")

    def _key(self) -> tuple[object, ...]:
        return (self.anchors, self.last_ordinal, self.runs, self.passed_builds, self.taught,
                self.missing, self.raised, self.last_cause, self.recent)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TestState) or other.__class__ is not self.__class__:
            return NotImplemented
        return self._key() == other._key()

    __hash__ = None  # type: ignore[assignment]

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
