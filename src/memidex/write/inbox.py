"""Handing corrections to a running ``memidex daemon`` (SPEC §6, ``docs/lease.md``).

While a daemon holds the writer lease, a writing command does not wait for the lease: it
writes its job (:class:`memidex.write.route.Job`) as one item in ``queue/corrections/`` —
a change set (the canonical text of every record it writes, every removal, and the
content hash each file must have), or a named job with its JSON payload (a run to
ingest, a run to roll back, a proposal to accept) — and waits for the daemon's marker.
Layout under the knowledge folder's ``queue/`` (ignored by git, derived):

* ``daemon.json`` — written by a daemon once it holds the lease: pid, start time, boot
  id, host, epoch. A daemon counts as *live* only while the lease's holder row names the
  same pid and epoch, is alive and its heartbeat is fresh (:func:`live_daemon`).
* ``corrections/<id>.item.json`` — one queued job, written atomically:
  ``{version: 2, id, kind, command, payload, submitter, created}`` (a version 1 item is
  a change set: ``{version: 1, id, command, changes, ...}``).
* ``corrections/<id>.done.json`` / ``<id>.failed.json`` — the outcome, written by
  whoever applied it (the daemon, or the submitter itself when the daemon went away);
  the submitter reads it and deletes it.

Applying an item is idempotent: a write whose file already holds the record is skipped,
a removal of a file already gone is skipped, and an item with a marker is not applied
again. So an item may be applied by any lease holder, any number of times.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import memidex.errors as errors
from memidex.errors import InvalidInputError, LeaseError, MemidexError, RecordError
from memidex.plain import Frozen, set_field
from memidex.records.codec import dump_record, parse_record_bytes
from memidex.store.fsio import atomic_write, dump_json, read_json
from memidex.write.authority import held_by
from memidex.write.procs import current_process
from memidex.write.status import lease_status

if TYPE_CHECKING:
    from memidex.store.files import Store
    from memidex.write.jobs import Handler
    from memidex.write.writer import Change, WriterSession

__all__ = [
    "CORRECTIONS_DIR",
    "DAEMON_FILE",
    "DaemonInfo",
    "Outcome",
    "Queue",
    "apply_item",
    "live_daemon",
]


SUBMITTED = threading.Event()
"""Set when this process queued an item (a warm server's ``runs ingest``): a daemon in
the same process then looks at its inbox at once instead of at its next poll."""
_FINISHED = threading.Condition()
"""Notified when this process wrote an outcome: a waiter in the same process (a warm
server's command) reads it at once instead of at its next poll. Other processes poll."""
_finished = [0]  # how many outcomes this process wrote (under _FINISHED)
LOCAL_DAEMONS = [0]
"""How many daemon loops run in this process. Only then may a waiter wait on
:data:`_FINISHED`: a timed wait on a lock takes an absolute deadline from a clock that
libfaketime (or a clock set far ahead) can move, where a plain sleep cannot — a waiter
with no daemon beside it sleeps between its polls, as before."""
_HANDED: dict[str, Mapping[str, Any]] = {}
"""Jobs queued by this process with their objects (:attr:`Job.local`), by item id: a
daemon in the same process gives its handler those, not the item's JSON read back and
checked again (the item is written all the same: it is what any other applier reads)."""

CORRECTIONS_DIR = "corrections"
DAEMON_FILE = "daemon.json"
ITEM_SUFFIX = ".item.json"
DONE_SUFFIX = ".done.json"
FAILED_SUFFIX = ".failed.json"
MARKER_MAX_AGE = 3600.0  # markers nobody collected are removed by the next daemon


# --- the daemon's presence -------------------------------------------------------------


class DaemonInfo(Frozen):
    """A daemon that holds the writer lease right now."""

    pid: int
    epoch: int
    heartbeat_age: float

    __slots__ = ("pid", "epoch", "heartbeat_age")

    def __init__(self, pid: int, epoch: int, heartbeat_age: float) -> None:
        set_field(self, "pid", pid)
        set_field(self, "epoch", epoch)
        set_field(self, "heartbeat_age", heartbeat_age)

    def describe(self) -> str:
        return held_by(self.pid, self.epoch, self.heartbeat_age)


def write_daemon_file(queue_dir: Path, epoch: int) -> None:
    """Announce that this process is a daemon holding the lease at ``epoch``."""
    queue_dir.mkdir(parents=True, exist_ok=True)
    data = {**current_process().as_dict(), "epoch": epoch, "started": round(time.time(), 3)}
    atomic_write(queue_dir / DAEMON_FILE, dump_json(data), durable=False)


def remove_daemon_file(queue_dir: Path, epoch: int) -> None:
    """Remove ``daemon.json`` if it still names this process at ``epoch``."""
    path = queue_dir / DAEMON_FILE
    data = read_json(path)
    if data is not None and data.get("pid") == os.getpid() and data.get("epoch") == epoch:
        path.unlink(missing_ok=True)


def live_daemon(store: Store) -> DaemonInfo | None:
    """The daemon holding ``store``'s writer lease, or None (no daemon, or it is dead,
    paused past its TTL, or no longer the holder). Never writes."""
    data = read_json(store.queue_dir / DAEMON_FILE)
    if data is None:
        return None
    status = lease_status(store.knowledge)
    if not status["held"] or status["pid"] != data.get("pid"):
        return None
    if status["epoch"] != data.get("epoch") or not status["alive"] or status.get("stale"):
        return None
    age = status["heartbeat_age_seconds"]
    return DaemonInfo(int(data["pid"]), int(data["epoch"]),
                      float(age) if isinstance(age, int | float) else 0.0)


# --- the corrections queue -------------------------------------------------------------


class Outcome(Frozen):
    """What the applier wrote in an item's marker."""

    ok: bool
    changed: tuple[bool, ...]
    error: str
    exit_code: int
    message: str
    hint: str | None
    applied_by: int | None
    result: Mapping[str, Any]
    """What the job's handler returned (a change set: nothing)."""

    __slots__ = ("ok", "changed", "error", "exit_code", "message", "hint", "applied_by",
                 "result")

    def __init__(self, ok: bool, changed: tuple[bool, ...] = (), error: str = "",
                 exit_code: int = errors.EXIT_LEASE, message: str = "",
                 hint: str | None = None, applied_by: int | None = None,
                 result: Mapping[str, Any] | None = None) -> None:
        set_field(self, "ok", ok)
        set_field(self, "changed", changed)
        set_field(self, "error", error)
        set_field(self, "exit_code", exit_code)
        set_field(self, "message", message)
        set_field(self, "hint", hint)
        set_field(self, "applied_by", applied_by)
        set_field(self, "result", result if result is not None else dict())

    def raise_for_failure(self) -> None:
        """Raise the applier's error again, with its exit code, in the submitter."""
        if self.ok:
            return
        cls = getattr(errors, self.error, None)
        if not (isinstance(cls, type) and issubclass(cls, MemidexError)) or cls in (
                RecordError, errors.ProblemsFound):
            cls = {errors.EXIT_USAGE: errors.UsageError, errors.EXIT_LEASE: LeaseError,
                   errors.EXIT_PROBLEMS: errors.StorageError}.get(self.exit_code,
                                                                   InvalidInputError)
        raise cls(self.message, hint=self.hint)


def encode_change(store: Store, change: Change) -> dict[str, Any]:
    from memidex.write.writer import Write

    if isinstance(change, Write):
        r = change.record
        return {"op": "write", "path": store.rel(store.record_path(r.kind, r.id)),
                "data": dump_record(r), "expected": change.expected}
    return {"op": "remove", "path": change.relpath, "expected": change.expected}


def decode_change(data: Any) -> Change:
    """One queued change back; :class:`InvalidInputError` when it is malformed."""
    from memidex.write.writer import Remove, Write

    try:
        op, path, expected = data["op"], data["path"], data.get("expected", False)
        if not isinstance(path, str) or not (expected is None or isinstance(expected, bool | str)):
            raise TypeError("bad path or expected hash")
        if expected is True:
            raise TypeError("bad expected hash")
        if op == "write":
            text = data["data"]
            if not isinstance(text, str):
                raise TypeError("no record text")
            return Write(parse_record_bytes(text.encode("utf-8"), path), expected)
        if op == "remove":
            return Remove(path, expected)
        raise ValueError(f"unknown op {op!r}")
    except RecordError as exc:
        raise InvalidInputError(f"queued record is invalid: {exc.message}") from None
    except (KeyError, TypeError, ValueError) as exc:
        raise InvalidInputError(f"queued correction is malformed: {exc}") from None


class Queue:
    """``queue/corrections/`` of one knowledge folder."""

    def __init__(self, queue_dir: Path) -> None:
        self.dir = queue_dir / CORRECTIONS_DIR

    def item_path(self, item_id: str) -> Path:
        return self.dir / f"{item_id}{ITEM_SUFFIX}"

    def _marker(self, item_id: str, ok: bool) -> Path:
        return self.dir / f"{item_id}{DONE_SUFFIX if ok else FAILED_SUFFIX}"

    def submit(self, command: str, payload: Mapping[str, Any], *,
               kind: str = "changes", local: Mapping[str, Any] | None = None) -> str:
        """Queue one job (atomically); returns its id. ``local``: what the job's handler
        gets when this very process applies it (see :data:`_HANDED`)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        item_id = f"{time.time_ns():020d}-{os.getpid()}-{os.urandom(4).hex()}"
        data = {"version": 2, "id": item_id, "kind": kind, "command": command,
                "submitter": os.getpid(), "created": round(time.time(), 3),
                "payload": dict(payload)}
        if local is not None:
            _HANDED[item_id] = {k: v for k, v in local.items() if k != "progress"}
        try:
            atomic_write(self.item_path(item_id), dump_json(data))
        except BaseException:
            _HANDED.pop(item_id, None)
            raise
        SUBMITTED.set()
        return item_id

    def pending(self) -> list[str]:
        """Ids of queued items, oldest first."""
        try:
            names = os.listdir(self.dir)
        except FileNotFoundError:
            return []
        return sorted(n[: -len(ITEM_SUFFIX)] for n in names if n.endswith(ITEM_SUFFIX))

    def load(self, item_id: str) -> dict[str, Any] | None:
        return read_json(self.item_path(item_id))

    def waiting(self, *, now: float | None = None) -> list[dict[str, Any]]:
        """What ``doctor`` lists: every queued item without an outcome yet, oldest first
        (``id``, ``command``, ``age_seconds``, ``path`` relative to the queue folder)."""
        now = time.time() if now is None else now
        out: list[dict[str, Any]] = []
        for item_id in self.pending():
            if self.has_marker(item_id):
                continue
            data = self.load(item_id) or {}
            created = data.get("created")
            command = data.get("command")
            out.append({
                "id": item_id,
                "command": command if isinstance(command, str) else "?",
                "age_seconds": (round(max(0.0, now - created), 1)
                                if isinstance(created, int | float) else None),
                "path": f"{CORRECTIONS_DIR}/{item_id}{ITEM_SUFFIX}",
            })
        return out

    def has_marker(self, item_id: str) -> bool:
        return self._marker(item_id, True).exists() or self._marker(item_id, False).exists()

    def finish(self, item_id: str, outcome: Outcome) -> None:
        """Write the marker, then drop the item (a crash in between leaves both: the next
        applier sees the marker and only drops the item)."""
        data = {"ok": outcome.ok, "changed": list(outcome.changed), "error": outcome.error,
                "exit_code": outcome.exit_code, "message": outcome.message,
                "hint": outcome.hint, "applied_by": os.getpid(),
                "result": dict(outcome.result)}
        atomic_write(self._marker(item_id, outcome.ok), dump_json(data), durable=False)
        self.drop(item_id)
        with _FINISHED:
            _finished[0] += 1
            _FINISHED.notify_all()

    def drop(self, item_id: str) -> None:
        self.item_path(item_id).unlink(missing_ok=True)

    def take_outcome(self, item_id: str) -> Outcome | None:
        """The item's outcome (its marker is deleted), or None while there is none."""
        for ok in (True, False):
            path = self._marker(item_id, ok)
            data = read_json(path)
            if data is None:
                continue
            path.unlink(missing_ok=True)
            hint = data.get("hint")
            result = data.get("result")
            return Outcome(
                result=result if isinstance(result, dict) else {},
                ok=bool(data.get("ok")), changed=tuple(bool(c) for c in data.get("changed", ())),
                error=str(data.get("error", "")),
                exit_code=int(data.get("exit_code", errors.EXIT_LEASE)),
                message=str(data.get("message", "")),
                hint=hint if isinstance(hint, str) else None,
                applied_by=data.get("applied_by"))
        return None

    def wait_for(self, item_id: str, deadline: float, still_live: Callable[[], bool],
                 *, poll: float = 0.02, check_every: float = 0.25) -> Outcome | None:
        """Wait for the item's marker until ``deadline`` (monotonic) or until
        ``still_live()`` says the daemon went away; None then."""
        next_check = time.monotonic() + check_every
        while True:
            with _FINISHED:
                seen = _finished[0]
            outcome = self.take_outcome(item_id)
            if outcome is not None:
                return outcome
            now = time.monotonic()
            if now >= deadline:
                return None
            if now >= next_check:
                if not still_live():
                    return self.take_outcome(item_id)
                next_check = now + check_every
            pause = min(poll, max(0.0, deadline - now))
            if not LOCAL_DAEMONS[0]:
                time.sleep(pause)
                continue
            with _FINISHED:  # an outcome this process wrote since `seen` ends the wait
                if _finished[0] == seen:
                    _FINISHED.wait(pause)

    def cleanup(self, *, max_age: float = MARKER_MAX_AGE) -> list[str]:
        """Remove markers and temp files nobody collected for ``max_age`` seconds."""
        removed: list[str] = []
        try:
            entries = list(os.scandir(self.dir))
        except FileNotFoundError:
            return removed
        now = time.time()
        for entry in entries:
            name = entry.name
            if not name.endswith((DONE_SUFFIX, FAILED_SUFFIX, ".tmp")):
                continue
            with contextlib.suppress(OSError):
                if now - entry.stat().st_mtime > max_age:
                    Path(entry.path).unlink(missing_ok=True)
                    removed.append(name)
        return removed


def inbox_report(queue_dir: Path, *, daemon_live: bool) -> tuple[list[dict[str, Any]],
                                                                 str | None]:
    """What ``doctor`` says about the inbox: the corrections waiting (:meth:`Queue.waiting`)
    and one sentence on how to apply them (None when nothing waits)."""
    inbox = Queue(queue_dir).waiting()
    if not inbox:
        return inbox, None
    oldest = inbox[0]
    who = ("a daemon holds the lease and applies them" if daemon_live else
           "no daemon is running: start `memidex daemon`, or apply them once with "
           "`memidex daemon --once`")
    return inbox, (f"{len(inbox)} correction(s) wait in the daemon's inbox (oldest: "
                   f"`{oldest['command']}`, queue/{oldest['path']}); {who}")


def apply_item(session: WriterSession, queue: Queue, item_id: str,
               handlers: Mapping[str, Handler] | None = None) -> Outcome | None:
    """Apply one queued item inside ``session`` — a change set, or a named job through its
    handler in ``handlers`` — and write its marker.

    Returns the outcome, or None when the item is gone or already had a marker. Lease
    errors (a lost lease, a fence) propagate and leave the item queued; any other
    :class:`MemidexError` is recorded as the item's failure.
    """
    local = _HANDED.pop(item_id, None)
    if queue.has_marker(item_id):
        queue.drop(item_id)
        return None
    data = queue.load(item_id)
    if data is None:
        if queue.item_path(item_id).exists():  # unreadable: tell the submitter
            outcome = Outcome(ok=False, error="InvalidInputError", exit_code=errors.EXIT_INVALID,
                              message=f"queued correction {item_id} is unreadable")
            queue.finish(item_id, outcome)
            return outcome
        return None
    command = str(data.get("command", "queued"))
    kind = data.get("kind", "changes")
    payload = data.get("payload") if data.get("version") == 2 else data
    try:
        if not isinstance(payload, dict):
            raise InvalidInputError(f"queued correction {item_id} has no payload")
        if kind == "changes":
            raw = payload.get("changes")
            if not isinstance(raw, list):
                raise InvalidInputError(f"queued correction {item_id} has no changes")
            changes = [decode_change(c) for c in raw]
            done = session.apply(changes, command=f"{command} (daemon)")
            outcome = Outcome(ok=True, changed=tuple(done))
        else:
            handler = (handlers or {}).get(str(kind))
            if handler is None:
                raise InvalidInputError(f"queued {command} {item_id} is a {kind!r} job, "
                                        "which this daemon does not know",
                                        hint="run the same memidex version as the daemon")
            outcome = Outcome(ok=True, result=handler(
                session, local if local is not None else payload))
    except LeaseError:
        raise  # lost or fenced: write nothing more; the item stays queued
    except MemidexError as exc:  # a conflict, an invalid item: the submitter is told
        outcome = _failure(exc)
    except OSError as exc:  # the disk refused: the submitter is told, as it would be here
        outcome = _failure(errors.from_os_error(exc))
    queue.finish(item_id, outcome)
    return outcome


def _failure(exc: MemidexError) -> Outcome:
    return Outcome(ok=False, error=type(exc).__name__, exit_code=exc.exit_code,
                   message=exc.message, hint=exc.hint)
