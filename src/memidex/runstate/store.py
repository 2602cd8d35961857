"""The run store: frozen runs and what each test touched (``<state_dir>/runs/``, SPEC §1, §3).

::

    .agent-qa/runs/<run_id>.json          the frozen run: its ordinal, digest, analysis
                                          and the masked evidence; written once, never
                                          changed (the verdict is frozen)
    .agent-qa/runs/<run_id>.result.json   what its curation did: the changes and
                                          proposals (``done`` once the records landed)

(each product's tests file, ``tests-<product>.json``, is :mod:`memidex.runstate.tests`'s).
Everything here is local state, ignored by git; only the ingest and the rollback write
it, under the writer lease, through the fenced state writer they are given
(:class:`memidex.store.state.StateWriter`). A file that is there but cannot be read back
is a :class:`memidex.errors.StateDamagedError`, never an absent run.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memidex.config import Config
from memidex.errors import InvalidInputError, Problem, StateDamagedError
from memidex.plain import Frozen, set_field
from memidex.records.ids import RUN_ID_PATTERN
from memidex.store.fsio import dump_json, load_json, refuse_symlink
from memidex.store.state import StateWriter, load_state

if TYPE_CHECKING:  # the evidence format is loaded only to read a frozen run
    from memidex.evidence import Run

__all__ = ["FrozenRun", "RunResult", "RunStore", "runs_dir"]


VERSION = 1
_RUN_ID_RE = re.compile(RUN_ID_PATTERN[1:-1])


def runs_dir(config: Config) -> Path:
    return config.state_path / "runs"


class FrozenRun(Frozen):
    """A run as ingested: never changed after it is written."""

    run: Run
    ordinal: int
    digest: str
    analysis: Mapping[str, str]  # test id -> root cause, for every failing test
    path: Path
    why: Mapping[str, str]  # test id -> why (a correlated cause)

    __slots__ = ("run", "ordinal", "digest", "analysis", "path", "why")

    def __init__(self, run: Run, ordinal: int, digest: str, analysis: Mapping[str, str],
                 path: Path, why: Mapping[str, str] | None = None) -> None:
        set_field(self, "run", run)
        set_field(self, "ordinal", ordinal)
        set_field(self, "digest", digest)
        set_field(self, "analysis", analysis)
        set_field(self, "path", path)
        set_field(self, "why", why if why is not None else dict())

    @property
    def run_id(self) -> str:
        return self.run.run_id

    def as_dict(self) -> dict[str, Any]:
        return {"version": VERSION, "run_id": self.run.run_id, "product": self.run.product,
                "ordinal": self.ordinal, "build_tag": self.run.build_tag, "ci": self.run.ci,
                "digest": self.digest, "analysis": dict(sorted(self.analysis.items())),
                **({"why": dict(sorted(self.why.items()))} if self.why else {}),
                "run": self.run.as_dict()}


class RunResult(Frozen):
    """What a run's curation did (or, before ``done``, is about to do): ``changes`` as (op,
    record id), ``verdicts`` as verdict -> tests."""

    __slots__ = ("run_id", "product", "ordinal", "changes", "proposals", "done", "notes",
                 "build_tag", "ci", "verdicts", "rolled_back")
    run_id: str
    product: str
    ordinal: int
    changes: tuple[tuple[str, str], ...]
    proposals: tuple[str, ...]
    done: bool
    notes: tuple[str, ...]
    build_tag: str | None
    ci: bool
    verdicts: Mapping[str, int]
    rolled_back: bool

    def __init__(self, run_id: str, product: str, ordinal: int,
                 changes: tuple[tuple[str, str], ...], proposals: tuple[str, ...] = (),
                 done: bool = False, notes: tuple[str, ...] = (), build_tag: str | None = None,
                 ci: bool = False, verdicts: Mapping[str, int] | None = None,
                 rolled_back: bool = False) -> None:
        set_field(self, "run_id", run_id)
        set_field(self, "product", product)
        set_field(self, "ordinal", ordinal)
        set_field(self, "changes", changes)
        set_field(self, "proposals", proposals)
        set_field(self, "done", done)
        set_field(self, "notes", notes)
        set_field(self, "build_tag", build_tag)
        set_field(self, "ci", ci)
        set_field(self, "verdicts", {} if verdicts is None else verdicts)
        set_field(self, "rolled_back", rolled_back)

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
        """The frozen run's JSON, or None when there is none. Its evidence is not
        validated again: it is checked against its digest (what the ingest froze), and the
        rest of the file against its shape — a file damaged or edited since is a
        :class:`StateDamagedError` naming it."""
        path = self.path(run_id)
        data = load_state(path, what="frozen run")
        if data is not None:
            _check_frozen(data, path)
        return data

    def get(self, run_id: str) -> FrozenRun | None:
        path = self.path(run_id)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        return self._decode(raw, path)

    def _decode(self, raw: bytes, path: Path) -> FrozenRun:
        try:
            data = load_json(raw)
            if not isinstance(data, dict):
                raise TypeError("not a JSON object")
            _check_frozen(data, path)
            from memidex.evidence import parse_run  # the evidence format: only to read a run

            run = parse_run(json.dumps(data["run"]).encode("utf-8"), source=str(path))
            return FrozenRun(run=run, ordinal=int(data["ordinal"]), digest=str(data["digest"]),
                             analysis=dict(data.get("analysis") or {}), path=path,
                             why={str(k): str(v) for k, v in (data.get("why") or {}).items()})
        except StateDamagedError:
            raise
        except (ValueError, KeyError, TypeError, RecursionError) as exc:
            raise StateDamagedError(f"{path}: the frozen run cannot be read ({exc})",
                                    hint="it is local state: move it aside and ingest the "
                                    "run again") from None
        except InvalidInputError as exc:  # the evidence inside no longer validates
            raise StateDamagedError(f"{path}: the frozen run cannot be read ({exc.message})",
                                    hint="it is local state: move it aside and ingest the "
                                    "run again") from None

    def freeze(self, frozen: FrozenRun, writer: StateWriter) -> None:
        """Write the frozen run (durable) — once: an existing file is never replaced."""
        if frozen.path.exists():
            raise InvalidInputError(f"{frozen.path} exists: a frozen run is never rewritten")
        # compact: the C encoder (an indented dump is Python's, ~5x the time and memory)
        writer.put(frozen.path, dump_json(frozen.as_dict()))

    # --- results ---

    def result(self, run_id: str) -> RunResult | None:
        """What the run's curation did, None when it has no result yet."""
        path = self.result_path(run_id)
        data = load_state(path, what="run result")
        return None if data is None else _result(data, path)

    def results(self, product: str | None = None) -> list[RunResult]:
        """Every run's result (of ``product``), in ordinal order: what ``runs list`` and
        ``knowledge diff`` read (small files; the frozen runs are not parsed). A result
        that cannot be read is left out of the list and named by :meth:`damaged`."""
        out: list[RunResult] = []
        for path in self._result_paths():
            try:
                data = load_state(path, what="run result")
                result = None if data is None else _result(data, path)
            except StateDamagedError:
                continue
            if result is not None and (product is None or result.product == product):
                out.append(result)
        out.sort(key=lambda r: (r.product, r.ordinal, r.run_id))
        return out

    def damaged(self) -> list[Problem]:
        """The run results that cannot be read back (``doctor`` names them)."""
        out: list[Problem] = []
        for path in self._result_paths():
            try:
                data = load_state(path, what="run result")
                if data is not None:
                    _result(data, path)
            except StateDamagedError as exc:
                out.append(Problem(str(path), 1, exc.message.removeprefix(f"{path}: ")))
        return out

    def _result_paths(self) -> list[Path]:
        try:
            return sorted(self.dir.glob("*.result.json"))
        except FileNotFoundError:
            return []

    def save_result(self, result: RunResult, writer: StateWriter) -> None:
        # compact, as the frozen run and the tests file: Python's indenting encoder took
        # 6 ms (1.7 ms compact) for a 475-change result, written twice per ingest
        writer.put(self.result_path(result.run_id), dump_json(result.as_dict()))


