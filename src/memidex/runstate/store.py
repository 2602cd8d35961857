"""The run store: frozen runs and what each test touched (``<state_dir>/runs/``, SPEC §1, §3).

::

    .agent-qa/runs/<run_id>.json          the frozen run: its ordinal, digest, analysis
                                          and the masked evidence; written once, never
                                          changed (the verdict is frozen)
    .agent-qa/runs/<run_id>.result.json   what its curation did: the changes and
                                          proposals (``done`` once the records landed)
    .agent-qa/runs/tests-<product>.json   per test: the anchors of its past runs, the
                                          last ordinal it ran at, the records it taught
                                          and how many passing runs each was missing from

Everything here is local state, ignored by git; only the ingest writes it, under the
writer lease, each file through :func:`memidex.store.fsio.atomic_write`.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memidex.config import Config
from memidex.errors import InvalidInputError
from memidex.evidence import RUN_ID_PATTERN, Run, parse_run
from memidex.store.fsio import atomic_write, dump_json, read_json, refuse_symlink

__all__ = ["FrozenRun", "RunResult", "RunStore", "TestState", "runs_dir"]

VERSION = 1
_RUN_ID_RE = re.compile(RUN_ID_PATTERN[1:-1])


def runs_dir(config: Config) -> Path:
    return config.state_path / "runs"


@dataclass(frozen=True, slots=True)
class FrozenRun:
    """A run as ingested: never changed after it is written."""

    run: Run
    ordinal: int
    digest: str
    analysis: Mapping[str, str]  # test id -> root cause, for every failing test
    path: Path

    @property
    def run_id(self) -> str:
        return self.run.run_id

    def as_dict(self) -> dict[str, Any]:
        return {"version": VERSION, "run_id": self.run.run_id, "product": self.run.product,
                "ordinal": self.ordinal, "build_tag": self.run.build_tag, "ci": self.run.ci,
                "digest": self.digest, "analysis": dict(sorted(self.analysis.items())),
                "run": self.run.as_dict()}


@dataclass(frozen=True, slots=True)
class RunResult:
    """What a run's curation did (or, before ``done``, is about to do)."""

    run_id: str
    product: str
    ordinal: int
    changes: tuple[tuple[str, str], ...]  # (op, record id)
    proposals: tuple[str, ...] = ()
    done: bool = False
    notes: tuple[str, ...] = ()
    build_tag: str | None = None
    ci: bool = False
    verdicts: Mapping[str, int] = field(default_factory=dict)  # verdict -> tests
    rolled_back: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"version": VERSION, "run_id": self.run_id, "product": self.product,
                "ordinal": self.ordinal, "build_tag": self.build_tag, "ci": self.ci,
                "verdicts": dict(sorted(self.verdicts.items())), "done": self.done,
                "rolled_back": self.rolled_back,
                "changes": [{"op": op, "id": rid} for op, rid in self.changes],
                "proposals": list(self.proposals), "notes": list(self.notes)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunResult:
        return cls(run_id=str(data["run_id"]), product=str(data.get("product", "")),
                   ordinal=int(data["ordinal"]),
                   changes=tuple((c["op"], c["id"]) for c in data.get("changes", ())),
                   proposals=tuple(data.get("proposals", ())), done=bool(data.get("done")),
                   notes=tuple(data.get("notes", ())), build_tag=data.get("build_tag"),
                   ci=bool(data.get("ci")),
                   verdicts={str(k): int(v) for k, v in (data.get("verdicts") or {}).items()},
                   rolled_back=bool(data.get("rolled_back")))


@dataclass
class TestState:
    """What the run store remembers about one test of one product."""

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


