"""The write journal: change sets and model steps, so that work survives a crash.

Layout under the knowledge folder's ``queue/`` (ignored by git, derived):

* ``journal/<id>.json`` — one change set (one command's writes), written and fsynced
  *before* any of its writes runs: for each op the path, the content hash it expects to
  find (``before``), the hash it leaves (``after``) and the canonical text.
  It also carries the run id and ordinal the change set was written for, or for a
  rollback the runs it undoes (the ledger, :mod:`memidex.write.ledger`, keeps them once it
  landed).
* ``journal/<id>.done`` — append-only, one fsynced JSON line per step committed.
* ``journal/abandoned/`` — change sets that could not be finished (someone edited a file
  they were about to replace); kept for a person to look at.
* ``steps/<key>.{intent,answer}.json`` and ``steps/<key>.done`` — a model step: the
  intent written before the model is called, the answer saved before it is applied, a
  marker once its change set committed. On recovery: done → skip; answer saved → apply
  it without calling the model again; nothing saved → run the step again.

Replaying a change set compares content hashes: a file already holding ``after`` is done,
a file still holding ``before`` is written, anything else is a conflict (never clobbered).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from memidex.plain import Frozen, set_field
from memidex.store.fsio import append, atomic_write, dump_json, load_json, read_json
from memidex.write.procs import process_alive

__all__ = ["ChangeSet", "Journal", "Op", "Owner"]


class Op(Frozen):
    """One planned change: ``write`` (``data`` is the canonical text) or ``remove``."""

    op: str
    path: str  # relative to the repository root
    before: str | None  # content hash expected on disk before (None: no file)
    after: str | None  # content hash after a write
    data: str | None

    __slots__ = ("op", "path", "before", "after", "data")

    def __init__(self, op: str, path: str, before: str | None, after: str | None = None,
                 data: str | None = None) -> None:
        set_field(self, "op", op)
        set_field(self, "path", path)
        set_field(self, "before", before)
        set_field(self, "after", after)
        set_field(self, "data", data)

    def as_dict(self) -> dict[str, Any]:
        return {"op": self.op, "path": self.path, "before": self.before,
                "after": self.after, "data": self.data}


class Owner(Frozen):
    """The process (and epoch) that journaled a change set."""

    pid: int
    pid_start: int | None
    boot_id: str
    host: str
    epoch: int

    __slots__ = ("pid", "pid_start", "boot_id", "host", "epoch")

    def __init__(self, pid: int, pid_start: int | None, boot_id: str, host: str,
                 epoch: int) -> None:
        set_field(self, "pid", pid)
        set_field(self, "pid_start", pid_start)
        set_field(self, "boot_id", boot_id)
        set_field(self, "host", host)
        set_field(self, "epoch", epoch)

    def alive(self) -> bool:
        return process_alive(self.pid, self.pid_start, self.boot_id, self.host)


@dataclass(frozen=True)
class ChangeSet:
    id: str
    command: str
    owner: Owner
    ops: tuple[Op, ...]
    step: str | None = None
    created: float = 0.0
    done: frozenset[int] = field(default_factory=frozenset)
    run_id: str | None = None  # the learning run that wrote it (the ledger keeps it)
    ordinal: int | None = None  # that run's ordinal, when known
    rollback_of: tuple[str, ...] = ()  # a rollback: the runs it undoes (the ledger keeps them)

    def step_id(self, index: int) -> str:
        """The id of op ``index`` in the authority DB's ``applied`` table."""
        return f"{self.id}/{index}"

    def as_dict(self) -> dict[str, Any]:
        o = self.owner
        return {
            "version": 1, "id": self.id, "command": self.command, "step": self.step,
            "created": self.created, "run_id": self.run_id, "ordinal": self.ordinal,
            **({"rollback_of": list(self.rollback_of)} if self.rollback_of else {}),
            "owner": {"pid": o.pid, "pid_start": o.pid_start, "boot_id": o.boot_id,
                      "host": o.host, "epoch": o.epoch},
            "ops": [op.as_dict() for op in self.ops],
        }


