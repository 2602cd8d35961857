"""Where a change set goes: to the fenced writer here, or to the daemon's inbox.

:func:`apply_changes` writes a change set under the writer lease, or — while
``memidex daemon`` holds the lease — hands it to the daemon through
``queue/corrections/`` (:mod:`memidex.write.inbox`) and waits for its marker;
:func:`purge_traces` removes what the queue and the journal still say about a purged
record. Every record write goes through :func:`memidex.write.writer.writer_session`.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from memidex.errors import LeaseError, LeaseHeldError

if TYPE_CHECKING:
    from memidex.store.files import Store
    from memidex.write.writer import Change, WriterSession

__all__ = ["apply_changes", "purge_traces", "refuse_under_daemon"]

_SLICE = 0.5  # seconds per attempt at the lease, so a daemon that starts meanwhile is seen


def _gave_up(store: Store, exc: LeaseHeldError, wait: float) -> LeaseHeldError:
    from memidex.write.authority import held_by
    from memidex.write.status import lease_status

    status = lease_status(store.knowledge)
    message = exc.message
    age = status.get("heartbeat_age_seconds")
    if status["held"] and status["pid"] is not None and isinstance(age, int | float):
        message = held_by(status["pid"], status["epoch"], age)
        if wait > 0:
            message += f"; gave up after waiting {wait:g}s"
    return LeaseHeldError(message, hint=exc.hint)


def refuse_under_daemon(store: Store, command: str) -> None:
    """Raise :class:`LeaseHeldError` at once while a live daemon holds the lease."""
    from memidex.write.inbox import live_daemon

    daemon = live_daemon(store)
    if daemon is not None:
        raise LeaseHeldError(daemon.describe(),
                             hint=f"`memidex {command}` does not go through the daemon: "
                             f"stop it (SIGTERM pid {daemon.pid}) first")


def apply_changes(store: Store, changes: Sequence[Change], *, command: str, wait: float,
                  ttl: float, refuse_daemon: bool = False,
                  after: Callable[[WriterSession], None] | None = None,
                  run_id: str | None = None, ordinal: int | None = None) -> list[bool]:
    """Apply ``changes`` as one change set; per change, whether it wrote.

    Without a daemon: under the writer lease, waiting up to ``wait`` seconds (with
    backoff) for another writer. While a live daemon holds the lease: queue the change set
    for it and wait up to ``wait`` seconds for its marker (``refuse_daemon``: refuse at
    once instead, exit 3). If the daemon goes away meanwhile, apply the queued item here.
    ``after`` runs inside the session once the changes landed (never through a daemon).
    ``run_id`` and ``ordinal`` name the learning run the change set belongs to; the change
    ledger keeps them (a change set handed to a daemon does not carry them yet).
    """
    from memidex.write.inbox import Queue, apply_item, encode_change, live_daemon
    from memidex.write.writer import writer_session

    queue = Queue(store.queue_dir)
    wait = max(0.0, wait)
    deadline = time.monotonic() + wait
    item_id: str | None = None
    while True:
        daemon = live_daemon(store)
        if daemon is not None:
            if refuse_daemon:
                refuse_under_daemon(store, command)
            if item_id is None:
                item_id = queue.submit(command, [encode_change(store, c) for c in changes])
            outcome = queue.wait_for(item_id, deadline,
                                     lambda: live_daemon(store) is not None)
            if outcome is not None:
                outcome.raise_for_failure()
                return list(outcome.changed)
            if time.monotonic() >= deadline:
                rel = store.rel(queue.item_path(item_id))
                raise LeaseHeldError(
                    f"the daemon (pid {daemon.pid}) did not apply the queued {command} "
                    f"within {wait:g}s; it stays queued in {rel}",
                    hint="the daemon applies it when it can; `memidex doctor` shows the lease")
            continue  # the daemon went away: apply the queued item ourselves
        remaining = max(0.0, deadline - time.monotonic())
        try:
            with writer_session(store, wait=min(remaining, _SLICE), ttl=ttl) as session:
                if item_id is None:
                    done = session.apply(changes, command=command, run_id=run_id,
                                         ordinal=ordinal)
                    if after is not None:
                        after(session)
                    return done
                apply_item(session, queue, item_id)
        except LeaseHeldError as exc:
            if time.monotonic() >= deadline:
                raise _gave_up(store, exc, wait) from None
            continue
        outcome = queue.take_outcome(item_id)
        if outcome is None:
            raise LeaseError(f"queued correction {item_id} disappeared without an outcome",
                             hint="run the command again")
        outcome.raise_for_failure()
        return list(outcome.changed)


def purge_traces(store: Store, record_id: str) -> list[str]:
    """Remove every file under ``queue/`` that mentions ``record_id``: queued corrections
    and their markers, abandoned and finished journal entries, saved model steps,
    proposals. Change sets still owned by a live (paused) writer are left to it. The
    change ledger forgets the record (its ops and saved bytes; the rest of the ledger
    stays). Call it while holding the lease. Returns the removed paths (root-relative),
    the ledger's blobs not among them."""
    from memidex.write.journal import Journal
    from memidex.write.ledger import Ledger

    needle = record_id.encode("utf-8")
    journal = Journal(store.queue_dir)
    live_plans: set[str] = set()
    for cs in journal.pending():
        if cs.owner.pid != os.getpid() and cs.owner.alive():
            live_plans.update({f"{cs.id}.json", f"{cs.id}.done"})
    ledger = Ledger(store.queue_dir)
    ledger.purge(record_id)
    removed: list[str] = []
    for folder, dirs, files in os.walk(store.queue_dir):
        here = Path(folder)
        if here == store.queue_dir and ledger.dir.name in dirs:
            dirs.remove(ledger.dir.name)  # done above: never the whole ledger
        for name in sorted(files):
            path = here / name
            if (here == journal.dir and name in live_plans) or (
                    here == store.queue_dir and name == "daemon.json"):
                continue
            try:
                data = path.read_bytes()
            except OSError:
                continue
            if needle in data:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
                    removed.append(store.rel(path))
    return sorted(removed)
