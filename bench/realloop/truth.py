"""The real loop's ground truth (``truth.yaml``), loaded and checked, and the judge that
tells whether a served fact's claim is true of a build (docs/realloop.md).

The truth file says, per anchor and per range of builds, the state of the element (or
page, or API): ``exists``, ``visible``, ``enabled``, ``checked``, ``text``, ``value``,
``url``, ``count``, ``status``. A fact is judged by the check it was learned from: the
check names the aspect (``assert-disabled`` → ``enabled`` is false), and for the aspects
with a value the app's observed text is compared with the truth's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from memidex.errors import InvalidInputError

__all__ = ["ASPECT_OF", "Bug", "Change", "Judgement", "Truth", "TruthError", "load_truth"]


class TruthError(InvalidInputError):
    """truth.yaml (or the manifest) is not what score.py can judge by."""


ASPECT_OF: Mapping[str, tuple[str, Any]] = {
    "assert-visible": ("visible", True), "assert-hidden": ("visible", False),
    "assert-enabled": ("enabled", True), "assert-disabled": ("enabled", False),
    "assert-checked": ("checked", True), "assert-unchecked": ("checked", False),
    "assert-text": ("text", None), "assert-value": ("value", None),
    "assert-url": ("url", None), "assert-count": ("count", None),
    "assert-status": ("status", None),
}
"""A check kind → (the aspect it looks at, the value it claims; None: the observed one)."""

ASPECTS = ("exists", "visible", "enabled", "checked", "text", "value", "url", "count",
           "status")

_TIME = re.compile(r"\b\d+(?:[.,]\d+)*\s*(?:ms|milliseconds?|s|secs?|seconds?)\b")
"""memidex writes a duration in an observed text as ``<time>`` (docs/learning.md); the
truth's values are compared after the same replacement."""


def _norm(value: Any) -> str:
    return _TIME.sub("<time>", re.sub(r"\s+", " ", str(value)).strip())


def _builds(key: Any, known: list[int], where: str) -> list[int]:
    text = str(key).strip()
    if text == "all":
        return list(known)
    m = re.fullmatch(r"(\d+)(?:-(\d+))?", text)
    if m is None:
        raise TruthError(f"{where}: `{key}` is not a build key (all, N or N-M)")
    lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
    out = [b for b in known if lo <= b <= hi]
    if not out or lo > hi:
        raise TruthError(f"{where}: `{key}` names no build of {known}")
    return out


@dataclass(frozen=True)
class Judgement:
    """A served fact, judged: ``verdict`` is ``true``, ``false`` or ``unjudged``."""

    verdict: str
    aspect: str | None
    claimed: Any
    expected: Any
    reason: str


@dataclass(frozen=True)
class Change:
    """An intended change of the app (truth.yaml ``changes``)."""

    anchor: str
    aspect: str | None
    from_build: int
    until_build: int
    old: Any
    new: Any
    gone: bool
    added: bool
    why: str

    @property
    def label(self) -> str:
        if self.gone:
            return f"{self.anchor} gone (build {self.from_build}: {self.why})"
        if self.added:
            return f"{self.anchor} new (build {self.from_build}: {self.why})"
        return (f"{self.anchor} {self.aspect} {self.old!r} → {self.new!r} "
                f"(build {self.from_build}: {self.why})")


@dataclass(frozen=True)
class Bug:
    """A real bug: its builds, the tests that catch it, what a fact learning it claims."""

    id: str
    builds: tuple[int, ...]
    what: str
    tests: tuple[str, ...]
    anchors: tuple[str, ...]
    wrong: Mapping[str, Mapping[str, Any]]


