"""``memidex daemon``: hold the writer lease and apply queued corrections (SPEC §6).

The daemon takes the writer lease (waiting up to ``wait`` seconds), finishes the change
sets a crashed writer left in the journal (the writer session does that on entry),
announces itself in ``queue/daemon.json`` and then applies, oldest first, every job
other commands queue in ``queue/corrections/`` (:mod:`memidex.write.inbox`) — change sets,
ingests, rollbacks, proposals decided — each through the fenced writer. It heartbeats
the lease all along (the lease's own thread).

The ``memidex daemon`` command also serves the CLI's reading commands (and ``runs
ingest``) warm meanwhile (:mod:`memidex.warm`): a ``runs ingest`` sent to it queues its
job here like any other, from another thread of the same process.

It stops cleanly on SIGTERM or SIGINT (after the item it is applying), removing
``daemon.json`` and releasing the lease, so the next writer gets it at once. When it
finds it lost the lease — paused past the TTL and taken over, say — it applies nothing
more and raises :class:`memidex.errors.FencedError` (exit 3). ``once``: apply what is
queued, then stop.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from memidex.write.inbox import (
    LOCAL_DAEMONS,
    SUBMITTED,
    Queue,
    apply_item,
    remove_daemon_file,
    write_daemon_file,
)

if TYPE_CHECKING:
    from memidex.store.files import Store
    from memidex.write.jobs import Handler
    from memidex.write.writer import WriterSession

__all__ = ["HURRY", "DaemonReport", "run_daemon"]

POLL_SECONDS = 0.05
HURRY = threading.Event()
"""Set while a command of this process waits for the daemon (the warm server running a
``runs ingest``): the daemon then looks at its inbox ten times as often."""


@dataclass
class DaemonReport:
    """What one daemon run did (``memidex daemon --json`` prints :meth:`to_json`)."""

    pid: int = 0
    epoch: int = 0
    stopped: str = ""  # once | SIGTERM | SIGINT | stop
    applied: list[dict[str, Any]] = field(default_factory=list)
    recovered: dict[str, int] = field(default_factory=dict)
    pending_model_steps: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"pid": self.pid, "epoch": self.epoch, "stopped": self.stopped,
                "applied": self.applied,
                "failed": sum(1 for a in self.applied if not a["ok"]),
                "recovered": self.recovered,
                "pending_model_steps": self.pending_model_steps}


@contextmanager
def _stop_on_signals(stop: threading.Event, why: list[str]) -> Iterator[None]:
    """SIGTERM and SIGINT set ``stop`` (main thread only); the old handlers come back."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous: dict[signal.Signals, Any] = {}

    def handler(signum: int, _frame: object) -> None:
        why.append(signal.Signals(signum).name)
        stop.set()
        SUBMITTED.set()  # the loop's wait ends now

    for sig in (signal.SIGTERM, signal.SIGINT):
        previous[sig] = signal.signal(sig, handler)
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _ensure_held(session: WriterSession, *, beat: bool = False) -> None:
    """Raise the fencing error when the lease is lost (``beat``: check it now)."""
    lease = session.lease
    if lease.lost or (beat and not lease.heartbeat()):
        raise lease.lost_error()


def run_daemon(store: Store, *, wait: float, ttl: float, once: bool = False,
               stop: threading.Event | None = None,
               log: Callable[[str], None] | None = None,
               poll: float = POLL_SECONDS,
               handlers: Mapping[str, Handler] | None = None) -> DaemonReport:
    """Hold the lease and apply queued jobs until stopped (see the module doc).
    ``handlers``: the named jobs it can apply besides change sets (the composition root
    gives the ingest, the rollback and the proposal decisions)."""
    import os

    from memidex.write.writer import writer_session

    stop = stop or threading.Event()
    say = log or (lambda _line: None)
    why: list[str] = []
    report = DaemonReport(pid=os.getpid())
    queue = Queue(store.queue_dir)
    with _stop_on_signals(stop, why), \
            writer_session(store, wait=wait, ttl=ttl) as session:
        report.epoch = epoch = session.epoch
        rec = session.recovery
        report.recovered = {"change_sets": len(rec.replayed),
                            "abandoned": len(rec.abandoned),
                            "staging_removed": len(rec.staging_removed)}
        report.pending_model_steps = len(session.journal.pending_steps())
        write_daemon_file(store.queue_dir, epoch)
        LOCAL_DAEMONS[0] += 1
        try:
            queue.cleanup()
            say(f"memidex daemon: pid {report.pid} holds the writer lease (epoch {epoch}); "
                "applying queued corrections (SIGTERM or Ctrl-C stops it)")
            while not stop.is_set():
                _ensure_held(session)
                SUBMITTED.clear()  # before looking: an item queued after it sets it again
                items = queue.pending()
                if items:
                    _ensure_held(session, beat=True)  # still ours before applying anything
                for item_id in items:
                    if stop.is_set():
                        break
                    _ensure_held(session)
                    data = queue.load(item_id) or {}
                    outcome = apply_item(session, queue, item_id, handlers)
                    if outcome is None:
                        continue
                    entry = {"item": item_id, "command": data.get("command", ""),
                             "ok": outcome.ok, "changed": sum(outcome.changed)}
                    if not outcome.ok:
                        entry["error"] = outcome.message
                    report.applied.append(entry)
                    say(f"memidex daemon: {entry['command']} "
                        + ("applied" if outcome.ok else f"failed: {outcome.message}"))
                if once:
                    why.append("once")
                    break
                if not stop.is_set():  # until the next poll, or an item this process queued
                    SUBMITTED.wait(poll / 10 if HURRY.is_set() else poll)
        finally:
            LOCAL_DAEMONS[0] -= 1
            remove_daemon_file(store.queue_dir, epoch)
    report.stopped = why[0] if why else "stop"
    say(f"memidex daemon: stopped ({report.stopped}); writer lease released")
    return report
