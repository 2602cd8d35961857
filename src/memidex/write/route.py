"""The one write route: every record or state write of every writer goes through here.

A *job* is one unit of writing: a change set of records (``changes``, built in) or a
named job a service registers a handler for — a run's ingest, a rollback, a proposal
accepted, a purge (:class:`Job`). :meth:`WriteRoute.run` carries it out:

* **without a daemon**: under the writer lease, waiting up to ``wait`` seconds (with
  backoff) for another writer; the handler runs inside the writer session (its record
  writes through :meth:`WriterSession.apply`, its state files through the session's
  fenced :attr:`WriterSession.state`), and the lease is released as soon as it returns —
  never held across an index refresh, a git call or anything else the caller does next;
* **while ``memidex daemon`` holds the lease**: the job is queued in the daemon's inbox
  (``queue/corrections/``, :mod:`memidex.write.inbox`) and applied there, in order, by the
  same handler; the caller waits up to ``wait`` seconds for its outcome — or, with
  ``no_wait``, gets the queued item's id at once. If the daemon goes away meanwhile, the
  caller applies the queued item itself. A ``local_only`` job (a maintenance command)
  refuses at once instead (exit 3).

Handlers are given by the composition root (:mod:`memidex.app`), so this package knows
nothing of learning or the index. :func:`purge_traces` removes what the queue and the
journal still say about a purged record.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memidex.errors import LeaseError, LeaseHeldError
from memidex.write.jobs import CHANGES, Handler, Job, JobResult

if TYPE_CHECKING:
    from memidex.store.files import Store
    from memidex.write.writer import Change, WriterSession

__all__ = ["CHANGES", "Handler", "Job", "JobResult", "WriteRoute", "purge_traces",
           "refuse_under_daemon"]

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


class WriteRoute:
    """The write route of one repository's knowledge folder."""

    def __init__(self, store: Store, *, ttl: float,
                 handlers: Mapping[str, Handler] | None = None) -> None:
        self.store = store
        self.ttl = ttl
        self.handlers: dict[str, Handler] = dict(handlers or {})

    def apply(self, changes: Sequence[Change], *, command: str, wait: float,
              run_id: str | None = None, ordinal: int | None = None) -> list[bool]:
        """Apply ``changes`` as one change set; per change, whether it wrote."""
        from memidex.write.inbox import encode_change

        def payload() -> dict[str, Any]:
            return {"changes": [encode_change(self.store, c) for c in changes]}

        job = Job(CHANGES, command, payload, changes=changes, run_id=run_id, ordinal=ordinal)
        return list(self.run(job, wait=wait).changed)

    def execute(self, session: WriterSession, job: Job) -> JobResult:
        """Run ``job`` inside ``session`` (the lease held)."""
        if job.kind == CHANGES:
            done = session.apply(job.changes, command=job.command, run_id=job.run_id,
                                 ordinal=job.ordinal)
            return JobResult(changed=tuple(done))
        handler = self.handlers.get(job.kind)
        if handler is None:
            raise LeaseError(f"no handler for {job.kind!r} jobs in this process")
        return JobResult(result=handler(session, job.local if job.local is not None
                                        else job.payload()))

    def run(self, job: Job, *, wait: float, no_wait: bool = False) -> JobResult:
        """Carry ``job`` out here or through the daemon (see the module doc)."""
        from memidex.write.inbox import Queue, apply_item, live_daemon
        from memidex.write.writer import writer_session

        store = self.store
        queue = Queue(store.queue_dir)
        wait = max(0.0, wait)
        deadline = time.monotonic() + wait
        item_id: str | None = None
        while True:
            daemon = live_daemon(store)
            if daemon is not None:
                if job.local_only:
                    refuse_under_daemon(store, job.command)
                if item_id is None:
                    item_id = queue.submit(job.command, job.payload(), kind=job.kind,
                                           local=job.local)
                if no_wait:
                    return JobResult(queued=item_id)
                outcome = queue.wait_for(item_id, deadline,
                                         lambda: live_daemon(store) is not None)
                if outcome is not None:
                    outcome.raise_for_failure()
                    return JobResult(result=dict(outcome.result), changed=outcome.changed)
                if time.monotonic() >= deadline:
                    rel = store.rel(queue.item_path(item_id))
                    raise LeaseHeldError(
                        f"the daemon (pid {daemon.pid}) did not apply the queued "
                        f"{job.command} within {wait:g}s; it stays queued in {rel}",
                        hint="the daemon applies it when it can; `memidex doctor` shows "
                        "the lease")
                continue  # the daemon went away: apply the queued item ourselves
            remaining = max(0.0, deadline - time.monotonic())
            try:
                with writer_session(store, wait=min(remaining, _SLICE),
                                    ttl=self.ttl) as session:
                    if item_id is None:
                        return self.execute(session, job)
                    apply_item(session, queue, item_id, self.handlers)
            except LeaseHeldError as exc:
                if time.monotonic() >= deadline:
                    raise _gave_up(store, exc, wait) from None
                continue
            outcome = queue.take_outcome(item_id)
            if outcome is None:
                raise LeaseError(f"queued {job.command} {item_id} disappeared without an "
                                 "outcome", hint="run the command again")
            outcome.raise_for_failure()
            return JobResult(result=dict(outcome.result), changed=outcome.changed)


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