@dataclass
class Truth:
    """truth.yaml, loaded and checked."""

    path: Path
    product: str
    builds: list[int]
    states: dict[str, dict[int, dict[str, Any]]]
    changes: list[Change]
    bugs: list[Bug]
    flaky: dict[str, tuple[str, ...]]  # anchor → the tests that touch it
    outage_runs: tuple[int, ...]
    outage_tests: tuple[str, ...]
    outage_anchors: tuple[str, ...]
    tests: dict[str, dict[int, tuple[str, ...]]]  # test id → build → pages
    inventory: tuple[str, ...] = field(default=())

    def state(self, anchor: str, build: int) -> dict[str, Any] | None:
        """The state of ``anchor`` at ``build``; None when the truth does not know it."""
        per = self.states.get(anchor)
        return None if per is None else per.get(build)

    def judge(self, anchor: str, check: str | None, observed: str | None,
              build: int) -> Judgement:
        """Whether a fact learned from ``check`` observing ``observed`` is true at ``build``."""
        state = self.state(anchor, build)
        if state is None:
            return Judgement("unjudged", None, observed, None,
                             f"truth.yaml says nothing of {anchor} at build {build}")
        if state.get("exists", True) is False:
            return Judgement("false", "exists", observed, False,
                             f"{anchor} does not exist at build {build}")
        if check is None or check not in ASPECT_OF:
            return Judgement("unjudged", None, observed, None,
                             f"the check `{check}` names no aspect truth.yaml knows")
        aspect, claimed = ASPECT_OF[check]
        if aspect not in state:
            return Judgement("unjudged", aspect, observed, None,
                             f"truth.yaml gives no `{aspect}` for {anchor} at build {build}")
        expected = state[aspect]
        wanted = expected if isinstance(expected, list) else [expected]
        if claimed is None:
            claimed = observed
            ok = any(_same(aspect, claimed, w) for w in wanted)
        else:
            ok = claimed in wanted
        return Judgement("true" if ok else "false", aspect, claimed, expected,
                         f"{aspect} is {expected!r} at build {build}")

    def claim(self, check: str | None, observed: str | None) -> tuple[str | None, Any]:
        """(aspect, value) a fact claims."""
        if check is None or check not in ASPECT_OF:
            return None, observed
        aspect, value = ASPECT_OF[check]
        return aspect, observed if value is None else value

    def bug_of_claim(self, anchor: str, check: str | None, observed: str | None) -> Bug | None:
        """The bug whose wrong value this claim states, if any."""
        aspect, value = self.claim(check, observed)
        for bug in self.bugs:
            wrong = bug.wrong.get(anchor, {})
            if aspect is not None and aspect in wrong and _same(aspect, value, wrong[aspect]):
                return bug
        return None

    def pages(self, test_id: str, build: int) -> tuple[str, ...]:
        return self.tests.get(test_id, {}).get(build, ())


def _same(aspect: str, claimed: Any, expected: Any) -> bool:
    if aspect in ("count", "status"):
        try:
            return int(str(claimed).strip()) == int(expected)
        except (TypeError, ValueError):
            return False
    if isinstance(expected, bool) or isinstance(claimed, bool):
        return claimed is expected
    return _norm(claimed) == _norm(expected)


