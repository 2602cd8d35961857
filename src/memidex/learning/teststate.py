"""What the learning remembers about one test between runs: :class:`TestState`, kept
apart from the folding (:mod:`memidex.learning.fold`, which re-exports it) so that
reading a tests file — every brief does — loads neither the run evidence nor the
candidates."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["TestState", "copy_states"]


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
    raised: dict[str, list[Any]] = field(default_factory=dict)
    """unknown id -> [its main anchor, passing runs in a row since it was raised]"""
    last_cause: str | None = None
    """The root cause of its last run's failure (None: it passed)."""
    recent: dict[str, list[str]] = field(default_factory=dict)
    """The anchors of its last run (``"anchors"``): what the brief matches on — a test that
    moved on from an element no longer drags that element's records along."""

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