def run_digest(run: Any) -> str:
    """The digest of a run's evidence as frozen (``sha256:`` of its state-file JSON)."""
    return "sha256:" + hashlib.sha256(dump_json(run)).hexdigest()


def _check_frozen(data: Mapping[str, Any], path: Path) -> None:
    """Raise :class:`StateDamagedError` unless ``data`` is a frozen run as the ingest
    wrote it: its evidence equal to its digest, its ordinal a whole number, its analysis
    and reasons maps of test ids to words."""
    def damaged(why: str) -> StateDamagedError:
        return StateDamagedError(f"{path}: the frozen run is damaged ({why})",
                                 hint="it is local state: move it aside and ingest the run "
                                 "again")

    run, digest = data.get("run"), data.get("digest")
    if not isinstance(run, dict) or not isinstance(digest, str):
        raise damaged("its `run` or `digest` is missing or of the wrong type")
    try:
        same = run_digest(run) == digest
    except (TypeError, ValueError, RecursionError):
        same = False
    if not same:
        raise damaged("its evidence does not match its digest: it changed since it was "
                      "frozen")
    ordinal = data.get("ordinal")
    if isinstance(ordinal, bool) or not isinstance(ordinal, int) or ordinal < 0:
        raise damaged("`ordinal` is not a whole number")
    for key in ("analysis", "why"):
        value = data.get(key)
        if value is not None and not (isinstance(value, dict) and all(
                isinstance(k, str) and isinstance(v, str) for k, v in value.items())):
            raise damaged(f"`{key}` is not a map of test ids to words")
    for key in ("run_id", "product"):
        if key in data and not isinstance(data[key], str):
            raise damaged(f"`{key}` is not text")


def _result(data: Mapping[str, Any], path: Path) -> RunResult:
    try:
        return RunResult.from_dict(data)
    except (KeyError, TypeError, ValueError) as exc:
        raise StateDamagedError(f"{path}: the run result is damaged ({exc!r})") from None