def _map(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise TruthError(f"{where}: a mapping was expected, not {type(value).__name__}")
    return value


def _strs(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise TruthError(f"{where}: a list of strings was expected")
    return tuple(value)


def load_truth(path: Path) -> Truth:
    """Read and check ``truth.yaml``; :class:`TruthError` names the file and the entry."""
    try:
        return _load(path)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise TruthError(f"{path}: not a truth file ({type(exc).__name__}: {exc})") from None


def _load(path: Path) -> Truth:
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise TruthError(f"{path}: cannot read it ({exc.strerror})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        raise TruthError(f"{where}: not YAML ({getattr(exc, 'problem', None) or exc})") \
            from None
    top = _map(raw, str(path))
    builds = sorted(int(b) for b in _map(top.get("builds"), f"{path}: builds"))
    states: dict[str, dict[int, dict[str, Any]]] = {}
    for anchor, per in _map(top.get("elements"), f"{path}: elements").items():
        where = f"{path}: elements.{anchor}"
        states[anchor] = {}
        for key, value in _map(per, where).items():
            state = _map(value, f"{where}.{key}")
            unknown = set(state) - set(ASPECTS)
            if unknown:
                raise TruthError(f"{where}.{key}: unknown aspects {sorted(unknown)}")
            for b in _builds(key, builds, where):
                if b in states[anchor]:
                    raise TruthError(f"{where}: build {b} is given twice")
                states[anchor][b] = state
        missing = [b for b in builds if b not in states[anchor]]
        if missing:
            raise TruthError(f"{where}: no state for builds {missing}")
    truth = Truth(
        path=path, product=str(top.get("product") or ""), builds=builds, states=states,
        changes=[], bugs=[], flaky={}, outage_runs=(), outage_tests=(), outage_anchors=(),
        tests={})
    for i, c in enumerate(top.get("changes") or ()):
        c = _map(c, f"{path}: changes[{i}]")
        truth.changes.append(Change(
            anchor=str(c["anchor"]), aspect=c.get("aspect"), from_build=int(c["from"]),
            until_build=int(c.get("until", builds[-1])), old=c.get("old"), new=c.get("new"),
            gone=bool(c.get("gone")), added=bool(c.get("added")),
            why=str(c.get("why", ""))))
    for i, item in enumerate(top.get("bugs") or ()):
        bug = _map(item, f"{path}: bugs[{i}]")
        truth.bugs.append(Bug(
            id=str(bug["id"]),
            builds=tuple(_builds(bug["builds"], builds, f"{path}: bugs[{i}]")),
            what=str(bug.get("what", "")), tests=_strs(bug.get("tests"), f"{path}: bugs[{i}]"),
            anchors=_strs(bug.get("anchors") or [], f"{path}: bugs[{i}]"),
            wrong={a: _map(v, f"{path}: bugs[{i}].wrong") for a, v in
                   _map(bug.get("wrong") or {}, f"{path}: bugs[{i}]").items()}))
    for anchor, f in _map(top.get("flaky") or {}, f"{path}: flaky").items():
        truth.flaky[anchor] = _strs(_map(f, f"{path}: flaky.{anchor}").get("tests"),
                                    f"{path}: flaky.{anchor}.tests")
    outage = _map(top.get("outage") or {}, f"{path}: outage")
    truth.outage_runs = tuple(int(r) for r in outage.get("runs") or ())
    truth.outage_tests = _strs(outage.get("tests") or [], f"{path}: outage.tests")
    truth.outage_anchors = _strs(outage.get("anchors") or [], f"{path}: outage.anchors")
    inventory = []
    for test_id, t in _map(top.get("tests"), f"{path}: tests").items():
        where = f"{path}: tests.{test_id}"
        t = _map(t, where)
        truth.tests[test_id] = {}
        for key, pages in _map(t.get("pages"), f"{where}.pages").items():
            for b in _builds(key, builds, where):
                truth.tests[test_id][b] = _strs(pages, f"{where}.pages.{key}")
        if t.get("inventory"):
            inventory.append(test_id)
    truth.inventory = tuple(inventory)
    _check(truth)
    return truth


def _check(truth: Truth) -> None:
    """The truth agrees with itself: each change is what ``elements`` says, every test
    named is in ``tests``, and nothing changes between builds that no change or bug
    explains (a typo in a state would otherwise judge facts silently wrong)."""
    p = truth.path
    known = set(truth.tests)
    for where, ids in ([("bugs", t) for b in truth.bugs for t in b.tests]
                       + [("flaky", t) for ts in truth.flaky.values() for t in ts]
                       + [("outage", t) for t in truth.outage_tests]):
        if ids not in known:
            raise TruthError(f"{p}: {where} names the test {ids}, which `tests` lacks")
    explained: set[tuple[str, str | None, int]] = set()
    for c in truth.changes:
        if c.anchor not in truth.states:
            raise TruthError(f"{p}: the change of {c.anchor} names an anchor `elements` lacks")
        before = truth.state(c.anchor, c.from_build - 1) or {}
        after = truth.state(c.anchor, c.from_build) or {}
        if c.gone:
            ok = before.get("exists", True) and after.get("exists") is False
        elif c.added:
            ok = before.get("exists") is False and after.get("exists", True)
        else:
            ok = (c.aspect is not None and before.get(c.aspect) == c.old
                  and after.get(c.aspect) == c.new)
        if not ok:
            raise TruthError(f"{p}: the change {c.label} is not what `elements` says of "
                             f"builds {c.from_build - 1} and {c.from_build}")
        for aspect in ((None,) if c.gone or c.added else (c.aspect,)):
            explained.add((c.anchor, aspect, c.from_build))
    bug_builds = {b for bug in truth.bugs for b in bug.builds}
    for anchor, per in truth.states.items():
        for b in truth.builds[1:]:
            before, after = per[b - 1], per[b]
            if before == after or b in bug_builds or b - 1 in bug_builds:
                continue
            if (anchor, None, b) in explained:
                continue
            for aspect in sorted(set(before) | set(after)):
                if before.get(aspect) != after.get(aspect) and \
                        (anchor, aspect, b) not in explained:
                    raise TruthError(f"{p}: {anchor} changes its {aspect} at build {b}, "
                                     "and no entry of `changes` says so")