def _from_dict(data: Any) -> ChangeSet:
    """Raises KeyError/TypeError/ValueError on anything malformed."""
    owner = data["owner"]
    ops = tuple(
        Op(str(o["op"]), str(o["path"]), o["before"], o.get("after"), o.get("data"))
        for o in data["ops"]
    )
    if any(op.op not in ("write", "remove") for op in ops):
        raise ValueError("unknown op")
    return ChangeSet(
        id=str(data["id"]), command=str(data.get("command", "")),
        owner=Owner(int(owner["pid"]), owner.get("pid_start"), str(owner.get("boot_id", "")),
                    str(owner.get("host", "")), int(owner["epoch"])),
        ops=ops, step=data.get("step"), created=float(data.get("created", 0.0)),
        run_id=None if data.get("run_id") is None else str(data["run_id"]),
        ordinal=None if data.get("ordinal") is None else int(data["ordinal"]),
        rollback_of=tuple(str(r) for r in data.get("rollback_of") or ()),
    )


def _step_key(step: str) -> str:
    return hashlib.sha256(step.encode("utf-8")).hexdigest()[:32]


class Journal:
    """The ``queue/journal`` and ``queue/steps`` folders of one knowledge folder."""

    def __init__(self, queue_dir: Path) -> None:
        self.dir = queue_dir / "journal"
        self.abandoned_dir = self.dir / "abandoned"
        self.steps_dir = queue_dir / "steps"

    # --- change sets ---

    def begin(self, command: str, ops: Sequence[Op], owner: Owner,
              step: str | None = None, *, run_id: str | None = None,
              ordinal: int | None = None, rollback_of: Sequence[str] = ()) -> ChangeSet:
        """Write the change set durably before any of it runs."""
        self.dir.mkdir(parents=True, exist_ok=True)
        cs_id = f"{time.time_ns():020d}-{os.getpid()}-{os.urandom(4).hex()}"
        cs = ChangeSet(cs_id, command, owner, tuple(ops), step, round(time.time(), 3),
                       run_id=run_id, ordinal=ordinal, rollback_of=tuple(rollback_of))
        atomic_write(self.dir / f"{cs_id}.json", dump_json(cs.as_dict()))
        return cs

    def mark_done(self, cs: ChangeSet, index: int | Sequence[int], epoch: int) -> None:
        """Mark the op at ``index`` (or each of several, in one write) done."""
        path = self.dir / f"{cs.id}.done"
        indices = [index] if isinstance(index, int) else index
        # No fsync: the authority DB's `applied` table (committed first) is the truth;
        # a lost mark only means a replay that finds every step already applied.
        # dump_json({"i": i, "epoch": epoch}) a line, written out by hand (one json.dumps
        # an op cost a 475-record change set ~1.5 ms)
        epoch = int(epoch)
        append(path, "".join(f'{{"epoch": {epoch}, "i": {int(i)}}}\n'
                             for i in indices).encode("ascii"))

    def done_steps(self, cs: ChangeSet) -> frozenset[int]:
        return frozenset(i for i, _ in self._done_lines(cs.id))

    def _done_lines(self, cs_id: str) -> list[tuple[int, int]]:
        try:
            text = (self.dir / f"{cs_id}.done").read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return []
        out = []
        for line in text.splitlines():
            with contextlib.suppress(ValueError, KeyError, TypeError):
                data = load_json(line)  # a torn last line is simply not done
                out.append((int(data["i"]), int(data["epoch"])))
        return out

    def finish(self, cs: ChangeSet) -> None:
        """The change set is complete (or was never started): forget it."""
        # Not fsynced: a change set that comes back after a power cut replays as a no-op.
        (self.dir / f"{cs.id}.json").unlink(missing_ok=True)
        (self.dir / f"{cs.id}.done").unlink(missing_ok=True)

    def abandon(self, cs: ChangeSet, reason: str) -> None:
        """Move a change set that cannot be finished aside, with the reason."""
        self.abandoned_dir.mkdir(parents=True, exist_ok=True)
        data = cs.as_dict()
        data["abandoned"] = {"reason": reason, "at": round(time.time(), 3),
                             "done": sorted(self.done_steps(cs))}
        atomic_write(self.abandoned_dir / f"{cs.id}.json", dump_json(data))
        self.finish(cs)

    def pending(self) -> list[ChangeSet]:
        """Unfinished change sets, oldest first (unreadable ones are moved aside)."""
        out: list[ChangeSet] = []
        for path in self._plan_files():
            try:
                cs = _from_dict(read_json(path))
            except (ValueError, KeyError, TypeError):
                self._quarantine(path)
                continue
            out.append(replace(cs, done=self.done_steps(cs)))
        return out

    def _plan_files(self) -> list[Path]:
        try:
            names = sorted(os.listdir(self.dir))
        except FileNotFoundError:
            return []
        return [self.dir / n for n in names if n.endswith(".json") and n.count(".") == 1]

    def _quarantine(self, path: Path) -> None:
        self.abandoned_dir.mkdir(parents=True, exist_ok=True)
        data = path.read_bytes() if path.exists() else b""
        atomic_write(self.abandoned_dir / f"{path.stem}.unreadable", data)
        path.unlink(missing_ok=True)
        (self.dir / f"{path.stem}.done").unlink(missing_ok=True)

    def cleanup(self) -> None:
        """Remove temp files and orphan done-files (call while holding the lease)."""
        try:
            names = os.listdir(self.dir)
        except FileNotFoundError:
            return
        plans = {n[: -len(".json")] for n in names if n.endswith(".json")}
        for name in names:
            if name.endswith(".tmp") or (name.endswith(".done") and name[:-5] not in plans):
                (self.dir / name).unlink(missing_ok=True)

    def count_pending(self) -> int:
        return len(self._plan_files())

    def count_abandoned(self) -> int:
        try:
            return sum(1 for _ in os.scandir(self.abandoned_dir))
        except FileNotFoundError:
            return 0

    def max_epoch(self) -> int:
        """The highest epoch any journal entry records (seeds a recreated authority DB)."""
        best = 0
        for path in self._plan_files():
            with contextlib.suppress(ValueError, KeyError, TypeError):
                best = max(best, int((read_json(path) or {})["owner"]["epoch"]))
            for _, epoch in self._done_lines(path.stem):
                best = max(best, epoch)
        return best

    # --- model steps ---

    def _step_path(self, step: str, suffix: str) -> Path:
        return self.steps_dir / f"{_step_key(step)}.{suffix}"

    def _save_step_file(self, step: str, suffix: str, payload: dict[str, Any]) -> None:
        self.steps_dir.mkdir(parents=True, exist_ok=True)
        atomic_write(self._step_path(step, suffix), dump_json({"step": step, **payload}))

    def _load_step_file(self, step: str, suffix: str) -> dict[str, Any] | None:
        data = read_json(self._step_path(step, suffix))
        return data if data is not None and data.get("step") == step else None

    def begin_step(self, step: str, intent: Any = None) -> None:
        """Record (fsynced) that ``step`` is about to call the model."""
        self._save_step_file(step, "intent.json", {"intent": intent})

    def save_answer(self, step: str, answer: Any) -> None:
        """Save the model's answer for ``step`` atomically, before applying it."""
        self._save_step_file(step, "answer.json", {"answer": answer})

    def has_answer(self, step: str) -> bool:
        return self._load_step_file(step, "answer.json") is not None

    def load_answer(self, step: str) -> Any:
        """The saved answer of ``step``, or None when none was saved."""
        data = self._load_step_file(step, "answer.json")
        return None if data is None else data.get("answer")

    def mark_step_done(self, step: str) -> None:
        self._save_step_file(step, "done", {"done": True})

    def step_done(self, step: str) -> bool:
        return self._load_step_file(step, "done") is not None

    def pending_steps(self) -> list[str]:
        """Steps begun (intent or answer saved) and not done, in name order."""
        out: set[str] = set()
        try:
            names = os.listdir(self.steps_dir)
        except FileNotFoundError:
            return []
        for name in names:
            if name.endswith((".intent.json", ".answer.json")):
                step = (read_json(self.steps_dir / name) or {}).get("step")
                if isinstance(step, str) and not self.step_done(step):
                    out.add(step)
        return sorted(out)

    def forget_steps(self, steps: Iterable[str]) -> None:
        """Drop everything saved about finished steps."""
        for step in steps:
            for suffix in ("intent.json", "answer.json", "done"):
                self._step_path(step, suffix).unlink(missing_ok=True)