class RunStore:
    """The frozen runs of one repository."""

    def __init__(self, config: Config) -> None:
        self.dir = runs_dir(config)
        refuse_symlink(self.dir)  # frozen runs are never written through a link elsewhere

    def path(self, run_id: str) -> Path:
        if not _RUN_ID_RE.fullmatch(run_id):
            raise InvalidInputError(f"run id {run_id!r} must be letters, digits, . _ - "
                                    "(starting with a letter or digit)")
        return self.dir / f"{run_id}.json"

    def result_path(self, run_id: str) -> Path:
        return self.path(run_id).with_suffix(".result.json")

    # --- frozen runs ---

    def raw(self, run_id: str) -> dict[str, Any] | None:
        """The frozen run's JSON (not validated again), or None."""
        return read_json(self.path(run_id))

    def get(self, run_id: str) -> FrozenRun | None:
        path = self.path(run_id)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        return self._decode(raw, path)

    def _decode(self, raw: bytes, path: Path) -> FrozenRun:
        try:
            data = json.loads(raw)
            run = parse_run(json.dumps(data["run"]).encode("utf-8"), source=str(path))
            return FrozenRun(run=run, ordinal=int(data["ordinal"]), digest=str(data["digest"]),
                             analysis=dict(data.get("analysis") or {}), path=path)
        except (ValueError, KeyError, TypeError) as exc:
            raise InvalidInputError(f"{path}: the frozen run cannot be read ({exc})",
                                    hint="it is local state: move it aside and ingest the "
                                    "run again") from None

    def freeze(self, frozen: FrozenRun) -> None:
        """Write the frozen run (durable) — once: an existing file is never replaced."""
        self.dir.mkdir(parents=True, exist_ok=True)
        if frozen.path.exists():
            raise InvalidInputError(f"{frozen.path} exists: a frozen run is never rewritten")
        atomic_write(frozen.path, dump_json(frozen.as_dict(), indent=1))

    # --- results ---

    def result(self, run_id: str) -> RunResult | None:
        data = read_json(self.result_path(run_id))
        if data is None:
            return None
        try:
            return RunResult.from_dict(data)
        except (KeyError, TypeError, ValueError):
            return None

    def results(self, product: str | None = None) -> list[RunResult]:
        """Every run's result (of ``product``), in ordinal order: what ``runs list`` and
        ``knowledge diff`` read (small files; the frozen runs are not parsed)."""
        out: list[RunResult] = []
        try:
            paths = sorted(self.dir.glob("*.result.json"))
        except OSError:
            return out
        for path in paths:
            data = read_json(path)
            if data is None:
                continue
            try:
                result = RunResult.from_dict(data)
            except (KeyError, TypeError, ValueError):
                continue
            if product is None or result.product == product:
                out.append(result)
        out.sort(key=lambda r: (r.product, r.ordinal, r.run_id))
        return out

    def save_result(self, result: RunResult) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        atomic_write(self.result_path(result.run_id), dump_json(result.as_dict(), indent=1))

    # --- tests ---

    def tests_path(self, product: str) -> Path:
        return self.dir / f"tests-{product}.json"

    def tests_ordinal(self, product: str) -> int:
        """The ordinal of the last run folded into the tests file (0: none)."""
        data = read_json(self.tests_path(product)) or {}
        value = data.get("ordinal", 0)
        return value if isinstance(value, int) else 0

    def tests(self, product: str) -> dict[str, TestState]:
        """Every test of ``product`` the run store has seen."""
        data = read_json(self.tests_path(product)) or {}
        out: dict[str, TestState] = {}
        for test_id, entry in (data.get("tests") or {}).items():
            if not isinstance(entry, dict):
                continue
            out[test_id] = TestState(
                anchors=set(entry.get("anchors") or ()),
                last_ordinal=int(entry.get("last_ordinal") or 0),
                runs=int(entry.get("runs") or 0),
                passed_builds=[str(b) for b in entry.get("passed_builds") or ()],
                taught={str(k): str(v) for k, v in (entry.get("taught") or {}).items()},
                missing={str(k): int(v) for k, v in (entry.get("missing") or {}).items()})
        return out

    def save_tests(self, product: str, tests: Mapping[str, TestState],
                   ordinal: int = 0) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        data = {"version": VERSION, "product": product, "ordinal": ordinal,
                "tests": {k: v.as_dict() for k, v in sorted(tests.items())}}
        atomic_write(self.tests_path(product), dump_json(data, indent=1))

    def test_anchors(self, product: str, test_id: str) -> tuple[str, ...]:
        """The anchors ``test_id`` touched in its past runs (sorted; empty if unknown).
        The tests file is read again only when its size or modification time changed (a
        long-lived process — the MCP server — briefs many tests)."""
        path = self.tests_path(product)
        try:
            st = os.stat(path)
        except OSError:
            return ()
        key = (str(path), st.st_size, st.st_mtime_ns)
        cached = _ANCHORS.get(str(path))
        if cached is None or cached[0] != key:
            anchors = {t: tuple(sorted(state.anchors))
                       for t, state in self.tests(product).items()}
            cached = (key, anchors)
            _ANCHORS[str(path)] = cached
        return cached[1].get(test_id, ())


_ANCHORS: dict[str, tuple[tuple[str, int, int], dict[str, tuple[str, ...]]]] = {}
